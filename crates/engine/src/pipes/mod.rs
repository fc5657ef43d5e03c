//! Pipes: flowsets, per-flow queues, scheduler instances, links and delay
//! lines, with FreeBSD's object model.
//!
//! - A *link* N carries `bw`, `delay`, `burst` and a profile.
//! - A *scheduler* N (type and mask) drives link N. Its mask splits traffic
//!   into *instances*; each instance has its own policy state, its own copy
//!   of the link (credit, delay line) and its own counters.
//! - A *flowset* (`queue N`, or the implicit queue of `pipe N`) feeds one
//!   scheduler. Its mask splits traffic into per-flow *queues*, which hold
//!   the packets and enforce the size limit.
//!
//! A packet's path: flowset → queue (plr, loss, duplicate, corrupt, AQM,
//! limit) → scheduler instance policy → link (serialization, overhead,
//! slots, or a trace's opportunities) → delay line (delay, jitter,
//! reorder) → out. The impairments are in [`crate::impair`].
//!
//! Randomness: each queue and each scheduler instance draws from its own
//! stream ([`Rng::stream`]), named by its flowset or scheduler number and its
//! flow id, so configuring one pipe never changes another pipe's draws; a
//! pipe with a `seed` names its objects' streams from that seed instead
//! ([`crate::impair::seed`]).

mod configure;
mod delayline;
pub(crate) mod link;
mod path;
pub mod profile;
mod views;

use path::new_policy;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap;

use crate::aqm::{self, ecn, AqmState, AqmVerdict, Arrival, Departure, QueueState};
use crate::classifier::RuleRef;
use crate::command::{FlowsetConfig, LinkConfig};
use crate::flow::{FlowKey, FlowMask};
use crate::impair::corrupt::Corrupt;
use crate::impair::duplicate::Duplicate;
use crate::impair::loss::LossModel;
use crate::impair::staged::States;
use crate::impair::{corrupt, duplicate::DuplicateState, loss::LossState, trace};
use crate::packet::{PacketInfo, Payload, Target};
use crate::rng::{Probability, Rng};
use crate::sched::{self, QueueId, QueueOps, SchedInstance, SchedType, Slot, SubQueues};
use crate::stats::{DropReason, FlowCounters};
use crate::time::Nanos;
use crate::units::{QueueLimit, DN_MAX_ID};

use delayline::LinkFx;
use link::{LinkParams, LinkState};

/// A packet inside dummynet, with what is needed to account for it and to
/// send it on when it leaves.
#[derive(Debug)]
pub(crate) struct Held<P> {
    pub payload: P,
    pub info: PacketInfo,
    /// Tags from `tag N` rules, kept while it sits in dummynet (a packet
    /// re-entering the rules with `one_pass` 0 still has them).
    /// (An id of the ruleset's `TagSets`: 0 for none.)
    pub tags: u16,
    /// Global arrival order; keeps re-queueing after a reconfiguration stable.
    pub seq: u64,
    pub rule: RuleRef,
    pub target: Target,
    /// When it entered its current queue (for AQM sojourn times).
    pub enq_time: Nanos,
    /// When it leaves the delay line.
    pub out_time: Nanos,
    /// A profile sample above `loss-level` condemned it; dropped on exit.
    pub lost: bool,
    /// An AQM marked it ECN CE here.
    pub marked: bool,
}

/// A packet leaving dummynet: delivered at `at`, or dropped there.
#[derive(Debug)]
pub(crate) struct Exit<P> {
    pub held: Held<P>,
    pub at: Nanos,
    pub drop: Option<DropReason>,
}

// ------------------------------------------------------------ storage

/// A vector of optional slots with a free list: stable indices, O(1) reuse.
#[derive(Debug)]
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    fn insert(&mut self, t: T) -> u32 {
        if let Some(i) = self.free.pop() {
            self.items[i as usize] = Some(t);
            i
        } else {
            self.items.push(Some(t));
            (self.items.len() - 1) as u32
        }
    }

    fn remove(&mut self, i: u32) -> Option<T> {
        let t = self.items.get_mut(i as usize)?.take();
        if t.is_some() {
            self.free.push(i);
        }
        t
    }

    #[inline]
    fn get(&self, i: u32) -> Option<&T> {
        self.items.get(i as usize).and_then(Option::as_ref)
    }

    #[inline]
    fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.items.get_mut(i as usize).and_then(Option::as_mut)
    }

    /// Items in it.
    fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }

    fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|t| (i as u32, t)))
    }
}

type InstId = u32;

/// One per-flow queue of a flowset.
#[derive(Debug)]
struct FlowQueue<P> {
    pkts: VecDeque<Held<P>>,
    bytes: u64,
    flowset: u32,
    inst: InstId,
    slot: Slot,
    /// Arrivals and drops (lengths are `pkts`/`bytes`).
    tot_pkts: u64,
    tot_bytes: u64,
    drops: u64,
    /// Packets its AQM marked with ECN CE (not drops).
    marks: u64,
    /// Its random stream and what draws from it, made only for a queue that
    /// needs them (an idle flow of a plain pipe stays small).
    fx: Option<Box<QueueFx>>,
    /// Had an arrival since the last expiry sweep.
    touched: bool,
}

/// A queue's AQM, its own random stream, and the state of its flowset's
/// `loss`, `duplicate` and `corrupt`.
#[derive(Debug)]
struct QueueFx {
    rng: Rng,
    aqm: Option<Box<dyn AqmState>>,
    /// Its flowset's options that act on entry.
    entry: EntryOptions,
    loss: LossState,
    dup: DuplicateState,
    corrupt: corrupt::CorruptState,
    /// Registered entry impairments' state ([`States::entry`]).
    staged: Option<Box<States>>,
}

impl QueueFx {
    fn new(rng: Rng, aqm: Option<Box<dyn AqmState>>, cfg: &FlowsetConfig) -> Box<Self> {
        Box::new(QueueFx {
            rng,
            aqm,
            entry: EntryOptions::of(cfg),
            loss: LossState::default(),
            dup: DuplicateState::default(),
            corrupt: corrupt::CorruptState::default(),
            staged: States::entry(None, &cfg.staged),
        })
    }
}

/// A flowset's options that act on a packet as it enters one of its queues,
/// drawn from the queue's stream: `plr`, `loss`, `duplicate`, `corrupt`.
/// Each [`QueueFx`] keeps a copy, kept in step by `set_flowset`, so that a
/// packet's entry reads them from the queue it already holds: a queue
/// without them (a plain pipe's) never reads or copies them.
#[derive(Debug, Clone, Copy)]
struct EntryOptions {
    plr: Probability,
    loss: Option<LossModel>,
    duplicate: Option<Duplicate>,
    corrupt: Option<Corrupt>,
}

impl EntryOptions {
    fn of(cfg: &FlowsetConfig) -> Self {
        EntryOptions {
            plr: cfg.plr,
            loss: cfg.loss,
            duplicate: cfg.duplicate,
            corrupt: cfg.corrupt,
        }
    }
}

/// Whether a queue of a flowset configured so needs its [`QueueFx`].
fn needs_queue_fx(cfg: &FlowsetConfig, aqm: bool) -> bool {
    aqm || !cfg.plr.is_zero()
        || cfg.loss.is_some()
        || cfg.duplicate.is_some()
        || cfg.corrupt.is_some()
        || !cfg.staged.is_empty()
}

/// A scheduler instance with its own link.
struct Instance<P> {
    sched: u32,
    id: FlowKey,
    policy: Box<dyn SchedInstance>,
    /// Queues attached to this instance.
    queues: Vec<QueueId>,
    /// A flow-queueing type's bucket → queue table, per flowset feeding the
    /// instance (see [`BucketTable`]).
    tables: Vec<BucketTable>,
    /// Packets waiting in those queues.
    backlog: u32,
    link: LinkState,
    /// A copy of its scheduler's link parameters, kept in step by
    /// `set_link`/`set_sched`/`refill`, so the data path needs no lookup.
    params: LinkParams,
    /// Its type's [`SchedType::idle_bypass`].
    bypass: bool,
    /// Packets it may hold across its queues, for a flow-queueing type
    /// ([`SubQueues::limit`]); its flowsets' own limits do not apply then.
    limit: Option<u32>,
    link_timer: Option<Nanos>,
    dline: VecDeque<Held<P>>,
    dline_timer: Option<Nanos>,
    /// Its own random stream: profile, jitter, reorder, slot draws.
    rng: Rng,
    /// Jitter, reorder, slot and trace state, and the delay line of packets
    /// that may overtake; made when the link first has one of them.
    fx: Option<Box<LinkFx<P>>>,
    counters: FlowCounters,
    /// Its scheduler was deleted or re-masked: it only drains its delay line.
    retired: bool,
    /// Had an arrival since the last expiry sweep.
    touched: bool,
}

impl<P> Instance<P> {
    /// Packets past its scheduler: on the link (a trace's head) or on a
    /// delay line.
    fn holds_in_flight(&self) -> bool {
        !self.dline.is_empty() || self.fx.as_ref().is_some_and(|f| f.held() > 0)
    }
}

/// The random stream of the queue with id `id` in flowset `flowset` under
/// engine seed `seed`: what its `plr`, loss, duplicate, corrupt and AQM draw
/// from. Pipe N's unmasked queue is `queue_stream(seed, N + 2 × 65536,
/// &FlowKey::default())`. Exposed so that models in tests can draw the
/// engine's numbers.
pub fn queue_stream(seed: u64, flowset: u32, id: &FlowKey) -> Rng {
    Rng::stream(seed, &stream_name(1, flowset, id))
}

/// The random stream of a queue (`kind` 1, flowset `nr`) or a scheduler
/// instance (`kind` 2, scheduler `nr`) with flow id `id`, on the link that
/// scheduler `sched` drives: named from the engine's `seed`, or, if that
/// link has a `seed` of its own, from it and the object's place in its pipe
/// ([`pipe_place`]), so that the pipe's number does not count. Made when
/// the object is, never per packet.
fn object_stream(
    seed: u64,
    links: &FxHashMap<u32, LinkConfig>,
    kind: u64,
    nr: u32,
    sched: u32,
    id: &FlowKey,
) -> Rng {
    match links.get(&(sched % DN_MAX_ID)).and_then(|l| l.seed) {
        Some(own) => Rng::stream(own.0, &stream_name(kind + 2, pipe_place(kind, nr), id)),
        None => Rng::stream(seed, &stream_name(kind, nr, id)),
    }
}

/// Where flowset (`kind` 1) or scheduler (`kind` 2) `nr` is in its pipe:
/// the pipe's own queue 0, `queue M` M; scheduler N 0, its FIFO N+65536 1.
fn pipe_place(kind: u64, nr: u32) -> u32 {
    match kind {
        1 if nr > 2 * DN_MAX_ID => 0,
        1 => nr,
        _ => nr / DN_MAX_ID,
    }
}

/// The name of a queue's (`kind` 1, flowset `nr`) or an instance's (`kind`
/// 2, scheduler `nr`) random stream: its object and its flow id (kinds 3 and
/// 4 for those of a pipe with its own seed). Fixed by the words alone,
/// never by hashing with a seeded hasher.
fn stream_name(kind: u64, nr: u32, id: &FlowKey) -> [u64; 8] {
    [
        kind,
        u64::from(nr),
        id.src as u64,
        (id.src >> 64) as u64,
        id.dst as u64,
        (id.dst >> 64) as u64,
        u64::from(id.sport)
            | u64::from(id.dport) << 16
            | u64::from(id.proto) << 32
            | u64::from(id.v6) << 40,
        u64::from(id.flow_label),
    ]
}

/// Where a flow-queueing instance keeps the queue of each bucket for one
/// flowset, so that a packet finds its queue with one index instead of a
/// probe of the flowset's queue map (a table of `flows` ids, as FreeBSD's
/// instance holds an array of `flows` queues). It mirrors the map: a queue
/// enters both when made, and leaves the table when it leaves the map.
#[derive(Debug)]
struct BucketTable {
    flowset: u32,
    queues: Vec<QueueId>,
}

/// An empty [`BucketTable`] entry.
const NO_QUEUE: QueueId = QueueId::MAX;

struct Sched {
    kind: &'static SchedType,
    params: Vec<(String, u64)>,
    mask: FlowMask,
    link: LinkParams,
    instances: FxHashMap<FlowKey, InstId>,
    /// Its type's [`SchedType::sub_queues`] for its parameters.
    sub: Option<SubQueues>,
    /// Bytes of an instance's policy and of a sub-queue's AQM state, found
    /// when configured so the memory report makes nothing on the data plane.
    sizes: SchedSizes,
}

#[derive(Clone, Copy)]
struct SchedSizes {
    policy: usize,
    sub_aqm: usize,
}

impl SchedSizes {
    fn of(kind: &SchedType, params: &[(String, u64)], sub: Option<&SubQueues>) -> Self {
        SchedSizes {
            policy: std::mem::size_of_val(&*new_policy(kind, params)),
            sub_aqm: sub
                .and_then(|s| s.aqm.new_state(s.aqm_limit))
                .map_or(0, |a| std::mem::size_of_val(&*a)),
        }
    }
}

/// Bytes of the AQM state a queue of a flowset configured so makes itself
/// (0 for none).
fn own_aqm_bytes(cfg: &FlowsetConfig) -> Option<usize> {
    aqm::new_state(&cfg.aqm, cfg.limit).map(|a| std::mem::size_of_val(&*a))
}

struct Flowset {
    cfg: FlowsetConfig,
    sched: u32,
    queues: FxHashMap<(InstId, FlowKey), QueueId>,
    /// Unmasked flowset on an unmasked scheduler: its single queue, if made.
    solo: Option<QueueId>,
    /// [`own_aqm_bytes`] of its configuration.
    aqm_bytes: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    Link,
    DelayLine,
}

/// Heap entry: (time, insertion order, instance, kind). The insertion order
/// makes ties deterministic; stale entries are skipped on pop.
type Timer = Reverse<(Nanos, u64, InstId, TimerKind)>;

/// The instances' link and delay-line timers, earliest first.
struct Timers {
    heap: BinaryHeap<Timer>,
    seq: u64,
    /// Entries past which the stale ones are swept out ([`Self::compact`]).
    compact_at: usize,
}

/// The least [`Timers::compact_at`]: a few instances never pay for a sweep.
const COMPACT_MIN: usize = 1024;

impl Default for Timers {
    fn default() -> Self {
        Timers {
            heap: BinaryHeap::new(),
            seq: 0,
            compact_at: COMPACT_MIN,
        }
    }
}

impl Timers {
    #[inline]
    fn arm(&mut self, at: Nanos, inst: InstId, kind: TimerKind) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, inst, kind)));
    }

    /// Keeps only the entries that will still run: an instance's current
    /// link and delay-line timers, each once (the first armed, which would
    /// run first). A superseded entry waits in the heap until its time, and
    /// a delay line that packets keep overtaking (`reorder`, unordered
    /// jitter) re-arms its later release for each: with a long delay they
    /// piled up by arrivals × delay, not by packets held. Swept when the heap
    /// has doubled since the last sweep, so the cost is constant per arm and
    /// the heap holds at most about four entries per instance. Which timer
    /// runs when is unchanged.
    fn compact<P>(&mut self, instances: &Slab<Instance<P>>) {
        let mut v = std::mem::take(&mut self.heap).into_vec();
        v.retain(|&Reverse((t, _, i, kind))| {
            instances.get(i).is_some_and(|inst| match kind {
                TimerKind::Link => inst.link_timer == Some(t),
                TimerKind::DelayLine => inst.dline_timer == Some(t),
            })
        });
        v.sort_unstable_by_key(|&Reverse((_, seq, i, kind))| (i, kind, seq));
        v.dedup_by_key(|&mut Reverse((_, _, i, kind))| (i, kind));
        v.shrink_to_fit();
        self.heap = BinaryHeap::from(v);
        self.compact_at = (2 * self.heap.len()).max(COMPACT_MIN);
    }

    /// Whether [`Self::compact`] is due.
    #[inline]
    fn bloated(&self) -> bool {
        self.heap.len() > self.compact_at
    }
}

/// The least time link `l` keeps a packet from the end of its transmission
/// to its exit: its delay, less a uniform jitter's span; 0 with a jitter
/// drawn from a table (unbounded below, then clamped at 0) or with
/// `reorder` (whose packets skip the delay).
fn least_delay(l: &LinkConfig) -> Nanos {
    if l.reorder.is_some() {
        return 0;
    }
    match &l.jitter {
        None => l.delay,
        Some(j) if j.distribution == crate::impair::dist::Distribution::Uniform => {
            l.delay.saturating_sub(j.amount)
        }
        Some(_) => 0,
    }
}

/// Packets an AQM dropped during a service leave, at `now`, as `aqm` drops.
fn exit_aqm_drops<P>(
    exits: &mut VecDeque<Exit<P>>,
    drops: &mut Vec<Held<P>>,
    backlog: &mut u32,
    counters: &mut FlowCounters,
    now: Nanos,
) {
    for held in drops.drain(..) {
        *backlog = backlog.saturating_sub(1);
        counters.drops += 1;
        exits.push_back(Exit {
            held,
            at: now,
            drop: Some(DropReason::Aqm),
        });
    }
}

// ------------------------------------------------------------ dummynet

pub(crate) struct Pipes<P> {
    /// The engine's seed, from which every queue's and instance's stream is named.
    seed: u64,
    links: FxHashMap<u32, LinkConfig>,
    /// When each traced link's trace started (its configuration time).
    trace_starts: FxHashMap<u32, Nanos>,
    scheds: FxHashMap<u32, Sched>,
    flowsets: FxHashMap<u32, Flowset>,
    queues: Slab<FlowQueue<P>>,
    instances: Slab<Instance<P>>,
    timers: Timers,
    /// The least time any configured link keeps a packet between the end
    /// of its transmission and its exit ([`least_delay`]): a link timer at
    /// `t` lets no packet out before `t + least_delay`.
    least_delay: Nanos,
    /// Packets that left (or were dropped inside) and await the engine.
    pub exits: VecDeque<Exit<P>>,
    /// ECN CE marks set by AQMs, engine-wide.
    pub marks: u64,
    /// Copies made by `duplicate` since the engine last took the count (each
    /// is a new packet in the books).
    pub new_copies: u64,
    /// Their packet bytes.
    pub new_copy_bytes: u64,
    /// Packet bytes a copy may still add under `held_limit` (set by the
    /// engine before each `enqueue`; `u64::MAX` without a limit). A copy
    /// that would not fit is not made, and counted in `copies_failed`.
    pub copy_room: u64,
    /// Copies `duplicate` wanted but the payload could not make.
    pub copies_failed: u64,
    /// Packets `corrupt` hit.
    pub corrupted: u64,
    /// Runs of a trace's opportunities served (a run: those at one
    /// instant), for tests of a dense trace's cost.
    pub trace_runs: u64,
    /// The most queues, and the most scheduler instances, an arrival may
    /// make exist (`instance_limit`; set by the engine).
    pub instance_limit: u32,
}

/// Why a packet could not be queued.
pub(crate) struct Rejected<P> {
    pub held: Held<P>,
    pub reason: DropReason,
}

impl<P> Pipes<P> {
    pub fn new(seed: u64) -> Self {
        Pipes {
            seed,
            trace_starts: FxHashMap::default(),
            links: FxHashMap::default(),
            scheds: FxHashMap::default(),
            flowsets: FxHashMap::default(),
            queues: Slab::default(),
            instances: Slab::default(),
            timers: Timers::default(),
            least_delay: 0,
            exits: VecDeque::new(),
            marks: 0,
            new_copies: 0,
            new_copy_bytes: 0,
            copy_room: u64::MAX,
            copies_failed: 0,
            corrupted: 0,
            trace_runs: 0,
            instance_limit: crate::units::DEFAULT_INSTANCE_LIMIT,
        }
    }
}

/// The flowset a rule target names: `pipe N` uses the pipe's implicit queue.
#[inline]
pub(crate) fn flowset_of(t: Target) -> u32 {
    match t {
        Target::Pipe(n) => n + 2 * DN_MAX_ID,
        Target::Queue(n) => n,
    }
}
