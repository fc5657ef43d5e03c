//! Plug-in parameters, read from the engine's tables: the queue management
//! of a flowset (the AQMs of [`dummynet_engine::aqm::REGISTRY`]: `droptail`,
//! `red`/`gred w_q/min_th/max_th/max_p`, `codel ...`, `pie ...`) and the
//! value of one scheduler or AQM parameter.
//!
//! As in ipfw, the words after an AQM's name are its parameters; the first
//! word that is not one ends them, and the flowset's options may go on.
//! Parameters left out stay out: the engine fills them from the sysctls
//! when it applies the command, as FreeBSD's kernel does, and checks the
//! bounds that depend on more than one value.

use dummynet_engine::aqm::{self, AqmConfig, AqmType};
use dummynet_engine::params::{to_ppb, ParamKind, ParamSpec};

use crate::error::{ErrorKind, ParseError};
use crate::lexer::Cursor;
use crate::units::{aqm_time, fraction, red_threshold, ValueError};

/// Parses the parameters of the AQM `kind`, whose name was just consumed.
pub(crate) fn parse(cur: &mut Cursor<'_>, kind: &'static AqmType) -> Result<AqmConfig, ParseError> {
    let mut params = Vec::new();
    if !kind.positional.is_empty() {
        positional(cur, kind, &mut params)?;
    }
    while let Some(t) = cur.peek() {
        let Some(spec) = kind.params.iter().find(|p| p.keywords().any(|k| t.is(k))) else {
            break;
        };
        let kw = t.text.to_ascii_lowercase();
        cur.bump();
        let v = value(cur, spec, &kw, kind.name)?;
        set(&mut params, spec.name, v);
    }
    Ok(AqmConfig::new(kind, params))
}

/// The words that may follow the AQM `name`, for errors after it; `None`
/// if `name` is no AQM or takes no such words.
pub(crate) fn params_of(name: &str) -> Option<Vec<&'static str>> {
    let kind = aqm::lookup(name)?;
    let words: Vec<_> = kind.params.iter().flat_map(|p| p.keywords()).collect();
    (!words.is_empty()).then_some(words)
}

/// Sets parameter `name`; a repeated one: the last one counts, as in ipfw.
pub(crate) fn set(params: &mut Vec<(String, u64)>, name: &str, v: u64) {
    params.retain(|(k, _)| k != name);
    params.push((name.to_string(), v));
}

/// The value of parameter `spec` of `owner`, introduced by the word `kw`
/// just consumed (a flag's value is the word itself), in the unit of its
/// kind.
pub(crate) fn value(
    cur: &mut Cursor<'_>,
    spec: &ParamSpec,
    kw: &str,
    owner: &str,
) -> Result<u64, ParseError> {
    read(cur, spec, kw, &format!("after `{owner} ... {kw}`"))
}

/// The value of parameter `spec` (a flag's is the word `kw`), for an error
/// saying what was expected and where (`after `stall``).
pub(crate) fn read(
    cur: &mut Cursor<'_>,
    spec: &ParamSpec,
    kw: &str,
    after: &str,
) -> Result<u64, ParseError> {
    let what = |form: &str| format!("{form} {after}");
    match spec.kind {
        ParamKind::Flag { .. } => Ok(u64::from(kw == spec.name)),
        ParamKind::Count => cur.number(&what("a whole number"), 0, u64::MAX),
        kind => {
            let form = match kind {
                ParamKind::Time => "a time such as 5ms".to_string(),
                ParamKind::Size => "a whole number (K: x1024)".to_string(),
                ParamKind::Fraction { min, max, .. } => format!("a number in {min}..{max}"),
                _ => String::new(),
            };
            let t = cur.word(&what(&form))?;
            one(t.text, spec).map_err(|e| cur.value_error(t, e))
        }
    }
}

/// One written value of a parameter that takes one (not a flag).
fn one(s: &str, spec: &ParamSpec) -> Result<u64, ValueError> {
    match spec.kind {
        ParamKind::Time => aqm_time(s, spec.name),
        ParamKind::Size => red_threshold(s, spec.name),
        ParamKind::Fraction { min, max, open_min } => {
            fraction(s, spec.name, (min, max), open_min).map(to_ppb)
        }
        ParamKind::Count => s.parse().map_err(|_| {
            ValueError::Malformed(format!(
                "expected a whole number for `{}`, found `{s}`",
                spec.name
            ))
        }),
        ParamKind::Flag { .. } => Ok(1),
    }
}

/// The values written after the AQM's name joined by `/`
/// (`w_q/min_th/max_th/max_p`), each part's error pointing at that part.
fn positional(
    cur: &mut Cursor<'_>,
    kind: &'static AqmType,
    params: &mut Vec<(String, u64)>,
) -> Result<(), ParseError> {
    let name = kind.name;
    let specs = kind.positional;
    let form: Vec<&str> = specs.iter().map(|p| p.name).collect();
    let form = form.join("/");
    let t = cur.word(&format!("{form} after `{name}`"))?;
    let parts: Vec<(usize, &str)> = t
        .text
        .split('/')
        .scan(0usize, |at, p| {
            let start = *at;
            *at += p.len() + 1;
            Some((start, p))
        })
        .collect();
    if parts.len() != specs.len() {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!(
                "expected {} values {form} after `{name}`, found `{}` ({} value{})",
                specs.len(),
                t.text,
                parts.len(),
                if parts.len() == 1 { "" } else { "s" }
            ),
        ));
    }
    for (spec, &(from, part)) in specs.iter().zip(&parts) {
        let v = one(part, spec).map_err(|e| {
            let (kind, m) = (e.kind(), e.into_message());
            // Point at this part only, not the rest of the token.
            ParseError {
                len: part.len(),
                ..cur.error_in(t, from, kind, format!("{name}: {m}"))
            }
        })?;
        set(params, spec.name, v);
    }
    Ok(())
}
