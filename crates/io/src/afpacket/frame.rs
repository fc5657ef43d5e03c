//! From the kernel's bytes to a delivered [`RxFrame`]: a pooled buffer, the
//! VLAN tag put back, a plain frame's checksum finished.
//!
//! Whether from the ring or from `recvmmsg`, each frame is copied into a `Vec<u8>` taken from a pool, so
//! what the caller keeps is sized like the frame, not like the slot. Give
//! buffers back with [`Port::recycle`] (to the port that read them) and a
//! steady stream allocates nothing. A frame longer than
//! [`PortOptions::frame_capacity`] is not delivered cut: it is dropped and
//! counted ([`PortStats::rx_truncated`]).
//!
//! [`Port::recycle`]: super::Port::recycle
//! [`PortOptions::frame_capacity`]: super::PortOptions::frame_capacity
//! [`PortStats::rx_truncated`]: super::PortStats::rx_truncated

use super::{PortStats, RxFrame, VnetHdr};

/// How many empty buffers a port keeps for reuse; more are freed.
const POOL_LIMIT: usize = 4096;

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
pub(super) fn recycle_into(pool: &mut Vec<Vec<u8>>, mut buf: Vec<u8>) {
    if pool.len() < POOL_LIMIT {
        buf.clear();
        pool.push(buf);
    }
}

/// Makes a delivered frame of `bytes` (as the kernel read them: no VLAN tag)
/// with its virtio_net_hdr and `PACKET_AUXDATA`-style `(tp_status,
/// tp_vlan_tci, tp_vlan_tpid)`: puts the tag back, finishes a plain frame's
/// checksum, counts. `None` (counted) when the header does not fit the frame.
pub(super) fn finish_frame(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
