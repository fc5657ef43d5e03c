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
//! A packet's path: flowset → queue (limit, plr, AQM) → scheduler instance
//! policy → link (serialization) → delay line → out.

pub(crate) mod link;
pub mod profile;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap;

use crate::aqm::{self, ecn, AqmState, AqmVerdict, Arrival, Departure, QueueState};
use crate::classifier::RuleRef;
use crate::config::{FlowsetConfig, LinkConfig, DN_MAX_ID};
use crate::flow::{FlowKey, FlowMask};
use crate::packet::{PacketInfo, Payload, Target};
use crate::rng::Rng;
use crate::sched::{self, QueueId, QueueOps, SchedInstance, SchedType, Slot, SubQueues};
use crate::stats::{DropReason, FlowCounters};
use crate::time::Nanos;

use link::{LinkParams, LinkState};

/// A packet inside dummynet, with what is needed to account for it and to
/// send it on when it leaves.
#[derive(Debug)]
pub(crate) struct Held<P> {
    pub payload: P,
    pub info: PacketInfo,
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
    aqm: Option<Box<dyn AqmState>>,
    /// Had an arrival since the last expiry sweep.
    touched: bool,
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
    counters: FlowCounters,
    /// Its scheduler was deleted or re-masked: it only drains its delay line.
    retired: bool,
    /// Had an arrival since the last expiry sweep.
    touched: bool,
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
}

struct Flowset {
    cfg: FlowsetConfig,
    sched: u32,
    queues: FxHashMap<(InstId, FlowKey), QueueId>,
    /// Unmasked flowset on an unmasked scheduler: its single queue, if made.
    solo: Option<QueueId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    Link,
    DelayLine,
}

/// Heap entry: (time, insertion order, instance, kind). The insertion order
/// makes ties deterministic; stale entries are skipped on pop.
type Timer = Reverse<(Nanos, u64, InstId, TimerKind)>;

// ------------------------------------------------------------ dummynet

pub(crate) struct Dummynet<P> {
    links: FxHashMap<u32, LinkConfig>,
    scheds: FxHashMap<u32, Sched>,
    flowsets: FxHashMap<u32, Flowset>,
    queues: Slab<FlowQueue<P>>,
    instances: Slab<Instance<P>>,
    timers: BinaryHeap<Timer>,
    timer_seq: u64,
    /// Packets that left (or were dropped inside) and await the engine.
    pub exits: VecDeque<Exit<P>>,
    /// ECN CE marks set by AQMs, engine-wide.
    pub marks: u64,
}

/// Why a packet could not be queued.
pub(crate) struct Rejected<P> {
    pub held: Held<P>,
    pub reason: DropReason,
}

impl<P> Default for Dummynet<P> {
    fn default() -> Self {
        Dummynet {
            links: FxHashMap::default(),
            scheds: FxHashMap::default(),
            flowsets: FxHashMap::default(),
            queues: Slab::default(),
            instances: Slab::default(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            exits: VecDeque::new(),
            marks: 0,
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

    /// Queues a packet for `held.target`, or says why not.
    #[inline]
    pub fn enqueue(
        &mut self,
        now: Nanos,
        mut held: Held<P>,
        rng: &mut Rng,
    ) -> Result<(), Rejected<P>> {
        let fs_nr = flowset_of(held.target);
        let Some(fs) = self.flowsets.get(&fs_nr) else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let (plr, limit) = (fs.cfg.plr, fs.cfg.limit);
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
                self.queue_for(fs_nr, &held.info.key)
            }
        };
        let len = held.info.len;
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        queue.tot_pkts += 1;
        queue.tot_bytes += u64::from(len);
        queue.touched = true;
        instance.counters.tot_pkts += 1;
        instance.counters.tot_bytes += u64::from(len);
        instance.touched = true;

        // FreeBSD's order in dn_enqueue: random loss, then AQM, then the limit.
        let state = QueueState {
            len_pkts: queue.pkts.len() as u32,
            len_bytes: queue.bytes,
        };
        let mut reason = None;
        let mut marked = false;
        if !plr.is_zero() && rng.chance(plr) {
            reason = Some(DropReason::Plr);
        } else if let Some(a) = queue.aqm.as_mut() {
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
        // the AQM sees every departure (as in FreeBSD).
        if instance.backlog == 0 && !instance.link.active && instance.bypass && queue.aqm.is_none()
        {
            // Nothing queued and an idle link: the policy would hand this
            // packet straight back, so give it to the link directly.
            self.kick(now, inst, Some(held), rng);
            return Ok(());
        }
        self.push(q, inst, held);
        if let Some(instance) = self.instances.get(inst) {
            if instance.limit.is_some_and(|l| instance.backlog > l) {
                self.drop_longest(now, inst);
            }
        }
        self.kick(now, inst, None, rng);
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
    #[inline]
    fn kick(&mut self, now: Nanos, inst: InstId, first: Option<Held<P>>, rng: &mut Rng) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        if instance.link.active {
            return;
        }
        instance.link.wake(now, &instance.params);
        self.serve(now, inst, first, rng);
    }

    /// FreeBSD's `serve_sched`: while the link has credit, dequeue and put on
    /// the wire; the packet that overdraws the credit finishes when the credit
    /// is back to zero, and the link sleeps until then.
    fn serve(&mut self, now: Nanos, inst: InstId, mut first: Option<Held<P>>, rng: &mut Rng) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        let params = &instance.params;
        instance.link.active = false;
        instance.link_timer = None;
        instance.link.refill(now, params);
        let dline_was_idle = instance.dline.is_empty();
        let mut ops = Ops {
            queues: &mut self.queues,
            popped: None,
            now,
            rng,
            aqm_drops: Vec::new(),
            marks: 0,
        };
        let mut last: Option<usize> = None;
        // `backlog` guards the loop so an emptied instance costs no extra
        // call into its policy, except for a flow-queueing one (`limit`):
        // FreeBSD's fq_codel and fq_pie learn that their flows went idle
        // from the dequeue that finds them empty, which takes each out of
        // its list, so a returning flow is new again (and its AQM restarted).
        let flow_queueing = instance.limit.is_some();
        while instance.link.credit >= 0 {
            let mut held = match first.take() {
                Some(h) => h,
                None => {
                    if (instance.backlog == 0 && !flow_queueing)
                        || instance.policy.dequeue(&mut ops).is_none()
                    {
                        break;
                    }
                    let Some(h) = ops.popped.take() else {
                        break;
                    };
                    instance.backlog = instance.backlog.saturating_sub(1);
                    h
                }
            };
            let mut extra = 0;
            if let Some(pf) = &params.profile {
                let (e, lost) = profile::draw(pf, ops.rng);
                extra = e;
                held.lost = lost;
            }
            instance.link.credit -= params.cost(held.info.len, extra);
            held.out_time = now + params.delay;
            if params.delay == 0 && instance.link.credit >= 0 && instance.dline.is_empty() {
                // Off the wire at once with no delay to serve: skip the delay
                // line. (A packet that overdraws the credit still goes there,
                // to wait for the end of its transmission.)
                let drop = held.lost.then_some(DropReason::ProfileLoss);
                if drop.is_some() {
                    instance.counters.drops += 1;
                }
                self.exits.push_back(Exit {
                    held,
                    at: now,
                    drop,
                });
                continue;
            }
            instance.dline.push_back(held);
            last = Some(instance.dline.len() - 1);
        }
        self.marks += ops.marks;
        for d in ops.aqm_drops.drain(..) {
            instance.backlog = instance.backlog.saturating_sub(1);
            instance.counters.drops += 1;
            self.exits.push_back(Exit {
                held: d,
                at: now,
                drop: Some(DropReason::Aqm),
            });
        }
        if instance.link.credit >= 0 {
            instance.link.idle_time = now;
        } else {
            let t = instance.link.time_to_zero(params);
            if let Some(h) = last.and_then(|i| instance.dline.get_mut(i)) {
                h.out_time += t;
            }
            instance.link.active = true;
            let at = now.saturating_add(t);
            instance.link_timer = Some(at);
            self.timer_seq += 1;
            self.timers
                .push(Reverse((at, self.timer_seq, inst, TimerKind::Link)));
        }
        if dline_was_idle {
            if !instance.dline.is_empty() {
                self.release(now, inst);
            } else if instance.retired {
                self.reap(inst);
            }
        }
    }

    /// Moves due packets off the delay line and arms its timer for the next.
    fn release(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        instance.dline_timer = None;
        while let Some(h) = instance.dline.front() {
            if h.out_time > now {
                let at = h.out_time;
                instance.dline_timer = Some(at);
                self.timer_seq += 1;
                self.timers
                    .push(Reverse((at, self.timer_seq, inst, TimerKind::DelayLine)));
                break;
            }
            let Some(h) = instance.dline.pop_front() else {
                break;
            };
            let (at, drop) = (h.out_time, h.lost.then_some(DropReason::ProfileLoss));
            if drop.is_some() {
                instance.counters.drops += 1;
            }
            self.exits.push_back(Exit { held: h, at, drop });
        }
        self.reap(inst);
    }

    /// Frees a retired instance once it holds nothing.
    fn reap(&mut self, inst: InstId) {
        let done = self.instances.get(inst).is_some_and(|i| {
            i.retired
                && i.dline.is_empty()
                && i.backlog == 0
                && !i.link.active
                && i.queues.is_empty()
        });
        if done {
            self.instances.remove(inst);
        }
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.timers.peek().map(|Reverse((t, ..))| *t)
    }

    /// Runs the earliest timer if it is due at or before `now`. Returns false
    /// when nothing is due. Exits land in `self.exits`.
    pub fn run_timer(&mut self, now: Nanos, rng: &mut Rng) -> bool {
        let Some(&Reverse((at, _, inst, kind))) = self.timers.peek() else {
            return false;
        };
        if at > now {
            return false;
        }
        self.timers.pop();
        let Some(i) = self.instances.get(inst) else {
            return true;
        };
        match kind {
            TimerKind::Link if i.link_timer == Some(at) => self.serve(at, inst, None, rng),
            TimerKind::DelayLine if i.dline_timer == Some(at) => self.release(at, inst),
            _ => {} // superseded
        }
        true
    }

    /// The instance and queue for a key in flowset `fs_nr` (which exists and
    /// is linked), created on first use.
    fn queue_for(&mut self, fs_nr: u32, key: &FlowKey) -> (InstId, QueueId) {
        let Some(fs) = self.flowsets.get_mut(&fs_nr) else {
            return (u32::MAX, u32::MAX);
        };
        if let Some(q) = fs.solo {
            if let Some(queue) = self.queues.get(q) {
                return (queue.inst, q);
            }
        }
        let Some(sched) = self.scheds.get_mut(&fs.sched) else {
            return (u32::MAX, u32::MAX);
        };
        let sid = sched.mask.apply(key);
        let inst = match sched.instances.get(&sid) {
            Some(&i) => i,
            None => {
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
                return (inst, q);
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
            return (inst, q);
        }
        let aqm = match &sched.sub {
            Some(sub) => aqm::new_state(&sub.aqm, sub.aqm_limit),
            None => aqm::new_state(&fs.cfg.aqm, fs.cfg.limit),
        };
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
            aqm,
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
        (inst, q)
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
                    && inst.dline.is_empty()
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

    /// Packets held anywhere inside (queues, links, delay lines, exits).
    pub fn held(&self) -> u64 {
        let queued: u64 = self.queues.iter().map(|(_, q)| q.pkts.len() as u64).sum();
        let lines: u64 = self
            .instances
            .iter()
            .map(|(_, i)| i.dline.len() as u64)
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
    rng: &'a mut Rng,
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
            let verdict = match queue.aqm.as_mut() {
                Some(a) => {
                    let departure = Departure {
                        now: self.now,
                        enqueued_at: h.enq_time,
                        len: h.info.len,
                        ect: ecn::capable(h.payload.ip_bytes()),
                        queue: state,
                        resumed,
                    };
                    match a.on_dequeue(&departure, self.rng) {
                        AqmVerdict::Mark if h.payload.ip_bytes_mut().is_some_and(ecn::set_ce) => {
                            queue.marks += 1;
                            self.marks += 1;
                            AqmVerdict::Accept
                        }
                        AqmVerdict::Mark => AqmVerdict::Drop,
                        v => v,
                    }
                }
                None => AqmVerdict::Accept,
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

    /// Sets link `n` and every scheduler driving it.
    pub fn set_link(&mut self, n: u32, cfg: LinkConfig) {
        let params = LinkParams::from_config(&cfg);
        for s in [n, n + DN_MAX_ID] {
            if let Some(sched) = self.scheds.get_mut(&s) {
                sched.link = params.clone();
                for &i in sched.instances.values() {
                    if let Some(inst) = self.instances.get_mut(i) {
                        inst.params = params.clone();
                    }
                }
            }
        }
        self.links.insert(n, cfg);
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
        let link = self
            .links
            .get(&(n % DN_MAX_ID))
            .map(LinkParams::from_config)
            .unwrap_or_default();
        let sub = kind.sub_queues.map(|f| f(&params));
        match self.scheds.get_mut(&n) {
            Some(s) => {
                let remask = s.mask != mask;
                // Queues made for other buckets or another AQM go (they are
                // drained); the refill makes them again under the new rules.
                let requeue = s.sub != sub;
                s.kind = kind;
                s.params = params;
                s.mask = mask;
                s.link = link;
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
                        params,
                        mask,
                        link,
                        instances: FxHashMap::default(),
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
                fs.cfg = cfg;
                fs.sched = sched;
                if rekey {
                    self.remove_queues_of(n);
                } else if aqm_changed && self.scheds.get(&sched).is_none_or(|s| s.sub.is_none()) {
                    let (fresh, limit) = self
                        .flowsets
                        .get(&n)
                        .map(|f| (f.cfg.aqm.clone(), f.cfg.limit))
                        .unwrap_or_default();
                    for item in self
                        .queues
                        .items
                        .iter_mut()
                        .flatten()
                        .filter(|q| q.flowset == n)
                    {
                        item.aqm = aqm::new_state(&fresh, limit);
                    }
                }
            }
            None => {
                self.flowsets.insert(
                    n,
                    Flowset {
                        cfg,
                        sched,
                        queues: FxHashMap::default(),
                        solo: None,
                    },
                );
            }
        }
    }

    pub fn delete_flowset(&mut self, n: u32) {
        self.remove_queues_of(n);
        self.flowsets.remove(&n);
    }

    pub fn delete_sched(&mut self, n: u32) {
        self.retire_instances(n);
        self.scheds.remove(&n);
    }

    pub fn delete_link(&mut self, n: u32) {
        self.links.remove(&n);
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
    /// only to finish their delay lines.
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
    pub fn refill(&mut self, now: Nanos, drained: Vec<Held<P>>, rng: &mut Rng) -> Vec<Rejected<P>> {
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
                Some(true) => {
                    let (inst, q) = self.queue_for(fs_nr, &held.info.key);
                    self.push(q, inst, held);
                    touched.push(inst);
                }
            }
        }
        touched.dedup();
        for inst in touched {
            self.kick(now, inst, None, rng);
        }
        rejected
    }

    // -------------------------------------------------------- views

    pub fn link_params(&self, n: u32) -> Option<&LinkConfig> {
        self.links.get(&n)
    }

    pub fn sched_view(&self, n: u32) -> Option<crate::stats::SchedView> {
        let s = self.scheds.get(&n)?;
        let mut instances: Vec<crate::stats::InstanceView> = s
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
        instances.sort_by_key(|v| v.id);
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
        let mut flows: Vec<crate::stats::FlowView> = fs
            .queues
            .iter()
            .filter_map(|(&(_, id), &q)| self.queues.get(q).map(|q| (id, q)))
            .map(|(id, q)| crate::stats::FlowView {
                id,
                counters: FlowCounters {
                    tot_pkts: q.tot_pkts,
                    tot_bytes: q.tot_bytes,
                    len_pkts: q.pkts.len() as u32,
                    len_bytes: q.bytes,
                    drops: q.drops,
                },
            })
            .collect();
        flows.sort_by_key(|f| f.id);
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
            flows,
        })
    }
}
