//! Offloads and NAPI of a network interface: GRO and TSO (ethtool's
//! legacy `SIOCETHTOOL` commands) and threaded NAPI
//! (`/sys/class/net/DEV/threaded`), read and set in the calling thread's
//! network namespace.
//!
//! Why a shell cares: a veth hands each frame to its peer's stack on the
//! sender's thread, unless the receiving end has NAPI (GRO on) and the
//! sender does not offer super-packets (TSO off: a veth keeps GSO frames
//! out of its peer's NAPI). The emulator's data plane sends into veths,
//! so without both it runs the receiving endpoints' whole TCP stacks
//! inline; with both, and the receiving ends' NAPI threaded, the kernel's
//! NAPI threads do that work instead.
//!
//! sysfs shows the devices of the namespace of whoever mounted it, not of
//! the reader's, so [`threaded`] and [`set_threaded`] read and write it on
//! a thread of their own, in a mount namespace of its own (mounts made
//! private first, so nothing leaks to anyone else's) with a fresh sysfs
//! over `/sys`; the thread and its mount namespace end with the call.
//! (The netdev generic-netlink family can set threaded NAPI per NAPI
//! instance too, but only on recent kernels; writing sysfs works on every
//! kernel that has the knob.)
//!
//! Errors say which interface, what was asked and a [`NetdevErrorKind`],
//! so a caller can tell "this driver cannot" from "not allowed here".

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;

/// An interface's offload that [`feature`] and [`set_feature`] handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Generic receive offload: merges received segments, and for a veth
    /// gives the receiving end a NAPI instance.
    Gro,
    /// TCP segmentation offload: the stack hands the device super-packets.
    Tso,
}

impl Feature {
    /// The ethtool commands that read and set it (`ETHTOOL_G*`, `ETHTOOL_S*`).
    fn commands(self) -> (u32, u32) {
        match self {
            Feature::Tso => (0x1e, 0x1f),
            Feature::Gro => (0x2b, 0x2c),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Feature::Gro => "GRO",
            Feature::Tso => "TSO",
        }
    }
}

/// Why a [`NetdevError`] happened, as far as the caller can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetdevErrorKind {
    /// Not an interface name (empty, too long, or not a plain name).
    BadName,
    /// No such interface in this network namespace.
    NoSuchInterface,
    /// Not allowed: CAP_NET_ADMIN (or, for sysfs, CAP_SYS_ADMIN) missing
    /// over the namespace, or sysfs may not be mounted here.
    NotPermitted,
    /// The driver or kernel does not do it (or keeps it as it was).
    NotSupported,
    /// Anything else; the errno says what.
    Other,
}

impl NetdevErrorKind {
    fn of(errno: Errno) -> NetdevErrorKind {
        match errno {
            Errno::ENODEV | Errno::ENOENT | Errno::ENXIO => NetdevErrorKind::NoSuchInterface,
            Errno::EPERM | Errno::EACCES | Errno::EROFS => NetdevErrorKind::NotPermitted,
            Errno::EOPNOTSUPP | Errno::EINVAL => NetdevErrorKind::NotSupported,
            _ => NetdevErrorKind::Other,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            NetdevErrorKind::BadName => "not an interface name",
            NetdevErrorKind::NoSuchInterface => "no such interface here",
            NetdevErrorKind::NotPermitted => "not permitted",
            NetdevErrorKind::NotSupported => "not supported by the kernel or driver",
            NetdevErrorKind::Other => "failed",
        }
    }
}

/// Reading or setting an interface's offload or NAPI mode failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} on {ifname}: {} ({errno})", kind.describe())]
pub struct NetdevError {
    pub ifname: String,
    /// What was asked ("setting GRO on", "reading threaded NAPI of", ...).
    pub what: String,
    pub kind: NetdevErrorKind,
    pub errno: Errno,
}

impl NetdevError {
    fn new(ifname: &str, what: impl Into<String>, errno: Errno) -> NetdevError {
        NetdevError {
            ifname: ifname.to_string(),
            what: what.into(),
            kind: NetdevErrorKind::of(errno),
            errno,
        }
    }
}

pub type Result<T> = std::result::Result<T, NetdevError>;

/// Longest interface name plus its NUL (`IFNAMSIZ`).
const IFNAMSIZ: usize = 16;

/// `ifname` as the kernel would take it, also as a path component: not
/// empty, under `IFNAMSIZ`, no `/` or NUL, not `.` or `..`.
fn check_name(ifname: &str, what: &str) -> Result<()> {
    let bad = ifname.is_empty()
        || ifname.len() >= IFNAMSIZ
        || ifname.contains(['/', '\0'])
        || ifname == "."
        || ifname == ".."
        || ifname.chars().any(char::is_whitespace);
    if bad {
        return Err(NetdevError {
            ifname: ifname.to_string(),
            what: what.to_string(),
            kind: NetdevErrorKind::BadName,
            errno: Errno::EINVAL,
        });
    }
    Ok(())
}

/// A plain datagram socket, for interface `ioctl`s in the calling
/// thread's network namespace.
pub(crate) fn probe_socket() -> std::result::Result<OwnedFd, Errno> {
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let raw = Errno::result(raw)?;
    // SAFETY: the kernel just made this descriptor for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Runs the ethtool command `buf[0]` on `ifname` (`SIOCETHTOOL` on `fd`,
/// a socket in the interface's network namespace), with `buf` as its
/// struct, which the kernel reads and fills.
///
/// # Safety
///
/// `buf` must be at least as large as the struct the kernel reads and
/// writes for that command.
pub(crate) unsafe fn ethtool(
    fd: &OwnedFd,
    ifname: &str,
    buf: &mut [u32],
) -> std::result::Result<(), Errno> {
    // SAFETY: plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if ifname.len() >= req.ifr_name.len() {
        return Err(Errno::ENAMETOOLONG);
    }
    for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: SIOCETHTOOL with `ifru_data` pointing at `buf`, live and
    // writable for the whole call and as large as the command's struct
    // (the caller's promise); the kernel keeps no pointer.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut req as *mut libc::ifreq,
        )
    };
    Errno::result(r).map(drop)
}

/// Whether `feature` is on for `ifname`, in the calling thread's network
/// namespace.
pub fn feature(ifname: &str, feature: Feature) -> Result<bool> {
    let what = format!("reading {}", feature.name());
    check_name(ifname, &what)?;
    let fd = probe_socket().map_err(|e| NetdevError::new(ifname, &what, e))?;
    get_value(&fd, ifname, feature).map_err(|e| NetdevError::new(ifname, &what, e))
}

fn get_value(fd: &OwnedFd, ifname: &str, feature: Feature) -> std::result::Result<bool, Errno> {
    // struct ethtool_value: cmd, data.
    let mut value = [feature.commands().0, 0];
    // SAFETY: struct ethtool_value is two u32s, all of `value`.
    unsafe { ethtool(fd, ifname, &mut value) }?;
    Ok(value[1] != 0)
}

/// Turns `feature` on or off for `ifname`, in the calling thread's network
/// namespace, and reads it back: a driver that keeps it as it was (the
/// kernel may fix a feature on or off) is [`NetdevErrorKind::NotSupported`].
pub fn set_feature(ifname: &str, feature: Feature, on: bool) -> Result<()> {
    let what = format!(
        "turning {} {}",
        feature.name(),
        if on { "on" } else { "off" }
    );
    check_name(ifname, &what)?;
    let failed = |e| NetdevError::new(ifname, &what, e);
    let fd = probe_socket().map_err(failed)?;
    let mut value = [feature.commands().1, u32::from(on)];
    // SAFETY: struct ethtool_value is two u32s, all of `value`.
    unsafe { ethtool(&fd, ifname, &mut value) }.map_err(failed)?;
    match get_value(&fd, ifname, feature).map_err(failed)? {
        now if now == on => Ok(()),
        _ => Err(failed(Errno::EOPNOTSUPP)),
    }
}

/// Whether `ifname`'s NAPI runs in kernel threads of its own
/// (`/sys/class/net/DEV/threaded` not 0), in the calling thread's network
/// namespace.
pub fn threaded(ifname: &str) -> Result<bool> {
    let what = "reading threaded NAPI";
    check_name(ifname, what)?;
    let text = with_own_sysfs(|sys| std::fs::read_to_string(threaded_file(sys, ifname)))
        .map_err(|e| NetdevError::new(ifname, what, e))?;
    parse_threaded(&text).ok_or_else(|| NetdevError::new(ifname, what, Errno::EBADMSG))
}

/// Makes `ifname`'s NAPI threaded (or not), in the calling thread's network
/// namespace. A veth has NAPI only while GRO is on (or XDP attached) and it
/// is up: set [`Feature::Gro`] first, or the kernel refuses (EOPNOTSUPP).
pub fn set_threaded(ifname: &str, on: bool) -> Result<()> {
    let what = if on {
        "making NAPI threaded"
    } else {
        "making NAPI not threaded"
    };
    check_name(ifname, what)?;
    with_own_sysfs(|sys| std::fs::write(threaded_file(sys, ifname), if on { "1" } else { "0" }))
        .map_err(|e| NetdevError::new(ifname, what, e))
}

fn threaded_file(sys: &Path, ifname: &str) -> std::path::PathBuf {
    sys.join("class/net").join(ifname).join("threaded")
}

/// The contents of a `threaded` file: "0" is not threaded; anything else
/// the kernel writes there (1, or 2 for threaded busy polling on newer
/// kernels) is.
fn parse_threaded(text: &str) -> Option<bool> {
    text.trim().parse::<u32>().ok().map(|n| n != 0)
}

/// Runs `f` with the path of a sysfs that shows the calling thread's
/// network namespace: on a new thread (which starts in the caller's
/// namespaces), in a mount namespace of its own whose mounts are private,
/// with sysfs mounted afresh over `/sys` (unless the sysfs already there
/// is this namespace's). Both go when the thread ends.
fn with_own_sysfs<T>(
    f: impl FnOnce(&Path) -> std::io::Result<T> + Send,
) -> std::result::Result<T, Errno>
where
    T: Send,
{
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    let io_errno = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name("dummynet-sysfs".into())
            .spawn_scoped(scope, || {
                // unshare(CLONE_NEWNS) also unshares this thread's
                // filesystem context (root, cwd): the thread's own.
                unshare(CloneFlags::CLONE_NEWNS)?;
                mount(
                    None::<&str>,
                    "/",
                    None::<&str>,
                    MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                    None::<&str>,
                )?;
                let fresh = mount(
                    Some("sysfs"),
                    "/sys",
                    Some("sysfs"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                    None::<&str>,
                );
                match fresh {
                    // The kernel refuses a filesystem on the mount point
                    // it is already mounted on: /sys shows this namespace
                    // already (as after `ip netns exec`).
                    Ok(()) | Err(Errno::EBUSY) => {}
                    Err(e) => return Err(e),
                }
                f(Path::new("/sys")).map_err(io_errno)
            })
            .map_err(io_errno)?;
        helper
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_interfaces_are_refused_before_any_call() {
        for bad in ["", "a/b", "..", ".", "sixteen-chars-xx", "a b", "x\0y"] {
            let e = check_name(bad, "reading GRO").expect_err(bad);
            assert_eq!(e.kind, NetdevErrorKind::BadName, "{bad:?}");
        }
        for good in ["dn0", "peer-12", "fifteen-chars-x", "lo"] {
            assert!(check_name(good, "reading GRO").is_ok(), "{good:?}");
        }
        let e = set_threaded("../../x", true).expect_err("a path");
        assert_eq!(e.kind, NetdevErrorKind::BadName);
    }

    #[test]
    fn errnos_sort_into_kinds_a_caller_acts_on() {
        assert_eq!(
            NetdevErrorKind::of(Errno::ENODEV),
            NetdevErrorKind::NoSuchInterface
        );
        assert_eq!(
            NetdevErrorKind::of(Errno::ENOENT),
            NetdevErrorKind::NoSuchInterface
        );
        assert_eq!(
            NetdevErrorKind::of(Errno::EPERM),
            NetdevErrorKind::NotPermitted
        );
        assert_eq!(
            NetdevErrorKind::of(Errno::EOPNOTSUPP),
            NetdevErrorKind::NotSupported
        );
        assert_eq!(NetdevErrorKind::of(Errno::EIO), NetdevErrorKind::Other);
        let e = NetdevError::new("dn0", "turning GRO on", Errno::EPERM);
        assert_eq!(
            e.to_string(),
            "turning GRO on on dn0: not permitted (EPERM: Operation not permitted)"
        );
    }

    #[test]
    fn the_threaded_file_reads_as_on_or_off() {
        assert_eq!(parse_threaded("0\n"), Some(false));
        assert_eq!(parse_threaded("1\n"), Some(true));
        assert_eq!(parse_threaded("2\n"), Some(true));
        assert_eq!(parse_threaded("enabled"), None);
        assert_eq!(parse_threaded(""), None);
    }

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    /// [`threaded`] from a thread whose /sys already shows its network
    /// namespace (as under `ip netns exec`): the kernel refuses the same
    /// sysfs twice on /sys, and that one is read.
    fn seen_through_own_sysfs() -> Result<bool> {
        use nix::mount::{mount, MsFlags};
        let failed = |e| NetdevError::new("ndt-b", "mounting sysfs for the test", e);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(failed)?;
                    let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
                    mount(None::<&str>, "/", None::<&str>, private, None::<&str>)
                        .map_err(failed)?;
                    let none = MsFlags::empty();
                    mount(Some("sysfs"), "/sys", Some("sysfs"), none, None::<&str>)
                        .map_err(failed)?;
                    threaded("ndt-b")
                })
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// A veth pair in a namespace of its own: GRO, TSO and threaded NAPI
    /// set and read back, and the host's own /sys left as it was.
    #[test]
    fn offloads_and_threaded_napi_are_set_and_read_back() {
        if !is_root() {
            println!("skipped: needs root for a network namespace");
            return;
        }
        let ns = crate::netns::Netns::new_anonymous().expect("a namespace");
        let mut rtnl = ns.rtnl().expect("rtnetlink");
        rtnl.add_veth("ndt-a", "ndt-b", None).expect("a veth pair");
        rtnl.set_up("ndt-a").expect("up");
        rtnl.set_up("ndt-b").expect("up");
        let host_sys_before = std::fs::read_dir("/sys/class/net")
            .map(|d| d.count())
            .unwrap_or(0);
        let got = ns
            .run(|| -> Result<_> {
                let before = (feature("ndt-b", Feature::Gro)?, threaded("ndt-b")?);
                // No NAPI yet: the kernel refuses threaded.
                let early = set_threaded("ndt-b", true).map_err(|e| e.kind);
                set_feature("ndt-b", Feature::Gro, true)?;
                set_threaded("ndt-b", true)?;
                set_feature("ndt-a", Feature::Tso, false)?;
                let after = (
                    feature("ndt-b", Feature::Gro)?,
                    threaded("ndt-b")?,
                    feature("ndt-a", Feature::Tso)?,
                );
                let missing = feature("ndt-zz", Feature::Gro).map_err(|e| e.kind);
                Ok((before, early, after, missing, seen_through_own_sysfs()?))
            })
            .expect("enter the namespace")
            .expect("netdev calls");
        let (before, early, after, missing, through_own) = got;
        assert_eq!(before, (false, false), "a veth's defaults");
        assert_eq!(early, Err(NetdevErrorKind::NotSupported));
        assert_eq!(after, (true, true, false));
        assert_eq!(missing, Err(NetdevErrorKind::NoSuchInterface));
        assert!(through_own, "read where /sys already shows the namespace");
        // The sysfs mounts were the helper thread's alone.
        let host_sys_after = std::fs::read_dir("/sys/class/net")
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(host_sys_before, host_sys_after);
        assert!(!Path::new("/sys/class/net/ndt-a").exists());
    }
}
