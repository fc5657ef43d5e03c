//! Header parsing: a captured frame to the facts the engine needs.
//!
//! [`parse`] reads the link, IP and transport headers of one frame and returns
//! the [`FlowKey`], the length dummynet bills, and where the IP header starts
//! (so an AQM can later mark ECN in place). It never panics and never reads
//! past the bytes it is given: every length is checked before it is used.
//!
//! Choices kept from FreeBSD:
//! - The billed length is the IP packet, `ip_len` of the IP header, even for
//!   Ethernet frames: dummynet sees packets at the IP layer, so link headers,
//!   VLAN tags and Ethernet padding are not billed. It is capped to the bytes
//!   actually present, so a frame cut short by a capture's snap length bills
//!   what was captured. A total length of 0 (what a capture of a
//!   TCP-segmentation-offload send shows) also bills the bytes present.
//! - Ports are read only from the first fragment (offset 0), as ipfw does;
//!   later fragments have ports 0. A first fragment or whole packet whose
//!   TCP (20 bytes), UDP (8) or SCTP (12) header is cut short is malformed:
//!   ipfw's `PULLUP_TO` drops it too.
//! - IPv6 extension headers (hop-by-hop, routing, fragment, destination
//!   options, AH) are walked to find the upper-layer protocol.

use etherparse::{
    IpNumber, Ipv4HeaderSlice, Ipv6ExtensionSlice, Ipv6ExtensionsSlice, Ipv6HeaderSlice,
};

use crate::flow::FlowKey;

/// How a capture frames its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet II, with any number of 802.1Q / 802.1ad tags.
    Ethernet,
    /// Bare IP; the version nibble says IPv4 or IPv6 (pcap's LINKTYPE_RAW).
    RawIp,
    /// Bare IPv4 only (LINKTYPE_IPV4).
    Ipv4,
    /// Bare IPv6 only (LINKTYPE_IPV6).
    Ipv6,
    /// Linux "cooked" capture, `tcpdump -i any` (LINKTYPE_LINUX_SLL): a
    /// 16-byte pseudo-header whose last two bytes are the ethertype.
    LinuxSll,
    /// Its second version (LINKTYPE_LINUX_SLL2): 20 bytes, ethertype first.
    LinuxSll2,
}

/// What the engine needs to know about one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub key: FlowKey,
    /// Bytes to bill: the IP packet (see the module doc).
    pub len: u32,
    /// Offset of the IP header within the frame.
    pub ip_offset: usize,
}

/// The protocol layer a [`WireError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Ethernet,
    LinuxSll,
    Vlan,
    Ipv4,
    Ipv6,
    Ipv6Extension,
    Tcp,
    Udp,
    Sctp,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet header",
            Layer::LinuxSll => "Linux cooked-capture header",
            Layer::Vlan => "VLAN tag",
            Layer::Ipv4 => "IPv4 header",
            Layer::Ipv6 => "IPv6 header",
            Layer::Ipv6Extension => "IPv6 extension header",
            Layer::Tcp => "TCP header",
            Layer::Udp => "UDP header",
            Layer::Sctp => "SCTP header",
        })
    }
}

/// Why a frame could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A valid frame that carries something other than IP (ARP, LLDP...).
    #[error("not an IP packet (ethertype {ethertype:#06x})")]
    NotIp { ethertype: u16 },
    #[error("truncated {layer}: needs {need} bytes, {have} present")]
    Truncated {
        layer: Layer,
        need: usize,
        have: usize,
    },
    #[error("IP version {version} where {expected} was expected")]
    BadVersion { version: u8, expected: &'static str },
    #[error("IPv4 header length {ihl} (in 32-bit words) is below the minimum of 5")]
    BadHeaderLength { ihl: u8 },
    #[error("IPv4 total length {total} is shorter than its {header}-byte header")]
    BadTotalLength { total: u16, header: usize },
    #[error("malformed IPv6 extension header: {0}")]
    BadExtension(String),
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q, 802.1ad and the pre-standard QinQ tag.
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const ETHERNET_HEADER: usize = 14;
const VLAN_TAG: usize = 4;

/// Parses one frame of the given link type.
pub fn parse(link: LinkType, frame: &[u8]) -> Result<Parsed, WireError> {
    match link {
        LinkType::Ethernet => {
            let (ethertype, ip_offset) = ethernet(frame)?;
            match ethertype {
                ETHERTYPE_IPV4 => ipv4(frame, ip_offset),
                ETHERTYPE_IPV6 => ipv6(frame, ip_offset),
                ethertype => Err(WireError::NotIp { ethertype }),
            }
        }
        LinkType::RawIp => match frame.first().map(|b| b >> 4) {
            Some(4) => ipv4(frame, 0),
            Some(6) => ipv6(frame, 0),
            Some(version) => Err(WireError::BadVersion {
                version,
                expected: "4 or 6",
            }),
            None => Err(WireError::Truncated {
                layer: Layer::Ipv4,
                need: 20,
                have: 0,
            }),
        },
        LinkType::Ipv4 => ipv4(frame, 0),
        LinkType::Ipv6 => ipv6(frame, 0),
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            let (at, header) = match link {
                LinkType::LinuxSll => (14, 16),
                _ => (0, 20),
            };
            let ethertype =
                be16(frame, at)
                    .filter(|_| frame.len() >= header)
                    .ok_or(WireError::Truncated {
                        layer: Layer::LinuxSll,
                        need: header,
                        have: frame.len(),
                    })?;
            match ethertype {
                ETHERTYPE_IPV4 => ipv4(frame, header),
                ETHERTYPE_IPV6 => ipv6(frame, header),
                ethertype => Err(WireError::NotIp { ethertype }),
            }
        }
    }
}

/// The ethertype after any VLAN tags, and where the payload starts.
fn ethernet(frame: &[u8]) -> Result<(u16, usize), WireError> {
    let mut ethertype = be16(frame, 12).ok_or(WireError::Truncated {
        layer: Layer::Ethernet,
        need: ETHERNET_HEADER,
        have: frame.len(),
    })?;
    let mut offset = ETHERNET_HEADER;
    while ETHERTYPE_VLAN.contains(&ethertype) {
        // The tag is TCI (2 bytes) then the inner ethertype.
        ethertype = be16(frame, offset + 2).ok_or(WireError::Truncated {
            layer: Layer::Vlan,
            need: offset + VLAN_TAG,
            have: frame.len(),
        })?;
        offset += VLAN_TAG;
    }
    Ok((ethertype, offset))
}

fn ipv4(frame: &[u8], ip_offset: usize) -> Result<Parsed, WireError> {
    let bytes = frame.get(ip_offset..).unwrap_or_default();
    let have = bytes.len();
    version(bytes, 4, "4")?;
    let header = Ipv4HeaderSlice::from_slice(bytes).map_err(|e| {
        use etherparse::err::ipv4::{HeaderError, HeaderSliceError};
        match e {
            HeaderSliceError::Len(l) => WireError::Truncated {
                layer: Layer::Ipv4,
                need: l.required_len,
                have,
            },
            HeaderSliceError::Content(HeaderError::UnexpectedVersion { version_number }) => {
                WireError::BadVersion {
                    version: version_number,
                    expected: "4",
                }
            }
            HeaderSliceError::Content(HeaderError::HeaderLengthSmallerThanHeader { ihl }) => {
                WireError::BadHeaderLength { ihl }
            }
        }
    })?;
    let header_len = header.slice().len();
    let total = header.total_len();
    let len = match usize::from(total) {
        0 => have,
        t if t < header_len => {
            return Err(WireError::BadTotalLength {
                total,
                header: header_len,
            })
        }
        t => t.min(have),
    };
    let proto = header.protocol().0;
    // Offset in 8-byte units; only the first fragment carries the ports.
    let first_fragment = header.fragments_offset().value() == 0;
    let (sport, dport) = if first_fragment {
        ports(proto, bytes.get(header_len..len).unwrap_or_default())?
    } else {
        (0, 0)
    };
    Ok(Parsed {
        key: FlowKey::v4(
            header.source_addr(),
            header.destination_addr(),
            proto,
            sport,
            dport,
        ),
        len: billed(len),
        ip_offset,
    })
}

fn ipv6(frame: &[u8], ip_offset: usize) -> Result<Parsed, WireError> {
    let bytes = frame.get(ip_offset..).unwrap_or_default();
    let have = bytes.len();
    version(bytes, 6, "6")?;
    let header = Ipv6HeaderSlice::from_slice(bytes).map_err(|e| {
        use etherparse::err::ipv6::{HeaderError, HeaderSliceError};
        match e {
            HeaderSliceError::Len(l) => WireError::Truncated {
                layer: Layer::Ipv6,
                need: l.required_len,
                have,
            },
            HeaderSliceError::Content(HeaderError::UnexpectedVersion { version_number }) => {
                WireError::BadVersion {
                    version: version_number,
                    expected: "6",
                }
            }
        }
    })?;
    const HEADER: usize = 40;
    // A payload length of 0 is a jumbogram or an offloaded send: bill what is there.
    let len = match usize::from(header.payload_length()) {
        0 => have,
        p => (HEADER + p).min(have),
    };
    let after = bytes.get(HEADER..len).unwrap_or_default();
    let (exts, next, upper) = Ipv6ExtensionsSlice::from_slice(header.next_header(), after)
        .map_err(|e| {
            use etherparse::err::ipv6_exts::HeaderSliceError;
            match e {
                HeaderSliceError::Len(l) => WireError::Truncated {
                    layer: Layer::Ipv6Extension,
                    need: HEADER + l.layer_start_offset + l.required_len,
                    have: len,
                },
                HeaderSliceError::Content(c) => WireError::BadExtension(c.to_string()),
            }
        })?;
    // Read the offset from the bytes as RFC 8200 §4.5 lays them out (13 bits,
    // 2 reserved, M): etherparse 0.18.s `fragment_offset()` does not.
    let first_fragment = exts.into_iter().all(|ext| match ext {
        Ipv6ExtensionSlice::Fragment(f) => !matches!(be16(f.slice(), 2), Some(w) if w >> 3 != 0),
        _ => true,
    });
    let (sport, dport) = if first_fragment {
        ports(next.0, upper)?
    } else {
        (0, 0)
    };
    let mut key = FlowKey::v6(
        header.source_addr(),
        header.destination_addr(),
        next.0,
        sport,
        dport,
    );
    key.flow_label = header.flow_label().value();
    Ok(Parsed {
        key,
        len: billed(len),
        ip_offset,
    })
}

/// A wrong version says more than a short header does, so it is checked first.
fn version(ip: &[u8], want: u8, expected: &'static str) -> Result<(), WireError> {
    match ip.first().map(|b| b >> 4) {
        Some(version) if version != want => Err(WireError::BadVersion { version, expected }),
        _ => Ok(()),
    }
}

/// Source and destination ports of TCP, UDP and SCTP, which all start with
/// them; 0 for other protocols.
fn ports(proto: u8, transport: &[u8]) -> Result<(u16, u16), WireError> {
    let (layer, need) = match IpNumber(proto) {
        IpNumber::TCP => (Layer::Tcp, 20),
        IpNumber::UDP => (Layer::Udp, 8),
        IpNumber::SCTP => (Layer::Sctp, 12),
        _ => return Ok((0, 0)),
    };
    match (
        transport.len() >= need,
        be16(transport, 0),
        be16(transport, 2),
    ) {
        (true, Some(s), Some(d)) => Ok((s, d)),
        _ => Err(WireError::Truncated {
            layer,
            need,
            have: transport.len(),
        }),
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// IP packets are at most 64 KiB (or a jumbogram's 4 GiB); a capture frame
/// cannot exceed u32 either, but saturate rather than trust it.
fn billed(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::proto;

    const MACS: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = MACS.to_vec();
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A 20-byte IPv4 header; checksums are not looked at.
    fn ipv4_header(proto: u8, total: u16, frag: u16) -> Vec<u8> {
        let mut h = vec![0x45, 0];
        h.extend_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&[0, 1]);
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 1, 1]);
        h
    }

    fn ipv4_udp(payload: usize) -> Vec<u8> {
        let total = 20 + 8 + payload as u16;
        let mut p = ipv4_header(proto::UDP, total, 0);
        p.extend_from_slice(&[0x30, 0x39, 0x13, 0x89]); // 12345 -> 5001
        p.extend_from_slice(&(8 + payload as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend(std::iter::repeat_n(0xab, payload));
        p
    }

    #[test]
    fn ipv4_tcp_over_ethernet() {
        let mut ip = ipv4_header(proto::TCP, 40, 0);
        ip.extend_from_slice(&[0x00, 0x50, 0xc0, 0x01]); // 80 -> 49153
        ip.extend_from_slice(&[0; 16]);
        let p = parse(LinkType::Ethernet, &eth(0x0800, &ip)).unwrap();
        assert_eq!(
            p.key,
            FlowKey::v4(
                [10, 0, 0, 1].into(),
                [10, 0, 1, 1].into(),
                proto::TCP,
                80,
                49153
            )
        );
        assert_eq!(p.len, 40);
        assert_eq!(p.ip_offset, 14);
    }

    #[test]
    fn ipv4_udp_bills_ip_length_not_padding() {
        // A 46-byte minimum Ethernet payload padded after a 28-byte packet.
        let mut ip = ipv4_udp(0);
        ip.resize(46, 0);
        let p = parse(LinkType::Ethernet, &eth(0x0800, &ip)).unwrap();
        assert_eq!(p.len, 28);
        assert_eq!(
            (p.key.sport, p.key.dport, p.key.proto),
            (12345, 5001, proto::UDP)
        );
    }

    #[test]
    fn linux_cooked_captures_of_both_versions() {
        let ip = ipv4_udp(10);
        // SLL: packet type, ARPHRD, address length, 8 address bytes, ethertype.
        let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ip);
        let p = parse(LinkType::LinuxSll, &sll).unwrap();
        assert_eq!((p.len, p.ip_offset, p.key.dport), (38, 16, 5001));
        // SLL2: ethertype, reserved, ifindex, ARPHRD, type, address length, address.
        let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6];
        sll2.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0]);
        sll2.extend_from_slice(&ip);
        let p = parse(LinkType::LinuxSll2, &sll2).unwrap();
        assert_eq!((p.len, p.ip_offset), (38, 20));
        // ARP in a cooked capture is not IP; a short header is truncated.
        sll[14..16].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(
            parse(LinkType::LinuxSll, &sll),
            Err(WireError::NotIp { ethertype: 0x0806 })
        );
        assert!(matches!(
            parse(LinkType::LinuxSll2, &sll2[..19]),
            Err(WireError::Truncated { need: 20, .. })
        ));
    }

    #[test]
    fn snap_length_caps_the_billed_length() {
        let ip = ipv4_udp(1000);
        let p = parse(LinkType::RawIp, &ip[..100]).unwrap();
        assert_eq!(p.len, 100);
    }

    #[test]
    fn ipv6_udp_with_flow_label() {
        let mut ip = vec![0x60, 0x0a, 0xbc, 0xde, 0, 10, proto::UDP, 64];
        let src: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: std::net::Ipv6Addr = "2001:db8:1::1".parse().unwrap();
        ip.extend_from_slice(&src.octets());
        ip.extend_from_slice(&dst.octets());
        ip.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e, 0, 10, 0, 0, 0xff, 0xff]); // 1234 -> 5678
        for (link, frame, off) in [
            (LinkType::Ethernet, eth(0x86dd, &ip), 14),
            (LinkType::RawIp, ip.clone(), 0),
            (LinkType::Ipv6, ip.clone(), 0),
        ] {
            let p = parse(link, &frame).unwrap();
            assert!(p.key.v6);
            assert_eq!(p.key.src_ip(), src);
            assert_eq!(p.key.dst_ip(), dst);
            assert_eq!(
                (p.key.sport, p.key.dport, p.key.proto),
                (1234, 5678, proto::UDP)
            );
            assert_eq!(p.key.flow_label, 0xabcde);
            assert_eq!(p.len, 50);
            assert_eq!(p.ip_offset, off);
        }
    }

    #[test]
    fn ipv6_fragments_carry_ports_only_in_the_first() {
        let frag = |offset_units: u16, more: bool| {
            let mut ip = vec![0x60, 0, 0, 0, 0, 16, 44, 64];
            ip.extend_from_slice(&[0x20, 1, 0x0d, 0xb8]);
            ip.extend_from_slice(&[0; 12]);
            ip.extend_from_slice(&[0x20, 1, 0x0d, 0xb8]);
            ip.extend_from_slice(&[0; 11]);
            ip.push(2);
            let off = (offset_units << 3) | u16::from(more);
            ip.extend_from_slice(&[proto::UDP, 0]);
            ip.extend_from_slice(&off.to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0, 7]);
            ip.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e, 0, 8, 0, 0]);
            ip
        };
        let first = parse(LinkType::RawIp, &frag(0, true)).unwrap();
        assert_eq!(
            (first.key.sport, first.key.dport, first.key.proto),
            (1234, 5678, proto::UDP)
        );
        let later = parse(LinkType::RawIp, &frag(100, false)).unwrap();
        assert_eq!(
            (later.key.sport, later.key.dport, later.key.proto),
            (0, 0, proto::UDP)
        );
        assert_eq!(later.len, 56);
    }

    #[test]
    fn vlan_tags_are_skipped() {
        let ip = ipv4_udp(4);
        let mut inner = vec![0x00, 0x0a, 0x08, 0x00]; // VID 10, then IPv4
        inner.extend_from_slice(&ip);
        let mut outer = vec![0x00, 0x64, 0x81, 0x00]; // S-tag VID 100, then a C-tag
        outer.extend_from_slice(&inner);
        let one = parse(LinkType::Ethernet, &eth(0x8100, &inner)).unwrap();
        assert_eq!((one.ip_offset, one.len, one.key.dport), (18, 32, 5001));
        let two = parse(LinkType::Ethernet, &eth(0x88a8, &outer)).unwrap();
        assert_eq!((two.ip_offset, two.len, two.key.dport), (22, 32, 5001));
        assert_eq!(
            parse(LinkType::Ethernet, &eth(0x8100, &[0, 1, 8])),
            Err(WireError::Truncated {
                layer: Layer::Vlan,
                need: 18,
                have: 17
            })
        );
    }

    #[test]
    fn arp_is_not_ip() {
        let arp = [
            0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
        ];
        assert_eq!(
            parse(LinkType::Ethernet, &eth(0x0806, &arp)),
            Err(WireError::NotIp { ethertype: 0x0806 })
        );
    }

    #[test]
    fn truncated_and_malformed_frames_are_errors() {
        let ip = ipv4_udp(0);
        assert!(matches!(
            parse(LinkType::Ethernet, &[0; 13]),
            Err(WireError::Truncated {
                layer: Layer::Ethernet,
                ..
            })
        ));
        assert_eq!(
            parse(LinkType::Ethernet, &eth(0x0800, &ip[..19])),
            Err(WireError::Truncated {
                layer: Layer::Ipv4,
                need: 20,
                have: 19
            })
        );
        // The whole IP header but only half of the UDP header.
        assert_eq!(
            parse(LinkType::RawIp, &ip[..24]),
            Err(WireError::Truncated {
                layer: Layer::Udp,
                need: 8,
                have: 4
            })
        );
        assert_eq!(
            parse(LinkType::RawIp, &[]),
            Err(WireError::Truncated {
                layer: Layer::Ipv4,
                need: 20,
                have: 0
            })
        );
        assert_eq!(
            parse(LinkType::RawIp, &[0x50; 40]),
            Err(WireError::BadVersion {
                version: 5,
                expected: "4 or 6"
            })
        );
        assert_eq!(
            parse(LinkType::Ipv6, &ip),
            Err(WireError::BadVersion {
                version: 4,
                expected: "6"
            })
        );
        let mut short_ihl = ip.clone();
        short_ihl[0] = 0x44;
        assert_eq!(
            parse(LinkType::Ipv4, &short_ihl),
            Err(WireError::BadHeaderLength { ihl: 4 })
        );
        let mut short_total = ip.clone();
        short_total[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(
            parse(LinkType::Ipv4, &short_total),
            Err(WireError::BadTotalLength {
                total: 10,
                header: 20
            })
        );
    }

    #[test]
    fn ipv4_fragments_carry_ports_only_in_the_first() {
        let mut first = ipv4_udp(100);
        first[6..8].copy_from_slice(&0x2000u16.to_be_bytes()); // MF, offset 0
        let p = parse(LinkType::RawIp, &first).unwrap();
        assert_eq!((p.key.sport, p.key.dport), (12345, 5001));

        // Offset 185 * 8 = 1480: no transport header at all, and that is fine.
        let mut later = ipv4_header(proto::UDP, 20 + 3, 185);
        later.extend_from_slice(&[1, 2, 3]);
        let p = parse(LinkType::RawIp, &later).unwrap();
        assert_eq!(
            (p.key.sport, p.key.dport, p.key.proto, p.len),
            (0, 0, proto::UDP, 23)
        );
    }

    #[test]
    fn icmp_has_no_ports_and_tso_total_length_zero_bills_the_frame() {
        let mut ip = ipv4_header(proto::ICMP, 0, 0);
        ip.extend_from_slice(&[8, 0, 0, 0, 0, 1, 0, 1]);
        let p = parse(LinkType::Ipv4, &ip).unwrap();
        assert_eq!((p.key.sport, p.key.dport, p.len), (0, 0, 28));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(frame in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            for link in [LinkType::Ethernet, LinkType::RawIp, LinkType::Ipv4, LinkType::Ipv6] {
                if let Ok(p) = parse(link, &frame) {
                    proptest::prop_assert!(p.ip_offset + p.len as usize <= frame.len());
                }
            }
        }

        #[test]
        fn never_panics_on_mostly_valid_headers(
            mut frame in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
            v6 in proptest::bool::ANY,
        ) {
            // Steer the fuzzer past the version check so the deeper layers get exercised.
            if let Some(b) = frame.first_mut() {
                *b = if v6 { 0x60 | (*b & 0xf) } else { 0x45 };
            }
            if let Ok(p) = parse(LinkType::RawIp, &frame) {
                proptest::prop_assert!(p.len as usize <= frame.len());
            }
        }
    }
}
