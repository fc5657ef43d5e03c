//! The observer's merge of several workers' records (`run --workers N`):
//! each data-plane worker sends its records in its own time order down its
//! own channel; the observer thread holds them here until no worker can
//! still send an earlier one (its floor, [`worker_floor`]), then writes
//! them in one order of (time, [`step`], worker), so the files and the
//! event stream read as one system. One worker needs none of this: its
//! records are written as they come ([`super::Worker::run`]).

use super::*;

/// A record's place among others of the same time, by the step of a
/// packet's way it is: arrival, into a pipe on the `in` pass, out of it
/// (forward), into a pipe on the `out` pass, gone (departure or drop).
/// Along one packet's way the time never goes back (a packet handed to
/// another worker enters its pipe at its classification time or later) and
/// the step always goes on, so ordering by (time, step) keeps every
/// packet's events in the order they happened, whichever workers made them.
pub(super) fn step(r: &Record) -> u8 {
    match (r.kind, r.dir) {
        (Kind::Arrival, _) => 1,
        (Kind::Enqueue, Direction::In) => 2,
        (Kind::Forward, _) => 3,
        (Kind::Enqueue, Direction::Out) => 4,
        (Kind::Departure | Kind::Drop, _) => 5,
    }
}

/// Worker `p`'s floor as the merge takes it at `now`: what it said
/// ([`Tap::floor`]), and, for a worker that keeps an old one because it
/// has nothing to do, more: while it sleeps with every port watched, `now`
/// less [`SLEEP_SLACK`] up to its next deadline; awake, `now` less
/// [`MERGE_WINDOW`] (or [`MERGE_HOLD_MAX`] if it reads late).
pub(super) fn worker_floor(p: &PlaneCounters, now: Nanos) -> Nanos {
    let floor = p.floor.load(Ordering::Acquire);
    let later = if p.asleep.load(Ordering::Acquire) {
        now.saturating_sub(SLEEP_SLACK)
            .min(p.sleep_until.load(Ordering::Relaxed))
    } else if p.reads_late.load(Ordering::Relaxed) {
        now.saturating_sub(MERGE_HOLD_MAX)
    } else {
        now.saturating_sub(MERGE_WINDOW)
    };
    floor.max(later)
}

/// A record waiting in the merge, with its frame's bytes if it has them,
/// or a change of the `--mm-log` pipe's trace (ordered by its time too).
pub(super) enum Item {
    Packet(Record, Option<(Vec<u8>, u32)>),
    Trace {
        at: Nanos,
        trace: Option<(Arc<Trace>, Nanos)>,
    },
}

/// One [`Item`] held by the merge, with its place: (time, [`step`]).
pub(super) struct Held {
    key: (Nanos, u8),
    /// The sweep of the channels that took it ([`Merge::sweeps`]).
    sweep: u64,
    item: Item,
}

/// The merge of several workers' records (`run --workers N`): one queue
/// per worker, each in order of (time, [`step`]) (a worker sends in time
/// order; one that did not would be put in its place), held until no
/// worker can send an earlier one, then written by taking the least of
/// the queues' heads, (time, step, worker): a few comparisons a record,
/// where a heap of all would move each record at every level.
#[derive(Default)]
pub(super) struct Merge {
    pub(super) queues: Vec<VecDeque<Held>>,
    /// Sweeps that emptied every channel. A record taken in sweep `k` is
    /// written only once sweep `k + 1` has ended: a packet's earlier event
    /// was sent (by whichever worker) before its later one, so by then it
    /// has been taken too, and the order puts it first.
    pub(super) sweeps: u64,
    /// The latest time written.
    pub(super) last: Nanos,
    /// Workers whose channel has closed (they stopped).
    pub(super) ended: Vec<bool>,
    /// The workers' floors at the last look.
    pub(super) floors: Vec<Nanos>,
    /// The data plane's clock, once the start has brought it.
    pub(super) clock: Option<Clock>,
}

impl Worker {
    /// The observer of several workers: each sweep empties every channel
    /// into the merge, and what is older than every worker's floor (or
    /// than [`MERGE_WINDOW`]) goes out in time order.
    pub(super) fn run_merged(mut self) {
        let n = self.rx.len();
        self.merge.ended = vec![false; n];
        self.merge.queues = (0..n).map(|_| VecDeque::new()).collect();
        let mut flushed = Instant::now();
        let mut dirty = false;
        loop {
            self.adopt();
            self.prune();
            // The floors before the channels: whatever a worker sends after
            // it set its floor is in its channel now or no older than it.
            let now = self.merge_now();
            let floors: Vec<Nanos> = self
                .shared
                .plane
                .iter()
                .map(|p| worker_floor(p, now))
                .collect();
            let mut got = 0usize;
            let mut complete = true;
            for w in 0..n {
                if self.merge.ended[w] {
                    continue;
                }
                let mut taken = 0usize;
                loop {
                    match self.rx[w].try_recv() {
                        Ok(msg) => {
                            self.take(w, msg);
                            taken += 1;
                            if taken >= SWEEP_MAX {
                                complete = false;
                                break;
                            }
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            self.merge.ended[w] = true;
                            break;
                        }
                    }
                }
                got += taken;
            }
            if complete {
                self.merge.sweeps += 1;
            }
            let ended = self.merge.ended.iter().all(|e| *e);
            let horizon = if ended {
                Nanos::MAX
            } else {
                self.horizon(&floors)
            };
            dirty |= self.emit(horizon, ended) > 0;
            if ended {
                break;
            }
            if dirty && flushed.elapsed() >= FLUSH_EVERY {
                self.flush();
                flushed = Instant::now();
                dirty = false;
            }
            if got == 0 {
                // The trace's opportunities before anything still held.
                let held = self.first().map_or(Nanos::MAX, |w| {
                    self.merge.queues[w].front().map_or(Nanos::MAX, |h| h.key.0)
                });
                let until = now.saturating_sub(MM_IDLE_MARGIN).min(horizon).min(held);
                self.mm(|mm, wall| mm.opportunities(until, wall));
                let idle = !self.shared.files && self.subscribers.is_empty();
                std::thread::sleep(if idle { IDLE_LONG_NAP } else { IDLE_NAP });
            }
        }
        let end = self.engine_now();
        self.mm(|mm, wall| mm.opportunities(end, wall));
        self.flush();
        self.shared.stopped.store(true, Ordering::Relaxed);
    }

    /// Worker `w`'s message: the start and names at once, records into
    /// the merge.
    fn take(&mut self, w: usize, msg: Msg) {
        let item = match msg {
            Msg::Packet(r) => Item::Packet(r, None),
            Msg::Frame(r, buf, len) => Item::Packet(r, Some((buf, len))),
            Msg::Trace { at, trace } => Item::Trace { at, trace },
            other => return self.handle(w, other),
        };
        let key = match &item {
            Item::Packet(r, _) => (r.t_ns, step(r)),
            Item::Trace { at, .. } => (*at, 0),
        };
        let held = Held {
            key,
            sweep: self.merge.sweeps,
            item,
        };
        let Some(q) = self.merge.queues.get_mut(w) else {
            return;
        };
        match q.back() {
            Some(last) if last.key > key => {
                // After those of its place already there.
                let at = q.partition_point(|h| h.key <= key);
                q.insert(at, held);
            }
            _ => q.push_back(held),
        }
    }

    /// The worker whose queue's head comes first, (time, step, worker).
    fn first(&self) -> Option<usize> {
        let heads = self.merge.queues.iter().enumerate();
        heads
            .filter_map(|(w, q)| q.front().map(|h| (h.key, w)))
            .min()
            .map(|(_, w)| w)
    }

    /// The time before which no worker will send a record: the least of
    /// the workers' floors ([`worker_floor`]), as they are now and as
    /// they were at the last look (a packet handed over just before that
    /// look may still be in its ring, and its record carries the time it
    /// was handed at); the workers that have stopped left out. Nothing
    /// before the start line.
    fn horizon(&mut self, floors: &[Nanos]) -> Nanos {
        let before = std::mem::replace(&mut self.merge.floors, floors.to_vec());
        if self.wall_ns == 0 {
            return 0;
        }
        floors
            .iter()
            .zip(before.iter().chain(std::iter::repeat(&0)))
            .zip(&self.merge.ended)
            .filter(|(_, ended)| !**ended)
            .map(|((now, then), _)| (*now).min(*then))
            .min()
            .unwrap_or(Nanos::MAX)
    }

    /// The data plane's clock now, for the merge: its own clock once the
    /// start has brought it, else from the wall clock.
    fn merge_now(&self) -> Nanos {
        match &self.merge.clock {
            Some(c) if self.wall_ns != 0 => c.now(),
            _ => self.engine_now(),
        }
    }

    /// Writes what is held from before `horizon` (all of it if `all`),
    /// in order; how many.
    fn emit(&mut self, horizon: Nanos, all: bool) -> usize {
        let mut n = 0;
        while let Some(w) = self.first() {
            let Some(top) = self.merge.queues[w].front() else {
                break;
            };
            if !all && (top.key.0 >= horizon || top.sweep + 2 > self.merge.sweeps) {
                break;
            }
            let Some(h) = self.merge.queues[w].pop_front() else {
                break;
            };
            let t = h.key.0;
            if t < self.merge.last {
                self.shared.out_of_order.fetch_add(1, Ordering::Relaxed);
            }
            self.merge.last = self.merge.last.max(t);
            match h.item {
                Item::Packet(r, None) => self.packet(w, &r, None),
                Item::Packet(r, Some((buf, len))) => {
                    self.packet(w, &r, Some((&buf, len)));
                    if let Some(spare) = self.spare.get(w) {
                        let _ = spare.try_send(buf);
                    }
                }
                Item::Trace { at, trace } => self.mm(|mm, wall| mm.retrace(at, trace, wall)),
            }
            n += 1;
        }
        n
    }
}
