//! Frames shared by the tests of the port's parts.

use super::VnetHdr;

pub(crate) fn tso() -> VnetHdr {
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
pub(crate) fn tcp_frame(payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 66 + payload];
    f[12] = 0x08;
    f[14] = 0x45;
    f[34 + 12] = 8 << 4;
    f
}
