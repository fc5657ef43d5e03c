//! `reorder P [correlation C] [gap N]`: netem's reordering.
//!
//! Reordering is done by letting some packets skip the delay line's delay
//! (they still cross the link), so they overtake the packets delayed before
//! them. netem's rule, with `gap` 1 when it is not given: the first `N − 1`
//! packets are delayed; from then on each packet skips the delay with
//! probability `P`, and one that does restarts the count. So `reorder 100%
//! gap 5` sends exactly every 5th packet at once, `reorder 25%` (gap 1)
//! sends a quarter of them at once, and `reorder 25% gap 5` waits for four
//! delayed packets before each chance. The engine refuses `reorder` on a
//! pipe without a delay, where it could change nothing.

use super::correlated::{self, CorrState, Correlated};
use super::{Impairment, On, Stage};
use crate::params::ParamError;
use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reorder {
    pub p: Correlated,
    /// At least 1.
    pub gap: u32,
}

/// Per-instance state.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReorderState {
    /// Packets delayed since the last one that skipped the delay.
    counter: u32,
    corr: CorrState,
}

impl ReorderState {
    /// Whether the next packet skips the delay.
    #[inline]
    pub fn skip_delay(&mut self, r: &Reorder, rng: &mut Rng) -> bool {
        if self.counter.saturating_add(1) < r.gap || !self.corr.chance(r.p, rng) {
            self.counter = self.counter.saturating_add(1);
            false
        } else {
            self.counter = 0;
            true
        }
    }
}

impl Impairment for Reorder {
    fn name(&self) -> &'static str {
        "reorder"
    }

    fn stage(&self) -> Stage {
        Stage::DelayLine
    }

    /// A gap of at least 1, and a delay to skip.
    fn check(&self, on: On<'_>) -> Result<(), ParamError> {
        if self.gap == 0 {
            return Err("reorder gap must be at least 1".into());
        }
        if matches!(on, On::Link(l) if l.delay() == 0) {
            return Err(
                "reorder needs a delay: reordered packets skip the delay to overtake \
                 the others, so without one nothing can change (add `delay T`)"
                    .into(),
            );
        }
        Ok(())
    }

    fn display(&self) -> String {
        let r = self;
        let mut s = format!("reorder {}", correlated::display(r.p));
        if r.gap > 1 {
            s.push_str(&format!(" gap {}", r.gap));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Probability;

    #[test]
    fn gap_five_at_certainty_is_every_fifth() {
        let r = Reorder {
            p: Correlated::new(Probability::ONE, Probability::ZERO),
            gap: 5,
        };
        let mut s = ReorderState::default();
        let mut rng = Rng::new(1);
        let skipped: Vec<usize> = (1..=20).filter(|_| s.skip_delay(&r, &mut rng)).collect();
        assert_eq!(skipped, vec![5, 10, 15, 20]);
    }

    #[test]
    fn gap_one_is_a_plain_rate() {
        let r = Reorder {
            p: Correlated::new(Probability::new(0.25).unwrap(), Probability::ZERO),
            gap: 1,
        };
        let mut s = ReorderState::default();
        let mut rng = Rng::new(2);
        let n = (0..100_000).filter(|_| s.skip_delay(&r, &mut rng)).count();
        // sd ≈ 137; 5 sd.
        assert!((24_315..25_685).contains(&n), "{n}");
    }
}
