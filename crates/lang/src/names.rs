//! Protocol and service names: the few lines of /etc/protocols and
//! /etc/services that ipfw rules commonly use, so parsing does not depend on
//! the files of the machine it runs on.

use dummynet_engine::flow::proto;

/// Protocol names a rule accepts, with their numbers. `ip`, `ipv6` and their
/// relatives are not here: they select an IP version, not a protocol number.
const PROTOCOLS: &[(&str, u8)] = &[
    ("icmp", proto::ICMP),
    ("igmp", 2),
    ("ipencap", 4),
    ("tcp", proto::TCP),
    ("udp", proto::UDP),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("ipv6-icmp", proto::ICMPV6),
    ("icmp6", proto::ICMPV6),
    ("ospf", 89),
    ("pim", 103),
    ("vrrp", 112),
    ("sctp", 132),
    ("udplite", 136),
];

/// What the protocol word of a rule selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProtoWord {
    /// `ip`, `all`, `any`: every packet, no condition.
    Any,
    /// `ip4`/`ipv4`, `ip6`/`ipv6`.
    Version(u8),
    Number(u8),
}

/// Reads a protocol word: a name above, an IP-version word, or 0..255.
pub(crate) fn proto_word(s: &str) -> Option<ProtoWord> {
    let l = s.to_ascii_lowercase();
    match l.as_str() {
        "ip" | "all" | "any" => return Some(ProtoWord::Any),
        "ip4" | "ipv4" => return Some(ProtoWord::Version(4)),
        "ip6" | "ipv6" => return Some(ProtoWord::Version(6)),
        _ => {}
    }
    if let Some(&(_, n)) = PROTOCOLS.iter().find(|(name, _)| *name == l) {
        return Some(ProtoWord::Number(n));
    }
    if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) {
        return l.parse::<u8>().ok().map(ProtoWord::Number);
    }
    None
}

/// The words a rule accepts as a protocol, for suggestions.
pub(crate) fn proto_words() -> impl Iterator<Item = &'static str> {
    ["ip", "all", "any", "ip4", "ipv4", "ip6", "ipv6"]
        .into_iter()
        .chain(PROTOCOLS.iter().map(|(n, _)| *n))
}

/// How a rule prints protocol `n`: a name that reads back as `n`, else the number.
pub(crate) fn rule_proto_name(n: u8) -> String {
    PROTOCOLS
        .iter()
        .find(|(_, p)| *p == n)
        .map_or_else(|| n.to_string(), |(name, _)| (*name).to_string())
}

/// How `pipe show` names the protocol of a flow, as FreeBSD's
/// `getprotobynumber` would (so 0 is `ip`, 41 is `ipv6`).
pub(crate) fn flow_proto_name(n: u8) -> Option<&'static str> {
    match n {
        0 => Some("ip"),
        41 => Some("ipv6"),
        _ => PROTOCOLS
            .iter()
            .find(|(_, p)| *p == n)
            .map(|(name, _)| *name),
    }
}

/// Well-known ports, as FreeBSD's `getservbyname` would find them.
const SERVICES: &[(&str, u16)] = &[
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("http", 80),
    ("www", 80),
    ("pop3", 110),
    ("ntp", 123),
    ("imap", 143),
    ("snmp", 161),
    ("bgp", 179),
    ("ldap", 389),
    ("https", 443),
    ("isakmp", 500),
    ("syslog", 514),
    ("submission", 587),
    ("imaps", 993),
    ("pop3s", 995),
    ("openvpn", 1194),
    ("nfsd", 2049),
    ("mysql", 3306),
    ("sip", 5060),
    ("iperf3", 5201),
    ("postgresql", 5432),
];

pub(crate) fn service_port(s: &str) -> Option<u16> {
    SERVICES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
        .map(|(_, p)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_names_read_back() {
        for n in 0..=255u8 {
            assert_eq!(
                proto_word(&rule_proto_name(n)),
                Some(ProtoWord::Number(n)),
                "{n}"
            );
        }
    }

    #[test]
    fn version_words_are_not_numbers() {
        assert_eq!(proto_word("ipv6"), Some(ProtoWord::Version(6)));
        assert_eq!(proto_word("IP"), Some(ProtoWord::Any));
        assert_eq!(proto_word("256"), None);
        assert_eq!(proto_word("form"), None);
    }
}
