//! `run --workers N`: the live data plane on N threads, one engine replica
//! each, sharded as [`crate::workers`] describes (a packet is classified by
//! the worker that read it and queued by the worker that owns its pipe's
//! instance, across a lock-free ring).
//!
//! Worker 0, the leader, is the data plane the control socket talks to. A
//! request that changes or reads the configuration is carried out by all
//! workers between the same two packets ([`Worker::lead`]): each stops
//! reading and meets the others at a barrier, drains its rings into its
//! replica (what was classified before the change enters its pipe before
//! it), and meets them again; the leader applies the batch (refused as a
//! whole if it cannot be sharded: [`crate::workers::apply_checked`]), and
//! only if it took it do the others apply it; `show` and `stats` gather
//! every replica's view the same way and add them up. The pause lasts as
//! long as the slowest worker takes to reach the barrier (a turn: tens of
//! microseconds under load).
//!
//! A worker that stops (its port failed, say) breaks the workers' gate
//! as it goes: every wait at it returns at once from then on, the others
//! stop too, and the leader's failure says which worker stopped and why,
//! rather than the leader waiting for it forever.
//!
//! A worker asleep in its wait is woken for a handed packet by a byte on
//! its bell (a socket pair), written only while it says it sleeps: under
//! load the rings cost no system call.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use dummynet_engine::{Command, Direction, Nanos, PacketInfo, Snapshot, Verdict};

use super::Carrier;
use crate::dataplane::report::Report;
use crate::dataplane::request::HostView;
use crate::workers::{LinkCounters, Links, Routed, SharedLimits};

/// A worker's doorbell: the others write a byte while it sleeps.
struct Bell {
    asleep: AtomicBool,
    tx: UnixStream,
}

impl Bell {
    fn ring(&self, always: bool) {
        // Paired with the fence in `Worker::going_to_sleep`: either the
        // sleeper sees the packet in its ring, or this sees it asleep.
        fence(Ordering::SeqCst);
        if always || self.asleep.load(Ordering::Relaxed) {
            // A full socket buffer means a wake-up is already pending.
            let _ = (&self.tx).write(&[1]);
        }
    }
}

/// What every worker does at once.
#[derive(Clone)]
pub enum Job {
    Apply {
        commands: Vec<Command>,
        host: HostView,
    },
    Snapshot,
    Report,
}

/// A barrier for every worker that a worker leaving breaks: from then on
/// every wait returns false at once (`std::sync::Barrier` would wait for
/// the one that left, forever).
struct Gate {
    workers: usize,
    state: Mutex<GateState>,
    met: Condvar,
    /// Set with `state.broken`: read by every worker once a turn without
    /// taking the lock (a lock shared by all workers, taken each turn,
    /// would pass its cache line between their cores).
    is_broken: AtomicBool,
}

struct GateState {
    arrived: usize,
    /// Bumped each time all have met.
    round: u64,
    /// Why it was broken: the first worker to leave, and what it said.
    broken: Option<String>,
}

impl Gate {
    fn new(workers: usize) -> Gate {
        Gate {
            workers,
            state: Mutex::new(GateState {
                arrived: 0,
                round: 0,
                broken: None,
            }),
            met: Condvar::new(),
            is_broken: AtomicBool::new(false),
        }
    }

    /// Waits for every worker; false if the gate is broken meanwhile (or
    /// was already).
    fn wait(&self) -> bool {
        let mut s = lock(&self.state);
        if s.broken.is_some() {
            return false;
        }
        let round = s.round;
        s.arrived += 1;
        if s.arrived == self.workers {
            s.arrived = 0;
            s.round += 1;
            self.met.notify_all();
            return true;
        }
        while s.round == round && s.broken.is_none() {
            s = self
                .met
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        s.round != round
    }

    /// Breaks the gate, keeping the first reason given.
    fn break_with(&self, why: String) {
        let mut s = lock(&self.state);
        s.broken.get_or_insert(why);
        self.is_broken.store(true, Ordering::Release);
        self.met.notify_all();
    }

    fn broken(&self) -> Option<String> {
        if !self.is_broken.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.state).broken.clone()
    }
}

/// The gate broke: a worker stopped (the reason).
#[derive(Debug, Clone)]
pub struct Broken(pub String);

/// What a follower did for a [`Job`].
pub enum Done {
    Snapshot(Box<Snapshot>),
    Report(Box<Report>),
    Applied,
}

/// What the workers share to act together.
struct Coord {
    workers: usize,
    /// One zero for every worker's clock: a time handed over with a packet
    /// means the same on the other side.
    clock: super::clock::Clock,
    /// Bumped by the leader for each job.
    generation: AtomicU64,
    gate: Gate,
    job: Mutex<Option<Job>>,
    /// The leader's answer to an `Apply`: whether the others follow.
    accepted: AtomicBool,
    done: Mutex<Vec<Done>>,
    bells: Vec<Bell>,
    /// The `limit` count every replica shares ([`Worker::limits`]).
    limits: Arc<SharedLimits>,
}

/// One worker's part in the sharded data plane, kept by its
/// [`super::dataplane::DataPlane`].
pub struct Worker {
    pub links: Links<Carrier>,
    coord: Arc<Coord>,
    bell: UnixStream,
    seen: u64,
    /// The leader's: the followers' threads and their stop flag.
    followers: Vec<JoinHandle<Report>>,
    followers_stop: Option<Arc<AtomicBool>>,
}

/// Why the workers' shared parts could not be made.
#[derive(Debug, thiserror::Error)]
pub enum WorkersError {
    /// A worker's doorbell, a socket pair, could not be made or set
    /// non-blocking.
    #[error("socketpair: {source}")]
    Bell { source: std::io::Error },
}

/// The workers' shared parts, one [`Worker`] per worker in order (the
/// first is the leader), or why they could not be made.
pub fn workers(n: usize) -> Result<Vec<Worker>, WorkersError> {
    let bell = |source| WorkersError::Bell { source };
    let mut bells = Vec::with_capacity(n);
    let mut rx = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = UnixStream::pair().map_err(bell)?;
        for s in [&a, &b] {
            s.set_nonblocking(true).map_err(bell)?;
        }
        bells.push(Bell {
            asleep: AtomicBool::new(false),
            tx: b,
        });
        rx.push(a);
    }
    let coord = Arc::new(Coord {
        workers: n,
        clock: super::clock::Clock::new(),
        generation: AtomicU64::new(0),
        gate: Gate::new(n),
        job: Mutex::new(None),
        accepted: AtomicBool::new(false),
        done: Mutex::new(Vec::new()),
        bells,
        limits: Arc::default(),
    });
    Ok(crate::workers::mesh(n, crate::workers::RING_SLOTS)
        .into_iter()
        .zip(rx)
        .map(|(links, bell)| Worker {
            links,
            coord: coord.clone(),
            bell,
            seen: 0,
            followers: Vec::new(),
            followers_stop: None,
        })
        .collect())
}

impl Worker {
    pub fn index(&self) -> usize {
        self.links.index
    }

    /// The clock every worker reads (one zero for all).
    pub fn clock(&self) -> super::clock::Clock {
        self.coord.clock
    }

    /// The table every worker's replica counts `limit` states in: a key's
    /// N places are the workers' together.
    pub fn limits(&self) -> Arc<SharedLimits> {
        self.coord.limits.clone()
    }

    pub fn is_leader(&self) -> bool {
        self.links.index == 0
    }

    /// The leader keeps the followers' threads, to stop (with `stop`) and
    /// join them when it ends.
    pub fn adopt(&mut self, followers: Vec<JoinHandle<Report>>, stop: Arc<AtomicBool>) {
        self.followers = followers;
        self.followers_stop = Some(stop);
    }

    /// A packet read by this worker (its `in` pass: `dir` in), or one
    /// leaving a pipe here for its `out` pass, goes through the engine:
    /// here, or handed to the worker that owns its pipe, or (the `out`
    /// pass of a flow another worker reads, when the rules keep state)
    /// back to its reader ([`Links::out_pass`]). `Err(to)`: worker `to`
    /// has it now.
    #[inline]
    pub fn route(
        &mut self,
        engine: &mut dummynet_engine::Engine<Carrier>,
        now: Nanos,
        info: PacketInfo,
        mut payload: Carrier,
    ) -> Result<Verdict<Carrier>, usize> {
        let routed = match info.dir {
            Direction::In => {
                // Read here: the kernel's fanout reads this flow's frames,
                // both ways, on this worker.
                payload.reader = self.links.index as u16;
                self.links.input(engine, now, info, payload)
            }
            Direction::Out => {
                let reader = usize::from(payload.reader);
                self.links.out_pass(engine, now, info, payload, reader)
            }
        };
        match routed {
            Routed::Here(v) => Ok(v),
            Routed::Handed { to, .. } | Routed::Home { to } => Err(to),
        }
    }

    /// Wakes the workers handed packets since the last call, if they sleep.
    pub fn ring_bells(&mut self) {
        let handed_to = self.links.take_handed_to();
        if handed_to == 0 {
            return;
        }
        for (i, bell) in self.coord.bells.iter().enumerate() {
            if i != self.links.index && (i >= 64 || handed_to & (1 << i) != 0) {
                bell.ring(false);
            }
        }
    }

    /// The descriptor that wakes this worker: its bell.
    pub fn bell_fd(&self) -> BorrowedFd<'_> {
        self.bell.as_fd()
    }

    /// Before the wait: says it sleeps, then looks at its rings and for a
    /// job once more. False when it must not sleep (something came).
    pub fn going_to_sleep(&mut self) -> bool {
        let me = &self.coord.bells[self.links.index];
        me.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.links.waiting() > 0 || self.job_pending() {
            me.asleep.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// After the wait: awake, and the bell emptied.
    pub fn woke(&mut self) {
        self.coord.bells[self.links.index]
            .asleep
            .store(false, Ordering::Relaxed);
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.bell).read(&mut buf) {
            if n == 0 {
                break;
            }
        }
    }

    /// A follower: the leader has started a job this worker has not done.
    pub fn job_pending(&self) -> bool {
        !self.is_leader() && self.coord.generation.load(Ordering::Acquire) != self.seen
    }

    pub fn counters(&self) -> LinkCounters {
        self.links.counters
    }

    /// The leader starts `job`: the followers are told and woken, and
    /// all meet at the first barrier (none reads any more). The caller
    /// then drains its rings and calls [`Self::barrier`], twice (all
    /// drained, even of frames that came back for their `out` pass and
    /// went on to another pipe), does its part, [`Self::decide`]s, and [`Self::end`]s.
    pub fn begin(&mut self, job: Job) -> Result<(), Broken> {
        let c = &self.coord;
        *lock(&c.job) = Some(job);
        c.generation.fetch_add(1, Ordering::AcqRel);
        for bell in c.bells.iter().skip(1) {
            bell.ring(true);
        }
        self.meet()
    }

    /// Waits for every worker to get here.
    pub fn barrier(&self) -> Result<(), Broken> {
        self.meet()
    }

    /// All meet, or the reason the gate broke.
    fn meet(&self) -> Result<(), Broken> {
        if self.coord.gate.wait() {
            Ok(())
        } else {
            Err(Broken(self.broken().unwrap_or_default()))
        }
    }

    /// The leader has done its part; for an `Apply`, `accepted` says
    /// whether the followers apply the batch too. They do their part now.
    pub fn decide(&self, accepted: bool) -> Result<(), Broken> {
        self.coord.accepted.store(accepted, Ordering::Release);
        self.meet()
    }

    /// The leader waits for the followers' parts, and takes them.
    pub fn end(&mut self) -> Result<Vec<Done>, Broken> {
        let c = &self.coord;
        let met = self.meet();
        *lock(&c.job) = None;
        let done = std::mem::take(&mut *lock(&c.done));
        met.map(|()| done)
    }

    /// A follower joins the job the leader started (the first barrier)
    /// and gets it; it then drains its rings and calls [`Self::barrier`],
    /// twice, then [`Self::wait_decision`], does its part and [`Self::done`].
    pub fn join_job(&mut self) -> Result<Option<Job>, Broken> {
        self.seen = self.coord.generation.load(Ordering::Acquire);
        self.meet()?;
        Ok(lock(&self.coord.job).clone())
    }

    /// A follower waits for the leader's part: whether it accepted.
    pub fn wait_decision(&self) -> Result<bool, Broken> {
        self.meet()?;
        Ok(self.coord.accepted.load(Ordering::Acquire))
    }

    /// A follower's part is done; all resume.
    pub fn done(&self, d: Done) -> Result<(), Broken> {
        lock(&self.coord.done).push(d);
        self.meet()
    }

    /// Why the workers can no longer act together, once one has stopped:
    /// checked by every worker once a turn, which then stops too.
    pub fn broken(&self) -> Option<String> {
        self.coord.gate.broken()
    }

    /// This worker stops (`why`: its failure, if it failed): nobody waits
    /// for it any more. Also done when it is dropped.
    pub fn leave(&self, why: Option<&str>) {
        let me = self.links.index;
        self.coord.gate.break_with(match why {
            Some(why) => format!("data-plane worker {me} stopped: {why}"),
            None => format!("data-plane worker {me} stopped"),
        });
    }

    pub fn workers(&self) -> usize {
        self.coord.workers
    }

    /// The leader, ending: tells the followers to stop, wakes them, and
    /// gives back their threads to join.
    pub fn stop_followers(&mut self) -> Vec<JoinHandle<Report>> {
        if let Some(stop) = &self.followers_stop {
            stop.store(true, Ordering::Relaxed);
        }
        for bell in self.coord.bells.iter().skip(1) {
            bell.ring(true);
        }
        std::mem::take(&mut self.followers)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.leave(None);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Adds worker `o`'s counts to `r` (the leader's): packets, drops by
/// reason, per-pipe books, CPU and wake-ups, the engines' memory, and its
/// backends (named with the worker). Lateness reads as one system: the
/// histograms add up, and the percentiles are taken over every worker's
/// recent samples together (`lateness_recent`; without them, the worst
/// p99 of the two). The configuration's state (scheduled commands, the
/// instance limit) is the same on every replica: the leader's is kept.
pub fn absorb(r: &mut Report, o: Report) {
    // Each worker's may be "negative" (see `DataPlane::report`).
    r.arrived = r.arrived.wrapping_add(o.arrived);
    r.delivered = r.delivered.wrapping_add(o.delivered);
    r.passes += o.passes;
    r.dropped += o.dropped;
    r.inside += o.inside;
    r.marked += o.marked;
    r.duplicated += o.duplicated;
    r.duplicate_failed += o.duplicate_failed;
    r.corrupted += o.corrupted;
    for (name, n) in o.drops {
        match r.drops.iter_mut().find(|(k, _)| *k == name) {
            Some((_, m)) => *m += n,
            None => r.drops.push((name, n)),
        }
    }
    for (t, c) in o.targets {
        match r.targets.iter_mut().find(|(k, _)| *k == t) {
            Some((_, m)) => {
                m.delivered += c.delivered;
                m.delivered_bytes += c.delivered_bytes;
                for (a, b) in m.drops.iter_mut().zip(c.drops) {
                    *a += b;
                }
            }
            None => r.targets.push((t, c)),
        }
    }
    r.lateness.max_ns = r.lateness.max_ns.max(o.lateness.max_ns);
    r.lateness.samples += o.lateness.samples;
    r.lateness.early += o.lateness.early;
    if r.lateness_recent.is_empty() || o.lateness_recent.is_empty() {
        r.lateness.p99_ns = r.lateness.p99_ns.max(o.lateness.p99_ns);
        r.lateness.p50_ns = r.lateness.p50_ns.max(o.lateness.p50_ns);
        r.lateness.max_recent_ns = r.lateness.max_recent_ns.max(o.lateness.max_recent_ns);
        if r.lateness_recent.is_empty() {
            r.lateness_recent = o.lateness_recent;
        }
    } else {
        r.lateness_recent = merge_sorted(std::mem::take(&mut r.lateness_recent), o.lateness_recent);
        r.lateness.set_recent(&r.lateness_recent);
    }
    let mem = &mut r.memory;
    for (name, now, worst) in o.memory {
        match mem.iter_mut().find(|(k, _, _)| *k == name) {
            Some((_, n, w)) => {
                *n += now;
                *w = w.zip(worst).map(|(a, b)| a + b);
            }
            None => mem.push((name, now, worst)),
        }
    }
    r.memory_counts.0 += o.memory_counts.0;
    r.memory_counts.1 += o.memory_counts.1;
    let h = &mut r.lateness_histogram;
    if h.buckets.len() < o.lateness_histogram.buckets.len() {
        h.buckets.resize(o.lateness_histogram.buckets.len(), 0);
    }
    for (a, b) in h.buckets.iter_mut().zip(o.lateness_histogram.buckets) {
        *a += b;
    }
    h.sum_ns += o.lateness_histogram.sum_ns;
    r.cpu_ns += o.cpu_ns;
    for (a, b) in r.wakes.iter_mut().zip(o.wakes) {
        *a += b;
    }
    r.rests += o.rests;
    r.rest_ns += o.rest_ns;
    r.backends.extend(o.backends);
    if r.failure.is_none() {
        r.failure = o.failure;
    }
}

/// Two sorted lists as one, sorted.
fn merge_sorted(a: Vec<u64>, b: Vec<u64>) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        if x <= y {
            out.extend(a.next());
        } else {
            out.extend(b.next());
        }
    }
    out.extend(a);
    out.extend(b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::TargetCounts;
    use dummynet_engine::Target;

    /// A follower that stops, failed, never leaves the leader waiting:
    /// the leader's next job is refused at once, naming the worker and
    /// its failure, and so is every later one.
    #[test]
    fn a_stopped_worker_breaks_the_gate_instead_of_hanging_the_leader() {
        let mut parts = workers(3).unwrap().into_iter();
        let mut leader = parts.next().unwrap();
        let one = parts.next().unwrap();
        let mut two = parts.next().unwrap();
        // Worker 2 waits for a job on its own thread, as a follower does.
        let waiting = std::thread::spawn(move || {
            while !two.job_pending() {
                std::thread::yield_now();
            }
            two.join_job().map(|_| ()).map_err(|b| b.0)
        });
        one.leave(Some("port m-a went down"));
        drop(one);
        let why = "data-plane worker 1 stopped: port m-a went down";
        assert_eq!(leader.broken().as_deref(), Some(why));
        let refused = leader.begin(Job::Snapshot).unwrap_err();
        assert_eq!(refused.0, why);
        assert_eq!(waiting.join().unwrap(), Err(why.to_string()));
        assert!(leader.barrier().is_err() && leader.end().is_err());
    }

    /// All present, the gate opens round after round.
    #[test]
    fn the_gate_opens_when_all_have_met() {
        let mut parts = workers(2).unwrap().into_iter();
        let mut leader = parts.next().unwrap();
        let mut follower = parts.next().unwrap();
        let t = std::thread::spawn(move || {
            for _ in 0..3 {
                while !follower.job_pending() {
                    std::thread::yield_now();
                }
                assert!(matches!(follower.join_job(), Ok(Some(Job::Report))));
                follower.barrier().unwrap();
                assert!(follower.wait_decision().unwrap());
                follower.done(Done::Applied).unwrap();
            }
        });
        for round in 0..3 {
            leader.begin(Job::Report).unwrap();
            leader.barrier().unwrap();
            leader.decide(true).unwrap();
            assert_eq!(leader.end().unwrap().len(), 1);
            if round < 2 {
                // The follower has a round to go: it is still there.
                assert_eq!(leader.broken(), None);
            }
        }
        t.join().unwrap();
        // The follower's part was dropped with its thread: it has left.
        assert_eq!(
            leader.broken().as_deref(),
            Some("data-plane worker 1 stopped")
        );
    }

    #[test]
    fn reports_add_up_by_reason_and_by_pipe() {
        let mut a = Report {
            arrived: 10,
            delivered: 7,
            dropped: 2,
            inside: 1,
            drops: vec![("queue-full", 2)],
            targets: vec![(
                Target::Pipe(1),
                TargetCounts {
                    delivered: 7,
                    ..TargetCounts::default()
                },
            )],
            backends: vec![("worker 0: bridge".into(), Vec::new())],
            ..Report::default()
        };
        let b = Report {
            arrived: 5,
            delivered: 3,
            dropped: 2,
            drops: vec![("queue-full", 1), ("handoff-full", 1)],
            targets: vec![
                (
                    Target::Pipe(1),
                    TargetCounts {
                        delivered: 1,
                        ..TargetCounts::default()
                    },
                ),
                (
                    Target::Pipe(2),
                    TargetCounts {
                        delivered: 2,
                        ..TargetCounts::default()
                    },
                ),
            ],
            backends: vec![("worker 1: bridge".into(), Vec::new())],
            ..Report::default()
        };
        absorb(&mut a, b);
        assert_eq!(
            (a.arrived, a.delivered, a.dropped, a.inside),
            (15, 10, 4, 1)
        );
        assert_eq!(a.drops, vec![("queue-full", 3), ("handoff-full", 1)]);
        let pipe = |n| {
            a.targets
                .iter()
                .find(|(t, _)| *t == Target::Pipe(n))
                .map(|(_, c)| c.delivered)
        };
        assert_eq!((pipe(1), pipe(2)), (Some(8), Some(2)));
        assert_eq!(a.backends.len(), 2);
    }

    /// `stats` as one system: the workers' engines' memory adds up part by
    /// part, the lateness histograms add up, and the percentiles are those
    /// of every worker's recent samples pooled, not the leader's alone.
    #[test]
    fn memory_and_lateness_add_up_across_workers() {
        use crate::clock::{Lateness, LatenessHistogram};
        let report = |lates: &[u64], mem: Vec<(&'static str, u64, Option<u64>)>| {
            let mut l = Lateness::default();
            for &n in lates {
                l.record(1_000_000 + n, 1_000_000);
            }
            Report {
                lateness: l.summary(),
                lateness_histogram: l.histogram(),
                lateness_recent: l.recent_sorted(),
                memory: mem,
                memory_counts: (3, 2, 65536),
                ..Report::default()
            }
        };
        // The leader hands over on time; worker 1 is late by 40-49 us.
        let mut a = report(
            &[500; 60],
            vec![("queues", 1000, Some(5000)), ("states", 100, None)],
        );
        let late: Vec<u64> = (40_000..40_050).step_by(1).collect();
        let b = report(
            &late,
            vec![("queues", 3000, Some(5000)), ("tables", 64, Some(64))],
        );
        absorb(&mut a, b);
        let l = a.lateness;
        assert_eq!((l.samples, l.early), (110, 0));
        // 60 of 110 samples are 0.5 us: the median is one of them; the
        // p99 and the recent max are worker 1's.
        assert_eq!(l.p50_ns, 500);
        assert_eq!(l.p99_ns, 40_048);
        assert_eq!((l.max_recent_ns, l.max_ns), (40_049, 40_049));
        assert_eq!(a.lateness_recent.len(), 110);
        let LatenessHistogram { buckets, sum_ns } = &a.lateness_histogram;
        assert_eq!(buckets.iter().sum::<u64>(), 110);
        // 0.5 us: the first bucket (<= 1 us); 40 us: the one up to 50 us.
        assert_eq!((buckets[0], buckets[5]), (60, 50));
        assert_eq!(*sum_ns, 60 * 500 + late.iter().sum::<u64>());
        assert_eq!(
            a.memory,
            vec![
                ("queues", 4000, Some(10_000)),
                ("states", 100, None),
                ("tables", 64, Some(64))
            ]
        );
        assert_eq!(a.memory_counts, (6, 4, 65536));
    }
}
