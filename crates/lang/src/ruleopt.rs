//! Rule options that test header fields (`tcpflags syn,!ack`, `iplen
//! 0-100`, `icmptypes echo,echoreply`, `mac any 00:11:22:33:44:55/24`...):
//! how each reads and how it prints, side by side, so the two cannot drift.

use dummynet_engine::config::{frag_bit, tcp_option, Bits, CondKind, MacMatch, PortRange};

use crate::error::{ErrorKind, ParseError};
use crate::lexer::{Cursor, Tok};

/// Names of bits in an 8-bit field, as ipfw spells them.
type BitNames = &'static [(&'static str, u8)];

const TCP_FLAGS: BitNames = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ece", 0x40),
    ("cwr", 0x80),
];

const TCP_OPTIONS: BitNames = &[
    ("mss", tcp_option::MSS),
    ("window", tcp_option::WINDOW),
    ("sack", tcp_option::SACK),
    ("ts", tcp_option::TS),
    ("cc", tcp_option::CC),
];

const FRAG: BitNames = &[
    ("offset", frag_bit::OFFSET),
    ("mf", frag_bit::MF),
    ("df", frag_bit::DF),
    ("rf", frag_bit::RF),
];

/// ipfw's `iptos` names (RFC 791 and 1349 bits, the ECN bits of RFC 3168).
const IP_TOS: BitNames = &[
    ("lowdelay", 0x10),
    ("throughput", 0x08),
    ("reliability", 0x04),
    ("mincost", 0x02),
    ("congestion", 0x01),
];

/// ICMP types by ipfw's names (ipfw(8), `icmptypes`).
const ICMP_TYPES: &[(&str, u8)] = &[
    ("echoreply", 0),
    ("unreach", 3),
    ("squench", 4),
    ("redirect", 5),
    ("echo", 8),
    ("routeradv", 9),
    ("routersol", 10),
    ("timex", 11),
    ("paramprob", 12),
    ("timestamp", 13),
    ("timestampreply", 14),
    ("inforeq", 15),
    ("inforeply", 16),
    ("maskreq", 17),
    ("maskreply", 18),
];

/// Ethernet types by name, for `mac-type`.
const MAC_TYPES: &[(&str, u16)] = &[
    ("ip", 0x0800),
    ("ipv4", 0x0800),
    ("ipv6", 0x86dd),
    ("arp", 0x0806),
    ("rarp", 0x8035),
    ("vlan", 0x8100),
    ("pppoe_disc", 0x8863),
    ("pppoe_sess", 0x8864),
];

/// DSCP names (RFC 2474, 2597, 3246).
const DSCP: &[(&str, u8)] = &[
    ("be", 0),
    ("cs0", 0),
    ("cs1", 8),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("cs2", 16),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("cs3", 24),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("cs4", 32),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("cs5", 40),
    ("va", 44),
    ("ef", 46),
    ("cs6", 48),
    ("cs7", 56),
];

/// The option `kw` with its value, or `None` (nothing consumed) if `kw`
/// is none of these.
pub(crate) fn parse_value_option(
    cur: &mut Cursor<'_>,
    kw: &str,
) -> Result<Option<CondKind>, ParseError> {
    let bare = match kw {
        "setup" => Some(CondKind::Setup),
        "established" => Some(CondKind::Established),
        "layer2" => Some(CondKind::Layer2),
        "antispoof" => Some(CondKind::Antispoof),
        "verrevpath" => Some(CondKind::Verrevpath),
        "versrcreach" => Some(CondKind::Versrcreach),
        "diverted" => Some(CondKind::Diverted),
        _ => None,
    };
    if let Some(k) = bare {
        cur.bump();
        return Ok(Some(k));
    }
    let kind = match kw {
        "tcpflags" | "tcpflgs" => {
            cur.bump();
            CondKind::TcpFlags(bits(cur, "tcpflags", TCP_FLAGS)?)
        }
        "tcpoptions" | "tcpopts" => {
            cur.bump();
            CondKind::TcpOptions(bits(cur, "tcpoptions", TCP_OPTIONS)?)
        }
        "frag" => {
            cur.bump();
            // Bare `frag`: not the first fragment; `frag mf,!df`: flags.
            let spec_next = cur.peek_word().is_some_and(|w| {
                w.split(',').all(|p| {
                    FRAG.iter()
                        .any(|(n, _)| p.trim_start_matches('!').eq_ignore_ascii_case(n))
                })
            });
            if spec_next {
                CondKind::Frag(bits(cur, "frag", FRAG)?)
            } else {
                CondKind::Frag(Bits {
                    set: frag_bit::OFFSET,
                    clear: 0,
                })
            }
        }
        "iptos" => {
            cur.bump();
            CondKind::IpTos(bits(cur, "iptos", IP_TOS)?)
        }
        "tcpseq" | "tcpack" => {
            cur.bump();
            let n = cur.number(&format!("a number after `{kw}`"), 0, u64::from(u32::MAX))? as u32;
            if kw == "tcpseq" {
                CondKind::TcpSeq(n)
            } else {
                CondKind::TcpAck(n)
            }
        }
        "tcpwin" => {
            cur.bump();
            CondKind::TcpWin(ranges(cur, kw, 65535, &[])?)
        }
        "tcpdatalen" => {
            cur.bump();
            CondKind::TcpDataLen(ranges(cur, kw, 65535, &[])?)
        }
        "iplen" => {
            cur.bump();
            CondKind::IpLen(ranges(cur, kw, 65535, &[])?)
        }
        "ipttl" => {
            cur.bump();
            CondKind::IpTtl(ranges(cur, kw, 255, &[])?)
        }
        "ipid" => {
            cur.bump();
            CondKind::IpId(ranges(cur, kw, 65535, &[])?)
        }
        "ipprecedence" => {
            cur.bump();
            CondKind::IpPrecedence(cur.number("precedence after `ipprecedence`", 0, 7)? as u8)
        }
        "dscp" => {
            cur.bump();
            let mut map = 0u64;
            for r in ranges(cur, kw, 63, DSCP)? {
                for v in r.lo..=r.hi {
                    map |= 1 << v;
                }
            }
            CondKind::Dscp(map)
        }
        "icmptypes" | "icmptype" | "icmp6types" | "icmp6type" => {
            cur.bump();
            let v6 = kw.starts_with("icmp6");
            let names: &[(&str, u8)] = if v6 { &[] } else { ICMP_TYPES };
            let mut types = [0u64; 4];
            for r in ranges(cur, kw, 255, names)? {
                for t in r.lo..=r.hi {
                    types[usize::from(t / 64)] |= 1 << (t % 64);
                }
            }
            CondKind::IcmpTypes { v6, types }
        }
        "mac" => {
            cur.bump();
            let dst = mac(cur, "destination")?;
            let src = mac(cur, "source")?;
            CondKind::Mac { dst, src }
        }
        "mac-type" => {
            cur.bump();
            let names: Vec<(&str, u16)> = MAC_TYPES.to_vec();
            CondKind::MacType(ranges16(cur, kw, &names)?)
        }
        "tagged" => {
            cur.bump();
            CondKind::Tagged(ranges(cur, kw, 65534, &[])?)
        }
        _ => return Ok(None),
    };
    Ok(Some(kind))
}

/// `a,!b,c` over `names`.
fn bits(cur: &mut Cursor<'_>, kw: &str, names: BitNames) -> Result<Bits, ParseError> {
    let t = cur.word(&format!("a list such as {} after `{kw}`", example(names)))?;
    let mut b = Bits::default();
    // The lexer splits on commas: gather `a , !b , c`.
    let mut words = vec![t];
    while cur
        .peek()
        .is_some_and(|c| c.kind == Tok::Comma && c.start == words[words.len() - 1].end())
    {
        cur.bump();
        words.push(cur.word(&format!("a name after `,` in `{kw}`"))?);
    }
    for w in words {
        let (neg, name) = match w.text.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, w.text),
        };
        let Some(&(_, bit)) = names.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
            let known: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
            return Err(cur.error_at(
                w,
                ErrorKind::Syntax,
                format!(
                    "`{name}` is not a {kw} name (known: {}; `!` before one means clear)",
                    known.join(", ")
                ),
            ));
        };
        if neg {
            b.clear |= bit;
        } else {
            b.set |= bit;
        }
    }
    if b.set & b.clear != 0 {
        return Err(cur.error_at(
            t,
            ErrorKind::Syntax,
            format!("`{kw}` asks for a bit both set and clear"),
        ));
    }
    Ok(b)
}

fn example(names: BitNames) -> String {
    match names {
        [a, b, ..] => format!("{},!{}", a.0, b.0),
        [a] => a.0.to_string(),
        [] => String::new(),
    }
}

/// `N`, `N-M`, names from `names`, comma-separated, each at most `max`.
fn ranges(
    cur: &mut Cursor<'_>,
    kw: &str,
    max: u16,
    names: &[(&str, u8)],
) -> Result<Vec<PortRange>, ParseError> {
    let wide: Vec<(&str, u16)> = names.iter().map(|(n, v)| (*n, u16::from(*v))).collect();
    let r = ranges16(cur, kw, &wide)?;
    if let Some(bad) = r.iter().find(|r| r.hi > max) {
        let t = cur.peek().or_else(|| cur.tokens_since(0).last().copied());
        let msg = format!("`{kw}` values are 0..{max}, found {}", bad.hi);
        return Err(match t {
            Some(t) => cur.error_at(t, ErrorKind::Range, msg),
            None => cur.expected(&msg, &[]),
        });
    }
    Ok(r)
}

fn ranges16(
    cur: &mut Cursor<'_>,
    kw: &str,
    names: &[(&str, u16)],
) -> Result<Vec<PortRange>, ParseError> {
    let mut out = Vec::new();
    loop {
        let t = cur.word(&format!("a value or range (e.g. 10 or 10-20) after `{kw}`"))?;
        let one = |s: &str| -> Option<u16> {
            names
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(s))
                .map(|(_, v)| *v)
                .or_else(|| {
                    s.strip_prefix("0x")
                        .and_then(|h| u16::from_str_radix(h, 16).ok())
                })
                .or_else(|| {
                    s.parse::<u16>()
                        .ok()
                        .filter(|_| s.bytes().all(|b| b.is_ascii_digit()))
                })
        };
        let r = match t.text.split_once('-') {
            Some((a, b)) => one(a).zip(one(b)),
            None => one(t.text).map(|v| (v, v)),
        };
        let Some((lo, hi)) = r.filter(|(lo, hi)| lo <= hi) else {
            let known = if names.is_empty() {
                String::new()
            } else {
                format!(
                    " or a name ({})",
                    names.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )
            };
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                format!(
                    "expected a number, a range LO-HI{known} after `{kw}`, found `{}`",
                    t.text
                ),
            ));
        };
        out.push(PortRange { lo, hi });
        if !cur.eat_kind(Tok::Comma) {
            return Ok(out);
        }
    }
}

/// `any`, or `aa:bb:cc:dd:ee:ff` with `/LEN` or `&MASK`.
fn mac(cur: &mut Cursor<'_>, which: &str) -> Result<MacMatch, ParseError> {
    let t = cur.word(&format!("the {which} MAC address (or `any`) after `mac`"))?;
    if t.is("any") {
        return Ok(MacMatch::default());
    }
    let bad = |m: String| cur.error_at(t, ErrorKind::Syntax, m);
    let (addr_s, mask) = if let Some((a, len)) = t.text.split_once('/') {
        let len: u32 = len
            .parse()
            .ok()
            .filter(|&l| l <= 48)
            .ok_or_else(|| bad(format!("a MAC prefix length is 0..48, found `{len}`")))?;
        let m = if len == 0 {
            0u64
        } else {
            (u64::MAX << (64 - len)) >> 16
        };
        (a, to6(m))
    } else if let Some((a, m)) = t.text.split_once('&') {
        (
            a,
            parse_mac(m).ok_or_else(|| bad(format!("`{m}` is not a MAC mask")))?,
        )
    } else {
        (t.text, [0xff; 6])
    };
    let addr = parse_mac(addr_s).ok_or_else(|| {
        bad(format!(
            "expected a MAC address such as 00:11:22:33:44:55 (or `any`), found `{addr_s}`"
        ))
    })?;
    Ok(MacMatch { addr, mask })
}

fn to6(m: u64) -> [u8; 6] {
    let b = m.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for o in &mut out {
        *o = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

// ---------------------------------------------------------------- printing

/// The canonical text of an option of this module, or `None`.
pub(crate) fn format_value_option(k: &CondKind) -> Option<String> {
    Some(match k {
        CondKind::Setup => "setup".into(),
        CondKind::Established => "established".into(),
        CondKind::Layer2 => "layer2".into(),
        CondKind::Antispoof => "antispoof".into(),
        CondKind::Verrevpath => "verrevpath".into(),
        CondKind::Versrcreach => "versrcreach".into(),
        CondKind::Diverted => "diverted".into(),
        CondKind::TcpFlags(b) => format!("tcpflags {}", format_bits(*b, TCP_FLAGS)),
        CondKind::TcpOptions(b) => format!("tcpoptions {}", format_bits(*b, TCP_OPTIONS)),
        CondKind::Frag(b)
            if *b
                == (Bits {
                    set: frag_bit::OFFSET,
                    clear: 0,
                }) =>
        {
            "frag".into()
        }
        CondKind::Frag(b) => format!("frag {}", format_bits(*b, FRAG)),
        CondKind::IpTos(b) => format!("iptos {}", format_bits(*b, IP_TOS)),
        CondKind::TcpSeq(n) => format!("tcpseq {n}"),
        CondKind::TcpAck(n) => format!("tcpack {n}"),
        CondKind::TcpWin(r) => format!("tcpwin {}", format_ranges(r)),
        CondKind::TcpDataLen(r) => format!("tcpdatalen {}", format_ranges(r)),
        CondKind::IpLen(r) => format!("iplen {}", format_ranges(r)),
        CondKind::IpTtl(r) => format!("ipttl {}", format_ranges(r)),
        CondKind::IpId(r) => format!("ipid {}", format_ranges(r)),
        CondKind::IpPrecedence(n) => format!("ipprecedence {n}"),
        CondKind::Dscp(m) => format!(
            "dscp {}",
            format_bitmap((0..64).filter(|i| m >> i & 1 == 1))
        ),
        CondKind::IcmpTypes { v6, types } => format!(
            "{} {}",
            if *v6 { "icmp6types" } else { "icmptypes" },
            format_bitmap((0..256u16).filter(|&t| types[usize::from(t / 64)] >> (t % 64) & 1 == 1))
        ),
        CondKind::Mac { dst, src } => format!("mac {} {}", format_mac(dst), format_mac(src)),
        CondKind::MacType(r) => format!(
            "mac-type {}",
            r.iter()
                .map(|r| if r.lo == r.hi {
                    format!("0x{:04x}", r.lo)
                } else {
                    format!("0x{:04x}-0x{:04x}", r.lo, r.hi)
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        CondKind::Tagged(r) => format!("tagged {}", format_ranges(r)),
        _ => return None,
    })
}

fn format_bits(b: Bits, names: BitNames) -> String {
    let mut out = Vec::new();
    for (n, bit) in names {
        if b.set & bit != 0 {
            out.push(n.to_string());
        }
        if b.clear & bit != 0 {
            out.push(format!("!{n}"));
        }
    }
    out.join(",")
}

pub(crate) fn format_ranges(p: &[PortRange]) -> String {
    p.iter()
        .map(|r| {
            if r.lo == r.hi {
                r.lo.to_string()
            } else {
                format!("{}-{}", r.lo, r.hi)
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Set members as a list with runs as ranges: `0,3,8-11`.
fn format_bitmap(set: impl Iterator<Item = u16>) -> String {
    let mut r: Vec<PortRange> = Vec::new();
    for v in set {
        match r.last_mut() {
            Some(last) if last.hi + 1 == v => last.hi = v,
            _ => r.push(PortRange { lo: v, hi: v }),
        }
    }
    format_ranges(&r)
}

fn format_mac(m: &MacMatch) -> String {
    if m.mask == [0; 6] {
        return "any".into();
    }
    let hex = |a: &[u8; 6]| {
        a.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let bits: u32 = m.mask.iter().map(|b| b.count_ones()).sum();
    let mask = u64::from_be_bytes([
        0, 0, m.mask[0], m.mask[1], m.mask[2], m.mask[3], m.mask[4], m.mask[5],
    ]);
    let prefix = bits == 0 || (mask << 16).leading_ones() == bits;
    let addr = hex(&m.addr);
    if bits == 48 {
        addr
    } else if prefix {
        format!("{addr}/{bits}")
    } else {
        format!("{addr}&{}", hex(&m.mask))
    }
}
