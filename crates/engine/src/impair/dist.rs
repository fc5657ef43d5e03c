//! Delay distributions for `jitter`: uniform, and netem's tables.
//!
//! netem shapes jitter with a table of the inverse cumulative distribution
//! of a standard variable (mean 0, standard deviation 1), scaled by
//! [`DIST_SCALE`] and stored as 16-bit integers; a draw picks an entry with
//! a uniform number and scales it by the jitter (`tabledist` in
//! `sch_netem.c`). The tables are the `.dist` files `tc` reads
//! (`/usr/lib/tc/normal.dist`...), so any of them, or one made with tc's
//! `maketable` from measurements, loads here unchanged.
//!
//! TODO(helper): `builtin` and the generated tables; tests.

use std::sync::Arc;

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

/// The built-in tables by name (`normal`, `pareto`, `paretonormal`).
pub fn builtin(_name: &str) -> Option<Arc<DistTable>> {
    None
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
