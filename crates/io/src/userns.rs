//! User namespaces: how an ordinary user gets to make network namespaces.
//!
//! Creating a network namespace, veths and addresses needs `CAP_SYS_ADMIN`
//! and `CAP_NET_ADMIN` — not in the host's namespaces, but in the user
//! namespace that *owns* the network namespace. An unprivileged process may
//! create a user namespace of its own (where the kernel allows it), and in
//! it holds every capability: [`enter_own`] does that and maps the
//! caller's uid and gid to 0 inside. A single-id map of one's own ids is
//! the one map the kernel lets an unprivileged process write itself, so
//! nothing setuid (`newuidmap`) is involved. Network namespaces created
//! afterwards belong to the new user namespace, and everything in them
//! works as for root; the host's namespaces stay out of reach (no rights
//! there were gained), as do real-time priority and memory locking, which
//! the kernel checks against the host's user namespace.
//!
//! The kernel refuses `unshare(CLONE_NEWUSER)` to a process with more than
//! one thread: call [`enter_own`] before any thread is started.

use std::fs;
use std::io;

use nix::errno::Errno;
use nix::sched::{unshare, CloneFlags};
use nix::unistd::{getegid, geteuid, Gid, Uid};

/// What can go wrong entering a user namespace of one's own.
#[derive(Debug, thiserror::Error)]
pub enum UsernsError {
    /// The process has other threads already.
    #[error(
        "a user namespace can only be entered by a single-threaded process, and this one has {0} threads"
    )]
    Threaded(usize),
    /// The kernel (or a security module) refused the new user namespace.
    #[error("creating a user namespace (unshare CLONE_NEWUSER): {source}{}", explain(.why))]
    Refused {
        /// The error of unshare(2).
        source: io::Error,
        /// The system settings that explain it, if one was found.
        why: Option<String>,
    },
    /// Writing an id map, or `setgroups`, failed.
    #[error("writing {path}: {source}")]
    Map {
        /// The /proc file.
        path: &'static str,
        /// Why it failed.
        source: io::Error,
    },
}

fn explain(why: &Option<String>) -> String {
    why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default()
}

/// The ids the process had outside, before [`enter_own`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outside {
    pub uid: Uid,
    pub gid: Gid,
}

/// Moves the (single-threaded) calling process into a new user namespace
/// in which its own uid and gid are 0, with every capability. Supplementary
/// groups are given up (`setgroups` is denied: the kernel requires it for
/// an unprivileged gid map). Returns the ids it had outside.
pub fn enter_own() -> Result<Outside, UsernsError> {
    let outside = Outside {
        uid: geteuid(),
        gid: getegid(),
    };
    let threads = thread_count();
    if threads > 1 {
        return Err(UsernsError::Threaded(threads));
    }
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| UsernsError::Refused {
        source: io::Error::from_raw_os_error(e as i32),
        why: why_refused(e),
    })?;
    let write = |path: &'static str, text: String| {
        fs::write(path, text).map_err(|source| UsernsError::Map { path, source })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {} 1\n", outside.uid))?;
    write("/proc/self/gid_map", format!("0 {} 1\n", outside.gid))?;
    Ok(outside)
}

/// Threads of this process (`Threads:` of /proc/self/status); 1 if it
/// cannot be read, and unshare(2) then says what is wrong.
fn thread_count() -> usize {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(1)
}

/// The setting that makes the kernel refuse unprivileged user namespaces,
/// read from /proc/sys: Debian's and Ubuntu's switch, the namespace count
/// limit, and AppArmor's restriction (Ubuntu 23.10+).
fn why_refused(e: Errno) -> Option<String> {
    let read = |p: &str| {
        fs::read_to_string(format!("/proc/sys/{p}"))
            .ok()
            .map(|v| v.trim().to_string())
    };
    let mut why = Vec::new();
    if read("kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        why.push("kernel.unprivileged_userns_clone is 0");
    }
    if read("user/max_user_namespaces").as_deref() == Some("0") {
        why.push("user.max_user_namespaces is 0");
    }
    if read("kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        why.push("AppArmor restricts them: kernel.apparmor_restrict_unprivileged_userns is 1");
    }
    if why.is_empty() {
        return (e == Errno::ENOSPC)
            .then(|| "the user's limit of user namespaces is reached".to_string());
    }
    Some(format!(
        "unprivileged user namespaces are off on this machine: {}",
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threaded_process_is_refused_before_the_kernel_is_asked() {
        // The test harness runs tests on threads of their own: this
        // process has at least two.
        let kept = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)));
        match enter_own() {
            Err(UsernsError::Threaded(n)) => assert!(n >= 2, "{n}"),
            other => panic!("expected a refusal for threads, got {other:?}"),
        }
        let _ = kept.join();
    }

    #[test]
    fn refusals_name_the_setting() {
        let e = UsernsError::Refused {
            source: io::Error::from_raw_os_error(libc::EPERM),
            why: Some("unprivileged user namespaces are off on this machine: x".into()),
        };
        let text = e.to_string();
        assert!(text.contains("CLONE_NEWUSER"), "{text}");
        assert!(text.contains("are off on this machine: x"), "{text}");
    }
}
