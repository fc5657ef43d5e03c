//! The memory-mapped `TPACKET_V2` receive ring: its geometry, its slots,
//! and reading a frame out of one.
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
//! [`Port::recv_batch`]: super::Port::recv_batch
//! [`PortOptions::rx_ring_frame_size`]: super::PortOptions::rx_ring_frame_size
//! [`PortOptions::rx_ring_frames`]: super::PortOptions::rx_ring_frames
//! [`PortStats::kernel_drops`]: super::PortStats::kernel_drops
//! [`PortStats::rx_malformed`]: super::PortStats::rx_malformed
//! [`PortStats::rx_ring_copied`]: super::PortStats::rx_ring_copied
//! [`PortStats::rx_truncated`]: super::PortStats::rx_truncated
//! [`PortStats::rx_vnet_refused`]: super::PortStats::rx_vnet_refused

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::errno::Errno;

use super::frame::finish_frame;
use super::sockopt::set_packet_opt;
use super::{PortOptions, PortStats, RxFrame, VnetHdr};

/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where the `sockaddr_ll`
/// starts in a slot.
const RING_SLL_OFFSET: usize = (size_of::<libc::tpacket2_hdr>() + 15) & !15;

/// `TPACKET2_HDRLEN`: the slot header and the `sockaddr_ll`. A frame's
/// virtio_net_hdr, and the frame, come after it.
const RING_HDR_LEN: usize = RING_SLL_OFFSET + size_of::<libc::sockaddr_ll>();

/// How to read a ring slot: the parts of the port's settings that matter.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReadSlot {
    /// The kernel does not filter outgoing frames: skip them here.
    pub(super) skip_outgoing: bool,
    /// Longest frame delivered ([`PortOptions::frame_capacity`]).
    pub(super) frame_capacity: usize,
    /// Hand the virtio_net_hdr to the caller ([`PortOptions::vnet_hdr`]).
    pub(super) with_vnet: bool,
}

/// What became of one ring slot.
#[derive(Debug)]
pub(super) enum SlotOutcome {
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
pub(super) fn read_slot(
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
pub(super) struct RingGeometry {
    frame_size: usize,
    frames_per_block: usize,
    block_size: usize,
    blocks: usize,
    pub(super) frames: usize,
}

impl RingGeometry {
    /// The ring asked for by `opts` (already checked by `check_options`),
    /// or `None` for no ring. A block is the slot rounded up to whole pages
    /// (the kernel allocates blocks separately, and small ones never fail
    /// for want of contiguous memory); the slot count is rounded up to whole
    /// blocks.
    pub(super) fn new(opts: &PortOptions, page_size: usize) -> Option<RingGeometry> {
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
pub(super) struct RxRing {
    base: NonNull<u8>,
    pub(super) geometry: RingGeometry,
    head: usize,
}

// SAFETY: the mapping is owned by this value alone: its address is never
// handed out except as borrows of the value, so moving the value to another
// thread moves every access to the mapping with it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Asks the kernel for the ring and maps it.
    pub(super) fn map(
        fd: &OwnedFd,
        geometry: RingGeometry,
    ) -> Result<RxRing, (&'static str, Errno)> {
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
    pub(super) fn ready(&self) -> Option<&[u8]> {
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
    pub(super) fn release(&mut self) {
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
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf takes an integer and reads no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::fixtures::{tcp_frame, tso};
    use crate::afpacket::DEFAULT_FRAME_CAPACITY;
    use crate::afpacket::{DEFAULT_RX_RING_FRAMES, DEFAULT_RX_RING_FRAME_SIZE};

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
