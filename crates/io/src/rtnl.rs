//! A small synchronous rtnetlink client: links, veth pairs, addresses,
//! routes, and the sysctls that go with them. No `ip` binary, no async
//! runtime.
//!
//! An rtnetlink socket talks to the network namespace of the thread that
//! created it, for as long as it lives. To configure a namespace, open the
//! [`Rtnl`] inside it, with [`crate::netns::Netns::rtnl`]; the same
//! `Rtnl` can then be used from any thread.
//!
//! Every request asks the kernel for an acknowledgement (`NLM_F_ACK`) and
//! waits for it, so a call returns only once the change is made, and a
//! refusal comes back as an [`RtnlError`] naming the operation and the
//! interface, with the kernel's extended-ack message when it gives one.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED,
    NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressHeaderFlags};
use netlink_packet_route::address::{AddressMessage, AddressScope};
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags};
use netlink_packet_route::link::{LinkInfo, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage};
use netlink_packet_route::route::{RouteProtocol, RouteScope, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::sys::socket::{setsockopt, sockopt::ReceiveTimeout};
use nix::sys::time::TimeVal;

/// How long to wait for the kernel's answer before calling it lost. The
/// kernel answers rtnetlink requests synchronously, so this only guards
/// against a bug turning into a hang.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Receive buffer: one datagram holds one answer, and a link description
/// with all its statistics is a few kilobytes.
const RECV_BUF: usize = 64 * 1024;

/// What can go wrong talking to rtnetlink or writing a sysctl.
#[derive(Debug, thiserror::Error)]
pub enum RtnlError {
    /// The netlink socket could not be created or bound.
    #[error("opening an rtnetlink socket: {0}")]
    Open(#[source] io::Error),
    /// Sending the request or receiving the answer failed.
    #[error("{op}: rtnetlink socket: {source}")]
    Io {
        /// The operation, e.g. "setting link dn0a up".
        op: String,
        /// The socket error (EAGAIN when the kernel did not answer in time).
        source: io::Error,
    },
    /// No interface of that name exists in the socket's namespace.
    #[error("{op}: no network interface named {name:?} in this namespace")]
    LinkNotFound {
        /// The operation.
        op: String,
        /// The interface name that was looked up.
        name: String,
    },
    /// The kernel refused the request.
    #[error("{op}: {source}{}", ext_ack(.message))]
    Kernel {
        /// The operation, e.g. "creating veth dn0a/dn0b".
        op: String,
        /// The errno the kernel answered.
        source: io::Error,
        /// The kernel's own explanation (netlink extended ack), if any.
        message: Option<String>,
    },
    /// The kernel's answer could not be understood.
    #[error("{op}: unexpected rtnetlink answer: {detail}")]
    Protocol {
        /// The operation.
        op: String,
        /// What was wrong with the answer.
        detail: String,
    },
    /// An argument that the kernel would refuse anyway.
    #[error("{op}: {detail}")]
    InvalidArgument {
        /// The operation.
        op: String,
        /// What is wrong and what is allowed.
        detail: String,
    },
    /// A sysctl file could not be written or read.
    #[error("sysctl {path}: {source}")]
    Sysctl {
        /// The file under /proc/sys.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn ext_ack(message: &Option<String>) -> String {
    match message {
        Some(m) => format!(" ({m})"),
        None => String::new(),
    }
}

impl RtnlError {
    /// The errno behind the error, when there is one (ENODEV for
    /// [`RtnlError::LinkNotFound`]).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            RtnlError::Open(e) => e.raw_os_error(),
            RtnlError::Io { source, .. }
            | RtnlError::Kernel { source, .. }
            | RtnlError::Sysctl { source, .. } => source.raw_os_error(),
            RtnlError::LinkNotFound { .. } => Some(libc::ENODEV),
            RtnlError::Protocol { .. } | RtnlError::InvalidArgument { .. } => None,
        }
    }
}

/// Results of this module.
pub type Result<T> = std::result::Result<T, RtnlError>;

/// How a route reaches its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via<'a> {
    /// Through a router on a directly connected network; the kernel finds
    /// the interface from its own routes.
    Gateway(IpAddr),
    /// Directly out of an interface (the destination is on its link).
    Device(&'a str),
}

/// A synchronous rtnetlink socket, bound to the network namespace of the
/// thread that opened it.
#[derive(Debug)]
pub struct Rtnl {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    /// Opens an rtnetlink socket in the calling thread's network namespace.
    pub fn open() -> Result<Rtnl> {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(RtnlError::Open)?;
        socket.bind_auto().map_err(RtnlError::Open)?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(RtnlError::Open)?;
        // Errors then come back with the request's header only (not the
        // whole request) and with the kernel's text explaining the refusal.
        socket.set_cap_ack(true).map_err(RtnlError::Open)?;
        socket.set_ext_ack(true).map_err(RtnlError::Open)?;
        let timeout = TimeVal::new(
            ANSWER_TIMEOUT.as_secs() as libc::time_t,
            libc::suseconds_t::from(ANSWER_TIMEOUT.subsec_micros() as i32),
        );
        setsockopt(&socket, ReceiveTimeout, &timeout)
            .map_err(|e| RtnlError::Open(io::Error::from_raw_os_error(e as i32)))?;
        Ok(Rtnl {
            socket,
            seq: 0,
            buf: Vec::with_capacity(RECV_BUF),
        })
    }

    /// The index of interface `name`; [`RtnlError::LinkNotFound`] if there
    /// is none.
    pub fn link_index(&mut self, name: &str) -> Result<u32> {
        self.index_for(name, &format!("looking up link {name}"))
    }

    /// Whether interface `name` exists in this namespace.
    pub fn link_exists(&mut self, name: &str) -> Result<bool> {
        match self.link_index(name) {
            Ok(_) => Ok(true),
            Err(RtnlError::LinkNotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Brings interface `name` up (`ip link set NAME up`).
    pub fn set_up(&mut self, name: &str) -> Result<()> {
        self.set_flag_up(name, true)
    }

    /// Takes interface `name` down (`ip link set NAME down`).
    pub fn set_down(&mut self, name: &str) -> Result<()> {
        self.set_flag_up(name, false)
    }

    fn set_flag_up(&mut self, name: &str, up: bool) -> Result<()> {
        let op = format!("setting link {name} {}", if up { "up" } else { "down" });
        let mut link = LinkMessage::default();
        link.header.index = self.index_for(name, &op)?;
        link.header.flags = if up {
            LinkFlags::Up
        } else {
            LinkFlags::empty()
        };
        link.header.change_mask = LinkFlags::Up;
        self.ack(RouteNetlinkMessage::SetLink(link), 0, &op)
    }

    /// Sets the MTU of interface `name`.
    pub fn set_mtu(&mut self, name: &str, mtu: u32) -> Result<()> {
        let op = format!("setting mtu {mtu} on link {name}");
        let mut link = LinkMessage::default();
        link.header.index = self.index_for(name, &op)?;
        link.attributes.push(LinkAttribute::Mtu(mtu));
        self.ack(RouteNetlinkMessage::SetLink(link), 0, &op)
    }

    /// Caps how many segments the stack may hand `name` as one GSO
    /// super-packet; 1 makes it segment before the interface, so every frame
    /// is one wire packet (what an emulator's per-packet queues expect).
    pub fn set_gso_max_segs(&mut self, name: &str, segs: u32) -> Result<()> {
        let op = format!("setting gso_max_segs {segs} on link {name}");
        let mut link = LinkMessage::default();
        link.header.index = self.index_for(name, &op)?;
        link.attributes.push(LinkAttribute::GsoMaxSegs(segs));
        self.ack(RouteNetlinkMessage::SetLink(link), 0, &op)
    }

    /// Creates the veth pair `name` / `peer_name`, both down. `name` is
    /// created in this socket's namespace; `peer_name` in the namespace
    /// behind `peer_netns` (an nsfs descriptor such as a
    /// [`crate::netns::Netns`]), or here too when `None`. Creating the peer
    /// directly in its namespace avoids any moment where its name could
    /// clash with an interface here.
    pub fn add_veth(
        &mut self,
        name: &str,
        peer_name: &str,
        peer_netns: Option<BorrowedFd<'_>>,
    ) -> Result<()> {
        let op = format!("creating veth {name}/{peer_name}");
        let mut peer = LinkMessage::default();
        peer.attributes
            .push(LinkAttribute::IfName(peer_name.to_owned()));
        if let Some(fd) = peer_netns {
            peer.attributes.push(LinkAttribute::NetNsFd(fd.as_raw_fd()));
        }
        let mut link = LinkMessage::default();
        link.attributes.push(LinkAttribute::IfName(name.to_owned()));
        link.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Veth),
            LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
        ]));
        self.ack(
            RouteNetlinkMessage::NewLink(link),
            NLM_F_CREATE | NLM_F_EXCL,
            &op,
        )
    }

    /// Moves interface `name` into the namespace behind `netns`. It arrives
    /// there down and without addresses: configure it from a socket opened
    /// in that namespace.
    pub fn move_to_netns(&mut self, name: &str, netns: BorrowedFd<'_>) -> Result<()> {
        let op = format!("moving link {name} to another namespace");
        let mut link = LinkMessage::default();
        link.header.index = self.index_for(name, &op)?;
        link.attributes
            .push(LinkAttribute::NetNsFd(netns.as_raw_fd()));
        self.ack(RouteNetlinkMessage::SetLink(link), 0, &op)
    }

    /// Deletes interface `name`; for a veth, the peer goes too, wherever it
    /// is.
    pub fn delete_link(&mut self, name: &str) -> Result<()> {
        let op = format!("deleting link {name}");
        let mut link = LinkMessage::default();
        link.header.index = self.index_for(name, &op)?;
        self.ack(RouteNetlinkMessage::DelLink(link), 0, &op)
    }

    /// Adds `addr/prefix_len` to interface `name`, with the connected route
    /// the kernel derives from it. IPv6 addresses are added with
    /// `IFA_F_NODAD`: without it they stay "tentative" (unusable for
    /// binding or as a source) for the second or so duplicate address
    /// detection takes, and our namespaces have no one to clash with.
    pub fn add_address(&mut self, name: &str, addr: IpAddr, prefix_len: u8) -> Result<()> {
        let op = format!("adding address {addr}/{prefix_len} to {name}");
        check_prefix(addr, prefix_len, &op)?;
        let mut msg = AddressMessage::default();
        msg.header.index = self.index_for(name, &op)?;
        msg.header.prefix_len = prefix_len;
        msg.header.scope = AddressScope::Universe;
        match addr {
            IpAddr::V4(_) => {
                msg.header.family = AddressFamily::Inet;
                // For IPv4 the kernel keys the address on IFA_LOCAL;
                // IFA_ADDRESS is the peer on point-to-point links and equal
                // to the local address otherwise, as `ip` sends it.
                msg.attributes.push(AddressAttribute::Local(addr));
                msg.attributes.push(AddressAttribute::Address(addr));
            }
            IpAddr::V6(_) => {
                msg.header.family = AddressFamily::Inet6;
                msg.header.flags = AddressHeaderFlags::Nodad;
                msg.attributes.push(AddressAttribute::Address(addr));
                msg.attributes
                    .push(AddressAttribute::Flags(AddressFlags::Nodad));
            }
        }
        self.ack(
            RouteNetlinkMessage::NewAddress(msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &op,
        )
    }

    /// Adds a route to `dst/prefix_len` in the main table, via a gateway or
    /// straight out of a device. A prefix length of 0 makes a default
    /// route (`dst` is then `0.0.0.0` or `::`). The destination must have
    /// no bits set past the prefix (the kernel refuses `10.0.0.1/24`).
    pub fn add_route(&mut self, dst: IpAddr, prefix_len: u8, via: Via<'_>) -> Result<()> {
        let op = match via {
            Via::Gateway(gw) => format!("adding route {dst}/{prefix_len} via {gw}"),
            Via::Device(dev) => format!("adding route {dst}/{prefix_len} dev {dev}"),
        };
        check_prefix(dst, prefix_len, &op)?;
        let mut msg = RouteMessage::default();
        msg.header.address_family = family(dst);
        msg.header.destination_prefix_length = prefix_len;
        msg.header.table = RouteHeader::RT_TABLE_MAIN;
        msg.header.protocol = RouteProtocol::Static;
        msg.header.kind = RouteType::Unicast;
        if prefix_len > 0 {
            msg.attributes
                .push(RouteAttribute::Destination(RouteAddress::from(dst)));
        }
        match via {
            Via::Gateway(gw) => {
                if family(gw) != family(dst) {
                    return Err(RtnlError::InvalidArgument {
                        op,
                        detail: "the gateway must be of the destination's address family".into(),
                    });
                }
                msg.header.scope = RouteScope::Universe;
                msg.attributes
                    .push(RouteAttribute::Gateway(RouteAddress::from(gw)));
            }
            Via::Device(dev) => {
                // The destination is on the link: no router in between.
                msg.header.scope = RouteScope::Link;
                let index = self.index_for(dev, &op)?;
                msg.attributes.push(RouteAttribute::Oif(index));
            }
        }
        self.ack(
            RouteNetlinkMessage::NewRoute(msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &op,
        )
    }

    /// Looks `name` up with RTM_GETLINK (the kernel accepts a name instead
    /// of an index), naming `op` in errors.
    fn index_for(&mut self, name: &str, op: &str) -> Result<u32> {
        let mut link = LinkMessage::default();
        link.attributes.push(LinkAttribute::IfName(name.to_owned()));
        let answers = match self.request(RouteNetlinkMessage::GetLink(link), 0, op) {
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                return Err(RtnlError::LinkNotFound {
                    op: op.to_owned(),
                    name: name.to_owned(),
                })
            }
            other => other?,
        };
        answers
            .into_iter()
            .find_map(|answer| match answer {
                RouteNetlinkMessage::NewLink(link) => Some(link.header.index),
                _ => None,
            })
            .ok_or_else(|| RtnlError::Protocol {
                op: op.to_owned(),
                detail: "RTM_GETLINK acknowledged without describing the link".into(),
            })
    }

    /// Sends a request that only needs the acknowledgement.
    fn ack(&mut self, message: RouteNetlinkMessage, flags: u16, op: &str) -> Result<()> {
        self.request(message, flags, op).map(drop)
    }

    /// Sends `message` with `NLM_F_REQUEST | NLM_F_ACK | flags` and collects
    /// the answers that precede the acknowledgement.
    fn request(
        &mut self,
        message: RouteNetlinkMessage,
        flags: u16,
        op: &str,
    ) -> Result<Vec<RouteNetlinkMessage>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(message));
        packet.finalize();
        let mut out = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut out);
        let io_err = |source| RtnlError::Io {
            op: op.to_owned(),
            source,
        };
        self.socket.send(&out, 0).map_err(io_err)?;

        let mut answers = Vec::new();
        loop {
            self.buf.clear();
            let len = self
                .socket
                .recv(&mut self.buf, libc::MSG_TRUNC)
                .map_err(io_err)?;
            if len > self.buf.len() {
                return Err(RtnlError::Protocol {
                    op: op.to_owned(),
                    detail: format!("a {len}-byte answer did not fit in {RECV_BUF} bytes"),
                });
            }
            let mut rest = &self.buf[..len];
            while !rest.is_empty() {
                let msg =
                    NetlinkMessage::<RouteNetlinkMessage>::deserialize(rest).map_err(|e| {
                        RtnlError::Protocol {
                            op: op.to_owned(),
                            detail: e.to_string(),
                        }
                    })?;
                let msg_len = msg.header.length as usize;
                // Netlink messages in one datagram are 4-byte aligned.
                let step = msg_len.checked_add(3).map(|n| n & !3).unwrap_or(usize::MAX);
                rest = rest.get(step..).unwrap_or(&[]);
                if msg_len == 0 {
                    break;
                }
                // A late answer to an earlier request that gave up: skip it.
                if msg.header.sequence_number != seq {
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::Error(err) => {
                        return match err.code {
                            None => Ok(answers),
                            Some(code) => Err(RtnlError::Kernel {
                                op: op.to_owned(),
                                source: io::Error::from_raw_os_error(code.get().saturating_abs()),
                                message: ext_ack_message(msg.header.flags, &err.header),
                            }),
                        };
                    }
                    NetlinkPayload::InnerMessage(inner) => answers.push(inner),
                    NetlinkPayload::Done(_) => return Ok(answers),
                    NetlinkPayload::Overrun(_) => {
                        return Err(RtnlError::Protocol {
                            op: op.to_owned(),
                            detail: "the kernel reported an overrun".into(),
                        })
                    }
                    _ => {}
                }
            }
        }
    }
}

fn family(addr: IpAddr) -> AddressFamily {
    match addr {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

fn check_prefix(addr: IpAddr, prefix_len: u8, op: &str) -> Result<()> {
    let max = match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    };
    if prefix_len > max {
        return Err(RtnlError::InvalidArgument {
            op: op.to_owned(),
            detail: format!("prefix length {prefix_len} is out of range (0 to {max})"),
        });
    }
    Ok(())
}

// From <linux/netlink.h>: the extended-ack attribute carrying a message.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// Extracts the kernel's explanation from an error message's payload (the
/// bytes after the error code). With `NLM_F_ACK_TLVS` set, attributes
/// follow the echoed request: its 16-byte header only when `NLM_F_CAPPED`
/// is set, else the whole request, whose length is its header's first
/// field.
fn ext_ack_message(flags: u16, payload: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        16
    } else {
        let len = payload.get(0..4)?;
        u32::from_ne_bytes(len.try_into().ok()?) as usize
    };
    let mut attrs = payload.get(echoed..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == NLMSGERR_ATTR_MSG {
            let text = &attrs[4..len];
            let text = text.split(|&b| b == 0).next().unwrap_or(&[]);
            return Some(String::from_utf8_lossy(text).into_owned());
        }
        attrs = attrs.get((len + 3) & !3..).unwrap_or(&[]);
    }
    None
}

/// The file under `/proc/sys` for `path`, which must be relative and plain
/// (`net/ipv4/ip_forward`, not `/proc/...` nor anything with `..`).
fn sysctl_file(path: &str) -> Result<PathBuf> {
    let rel = Path::new(path);
    let plain = !path.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(RtnlError::Sysctl {
            path: PathBuf::from(path),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                "a sysctl path is relative to /proc/sys, like net/ipv4/ip_forward",
            ),
        });
    }
    Ok(Path::new("/proc/sys").join(rel))
}

/// Writes `value` to the sysctl `path` (relative to `/proc/sys`, e.g.
/// `net/ipv4/ip_forward` or `net/ipv6/conf/all/disable_ipv6`).
///
/// The `net/` sysctls are per network namespace, and the kernel picks the
/// namespace from the task that opens the file, *thread* included: we
/// checked that a thread that has done `setns` (or `unshare`) sees and
/// changes its own namespace's values under the plain `/proc/sys/net`,
/// while the other threads of the process keep seeing theirs. (This is
/// unlike `/proc/net`, which follows the process's main thread.) So call
/// this from a thread inside the namespace, e.g. in
/// [`crate::netns::Netns::run`].
pub fn set_sysctl(path: &str, value: &str) -> Result<()> {
    let file = sysctl_file(path)?;
    let sysctl_err = |source| RtnlError::Sysctl {
        path: file.clone(),
        source,
    };
    let mut f = OpenOptions::new()
        .write(true)
        .open(&file)
        .map_err(sysctl_err)?;
    f.write_all(value.as_bytes()).map_err(sysctl_err)
}

/// Reads the sysctl `path` (relative to `/proc/sys`), without the final
/// newline; the namespace is chosen as for [`set_sysctl`].
pub fn sysctl(path: &str) -> Result<String> {
    let file = sysctl_file(path)?;
    let mut text = String::new();
    OpenOptions::new()
        .read(true)
        .open(&file)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|source| RtnlError::Sysctl {
            path: file.clone(),
            source,
        })?;
    Ok(text.trim_end_matches('\n').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::Netns;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    /// Runs `f` in a fresh anonymous namespace with an rtnetlink socket
    /// there.
    fn in_new_netns<T: Send>(f: impl FnOnce(&mut Rtnl) -> T + Send) -> T {
        let ns = Netns::new_anonymous().unwrap();
        // `f` itself runs inside too: it opens sockets and reads
        // /proc/thread-self/net there.
        ns.run(|| f(&mut Rtnl::open().unwrap())).unwrap()
    }

    #[test]
    fn extended_ack_message_is_found_after_the_capped_header() {
        // 16-byte echoed header, then one NLMSGERR_ATTR_MSG attribute.
        let mut payload = vec![0u8; 16];
        let text = b"Invalid prefix\0";
        let len = (4 + text.len()) as u16;
        payload.extend_from_slice(&len.to_ne_bytes());
        payload.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        payload.extend_from_slice(text);
        let flags = NLM_F_ACK_TLVS | NLM_F_CAPPED;
        assert_eq!(
            ext_ack_message(flags, &payload).as_deref(),
            Some("Invalid prefix")
        );
        assert_eq!(ext_ack_message(NLM_F_CAPPED, &payload), None);
        // Truncated or garbage attributes give nothing rather than a panic.
        for cut in 0..payload.len() {
            let _ = ext_ack_message(flags, &payload[..cut]);
            let _ = ext_ack_message(NLM_F_ACK_TLVS, &payload[..cut]);
        }
    }

    #[test]
    fn sysctl_paths_must_be_plain_and_relative() {
        for bad in [
            "",
            "/proc/sys/net/ipv4/ip_forward",
            "net/../kernel/x",
            "./net",
        ] {
            let err = set_sysctl(bad, "1").unwrap_err();
            assert!(
                err.to_string().contains("relative to /proc/sys"),
                "{bad:?}: {err}"
            );
        }
        assert_eq!(
            sysctl_file("net/ipv4/ip_forward").unwrap(),
            Path::new("/proc/sys/net/ipv4/ip_forward")
        );
    }

    #[test]
    fn sysctl_follows_the_thread_namespace() {
        if !is_root() {
            println!("skipped: creating namespaces needs root");
            return;
        }
        let outside = sysctl("net/ipv4/conf/all/forwarding").unwrap();
        let ns = Netns::new_anonymous().unwrap();
        let (before, after) = ns
            .run(|| {
                let before = sysctl("net/ipv4/conf/all/forwarding").unwrap();
                let flipped = if before == "0" { "1" } else { "0" };
                set_sysctl("net/ipv4/conf/all/forwarding", flipped).unwrap();
                (before, sysctl("net/ipv4/conf/all/forwarding").unwrap())
            })
            .unwrap();
        assert_ne!(before, after, "the write did not take in the namespace");
        assert_eq!(sysctl("net/ipv4/conf/all/forwarding").unwrap(), outside);
        // A value of the namespace, read again from a new thread in it.
        let again = ns.run(|| sysctl("net/ipv4/conf/all/forwarding")).unwrap();
        assert_eq!(again.unwrap(), after);
    }

    /// The MTU the kernel reports for `name`, read with RTM_GETLINK.
    fn link_mtu(rtnl: &mut Rtnl, name: &str) -> Option<u32> {
        let mut link = LinkMessage::default();
        link.attributes.push(LinkAttribute::IfName(name.to_owned()));
        let answers = rtnl
            .request(RouteNetlinkMessage::GetLink(link), 0, "test")
            .unwrap();
        answers.into_iter().find_map(|answer| match answer {
            RouteNetlinkMessage::NewLink(link) => {
                link.attributes.into_iter().find_map(|a| match a {
                    LinkAttribute::Mtu(mtu) => Some(mtu),
                    _ => None,
                })
            }
            _ => None,
        })
    }

    #[test]
    fn links_addresses_and_routes() {
        if !is_root() {
            println!("skipped: creating namespaces needs root");
            return;
        }
        in_new_netns(|rtnl| {
            assert!(rtnl.link_exists("lo").unwrap());
            assert_eq!(rtnl.link_index("lo").unwrap(), 1);
            rtnl.add_veth("rt0a", "rt0b", None).unwrap();
            assert!(rtnl.link_exists("rt0a").unwrap());
            assert!(rtnl.link_exists("rt0b").unwrap());
            rtnl.set_mtu("rt0a", 1400).unwrap();
            assert_eq!(link_mtu(rtnl, "rt0a"), Some(1400));
            assert_eq!(link_mtu(rtnl, "rt0b"), Some(1500));
            rtnl.set_up("rt0a").unwrap();
            rtnl.set_up("rt0b").unwrap();
            let v4 = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1));
            rtnl.add_address("rt0a", v4, 30).unwrap();
            let v6: IpAddr = "fd00:77::1".parse::<Ipv6Addr>().unwrap().into();
            rtnl.add_address("rt0a", v6, 64).unwrap();
            // NODAD: usable as a source right away, no tentative period.
            let bound = std::net::UdpSocket::bind((v6, 0));
            assert!(bound.is_ok(), "{bound:?}");
            let err = rtnl.add_address("rt0a", v4, 30).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");

            rtnl.add_route("10.78.0.0".parse().unwrap(), 16, Via::Device("rt0a"))
                .unwrap();
            rtnl.add_route(
                Ipv4Addr::UNSPECIFIED.into(),
                0,
                Via::Gateway("10.77.0.2".parse().unwrap()),
            )
            .unwrap();
            rtnl.add_route(
                Ipv6Addr::UNSPECIFIED.into(),
                0,
                Via::Gateway("fd00:77::2".parse().unwrap()),
            )
            .unwrap();
            let routes = std::fs::read_to_string("/proc/thread-self/net/route").unwrap();
            // Destination and gateway columns, little-endian hex.
            assert!(routes.contains("rt0a\t00004E0A\t00000000"), "{routes}");
            assert!(routes.contains("rt0a\t00000000\t02004D0A"), "{routes}");

            // Host bits past the prefix: the kernel refuses and says why.
            let err = rtnl
                .add_route("10.79.0.1".parse().unwrap(), 16, Via::Device("rt0a"))
                .unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
            // ... with the kernel's own words (extended ack).
            assert!(
                matches!(&err, RtnlError::Kernel { message: Some(m), .. } if !m.is_empty()),
                "{err:?}"
            );
            assert!(
                err.to_string()
                    .contains("adding route 10.79.0.1/16 dev rt0a"),
                "{err}"
            );

            let err = rtnl.add_route(v4, 33, Via::Device("rt0a")).unwrap_err();
            assert!(matches!(err, RtnlError::InvalidArgument { .. }), "{err}");
            let err = rtnl.add_route(v4, 32, Via::Gateway(v6)).unwrap_err();
            assert!(matches!(err, RtnlError::InvalidArgument { .. }), "{err}");

            rtnl.set_down("rt0a").unwrap();
            // Deleting one end of a veth takes the peer along.
            rtnl.delete_link("rt0b").unwrap();
            assert!(!rtnl.link_exists("rt0a").unwrap());
            assert!(!rtnl.link_exists("rt0b").unwrap());
            let err = rtnl.delete_link("rt0b").unwrap_err();
            assert!(matches!(err, RtnlError::LinkNotFound { .. }), "{err}");
        });
    }

    #[test]
    fn moving_a_link_to_another_namespace() {
        if !is_root() {
            println!("skipped: creating namespaces needs root");
            return;
        }
        let other = Netns::new_anonymous().unwrap();
        in_new_netns(|rtnl| {
            rtnl.add_veth("mv0a", "mv0b", None).unwrap();
            rtnl.move_to_netns("mv0b", std::os::fd::AsFd::as_fd(&other))
                .unwrap();
            assert!(!rtnl.link_exists("mv0b").unwrap());
        });
        let there = other
            .run(|| Rtnl::open().and_then(|mut r| r.link_exists("mv0b")))
            .unwrap();
        assert!(there.unwrap());
    }
}
