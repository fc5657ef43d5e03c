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
    format_pipes, format_queues, format_rules, format_scheds, parse_command, Statement,
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
        limit,
        plr: Probability::ZERO,
        mask: FlowMask::default(),
        buckets: DEFAULT_BUCKETS,
        aqm: "droptail".into(),
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
    }
}

fn default_rule(packets: u64, bytes: u64) -> RuleView {
    let spec = RuleSpec {
        number: Some(65535),
        action: Action::Deny,
        prob: None,
        body: vec![],
    };
    RuleView {
        number: 65535,
        spec,
        packets,
        bytes,
        last_match: None,
        is_default: true,
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
q00100  50 sl. 2 flows (64 buckets) sched 1 weight 69 lmax 0 pri 0 droptail
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
   quantum 1514 flows 1024
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
    let s = Snapshot {
        rules: vec![default_rule(3, 180)],
        settings: Settings {
            default_to_accept: true,
            ..Settings::default()
        },
        ..Snapshot::default()
    };
    assert_eq!(
        format_rules(&s, &[], true, false),
        "65535 3 180 allow ip from any to any\n"
    );
    assert_eq!(format_rules(&Snapshot::default(), &[], true, false), "");
}
