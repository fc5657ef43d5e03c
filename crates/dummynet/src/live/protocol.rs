//! The control protocol: what a client asks the daemon and what it hears
//! back, and the typed work between the two. [`control`](super::control)
//! only moves the bytes (one JSON line each way on a Unix socket, with its
//! limits and threads); an HTTP front end calls the same functions here
//! ([`handle`], or [`parse_batch`] then [`apply_batch`], or [`snapshot`]
//! and the [`views`](super::views)) and gets the same [`Reply`].
//!
//! A request is `{"argv": [...], "cwd": ..., "json": bool}` (one command),
//! `{"commands": [...], "cwd": ...}` (a batch, all or nothing) or
//! `{"stats": true, "json": bool}`. A reply is `{"status", "stdout",
//! "stderr"}` as ipfw would give them (status: sysexits), plus, when it
//! failed, `"kind"` (an [`ErrorKind`]: what went wrong, for a program)
//! and, for a command that did not parse or a batch, `"error"` (where:
//! [`ErrorAt`]). Command lines are parsed on the caller's thread, so a
//! typo never reaches the data plane; the data plane only applies typed
//! commands or copies its state, which is rendered here.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use dummynet_engine::{BatchError, Command, ConfigError, ConfigErrorKind, Nanos, Snapshot};
use dummynet_lang::{ShowRequest, Statement};
use serde::{Deserialize, Serialize};

use super::control::Limits;
use super::dataplane::{Answer, HostView, Request, RequestKind, Ticket};
use super::views;

/// One request, as a client sends it.
#[derive(Debug, Serialize, Deserialize, Default, Clone, PartialEq)]
pub struct ClientRequest {
    /// One command line, as words (`["pipe", "1", "show"]`), the program
    /// name left out (`dnctl` first for dnctl's meaning of `flush`).
    #[serde(default)]
    pub argv: Vec<String>,
    /// The client's working directory, for the files commands name.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub stats: bool,
    /// With `stats` or a read command (`show`, `pipe show`...): stdout is
    /// one JSON document ([`super::stats_json`], [`super::views`]).
    #[serde(default)]
    pub json: bool,
    /// A batch, instead of `argv`: applied all or nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<BatchCommand>>,
}

/// One command of a batch: a line (split at whitespace) or its words.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq, Eq)]
#[serde(untagged)]
pub enum BatchCommand {
    Line(String),
    Words(Vec<String>),
}

impl BatchCommand {
    fn words(&self) -> Vec<String> {
        match self {
            BatchCommand::Line(l) => l.split_whitespace().map(String::from).collect(),
            BatchCommand::Words(w) => w.clone(),
        }
    }
}

/// What went wrong, for a program to act on (an HTTP API: the status
/// code). The exit status stays ipfw's; this says more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request or a command does not follow the grammar (EX_USAGE).
    Syntax,
    /// A value out of range, a file that cannot be read, or a value the
    /// engine refuses (EX_USAGE from the parser, EX_DATAERR from the engine).
    Invalid,
    /// A rule, pipe, queue, scheduler, table or entry that does not exist
    /// (EX_DATAERR).
    NotFound,
    /// At odds with what exists: a table already there or still used by a
    /// rule, no room for another schedule (EX_DATAERR).
    Conflict,
    /// A FreeBSD feature dummynet does not do (EX_UNAVAILABLE).
    Unavailable,
    /// Too many clients at once; try again (EX_UNAVAILABLE).
    Busy,
    /// The caller may not use the socket (EX_UNAVAILABLE).
    Denied,
    /// The data plane did not take the request in time; it was withdrawn
    /// and will not take effect (EX_UNAVAILABLE).
    Timeout,
    /// The data plane took the request but did not answer in time: it may
    /// yet take effect (EX_TEMPFAIL).
    Pending,
    /// The data plane has stopped (EX_UNAVAILABLE).
    Stopped,
    /// The daemon answered something it should not have: a bug.
    Internal,
}

/// Where a failed request went wrong: which command of a batch, and
/// where in the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAt {
    /// The command's place in the batch, from 0; absent for a single command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The command, as its words joined by spaces.
    pub command: String,
    /// 1-based column of the culprit in `command`, for a parse error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The culprit's text (absent when the command ended too early).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
}

/// What a command prints and its exit status, as ipfw would give them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Reply {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    /// Set when `status` is not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorAt>,
}

impl Reply {
    pub fn ok(stdout: impl Into<String>) -> Reply {
        Reply {
            status: 0,
            stdout: stdout.into(),
            stderr: String::new(),
            kind: None,
            error: None,
        }
    }

    pub fn err(kind: ErrorKind, status: i32, stderr: impl Into<String>) -> Reply {
        Reply {
            status,
            stdout: String::new(),
            stderr: stderr.into(),
            kind: Some(kind),
            error: None,
        }
    }

    fn at(mut self, at: ErrorAt) -> Reply {
        self.error = Some(at);
        self
    }
}

/// Exit statuses (sysexits), as ipfw gives them: EX_USAGE for bad syntax,
/// EX_DATAERR for values the kernel refuses.
pub const EX_USAGE: i32 = 64;
pub const EX_DATAERR: i32 = 65;
pub const EX_UNAVAILABLE: i32 = 69;
/// A request the data plane took but did not answer in time: it may still
/// take effect (sysexits' "try again later").
pub const EX_TEMPFAIL: i32 = 75;

/// The kind of an engine refusal.
pub fn config_kind(e: &ConfigError) -> ErrorKind {
    match e.kind() {
        ConfigErrorKind::Invalid => ErrorKind::Invalid,
        ConfigErrorKind::NotFound => ErrorKind::NotFound,
        ConfigErrorKind::Conflict => ErrorKind::Conflict,
    }
}

/// The way to the data plane: its request channel and the socket whose
/// readability wakes it.
#[derive(Clone)]
pub struct PlaneLink {
    pub requests: Sender<Request>,
    pub wake: Arc<UnixStream>,
}

impl PlaneLink {
    /// Sends `kind` and waits up to `timeout` for the answer. A request not
    /// yet taken by then is abandoned, and the data plane skips it: the
    /// error says it was not applied, and that stays true. One already
    /// taken is being answered, so its answer is awaited.
    pub fn ask(&self, kind: RequestKind, timeout: Duration) -> Result<Answer, Reply> {
        let stopped = || {
            Reply::err(
                ErrorKind::Stopped,
                EX_UNAVAILABLE,
                "dummynet: the data plane has stopped\n",
            )
        };
        let (tx, rx) = mpsc::channel();
        let ticket = Ticket::default();
        let req = Request {
            kind,
            reply: tx,
            ticket: ticket.clone(),
        };
        if self.requests.send(req).is_err() {
            return Err(stopped());
        }
        // Non-blocking: a full buffer means a wake-up is already pending.
        let _ = (&*self.wake).write(&[1]);
        match rx.recv_timeout(timeout) {
            Ok(answer) => Ok(answer),
            Err(mpsc::RecvTimeoutError::Timeout) if ticket.abandon() => Err(Reply::err(
                ErrorKind::Timeout,
                EX_UNAVAILABLE,
                format!(
                    "dummynet: the data plane did not answer within {}; \
                     the request was withdrawn and will not take effect\n",
                    humanize(timeout)
                ),
            )),
            // Taken: the data plane is acting on it, and its answer should
            // follow at once. It gets one more timeout; past it the client
            // is told the request is still pending (it was taken, so it
            // cannot be withdrawn), rather than held without bound.
            Err(mpsc::RecvTimeoutError::Timeout) => match rx.recv_timeout(timeout) {
                Ok(answer) => Ok(answer),
                Err(mpsc::RecvTimeoutError::Timeout) => Err(Reply::err(
                    ErrorKind::Pending,
                    EX_TEMPFAIL,
                    format!(
                        "dummynet: the data plane took the request but has not answered \
                         within {}; it is still pending and may yet take effect: \
                         check with `ipfw show` or `pipe show`\n",
                        humanize(timeout.saturating_mul(2))
                    ),
                )),
                Err(mpsc::RecvTimeoutError::Disconnected) => Err(stopped()),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(stopped()),
        }
    }
}

fn humanize(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn unexpected() -> Reply {
    Reply::err(
        ErrorKind::Internal,
        EX_UNAVAILABLE,
        "dummynet: unexpected answer\n",
    )
}

/// Who sent a request, as far as the files its command names go.
#[derive(Debug, Clone)]
pub enum Caller {
    /// Root or the daemon's own user: files are opened with the daemon's
    /// rights, which are the caller's.
    Trusted,
    /// A member of `--socket-group`: files are opened on the client's
    /// thread with this identity (the peer's uid, gid and groups), so the
    /// caller reads only what it could read itself.
    As(dummynet_io::fsident::FsIdentity),
    /// Files are refused unread (a daemon that cannot take another
    /// identity, or the fuzzer).
    NoFiles,
}

/// Answers one request: parses it here, on the caller's thread, and hands
/// the data plane only typed work. Files the commands name are opened with
/// the `caller`'s rights (see [`Caller`]).
pub fn handle(req: ClientRequest, caller: &Caller, link: &PlaneLink, limits: &Limits) -> Reply {
    let timeout = limits.answer_timeout;
    if let Some(commands) = &req.commands {
        if !req.argv.is_empty() || req.stats {
            return Reply::err(
                ErrorKind::Syntax,
                EX_USAGE,
                "dummynet: a request has `commands` (a batch), `argv` (one command) \
                 or `stats`, not several\n",
            );
        }
        return match parse_batch(commands, req.cwd.as_deref(), caller) {
            Ok(batch) => apply_batch(batch, link, timeout),
            Err(reply) => reply,
        };
    }
    if req.stats {
        return match link.ask(RequestKind::Stats, timeout) {
            Ok(Answer::Stats(report)) if req.json => {
                Reply::ok(super::stats_json::StatsJson::of(&report).to_line() + "\n")
            }
            Ok(Answer::Stats(report)) => Reply::ok(report.to_string()),
            Ok(_) => unexpected(),
            Err(reply) => reply,
        };
    }
    let parsed = match parse_as(&req.argv, req.cwd.as_deref(), caller) {
        Ok(p) => p,
        Err(e) => return parse_error(&e, None),
    };
    match &parsed.statement {
        Statement::Apply(cmd) => {
            let kind = RequestKind::Apply {
                command: Box::new(cmd.clone()),
                host: host_view(),
            };
            match link.ask(kind, timeout) {
                Ok(Answer::Applied(result)) => applied(&parsed.notes, result),
                Ok(_) => unexpected(),
                Err(reply) => reply,
            }
        }
        Statement::Show(show) => match snapshot(link, timeout) {
            Ok((snap, now)) => render(show, parsed.flags, &snap, now, req.json),
            Err(reply) => reply,
        },
        Statement::Nop(_) => Reply::ok(""),
    }
}

/// A copy of the engine's state, taken by the data plane between two
/// packets, and its clock then: for `show`, rendered by the caller
/// ([`super::views`] for JSON).
pub fn snapshot(link: &PlaneLink, timeout: Duration) -> Result<(Box<Snapshot>, Nanos), Reply> {
    match link.ask(RequestKind::Snapshot, timeout) {
        Ok(Answer::Snapshot { snap, now }) => Ok((snap, now)),
        Ok(_) => Err(unexpected()),
        Err(reply) => Err(reply),
    }
}

/// A batch parsed and ready for the data plane ([`parse_batch`]).
#[derive(Debug, Clone)]
pub struct Batch {
    /// The configuration commands, in order.
    commands: Vec<Command>,
    /// For each, its place in the request and its text.
    origin: Vec<(usize, String)>,
    /// The parser's warnings, each with its command's place.
    notes: Vec<String>,
}

impl Batch {
    /// How many commands the data plane will apply (blank ones and
    /// `kldload`-like no-ops left out).
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

/// Parses every command of a batch, on the caller's thread, before anything
/// is sent: the first that does not parse is the answer (`error.index`
/// names it, `error.column` and `error.found` the culprit in it). Only
/// configuration commands may be batched (not `show`).
pub fn parse_batch(
    commands: &[BatchCommand],
    cwd: Option<&std::path::Path>,
    caller: &Caller,
) -> Result<Batch, Reply> {
    if commands.is_empty() {
        return Err(Reply::err(
            ErrorKind::Syntax,
            EX_USAGE,
            "dummynet: an empty batch: `commands` needs at least one command\n",
        ));
    }
    let mut batch = Batch {
        commands: Vec::new(),
        origin: Vec::new(),
        notes: Vec::new(),
    };
    for (index, c) in commands.iter().enumerate() {
        let words = c.words();
        let text = words.join(" ");
        let parsed = parse_as(&words, cwd, caller).map_err(|e| parse_error(&e, Some(index)))?;
        match parsed.statement {
            Statement::Apply(cmd) => {
                batch.commands.push(cmd);
                batch.origin.push((index, text));
            }
            Statement::Show(_) => {
                return Err(Reply::err(
                    ErrorKind::Syntax,
                    EX_USAGE,
                    format!(
                        "ipfw: command {} of the batch (`{text}`) shows something; a batch \
                         takes only configuration commands: send it on its own\n",
                        index + 1
                    ),
                )
                .at(ErrorAt {
                    index: Some(index),
                    command: text,
                    column: Some(1),
                    found: None,
                }))
            }
            Statement::Nop(_) => {}
        }
        batch.notes.extend(
            parsed
                .notes
                .iter()
                .map(|n| format!("command {}: {n}", index + 1)),
        );
    }
    Ok(batch)
}

/// Applies a parsed batch as one unit between two packets
/// ([`dummynet_engine::Engine::apply_all`]): every command, or none if the
/// engine refuses one (`error.index` names it); packets already queued are
/// kept either way.
pub fn apply_batch(batch: Batch, link: &PlaneLink, timeout: Duration) -> Reply {
    if batch.is_empty() {
        return applied(&batch.notes, Ok(Vec::new()));
    }
    let kind = RequestKind::ApplyAll {
        commands: batch.commands,
        host: host_view(),
    };
    match link.ask(kind, timeout) {
        Ok(Answer::AppliedAll(Ok(notes))) => applied(&batch.notes, Ok(notes)),
        Ok(Answer::AppliedAll(Err(BatchError { index, error }))) => {
            let (at, text) = batch.origin.get(index).cloned().unwrap_or_default();
            Reply::err(
                config_kind(&error),
                EX_DATAERR,
                format!(
                    "ipfw: command {} of the batch (`{text}`): {error}; \
                     none of the batch was applied\n",
                    at + 1
                ),
            )
            .at(ErrorAt {
                index: Some(at),
                command: text,
                column: None,
                found: None,
            })
        }
        Ok(_) => unexpected(),
        Err(reply) => reply,
    }
}

/// The answer to an applied (or refused) command: the parser's doubts and
/// the values the engine brought within a plug-in's bounds are warnings.
fn applied(parser_notes: &[String], result: Result<Vec<String>, ConfigError>) -> Reply {
    match result {
        Ok(notes) => Reply {
            stderr: parser_notes
                .iter()
                .chain(&notes)
                .map(|n| format!("ipfw: warning: {n}\n"))
                .collect(),
            ..Reply::ok("")
        },
        Err(e) => Reply::err(config_kind(&e), EX_DATAERR, format!("ipfw: {e}\n")),
    }
}

/// What `show` prints for `req`, from a copy of the engine's state taken
/// at `now`: ipfw's text, or with `json` one JSON document
/// ([`super::views`]).
pub fn render(
    req: &ShowRequest,
    f: dummynet_lang::Flags,
    snap: &Snapshot,
    now: Nanos,
    json: bool,
) -> Reply {
    if json {
        let line = match req {
            ShowRequest::Rules { numbers, .. } => {
                views::to_line(&views::rules(snap, numbers, f.dynamic))
            }
            ShowRequest::Pipes(n) => views::to_line(&views::pipes(snap, n)),
            ShowRequest::Queues(n) => views::to_line(&views::queues(snap, n)),
            ShowRequest::Scheds(n) => views::to_line(&views::scheds(snap, n)),
            ShowRequest::Sets => views::to_line(&views::sets(snap)),
            ShowRequest::Memory => views::to_line(&views::memory(snap)),
            ShowRequest::Tables(name) => match views::tables(snap, name.as_ref()) {
                Some(t) => views::to_line(&t),
                None => return no_table(name.as_ref()),
            },
        };
        return Reply::ok(line + "\n");
    }
    let text = match req {
        ShowRequest::Rules { numbers, counters } => dummynet_lang::format_rules_with(
            snap,
            &dummynet_lang::RuleShow {
                numbers,
                counters: *counters || f.counters,
                timestamps: f.timestamps,
                dynamic: f.dynamic,
                sets: f.sets,
                wall: Some((now, std::time::SystemTime::now())),
                epoch: f.epoch,
            },
        ),
        ShowRequest::Pipes(n) => dummynet_lang::format_pipes(snap, n),
        ShowRequest::Queues(n) => dummynet_lang::format_queues(snap, n),
        ShowRequest::Scheds(n) => dummynet_lang::format_scheds(snap, n),
        ShowRequest::Sets => dummynet_lang::format_sets(snap),
        ShowRequest::Memory => snap.memory.to_string(),
        ShowRequest::Tables(name) => match dummynet_lang::format_tables(snap, name.as_ref()) {
            Ok(t) => t,
            Err(_) => return no_table(name.as_ref()),
        },
    };
    Reply::ok(text)
}

fn no_table(name: Option<&dummynet_engine::config::TableName>) -> Reply {
    let name = name.map(ToString::to_string).unwrap_or_default();
    Reply::err(
        ErrorKind::NotFound,
        EX_DATAERR,
        format!("ipfw: table {name} does not exist\n"),
    )
}

/// The host as the engine should see it for a command: read here, in the
/// daemon's namespace (the control threads run where the data plane does),
/// so that /proc and netlink are never read on the data-plane thread.
fn host_view() -> HostView {
    HostView {
        addrs: super::local_addrs(),
        routes: super::routes::host_routes(),
    }
}

/// Parses a command line, opening the files it names as `caller`. The
/// identity is taken for the parse only, on this thread only.
fn parse_as(
    argv: &[String],
    cwd: Option<&std::path::Path>,
    caller: &Caller,
) -> Result<dummynet_lang::Parsed, dummynet_lang::ParseError> {
    match caller {
        Caller::Trusted => dummynet_lang::parse_args_in(argv, cwd),
        Caller::NoFiles => dummynet_lang::parse_args_untrusted(argv, cwd),
        Caller::As(who) => match dummynet_io::fsident::assume(who) {
            Ok(_as) => dummynet_lang::parse_args_in(argv, cwd),
            // Not root: files are refused, with the reason.
            Err(_) => dummynet_lang::parse_args_untrusted(argv, cwd),
        },
    }
}

/// The kind and exit status of a command that did not parse.
pub fn parse_kind(e: &dummynet_lang::ParseError) -> (ErrorKind, i32) {
    use dummynet_lang::ErrorKind as K;
    match e.kind {
        K::Syntax => (ErrorKind::Syntax, EX_USAGE),
        K::Range | K::File => (ErrorKind::Invalid, EX_USAGE),
        K::Unavailable => (ErrorKind::Unavailable, EX_UNAVAILABLE),
    }
}

/// The reply to a command that did not parse (`index`: its place in a
/// batch).
pub fn parse_error(e: &dummynet_lang::ParseError, index: Option<usize>) -> Reply {
    let (kind, status) = parse_kind(e);
    let stderr = match index {
        Some(i) => format!("ipfw: command {} of the batch: {e}\n", i + 1),
        None => format!("ipfw: {e}\n"),
    };
    Reply::err(kind, status, stderr).at(ErrorAt {
        index,
        command: e.source.clone(),
        column: Some(e.column),
        found: e.found().map(String::from),
    })
}

/// Applies or shows one parsed command against an engine the caller owns
/// (a test's; the daemon's goes through [`handle`]).
#[cfg(test)]
pub fn execute<P: dummynet_engine::Payload>(
    engine: &mut dummynet_engine::Engine<P>,
    now: Nanos,
    parsed: &dummynet_lang::Parsed,
    json: bool,
) -> Reply {
    match &parsed.statement {
        Statement::Apply(cmd) => applied(
            &parsed.notes,
            engine.apply(now, cmd.clone()).map(|()| engine.take_notes()),
        ),
        Statement::Show(req) => render(req, parsed.flags, &engine.snapshot(), now, json),
        Statement::Nop(_) => Reply::ok(""),
    }
}
