//! Test support shared by the schedulers' unit tests: queues a policy can
//! serve without an engine.

use std::collections::VecDeque;

use super::{QueueId, QueueOps};

/// Per-queue packet lengths. A queue listed in `aqm_drops` loses its whole
/// backlog to its AQM on the next pop (counted in `aqm_dropped`); a pop of an
/// empty queue with no AQM to blame is counted in `empty_pops`.
#[derive(Default)]
pub(crate) struct Queues {
    pub q: Vec<VecDeque<u32>>,
    pub aqm_drops: Vec<QueueId>,
    pub served: Vec<(QueueId, u32)>,
    pub aqm_dropped: Vec<u32>,
    pub empty_pops: usize,
}

impl QueueOps for Queues {
    fn head_len(&self, q: QueueId) -> Option<u32> {
        self.q[q as usize].front().copied()
    }
    fn pop(&mut self, q: QueueId) -> Option<u32> {
        if let Some(i) = self.aqm_drops.iter().position(|&d| d == q) {
            self.aqm_drops.swap_remove(i);
            self.aqm_dropped.extend(self.q[q as usize].drain(..));
        } else if self.q[q as usize].is_empty() {
            self.empty_pops += 1;
        }
        let len = self.q[q as usize].pop_front()?;
        self.served.push((q, len));
        Some(len)
    }
}
