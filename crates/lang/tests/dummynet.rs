//! `pipe`, `queue`, `sched`, settings and the command-line frame around them.

mod common;

use common::{apply, link, pipe};

use dummynet_engine::aqm;
use dummynet_engine::config::{
    AqmConfig, Command, FlowsetConfig, LinkConfig, PipeConfig, QueueConfig, QueueLimit,
    SchedConfig, Setting,
};
use dummynet_engine::flow::FlowMask;
use dummynet_engine::params::{to_ppb, ParamKind, ParamSpec};
use dummynet_engine::rng::Probability;
use dummynet_engine::sched;
use dummynet_engine::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};
use dummynet_lang::{parse_args, parse_command, ErrorKind, Flags, ShowRequest, Statement};

fn queue(line: &str) -> QueueConfig {
    match apply(line) {
        Command::ConfigQueue(_, cfg) => cfg,
        other => panic!("{line}: {other:?}"),
    }
}

fn sched_cfg(line: &str) -> SchedConfig {
    match apply(line) {
        Command::ConfigSched(_, cfg) => cfg,
        other => panic!("{line}: {other:?}"),
    }
}

/// Ways to write parameter `p` (its name, or a flag's off word, and a
/// value), with the value each one gives.
fn written(p: &ParamSpec) -> Vec<(String, u64)> {
    let name = p.name;
    let values: Vec<(String, u64)> = match p.kind {
        ParamKind::Flag { off } => return vec![(name.to_string(), 1), (off.to_string(), 0)],
        ParamKind::Count => vec![("42".into(), 42)],
        ParamKind::Size => vec![("42".into(), 42), ("2K".into(), 2048)],
        ParamKind::Time => vec![("5ms".into(), 5_000_000), ("250us".into(), 250_000)],
        ParamKind::Fraction { min, max, .. } => {
            let mid = (min + max) / 2.0;
            vec![
                (format!("{mid}"), to_ppb(mid)),
                (format!("{max}"), to_ppb(max)),
            ]
        }
    };
    values
        .into_iter()
        .map(|(v, want)| (format!("{name} {v}"), want))
        .collect()
}

/// Every registered AQM parses from its table alone: its positional values,
/// then each keyword parameter in its kind's form, on a pipe and a queue.
#[test]
fn every_aqm_parameter_parses_in_its_kind_form() {
    for ty in aqm::REGISTRY {
        // The positional values, each written in its first form.
        let mut given: Vec<(String, u64)> = Vec::new();
        let mut words = Vec::new();
        for p in ty.positional {
            let (text, want) = written(p).remove(0);
            let (_, value) = text.split_once(' ').unwrap();
            words.push(value.to_string());
            given.push((p.name.to_string(), want));
        }
        let head = format!("{} {}", ty.name, words.join("/"));
        let aqm_of = |line: &str| pipe(line).flowset.aqm;
        let bare = aqm_of(&format!("pipe 1 config {head}"));
        assert_eq!((bare.kind.name, &bare.params), (ty.name, &given), "{head}");
        for p in ty.params {
            for (text, want) in written(p) {
                let line = format!("pipe 1 config {head} {text} queue 10");
                let fs = pipe(&line).flowset;
                let mut expect = given.clone();
                expect.push((p.name.to_string(), want));
                assert_eq!(fs.aqm.params, expect, "{line}");
                assert_eq!(fs.limit, QueueLimit::Slots(10), "{line}");
                let q = queue(&format!("queue 2 config pipe 1 {head} {text}"));
                assert_eq!(q.flowset.aqm, fs.aqm, "{line}");
            }
        }
    }
}

fn err(line: &str) -> dummynet_lang::ParseError {
    parse_command(line).expect_err(line)
}

#[test]
fn bandwidth_units() {
    let cases = [
        ("10MBit/s", 10_000_000),
        ("1mbits/s", 1_000_000),
        ("300Kbit/s", 300_000),
        ("100Gbit/s", 100_000_000_000),
        ("10Tbit/s", 10_000_000_000_000),
        ("2KByte/s", 16_000),
        ("1.5Mbit/s", 1_500_000),
        ("0", 0),
        ("64000", 64_000),
    ];
    for (bw, bits) in cases {
        assert_eq!(link(&format!("pipe 1 config bw {bw}")).bw, bits, "{bw}");
        assert_eq!(
            link(&format!("pipe 1 config bandwidth {bw}")).bw,
            bits,
            "{bw}"
        );
    }
    let e = err("pipe 1 config bw 10Mbitz/s");
    assert_eq!((e.found(), e.column), (Some("10Mbitz/s"), 18));
}

#[test]
fn delays() {
    for (d, ns) in [
        ("10ms", 10 * NS_PER_MS),
        ("250us", 250 * NS_PER_US),
        ("1.5s", 3 * NS_PER_SEC / 2),
        ("10", 10 * NS_PER_MS),
    ] {
        assert_eq!(link(&format!("pipe 1 config delay {d}")).delay, ns, "{d}");
    }
    assert_eq!(err("pipe 1 config delay 10h").found(), Some("10h"));
}

#[test]
fn queue_and_burst_sizes() {
    assert_eq!(
        pipe("pipe 1 config queue 200kb").flowset.limit,
        QueueLimit::Bytes(204_800)
    );
    assert_eq!(
        pipe("pipe 1 config queue 1000kb").flowset.limit,
        QueueLimit::Bytes(1_024_000)
    );
    assert_eq!(
        pipe("pipe 1 config queue 1000KBytes").flowset.limit,
        QueueLimit::Bytes(1_024_000)
    );
    assert_eq!(
        pipe("pipe 1 config queue 1500B").flowset.limit,
        QueueLimit::Bytes(1500)
    );
    assert_eq!(
        pipe("pipe 1 config queue 20").flowset.limit,
        QueueLimit::Slots(20)
    );
    assert_eq!(link("pipe 1 config burst 64KBytes").burst, 65_536);
    assert_eq!(link("pipe 1 config burst 1500").burst, 1500);
    assert_eq!(link("pipe 1 config burst 2M").burst, 2 << 20);
    // Limits that depend on settings are the engine's to check, not ours.
    assert_eq!(
        pipe("pipe 1 config queue 5000").flowset.limit,
        QueueLimit::Slots(5000)
    );
}

#[test]
fn flowset_options() {
    let fs = pipe("pipe 1 config plr 0.01 buckets 256 weight 10 noerror droptail").flowset;
    assert_eq!(
        fs,
        FlowsetConfig {
            plr: Probability::new(0.01).unwrap(),
            buckets: 256,
            weight: 10,
            noerror: true,
            aqm: AqmConfig::droptail(),
            ..FlowsetConfig::default()
        }
    );
    assert_eq!(err("pipe 1 config plr 1.1").kind, ErrorKind::Range);
    assert_eq!(err("pipe 1 config buckets 0").kind, ErrorKind::Range);
    assert_eq!(err("pipe 1 config buckets 65537").kind, ErrorKind::Range);
    // 0 is a priority (FreeBSD's prio): the language takes it, the engine
    // refuses it where the scheduler is not prio.
    assert_eq!(pipe("pipe 1 config weight 0").flowset.weight, 0);
    assert_eq!(err("pipe 1 config weight 101").kind, ErrorKind::Range);
    // The range says 1..100 and names 0 as prio's alone, so `weight 0` is
    // not taken for the floor of every type.
    let e = err("pipe 1 config weight 101");
    assert!(e.message.contains("1..100"), "{}", e.message);
    assert!(e.message.contains("0 only for a prio"), "{}", e.message);
    assert_eq!(
        err("pipe 1 config weight 99999999999").kind,
        ErrorKind::Range
    );
    assert_eq!(err("pipe 1 config weight +5").kind, ErrorKind::Syntax);
    assert_eq!(err("pipe 1 config weight -1").kind, ErrorKind::Syntax);
    // lmax and pri are flowset parameters (FreeBSD's fs.par[1] and par[2]),
    // for pipes and queues alike; the scheduler's type narrows lmax later.
    let q = queue("queue 3 config sched 1 weight 2 lmax 1000 pri 7").flowset;
    assert_eq!((q.weight, q.lmax, q.pri), (2, 1000, 7));
    assert_eq!(queue("queue 3 config priority 4").flowset.pri, 4);
    assert_eq!(pipe("pipe 1 config lmax 64").flowset.lmax, 64);
    assert_eq!(FlowsetConfig::default().lmax, 0, "not set");
    let e = err("queue 3 config lmax 2049");
    assert_eq!(e.kind, ErrorKind::Range);
    assert!(e.message.contains("0..2048"), "{e}");
    assert_eq!(err("queue 3 config pri -1").found(), Some("-1"));
}

#[test]
fn masks() {
    let mask = |spec: &str| pipe(&format!("pipe 1 config mask {spec}")).flowset.mask;
    assert_eq!(
        mask("dst-ip 0x000000ff"),
        FlowMask {
            dst_ip: 0xff,
            ..FlowMask::default()
        }
    );
    assert_eq!(
        mask("src-ip 255.255.255.0"),
        FlowMask {
            src_ip: 0xffff_ff00,
            ..FlowMask::default()
        }
    );
    assert_eq!(
        mask("src-ip /16"),
        FlowMask {
            src_ip: 0xffff_0000,
            ..FlowMask::default()
        }
    );
    assert_eq!(
        mask("dst-ip6 /64"),
        FlowMask {
            dst_ip6: u128::MAX << 64,
            ..FlowMask::default()
        }
    );
    assert_eq!(
        mask("src-ipv6 ffff:ffff::"),
        FlowMask {
            src_ip6: 0xffff_ffff << 96,
            ..FlowMask::default()
        }
    );
    assert_eq!(
        mask("src-port 0xffff dst-port 65535 proto 0xff flow-id 0xfffff"),
        FlowMask {
            src_port: 0xffff,
            dst_port: 0xffff,
            proto: 0xff,
            flow_id: 0xfffff,
            ..FlowMask::default()
        }
    );
    assert_eq!(mask("all"), FlowMask::ALL);
    // A mask ends at the first word that is not a field.
    let p = pipe("pipe 1 config mask dst-ip 0xff bw 1Mbit/s");
    assert_eq!((p.flowset.mask.dst_ip, p.link.bw), (0xff, 1_000_000));
    assert!(err("pipe 1 config mask proto 0x100")
        .message
        .contains("8 bits"));
    assert!(err("pipe 1 config mask flow-id 0x100000")
        .message
        .contains("20 bits"));
    let e = err("pipe 1 config mask bw 1");
    assert_eq!(e.found(), Some("bw"));
}

#[test]
fn queues() {
    assert_eq!(queue("queue 5 config pipe 2").sched, Some(2));
    assert_eq!(queue("queue 5 config sched 3").sched, Some(3));
    assert_eq!(queue("queue 5 config weight 50").sched, None);
    let q =
        queue("queue 5 config sched 1 weight 69 mask all queue 100 plr 0.5 buckets 128 noerror");
    assert_eq!(q.flowset.weight, 69);
    assert_eq!(q.flowset.mask, FlowMask::ALL);
    assert_eq!(q.flowset.limit, QueueLimit::Slots(100));
    assert_eq!(q.flowset.buckets, 128);
    assert!(q.flowset.noerror);
    let e = err("queue 5 config sched 1 delay 10ms");
    assert_eq!(e.found(), Some("delay"));
    assert!(e.message.contains("link option"), "{e}");
}

#[test]
fn schedulers() {
    let s = sched_cfg("sched 2 config type fifo");
    assert_eq!(
        s,
        SchedConfig {
            kind: Some("fifo".into()),
            ..SchedConfig::default()
        }
    );
    assert_eq!(
        sched_cfg("sched 2 config type FIFO").kind.as_deref(),
        Some("fifo")
    );
    assert_eq!(sched_cfg("sched 2 config pipe 2").kind, None);
    let s = sched_cfg("sched 2 config mask dst-ip 0xff bw 1Mbit/s delay 5");
    assert_eq!(s.mask.dst_ip, 0xff);
    assert_eq!(
        s.link,
        Some(LinkConfig {
            bw: 1_000_000,
            delay: 5 * NS_PER_MS,
            ..LinkConfig::default()
        })
    );
    // `bw 0` still names the link: it resets it to unlimited.
    assert_eq!(
        sched_cfg("sched 2 config bw 0").link,
        Some(LinkConfig::default())
    );

    let e = err("sched 1 config pipe 2");
    assert_eq!(e.found(), Some("2"));
    assert!(
        e.message.contains("scheduler 1 always drives link 1"),
        "{e}"
    );

    // Type parameters are checked against the type's own list.
    let fifo = sched::lookup("fifo").unwrap();
    assert!(fifo.params.is_empty());
    let e = err("sched 1 config type fifo quantum 1514");
    assert_eq!(e.found(), Some("quantum"));
    assert!(e.message.contains("takes no parameters"), "{e}");
    // Every registered scheduler parameter parses in its kind's form, once.
    for ty in sched::REGISTRY {
        for p in ty.params {
            for (text, want) in written(p) {
                let s = sched_cfg(&format!("sched 1 config type {} {text}", ty.name));
                assert_eq!(s.params, vec![(p.name.to_string(), want)], "{text}");
            }
        }
    }
    // A FreeBSD type is refused as unavailable only while the registry lacks it.
    for ty in ["qfq", "rr", "prio", "fq_codel", "fq_pie"] {
        if sched::lookup(ty).is_some() {
            continue;
        }
        let e = err(&format!("sched 1 config type {ty}"));
        assert_eq!((e.kind, e.found()), (ErrorKind::Unavailable, Some(ty)));
        assert!(e.message.contains("not available in this build"), "{e}");
        for name in sched::names() {
            assert!(e.message.contains(name), "{e}");
        }
    }
    for ty in ["qfq", "rr", "prio", "fq_codel", "fq_pie"] {
        if sched::lookup(ty).is_none() {
            assert_eq!(
                err(&format!("sched 1 config type {ty}")).kind,
                ErrorKind::Unavailable,
                "{ty}"
            );
        }
    }
    let e = err("sched 1 config type fifoo");
    assert_eq!((e.kind, e.suggestion), (ErrorKind::Syntax, Some("fifo")));
}

#[test]
fn aqms_are_queue_options() {
    // `sched` has no queue management: the error names the objects that do.
    for (line, word) in [
        ("sched 1 config codel", "codel"),
        ("sched 1 config red 0.002/30/80/0.1", "red"),
    ] {
        let e = err(line);
        assert_eq!(
            (e.kind, e.found()),
            (ErrorKind::Syntax, Some(word)),
            "{line}"
        );
        assert!(e.message.contains("queue option"), "{e}");
    }
}

#[test]
fn object_verbs() {
    let show = |l: &str| parse_command(l).unwrap().statement;
    assert_eq!(
        show("pipe show"),
        Statement::Show(ShowRequest::Pipes(vec![]))
    );
    assert_eq!(
        show("pipe list"),
        Statement::Show(ShowRequest::Pipes(vec![]))
    );
    assert_eq!(
        show("pipe 3 show"),
        Statement::Show(ShowRequest::Pipes(vec![3]))
    );
    assert_eq!(
        show("pipe show 3 4"),
        Statement::Show(ShowRequest::Pipes(vec![3, 4]))
    );
    assert_eq!(
        show("queue show"),
        Statement::Show(ShowRequest::Queues(vec![]))
    );
    assert_eq!(
        show("sched 2 show"),
        Statement::Show(ShowRequest::Scheds(vec![2]))
    );
    assert_eq!(apply("pipe 1 delete"), Command::DeletePipes(vec![1]));
    assert_eq!(apply("pipe delete 1 2"), Command::DeletePipes(vec![1, 2]));
    assert_eq!(apply("queue 7 delete"), Command::DeleteQueues(vec![7]));
    assert_eq!(apply("sched delete 7"), Command::DeleteScheds(vec![7]));
    for flush in ["pipe flush", "queue flush", "sched flush"] {
        assert_eq!(apply(flush), Command::FlushDummynet);
    }
    // dnctl(8)'s `flush` and `show` are about pipes; ipfw's about rules.
    for line in [
        "dnctl flush",
        "dnctl -q flush",
        "/sbin/dnctl -f flush",
        "at 2s dnctl flush",
    ] {
        let cmd = match apply(line) {
            Command::Schedule(s) => s.steps[0].1.clone(),
            c => c,
        };
        assert_eq!(cmd, Command::FlushDummynet, "{line}");
    }
    assert_eq!(apply("ipfw -q flush"), Command::FlushRules);
    assert_eq!(apply("flush"), Command::FlushRules);
    let argv: Vec<String> = ["dnctl", "-q", "flush"].map(String::from).to_vec();
    assert_eq!(
        parse_args(&argv).unwrap().statement,
        Statement::Apply(Command::FlushDummynet)
    );
    assert_eq!(
        show("dnctl show"),
        Statement::Show(ShowRequest::Pipes(vec![]))
    );
    assert_eq!(
        apply("pipe 1 config"),
        Command::ConfigPipe(1, PipeConfig::default())
    );
    assert!(err("pipe delete").message.contains("numbers to delete"));
    assert!(err("pipe config bw 1").message.contains("`pipe N config"));
    assert!(err("pipe 0 config").message.contains("1..65535"));
    assert!(err("pipe 65536 config").message.contains("1..65535"));
    assert_eq!(err("pipe flush 1").found(), Some("1"));
}

#[test]
fn rule_commands() {
    assert_eq!(
        apply("delete 100 200"),
        Command::DeleteRules(vec![100, 200])
    );
    assert_eq!(apply("flush"), Command::FlushRules);
    assert_eq!(apply("zero"), Command::ZeroRules(vec![]));
    assert_eq!(
        apply("zero 100 65535"),
        Command::ZeroRules(vec![100, 65535])
    );
    assert_eq!(
        parse_command("list 100").unwrap().statement,
        Statement::Show(ShowRequest::Rules {
            numbers: vec![100],
            counters: false
        })
    );
    assert_eq!(err("delete").found(), None);
    assert_eq!(err("delete 65535").kind, ErrorKind::Range);
    assert_eq!(err("flush now").found(), Some("now"));
    assert_eq!(err("nat 1 config if em0").kind, ErrorKind::Unavailable);
}

#[test]
fn settings() {
    let cases = [
        ("sysctl net.inet.ip.fw.one_pass=0", Setting::OnePass(false)),
        (
            "sysctl net.inet.ip.fw.default_to_accept=1",
            Setting::DefaultToAccept(true),
        ),
        (
            "kenv net.inet.ip.fw.default_to_accept=1",
            Setting::DefaultToAccept(true),
        ),
        (
            "sysctl net.inet.ip.dummynet.expire=0",
            Setting::Expire(false),
        ),
        (
            "sysctl net.inet.ip.dummynet.pipe_slot_limit=1000",
            Setting::PipeSlotLimit(1000),
        ),
        (
            "sysctl net.inet.ip.dummynet.pipe_byte_limit=10485760",
            Setting::PipeByteLimit(10_485_760),
        ),
        (
            "sysctl net.inet.ip.dummynet.held_limit=1073741824",
            Setting::HeldLimit(1 << 30),
        ),
        (
            "sysctl net.inet.ip.dummynet.held_limit=0",
            Setting::HeldLimit(0),
        ),
        (
            "sysctl net.inet.ip.dummynet.instance_limit=1000",
            Setting::InstanceLimit(1000),
        ),
    ];
    for (line, s) in cases {
        assert_eq!(apply(line), Command::Set(s), "{line}");
    }
    // At least one queue and instance; a count that fits in 32 bits.
    for bad in ["0", "4294967296"] {
        let e = err(&format!("sysctl net.inet.ip.dummynet.instance_limit={bad}"));
        assert_eq!((e.kind, e.found()), (ErrorKind::Range, Some(bad)), "{e}");
    }
    let e = err("sysctl net.inet.ip.fw.one_pass=2");
    assert_eq!((e.kind, e.found()), (ErrorKind::Range, Some("2")));
    let e = err("sysctl net.inet.ip.fw.onepass=1");
    assert_eq!(e.found(), Some("net.inet.ip.fw.onepass"));
    assert_eq!(e.suggestion, Some("net.inet.ip.fw.one_pass"));
    assert_eq!(
        err("sysctl net.inet.ip.fw.one_pass").kind,
        ErrorKind::Syntax
    );
    assert_eq!(
        apply("sysctl net.inet.ip.dummynet.fqcodel.quantum=2000"),
        Command::Set(Setting::Tunable {
            sysctl: "fqcodel.quantum",
            value: 2000
        })
    );
    let e = err("sysctl net.inet.ip.dummynet.fqcodel.quantum=90000");
    assert_eq!((e.kind, e.found()), (ErrorKind::Range, Some("90000")));
    assert!(e.message.contains("1..9000"), "{e}");
}

#[test]
fn program_words_prompts_and_flags() {
    let flush = Statement::Apply(Command::FlushRules);
    for line in [
        "flush",
        "ipfw flush",
        "/sbin/ipfw flush",
        "ipfw/ipfw flush",
        "/usr/src/sbin/ipfw/ipfw flush",
        "  # ipfw flush",
        "$ ipfw flush",
        "sudo ipfw flush",
        "ipfw flush # clear everything",
        "IPFW FLUSH",
    ] {
        assert_eq!(parse_command(line).unwrap().statement, flush, "{line}");
    }
    let flags = |l: &str| parse_command(l).unwrap().flags;
    assert_eq!(
        flags("ipfw -q flush"),
        Flags {
            quiet: true,
            force: true, // FreeBSD: -q implies -f
            ..Flags::default()
        }
    );
    assert_eq!(
        flags("ipfw -f flush"),
        Flags {
            force: true,
            ..Flags::default()
        }
    );
    assert_eq!(
        flags("ipfw -fq flush"),
        Flags {
            force: true,
            quiet: true,
            timestamps: false,
            ..Flags::default()
        }
    );
    assert_eq!(
        flags("ipfw -t -q show"),
        Flags {
            quiet: true,
            timestamps: true,
            force: true,
            ..Flags::default()
        }
    );
    let e = err("ipfw -qx flush");
    assert_eq!((e.column, e.found()), (8, Some("x")));
    assert_eq!(
        parse_command("").unwrap().statement,
        Statement::Nop("empty line")
    );
    assert_eq!(
        parse_command("   # just a comment").unwrap().statement,
        Statement::Nop("empty line")
    );
}

#[test]
fn argv_form() {
    let args: Vec<String> = ["pipe", "1", "config", "bw", "1Mbit/s", "delay", "5ms"]
        .map(String::from)
        .to_vec();
    let p = parse_args(&args).unwrap();
    assert_eq!(
        p.statement,
        Statement::Apply(Command::ConfigPipe(
            1,
            PipeConfig {
                link: LinkConfig {
                    bw: 1_000_000,
                    delay: 5 * NS_PER_MS,
                    ..LinkConfig::default()
                },
                ..PipeConfig::default()
            }
        ))
    );
    let args: Vec<String> = [
        "-q", "add", "100", "allow", "ip", "from", "{", "1.2.3.4", "or", "5.6.7.8", "}", "to",
        "any",
    ]
    .map(String::from)
    .to_vec();
    assert!(parse_args(&args).unwrap().flags.quiet);
    let e = parse_args(&[
        "pipe".into(),
        "1".into(),
        "config".into(),
        "bw".into(),
        "fast".into(),
    ])
    .unwrap_err();
    assert_eq!((e.source.as_str(), e.column), ("pipe 1 config bw fast", 18));
    assert!(parse_args(&[]).is_err());
}

mod properties {
    use dummynet_lang::parse_command;
    use proptest::prelude::*;

    /// Words of the pipe/queue/sched language, valid and not.
    const SOUP: &[&str] = &[
        "pipe",
        "queue",
        "sched",
        "1",
        "65535",
        "65536",
        "0",
        "config",
        "delete",
        "show",
        "list",
        "flush",
        "bw",
        "bandwidth",
        "10Mbit/s",
        "1.5",
        "0x",
        "0xff",
        "delay",
        "10ms",
        "250us",
        "burst",
        "64KB",
        "200kb",
        "plr",
        "0.5",
        "2",
        "mask",
        "all",
        "dst-ip",
        "src-ip6",
        "/64",
        "/129",
        "proto",
        "flow-id",
        "buckets",
        "weight",
        "100",
        "noerror",
        "droptail",
        "type",
        "fifo",
        "wf2q+",
        "fq_codel",
        "codel",
        "red",
        "gred",
        "pie",
        "ecn",
        "noecn",
        "target",
        "interval",
        "tupdate",
        "max_burst",
        "max_ecnth",
        "alpha",
        "onoff",
        "ts",
        "0.002/5/15/0.1",
        "0.5/1K/é/1",
        "//",
        "5parsecs",
        "1.5",
        "net.inet.ip.dummynet.codel.target=5000",
        "net.inet.ip.dummynet.pie.alpha=é",
        "quantum",
        "profile",
        "",
        "é",
        "-",
        "=",
        "sysctl",
        "kenv",
        "net.inet.ip.fw.one_pass=1",
        "net.inet.ip.dummynet.expire=",
        "kldload",
        "-fq",
        "-z",
        "#",
        "$",
        "{",
        "}",
        ",",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn dummynet_soup_never_panics(words in prop::collection::vec(prop::sample::select(SOUP), 0..12)) {
            let line = words.join(" ");
            for l in [line.clone(), format!("ipfw {line}"), format!("pipe 1 config {line}"), format!("queue 1 config {line}"), format!("sched 1 config {line}")] {
                if let Err(e) = parse_command(&l) {
                    prop_assert!(e.offset + e.len <= l.len());
                    let _ = e.to_string();
                }
            }
        }
    }
}

/// `bw` with a bare number under 1000 is bit/s, as ipfw reads it: taken,
/// with a warning that says so.
#[test]
fn a_bare_small_bandwidth_is_taken_with_a_warning() {
    let notes = |line: &str| parse_command(line).unwrap().notes;
    let n = notes("pipe 1 config bw 10 delay 5ms");
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(
        n[0].contains("`bw 10` is 10 bit/s") && n[0].contains("10Mbit/s"),
        "{n:?}"
    );
    assert_eq!(link("pipe 1 config bw 10").bw, 10);
    for quiet in [
        "pipe 1 config bw 10Mbit/s",
        "pipe 1 config bw 0",
        "pipe 1 config bw 1000",
        "pipe 1 config bw 999bit/s",
        "pipe 1 config delay 10",
    ] {
        assert!(notes(quiet).is_empty(), "{quiet}");
    }
}

/// `memory` (not FreeBSD's) asks for the memory report, from ipfw or
/// dnctl, and leaves `show` as FreeBSD prints it.
#[test]
fn memory_is_a_command_of_its_own() {
    for line in ["ipfw memory", "dnctl memory", "memory"] {
        let p = parse_command(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(p.statement, Statement::Show(ShowRequest::Memory), "{line}");
    }
    assert!(parse_command("ipfw memory 100").is_err());
    assert!(matches!(
        parse_command("ipfw show").map(|p| p.statement),
        Ok(Statement::Show(ShowRequest::Rules { .. }))
    ));
}
