//! `seed N`: a pipe's own random streams, as netem's `seed` gives a qdisc
//! its own generator.
//!
//! Without it, the streams of a pipe's queues and scheduler instances are
//! named from the engine's seed and the objects' numbers (see
//! [`crate::pipes`]). With it, they are named from N and the objects' places
//! in the pipe alone (its own queue or a `queue M` feeding it; its scheduler
//! or its FIFO; the flow id), not from the pipe's number: two pipes with
//! the same impairments and seed draw the same numbers, whatever else the
//! engine carries. It draws nothing itself.

use super::{Impairment, Stage};

/// The seed of a pipe's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seed(pub u64);

impl Impairment for Seed {
    fn name(&self) -> &'static str {
        "seed"
    }

    /// Configured on the link; it names the streams of every stage.
    fn stage(&self) -> Stage {
        Stage::Link
    }

    fn display(&self) -> String {
        format!("seed {}", self.0)
    }
}
