//! `loss P [correlation C]`, `loss gemodel ...`, `loss state ...`: netem's
//! loss models, applied at the pipe's entry like `plr`.
//!
//! - `loss P [correlation C]` (netem's `loss random`): each packet is lost
//!   with probability `P`. With a correlation, draws follow netem's
//!   definition ([`correlated`]), which makes losses clump but also moves
//!   the loss rate away from `P`.
//! - `loss gemodel P [R [1-H [1-K]]]`: the Gilbert–Elliott model. The link
//!   is good or bad; a packet is lost with probability `1-K` if it finds the
//!   link good and `1-H` if bad, then the link turns bad with probability
//!   `P` (from good) or good with `R` (from bad). With `1-H` = 100% and
//!   `1-K` = 0 (Gilbert's simple model) every packet sent in the bad state
//!   is lost and no other: the loss rate is `P / (P + R)` and a burst of
//!   losses lasts `1 / R` packets on average.
//! - `loss state P13 [P31 [P32 [P23 [P14]]]]`: the 4-state Markov model
//!   (Salsano et al.'s "GI" model, netem's `loss_4state`). The states are
//!   1, received in a gap between bursts; 2, received within a burst; 3,
//!   lost within a burst; 4, an isolated loss in a gap. `Pij` is the
//!   probability of moving from `i` to `j` at a packet, and the rest of a
//!   state's probability is staying (from 4 the chain always goes back to
//!   1). Each packet moves the chain one step and is lost if the step ends
//!   in 3 or 4. The chain starts in 1.
//!
//! tc fills in what the command leaves out: `R` = 1 − `P`, `1-H` = 100%,
//! `1-K` = 0; `P31` = 1 − `P13`, `P32` = 0, `P23` = 100%, `P14` = 0
//! ([`defaults_gemodel`], [`defaults_state`]). Both sets of defaults make
//! the next state independent of the current one, so `loss gemodel P` and
//! `loss state P` alone lose a share `P` of packets independently, like
//! `loss P`: the models only differ from it once the other values are given.

use super::correlated::{self, CorrState, Correlated};
use super::{Impairment, On, Stage};
use crate::params::ParamError;
use crate::rng::{Probability, Rng};

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

/// Where a loss chain is. The names are the 4-state model's; Gilbert–Elliott
/// uses two of them for its good and bad states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Phase {
    /// State 1; Gilbert–Elliott's good state.
    #[default]
    GapReceived,
    /// State 2.
    BurstReceived,
    /// State 3; Gilbert–Elliott's bad state.
    BurstLost,
    /// State 4.
    GapLost,
}

impl Phase {
    /// Within a burst: Gilbert–Elliott's bad state. Reading states 2 and 4
    /// this way too (burst, gap) gives a meaning to a state left by a
    /// 4-state model when the pipe is changed to Gilbert–Elliott.
    fn in_burst(self) -> bool {
        matches!(self, Phase::BurstReceived | Phase::BurstLost)
    }
}

/// Per-queue state: the correlated draw of `loss P correlation C`, and where
/// the chain of `gemodel` or `state` is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossState {
    corr: CorrState,
    phase: Phase,
}

impl LossState {
    /// Whether the next packet is lost under `m`.
    #[inline]
    pub fn lost(&mut self, m: &LossModel, rng: &mut Rng) -> bool {
        match *m {
            LossModel::Random(c) => self.corr.chance(c, rng),
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                // The packet's fate depends on the state it finds; the move
                // it triggers acts from the next packet on. Two independent
                // draws, as netem's `loss_gilb_ell` takes, so that the
                // move and the loss do not depend on each other.
                let bad = self.phase.in_burst();
                let moves = rng.chance(if bad { r } else { p });
                let lost = rng.chance(if bad { loss_bad } else { loss_good });
                self.phase = if bad != moves {
                    Phase::BurstLost
                } else {
                    Phase::GapReceived
                };
                lost
            }
            LossModel::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                // One draw picks the move out of the current state, in the
                // order netem's `loss_4state` tests them. `weight` counts 1
                // as 2^32 so that a certain move is certain for every draw.
                let u = u64::from(rng.next_u32());
                let w = weight;
                self.phase = match self.phase {
                    Phase::GapReceived if u < w(p14) => Phase::GapLost,
                    Phase::GapReceived if u < w(p14) + w(p13) => Phase::BurstLost,
                    Phase::GapReceived => Phase::GapReceived,
                    Phase::BurstReceived if u < w(p23) => Phase::BurstLost,
                    Phase::BurstReceived => Phase::BurstReceived,
                    Phase::BurstLost if u < w(p32) => Phase::BurstReceived,
                    Phase::BurstLost if u < w(p32) + w(p31) => Phase::GapReceived,
                    Phase::BurstLost => Phase::BurstLost,
                    Phase::GapLost => Phase::GapReceived,
                };
                matches!(self.phase, Phase::BurstLost | Phase::GapLost)
            }
        }
    }
}

/// A probability as a share of 2^32 draws, 1 counted as all of them.
fn weight(p: Probability) -> u64 {
    if p == Probability::ONE {
        1 << 32
    } else {
        u64::from(p.threshold())
    }
}

/// `1 − p`. Exact: a probability is a multiple of 2^−32, which an `f64`
/// holds, and so is its complement.
fn complement(p: Probability) -> Probability {
    Probability::new(1.0 - p.as_f64()).unwrap_or(Probability::ZERO)
}

/// `loss gemodel P [R [1-H [1-K]]]` with tc's values for what is left out:
/// `R` = 1 − `P`, `1-H` = 100%, `1-K` = 0.
pub fn defaults_gemodel(
    p: Probability,
    r: Option<Probability>,
    one_minus_h: Option<Probability>,
    one_minus_k: Option<Probability>,
) -> LossModel {
    LossModel::GilbertElliott {
        p,
        r: r.unwrap_or_else(|| complement(p)),
        loss_bad: one_minus_h.unwrap_or(Probability::ONE),
        loss_good: one_minus_k.unwrap_or(Probability::ZERO),
    }
}

/// `loss state P13 [P31 [P32 [P23 [P14]]]]` with tc's values for what is
/// left out: `P31` = 1 − `P13`, `P32` = 0, `P23` = 100%, `P14` = 0.
pub fn defaults_state(
    p13: Probability,
    p31: Option<Probability>,
    p32: Option<Probability>,
    p23: Option<Probability>,
    p14: Option<Probability>,
) -> LossModel {
    LossModel::FourState {
        p13,
        p31: p31.unwrap_or_else(|| complement(p13)),
        p32: p32.unwrap_or(Probability::ZERO),
        p23: p23.unwrap_or(Probability::ONE),
        p14: p14.unwrap_or(Probability::ZERO),
    }
}

fn check_row(
    (a, pa): (&str, Probability),
    (b, pb): (&str, Probability),
    state: &str,
) -> Result<(), ParamError> {
    if weight(pa) + weight(pb) > 1 << 32 {
        return Err(format!(
            "loss state: {a} {} and {b} {} add up to more than 100%; they are the \
             chances of leaving {state}, so together they may be at most 100%",
            correlated::fmt_percent(pa),
            correlated::fmt_percent(pb),
        )
        .into());
    }
    Ok(())
}

impl Impairment for LossModel {
    fn name(&self) -> &'static str {
        "loss"
    }

    fn stage(&self) -> Stage {
        Stage::Entry
    }

    /// Refuses a 4-state model whose moves out of a state add up to more than
    /// 100% (state 1: `P13 + P14`; state 3: `P31 + P32`). Everything else is a
    /// well-defined chain and is accepted, including ones that end in a state
    /// they never leave (Gilbert–Elliott with `R` = 0, 4-state with `P31` and
    /// `P32` = 0): a link that fails for good is a thing one may want to test.
    fn check(&self, _on: On<'_>) -> Result<(), ParamError> {
        let m = self;
        if let LossModel::FourState {
            p13, p31, p32, p14, ..
        } = *m
        {
            check_row(("p13", p13), ("p14", p14), "state 1 (received, in a gap)")?;
            check_row(("p31", p31), ("p32", p32), "state 3 (lost, in a burst)")?;
        }
        Ok(())
    }

    /// The model's words on the pipe's `show` line, every value spelled out.
    fn display(&self) -> String {
        let m = self;
        let pc = correlated::fmt_percent;
        match *m {
            LossModel::Random(c) => format!("loss {}", correlated::display(c)),
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => format!(
                "loss gemodel p {} r {} 1-h {} 1-k {}",
                pc(p),
                pc(r),
                pc(loss_bad),
                pc(loss_good)
            ),
            LossModel::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => format!(
                "loss state p13 {} p31 {} p32 {} p23 {} p14 {}",
                pc(p13),
                pc(p31),
                pc(p32),
                pc(p23),
                pc(p14)
            ),
        }
    }
}

/// What a loss model does in the long run, from a start in its first
/// state (good, or 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stationary {
    Random {
        loss_rate: f64,
    },
    GilbertElliott {
        /// Shares of packets sent in the good and the bad state.
        good: f64,
        bad: f64,
        loss_rate: f64,
        /// Mean packets per stay in the bad state, `1 / R` (infinite for
        /// `R` = 0): the mean burst of losses when `1-H` = 100%, `1-K` = 0.
        bad_run: f64,
    },
    FourState {
        /// Shares of packets after which the chain is in states 1 to 4.
        states: [f64; 4],
        /// `states[2] + states[3]`.
        loss_rate: f64,
    },
}

impl Stationary {
    pub fn loss_rate(&self) -> f64 {
        match *self {
            Stationary::Random { loss_rate }
            | Stationary::GilbertElliott { loss_rate, .. }
            | Stationary::FourState { loss_rate, .. } => loss_rate,
        }
    }
}

/// The long-run shares of a model's states and of lost packets, from the
/// chain's balance equations. `None` for `loss P correlation C` with C > 0,
/// whose rate has no simple closed form (see [`correlated`]).
pub fn stationary(m: &LossModel) -> Option<Stationary> {
    match *m {
        LossModel::Random(c) => c.correlation.is_zero().then(|| Stationary::Random {
            loss_rate: c.p.as_f64(),
        }),
        LossModel::GilbertElliott {
            p,
            r,
            loss_bad,
            loss_good,
        } => {
            let (p, r) = (p.as_f64(), r.as_f64());
            // In balance the flows good → bad and bad → good are equal,
            // good·p = bad·r. With p = 0 the chain never leaves good; with
            // r = 0 (and p > 0) it ends in bad and stays.
            let bad = if p == 0.0 {
                0.0
            } else if r == 0.0 {
                1.0
            } else {
                p / (p + r)
            };
            let good = 1.0 - bad;
            Some(Stationary::GilbertElliott {
                good,
                bad,
                loss_rate: good * loss_good.as_f64() + bad * loss_bad.as_f64(),
                bad_run: 1.0 / r,
            })
        }
        LossModel::FourState {
            p13,
            p31,
            p32,
            p23,
            p14,
        } => {
            let [p13, p31, p32, p23, p14] = [p13, p31, p32, p23, p14].map(Probability::as_f64);
            // Balance of each state (inflow = outflow), with π1 = 1 before
            // normalizing: π4 = p14·π1 (4 always returns to 1);
            // p31·π3 = p13·π1 and p23·π2 = p32·π3 (the flows between the
            // gap states {1, 4} and the burst states {2, 3}, and between 2
            // and 3). The exceptions are the chains that end somewhere
            // else than the class of state 1.
            let w = if p13 == 0.0 {
                // No burst ever starts.
                [1.0, 0.0, 0.0, p14]
            } else if p31 == 0.0 {
                // A burst, once started, never ends: the chain ends in
                // {2, 3}, where p23·π2 = p32·π3.
                match (p32 == 0.0, p23 == 0.0) {
                    (true, _) => [0.0, 0.0, 1.0, 0.0],
                    (false, true) => [0.0, 1.0, 0.0, 0.0],
                    (false, false) => [0.0, p32, p23, 0.0],
                }
            } else if p32 > 0.0 && p23 == 0.0 {
                // State 2 is reached and never left.
                [0.0, 1.0, 0.0, 0.0]
            } else {
                let pi3 = p13 / p31;
                let pi2 = if p32 == 0.0 { 0.0 } else { p32 * pi3 / p23 };
                [1.0, pi2, pi3, p14]
            };
            let total: f64 = w.iter().sum();
            let states = w.map(|x| x / total);
            Some(Stationary::FourState {
                states,
                loss_rate: states[2] + states[3],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's own checks (it needs nothing of its queue).
    fn checked(m: &LossModel) -> Result<(), ParamError> {
        m.check(On::Queue)
    }

    fn p(x: f64) -> Probability {
        Probability::new(x).unwrap()
    }

    fn run(m: &LossModel, seed: u64, n: usize) -> Vec<bool> {
        let mut s = LossState::default();
        let mut rng = Rng::new(seed);
        (0..n).map(|_| s.lost(m, &mut rng)).collect()
    }

    fn rate(losses: &[bool]) -> f64 {
        losses.iter().filter(|&&l| l).count() as f64 / losses.len() as f64
    }

    /// Lengths of the runs of consecutive losses that a delivered packet
    /// ended (a run cut by the end of the sample is left out).
    fn bursts(losses: &[bool]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut len = 0;
        for &l in losses {
            if l {
                len += 1;
            } else if len > 0 {
                out.push(len);
                len = 0;
            }
        }
        out
    }

    fn ge(p_: f64, r: f64, loss_bad: f64, loss_good: f64) -> LossModel {
        LossModel::GilbertElliott {
            p: p(p_),
            r: p(r),
            loss_bad: p(loss_bad),
            loss_good: p(loss_good),
        }
    }

    fn four(p13: f64, p31: f64, p32: f64, p23: f64, p14: f64) -> LossModel {
        LossModel::FourState {
            p13: p(p13),
            p31: p(p31),
            p32: p(p32),
            p23: p(p23),
            p14: p(p14),
        }
    }

    /// The 4-state chain's transition matrix, written out from the model's
    /// definition (row: from; column: to; states 1..4 at 0..3).
    fn matrix(m: &LossModel) -> [[f64; 4]; 4] {
        let LossModel::FourState {
            p13,
            p31,
            p32,
            p23,
            p14,
        } = *m
        else {
            panic!("not a 4-state model");
        };
        let [p13, p31, p32, p23, p14] = [p13, p31, p32, p23, p14].map(Probability::as_f64);
        [
            [1.0 - p13 - p14, 0.0, p13, p14],
            [0.0, 1.0 - p23, p23, 0.0],
            [p31, p32, 1.0 - p31 - p32, 0.0],
            [1.0, 0.0, 0.0, 0.0],
        ]
    }

    fn four_states(m: &LossModel) -> [f64; 4] {
        match stationary(m) {
            Some(Stationary::FourState { states, .. }) => states,
            other => panic!("{other:?}"),
        }
    }

    /// The variance of the mean of `f(state)` over n steps of a stationary
    /// chain, times n (for large n): Var_π f + 2 Σ_{k≥1} Cov_π(f(X₀), f(X_k)),
    /// where the covariance at lag k is Σᵢ πᵢ f̄ᵢ (Pᵏ f̄)ᵢ with f̄ = f − π·f.
    /// The chains tested here forget their start within a few hundred
    /// steps, so 20,000 lags leave nothing out.
    fn asymptotic_variance(pm: &[[f64; 4]; 4], pi: &[f64; 4], f: [f64; 4]) -> f64 {
        let mean: f64 = (0..4).map(|i| pi[i] * f[i]).sum();
        let centred = f.map(|x| x - mean);
        let cov = |h: &[f64; 4]| (0..4).map(|i| pi[i] * centred[i] * h[i]).sum::<f64>();
        let mut h = centred;
        let mut total = cov(&h);
        for _ in 0..20_000 {
            h = std::array::from_fn(|i| (0..4).map(|j| pm[i][j] * h[j]).sum());
            total += 2.0 * cov(&h);
        }
        total
    }

    #[test]
    fn state_is_small_and_starts_good() {
        assert!(std::mem::size_of::<LossState>() <= 8);
        assert_eq!(LossState::default().phase, Phase::GapReceived);
    }

    #[test]
    fn random_loss_hits_its_rate() {
        let m = LossModel::Random(Correlated::new(p(0.05), Probability::ZERO));
        let n = 200_000;
        let got = rate(&run(&m, 1, n));
        // Binomial: sd √(0.05·0.95/n) ≈ 0.00049; 5 sd.
        let sd = (0.05f64 * 0.95 / n as f64).sqrt();
        assert!((got - 0.05).abs() < 5.0 * sd, "{got}");
        // Closed forms below are compared with a relative 1e-8: a probability
        // is held to the nearest 2^-32, an error of at most 1.2e-10.
        let want = stationary(&m).map(|s| s.loss_rate()).unwrap_or(f64::NAN);
        assert!((want / 0.05 - 1.0).abs() < 1e-8, "{want}");
        let correlated = LossModel::Random(Correlated::new(p(0.05), p(0.25)));
        assert_eq!(stationary(&correlated), None);
    }

    #[test]
    fn gilbert_elliott_decides_from_the_state_found_then_moves() {
        // p = r = 100%: the link alternates good, bad, good... starting good,
        // so the first packet goes and every second one is lost.
        let m = defaults_gemodel(Probability::ONE, Some(Probability::ONE), None, None);
        let got = run(&m, 2, 6);
        assert_eq!(got, vec![false, true, false, true, false, true]);
        // p = 0: never bad, so only the good state's 1-k loses.
        assert!(!run(&ge(0.0, 0.5, 1.0, 0.0), 2, 10_000).contains(&true));
        assert!(!run(&ge(0.0, 0.5, 1.0, 1.0), 2, 100).contains(&false));
    }

    #[test]
    fn gilbert_rate_and_bursts_match_the_closed_forms() {
        let (pp, r) = (0.01, 0.10);
        let m = ge(pp, r, 1.0, 0.0);
        let n = 4_000_000;
        let losses = run(&m, 3, n);
        let pi = pp / (pp + r);
        let Some(Stationary::GilbertElliott {
            bad,
            loss_rate,
            bad_run,
            ..
        }) = stationary(&m)
        else {
            panic!("no closed form");
        };
        assert!((bad / pi - 1.0).abs() < 1e-8 && (loss_rate / pi - 1.0).abs() < 1e-8);
        assert!((bad_run * r - 1.0).abs() < 1e-8);
        // A loss is a packet sent in the bad state. For a two-state chain the
        // mean of the bad-state indicator over n packets has variance
        // π(1−π)(1+λ)/(1−λ)/n, λ = 1 − p − r = 0.89 the chain's second
        // eigenvalue: sd ≈ 0.0012 (1.3% of π) at n = 4e6; 5 sd.
        let lambda = 1.0 - pp - r;
        let sd = (pi * (1.0 - pi) * (1.0 + lambda) / (1.0 - lambda) / n as f64).sqrt();
        let got = rate(&losses);
        assert!((got - pi).abs() < 5.0 * sd, "{got} vs {pi}");
        // Bursts are independent and geometric with mean 1/r and sd
        // √(1−r)/r ≈ 9.5; over about n·π·r ≈ 36,000 bursts the mean has sd
        // ≈ 0.05 (0.5% of 10); 5 sd.
        let b = bursts(&losses);
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        let sd = (1.0 - r).sqrt() / r / (b.len() as f64).sqrt();
        assert!(b.len() > 30_000, "{}", b.len());
        assert!((mean - 1.0 / r).abs() < 5.0 * sd, "{mean}");
    }

    #[test]
    fn gilbert_elliott_loses_in_both_states() {
        let (pp, r, lb, lg) = (0.01, 0.10, 0.5, 0.01);
        let m = ge(pp, r, lb, lg);
        let n = 4_000_000;
        let pi = pp / (pp + r);
        let want = pi * lb + (1.0 - pi) * lg;
        assert!((stationary(&m).unwrap().loss_rate() / want - 1.0).abs() < 1e-8);
        // Given the states, each loss is a separate draw: the variance of
        // the loss rate is that of the state-dependent probability ℓ
        // (Var_π ℓ (1+λ)/(1−λ), as for the indicator above) plus the draws'
        // own, E_π[ℓ(1−ℓ)]; sd ≈ 0.0003 at n = 4e6; 5 sd.
        let lambda = 1.0 - pp - r;
        let var_l = pi * (1.0 - pi) * (lb - lg).powi(2);
        let own = pi * lb * (1.0 - lb) + (1.0 - pi) * lg * (1.0 - lg);
        let sd = ((var_l * (1.0 + lambda) / (1.0 - lambda) + own) / n as f64).sqrt();
        let got = rate(&run(&m, 4, n));
        assert!((got - want).abs() < 5.0 * sd, "{got} vs {want}");
    }

    #[test]
    fn four_state_moves_as_defined() {
        // 1 → 3 (lost) → 1 → 3 ...
        assert_eq!(
            run(&four(1.0, 1.0, 0.0, 0.0, 0.0), 5, 4),
            vec![true, false, true, false]
        );
        // 1 → 4 (lost) → 1 → 4 ...
        assert_eq!(
            run(&four(0.0, 1.0, 0.0, 0.0, 1.0), 5, 4),
            vec![true, false, true, false]
        );
        // 1 → 3 (lost) → 2, then 2 keeps receiving.
        assert_eq!(
            run(&four(1.0, 0.0, 1.0, 0.0, 0.0), 5, 5),
            vec![true, false, false, false, false]
        );
        // 1 → 3 → 2 → 3 → 2 ...
        assert_eq!(
            run(&four(1.0, 0.0, 1.0, 1.0, 0.0), 5, 4),
            vec![true, false, true, false]
        );
        // p13 + p14 = 100% exactly: never stays in 1.
        assert!(run(&four(0.5, 1.0, 0.0, 0.0, 0.5), 5, 1000)
            .chunks(2)
            .all(|c| c == [true, false]));
    }

    #[test]
    fn four_state_occupancy_matches_the_stationary_distribution() {
        let m = four(0.02, 0.30, 0.20, 0.40, 0.01);
        checked(&m).unwrap();
        let pm = matrix(&m);
        let pi = four_states(&m);
        // The closed form is a fixed point of the matrix written from the
        // definition: πP = π.
        assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for j in 0..4 {
            let flow: f64 = (0..4).map(|i| pi[i] * pm[i][j]).sum();
            assert!((flow - pi[j]).abs() < 1e-12, "state {}: {pi:?}", j + 1);
        }

        let n = 2_000_000;
        let mut s = LossState::default();
        let mut rng = Rng::new(6);
        let mut counts = [0usize; 4];
        let mut lost = 0usize;
        for _ in 0..n {
            let l = s.lost(&m, &mut rng);
            let i = s.phase as usize;
            // A packet is lost exactly when its move ends in 3 or 4.
            assert_eq!(l, i >= 2);
            counts[i] += 1;
            lost += usize::from(l);
        }
        // Each share within 5 sd, the sd from the chain's own correlations
        // (`asymptotic_variance`); the chain starts in 1 rather than in
        // balance, a bias of order 1/n.
        for i in 0..4 {
            let f = std::array::from_fn(|j| f64::from(u8::from(i == j)));
            let sd = (asymptotic_variance(&pm, &pi, f) / n as f64).sqrt();
            let got = counts[i] as f64 / n as f64;
            assert!(
                (got - pi[i]).abs() < 5.0 * sd,
                "state {}: {got} vs {}",
                i + 1,
                pi[i]
            );
        }
        let want = stationary(&m).unwrap().loss_rate();
        assert!((want - (pi[2] + pi[3])).abs() < 1e-15);
        let sd = (asymptotic_variance(&pm, &pi, [0.0, 0.0, 1.0, 1.0]) / n as f64).sqrt();
        let got = lost as f64 / n as f64;
        assert!((got - want).abs() < 5.0 * sd, "{got} vs {want}");
    }

    #[test]
    fn four_state_stationary_handles_chains_that_end_elsewhere() {
        // Each closed form, including the special cases, is a fixed point.
        for m in [
            four(0.0, 0.5, 0.5, 0.5, 0.2),
            four(0.1, 0.0, 0.0, 0.5, 0.0),
            four(0.1, 0.0, 0.3, 0.0, 0.0),
            four(0.1, 0.0, 0.3, 0.6, 0.1),
            four(0.1, 0.2, 0.3, 0.0, 0.1),
            four(0.1, 0.2, 0.0, 0.0, 0.1),
            four(0.0, 0.0, 0.0, 0.0, 1.0),
        ] {
            let pm = matrix(&m);
            let pi = four_states(&m);
            assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{m:?}");
            for j in 0..4 {
                let flow: f64 = (0..4).map(|i| pi[i] * pm[i][j]).sum();
                assert!((flow - pi[j]).abs() < 1e-12, "{m:?}: {pi:?}");
            }
        }
        // And it is the one reached from state 1: a burst that never ends
        // after p13 starts it loses everything in the long run.
        assert_eq!(
            four_states(&four(0.1, 0.0, 0.0, 0.5, 0.0)),
            [0.0, 0.0, 1.0, 0.0]
        );
        let tail = run(&four(0.1, 0.0, 0.0, 0.5, 0.0), 7, 1000);
        assert!(tail[500..].iter().all(|&l| l));
    }

    #[test]
    fn defaults_are_tcs() {
        assert_eq!(
            defaults_gemodel(p(0.01), None, None, None),
            LossModel::GilbertElliott {
                p: p(0.01),
                r: p(0.99),
                loss_bad: Probability::ONE,
                loss_good: Probability::ZERO,
            }
        );
        assert_eq!(
            defaults_gemodel(p(0.01), Some(p(0.3)), Some(p(0.8)), Some(p(0.001))),
            ge(0.01, 0.3, 0.8, 0.001)
        );
        assert_eq!(
            defaults_state(p(0.01), None, None, None, None),
            LossModel::FourState {
                p13: p(0.01),
                p31: p(0.99),
                p32: Probability::ZERO,
                p23: Probability::ONE,
                p14: Probability::ZERO,
            }
        );
        assert_eq!(
            defaults_state(
                p(0.01),
                Some(p(0.2)),
                Some(p(0.3)),
                Some(p(0.4)),
                Some(p(0.05))
            ),
            four(0.01, 0.2, 0.3, 0.4, 0.05)
        );
        // The complement is exact at the ends.
        assert_eq!(
            defaults_state(Probability::ONE, None, None, None, None),
            four(1.0, 0.0, 0.0, 1.0, 0.0)
        );
        assert_eq!(
            defaults_gemodel(Probability::ZERO, None, None, None),
            ge(0.0, 1.0, 1.0, 0.0)
        );
    }

    #[test]
    fn defaults_lose_independently_at_the_given_rate() {
        // With tc's defaults the next state does not depend on the current
        // one, so losses are independent with probability P: the loss rate,
        // and the loss rate right after a loss, are both P. Binomial sds:
        // √(0.1·0.9/n) ≈ 0.0003 for the rate, √(0.1·0.9/(0.1·n)) ≈ 0.00095
        // after a loss; 5 sd.
        let n = 1_000_000;
        for m in [
            defaults_gemodel(p(0.1), None, None, None),
            defaults_state(p(0.1), None, None, None, None),
        ] {
            assert!((stationary(&m).unwrap().loss_rate() / 0.1 - 1.0).abs() < 1e-8);
            let l = run(&m, 8, n);
            let got = rate(&l);
            assert!(
                (got - 0.1).abs() < 5.0 * (0.09 / n as f64).sqrt(),
                "{m:?}: {got}"
            );
            let after: Vec<bool> = l.windows(2).filter(|w| w[0]).map(|w| w[1]).collect();
            let got = rate(&after);
            let sd = (0.09 / after.len() as f64).sqrt();
            assert!((got - 0.1).abs() < 5.0 * sd, "{m:?}: {got} after a loss");
        }
    }

    #[test]
    fn validate_refuses_rows_above_one() {
        let err = checked(&four(0.8, 0.1, 0.1, 1.0, 0.3))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p13 80%") && err.contains("p14 30%") && err.contains("state 1"),
            "{err}"
        );
        let err = checked(&four(0.1, 0.6, 0.5, 1.0, 0.0))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p31 60%") && err.contains("p32 50%") && err.contains("at most 100%"),
            "{err}"
        );
        // Exactly 100% is a row that never stays.
        assert!(checked(&four(0.5, 0.25, 0.75, 1.0, 0.5)).is_ok());
        assert!(checked(&four(1.0, 1.0, 0.0, 1.0, 0.0)).is_ok());
        // Gilbert–Elliott rows always add up: p = 0, 1-k = 0 is no loss.
        assert!(checked(&ge(0.0, 0.0, 1.0, 0.0)).is_ok());
        assert!(checked(&ge(1.0, 1.0, 1.0, 1.0)).is_ok());
        assert!(checked(&LossModel::Random(Correlated::new(p(0.5), p(0.5)))).is_ok());
    }

    #[test]
    fn display_spells_out_every_value() {
        let random = |x, c| LossModel::Random(Correlated::new(p(x), p(c)));
        assert_eq!(random(0.01, 0.0).display(), "loss 1%");
        assert_eq!(random(0.01, 0.25).display(), "loss 1% correlation 25%");
        assert_eq!(
            defaults_gemodel(p(0.01), Some(p(0.3)), None, None).display(),
            "loss gemodel p 1% r 30% 1-h 100% 1-k 0%"
        );
        assert_eq!(
            defaults_state(p(0.01), None, None, None, None).display(),
            "loss state p13 1% p31 99% p32 0% p23 100% p14 0%"
        );
    }

    #[test]
    fn same_seed_same_losses() {
        for m in [
            LossModel::Random(Correlated::new(p(0.3), p(0.5))),
            ge(0.05, 0.2, 0.9, 0.01),
            four(0.05, 0.3, 0.2, 0.4, 0.02),
        ] {
            let a = run(&m, 9, 10_000);
            assert_eq!(a, run(&m, 9, 10_000), "{m:?}");
            assert_ne!(a, run(&m, 10, 10_000), "{m:?}");
        }
    }
}
