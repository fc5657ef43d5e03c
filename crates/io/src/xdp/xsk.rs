//! Sockets: one AF_XDP socket on one queue, and what the kernel says of its interface.

use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use nix::errno::Errno;

use super::ring::Ring;
use super::umem::Area;
use super::{sys, XdpError, XdpOptions};
use crate::netdev::{ethtool, probe_socket};

/// Counters of one socket: the kernel's and the port's own.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct XskStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Dropped by the kernel for want of a chunk on the fill ring: the
    /// UMEM was full (frames held in pipes) or the bridge read too slowly.
    pub rx_fill_ring_empty: u64,
    /// Dropped by the kernel: the rx ring was full.
    pub rx_ring_full: u64,
    /// Other drops the kernel counts on receive.
    pub rx_dropped: u64,
    /// Frames the bridge could not put on the tx ring (full): dropped.
    pub tx_ring_full: u64,
    /// Descriptors the kernel found invalid.
    pub rx_invalid: u64,
    pub tx_invalid: u64,
}

pub(super) struct Xsk {
    pub(super) fd: OwnedFd,
    pub(super) ifname: String,
    pub(super) rx: Ring<libc::xdp_desc>,
    pub(super) tx: Ring<libc::xdp_desc>,
    pub(super) fill: Ring<u64>,
    pub(super) comp: Ring<u64>,
    pub(super) stats: XskStats,
    /// Frames on the tx ring not yet kicked.
    pub(super) tx_pending: bool,
}

fn setsockopt<T>(
    fd: &OwnedFd,
    opt: libc::c_int,
    v: &T,
    what: &str,
    op: &'static str,
) -> Result<(), XdpError> {
    // SAFETY: `v` is a live value of the type the option takes, read by
    // the kernel during the call only.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    Errno::result(r).map(drop).map_err(|e| sys(what, op, e))
}

fn getsockopt<T: Copy>(fd: &OwnedFd, opt: libc::c_int, v: &mut T) -> Result<(), Errno> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a live, writable value of the option's type, and
    // `len` says its size: the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *mut T).cast(),
            &mut len,
        )
    };
    Errno::result(r).map(drop)
}

impl Xsk {
    /// A socket on `ifname`'s queue 0 with all four rings, bound with
    /// `flags`; the first registers the UMEM, the second shares the first's.
    pub(super) fn open(
        ifname: &str,
        ifindex: u32,
        area: &Area,
        opts: &XdpOptions,
        share: Option<&OwnedFd>,
        bind_flags: u16,
    ) -> Result<Xsk, XdpError> {
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        let raw = Errno::result(raw).map_err(|e| sys(ifname, "socket(AF_XDP)", e))?;
        // SAFETY: the kernel just made this descriptor for us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if share.is_none() {
            let reg = libc::xdp_umem_reg {
                addr: area.base.as_ptr() as u64,
                len: area.len as u64,
                chunk_size: opts.frame_size,
                headroom: 0,
                flags: 0,
                tx_metadata_len: 0,
            };
            setsockopt(
                &fd,
                libc::XDP_UMEM_REG,
                &reg,
                ifname,
                "setsockopt(XDP_UMEM_REG)",
            )?;
        }
        let n = opts.ring;
        setsockopt(
            &fd,
            libc::XDP_UMEM_FILL_RING,
            &n,
            ifname,
            "setsockopt(XDP_UMEM_FILL_RING)",
        )?;
        setsockopt(
            &fd,
            libc::XDP_UMEM_COMPLETION_RING,
            &n,
            ifname,
            "setsockopt(XDP_UMEM_COMPLETION_RING)",
        )?;
        setsockopt(
            &fd,
            libc::XDP_RX_RING,
            &n,
            ifname,
            "setsockopt(XDP_RX_RING)",
        )?;
        setsockopt(
            &fd,
            libc::XDP_TX_RING,
            &n,
            ifname,
            "setsockopt(XDP_TX_RING)",
        )?;
        // SAFETY: plain old data; all zeroes is a valid value.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        getsockopt(&fd, libc::XDP_MMAP_OFFSETS, &mut off)
            .map_err(|e| sys(ifname, "getsockopt(XDP_MMAP_OFFSETS)", e))?;
        let rx = Ring::map(&fd, &off.rx, n, libc::XDP_PGOFF_RX_RING as u64, ifname)?;
        let tx = Ring::map(&fd, &off.tx, n, libc::XDP_PGOFF_TX_RING as u64, ifname)?;
        let fill = Ring::map(&fd, &off.fr, n, libc::XDP_UMEM_PGOFF_FILL_RING, ifname)?;
        let comp = Ring::map(
            &fd,
            &off.cr,
            n,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            ifname,
        )?;
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: match share {
                Some(_) => libc::XDP_SHARED_UMEM,
                None => bind_flags,
            },
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: share.map_or(0, |s| s.as_raw_fd() as u32),
        };
        // SAFETY: `addr` is a live sockaddr_xdp of the size given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_xdp).cast(),
                size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        Errno::result(r).map_err(|e| sys(ifname, "bind(AF_XDP, queue 0)", e))?;
        Ok(Xsk {
            fd,
            ifname: ifname.to_string(),
            rx,
            tx,
            fill,
            comp,
            stats: XskStats::default(),
            tx_pending: false,
        })
    }

    /// Makes the kernel send what is on the tx ring (copy mode sends only
    /// in this call; zero-copy drivers when they ask for a wakeup). Copy
    /// mode sends 32 frames a call and says `EAGAIN` while more wait, so
    /// the call is repeated, a bounded number of times.
    pub(super) fn kick(&mut self) {
        if !self.tx_pending {
            return;
        }
        self.tx_pending = false;
        if !self.tx.needs_wakeup() {
            return;
        }
        // A full ring of 16384 slots at 32 a call, and one more; a call
        // that took nothing (the completion ring is full until reaped)
        // ends it.
        for _ in 0..513 {
            let before = self.tx.consumer().load(Ordering::Acquire);
            // SAFETY: a zero-length send with no buffer, which AF_XDP
            // takes as "process the tx ring".
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                return;
            }
            if Errno::last() != Errno::EAGAIN
                || self.tx.consumer().load(Ordering::Acquire) == before
            {
                break;
            }
        }
        // ENOBUFS, EBUSY, or still more: the ring keeps its frames and the
        // next flush sends them.
        self.tx_pending = true;
    }

    pub(super) fn kernel_stats(&self) -> Option<libc::xdp_statistics> {
        // SAFETY: plain old data; all zeroes is a valid value.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(&self.fd, libc::XDP_STATISTICS, &mut s).ok()?;
        Some(s)
    }
}

/// The receive queues of `ifname` (`ETHTOOL_GCHANNELS`), or `None` when
/// the driver does not say.
pub(super) fn rx_queues(fd: &OwnedFd, ifname: &str) -> Option<u32> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    // SAFETY: struct ethtool_channels is nine u32s, all of `ch`.
    unsafe { ethtool(fd, ifname, &mut ch) }.ok()?;
    // rx_count + combined_count
    Some(ch[5] + ch[8])
}

/// The name of `ifname`'s driver (`ETHTOOL_GDRVINFO`: "veth", "mlx5_core",
/// ...), in the calling thread's network namespace; `None` when there is
/// no such interface or the driver does not say.
pub fn driver_name(ifname: &str) -> Option<String> {
    const ETHTOOL_GDRVINFO: u32 = 0x03;
    let probe = open_probe(ifname).ok()?;
    // struct ethtool_drvinfo: cmd, then driver[32], and more we ignore
    // (196 bytes in all).
    let mut info = [0u32; 49];
    info[0] = ETHTOOL_GDRVINFO;
    // SAFETY: struct ethtool_drvinfo is 196 bytes, all of `info`.
    unsafe { ethtool(&probe, ifname, &mut info) }.ok()?;
    let bytes: Vec<u8> = info[1..9].iter().flat_map(|w| w.to_ne_bytes()).collect();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let name = String::from_utf8_lossy(&bytes[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

pub(super) fn mtu_of(fd: &OwnedFd, ifname: &str) -> Option<u32> {
    let req = crate::afpacket::ifreq_ioctl(fd, ifname, libc::SIOCGIFMTU).ok()?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote `ifru_mtu`.
    u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).ok()
}

/// A plain datagram socket, for interface `ioctl`s in this thread's
/// network namespace.
pub(super) fn open_probe(what: &str) -> Result<OwnedFd, XdpError> {
    probe_socket().map_err(|e| sys(what, "socket(AF_INET)", e))
}
