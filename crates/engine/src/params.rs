//! The parameters of a plug-in (a scheduler type, an AQM): how each is
//! written, and which sysctl fills it when a command leaves it out.
//!
//! A plug-in declares its parameters as a table of [`ParamSpec`]s; the
//! language parses every plug-in's words from these tables alone and hands
//! the values over as `(name, u64)` pairs ([`Params`]) in the unit of each
//! one's [`ParamKind`]. The plug-in reads them back into its own typed
//! configuration, which is also where it checks FreeBSD's bounds.
//!
//! Defaults work as in FreeBSD, where the kernel, not ipfw, fills what a
//! command left out from `net.inet.ip.dummynet.*` sysctls: a plug-in lists
//! its [`Tunable`]s, and the engine fills the missing parameters from the
//! current settings when the command is applied ([`fill_defaults`]).
//! Parameters without a tunable take the plug-in's built-in default.

use crate::time::NS_PER_US;
use crate::units::fmt_time;

/// One parameter, as a plug-in declares it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    /// The least and greatest value the plug-in runs with, in the unit the
    /// value travels in: a value outside is brought to the nearer one when
    /// the command is applied, with a note ([`clamp`]), as FreeBSD's kernel
    /// bounds AQM and scheduler parameters (`BOUND_VAR`) instead of
    /// refusing them. `None`: the plug-in checks it itself.
    pub bounds: Option<(u64, u64)>,
}

/// How a parameter is written, and the unit its value travels in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A plain number (`quantum 1514`, `flows 1024`).
    Count,
    /// A whole number, times 1024 with a `K` suffix, as ipfw reads RED's
    /// thresholds (`10K`).
    Size,
    /// A time (`target 5ms`; a bare number is milliseconds, as in ipfw),
    /// passed in nanoseconds.
    Time,
    /// A decimal number in `min..=max` (`min` itself refused when
    /// `open_min`), passed in parts per billion ([`to_ppb`]), so decimals
    /// of up to nine places travel exactly.
    Fraction { min: f64, max: f64, open_min: bool },
    /// A keyword pair: the parameter's name sets 1, `off` sets 0 (`ecn` /
    /// `noecn`), passed under the name.
    Flag { off: &'static str },
}

impl ParamSpec {
    pub const fn count(name: &'static str) -> Self {
        ParamSpec {
            name,
            kind: ParamKind::Count,
            bounds: None,
        }
    }
    pub const fn size(name: &'static str) -> Self {
        ParamSpec {
            name,
            kind: ParamKind::Size,
            bounds: None,
        }
    }
    pub const fn time(name: &'static str) -> Self {
        ParamSpec {
            name,
            kind: ParamKind::Time,
            bounds: None,
        }
    }
    /// A fraction in `min..=max`.
    pub const fn fraction(name: &'static str, min: f64, max: f64) -> Self {
        ParamSpec {
            name,
            kind: ParamKind::Fraction {
                min,
                max,
                open_min: false,
            },
            bounds: None,
        }
    }
    /// A fraction in `min < v <= max`.
    pub const fn fraction_above(name: &'static str, min: f64, max: f64) -> Self {
        ParamSpec {
            name,
            kind: ParamKind::Fraction {
                min,
                max,
                open_min: true,
            },
            bounds: None,
        }
    }
    pub const fn flag(name: &'static str, off: &'static str) -> Self {
        ParamSpec {
            name,
            kind: ParamKind::Flag { off },
            bounds: None,
        }
    }

    /// The same, brought within `lo..=hi` when applied ([`Self::bounds`]).
    pub const fn within(self, lo: u64, hi: u64) -> Self {
        ParamSpec {
            bounds: Some((lo, hi)),
            ..self
        }
    }

    /// `v` as a command would write it.
    pub fn show(&self, v: u64) -> String {
        match self.kind {
            ParamKind::Time => fmt_time(v),
            ParamKind::Fraction { .. } => from_ppb(v).to_string(),
            ParamKind::Count | ParamKind::Size | ParamKind::Flag { .. } => v.to_string(),
        }
    }

    /// The words that introduce this parameter.
    pub fn keywords(&self) -> impl Iterator<Item = &'static str> {
        let off = match self.kind {
            ParamKind::Flag { off } => Some(off),
            _ => None,
        };
        std::iter::once(self.name).chain(off)
    }
}

/// A plug-in's parameters as configured: `(name, value)` in the unit of
/// each one's [`ParamKind`]. A name given twice: the last one counts.
pub type Params = [(String, u64)];

/// Why a plug-in (an AQM, a scheduler type, an impairment) refused its
/// configuration: a value out of its range, said as fields, or a rule a
/// range cannot say, in the plug-in's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamError {
    OutOfRange(Box<OutOfRange>),
    /// A parameter the plug-in does not take, two that must agree, ...
    Refused(String),
}

/// A value outside what a plug-in takes. Every part is written as a
/// command writes it (`5ms`, `1514`), so the sentence reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    /// Whose parameter (`fq_codel`, `rr`), empty when the name says it (a sysctl's).
    pub owner: String,
    /// The parameter (`target`), or the sysctl (`codel.target`).
    pub name: String,
    pub value: String,
    pub min: String,
    pub max: String,
    /// How the bounds are joined: `..` or `..=`.
    pub to: &'static str,
    /// What the bounds count (`bytes`), empty for a time or a plain number.
    pub unit: &'static str,
    /// The scheduler type a flowset's value was checked for (`RR`), if the
    /// owner is not the type itself.
    pub for_type: Option<&'static str>,
}

impl OutOfRange {
    /// `name value` out of `min to max`, with no owner, unit or type yet.
    pub fn new(
        name: impl Into<String>,
        value: impl ToString,
        min: impl ToString,
        max: impl ToString,
    ) -> Self {
        OutOfRange {
            owner: String::new(),
            name: name.into(),
            value: value.to_string(),
            min: min.to_string(),
            max: max.to_string(),
            to: "..",
            unit: "",
            for_type: None,
        }
    }
    pub fn owner(self, owner: impl Into<String>) -> Self {
        OutOfRange {
            owner: owner.into(),
            ..self
        }
    }
    /// Bounds written `min..=max`.
    pub fn inclusive(self) -> Self {
        OutOfRange { to: "..=", ..self }
    }
    pub fn unit(self, unit: &'static str) -> Self {
        OutOfRange { unit, ..self }
    }
    pub fn for_type(self, t: &'static str) -> Self {
        OutOfRange {
            for_type: Some(t),
            ..self
        }
    }
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.owner.is_empty() {
            write!(f, "{} ", self.owner)?;
        }
        write!(
            f,
            "{} {} is out of range {}{}{}",
            self.name, self.value, self.min, self.to, self.max
        )?;
        if !self.unit.is_empty() {
            write!(f, " {}", self.unit)?;
        }
        if let Some(t) = self.for_type {
            write!(f, " for {t}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamError::OutOfRange(r) => r.fmt(f),
            ParamError::Refused(words) => f.write_str(words),
        }
    }
}

impl std::error::Error for ParamError {}

impl From<OutOfRange> for ParamError {
    fn from(r: OutOfRange) -> Self {
        ParamError::OutOfRange(Box::new(r))
    }
}

impl From<String> for ParamError {
    fn from(words: String) -> Self {
        ParamError::Refused(words)
    }
}

impl From<&str> for ParamError {
    fn from(words: &str) -> Self {
        ParamError::Refused(words.to_string())
    }
}

/// Parts per billion: the unit of [`ParamKind::Fraction`] values.
pub const PPB: u64 = 1_000_000_000;

/// `v` in parts per billion, rounded (negative values are 0).
pub fn to_ppb(v: f64) -> u64 {
    (v * PPB as f64).round().max(0.0) as u64
}

/// A [`ParamKind::Fraction`] value back as a number.
pub fn from_ppb(v: u64) -> f64 {
    v as f64 / PPB as f64
}

/// The value of parameter `name` in `params` (the last one given).
pub fn get(params: &Params, name: &str) -> Option<u64> {
    params
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|&(_, v)| v)
}

/// A default of a plug-in parameter that a sysctl sets:
/// `net.inet.ip.dummynet.<sysctl>`, in FreeBSD's unit for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunable {
    /// The sysctl's name after `net.inet.ip.dummynet.` (`codel.target`).
    pub sysctl: &'static str,
    /// The parameter it fills (`target`).
    pub param: &'static str,
    pub unit: TunableUnit,
    /// FreeBSD's default, in `unit`.
    pub default: u64,
    /// What the sysctl accepts, in `unit` (FreeBSD's handler's bounds).
    pub min: u64,
    pub max: u64,
}

/// The unit of a sysctl's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunableUnit {
    /// Microseconds; fills a [`ParamKind::Time`] parameter.
    Micros,
    /// Thousandths; fills a [`ParamKind::Fraction`] parameter.
    Thousandths,
    /// A count of what the word says (`bytes`, `packets`, `flows`); fills a
    /// [`ParamKind::Count`] parameter.
    Count(&'static str),
}

impl TunableUnit {
    /// How the unit is named in messages.
    pub fn name(self) -> &'static str {
        match self {
            TunableUnit::Micros => "microseconds",
            TunableUnit::Thousandths => "thousandths",
            TunableUnit::Count(what) => what,
        }
    }
}

impl Tunable {
    /// The full sysctl name.
    pub fn full_name(&self) -> String {
        format!("net.inet.ip.dummynet.{}", self.sysctl)
    }

    /// `value` if the sysctl accepts it, else why not.
    pub fn check(&self, value: u64) -> Result<u64, ParamError> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(OutOfRange::new(self.sysctl, value, self.min, self.max)
                .unit(self.unit.name())
                .into())
        }
    }

    /// A sysctl value as the parameter it fills.
    pub fn to_param(&self, value: u64) -> u64 {
        match self.unit {
            TunableUnit::Micros => value.saturating_mul(NS_PER_US),
            TunableUnit::Thousandths => value.saturating_mul(PPB / 1000),
            TunableUnit::Count(_) => value,
        }
    }
}

/// Appends to `params` the value `sysctl` gives each of `tunables` whose
/// parameter `params` leaves out (the engine passes its settings' values),
/// as FreeBSD's kernel fills a new flowset or scheduler from its sysctls.
pub fn fill_defaults(
    tunables: &[Tunable],
    params: &mut Vec<(String, u64)>,
    sysctl: impl Fn(&Tunable) -> u64,
) {
    for t in tunables {
        if get(params, t.param).is_none() {
            params.push((t.param.to_string(), t.to_param(sysctl(t))));
        }
    }
}

/// Brings every value of `params` that has [`ParamSpec::bounds`] in
/// `specs` within them, and says so in `notes` (`owner` names the plug-in:
/// `fq_codel target 0 is below 1us, its least: 1us is used, as FreeBSD's
/// kernel does`).
pub fn clamp(
    owner: &str,
    specs: &[ParamSpec],
    params: &mut [(String, u64)],
    notes: &mut Vec<String>,
) {
    for (k, v) in params.iter_mut() {
        let Some((spec, (lo, hi))) = specs
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(k))
            .and_then(|s| Some((s, s.bounds?)))
        else {
            continue;
        };
        let (edge, word) = if *v < lo {
            (lo, "below")
        } else if *v > hi {
            (hi, "above")
        } else {
            continue;
        };
        let least = if word == "below" { "least" } else { "greatest" };
        notes.push(format!(
            "{owner} {k} {} is {word} {}, its {least}: {} is used, as FreeBSD's kernel does",
            spec.show(*v),
            spec.show(edge),
            spec.show(edge),
        ));
        *v = edge;
    }
}

/// A time parameter within `min..=max`, or a message naming it.
pub fn time_in(owner: &str, name: &str, v: u64, (min, max): (u64, u64)) -> Result<u64, ParamError> {
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(
            OutOfRange::new(name, fmt_time(v), fmt_time(min), fmt_time(max))
                .owner(owner)
                .into(),
        )
    }
}

/// A fraction parameter within `min..=max` (`min` excluded if `open_min`).
pub fn fraction_in(
    owner: &str,
    name: &str,
    v: u64,
    (min, max): (f64, f64),
    open_min: bool,
) -> Result<f64, ParamError> {
    let f = from_ppb(v);
    let below = if open_min { f <= min } else { f < min };
    if below || f > max {
        let rel = if open_min { "<" } else { "<=" };
        Err(format!("{owner}: {name} {f} must be in {min} {rel} {name} <= {max}").into())
    } else {
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_travel_exactly() {
        for v in [0.002, 0.1, 0.125, 1.25, 7.0, 0.000_000_001, 0.3333] {
            assert_eq!(from_ppb(to_ppb(v)), v, "{v}");
        }
        assert_eq!(to_ppb(-1.0), 0);
    }
}
