//! The data-plane loop: one thread, one engine, any number of backends.
//!
//! Each turn: read every backend (a batch each), run the arrivals through
//! the engine at the current clock time, release whatever the engine has
//! due, hand the batches to the kernel, answer control requests, then wait
//! for the next deadline or the next arrival. Control requests are applied
//! between packets, so a configuration change is atomic with respect to the
//! traffic, and the engine itself keeps queued packets across it.

mod books;
mod late;
mod mailbox;
mod pacing;
pub(crate) mod report;
pub(crate) mod request;
mod settle;
mod shard;
mod slots;
mod stats;
mod watch;

pub use books::{TargetBook, TargetCounts};
pub use late::{LATE_MARGIN, LATE_MIN_TRANSIT, LATE_NON_IP};
pub use pacing::{
    plan_wait, PlaneOptions, Precision, Priority, WaitPlan, BUSY_POLL, DEFAULT_SPIN,
    MIN_SHORT_SPIN, RT_PRIORITY, SHORT_SPIN, TIMER_FIRST_SPIN, TIMER_GAP_SHARE, TIMER_GAP_SPIN,
    TIMER_MAX_SPIN,
};
pub use report::{memory_advice, Report};
pub use request::{Answer, HostView, Inbox, Request, RequestKind, Ticket};
pub use slots::{Backends, MAX_BACKENDS};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dummynet_engine::two_pass::LetGo;
use dummynet_engine::{DropReason, Engine, Nanos};

use crate::clock::Clock;
use crate::observer::{self, Tap};
use crate::sharded::Worker;
use crate::{Arrival, Backend, Carrier};

use books::Departures;
use late::LateReads;
use mailbox::Mailbox;
use pacing::Pacing;
use settle::{route, Settle};
use slots::complete;
use watch::Watch;

/// While a batch of arrivals is processed, departures released in the
/// middle of it are handed to the kernel once the earliest has waited this
/// long, instead of at the end of the batch.
const FLUSH_SLACK: Nanos = 5_000;

/// At a shutdown, ports that refused frames for lack of room get this long
/// to take them before they are dropped.
const SHUTDOWN_HELD: Nanos = 200_000_000;

/// One thread's data plane: the engine, the ports it reads and writes, and
/// what the loop keeps between turns.
pub struct DataPlane {
    pub engine: Engine<Carrier>,
    backends: Backends,
    clock: Clock,
    mailbox: Mailbox,
    stop: Arc<AtomicBool>,
    /// Why a backend (or another worker) stopped the data plane
    /// ([`Backend::failure`]).
    failure: Option<String>,
    pacing: Pacing,
    late: LateReads,
    intake: Intake,
    departures: Departures,
    watch: Watch,
    /// This data plane's part in a sharded one (`run --workers N`):
    /// [`crate::sharded`]. `None`: the only worker, today's path.
    worker: Option<Worker>,
}

/// What a turn reads into: the batch of arrivals and the next packet's
/// number ([`Carrier::id`]).
struct Intake {
    arrivals: Vec<Arrival>,
    next_id: u64,
}

impl DataPlane {
    pub fn new(
        engine: Engine<Carrier>,
        backends: Vec<Box<dyn Backend>>,
        inbox: Option<Inbox>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        DataPlane {
            engine,
            backends: Backends::new(backends),
            clock: Clock::new(),
            mailbox: Mailbox::new(inbox),
            stop,
            failure: None,
            pacing: Pacing::default(),
            late: LateReads::default(),
            intake: Intake {
                arrivals: Vec::with_capacity(256),
                next_id: 0,
            },
            departures: Departures::default(),
            watch: Watch::default(),
            worker: None,
        }
    }

    /// Makes this data plane one worker of a sharded one (see
    /// [`crate::sharded`]); its engine must be configured as the others'.
    /// Its engine counts `limit` states in the table the workers share.
    pub fn with_worker(mut self, worker: Option<Worker>) -> Self {
        if let Some(w) = &worker {
            self.clock = w.clock();
            self.engine.share_limits(w.limits());
            // Ids unique across the workers ([`observer::ID_WORKER_SHIFT`]).
            self.intake.next_id = observer::first_id(w.index());
        }
        self.worker = worker;
        self
    }

    /// Hands each packet event to an observer ([`observer::Observer`]).
    pub fn with_tap(mut self, tap: Option<Tap>) -> Self {
        self.watch.tap = tap;
        self
    }

    /// Chooses how the data-plane thread is scheduled and how long it
    /// spins before a deadline (before [`Self::run`]).
    pub fn with_options(mut self, o: PlaneOptions) -> Self {
        self.pacing.options = o;
        self
    }

    /// Runs until the stop flag is set (or a backend fails:
    /// [`Report::failure`]), then shuts down in order: stop intercepting,
    /// release what is inside (delivered as if its time had come, so no
    /// connection is left hanging), and report.
    pub fn run(mut self) -> Report {
        self.pacing.start();
        self.watch.start(&self.clock);
        while !self.stop.load(Ordering::Relaxed) && self.turn() {}
        self.shut_down();
        match self.worker.take() {
            Some(w) => self.shard_end(w),
            None => self.report(),
        }
    }

    /// One turn of the loop: arrivals and the departures due among them,
    /// whatever else is due, the control requests, then the wait. False
    /// when a backend (or another worker) has stopped the data plane.
    fn turn(&mut self) -> bool {
        self.watch.refresh();
        if let Some(why) = self.backends.slots.iter().find_map(|b| b.failure()) {
            self.failure = Some(why);
            return false;
        }
        if let Some(w) = &self.worker {
            // Another worker stopped: so does this one, saying why.
            if let Some(why) = w.broken().filter(|_| !self.stop.load(Ordering::Relaxed)) {
                self.failure = Some(why);
                return false;
            }
            self.shard_turn();
        }
        // Arrivals and the departures due among them, in time order,
        // then whatever else is due.
        self.receive_all();
        self.release(self.clock.now());
        self.flush_all();
        self.serve_control();
        self.reconfigured();
        self.watch.rule_log(&mut self.engine);
        if self.worker.is_some() {
            // What the merge of the workers' records waits for.
            self.watch
                .floor(self.engine.now(), self.late.active.is_some());
        }
        if let Some(d) = self.wait() {
            self.stage(d);
        }
        true
    }

    /// Stops intercepting, then lets out what is inside and what the
    /// ports still hold.
    fn shut_down(&mut self) {
        for b in self.backends.slots.iter_mut() {
            b.stop_intercepting();
        }
        // Read what is already in the sockets, then let everything out:
        // following packets only, since a repeating schedule never ends
        // (steps due before a packet's time still run, in order).
        self.receive_all();
        let now = self.clock.now();
        while let Some(d) = self.engine.next_packet_deadline() {
            self.release(d.max(now));
        }
        // Released ahead of time on purpose: not lateness.
        self.departures.due = None;
        self.flush_all();
        // Frames a port refused for lack of room get a little longer
        // (bounded) to leave, then what is still held is dropped.
        let give_up = self.clock.now().saturating_add(SHUTDOWN_HELD);
        while self.backends.slots.iter().any(|b| b.holding()) && self.clock.now() < give_up {
            std::thread::sleep(std::time::Duration::from_nanos(crate::held::RETRY));
            self.flush_all();
        }
        for b in self.backends.slots.iter_mut() {
            b.drop_held();
        }
        self.flush_all();
    }

    /// Reads a batch from every backend and runs it through the engine in
    /// time order, each arrival at the time the kernel received it (when
    /// the backend says; at the read otherwise), never before what the
    /// engine has already run. Departures that fell due before an arrival
    /// leave before it is run, and are handed to the kernel once they have
    /// waited [`FLUSH_SLACK`], so a long batch cannot hold back a delayed
    /// packet by more than that.
    fn receive_all(&mut self) {
        let read_at = self.clock.now();
        let mut more = false;
        for i in 0..self.backends.slots.len() {
            let first = self.intake.arrivals.len();
            let id = self.backends.id(i);
            more |= self.backends.slots[i].receive(&mut self.engine, &mut self.intake.arrivals);
            for a in &mut self.intake.arrivals[first..] {
                a.carrier.backend = id;
            }
        }
        let late = &mut self.late;
        late.span = read_at.saturating_sub(late.read_at);
        late.read_at = read_at;
        late.got = self.intake.arrivals.len();
        late.more = more;
        let mut arrivals = std::mem::take(&mut self.intake.arrivals);
        self.pacing.busy = !arrivals.is_empty();
        if !arrivals.is_empty() {
            let real = self.clock.realtime();
            for a in &mut arrivals {
                if a.stamp_ns == 0 {
                    a.stamp_ns = real.wall;
                }
            }
            // Two ports' rings, each in order, read one after the other.
            if !arrivals.is_sorted_by_key(|a| a.stamp_ns) {
                arrivals.sort_by_key(|a| a.stamp_ns);
            }
            for Arrival {
                info,
                mut carrier,
                stamp_ns,
            } in arrivals.drain(..)
            {
                let at = real.arrival(stamp_ns, self.engine.now());
                carrier.id = self.intake.next_id;
                self.intake.next_id += 1;
                self.release(at);
                self.watch.arrival(&self.engine, at, &info, &carrier);
                // Measured from the release, not from the departure time: an
                // arrival read late releases what was due long ago, and the
                // batch should still go out whole.
                if self.departures.due.is_some()
                    && self.clock.now().saturating_sub(self.departures.since) >= FLUSH_SLACK
                {
                    self.flush_all();
                }
                let id = (carrier.id, carrier.copy);
                let worker = self.worker.as_mut();
                let Some(verdict) = route(&mut self.engine, worker, &self.watch, at, info, carrier)
                else {
                    continue;
                };
                let mut s = Settle {
                    engine: &mut self.engine,
                    backends: &mut self.backends,
                    targets: &mut self.departures.targets,
                    watch: &mut self.watch,
                    worker: self.worker.as_mut(),
                    id,
                };
                s.verdict(at, info, verdict);
            }
        }
        self.intake.arrivals = arrivals;
        if let Some(w) = &mut self.worker {
            w.ring_bells();
        }
    }

    /// After any change of the engine's configuration (a command, a
    /// scheduled step; and once at the start): works out again how late
    /// arrivals may be read, and lets the backends follow.
    fn reconfigured(&mut self) {
        let epoch = self.engine.config_epoch();
        if self.backends.epoch == Some(epoch) {
            return;
        }
        self.backends.epoch = Some(epoch);
        let mut room = usize::MAX;
        let engine = &self.engine;
        self.late.transits = self
            .backends
            .slots
            .iter()
            .map(|b| match b.late_reading() {
                None => Some(0),
                Some(r) => {
                    room = room.min(r.room);
                    r.ifaces.into_iter().map(|i| engine.least_transit(i)).min()
                }
            })
            .collect();
        self.late.room = room;
        for b in self.backends.slots.iter_mut() {
            b.reconfigured(&self.engine);
        }
        self.watch.reconfigured(&self.engine, self.clock.now());
    }

    /// Everything due by `now` leaves the engine (into the backends' send
    /// batches; [`Self::flush_all`] hands those to the kernel).
    fn release(&mut self, now: Nanos) {
        if self.engine.next_deadline().is_none_or(|d| d > now) {
            return;
        }
        while let Some(out) = self.engine.poll(now) {
            match out.drop {
                None => self.departures.targets.delivered(out.target, out.info.len),
                Some(reason) => self.departures.targets.dropped(out.target, reason),
            }
            if out.delivered() {
                // Leaving a pipe is passing it: a bridged frame still has its
                // `out` pass to run, which `settle` does.
                let mut s = Settle {
                    engine: &mut self.engine,
                    backends: &mut self.backends,
                    targets: &mut self.departures.targets,
                    watch: &mut self.watch,
                    worker: self.worker.as_mut(),
                    id: (out.payload.id, out.payload.copy),
                };
                let by = LetGo {
                    rule: out.rule,
                    target: out.target,
                    ce: out.marked,
                };
                // Lateness is counted for what goes to the kernel now, not
                // for the engine's inner timers (the end of a transmission
                // before the delay line) nor for a packet the `out` pass
                // sends into another pipe.
                if s.released(now, out.info, out.payload, by) {
                    if self.departures.due.is_none() {
                        self.departures.since = self.clock.now();
                    }
                    self.departures.due =
                        Some(self.departures.due.map_or(out.at, |e| e.min(out.at)));
                }
            } else {
                self.watch.dropped_inside(&self.engine, &out);
                complete(&mut self.backends, out.payload, false);
            }
        }
    }

    /// Hands every send batch to the kernel, and records how late the
    /// earliest departure in it was.
    fn flush_all(&mut self) {
        // Measured as the batch goes in: what the kernel then does with it
        // (on a veth, the receiver's whole stack, inline) is not the
        // emulator's delay.
        if let Some(due) = self.departures.due.take() {
            self.departures.lateness.record(self.clock.now(), due);
        }
        for b in self.backends.slots.iter_mut() {
            b.flush();
            // Delivered by the engine, then refused: drops in its books.
            let unsent = b.take_unsent();
            if unsent > 0 {
                self.engine.unsent(DropReason::TxFailed, unsent);
            }
        }
    }

    /// The engine, as the data plane holds it between turns.
    pub fn engine(&self) -> &Engine<Carrier> {
        &self.engine
    }
}

#[cfg(test)]
mod tests;
