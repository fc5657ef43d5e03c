//! Dummynet: flowsets, per-flow queues, scheduler instances, links and delay
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
//! flow id, so configuring one pipe never changes another pipe's draws.

mod delayline;
pub(crate) mod link;
pub mod profile;

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

/// The name of a queue's (`kind` 1, flowset `nr`) or an instance's (`kind`
/// 2, scheduler `nr`) random stream: its object and its flow id. Fixed by
/// the words alone, never by hashing with a seeded hasher.
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

pub(crate) struct Dummynet<P> {
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

impl<P> Dummynet<P> {
    pub fn new(seed: u64) -> Self {
        Dummynet {
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

impl<P: Payload> Dummynet<P> {
    // -------------------------------------------------------- data path

    /// The scheduler instance a packet bound for `target` with flow `key`
    /// would join: its scheduler's number and the flow under the
    /// scheduler's mask (see `Engine::instance`). `None` when the target
    /// or its scheduler does not exist.
    pub fn instance_of(&self, target: Target, key: &FlowKey) -> Option<(u32, FlowKey)> {
        let fs = self.flowsets.get(&flowset_of(target))?;
        let sched = self.scheds.get(&fs.sched)?;
        Some((fs.sched, sched.mask.apply(key)))
    }

    /// Queues a packet for `held.target`, or says why not. A copy made by
    /// `duplicate` is queued after it (or dropped into `exits`) and counted
    /// in `new_copies`.
    #[inline]
    pub fn enqueue(&mut self, now: Nanos, mut held: Held<P>) -> Result<(), Rejected<P>> {
        let fs_nr = flowset_of(held.target);
        let Some(fs) = self.flowsets.get(&fs_nr) else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let limit = fs.cfg.limit;
        // Fast path: an unmasked flowset on an unmasked scheduler has one queue.
        let (inst, q) = match fs
            .solo
            .and_then(|q| self.queues.get(q).map(|queue| (queue.inst, q)))
        {
            Some(found) => found,
            None => {
                if !self.scheds.contains_key(&fs.sched) {
                    return Err(Rejected {
                        held,
                        reason: DropReason::Unlinked,
                    });
                }
                match self.queue_for(fs_nr, &held.info.key, false) {
                    Ok(found) => found,
                    Err(reason) => return Err(Rejected { held, reason }),
                }
            }
        };
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let len = held.info.len;
        queue.tot_pkts += 1;
        queue.tot_bytes += u64::from(len);
        queue.touched = true;
        instance.counters.tot_pkts += 1;
        instance.counters.tot_bytes += u64::from(len);
        instance.touched = true;

        // FreeBSD's order: random loss, then AQM, then the limit; netem's
        // loss, duplicate and corrupt follow `plr` as more random loss.
        let mut copy = None;
        if let Some(fx) = queue.fx.as_deref_mut() {
            let EntryOptions {
                plr,
                loss,
                duplicate: dup,
                corrupt,
            } = fx.entry;
            if !plr.is_zero() && fx.rng.chance(plr) {
                queue.drops += 1;
                instance.counters.drops += 1;
                return Err(Rejected {
                    held,
                    reason: DropReason::Plr,
                });
            }
            if let Some(m) = &loss {
                if fx.loss.lost(m, &mut fx.rng) {
                    queue.drops += 1;
                    instance.counters.drops += 1;
                    return Err(Rejected {
                        held,
                        reason: DropReason::Loss,
                    });
                }
            }
            // The copy is made before corruption, as netem makes it.
            if dup.is_some_and(|d| fx.dup.copy(d, &mut fx.rng)) {
                let fits = u64::from(len) <= self.copy_room;
                match fits.then(|| held.payload.duplicate()).flatten() {
                    Some(payload) => {
                        copy = Some(Held {
                            payload,
                            info: held.info,
                            tags: held.tags,
                            seq: held.seq,
                            rule: held.rule,
                            target: held.target,
                            enq_time: now,
                            out_time: now,
                            lost: false,
                        })
                    }
                    None => self.copies_failed += 1,
                }
            }
            if corrupt.is_some_and(|c| fx.corrupt.hit(c, &mut fx.rng)) {
                self.corrupted += 1;
                if let Some(bytes) = held.payload.bytes_mut() {
                    corrupt::flip_one_bit(bytes, &mut fx.rng);
                }
            }
        }
        match copy {
            None => self.admit(now, q, inst, held, limit),
            Some(copy) => self.admit_with_copy(now, q, inst, held, copy, limit),
        }
    }

    /// [`Self::admit`] for a packet and then the copy `duplicate` made of
    /// it; if the queue refuses the copy, it leaves at once as a drop. Out
    /// of line, so that the packet without a copy goes straight from
    /// `admit` to the caller.
    #[inline(never)]
    fn admit_with_copy(
        &mut self,
        now: Nanos,
        q: QueueId,
        inst: InstId,
        held: Held<P>,
        copy: Held<P>,
        limit: QueueLimit,
    ) -> Result<(), Rejected<P>> {
        let result = self.admit(now, q, inst, held, limit);
        self.new_copies += 1;
        let len = u64::from(copy.info.len);
        self.new_copy_bytes += len;
        if let (Some(queue), Some(instance)) =
            (self.queues.get_mut(q), self.instances.get_mut(inst))
        {
            queue.tot_pkts += 1;
            queue.tot_bytes += len;
            instance.counters.tot_pkts += 1;
            instance.counters.tot_bytes += len;
        }
        if let Err(Rejected { held, reason }) = self.admit(now, q, inst, copy, limit) {
            self.exits.push_back(Exit {
                held,
                at: now,
                drop: Some(reason),
            });
        }
        result
    }

    /// The rest of the entry for a packet that survived random loss: its
    /// queue's AQM and limit, then the scheduler (or straight to an idle link).
    /// Always inlined: a call would move the packet (some 150 bytes) once
    /// more on every entry, and write its refusal once more on the way out.
    #[inline(always)]
    fn admit(
        &mut self,
        now: Nanos,
        q: QueueId,
        inst: InstId,
        mut held: Held<P>,
        limit: QueueLimit,
    ) -> Result<(), Rejected<P>> {
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let len = held.info.len;
        let state = QueueState {
            len_pkts: queue.pkts.len() as u32,
            len_bytes: queue.bytes,
        };
        let mut reason = None;
        let mut marked = false;
        if let Some(QueueFx {
            aqm: Some(a), rng, ..
        }) = queue.fx.as_deref_mut()
        {
            // A flow-queueing policy takes an idle queue back as a new flow:
            // FreeBSD's fq_codel and fq_pie restart its AQM then. Done before
            // the AQM sees the packet, which matches FreeBSD's fq_pie, where
            // the PIE of an idle flow is off and so cannot drop it.
            if state.len_pkts == 0 && instance.policy.is_idle(queue.slot) {
                a.restart(now);
            }
            let arrival = Arrival {
                now,
                len,
                ect: ecn::capable(held.payload.ip_bytes()),
                queue: state,
                link_bw: instance.params.bw,
            };
            match a.on_enqueue(&arrival, rng) {
                AqmVerdict::Accept => {}
                AqmVerdict::Mark => {
                    marked = held.payload.ip_bytes_mut().is_some_and(ecn::set_ce);
                    if !marked {
                        reason = Some(DropReason::Aqm);
                    }
                }
                AqmVerdict::Drop => reason = Some(DropReason::Aqm),
            }
        }
        // FreeBSD compares the bytes already queued, so one packet may
        // overshoot a byte limit; kept for identical drop counts.
        if reason.is_none() && instance.limit.is_none() && aqm::queue_full(limit, state) {
            reason = Some(DropReason::QueueFull);
        }
        if let Some(reason) = reason {
            queue.drops += 1;
            instance.counters.drops += 1;
            return Err(Rejected { held, reason });
        }
        if marked {
            queue.marks += 1;
            self.marks += 1;
        }
        held.enq_time = now;
        // A queue with an AQM always goes through enqueue and dequeue, so
        // the AQM sees every departure (as in FreeBSD). A gated link (slots,
        // a trace) decides itself when a packet may start.
        if instance.backlog == 0
            && !instance.link.active
            && instance.bypass
            && queue.fx.as_ref().is_none_or(|f| f.aqm.is_none())
            && !instance.params.gated
        {
            // Nothing queued and an idle link: the policy would hand this
            // packet straight back, so give it to the link directly.
            self.kick(now, inst, Some(held));
            return Ok(());
        }
        self.push(q, inst, held);
        if let Some(instance) = self.instances.get(inst) {
            if instance.limit.is_some_and(|l| instance.backlog > l) {
                self.drop_longest(now, inst);
            }
        }
        self.kick(now, inst, None);
        Ok(())
    }

    /// A flow-queueing instance holds more than its limit: drops the head
    /// packet of its longest queue (by packets; the first found on a tie), as
    /// FreeBSD's fq_codel and fq_pie do, which is seldom the queue of the
    /// light flow that just arrived. The scan is over the instance's queues,
    /// at most `flows` of them, and only on overflow.
    fn drop_longest(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        let mut longest: Option<(usize, QueueId)> = None;
        for &q in &instance.queues {
            let n = self.queues.get(q).map_or(0, |queue| queue.pkts.len());
            if n > longest.map_or(0, |(m, _)| m) {
                longest = Some((n, q));
            }
        }
        let Some(queue) = longest.and_then(|(_, q)| self.queues.get_mut(q)) else {
            return;
        };
        let Some(held) = queue.pkts.pop_front() else {
            return;
        };
        queue.bytes = queue.bytes.saturating_sub(u64::from(held.info.len));
        queue.drops += 1;
        instance.backlog = instance.backlog.saturating_sub(1);
        instance.counters.drops += 1;
        self.exits.push_back(Exit {
            held,
            at: now,
            drop: Some(DropReason::QueueFull),
        });
    }

    /// Appends to a queue and tells its scheduler.
    #[inline]
    fn push(&mut self, q: QueueId, inst: InstId, held: Held<P>) {
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return;
        };
        let len = held.info.len;
        let was_empty = queue.pkts.is_empty();
        queue.bytes += u64::from(len);
        queue.pkts.push_back(held);
        instance.backlog += 1;
        instance.policy.enqueue(queue.slot, len, was_empty);
    }

    /// Starts an idle link, granting its burst allowance, and serves it;
    /// `first` is a packet handed over without queueing (see
    /// [`SchedType::idle_bypass`]), sent before anything the policy holds.
    /// Always inlined: a call would move `first` once more on its way to
    /// the link.
    #[inline(always)]
    fn kick(&mut self, now: Nanos, inst: InstId, first: Option<Held<P>>) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        if instance.link.active {
            return;
        }
        instance.link.wake(now, &instance.params);
        if instance.params.gated && !self.wake_gate(now, inst) {
            return;
        }
        self.serve(now, inst, first);
    }

    /// A gated link wakes: a slotted one is served in its slot (true); a
    /// traced one waits for its next opportunity, those up to now having
    /// passed with nothing to send (false).
    fn wake_gate(&mut self, now: Nanos, inst: InstId) -> bool {
        let Some(instance) = self.instances.get_mut(inst) else {
            return false;
        };
        let fx = instance.fx.get_or_insert_with(Default::default);
        if let Some(slot) = &instance.params.slot {
            fx.slot.wake(now, slot, &mut instance.rng);
        }
        if let Some(tr) = &instance.params.trace {
            let start = instance.params.trace_start;
            fx.cursor = tr.first_after(start, now);
            // A finished `once` trace carries nothing more: its packets
            // stay queued (and are counted inside).
            if let Some(c) = fx.cursor {
                let at = tr.at(start, c);
                instance.link.active = true;
                instance.link_timer = Some(at);
                self.timers.arm(at, inst, TimerKind::Link);
            }
            return false;
        }
        true
    }

    /// FreeBSD's `serve_sched`: while the link has credit, dequeue and put on
    /// the wire; the packet that overdraws the credit finishes when the credit
    /// is back to zero, and the link sleeps until then. A slotted link also
    /// stops when its slot closes and sleeps until the next one opens.
    fn serve(&mut self, now: Nanos, inst: InstId, mut first: Option<Held<P>>) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        if instance.params.trace.is_some() {
            self.serve_trace(now, inst);
            return;
        }
        let Instance {
            params,
            link,
            link_timer,
            policy,
            backlog,
            limit,
            dline,
            rng,
            fx,
            counters,
            retired,
            ..
        } = instance;
        link.active = false;
        *link_timer = None;
        link.refill(now, params);
        if params.needs_fx() {
            fx.get_or_insert_with(Default::default);
        }
        // A packet a trace was sending when the link was reconfigured goes first.
        if first.is_none() {
            first = fx.as_mut().and_then(|f| f.head.take()).map(|(h, _)| h);
        }
        let lines_were_idle = dline.is_empty() && fx.as_ref().is_none_or(|f| f.early_is_empty());
        let mut ops = Ops {
            queues: &mut self.queues,
            popped: None,
            now,
            aqm_drops: Vec::new(),
            marks: 0,
        };
        let mut overtook = false;
        let mut slot_wait = None;
        // `backlog` guards the loop so an emptied instance costs no extra
        // call into its policy, except for a flow-queueing one (`limit`):
        // FreeBSD's fq_codel and fq_pie learn that their flows went idle
        // from the dequeue that finds them empty, which takes each out of
        // its list, so a returning flow is new again (and its AQM restarted).
        let flow_queueing = limit.is_some();
        while link.credit >= 0 {
            if let Some(t) = fx
                .as_ref()
                .filter(|_| params.slot.is_some())
                .and_then(|f| f.slot.closed_until(now))
            {
                if first.is_some() || *backlog > 0 {
                    slot_wait = Some(t);
                }
                break;
            }
            let mut held = match first.take() {
                Some(h) => h,
                None => {
                    if (*backlog == 0 && !flow_queueing) || policy.dequeue(&mut ops).is_none() {
                        break;
                    }
                    let Some(h) = ops.popped.take() else {
                        break;
                    };
                    *backlog = backlog.saturating_sub(1);
                    h
                }
            };
            let mut extra = 0;
            if let Some(pf) = &params.profile {
                let (e, lost) = profile::draw(pf, rng);
                extra = e;
                held.lost = lost;
            }
            link.credit -= params.cost(held.info.len, extra);
            if let (Some(slot), Some(f)) = (&params.slot, fx.as_mut()) {
                f.slot.sent(now, held.info.len, slot, rng);
            }
            // The packet that overdraws the credit is off the wire when the
            // credit is back to zero.
            let exit = if link.credit < 0 {
                now.saturating_add(link.time_to_zero(params))
            } else {
                now
            };
            if params.delay == 0
                && !params.shaped_delay
                && exit == now
                && dline.is_empty()
                && fx.as_ref().is_none_or(|f| f.early_is_empty())
            {
                // Off the wire at once with no delay to serve: skip the delay
                // line. (A packet that overdraws the credit still goes there,
                // to wait for the end of its transmission.)
                let drop = held.lost.then_some(DropReason::ProfileLoss);
                if drop.is_some() {
                    counters.drops += 1;
                }
                self.exits.push_back(Exit {
                    held,
                    at: now,
                    drop,
                });
                continue;
            }
            overtook |= delayline::place(params, fx.as_deref_mut(), rng, dline, held, exit);
        }
        self.marks += ops.marks;
        exit_aqm_drops(&mut self.exits, &mut ops.aqm_drops, backlog, counters, now);
        if link.credit >= 0 && slot_wait.is_none() {
            link.idle_time = now;
        } else {
            let mut at = if link.credit < 0 {
                now.saturating_add(link.time_to_zero(params))
            } else {
                now
            };
            if let Some(t) = slot_wait {
                at = at.max(t);
                // No credit builds up while the link waits for its slot: it
                // is not idle (its packets wait), just not allowed to send.
                link.credit = link.credit.max(0);
                link.sched_time = at;
            }
            link.active = true;
            *link_timer = Some(at);
            self.timers.arm(at, inst, TimerKind::Link);
        }
        let holds = !dline.is_empty() || fx.as_ref().is_some_and(|f| !f.early_is_empty());
        if lines_were_idle || overtook {
            if holds {
                self.release(now, inst);
            } else if *retired {
                self.reap(inst);
            }
        }
    }

    /// A traced link at one of its opportunities (mahimahi's
    /// `rationalize`): each opportunity at `now` carries 1504 bytes of the
    /// queue, a packet larger than what is left finishing in a later one;
    /// what an opportunity cannot use is lost. The link then sleeps until
    /// the next opportunity if anything waits, or goes idle.
    fn serve_trace(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        let Instance {
            params,
            link,
            link_timer,
            policy,
            backlog,
            limit,
            dline,
            rng,
            fx,
            counters,
            ..
        } = instance;
        let Some(tr) = params.trace.clone() else {
            return;
        };
        let start = params.trace_start;
        link.active = false;
        *link_timer = None;
        let fx = fx.get_or_insert_with(Default::default);
        let lines_were_idle = dline.is_empty() && fx.early_is_empty();
        // The opportunity this timer was set for; found again if the link
        // changed underneath.
        let mut cur = match fx.cursor.filter(|&c| tr.at(start, c) == now) {
            Some(c) => Some(c),
            None => tr.first_after(start, now.saturating_sub(1)),
        };
        let mut ops = Ops {
            queues: &mut self.queues,
            popped: None,
            now,
            aqm_drops: Vec::new(),
            marks: 0,
        };
        let flow_queueing = limit.is_some();
        let mut overtook = false;
        while let Some(c) = cur.filter(|&c| tr.at(start, c) <= now) {
            // The run of opportunities at this instant is one credit: the
            // same as serving them one by one (a packet's bytes carry from
            // one to the next, and what the queue leaves is lost either
            // way), at a cost that does not grow with the run.
            let run = tr.run_len(c.index).max(1);
            self.trace_runs += 1;
            let mut budget = u64::from(trace::OPPORTUNITY_BYTES).saturating_mul(run as u64);
            while budget > 0 {
                if fx.head.is_none() {
                    if (*backlog == 0 && !flow_queueing) || policy.dequeue(&mut ops).is_none() {
                        break;
                    }
                    let Some(h) = ops.popped.take() else {
                        break;
                    };
                    *backlog = backlog.saturating_sub(1);
                    let bill = params.billed(h.info.len).max(1);
                    fx.head = Some((h, bill));
                }
                let Some((_, left)) = fx.head.as_mut() else {
                    break;
                };
                if *left > budget {
                    *left -= budget;
                    budget = 0;
                } else {
                    budget -= *left;
                    if let Some((h, _)) = fx.head.take() {
                        overtook |= delayline::place(params, Some(&mut *fx), rng, dline, h, now);
                    }
                }
            }
            cur = tr.next(trace::TraceCursor {
                lap: c.lap,
                index: c.index + run - 1,
            });
        }
        fx.cursor = cur;
        self.marks += ops.marks;
        exit_aqm_drops(&mut self.exits, &mut ops.aqm_drops, backlog, counters, now);
        if fx.head.is_some() || *backlog > 0 {
            if let Some(c) = cur {
                let at = tr.at(start, c);
                link.active = true;
                *link_timer = Some(at);
                self.timers.arm(at, inst, TimerKind::Link);
            }
        }
        let holds = !dline.is_empty() || !fx.early_is_empty();
        if (lines_were_idle || overtook) && holds {
            self.release(now, inst);
        }
    }

    /// Moves due packets off the delay lines, in exit order, and arms the
    /// release for the next.
    fn release(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        instance.dline_timer = None;
        while let Some((at, fifo)) = delayline::next_out(&instance.dline, instance.fx.as_deref()) {
            if at > now {
                instance.dline_timer = Some(at);
                self.timers.arm(at, inst, TimerKind::DelayLine);
                break;
            }
            let h = if fifo {
                instance.dline.pop_front()
            } else {
                instance.fx.as_mut().and_then(|f| f.pop_early())
            };
            let Some(h) = h else {
                break;
            };
            let (at, drop) = (h.out_time, h.lost.then_some(DropReason::ProfileLoss));
            if drop.is_some() {
                instance.counters.drops += 1;
            }
            self.exits.push_back(Exit { held: h, at, drop });
        }
        // Only a retired instance can be reaped; checked here, where the
        // instance is at hand, the release of a live one skips the call.
        if instance.retired {
            self.reap(inst);
        }
        if self.timers.bloated() {
            self.timers.compact(&self.instances);
        }
    }

    /// Frees a retired instance once it holds nothing.
    fn reap(&mut self, inst: InstId) {
        let done = self.instances.get(inst).is_some_and(|i| {
            i.retired
                && !i.holds_in_flight()
                && i.backlog == 0
                && !i.link.active
                && i.queues.is_empty()
        });
        if done {
            self.instances.remove(inst);
        }
    }

    /// Whether every link only delays (no bandwidth, profile or
    /// impairment) and every flowset takes packets as they come (no `plr`,
    /// impairment or AQM): then nothing here counts packets, and a burst
    /// fares as the packets it stands for would.
    pub fn only_delays(&self) -> bool {
        let link =
            |l: &LinkConfig| l.bw == 0 && l.profile.is_none() && l.impairments().next().is_none();
        let flowset = |f: &Flowset| {
            f.cfg.plr.is_zero() && f.cfg.impairments().next().is_none() && f.cfg.aqm.is_droptail()
        };
        self.links.values().all(link) && self.flowsets.values().all(flowset)
    }

    /// The least time any configured link keeps a packet after its
    /// transmission (0 without links).
    pub fn least_delay(&self) -> Nanos {
        self.least_delay
    }

    /// The least time a packet sent to `target` stays inside: the least
    /// delay of the link its scheduler feeds. `None` when the target or
    /// its link does not exist (the packet is dropped at the entry).
    pub fn least_delay_of(&self, target: Target) -> Option<Nanos> {
        let fs = self.flowsets.get(&flowset_of(target))?;
        // A pipe's FIFO scheduler is numbered DN_MAX_ID above its link.
        self.links.get(&(fs.sched % DN_MAX_ID)).map(least_delay)
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.timers.heap.peek().map(|Reverse((t, ..))| *t)
    }

    /// The earliest time a packet may leave: each delay-line timer's time,
    /// each link timer's plus the least delay of any link, whichever comes
    /// first. A lower bound, never later than a real exit, so a caller that
    /// only needs to be awake when packets leave may sleep through the link
    /// timers before it: they run, at their own times, whenever the engine
    /// is next driven. Worked out over the timers when they are few (a
    /// shell, a bridge with a few pipes); with more, it is
    /// [`Self::next_deadline`], which keeps the packet path free of any
    /// bookkeeping for it.
    pub fn next_output_deadline(&self) -> Option<Nanos> {
        const SCANNED: usize = 64;
        if self.least_delay == 0 || self.timers.heap.len() > SCANNED {
            return self.next_deadline();
        }
        self.timers
            .heap
            .iter()
            .map(|&Reverse((t, _, _, kind))| match kind {
                TimerKind::Link => t.saturating_add(self.least_delay),
                TimerKind::DelayLine => t,
            })
            .min()
    }

    /// Runs the earliest timer if it is due at or before `now`. Returns false
    /// when nothing is due. Exits land in `self.exits`.
    pub fn run_timer(&mut self, now: Nanos) -> bool {
        let Some(&Reverse((at, _, inst, kind))) = self.timers.heap.peek() else {
            return false;
        };
        if at > now {
            return false;
        }
        if self.timers.bloated() {
            self.timers.compact(&self.instances);
            return true;
        }
        self.timers.heap.pop();
        let Some(i) = self.instances.get(inst) else {
            return true;
        };
        match kind {
            TimerKind::Link if i.link_timer == Some(at) => self.serve(at, inst, None),
            TimerKind::DelayLine if i.dline_timer == Some(at) => self.release(at, inst),
            _ => {} // superseded
        }
        true
    }

    /// The instance and queue for a key in flowset `fs_nr` (which exists and
    /// is linked), created on first use. Past `instance_limit` a new one is
    /// refused (`InstanceLimit`), unless `beyond_limit`: packets already
    /// inside, put back after a reconfiguration, are never lost to it.
    fn queue_for(
        &mut self,
        fs_nr: u32,
        key: &FlowKey,
        beyond_limit: bool,
    ) -> Result<(InstId, QueueId), DropReason> {
        let Some(fs) = self.flowsets.get_mut(&fs_nr) else {
            return Err(DropReason::NoSuchTarget);
        };
        if let Some(q) = fs.solo {
            if let Some(queue) = self.queues.get(q) {
                return Ok((queue.inst, q));
            }
        }
        let Some(sched) = self.scheds.get_mut(&fs.sched) else {
            return Err(DropReason::Unlinked);
        };
        let cap = if beyond_limit {
            usize::MAX
        } else {
            self.instance_limit as usize
        };
        let sid = sched.mask.apply(key);
        let inst = match sched.instances.get(&sid) {
            Some(&i) => i,
            // Refused before anything is made: a flow needs both.
            None if self.instances.len() >= cap || self.queues.len() >= cap => {
                return Err(DropReason::InstanceLimit)
            }
            None => {
                let rng = Rng::stream(self.seed, &stream_name(2, fs.sched, &sid));
                let i = self.instances.insert(Instance {
                    sched: fs.sched,
                    id: sid,
                    policy: new_policy(sched.kind, &sched.params),
                    queues: Vec::new(),
                    tables: Vec::new(),
                    backlog: 0,
                    link: LinkState::default(),
                    params: sched.link.clone(),
                    bypass: sched.kind.idle_bypass,
                    limit: sched.sub.as_ref().map(|s| s.limit),
                    link_timer: None,
                    dline: VecDeque::new(),
                    dline_timer: None,
                    rng,
                    fx: None,
                    counters: FlowCounters::default(),
                    retired: false,
                    touched: true,
                });
                sched.instances.insert(sid, i);
                i
            }
        };
        // A flow-queueing type hashes the 5-tuple into its own buckets and
        // manages them with its own AQM; the flowset's mask and AQM step aside.
        let buckets = sched.sub.as_ref().map_or(0, |sub| sub.buckets);
        let bucket = sched.sub.as_ref().map(|_| sched::bucket_of(key, buckets));
        if let Some(b) = bucket {
            if let Some(q) = bucket_queue(&self.instances, &self.queues, inst, fs_nr, b) {
                return Ok((inst, q));
            }
        }
        let qid = match bucket {
            Some(b) => FlowKey {
                src: u128::from(b),
                ..FlowKey::default()
            },
            None => fs.cfg.mask.apply(key),
        };
        if let Some(&q) = fs.queues.get(&(inst, qid)) {
            if let Some(b) = bucket {
                set_bucket_queue(&mut self.instances, inst, fs_nr, (b, buckets), q);
            }
            return Ok((inst, q));
        }
        if self.queues.len() >= cap {
            // A new flow of the flowset's mask in an instance that exists.
            return Err(DropReason::InstanceLimit);
        }
        let aqm = match &sched.sub {
            Some(sub) => sub.aqm.new_state(sub.aqm_limit),
            None => aqm::new_state(&fs.cfg.aqm, fs.cfg.limit),
        };
        let rng = Rng::stream(self.seed, &stream_name(1, fs_nr, &qid));
        let fx = needs_queue_fx(&fs.cfg, aqm.is_some()).then(|| QueueFx::new(rng, aqm, &fs.cfg));
        let q = self.queues.insert(FlowQueue {
            pkts: VecDeque::new(),
            bytes: 0,
            flowset: fs_nr,
            inst,
            slot: 0,
            tot_pkts: 0,
            tot_bytes: 0,
            drops: 0,
            marks: 0,
            fx,
            touched: true,
        });
        if let Some(instance) = self.instances.get_mut(inst) {
            let slot = instance
                .policy
                .add_queue_with_lmax(q, fs.cfg.weight, fs.cfg.lmax);
            instance.queues.push(q);
            if let Some(queue) = self.queues.get_mut(q) {
                queue.slot = slot;
            }
        }
        fs.queues.insert((inst, qid), q);
        if fs.cfg.mask.is_empty() && sched.mask.is_empty() && sched.sub.is_none() {
            fs.solo = Some(q);
        }
        if let Some(b) = bucket {
            set_bucket_queue(&mut self.instances, inst, fs_nr, (b, buckets), q);
        }
        Ok((inst, q))
    }

    /// FreeBSD's `expire`, run by the engine about once a second: frees the
    /// per-flow queues and scheduler instances that masks created and that
    /// have been empty with no arrival since the previous sweep, so a flow
    /// goes one to two sweep periods after its last packet. Their counters go
    /// with them, as in FreeBSD. Queues that stay (of unmasked flowsets) give
    /// back the buffer they grew while busy. Returns how many queues and
    /// instances were freed.
    pub fn expire_idle(&mut self) -> (usize, usize) {
        let mut freed_queues = 0;
        for (&fs_nr, fs) in self.flowsets.iter_mut() {
            let sched_masked = self
                .scheds
                .get(&fs.sched)
                .is_some_and(|s| !s.mask.is_empty());
            if fs.cfg.mask.is_empty() && !sched_masked {
                continue;
            }
            let queues = &mut self.queues;
            let instances = &mut self.instances;
            fs.queues.retain(|&(inst, qid), &mut q| {
                let Some(queue) = queues.get(q) else {
                    forget_bucket(instances, inst, fs_nr, &qid, q);
                    return false;
                };
                if queue.touched || !queue.pkts.is_empty() {
                    return true;
                }
                forget_bucket(instances, inst, fs_nr, &qid, q);
                if let Some(inst) = instances.get_mut(queue.inst) {
                    inst.policy.remove_queue(queue.slot);
                    inst.queues.retain(|&x| x != q);
                }
                queues.remove(q);
                freed_queues += 1;
                false
            });
        }
        for item in self.queues.items.iter_mut().flatten() {
            if !item.touched && item.pkts.is_empty() && item.pkts.capacity() > 0 {
                item.pkts = VecDeque::new();
            }
            item.touched = false;
        }
        let mut freed_instances = 0;
        for sched in self.scheds.values_mut() {
            if sched.mask.is_empty() {
                continue;
            }
            let instances = &mut self.instances;
            sched.instances.retain(|_, &mut i| {
                let Some(inst) = instances.get(i) else {
                    return false;
                };
                let idle = !inst.touched
                    && inst.queues.is_empty()
                    && inst.backlog == 0
                    && !inst.holds_in_flight()
                    && !inst.link.active;
                if idle {
                    instances.remove(i);
                    freed_instances += 1;
                }
                !idle
            });
        }
        for inst in self.instances.items.iter_mut().flatten() {
            inst.touched = false;
            // Room left by queues that went, given back, so what the
            // instances' lists hold stays within twice the queues that exist.
            if inst.queues.capacity() > 2 * inst.queues.len() + 4 {
                inst.queues.shrink_to_fit();
            }
        }
        (freed_queues, freed_instances)
    }

    /// Bytes an idle per-flow queue costs: its record, its slot in the
    /// flowset's table and its entry in the scheduler policy.
    pub fn idle_queue_bytes(&self) -> usize {
        std::mem::size_of::<Option<FlowQueue<P>>>()
            + std::mem::size_of::<((InstId, FlowKey), QueueId)>()
            + 1 // hashbrown's control byte
    }

    /// Entries in the timer heap (stale ones included).
    pub fn timer_entries(&self) -> usize {
        self.timers.heap.len()
    }

    /// Bytes of the timer heap now and at most: two timers per instance,
    /// which [`Timers::compact`] keeps within twice that plus its minimum,
    /// in an allocation that grew by doubling.
    pub fn timer_bytes(&self) -> (u64, u64) {
        let entry = std::mem::size_of::<Timer>();
        let now = self.timers.heap.capacity() * entry;
        let n_i = (self.instance_limit as usize).max(self.instances.len());
        let most = (2 * 2 * n_i).max(COMPACT_MIN).max(self.timers.compact_at) + 1;
        let worst = (most.next_power_of_two() * entry).max(now);
        (now as u64, worst as u64)
    }

    /// Queues and scheduler instances that exist now (retired ones
    /// finishing their delay lines included): what `instance_limit` bounds.
    pub fn instance_counts(&self) -> (usize, usize) {
        (self.queues.len(), self.instances.len())
    }

    /// Bytes of queue and instance records in use now and at most,
    /// `[queues, instances]`, each `(now, worst)`. Packets are not in them
    /// (see [`crate::Engine::memory`]). The worst case takes `instance_limit`
    /// of each (or as many as exist, if it was lowered under that), each
    /// as large as the largest the configuration makes, in slabs that grew by
    /// doubling: the bound holds whatever traffic arrives.
    pub fn record_bytes(&self) -> [(u64, u64); 2] {
        use std::mem::size_of;
        let slot_q = size_of::<Option<FlowQueue<P>>>();
        let slot_i = size_of::<Option<Instance<P>>>();
        // A slot's index on the free list.
        let free = size_of::<u32>();
        // A hashbrown entry and its control byte.
        let q_entry = size_of::<((InstId, FlowKey), QueueId)>() + 1;
        let i_entry = size_of::<(FlowKey, InstId)>() + 1;
        let fx_base = size_of::<QueueFx>();
        let aqm_bytes =
            |a: &Option<Box<dyn AqmState>>| a.as_deref().map_or(0, std::mem::size_of_val);
        let queue_bytes = |q: &FlowQueue<P>| {
            let fx = q.fx.as_ref().map_or(0, |fx| fx_base + aqm_bytes(&fx.aqm));
            let state = self
                .instances
                .get(q.inst)
                .and_then(|i| self.scheds.get(&i.sched))
                .map_or(0, |s| s.kind.queue_state_bytes);
            q_entry + fx + state
        };
        let instance_bytes = |i: &Instance<P>| {
            let tables: usize = i
                .tables
                .iter()
                .map(|t| t.queues.capacity() * size_of::<QueueId>())
                .sum();
            i_entry
                + std::mem::size_of_val(&*i.policy)
                + i.tables.capacity() * size_of::<BucketTable>()
                + tables
                + i.fx.as_ref().map_or(0, |_| size_of::<LinkFx<P>>())
        };
        // Now: the slabs as allocated, and each live record's own parts.
        let mut queues_now =
            self.queues.items.capacity() * slot_q + self.queues.free.capacity() * free;
        let mut per_queue = 0;
        for (_, q) in self.queues.iter() {
            let b = queue_bytes(q);
            queues_now += b;
            per_queue = per_queue.max(b);
        }
        let mut inst_now =
            self.instances.items.capacity() * slot_i + self.instances.free.capacity() * free;
        let mut lists = 0;
        let mut per_inst = 0;
        for (_, i) in self.instances.iter() {
            let b = instance_bytes(i);
            inst_now += b;
            lists += i.queues.capacity() * size_of::<QueueId>();
            per_inst = per_inst.max(b);
        }
        inst_now += lists;
        // Worst: as many as may exist, each as large as the largest that
        // exists (a retired instance keeps its old policy while it drains)
        // or that the configuration can make.
        for fs in self.flowsets.values() {
            let sched = self.scheds.get(&fs.sched);
            let aqm = match sched.filter(|s| s.sub.is_some()) {
                Some(s) => Some(s.sizes.sub_aqm).filter(|&b| b > 0),
                None => fs.aqm_bytes,
            };
            let fx = if needs_queue_fx(&fs.cfg, aqm.is_some()) {
                fx_base + aqm.unwrap_or(0)
            } else {
                0
            };
            let state = sched.map_or(0, |s| s.kind.queue_state_bytes);
            per_queue = per_queue.max(q_entry + fx + state);
        }
        let fed = |n: u32| self.flowsets.values().filter(|f| f.sched == n).count();
        for (&n, s) in &self.scheds {
            let policy = s.sizes.policy;
            // One bucket table per flowset fed, `buckets` queue ids each, in
            // a list that starts with room for 4.
            let tables = s.sub.as_ref().map_or(0, |sub| {
                let fed = fed(n);
                fed.next_power_of_two().max(4) * size_of::<BucketTable>()
                    + fed * sub.buckets as usize * size_of::<QueueId>()
            });
            per_inst = per_inst.max(i_entry + policy + tables + size_of::<LinkFx<P>>());
        }
        // An instance's list of its queues holds at most every queue, once.
        let limit = self.instance_limit as usize;
        let n_q = limit.max(self.queues.len());
        let n_i = limit.max(self.instances.len());
        let slab = |n: usize, slot: usize, now_cap: usize, now_free: usize| {
            let grown = n.next_power_of_two().max(4);
            grown.max(now_cap) * slot + grown.max(now_free) * free
        };
        let queues_worst = slab(
            n_q,
            slot_q,
            self.queues.items.capacity(),
            self.queues.free.capacity(),
        ) + n_q * per_queue;
        let inst_worst = slab(
            n_i,
            slot_i,
            self.instances.items.capacity(),
            self.instances.free.capacity(),
        ) + n_i * per_inst
            // The instances' lists of their queues: each keeps room for
            // at most 4 more than twice its queues (see `expire_idle`), or
            // what it had grown to when the sweep last looked.
            + (2 * n_q + 4 * n_i).max(lists / size_of::<QueueId>()) * size_of::<QueueId>();
        [
            (queues_now as u64, queues_worst as u64),
            (inst_now as u64, inst_worst as u64),
        ]
    }

    /// Packets held anywhere inside (queues, links, delay lines, exits).
    pub fn held(&self) -> u64 {
        let queued: u64 = self.queues.iter().map(|(_, q)| q.pkts.len() as u64).sum();
        let lines: u64 = self
            .instances
            .iter()
            .map(|(_, i)| (i.dline.len() + i.fx.as_ref().map_or(0, |f| f.held())) as u64)
            .sum();
        queued + lines + self.exits.len() as u64
    }
}

/// The queue of `bucket` for flowset `fs_nr` in flow-queueing instance
/// `inst`, if its [`BucketTable`] knows it.
#[inline]
fn bucket_queue<P>(
    instances: &Slab<Instance<P>>,
    queues: &Slab<FlowQueue<P>>,
    inst: InstId,
    fs_nr: u32,
    bucket: u32,
) -> Option<QueueId> {
    let q = *instances
        .get(inst)?
        .tables
        .iter()
        .find(|t| t.flowset == fs_nr)?
        .queues
        .get(bucket as usize)?;
    queues
        .get(q)
        .is_some_and(|queue| queue.inst == inst && queue.flowset == fs_nr)
        .then_some(q)
}

/// Queue `q`, made for key `qid` of flowset `fs_nr` in `inst`, is leaving:
/// its [`BucketTable`] entry goes, so that a reused id is never found there.
/// (A flow-queueing queue's key holds its bucket in `src`; for any other
/// queue no entry names `q`.)
fn forget_bucket<P>(
    instances: &mut Slab<Instance<P>>,
    inst: InstId,
    fs_nr: u32,
    qid: &FlowKey,
    q: QueueId,
) {
    let Some(instance) = instances.get_mut(inst) else {
        return;
    };
    let entry = instance
        .tables
        .iter_mut()
        .find(|t| t.flowset == fs_nr)
        .and_then(|t| t.queues.get_mut(usize::try_from(qid.src).ok()?));
    if let Some(e) = entry.filter(|e| **e == q) {
        *e = NO_QUEUE;
    }
}

/// Records `q` as the queue of `bucket` (of `buckets`) for flowset `fs_nr`
/// in `inst`.
fn set_bucket_queue<P>(
    instances: &mut Slab<Instance<P>>,
    inst: InstId,
    fs_nr: u32,
    (bucket, buckets): (u32, u32),
    q: QueueId,
) {
    let Some(instance) = instances.get_mut(inst) else {
        return;
    };
    let i = match instance.tables.iter().position(|t| t.flowset == fs_nr) {
        Some(i) => i,
        None => {
            instance.tables.push(BucketTable {
                flowset: fs_nr,
                queues: Vec::new(),
            });
            instance.tables.len() - 1
        }
    };
    let table = &mut instance.tables[i].queues;
    let b = bucket as usize;
    if table.len() <= b {
        table.resize((buckets as usize).max(b + 1), NO_QUEUE);
    }
    table[b] = q;
}

fn new_policy(kind: &SchedType, params: &[(String, u64)]) -> Box<dyn SchedInstance> {
    // Parameters were validated when the scheduler was configured; FIFO is
    // the fallback that cannot fail.
    (kind.new_instance)(params).unwrap_or_else(|_| Box::new(sched::Fifo::default()))
}

/// The scheduler's window on the queues: pops run the queue's AQM.
struct Ops<'a, P> {
    queues: &'a mut Slab<FlowQueue<P>>,
    popped: Option<Held<P>>,
    now: Nanos,
    aqm_drops: Vec<Held<P>>,
    /// ECN marks set during this service.
    marks: u64,
}

impl<P: Payload> QueueOps for Ops<'_, P> {
    #[inline]
    fn head_len(&self, q: QueueId) -> Option<u32> {
        self.queues
            .get(q)
            .and_then(|q| q.pkts.front())
            .map(|h| h.info.len)
    }

    #[inline]
    fn pop(&mut self, q: QueueId) -> Option<u32> {
        let queue = self.queues.get_mut(q)?;
        let mut resumed = false;
        while let Some(mut h) = queue.pkts.pop_front() {
            let state = QueueState {
                len_pkts: queue.pkts.len() as u32 + 1,
                len_bytes: queue.bytes,
            };
            queue.bytes -= u64::from(h.info.len);
            let verdict = match queue.fx.as_deref_mut() {
                Some(QueueFx {
                    aqm: Some(a), rng, ..
                }) => {
                    let departure = Departure {
                        now: self.now,
                        enqueued_at: h.enq_time,
                        len: h.info.len,
                        ect: ecn::capable(h.payload.ip_bytes()),
                        queue: state,
                        resumed,
                    };
                    match a.on_dequeue(&departure, rng) {
                        AqmVerdict::Mark if h.payload.ip_bytes_mut().is_some_and(ecn::set_ce) => {
                            queue.marks += 1;
                            self.marks += 1;
                            AqmVerdict::Accept
                        }
                        AqmVerdict::Mark => AqmVerdict::Drop,
                        v => v,
                    }
                }
                _ => AqmVerdict::Accept,
            };
            if verdict == AqmVerdict::Drop {
                queue.drops += 1;
                self.aqm_drops.push(h);
                resumed = true;
                continue;
            }
            let len = h.info.len;
            self.popped = Some(h);
            return Some(len);
        }
        None
    }
}

// ------------------------------------------------------------ configuration

impl<P: Payload> Dummynet<P> {
    pub fn has_link(&self, n: u32) -> bool {
        self.links.contains_key(&n)
    }

    pub fn has_sched(&self, n: u32) -> bool {
        self.scheds.contains_key(&n)
    }

    pub fn has_flowset(&self, n: u32) -> bool {
        self.flowsets.contains_key(&n)
    }

    pub fn sched_kind(&self, n: u32) -> Option<&'static SchedType> {
        self.scheds.get(&n).map(|s| s.kind)
    }

    pub fn sched_mask(&self, n: u32) -> Option<FlowMask> {
        self.scheds.get(&n).map(|s| s.mask)
    }

    /// Flowset `n`'s configuration and the scheduler it feeds.
    pub fn flowset_config(&self, n: u32) -> Option<(&FlowsetConfig, u32)> {
        self.flowsets.get(&n).map(|f| (&f.cfg, f.sched))
    }

    pub fn sched_params(&self, n: u32) -> Option<&[(String, u64)]> {
        self.scheds.get(&n).map(|s| s.params.as_slice())
    }

    /// Takes every queued packet out (in arrival order) and resets every
    /// scheduler policy, so the configuration can change underneath. Links,
    /// delay lines and counters stay. Follow with [`Self::refill`].
    pub fn drain(&mut self) -> Vec<Held<P>> {
        let mut out = Vec::new();
        for item in self.queues.items.iter_mut().flatten() {
            out.extend(item.pkts.drain(..));
            item.bytes = 0;
        }
        for inst in self.instances.items.iter_mut().flatten() {
            inst.backlog = 0;
        }
        out.sort_by_key(|h| h.seq);
        out
    }

    /// Link `n`'s trace and when it started (its opportunities count from
    /// there), if the link is trace-driven.
    pub fn trace(&self, n: u32) -> Option<(std::sync::Arc<crate::impair::trace::Trace>, Nanos)> {
        let trace = self.links.get(&n)?.trace.clone()?;
        Some((trace, self.trace_starts.get(&n).copied().unwrap_or(0)))
    }

    /// Sets link `n` and every scheduler driving it, at `now`: a new or
    /// changed trace starts then; an unchanged one keeps its clock.
    pub fn set_link(&mut self, n: u32, cfg: LinkConfig, now: Nanos) {
        let same_trace = self
            .links
            .get(&n)
            .is_some_and(|old| old.trace.is_some() && old.trace == cfg.trace);
        if cfg.trace.is_none() {
            self.trace_starts.remove(&n);
        } else if !same_trace {
            self.trace_starts.insert(n, now);
        }
        let start = self.trace_starts.get(&n).copied().unwrap_or(0);
        let params = LinkParams::from_config(&cfg, start);
        for s in [n, n + DN_MAX_ID] {
            if let Some(sched) = self.scheds.get_mut(&s) {
                sched.link = params.clone();
                for &i in sched.instances.values() {
                    if let Some(inst) = self.instances.get_mut(i) {
                        inst.link.change_rate(now, &inst.params, &params);
                        inst.params = params.clone();
                    }
                }
            }
        }
        self.links.insert(n, cfg);
        self.least_delay = self.links.values().map(least_delay).min().unwrap_or(0);
    }

    /// Creates or changes scheduler `n` (its link must exist or be created by
    /// the caller first). A changed mask retires the old instances.
    pub fn set_sched(
        &mut self,
        n: u32,
        kind: &'static SchedType,
        params: Vec<(String, u64)>,
        mask: FlowMask,
    ) {
        let start = self.trace_starts.get(&(n % DN_MAX_ID)).copied();
        let link = self
            .links
            .get(&(n % DN_MAX_ID))
            .map(|c| LinkParams::from_config(c, start.unwrap_or(0)))
            .unwrap_or_default();
        let sub = kind.sub_queues.map(|f| f(&params));
        match self.scheds.get_mut(&n) {
            Some(s) => {
                let remask = s.mask != mask;
                // Queues made for other buckets or another AQM go (they are
                // drained); the refill makes them again under the new rules.
                // The sub-queues follow from the type and its parameters.
                let requeue = (s.sub.is_some() || sub.is_some())
                    && (!std::ptr::eq(s.kind, kind) || s.params != params);
                s.kind = kind;
                s.params = params;
                s.mask = mask;
                s.link = link;
                s.sizes = SchedSizes::of(kind, &s.params, sub.as_ref());
                s.sub = sub;
                for &i in s.instances.values() {
                    if let Some(inst) = self.instances.get_mut(i) {
                        inst.params = s.link.clone();
                        inst.bypass = kind.idle_bypass;
                        inst.limit = s.sub.as_ref().map(|s| s.limit);
                    }
                }
                if remask {
                    self.retire_instances(n);
                } else if requeue {
                    let fed: Vec<u32> = self
                        .flowsets
                        .iter()
                        .filter(|(_, f)| f.sched == n)
                        .map(|(&nr, _)| nr)
                        .collect();
                    for nr in fed {
                        self.remove_queues_of(nr);
                    }
                }
            }
            None => {
                self.scheds.insert(
                    n,
                    Sched {
                        kind,
                        mask,
                        link,
                        instances: FxHashMap::default(),
                        sizes: SchedSizes::of(kind, &params, sub.as_ref()),
                        params,
                        sub,
                    },
                );
            }
        }
    }

    /// Creates or changes flowset `n`. A changed mask or scheduler drops its
    /// (empty, drained) queues so they are rebuilt under the new rules.
    pub fn set_flowset(&mut self, n: u32, cfg: FlowsetConfig, sched: u32) {
        match self.flowsets.get_mut(&n) {
            Some(fs) => {
                let rekey = fs.cfg.mask != cfg.mask || fs.sched != sched;
                // AQM state depends on the queue limit too (PIE's third,
                // RED's unit), so either change gives the queues fresh state.
                let aqm_changed = fs.cfg.aqm != cfg.aqm || fs.cfg.limit != cfg.limit;
                fs.aqm_bytes = own_aqm_bytes(&cfg);
                fs.cfg = cfg;
                fs.sched = sched;
                if rekey {
                    self.remove_queues_of(n);
                } else {
                    let own_aqm = self.scheds.get(&sched).is_none_or(|s| s.sub.is_none());
                    self.refresh_queue_fx(n, aqm_changed && own_aqm);
                }
            }
            None => {
                self.flowsets.insert(
                    n,
                    Flowset {
                        aqm_bytes: own_aqm_bytes(&cfg),
                        cfg,
                        sched,
                        queues: FxHashMap::default(),
                        solo: None,
                    },
                );
            }
        }
    }

    /// Keeps flowset `n`'s queues' [`QueueFx`] in step with its
    /// configuration: made (with the queue's own stream) where now needed,
    /// and the AQM state made fresh if `new_aqm`. A queue keeps its stream
    /// and its loss state across changes, as a pipe keeps its packets.
    fn refresh_queue_fx(&mut self, n: u32, new_aqm: bool) {
        let Some(fs) = self.flowsets.get(&n) else {
            return;
        };
        for (&(_, qid), &q) in &fs.queues {
            let Some(queue) = self.queues.get_mut(q) else {
                continue;
            };
            let has_aqm = queue.fx.as_ref().is_some_and(|f| f.aqm.is_some());
            let fresh = new_aqm.then(|| aqm::new_state(&fs.cfg.aqm, fs.cfg.limit));
            let will_have_aqm = fresh.as_ref().map_or(has_aqm, Option::is_some);
            if queue.fx.is_none() && !needs_queue_fx(&fs.cfg, will_have_aqm) {
                continue;
            }
            match (&mut queue.fx, fresh) {
                (Some(fx), Some(a)) => {
                    fx.aqm = a;
                    fx.entry = EntryOptions::of(&fs.cfg);
                }
                (Some(fx), None) => fx.entry = EntryOptions::of(&fs.cfg),
                (None, a) => {
                    let rng = Rng::stream(self.seed, &stream_name(1, n, &qid));
                    queue.fx = Some(QueueFx::new(rng, a.flatten(), &fs.cfg));
                }
            }
        }
    }

    pub fn delete_flowset(&mut self, n: u32) {
        self.remove_queues_of(n);
        self.flowsets.remove(&n);
    }

    /// Deletes scheduler `n` at `now`. As FreeBSD's `si_destroy` frees an
    /// instance's delay line, what its instances hold past their queues (on
    /// the link, on the delay lines) leaves at once as `Deleted` drops and
    /// the instances are freed; their queued packets are the caller's (they
    /// were drained, and `refill` finds no scheduler for them).
    pub fn delete_sched(&mut self, n: u32, now: Nanos) {
        self.retire_instances(n);
        // Its instances retired just now, and those an earlier new mask
        // retired that are still draining.
        let ids: Vec<InstId> = self
            .instances
            .iter()
            .filter(|(_, i)| i.sched == n && i.retired)
            .map(|(id, _)| id)
            .collect();
        for i in ids {
            self.purge(i, now);
        }
        self.scheds.remove(&n);
    }

    /// Frees retired instance `inst` now, its packets in flight leaving at
    /// `now` as `Deleted` drops, in the order they arrived. Its timers go
    /// stale and are skipped when they come up.
    fn purge(&mut self, inst: InstId, now: Nanos) {
        if !self.instances.get(inst).is_some_and(|i| i.retired) {
            return;
        }
        let Some(mut instance) = self.instances.remove(inst) else {
            return;
        };
        let mut doomed: Vec<Held<P>> = instance.dline.drain(..).collect();
        if let Some(fx) = instance.fx.as_deref_mut() {
            doomed.extend(fx.head.take().map(|(h, _)| h));
            while let Some(h) = fx.pop_early() {
                doomed.push(h);
            }
        }
        doomed.sort_by_key(|h| h.seq);
        for held in doomed {
            self.exits.push_back(Exit {
                held,
                at: now,
                drop: Some(DropReason::Deleted),
            });
        }
    }

    pub fn delete_link(&mut self, n: u32) {
        self.links.remove(&n);
        self.trace_starts.remove(&n);
        self.least_delay = self.links.values().map(least_delay).min().unwrap_or(0);
    }

    pub fn link_numbers(&self) -> Vec<u32> {
        self.links.keys().copied().collect()
    }

    pub fn sched_numbers(&self) -> Vec<u32> {
        self.scheds.keys().copied().collect()
    }

    pub fn flowset_numbers(&self) -> Vec<u32> {
        self.flowsets.keys().copied().collect()
    }

    /// The flowsets feeding scheduler `sched`, with their configuration.
    pub fn flowsets_of(&self, sched: u32) -> impl Iterator<Item = (u32, &FlowsetConfig)> {
        self.flowsets
            .iter()
            .filter(move |(_, fs)| fs.sched == sched)
            .map(|(&n, fs)| (n, &fs.cfg))
    }

    fn remove_queues_of(&mut self, fs_nr: u32) {
        let Some(fs) = self.flowsets.get_mut(&fs_nr) else {
            return;
        };
        fs.solo = None;
        let qs: Vec<((InstId, FlowKey), QueueId)> = fs.queues.drain().collect();
        for ((inst, qid), q) in qs {
            forget_bucket(&mut self.instances, inst, fs_nr, &qid, q);
            self.remove_queue(q);
        }
        // Its bucket tables go too: made again, at the new size, by the
        // first packet that needs one.
        for inst in self.instances.items.iter_mut().flatten() {
            inst.tables.retain(|t| t.flowset != fs_nr);
        }
    }

    fn remove_queue(&mut self, q: QueueId) {
        if let Some(queue) = self.queues.remove(q) {
            if let Some(inst) = self.instances.get_mut(queue.inst) {
                inst.queues.retain(|&x| x != q);
            }
            let inst = queue.inst;
            self.reap(inst);
        }
    }

    /// Detaches scheduler `n`'s instances: their queues go, and they live on
    /// only to finish their delay lines (after a new mask; a deletion then
    /// purges them).
    fn retire_instances(&mut self, n: u32) {
        let Some(sched) = self.scheds.get_mut(&n) else {
            return;
        };
        let ids: Vec<InstId> = sched.instances.drain().map(|(_, i)| i).collect();
        let mut doomed = Vec::new();
        for &i in &ids {
            if let Some(inst) = self.instances.get_mut(i) {
                inst.retired = true;
                inst.tables.clear();
                doomed.extend(inst.queues.iter().copied());
            }
        }
        for fs in self.flowsets.values_mut() {
            fs.queues.retain(|_, q| !doomed.contains(q));
            if fs.solo.is_some_and(|q| doomed.contains(&q)) {
                fs.solo = None;
            }
        }
        for q in doomed {
            self.remove_queue(q);
        }
        for i in ids {
            self.reap(i);
        }
    }

    /// After a configuration change: gives every live instance a fresh policy
    /// with its queues re-added at their flowsets' current weights, then puts
    /// the drained packets back, in arrival order, without re-applying limits,
    /// `plr` or AQM (they were accepted once). Packets whose target is gone
    /// come back as `Rejected`.
    pub fn refill(&mut self, now: Nanos, drained: Vec<Held<P>>) -> Vec<Rejected<P>> {
        let live: Vec<InstId> = self
            .instances
            .iter()
            .filter(|(_, i)| !i.retired)
            .map(|(id, _)| id)
            .collect();
        for id in live {
            let Some(inst) = self.instances.get_mut(id) else {
                continue;
            };
            let Some(sched) = self.scheds.get(&inst.sched) else {
                continue;
            };
            inst.policy = new_policy(sched.kind, &sched.params);
            inst.params = sched.link.clone();
            inst.bypass = sched.kind.idle_bypass;
            inst.limit = sched.sub.as_ref().map(|s| s.limit);
            for &q in &inst.queues {
                if let Some(queue) = self.queues.get_mut(q) {
                    let (weight, lmax) = self
                        .flowsets
                        .get(&queue.flowset)
                        .map_or((1, 0), |f| (f.cfg.weight, f.cfg.lmax));
                    queue.slot = inst.policy.add_queue_with_lmax(q, weight, lmax);
                }
            }
        }
        let mut rejected = Vec::new();
        let mut touched = Vec::new();
        for held in drained {
            let fs_nr = flowset_of(held.target);
            let linked = self
                .flowsets
                .get(&fs_nr)
                .map(|f| self.scheds.contains_key(&f.sched));
            match linked {
                None => rejected.push(Rejected {
                    held,
                    reason: DropReason::Deleted,
                }),
                Some(false) => rejected.push(Rejected {
                    held,
                    reason: DropReason::Deleted,
                }),
                Some(true) => match self.queue_for(fs_nr, &held.info.key, true) {
                    Ok((inst, q)) => {
                        self.push(q, inst, held);
                        touched.push(inst);
                    }
                    Err(reason) => rejected.push(Rejected { held, reason }),
                },
            }
        }
        touched.dedup();
        for inst in touched {
            self.kick(now, inst, None);
        }
        rejected
    }

    // -------------------------------------------------------- views

    pub fn link_params(&self, n: u32) -> Option<&LinkConfig> {
        self.links.get(&n)
    }

    pub fn sched_view(&self, n: u32) -> Option<crate::stats::SchedView> {
        let s = self.scheds.get(&n)?;
        // In table order: sorting is for whoever shows them, off the data
        // plane (with 65536 of them, it was half of a snapshot's time).
        let instances: Vec<crate::stats::InstanceView> = s
            .instances
            .values()
            .filter_map(|&i| self.instances.get(i))
            .map(|i| {
                let len_pkts = i.backlog;
                let len_bytes: u64 = i
                    .queues
                    .iter()
                    .filter_map(|&q| self.queues.get(q))
                    .map(|q| q.bytes)
                    .sum();
                crate::stats::InstanceView {
                    id: i.id,
                    counters: FlowCounters {
                        len_pkts,
                        len_bytes,
                        ..i.counters
                    },
                }
            })
            .collect();
        Some(crate::stats::SchedView {
            number: n,
            kind: s.kind.display,
            mask: s.mask,
            params: s.params.clone(),
            instances,
        })
    }

    pub fn flowset_view(&self, n: u32) -> Option<crate::stats::FlowsetView> {
        let fs = self.flowsets.get(&n)?;
        // A flow-queueing scheduler's queues are its buckets: the key holds
        // the bucket's index in `src` (see `queue_for`).
        let buckets = self.scheds.get(&fs.sched).is_some_and(|s| s.sub.is_some());
        // In table order, as `instances` in `sched_view`.
        let flows: Vec<crate::stats::FlowView> = fs
            .queues
            .iter()
            .filter_map(|(&(_, id), &q)| self.queues.get(q).map(|q| (id, q)))
            .map(|(id, q)| crate::stats::FlowView {
                id,
                sub_queue: buckets.then(|| u32::try_from(id.src).unwrap_or(u32::MAX)),
                counters: FlowCounters {
                    tot_pkts: q.tot_pkts,
                    tot_bytes: q.tot_bytes,
                    len_pkts: q.pkts.len() as u32,
                    len_bytes: q.bytes,
                    drops: q.drops,
                },
            })
            .collect();
        Some(crate::stats::FlowsetView {
            number: n,
            sched: fs.sched,
            linked: self.scheds.contains_key(&fs.sched),
            weight: fs.cfg.weight,
            lmax: fs.cfg.lmax,
            pri: fs.cfg.pri,
            limit: fs.cfg.limit,
            plr: fs.cfg.plr,
            mask: fs.cfg.mask,
            buckets: fs.cfg.buckets,
            aqm: aqm::display(&fs.cfg.aqm),
            loss: fs.cfg.loss,
            duplicate: fs.cfg.duplicate,
            corrupt: fs.cfg.corrupt,
            flows,
        })
    }
}
