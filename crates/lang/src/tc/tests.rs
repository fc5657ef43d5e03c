//! The examples of tc-netem(8), tc-tbf(8) and tc-fq_codel(8), read and
//! printed back as iproute2 prints them.

use super::*;

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn qdisc(line: &str) -> QdiscRequest {
    match parse(&words(line))
        .unwrap_or_else(|e| panic!("{line}: {e}"))
        .command
    {
        TcCommand::Qdisc(q) => *q,
        other => panic!("{line}: {other:?}"),
    }
}

/// The options part of `tc qdisc show` for a `tc qdisc add` line.
fn shown(line: &str) -> String {
    qdisc(line).qdisc.expect("a qdisc").show(false)
}

fn refused(line: &str) -> TcError {
    match parse(&words(line)) {
        Err(e) => e,
        Ok(t) => panic!("{line} was taken: {t:?}"),
    }
}

#[test]
fn the_man_pages_netem_examples_print_back_as_tc_prints_them() {
    let cases = [
        ("qdisc add dev eth0 root netem delay 100ms", "limit 1000 delay 100ms"),
        ("qdisc change dev eth0 root netem delay 100ms 10ms", "limit 1000 delay 100ms  10ms"),
        (
            "qdisc change dev eth0 root netem delay 100ms 10ms 25%",
            "limit 1000 delay 100ms  10ms 25%",
        ),
        (
            "qdisc change dev eth0 root netem delay 100ms 20ms distribution normal",
            "limit 1000 delay 100ms  20ms",
        ),
        ("qdisc change dev eth0 root netem loss 0.1%", "limit 1000 loss 0.1%"),
        ("qdisc change dev eth0 root netem loss 0.3% 25%", "limit 1000 loss 0.3% 25%"),
        ("qdisc change dev eth0 root netem loss random 0.3% 25%", "limit 1000 loss 0.3% 25%"),
        ("qdisc change dev eth0 root netem duplicate 1%", "limit 1000 duplicate 1%"),
        ("qdisc change dev eth0 root netem corrupt 0.1%", "limit 1000 corrupt 0.1%"),
        (
            "qdisc change dev eth0 root netem delay 10ms reorder 25% 50%",
            "limit 1000 delay 10ms reorder 25% 50% gap 1",
        ),
        (
            "qdisc change dev eth0 root netem delay 10ms reorder 100% gap 5",
            "limit 1000 delay 10ms reorder 100% gap 5",
        ),
        (
            "qdisc add dev eth0 root netem rate 5kbit 20 100 5",
            "limit 1000 rate 5Kbit packetoverhead 20 cellsize 100 celloverhead 5",
        ),
        ("qdisc add dev eth0 root netem rate 20000", "limit 1000 rate 20Kbit"),
        ("qdisc add dev eth0 root netem rate 1mbps", "limit 1000 rate 8Mbit"),
        ("qdisc add dev eth0 root netem slot 10 200", "limit 1000 slot 10ns 200ns"),
        (
            "qdisc add dev eth0 root netem slot 5ms 10ms packets 8 bytes 64k",
            "limit 1000 slot 5ms 10ms packets 8 bytes 65536",
        ),
        (
            "qdisc add dev eth0 root netem slot distribution pareto 1ms 2ms",
            "limit 1000 slot distribution 1ms 2ms",
        ),
        (
            "qdisc add dev eth0 root netem loss state 1% 30%",
            "limit 1000 loss state p13 1% p31 30% p32 0% p23 100% p14 0%",
        ),
        (
            "qdisc add dev eth0 root netem loss gemodel 1% 10% 70% 0.1%",
            "limit 1000 loss gemodel p 1% r 10% 1-h 70% 1-k 0.1%",
        ),
        (
            "qdisc add dev eth0 root netem loss gemodel 1%",
            "limit 1000 loss gemodel p 1% r 99% 1-h 100% 1-k 0%",
        ),
        ("qdisc add dev eth0 root netem loss 5% ecn", "limit 1000 loss 5% ecn "),
        ("qdisc add dev eth0 root netem limit 100 delay 1s seed 42", "limit 100 delay 1s seed 42"),
        (
            "qdisc add dev eth0 root netem delay 100ms 10ms 25% distribution normal loss 0.3% 25% duplicate 1% reorder 25% 50%",
            "limit 1000 delay 100ms  10ms 25% loss 0.3% 25% duplicate 1% reorder 25% 50% gap 1",
        ),
        // iproute2's abbreviations.
        ("qdisc add dev eth0 root netem del 5ms 1ms dup 1% dist normal", "limit 1000 delay 5ms  1ms duplicate 1%"),
    ];
    for (line, want) in cases {
        assert_eq!(shown(line), want, "{line}");
    }
}

#[test]
fn the_verbs_the_device_and_the_place() {
    let q = qdisc("qdisc add dev eth0 root handle 1:0 netem delay 100ms");
    assert_eq!(
        (q.verb, q.dev.as_str(), q.handle, &q.parent),
        (Verb::Add, "eth0", Some(1), &Parent::Root)
    );
    let q =
        qdisc("qdisc add dev eth0 parent 1:1 handle 10: tbf rate 256kbit buffer 1600 limit 3000");
    assert_eq!((q.handle, &q.parent), (Some(0x10), &Parent::Class(1, 1)));
    assert_eq!(
        qdisc("qdisc replace dev veth1 root netem loss 1%").verb,
        Verb::Replace
    );
    assert_eq!(
        qdisc("qdisc change dev veth1 root netem loss 1%").verb,
        Verb::Change
    );
    let q = qdisc("qdisc del dev eth0 root");
    assert_eq!((q.verb, q.qdisc), (Verb::Delete, None));
    assert_eq!(qdisc("qdisc delete dev eth0 root netem").verb, Verb::Delete);

    let t = parse(&words("-s qdisc show dev eth0")).unwrap();
    assert!(t.opts.stats);
    assert_eq!(
        t.command,
        TcCommand::Show {
            dev: Some("eth0".into())
        }
    );
    assert_eq!(
        parse(&words("qdisc")).unwrap().command,
        TcCommand::Show { dev: None }
    );
    assert_eq!(
        parse(&words("qdisc ls")).unwrap().command,
        TcCommand::Show { dev: None }
    );
    let t = parse(&words("-n blue -stats qdisc show")).unwrap();
    assert_eq!(
        (t.opts.netns.as_deref(), t.opts.stats),
        (Some("blue"), true)
    );
}

#[test]
fn what_dummynet_does_not_emulate_is_said_so_not_refused() {
    for line in [
        "filter add dev eth0 parent 1: protocol ip u32 match ip dst 1.2.3.4 flowid 1:1",
        "class add dev eth0 parent 1: classid 1:1 htb rate 1mbit",
        "qdisc add dev eth0 root handle 1: htb default 10",
        "qdisc add dev eth0 ingress",
        "qdisc add dev eth0 root prio",
        "-b cmds.txt",
    ] {
        match parse(&words(line)) {
            Ok(Tc {
                command: TcCommand::NotEmulated(what),
                ..
            }) => assert!(!what.is_empty(), "{line}"),
            other => panic!("{line}: {other:?}"),
        }
    }
    let e = refused("qdisc add dev eth0 root netem rate 10%");
    assert_eq!(e.kind, TcErrorKind::NotEmulated);
}

#[test]
fn bad_input_gets_tcs_kind_of_message() {
    let cases = [
        (
            "qdisc add dev eth0 root netem delay",
            "Command line is not complete",
        ),
        (
            "qdisc add dev eth0 root netem delay 100 ms",
            "What is \"ms\"?",
        ),
        (
            "qdisc add dev eth0 root netem delay fast",
            "Illegal \"latency\"",
        ),
        (
            "qdisc add dev eth0 root netem loss 1% loss 2%",
            "duplicate loss argument",
        ),
        (
            "qdisc add dev eth0 root netem loss often",
            "Unknown loss parameter: often",
        ),
        (
            "qdisc add dev eth0 root netem reorder 25%",
            "reordering not possible without specifying some delay",
        ),
        (
            "qdisc add dev eth0 root netem gap 5 delay 10ms",
            "gap specified without reorder probability",
        ),
        (
            "qdisc add dev eth0 root netem ecn",
            "ecn requested without loss model",
        ),
        (
            "qdisc add dev eth0 root netem distribution normal",
            "distribution specified but no latency and jitter values",
        ),
        (
            "qdisc add dev eth0 root netem loss 120%",
            "Illegal \"loss percent\"",
        ),
        ("qdisc add dev eth0 root netem rate 5mb", "Illegal \"rate\""),
        (
            "qdisc add dev eth0 root netem slot 10ms 5ms",
            "Illegal \"slot max_delay\"",
        ),
        (
            "qdisc add dev eth0 root netem delay 300s",
            "time (too large)",
        ),
        (
            "qdisc add dev eth0 root netem dealy 10ms",
            "What is \"dealy\"?",
        ),
        ("qdisc add root netem delay 10ms", "Cannot find device"),
        ("qdisc add dev eth0 netem delay 10ms", "Parent Qdisc"),
        ("qdisc add dev eth0 root", "Qdisc kind is missing"),
        (
            "qdisc add dev eth0 root handle x1: netem",
            "qdisc handle is invalid",
        ),
        ("qdisc frob dev eth0", "Command \"frob\" is unknown"),
        (
            "qdisc add dev eth0 root tbf rate 1mbit latency 50ms",
            "\"burst\" parameter is mandatory",
        ),
        (
            "qdisc add dev eth0 root tbf rate 1mbit burst 10k",
            "\"limit\" parameter is mandatory",
        ),
        (
            "qdisc add dev eth0 root fq_codel flows 0",
            "must be above 0",
        ),
    ];
    for (line, want) in cases {
        let e = refused(line);
        assert_eq!(e.kind, TcErrorKind::Syntax, "{line}");
        assert!(e.to_string().contains(want), "{line}: {e}");
    }
    // A typo gets its keyword; the space before a unit says what tc read.
    assert!(refused("qdisc add dev eth0 root netem dealy 10ms")
        .to_string()
        .contains("did you mean `delay`?"));
}

#[test]
fn tbf_and_fq_codel_print_back_as_tc_prints_them() {
    assert_eq!(
        shown("qdisc add dev eth0 root tbf rate 1mbit burst 32kbit latency 400ms"),
        "rate 1Mbit burst 4Kb lat 400ms"
    );
    assert_eq!(
        shown("qdisc add dev eth0 root tbf rate 256kbit buffer 1600 limit 3000"),
        "rate 256Kbit burst 1600b lat 43.8ms"
    );
    assert_eq!(
        shown("qdisc add dev eth0 root fq_codel"),
        "limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64"
    );
    assert_eq!(
        shown("qdisc add dev eth0 root fq_codel limit 1000 target 2ms interval 50ms noecn quantum 300"),
        "limit 1000p flows 1024 quantum 300 target 2ms interval 50ms memory_limit 32Mb drop_batch 64"
    );
}

#[test]
fn a_qdisc_line_and_its_counters() {
    let q = qdisc("qdisc add dev eth0 root netem delay 100ms");
    let line = format_qdisc(0x8001, &q.parent, q.qdisc.as_ref().unwrap(), false, None);
    assert_eq!(
        line,
        "qdisc netem 8001: root refcnt 2 limit 1000 delay 100ms"
    );
    let stats = QdiscStats {
        bytes: 1514 * 3,
        packets: 3,
        drops: 1,
        overlimits: 0,
        backlog_bytes: 1514,
        backlog_packets: 1,
    };
    let q = qdisc("qdisc add dev eth0 parent 1:1 handle 10: netem loss 1%");
    let line = format_qdisc(
        0x10,
        &q.parent,
        q.qdisc.as_ref().unwrap(),
        false,
        Some(&stats),
    );
    assert_eq!(
        line,
        "qdisc netem 10: parent 1:1 limit 1000 loss 1%\n Sent 4542 bytes 3 pkt (dropped 1, overlimits 0 requeues 0) \n backlog 1514b 1p requeues 0"
    );
}

#[test]
fn netem_becomes_pipe_options_the_language_takes() {
    let cases = [
        ("delay 100ms", "queue 1000 delay 100000us"),
        (
            "delay 100ms 10ms 25% distribution normal loss 0.3% 25% duplicate 1% reorder 25% 50%",
            "queue 1000 delay 100000us jitter 10000us correlation 25% distribution normal unordered \
             loss 0.3% correlation 25% duplicate 1% reorder 25% correlation 50% gap 1",
        ),
        ("limit 50 rate 1mbit 20 100 5", "queue 50 bw 1000000bit/s overhead 20 cellsize 100 celloverhead 5"),
        ("delay 20ms 5ms rate 10mbit", "queue 1000 delay 20000us jitter 5000us bw 10000000bit/s"),
        ("loss gemodel 1% 30%", "queue 1000 loss gemodel 1% 30% 100% 0%"),
        ("loss state 1%", "queue 1000 loss state 1% 99% 0% 100% 0%"),
        ("corrupt 0.1% 10%", "queue 1000 corrupt 0.1% correlation 10%"),
        ("loss 1% seed 42", "queue 1000 loss 1% seed 42"),
        ("slot 5ms 10ms packets 8", "queue 1000 slot 5000000ns 10000000ns packets 8"),
    ];
    for (opts, want) in cases {
        let line = format!("qdisc add dev eth0 root netem {opts}");
        let got = qdisc(&line).qdisc.unwrap().pipe_options().unwrap();
        assert_eq!(
            got.join(" "),
            want.split_whitespace().collect::<Vec<_>>().join(" "),
            "{opts}"
        );
        let mut command = vec!["pipe".to_string(), "1".into(), "config".into()];
        command.extend(got);
        crate::parse_args(&command)
            .unwrap_or_else(|e| panic!("{opts}: {} does not parse: {e}", command.join(" ")));
    }
    for refused in [
        "loss 1% ecn",
        "slot distribution normal 1ms 1ms",
        "rate 1mbit -4",
    ] {
        let line = format!("qdisc add dev eth0 root netem {refused}");
        let e = qdisc(&line).qdisc.unwrap().pipe_options().unwrap_err();
        assert_eq!(e.kind, TcErrorKind::NotEmulated, "{refused}");
    }
    let tbf = qdisc("qdisc add dev eth0 root tbf rate 1mbit burst 32kbit latency 400ms");
    let mut command = vec!["pipe".to_string(), "1".into(), "config".into()];
    command.extend(tbf.qdisc.unwrap().pipe_options().unwrap());
    assert_eq!(
        command.join(" "),
        "pipe 1 config bw 1000000bit/s burst 4096 queue 50000bytes"
    );
    crate::parse_args(&command).unwrap();
}
