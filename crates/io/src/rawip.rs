//! Sending whole IP packets (header included) back into the host's own
//! output path: raw `IPPROTO_RAW` sockets, one per family, whose packets
//! carry a netfilter mark so that the interception rules let them pass.
//!
//! Host mode uses this for the packets of the host's own sockets: it takes
//! a copy from the queue, lets the kernel free the original at once, and
//! sends the copy from here when it leaves its pipe (see
//! `dummynet::live::host` for why).
//!
//! The kernel routes each packet by its destination and sends it with the
//! header as given: IPv4's checksum and length are filled in again, nothing
//! else is changed. Sends never block: a full socket buffer is an error
//! for the caller to count.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{
    self, sockopt, AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn,
    SockaddrIn6,
};

/// Send buffer of each socket (forced past `net.core.wmem_max`): packets
/// leave in bursts when a pipe releases many at once.
const SNDBUF: usize = 4 << 20;

/// Raw sockets that send IPv4 and IPv6 packets with their own headers.
#[derive(Debug)]
pub struct RawSender {
    v4: OwnedFd,
    v6: Option<OwnedFd>,
    mark: u32,
}

impl RawSender {
    /// Opens the sockets in the calling thread's network namespace (needs
    /// CAP_NET_RAW, and CAP_NET_ADMIN for the mark). IPv6 is optional: a
    /// host without it still gets an IPv4 sender.
    pub fn open(mark: u32) -> io::Result<RawSender> {
        let v4 = raw_socket(AddressFamily::Inet, mark)?;
        // A packet to a subnet's broadcast address looks unicast to the
        // sender; without this the kernel refuses to send it (EACCES).
        socket::setsockopt(&v4, sockopt::Broadcast, &true)?;
        let v6 = raw_socket(AddressFamily::Inet6, mark).ok();
        Ok(RawSender { v4, v6, mark })
    }

    /// The mark every packet sent from here carries.
    pub fn mark(&self) -> u32 {
        self.mark
    }

    /// Sends one IP packet, header included, to the destination its header
    /// names.
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        let sent = match packet.first().map(|b| b >> 4) {
            Some(4) if packet.len() >= 20 => {
                let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
                let to = SockaddrIn::from(std::net::SocketAddrV4::new(dst, 0));
                socket::sendto(self.v4.as_raw_fd(), packet, &to, MsgFlags::MSG_DONTWAIT)
            }
            Some(6) if packet.len() >= 40 => {
                let Some(v6) = &self.v6 else {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "no IPv6 raw socket on this host",
                    ));
                };
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&packet[24..40]);
                let dst = Ipv6Addr::from(octets);
                let to = SockaddrIn6::from(std::net::SocketAddrV6::new(dst, 0, 0, 0));
                socket::sendto(v6.as_raw_fd(), packet, &to, MsgFlags::MSG_DONTWAIT)
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not an IPv4 or IPv6 packet",
                ))
            }
        };
        match sent {
            Ok(n) if n == packet.len() => Ok(()),
            Ok(n) => Err(io::Error::other(format!(
                "raw send took {n} of {} bytes",
                packet.len()
            ))),
            Err(e) => Err(io::Error::from(e)),
        }
    }
}

/// An `IPPROTO_RAW` socket (header included, send only) with `mark`.
fn raw_socket(family: AddressFamily, mark: u32) -> io::Result<OwnedFd> {
    let fd = socket::socket(
        family,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        SockProtocol::Raw,
    )?;
    socket::setsockopt(&fd, sockopt::Mark, &mark)?;
    if socket::setsockopt(&fd, sockopt::SndBufForce, &SNDBUF).is_err() {
        socket::setsockopt(&fd, sockopt::SndBuf, &SNDBUF)?;
    }
    Ok(fd)
}
