//! A scheduler policy on its own, fed by packet counters instead of real
//! queues: the methodology of FreeBSD's `dn_test` harness, which times the
//! `enqueue`/`dequeue` pair of a `dn_alg` and nothing else. `dummynet bench
//! --sched` times [`PolicyWorkload::step`]; the engine itself reads no clock.

use super::{QueueId, QueueOps, SchedInstance, SchedType, Slot};

/// Packet lengths by queue: all equal, or spread over 64..1500 bytes with
/// weights 1..100 (the case that exercises WF2Q+'s finish-time ordering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    Equal,
    Mixed,
}

/// Queue `q` holds `depth[q]` packets of `len[q]` bytes.
struct Counted {
    len: Vec<u32>,
    depth: Vec<u32>,
}

impl QueueOps for Counted {
    #[inline]
    fn head_len(&self, q: QueueId) -> Option<u32> {
        let i = q as usize;
        (*self.depth.get(i)? > 0).then(|| self.len[i])
    }

    #[inline]
    fn pop(&mut self, q: QueueId) -> Option<u32> {
        let i = q as usize;
        let d = self.depth.get_mut(i)?;
        *d = d.checked_sub(1)?;
        Some(self.len[i])
    }
}

/// `flows` queues, each holding one packet; every step serves one packet
/// and gives its queue a new one, so each packet costs one `dequeue` and
/// one `enqueue` onto an idle queue, the policy's full cycle.
pub struct PolicyWorkload {
    policy: Box<dyn SchedInstance>,
    ops: Counted,
    slots: Vec<Slot>,
}

impl PolicyWorkload {
    pub fn new(kind: &SchedType, flows: u32, mix: Mix) -> Result<Self, String> {
        if flows == 0 {
            return Err("a scheduler workload needs at least one flow".into());
        }
        let mut policy = (kind.new_instance)(&[])?;
        let mixed = mix == Mix::Mixed;
        let ops = Counted {
            len: (0..flows)
                .map(|q| if mixed { 64 + (q * 7919) % 1437 } else { 1500 })
                .collect(),
            depth: vec![1; flows as usize],
        };
        let slots = (0..flows)
            .map(|q| {
                let slot = policy.add_queue(q, if mixed { 1 + q % 100 } else { 10 });
                policy.enqueue(slot, ops.len[q as usize], true);
                slot
            })
            .collect();
        Ok(PolicyWorkload { policy, ops, slots })
    }

    /// Serves one packet and refills its queue; returns the queue served.
    #[inline]
    pub fn step(&mut self) -> Option<QueueId> {
        let q = self.policy.dequeue(&mut self.ops)?;
        let i = q as usize;
        if let (Some(d), Some(&slot)) = (self.ops.depth.get_mut(i), self.slots.get(i)) {
            if *d == 0 {
                *d = 1;
                self.policy.enqueue(slot, self.ops.len[i], true);
            }
        }
        Some(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_policy_keeps_all_flows_served() {
        for kind in super::super::REGISTRY {
            let mut w = PolicyWorkload::new(kind, 10, Mix::Equal).unwrap();
            let mut seen = [0u32; 10];
            for _ in 0..1000 {
                let q = w.step().expect("always backlogged") as usize;
                seen[q] += 1;
            }
            // Equal weights and lengths: every scheduler here is fair to
            // within a packet per flow over whole rounds.
            assert!(seen.iter().all(|&n| n == 100), "{}: {seen:?}", kind.name);
        }
        assert!(PolicyWorkload::new(&super::super::fifo::TYPE, 0, Mix::Equal).is_err());
    }
}
