//! Queue management: what a flow queue does when it grows.
//!
//! Every queue first enforces its size limit (tail drop). An AQM may in
//! addition drop or mark on arrival (RED, PIE) or at departure (CoDel). Each
//! AQM is one file implementing [`AqmState`] and one arm in [`new_state`].
//! Drop tail, FreeBSD's default, needs no state at all.

use crate::config::AqmConfig;
use crate::rng::Rng;
use crate::time::Nanos;

/// What the AQM decides for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AqmVerdict {
    Accept,
    Drop,
    /// Set ECN CE instead of dropping (the packet is ECN-capable).
    Mark,
}

/// The queue a decision is about.
#[derive(Debug, Clone, Copy)]
pub struct QueueState {
    pub len_pkts: u32,
    pub len_bytes: u64,
}

/// Per-queue AQM state.
pub trait AqmState: Send + std::fmt::Debug {
    /// A packet of `len` bytes arrives at a queue in state `q` (before it is added).
    fn on_enqueue(&mut self, now: Nanos, q: QueueState, len: u32, rng: &mut Rng) -> AqmVerdict;
    /// The head packet, queued since `enqueued_at`, is about to leave a queue
    /// in state `q` (still counting that packet).
    fn on_dequeue(
        &mut self,
        now: Nanos,
        enqueued_at: Nanos,
        q: QueueState,
        rng: &mut Rng,
    ) -> AqmVerdict;
}

/// The state a new queue of this flowset gets; `None` for drop tail.
pub fn new_state(cfg: &AqmConfig) -> Option<Box<dyn AqmState>> {
    match cfg {
        AqmConfig::DropTail => None,
    }
}

/// The AQM as `show` prints it after the flowset line.
pub fn display(cfg: &AqmConfig) -> String {
    match cfg {
        AqmConfig::DropTail => "droptail".to_string(),
    }
}
