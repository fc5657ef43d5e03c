//! FIFO: packets leave in arrival order, whatever queue they sit in.
//! FreeBSD's `dn_fifo`, the scheduler of every plain pipe.

use std::collections::VecDeque;

use super::{QueueId, QueueOps, SchedInstance, SchedType, Slot};

pub static TYPE: SchedType = SchedType {
    name: "fifo",
    aliases: &[],
    display: "FIFO",
    params: &[],
    tunables: &[],
    new_instance: |params| {
        if let Some((k, _)) = params.first() {
            return Err(format!("fifo takes no parameters (got `{k}`)").into());
        }
        Ok(Box::new(Fifo::default()))
    },
    idle_bypass: true,
    // Its slot -> queue table entry; arrival order costs only while busy.
    queue_state_bytes: std::mem::size_of::<QueueId>(),
    sub_queues: None,
    describe: None,
    weight_is_priority: false,
    lmax: None,
};

/// Arrival order as a list of queue ids, one entry per queued packet.
#[derive(Debug, Default)]
pub struct Fifo {
    /// Slot -> queue id.
    queues: Vec<QueueId>,
    free: Vec<Slot>,
    order: VecDeque<QueueId>,
}

impl SchedInstance for Fifo {
    fn add_queue(&mut self, q: QueueId, _weight: u32) -> Slot {
        if let Some(s) = self.free.pop() {
            self.queues[s as usize] = q;
            s
        } else {
            self.queues.push(q);
            (self.queues.len() - 1) as Slot
        }
    }

    fn remove_queue(&mut self, slot: Slot) {
        // Entries left behind by AQM drops must not outlive the queue id,
        // which the engine may reuse for another flow.
        let q = self.queues[slot as usize];
        self.order.retain(|&x| x != q);
        self.free.push(slot);
    }

    fn set_weight(&mut self, _slot: Slot, _weight: u32) {}

    #[inline]
    fn enqueue(&mut self, slot: Slot, _len: u32, _was_empty: bool) {
        self.order.push_back(self.queues[slot as usize]);
    }

    #[inline]
    fn dequeue(&mut self, ops: &mut dyn QueueOps) -> Option<QueueId> {
        // An entry whose packet an AQM already dropped yields `None`: skip it.
        while let Some(q) = self.order.pop_front() {
            if ops.pop(q).is_some() {
                return Some(q);
            }
        }
        None
    }
}
