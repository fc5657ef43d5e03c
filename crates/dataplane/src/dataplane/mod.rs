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
mod report;
mod settle;
mod shard;
mod slots;

pub use books::{TargetBook, TargetCounts};
pub use late::{LATE_MARGIN, LATE_MIN_TRANSIT, LATE_NON_IP};
pub use mailbox::{Answer, HostView, Inbox, Request, RequestKind, Ticket};
pub use pacing::{
    plan_wait, PlaneOptions, Precision, Priority, WaitPlan, BUSY_POLL, DEFAULT_SPIN,
    MIN_SHORT_SPIN, RT_PRIORITY, SHORT_SPIN, TIMER_FIRST_SPIN, TIMER_GAP_SHARE, TIMER_GAP_SPIN,
    TIMER_MAX_SPIN,
};
pub use report::{memory_advice, Report};
pub use slots::{Backends, MAX_BACKENDS};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dummynet_engine::{DropReason, Engine, Nanos, Verdict};

use crate::clock::{self, Clock, Lateness, Rest, TimerWatch};
use crate::observer::{self, Kind, Record, Tap};
use crate::sharded::Worker;
use crate::{Arrival, Backend, Carrier};

use late::LateReads;
use settle::{arrived, route, Settle};
use slots::complete;

/// While a batch of arrivals is processed, departures released in the
/// middle of it are handed to the kernel once the earliest has waited this
/// long, instead of at the end of the batch.
const FLUSH_SLACK: Nanos = 5_000;

/// At a shutdown, ports that refused frames for lack of room get this long
/// to take them before they are dropped.
const SHUTDOWN_HELD: Nanos = 200_000_000;

pub struct DataPlane {
    pub engine: Engine<Carrier>,
    backends: Backends,
    clock: Clock,
    lateness: Lateness,
    targets: TargetBook,
    inbox: Option<Inbox>,
    stop: Arc<AtomicBool>,
    options: PlaneOptions,
    arrivals: Vec<Arrival>,
    late: LateReads,
    /// The engine configuration epoch last looked at ([`Self::reconfigured`]).
    epoch: Option<u64>,
    /// Earliest departure time among packets released but not yet handed
    /// to the kernel.
    due: Option<Nanos>,
    /// When the first of those was released (clock time): it is handed
    /// over once it has waited [`FLUSH_SLACK`] since, even mid-batch.
    due_since: Nanos,
    /// The share of the CPU a `SCHED_FIFO` data plane leaves to others.
    rest: Option<Rest>,
    timer: TimerWatch,
    /// The last turn received something: poll a while before sleeping.
    busy: bool,
    /// The control socket was readable at the last wake-up (or nothing has
    /// looked yet): only then is it read, not on every turn.
    inbox_ready: bool,
    /// Wake-ups: for input, for a deadline, and naps with neither.
    wakes: [u64; 3],
    /// At [`Precision::Timer`], when the real-time budget is next looked at
    /// (a CPU clock read is a system call; once a millisecond is plenty).
    next_pace: Nanos,
    scheduling: &'static str,
    memory_locked: bool,
    /// Why a backend stopped the data plane ([`Backend::failure`]).
    failure: Option<String>,
    /// Where `log` rules' matches go (written off this thread).
    rule_log: Option<crate::rulelog::RuleLog>,
    /// The per-packet observer's end, if there is one ([`observer`]).
    tap: Option<Tap>,
    /// The next packet's number ([`Carrier::id`]).
    next_id: u64,
    /// This data plane's part in a sharded one (`run --workers N`):
    /// [`crate::sharded`]. `None`: the only worker, today's path.
    worker: Option<Worker>,
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
            lateness: Lateness::default(),
            targets: TargetBook::default(),
            inbox,
            stop,
            options: PlaneOptions::default(),
            arrivals: Vec::with_capacity(256),
            late: LateReads::default(),
            epoch: None,
            due: None,
            due_since: 0,
            rest: None,
            timer: TimerWatch::default(),
            busy: false,
            inbox_ready: true,
            wakes: [0; 3],
            next_pace: 0,
            scheduling: "normal",
            memory_locked: false,
            failure: None,
            rule_log: None,
            tap: None,
            next_id: 0,
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
            self.next_id = observer::first_id(w.index());
        }
        self.worker = worker;
        self
    }

    /// Hands each packet event to an observer ([`observer::Observer`]).
    pub fn with_tap(mut self, tap: Option<Tap>) -> Self {
        self.tap = tap;
        self
    }

    /// Chooses how the data-plane thread is scheduled and how long it
    /// spins before a deadline (before [`Self::run`]).
    pub fn with_options(mut self, o: PlaneOptions) -> Self {
        self.options = o;
        self
    }

    /// Runs until the stop flag is set (or a backend fails:
    /// [`Report::failure`]), then shuts down in order: stop intercepting,
    /// release what is inside (delivered as if its time had come, so no
    /// connection is left hanging), and report.
    pub fn run(mut self) -> Report {
        clock::tighten_timer_slack();
        // Best effort, like the scheduling below (needs CAP_IPC_LOCK or a
        // large enough RLIMIT_MEMLOCK); `stats` says whether it worked.
        self.memory_locked = dummynet_io::rt::lock_memory().is_ok();
        // Best effort: without CAP_SYS_NICE the thread keeps normal
        // scheduling, and `stats` says so.
        self.scheduling = match self.options.priority {
            Priority::Realtime if dummynet_io::rt::set_fifo(RT_PRIORITY).is_ok() => {
                self.rest = Rest::for_this_kernel();
                "SCHED_FIFO"
            }
            _ if dummynet_io::rt::set_nice(-20).is_ok() => "nice -20",
            _ => "normal",
        };
        if let Some(tap) = &mut self.tap {
            let r = self.clock.realtime();
            tap.start_clock(r.wall.saturating_sub(r.clock), self.clock);
        }
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(tap) = &mut self.tap {
                tap.refresh();
            }
            if let Some(why) = self.backends.slots.iter().find_map(|b| b.failure()) {
                self.failure = Some(why);
                break;
            }
            if let Some(w) = &self.worker {
                // Another worker stopped: so does this one, saying why.
                if let Some(why) = w.broken().filter(|_| !self.stop.load(Ordering::Relaxed)) {
                    self.failure = Some(why);
                    break;
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
            if self.engine.has_log() {
                self.rule_log
                    .get_or_insert_with(crate::rulelog::RuleLog::start)
                    .take(&mut self.engine);
            }
            if let (Some(tap), Some(_)) = (&self.tap, &self.worker) {
                // What the merge of the workers' records waits for.
                tap.floor(self.engine.now(), self.late.active.is_some());
            }
            if let Some(d) = self.wait() {
                self.stage(d);
            }
        }
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
        self.due = None;
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
        match self.worker.take() {
            Some(w) => self.shard_end(w),
            None => self.report(),
        }
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
            let first = self.arrivals.len();
            let id = self.backends.id(i);
            more |= self.backends.slots[i].receive(&mut self.engine, &mut self.arrivals);
            for a in &mut self.arrivals[first..] {
                a.carrier.backend = id;
            }
        }
        let late = &mut self.late;
        late.span = read_at.saturating_sub(late.read_at);
        late.read_at = read_at;
        late.got = self.arrivals.len();
        late.more = more;
        let mut arrivals = std::mem::take(&mut self.arrivals);
        self.busy = !arrivals.is_empty();
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
                carrier.id = self.next_id;
                self.next_id += 1;
                self.release(at);
                if let Some(tap) = self.tap.as_mut().filter(|t| t.on) {
                    arrived(tap, &self.engine, at, &info, &carrier);
                }
                // Measured from the release, not from the departure time: an
                // arrival read late releases what was due long ago, and the
                // batch should still go out whole.
                if self.due.is_some()
                    && self.clock.now().saturating_sub(self.due_since) >= FLUSH_SLACK
                {
                    self.flush_all();
                }
                let id = (carrier.id, carrier.copy);
                let Some(verdict) =
                    route(&mut self.engine, self.worker.as_mut(), at, info, carrier)
                else {
                    continue;
                };
                let mut s = Settle {
                    engine: &mut self.engine,
                    backends: &mut self.backends,
                    targets: &mut self.targets,
                    tap: &mut self.tap,
                    worker: self.worker.as_mut(),
                };
                s.settle(at, info, verdict, None, id);
            }
        }
        self.arrivals = arrivals;
        if let Some(w) = &mut self.worker {
            w.ring_bells();
        }
    }

    /// After any change of the engine's configuration (a command, a
    /// scheduled step; and once at the start): works out again how late
    /// arrivals may be read, and lets the backends follow.
    fn reconfigured(&mut self) {
        let epoch = self.engine.config_epoch();
        if self.epoch == Some(epoch) {
            return;
        }
        self.epoch = Some(epoch);
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
        if let Some(tap) = &mut self.tap {
            tap.reconfigured(&self.engine, self.clock.now());
        }
    }

    /// Everything due by `now` leaves the engine (into the backends' send
    /// batches; [`Self::flush_all`] hands those to the kernel).
    fn release(&mut self, now: Nanos) {
        if self.engine.next_deadline().is_none_or(|d| d > now) {
            return;
        }
        while let Some(out) = self.engine.poll(now) {
            match out.drop {
                None => self.targets.delivered(out.target, out.info.len),
                Some(reason) => self.targets.dropped(out.target, reason),
            }
            if out.delivered() {
                // Leaving a pipe is passing it: a bridged frame still has its
                // `out` pass to run, which `settle` does.
                let id = (out.payload.id, out.payload.copy);
                let pass = Verdict::Pass {
                    payload: out.payload,
                    rule: out.rule.unwrap_or(0),
                };
                let mut s = Settle {
                    engine: &mut self.engine,
                    backends: &mut self.backends,
                    targets: &mut self.targets,
                    tap: &mut self.tap,
                    worker: self.worker.as_mut(),
                };
                // Lateness is counted for what goes to the kernel now, not
                // for the engine's inner timers (the end of a transmission
                // before the delay line) nor for a packet the `out` pass
                // sends into another pipe.
                if s.settle(now, out.info, pass, out.target, id) {
                    if self.due.is_none() {
                        self.due_since = self.clock.now();
                    }
                    self.due = Some(self.due.map_or(out.at, |e| e.min(out.at)));
                }
            } else {
                if let Some(tap) = self.tap.as_mut().filter(|t| t.on) {
                    let r = Record {
                        len: out.info.len,
                        dir: out.info.dir,
                        rule: out.rule,
                        target: out.target,
                        reason: out.drop,
                        ..Record::new(Kind::Drop, out.at, (out.payload.id, out.payload.copy))
                    };
                    tap.push(&self.engine, r, None);
                }
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
        if let Some(due) = self.due.take() {
            self.lateness.record(self.clock.now(), due);
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
