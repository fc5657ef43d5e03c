//! The seeds' scenarios at engine level: seed 004's FIFO vs WF2Q+ under a
//! UDP flood, and delay profiles.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::flow::proto;
use dummynet_engine::{Command, Direction, DropReason, FlowMask, Nanos, PacketInfo, Target};

const CLIENT_NET: AddrMatch = AddrMatch {
    addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, 0)),
    prefix: 24,
};

fn out_from_client(proto_cond: Option<u8>) -> Vec<Cond> {
    let mut body = Vec::new();
    if let Some(p) = proto_cond {
        body.push(Cond::new(CondKind::Proto(p)));
    }
    body.push(Cond::new(CondKind::SrcAddr(vec![CLIENT_NET])));
    body.push(Cond::new(CondKind::Dir(Direction::Out)));
    body
}

fn client(proto: u8, sport: u16, len: u32) -> PacketInfo {
    let mut p = udp([10, 0, 1, 2], [10, 0, 2, 2], sport, 5201, len);
    p.key.proto = proto;
    p.dir = Direction::Out;
    p
}

/// Seed 004: `pipe 1 config bw 10MBit/s delay 10ms`, FIFO by default.
fn fifo_router(h: &mut Harness) {
    h.apply(pipe(1, 10_000_000, 10 * MS));
    h.apply(rule(1000, Action::Pipe(1), out_from_client(None)));
}

/// Seed 004's WF2Q+ setup: queues weighted 69/30/1 with `mask all`.
fn wf2q_router(h: &mut Harness) {
    h.apply(pipe(1, 10_000_000, 10 * MS));
    h.apply(Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some("wf2q+".into()),
            ..Default::default()
        },
    ));
    for (q, w) in [(100, 69), (200, 30), (300, 1)] {
        let fs = FlowsetConfig {
            weight: w,
            mask: FlowMask::ALL,
            ..Default::default()
        };
        h.apply(Command::ConfigQueue(
            q,
            QueueConfig {
                sched: Some(1),
                flowset: fs,
            },
        ));
    }
    h.apply(rule(
        1000,
        Action::Queue(100),
        out_from_client(Some(proto::TCP)),
    ));
    h.apply(rule(
        1001,
        Action::Queue(200),
        out_from_client(Some(proto::UDP)),
    ));
    h.apply(rule(
        1002,
        Action::Queue(300),
        out_from_client(Some(proto::ICMP)),
    ));
}

/// A 1000 Mbit/s-style UDP flood (here 20 Mbit/s, twice the link, enough to
/// keep any queue full), optionally a saturating TCP-like flow, and a ping
/// every 100 ms for 10 s. Returns (ping ids, udp ids, tcp ids).
fn load(h: &mut Harness, tcp: bool) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let (mut pings, mut udps, mut tcps) = (Vec::new(), Vec::new(), Vec::new());
    let step: Nanos = 600 * US; // 1500 B every 0.6 ms = 20 Mbit/s
    let end = 10 * SEC;
    let mut t = 0;
    let mut next_ping = 50 * MS;
    while t < end {
        udps.push(h.send(t, client(proto::UDP, 4000, 1500)));
        if tcp {
            tcps.push(h.send(t + 1, client(proto::TCP, 5000, 1500)));
        }
        if t + step > next_ping {
            pings.push(h.send(next_ping, client(proto::ICMP, 0, 84)));
            next_ping += 100 * MS;
        }
        t += step;
    }
    h.finish();
    (pings, udps, tcps)
}

#[test]
fn seed004_fifo_loses_pings_under_a_udp_flood() {
    let mut h = Harness::new(4);
    fifo_router(&mut h);
    let (pings, _, _) = load(&mut h, false);
    let lost = pings
        .iter()
        .filter(|&&id| !matches!(h.fates[id as usize], Some(Fate::Delivered { .. })))
        .count();
    assert!(
        lost > pings.len() / 10,
        "FIFO lost only {lost} of {} pings",
        pings.len()
    );
    // The ones that get through wait behind a full 50-slot queue: ~60 ms + 10 ms.
    let rtts: Vec<Nanos> = pings
        .iter()
        .filter_map(|&id| match h.fates[id as usize] {
            Some(Fate::Delivered { at, .. }) => Some(at - h.sent[id as usize].0),
            _ => None,
        })
        .collect();
    assert!(
        rtts.iter().all(|&d| d > 50 * MS),
        "queueing delay expected: {rtts:?}"
    );
}

#[test]
fn seed004_wf2q_protects_pings_and_shares_70_30() {
    let mut h = Harness::new(4);
    wf2q_router(&mut h);
    let (pings, udps, tcps) = load(&mut h, true);
    for &id in &pings {
        let at = h.departure(id);
        let d = at - h.sent[id as usize].0;
        // WF2Q+'s delay bound for a flow of rate r_i = w_i/sum(w) * C:
        // L_i/r_i + Lmax/C. For 84 bytes at 1% of 10 Mbit/s that is 6.72 ms,
        // plus 1.2 ms for a full-size packet already on the wire, plus the
        // 10 ms of delay. (Seed 004 measured a 21 ms maximum on real hosts.)
        let bound = 10 * MS + 6_720_000 + 1_200_000;
        assert!(d <= bound, "ping waited {d} ns, bound {bound}");
    }
    // Shares of the saturated link, counted from 1 s to 10 s (the load ends
    // at 10 s; the queues drain after it).
    let bytes_after = |ids: &[u64]| -> u64 {
        ids.iter()
            .filter(|&&id| matches!(h.fates[id as usize], Some(Fate::Delivered { at, .. }) if at > SEC && at <= 10 * SEC))
            .map(|&id| u64::from(h.sent[id as usize].1.len))
            .sum()
    };
    let (tcp, udp) = (bytes_after(&tcps) as f64, bytes_after(&udps) as f64);
    let tcp_share = tcp / (tcp + udp);
    // Weights 69 and 30 (ICMP's 1 is nearly idle): 69/99 = 0.697.
    assert!(
        (tcp_share - 69.0 / 99.0).abs() < 0.005,
        "tcp share {tcp_share}"
    );
    // The link is fully used: 9 s at 10 Mbit/s.
    let total_bits = (tcp + udp) * 8.0;
    assert!(
        (total_bits / 9.0 - 10e6).abs() / 10e6 < 0.01,
        "link rate {}",
        total_bits / 9.0
    );
}

#[test]
fn wf2q_three_saturated_classes_share_69_30_1() {
    let mut h = Harness::new(4);
    wf2q_router(&mut h);
    let mut ids = [Vec::new(), Vec::new(), Vec::new()];
    let mut t = 0;
    while t < 5 * SEC {
        for (i, p) in [proto::TCP, proto::UDP, proto::ICMP]
            .into_iter()
            .enumerate()
        {
            ids[i].push(h.send(t, client(p, 1, 1000)));
        }
        t += 400 * US; // each class alone offers 20 Mbit/s
    }
    h.finish();
    let served: Vec<usize> = ids
        .iter()
        .map(|v| v.iter().filter(|&&id| matches!(h.fates[id as usize], Some(Fate::Delivered { at, .. }) if at > SEC && at <= 5 * SEC)).count())
        .collect();
    let total: usize = served.iter().sum();
    for (i, w) in [69.0, 30.0, 1.0].into_iter().enumerate() {
        let share = served[i] as f64 / total as f64;
        assert!(
            (share - w / 100.0).abs() < 0.003,
            "class {i}: share {share} for weight {w}: {served:?}"
        );
    }
}

#[test]
fn profile_extra_delay_occupies_the_link() {
    let mut h = Harness::new(1);
    let profile = Profile {
        name: "flat".into(),
        bw: None,
        loss_level: 1.0,
        samples: vec![2 * MS; 100],
    };
    let link = LinkConfig {
        bw: 1_000_000,
        delay: 5 * MS,
        profile: Some(profile),
        ..Default::default()
    };
    h.apply(pipe_cfg(1, link, FlowsetConfig::default()));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let a = h.send(0, udp([1; 4], [2; 4], 1, 2, 125)); // 1 ms on the wire
    let b = h.send(0, udp([1; 4], [2; 4], 1, 2, 125));
    h.finish();
    // 1 ms of serialization + 2 ms of profile overhead, then 5 ms of delay.
    assert_eq!(h.departure(a), 3 * MS + 5 * MS);
    assert_eq!(h.departure(b), 6 * MS + 5 * MS);
}

#[test]
fn profile_bw_overrides_the_pipe_and_loss_level_drops() {
    let mut h = Harness::new(11);
    let profile = Profile {
        name: "lossy".into(),
        bw: Some(8_000_000),
        loss_level: 0.75,
        samples: vec![0; 100],
    };
    let link = LinkConfig {
        bw: 1_000,
        profile: Some(profile),
        ..Default::default()
    };
    h.apply(pipe_cfg(1, link, FlowsetConfig::default()));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let first = h.send(0, udp([1; 4], [2; 4], 1, 2, 1000));
    for i in 1..4000u64 {
        h.send(i * MS, udp([1; 4], [2; 4], 1, 2, 1000));
    }
    h.finish();
    // 1000 bytes at the profile's 8 Mbit/s take 1 ms (not 8 s at 1 kbit/s).
    match h.fates[first as usize] {
        Some(Fate::Delivered { at, .. }) | Some(Fate::Dropped { at, .. }) => assert_eq!(at, MS),
        None => panic!("no fate"),
    }
    let lost = h.dropped(DropReason::ProfileLoss);
    // A quarter of the samples are at or above the loss level: sd ~ 27.
    assert!((890..=1110).contains(&lost), "profile losses {lost}");
    let snap = h.e.snapshot();
    let fifo = snap
        .scheds
        .iter()
        .find(|s| s.number == 1 + DN_MAX_ID)
        .unwrap();
    assert_eq!(fifo.instances[0].counters.drops as usize, lost);
}

#[test]
fn unlinked_queue_packets_and_targets_in_outputs() {
    let mut h = Harness::new(1);
    h.apply(pipe(2, 0, MS));
    h.apply(Command::ConfigQueue(
        7,
        QueueConfig {
            sched: Some(2),
            flowset: FlowsetConfig::default(),
        },
    ));
    h.apply(rule(100, Action::Queue(7), vec![]));
    h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    h.finish();
    assert_eq!(h.outputs[0].target, Some(Target::Queue(7)));
    assert_eq!(h.outputs[0].at, MS);
}
