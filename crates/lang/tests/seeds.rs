//! Every ipfw command example of the five seed documents (shared/seeds/),
//! as written there, with the addresses the articles lost filled in and the
//! `router # ` prompts of seed 004 taken off.

use dummynet_engine::config::{
    Action, AddrMatch, AqmConfig, Command, Cond, CondKind, FlowsetConfig, LinkConfig, PipeConfig,
    QueueConfig, QueueLimit, RuleSpec, Setting,
};
use dummynet_engine::flow::{proto, FlowMask};
use dummynet_engine::time::NS_PER_MS;
use dummynet_engine::Direction;
use dummynet_lang::{parse_command, ErrorKind, ShowRequest, Statement};

fn apply(line: &str) -> Command {
    match parse_command(line) {
        Ok(p) => match p.statement {
            Statement::Apply(c) => c,
            other => panic!("{line}: expected a command, got {other:?}"),
        },
        Err(e) => panic!("{line}:\n{e}"),
    }
}

fn net(s: &str, prefix: u8) -> AddrMatch {
    AddrMatch {
        addr: s.parse().unwrap(),
        prefix,
    }
}

fn pipe(bw: u64, delay_ms: u64, limit: Option<QueueLimit>) -> PipeConfig {
    PipeConfig {
        link: LinkConfig {
            bw,
            delay: delay_ms * NS_PER_MS,
            ..LinkConfig::default()
        },
        flowset: FlowsetConfig {
            limit: limit.unwrap_or_default(),
            ..FlowsetConfig::default()
        },
        sched: None,
    }
}

fn rule(number: Option<u16>, action: Action, body: Vec<Cond>) -> Command {
    Command::AddRule(RuleSpec {
        number,
        action,
        prob: None,
        extra: Default::default(),
        body,
    })
}

#[test]
fn seed_000_network_emulation_article() {
    assert_eq!(
        apply("# kenv net.inet.ip.fw.default_to_accept=1"),
        Command::Set(Setting::DefaultToAccept(true))
    );
    assert_eq!(
        parse_command(" # kldload ipfw dummynet").unwrap().statement,
        Statement::Nop("kldload: ipfw and dummynet are built in")
    );
    assert_eq!(
        apply("# ipfw add 65534 allow any from any to any"),
        rule(Some(65534), Action::Allow, vec![])
    );
    assert_eq!(
        apply("        # ipfw add 00097 pipe 1 ip from 192.168.100.2 to 192.168.100.1"),
        rule(
            Some(97),
            Action::Pipe(1),
            vec![
                Cond::new(CondKind::SrcAddr(vec![net("192.168.100.2", 32)])),
                Cond::new(CondKind::DstAddr(vec![net("192.168.100.1", 32)])),
            ]
        )
    );
    assert!(matches!(
        apply("# ipfw add 00099 pipe 2 ip from 192.168.100.1 to 192.168.100.2"),
        Command::AddRule(RuleSpec {
            number: Some(99),
            action: Action::Pipe(2),
            ..
        })
    ));
    assert_eq!(
        apply("# ipfw pipe 1 config delay 10ms"),
        Command::ConfigPipe(1, pipe(0, 10, None))
    );
    assert_eq!(
        apply("# ipfw pipe 2 config delay 10ms"),
        Command::ConfigPipe(2, pipe(0, 10, None))
    );
    assert_eq!(
        apply("# ipfw pipe 1 config delay 10ms bw 50Mbit/s"),
        Command::ConfigPipe(1, pipe(50_000_000, 10, None))
    );
    assert_eq!(
        apply("# ipfw pipe 2 config delay 10ms bw 10Mbit/s"),
        Command::ConfigPipe(2, pipe(10_000_000, 10, None))
    );
    assert_eq!(
        apply("\t# ipfw pipe 2 config delay 10ms bw 10Mbit/s queue 200kb"),
        Command::ConfigPipe(2, pipe(10_000_000, 10, Some(QueueLimit::Bytes(204_800))))
    );
    assert_eq!(
        apply("\t# ipfw pipe 1 config delay 10ms bw 50Mbit/s queue 1000kb"),
        Command::ConfigPipe(1, pipe(50_000_000, 10, Some(QueueLimit::Bytes(1_024_000))))
    );
    // The prompt line of the article carries trailing blanks.
    assert_eq!(
        parse_command("\t# ipfw pipe 1 show                                      ")
            .unwrap()
            .statement,
        Statement::Show(ShowRequest::Pipes(vec![1]))
    );
}

#[test]
fn seed_001_dummynet_project_page() {
    let in_proto = |p| {
        vec![
            Cond::new(CondKind::Proto(p)),
            Cond::new(CondKind::Dir(Direction::In)),
        ]
    };
    assert_eq!(
        apply("ipfw add pipe 2 in proto tcp"),
        rule(None, Action::Pipe(2), in_proto(proto::TCP))
    );
    assert_eq!(
        apply("ipfw add pipe 3 in proto udp"),
        rule(None, Action::Pipe(3), in_proto(proto::UDP))
    );
    assert_eq!(
        apply("ipfw pipe 2 config bw 2Mbit/s"),
        Command::ConfigPipe(2, pipe(2_000_000, 0, None))
    );
    assert_eq!(
        apply("ipfw pipe 3 config bw 300Kbit/s "),
        Command::ConfigPipe(3, pipe(300_000, 0, None))
    );
    assert_eq!(
        apply("ipfw add pipe 4 src-ip 10.1.2.0/24 in"),
        rule(
            None,
            Action::Pipe(4),
            vec![
                Cond::new(CondKind::SrcAddr(vec![net("10.1.2.0", 24)])),
                Cond::new(CondKind::Dir(Direction::In))
            ]
        )
    );
    let mut masked = pipe(300_000, 0, Some(QueueLimit::Slots(20)));
    masked.flowset.mask = FlowMask {
        dst_ip: 0xff,
        ..FlowMask::default()
    };
    assert_eq!(
        apply("ipfw pipe 4 config bw 300Kbit/s queue 20 mask dst-ip 0x000000ff "),
        Command::ConfigPipe(4, masked)
    );
    assert_eq!(
        apply("ipfw add pipe 3 out"),
        rule(
            None,
            Action::Pipe(3),
            vec![Cond::new(CondKind::Dir(Direction::Out))]
        )
    );
    assert_eq!(
        apply("ipfw add pipe 4 in"),
        rule(
            None,
            Action::Pipe(4),
            vec![Cond::new(CondKind::Dir(Direction::In))]
        )
    );
    assert_eq!(
        apply("ipfw pipe 3 config bw 128Kbit/s queue 10 delay 1000ms"),
        Command::ConfigPipe(3, pipe(128_000, 1000, Some(QueueLimit::Slots(10))))
    );
    assert_eq!(
        apply("ipfw pipe 4 config bw 640Kbit/s queue 30 delay 1000ms "),
        Command::ConfigPipe(4, pipe(640_000, 1000, Some(QueueLimit::Slots(30))))
    );
    assert!(matches!(
        parse_command("sudo kldload netmap.ko").unwrap().statement,
        Statement::Nop(_)
    ));
    assert_eq!(
        parse_command("ipfw/ipfw show  # or other")
            .unwrap()
            .statement,
        Statement::Show(ShowRequest::Rules {
            numbers: vec![],
            counters: true
        })
    );
}

/// `codel` with the parameters as written; the engine fills the rest.
fn codel(params: &[(&str, u64)]) -> AqmConfig {
    AqmConfig::new(
        &dummynet_engine::aqm::codel::TYPE,
        params.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
    )
}

#[test]
fn seed_002_codel_report() {
    // Section III-C, example 1: the CoDel defaults of Table I (5 ms, 100 ms, no ECN).
    let mut one = pipe(1_000_000, 0, None);
    one.flowset.aqm = codel(&[]);
    assert_eq!(
        apply("ipfw pipe 1 config bw 1mbits/s codel"),
        Command::ConfigPipe(1, one)
    );
    // Example 2: two queues on pipe 1, each with its own CoDel; a bare time is ms.
    let q = |aqm| QueueConfig {
        sched: Some(1),
        flowset: FlowsetConfig {
            aqm,
            ..FlowsetConfig::default()
        },
    };
    assert_eq!(
        apply("ipfw queue 1 config pipe 1 codel target 7 ecn"),
        Command::ConfigQueue(1, q(codel(&[("target", 7 * NS_PER_MS), ("ecn", 1)])))
    );
    assert_eq!(
        apply("ipfw queue 2 config pipe 1 codel target 8 interval 160 ecn"),
        Command::ConfigQueue(
            2,
            q(codel(&[
                ("target", 8 * NS_PER_MS),
                ("interval", 160 * NS_PER_MS),
                ("ecn", 1)
            ]))
        )
    );
    // Section V-B: `pipe 1 config codel` through the full path of the patched ipfw.
    let mut plain = pipe(0, 0, None);
    plain.flowset.aqm = codel(&[]);
    assert_eq!(
        apply("/usr/src/sbin/ipfw/ipfw pipe 1 config codel"),
        Command::ConfigPipe(1, plain)
    );
    // Table I's sysctls change what a later `codel` without values gets,
    // when the engine applies it; a pipe configured before keeps its values.
    let mut e: dummynet_engine::Engine<u64> = dummynet_engine::Engine::new(1);
    for line in [
        "ipfw pipe 1 config codel",
        "sysctl net.inet.ip.dummynet.codel.target=7000",
        "sysctl net.inet.ip.dummynet.codel.interval=150000",
        "ipfw pipe 2 config codel",
        "ipfw pipe 3 config codel target 9",
    ] {
        e.apply(0, apply(line))
            .unwrap_or_else(|err| panic!("{line}: {err:?}"));
    }
    let shown = dummynet_lang::format_pipes(&e.snapshot(), &[]);
    for want in [
        "AQM CoDel target 5ms interval 100ms NoECN",
        "AQM CoDel target 7ms interval 150ms NoECN",
        "AQM CoDel target 9ms interval 150ms NoECN",
    ] {
        assert_eq!(shown.matches(want).count(), 1, "{want} in\n{shown}");
    }
    // Section IV-C: fq_codel lines. The scheduler type parses once registered,
    // with the report's parameters; until then it is refused as unavailable.
    for (line, params) in [
        (
            "ipfw sched 1 config pipe 1 type fq_codel target 7 quantum 2000 flows 2048",
            vec![
                ("target", 7 * NS_PER_MS),
                ("quantum", 2000),
                ("flows", 2048),
            ],
        ),
        (
            "ipfw sched 1 config pipe 1 type fq_codel interval 150 ecn",
            vec![("interval", 150 * NS_PER_MS), ("ecn", 1)],
        ),
    ] {
        match parse_command(line) {
            Ok(p) => {
                let Statement::Apply(Command::ConfigSched(1, cfg)) = p.statement else {
                    panic!("{line}: {p:?}")
                };
                assert_eq!(cfg.kind.as_deref(), Some("fq_codel"), "{line}");
                for (k, v) in params {
                    assert!(
                        cfg.params.contains(&(k.to_string(), v)),
                        "{line}: {k} {v} not in {:?}",
                        cfg.params
                    );
                }
            }
            Err(e) => {
                assert!(dummynet_engine::sched::lookup("fq_codel").is_none(), "{e}");
                assert_eq!(
                    (e.kind, e.found()),
                    (ErrorKind::Unavailable, Some("fq_codel")),
                    "{line}"
                );
            }
        }
    }
    // The report's example 1 runs two commands together on one line.
    assert_eq!(
        apply("ipfw add 100 pipe 1 from any to any"),
        rule(Some(100), Action::Pipe(1), vec![])
    );
    assert_eq!(
        apply("ipfw pipe 1 config bw 10mbits/s delay 20ms"),
        Command::ConfigPipe(1, pipe(10_000_000, 20, None))
    );
    let lan = |a: &str| {
        vec![
            Cond::new(CondKind::SrcAddr(vec![net(a, 16)])),
            Cond::new(CondKind::DstAddr(vec![net(a, 16)])),
        ]
    };
    assert_eq!(
        apply("ipfw add 100 queue 1 from 192.168.0.0/16 to 192.168.0.0/16"),
        rule(Some(100), Action::Queue(1), lan("192.168.0.0"))
    );
    assert_eq!(
        apply("ipfw add 200 queue 2 from 172.16.0.0/16 to 172.16.0.0/16"),
        rule(Some(200), Action::Queue(2), lan("172.16.0.0"))
    );
    assert_eq!(
        apply("ipfw pipe 1 config bw 10mbits/s"),
        Command::ConfigPipe(1, pipe(10_000_000, 0, None))
    );
    assert_eq!(
        apply("ipfw queue 1 config sched 1"),
        Command::ConfigQueue(
            1,
            QueueConfig {
                sched: Some(1),
                ..QueueConfig::default()
            }
        )
    );
    assert_eq!(
        apply("ipfw queue 2 config sched 1"),
        Command::ConfigQueue(
            2,
            QueueConfig {
                sched: Some(1),
                ..QueueConfig::default()
            }
        )
    );
    assert_eq!(
        apply("ipfw pipe 1 config delay 10ms"),
        Command::ConfigPipe(1, pipe(0, 10, None))
    );
    assert_eq!(
        parse_command("/usr/src/sbin/ipfw/ipfw pipe 1 show")
            .unwrap()
            .statement,
        Statement::Show(ShowRequest::Pipes(vec![1]))
    );
    assert!(matches!(
        parse_command("kldload /usr/src/sys/modules/dummynet/dummynet.ko")
            .unwrap()
            .statement,
        Statement::Nop(_)
    ));
}

/// The report writes `form` for `from` three times; each error points at it
/// and suggests `from`.
#[test]
fn seed_002_form_typos() {
    for (line, column) in [
        ("ipfw add 100 pipe 1 form any to any", 21),
        (
            "ipfw add 100 queue 1 form 192.168.0.0/16 to 192.168.0.0/16",
            22,
        ),
    ] {
        let e = parse_command(line).expect_err(line);
        assert_eq!(e.kind, ErrorKind::Syntax);
        assert_eq!(e.found(), Some("form"));
        assert_eq!(e.column, column, "{e}");
        assert_eq!(e.suggestion, Some("from"));
        assert!(e.to_string().contains("did you mean `from`?"), "{e}");
        parse_command(&line.replace("form", "from")).unwrap();
    }
}

#[test]
fn seed_003_userspace_readme() {
    for line in [
        "ipfw/ipfw show  # or other",
        "ipfw/ipfw show",
        "ipfw/ipfw zero",
        "sudo kldload netmap.ko",
    ] {
        parse_command(line).unwrap();
    }
    assert_eq!(apply("ipfw/ipfw zero"), Command::ZeroRules(vec![]));
}

#[test]
fn seed_004_packet_scheduling_article() {
    assert_eq!(
        apply("ipfw pipe 1 config bw 10MBit/s delay 10ms"),
        Command::ConfigPipe(1, pipe(10_000_000, 10, None))
    );
    assert_eq!(
        apply("ipfw add 1000 pipe 1 all from 10.0.1.0/24 to any out"),
        rule(
            Some(1000),
            Action::Pipe(1),
            vec![
                Cond::new(CondKind::SrcAddr(vec![net("10.0.1.0", 24)])),
                Cond::new(CondKind::Dir(Direction::Out))
            ]
        )
    );
    // WF2Q+ is FreeBSD's default scheduler; until the engine registers it,
    // asking for it by name is refused as "not available", never as a typo.
    match parse_command("ipfw sched 1 config pipe 1 type wf2q+") {
        Ok(p) => {
            assert!(dummynet_engine::sched::lookup("wf2q+").is_some());
            let Statement::Apply(Command::ConfigSched(1, cfg)) = p.statement else {
                panic!("{p:?}")
            };
            assert_eq!(cfg.kind.as_deref(), Some("wf2q+"));
            assert_eq!(cfg.link, None);
        }
        Err(e) => {
            assert!(dummynet_engine::sched::lookup("wf2q+").is_none());
            assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        }
    }
    for (n, w) in [(100, 69), (200, 30), (300, 1)] {
        let expected = QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                weight: w,
                mask: FlowMask::ALL,
                ..FlowsetConfig::default()
            },
        };
        assert_eq!(
            apply(&format!(
                "ipfw queue {n} config sched 1 weight {w} mask all"
            )),
            Command::ConfigQueue(n, expected)
        );
    }
    for (n, q, p, name) in [
        (1000, 100, proto::TCP, "tcp"),
        (1001, 200, proto::UDP, "udp"),
        (1002, 300, proto::ICMP, "icmp"),
    ] {
        assert_eq!(
            apply(&format!(
                "ipfw add {n} queue {q} {name} from 10.0.1.0/24 to any out"
            )),
            rule(
                Some(n),
                Action::Queue(q),
                vec![
                    Cond::new(CondKind::Proto(p)),
                    Cond::new(CondKind::SrcAddr(vec![net("10.0.1.0", 24)])),
                    Cond::new(CondKind::Dir(Direction::Out)),
                ]
            )
        );
    }
}

/// Seed 002's example 2, applied: pipe 1 at 10 Mbit/s and 20 ms, and two
/// queues on it with their own CoDel, as the report describes.
#[test]
fn seed_002_example_2_configures_the_engine() {
    let mut e: dummynet_engine::Engine<u64> = dummynet_engine::Engine::new(1);
    for line in [
        "ipfw pipe 1 config bw 10mbits/s delay 20ms",
        "ipfw queue 1 config pipe 1 codel target 7 ecn",
        "ipfw queue 2 config pipe 1 codel target 8 interval 160 ecn",
        "ipfw add 100 queue 1 from 192.168.0.0/16 to 192.168.0.0/16",
        "ipfw add 200 queue 2 from 172.16.0.0/16 to 172.16.0.0/16",
    ] {
        e.apply(0, apply(line))
            .unwrap_or_else(|err| panic!("{line}: {err:?}"));
    }
    let shown = dummynet_lang::format_queues(&e.snapshot(), &[]);
    assert_eq!(
        shown,
        "\
q00001  50 sl. 0 flows (1 buckets) sched 1 weight 1 lmax 0 pri 0 AQM CoDel target 7ms interval 100ms ECN
q00002  50 sl. 0 flows (1 buckets) sched 1 weight 1 lmax 0 pri 0 AQM CoDel target 8ms interval 160ms ECN
"
    );
}
