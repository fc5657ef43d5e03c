//! AF_PACKET ports: the two ends of `dummynet run --bridge IF_A IF_B`.
//!
//! A [`Port`] is one `AF_PACKET`/`SOCK_RAW` socket bound to one interface. It
//! sees every frame that arrives on the interface (promiscuous, so frames for
//! the MAC addresses on the *other* side of the bridge are not filtered out by
//! the NIC) and can put whole Ethernet frames on it. Frames are read from a
//! memory-mapped ring without system calls (or, optionally, with
//! `recvmmsg(2)`), and written with `sendmmsg(2)`, up to
//! [`PortOptions::batch`] frames a call, so the cost of a system call is
//! shared.
//!
//! # What the kernel does for us, and what it does not
//!
//! - **Namespace.** A packet socket belongs to the network namespace of the
//!   thread that created it, for its whole life. Open the ports from a thread
//!   that has `setns(2)`'d where the interfaces are.
//! - **No early frames.** The socket is created with protocol 0, which
//!   receives nothing; options are set, and only `bind(2)` with `ETH_P_ALL` and
//!   the interface index starts the flow. A socket created with `ETH_P_ALL`
//!   would queue frames from *every* interface between `socket(2)` and
//!   `bind(2)`, and the bridge would forward a few frames it never should.
//! - **Outgoing frames.** A packet socket also sees frames *leaving* its
//!   interface: whatever the host's own stack sends there (IPv6 router
//!   solicitations, for one), and frames other sockets send, such as a second
//!   bridge on the same interface. None of them came from the wire, so none
//!   is for the other side. (The kernel never shows a socket its own sends.)
//!   `PACKET_IGNORE_OUTGOING` (Linux 4.20) stops them in the kernel; on older
//!   kernels the option is refused and frames whose `sll_pkttype` is
//!   `PACKET_OUTGOING` are skipped here instead (counted in
//!   [`PortStats::rx_outgoing_skipped`]).
//! - **VLAN tags.** The receive path takes an 802.1Q tag out of the frame and
//!   into the socket buffer's metadata *before* packet sockets see it, so the
//!   bytes read have no tag. With `PACKET_AUXDATA` the kernel reports the tag
//!   next to each frame, and the port puts it back in the frame, where a wire
//!   would have it (counted in [`PortStats::rx_vlan_restored`]).
//! - **Checksum offload.** A frame sent by a local stack through a veth or a
//!   tap usually has its TCP/UDP checksum *unfinished*: the kernel left it to
//!   the NIC, and only the socket buffer's metadata says where it goes. A packet
//!   socket reads the bytes as they are. The port therefore always turns on
//!   `PACKET_VNET_HDR`, whose [`VnetHdr`] carries that position: with
//!   [`PortOptions::vnet_hdr`] the header is handed to the caller (and back to
//!   the kernel on send, which finishes the checksum on the way out); without
//!   it the port finishes the checksum itself, so plain frames are complete
//!   (counted in [`PortStats::rx_csum_completed`]). Forwarding the raw bytes
//!   would put a wrong checksum on the far side's wire, where the receiving
//!   stack drops the packet.
//! - **Segmentation offloads.** Locally generated TCP leaves a veth or a tap as
//!   one *super-packet* of up to 64 KiB (TSO/GSO) and receivers may merge
//!   segments (GRO). A packet socket reads such a super-packet whole. With
//!   `vnet_hdr` the [`VnetHdr`] says how to cut it; handing the same header back
//!   on send lets the kernel segment on the way out, and
//!   [`VnetHdr::wire_len`] says what the segments weigh. Without `vnet_hdr` a
//!   super-packet is delivered as one big plain frame, which no interface takes
//!   back without its header (`EMSGSIZE`, reported as [`PortError::TooLarge`]).
//!   Forward with `vnet_hdr` on. A GSO type the header cannot express (tunnel
//!   offloads on some kernels) makes the kernel drop the frame and fail the
//!   read with `EINVAL`; the port counts it ([`PortStats::rx_vnet_refused`]).
//! - **A GSO frame sent to an interface that cannot take it.** Before a
//!   device's transmit routine runs, the kernel compares the frame's GSO type
//!   with the device's offload features; a device without that offload gets the
//!   frame cut into `gso_size` segments in software (and checksums finished in
//!   software if the device cannot checksum). So any Ethernet interface takes a
//!   well-formed GSO frame; the kernel re-verifies headers given by user space
//!   (it marks them "dodgy"). A header it cannot use (a GSO type it does not
//!   know, `gso_size` 0, a checksum position past the end) makes `sendmmsg`
//!   fail with `EINVAL`, reported as [`PortError::Refused`]. The MTU is not
//!   checked against a GSO frame: if `gso_size` plus the headers exceeds the
//!   egress MTU, the segments are larger than the link allows and what becomes
//!   of them is up to the driver and the receiver (usually a drop), so a
//!   caller that must count them compares [`VnetHdr::segment_len`] with
//!   [`Port::mtu`] before sending. veth
//!   advertises TSO and passes the super-packet to its peer unchanged.
//!
//! # Parts
//!
//! `socket` opens and binds the socket and asks the kernel about it,
//! `sockopt` sets its packet options, `ring` maps and reads the receive ring,
//! `mmsg` moves batches with `recvmmsg`/`sendmmsg`, `rx` and `tx` are the
//! port's two directions, `frame` turns the kernel's bytes into an
//! [`RxFrame`], `vnet` reads the offload header, `options` and `error` say how
//! a port is opened and what goes wrong.
//!
//! # Not here (yet)
//!
//! - A `PACKET_TX_RING`: sends still go through `sendmmsg(2)`, one system
//!   call per batch.
//! - `PACKET_QDISC_BYPASS`: sends go through the interface's qdisc, which is
//!   what gives back-pressure (`ENOBUFS`) instead of silent drops in a driver.

#![allow(unsafe_code)]

mod error;
#[cfg(test)]
mod fixtures;
mod frame;
mod mmsg;
mod options;
mod ring;
mod rx;
mod socket;
mod sockopt;
mod tx;
mod vnet;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

pub use error::{PortError, SendError};
pub use options::{
    PortOptions, DEFAULT_FRAME_CAPACITY, DEFAULT_RX_RING_FRAMES, DEFAULT_RX_RING_FRAME_SIZE,
    MAX_BATCH,
};
pub(crate) use socket::ifreq_ioctl;
pub use socket::LinkState;
pub use vnet::{VnetHdr, VnetHdrError};

use mmsg::RxSlots;
use ring::RxRing;

/// A frame read from a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxFrame {
    /// The Ethernet frame from the destination MAC on, VLAN tag included, no FCS.
    pub data: Vec<u8>,
    /// The offload header, on a port opened with `vnet_hdr`.
    pub vnet: Option<VnetHdr>,
    /// Bytes the frame takes on a wire: `data.len()`, or the sum of the
    /// segments of a super-packet (see [`VnetHdr::wire_len_of`]).
    pub wire_len: u64,
    /// When the kernel put the frame in the receive ring (`tp_sec` and
    /// `tp_nsec`: `CLOCK_REALTIME`, nanoseconds since the epoch), so a
    /// caller that reads it later still knows when it arrived; 0 from a
    /// port without a ring ([`Port::stamps_frames`]).
    pub stamp_ns: u64,
}

impl RxFrame {
    /// The frame as something to send, header included.
    pub fn as_tx(&self) -> TxFrame<'_> {
        TxFrame {
            data: &self.data,
            vnet: self.vnet,
        }
    }
}

/// A frame to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFrame<'a> {
    /// The Ethernet frame.
    pub data: &'a [u8],
    /// How to segment and checksum it; `None` for a complete plain frame.
    /// Any port takes a header, whatever its [`PortOptions::vnet_hdr`].
    pub vnet: Option<VnetHdr>,
}

/// Counters of a port since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames delivered by [`Port::recv_batch`].
    pub rx_frames: u64,
    /// Their bytes (`data.len()`).
    pub rx_bytes: u64,
    /// Their bytes on a wire ([`RxFrame::wire_len`]).
    pub rx_wire_bytes: u64,
    /// Delivered frames that were GSO super-packets.
    pub rx_gso_frames: u64,
    /// Frames longer than a receive slot: dropped, never delivered cut.
    pub rx_truncated: u64,
    /// Frames we sent ourselves, read back on a kernel without
    /// `PACKET_IGNORE_OUTGOING`, and skipped.
    pub rx_outgoing_skipped: u64,
    /// Frames whose VLAN tag the kernel had taken out and the port put back.
    pub rx_vlan_restored: u64,
    /// Plain frames (no `vnet_hdr`) whose unfinished L4 checksum the port
    /// computed.
    pub rx_csum_completed: u64,
    /// Frames the kernel could not describe with a virtio_net_hdr (a GSO type
    /// it has no code for): the read failed with `EINVAL` and the frame is lost.
    pub rx_vnet_refused: u64,
    /// Frames the kernel described inconsistently (shorter than the
    /// virtio_net_hdr, checksum position past the end, ring slot offsets
    /// outside the slot, a `TP_STATUS_COPY` slot with no copy queued): dropped.
    pub rx_malformed: u64,
    /// Delivered frames too long for a ring slot, read whole from the socket's
    /// queue (`TP_STATUS_COPY`): GSO super-packets, jumbo frames.
    pub rx_ring_copied: u64,
    /// Frames the kernel accepted in [`Port::send_batch`].
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// `EAGAIN` refusals.
    pub tx_would_block: u64,
    /// `ENOBUFS` refusals.
    pub tx_no_buffers: u64,
    /// Other refusals (too large, bad header, interface down, ...).
    pub tx_refused: u64,
    /// Frames the kernel handed to the socket (`PACKET_STATISTICS`
    /// `tp_packets`, which includes the dropped ones).
    pub kernel_packets: u64,
    /// Frames the kernel dropped because the receive buffer was full
    /// (`tp_drops`).
    pub kernel_drops: u64,
}

/// An AF_PACKET socket bound to one interface. See the module documentation.
pub struct Port {
    /// Declared before `fd`, so the ring is unmapped before the socket closes.
    ring: Option<RxRing>,
    fd: OwnedFd,
    ifname: Arc<str>,
    ifindex: u32,
    opts: PortOptions,
    ignore_outgoing: bool,
    rx: RxSlots,
    pool: Vec<Vec<u8>>,
    stats: PortStats,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("fd", &self.fd.as_raw_fd())
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("opts", &self.opts)
            .field("ignore_outgoing", &self.ignore_outgoing)
            .field("rx_ring_frames", &self.rx_ring_frames())
            .finish_non_exhaustive()
    }
}

impl Port {
    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index in its namespace.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The options the port was opened with.
    pub fn options(&self) -> &PortOptions {
        &self.opts
    }

    /// Slots in the receive ring (after rounding up to whole pages), or 0 when
    /// the port reads with `recvmmsg`.
    pub fn rx_ring_frames(&self) -> usize {
        self.ring.as_ref().map_or(0, |r| r.geometry.frames)
    }

    /// Whether every frame read carries the kernel's receive time
    /// ([`RxFrame::stamp_ns`]): true when the port reads from a ring.
    pub fn stamps_frames(&self) -> bool {
        self.ring.is_some()
    }

    /// Whether the kernel keeps outgoing frames away (`PACKET_IGNORE_OUTGOING`);
    /// if not, they are skipped by `sll_pkttype`.
    pub fn ignores_outgoing_in_kernel(&self) -> bool {
        self.ignore_outgoing
    }
}

impl AsFd for Port {
    /// The socket, for `poll(2)`/`epoll(7)`: readable when frames wait,
    /// writable when the send buffer has room.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<Port>();
        send::<PortError>();
        send::<RxFrame>();
    }
}
