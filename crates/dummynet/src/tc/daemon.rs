//! The daemons behind `tc qdisc`: one `dummynet run --host --hooks out
//! --oif IF` per interface that has a dummynet qdisc, in the interface's
//! network namespace, with its own nftables table (`oifname IF ... queue`)
//! and one pipe. Its control socket, pid and the tc words it carries out
//! live in `/run/dummynet/tc/NETNS-INODE/IF/`, so that the next `tc`
//! command (`change`, `show`, `del`) finds it; `del` stops it, and with it
//! go its table and its queue: the interface is as it was.
//!
//! The daemon's rules: 100 sends IF's egress to pipe 1; with `one_pass 0`
//! a packet leaving the pipe goes on to 200, a `count` rule whose counters
//! are what left the qdisc (`Sent` in `tc -s qdisc show`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dummynet_lang::tc::{self, Parent, Qdisc, QdiscRequest, QdiscStats, TcCommand};

use super::{pipe_config, Refusal};
use crate::live::control::{self, ClientRequest, Reply};

/// Where the daemons' state lives.
pub fn state_root() -> PathBuf {
    PathBuf::from("/run/dummynet/tc")
}

/// How long a daemon has to answer on its control socket after starting,
/// and to be gone after SIGTERM.
const START_WAIT: Duration = Duration::from_secs(10);
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The network namespace this process is in, and its daemons' state.
pub(crate) struct Namespace {
    dir: PathBuf,
}

/// A running daemon carrying out one interface's qdisc.
pub(crate) struct Daemon {
    pub dev: String,
    dir: PathBuf,
    pid: i32,
    pub handle: u16,
    pub parent: Parent,
    pub qdisc: Qdisc,
}

fn io_refusal(what: &str, path: &Path, e: std::io::Error) -> Refusal {
    Refusal::kernel(format!("dummynet tc: {what} {}: {e}", path.display()))
}

impl Namespace {
    pub(crate) fn current() -> Result<Namespace, Refusal> {
        let ino = dummynet_io::netns::Netns::current()
            .and_then(|n| n.inode())
            .map_err(|e| Refusal::kernel(format!("dummynet tc: this network namespace: {e}")))?;
        Ok(Namespace {
            dir: state_root().join(ino.to_string()),
        })
    }

    /// The daemons running here, by interface name.
    pub(crate) fn daemons(&self) -> Vec<Daemon> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
            .iter()
            .filter_map(|n| self.qdisc(n).ok().flatten())
            .collect()
    }

    /// The daemon for `dev`, if one runs; what a dead one left is removed.
    pub(crate) fn qdisc(&self, dev: &str) -> Result<Option<Daemon>, Refusal> {
        let dir = self.dir.join(dev);
        if !dir.exists() {
            return Ok(None);
        }
        let pid: Option<i32> = std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let words = std::fs::read_to_string(dir.join("words")).unwrap_or_default();
        let words: Vec<&str> = words.lines().collect();
        let req = match tc::parse(&words).map(|t| t.command) {
            Ok(TcCommand::Qdisc(r)) => Some(r),
            _ => None,
        };
        match (pid.filter(|&p| alive(p)), req) {
            (Some(pid), Some(req)) => match req.qdisc {
                Some(qdisc) => Ok(Some(Daemon {
                    dev: dev.to_string(),
                    dir,
                    pid,
                    handle: req.handle.filter(|&h| h != 0).unwrap_or(0x8001),
                    parent: req.parent,
                    qdisc,
                })),
                None => Ok(None),
            },
            (pid, _) => {
                // A daemon that died (its table died with it), or one
                // still starting that another tc command is setting up.
                if pid.is_none() {
                    let _ = std::fs::remove_dir_all(&dir);
                    Ok(None)
                } else {
                    Err(Refusal::kernel(format!(
                        "dummynet tc: the qdisc of {dev} is being set up by another tc command; try again"
                    )))
                }
            }
        }
    }

    /// Starts the daemon for `req.dev` with `q`'s pipe; nothing is left
    /// behind if it fails.
    pub(crate) fn start(
        &self,
        req: &QdiscRequest,
        q: &Qdisc,
        words: &[&str],
    ) -> Result<(), Refusal> {
        let config = pipe_config(q)?;
        let dir = self.dir.join(&req.dev);
        std::fs::create_dir_all(&dir).map_err(|e| io_refusal("creating", &dir, e))?;
        let cleanup = |e: Refusal| {
            let _ = std::fs::remove_dir_all(&dir);
            e
        };
        let queue = self.free_queue(&req.dev);
        let socket = dir.join("sock");
        let log_path = dir.join("log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| cleanup(io_refusal("creating", &log_path, e)))?;
        let err_log = log
            .try_clone()
            .map_err(|e| cleanup(io_refusal("opening", &log_path, e)))?;
        let exe = std::env::current_exe().map_err(|e| {
            cleanup(Refusal::kernel(format!(
                "dummynet tc: finding this program: {e}"
            )))
        })?;
        let mut cmd = std::process::Command::new(exe);
        {
            use std::os::unix::process::CommandExt;
            cmd.arg0("dummynet").process_group(0);
        }
        cmd.args(["run", "--host", "--hooks", "out", "--oif", &req.dev])
            .args(["--queue", &queue.to_string(), "--default-allow"])
            .args(["--precision", "timer", "--socket"])
            .arg(&socket)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err_log);
        let mut child = cmd.spawn().map_err(|e| {
            cleanup(Refusal::kernel(format!(
                "dummynet tc: starting the daemon: {e}"
            )))
        })?;
        let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        write(&dir.join("pid"), &pid.to_string()).map_err(cleanup)?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let said = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(cleanup(Refusal::kernel(format!(
                    "dummynet tc: the daemon for {} did not start ({status}):\n{}",
                    req.dev,
                    said.trim_end()
                ))));
            }
            if call(&socket, &["show"], false).is_ok() {
                break;
            }
            if started.elapsed() > START_WAIT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(cleanup(Refusal::kernel(format!(
                    "dummynet tc: the daemon for {} did not answer within {} s",
                    req.dev,
                    START_WAIT.as_secs()
                ))));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let dev = req.dev.as_str();
        let setup: [Vec<String>; 5] = [
            words_of(&["sysctl", "net.inet.ip.dummynet.pipe_slot_limit=1000000"]),
            words_of(&["sysctl", "net.inet.ip.fw.one_pass=0"]),
            config,
            words_of(&[
                "add", "100", "pipe", "1", "ip", "from", "any", "to", "any", "out", "xmit", dev,
            ]),
            words_of(&[
                "add", "200", "count", "ip", "from", "any", "to", "any", "out", "xmit", dev,
            ]),
        ];
        for argv in &setup {
            if let Err(e) = call_words(&socket, argv, false) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(cleanup(e));
            }
        }
        write(&dir.join("words"), &words.join("\n")).map_err(|e| {
            let _ = child.kill();
            let _ = child.wait();
            cleanup(e)
        })?;
        // The daemon outlives this command; its parent is now whoever
        // adopts orphans.
        drop(child);
        Ok(())
    }

    /// An NFQUEUE number no other interface's daemon here uses.
    fn free_queue(&self, dev: &str) -> u16 {
        let base = nix::net::if_::if_nametoindex(dev).unwrap_or(0);
        let used: Vec<u16> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_to_string(e.path().join("queue")).ok())
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        let mut q = 20000 + (base % 10000) as u16;
        while used.contains(&q) {
            q = 20000 + (q - 20000 + 1) % 10000;
        }
        let _ = std::fs::write(self.dir.join(dev).join("queue"), q.to_string());
        q
    }
}

impl Daemon {
    fn socket(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// `change`/`replace`: the pipe reconfigured in place (what it holds
    /// stays in it).
    pub(crate) fn configure(&self, q: &Qdisc, words: &[&str]) -> Result<(), Refusal> {
        let config = pipe_config(q)?;
        call_words(&self.socket(), &config, false)?;
        write(&self.dir.join("words"), &words.join("\n"))
    }

    /// `del`: the daemon stopped (its table and queue go with it) and its
    /// state removed.
    pub(crate) fn stop(&self) -> Result<(), Refusal> {
        let pid = nix::unistd::Pid::from_raw(self.pid);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let asked = Instant::now();
        while alive(self.pid) {
            if asked.elapsed() > STOP_WAIT {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                std::thread::sleep(Duration::from_millis(100));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::remove_dir_all(&self.dir).map_err(|e| io_refusal("removing", &self.dir, e))?;
        // The namespace's directory goes with its last interface (another
        // still there keeps it: the removal fails, as it should).
        if let Some(ns_dir) = self.dir.parent() {
            let _ = std::fs::remove_dir(ns_dir);
        }
        Ok(())
    }

    /// The qdisc's counters from the daemon's books: Sent is what rule 200
    /// counted leaving the pipe; dropped, and the backlog, the engine's;
    /// overlimits, pipe 1's `waited_packets`.
    pub(crate) fn stats(&self) -> Result<QdiscStats, Refusal> {
        let rules = call(&self.socket(), &["show"], true)?;
        let rules: serde_json::Value = serde_json::from_str(&rules.stdout)
            .map_err(|e| Refusal::kernel(format!("dummynet tc: the daemon's rules: {e}")))?;
        let count = rules["rules"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["number"] == 200))
            .cloned()
            .unwrap_or_default();
        let reply = control::call(
            &self.socket(),
            &ClientRequest {
                stats: true,
                json: true,
                ..ClientRequest::default()
            },
        )
        .map_err(|e| Refusal::kernel(format!("dummynet tc: the daemon of {}: {e}", self.dev)))?;
        let s: serde_json::Value = serde_json::from_str(&reply.stdout)
            .map_err(|e| Refusal::kernel(format!("dummynet tc: the daemon's stats: {e}")))?;
        let pipe = call(&self.socket(), &["pipe", "1", "show"], true)?;
        let pipe: serde_json::Value = serde_json::from_str(&pipe.stdout)
            .map_err(|e| Refusal::kernel(format!("dummynet tc: the daemon's pipe: {e}")))?;
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        Ok(QdiscStats {
            bytes: n(&count["bytes"]),
            packets: n(&count["packets"]),
            drops: n(&s["totals"]["dropped"]),
            // tbf counts throttled dequeues; ours, packets that waited for the pipe's busy link.
            overlimits: n(&pipe["pipes"][0]["waited_packets"]),
            backlog_bytes: n(&s["memory_bytes"]["parts"]["packets"]["now"]),
            backlog_packets: n(&s["totals"]["inside"]),
        })
    }
}

fn words_of(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn write(path: &Path, text: &str) -> Result<(), Refusal> {
    std::fs::write(path, text).map_err(|e| io_refusal("writing", path, e))
}

/// Whether process `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn call(socket: &Path, argv: &[&str], json: bool) -> Result<Reply, Refusal> {
    call_words(socket, &words_of(argv), json)
}

fn call_words(socket: &Path, argv: &[String], json: bool) -> Result<Reply, Refusal> {
    let reply = control::call(
        socket,
        &ClientRequest {
            argv: argv.to_vec(),
            json,
            ..ClientRequest::default()
        },
    )
    .map_err(|e| Refusal::kernel(format!("dummynet tc: {}: {e}", socket.display())))?;
    if reply.status != 0 {
        return Err(Refusal::kernel(format!(
            "dummynet tc: `{}` refused: {}",
            argv.join(" "),
            reply.stderr.trim_end()
        )));
    }
    Ok(reply)
}
