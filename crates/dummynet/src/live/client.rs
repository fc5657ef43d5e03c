//! The command-line side of the control socket: `dummynet ipfw ...`,
//! `dummynet dnctl ...`, `dummynet stats`, and the binary run as `ipfw` or
//! `dnctl`.

use std::io::Write;
use std::process::ExitCode;

use super::control::{self, ClientRequest, Reply};

/// Sends `args` (an ipfw or dnctl command line) to the daemon and prints its
/// answer; the exit status is the daemon's.
pub fn ipfw(tool: &str, args: Vec<String>) -> ExitCode {
    if args.is_empty() || matches!(args[0].as_str(), "-h" | "--help" | "help") {
        eprintln!(
            "usage: {tool} [-fqt] COMMAND ...\n  e.g. {tool} pipe 1 config bw 10Mbit/s delay 10ms\n       \
             {tool} add 100 pipe 1 ip from any to any out\n       {tool} show | {tool} pipe 1 show\n\
             Commands go to the daemon on $DUMMYNET_SOCKET (default {}).",
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
        stats: false,
    };
    send(tool, &req)
}

/// `dummynet stats`.
pub fn stats() -> ExitCode {
    send(
        "dummynet",
        &ClientRequest {
            stats: true,
            ..ClientRequest::default()
        },
    )
}

fn send(tool: &str, req: &ClientRequest) -> ExitCode {
    let path = control::default_socket();
    match control::call(&path, req) {
        Ok(Reply {
            status,
            stdout,
            stderr,
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
