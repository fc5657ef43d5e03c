//! Watching the live daemon packet by packet, off the data plane: the
//! per-packet log (`--log`, the schema of [`crate::events`]), the captures
//! of what entered and what left (`--capture-in`, `--capture-out`), a
//! mahimahi link log of one pipe (`--mm-log`), and an event tap others
//! subscribe to (the HTTP API's `GET /v1/events`).
//!
//! Two halves:
//! - [`Tap`], owned by the data-plane thread: for each packet event it
//!   pushes one fixed-size [`Record`] (and, only while a capture is on, the
//!   frame's first `--capture-snaplen` bytes, in a buffer the observer hands
//!   back for reuse) into a bounded channel with `try_send`. What the
//!   channel cannot take is counted by kind and dropped: the data plane
//!   never waits for an observer. A daemon without any observer option and
//!   no subscriber pays one predictable branch per packet event.
//! - The observer thread ([`Observer::start`]): it takes what the channel
//!   holds every few milliseconds (it never blocks on the channel, so the
//!   data plane never has to wake it), builds the events, writes the files
//!   through buffers, and hands the events to the subscribers.
//!
//! # The subscribe API
//!
//! ```ignore
//! let sub: Subscription = observer.subscribe(
//!     EventFilter { pipe: Some(1), rule: None, sample: Some(10) },
//!     1024, // events the subscriber's channel holds
//! );
//! loop {
//!     match sub.recv_timeout(Duration::from_secs(1)) {
//!         Ok(event) => send(serde_json::to_string(&event)?), // an `Event<String>`
//!         Err(RecvTimeoutError::Timeout) => {}              // keep-alive
//!         Err(RecvTimeoutError::Disconnected) => break,     // the daemon stopped
//!     }
//!     let lost = sub.lost(); // events this subscriber was too slow for
//! }
//! ```
//!
//! [`Observer::subscribe`]`(&self, filter: EventFilter, capacity: usize) ->
//! Subscription` registers a subscriber; the [`Observer`] handle is
//! `Clone + Send + Sync` (from [`super::run::Running::observer`]). The data
//! plane starts sending records as soon as there is a subscriber, and stops
//! when the last one is dropped (unless files are being written). Each
//! subscriber gets already-built [`Event`]s, `Event<String>`, which
//! serialize (serde) to exactly the log's lines, through a bounded channel
//! of its own: the observer thread fans out with `try_send`, so a slow
//! subscriber loses events ([`Subscription::lost`]) and slows nobody else.
//! The [`EventFilter`] keeps events that name pipe `pipe` (forward,
//! departure and drop events: the pipe a packet left or was dropped by),
//! rule `rule`, and, with `sample: Some(n)`, only packets whose id is a
//! multiple of `n`, all of each such packet's events. The start line (the
//! wall clock of `t_ns` 0) is sent to each new subscriber first. Dropping
//! the [`Subscription`] unsubscribes.
//!
//! # Several workers (`run --workers N`)
//!
//! Each data-plane worker has a [`Tap`] of its own (its channel, its
//! counters on a cache line of their own, its pool of frame buffers), and
//! sheds what its channel cannot take, counted per worker
//! ([`ObserverStats::lost_by_worker`]) and summed. A packet's id carries
//! the worker that read it ([`ID_WORKER_SHIFT`]), so its events can be
//! followed as it is handed to the worker that owns its pipe and back.
//! The observer thread merges the workers' records into one stream, the
//! one the log, the captures and the subscribers get. What "in order"
//! means there:
//!
//! - Each worker says, once a turn, its floor: its engine's time, before
//!   which it will send nothing more. A worker with nothing to do keeps an
//!   old one, so it also says when it goes to sleep with every port
//!   watched: anything that comes then wakes it, and until it is awake
//!   again its floor is the time the observer looks, less [`SLEEP_SLACK`]
//!   (the kernel's time to wake it), up to its next deadline. A worker
//!   awake with an old floor (a change being applied) is waited for
//!   [`MERGE_WINDOW`] at most, one that reads late (leaves arrivals in the
//!   kernel, under a long pipe) [`MERGE_HOLD_MAX`]. A record is written
//!   once it is older than every worker's floor, as the observer sees them
//!   now and saw them at its last look (a packet handed over just before
//!   may still be in its ring). What is written is in order of time, and
//!   among records of one time by the step of a packet's way (arrival,
//!   into a pipe, forward, into the `out` pass's pipe, departure or drop),
//!   then by worker, then as the worker sent them.
//! - A record that reaches the observer when a later one has been written
//!   already (a worker that took longer than [`SLEEP_SLACK`] to wake, or
//!   was held off its core longer than the window) is written as it comes
//!   and counted ([`ObserverStats::out_of_order`]): the stream is in time
//!   order exactly when that count is 0.
//! - A packet's own events are never out of order with each other: along
//!   its way the time never goes back and the step always goes on, and a
//!   record is written only after a whole sweep of every channel has ended
//!   since it was taken, by when the packet's earlier events (sent before
//!   it, by whichever worker) have been taken too.
//!
//! With one worker the records are written as they come, as before.
//!
//! Times: `t_ns` is the data plane's clock, ns since it started; the start
//! line gives the wall clock of that moment, and the captures' stamps are
//! wall-clock (nanosecond pcap). An arrival's time is the kernel's receive
//! stamp where the backend has one; a departure's, when the data plane
//! released it to its port's send batch (handed to the kernel within
//! microseconds: `dummynet stats` gives the lateness).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dummynet_engine::config::Trace;
use dummynet_engine::impair::trace::{TraceCursor, OPPORTUNITY_BYTES};
use dummynet_engine::{Direction, DropReason, Engine, IfaceId, Nanos, Payload, Target};

use super::clock::Clock;
use super::Carrier;
use crate::capture;
use crate::events::{dir_str, split_target, Event, DUPLICATE};

mod merge;
mod tap;
mod writers;
use merge::Merge;
pub use tap::Tap;
use writers::{MmLog, Pcap, RecordFile, SharedFile, Writers};

/// A packet's id (`Carrier::id`, the log's `id`) with `run --workers N`:
/// the worker that read it in the bits from this one up, its count of the
/// packets it read below. Unique across workers at no cost to the data
/// plane (a shared counter would pass its cache line between the workers'
/// cores for every packet), stable across a packet's hand-overs (the id
/// travels with it), worker 0's ids those of a single data plane, and
/// every id below 2^53 with up to 64 workers (a JSON number JavaScript
/// reads exactly). A worker's count runs into the next worker's ids after
/// 2^47 packets (163 days at 10 Mpps).
pub const ID_WORKER_SHIFT: u32 = 47;

/// The count part of an id ([`ID_WORKER_SHIFT`]).
pub const ID_COUNT_MASK: u64 = (1 << ID_WORKER_SHIFT) - 1;

/// The first id worker `index` gives ([`ID_WORKER_SHIFT`]).
pub fn first_id(index: usize) -> u64 {
    (index as u64) << ID_WORKER_SHIFT
}

/// Records the channel between the data plane and the observer holds. At
/// about 100 bytes each, 64 K records are about 6.5 MB, and the observer
/// empties the channel every [`IDLE_NAP`] at most: at a million packet
/// events a second it is never half full.
pub const DEFAULT_BUFFER: usize = 1 << 16;

/// `--capture-snaplen`'s default: headers, and the start of the payload.
pub const DEFAULT_SNAPLEN: u32 = 256;

/// How far back the merge of several workers' records (`run --workers N`)
/// waits for a worker awake whose floor stays behind (one asleep is
/// [`SLEEP_SLACK`]'s): its engine keeps the time of its last packet, and
/// the others' records would wait for it forever. A record that reaches
/// the observer later than this after its time is written when it comes,
/// out of time order, and counted ([`ObserverStats::out_of_order`]).
pub const MERGE_WINDOW: Nanos = 50_000_000;

/// ... and for a worker that reads late (leaves arrivals in the kernel
/// until a pipe's least transit would make them due): its floor is exact,
/// and it moves on by its next departure, but nothing waits longer than
/// this.
pub const MERGE_HOLD_MAX: Nanos = 1_000_000_000;

/// While a worker sleeps with every port watched, anything that comes
/// wakes it: a frame it reads then arrived after the merge last looked,
/// less the time the kernel takes to wake it. The merge takes the time it
/// looks, less this, as that worker's floor (and the previous look's
/// floors as the horizon, for a packet handed to it just before).
pub const SLEEP_SLACK: Nanos = 1_000_000;

/// Messages taken from one worker's channel in one sweep at most.
const SWEEP_MAX: usize = 1 << 16;

/// How long the observer sleeps when the channel is empty.
const IDLE_NAP: Duration = Duration::from_millis(2);

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

/// What [`Observer::start`] writes, and how.
#[derive(Debug, Clone)]
pub struct ObserveOptions {
    pub log: Option<PathBuf>,
    pub capture_in: Option<PathBuf>,
    pub capture_out: Option<PathBuf>,
    pub snaplen: u32,
    /// The mahimahi log and the pipe it follows.
    pub mm_log: Option<(PathBuf, u32)>,
    /// The captures' link type.
    pub linktype: u32,
    /// Records the data plane's channel holds ([`DEFAULT_BUFFER`]).
    pub buffer: usize,
}

impl Default for ObserveOptions {
    fn default() -> Self {
        ObserveOptions {
            log: None,
            capture_in: None,
            capture_out: None,
            snaplen: DEFAULT_SNAPLEN,
            mm_log: None,
            linktype: 1,
            buffer: DEFAULT_BUFFER,
        }
    }
}

/// What happened to a packet, as the data plane saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Arrival,
    /// Taken into a pipe or queue (not a log line: the mahimahi log's `+`).
    Enqueue,
    Forward,
    Departure,
    Drop,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Arrival,
        Kind::Enqueue,
        Kind::Forward,
        Kind::Departure,
        Kind::Drop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Arrival => "arrival",
            Kind::Enqueue => "enqueue",
            Kind::Forward => "forward",
            Kind::Departure => "departure",
            Kind::Drop => "drop",
        }
    }
}

/// One packet event as the data plane hands it over: plain numbers, no
/// allocation, names resolved later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub t_ns: Nanos,
    pub id: u64,
    /// A copy made by `duplicate`.
    pub copy: bool,
    pub len: u32,
    pub dir: Direction,
    /// Arrival: the interface it came in by (or, for a host's outgoing
    /// packet, goes out by); forward: the `out` pass's; departure: the one
    /// it leaves by.
    pub iface: Option<IfaceId>,
    /// Arrival of a bridged frame: the port its `out` pass is for.
    pub bridge_to: Option<IfaceId>,
    pub rule: Option<u16>,
    pub target: Option<Target>,
    pub reason: Option<DropReason>,
    /// A drop at a pipe's entry (it never was inside).
    pub at_entry: bool,
    /// Forward or departure: an AQM of the pipe or queue it left marked
    /// it ECN CE.
    pub marked: bool,
}

impl Record {
    /// A record of `kind` at `t_ns` for packet `id` (its number, and
    /// whether it is a copy), every other field empty.
    pub fn new(kind: Kind, t_ns: Nanos, id: (u64, bool)) -> Record {
        Record {
            kind,
            t_ns,
            id: id.0,
            copy: id.1,
            len: 0,
            dir: Direction::In,
            iface: None,
            bridge_to: None,
            rule: None,
            target: None,
            reason: None,
            at_entry: false,
            marked: false,
        }
    }
}

/// What goes through the data plane's channel.
enum Msg {
    /// The wall-clock time of the data plane's t = 0 (first, always).
    Start {
        wall_ns: u64,
        /// The data plane's clock itself (the merge of several workers
        /// reads it for its window; without it, the wall clock stands in).
        clock: Option<Clock>,
    },
    Packet(Record),
    /// A record with the frame's first bytes, for a capture, and its
    /// whole length.
    Frame(Record, Vec<u8>, u32),
    /// The name of an interface, the first time a record names it.
    Iface(IfaceId, String),
    /// The `--mm-log` pipe's trace changed at engine time `at`: the trace
    /// it follows from now on and when that trace started, or none.
    Trace {
        at: Nanos,
        trace: Option<(Arc<Trace>, Nanos)>,
    },
}

/// Which events a subscriber gets ([`Observer::subscribe`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only events naming this pipe (forward, departure, drop).
    pub pipe: Option<u32>,
    /// Only events naming this rule.
    pub rule: Option<u16>,
    /// Only packets whose id is a multiple of this (every event of each);
    /// 0 and 1 keep all.
    pub sample: Option<u32>,
}

impl EventFilter {
    /// Does `e` pass? (The start line always does.)
    pub fn keeps<S>(&self, e: &Event<S>) -> bool {
        let Some(id) = e.id() else {
            return true;
        };
        if let Some(n) = self.sample.filter(|n| *n > 1) {
            // The worker's count, not its number in the high bits: one in
            // n of each worker's packets.
            if !(id & ID_COUNT_MASK).is_multiple_of(u64::from(n)) {
                return false;
            }
        }
        if self.pipe.is_some() && e.target().0 != self.pipe {
            return false;
        }
        if self.rule.is_some() && e.rule() != self.rule {
            return false;
        }
        true
    }
}

/// One subscriber's end ([`Observer::subscribe`]). Dropping it
/// unsubscribes.
pub struct Subscription {
    rx: Receiver<Event<String>>,
    state: Arc<SubState>,
}

/// What a subscription and the observer thread share.
#[derive(Default)]
struct SubState {
    /// Events lost because the subscriber's channel was full.
    lost: AtomicU64,
    /// The subscription was dropped.
    gone: AtomicBool,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.state.gone.store(true, Ordering::Relaxed);
    }
}

impl Subscription {
    /// The next event, waiting at most `timeout`; `Disconnected` once the
    /// daemon has stopped and every event was taken.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Event<String>, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    /// The next event if one is waiting.
    pub fn try_recv(&self) -> Result<Event<String>, TryRecvError> {
        self.rx.try_recv()
    }

    /// Events this subscriber lost because its channel was full.
    pub fn lost(&self) -> u64 {
        self.state.lost.load(Ordering::Relaxed)
    }
}

/// The observer's side of a subscription.
struct Subscriber {
    filter: EventFilter,
    tx: SyncSender<Event<String>>,
    state: Arc<SubState>,
}

/// What the data plane, the observer thread and the handles share.
struct Shared {
    /// Subscribers waiting to be taken up by the observer thread.
    joining: Mutex<Vec<Subscriber>>,
    /// Subscribers there are (joining or taken up).
    subscribers: AtomicUsize,
    /// One per data-plane worker (`run --workers N`; one otherwise), each
    /// written by its worker only.
    plane: Vec<PlaneCounters>,
    /// Records the merge of several workers' streams met after it had
    /// already written a later one (see [`MERGE_WINDOW`]): written where
    /// they came, out of time order, and counted here.
    out_of_order: AtomicU64,
    /// Events written to the log, frames to the captures.
    logged: AtomicU64,
    captured_in: AtomicU64,
    captured_out: AtomicU64,
    mm_lines: AtomicU64,
    /// Events subscribers were too slow for, over all subscriptions.
    subscriber_lost: AtomicU64,
    /// The first write error; files are no longer written after it.
    error: Mutex<Option<String>>,
    /// Events not written to the files because of it.
    unwritten: AtomicU64,
    /// The wall clock of t = 0, once the data plane has said.
    wall_ns: AtomicU64,
    /// Files are written (the data plane always sends records).
    files: bool,
    stopped: AtomicBool,
}

/// The data plane's counters, on a cache line of their own: the observer
/// thread's counters beside them would make each record's count a cache
/// miss on the data plane.
#[derive(Default)]
#[repr(align(64))]
struct PlaneCounters {
    /// Records handed over.
    sent: AtomicU64,
    /// Records the channel could not take, by [`Kind`].
    lost: [AtomicU64; 5],
    /// Frames a capture missed: no spare buffer was at hand (the record
    /// still went, without its bytes).
    frames_lost: AtomicU64,
    /// The worker's floor: no record it sends from now on is older (its
    /// engine's time, which an arrival's is never before), set once a turn
    /// ([`Tap::floor`]); what the merge of several workers waits for.
    floor: AtomicU64,
    /// The worker leaves arrivals in the kernel for a while (late reading,
    /// the data plane's `LatePlan`): they may come older than the merge
    /// window, so the merge waits for its floor however old.
    reads_late: AtomicBool,
    /// The worker sleeps, every port watched, until `sleep_until` at most
    /// ([`Tap::sleeping`]).
    asleep: AtomicBool,
    sleep_until: AtomicU64,
}

/// The observer's counters, for `dummynet stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ObserverStats {
    /// Records the data plane handed over.
    pub sent: u64,
    /// Records the channel could not take, by kind (non-zero only),
    /// summed over the workers.
    pub lost: Vec<(&'static str, u64)>,
    /// The same, by data-plane worker (one entry with `--workers 1`).
    pub lost_by_worker: Vec<u64>,
    /// Records the merge of several workers' streams wrote out of time
    /// order (they came later than [`MERGE_WINDOW`] after their time).
    pub out_of_order: u64,
    pub logged: u64,
    pub captured_in: u64,
    pub captured_out: u64,
    /// Frames the captures missed for want of a free buffer.
    pub capture_lost: u64,
    pub mm_lines: u64,
    pub subscribers: u64,
    pub subscriber_lost: u64,
    /// Events the files did not get after a write error (`error`).
    pub unwritten: u64,
    pub error: Option<String>,
}

impl ObserverStats {
    /// Events lost: the channel's, and those the files did not get after
    /// a write error.
    pub fn lost_total(&self) -> u64 {
        self.lost.iter().map(|(_, n)| n).sum::<u64>() + self.unwritten
    }
}

impl std::fmt::Display for ObserverStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "observer: {} records, {} lost; {} log lines, {} frames in, {} out ({} missed), \
             {} mm-log lines; {} subscribers, {} events they lost",
            self.sent,
            self.lost_total(),
            self.logged,
            self.captured_in,
            self.captured_out,
            self.capture_lost,
            self.mm_lines,
            self.subscribers,
            self.subscriber_lost
        )?;
        if !self.lost.is_empty() {
            let list: Vec<String> = self.lost.iter().map(|(k, n)| format!("{k} {n}")).collect();
            write!(f, " (lost: {})", list.join(", "))?;
        }
        if self.lost_by_worker.len() > 1 && self.lost_total() > 0 {
            let list: Vec<String> = self.lost_by_worker.iter().map(u64::to_string).collect();
            write!(f, " (lost by worker: {})", list.join(", "))?;
        }
        if self.out_of_order > 0 {
            write!(
                f,
                "; {} written out of time order (late to the merge)",
                self.out_of_order
            )?;
        }
        if let Some(e) = &self.error {
            write!(
                f,
                "; stopped {e} ({} events not written since)",
                self.unwritten
            )?;
        }
        Ok(())
    }
}

/// The handle: subscribe, read the counters. Cheap to clone.
#[derive(Clone)]
pub struct Observer {
    shared: Arc<Shared>,
}

/// The observer thread, joined once the data plane has stopped (its
/// [`Tap`] dropped): it writes what is left and closes the files.
pub struct ObserverThread(Option<JoinHandle<()>>);

impl ObserverThread {
    pub fn join(mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ObserverThread {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

impl Observer {
    /// Creates the files (an error names the one that could not be) and
    /// starts the observer thread. The [`Tap`] goes to the data plane.
    pub fn start(o: &ObserveOptions) -> Result<(Observer, Tap, ObserverThread), String> {
        let (observer, taps, thread) = Observer::start_workers(o, 1)?;
        match taps.into_iter().next() {
            Some(tap) => Ok((observer, tap, thread)),
            None => Err("the observer made no tap".into()),
        }
    }

    /// [`Self::start`] for a data plane of `workers` workers (`run
    /// --workers N`): one [`Tap`] each, in worker order, whose streams the
    /// observer thread merges by time (see [`MERGE_WINDOW`]).
    pub fn start_workers(
        o: &ObserveOptions,
        workers: usize,
    ) -> Result<(Observer, Vec<Tap>, ObserverThread), String> {
        let create = |p: &Path| {
            File::create(p)
                .map(|f| BufWriter::with_capacity(1 << 16, f))
                .map_err(|e| format!("cannot create {}: {e}", p.display()))
        };
        let records = |p: &Path| {
            RecordFile::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
        };
        let pcap = |p: &Path| -> Result<Pcap, String> {
            let out = SharedFile(Arc::new(Mutex::new(records(p)?)));
            let writer = capture::Writer::with_snaplen(out.clone(), o.linktype, o.snaplen)
                .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            // The file's header is whole: a cut may come back to it.
            out.lock().boundary();
            Ok(Pcap { writer, out })
        };
        let writers = Writers {
            log: o.log.as_deref().map(records).transpose()?,
            capture_in: o.capture_in.as_deref().map(pcap).transpose()?,
            capture_out: o.capture_out.as_deref().map(pcap).transpose()?,
            mm: match &o.mm_log {
                Some((p, pipe)) => Some(MmLog {
                    path: p.clone(),
                    out: create(p)?,
                    pipe: *pipe,
                    base_ms: 0,
                    entered: HashMap::new(),
                    trace: None,
                }),
                None => None,
            },
        };
        let shared = Shared::new(o, workers);
        let (mut taps, mut rx, mut spare) = (Vec::new(), Vec::new(), Vec::new());
        for index in 0..workers.max(1) {
            let (tap, r, s) = Tap::join(shared.clone(), index, o);
            taps.push(tap);
            rx.push(r);
            spare.push(s);
        }
        let worker = Worker {
            rx,
            spare,
            shared: shared.clone(),
            writers,
            names: HashMap::new(),
            subscribers: Vec::new(),
            wall_ns: 0,
            failed: false,
            merge: Merge::default(),
        };
        let thread = std::thread::Builder::new()
            .name("dummynet-observer".into())
            .spawn(move || worker.run())
            .map_err(|e| format!("cannot start the observer thread: {e}"))?;
        Ok((Observer { shared }, taps, ObserverThread(Some(thread))))
    }

    /// Subscribes to the events that pass `filter`, through a channel of
    /// `capacity` events (at least 1); see the module documentation.
    pub fn subscribe(&self, filter: EventFilter, capacity: usize) -> Subscription {
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        let state = Arc::new(SubState::default());
        // Counted now, so that the data plane starts sending records at its
        // next turn; the observer thread takes the subscriber up at its
        // next look.
        self.shared.subscribers.fetch_add(1, Ordering::Relaxed);
        let sub = Subscriber {
            filter,
            tx,
            state: state.clone(),
        };
        match self.shared.joining.lock() {
            Ok(mut j) => j.push(sub),
            Err(poisoned) => poisoned.into_inner().push(sub),
        }
        Subscription { rx, state }
    }

    /// The counters so far.
    pub fn stats(&self) -> ObserverStats {
        self.shared.stats()
    }

    /// True once the daemon has stopped and the observer has written all.
    pub fn stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::Relaxed)
    }
}

impl Shared {
    fn stats(&self) -> ObserverStats {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let sum = |f: fn(&PlaneCounters) -> &AtomicU64| self.plane.iter().map(|p| n(f(p))).sum();
        ObserverStats {
            sent: sum(|p| &p.sent),
            lost: Kind::ALL
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let v: u64 = self.plane.iter().map(|p| n(&p.lost[i])).sum();
                    (k.as_str(), v)
                })
                .filter(|(_, v)| *v > 0)
                .collect(),
            lost_by_worker: self
                .plane
                .iter()
                .map(|p| p.lost.iter().map(n).sum())
                .collect(),
            out_of_order: n(&self.out_of_order),
            logged: n(&self.logged),
            captured_in: n(&self.captured_in),
            captured_out: n(&self.captured_out),
            capture_lost: sum(|p| &p.frames_lost),
            mm_lines: n(&self.mm_lines),
            subscribers: self.subscribers.load(Ordering::Relaxed) as u64,
            subscriber_lost: n(&self.subscriber_lost),
            unwritten: n(&self.unwritten),
            error: match self.error.lock() {
                Ok(e) => e.clone(),
                Err(p) => p.into_inner().clone(),
            },
        }
    }
}

impl Shared {
    /// What an observer of `workers` data-plane workers shares.
    fn new(o: &ObserveOptions, workers: usize) -> Arc<Shared> {
        let files = o.log.is_some()
            || o.capture_in.is_some()
            || o.capture_out.is_some()
            || o.mm_log.is_some();
        Arc::new(Shared {
            joining: Mutex::new(Vec::new()),
            subscribers: AtomicUsize::new(0),
            plane: (0..workers.max(1))
                .map(|_| PlaneCounters::default())
                .collect(),
            out_of_order: AtomicU64::new(0),
            logged: AtomicU64::new(0),
            captured_in: AtomicU64::new(0),
            captured_out: AtomicU64::new(0),
            mm_lines: AtomicU64::new(0),
            subscriber_lost: AtomicU64::new(0),
            error: Mutex::new(None),
            unwritten: AtomicU64::new(0),
            wall_ns: AtomicU64::new(0),
            files,
            stopped: AtomicBool::new(false),
        })
    }
}

/// A live packet's bytes as a capture keeps them: a bridged frame from its
/// Ethernet header, a host's packet from its IP header.
pub fn carrier_bytes(c: &Carrier) -> &[u8] {
    match &c.body {
        super::Body::Frame { buf, .. } => buf,
        super::Body::Xdp { frame, .. } => frame,
        super::Body::Host(p) => p.payload(),
        super::Body::Ip(buf) => buf,
    }
}

/// The observer thread's state.
struct Worker {
    /// Each data-plane worker's channel, and the way back for its frame
    /// buffers, in worker order.
    rx: Vec<Receiver<Msg>>,
    spare: Vec<SyncSender<Vec<u8>>>,
    shared: Arc<Shared>,
    writers: Writers,
    /// Interfaces' names by worker (each names its replica's).
    names: HashMap<(usize, IfaceId), String>,
    subscribers: Vec<Subscriber>,
    wall_ns: u64,
    /// A write failed: files are no longer written.
    failed: bool,
    /// Several workers' records on their way to the files, in time order.
    merge: Merge,
}

impl Worker {
    fn run(mut self) {
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

    /// Writes to the mahimahi log, if there is one and writing has not
    /// failed, counting its lines.
    fn mm(&mut self, write: impl FnOnce(&mut MmLog, u64) -> std::io::Result<u64>) {
        if let (Some(mm), false) = (&mut self.writers.mm, self.failed) {
            let res = write(mm, self.wall_ns);
            if let Ok(n) = res {
                self.shared.mm_lines.fetch_add(n, Ordering::Relaxed);
            }
            self.check(res.map(drop));
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

    fn handle(&mut self, w: usize, msg: Msg) {
        match msg {
            // Each worker says; the first is written.
            Msg::Start { .. } if self.wall_ns != 0 => {}
            Msg::Start { wall_ns, clock } => {
                self.wall_ns = wall_ns;
                self.merge.clock = clock;
                let start: Event<String> = Event::Start { t_ns: 0, wall_ns };
                if let Some(mm) = &mut self.writers.mm {
                    let r = mm.header(wall_ns);
                    self.check(r.map(drop));
                }
                self.log(&start);
                for s in &self.subscribers {
                    let _ = s.tx.try_send(start.clone());
                }
            }
            Msg::Iface(i, name) => {
                self.names.insert((w, i), name);
            }
            Msg::Trace { at, trace } => self.mm(|mm, wall| mm.retrace(at, trace, wall)),
            Msg::Packet(r) => self.packet(w, &r, None),
            Msg::Frame(r, buf, orig_len) => {
                self.packet(w, &r, Some((&buf, orig_len)));
                if let Some(spare) = self.spare.get(w) {
                    let _ = spare.try_send(buf);
                }
            }
        }
    }

    /// Worker `w`'s record `r` written and handed out.
    fn packet(&mut self, w: usize, r: &Record, frame: Option<(&[u8], u32)>) {
        if let Some((bytes, orig_len)) = frame {
            let ts = self.wall_ns.saturating_add(r.t_ns);
            let w = match r.kind {
                Kind::Arrival => &mut self.writers.capture_in,
                _ => &mut self.writers.capture_out,
            };
            if let Some(w) = w {
                if self.failed {
                    self.shared.unwritten.fetch_add(1, Ordering::Relaxed);
                } else {
                    let res = w.writer.write(ts, orig_len, bytes);
                    if res.is_ok() {
                        // Counted once on disk (`Worker::flush`).
                        w.out.lock().end_record();
                    }
                    self.check(res.map_err(std::io::Error::other));
                }
            }
        }
        self.mm(|mm, wall| mm.record(r, wall));
        if r.kind == Kind::Enqueue {
            return;
        }
        if self.writers.log.is_none() && self.subscribers.is_empty() {
            return;
        }
        let e = self.event(w, r);
        self.log(&e);
        if !self.subscribers.is_empty() {
            self.fan_out(e);
        }
    }

    /// The log's event for a record.
    fn event(&self, w: usize, r: &Record) -> Event<String> {
        let name =
            |i: Option<IfaceId>| i.map(|i| self.names.get(&(w, i)).cloned().unwrap_or_default());
        let note = r.copy.then(|| DUPLICATE.to_string());
        let (pipe, queue) = split_target(r.target);
        match r.kind {
            Kind::Arrival => Event::Arrival {
                t_ns: r.t_ns,
                id: r.id,
                len: r.len,
                iface: name(r.iface).unwrap_or_default(),
                dir: dir_str(r.dir),
                bridge_to: name(r.bridge_to),
            },
            Kind::Forward => Event::Forward {
                t_ns: r.t_ns,
                id: r.id,
                rule: r.rule,
                pipe,
                queue,
                iface: name(r.iface).unwrap_or_default(),
                ce: r.marked,
                note,
            },
            Kind::Departure | Kind::Enqueue => Event::Departure {
                t_ns: r.t_ns,
                id: r.id,
                rule: r.rule,
                pipe,
                queue,
                iface: name(r.iface),
                ce: r.marked,
                note,
            },
            Kind::Drop => Event::Drop {
                t_ns: r.t_ns,
                id: r.id,
                reason: r.reason.map_or("unknown", DropReason::as_str),
                rule: r.rule,
                pipe,
                queue,
                dir: Some(dir_str(r.dir)),
                note,
            },
        }
    }

    fn log(&mut self, e: &Event<String>) {
        if let Some(w) = &mut self.writers.log {
            if self.failed {
                self.shared.unwritten.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let res = serde_json::to_writer(&mut *w, e)
                .map_err(std::io::Error::other)
                .and_then(|()| w.write_all(b"\n"));
            if res.is_ok() {
                // Counted once on disk (`Worker::flush`).
                w.end_record();
            }
            self.check(res);
        }
    }

    /// Hands `e` to every subscriber whose filter keeps it.
    fn fan_out(&mut self, e: Event<String>) {
        for s in &self.subscribers {
            if !s.filter.keeps(&e) {
                continue;
            }
            if let Err(TrySendError::Full(_)) = s.tx.try_send(e.clone()) {
                s.state.lost.fetch_add(1, Ordering::Relaxed);
                self.shared.subscriber_lost.fetch_add(1, Ordering::Relaxed);
            }
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

    fn flush(&mut self) {
        if self.failed {
            return;
        }
        let w = &mut self.writers;
        let mut res = Ok(());
        if let Some(l) = &mut w.log {
            match l.commit() {
                Ok(n) => self.shared.logged.store(n, Ordering::Relaxed),
                Err(e) => res = Err(e),
            }
        }
        for (c, n) in [
            (&mut w.capture_in, &self.shared.captured_in),
            (&mut w.capture_out, &self.shared.captured_out),
        ] {
            if let Some(c) = c {
                match c.out.lock().commit() {
                    Ok(records) => n.store(records, Ordering::Relaxed),
                    Err(e) => res = res.and(Err(e)),
                }
            }
        }
        if let Some(m) = &mut w.mm {
            res = res.and(m.out.flush());
        }
        self.check(res);
        if self.failed {
            return;
        }
        // What was written goes to the disk now, a little at a time, and
        // leaves the page cache once it is there: left to the kernel's
        // thresholds, a capture at 100 kpps (40 MB/s) piles up gigabytes
        // of dirty pages that are then written back in bursts, while the
        // data plane runs (on a loaded machine, stalls of tens of ms came
        // with captures on disk, not on tmpfs: README, Performance).
        // DONTNEED starts the writeback without waiting for it and drops
        // the pages already written. Advice only: its failure changes
        // nothing.
        let w = &self.writers;
        let advise = |f: &File| {
            let _ = nix::fcntl::posix_fadvise(
                f,
                0,
                0,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
        };
        if let Some(f) = w.log.as_ref().and_then(RecordFile::file) {
            advise(f);
        }
        for c in [&w.capture_in, &w.capture_out].into_iter().flatten() {
            if let Some(f) = c.out.lock().file() {
                advise(f);
            }
        }
        if let Some(m) = &w.mm {
            advise(m.out.get_ref());
        }
    }

    /// On the first write error, stops writing files (a full disk would
    /// otherwise fail every line): the log and captures are cut back to
    /// their last whole record, what they hold is counted, the error is
    /// kept for `stats` and said once on stderr, naming the file. Events
    /// from then on are counted as lost ([`ObserverStats::unwritten`]).
    fn check(&mut self, res: std::io::Result<()>) {
        let Err(e) = res else {
            return;
        };
        if self.failed {
            return;
        }
        self.failed = true;
        let w = &mut self.writers;
        // The file that failed, and the OS's words (a serializer or the
        // pcap writer would wrap them in its own).
        let mut failed: Option<(PathBuf, String)> = None;
        if let Some(l) = &mut w.log {
            if let Some(err) = l.error.clone() {
                failed.get_or_insert((l.path.clone(), err));
            }
            self.shared.logged.store(l.cut(), Ordering::Relaxed);
        }
        for (c, n) in [
            (&mut w.capture_in, &self.shared.captured_in),
            (&mut w.capture_out, &self.shared.captured_out),
        ] {
            if let Some(c) = c {
                let mut out = c.out.lock();
                if let Some(err) = out.error.clone() {
                    failed.get_or_insert((out.path.clone(), err));
                }
                n.store(out.cut(), Ordering::Relaxed);
            }
        }
        let (path, err) = failed.unwrap_or_else(|| {
            let path = w.mm.as_ref().map(|m| m.path.clone()).unwrap_or_default();
            (path, e.to_string())
        });
        let why = format!("writing {}: {err}", path.display());
        say_now!(
            "dummynet: {why}; the log and captures are no longer written (each ends with its \
             last whole record), and events from now on are counted as lost in `dummynet stats`"
        );
        let mut slot = match self.shared.error.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        slot.get_or_insert(why);
    }
}

fn len32(b: &[u8]) -> u32 {
    u32::try_from(b.len()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(id: u64, t_ns: Nanos) -> Record {
        Record {
            len: 84,
            ..Record::new(Kind::Arrival, t_ns, (id, false))
        }
    }

    fn through_pipe(kind: Kind, id: u64, t_ns: Nanos, pipe: u32) -> Record {
        Record {
            len: 84,
            rule: Some(100),
            target: Some(Target::Pipe(pipe)),
            ..Record::new(kind, t_ns, (id, false))
        }
    }

    /// A buffer nobody empties takes what it holds and counts the rest by
    /// kind, without ever waiting.
    #[test]
    fn a_full_buffer_sheds_and_counts_by_kind() {
        let engine: Engine<()> = Engine::new(1);
        let o = ObserveOptions {
            log: Some(PathBuf::from("unused")),
            buffer: 4,
            ..ObserveOptions::default()
        };
        let (mut tap, rx, _spare) = Tap::new(&o);
        tap.refresh();
        assert!(tap.on, "files are asked for");
        for id in 0..3 {
            tap.push(&engine, arrival(id, id * 10), None);
        }
        for id in 0..5 {
            tap.push(&engine, through_pipe(Kind::Departure, id, 100, 1), None);
        }
        let stats = tap.stats();
        assert_eq!(stats.sent, 4);
        assert_eq!(stats.lost, vec![("departure", 4)]);
        assert_eq!(stats.lost_total(), 4);
        // What was taken is there, in order.
        let kinds: Vec<Kind> = rx
            .try_iter()
            .map(|m| match m {
                Msg::Packet(r) | Msg::Frame(r, ..) => r.kind,
                _ => panic!("only packets were pushed"),
            })
            .collect();
        assert_eq!(
            kinds,
            [Kind::Arrival, Kind::Arrival, Kind::Arrival, Kind::Departure]
        );
        // Room again: taken again.
        tap.push(&engine, arrival(9, 500), None);
        assert_eq!(tap.stats().sent, 5);
    }

    /// With neither files nor subscribers the data plane sends nothing; a
    /// subscriber turns it on and gets the start line, then the events its
    /// filter keeps; a slow one loses events, counted; dropping the tap
    /// ends every subscription.
    #[test]
    fn a_capture_takes_buffers_from_a_pool_made_at_start_and_counts_frames_it_misses() {
        let engine: Engine<()> = Engine::new(1);
        // A 1 MiB snap length: the 16 MiB pool holds 16 buffers.
        let o = ObserveOptions {
            capture_in: Some(PathBuf::from("unused")),
            snaplen: 1 << 20,
            ..ObserveOptions::default()
        };
        let (mut tap, rx, spare) = Tap::new(&o);
        tap.refresh();
        let frame = [7u8; 100];
        for id in 0..20 {
            tap.push(&engine, arrival(id, id), Some(&frame));
        }
        let stats = tap.stats();
        // Every record went; the four past the pool's sixteen without bytes.
        assert_eq!((stats.sent, stats.capture_lost), (20, 4));
        let frames: Vec<Vec<u8>> = rx
            .try_iter()
            .filter_map(|m| match m {
                Msg::Frame(_, buf, 100) => Some(buf),
                _ => None,
            })
            .collect();
        assert_eq!(frames.len(), 16);
        assert!(frames
            .iter()
            .all(|b| b[..] == frame[..] && b.capacity() >= 1 << 20));
        // A buffer handed back is taken again, with no allocation.
        let back = frames.into_iter().next().expect("a frame");
        let at = back.as_ptr();
        spare.try_send(back).expect("room for it");
        tap.push(&engine, arrival(20, 20), Some(&frame));
        match rx.try_recv() {
            Ok(Msg::Frame(_, buf, _)) => assert_eq!(buf.as_ptr(), at),
            _ => panic!("the returned buffer carries the next frame"),
        }
        assert_eq!(tap.stats().capture_lost, 4);
    }

    #[test]
    fn subscribers_get_filtered_events_and_a_slow_one_loses_some() {
        let engine: Engine<()> = Engine::new(1);
        let (observer, mut tap, thread) = Observer::start(&ObserveOptions::default()).unwrap();
        tap.refresh();
        assert!(!tap.on, "nobody listens");
        let pipe1 = observer.subscribe(
            EventFilter {
                pipe: Some(1),
                ..EventFilter::default()
            },
            100,
        );
        let sampled = observer.subscribe(
            EventFilter {
                sample: Some(2),
                ..EventFilter::default()
            },
            100,
        );
        let slow = observer.subscribe(EventFilter::default(), 3);
        tap.refresh();
        assert!(tap.on);
        tap.start(1_000);
        for id in 0..4 {
            tap.push(&engine, arrival(id, id), None);
            let pipe = if id % 2 == 0 { 1 } else { 2 };
            tap.push(
                &engine,
                through_pipe(Kind::Departure, id, 10 + id, pipe),
                None,
            );
        }
        drop(tap);
        thread.join();
        let all = |s: &Subscription| -> Vec<Event<String>> {
            let mut v = Vec::new();
            while let Ok(e) = s.recv_timeout(Duration::from_secs(5)) {
                v.push(e);
            }
            v
        };
        let got = all(&pipe1);
        assert_eq!(
            got[0],
            Event::Start {
                t_ns: 0,
                wall_ns: 1_000
            }
        );
        let ids: Vec<_> = got[1..].iter().map(|e| (e.id(), e.target().0)).collect();
        assert_eq!(ids, [(Some(0), Some(1)), (Some(2), Some(1))]);
        assert_eq!(pipe1.lost(), 0);
        let got = all(&sampled);
        let ids: Vec<_> = got[1..].iter().filter_map(Event::id).collect();
        assert_eq!(ids, [0, 0, 2, 2], "every event of the even packets");
        // Nobody read the slow one while 9 events came: 3 kept, 6 lost.
        assert_eq!(all(&slow).len(), 3);
        assert_eq!(slow.lost(), 6);
        assert_eq!(observer.stats().subscriber_lost, 6);
        assert!(observer.stopped());
    }

    /// The files: the log's lines, the captures' frames (cut to the snap
    /// length, stamped with the wall clock to the nanosecond), the
    /// mahimahi log's lines for the pipe it follows.
    #[test]
    fn files_hold_what_the_tap_was_given() {
        let dir = std::env::temp_dir().join(format!("dummynet-observer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let o = ObserveOptions {
            log: Some(dir.join("log.jsonl")),
            capture_in: Some(dir.join("in.pcap")),
            capture_out: Some(dir.join("out.pcap")),
            mm_log: Some((dir.join("mm.log"), 1)),
            snaplen: 20,
            ..ObserveOptions::default()
        };
        let engine: Engine<()> = Engine::new(1);
        let (_observer, mut tap, thread) = Observer::start(&o).unwrap();
        const WALL: u64 = 1_700_000_000_123_456_789;
        tap.start(WALL);
        let frame: Vec<u8> = (0..100).collect();
        tap.push(&engine, arrival(0, 5_000_000), Some(&frame));
        tap.push(&engine, through_pipe(Kind::Enqueue, 0, 5_000_000, 1), None);
        tap.push(
            &engine,
            through_pipe(Kind::Departure, 0, 25_000_001, 1),
            Some(&frame),
        );
        tap.push(&engine, arrival(1, 30_000_000), Some(&frame));
        let full = Record {
            reason: Some(DropReason::QueueFull),
            at_entry: true,
            ..through_pipe(Kind::Drop, 1, 30_000_000, 1)
        };
        tap.push(&engine, full, None);
        drop(tap);
        thread.join();
        let log = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(events, ["start", "arrival", "departure", "arrival", "drop"]);
        assert_eq!(lines[0]["wall_ns"], WALL);
        assert_eq!(lines[2]["t_ns"], 25_000_001);
        assert_eq!(lines[4]["reason"], "queue-full");
        let cin = capture::read_file(&dir.join("in.pcap")).unwrap();
        assert_eq!(cin.frames.len(), 2);
        assert_eq!(cin.frames[0].ts, WALL + 5_000_000);
        assert_eq!(cin.frames[0].data, frame[..20]);
        assert_eq!(cin.frames[0].orig_len, 100);
        let cout = capture::read_file(&dir.join("out.pcap")).unwrap();
        assert_eq!(cout.frames.len(), 1);
        assert_eq!(cout.frames[0].ts, WALL + 25_000_001);
        let mm = std::fs::read_to_string(dir.join("mm.log")).unwrap();
        let base = WALL / 1_000_000;
        let body: Vec<&str> = mm.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(mm.contains(&format!("# base timestamp: {base}\n")), "{mm}");
        // 5.12 ms in: +; 25.12 ms: - after 20 ms; 30.12: + (dropped at entry).
        assert_eq!(
            body,
            [
                format!("{} + 84", base + 5),
                format!("{} - 84 20", base + 25),
                format!("{} + 84", base + 30),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Two workers' streams (`run --workers 2`) read as one: written in
    /// time order once both floors have passed, a packet handed from one
    /// worker to the other and back keeps its steps in order even where
    /// they share a time (the later step sent first, by the other worker),
    /// a record no older than its worker's floor waits for it, ids keep
    /// their worker, and a record older than what was written is written
    /// when it comes and counted.
    #[test]
    fn two_workers_records_merge_in_time_order_and_keep_each_packets_steps() {
        let dir = std::env::temp_dir().join(format!("dummynet-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let o = ObserveOptions {
            log: Some(dir.join("log.jsonl")),
            ..ObserveOptions::default()
        };
        let engine: Engine<()> = Engine::new(1);
        let (observer, mut taps, thread) = Observer::start_workers(&o, 2).unwrap();
        let sub = observer.subscribe(EventFilter::default(), 1000);
        let mut w1 = taps.pop().unwrap();
        let mut w0 = taps.pop().unwrap();
        // The start an hour ahead: the merge window never passes anything,
        // only the floors do.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            + 3_600_000_000_000;
        w0.start(wall);
        w1.start(wall);
        let ms = 1_000_000;
        let (a, b) = (first_id(0), first_id(1));
        let (c, e, f) = (a + 1, b + 1, a + 2);
        let step = |kind, id, t, dir| Record {
            dir,
            target: Some(Target::Pipe(1)),
            ..Record::new(kind, t * ms, (id, false))
        };
        let into_pipe = |kind, id, t| step(kind, id, t, Direction::In);
        // A: read by worker 0 at 10 ms, queued by worker 1, out at 20 ms,
        // back to worker 0 for its `out` pass, gone at 20 ms. Worker 0
        // says so first.
        w0.push(&engine, arrival(a, 10 * ms), None);
        w0.push(&engine, step(Kind::Departure, a, 20, Direction::Out), None);
        w0.push(&engine, arrival(c, 30 * ms), None);
        w1.push(&engine, into_pipe(Kind::Enqueue, a, 10), None);
        w1.push(&engine, into_pipe(Kind::Forward, a, 20), None);
        // B: read by worker 1 at 15 ms, refused by its pipe.
        w1.push(&engine, arrival(b, 15 * ms), None);
        w1.push(&engine, into_pipe(Kind::Drop, b, 15), None);
        w0.floor(25 * ms, false);
        w1.floor(16 * ms, false);
        let kind = |ev: &Event<String>| match ev {
            Event::Start { .. } => "start",
            Event::Arrival { .. } => "arrival",
            Event::Forward { .. } => "forward",
            Event::Departure { .. } => "departure",
            Event::Drop { .. } => "drop",
        };
        let next = || match sub.recv_timeout(Duration::from_secs(10)) {
            Ok(ev) => (kind(&ev), ev.id(), ev.t_ns() / ms),
            Err(e) => panic!("no event: {e}"),
        };
        assert_eq!(next().0, "start");
        assert_eq!(next(), ("arrival", Some(a), 10));
        assert_eq!(next(), ("arrival", Some(b), 15));
        assert_eq!(next(), ("drop", Some(b), 15));
        // Worker 1 may still send from 16 ms on: what is later waits.
        w1.push(&engine, arrival(e, 17 * ms), None);
        w1.floor(40 * ms, false);
        assert_eq!(next(), ("arrival", Some(e), 17));
        assert_eq!(next(), ("forward", Some(a), 20));
        assert_eq!(next(), ("departure", Some(a), 20));
        // A record older than what was written: written as it comes, and
        // counted. (C, at 30 ms, is past worker 0's floor: it waits.)
        w0.push(&engine, arrival(f, 5 * ms), None);
        assert_eq!(next(), ("arrival", Some(f), 5));
        drop((w0, w1));
        assert_eq!(next(), ("arrival", Some(c), 30));
        thread.join();
        let stats = observer.stats();
        assert_eq!(stats.out_of_order, 1);
        assert_eq!(stats.lost_by_worker, [0, 0]);
        assert_eq!(stats.sent, 9);
        let log = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
        let ids: Vec<u64> = log
            .lines()
            .skip(1)
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [a, b, b, e, a, a, f, c]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A trace-driven pipe's `--mm-log` carries its delivery opportunities
    /// (`T # 1504`), in time order with the packets' lines, from the
    /// trace's start; a new trace restarts them and a plain link ends them.
    #[test]
    fn the_mahimahi_log_lists_a_traced_pipes_opportunities() {
        use dummynet_engine::config::{LinkConfig, PipeConfig, TraceMode};
        use dummynet_engine::Command;
        const MS: Nanos = 1_000_000;
        let dir = std::env::temp_dir().join(format!("dummynet-mm-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let o = ObserveOptions {
            mm_log: Some((dir.join("mm.log"), 1)),
            ..ObserveOptions::default()
        };
        let pipe = |trace: Option<Vec<Nanos>>| {
            Command::ConfigPipe(
                1,
                PipeConfig {
                    link: LinkConfig {
                        trace: trace.map(|times| {
                            Arc::new(Trace {
                                name: "t".into(),
                                times,
                                mode: TraceMode::Loop,
                            })
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
        };
        let mut engine = Engine::new(1);
        let (_observer, mut tap, thread) = Observer::start(&o).unwrap();
        const WALL: u64 = 1_700_000_000_000_000_000;
        tap.start(WALL);
        // At 2 ms: opportunities at 0, 0 and 3 ms of a 3 ms lap.
        engine
            .apply(2 * MS, pipe(Some(vec![0, 0, 3 * MS])))
            .unwrap();
        tap.reconfigured(&engine, 2 * MS);
        tap.reconfigured(&engine, 3 * MS); // unchanged: nothing sent
        tap.push(&engine, through_pipe(Kind::Enqueue, 0, 6 * MS, 1), None);
        // At 9 ms, a new trace (one opportunity a lap of 4 ms) ...
        engine.apply(9 * MS, pipe(Some(vec![4 * MS]))).unwrap();
        tap.reconfigured(&engine, 9 * MS);
        tap.push(&engine, through_pipe(Kind::Departure, 0, 13 * MS, 1), None);
        // ... and at 20 ms a plain link.
        engine.apply(20 * MS, pipe(None)).unwrap();
        tap.reconfigured(&engine, 20 * MS);
        drop(tap);
        thread.join();
        let mm = std::fs::read_to_string(dir.join("mm.log")).unwrap();
        let base = WALL / 1_000_000;
        let body: Vec<String> = mm
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (t, rest) = l.split_once(' ').unwrap();
                format!("{} {rest}", t.parse::<u64>().unwrap() - base)
            })
            .collect();
        // First trace from 2 ms: 2, 2, 5 | 5, 5, 8 | 8, 8 (11 is after 9).
        // Second from 9 ms: 13, 17 (21 is after 20).
        assert_eq!(
            body,
            [
                "2 # 1504",
                "2 # 1504",
                "5 # 1504",
                "5 # 1504",
                "5 # 1504",
                "6 + 84",
                "8 # 1504",
                "8 # 1504",
                "8 # 1504",
                "13 # 1504",
                "13 - 84 7",
                "17 # 1504",
            ],
            "{mm}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
