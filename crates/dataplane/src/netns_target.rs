//! `run --netns PATH|PID`: shaping a running container's traffic from
//! outside it, by running the daemon's data plane, backends and control
//! threads inside the container's network namespace.
//!
//! A namespace is named by a file: `/proc/PID/ns/net`, a bind mount such
//! as `/run/netns/NAME` (what `ip netns add` and CNI plugins make), or any
//! other nsfs file a container runtime keeps; a bare number is a PID. The
//! daemon holds the namespace open, so the kernel keeps it (and the
//! interfaces in it) alive while the daemon runs, even after the container
//! is gone: [`Target::gone`] notices that its owner went away, and `run`
//! then stops and exits with status 69 (EX_UNAVAILABLE), which releases it.
//!
//! "Went away" is what can be seen from outside: for a PID (or a
//! `/proc/PID/ns/net` path), that process ended (its start time in
//! `/proc/PID/stat` tells a reused PID from it); for any other path, that
//! the path no longer names the namespace (unmounted, removed, or now a
//! different one: `ip netns del`, a runtime tearing a sandbox down).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use dummynet_io::netns::{Netns, NetnsError, NETNS_RUN_DIR};

/// The namespace `run --netns` entered, and how to tell that its owner
/// went away.
#[derive(Debug)]
pub struct Target {
    pub ns: Netns,
    /// The namespace's inode (`net:[INODE]`, as `lsns` and
    /// `ip netns identify` know it).
    pub inode: u64,
    /// The file it was opened from.
    pub path: PathBuf,
    /// The process whose namespace it is (given as a PID or as
    /// `/proc/PID/ns/net`), with its start time in clock ticks.
    pub owner: Option<(u32, u64)>,
    /// Its name under `/run/netns`, if it was given by that path.
    pub name: Option<String>,
}

/// Why `run --netns` cannot use the namespace it names; `spec` is what was
/// given.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "--netns: empty; give a PID, /proc/PID/ns/net, /run/netns/NAME or a \
         container runtime's namespace file"
    )]
    Empty,
    /// All digits, but 0 or more than a `u32`.
    #[error("--netns {spec}: not a process id (1 to 4194304)")]
    NotAPid { spec: String },
    /// No `/proc/PID`: ended, or in another PID namespace.
    #[error(
        "--netns {spec}: no process {pid} (it has ended, or runs in another PID \
         namespace: a container needs the host's PIDs, e.g. hostPID)"
    )]
    NoProcess { spec: String, pid: u32 },
    /// The process ended while its namespace was being opened.
    #[error("--netns {spec}: process {pid} has ended")]
    Ended { spec: String, pid: u32 },
    #[error("--netns {spec}: no such file")]
    NoFile { spec: String, source: io::Error },
    #[error(
        "--netns {spec}: permission denied opening {}: another process's \
         network namespace needs root (CAP_SYS_ADMIN, and CAP_SYS_PTRACE for \
         /proc/PID)",
        path.display()
    )]
    OpenDenied {
        spec: String,
        path: PathBuf,
        source: io::Error,
    },
    #[error("--netns {spec}: opening {}: {source}", path.display())]
    Open {
        spec: String,
        path: PathBuf,
        source: io::Error,
    },
    /// The file is not a network namespace: `detail` says what it is.
    #[error(
        "--netns {spec}: {} is not a network namespace ({detail}); give a PID, \
         /proc/PID/ns/net, /run/netns/NAME or a container runtime's namespace file",
        path.display()
    )]
    NotNetns {
        spec: String,
        path: PathBuf,
        detail: String,
    },
    /// setns(2) refused (EPERM): CAP_SYS_ADMIN is missing.
    #[error(
        "--netns {spec}: not permitted to enter the namespace (setns needs \
         CAP_SYS_ADMIN: run as root, or a privileged container)"
    )]
    EnterDenied { spec: String, source: io::Error },
    /// Anything else the namespace's own calls refused.
    #[error("--netns {spec}: {source}")]
    Netns { spec: String, source: NetnsError },
}

/// What `--netns` names: a PID, or a path.
fn path_of(spec: &str) -> Result<(PathBuf, Option<u32>), TargetError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(TargetError::Empty);
    }
    if spec.bytes().all(|b| b.is_ascii_digit()) {
        let pid: u32 = spec
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| TargetError::NotAPid { spec: spec.into() })?;
        return Ok((PathBuf::from(format!("/proc/{pid}/ns/net")), Some(pid)));
    }
    let path = PathBuf::from(spec);
    let pid = proc_pid(&path);
    Ok((path, pid))
}

/// The PID of a `/proc/PID/ns/net` path.
fn proc_pid(path: &Path) -> Option<u32> {
    let rest = path.strip_prefix("/proc").ok()?;
    let mut parts = rest.components();
    let pid = parts.next()?.as_os_str().to_str()?.parse::<u32>().ok()?;
    let tail: PathBuf = parts.collect();
    (tail == Path::new("ns/net")).then_some(pid)
}

/// `/proc/PID/stat`'s start time (field 22, clock ticks since boot): with
/// the PID, it names one process for good, as PIDs are reused.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or
    // parentheses itself: the fields after it follow the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The name under `/run/netns` of the namespace with inode `inode`, if it
/// has one (a bind mount there shows the namespace's inode).
pub fn run_netns_name(inode: u64) -> Option<String> {
    let entries = std::fs::read_dir(NETNS_RUN_DIR).ok()?;
    entries.flatten().find_map(|e| {
        let path = e.path();
        let meta = std::fs::metadata(&path).ok()?;
        (meta.ino() == inode && is_nsfs(&path))
            .then(|| e.file_name().to_string_lossy().into_owned())
    })
}

/// Whether `path` is a namespace file (on nsfs) rather than the empty
/// file a name under `/run/netns` is before its bind mount.
fn is_nsfs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path).is_ok_and(|s| s.filesystem_type() == NSFS_MAGIC)
}

/// `NSFS_MAGIC` from <linux/magic.h>.
const NSFS_MAGIC: nix::sys::statfs::FsType = nix::sys::statfs::FsType(0x6e73_6673);

impl Target {
    /// Opens the namespace `spec` names (a PID or a path) and checks that
    /// this process may enter it, with an error that says what is wrong:
    /// no such process or file, not a network namespace, not permitted.
    pub fn open(spec: &str) -> Result<Target, TargetError> {
        let (path, pid) = path_of(spec)?;
        let given = || spec.to_string();
        if let Some(pid) = pid {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return Err(TargetError::NoProcess { spec: given(), pid });
            }
        }
        let owner = match pid {
            Some(p) => Some((
                p,
                start_ticks(p).ok_or_else(|| TargetError::Ended {
                    spec: given(),
                    pid: p,
                })?,
            )),
            None => None,
        };
        let ns = Netns::open(&path).map_err(|e| match e {
            NetnsError::Open { source, .. } => match (source.kind(), pid) {
                (io::ErrorKind::NotFound, Some(p)) => TargetError::Ended {
                    spec: given(),
                    pid: p,
                },
                (io::ErrorKind::NotFound, None) => TargetError::NoFile {
                    spec: given(),
                    source,
                },
                (io::ErrorKind::PermissionDenied, _) => TargetError::OpenDenied {
                    spec: given(),
                    path: path.clone(),
                    source,
                },
                _ => TargetError::Open {
                    spec: given(),
                    path: path.clone(),
                    source,
                },
            },
            NetnsError::NotNetns { detail, .. } => TargetError::NotNetns {
                spec: given(),
                path: path.clone(),
                detail,
            },
            source => TargetError::Netns {
                spec: given(),
                source,
            },
        })?;
        // setns needs CAP_SYS_ADMIN: refused here, before any port is
        // claimed, rather than by the first thread that tries.
        ns.run(|| ()).map_err(|e| match e {
            NetnsError::Enter(source) if source.raw_os_error() == Some(nix::libc::EPERM) => {
                TargetError::EnterDenied {
                    spec: given(),
                    source,
                }
            }
            source => TargetError::Netns {
                spec: given(),
                source,
            },
        })?;
        let inode = ns.inode().map_err(|source| TargetError::Netns {
            spec: given(),
            source,
        })?;
        let name = Self::name_from_path(&path);
        Ok(Target {
            ns,
            inode,
            path,
            owner,
            name,
        })
    }

    /// `NAME` for `/run/netns/NAME` (or `/var/run/netns/NAME`).
    fn name_from_path(path: &Path) -> Option<String> {
        let parent = path.parent()?;
        let parent = std::fs::canonicalize(parent).ok()?;
        (parent == Path::new(NETNS_RUN_DIR))
            .then(|| path.file_name()?.to_str().map(str::to_owned))
            .flatten()
    }

    /// Why the namespace's owner is gone, or `None` while it is there.
    pub fn gone(&self) -> Option<String> {
        if let Some((pid, ticks)) = self.owner {
            return match start_ticks(pid) {
                Some(t) if t == ticks => None,
                _ => Some(format!(
                    "process {pid}, whose network namespace net:[{}] this daemon shapes, \
                     has ended",
                    self.inode
                )),
            };
        }
        let shown = self.path.display();
        match std::fs::metadata(&self.path) {
            Ok(m) if m.ino() == self.inode => None,
            Ok(_) => Some(format!(
                "{shown} no longer names the network namespace net:[{}] this daemon shapes",
                self.inode
            )),
            Err(e) => Some(format!(
                "{shown}, the network namespace net:[{}] this daemon shapes, is gone ({e})",
                self.inode
            )),
        }
    }

    /// How `run` names the namespace in its messages.
    pub fn describe(&self) -> String {
        let mut s = format!("net:[{}]", self.inode);
        match (&self.name, self.owner) {
            (Some(n), _) => s.push_str(&format!(" ({NETNS_RUN_DIR}/{n})")),
            (None, Some((pid, _))) => s.push_str(&format!(" (process {pid})")),
            (None, None) => s.push_str(&format!(" ({})", self.path.display())),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_a_pid_and_a_proc_path_names_one() {
        assert_eq!(
            path_of("123").unwrap(),
            (PathBuf::from("/proc/123/ns/net"), Some(123))
        );
        assert_eq!(
            path_of("/proc/77/ns/net").unwrap(),
            (PathBuf::from("/proc/77/ns/net"), Some(77))
        );
        assert_eq!(
            path_of("/run/netns/blue").unwrap(),
            (PathBuf::from("/run/netns/blue"), None)
        );
        assert_eq!(proc_pid(Path::new("/proc/77/ns/uts")), None);
        assert_eq!(proc_pid(Path::new("/proc/self/ns/net")), None);
        for bad in ["", "  ", "0", "99999999999999999999"] {
            assert!(path_of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn our_own_start_time_is_read_and_stable() {
        let me = std::process::id();
        let t = start_ticks(me).expect("our own /proc/PID/stat");
        assert_eq!(start_ticks(me), Some(t));
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let err = Target::open("/proc/self/status").unwrap_err();
        assert!(
            matches!(&err, TargetError::NotNetns { path, .. } if path == Path::new("/proc/self/status"))
        );
        let err = err.to_string();
        assert!(err.contains("is not a network namespace"), "{err}");
        let err = Target::open("/nonexistent/netns").unwrap_err();
        assert!(
            matches!(&err, TargetError::NoFile { source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        let err = err.to_string();
        assert!(err.contains("no such file"), "{err}");
        // The largest PID the kernel allows is 4194304.
        let err = Target::open("4194305").unwrap_err();
        assert!(matches!(err, TargetError::NoProcess { pid: 4194305, .. }));
        let err = err.to_string();
        assert!(err.contains("no process 4194305"), "{err}");
        let err = Target::open(" ").unwrap_err().to_string();
        assert!(err.starts_with("--netns: empty; give a PID"), "{err}");
    }

    #[test]
    fn our_own_namespace_is_a_target_while_we_live() {
        if !nix::unistd::geteuid().is_root() {
            println!("skipped: entering a namespace needs root");
            return;
        }
        let me = std::process::id().to_string();
        let t = Target::open(&me).expect("our own namespace");
        assert_eq!(t.owner.map(|o| o.0), Some(std::process::id()));
        assert_eq!(t.gone(), None);
        assert!(t.describe().starts_with("net:["), "{}", t.describe());
    }
}
