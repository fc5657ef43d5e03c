//! Real time for the engine: a monotonic nanosecond clock, a wait that
//! sleeps with `ppoll` and spins through the last microseconds, and a record
//! of how late the data plane woke.
//!
//! The engine's `next_deadline()` is exact to the nanosecond; the kernel's
//! timers are not (timer slack, scheduling). So the wait asks the kernel to
//! wake us `spin` early and burns the rest on the CPU, polling the ports so
//! that arrivals during the spin are not held back.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use dummynet_engine::Nanos;
use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;

/// Nanoseconds since the data plane started, from `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    #[inline]
    pub fn now(&self) -> Nanos {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Why [`wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A descriptor is readable.
    Ready,
    /// The deadline passed.
    Deadline,
    /// The longest nap passed with neither (time to look at the stop flag).
    Nap,
}

/// Longest single sleep, so a stop request is seen promptly even when no
/// signal interrupts `ppoll`.
const MAX_NAP: Nanos = 100_000_000;

/// Waits until one of `fds` is readable or `deadline` (clock time) passes.
/// Sleeps in the kernel until `spin` before the deadline, then spins.
/// Before sleeping at all it polls the descriptors for up to `busy`: when
/// traffic is flowing, the next frame is microseconds away, and a frame
/// that finds the data plane awake spares its sender the cost of waking it
/// (on a veth, the sender pays for that wake-up inline).
///
/// Returns why it woke, and how long it slept in the kernel (the rest of
/// the time it was spinning).
pub fn wait(
    clock: &Clock,
    fds: &[BorrowedFd<'_>],
    deadline: Option<Nanos>,
    spin: Nanos,
    busy: Nanos,
) -> (Woke, Nanos) {
    let now = clock.now();
    let until = deadline.unwrap_or(u64::MAX);
    if until <= now {
        return (Woke::Deadline, 0);
    }
    // Built once: the spins below poll the same set many times.
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let busy_until = now.saturating_add(busy).min(until);
    if busy > 0 {
        loop {
            if poll_fds(&mut pfds, Some(0)) {
                return (Woke::Ready, 0);
            }
            let t = clock.now();
            if t >= until {
                return (Woke::Deadline, 0);
            }
            if t >= busy_until {
                break;
            }
            std::hint::spin_loop();
        }
    }
    // The busy poll may have run into the deadline.
    let now = clock.now();
    if now >= until {
        return (Woke::Deadline, 0);
    }
    let sleep = (until - now).saturating_sub(spin).min(MAX_NAP);
    let mut slept = 0;
    if sleep > 0 {
        let ready = poll_fds(&mut pfds, Some(sleep));
        let after = clock.now();
        slept = after.saturating_sub(now);
        if ready {
            return (Woke::Ready, slept);
        }
        if deadline.is_none() || after + spin < until {
            let woke = if after >= until {
                Woke::Deadline
            } else {
                Woke::Nap
            };
            return (woke, slept);
        }
    }
    // The last stretch: check the ports without sleeping until it is time.
    loop {
        if clock.now() >= until {
            return (Woke::Deadline, slept);
        }
        if poll_fds(&mut pfds, Some(0)) {
            return (Woke::Ready, slept);
        }
        std::hint::spin_loop();
    }
}

/// Spins until the clock reads `t`, looking at nothing else.
pub fn spin_until(clock: &Clock, t: Nanos) {
    while clock.now() < t {
        std::hint::spin_loop();
    }
}

/// Keeps a `SCHED_FIFO` data plane from taking a whole CPU.
///
/// A real-time thread that never sleeps is stopped by the kernel for about
/// 50 ms a second so that ordinary tasks run (RT throttling, or the fair
/// server of newer kernels), which would hold every queued packet for
/// 50 ms. On the 2-vCPU VMs this was measured on, a thread that sleeps 7%
/// of every 10 ms was never stopped, and one that slept 3% was. So the data
/// plane counts how long it slept in each 10 ms window, and when the window
/// is about to end short of [`Self::MIN_REST`] it sleeps the difference
/// (without watching its ports: the kernel's rings hold the arrivals).
/// A data plane with any idle time never notices; a saturated one trades
/// 7% of its time for never stalling.
#[derive(Debug, Clone, Default)]
pub struct Rest {
    window_start: Nanos,
    slept: Nanos,
    /// Forced rests taken, and their total length.
    pub rests: u64,
    pub rest_ns: u64,
}

impl Rest {
    pub const WINDOW: Nanos = 10_000_000;
    pub const MIN_REST: Nanos = 700_000;

    /// Time slept (in the kernel) since the last call.
    pub fn slept(&mut self, ns: Nanos) {
        self.slept = self.slept.saturating_add(ns);
    }

    /// How long to rest now, if at all.
    pub fn due(&mut self, now: Nanos) -> Option<Nanos> {
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed >= Self::WINDOW {
            self.window_start = now;
            self.slept = 0;
            return None;
        }
        let owed = Self::MIN_REST.saturating_sub(self.slept);
        (owed > 0 && Self::WINDOW - elapsed <= owed).then_some(owed)
    }

    /// Sleeps `ns` without watching anything, and counts it.
    pub fn take(&mut self, ns: Nanos) {
        std::thread::sleep(Duration::from_nanos(ns));
        self.rests += 1;
        self.rest_ns = self.rest_ns.saturating_add(ns);
        self.slept(ns);
    }
}

/// `ppoll` with a nanosecond timeout; true if any descriptor is readable.
/// Errors (EINTR from a signal, mostly) count as "nothing ready": the caller
/// looks at its flags and comes back.
fn poll_fds(pfds: &mut [PollFd<'_>], timeout: Option<Nanos>) -> bool {
    let ts = timeout.map(|ns| TimeSpec::from_duration(Duration::from_nanos(ns)));
    matches!(nix::poll::ppoll(pfds, ts, None), Ok(n) if n > 0)
}

/// Asks the kernel for 1 ns of timer slack on this thread (the default is
/// 50 µs, which would be most of our lateness budget).
pub fn tighten_timer_slack() -> bool {
    nix::sys::prctl::set_timerslack(1).is_ok()
}

/// Lateness of the data plane: for each hand-over of departures to the
/// kernel, how long after the earliest one's engine deadline it happened.
/// This is the emulator's own error on a delay or a bit time: the kernel
/// timer's wake-up error, the spin, and any work done in between.
#[derive(Debug, Clone, Default)]
pub struct Lateness {
    /// The most recent samples, in ns (a ring).
    ring: Vec<u64>,
    next: usize,
    count: u64,
    max: u64,
    early: u64,
}

const LATENESS_RING: usize = 1 << 16;

/// p50 / p99 / max over the recent samples, and the max since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct LatenessSummary {
    pub samples: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_recent_ns: u64,
    pub max_ns: u64,
    /// Hand-overs before their time: a bug if ever non-zero (they count as
    /// 0 late in the percentiles).
    pub early: u64,
}

impl Lateness {
    /// A hand-over at `now` of departures due from `due` on.
    pub fn record(&mut self, now: Nanos, due: Nanos) {
        if now < due {
            self.early += 1;
        }
        let late = now.saturating_sub(due);
        if self.ring.len() < LATENESS_RING {
            self.ring.push(late);
        } else {
            self.ring[self.next] = late;
        }
        self.next = (self.next + 1) % LATENESS_RING;
        self.count += 1;
        self.max = self.max.max(late);
    }

    pub fn summary(&self) -> LatenessSummary {
        let mut v = self.ring.clone();
        v.sort_unstable();
        let pct = |p: usize| {
            if v.is_empty() {
                0
            } else {
                v[((v.len() - 1) * p) / 100]
            }
        };
        LatenessSummary {
            samples: self.count,
            p50_ns: pct(50),
            p99_ns: pct(99),
            max_recent_ns: v.last().copied().unwrap_or(0),
            max_ns: self.max,
            early: self.early,
        }
    }
}

impl std::fmt::Display for LatenessSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |ns: u64| ns as f64 / 1000.0;
        write!(
            f,
            "release lateness over {} hand-overs: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            self.samples,
            us(self.p50_ns),
            us(self.p99_ns),
            us(self.max_ns)
        )?;
        if self.early > 0 {
            write!(f, ", {} early", self.early)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_poll_that_runs_into_the_deadline_wakes_for_it() {
        // Deadlines just past the end of the busy poll: the wait must notice
        // the deadline went by while polling (it once computed a negative
        // sleep there, a panic in debug builds and a 100 ms nap in release).
        let clock = Clock::new();
        for k in 0..2000u64 {
            let busy = 2_000;
            let until = clock.now() + busy + k % 2000;
            // (Past the busy poll it may also nap in the kernel first.)
            let (woke, _slept) = wait(&clock, &[], Some(until), 1_000, busy);
            assert_eq!(woke, Woke::Deadline);
            let now = clock.now();
            assert!(now >= until);
            // Woken for this deadline, not after a long nap.
            assert!(now - until < 50_000_000, "woke {} ns late", now - until);
        }
    }

    #[test]
    fn percentiles_of_known_samples() {
        let mut l = Lateness::default();
        for i in 1..=100 {
            l.record(5_000 + i * 1000, 5_000);
        }
        let s = l.summary();
        assert_eq!(s.samples, 100);
        assert_eq!(s.p50_ns, 50_000);
        assert_eq!(s.p99_ns, 99_000);
        assert_eq!(s.max_ns, 100_000);
        assert_eq!(s.early, 0);
        // Handed over before its time: counted apart, 0 late.
        l.record(4_000, 5_000);
        assert_eq!(l.summary().early, 1);
        assert!(l.summary().to_string().ends_with(", 1 early"));
    }

    #[test]
    fn rest_is_owed_only_at_the_end_of_a_busy_window() {
        let mut r = Rest::default();
        assert_eq!(r.due(0), None);
        // Busy, but early in the window: nothing yet.
        assert_eq!(r.due(5_000_000), None);
        // 9.5 ms into the window with no sleep: owe the whole rest.
        assert_eq!(r.due(9_500_000), Some(Rest::MIN_REST));
        // Having slept 0.5 ms, owe the remaining 0.2 ms only near the end.
        r.slept(500_000);
        assert_eq!(r.due(9_700_000), None);
        assert_eq!(r.due(9_800_000), Some(200_000));
        // A new window starts clean.
        assert_eq!(r.due(10_000_001), None);
        r.slept(Rest::MIN_REST);
        assert_eq!(r.due(19_999_999), None);
    }

    #[test]
    fn the_ring_keeps_the_recent_samples_and_the_all_time_max() {
        let mut l = Lateness::default();
        l.record(1_000_000, 0);
        for _ in 0..LATENESS_RING {
            l.record(5, 0);
        }
        let s = l.summary();
        assert_eq!(s.max_recent_ns, 5);
        assert_eq!(s.max_ns, 1_000_000);
    }
}
