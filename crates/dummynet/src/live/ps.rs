//! `dummynet ps`: the dummynet daemons on this machine and what each
//! shapes, from their records ([`super::registry`]).
//!
//! A namespace a record does not name is looked up in `/run/netns` here,
//! so a daemon started with `ip netns exec NAME dummynet run ...` shows as
//! `netns NAME` too.

use std::io::Write as _;
use std::process::ExitCode;

use serde_json::json;

use super::netns_target::run_netns_name;
use super::registry::{self, Record};

#[derive(Debug, clap::Args)]
pub struct PsArgs {
    /// One JSON object, `{"daemons": [...], "removed_sockets": [...]}`,
    /// each daemon with pid, mode (kind: bridge with interfaces, host with
    /// queue, shell with command), netns (inode, and name, pid, path when
    /// known), socket, http, started (Unix seconds), uptime_s, version,
    /// start_ticks and pid_ns; each removed socket with path and pid.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: PsArgs) -> ExitCode {
    let (mut records, stale) = match registry::list_all() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dummynet ps: reading {}: {e}", registry::REGISTRY_DIR);
            return ExitCode::FAILURE;
        }
    };
    for r in &mut records {
        if r.netns.name.is_none() {
            r.netns.name = run_netns_name(r.netns.inode);
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let out = if args.json {
        let daemons: Vec<_> = records
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["uptime_s"] = json!(now.saturating_sub(r.started));
                v
            })
            .collect();
        let removed: Vec<_> = stale
            .iter()
            .map(|s| json!({ "path": s.path, "pid": s.pid }))
            .collect();
        format!(
            "{}\n",
            json!({ "daemons": daemons, "removed_sockets": removed })
        )
    } else if records.is_empty() {
        "no dummynet daemons are running\n".to_string()
    } else {
        table(&records, now)
    };
    // A closed pipe (`dummynet ps | head -1`) is not an error worth a panic.
    let _ = std::io::stdout().write_all(out.as_bytes());
    // On stderr, so the table stays the table.
    if !args.json {
        eprint!("{}", removed_lines(&stale));
    }
    ExitCode::SUCCESS
}

/// What `ps` says of the stale sockets it removed, a line each.
fn removed_lines(stale: &[registry::StaleSocket]) -> String {
    stale
        .iter()
        .map(|s| format!("dummynet ps: removed the stale control socket {s}\n"))
        .collect()
}

/// The text form: one row per daemon, columns as wide as their widest cell.
fn table(records: &[Record], now: u64) -> String {
    let head = ["PID", "MODE", "NETNS", "SOCKET", "HTTP", "UPTIME"];
    let rows: Vec<[String; 6]> = records
        .iter()
        .map(|r| {
            [
                r.pid.to_string(),
                match r.user {
                    Some(uid) => format!("{} (uid {uid}, no root)", r.mode),
                    None => r.mode.to_string(),
                },
                r.netns.to_string(),
                r.socket
                    .as_ref()
                    .map_or("-".into(), |p| p.display().to_string()),
                r.http.clone().unwrap_or_else(|| "-".into()),
                uptime(now.saturating_sub(r.started)),
            ]
        })
        .collect();
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&head);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out
}

/// `45s`, `12m03s`, `5h07m`, `3d04h`.
fn uptime(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::registry::{Mode, Namespace};

    #[test]
    fn removed_sockets_are_said_a_line_each() {
        let stale = [registry::StaleSocket {
            path: "/run/dummynet/shell-77.sock".into(),
            pid: Some(77),
        }];
        assert_eq!(
            removed_lines(&stale),
            "dummynet ps: removed the stale control socket \
             /run/dummynet/shell-77.sock (its daemon, PID 77, is gone)\n"
        );
        assert_eq!(removed_lines(&[]), "");
    }

    #[test]
    fn uptimes_read_short() {
        assert_eq!(uptime(0), "0s");
        assert_eq!(uptime(59), "59s");
        assert_eq!(uptime(63), "1m03s");
        assert_eq!(uptime(3600 * 5 + 60 * 7 + 9), "5h07m");
        assert_eq!(uptime(86400 * 3 + 3600 * 4), "3d04h");
    }

    #[test]
    fn the_table_lines_up() {
        let r = Record {
            pid: 12,
            start_ticks: 1,
            started: 100,
            mode: Mode::Bridge {
                interfaces: ["eth0".into(), "eth1".into()],
            },
            netns: Namespace {
                inode: 4026531840,
                name: Some("blue".into()),
                ..Namespace::default()
            },
            socket: Some("/run/dummynet.sock".into()),
            http: None,
            version: "0".into(),
            pid_ns: 0,
            user: None,
        };
        let shell = Record {
            pid: 13,
            mode: Mode::Shell {
                command: vec!["sh".into()],
            },
            user: Some(1000),
            ..r.clone()
        };
        assert!(
            table(&[shell], 161).contains("shell sh (uid 1000, no root)"),
            "a shell without root says whose it is"
        );
        let t = table(&[r], 161);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2, "{t}");
        assert!(lines[0].starts_with("PID  MODE"), "{t}");
        let cells: Vec<&str> = lines[1]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cells,
            [
                "12",
                "bridge eth0 eth1",
                "net:[4026531840] netns blue",
                "/run/dummynet.sock",
                "-",
                "1m01s"
            ],
            "{t}"
        );
        // Each column starts where its heading does.
        let at = |l: &str, s: &str| l.find(s).unwrap();
        assert_eq!(at(lines[0], "NETNS"), at(lines[1], "net:["));
        assert_eq!(at(lines[0], "UPTIME"), at(lines[1], "1m01s"));
    }
}
