//! What left each pipe and queue, counted as packets leave the engine.

use dummynet_engine::{DropReason, Nanos, Target};

use crate::clock::Lateness;

/// What became of the packets a rule sent to one pipe or queue: delivered
/// out of it, or dropped there (on entry or inside), by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TargetCounts {
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub drops: [u64; DropReason::ALL.len()],
}

/// [`TargetCounts`] by pipe and queue, kept by the data plane as packets
/// leave the engine: a hash lookup and two adds per packet; an entry is
/// made the first time a target is seen and kept (at most one per pipe or
/// queue number that ever carried traffic).
///
/// Also counts the bridged frames that passed their `in` pass and went on
/// to their `out` pass: the engine counts each pass as a packet arriving
/// (and the first as delivered), the report counts frames.
#[derive(Debug, Default)]
pub struct TargetBook(
    pub(super) std::collections::HashMap<Target, TargetCounts, TargetHasher>,
    pub(super) u64,
);

/// Targets are two small numbers: FxHash is plenty, and cheap per packet.
type TargetHasher = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

impl TargetBook {
    pub(super) fn delivered(&mut self, target: Option<Target>, bytes: u32) {
        if let Some(t) = target {
            let c = self.0.entry(t).or_default();
            c.delivered += 1;
            c.delivered_bytes += u64::from(bytes);
        }
    }

    pub(super) fn dropped(&mut self, target: Option<Target>, reason: DropReason) {
        if let Some(t) = target {
            if let Some(i) = DropReason::ALL.iter().position(|r| *r == reason) {
                self.0.entry(t).or_default().drops[i] += 1;
            }
        }
    }

    pub(super) fn forwarded(&mut self) {
        self.1 += 1;
    }

    pub(super) fn list(&self) -> Vec<(Target, TargetCounts)> {
        self.0.iter().map(|(t, c)| (*t, *c)).collect()
    }
}

/// What has left the engine: the hand-over still to make, how late each
/// was, and what left each pipe and queue.
#[derive(Default)]
pub(super) struct Departures {
    /// Earliest departure time among packets released but not yet handed
    /// to the kernel.
    pub(super) due: Option<Nanos>,
    /// When the first of those was released (clock time): it is handed
    /// over once it has waited [`super::FLUSH_SLACK`] since, even mid-batch.
    pub(super) since: Nanos,
    pub(super) lateness: Lateness,
    pub(super) targets: TargetBook,
}
