//! `add [N] [set S] [prob P] ACTION [log [logamount N]] [tag N] BODY`:
//! ipfw(8)'s rule syntax. The canonical text of a rule is in
//! [`crate::rulefmt`]; the values of the options (`tcpflags syn,!ack`,
//! `icmptypes echo`, `mac any 00:11:...`) in [`crate::ruleopt`].
//!
//! A body is a flat list of conditions, all of which must hold; an or-block
//! `{ A or B }` is one condition. The parser puts the body in canonical order
//! (protocol, source, destination, then the options as written) so that a
//! rule printed by [`crate::format_rule_body`] reads back to exactly the same
//! [`RuleSpec`], whichever way it was first written.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

use dummynet_engine::config::{
    Action, AddrMatch, ArgAction, Cond, CondKind, IfaceSpec, LimitMask, LookupField, PortRange,
    RuleExtra, RuleSpec, StateKind, TableName, TableRef, TagOp, DEFAULT_RULE, MAX_NUMBER,
};
use dummynet_engine::Direction;

use crate::error::{ErrorKind, ParseError};
use crate::lexer::{Cursor, Tok, Token};
use crate::names::{proto_word, proto_words, service_port, ProtoWord};
pub(crate) use crate::rulefmt::canonical;
use crate::ruleopt;
use crate::units::probability;

#[rustfmt::skip]
const ACTIONS: &[&str] = &[
    "allow", "accept", "pass", "permit", "deny", "drop", "pipe", "queue", "skipto", "count",
    "check-state", "call", "return",
];

/// FreeBSD actions dummynet does not do, with what each is.
#[rustfmt::skip]
const UNSUPPORTED_ACTIONS: &[(&str, &str)] = &[
    ("reject", "answering with ICMP"), ("unreach", "answering with ICMP"),
    ("unreach6", "answering with ICMPv6"), ("reset", "answering with a TCP RST"),
    ("reset6", "answering with a TCP RST"), ("fwd", "forwarding to a next hop"),
    ("forward", "forwarding to a next hop"), ("divert", "divert sockets"),
    ("tee", "divert sockets"), ("nat", "NAT"), ("nat64lsn", "NAT64"), ("nat64stl", "NAT64"),
    ("nat64clat", "NAT64"), ("nptv6", "NPTv6"), ("netgraph", "netgraph"),
    ("ngtee", "netgraph"), ("setfib", "FIBs"), ("setdscp", "rewriting DSCP"),
    ("abort", "SCTP aborts"), ("abort6", "SCTP aborts"), ("tcp-setmss", "rewriting TCP MSS"),
    ("eaction", "external actions"), ("altq", "ALTQ"), ("reass", "IP reassembly"),
    ("setmark", "packet marks"),
];

#[rustfmt::skip]
const OPTIONS: &[&str] = &[
    "in", "out", "via", "recv", "xmit", "proto", "src-ip", "dst-ip", "src-ip6", "dst-ip6",
    "src-port", "dst-port", "ipversion", "not", "setup", "established", "tcpflags", "tcpoptions",
    "tcpseq", "tcpack", "tcpwin", "tcpdatalen", "frag", "iplen", "ipttl", "iptos", "ipid",
    "ipprecedence", "dscp", "icmptypes", "icmp6types", "mac", "mac-type", "layer2", "antispoof",
    "verrevpath", "versrcreach", "tagged", "tag", "untag", "diverted", "log", "keep-state",
    "record-state", "limit", "set-limit", "lookup", "//",
];

/// FreeBSD rule options dummynet does not do, with what each needs.
#[rustfmt::skip]
const UNSUPPORTED_OPTIONS: &[(&str, &str)] = &[
    ("uid", "socket owners"), ("gid", "socket owners"), ("jail", "jails"), ("fib", "FIBs"),
    ("sockarg", "socket options"), ("ipoptions", "IP options"), ("ext6hdr", "IPv6 extension header tests"),
    ("flow-id", "IPv6 flow labels"), ("flow", "flow tables"),
    ("bridged", "bridge-only tests"), ("defer-action", "deferred actions"),
    ("defer-immediate-action", "deferred actions"), ("src-mac", "MAC lookups"),
    ("dst-mac", "MAC lookups"), ("diverted-loopback", ""), ("diverted-output", ""),
    ("altq", "ALTQ"), ("setfib", "FIBs"),
];

/// Parses what follows `add`.
pub(crate) fn parse_add(cur: &mut Cursor<'_>) -> Result<RuleSpec, ParseError> {
    let number = if cur.peek_is_number() {
        Some(rule_number_to_add(cur)?)
    } else {
        None
    };
    let mut extra = RuleExtra::default();
    if cur.eat("set") {
        extra.set = cur.number("rule set", 0, 30)? as u8;
    }
    // FreeBSD writes `prob` before the action; accept it after as well.
    let mut prob = parse_prob(cur)?;
    let action = parse_action(cur, &mut extra)?;
    if prob.is_none() {
        prob = parse_prob(cur)?;
    }
    parse_modifiers(cur, &mut extra)?;
    let body = parse_body(cur, &mut extra)?;
    Ok(RuleSpec {
        number,
        action,
        prob,
        body,
        extra,
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

fn unsupported_action(kw: &str) -> Option<&'static str> {
    UNSUPPORTED_ACTIONS
        .iter()
        .find(|(a, _)| *a == kw)
        .map(|(_, what)| *what)
}

fn parse_action(cur: &mut Cursor<'_>, extra: &mut RuleExtra) -> Result<Action, ParseError> {
    let what =
        "an action (allow, deny, pipe N, queue N, skipto N, count, check-state, call N, return)";
    let Some(t) = cur.peek().filter(|t| t.kind == Tok::Word) else {
        return Err(cur.expected(what, ACTIONS));
    };
    let kw = t.text.to_ascii_lowercase();
    if let Some(feature) = unsupported_action(&kw) {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!(
                "action `{}` needs {feature}, which dummynet does not do; it shapes, \
                 delays and filters (allow, deny, pipe, queue, skipto, call, count)",
                t.text
            ),
        ));
    }
    cur.bump();
    let action = match kw.as_str() {
        "allow" | "accept" | "pass" | "permit" => Action::Allow,
        "deny" | "drop" => Action::Deny,
        "count" => Action::Count,
        "return" => Action::Return,
        "check-state" => {
            extra.flow = flow_name(cur, true)?;
            Action::CheckState
        }
        "pipe" | "queue" | "skipto" | "call" => {
            if cur.eat("tablearg") {
                return Ok(Action::Tablearg(match kw.as_str() {
                    "pipe" => ArgAction::Pipe,
                    "queue" => ArgAction::Queue,
                    "skipto" => ArgAction::Skipto,
                    _ => ArgAction::Call,
                }));
            }
            let what = if matches!(kw.as_str(), "skipto" | "call") {
                "rule number"
            } else {
                kw.as_str()
            };
            let n = cur.number(&format!("{what} after `{kw}`"), 1, u64::from(MAX_NUMBER))?;
            // A `skipto` back (or to itself) is taken, as FreeBSD takes it:
            // the classifier then goes on at the next rule (ip_fw2.c never
            // jumps back, so no loop can form).
            match kw.as_str() {
                "pipe" => Action::Pipe(n as u32),
                "queue" => Action::Queue(n as u32),
                "skipto" => Action::Skipto(n.min(u64::from(DEFAULT_RULE)) as u16),
                _ => Action::Call(n.min(u64::from(DEFAULT_RULE)) as u16),
            }
        }
        _ => return Err(cur.expected_at(t, what, ACTIONS)),
    };
    Ok(action)
}

/// `:name` after `keep-state`, `limit ...` or `check-state`. `:any` means
/// every name, so only `check-state` may say it (as in FreeBSD's ipfw).
fn flow_name(cur: &mut Cursor<'_>, may_be_any: bool) -> Result<Option<String>, ParseError> {
    let Some(t) = cur.peek().filter(|t| t.text.starts_with(':')) else {
        return Ok(None);
    };
    cur.bump();
    let name = &t.text[1..];
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        || name.len() > 63
    {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            "a flow name is `:` then up to 63 letters, digits, `_`, `-` or `.`",
        ));
    }
    if !may_be_any && name == "any" {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            "`:any` selects every state in `check-state`; a state made here needs a name of its own",
        ));
    }
    Ok(Some(name.to_string()))
}

/// `log [logamount N]`, `tag N`, `untag N` between the action and the body.
fn parse_modifiers(cur: &mut Cursor<'_>, extra: &mut RuleExtra) -> Result<(), ParseError> {
    loop {
        if cur.peek_is("log") {
            parse_log(cur, extra)?;
        } else if cur.peek_is("tag") || cur.peek_is("untag") {
            parse_tag(cur, extra)?;
        } else if cur.peek_is("altq") {
            return Err(unavailable(
                cur,
                "`altq` needs ALTQ, which dummynet does not do",
            ));
        } else {
            return Ok(());
        }
    }
}

fn parse_log(cur: &mut Cursor<'_>, extra: &mut RuleExtra) -> Result<(), ParseError> {
    cur.bump();
    let amount = if cur.eat("logamount") {
        cur.number("log amount after `logamount`", 0, u64::from(u32::MAX))? as u32
    } else {
        0
    };
    extra.log = Some(amount);
    Ok(())
}

fn parse_tag(cur: &mut Cursor<'_>, extra: &mut RuleExtra) -> Result<(), ParseError> {
    let untag = cur.bump().is_some_and(|t| t.is("untag"));
    let tag = cur.number("tag (1..65534)", 1, 65534)? as u16;
    extra.tag = Some(TagOp { untag, tag });
    Ok(())
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

fn parse_body(cur: &mut Cursor<'_>, extra: &mut RuleExtra) -> Result<Vec<Cond>, ParseError> {
    let mut body = Vec::new();
    let mut stage = Stage::Start;
    if cur.peek().is_some_and(|t| t.kind == Tok::LBrace) && is_proto_block(cur) {
        body.push(parse_proto_block(cur)?);
        stage = Stage::AfterProto;
    } else if let Some(p) = cur.peek_word().and_then(proto_word) {
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
        if cur.peek().is_some_and(|t| t.text.starts_with("//")) {
            let text = cur.take_rest().trim_start_matches('/').trim();
            extra.comment = (!text.is_empty()).then(|| text.to_string());
            break;
        }
        if parse_state_option(cur, extra)? {
            stage = Stage::Options;
            continue;
        }
        if cur.peek_is("log") {
            parse_log(cur, extra)?;
            continue;
        }
        if cur.peek_is("tag") || cur.peek_is("untag") {
            parse_tag(cur, extra)?;
            continue;
        }
        body.extend(parse_option(cur, stage)?);
        stage = Stage::Options;
    }
    Ok(canonical(body))
}

/// `{ tcp or udp }` at the start of a body (rather than an option block).
fn is_proto_block(cur: &Cursor<'_>) -> bool {
    cur.peek_nth(1)
        .is_some_and(|t| t.kind == Tok::Word && proto_word(t.text).is_some() && !t.is("not"))
}

fn parse_proto_block(cur: &mut Cursor<'_>) -> Result<Cond, ParseError> {
    cur.bump();
    let mut alts = Vec::new();
    loop {
        let t = cur.word("a protocol in `{ ... or ... }`")?;
        match proto_word(t.text) {
            Some(ProtoWord::Any) => {
                return Err(cur.error_at(
                    t,
                    ErrorKind::Syntax,
                    format!(
                        "`{}` in a protocol block matches every packet; drop the block",
                        t.text
                    ),
                ))
            }
            Some(p) => alts.extend(proto_cond(p, false)),
            None => {
                let c: Vec<&str> = proto_words().collect();
                return Err(cur.expected_at(t, "a protocol name or number", &c));
            }
        }
        if cur.eat_kind(Tok::RBrace) {
            break;
        }
        if !cur.eat("or") {
            return Err(cur.expected("`or` or `}` in the protocol block", &["or"]));
        }
    }
    Ok(Cond::new(CondKind::Or(alts)))
}

/// `keep-state`, `record-state`, `limit MASK N`, `set-limit MASK N`, with
/// an optional `:flowname`; `false` if none comes next.
fn parse_state_option(cur: &mut Cursor<'_>, extra: &mut RuleExtra) -> Result<bool, ParseError> {
    let Some(t) = cur.peek() else {
        return Ok(false);
    };
    let kind = match t.text.to_ascii_lowercase().as_str() {
        "keep-state" => StateKind::Keep,
        "record-state" => StateKind::Record,
        kw @ ("limit" | "set-limit") => {
            cur.bump();
            let mask = parse_limit_mask(cur)?;
            let max = cur.number("number of states after the limit's fields", 1, 65535)? as u32;
            let kind = if kw == "limit" {
                StateKind::Limit { mask, max }
            } else {
                StateKind::SetLimit { mask, max }
            };
            return set_state(cur, t, extra, kind).map(|()| true);
        }
        _ => return Ok(false),
    };
    cur.bump();
    set_state(cur, t, extra, kind).map(|()| true)
}

fn set_state(
    cur: &mut Cursor<'_>,
    t: Token<'_>,
    extra: &mut RuleExtra,
    kind: StateKind,
) -> Result<(), ParseError> {
    if extra.state.is_some() {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            "a rule makes state once: one of keep-state, record-state, limit, set-limit",
        ));
    }
    extra.state = Some(kind);
    if let Some(name) = flow_name(cur, false)? {
        extra.flow = Some(name);
    }
    Ok(())
}

/// `src-addr`, `src-port`, `dst-addr`, `dst-port`, alone, comma-separated
/// or in braces.
fn parse_limit_mask(cur: &mut Cursor<'_>) -> Result<LimitMask, ParseError> {
    const FIELDS: &[&str] = &["src-addr", "src-port", "dst-addr", "dst-port"];
    let braced = cur.eat_kind(Tok::LBrace);
    let mut m = LimitMask::default();
    loop {
        let t = cur.word("a field to limit by (src-addr, src-port, dst-addr, dst-port)")?;
        match t.text.to_ascii_lowercase().as_str() {
            "src-addr" => m.src_addr = true,
            "src-port" => m.src_port = true,
            "dst-addr" => m.dst_addr = true,
            "dst-port" => m.dst_port = true,
            _ => {
                return Err(cur.expected_at(t, "src-addr, src-port, dst-addr or dst-port", FIELDS))
            }
        }
        let more = cur.eat_kind(Tok::Comma)
            || (braced
                && cur
                    .peek()
                    .is_some_and(|t| t.kind == Tok::Word && FIELDS.iter().any(|f| t.is(f))));
        if !more {
            break;
        }
    }
    if braced && !cur.eat_kind(Tok::RBrace) {
        return Err(cur.expected("`}` after the limit's fields", &[]));
    }
    Ok(m)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
}

/// `[not] (any | me | me6 | table(N) | ADDRS) [[not] PORTS]` after `from`
/// or `to`.
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
        conds.push(Cond {
            negate,
            kind: parse_addr_spec(cur, side)?,
        });
    }
    // `any` where the ports stand is no port condition: ipfw's compiler
    // takes it wherever a port list may come (`from 10.2.2.20 any to ...`).
    if cur.eat("any") {
        return Ok(conds);
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

/// An address condition: `me`, `me6`, `table(N[,V])`, or addresses.
fn parse_addr_spec(cur: &mut Cursor<'_>, side: Side) -> Result<CondKind, ParseError> {
    if let Some(t) = cur.peek().filter(|t| t.is("me") || t.is("me6")) {
        cur.bump();
        let v6 = t.is("me6");
        return Ok(match side {
            Side::Src => CondKind::SrcMe { v6 },
            Side::Dst => CondKind::DstMe { v6 },
        });
    }
    if cur.peek_word().is_some_and(is_table_word) {
        let t = parse_table_ref(cur)?;
        return Ok(match side {
            Side::Src => CondKind::SrcTable(t),
            Side::Dst => CondKind::DstTable(t),
        });
    }
    if cur.peek().is_some_and(|t| t.kind == Tok::LBrace) {
        return parse_addr_block(cur, side);
    }
    let addrs = parse_addr_list(cur)?;
    Ok(addr_kind(side, addrs))
}

fn addr_kind(side: Side, addrs: Vec<AddrMatch>) -> CondKind {
    match side {
        Side::Src => CondKind::SrcAddr(addrs),
        Side::Dst => CondKind::DstAddr(addrs),
    }
}

/// `{ A or B ... }` where an address goes: each alternative an address
/// (or address set), `me`, `me6` or a table, with its own `not`, as ipfw's
/// compiler reads one (OPNsense writes `to { 255.255.255.255 or me }`).
/// Plain addresses only make one address list; otherwise an or-block whose
/// runs of plain addresses are one list each.
fn parse_addr_block(cur: &mut Cursor<'_>, side: Side) -> Result<CondKind, ParseError> {
    cur.bump();
    let mut alts: Vec<Cond> = Vec::new();
    loop {
        let negate = cur.eat("not");
        let special = cur.peek().is_some_and(|t| {
            t.is("me") || t.is("me6") || (t.kind == Tok::Word && is_table_word(t.text))
        });
        let kind = if special {
            parse_addr_spec(cur, side)?
        } else {
            addr_kind(side, parse_addr(cur)?)
        };
        match (alts.last_mut(), negate, kind) {
            // A run of plain addresses is one list.
            (
                Some(Cond {
                    negate: false,
                    kind: CondKind::SrcAddr(run) | CondKind::DstAddr(run),
                }),
                false,
                CondKind::SrcAddr(more) | CondKind::DstAddr(more),
            ) => run.extend(more),
            (_, negate, kind) => alts.push(Cond { negate, kind }),
        }
        if cur.eat_kind(Tok::RBrace) {
            break;
        }
        if !(cur.eat_kind(Tok::Comma) || cur.eat("or")) {
            return Err(cur.expected("`,`, `or` or `}` in the address list", &["or"]));
        }
    }
    match alts.as_slice() {
        [Cond {
            negate: false,
            kind: CondKind::SrcAddr(_) | CondKind::DstAddr(_),
        }] => Ok(alts.remove(0).kind),
        _ => Ok(CondKind::Or(alts)),
    }
}

/// `table(...)`, also as ipfw(8)'s examples quote it for the shell
/// (`'table(1)'`), when a commands file keeps the quotes.
fn is_table_word(w: &str) -> bool {
    let w = w.trim_start_matches(['\'', '"']);
    w.len() > 6 && w.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("table("))
}

/// `table(N)`, `table(NAME)` or `table(N,VALUE)` (the comma splits it into
/// three tokens).
pub(crate) fn parse_table_ref(cur: &mut Cursor<'_>) -> Result<TableRef, ParseError> {
    let t = cur.word("`table(N)`")?;
    let quote = t.text.starts_with(['\'', '"']);
    let inner = &t.text[6 + usize::from(quote)..];
    let inner = if quote {
        inner.trim_end_matches(['\'', '"'])
    } else {
        inner
    };
    let (name_text, value) = if let Some(n) = inner.strip_suffix(')') {
        (n, None)
    } else {
        if !cur.eat_kind(Tok::Comma) {
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                "expected `table(N)` or `table(N,VALUE)`",
            ));
        }
        let v = cur.word("a value and `)` in `table(N,VALUE)`")?;
        let Some(num) = v.text.trim_end_matches(['\'', '"']).strip_suffix(')') else {
            return Err(cur.error_at(
                v,
                ErrorKind::Syntax,
                "expected `)` to close `table(N,VALUE`",
            ));
        };
        let value = num.parse::<u32>().map_err(|_| {
            cur.error_at(
                v,
                ErrorKind::Syntax,
                format!("a table value is a number (0..{}), found `{num}`", u32::MAX),
            )
        })?;
        (inner, Some(value))
    };
    let name = table_name(name_text).map_err(|m| cur.error_at(t, ErrorKind::Syntax, m))?;
    Ok(TableRef { name, value })
}

/// A table's name: a number (FreeBSD's legacy tables) or a word.
pub(crate) fn table_name(s: &str) -> Result<TableName, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u32>()
            .map(TableName::Number)
            .map_err(|_| format!("table number `{s}` is too large (0..{})", u32::MAX));
    }
    let ok = s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if ok && !s.eq_ignore_ascii_case("all") {
        Ok(TableName::Name(s.to_string()))
    } else {
        Err(format!(
            "a table is named by a number or a word of up to 63 letters, digits, `_`, `-`, `.` \
             starting with a letter (not `all`), found `{s}`"
        ))
    }
}

fn looks_like_port(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_digit())
        || w.split('-').next().and_then(service_port).is_some()
}

/// `a`, `a,b,c`, or an address set `10.0.0.0/24{1,5-9}` (a block
/// `{ a, b or c }` is [`parse_addr_block`]'s).
fn parse_addr_list(cur: &mut Cursor<'_>) -> Result<Vec<AddrMatch>, ParseError> {
    let mut addrs = parse_addr(cur)?;
    while cur.eat_kind(Tok::Comma) {
        addrs.extend(parse_addr(cur)?);
    }
    Ok(addrs)
}

const ADDR_HELP: &str = "an address such as 10.0.0.1, 10.0.0.0/8, 2001:db8::/32 or a host name";

/// One address or network (host bits under the prefix cleared, as FreeBSD
/// does), a host name (resolved now, as ipfw resolves it: every address it
/// has), or an address set `NET/LEN{A,B-C}` written with no blank before `{`.
fn parse_addr(cur: &mut Cursor<'_>) -> Result<Vec<AddrMatch>, ParseError> {
    let Some(t) = cur.peek().filter(|t| t.kind == Tok::Word) else {
        return Err(cur.expected(ADDR_HELP, &["any"]));
    };
    if ["me", "me6"].iter().any(|k| t.is(k)) || is_table_word(t.text) {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!(
                "`{}` stands alone; it cannot be part of an address list",
                t.text
            ),
        ));
    }
    let m = match addr_match(t.text) {
        Ok(m) => m,
        Err(e) => match resolve_host(t.text) {
            Lookup::Found(v) => {
                cur.bump();
                return Ok(v);
            }
            // ipfw: "hostname ``X'' unknown".
            Lookup::Unknown => {
                return Err(cur.error_at(
                    t,
                    ErrorKind::Syntax,
                    format!(
                        "cannot resolve host name `{}` (expected {ADDR_HELP})",
                        t.text
                    ),
                ))
            }
            Lookup::NotAName => return Err(cur.error_at(t, ErrorKind::Syntax, e)),
        },
    };
    cur.bump();
    let set_follows = cur
        .peek()
        .is_some_and(|b| b.kind == Tok::LBrace && b.start == t.end());
    if set_follows {
        return parse_addr_set(cur, t, m);
    }
    Ok(vec![m])
}

/// How host names in rules are resolved ([`resolve_host_names`]).
#[derive(Clone, Copy)]
enum Resolver {
    /// The system's resolver, as ipfw uses it.
    System,
    /// Not at all: a name is no address.
    Off,
    /// A lookup of the caller's ([`resolve_host_names_with`]).
    With(fn(&str) -> Vec<IpAddr>),
}

thread_local! {
    static RESOLVER: std::cell::Cell<Resolver> = const { std::cell::Cell::new(Resolver::System) };
}

/// Whether this thread's parses resolve host names in rules (they do by
/// default, as ipfw does). Fuzzers and tests turn it off so that no
/// generated name becomes a DNS query leaving the machine; a name is then
/// a syntax error like any other word that is no address.
pub fn resolve_host_names(on: bool) {
    RESOLVER.with(|r| r.set(if on { Resolver::System } else { Resolver::Off }));
}

/// Makes this thread's parses look host names up with `lookup` (its
/// addresses for a name, none if it has none) instead of the system's
/// resolver: for tests, so that a name that does not resolve is tried
/// without a DNS query.
pub fn resolve_host_names_with(lookup: fn(&str) -> Vec<IpAddr>) {
    RESOLVER.with(|r| r.set(Resolver::With(lookup)));
}

/// What became of a word that is no address.
enum Lookup {
    /// It is a host name with these addresses.
    Found(Vec<AddrMatch>),
    /// It reads as a host name, and the resolver has no address for it.
    Unknown,
    /// It is not taken for a host name (a keyword, a typo in an address,
    /// or names are not resolved).
    NotAName,
}

/// A word that is no address may be a host name: resolved now, as ipfw
/// does when the rule is added. Names only (letters first, and not a word
/// of the rule language), so a typo in an address or a misplaced keyword
/// is still reported as such.
fn resolve_host(name: &str) -> Lookup {
    let resolver = RESOLVER.with(std::cell::Cell::get);
    let plausible = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
        && !["to", "from", "or", "not", "any"]
            .iter()
            .chain(OPTIONS)
            .any(|k| name.eq_ignore_ascii_case(k));
    if !plausible {
        return Lookup::NotAName;
    }
    let found: Vec<IpAddr> = match resolver {
        Resolver::Off => return Lookup::NotAName,
        Resolver::With(lookup) => lookup(name),
        Resolver::System => (name, 0)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|sa| sa.ip()).collect())
            .unwrap_or_default(),
    };
    let mut addrs: Vec<AddrMatch> = found
        .into_iter()
        .map(|addr| AddrMatch {
            addr,
            prefix: if addr.is_ipv4() { 32 } else { 128 },
        })
        .collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        Lookup::Unknown
    } else {
        Lookup::Found(addrs)
    }
}

/// `{A,B-C}` after an IPv4 network of /24 or longer: the hosts of the
/// network whose last part is listed.
fn parse_addr_set(
    cur: &mut Cursor<'_>,
    net_tok: Token<'_>,
    net: AddrMatch,
) -> Result<Vec<AddrMatch>, ParseError> {
    let IpAddr::V4(base) = net.addr else {
        return Err(cur.error_at(
            net_tok,
            ErrorKind::Syntax,
            "address sets `{...}` are for IPv4 networks",
        ));
    };
    if net.prefix < 24 {
        return Err(cur.error_at(
            net_tok,
            ErrorKind::Range,
            "an address set's network must be /24 or longer (its hosts are 0..255)",
        ));
    }
    cur.bump();
    let span = 1u32 << (32 - u32::from(net.prefix));
    let mut out = Vec::new();
    loop {
        let t = cur.word("a host number or range (e.g. 20 or 20-25) in the address set")?;
        let (lo, hi) = match t.text.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok(), b.parse::<u32>().ok()),
            None => (t.text.parse::<u32>().ok(), t.text.parse::<u32>().ok()),
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                format!("expected a host number or range, found `{}`", t.text),
            ));
        };
        if lo > hi || hi >= span {
            return Err(cur.error_at(
                t,
                ErrorKind::Range,
                format!(
                    "hosts of a /{} are 0..{}, found `{}`",
                    net.prefix,
                    span - 1,
                    t.text
                ),
            ));
        }
        for h in lo..=hi {
            out.push(AddrMatch {
                addr: IpAddr::V4(Ipv4Addr::from(u32::from(base) + h)),
                prefix: 32,
            });
        }
        if cur.eat_kind(Tok::RBrace) {
            break;
        }
        if !cur.eat_kind(Tok::Comma) {
            return Err(cur.expected("`,` or `}` in the address set", &[]));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

pub(crate) fn addr_match(s: &str) -> Result<AddrMatch, String> {
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

/// One option, possibly preceded by `not`, or an or-block of options;
/// `None` for one that selects every packet (`proto ip`, `dst-port any`).
fn parse_option(cur: &mut Cursor<'_>, stage: Stage) -> Result<Option<Cond>, ParseError> {
    let negate = cur.eat("not");
    let Some(t) = cur.peek() else {
        return Err(cur.expected("a rule option after `not`", OPTIONS));
    };
    if t.kind == Tok::LBrace {
        cur.bump();
        let kind = parse_or_block(cur, t)?;
        return Ok(Some(Cond { negate, kind }));
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
            let side = if kw.starts_with("src") {
                Side::Src
            } else {
                Side::Dst
            };
            parse_addr_spec(cur, side)?
        }
        "lookup" => {
            cur.bump();
            parse_lookup(cur)?
        }
        "src-port" | "dst-port" => {
            cur.bump();
            if cur.eat("any") {
                if negate {
                    return Err(cur.error_at(
                        t,
                        ErrorKind::Syntax,
                        format!("`not {kw} any` matches no packet"),
                    ));
                }
                return Ok(None);
            }
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
        _ => other_option(cur, t, &kw, negate, stage)?,
    };
    Ok(Some(Cond { negate, kind }))
}

/// The alternatives of an or-block, `{` read: `{ A or B ... }`.
fn parse_or_block(cur: &mut Cursor<'_>, open: Token<'_>) -> Result<CondKind, ParseError> {
    let mut alts = Vec::new();
    loop {
        match parse_option(cur, Stage::Options)? {
            Some(c) => alts.push(c),
            None => {
                return Err(cur.error_at(
                    open,
                    ErrorKind::Syntax,
                    "an alternative of this block matches every packet; drop the block",
                ))
            }
        }
        if cur.eat_kind(Tok::RBrace) {
            break;
        }
        if !cur.eat("or") {
            return Err(cur.expected("`or` or `}` in the option block", &["or"]));
        }
    }
    Ok(CondKind::Or(alts))
}

/// `lookup FIELD TABLE`, `lookup` read.
fn parse_lookup(cur: &mut Cursor<'_>) -> Result<CondKind, ParseError> {
    const FIELDS: &[&str] = &["src-ip", "dst-ip", "src-port", "dst-port"];
    let f = cur.word("what to look up (src-ip, dst-ip, src-port, dst-port)")?;
    let field = match f.text.to_ascii_lowercase().as_str() {
        "src-ip" => LookupField::SrcIp,
        "dst-ip" => LookupField::DstIp,
        "src-port" => LookupField::SrcPort,
        "dst-port" => LookupField::DstPort,
        "uid" | "jail" => {
            return Err(cur.error_at(
                f,
                ErrorKind::Unavailable,
                format!(
                    "`lookup {}` needs socket owners, which dummynet does not see",
                    f.text
                ),
            ))
        }
        _ => return Err(cur.expected_at(f, "src-ip, dst-ip, src-port or dst-port", FIELDS)),
    };
    // `lookup dst-port 10` or `lookup dst-port table(10)`.
    let table = if cur.peek_word().is_some_and(is_table_word) {
        parse_table_ref(cur)?
    } else {
        let t = cur.word("a table after the field (`lookup dst-port 10`)")?;
        TableRef {
            name: table_name(t.text).map_err(|m| cur.error_at(t, ErrorKind::Syntax, m))?,
            value: None,
        }
    };
    Ok(CondKind::Lookup(field, table))
}

/// An option that is not one of the header's: a value option
/// (`ruleopt`), or what is refused, and why.
fn other_option(
    cur: &mut Cursor<'_>,
    t: Token<'_>,
    kw: &str,
    negate: bool,
    stage: Stage,
) -> Result<CondKind, ParseError> {
    if let Some(kind) = ruleopt::parse_value_option(cur, kw)? {
        Ok(kind)
    } else if let Some((_, what)) = UNSUPPORTED_OPTIONS.iter().find(|(o, _)| *o == kw) {
        let why = if what.is_empty() {
            "nothing is diverted here".to_string()
        } else {
            format!("it needs {what}, which dummynet does not do")
        };
        Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!("rule option `{}` is not available: {why}", t.text),
        ))
    } else if let Some(feature) = unsupported_action(kw) {
        Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            format!("`{}` needs {feature}, which dummynet does not do", t.text),
        ))
    } else if negate {
        Err(cur.expected("a rule option after `not`", OPTIONS))
    } else {
        Err(cur.expected(stage.expected(), &stage.candidates()))
    }
}

fn parse_iface(cur: &mut Cursor<'_>, kw: &str) -> Result<IfaceSpec, ParseError> {
    if cur.peek_word().is_some_and(is_table_word) {
        return Ok(IfaceSpec::Table(parse_table_ref(cur)?));
    }
    let t = cur.word(&format!(
        "an interface name, pattern (`em*`), `table(N)` or `any` after `{kw}`"
    ))?;
    if t.text.eq_ignore_ascii_case("any") {
        return Ok(IfaceSpec::Any);
    }
    if t.text.parse::<IpAddr>().is_ok() {
        return Err(cur.error_at(
            t,
            ErrorKind::Unavailable,
            "matching an interface by address is not supported; give its name",
        ));
    }
    Ok(if t.text.contains(['*', '?', '[']) {
        IfaceSpec::Pattern(t.text.to_string())
    } else {
        IfaceSpec::Name(t.text.to_string())
    })
}

pub(crate) fn unavailable(cur: &Cursor<'_>, message: &str) -> ParseError {
    match cur.peek() {
        Some(t) => cur.error_at(t, ErrorKind::Unavailable, message),
        None => cur.expected("more", &[]),
    }
}
