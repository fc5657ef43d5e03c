//! How the data plane waits: the spin, the timer, the real-time budget.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use dummynet_engine::Nanos;

use super::DataPlane;
use crate::clock::{self, Pace, Rest, TimerWatch, Woke};

/// At [`Precision::Max`], the spin before a deadline: about 1 µs late at
/// the median (measured: the manual's Internals, the data-plane loop).
pub const DEFAULT_SPIN: Nanos = 300_000;

/// The spin of a `SCHED_FIFO` data plane behind on its idle time
/// ([`Pace::Behind`]), before its timer has said how late it wakes, and its floor.
pub const SHORT_SPIN: Nanos = 100_000;
pub const MIN_SHORT_SPIN: Nanos = 20_000;

/// `SCHED_FIFO` priority of the data-plane thread: above ordinary tasks,
/// below the kernel's own real-time threads (50 and up).
pub const RT_PRIORITY: i32 = 10;

/// After a turn that received frames, the data plane polls its ports this
/// long before it sleeps ([`clock::wait`]), so senders do not pay for its wake-ups.
pub const BUSY_POLL: Nanos = 50_000;

/// At [`Precision::Max`], the data plane wakes this long before a departure
/// to release it ahead of time ([`DataPlane::stage`]).
pub(super) const STAGE_LEAD: Nanos = 8_000;

/// In [`Precision::Timer`], the spin before the timer has said how late it
/// wakes, and the most the spin (its median overshoot) may become.
pub const TIMER_FIRST_SPIN: Nanos = 10_000;
pub const TIMER_MAX_SPIN: Nanos = 50_000;

/// In [`Precision::Timer`], a long sleep wakes earlier still: by
/// 1/[`TIMER_GAP_SHARE`] of it, up to [`TIMER_GAP_SPIN`].
pub const TIMER_GAP_SHARE: Nanos = 64;
pub const TIMER_GAP_SPIN: Nanos = 150_000;

/// At [`Precision::Timer`], how often the data plane checks that it keeps
/// the idle time its real-time budget asks for ([`Rest`]).
pub(super) const PACE_EVERY: Nanos = 1_000_000;

/// How exactly the data plane releases departures, and what it spends on
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Precision {
    /// Sleep on the kernel's timer up to each departure, aimed so that the
    /// median wake-up lands on time, and spin only what is left (at most
    /// 50 µs); no polling after arrivals, and arrivals that carry the
    /// kernel's receive time wait in the kernel until the next departure
    /// whenever every one stays inside at least 1 ms. Departures leave
    /// within the timer's jitter (tens of µs on a VM) for a small share of
    /// a core: the default.
    #[default]
    Timer,
    /// Spin the last 300 µs (or `--spin-us`) before every departure,
    /// release it ahead and hand it over on the nanosecond, and poll the
    /// ports a while after every arrival: about a microsecond late, at the
    /// cost of a core whenever departures are closer together than the
    /// spin.
    Max,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Timer => "timer",
            Precision::Max => "max",
        }
    }
}

/// How the data plane runs: its scheduling, its precision and, at
/// [`Precision::Max`], how long it spins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneOptions {
    pub priority: Priority,
    pub precision: Precision,
    /// At [`Precision::Max`], spin (instead of sleeping) this long before a
    /// deadline.
    pub spin: Nanos,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        PlaneOptions {
            priority: Priority::default(),
            precision: Precision::default(),
            spin: DEFAULT_SPIN,
        }
    }
}

/// How one wait of the data plane goes: polling the ports for `busy`
/// first, then sleeping until `spin` before `until`, then spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPlan {
    /// Wake for this time (a departure's, or ahead of it to stage it).
    pub until: Option<Nanos>,
    pub spin: Nanos,
    pub busy: Nanos,
}

/// The wait at `now` before `deadline` (the engine's next), from the data plane's
/// precision and spin, whether the last turn received frames, whether it
/// is behind on the idle time its real-time budget asks for, and how late
/// its timer has lately woken (`timer_median`, `timer_worst`: `None`
/// before the first timed sleep). Pure, so it is tested on its own.
pub fn plan_wait(
    o: &PlaneOptions,
    now: Nanos,
    deadline: Option<Nanos>,
    received: bool,
    behind: bool,
    timer_median: Option<Nanos>,
    timer_worst: Option<Nanos>,
) -> WaitPlan {
    match o.precision {
        Precision::Timer => {
            let median = timer_median.unwrap_or(TIMER_FIRST_SPIN).min(TIMER_MAX_SPIN);
            let gap = deadline.map_or(0, |d| d.saturating_sub(now));
            WaitPlan {
                until: deadline,
                spin: median.max((gap / TIMER_GAP_SHARE).min(TIMER_GAP_SPIN)),
                busy: 0,
            }
        }
        Precision::Max => {
            let until = deadline.map(|d| d.saturating_sub(STAGE_LEAD));
            if behind {
                let short = timer_worst.unwrap_or(SHORT_SPIN);
                WaitPlan {
                    until,
                    spin: short.clamp(MIN_SHORT_SPIN.min(o.spin), o.spin),
                    busy: 0,
                }
            } else {
                WaitPlan {
                    until,
                    spin: o.spin,
                    busy: if received { BUSY_POLL } else { 0 },
                }
            }
        }
    }
}

/// How the data-plane thread asks to be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Priority {
    /// `SCHED_FIFO`, falling back to nice -20 without the privilege; it
    /// keeps the kernel's share of idle time ([`clock::Rest`]). The default.
    #[default]
    Realtime,
    /// Nice -20 only.
    Nice,
}

/// How the data-plane thread runs and waits: its options, what it got from
/// the kernel, its real-time budget, its timer's record and its wake-ups.
pub(super) struct Pacing {
    pub(super) options: PlaneOptions,
    /// What the thread got: "SCHED_FIFO", "nice -20" or "normal".
    pub(super) scheduling: &'static str,
    pub(super) memory_locked: bool,
    /// The share of the CPU a `SCHED_FIFO` data plane leaves to others.
    pub(super) rest: Option<Rest>,
    pub(super) timer: TimerWatch,
    /// At [`Precision::Timer`], when the real-time budget is next looked at
    /// (a CPU clock read is a system call; once a millisecond is plenty).
    pub(super) next_pace: Nanos,
    /// The last turn received something: poll a while before sleeping.
    pub(super) busy: bool,
    /// Wake-ups: for input, for a deadline, and naps with neither.
    pub(super) wakes: [u64; 3],
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            options: PlaneOptions::default(),
            scheduling: "normal",
            memory_locked: false,
            rest: None,
            timer: TimerWatch::default(),
            next_pace: 0,
            busy: false,
            wakes: [0; 3],
        }
    }
}

impl Pacing {
    /// Asks for the thread's scheduling and locked memory, best effort:
    /// `stats` says what it got.
    pub(super) fn start(&mut self) {
        clock::tighten_timer_slack();
        // Needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK.
        self.memory_locked = dummynet_io::rt::lock_memory().is_ok();
        // Without CAP_SYS_NICE the thread keeps normal scheduling.
        self.scheduling = match self.options.priority {
            Priority::Realtime if dummynet_io::rt::set_fifo(RT_PRIORITY).is_ok() => {
                self.rest = Rest::for_this_kernel();
                "SCHED_FIFO"
            }
            _ if dummynet_io::rt::set_nice(-20).is_ok() => "nice -20",
            _ => "normal",
        };
    }
}

impl DataPlane {
    /// Waits for an arrival, a control request or the next departure, as
    /// [`plan_wait`] plans it. Returns that departure's time when it woke
    /// for it (at [`Precision::Max`], [`STAGE_LEAD`] ahead of time, for
    /// [`Self::stage`]).
    pub(super) fn wait(&mut self) -> Option<Nanos> {
        // Not `next_deadline`: a transmission ending before a delay line
        // moves a packet only inside the engine, which catches up on it at
        // its own time whenever it is next driven.
        let deadline = self.engine.next_output_deadline();
        let late = self.late_until(deadline);
        self.late.active = late;
        let sharded = self.worker.is_some();
        // The control socket first, so that its readiness is always among
        // the 64 bits `Woke::Ready` carries (with more than 63 backend
        // descriptors, a joined shell's ports, it would otherwise have to
        // be read on every wake-up).
        let mut fds: Vec<BorrowedFd<'_>> = Vec::new();
        if let Some(inbox) = &self.mailbox.inbox {
            fds.push(inbox.wake.as_fd());
        }
        let first_backend_fd = fds.len();
        for (i, b) in self.backends.slots.iter().enumerate() {
            if self.late.watched(i, late) {
                fds.extend(b.fds());
            }
        }
        let backend_end = fds.len();
        // A worker of several: tell the others what was handed to them,
        // and sleep only if no job or hand-off is waiting; its bell last.
        if let Some(w) = &mut self.worker {
            w.ring_bells();
            if !w.going_to_sleep() {
                return None;
            }
            fds.push(w.bell_fd());
        }
        let now = self.clock.now();
        let look = self.pacing.options.precision == Precision::Max || now >= self.pacing.next_pace;
        let pace = match self.pacing.rest.as_mut().filter(|_| look) {
            Some(rest) => match rest.pace(now, clock::thread_cpu()) {
                Pace::Rest(ns) => {
                    rest.take(ns);
                    // Whatever fell due meanwhile goes at the top of the loop.
                    return None;
                }
                pace => pace,
            },
            None => Pace::Fine,
        };
        let mut plan = plan_wait(
            &self.pacing.options,
            now,
            late.map(|p| p.until).or(deadline),
            self.pacing.busy,
            pace == Pace::Behind,
            self.pacing.timer.median(),
            self.pacing.timer.spin_needed(),
        );
        // A port holds frames it refused: try them again soon, whatever
        // else is due (a wake-up for this is not one for a departure).
        let retry = now.saturating_add(crate::held::RETRY);
        let retrying =
            self.backends.slots.iter().any(|b| b.holding()) && plan.until.is_none_or(|u| u > retry);
        if retrying {
            plan.until = Some(retry);
            plan.spin = plan.spin.min(crate::held::RETRY / 2);
        }
        if look {
            self.pacing.next_pace = now + PACE_EVERY;
        }
        // A worker of several, every port watched: whatever comes wakes it,
        // and the merge of the workers' records need not wait for it
        // meanwhile (said only here, around the wait itself: not while it
        // rests, ports unwatched).
        let tell = sharded && late.is_none();
        if tell {
            self.watch.sleeping(&self.engine);
        }
        let woke = clock::wait(
            &self.clock,
            &fds,
            plan.until,
            plan.spin,
            plan.busy,
            &mut self.pacing.timer,
        );
        if tell {
            self.watch.woke();
        }
        // The control socket, when there is one, is the first descriptor.
        if let (Woke::Ready { any, .. }, Some(_)) = (woke, &self.mailbox.inbox) {
            self.mailbox.ready |= any & 1 != 0;
        }
        // A backend's descriptor with an error polls ready at once until the
        // backend deals with it (the control socket's hang-up is seen by
        // reading it). Which ones is asked only then, and of every backend
        // descriptor: one beyond the first 64 left unreported would make
        // every later wait return at once, a spin until its backend left.
        let failed: Vec<RawFd> = match woke {
            Woke::Ready { failed: true, .. } => {
                let backend_fds = &fds[first_backend_fd..backend_end];
                clock::failed_fds(backend_fds)
                    .into_iter()
                    .filter_map(|i| backend_fds.get(i).map(|fd| fd.as_raw_fd()))
                    .collect()
            }
            _ => Vec::new(),
        };
        drop(fds);
        if let Some(w) = &mut self.worker {
            w.woke();
        }
        for fd in failed {
            for b in self.backends.slots.iter_mut() {
                b.fd_failed(fd);
            }
        }
        self.pacing.wakes[match woke {
            Woke::Ready { .. } => 0,
            Woke::Deadline => 1,
            Woke::Nap => 2,
        }] += 1;
        // Staged only at `max`: at `timer`, what arrived meanwhile runs
        // first, at its own times (the top of the loop).
        deadline.filter(|_| {
            woke == Woke::Deadline && !retrying && self.pacing.options.precision == Precision::Max
        })
    }

    /// Releases what falls due at `d` ahead of time (the engine's work and
    /// the `out` pass, slow after a sleep has let the caches go cold), spins
    /// until `d` without looking at the ports, and only then hands it to
    /// the kernel. Never early: the hand-over waits for the clock.
    pub(super) fn stage(&mut self, d: Nanos) {
        self.release(d);
        if self.departures.due.is_some() {
            clock::spin_until(&self.clock, d);
            self.flush_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pacing decisions, on made-up timer readings.
    #[test]
    fn the_wait_spins_only_what_the_timer_cannot_hit() {
        let timer = PlaneOptions::default();
        assert_eq!(timer.precision, Precision::Timer);
        let max = PlaneOptions {
            precision: Precision::Max,
            ..timer
        };
        // 100 µs ahead: short enough that the gap's share is below the median.
        const NOW: Nanos = 900_000;
        let d = Some(1_000_000);
        // Timer: wake for the departure itself, spin the timer's median
        // overshoot (so half the wake-ups land early and spin the rest),
        // never poll after arrivals.
        let p = plan_wait(&timer, NOW, d, true, false, Some(12_000), Some(80_000));
        assert_eq!((p.until, p.spin, p.busy), (d, 12_000, 0));
        // Before any reading, a small first guess; a bad timer is capped.
        assert_eq!(
            plan_wait(&timer, NOW, d, false, false, None, None).spin,
            TIMER_FIRST_SPIN
        );
        let p = plan_wait(&timer, NOW, d, false, false, Some(400_000), Some(900_000));
        assert_eq!(p.spin, TIMER_MAX_SPIN);
        // A long sleep spins a share of its length, up to TIMER_GAP_SPIN.
        let p = plan_wait(&timer, 0, Some(6_400_000), false, false, Some(12_000), None);
        assert_eq!(p.spin, 100_000);
        let p = plan_wait(
            &timer,
            0,
            Some(64_000_000),
            false,
            false,
            Some(12_000),
            None,
        );
        assert_eq!(p.spin, TIMER_GAP_SPIN);
        // Nothing due: sleep until woken.
        assert_eq!(
            plan_wait(&timer, NOW, None, false, false, None, None).until,
            None
        );
        // Max: wake STAGE_LEAD early, spin the whole spin, poll after arrivals.
        let p = plan_wait(&max, NOW, d, true, false, Some(12_000), Some(80_000));
        assert_eq!(
            (p.until, p.spin, p.busy),
            (Some(1_000_000 - STAGE_LEAD), DEFAULT_SPIN, BUSY_POLL)
        );
        assert_eq!(plan_wait(&max, NOW, d, false, false, None, None).busy, 0);
        // Max, behind on the real-time budget's idle time: a spin sized from
        // the worst recent wake-up, within [MIN_SHORT_SPIN, spin].
        let p = plan_wait(&max, NOW, d, true, true, Some(12_000), Some(80_000));
        assert_eq!((p.spin, p.busy), (80_000, 0));
        assert_eq!(
            plan_wait(&max, NOW, d, true, true, None, None).spin,
            SHORT_SPIN
        );
        let p = plan_wait(&max, NOW, d, true, true, None, Some(1_000));
        assert_eq!(p.spin, MIN_SHORT_SPIN);
    }
}
