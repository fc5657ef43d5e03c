//! PRIO: strict priority, FreeBSD's `dn_sched_prio`.
//!
//! A queue's `weight` is its priority, and the lowest number is served first
//! (FreeBSD takes the first set bit of its bitmap: "highest priority is 0").
//! FreeBSD allows as many levels as an `unsigned long` has bits, 64 on the
//! 64-bit systems it runs on today, and clamps a larger value to the last
//! level, 63; so here weights 63..=100 all share the lowest priority.
//! Weight 0, the best priority, is accepted for queues of a prio scheduler
//! only (the engine refuses it for other types, where FreeBSD would bump it
//! to 1). One difference remains: a queue given no weight is at priority 1
//! here, where FreeBSD's unset weight becomes priority 0.
//!
//! Within a level, packets leave in arrival order whatever queue they are in:
//! FreeBSD appends every packet of a level to the first backlogged queue of
//! that level, which makes the level one FIFO. Here packets stay in their own
//! queues and each level keeps the arrival order as a list of queues, one
//! entry per packet, as [`super::Fifo`] does. A lower level is served only
//! when every higher one is empty, so it gets nothing while they are
//! backlogged; the link is not preempted, so a packet already on the wire
//! finishes.
//!
//! Each packet costs O(1): a find-first-set on a 64-bit map of non-empty
//! levels and a pop from that level's list.

use std::collections::VecDeque;

use super::{QueueId, QueueOps, SchedInstance, SchedType, Slot};

/// FreeBSD's `MAXPRIO`: the bits of an `unsigned long` on LP64 systems.
pub const LEVELS: u32 = 64;

pub static TYPE: SchedType = SchedType {
    name: "prio",
    aliases: &[],
    display: "PRIO",
    params: &[],
    tunables: &[],
    new_instance: |params| {
        if let Some((k, _)) = params.first() {
            return Err(format!(
                "prio takes no parameters (got `{k}`); a queue's priority is its `weight`, lowest first"
            ).into());
        }
        Ok(Box::new(Prio::default()))
    },
    // Nothing queued means nothing remembered: a packet finding the
    // instance idle would be served at once.
    idle_bypass: true,
    queue_state_bytes: std::mem::size_of::<Member>(),
    sub_queues: None,
    describe: None,
    weight_is_priority: true,
    lmax: None,
};

/// Priority of a queue of weight `weight`: FreeBSD's bound to 0..=63.
pub fn level_of(weight: u32) -> u8 {
    weight.min(LEVELS - 1) as u8
}

/// No list allocated for a level.
const NONE: u8 = u8::MAX;

#[derive(Debug, Clone)]
struct Member {
    queue: QueueId,
    /// Entries of this slot in its level's list.
    pending: u32,
    level: u8,
    vacant: bool,
}

/// One PRIO scheduler instance.
#[derive(Debug)]
pub struct Prio {
    members: Vec<Member>,
    free: Vec<Slot>,
    /// Bit `l` set: level `l` has packets.
    busy: u64,
    /// Level -> index in `lists`, or `NONE`: instances are made per flow
    /// when the scheduler has a mask, so only levels in use cost memory.
    list_of: [u8; LEVELS as usize],
    /// Arrival order per level, one slot per packet.
    lists: Vec<VecDeque<Slot>>,
}

impl Default for Prio {
    fn default() -> Self {
        Prio {
            members: Vec::new(),
            free: Vec::new(),
            busy: 0,
            list_of: [NONE; LEVELS as usize],
            lists: Vec::new(),
        }
    }
}

impl Prio {
    fn list(&mut self, level: u8) -> &mut VecDeque<Slot> {
        let l = usize::from(level);
        if self.list_of[l] == NONE {
            // At most 64 lists, so the index fits a u8 below NONE.
            self.list_of[l] = self.lists.len() as u8;
            self.lists.push(VecDeque::new());
        }
        &mut self.lists[usize::from(self.list_of[l])]
    }

    /// Drops every entry of `slot` from its level's list (rare: only when a
    /// queue leaves or moves with entries left behind by queue management).
    fn purge(&mut self, slot: Slot) {
        let Some(m) = self.members.get_mut(slot as usize) else {
            return;
        };
        if m.pending == 0 {
            return;
        }
        m.pending = 0;
        let level = m.level;
        let list = self.list(level);
        list.retain(|&s| s != slot);
        if list.is_empty() {
            self.busy &= !(1u64 << level);
        }
    }
}

impl SchedInstance for Prio {
    fn add_queue(&mut self, q: QueueId, weight: u32) -> Slot {
        let m = Member {
            queue: q,
            pending: 0,
            level: level_of(weight),
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
        self.purge(slot);
        self.members[slot as usize].vacant = true;
        self.free.push(slot);
    }

    fn set_weight(&mut self, slot: Slot, weight: u32) {
        let level = level_of(weight);
        let Some(m) = self.members.get(slot as usize) else {
            return;
        };
        if m.level == level {
            return;
        }
        // Packets already queued move to the back of their new level.
        let pending = m.pending;
        self.purge(slot);
        self.members[slot as usize].level = level;
        for _ in 0..pending {
            self.list(level).push_back(slot);
        }
        if pending > 0 {
            self.members[slot as usize].pending = pending;
            self.busy |= 1u64 << level;
        }
    }

    #[inline]
    fn enqueue(&mut self, slot: Slot, _len: u32, _was_empty: bool) {
        let Some(m) = self.members.get_mut(slot as usize) else {
            return;
        };
        if m.vacant {
            return;
        }
        m.pending += 1;
        let level = m.level;
        self.list(level).push_back(slot);
        self.busy |= 1u64 << level;
    }

    #[inline]
    fn dequeue(&mut self, ops: &mut dyn QueueOps) -> Option<QueueId> {
        while self.busy != 0 {
            let level = self.busy.trailing_zeros() as u8;
            let list = self.list(level);
            let Some(slot) = list.pop_front() else {
                self.busy &= !(1u64 << level);
                continue;
            };
            if list.is_empty() {
                self.busy &= !(1u64 << level);
            }
            let m = &mut self.members[slot as usize];
            m.pending = m.pending.saturating_sub(1);
            let q = m.queue;
            let sent = ops.pop(q);
            // Queue management may have dropped packets on the way, leaving
            // more entries than packets; once the queue is empty, the extra
            // entries must go, or they would serve its next packets early.
            if ops.head_len(q).is_none() {
                self.purge(slot);
            }
            if sent.is_some() {
                return Some(q);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    #[derive(Default)]
    struct Queues {
        q: Vec<VecDeque<u32>>,
        aqm_drops: Vec<QueueId>,
        served: Vec<(QueueId, u32)>,
        aqm_dropped: Vec<u32>,
        empty_pops: usize,
    }

    impl QueueOps for Queues {
        fn head_len(&self, q: QueueId) -> Option<u32> {
            self.q[q as usize].front().copied()
        }
        fn pop(&mut self, q: QueueId) -> Option<u32> {
            if let Some(i) = self.aqm_drops.iter().position(|&d| d == q) {
                // Drops the head only, as CoDel does, and sends the next.
                self.aqm_drops.swap_remove(i);
                if let Some(d) = self.q[q as usize].pop_front() {
                    self.aqm_dropped.push(d);
                }
            } else if self.q[q as usize].is_empty() {
                self.empty_pops += 1;
            }
            let len = self.q[q as usize].pop_front()?;
            self.served.push((q, len));
            Some(len)
        }
    }

    struct Rig {
        s: Prio,
        ops: Queues,
        slots: Vec<Slot>,
    }

    impl Rig {
        fn new(weights: &[u32]) -> Self {
            let mut rig = Rig {
                s: Prio::default(),
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
    }

    #[test]
    fn lowest_weight_first_and_fifo_within_a_level() {
        // Queues 0 and 1 share priority 2, queue 2 has priority 1.
        let mut rig = Rig::new(&[2, 2, 1]);
        rig.push(0, 10);
        rig.push(1, 11);
        rig.push(0, 12);
        rig.push(2, 20);
        rig.push(1, 13);
        rig.push(2, 21);
        let mut order = Vec::new();
        while rig.s.dequeue(&mut rig.ops).is_some() {}
        for &(_, len) in &rig.ops.served {
            order.push(len);
        }
        assert_eq!(order, [20, 21, 10, 11, 12, 13]);
    }

    #[test]
    fn weights_above_63_share_the_last_level() {
        assert_eq!(level_of(0), 0);
        assert_eq!(level_of(63), 63);
        assert_eq!(level_of(100), 63);
        let mut rig = Rig::new(&[100, 64]);
        rig.push(0, 1);
        rig.push(1, 2);
        rig.push(0, 3);
        while rig.s.dequeue(&mut rig.ops).is_some() {}
        let order: Vec<u32> = rig.ops.served.iter().map(|s| s.1).collect();
        assert_eq!(order, [1, 2, 3], "one level, arrival order");
        assert!((TYPE.new_instance)(&[("weight".into(), 1)]).is_err());
        assert_eq!(super::super::lookup("PRIO").unwrap().display, "PRIO");
    }

    #[test]
    fn reprioritised_queue_moves_with_its_packets() {
        let mut rig = Rig::new(&[5, 3]);
        rig.push(0, 1);
        rig.push(0, 2);
        rig.push(1, 3);
        rig.s.set_weight(rig.slots[0], 1);
        while rig.s.dequeue(&mut rig.ops).is_some() {}
        let order: Vec<u32> = rig.ops.served.iter().map(|s| s.1).collect();
        assert_eq!(order, [1, 2, 3]);
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
            4 => (0..6u8, 1..3000u32).prop_map(|(q, l)| Op::Push(q, l)),
            3 => (1..4u8).prop_map(Op::Serve),
            1 => (0..6u8, 0..120u32).prop_map(|(q, w)| Op::Weight(q, w)),
            1 => (0..6u8).prop_map(Op::AqmDrop),
            1 => (0..6u8, 0..120u32).prop_map(|(q, w)| Op::Replace(q, w)),
        ]
    }

    proptest! {
        #[test]
        fn strict_and_every_packet_leaves_once(
            weights in prop::collection::vec(0..120u32, 6),
            ops in prop::collection::vec(op(), 1..300),
        ) {
            let mut rig = Rig::new(&weights);
            let mut levels: Vec<u8> = weights.iter().map(|&w| level_of(w)).collect();
            let mut pushed = Vec::new();
            for op in ops {
                match op {
                    Op::Push(q, len) => {
                        let tag = ((pushed.len() as u32) << 12) | len;
                        pushed.push(tag);
                        rig.push(u32::from(q), tag);
                    }
                    Op::Serve(n) => {
                        for _ in 0..n {
                            let backlogged = rig.ops.q.iter().any(|q| !q.is_empty());
                            let aqm = !rig.ops.aqm_drops.is_empty();
                            let served = rig.s.dequeue(&mut rig.ops);
                            prop_assert!(backlogged || served.is_none());
                            prop_assert!(!backlogged || aqm || served.is_some());
                            // Every queue still holding packets was there
                            // before: none may outrank the one served.
                            let best = (0..6).filter(|&q| !rig.ops.q[q].is_empty())
                                .map(|q| levels[q]).min();
                            if let (Some(q), Some(best)) = (served, best) {
                                prop_assert!(levels[q as usize] <= best, "strict priority");
                            }
                        }
                    }
                    Op::Weight(q, w) => {
                        rig.s.set_weight(rig.slots[usize::from(q)], w);
                        levels[usize::from(q)] = level_of(w);
                    }
                    Op::AqmDrop(q) => rig.ops.aqm_drops.push(u32::from(q)),
                    Op::Replace(q, w) => {
                        let q = usize::from(q);
                        if rig.ops.q[q].is_empty() {
                            rig.s.remove_queue(rig.slots[q]);
                            rig.slots[q] = rig.s.add_queue(q as QueueId, w);
                            levels[q] = level_of(w);
                        }
                    }
                }
            }
            while rig.s.dequeue(&mut rig.ops).is_some() {}
            prop_assert!(rig.ops.q.iter().all(VecDeque::is_empty));
            prop_assert_eq!(rig.ops.empty_pops, 0);
            prop_assert_eq!(rig.s.busy, 0);
            let mut out: Vec<u32> = rig.ops.served.iter().map(|s| s.1)
                .chain(rig.ops.aqm_dropped.iter().copied()).collect();
            out.sort_unstable();
            prop_assert_eq!(out, pushed);
        }
    }
}
