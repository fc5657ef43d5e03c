//! The command-line side of the control socket: `dummynet ipfw ...`,
//! `dummynet dnctl ...`, `dummynet stats`, and the binary run as `ipfw` or
//! `dnctl`; and the calls they make ([`call`]).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::control::{self, ClientRequest, Reply};
use crate::limits::{BusyBackoff, BUSY_WAIT};
use crate::protocol::ErrorKind;

/// Sends `args` (an ipfw or dnctl command line) to the daemon and prints its
/// answer; the exit status is the daemon's.
pub fn ipfw(tool: &str, args: Vec<String>) -> ExitCode {
    let (socket, args) = match take_socket(args) {
        Ok(taken) => taken,
        Err(e) => {
            eprintln!("{tool}: {e}");
            return ExitCode::from(64);
        }
    };
    let (json, args) = take_json(args);
    if args.is_empty() || matches!(args[0].as_str(), "-h" | "--help" | "help") {
        eprintln!(
            "usage: {tool} [--socket PATH] [--json] [-fqt] COMMAND ...\n  e.g. {tool} pipe 1 config bw 10Mbit/s delay 10ms\n       \
             {tool} add 100 pipe 1 ip from any to any out\n       {tool} show | {tool} pipe 1 show\n\
             --json: read commands (show, pipe show, table N list...) print one JSON document.\n\
             Commands go to the daemon on --socket PATH, else $DUMMYNET_SOCKET, else {}.",
            control::DEFAULT_SOCKET
        );
        return ExitCode::from(64);
    }
    // `dnctl flush` is not `ipfw flush`: the daemon is told which tool.
    let args: Vec<String> = match tool {
        "dnctl" => std::iter::once(tool.to_string()).chain(args).collect(),
        _ => args,
    };
    // Syntax errors are reported here, daemon or not; the daemon parses
    // again (it is the one that applies the command).
    if let Err(e) = dummynet_lang::parse_args(&args) {
        eprintln!("{tool}: {e}");
        return ExitCode::from(if e.kind == dummynet_lang::ErrorKind::Unavailable {
            69
        } else {
            64
        });
    }
    let req = ClientRequest {
        argv: args,
        cwd: std::env::current_dir().ok(),
        json,
        ..ClientRequest::default()
    };
    send(tool, socket, &req)
}

/// `--json` among the options before the command (`ipfw --json show`,
/// `ipfw -d --json show`), taken off it: the parser knows only ipfw's own
/// flags.
fn take_json(mut args: Vec<String>) -> (bool, Vec<String>) {
    let options = args.iter().take_while(|a| a.starts_with('-')).count();
    match args[..options].iter().position(|a| a == "--json") {
        Some(i) => {
            args.remove(i);
            (true, args)
        }
        None => (false, args),
    }
}

/// A leading `--socket PATH` (or `--socket=PATH`), taken off the command.
fn take_socket(mut args: Vec<String>) -> Result<(Option<PathBuf>, Vec<String>), String> {
    let Some(first) = args.first() else {
        return Ok((None, args));
    };
    if let Some(path) = first.strip_prefix("--socket=") {
        let path = PathBuf::from(path);
        args.remove(0);
        return Ok((Some(path), args));
    }
    if first != "--socket" {
        return Ok((None, args));
    }
    if args.len() < 2 {
        return Err("--socket needs a path: --socket PATH COMMAND ...".into());
    }
    let path = PathBuf::from(args.remove(1));
    args.remove(0);
    Ok((Some(path), args))
}

/// `dummynet stats`.
pub fn stats(socket: Option<PathBuf>, json: bool) -> ExitCode {
    send(
        "dummynet",
        socket,
        &ClientRequest {
            stats: true,
            json,
            ..ClientRequest::default()
        },
    )
}

fn send(tool: &str, socket: Option<PathBuf>, req: &ClientRequest) -> ExitCode {
    let path = socket.unwrap_or_else(control::default_socket);
    match control::call(&path, req) {
        Ok(Reply {
            status,
            stdout,
            stderr,
            ..
        }) => {
            let _ = std::io::stdout().write_all(stdout.as_bytes());
            let _ = std::io::stderr().write_all(stderr.as_bytes());
            ExitCode::from(u8::try_from(status).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("{tool}: {e}");
            ExitCode::from(69)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_leading_socket_option_names_the_daemon() {
        assert_eq!(
            take_socket(argv("--socket /tmp/a.sock pipe 1 show")),
            Ok((Some(PathBuf::from("/tmp/a.sock")), argv("pipe 1 show")))
        );
        assert_eq!(
            take_socket(argv("--socket=/tmp/b.sock -q flush")),
            Ok((Some(PathBuf::from("/tmp/b.sock")), argv("-q flush")))
        );
        // Anywhere else it is the command's, and the parser says what it
        // thinks of it.
        assert_eq!(
            take_socket(argv("pipe show --socket x")),
            Ok((None, argv("pipe show --socket x")))
        );
        assert!(take_socket(argv("--socket")).is_err());
        assert_eq!(take_json(argv("--json show")), (true, argv("show")));
        assert_eq!(take_json(argv("-d --json show")), (true, argv("-d show")));
        // After the command it is the command's (and an error).
        assert_eq!(
            take_json(argv("pipe show --json")),
            (false, argv("pipe show --json"))
        );
        assert_eq!(take_socket(Vec::new()), Ok((None, Vec::new())));
    }
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
    #[error("permission denied on {0}: the control socket is for root (as ipfw is) and the daemon's --socket-group")]
    Denied(PathBuf),
    #[error("talking to the daemon on {path}: {msg}")]
    Protocol { path: PathBuf, msg: String },
}

/// Sends one request and returns the daemon's answer, asking again for
/// up to [`BUSY_WAIT`] while the daemon is busy.
pub fn call(path: &Path, req: &ClientRequest) -> Result<Reply, ClientError> {
    call_within(path, req, BUSY_WAIT)
}

/// [`call`], asking a busy daemon again for up to `busy_wait`.
pub fn call_within(
    path: &Path,
    req: &ClientRequest,
    busy_wait: Duration,
) -> Result<Reply, ClientError> {
    let mut backoff = BusyBackoff::new(busy_wait);
    loop {
        let reply = call_once(path, req)?;
        if reply.kind != Some(ErrorKind::Busy) || !backoff.wait() {
            return Ok(reply);
        }
    }
}

/// One ask, whatever the answer (a busy daemon's included).
pub(crate) fn call_once(path: &Path, req: &ClientRequest) -> Result<Reply, ClientError> {
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
    // A daemon with no place answers `busy` without reading the request
    // and closes: the write may then fail, but the answer is there to read.
    let sent = conn.write_all(text.as_bytes());
    if let Err(e) = &sent {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        if !matches!(e.kind(), BrokenPipe | ConnectionReset) {
            return Err(proto(e.to_string()));
        }
    }
    let mut line = String::new();
    let read = BufReader::new(conn.take_limited_owned()).read_line(&mut line);
    match (sent, read) {
        (Err(e), Err(_) | Ok(0)) => Err(proto(e.to_string())),
        (_, Err(e)) => Err(proto(e.to_string())),
        _ => serde_json::from_str(&line).map_err(|e| proto(format!("unreadable answer: {e}"))),
    }
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
