//! `pipe`, `queue` and `sched`: configuring, deleting and showing dummynet objects.
//!
//! The three share most options, as in FreeBSD: a pipe is a link plus an
//! implicit queue, a queue is a flowset, a scheduler drives a link. An option
//! given to the wrong object gets an error that names the right one.
//!
//! `modify` takes the same options as `config` and names the option groups
//! it was given ([`Fields`]), so the engine changes only those; the parsing
//! is shared, one place per option group.

use dummynet_engine::aqm::AqmType;
use dummynet_engine::config::{
    Command, Corrupt, Duplicate, Field, Fields, FlowsetConfig, LinkConfig, PipeConfig, PipeSched,
    Profile, QueueConfig, SchedConfig, MAX_BUCKETS, MAX_LMAX, MAX_NUMBER, MAX_PRI, MAX_WEIGHT,
};
use dummynet_engine::flow::FlowMask;
use dummynet_engine::impair::staged::{self, ImpairType, Staged};
use dummynet_engine::impair::{Stage, REGISTRY as REGISTERED};
use dummynet_engine::pipes::profile;
use dummynet_engine::sched::{self, ParamSpec, SchedType};

use crate::aqm;
use crate::context::Context;
use crate::error::{ErrorKind, ParseError};
use crate::impair;
use crate::lexer::{Cursor, Token};
use crate::units::{
    bandwidth, bytes, delay, field_mask, ipv4_mask, ipv6_mask, probability, queue_limit, ValueError,
};
use crate::{ShowRequest, Statement};

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

    /// Every option word of the object, the AQMs' names included.
    fn options(self) -> Vec<&'static str> {
        let (words, aqms) = match self {
            Object::Pipe => (PIPE_OPTIONS, true),
            Object::Queue => (QUEUE_OPTIONS, true),
            Object::Sched => (SCHED_OPTIONS, false),
        };
        let mut all = words.to_vec();
        if aqms {
            all.extend(dummynet_engine::aqm::names());
        }
        let stages = |k: &&&ImpairType| match self {
            Object::Pipe => true,
            Object::Queue => k.stage == Stage::Entry,
            Object::Sched => k.stage != Stage::Entry,
        };
        all.extend(REGISTERED.iter().filter(stages).map(|k| k.name));
        all
    }
}

/// Link options, the link's impairments included.
#[rustfmt::skip]
const LINK_OPTIONS: &[&str] = &[
    "bw", "bandwidth", "delay", "burst", "profile", "jitter", "reorder", "overhead", "slot",
    "trace", "rate", "seed",
];
/// Flowset options, the flowset's impairments included; the name of any
/// registered AQM ([`dummynet_engine::aqm::REGISTRY`]) is one too.
#[rustfmt::skip]
const FLOWSET_OPTIONS: &[&str] = &[
    "queue", "plr", "mask", "buckets", "hash_size", "noerror", "weight", "lmax", "pri", "priority", "ecn",
    "loss", "duplicate", "corrupt", "limit",
];
#[rustfmt::skip]
const PIPE_OPTIONS: &[&str] = &[
    "bw", "bandwidth", "delay", "burst", "profile", "jitter", "reorder", "overhead", "slot",
    "trace", "queue", "plr", "mask", "buckets", "hash_size", "noerror", "weight", "lmax", "pri", "priority",
    "ecn", "loss", "duplicate", "corrupt", "rate", "limit", "seed",
];
#[rustfmt::skip]
const QUEUE_OPTIONS: &[&str] = &[
    "pipe", "sched", "weight", "lmax", "pri", "priority", "queue", "plr", "mask", "buckets", "hash_size",
    "noerror", "ecn", "loss", "duplicate", "corrupt", "limit",
];
#[rustfmt::skip]
const SCHED_OPTIONS: &[&str] = &[
    "type", "mask", "bw", "bandwidth", "delay", "burst", "profile", "jitter", "reorder",
    "overhead", "slot", "trace", "pipe", "rate", "seed",
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
        &["config", "modify", "delete", "show", "list"]
    } else {
        &["flush", "delete", "show", "list"]
    };
    if let (None, Some(t)) = (
        number,
        cur.peek().filter(|t| t.is("config") || t.is("modify")),
    ) {
        let verb = t.text.to_ascii_lowercase();
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!("`{what} {verb}` needs a number: `{what} N {verb} ...`"),
        ));
    }
    let Some(verb) = cur.peek().filter(|t| verbs.iter().any(|v| t.is(v))) else {
        let expected = match number {
            Some(n) => format!("`config`, `modify`, `delete` or `show` after `{what} {n}`"),
            None => format!("a {what} number, `flush`, `delete` or `show` after `{what}`"),
        };
        let mut candidates = verbs.to_vec();
        candidates.extend(["config", "modify"]);
        return Err(cur.expected(&expected, &candidates));
    };
    cur.bump();
    let verb = verb.text.to_ascii_lowercase();
    let statement = match (verb.as_str(), number) {
        ("config", Some(n)) => Statement::Apply(parse_config(cur, obj, n, ctx, false)?),
        ("modify", Some(n)) => Statement::Apply(parse_config(cur, obj, n, ctx, true)?),
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

/// A flowset's `weight`: 1..100 as FreeBSD takes it for every scheduler,
/// and 0, the best priority, which only a prio scheduler's queues may have
/// (the engine checks that, when the queue meets its scheduler). The
/// message names both, so `weight 0` on its own is not read as the floor.
fn weight(cur: &mut Cursor<'_>) -> Result<u32, ParseError> {
    let t = cur.word(&format!(
        "a weight (1..{MAX_WEIGHT}, or 0 for a prio scheduler's best priority)"
    ))?;
    // Digits only: `parse` alone would also take a `+`.
    let digits = !t.text.is_empty() && t.text.bytes().all(|b| b.is_ascii_digit());
    match t.text.parse::<u32>() {
        Ok(w) if digits && w <= MAX_WEIGHT => Ok(w),
        _ if digits => Err(cur.error_at(
            t,
            ErrorKind::Range,
            format!(
                "weight must be in 1..{MAX_WEIGHT} (0 only for a prio scheduler's queues, \
                 its best priority), found `{}`",
                t.text
            ),
        )),
        _ => Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!(
                "expected a weight (1..{MAX_WEIGHT}, or 0 for a prio scheduler's best \
                 priority), found `{}`",
                t.text
            ),
        )),
    }
}

/// `config` (every option not given takes its default) or, with `modify`,
/// the options given and the [`Fields`] naming them.
fn parse_config(
    cur: &mut Cursor<'_>,
    obj: Object,
    n: u32,
    ctx: Context<'_>,
    modify: bool,
) -> Result<Command, ParseError> {
    let mut w = Words::new();
    let cmd = match obj {
        Object::Pipe => {
            let mut cfg = PipeConfig::default();
            // `type T [params]`: scheduler N's type, as FreeBSD takes it on
            // a pipe. Its parameters come before the flowset's options of
            // the same name (fq_codel's `ecn` is the scheduler's).
            let mut ty: Option<&'static SchedType> = None;
            while let Some(t) = cur.peek() {
                let after = w.last.take();
                if t.is("type") {
                    cur.bump();
                    let found = sched_type(cur)?;
                    ty = Some(found);
                    cfg.sched = Some(PipeSched {
                        kind: found.name.to_string(),
                        params: Vec::new(),
                    });
                    w.fields.insert(Field::Type);
                } else if let (Some(spec), Some(sc)) =
                    (param_spec(ty, false, t), cfg.sched.as_mut())
                {
                    let kw = t.text.to_ascii_lowercase();
                    cur.bump();
                    let owner = ty.map_or("sched", |ty| ty.name);
                    let v = aqm::value(cur, spec, &kw, owner)?;
                    aqm::set(&mut sc.params, spec.name, v);
                    w.fields.insert(Field::Params);
                } else if !(link_option(cur, &mut cfg.link, ctx, &mut w)?
                    || flowset_option(cur, &mut cfg.flowset, &mut w)?)
                {
                    let params = ty.map_or(TypeParams::None, TypeParams::Of);
                    return Err(unknown_option(cur, t, obj, params, after));
                }
            }
            w.finish(cur, &mut cfg.flowset)?;
            if modify {
                Command::ModifyPipe(n, cfg, w.fields)
            } else {
                w.check_reorder(cur, &cfg.link)?;
                Command::ConfigPipe(n, cfg)
            }
        }
        Object::Queue => {
            let mut cfg = QueueConfig::default();
            while let Some(t) = cur.peek() {
                let after = w.last.take();
                if t.is("pipe") || t.is("sched") {
                    cur.bump();
                    cfg.sched = Some(object_number(cur, Object::Sched)?);
                    w.fields.insert(Field::Sched);
                } else if !flowset_option(cur, &mut cfg.flowset, &mut w)? {
                    return Err(unknown_option(cur, t, obj, TypeParams::None, after));
                }
            }
            w.finish(cur, &mut cfg.flowset)?;
            if modify {
                Command::ModifyQueue(n, cfg, w.fields)
            } else {
                Command::ConfigQueue(n, cfg)
            }
        }
        Object::Sched => {
            let cfg = parse_sched_config(cur, n, ctx, &mut w, modify)?;
            if modify {
                Command::ModifySched(n, cfg, w.fields)
            } else {
                Command::ConfigSched(n, cfg)
            }
        }
    };
    if modify && w.fields.is_empty() {
        let what = obj.name();
        return Err(cur.expected(
            &format!("an option to change after `{what} {n} modify`"),
            &obj.options(),
        ));
    }
    Ok(cmd)
}

/// `sched N config|modify [type T] [mask ...] [link options] [type
/// parameters]`. A `modify` without `type` cannot know the scheduler's
/// type, so it takes the parameters of every registered type; the engine
/// checks them against the actual type when the command is applied, and
/// fills the parameters left out from the sysctls (a `modify` that names
/// the type sets its parameters afresh, as `config` does).
fn parse_sched_config<'a>(
    cur: &mut Cursor<'a>,
    n: u32,
    ctx: Context<'_>,
    w: &mut Words<'a>,
    modify: bool,
) -> Result<SchedConfig, ParseError> {
    let mut cfg = SchedConfig::default();
    let mut link: Option<LinkConfig> = None;
    let mut ty: Option<&'static SchedType> = None;
    while let Some(t) = cur.peek() {
        let after = w.last.take();
        // Without a type, a `modify` reads any type's parameters.
        let any_type = modify && ty.is_none();
        if t.is("type") {
            cur.bump();
            let found = sched_type(cur)?;
            cfg.kind = Some(found.name.to_string());
            ty = Some(found);
            w.fields.insert(Field::Type);
        } else if t.is("mask") {
            cur.bump();
            cfg.mask = parse_mask(cur)?;
            w.fields.insert(Field::Mask);
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
        } else if let Some(spec) = param_spec(ty, any_type, t) {
            let kw = t.text.to_ascii_lowercase();
            cur.bump();
            let owner = ty.map_or("sched", |ty| ty.name);
            let v = aqm::value(cur, spec, &kw, owner)?;
            aqm::set(&mut cfg.params, spec.name, v);
            w.fields.insert(Field::Params);
        } else if LINK_OPTIONS.iter().any(|o| t.is(o)) || registered(t, true).is_some() {
            link_option(cur, link.get_or_insert_with(LinkConfig::default), ctx, w)?;
        } else {
            let params = match ty {
                Some(ty) => TypeParams::Of(ty),
                None if any_type => TypeParams::Any,
                None => TypeParams::None,
            };
            return Err(unknown_option(cur, t, Object::Sched, params, after));
        }
    }
    if let (Some(link), false) = (&link, modify) {
        w.check_reorder(cur, link)?;
    }
    cfg.link = link;
    Ok(cfg)
}

/// The scheduler parameter `t` names: of type `ty`, or with `any_type`
/// of any registered type.
fn param_spec(
    ty: Option<&'static SchedType>,
    any_type: bool,
    t: Token<'_>,
) -> Option<&'static ParamSpec> {
    let matches = |p: &&ParamSpec| p.keywords().any(|k| t.is(k));
    match ty {
        Some(ty) => ty.params.iter().find(matches),
        None if any_type => sched::REGISTRY
            .iter()
            .flat_map(|ty| ty.params.iter())
            .find(matches),
        None => None,
    }
}

/// Which scheduler parameters an error about an unknown word may suggest.
#[derive(Clone, Copy)]
enum TypeParams {
    None,
    Of(&'static SchedType),
    /// `modify` without `type`: every type's.
    Any,
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

/// The registered impairment `t` names that is set on a link (`link`) or a
/// flowset.
fn registered(t: Token<'_>, link: bool) -> Option<&'static ImpairType> {
    dummynet_engine::impair::lookup(t.text).filter(|k| (k.stage != Stage::Entry) == link)
}

/// Sets (or with `off` takes off) the registered impairment `kind`, whose
/// name `t` is next, in `list`.
fn registered_option<'a>(
    cur: &mut Cursor<'a>,
    t: Token<'a>,
    kind: &'static ImpairType,
    list: &mut Vec<Staged>,
    w: &mut Words<'a>,
) -> Result<bool, ParseError> {
    cur.bump();
    if cur.eat("off") {
        staged::remove(list, kind);
    } else {
        staged::put(list, impair::registered(cur, t, kind)?);
    }
    w.fields.insert_staged(staged::index(kind));
    Ok(true)
}

/// Applies a link option if one is next; false if the next word is not one.
fn link_option<'a>(
    cur: &mut Cursor<'a>,
    link: &mut LinkConfig,
    ctx: Context<'_>,
    w: &mut Words<'a>,
) -> Result<bool, ParseError> {
    let Some(t) = cur.peek() else {
        return Ok(false);
    };
    if let Some(kind) = registered(t, true) {
        return registered_option(cur, t, kind, &mut link.staged, w);
    }
    let kw = t.text.to_ascii_lowercase();
    if !LINK_OPTIONS.contains(&kw.as_str()) {
        return Ok(false);
    }
    // A traced link's rate is its trace: the engine would take one and
    // drop the other, so both in one command is a mistake worth naming.
    let other = match kw.as_str() {
        "bw" | "bandwidth" | "rate" => w.trace,
        "trace" => w.bw,
        _ => None,
    };
    if other.is_some() {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            "`bw` and `trace` exclude each other: a traced link's rate is its trace",
        ));
    }
    cur.bump();
    // `OPTION off` removes an impairment (or a profile): with `modify`, the
    // way to turn one off while keeping the rest of the pipe.
    // Other options read `off` as their value, and say what they expected.
    if cur.peek_is("off") {
        if let Some(field) = clear_link_option(link, &kw) {
            cur.bump();
            w.fields.insert(field);
            return Ok(true);
        }
    }
    let field = match kw.as_str() {
        "bw" | "bandwidth" => {
            let given = cur.peek();
            link.bw = value(cur, &kw, "a bandwidth such as 10Mbit/s", bandwidth)?;
            // ipfw reads a bare number as bit/s: `bw 10` is a link too slow
            // for one packet a second, seldom what was meant.
            if let Some(g) = given.filter(|g| g.text.bytes().all(|b| b.is_ascii_digit())) {
                if (1..1000).contains(&link.bw) {
                    cur.note(format!(
                        "`{kw} {0}` is {0} bit/s (a bare number is bit/s, as in ipfw); \
                         write a unit for more, such as {0}Mbit/s",
                        g.text
                    ));
                }
            }
            if let Some(note) = given.and_then(|g| crate::netem_words::byte_rate_note(g.text)) {
                cur.note(note);
            }
            w.bw = Some(t);
            Field::Bw
        }
        "rate" => {
            link.bw = value(cur, &kw, "a rate such as 10mbit", crate::netem_words::rate)?;
            w.bw = Some(t);
            Field::Bw
        }
        "delay" => {
            let given = cur.peek();
            link.delay = value(cur, &kw, "a delay such as 10ms", delay)?;
            crate::netem_words::unit_apart(cur, given)?;
            // netem's `delay T J [C]`: a jitter without its keyword.
            if let Some(j) = impair::positional_jitter(cur, ctx)? {
                link.jitter = Some(j);
                w.fields.insert(Field::Jitter);
                w.last = Some("jitter");
            }
            Field::Delay
        }
        "burst" => {
            link.burst = value(cur, &kw, "a size in bytes such as 64KB", bytes)?;
            Field::Burst
        }
        "profile" => {
            let f = cur.word("a profile file name after `profile`")?;
            link.profile = Some(read_profile(cur, f, ctx)?);
            Field::Profile
        }
        "jitter" => {
            link.jitter = Some(impair::jitter(cur, ctx)?);
            w.last = Some("jitter");
            Field::Jitter
        }
        "reorder" => {
            link.reorder = Some(impair::reorder(cur)?);
            w.reorder = Some(t);
            w.last = Some("reorder");
            Field::Reorder
        }
        "overhead" => {
            link.overhead = Some(impair::overhead(cur, t)?);
            w.last = Some("overhead");
            Field::Overhead
        }
        "slot" => {
            link.slot = Some(impair::slot(cur, t)?);
            w.last = Some("slot");
            Field::Slot
        }
        "seed" => {
            let v = cur.number("seed for the pipe's random draws", 0, u64::MAX)?;
            link.seed = Some(dummynet_engine::impair::seed::Seed(v));
            Field::Seed
        }
        _ => {
            link.trace = Some(impair::trace(cur, ctx)?);
            w.trace = Some(t);
            w.last = Some("trace");
            Field::Trace
        }
    };
    w.fields.insert(field);
    Ok(true)
}

/// Removes the link option `kw` (`jitter off`); `None` if it is not one
/// that can be off rather than a value.
fn clear_link_option(link: &mut LinkConfig, kw: &str) -> Option<Field> {
    Some(match kw {
        "profile" => {
            link.profile = None;
            Field::Profile
        }
        "jitter" => {
            link.jitter = None;
            Field::Jitter
        }
        "reorder" => {
            link.reorder = None;
            Field::Reorder
        }
        "overhead" => {
            link.overhead = None;
            Field::Overhead
        }
        "slot" => {
            link.slot = None;
            Field::Slot
        }
        "trace" => {
            link.trace = None;
            Field::Trace
        }
        _ => return None,
    })
}

/// What the options of one `config` or `modify` have said so far, for the
/// checks that involve more than one option and for `modify`'s [`Fields`].
struct Words<'a> {
    /// The flowset's own `ecn` (for RED/GRED), kept to point errors at it.
    ecn: Option<Token<'a>>,
    /// `codel`, `pie` or an impairment if the option just parsed was one,
    /// so that an unknown word after it is reported as a bad parameter of it.
    last: Option<&'static str>,
    /// `bw` and `trace`, which exclude each other.
    bw: Option<Token<'a>>,
    trace: Option<Token<'a>>,
    /// `reorder`, which needs a delay to reorder against.
    reorder: Option<Token<'a>>,
    /// The option groups given.
    fields: Fields,
}

impl<'a> Words<'a> {
    fn new() -> Self {
        Words {
            ecn: None,
            last: None,
            bw: None,
            trace: None,
            reorder: None,
            fields: Fields::default(),
        }
    }

    /// FreeBSD's flowset `ecn` flag is RED's ([`AqmType::flowset_ecn`]):
    /// CoDel and PIE take `ecn` among their own parameters, after their name.
    fn finish(&self, cur: &Cursor<'_>, fs: &mut FlowsetConfig) -> Result<(), ParseError> {
        let Some(t) = self.ecn else {
            return Ok(());
        };
        let kind = fs.aqm.kind;
        if kind.flowset_ecn {
            aqm::set(&mut fs.aqm.params, "ecn", 1);
            return Ok(());
        }
        let flag_of = |ty: &AqmType| ty.flowset_ecn;
        let param_of = |ty: &AqmType| ty.params.iter().any(|p| p.name == "ecn");
        let by_flag: Vec<_> = dummynet_engine::aqm::REGISTRY
            .iter()
            .filter(|ty| flag_of(ty))
            .map(|ty| ty.name)
            .collect();
        let by_flag = format!("`{} ... ecn`", by_flag.join("`/`"));
        let message = if param_of(kind) {
            format!(
                "this `ecn` is the flowset's flag, for {by_flag}; for {} write it \
                 after the AQM (`{} ecn`)",
                kind.name, kind.name
            )
        } else {
            let by_param: Vec<_> = dummynet_engine::aqm::REGISTRY
                .iter()
                .filter(|ty| param_of(ty))
                .map(|ty| format!("`{} ecn`", ty.name))
                .collect();
            format!(
                "`ecn` needs an AQM that marks: {by_flag} or {}",
                by_param.join(" or ")
            )
        };
        Err(cur.error_at(t, ErrorKind::Syntax, message))
    }

    /// A `config` with `reorder` and no delay: reordering lets packets
    /// skip the delay, so without one it could change nothing (the engine
    /// refuses it too). Not checked for `modify`, whose pipe may already
    /// have a delay.
    fn check_reorder(&self, cur: &Cursor<'_>, link: &LinkConfig) -> Result<(), ParseError> {
        match self.reorder {
            Some(t) if link.delay == 0 && link.jitter.is_none() => Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "`reorder` needs a `delay`: reordered packets skip the delay to overtake \
                 delayed ones (add `delay T`)",
            )),
            _ => Ok(()),
        }
    }
}

/// Applies a queue option if one is next; false if the next word is not one.
fn flowset_option<'a>(
    cur: &mut Cursor<'a>,
    fs: &mut FlowsetConfig,
    w: &mut Words<'a>,
) -> Result<bool, ParseError> {
    let Some(t) = cur.peek() else {
        return Ok(false);
    };
    let kw = t.text.to_ascii_lowercase();
    if let Some(kind) = dummynet_engine::aqm::lookup(&kw) {
        cur.bump();
        fs.aqm = aqm::parse(cur, kind)?;
        w.last = aqm::params_of(kind.name).map(|_| kind.name);
        w.fields.insert(Field::Aqm);
        return Ok(true);
    }
    if let Some(kind) = registered(t, false) {
        return registered_option(cur, t, kind, &mut fs.staged, w);
    }
    if !FLOWSET_OPTIONS.contains(&kw.as_str()) {
        return Ok(false);
    }
    cur.bump();
    let field = match kw.as_str() {
        "queue" => {
            fs.limit = value(
                cur,
                &kw,
                "a queue size: slots (50) or bytes (200kb)",
                queue_limit,
            )?;
            Field::Limit
        }
        "limit" => {
            fs.limit = value(cur, &kw, "a number of packets", crate::netem_words::limit)?;
            Field::Limit
        }
        "plr" => {
            fs.plr = value(cur, &kw, "a loss probability such as 0.01", probability)?;
            Field::Plr
        }
        "mask" => {
            fs.mask = parse_mask(cur)?;
            Field::Mask
        }
        // `hash_size` is ipfw's other name for it.
        "buckets" | "hash_size" => {
            fs.buckets = cur.number("bucket count", 1, u64::from(MAX_BUCKETS))? as u32;
            Field::Buckets
        }
        // 0 is a priority, for prio's queues; the engine refuses it elsewhere.
        "weight" => {
            fs.weight = weight(cur)?;
            Field::Weight
        }
        // FreeBSD's fs.par[1]: the engine checks it against the scheduler's
        // type (RR 64..2048, QFQ 1..2000); 0 is "not set".
        "lmax" => {
            fs.lmax = cur.number("lmax in bytes", 0, u64::from(MAX_LMAX))? as u32;
            Field::Lmax
        }
        "pri" | "priority" => {
            fs.pri = cur.number("pri", 0, u64::from(MAX_PRI))? as u32;
            Field::Pri
        }
        "noerror" => {
            fs.noerror = true;
            Field::Noerror
        }
        // RED's flag, so part of the AQM.
        "ecn" => {
            w.ecn = Some(t);
            Field::Aqm
        }
        "loss" | "duplicate" | "corrupt" if cur.eat("off") => match kw.as_str() {
            "loss" => (fs.loss = None, Field::Loss).1,
            "duplicate" => (fs.duplicate = None, Field::Duplicate).1,
            _ => (fs.corrupt = None, Field::Corrupt).1,
        },
        "loss" => {
            fs.loss = Some(impair::loss(cur)?);
            w.last = Some("loss");
            Field::Loss
        }
        "duplicate" => {
            fs.duplicate = Some(Duplicate(impair::correlated(cur, "duplicate")?));
            w.last = Some("duplicate");
            Field::Duplicate
        }
        "corrupt" => {
            fs.corrupt = Some(Corrupt(impair::correlated(cur, "corrupt")?));
            w.last = Some("corrupt");
            Field::Corrupt
        }
        // FLOWSET_OPTIONS holds nothing else.
        _ => return Ok(false),
    };
    w.fields.insert(field);
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
/// option given to the wrong one (or to the option a follower word such as
/// `gap` belongs to), else "expected" with a suggestion.
fn unknown_option(
    cur: &Cursor<'_>,
    t: Token<'_>,
    obj: Object,
    ty: TypeParams,
    after: Option<&'static str>,
) -> ParseError {
    let kw = t.text.to_ascii_lowercase();
    let what = obj.name();
    let followers =
        |name: &str| aqm::params_of(name).unwrap_or_else(|| impair::params_of(name).to_vec());
    // Each option's parser takes its own followers, so one seen here
    // belongs to an option that is not right before it.
    if let Some(hint) = impair::misplaced(&kw) {
        return cur.error_at(t, ErrorKind::Syntax, format!("`{}` {hint}", t.text));
    }
    if let Some(meant) = crate::netem_words::near_miss(&kw) {
        return cur
            .error_at(
                t,
                ErrorKind::Syntax,
                format!(
                    "`{}` is not a {} option: did you mean `{meant}`?",
                    t.text,
                    obj.name()
                ),
            )
            .with_suggestion(Some(meant));
    }
    if let Some(name) = after {
        let params = followers(name);
        let mut candidates: Vec<&'static str> = params.clone();
        candidates.extend(obj.options());
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
        Object::Queue if LINK_OPTIONS.contains(&kw.as_str()) || registered(t, true).is_some() => {
            Some("a link option: set it with `pipe M config` or `sched M config`")
        }
        Object::Sched
            if FLOWSET_OPTIONS.contains(&kw.as_str())
                || dummynet_engine::aqm::lookup(&kw).is_some()
                || registered(t, false).is_some() =>
        {
            Some("a queue option: set it with `pipe N config` or `queue N config`")
        }
        _ => None,
    };
    if let Some(hint) = elsewhere {
        return cur.error_at(t, ErrorKind::Syntax, format!("`{}` is {hint}", t.text));
    }
    let mut candidates: Vec<&str> = obj.options();
    let expected = match ty {
        TypeParams::Of(ty) if !ty.params.is_empty() => {
            let words: Vec<&str> = ty.params.iter().flat_map(|p| p.keywords()).collect();
            candidates.extend(words.iter().copied());
            format!(
                "a {what} option or a `{}` parameter ({})",
                ty.name,
                words.join(", ")
            )
        }
        TypeParams::Of(ty) => format!("a {what} option (`{}` takes no parameters)", ty.name),
        TypeParams::Any => {
            let mut words: Vec<&str> = sched::REGISTRY
                .iter()
                .flat_map(|ty| ty.params.iter().flat_map(|p| p.keywords()))
                .collect();
            words.sort_unstable();
            words.dedup();
            candidates.extend(words.iter().copied());
            format!("a {what} option or a scheduler parameter")
        }
        TypeParams::None => format!("a {what} option"),
    };
    cur.expected_at(t, &expected, &candidates)
}

fn read_profile(cur: &Cursor<'_>, t: Token<'_>, ctx: Context<'_>) -> Result<Profile, ParseError> {
    let full = impair::resolve(ctx.base_dir, t.text);
    let text = crate::files::read_named(cur, t, ctx, &full, "profile")?;
    profile::parse(&text).map_err(|e| {
        cur.error_at(
            t,
            ErrorKind::File,
            format!("profile `{}`: {e}", full.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The suggestion lists hold every option the object takes, so that a
    /// near miss of any of them gets its "did you mean".
    #[test]
    fn option_lists_agree() {
        let has = |list: &[&str], words: &[&str]| words.iter().all(|w| list.contains(w));
        assert!(has(PIPE_OPTIONS, LINK_OPTIONS) && has(PIPE_OPTIONS, FLOWSET_OPTIONS));
        assert_eq!(
            PIPE_OPTIONS.len(),
            LINK_OPTIONS.len() + FLOWSET_OPTIONS.len()
        );
        assert!(has(QUEUE_OPTIONS, FLOWSET_OPTIONS));
        assert!(has(SCHED_OPTIONS, LINK_OPTIONS));
    }

    /// A JSON view's field name given as an option gets the keyword.
    #[test]
    fn a_view_field_name_suggests_the_keyword() {
        for (line, want) in [
            ("pipe 1 config delay_ns 5", "delay"),
            ("pipe 1 config bandwidth_bps 1000", "bw"),
            ("queue 1 config lmax_bytes 1500", "lmax"),
            ("sched 1 config sched_type fifo", "type"),
        ] {
            let e = crate::parse_command(line).unwrap_err();
            assert_eq!(e.suggestion, Some(want), "{line}: {e}");
        }
    }
}
