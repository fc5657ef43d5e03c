//! One command line: program word, flags, and the command itself.
//!
//! Lines are often pasted from articles and shell sessions, so a leading
//! `ipfw`/`dnctl` (or a path to either), `sudo`, a shell prompt and a trailing
//! `# comment` are all taken off before parsing.
//!
//! `at T COMMAND` schedules a command: on a command line it is one step
//! counted from when the daemon applies it; in a commands file, consecutive
//! `at` lines form one schedule, which a `repeat every P` line after them
//! makes cycle (see [`crate::parse_file`]).

use dummynet_engine::config::{Command, Schedule, Setting, DEFAULT_RULE};
use dummynet_engine::time::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};

use crate::context::Context;
use crate::dnparse::{self, Object};
use crate::error::{suggest, ErrorKind, ParseError};
use crate::lexer::Cursor;
use crate::rule;
use crate::units::{number_in, time_with_unit, ValueError};
use crate::{Flags, Parsed, ShowRequest, Statement};

/// Where a line comes from, which decides what is stripped before parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One line typed or pasted: `$ ` prompts, `# ` prompts before a command,
    /// and `#` comments go.
    Line,
    /// A line of a commands file: a leading `#` is a comment (so a commented
    /// out command stays off), `$ ` prompts and trailing comments go.
    File,
    /// Words from a shell's argv, already split: nothing is stripped.
    Argv,
}

#[rustfmt::skip]
const COMMANDS: &[&str] = &[
    "add", "delete", "flush", "zero", "show", "list", "pipe", "queue", "sched", "sysctl", "kenv",
    "kldload", "at", "table", "set", "enable", "disable", "resetlog", "memory",
];

/// ipfw commands dummynet does not do, with what each is about.
#[rustfmt::skip]
const UNSUPPORTED_COMMANDS: &[(&str, &str)] = &[
    ("nat", "NAT"), ("nat64lsn", "NAT64"), ("nat64stl", "NAT64"), ("nat64clat", "NAT64"),
    ("nptv6", "NPTv6"), ("internal", "ipfw's kernel internals"), ("iflist", "ipfw's interface tracking"),
    ("talist", "table algorithms"), ("lookup", "lookups by uid or jail"),
];

/// Commands ipfw also takes abbreviated (`del`, `sh`), longest first where
/// one is a prefix of another's abbreviation.
const ABBREVIATED: &[&str] = &[
    "delete", "flush", "zero", "show", "list", "resetlog", "enable", "disable", "table",
];

/// The command word `w` stands for: itself, or the ipfw command it
/// abbreviates (at least 2 letters, and only one command starts so).
fn command_word(w: &str) -> String {
    let l = w.to_ascii_lowercase();
    if COMMANDS.contains(&l.as_str()) || l.len() < 2 {
        return l;
    }
    let mut hits = ABBREVIATED.iter().filter(|c| c.starts_with(l.as_str()));
    match (hits.next(), hits.next()) {
        (Some(c), None) => (*c).to_string(),
        _ => l,
    }
}

/// The sysctls of the engine itself; the plug-ins' defaults
/// ([`dummynet_engine::plugin::tunables`]) come after them in [`settings`].
const ENGINE_SETTINGS: &[&str] = &[
    "net.inet.ip.fw.one_pass",
    "net.inet.ip.fw.default_to_accept",
    "net.inet.ip.dummynet.expire",
    "net.inet.ip.dummynet.pipe_slot_limit",
    "net.inet.ip.dummynet.pipe_byte_limit",
    "net.inet.ip.dummynet.held_limit",
    "net.inet.ip.dummynet.instance_limit",
    "net.inet.ip.dummynet.hash_size",
    "net.inet.ip.fw.enable",
    "net.inet.ip.fw.dyn_ack_lifetime",
    "net.inet.ip.fw.dyn_syn_lifetime",
    "net.inet.ip.fw.dyn_fin_lifetime",
    "net.inet.ip.fw.dyn_rst_lifetime",
    "net.inet.ip.fw.dyn_udp_lifetime",
    "net.inet.ip.fw.dyn_short_lifetime",
    "net.inet.ip.fw.dyn_max",
    "net.inet.ip.fw.dyn_keepalive",
];

/// Sysctls taken and deliberately left without effect, with why.
const IGNORED_SETTINGS: &[(&str, &str)] = &[
    (
        "net.inet.ip.fw.verbose",
        "`log` rules always log, to the daemon's log",
    ),
    (
        "net.inet.ip.fw.verbose_limit",
        "each rule's `logamount` limits its log",
    ),
    (
        "net.inet.ip.fw.dyn_buckets",
        "the state table grows as needed, up to dyn_max",
    ),
    (
        "net.inet.ip.fw.autoinc_step",
        "rules are numbered in steps of 100, as FreeBSD's default",
    ),
    (
        "net.link.ether.ipfw",
        "a bridge's frames always cross the rules",
    ),
    (
        "net.link.bridge.ipfw",
        "a bridge's frames always cross the rules",
    ),
];

/// Every sysctl name `sysctl` takes, for messages and suggestions.
fn settings() -> &'static [&'static str] {
    static ALL: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let tunables = dummynet_engine::plugin::tunables().map(|t| &*t.full_name().leak());
        ENGINE_SETTINGS.iter().copied().chain(tunables).collect()
    })
}

/// Parses one line typed or given as argv; `Ok(None)` if it holds no
/// command (blank or a comment). `at T COMMAND` is a schedule of one step.
pub(crate) fn parse_line(
    line: &str,
    mode: Mode,
    ctx: Context<'_>,
) -> Result<Option<Parsed>, ParseError> {
    let Some((mut cur, flags, dnctl)) = frame(line, mode)? else {
        return Ok(None);
    };
    let ctx = Context { dnctl, ..ctx };
    if let Some(t) = cur.peek().filter(|t| t.is("repeat")) {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            "`repeat every P` belongs in a commands file, on the line after a block of \
             `at` lines",
        ));
    }
    let statement = if let Some(cancel) = at_flush(&mut cur)? {
        cancel
    } else if cur.eat("at") {
        let (offset, command) = parse_at(&mut cur, ctx, None)?;
        Statement::Apply(Command::Schedule(Schedule {
            steps: vec![(offset, command)],
            every: None,
        }))
    } else {
        parse_statement(&mut cur, ctx)?
    };
    Ok(Some(Parsed {
        flags,
        statement,
        notes: cur.take_notes(),
    }))
}

/// What a line of a commands file holds.
// `At` holds a command inline, like `Statement::Apply`; see its note.
#[allow(clippy::large_enum_variant)]
pub(crate) enum FileLine {
    /// A command to apply when the file is (or something to show).
    Now(Parsed),
    /// `at T COMMAND`: a step of the block of `at` lines it belongs to.
    At {
        flags: Flags,
        offset: Nanos,
        command: Command,
    },
    /// `repeat every P`: the block just read cycles with period P.
    Repeat(Nanos),
}

/// Parses one line of a commands file; `Ok(None)` if it holds no command.
/// `block` is the last offset of the block of `at` lines open before this
/// line, if one is: an `at` line may not go back in time from it, and a
/// `repeat` needs it.
pub(crate) fn parse_file_line(
    line: &str,
    ctx: Context<'_>,
    block: Option<Nanos>,
) -> Result<Option<FileLine>, ParseError> {
    let Some((mut cur, flags, dnctl)) = frame(line, Mode::File)? else {
        return Ok(None);
    };
    let ctx = Context { dnctl, ..ctx };
    if let Some(t) = cur.peek().filter(|t| t.is("repeat")) {
        cur.bump();
        let Some(last) = block else {
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "`repeat` has no block of `at T COMMAND` lines right before it to repeat",
            ));
        };
        if !cur.eat("every") {
            return Err(cur.expected("`every` after `repeat` (`repeat every P`)", &["every"]));
        }
        let p = cur.word("a period such as 10s after `repeat every`")?;
        let every = time_with_unit(p.text, "repeat every").map_err(|e| cur.value_error(p, e))?;
        if every == 0 {
            return Err(cur.error_at(p, ErrorKind::Range, "a period must be above 0"));
        }
        if every < last {
            return Err(cur.error_at(
                p,
                ErrorKind::Range,
                format!(
                    "the period `{}` is shorter than the block it repeats, whose last step \
                     is at {}",
                    p.text,
                    format_offset(last)
                ),
            ));
        }
        cur.finish("`repeat every P`")?;
        return Ok(Some(FileLine::Repeat(every)));
    }
    if let Some(statement) = at_flush(&mut cur)? {
        return Ok(Some(FileLine::Now(Parsed {
            flags,
            statement,
            notes: cur.take_notes(),
        })));
    }
    if cur.eat("at") {
        let (offset, command) = parse_at(&mut cur, ctx, block)?;
        return Ok(Some(FileLine::At {
            flags,
            offset,
            command,
        }));
    }
    let statement = parse_statement(&mut cur, ctx)?;
    Ok(Some(FileLine::Now(Parsed {
        flags,
        statement,
        notes: cur.take_notes(),
    })))
}

/// `at flush`: cancels every schedule still running (applied now, in a
/// file too); `None` if the line is something else.
fn at_flush(cur: &mut Cursor<'_>) -> Result<Option<Statement>, ParseError> {
    if !(cur.peek_is("at") && cur.peek_nth(1).is_some_and(|t| t.is("flush"))) {
        return Ok(None);
    }
    cur.bump();
    cur.bump();
    cur.finish("`at flush`")?;
    Ok(Some(Statement::Apply(Command::CancelSchedules)))
}

/// The tokens of a line's command, after the program word and the flags;
/// `None` for a line without a command.
/// The command of a line with its flags, and whether it was given to
/// `dnctl`.
fn frame(line: &str, mode: Mode) -> Result<Option<(Cursor<'_>, Flags, bool)>, ParseError> {
    let (start, end) = command_span(line, mode);
    let mut cur = Cursor::new(line, start, end);
    if cur.at_end() {
        return Ok(None);
    }
    cur.eat("sudo");
    let dnctl = eat_program(&mut cur).unwrap_or(false);
    let flags = parse_flags(&mut cur)?;
    Ok(Some((cur, flags, dnctl)))
}

/// Takes `ipfw` or `dnctl` (or a path to either) if it comes next: `None`
/// if it does not, else whether it was `dnctl`.
fn eat_program(cur: &mut Cursor<'_>) -> Option<bool> {
    let w = cur.peek_word().filter(|w| is_program(w))?;
    let dnctl = w.eq_ignore_ascii_case("dnctl") || w.ends_with("/dnctl");
    cur.bump();
    Some(dnctl)
}

/// `T COMMAND` after `at`: any command that changes the configuration.
/// `after` is the offset of the step before it in the same block, which
/// this one may not precede (the steps of a schedule are in time order,
/// and a file is read top down).
fn parse_at(
    cur: &mut Cursor<'_>,
    ctx: Context<'_>,
    after: Option<Nanos>,
) -> Result<(Nanos, Command), ParseError> {
    let t = cur.word("a time such as 5s or 1500ms after `at`")?;
    let offset = time_with_unit(t.text, "at").map_err(|e| cur.value_error(t, e))?;
    if let Some(last) = after.filter(|&last| offset < last) {
        return Err(cur.error_at(
            t,
            ErrorKind::Range,
            format!(
                "`at {}` comes before the step above it, at {}; the `at` lines of a block \
                 must not go back in time",
                t.text,
                format_offset(last)
            ),
        ));
    }
    // `at 5s ipfw pipe 1 ...`, as the command would be written on its own line.
    let ctx = match eat_program(cur) {
        Some(dnctl) => Context { dnctl, ..ctx },
        None => ctx,
    };
    let Some(first) = cur.peek() else {
        return Err(cur.expected("a command to run at that time after `at T`", COMMANDS));
    };
    let mark = cur.mark();
    match parse_statement(cur, ctx)? {
        Statement::Apply(command) => Ok((offset, command)),
        Statement::Show(_) => {
            let verb = cur
                .tokens_since(mark)
                .iter()
                .find(|t| t.is("show") || t.is("list"))
                .copied()
                .unwrap_or(first);
            Err(cur.error_at(
                verb,
                ErrorKind::Syntax,
                format!(
                    "`{}` cannot be scheduled: `at` takes a command that changes the \
                     configuration",
                    verb.text
                ),
            ))
        }
        Statement::Nop(_) => Err(cur.error_at(
            first,
            ErrorKind::Syntax,
            format!("`{}` has nothing to schedule", first.text),
        )),
    }
}

/// An offset in the largest unit that writes it exactly (`10s`, `1500ms`).
fn format_offset(ns: Nanos) -> String {
    match ns {
        0 => "0s".to_string(),
        _ if ns.is_multiple_of(NS_PER_SEC) => format!("{}s", ns / NS_PER_SEC),
        _ if ns.is_multiple_of(NS_PER_MS) => format!("{}ms", ns / NS_PER_MS),
        _ if ns.is_multiple_of(NS_PER_US) => format!("{}us", ns / NS_PER_US),
        _ => format!("{ns}ns"),
    }
}

/// The byte range of `line` that holds the command.
fn command_span(line: &str, mode: Mode) -> (usize, usize) {
    let skip_blanks = |from: usize| from + (line[from..].len() - line[from..].trim_start().len());
    let mut start = skip_blanks(0);
    if mode == Mode::Argv {
        return (start, line.len());
    }
    let rest = &line[start..];
    let prompt = |p: char| rest.starts_with(p) && rest[1..].starts_with(char::is_whitespace);
    if prompt('$') {
        start = skip_blanks(start + 1);
    } else if mode == Mode::Line && prompt('#') {
        // A root prompt as pasted from an article (`# ipfw pipe 1 show`), as
        // long as a command follows; otherwise the line is a comment.
        let after = skip_blanks(start + 1);
        let mut words = line[after..].split_whitespace();
        let first = words.next().unwrap_or_default();
        // `# at 5s pipe 1 ...` is a prompt, `# at least ...` a comment.
        let is_command = if first.eq_ignore_ascii_case("at") {
            words
                .next()
                .is_some_and(|w| time_with_unit(w, "at").is_ok())
        } else {
            starts_command(first)
        };
        if !is_command {
            return (line.len(), line.len());
        }
        start = after;
    }
    let end = line[start..].find('#').map_or(line.len(), |i| start + i);
    (start, end)
}

fn starts_command(w: &str) -> bool {
    is_program(w)
        || w.eq_ignore_ascii_case("sudo")
        || COMMANDS.iter().any(|c| w.eq_ignore_ascii_case(c))
}

fn is_program(w: &str) -> bool {
    ["ipfw", "dnctl"].iter().any(|p| w.eq_ignore_ascii_case(p))
        || w.ends_with("/ipfw")
        || w.ends_with("/dnctl")
}

/// `-f`, `-q`, `-t`, alone or combined (`-fq`).
fn parse_flags(cur: &mut Cursor<'_>) -> Result<Flags, ParseError> {
    let mut flags = Flags::default();
    while let Some(t) = cur
        .peek()
        .filter(|t| t.text.len() > 1 && t.text.starts_with('-'))
    {
        for (i, c) in t.text.char_indices().skip(1) {
            match c {
                'f' => flags.force = true,
                'd' => flags.dynamic = true,
                'e' => flags.dynamic = true,
                'S' => flags.sets = true,
                'a' => flags.counters = true,
                // `-N` resolves addresses to names: shown as addresses here.
                'N' | 'n' | 'c' | 'b' => {}
                // FreeBSD: "-q ... (implies -f)".
                'q' => {
                    flags.quiet = true;
                    flags.force = true;
                }
                't' => flags.timestamps = true,
                'T' => {
                    flags.timestamps = true;
                    flags.epoch = true;
                }
                _ => {
                    let flag: String = c.to_string();
                    return Err(cur.error_in(
                        t,
                        i,
                        ErrorKind::Syntax,
                        format!("unknown flag `-{flag}` (known: -a, -b, -c, -d, -e, -f, -N, -n, -q, -S, -t, -T)"),
                    ));
                }
            }
        }
        cur.bump();
    }
    Ok(flags)
}

fn parse_statement(cur: &mut Cursor<'_>, ctx: Context<'_>) -> Result<Statement, ParseError> {
    let Some(t) = cur.peek() else {
        return Err(cur.expected(
            "a command (add, delete, flush, show, pipe, queue, sched, ...)",
            COMMANDS,
        ));
    };
    let kw = command_word(t.text);
    if let Some((_, what)) = UNSUPPORTED_COMMANDS.iter().find(|(c, _)| *c == kw) {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!("`{}` is about {what}, which dummynet does not do", t.text),
        ));
    }
    if !COMMANDS.contains(&kw.as_str()) {
        return Err(cur.expected(
            "a command (add, delete, flush, zero, show, list, pipe, queue, sched)",
            COMMANDS,
        ));
    }
    if kw == "at" {
        // A line's own `at` was taken off before; this one is inside it.
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            "`at` cannot be nested: give the sum of the times to one `at`",
        ));
    }
    cur.bump();
    let statement = match kw.as_str() {
        "add" => Statement::Apply(Command::AddRule(rule::parse_add(cur)?)),
        "delete" if cur.eat("set") => {
            Statement::Apply(Command::DeleteSet(cur.number("rule set", 0, 31)? as u8))
        }
        // FreeBSD's ipfw deletes only while rule numbers come, so
        // `delete pipe 1` deletes nothing (and succeeds); kept, and said.
        "delete"
            if cur.peek_word().is_some_and(|w| {
                ["pipe", "queue", "sched", "flowset"]
                    .iter()
                    .any(|o| w.eq_ignore_ascii_case(o))
            }) =>
        {
            let object = cur.take_rest().to_string();
            let mut words = object.split_whitespace();
            let (what, n) = (words.next().unwrap_or("pipe"), words.next().unwrap_or("N"));
            cur.note(format!(
                "`delete {object}` deletes nothing, as in FreeBSD's ipfw: `delete` takes rule                  numbers; `{what} {n} delete` deletes {what} {n}"
            ));
            Statement::Nop("`delete` without rule numbers deletes nothing")
        }
        "delete" => {
            let numbers = rule_numbers(cur, false)?;
            if numbers.is_empty() {
                return Err(cur.expected("the numbers of the rules to delete", &[]));
            }
            Statement::Apply(Command::DeleteRules(numbers))
        }
        // dnctl(8): `flush` removes every pipe, queue and scheduler, and
        // leaves the rules.
        "flush" if ctx.dnctl => Statement::Apply(Command::FlushDummynet),
        "flush" => Statement::Apply(Command::FlushRules),
        "show" | "list" if ctx.dnctl => Statement::Show(ShowRequest::Pipes(Vec::new())),
        "zero" => Statement::Apply(Command::ZeroRules(rule_numbers(cur, true)?)),
        "show" | "list" => Statement::Show(ShowRequest::Rules {
            numbers: rule_numbers(cur, true)?,
            counters: kw == "show",
        }),
        // Not FreeBSD's: a word of its own, so that `show`'s output, which
        // scripts parse, stays as FreeBSD prints it.
        "memory" => Statement::Show(ShowRequest::Memory),
        "pipe" => return dnparse::parse(cur, Object::Pipe, ctx),
        "queue" => return dnparse::parse(cur, Object::Queue, ctx),
        "sched" => return dnparse::parse(cur, Object::Sched, ctx),
        "sysctl" | "kenv" => {
            // `sysctl -w NAME=VALUE`, as FreeBSD's sysctl(8) once required.
            cur.eat("-w");
            if let Some((_, why)) = cur.peek_word().and_then(|w| {
                let name = w.split('=').next().unwrap_or(w);
                IGNORED_SETTINGS.iter().find(|(n, _)| *n == name)
            }) {
                cur.bump();
                Statement::Nop(why)
            } else {
                Statement::Apply(Command::Set(parse_setting(cur)?))
            }
        }
        "table" => crate::tables::parse(cur)?,
        "set" => crate::sets::parse(cur)?,
        "enable" | "disable" => parse_toggle(cur, kw == "enable")?,
        "resetlog" => Statement::Apply(Command::ResetLog(rule_numbers(cur, true)?)),
        _ => {
            // `kldload ipfw dummynet`: both are always here.
            while cur.bump().is_some() {}
            Statement::Nop("kldload: ipfw and dummynet are built in")
        }
    };
    cur.finish(&format!("`{kw}`"))?;
    Ok(statement)
}

/// `enable|disable firewall|one_pass|dyn_keepalive|...`
fn parse_toggle(cur: &mut Cursor<'_>, on: bool) -> Result<Statement, ParseError> {
    const WHAT: &[&str] = &["firewall", "one_pass", "dyn_keepalive", "verbose", "debug"];
    let t = cur.word("what to enable or disable (firewall, one_pass, dyn_keepalive)")?;
    Ok(match t.text.to_ascii_lowercase().as_str() {
        "firewall" => Statement::Apply(Command::Set(Setting::Firewall(on))),
        "one_pass" => Statement::Apply(Command::Set(Setting::OnePass(on))),
        "dyn_keepalive" => Statement::Apply(Command::Set(Setting::Dyn(
            dummynet_engine::config::DynSetting::Keepalive,
            u32::from(on),
        ))),
        "verbose" | "debug" => Statement::Nop("`log` rules always log, to the daemon's log"),
        _ => {
            return Err(cur.expected_at(
                t,
                "firewall, one_pass, dyn_keepalive, verbose or debug",
                WHAT,
            ))
        }
    })
}

/// Rule numbers up to the end of the line. The default rule may be shown and
/// zeroed but not deleted.
fn rule_numbers(cur: &mut Cursor<'_>, allow_default: bool) -> Result<Vec<u16>, ParseError> {
    let mut numbers = Vec::new();
    while let Some(t) = cur.peek() {
        if !allow_default && t.text.parse::<u64>() == Ok(u64::from(DEFAULT_RULE)) {
            return Err(cur.error_at(
                t,
                ErrorKind::Range,
                "rule 65535 is the default rule and cannot be deleted",
            ));
        }
        numbers.push(cur.number("rule number", 1, u64::from(DEFAULT_RULE))? as u16);
    }
    Ok(numbers)
}

/// `NAME=VALUE` for the FreeBSD sysctls the engine mirrors.
fn parse_setting(cur: &mut Cursor<'_>) -> Result<Setting, ParseError> {
    let t = cur.word("NAME=VALUE, e.g. net.inet.ip.fw.one_pass=0")?;
    let Some((name, value)) = t.text.split_once('=') else {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!("expected NAME=VALUE, found `{}`", t.text),
        ));
    };
    let value_error = |m: String| cur.error_in(t, name.len() + 1, ErrorKind::Range, m);
    let flag = || match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(value_error(format!("{name} takes 0 or 1, found `{value}`"))),
    };
    let int = |hi: u64| number_in(value, name, 1, hi).map_err(|e| value_error(e.into_message()));
    Ok(match name {
        "net.inet.ip.fw.one_pass" => Setting::OnePass(flag()?),
        "net.inet.ip.fw.default_to_accept" => Setting::DefaultToAccept(flag()?),
        "net.inet.ip.dummynet.expire" => Setting::Expire(flag()?),
        "net.inet.ip.dummynet.pipe_slot_limit" => {
            Setting::PipeSlotLimit(int(u64::from(u32::MAX))? as u32)
        }
        "net.inet.ip.dummynet.pipe_byte_limit" => Setting::PipeByteLimit(int(u64::MAX)?),
        // Bytes, 0 for none.
        "net.inet.ip.dummynet.held_limit" => Setting::HeldLimit(
            number_in(value, name, 0, u64::MAX).map_err(|e| value_error(e.into_message()))?,
        ),
        // A count; the engine refuses 0.
        "net.inet.ip.dummynet.instance_limit" => {
            Setting::InstanceLimit(int(u64::from(u32::MAX))? as u32)
        }
        "net.inet.ip.fw.enable" => Setting::Firewall(flag()?),
        // FreeBSD's default size of a flowset's hash table: the `buckets`
        // of what is configured later without one.
        "net.inet.ip.dummynet.hash_size" => {
            Setting::HashSize(int(u64::from(dummynet_engine::config::MAX_BUCKETS))? as u32)
        }
        _ if name.starts_with("net.inet.ip.fw.dyn_")
            && dummynet_engine::config::DynSetting::ALL
                .iter()
                .any(|d| name.ends_with(d.name()) && name.len() == 15 + d.name().len()) =>
        {
            let d = dummynet_engine::config::DynSetting::ALL
                .into_iter()
                .find(|d| &name[15..] == d.name())
                .unwrap_or(dummynet_engine::config::DynSetting::Max);
            let lo = u64::from(d == dummynet_engine::config::DynSetting::Keepalive);
            let v = number_in(value, name, 1 - lo, u64::from(d.max_value()))
                .map_err(|e| value_error(e.into_message()))?;
            Setting::Dyn(d, v as u32)
        }
        _ => {
            if let Some(s) = tunable_setting(name, value).map_err(value_error)? {
                return Ok(s);
            }
            let (kind, message) = if name.starts_with("net.inet.ip.dummynet.red") {
                (
                    ErrorKind::Unavailable,
                    format!("`{name}` is not available in this build (RED has no sysctls here)"),
                )
            } else {
                (
                    ErrorKind::Syntax,
                    format!(
                        "unknown setting `{name}` (known: {})",
                        settings().join(", ")
                    ),
                )
            };
            let e = cur.error_in(t, 0, kind, message);
            return Err(ParseError {
                len: name.len(),
                ..e
            }
            .with_suggestion(suggest(name, settings())));
        }
    })
}

/// A plug-in default (`net.inet.ip.dummynet.codel.target=7000`): `None` if
/// `name` is none of them, else the setting or why `value` is refused.
/// Units are FreeBSD's: times in microseconds, PIE's fractions in
/// thousandths.
fn tunable_setting(name: &str, value: &str) -> Result<Option<Setting>, String> {
    let Some(t) = name
        .strip_prefix("net.inet.ip.dummynet.")
        .and_then(dummynet_engine::plugin::tunable)
    else {
        return Ok(None);
    };
    let value = number_in(value, &format!("{name} ({})", t.unit.name()), t.min, t.max)
        .map_err(ValueError::into_message)?;
    Ok(Some(Setting::Tunable {
        sysctl: t.sysctl,
        value,
    }))
}
