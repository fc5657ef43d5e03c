//! The canonical text of a rule, as `ipfw show` prints it, and the
//! canonical order of a body that makes printing and parsing round-trip.

use std::fmt::Write as _;

use dummynet_engine::config::{
    Action, AddrMatch, ArgAction, Cond, CondKind, IfaceSpec, RuleSpec, StateKind, TableRef,
};
use dummynet_engine::Direction;

use crate::names::rule_proto_name;
use crate::ruleopt::{format_ranges, format_value_option};
use crate::units::format_probability;

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
        proto: body
            .iter()
            .position(|c| !c.negate && (is_proto(&c.kind) || is_proto_block(&c.kind))),
        src: body.iter().position(|c| {
            matches!(
                c.kind,
                CondKind::SrcAddr(_) | CondKind::SrcMe { .. } | CondKind::SrcTable(_)
            )
        }),
        dst: body.iter().position(|c| {
            matches!(
                c.kind,
                CondKind::DstAddr(_) | CondKind::DstMe { .. } | CondKind::DstTable(_)
            )
        }),
    }
}

fn is_proto(k: &CondKind) -> bool {
    matches!(k, CondKind::Proto(_) | CondKind::IpVersion(4 | 6))
}

/// `{ tcp or udp }`: an or-block of plain protocols.
fn is_proto_block(k: &CondKind) -> bool {
    matches!(k, CondKind::Or(alts) if !alts.is_empty()
        && alts.iter().all(|a| !a.negate && is_proto(&a.kind)))
}

fn proto_text(k: &CondKind) -> String {
    match k {
        CondKind::Proto(n) => rule_proto_name(*n),
        CondKind::IpVersion(4) => "ip4".to_string(),
        CondKind::IpVersion(6) => "ip6".to_string(),
        CondKind::Or(alts) => format!(
            "{{ {} }}",
            alts.iter()
                .map(|a| proto_text(&a.kind))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
        _ => "ip".to_string(),
    }
}

/// The body reordered as it prints: the [`Layout`] part first, the rest as written.
pub(crate) fn canonical(body: Vec<Cond>) -> Vec<Cond> {
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
    let x = &spec.extra;
    if matches!(spec.action, Action::CheckState) {
        if let Some(f) = &x.flow {
            let _ = write!(out, " :{f}");
        }
    }
    if let Some(n) = x.log {
        out.push_str(" log");
        if n > 0 {
            let _ = write!(out, " logamount {n}");
        }
    }
    if let Some(t) = x.tag {
        let _ = write!(out, " {} {}", if t.untag { "untag" } else { "tag" }, t.tag);
    }
    let body = &spec.body;
    if matches!(spec.action, Action::CheckState) && body.is_empty() && x.comment.is_none() {
        // FreeBSD prints a check-state without a body.
        return out;
    }
    let l = layout(body);
    let proto = l
        .proto
        .map_or_else(|| "ip".to_string(), |i| proto_text(&body[i].kind));
    let endpoint = |i: Option<usize>| match i.map(|i| &body[i]) {
        Some(c) => format!(
            "{}{}",
            if c.negate { "not " } else { "" },
            addr_text(&c.kind)
        ),
        None => "any".to_string(),
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
        out.push_str(&format_cond(c));
    }
    if let Some(k) = x.state {
        out.push(' ');
        out.push_str(&format_state(k));
        if let Some(f) = &x.flow {
            let _ = write!(out, " :{f}");
        }
    }
    if let Some(c) = &x.comment {
        let _ = write!(out, " // {c}");
    }
    out
}

fn format_state(k: StateKind) -> String {
    let mask = |m: dummynet_engine::config::LimitMask| {
        let mut f = Vec::new();
        if m.src_addr {
            f.push("src-addr");
        }
        if m.src_port {
            f.push("src-port");
        }
        if m.dst_addr {
            f.push("dst-addr");
        }
        if m.dst_port {
            f.push("dst-port");
        }
        f.join(",")
    };
    match k {
        StateKind::Keep => "keep-state".into(),
        StateKind::Record => "record-state".into(),
        StateKind::Limit { mask: m, max } => format!("limit {} {max}", mask(m)),
        StateKind::SetLimit { mask: m, max } => format!("set-limit {} {max}", mask(m)),
    }
}

fn format_cond(c: &Cond) -> String {
    format!(
        "{}{}",
        if c.negate { "not " } else { "" },
        format_option(&c.kind)
    )
}

/// An address condition as it reads after `from`/`to` (or `src-ip`).
fn addr_text(k: &CondKind) -> String {
    match k {
        CondKind::SrcAddr(a) | CondKind::DstAddr(a) => format_addrs(a),
        CondKind::SrcMe { v6 } | CondKind::DstMe { v6 } => {
            if *v6 { "me6" } else { "me" }.to_string()
        }
        CondKind::SrcTable(t) | CondKind::DstTable(t) => format_table(t),
        _ => "any".to_string(),
    }
}

fn format_table(t: &TableRef) -> String {
    match t.value {
        Some(v) => format!("table({},{v})", t.name),
        None => format!("table({})", t.name),
    }
}

fn format_action(a: Action) -> String {
    match a {
        Action::Allow => "allow".into(),
        Action::Deny => "deny".into(),
        Action::Pipe(n) => format!("pipe {n}"),
        Action::Queue(n) => format!("queue {n}"),
        Action::Skipto(n) => format!("skipto {n}"),
        Action::Count => "count".into(),
        Action::CheckState => "check-state".into(),
        Action::Call(n) => format!("call {n}"),
        Action::Return => "return".into(),
        Action::Tablearg(t) => format!(
            "{} tablearg",
            match t {
                ArgAction::Pipe => "pipe",
                ArgAction::Queue => "queue",
                ArgAction::Skipto => "skipto",
                ArgAction::Call => "call",
            }
        ),
    }
}

fn format_option(k: &CondKind) -> String {
    if let Some(s) = format_value_option(k) {
        return s;
    }
    let v6_only = |a: &[AddrMatch]| !a.is_empty() && a.iter().all(|m| m.addr.is_ipv6());
    match k {
        CondKind::SrcMe { .. } | CondKind::SrcTable(_) => format!("src-ip {}", addr_text(k)),
        CondKind::DstMe { .. } | CondKind::DstTable(_) => format!("dst-ip {}", addr_text(k)),
        CondKind::Or(alts) => format!(
            "{{ {} }}",
            alts.iter()
                .map(format_cond)
                .collect::<Vec<_>>()
                .join(" or ")
        ),
        CondKind::Lookup(f, t) => format!("lookup {} {}", f.as_str(), format_table(t)),
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
        CondKind::SrcPort(p) => format!("src-port {}", format_ranges(p)),
        CondKind::DstPort(p) => format!("dst-port {}", format_ranges(p)),
        CondKind::Dir(Direction::In) => "in".into(),
        CondKind::Dir(Direction::Out) => "out".into(),
        CondKind::Recv(i) => format!("recv {}", format_iface(i)),
        CondKind::Xmit(i) => format!("xmit {}", format_iface(i)),
        CondKind::Via(i) => format!("via {}", format_iface(i)),
        _ => String::new(),
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

fn format_iface(i: &IfaceSpec) -> String {
    match i {
        IfaceSpec::Name(n) | IfaceSpec::Pattern(n) => n.clone(),
        IfaceSpec::Any => "any".into(),
        IfaceSpec::Table(t) => format_table(t),
    }
}
