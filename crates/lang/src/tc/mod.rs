//! tc(8)'s words for the qdiscs dummynet emulates: `tc qdisc add|change|
//! replace|del|show` with `netem`, `tbf` and `fq_codel`, read as iproute2
//! reads them (its abbreviations, units and defaults) and printed back as
//! `tc qdisc show` prints them. Anything else tc does is recognised and
//! returned as [`TcCommand::NotEmulated`], for the caller to hand to the
//! system's own tc or refuse. Nothing here touches an interface.

mod fq_codel;
mod json;
mod netem;
mod tbf;
pub mod units;

pub use fq_codel::FqCodel;
pub use json::{qdisc_json, Json};
pub use netem::{Chance, Loss, Netem, Rate, Slot, SlotTimes};
pub use tbf::Tbf;

use crate::error::suggest;

/// What a tc command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tc {
    pub opts: GlobalOpts,
    pub command: TcCommand,
}

/// tc's options before the object (`-s`, `-d`, `-n NETNS`...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GlobalOpts {
    pub stats: bool,
    pub details: bool,
    pub json: bool,
    pub pretty: bool,
    /// `-i`: rates in powers of 1024.
    pub iec: bool,
    /// `-n NAME`: the named network namespace (`ip netns`).
    pub netns: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcCommand {
    /// `tc qdisc add|change|replace|del ...`.
    Qdisc(Box<QdiscRequest>),
    /// `tc qdisc show [dev DEV]`.
    Show { dev: Option<String> },
    /// A command tc knows that dummynet does not emulate; the words say what.
    NotEmulated(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Add,
    Change,
    /// Add, or change what is there.
    Replace,
    Delete,
}

/// Where the qdisc hangs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    Root,
    /// `parent MAJ:MIN` (hexadecimal, as tc writes handles).
    Class(u16, u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdiscRequest {
    pub verb: Verb,
    pub dev: String,
    /// `handle MAJ:` (hexadecimal).
    pub handle: Option<u16>,
    pub parent: Parent,
    /// The qdisc and its options; absent in `tc qdisc del dev X root`.
    pub qdisc: Option<Qdisc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qdisc {
    Netem(Netem),
    Tbf(Tbf),
    FqCodel(FqCodel),
}

impl Qdisc {
    pub fn kind(&self) -> &'static str {
        match self {
            Qdisc::Netem(_) => "netem",
            Qdisc::Tbf(_) => "tbf",
            Qdisc::FqCodel(_) => "fq_codel",
        }
    }

    /// The options as `tc qdisc show` prints them.
    pub fn show(&self, iec: bool) -> String {
        match self {
            Qdisc::Netem(n) => n.show(iec),
            Qdisc::Tbf(t) => t.show(iec),
            Qdisc::FqCodel(f) => f.show(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcErrorKind {
    /// tc itself would refuse the words.
    Syntax,
    /// tc accepts them, dummynet does not emulate them.
    NotEmulated,
}

/// A refusal, worded as tc words it, with what is allowed after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}{}", hints.iter().map(|h| format!("\n{h}")).collect::<String>())]
pub struct TcError {
    pub kind: TcErrorKind,
    pub message: String,
    pub hints: Vec<String>,
}

impl TcError {
    fn syntax(message: impl Into<String>) -> TcError {
        TcError {
            kind: TcErrorKind::Syntax,
            message: message.into(),
            hints: Vec::new(),
        }
    }

    fn not_emulated(what: impl Into<String>) -> TcError {
        TcError {
            kind: TcErrorKind::NotEmulated,
            message: format!("dummynet does not emulate {}", what.into()),
            hints: Vec::new(),
        }
    }

    fn hint(mut self, h: impl Into<String>) -> TcError {
        self.hints.push(h.into());
        self
    }
}

/// iproute2's `matches()`: `word` is a prefix of `keyword` (`del` for
/// `delete`, `dist` for `distribution`).
pub(crate) fn matches(word: &str, keyword: &str) -> bool {
    !word.is_empty() && keyword.starts_with(word)
}

/// A cursor over the words, with iproute2's look-ahead tests.
pub(crate) struct Args<'a> {
    words: &'a [&'a str],
    at: usize,
}

impl<'a> Args<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let w = self.words.get(self.at).copied();
        self.at += usize::from(w.is_some());
        w
    }

    fn peek(&self) -> Option<&'a str> {
        self.words.get(self.at).copied()
    }

    /// The next word, or tc's complaint that the command line ended.
    fn next_or(&mut self, what: &str) -> Result<&'a str, TcError> {
        self.next().ok_or_else(|| {
            TcError::syntax("Command line is not complete. Try option \"help\"")
                .hint(format!("`{what}` needs a value"))
        })
    }

    /// `NEXT_IS_NUMBER()`: the next word starts with a digit.
    fn next_is_number(&self) -> bool {
        self.peek()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit()))
    }

    fn next_is_signed_number(&self) -> bool {
        self.peek()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
    }

    fn rest(&self) -> &'a [&'a str] {
        &self.words[self.at.min(self.words.len())..]
    }
}

/// A tc command line, without the program name: `qdisc add dev eth0 root
/// netem delay 100ms`, `-s qdisc show dev eth0`.
pub fn parse(words: &[&str]) -> Result<Tc, TcError> {
    let mut a = Args { words, at: 0 };
    let mut opts = GlobalOpts::default();
    while let Some(w) = a.peek().filter(|w| w.starts_with('-') && w.len() > 1) {
        a.next();
        let o = w.trim_start_matches('-');
        if matches(o, "stats") || matches(o, "statistics") {
            opts.stats = true;
        } else if matches(o, "details") {
            opts.details = true;
        } else if matches(o, "json") {
            opts.json = true;
        } else if matches(o, "pretty") {
            opts.pretty = true;
        } else if matches(o, "iec") {
            opts.iec = true;
        } else if matches(o, "netns") {
            opts.netns = Some(a.next_or("-netns")?.to_string());
        } else if matches(o, "raw") || matches(o, "graph") || matches(o, "force") {
            // Presentation and batch-error options with no effect here.
        } else {
            return Ok(Tc {
                opts,
                command: TcCommand::NotEmulated(format!("tc's option `{w}`")),
            });
        }
    }
    let object = a.next().unwrap_or("help");
    if !matches(object, "qdisc") {
        let what = match object {
            o if matches(o, "class") => "tc classes",
            o if matches(o, "filter") => "tc filters",
            o if matches(o, "actions") => "tc actions",
            o if matches(o, "chain") => "tc chains",
            o if matches(o, "monitor") => "tc monitor",
            _ => "this tc object",
        };
        return Ok(Tc {
            opts,
            command: TcCommand::NotEmulated(format!("{what} (`tc {object}`)")),
        });
    }
    let verb = a.next().unwrap_or("show");
    let verb = if matches(verb, "add") {
        Verb::Add
    } else if matches(verb, "change") {
        Verb::Change
    } else if matches(verb, "replace") {
        Verb::Replace
    } else if matches(verb, "delete") {
        Verb::Delete
    } else if matches(verb, "show") || matches(verb, "list") || matches(verb, "lst") {
        return parse_show(&mut a).map(|command| Tc { opts, command });
    } else if matches(verb, "link") {
        return Ok(Tc {
            opts,
            command: TcCommand::NotEmulated("`tc qdisc link`".into()),
        });
    } else {
        return Err(TcError::syntax(format!(
            "Command \"{verb}\" is unknown, try \"tc qdisc help\"."
        ))
        .hint("tc qdisc [ add | del | replace | change | show ] dev STRING ..."));
    };
    parse_modify(&mut a, verb).map(|command| Tc { opts, command })
}

fn parse_show(a: &mut Args) -> Result<TcCommand, TcError> {
    let mut dev = None;
    while let Some(w) = a.next() {
        if w == "dev" {
            dev = Some(a.next_or("dev")?.to_string());
        } else if matches(w, "root") || matches(w, "invisible") {
            // Every qdisc dummynet emulates is a root one, and visible.
        } else if matches(w, "ingress") || matches(w, "clsact") {
            return Ok(TcCommand::NotEmulated(format!("`{w}` qdiscs")));
        } else if matches(w, "handle") || matches(w, "parent") {
            a.next_or(w)?;
        } else {
            return Err(TcError::syntax(format!(
                "What is \"{w}\"? Try \"tc qdisc help\"."
            )));
        }
    }
    Ok(TcCommand::Show { dev })
}

fn parse_modify(a: &mut Args, verb: Verb) -> Result<TcCommand, TcError> {
    let mut dev = None;
    let mut handle = None;
    let mut parent = None;
    let mut qdisc = None;
    while let Some(w) = a.next() {
        if w == "dev" {
            if dev.is_some() {
                return Err(TcError::syntax(
                    "Error: duplicate \"dev\": \"..\" is the second value.",
                ));
            }
            dev = Some(a.next_or("dev")?.to_string());
        } else if w == "handle" {
            handle = Some(qdisc_handle(a.next_or("handle")?)?);
        } else if w == "root" {
            if parent.is_some() {
                return Err(TcError::syntax("Error: \"root\" is duplicate parent ID"));
            }
            parent = Some(Parent::Root);
        } else if w == "parent" {
            if parent.is_some() {
                return Err(TcError::syntax("Error: \"parent\" is duplicate parent ID"));
            }
            parent = Some(class_id(a.next_or("parent")?)?);
        } else if w == "ingress" || w == "clsact" {
            return Ok(TcCommand::NotEmulated(format!("`{w}` qdiscs")));
        } else if matches(w, "estimator") || matches(w, "stab") || w.ends_with("_block") {
            return Ok(TcCommand::NotEmulated(format!("tc's `{w}`")));
        } else if w == "help" {
            return Err(TcError::syntax(
                "Usage: tc qdisc [ add | del | replace | change | show ] dev STRING [ handle QHANDLE ] [ root | parent CLASSID ] [ QDISC_KIND [ OPTIONS ] ]",
            ));
        } else {
            qdisc = Some(match w {
                "netem" => Qdisc::Netem(Netem::parse(a)?),
                "tbf" => Qdisc::Tbf(Tbf::parse(a)?),
                "fq_codel" => Qdisc::FqCodel(FqCodel::parse(a)?),
                other => {
                    return Ok(TcCommand::NotEmulated(format!(
                        "the `{other}` qdisc (dummynet emulates netem, tbf and fq_codel)"
                    )))
                }
            });
            debug_assert!(a.rest().is_empty());
        }
    }
    let dev = dev.ok_or_else(|| {
        TcError::syntax("Cannot find device \"\"").hint("name the interface: `dev IFNAME`")
    })?;
    let parent = parent.ok_or_else(|| {
        TcError::syntax("Error: Parent Qdisc doesn't exists.")
            .hint("say where the qdisc goes: `root` or `parent MAJ:MIN`")
    })?;
    if qdisc.is_none() && verb != Verb::Delete {
        return Err(TcError::syntax("Error: Qdisc kind is missing.")
            .hint("add, change and replace name the qdisc: netem, tbf or fq_codel"));
    }
    Ok(TcCommand::Qdisc(Box::new(QdiscRequest {
        verb,
        dev,
        handle,
        parent,
        qdisc,
    })))
}

/// `get_qdisc_handle`: `MAJ:` in hexadecimal (`none` is 0).
fn qdisc_handle(w: &str) -> Result<u16, TcError> {
    let bad = || {
        TcError::syntax(format!(
            "Error: \"handle\" qdisc handle is invalid: \"{w}\""
        ))
        .hint("a qdisc handle is MAJ: in hexadecimal, e.g. 1: or 8001:")
    };
    if w == "none" {
        return Ok(0);
    }
    let (maj, min) = w.split_once(':').ok_or_else(bad)?;
    if !min.is_empty() && u16::from_str_radix(min, 16).map_err(|_| bad())? != 0 {
        return Err(bad());
    }
    u16::from_str_radix(maj, 16).map_err(|_| bad())
}

/// `get_tc_classid`: `MAJ:MIN` in hexadecimal, or `root`.
fn class_id(w: &str) -> Result<Parent, TcError> {
    if w == "root" {
        return Ok(Parent::Root);
    }
    let bad = || TcError::syntax(format!("Error: \"parent\" invalid class ID: \"{w}\""));
    let (maj, min) = w.split_once(':').ok_or_else(bad)?;
    let maj = u16::from_str_radix(maj, 16).map_err(|_| bad())?;
    let min = if min.is_empty() {
        0
    } else {
        u16::from_str_radix(min, 16).map_err(|_| bad())?
    };
    Ok(Parent::Class(maj, min))
}

#[cfg(test)]
mod tests;

/// A qdisc's counters, for `tc -s qdisc show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QdiscStats {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
}

/// A class id as tc prints it (`print_tc_classid`): `1:1`, `1:`, `:5`.
pub(crate) fn class_name(parent: &Parent) -> String {
    match *parent {
        Parent::Root => "root".into(),
        Parent::Class(maj, 0) => format!("{maj:x}:"),
        Parent::Class(0, min) => format!(":{min:x}"),
        Parent::Class(maj, min) => format!("{maj:x}:{min:x}"),
    }
}

/// One qdisc as `tc qdisc show` prints it (`qdisc netem 8001: dev eth0 root
/// refcnt 2 limit 1000 delay 100ms`; `dev` only when the command named no
/// device, as tc), with tc's two lines of counters under it when `stats`
/// is given.
pub fn format_qdisc(
    handle: u16,
    parent: &Parent,
    dev: Option<&str>,
    qdisc: &Qdisc,
    iec: bool,
    stats: Option<&QdiscStats>,
) -> String {
    let place = match parent {
        Parent::Root => "root refcnt 2".to_string(),
        Parent::Class(..) => format!("parent {}", class_name(parent)),
    };
    let dev = dev.map(|d| format!("dev {d} ")).unwrap_or_default();
    let mut s = format!(
        "qdisc {} {handle:x}: {dev}{place} {}",
        qdisc.kind(),
        qdisc.show(iec)
    );
    if let Some(st) = stats {
        s += &format!(
            "\n Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0) \n backlog {} {}p requeues 0",
            st.bytes,
            st.packets,
            st.drops,
            st.overlimits,
            units::fmt_size(st.backlog_bytes),
            st.backlog_packets
        );
    }
    s
}

impl Qdisc {
    /// What the qdisc does to a link, as the options of a dummynet `pipe N
    /// config` (tc's units written out exactly: times in ns, rates in
    /// bit/s). What dummynet cannot do as the qdisc would is refused, never
    /// dropped quietly.
    pub fn pipe_options(&self) -> Result<Vec<String>, TcError> {
        match self {
            Qdisc::Netem(n) => n.pipe_options(),
            Qdisc::Tbf(t) => Ok(vec![
                "bw".into(),
                format!("{}bit/s", t.rate_bps),
                "burst".into(),
                t.burst.to_string(),
                "queue".into(),
                format!("{}bytes", t.limit.saturating_sub(t.burst).max(1)),
            ]),
            Qdisc::FqCodel(_) => Err(TcError::not_emulated(
                "fq_codel as a pipe option: it is a scheduler (`sched N config type fq_codel`)",
            )),
        }
    }
}
