//! A scheduler policy on its own, fed by packet counters instead of real
//! queues: the methodology of FreeBSD's `dn_test` harness, which times the
//! `enqueue`/`dequeue` pair of a `dn_alg` and nothing else. `dummynet bench
//! --sched` times [`PolicyWorkload::step`]; the engine itself reads no clock.

use super::{QueueId, QueueOps, SchedInstance, SchedType, Slot};
use crate::params::ParamError;

/// Packet lengths by queue: all equal, or spread over 64..1500 bytes with
/// weights 1..100 (the case that exercises WF2Q+'s finish-time ordering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    Equal,
    Mixed,
}

/// One queue of the workload: `depth` packets of `len` bytes, and its slot
/// in the policy. Kept together so that serving a queue touches one cache
/// line of the harness, not three: at a million flows each would be a miss
/// charged to the policy.
#[derive(Clone, Copy)]
struct Counted {
    len: u32,
    depth: u32,
    slot: Slot,
}

struct Queues(Vec<Counted>);

impl QueueOps for Queues {
    #[inline]
    fn head_len(&self, q: QueueId) -> Option<u32> {
        let c = self.0.get(q as usize)?;
        (c.depth > 0).then_some(c.len)
    }

    #[inline]
    fn pop(&mut self, q: QueueId) -> Option<u32> {
        let c = self.0.get_mut(q as usize)?;
        c.depth = c.depth.checked_sub(1)?;
        Some(c.len)
    }
}

/// Why a [`PolicyWorkload`] could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("a scheduler workload needs at least one flow")]
    NoFlows,
    /// The scheduler refused its default parameters.
    #[error(transparent)]
    Policy(#[from] ParamError),
}

/// `flows` queues, each holding one packet; every step serves one packet
/// and gives its queue a new one, so each packet costs one `dequeue` and
/// one `enqueue` onto an idle queue, the policy's full cycle.
pub struct PolicyWorkload {
    policy: Box<dyn SchedInstance>,
    ops: Queues,
}

impl PolicyWorkload {
    pub fn new(kind: &SchedType, flows: u32, mix: Mix) -> Result<Self, WorkloadError> {
        if flows == 0 {
            return Err(WorkloadError::NoFlows);
        }
        let mut policy = (kind.new_instance)(&[])?;
        let mixed = mix == Mix::Mixed;
        let ops = Queues(
            (0..flows)
                .map(|q| {
                    let len = if mixed { 64 + (q * 7919) % 1437 } else { 1500 };
                    let slot = policy.add_queue(q, if mixed { 1 + q % 100 } else { 10 });
                    policy.enqueue(slot, len, true);
                    Counted {
                        len,
                        depth: 1,
                        slot,
                    }
                })
                .collect(),
        );
        Ok(PolicyWorkload { policy, ops })
    }

    /// Serves one packet and refills its queue; returns the queue served.
    #[inline]
    pub fn step(&mut self) -> Option<QueueId> {
        let q = self.policy.dequeue(&mut self.ops)?;
        if let Some(c) = self.ops.0.get_mut(q as usize) {
            if c.depth == 0 {
                c.depth = 1;
                let (slot, len) = (c.slot, c.len);
                self.policy.enqueue(slot, len, true);
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
        let e = PolicyWorkload::new(&super::super::fifo::TYPE, 0, Mix::Equal).err();
        assert_eq!(e, Some(WorkloadError::NoFlows));
    }
}
