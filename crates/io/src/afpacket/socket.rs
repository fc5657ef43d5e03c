//! The socket: opening and binding it, its options, fanout, and what the
//! kernel says of its interface.

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType};

use super::mmsg::{empty_sockaddr_ll, CmsgSpace, RxMeta, RxSlots};
use super::options::{check_name, check_options};
use super::ring::{page_size, RingGeometry, RxRing};
use super::sockopt::set_packet_opt;
use super::{Port, PortError, PortOptions, PortStats, VnetHdr};

/// What the kernel says of a port's interface now ([`Port::link_state`]).
///
/// A packet socket follows its interface through `ip link set down` and
/// `up` by itself (the kernel stops and restarts its delivery), but not
/// through a deletion: it stays bound to the old index, and a new interface
/// of the same name needs a new port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// The port's interface is administratively up (`IFF_UP`).
    Up,
    /// The port's interface exists but is down: nothing arrives, and sends
    /// fail with `ENETDOWN`.
    Down,
    /// No interface of that name in the socket's network namespace.
    Gone,
    /// An interface of that name exists, but with another index: the port's
    /// was deleted and another made in its place. Open a new port on it.
    Replaced {
        /// The new interface's index.
        ifindex: u32,
    },
}

impl Port {
    /// Opens a port on `ifname`, in the network namespace of the calling
    /// thread.
    pub fn open(ifname: &str, opts: PortOptions) -> Result<Port, PortError> {
        check_options(&opts)?;
        check_name(ifname)?;
        let ifindex =
            nix::net::if_::if_nametoindex(ifname).map_err(|errno| PortError::NoSuchInterface {
                ifname: ifname.to_owned(),
                errno,
            })?;
        let name: Arc<str> = Arc::from(ifname);
        let sys = |op: &'static str| {
            let name = name.clone();
            move |errno: Errno| PortError::Sys {
                ifname: name,
                op,
                errno,
            }
        };

        // Protocol 0: nothing is queued until bind() names ETH_P_ALL.
        let fd = socket::socket(
            AddressFamily::Packet,
            SockType::Raw,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(sys("socket(AF_PACKET, SOCK_RAW)"))?;

        let ignore_outgoing = match set_packet_opt(&fd, libc::PACKET_IGNORE_OUTGOING, &1i32) {
            Ok(()) => true,
            // Before Linux 4.20: filter on sll_pkttype instead.
            Err(Errno::ENOPROTOOPT) => false,
            Err(e) => return Err(sys("setsockopt(PACKET_IGNORE_OUTGOING)")(e)),
        };
        // Always on, even for plain frames: the header is where the kernel
        // says which checksum is unfinished (see the module documentation).
        set_packet_opt(&fd, libc::PACKET_VNET_HDR, &1i32)
            .map_err(sys("setsockopt(PACKET_VNET_HDR)"))?;
        set_packet_opt(&fd, libc::PACKET_AUXDATA, &1i32)
            .map_err(sys("setsockopt(PACKET_AUXDATA)"))?;
        if opts.socket_buffer > 0 {
            set_buffer(&fd, opts.socket_buffer, true).map_err(sys("setsockopt(SO_RCVBUF)"))?;
            set_buffer(&fd, opts.socket_buffer, false).map_err(sys("setsockopt(SO_SNDBUF)"))?;
        }
        // The ring comes after PACKET_VNET_HDR (the kernel refuses to change
        // the header once a ring exists) and before bind(), so no frame is
        // ever queued anywhere but in it.
        let ring = match RingGeometry::new(&opts, page_size()) {
            Some(geometry) => {
                let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
                set_packet_opt(&fd, libc::PACKET_VERSION, &version)
                    .map_err(sys("setsockopt(PACKET_VERSION, TPACKET_V2)"))?;
                // Any non-zero value: frames longer than a slot are also
                // queued whole on the socket (see the module documentation).
                set_packet_opt(&fd, libc::PACKET_COPY_THRESH, &1i32)
                    .map_err(sys("setsockopt(PACKET_COPY_THRESH)"))?;
                Some(RxRing::map(&fd, geometry).map_err(|(op, errno)| sys(op)(errno))?)
            }
            None => None,
        };
        let ifindex_c = i32::try_from(ifindex).map_err(|_| sys("if_nametoindex")(Errno::ERANGE))?;
        if opts.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex_c,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            // The membership ends when the socket is closed, so a crashed
            // bridge does not leave the interface promiscuous.
            set_packet_opt(&fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(sys("setsockopt(PACKET_ADD_MEMBERSHIP, PROMISC)"))?;
        }

        let sll = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
            sll_ifindex: ifindex_c,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: `sll` is a fully initialised sockaddr_ll on the stack and the
        // length given is its exact size; from_raw copies it out and checks the
        // family and the length.
        let addr = unsafe {
            <socket::LinkAddr as socket::SockaddrLike>::from_raw(
                (&sll as *const libc::sockaddr_ll).cast(),
                Some(size_of::<libc::sockaddr_ll>() as libc::socklen_t),
            )
        }
        .ok_or_else(|| sys("bind")(Errno::EINVAL))?;
        socket::bind(fd.as_raw_fd(), &addr).map_err(sys("bind"))?;

        // With a ring, the slots only take the frames too long for it, one
        // at a time.
        let slots = if ring.is_some() { 1 } else { opts.batch };
        let rx = RxSlots {
            frames: (0..slots).map(|_| vec![0u8; opts.frame_capacity]).collect(),
            vnet: vec![[0u8; VnetHdr::LEN]; slots],
            addrs: vec![empty_sockaddr_ll(); slots],
            ctrl: vec![CmsgSpace([0; 64]); slots],
            meta: vec![RxMeta::default(); slots],
        };
        Ok(Port {
            ring,
            fd,
            ifname: name,
            ifindex,
            opts,
            ignore_outgoing,
            rx,
            pool: Vec::new(),
            stats: PortStats::default(),
        })
    }

    /// Counters, with the kernel's `PACKET_STATISTICS` folded in. Reading the
    /// kernel's counters resets them, so the port keeps the running totals.
    pub fn stats(&mut self) -> Result<PortStats, PortError> {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` and `len` are live locals; the kernel writes at most
        // `len` bytes into `st` and the new length into `len`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        Errno::result(r).map_err(|e| self.error("getsockopt(PACKET_STATISTICS)", e))?;
        self.stats.kernel_packets += u64::from(st.tp_packets);
        self.stats.kernel_drops += u64::from(st.tp_drops);
        Ok(self.stats)
    }

    /// Receive and send buffer sizes the kernel granted (it doubles what is
    /// asked to leave room for its bookkeeping).
    pub fn socket_buffers(&self) -> Result<(usize, usize), PortError> {
        let rcv = socket::getsockopt(&self.fd, sockopt::RcvBuf)
            .map_err(|e| self.error("getsockopt(SO_RCVBUF)", e))?;
        let snd = socket::getsockopt(&self.fd, sockopt::SndBuf)
            .map_err(|e| self.error("getsockopt(SO_SNDBUF)", e))?;
        Ok((rcv, snd))
    }

    /// Joins a `PACKET_FANOUT` group of type hash: the interface's frames
    /// are then spread over the group's sockets by the kernel's flow hash
    /// (symmetric: both directions of a flow get one socket index), each
    /// frame to one socket, so several threads share one interface the way
    /// RSS spreads a NIC's queues. `group` `None` makes a new group with an
    /// id the kernel picks (`PACKET_FANOUT_FLAG_UNIQUEID`); the group's id
    /// is returned, for the other sockets to join with. All must be bound
    /// to the same interface. Frames that arrived before a socket joined
    /// were copied to it as to any socket.
    pub fn join_fanout(&self, group: Option<u16>) -> Result<u16, PortError> {
        let (id, flags) = match group {
            Some(id) => (u32::from(id), 0),
            None => (0, libc::PACKET_FANOUT_FLAG_UNIQUEID),
        };
        let arg: u32 = id | ((libc::PACKET_FANOUT_HASH | flags) << 16);
        set_packet_opt(&self.fd, libc::PACKET_FANOUT, &arg)
            .map_err(|e| self.error("setsockopt(PACKET_FANOUT)", e))?;
        let mut val: u32 = 0;
        let mut len = size_of::<u32>() as libc::socklen_t;
        // SAFETY: `val` is a live u32 and `len` its size; the kernel writes
        // at most `len` bytes there and updates `len`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                (&mut val as *mut u32).cast(),
                &mut len,
            )
        };
        Errno::result(r).map_err(|e| self.error("getsockopt(PACKET_FANOUT)", e))?;
        Ok((val & 0xffff) as u16)
    }

    /// Takes the error the kernel left on the socket (`SO_ERROR`, which
    /// reading clears), if any. The kernel sets `ENETDOWN` there when the
    /// interface goes down, or when the port is bound to a down one, and
    /// until it is taken `poll(2)` reports `POLLERR` at once, every time:
    /// a caller waiting on [`Port::as_fd`](super::Port#method.as_fd) must take it when it sees
    /// `POLLERR`. (Left there, it would also fail the next send after the
    /// interface comes back, which is how the kernel clears it otherwise.)
    pub fn take_error(&self) -> Result<Option<Errno>, PortError> {
        let code = socket::getsockopt(&self.fd, sockopt::SocketError)
            .map_err(|e| self.error("getsockopt(SO_ERROR)", e))?;
        Ok((code != 0).then(|| Errno::from_raw(code)))
    }

    /// Whether the port's interface is up, down, deleted, or deleted and
    /// made again under the same name ([`LinkState`]). Asked of the
    /// socket's own network namespace, by name: two `ioctl(2)`s, cheap
    /// enough to ask a few times a second while an interface is down.
    pub fn link_state(&self) -> Result<LinkState, PortError> {
        let ifindex = match ifreq_ioctl(&self.fd, &self.ifname, libc::SIOCGIFINDEX) {
            // SAFETY: SIOCGIFINDEX succeeded, so the kernel wrote the
            // union's `ifru_ifindex` member.
            Ok(req) => unsafe { req.ifr_ifru.ifru_ifindex },
            Err(Errno::ENODEV) => return Ok(LinkState::Gone),
            Err(e) => return Err(self.error("ioctl(SIOCGIFINDEX)", e)),
        };
        let ifindex = u32::try_from(ifindex).unwrap_or(0);
        if ifindex != self.ifindex {
            return Ok(LinkState::Replaced { ifindex });
        }
        let flags = match ifreq_ioctl(&self.fd, &self.ifname, libc::SIOCGIFFLAGS) {
            // SAFETY: SIOCGIFFLAGS succeeded, so the kernel wrote the
            // union's `ifru_flags` member.
            Ok(req) => unsafe { req.ifr_ifru.ifru_flags },
            // Deleted between the two calls.
            Err(Errno::ENODEV) => return Ok(LinkState::Gone),
            Err(e) => return Err(self.error("ioctl(SIOCGIFFLAGS)", e)),
        };
        Ok(if i32::from(flags) & libc::IFF_UP != 0 {
            LinkState::Up
        } else {
            LinkState::Down
        })
    }

    /// The interface's MTU now (`SIOCGIFMTU`): the bytes a frame may carry
    /// past its link header. The kernel holds a plain frame to it
    /// (`EMSGSIZE`) but not a super-packet's segments, which a caller that
    /// must not put larger frames on the link than it takes checks itself.
    pub fn mtu(&self) -> Result<u32, PortError> {
        match ifreq_ioctl(&self.fd, &self.ifname, libc::SIOCGIFMTU) {
            // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the union's
            // `ifru_mtu` member.
            Ok(req) => Ok(u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).unwrap_or(0)),
            Err(e) => Err(self.error("ioctl(SIOCGIFMTU)", e)),
        }
    }
}

/// An interface `ioctl(2)` that reads a `struct ifreq` (`SIOCGIFINDEX`,
/// `SIOCGIFFLAGS`, `SIOCGIFMTU`) for the interface `name`, answered by the network
/// namespace of the socket `fd`.
pub(crate) fn ifreq_ioctl(
    fd: &OwnedFd,
    name: &str,
    request: libc::c_ulong,
) -> Result<libc::ifreq, Errno> {
    // SAFETY: ifreq is plain old data (a name and a union of integers,
    // sockaddrs and a pointer); all zeroes is a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name was checked when the port was opened: shorter than
    // IFNAMSIZ, so the zeroed array keeps its terminating NUL.
    if name.len() >= req.ifr_name.len() {
        return Err(Errno::ENAMETOOLONG);
    }
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a live, initialised ifreq that the kernel reads the
    // name from and writes one union member into; it keeps no pointer to it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut req as *mut libc::ifreq) };
    Errno::result(r).map(|_| req)
}

/// Socket buffer of `bytes`: the FORCE option (needs CAP_NET_ADMIN, ignores
/// `net.core.{r,w}mem_max`), else the plain one, which the kernel caps.
fn set_buffer(fd: &OwnedFd, bytes: usize, receive: bool) -> Result<(), Errno> {
    let forced = if receive {
        socket::setsockopt(fd, sockopt::RcvBufForce, &bytes)
    } else {
        socket::setsockopt(fd, sockopt::SndBufForce, &bytes)
    };
    match forced {
        Ok(()) => Ok(()),
        Err(Errno::EPERM) if receive => socket::setsockopt(fd, sockopt::RcvBuf, &bytes),
        Err(Errno::EPERM) => socket::setsockopt(fd, sockopt::SndBuf, &bytes),
        Err(e) => Err(e),
    }
}
