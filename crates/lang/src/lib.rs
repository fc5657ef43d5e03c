//! # dummynet-lang
//!
//! The ipfw(8) / dnctl(8) command language of FreeBSD, for dummynet on Linux:
//! a parser from command lines to the engine's typed [`Command`]s, and the
//! `show` formatters that print an engine [`Snapshot`](dummynet_engine::Snapshot) the way FreeBSD does.
//!
//! ```
//! use dummynet_engine::Command;
//! use dummynet_lang::{parse_command, Statement};
//!
//! let p = parse_command("ipfw pipe 1 config bw 10Mbit/s delay 10ms queue 200kb").unwrap();
//! assert!(matches!(p.statement, Statement::Apply(Command::ConfigPipe(1, _))));
//!
//! let e = parse_command("ipfw add 100 pipe 1 form any to any").unwrap_err();
//! assert_eq!((e.found(), e.column, e.suggestion), (Some("form"), 21, Some("from")));
//! ```
//!
//! What it does:
//! - FreeBSD syntax for rules (`add`, `delete`, `flush`, `zero`, `show`,
//!   `list`), for `pipe`, `queue` and `sched` objects, and for the sysctls the
//!   engine mirrors; units as FreeBSD reads them (`queue 200kb` is 204800 bytes).
//! - Queue management as ipfw writes it (`droptail`, `red`/`gred
//!   w_q/min_th/max_th/max_p`, `codel ...`, `pie ...`, the flowset's `ecn`),
//!   and scheduler parameters, both read from the engine's plug-in tables.
//!   What a command leaves out stays out: the engine fills it from the
//!   default sysctls when it applies the command, as FreeBSD's kernel does.
//! - netem's and mahimahi's impairments as options of the same objects:
//!   `delay T jitter J` (or netem's `delay T J [C]`) with `correlation`,
//!   `distribution` (built in or a tc `.dist` file) and `unordered`;
//!   `reorder`, `overhead`/`cellsize`, `slot` and `trace FILE` on the link;
//!   `loss` (random, `gemodel`, `state`), `duplicate` and `corrupt` on the
//!   queue. Probabilities are fractions (`0.01`) or percentages (`1%`);
//!   unlike tc, a bare number is a fraction. `show` prints what is set on an
//!   `impair:` line under FreeBSD's.
//! - `pipe|queue|sched N modify OPTIONS`: only the option groups given
//!   change ([`Fields`](dummynet_engine::config::Fields)).
//! - `at T COMMAND`: a command applied T after the schedule is (a block of
//!   them, optionally with `repeat every P`, in a commands file).
//! - Errors that quote the offending token, show its column with a caret,
//!   and suggest the keyword that was probably meant.
//! - A canonical text for every rule: printing a parsed rule and parsing it
//!   again gives the same rule.
//!
//! What it does not: it never touches the engine, so it checks syntax and
//! units but not references or limits that depend on state (a queue size
//! above `pipe_slot_limit`, a rule sending to a pipe that does not exist);
//! [`dummynet_engine::Engine::apply`] checks those. FreeBSD features the engine
//! lacks (`keep-state`, NAT...) are recognised and refused with an
//! error saying so, rather than misread as typos.

#![forbid(unsafe_code)]

use std::path::Path;

use dummynet_engine::config::Schedule;
use dummynet_engine::Command;

mod aqm;
mod command;
mod context;
mod dnparse;
mod error;
mod files;
mod impair;
mod lexer;
mod names;
mod netem_words;
mod rule;
mod rulefmt;
mod ruleopt;
mod sets;
mod show;
mod tables;
pub mod tc;
mod units;

pub use error::{suggest, ErrorKind, FileError, ParseError, FIELD_NAMES};
pub use files::{read_limited, FileKind, ReadError, MAX_FILE_BYTES};
pub use rule::{resolve_host_names, resolve_host_names_with};
pub use rulefmt::format_rule_body;
pub use show::{
    format_log, format_pipes, format_queues, format_rules, format_rules_with, format_scheds,
    format_sets, format_tables, NoSuchTable, RuleShow,
};

use command::{FileLine, Mode};
use context::Context;

/// Command-line flags, given before the command (`ipfw -fq flush`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// `-f`: do not ask for confirmation (`flush`).
    pub force: bool,
    /// `-q`: quiet. The parser also sets `force`, as FreeBSD's `-q` implies `-f`.
    pub quiet: bool,
    /// `-t` (or `-T`): show the last match time of each rule.
    pub timestamps: bool,
    /// `-T`: as seconds since the Unix epoch.
    pub epoch: bool,
    /// `-d`: show the dynamic rules after the static ones (`-e`: expired
    /// ones too; this engine drops a state when it expires, so the same).
    pub dynamic: bool,
    /// `-S`: show each rule's set.
    pub sets: bool,
    /// `-a`: `list` with counters, as `show`.
    pub counters: bool,
}

/// What a line asks for.
// `Apply` is large (a flowset with its AQM parameters inline); statements
// are control-plane values made one per command line, so size is no cost.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// A configuration change for the engine.
    Apply(Command),
    /// Print something from a [`Snapshot`](dummynet_engine::Snapshot).
    Show(ShowRequest),
    /// Accepted and deliberately ignored, with the reason
    /// (`kldload ipfw dummynet`: everything is built in).
    Nop(&'static str),
}

/// What to print, and for which numbers (empty: all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShowRequest {
    /// `show` (with counters) or `list` (without).
    Rules {
        numbers: Vec<u16>,
        counters: bool,
    },
    Pipes(Vec<u32>),
    Queues(Vec<u32>),
    Scheds(Vec<u32>),
    /// `set show`: which sets are enabled.
    Sets,
    /// `table N list` (`None`: `table all list`).
    Tables(Option<dummynet_engine::config::TableName>),
    /// `memory` (not FreeBSD's): the engine's memory by part, now and at
    /// worst for the configuration.
    Memory,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub flags: Flags,
    pub statement: Statement,
    /// Warnings about what was taken as written but may not be what was
    /// meant (`bw 10` is 10 bit/s), for the user.
    pub notes: Vec<String>,
}

/// Parses one command line, as typed at a shell or pasted from an article:
/// an optional `ipfw`/`dnctl` (or a path to either), an optional `# ` or
/// `$ ` prompt, flags, the command, and an optional trailing `# comment`.
/// A blank line or a bare comment is [`Statement::Nop`].
///
/// A `profile FILE` is read relative to the current directory.
pub fn parse_command(line: &str) -> Result<Parsed, ParseError> {
    let parsed = command::parse_line(line, Mode::Line, Context::default())?;
    Ok(parsed.unwrap_or(Parsed {
        flags: Flags::default(),
        statement: Statement::Nop("empty line"),
        notes: Vec::new(),
    }))
}

/// Parses a command given as argv words (after the program name), as a shell
/// passes `ipfw pipe 1 config bw 1Mbit/s`. Error positions refer to the
/// words joined by single spaces, which is also the line the error shows.
pub fn parse_args(args: &[String]) -> Result<Parsed, ParseError> {
    parse_args_in(args, None)
}

/// [`parse_args`] for a command typed elsewhere: a `profile FILE` is read
/// relative to `base_dir` (the daemon uses the client's working directory).
pub fn parse_args_in(args: &[String], base_dir: Option<&Path>) -> Result<Parsed, ParseError> {
    parse_argv(args, base_dir, false)
}

/// [`parse_args_in`] for a caller the daemon does not trust with its own
/// (root) view of the file system: a command that names a file (`profile`,
/// `trace`, a `distribution` table) is refused with an error at the name,
/// unread.
pub fn parse_args_untrusted(
    args: &[String],
    base_dir: Option<&Path>,
) -> Result<Parsed, ParseError> {
    parse_argv(args, base_dir, true)
}

fn parse_argv(
    args: &[String],
    base_dir: Option<&Path>,
    refuse_files: bool,
) -> Result<Parsed, ParseError> {
    let line = args.join(" ");
    match command::parse_line(
        &line,
        Mode::Argv,
        Context {
            base_dir,
            dnctl: false,
            refuse_files,
        },
    )? {
        Some(p) => Ok(p),
        None => Err(ParseError::new(
            ErrorKind::Syntax,
            "expected a command (add, delete, flush, show, pipe, queue, sched, ...), found nothing",
            &line,
            0,
            0,
        )),
    }
}

/// Parses a commands file: one command per line, blank lines and `#`
/// comments ignored (a line starting with `#` is a comment even if a command
/// follows, so commenting a command out works). Returns each command with its
/// 1-based line number; stops at the first error. Profiles are read relative
/// to `base_dir` (usually the file's directory), else the current directory.
///
/// Lines `at T COMMAND` schedule COMMAND at T after the file is applied
/// (T carries its unit: `5s`, `1500ms`, `2min`; a bare number is refused as
/// ambiguous). Consecutive `at` lines, whose times must not decrease, form
/// one block, returned as a single [`Command::Schedule`] at the line of its
/// first `at`; blank lines and comments do not end a block, any other line
/// does. A `repeat every P` line right after a block makes it cycle with
/// period P (at least the block's last T). A `sysctl` that sets an AQM or
/// scheduler default changes what later commands get when they are
/// applied, in order, as on FreeBSD running the file line by line; a
/// scheduled one, when it runs.
pub fn parse_file(text: &str, base_dir: Option<&Path>) -> Result<Vec<(usize, Parsed)>, FileError> {
    let mut out: Vec<(usize, Parsed)> = Vec::new();
    // Whether the last entry of `out` is a block of `at` lines that the
    // next `at` line extends.
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        let ctx = Context {
            base_dir,
            dnctl: false,
            refuse_files: false,
        };
        let last = open_block(&mut out, in_block)
            .and_then(|s| s.steps.last())
            .map(|(t, _)| *t);
        let parsed = command::parse_file_line(line, ctx, last)
            .map_err(|error| FileError { line: i + 1, error })?;
        match parsed {
            // Blank lines and comments leave a block open.
            None => {}
            Some(FileLine::At {
                flags,
                offset,
                command,
            }) => {
                if let Some(s) = open_block(&mut out, in_block) {
                    s.steps.push((offset, command));
                } else {
                    let statement = Statement::Apply(Command::Schedule(Schedule {
                        steps: vec![(offset, command)],
                        every: None,
                    }));
                    out.push((
                        i + 1,
                        Parsed {
                            flags,
                            statement,
                            notes: Vec::new(),
                        },
                    ));
                    in_block = true;
                }
            }
            Some(FileLine::Repeat(every)) => {
                // parse_file_line refuses a `repeat` without an open block.
                if let Some(s) = open_block(&mut out, in_block) {
                    s.every = Some(every);
                }
                in_block = false;
            }
            Some(FileLine::Now(parsed)) => {
                out.push((i + 1, parsed));
                in_block = false;
            }
        }
    }
    Ok(out)
}

/// The schedule of the block of `at` lines being read, if one is `open`:
/// always the last entry of [`parse_file`]'s output so far.
fn open_block(out: &mut [(usize, Parsed)], open: bool) -> Option<&mut Schedule> {
    match out.last_mut().filter(|_| open) {
        Some((
            _,
            Parsed {
                statement: Statement::Apply(Command::Schedule(s)),
                ..
            },
        )) => Some(s),
        _ => None,
    }
}
