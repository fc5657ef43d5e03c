//! Network namespaces: anonymous or named, and running threads, closures
//! and commands inside them.
//!
//! On Linux the network namespace belongs to a *thread*, not to a process:
//! `setns(2)` and `unshare(2)` with `CLONE_NEWNET` move only the calling
//! thread, and every socket a thread opens is created in (and stays in) the
//! namespace the thread was in at that moment. This module builds on that:
//!
//! - [`Netns::new_anonymous`] makes a namespace that has no name anywhere in
//!   the file system. It lives exactly as long as something holds it (our
//!   file descriptor, a thread or process inside it, a socket created in it),
//!   so a daemon that crashes leaves nothing behind: the kernel tears the
//!   namespace down, veth pairs and all.
//! - [`Netns::create_named`] does what `ip netns add` does (a bind mount on
//!   `/run/netns/NAME`) for users who want to reach the namespace with
//!   `ip netns exec`; the returned [`NamedNetns`] removes it when dropped.
//! - [`Netns::run`], [`Netns::spawn_thread`] and [`Netns::command`] run code
//!   inside a namespace without ever moving the caller's thread.
//!
//! ```no_run
//! use dummynet_io::netns::Netns;
//! use dummynet_io::rtnl::Rtnl;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let left = Netns::new_anonymous()?;
//! let right = Netns::new_anonymous()?;
//! // An rtnetlink socket belongs to the namespace of the thread that opens
//! // it: `rtnl()` opens one inside `left`; the pair is created from there,
//! // its peer directly in `right`.
//! let mut rtnl = left.rtnl()?;
//! rtnl.add_veth("dn0a", "dn0b", Some(std::os::fd::AsFd::as_fd(&right)))?;
//! rtnl.set_up("dn0a")?;
//! # Ok(())
//! # }
//! ```

// setns(2) in `Command::pre_exec` and the NS_GET_NSTYPE ioctl need unsafe.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};

use crate::rtnl::{Rtnl, RtnlError};

/// Where `ip netns` keeps the bind mounts that give namespaces their names.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// The calling thread's own namespace. `/proc/self/ns/net` would name the
/// namespace of the thread-group leader instead, which is wrong as soon as
/// some other thread of ours has entered a namespace.
const THREAD_SELF_NS: &str = "/proc/thread-self/ns/net";

/// What can go wrong with a network namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The namespace file could not be opened.
    #[error("opening network namespace {path}: {source}")]
    Open {
        /// The file that was opened.
        path: PathBuf,
        /// Why the kernel refused.
        source: io::Error,
    },
    /// The file opened fine but is not a network namespace (for instance a
    /// stale `/run/netns/NAME` left by a crash, which is an empty file).
    #[error("{path} is not a network namespace ({detail})")]
    NotNetns {
        /// The file that was opened.
        path: PathBuf,
        /// What it is instead.
        detail: String,
    },
    /// `unshare(CLONE_NEWNET)` failed (it needs CAP_SYS_ADMIN).
    #[error("creating a network namespace (unshare CLONE_NEWNET): {0}")]
    Unshare(#[source] io::Error),
    /// `setns(2)` failed (it needs CAP_SYS_ADMIN).
    #[error("entering a network namespace (setns): {0}")]
    Enter(#[source] io::Error),
    /// A helper thread could not be started.
    #[error("starting thread {name:?}: {source}")]
    Thread {
        /// The thread's name.
        name: String,
        /// Why it could not start.
        source: io::Error,
    },
    /// The loopback interface of a new namespace could not be brought up.
    #[error("bringing lo up in a new network namespace: {0}")]
    Loopback(#[source] Box<RtnlError>),
    /// An rtnetlink socket could not be opened in the namespace.
    #[error(transparent)]
    Rtnl(Box<RtnlError>),
    /// The namespace could not be identified with fstat(2).
    #[error("identifying a network namespace (fstat): {0}")]
    Stat(#[source] io::Error),
    /// A name for `/run/netns` that `ip netns` could not use either.
    #[error("invalid network namespace name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A named namespace of that name exists already.
    #[error("network namespace {path} already exists")]
    Exists {
        /// Its file under `/run/netns`.
        path: PathBuf,
    },
    /// A step of giving a namespace its name (or taking it away) failed.
    #[error("{action} {path}: {source}")]
    Named {
        /// What was being done, e.g. "bind-mounting the namespace onto".
        action: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
}

/// Results of this module.
pub type Result<T> = std::result::Result<T, NetnsError>;

fn errno_io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

// NS_GET_NSTYPE from <linux/nsfs.h>: _IO(0xb7, 0x3). Answers the CLONE_NEW*
// flag of the namespace behind an nsfs file, and ENOTTY for any other file.
// The macro makes a `pub` function: a private module keeps it out of our API.
mod nsfs {
    nix::ioctl_none!(ns_get_nstype, 0xb7, 0x3);
}

/// A handle on a network namespace.
///
/// The handle is an open `nsfs` file: as long as it (or any clone of it) is
/// open, the namespace exists, even if nothing runs inside it and it has no
/// name. Clones share one file descriptor, so they are cheap and all of them
/// must be dropped for an anonymous namespace to go away.
#[derive(Debug, Clone)]
pub struct Netns {
    fd: Arc<OwnedFd>,
}

impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Netns {
    /// The namespace the calling thread is in now.
    pub fn current() -> Result<Netns> {
        Netns::open(THREAD_SELF_NS)
    }

    /// Opens a namespace file: `/proc/PID/ns/net`, `/proc/PID/task/TID/ns/net`
    /// or a bind mount such as `/run/netns/NAME`. The file is checked to
    /// really be a network namespace, so a stale name left by a crash is
    /// reported here rather than as a puzzling `setns` failure later.
    pub fn open(path: impl AsRef<Path>) -> Result<Netns> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| NetnsError::Open {
            path: path.to_owned(),
            source,
        })?;
        // SAFETY: NS_GET_NSTYPE takes no argument and only reads the file
        // behind the descriptor, which `file` keeps open for the call.
        let kind = unsafe { nsfs::ns_get_nstype(file.as_raw_fd()) };
        match kind {
            Ok(t) if t == CloneFlags::CLONE_NEWNET.bits() => Ok(Netns {
                fd: Arc::new(file.into()),
            }),
            Ok(t) => Err(NetnsError::NotNetns {
                path: path.to_owned(),
                detail: format!("a namespace of another type, CLONE_NEW* flag {t:#x}"),
            }),
            Err(Errno::ENOTTY) => Err(NetnsError::NotNetns {
                path: path.to_owned(),
                detail: "not a namespace file".to_owned(),
            }),
            Err(e) => Err(NetnsError::NotNetns {
                path: path.to_owned(),
                detail: format!("NS_GET_NSTYPE: {}", errno_io(e)),
            }),
        }
    }

    /// Creates a new network namespace that has no name, with its `lo` up
    /// (a fresh namespace has only `lo`, and down).
    ///
    /// The work happens on a short-lived helper thread that unshares its own
    /// network namespace, opens it and exits: the calling thread never
    /// moves. The namespace lives as long as the returned handle (or a
    /// clone), a thread or process inside it, or a socket created in it.
    pub fn new_anonymous() -> Result<Netns> {
        let name = "netns-new";
        thread::scope(|scope| {
            let helper = thread::Builder::new()
                .name(name.to_owned())
                .spawn_scoped(scope, || -> Result<Netns> {
                    unshare(CloneFlags::CLONE_NEWNET)
                        .map_err(|e| NetnsError::Unshare(errno_io(e)))?;
                    let ns = Netns::current()?;
                    // The socket is opened by this thread, hence in the new
                    // namespace; it is closed before the thread exits.
                    Rtnl::open()
                        .and_then(|mut rtnl| rtnl.set_up("lo"))
                        .map_err(|e| NetnsError::Loopback(Box::new(e)))?;
                    Ok(ns)
                })
                .map_err(|source| NetnsError::Thread {
                    name: name.to_owned(),
                    source,
                })?;
            join_or_resume(helper.join())
        })
    }

    /// Opens the named namespace `/run/netns/NAME` (made by `ip netns add`
    /// or by [`Netns::create_named`]).
    pub fn open_named(name: &str) -> Result<Netns> {
        check_name(name)?;
        Netns::open(Path::new(NETNS_RUN_DIR).join(name))
    }

    /// Creates a new namespace (with `lo` up) and gives it a name the way
    /// `ip netns add NAME` does: `/run/netns` is made a shared mount (so
    /// that names propagate to other mount namespaces, as `ip` expects), an
    /// empty file `/run/netns/NAME` is created and the namespace is
    /// bind-mounted onto it. The bind mount keeps the namespace alive on its
    /// own; dropping the returned guard unmounts it and removes the file.
    pub fn create_named(name: &str) -> Result<NamedNetns> {
        check_name(name)?;
        let dir = Path::new(NETNS_RUN_DIR);
        fs::create_dir_all(dir).map_err(|source| NetnsError::Named {
            action: "creating directory",
            path: dir.to_owned(),
            source,
        })?;
        make_shared(dir)?;
        let path = dir.join(name);
        // Mode 0, O_EXCL: like `ip`, so that two creators of one name cannot
        // both believe they own it.
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o000)
            .open(&path)
            .map_err(|source| {
                if source.kind() == io::ErrorKind::AlreadyExists {
                    NetnsError::Exists { path: path.clone() }
                } else {
                    NetnsError::Named {
                        action: "creating",
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        let bound = Netns::new_anonymous().and_then(|ns| {
            // The magic link /proc/self/fd/N resolves to the nsfs file
            // itself, so it can be the source of a bind mount.
            let source = format!("/proc/self/fd/{}", ns.fd.as_raw_fd());
            mount(
                Some(source.as_str()),
                &path,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| NetnsError::Named {
                action: "bind-mounting the namespace onto",
                path: path.clone(),
                source: errno_io(e),
            })?;
            Ok(ns)
        });
        match bound {
            Ok(ns) => Ok(NamedNetns {
                ns,
                name: name.to_owned(),
                path,
                mounted: true,
            }),
            Err(e) => {
                // Best effort: the creation error is the one worth reporting.
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Moves the calling thread into this namespace, for good (until the
    /// next `setns`). Sockets the thread opens from now on belong to this
    /// namespace; sockets it opened before keep theirs. Other threads of
    /// the process are not affected.
    ///
    /// Note that `/proc/self/net` and `/proc/net` keep showing the
    /// namespace of the process's main thread; `/proc/thread-self/net`
    /// shows this one. `/proc/sys/net` follows the thread that opens it
    /// (see [`crate::rtnl::set_sysctl`]).
    pub fn enter_thread(&self) -> Result<()> {
        setns(self.fd.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| NetnsError::Enter(errno_io(e)))
    }

    /// Starts a thread named `name` that enters this namespace and then
    /// runs `f`. It returns once the thread is inside the namespace, so a
    /// `setns` failure is reported here and `f` never runs outside.
    ///
    /// The thread keeps the namespace alive while it runs, even if every
    /// handle is dropped.
    pub fn spawn_thread<F, T>(&self, name: &str, f: F) -> Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let ns = self.clone();
        let (entered_tx, entered_rx) = mpsc::sync_channel(1);
        let handle = thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let entered = ns.enter_thread();
                drop(ns);
                let ok = entered.is_ok();
                // The receiver waits for this message, so the send succeeds.
                let _ = entered_tx.send(entered);
                if !ok {
                    // The error went to the caller, who drops this handle.
                    // resume_unwind ends the thread without running `f` and
                    // without the panic hook printing anything.
                    std::panic::resume_unwind(Box::new("setns failed; reported to the caller"));
                }
                f()
            })
            .map_err(|source| NetnsError::Thread {
                name: name.to_owned(),
                source,
            })?;
        match entered_rx.recv() {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(e)) => Err(e),
            // The thread dropped the sender without sending: it cannot, but
            // its join result then tells what happened.
            Err(_) => match handle.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(_) => Err(NetnsError::Enter(io::Error::other(
                    "namespace thread ended before entering",
                ))),
            },
        }
    }

    /// Runs `f` on a helper thread inside this namespace, waits for it and
    /// returns its result. The calling thread does not move.
    ///
    /// This is the way to create sockets (rtnetlink, AF_PACKET, UDP…) in a
    /// namespace: a socket keeps the namespace it was created in after the
    /// helper thread is gone. A panic in `f` is resumed in the caller.
    pub fn run<F, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let name = "netns-run";
        thread::scope(|scope| {
            let helper = thread::Builder::new()
                .name(name.to_owned())
                .spawn_scoped(scope, || -> Result<T> {
                    self.enter_thread()?;
                    Ok(f())
                })
                .map_err(|source| NetnsError::Thread {
                    name: name.to_owned(),
                    source,
                })?;
            join_or_resume(helper.join())
        })
    }

    /// Opens an rtnetlink socket bound to this namespace (on a helper
    /// thread, see [`Netns::run`]); the socket can then be used from any
    /// thread and keeps configuring this namespace.
    pub fn rtnl(&self) -> Result<Rtnl> {
        self.run(Rtnl::open)?
            .map_err(|e| NetnsError::Rtnl(Box::new(e)))
    }

    /// A [`Command`] for `program` whose child process enters this network
    /// namespace between `fork` and `exec`. Only the network namespace
    /// changes: the child shares our mount namespace, so `/sys/class/net`
    /// still shows ours (unlike `ip netns exec`, which remounts /sys), while
    /// `/proc/net` is right because the child is single-threaded.
    ///
    /// The namespace descriptor is close-on-exec, so the program does not
    /// inherit it.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        let fd = Arc::clone(&self.fd);
        let enter = move || -> io::Result<()> {
            setns(fd.as_fd(), CloneFlags::CLONE_NEWNET).map_err(errno_io)
        };
        // SAFETY: the closure runs in the child between fork and exec, where
        // only async-signal-safe operations are allowed. It dereferences an
        // Arc that the parent keeps alive (no reference count change, no
        // allocation), calls setns(2) (a plain system call), reads errno
        // and, on failure, builds an `io::Error` from a raw OS error code,
        // which stores the integer inline without allocating. No lock is
        // taken and no memory is allocated or freed.
        unsafe {
            command.pre_exec(enter);
        }
        command
    }

    /// [`Netns::command`] whose child is also killed (SIGKILL) when the
    /// *thread* that spawns it ends, the process's death by SIGKILL
    /// included: `PR_SET_PDEATHSIG`, which follows the thread that forked,
    /// so spawn from a thread that lives as long as the child should (the
    /// main thread). Only the child gets the signal, not processes it
    /// starts in turn.
    pub fn command_dying_with_parent(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = self.command(program);
        die_with_parent(&mut command);
        command
    }

    /// The namespace's inode number. Two handles name the same namespace
    /// exactly when their inode numbers are equal (all namespaces live on
    /// the one `nsfs` device); it is also the number `ip netns identify`
    /// and `/proc/PID/ns/net` (as `net:[INODE]`) show.
    pub fn inode(&self) -> Result<u64> {
        let stat =
            nix::sys::stat::fstat(self.fd.as_fd()).map_err(|e| NetnsError::Stat(errno_io(e)))?;
        Ok(stat.st_ino)
    }
}

/// Makes the child of `command` be killed (SIGKILL) when the *thread*
/// that spawns it ends, the process's death by SIGKILL included
/// (`PR_SET_PDEATHSIG`; see [`Netns::command_dying_with_parent`]), for a
/// child that stays in the spawning thread's namespace. The kernel clears
/// the signal when the child later changes its credentials (a program that
/// drops capabilities), so such a child must be stopped some other way too.
pub fn die_with_parent(command: &mut Command) {
    let parent = nix::unistd::getpid();
    let tie = move || -> io::Result<()> {
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(errno_io)?;
        // The parent may have died between fork and prctl, before the
        // signal was armed: then the child is an orphan already, and
        // exec fails (ESRCH: no one is there to read why).
        if nix::unistd::getppid() != parent {
            return Err(errno_io(Errno::ESRCH));
        }
        Ok(())
    };
    // SAFETY: runs in the child between fork and exec (after any setns
    // hook of `Netns::command`). prctl(2) and getppid(2) are plain system
    // calls; the closure captures a `Pid` (an integer) by value, takes no
    // lock and allocates nothing: its errors are raw OS error codes, stored
    // inline in the `io::Error`.
    unsafe {
        command.pre_exec(tie);
    }
}

fn join_or_resume<T>(joined: thread::Result<T>) -> T {
    match joined {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `ip` refuses the same names: they must be one path component.
fn check_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name == "." || name == ".." {
        Some("it is not a file name")
    } else if name.contains('/') {
        Some("it contains '/'")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else if name.len() > 255 {
        Some("it is longer than 255 bytes")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(NetnsError::InvalidName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Makes `dir` a shared mount point, bind-mounting it onto itself first if
/// it is not a mount point yet (the kernel answers EINVAL then). This is
/// what `ip netns add` does, so that a name created here is visible in mount
/// namespaces created later and `ip netns` keeps working alongside us.
fn make_shared(dir: &Path) -> Result<()> {
    let share = || {
        mount(
            None::<&str>,
            dir,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    let failed = |e: Errno| NetnsError::Named {
        action: "making a shared mount of",
        path: dir.to_owned(),
        source: errno_io(e),
    };
    match share() {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) => {
            mount(
                Some(dir),
                dir,
                Some("none"),
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .map_err(|e| NetnsError::Named {
                action: "bind-mounting onto itself",
                path: dir.to_owned(),
                source: errno_io(e),
            })?;
            share().map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

/// A network namespace with a name under `/run/netns`, made by
/// [`Netns::create_named`]. Dropping it takes the name away (unmount, then
/// remove the file); the namespace itself goes when nothing else holds it.
/// It dereferences to the [`Netns`].
#[derive(Debug)]
pub struct NamedNetns {
    ns: Netns,
    name: String,
    path: PathBuf,
    mounted: bool,
}

impl NamedNetns {
    /// The name, as `ip netns list` shows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mounted file, `/run/netns/NAME`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The namespace handle (also reachable through `Deref`).
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// Takes the name away now and reports failures, which `Drop` can only
    /// ignore.
    pub fn remove(mut self) -> Result<()> {
        self.unname()
    }

    fn unname(&mut self) -> Result<()> {
        if !self.mounted {
            return Ok(());
        }
        // MNT_DETACH, like `ip netns delete`: a process that has the file
        // open does not make the removal fail.
        match umount2(&self.path, MntFlags::MNT_DETACH) {
            // EINVAL: not a mount point any more (someone ran `ip netns
            // delete`); the file may still need removing.
            Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
            Err(e) => {
                return Err(NetnsError::Named {
                    action: "unmounting",
                    path: self.path.clone(),
                    source: errno_io(e),
                })
            }
        }
        self.mounted = false;
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(NetnsError::Named {
                action: "removing",
                path: self.path.clone(),
                source,
            }),
        }
    }
}

impl Deref for NamedNetns {
    type Target = Netns;

    fn deref(&self) -> &Netns {
        &self.ns
    }
}

impl Drop for NamedNetns {
    fn drop(&mut self) {
        let _ = self.unname();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn bad_names_are_refused_before_touching_anything() {
        for name in ["", ".", "..", "a/b", "x\0y"] {
            let err = Netns::open_named(name).unwrap_err();
            assert!(
                matches!(err, NetnsError::InvalidName { .. }),
                "{name:?}: {err}"
            );
        }
        let long = "n".repeat(256);
        assert!(matches!(
            Netns::create_named(&long),
            Err(NetnsError::InvalidName { .. })
        ));
    }

    #[test]
    fn a_plain_file_is_not_a_namespace() {
        let err = Netns::open("/proc/self/status").unwrap_err();
        assert!(matches!(err, NetnsError::NotNetns { .. }), "{err}");
        assert!(err.to_string().contains("/proc/self/status"), "{err}");
        let err = Netns::open("/nonexistent/netns").unwrap_err();
        assert!(matches!(err, NetnsError::Open { .. }), "{err}");
    }

    #[test]
    fn another_namespace_type_is_refused() {
        let err = Netns::open("/proc/thread-self/ns/uts").unwrap_err();
        assert!(err.to_string().contains("another type"), "{err}");
    }

    #[test]
    fn current_is_the_same_namespace_twice() {
        let a = Netns::current().unwrap();
        let b = Netns::current().unwrap();
        assert_eq!(a.inode().unwrap(), b.inode().unwrap());
    }

    #[test]
    fn run_moves_only_the_helper_thread() {
        if !is_root() {
            println!("skipped: creating namespaces needs root");
            return;
        }
        let here = Netns::current().unwrap().inode().unwrap();
        let ns = Netns::new_anonymous().unwrap();
        let there = ns
            .run(|| Netns::current().and_then(|n| n.inode()))
            .unwrap()
            .unwrap();
        assert_eq!(there, ns.inode().unwrap());
        assert_ne!(there, here);
        assert_eq!(Netns::current().unwrap().inode().unwrap(), here);
    }

    #[test]
    fn spawned_thread_runs_inside() {
        if !is_root() {
            println!("skipped: creating namespaces needs root");
            return;
        }
        let ns = Netns::new_anonymous().unwrap();
        let want = ns.inode().unwrap();
        let handle = ns
            .spawn_thread("netns-test", || {
                Netns::current().and_then(|n| n.inode()).ok()
            })
            .unwrap();
        assert_eq!(handle.join().unwrap(), Some(want));
    }

    #[test]
    fn new_namespace_has_lo_up() {
        if !is_root() {
            println!("skipped: creating namespaces needs root");
            return;
        }
        let ns = Netns::new_anonymous().unwrap();
        // A datagram to ourselves on 127.0.0.1 only arrives if lo is up.
        let got = ns
            .run(|| -> io::Result<Vec<u8>> {
                let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
                sock.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
                sock.send_to(b"lo", sock.local_addr()?)?;
                let mut buf = [0u8; 8];
                let n = sock.recv(&mut buf)?;
                Ok(buf[..n].to_vec())
            })
            .unwrap();
        assert_eq!(got.unwrap(), b"lo");
    }
}
