//! `delay T jitter J [correlation C] [distribution D] [unordered]`.
//!
//! Each packet's time on the delay line is `T` plus a draw from the
//! distribution scaled to `J` (uniform on ±J by default; `normal`, `pareto`,
//! `paretonormal` or a `.dist` table with `J` as the standard deviation),
//! never below zero. Jitter acts on the delay line, after the link, so it
//! does not occupy the link the way a `profile` does.
//!
//! By default a pipe keeps its packets in order: a packet never leaves
//! before one that entered the pipe earlier, so a short draw after a long
//! one waits for it (netem users complain of the reordering netem's jitter
//! causes). The distribution of delays is then the configured one only
//! while packets are spaced wider than the jitter's spread. `unordered`
//! lets each packet keep its own draw and overtake, as netem does.

use super::correlated::{self, CorrState};
use super::dist::{self, Distribution};
use super::{Impairment, On, Stage};
use crate::params::ParamError;
use crate::rng::{Probability, Rng};
use crate::time::{Nanos, NS_PER_MS};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jitter {
    pub amount: Nanos,
    pub correlation: Probability,
    pub distribution: Distribution,
    pub unordered: bool,
}

/// Per-instance state.
#[derive(Debug, Clone, Copy, Default)]
pub struct JitterState {
    corr: CorrState,
}

impl JitterState {
    /// A packet's time on the delay line, `delay` plus a draw.
    #[inline]
    pub fn delay(&mut self, delay: Nanos, j: &Jitter, rng: &mut Rng) -> Nanos {
        let rnd = self.corr.next(j.correlation, rng);
        let mu = i64::try_from(delay).unwrap_or(i64::MAX);
        let sigma = i64::try_from(j.amount).unwrap_or(i64::MAX);
        dist::sample(mu, sigma, rnd, &j.distribution).max(0) as Nanos
    }
}

impl Impairment for Jitter {
    fn name(&self) -> &'static str {
        "jitter"
    }

    fn stage(&self) -> Stage {
        Stage::DelayLine
    }

    /// No more than a delay may be (an hour).
    fn check(&self, _on: On<'_>) -> Result<(), ParamError> {
        if self.amount > crate::units::MAX_DELAY {
            return Err(format!(
                "jitter {} ms is above the limit of {} ms (one hour)",
                self.amount / NS_PER_MS,
                crate::units::MAX_DELAY / NS_PER_MS
            )
            .into());
        }
        Ok(())
    }

    fn display(&self) -> String {
        let j = self;
        let mut s = format!("jitter {}", crate::units::fmt_time(j.amount));
        if !j.correlation.is_zero() {
            s.push_str(&format!(
                " correlation {}",
                correlated::fmt_percent(j.correlation)
            ));
        }
        if j.distribution != Distribution::Uniform {
            s.push_str(&format!(" distribution {}", j.distribution.name()));
        }
        if j.unordered {
            s.push_str(" unordered");
        }
        s
    }
}
