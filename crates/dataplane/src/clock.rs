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

use dummynet_engine::percentile::nearest_rank;
use dummynet_engine::Nanos;
use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;

/// Nanoseconds since the data plane started, from `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    #[inline]
    pub fn now(&self) -> Nanos {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// `CLOCK_REALTIME` and this clock read together, to map the kernel's
    /// receive stamps (which are on `CLOCK_REALTIME`) onto this clock. Read
    /// anew for each batch: the two clocks are slewed alike, but the
    /// wall clock can be stepped.
    pub fn realtime(&self) -> Realtime {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Realtime {
            wall,
            clock: self.now(),
        }
    }
}

/// A `CLOCK_REALTIME` reading (ns since the epoch) and this clock's time
/// at that moment ([`Clock::realtime`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Realtime {
    pub wall: u64,
    pub clock: Nanos,
}

impl Realtime {
    /// The clock time of a `CLOCK_REALTIME` stamp (0 for one before the
    /// clock started).
    pub fn to_clock(self, stamp_ns: u64) -> Nanos {
        if stamp_ns >= self.wall {
            self.clock.saturating_add(stamp_ns - self.wall)
        } else {
            self.clock.saturating_sub(self.wall - stamp_ns)
        }
    }

    /// The engine time of an arrival stamped `stamp_ns` on `CLOCK_REALTIME`
    /// and read now, when the engine has run up to `engine_now`: its
    /// mapped stamp, but never after now and never before what the engine
    /// already ran. A wall clock stepped between the stamp and this
    /// reading (by NTP, by hand) can thus only move an arrival within that
    /// span, by at most how long it waited to be read; departures, timers
    /// and everything else run on `CLOCK_MONOTONIC` alone.
    pub fn arrival(self, stamp_ns: u64, engine_now: Nanos) -> Nanos {
        self.to_clock(stamp_ns).min(self.clock).max(engine_now)
    }
}

/// Why [`wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Some descriptors are ready.
    Ready {
        /// Readable, or with an error: anything to look at. Bit `i` for
        /// `fds[i]`, the first 64 only (a caller that must know exactly
        /// puts that descriptor among them).
        any: u64,
        /// Some descriptor, at any position, has an error or hung up
        /// (`POLLERR`, `POLLHUP`, `POLLNVAL`), which `poll` reports at once,
        /// every time, until the owner clears it or stops watching the
        /// descriptor: [`failed_fds`] says which.
        failed: bool,
    },
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
/// Returns why it woke. (Not how long it slept: a `ppoll` that finds a
/// descriptor ready returns at once, yet millions of those add up to
/// seconds of wall time that were all CPU. [`thread_cpu`] says how busy the
/// thread really was.)
pub fn wait(
    clock: &Clock,
    fds: &[BorrowedFd<'_>],
    deadline: Option<Nanos>,
    spin: Nanos,
    busy: Nanos,
    timer: &mut TimerWatch,
) -> Woke {
    let now = clock.now();
    let until = deadline.unwrap_or(u64::MAX);
    if until <= now {
        return Woke::Deadline;
    }
    // Built once: the spins below poll the same set many times.
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let busy_until = now.saturating_add(busy).min(until);
    if busy > 0 {
        loop {
            if let Some(ready) = poll_fds(&mut pfds, Some(0)) {
                return ready;
            }
            let t = clock.now();
            if t >= until {
                return Woke::Deadline;
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
        return Woke::Deadline;
    }
    let sleep = (until - now).saturating_sub(spin).min(MAX_NAP);
    if sleep > 0 {
        let ready = poll_fds(&mut pfds, Some(sleep));
        let after = clock.now();
        if let Some(ready) = ready {
            return ready;
        }
        timer.record(after.saturating_sub(now + sleep));
        if deadline.is_none() || after + spin < until {
            let woke = if after >= until {
                Woke::Deadline
            } else {
                Woke::Nap
            };
            return woke;
        }
    }
    // The last stretch: check the ports without sleeping until it is time.
    loop {
        if clock.now() >= until {
            return Woke::Deadline;
        }
        if let Some(ready) = poll_fds(&mut pfds, Some(0)) {
            return ready;
        }
        std::hint::spin_loop();
    }
}

/// How late the kernel's timer has woken this thread lately: the overshoots
/// of its last [`Self::KEPT`] timed sleeps that ran to their end. On a VM
/// this moves with the neighbours (a p50 of 0.2 µs one hour, 50 µs the
/// next, on the same machine), so a spin sized from it beats a constant.
#[derive(Debug, Clone, Default)]
pub struct TimerWatch {
    recent: [Nanos; Self::KEPT],
    next: usize,
    seen: usize,
    /// The median of `recent`, worked out as each one is recorded (the
    /// data plane asks for it before every wait).
    median: Option<Nanos>,
}

impl TimerWatch {
    pub const KEPT: usize = 32;
    /// Added to the worst recent overshoot.
    pub const MARGIN: Nanos = 10_000;

    pub fn record(&mut self, overshoot: Nanos) {
        self.recent[self.next] = overshoot;
        self.next = (self.next + 1) % Self::KEPT;
        self.seen = self.seen.saturating_add(1);
        let n = self.seen.min(Self::KEPT);
        let mut sorted = self.recent;
        let sorted = &mut sorted[..n];
        sorted.sort_unstable();
        self.median = nearest_rank(sorted, 50);
    }

    /// The median of the recent overshoots; `None` before the first.
    pub fn median(&self) -> Option<Nanos> {
        self.median
    }

    /// A spin that would have covered every recent wake-up, with
    /// [`Self::MARGIN`]; `None` before the first.
    pub fn spin_needed(&self) -> Option<Nanos> {
        Some(self.worst()? + Self::MARGIN)
    }

    /// The worst recent overshoot; `None` before the first.
    pub fn worst(&self) -> Option<Nanos> {
        let n = self.seen.min(Self::KEPT);
        self.recent[..n].iter().max().copied()
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
/// The kernel lets real-time threads take only `sched_rt_runtime_us` of
/// every `sched_rt_period_us` (950 ms of 1 s by default) and stops them for
/// the rest of the period once they have had it: a data plane that spins
/// without a break is stopped for 50 ms once a second, holding every queued
/// packet that long. (Kernels without RT group scheduling do much the same
/// through the fair server.) Measured on the 2-vCPU VMs this runs on: a
/// `SCHED_FIFO` thread that never sleeps is stopped 50 ms a second, one that
/// sleeps 3% of every 10 ms is stopped 20 ms a second, one that sleeps 7% is
/// never stopped.
///
/// So the data plane keeps its idle time, measured as wall time minus its
/// own CPU time (which is what the kernel's budget counts), at the kernel's
/// share plus [`Self::MARGIN_PPM`] in every [`Self::WINDOW`]:
/// - while it is behind that pace it waits with a short spin
///   ([`Pace::Behind`]), so that gaps between departures, which a long
///   spin would burn, are slept instead. This costs a little lateness on a
///   few departures and no forced stops.
/// - only when the window is about to end short of its share anyway, with
///   no gap to sleep in (a flood), it sleeps the difference without
///   watching its ports ([`Pace::Rest`]): the kernel's rings hold the
///   arrivals meanwhile.
///
/// With `sched_rt_runtime_us` at -1 (no limit: a core given to the data
/// plane), there is nothing to keep ([`Self::for_this_kernel`] is `None`).
/// (A kernel whose fair server is its only limit still stops a thread
/// that starves ordinary tasks on its CPU; leave the default there.)
#[derive(Debug, Clone)]
pub struct Rest {
    /// Idle share to keep, in parts per million.
    share_ppm: u64,
    window_start: Nanos,
    cpu_start: Nanos,
    /// Forced rests taken, and their total length.
    pub rests: u64,
    pub rest_ns: u64,
}

/// What [`Rest::pace`] asks of the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// On pace: wait as usual.
    Fine,
    /// Behind on idle time: sleep through gaps (a short spin).
    Behind,
    /// Sleep this long now.
    Rest(Nanos),
}

impl Rest {
    pub const WINDOW: Nanos = 10_000_000;
    /// Kept on top of the kernel's share: the budget is counted per CPU and
    /// period, not per window, and a rest ends a little late.
    pub const MARGIN_PPM: u64 = 20_000;

    /// Keeps `share_ppm` of every window idle.
    pub fn with_share(share_ppm: u64) -> Rest {
        Rest {
            share_ppm: share_ppm.min(500_000),
            window_start: 0,
            cpu_start: 0,
            rests: 0,
            rest_ns: 0,
        }
    }

    /// The share this kernel's real-time budget asks for, from
    /// `/proc/sys/kernel/sched_rt_{runtime,period}_us`; `None` when the
    /// budget is off. A kernel that does not say gets the default budget's
    /// 5% (plus the margin).
    pub fn for_this_kernel() -> Option<Rest> {
        let read = |name: &str| -> Option<i64> {
            std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        Self::for_budget(read("sched_rt_runtime_us"), read("sched_rt_period_us"))
    }

    fn for_budget(runtime_us: Option<i64>, period_us: Option<i64>) -> Option<Rest> {
        let idle_ppm = match (runtime_us, period_us) {
            (Some(r), _) if r < 0 => return None,
            (Some(r), Some(p)) if p > 0 && r <= p => {
                let (r, p) = (r as u64, p as u64);
                (p - r) * 1_000_000 / p
            }
            _ => 50_000,
        };
        Some(Self::with_share(idle_ppm + Self::MARGIN_PPM))
    }

    /// Idle time the window asks for.
    pub fn per_window(&self) -> Nanos {
        Self::WINDOW * self.share_ppm / 1_000_000
    }

    /// Where the data plane stands at wall time `now`, having used `cpu` ns
    /// of CPU (its thread's CPU clock) since it started.
    pub fn pace(&mut self, now: Nanos, cpu: Nanos) -> Pace {
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed >= Self::WINDOW {
            self.window_start = now;
            self.cpu_start = cpu;
            return Pace::Fine;
        }
        let idle = elapsed.saturating_sub(cpu.saturating_sub(self.cpu_start));
        let owed = self.per_window().saturating_sub(idle);
        if owed == 0 {
            Pace::Fine
        } else if Self::WINDOW - elapsed <= owed {
            Pace::Rest(owed)
        } else if idle * 1_000_000 < elapsed * self.share_ppm {
            Pace::Behind
        } else {
            Pace::Fine
        }
    }

    /// Sleeps `ns` without watching anything, and counts it.
    pub fn take(&mut self, ns: Nanos) {
        std::thread::sleep(Duration::from_nanos(ns));
        self.rests += 1;
        self.rest_ns = self.rest_ns.saturating_add(ns);
    }
}

/// CPU time this thread has used, in ns (0 if the kernel will not say).
pub fn thread_cpu() -> Nanos {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .and_then(|t| u64::try_from(Duration::from(t).as_nanos()).ok())
        .unwrap_or(0)
}

/// `ppoll` with a nanosecond timeout: which descriptors are ready (bit
/// `i` for `pfds[i]`) as a [`Woke::Ready`], `None` if none. Errors (EINTR
/// from a signal, mostly) count as "nothing ready": the caller looks at
/// its flags and comes back.
fn poll_fds(pfds: &mut [PollFd<'_>], timeout: Option<Nanos>) -> Option<Woke> {
    let ts = timeout.map(|ns| TimeSpec::from_duration(Duration::from_nanos(ns)));
    match nix::poll::ppoll(pfds, ts, None) {
        Ok(n) if n > 0 => {
            let (mut any, mut failed) = (0u64, false);
            // Every descriptor is looked at for trouble, not only the first
            // 64: one failed beyond them and never reported would keep
            // every later poll returning at once (a spin).
            for (i, p) in pfds.iter().enumerate() {
                let r = p.revents().unwrap_or(PollFlags::empty());
                if i < 64 && !r.is_empty() {
                    any |= 1 << i;
                }
                failed |= r.intersects(TROUBLE);
            }
            Some(Woke::Ready { any, failed })
        }
        _ => None,
    }
}

/// What `poll` reports, at once and every time, on a descriptor whose
/// owner must deal with it.
const TROUBLE: PollFlags = PollFlags::POLLERR
    .union(PollFlags::POLLHUP)
    .union(PollFlags::POLLNVAL);

/// The positions in `fds` of the descriptors with an error or hung up
/// (after a [`wait`] that said `failed`): one more `poll` that does not
/// wait, so the wait itself keeps no list. Rare: a port whose interface
/// went down, a peer that hung up.
pub fn failed_fds(fds: &[BorrowedFd<'_>]) -> Vec<usize> {
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let now = Some(TimeSpec::from_duration(Duration::ZERO));
    if !matches!(nix::poll::ppoll(&mut pfds, now, None), Ok(n) if n > 0) {
        return Vec::new();
    }
    pfds.iter()
        .enumerate()
        .filter(|(_, p)| p.revents().is_some_and(|r| r.intersects(TROUBLE)))
        .map(|(i, _)| i)
        .collect()
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
    /// Hand-overs by how late, in the fixed buckets of
    /// [`LATENESS_BUCKETS_NS`] (the last one: later than all of them), and
    /// the sum of every lateness: a histogram that `/metrics` exports
    /// whole, where the ring keeps only the recent samples.
    buckets: [u64; LATENESS_BUCKETS_NS.len() + 1],
    sum_ns: u64,
}

const LATENESS_RING: usize = 1 << 16;

/// Upper bounds (ns) of the lateness histogram's buckets, 1-2-5 per decade
/// from 1 µs to 100 ms: a few compares per hand-over on the data plane.
pub const LATENESS_BUCKETS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// Every hand-over since the start, by bucket ([`LATENESS_BUCKETS_NS`],
/// then the overflow), and the sum of their lateness.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct LatenessHistogram {
    pub buckets: Vec<u64>,
    pub sum_ns: u64,
}

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
        let bucket = LATENESS_BUCKETS_NS
            .iter()
            .position(|&le| late <= le)
            .unwrap_or(LATENESS_BUCKETS_NS.len());
        self.buckets[bucket] += 1;
        self.sum_ns = self.sum_ns.saturating_add(late);
    }

    pub fn histogram(&self) -> LatenessHistogram {
        LatenessHistogram {
            buckets: self.buckets.to_vec(),
            sum_ns: self.sum_ns,
        }
    }

    pub fn summary(&self) -> LatenessSummary {
        let mut s = LatenessSummary {
            samples: self.count,
            max_ns: self.max,
            early: self.early,
            ..LatenessSummary::default()
        };
        s.set_recent(&self.recent_sorted());
        s
    }

    /// The recent samples, sorted: what [`Self::summary`]'s percentiles
    /// are taken over (a sharded data plane's workers pool theirs).
    pub fn recent_sorted(&self) -> Vec<u64> {
        let mut v = self.ring.clone();
        v.sort_unstable();
        v
    }
}

impl LatenessSummary {
    /// Its p50, p99 and recent max, over `sorted` recent samples.
    pub fn set_recent(&mut self, sorted: &[u64]) {
        let pct = |p| nearest_rank(sorted, p).unwrap_or(0);
        self.p50_ns = pct(50);
        self.p99_ns = pct(99);
        self.max_recent_ns = sorted.last().copied().unwrap_or(0);
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
    fn receive_stamps_map_onto_the_clock() {
        let r = Realtime {
            wall: 1_764_028_800_000_000_000,
            clock: 5_000_000,
        };
        assert_eq!(r.to_clock(r.wall), 5_000_000);
        assert_eq!(r.to_clock(r.wall - 1_234), 5_000_000 - 1_234);
        assert_eq!(r.to_clock(r.wall + 99), 5_000_099);
        // From before the clock started (or a wall clock stepped back).
        assert_eq!(r.to_clock(r.wall - 6_000_000), 0);
        assert_eq!(r.to_clock(0), 0);
        // Read for real, the wall clock and the clock move together: a
        // stamp taken 5 ms later maps to the clock 5 ms later.
        let clock = Clock::new();
        let before = clock.realtime();
        std::thread::sleep(Duration::from_millis(5));
        let after = clock.realtime();
        let mapped = before.to_clock(after.wall);
        assert!(
            mapped.abs_diff(after.clock) < 1_000_000,
            "{mapped} vs {after:?}"
        );
    }

    /// The clock jumping. The engine's time is `Clock::now`, an `Instant`
    /// (`CLOCK_MONOTONIC`, which no one can step: NTP only slews it), so
    /// departures and timers cannot jump. The wall clock enters in one
    /// place: the kernel stamps received frames on `CLOCK_REALTIME`, and
    /// `Realtime::arrival` maps a stamp onto the engine's time. Stepping
    /// the system clock is not possible on a shared test machine, so this
    /// steps it by construction: a stamp taken before a step of an hour
    /// (or years) either way and read after it lands between what the
    /// engine already ran and now: never in the future, never back in time.
    #[test]
    fn a_wall_clock_step_cannot_move_an_arrival_out_of_its_span() {
        let engine_now = 4_000_000; // ran up to 4 ms
        let clock = 5_000_000; // read at 5 ms
        let wall = 1_764_028_800_000_000_000;
        let hour = 3_600_000_000_000;
        for step in [hour, 30 * 24 * hour, wall / 2] {
            // Read after the step; the frame arrived 300 us before that
            // reading, on the wall clock before the step.
            let stamp = wall - 300_000;
            for stepped_wall in [wall + step, wall - step] {
                let read = Realtime {
                    wall: stepped_wall,
                    clock,
                };
                let at = read.arrival(stamp, engine_now);
                assert!(
                    (engine_now..=clock).contains(&at),
                    "a step of {step} ns put an arrival at {at}"
                );
            }
        }
        // Without a step, the stamp is kept exactly.
        let read = Realtime { wall, clock };
        assert_eq!(read.arrival(wall - 300_000, engine_now), 4_700_000);
        // A stamp from the future (a wall clock stepped back between the
        // reading and the stamp) is now, not later.
        assert_eq!(read.arrival(wall + hour, engine_now), clock);
        // The engine never goes back, even for an arrival stamped before it.
        assert_eq!(read.arrival(0, engine_now), engine_now);
    }

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
            let woke = wait(
                &clock,
                &[],
                Some(until),
                1_000,
                busy,
                &mut TimerWatch::default(),
            );
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
        // The histogram has them all: 1..=100 µs late, and the early one
        // as 0, by the 1-2-5 bounds (a bound is inclusive).
        let h = l.histogram();
        assert_eq!(h.buckets.len(), LATENESS_BUCKETS_NS.len() + 1);
        assert_eq!(&h.buckets[..8], &[2, 1, 3, 5, 10, 30, 50, 0]);
        assert_eq!(h.buckets.iter().sum::<u64>(), 101);
        assert_eq!(h.sum_ns, (1..=100).map(|i| i * 1000).sum::<u64>());
        l.record(1_000_000_000, 0);
        assert_eq!(l.histogram().buckets.last(), Some(&1));
        assert!(l.summary().to_string().ends_with(", 1 early"));
    }

    #[test]
    fn the_timer_watch_covers_the_worst_recent_wake_up() {
        let mut t = TimerWatch::default();
        assert_eq!(t.spin_needed(), None);
        t.record(40_000);
        t.record(5_000);
        assert_eq!(t.spin_needed(), Some(50_000));
        // A slow wake-up is remembered for KEPT sleeps, then forgotten.
        for _ in 2..TimerWatch::KEPT {
            t.record(1_000);
        }
        assert_eq!(t.spin_needed(), Some(50_000));
        t.record(1_000);
        assert_eq!(t.spin_needed(), Some(15_000));
        t.record(1_000);
        assert_eq!(t.spin_needed(), Some(11_000));
    }

    /// A readable descriptor and one whose peer hung up: both wake the
    /// wait, and only the second is reported as failed.
    #[test]
    fn a_wait_tells_readable_from_failed_descriptors() {
        use std::io::Write;
        use std::os::fd::AsFd;
        use std::os::unix::net::UnixStream;
        let clock = Clock::new();
        let (readable, mut writer) = UnixStream::pair().unwrap();
        let (hung_up, peer) = UnixStream::pair().unwrap();
        writer.write_all(b"x").unwrap();
        drop(peer);
        let fds = [readable.as_fd(), hung_up.as_fd()];
        let until = clock.now() + 1_000_000_000;
        let woke = wait(&clock, &fds, Some(until), 0, 0, &mut TimerWatch::default());
        assert_eq!(
            woke,
            Woke::Ready {
                any: 0b11,
                failed: true
            }
        );
        assert_eq!(failed_fds(&fds), [1]);
        // Nothing failed: nothing reported failed.
        let woke = wait(
            &clock,
            &fds[..1],
            Some(until),
            0,
            0,
            &mut TimerWatch::default(),
        );
        assert_eq!(
            woke,
            Woke::Ready {
                any: 1,
                failed: false
            }
        );
        assert!(failed_fds(&fds[..1]).is_empty());
    }

    /// A descriptor that failed beyond the first 64 is reported too (it
    /// used to be missed, and the data plane spun on it).
    #[test]
    fn a_failed_descriptor_beyond_the_first_64_is_reported() {
        use std::os::fd::AsFd;
        use std::os::unix::net::UnixStream;
        let clock = Clock::new();
        let quiet: Vec<(UnixStream, UnixStream)> =
            (0..70).map(|_| UnixStream::pair().unwrap()).collect();
        let (hung_up, peer) = UnixStream::pair().unwrap();
        drop(peer);
        let mut fds: Vec<BorrowedFd<'_>> = quiet.iter().map(|(a, _)| a.as_fd()).collect();
        fds.push(hung_up.as_fd());
        let until = clock.now() + 1_000_000_000;
        let woke = wait(&clock, &fds, Some(until), 0, 0, &mut TimerWatch::default());
        assert_eq!(
            woke,
            Woke::Ready {
                any: 0,
                failed: true
            }
        );
        assert_eq!(failed_fds(&fds), [70]);
    }

    #[test]
    fn a_timed_wait_records_its_overshoot() {
        let clock = Clock::new();
        let mut t = TimerWatch::default();
        // No spin: the whole wait is one timed sleep.
        let until = clock.now() + 200_000;
        assert_eq!(wait(&clock, &[], Some(until), 0, 0, &mut t), Woke::Deadline);
        let late = clock.now() - until;
        let needed = t.spin_needed().expect("one sleep recorded");
        assert!(needed >= TimerWatch::MARGIN && needed <= late + TimerWatch::MARGIN);
    }

    #[test]
    fn the_share_follows_the_kernel_budget() {
        let share = |r, p| Rest::for_budget(r, p).map(|r| r.per_window());
        // 950 ms of 1 s: 5% + 2% of 10 ms.
        assert_eq!(share(Some(950_000), Some(1_000_000)), Some(700_000));
        assert_eq!(share(Some(900_000), Some(1_000_000)), Some(1_200_000));
        // No budget, nothing to keep.
        assert_eq!(share(Some(-1), Some(1_000_000)), None);
        // Unreadable or nonsense: the default budget.
        assert_eq!(share(None, None), Some(700_000));
        assert_eq!(share(Some(2_000_000), Some(1_000_000)), Some(700_000));
    }

    #[test]
    fn a_busy_window_is_paced_then_rested() {
        let mut r = Rest::with_share(70_000);
        assert_eq!(r.pace(0, 0), Pace::Fine);
        // 2 ms, 1 ms of it idle: ahead of 7%.
        assert_eq!(r.pace(2_000_000, 1_000_000), Pace::Fine);
        // 6 ms, of which still 1 ms idle but the 0.7 ms was had: fine to the end.
        assert_eq!(r.pace(6_000_000, 5_000_000), Pace::Fine);
        assert_eq!(r.pace(9_999_999, 8_999_999), Pace::Fine);
        // A new window, busy from the start: behind at once...
        assert_eq!(r.pace(10_000_000, 9_000_000), Pace::Fine);
        assert_eq!(r.pace(11_000_000, 10_000_000), Pace::Behind);
        // ...back on pace after a sleep of 0.1 ms in 1.2 ms...
        assert_eq!(r.pace(11_200_000, 10_100_000), Pace::Fine);
        // ...and short of its 0.7 ms near the end: rest the rest.
        assert_eq!(r.pace(19_000_000, 17_900_000), Pace::Behind);
        assert_eq!(r.pace(19_400_000, 18_300_000), Pace::Rest(600_000));
        // The window after starts clean.
        assert_eq!(r.pace(20_100_000, 18_400_000), Pace::Fine);
        assert_eq!(r.pace(20_200_000, 18_450_000), Pace::Fine);
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

    #[test]
    fn timer_watch_median_and_worst() {
        let mut w = TimerWatch::default();
        assert_eq!((w.median(), w.spin_needed()), (None, None));
        for x in [5, 50, 7, 9, 6] {
            w.record(x * 1000);
        }
        assert_eq!(w.median(), Some(7_000));
        assert_eq!(w.spin_needed(), Some(50_000 + TimerWatch::MARGIN));
        // Only the last KEPT count.
        for _ in 0..TimerWatch::KEPT {
            w.record(1_000);
        }
        assert_eq!(w.median(), Some(1_000));
    }
}
