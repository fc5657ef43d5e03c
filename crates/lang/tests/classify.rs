//! Rulesets written in ipfw's language, applied to an engine and fed real
//! packets: dynamic state, tables and `tablearg`, `call`/`return`, sets,
//! tags, header options, `log`; and the rule sets of ipfw(8)'s EXAMPLES
//! and of rc.firewall, written from their text, deciding packets as
//! FreeBSD would.

use std::net::{IpAddr, Ipv4Addr};

use dummynet_engine::stats::DropReason;
use dummynet_engine::wire::{self, LinkType};
use dummynet_engine::{Direction, Engine, PacketInfo, Payload, Target, Verdict};
use dummynet_lang::{format_rules_with, parse_command, RuleShow, Statement};
use etherparse::PacketBuilder;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

/// An IP packet, and its Ethernet frame when it came with one.
#[derive(Debug)]
struct Pkt {
    bytes: Vec<u8>,
    ip_offset: usize,
}

impl Payload for Pkt {
    fn ip_bytes(&self) -> Option<&[u8]> {
        self.bytes.get(self.ip_offset..)
    }
    fn frame_bytes(&self) -> Option<&[u8]> {
        (self.ip_offset > 0).then_some(&self.bytes[..])
    }
}

/// What happened to a packet: passed or dropped by a rule, or queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pass(u16),
    Drop(u16, DropReason),
    Queued(u16, Target),
}

struct Rig {
    e: Engine<Pkt>,
    now: u64,
}

impl Rig {
    fn new(me: &[&str], lines: &[&str]) -> Self {
        let mut e = Engine::new(7);
        let me: Vec<IpAddr> = me.iter().map(|a| a.parse().unwrap()).collect();
        e.set_local_addrs(&me);
        let mut r = Rig { e, now: 0 };
        for l in lines {
            r.run(l);
        }
        r
    }

    fn run(&mut self, line: &str) {
        let p = parse_command(line).unwrap_or_else(|e| panic!("{line}:\n{e}"));
        match p.statement {
            Statement::Apply(c) => self
                .e
                .apply(self.now, c)
                .unwrap_or_else(|e| panic!("{line}: {e}")),
            Statement::Nop(_) => {}
            Statement::Show(_) => panic!("{line}: a show"),
        }
    }

    fn refused(&mut self, line: &str) -> String {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        match self.e.apply(self.now, c) {
            Ok(()) => panic!("{line}: accepted"),
            Err(e) => e.to_string(),
        }
    }

    /// Sends `bytes` (raw IP, or Ethernet if `eth`) at `t`.
    fn send_at(&mut self, t: u64, bytes: Vec<u8>, eth: bool, dir: Direction, via: &str) -> Fate {
        self.now = t;
        let link = if eth {
            LinkType::Ethernet
        } else {
            LinkType::RawIp
        };
        let parsed = wire::parse(link, &bytes).unwrap();
        let iface = Some(self.e.iface(via));
        let info = PacketInfo {
            len: parsed.len,
            key: parsed.key,
            dir,
            recv_if: if dir == Direction::In { iface } else { None },
            xmit_if: if dir == Direction::Out { iface } else { None },
        };
        let payload = Pkt {
            bytes,
            ip_offset: parsed.ip_offset,
        };
        let fate = match self.e.input(t, info, payload) {
            Verdict::Pass { rule, .. } => Fate::Pass(rule),
            Verdict::Drop { rule, reason, .. } => Fate::Drop(rule.unwrap_or(0), reason),
            Verdict::Queued { rule, target } => Fate::Queued(rule, target),
        };
        while self.e.poll(t).is_some() {}
        fate
    }

    fn send(&mut self, bytes: Vec<u8>, dir: Direction) -> Fate {
        self.send_at(self.now, bytes, false, dir, "em0")
    }

    fn show(&self, dynamic: bool) -> String {
        format_rules_with(
            &self.e.snapshot(),
            &RuleShow {
                counters: true,
                dynamic,
                ..RuleShow::default()
            },
        )
    }
}

fn v4(s: &str) -> [u8; 4] {
    s.parse::<Ipv4Addr>().unwrap().octets()
}

/// A TCP segment with `flags` ("S", "SA", "A", "FA", "R").
fn tcp(src: &str, sport: u16, dst: &str, dport: u16, flags: &str) -> Vec<u8> {
    tcp_ttl(src, sport, dst, dport, flags, 64)
}

fn tcp_ttl(src: &str, sport: u16, dst: &str, dport: u16, flags: &str, ttl: u8) -> Vec<u8> {
    let mut b = PacketBuilder::ipv4(v4(src), v4(dst), ttl).tcp(sport, dport, 1000, 65535);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(1),
            'F' => b.fin(),
            'R' => b.rst(),
            'P' => b.psh(),
            _ => panic!("flag {f}"),
        };
    }
    let mut out = Vec::new();
    b.write(&mut out, b"data").unwrap();
    out
}

fn udp(src: &str, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4(v4(src), v4(dst), 64)
        .udp(sport, dport)
        .write(&mut out, b"q")
        .unwrap();
    out
}

fn icmp_echo(src: &str, dst: &str) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4(v4(src), v4(dst), 64)
        .icmpv4_echo_request(1, 1)
        .write(&mut out, b"ping")
        .unwrap();
    out
}

use Direction::{In, Out};

const STATEFUL: &[&str] = &[
    "ipfw add 100 check-state",
    "ipfw add 200 allow tcp from me to any setup keep-state",
    "ipfw add 300 deny ip from any to any",
];

#[test]
fn stateful_tcp_passes_a_session_both_ways_and_blocks_the_unsolicited() {
    let mut r = Rig::new(&["10.0.0.1"], STATEFUL);
    let (me, srv) = ("10.0.0.1", "10.0.0.2");
    assert_eq!(r.send(tcp(me, 5000, srv, 80, "S"), Out), Fate::Pass(200));
    // The answer and the rest of the session go by the state, made by 200.
    assert_eq!(r.send(tcp(srv, 80, me, 5000, "SA"), In), Fate::Pass(200));
    assert_eq!(r.send(tcp(me, 5000, srv, 80, "A"), Out), Fate::Pass(200));
    assert_eq!(r.send(tcp(srv, 80, me, 5000, "PA"), In), Fate::Pass(200));
    // Unsolicited: a SYN from outside, or the server from another port.
    let deny = Fate::Drop(300, DropReason::RuleDeny);
    assert_eq!(r.send(tcp("10.0.0.3", 4000, me, 22, "S"), In), deny);
    assert_eq!(r.send(tcp(srv, 81, me, 5000, "SA"), In), deny);
    // A packet of the session that is not a SYN, from `me` with no state:
    // not `setup`, so denied.
    assert_eq!(r.send(tcp(me, 5001, srv, 80, "A"), Out), deny);
    let shown = r.show(true);
    assert!(shown.contains("## Dynamic rules (1):"), "{shown}");
    assert!(
        shown.contains("(300s) STATE tcp 10.0.0.1 5000 <-> 10.0.0.2 80 :default"),
        "{shown}"
    );
    // Rule 200 counts the SYN and the three packets matched by its state.
    assert!(shown.contains("00200 4 "), "{shown}");
    // Both FINs: dyn_fin_lifetime (1 s); after it, the flow is unknown.
    assert_eq!(r.send(tcp(me, 5000, srv, 80, "FA"), Out), Fate::Pass(200));
    assert_eq!(r.send(tcp(srv, 80, me, 5000, "FA"), In), Fate::Pass(200));
    let later = r.now + 2 * SEC;
    assert_eq!(
        r.send_at(later, tcp(srv, 80, me, 5000, "A"), false, In, "em0"),
        deny
    );
    assert!(!r.show(true).contains("Dynamic rules"));
}

#[test]
fn state_lifetimes_follow_the_sysctls() {
    let mut r = Rig::new(
        &["10.0.0.1"],
        &[
            "ipfw add 100 allow udp from me to any keep-state",
            "ipfw add 200 deny ip from any to any",
            "sysctl -w net.inet.ip.fw.dyn_udp_lifetime=3",
        ],
    );
    assert_eq!(
        r.send(udp("10.0.0.1", 999, "10.0.0.53", 53), Out),
        Fate::Pass(100)
    );
    let reply =
        |r: &mut Rig, t| r.send_at(t, udp("10.0.0.53", 53, "10.0.0.1", 999), false, In, "em0");
    assert_eq!(reply(&mut r, 2 * SEC), Fate::Pass(100));
    // Refreshed at 2 s: alive until 5 s, not after.
    assert_eq!(reply(&mut r, 4_999 * MS), Fate::Pass(100));
    assert_eq!(
        reply(&mut r, 8 * SEC),
        Fate::Drop(200, DropReason::RuleDeny)
    );
}

#[test]
fn limit_caps_states_per_source() {
    let mut r = Rig::new(
        &["10.0.0.1"],
        &[
            "ipfw add 100 allow tcp from any to me 22 setup limit src-addr 2",
            "ipfw add 200 deny ip from any to any",
        ],
    );
    let syn = |p| tcp("10.0.0.9", p, "10.0.0.1", 22, "S");
    assert_eq!(r.send(syn(1), In), Fate::Pass(100));
    assert_eq!(r.send(syn(2), In), Fate::Pass(100));
    assert_eq!(
        r.send(syn(3), In),
        Fate::Drop(100, DropReason::StateRefused)
    );
    // Another source has its own two.
    assert_eq!(
        r.send(tcp("10.0.0.8", 1, "10.0.0.1", 22, "S"), In),
        Fate::Pass(100)
    );
    let t = r.e.totals();
    assert_eq!(t.drops[DropReason::StateRefused as usize], 1);
    assert!(r
        .show(true)
        .contains("LIMIT tcp 10.0.0.9 1 <-> 10.0.0.1 22"));
}

#[test]
fn dyn_max_bounds_the_state_table() {
    let mut r = Rig::new(
        &[],
        &[
            "sysctl net.inet.ip.fw.dyn_max=3",
            "ipfw add 100 allow udp from any to any keep-state",
        ],
    );
    for p in 0..3 {
        assert_eq!(
            r.send(udp("10.0.0.2", p, "10.0.0.3", 9), Out),
            Fate::Pass(100)
        );
    }
    assert_eq!(
        r.send(udp("10.0.0.2", 7, "10.0.0.3", 9), Out),
        Fate::Drop(100, DropReason::StateRefused)
    );
    assert_eq!(r.e.snapshot().states.len(), 3);
}

#[test]
fn tablearg_sends_each_class_to_its_pipe() {
    // ipfw(8): "pipe tablearg ip from table(1) to any" with per-net values.
    let mut r = Rig::new(
        &[],
        &[
            "ipfw pipe 1 config bw 1Mbit/s",
            "ipfw pipe 4 config bw 4Mbit/s",
            "ipfw table 1 add 192.168.2.0/24 1",
            "ipfw table 1 add 192.168.0.0/27 4",
            "ipfw table 1 add 192.168.0.2 1",
            "ipfw add 100 pipe tablearg ip from 'table(1)' to any",
            "ipfw add 200 allow ip from any to any",
        ],
    );
    let from = |r: &mut Rig, a: &str| r.send(udp(a, 1, "10.9.9.9", 9), Out);
    assert_eq!(
        from(&mut r, "192.168.2.7"),
        Fate::Queued(100, Target::Pipe(1))
    );
    assert_eq!(
        from(&mut r, "192.168.0.9"),
        Fate::Queued(100, Target::Pipe(4))
    );
    // The longest prefix wins: the /32 over the /27.
    assert_eq!(
        from(&mut r, "192.168.0.2"),
        Fate::Queued(100, Target::Pipe(1))
    );
    assert_eq!(from(&mut r, "192.168.0.99"), Fate::Pass(200));
    r.run("ipfw table 1 delete 192.168.0.2");
    assert_eq!(
        from(&mut r, "192.168.0.2"),
        Fate::Queued(100, Target::Pipe(4))
    );
    // A value wanted in the lookup.
    r.run("ipfw add 50 deny ip from table(1,4) to any");
    assert_eq!(
        from(&mut r, "192.168.0.9"),
        Fate::Drop(50, DropReason::RuleDeny)
    );
    assert!(r.refused("ipfw table 1 destroy").contains("used by rule"));
    assert!(r.refused("ipfw table 1 add em0").contains("addr"));
}

#[test]
fn port_lookups_in_number_tables() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw pipe 1 config bw 1Mbit/s",
            "ipfw pipe 2 config bw 2Mbit/s",
            "ipfw table ports create type number",
            "ipfw table ports add 80 1",
            "ipfw table ports add 443 2",
            "ipfw add 100 pipe tablearg ip from any to any lookup dst-port ports",
            "ipfw add 200 allow ip from any to any",
        ],
    );
    let to = |r: &mut Rig, port| r.send(tcp("10.0.0.1", 999, "10.0.0.2", port, "S"), Out);
    assert_eq!(to(&mut r, 80), Fate::Queued(100, Target::Pipe(1)));
    assert_eq!(to(&mut r, 443), Fate::Queued(100, Target::Pipe(2)));
    assert_eq!(to(&mut r, 22), Fate::Pass(200));
    assert!(r
        .refused("ipfw add 300 deny ip from any to any lookup src-ip ports")
        .contains("number"));
}

#[test]
fn interface_tables_and_skipto_tablearg() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw table ifs create type iface",
            "ipfw table ifs add em0 1000",
            "ipfw add 100 skipto tablearg ip from any to any recv table(ifs)",
            "ipfw add 200 deny ip from any to any",
            "ipfw add 1000 allow ip from any to any",
        ],
    );
    let p = udp("10.0.0.1", 1, "10.0.0.2", 2);
    assert_eq!(r.send_at(0, p.clone(), false, In, "em0"), Fate::Pass(1000));
    assert_eq!(
        r.send_at(0, p, false, In, "em1"),
        Fate::Drop(200, DropReason::RuleDeny)
    );
}

#[test]
fn call_and_return() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 call 1000 ip from 192.0.2.0/24 to any",
            "ipfw add 200 allow ip from any to any",
            "ipfw add 1000 deny tcp from any to any dst-port 22",
            "ipfw add 1010 return ip from any to any",
            // A return with nothing to return to goes on to the next rule.
            "ipfw add 2000 return ip from any to any",
            "ipfw add 2010 deny ip from any to any",
        ],
    );
    assert_eq!(
        r.send(tcp("192.0.2.5", 1, "10.0.0.1", 22, "S"), In),
        Fate::Drop(1000, DropReason::RuleDeny)
    );
    assert_eq!(
        r.send(tcp("192.0.2.5", 1, "10.0.0.1", 80, "S"), In),
        Fate::Pass(200)
    );
    assert_eq!(
        r.send(tcp("198.51.100.5", 1, "10.0.0.1", 22, "S"), In),
        Fate::Pass(200)
    );
    r.run("ipfw delete 200");
    assert_eq!(
        r.send(tcp("192.0.2.5", 1, "10.0.0.1", 80, "S"), In),
        Fate::Drop(2010, DropReason::RuleDeny)
    );
}

#[test]
fn sets_enable_disable_move_swap_delete() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 set 1 deny udp from any to any",
            "ipfw add 200 set 2 deny tcp from any to any",
            "ipfw add 300 allow ip from any to any",
        ],
    );
    let u = || udp("10.0.0.1", 1, "10.0.0.2", 2);
    let t = || tcp("10.0.0.1", 1, "10.0.0.2", 2, "S");
    assert_eq!(r.send(u(), In), Fate::Drop(100, DropReason::RuleDeny));
    r.run("ipfw set disable 1");
    assert_eq!(r.send(u(), In), Fate::Pass(300));
    let sets = dummynet_lang::format_sets(&r.e.snapshot());
    assert!(sets.starts_with("disable 1 enable 0 2 3"), "{sets}");
    // swap moves the rules; set 1 stays disabled, now holding rule 200.
    r.run("ipfw set swap 1 2");
    assert_eq!(r.send(u(), In), Fate::Drop(100, DropReason::RuleDeny));
    assert_eq!(r.send(t(), In), Fate::Pass(300));
    r.run("ipfw set enable 1");
    r.run("ipfw set move rule 200 to 5");
    r.run("ipfw delete set 5");
    assert_eq!(r.send(t(), In), Fate::Pass(300));
    assert!(r.refused("ipfw set disable 31").contains("default rule"));
    let shown = format_rules_with(
        &r.e.snapshot(),
        &RuleShow {
            sets: true,
            ..RuleShow::default()
        },
    );
    assert!(shown.contains("00100 set 2 deny udp"), "{shown}");
}

#[test]
fn header_options_decide_on_the_packets_bytes() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 deny tcp from any to any tcpflags syn,fin",
            "ipfw add 110 deny ip from any to any ipttl 0-1",
            "ipfw add 120 count ip from any to any iplen 0-60",
            "ipfw add 130 deny icmp from any to any icmptypes echo",
            "ipfw add 140 deny tcp from any to any tcpoptions mss",
            "ipfw add 200 allow ip from any to any",
        ],
    );
    let (a, b) = ("10.0.0.1", "10.0.0.2");
    assert_eq!(
        r.send(tcp(a, 1, b, 2, "SF"), In),
        Fate::Drop(100, DropReason::RuleDeny)
    );
    assert_eq!(r.send(tcp(a, 1, b, 2, "S"), In), Fate::Pass(200));
    assert_eq!(
        r.send(tcp_ttl(a, 1, b, 2, "A", 1), In),
        Fate::Drop(110, DropReason::RuleDeny)
    );
    assert_eq!(
        r.send(icmp_echo(a, b), In),
        Fate::Drop(130, DropReason::RuleDeny)
    );
    let counted =
        r.e.snapshot()
            .rules
            .iter()
            .find(|x| x.number == 120)
            .unwrap()
            .packets;
    // The SYN (20 + 20 + 4 bytes) and the echo (32) reach rule 120 and are
    // at most 60 bytes; the SYN-FIN and TTL 1 stopped before it.
    assert_eq!(counted, 2);
}

#[test]
fn tags_mark_a_packet_for_later_rules() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 count tag 5 ip from 10.0.0.0/8 to any",
            "ipfw add 200 allow ip from any to any tagged 5",
            "ipfw add 300 deny ip from any to any",
        ],
    );
    assert_eq!(
        r.send(udp("10.1.1.1", 1, "192.0.2.1", 2), In),
        Fate::Pass(200)
    );
    assert_eq!(
        r.send(udp("172.16.0.1", 1, "192.0.2.1", 2), In),
        Fate::Drop(300, DropReason::RuleDeny)
    );
}

#[test]
fn layer2_and_mac_match_only_framed_packets() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 deny ip from any to any mac any 02:00:00:00:00:01",
            "ipfw add 200 count ip from any to any layer2 mac-type ip",
            "ipfw add 300 allow ip from any to any",
        ],
    );
    let framed = |src: [u8; 6]| {
        let mut out = Vec::new();
        PacketBuilder::ethernet2(src, [2, 0, 0, 0, 0, 9])
            .ipv4(v4("10.0.0.1"), v4("10.0.0.2"), 64)
            .udp(1, 2)
            .write(&mut out, b"x")
            .unwrap();
        out
    };
    assert_eq!(
        r.send_at(0, framed([2, 0, 0, 0, 0, 1]), true, In, "a"),
        Fate::Drop(100, DropReason::RuleDeny)
    );
    assert_eq!(
        r.send_at(0, framed([2, 0, 0, 0, 0, 2]), true, In, "a"),
        Fate::Pass(300)
    );
    // Raw IP (host mode): no MAC to match, not layer 2.
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), In),
        Fate::Pass(300)
    );
    let n200 =
        r.e.snapshot()
            .rules
            .iter()
            .find(|x| x.number == 200)
            .unwrap()
            .packets;
    assert_eq!(n200, 1);
}

#[test]
fn log_keeps_matches_up_to_logamount_until_resetlog() {
    let mut r = Rig::new(
        &[],
        &["ipfw add 100 allow log logamount 2 udp from any to any"],
    );
    for _ in 0..3 {
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 53), Out);
    }
    let (events, lost) = r.e.take_log();
    assert_eq!((events.len(), lost), (2, 0));
    assert_eq!(events[0].rule, 100);
    let line = dummynet_lang::format_log(&events[0], None, Some("em0"));
    assert!(
        line.ends_with(" 100 Accept UDP 10.0.0.1:1 10.0.0.2:53 out via em0 (29 bytes)"),
        "{line}"
    );
    r.run("ipfw resetlog 100");
    r.send(udp("10.0.0.1", 1, "10.0.0.2", 53), Out);
    assert_eq!(r.e.take_log().0.len(), 1);
}

#[test]
fn firewall_disable_passes_everything() {
    let mut r = Rig::new(&[], &["ipfw add 100 deny ip from any to any"]);
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), In),
        Fate::Drop(100, DropReason::RuleDeny)
    );
    r.run("ipfw disable firewall");
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), In),
        Fate::Pass(65535)
    );
    r.run("ipfw enable firewall");
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), In),
        Fate::Drop(100, DropReason::RuleDeny)
    );
}

/// ipfw(8), EXAMPLES: the stateful ruleset of "DYNAMIC RULES", the
/// `established`/`setup` pair, `limit`, and the per-direction pipes of
/// "TRAFFIC SHAPING"; host names replaced by documentation addresses.
#[test]
fn ipfw8_examples() {
    // "allow only outbound TCP connections we've created"
    let mut r = Rig::new(
        &["192.0.2.10"],
        &[
            "ipfw add check-state",
            "ipfw add deny tcp from any to any established",
            "ipfw add allow tcp from my-net to any setup keep-state"
                .replace("my-net", "192.0.2.0/24")
                .as_str(),
            "ipfw add deny tcp from any to any",
        ],
    );
    let deny = |n| Fate::Drop(n, DropReason::RuleDeny);
    assert_eq!(
        r.send(tcp("192.0.2.10", 40000, "203.0.113.5", 443, "S"), Out),
        Fate::Pass(300)
    );
    assert_eq!(
        r.send(tcp("203.0.113.5", 443, "192.0.2.10", 40000, "SA"), In),
        Fate::Pass(300)
    );
    // Established traffic with no state is denied by rule 200.
    assert_eq!(
        r.send(tcp("203.0.113.5", 443, "192.0.2.10", 40001, "A"), In),
        deny(200)
    );
    assert_eq!(
        r.send(tcp("203.0.113.5", 5, "192.0.2.10", 22, "S"), In),
        deny(400)
    );

    // "limit the number of connections a user can open"
    let mut r = Rig::new(
        &[],
        &["ipfw add allow tcp from 192.0.2.0/24 to any setup limit src-addr 10"],
    );
    for p in 0..10 {
        assert_eq!(
            r.send(tcp("192.0.2.1", 1000 + p, "198.51.100.1", 80, "S"), Out),
            Fate::Pass(100)
        );
    }
    assert_eq!(
        r.send(tcp("192.0.2.1", 2000, "198.51.100.1", 80, "S"), Out),
        Fate::Drop(100, DropReason::StateRefused)
    );

    // "simulate a bidirectional link with bandwidth limitations"
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add pipe 1 ip from any to any out",
            "ipfw add pipe 2 ip from any to any in",
            "ipfw pipe 1 config bw 64Kbit/s queue 10Kbytes",
            "ipfw pipe 2 config bw 64Kbit/s queue 10Kbytes",
        ],
    );
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), Out),
        Fate::Queued(100, Target::Pipe(1))
    );
    assert_eq!(
        r.send(udp("10.0.0.2", 2, "10.0.0.1", 1), In),
        Fate::Queued(200, Target::Pipe(2))
    );
}

/// rc.firewall's `client` and `workstation` types, the loopback rules they
/// share, written from the script's text with its variables set.
#[test]
fn rc_firewall_client_and_workstation() {
    let loopback = [
        "ipfw add 100 pass all from any to any via lo0",
        "ipfw add 200 deny all from any to 127.0.0.0/8",
        "ipfw add 300 deny ip from 127.0.0.0/8 to any",
    ];
    // client: net=192.0.2.0/24, ip=192.0.2.5
    let mut client: Vec<&str> = loopback.to_vec();
    client.extend([
        "ipfw add pass all from me to 192.0.2.0:255.255.255.0",
        "ipfw add pass all from 192.0.2.0:255.255.255.0 to me",
        "ipfw add pass tcp from any to any established",
        "ipfw add pass all from any to any frag",
        "ipfw add pass tcp from any to me 25 setup",
        "ipfw add pass tcp from me to any setup",
        "ipfw add deny tcp from any to any setup",
        "ipfw add pass udp from me to any 53 keep-state",
        "ipfw add pass udp from me to any 123 keep-state",
    ]);
    let mut r = Rig::new(&["192.0.2.5"], &client);
    let me = "192.0.2.5";
    let far = "203.0.113.9";
    // Rules 400.. by autonumbering: 400 me to net, 500 net to me, 600
    // established, 700 frag, 800 smtp in, 900 setup out, 1000 deny setup,
    // 1100 dns, 1200 ntp.
    assert_eq!(r.send(tcp(me, 30000, far, 80, "S"), Out), Fate::Pass(900));
    assert_eq!(r.send(tcp(far, 80, me, 30000, "SA"), In), Fate::Pass(600));
    assert_eq!(r.send(tcp(far, 999, me, 25, "S"), In), Fate::Pass(800));
    assert_eq!(
        r.send(tcp(far, 999, me, 22, "S"), In),
        Fate::Drop(1000, DropReason::RuleDeny)
    );
    assert_eq!(r.send(udp(me, 5353, far, 53), Out), Fate::Pass(1100));
    assert_eq!(r.send(udp(far, 53, me, 5353), In), Fate::Pass(1100));
    assert_eq!(
        r.send(udp(far, 53, me, 5354), In),
        Fate::Drop(65535, DropReason::RuleDeny)
    );
    assert_eq!(
        r.send_at(0, udp("127.0.0.1", 1, "127.0.0.1", 2), false, In, "lo0"),
        Fate::Pass(100)
    );
    assert_eq!(
        r.send(udp("127.0.0.1", 1, me, 2), In),
        Fate::Drop(300, DropReason::RuleDeny)
    );
    assert_eq!(r.send(udp("192.0.2.7", 1, me, 2), In), Fate::Pass(500));

    // workstation: "allow any connection out, adding state for each".
    let mut ws: Vec<&str> = loopback.to_vec();
    ws.extend([
        "ipfw add check-state",
        "ipfw add pass tcp from me to any setup keep-state",
        "ipfw add pass udp from me to any keep-state",
        "ipfw add pass icmp from me to any keep-state",
        "ipfw add pass icmp from any to any icmptypes 0,3,4,8,11",
        "ipfw add deny ip from any to any",
    ]);
    let mut r = Rig::new(&["192.0.2.5"], &ws);
    assert_eq!(r.send(udp(me, 4000, far, 443), Out), Fate::Pass(600));
    assert_eq!(r.send(udp(far, 443, me, 4000), In), Fate::Pass(600));
    assert_eq!(r.send(icmp_echo(far, me), In), Fate::Pass(800));
    assert_eq!(
        r.send(tcp(far, 1, me, 22, "S"), In),
        Fate::Drop(900, DropReason::RuleDeny)
    );
}

#[test]
fn me_follows_the_local_addresses() {
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 allow ip from any to me",
            "ipfw add 200 deny ip from any to any",
        ],
    );
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), In),
        Fate::Drop(200, DropReason::RuleDeny)
    );
    r.e.set_local_addrs(&["10.0.0.2".parse().unwrap()]);
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), In),
        Fate::Pass(100)
    );
}

#[test]
fn commands_parse_off_the_rules_apply_as_one() {
    // A command that names `table(N)` with a type that does not fit is
    // refused and changes nothing.
    let mut r = Rig::new(&[], &["ipfw table 9 create type iface"]);
    assert!(r
        .refused("ipfw add 100 deny ip from table(9) to any")
        .contains("iface"));
    assert_eq!(r.e.snapshot().rules.len(), 1);
}

#[test]
fn scheduler_options_on_a_pipe_set_its_scheduler() {
    // As OPNsense writes every pipe: the type and its parameters on
    // `pipe N config`; queues of `queue M config pipe N` feed it.
    let mut r = Rig::new(
        &[],
        &[
            "ipfw pipe 1 config bw 10Mbit/s type fq_codel target 7ms quantum 1000",
            "ipfw queue 1 config pipe 1",
        ],
    );
    let snap = r.e.snapshot();
    let shown = dummynet_lang::format_scheds(&snap, &[1]);
    assert!(shown.contains("FQ_CODEL"), "{shown}");
    assert!(shown.contains("target 7ms"), "{shown}");
    assert!(shown.contains("quantum 1000"), "{shown}");
    assert_eq!(
        snap.links.iter().find(|l| l.number == 1).unwrap().config.bw,
        10_000_000
    );
    // A value out of fq_codel's range is brought within it, with a note.
    r.run("ipfw pipe 1 config bw 10Mbit/s type fq_codel target 0ms interval 0ms");
    assert!(!r.e.take_notes().is_empty());
    r.run("ipfw pipe 1 config bw 10Mbit/s");
    // Without `type`, scheduler 1 stays what it was.
    assert!(dummynet_lang::format_scheds(&r.e.snapshot(), &[1]).contains("FQ_CODEL"));
}

#[test]
fn route_checks_follow_the_routes_given() {
    use dummynet_engine::config::{AddrMatch, Route};
    let mut r = Rig::new(
        &[],
        &[
            "ipfw add 100 count ip from any to any verrevpath",
            "ipfw add 200 count ip from any to any versrcreach",
            "ipfw add 300 count ip from any to any antispoof",
            "ipfw add 400 allow ip from any to any",
        ],
    );
    let counts = |r: &Rig| -> Vec<u64> {
        let s = r.e.snapshot();
        [100, 200, 300]
            .iter()
            .map(|n| s.rules.iter().find(|x| x.number == *n).unwrap().packets)
            .collect()
    };
    let send = |r: &mut Rig, src: &str, via: &str| {
        r.run("ipfw zero");
        r.send_at(0, udp(src, 1, "192.0.2.1", 2), false, In, via);
        counts(r)
    };
    // No routes (sim): all three hold.
    assert_eq!(send(&mut r, "198.51.100.7", "em9"), [1, 1, 1]);
    let route = |net: &str, prefix, iface: &str, gateway, reject| Route {
        net: AddrMatch {
            addr: net.parse().unwrap(),
            prefix,
        },
        iface: iface.into(),
        gateway,
        reject,
    };
    r.e.set_routes(Some(&[
        route("192.0.2.0", 24, "em0", false, false),
        route("0.0.0.0", 0, "em1", true, false),
        route("203.0.113.0", 24, "lo", false, true),
    ]));
    // A local source on its own interface: all hold.
    assert_eq!(send(&mut r, "192.0.2.5", "em0"), [1, 1, 1]);
    // The same source from the other side: spoofed.
    assert_eq!(send(&mut r, "192.0.2.5", "em1"), [0, 1, 0]);
    // A far source, reached only by the default route, from its side.
    assert_eq!(send(&mut r, "198.51.100.7", "em1"), [1, 0, 1]);
    assert_eq!(send(&mut r, "198.51.100.7", "em0"), [0, 0, 1]);
    // A source behind a reject route reaches nothing.
    assert_eq!(send(&mut r, "203.0.113.9", "lo"), [0, 0, 1]);
}

#[test]
fn show_t_prints_dates_and_show_capital_t_epoch_seconds_when_the_wall_clock_is_known() {
    let mut r = Rig::new(&[], &["ipfw add 100 allow ip from any to any"]);
    r.send_at(SEC, udp("10.0.0.1", 1, "10.0.0.2", 2), false, In, "em0");
    let wall = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    let show = |epoch| {
        format_rules_with(
            &r.e.snapshot(),
            &RuleShow {
                counters: true,
                timestamps: true,
                wall: Some((2 * SEC, wall)),
                epoch,
                ..RuleShow::default()
            },
        )
    };
    // Matched 1 s before the engine's 2 s, which is the wall's 1e9 s.
    assert!(
        show(false).contains(" 2001-09-09T01:46:39Z allow"),
        "{}",
        show(false)
    );
    assert!(show(true).contains(" 999999999 allow"), "{}", show(true));
    let p = parse_command("ipfw -T show").unwrap();
    assert!(p.flags.timestamps && p.flags.epoch);
}

/// rc.firewall's `simple` type (a gateway between an inside and an
/// outside network), with its variables set: outside tun0 192.0.2.0/24
/// (this host 192.0.2.1), inside ed0 10.0.0.0/24 (10.0.0.1). Its natd
/// lines are left out: dummynet does no NAT.
#[test]
fn rc_firewall_simple() {
    let lines = [
        "ipfw add 100 pass all from any to any via lo0",
        "ipfw add 200 deny all from any to 127.0.0.0/8",
        "ipfw add 300 deny ip from 127.0.0.0/8 to any",
        // Stop spoofing.
        "ipfw add deny all from 10.0.0.0:255.255.255.0 to any in via tun0",
        "ipfw add deny all from 192.0.2.0:255.255.255.0 to any in via ed0",
        // Stop RFC 1918 nets on the outside interface.
        "ipfw add deny all from any to 10.0.0.0/8 via tun0",
        "ipfw add deny all from any to 172.16.0.0/12 via tun0",
        "ipfw add deny all from any to 192.168.0.0/16 via tun0",
        "ipfw add deny all from any to 0.0.0.0/8 via tun0",
        "ipfw add deny all from 10.0.0.0/8 to any via tun0",
        "ipfw add deny all from 172.16.0.0/12 to any via tun0",
        "ipfw add deny all from 192.168.0.0/16 to any via tun0",
        "ipfw add pass tcp from any to any established",
        "ipfw add pass all from any to any frag",
        "ipfw add pass tcp from any to 192.0.2.1 25 setup",
        "ipfw add pass tcp from any to 192.0.2.1 53 setup",
        "ipfw add pass udp from any to 192.0.2.1 53",
        "ipfw add pass udp from 192.0.2.1 53 to any",
        "ipfw add pass tcp from any to 192.0.2.1 80 setup",
        "ipfw add deny log tcp from any to any in via tun0 setup",
        "ipfw add pass tcp from any to any setup",
        "ipfw add pass udp from 192.0.2.1 to any 53 keep-state",
        "ipfw add pass udp from 192.0.2.1 to any 123 keep-state",
    ];
    let mut r = Rig::new(&["192.0.2.1", "10.0.0.1"], &lines);
    let deny = |n| Fate::Drop(n, DropReason::RuleDeny);
    let far = "203.0.113.9";
    // An inside address arriving from outside is spoofed (rule 400).
    assert_eq!(
        r.send_at(
            0,
            tcp("10.0.0.7", 1, "192.0.2.1", 80, "S"),
            false,
            In,
            "tun0"
        ),
        deny(400)
    );
    // Private destinations never leave by the outside.
    assert_eq!(
        r.send_at(0, udp("192.0.2.1", 1, "192.168.1.1", 9), false, Out, "tun0"),
        deny(800)
    );
    // The web server takes connections from outside (rule 1900)...
    assert_eq!(
        r.send_at(0, tcp(far, 1, "192.0.2.1", 80, "S"), false, In, "tun0"),
        Fate::Pass(1900)
    );
    // ... and the rest of a connection goes by `established` (1300).
    assert_eq!(
        r.send_at(0, tcp(far, 1, "192.0.2.1", 80, "A"), false, In, "tun0"),
        Fate::Pass(1300)
    );
    // Other connections from outside are refused and logged (2000).
    assert_eq!(
        r.send_at(0, tcp(far, 1, "192.0.2.1", 22, "S"), false, In, "tun0"),
        deny(2000)
    );
    assert_eq!(r.e.take_log().0.len(), 1);
    // Inside hosts may open any connection (2100).
    assert_eq!(
        r.send_at(0, tcp("10.0.0.7", 1, far, 22, "S"), false, In, "ed0"),
        Fate::Pass(2100)
    );
    // The host's DNS queries get their answers back by state (2200).
    assert_eq!(
        r.send_at(0, udp("192.0.2.1", 5000, far, 53), false, Out, "tun0"),
        Fate::Pass(2200)
    );
    assert_eq!(
        r.send_at(0, udp(far, 53, "192.0.2.1", 5000), false, In, "tun0"),
        Fate::Pass(2200)
    );
    // Unsolicited UDP from outside falls to the default rule.
    assert_eq!(
        r.send_at(0, udp(far, 53, "192.0.2.1", 5001), false, In, "tun0"),
        deny(65535)
    );
}

#[test]
fn tags_stay_with_a_packet_through_a_pipe() {
    let mut r = Rig::new(
        &[],
        &[
            "sysctl net.inet.ip.fw.one_pass=0",
            "ipfw pipe 1 config delay 5ms",
            "ipfw add 100 pipe 1 tag 7 ip from any to any",
            "ipfw add 200 allow ip from any to any tagged 7",
            "ipfw add 300 deny ip from any to any",
        ],
    );
    assert_eq!(
        r.send(udp("10.0.0.1", 1, "10.0.0.2", 2), Out),
        Fate::Queued(100, Target::Pipe(1))
    );
    let out = r.e.poll(10 * MS).expect("the packet leaves its pipe");
    assert_eq!((out.drop, out.rule, out.at), (None, Some(200), 5 * MS));
}
