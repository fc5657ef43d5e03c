//! Rule bodies compiled to integer comparisons.

use std::net::IpAddr;

use crate::config::{AddrMatch, Cond, CondKind, IfaceSpec, PortRange};
use crate::flow::proto;
use crate::packet::{Direction, IfaceId, PacketInfo};

/// The engine's interface names, interned so that rules compare ids.
#[derive(Debug, Default, Clone)]
pub(crate) struct Interfaces {
    names: Vec<String>,
}

impl Interfaces {
    pub fn intern(&mut self, name: &str) -> IfaceId {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return IfaceId(i as u16);
        }
        self.names.push(name.to_string());
        IfaceId((self.names.len() - 1) as u16)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn name(&self, id: IfaceId) -> Option<&str> {
        self.names.get(usize::from(id.0)).map(String::as_str)
    }
}

/// An address condition entry: IPv4 entries never match IPv6 packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Net {
    v6: bool,
    addr: u128,
    mask: u128,
}

impl Net {
    fn new(m: &AddrMatch) -> Self {
        match m.addr {
            IpAddr::V4(a) => {
                let prefix = u32::from(m.prefix.min(32));
                let mask = if prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - prefix)
                };
                Net {
                    v6: false,
                    addr: u128::from(u32::from(a) & mask),
                    mask: u128::from(mask),
                }
            }
            IpAddr::V6(a) => {
                let prefix = u32::from(m.prefix.min(128));
                let mask = if prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - prefix)
                };
                Net {
                    v6: true,
                    addr: u128::from(a) & mask,
                    mask,
                }
            }
        }
    }

    #[inline]
    fn contains(&self, v6: bool, a: u128) -> bool {
        self.v6 == v6 && a & self.mask == self.addr
    }
}

/// Interfaces as a rule sees them: a bitmap over interned ids, so patterns
/// are resolved once per interface rather than once per packet.
#[derive(Debug, Clone, PartialEq, Eq)]
enum IfMatch {
    /// `any`: the packet has such an interface.
    Any,
    /// Bit i set: interface id i matches. Grown when new interfaces appear.
    Set {
        pattern: Option<String>,
        name: Option<String>,
        bits: Vec<u64>,
    },
}

impl IfMatch {
    fn new(spec: &IfaceSpec, ifs: &mut Interfaces) -> Self {
        match spec {
            IfaceSpec::Any => IfMatch::Any,
            IfaceSpec::Name(n) => {
                let id = ifs.intern(n);
                let mut m = IfMatch::Set {
                    pattern: None,
                    name: Some(n.clone()),
                    bits: Vec::new(),
                };
                m.set(id);
                m
            }
            IfaceSpec::Pattern(p) => {
                let mut m = IfMatch::Set {
                    pattern: Some(p.clone()),
                    name: None,
                    bits: Vec::new(),
                };
                for i in 0..ifs.len() {
                    let id = IfaceId(i as u16);
                    if ifs.name(id).is_some_and(|n| glob(p, n)) {
                        m.set(id);
                    }
                }
                m
            }
        }
    }

    fn set(&mut self, id: IfaceId) {
        if let IfMatch::Set { bits, .. } = self {
            let (w, b) = (usize::from(id.0) / 64, id.0 % 64);
            if bits.len() <= w {
                bits.resize(w + 1, 0);
            }
            bits[w] |= 1 << b;
        }
    }

    /// A new interface was interned: patterns may now match it.
    fn learn(&mut self, id: IfaceId, name: &str) {
        let hit = matches!(self, IfMatch::Set { pattern: Some(p), .. } if glob(p, name));
        if hit {
            self.set(id);
        }
    }

    #[inline]
    fn matches(&self, iface: Option<IfaceId>) -> bool {
        match (self, iface) {
            (_, None) => false,
            (IfMatch::Any, Some(_)) => true,
            (IfMatch::Set { bits, .. }, Some(id)) => bits
                .get(usize::from(id.0) / 64)
                .is_some_and(|w| w & (1 << (id.0 % 64)) != 0),
        }
    }
}

/// Shell-style `*` and `?` matching, as ipfw accepts for interface names.
fn glob(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Test {
    Proto(u8),
    V6(bool),
    Src(Vec<Net>),
    Dst(Vec<Net>),
    SrcPort(Vec<PortRange>),
    DstPort(Vec<PortRange>),
    Dir(Direction),
    Recv(IfMatch),
    Xmit(IfMatch),
    Via(IfMatch),
}

/// A compiled body: every test must pass (each may be negated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Compiled {
    tests: Vec<(bool, Test)>,
}

pub(crate) fn compile(body: &[Cond], ifs: &mut Interfaces) -> Compiled {
    let tests = body
        .iter()
        .map(|c| {
            let t = match &c.kind {
                CondKind::Proto(p) => Test::Proto(*p),
                CondKind::IpVersion(v) => Test::V6(*v == 6),
                CondKind::SrcAddr(a) => Test::Src(a.iter().map(Net::new).collect()),
                CondKind::DstAddr(a) => Test::Dst(a.iter().map(Net::new).collect()),
                CondKind::SrcPort(p) => Test::SrcPort(p.clone()),
                CondKind::DstPort(p) => Test::DstPort(p.clone()),
                CondKind::Dir(d) => Test::Dir(*d),
                CondKind::Recv(i) => Test::Recv(IfMatch::new(i, ifs)),
                CondKind::Xmit(i) => Test::Xmit(IfMatch::new(i, ifs)),
                CondKind::Via(i) => Test::Via(IfMatch::new(i, ifs)),
            };
            (c.negate, t)
        })
        .collect();
    Compiled { tests }
}

/// Ports exist for these protocols only; a port test fails for others, as in
/// FreeBSD (which also fails it for non-first fragments, whose ports the wire
/// parser reports as 0).
#[inline]
fn has_ports(p: u8) -> bool {
    matches!(
        p,
        proto::TCP | proto::UDP | 132 /* SCTP */ | 136 /* UDP-Lite */
    )
}

#[inline]
fn in_ranges(ranges: &[PortRange], port: u16) -> bool {
    ranges.iter().any(|r| r.lo <= port && port <= r.hi)
}

/// Whether a rule matches every packet of some kind, none of them, or
/// some only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tri {
    Always,
    Never,
    Maybe,
}

impl Compiled {
    #[inline]
    pub fn matches(&self, p: &PacketInfo) -> bool {
        self.tests.iter().all(|(negate, t)| t.eval(p) != *negate)
    }

    /// Whether the body matches packets coming `in` on `recv_if` with no
    /// transmit interface yet: the direction and interface tests decide
    /// for all of them; any other test (addresses, ports, protocol) may go
    /// either way.
    pub fn decides_in(&self, recv_if: IfaceId) -> Tri {
        let mut all = true;
        for (negate, t) in &self.tests {
            let known = match t {
                Test::Dir(d) => Some(*d == Direction::In),
                Test::Recv(m) | Test::Via(m) => Some(m.matches(Some(recv_if))),
                Test::Xmit(m) => Some(m.matches(None)),
                Test::Proto(_)
                | Test::V6(_)
                | Test::Src(_)
                | Test::Dst(_)
                | Test::SrcPort(_)
                | Test::DstPort(_) => None,
            };
            match known {
                Some(v) if v == *negate => return Tri::Never,
                Some(_) => {}
                None => all = false,
            }
        }
        if all {
            Tri::Always
        } else {
            Tri::Maybe
        }
    }

    /// The body says `in` or `out` (a `not` included).
    pub fn has_direction(&self) -> bool {
        self.tests.iter().any(|(_, t)| matches!(t, Test::Dir(_)))
    }

    /// The body matches every packet (`ip from any to any`, or nothing).
    pub fn matches_all(&self) -> bool {
        self.tests.is_empty()
    }

    /// Interface `id` was just interned with `name`.
    pub fn learn_iface(&mut self, id: IfaceId, name: &str) {
        for (_, t) in &mut self.tests {
            if let Test::Recv(m) | Test::Xmit(m) | Test::Via(m) = t {
                m.learn(id, name);
            }
        }
    }
}

impl Test {
    #[inline]
    fn eval(&self, p: &PacketInfo) -> bool {
        let k = &p.key;
        match self {
            Test::Proto(n) => k.proto == *n,
            Test::V6(v6) => k.v6 == *v6,
            Test::Src(nets) => nets.iter().any(|n| n.contains(k.v6, k.src)),
            Test::Dst(nets) => nets.iter().any(|n| n.contains(k.v6, k.dst)),
            Test::SrcPort(r) => has_ports(k.proto) && in_ranges(r, k.sport),
            Test::DstPort(r) => has_ports(k.proto) && in_ranges(r, k.dport),
            Test::Dir(d) => p.dir == *d,
            Test::Recv(m) => m.matches(p.recv_if),
            Test::Xmit(m) => m.matches(p.xmit_if),
            Test::Via(m) => match p.dir {
                Direction::In => m.matches(p.recv_if),
                Direction::Out => m.matches(p.xmit_if),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowKey;

    fn pkt(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> PacketInfo {
        PacketInfo {
            len: 100,
            key: FlowKey::v4(src.into(), dst.into(), proto, sport, dport),
            dir: Direction::In,
            recv_if: None,
            xmit_if: None,
        }
    }

    fn net(s: &str, prefix: u8) -> AddrMatch {
        AddrMatch {
            addr: s.parse().unwrap(),
            prefix,
        }
    }

    #[test]
    fn glob_patterns() {
        assert!(glob("ppp*", "ppp0"));
        assert!(glob("ppp*", "ppp"));
        assert!(!glob("ppp*", "eth0"));
        assert!(glob("e?h0", "eth0"));
        assert!(glob("*", ""));
        assert!(!glob("eth0", "eth01"));
    }

    #[test]
    fn address_prefixes_and_negation() {
        let mut ifs = Interfaces::default();
        let c = compile(
            &[Cond::new(CondKind::SrcAddr(vec![net("10.0.1.0", 24)]))],
            &mut ifs,
        );
        assert!(c.matches(&pkt([10, 0, 1, 77], [1, 1, 1, 1], proto::TCP, 1, 2)));
        assert!(!c.matches(&pkt([10, 0, 2, 77], [1, 1, 1, 1], proto::TCP, 1, 2)));
        let n = compile(
            &[Cond::not(CondKind::SrcAddr(vec![net("10.0.1.0", 24)]))],
            &mut ifs,
        );
        assert!(!n.matches(&pkt([10, 0, 1, 77], [1, 1, 1, 1], proto::TCP, 1, 2)));
        // A /0 matches every IPv4 address but no IPv6 one.
        let any4 = compile(
            &[Cond::new(CondKind::DstAddr(vec![net("0.0.0.0", 0)]))],
            &mut ifs,
        );
        assert!(any4.matches(&pkt([1, 2, 3, 4], [5, 6, 7, 8], 0, 0, 0)));
        let mut v6 = pkt([0; 4], [0; 4], proto::UDP, 1, 2);
        v6.key.v6 = true;
        assert!(!any4.matches(&v6));
    }

    #[test]
    fn ports_only_for_port_protocols() {
        let mut ifs = Interfaces::default();
        let c = compile(
            &[Cond::new(CondKind::DstPort(vec![
                PortRange { lo: 80, hi: 80 },
                PortRange { lo: 1000, hi: 2000 },
            ]))],
            &mut ifs,
        );
        assert!(c.matches(&pkt([1; 4], [2; 4], proto::TCP, 5, 80)));
        assert!(c.matches(&pkt([1; 4], [2; 4], proto::UDP, 5, 1500)));
        assert!(!c.matches(&pkt([1; 4], [2; 4], proto::UDP, 5, 2001)));
        assert!(!c.matches(&pkt([1; 4], [2; 4], proto::ICMP, 0, 80)));
    }

    #[test]
    fn direction_and_interface_decide_a_rule_for_all_incoming_packets() {
        let mut ifs = Interfaces::default();
        let app = ifs.intern("app");
        let peer = ifs.intern("peer");
        let body = |conds: &[Cond], ifs: &mut Interfaces| compile(conds, ifs);
        let in_app = body(
            &[
                Cond::new(CondKind::Dir(Direction::In)),
                Cond::new(CondKind::Recv(IfaceSpec::Name("app".into()))),
            ],
            &mut ifs,
        );
        assert_eq!(in_app.decides_in(app), Tri::Always);
        assert_eq!(in_app.decides_in(peer), Tri::Never);
        assert_eq!(Compiled::default().decides_in(peer), Tri::Always);
        let out = body(&[Cond::new(CondKind::Dir(Direction::Out))], &mut ifs);
        assert_eq!(out.decides_in(app), Tri::Never);
        let not_via_app = body(
            &[Cond::not(CondKind::Via(IfaceSpec::Pattern("a*".into())))],
            &mut ifs,
        );
        assert_eq!(not_via_app.decides_in(app), Tri::Never);
        assert_eq!(not_via_app.decides_in(peer), Tri::Always);
        // Nothing has a transmit interface on the way in.
        let xmit = body(&[Cond::new(CondKind::Xmit(IfaceSpec::Any))], &mut ifs);
        assert_eq!(xmit.decides_in(app), Tri::Never);
        let port = body(
            &[
                Cond::new(CondKind::Recv(IfaceSpec::Name("app".into()))),
                Cond::new(CondKind::DstPort(vec![PortRange { lo: 80, hi: 80 }])),
            ],
            &mut ifs,
        );
        assert_eq!(port.decides_in(app), Tri::Maybe);
        assert_eq!(port.decides_in(peer), Tri::Never);
    }

    #[test]
    fn interfaces_and_via() {
        let mut ifs = Interfaces::default();
        let em0 = ifs.intern("em0");
        let mut c = compile(
            &[Cond::new(CondKind::Via(IfaceSpec::Pattern("tun*".into())))],
            &mut ifs,
        );
        let tun3 = ifs.intern("tun3");
        c.learn_iface(tun3, "tun3");
        let mut p = pkt([1; 4], [2; 4], proto::TCP, 1, 2);
        p.recv_if = Some(tun3);
        assert!(c.matches(&p));
        p.dir = Direction::Out; // via looks at xmit for outgoing packets
        assert!(!c.matches(&p));
        p.xmit_if = Some(tun3);
        assert!(c.matches(&p));
        p.xmit_if = Some(em0);
        assert!(!c.matches(&p));
        let any = compile(&[Cond::new(CondKind::Recv(IfaceSpec::Any))], &mut ifs);
        assert!(any.matches(&p));
        p.recv_if = None;
        assert!(!any.matches(&p));
    }
}
