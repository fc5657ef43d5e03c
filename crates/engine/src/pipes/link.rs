//! The link of a scheduler instance: serialization at `bw` with FreeBSD's
//! credit and burst rules, on exact integer time.
//!
//! Credit is kept in "bit·ns per second" units: the link earns `bw` units per
//! nanosecond and a packet of `len` bytes costs `len × 8 × 10⁹`. Both sides are
//! integers, so a 1500-byte packet at 10 Mbit/s costs exactly 1.2 ms and the
//! sub-nanosecond remainder of one packet carries into the next instead of
//! drifting. FreeBSD does the same with ticks × bw; we just use ns.

use std::sync::Arc;

use crate::command::Profile;

use crate::impair::jitter::Jitter;

use crate::impair::overhead::Overhead;

use crate::impair::reorder::Reorder;

use crate::impair::slot::Slot;
use crate::impair::staged::{self, Models};

use crate::impair::trace::Trace;
use crate::time::{Nanos, NS_PER_SEC};

/// Units of credit per bit.
const PER_BIT: i128 = NS_PER_SEC as i128;

/// Link parameters as the data path needs them.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkParams {
    /// bit/s; 0 = unlimited.
    pub bw: u64,
    pub delay: Nanos,
    /// bytes.
    pub burst: u64,
    pub profile: Option<Arc<Profile>>,
    pub jitter: Option<Jitter>,
    pub reorder: Option<Reorder>,
    pub overhead: Option<Overhead>,
    pub slot: Option<Slot>,
    pub trace: Option<Arc<Trace>>,
    /// Registered impairments of the delay line (`stall`).
    pub staged: Option<Models>,
    /// When the trace started: its opportunities count from here.
    pub trace_start: Nanos,
    /// Jitter, reorder or a registered impairment: the delay line is more
    /// than a FIFO of equal waits.
    pub shaped_delay: bool,
    /// Slots or a trace: the link, not the scheduler, decides when a packet
    /// may start, so no packet is handed to it without queueing.
    pub gated: bool,
}

impl LinkParams {
    pub fn from_config(c: &crate::command::LinkConfig, trace_start: Nanos) -> Self {
        let bw = c.profile.as_ref().and_then(|p| p.bw).unwrap_or(c.bw);
        LinkParams {
            bw,
            delay: c.delay,
            burst: c.burst,
            profile: c.profile.clone().map(Arc::new),
            jitter: c.jitter.clone(),
            reorder: c.reorder,
            overhead: c.overhead,
            slot: c.slot,
            trace: c.trace.clone(),
            staged: staged::models(&c.staged),
            trace_start,
            shaped_delay: c.jitter.is_some() || c.reorder.is_some() || !c.staged.is_empty(),
            gated: c.slot.is_some() || c.trace.is_some(),
        }
    }

    /// Whether the instance needs its [`super::delayline::LinkFx`].
    pub fn needs_fx(&self) -> bool {
        self.shaped_delay || self.gated
    }

    /// Bytes the link bills for a packet of `len` bytes (`overhead`).
    #[inline]
    pub fn billed(&self, len: u32) -> u64 {
        match &self.overhead {
            None => u64::from(len),
            Some(o) => o.billed(len),
        }
    }

    /// Credit a packet of `len` bytes plus `extra` ns of profile occupancy costs.
    #[inline]
    pub fn cost(&self, len: u32, extra: Nanos) -> i128 {
        if self.bw == 0 {
            // FreeBSD: an unlimited link has no serialization, and a profile's
            // extra delay is expressed in bits at `bw`, so it vanishes too.
            return 0;
        }
        i128::from(self.billed(len)) * 8 * PER_BIT + i128::from(extra) * i128::from(self.bw)
    }
}

/// Per-instance link state (FreeBSD's `dn_sch_inst` credit fields).
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkState {
    /// May go negative while a packet is on the wire.
    pub credit: i128,
    /// When `credit` was last brought up to date.
    pub sched_time: Nanos,
    /// When the link last went idle (for `burst`).
    pub idle_time: Nanos,
    /// Waiting for credit: a link timer is pending.
    pub active: bool,
}

impl LinkState {
    /// A packet arrives at an inactive link: FreeBSD grants the idle link a
    /// fresh allowance of `min(burst, idle time × bw)`, once per idle period.
    pub fn wake(&mut self, now: Nanos, p: &LinkParams) {
        if self.idle_time < now {
            self.sched_time = now;
            self.credit = 0;
            if p.burst > 0 {
                let earned = i128::from(now - self.idle_time) * i128::from(p.bw);
                let cap = i128::from(p.burst) * 8 * PER_BIT;
                self.credit = earned.min(cap);
            }
        }
    }

    /// Brings credit up to `now`.
    #[inline]
    pub fn refill(&mut self, now: Nanos, p: &LinkParams) {
        if p.bw > 0 {
            self.credit += i128::from(now.saturating_sub(self.sched_time)) * i128::from(p.bw);
        } else {
            self.credit = 0;
        }
        self.sched_time = now;
    }

    /// The link's parameters change at `now` from `old` to `new`: the credit
    /// is brought up to `now` at the old rate, and a packet still on the
    /// wire keeps the end it was given (its exit time is already set), the
    /// new rate applying from then on.
    pub fn change_rate(&mut self, now: Nanos, old: &LinkParams, new: &LinkParams) {
        if !self.active || old.bw == new.bw {
            return;
        }
        self.refill(now, old);
        if self.credit < 0 && old.bw > 0 {
            let left = self.time_to_zero(old);
            self.credit = -(i128::from(left) * i128::from(new.bw.max(1)));
        }
    }

    /// Nanoseconds until credit is back to zero (credit < 0, bw > 0).
    #[inline]
    pub fn time_to_zero(&self, p: &LinkParams) -> Nanos {
        let bw = p.bw.max(1);
        // One packet's debt (len × 8 × 10⁹) fits in 64 bits up to 2 GB, and
        // a 64-bit division is several times cheaper than a 128-bit one.
        if let Ok(debt) = u64::try_from(-self.credit) {
            return debt.div_ceil(bw);
        }
        let bw = i128::from(bw);
        let t = (-self.credit + bw - 1) / bw;
        u64::try_from(t).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bit_time() {
        let p = LinkParams {
            bw: 10_000_000,
            ..Default::default()
        };
        let mut s = LinkState::default();
        s.wake(1, &p);
        s.credit -= p.cost(1500, 0);
        assert_eq!(s.time_to_zero(&p), 1_200_000);
        // 100 Gbit/s: a 128-byte packet takes 10.24 ns; the remainder carries.
        let fast = LinkParams {
            bw: 100_000_000_000,
            ..Default::default()
        };
        let mut s = LinkState::default();
        s.wake(1, &fast);
        s.credit -= fast.cost(128, 0);
        assert_eq!(s.time_to_zero(&fast), 11);
        s.refill(1 + 11, &fast);
        assert!(s.credit >= 0 && s.credit < i128::from(fast.bw));
    }

    #[test]
    fn burst_is_capped_by_idle_time_and_size() {
        let p = LinkParams {
            bw: 8_000,
            burst: 1000,
            ..Default::default()
        }; // 1000 B/s
        let mut s = LinkState {
            idle_time: 0,
            ..Default::default()
        };
        // Idle 0.5 s earns 500 bytes, below the 1000-byte cap.
        s.wake(NS_PER_SEC / 2, &p);
        assert_eq!(s.credit, 500 * 8 * PER_BIT);
        let mut s = LinkState {
            idle_time: 0,
            ..Default::default()
        };
        s.wake(10 * NS_PER_SEC, &p);
        assert_eq!(s.credit, 1000 * 8 * PER_BIT);
    }
}
