//! `dummynet bench --clock`: how precisely can this machine release a
//! packet at its time? The floor under the data plane's release lateness,
//! measured with the data plane's own clock, wait and scheduling, and no
//! packets at all.
//!
//! Three figures:
//! - **interruptions**: a thread spinning on the clock notes every gap of
//!   more than [`GAP`] between two readings: time the CPU was taken away
//!   (timer ticks, interrupts, the hypervisor). A deadline that falls in
//!   such a gap is late by the rest of it, however the data plane waits.
//! - **wake, with spin**: the data plane's wait (sleep in the kernel, then
//!   spin for the last `spin`) for deadlines at spread-out phases, and how
//!   late it returned. This is what a departure sees before any work.
//! - **wake, timer alone**: the same without the spin, the kernel timer's
//!   own error (the figure the issue quotes for a timer thread under
//!   `SCHED_FIFO` with 1 ns of slack).

use std::fmt;
use std::time::Duration;

use dummynet_engine::Nanos;

use super::clock::{self, Clock, Lateness, LatenessSummary, Rest};
use super::dataplane::{DEFAULT_SPIN, RT_PRIORITY};

/// Readings further apart than this count as an interruption (a clock
/// reading takes about 20-40 ns; the loop's own jitter stays far below).
const GAP: Nanos = 2_000;

/// What [`measure`] found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Floor {
    pub scheduling: &'static str,
    /// Time spent spinning, in ns, and the interruptions seen meanwhile.
    pub spun_ns: u64,
    pub gaps: LatenessSummary,
    /// Sum of the gaps, in ns.
    pub gap_ns: u64,
    pub wake_spin: LatenessSummary,
    pub wake_timer: LatenessSummary,
}

impl Floor {
    /// Share of the spinning time the CPU was taken away.
    pub fn gap_share(&self) -> f64 {
        self.gap_ns as f64 / self.spun_ns.max(1) as f64
    }

    pub fn gaps_per_second(&self) -> f64 {
        self.gaps.samples as f64 / (self.spun_ns.max(1) as f64 / 1e9)
    }
}

impl fmt::Display for Floor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: u64| ns as f64 / 1000.0;
        let wake = |w: &LatenessSummary| {
            format!(
                "p50 {:.1} us, p99 {:.1} us, max {:.1} us over {} waits",
                us(w.p50_ns),
                us(w.p99_ns),
                us(w.max_ns),
                w.samples
            )
        };
        writeln!(f, "clock floor ({}, timer slack 1 ns)", self.scheduling)?;
        writeln!(
            f,
            "  interruptions while spinning: {:.0}/s, {:.2}% of the time; each p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            self.gaps_per_second(),
            100.0 * self.gap_share(),
            us(self.gaps.p50_ns),
            us(self.gaps.p99_ns),
            us(self.gaps.max_ns)
        )?;
        writeln!(
            f,
            "  wake, {} us spin:  {}",
            DEFAULT_SPIN / 1000,
            wake(&self.wake_spin)
        )?;
        write!(f, "  wake, timer alone: {}", wake(&self.wake_timer))
    }
}

/// Measures for about `duration` on a thread of its own, scheduled as the
/// data plane is (`SCHED_FIFO` when allowed, resting as it does).
pub fn measure(duration: Duration) -> Floor {
    let third = u64::try_from(duration.as_nanos() / 3).unwrap_or(u64::MAX);
    let worker = std::thread::spawn(move || {
        clock::tighten_timer_slack();
        let scheduling = if dummynet_io::rt::set_fifo(RT_PRIORITY).is_ok() {
            "SCHED_FIFO"
        } else if dummynet_io::rt::set_nice(-20).is_ok() {
            "nice -20"
        } else {
            "normal"
        };
        let clock = Clock::new();
        let (spun_ns, gaps, gap_ns) = interruptions(&clock, third);
        Floor {
            scheduling,
            spun_ns,
            gaps: gaps.summary(),
            gap_ns,
            wake_spin: wakes(&clock, third, DEFAULT_SPIN).summary(),
            wake_timer: wakes(&clock, third, 0).summary(),
        }
    });
    worker.join().unwrap_or_default()
}

/// Spins on the clock for `total` ns (in stretches that leave the share of
/// every [`Rest::WINDOW`] the data plane would leave to others, see
/// [`Rest`]) and records every gap between readings longer than [`GAP`].
fn interruptions(clock: &Clock, total: Nanos) -> (Nanos, Lateness, Nanos) {
    let mut gaps = Lateness::default();
    let (mut spun, mut gap_sum) = (0, 0);
    let rest = Rest::for_this_kernel().map_or(0, |r| r.per_window());
    let stretch = Rest::WINDOW - rest;
    while spun < total {
        let start = clock.now();
        let end = start + stretch;
        let mut last = start;
        while last < end {
            let t = clock.now();
            if t - last > GAP {
                gaps.record(t, last);
                gap_sum += t - last;
            }
            last = t;
        }
        spun += last - start;
        if rest > 0 {
            std::thread::sleep(Duration::from_nanos(rest));
        }
    }
    (spun, gaps, gap_sum)
}

/// Waits for deadlines 1 to 10 ms ahead, at phases spread evenly by a
/// golden-ratio step (so none lines up with a periodic tick), for `total`
/// ns, and records how late each wait returned.
fn wakes(clock: &Clock, total: Nanos, spin: Nanos) -> Lateness {
    let mut late = Lateness::default();
    let mut timer = clock::TimerWatch::default();
    let end = clock.now() + total;
    let mut k: u64 = 0;
    while clock.now() < end {
        k += 1;
        let ahead = 1_000_000 + k.wrapping_mul(2_654_435_761) % 9_000_000;
        let deadline = clock.now() + ahead;
        let _ = clock::wait(clock, &[], Some(deadline), spin, 0, &mut timer);
        late.record(clock.now(), deadline);
    }
    late
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_measurement_has_every_figure() {
        let f = measure(Duration::from_millis(300));
        // 100 ms of each: about 10 stretches of spinning, 9.3 ms each...
        assert!(f.spun_ns >= 90_000_000, "{f}");
        // ...and waits of 1 to 10 ms, so at least 10 of each kind.
        assert!(f.wake_spin.samples >= 10, "{f}");
        assert!(f.wake_timer.samples >= 10, "{f}");
        assert_eq!(f.wake_spin.early + f.wake_timer.early, 0, "{f}");
        assert!(f.gap_share() < 1.0, "{f}");
        assert!(f.to_string().contains("interruptions while spinning"));
    }
}
