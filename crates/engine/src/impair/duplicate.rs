//! `duplicate P [correlation C]`: netem's packet duplication.
//!
//! At the pipe's entry, after loss, a packet is copied with probability `P`.
//! The copy is a packet of its own in the books (an arrival, then a delivery
//! or a drop) and follows the original through the rest of the pipe: the
//! same queue (where it may be dropped like any packet), the link, the delay
//! line. As in netem, the copy is made before corruption, so a corrupted
//! packet's copy is intact.

use super::correlated::{self, CorrState, Correlated};
use super::{Impairment, Stage};
use crate::rng::Rng;

/// `duplicate P [correlation C]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Duplicate(pub Correlated);

/// Per-queue state.
#[derive(Debug, Clone, Copy, Default)]
pub struct DuplicateState(CorrState);

impl DuplicateState {
    #[inline]
    pub fn copy(&mut self, d: Duplicate, rng: &mut Rng) -> bool {
        self.0.chance(d.0, rng)
    }
}

impl Impairment for Duplicate {
    fn name(&self) -> &'static str {
        "duplicate"
    }

    fn stage(&self) -> Stage {
        Stage::Entry
    }

    fn display(&self) -> String {
        format!("duplicate {}", correlated::display(self.0))
    }
}
