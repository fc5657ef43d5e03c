//! `loss P [correlation C]`, `loss gemodel ...`, `loss state ...`: netem's
//! loss models, applied at the pipe's entry like `plr`.
//!
//! TODO(helper): state machines, validate, display, tests.

use super::correlated::Correlated;
use crate::rng::Probability;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossModel {
    /// `loss P [correlation C]` (netem's `loss random`).
    Random(Correlated),
    /// `loss gemodel P [R [1-H [1-K]]]`: Gilbert–Elliott.
    GilbertElliott {
        /// Good → bad transition probability.
        p: Probability,
        /// Bad → good transition probability.
        r: Probability,
        /// Loss probability in the bad state (`1-h`).
        loss_bad: Probability,
        /// Loss probability in the good state (`1-k`).
        loss_good: Probability,
    },
    /// `loss state P13 [P31 [P32 [P23 [P14]]]]`: the 4-state Markov model.
    FourState {
        p13: Probability,
        p31: Probability,
        p32: Probability,
        p23: Probability,
        p14: Probability,
    },
}
