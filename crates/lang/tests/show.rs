//! Golden `show` output from hand-built snapshots, including the
//! `ipfw pipe 1 show` printed in seed 000.

use dummynet_engine::config::{
    Action, LinkConfig, QueueLimit, RuleSpec, Settings, DEFAULT_BUCKETS,
};
use dummynet_engine::flow::{proto, FlowKey, FlowMask};
use dummynet_engine::rng::Probability;
use dummynet_engine::stats::{
    FlowCounters, FlowView, FlowsetView, InstanceView, LinkView, RuleView, SchedView,
};
use dummynet_engine::time::{NS_PER_MS, NS_PER_US};
use dummynet_engine::{Command, Snapshot};
use dummynet_lang::{
    format_pipes, format_queues, format_rules, format_scheds, parse_args_in, parse_command,
    Statement,
};

fn link(number: u32, bw: u64, delay: u64) -> LinkView {
    LinkView {
        number,
        config: LinkConfig {
            bw,
            delay,
            ..LinkConfig::default()
        },
    }
}

fn flowset(number: u32, sched: u32, limit: QueueLimit) -> FlowsetView {
    FlowsetView {
        number,
        sched,
        linked: true,
        weight: 1,
        lmax: 0,
        pri: 0,
        limit,
        plr: Probability::ZERO,
        mask: FlowMask::default(),
        buckets: DEFAULT_BUCKETS,
        aqm: "droptail".into(),
        loss: None,
        duplicate: None,
        corrupt: None,
        staged: Vec::new(),
        flows: vec![],
    }
}

fn sched(number: u32, kind: &'static str) -> SchedView {
    SchedView {
        number,
        kind,
        mask: FlowMask::default(),
        params: vec![],
        instances: vec![],
    }
}

fn counters(
    tot_pkts: u64,
    tot_bytes: u64,
    len_pkts: u32,
    len_bytes: u64,
    drops: u64,
) -> FlowCounters {
    FlowCounters {
        tot_pkts,
        tot_bytes,
        len_pkts,
        len_bytes,
        drops,
        waited: 0,
    }
}

fn rule_spec(line: &str) -> RuleSpec {
    match parse_command(line).unwrap().statement {
        Statement::Apply(Command::AddRule(r)) => r,
        other => panic!("{other:?}"),
    }
}

fn rule(number: u16, line: &str, packets: u64, bytes: u64, last_match: Option<u64>) -> RuleView {
    RuleView {
        number,
        spec: rule_spec(line),
        packets,
        bytes,
        last_match,
        is_default: false,
        logged: 0,
    }
}

fn default_rule(packets: u64, bytes: u64) -> RuleView {
    let spec = RuleSpec {
        number: Some(65535),
        action: Action::Deny,
        prob: None,
        extra: Default::default(),
        body: vec![],
    };
    RuleView {
        number: 65535,
        spec,
        packets,
        bytes,
        last_match: None,
        is_default: true,
        logged: 0,
    }
}

/// The state behind seed 000's `ipfw pipe 1 show`, after
/// `pipe 1 config delay 10ms bw 50Mbit/s queue 1000kb` and an iperf3 run.
fn seed_000_snapshot() -> Snapshot {
    let mut fifo = sched(65537, "FIFO");
    fifo.instances.push(InstanceView {
        id: FlowKey::default(),
        counters: counters(4679, 4_775_549, 12, 16552, 0),
    });
    Snapshot {
        links: vec![link(1, 50_000_000, 10 * NS_PER_MS)],
        // Scheduler 1 and queue 131073 exist too; `pipe show` lists only the
        // pipe's own FIFO scheduler, as FreeBSD does.
        scheds: vec![sched(1, "WF2Q+"), fifo],
        flowsets: vec![flowset(131073, 65537, QueueLimit::Bytes(1_024_000))],
        ..Snapshot::default()
    }
}

#[test]
fn seed_000_pipe_show() {
    let expected = "\
00001:  50.000 Mbit/s   10 ms burst 0
    hold: queue 1024000 bytes + delay line 62500 bytes (bw x delay)
q131073 1000 KB 0 flows (1 buckets) sched 65537 weight 0 lmax 0 pri 0 droptail
 sched 65537 type FIFO flags 0x0 0 buckets 1 active
BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp
  0 ip           0.0.0.0/0             0.0.0.0/0     4679  4775549 12 16552   0
";
    let s = seed_000_snapshot();
    assert_eq!(format_pipes(&s, &[]), expected);
    assert_eq!(format_pipes(&s, &[1]), expected);
    assert_eq!(format_pipes(&s, &[2]), "");
}

#[test]
fn link_lines() {
    let mut slow = link(3, 999, 250 * NS_PER_US);
    slow.config.burst = 1500;
    let s = Snapshot {
        links: vec![
            link(2, 0, 0),
            link(1, 1_500_000_000, 325 * NS_PER_MS),
            slow,
            link(4, 300_000, 1000 * NS_PER_MS),
        ],
        ..Snapshot::default()
    };
    assert_eq!(
        format_pipes(&s, &[]),
        "\
00001:   1.500 Gbit/s  325 ms burst 0
00002: unlimited    0 ms burst 0
00003:     999 bit/s 0.250 ms burst 1500
00004: 300.000 Kbit/s 1000 ms burst 0
"
    );
}

/// `hold:` says what a pipe with a delay can hold at most: its queue and
/// bandwidth × delay; for an unlimited pipe only `held_limit` bounds it.
#[test]
fn hold_lines() {
    let mut masked = flowset(131073, 65537, QueueLimit::Slots(50));
    masked.mask = FlowMask {
        dst_ip: 0xff,
        ..FlowMask::default()
    };
    let mut s = Snapshot {
        links: vec![
            link(1, 10_000_000, 60 * 1000 * NS_PER_MS),
            link(2, 0, 60 * 1000 * NS_PER_MS),
            link(3, 0, 0),
        ],
        flowsets: vec![
            masked,
            flowset(131074, 65538, QueueLimit::Bytes(20_000)),
            flowset(131075, 65539, QueueLimit::Slots(50)),
        ],
        ..Snapshot::default()
    };
    let q = "0 flows (1 buckets) sched";
    let expected = |limit: &str| {
        format!(
            "\
00001:  10.000 Mbit/s 60000 ms burst 0
    hold: queue 50 slots per flow + delay line 75000000 bytes (bw x delay)
q131073  50 sl. 0 flows (64 buckets) sched 65537 weight 0 lmax 0 pri 0 droptail
    mask:  0x00 0x00000000/0x0000 -> 0x000000ff/0x0000
00002: unlimited 60000 ms burst 0
    hold: queue 20000 bytes + delay line unbounded by rate ({limit})
q131074 19 KB {q} 65538 weight 0 lmax 0 pri 0 droptail
00003: unlimited    0 ms burst 0
q131075  50 sl. {q} 65539 weight 0 lmax 0 pri 0 droptail
"
        )
    };
    assert_eq!(format_pipes(&s, &[]), expected("no held_limit set"));
    s.settings.held_limit = 1 << 30;
    assert_eq!(
        format_pipes(&s, &[]),
        expected("held_limit 1073741824 bytes bounds it")
    );
}

/// A profile's `bw` is the link's: `pipe show` prints it, not the `bw`
/// the pipe was given.
#[test]
fn a_profile_bw_is_shown() {
    let mut l = link(1, 1_000_000, 0);
    l.config.profile = Some(dummynet_engine::config::Profile {
        name: "wifi".into(),
        bw: Some(2_000_000),
        loss_level: 1.0,
        samples: vec![0; 4],
    });
    let s = Snapshot {
        links: vec![l],
        ..Snapshot::default()
    };
    assert_eq!(
        format_pipes(&s, &[]),
        "00001:   2.000 Mbit/s    0 ms burst 0 profile: name \"wifi\" loss 1.000000 samples 4\n"
    );
}

#[test]
fn masked_pipe_lists_one_instance_per_flow() {
    let mask = FlowMask {
        dst_ip: 0xff,
        ..FlowMask::default()
    };
    let mut fs = flowset(131076, 65540, QueueLimit::Slots(20));
    fs.mask = mask;
    let mut fifo = sched(65540, "FIFO");
    fifo.mask = mask;
    let id = |host: u8| FlowKey::v4([0, 0, 0, 0].into(), [0, 0, 0, host].into(), 0, 0, 0);
    fifo.instances = vec![
        InstanceView {
            id: id(7),
            counters: counters(10, 15000, 0, 0, 0),
        },
        InstanceView {
            id: id(9),
            counters: counters(3, 4500, 1, 1500, 2),
        },
    ];
    let s = Snapshot {
        links: vec![link(4, 300_000, 0)],
        scheds: vec![fifo],
        flowsets: vec![fs],
        ..Snapshot::default()
    };
    assert_eq!(
        format_pipes(&s, &[4]),
        "\
00004: 300.000 Kbit/s    0 ms burst 0
q131076  20 sl. 0 flows (64 buckets) sched 65540 weight 0 lmax 0 pri 0 droptail
    mask:  0x00 0x00000000/0x0000 -> 0x000000ff/0x0000
 sched 65540 type FIFO flags 0x1 64 buckets 2 active
    mask:  0x00 0x00000000/0x0000 -> 0x000000ff/0x0000
BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp
  0 ip           0.0.0.0/0             0.0.0.7/0       10    15000  0    0   0
  1 ip           0.0.0.0/0             0.0.0.9/0        3     4500  1 1500   2
"
    );
}

#[test]
fn queue_show_with_ipv4_and_ipv6_flows() {
    let mut q = flowset(100, 1, QueueLimit::Slots(50));
    q.weight = 69;
    q.lmax = 1000;
    q.pri = 2;
    q.mask = FlowMask::ALL;
    q.flows = vec![
        FlowView {
            id: FlowKey::v4(
                [10, 0, 1, 2].into(),
                [10, 0, 2, 2].into(),
                proto::TCP,
                51234,
                5201,
            ),
            counters: counters(1200, 1_800_000, 40, 60000, 3),
            sub_queue: None,
        },
        FlowView {
            id: FlowKey::v6(
                "2001:db8::1".parse().unwrap(),
                "2001:db8::2".parse().unwrap(),
                proto::UDP,
                5353,
                443,
            ),
            counters: counters(5, 6000, 2, 2400, 0),
            sub_queue: None,
        },
    ];
    let mut small = flowset(5, 2, QueueLimit::Bytes(4000));
    small.plr = Probability::new(0.01).unwrap();
    let s = Snapshot {
        flowsets: vec![q, small, flowset(131073, 65537, QueueLimit::Slots(50))],
        ..Snapshot::default()
    };
    assert_eq!(
        format_queues(&s, &[]),
        "\
q00005 4000 B plr 0.010000 0 flows (1 buckets) sched 2 weight 1 lmax 0 pri 0 droptail
q00100  50 sl. 2 flows (64 buckets) sched 1 weight 69 lmax 1000 pri 2 droptail
    mask:  0xff 0xffffffff/0xffff -> 0xffffffff/0xffff
        mask: proto: 0xff, flow_id: 0x000fffff,  ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/0xffff -> ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/0xffff
BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp
  0 tcp         10.0.1.2/51234        10.0.2.2/5201  1200  1800000 40 60000   3
BKT ___Prot___ _flow-id_ ______________Source IPv6/port_______________ _______________Dest. IPv6/port_______________ Tot_pkt/bytes Pkt/Byte Drp
  1       udp       0                              2001:db8::1/5353                               2001:db8::2/443      5     6000  2 2400   0
"
    );
    assert!(format_queues(&s, &[5]).starts_with("q00005 "));
    assert_eq!(format_queues(&s, &[6]), "");
}

#[test]
fn sched_show() {
    let mut fq = sched(2, "FQ_CODEL");
    fq.params = vec![("quantum".into(), 1514), ("flows".into(), 1024)];
    let mut masked = sched(3, "WF2Q+");
    masked.mask = FlowMask {
        src_ip: 0xffff_ff00,
        ..FlowMask::default()
    };
    let s = Snapshot {
        links: vec![link(1, 10_000_000, 10 * NS_PER_MS)],
        scheds: vec![sched(65537, "FIFO"), masked, sched(1, "WF2Q+"), fq],
        ..Snapshot::default()
    };
    assert_eq!(
        format_scheds(&s, &[]),
        "\
00001:  10.000 Mbit/s   10 ms burst 0
 sched 1 type WF2Q+ flags 0x0 0 buckets 0 active
 sched 2 type FQ_CODEL flags 0x0 0 buckets 0 active
 FQ_CODEL target 5ms interval 100ms quantum 1514 limit 10240 flows 1024 NoECN
 sched 3 type WF2Q+ flags 0x1 64 buckets 0 active
    mask:  0x00 0xffffff00/0x0000 -> 0x00000000/0x0000
"
    );
    assert_eq!(format_scheds(&s, &[2]).lines().count(), 2);
}

fn ruleset() -> Snapshot {
    Snapshot {
        rules: vec![
            rule(
                100,
                "add 100 pipe 1 ip from any to any in",
                7_056_000,
                451_584_000,
                Some(1_500_000_000),
            ),
            rule(
                200,
                "add 200 prob 0.5 deny tcp from 10.0.0.0/8 to any dst-port 80 out via em0",
                12,
                720,
                Some(61_000_250_000),
            ),
            default_rule(0, 0),
        ],
        ..Snapshot::default()
    }
}

#[test]
fn rules_show_and_list() {
    let s = ruleset();
    assert_eq!(
        format_rules(&s, &[], true, false),
        "\
00100 7056000 451584000 pipe 1 ip from any to any in
00200      12       720 prob 0.500000 deny tcp from 10.0.0.0/8 to any dst-port 80 out via em0
65535       0         0 deny ip from any to any
"
    );
    assert_eq!(
        format_rules(&s, &[], false, false),
        "\
00100 pipe 1 ip from any to any in
00200 prob 0.500000 deny tcp from 10.0.0.0/8 to any dst-port 80 out via em0
65535 deny ip from any to any
"
    );
    // Widths follow the rules listed, not the whole ruleset.
    assert_eq!(
        format_rules(&s, &[200, 65535], true, false),
        "\
00200 12 720 prob 0.500000 deny tcp from 10.0.0.0/8 to any dst-port 80 out via em0
65535  0   0 deny ip from any to any
"
    );
}

#[test]
fn rules_with_timestamps() {
    assert_eq!(
        format_rules(&ruleset(), &[], true, true),
        "\
00100 7056000 451584000  1.500000 pipe 1 ip from any to any in
00200      12       720 61.000250 prob 0.500000 deny tcp from 10.0.0.0/8 to any dst-port 80 out via em0
65535       0         0           deny ip from any to any
"
    );
}

#[test]
fn default_rule_follows_default_to_accept() {
    let mut settings = Settings::default();
    settings.default_to_accept = true;
    let s = Snapshot {
        rules: vec![default_rule(3, 180)],
        settings,
        ..Snapshot::default()
    };
    assert_eq!(
        format_rules(&s, &[], true, false),
        "65535 3 180 allow ip from any to any\n"
    );
    assert_eq!(format_rules(&Snapshot::default(), &[], true, false), "");
}

/// `pipe show` after configuring through the parser and the engine, so the
/// text is what a user sees for the AQM options they typed.
fn shown_after(lines: &[&str], show: fn(&Snapshot, &[u32]) -> String) -> String {
    let mut e: dummynet_engine::Engine<u64> = dummynet_engine::Engine::new(1);
    for line in lines {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        e.apply(0, c)
            .unwrap_or_else(|err| panic!("{line}: {err:?}"));
    }
    show(&e.snapshot(), &[])
}

// FreeBSD's print_flowset_parms ends the flowset line with the AQM text:
// `droptail`, or the CoDel/PIE parameters on the same line, or RED/GRED on a
// line of its own (a newline, a tab, and ` RED` / `GRED`), ` (ecn)` when the
// flowset marks. FreeBSD shows no mark count here; `dummynet stats` has them.

#[test]
fn pipe_with_codel() {
    let expected = "\
00001:  10.000 Mbit/s   20 ms burst 0
    hold: queue 50 slots + delay line 25000 bytes (bw x delay)
q131073  50 sl. 0 flows (1 buckets) sched 65537 weight 0 lmax 0 pri 0 AQM CoDel target 7ms interval 160ms ECN
 sched 65537 type FIFO flags 0x0 0 buckets 0 active
";
    let lines = ["pipe 1 config bw 10Mbit/s delay 20ms codel target 7 interval 160 ecn"];
    assert_eq!(shown_after(&lines, format_pipes), expected);
}

#[test]
fn pipe_with_pie_options() {
    let expected = "\
00002:   1.000 Mbit/s    0 ms burst 0
q131074  50 sl. 0 flows (1 buckets) sched 65538 weight 0 lmax 0 pri 0 AQM type PIE target 20ms tupdate 30ms alpha 0.25 beta 2 max_burst 100ms max_ecnth 0.2 ECN NoCapDrop OnOff TS NoDerand
 sched 65538 type FIFO flags 0x0 0 buckets 0 active
";
    let lines = [
        "pipe 2 config bw 1Mbit/s pie target 20ms tupdate 30 max_burst 100 \
                  max_ecnth 0.2 alpha 0.25 beta 2 ecn nocapdrop onoff ts noderand",
    ];
    assert_eq!(shown_after(&lines, format_pipes), expected);
}

#[test]
fn pipe_with_red_in_slots() {
    let expected = "\
00003: unlimited    0 ms burst 0
q131075  50 sl. 0 flows (1 buckets) sched 65539 weight 0 lmax 0 pri 0 \n\t  RED w_q 0.002000 min_th 5 max_th 15 max_p 0.100000
 sched 65539 type FIFO flags 0x0 0 buckets 0 active
";
    let lines = ["pipe 3 config queue 50 red 0.002/5/15/0.1"];
    assert_eq!(shown_after(&lines, format_pipes), expected);
}

#[test]
fn pipe_with_gred_in_bytes_and_ecn() {
    let expected = "\
00004: unlimited    0 ms burst 0
q131076 100 KB 0 flows (1 buckets) sched 65540 weight 0 lmax 0 pri 0 \n\t GRED w_q 0.005000 min_th 10240 max_th 30720 max_p 0.200000 (ecn)
 sched 65540 type FIFO flags 0x0 0 buckets 0 active
";
    let lines = ["pipe 4 config queue 100KB gred 0.005/10K/30K/0.2 ecn"];
    assert_eq!(shown_after(&lines, format_pipes), expected);
    // GRED in slots, without ecn.
    let slots = shown_after(&["pipe 4 config gred 0.01/10/40/0.05"], format_pipes);
    assert!(
        slots.contains("pri 0 \n\t GRED w_q 0.010000 min_th 10 max_th 40 max_p 0.050000\n"),
        "{slots}"
    );
}

#[test]
fn queues_with_default_codel_and_pie() {
    let expected = "\
q00005  50 sl. 0 flows (1 buckets) sched 1 weight 1 lmax 0 pri 0 AQM CoDel target 5ms interval 100ms NoECN
q00006  50 sl. 0 flows (1 buckets) sched 1 weight 1 lmax 0 pri 0 AQM type PIE target 15ms tupdate 15ms alpha 0.125 beta 1.25 max_burst 150ms max_ecnth 0.1 NoECN CapDrop DRE Derand
q00007  50 sl. 0 flows (1 buckets) sched 1 weight 1 lmax 0 pri 0 droptail
";
    let lines = [
        "pipe 1 config bw 1Mbit/s",
        "queue 5 config pipe 1 codel",
        "queue 6 config pipe 1 pie",
        "queue 7 config pipe 1 codel droptail",
    ];
    assert_eq!(shown_after(&lines, format_queues), expected);
}

/// Parse, apply, show, and parse the shown values again: the same config.
#[test]
fn aqm_options_round_trip_through_show() {
    for line in [
        "pipe 1 config codel target 7 interval 160 ecn",
        "pipe 1 config codel target 500us interval 2s",
        "pipe 1 config pie target 20ms tupdate 30 max_burst 100 max_ecnth 0.2 alpha 0.25 beta 2 ecn nocapdrop onoff ts noderand",
        "pipe 1 config pie",
        "pipe 1 config red 0.002/5/15/0.1",
        "pipe 1 config queue 100KB gred 0.005/10K/30K/0.2 ecn",
    ] {
        let shown = shown_after(&[line], format_pipes);
        let flowset = shown
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with(" sched"))
            .collect::<Vec<_>>()
            .join("\n");
        let aqm_text = flowset
            .split_once(" pri 0 ")
            .map(|(_, a)| a)
            .unwrap_or_else(|| panic!("{shown}"));
        // The shown words, turned back into ipfw syntax.
        let words: Vec<&str> = aqm_text.split_whitespace().collect();
        let again = if let Some(rest) = aqm_text.strip_prefix("AQM CoDel ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            format!("pipe 1 config codel target {} interval {} {}", w[1], w[3], w[4].to_lowercase())
        } else if let Some(rest) = aqm_text.strip_prefix("AQM type PIE ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            let flags: Vec<String> = w[12..].iter().map(|f| f.to_lowercase()).collect();
            format!(
                "pipe 1 config pie target {} tupdate {} alpha {} beta {} max_burst {} max_ecnth {} {}",
                w[1], w[3], w[5], w[7], w[9], w[11], flags.join(" ")
            )
        } else {
            let kind = if words[0] == "GRED" { "gred" } else { "red" };
            let queue = if line.contains("100KB") { "queue 100KB " } else { "" };
            let ecn = if aqm_text.ends_with("(ecn)") { " ecn" } else { "" };
            format!(
                "pipe 1 config {queue}{kind} {}/{}/{}/{}{ecn}",
                words[2], words[4], words[6], words[8]
            )
        };
        assert_eq!(
            shown_after(&[&again], format_pipes),
            shown,
            "{line}\n -> {again}"
        );
        // The same values, as the AQM reads them (written or defaulted).
        let cfg = |l: &str| match parse_command(l).unwrap().statement {
            Statement::Apply(Command::ConfigPipe(_, c)) => {
                format!("{:?}", c.flowset.aqm.model().unwrap())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(cfg(&again), cfg(line), "{line}\n -> {again}");
    }
}

/// Seed 002's FQ-CoDel example 1, shown: FreeBSD's FQ_CODEL line under the
/// scheduler, with what was given and the defaults for the rest.
#[test]
fn sched_with_fq_codel_and_fq_pie() {
    let lines = [
        "pipe 1 config bw 10mbits/s",
        "sched 1 config pipe 1 type fq_codel target 7 quantum 2000 flows 2048",
        "queue 1 config sched 1",
    ];
    assert_eq!(
        shown_after(&lines, format_scheds),
        "\
00001:  10.000 Mbit/s    0 ms burst 0
 sched 1 type FQ_CODEL flags 0x0 0 buckets 0 active
 FQ_CODEL target 7ms interval 100ms quantum 2000 limit 10240 flows 2048 NoECN
"
    );
    let lines = [
        "pipe 2 config bw 10mbits/s",
        "sched 2 config pipe 2 type fq_pie target 20 alpha 0.25 max_ecnth 0.2 ecn",
    ];
    let shown = shown_after(&lines, format_scheds);
    assert!(
        shown.contains(
            "\n  FQ_PIE target 20ms tupdate 15ms alpha 0.25 beta 1.25 max_burst 150ms \
             max_ecnth 0.2 quantum 1514 limit 10240 flows 1024 ECN"
        ),
        "{shown}"
    );
}

/// The link `pipe 1 config WORDS` gives, files read from `dir`.
fn parsed_link(words: &str, dir: &std::path::Path) -> LinkConfig {
    let args: Vec<String> = format!("pipe 1 config {words}")
        .split_whitespace()
        .map(String::from)
        .collect();
    match parse_args_in(&args, Some(dir)).map(|p| p.statement) {
        Ok(Statement::Apply(Command::ConfigPipe(1, cfg))) => cfg.link,
        other => panic!("{words}: {other:?}"),
    }
}

#[test]
fn link_impairments_get_a_line_of_their_own() {
    let dir = std::env::temp_dir().join(format!("dummynet-lang-show-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cellular.trace"), "0\n1\n").unwrap();
    std::fs::write(dir.join("wifi.dist"), "-1 0 1\n").unwrap();
    let impairments = "jitter 5ms correlation 25% distribution wifi.dist unordered \
                       reorder 25% gap 5 overhead 24 cellsize 48 celloverhead 5 \
                       slot 10ms 20ms packets 4 bytes 3000 trace cellular.trace once";
    // Written in another order and netem's way, it shows the same.
    let config = parsed_link(
        "trace cellular.trace once delay 10ms 5ms 25% unordered distribution wifi.dist \
         slot 10ms 20ms bytes 3000 packets 4 overhead 24 cellsize 48 celloverhead 5 \
         reorder 0.25 gap 5",
        &dir,
    );
    let s = Snapshot {
        links: vec![LinkView { number: 1, config }],
        scheds: vec![sched(65537, "FIFO"), sched(1, "WF2Q+")],
        flowsets: vec![flowset(131073, 65537, QueueLimit::Slots(50))],
        ..Snapshot::default()
    };
    let pipe_show = format_pipes(&s, &[]);
    assert_eq!(
        pipe_show,
        format!(
            "\
00001: unlimited   10 ms burst 0
    impair: {impairments}
    hold: queue 50 slots + delay line unbounded by rate (no held_limit set)
q131073  50 sl. 0 flows (1 buckets) sched 65537 weight 0 lmax 0 pri 0 droptail
 sched 65537 type FIFO flags 0x0 0 buckets 0 active
"
        )
    );
    assert_eq!(
        format_scheds(&s, &[1]),
        format!(
            "\
00001: unlimited   10 ms burst 0
    impair: {impairments}
 sched 1 type WF2Q+ flags 0x0 0 buckets 0 active
"
        )
    );
    // What `show` prints reads back as the same link.
    let shown = pipe_show.lines().nth(1).unwrap();
    let words = shown.trim_start().strip_prefix("impair: ").unwrap();
    assert_eq!(
        parsed_link(&format!("delay 10ms {words}"), &dir),
        s.links[0].config
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn impairment_lines_hold_only_what_is_set() {
    let dir = std::env::temp_dir();
    for (words, line) in [
        ("delay 10ms 1ms", "    impair: jitter 1ms\n"),
        ("delay 10ms reorder 5%", "    impair: reorder 5%\n"),
        (
            "delay 10ms reorder 5% 50% gap 1",
            "    impair: reorder 5% correlation 50%\n",
        ),
        ("overhead -4", "    impair: overhead -4\n"),
        ("slot 1ms", "    impair: slot 1ms\n"),
        // Flowset options leave the link's lines alone.
        ("delay 10ms loss 1% duplicate 1% corrupt 1%", ""),
        ("delay 10ms", ""),
    ] {
        let config = parsed_link(words, &dir);
        let s = Snapshot {
            links: vec![LinkView { number: 1, config }],
            ..Snapshot::default()
        };
        let shown = format_pipes(&s, &[]);
        let (_, rest) = shown.split_once('\n').unwrap();
        assert_eq!(rest, line, "{words}");
    }
}

/// Issue 25 item 9: the queues of a flowset feeding FQ-CoDel are the
/// scheduler's sub-queues, not flows; `queue show` lists them by index
/// under a header that says so, not as made-up addresses (`0.0.1.52/0`).
#[test]
fn queue_show_lists_fq_codel_sub_queues_by_index() {
    use dummynet_engine::flow::proto;
    use dummynet_engine::sched::bucket_of;
    use dummynet_engine::{Direction, PacketInfo};
    let mut e: dummynet_engine::Engine<u64> = dummynet_engine::Engine::new(1);
    for line in [
        "pipe 1 config bw 1Mbit/s",
        "sched 1 config pipe 1 type fq_codel",
        "queue 1 config sched 1",
        "add 100 queue 1 ip from any to any",
    ] {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        e.apply(0, c).unwrap();
    }
    let keys: Vec<FlowKey> = (0..3)
        .map(|i| {
            FlowKey::v4(
                [10, 0, 0, 1].into(),
                [10, 0, 0, 2].into(),
                proto::UDP,
                5000 + i,
                80,
            )
        })
        .collect();
    for (n, key) in keys.iter().enumerate() {
        let info = PacketInfo {
            len: 1000,
            key: *key,
            dir: Direction::In,
            recv_if: None,
            xmit_if: None,
        };
        e.input(0, info, n as u64);
    }
    let shown = format_queues(&e.snapshot(), &[]);
    let mut buckets: Vec<u32> = keys.iter().map(|k| bucket_of(k, 1024)).collect();
    buckets.sort();
    buckets.dedup();
    assert_eq!(
        buckets.len(),
        3,
        "three flows, three sub-queues: {buckets:?}"
    );
    let mut want =
        "q00001  50 sl. 3 flows (1 buckets) sched 1 weight 1 lmax 0 pri 0 droptail\n    \
         FQ_CODEL sub-queues of sched 1 (each 5-tuple hashed to one), by index:\n\
         BKT Sub-queue Tot_pkt/bytes Pkt/Byte Drp\n"
            .to_string();
    // The first packet went straight onto the idle link; the others wait.
    for (i, b) in buckets.iter().enumerate() {
        let k = keys.iter().position(|k| bucket_of(k, 1024) == *b).unwrap();
        let (len_pkts, len_bytes) = if k == 0 { (0, 0) } else { (1, 1000) };
        want += &format!("{i:3} {b:>9}    1     1000 {len_pkts:2} {len_bytes:4}   0\n");
    }
    assert_eq!(shown, want);
}
