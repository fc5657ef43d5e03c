//! `duplicate P [correlation C]`: netem's packet duplication.
//!
//! At the pipe's entry, after loss, a packet is copied with probability `P`.
//! The copy is a packet of its own in the books (an arrival, then a delivery
//! or a drop) and follows the original through the rest of the pipe: the
//! same queue (where it may be dropped like any packet), the link, the delay
//! line. As in netem, the copy is made before corruption, so a corrupted
//! packet's copy is intact.

use super::correlated::{self, CorrState, Correlated};
use crate::rng::Rng;

/// Per-queue state.
#[derive(Debug, Clone, Copy, Default)]
pub struct DuplicateState(CorrState);

impl DuplicateState {
    #[inline]
    pub fn copy(&mut self, c: Correlated, rng: &mut Rng) -> bool {
        self.0.chance(c, rng)
    }
}

pub fn display(c: Correlated) -> String {
    format!("duplicate {}", correlated::display(c))
}
