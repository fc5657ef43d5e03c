//! AF_XDP ports: the two ends of `dummynet run --bridge IF_A IF_B --xdp`.
//!
//! An [`XdpPorts`] is two `AF_XDP` sockets, one on receive queue 0 of each
//! interface, sharing one UMEM: a region of this process's memory cut in
//! equal chunks, each holding one frame. The kernel writes arriving frames
//! into chunks the bridge lends it (the *fill* ring), says which on the
//! *rx* ring, and sends chunks the bridge names on the *tx* ring, giving
//! them back on the *completion* ring. Because both sockets use the same
//! UMEM, a frame read on one port is sent out of the other from the chunk
//! it arrived in: with a driver that does zero-copy, no byte of it is ever
//! copied; in copy mode (veth, or a driver without zero-copy support) the
//! kernel copies it once in and once out, and the bridge still does not.
//!
//! While the engine holds a frame in a pipe, the frame stays in its chunk:
//! an [`XdpFrame`] owns one chunk, reads and writes its bytes, and goes
//! back to the bridge's free list when sent or dropped. A UMEM whose
//! chunks all sit in pipes has none left to lend, so the kernel drops what
//! arrives (counted in [`XskStats::rx_fill_ring_empty`]); nothing waits.
//!
//! # The XDP program
//!
//! Frames reach an AF_XDP socket only through an XDP program that
//! redirects them to it. This module carries its own, 23 BPF
//! instructions assembled here and loaded with `bpf(2)` (no compiler, no
//! object file, no libbpf): `bpf_redirect_map(xsks, rx_queue_index,
//! XDP_PASS)` for every frame that fits a chunk, IP or not (the bridge
//! forwards ARP and the rest itself, as the AF_PACKET bridge does). A
//! frame longer than a chunk, or on a queue without a socket, is passed
//! to the kernel's stack (`XDP_PASS`); in generic XDP so is every TCP
//! frame ([`Attach::Generic`]).
//!
//! # Driver or generic XDP
//!
//! [`Attach::Driver`] runs the program in the driver: the only way to
//! zero-copy. On a veth it has a price: attaching a driver XDP program to
//! a veth makes the kernel clear GSO from its peer (`veth_xdp_set`,
//! `veth_fix_features`), so the far side's TCP arrives in MTU-sized
//! segments, one trip each. [`Attach::Generic`] runs it on socket
//! buffers, after the driver: the peer keeps its GSO, and what the program
//! passes (super-packets, and TCP, so that no TCP flow is split between
//! two ways into the bridge, which would reorder it) an AF_PACKET socket
//! on the port reads whole, beside the AF_XDP one (the caller opens it). The program is attached with a BPF link
//! (`BPF_LINK_CREATE`, Linux 5.9), which the kernel detaches when the last
//! descriptor of the link closes, so a daemon that dies leaves no program
//! behind.
//!
//! # Limits
//!
//! - One queue: the socket serves receive queue 0, so an interface with
//!   more receive queues is refused ([`XdpError::Queues`]); `ethtool -L IF
//!   combined 1` makes one. veth pairs have one unless made with more.
//! - Frames fit a chunk: in driver XDP, an interface whose MTU would make
//!   a frame longer than a chunk minus the kernel's headroom is refused
//!   ([`XdpError::Mtu`]); generic XDP passes such frames to the kernel.
//! - Checksums: XDP sees a frame as its sender's stack left it, and a
//!   veth peer that offloads checksums (the default) leaves TCP and UDP
//!   checksums unfinished, with nothing in the frame to say so; sent on
//!   as they are, the far side's stack drops them. So every TCP and UDP
//!   frame read gets its checksum computed ([`finish_checksum`]): a few
//!   hundred nanoseconds for a full-size frame, nothing for a small one.
//!   A frame that arrived with a wrong checksum leaves with a right one.

#![allow(unsafe_code)]

use std::mem::{size_of, ManuallyDrop};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;

use crate::netdev::{ethtool, probe_socket};

/// What went wrong opening or using the ports.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// No interface by that name in the caller's network namespace.
    #[error("no interface named {ifname:?} in this thread's network namespace ({errno})")]
    NoSuchInterface { ifname: String, errno: Errno },
    /// An option is out of range.
    #[error("AF_XDP option {name} = {value} is out of range: allowed {allowed}")]
    BadOption {
        name: &'static str,
        value: u64,
        allowed: &'static str,
    },
    /// The interface has more receive queues than the one socket serves.
    #[error(
        "{ifname} has {queues} receive queues; the AF_XDP bridge serves queue 0 only \
         (`ethtool -L {ifname} combined 1` leaves one)"
    )]
    Queues { ifname: String, queues: u32 },
    /// The interface's MTU makes frames longer than a UMEM chunk holds.
    #[error(
        "{ifname} has MTU {mtu}: its frames would not fit the {room} bytes a UMEM chunk \
         leaves them (MTU {max} at most)"
    )]
    Mtu {
        ifname: String,
        mtu: u32,
        room: u32,
        max: u32,
    },
    /// A system call failed.
    #[error("{what}: {op} failed: {errno}{hint}")]
    Sys {
        what: String,
        op: &'static str,
        errno: Errno,
        hint: &'static str,
    },
}

fn sys(what: &str, op: &'static str, errno: Errno) -> XdpError {
    let hint = match errno {
        Errno::EAFNOSUPPORT => " (the kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
        Errno::EPERM => " (AF_XDP and BPF need CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW)",
        Errno::ENOSYS => " (the kernel has no bpf(2))",
        Errno::EBUSY => " (another XDP program or socket holds the interface's queue)",
        _ => "",
    };
    XdpError::Sys {
        what: what.to_string(),
        op,
        errno,
        hint,
    }
}

/// Sizes of the UMEM and the rings.
#[derive(Debug, Clone)]
pub struct XdpOptions {
    /// Chunks in the UMEM: frames held at once, in the kernel's rings and
    /// in pipes together. A power of two, 64 to 2^20.
    pub frames: u32,
    /// Bytes per chunk: 2048 or 4096.
    pub frame_size: u32,
    /// Slots of each ring (fill, rx, tx, completion) of each socket: a
    /// power of two, 64 to 16384, at most `frames / 4`.
    pub ring: u32,
    /// Try zero-copy first (falls back to copy mode when the driver has
    /// none). Driver XDP only.
    pub zero_copy: bool,
    /// Where the XDP program runs: in the driver (generic XDP if the
    /// driver has none), or in the kernel's generic XDP, after the socket
    /// buffer is built ([`Attach`]).
    pub attach: Attach,
}

/// Where the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), the kernel's generic XDP if
    /// the driver has no XDP: the only way to zero-copy. On a veth this
    /// makes the peer stop building super-packets (see the module docs).
    Driver,
    /// In the kernel's generic XDP (`XDP_FLAGS_SKB_MODE`), on socket
    /// buffers: always copy mode, but a veth's peer keeps its GSO, and
    /// frames longer than a chunk are passed to the kernel's stack (where
    /// an AF_PACKET socket can read them whole) instead of refused.
    Generic,
}

impl Default for XdpOptions {
    fn default() -> Self {
        XdpOptions {
            frames: 16384,
            frame_size: 2048,
            ring: 2048,
            zero_copy: true,
            attach: Attach::Driver,
        }
    }
}

/// Room the kernel keeps before a frame in its chunk (`XDP_PACKET_HEADROOM`).
const KERNEL_HEADROOM: u32 = 256;

/// How the ports move frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// The driver runs the XDP program (`false`: the kernel's generic XDP,
    /// after the socket buffer is built).
    pub driver: bool,
    /// Frames go between the NIC and the UMEM with no copy.
    pub zero_copy: bool,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} XDP, {}",
            if self.driver { "driver" } else { "generic" },
            if self.zero_copy {
                "zero-copy"
            } else {
                "copy mode"
            }
        )
    }
}

// ---------------------------------------------------------------------------
// The UMEM and the frames in it.

/// The UMEM's memory, shared by the ports and by every [`XdpFrame`].
struct Area {
    base: NonNull<u8>,
    len: usize,
    /// Chunks of frames dropped without being handed back
    /// ([`XdpFrame`]'s `Drop`): the ports take them back.
    strays: Mutex<Vec<u64>>,
    stray_count: AtomicUsize,
}

// SAFETY: the area is plain bytes. Each chunk is reached only through the
// one XdpFrame that owns it, or by the ports while it is on their free
// list; the stray list is behind a mutex.
unsafe impl Send for Area {}
// SAFETY: as above: shared references to the area give no access to its
// bytes, only XdpFrame (exclusively owning its chunk) does.
unsafe impl Sync for Area {}

impl Area {
    fn new(len: usize) -> Result<Area, XdpError> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched. The result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("UMEM", "mmap", Errno::last()));
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| sys("UMEM", "mmap", Errno::EINVAL))?;
        Ok(Area {
            base,
            len,
            strays: Mutex::new(Vec::new()),
            stray_count: AtomicUsize::new(0),
        })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no XdpFrame is
        // left (each holds the Arc this is the last of), and the kernel
        // pins the pages it registered for as long as it needs them.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// One frame in the UMEM: owns its chunk until it is sent, recycled or
/// dropped (a dropped frame's chunk goes back to the ports too).
pub struct XdpFrame {
    area: Arc<Area>,
    /// Where the frame's first byte is, from the UMEM's start.
    addr: u64,
    len: u32,
}

impl std::fmt::Debug for XdpFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "XdpFrame {{ addr: {:#x}, len: {} }}",
            self.addr, self.len
        )
    }
}

impl XdpFrame {
    /// Bytes of its chunk before the frame: the kernel's headroom (256)
    /// for every frame the ports make.
    pub fn headroom(&self, frame_size: u32) -> u64 {
        self.addr % u64::from(frame_size.max(1))
    }

    /// Gives up the chunk without sending it to the stray list: the caller
    /// puts it on a ring or the free list.
    fn into_addr(self) -> (Arc<Area>, u64) {
        let me = ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so the Arc is moved
        // out exactly once.
        let area = unsafe { std::ptr::read(&me.area) };
        (area, me.addr)
    }
}

impl std::ops::Deref for XdpFrame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `addr + len` was checked to lie inside the area when the
        // frame was made, the area lives as long as `self.area`, and this
        // frame owns its chunk: nothing else writes it meanwhile (the
        // kernel only writes chunks on the fill ring).
        unsafe {
            std::slice::from_raw_parts(
                self.area.base.as_ptr().add(self.addr as usize),
                self.len as usize,
            )
        }
    }
}

impl std::ops::DerefMut for XdpFrame {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes this the only
        // reference to the chunk's bytes.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.area.base.as_ptr().add(self.addr as usize),
                self.len as usize,
            )
        }
    }
}

impl Drop for XdpFrame {
    fn drop(&mut self) {
        // Rare: the engine let go of a frame without handing it back (a
        // shutdown, a packet dropped where no backend sees it).
        give_back(&self.area, self.addr);
    }
}

/// Puts a frame's chunk on its UMEM's stray list, for its ports to take
/// back: for a frame dropped, or handed to ports of another UMEM.
fn give_back(area: &Area, addr: u64) {
    if let Ok(mut strays) = area.strays.lock() {
        strays.push(addr);
        area.stray_count.fetch_add(1, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// Rings.

/// One of a socket's four rings, mapped from the kernel: a power-of-two
/// array of `T` with a producer and a consumer index.
struct Ring<T> {
    map: NonNull<libc::c_void>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    desc: NonNull<T>,
    mask: u32,
    /// Our copy of the index we move (producer or consumer).
    local: u32,
}

// SAFETY: the mapping belongs to this ring alone and is touched by one
// thread at a time (the owner's); the shared indices are atomics.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        what: &str,
    ) -> Result<Ring<T>, XdpError> {
        let map_len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: maps the ring the kernel made for this socket at `pgoff`;
        // the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys(what, "mmap ring", Errno::last()));
        }
        let map = NonNull::new(p).ok_or_else(|| sys(what, "mmap ring", Errno::EINVAL))?;
        let at = |o: u64| -> NonNull<u8> {
            // SAFETY: the kernel's offsets lie within the mapping it made.
            unsafe { NonNull::new_unchecked(p.cast::<u8>().add(o as usize)) }
        };
        let producer: NonNull<AtomicU32> = at(off.producer).cast();
        let consumer = at(off.consumer).cast();
        // Both indices start at zero on a new socket.
        let local = 0;
        Ok(Ring {
            map,
            map_len,
            producer,
            consumer,
            flags: at(off.flags).cast(),
            desc: at(off.desc).cast(),
            mask: size - 1,
            local,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, aligned by the kernel.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, i: u32) -> *mut T {
        // SAFETY: `i & mask` is below the ring's size, inside the mapping.
        unsafe { self.desc.as_ptr().add((i & self.mask) as usize) }
    }

    /// Producer side (fill, tx): free slots.
    fn room(&self) -> u32 {
        let size = self.mask + 1;
        size - self
            .local
            .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Producer side: writes `v` in the next slot (the caller checked
    /// [`Ring::room`]); [`Ring::publish`] shows it to the kernel.
    fn put(&mut self, v: T) {
        // SAFETY: the slot is free (room was checked): the kernel does not
        // read it until the producer index passes it.
        unsafe { self.slot(self.local).write(v) };
        self.local = self.local.wrapping_add(1);
    }

    fn publish(&self) {
        self.producer().store(self.local, Ordering::Release);
    }

    /// Consumer side (rx, completion): entries waiting.
    fn ready(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }

    /// Consumer side: the next entry (the caller checked [`Ring::ready`]).
    fn take(&mut self) -> T {
        // SAFETY: the kernel published this slot (ready > 0) and does not
        // write it again until the consumer index passes it.
        let v = unsafe { self.slot(self.local).read() };
        self.local = self.local.wrapping_add(1);
        v
    }

    fn release(&self) {
        self.consumer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe {
            libc::munmap(self.map.as_ptr(), self.map_len);
        }
    }
}

// ---------------------------------------------------------------------------
// BPF: the XSK map, the program, the link.

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

/// `union bpf_attr`, as bytes: each command fills the fields it reads.
#[repr(C, align(8))]
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> BpfAttr {
        BpfAttr([0; 128])
    }
    fn u32_at(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64_at(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// `bpf(cmd, attr)`: a new descriptor for the commands that make one.
fn bpf(cmd: libc::c_long, attr: &mut BpfAttr) -> Result<libc::c_long, Errno> {
    // SAFETY: `attr` is a live, 128-byte `union bpf_attr` whose pointer
    // fields (set by the callers) point at memory that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    Errno::result(r)
}

fn bpf_fd(cmd: libc::c_long, attr: &mut BpfAttr) -> Result<OwnedFd, Errno> {
    let fd = RawFd::try_from(bpf(cmd, attr)?).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just made this descriptor for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

/// ```c
/// if (ctx->data + room < ctx->data_end) return XDP_PASS;
/// if (tcp_to_kernel && is_tcp_over_ip(ctx)) return XDP_PASS;
/// return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// ```
/// A frame longer than `room` (what a chunk holds) could not be written
/// into the UMEM, and redirected it would be dropped: passed, the
/// kernel's stack gets it, and in generic XDP an AF_PACKET socket on the
/// port reads it whole. (In driver mode no frame is that long: the MTU
/// was checked.) With `tcp_to_kernel`, every TCP frame over IPv4 or IPv6
/// (untagged) is passed too, whatever its length: a TCP flow then never
/// has its segments split between two ways into the bridge, whose order
/// against each other nothing keeps (its super-packets must take the
/// kernel's way), and which TCP takes for loss.
fn redirect_program(map_fd: RawFd, room: u32, tcp_to_kernel: bool) -> [Insn; 23] {
    let room = i32::try_from(room).unwrap_or(i32::MAX);
    // The EtherType as a 16-bit load of the frame reads it on this machine.
    let ipv4 = i32::from(u16::from_ne_bytes([0x08, 0x00]));
    let ipv6 = i32::from(u16::from_ne_bytes([0x86, 0xdd]));
    // A protocol number no byte holds: the TCP test never passes.
    let tcp = if tcp_to_kernel { 6 } else { 0x100 };
    [
        // 0: r2 = ctx->data, r3 = ctx->data_end (struct xdp_md, offsets 0, 4)
        insn(0x61, 2, 1, 0, 0),
        insn(0x61, 3, 1, 4, 0),
        // 2: r4 = r2 + room; if r3 > r4 goto pass (21)
        insn(0xbf, 4, 2, 0, 0),
        insn(0x07, 4, 0, 0, room),
        insn(0x2d, 3, 4, 16, 0),
        // 5: r4 = r2 + 34 (Ethernet and IPv4 headers); if r4 > r3 goto
        // redirect (15): too short to be TCP
        insn(0xbf, 4, 2, 0, 0),
        insn(0x07, 4, 0, 0, 34),
        insn(0x2d, 4, 3, 7, 0),
        // 8: r5 = EtherType; IPv4 goto 13; not IPv6 goto redirect (15)
        insn(0x69, 5, 2, 12, 0),
        insn(0x15, 5, 0, 3, ipv4),
        insn(0x55, 5, 0, 4, ipv6),
        // 11: r5 = IPv6 next header; goto 14
        insn(0x71, 5, 2, 20, 0),
        insn(0x05, 0, 0, 1, 0),
        // 13: r5 = IPv4 protocol
        insn(0x71, 5, 2, 23, 0),
        // 14: if r5 == tcp goto pass (21)
        insn(0x15, 5, 0, 6, tcp),
        // 15: redirect: r2 = ctx->rx_queue_index (offset 16)
        insn(0x61, 2, 1, 16, 0),
        // r1 = the map (ld_imm64 with BPF_PSEUDO_MAP_FD: two slots)
        insn(0x18, 1, 1, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: what happens when the queue has no socket
        insn(0xb7, 3, 0, 0, XDP_PASS),
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(0x95, 0, 0, 0, 0),
        // 21: pass: r0 = XDP_PASS
        insn(0xb7, 0, 0, 0, XDP_PASS),
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// An XSK map holding one socket at key 0, and the program attached to
/// one interface. Dropping it detaches the program.
struct Attached {
    _map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    driver: bool,
}

fn attach(
    ifname: &str,
    ifindex: u32,
    xsk: &OwnedFd,
    how: Attach,
    room: u32,
) -> Result<Attached, XdpError> {
    let mut attr = BpfAttr::new();
    attr.u32_at(0, BPF_MAP_TYPE_XSKMAP)
        .u32_at(4, 4)
        .u32_at(8, 4)
        .u32_at(12, 1);
    let map = bpf_fd(BPF_MAP_CREATE, &mut attr)
        .map_err(|e| sys(ifname, "bpf(BPF_MAP_CREATE xskmap)", e))?;
    let key: u32 = 0;
    let value = u32::try_from(xsk.as_raw_fd()).map_err(|_| sys(ifname, "xskmap", Errno::EBADF))?;
    let mut attr = BpfAttr::new();
    attr.u32_at(0, map.as_raw_fd() as u32)
        .u64_at(8, &key as *const u32 as u64)
        .u64_at(16, &value as *const u32 as u64)
        .u64_at(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map_err(|e| sys(ifname, "bpf(BPF_MAP_UPDATE_ELEM)", e))?;

    let prog = redirect_program(map.as_raw_fd(), room, how == Attach::Generic);
    let license = c"BSD";
    let mut log = vec![0u8; 4096];
    let mut attr = BpfAttr::new();
    attr.u32_at(0, BPF_PROG_TYPE_XDP)
        .u32_at(4, prog.len() as u32)
        .u64_at(8, prog.as_ptr() as u64)
        .u64_at(16, license.as_ptr() as u64)
        .u32_at(24, 1)
        .u32_at(28, log.len() as u32)
        .u64_at(32, log.as_mut_ptr() as u64)
        .u32_at(68, BPF_XDP);
    attr.0[48..48 + 11].copy_from_slice(b"dummynet_xs");
    let prog = bpf_fd(BPF_PROG_LOAD, &mut attr).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
        XdpError::Sys {
            what: format!("{ifname}: XDP program refused by the verifier: {text}"),
            op: "bpf(BPF_PROG_LOAD)",
            errno: e,
            hint: "",
        }
    })?;
    let modes: &[u32] = match how {
        Attach::Driver => &[XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE],
        Attach::Generic => &[XDP_FLAGS_SKB_MODE],
    };
    let mut last = Errno::EINVAL;
    for &flags in modes {
        let mut attr = BpfAttr::new();
        attr.u32_at(0, prog.as_raw_fd() as u32)
            .u32_at(4, ifindex)
            .u32_at(8, BPF_XDP)
            .u32_at(12, flags);
        match bpf_fd(BPF_LINK_CREATE, &mut attr) {
            Ok(link) => {
                return Ok(Attached {
                    _map: map,
                    _prog: prog,
                    _link: link,
                    driver: flags == XDP_FLAGS_DRV_MODE,
                })
            }
            Err(e) => last = e,
        }
    }
    Err(sys(ifname, "bpf(BPF_LINK_CREATE xdp)", last))
}

// ---------------------------------------------------------------------------
// Sockets.

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

struct Xsk {
    fd: OwnedFd,
    ifname: String,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    stats: XskStats,
    /// Frames on the tx ring not yet kicked.
    tx_pending: bool,
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
    fn open(
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
    fn kick(&mut self) {
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

    fn kernel_stats(&self) -> Option<libc::xdp_statistics> {
        // SAFETY: plain old data; all zeroes is a valid value.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(&self.fd, libc::XDP_STATISTICS, &mut s).ok()?;
        Some(s)
    }
}

/// The receive queues of `ifname` (`ETHTOOL_GCHANNELS`), or `None` when
/// the driver does not say.
fn rx_queues(fd: &OwnedFd, ifname: &str) -> Option<u32> {
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

fn mtu_of(fd: &OwnedFd, ifname: &str) -> Option<u32> {
    let req = crate::afpacket::ifreq_ioctl(fd, ifname, libc::SIOCGIFMTU).ok()?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote `ifru_mtu`.
    u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).ok()
}

/// A plain datagram socket, for interface `ioctl`s in this thread's
/// network namespace.
fn open_probe(what: &str) -> Result<OwnedFd, XdpError> {
    probe_socket().map_err(|e| sys(what, "socket(AF_INET)", e))
}

/// Two interfaces joined by AF_XDP sockets over one UMEM.
pub struct XdpPorts {
    area: Arc<Area>,
    frame_size: u32,
    /// Chunks that are free: on no ring and in no frame.
    free: Vec<u64>,
    socks: [Xsk; 2],
    // Dropped after the sockets: detaching the programs.
    _attached: [Attached; 2],
    mode: Mode,
    /// Turns the fill ring of a port could not be topped up for want of
    /// free chunks.
    umem_exhausted: u64,
    /// Chunks lent to the kernel: on fill or rx rings, or on tx rings and
    /// not yet completed.
    lent: u64,
    sending: u64,
    frames: u64,
    /// A plain socket to ask about the ports' interfaces, and their
    /// indices when opened.
    probe: OwnedFd,
    ifindex: [u32; 2],
}

impl XdpPorts {
    /// Opens both ports (in the calling thread's network namespace):
    /// zero-copy where the drivers allow, copy mode otherwise.
    pub fn open(a: &str, b: &str, opts: &XdpOptions) -> Result<XdpPorts, XdpError> {
        check_options(opts)?;
        let mut ifindex = [0u32; 2];
        for (i, name) in [a, b].iter().enumerate() {
            ifindex[i] = nix::net::if_::if_nametoindex(*name).map_err(|errno| {
                XdpError::NoSuchInterface {
                    ifname: name.to_string(),
                    errno,
                }
            })?;
        }
        // A plain socket to ask the interfaces about their queues and MTU.
        let probe = open_probe(a)?;
        let room = opts.frame_size - KERNEL_HEADROOM;
        for name in [a, b] {
            if let Some(queues) = rx_queues(&probe, name).filter(|&q| q > 1) {
                return Err(XdpError::Queues {
                    ifname: name.to_string(),
                    queues,
                });
            }
            // Ethernet header and one VLAN tag. In generic XDP a longer
            // frame is passed to the kernel instead (see the program).
            let max = room - 18;
            if opts.attach == Attach::Generic {
                continue;
            }
            if let Some(mtu) = mtu_of(&probe, name).filter(|&m| m > max) {
                return Err(XdpError::Mtu {
                    ifname: name.to_string(),
                    mtu,
                    room,
                    max,
                });
            }
        }
        let tries: &[bool] = if opts.zero_copy && opts.attach == Attach::Driver {
            &[true, false]
        } else {
            &[false]
        };
        let mut last = None;
        for &zero_copy in tries {
            match Self::open_as(a, b, ifindex, opts, zero_copy) {
                Ok(mut p) => {
                    p.probe = probe;
                    return Ok(p);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| sys(a, "open", Errno::EINVAL)))
    }

    fn open_as(
        a: &str,
        b: &str,
        ifindex: [u32; 2],
        opts: &XdpOptions,
        zero_copy: bool,
    ) -> Result<XdpPorts, XdpError> {
        let area = Arc::new(Area::new(opts.frames as usize * opts.frame_size as usize)?);
        let flags = libc::XDP_USE_NEED_WAKEUP
            | if zero_copy {
                libc::XDP_ZEROCOPY
            } else {
                libc::XDP_COPY
            };
        let sa = Xsk::open(a, ifindex[0], &area, opts, None, flags)?;
        let sb = Xsk::open(b, ifindex[1], &area, opts, Some(&sa.fd), flags)?;
        // Driver mode first, unless told generic; zero-copy needs it.
        let room = opts.frame_size - KERNEL_HEADROOM;
        let pa = attach(a, ifindex[0], &sa.fd, opts.attach, room)?;
        let pb = attach(b, ifindex[1], &sb.fd, opts.attach, room)?;
        if zero_copy && !(pa.driver && pb.driver) {
            return Err(sys(a, "zero-copy", Errno::EOPNOTSUPP));
        }
        let mode = Mode {
            driver: pa.driver && pb.driver,
            zero_copy,
        };
        let free = (0..u64::from(opts.frames))
            .rev()
            .map(|i| i * u64::from(opts.frame_size))
            .collect();
        let mut ports = XdpPorts {
            area,
            frame_size: opts.frame_size,
            free,
            socks: [sa, sb],
            _attached: [pa, pb],
            mode,
            umem_exhausted: 0,
            lent: 0,
            sending: 0,
            frames: u64::from(opts.frames),
            probe: open_probe(a)?,
            ifindex,
        };
        ports.refill(0);
        ports.refill(1);
        Ok(ports)
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn ifname(&self, side: usize) -> &str {
        &self.socks[side & 1].ifname
    }

    /// The socket of port `side`: readable when frames wait.
    pub fn fd(&self, side: usize) -> BorrowedFd<'_> {
        self.socks[side & 1].fd.as_fd()
    }

    /// False once port `side`'s interface is gone (deleted, or replaced by
    /// another of the same name): its socket's queue went with it, and an
    /// AF_XDP socket does not say so when polled. One `ioctl`; true when
    /// the kernel cannot tell.
    pub fn link_present(&self, side: usize) -> bool {
        let side = side & 1;
        match crate::afpacket::ifreq_ioctl(
            &self.probe,
            &self.socks[side].ifname,
            libc::SIOCGIFINDEX,
        ) {
            // SAFETY: SIOCGIFINDEX succeeded, so the kernel wrote `ifru_ifindex`.
            Ok(req) => {
                u32::try_from(unsafe { req.ifr_ifru.ifru_ifindex }) == Ok(self.ifindex[side])
            }
            Err(Errno::ENODEV | Errno::ENXIO) => false,
            Err(_) => true,
        }
    }

    /// Chunks free now (neither lent to the kernel nor held in a frame).
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Where the UMEM's chunks are: `(free, lent to the kernel to receive
    /// into, being sent, held in frames)`; the four add up to the UMEM.
    pub fn chunks(&mut self) -> (u64, u64, u64, u64) {
        self.take_strays();
        let free = self.free.len() as u64;
        let held = self.frames - free - self.lent - self.sending;
        (free, self.lent, self.sending, held)
    }

    /// Turns a port's fill ring could not be topped up: the UMEM was full.
    pub fn umem_exhausted(&self) -> u64 {
        self.umem_exhausted
    }

    fn take_strays(&mut self) {
        if self.area.stray_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Ok(mut strays) = self.area.strays.lock() {
            self.area.stray_count.store(0, Ordering::Relaxed);
            // A stray is a frame's address: its chunk starts below it.
            let mask = !(u64::from(self.frame_size) - 1);
            self.free.extend(strays.drain(..).map(|a| a & mask));
        }
    }

    /// Lends free chunks to the kernel on port `side`'s fill ring.
    fn refill(&mut self, side: usize) {
        let fill = &mut self.socks[side].fill;
        let room = fill.room() as usize;
        if room == 0 {
            return;
        }
        let n = room.min(self.free.len());
        if n < room && n == 0 {
            self.umem_exhausted += 1;
        }
        for _ in 0..n {
            if let Some(addr) = self.free.pop() {
                fill.put(addr);
                self.lent += 1;
            }
        }
        fill.publish();
        if fill.needs_wakeup() {
            // SAFETY: a zero-length, non-blocking receive with no buffer,
            // which AF_XDP takes as "the fill ring has chunks again".
            unsafe {
                libc::recvfrom(
                    self.socks[side].fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Reads up to `max` frames waiting on port `side` into `out`; returns
    /// how many.
    pub fn recv_batch(&mut self, side: usize, out: &mut Vec<XdpFrame>, max: usize) -> usize {
        let side = side & 1;
        self.take_strays();
        self.reap(side);
        let limit = self.area.len as u64;
        let chunk_mask = !(u64::from(self.frame_size) - 1);
        let sock = &mut self.socks[side];
        let n = (sock.rx.ready() as usize).min(max);
        for _ in 0..n {
            let d = sock.rx.take();
            if d.addr.saturating_add(u64::from(d.len)) > limit
                || (d.addr & chunk_mask) != ((d.addr + u64::from(d.len).max(1) - 1) & chunk_mask)
            {
                // Not a frame this UMEM can hold: never from a sound kernel.
                sock.stats.rx_invalid += 1;
                continue;
            }
            let mut frame = XdpFrame {
                area: self.area.clone(),
                addr: d.addr,
                len: d.len,
            };
            finish_checksum(&mut frame);
            out.push(frame);
        }
        sock.rx.release();
        sock.stats.rx_frames += n as u64;
        self.lent -= n as u64;
        self.refill(side);
        n
    }

    /// Gives a frame's chunk back (the frame was dropped).
    pub fn recycle(&mut self, frame: XdpFrame) {
        let (area, addr) = frame.into_addr();
        if Arc::ptr_eq(&area, &self.area) {
            self.free.push(addr & !(u64::from(self.frame_size) - 1));
        } else {
            give_back(&area, addr);
        }
    }

    /// Queues `frame` to be sent out of port `side` (sent by
    /// [`XdpPorts::flush`]). False when the tx ring is full: the frame is
    /// dropped, counted in [`XskStats::tx_ring_full`].
    pub fn send(&mut self, side: usize, frame: XdpFrame) -> bool {
        let side = side & 1;
        let len = frame.len;
        let (area, addr) = frame.into_addr();
        if !Arc::ptr_eq(&area, &self.area) {
            give_back(&area, addr);
            return false;
        }
        let sock = &mut self.socks[side];
        if sock.tx.room() == 0 {
            // Let the kernel take what is there, then look again.
            sock.tx.publish();
            sock.tx_pending = true;
            sock.kick();
            self.reap(side);
            if self.socks[side].tx.room() == 0 {
                self.socks[side].stats.tx_ring_full += 1;
                self.free.push(addr & !(u64::from(self.frame_size) - 1));
                return false;
            }
        }
        let sock = &mut self.socks[side];
        sock.tx.put(libc::xdp_desc {
            addr,
            len,
            options: 0,
        });
        sock.tx_pending = true;
        sock.stats.tx_frames += 1;
        self.sending += 1;
        true
    }

    /// Copies `bytes` into a free chunk and queues it on port `side`. False
    /// when no chunk is free, the frame is too long, or the ring is full.
    pub fn send_copy(&mut self, side: usize, bytes: &[u8]) -> bool {
        let Some(frame) = self.alloc(bytes) else {
            return false;
        };
        self.send(side, frame)
    }

    /// A frame holding a copy of `bytes`, in a free chunk; `None` if no
    /// chunk is free or `bytes` does not fit one.
    pub fn alloc(&mut self, bytes: &[u8]) -> Option<XdpFrame> {
        if bytes.len() > (self.frame_size - KERNEL_HEADROOM) as usize {
            return None;
        }
        self.take_strays();
        let chunk = self.free.pop()? & !(u64::from(self.frame_size) - 1);
        let mut f = XdpFrame {
            area: self.area.clone(),
            addr: chunk + u64::from(KERNEL_HEADROOM),
            len: bytes.len() as u32,
        };
        f.copy_from_slice(bytes);
        Some(f)
    }

    /// Hands the frames queued on port `side` to the kernel and takes back
    /// the chunks it has sent.
    pub fn flush(&mut self, side: usize) {
        let side = side & 1;
        let sock = &mut self.socks[side];
        if sock.tx_pending {
            sock.tx.publish();
            sock.kick();
        }
        self.reap(side);
    }

    /// Frames wait on port `side`'s tx ring that the kernel did not take
    /// at the last [`XdpPorts::flush`] (it said `ENOBUFS`, `EBUSY` or
    /// `EAGAIN`): the next flush tries again.
    pub fn tx_pending(&self, side: usize) -> bool {
        self.socks[side & 1].tx_pending
    }

    /// Takes sent chunks back from port `side`'s completion ring.
    fn reap(&mut self, side: usize) {
        let comp = &mut self.socks[side].comp;
        let n = comp.ready();
        if n == 0 {
            return;
        }
        let mask = !(u64::from(self.frame_size) - 1);
        for _ in 0..n {
            self.free.push(comp.take() & mask);
        }
        comp.release();
        self.sending -= u64::from(n);
    }

    /// Port `side`'s counters.
    pub fn stats(&self, side: usize) -> XskStats {
        let sock = &self.socks[side & 1];
        let mut s = sock.stats;
        if let Some(k) = sock.kernel_stats() {
            s.rx_dropped = k.rx_dropped;
            s.rx_ring_full = k.rx_ring_full;
            s.rx_fill_ring_empty = k.rx_fill_ring_empty_descs;
            s.rx_invalid += k.rx_invalid_descs;
            s.tx_invalid = k.tx_invalid_descs;
        }
        s
    }
}

fn check_options(o: &XdpOptions) -> Result<(), XdpError> {
    if !o.frames.is_power_of_two() || !(64..=1 << 20).contains(&o.frames) {
        return Err(XdpError::BadOption {
            name: "frames",
            value: o.frames.into(),
            allowed: "a power of two from 64 to 1048576",
        });
    }
    if o.frame_size != 2048 && o.frame_size != 4096 {
        return Err(XdpError::BadOption {
            name: "frame_size",
            value: o.frame_size.into(),
            allowed: "2048 or 4096",
        });
    }
    if !o.ring.is_power_of_two() || !(64..=16384).contains(&o.ring) || o.ring > o.frames / 4 {
        return Err(XdpError::BadOption {
            name: "ring",
            value: o.ring.into(),
            allowed: "a power of two from 64 to 16384, at most a quarter of the frames",
        });
    }
    Ok(())
}

/// Where the IP header of an Ethernet frame starts (past one or two VLAN
/// tags), if it carries IPv4 or IPv6.
fn ip_offset(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..3 {
        match u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]) {
            0x0800 | 0x86dd => return Some(at + 2),
            0x8100 | 0x88a8 => at += 4,
            _ => return None,
        }
    }
    None
}

/// The ones' complement sum of `bytes` (RFC 1071), folded to 16 bits, in
/// network order. Summed four bytes at a time in the machine's order: the
/// sum does not depend on byte order but for a final swap.
fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum = 0u64;
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut tail = [0u8; 4];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    sum += u64::from(u32::from_ne_bytes(tail));
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    u16::from_be(sum as u16)
}

/// Sets the TCP or UDP checksum of an Ethernet frame carrying IPv4 or IPv6
/// to what it must be, computed over the whole segment: a frame read from
/// a veth whose peer offloads checksums has it unfinished, and no metadata
/// says which frames those are, so every TCP and UDP frame is done (a
/// correct checksum stays as it is). IPv4 UDP without a checksum (0) is
/// left so. Returns false for a frame that is not TCP or UDP over IP (or
/// is cut short, or an IPv6 packet with extension headers): left alone.
pub fn finish_checksum(frame: &mut [u8]) -> bool {
    let Some(ip) = ip_offset(frame).and_then(|at| frame.get_mut(at..)) else {
        return false;
    };
    let (proto, l4_at, l4_len, pseudo) = match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if ihl < 20 || total < ihl || total > ip.len() {
                return false;
            }
            // Fragments other than the first carry no transport header.
            if u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0 {
                return false;
            }
            let len = total - ihl;
            let mut p = [0u8; 12];
            p[..8].copy_from_slice(&ip[12..20]);
            p[9] = ip[9];
            p[10..].copy_from_slice(&(len as u16).to_be_bytes());
            (ip[9], ihl, len, ones_sum(&p))
        }
        Some(6) if ip.len() >= 40 => {
            let len = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if 40 + len > ip.len() {
                return false;
            }
            let mut p = [0u8; 40];
            p[..32].copy_from_slice(&ip[8..40]);
            p[34..36].copy_from_slice(&(len as u16).to_be_bytes());
            p[39] = ip[6];
            (ip[6], 40, len, ones_sum(&p))
        }
        _ => return false,
    };
    let v4 = ip[0] >> 4 == 4;
    let field = match proto {
        6 if l4_len >= 20 => 16,
        17 if l4_len >= 8 => 6,
        _ => return false,
    };
    let seg = &mut ip[l4_at..l4_at + l4_len];
    if proto == 17 && v4 && seg[6] == 0 && seg[7] == 0 {
        return true;
    }
    seg[field] = 0;
    seg[field + 1] = 0;
    let mut sum = u32::from(ones_sum(seg)) + u32::from(pseudo);
    sum = (sum & 0xffff) + (sum >> 16);
    let mut csum = !(sum as u16);
    if proto == 17 && csum == 0 {
        csum = 0xffff;
    }
    seg[field..field + 2].copy_from_slice(&csum.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_out_of_range_are_refused() {
        let bad = XdpOptions {
            frames: 1000,
            ..XdpOptions::default()
        };
        assert!(matches!(
            check_options(&bad),
            Err(XdpError::BadOption { name: "frames", .. })
        ));
        let bad = XdpOptions {
            frames: 256,
            ring: 128,
            ..XdpOptions::default()
        };
        assert!(matches!(
            check_options(&bad),
            Err(XdpError::BadOption { name: "ring", .. })
        ));
        assert!(check_options(&XdpOptions::default()).is_ok());
    }

    #[test]
    fn the_program_redirects_by_queue_and_passes_the_rest() {
        let p = redirect_program(7, 1792, true);
        // Where a jump at `at` lands.
        let to = |at: usize| at + 1 + p[at].off as usize;
        assert_eq!(p[3].imm, 1792, "a chunk's room");
        assert_eq!((p[4].code, to(4)), (0x2d, 21), "longer: pass");
        assert_eq!((p[7].code, to(7)), (0x2d, 15), "short: redirect");
        assert_eq!(to(9), 13, "IPv4");
        assert_eq!(to(10), 15, "neither IPv4 nor IPv6: redirect");
        assert_eq!(to(12), 14);
        assert_eq!(
            (p[11].off, p[13].off),
            (14 + 6, 14 + 9),
            "IPv6, IPv4 protocol"
        );
        assert_eq!((p[14].imm, to(14)), (6, 21), "TCP: pass");
        assert_eq!(p[15].off, 16, "rx_queue_index");
        assert_eq!(p[16].imm, 7, "the map's descriptor");
        assert_eq!(p[16].regs, 0x11, "BPF_PSEUDO_MAP_FD into r1");
        assert_eq!(p[18].imm, XDP_PASS);
        assert_eq!(p[19].imm, BPF_FUNC_REDIRECT_MAP);
        assert_eq!(p[20].code, 0x95, "exit");
        assert_eq!((p[21].code, p[21].imm), (0xb7, XDP_PASS));
        assert_eq!(p[22].code, 0x95, "exit");
        let d = redirect_program(7, 1792, false);
        assert!(d[14].imm > 255, "driver mode: TCP is redirected too");
    }

    /// A UDP/IPv4 frame whose checksum is checked against the one-pass
    /// sum of RFC 1071: a correct checksum sums to 0xffff.
    #[test]
    fn a_finished_udp_checksum_verifies() {
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        let payload = b"hello, xdp!";
        let total = 20 + 8 + payload.len();
        let mut ip = vec![0x45, 0, 0, total as u8, 0, 1, 0x40, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[
            0x30,
            0x39,
            0x00,
            0x35,
            0,
            (8 + payload.len()) as u8,
            0xde,
            0xad,
        ]);
        f.extend_from_slice(payload);
        assert!(finish_checksum(&mut f));
        let before = f.clone();
        assert!(finish_checksum(&mut f));
        assert_eq!(f, before, "a correct checksum stays");
        let mut sum = 0u32;
        let l4 = &f[34..];
        for w in l4.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        for w in f[26..34].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        sum += 17 + l4.len() as u32;
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff);
        assert!(!finish_checksum(&mut f[..20]), "cut short");
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(!finish_checksum(&mut arp));
    }

    /// The RFC 1071 sum of `parts`, each summed as 16-bit big-endian words
    /// one by one (no shortcuts, unlike `ones_sum`).
    fn naive_sum(parts: &[&[u8]]) -> u32 {
        let mut sum = 0u32;
        for p in parts {
            for w in p.chunks(2) {
                sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            }
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum
    }

    #[test]
    fn a_finished_tcp_over_ipv6_checksum_verifies_behind_a_vlan_tag() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07, 0x86, 0xdd]);
        let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7) as u8).collect();
        let l4_len = 20 + payload.len();
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(l4_len as u16).to_be_bytes());
        ip.extend_from_slice(&[6, 64]);
        ip.extend((0..32u8).map(|i| 0x20 + i));
        f.extend_from_slice(&ip);
        let mut tcp = vec![
            0x1f, 0x90, 0xc3, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff,
        ];
        // An unfinished checksum, as an offloading stack leaves it.
        tcp.extend_from_slice(&[0x12, 0x34, 0, 0]);
        f.extend_from_slice(&tcp);
        f.extend_from_slice(&payload);
        assert!(finish_checksum(&mut f));
        let l4 = &f[58..];
        let len = (l4.len() as u32).to_be_bytes();
        let sum = naive_sum(&[&f[26..58], &len, &[0, 0, 0, 6], l4]);
        assert_eq!(sum, 0xffff, "the checksum verifies");
    }
}
