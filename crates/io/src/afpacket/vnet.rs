//! `virtio_net_hdr`: how a super-packet is cut and where its checksum goes.

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
    pub(super) fn shifted_by_vlan_tag(mut self) -> VnetHdr {
        if self.needs_csum() {
            self.csum_start = self.csum_start.saturating_add(4);
        }
        if self.hdr_len > 0 {
            self.hdr_len = self.hdr_len.saturating_add(4);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::fixtures::{tcp_frame, tso};

    /// A TCPv4 super-packet as the kernel hands it over on x86 (little
    /// endian): NEEDS_CSUM, TCPV4, hdr_len 66, gso_size 1448, csum_start 34
    /// (14 Ethernet + 20 IPv4), csum_offset 16 (TCP checksum field).
    #[cfg(target_endian = "little")]
    const TSO_HDR: [u8; 10] = [0x01, 0x01, 66, 0, 0xa8, 0x05, 34, 0, 16, 0];

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
}
