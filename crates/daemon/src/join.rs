//! `dummynet shell --join SOCKET`: a shell whose link is one more pair of
//! ports, pipes and rules in a daemon that already runs, instead of a data
//! plane of its own, so that many links cost one data plane.
//!
//! The conversation, on one connection to the daemon's control socket
//! (JSON lines, as every request):
//!
//! 1. The joining shell asks `{"join": {"preset", "up", "down"}}`.
//! 2. The daemon books a link number K (the lowest free; pipes `2K+1` up
//!    and `2K+2` down, rules `1000+4K` to `1000+4K+3`: none of them in use)
//!    and offers it: a reply whose stdout is a [`JoinOffer`], naming the
//!    interfaces the shell is to create (`app-K`, `peer-K`) and the
//!    network namespace to create them in (the data plane's, as a
//!    `/proc/PID/task/TID/ns/net` path of the thread serving the shell).
//! 3. The shell builds its path with those ends ([`crate::shell`]) and
//!    sends `{"attach": true}`; the daemon opens the ports on its own
//!    thread and hands them to the data plane with the pipes and rules
//!    ([`RequestKind::Attach`]), all or nothing, and answers.
//! 4. The connection stays open while the shell lives. When the shell
//!    sends `{"detach": true}`, or the connection closes (the shell died,
//!    even by SIGKILL), the daemon takes the ports out of the data plane,
//!    deletes the pipes and rules ([`RequestKind::Detach`]; what they held
//!    is dropped and counted) and deletes `app-K` and `peer-K`, which takes
//!    the shell's veth ends with them.
//!
//! Any daemon whose data plane bridges (a `dummynet shell`, `dummynet run
//! --bridge`) takes joins; the joined links' rules match only their own
//! interfaces (`recv app-K`, `recv peer-K`, `xmit app-K`, `xmit peer-K`), so
//! they leave the daemon's own traffic and each other's alone.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use dummynet_engine::Command;
use serde::{Deserialize, Serialize};

use super::protocol::{host_view, ErrorKind, PlaneLink, Reply, EX_DATAERR, EX_UNAVAILABLE};
use crate::protocol::{BusyBackoff, Limits, BUSY_WAIT};
use crate::shell::link::LinkError;
use dummynet_dataplane::bridge::Bridge;
use dummynet_dataplane::dataplane::{Answer, RequestKind};
use dummynet_dataplane::Backend;

pub use crate::protocol::JoinRequest;

/// What the daemon offers a joining shell (the stdout of its first reply).
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq, Eq)]
pub struct JoinOffer {
    /// The link's number K.
    pub link: u32,
    /// The interfaces to create in `netns`: towards the command, and
    /// towards the far end.
    pub app_if: String,
    pub peer_if: String,
    /// The data plane's network namespace, while this connection lasts.
    pub netns: PathBuf,
    /// Up and down pipes.
    pub pipes: [u32; 2],
    /// The link's rules.
    pub rules: Vec<u16>,
}

/// A line the joining shell sends after the offer.
#[derive(Debug, Serialize, Deserialize, Default)]
struct Step {
    #[serde(default)]
    attach: bool,
    #[serde(default)]
    detach: bool,
}

/// Most links joined to one daemon at once (rules `1000+4K` stay below
/// the shells' `65000 allow`).
pub const MAX_JOINS: u32 = 4096;

/// How long a joining shell may take to build its path between the offer
/// and `attach`.
const BUILD_TIME: Duration = Duration::from_secs(30);

/// Receive-ring slots per port of a joined link: 128 frames of 2 KiB, 256
/// KiB a port (the default ring is 8 MiB), room for 6 ms of a 300 Mbit/s
/// link's full-size frames between two reads.
pub const JOINED_RING_FRAMES: usize = 128;

/// The link numbers booked by the joined shells of one daemon.
#[derive(Default)]
pub struct JoinBook(Mutex<BTreeSet<u32>>);

impl JoinBook {
    /// Books the lowest free number not in `skip`.
    fn book(&self, skip: &BTreeSet<u32>) -> Option<u32> {
        let mut taken = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let k = (1..=MAX_JOINS).find(|k| !taken.contains(k) && !skip.contains(k))?;
        taken.insert(k);
        Some(k)
    }

    fn release(&self, k: u32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&k);
    }
}

/// Link K's pipes (up, down) and rules.
pub fn numbers(k: u32) -> ([u32; 2], Vec<u16>) {
    let base = 1000 + 4 * k;
    let rules = (base..base + 4)
        .filter_map(|r| u16::try_from(r).ok())
        .collect();
    ([2 * k + 1, 2 * k + 2], rules)
}

/// The commands that give link K its pipes (configured as `dummynet shell`
/// would configure pipes 1 and 2) and its rules.
pub fn link_commands(k: u32, req: &JoinRequest) -> Result<Vec<Command>, LinkError> {
    let config = crate::shell::link::link_config(
        req.preset.as_deref(),
        req.up.as_deref(),
        req.down.as_deref(),
    )?;
    let ([up, down], rules) = numbers(k);
    let mut out = Vec::new();
    // A direction with a scheduler type sends to queue N of scheduler N
    // (see `feed_typed_schedulers`), renumbered as its pipe is.
    let mut action = ["pipe", "pipe"];
    for (_, c) in config {
        match c {
            Command::ConfigPipe(1, cfg) => out.push(Command::ConfigPipe(up, cfg)),
            Command::ConfigPipe(2, cfg) => out.push(Command::ConfigPipe(down, cfg)),
            Command::ConfigQueue(n @ (1 | 2), mut q) => {
                let to = if n == 1 { up } else { down };
                q.sched = Some(to);
                action[n as usize - 1] = "queue";
                out.push(Command::ConfigQueue(to, q));
            }
            // The single shell's rules: replaced by the link's own.
            Command::AddRule(_) => {}
            other => return Err(LinkError::NotForAJoinedLink(Box::new(other))),
        }
    }
    let (app, peer) = (format!("app-{k}"), format!("peer-{k}"));
    let text = format!(
        "add {} {} {up} ip from any to any in recv {app}\n\
         add {} {} {down} ip from any to any in recv {peer}\n\
         add {} allow ip from any to any out xmit {app}\n\
         add {} allow ip from any to any out xmit {peer}\n",
        rules[0], action[0], rules[1], action[1], rules[2], rules[3]
    );
    let parsed = dummynet_dataplane::lang::commands(&text, None)
        .map_err(|(line, error)| LinkError::JoinedRule { line, error })?;
    out.extend(parsed.into_iter().map(|(_, c)| c));
    Ok(out)
}

fn reply(conn: &UnixStream, r: &Reply) -> bool {
    let Ok(mut text) = serde_json::to_string(r) else {
        return false;
    };
    text.push('\n');
    (&*conn).write_all(text.as_bytes()).is_ok()
}

fn refused(kind: ErrorKind, why: impl std::fmt::Display) -> Reply {
    Reply::err(kind, EX_UNAVAILABLE, format!("dummynet: join: {why}\n"))
}

/// Serves one joining shell on `conn`, on the thread the control server
/// gave it (in the data plane's namespace), for as long as the shell
/// lives. `allowed`: the caller may join (root or the daemon's user: the
/// shell creates interfaces in the daemon's namespace).
pub fn serve(
    conn: &UnixStream,
    req: JoinRequest,
    allowed: bool,
    link: &PlaneLink,
    limits: &Limits,
    book: &JoinBook,
) {
    if !allowed {
        reply(
            conn,
            &refused(ErrorKind::Denied, "only root or the daemon's user may join"),
        );
        return;
    }
    // Pipes and rules someone made by hand are not taken over.
    let snap = match super::protocol::snapshot(link, limits.answer_timeout) {
        Ok((snap, _)) => snap,
        Err(r) => {
            reply(conn, &r);
            return;
        }
    };
    let clashes: BTreeSet<u32> = (1..=MAX_JOINS)
        .filter(|&k| {
            let (pipes, rules) = numbers(k);
            snap.links.iter().any(|l| pipes.contains(&l.number))
                || snap.rules.iter().any(|r| rules.contains(&r.number))
                // A typed direction's queue takes its pipe's number.
                || snap.flowsets.iter().any(|f| pipes.contains(&f.number))
        })
        .collect();
    drop(snap);
    let Some(k) = book.book(&clashes) else {
        reply(
            conn,
            &refused(
                ErrorKind::Busy,
                format!("{MAX_JOINS} links are joined already"),
            ),
        );
        return;
    };
    session(conn, k, &req, link, limits);
    book.release(k);
}

/// Link K's life in the daemon: offer, attach, wait, detach.
fn session(conn: &UnixStream, k: u32, req: &JoinRequest, link: &PlaneLink, limits: &Limits) {
    let timeout = limits.answer_timeout;
    let commands = match link_commands(k, req) {
        Ok(c) => c,
        Err(e) => {
            reply(
                conn,
                &Reply::err(
                    ErrorKind::Invalid,
                    EX_DATAERR,
                    format!("dummynet: join: {e}\n"),
                ),
            );
            return;
        }
    };
    let (pipes, rules) = numbers(k);
    let offer = JoinOffer {
        link: k,
        app_if: format!("app-{k}"),
        peer_if: format!("peer-{k}"),
        netns: PathBuf::from(format!(
            "/proc/{}/task/{}/ns/net",
            std::process::id(),
            nix::unistd::gettid()
        )),
        pipes,
        rules: rules.clone(),
    };
    // Left by a daemon thread that could not delete them: ours now.
    delete_ifaces(&offer);
    let Ok(text) = serde_json::to_string(&offer) else {
        return;
    };
    if !reply(conn, &Reply::ok(text + "\n")) {
        return;
    }
    let Ok(read) = conn.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(read);
    let _ = conn.set_read_timeout(Some(BUILD_TIME));
    match read_step(&mut lines) {
        Some(s) if s.attach => {}
        // Gone, or changed its mind: it cleans up its own side.
        _ => {
            delete_ifaces(&offer);
            return;
        }
    }
    let attached = Bridge::open_to_attach(&offer.app_if, &offer.peer_if, JOINED_RING_FRAMES)
        .map_err(|e| refused(ErrorKind::Invalid, e))
        .and_then(|bridge| {
            let kind = RequestKind::Attach {
                backend: Box::new(bridge) as Box<dyn Backend>,
                commands,
                host: host_view(),
            };
            match link.ask(kind, timeout) {
                Ok(Answer::Attached(Ok(slot))) => Ok(slot),
                // The ports close here, off the data plane.
                Ok(Answer::Attached(Err((why, _ports)))) => Err(refused(ErrorKind::Conflict, why)),
                Ok(_) => Err(refused(ErrorKind::Internal, "unexpected answer")),
                Err(r) => Err(r),
            }
        });
    let slot = match attached {
        Ok(slot) => slot,
        Err(r) => {
            reply(conn, &r);
            delete_ifaces(&offer);
            return;
        }
    };
    let said = format!(
        "joined as link {k}: pipes {} (up) and {} (down), rules {}-{}\n",
        pipes[0],
        pipes[1],
        rules.first().copied().unwrap_or(0),
        rules.last().copied().unwrap_or(0)
    );
    let mut told = reply(conn, &Reply::ok(said));
    // Until the shell says it leaves or its end closes.
    let _ = conn.set_read_timeout(None);
    while told {
        match read_step(&mut lines) {
            Some(s) if s.detach => break,
            Some(_) => {}
            None => {
                told = false;
            }
        }
    }
    let mut commands = vec![Command::DeleteRules(rules)];
    commands.push(Command::DeletePipes(pipes.to_vec()));
    let answer = link.ask(RequestKind::Detach { slot, commands }, timeout);
    // Closed here, off the data plane, before their interfaces go.
    let outcome = match answer {
        Ok(Answer::Detached(ports, Ok(_))) => {
            drop(ports);
            Reply::ok(format!("left: link {k} removed\n"))
        }
        Ok(Answer::Detached(ports, Err(e))) => {
            drop(ports);
            refused(ErrorKind::Internal, format!("removing link {k}: {e}"))
        }
        Ok(_) => refused(ErrorKind::Internal, "unexpected answer"),
        Err(r) => r,
    };
    delete_ifaces(&offer);
    if told {
        let _ = conn.set_write_timeout(Some(limits.write_timeout));
        reply(conn, &outcome);
    }
}

/// The next line the shell sends; `None` when it closed, timed out, or
/// sent something else than a step.
fn read_step(lines: &mut BufReader<UnixStream>) -> Option<Step> {
    let mut line = Vec::new();
    let mut limited = std::io::Read::take(lines, 4096);
    match limited.read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => serde_json::from_slice(&line).ok(),
    }
}

/// Deletes link K's interfaces in this thread's namespace (the data
/// plane's): each takes its veth peer with it.
fn delete_ifaces(offer: &JoinOffer) {
    let Ok(mut rtnl) = dummynet_io::rtnl::Rtnl::open() else {
        return;
    };
    for name in [&offer.app_if, &offer.peer_if] {
        if rtnl.link_exists(name).unwrap_or(false) {
            let _ = rtnl.delete_link(name);
        }
    }
}

/// Why a joining shell's conversation with the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("--join {}: cannot connect: {source}", socket.display())]
    Connect {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("--join {}: {source}", socket.display())]
    Io {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("--join {}: the daemon hung up", socket.display())]
    HungUp { socket: PathBuf },
    #[error("--join {}: no answer: {source}", socket.display())]
    NoAnswer {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("--join {}: bad answer: {source}", socket.display())]
    BadAnswer {
        socket: PathBuf,
        source: serde_json::Error,
    },
    #[error("--join {}: not a join offer: {source}", socket.display())]
    NotAnOffer {
        socket: PathBuf,
        source: serde_json::Error,
    },
    /// The daemon refused (its kind, if it said one, and its words).
    #[error("--join {}: {stderr}", socket.display())]
    Refused {
        socket: PathBuf,
        kind: Option<ErrorKind>,
        stderr: String,
    },
    #[error("{0}")]
    Encode(serde_json::Error),
}

/// The joining shell's end of the conversation.
pub struct Session {
    conn: UnixStream,
    lines: BufReader<UnixStream>,
    pub offer: JoinOffer,
    pub socket: PathBuf,
}

/// How long the joining shell waits for each answer.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

impl Session {
    /// Asks the daemon on `socket` for a link; asks again for up to
    /// [`BUSY_WAIT`] while it answers that it is busy (hundreds of shells
    /// joining at once fill its cap of clients for a moment).
    pub fn request(socket: &Path, req: JoinRequest) -> Result<Session, JoinError> {
        let mut backoff = BusyBackoff::new(BUSY_WAIT);
        loop {
            let (mut s, r) = Session::ask(socket, &req)?;
            if r.kind == Some(ErrorKind::Busy) && backoff.wait() {
                continue;
            }
            let r = s.checked(r)?;
            s.offer =
                serde_json::from_str(r.stdout.trim()).map_err(|source| JoinError::NotAnOffer {
                    socket: socket.to_path_buf(),
                    source,
                })?;
            return Ok(s);
        }
    }

    /// Connects and asks once; the session and the daemon's answer.
    fn ask(socket: &Path, req: &JoinRequest) -> Result<(Session, Reply), JoinError> {
        let conn = UnixStream::connect(socket).map_err(|source| JoinError::Connect {
            socket: socket.to_path_buf(),
            source,
        })?;
        let io = |source| JoinError::Io {
            socket: socket.to_path_buf(),
            source,
        };
        conn.set_read_timeout(Some(ANSWER_WAIT)).map_err(io)?;
        conn.set_write_timeout(Some(ANSWER_WAIT)).map_err(io)?;
        let lines = BufReader::new(conn.try_clone().map_err(io)?);
        let mut s = Session {
            conn,
            lines,
            offer: JoinOffer {
                link: 0,
                app_if: String::new(),
                peer_if: String::new(),
                netns: PathBuf::new(),
                pipes: [0; 2],
                rules: Vec::new(),
            },
            socket: socket.to_path_buf(),
        };
        let ask = super::protocol::ClientRequest {
            join: Some(req.clone()),
            ..Default::default()
        };
        let r = s.send(&serde_json::to_string(&ask).map_err(JoinError::Encode)?)?;
        Ok((s, r))
    }

    /// Sends one line and reads the answer; an error unless it is 0.
    fn call(&mut self, line: &str) -> Result<Reply, JoinError> {
        let r = self.send(line)?;
        self.checked(r)
    }

    /// `r`, or its error unless its status is 0.
    fn checked(&self, r: Reply) -> Result<Reply, JoinError> {
        if r.status != 0 {
            return Err(JoinError::Refused {
                socket: self.socket.clone(),
                kind: r.kind,
                stderr: r.stderr.trim_end().to_string(),
            });
        }
        Ok(r)
    }

    /// Sends one line and reads the answer, whatever its status.
    fn send(&mut self, line: &str) -> Result<Reply, JoinError> {
        let socket = self.socket.clone();
        (&self.conn)
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|source| JoinError::Io {
                socket: socket.clone(),
                source,
            })?;
        let mut answer = String::new();
        match self.lines.read_line(&mut answer) {
            Ok(0) => return Err(JoinError::HungUp { socket }),
            Ok(_) => {}
            Err(source) => return Err(JoinError::NoAnswer { socket, source }),
        }
        serde_json::from_str(answer.trim())
            .map_err(|source| JoinError::BadAnswer { socket, source })
    }

    /// The path is built: the daemon starts forwarding. Returns what it
    /// said (the link's pipes and rules).
    pub fn attach(&mut self) -> Result<String, JoinError> {
        Ok(self.call(r#"{"attach":true}"#)?.stdout)
    }

    /// Leaves: the daemon removes the link and says so.
    pub fn detach(mut self) -> Result<String, JoinError> {
        Ok(self.call(r#"{"detach":true}"#)?.stdout)
    }

    /// True once the daemon has closed its end (it stopped): the link is
    /// gone with it.
    pub fn daemon_gone(&self) -> bool {
        use nix::sys::socket::MsgFlags;
        let mut byte = [0u8; 1];
        matches!(
            nix::sys::socket::recv(
                std::os::fd::AsRawFd::as_raw_fd(&self.conn),
                &mut byte,
                MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT
            ),
            Ok(0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_engine::config::Action;

    /// A join that cannot reach its daemon, or asks for a link that cannot
    /// be made, says which, in the words users read.
    #[test]
    fn join_failures_are_kinds() {
        let socket = Path::new("/nonexistent/dummynet-join.sock");
        let e = match Session::request(socket, JoinRequest::default()) {
            Err(e) => e,
            Ok(_) => panic!("joined a daemon that is not there"),
        };
        assert!(matches!(e, JoinError::Connect { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("--join /nonexistent/dummynet-join.sock: cannot connect: "),
            "{e}"
        );
        let req = JoinRequest {
            preset: Some("no-such-link".into()),
            ..JoinRequest::default()
        };
        let e = link_commands(1, &req).unwrap_err();
        assert!(matches!(&e, LinkError::UnknownPreset(n) if n == "no-such-link"));
        assert!(e.to_string().contains("known: "), "{e}");
    }

    /// A joined link with a scheduler type sends that direction to its
    /// queue of the scheduler, renumbered with its pipe, as a lone shell does.
    #[test]
    fn a_typed_direction_of_a_joined_link_goes_to_its_queue() {
        let req = JoinRequest {
            up: Some("bw 1Mbit/s type fq_codel".into()),
            ..JoinRequest::default()
        };
        let ([up, down], _) = numbers(3);
        let cmds = link_commands(3, &req).unwrap();
        assert!(cmds
            .iter()
            .any(|c| matches!(c, Command::ConfigQueue(n, q) if *n == up && q.sched == Some(up))));
        let actions: Vec<Action> = cmds
            .iter()
            .filter_map(|c| match c {
                Command::AddRule(r) => Some(r.action),
                _ => None,
            })
            .collect();
        assert_eq!(actions[..2], [Action::Queue(up), Action::Pipe(down)]);
        let mut e: dummynet_engine::Engine<()> = dummynet_engine::Engine::new(1);
        for c in cmds {
            e.apply(0, c).unwrap();
        }
        assert!(e.take_notes().is_empty());
    }
}
