//! `add [N] [prob P] ACTION [PROTO] [from SRC [PORTS] to DST [PORTS]] [OPTIONS]`
//! and its inverse, the canonical text of a rule.
//!
//! A body is a flat list of conditions. The parser puts it in canonical order
//! (protocol, source, destination, then the options as written) so that a
//! rule printed by [`format_rule_body`] reads back to exactly the same
//! [`RuleSpec`], whichever way it was first written: `pipe 2 in proto tcp`
//! and `pipe 2 tcp from any to any in` are the same rule.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use dummynet_engine::config::{
    Action, AddrMatch, Cond, CondKind, IfaceSpec, PortRange, RuleSpec, DEFAULT_RULE, MAX_NUMBER,
};
use dummynet_engine::Direction;

use crate::error::{ErrorKind, ParseError};
use crate::lexer::{Cursor, Tok};
use crate::names::{proto_word, proto_words, rule_proto_name, service_port, ProtoWord};
use crate::units::{format_probability, probability};

#[rustfmt::skip]
const ACTIONS: &[&str] = &[
    "allow", "accept", "pass", "permit", "deny", "drop", "pipe", "queue", "skipto", "count",
];

/// FreeBSD actions this build does not implement.
#[rustfmt::skip]
const UNSUPPORTED_ACTIONS: &[&str] = &[
    "reject", "unreach", "unreach6", "reset", "reset6", "fwd", "forward", "divert", "tee", "nat",
    "nat64lsn", "nat64stl", "nat64clat", "nptv6", "netgraph", "ngtee", "setfib", "setdscp", "call",
    "return", "check-state", "abort", "abort6", "tcp-setmss", "eaction", "altq", "tag", "untag",
];

#[rustfmt::skip]
const OPTIONS: &[&str] = &[
    "in", "out", "via", "recv", "xmit", "proto", "src-ip", "dst-ip", "src-ip6", "dst-ip6",
    "src-port", "dst-port", "ipversion", "not",
];

/// FreeBSD rule options this build does not implement.
#[rustfmt::skip]
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "log", "logamount", "keep-state", "record-state", "limit", "set-limit", "setup", "established",
    "frag", "tcpflags", "tcpoptions", "tcpseq", "tcpack", "tcpwin", "tcpdatalen", "tcpmss",
    "icmptypes", "icmp6types", "ipoptions", "iplen", "ipttl", "iptos", "ipid", "ipprecedence",
    "mac", "mac-type", "layer2", "uid", "gid", "jail", "tagged", "fib", "dscp", "antispoof",
    "verrevpath", "versrcreach", "diverted", "diverted-loopback", "diverted-output", "bridged",
    "lookup", "flow", "flow-id", "ext6hdr", "sockarg", "defer-action", "defer-immediate-action",
    "src-mac", "dst-mac", "me", "me6", "table",
];

/// Parses what follows `add`.
pub(crate) fn parse_add(cur: &mut Cursor<'_>) -> Result<RuleSpec, ParseError> {
    let number = if cur.peek_is_number() {
        Some(rule_number_to_add(cur)?)
    } else {
        None
    };
    if cur.peek_is("set") {
        return Err(unavailable(
            cur,
            "rule sets (`set N`) are not supported by this build",
        ));
    }
    // FreeBSD writes `prob` before the action; accept it after as well.
    let mut prob = parse_prob(cur)?;
    let action = parse_action(cur)?;
    if prob.is_none() {
        prob = parse_prob(cur)?;
    }
    let body = parse_body(cur)?;
    Ok(RuleSpec {
        number,
        action,
        prob,
        body,
    })
}

fn rule_number_to_add(cur: &mut Cursor<'_>) -> Result<u16, ParseError> {
    if let Some(t) = cur
        .peek()
        .filter(|t| t.text.parse::<u64>() == Ok(u64::from(DEFAULT_RULE)))
    {
        return Err(cur.error_at(
            t,
            ErrorKind::Range,
            "rule 65535 is the default rule and cannot be added; use 1..65534 \
             (its action is set with `sysctl net.inet.ip.fw.default_to_accept=1`)",
        ));
    }
    Ok(cur.number("rule number", 1, u64::from(DEFAULT_RULE) - 1)? as u16)
}

fn parse_prob(
    cur: &mut Cursor<'_>,
) -> Result<Option<dummynet_engine::rng::Probability>, ParseError> {
    if !cur.eat("prob") {
        return Ok(None);
    }
    let t = cur.word("a match probability after `prob`")?;
    probability(t.text)
        .map(Some)
        .map_err(|e| cur.value_error(t, e))
}

fn parse_action(cur: &mut Cursor<'_>) -> Result<Action, ParseError> {
    let Some(t) = cur.peek().filter(|t| t.kind == Tok::Word) else {
        return Err(cur.expected(
            "an action (allow, deny, pipe N, queue N, skipto N, count)",
            ACTIONS,
        ));
    };
    let kw = t.text.to_ascii_lowercase();
    if UNSUPPORTED_ACTIONS.contains(&kw.as_str()) {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!("action `{}` is not supported by this build", t.text),
        ));
    }
    let action = match kw.as_str() {
        "allow" | "accept" | "pass" | "permit" => Action::Allow,
        "deny" | "drop" => Action::Deny,
        "count" => Action::Count,
        "pipe" | "queue" | "skipto" => {
            cur.bump();
            let what = if kw == "skipto" {
                "rule number"
            } else {
                kw.as_str()
            };
            let n = cur.number(&format!("{what} after `{kw}`"), 1, u64::from(MAX_NUMBER))?;
            // A `skipto` back (or to itself) is taken, as FreeBSD takes it:
            // the classifier then goes on at the next rule (ip_fw2.c never
            // jumps back, so no loop can form).
            return Ok(match kw.as_str() {
                "pipe" => Action::Pipe(n as u32),
                "queue" => Action::Queue(n as u32),
                _ => Action::Skipto(n as u16),
            });
        }
        _ => {
            return Err(cur.expected(
                "an action (allow, deny, pipe N, queue N, skipto N, count)",
                ACTIONS,
            ))
        }
    };
    cur.bump();
    Ok(action)
}

/// Where we are in a body, for what the next word may be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    AfterProto,
    Options,
}

impl Stage {
    fn expected(self) -> &'static str {
        match self {
            Stage::Start => "a protocol, `from` or a rule option",
            Stage::AfterProto => "`from` or a rule option",
            Stage::Options => "a rule option",
        }
    }

    fn candidates(self) -> Vec<&'static str> {
        let mut c: Vec<&str> = OPTIONS.to_vec();
        if self != Stage::Options {
            c.push("from");
        }
        if self == Stage::Start {
            c.extend(proto_words());
        }
        c
    }
}

fn parse_body(cur: &mut Cursor<'_>) -> Result<Vec<Cond>, ParseError> {
    let mut body = Vec::new();
    let mut stage = Stage::Start;
    if cur.peek().is_some_and(|t| t.kind == Tok::LBrace) {
        return Err(unavailable(
            cur,
            "protocol lists `{ tcp or udp }` are not supported; write one rule per protocol",
        ));
    }
    if let Some(p) = cur.peek_word().and_then(proto_word) {
        cur.bump();
        body.extend(proto_cond(p, false));
        stage = Stage::AfterProto;
    }
    if cur.eat("from") {
        body.extend(parse_endpoint(cur, Side::Src)?);
        if !cur.eat("to") {
            return Err(cur.expected("`to` and the destination", &["to"]));
        }
        body.extend(parse_endpoint(cur, Side::Dst)?);
        stage = Stage::Options;
    }
    while !cur.at_end() {
        body.extend(parse_option(cur, stage)?);
        stage = Stage::Options;
    }
    Ok(canonical(body))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
}

/// `[not] (any | ADDRS) [[not] PORTS]` after `from` or `to`.
fn parse_endpoint(cur: &mut Cursor<'_>, side: Side) -> Result<Vec<Cond>, ParseError> {
    let mut conds = Vec::new();
    let not_tok = if cur.peek_is("not") { cur.bump() } else { None };
    let negate = not_tok.is_some();
    if cur.peek_is("any") {
        if let Some(t) = not_tok {
            return Err(cur.error_at(t, ErrorKind::Syntax, "`not any` matches no packet"));
        }
        cur.bump();
    } else {
        let addrs = parse_addr_list(cur)?;
        let kind = match side {
            Side::Src => CondKind::SrcAddr(addrs),
            Side::Dst => CondKind::DstAddr(addrs),
        };
        conds.push(Cond { negate, kind });
    }
    // Ports follow the address directly; a `not` belongs to them only if a
    // port comes next, otherwise it negates the first option.
    let port_at = |n: usize| {
        cur.peek_nth(n)
            .is_some_and(|t| t.kind == Tok::Word && looks_like_port(t.text))
    };
    let negate_ports = cur.peek_is("not") && port_at(1);
    if negate_ports || port_at(0) {
        if negate_ports {
            cur.bump();
        }
        let ports = parse_ports(cur)?;
        let kind = match side {
            Side::Src => CondKind::SrcPort(ports),
            Side::Dst => CondKind::DstPort(ports),
        };
        conds.push(Cond {
            negate: negate_ports,
            kind,
        });
    }
    Ok(conds)
}

fn looks_like_port(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_digit())
        || w.split('-').next().and_then(service_port).is_some()
}

/// `a`, `a,b,c` or `{ a, b or c }`.
fn parse_addr_list(cur: &mut Cursor<'_>) -> Result<Vec<AddrMatch>, ParseError> {
    let mut addrs = Vec::new();
    if cur.eat_kind(Tok::LBrace) {
        loop {
            addrs.push(parse_addr(cur)?);
            if cur.eat_kind(Tok::RBrace) {
                break;
            }
            if !(cur.eat_kind(Tok::Comma) || cur.eat("or")) {
                return Err(cur.expected("`,`, `or` or `}` in the address list", &["or"]));
            }
        }
    } else {
        addrs.push(parse_addr(cur)?);
        while cur.eat_kind(Tok::Comma) {
            addrs.push(parse_addr(cur)?);
        }
    }
    Ok(addrs)
}

const ADDR_HELP: &str = "an address such as 10.0.0.1, 10.0.0.0/8 or 2001:db8::/32";

/// One address or network. Host bits under the prefix are cleared, as
/// FreeBSD does, so `10.1.2.3/24` is the network 10.1.2.0/24.
fn parse_addr(cur: &mut Cursor<'_>) -> Result<AddrMatch, ParseError> {
    let Some(t) = cur.peek().filter(|t| t.kind == Tok::Word) else {
        return Err(cur.expected(ADDR_HELP, &["any"]));
    };
    if ["me", "me6"].iter().any(|k| t.is(k)) || t.text.starts_with("table(") {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!(
                "`{}` is not supported by this build; write the addresses",
                t.text
            ),
        ));
    }
    let m = addr_match(t.text).map_err(|m| cur.error_at(t, ErrorKind::Syntax, m))?;
    cur.bump();
    Ok(m)
}

fn addr_match(s: &str) -> Result<AddrMatch, String> {
    let bad = || format!("expected {ADDR_HELP}, found `{s}`");
    let (addr, prefix) = if let Some((a, len)) = s.split_once('/') {
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = len
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= max && len.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                format!("a prefix length for {addr} must be in 0..{max}, found `{len}`")
            })?;
        (addr, prefix)
    } else if let Ok(addr) = s.parse::<IpAddr>() {
        (addr, if addr.is_ipv4() { 32 } else { 128 })
    } else if let Some((a, mask)) = s.rsplit_once(':') {
        // FreeBSD's `addr:mask` form, IPv4 only; the mask must be a prefix.
        let addr: Ipv4Addr = a.parse().map_err(|_| bad())?;
        let mask = u32::from(mask.parse::<Ipv4Addr>().map_err(|_| bad())?);
        if mask.leading_ones() + mask.trailing_zeros() != 32 {
            return Err(format!(
                "mask `{}` is not contiguous; only prefix masks are supported",
                Ipv4Addr::from(mask)
            ));
        }
        (IpAddr::V4(addr), mask.leading_ones() as u8)
    } else {
        return Err(bad());
    };
    Ok(AddrMatch {
        addr: network(addr, prefix),
        prefix,
    })
}

fn network(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & mask).into())
        }
    }
}

/// `80`, `1024-65535`, `http`, or a comma list of those.
fn parse_ports(cur: &mut Cursor<'_>) -> Result<Vec<PortRange>, ParseError> {
    let mut ports = Vec::new();
    loop {
        let t = cur.word("a port, a range such as 1024-65535, or a service name")?;
        ports.push(port_range(t.text).map_err(|m| cur.error_at(t, ErrorKind::Syntax, m))?);
        if !cur.eat_kind(Tok::Comma) {
            return Ok(ports);
        }
    }
}

fn port_range(s: &str) -> Result<PortRange, String> {
    let port = |p: &str| {
        service_port(p)
            .or_else(|| {
                p.parse::<u16>()
                    .ok()
                    .filter(|_| p.bytes().all(|b| b.is_ascii_digit()))
            })
            .ok_or_else(|| {
                format!("expected a port (0..65535) or a service name such as http, found `{p}`")
            })
    };
    if let Some(p) = service_port(s) {
        return Ok(PortRange { lo: p, hi: p });
    }
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (port(a)?, port(b)?),
        None => {
            let p = port(s)?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(format!("port range `{s}` runs backwards; write {hi}-{lo}"));
    }
    Ok(PortRange { lo, hi })
}

fn proto_cond(p: ProtoWord, negate: bool) -> Option<Cond> {
    let kind = match p {
        ProtoWord::Any => return None,
        ProtoWord::Version(v) => CondKind::IpVersion(v),
        ProtoWord::Number(n) => CondKind::Proto(n),
    };
    Some(Cond { negate, kind })
}

/// One option, possibly preceded by `not`; `None` for one that selects every
/// packet (`proto ip`).
fn parse_option(cur: &mut Cursor<'_>, stage: Stage) -> Result<Option<Cond>, ParseError> {
    let negate = cur.eat("not");
    let Some(t) = cur.peek() else {
        return Err(cur.expected("a rule option after `not`", OPTIONS));
    };
    if t.kind == Tok::LBrace {
        return Err(unavailable(
            cur,
            "option blocks `{ ... or ... }` are not supported by this build",
        ));
    }
    let kw = t.text.to_ascii_lowercase();
    let kind = match kw.as_str() {
        "in" | "out" => {
            cur.bump();
            CondKind::Dir(if kw == "in" {
                Direction::In
            } else {
                Direction::Out
            })
        }
        "via" | "recv" | "xmit" => {
            cur.bump();
            let iface = parse_iface(cur, &kw)?;
            match kw.as_str() {
                "via" => CondKind::Via(iface),
                "recv" => CondKind::Recv(iface),
                _ => CondKind::Xmit(iface),
            }
        }
        "proto" => {
            cur.bump();
            let p = cur.word("a protocol after `proto`")?;
            let Some(word) = proto_word(p.text) else {
                let cands: Vec<&str> = proto_words().collect();
                return Err(cur.expected_at(p, "a protocol name or number (0..255)", &cands));
            };
            if negate && word == ProtoWord::Any {
                return Err(cur.error_at(
                    p,
                    ErrorKind::Syntax,
                    format!("`not proto {}` matches no packet", p.text),
                ));
            }
            return Ok(proto_cond(word, negate));
        }
        "src-ip" | "dst-ip" | "src-ip6" | "dst-ip6" | "src-ipv6" | "dst-ipv6" => {
            cur.bump();
            let addrs = parse_addr_list(cur)?;
            if kw.starts_with("src") {
                CondKind::SrcAddr(addrs)
            } else {
                CondKind::DstAddr(addrs)
            }
        }
        "src-port" | "dst-port" => {
            cur.bump();
            let ports = parse_ports(cur)?;
            if kw == "src-port" {
                CondKind::SrcPort(ports)
            } else {
                CondKind::DstPort(ports)
            }
        }
        "ipversion" => {
            cur.bump();
            let v = cur.word("4 or 6 after `ipversion`")?;
            match v.text {
                "4" => CondKind::IpVersion(4),
                "6" => CondKind::IpVersion(6),
                _ => {
                    return Err(cur.error_at(
                        v,
                        ErrorKind::Range,
                        format!("ipversion must be 4 or 6, found `{}`", v.text),
                    ))
                }
            }
        }
        "from" | "to" if stage == Stage::Options => {
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "`from ... to ...` must come before the rule options",
            ));
        }
        "to" => {
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "`to` needs a source first: write `from any to ...`",
            ));
        }
        _ if UNSUPPORTED_OPTIONS.contains(&kw.as_str())
            || UNSUPPORTED_ACTIONS.contains(&kw.as_str()) =>
        {
            return Err(cur.error_at(
                t,
                ErrorKind::Unavailable,
                format!("rule option `{}` is not supported by this build", t.text),
            ));
        }
        _ if negate => return Err(cur.expected("a rule option after `not`", OPTIONS)),
        _ => return Err(cur.expected(stage.expected(), &stage.candidates())),
    };
    Ok(Some(Cond { negate, kind }))
}

fn parse_iface(cur: &mut Cursor<'_>, kw: &str) -> Result<IfaceSpec, ParseError> {
    let t = cur.word(&format!(
        "an interface name, pattern (`em*`) or `any` after `{kw}`"
    ))?;
    if t.text.eq_ignore_ascii_case("any") {
        return Ok(IfaceSpec::Any);
    }
    if t.text.parse::<IpAddr>().is_ok() {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            "matching an interface by address is not supported by this build; give its name",
        ));
    }
    Ok(if t.text.contains(['*', '?', '[']) {
        IfaceSpec::Pattern(t.text.to_string())
    } else {
        IfaceSpec::Name(t.text.to_string())
    })
}

fn unavailable(cur: &Cursor<'_>, message: &str) -> ParseError {
    match cur.peek() {
        Some(t) => cur.error_at(t, ErrorKind::Unavailable, message),
        None => cur.expected("more", &[]),
    }
}

// ---------------------------------------------------------------- canonical form

/// Which conditions a printed body shows in its `PROTO from SRC to DST` part:
/// the first plain protocol, the first source and the first destination.
/// Everything else prints as an option, in order.
struct Layout {
    proto: Option<usize>,
    src: Option<usize>,
    dst: Option<usize>,
}

fn layout(body: &[Cond]) -> Layout {
    Layout {
        proto: body.iter().position(|c| {
            !c.negate && matches!(c.kind, CondKind::Proto(_) | CondKind::IpVersion(4 | 6))
        }),
        src: body
            .iter()
            .position(|c| matches!(c.kind, CondKind::SrcAddr(_))),
        dst: body
            .iter()
            .position(|c| matches!(c.kind, CondKind::DstAddr(_))),
    }
}

/// The body reordered as it prints: the [`Layout`] part first, the rest as written.
fn canonical(body: Vec<Cond>) -> Vec<Cond> {
    let l = layout(&body);
    let lead = [l.proto, l.src, l.dst];
    let mut slots: Vec<Option<Cond>> = body.into_iter().map(Some).collect();
    let mut out: Vec<Cond> = lead
        .iter()
        .flatten()
        .filter_map(|&i| slots.get_mut(i).and_then(Option::take))
        .collect();
    out.extend(slots.into_iter().flatten());
    out
}

/// The canonical text of a rule after its number, as `ipfw show` prints it:
/// `prob 0.500000 pipe 1 tcp from 10.0.0.0/8 to any dst-port 80 in via em0`.
pub fn format_rule_body(spec: &RuleSpec) -> String {
    let mut out = String::new();
    if let Some(p) = spec.prob {
        let _ = write!(out, "prob {} ", format_probability(p));
    }
    out.push_str(&format_action(spec.action));
    let body = &spec.body;
    let l = layout(body);
    let proto = match l.proto.map(|i| &body[i].kind) {
        Some(CondKind::Proto(n)) => rule_proto_name(*n),
        Some(CondKind::IpVersion(4)) => "ip4".to_string(),
        Some(CondKind::IpVersion(6)) => "ip6".to_string(),
        _ => "ip".to_string(),
    };
    let endpoint = |i: Option<usize>| match i.map(|i| &body[i]) {
        Some(Cond {
            negate,
            kind: CondKind::SrcAddr(a) | CondKind::DstAddr(a),
        }) => {
            format!("{}{}", if *negate { "not " } else { "" }, format_addrs(a))
        }
        _ => "any".to_string(),
    };
    let _ = write!(
        out,
        " {proto} from {} to {}",
        endpoint(l.src),
        endpoint(l.dst)
    );
    for (i, c) in body.iter().enumerate() {
        if [l.proto, l.src, l.dst].contains(&Some(i)) {
            continue;
        }
        out.push(' ');
        if c.negate {
            out.push_str("not ");
        }
        out.push_str(&format_option(&c.kind));
    }
    out
}

fn format_action(a: Action) -> String {
    match a {
        Action::Allow => "allow".into(),
        Action::Deny => "deny".into(),
        Action::Pipe(n) => format!("pipe {n}"),
        Action::Queue(n) => format!("queue {n}"),
        Action::Skipto(n) => format!("skipto {n}"),
        Action::Count => "count".into(),
    }
}

fn format_option(k: &CondKind) -> String {
    let v6_only = |a: &[AddrMatch]| !a.is_empty() && a.iter().all(|m| m.addr.is_ipv6());
    match k {
        CondKind::Proto(n) => format!("proto {}", rule_proto_name(*n)),
        CondKind::IpVersion(v) => format!("ipversion {v}"),
        CondKind::SrcAddr(a) => format!(
            "src-ip{} {}",
            if v6_only(a) { "6" } else { "" },
            format_addrs(a)
        ),
        CondKind::DstAddr(a) => format!(
            "dst-ip{} {}",
            if v6_only(a) { "6" } else { "" },
            format_addrs(a)
        ),
        CondKind::SrcPort(p) => format!("src-port {}", format_ports(p)),
        CondKind::DstPort(p) => format!("dst-port {}", format_ports(p)),
        CondKind::Dir(Direction::In) => "in".into(),
        CondKind::Dir(Direction::Out) => "out".into(),
        CondKind::Recv(i) => format!("recv {}", format_iface(i)),
        CondKind::Xmit(i) => format!("xmit {}", format_iface(i)),
        CondKind::Via(i) => format!("via {}", format_iface(i)),
    }
}

fn format_addrs(a: &[AddrMatch]) -> String {
    let one = |m: &AddrMatch| {
        let host = if m.addr.is_ipv4() { 32 } else { 128 };
        if m.prefix == host {
            m.addr.to_string()
        } else {
            format!("{}/{}", m.addr, m.prefix)
        }
    };
    a.iter().map(one).collect::<Vec<_>>().join(",")
}

fn format_ports(p: &[PortRange]) -> String {
    let one = |r: &PortRange| {
        if r.lo == r.hi {
            r.lo.to_string()
        } else {
            format!("{}-{}", r.lo, r.hi)
        }
    };
    p.iter().map(one).collect::<Vec<_>>().join(",")
}

fn format_iface(i: &IfaceSpec) -> &str {
    match i {
        IfaceSpec::Name(n) | IfaceSpec::Pattern(n) => n,
        IfaceSpec::Any => "any",
    }
}
