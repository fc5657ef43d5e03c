//! The rest of ipfw(8)'s rule language: header-field options, or-blocks,
//! `me`, tables and `tablearg`, dynamic state, sets, `call`/`return`,
//! modifiers and comments; each form's canonical text reads back to the
//! same rule, and what dummynet does not do is refused by name.

use dummynet_engine::config::{
    frag_bit, tcp_option, Action, ArgAction, Bits, Command, CondKind, DynSetting, LimitMask,
    RuleSpec, SetCmd, Setting, StateKind, TableCmd, TableKey, TableName, TableType, TagOp,
};
use dummynet_lang::{
    format_rule_body, parse_command, ErrorKind, ParseError, ShowRequest, Statement,
};

fn spec(line: &str) -> RuleSpec {
    match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(Command::AddRule(r))) => r,
        Ok(other) => panic!("{line}: not a rule: {other:?}"),
        Err(e) => panic!("{line}:\n{e}"),
    }
}

fn command(line: &str) -> Command {
    match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(c)) => c,
        Ok(other) => panic!("{line}: not a command: {other:?}"),
        Err(e) => panic!("{line}:\n{e}"),
    }
}

fn err(line: &str) -> ParseError {
    match parse_command(line) {
        Ok(p) => panic!("{line}: accepted as {:?}", p.statement),
        Err(e) => e,
    }
}

/// Parses, prints, parses the print: both parses agree; returns the print.
fn round_trip(line: &str) -> String {
    let first = spec(line);
    let text = format_rule_body(&first);
    let again = spec(&format!("add {text}"));
    assert_eq!(
        RuleSpec {
            number: None,
            extra: dummynet_engine::config::RuleExtra {
                set: 0,
                ..first.extra.clone()
            },
            ..first
        },
        again,
        "{line}  ->  {text}"
    );
    text
}

#[test]
fn header_options_read_back() {
    let cases = [
        (
            "add allow tcp from any to any setup",
            "allow tcp from any to any setup",
        ),
        (
            "add allow tcp from any to any established",
            "allow tcp from any to any established",
        ),
        (
            "add deny tcp from any to any tcpflags syn,!ack,fin",
            "deny tcp from any to any tcpflags fin,syn,!ack",
        ),
        (
            "add count tcp from any to any tcpoptions mss,!sack",
            "count tcp from any to any tcpoptions mss,!sack",
        ),
        (
            "add deny ip from any to any frag",
            "deny ip from any to any frag",
        ),
        (
            "add deny ip from any to any frag mf,!df",
            "deny ip from any to any frag mf,!df",
        ),
        (
            "add deny ip from any to any iplen 0-40,1500",
            "deny ip from any to any iplen 0-40,1500",
        ),
        (
            "add deny ip from any to any ipttl 1",
            "deny ip from any to any ipttl 1",
        ),
        (
            "add deny ip from any to any ipid 0",
            "deny ip from any to any ipid 0",
        ),
        (
            "add pipe 1 ip from any to any iptos lowdelay",
            "pipe 1 ip from any to any iptos lowdelay",
        ),
        (
            "add pipe 1 ip from any to any ipprecedence 5",
            "pipe 1 ip from any to any ipprecedence 5",
        ),
        (
            "add pipe 1 ip from any to any dscp ef,af11",
            "pipe 1 ip from any to any dscp 10,46",
        ),
        (
            "add allow icmp from any to any icmptypes echo,echoreply,3",
            "allow icmp from any to any icmptypes 0,3,8",
        ),
        (
            "add allow ipv6-icmp from any to any icmp6types 128,129,133-136",
            "allow ipv6-icmp from any to any icmp6types 128-129,133-136",
        ),
        (
            "add deny ip from any to any mac any 00:11:22:33:44:55",
            "deny ip from any to any mac any 00:11:22:33:44:55",
        ),
        (
            "add deny ip from any to any mac 02:00:00:00:00:00/8 any",
            "deny ip from any to any mac 02:00:00:00:00:00/8 any",
        ),
        (
            "add allow ip from any to any mac-type arp,vlan",
            "allow ip from any to any mac-type 0x0806,0x8100",
        ),
        (
            "add allow ip from any to any layer2",
            "allow ip from any to any layer2",
        ),
        (
            "add deny ip from any to any not antispoof in",
            "deny ip from any to any not antispoof in",
        ),
        (
            "add deny ip from any to any not verrevpath in",
            "deny ip from any to any not verrevpath in",
        ),
        (
            "add allow ip from any to any tagged 5,10-20",
            "allow ip from any to any tagged 5,10-20",
        ),
        (
            "add deny ip from any to any diverted",
            "deny ip from any to any diverted",
        ),
        (
            "add deny tcp from any to any tcpwin 0",
            "deny tcp from any to any tcpwin 0",
        ),
        (
            "add deny tcp from any to any tcpdatalen 0",
            "deny tcp from any to any tcpdatalen 0",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(round_trip(line), want, "{line}");
    }
    assert_eq!(
        spec("add deny ip from any to any frag").body[0].kind,
        CondKind::Frag(Bits {
            set: frag_bit::OFFSET,
            clear: 0
        })
    );
    assert_eq!(
        spec("add allow tcp from any to any tcpoptions ts").body[1].kind,
        CondKind::TcpOptions(Bits {
            set: tcp_option::TS,
            clear: 0
        })
    );
}

#[test]
fn addresses_me_sets_names_and_or_blocks() {
    let cases = [
        ("add allow ip from me to any", "allow ip from me to any"),
        ("add allow ip6 from any to me6", "allow ip6 from any to me6"),
        (
            "add allow ip from not me to any",
            "allow ip from not me to any",
        ),
        (
            "add pipe 1 ip from 10.1.2.0/24{20,35,66} to any",
            "pipe 1 ip from 10.1.2.20,10.1.2.35,10.1.2.66 to any",
        ),
        (
            "add pipe 1 ip from 10.1.2.0/24{1-3} to any",
            "pipe 1 ip from 10.1.2.1,10.1.2.2,10.1.2.3 to any",
        ),
        (
            "add allow { tcp or udp } from any to any",
            "allow { tcp or udp } from any to any",
        ),
        (
            "add allow ip from any to any { dst-ip 10.0.0.1 or dst-ip 10.0.0.2 }",
            "allow ip from any to any { dst-ip 10.0.0.1 or dst-ip 10.0.0.2 }",
        ),
        (
            "add allow ip from any to any not { in or via lo }",
            "allow ip from any to any not { in or via lo }",
        ),
        (
            "add allow ip from any to any dst-port any",
            "allow ip from any to any",
        ),
        (
            "add allow ip from any to localhost",
            "allow ip from any to 127.0.0.1",
        ),
    ];
    for (line, want) in cases {
        let got = round_trip(line);
        // `localhost` may also have ::1 where the resolver says so.
        assert!(got == want || got.starts_with(want), "{line}: {got}");
    }
    let e = err("add pipe 1 ip from 10.1.0.0/16{1,2} to any");
    assert_eq!(e.kind, ErrorKind::Range, "{e}");
    let e = err("add pipe 1 ip from 10.1.2.0/24{1,256} to any");
    assert_eq!((e.kind, e.found()), (ErrorKind::Range, Some("256")), "{e}");
    // With resolution off (as the fuzzers run), a name is no address: no
    // query leaves the machine. (`localhost` above comes from /etc/hosts.)
    dummynet_lang::resolve_host_names(false);
    let e = err("add allow ip from any to no-such-host.example");
    dummynet_lang::resolve_host_names(true);
    assert_eq!(e.kind, ErrorKind::Syntax, "{e}");
}

#[test]
fn tables_and_tablearg() {
    assert_eq!(
        command("table 1 add 10.0.0.0/8 5 192.0.2.1 7"),
        Command::Table(
            TableName::Number(1),
            TableCmd::Add(vec![
                (
                    TableKey::Addr(dummynet_engine::config::AddrMatch {
                        addr: "10.0.0.0".parse().unwrap(),
                        prefix: 8
                    }),
                    5
                ),
                (
                    TableKey::Addr(dummynet_engine::config::AddrMatch {
                        addr: "192.0.2.1".parse().unwrap(),
                        prefix: 32
                    }),
                    7
                ),
            ])
        )
    );
    assert_eq!(
        command("ipfw table clients create type iface"),
        Command::Table(
            TableName::Name("clients".into()),
            TableCmd::Create(TableType::Iface)
        )
    );
    assert_eq!(
        command("table clients add em0 3"),
        Command::Table(
            TableName::Name("clients".into()),
            TableCmd::Add(vec![(TableKey::Iface("em0".into()), 3)])
        )
    );
    assert_eq!(
        command("table 1 flush"),
        Command::Table(TableName::Number(1), TableCmd::Flush)
    );
    assert!(matches!(
        parse_command("table all list").unwrap().statement,
        Statement::Show(ShowRequest::Tables(None))
    ));
    assert_eq!(
        round_trip("add pipe tablearg ip from table(1) to any"),
        "pipe tablearg ip from table(1) to any"
    );
    assert_eq!(
        round_trip("add skipto tablearg ip from any to table(2,10) recv table(clients)"),
        "skipto tablearg ip from any to table(2,10) recv table(clients)"
    );
    assert_eq!(
        spec("add queue tablearg ip from any to any").action,
        Action::Tablearg(ArgAction::Queue)
    );
    assert_eq!(
        round_trip("add pipe tablearg ip from any to any lookup dst-port 10"),
        "pipe tablearg ip from any to any lookup dst-port table(10)"
    );
    assert_eq!(
        err("add allow ip from any to any lookup uid 3").kind,
        ErrorKind::Unavailable
    );
    let e = err("table 1 bogus");
    assert_eq!(e.found(), Some("bogus"));
}

#[test]
fn state_sets_calls_modifiers_and_comments() {
    let s = spec("add 100 set 3 allow log logamount 10 tag 7 tcp from me to any setup keep-state :web // outbound web");
    assert_eq!(s.extra.set, 3);
    assert_eq!(s.extra.log, Some(10));
    assert_eq!(
        s.extra.tag,
        Some(TagOp {
            untag: false,
            tag: 7
        })
    );
    assert_eq!(s.extra.state, Some(StateKind::Keep));
    assert_eq!(s.extra.flow.as_deref(), Some("web"));
    assert_eq!(s.extra.comment.as_deref(), Some("outbound web"));
    assert_eq!(
        round_trip("add allow log tcp from any to any setup keep-state // a, b { c }"),
        "allow log tcp from any to any setup keep-state // a, b { c }"
    );
    assert_eq!(
        spec("add allow tcp from any to me 22 limit src-addr 4")
            .extra
            .state,
        Some(StateKind::Limit {
            mask: LimitMask {
                src_addr: true,
                ..LimitMask::default()
            },
            max: 4
        })
    );
    assert_eq!(
        round_trip("add allow tcp from any to me 22 limit src-addr,dst-port 4"),
        "allow tcp from any to me dst-port 22 limit src-addr,dst-port 4"
    );
    assert_eq!(round_trip("add check-state :web"), "check-state :web");
    assert_eq!(round_trip("add check-state :any"), "check-state :any");
    // `:any` is every name, so no state can be made under it.
    for line in [
        "add allow ip from any to any keep-state :any",
        "add allow ip from any to any record-state :any",
        "add allow tcp from any to any limit src-addr 2 :any",
    ] {
        let e = err(line);
        assert!(
            e.message.contains("`:any` selects every state"),
            "{line}: {e}"
        );
        assert_eq!(&e.source[e.offset..e.offset + e.len], ":any", "{line}: {e}");
    }
    assert_eq!(spec("add check-state").action, Action::CheckState);
    assert_eq!(
        round_trip("add call 1000 ip from any to any"),
        "call 1000 ip from any to any"
    );
    assert_eq!(
        round_trip("add return ip from any to any"),
        "return ip from any to any"
    );
    assert_eq!(
        round_trip("add count untag 7 ip from any to any"),
        "count untag 7 ip from any to any"
    );
    let e = err("add allow ip from any to any keep-state limit src-addr 2");
    assert_eq!(e.found(), Some("limit"), "{e}");
}

#[test]
fn commands_around_rules() {
    assert_eq!(
        command("ipfw del 100 200"),
        Command::DeleteRules(vec![100, 200])
    );
    assert_eq!(command("ipfw delete set 5"), Command::DeleteSet(5));
    assert_eq!(
        command("ipfw set disable 1 2 enable 3"),
        Command::RuleSets(SetCmd::Toggle {
            enable: 1 << 3,
            disable: (1 << 1) | (1 << 2)
        })
    );
    assert_eq!(
        command("ipfw set move 1 to 2"),
        Command::RuleSets(SetCmd::Move { from: 1, to: 2 })
    );
    assert_eq!(
        command("ipfw set move rule 100 to 4"),
        Command::RuleSets(SetCmd::MoveRule { number: 100, to: 4 })
    );
    assert_eq!(
        command("ipfw set swap 1 2"),
        Command::RuleSets(SetCmd::Swap(1, 2))
    );
    assert!(matches!(
        parse_command("ipfw set show").unwrap().statement,
        Statement::Show(ShowRequest::Sets)
    ));
    assert_eq!(
        command("ipfw disable firewall"),
        Command::Set(Setting::Firewall(false))
    );
    assert_eq!(
        command("ipfw enable one_pass"),
        Command::Set(Setting::OnePass(true))
    );
    assert_eq!(
        command("sysctl -w net.inet.ip.fw.dyn_udp_lifetime=30"),
        Command::Set(Setting::Dyn(DynSetting::UdpLifetime, 30))
    );
    assert_eq!(
        command("sysctl net.inet.ip.fw.dyn_max=1000"),
        Command::Set(Setting::Dyn(DynSetting::Max, 1000))
    );
    assert!(matches!(
        parse_command("sysctl net.inet.ip.fw.verbose=1")
            .unwrap()
            .statement,
        Statement::Nop(_)
    ));
    assert_eq!(command("ipfw resetlog 100"), Command::ResetLog(vec![100]));
    let p = parse_command("ipfw -d -S show").unwrap();
    assert!(p.flags.dynamic && p.flags.sets);
    assert!(parse_command("ipfw -T show").unwrap().flags.timestamps);
    let Command::ConfigPipe(1, cfg) = command("ipfw pipe 1 config mask dst-ip 0xff hash_size 64")
    else {
        panic!("not a pipe config")
    };
    assert_eq!(cfg.flowset.buckets, 64);
}

/// Found by the `command_line` fuzzer in CI: a word with a multi-byte
/// character where `table(` could begin was sliced mid-character.
#[test]
fn a_multibyte_word_where_an_address_goes_is_an_error_not_a_panic() {
    for line in [
        "add allow ip from any to anat`\u{2cf}y dst-ip6 2001:loss:1 dst-ip6 ::1",
        "add allow ip from any to tabl\u{e9}(1)",
        "add allow ip from \u{1f600}\u{1f600} to any",
    ] {
        let e = err(line);
        assert!(!e.to_string().is_empty(), "{line}");
    }
}

#[test]
fn what_dummynet_does_not_do_is_refused_by_name() {
    for (line, word) in [
        ("add divert 8668 ip from any to any", "divert"),
        ("add nat 1 ip from any to any", "nat"),
        ("add fwd 10.0.0.1 ip from any to any", "fwd"),
        ("add netgraph 1 ip from any to any", "netgraph"),
        ("add reass ip from any to any", "reass"),
        ("add allow ip from any to any uid 0", "uid"),
        ("nat 1 config if em0", "nat"),
    ] {
        let e = err(line);
        assert_eq!(
            (e.kind, e.found()),
            (ErrorKind::Unavailable, Some(word)),
            "{e}"
        );
        assert!(e.message.contains("dummynet does not do"), "{e}");
    }
}

/// Lines of real scripts that FreeBSD's ipfw takes (issue 25): each is
/// taken here too, as ipfw reads it.
#[test]
fn lines_of_real_scripts_freebsd_takes() {
    // OPNsense's template: `me` inside an address or-block.
    let r = spec("ipfw add 60000 allow ip from any to { 255.255.255.255 or me } in");
    let or = r
        .body
        .iter()
        .find_map(|c| match &c.kind {
            CondKind::Or(alts) => Some(alts.clone()),
            _ => None,
        })
        .expect("an or-block");
    assert!(matches!(&or[0].kind, CondKind::DstAddr(a) if a.len() == 1));
    assert_eq!(or[1].kind, CondKind::DstMe { v6: false });
    round_trip("add allow ip from any to { 255.255.255.255 or me } in");
    round_trip("add allow ip from { me or not 10.0.0.0/8 or table(3) } to any");
    // Plain addresses only stay one list.
    assert!(matches!(
        &spec("add allow ip from { 10.0.0.1 or 10.0.0.2, 10.0.0.3 } to any").body[0].kind,
        CondKind::SrcAddr(a) if a.len() == 3
    ));
    // A blog's SSH-shaping script: `any` as the port after an address.
    let r = spec("/sbin/ipfw add 00010 pipe 2 ip from 10.2.2.20 any to 10.2.2.30/32 22 keep-state");
    assert_eq!(
        format_rule_body(&r),
        "pipe 2 ip from 10.2.2.20 to 10.2.2.30 dst-port 22 keep-state"
    );
    assert_eq!(
        round_trip("add allow tcp from any any to 10.0.0.1 any"),
        "allow tcp from any to 10.0.0.1"
    );
}

/// A word that reads as a host name and does not resolve says so, rather
/// than "expected an address". No DNS query: the names are looked up in a
/// table of the test's.
#[test]
fn a_host_name_that_does_not_resolve_says_so() {
    fn table(name: &str) -> Vec<std::net::IpAddr> {
        match name {
            "gateway.test" => vec![std::net::IpAddr::from([192, 0, 2, 1])],
            _ => Vec::new(),
        }
    }
    dummynet_lang::resolve_host_names_with(table);
    let found = spec("add allow ip from gateway.test to any");
    let e = err("add allow ip from any to no-such-host.test");
    // Misplaced keywords and typos in addresses are not looked up.
    let keyword = err("add allow ip from to any");
    let typo = err("add allow ip from 10.0.0.256 to any");
    dummynet_lang::resolve_host_names(true);
    assert_eq!(format_rule_body(&found), "allow ip from 192.0.2.1 to any");
    assert_eq!(e.found(), Some("no-such-host.test"), "{e}");
    assert!(
        e.message
            .starts_with("cannot resolve host name `no-such-host.test`"),
        "{e}"
    );
    assert!(
        keyword.message.starts_with("expected an address"),
        "{keyword}"
    );
    assert!(typo.message.starts_with("expected an address"), "{typo}");
}

/// `ipfw del pipe 1`: FreeBSD's `delete` reads rule numbers while they
/// come, so it deletes nothing and succeeds; so does this, and says so.
#[test]
fn delete_pipe_n_deletes_nothing_as_in_freebsd_and_says_so() {
    let p = parse_command("ipfw del pipe 1").unwrap();
    assert!(
        matches!(p.statement, Statement::Nop(_)),
        "{:?}",
        p.statement
    );
    assert_eq!(p.notes.len(), 1);
    assert!(
        p.notes[0].contains("`delete pipe 1` deletes nothing")
            && p.notes[0].contains("`pipe 1 delete` deletes pipe 1"),
        "{}",
        p.notes[0]
    );
    // Rule numbers still delete rules; other words are still errors.
    assert_eq!(command("ipfw delete 100"), Command::DeleteRules(vec![100]));
    assert!(parse_command("ipfw delete foo").is_err());
}

/// `sysctl -w net.inet.ip.dummynet.hash_size=256` is FreeBSD's default
/// `buckets`: pipes and queues configured after it without one get it;
/// those before, and those that give one, keep theirs.
#[test]
fn hash_size_sets_the_default_buckets() {
    assert_eq!(
        command("sysctl -w net.inet.ip.dummynet.hash_size=256"),
        Command::Set(Setting::HashSize(256))
    );
    assert!(parse_command("sysctl net.inet.ip.dummynet.hash_size=0").is_err());
    assert!(parse_command("sysctl net.inet.ip.dummynet.hash_size=65537").is_err());
    let mut e: dummynet_engine::Engine<()> = dummynet_engine::Engine::new(1);
    for line in [
        "pipe 1 config mask all",
        "sysctl -w net.inet.ip.dummynet.hash_size=256",
        "pipe 2 config mask all",
        "queue 3 config pipe 2 mask dst-ip 0xff",
        "queue 4 config pipe 2 mask dst-ip 0xff buckets 16",
    ] {
        e.apply(0, command(line))
            .unwrap_or_else(|x| panic!("{line}: {x}"));
    }
    let buckets = |n: u32| {
        e.snapshot()
            .flowsets
            .iter()
            .find(|f| f.number == n)
            .map(|f| f.buckets)
    };
    assert_eq!(buckets(131073), Some(64), "configured before the sysctl");
    assert_eq!(buckets(131074), Some(256));
    assert_eq!(buckets(3), Some(256));
    assert_eq!(buckets(4), Some(16));
}
