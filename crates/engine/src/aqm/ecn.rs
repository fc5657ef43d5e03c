//! Explicit Congestion Notification on the packet bytes (RFC 3168).
//!
//! The ECN field is the low two bits of the IPv4 TOS byte and of the IPv6
//! Traffic Class. Marking sets CE (`11`) on a packet that carries ECT(0)
//! (`10`) or ECT(1) (`01`); a packet already at CE stays as it is and counts
//! as marked; a Not-ECT packet (`00`) cannot be marked and is dropped
//! instead. IPv4 carries a header checksum, which is patched incrementally
//! (RFC 1624, equation 3) rather than recomputed. Nothing here panics,
//! whatever the bytes.

/// The ECN codepoint of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codepoint {
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Codepoint {
    fn from_bits(b: u8) -> Self {
        match b & 0b11 {
            0b00 => Codepoint::NotEct,
            0b01 => Codepoint::Ect1,
            0b10 => Codepoint::Ect0,
            _ => Codepoint::Ce,
        }
    }

    /// ECT(0), ECT(1) or CE: a sender that understands ECN.
    pub fn capable(self) -> bool {
        self != Codepoint::NotEct
    }
}

const IPV4_MIN_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;

/// The codepoint of the IP packet in `ip` (starting at the IP header), or
/// `None` if the bytes are not a plausible IPv4 or IPv6 header.
pub fn codepoint(ip: &[u8]) -> Option<Codepoint> {
    let first = *ip.first()?;
    match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            if ip.len() < IPV4_MIN_HEADER || ihl < IPV4_MIN_HEADER || ihl > ip.len() {
                return None;
            }
            Some(Codepoint::from_bits(ip[1]))
        }
        6 if ip.len() >= IPV6_HEADER => Some(Codepoint::from_bits(ip[1] >> 4)),
        _ => None,
    }
}

/// Whether the packet can be marked: it has IP bytes with an ECN-capable codepoint.
pub fn capable(ip: Option<&[u8]>) -> bool {
    ip.and_then(codepoint).is_some_and(Codepoint::capable)
}

/// Sets CE on an ECN-capable packet. Returns true if the packet now carries
/// CE (it was ECT or already CE), false if it cannot be marked (Not-ECT, or
/// not an IP packet), in which case the bytes are untouched.
pub fn set_ce(ip: &mut [u8]) -> bool {
    match codepoint(ip) {
        Some(Codepoint::Ce) => true,
        Some(Codepoint::Ect0 | Codepoint::Ect1) => {
            if ip[0] >> 4 == 4 {
                let old = u16::from_be_bytes([ip[0], ip[1]]);
                ip[1] |= 0b11;
                let new = u16::from_be_bytes([ip[0], ip[1]]);
                let sum = u16::from_be_bytes([ip[10], ip[11]]);
                let sum = checksum_adjust(sum, old, new).to_be_bytes();
                ip[10] = sum[0];
                ip[11] = sum[1];
            } else {
                // The Traffic Class straddles bytes 0 and 1; its ECN bits are
                // bits 4 and 5 of byte 1. IPv6 has no header checksum.
                ip[1] |= 0b11 << 4;
            }
            true
        }
        Some(Codepoint::NotEct) | None => false,
    }
}

/// RFC 1624 equation 3: `HC' = ~(~HC + ~m + m')` in one's complement, for a
/// 16-bit word changing from `old` to `new` under checksum `sum`.
pub fn checksum_adjust(sum: u16, old: u16, new: u16) -> u16 {
    let mut acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 checksum of a header whose checksum field is zero.
    fn header_sum(h: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for w in h.chunks(2) {
            acc += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !(acc as u16)
    }

    fn ipv4(tos: u8) -> Vec<u8> {
        let mut h = vec![
            0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = header_sum(&h).to_be_bytes();
        h[10] = c[0];
        h[11] = c[1];
        h.extend_from_slice(&[0; 20]);
        h
    }

    fn verifies(h: &[u8]) -> bool {
        let mut acc: u32 = 0;
        for w in h[..20].chunks(2) {
            acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc == 0xffff
    }

    #[test]
    fn ipv4_ect_gets_ce_and_a_valid_checksum() {
        // Every DSCP with both ECT codepoints: the incremental update must
        // agree with a full recomputation.
        for dscp in 0..64u8 {
            for ect in [0b01, 0b10] {
                let mut h = ipv4(dscp << 2 | ect);
                assert!(verifies(&h));
                assert!(capable(Some(&h)));
                assert!(set_ce(&mut h));
                assert_eq!(h[1], dscp << 2 | 0b11);
                assert!(verifies(&h), "dscp {dscp} ect {ect}");
                let mut fresh = h.clone();
                fresh[10] = 0;
                fresh[11] = 0;
                assert_eq!(u16::from_be_bytes([h[10], h[11]]), header_sum(&fresh[..20]));
            }
        }
    }

    #[test]
    fn not_ect_and_garbage_are_left_alone() {
        let mut h = ipv4(0xb8);
        let before = h.clone();
        assert!(!capable(Some(&h)));
        assert!(!set_ce(&mut h));
        assert_eq!(h, before);
        for mut junk in [
            vec![],
            vec![0x45],
            vec![0x4f; 20],
            vec![0x46, 2, 0, 0],
            vec![0x60, 0x20],
        ] {
            let before = junk.clone();
            assert!(!set_ce(&mut junk));
            assert_eq!(junk, before);
        }
        assert!(!capable(None));
    }

    #[test]
    fn ce_stays_ce() {
        let mut h = ipv4(0x03);
        let before = h.clone();
        assert!(set_ce(&mut h));
        assert_eq!(h, before);
    }

    #[test]
    fn ipv6_traffic_class_gets_ce() {
        // Version 6, traffic class 0xa9 (DSCP 42, ECT(1)), flow label 0x12345.
        let mut h = vec![0u8; 40];
        h[0] = 0x6a;
        h[1] = 0x91;
        h[2] = 0x23;
        h[3] = 0x45;
        assert_eq!(codepoint(&h), Some(Codepoint::Ect1));
        assert!(set_ce(&mut h));
        assert_eq!(&h[..4], &[0x6a, 0xb1, 0x23, 0x45]);
        assert_eq!(codepoint(&h), Some(Codepoint::Ce));
    }
}
