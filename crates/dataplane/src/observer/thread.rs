//! The observer thread: its state ([`Worker`]) and its loop, which takes
//! what the data plane's channels hold every few milliseconds, one
//! worker's records as they come, several workers' through the merge
//! ([`super::merge`]), and looks for subscribers joining and leaving.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dummynet_engine::{IfaceId, Nanos};

use super::merge::{step, worker_floor, Held, Item, Merge};
use super::record::Msg;
use super::shared::Shared;
use super::subscribe::Subscriber;
use super::writers::Writers;
use crate::events::Event;

/// Messages taken from one worker's channel in one sweep at most.
const SWEEP_MAX: usize = 1 << 16;

/// How long the observer sleeps when the channel is empty.
pub(super) const IDLE_NAP: Duration = Duration::from_millis(2);

/// ... and when it has no files and no subscribers (a daemon that keeps an
/// observer for an HTTP event stream nobody watches yet).
const IDLE_LONG_NAP: Duration = Duration::from_millis(20);

/// Buffered output is written out at least this often, so that a file
/// someone follows (`tail -f`) is at most this far behind.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// While no record comes, the `--mm-log` trace's opportunities are logged
/// up to this long before now: a record of that time would have been
/// handled already, so the log stays in time order.
const MM_IDLE_MARGIN: Nanos = 100_000_000;

/// The observer thread's state.
pub(super) struct Worker {
    /// Each data-plane worker's channel, and the way back for its frame
    /// buffers, in worker order.
    pub(super) rx: Vec<Receiver<Msg>>,
    pub(super) spare: Vec<SyncSender<Vec<u8>>>,
    pub(super) shared: Arc<Shared>,
    pub(super) writers: Writers,
    /// Interfaces' names by worker (each names its replica's).
    pub(super) names: HashMap<(usize, IfaceId), String>,
    pub(super) subscribers: Vec<Subscriber>,
    pub(super) wall_ns: u64,
    /// A write failed: files are no longer written.
    pub(super) failed: bool,
    /// Several workers' records on their way to the files, in time order.
    pub(super) merge: Merge,
}

impl Worker {
    pub(super) fn run(mut self) {
        if self.rx.len() > 1 {
            return self.run_merged();
        }
        let mut flushed = Instant::now();
        let mut dirty = false;
        loop {
            self.adopt();
            self.prune();
            let mut got = 0usize;
            let mut ended = false;
            loop {
                match self.rx[0].try_recv() {
                    Ok(msg) => {
                        self.handle(0, msg);
                        got += 1;
                        // Look for new subscribers now and then under load.
                        if got >= 4096 {
                            break;
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        ended = true;
                        break;
                    }
                }
            }
            dirty |= got > 0;
            if ended {
                break;
            }
            if dirty && flushed.elapsed() >= FLUSH_EVERY {
                self.flush();
                flushed = Instant::now();
                dirty = false;
            }
            if got == 0 {
                // The trace's opportunities while no packet comes: those
                // older than any record that may still be on its way.
                let until = self.engine_now().saturating_sub(MM_IDLE_MARGIN);
                self.mm(|mm, wall| mm.opportunities(until, wall));
                // Never blocks on the channel: a receiver asleep in it
                // would make each `try_send` of the data plane a wake-up.
                // With nothing to write and nobody listening, the data plane
                // sends nothing: look for subscribers now and then only.
                let idle = !self.shared.files && self.subscribers.is_empty();
                std::thread::sleep(if idle { IDLE_LONG_NAP } else { IDLE_NAP });
            }
        }
        // The data plane has stopped: its trace's opportunities until now.
        let end = self.engine_now();
        self.mm(|mm, wall| mm.opportunities(end, wall));
        self.flush();
        self.shared.stopped.store(true, Ordering::Relaxed);
        // The subscribers' channels close as they are dropped here: each
        // gets what it has, then Disconnected.
    }

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

    /// Takes up the subscribers that joined, each first told the start.
    fn adopt(&mut self) {
        let joined: Vec<Subscriber> = match self.shared.joining.try_lock() {
            Ok(mut j) if !j.is_empty() => std::mem::take(&mut *j),
            _ => return,
        };
        for s in joined {
            if self.wall_ns != 0 {
                let _ = s.tx.try_send(Event::Start {
                    t_ns: 0,
                    wall_ns: self.wall_ns,
                });
            }
            self.subscribers.push(s);
        }
    }

    /// Forgets the subscribers whose [`Subscription`] was dropped.
    fn prune(&mut self) {
        let before = self.subscribers.len();
        self.subscribers
            .retain(|s| !s.state.gone.load(Ordering::Relaxed));
        let left = before - self.subscribers.len();
        if left > 0 {
            self.shared.subscribers.fetch_sub(left, Ordering::Relaxed);
        }
    }

    /// The data plane's clock now, from the wall clock (0 before the start).
    fn engine_now(&self) -> Nanos {
        if self.wall_ns == 0 {
            return 0;
        }
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        wall.saturating_sub(self.wall_ns)
    }
}
