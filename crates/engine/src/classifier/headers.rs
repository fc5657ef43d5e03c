//! Header fields beyond the flow key (`ipttl`, `tcpflags`, `icmptypes`,
//! `mac`...), read from the packet's bytes only when a rule asks for one.
//!
//! Most rulesets never look past addresses and ports, which the caller
//! already parsed into [`crate::PacketInfo`]; so the bytes are read at most
//! once per walk through the rules, on the first test that needs them, and
//! never for a ruleset without such tests. Malformed or missing headers
//! read as "absent": the test fails, as FreeBSD fails a `tcpflags` test on
//! a packet too short to hold the flags.

use etherparse::{
    IpNumber, Ipv6ExtensionSlice, Ipv6ExtensionsSlice, TcpHeaderSlice, TcpOptionElement,
};

use crate::command::{frag_bit, tcp_option};
use crate::flow::proto;

/// The bytes a payload exposes: the IP packet, and the link frame if it
/// came with one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bytes<'a> {
    pub ip: Option<&'a [u8]>,
    pub frame: Option<&'a [u8]>,
}

/// IP-layer facts of one packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IpFacts {
    pub ttl: u8,
    pub tos: u8,
    pub len: u16,
    pub id: u16,
    /// [`frag_bit`]s.
    pub frag: u8,
    pub tcp: Option<TcpFacts>,
    /// The ICMP or ICMPv6 type, for a first fragment that has one.
    pub icmp_type: Option<u8>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TcpFacts {
    pub flags: u8,
    /// [`tcp_option`] bits.
    pub options: u8,
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    pub data_len: u16,
}

pub(crate) mod tcp_flag {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const ACK: u8 = 0x10;
}

/// The bytes of one packet and what has been read from them so far.
#[derive(Debug)]
pub(crate) struct View<'a> {
    bytes: &'a Bytes<'a>,
    ip: Option<Option<IpFacts>>,
}

impl<'a> View<'a> {
    pub fn new(bytes: &'a Bytes<'a>) -> Self {
        View { bytes, ip: None }
    }

    /// `None` if the packet has no readable IP header.
    #[inline]
    pub fn ip(&mut self) -> Option<&IpFacts> {
        if self.ip.is_none() {
            self.ip = Some(self.bytes.ip.and_then(read_ip));
        }
        self.ip.as_ref().and_then(Option::as_ref)
    }

    pub fn tcp(&mut self) -> Option<TcpFacts> {
        self.ip().and_then(|f| f.tcp)
    }

    /// The Ethernet header: destination, source and the outer type.
    pub fn ethernet(&self) -> Option<([u8; 6], [u8; 6], u16)> {
        let f = self.bytes.frame?;
        let dst = f.get(0..6)?.try_into().ok()?;
        let src = f.get(6..12)?.try_into().ok()?;
        let ty = u16::from_be_bytes(f.get(12..14)?.try_into().ok()?);
        Some((dst, src, ty))
    }

    pub fn has_frame(&self) -> bool {
        self.bytes.frame.is_some()
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn read_ip(ip: &[u8]) -> Option<IpFacts> {
    match ip.first()? >> 4 {
        4 => read_v4(ip),
        6 => read_v6(ip),
        _ => None,
    }
}

fn read_v4(ip: &[u8]) -> Option<IpFacts> {
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ihl < 20 || ip.len() < ihl {
        return None;
    }
    let len = be16(ip, 2)?;
    let off = be16(ip, 6)?;
    let mut frag = 0;
    if off & 0x1fff != 0 {
        frag |= frag_bit::OFFSET;
    }
    if off & 0x2000 != 0 {
        frag |= frag_bit::MF;
    }
    if off & 0x4000 != 0 {
        frag |= frag_bit::DF;
    }
    if off & 0x8000 != 0 {
        frag |= frag_bit::RF;
    }
    let end = usize::from(len).clamp(ihl, ip.len());
    let upper = (frag & frag_bit::OFFSET == 0).then(|| &ip[ihl..end]);
    let mut facts = IpFacts {
        ttl: ip[8],
        tos: ip[1],
        len,
        id: be16(ip, 4)?,
        frag,
        ..IpFacts::default()
    };
    transport(&mut facts, ip[9], upper);
    Some(facts)
}

fn read_v6(ip: &[u8]) -> Option<IpFacts> {
    const HEADER: usize = 40;
    if ip.len() < HEADER {
        return None;
    }
    let payload = be16(ip, 4)?;
    let end = (HEADER + usize::from(payload)).min(ip.len());
    let end = if payload == 0 { ip.len() } else { end };
    let mut facts = IpFacts {
        ttl: ip[7],
        tos: ((be16(ip, 0)? >> 4) & 0xff) as u8,
        len: (HEADER + usize::from(payload)).min(usize::from(u16::MAX)) as u16,
        ..IpFacts::default()
    };
    let after = &ip[HEADER..end];
    let Ok((exts, next, upper)) = Ipv6ExtensionsSlice::from_slice(IpNumber(ip[6]), after) else {
        return Some(facts);
    };
    let mut first = true;
    for ext in exts.clone().into_iter() {
        if let Ipv6ExtensionSlice::Fragment(f) = ext {
            // RFC 8200 §4.5: 13 bits of offset, 2 reserved, then M.
            let w = be16(f.slice(), 2).unwrap_or(0);
            if w >> 3 != 0 {
                facts.frag |= frag_bit::OFFSET;
                first = false;
            }
            if w & 1 != 0 {
                facts.frag |= frag_bit::MF;
            }
        }
    }
    transport(&mut facts, next.0, first.then_some(upper));
    Some(facts)
}

/// TCP and ICMP facts from a first fragment's transport bytes.
fn transport(facts: &mut IpFacts, p: u8, upper: Option<&[u8]>) {
    let Some(upper) = upper else { return };
    match p {
        proto::TCP => facts.tcp = read_tcp(upper),
        proto::ICMP | proto::ICMPV6 => facts.icmp_type = upper.first().copied(),
        _ => {}
    }
}

fn read_tcp(t: &[u8]) -> Option<TcpFacts> {
    let h = TcpHeaderSlice::from_slice(t).ok()?;
    let mut options = 0;
    for o in h.options_iterator() {
        options |= match o {
            Ok(TcpOptionElement::MaximumSegmentSize(_)) => tcp_option::MSS,
            Ok(TcpOptionElement::WindowScale(_)) => tcp_option::WINDOW,
            Ok(
                TcpOptionElement::SelectiveAcknowledgementPermitted
                | TcpOptionElement::SelectiveAcknowledgement(..),
            ) => tcp_option::SACK,
            Ok(TcpOptionElement::Timestamp(..)) => tcp_option::TS,
            Ok(TcpOptionElement::Noop) => 0,
            // etherparse does not know the obsolete CC options (11-13).
            Err(_) => break,
        };
    }
    let header = h.slice().len();
    Some(TcpFacts {
        flags: t[13],
        options,
        seq: h.sequence_number(),
        ack: h.acknowledgment_number(),
        win: h.window_size(),
        data_len: (t.len() - header).min(usize::from(u16::MAX)) as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP SYN with MSS and timestamp options.
    pub(crate) fn syn_v4() -> Vec<u8> {
        let mut p = vec![
            0x45, 0x10, 0, 0, 0x12, 0x34, 0x40, 0x00, 63, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let tcp = [
            0x30, 0x39, 0x00, 0x50, 0, 0, 0, 7, 0, 0, 0, 0, 0x90, 0x02, 0xff, 0xff, 0, 0, 0, 0, 2,
            4, 0x05, 0xb4, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        p.extend_from_slice(&tcp);
        p.extend_from_slice(b"hi");
        let len = p.len() as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p
    }

    #[test]
    fn ipv4_tcp_facts() {
        let p = syn_v4();
        let b = Bytes {
            ip: Some(&p),
            frame: None,
        };
        let mut v = View::new(&b);
        let ip = *v.ip().unwrap();
        assert_eq!(
            (ip.ttl, ip.tos, ip.id, ip.frag),
            (63, 0x10, 0x1234, frag_bit::DF)
        );
        assert_eq!(usize::from(ip.len), p.len());
        let tcp = ip.tcp.unwrap();
        assert_eq!(tcp.flags, tcp_flag::SYN);
        assert_eq!(tcp.options, tcp_option::MSS | tcp_option::TS);
        assert_eq!((tcp.seq, tcp.win, tcp.data_len), (7, 0xffff, 2));
    }

    #[test]
    fn later_fragments_and_garbage_have_no_transport() {
        let mut p = syn_v4();
        p[6] = 0x20; // MF, offset 8 bytes
        p[7] = 0x01;
        let b = Bytes {
            ip: Some(&p),
            frame: None,
        };
        let mut v = View::new(&b);
        let ip = *v.ip().unwrap();
        assert_eq!(ip.frag, frag_bit::MF | frag_bit::OFFSET);
        assert!(ip.tcp.is_none());
        for junk in [&[][..], &[0x45, 0, 0], &[0x4f; 30], &[0x60; 20]] {
            let b = Bytes {
                ip: Some(junk),
                frame: None,
            };
            let mut v = View::new(&b);
            assert!(v.ip().is_none_or(|f| f.tcp.is_none()), "{junk:?}");
        }
    }
}
