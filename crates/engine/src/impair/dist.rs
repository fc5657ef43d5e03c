//! Delay distributions for `jitter`: uniform, and netem's tables.
//!
//! netem shapes jitter with a table of the inverse cumulative distribution
//! function of a standardized variable (mean 0, standard deviation 1): entry
//! `i` of an `N`-entry table is the value below which a share `i / N` of the
//! draws fall, times [`DIST_SCALE`], as a 16-bit integer. A draw picks an
//! entry with a uniform number and multiplies it by the jitter (`tabledist`
//! in `sch_netem.c`), so `jitter J` is the standard deviation of the delay
//! and the delay's mean stays the configured `delay`.
//!
//! `tc` reads its tables from `.dist` files (`/usr/lib/tc/normal.dist`,
//! `pareto.dist`, `paretonormal.dist`, or one made by iproute2's `maketable`
//! from measured delays): `#` comment lines, then integers separated by
//! white space. Any of them loads here unchanged with [`parse`].
//!
//! The three names tc knows are built in ([`builtin`]), each generated once
//! by this file from its definition rather than read from tc's files, with
//! 4096 entries (the size of tc's own) taken at the midpoints of equal
//! quantile steps, `(i + ½) / 4096`:
//!
//! - `normal`: the standard normal.
//! - `pareto`: a Pareto variable with shape 3 and scale 1, as in tc's
//!   `pareto.c` (there: the quantile `(1 − q)^(−1/3)`, minus its mean 1.5,
//!   times 4/3; here standardized by its standard deviation √3/2 instead).
//!   Right-skewed: most packets come a little early, a few very late.
//! - `paretonormal`: as in tc's `paretonormal.c`, a quarter of a standard
//!   normal plus that centred Pareto, both taken at the same quantile, so
//!   the table is the sum of the two quantile functions (the quantile
//!   function of a sum of comonotone variables), then standardized.
//!
//! A 16-bit entry cannot exceed 32767 / 8192 ≈ 4 standard deviations. That
//! costs the normal nothing (its 4096 quantiles stay within ±3.7), but the
//! Pareto's tail carries much of its variance: cut at 4 and left as is, the
//! pareto table would have a standard deviation of 0.74 (tc's own
//! `pareto.dist` has 0.82 and a mean of −0.03, so netem's `jitter J
//! distribution pareto` varies by about 0.8·J). Here every built-in table is
//! standardized again after the cut, until the table as stored has mean 0
//! and standard deviation 1, so `J` is the standard deviation for every
//! name. The price is a larger atom at the cut: 79 of the 4096 pareto
//! entries (1.9%) and 56 of the paretonormal ones (1.4%) sit at 32767.

use std::sync::{Arc, OnceLock};

use thiserror::Error;

/// Why a `.dist` table was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DistError {
    #[error(
        "line {line}: `{token}` is not a table value; expected an integer from -32768 to 32767"
    )]
    BadValue { line: usize, token: String },
    #[error("the table has no values")]
    Empty,
    #[error("the table has {0} values; netem takes at most {MAX_ENTRIES}")]
    TooLong(usize),
}

/// Reads a table in tc's `.dist` format: `#` comment lines, then integers
/// separated by white space, any number to a line.
pub fn parse(name: &str, text: &str) -> Result<DistTable, DistError> {
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for token in line.split_whitespace() {
            let v = token.parse::<i16>().map_err(|_| DistError::BadValue {
                line: i + 1,
                token: token.to_string(),
            })?;
            values.push(v);
        }
    }
    if values.is_empty() {
        return Err(DistError::Empty);
    }
    if values.len() > MAX_ENTRIES {
        return Err(DistError::TooLong(values.len()));
    }
    Ok(DistTable {
        name: name.to_string(),
        values,
    })
}

/// The built-in tables by name (`normal`, `pareto`, `paretonormal`, in any
/// case). Each is generated on first use and shared afterwards.
pub fn builtin(name: &str) -> Option<Arc<DistTable>> {
    static NORMAL: OnceLock<Arc<DistTable>> = OnceLock::new();
    static PARETO: OnceLock<Arc<DistTable>> = OnceLock::new();
    static PARETONORMAL: OnceLock<Arc<DistTable>> = OnceLock::new();
    let (cell, quantile): (_, fn(f64) -> f64) = match name.to_ascii_lowercase().as_str() {
        "normal" => (&NORMAL, normal_quantile),
        "pareto" => (&PARETO, pareto_quantile),
        "paretonormal" => (&PARETONORMAL, paretonormal_quantile),
        _ => return None,
    };
    let table = cell.get_or_init(|| {
        Arc::new(DistTable {
            name: name.to_ascii_lowercase(),
            values: quantile_table(quantile),
        })
    });
    Some(Arc::clone(table))
}

/// Entries in a built-in table, as in tc's `.dist` files.
const BUILTIN_ENTRIES: usize = 4096;

/// The largest and smallest standardized value an `i16` entry can hold.
const TABLE_MAX: f64 = i16::MAX as f64 / DIST_SCALE as f64;
const TABLE_MIN: f64 = i16::MIN as f64 / DIST_SCALE as f64;

/// A table from a quantile function: its values at `(i + ½) / N`, then
/// shifted and scaled until the values as stored (cut to what an `i16`
/// holds) have mean 0 and standard deviation 1.
///
/// One pass of standardizing is not enough when the cut bites: the cut
/// lowers the standard deviation, widening the values makes more of them
/// reach the cut, and so on. Each pass corrects by what the previous one
/// left, and the correction shrinks geometrically (one pass for the normal,
/// about twenty for the Pareto and the paretonormal to reach 10⁻¹²); the
/// pass limit only guards against a shape where it would not.
fn quantile_table(quantile: fn(f64) -> f64) -> Vec<i16> {
    const PASSES: usize = 100;
    let n = BUILTIN_ENTRIES as f64;
    let mut x: Vec<f64> = (0..BUILTIN_ENTRIES)
        .map(|i| quantile((i as f64 + 0.5) / n))
        .collect();
    let cut = |v: f64| v.clamp(TABLE_MIN, TABLE_MAX);
    for _ in 0..PASSES {
        let mean = x.iter().map(|&v| cut(v)).sum::<f64>() / n;
        let var = x.iter().map(|&v| (cut(v) - mean).powi(2)).sum::<f64>() / n;
        let sd = var.sqrt();
        if !sd.is_normal() || (mean.abs() < 1e-12 && (sd - 1.0).abs() < 1e-12) {
            break;
        }
        for v in &mut x {
            *v = (*v - mean) / sd;
        }
    }
    // Every quantile function here is nondecreasing and the maps applied
    // (a positive scale, the cut, rounding) keep the order, so the table is
    // sorted as an inverse CDF must be.
    x.iter()
        .map(|&v| (cut(v) * DIST_SCALE as f64).round() as i16)
        .collect()
}

/// The standard normal's quantile function Φ⁻¹(q), for 0 < q < 1.
///
/// Peter Acklam's rational approximations (a central one for
/// 0.02425 ≤ q ≤ 0.97575, one in `√(−2 ln q)` for the tails), relative error
/// below 1.2·10⁻⁹: far finer than a table step of 1/8192.
fn normal_quantile(q: f64) -> f64 {
    // Coefficients from the highest power down; each denominator ends in
    // its constant term, 1.
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.38357751867269e+02,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 6] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
        1.0,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 5] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
        1.0,
    ];
    const TAIL: f64 = 0.02425;
    let horner = |coef: &[f64], x: f64| coef.iter().fold(0.0, |acc, &c| acc * x + c);
    // The lower tail; the upper one is its mirror image.
    let tail = |q: f64| {
        let t = (-2.0 * q.ln()).sqrt();
        horner(&C, t) / horner(&D, t)
    };
    if q < TAIL {
        tail(q)
    } else if q > 1.0 - TAIL {
        -tail(1.0 - q)
    } else {
        let u = q - 0.5;
        let r = u * u;
        u * horner(&A, r) / horner(&B, r)
    }
}

/// netem's Pareto: shape α = 3, scale 1, whose quantile is `(1 − q)^(−1/3)`;
/// mean α/(α − 1) = 3/2, variance α/((α − 1)²(α − 2)) = 3/4.
fn pareto_raw(q: f64) -> f64 {
    (1.0 - q).powf(-1.0 / 3.0)
}

/// The Pareto standardized by its own mean and standard deviation.
fn pareto_quantile(q: f64) -> f64 {
    (pareto_raw(q) - 1.5) / 0.75f64.sqrt()
}

/// tc's paretonormal: `0.25·Z + (P − 1.5)` with the normal `Z` and the
/// Pareto `P` driven by the same quantile. (tc writes it as
/// `(normal + 3·pareto) / 4` with its pareto table scaled by 4/3.)
/// `quantile_table` standardizes the sum.
fn paretonormal_quantile(q: f64) -> f64 {
    0.25 * normal_quantile(q) + (pareto_raw(q) - 1.5)
}

/// netem's `NETEM_DIST_SCALE`: a table entry of 8192 is one standard deviation.
pub const DIST_SCALE: i64 = 8192;
/// netem's `NETEM_DIST_MAX`: the most entries a table may have.
pub const MAX_ENTRIES: usize = 16384;

/// A distribution table: the inverse CDF sampled at equal steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistTable {
    /// `normal`, `pareto`, `paretonormal`, or the file's name.
    pub name: String,
    pub values: Vec<i16>,
}

/// The shape of `jitter`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Distribution {
    /// Uniform on `[delay − J, delay + J]` (netem's default).
    #[default]
    Uniform,
    Table(Arc<DistTable>),
}

impl Distribution {
    pub fn name(&self) -> &str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Table(t) => &t.name,
        }
    }
}

/// A draw of `mu + sigma × X` where `X` follows `dist`, from the uniform
/// 32-bit number `rnd` (correlated or not). May be negative.
#[inline]
pub fn sample(mu: i64, sigma: i64, rnd: u32, dist: &Distribution) -> i64 {
    if sigma == 0 {
        return mu;
    }
    match dist {
        Distribution::Uniform => {
            // netem takes `rnd % 2σ`, which caps σ at 2^31 ns; scaling the
            // draw to the range keeps every σ exact and unbiased enough (a
            // step of 2σ / 2^32).
            let span = 2 * i128::from(sigma);
            let off = (i128::from(rnd) * span) >> 32;
            mu - sigma + off as i64
        }
        Distribution::Table(t) => {
            let Some(&v) = t.values.get(rnd as usize % t.values.len().max(1)) else {
                return mu;
            };
            // netem's tabledist: σ·t/SCALE, computed in two parts so that
            // neither overflows, the remainder part rounded to nearest.
            let t = i64::from(v);
            let mut x = (sigma % DIST_SCALE) * t;
            if x >= 0 {
                x += DIST_SCALE / 2;
            } else {
                x -= DIST_SCALE / 2;
            }
            x / DIST_SCALE + (sigma / DIST_SCALE) * t + mu
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Mean and standard deviation of a table's entries, in table units
    /// (divided by the count, as the generator computes them).
    fn moments(values: &[i16]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = values
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        (mean, var.sqrt())
    }

    /// Mean and standard deviation of draws.
    fn draw_moments(draws: &[i64]) -> (f64, f64) {
        let n = draws.len() as f64;
        let mean = draws.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = draws
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        (mean, var.sqrt())
    }

    fn table(name: &str) -> Arc<DistTable> {
        builtin(name).unwrap()
    }

    #[test]
    fn parse_reads_comments_and_rows_of_values() {
        let text = "# made by hand\n\n  -8192 0\t8192 # one sd\n16384\n#\n-32768 32767\n";
        let t = parse("mine", text).unwrap();
        assert_eq!(t.name, "mine");
        assert_eq!(t.values, vec![-8192, 0, 8192, 16384, -32768, 32767]);
    }

    #[test]
    fn parse_names_the_line_of_a_bad_value() {
        let bad = |text: &str| parse("x", text).unwrap_err();
        assert_eq!(
            bad("# header\n1 2\n3 x4 5\n"),
            DistError::BadValue {
                line: 3,
                token: "x4".into()
            }
        );
        // Out of the i16 range, or not an integer.
        assert_eq!(
            bad("1\n40000\n"),
            DistError::BadValue {
                line: 2,
                token: "40000".into()
            }
        );
        assert_eq!(
            bad("1.5"),
            DistError::BadValue {
                line: 1,
                token: "1.5".into()
            }
        );
        let msg = bad("\n\n7 seven").to_string();
        assert!(msg.contains("line 3") && msg.contains("seven"), "{msg}");
    }

    #[test]
    fn parse_refuses_empty_and_oversized_tables() {
        assert_eq!(parse("x", ""), Err(DistError::Empty));
        assert_eq!(parse("x", "# only a comment\n\n"), Err(DistError::Empty));
        let full = "1 ".repeat(MAX_ENTRIES);
        assert_eq!(parse("x", &full).unwrap().values.len(), MAX_ENTRIES);
        let over = "1 ".repeat(MAX_ENTRIES + 1);
        assert_eq!(parse("x", &over), Err(DistError::TooLong(MAX_ENTRIES + 1)));
    }

    #[test]
    fn normal_quantile_matches_published_values() {
        // Φ⁻¹ at familiar points, to 15 digits from standard tables; Acklam's
        // relative error is below 1.2e-9, so 1e-8 is a bound it must meet.
        let cases = [
            (0.5, 0.0),
            (0.841_344_746_068_542_9, 1.0),
            (0.975, 1.959_963_984_540_054),
            (0.99, 2.326_347_874_040_841),
            (0.01, -2.326_347_874_040_841),
            (0.001, -3.090_232_306_167_814),
            (1e-6, -4.753_424_308_822_899),
        ];
        for (q, z) in cases {
            let got = normal_quantile(q);
            assert!(
                (got - z).abs() <= 1e-8 * z.abs().max(1.0),
                "Φ⁻¹({q}) = {got}, not {z}"
            );
        }
    }

    #[test]
    fn builtin_tables_are_standardized_sorted_inverse_cdfs() {
        for name in ["normal", "pareto", "paretonormal"] {
            let t = table(name);
            assert_eq!(t.name, name);
            assert_eq!(t.values.len(), BUILTIN_ENTRIES, "{name}");
            assert!(
                t.values.windows(2).all(|w| w[0] <= w[1]),
                "{name} is not sorted"
            );
            // Before rounding the values have mean 0 and sd 1 (to 1e-12);
            // rounding moves each entry by at most half a unit, so it moves
            // the mean, and the sd, by at most 0.5 units.
            let (mean, sd) = moments(&t.values);
            assert!(mean.abs() <= 0.5, "{name}: mean {mean}");
            assert!((sd - DIST_SCALE as f64).abs() <= 0.5, "{name}: sd {sd}");
        }
    }

    #[test]
    fn builtin_names_ignore_case_and_tables_are_made_once() {
        let a = table("Normal");
        let b = table("NORMAL");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.name, "normal");
        assert!(!Arc::ptr_eq(&a, &table("pareto")));
        assert!(builtin("uniform").is_none());
        assert!(builtin("weibull").is_none());
        assert!(builtin("").is_none());
    }

    #[test]
    fn builtin_tables_have_their_shapes() {
        let n = BUILTIN_ENTRIES;
        let q = |i: usize| (i as f64 + 0.5) / n as f64;
        // How far apart the upper and lower quartiles sit from the median:
        // a ratio that no shift or scale changes, 1 for a symmetric shape.
        let spread = |v: &[i16]| {
            let at = |i: usize| f64::from(v[i]);
            (at(3 * n / 4) - at(n / 2)) / (at(n / 2) - at(n / 4))
        };
        let expected =
            |f: &dyn Fn(f64) -> f64| (f(q(3 * n / 4)) - f(q(n / 2))) / (f(q(n / 2)) - f(q(n / 4)));
        let pareto = |p: f64| (1.0 - p).powf(-1.0 / 3.0);
        let paretonormal = |p: f64| 0.25 * normal_quantile(p) + pareto(p);
        // Rounding moves the three entries by half a unit on differences of
        // over a thousand units: 0.5% is a generous bound.
        for (name, want) in [
            ("normal", expected(&normal_quantile)),
            ("pareto", expected(&pareto)),
            ("paretonormal", expected(&paretonormal)),
        ] {
            let got = spread(&table(name).values);
            assert!((got / want - 1.0).abs() < 0.005, "{name}: {got} vs {want}");
        }
        assert!(
            expected(&pareto) > 2.0,
            "the Pareto's upper quartile is far out"
        );

        let normal = table("normal");
        let v = &normal.values;
        for i in 0..n / 2 {
            assert!(
                (i32::from(v[i]) + i32::from(v[n - 1 - i])).abs() <= 1,
                "entry {i}"
            );
        }
        // Entries within one sd: i from 650 to 3446, where (i + ½)/4096 lies
        // within Φ(±1) = 0.5 ± 0.341345; the scale's rounding may move one
        // entry at each end.
        let within = v.iter().filter(|&&x| x.unsigned_abs() <= 8192).count();
        assert!((2795..=2799).contains(&within), "{within}");

        // The heavy tails end at the cut: as many entries there as the
        // module documentation says.
        let at_cut = |name: &str| {
            table(name)
                .values
                .iter()
                .filter(|&&x| x == i16::MAX)
                .count()
        };
        assert_eq!(at_cut("normal"), 0);
        assert_eq!(at_cut("pareto"), 79);
        assert_eq!(at_cut("paretonormal"), 56);
        // Right-skewed: the median is below the mean.
        assert!(table("pareto").values[n / 2] < 0);
        assert!(table("paretonormal").values[n / 2] < 0);
    }

    #[test]
    fn uniform_sample_has_the_range_mean_and_spread() {
        let (mu, sigma) = (5_000_000i64, 1_000_000i64);
        let mut rng = Rng::new(11);
        let draws: Vec<i64> = (0..100_000)
            .map(|_| sample(mu, sigma, rng.next_u32(), &Distribution::Uniform))
            .collect();
        let (lo, hi) = (mu - sigma, mu + sigma);
        assert!(draws.iter().all(|&d| (lo..=hi).contains(&d)));
        // Both ends are reached: missing the outer 0.05% on one side in 1e5
        // draws has probability (1 − 0.0005)^100000 ≈ e^−50.
        let (min, max) = (draws.iter().min().unwrap(), draws.iter().max().unwrap());
        assert!(
            *min < lo + sigma / 1000 && *max > hi - sigma / 1000,
            "{min} {max}"
        );
        let (mean, sd) = draw_moments(&draws);
        // Uniform on ±σ: sd σ/√3, so the mean of 1e5 draws has sd
        // σ/√3/√1e5 ≈ 0.0018σ; 5 sd.
        let sd_u = sigma as f64 / 3f64.sqrt();
        assert!(
            (mean - mu as f64).abs() < 5.0 * sd_u / 1e5f64.sqrt(),
            "{mean}"
        );
        // The sample variance has relative sd √((μ4/σ⁴ − 1)/n) = √(0.8/n)
        // (μ4/σ⁴ = 9/5 for a uniform), so the sample sd has half that,
        // 0.14%; 5 sd is 0.71%.
        let bound = 5.0 * 0.5 * (0.8f64 / 1e5).sqrt();
        assert!((sd / sd_u - 1.0).abs() < bound, "{sd} vs {sd_u}");
    }

    #[test]
    fn normal_sample_has_mean_mu_and_sd_sigma() {
        let (mu, sigma) = (10_000_000i64, 1_000_000i64);
        let normal = Distribution::Table(table("normal"));
        let mut rng = Rng::new(12);
        let n = 100_000;
        let draws: Vec<i64> = (0..n)
            .map(|_| sample(mu, sigma, rng.next_u32(), &normal))
            .collect();
        let (mean, sd) = draw_moments(&draws);
        // Mean: sd σ/√n; 5 sd. The table's own mean is within 0.5/8192 σ of 0.
        let n = n as f64;
        assert!(
            (mean - mu as f64).abs() < 5.0 * sigma as f64 / n.sqrt(),
            "{mean}"
        );
        // For a normal the sample variance has relative sd √(2/n), the sample
        // sd half that (0.22%); 5 sd is 1.1%.
        let bound = 5.0 * 0.5 * (2.0 / n).sqrt();
        assert!((sd / sigma as f64 - 1.0).abs() < bound, "{sd}");
        // About 68.3% of the draws within one sd: binomial sd
        // √(n·0.683·0.317) ≈ 147 draws; 5 sd.
        let within = draws.iter().filter(|&&d| (d - mu).abs() <= sigma).count() as f64;
        let p = 0.682_689_492;
        assert!(
            (within - n * p).abs() < 5.0 * (n * p * (1.0 - p)).sqrt(),
            "{within}"
        );
    }

    #[test]
    fn sample_scales_table_entries_exactly() {
        let t = Distribution::Table(Arc::new(parse("t", "-8192 0 8192 16384").unwrap()));
        let got: Vec<i64> = (0..5).map(|rnd| sample(1000, 100, rnd, &t)).collect();
        assert_eq!(got, vec![900, 1000, 1100, 1200, 900]);
        // σ not a multiple of the scale, and one too large for a naive σ·t.
        assert_eq!(sample(0, 12_345, 3, &t), 24_690);
        assert_eq!(
            sample(7, 1_000_000_000_000_000, 2, &t),
            1_000_000_000_000_007
        );
        assert_eq!(sample(7, 0, 3, &t), 7);
    }

    #[test]
    fn parsed_table_reproduces_its_distribution() {
        let t = Distribution::Table(Arc::new(
            parse("four", "# four values\n-8192 0\n8192 16384\n").unwrap(),
        ));
        let (mu, sigma) = (50_000i64, 10_000i64);
        let mut counts = std::collections::BTreeMap::new();
        let mut rng = Rng::new(13);
        let n = 100_000;
        for _ in 0..n {
            *counts
                .entry(sample(mu, sigma, rng.next_u32(), &t))
                .or_insert(0u32) += 1;
        }
        let keys: Vec<i64> = counts.keys().copied().collect();
        assert_eq!(keys, vec![40_000, 50_000, 60_000, 70_000]);
        // Each value a quarter of the time: binomial sd √(n/4·3/4) ≈ 137; 5 sd.
        let sd = (n as f64 * 0.25 * 0.75).sqrt();
        for (v, c) in counts {
            assert!((f64::from(c) - n as f64 / 4.0).abs() < 5.0 * sd, "{v}: {c}");
        }
    }

    #[test]
    fn tc_normal_dist_loads_when_installed() {
        // Where iproute2 installs its tables (lib64 on some distributions).
        let paths = ["/usr/lib/tc/normal.dist", "/usr/lib64/tc/normal.dist"];
        let Some(text) = paths.iter().find_map(|p| std::fs::read_to_string(p).ok()) else {
            eprintln!("note: no tc normal.dist on this machine; test skipped");
            return;
        };
        let t = parse("normal", &text).unwrap();
        assert!(t.values.windows(2).all(|w| w[0] <= w[1]));
        // tc's table samples Φ⁻¹ at q = i/4096 rather than the midpoints, so
        // its sd misses 1 by a little; 1% is ample and still tells a normal
        // table from, say, tc's pareto (sd 0.82).
        let (mean, sd) = moments(&t.values);
        assert!(mean.abs() < 0.01 * DIST_SCALE as f64, "{mean}");
        assert!((sd / DIST_SCALE as f64 - 1.0).abs() < 0.01, "{sd}");
    }
}
