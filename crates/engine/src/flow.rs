//! Flow identifiers and the masks that group packets into flows.
//!
//! A [`FlowKey`] is the 5-tuple (plus IPv6 flow label) that ipfw's dummynet
//! calls the flow id. A [`FlowMask`] keeps only some of its bits, as FreeBSD's
//! `mask` option does: packets whose masked keys are equal share a queue (for a
//! flowset mask) or a scheduler instance (for a scheduler mask).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol numbers the language names.
pub mod proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

/// The identity of a packet's flow. IPv4 addresses are stored in the low 32 bits
/// of `src`/`dst` with `v6 == false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct FlowKey {
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub v6: bool,
    /// IPv6 flow label (20 bits); 0 for IPv4.
    pub flow_label: u32,
}

impl FlowKey {
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, sport: u16, dport: u16) -> Self {
        FlowKey {
            src: u128::from(u32::from(src)),
            dst: u128::from(u32::from(dst)),
            sport,
            dport,
            proto,
            v6: false,
            flow_label: 0,
        }
    }

    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, sport: u16, dport: u16) -> Self {
        FlowKey {
            src: u128::from(src),
            dst: u128::from(dst),
            sport,
            dport,
            proto,
            v6: true,
            flow_label: 0,
        }
    }

    pub fn src_ip(&self) -> IpAddr {
        addr(self.src, self.v6)
    }

    pub fn dst_ip(&self) -> IpAddr {
        addr(self.dst, self.v6)
    }
}

fn addr(bits: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(bits))
    } else {
        IpAddr::V4(Ipv4Addr::from(bits as u32))
    }
}

/// FreeBSD's `ipfw_flow_id` mask: separate IPv4 and IPv6 address masks, ports,
/// protocol and IPv6 flow label. All-zero (the default) means "no mask": every
/// packet maps to the same flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowMask {
    pub dst_ip: u32,
    pub src_ip: u32,
    pub dst_ip6: u128,
    pub src_ip6: u128,
    pub dst_port: u16,
    pub src_port: u16,
    pub proto: u8,
    pub flow_id: u32,
}

impl FlowMask {
    /// `mask all`: every field significant.
    pub const ALL: FlowMask = FlowMask {
        dst_ip: u32::MAX,
        src_ip: u32::MAX,
        dst_ip6: u128::MAX,
        src_ip6: u128::MAX,
        dst_port: u16::MAX,
        src_port: u16::MAX,
        proto: u8::MAX,
        flow_id: 0xf_ffff,
    };

    pub fn is_empty(&self) -> bool {
        *self == FlowMask::default()
    }

    /// The masked flow id: the key of the queue or instance a packet belongs to.
    /// The IP version is kept whenever the mask is not empty, so an IPv4 and an
    /// IPv6 flow never share a masked id by accident.
    #[inline]
    pub fn apply(&self, k: &FlowKey) -> FlowKey {
        if self.is_empty() {
            return FlowKey::default();
        }
        let (sm, dm) = if k.v6 {
            (self.src_ip6, self.dst_ip6)
        } else {
            (u128::from(self.src_ip), u128::from(self.dst_ip))
        };
        FlowKey {
            src: k.src & sm,
            dst: k.dst & dm,
            sport: k.sport & self.src_port,
            dport: k.dport & self.dst_port,
            proto: k.proto & self.proto,
            v6: k.v6,
            flow_label: if k.v6 { k.flow_label & self.flow_id } else { 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_mask_collapses_everything() {
        let a = FlowKey::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), proto::TCP, 1, 2);
        let b = FlowKey::v4([10, 0, 0, 3].into(), [10, 0, 0, 4].into(), proto::UDP, 3, 4);
        let m = FlowMask::default();
        assert_eq!(m.apply(&a), m.apply(&b));
    }

    #[test]
    fn dst_host_mask_separates_hosts_only() {
        let m = FlowMask {
            dst_ip: 0xff,
            ..FlowMask::default()
        };
        let a = FlowKey::v4([1, 1, 1, 1].into(), [10, 1, 2, 7].into(), proto::TCP, 1, 2);
        let b = FlowKey::v4([2, 2, 2, 2].into(), [10, 9, 9, 7].into(), proto::UDP, 3, 4);
        let c = FlowKey::v4([1, 1, 1, 1].into(), [10, 1, 2, 8].into(), proto::TCP, 1, 2);
        assert_eq!(m.apply(&a), m.apply(&b));
        assert_ne!(m.apply(&a), m.apply(&c));
        assert_eq!(m.apply(&a).dst, 7);
    }

    #[test]
    fn mask_all_keeps_the_five_tuple() {
        let a = FlowKey::v4([1, 1, 1, 1].into(), [2, 2, 2, 2].into(), proto::TCP, 10, 20);
        assert_eq!(FlowMask::ALL.apply(&a), a);
        let b = FlowKey { sport: 11, ..a };
        assert_ne!(FlowMask::ALL.apply(&a), FlowMask::ALL.apply(&b));
    }

    #[test]
    fn v6_uses_v6_masks() {
        let m = FlowMask {
            dst_ip: u32::MAX,
            ..FlowMask::default()
        };
        let a = FlowKey::v6(
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
            proto::UDP,
            1,
            2,
        );
        let b = FlowKey::v6(
            "2001:db8::1".parse().unwrap(),
            "2001:db8::3".parse().unwrap(),
            proto::UDP,
            1,
            2,
        );
        // An IPv4 dst mask does not look at IPv6 addresses.
        assert_eq!(m.apply(&a), m.apply(&b));
        let m6 = FlowMask {
            dst_ip6: u128::MAX,
            ..FlowMask::default()
        };
        assert_ne!(m6.apply(&a), m6.apply(&b));
    }
}
