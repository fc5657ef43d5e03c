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

use std::path::PathBuf;

use dummynet_engine::{ConfigError, ConfigErrorKind};
use serde::{Deserialize, Serialize};

mod answer;
pub use answer::*;
// What a client may cost, where the protocol's users found it first.
pub use crate::limits::{BusyBackoff, Limits, BUSY_WAIT};

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
    /// `dummynet shell --join`: a link in this daemon for as long as the
    /// connection lasts ([`super::join`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<JoinRequest>,
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
    /// Boxed: most replies have none, and a reply travels in `Result`s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Box<ErrorAt>>,
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
        self.error = Some(Box::new(at));
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

/// What a joining shell asks for: its link, as `dummynet shell` takes it.
#[derive(Debug, Serialize, Deserialize, Default, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub up: Option<String>,
    #[serde(default)]
    pub down: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_request_and_an_old_reply_still_read() {
        let req: ClientRequest =
            serde_json::from_str(r#"{"argv": ["show"], "cwd": "/tmp", "stats": false}"#).unwrap();
        assert_eq!(req.argv, ["show"]);
        assert!(req.commands.is_none());
        let r: Reply =
            serde_json::from_str(r#"{"status": 0, "stdout": "x", "stderr": ""}"#).unwrap();
        assert_eq!(r, Reply::ok("x"));
    }
}
