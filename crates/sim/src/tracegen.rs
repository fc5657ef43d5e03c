//! `dummynet gen-trace`: synthetic mahimahi traces, for `trace FILE` pipes.
//!
//! A trace lists delivery opportunities of 1504 bytes, one whole millisecond
//! per line (see `dummynet_engine::impair::trace`). Every model here first
//! decides the link's rate for each millisecond, then one placer turns rates
//! into lines:
//!
//! - the placer keeps a credit in units of bit/s·ms: each millisecond `m`
//!   (`1..=duration`) adds that millisecond's rate, and every full
//!   `1504 × 8 × 1000` of credit is one line `m`. The long-run rate is then
//!   exact, leftovers carry to the next millisecond, and a rate of
//!   12.032 Mbit/s is one opportunity per millisecond;
//! - the last line is always `duration`, so a looping trace repeats with the
//!   period asked for: if the last millisecond got no opportunity, it gets
//!   one (at most one opportunity per lap more than the rates allow).
//!
//! Models:
//! - `constant --rate R`: the same rate every millisecond.
//! - `walk` (cellular-like): the rate is `mean × e^y`, where `y` is an
//!   Ornstein–Uhlenbeck process (mean-reverting random walk) in log space:
//!   every `--step-ms` it moves to `c + (y − c)·a + s·√(1 − a²)·Z`, with
//!   `a = e^(−step/τ)` (`τ` = `--revert-s`), stationary spread
//!   `s = σ·√(τ/2)` (`σ` = `--volatility`, in log units per √s) and centre
//!   `c = −s²/2`, so that the unclipped rate averages `--mean`. It starts
//!   from a draw of the stationary law (no warm-up), and the rate is clipped
//!   to `--min`..`--max`. At each step, with probability `--outage-prob`, an
//!   outage of `--outage-ms` starts, during which the rate is 0 (the walk
//!   goes on underneath). Log space because cellular throughput varies by
//!   factors rather than by fixed amounts; mean reversion because a cell's
//!   capacity wanders around what the radio conditions allow rather than
//!   drifting away.
//! - `onoff` (Wi-Fi-like): the link alternates between sending at `--rate`
//!   and silence, as a station that wins the medium and sends an aggregate,
//!   then waits for others. Each millisecond an on period ends with
//!   probability `1/--on-ms` and an off period with `1/--off-ms`, so periods
//!   have geometric lengths with those means, and the mean rate is
//!   `rate × on / (on + off)`.
//!
//! Determinism: draws come from `dummynet_engine::rng::Rng::new(--seed)`
//! (xoshiro256++, fixed by its specification), normal draws are the sum of
//! twelve uniforms minus six (Irwin–Hall: mean 0, variance 1, bounded by
//! ±6), and `e^x` is computed here from + − × ÷ alone, so the same command
//! writes the same bytes on every machine: nothing depends on the platform's
//! `libm`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use dummynet_engine::impair::trace::OPPORTUNITY_BYTES;
use dummynet_engine::rng::{Probability, Rng};

use crate::gen::parse_rate;

/// Credit one opportunity costs: its bits × 1000 ms/s, so that adding a
/// rate in bit/s once per millisecond counts bits × 1000.
const OPPORTUNITY_CREDIT: u64 = OPPORTUNITY_BYTES as u64 * 8 * 1000;
/// One day: the longest trace `gen-trace` writes.
const MAX_DURATION_MS: u64 = 86_400_000;

#[derive(Debug, clap::Args)]
pub struct GenTraceArgs {
    #[command(subcommand)]
    pub model: Model,
}

#[derive(Debug, clap::Subcommand)]
pub enum Model {
    /// The same rate throughout.
    Constant {
        /// The rate: bit/s, Kbit/s, Mbit/s... (12.032Mbit/s is one opportunity per ms).
        #[arg(long, value_parser = parse_rate)]
        rate: u64,
        #[command(flatten)]
        common: Common,
    },
    /// Cellular-like: a mean-reverting random walk of the rate in log space,
    /// clipped to MIN..MAX, with optional outages.
    Walk(WalkArgs),
    /// Wi-Fi-like: bursts at RATE separated by silences.
    Onoff {
        /// The rate while on.
        #[arg(long, value_parser = parse_rate)]
        rate: u64,
        /// Mean length of an on period, ms.
        #[arg(long, default_value_t = 8)]
        on_ms: u32,
        /// Mean length of an off period, ms.
        #[arg(long, default_value_t = 4)]
        off_ms: u32,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, clap::Args)]
pub struct WalkArgs {
    /// The rate the walk reverts to; the unclipped walk averages it.
    #[arg(long, value_parser = parse_rate)]
    pub mean: u64,
    /// The lowest rate outside outages [default: MEAN / 10].
    #[arg(long, value_parser = parse_rate)]
    pub min: Option<u64>,
    /// The highest rate [default: MEAN × 4].
    #[arg(long, value_parser = parse_rate)]
    pub max: Option<u64>,
    /// How often the rate changes, ms.
    #[arg(long, default_value_t = 100)]
    pub step_ms: u32,
    /// σ: how fast the log of the rate moves, per √s.
    #[arg(long, default_value_t = 0.5)]
    pub volatility: f64,
    /// τ: the time constant of the pull back to the mean, s.
    #[arg(long, default_value_t = 5.0)]
    pub revert_s: f64,
    /// The chance, at each step, that an outage starts.
    #[arg(long, default_value_t = 0.0)]
    pub outage_prob: f64,
    /// How long an outage lasts, ms.
    #[arg(long, default_value_t = 1000)]
    pub outage_ms: u32,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct Common {
    /// The trace's length (its period when looped), ms.
    #[arg(long, default_value_t = 1000)]
    pub duration_ms: u64,
    /// Seed of the random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The trace file to write [default: standard output].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(args: GenTraceArgs) -> ExitCode {
    match write(&args) {
        Ok(s) => {
            eprintln!(
                "dummynet gen-trace: wrote {} opportunities over {} ms (mean {} bit/s) to {}",
                s.opportunities,
                s.period_ms,
                s.mean_rate(),
                common(&args.model)
                    .out
                    .as_ref()
                    .map_or("standard output".into(), |p| p.display().to_string())
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet gen-trace: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn common(m: &Model) -> &Common {
    match m {
        Model::Constant { common, .. } | Model::Onoff { common, .. } => common,
        Model::Walk(w) => &w.common,
    }
}

/// Why `gen-trace` cannot write its trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceGenError {
    #[error("--duration-ms must be 1..={max} (one day)")]
    Duration { max: u64 },
    #[error("--on-ms and --off-ms must be at least 1")]
    OnOff,
    #[error("a probability is out of 0..1")]
    Probability,
    #[error("--mean must be above 0")]
    ZeroMean,
    #[error("--min {min} bit/s, --mean {mean} bit/s and --max {max} bit/s must be in that order")]
    Order { min: u64, mean: u64, max: u64 },
    #[error("--step-ms must be at least 1")]
    Step,
    #[error("--volatility must be in 0..=100")]
    Volatility,
    #[error("--revert-s must be above 0 (and at most 10^6)")]
    Revert,
    #[error("--outage-prob must be in 0..=1")]
    OutageProb,
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `path` `None`: standard output.
    #[error("cannot write {}: {source}", path.as_ref().map_or("to standard output".into(), |p| p.display().to_string()))]
    Write {
        path: Option<std::path::PathBuf>,
        #[source]
        source: std::io::Error,
    },
}

fn write(args: &GenTraceArgs) -> Result<Summary, TraceGenError> {
    let plan = Plan::new(&args.model)?;
    let c = common(&args.model);
    match &c.out {
        Some(path) => {
            let file = File::create(path).map_err(|source| TraceGenError::Create {
                path: path.clone(),
                source,
            })?;
            let mut w = BufWriter::new(file);
            let s = plan
                .write(&mut w)
                .and_then(|s| w.flush().map(|()| s))
                .map_err(|source| TraceGenError::Write {
                    path: Some(path.clone()),
                    source,
                })?;
            Ok(s)
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = BufWriter::new(stdout.lock());
            plan.write(&mut w)
                .and_then(|s| w.flush().map(|()| s))
                .map_err(|source| TraceGenError::Write { path: None, source })
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub opportunities: u64,
    pub period_ms: u64,
}

impl Summary {
    /// The trace's mean rate in bit/s, as the engine computes it.
    pub fn mean_rate(&self) -> u64 {
        let bits = u128::from(self.opportunities) * u128::from(OPPORTUNITY_BYTES) * 8 * 1000;
        u64::try_from(bits / u128::from(self.period_ms.max(1))).unwrap_or(u64::MAX)
    }
}

/// A validated model and its parameters.
#[derive(Debug, Clone)]
pub struct Plan {
    kind: Kind,
    duration_ms: u64,
    seed: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Constant {
        rate: u64,
    },
    Walk {
        mean: u64,
        min: u64,
        max: u64,
        step_ms: u64,
        /// e^(−step/τ).
        a: f64,
        /// s·√(1 − a²): the spread of one step's innovation.
        kick: f64,
        /// s and c of the stationary law.
        spread: f64,
        centre: f64,
        outage: Probability,
        outage_ms: u64,
    },
    Onoff {
        rate: u64,
        end_on: Probability,
        end_off: Probability,
        /// The stationary chance of being on, for the first millisecond.
        start_on: Probability,
    },
}

impl Plan {
    pub fn new(m: &Model) -> Result<Plan, TraceGenError> {
        let c = common(m);
        if c.duration_ms == 0 || c.duration_ms > MAX_DURATION_MS {
            return Err(TraceGenError::Duration {
                max: MAX_DURATION_MS,
            });
        }
        let kind = match m {
            Model::Constant { rate, .. } => Kind::Constant { rate: *rate },
            Model::Walk(w) => walk(w)?,
            Model::Onoff {
                rate,
                on_ms,
                off_ms,
                ..
            } => {
                if *on_ms == 0 || *off_ms == 0 {
                    return Err(TraceGenError::OnOff);
                }
                let p = |x: f64| Probability::new(x).ok_or(TraceGenError::Probability);
                let (on, off) = (f64::from(*on_ms), f64::from(*off_ms));
                Kind::Onoff {
                    rate: *rate,
                    end_on: p(1.0 / on)?,
                    end_off: p(1.0 / off)?,
                    start_on: p(on / (on + off))?,
                }
            }
        };
        Ok(Plan {
            kind,
            duration_ms: c.duration_ms,
            seed: c.seed,
        })
    }

    /// Calls `f(m, rate)` for every millisecond `m` in `1..=duration`, with
    /// the rate in bit/s the model gives the millisecond that ends at `m`.
    pub fn each_ms(&self, mut f: impl FnMut(u64, u64)) {
        let mut rng = Rng::new(self.seed);
        match self.kind {
            Kind::Constant { rate } => (1..=self.duration_ms).for_each(|m| f(m, rate)),
            Kind::Walk {
                mean,
                min,
                max,
                step_ms,
                a,
                kick,
                spread,
                centre,
                outage,
                outage_ms,
            } => {
                let mut y = centre + spread * normal(&mut rng);
                let mut rate = 0;
                let mut outage_until = 0;
                for m in 1..=self.duration_ms {
                    // A step starts at millisecond 0, step, 2·step...
                    if (m - 1).is_multiple_of(step_ms) {
                        if m > 1 {
                            y = centre + (y - centre) * a + kick * normal(&mut rng);
                        }
                        let r = (mean as f64 * exp(y)).round();
                        rate = (r.max(0.0) as u64).clamp(min, max);
                        // An outage can only start when none is running.
                        if m > outage_until && rng.chance(outage) {
                            outage_until = m - 1 + outage_ms;
                        }
                    }
                    f(m, if m <= outage_until { 0 } else { rate });
                }
            }
            Kind::Onoff {
                rate,
                end_on,
                end_off,
                start_on,
            } => {
                let mut on = rng.chance(start_on);
                for m in 1..=self.duration_ms {
                    f(m, if on { rate } else { 0 });
                    on = if on {
                        !rng.chance(end_on)
                    } else {
                        rng.chance(end_off)
                    };
                }
            }
        }
    }

    /// The trace's lines, as `m` values with repeats.
    pub fn lines(&self, mut f: impl FnMut(u64)) -> Summary {
        let mut credit = 0u64;
        let mut n = 0u64;
        let mut last = 0;
        self.each_ms(|m, rate| {
            credit = credit.saturating_add(rate);
            while credit >= OPPORTUNITY_CREDIT {
                credit -= OPPORTUNITY_CREDIT;
                f(m);
                n += 1;
                last = m;
            }
        });
        if last != self.duration_ms {
            f(self.duration_ms);
            n += 1;
        }
        Summary {
            opportunities: n,
            period_ms: self.duration_ms,
        }
    }

    /// Writes the trace file.
    pub fn write(&self, w: &mut impl Write) -> std::io::Result<Summary> {
        let mut err = Ok(());
        let s = self.lines(|m| {
            if err.is_ok() {
                err = writeln!(w, "{m}");
            }
        });
        err.map(|()| s)
    }
}

fn walk(w: &WalkArgs) -> Result<Kind, TraceGenError> {
    let min = w.min.unwrap_or(w.mean / 10);
    let max = w.max.unwrap_or(w.mean.saturating_mul(4));
    if w.mean == 0 {
        return Err(TraceGenError::ZeroMean);
    }
    if !(min <= w.mean && w.mean <= max) {
        return Err(TraceGenError::Order {
            min,
            mean: w.mean,
            max,
        });
    }
    if w.step_ms == 0 {
        return Err(TraceGenError::Step);
    }
    if !(w.volatility.is_finite() && w.volatility >= 0.0 && w.volatility <= 100.0) {
        return Err(TraceGenError::Volatility);
    }
    if !(w.revert_s.is_finite() && w.revert_s > 0.0 && w.revert_s <= 1e6) {
        return Err(TraceGenError::Revert);
    }
    let outage = Probability::new(w.outage_prob).ok_or(TraceGenError::OutageProb)?;
    let step_s = f64::from(w.step_ms) / 1000.0;
    let a = exp(-step_s / w.revert_s);
    let spread = w.volatility * (w.revert_s / 2.0).sqrt();
    Ok(Kind::Walk {
        mean: w.mean,
        min,
        max,
        step_ms: u64::from(w.step_ms),
        a,
        kick: spread * (1.0 - a * a).sqrt(),
        spread,
        centre: -spread * spread / 2.0,
        outage,
        outage_ms: u64::from(w.outage_ms),
    })
}

/// A standard normal draw, approximated by Irwin–Hall: the sum of twelve
/// uniforms on [0, 1) has mean 6 and variance 1.
fn normal(rng: &mut Rng) -> f64 {
    let mut sum = 0.0;
    for _ in 0..12 {
        sum += (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    }
    sum - 6.0
}

/// `e^x` from + − × ÷ only: `x = k·ln 2 + r` with `|r| <= ln 2 / 2`, a Taylor
/// series for `e^r` (25 terms: far below f64's precision at that size), and
/// `2^k` built from its bits. IEEE 754 fixes each of these operations, so the
/// result is the same everywhere, unlike the platform's `exp`.
fn exp(x: f64) -> f64 {
    const LN_2: f64 = std::f64::consts::LN_2;
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -708.0 {
        return 0.0;
    }
    let k = (x / LN_2).round();
    let r = x - k * LN_2;
    let mut sum = 1.0;
    for n in (1..=25).rev() {
        sum = 1.0 + sum * r / f64::from(n);
    }
    // -1022 <= k <= 1023 here, a normal power of two.
    let two_k = f64::from_bits(((k as i64 + 1023) as u64) << 52);
    sum * two_k
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};
    use dummynet_engine::impair::trace::{self, TraceMode};

    fn args(line: &str) -> GenTraceArgs {
        let cmd = GenTraceArgs::augment_args(clap::Command::new("gen-trace"));
        let m = cmd
            .try_get_matches_from(std::iter::once("gen-trace").chain(line.split_whitespace()))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        GenTraceArgs::from_arg_matches(&m).unwrap()
    }

    fn bytes(line: &str) -> Vec<u8> {
        let mut out = Vec::new();
        Plan::new(&args(line).model)
            .unwrap()
            .write(&mut out)
            .unwrap();
        out
    }

    fn parsed(line: &str) -> trace::Trace {
        let text = String::from_utf8(bytes(line)).unwrap();
        trace::parse("gen", &text, TraceMode::Loop).unwrap()
    }

    #[test]
    fn exp_is_accurate() {
        for x in [-20.0, -3.7, -1.0, -1e-9, 0.0, 0.5, 1.0, 2.5, 10.0, 50.0] {
            let (ours, std) = (exp(x), f64::exp(x));
            assert!(((ours - std) / std).abs() < 1e-14, "{x}: {ours} vs {std}");
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(1000.0), f64::INFINITY);
        assert_eq!(exp(-1000.0), 0.0);
    }

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut rng = Rng::new(9);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
    }

    #[test]
    fn constant_rate_is_exact() {
        // One opportunity per millisecond: the lines 1..=1000.
        let t = parsed("constant --rate 12.032Mbit/s --duration-ms 1000");
        let expect: Vec<u64> = (1..=1000).map(|ms| ms * 1_000_000).collect();
        assert_eq!(t.times, expect);
        assert_eq!(t.mean_rate(), 12_032_000);
        // Half that: every other millisecond; twice: two per millisecond.
        let half = parsed("constant --rate 6.016Mbit/s --duration-ms 1000");
        assert_eq!(half.times.len(), 500);
        assert_eq!(half.times[0], 2_000_000);
        assert_eq!(half.mean_rate(), 6_016_000);
        let double = parsed("constant --rate 24.064Mbit/s --duration-ms 10");
        assert_eq!(&double.times[..3], [1_000_000, 1_000_000, 2_000_000]);
        assert_eq!(double.mean_rate(), 24_064_000);
        // Rates that are not a multiple: within one opportunity per lap.
        for rate in [1_000_000u64, 7_777_777, 50_000_000] {
            let t = parsed(&format!("constant --rate {rate} --duration-ms 2000"));
            assert_eq!(t.period(), 2_000_000_000);
            let err = t.mean_rate().abs_diff(rate);
            assert!(err <= 12_032 / 2 + 1, "{rate}: {}", t.mean_rate());
        }
        // Too slow for one opportunity: the closing one keeps the period.
        let t = parsed("constant --rate 1Kbit/s --duration-ms 500");
        assert_eq!(t.times, [500_000_000]);
    }

    #[test]
    fn same_seed_same_bytes() {
        let line = "walk --mean 8Mbit/s --duration-ms 5000 --outage-prob 0.05 --seed 7";
        assert_eq!(bytes(line), bytes(line));
        assert_ne!(bytes(line), bytes(&line.replace("--seed 7", "--seed 8")));
        let onoff = "onoff --rate 30Mbit/s --duration-ms 3000 --seed 3";
        assert_eq!(bytes(onoff), bytes(onoff));
        assert_ne!(bytes(onoff), bytes(&onoff.replace("--seed 3", "--seed 4")));
    }

    #[test]
    fn walk_stays_within_bounds_outside_outages() {
        let plan = Plan::new(
            &args(
                "walk --mean 8Mbit/s --min 500Kbit/s --max 30Mbit/s --step-ms 50 \
                 --volatility 1.5 --outage-prob 0.02 --outage-ms 700 --duration-ms 120000 --seed 5",
            )
            .model,
        )
        .unwrap();
        let mut rates = Vec::new();
        plan.each_ms(|m, r| {
            assert_eq!(m, rates.len() as u64 + 1);
            rates.push(r);
        });
        assert_eq!(rates.len(), 120_000);
        let zero = rates.iter().filter(|&&r| r == 0).count();
        assert!(
            rates
                .iter()
                .all(|&r| r == 0 || (500_000..=30_000_000).contains(&r)),
            "a rate left its bounds"
        );
        // Outages last 700 ms each: zeros come in runs that are multiples of it.
        // (An outage cut short by the end of the trace is left out.)
        let mut runs = Vec::new();
        let mut run = 0;
        for &r in &rates {
            if r == 0 {
                run += 1;
            } else if run > 0 {
                runs.push(run);
                run = 0;
            }
        }
        assert!(!runs.is_empty(), "no outage in 2400 steps at 2%");
        assert!(runs.iter().all(|r| r % 700 == 0), "{runs:?}");
        assert_eq!(runs.iter().sum::<usize>() + run, zero);
        // The rate moves: volatile enough to hit both clips, and changes only
        // at step boundaries.
        assert!(rates.contains(&500_000) && rates.contains(&30_000_000));
        for (i, w) in rates.windows(2).enumerate() {
            let m = i as u64 + 2; // the millisecond of w[1]
            if !(m - 1).is_multiple_of(50) && w[0] != 0 && w[1] != 0 {
                assert_eq!(w[0], w[1], "rate changed inside a step at {m}");
            }
        }
    }

    #[test]
    fn walk_averages_its_mean() {
        // No clipping in reach, no outages: the long-run rate is --mean
        // (the centre −s²/2 corrects for e^y's skew).
        // With σ = 1.5 and τ = 1 s, s²/2 = 0.56: without the correction the
        // rate would average 1.75 × --mean.
        let plan = Plan::new(
            &args(
                "walk --mean 8Mbit/s --min 1 --max 1Gbit/s --volatility 1.5 --revert-s 1 \
                 --duration-ms 4000000 --seed 11",
            )
            .model,
        )
        .unwrap();
        let rate = plan.lines(|_| {}).mean_rate() as f64;
        assert!((rate / 8e6 - 1.0).abs() < 0.1, "{rate}");
    }

    #[test]
    fn placement_follows_the_rates() {
        let plan = Plan::new(&args("onoff --rate 24.064Mbit/s --duration-ms 5000").model).unwrap();
        let mut on = 0u64;
        plan.each_ms(|_, r| on += u64::from(r > 0));
        let t = parsed("onoff --rate 24.064Mbit/s --duration-ms 5000");
        // Two opportunities per "on" millisecond, plus perhaps the closing one.
        let n = t.times.len() as u64;
        assert!(n == 2 * on || n == 2 * on + 1, "{n} vs {on}");
        // The on share is near 8 / 12.
        let share = on as f64 / 5000.0;
        assert!((share - 2.0 / 3.0).abs() < 0.05, "{share}");
    }

    #[test]
    fn bad_arguments() {
        let bad = |line: &str| Plan::new(&args(line).model).is_err();
        assert!(bad("constant --rate 1Mbit/s --duration-ms 0"));
        assert!(bad("walk --mean 0"));
        assert!(bad("walk --mean 8Mbit/s --min 9Mbit/s"));
        assert!(bad("walk --mean 8Mbit/s --max 7Mbit/s"));
        assert!(bad("walk --mean 8Mbit/s --step-ms 0"));
        assert!(bad("walk --mean 8Mbit/s --revert-s 0"));
        assert!(bad("walk --mean 8Mbit/s --outage-prob 1.5"));
        assert!(bad("onoff --rate 8Mbit/s --on-ms 0"));
        let cmd = GenTraceArgs::augment_args(clap::Command::new("gen-trace"));
        assert!(cmd
            .try_get_matches_from(["gen-trace", "constant", "--rate", "fast"])
            .is_err());
    }

    /// The shipped traces are what their documented commands write: each
    /// `dummynet gen-trace ...` line of examples/traces/README.md is run and
    /// compared byte for byte with the file it names, and every `.trace`
    /// file there has such a line.
    #[test]
    fn shipped_traces_match_their_commands() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces");
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        let mut made = Vec::new();
        for line in readme.lines() {
            let Some(rest) = line.trim().strip_prefix("dummynet gen-trace ") else {
                continue;
            };
            let a = args(rest);
            let out = common(&a.model)
                .out
                .clone()
                .unwrap_or_else(|| panic!("{line}: no --out"));
            let mut ours = Vec::new();
            Plan::new(&a.model).unwrap().write(&mut ours).unwrap();
            let shipped =
                std::fs::read(dir.join(&out)).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
            assert!(
                ours == shipped,
                "{} differs from what `{line}` writes",
                out.display()
            );
            let text = String::from_utf8(shipped).unwrap();
            trace::parse("shipped", &text, TraceMode::Loop).unwrap();
            assert!(text.len() < 1_000_000, "{} is over 1 MB", out.display());
            made.push(out);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| PathBuf::from(e.unwrap().file_name()))
            .filter(|p| p.extension().is_some_and(|e| e == "trace"))
            .collect();
        files.sort();
        made.sort();
        assert_eq!(files, made, "every shipped trace has its command");
    }
}
