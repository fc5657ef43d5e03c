//! Rule bodies compiled to integer comparisons.

use std::net::IpAddr;

use crate::command::{
    AddrMatch, Bits, Cond, CondKind, IfaceSpec, LookupField, MacMatch, PortRange, TableRef,
    TableType,
};
use crate::flow::proto;
use crate::packet::{Direction, IfaceId, PacketInfo};

use super::headers::{tcp_flag, View};
use super::tables::{Slot, Table, TableError, Tables};

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
    /// A name in an interface table (with the value it must have).
    Table(Slot, Option<u32>),
    /// Bit i set: interface id i matches. Grown when new interfaces appear.
    Set {
        pattern: Option<String>,
        name: Option<String>,
        bits: Vec<u64>,
    },
}

impl IfMatch {
    fn new(
        spec: &IfaceSpec,
        ifs: &mut Interfaces,
        tables: &mut Tables,
    ) -> Result<Self, TableError> {
        Ok(match spec {
            IfaceSpec::Any => IfMatch::Any,
            IfaceSpec::Table(t) => IfMatch::Table(resolve(tables, t, TableType::Iface)?, t.value),
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
        })
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

    /// Whether `iface` matches; a table match sets `arg` to the entry's value.
    #[inline]
    fn matches(&self, iface: Option<IfaceId>, cx: &mut Cx<'_, '_>) -> bool {
        match (self, iface) {
            (_, None) => false,
            (IfMatch::Any, Some(_)) => true,
            (IfMatch::Table(slot, want), Some(id)) => {
                let found = cx
                    .ifs
                    .name(id)
                    .and_then(|n| cx.tables.get(*slot).lookup_name(n));
                cx.take_arg(found, *want)
            }
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
    /// `me` (`false`) or `me6` (`true`) as the source or destination.
    SrcMe(bool),
    DstMe(bool),
    SrcTable(Slot, Option<u32>),
    DstTable(Slot, Option<u32>),
    SrcPort(Vec<PortRange>),
    DstPort(Vec<PortRange>),
    Dir(Direction),
    Recv(IfMatch),
    Xmit(IfMatch),
    Via(IfMatch),
    Or(Vec<(bool, Test)>),
    TcpFlags(Bits),
    TcpOptions(Bits),
    TcpSeq(u32),
    TcpAck(u32),
    TcpWin(Vec<PortRange>),
    TcpDataLen(Vec<PortRange>),
    Frag(Bits),
    IpLen(Vec<PortRange>),
    IpTtl(Vec<PortRange>),
    IpId(Vec<PortRange>),
    IpTos(Bits),
    IpPrecedence(u8),
    Dscp(u64),
    Icmp {
        v6: bool,
        types: [u64; 4],
    },
    Mac {
        dst: MacMatch,
        src: MacMatch,
    },
    MacType(Vec<PortRange>),
    Layer2,
    /// `antispoof`, `verrevpath`, `versrcreach`: against the routes the
    /// caller gave ([`crate::Engine::set_routes`]); with none, they hold.
    Antispoof,
    Verrevpath,
    Versrcreach,
    Tagged(Vec<PortRange>),
    Lookup(LookupField, Slot, Option<u32>),
    /// `diverted`: nothing is diverted here.
    Never,
}

/// An interface a rule requires ([`Compiled::iface_guard`]): the receive
/// interface, or with `xmit` the transmit one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IfaceGuard {
    pub xmit: bool,
    pub id: IfaceId,
}

impl IfaceGuard {
    /// Whether a packet on these interfaces may pass the guard.
    #[inline]
    pub fn admits(&self, p: &PacketInfo) -> bool {
        let on = if self.xmit { p.xmit_if } else { p.recv_if };
        on == Some(self.id)
    }
}

/// A compiled body: every test must pass (each may be negated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Compiled {
    tests: Vec<(bool, Test)>,
}

/// This host's addresses, for `me` and `me6`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LocalAddrs {
    pub v4: Vec<u128>,
    pub v6: Vec<u128>,
}

/// Up to four tags a packet carries (`tag N`), smallest first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Tags {
    tags: [u16; 4],
    len: u8,
}

impl Tags {
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.tags[..usize::from(self.len)].iter().copied()
    }

    /// Adds `t`; a fifth distinct tag is not kept.
    pub fn add(&mut self, t: u16) {
        let n = usize::from(self.len);
        if self.tags[..n].contains(&t) || n == self.tags.len() {
            return;
        }
        self.tags[n] = t;
        self.len += 1;
        self.tags[..=n].sort_unstable();
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn remove(&mut self, t: u16) {
        let n = usize::from(self.len);
        if let Some(i) = self.tags[..n].iter().position(|&x| x == t) {
            self.tags.copy_within(i + 1..n, i);
            self.len -= 1;
        }
    }
}

/// The tag sets packets carry while they sit in dummynet, by a 16-bit id
/// (0: none), so a queued packet pays two bytes for its tags, not ten.
/// Sets are few (each is a combination of `tag` rules a packet met); ids
/// are never reused, and past 65535 sets a new one is not kept (its
/// packets lose their tags, counted in [`TagSets::lost`]).
#[derive(Debug, Default)]
pub(crate) struct TagSets {
    sets: Vec<Tags>,
    ids: std::collections::HashMap<Tags, u16>,
    pub lost: u64,
}

impl TagSets {
    #[inline]
    pub fn id(&mut self, t: Tags) -> u16 {
        if t.is_empty() {
            return 0;
        }
        self.intern(t)
    }

    #[cold]
    fn intern(&mut self, t: Tags) -> u16 {
        if let Some(&id) = self.ids.get(&t) {
            return id;
        }
        if self.sets.len() >= usize::from(u16::MAX) {
            self.lost += 1;
            return 0;
        }
        self.sets.push(t);
        let id = self.sets.len() as u16;
        self.ids.insert(t, id);
        id
    }

    #[inline]
    pub fn get(&self, id: u16) -> Tags {
        match id {
            0 => Tags::default(),
            i => self
                .sets
                .get(usize::from(i) - 1)
                .copied()
                .unwrap_or_default(),
        }
    }
}

/// What a body's tests read besides the packet's facts, and what they
/// leave: the value of the last table lookup that matched (`tablearg`).
pub(crate) struct Cx<'a, 'b> {
    pub view: View<'a>,
    pub tables: &'b Tables,
    /// The host's routes ([`route`] values), if the caller gave them.
    pub routes: Option<&'b Table>,
    pub me: &'b LocalAddrs,
    pub ifs: &'b Interfaces,
    pub tags: &'b mut Tags,
    pub arg: u32,
}

impl Cx<'_, '_> {
    /// A lookup found `found`: the test holds if there is one (with the
    /// wanted value, if one is wanted), and `tablearg` becomes it.
    #[inline]
    fn take_arg(&mut self, found: Option<u32>, want: Option<u32>) -> bool {
        match found {
            Some(v) if want.is_none_or(|w| w == v) => {
                self.arg = v;
                true
            }
            _ => false,
        }
    }
}

fn resolve(tables: &mut Tables, t: &TableRef, ty: TableType) -> Result<Slot, TableError> {
    tables.resolve(&t.name, ty)
}

pub(crate) fn compile(
    body: &[Cond],
    ifs: &mut Interfaces,
    tables: &mut Tables,
) -> Result<Compiled, TableError> {
    let tests = body
        .iter()
        .map(|c| Ok((c.negate, test(&c.kind, ifs, tables)?)))
        .collect::<Result<_, TableError>>()?;
    Ok(Compiled { tests })
}

fn test(k: &CondKind, ifs: &mut Interfaces, tables: &mut Tables) -> Result<Test, TableError> {
    Ok(match k {
        CondKind::Proto(p) => Test::Proto(*p),
        CondKind::IpVersion(v) => Test::V6(*v == 6),
        CondKind::SrcAddr(a) => Test::Src(a.iter().map(Net::new).collect()),
        CondKind::DstAddr(a) => Test::Dst(a.iter().map(Net::new).collect()),
        CondKind::SrcMe { v6 } => Test::SrcMe(*v6),
        CondKind::DstMe { v6 } => Test::DstMe(*v6),
        CondKind::SrcTable(t) => Test::SrcTable(resolve(tables, t, TableType::Addr)?, t.value),
        CondKind::DstTable(t) => Test::DstTable(resolve(tables, t, TableType::Addr)?, t.value),
        CondKind::SrcPort(p) => Test::SrcPort(p.clone()),
        CondKind::DstPort(p) => Test::DstPort(p.clone()),
        CondKind::Dir(d) => Test::Dir(*d),
        CondKind::Recv(i) => Test::Recv(IfMatch::new(i, ifs, tables)?),
        CondKind::Xmit(i) => Test::Xmit(IfMatch::new(i, ifs, tables)?),
        CondKind::Via(i) => Test::Via(IfMatch::new(i, ifs, tables)?),
        CondKind::Or(alts) => Test::Or(
            alts.iter()
                .map(|c| Ok((c.negate, test(&c.kind, ifs, tables)?)))
                .collect::<Result<_, TableError>>()?,
        ),
        CondKind::Setup => Test::TcpFlags(Bits {
            set: tcp_flag::SYN,
            clear: tcp_flag::ACK,
        }),
        // RST or ACK: no single Bits says "either", so an Or of two.
        CondKind::Established => Test::Or(vec![
            (
                false,
                Test::TcpFlags(Bits {
                    set: tcp_flag::RST,
                    clear: 0,
                }),
            ),
            (
                false,
                Test::TcpFlags(Bits {
                    set: tcp_flag::ACK,
                    clear: 0,
                }),
            ),
        ]),
        CondKind::TcpFlags(b) => Test::TcpFlags(*b),
        CondKind::TcpOptions(b) => Test::TcpOptions(*b),
        CondKind::TcpSeq(n) => Test::TcpSeq(*n),
        CondKind::TcpAck(n) => Test::TcpAck(*n),
        CondKind::TcpWin(r) => Test::TcpWin(r.clone()),
        CondKind::TcpDataLen(r) => Test::TcpDataLen(r.clone()),
        CondKind::Frag(b) => Test::Frag(*b),
        CondKind::IpLen(r) => Test::IpLen(r.clone()),
        CondKind::IpTtl(r) => Test::IpTtl(r.clone()),
        CondKind::IpId(r) => Test::IpId(r.clone()),
        CondKind::IpTos(b) => Test::IpTos(*b),
        CondKind::IpPrecedence(p) => Test::IpPrecedence(*p),
        CondKind::Dscp(m) => Test::Dscp(*m),
        CondKind::IcmpTypes { v6, types } => Test::Icmp {
            v6: *v6,
            types: *types,
        },
        CondKind::Mac { dst, src } => Test::Mac {
            dst: *dst,
            src: *src,
        },
        CondKind::MacType(r) => Test::MacType(r.clone()),
        CondKind::Layer2 => Test::Layer2,
        CondKind::Antispoof => Test::Antispoof,
        CondKind::Verrevpath => Test::Verrevpath,
        CondKind::Versrcreach => Test::Versrcreach,
        CondKind::Tagged(r) => Test::Tagged(r.clone()),
        CondKind::Lookup(f, t) => {
            let ty = match f {
                LookupField::SrcIp | LookupField::DstIp => TableType::Addr,
                LookupField::SrcPort | LookupField::DstPort => TableType::Number,
            };
            Test::Lookup(*f, resolve(tables, t, ty)?, t.value)
        }
        CondKind::Diverted => Test::Never,
    })
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
    pub fn matches(&self, p: &PacketInfo, cx: &mut Cx<'_, '_>) -> bool {
        self.tests
            .iter()
            .all(|(negate, t)| t.eval(p, cx) != *negate)
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
                Test::Recv(m) | Test::Via(m) => m.decides(Some(recv_if)),
                Test::Xmit(_) => Some(false),
                Test::Never => Some(false),
                _ => None,
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

    /// The one interface a packet must have for this body to match, when
    /// the body says so plainly: a `recv NAME` or `xmit NAME` among its
    /// tests, not negated (not a pattern, a table or `via`). Packets on
    /// any other interface fail that test whatever else they carry, which
    /// lets a walk pass over such rules without looking at them
    /// ([`super::IfaceIndex`]).
    pub fn iface_guard(&self) -> Option<IfaceGuard> {
        self.tests.iter().find_map(|(negate, t)| {
            let (xmit, m) = match t {
                _ if *negate => return None,
                Test::Recv(m) => (false, m),
                Test::Xmit(m) => (true, m),
                _ => return None,
            };
            match m {
                IfMatch::Set {
                    pattern: None,
                    name: Some(_),
                    bits,
                } => {
                    // A name interned once: exactly one bit.
                    let mut ids = bits.iter().enumerate().flat_map(|(w, &word)| {
                        (0..64u16)
                            .filter(move |b| word & (1 << b) != 0)
                            .map(move |b| IfaceId(w as u16 * 64 + b))
                    });
                    match (ids.next(), ids.next()) {
                        (Some(id), None) => Some(IfaceGuard { xmit, id }),
                        _ => None,
                    }
                }
                _ => None,
            }
        })
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
        fn learn(t: &mut Test, id: IfaceId, name: &str) {
            match t {
                Test::Recv(m) | Test::Xmit(m) | Test::Via(m) => m.learn(id, name),
                Test::Or(alts) => alts.iter_mut().for_each(|(_, t)| learn(t, id, name)),
                _ => {}
            }
        }
        for (_, t) in &mut self.tests {
            learn(t, id, name);
        }
    }

    /// Whether a test reads table `slot` (a table in use is not destroyed).
    pub fn uses_table(&self, slot: Slot) -> bool {
        fn uses(t: &Test, slot: Slot) -> bool {
            match t {
                Test::SrcTable(s, _) | Test::DstTable(s, _) | Test::Lookup(_, s, _) => *s == slot,
                Test::Recv(IfMatch::Table(s, _))
                | Test::Xmit(IfMatch::Table(s, _))
                | Test::Via(IfMatch::Table(s, _)) => *s == slot,
                Test::Or(alts) => alts.iter().any(|(_, t)| uses(t, slot)),
                _ => false,
            }
        }
        self.tests.iter().any(|(_, t)| uses(t, slot))
    }
}

impl IfMatch {
    /// What the match says of any packet on `iface`, if it does not depend
    /// on state that changes (a table's entries).
    fn decides(&self, iface: Option<IfaceId>) -> Option<bool> {
        match (self, iface) {
            (_, None) => Some(false),
            (IfMatch::Any, Some(_)) => Some(true),
            (IfMatch::Table(..), Some(_)) => None,
            (IfMatch::Set { bits, .. }, Some(id)) => Some(
                bits.get(usize::from(id.0) / 64)
                    .is_some_and(|w| w & (1 << (id.0 % 64)) != 0),
            ),
        }
    }
}

#[inline]
fn bits_hold(b: Bits, v: u8) -> bool {
    v & b.set == b.set && v & b.clear == 0
}

#[inline]
fn mac_hold(m: &MacMatch, a: &[u8; 6]) -> bool {
    (0..6).all(|i| a[i] & m.mask[i] == m.addr[i] & m.mask[i])
}

impl Test {
    #[inline]
    fn eval(&self, p: &PacketInfo, cx: &mut Cx<'_, '_>) -> bool {
        let k = &p.key;
        match self {
            Test::Proto(n) => k.proto == *n,
            Test::V6(v6) => k.v6 == *v6,
            Test::Src(nets) => nets.iter().any(|n| n.contains(k.v6, k.src)),
            Test::Dst(nets) => nets.iter().any(|n| n.contains(k.v6, k.dst)),
            Test::SrcMe(v6) => *v6 == k.v6 && cx.me.has(k.v6, k.src),
            Test::DstMe(v6) => *v6 == k.v6 && cx.me.has(k.v6, k.dst),
            Test::SrcTable(slot, want) => {
                let found = cx.tables.get(*slot).lookup_addr(k.v6, k.src);
                cx.take_arg(found, *want)
            }
            Test::DstTable(slot, want) => {
                let found = cx.tables.get(*slot).lookup_addr(k.v6, k.dst);
                cx.take_arg(found, *want)
            }
            Test::SrcPort(r) => has_ports(k.proto) && in_ranges(r, k.sport),
            Test::DstPort(r) => has_ports(k.proto) && in_ranges(r, k.dport),
            Test::Dir(d) => p.dir == *d,
            Test::Recv(m) => m.matches(p.recv_if, cx),
            Test::Xmit(m) => m.matches(p.xmit_if, cx),
            Test::Via(m) => match p.dir {
                Direction::In => m.matches(p.recv_if, cx),
                Direction::Out => m.matches(p.xmit_if, cx),
            },
            Test::Or(alts) => alts.iter().any(|(negate, t)| t.eval(p, cx) != *negate),
            Test::TcpFlags(b) => {
                k.proto == proto::TCP && cx.view.tcp().is_some_and(|t| bits_hold(*b, t.flags))
            }
            Test::TcpOptions(b) => {
                k.proto == proto::TCP && cx.view.tcp().is_some_and(|t| bits_hold(*b, t.options))
            }
            Test::TcpSeq(n) => k.proto == proto::TCP && cx.view.tcp().is_some_and(|t| t.seq == *n),
            Test::TcpAck(n) => k.proto == proto::TCP && cx.view.tcp().is_some_and(|t| t.ack == *n),
            Test::TcpWin(r) => {
                k.proto == proto::TCP && cx.view.tcp().is_some_and(|t| in_ranges(r, t.win))
            }
            Test::TcpDataLen(r) => {
                k.proto == proto::TCP && cx.view.tcp().is_some_and(|t| in_ranges(r, t.data_len))
            }
            Test::Frag(b) => !k.v6 && cx.view.ip().is_some_and(|f| bits_hold(*b, f.frag)),
            Test::IpLen(r) => cx.view.ip().is_some_and(|f| in_ranges(r, f.len)),
            Test::IpTtl(r) => cx.view.ip().is_some_and(|f| in_ranges(r, u16::from(f.ttl))),
            Test::IpId(r) => !k.v6 && cx.view.ip().is_some_and(|f| in_ranges(r, f.id)),
            Test::IpTos(b) => cx.view.ip().is_some_and(|f| bits_hold(*b, f.tos)),
            Test::IpPrecedence(n) => cx.view.ip().is_some_and(|f| f.tos >> 5 == *n),
            Test::Dscp(m) => cx.view.ip().is_some_and(|f| m >> (f.tos >> 2) & 1 == 1),
            Test::Icmp { v6, types } => {
                let want = if *v6 { proto::ICMPV6 } else { proto::ICMP };
                k.proto == want
                    && k.v6 == *v6
                    && cx
                        .view
                        .ip()
                        .and_then(|f| f.icmp_type)
                        .is_some_and(|t| types[usize::from(t / 64)] >> (t % 64) & 1 == 1)
            }
            Test::Mac { dst, src } => cx
                .view
                .ethernet()
                .is_some_and(|(d, s, _)| mac_hold(dst, &d) && mac_hold(src, &s)),
            Test::MacType(r) => cx.view.ethernet().is_some_and(|(_, _, t)| in_ranges(r, t)),
            Test::Layer2 => cx.view.has_frame(),
            Test::Antispoof | Test::Verrevpath | Test::Versrcreach => route_check(self, p, &*cx),
            Test::Tagged(r) => cx.tags.iter().any(|t| in_ranges(r, t)),
            Test::Lookup(f, slot, want) => {
                let t = cx.tables.get(*slot);
                let found = match f {
                    LookupField::SrcIp => t.lookup_addr(k.v6, k.src),
                    LookupField::DstIp => t.lookup_addr(k.v6, k.dst),
                    LookupField::SrcPort if has_ports(k.proto) => t.lookup_number(k.sport.into()),
                    LookupField::DstPort if has_ports(k.proto) => t.lookup_number(k.dport.into()),
                    _ => None,
                };
                cx.take_arg(found, *want)
            }
            Test::Never => false,
        }
    }
}

/// How a route is kept in the routes [`Table`]: its interface's id and
/// what kind it is, in the value.
pub(crate) mod route {
    pub const GATEWAY: u32 = 1 << 16;
    pub const REJECT: u32 = 1 << 17;
    pub const IFACE: u32 = 0xffff;
}

/// `antispoof`, `verrevpath`, `versrcreach` (ipfw(8)): outgoing packets,
/// and every packet when no routes were given, match.
fn route_check(t: &Test, p: &PacketInfo, cx: &Cx<'_, '_>) -> bool {
    let (Some(routes), Direction::In) = (cx.routes, p.dir) else {
        return true;
    };
    let Some(recv) = p.recv_if else {
        return true;
    };
    let found = routes.lookup_addr(p.key.v6, p.key.src);
    let via_recv = |v: u32| v & route::IFACE == u32::from(recv.0);
    match t {
        // The route back to the source leaves by the interface it came in.
        Test::Verrevpath => found.is_some_and(|v| v & route::REJECT == 0 && via_recv(v)),
        // Some route other than a default or a reject one reaches it.
        Test::Versrcreach => routes
            .lookup_addr_longer_than(p.key.v6, p.key.src, 0)
            .is_some_and(|v| v & route::REJECT == 0),
        // A source on a directly connected network came in on that network.
        _ => match found {
            Some(v) if v & (route::GATEWAY | route::REJECT) == 0 => via_recv(v),
            _ => true,
        },
    }
}

impl LocalAddrs {
    #[inline]
    fn has(&self, v6: bool, a: u128) -> bool {
        if v6 { &self.v6 } else { &self.v4 }.contains(&a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::headers::Bytes;
    use crate::flow::FlowKey;

    fn comp(conds: &[Cond], ifs: &mut Interfaces) -> Compiled {
        compile(conds, ifs, &mut Tables::default()).unwrap()
    }

    fn hit(c: &Compiled, p: &PacketInfo) -> bool {
        let (t, me, ifs) = (
            Tables::default(),
            LocalAddrs::default(),
            Interfaces::default(),
        );
        c.matches(
            p,
            &mut Cx {
                view: View::new(&Bytes::default()),
                tables: &t,
                routes: None,
                me: &me,
                ifs: &ifs,
                tags: &mut Tags::default(),
                arg: 0,
            },
        )
    }

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
        let c = comp(
            &[Cond::new(CondKind::SrcAddr(vec![net("10.0.1.0", 24)]))],
            &mut ifs,
        );
        assert!(hit(
            &c,
            &pkt([10, 0, 1, 77], [1, 1, 1, 1], proto::TCP, 1, 2)
        ));
        assert!(!hit(
            &c,
            &pkt([10, 0, 2, 77], [1, 1, 1, 1], proto::TCP, 1, 2)
        ));
        let n = comp(
            &[Cond::not(CondKind::SrcAddr(vec![net("10.0.1.0", 24)]))],
            &mut ifs,
        );
        assert!(!hit(
            &n,
            &pkt([10, 0, 1, 77], [1, 1, 1, 1], proto::TCP, 1, 2)
        ));
        // A /0 matches every IPv4 address but no IPv6 one.
        let any4 = comp(
            &[Cond::new(CondKind::DstAddr(vec![net("0.0.0.0", 0)]))],
            &mut ifs,
        );
        assert!(hit(&any4, &pkt([1, 2, 3, 4], [5, 6, 7, 8], 0, 0, 0)));
        let mut v6 = pkt([0; 4], [0; 4], proto::UDP, 1, 2);
        v6.key.v6 = true;
        assert!(!hit(&any4, &v6));
    }

    #[test]
    fn ports_only_for_port_protocols() {
        let mut ifs = Interfaces::default();
        let c = comp(
            &[Cond::new(CondKind::DstPort(vec![
                PortRange { lo: 80, hi: 80 },
                PortRange { lo: 1000, hi: 2000 },
            ]))],
            &mut ifs,
        );
        assert!(hit(&c, &pkt([1; 4], [2; 4], proto::TCP, 5, 80)));
        assert!(hit(&c, &pkt([1; 4], [2; 4], proto::UDP, 5, 1500)));
        assert!(!hit(&c, &pkt([1; 4], [2; 4], proto::UDP, 5, 2001)));
        assert!(!hit(&c, &pkt([1; 4], [2; 4], proto::ICMP, 0, 80)));
    }

    #[test]
    fn direction_and_interface_decide_a_rule_for_all_incoming_packets() {
        let mut ifs = Interfaces::default();
        let app = ifs.intern("app");
        let peer = ifs.intern("peer");
        let body = comp;
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
        let mut c = comp(
            &[Cond::new(CondKind::Via(IfaceSpec::Pattern("tun*".into())))],
            &mut ifs,
        );
        let tun3 = ifs.intern("tun3");
        c.learn_iface(tun3, "tun3");
        let mut p = pkt([1; 4], [2; 4], proto::TCP, 1, 2);
        p.recv_if = Some(tun3);
        assert!(hit(&c, &p));
        p.dir = Direction::Out; // via looks at xmit for outgoing packets
        assert!(!hit(&c, &p));
        p.xmit_if = Some(tun3);
        assert!(hit(&c, &p));
        p.xmit_if = Some(em0);
        assert!(!hit(&c, &p));
        let any = comp(&[Cond::new(CondKind::Recv(IfaceSpec::Any))], &mut ifs);
        assert!(hit(&any, &p));
        p.recv_if = None;
        assert!(!hit(&any, &p));
    }
}
