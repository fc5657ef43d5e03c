//! A live packet's bytes, one kind per backend: the [`PacketBody`] trait
//! says what the engine, `duplicate` and the captures read of it, and
//! [`Body`] lists the kinds, one line each. A new backend brings its own
//! kind (in its file, with the trait) and its line here.

use dummynet_io::nfqueue::HostPacket;

use crate::bridge::EtherFrame;
use crate::bridge_xdp::XdpBody;
use crate::host::IpCopy;

/// What every backend's packet tells the engine and the observer.
pub trait PacketBody {
    /// The Ethernet frame, for a bridged packet (`mac`, `layer2` rules);
    /// `None` for a host's, which is IP only.
    fn frame_bytes(&self) -> Option<&[u8]>;
    /// The IP packet, if it is one (ECN marking, checksums).
    fn ip_bytes(&self) -> Option<&[u8]>;
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]>;
    /// The copy `duplicate` makes, or `None` for a packet that cannot be
    /// copied (one the kernel holds for its verdict).
    fn duplicate(&self) -> Option<Body>;
    /// What a capture keeps: the frame from its Ethernet header, or the
    /// packet from its IP header.
    fn wire_bytes(&self) -> &[u8];
}

/// The kinds, each a variant that holds the backend's own type; the trait
/// is answered by a `match` over them (no allocation, no indirect call).
macro_rules! bodies {
    ($($(#[$doc:meta])* $kind:ident($ty:ty),)*) => {
        /// A live packet's bytes, as the backend that read it keeps them.
        #[derive(Debug)]
        pub enum Body {
            $($(#[$doc])* $kind($ty),)*
        }

        impl PacketBody for Body {
            #[inline]
            fn frame_bytes(&self) -> Option<&[u8]> {
                match self { $(Body::$kind(b) => b.frame_bytes(),)* }
            }
            #[inline]
            fn ip_bytes(&self) -> Option<&[u8]> {
                match self { $(Body::$kind(b) => b.ip_bytes(),)* }
            }
            #[inline]
            fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
                match self { $(Body::$kind(b) => b.ip_bytes_mut(),)* }
            }
            #[inline]
            fn duplicate(&self) -> Option<Body> {
                match self { $(Body::$kind(b) => b.duplicate(),)* }
            }
            #[inline]
            fn wire_bytes(&self) -> &[u8] {
                match self { $(Body::$kind(b) => b.wire_bytes(),)* }
            }
        }
    };
}

bodies! {
    /// An Ethernet frame of the AF_PACKET bridge (or a copy of any bridged one).
    Frame(EtherFrame),
    /// A packet held by the kernel until we give a verdict (host mode).
    Host(HostPacket),
    /// A copy of one of the host's own outgoing IP packets (host mode).
    Ip(IpCopy),
    /// An Ethernet frame of the AF_XDP bridge, in its UMEM chunk.
    Xdp(XdpBody),
}

/// Where the IP header of an Ethernet frame starts, past up to two VLAN
/// tags; `None` if the frame does not carry IPv4 or IPv6.
pub(crate) fn ip_offset(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..3 {
        let ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        match ethertype {
            0x0800 | 0x86dd => return Some(at + 2),
            0x8100 | 0x88a8 => at += 4,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::EtherFrame;
    use crate::Carrier;
    use dummynet_engine::Payload;

    fn frame(tags: &[u16], ethertype: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        for t in tags {
            f.extend_from_slice(&t.to_be_bytes());
            f.extend_from_slice(&[0, 7]);
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&[0x45, 0x02]);
        f
    }

    #[test]
    fn the_ip_header_is_found_past_vlan_tags() {
        assert_eq!(ip_offset(&frame(&[], 0x0800)), Some(14));
        assert_eq!(ip_offset(&frame(&[0x8100], 0x86dd)), Some(18));
        assert_eq!(ip_offset(&frame(&[0x88a8, 0x8100], 0x0800)), Some(22));
        assert_eq!(ip_offset(&frame(&[], 0x0806)), None, "ARP is not IP");
        assert_eq!(ip_offset(&[0u8; 13]), None, "too short");
        let c = Carrier {
            backend: 0,
            out_pass: None,
            id: 0,
            copy: false,
            reader: 0,
            body: Body::Frame(EtherFrame {
                buf: frame(&[0x8100], 0x0800),
                vnet: None,
                port: 0,
            }),
        };
        assert_eq!(c.ip_bytes(), Some(&[0x45, 0x02][..]));
    }
}
