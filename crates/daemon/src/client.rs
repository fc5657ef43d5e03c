//! The command-line side of the control socket: `dummynet ipfw ...`,
//! `dummynet dnctl ...`, `dummynet stats`, and the binary run as `ipfw` or
//! `dnctl`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::control::{self, ClientRequest, Reply};

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
