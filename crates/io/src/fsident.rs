//! Taking a control client's filesystem identity on one thread, to open the
//! files its command names with its rights rather than the daemon's.
//!
//! Linux keeps the filesystem uid and gid (`setfsuid(2)`, `setfsgid(2)`)
//! and the supplementary groups per thread. glibc's `setgroups` (and
//! `setuid`, `setgid`...) broadcast the change to every thread of the
//! process, which would hand the data plane a client's identity for a
//! moment; `setfsuid` and `setfsgid` are plain system calls, and the groups
//! are set here with the raw `setgroups` system call, which changes only
//! the calling thread. When the filesystem uid goes from 0 to another, the
//! kernel also drops the thread's CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH,
//! so root's power to read anything goes with it, and comes back with 0.
//!
//! A peer's groups are read with `SO_PEERGROUPS`: the groups it had when it
//! connected, taken by the kernel (not `/proc/PID`, whose PID may be
//! another process by the time it is read).

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// The supplementary groups of the process at the other end of the Unix
/// socket `sock`, as they were when it connected.
pub fn peer_groups(sock: &impl AsFd) -> io::Result<Vec<u32>> {
    // NGROUPS_MAX on Linux is 65536; start small and grow as told.
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let capacity = groups.len() * std::mem::size_of::<libc::gid_t>();
        let mut len = libc::socklen_t::try_from(capacity)
            .map_err(|_| io::Error::other("too many peer groups"))?;
        // SAFETY: `groups` is a live buffer of `capacity` bytes, and `len`
        // tells the kernel so; it writes at most that many and sets `len`
        // to what it wrote (or to what it needs, with ERANGE).
        let rc = unsafe {
            libc::getsockopt(
                sock.as_fd().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let needed =
            usize::try_from(len).unwrap_or(usize::MAX) / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(needed.min(groups.len()));
            return Ok(groups);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ERANGE) || needed <= groups.len() || needed > 65536 {
            return Err(err);
        }
        groups.resize(needed, 0);
    }
}

/// Who a thread is to the filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsIdentity {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// While it lives, the calling thread opens files as another
/// [`FsIdentity`]; dropping it gives the thread back its own. It must be
/// dropped on the thread that made it (it is neither `Send` nor `Sync`).
#[derive(Debug)]
pub struct Assumed {
    own: FsIdentity,
    _not_send: std::marker::PhantomData<*const ()>,
}

/// The calling thread's filesystem identity.
pub fn current() -> io::Result<FsIdentity> {
    Ok(FsIdentity {
        uid: fsuid(),
        gid: fsgid(),
        groups: thread_groups()?,
    })
}

/// Makes the calling thread open files as `who` until the guard drops.
/// Fails (and changes nothing) unless the process may (CAP_SETUID and
/// CAP_SETGID: in practice, root).
pub fn assume(who: &FsIdentity) -> io::Result<Assumed> {
    let own = current()?;
    let guard = Assumed {
        own,
        _not_send: std::marker::PhantomData,
    };
    // Groups first, while the thread still has its capabilities; the
    // guard's drop restores whatever part was changed.
    set_thread_groups(&who.groups)?;
    set_fsgid(who.gid)?;
    set_fsuid(who.uid)?;
    Ok(guard)
}

impl Drop for Assumed {
    fn drop(&mut self) {
        // The uid first: going back to 0 restores the capabilities that
        // setting the gid and groups back may need. A failure here cannot
        // be reported; it leaves this thread (a client's, which ends soon)
        // with less access, never more.
        let _ = set_fsuid(self.own.uid);
        let _ = set_fsgid(self.own.gid);
        let _ = set_thread_groups(&self.own.groups);
    }
}

fn fsuid() -> u32 {
    // SAFETY: setfsuid has no memory effects; with -1 (an invalid id) it
    // changes nothing and returns the current filesystem uid.
    let id = unsafe { libc::setfsuid(u32::MAX) };
    u32::try_from(id).unwrap_or(u32::MAX)
}

fn fsgid() -> u32 {
    // SAFETY: as for `fsuid`.
    let id = unsafe { libc::setfsgid(u32::MAX) };
    u32::try_from(id).unwrap_or(u32::MAX)
}

/// setfsuid reports no error: it returns the previous id either way, so
/// success is checked by reading the id back.
fn set_fsuid(uid: u32) -> io::Result<()> {
    // SAFETY: setfsuid has no memory effects.
    unsafe { libc::setfsuid(uid) };
    if fsuid() == uid {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EPERM))
    }
}

fn set_fsgid(gid: u32) -> io::Result<()> {
    // SAFETY: setfsgid has no memory effects.
    unsafe { libc::setfsgid(gid) };
    if fsgid() == gid {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EPERM))
    }
}

/// The calling thread's supplementary groups. The getgroups system call
/// reads the calling thread's credentials.
fn thread_groups() -> io::Result<Vec<u32>> {
    // SAFETY: with a size of 0 the kernel only returns the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    let mut groups: Vec<libc::gid_t> = vec![0; n];
    let size = libc::c_int::try_from(n).map_err(|_| io::Error::other("too many groups"))?;
    // SAFETY: `groups` holds `size` entries, and the kernel writes at most
    // that many.
    let got = unsafe { libc::getgroups(size, groups.as_mut_ptr()) };
    let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
    groups.truncate(got);
    Ok(groups)
}

/// Sets the calling thread's supplementary groups only: the raw system
/// call, not glibc's wrapper, which would set them on every thread.
fn set_thread_groups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: the kernel reads `groups.len()` gids from a live slice.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn a_socket_pair_sees_its_own_groups() {
        let (a, _b) = UnixStream::pair().unwrap();
        let mut got = peer_groups(&a).unwrap();
        let mut own = thread_groups().unwrap();
        got.sort_unstable();
        own.sort_unstable();
        assert_eq!(got, own);
    }

    /// The identity changes on this thread only, and comes back.
    #[test]
    fn an_assumed_identity_stays_on_its_thread_and_is_given_back() {
        if !is_root() {
            eprintln!("note: needs root; skipped");
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("dummynet-fsident-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root_only = dir.join("root-only");
        std::fs::write(&root_only, "x").unwrap();
        std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o600)).unwrap();
        let for_group = dir.join("for-group");
        std::fs::write(&for_group, "x").unwrap();
        std::os::unix::fs::chown(&for_group, None, Some(60_604)).unwrap();
        std::fs::set_permissions(&for_group, std::fs::Permissions::from_mode(0o640)).unwrap();
        let own = current().unwrap();
        let other = FsIdentity {
            uid: 60_601,
            gid: 60_602,
            groups: vec![60_603, 60_604],
        };
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let observer = std::thread::spawn(move || {
            // Reads its own identity while the main thread holds another.
            let _ = go_rx.recv();
            let _ = seen_tx.send(current().unwrap());
        });
        {
            let _as = assume(&other).unwrap();
            assert_eq!(current().unwrap(), other);
            // A file only root may read is out of reach; one its group
            // may read is not.
            let denied = std::fs::File::open(&root_only).unwrap_err();
            assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(std::fs::File::open(&for_group).is_ok());
            go_tx.send(()).unwrap();
            assert_eq!(seen_rx.recv().unwrap(), own, "another thread changed");
        }
        observer.join().unwrap();
        assert_eq!(current().unwrap(), own);
        assert!(std::fs::File::open(&root_only).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
