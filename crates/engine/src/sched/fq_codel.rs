//! FQ_CODEL: FlowQueue-CoDel (RFC 8290), FreeBSD's `dn_sched_fq_codel`.
//!
//! An instance hashes every packet's 5-tuple into one of `flows` queues, each
//! with its own CoDel state (RFC 8289), and serves them with a deficit round
//! robin over two lists (RFC 8290 §4.2): a queue that becomes backlogged
//! joins the tail of the *new* list with one `quantum` of credit; the new
//! list is served before the old one, so a sparse flow (a ping, a DNS query,
//! a TCP handshake) overtakes bulk flows; a queue whose credit runs out gets
//! another quantum and goes to the tail of the *old* list; a new queue found
//! empty also goes to the old list, and an old queue found empty leaves.
//! `limit` counts packets across all the instance's queues; on overflow the
//! head packet of the longest queue is dropped.
//!
//! The packets stay in the engine's queues as for every scheduler: the
//! hashing, the per-queue CoDel and the overflow drop are what
//! [`SchedType::sub_queues`] asks of the engine; this file keeps only the
//! order of service ([`FqDrr`], shared with [`super::fq_pie`]).
//!
//! FreeBSD's behaviour, kept: parameters and defaults (`target` 5 ms,
//! `interval` 100 ms, `quantum` 1514, `limit` 10240, `flows` 1024, ECN off
//! unless `ecn`: RFC 8290 turns it on, FreeBSD does not), its bounds, a flow
//! sends while its deficit is not negative (`deficit < 0` ends its turn), one
//! packet dropped from the longest queue (by packets) per packet over the
//! limit, and the flowset's own queue limit and AQM ignored. Also kept: a
//! queue that comes back from idle (out of both lists, so to the new list)
//! gets a full quantum and a restarted CoDel, out of the dropping state with
//! `first_above_time` cleared, as `fq_codel_enqueue` does (fq_pie restarts
//! its PIE there the same way); Linux keeps a returning flow's CoDel state.
//! The engine owns the CoDel; [`SchedInstance::is_idle`] tells it when.
//!
//! Where this departs from FreeBSD, on purpose:
//! * Out-of-range parameters are refused instead of clamped.
//! * The hash is fixed, not perturbed per instance, so runs replay.
//! * Two flowsets feeding one instance get separate queues for the same
//!   bucket (FreeBSD's instance has one array for all its flowsets).

use super::{ParamSpec, QueueId, QueueOps, SchedInstance, SchedType, Slot, SubQueues};
pub(crate) use crate::aqm::pie::tunable as fq_tunable;
use crate::units::fmt_time;
use std::sync::Arc;

use crate::aqm::codel::CodelConfig;

use crate::params::{time_in, TunableUnit};
use crate::params::{OutOfRange, ParamError};
use crate::time::{Nanos, NS_PER_SEC, NS_PER_US};
use crate::units::QueueLimit;

/// FreeBSD's defaults (`net.inet.ip.dummynet.fqcodel.*`) and bounds
/// (`fq_codel_config`).
pub const DEFAULT_QUANTUM: u32 = 1514;
pub const DEFAULT_LIMIT: u32 = 10240;
pub const DEFAULT_FLOWS: u32 = 1024;
pub const MAX_QUANTUM: u32 = 9000;
pub const MAX_LIMIT: u32 = 20480;
pub const MAX_FLOWS: u32 = 65536;
const MAX_TARGET: Nanos = 5 * NS_PER_SEC;
const MAX_INTERVAL: Nanos = 100 * NS_PER_SEC;
/// The units of the `quantum`, `limit` and `flows` sysctls.
pub(crate) const BYTES: TunableUnit = TunableUnit::Count("bytes");
pub(crate) const PACKETS: TunableUnit = TunableUnit::Count("packets");
pub(crate) const FLOWS: TunableUnit = TunableUnit::Count("flows");

pub static TYPE: SchedType = SchedType {
    name: "fq_codel",
    aliases: &["fq-codel"],
    display: "FQ_CODEL",
    params: &[
        ParamSpec::time("target").within(NS_PER_US, MAX_TARGET),
        ParamSpec::time("interval").within(NS_PER_US, MAX_INTERVAL),
        ParamSpec::count("quantum").within(1, MAX_QUANTUM as u64),
        ParamSpec::count("limit").within(1, MAX_LIMIT as u64),
        ParamSpec::count("flows").within(1, MAX_FLOWS as u64),
        ParamSpec::flag("ecn", "noecn"),
    ],
    tunables: &[
        fq_tunable(
            "fqcodel.target",
            "target",
            TunableUnit::Micros,
            5_000,
            5_000_000,
        ),
        fq_tunable(
            "fqcodel.interval",
            "interval",
            TunableUnit::Micros,
            100_000,
            5_000_000,
        ),
        fq_tunable(
            "fqcodel.quantum",
            "quantum",
            BYTES,
            1514,
            MAX_QUANTUM as u64,
        ),
        fq_tunable("fqcodel.limit", "limit", PACKETS, 10240, MAX_LIMIT as u64),
        fq_tunable("fqcodel.flows", "flows", FLOWS, 1024, MAX_FLOWS as u64),
    ],
    new_instance: |params| {
        let c = FqCodelParams::parse(params)?;
        Ok(Box::new(FqDrr::new(c.quantum)))
    },
    // Every packet must pass through its queue's CoDel.
    idle_bypass: false,
    queue_state_bytes: FLOW_STATE_BYTES,
    sub_queues: Some(|params| {
        FqCodelParams::parse(params)
            .unwrap_or_default()
            .sub_queues()
    }),
    describe: Some(|params| FqCodelParams::parse(params).unwrap_or_default().describe()),
    weight_is_priority: false,
    lmax: None,
};

/// fq_codel's parameters, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct FqCodelParams {
    pub codel: CodelConfig,
    pub quantum: u32,
    pub limit: u32,
    pub flows: u32,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams {
            codel: CodelConfig::default(),
            quantum: DEFAULT_QUANTUM,
            limit: DEFAULT_LIMIT,
            flows: DEFAULT_FLOWS,
        }
    }
}

impl FqCodelParams {
    pub fn parse(params: &[(String, u64)]) -> Result<Self, ParamError> {
        let mut p = FqCodelParams::default();
        for (k, v) in params {
            match k.to_ascii_lowercase().as_str() {
                "target" => p.codel.target = time_in("fq_codel", k, *v, (NS_PER_US, MAX_TARGET))?,
                "interval" => {
                    p.codel.interval = time_in("fq_codel", k, *v, (NS_PER_US, MAX_INTERVAL))?
                }
                "ecn" => p.codel.ecn = *v != 0,
                other => {
                    if !fq_param(
                        &mut p.quantum,
                        &mut p.limit,
                        &mut p.flows,
                        "fq_codel",
                        other,
                        *v,
                    )? {
                        return Err(format!(
                            "fq_codel takes target, interval, quantum, limit, flows and \
                             ecn|noecn, not `{k}`"
                        )
                        .into());
                    }
                }
            }
        }
        Ok(p)
    }

    pub fn sub_queues(&self) -> SubQueues {
        SubQueues {
            buckets: self.flows,
            limit: self.limit,
            aqm: Arc::new(self.codel.clone()),
            aqm_limit: QueueLimit::Slots(self.limit),
        }
    }

    /// FreeBSD's line: ` FQ_CODEL target 5ms interval 100ms quantum 1514
    /// limit 10240 flows 1024 NoECN`.
    pub fn describe(&self) -> String {
        format!(
            " FQ_CODEL target {} interval {} quantum {} limit {} flows {} {}",
            fmt_time(self.codel.target),
            fmt_time(self.codel.interval),
            self.quantum,
            self.limit,
            self.flows,
            if self.codel.ecn { "ECN" } else { "NoECN" }
        )
    }
}

/// The parameters fq_codel and fq_pie share; false if `k` is none of them.
pub(crate) fn fq_param(
    quantum: &mut u32,
    limit: &mut u32,
    flows: &mut u32,
    ty: &str,
    k: &str,
    v: u64,
) -> Result<bool, ParamError> {
    let (slot, max) = match k {
        "quantum" => (quantum, MAX_QUANTUM),
        "limit" => (limit, MAX_LIMIT),
        "flows" => (flows, MAX_FLOWS),
        _ => return Ok(false),
    };
    *slot = u32::try_from(v)
        .ok()
        .filter(|x| (1..=max).contains(x))
        .ok_or_else(|| OutOfRange::new(k, v, 1, max).owner(ty).inclusive())?;
    Ok(true)
}

// ------------------------------------------------------------ the policy

/// Bytes of [`FqDrr`] state per queue.
pub const FLOW_STATE_BYTES: usize = std::mem::size_of::<Flow>();

/// End of a list.
const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Idle,
    New,
    Old,
}

/// Per-queue state: its deficit and its place in the new or old list.
#[derive(Debug, Clone)]
struct Flow {
    /// Bytes it may still send in this turn; it sends while this is not
    /// negative, so it may end one packet below zero.
    deficit: i64,
    queue: QueueId,
    next: u32,
    prev: u32,
    list: List,
    vacant: bool,
}

#[derive(Debug, Clone, Copy)]
struct Ends {
    head: u32,
    tail: u32,
}

impl Ends {
    const EMPTY: Ends = Ends {
        head: NIL,
        tail: NIL,
    };
}

/// RFC 8290's deficit round robin over new and old queues; the policy of
/// both fq_codel and fq_pie.
#[derive(Debug)]
pub struct FqDrr {
    quantum: u32,
    flows: Vec<Flow>,
    free: Vec<Slot>,
    new: Ends,
    old: Ends,
}

impl FqDrr {
    pub fn new(quantum: u32) -> Self {
        FqDrr {
            quantum: quantum.max(1),
            flows: Vec::new(),
            free: Vec::new(),
            new: Ends::EMPTY,
            old: Ends::EMPTY,
        }
    }

    fn ends(&mut self, l: List) -> Option<&mut Ends> {
        match l {
            List::New => Some(&mut self.new),
            List::Old => Some(&mut self.old),
            List::Idle => None,
        }
    }

    /// Appends `s` (in no list) at the tail of `l`.
    fn push_back(&mut self, l: List, s: u32) {
        let Some(e) = self.ends(l) else {
            return;
        };
        let tail = e.tail;
        if tail == NIL {
            e.head = s;
        }
        e.tail = s;
        if tail != NIL {
            self.flows[tail as usize].next = s;
        }
        let f = &mut self.flows[s as usize];
        f.prev = tail;
        f.next = NIL;
        f.list = l;
    }

    /// Takes `s` out of its list, if any.
    fn unlink(&mut self, s: u32) {
        let (l, prev, next) = {
            let f = &mut self.flows[s as usize];
            let l = f.list;
            f.list = List::Idle;
            (l, f.prev, f.next)
        };
        let Some(e) = self.ends(l) else {
            return;
        };
        if prev == NIL {
            e.head = next;
        }
        if next == NIL {
            e.tail = prev;
        }
        if prev != NIL {
            self.flows[prev as usize].next = next;
        }
        if next != NIL {
            self.flows[next as usize].prev = prev;
        }
    }

    /// Queues in the new and old lists (for tests).
    pub fn lists(&self) -> (Vec<QueueId>, Vec<QueueId>) {
        let walk = |mut s: u32| {
            let mut v = Vec::new();
            while s != NIL && v.len() <= self.flows.len() {
                v.push(self.flows[s as usize].queue);
                s = self.flows[s as usize].next;
            }
            v
        };
        (walk(self.new.head), walk(self.old.head))
    }
}

impl SchedInstance for FqDrr {
    fn add_queue(&mut self, q: QueueId, _weight: u32) -> Slot {
        let f = Flow {
            deficit: 0,
            queue: q,
            next: NIL,
            prev: NIL,
            list: List::Idle,
            vacant: false,
        };
        if let Some(s) = self.free.pop() {
            self.flows[s as usize] = f;
            s
        } else {
            self.flows.push(f);
            (self.flows.len() - 1) as Slot
        }
    }

    fn remove_queue(&mut self, slot: Slot) {
        match self.flows.get(slot as usize) {
            Some(f) if !f.vacant => {}
            _ => return,
        }
        self.unlink(slot);
        self.flows[slot as usize].vacant = true;
        self.free.push(slot);
    }

    /// FreeBSD's fq schedulers have no weights: every queue gets `quantum`.
    fn set_weight(&mut self, _slot: Slot, _weight: u32) {}

    #[inline]
    fn is_idle(&self, slot: Slot) -> bool {
        self.flows
            .get(slot as usize)
            .is_some_and(|f| f.list == List::Idle && !f.vacant)
    }

    #[inline]
    fn enqueue(&mut self, slot: Slot, _len: u32, _was_empty: bool) {
        // A queue still in a list (even emptied by a drop) keeps its place,
        // as in FreeBSD, where it stays active until the round finds it empty.
        let quantum = i64::from(self.quantum);
        match self.flows.get_mut(slot as usize) {
            Some(f) if f.list == List::Idle && !f.vacant => {
                f.deficit = quantum;
                self.push_back(List::New, slot);
            }
            _ => {}
        }
    }

    fn dequeue(&mut self, ops: &mut dyn QueueOps) -> Option<QueueId> {
        let quantum = i64::from(self.quantum);
        loop {
            let (l, s) = if self.new.head != NIL {
                (List::New, self.new.head)
            } else if self.old.head != NIL {
                (List::Old, self.old.head)
            } else {
                return None;
            };
            let f = &mut self.flows[s as usize];
            if f.deficit < 0 {
                // Turn over: one more quantum, and to the back of the old list.
                f.deficit += quantum;
                self.unlink(s);
                self.push_back(List::Old, s);
                continue;
            }
            let q = f.queue;
            match ops.pop(q) {
                Some(len) => {
                    self.flows[s as usize].deficit -= i64::from(len);
                    return Some(q);
                }
                None => {
                    // RFC 8290 §4.2: an empty new queue goes to the old list
                    // (so a flow cannot stay new by sending one packet per
                    // round); an empty old queue leaves.
                    self.unlink(s);
                    if l == List::New {
                        self.push_back(List::Old, s);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::time::NS_PER_MS;

    #[derive(Default)]
    struct Queues {
        q: Vec<VecDeque<u32>>,
        served: Vec<(QueueId, u32)>,
    }

    impl QueueOps for Queues {
        fn head_len(&self, q: QueueId) -> Option<u32> {
            self.q[q as usize].front().copied()
        }
        fn pop(&mut self, q: QueueId) -> Option<u32> {
            let len = self.q[q as usize].pop_front()?;
            self.served.push((q, len));
            Some(len)
        }
    }

    fn rig(n: usize, quantum: u32) -> (FqDrr, Queues, Vec<Slot>) {
        let mut s = FqDrr::new(quantum);
        let mut ops = Queues::default();
        let slots = (0..n)
            .map(|i| {
                ops.q.push(VecDeque::new());
                s.add_queue(i as QueueId, 1)
            })
            .collect();
        (s, ops, slots)
    }

    #[test]
    fn parameters_follow_freebsd_defaults_and_bounds() {
        let p = FqCodelParams::parse(&[]).unwrap();
        assert_eq!(
            p.describe(),
            " FQ_CODEL target 5ms interval 100ms quantum 1514 limit 10240 flows 1024 NoECN"
        );
        let p = FqCodelParams::parse(&[
            ("target".into(), 7 * NS_PER_MS),
            ("ecn".into(), 1),
            ("flows".into(), 1),
        ])
        .unwrap();
        assert_eq!(p.sub_queues().buckets, 1);
        assert!(p.describe().ends_with("flows 1 ECN"), "{}", p.describe());
        for bad in [
            ("quantum", 0),
            ("quantum", 9001),
            ("limit", 20481),
            ("flows", 65537),
            ("flows", 0),
            ("target", 0),
            ("target", 6 * NS_PER_SEC),
            ("lmax", 1),
        ] {
            assert!(
                (TYPE.new_instance)(&[(bad.0.into(), bad.1)]).is_err(),
                "{bad:?}"
            );
        }
        assert!(super::super::lookup("FQ_CODEL").is_some());
    }

    #[test]
    fn new_flows_go_first_and_empty_new_flows_pass_through_old() {
        let (mut s, mut ops, slots) = rig(3, 1000);
        for _ in 0..4 {
            ops.q[0].push_back(1000);
            s.enqueue(slots[0], 1000, false);
        }
        // A flow sends while its deficit is not negative: flow 0 sends
        // 1000 (deficit 0), and 1000 more (-1000) even after a newcomer.
        assert_eq!(s.dequeue(&mut ops), Some(0));
        ops.q[1].push_back(100);
        s.enqueue(slots[1], 100, true);
        assert_eq!(s.lists(), (vec![0, 1], vec![]));
        assert_eq!(s.dequeue(&mut ops), Some(0));
        // Flow 0 is out of credit: +1000 and to the old list; the newcomer
        // goes next, ahead of flow 0's next turn.
        assert_eq!(s.dequeue(&mut ops), Some(1));
        assert_eq!(s.lists(), (vec![1], vec![0]));
        // Flow 1, empty in the new list, passes to the old list (RFC 8290
        // §4.2) behind flow 0, which sends.
        assert_eq!(s.dequeue(&mut ops), Some(0));
        assert_eq!(s.lists(), (vec![], vec![0, 1]));
        // Flow 0 turns over to the tail; flow 1, empty in the old list, leaves.
        assert_eq!(s.dequeue(&mut ops), Some(0));
        assert_eq!(s.lists(), (vec![], vec![0]));
        assert_eq!(s.dequeue(&mut ops), None);
        assert_eq!(s.lists(), (vec![], vec![]));
    }

    proptest! {
        #[test]
        fn every_packet_leaves_once_and_lists_stay_sound(
            quantum in 1..3000u32,
            ops_list in prop::collection::vec((0..5u8, 0..4000u32, 0..3u8), 1..300),
        ) {
            let (mut s, mut ops, mut slots) = rig(5, quantum);
            let mut pushed = 0usize;
            for (q, len, act) in ops_list {
                let q = usize::from(q);
                match act {
                    0 => {
                        ops.q[q].push_back(len.max(1));
                        s.enqueue(slots[q], len, false);
                        pushed += 1;
                    }
                    1 => { s.dequeue(&mut ops); }
                    _ => {
                        if ops.q[q].is_empty() {
                            s.remove_queue(slots[q]);
                            slots[q] = s.add_queue(q as QueueId, 1);
                        }
                    }
                }
                let (new, old) = s.lists();
                prop_assert!(new.len() + old.len() <= 5);
            }
            while s.dequeue(&mut ops).is_some() {}
            prop_assert_eq!(ops.served.len(), pushed);
            prop_assert_eq!(s.lists(), (vec![], vec![]));
        }
    }
}
