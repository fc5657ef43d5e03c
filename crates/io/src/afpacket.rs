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
//! # Receiving: a memory-mapped ring, or `recvmmsg`
//!
//! By default a port reads from a `TPACKET_V2` receive ring
//! ([`PortOptions::rx_ring_frames`] slots of [`PortOptions::rx_ring_frame_size`]
//! bytes, mapped into the process). The kernel writes each frame into the
//! next free slot while it is still in the *sender's* context and flips the
//! slot's status word to `TP_STATUS_USER`; [`Port::recv_batch`] walks the
//! slots in order, copies each frame out and hands the slot back
//! (`TP_STATUS_KERNEL`). No system call, no socket buffer to allocate and
//! free per frame: that was most of the bridge's receive cost with
//! `recvmmsg` (copying, `msghdr` handling, freeing the skb on the other CPU).
//!
//! - **Why V2 and not V3.** V3 hands frames over a block at a time, and a
//!   block that is not full is retired only after a timeout of milliseconds:
//!   at low rates a ping would wait for it, which an emulator of delays cannot
//!   afford. V2 marks each frame ready as it is written and wakes `poll(2)`
//!   per frame.
//! - **Slot layout.** `tpacket2_hdr` (32 bytes), `sockaddr_ll` (its
//!   `sll_pkttype` says whether the frame was outgoing), then the frame at
//!   `tp_mac` with its 10-byte virtio_net_hdr just before it (`tp_mac - 10`;
//!   76 bytes into the slot for an Ethernet frame). VLAN tags come in
//!   `tp_vlan_tci`/`tp_vlan_tpid` with `TP_STATUS_VLAN_VALID` and
//!   `TP_STATUS_VLAN_TPID_VALID`, as `PACKET_AUXDATA` gives them to `recvmsg`.
//!   Every offset is checked against the slot before it is used: a header
//!   that does not fit is counted ([`PortStats::rx_malformed`]), never read.
//! - **Frames longer than a slot.** A 2 KiB slot holds any 1500-byte-MTU
//!   frame but not a 64 KiB GSO super-packet. The port sets
//!   `PACKET_COPY_THRESH`, so the kernel also queues such a frame whole on the
//!   socket's ordinary receive queue and marks its (cut) slot
//!   `TP_STATUS_COPY`; meeting that mark, the port reads the frame whole with
//!   `recvmsg`, virtio_net_hdr and VLAN tag included (counted in
//!   [`PortStats::rx_ring_copied`]). Slots and queue stay in step: the kernel
//!   queues the copy and claims the slot under one lock, and frees the copy if
//!   it cannot claim a slot. When the receive buffer is full the kernel makes
//!   no copy and the cut slot is counted in [`PortStats::rx_truncated`].
//! - **A full ring** drops in the kernel: counted in `PACKET_STATISTICS`
//!   ([`PortStats::kernel_drops`]), and slots written after a drop carry
//!   `TP_STATUS_LOSING` until the counters are read. A frame whose
//!   virtio_net_hdr the kernel cannot write is a kernel drop too on a ring
//!   (with `recvmmsg` it is [`PortStats::rx_vnet_refused`]).
//!
//! [`PortOptions::rx_ring_frames`] 0 reads with `recvmmsg(2)` instead, into
//! [`PortOptions::batch`] slots of [`PortOptions::frame_capacity`] bytes that
//! never leave the port.
//!
//! # Buffers
//!
//! Either way, each frame is copied into a `Vec<u8>` taken from a pool, so
//! what the caller keeps is sized like the frame, not like the slot. Give
//! buffers back with [`Port::recycle`] (to the port that read them) and a
//! steady stream allocates nothing. A frame longer than
//! [`PortOptions::frame_capacity`] is not delivered cut: it is dropped and
//! counted ([`PortStats::rx_truncated`]).
//!
//! # Not here (yet)
//!
//! - A `PACKET_TX_RING`: sends still go through `sendmmsg(2)`, one system
//!   call per batch.
//! - `PACKET_QDISC_BYPASS`: sends go through the interface's qdisc, which is
//!   what gives back-pressure (`ENOBUFS`) instead of silent drops in a driver.

#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType};

/// Most frames one system call moves, and the largest [`PortOptions::batch`].
/// The message headers for one call live on the stack (about 24 KiB at 256).
pub const MAX_BATCH: usize = 256;

/// Default slot size: a 64 KiB super-packet plus its Ethernet and VLAN
/// headers. veth and most NICs cap GSO packets at 64 KiB (`gso_max_size`).
pub const DEFAULT_FRAME_CAPACITY: usize = 64 * 1024 + 64;

/// Smallest and largest [`PortOptions::frame_capacity`] accepted.
const FRAME_CAPACITY_RANGE: (usize, usize) = (64, 1 << 20);

/// Default [`PortOptions::rx_ring_frames`]: 4096 slots of 2 KiB, 8 MiB per
/// port, about 10 ms of 64-byte frames at 400 kpps before the kernel drops.
pub const DEFAULT_RX_RING_FRAMES: usize = 4096;

/// Default [`PortOptions::rx_ring_frame_size`]: a 1500-byte-MTU frame with a
/// VLAN tag and the 76 bytes of slot header before it fits; larger frames
/// take the `TP_STATUS_COPY` path.
pub const DEFAULT_RX_RING_FRAME_SIZE: usize = 2048;

/// Smallest and largest [`PortOptions::rx_ring_frame_size`] accepted.
const RING_FRAME_SIZE_RANGE: (usize, usize) = (256, 256 * 1024);

/// Most slots and most bytes a ring may have.
const RING_MAX_FRAMES: usize = 1 << 20;
const RING_MAX_BYTES: usize = 1 << 30;

/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where the `sockaddr_ll`
/// starts in a slot.
const RING_SLL_OFFSET: usize = (size_of::<libc::tpacket2_hdr>() + 15) & !15;

/// `TPACKET2_HDRLEN`: the slot header and the `sockaddr_ll`. A frame's
/// virtio_net_hdr, and the frame, come after it.
const RING_HDR_LEN: usize = RING_SLL_OFFSET + size_of::<libc::sockaddr_ll>();

/// How many empty buffers a port keeps for reuse; more are freed.
const POOL_LIMIT: usize = 4096;

/// How many `recvmmsg` calls one [`Port::recv_batch`] makes when every frame
/// received was skipped (outgoing, truncated): enough to drain a burst, and
/// bounded so a flood of skipped frames cannot hold the caller.
const RECV_ROUNDS: usize = 4;

/// Room for the control messages of one received frame: `PACKET_AUXDATA` is
/// the only one asked for (`CMSG_SPACE(20)` is 40 bytes on 64-bit Linux).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct CmsgSpace([u8; 64]);

/// How a [`Port`] is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortOptions {
    /// Deliver each frame with its [`VnetHdr`], so GSO/GRO super-packets and
    /// unfinished checksums cross the bridge intact and are finished by the
    /// kernel on the way out. When false, received frames are plain: the port
    /// finishes their checksums itself. Sending takes a header either way.
    pub vnet_hdr: bool,
    /// Most frames one [`Port::recv_batch`] returns and one `sendmmsg` (or
    /// `recvmmsg`) moves, 1 to [`MAX_BATCH`].
    pub batch: usize,
    /// The longest frame delivered whole; longer ones are dropped and counted
    /// ([`PortStats::rx_truncated`]). It is the size of each `recvmmsg` slot
    /// and, with a ring, of the one slot that takes `TP_STATUS_COPY` frames.
    pub frame_capacity: usize,
    /// Bytes asked for `SO_RCVBUF` and `SO_SNDBUF` (the `FORCE` variants when
    /// allowed, which ignore `net.core.rmem_max`/`wmem_max`). 0 keeps the
    /// kernel defaults.
    pub socket_buffer: usize,
    /// Put the interface in promiscuous mode while the port is open. A bridge
    /// needs it: frames addressed to hosts on the other side must be seen.
    pub promiscuous: bool,
    /// Slots in the memory-mapped `TPACKET_V2` receive ring (see the module
    /// documentation), rounded up to fill whole pages. 0: no ring, frames are
    /// read with `recvmmsg`. Default [`DEFAULT_RX_RING_FRAMES`].
    pub rx_ring_frames: usize,
    /// Bytes of one ring slot, its 76 bytes of header included: frames longer
    /// than `rx_ring_frame_size - 76` come whole through `recvmsg` instead
    /// (`TP_STATUS_COPY`). A multiple of 16, 256 to 256 KiB. Default
    /// [`DEFAULT_RX_RING_FRAME_SIZE`].
    pub rx_ring_frame_size: usize,
}

impl Default for PortOptions {
    fn default() -> Self {
        PortOptions {
            vnet_hdr: false,
            batch: 64,
            frame_capacity: DEFAULT_FRAME_CAPACITY,
            socket_buffer: 4 << 20,
            promiscuous: true,
            rx_ring_frames: DEFAULT_RX_RING_FRAMES,
            rx_ring_frame_size: DEFAULT_RX_RING_FRAME_SIZE,
        }
    }
}

/// What went wrong on a port, and where.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The interface name cannot name a Linux interface.
    #[error("interface name {ifname:?} is not valid: {why}")]
    BadName { ifname: String, why: &'static str },
    /// No interface by that name in the caller's network namespace.
    #[error("no interface named {ifname:?} in this thread's network namespace ({errno})")]
    NoSuchInterface { ifname: String, errno: Errno },
    /// A [`PortOptions`] field is out of range.
    #[error("port option {name} = {value} is out of range: allowed {allowed}")]
    BadOption {
        name: &'static str,
        value: usize,
        allowed: &'static str,
    },
    /// A system call failed while opening or using the port.
    #[error("{ifname}: {op} failed: {errno}")]
    Sys {
        ifname: Arc<str>,
        op: &'static str,
        errno: Errno,
    },
    /// The socket's send buffer is full (`EAGAIN`): wait for `POLLOUT`, or drop.
    #[error("{ifname}: send buffer full (EAGAIN); wait for POLLOUT or count a drop")]
    WouldBlock { ifname: Arc<str> },
    /// The interface's queue or the kernel had no room (`ENOBUFS`).
    #[error("{ifname}: no buffer space in the kernel or the device queue (ENOBUFS)")]
    NoBuffers { ifname: Arc<str> },
    /// The frame is longer than the interface takes (`EMSGSIZE`): MTU plus
    /// link header, unless it is a GSO frame sent with a [`VnetHdr`].
    #[error("{ifname}: frame of {len} bytes is larger than the interface accepts (EMSGSIZE): longer than its MTU plus the link header, or a super-packet sent without its VnetHdr")]
    TooLarge { ifname: Arc<str>, len: usize },
    /// The kernel refused the frame or its [`VnetHdr`] (`EINVAL`).
    #[error("{ifname}: kernel refused a frame of {len} bytes with {vnet:?} (EINVAL): bad GSO type, gso_size or checksum offsets")]
    Refused {
        ifname: Arc<str>,
        len: usize,
        vnet: Option<VnetHdr>,
    },
    /// The interface went down or away (`ENETDOWN`, `ENXIO`, `ENODEV`).
    #[error("{ifname}: interface is down or gone ({errno})")]
    InterfaceDown { ifname: Arc<str>, errno: Errno },
}

/// A [`Port::send_batch`] that stopped early: `frames[..sent]` were accepted
/// by the kernel, `frames[sent]` was refused for `error`, and the frames after
/// it were not tried. The caller decides: retry later, or count drops.
#[derive(Debug, thiserror::Error)]
#[error("sent {sent} frame(s), then: {error}")]
pub struct SendError {
    /// Frames accepted before the refusal.
    pub sent: usize,
    /// Why `frames[sent]` was refused.
    #[source]
    pub error: PortError,
}

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

/// A malformed [`VnetHdr`] byte string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("virtio_net_hdr needs {needed} bytes, got {got}")]
pub struct VnetHdrError {
    /// Bytes a header takes.
    pub needed: usize,
    /// Bytes given.
    pub got: usize,
}

/// `struct virtio_net_hdr`, the 10-byte header the kernel puts before each
/// frame on a `PACKET_VNET_HDR` socket and expects before each frame sent.
///
/// Every byte string of 10 bytes is some header: the fields are kept as the
/// kernel gave them (in host byte order, which is what packet sockets use), so
/// the header can be handed back unchanged. Whether they make sense for a
/// given frame is asked with [`VnetHdr::segments`], [`VnetHdr::wire_len`] and
/// friends, which never panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VnetHdr {
    /// `NEEDS_CSUM`, `DATA_VALID`, `RSC_INFO`.
    pub flags: u8,
    /// `GSO_NONE`, `GSO_TCPV4`, `GSO_UDP`, `GSO_TCPV6`, `GSO_UDP_L4`, maybe
    /// with the `GSO_ECN` bit.
    pub gso_type: u8,
    /// Bytes of headers before the payload. On receive the kernel fills in the
    /// length of the buffer's linear part, a hint that is usually, but not
    /// always, exactly the headers.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS for TCP).
    pub gso_size: u16,
    /// Offset in the frame where the checksum computation starts (the L4 header).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Bytes of the header on the socket.
    pub const LEN: usize = 10;
    /// The L4 checksum is unfinished: sum from `csum_start` to the end and
    /// store it at `csum_start + csum_offset`.
    pub const F_NEEDS_CSUM: u8 = 1;
    /// The receiver already verified the checksum.
    pub const F_DATA_VALID: u8 = 2;
    /// Not a super-packet.
    pub const GSO_NONE: u8 = 0;
    /// IPv4 TCP segmentation.
    pub const GSO_TCPV4: u8 = 1;
    /// IPv4 UDP fragmentation offload (UFO): segments are IP fragments.
    pub const GSO_UDP: u8 = 3;
    /// IPv6 TCP segmentation.
    pub const GSO_TCPV6: u8 = 4;
    /// UDP segmentation (USO): each segment is a whole UDP datagram.
    pub const GSO_UDP_L4: u8 = 5;
    /// Bit in `gso_type`: the TCP stream uses ECN (CWR on the first segment only).
    pub const GSO_ECN: u8 = 0x80;

    /// Reads a header from the first [`VnetHdr::LEN`] bytes of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<VnetHdr, VnetHdrError> {
        let b: &[u8; Self::LEN] = bytes
            .get(..Self::LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(VnetHdrError {
                needed: Self::LEN,
                got: bytes.len(),
            })?;
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header as the kernel reads it.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// The GSO type without the ECN bit.
    pub fn gso_kind(&self) -> u8 {
        self.gso_type & !Self::GSO_ECN
    }

    /// Whether the frame is a super-packet to be cut into `gso_size` pieces.
    /// A GSO type with `gso_size` 0 is malformed and counts as not GSO.
    pub fn is_gso(&self) -> bool {
        self.gso_kind() != Self::GSO_NONE && self.gso_size > 0
    }

    /// Whether the L4 checksum is left to be finished.
    pub fn needs_csum(&self) -> bool {
        self.flags & Self::F_NEEDS_CSUM != 0
    }

    /// How many frames the super-packet becomes, taking `hdr_len` as the
    /// length of the headers each segment repeats. 1 when not GSO or when the
    /// header does not fit the frame.
    pub fn segments(&self, frame_len: usize) -> u64 {
        self.segments_with(frame_len, usize::from(self.hdr_len))
    }

    fn segments_with(&self, frame_len: usize, headers: usize) -> u64 {
        if !self.is_gso() || headers >= frame_len {
            return 1;
        }
        let payload = (frame_len - headers) as u64;
        payload.div_ceil(u64::from(self.gso_size)).max(1)
    }

    /// Bytes the frame occupies on a wire once segmented: every segment after
    /// the first repeats the `hdr_len` bytes of headers. Without GSO (or with a
    /// malformed header) it is `frame_len`. Ethernet preamble, FCS and gap are
    /// not counted, as for any other frame.
    pub fn wire_len(&self, frame_len: usize) -> u64 {
        self.wire_len_with(frame_len, usize::from(self.hdr_len))
    }

    fn wire_len_with(&self, frame_len: usize, headers: usize) -> u64 {
        // Saturating: a frame length near usize::MAX with gso_size 1 must not
        // overflow (no real frame comes close).
        let extra = self.segments_with(frame_len, headers) - 1;
        (frame_len as u64).saturating_add(extra.saturating_mul(headers as u64))
    }

    /// Length of the headers every segment repeats, read from the frame
    /// itself: the L4 header starts at `csum_start` (the kernel keeps the
    /// checksum of a super-packet unfinished), and its length is in the TCP
    /// data offset, or 8 for UDP. `None` when the frame does not say, and
    /// [`VnetHdr::hdr_len`] is the best guess.
    pub fn headers_len(&self, frame: &[u8]) -> Option<usize> {
        if !self.is_gso() || !self.needs_csum() {
            return None;
        }
        let l4 = usize::from(self.csum_start);
        let len = match self.gso_kind() {
            Self::GSO_TCPV4 | Self::GSO_TCPV6 => {
                let data_offset = usize::from(*frame.get(l4 + 12)? >> 4) * 4;
                (data_offset >= 20).then_some(data_offset)?
            }
            Self::GSO_UDP | Self::GSO_UDP_L4 => 8,
            _ => return None,
        };
        (l4 + len <= frame.len()).then_some(l4 + len)
    }

    /// [`VnetHdr::wire_len`] with the header length read from the frame when
    /// it can be (see [`VnetHdr::headers_len`]): the kernel's `hdr_len` may
    /// include some payload.
    pub fn wire_len_of(&self, frame: &[u8]) -> u64 {
        let headers = self.headers_len(frame).unwrap_or(usize::from(self.hdr_len));
        self.wire_len_with(frame.len(), headers)
    }

    /// Bytes of the largest frame the super-packet `frame` becomes once cut:
    /// its headers (read from the frame when it can be, see
    /// [`VnetHdr::headers_len`]) and `gso_size` bytes of payload; no more
    /// than the frame itself. `None` when it is not GSO.
    pub fn segment_len(&self, frame: &[u8]) -> Option<usize> {
        if !self.is_gso() {
            return None;
        }
        let headers = self.headers_len(frame).unwrap_or(usize::from(self.hdr_len));
        Some(
            headers
                .saturating_add(usize::from(self.gso_size))
                .min(frame.len()),
        )
    }

    /// The header after a 4-byte VLAN tag was put back after the MAC
    /// addresses: offsets into the frame move by 4.
    fn shifted_by_vlan_tag(mut self) -> VnetHdr {
        if self.needs_csum() {
            self.csum_start = self.csum_start.saturating_add(4);
        }
        if self.hdr_len > 0 {
            self.hdr_len = self.hdr_len.saturating_add(4);
        }
        self
    }
}

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

/// What the kernel said about one received message.
#[derive(Clone, Copy, Debug, Default)]
struct RxMeta {
    /// Bytes of the message (vnet header included), with `MSG_TRUNC` the
    /// length before truncation.
    len: usize,
    truncated: bool,
    pkttype: u8,
    /// `tpacket_auxdata`: `(tp_status, tp_vlan_tci, tp_vlan_tpid)`.
    aux: Option<(u32, u16, u16)>,
}

/// The receive slots: where one `recvmmsg` writes.
struct RxSlots {
    frames: Vec<Vec<u8>>,
    vnet: Vec<[u8; VnetHdr::LEN]>,
    addrs: Vec<libc::sockaddr_ll>,
    ctrl: Vec<CmsgSpace>,
    meta: Vec<RxMeta>,
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

    /// Reads up to `max` frames (and at most [`PortOptions::batch`]) and
    /// appends them to `out`. Returns how many were appended; 0 means nothing
    /// was waiting (the socket is non-blocking: poll [`Port::as_fd`] for
    /// `POLLIN`). Frames too long for a slot are dropped and counted, never
    /// delivered cut. On an error (the interface went away, mostly), frames
    /// read before it are already in `out`.
    pub fn recv_batch(&mut self, out: &mut Vec<RxFrame>, max: usize) -> Result<usize, PortError> {
        let want = max.min(self.opts.batch);
        if self.ring.is_some() {
            return self.recv_ring(out, want);
        }
        let mut appended = 0;
        for _ in 0..RECV_ROUNDS {
            if want == 0 {
                break;
            }
            let got = match self.rx.receive(self.fd.as_raw_fd(), want) {
                Ok(n) => n,
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                // A frame the kernel could not put a virtio_net_hdr on; it is
                // gone, the next ones are not.
                Err(Errno::EINVAL) => {
                    self.stats.rx_vnet_refused += 1;
                    continue;
                }
                Err(errno) => return Err(self.error("recvmmsg", errno)),
            };
            for slot in 0..got {
                if let Some(frame) = self.take(slot) {
                    out.push(frame);
                    appended += 1;
                }
            }
            if got == 0 || appended > 0 {
                break;
            }
        }
        Ok(appended)
    }

    /// [`Port::recv_batch`] from the ring: up to `want` frames, visiting at
    /// most `RECV_ROUNDS * want` slots so a flood of skipped frames cannot
    /// hold the caller.
    fn recv_ring(&mut self, out: &mut Vec<RxFrame>, want: usize) -> Result<usize, PortError> {
        let mut appended = 0;
        for _ in 0..want.saturating_mul(RECV_ROUNDS) {
            if appended == want {
                break;
            }
            let Some(ring) = self.ring.as_mut() else {
                break;
            };
            let Some(slot) = ring.ready() else {
                break;
            };
            let outcome = read_slot(
                slot,
                ReadSlot {
                    skip_outgoing: !self.ignore_outgoing,
                    frame_capacity: self.opts.frame_capacity,
                    with_vnet: self.opts.vnet_hdr,
                },
                &mut self.pool,
                &mut self.stats,
            );
            // The slot is copied out (or given up on): the kernel may have it.
            ring.release();
            let frame = match outcome {
                SlotOutcome::Frame(frame) => Some(frame),
                SlotOutcome::Skipped => None,
                SlotOutcome::Copied { outgoing, stamp_ns } => self
                    .take_copied(outgoing)?
                    .map(|f| RxFrame { stamp_ns, ..f }),
            };
            if let Some(frame) = frame {
                out.push(frame);
                appended += 1;
            }
        }
        Ok(appended)
    }

    /// Reads, whole, the frame whose ring slot said `TP_STATUS_COPY`: it is
    /// the next one on the socket's queue.
    fn take_copied(&mut self, outgoing: bool) -> Result<Option<RxFrame>, PortError> {
        let mut got = 0;
        for _ in 0..RECV_ROUNDS {
            match self.rx.receive(self.fd.as_raw_fd(), 1) {
                Ok(n) => {
                    got = n;
                    break;
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                // Dequeued, but the kernel could not describe it.
                Err(Errno::EINVAL) => {
                    self.stats.rx_vnet_refused += 1;
                    return Ok(None);
                }
                Err(errno) => return Err(self.error("recvmsg (TP_STATUS_COPY)", errno)),
            }
        }
        if got == 0 {
            // The slot promised a copy that is not there.
            self.stats.rx_malformed += 1;
            return Ok(None);
        }
        // The copy's own address is blank (the kernel zeroes it); whether the
        // frame was outgoing came from its slot.
        if outgoing {
            self.stats.rx_outgoing_skipped += 1;
            return Ok(None);
        }
        let frame = self.take(0);
        if frame.is_some() {
            self.stats.rx_ring_copied += 1;
        }
        Ok(frame)
    }

    /// Gives a frame buffer back for reuse by [`Port::recv_batch`] on this
    /// port. Buffers beyond a few thousand are freed.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        recycle_into(&mut self.pool, buf);
    }

    /// Sends `frames` in batches of [`PortOptions::batch`] per `sendmmsg`.
    /// `Ok(n)` means all `n` were accepted. On a refusal, [`SendError`] says
    /// how many went before it and why the next one did not go, so the caller
    /// can keep it for later (`WouldBlock`: poll for `POLLOUT`) or count it as
    /// a drop with that reason.
    pub fn send_batch(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, SendError> {
        let mut done = 0;
        while done < frames.len() {
            let end = frames.len().min(done + self.opts.batch);
            let chunk = &frames[done..end];
            let mut headers = [[0u8; VnetHdr::LEN]; MAX_BATCH];
            for (frame, header) in chunk.iter().zip(headers.iter_mut()) {
                if let Some(v) = frame.vnet {
                    *header = v.to_bytes();
                }
            }
            match send_mmsg(self.fd.as_raw_fd(), chunk, &headers) {
                // sendmmsg reports an error only when the first message fails;
                // after a partial send, the loop tries again from the first
                // frame not sent and so learns the reason.
                Ok(sent) => {
                    for frame in &chunk[..sent] {
                        self.stats.tx_frames += 1;
                        self.stats.tx_bytes += frame.data.len() as u64;
                    }
                    done += sent;
                }
                Err(Errno::EINTR) => {}
                Err(errno) => {
                    let error = self.send_error(errno, &chunk[0]);
                    return Err(SendError { sent: done, error });
                }
            }
        }
        Ok(done)
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
    /// a caller waiting on [`Port::as_fd`] must take it when it sees
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

    fn error(&self, op: &'static str, errno: Errno) -> PortError {
        match errno {
            Errno::ENETDOWN | Errno::ENXIO | Errno::ENODEV => PortError::InterfaceDown {
                ifname: self.ifname.clone(),
                errno,
            },
            _ => PortError::Sys {
                ifname: self.ifname.clone(),
                op,
                errno,
            },
        }
    }

    fn send_error(&mut self, errno: Errno, frame: &TxFrame<'_>) -> PortError {
        let ifname = self.ifname.clone();
        match errno {
            Errno::EAGAIN => {
                self.stats.tx_would_block += 1;
                PortError::WouldBlock { ifname }
            }
            Errno::ENOBUFS => {
                self.stats.tx_no_buffers += 1;
                PortError::NoBuffers { ifname }
            }
            Errno::EMSGSIZE => {
                self.stats.tx_refused += 1;
                PortError::TooLarge {
                    ifname,
                    len: frame.data.len(),
                }
            }
            Errno::EINVAL => {
                self.stats.tx_refused += 1;
                PortError::Refused {
                    ifname,
                    len: frame.data.len(),
                    vnet: frame.vnet,
                }
            }
            _ => {
                self.stats.tx_refused += 1;
                self.error("sendmmsg", errno)
            }
        }
    }

    /// Turns receive slot `slot` into a frame, or counts why it is skipped.
    fn take(&mut self, slot: usize) -> Option<RxFrame> {
        let meta = *self.rx.meta.get(slot)?;
        if !self.ignore_outgoing && meta.pkttype == libc::PACKET_OUTGOING {
            self.stats.rx_outgoing_skipped += 1;
            return None;
        }
        let Some(frame_len) = meta.len.checked_sub(VnetHdr::LEN) else {
            self.stats.rx_malformed += 1;
            return None;
        };
        let buf = self.rx.frames.get(slot)?;
        if meta.truncated || frame_len > buf.len() {
            self.stats.rx_truncated += 1;
            return None;
        }
        let bytes = buf.get(..frame_len)?;
        let Ok(vnet) = VnetHdr::parse(self.rx.vnet.get(slot)?) else {
            self.stats.rx_malformed += 1;
            return None;
        };
        let aux = meta.aux.unwrap_or((0, 0, 0));
        finish_frame(
            bytes,
            vnet,
            aux,
            self.opts.vnet_hdr,
            &mut self.pool,
            &mut self.stats,
        )
    }
}

/// A pooled buffer may be reused for a frame of `len` bytes if it is at
/// most twice that, or this: larger ones are cut down first.
const REUSE_SLACK: usize = 2048;

/// A buffer from `pool` (or a new one) for a frame of `len` bytes. One
/// much larger than the frame, such as a 64 KiB super-packet's given back
/// and now taken for a 64-byte frame, is cut down to the frame first, so
/// what a frame held in a pipe costs stays near its length, which is what
/// `held_limit` counts: at most twice it, or [`REUSE_SLACK`].
fn take_buffer(pool: &mut Vec<Vec<u8>>, len: usize) -> Vec<u8> {
    let mut data = pool.pop().unwrap_or_default();
    data.clear();
    if data.capacity() > (2 * len).max(REUSE_SLACK) {
        data.shrink_to(len);
    }
    data
}

/// Puts `buf` in `pool` for reuse, unless the pool is full.
fn recycle_into(pool: &mut Vec<Vec<u8>>, mut buf: Vec<u8>) {
    if pool.len() < POOL_LIMIT {
        buf.clear();
        pool.push(buf);
    }
}

/// Makes a delivered frame of `bytes` (as the kernel read them: no VLAN tag)
/// with its virtio_net_hdr and `PACKET_AUXDATA`-style `(tp_status,
/// tp_vlan_tci, tp_vlan_tpid)`: puts the tag back, finishes a plain frame's
/// checksum, counts. `None` (counted) when the header does not fit the frame.
fn finish_frame(
    bytes: &[u8],
    mut vnet: VnetHdr,
    (status, tci, tpid): (u32, u16, u16),
    with_vnet: bool,
    pool: &mut Vec<Vec<u8>>,
    stats: &mut PortStats,
) -> Option<RxFrame> {
    let frame_len = bytes.len();
    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0 && frame_len >= 12).then(|| {
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            tpid
        } else {
            0x8100
        };
        (tpid, tci)
    });
    let mut data = take_buffer(pool, frame_len + 4);
    match vlan {
        Some((tpid, tci)) => {
            data.reserve(frame_len + 4);
            data.extend_from_slice(&bytes[..12]);
            data.extend_from_slice(&tpid.to_be_bytes());
            data.extend_from_slice(&tci.to_be_bytes());
            data.extend_from_slice(&bytes[12..]);
            vnet = vnet.shifted_by_vlan_tag();
            stats.rx_vlan_restored += 1;
        }
        None => data.extend_from_slice(bytes),
    }
    let gso = vnet.is_gso();
    let (vnet, wire_len) = if with_vnet {
        (Some(vnet), vnet.wire_len_of(&data))
    } else {
        // A super-packet stays one frame (its checksums are redone per
        // segment anyway); anything else leaves complete.
        if vnet.needs_csum() && !gso {
            if !finish_checksum(&mut data, vnet.csum_start, vnet.csum_offset) {
                stats.rx_malformed += 1;
                recycle_into(pool, data);
                return None;
            }
            stats.rx_csum_completed += 1;
        }
        (None, data.len() as u64)
    };
    stats.rx_frames += 1;
    stats.rx_bytes += data.len() as u64;
    stats.rx_wire_bytes += wire_len;
    if gso {
        stats.rx_gso_frames += 1;
    }
    Some(RxFrame {
        data,
        vnet,
        wire_len,
        stamp_ns: 0,
    })
}

/// How to read a ring slot: the parts of the port's settings that matter.
#[derive(Clone, Copy, Debug)]
struct ReadSlot {
    /// The kernel does not filter outgoing frames: skip them here.
    skip_outgoing: bool,
    /// Longest frame delivered ([`PortOptions::frame_capacity`]).
    frame_capacity: usize,
    /// Hand the virtio_net_hdr to the caller ([`PortOptions::vnet_hdr`]).
    with_vnet: bool,
}

/// What became of one ring slot.
#[derive(Debug)]
enum SlotOutcome {
    Frame(RxFrame),
    /// Counted in the port's statistics, nothing to deliver.
    Skipped,
    /// `TP_STATUS_COPY`: the frame waits whole on the socket's queue.
    Copied {
        outgoing: bool,
        stamp_ns: u64,
    },
}

/// The fields of a ring slot's `tpacket2_hdr` and `sockaddr_ll` that matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotHeader {
    status: u32,
    len: u32,
    /// `tp_sec` and `tp_nsec` as nanoseconds since the epoch.
    stamp_ns: u64,
    snaplen: u32,
    mac: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
    pkttype: u8,
}

impl SlotHeader {
    /// Reads the header at the start of `slot`; `None` when the slot is
    /// shorter than the header.
    fn parse(slot: &[u8]) -> Option<SlotHeader> {
        use std::mem::offset_of;
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(slot.get(at..at + 4)?.try_into().ok()?))
        };
        let u16_at = |at: usize| -> Option<u16> {
            Some(u16::from_ne_bytes(slot.get(at..at + 2)?.try_into().ok()?))
        };
        type H = libc::tpacket2_hdr;
        Some(SlotHeader {
            status: u32_at(offset_of!(H, tp_status))?,
            len: u32_at(offset_of!(H, tp_len))?,
            stamp_ns: u64::from(u32_at(offset_of!(H, tp_sec))?) * 1_000_000_000
                + u64::from(u32_at(offset_of!(H, tp_nsec))?),
            snaplen: u32_at(offset_of!(H, tp_snaplen))?,
            mac: u16_at(offset_of!(H, tp_mac))?,
            vlan_tci: u16_at(offset_of!(H, tp_vlan_tci))?,
            vlan_tpid: u16_at(offset_of!(H, tp_vlan_tpid))?,
            pkttype: *slot.get(RING_SLL_OFFSET + offset_of!(libc::sockaddr_ll, sll_pkttype))?,
        })
    }
}

/// Copies the frame out of a ring slot the kernel has handed over (or says
/// why not, counting it). Every offset read from the slot is checked against
/// the slot first.
fn read_slot(
    slot: &[u8],
    how: ReadSlot,
    pool: &mut Vec<Vec<u8>>,
    stats: &mut PortStats,
) -> SlotOutcome {
    let Some(h) = SlotHeader::parse(slot) else {
        stats.rx_malformed += 1;
        return SlotOutcome::Skipped;
    };
    let outgoing = how.skip_outgoing && h.pkttype == libc::PACKET_OUTGOING;
    if h.status & libc::TP_STATUS_COPY != 0 {
        // Taken (and skipped if outgoing) from the queue, so the queue
        // stays in step with the ring.
        return SlotOutcome::Copied {
            outgoing,
            stamp_ns: h.stamp_ns,
        };
    }
    if outgoing {
        stats.rx_outgoing_skipped += 1;
        return SlotOutcome::Skipped;
    }
    let mac = usize::from(h.mac);
    let snaplen = h.snaplen as usize;
    // The virtio_net_hdr sits just before the frame, after the slot header.
    let vnet_bytes = mac
        .checked_sub(VnetHdr::LEN)
        .filter(|&at| at >= RING_HDR_LEN)
        .and_then(|at| slot.get(at..mac));
    let frame = mac.checked_add(snaplen).and_then(|end| slot.get(mac..end));
    let (Some(vnet_bytes), Some(frame)) = (vnet_bytes, frame) else {
        stats.rx_malformed += 1;
        return SlotOutcome::Skipped;
    };
    // Cut by the slot and no copy queued (the receive buffer was full), or
    // longer than the caller takes: never delivered cut.
    if (snaplen as u64) < u64::from(h.len) || snaplen > how.frame_capacity {
        stats.rx_truncated += 1;
        return SlotOutcome::Skipped;
    }
    let Ok(vnet) = VnetHdr::parse(vnet_bytes) else {
        stats.rx_malformed += 1;
        return SlotOutcome::Skipped;
    };
    let aux = (h.status, h.vlan_tci, h.vlan_tpid);
    match finish_frame(frame, vnet, aux, how.with_vnet, pool, stats) {
        Some(f) => SlotOutcome::Frame(RxFrame {
            stamp_ns: h.stamp_ns,
            ..f
        }),
        None => SlotOutcome::Skipped,
    }
}

/// Sizes of a receive ring, as `PACKET_RX_RING` takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RingGeometry {
    frame_size: usize,
    frames_per_block: usize,
    block_size: usize,
    blocks: usize,
    frames: usize,
}

impl RingGeometry {
    /// The ring asked for by `opts` (already checked by `check_options`),
    /// or `None` for no ring. A block is the slot rounded up to whole pages
    /// (the kernel allocates blocks separately, and small ones never fail
    /// for want of contiguous memory); the slot count is rounded up to whole
    /// blocks.
    fn new(opts: &PortOptions, page_size: usize) -> Option<RingGeometry> {
        if opts.rx_ring_frames == 0 || opts.rx_ring_frame_size == 0 || page_size == 0 {
            return None;
        }
        let frame_size = opts.rx_ring_frame_size;
        let block_size = frame_size.div_ceil(page_size) * page_size;
        let frames_per_block = block_size / frame_size;
        let blocks = opts.rx_ring_frames.div_ceil(frames_per_block);
        Some(RingGeometry {
            frame_size,
            frames_per_block,
            block_size,
            blocks,
            frames: blocks * frames_per_block,
        })
    }

    /// Bytes of the mapping.
    fn map_len(&self) -> usize {
        self.blocks * self.block_size
    }

    /// Where slot `index` (< `frames`) starts in the mapping: slots do not
    /// cross blocks.
    fn offset(&self, index: usize) -> usize {
        (index / self.frames_per_block) * self.block_size
            + (index % self.frames_per_block) * self.frame_size
    }
}

/// The mapped `TPACKET_V2` receive ring and the next slot to read.
///
/// Ownership of a slot alternates with its status word: `TP_STATUS_KERNEL`
/// slots belong to the kernel, which writes the frame and then the status;
/// `TP_STATUS_USER` slots belong to us until we store `TP_STATUS_KERNEL`.
/// The status is loaded with `Acquire` (pairing with the kernel's barrier
/// before it sets the status, so the frame's bytes are seen) and stored with
/// `Release` (so our reads of the slot are done before the kernel may write
/// it again). The kernel fills slots strictly in order, so reading them in
/// order from slot 0 follows it.
struct RxRing {
    base: NonNull<u8>,
    geometry: RingGeometry,
    head: usize,
}

// SAFETY: the mapping is owned by this value alone: its address is never
// handed out except as borrows of the value, so moving the value to another
// thread moves every access to the mapping with it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Asks the kernel for the ring and maps it.
    fn map(fd: &OwnedFd, geometry: RingGeometry) -> Result<RxRing, (&'static str, Errno)> {
        let c = |n: usize| libc::c_uint::try_from(n).map_err(|_| ("PACKET_RX_RING", Errno::EINVAL));
        let req = libc::tpacket_req {
            tp_block_size: c(geometry.block_size)?,
            tp_block_nr: c(geometry.blocks)?,
            tp_frame_size: c(geometry.frame_size)?,
            tp_frame_nr: c(geometry.frames)?,
        };
        set_packet_opt(fd, libc::PACKET_RX_RING, &req)
            .map_err(|e| ("setsockopt(PACKET_RX_RING)", e))?;
        let len = geometry.map_len();
        // SAFETY: a new shared mapping chosen by the kernel (no address
        // given), of exactly the ring's size as packet_mmap() requires; it
        // aliases no Rust object. The result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(("mmap(PACKET_RX_RING)", Errno::last()));
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or(("mmap(PACKET_RX_RING)", Errno::EFAULT))?;
        Ok(RxRing {
            base,
            geometry,
            head: 0,
        })
    }

    /// The status word of the head slot.
    fn head_status(&self) -> &AtomicU32 {
        let offset = self.geometry.offset(self.head);
        // SAFETY: `head` < `frames`, so the slot lies inside the mapping
        // (offset + frame_size ≤ map_len), which lives as long as `self`.
        // The mapping is page-aligned and slots start at multiples of 16
        // bytes, so the word is aligned for a u32. The kernel and this code
        // access the word only atomically (READ_ONCE/WRITE_ONCE there,
        // atomics here); the non-atomic `&[u8]` that `ready` returns covers
        // it only while the slot is ours, when neither side writes it.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    /// The head slot, whole (header, frame), if the kernel has handed it
    /// over. It stays ours until [`RxRing::release`], which needs `&mut self`
    /// and so cannot be called while the slice is alive.
    fn ready(&self) -> Option<&[u8]> {
        let status = self.head_status().load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let offset = self.geometry.offset(self.head);
        // SAFETY: the slot is inside the mapping (see `head_status`) and the
        // kernel does not write a TP_STATUS_USER slot: until `release` stores
        // TP_STATUS_KERNEL (which the borrow of `self` holds off), its bytes
        // do not change. The acquire load above orders our reads after the
        // kernel's writes of the frame.
        Some(unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(offset), self.geometry.frame_size)
        })
    }

    /// Gives the head slot back to the kernel and moves to the next.
    fn release(&mut self) {
        self.head_status()
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.head += 1;
        if self.head >= self.geometry.frames {
            self.head = 0;
        }
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: `base` and the length are those of the mapping made in
        // `map`, unmapped only here; no borrow of it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.geometry.map_len());
        }
    }
}

/// The system's page size (4096 if it cannot be read).
fn page_size() -> usize {
    // SAFETY: sysconf takes an integer and reads no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
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

impl RxSlots {
    /// One `recvmmsg` into the first `n` slots; fills `meta` for the slots
    /// written and returns how many.
    ///
    /// nix's `recvmmsg` is not used: it does not reset `msg_controllen` and
    /// `msg_namelen` between calls, and it copies every control message it
    /// does not know (`PACKET_AUXDATA` is one) into a new `Vec`, an
    /// allocation per frame. The headers here are rebuilt on the stack for
    /// each call, pointing into buffers that live in `self`.
    fn receive(&mut self, fd: RawFd, n: usize) -> Result<usize, Errno> {
        let n = n
            .min(MAX_BATCH)
            .min(self.frames.len())
            .min(self.vnet.len())
            .min(self.addrs.len())
            .min(self.ctrl.len())
            .min(self.meta.len());
        // Only the headers used are initialised: zeroing all MAX_BATCH of
        // them (24 KiB) cost more than the call itself when a read returns a
        // frame or two.
        let mut iovs = [const { MaybeUninit::<[libc::iovec; 2]>::uninit() }; MAX_BATCH];
        let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_BATCH];
        let slots = iovs
            .iter_mut()
            .zip(hdrs.iter_mut())
            .zip(self.frames.iter_mut())
            .zip(self.vnet.iter_mut())
            .zip(self.addrs.iter_mut().zip(self.ctrl.iter_mut()))
            .take(n);
        let mut filled = 0;
        for ((((iov, hdr), frame), vnet), (addr, ctrl)) in slots {
            let iov = iov.write([
                libc::iovec {
                    iov_base: vnet.as_mut_ptr().cast(),
                    iov_len: vnet.len(),
                },
                libc::iovec {
                    iov_base: frame.as_mut_ptr().cast(),
                    iov_len: frame.len(),
                },
            ]);
            let mut h = empty_mmsghdr();
            let m = &mut h.msg_hdr;
            m.msg_name = (addr as *mut libc::sockaddr_ll).cast();
            m.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            m.msg_iov = iov.as_mut_ptr();
            m.msg_iovlen = 2;
            m.msg_control = ctrl.0.as_mut_ptr().cast();
            m.msg_controllen = size_of::<CmsgSpace>() as _;
            m.msg_flags = 0;
            hdr.write(h);
            filled += 1;
        }
        // MSG_TRUNC: a packet socket then returns the frame's full length,
        // so a frame longer than its slot is recognised, not delivered cut.
        let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC;
        // SAFETY: the first `filled` headers were written above (MaybeUninit
        // has the layout of its content, so the array is one of mmsghdr) and
        // point at iovecs, addresses and control buffers that stay alive and
        // unmoved for the call (`iovs`, `hdrs` are locals; the others are
        // owned by `self`, borrowed mutably here), with lengths equal to
        // their sizes; `filled` ≤ MAX_BATCH = hdrs.len(). The kernel reads
        // and writes only the first `filled` headers and inside those bounds.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                filled as libc::c_uint,
                // c_int in glibc, c_uint in musl: the same bits.
                flags as _,
                std::ptr::null_mut(),
            )
        };
        let got = usize::try_from(Errno::result(r)?).unwrap_or(0).min(filled);
        for ((hdr, addr), meta) in hdrs
            .iter()
            .zip(self.addrs.iter())
            .zip(self.meta.iter_mut())
            .take(got)
        {
            // SAFETY: `got` ≤ `filled`: this header was initialised above
            // (and then updated by the kernel with valid values).
            let hdr = unsafe { hdr.assume_init_ref() };
            *meta = RxMeta {
                len: hdr.msg_len as usize,
                truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                pkttype: addr.sll_pkttype,
                aux: auxdata(&hdr.msg_hdr),
            };
        }
        Ok(got)
    }
}

/// The `PACKET_AUXDATA` control message of a received message, if any:
/// `(tp_status, tp_vlan_tci, tp_vlan_tpid)`.
fn auxdata(m: &libc::msghdr) -> Option<(u32, u16, u16)> {
    if m.msg_flags & libc::MSG_CTRUNC != 0 || m.msg_control.is_null() {
        return None;
    }
    let want = size_of::<libc::tpacket_auxdata>();
    // SAFETY: `m` is a header the kernel just filled: msg_control points at a
    // CmsgSpace owned by the port and msg_controllen (≤ its size; the kernel
    // never grows it) says how much of it holds control messages.
    // CMSG_FIRSTHDR/CMSG_NXTHDR stay within that length and return null at its
    // end; the data of a message is read only when its cmsg_len covers a whole
    // tpacket_auxdata, unaligned because the buffer promises no alignment for
    // the payload type.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::SOL_PACKET
                && h.cmsg_type == libc::PACKET_AUXDATA
                && h.cmsg_len as usize >= libc::CMSG_LEN(want as libc::c_uint) as usize
            {
                let aux: libc::tpacket_auxdata =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Some((aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid));
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

/// One `sendmmsg` of `frames`, each preceded by its virtio_net_hdr in
/// `headers`. Returns how many the kernel took.
///
/// nix's `sendmmsg` is not used: the count it returns can only be read by
/// iterating its results, which reads address slots that a send never fills.
fn send_mmsg(
    fd: RawFd,
    frames: &[TxFrame<'_>],
    headers: &[[u8; VnetHdr::LEN]; MAX_BATCH],
) -> Result<usize, Errno> {
    // Only the headers used are initialised (see RxSlots::receive).
    let mut iovs = [const { MaybeUninit::<[libc::iovec; 2]>::uninit() }; MAX_BATCH];
    let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_BATCH];
    let mut n = 0;
    for (((iov, hdr), frame), header) in iovs
        .iter_mut()
        .zip(hdrs.iter_mut())
        .zip(frames)
        .zip(headers.iter())
    {
        // The kernel only reads through these pointers; iovec has no const
        // variant.
        let iov = iov.write([
            libc::iovec {
                iov_base: header.as_ptr().cast_mut().cast(),
                iov_len: header.len(),
            },
            libc::iovec {
                iov_base: frame.data.as_ptr().cast_mut().cast(),
                iov_len: frame.data.len(),
            },
        ]);
        // No address: the socket is bound, so frames go to its interface.
        let mut h = empty_mmsghdr();
        h.msg_hdr.msg_iov = iov.as_mut_ptr();
        h.msg_hdr.msg_iovlen = 2;
        hdr.write(h);
        n += 1;
    }
    // SAFETY: the first `n` headers were written above (MaybeUninit has the
    // layout of its content) and point at iovecs (locals) that point at
    // header bytes and frame data borrowed for the whole call, with their
    // exact lengths; the kernel reads them and writes only msg_len in the
    // first `n` headers.
    let r = unsafe {
        libc::sendmmsg(
            fd,
            hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
            n as libc::c_uint,
            // c_int in glibc, c_uint in musl: the same bits.
            libc::MSG_DONTWAIT as _,
        )
    };
    let sent = usize::try_from(Errno::result(r)?).unwrap_or(0).min(n);
    if sent == 0 && n > 0 {
        // Not expected (an error is returned instead); never loop on it.
        return Err(Errno::EAGAIN);
    }
    Ok(sent)
}

/// Does what a NIC does for a frame whose L4 checksum was left unfinished: the
/// field at `start + offset` already holds the sum of the pseudo-header, so
/// the ones' complement of the sum of everything from `start` to the end is
/// the checksum. False (and the frame untouched) when the offsets do not fit.
fn finish_checksum(frame: &mut [u8], start: u16, offset: u16) -> bool {
    let start = usize::from(start);
    let field = start + usize::from(offset);
    let (Some(covered), true) = (frame.get(start..), field + 2 <= frame.len()) else {
        return false;
    };
    let sum = ones_complement_sum(covered);
    // 0x0000 and 0xffff are the same number in ones' complement; UDP reserves
    // 0x0000 for "no checksum", so the other spelling is used.
    let check = match !sum {
        0 => 0xffff,
        c => c,
    };
    frame[field..field + 2].copy_from_slice(&check.to_be_bytes());
    true
}

/// The Internet checksum's ones' complement sum of `bytes` (RFC 1071), an odd
/// last byte padded with zero.
fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut chunks = bytes.chunks_exact(2);
    let mut acc: u64 = chunks
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a C struct of integers and raw pointers, for which
    // all-zero bytes are a valid value (null pointers, zero lengths).
    unsafe { std::mem::zeroed() }
}

fn empty_sockaddr_ll() -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

/// `setsockopt(fd, SOL_PACKET, name, val)`: nix has no wrappers for the
/// packet socket options.
fn set_packet_opt<T>(fd: &OwnedFd, name: libc::c_int, val: &T) -> Result<(), Errno> {
    // SAFETY: `val` is a live, initialised T and the length given is its
    // size; the kernel copies that many bytes and keeps no pointer.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    Errno::result(r).map(drop)
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

fn check_name(ifname: &str) -> Result<(), PortError> {
    let why = if ifname.is_empty() {
        Some("empty")
    } else if ifname.len() >= libc::IFNAMSIZ {
        Some("longer than 15 bytes (IFNAMSIZ)")
    } else if ifname
        .bytes()
        .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
    {
        Some("contains NUL, '/' or white space")
    } else if ifname == "." || ifname == ".." {
        Some("'.' and '..' are not interface names")
    } else {
        None
    };
    match why {
        Some(why) => Err(PortError::BadName {
            ifname: ifname.to_owned(),
            why,
        }),
        None => Ok(()),
    }
}

fn check_options(opts: &PortOptions) -> Result<(), PortError> {
    if !(1..=MAX_BATCH).contains(&opts.batch) {
        return Err(PortError::BadOption {
            name: "batch",
            value: opts.batch,
            allowed: "1 to 256 frames",
        });
    }
    let (lo, hi) = FRAME_CAPACITY_RANGE;
    if !(lo..=hi).contains(&opts.frame_capacity) {
        return Err(PortError::BadOption {
            name: "frame_capacity",
            value: opts.frame_capacity,
            allowed: "64 bytes to 1 MiB",
        });
    }
    if opts.rx_ring_frames > 0 {
        let (lo, hi) = RING_FRAME_SIZE_RANGE;
        let size = opts.rx_ring_frame_size;
        if !(lo..=hi).contains(&size) || !size.is_multiple_of(16) {
            return Err(PortError::BadOption {
                name: "rx_ring_frame_size",
                value: size,
                allowed: "a multiple of 16 from 256 bytes to 256 KiB",
            });
        }
        if opts.rx_ring_frames > RING_MAX_FRAMES
            || opts.rx_ring_frames.saturating_mul(size) > RING_MAX_BYTES
        {
            return Err(PortError::BadOption {
                name: "rx_ring_frames",
                value: opts.rx_ring_frames,
                allowed: "0 (no ring) to 1048576 slots, and at most 1 GiB of ring",
            });
        }
    }
    if opts.socket_buffer > i32::MAX as usize / 2 {
        return Err(PortError::BadOption {
            name: "socket_buffer",
            value: opts.socket_buffer,
            allowed: "0 (kernel default) to 1 GiB",
        });
    }
    Ok(())
}

impl From<PortError> for io::Error {
    fn from(e: PortError) -> io::Error {
        let kind = match &e {
            PortError::WouldBlock { .. } => io::ErrorKind::WouldBlock,
            PortError::NoSuchInterface { .. } => io::ErrorKind::NotFound,
            PortError::BadName { .. } | PortError::BadOption { .. } => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    /// A super-packet's buffer given back to the pool is not reused whole
    /// for a small frame; one that fits is reused as it is.
    #[test]
    fn a_large_pooled_buffer_is_cut_down_for_a_small_frame() {
        let mut pool = vec![Vec::with_capacity(65536)];
        let small = super::take_buffer(&mut pool, 68);
        assert!(
            small.capacity() <= super::REUSE_SLACK,
            "{}",
            small.capacity()
        );
        assert!(pool.is_empty());
        let mut pool = vec![Vec::with_capacity(65536)];
        let big = super::take_buffer(&mut pool, 60_000);
        assert_eq!(
            big.capacity(),
            65536,
            "a buffer that fits is reused as it is"
        );
        let mut pool = vec![Vec::with_capacity(1600)];
        assert_eq!(super::take_buffer(&mut pool, 68).capacity(), 1600);
        assert_eq!(
            super::take_buffer(&mut pool, 68).capacity(),
            0,
            "an empty pool gives a new one"
        );
    }

    use super::*;

    /// A TCPv4 super-packet as the kernel hands it over on x86 (little
    /// endian): NEEDS_CSUM, TCPV4, hdr_len 66, gso_size 1448, csum_start 34
    /// (14 Ethernet + 20 IPv4), csum_offset 16 (TCP checksum field).
    #[cfg(target_endian = "little")]
    const TSO_HDR: [u8; 10] = [0x01, 0x01, 66, 0, 0xa8, 0x05, 34, 0, 16, 0];

    fn tso() -> VnetHdr {
        VnetHdr {
            flags: VnetHdr::F_NEEDS_CSUM,
            gso_type: VnetHdr::GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        }
    }

    /// An Ethernet + IPv4 + TCP (32-byte header, data offset 8) frame with
    /// `payload` bytes after the headers.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 66 + payload];
        f[12] = 0x08;
        f[14] = 0x45;
        f[34 + 12] = 8 << 4;
        f
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn parses_kernel_bytes() {
        assert_eq!(VnetHdr::parse(&TSO_HDR), Ok(tso()));
        assert_eq!(tso().to_bytes(), TSO_HDR);
        // Extra bytes after the header (the frame) are not the header's.
        let mut longer = TSO_HDR.to_vec();
        longer.extend_from_slice(&[0xff; 20]);
        assert_eq!(VnetHdr::parse(&longer), Ok(tso()));
    }

    #[test]
    fn short_input_is_an_error_not_a_panic() {
        for n in 0..VnetHdr::LEN {
            let bytes = vec![0xffu8; n];
            assert_eq!(
                VnetHdr::parse(&bytes),
                Err(VnetHdrError { needed: 10, got: n })
            );
        }
    }

    #[test]
    fn every_header_round_trips() {
        for seed in 0u32..2000 {
            let mut b = [0u8; 10];
            for (i, x) in b.iter_mut().enumerate() {
                *x = (seed.wrapping_mul(2_654_435_761).rotate_left(i as u32 * 3) >> 7) as u8;
            }
            let h = VnetHdr::parse(&b).expect("10 bytes always parse");
            assert_eq!(h.to_bytes(), b);
            // No input makes these panic, whatever the frame length.
            for len in [0usize, 1, 9, 60, 1514, 65_535, usize::MAX / 2] {
                let w = h.wire_len(len);
                assert!(w >= len as u64);
                assert!(h.segments(len) >= 1);
            }
            let _ = h.wire_len_of(&tcp_frame(100));
            let _ = h.wire_len_of(&[]);
        }
    }

    #[test]
    fn wire_len_adds_headers_per_extra_segment() {
        let h = tso();
        // 3 full segments: 3 × 1448 payload, headers repeated twice more.
        let len = 66 + 3 * 1448;
        assert_eq!(h.segments(len), 3);
        assert_eq!(h.wire_len(len), (len + 2 * 66) as u64);
        // One byte more is a fourth, short, segment.
        assert_eq!(h.segments(len + 1), 4);
        assert_eq!(h.wire_len(len + 1), (len + 1 + 3 * 66) as u64);
        // A payload that fits one segment is just the frame.
        assert_eq!(h.wire_len(66 + 1000), 1066);
        // 64 KiB super-packet: ceil(65470 / 1448) = 46 segments.
        let big = 65_536;
        assert_eq!(h.segments(big), 46);
        assert_eq!(h.wire_len(big), (big + 45 * 66) as u64);
    }

    #[test]
    fn without_gso_the_frame_is_the_frame() {
        let plain = VnetHdr::default();
        assert!(!plain.is_gso());
        assert_eq!(plain.wire_len(1514), 1514);
        let csum_only = VnetHdr {
            flags: VnetHdr::F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 6,
            ..VnetHdr::default()
        };
        assert!(csum_only.needs_csum() && !csum_only.is_gso());
        assert_eq!(csum_only.wire_len(1000), 1000);
        assert_eq!(csum_only.headers_len(&tcp_frame(10)), None);
    }

    #[test]
    fn malformed_headers_fall_back_to_the_frame_length() {
        // gso_size 0 with a GSO type: not GSO.
        let zero = VnetHdr {
            gso_size: 0,
            ..tso()
        };
        assert!(!zero.is_gso());
        assert_eq!(zero.segments(10_000), 1);
        assert_eq!(zero.wire_len(10_000), 10_000);
        assert_eq!(zero.wire_len_of(&tcp_frame(9000)), 9066);
        // hdr_len longer than the frame.
        let long = VnetHdr {
            hdr_len: 4000,
            ..tso()
        };
        assert_eq!(long.wire_len(1500), 1500);
        assert_eq!(long.segments(4000), 1);
        // hdr_len 0: every byte is payload, nothing repeated.
        let none = VnetHdr {
            hdr_len: 0,
            ..tso()
        };
        assert_eq!(none.segments(2896), 2);
        assert_eq!(none.wire_len(2896), 2896);
        // Unknown GSO type: counted by its hdr_len, never read from the frame.
        let odd = VnetHdr {
            gso_type: 0x42,
            ..tso()
        };
        assert_eq!(odd.headers_len(&tcp_frame(5000)), None);
        assert_eq!(odd.wire_len(66 + 2 * 1448), (66 + 2 * 1448 + 66) as u64);
        // gso_size 1 on a 64 KiB frame: many segments, no overflow.
        let tiny = VnetHdr {
            gso_size: 1,
            ..tso()
        };
        assert_eq!(tiny.segments(65_536), 65_470);
        assert_eq!(tiny.wire_len(65_536), 65_536 + 65_469 * 66);
        // The ECN bit does not change the type.
        let ecn = VnetHdr {
            gso_type: VnetHdr::GSO_TCPV4 | VnetHdr::GSO_ECN,
            ..tso()
        };
        assert_eq!(ecn.gso_kind(), VnetHdr::GSO_TCPV4);
        assert_eq!(ecn.wire_len(66 + 2 * 1448), tso().wire_len(66 + 2 * 1448));
    }

    #[test]
    fn header_length_is_read_from_the_frame_when_it_can_be() {
        // The kernel's hdr_len is the linear part: here 200 bytes, of which
        // 134 are payload. The TCP header says the headers are 66 bytes.
        let h = VnetHdr {
            hdr_len: 200,
            ..tso()
        };
        let frame = tcp_frame(2 * 1448);
        assert_eq!(h.headers_len(&frame), Some(66));
        assert_eq!(h.wire_len_of(&frame), (frame.len() + 66) as u64);
        // Data offset below 5 words is not TCP: fall back to hdr_len.
        let mut bad = frame.clone();
        bad[34 + 12] = 2 << 4;
        assert_eq!(h.headers_len(&bad), None);
        assert_eq!(h.wire_len_of(&bad), h.wire_len(bad.len()));
        // csum_start past the end of the frame.
        let past = VnetHdr {
            csum_start: 60_000,
            ..tso()
        };
        assert_eq!(past.headers_len(&frame), None);
        assert_eq!(past.wire_len_of(&frame), past.wire_len(frame.len()));
        // UDP segmentation: 8-byte UDP header after csum_start.
        let uso = VnetHdr {
            gso_type: VnetHdr::GSO_UDP_L4,
            hdr_len: 42,
            gso_size: 1000,
            csum_start: 34,
            csum_offset: 6,
            flags: VnetHdr::F_NEEDS_CSUM,
        };
        let dgram = vec![0u8; 42 + 2500];
        assert_eq!(uso.headers_len(&dgram), Some(42));
        assert_eq!(uso.wire_len_of(&dgram), (42 + 2500 + 2 * 42) as u64);
    }

    #[test]
    fn a_segment_is_the_headers_and_gso_size_bytes() {
        // hdr_len says 200, the TCP header 66: segments of 66 + 1448.
        let h = VnetHdr {
            hdr_len: 200,
            ..tso()
        };
        assert_eq!(h.segment_len(&tcp_frame(3 * 1448)), Some(66 + 1448));
        // A super-packet shorter than one full segment is its own length.
        assert_eq!(h.segment_len(&tcp_frame(500)), Some(66 + 500));
        // Not GSO: no segments.
        let plain = VnetHdr {
            gso_type: VnetHdr::GSO_NONE,
            ..tso()
        };
        assert_eq!(plain.segment_len(&tcp_frame(1448)), None);
        // The frame does not say: hdr_len is the guess.
        let past = VnetHdr {
            csum_start: 60_000,
            hdr_len: 54,
            ..tso()
        };
        assert_eq!(past.segment_len(&tcp_frame(3 * 1448)), Some(54 + 1448));
    }

    #[test]
    fn ones_complement_sum_matches_rfc_1071() {
        // The worked example of RFC 1071 section 3.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&bytes), 0xddf2);
        // An odd byte counts as the high half of a last word.
        assert_eq!(ones_complement_sum(&[0x12]), 0x1200);
        assert_eq!(ones_complement_sum(&[]), 0);
        assert_eq!(ones_complement_sum(&[0xff; 4096]), 0xffff);
    }

    /// An IPv4/UDP frame as a stack hands it to a device with checksum
    /// offload: the UDP checksum field holds the pseudo-header sum only.
    fn udp_frame_with_partial_checksum(payload: &[u8]) -> Vec<u8> {
        let udp_len = 8 + payload.len() as u16;
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 77, 0, 1, 10, 77, 0, 2]);
        f.extend_from_slice(&[0x9c, 0x40, 0x1e, 0x61]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        let mut pseudo = vec![10, 77, 0, 1, 10, 77, 0, 2, 0, 17];
        pseudo.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&ones_complement_sum(&pseudo).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn plain_frames_get_their_checksum_finished() {
        let mut f = udp_frame_with_partial_checksum(b"dummynet bridge datagram 0");
        assert!(finish_checksum(&mut f, 34, 6));
        // A receiver's check: pseudo-header plus segment sums to all ones.
        let mut check = vec![10, 77, 0, 1, 10, 77, 0, 2, 0, 17];
        check.extend_from_slice(&f[38..40]);
        check.extend_from_slice(&f[34..]);
        assert_eq!(ones_complement_sum(&check), 0xffff);
        // Odd payload length.
        let mut odd = udp_frame_with_partial_checksum(b"odd");
        assert!(finish_checksum(&mut odd, 34, 6));
        let mut check = vec![10, 77, 0, 1, 10, 77, 0, 2, 0, 17];
        check.extend_from_slice(&odd[38..40]);
        check.extend_from_slice(&odd[34..]);
        assert_eq!(ones_complement_sum(&check), 0xffff);
    }

    #[test]
    fn checksum_offsets_past_the_end_leave_the_frame_alone() {
        let f = udp_frame_with_partial_checksum(b"x");
        for (start, offset) in [(34, 6000), (60_000, 0), (u16::MAX, u16::MAX), (40, 3)] {
            let mut g = f.clone();
            assert!(!finish_checksum(&mut g, start, offset), "{start}+{offset}");
            assert_eq!(g, f);
        }
        assert!(!finish_checksum(&mut [], 0, 0));
    }

    #[test]
    fn vlan_reinsertion_moves_offsets() {
        let h = tso().shifted_by_vlan_tag();
        assert_eq!((h.csum_start, h.hdr_len), (38, 70));
        let plain = VnetHdr::default().shifted_by_vlan_tag();
        assert_eq!(plain, VnetHdr::default());
        let edge = VnetHdr {
            hdr_len: u16::MAX,
            csum_start: u16::MAX,
            ..tso()
        }
        .shifted_by_vlan_tag();
        assert_eq!((edge.csum_start, edge.hdr_len), (u16::MAX, u16::MAX));
    }

    #[test]
    fn a_port_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<Port>();
        send::<PortError>();
        send::<RxFrame>();
    }

    #[test]
    fn options_and_names_are_checked_before_any_syscall() {
        let bad_batch = PortOptions {
            batch: 0,
            ..PortOptions::default()
        };
        assert!(matches!(
            Port::open("lo", bad_batch),
            Err(PortError::BadOption { name: "batch", .. })
        ));
        let too_many = PortOptions {
            batch: MAX_BATCH + 1,
            ..PortOptions::default()
        };
        assert!(matches!(
            Port::open("lo", too_many),
            Err(PortError::BadOption { name: "batch", .. })
        ));
        let tiny = PortOptions {
            frame_capacity: 10,
            ..PortOptions::default()
        };
        assert!(matches!(
            Port::open("lo", tiny),
            Err(PortError::BadOption {
                name: "frame_capacity",
                ..
            })
        ));
        for name in ["", "a-name-that-is-too-long", "a/b", "a b", "x\0y", ".."] {
            let r = Port::open(name, PortOptions::default());
            assert!(
                matches!(r, Err(PortError::BadName { .. })),
                "{name:?}: {r:?}"
            );
        }
    }

    #[test]
    fn ring_options_are_checked_before_any_syscall() {
        for (frames, size) in [(16, 100), (16, 2050), (16, 512 * 1024), (1 << 21, 2048)] {
            let opts = PortOptions {
                rx_ring_frames: frames,
                rx_ring_frame_size: size,
                ..PortOptions::default()
            };
            assert!(
                matches!(Port::open("lo", opts), Err(PortError::BadOption { .. })),
                "{frames} × {size}"
            );
        }
        // No ring: the slot size is not looked at.
        let off = PortOptions {
            rx_ring_frames: 0,
            rx_ring_frame_size: 1,
            ..PortOptions::default()
        };
        assert_eq!(RingGeometry::new(&off, 4096), None);
        assert!(check_options(&off).is_ok());
    }

    #[test]
    fn ring_geometry_fills_whole_pages() {
        let geometry = |frames, size, page| {
            RingGeometry::new(
                &PortOptions {
                    rx_ring_frames: frames,
                    rx_ring_frame_size: size,
                    ..PortOptions::default()
                },
                page,
            )
            .expect("a ring")
        };
        let g = geometry(DEFAULT_RX_RING_FRAMES, DEFAULT_RX_RING_FRAME_SIZE, 4096);
        assert_eq!(
            (g.block_size, g.frames_per_block, g.blocks),
            (4096, 2, 2048)
        );
        assert_eq!((g.frames, g.map_len()), (4096, 8 << 20));
        // An odd count is rounded up to whole blocks.
        assert_eq!(geometry(5, 2048, 4096).frames, 6);
        // Slots never cross blocks: a 2064-byte slot takes a page of its own,
        // and a slot larger than a page takes whole pages.
        let g = geometry(3, 2064, 4096);
        assert_eq!((g.block_size, g.frames_per_block, g.frames), (4096, 1, 3));
        assert_eq!(g.offset(2), 8192);
        let g = geometry(4, 9216, 4096);
        assert_eq!((g.block_size, g.frames_per_block), (12288, 1));
        // 64 KiB pages (arm64): 32 slots of 2 KiB a block.
        let g = geometry(100, 2048, 65536);
        assert_eq!((g.frames_per_block, g.blocks, g.frames), (32, 4, 128));
        assert_eq!(g.offset(33), 65536 + 2048);
        // Every slot lies inside the mapping.
        for g in [geometry(7, 2064, 4096), geometry(100, 2048, 65536)] {
            for i in 0..g.frames {
                assert!(g.offset(i) + g.frame_size <= g.map_len());
            }
        }
    }

    /// A 2 KiB ring slot as tpacket_rcv writes it for an Ethernet frame on a
    /// PACKET_VNET_HDR socket: header, sockaddr_ll, the virtio_net_hdr at
    /// 66 and the frame at tp_mac 76.
    fn slot(status: u32, frame: &[u8], vnet: VnetHdr) -> Vec<u8> {
        let mut s = vec![0u8; 2048];
        let mac = 76usize;
        s[0..4].copy_from_slice(&status.to_ne_bytes());
        s[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        let snap = frame.len().min(2048 - mac);
        s[8..12].copy_from_slice(&(snap as u32).to_ne_bytes());
        s[12..14].copy_from_slice(&(mac as u16).to_ne_bytes());
        s[14..16].copy_from_slice(&(mac as u16 + 14).to_ne_bytes());
        s[RING_SLL_OFFSET + 10] = libc::PACKET_OTHERHOST;
        s[mac - 10..mac].copy_from_slice(&vnet.to_bytes());
        s[mac..mac + snap].copy_from_slice(&frame[..snap]);
        s
    }

    fn set_u16(s: &mut [u8], at: usize, v: u16) {
        s[at..at + 2].copy_from_slice(&v.to_ne_bytes());
    }

    fn set_u32(s: &mut [u8], at: usize, v: u32) {
        s[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    const HOW: ReadSlot = ReadSlot {
        skip_outgoing: true,
        frame_capacity: DEFAULT_FRAME_CAPACITY,
        with_vnet: true,
    };

    fn read(s: &[u8], how: ReadSlot) -> (SlotOutcome, PortStats) {
        let mut stats = PortStats::default();
        let outcome = read_slot(s, how, &mut Vec::new(), &mut stats);
        (outcome, stats)
    }

    #[test]
    fn slot_layout_matches_the_kernel_headers() {
        assert_eq!(RING_SLL_OFFSET, 32);
        assert_eq!(RING_HDR_LEN, libc::TPACKET2_HDRLEN);
        assert_eq!(RING_HDR_LEN, 52);
    }

    #[test]
    fn a_ring_slot_gives_its_frame_and_header() {
        let frame = tcp_frame(100);
        let (outcome, stats) = read(&slot(libc::TP_STATUS_USER, &frame, tso()), HOW);
        let SlotOutcome::Frame(f) = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(f.data, frame);
        assert_eq!(f.vnet, Some(tso()));
        assert_eq!((stats.rx_frames, stats.rx_gso_frames), (1, 1));
    }

    #[test]
    fn a_ring_slot_says_when_the_kernel_received_its_frame() {
        let frame = tcp_frame(10);
        let mut s = slot(libc::TP_STATUS_USER, &frame, VnetHdr::default());
        set_u32(&mut s, 16, 1_764_028_800); // tp_sec
        set_u32(&mut s, 20, 123_456_789); // tp_nsec
        let (SlotOutcome::Frame(f), _) = read(&s, HOW) else {
            panic!("no frame");
        };
        assert_eq!(f.stamp_ns, 1_764_028_800_123_456_789);
        // A frame waiting whole on the queue keeps its slot's time.
        s[0..4].copy_from_slice(&(libc::TP_STATUS_USER | libc::TP_STATUS_COPY).to_ne_bytes());
        let (outcome, _) = read(&s, HOW);
        assert!(matches!(
            outcome,
            SlotOutcome::Copied {
                outgoing: false,
                stamp_ns: 1_764_028_800_123_456_789
            }
        ));
    }

    #[test]
    fn a_ring_slot_gets_its_vlan_tag_back() {
        let frame = tcp_frame(10);
        let status =
            libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID | libc::TP_STATUS_VLAN_TPID_VALID;
        let mut s = slot(status, &frame, VnetHdr::default());
        set_u16(&mut s, 24, 0xa00a);
        set_u16(&mut s, 26, 0x88a8);
        let (SlotOutcome::Frame(f), stats) = read(&s, HOW) else {
            panic!("no frame");
        };
        assert_eq!(&f.data[..12], &frame[..12]);
        assert_eq!(&f.data[12..16], &[0x88, 0xa8, 0xa0, 0x0a]);
        assert_eq!(&f.data[16..], &frame[12..]);
        assert_eq!(stats.rx_vlan_restored, 1);
    }

    #[test]
    fn ring_slots_to_skip_are_counted() {
        let frame = tcp_frame(100);
        // Outgoing, on a kernel that does not filter them.
        let mut out = slot(libc::TP_STATUS_USER, &frame, tso());
        out[RING_SLL_OFFSET + 10] = libc::PACKET_OUTGOING;
        let (o, st) = read(&out, HOW);
        assert!(matches!(o, SlotOutcome::Skipped) && st.rx_outgoing_skipped == 1);
        let kernel_filters = ReadSlot {
            skip_outgoing: false,
            ..HOW
        };
        assert!(matches!(
            read(&out, kernel_filters).0,
            SlotOutcome::Frame(_)
        ));
        // Cut by the slot with no copy queued.
        let big = tcp_frame(3000);
        let (o, st) = read(&slot(libc::TP_STATUS_USER, &big, tso()), HOW);
        assert!(matches!(o, SlotOutcome::Skipped) && st.rx_truncated == 1);
        // The same with TP_STATUS_COPY: the frame is on the queue.
        let copied = slot(libc::TP_STATUS_USER | libc::TP_STATUS_COPY, &big, tso());
        assert!(matches!(
            read(&copied, HOW).0,
            SlotOutcome::Copied {
                outgoing: false,
                ..
            }
        ));
        out[0..4].copy_from_slice(&(libc::TP_STATUS_USER | libc::TP_STATUS_COPY).to_ne_bytes());
        assert!(matches!(
            read(&out, HOW).0,
            SlotOutcome::Copied { outgoing: true, .. }
        ));
        // Longer than the caller's frame_capacity.
        let small = ReadSlot {
            frame_capacity: 64,
            ..HOW
        };
        let (o, st) = read(&slot(libc::TP_STATUS_USER, &frame, tso()), small);
        assert!(matches!(o, SlotOutcome::Skipped) && st.rx_truncated == 1);
    }

    #[test]
    fn ring_slot_offsets_are_checked_not_trusted() {
        let good = slot(libc::TP_STATUS_USER, &tcp_frame(100), tso());
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for mac in [0u16, 9, 10, 52, 61, 2040, 2048, 4000, u16::MAX] {
            let mut s = good.clone();
            set_u16(&mut s, 12, mac);
            cases.push(s);
        }
        for snaplen in [1973u32, 2048, 100_000, u32::MAX] {
            let mut s = good.clone();
            set_u32(&mut s, 8, snaplen);
            set_u32(&mut s, 4, snaplen);
            cases.push(s);
        }
        for (i, s) in cases.iter().enumerate() {
            let (o, st) = read(s, HOW);
            assert!(
                matches!(o, SlotOutcome::Skipped) && st.rx_malformed == 1,
                "case {i}: {o:?} {st:?}"
            );
        }
        // A slot shorter than its header, and every prefix of a good slot:
        // counted or read, never a panic.
        for n in 0..200 {
            let _ = read(&good[..n], HOW);
        }
        assert_eq!(read(&good[..40], HOW).1.rx_malformed, 1);
        // tp_len below snaplen (impossible from the kernel) is not a cut frame.
        let mut s = good.clone();
        set_u32(&mut s, 4, 10);
        assert!(matches!(read(&s, HOW).0, SlotOutcome::Frame(_)));
    }
}
