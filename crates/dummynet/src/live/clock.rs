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
pub fn wait(clock: &Clock, fds: &[BorrowedFd<'_>], deadline: Option<Nanos>, spin: Nanos) -> Woke {
    let now = clock.now();
    let until = deadline.unwrap_or(u64::MAX);
    if until <= now {
        return Woke::Deadline;
    }
    // Built once: the spin below polls the same set many times.
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let sleep = (until - now).saturating_sub(spin).min(MAX_NAP);
    if sleep > 0 {
        if poll_fds(&mut pfds, Some(sleep)) {
            return Woke::Ready;
        }
        if deadline.is_none() || clock.now() + spin < until {
            return if clock.now() >= until {
                Woke::Deadline
            } else {
                Woke::Nap
            };
        }
    }
    // The last stretch: check the ports without sleeping until it is time.
    loop {
        if clock.now() >= until {
            return Woke::Deadline;
        }
        if poll_fds(&mut pfds, Some(0)) {
            return Woke::Ready;
        }
        std::hint::spin_loop();
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
}

impl Lateness {
    pub fn record(&mut self, late: Nanos) {
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
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let mut l = Lateness::default();
        for i in 1..=100 {
            l.record(i * 1000);
        }
        let s = l.summary();
        assert_eq!(s.samples, 100);
        assert_eq!(s.p50_ns, 50_000);
        assert_eq!(s.p99_ns, 99_000);
        assert_eq!(s.max_ns, 100_000);
    }

    #[test]
    fn the_ring_keeps_the_recent_samples_and_the_all_time_max() {
        let mut l = Lateness::default();
        l.record(1_000_000);
        for _ in 0..LATENESS_RING {
            l.record(5);
        }
        let s = l.summary();
        assert_eq!(s.max_recent_ns, 5);
        assert_eq!(s.max_ns, 1_000_000);
    }
}
