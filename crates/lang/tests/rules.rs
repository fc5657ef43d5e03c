//! Rules: what each form parses to, the canonical text, and the round trip
//! parse(format_rule_body(parse(x))) == parse(x).

use dummynet_engine::config::{
    Action, AddrMatch, Command, Cond, CondKind, IfaceSpec, PortRange, RuleSpec,
};
use dummynet_engine::flow::proto;
use dummynet_engine::rng::Probability;
use dummynet_engine::Direction;
use dummynet_lang::{format_rule_body, parse_command, ErrorKind, Statement};
use proptest::prelude::*;

fn spec(line: &str) -> RuleSpec {
    match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(Command::AddRule(r))) => r,
        Ok(other) => panic!("{line}: not a rule: {other:?}"),
        Err(e) => panic!("{line}:\n{e}"),
    }
}

fn body(line: &str) -> Vec<Cond> {
    spec(line).body
}

fn net(s: &str, prefix: u8) -> AddrMatch {
    AddrMatch {
        addr: s.parse().unwrap(),
        prefix,
    }
}

fn ports(p: &[(u16, u16)]) -> Vec<PortRange> {
    p.iter().map(|&(lo, hi)| PortRange { lo, hi }).collect()
}

/// Parses `add BODY`, prints it, parses the print, and checks both agree.
fn round_trip(line: &str) -> String {
    let first = spec(line);
    let text = format_rule_body(&first);
    let again = spec(&format!("add {text}"));
    assert_eq!(
        RuleSpec {
            number: None,
            ..first
        },
        again,
        "{line}  ->  {text}"
    );
    text
}

#[test]
fn actions_and_numbers() {
    let cases = [
        ("add allow ip from any to any", Action::Allow),
        ("add accept ip from any to any", Action::Allow),
        ("add pass ip from any to any", Action::Allow),
        ("add permit ip from any to any", Action::Allow),
        ("add deny ip from any to any", Action::Deny),
        ("add drop ip from any to any", Action::Deny),
        ("add pipe 65535 ip from any to any", Action::Pipe(65535)),
        ("add queue 7 ip from any to any", Action::Queue(7)),
        ("add 10 skipto 20 ip from any to any", Action::Skipto(20)),
        // Back or to itself, as FreeBSD takes it (the next rule, then).
        ("add 30 skipto 20 ip from any to any", Action::Skipto(20)),
        ("add 30 skipto 30 ip from any to any", Action::Skipto(30)),
        ("add count ip from any to any", Action::Count),
    ];
    for (line, action) in cases {
        assert_eq!(spec(line).action, action, "{line}");
    }
    assert_eq!(spec("add 1 allow ip from any to any").number, Some(1));
    assert_eq!(
        spec("add 65534 allow ip from any to any").number,
        Some(65534)
    );
    assert_eq!(spec("add allow ip from any to any").number, None);
    for bad in [
        "add 0 allow ip from any to any",
        "add 65535 allow ip from any to any",
        "add 99999 allow ip from any to any",
    ] {
        let e = parse_command(bad).unwrap_err();
        assert_eq!(
            (e.kind, e.found()),
            (ErrorKind::Range, bad.split(' ').nth(1)),
            "{e}"
        );
        assert!(e.message.contains("65534"), "{e}");
    }
    let e = parse_command("add pipe 0 ip from any to any").unwrap_err();
    assert!(e.message.contains("1..65535"), "{e}");
}

#[test]
fn prob_goes_before_or_after_the_action() {
    let half = Probability::new(0.5);
    assert_eq!(
        spec("add 100 prob 0.5 pipe 1 ip from any to any").prob,
        half
    );
    assert_eq!(spec("add pipe 1 prob 0.5 ip from any to any").prob, half);
    assert_eq!(
        round_trip("add prob 0.5 pipe 1 ip from any to any"),
        "prob 0.500000 pipe 1 ip from any to any"
    );
    assert_eq!(
        parse_command("add prob 2 allow ip from any to any")
            .unwrap_err()
            .kind,
        ErrorKind::Range
    );
}

#[test]
fn protocols() {
    assert_eq!(body("add allow ip from any to any"), vec![]);
    assert_eq!(body("add allow all from any to any"), vec![]);
    assert_eq!(body("add allow any from any to any"), vec![]);
    assert_eq!(
        body("add allow tcp from any to any"),
        vec![Cond::new(CondKind::Proto(proto::TCP))]
    );
    assert_eq!(
        body("add allow udp from any to any"),
        vec![Cond::new(CondKind::Proto(proto::UDP))]
    );
    assert_eq!(
        body("add allow icmp from any to any"),
        vec![Cond::new(CondKind::Proto(proto::ICMP))]
    );
    assert_eq!(
        body("add allow ipv6-icmp from any to any"),
        vec![Cond::new(CondKind::Proto(58))]
    );
    assert_eq!(
        body("add allow icmp6 from any to any"),
        vec![Cond::new(CondKind::Proto(58))]
    );
    assert_eq!(
        body("add allow 47 from any to any"),
        vec![Cond::new(CondKind::Proto(47))]
    );
    assert_eq!(
        body("add allow gre from any to any"),
        vec![Cond::new(CondKind::Proto(47))]
    );
    for v4 in ["ip4", "ipv4"] {
        assert_eq!(
            body(&format!("add allow {v4} from any to any")),
            vec![Cond::new(CondKind::IpVersion(4))]
        );
    }
    for v6 in ["ip6", "ipv6"] {
        assert_eq!(
            body(&format!("add allow {v6} from any to any")),
            vec![Cond::new(CondKind::IpVersion(6))]
        );
    }
    assert_eq!(
        body("add allow ip from any to any ipversion 6"),
        vec![Cond::new(CondKind::IpVersion(6))]
    );
    assert_eq!(body("add allow ip from any to any proto ip"), vec![]);
    assert_eq!(
        body("add allow ip from any to any not proto udp"),
        vec![Cond::not(CondKind::Proto(proto::UDP))]
    );
    assert!(parse_command("add allow 256 from any to any").is_err());
}

#[test]
fn addresses() {
    let src = |v| Cond::new(CondKind::SrcAddr(v));
    assert_eq!(
        body("add allow ip from 10.0.0.1 to any"),
        vec![src(vec![net("10.0.0.1", 32)])]
    );
    // Host bits under the prefix are cleared, as FreeBSD does.
    assert_eq!(
        body("add allow ip from 10.1.2.3/24 to any"),
        vec![src(vec![net("10.1.2.0", 24)])]
    );
    assert_eq!(
        body("add allow ip from 10.1.2.3:255.255.0.0 to any"),
        vec![src(vec![net("10.1.0.0", 16)])]
    );
    assert_eq!(
        body("add allow ip from 2001:db8::1/32 to any"),
        vec![src(vec![net("2001:db8::", 32)])]
    );
    let two = vec![net("10.0.0.1", 32), net("10.0.0.2", 32)];
    for list in [
        "{ 10.0.0.1, 10.0.0.2 }",
        "{ 10.0.0.1 or 10.0.0.2 }",
        "{10.0.0.1,10.0.0.2}",
        "10.0.0.1,10.0.0.2",
        "10.0.0.1, 10.0.0.2",
    ] {
        assert_eq!(
            body(&format!("add allow ip from {list} to any")),
            vec![src(two.clone())],
            "{list}"
        );
    }
    assert_eq!(
        body("add allow ip from any to not 192.168.0.0/16"),
        vec![Cond::not(CondKind::DstAddr(vec![net("192.168.0.0", 16)]))]
    );
    assert_eq!(
        body("add allow ip from any to any dst-ip6 2001:db8::/64 src-ip 10.0.0.0/8"),
        vec![
            Cond::new(CondKind::SrcAddr(vec![net("10.0.0.0", 8)])),
            Cond::new(CondKind::DstAddr(vec![net("2001:db8::", 64)])),
        ]
    );
    for bad in [
        "10.0.0.0/33",
        "2001:db8::/129",
        "10.0.0.256",
        "host.example",
        "10.0.0.0:255.0.255.0",
    ] {
        let e = parse_command(&format!("add allow ip from {bad} to any")).unwrap_err();
        assert_eq!(e.found(), Some(bad), "{e}");
    }
    assert!(parse_command("add allow ip from not any to any").is_err());
}

#[test]
fn port_lists() {
    let dst = |p: &[(u16, u16)]| Cond::new(CondKind::DstPort(ports(p)));
    let tcp = Cond::new(CondKind::Proto(proto::TCP));
    assert_eq!(
        body("add allow tcp from any to any 80"),
        vec![tcp.clone(), dst(&[(80, 80)])]
    );
    assert_eq!(
        body("add allow tcp from any to any http"),
        vec![tcp.clone(), dst(&[(80, 80)])]
    );
    assert_eq!(
        body("add allow tcp from any to any 80,443,1024-65535"),
        vec![tcp.clone(), dst(&[(80, 80), (443, 443), (1024, 65535)])]
    );
    assert_eq!(
        body("add allow tcp from any to any dst-port 22"),
        vec![tcp.clone(), dst(&[(22, 22)])]
    );
    assert_eq!(
        body("add allow udp from any 53 to any"),
        vec![
            Cond::new(CondKind::Proto(proto::UDP)),
            Cond::new(CondKind::SrcPort(ports(&[(53, 53)])))
        ]
    );
    assert_eq!(
        body("add allow tcp from any to any not 80 in"),
        vec![
            tcp.clone(),
            Cond::not(CondKind::DstPort(ports(&[(80, 80)]))),
            Cond::new(CondKind::Dir(Direction::In))
        ]
    );
    // A `not` that is not followed by a port negates the next option.
    assert_eq!(
        body("add allow tcp from any to any not in"),
        vec![tcp, Cond::not(CondKind::Dir(Direction::In))]
    );
    for bad in ["65536", "80-20", "nosuchservice"] {
        assert!(
            parse_command(&format!("add allow tcp from any to any dst-port {bad}")).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn interfaces_and_directions() {
    assert_eq!(
        body("add allow ip from any to any in recv em0"),
        vec![
            Cond::new(CondKind::Dir(Direction::In)),
            Cond::new(CondKind::Recv(IfaceSpec::Name("em0".into())))
        ]
    );
    assert_eq!(
        body("add allow ip from any to any xmit ppp*"),
        vec![Cond::new(CondKind::Xmit(IfaceSpec::Pattern("ppp*".into())))]
    );
    assert_eq!(
        body("add allow ip from any to any via any"),
        vec![Cond::new(CondKind::Via(IfaceSpec::Any))]
    );
    assert_eq!(
        body("add allow ip from any to any not via em0.100"),
        vec![Cond::not(CondKind::Via(IfaceSpec::Name("em0.100".into())))]
    );
    assert_eq!(
        parse_command("add allow ip from any to any via 10.0.0.1")
            .unwrap_err()
            .kind,
        ErrorKind::Unavailable
    );
}

#[test]
fn options_only_bodies_print_canonically() {
    assert_eq!(
        round_trip("add pipe 2 in proto tcp"),
        "pipe 2 tcp from any to any in"
    );
    assert_eq!(
        round_trip("add pipe 4 src-ip 10.1.2.0/24 in"),
        "pipe 4 ip from 10.1.2.0/24 to any in"
    );
    assert_eq!(
        round_trip("add pipe 3 out"),
        "pipe 3 ip from any to any out"
    );
    assert_eq!(round_trip("add deny"), "deny ip from any to any");
}

#[test]
fn canonical_text() {
    let cases = [
        (
            "add 100 pipe 1 ip from any to any in",
            "pipe 1 ip from any to any in",
        ),
        (
            "add allow tcp from 10.0.0.0/8 80 to any",
            "allow tcp from 10.0.0.0/8 to any src-port 80",
        ),
        (
            "add allow tcp from any to { 10.0.0.1 or 10.0.0.2 } 80,http",
            "allow tcp from any to 10.0.0.1,10.0.0.2 dst-port 80,80",
        ),
        (
            "add allow ip6 from 2001:db8::/32 to any",
            "allow ip6 from 2001:db8::/32 to any",
        ),
        (
            "add allow ip from any to any dst-ip6 2001:db8::1 dst-ip6 ::1",
            "allow ip from any to 2001:db8::1 dst-ip6 ::1",
        ),
        (
            "add allow ip from any to any ipversion 4 proto tcp",
            "allow ip4 from any to any proto tcp",
        ),
        (
            "add allow ipv6 from any to any not proto ipv6-icmp",
            "allow ip6 from any to any not proto ipv6-icmp",
        ),
        ("add allow 41 from any to any", "allow 41 from any to any"),
        (
            "add count ip from any to not 10.0.0.0/8 not via em*",
            "count ip from any to not 10.0.0.0/8 not via em*",
        ),
        (
            "add skipto 200 ip from any to any xmit any recv lo0",
            "skipto 200 ip from any to any xmit any recv lo0",
        ),
        (
            "add queue 1 tcp from any to any not src-port 1-1023 out",
            "queue 1 tcp from any to any not src-port 1-1023 out",
        ),
        // Probabilities are stored in 2^-32 steps; the text is the shortest that reads back exactly.
        (
            "add prob 0.1234567891 deny ip from any to any",
            "prob 0.1234567892 deny ip from any to any",
        ),
    ];
    for (line, text) in cases {
        assert_eq!(round_trip(line), text, "{line}");
    }
}

// ---------------------------------------------------------------- properties

/// Words of the rule language, valid and not, to build soups from.
const SOUP: &[&str] = &[
    "add",
    "100",
    "65534",
    "65535",
    "0",
    "prob",
    "0.5",
    "1.5",
    "allow",
    "deny",
    "pipe",
    "queue",
    "skipto",
    "count",
    "1",
    "ip",
    "tcp",
    "udp",
    "ip6",
    "ipv4",
    "47",
    "256",
    "from",
    "to",
    "form",
    "any",
    "not",
    "me",
    "10.0.0.1",
    "10.0.0.0/8",
    "2001:db8::/32",
    "::1",
    "{",
    "}",
    ",",
    "or",
    "80",
    "80-90",
    "90-80",
    "http",
    "in",
    "out",
    "via",
    "recv",
    "xmit",
    "em0",
    "em*",
    "proto",
    "src-ip",
    "dst-ip",
    "src-ip6",
    "dst-port",
    "src-port",
    "ipversion",
    "4",
    "6",
    "5",
    "setup",
    "log",
    "#",
    "é",
    "",
    "-",
    "/",
    ":",
    "1.2.3.4:255.255.0.0",
    "config",
    "bw",
    "10Mbit/s",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(SOUP), 0..14).prop_map(|w| w.join(" "))
}

/// A rule from the grammar, written in varied but valid ways.
fn valid_rule() -> impl Strategy<Value = String> {
    let action = prop::sample::select(
        &[
            "allow",
            "deny",
            "pipe 3",
            "queue 9",
            "skipto 60000",
            "count",
        ][..],
    );
    let prob = prop::sample::select(&["", "prob 0.25 ", "prob 1 ", "prob 0.000001 "][..]);
    let proto = prop::sample::select(
        &[
            "", "ip ", "tcp ", "udp ", "ip6 ", "ipv4 ", "icmp ", "132 ", "all ",
        ][..],
    );
    let addr = prop::sample::select(
        &[
            "any",
            "10.0.0.1",
            "not 10.0.0.0/8",
            "{ 1.2.3.4 or 5.6.7.0/24 }",
            "2001:db8::/48",
            "1.2.3.4,::1",
        ][..],
    );
    let port = prop::sample::select(&["", " 80", " 1024-2048,http", " not 22"][..]);
    let option = prop::sample::select(
        &[
            "in",
            "out",
            "not in",
            "via em0",
            "recv any",
            "xmit tun*",
            "proto udp",
            "not proto tcp",
            "src-ip 10.0.0.0/8",
            "dst-ip6 ::1",
            "src-port 1-2",
            "not dst-port 53",
            "ipversion 6",
        ][..],
    );
    let from_to = prop::bool::ANY;
    (
        prob,
        action,
        proto,
        from_to,
        addr.clone(),
        port.clone(),
        addr,
        port,
        prop::collection::vec(option, 0..4),
    )
        .prop_map(|(prob, action, proto, from_to, src, sp, dst, dp, opts)| {
            let endpoints = if from_to {
                format!("from {src}{sp} to {dst}{dp} ")
            } else {
                String::new()
            };
            format!("add {prob}{action} {proto}{endpoints}{}", opts.join(" "))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,80}") {
        let _ = parse_command(&s);
        let _ = parse_command(&format!("ipfw add {s}"));
        let _ = parse_command(&format!("pipe 1 config {s}"));
        let _ = parse_command(&format!("sched 1 config {s}"));
    }

    #[test]
    fn token_soup_never_panics_and_errors_point_inside(s in soup()) {
        for line in [s.clone(), format!("ipfw {s}"), format!("add {s}")] {
            if let Err(e) = parse_command(&line) {
                prop_assert!(e.offset + e.len <= line.len());
                prop_assert!(line.is_char_boundary(e.offset));
                let _ = e.to_string();
            }
        }
    }

    /// Whatever rule a soup happens to form, its printed form reads back the same.
    #[test]
    fn soup_rules_round_trip(s in soup()) {
        if let Ok(Statement::Apply(Command::AddRule(r))) = parse_command(&format!("add {s}")).map(|p| p.statement) {
            let text = format_rule_body(&r);
            let again = parse_command(&format!("add {text}")).map(|p| p.statement);
            prop_assert_eq!(again, Ok(Statement::Apply(Command::AddRule(RuleSpec { number: None, ..r }))), "{}", text);
        }
    }

    #[test]
    fn valid_rules_parse_and_round_trip(line in valid_rule()) {
        let r = match parse_command(&line).map(|p| p.statement) {
            Ok(Statement::Apply(Command::AddRule(r))) => r,
            other => return Err(TestCaseError::fail(format!("{line}: {other:?}"))),
        };
        let text = format_rule_body(&r);
        let again = parse_command(&format!("add {text}")).map(|p| p.statement);
        prop_assert_eq!(again, Ok(Statement::Apply(Command::AddRule(r))), "{} -> {}", line, text);
    }
}
