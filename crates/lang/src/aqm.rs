//! The queue management of a flowset: `droptail`, `red`/`gred`, `codel`, `pie`.
//!
//! As in ipfw, the words after `codel` or `pie` are that AQM's parameters;
//! the first word that is not one ends them, and the flowset's options may
//! go on. Parameters left out take the current defaults (FreeBSD's
//! `net.inet.ip.dummynet.codel.*` / `pie.*` sysctls), which the caller passes
//! in as [`Settings`].

use dummynet_engine::config::{AqmConfig, CodelConfig, PieConfig, RedConfig, Settings};

use crate::error::{ErrorKind, ParseError};
use crate::lexer::{Cursor, Token};
use crate::units::{aqm_time, fraction, red_threshold, ValueError};

pub(crate) const CODEL_PARAMS: &[&str] = &["target", "interval", "ecn", "noecn"];
#[rustfmt::skip]
pub(crate) const PIE_PARAMS: &[&str] = &[
    "target", "tupdate", "max_burst", "max_ecnth", "alpha", "beta", "ecn", "noecn", "capdrop",
    "nocapdrop", "onoff", "dre", "ts", "derand", "noderand",
];

/// Parses the AQM whose keyword `t` was just consumed.
pub(crate) fn parse(
    cur: &mut Cursor<'_>,
    t: Token<'_>,
    defaults: &Settings,
) -> Result<AqmConfig, ParseError> {
    let kw = t.text.to_ascii_lowercase();
    match kw.as_str() {
        "red" => Ok(AqmConfig::Red(red(cur, "red")?)),
        "gred" => Ok(AqmConfig::Gred(red(cur, "gred")?)),
        "codel" => Ok(AqmConfig::Codel(codel(cur, defaults.codel_defaults())?)),
        "pie" => Ok(AqmConfig::Pie(pie(cur, defaults.pie_defaults())?)),
        _ => Ok(AqmConfig::DropTail),
    }
}

/// The parameter words of the AQM `aqm` names, for errors after it.
pub(crate) fn params_of(aqm: &str) -> &'static [&'static str] {
    match aqm {
        "codel" => CODEL_PARAMS,
        "pie" => PIE_PARAMS,
        _ => &[],
    }
}

/// `w_q/min_th/max_th/max_p`, each part's error pointing at that part.
fn red(cur: &mut Cursor<'_>, name: &str) -> Result<RedConfig, ParseError> {
    let form = "w_q/min_th/max_th/max_p such as 0.002/5/15/0.1";
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
    let [(o0, w_q), (o1, min_th), (o2, max_th), (o3, max_p)] = parts[..] else {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!(
                "expected four values {form} after `{name}`, found `{}` ({} value{})",
                t.text,
                parts.len(),
                if parts.len() == 1 { "" } else { "s" }
            ),
        ));
    };
    let at = |from: usize, e: ValueError| {
        let (kind, m) = match e {
            ValueError::Malformed(m) => (ErrorKind::Syntax, m),
            ValueError::OutOfRange(m) => (ErrorKind::Range, m),
        };
        let e = cur.error_in(t, from, kind, format!("{name}: {m}"));
        // Point at this part only, not the rest of the token.
        let len = t.text[from.min(t.text.len())..]
            .find('/')
            .unwrap_or(t.text.len() - from.min(t.text.len()));
        ParseError { len, ..e }
    };
    Ok(RedConfig {
        w_q: fraction(w_q, "w_q", (0.0, 1.0), true).map_err(|e| at(o0, e))?,
        min_th: red_threshold(min_th, "min_th").map_err(|e| at(o1, e))?,
        max_th: red_threshold(max_th, "max_th").map_err(|e| at(o2, e))?,
        max_p: fraction(max_p, "max_p", (0.0, 1.0), false).map_err(|e| at(o3, e))?,
        ecn: false,
    })
}

fn codel(cur: &mut Cursor<'_>, mut c: CodelConfig) -> Result<CodelConfig, ParseError> {
    while let Some(t) = cur.peek() {
        let kw = t.text.to_ascii_lowercase();
        match kw.as_str() {
            "target" | "interval" => {
                cur.bump();
                let v = time(cur, "codel", &kw)?;
                if kw == "target" {
                    c.target = v;
                } else {
                    c.interval = v;
                }
            }
            "ecn" | "noecn" => {
                cur.bump();
                c.ecn = kw == "ecn";
            }
            _ => break,
        }
    }
    Ok(c)
}

fn pie(cur: &mut Cursor<'_>, mut c: PieConfig) -> Result<PieConfig, ParseError> {
    while let Some(t) = cur.peek() {
        let kw = t.text.to_ascii_lowercase();
        if !PIE_PARAMS.contains(&kw.as_str()) {
            break;
        }
        cur.bump();
        match kw.as_str() {
            "target" => c.target = time(cur, "pie", &kw)?,
            "tupdate" => c.tupdate = time(cur, "pie", &kw)?,
            "max_burst" => c.max_burst = time(cur, "pie", &kw)?,
            "max_ecnth" => c.max_ecnth = number(cur, &kw, (0.0, 1.0))?,
            "alpha" => c.alpha = number(cur, &kw, (0.0, 7.0))?,
            "beta" => c.beta = number(cur, &kw, (0.0, 7.0))?,
            "ecn" | "noecn" => c.ecn = kw == "ecn",
            "capdrop" | "nocapdrop" => c.capdrop = kw == "capdrop",
            "onoff" => c.onoff = true,
            "dre" | "ts" => c.dre = kw == "dre",
            _ => c.derand = kw == "derand",
        }
    }
    Ok(c)
}

/// The time after `kw`; FreeBSD's ranges are checked when applied.
fn time(
    cur: &mut Cursor<'_>,
    aqm: &str,
    kw: &str,
) -> Result<dummynet_engine::time::Nanos, ParseError> {
    let t = cur.word(&format!("a time such as 5ms after `{aqm} ... {kw}`"))?;
    aqm_time(t.text, kw).map_err(|e| cur.value_error(t, e))
}

fn number(cur: &mut Cursor<'_>, kw: &str, range: (f64, f64)) -> Result<f64, ParseError> {
    let t = cur.word(&format!(
        "a number in {}..{} after `pie ... {kw}`",
        range.0, range.1
    ))?;
    fraction(t.text, kw, range, false).map_err(|e| cur.value_error(t, e))
}
