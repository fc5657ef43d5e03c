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
//! A worker asleep in its wait is woken for a handed packet by a byte on
//! its bell (a socket pair), written only while it says it sleeps: under
//! load the rings cost no system call.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;

use dummynet_engine::{Command, Snapshot};

use super::dataplane::{HostView, Report};
use super::Carrier;
use crate::workers::{LinkCounters, Links};

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
    barrier: Barrier,
    job: Mutex<Option<Job>>,
    /// The leader's answer to an `Apply`: whether the others follow.
    accepted: AtomicBool,
    done: Mutex<Vec<Done>>,
    bells: Vec<Bell>,
}

/// One worker's part in the sharded data plane, kept by its
/// [`super::dataplane::DataPlane`].
pub struct Worker {
    pub links: Links<Carrier>,
    coord: Arc<Coord>,
    bell: UnixStream,
    seen: u64,
    /// Peers handed a packet since their bells were last looked at (bit
    /// per worker; beyond 64 workers, every bell is looked at).
    handed_to: u64,
    /// The leader's: the followers' threads and their stop flag.
    followers: Vec<JoinHandle<Report>>,
    followers_stop: Option<Arc<AtomicBool>>,
}

/// The workers' shared parts, one [`Worker`] per worker in order (the
/// first is the leader), or why they could not be made.
pub fn workers(n: usize) -> Result<Vec<Worker>, String> {
    let mut bells = Vec::with_capacity(n);
    let mut rx = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        for s in [&a, &b] {
            s.set_nonblocking(true)
                .map_err(|e| format!("socketpair: {e}"))?;
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
        barrier: Barrier::new(n),
        job: Mutex::new(None),
        accepted: AtomicBool::new(false),
        done: Mutex::new(Vec::new()),
        bells,
    });
    Ok(crate::workers::mesh(n, crate::workers::RING_SLOTS)
        .into_iter()
        .zip(rx)
        .map(|(links, bell)| Worker {
            links,
            coord: coord.clone(),
            bell,
            seen: 0,
            handed_to: 0,
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

    pub fn is_leader(&self) -> bool {
        self.links.index == 0
    }

    /// The leader keeps the followers' threads, to stop (with `stop`) and
    /// join them when it ends.
    pub fn adopt(&mut self, followers: Vec<JoinHandle<Report>>, stop: Arc<AtomicBool>) {
        self.followers = followers;
        self.followers_stop = Some(stop);
    }

    /// A packet went into worker `to`'s ring.
    #[inline]
    pub fn handed(&mut self, to: usize) {
        self.handed_to |= 1u64.checked_shl(to as u32).unwrap_or(u64::MAX);
    }

    /// Wakes the workers handed packets since the last call, if they sleep.
    pub fn ring_bells(&mut self) {
        if self.handed_to == 0 {
            return;
        }
        for (i, bell) in self.coord.bells.iter().enumerate() {
            if i != self.links.index && (i >= 64 || self.handed_to & (1 << i) != 0) {
                bell.ring(false);
            }
        }
        self.handed_to = 0;
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
    /// then drains its rings, calls [`Self::barrier`] (all drained), does
    /// its part, [`Self::decide`]s, and [`Self::end`]s.
    pub fn begin(&mut self, job: Job) {
        let c = &self.coord;
        *lock(&c.job) = Some(job);
        c.generation.fetch_add(1, Ordering::AcqRel);
        for bell in c.bells.iter().skip(1) {
            bell.ring(true);
        }
        c.barrier.wait();
    }

    /// Waits for every worker to get here.
    pub fn barrier(&self) {
        self.coord.barrier.wait();
    }

    /// The leader has done its part; for an `Apply`, `accepted` says
    /// whether the followers apply the batch too. They do their part now.
    pub fn decide(&self, accepted: bool) {
        self.coord.accepted.store(accepted, Ordering::Release);
        self.coord.barrier.wait();
    }

    /// The leader waits for the followers' parts, and takes them.
    pub fn end(&mut self) -> Vec<Done> {
        let c = &self.coord;
        c.barrier.wait();
        *lock(&c.job) = None;
        std::mem::take(&mut *lock(&c.done))
    }

    /// A follower joins the job the leader started (the first barrier)
    /// and gets it; it then drains its rings, calls [`Self::barrier`],
    /// [`Self::wait_decision`], does its part and [`Self::done`].
    pub fn join_job(&mut self) -> Option<Job> {
        self.seen = self.coord.generation.load(Ordering::Acquire);
        self.coord.barrier.wait();
        lock(&self.coord.job).clone()
    }

    /// A follower waits for the leader's part: whether it accepted.
    pub fn wait_decision(&self) -> bool {
        self.coord.barrier.wait();
        self.coord.accepted.load(Ordering::Acquire)
    }

    /// A follower's part is done; all resume.
    pub fn done(&self, d: Done) {
        lock(&self.coord.done).push(d);
        self.coord.barrier.wait();
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Adds worker `o`'s counts to `r` (the leader's): packets, drops by
/// reason, per-pipe books, CPU and wake-ups, and its backends (named with
/// the worker). Lateness stays the leader's, with the worst p99 and max of
/// all.
pub fn absorb(r: &mut Report, o: Report) {
    r.arrived += o.arrived;
    r.delivered += o.delivered;
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
    r.lateness.p99_ns = r.lateness.p99_ns.max(o.lateness.p99_ns);
    r.lateness.max_ns = r.lateness.max_ns.max(o.lateness.max_ns);
    r.lateness.samples += o.lateness.samples;
    r.lateness.early += o.lateness.early;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::dataplane::TargetCounts;
    use dummynet_engine::Target;

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
}
