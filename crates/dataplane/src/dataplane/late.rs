//! Reading arrivals late: at `timer` precision, arrivals that stay inside
//! long enough wait in the kernel until the next departure.

use dummynet_engine::Nanos;

use super::{DataPlane, Precision};

/// At [`Precision::Timer`], a backend's arrivals wait in the kernel when
/// every one stays at least this long inside ([`dummynet_engine::Engine::least_transit`]).
pub const LATE_MIN_TRANSIT: Nanos = 1_000_000;

/// A late read comes this long (or the timer's worst recent lateness, if
/// more) before a packet that arrived just after the previous read could
/// be due to leave.
pub const LATE_MARGIN: Nanos = 200_000;

/// Arrivals wait unread at most this long, however long IP packets stay
/// inside: frames that are not IP (ARP) cross at once.
pub const LATE_NON_IP: Nanos = 5_000_000;

/// Between late reads, at the rate the last read found, at most this share
/// of the kernel's room for unread arrivals fills.
pub(super) const LATE_ROOM_SHARE: u64 = 4;

/// What reading arrivals late needs to know, backend by backend: one whose
/// packets may leave at once is watched; the others' wait in the kernel.
#[derive(Debug, Default)]
pub(super) struct LateReads {
    /// Each backend slot's least transit: the least time every arrival it
    /// reads stays inside the engine; `Some(0)` when it cannot stamp its
    /// arrivals, `None` when it reads none (a vacant slot).
    pub(super) transits: Vec<Option<Nanos>>,
    /// Arrivals the backends' kernel buffers hold unread, at least.
    pub(super) room: usize,
    /// When the backends were last read, how long after the read before,
    /// what it found, and whether it stopped at a batch limit.
    pub(super) read_at: Nanos,
    pub(super) span: Nanos,
    pub(super) got: usize,
    pub(super) more: bool,
    /// The last wait left some backends' arrivals in the kernel.
    pub(super) active: Option<LatePlan>,
}

/// A wait that leaves some backends' arrivals in the kernel
/// ([`LateReads::next_read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LatePlan {
    /// Read them all by then.
    pub(super) until: Nanos,
    /// The least transit among the backends read late.
    pub(super) transit: Nanos,
    /// A backend whose transit is less is watched (read as packets come).
    pub(super) watch_below: Nanos,
}

impl LateReads {
    /// When to read next, before `deadline` (the next departure), if some
    /// backends' arrivals may wait until then: see
    /// [`DataPlane::late_until`]. `timer_worst` is the worst recent
    /// lateness of the timer. Pure, so it is tested on its own.
    pub(super) fn next_read(
        &self,
        deadline: Nanos,
        timer_worst: Option<Nanos>,
    ) -> Option<LatePlan> {
        // (Worked out at each configuration change: see `reconfigured`.)
        let margin = timer_worst.unwrap_or(0).max(LATE_MARGIN);
        if self.more {
            return None;
        }
        let watch_below = LATE_MIN_TRANSIT.max(2 * margin);
        let transit = self
            .transits
            .iter()
            .flatten()
            .copied()
            .filter(|&t| t >= watch_below)
            .min()?;
        let mut until = self
            .read_at
            .saturating_add((transit - margin).min(LATE_NON_IP));
        if self.got > 0 {
            let room = (self.room as u64 / LATE_ROOM_SHARE).max(1);
            let fill = self.span.saturating_mul(room) / self.got as u64;
            until = until.min(self.read_at.saturating_add(fill));
        }
        Some(LatePlan {
            until: deadline.min(until),
            transit,
            watch_below,
        })
    }

    /// Whether slot `i`'s ports are watched under `plan` (all of them
    /// without one).
    pub(super) fn watched(&self, i: usize, plan: Option<LatePlan>) -> bool {
        match (plan, self.transits.get(i)) {
            (None, _) => true,
            (Some(p), Some(Some(t))) => *t < p.watch_below,
            (Some(_), _) => false,
        }
    }
}

impl DataPlane {
    /// At [`Precision::Timer`], when to read arrivals next if they may wait
    /// in the kernel until then: the next departure, or earlier if a packet
    /// arriving just after the last read could be due before it (less
    /// [`LATE_MARGIN`]), or if the kernel's room for unread arrivals would
    /// fill a [`LATE_ROOM_SHARE`]th. `None` when they must be read as they
    /// come: nothing is inside (nothing to wake for anyway), the last read
    /// stopped at a batch limit, some backend cannot stamp its arrivals,
    /// or some may leave sooner than [`LATE_MIN_TRANSIT`].
    pub(super) fn late_until(&mut self, deadline: Option<Nanos>) -> Option<LatePlan> {
        if self.pacing.options.precision != Precision::Timer {
            return None;
        }
        self.late.next_read(deadline?, self.pacing.timer.worst())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Backends with these transits, last read at 100 ms (8 arrivals, 2 ms
    /// after the read before), with room for 4096 unread.
    fn late_reads(transits: Vec<Option<Nanos>>) -> LateReads {
        const MS: Nanos = 1_000_000;
        LateReads {
            transits,
            room: 4096,
            read_at: 100 * MS,
            span: 2 * MS,
            got: 8,
            more: false,
            active: None,
        }
    }

    /// When arrivals may wait in the kernel, and until when.
    #[test]
    fn arrivals_wait_in_the_kernel_only_while_no_departure_can_need_them() {
        const MS: Nanos = 1_000_000;
        let l = late_reads(vec![Some(4 * MS)]);
        let until = |l: &LateReads, deadline, worst| l.next_read(deadline, worst).map(|p| p.until);
        // The next departure, if it comes before a packet that arrived just
        // after the read could be due (less the margin)...
        assert_eq!(until(&l, 103 * MS, None), Some(103 * MS));
        assert_eq!(until(&l, 500 * MS, None), Some(104 * MS - LATE_MARGIN));
        // ...or the timer's worst lateness, if larger.
        assert_eq!(until(&l, 500 * MS, Some(MS)), Some(103 * MS));
        // A timer that bad leaves no room: read as they come.
        assert_eq!(until(&l, 500 * MS, Some(3 * MS)), None);
        // Pipes that let packets out sooner than LATE_MIN_TRANSIT: no.
        let short = LateReads {
            transits: vec![Some(LATE_MIN_TRANSIT - 1)],
            ..l
        };
        assert_eq!(until(&short, 103 * MS, None), None);
        // A read that stopped at its batch: more is waiting, read it now.
        let more = LateReads {
            more: true,
            transits: l.transits.clone(),
            ..l
        };
        assert_eq!(until(&more, 103 * MS, None), None);
        // 1024 frames in 2 ms: a quarter of 4096 slots fills in 2 ms.
        let busy = LateReads {
            got: 1024,
            transits: l.transits.clone(),
            ..l
        };
        assert_eq!(until(&busy, 500 * MS, None), Some(102 * MS));
        // A 1 s link: an ARP request, which crosses at once, still waits
        // no longer than LATE_NON_IP.
        let moon = LateReads {
            transits: vec![Some(1000 * MS)],
            ..l
        };
        assert_eq!(until(&moon, 900 * MS, None), Some(100 * MS + LATE_NON_IP));
    }

    /// Backend by backend: one whose packets may leave at once (or that
    /// cannot stamp its arrivals) is watched, and the others are still
    /// read late, by the least transit among them; a vacant slot is
    /// neither.
    #[test]
    fn a_backend_that_must_be_read_at_once_leaves_the_others_late() {
        const MS: Nanos = 1_000_000;
        let l = late_reads(vec![
            Some(0),
            Some(10 * MS),
            None,
            Some(4 * MS),
            Some(MS / 2),
        ]);
        let plan = l
            .next_read(500 * MS, None)
            .expect("some backends read late");
        assert_eq!(plan.transit, 4 * MS);
        assert_eq!(plan.until, 104 * MS - LATE_MARGIN);
        let watched: Vec<bool> = (0..5).map(|i| l.watched(i, Some(plan))).collect();
        assert_eq!(watched, [true, false, false, false, true]);
        // No plan: every backend is watched.
        assert!((0..5).all(|i| l.watched(i, None)));
        // Every backend short: no plan.
        let all_short = LateReads {
            transits: vec![Some(0), None, Some(MS / 2)],
            ..l
        };
        assert_eq!(all_short.next_read(500 * MS, None), None);
    }
}
