//! Finishing the TCP and UDP checksums a veth peer left to an offload.

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
