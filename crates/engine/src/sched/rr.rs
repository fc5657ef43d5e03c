//! RR: deficit round robin (Shreedhar & Varghese, *Efficient Fair Queueing
//! using Deficit Round Robin*, SIGCOMM 1995), FreeBSD's `dn_sched_rr`.
//!
//! Backlogged queues sit in a ring. The queue at the head of the ring sends
//! packets while its head packet fits in its credit; when one does not, the
//! queue is granted its quantum and the head moves on. A queue's quantum is
//! its weight times the quantum base, so over a round it sends about
//! `weight × base` bytes and the link is shared in proportion to weights.
//! Each packet costs O(1) when the quantum is at least the largest packet.
//!
//! FreeBSD's parameters, kept: the quantum base is the flowset's `lmax`
//! (`queue N config ... lmax L`, FreeBSD's `fs.par[1]`, read per queue by
//! `rr_new_queue`), 1500 bytes by default within 64..=2048; the weight is
//! 1..=65536 (this engine's flowsets allow 1..=100); a queue joining the ring
//! starts with one quantum of credit. A queue whose flowset sets no `lmax`
//! takes the scheduler's `sched N config type rr lmax B` (`quantum` is
//! another name for it), this engine's own default: FreeBSD reads a
//! scheduler's `lmax` only for its internal FIFO flowset.
//!
//! Where this departs from FreeBSD, on purpose:
//! * A queue that empties leaves the ring at once, as in Shreedhar &
//!   Varghese, instead of when the round next finds it empty. Its credit
//!   restarts at one quantum when it returns either way, so shares are the
//!   same; and an instance with nothing queued holds no state at all, which
//!   lets an idle instance hand a packet straight to the link
//!   ([`SchedType::idle_bypass`]).
//! * When a whole round passes without a packet fitting anywhere (every head
//!   is longer than its queue's credit, as with 64 KiB GSO packets and a
//!   1500-byte base), the rounds that would send nothing are granted at once
//!   instead of one visit at a time. The order of service is unchanged.

use super::{ParamSpec, QueueId, QueueOps, SchedInstance, SchedType, Slot};
use crate::params::{OutOfRange, ParamError};

/// FreeBSD's RR quantum base: default and bounds (`rr_config`).
pub const DEFAULT_QUANTUM: u32 = 1500;
pub const MIN_QUANTUM: u32 = 64;
pub const MAX_QUANTUM: u32 = 2048;
/// FreeBSD's RR weight bound (`rr_new_fsk`).
pub const MAX_RR_WEIGHT: u32 = 65536;

pub static TYPE: SchedType = SchedType {
    name: "rr",
    aliases: &["drr"],
    display: "RR",
    params: &[ParamSpec::count("lmax"), ParamSpec::count("quantum")],
    tunables: &[],
    new_instance: |params| Ok(Box::new(Rr::new(quantum_param(params)?))),
    // With nothing queued the ring is empty and no credit is remembered, so
    // a packet that finds the instance idle would be served at once and
    // leave nothing behind.
    idle_bypass: true,
    queue_state_bytes: std::mem::size_of::<Member>(),
    sub_queues: None,
    describe: None,
    weight_is_priority: false,
    lmax: Some(MIN_QUANTUM..=MAX_QUANTUM),
};

/// The quantum base from `lmax N` or `quantum N` (the last one given).
fn quantum_param(params: &[(String, u64)]) -> Result<u32, ParamError> {
    let mut base = DEFAULT_QUANTUM;
    for (k, v) in params {
        if !(k.eq_ignore_ascii_case("lmax") || k.eq_ignore_ascii_case("quantum")) {
            return Err(format!("rr takes `lmax` (or `quantum`), not `{k}`").into());
        }
        base = u32::try_from(*v)
            .ok()
            .filter(|b| (MIN_QUANTUM..=MAX_QUANTUM).contains(b))
            .ok_or_else(|| {
                OutOfRange::new(k.as_str(), v, MIN_QUANTUM, MAX_QUANTUM)
                    .owner("rr")
                    .inclusive()
                    .unit("bytes")
            })?;
    }
    Ok(base)
}

/// End of a ring link.
const NIL: u32 = u32::MAX;

/// Per-queue state.
#[derive(Debug, Clone)]
struct Member {
    /// Bytes the queue may still send in this visit; may exceed the quantum
    /// by less than one packet.
    credit: u64,
    /// `weight × base`, at most 2^27.
    quantum: u32,
    /// Its flowset's `lmax` (0: the instance's base).
    lmax: u16,
    queue: QueueId,
    /// Ring neighbours while `in_ring`.
    next: u32,
    prev: u32,
    in_ring: bool,
    vacant: bool,
}

/// One RR scheduler instance.
#[derive(Debug)]
pub struct Rr {
    base: u32,
    members: Vec<Member>,
    free: Vec<Slot>,
    /// The queue being served, or `NIL` when the ring is empty.
    head: u32,
    /// Queues in the ring.
    ring_len: u32,
}

impl Rr {
    pub fn new(base: u32) -> Self {
        Rr {
            base: base.clamp(MIN_QUANTUM, MAX_QUANTUM),
            members: Vec::new(),
            free: Vec::new(),
            head: NIL,
            ring_len: 0,
        }
    }

    /// FreeBSD bumps a weight below 1 to the default, 1, and clamps above;
    /// the base is the flowset's `lmax` if set (clamped to FreeBSD's
    /// bounds), else the instance's.
    fn quantum_for(&self, weight: u32, lmax: u16) -> u32 {
        let w = if weight == 0 {
            1
        } else {
            weight.min(MAX_RR_WEIGHT)
        };
        let base = if lmax == 0 {
            self.base
        } else {
            u32::from(lmax).clamp(MIN_QUANTUM, MAX_QUANTUM)
        };
        w * base
    }

    /// Appends `s` at the tail of the ring (just behind the head).
    fn append(&mut self, s: u32) {
        if self.head == NIL {
            let m = &mut self.members[s as usize];
            m.next = s;
            m.prev = s;
            self.head = s;
        } else {
            let head = self.head;
            let tail = self.members[head as usize].prev;
            self.members[tail as usize].next = s;
            self.members[head as usize].prev = s;
            let m = &mut self.members[s as usize];
            m.prev = tail;
            m.next = head;
        }
        let m = &mut self.members[s as usize];
        m.in_ring = true;
        m.credit = u64::from(m.quantum);
        self.ring_len += 1;
    }

    /// Takes `s` out of the ring; the head moves on if it was `s`.
    fn unlink(&mut self, s: u32) {
        let (prev, next) = {
            let m = &mut self.members[s as usize];
            if !m.in_ring {
                return;
            }
            m.in_ring = false;
            (m.prev, m.next)
        };
        self.ring_len -= 1;
        if self.ring_len == 0 {
            self.head = NIL;
            return;
        }
        self.members[prev as usize].next = next;
        self.members[next as usize].prev = prev;
        if self.head == s {
            self.head = next;
        }
    }

    /// A whole round found every head longer than its credit. Grants at once
    /// the further rounds in which still nothing would fit, so the coming
    /// round sends. Returns false if a queue turned out empty (it was unlinked and
    /// the caller starts over).
    fn skip_idle_rounds(&mut self, ops: &dyn QueueOps) -> bool {
        let mut rounds = u64::MAX;
        let mut s = self.head;
        for _ in 0..self.ring_len {
            let m = &self.members[s as usize];
            let next = m.next;
            let Some(len) = ops.head_len(m.queue) else {
                self.unlink(s);
                return false;
            };
            // Visits until this head fits: ceil((len - credit) / quantum).
            let short = u64::from(len).saturating_sub(m.credit);
            let q = u64::from(m.quantum.max(1));
            rounds = rounds.min(short.div_ceil(q));
            s = next;
        }
        // Each of those rounds would have granted every queue its quantum
        // and sent nothing; in the round after them, a head fits.
        let skip = rounds;
        if skip > 0 && skip != u64::MAX {
            let mut s = self.head;
            for _ in 0..self.ring_len {
                let m = &mut self.members[s as usize];
                m.credit = m.credit.saturating_add(skip * u64::from(m.quantum));
                s = m.next;
            }
        }
        true
    }
}

impl SchedInstance for Rr {
    fn add_queue(&mut self, q: QueueId, weight: u32) -> Slot {
        self.add_queue_with_lmax(q, weight, 0)
    }

    fn add_queue_with_lmax(&mut self, q: QueueId, weight: u32, lmax: u32) -> Slot {
        let lmax = u16::try_from(lmax.min(MAX_QUANTUM)).unwrap_or(0);
        let m = Member {
            credit: 0,
            quantum: self.quantum_for(weight, lmax),
            lmax,
            queue: q,
            next: NIL,
            prev: NIL,
            in_ring: false,
            vacant: false,
        };
        if let Some(s) = self.free.pop() {
            self.members[s as usize] = m;
            s
        } else {
            self.members.push(m);
            (self.members.len() - 1) as Slot
        }
    }

    fn remove_queue(&mut self, slot: Slot) {
        match self.members.get(slot as usize) {
            Some(m) if !m.vacant => {}
            _ => return,
        }
        // Normally already out of the ring (it is empty); if queue management
        // emptied it behind our back, it leaves now.
        self.unlink(slot);
        self.members[slot as usize].vacant = true;
        self.free.push(slot);
    }

    fn set_weight(&mut self, slot: Slot, weight: u32) {
        let Some(lmax) = self.members.get(slot as usize).map(|m| m.lmax) else {
            return;
        };
        let quantum = self.quantum_for(weight, lmax);
        if let Some(m) = self.members.get_mut(slot as usize) {
            // Applies from the next grant; the credit in hand is kept.
            m.quantum = quantum;
        }
    }

    #[inline]
    fn enqueue(&mut self, slot: Slot, _len: u32, _was_empty: bool) {
        // Our own view of backlog decides: a queue in the ring stays where it
        // is, whatever happened to its packets.
        match self.members.get(slot as usize) {
            Some(m) if !m.in_ring && !m.vacant => self.append(slot),
            _ => {}
        }
    }

    fn dequeue(&mut self, ops: &mut dyn QueueOps) -> Option<QueueId> {
        // Visits in a row that sent nothing; a full round of them means every
        // head is too long for its credit.
        let mut fruitless = 0u32;
        loop {
            let s = self.head;
            if s == NIL {
                return None;
            }
            let m = &self.members[s as usize];
            let q = m.queue;
            let Some(len) = ops.head_len(q) else {
                self.unlink(s);
                fruitless = 0;
                continue;
            };
            if u64::from(len) > m.credit {
                let m = &mut self.members[s as usize];
                m.credit += u64::from(m.quantum);
                self.head = m.next;
                fruitless += 1;
                if fruitless >= self.ring_len {
                    if !self.skip_idle_rounds(ops) {
                        fruitless = 0;
                        continue;
                    }
                    fruitless = 0;
                }
                continue;
            }
            match ops.pop(q) {
                None => {
                    // Queue management dropped all it had.
                    self.unlink(s);
                    fruitless = 0;
                }
                Some(sent) => {
                    let m = &mut self.members[s as usize];
                    // Queue management may have sent a later, longer packet
                    // than the head we checked: the credit bottoms out at 0.
                    m.credit = m.credit.saturating_sub(u64::from(sent));
                    if ops.head_len(q).is_none() {
                        self.unlink(s);
                    }
                    return Some(q);
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

    use super::super::testkit::Queues;

    struct Rig {
        s: Rr,
        ops: Queues,
        slots: Vec<Slot>,
    }

    impl Rig {
        fn new(base: u32, weights: &[u32]) -> Self {
            let mut rig = Rig {
                s: Rr::new(base),
                ops: Queues::default(),
                slots: Vec::new(),
            };
            for &w in weights {
                let q = rig.ops.q.len() as QueueId;
                rig.ops.q.push(VecDeque::new());
                rig.slots.push(rig.s.add_queue(q, w));
            }
            rig
        }
        fn push(&mut self, q: QueueId, len: u32) {
            let was_empty = self.ops.q[q as usize].is_empty();
            self.ops.q[q as usize].push_back(len);
            self.s.enqueue(self.slots[q as usize], len, was_empty);
        }
        fn serve(&mut self) -> Option<QueueId> {
            self.s.dequeue(&mut self.ops)
        }
    }

    #[test]
    fn parameters_follow_freebsd_bounds() {
        assert!((TYPE.new_instance)(&[]).is_ok());
        assert!((TYPE.new_instance)(&[("lmax".into(), 64)]).is_ok());
        assert!((TYPE.new_instance)(&[("quantum".into(), 2048)]).is_ok());
        assert!((TYPE.new_instance)(&[("lmax".into(), 63)]).is_err());
        assert!((TYPE.new_instance)(&[("lmax".into(), 2049)]).is_err());
        assert!((TYPE.new_instance)(&[("weight".into(), 2)]).is_err());
        assert_eq!(quantum_param(&[]).unwrap(), 1500);
        let t = super::super::lookup("RR").unwrap();
        assert_eq!(t.display, "RR");
        assert!(super::super::lookup("drr").is_some());
    }

    #[test]
    fn quantum_is_weight_times_base() {
        let r = Rr::new(1000);
        assert_eq!(r.quantum_for(1, 0), 1000);
        assert_eq!(r.quantum_for(0, 0), 1000, "below 1: FreeBSD's default");
        assert_eq!(r.quantum_for(70_000, 0), 65536 * 1000, "clamped");
        // The flowset's lmax, when set, is the base.
        assert_eq!(r.quantum_for(3, 500), 1500);
        assert_eq!(r.quantum_for(1, 2048), 2048);
    }

    #[test]
    fn each_queue_uses_its_flowsets_lmax() {
        // Instance base 1000; queue 1's flowset says lmax 300, so each round
        // it sends 300 bytes (three 100-byte packets) to queue 0's 1000.
        let mut s = Rr::new(1000);
        let mut ops = Queues::default();
        ops.q.push(VecDeque::new());
        ops.q.push(VecDeque::new());
        let slots = [s.add_queue(0, 1), s.add_queue_with_lmax(1, 1, 300)];
        for _ in 0..20 {
            for (q, &slot) in slots.iter().enumerate() {
                ops.q[q].push_back(100);
                s.enqueue(slot, 100, false);
            }
        }
        let order: Vec<QueueId> = (0..13).map(|_| s.dequeue(&mut ops).unwrap()).collect();
        assert_eq!(order, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn one_round_serves_quantum_bytes_per_queue() {
        // Base 1000: weight 1 sends one 1000-byte packet per round, weight 3
        // three; in the order DRR prescribes.
        let mut rig = Rig::new(1000, &[1, 3]);
        for _ in 0..6 {
            rig.push(0, 1000);
            rig.push(1, 1000);
        }
        let order: Vec<QueueId> = (0..8).map(|_| rig.serve().unwrap()).collect();
        assert_eq!(order, [0, 1, 1, 1, 0, 1, 1, 1]);
    }

    #[test]
    fn credit_carries_over_between_rounds() {
        // Quantum 1000, packets of 600: 1 packet, then 2 (400 + 1000 left),
        // then 1 (800 → 200 + 1000 = 1200 → 2)...: 600·n bytes track 1000·r.
        let mut rig = Rig::new(1000, &[1, 1]);
        for _ in 0..50 {
            rig.push(0, 600);
            rig.push(1, 1000);
        }
        let mut sent = [0u64; 2];
        for _ in 0..60 {
            let q = rig.serve().unwrap();
            sent[q as usize] += if q == 0 { 600 } else { 1000 };
            assert!(sent[0].abs_diff(sent[1]) <= 2 * 1000 + 1000, "{sent:?}");
        }
    }

    #[test]
    fn giant_packets_are_served_without_visiting_round_by_round() {
        let mut rig = Rig::new(64, &[1, 2]);
        rig.push(0, 65_000);
        rig.push(1, 65_000);
        rig.push(0, 65_000);
        // Queue 1 reaches 65000 bytes of credit first (128 per round).
        assert_eq!(rig.serve(), Some(1));
        assert_eq!(rig.serve(), Some(0));
        assert_eq!(rig.serve(), Some(0));
        assert_eq!(rig.serve(), None);
        assert_eq!(rig.s.ring_len, 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8, u32),
        Serve(u8),
        Weight(u8, u32),
        AqmDrop(u8),
        Replace(u8, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..6u8, 1..5000u32).prop_map(|(q, l)| Op::Push(q, l)),
            3 => (1..4u8).prop_map(Op::Serve),
            1 => (0..6u8, 0..120u32).prop_map(|(q, w)| Op::Weight(q, w)),
            1 => (0..6u8).prop_map(Op::AqmDrop),
            1 => (0..6u8, 0..120u32).prop_map(|(q, w)| Op::Replace(q, w)),
        ]
    }

    proptest! {
        #[test]
        fn every_packet_leaves_exactly_once(
            base in 64..2049u32,
            weights in prop::collection::vec(0..120u32, 6),
            ops in prop::collection::vec(op(), 1..300),
        ) {
            let mut rig = Rig::new(base, &weights);
            let mut pushed = Vec::new();
            for op in ops {
                match op {
                    Op::Push(q, len) => {
                        let tag = ((pushed.len() as u32) << 13) | len;
                        pushed.push(tag);
                        rig.push(u32::from(q), tag);
                    }
                    Op::Serve(n) => {
                        for _ in 0..n {
                            let backlogged = rig.ops.q.iter().any(|q| !q.is_empty());
                            let aqm = !rig.ops.aqm_drops.is_empty();
                            let served = rig.serve();
                            prop_assert!(backlogged || served.is_none());
                            prop_assert!(!backlogged || aqm || served.is_some());
                        }
                    }
                    Op::Weight(q, w) => rig.s.set_weight(rig.slots[usize::from(q)], w),
                    Op::AqmDrop(q) => {
                        if !rig.ops.aqm_drops.contains(&u32::from(q)) {
                            rig.ops.aqm_drops.push(u32::from(q));
                        }
                    }
                    Op::Replace(q, w) => {
                        let q = usize::from(q);
                        if rig.ops.q[q].is_empty() {
                            rig.s.remove_queue(rig.slots[q]);
                            rig.slots[q] = rig.s.add_queue(q as QueueId, w);
                        }
                    }
                }
            }
            while rig.serve().is_some() {}
            prop_assert!(rig.ops.q.iter().all(VecDeque::is_empty));
            prop_assert_eq!(rig.ops.empty_pops, 0);
            prop_assert_eq!(rig.s.ring_len, 0);
            let mut out: Vec<u32> = rig.ops.served.iter().map(|s| s.1)
                .chain(rig.ops.aqm_dropped.iter().copied()).collect();
            out.sort_unstable();
            prop_assert_eq!(out, pushed);
        }
    }
}
