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

/// Per-queue state (placeholder until the full models land).
#[derive(Debug, Clone, Copy, Default)]
pub struct LossState {
    corr: super::correlated::CorrState,
    bad: bool,
}

impl LossState {
    pub fn lost(&mut self, m: &LossModel, rng: &mut crate::rng::Rng) -> bool {
        match *m {
            LossModel::Random(c) => self.corr.chance(c, rng),
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let lost = rng.chance(if self.bad { loss_bad } else { loss_good });
                if self.bad {
                    if rng.chance(r) {
                        self.bad = false;
                    }
                } else if rng.chance(p) {
                    self.bad = true;
                }
                lost
            }
            LossModel::FourState { p13, .. } => rng.chance(p13),
        }
    }
}

/// Placeholder until the full models land.
pub fn validate(_m: &LossModel) -> Result<(), String> {
    Ok(())
}
