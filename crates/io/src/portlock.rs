//! One daemon per port: an exclusive lock on each interface a bridge uses
//! and on each NFQUEUE number host mode binds, so that a second daemon is
//! refused before it touches anything (two bridges reading one port would
//! each forward every frame; a second host-mode daemon would take the
//! first one's rules for a dead daemon's and remove them).
//!
//! A lock is `flock(2)` on a file under [`LOCK_DIR`] named after the
//! network namespace (the inode of its `ns/net` file, as `lsns` and
//! `ip netns identify` know it) and the port:
//! `/run/dummynet/net4026531840-if-eth0.lock`,
//! `/run/dummynet/net4026531840-queue-7000.lock`. The kernel releases a
//! flock when its holder's process ends, however it ends, so a lock is
//! never stale: a file a crashed daemon left is taken by the next one. The
//! holder writes its pid into the file, for the refusal to say who holds
//! it, and removes the file when it lets go, so `ls /run/dummynet` shows
//! what is held. Removing a lock file is safe because a process that got
//! the lock checks that the file it locked is still the one at that path,
//! and starts over if it is not (it locked a file its holder had just
//! removed).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Where the lock files are.
pub const LOCK_DIR: &str = "/run/dummynet";

/// What a daemon claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Port {
    /// A network interface, by name (a bridge port).
    Interface(String),
    /// An NFQUEUE number (host mode).
    Queue(u16),
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Port::Interface(name) => write!(f, "interface {name}"),
            Port::Queue(n) => write!(f, "NFQUEUE {n}"),
        }
    }
}

/// Who holds a lock, as its file and `/proc` tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The pid written in the lock file, if any yet.
    pub pid: Option<u32>,
    /// That process's command line, if it can be read.
    pub command: Option<String>,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.pid, &self.command) {
            (Some(pid), Some(cmd)) => write!(f, "pid {pid} (`{cmd}`)"),
            (Some(pid), None) => write!(f, "pid {pid}"),
            // Between its flock and writing its pid.
            (None, _) => f.write_str("a process that has not written its pid yet"),
        }
    }
}

/// Why a port could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the port.
    #[error(
        "{port} in network namespace net:[{netns}] is already used by another dummynet \
         daemon, {holder}: stop it first (lock {})",
        path.display()
    )]
    Held {
        /// The port.
        port: Port,
        /// The namespace's inode.
        netns: u64,
        /// Who holds it.
        holder: Holder,
        /// The lock file.
        path: PathBuf,
    },
    /// The interface name cannot be one (and must not name a path).
    #[error("`{0}` is not an interface name")]
    BadName(String),
    /// The lock file could not be made, opened or locked.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// A claimed port, released when dropped (or when the process ends).
#[derive(Debug)]
pub struct PortLock {
    /// Unlocked when dropped, after [`Drop`] below removed the file.
    file: Flock<File>,
    path: PathBuf,
    port: Port,
}

impl Drop for PortLock {
    fn drop(&mut self) {
        // Still locked here: a process that opened the file meanwhile gets
        // the lock on a removed file, sees it, and starts over.
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

/// Linux's rule for interface names (`dev_valid_name`): 1 to 15 bytes, not
/// `.` or `..`, no `/`, `:` or white space.
fn valid_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
}

/// The inode of the calling thread's network namespace.
fn netns_inode() -> Result<u64, LockError> {
    let path = "/proc/thread-self/ns/net";
    std::fs::metadata(path)
        .map(|m| m.ino())
        .map_err(|source| LockError::Io {
            op: "reading",
            path: path.into(),
            source,
        })
}

/// `file` is the file at `path` (not one removed from there).
fn still_at(file: &File, path: &Path) -> io::Result<bool> {
    let open = file.metadata()?;
    Ok(std::fs::metadata(path).is_ok_and(|m| m.ino() == open.ino() && m.dev() == open.dev()))
}

/// Reads who holds the lock at `path`.
fn holder(path: &Path) -> Holder {
    let pid = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    let command = pid.and_then(|p| {
        let raw = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
        let words: Vec<String> = raw
            .split(|&b| b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        (!words.is_empty()).then(|| words.join(" "))
    });
    Holder { pid, command }
}

impl PortLock {
    /// Claims `port` in the calling thread's network namespace, in
    /// [`LOCK_DIR`].
    pub fn acquire(port: Port) -> Result<PortLock, LockError> {
        Self::acquire_in(Path::new(LOCK_DIR), port)
    }

    /// [`acquire`](Self::acquire) with the lock files in `dir`.
    pub fn acquire_in(dir: &Path, port: Port) -> Result<PortLock, LockError> {
        let netns = netns_inode()?;
        let file_name = match &port {
            Port::Interface(name) if valid_interface_name(name) => {
                format!("net{netns}-if-{name}.lock")
            }
            Port::Interface(name) => return Err(LockError::BadName(name.clone())),
            Port::Queue(n) => format!("net{netns}-queue-{n}.lock"),
        };
        std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
            op: "creating",
            path: dir.into(),
            source,
        })?;
        let path = dir.join(file_name);
        // Each turn that finds the file replaced under it starts over; a
        // few are plenty (each needs another daemon to let go meanwhile).
        for _ in 0..8 {
            if let Some(lock) = Self::try_path(&path, &port, netns)? {
                return Ok(lock);
            }
        }
        Err(LockError::Io {
            op: "locking (the file kept being replaced)",
            path,
            source: Errno::EAGAIN.into(),
        })
    }

    /// One attempt: `None` if the file locked was removed meanwhile.
    fn try_path(path: &Path, port: &Port, netns: u64) -> Result<Option<PortLock>, LockError> {
        let io_err = |op: &'static str| {
            let path = path.to_path_buf();
            move |source: io::Error| LockError::Io { op, path, source }
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(io_err("opening"))?;
        let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => f,
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(LockError::Held {
                    holder: holder(path),
                    port: port.clone(),
                    netns,
                    path: path.to_path_buf(),
                })
            }
            Err((_, e)) => return Err(io_err("locking")(e.into())),
        };
        if !still_at(&file, path).map_err(io_err("reading"))? {
            // Removed (or replaced) by the holder that just let go.
            return Ok(None);
        }
        let pid = format!("{}\n", std::process::id());
        file.set_len(0)
            .and_then(|()| file.write_all_at(pid.as_bytes(), 0))
            .map_err(io_err("writing the pid into"))?;
        Ok(Some(PortLock {
            file,
            path: path.to_path_buf(),
            port: port.clone(),
        }))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The port held.
    pub fn port(&self) -> &Port {
        &self.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "dnlock-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_port_is_held_once_and_freed_on_drop() {
        let dir = scratch();
        let a = PortLock::acquire_in(&dir, Port::Interface("eth0".into())).expect("first");
        let text = std::fs::read_to_string(a.path()).expect("lock file");
        assert_eq!(text, format!("{}\n", std::process::id()));
        // flock locks belong to the open file: a second open, even in the
        // same process, is refused.
        match PortLock::acquire_in(&dir, Port::Interface("eth0".into())) {
            Err(LockError::Held {
                port, holder, path, ..
            }) => {
                assert_eq!(port, Port::Interface("eth0".into()));
                assert_eq!(holder.pid, Some(std::process::id()));
                assert!(holder.command.is_some());
                assert_eq!(path, a.path());
            }
            other => panic!("expected Held, got {other:?}"),
        }
        // Other ports are free.
        let q = PortLock::acquire_in(&dir, Port::Queue(7000)).expect("queue");
        let q2 = PortLock::acquire_in(&dir, Port::Queue(7001)).expect("another queue");
        assert_ne!(q.path(), q2.path());
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "the holder removes its file");
        let again = PortLock::acquire_in(&dir, Port::Interface("eth0".into())).expect("freed");
        assert_eq!(again.port(), &Port::Interface("eth0".into()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_left_by_a_dead_holder_is_taken() {
        let dir = scratch();
        std::fs::create_dir_all(&dir).expect("dir");
        let netns = netns_inode().expect("netns");
        let left = dir.join(format!("net{netns}-queue-3.lock"));
        std::fs::write(&left, "999999999\n").expect("write");
        let l = PortLock::acquire_in(&dir, Port::Queue(3)).expect("not held by anyone");
        assert_eq!(l.path(), left);
        assert_eq!(
            std::fs::read_to_string(&left).expect("read"),
            format!("{}\n", std::process::id())
        );
        drop(l);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_lock_on_a_removed_file_is_not_a_lock() {
        let dir = scratch();
        let held = PortLock::acquire_in(&dir, Port::Queue(4)).expect("first");
        let path = held.path().to_path_buf();
        // A process that opened the file just before its holder let go.
        let late = File::open(&path).expect("open");
        assert!(still_at(&late, &path).expect("stat"));
        drop(held);
        assert!(!still_at(&late, &path).expect("stat"), "removed");
        let next = PortLock::acquire_in(&dir, Port::Queue(4)).expect("a new file");
        assert!(!still_at(&late, &path).expect("stat"), "replaced");
        assert!(still_at(&next.file, &path).expect("stat"));
        drop(next);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_refusal_names_the_port_the_holder_and_the_file() {
        let dir = scratch();
        let _a = PortLock::acquire_in(&dir, Port::Queue(9)).expect("first");
        let e = PortLock::acquire_in(&dir, Port::Queue(9)).expect_err("second");
        let text = e.to_string();
        assert!(
            text.starts_with("NFQUEUE 9 in network namespace net:["),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains("-queue-9.lock"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn interface_names_cannot_escape_the_directory() {
        let dir = scratch();
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a b",
            "a:1",
            "sixteen-bytes-xx",
        ] {
            assert!(
                matches!(
                    PortLock::acquire_in(&dir, Port::Interface(bad.into())),
                    Err(LockError::BadName(_))
                ),
                "{bad:?}"
            );
        }
        assert!(valid_interface_name("veth-a.10"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_holder_without_a_pid_yet_is_said_so() {
        let h = Holder {
            pid: None,
            command: None,
        };
        assert_eq!(h.to_string(), "a process that has not written its pid yet");
        let h = Holder {
            pid: Some(12),
            command: Some("dummynet run --host".into()),
        };
        assert_eq!(h.to_string(), "pid 12 (`dummynet run --host`)");
    }
}
