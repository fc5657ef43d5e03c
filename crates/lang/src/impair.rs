//! netem's and mahimahi's impairments, as options of `pipe`, `queue` and
//! `sched`: `jitter`, `reorder`, `overhead`, `slot` and `trace` on the link;
//! `loss`, `duplicate` and `corrupt` on the flowset.
//!
//! netem's words are kept so that the options of a `tc qdisc ... netem`
//! line carry over: its positional values too (`delay 100ms 10ms 25%` is a
//! jitter of 10 ms with 25% correlation, `loss 1% 25%` a correlated loss,
//! `loss gemodel 1% 30%` a Gilbert–Elliott model). A positional value is
//! recognised by starting with a digit (or `.`, or `-` for a mistake worth
//! pointing at), which no option word does, so it can never swallow the
//! next option. One difference from tc is deliberate: a probability
//! without `%` is a fraction, as ipfw's `plr` is (`loss 0.01` is 1%), while
//! tc reads every probability as a percentage.
//!
//! A registered impairment ([`dummynet_engine::impair::REGISTRY`]) has no
//! parser here: [`registered`] reads its words from its table.
//!
//! Each parser here starts after its keyword and stops at the first word
//! that is not one of its own, as the AQM parsers do, so the object's other
//! options may follow.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dummynet_engine::config::{
    Correlated, Distribution, Jitter, LinkConfig, LossModel, Overhead, Reorder, Slot, Trace,
    TraceMode,
};
use dummynet_engine::impair::{dist, overhead, trace, ImpairType, Impairment, On, Staged};
use dummynet_engine::params::ParamError;
use dummynet_engine::rng::Probability;
use dummynet_engine::time::Nanos;

use crate::context::Context;
use crate::error::{suggest, ErrorKind, ParseError};
use crate::lexer::{Cursor, Tok, Token};
use crate::units::{self, ValueError};

const JITTER_PARAMS: &[&str] = &["correlation", "corr", "distribution", "unordered"];
const REORDER_PARAMS: &[&str] = &["correlation", "corr", "gap"];
const OVERHEAD_PARAMS: &[&str] = &["cellsize", "celloverhead"];
const SLOT_PARAMS: &[&str] = &["packets", "bytes"];
const TRACE_PARAMS: &[&str] = &["once", "loop"];
const CORRELATION: &[&str] = &["correlation", "corr"];

/// The distributions known by name; any other name is a `.dist` file.
const BUILTIN_DISTRIBUTIONS: &[&str] = &["uniform", "normal", "pareto", "paretonormal"];
/// Where tc installs its `.dist` tables (iproute2's `get_distribution`).
const TC_DIST_DIRS: &[&str] = &["/usr/lib/tc", "/usr/share/tc"];

/// The words that may follow option `name`, for an error about an unknown
/// word right after it; empty if `name` is not an impairment.
pub(crate) fn params_of(name: &str) -> &'static [&'static str] {
    match name {
        "jitter" => JITTER_PARAMS,
        "reorder" => REORDER_PARAMS,
        "overhead" => OVERHEAD_PARAMS,
        "slot" => SLOT_PARAMS,
        "trace" => TRACE_PARAMS,
        "loss" | "duplicate" | "corrupt" => CORRELATION,
        _ => &[],
    }
}

/// If `word` only makes sense after another option, how to write it there
/// (`gap` given on its own, or after `loss`).
pub(crate) fn misplaced(word: &str) -> Option<&'static str> {
    Some(match word {
        "correlation" | "corr" => {
            "follows the value it correlates: `jitter J correlation C`, \
             `reorder P correlation C`, `loss P correlation C`, `duplicate P correlation C` \
             or `corrupt P correlation C`"
        }
        "distribution" | "unordered" => {
            "belongs to `jitter`: `jitter J [correlation C] [distribution D] [unordered]` \
             (or `delay T J ...`)"
        }
        "gap" => "belongs to `reorder`: `reorder P [correlation C] [gap N]`",
        "cellsize" | "celloverhead" => {
            "belongs to `overhead`: `overhead N [cellsize C [celloverhead O]]`"
        }
        "packets" | "bytes" => "belongs to `slot`: `slot MIN [MAX] [packets N] [bytes B]`",
        "once" | "loop" => "belongs to `trace`: `trace FILE [once|loop]`",
        "gemodel" | "state" | "random" => {
            "is a loss model: `loss gemodel P [R [1-H [1-K]]]`, \
             `loss state P13 [P31 [P32 [P23 [P14]]]]` or `loss [random] P`"
        }
        _ => return None,
    })
}

/// True if the next token is a positional value rather than a word.
fn numeric_next(cur: &Cursor<'_>) -> bool {
    cur.peek().is_some_and(|t| {
        let s = t.text.strip_prefix('-').unwrap_or(t.text);
        t.kind == Tok::Word && s.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    })
}

/// A refused value, its message prefixed with the option it belongs to.
fn value_error(cur: &Cursor<'_>, t: Token<'_>, what: &str, e: ValueError) -> ParseError {
    cur.value_error(t, e.map_message(|m| format!("{what}: {m}")))
}

/// The probability after `what` (`loss`, `reorder`, `correlation`).
fn probability(cur: &mut Cursor<'_>, what: &str) -> Result<Probability, ParseError> {
    let t = cur.word(&format!("a probability such as 1% or 0.01 after `{what}`"))?;
    units::probability(t.text).map_err(|e| value_error(cur, t, what, e))
}

/// The time after `what` (`jitter`, `slot`).
fn time(cur: &mut Cursor<'_>, what: &str) -> Result<Nanos, ParseError> {
    let t = cur.word(&format!("a time such as 5ms after `{what}`"))?;
    units::time(t.text, what).map_err(|e| cur.value_error(t, e))
}

/// `correlation C` / `corr C`, if next: the correlation of the draws of an
/// option just read.
fn correlation(cur: &mut Cursor<'_>) -> Result<Option<Probability>, ParseError> {
    match cur.peek() {
        Some(t) if CORRELATION.iter().any(|c| t.is(c)) => {
            cur.bump();
            probability(cur, "correlation").map(Some)
        }
        _ => Ok(None),
    }
}

/// After `delay T`: netem's positional `J [C]` (jitter and its
/// correlation), then jitter's keywords, if a number follows.
pub(crate) fn positional_jitter(
    cur: &mut Cursor<'_>,
    ctx: Context<'_>,
) -> Result<Option<Jitter>, ParseError> {
    if !numeric_next(cur) {
        return Ok(None);
    }
    jitter(cur, ctx).map(Some)
}

/// `jitter J [C] [correlation C] [distribution D] [unordered]`, after `jitter`.
pub(crate) fn jitter(cur: &mut Cursor<'_>, ctx: Context<'_>) -> Result<Jitter, ParseError> {
    let mut j = Jitter {
        amount: time(cur, "jitter")?,
        correlation: Probability::ZERO,
        distribution: Distribution::Uniform,
        unordered: false,
    };
    if numeric_next(cur) {
        j.correlation = probability(cur, "correlation")?;
    }
    loop {
        if let Some(c) = correlation(cur)? {
            j.correlation = c;
        } else if cur.eat("distribution") {
            j.distribution = distribution(cur, ctx)?;
        } else if cur.eat("unordered") {
            j.unordered = true;
        } else {
            return Ok(j);
        }
    }
}

/// The name after `distribution`: a built-in shape, or a table in tc's
/// `.dist` format read from a file.
fn distribution(cur: &mut Cursor<'_>, ctx: Context<'_>) -> Result<Distribution, ParseError> {
    let t = cur.word(&format!(
        "a distribution ({}) or a .dist file after `distribution`",
        BUILTIN_DISTRIBUTIONS.join(", ")
    ))?;
    let name = t.text.to_ascii_lowercase();
    if name == "uniform" {
        return Ok(Distribution::Uniform);
    }
    if BUILTIN_DISTRIBUTIONS.contains(&name.as_str()) {
        return dist::builtin(&name)
            .map(Distribution::Table)
            .ok_or_else(|| {
                cur.error_at(
                    t,
                    ErrorKind::Unavailable,
                    format!(
                        "distribution `{}` is not available in this build; \
                     give a table in tc's .dist format instead",
                        t.text
                    ),
                )
            });
    }
    crate::files::check_allowed(cur, t, ctx, "distribution")?;
    let tried = dist_paths(ctx.base_dir, t.text);
    let Some(path) = tried.iter().find(|p| p.is_file()) else {
        let looked: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
        return Err(cur
            .error_at(
                t,
                ErrorKind::File,
                format!(
                    "distribution `{}` is neither built in ({}) nor a file \
                     (looked for {})",
                    t.text,
                    BUILTIN_DISTRIBUTIONS.join(", "),
                    looked.join(", ")
                ),
            )
            .with_suggestion(suggest(t.text, BUILTIN_DISTRIBUTIONS)));
    };
    let text = crate::files::read_named(cur, t, ctx, path, "distribution")?;
    // The name as typed, so that `show` prints what reads back.
    let table = dist::parse(t.text, &text).map_err(|e| {
        cur.error_at(
            t,
            ErrorKind::File,
            format!("distribution `{}`: {e}", path.display()),
        )
    })?;
    Ok(Distribution::Table(Arc::new(table)))
}

/// Where a distribution file named `name` may be: relative to the base
/// directory, then, for a bare name, where tc keeps its tables, so that
/// `distribution experimental` finds `/usr/lib/tc/experimental.dist` as tc
/// does.
fn dist_paths(base_dir: Option<&Path>, name: &str) -> Vec<PathBuf> {
    let mut paths = vec![resolve(base_dir, name)];
    if !name.contains('/') {
        let file = if name.ends_with(".dist") {
            name.to_string()
        } else {
            format!("{name}.dist")
        };
        paths.extend(TC_DIST_DIRS.iter().map(|d| Path::new(d).join(&file)));
    }
    paths
}

/// A file named by a command, relative to the base directory (the
/// commands file's directory, or the client's working directory).
pub(crate) fn resolve(base_dir: Option<&Path>, name: &str) -> PathBuf {
    let path = Path::new(name);
    match base_dir {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    }
}

/// `reorder P [C] [correlation C] [gap N]`, after `reorder`.
pub(crate) fn reorder(cur: &mut Cursor<'_>) -> Result<Reorder, ParseError> {
    let mut r = Reorder {
        p: Correlated::new(probability(cur, "reorder")?, Probability::ZERO),
        gap: 1,
    };
    if numeric_next(cur) {
        r.p.correlation = probability(cur, "correlation")?;
    }
    loop {
        if let Some(c) = correlation(cur)? {
            r.p.correlation = c;
        } else if cur.eat("gap") {
            // netem's gap counts packets; 1 is "no gap", 0 means nothing.
            r.gap = cur.number("reorder gap (packets)", 1, u64::from(u32::MAX))? as u32;
        } else {
            return Ok(r);
        }
    }
}

/// `overhead N [cellsize C [celloverhead O]]`, after `overhead` (token `kw`).
pub(crate) fn overhead(cur: &mut Cursor<'_>, kw: Token<'_>) -> Result<Overhead, ParseError> {
    fn signed<'a>(cur: &mut Cursor<'a>, what: &str) -> Result<(i32, Token<'a>), ParseError> {
        let t = cur.word(&format!(
            "a number of bytes such as 24 or -4 after `{what}`"
        ))?;
        // MAX_OVERHEAD bounds the value, so it fits in an i32.
        units::signed_in(t.text, what, i64::from(overhead::MAX_OVERHEAD))
            .map(|v| (v as i32, t))
            .map_err(|e| cur.value_error(t, e))
    }
    let mut o = Overhead {
        bytes: signed(cur, "overhead")?.0,
        ..Overhead::default()
    };
    loop {
        if cur.eat("cellsize") {
            o.cell_size = cur.number("cellsize in bytes", 1, u64::from(overhead::MAX_CELL))? as u32;
        } else if let Some(t) = cur.peek().filter(|t| t.is("celloverhead")) {
            if o.cell_size == 0 {
                return Err(cur.error_at(
                    t,
                    ErrorKind::Syntax,
                    "`celloverhead` needs a cell: write `cellsize C` before it",
                ));
            }
            cur.bump();
            let (v, vt) = signed(cur, "celloverhead")?;
            if i64::from(o.cell_size) + i64::from(v) <= 0 {
                return Err(cur.error_at(
                    vt,
                    ErrorKind::Range,
                    format!(
                        "celloverhead {v} leaves nothing of a {}-byte cell; \
                         it must be above -{}",
                        o.cell_size, o.cell_size
                    ),
                ));
            }
            o.cell_overhead = v;
        } else {
            break;
        }
    }
    // The checks above point at the culprit; this one keeps the parser
    // from accepting anything the engine would refuse.
    own_check(&o).map_err(|m| cur.error_at(kw, ErrorKind::Range, m))?;
    Ok(o)
}

/// `slot MIN [MAX] [packets N] [bytes B]`, after `slot` (token `kw`).
pub(crate) fn slot(cur: &mut Cursor<'_>, kw: Token<'_>) -> Result<Slot, ParseError> {
    let min_at = cur.peek();
    let min = time(cur, "slot")?;
    let mut s = Slot {
        min,
        max: min,
        packets: None,
        bytes: None,
    };
    if let Some(t) = cur.peek().filter(|_| numeric_next(cur)) {
        s.max = time(cur, "slot MAX")?;
        if s.max < s.min {
            return Err(cur.error_at(
                t,
                ErrorKind::Range,
                format!(
                    "slot MAX `{}` is below MIN `{}`; a slot opens between MIN and MAX \
                     after the last one",
                    t.text,
                    min_at.map_or("", |m| m.text)
                ),
            ));
        }
    }
    if let (0, Some(t)) = (s.max, min_at) {
        return Err(cur.error_at(
            t,
            ErrorKind::Range,
            "a slot needs a spacing above 0 (such as `slot 10ms` or `slot 5ms 15ms`)",
        ));
    }
    loop {
        if cur.eat("packets") {
            s.packets = Some(cur.number("slot packets", 1, u64::from(u32::MAX))? as u32);
        } else if cur.eat("bytes") {
            let t = cur.word("a size such as 1500 or 64KB after `bytes`")?;
            let b = units::bytes(t.text).map_err(|e| value_error(cur, t, "slot bytes", e))?;
            if b == 0 {
                return Err(cur.error_at(t, ErrorKind::Range, "slot bytes must be at least 1"));
            }
            s.bytes = Some(b);
        } else {
            break;
        }
    }
    own_check(&s).map_err(|m| cur.error_at(kw, ErrorKind::Range, m))?;
    Ok(s)
}

/// `trace FILE [once|loop]`, after `trace`: mahimahi's delivery
/// opportunities, read from FILE relative to the base directory.
pub(crate) fn trace(cur: &mut Cursor<'_>, ctx: Context<'_>) -> Result<Arc<Trace>, ParseError> {
    let f = cur.word("a trace file name after `trace`")?;
    let mode = if cur.eat("once") {
        TraceMode::Once
    } else {
        cur.eat("loop");
        TraceMode::Loop
    };
    let path = resolve(ctx.base_dir, f.text);
    let text = crate::files::read_named(cur, f, ctx, &path, "trace")?;
    trace::parse(f.text, &text, mode)
        .map(Arc::new)
        .map_err(|e| {
            cur.error_at(
                f,
                ErrorKind::File,
                format!("trace `{}`: {e}", path.display()),
            )
        })
}

/// `1 − p`, for tc's defaults that complement a given probability.
fn complement(p: Probability) -> Probability {
    Probability::new(1.0 - p.as_f64()).unwrap_or(Probability::ZERO)
}

/// `loss [random] P [C] [correlation C]`, `loss gemodel P [R [1-H [1-K]]]`
/// or `loss state P13 [P31 [P32 [P23 [P14]]]]`, after `loss`. What the
/// models leave out takes tc's defaults.
pub(crate) fn loss(cur: &mut Cursor<'_>) -> Result<LossModel, ParseError> {
    if cur.eat("gemodel") {
        let p = probability(cur, "loss gemodel")?;
        let mut rest = [complement(p), Probability::ONE, Probability::ZERO];
        positional(cur, "loss gemodel", "P R 1-H 1-K", &mut rest)?;
        let [r, loss_bad, loss_good] = rest;
        return Ok(LossModel::GilbertElliott {
            p,
            r,
            loss_bad,
            loss_good,
        });
    }
    if cur.eat("state") {
        let p13 = probability(cur, "loss state")?;
        let mut rest = [
            complement(p13),
            Probability::ZERO,
            Probability::ONE,
            Probability::ZERO,
        ];
        positional(cur, "loss state", "P13 P31 P32 P23 P14", &mut rest)?;
        let [p31, p32, p23, p14] = rest;
        return Ok(LossModel::FourState {
            p13,
            p31,
            p32,
            p23,
            p14,
        });
    }
    if cur.peek_word().is_some() && !numeric_next(cur) && !cur.peek_is("random") {
        return Err(cur.expected(
            "a probability such as 1% or 0.01, or a loss model (gemodel, state, random), \
             after `loss`",
            &["gemodel", "state", "random"],
        ));
    }
    let what = if cur.eat("random") {
        "loss random"
    } else {
        "loss"
    };
    correlated(cur, what).map(LossModel::Random)
}

/// The optional probabilities of a loss model, in order, as many as are
/// given; one more than the model takes is an error at that value.
fn positional(
    cur: &mut Cursor<'_>,
    model: &str,
    form: &str,
    values: &mut [Probability],
) -> Result<(), ParseError> {
    for v in values.iter_mut() {
        if !numeric_next(cur) {
            return Ok(());
        }
        *v = probability(cur, model)?;
    }
    match cur.peek().filter(|_| numeric_next(cur)) {
        Some(t) => Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!(
                "`{model}` takes at most {} probabilities ({form}), found another: `{}`",
                values.len() + 1,
                t.text
            ),
        )),
        None => Ok(()),
    }
}

/// `P [C] [correlation C]` after `what` (`duplicate`, `corrupt`, `loss`).
pub(crate) fn correlated(cur: &mut Cursor<'_>, what: &str) -> Result<Correlated, ParseError> {
    let mut c = Correlated::new(probability(cur, what)?, Probability::ZERO);
    if numeric_next(cur) {
        c.correlation = probability(cur, "correlation")?;
    }
    while let Some(v) = correlation(cur)? {
        c.correlation = v;
    }
    Ok(c)
}

/// The checks an impairment makes of itself alone (on a plain link), so an
/// out-of-range value is pointed at in the command; the engine makes them
/// again, with the rest of the pipe, when it applies it.
fn own_check(i: &dyn Impairment) -> Result<(), String> {
    i.check(On::Link(&LinkConfig::default()))
        .map_err(|e| e.to_string())
}

/// The words of the registered impairment `kind`, whose name `at` was just
/// consumed: its positional values in order, then its keyword parameters,
/// each read as its table declares it; `kind` itself checks the values.
pub(crate) fn registered(
    cur: &mut Cursor<'_>,
    at: Token<'_>,
    kind: &'static ImpairType,
) -> Result<Staged, ParseError> {
    let mut params = Vec::new();
    for spec in kind.positional {
        let v = crate::aqm::read(cur, spec, spec.name, &format!("after `{}`", kind.name))?;
        crate::aqm::set(&mut params, spec.name, v);
    }
    while let Some(t) = cur.peek() {
        let Some(spec) = kind.params.iter().find(|p| p.keywords().any(|k| t.is(k))) else {
            break;
        };
        let kw = t.text.to_ascii_lowercase();
        cur.bump();
        let v = crate::aqm::value(cur, spec, &kw, kind.name)?;
        crate::aqm::set(&mut params, spec.name, v);
    }
    Staged::new(kind, params).map_err(|e| {
        let ek = match e {
            ParamError::OutOfRange(_) => ErrorKind::Range,
            ParamError::Refused(_) => ErrorKind::Syntax,
        };
        cur.error_at(at, ek, e.to_string())
    })
}
