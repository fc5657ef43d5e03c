//! `pipe`, `queue` and `sched`: configuring, deleting and showing dummynet objects.
//!
//! The three share most options, as in FreeBSD: a pipe is a link plus an
//! implicit queue, a queue is a flowset, a scheduler drives a link. An option
//! given to the wrong object gets an error that names the right one.

use std::path::{Path, PathBuf};

use dummynet_engine::config::{
    AqmConfig, Command, FlowsetConfig, LinkConfig, PipeConfig, Profile, QueueConfig, SchedConfig,
    Settings, MAX_BUCKETS, MAX_LMAX, MAX_NUMBER, MAX_PRI, MAX_WEIGHT,
};
use dummynet_engine::dummynet::profile;
use dummynet_engine::flow::FlowMask;
use dummynet_engine::sched::{self, ParamKind, SchedType};

use crate::aqm;
use crate::error::{ErrorKind, ParseError};
use crate::lexer::{Cursor, Token};
use crate::units::{
    bandwidth, bytes, delay, field_mask, fraction, ipv4_mask, ipv6_mask, probability, queue_limit,
    ValueError,
};
use crate::{ShowRequest, Statement};

/// Where files named by a command (delay profiles) are looked up, and the
/// settings whose AQM defaults fill parameters a command leaves out.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Context<'p> {
    pub base_dir: Option<&'p Path>,
    /// `None`: FreeBSD's built-in defaults.
    pub settings: Option<&'p Settings>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Object {
    Pipe,
    Queue,
    Sched,
}

impl Object {
    fn name(self) -> &'static str {
        match self {
            Object::Pipe => "pipe",
            Object::Queue => "queue",
            Object::Sched => "sched",
        }
    }

    fn options(self) -> &'static [&'static str] {
        match self {
            Object::Pipe => PIPE_OPTIONS,
            Object::Queue => QUEUE_OPTIONS,
            Object::Sched => SCHED_OPTIONS,
        }
    }
}

const LINK_OPTIONS: &[&str] = &["bw", "bandwidth", "delay", "burst", "profile"];
#[rustfmt::skip]
const FLOWSET_OPTIONS: &[&str] = &[
    "queue", "plr", "mask", "buckets", "noerror", "droptail", "weight", "lmax", "pri", "priority",
    "red", "gred", "codel", "pie", "ecn",
];
#[rustfmt::skip]
const PIPE_OPTIONS: &[&str] = &[
    "bw", "bandwidth", "delay", "burst", "profile", "queue", "plr", "mask", "buckets", "noerror",
    "droptail", "weight", "lmax", "pri", "priority", "red", "gred", "codel", "pie", "ecn",
];
#[rustfmt::skip]
const QUEUE_OPTIONS: &[&str] = &[
    "pipe", "sched", "weight", "lmax", "pri", "priority", "queue", "plr", "mask", "buckets",
    "noerror", "droptail", "red", "gred", "codel", "pie", "ecn",
];
#[rustfmt::skip]
const SCHED_OPTIONS: &[&str] = &[
    "type", "mask", "bw", "bandwidth", "delay", "burst", "profile", "pipe",
];
#[rustfmt::skip]
const MASK_FIELDS: &[&str] = &[
    "all", "dst-ip", "src-ip", "dst-ip6", "src-ip6", "dst-port", "src-port", "proto", "flow-id",
];

/// FreeBSD's scheduler types, for telling "not built" from "misspelt".
#[rustfmt::skip]
const FREEBSD_SCHEDULERS: &[&str] = &[
    "fifo", "wf2q+", "wf2q", "rr", "drr", "qfq", "prio", "fq_codel", "fq_pie",
];
/// FreeBSD options this build does not implement.
const UNSUPPORTED: &[&str] = &["lmax", "maxlen", "pri", "priority", "link"];

/// Parses what follows `pipe`, `queue` or `sched`.
pub(crate) fn parse(
    cur: &mut Cursor<'_>,
    obj: Object,
    ctx: Context<'_>,
) -> Result<Statement, ParseError> {
    let what = obj.name();
    let number = if cur.peek_is_number() {
        Some(object_number(cur, obj)?)
    } else {
        None
    };
    let verbs: &[&str] = if number.is_some() {
        &["config", "delete", "show", "list"]
    } else {
        &["flush", "delete", "show", "list"]
    };
    if let (None, Some(t)) = (number, cur.peek().filter(|t| t.is("config"))) {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!("`{what} config` needs a number: `{what} N config ...`"),
        ));
    }
    let Some(verb) = cur.peek().filter(|t| verbs.iter().any(|v| t.is(v))) else {
        let expected = match number {
            Some(n) => format!("`config`, `delete` or `show` after `{what} {n}`"),
            None => format!("a {what} number, `flush`, `delete` or `show` after `{what}`"),
        };
        let mut candidates = verbs.to_vec();
        candidates.push("config");
        return Err(cur.expected(&expected, &candidates));
    };
    cur.bump();
    let verb = verb.text.to_ascii_lowercase();
    let statement = match (verb.as_str(), number) {
        ("config", Some(n)) => Statement::Apply(parse_config(cur, obj, n, ctx)?),
        ("flush", _) => Statement::Apply(Command::FlushDummynet),
        ("delete", first) => {
            let numbers = numbers_after(cur, obj, first)?;
            if numbers.is_empty() {
                return Err(cur.expected(&format!("the {what} numbers to delete"), &[]));
            }
            Statement::Apply(match obj {
                Object::Pipe => Command::DeletePipes(numbers),
                Object::Queue => Command::DeleteQueues(numbers),
                Object::Sched => Command::DeleteScheds(numbers),
            })
        }
        (_, first) => {
            let numbers = numbers_after(cur, obj, first)?;
            Statement::Show(match obj {
                Object::Pipe => ShowRequest::Pipes(numbers),
                Object::Queue => ShowRequest::Queues(numbers),
                Object::Sched => ShowRequest::Scheds(numbers),
            })
        }
    };
    cur.finish(&format!("`{what} {verb}`"))?;
    Ok(statement)
}

fn object_number(cur: &mut Cursor<'_>, obj: Object) -> Result<u32, ParseError> {
    Ok(cur.number(&format!("{} number", obj.name()), 1, u64::from(MAX_NUMBER))? as u32)
}

/// `pipe 1 delete`, `pipe delete 1 2 3`, `pipe 1 show 2`: the numbers given.
fn numbers_after(
    cur: &mut Cursor<'_>,
    obj: Object,
    first: Option<u32>,
) -> Result<Vec<u32>, ParseError> {
    let mut numbers: Vec<u32> = first.into_iter().collect();
    while !cur.at_end() {
        numbers.push(object_number(cur, obj)?);
    }
    Ok(numbers)
}

fn parse_config(
    cur: &mut Cursor<'_>,
    obj: Object,
    n: u32,
    ctx: Context<'_>,
) -> Result<Command, ParseError> {
    match obj {
        Object::Pipe => {
            let mut cfg = PipeConfig::default();
            let mut aq = AqmWords::new(ctx);
            while let Some(t) = cur.peek() {
                let after = aq.last.take();
                if !(link_option(cur, &mut cfg.link, ctx)?
                    || flowset_option(cur, &mut cfg.flowset, &mut aq)?)
                {
                    return Err(unknown_option(cur, t, obj, None, after));
                }
            }
            aq.finish(cur, &mut cfg.flowset)?;
            Ok(Command::ConfigPipe(n, cfg))
        }
        Object::Queue => {
            let mut cfg = QueueConfig::default();
            let mut aq = AqmWords::new(ctx);
            while let Some(t) = cur.peek() {
                let after = aq.last.take();
                if t.is("pipe") || t.is("sched") {
                    cur.bump();
                    cfg.sched = Some(object_number(cur, Object::Sched)?);
                } else if !flowset_option(cur, &mut cfg.flowset, &mut aq)? {
                    return Err(unknown_option(cur, t, obj, None, after));
                }
            }
            aq.finish(cur, &mut cfg.flowset)?;
            Ok(Command::ConfigQueue(n, cfg))
        }
        Object::Sched => parse_sched_config(cur, n, ctx).map(|cfg| Command::ConfigSched(n, cfg)),
    }
}

fn parse_sched_config(
    cur: &mut Cursor<'_>,
    n: u32,
    ctx: Context<'_>,
) -> Result<SchedConfig, ParseError> {
    let mut cfg = SchedConfig::default();
    let mut link: Option<LinkConfig> = None;
    let mut ty: Option<&'static SchedType> = None;
    while let Some(t) = cur.peek() {
        if t.is("type") {
            cur.bump();
            let found = sched_type(cur)?;
            cfg.kind = Some(found.name.to_string());
            ty = Some(found);
        } else if t.is("mask") {
            cur.bump();
            cfg.mask = parse_mask(cur)?;
        } else if t.is("pipe") {
            // FreeBSD's `sched N config pipe N` is accepted for its
            // documentation's sake; scheduler N can drive no other link.
            cur.bump();
            let at = cur.peek();
            let m = object_number(cur, Object::Pipe)?;
            if let Some(at) = at.filter(|_| m != n) {
                return Err(cur.error_at(
                    at,
                    ErrorKind::Syntax,
                    format!(
                        "scheduler {n} always drives link {n}: \
                         write `pipe {n}`, or configure `sched {m}`"
                    ),
                ));
            }
        } else if let Some(&(kw, range)) = ty
            .filter(|ty| ty.name == "fq_pie")
            .and_then(|_| FQ_PIE_FRACTIONS.iter().find(|(k, _)| t.is(k)))
        {
            // fq_pie takes PIE's fractions in thousandths (the fqpie sysctls'
            // unit); the command line writes them as decimals, as ipfw does.
            cur.bump();
            let v = value(
                cur,
                kw,
                &format!("a number in 0..{} such as 0.125", range.1),
                |s| fraction(s, kw, range, false),
            )?;
            cfg.params.retain(|(k, _)| k != kw);
            cfg.params
                .push((kw.to_string(), (v * 1000.0).round() as u64));
        } else if let Some(spec) =
            ty.and_then(|ty| ty.params.iter().find(|p| p.keywords().any(|k| t.is(k))))
        {
            let kw = t.text.to_ascii_lowercase();
            cur.bump();
            let value = match spec.kind {
                ParamKind::Count => {
                    cur.number(&format!("value for `{}`", spec.name), 0, u64::MAX)?
                }
                ParamKind::Time => value(cur, &kw, "a time such as 5ms", delay)?,
                ParamKind::Flag { .. } => u64::from(kw == spec.name),
            };
            // A repeated parameter: the last one counts, as in ipfw.
            cfg.params.retain(|(k, _)| k != spec.name);
            cfg.params.push((spec.name.to_string(), value));
        } else if LINK_OPTIONS.iter().any(|o| t.is(o)) {
            link_option(cur, link.get_or_insert_with(LinkConfig::default), ctx)?;
        } else {
            return Err(unknown_option(cur, t, Object::Sched, ty, None));
        }
    }
    cfg.link = link;
    if let Some(ty) = ty {
        fill_type_defaults(
            ty,
            &mut cfg.params,
            &ctx.settings.copied().unwrap_or_default(),
        );
    }
    Ok(cfg)
}

/// PIE's fractions on `type fq_pie`, with their ranges.
const FQ_PIE_FRACTIONS: &[(&str, (f64, f64))] = &[
    ("alpha", (0.0, 7.0)),
    ("beta", (0.0, 7.0)),
    ("max_ecnth", (0.0, 1.0)),
];

/// FQ-CoDel's and FQ-PIE's parameters left out take the current defaults
/// (`net.inet.ip.dummynet.fqcodel.*` / `fqpie.*`), as FreeBSD's kernel fills
/// them when the scheduler is configured. Only parameters the type declares
/// are filled (and fq_pie's fractions, in thousandths).
fn fill_type_defaults(ty: &SchedType, params: &mut Vec<(String, u64)>, s: &Settings) {
    let defaults: &[(&str, u64)] = match ty.name {
        "fq_codel" => &[
            ("target", s.fqcodel_target),
            ("interval", s.fqcodel_interval),
            ("quantum", u64::from(s.fqcodel_quantum)),
            ("limit", u64::from(s.fqcodel_limit)),
            ("flows", u64::from(s.fqcodel_flows)),
        ],
        "fq_pie" => &[
            ("target", s.fqpie_target),
            ("tupdate", s.fqpie_tupdate),
            ("max_burst", s.fqpie_max_burst),
            ("quantum", u64::from(s.fqpie_quantum)),
            ("limit", u64::from(s.fqpie_limit)),
            ("flows", u64::from(s.fqpie_flows)),
            ("alpha", u64::from(s.fqpie_alpha)),
            ("beta", u64::from(s.fqpie_beta)),
            ("max_ecnth", u64::from(s.fqpie_max_ecnth)),
        ],
        _ => &[],
    };
    for &(name, value) in defaults {
        // fq_pie's fractions are accepted (in thousandths) though not in its table.
        let declared = ty.params.iter().any(|p| p.name == name)
            || (ty.name == "fq_pie" && FQ_PIE_FRACTIONS.iter().any(|(k, _)| *k == name));
        if declared && !params.iter().any(|(k, _)| k == name) {
            params.push((name.to_string(), value));
        }
    }
}

fn sched_type(cur: &mut Cursor<'_>) -> Result<&'static SchedType, ParseError> {
    let available = sched::names();
    let t = cur.word(&format!(
        "a scheduler type ({}) after `type`",
        available.join(", ")
    ))?;
    if let Some(ty) = sched::lookup(t.text) {
        return Ok(ty);
    }
    if FREEBSD_SCHEDULERS.iter().any(|s| t.is(s)) {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!(
                "scheduler type `{}` is not available in this build (available: {})",
                t.text,
                available.join(", ")
            ),
        ));
    }
    Err(cur.expected_at(
        t,
        &format!("a scheduler type ({})", available.join(", ")),
        &available,
    ))
}

/// Applies a link option if one is next; false if the next word is not one.
fn link_option(
    cur: &mut Cursor<'_>,
    link: &mut LinkConfig,
    ctx: Context<'_>,
) -> Result<bool, ParseError> {
    let Some(t) = cur.peek() else {
        return Ok(false);
    };
    let kw = t.text.to_ascii_lowercase();
    if !LINK_OPTIONS.contains(&kw.as_str()) {
        return Ok(false);
    }
    cur.bump();
    match kw.as_str() {
        "bw" | "bandwidth" => link.bw = value(cur, &kw, "a bandwidth such as 10Mbit/s", bandwidth)?,
        "delay" => link.delay = value(cur, &kw, "a delay such as 10ms", delay)?,
        "burst" => link.burst = value(cur, &kw, "a size in bytes such as 64KB", bytes)?,
        _ => {
            let f = cur.word("a profile file name after `profile`")?;
            link.profile = Some(read_profile(cur, f, ctx)?);
        }
    }
    Ok(true)
}

/// What the AQM words of one `pipe`/`queue config` have said so far.
struct AqmWords<'a> {
    defaults: Settings,
    /// The flowset's own `ecn` (for RED/GRED), kept to point errors at it.
    ecn: Option<Token<'a>>,
    /// `codel` or `pie` if the option just parsed was one, so that an unknown
    /// word after it is reported as a bad parameter of that AQM.
    last: Option<&'static str>,
}

impl<'a> AqmWords<'a> {
    fn new(ctx: Context<'_>) -> Self {
        AqmWords {
            defaults: ctx.settings.copied().unwrap_or_default(),
            ecn: None,
            last: None,
        }
    }

    /// FreeBSD's flowset `ecn` flag is RED's: CoDel and PIE take `ecn`
    /// among their own parameters, after their name.
    fn finish(&self, cur: &Cursor<'_>, fs: &mut FlowsetConfig) -> Result<(), ParseError> {
        let Some(t) = self.ecn else {
            return Ok(());
        };
        match &mut fs.aqm {
            AqmConfig::Red(c) | AqmConfig::Gred(c) => {
                c.ecn = true;
                Ok(())
            }
            AqmConfig::Codel(_) | AqmConfig::Pie(_) => Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "this `ecn` is RED's flag; for codel or pie write it after the AQM \
                 (`codel ecn`, `pie ecn`)",
            )),
            AqmConfig::DropTail => Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "`ecn` needs an AQM that marks: `red`/`gred ... ecn`, `codel ecn` or `pie ecn`",
            )),
        }
    }
}

/// Applies a queue option if one is next; false if the next word is not one.
fn flowset_option<'a>(
    cur: &mut Cursor<'a>,
    fs: &mut FlowsetConfig,
    aq: &mut AqmWords<'a>,
) -> Result<bool, ParseError> {
    let Some(t) = cur.peek() else {
        return Ok(false);
    };
    let kw = t.text.to_ascii_lowercase();
    if !FLOWSET_OPTIONS.contains(&kw.as_str()) {
        return Ok(false);
    }
    cur.bump();
    match kw.as_str() {
        "queue" => {
            fs.limit = value(
                cur,
                &kw,
                "a queue size: slots (50) or bytes (200kb)",
                queue_limit,
            )?
        }
        "plr" => fs.plr = value(cur, &kw, "a loss probability such as 0.01", probability)?,
        "mask" => fs.mask = parse_mask(cur)?,
        "buckets" => fs.buckets = cur.number("bucket count", 1, u64::from(MAX_BUCKETS))? as u32,
        // 0 is a priority, for prio's queues; the engine refuses it elsewhere.
        "weight" => fs.weight = cur.number("weight", 0, u64::from(MAX_WEIGHT))? as u32,
        // FreeBSD's fs.par[1]: the engine checks it against the scheduler's
        // type (RR 64..2048, QFQ 1..2000); 0 is "not set".
        "lmax" => fs.lmax = cur.number("lmax in bytes", 0, u64::from(MAX_LMAX))? as u32,
        "pri" | "priority" => fs.pri = cur.number("pri", 0, u64::from(MAX_PRI))? as u32,
        "noerror" => fs.noerror = true,
        "ecn" => aq.ecn = Some(t),
        _ => {
            fs.aqm = aqm::parse(cur, t, &aq.defaults)?;
            aq.last = match fs.aqm {
                AqmConfig::Codel(_) => Some("codel"),
                AqmConfig::Pie(_) => Some("pie"),
                _ => None,
            };
        }
    }
    Ok(true)
}

/// Reads the value after option `kw` with `parse`, pointing any error at it.
fn value<T>(
    cur: &mut Cursor<'_>,
    kw: &str,
    what: &str,
    parse: impl Fn(&str) -> Result<T, ValueError>,
) -> Result<T, ParseError> {
    let t = cur.word(&format!("{what} after `{kw}`"))?;
    parse(t.text).map_err(|e| cur.value_error(t, e))
}

/// `mask` followed by one or more fields, or `all`.
fn parse_mask(cur: &mut Cursor<'_>) -> Result<FlowMask, ParseError> {
    let mut mask = FlowMask::default();
    let mut fields = 0;
    while let Some(t) = cur.peek() {
        let kw = t.text.to_ascii_lowercase();
        let kw = match kw.as_str() {
            "dst-ipv6" => "dst-ip6",
            "src-ipv6" => "src-ip6",
            k if MASK_FIELDS.contains(&k) => k,
            _ => break,
        };
        cur.bump();
        fields += 1;
        if kw == "all" {
            mask = FlowMask::ALL;
            continue;
        }
        let what = format!("a mask after `{kw}`");
        // Each field is at most 128 bits wide, so the narrowing casts below are exact.
        match kw {
            "dst-ip" => mask.dst_ip = value(cur, kw, &what, ipv4_mask)?,
            "src-ip" => mask.src_ip = value(cur, kw, &what, ipv4_mask)?,
            "dst-ip6" => mask.dst_ip6 = value(cur, kw, &what, ipv6_mask)?,
            "src-ip6" => mask.src_ip6 = value(cur, kw, &what, ipv6_mask)?,
            "dst-port" => mask.dst_port = value(cur, kw, &what, |s| field_mask(s, 16))? as u16,
            "src-port" => mask.src_port = value(cur, kw, &what, |s| field_mask(s, 16))? as u16,
            "proto" => mask.proto = value(cur, kw, &what, |s| field_mask(s, 8))? as u8,
            _ => mask.flow_id = value(cur, kw, &what, |s| field_mask(s, 20))? as u32,
        }
    }
    if fields == 0 {
        return Err(cur.expected(
            &format!("a mask field ({})", MASK_FIELDS.join(", ")),
            MASK_FIELDS,
        ));
    }
    Ok(mask)
}

/// The error for a word no option of `obj` accepts: "not available" for
/// FreeBSD features this build lacks, a pointer to the right object for an
/// option given to the wrong one, else "expected" with a suggestion.
fn unknown_option(
    cur: &Cursor<'_>,
    t: Token<'_>,
    obj: Object,
    ty: Option<&SchedType>,
    after_aqm: Option<&'static str>,
) -> ParseError {
    let kw = t.text.to_ascii_lowercase();
    let what = obj.name();
    if let Some(name) = after_aqm {
        let params = aqm::params_of(name);
        let mut candidates: Vec<&'static str> = params.to_vec();
        candidates.extend(obj.options().iter().copied());
        return cur.expected_at(
            t,
            &format!(
                "a {name} parameter ({}) or a {what} option",
                params.join(", ")
            ),
            &candidates,
        );
    }
    if FREEBSD_SCHEDULERS.contains(&kw.as_str()) && sched::lookup(&kw).is_none() {
        return cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!(
                "scheduler `{}` is not available in this build (available: {})",
                t.text,
                sched::names().join(", ")
            ),
        );
    }
    if UNSUPPORTED.contains(&kw.as_str()) {
        return cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!("`{}` is not supported by this build", t.text),
        );
    }
    let elsewhere = match obj {
        Object::Pipe if kw == "type" => Some("a scheduler option: use `sched N config type NAME`"),
        Object::Queue if LINK_OPTIONS.contains(&kw.as_str()) => {
            Some("a link option: set it with `pipe M config` or `sched M config`")
        }
        Object::Sched if FLOWSET_OPTIONS.contains(&kw.as_str()) => {
            Some("a queue option: set it with `pipe N config` or `queue N config`")
        }
        _ => None,
    };
    if let Some(hint) = elsewhere {
        return cur.error_at(t, ErrorKind::Syntax, format!("`{}` is {hint}", t.text));
    }
    let mut candidates: Vec<&str> = obj.options().to_vec();
    let expected = match ty {
        Some(ty) if !ty.params.is_empty() => {
            let words: Vec<&str> = ty.params.iter().flat_map(|p| p.keywords()).collect();
            candidates.extend(words.iter().copied());
            format!(
                "a {what} option or a `{}` parameter ({})",
                ty.name,
                words.join(", ")
            )
        }
        Some(ty) => format!("a {what} option (`{}` takes no parameters)", ty.name),
        None => format!("a {what} option"),
    };
    cur.expected_at(t, &expected, &candidates)
}

fn read_profile(cur: &Cursor<'_>, t: Token<'_>, ctx: Context<'_>) -> Result<Profile, ParseError> {
    let path = Path::new(t.text);
    let full: PathBuf = match ctx.base_dir {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    };
    let text = std::fs::read_to_string(&full).map_err(|e| {
        cur.error_at(
            t,
            ErrorKind::File,
            format!("cannot read profile `{}`: {e}", full.display()),
        )
    })?;
    profile::parse(&text).map_err(|e| {
        cur.error_at(
            t,
            ErrorKind::File,
            format!("profile `{}`: {e}", full.display()),
        )
    })
}
