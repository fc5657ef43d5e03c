//! Where `dummynet ps` finds the daemons: each daemon (`run`, `shell`)
//! writes a small JSON record, `/run/dummynet/daemons/PID.json`, once it is
//! up, and removes it when it stops. A shell without root cannot write
//! there: its record goes in its user's run-time directory
//! (`$XDG_RUNTIME_DIR/dummynet/daemons/`, see [`crate::shell::rootless`]), which
//! `ps` reads too: the user's own, and every user's when run by root.
//!
//! Records rather than asking control sockets: a record says what a socket
//! cannot (the namespace the daemon entered, how it was named, its HTTP
//! address), it is read without a connection, so `ps` answers even when a
//! daemon is busy or its socket is only open to a group, and it lists
//! every daemon, not only those whose sockets one knows. A daemon killed
//! with SIGKILL cannot remove its record: a record counts only while a
//! process with its PID *and* its start time (`/proc/PID/stat`, field 22)
//! runs, so neither a dead daemon nor a reused PID is listed, and
//! [`list_in`] removes such stale records as it meets them. Nor can it
//! remove its control socket: [`sweep_in`] removes the sockets of stale
//! records and the shells' `shell-PID.sock` whose PID is gone, when nobody
//! listens on them, and `ps` says which.

use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use dummynet_dataplane::netns_target::{start_ticks, Target};

/// Where the records are.
pub const REGISTRY_DIR: &str = "/run/dummynet/daemons";

/// What a daemon shapes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mode {
    /// `run --bridge A B`.
    Bridge { interfaces: [String; 2] },
    /// `run --host`, on NFQUEUE `queue`.
    Host { queue: u16 },
    /// `dummynet shell`, running `command`.
    Shell { command: Vec<String> },
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Bridge { interfaces: [a, b] } => write!(f, "bridge {a} {b}"),
            Mode::Host { queue } => write!(f, "host queue {queue}"),
            Mode::Shell { command } => write!(f, "shell {}", command.join(" ")),
        }
    }
}

/// The network namespace a daemon works in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    /// Its inode: `net:[INODE]`.
    pub inode: u64,
    /// Its name under `/run/netns`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The process whose namespace it is, when `--netns` named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The file `--netns` named, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

impl Namespace {
    /// Where `run` works: `target`'s namespace (`--netns`), or this
    /// process's.
    pub fn of_run(target: Option<&Target>) -> Namespace {
        match target {
            Some(t) => Namespace {
                inode: t.inode,
                name: t.name.clone(),
                pid: t.owner.map(|(pid, _)| pid),
                path: Some(t.path.clone()),
            },
            None => Namespace {
                // The main thread's, where `run` works without --netns.
                inode: std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino()),
                ..Namespace::default()
            },
        }
    }
}

impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "net:[{}]", self.inode)?;
        match (&self.name, self.pid) {
            (Some(n), _) => write!(f, " netns {n}"),
            (None, Some(p)) => write!(f, " pid {p}"),
            (None, None) => Ok(()),
        }
    }
}

/// One daemon's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub pid: u32,
    /// The process's start time in clock ticks since boot, which tells
    /// it from a later process given the same PID.
    pub start_ticks: u64,
    /// When it started, in seconds since the Unix epoch.
    pub started: u64,
    pub mode: Mode,
    pub netns: Namespace,
    /// Its control socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// Where its HTTP API listens (`--http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// The dummynet version that wrote it.
    pub version: String,
    /// The inode of the writer's PID namespace: `pid` and `start_ticks`
    /// mean something only to a reader in the same one.
    #[serde(default)]
    pub pid_ns: u64,
    /// For a daemon without root (a shell in a user namespace of its
    /// own): the user it runs as, outside that namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
}

impl Record {
    /// A record for this process, started now.
    pub fn new(mode: Mode, netns: Namespace) -> Result<Record, RegistryError> {
        let pid = std::process::id();
        let start_ticks = start_ticks(pid).ok_or(RegistryError::StartTime)?;
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok(Record {
            pid,
            start_ticks,
            started,
            mode,
            netns,
            socket: None,
            http: None,
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid_ns: own_pid_ns(),
            user: crate::shell::rootless::outside_uid(),
        })
    }

    /// Whether the process that wrote it still runs.
    pub fn alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.start_ticks)
    }

    /// Whether it was written in another PID namespace than ours (a daemon
    /// in a container without the host's PIDs, sharing /run/dummynet), so
    /// that its PID cannot be checked here.
    fn foreign(&self) -> bool {
        self.pid_ns != 0 && self.pid_ns != own_pid_ns()
    }

    /// For a foreign record: whether a daemon listens on its socket.
    fn answers(&self) -> bool {
        self.socket
            .as_ref()
            .is_some_and(|p| std::os::unix::net::UnixStream::connect(p).is_ok())
    }
}

/// The inode of this process's PID namespace (0 if unknown).
fn own_pid_ns() -> u64 {
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// Why this daemon's record could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot read this process's start time in /proc/self/stat")]
    StartTime,
    #[error("writing {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// A written record, removed when dropped.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Registers this daemon for `dummynet ps`: shaping `mode` in `netns`,
/// controlled at `socket` and `http`. A record that cannot be written
/// costs only the listing: the daemon says so and runs on.
pub fn announce(
    mode: Mode,
    netns: Namespace,
    socket: Option<&Path>,
    http: Option<std::net::SocketAddr>,
) -> Option<Registration> {
    let written = Record::new(mode, netns).and_then(|mut r| {
        r.socket = socket.map(Path::to_path_buf);
        r.http = http.map(|a| a.to_string());
        register(&r).map_err(|source| RegistryError::Write {
            path: own_dir().join(format!("{}.json", r.pid)),
            source,
        })
    });
    match written {
        Ok(reg) => Some(reg),
        Err(e) => {
            say!("dummynet: warning: `dummynet ps` will not list this daemon: {e}");
            None
        }
    }
}

/// Where this process writes its record: [`REGISTRY_DIR`], or its user's
/// own directory when it runs without root.
pub fn own_dir() -> PathBuf {
    crate::shell::rootless::runtime_dir().join("daemons")
}

/// Every directory `ps` reads, first [`REGISTRY_DIR`]: the caller's own
/// run-time directory (`$XDG_RUNTIME_DIR/dummynet/daemons`, else
/// `/tmp/dummynet-UID/daemons`), and, for root of the machine (not of a
/// user namespace of its own), every user's (`/run/user/*/...`,
/// `/tmp/dummynet-*/...`).
pub fn places() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(REGISTRY_DIR)];
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        if xdg.is_absolute() {
            dirs.push(xdg.join("dummynet/daemons"));
        }
    }
    let uid = nix::unistd::geteuid().as_raw();
    dirs.push(PathBuf::from(format!("/tmp/dummynet-{uid}/daemons")));
    if uid == 0 && !crate::shell::rootless::in_user_namespace() {
        let under = |base: &str, pick: &dyn Fn(&str) -> Option<PathBuf>| -> Vec<PathBuf> {
            let Ok(entries) = std::fs::read_dir(base) else {
                return Vec::new();
            };
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(pick))
                .collect();
            found.sort();
            found
        };
        dirs.extend(under("/run/user", &|n| {
            n.parse::<u32>()
                .ok()
                .map(|_| PathBuf::from(format!("/run/user/{n}/dummynet/daemons")))
        }));
        dirs.extend(under("/tmp", &|n| {
            n.strip_prefix("dummynet-")
                .filter(|u| u.parse::<u32>().is_ok())
                .map(|_| PathBuf::from(format!("/tmp/{n}/daemons")))
        }));
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The records in every one of [`places`], each daemon once, by PID, and
/// the stale control sockets removed on the way ([`sweep_in`]).
/// Directories that cannot be read are skipped, except [`REGISTRY_DIR`],
/// whose error is returned.
pub fn list_all() -> io::Result<(Vec<Record>, Vec<StaleSocket>)> {
    let mut records = Vec::new();
    let mut stale = Vec::new();
    for (i, dir) in places().iter().enumerate() {
        match sweep_in(dir) {
            Ok((r, s)) => {
                records.extend(r);
                stale.extend(s);
            }
            Err(e) if i == 0 => return Err(e),
            Err(_) => {}
        }
    }
    records.sort_by_key(|r| (r.pid, r.start_ticks));
    records.dedup_by_key(|r| (r.pid, r.start_ticks, r.pid_ns));
    stale.sort_by(|a, b| a.path.cmp(&b.path));
    stale.dedup_by(|a, b| a.path == b.path);
    Ok((records, stale))
}

/// A control socket whose daemon is gone (killed with SIGKILL, it could
/// not remove it), which `ps` removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleSocket {
    pub path: PathBuf,
    /// The daemon's PID, when a record or the file's name says it.
    pub pid: Option<u32>,
}

impl std::fmt::Display for StaleSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())?;
        match self.pid {
            Some(pid) => write!(f, " (its daemon, PID {pid}, is gone)"),
            None => write!(f, " (nobody listens on it)"),
        }
    }
}

/// Removes `path` if it is a socket file nobody listens on
/// ([`super::control::is_stale_socket`]) and its daemon `pid` is gone
/// (`known_gone`: a stale record says so; else no process has the PID).
fn remove_stale_socket(path: &Path, pid: u32, known_gone: bool) -> Option<StaleSocket> {
    let gone = known_gone || start_ticks(pid).is_none();
    (gone && super::control::is_stale_socket(path) && std::fs::remove_file(path).is_ok()).then(
        || StaleSocket {
            path: path.to_path_buf(),
            pid: Some(pid),
        },
    )
}

/// [`list_in`], and the stale control sockets it removed: those named by
/// the stale records it removes, and the shells' `shell-PID.sock` in the
/// run-time directory above `dir` (`dir/..`) whose process is gone. Only a
/// socket file nobody listens on is removed (connection refused).
pub fn sweep_in(dir: &Path) -> io::Result<(Vec<Record>, Vec<StaleSocket>)> {
    let mut stale = Vec::new();
    let records = list_in_with(dir, &mut |r: &Record| {
        if let Some(path) = &r.socket {
            stale.extend(remove_stale_socket(path, r.pid, true));
        }
    })?;
    if let Some(Ok(entries)) = dir.parent().map(std::fs::read_dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("shell-")?.strip_suffix(".sock"))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid {
                stale.extend(remove_stale_socket(&entry.path(), pid, false));
            }
        }
    }
    Ok((records, stale))
}

/// Writes `record` into [`own_dir`].
pub fn register(record: &Record) -> io::Result<Registration> {
    register_in(&own_dir(), record)
}

/// Writes `record` as `dir/PID.json`: whole or not at all (a temporary
/// file renamed into place), readable by all (`ps` needs no root).
pub fn register_in(dir: &Path, record: &Record) -> io::Result<Registration> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}.json", record.pid));
    let tmp = dir.join(format!(".{}.json.tmp", record.pid));
    let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&tmp)?;
    file.write_all(&json)?;
    file.write_all(b"\n")?;
    drop(file);
    std::fs::rename(&tmp, &path)?;
    Ok(Registration { path })
}

/// Whether the file at `path` belongs to the user process `pid` runs as.
fn same_owner(path: &Path, pid: u32) -> bool {
    match (
        std::fs::symlink_metadata(path),
        std::fs::metadata(format!("/proc/{pid}")),
    ) {
        (Ok(file), Ok(process)) => file.uid() == process.uid(),
        _ => false,
    }
}

/// The records of the daemons that run, by PID. Stale records (their
/// process gone, or the PID now another process's) are removed when that
/// is permitted, and skipped either way; so are files that are not
/// records. A record from another PID namespace, whose PID cannot be
/// checked from here, is listed only while its control socket accepts a
/// connection, and never removed.
pub fn list_in(dir: &Path) -> io::Result<Vec<Record>> {
    list_in_with(dir, &mut |_| {})
}

/// [`list_in`], calling `gone` with each stale record it removes.
fn list_in_with(dir: &Path, gone: &mut dyn FnMut(&Record)) -> io::Result<Vec<Record>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let record = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            .filter(|r| r.pid == pid);
        match record {
            // Its PID means nothing here: listed while its socket answers,
            // and never removed (a reader here cannot tell it is stale).
            Some(r) if r.foreign() => records.extend(r.answers().then_some(r)),
            // Written by the daemon's own user: in a directory a user can
            // write, a record naming someone else's process is not listed.
            Some(r) if r.alive() => records.extend(same_owner(&path, r.pid).then_some(r)),
            // A record whose writer is gone; or a file no daemon of this
            // version can read, left by a process that no longer runs.
            Some(r) => {
                let _ = std::fs::remove_file(&path);
                gone(&r);
            }
            None if start_ticks(pid).is_none() => {
                let _ = std::fs::remove_file(&path);
            }
            None => {}
        }
    }
    records.sort_by_key(|r| r.pid);
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dn-registry-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn ours() -> Record {
        Record::new(
            Mode::Host { queue: 7000 },
            Namespace {
                inode: 4026531840,
                name: Some("blue".into()),
                ..Namespace::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_record_is_listed_while_registered_and_gone_after() {
        let dir = scratch("live");
        let mut record = ours();
        record.socket = Some("/tmp/x.sock".into());
        let reg = register_in(&dir, &record).unwrap();
        assert_eq!(list_in(&dir).unwrap(), vec![record.clone()]);
        drop(reg);
        assert_eq!(list_in(&dir).unwrap(), vec![]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// In a directory a user can write, a record naming a process of
    /// another user is not believed (nor removed: that process runs).
    #[test]
    fn a_record_owned_by_another_user_than_its_process_is_not_listed() {
        let dir = scratch("owner");
        let record = ours();
        let _reg = register_in(&dir, &record).unwrap();
        let path = dir.join(format!("{}.json", record.pid));
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        let other = if me == 65534 { 65533 } else { 65534 };
        if nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(other)), None).is_err() {
            // Only root may give a file away; as a user this cannot be set up.
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        assert_eq!(list_in(&dir).unwrap(), vec![]);
        assert!(path.exists(), "a running process's record is kept");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stale_records_are_skipped_and_swept() {
        let dir = scratch("stale");
        // Our PID with another start time: a reused PID.
        let mut reused = ours();
        reused.start_ticks += 1;
        let reg = register_in(&dir, &reused).unwrap();
        let path = dir.join(format!("{}.json", reused.pid));
        std::mem::forget(reg);
        // A PID above the kernel's limit never runs.
        let dead = dir.join("4194305.json");
        std::fs::write(&dead, "{}").unwrap();
        // Not a record: left alone.
        let other = dir.join("notes.txt");
        std::fs::write(&other, "x").unwrap();
        assert_eq!(list_in(&dir).unwrap(), vec![]);
        assert!(!path.exists(), "a reused PID's record stayed");
        assert!(!dead.exists(), "a dead PID's file stayed");
        assert!(other.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_pid_namespaces_record_counts_while_its_socket_answers() {
        let dir = scratch("foreign");
        let mut foreign = ours();
        foreign.pid = 4194305;
        foreign.pid_ns = own_pid_ns() + 1;
        let sock = dir.join("d.sock");
        foreign.socket = Some(sock.clone());
        let reg = register_in(&dir, &foreign).unwrap();
        // Nobody listens: not listed, but not removed either.
        assert_eq!(list_in(&dir).unwrap(), vec![]);
        assert!(dir.join("4194305.json").exists());
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(list_in(&dir).unwrap(), vec![foreign]);
        drop(listener);
        drop(reg);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A daemon killed with SIGKILL leaves its socket file: `ps` removes
    /// it, and says so, when its record's daemon is gone or (a shell's
    /// `shell-PID.sock`) its PID runs no process; a socket someone listens
    /// on, or whose process runs, stays.
    #[test]
    fn stale_control_sockets_are_removed_and_reported() {
        let run = scratch("sockets");
        let dir = run.join("daemons");
        std::fs::create_dir_all(&dir).unwrap();
        // A socket file nobody listens on: bound, then the listener dropped.
        let stale_socket = |path: &Path| {
            drop(std::os::unix::net::UnixListener::bind(path).unwrap());
            assert!(path.exists());
        };
        let mut dead = ours();
        dead.pid = 4194305;
        let killed = run.join("killed.sock");
        stale_socket(&killed);
        dead.socket = Some(killed.clone());
        std::mem::forget(register_in(&dir, &dead).unwrap());
        let shell = run.join("shell-4194306.sock");
        stale_socket(&shell);
        // Our own PID runs: kept, though nobody listens.
        let mine = run.join(format!("shell-{}.sock", std::process::id()));
        stale_socket(&mine);
        // Someone listens: kept.
        let live_path = run.join("shell-4194307.sock");
        let _live = std::os::unix::net::UnixListener::bind(&live_path).unwrap();
        let (records, mut removed) = sweep_in(&dir).unwrap();
        assert_eq!(records, vec![]);
        removed.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(
            removed,
            vec![
                StaleSocket {
                    path: killed.clone(),
                    pid: Some(4194305)
                },
                StaleSocket {
                    path: shell.clone(),
                    pid: Some(4194306)
                },
            ]
        );
        assert!(!killed.exists() && !shell.exists());
        assert!(mine.exists() && live_path.exists());
        assert_eq!(
            removed[0].to_string(),
            format!("{} (its daemon, PID 4194305, is gone)", killed.display())
        );
        // Nothing left to remove the second time.
        assert_eq!(sweep_in(&dir).unwrap().1, vec![]);
        let _ = std::fs::remove_dir_all(&run);
    }

    #[test]
    fn no_directory_is_no_daemons() {
        assert_eq!(list_in(&scratch("none")).unwrap(), vec![]);
    }

    #[test]
    fn modes_and_namespaces_read_as_in_ps() {
        let bridge = Mode::Bridge {
            interfaces: ["a0".into(), "b0".into()],
        };
        assert_eq!(bridge.to_string(), "bridge a0 b0");
        assert_eq!(Mode::Host { queue: 9 }.to_string(), "host queue 9");
        let json = serde_json::to_value(&bridge).unwrap();
        assert_eq!(json["kind"], "bridge");
        let ns = Namespace {
            inode: 5,
            pid: Some(42),
            ..Namespace::default()
        };
        assert_eq!(ns.to_string(), "net:[5] pid 42");
    }
}
