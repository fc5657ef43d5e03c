//! netem's correlated random numbers: `P [correlation C]`.
//!
//! netem draws each impairment decision from a uniform 32-bit number that
//! "leans on" the previous one (`get_crandom` in `sch_netem.c`): with
//! correlation ρ (a 32-bit fraction), the next value is
//! `(u × (2³² − ρ') + last × ρ') >> 32` where `u` is fresh and `ρ' = ρ + 1`.
//! ρ = 0 gives independent draws; ρ = 100% repeats the first draw forever.
//!
//! This is netem's definition, kept so that `loss 10% 25%` means here what
//! it means there. It is known not to be a true correlation model: a mix of
//! two uniforms is not uniform, so with ρ > 0 the share of draws below a
//! threshold `P` drifts towards 50% (a 10% loss with 50% correlation loses
//! about 11%). For bursty loss with exact rates, use `loss gemodel` or
//! `loss state`.

use crate::rng::{Probability, Rng};

/// `P [correlation C]`: a probability and the correlation of its draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Correlated {
    pub p: Probability,
    pub correlation: Probability,
}

impl Correlated {
    pub const fn new(p: Probability, correlation: Probability) -> Self {
        Correlated { p, correlation }
    }
}

/// The previous draw (netem's `struct crndstate`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CorrState {
    last: u32,
}

impl CorrState {
    /// The next correlated uniform 32-bit number.
    #[inline]
    pub fn next(&mut self, rho: Probability, rng: &mut Rng) -> u32 {
        let value = rng.next_u32();
        if rho.is_zero() {
            return value;
        }
        let rho = u64::from(rho.threshold()) + 1;
        let answer = (u64::from(value) * ((1u64 << 32) - rho) + u64::from(self.last) * rho) >> 32;
        self.last = answer as u32;
        self.last
    }

    /// True with probability `c.p`, drawn with correlation `c.correlation`.
    /// A probability of 0 draws nothing, so an unset option costs no draw.
    #[inline]
    pub fn chance(&mut self, c: Correlated, rng: &mut Rng) -> bool {
        if c.p.is_zero() {
            return false;
        }
        if c.p == Probability::ONE {
            return true;
        }
        self.next(c.correlation, rng) < c.p.threshold()
    }
}

/// `25%`, `0.5%`: a probability as netem prints it.
pub fn fmt_percent(p: Probability) -> String {
    let pct = p.as_f64() * 100.0;
    let s = format!("{pct:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// `P` or `P correlation C`, for `show`.
pub fn display(c: Correlated) -> String {
    if c.correlation.is_zero() {
        fmt_percent(c.p)
    } else {
        format!(
            "{} correlation {}",
            fmt_percent(c.p),
            fmt_percent(c.correlation)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(x: f64) -> Probability {
        Probability::new(x).unwrap()
    }

    #[test]
    fn uncorrelated_draws_hit_the_rate() {
        let mut rng = Rng::new(1);
        let mut s = CorrState::default();
        let c = Correlated::new(p(0.1), Probability::ZERO);
        let hits = (0..100_000).filter(|_| s.chance(c, &mut rng)).count();
        // sd = sqrt(1e5 × 0.1 × 0.9) ≈ 95; 5 sd.
        assert!((9_525..10_475).contains(&hits), "{hits}");
    }

    #[test]
    fn full_correlation_repeats_the_last_value() {
        let mut rng = Rng::new(2);
        let mut s = CorrState { last: 12345 };
        for _ in 0..100 {
            assert_eq!(s.next(Probability::ONE, &mut rng), 12345);
        }
    }

    #[test]
    fn correlation_makes_runs_longer() {
        // Mean run length of "below 50%" outcomes grows with correlation.
        fn mean_run(rho: f64) -> f64 {
            let mut rng = Rng::new(3);
            let mut s = CorrState::default();
            let c = Correlated::new(p(0.5), p(rho));
            let (mut runs, mut prev) = (0u32, None);
            for _ in 0..100_000 {
                let v = s.chance(c, &mut rng);
                if prev != Some(v) {
                    runs += 1;
                }
                prev = Some(v);
            }
            100_000.0 / f64::from(runs)
        }
        let (none, some) = (mean_run(0.0), mean_run(0.75));
        assert!((1.9..2.1).contains(&none), "{none}");
        assert!(some > 2.0 * none, "{some} vs {none}");
    }

    #[test]
    fn percent_formatting() {
        assert_eq!(fmt_percent(p(0.25)), "25%");
        assert_eq!(fmt_percent(p(0.001)), "0.1%");
        assert_eq!(fmt_percent(Probability::ONE), "100%");
        assert_eq!(
            display(Correlated::new(p(0.01), p(0.25))),
            "1% correlation 25%"
        );
    }
}
