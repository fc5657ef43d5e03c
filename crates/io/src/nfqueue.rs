//! NFQUEUE host interception: the kernel hands the machine's own packets to
//! us, we give each one a verdict when the engine lets it go.
//!
//! [`HostQueue`] reads packets from one NFQUEUE number and sends verdicts.
//! Configuration and reception go through the `nfq` crate (pure-Rust
//! netlink, no libnetfilter_queue). Verdicts are encoded here and sent on
//! the same socket, because `nfq`'s own verdict call needs its `Message`,
//! and every live `Message` pins the whole ~70 KiB receive buffer it was
//! parsed from: holding ten thousand delayed packets would pin 700 MB.
//! A [`HostPacket`] instead owns a copy of exactly its bytes.
//!
//! The firewall rules that send traffic to the queue are
//! [`crate::firewall`]'s.
//!
//! # Network namespaces
//!
//! Netfilter tables, NFQUEUE instances and `/proc/net` are all per network
//! namespace. Everything here acts on the namespace of the *calling thread*:
//! the netlink socket is created there, and statistics are read from
//! `/proc/thread-self/net`, not `/proc/net` (which is a link to
//! `/proc/self/net`, the namespace of the main thread). [`HostQueue`]
//! remembers that namespace, so resolving interface names from another
//! thread still acts on it.
//!
//! # Order of operations
//!
//! Open the [`HostQueue`] first, then install the firewall's
//! [`Interception`](crate::firewall::Interception). While
//! `nfq` waits for the kernel to acknowledge a configuration message it
//! throws away any packet message that arrives in between, and those
//! packets would stay in the kernel without a verdict. [`HostQueue::open`]
//! protects itself anyway: once configured, it accepts, in one batch
//! verdict, every packet the kernel queued before that point (see
//! [`QueueCounters::accepted_at_open`]). What it cannot save is a packet
//! that reaches the queue between the bind and the next message, which
//! sets the copy mode: the kernel binds with copy mode "none" and drops
//! such a packet (it is not bypassed, and gets no id). Hence rules, even
//! stale ones, go in only after the queue is open.
//!
//! # Not done
//!
//! - Modifying the payload of a packet whose checksum is left to offload
//!   (`CHECKSUM_PARTIAL`, common with [`QueueOptions::gso`]) or of a
//!   truncated packet is refused: see [`HostPacket::payload_mut`].

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use nix::errno::Errno;
use nix::sched::{setns, CloneFlags};
use nix::sys::socket::{self, setsockopt, sockopt, MsgFlags, NetlinkAddr};

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// What can go wrong with the queue.
#[derive(Debug, thiserror::Error)]
pub enum NfqError {
    /// A netlink operation on the queue failed. `op` names it and the queue.
    #[error("NFQUEUE {queue}: {op}: {source}{hint}", hint = errno_hint(source))]
    Queue {
        /// The queue number.
        queue: u16,
        /// What was being done, e.g. "binding the queue".
        op: &'static str,
        /// The error from the socket or the kernel's netlink answer.
        source: io::Error,
    },
    /// The queue's socket descriptor could not be found after opening it
    /// (needed for poll and socket options; see [`HostQueue::open`]).
    #[error("NFQUEUE {queue}: cannot locate the netlink socket: {detail}")]
    SocketNotFound {
        /// The queue number.
        queue: u16,
        /// Which lookup step failed and why.
        detail: String,
    },
    /// A packet received on one queue was given to another queue's verdict.
    #[error("packet {id} came from NFQUEUE {packet_queue}, not from NFQUEUE {queue}")]
    WrongQueue {
        /// The packet id.
        id: u32,
        /// The queue the packet came from.
        packet_queue: u16,
        /// The queue asked to give the verdict.
        queue: u16,
    },
    /// The packet's payload may not be changed (see [`HostPacket::payload_mut`]).
    #[error("packet {id}: payload cannot be modified: {reason}")]
    Immutable {
        /// The packet id.
        id: u32,
        /// Why.
        reason: &'static str,
    },
    /// A replacement payload is too large for one netlink attribute.
    #[error("packet {id}: new payload of {len} bytes is too large (at most {max} bytes)")]
    PayloadTooLarge {
        /// The packet id.
        id: u32,
        /// Length given.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// Identifying the network namespace of the queue failed.
    #[error("network namespace: {op}: {source}")]
    Netns {
        /// What was being done.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// A short explanation for the errors the kernel gives most often when
/// binding or configuring a queue.
fn errno_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) => " (CAP_NET_ADMIN is needed in the network namespace)",
        Some(libc::EBUSY) => " (another socket is already bound to this queue number)",
        _ => "",
    }
}

// ---------------------------------------------------------------------------
// The namespace of the calling thread
// ---------------------------------------------------------------------------

/// The network namespace a thread was in, kept open so we can go back to it.
#[derive(Debug)]
pub(crate) struct ThreadNetns {
    file: File,
    dev: u64,
    ino: u64,
}

/// `/proc/thread-self`, not `/proc/self`: a thread that `setns`ed into a
/// namespace is not seen through `/proc/self`, which is the main thread.
const THREAD_NETNS: &str = "/proc/thread-self/ns/net";

impl ThreadNetns {
    pub(crate) fn current() -> io::Result<Self> {
        let file = File::open(THREAD_NETNS)?;
        let meta = file.metadata()?;
        Ok(Self {
            file,
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    fn is_current(&self) -> bool {
        std::fs::metadata(THREAD_NETNS)
            .map(|m| m.dev() == self.dev && m.ino() == self.ino)
            .unwrap_or(false)
    }

    /// Runs `f` in this namespace: right here if the calling thread is
    /// already in it, otherwise on a short-lived thread that enters it first
    /// (entering a network namespace only affects the thread that does it).
    pub(crate) fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        if self.is_current() {
            return Ok(f());
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                setns(self.file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("helper thread panicked")))
        })
    }
}

// ---------------------------------------------------------------------------
// Kernel statistics
// ---------------------------------------------------------------------------

/// One line of `/proc/net/netfilter/nfnetlink_queue`: what the kernel
/// counts for one bound queue in one network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueStats {
    /// Column 1: the queue number.
    pub queue: u16,
    /// Column 2: netlink port id of the socket bound to the queue.
    pub peer_portid: u32,
    /// Column 3: packets the kernel holds for this queue right now, both
    /// those still waiting in the socket and those read but without a
    /// verdict yet. [`QueueOptions::max_len`] caps this number.
    pub queue_total: u32,
    /// Column 4: copy mode (0 none, 1 metadata only, 2 whole packet).
    pub copy_mode: u8,
    /// Column 5: at most this many bytes of each packet are copied to us.
    pub copy_range: u32,
    /// Column 6: packets dropped because `queue_total` had reached the
    /// maximum length (with fail-open they are accepted instead, and not
    /// counted here).
    pub queue_dropped: u32,
    /// Column 7: packets dropped because the message could not be put in
    /// our socket (receive buffer full: we see ENOBUFS). With fail-open
    /// these are accepted instead.
    pub user_dropped: u32,
    /// Column 8: the id of the last packet queued; ids count up from 1.
    pub id_sequence: u32,
}

impl QueueStats {
    /// Parses one line of the file. The ninth column is always 1 (a
    /// leftover field of the kernel's format) and is not kept.
    pub fn parse_line(line: &str) -> Option<QueueStats> {
        let mut it = line.split_ascii_whitespace();
        let mut next = || it.next()?.parse::<u32>().ok();
        let stats = QueueStats {
            queue: u16::try_from(next()?).ok()?,
            peer_portid: next()?,
            queue_total: next()?,
            copy_mode: u8::try_from(next()?).ok()?,
            copy_range: next()?,
            queue_dropped: next()?,
            user_dropped: next()?,
            id_sequence: next()?,
        };
        Some(stats)
    }

    /// Finds queue `queue` in the whole text of the file.
    pub fn find(text: &str, queue: u16) -> Option<QueueStats> {
        text.lines()
            .filter_map(QueueStats::parse_line)
            .find(|s| s.queue == queue)
    }
}

/// Reads the kernel's counters for queue `queue` in the calling thread's
/// network namespace; `None` when no socket is bound to that queue there
/// (or the file cannot be read).
pub fn kernel_stats(queue: u16) -> Option<QueueStats> {
    let text = std::fs::read_to_string("/proc/thread-self/net/netfilter/nfnetlink_queue").ok()?;
    QueueStats::find(&text, queue)
}

// ---------------------------------------------------------------------------
// Packets
// ---------------------------------------------------------------------------

/// The netfilter hook a packet was queued from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Arrived, before routing (raw/mangle/nat PREROUTING).
    PreRouting,
    /// Routed to this host (INPUT).
    Input,
    /// Routed through this host (FORWARD).
    Forward,
    /// Sent by this host (OUTPUT).
    Output,
    /// About to leave (mangle/nat POSTROUTING).
    PostRouting,
    /// A hook number this code does not know.
    Other(u8),
}

impl Hook {
    /// Maps the kernel's `NF_INET_*` hook number.
    pub fn from_raw(hook: u8) -> Hook {
        match i32::from(hook) {
            libc::NF_INET_PRE_ROUTING => Hook::PreRouting,
            libc::NF_INET_LOCAL_IN => Hook::Input,
            libc::NF_INET_FORWARD => Hook::Forward,
            libc::NF_INET_LOCAL_OUT => Hook::Output,
            libc::NF_INET_POST_ROUTING => Hook::PostRouting,
            _ => Hook::Other(hook),
        }
    }
}

/// An interface a packet came in on or goes out of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// The interface index in the queue's namespace.
    pub index: u32,
    /// Its name, when it could be resolved (it may have vanished since).
    pub name: Option<Arc<str>>,
}

/// What to do with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let it continue through the stack (with its payload as modified).
    Accept,
    /// Discard it.
    Drop,
}

impl Verdict {
    fn raw(self) -> u32 {
        // NF_DROP and NF_ACCEPT are 0 and 1.
        match self {
            Verdict::Accept => libc::NF_ACCEPT as u32,
            Verdict::Drop => libc::NF_DROP as u32,
        }
    }
}

/// Largest payload a verdict can carry: the netlink attribute length is 16
/// bits and includes its 4-byte header. The kernel caps the copy range at
/// the same value, so a longer packet reaches us truncated.
pub const MAX_PAYLOAD: usize = u16::MAX as usize - 4;

/// A packet the kernel handed us and holds until it gets a verdict.
///
/// It is the handle for that verdict: [`HostQueue::verdict`] consumes it, so
/// a packet cannot be given two. A `HostPacket` dropped without a verdict
/// stays in the kernel (counting against [`QueueOptions::max_len`]) until
/// the queue is closed.
#[derive(Debug)]
#[must_use = "a packet without a verdict stays in the kernel until the queue closes"]
pub struct HostPacket {
    queue: u16,
    id: u32,
    hook: Hook,
    hw_protocol: u16,
    mark: u32,
    indev: Option<Interface>,
    outdev: Option<Interface>,
    original_len: usize,
    truncated: bool,
    gso: bool,
    checksum_ready: bool,
    modified: bool,
    payload: Vec<u8>,
}

impl HostPacket {
    /// The queue it came from.
    pub fn queue(&self) -> u16 {
        self.queue
    }
    /// The kernel's id for this packet (counts up from 1 per queue).
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The netfilter hook that queued it.
    pub fn hook(&self) -> Hook {
        self.hook
    }
    /// The EtherType of the packet: 0x0800 for IPv4, 0x86dd for IPv6.
    pub fn hw_protocol(&self) -> u16 {
        self.hw_protocol
    }
    /// The packet's netfilter mark.
    pub fn mark(&self) -> u32 {
        self.mark
    }
    /// The interface it arrived on; `None` for locally sent packets.
    pub fn indev(&self) -> Option<&Interface> {
        self.indev.as_ref()
    }
    /// The interface it leaves by; `None` for packets to this host and
    /// before routing.
    pub fn outdev(&self) -> Option<&Interface> {
        self.outdev.as_ref()
    }
    /// The IP packet (starting at the IP header).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
    /// The packet's length in the kernel when it was queued; larger than
    /// the copy when the kernel truncated it (packets over
    /// [`MAX_PAYLOAD`] bytes).
    pub fn original_len(&self) -> usize {
        self.original_len
    }
    /// The kernel copied only part of the packet.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
    /// A GSO super-packet: several wire packets that the stack segments
    /// later (only seen with [`QueueOptions::gso`]).
    pub fn is_gso(&self) -> bool {
        self.gso
    }
    /// The transport checksum is final. When false the packet is
    /// `CHECKSUM_PARTIAL`: the checksum field holds only the pseudo-header
    /// sum, to be completed by the NIC or by the stack when it segments.
    pub fn is_checksum_ready(&self) -> bool {
        self.checksum_ready
    }
    /// The payload was changed and will be sent back with the verdict.
    pub fn is_modified(&self) -> bool {
        self.modified
    }

    fn check_mutable(&self) -> Result<(), NfqError> {
        // When the verdict carries a payload, the kernel copies it over the
        // packet and marks the packet CHECKSUM_NONE: from then on nobody
        // completes a partial checksum, so such a packet would leave with a
        // wrong transport checksum. A truncated copy would, sent back, cut
        // the packet to the copied length.
        if self.is_truncated() {
            return Err(NfqError::Immutable {
                id: self.id,
                reason: "the kernel copied only part of it, and sending that part back would cut the packet",
            });
        }
        if !self.checksum_ready {
            return Err(NfqError::Immutable {
                id: self.id,
                reason: "its transport checksum is partial (left to offload); after a change the kernel would not complete it. Open the queue with gso off to get final checksums",
            });
        }
        Ok(())
    }

    /// The payload, to change in place (e.g. to set ECN CE and fix the IP
    /// header checksum). The change is sent back with an Accept verdict.
    ///
    /// Refused for truncated packets and for packets whose checksum is not
    /// ready ([`is_checksum_ready`](Self::is_checksum_ready)), because the
    /// kernel marks a packet whose payload we replace as fully checksummed.
    pub fn payload_mut(&mut self) -> Result<&mut [u8], NfqError> {
        self.check_mutable()?;
        self.modified = true;
        Ok(&mut self.payload)
    }

    /// Replaces the payload (it may change length), with the same
    /// restrictions as [`payload_mut`](Self::payload_mut).
    pub fn set_payload(&mut self, payload: Vec<u8>) -> Result<(), NfqError> {
        self.check_mutable()?;
        if payload.len() > MAX_PAYLOAD {
            return Err(NfqError::PayloadTooLarge {
                id: self.id,
                len: payload.len(),
                max: MAX_PAYLOAD,
            });
        }
        self.payload = payload;
        self.modified = true;
        Ok(())
    }

    /// Takes the payload out, leaving the packet a bare verdict handle with
    /// an empty, unmodified payload (the kernel keeps its own copy; an
    /// Accept lets the original through). [`set_payload`](Self::set_payload)
    /// can put bytes back.
    pub fn take_payload(&mut self) -> Vec<u8> {
        self.modified = false;
        std::mem::take(&mut self.payload)
    }
}

// ---------------------------------------------------------------------------
// Verdict messages
// ---------------------------------------------------------------------------

const NLMSG_HDR_LEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NLA_HDR_LEN: usize = 4;
const VERDICT_HDR_LEN: usize = 8;

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Appends one nfnetlink queue verdict message to `buf`: a netlink header,
/// the nfnetlink header naming the queue (big-endian, as all nfnetlink
/// fields), the verdict header attribute (verdict and packet id, both
/// big-endian) and, for a modified accepted packet, the payload attribute.
/// `msg_type` is `NFQNL_MSG_VERDICT` or `NFQNL_MSG_VERDICT_BATCH` (which
/// applies to every queued packet with an id up to `id`).
fn push_verdict_msg(
    buf: &mut Vec<u8>,
    msg_type: u16,
    queue: u16,
    id: u32,
    verdict: Verdict,
    payload: Option<&[u8]>,
) {
    let payload = payload.filter(|p| p.len() <= MAX_PAYLOAD);
    let payload_attr = payload.map_or(0, |p| align4(NLA_HDR_LEN + p.len()));
    let len = NLMSG_HDR_LEN + NFGENMSG_LEN + NLA_HDR_LEN + VERDICT_HDR_LEN + payload_attr;
    let subsys_type = ((libc::NFNL_SUBSYS_QUEUE as u16) << 8) | msg_type;
    buf.reserve(len);
    // struct nlmsghdr: length, type, flags, sequence, port id (host order).
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    buf.extend_from_slice(&subsys_type.to_ne_bytes());
    buf.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    // struct nfgenmsg: family, version, resource id = queue number.
    buf.push(libc::AF_UNSPEC as u8);
    buf.push(libc::NFNETLINK_V0 as u8);
    buf.extend_from_slice(&queue.to_be_bytes());
    // NFQA_VERDICT_HDR: struct nfqnl_msg_verdict_hdr { verdict, id }.
    buf.extend_from_slice(&((NLA_HDR_LEN + VERDICT_HDR_LEN) as u16).to_ne_bytes());
    buf.extend_from_slice(&(libc::NFQA_VERDICT_HDR as u16).to_ne_bytes());
    buf.extend_from_slice(&verdict.raw().to_be_bytes());
    buf.extend_from_slice(&id.to_be_bytes());
    if let Some(p) = payload {
        buf.extend_from_slice(&((NLA_HDR_LEN + p.len()) as u16).to_ne_bytes());
        buf.extend_from_slice(&(libc::NFQA_PAYLOAD as u16).to_ne_bytes());
        buf.extend_from_slice(p);
        buf.resize(buf.len() + (align4(p.len()) - p.len()), 0);
    }
}

/// Verdicts are packed into datagrams of at most this size. The kernel
/// processes every message of a datagram in turn, so one `sendto` carries
/// many verdicts. The bound stays under the default socket send buffer
/// (`wmem_default`, 208 KiB), which limits one datagram, in case raising the
/// buffer is not allowed.
const MAX_VERDICT_DATAGRAM: usize = 128 * 1024;

// ---------------------------------------------------------------------------
// The queue
// ---------------------------------------------------------------------------

/// How to configure a [`HostQueue`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Most packets the kernel holds for us at once, read or not, until
    /// they get a verdict. With a delay `d` at `r` packets/s the daemon holds
    /// about `r·d` packets, so this must exceed that product. The kernel's
    /// default is 1024; ours is 65536 (6.5 s at 10 kpps).
    pub max_len: u32,
    /// When the queue is full (or our socket is), accept the packet instead
    /// of dropping it (`NFQA_CFG_F_FAIL_OPEN`): unshaped rather than lost.
    pub fail_open: bool,
    /// Ask for GSO super-packets whole (`NFQA_CFG_F_GSO`) rather than have
    /// the kernel segment them (and complete their checksums) before
    /// queueing. Far fewer messages at high rate, but such packets cannot be
    /// modified (see [`HostPacket::payload_mut`]).
    pub gso: bool,
    /// Socket receive buffer in bytes, set with `SO_RCVBUFFORCE` so that
    /// `net.core.rmem_max` does not cap it (falls back to `SO_RCVBUF`
    /// without CAP_NET_ADMIN). Too small a buffer and bursts are dropped
    /// by the kernel, which we see as ENOBUFS.
    pub rcvbuf: usize,
    /// `recv` returns `None` instead of waiting when nothing is pending.
    pub nonblocking: bool,
    /// When the queue is dropped, accept every packet still held (instead
    /// of letting the kernel drop them as it does when the socket closes).
    pub accept_pending_on_close: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            max_len: 65536,
            fail_open: false,
            gso: true,
            rcvbuf: 16 << 20,
            nonblocking: true,
            accept_pending_on_close: true,
        }
    }
}

/// What a [`HostQueue`] has counted since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Packets returned by `recv`.
    pub received: u64,
    /// Accept verdicts sent for single packets.
    pub accepted: u64,
    /// Drop verdicts sent for single packets.
    pub dropped: u64,
    /// Times the socket reported ENOBUFS: the kernel could not deliver one
    /// or more packet messages to us (see [`QueueStats::user_dropped`]).
    pub enobufs: u64,
    /// Error answers to verdicts, e.g. ENOENT for a packet id the kernel no
    /// longer holds.
    pub verdict_errors: u64,
    /// Set when, at open, the kernel already held packets queued before
    /// the queue was configured: they were all accepted (unshaped) in one
    /// batch verdict, and this is the highest id of them.
    pub accepted_at_open: Option<u32>,
    /// Messages for those early packets that were still in the socket and
    /// were skipped by `recv`.
    pub skipped_at_open: u64,
}

/// One NFQUEUE, bound and configured.
///
/// The socket belongs to the network namespace of the thread that opened
/// it. Poll [`as_fd`](AsFd::as_fd) for readability, then call
/// [`recv`](Self::recv) until it returns `None`.
pub struct HostQueue {
    queue: nfq::Queue,
    /// The descriptor owned by `queue`: `nfq` does not expose it, so
    /// [`find_socket_fd`] locates it.
    fd: RawFd,
    num: u16,
    netns: ThreadNetns,
    names: HashMap<u32, Option<Arc<str>>>,
    counters: QueueCounters,
    /// Highest packet id received, for the batch verdict at close.
    last_id: Option<u32>,
    /// Skip packet messages with ids up to this one (accepted at open).
    skip_through: Option<u32>,
    accept_pending_on_close: bool,
    send_buf: Vec<u8>,
    /// Accept and Drop verdicts in `send_buf`, counted once sent.
    pending: (u64, u64),
}

impl fmt::Debug for HostQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostQueue")
            .field("num", &self.num)
            .field("fd", &self.fd)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// Wrap-aware "a is not after b" for 32-bit packet ids, as the kernel
/// compares them for batch verdicts.
fn id_not_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

impl HostQueue {
    /// Binds queue `num` in the calling thread's network namespace and
    /// configures it: whole-packet copies (up to [`MAX_PAYLOAD`] bytes),
    /// the queue length, fail-open and GSO as asked, a large receive
    /// buffer, ENOBUFS reporting on, and non-blocking mode.
    ///
    /// `nfq` keeps its socket descriptor private; we find it through the
    /// kernel's own tables: the queue's peer port id in
    /// `/proc/thread-self/net/netfilter/nfnetlink_queue`, that port id's
    /// socket inode in `/proc/thread-self/net/netlink`, and the descriptor
    /// of ours that links to `socket:[inode]`. Port ids are unique per
    /// namespace and protocol, and inodes per system, so this cannot pick
    /// another socket.
    pub fn open(num: u16, opts: QueueOptions) -> Result<Self, NfqError> {
        let q = |op: &'static str| {
            move |source: io::Error| NfqError::Queue {
                queue: num,
                op,
                source,
            }
        };
        let netns = ThreadNetns::current().map_err(|source| NfqError::Netns {
            op: "opening /proc/thread-self/ns/net",
            source,
        })?;
        let mut queue = nfq::Queue::open().map_err(q("opening a NETLINK_NETFILTER socket"))?;
        // Also sets the copy range to 65535 (clamped by the kernel to
        // MAX_PAYLOAD) and the copy mode to whole packets.
        queue.bind(num).map_err(q("binding the queue"))?;
        queue
            .set_queue_max_len(num, opts.max_len)
            .map_err(q("setting the queue length"))?;
        queue
            .set_fail_open(num, opts.fail_open)
            .map_err(q("setting fail-open"))?;
        queue
            .set_recv_gso(num, opts.gso)
            .map_err(q("setting the GSO flag"))?;
        // nfq turns ENOBUFS reports off; we want to count them.
        queue
            .set_recv_enobufs(true)
            .map_err(q("enabling ENOBUFS reports"))?;

        let fd = find_socket_fd(num)?;
        let mut this = Self {
            queue,
            fd,
            num,
            netns,
            names: HashMap::new(),
            counters: QueueCounters::default(),
            last_id: None,
            skip_through: None,
            accept_pending_on_close: opts.accept_pending_on_close,
            send_buf: Vec::with_capacity(MAX_VERDICT_DATAGRAM),
            pending: (0, 0),
        };
        this.set_buffers(opts.rcvbuf)?;
        this.queue.set_nonblocking(opts.nonblocking);

        // Packets queued while nfq waited for configuration acks had their
        // messages thrown away; the kernel still holds them. Accept all of
        // them at once and skip their messages that may still be in the
        // socket.
        if let Some(stats) = kernel_stats(num) {
            if stats.queue_total > 0 && stats.id_sequence > 0 {
                this.send_batch_verdict(stats.id_sequence, Verdict::Accept)?;
                this.counters.accepted_at_open = Some(stats.id_sequence);
                this.skip_through = Some(stats.id_sequence);
            }
        }
        Ok(this)
    }

    fn set_buffers(&self, rcvbuf: usize) -> Result<(), NfqError> {
        let q = |op| {
            let num = self.num;
            move |e: Errno| NfqError::Queue {
                queue: num,
                op,
                source: e.into(),
            }
        };
        let fd = self.as_fd();
        if setsockopt(&fd, sockopt::RcvBufForce, &rcvbuf).is_err() {
            setsockopt(&fd, sockopt::RcvBuf, &rcvbuf).map_err(q("setting SO_RCVBUF"))?;
        }
        let sndbuf = 2 * MAX_VERDICT_DATAGRAM;
        if setsockopt(&fd, sockopt::SndBufForce, &sndbuf).is_err() {
            setsockopt(&fd, sockopt::SndBuf, &sndbuf).map_err(q("setting SO_SNDBUF"))?;
        }
        Ok(())
    }

    /// The queue number.
    pub fn num(&self) -> u16 {
        self.num
    }

    /// What this queue has counted so far.
    pub fn counters(&self) -> QueueCounters {
        self.counters
    }

    /// The kernel's counters for this queue (see [`kernel_stats`]), read in
    /// the queue's namespace whatever the calling thread.
    pub fn kernel_stats(&self) -> Option<QueueStats> {
        let num = self.num;
        self.netns.run(move || kernel_stats(num)).ok().flatten()
    }

    /// Forgets the cached interface names (after interfaces were renamed or
    /// deleted and their indexes reused).
    pub fn forget_interface_names(&mut self) {
        self.names.clear();
    }

    /// The next packet, or `None` when nothing is pending (non-blocking
    /// mode). ENOBUFS and error answers to earlier verdicts are counted in
    /// [`counters`](Self::counters) and passed over. An `Err` leaves the
    /// queue usable.
    pub fn recv(&mut self) -> Result<Option<HostPacket>, NfqError> {
        loop {
            let msg = match self.queue.recv() {
                Ok(msg) => msg,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(None),
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        self.counters.enobufs += 1;
                        continue;
                    }
                    // The kernel answers a verdict only when it fails, and
                    // nfq hands that answer to the next recv. ENOENT: no
                    // such packet id queued.
                    Some(libc::ENOENT) => {
                        self.counters.verdict_errors += 1;
                        continue;
                    }
                    _ => {
                        return Err(NfqError::Queue {
                            queue: self.num,
                            op: "receiving",
                            source: e,
                        })
                    }
                },
            };
            let id = msg.get_packet_id();
            if let Some(skip) = self.skip_through {
                if id_not_after(id, skip) {
                    self.counters.skipped_at_open += 1;
                    continue;
                }
                self.skip_through = None;
            }
            let indev = self.interface(msg.get_indev());
            let outdev = self.interface(msg.get_outdev());
            let payload = msg.get_payload().to_vec();
            let original_len = msg.get_original_len().max(payload.len());
            let pkt = HostPacket {
                queue: self.num,
                id,
                hook: Hook::from_raw(msg.get_hook()),
                hw_protocol: msg.get_hw_protocol(),
                mark: msg.get_nfmark(),
                indev,
                outdev,
                original_len,
                truncated: original_len > payload.len(),
                gso: msg.is_seg_offloaded(),
                checksum_ready: msg.is_checksum_ready(),
                modified: false,
                payload,
            };
            self.counters.received += 1;
            self.last_id = Some(id);
            return Ok(Some(pkt));
        }
    }

    /// Interface `index` (0 means none), with its name from the cache or
    /// resolved in the queue's namespace.
    fn interface(&mut self, index: u32) -> Option<Interface> {
        if index == 0 {
            return None;
        }
        let netns = &self.netns;
        let name = self
            .names
            .entry(index)
            .or_insert_with(|| {
                netns
                    .run(move || nix::net::if_::if_indextoname(index).ok())
                    .ok()
                    .flatten()
                    .map(|c| Arc::from(c.to_string_lossy().as_ref()))
            })
            .clone();
        Some(Interface { index, name })
    }

    fn check_queue(&self, pkt: &HostPacket) -> Result<(), NfqError> {
        if pkt.queue != self.num {
            return Err(NfqError::WrongQueue {
                id: pkt.id,
                packet_queue: pkt.queue,
                queue: self.num,
            });
        }
        Ok(())
    }

    fn push(&mut self, pkt: &HostPacket, v: Verdict) {
        let payload = (pkt.modified && v == Verdict::Accept).then_some(pkt.payload.as_slice());
        push_verdict_msg(
            &mut self.send_buf,
            libc::NFQNL_MSG_VERDICT as u16,
            self.num,
            pkt.id,
            v,
            payload,
        );
        match v {
            Verdict::Accept => self.pending.0 += 1,
            Verdict::Drop => self.pending.1 += 1,
        }
    }

    fn flush_send_buf(&mut self) -> Result<(), NfqError> {
        if self.send_buf.is_empty() {
            return Ok(());
        }
        let res = socket::sendto(
            self.fd,
            &self.send_buf,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        );
        self.send_buf.clear();
        let (accepted, dropped) = std::mem::take(&mut self.pending);
        if res.is_ok() {
            self.counters.accepted += accepted;
            self.counters.dropped += dropped;
        }
        res.map(drop).map_err(|e| NfqError::Queue {
            queue: self.num,
            op: "sending verdicts",
            source: e.into(),
        })
    }

    /// Gives `pkt` its verdict, with its payload when it was modified and
    /// is accepted.
    pub fn verdict(&mut self, pkt: HostPacket, v: Verdict) -> Result<(), NfqError> {
        self.check_queue(&pkt)?;
        self.send_buf.clear();
        self.pending = (0, 0);
        self.push(&pkt, v);
        self.flush_send_buf()
    }

    /// Gives many packets their verdicts, packing them into as few
    /// datagrams as fit (one system call per ~128 KiB of messages rather
    /// than one per packet). Packets from another queue are not sent and
    /// the first such is reported after all others went out.
    pub fn verdict_batch(
        &mut self,
        items: impl IntoIterator<Item = (HostPacket, Verdict)>,
    ) -> Result<(), NfqError> {
        self.send_buf.clear();
        self.pending = (0, 0);
        let mut wrong = None;
        for (pkt, v) in items {
            if let Err(e) = self.check_queue(&pkt) {
                wrong.get_or_insert(e);
                continue;
            }
            let extra = if pkt.modified {
                pkt.payload.len() + 64
            } else {
                64
            };
            if self.send_buf.len() + extra > MAX_VERDICT_DATAGRAM {
                self.flush_send_buf()?;
            }
            self.push(&pkt, v);
        }
        self.flush_send_buf()?;
        wrong.map_or(Ok(()), Err)
    }

    /// One `NFQNL_MSG_VERDICT_BATCH`: verdict `v` for every packet the
    /// kernel holds for this queue with an id up to `id`.
    fn send_batch_verdict(&mut self, id: u32, v: Verdict) -> Result<(), NfqError> {
        self.send_buf.clear();
        self.pending = (0, 0);
        push_verdict_msg(
            &mut self.send_buf,
            libc::NFQNL_MSG_VERDICT_BATCH as u16,
            self.num,
            id,
            v,
            None,
        );
        self.flush_send_buf()
    }

    /// Gives verdict `v` to every packet received so far that has none yet
    /// (one message), e.g. to release everything at shutdown. The
    /// [`HostPacket`]s still held become stale: verdicts given to them later
    /// are answered with ENOENT and counted in
    /// [`QueueCounters::verdict_errors`].
    pub fn verdict_all_pending(&mut self, v: Verdict) -> Result<(), NfqError> {
        match self.last_id {
            Some(id) => self.send_batch_verdict(id, v),
            None => Ok(()),
        }
    }
}

impl AsFd for HostQueue {
    /// The netlink socket, for poll: readable when a packet is pending.
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `self.fd` is the descriptor of the socket owned by
        // `self.queue` (found by inode in `find_socket_fd`); nfq closes it
        // only when the queue is dropped, which cannot happen while `self`
        // is borrowed for the returned lifetime.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}

impl Drop for HostQueue {
    fn drop(&mut self) {
        if self.accept_pending_on_close {
            if let Err(e) = self.verdict_all_pending(Verdict::Accept) {
                // Not eprintln!, which panics when stderr is on a full disk.
                let _ = writeln!(
                    std::io::stderr(),
                    "dummynet: NFQUEUE {}: accepting held packets at close: {e}",
                    self.num
                );
            }
        }
    }
}

/// Finds the descriptor of the netlink socket bound to queue `num` in the
/// calling thread's namespace (see [`HostQueue::open`]).
fn find_socket_fd(num: u16) -> Result<RawFd, NfqError> {
    let fail = |detail: String| NfqError::SocketNotFound { queue: num, detail };
    let stats = kernel_stats(num).ok_or_else(|| {
        fail("the queue is not listed in /proc/thread-self/net/netfilter/nfnetlink_queue".into())
    })?;
    let netlink = std::fs::read_to_string("/proc/thread-self/net/netlink")
        .map_err(|e| fail(format!("reading /proc/thread-self/net/netlink: {e}")))?;
    let inode = netlink_socket_inode(&netlink, libc::NETLINK_NETFILTER as u32, stats.peer_portid)
        .ok_or_else(|| {
        fail(format!(
            "no NETLINK_NETFILTER socket with port id {} in /proc/thread-self/net/netlink",
            stats.peer_portid
        ))
    })?;
    let target = format!("socket:[{inode}]");
    let dir = std::fs::read_dir("/proc/thread-self/fd")
        .map_err(|e| fail(format!("listing /proc/thread-self/fd: {e}")))?;
    for entry in dir.flatten() {
        let Ok(link) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if link == Path::new(&target) {
            if let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<RawFd>().ok())
            {
                // Double check through the socket itself.
                let addr: Result<NetlinkAddr, _> = socket::getsockname(fd);
                if addr.map(|a| a.pid()) == Ok(stats.peer_portid) {
                    return Ok(fd);
                }
            }
        }
    }
    Err(fail(format!(
        "no descriptor of this process links to {target}"
    )))
}

/// In the text of `/proc/net/netlink` (columns: sk, Eth = protocol, Pid =
/// port id, Groups, Rmem, Wmem, Dump, Locks, Drops, Inode), the inode of
/// the socket of `protocol` bound to `portid`.
fn netlink_socket_inode(text: &str, protocol: u32, portid: u32) -> Option<u64> {
    text.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_ascii_whitespace().collect();
        let proto = cols.get(1)?.parse::<u32>().ok()?;
        let pid = cols.get(2)?.parse::<u32>().ok()?;
        (proto == protocol && pid == portid)
            .then(|| cols.get(9)?.parse::<u64>().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_queue_line() {
        let text = "    0  12345     3 2 65531     7     2       42  1\n    5   4242     0 2 65531     0     0        9  1\n";
        let s = QueueStats::find(text, 0).unwrap();
        assert_eq!(
            s,
            QueueStats {
                queue: 0,
                peer_portid: 12345,
                queue_total: 3,
                copy_mode: 2,
                copy_range: 65531,
                queue_dropped: 7,
                user_dropped: 2,
                id_sequence: 42,
            }
        );
        assert_eq!(QueueStats::find(text, 5).unwrap().id_sequence, 9);
        assert_eq!(QueueStats::find(text, 6), None);
        assert_eq!(QueueStats::parse_line("1 2 3"), None);
        assert_eq!(QueueStats::parse_line("70000 1 1 1 1 1 1 1 1"), None);
        assert_eq!(QueueStats::parse_line("x y"), None);
    }

    #[test]
    fn finds_a_netlink_socket_inode() {
        let text = "sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode\n\
00000000731553af 0   0          00000000 0        0        0     2        0        4\n\
00000000c95dac83 12  777        00000000 0        0        0     2        0        1427\n\
00000000c95dac84 0   777        00000000 0        0        0     2        0        99\n";
        assert_eq!(netlink_socket_inode(text, 12, 777), Some(1427));
        assert_eq!(netlink_socket_inode(text, 0, 777), Some(99));
        assert_eq!(netlink_socket_inode(text, 12, 778), None);
    }

    #[test]
    fn verdict_message_layout() {
        let mut buf = Vec::new();
        push_verdict_msg(&mut buf, 1, 0x0102, 0xa0b0c0d0, Verdict::Accept, None);
        assert_eq!(buf.len(), 32);
        assert_eq!(u32::from_ne_bytes(buf[0..4].try_into().unwrap()), 32);
        assert_eq!(u16::from_ne_bytes(buf[4..6].try_into().unwrap()), 0x0301);
        assert_eq!(u16::from_ne_bytes(buf[6..8].try_into().unwrap()), 1);
        assert_eq!(&buf[16..20], &[0, 0, 1, 2]);
        assert_eq!(u16::from_ne_bytes(buf[20..22].try_into().unwrap()), 12);
        assert_eq!(u16::from_ne_bytes(buf[22..24].try_into().unwrap()), 2);
        assert_eq!(&buf[24..28], &[0, 0, 0, 1]);
        assert_eq!(&buf[28..32], &[0xa0, 0xb0, 0xc0, 0xd0]);

        // A payload of 5 bytes: attribute length 9, padded to 12.
        let mut buf2 = Vec::new();
        push_verdict_msg(&mut buf2, 1, 1, 7, Verdict::Drop, Some(&[1, 2, 3, 4, 5]));
        assert_eq!(buf2.len(), 44);
        assert_eq!(u32::from_ne_bytes(buf2[0..4].try_into().unwrap()), 44);
        assert_eq!(&buf2[24..28], &[0, 0, 0, 0]);
        assert_eq!(u16::from_ne_bytes(buf2[32..34].try_into().unwrap()), 9);
        assert_eq!(u16::from_ne_bytes(buf2[34..36].try_into().unwrap()), 10);
        assert_eq!(&buf2[36..44], &[1, 2, 3, 4, 5, 0, 0, 0]);
    }

    #[test]
    fn packet_ids_compare_across_wrap() {
        assert!(id_not_after(5, 5));
        assert!(id_not_after(4, 5));
        assert!(!id_not_after(6, 5));
        assert!(id_not_after(u32::MAX, 2));
        assert!(!id_not_after(2, u32::MAX));
    }

    fn packet(len: usize, original_len: usize, checksum_ready: bool) -> HostPacket {
        HostPacket {
            queue: 1,
            id: 9,
            hook: Hook::Output,
            hw_protocol: 0x0800,
            mark: 0,
            indev: None,
            outdev: None,
            original_len,
            truncated: original_len > len,
            gso: false,
            checksum_ready,
            modified: false,
            payload: vec![0x45; len],
        }
    }

    #[test]
    fn payload_changes_follow_the_kernel_rules() {
        let mut p = packet(40, 40, true);
        let bytes = p.take_payload();
        assert!(!p.is_modified());
        p.set_payload(bytes).unwrap();
        assert!(p.is_modified());
        assert_eq!(p.payload().len(), 40);
        p.payload_mut().unwrap()[1] = 3;
        assert_eq!(p.payload()[1], 3);
        assert!(matches!(
            p.set_payload(vec![0; MAX_PAYLOAD + 1]),
            Err(NfqError::PayloadTooLarge { len, max: MAX_PAYLOAD, .. }) if len == MAX_PAYLOAD + 1
        ));
        p.set_payload(vec![0; MAX_PAYLOAD]).unwrap();

        let mut partial = packet(40, 40, false);
        assert!(matches!(
            partial.payload_mut(),
            Err(NfqError::Immutable { id: 9, .. })
        ));
        assert!(!partial.is_modified());

        let mut cut = packet(MAX_PAYLOAD, 65535, true);
        assert!(cut.is_truncated());
        let bytes = cut.take_payload();
        assert!(
            cut.is_truncated(),
            "taking the copy does not change the packet"
        );
        assert!(matches!(
            cut.set_payload(bytes),
            Err(NfqError::Immutable { .. })
        ));
    }

    #[test]
    fn hooks_map_from_kernel_numbers() {
        assert_eq!(Hook::from_raw(0), Hook::PreRouting);
        assert_eq!(Hook::from_raw(1), Hook::Input);
        assert_eq!(Hook::from_raw(2), Hook::Forward);
        assert_eq!(Hook::from_raw(3), Hook::Output);
        assert_eq!(Hook::from_raw(4), Hook::PostRouting);
        assert_eq!(Hook::from_raw(9), Hook::Other(9));
    }
}
