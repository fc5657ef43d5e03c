//! The control plane: a Unix socket that takes ipfw/dnctl command lines and
//! answers with what the command prints, plus the client that `dummynet
//! ipfw`, `dummynet dnctl` and the `ipfw`/`dnctl` names of the binary use.
//!
//! One request per connection, one JSON object per line each way:
//! `{"argv": ["pipe", "1", "show"], "cwd": "/where/the/user/is"}` (or
//! `{"stats": true}`), answered by `{"status": 0, "stdout": "...",
//! "stderr": "..."}`. Command lines are parsed here, on the control thread,
//! so a typo never reaches the data plane; the parsed command is applied by
//! the data plane between two packets.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use dummynet_engine::{Engine, Nanos, Payload};
use dummynet_lang::{ShowRequest, Statement};
use serde::{Deserialize, Serialize};

use super::dataplane::{Request, RequestKind};

/// Where the daemon listens unless told otherwise (`--socket`, or the
/// `DUMMYNET_SOCKET` environment variable for both sides).
pub const DEFAULT_SOCKET: &str = "/run/dummynet.sock";

/// The socket path: `DUMMYNET_SOCKET` if set, else [`DEFAULT_SOCKET`].
pub fn default_socket() -> PathBuf {
    std::env::var_os("DUMMYNET_SOCKET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

#[derive(Debug, Serialize, Deserialize, Default)]
pub struct ClientRequest {
    #[serde(default)]
    pub argv: Vec<String>,
    /// The client's working directory, for `profile FILE` paths.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub stats: bool,
}

/// What a command prints and its exit status, as ipfw would give them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Reply {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Reply {
    pub fn ok(stdout: impl Into<String>) -> Reply {
        Reply {
            status: 0,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    pub fn err(status: i32, stderr: impl Into<String>) -> Reply {
        Reply {
            status,
            stdout: String::new(),
            stderr: stderr.into(),
        }
    }
}

/// Exit status of a command the parser or the engine refused (ipfw uses
/// EX_USAGE for bad syntax and EX_DATAERR for refused values).
const EX_USAGE: i32 = 64;
const EX_DATAERR: i32 = 65;
pub(crate) const EX_UNAVAILABLE: i32 = 69;

/// Applies or shows one parsed command against the engine.
pub fn execute<P: Payload>(
    engine: &mut Engine<P>,
    now: Nanos,
    parsed: &dummynet_lang::Parsed,
) -> Reply {
    match &parsed.statement {
        Statement::Apply(cmd) => match engine.apply(now, cmd.clone()) {
            // Applied; the parser's doubts and the values the engine
            // brought within a plug-in's bounds are warnings.
            Ok(()) => Reply {
                stderr: parsed
                    .notes
                    .iter()
                    .cloned()
                    .chain(engine.take_notes())
                    .map(|n| format!("ipfw: warning: {n}\n"))
                    .collect(),
                ..Reply::ok("")
            },
            Err(e) => Reply::err(EX_DATAERR, format!("ipfw: {e}\n")),
        },
        Statement::Show(req) => {
            let snap = engine.snapshot();
            let f = parsed.flags;
            let text = match req {
                ShowRequest::Rules { numbers, counters } => dummynet_lang::format_rules_with(
                    &snap,
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
                ShowRequest::Pipes(n) => dummynet_lang::format_pipes(&snap, n),
                ShowRequest::Queues(n) => dummynet_lang::format_queues(&snap, n),
                ShowRequest::Scheds(n) => dummynet_lang::format_scheds(&snap, n),
                ShowRequest::Sets => dummynet_lang::format_sets(&snap),
                ShowRequest::Tables(name) => {
                    match dummynet_lang::format_tables(&snap, name.as_ref()) {
                        Ok(t) => t,
                        Err(e) => return Reply::err(EX_DATAERR, format!("ipfw: {e}\n")),
                    }
                }
            };
            Reply::ok(text)
        }
        Statement::Nop(_) => Reply::ok(""),
    }
}

/// A listening control socket; the file is removed when this drops.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Why the daemon could not take its socket.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("a dummynet daemon is already listening on {0}; stop it first or pass --socket PATH")]
    Taken(PathBuf),
    #[error("{0} exists and is not a socket; it is left alone: remove it or pass --socket PATH")]
    NotASocket(PathBuf),
    #[error("cannot listen on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ControlServer {
    /// Listens on `path` (mode 0600: root only, as ipfw is), sending parsed
    /// commands to the data plane through `requests` and waking it with a
    /// byte on `wake`. A stale socket file (no one answering) is replaced; a
    /// live daemon's is refused, and so is anything that is not a socket
    /// (never removed: it is someone's file).
    pub fn start(
        path: &Path,
        requests: Sender<Request>,
        wake: UnixStream,
    ) -> Result<ControlServer, ServerError> {
        let io_err = |source| ServerError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(ServerError::NotASocket(path.to_path_buf()))
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => return Err(ServerError::Taken(path.to_path_buf())),
                // Nobody listens: a daemon killed before it could remove it.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(io_err)?
                }
                Err(e) => return Err(io_err(e)),
            },
        }
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(io_err)?;
            }
        }
        let listener = UnixListener::bind(path).map_err(io_err)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
        listener.set_nonblocking(true).map_err(io_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("dummynet-control".into())
            .spawn(move || accept_loop(listener, requests, wake, flag))
            .map_err(io_err)?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether `path` is a socket file on which nobody listens: a daemon's that
/// was killed before it could remove it. Only "connection refused" says
/// so; a live socket, a file of another type or an error that proves
/// nothing (permission denied) does not.
pub fn is_stale_socket(path: &Path) -> bool {
    let socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    socket
        && matches!(
            UnixStream::connect(path),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
        )
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(
    listener: UnixListener,
    requests: Sender<Request>,
    mut wake: UnixStream,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let reply = match read_request(&conn) {
                    Ok(req) => dispatch(req, &requests, &mut wake),
                    Err(e) => Reply::err(EX_USAGE, format!("dummynet: bad control request: {e}\n")),
                };
                let _ = write_reply(&conn, &reply);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn read_request(conn: &UnixStream) -> Result<ClientRequest, String> {
    conn.set_nonblocking(false).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    // A request is a few hundred bytes; a megabyte is plenty and bounds a
    // client that never sends a newline.
    BufReader::new(conn.take_limited())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| e.to_string())
}

trait TakeLimited {
    fn take_limited(&self) -> std::io::Take<&UnixStream>;
}

impl TakeLimited for UnixStream {
    fn take_limited(&self) -> std::io::Take<&UnixStream> {
        std::io::Read::take(self, 1 << 20)
    }
}

fn write_reply(mut conn: &UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut text = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    text.push('\n');
    conn.write_all(text.as_bytes())
}

/// Parses a command line and applies it (the engine fills what it leaves
/// out from its current settings).
pub fn run_command<P: Payload>(
    engine: &mut Engine<P>,
    now: Nanos,
    argv: &[String],
    cwd: Option<&Path>,
) -> Reply {
    match dummynet_lang::parse_args_in(argv, cwd) {
        Ok(parsed) => execute(engine, now, &parsed),
        Err(e) => {
            let status = if e.kind == dummynet_lang::ErrorKind::Unavailable {
                EX_UNAVAILABLE
            } else {
                EX_USAGE
            };
            Reply::err(status, format!("ipfw: {e}\n"))
        }
    }
}

fn dispatch(req: ClientRequest, requests: &Sender<Request>, wake: &mut UnixStream) -> Reply {
    let kind = if req.stats {
        RequestKind::Stats
    } else {
        // Parsed on the data-plane thread for now (issue 14 moves it off).
        RequestKind::Command {
            argv: req.argv,
            cwd: req.cwd,
        }
    };
    let (tx, rx) = mpsc::channel();
    if requests.send(Request { kind, reply: tx }).is_err() {
        return Reply::err(EX_UNAVAILABLE, "dummynet: the data plane has stopped\n");
    }
    let _ = wake.write_all(&[1]);
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| {
            Reply::err(
                EX_UNAVAILABLE,
                "dummynet: the data plane did not answer within 10 s\n",
            )
        })
}

/// Why a client call failed before getting an answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "no dummynet daemon is listening on {0}.\n\
         Start one with `dummynet run --bridge IF_A IF_B` or `dummynet run --host` \
         (as root), or point DUMMYNET_SOCKET at the socket of a running one."
    )]
    NotRunning(PathBuf),
    #[error("permission denied on {0}: the control socket is root-only, as ipfw is")]
    Denied(PathBuf),
    #[error("talking to the daemon on {path}: {msg}")]
    Protocol { path: PathBuf, msg: String },
}

/// Sends one request and returns the daemon's answer.
pub fn call(path: &Path, req: &ClientRequest) -> Result<Reply, ClientError> {
    let proto = |msg: String| ClientError::Protocol {
        path: path.to_path_buf(),
        msg,
    };
    let mut conn = UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => ClientError::Denied(path.to_path_buf()),
        _ => ClientError::NotRunning(path.to_path_buf()),
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(15)))
        .map_err(|e| proto(e.to_string()))?;
    let mut text = serde_json::to_string(req).map_err(|e| proto(e.to_string()))?;
    text.push('\n');
    conn.write_all(text.as_bytes())
        .map_err(|e| proto(e.to_string()))?;
    let mut line = String::new();
    BufReader::new(conn.take_limited_owned())
        .read_line(&mut line)
        .map_err(|e| proto(e.to_string()))?;
    serde_json::from_str(&line).map_err(|e| proto(format!("unreadable answer: {e}")))
}

trait TakeLimitedOwned {
    fn take_limited_owned(self) -> std::io::Take<UnixStream>;
}

impl TakeLimitedOwned for UnixStream {
    fn take_limited_owned(self) -> std::io::Take<UnixStream> {
        // `show` of a million flows is large; 256 MiB bounds a broken peer.
        std::io::Read::take(self, 256 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &mut Engine<()>, line: &str) -> Reply {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        run_command(engine, 0, &argv, None)
    }

    #[test]
    fn a_sysctl_sets_the_default_of_a_later_command() {
        let mut engine: Engine<()> = Engine::new(1);
        let r = run(&mut engine, "pipe 1 config codel");
        assert_eq!(r.status, 0, "{}", r.stderr);
        let show = run(&mut engine, "pipe 1 show").stdout;
        assert!(show.contains("AQM CoDel target 5ms"), "{show}");

        // FreeBSD's unit for this sysctl is microseconds.
        let r = run(&mut engine, "sysctl net.inet.ip.dummynet.codel.target=7000");
        assert_eq!(r.status, 0, "{}", r.stderr);
        run(&mut engine, "pipe 2 config codel");
        let show = run(&mut engine, "pipe 2 show").stdout;
        assert!(show.contains("AQM CoDel target 7ms"), "{show}");
    }

    /// FreeBSD's own test script gives fq_codel `target 0ms interval 0ms`:
    /// taken, brought within bounds, with a warning on stderr (status 0).
    #[test]
    fn a_value_out_of_a_plug_in_bounds_is_clamped_with_a_warning() {
        let mut engine: Engine<()> = Engine::new(1);
        let r = run(
            &mut engine,
            "sched 1 config type fq_codel target 0ms interval 0ms",
        );
        assert_eq!(r.status, 0, "{}", r.stderr);
        assert_eq!(
            r.stderr.matches("ipfw: warning: fq_codel").count(),
            2,
            "{}",
            r.stderr
        );
        let show = run(&mut engine, "sched 1 show").stdout;
        assert!(show.contains("target 1us interval 1us"), "{show}");
        // The next command, within bounds, says nothing.
        let r = run(&mut engine, "pipe 1 config bw 1Mbit/s");
        assert_eq!((r.status, r.stderr.as_str()), (0, ""));
        // The parser's doubts come the same way.
        let r = run(&mut engine, "pipe 1 config bw 10");
        assert_eq!(r.status, 0, "{}", r.stderr);
        assert!(
            r.stderr.starts_with("ipfw: warning: `bw 10` is 10 bit/s"),
            "{}",
            r.stderr
        );
    }

    /// `dnctl flush` (the client sends its own name first) removes the
    /// pipes and keeps the rules; `ipfw flush` the opposite.
    #[test]
    fn dnctl_flush_is_about_pipes_and_ipfw_flush_about_rules() {
        let mut engine: Engine<()> = Engine::new(1);
        for line in [
            "pipe 1 config bw 1Mbit/s",
            "add 100 pipe 1 ip from any to any",
        ] {
            assert_eq!(run(&mut engine, line).status, 0, "{line}");
        }
        assert_eq!(run(&mut engine, "dnctl -q flush").status, 0);
        assert!(run(&mut engine, "pipe show").stdout.is_empty());
        assert!(run(&mut engine, "show").stdout.contains("00100"));
        assert_eq!(run(&mut engine, "ipfw -q flush").status, 0);
        assert!(!run(&mut engine, "show").stdout.contains("00100"));
    }

    #[test]
    fn a_bad_command_is_a_usage_error_and_changes_nothing() {
        let mut engine: Engine<()> = Engine::new(1);
        let r = run(&mut engine, "pipe 1 config codel target 5parsecs");
        assert_eq!(r.status, EX_USAGE);
        assert!(r.stderr.contains("5parsecs"), "{}", r.stderr);
        assert!(run(&mut engine, "pipe show").stdout.is_empty());
    }
}
