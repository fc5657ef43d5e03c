//! Engine behaviour on virtual time: exact departure times, drops with
//! reasons, and the conservation law after every step.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::flow::proto;
use dummynet_engine::rng::Probability;
use dummynet_engine::{
    Command, ConfigNote, Direction, DropReason, Engine, FlowMask, Nanos, PacketInfo, Target,
    Verdict,
};
use std::sync::Arc;

fn all_to_pipe(h: &mut Harness, n: u32) {
    h.apply(rule(100, Action::Pipe(n), vec![]));
}

#[test]
fn serialization_and_delay_are_exact() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 10_000_000, 10 * MS));
    all_to_pipe(&mut h, 1);
    // Three 1500-byte packets at once: each takes exactly 1.2 ms on the wire,
    // then 10 ms of delay.
    let a = h.send(0, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 1500));
    let b = h.send(0, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 1500));
    let c = h.send(0, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 1500));
    // One alone, long after: the link is idle again.
    let d = h.send(SEC, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100));
    h.finish();
    assert_eq!(h.departure(a), 11_200_000);
    assert_eq!(h.departure(b), 12_400_000);
    assert_eq!(h.departure(c), 13_600_000);
    // 100 bytes at 10 Mbit/s = 80 us.
    assert_eq!(h.departure(d), SEC + 80 * US + 10 * MS);
}

/// The `waited` counters of pipe `n`'s scheduler instances, summed (both of
/// its schedulers: the one its own queue feeds, N + 65536, and N).
fn waited(h: &Harness, n: u32) -> u64 {
    h.e.snapshot()
        .scheds
        .iter()
        .filter(|s| s.number % DN_MAX_ID == n)
        .flat_map(|s| &s.instances)
        .map(|i| i.counters.waited)
        .sum()
}

#[test]
fn packets_that_find_the_link_busy_are_counted_as_waiting() {
    // Ten back-to-back 1000-byte packets into 1 Mbit/s: the first goes
    // straight onto the idle link (8 ms on the wire), the other nine wait.
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 0));
    all_to_pipe(&mut h, 1);
    let ids: Vec<u64> = (0..10)
        .map(|_| h.send(0, udp([1; 4], [2; 4], 1, 2, 1000)))
        .collect();
    assert_eq!(waited(&h, 1), 9);
    // One alone, long after: the link is idle again, so it does not wait.
    let late = h.send(SEC, udp([1; 4], [2; 4], 1, 2, 1000));
    h.finish();
    assert_eq!(h.departure(ids[0]), 8 * MS);
    assert_eq!(h.departure(ids[9]), 80 * MS);
    assert_eq!(h.departure(late), SEC + 8 * MS);
    assert_eq!(waited(&h, 1), 9);

    // Without bandwidth nothing waits for it, delay or not.
    let mut h = Harness::new(1);
    h.apply(pipe(1, 0, 10 * MS));
    all_to_pipe(&mut h, 1);
    for _ in 0..10 {
        h.send(0, udp([1; 4], [2; 4], 1, 2, 1000));
    }
    h.finish();
    assert_eq!(h.delivered(), 10);
    assert_eq!(waited(&h, 1), 0);
}

#[test]
fn each_instance_counts_the_packets_that_waited_for_its_own_link() {
    // A mask gives each host its own 1 Mbit/s link: five packets to each of
    // two hosts at once, the first of each sent at once and four waiting.
    let mut h = Harness::new(1);
    let fs = FlowsetConfig {
        mask: FlowMask {
            dst_ip: 0xff,
            ..FlowMask::default()
        },
        ..Default::default()
    };
    h.apply(pipe_cfg(
        1,
        LinkConfig {
            bw: 1_000_000,
            ..Default::default()
        },
        fs,
    ));
    all_to_pipe(&mut h, 1);
    for _ in 0..5 {
        for host in [1, 2] {
            h.send(0, udp([1; 4], [10, 0, 0, host], 1, 2, 1000));
        }
    }
    h.finish();
    let snap = h.e.snapshot();
    let fifo = snap
        .scheds
        .iter()
        .find(|s| s.number == 1 + DN_MAX_ID)
        .unwrap();
    assert_eq!(fifo.instances.len(), 2);
    assert!(
        fifo.instances.iter().all(|i| i.counters.waited == 4),
        "{:?}",
        fifo.instances
    );
    assert_eq!(waited(&h, 1), 8);
}

#[test]
fn fractional_bit_times_carry_without_drift() {
    // 128-byte packets at 1 Gbit/s take 1024 ns each; at 3 Mbit/s a 1-byte
    // packet takes 2666.67 ns: 3 of them take exactly 8000 ns.
    let mut h = Harness::new(1);
    h.apply(pipe(1, 3_000_000, 0));
    all_to_pipe(&mut h, 1);
    let ids: Vec<u64> = (0..3)
        .map(|_| h.send(0, udp([1; 4], [2; 4], 1, 2, 1)))
        .collect();
    h.finish();
    assert_eq!(h.departure(ids[0]), 2667);
    assert_eq!(h.departure(ids[1]), 5334);
    assert_eq!(h.departure(ids[2]), 8000);
}

#[test]
fn unlimited_pipe_with_delay_only() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 0, 10 * MS));
    all_to_pipe(&mut h, 1);
    let a = h.send(5, udp([1; 4], [2; 4], 1, 2, 1500));
    let b = h.send(5, udp([1; 4], [2; 4], 1, 2, 1500));
    let c = h.send(7 * MS, udp([1; 4], [2; 4], 1, 2, 64));
    h.finish();
    assert_eq!(h.departure(a), 5 + 10 * MS);
    assert_eq!(h.departure(b), 5 + 10 * MS);
    assert_eq!(h.departure(c), 17 * MS);
}

#[test]
fn burst_lets_an_idle_link_send_at_line_speed() {
    let mut h = Harness::new(1);
    // 1 Mbit/s with a 3000-byte burst: after a long idle time the first 3000
    // bytes leave at once; the third packet overdraws and takes its 12 ms.
    let link = LinkConfig {
        bw: 1_000_000,
        burst: 3000,
        ..Default::default()
    };
    h.apply(pipe_cfg(1, link, FlowsetConfig::default()));
    all_to_pipe(&mut h, 1);
    let t = 10 * SEC;
    let ids: Vec<u64> = (0..4)
        .map(|_| h.send(t, udp([1; 4], [2; 4], 1, 2, 1500)))
        .collect();
    h.finish();
    assert_eq!(h.departure(ids[0]), t);
    assert_eq!(h.departure(ids[1]), t);
    assert_eq!(h.departure(ids[2]), t + 12 * MS);
    assert_eq!(h.departure(ids[3]), t + 24 * MS);
}

#[test]
fn queue_overflow_counts_exactly() {
    let mut h = Harness::new(1);
    let fs = FlowsetConfig {
        limit: QueueLimit::Slots(5),
        ..Default::default()
    };
    h.apply(pipe_cfg(
        1,
        LinkConfig {
            bw: 1_000_000,
            ..Default::default()
        },
        fs,
    ));
    all_to_pipe(&mut h, 1);
    for _ in 0..20 {
        h.send(0, udp([1; 4], [2; 4], 1, 2, 1000));
    }
    h.finish();
    // The first goes straight onto the wire; five wait; fourteen overflow.
    assert_eq!(h.delivered(), 6);
    assert_eq!(h.dropped(DropReason::QueueFull), 14);
    let snap = h.e.snapshot();
    let fs = snap
        .flowsets
        .iter()
        .find(|f| f.number == 1 + 2 * DN_MAX_ID)
        .unwrap();
    assert_eq!(fs.flows[0].counters.drops, 14);
    assert_eq!(fs.flows[0].counters.tot_pkts, 20);
}

#[test]
fn byte_limited_queue_follows_freebsd() {
    // FreeBSD drops when the bytes already queued exceed the limit, so the
    // queue can overshoot by one packet.
    let mut h = Harness::new(1);
    let fs = FlowsetConfig {
        limit: QueueLimit::Bytes(2500),
        ..Default::default()
    };
    h.apply(pipe_cfg(
        1,
        LinkConfig {
            bw: 1_000_000,
            ..Default::default()
        },
        fs,
    ));
    all_to_pipe(&mut h, 1);
    for _ in 0..10 {
        h.send(0, udp([1; 4], [2; 4], 1, 2, 1000));
    }
    h.finish();
    // 1 on the wire, then queued 0→1000→2000→3000 bytes; the 5th sees 3000 > 2500.
    assert_eq!(h.delivered(), 4);
    assert_eq!(h.dropped(DropReason::QueueFull), 6);
}

#[test]
fn plr_is_within_statistical_bounds_and_reproducible() {
    let run = |seed| {
        let mut h = Harness::new(seed);
        let fs = FlowsetConfig {
            plr: Probability::new(0.1).unwrap(),
            ..Default::default()
        };
        h.apply(pipe_cfg(1, LinkConfig::default(), fs));
        all_to_pipe(&mut h, 1);
        for i in 0..10_000u64 {
            h.send(i * US, udp([1; 4], [2; 4], 1, 2, 100));
        }
        h.finish();
        (h.dropped(DropReason::Plr), h.fates.clone())
    };
    let (drops, fates) = run(7);
    // Binomial(10000, 0.1): sd = 30; allow 4 sd.
    assert!((880..=1120).contains(&drops), "plr drops {drops}");
    assert_eq!(run(7).1, fates, "same seed, same outcome");
    assert_ne!(run(8).1, fates, "another seed, another outcome");
}

#[test]
fn masked_pipe_gives_each_host_its_own_link() {
    // Seed 001: `pipe 4 config bw 300Kbit/s queue 20 mask dst-ip 0x000000ff`.
    let mut h = Harness::new(1);
    let fs = FlowsetConfig {
        limit: QueueLimit::Slots(20),
        mask: FlowMask {
            dst_ip: 0xff,
            ..FlowMask::default()
        },
        ..Default::default()
    };
    h.apply(pipe_cfg(
        4,
        LinkConfig {
            bw: 300_000,
            ..Default::default()
        },
        fs,
    ));
    h.apply(rule(
        100,
        Action::Pipe(4),
        vec![
            Cond::new(CondKind::SrcAddr(vec![AddrMatch {
                addr: "10.1.2.0".parse().unwrap(),
                prefix: 24,
            }])),
            Cond::new(CondKind::Dir(Direction::In)),
        ],
    ));
    h.apply(rule(200, Action::Allow, vec![]));
    let mut first = Vec::new();
    for host in 1..=3u8 {
        first.push(h.send(0, udp([10, 1, 2, 9], [192, 168, 0, host], 1, 2, 375)));
        h.send(0, udp([10, 1, 2, 9], [192, 168, 0, host], 1, 2, 375));
    }
    // Not from 10.1.2.0/24: not shaped.
    let other = h.send(0, udp([10, 1, 3, 9], [192, 168, 0, 1], 1, 2, 375));
    h.finish();
    // 375 bytes at 300 kbit/s = 10 ms; each host's second packet at 20 ms.
    for &id in &first {
        assert_eq!(h.departure(id), 10 * MS);
        assert_eq!(h.departure(id + 1), 20 * MS);
    }
    assert_eq!(h.departure(other), 0);
    let snap = h.e.snapshot();
    let fifo = snap
        .scheds
        .iter()
        .find(|s| s.number == 4 + DN_MAX_ID)
        .unwrap();
    assert_eq!(fifo.instances.len(), 3);
    let mut hosts: Vec<u128> = fifo.instances.iter().map(|i| i.id.dst).collect();
    hosts.sort();
    assert_eq!(hosts, vec![1, 2, 3]);
    assert!(fifo.instances.iter().all(|i| i.counters.tot_pkts == 2));
}

#[test]
fn queue_mask_makes_per_flow_queues_on_one_link() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 0));
    let fs = FlowsetConfig {
        mask: FlowMask::ALL,
        limit: QueueLimit::Slots(2),
        ..Default::default()
    };
    h.apply(Command::ConfigQueue(
        10,
        QueueConfig {
            sched: Some(1),
            flowset: fs,
        },
    ));
    h.apply(rule(100, Action::Queue(10), vec![]));
    for port in 0..4u16 {
        for _ in 0..4 {
            h.send(0, udp([1; 4], [2; 4], 1000 + port, 53, 125));
        }
    }
    h.finish();
    let snap = h.e.snapshot();
    let q = snap.flowsets.iter().find(|f| f.number == 10).unwrap();
    assert_eq!(q.flows.len(), 4, "one queue per 5-tuple");
    // All share one 1 Mbit/s link: 125 bytes = 1 ms each, served back to back.
    let mut times: Vec<u64> = h.outputs.iter().map(|o| o.at).collect();
    times.sort();
    for (i, t) in times.iter().enumerate() {
        assert_eq!(*t, (i as u64 + 1) * MS);
    }
    // Per queue: one on the wire (first flow only) or none, plus 2 slots.
    let drops: u64 = q.flows.iter().map(|f| f.counters.drops).sum();
    assert_eq!(drops as usize, h.dropped(DropReason::QueueFull));
    assert_eq!(h.delivered() + h.dropped(DropReason::QueueFull), 16);
}

#[test]
fn one_pass_on_accepts_after_the_pipe() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 0, MS));
    all_to_pipe(&mut h, 1);
    h.apply(rule(200, Action::Deny, vec![]));
    let id = h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    h.finish();
    assert_eq!(
        h.fates[id as usize],
        Some(Fate::Delivered { at: MS, rule: 100 })
    );
}

#[test]
fn one_pass_off_reenters_after_the_rule() {
    let mut h = Harness::new(1);
    h.apply(Command::Set(Setting::OnePass(false)));
    h.apply(pipe(1, 0, MS));
    h.apply(pipe(2, 0, 2 * MS));
    all_to_pipe(&mut h, 1);
    // Cascade: after pipe 1 the packet meets rule 150 (pipe 2), then 200.
    h.apply(rule(
        150,
        Action::Pipe(2),
        vec![Cond::new(CondKind::Proto(proto::UDP))],
    ));
    h.apply(rule(
        200,
        Action::Deny,
        vec![Cond::new(CondKind::Proto(proto::TCP))],
    ));
    h.apply(rule(300, Action::Allow, vec![]));
    let u = h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    let t = h.send(0, with_proto(udp([1; 4], [2; 4], 1, 2, 100), proto::TCP));
    h.finish();
    assert_eq!(
        h.fates[u as usize],
        Some(Fate::Delivered {
            at: 3 * MS,
            rule: 300
        })
    );
    assert_eq!(
        h.fates[t as usize],
        Some(Fate::Dropped {
            at: MS,
            reason: DropReason::RuleDeny
        })
    );
    let snap = h.e.snapshot();
    let r150 = snap.rules.iter().find(|r| r.number == 150).unwrap();
    assert_eq!(r150.packets, 1);
}

#[test]
fn skipto_count_and_first_match() {
    let mut h = Harness::new(1);
    h.apply(rule(50, Action::Count, vec![]));
    h.apply(rule(
        100,
        Action::Skipto(300),
        vec![Cond::new(CondKind::Proto(proto::UDP))],
    ));
    h.apply(rule(200, Action::Deny, vec![]));
    h.apply(rule(300, Action::Allow, vec![]));
    let u = h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    let t = h.send(0, with_proto(udp([1; 4], [2; 4], 1, 2, 100), proto::TCP));
    h.finish();
    assert_eq!(
        h.fates[u as usize],
        Some(Fate::Delivered { at: 0, rule: 300 })
    );
    assert_eq!(
        h.fates[t as usize],
        Some(Fate::Dropped {
            at: 0,
            reason: DropReason::RuleDeny
        })
    );
    let snap = h.e.snapshot();
    let count: Vec<(u16, u64, u64)> = snap
        .rules
        .iter()
        .map(|r| (r.number, r.packets, r.bytes))
        .collect();
    assert_eq!(
        count,
        vec![
            (50, 2, 200),
            (100, 1, 100),
            (200, 1, 100),
            (300, 1, 100),
            (65535, 0, 0)
        ]
    );
}

/// A `skipto` to its own number or back is taken, as FreeBSD takes it, and
/// goes on at the next rule (ip_fw2.c never jumps back).
#[test]
fn a_skipto_back_goes_on_at_the_next_rule() {
    let mut h = Harness::new(1);
    h.apply(rule(100, Action::Count, vec![]));
    h.apply(rule(200, Action::Skipto(100), vec![]));
    h.apply(rule(300, Action::Skipto(300), vec![]));
    h.apply(rule(400, Action::Allow, vec![]));
    let p = h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    h.finish();
    assert_eq!(
        h.fates[p as usize],
        Some(Fate::Delivered { at: 0, rule: 400 })
    );
    let counted: Vec<(u16, u64)> =
        h.e.snapshot()
            .rules
            .iter()
            .map(|r| (r.number, r.packets))
            .collect();
    // Each rule once: no loop back to 100.
    assert_eq!(
        counted,
        vec![(100, 1), (200, 1), (300, 1), (400, 1), (65535, 0)]
    );
}

/// Rules added without a number: 100 past the highest, while that stays
/// below the default rule; after that, the highest's own number (FreeBSD's
/// `autoinc_step` rule), in the order added.
#[test]
fn automatic_rule_numbers_follow_freebsd_up_to_65534() {
    let mut h = Harness::new(1);
    let auto = |action| {
        Command::AddRule(RuleSpec {
            number: None,
            action,
            prob: None,
            extra: Default::default(),
            body: vec![],
        })
    };
    h.apply(auto(Action::Count));
    h.apply(rule(65400, Action::Count, vec![]));
    h.apply(auto(Action::Count));
    h.apply(auto(Action::Count));
    h.apply(rule(65534, Action::Count, vec![]));
    h.apply(auto(Action::Allow));
    let numbers: Vec<u16> = h.e.snapshot().rules.iter().map(|r| r.number).collect();
    assert_eq!(numbers, vec![100, 65400, 65500, 65500, 65534, 65534, 65535]);
    let last = h.e.snapshot().rules[5].spec.action;
    assert_eq!(
        last,
        Action::Allow,
        "the newest 65534 comes after the older one"
    );
}

#[test]
fn default_rule_both_ways() {
    let mut h = Harness::new(1);
    let a = h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    h.apply(Command::Set(Setting::DefaultToAccept(true)));
    let b = h.send(1, udp([1; 4], [2; 4], 1, 2, 100));
    h.finish();
    assert_eq!(
        h.fates[a as usize],
        Some(Fate::Dropped {
            at: 0,
            reason: DropReason::RuleDeny
        })
    );
    assert_eq!(
        h.fates[b as usize],
        Some(Fate::Delivered { at: 1, rule: 65535 })
    );
    assert!(h.e.apply(0, Command::DeleteRules(vec![65535])).is_err());
}

#[test]
fn rules_without_numbers_and_with_shared_numbers() {
    let mut h = Harness::new(1);
    let add = |n: Option<u16>, a: Action| {
        Command::AddRule(RuleSpec {
            number: n,
            action: a,
            prob: None,
            extra: Default::default(),
            body: vec![],
        })
    };
    h.apply(add(None, Action::Count));
    h.apply(add(Some(1000), Action::Count));
    h.apply(add(None, Action::Count));
    h.apply(add(Some(1000), Action::Allow));
    let nums: Vec<(u16, Action)> =
        h.e.snapshot()
            .rules
            .iter()
            .map(|r| (r.number, r.spec.action))
            .collect();
    assert_eq!(
        nums,
        vec![
            (100, Action::Count),
            (1000, Action::Count),
            (1000, Action::Allow),
            (1100, Action::Count),
            (65535, Action::Deny)
        ]
    );
    h.apply(Command::DeleteRules(vec![1000]));
    assert_eq!(h.e.snapshot().rules.len(), 3);
    assert!(h.e.apply(0, Command::DeleteRules(vec![1000])).is_err());
}

#[test]
fn prob_rule_matches_a_fraction() {
    let mut h = Harness::new(3);
    h.apply(Command::AddRule(RuleSpec {
        number: Some(100),
        action: Action::Deny,
        prob: Some(Probability::new(0.3).unwrap()),
        body: vec![],
        extra: Default::default(),
    }));
    h.apply(rule(200, Action::Allow, vec![]));
    for i in 0..10_000 {
        h.send(i, udp([1; 4], [2; 4], 1, 2, 10));
    }
    h.finish();
    let denied = h.dropped(DropReason::RuleDeny);
    assert!((2_820..=3_180).contains(&denied), "denied {denied}");
}

#[test]
fn missing_pipe_and_unlinked_queue_drop_with_reasons() {
    let mut h = Harness::new(1);
    h.apply(rule(
        100,
        Action::Pipe(9),
        vec![Cond::new(CondKind::Proto(proto::UDP))],
    ));
    h.apply(rule(200, Action::Queue(5), vec![]));
    h.apply(Command::ConfigQueue(
        5,
        QueueConfig {
            sched: Some(7),
            flowset: FlowsetConfig::default(),
        },
    ));
    let a = h.send(0, udp([1; 4], [2; 4], 1, 2, 100));
    let b = h.send(0, with_proto(udp([1; 4], [2; 4], 1, 2, 100), proto::TCP));
    assert_eq!(
        h.fates[a as usize],
        Some(Fate::Dropped {
            at: 0,
            reason: DropReason::NoSuchTarget
        })
    );
    assert_eq!(
        h.fates[b as usize],
        Some(Fate::Dropped {
            at: 0,
            reason: DropReason::Unlinked
        })
    );
    // The scheduler appears: the queue links up.
    h.apply(Command::ConfigSched(
        7,
        SchedConfig {
            kind: Some("fifo".into()),
            ..Default::default()
        },
    ));
    let c = h.send(1, with_proto(udp([1; 4], [2; 4], 1, 2, 100), proto::TCP));
    h.finish();
    assert_eq!(
        h.fates[c as usize],
        Some(Fate::Delivered { at: 1, rule: 200 })
    );
}

#[test]
fn reconfiguring_a_busy_pipe_keeps_its_packets() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 5 * MS));
    all_to_pipe(&mut h, 1);
    for _ in 0..40 {
        h.send(0, udp([1; 4], [2; 4], 1, 2, 1250)); // 10 ms each at 1 Mbit/s
    }
    let queued_before = h.e.totals().inside;
    assert!(queued_before > 30);
    // Faster link, longer delay, bigger queue, then a scheduler type change.
    let fs = FlowsetConfig {
        limit: QueueLimit::Slots(100),
        ..Default::default()
    };
    h.apply_at(
        25 * MS,
        pipe_cfg(
            1,
            LinkConfig {
                bw: 10_000_000,
                delay: 20 * MS,
                ..Default::default()
            },
            fs,
        ),
    );
    h.apply_at(
        30 * MS,
        Command::ConfigSched(
            1,
            SchedConfig {
                kind: Some("fifo".into()),
                ..Default::default()
            },
        ),
    );
    h.finish();
    let t = h.e.totals();
    assert_eq!(t.dropped(), 0, "no queued packet is lost");
    assert_eq!(h.delivered(), 40);
    // FIFO order is kept across the reconfiguration.
    let order: Vec<u64> = h
        .outputs
        .iter()
        .filter(|o| o.drop.is_none())
        .map(|o| o.payload)
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
}

#[test]
fn deleting_a_pipe_drops_what_it_held_with_a_reason() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 0));
    all_to_pipe(&mut h, 1);
    for _ in 0..5 {
        h.send(0, udp([1; 4], [2; 4], 1, 2, 1250));
    }
    h.apply_at(MS, Command::DeletePipes(vec![1]));
    h.finish();
    // The first packet was on the wire (in the delay line, until the end of
    // its transmission) and four were queued: FreeBSD frees both.
    assert_eq!(h.delivered(), 0);
    assert_eq!(h.dropped(DropReason::Deleted), 5);
    assert!(h.e.apply(0, Command::DeletePipes(vec![1])).is_err());
}

/// Issue 25 item 3: `pipe N delete`, `sched N delete` and `pipe flush`
/// drop everything the pipe held, its delay line too (plain, with packets
/// that may overtake, or a trace's packet in transmission), at once and as
/// `deleted`; the pipe's instances are freed with it.
#[test]
fn deleting_a_pipe_drops_its_delay_line_at_once() {
    let trace = Arc::new(Trace {
        name: "t".into(),
        times: vec![MS, 2 * MS],
        mode: TraceMode::Loop,
    });
    let links = [
        (
            "plain",
            LinkConfig {
                bw: 1_000_000,
                delay: 10 * SEC,
                ..Default::default()
            },
        ),
        (
            "unordered jitter",
            LinkConfig {
                bw: 1_000_000,
                delay: 10 * SEC,
                jitter: Some(Jitter {
                    amount: MS,
                    correlation: Probability::ZERO,
                    distribution: Distribution::Uniform,
                    unordered: true,
                }),
                ..Default::default()
            },
        ),
        (
            "trace",
            LinkConfig {
                delay: 10 * SEC,
                trace: Some(trace),
                ..Default::default()
            },
        ),
    ];
    let deletes = [
        Command::DeletePipes(vec![1]),
        Command::DeleteScheds(vec![1]),
        Command::FlushDummynet,
    ];
    for (name, link) in links {
        for delete in &deletes {
            let mut h = Harness::new(1);
            h.apply(pipe_cfg(1, link.clone(), FlowsetConfig::default()));
            // Sched 1 carries what `queue 5` sends; pipe 1's own queue
            // feeds sched 65537.
            h.apply(Command::ConfigQueue(
                5,
                QueueConfig {
                    sched: Some(1),
                    ..Default::default()
                },
            ));
            h.apply(rule(100, Action::Queue(5), vec![]));
            // 4 ms apart: 500 bytes take 4 ms at 1 Mbit/s, so each is past
            // the link (in the delay line) by the next.
            for i in 0..75 {
                h.send(i * 4 * MS, udp([1; 4], [2; 4], 1, 2, 500));
            }
            // A trace link sends 3008 bytes per 2 ms: some of the 3000-byte
            // packets wait in the queue, one is in transmission.
            if name == "trace" {
                for i in 0..5 {
                    h.send(299 * MS + i, udp([1; 4], [2; 4], 1, 2, 3000));
                }
            }
            h.apply_at(300 * MS, delete.clone());
            let t = h.e.totals();
            assert_eq!(t.inside, 0, "{name}, {delete:?}: {t:?}");
            assert_eq!(h.e.memory().instances, 0, "{name}, {delete:?}");
            h.finish();
            let sent = h.sent.len();
            assert_eq!(h.delivered(), 0, "{name}, {delete:?}");
            assert_eq!(h.dropped(DropReason::Deleted), sent, "{name}, {delete:?}");
            assert!(h
                .fates
                .iter()
                .all(|f| matches!(f, Some(Fate::Dropped { at, .. }) if *at == 300 * MS)));
        }
    }
}

/// `queue N delete` drops the queue's packets; what its scheduler already
/// took belongs to the scheduler and leaves after its delay, as in
/// FreeBSD (the delay line is the scheduler instance's).
#[test]
fn deleting_a_queue_keeps_its_schedulers_delay_line() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 10 * SEC));
    h.apply(Command::ConfigQueue(
        5,
        QueueConfig {
            sched: Some(1),
            ..Default::default()
        },
    ));
    h.apply(rule(100, Action::Queue(5), vec![]));
    // 1250 bytes take 10 ms: at 15 ms two are past the link, three queued.
    for _ in 0..5 {
        h.send(0, udp([1; 4], [2; 4], 1, 2, 1250));
    }
    h.apply_at(15 * MS, Command::DeleteQueues(vec![5]));
    assert_eq!(h.e.totals().inside, 2);
    h.finish();
    assert_eq!(h.dropped(DropReason::Deleted), 3);
    assert_eq!(h.delivered(), 2);
}

#[test]
fn rejected_commands_change_nothing() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 0));
    let before = h.e.snapshot();
    let bad = [
        Command::ConfigPipe(0, PipeConfig::default()),
        Command::ConfigPipe(70000, PipeConfig::default()),
        pipe_cfg(
            1,
            LinkConfig::default(),
            FlowsetConfig {
                weight: 0,
                ..Default::default()
            },
        ),
        pipe_cfg(
            1,
            LinkConfig::default(),
            FlowsetConfig {
                limit: QueueLimit::Slots(101),
                ..Default::default()
            },
        ),
        pipe_cfg(
            1,
            LinkConfig {
                delay: 7200 * SEC,
                ..Default::default()
            },
            FlowsetConfig::default(),
        ),
        Command::ConfigSched(
            1,
            SchedConfig {
                kind: Some("nope".into()),
                ..Default::default()
            },
        ),
        Command::DeleteQueues(vec![3]),
        Command::ZeroRules(vec![42]),
        rule(65535, Action::Allow, vec![]),
    ];
    for cmd in bad {
        assert!(h.e.apply(0, cmd.clone()).is_err(), "{cmd:?} accepted");
        assert_eq!(h.e.snapshot(), before, "{cmd:?} changed state");
    }
    // Raising the slot limit makes the big queue acceptable.
    h.apply(Command::Set(Setting::PipeSlotLimit(1000)));
    h.apply(pipe_cfg(
        1,
        LinkConfig::default(),
        FlowsetConfig {
            limit: QueueLimit::Slots(1000),
            ..Default::default()
        },
    ));
}

#[test]
fn interfaces_and_directions_in_rules() {
    let mut h = Harness::new(1);
    h.apply(rule(
        100,
        Action::Deny,
        vec![Cond::new(CondKind::Recv(IfaceSpec::Name("eth1".into())))],
    ));
    h.apply(rule(
        200,
        Action::Allow,
        vec![Cond::new(CondKind::Dir(Direction::In))],
    ));
    let eth1 = h.e.iface("eth1");
    let eth0 = h.e.iface("eth0");
    let mut p = udp([1; 4], [2; 4], 1, 2, 100);
    p.recv_if = Some(eth1);
    let a = h.send(0, p);
    p.recv_if = Some(eth0);
    let b = h.send(0, p);
    p.dir = Direction::Out;
    let c = h.send(0, p);
    h.finish();
    assert!(matches!(h.fates[a as usize], Some(Fate::Dropped { .. })));
    assert!(matches!(
        h.fates[b as usize],
        Some(Fate::Delivered { rule: 200, .. })
    ));
    assert!(matches!(h.fates[c as usize], Some(Fate::Dropped { .. })));
}

#[test]
fn verdict_names_the_target() {
    let mut h = Harness::new(1);
    h.apply(pipe(3, 0, MS));
    h.apply(rule(100, Action::Pipe(3), vec![]));
    let v = h.e.input(0, udp([1; 4], [2; 4], 1, 2, 100), 0);
    assert_eq!(
        v,
        dummynet_engine::Verdict::Queued {
            rule: 100,
            target: Target::Pipe(3)
        }
    );
}

/// A pipe with `mask src-ip 0xffffffff` at 1 Mbit/s, and 100 hosts that each
/// send one 125-byte packet (1 ms on the wire) at time 0.
fn hundred_hosts(expire: bool) -> Harness {
    let mut h = Harness::new(1);
    h.apply(Command::Set(Setting::Expire(expire)));
    let fs = FlowsetConfig {
        mask: FlowMask {
            src_ip: 0xffff_ffff,
            ..FlowMask::default()
        },
        ..Default::default()
    };
    h.apply(pipe_cfg(
        1,
        LinkConfig {
            bw: 1_000_000,
            ..Default::default()
        },
        fs,
    ));
    all_to_pipe(&mut h, 1);
    for host in 0..100u8 {
        h.send(0, udp([10, 0, 0, host], [10, 0, 1, 1], 1, 2, 125));
    }
    h
}

fn flows_of(h: &Harness, fs: u32) -> usize {
    let snap = h.e.snapshot();
    snap.flowsets
        .iter()
        .find(|f| f.number == fs)
        .map_or(0, |f| f.flows.len())
}

#[test]
fn idle_flows_expire_after_a_second_and_busy_ones_stay() {
    let mut h = hundred_hosts(true);
    let fs = 1 + 2 * DN_MAX_ID;
    assert_eq!(flows_of(&h, fs), 100);
    // Host 0 keeps sending every 100 ms; the others went quiet at 0 and their
    // packets left by 100 ms.
    let mut t = 0;
    while t < 2_500 * MS {
        t += 100 * MS;
        h.send(t, udp([10, 0, 0, 0], [10, 0, 1, 1], 1, 2, 125));
    }
    h.finish();
    // Sweeps ran at 1 s (everyone had sent since the start) and at 2 s (99
    // flows had not since the first sweep).
    let snap = h.e.snapshot();
    let flows = &snap.flowsets.iter().find(|f| f.number == fs).unwrap().flows;
    assert_eq!(flows.len(), 1, "only the busy host keeps its queue");
    assert_eq!(flows[0].id.src, 0x0a00_0000);
    assert_eq!(flows[0].counters.tot_pkts, 26);
    // The link's packet counts are unaffected, and nothing was lost.
    assert_eq!(h.delivered(), 125);
}

#[test]
fn with_expire_off_idle_flows_stay() {
    let mut h = hundred_hosts(false);
    h.send(5_000 * MS, udp([10, 0, 0, 0], [10, 0, 1, 1], 1, 2, 125));
    h.finish();
    assert_eq!(flows_of(&h, 1 + 2 * DN_MAX_ID), 100);
}

#[test]
fn idle_scheduler_instances_expire_too() {
    // Seed 001's per-host limit: the mask is on the pipe, so each host gets a
    // scheduler instance with its own link.
    let mut h = Harness::new(1);
    h.apply(Command::ConfigPipe(
        4,
        PipeConfig {
            link: LinkConfig {
                bw: 300_000,
                ..Default::default()
            },
            flowset: FlowsetConfig {
                mask: FlowMask {
                    dst_ip: 0xff,
                    ..FlowMask::default()
                },
                ..Default::default()
            },
            sched: None,
        },
    ));
    all_to_pipe(&mut h, 4);
    for host in 1..=3u8 {
        h.send(0, udp([10, 1, 2, 9], [192, 168, 0, host], 1, 2, 375));
    }
    let instances = |h: &Harness| {
        h.e.snapshot()
            .scheds
            .iter()
            .find(|s| s.number == 4 + DN_MAX_ID)
            .map_or(0, |s| s.instances.len())
    };
    assert_eq!(instances(&h), 3);
    // The sweep at 1.5 s sees three hosts busy since the start; the one at
    // 3 s finds them idle for a whole period and frees them.
    h.send(1_500 * MS, udp([10, 1, 2, 9], [192, 168, 0, 9], 1, 2, 375));
    assert_eq!(instances(&h), 4);
    h.send(3_000 * MS, udp([10, 1, 2, 9], [192, 168, 0, 7], 1, 2, 375));
    let snap = h.e.snapshot();
    let mut hosts: Vec<u128> = snap
        .scheds
        .iter()
        .find(|s| s.number == 4 + DN_MAX_ID)
        .unwrap()
        .instances
        .iter()
        .map(|i| i.id.dst)
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        vec![7, 9],
        "three idle hosts freed, the new one made"
    );
    assert_eq!(instances(&h), 2);
    h.finish();
    // A host that comes back starts afresh with exact timing.
    let id = h.send(4_000 * MS, udp([10, 1, 2, 9], [192, 168, 0, 1], 1, 2, 375));
    h.finish();
    assert_eq!(h.departure(id), 4_010 * MS);
}

#[test]
fn an_idle_flow_costs_less_than_256_bytes() {
    let e: dummynet_engine::Engine<u64> = dummynet_engine::Engine::new(1);
    for kind in dummynet_engine::sched::REGISTRY {
        let bytes = e.idle_flow_bytes(kind);
        eprintln!("{}: {bytes} bytes per idle flow queue", kind.name);
        assert!(bytes < 256, "{}: {bytes} bytes per idle flow", kind.name);
    }
}

/// A uniform jitter of `amount` either way, uncorrelated, in order.
fn uniform(amount: Nanos) -> Jitter {
    Jitter {
        amount,
        correlation: Probability::ZERO,
        distribution: Distribution::Uniform,
        unordered: false,
    }
}

/// `recv NAME`.
fn recv(name: &str) -> Cond {
    Cond::new(CondKind::Recv(IfaceSpec::Name(name.into())))
}

fn web_port() -> Cond {
    Cond::new(CondKind::DstPort(vec![PortRange { lo: 80, hi: 80 }]))
}

/// A live caller that sleeps until `next_output_deadline` (skipping the
/// timers at which packets only move inside the engine) sees exactly what
/// one woken at every `next_deadline` sees: the same outputs at the same
/// times, and every output at a time it was told to be awake for.
#[test]
fn waking_only_for_outputs_changes_nothing() {
    let links = [
        LinkConfig {
            bw: 10_000_000,
            delay: 10 * MS,
            ..LinkConfig::default()
        },
        LinkConfig {
            bw: 10_000_000,
            delay: 10 * MS,
            jitter: Some(uniform(3 * MS)),
            ..LinkConfig::default()
        },
        LinkConfig {
            bw: 10_000_000,
            delay: 10 * MS,
            jitter: Some(Jitter {
                distribution: Distribution::Table(
                    dummynet_engine::impair::dist::builtin("normal").unwrap(),
                ),
                ..uniform(3 * MS)
            }),
            ..LinkConfig::default()
        },
        LinkConfig {
            bw: 10_000_000,
            delay: 10 * MS,
            reorder: Some(Reorder {
                p: Correlated::new(Probability::new(0.2).unwrap(), Probability::ZERO),
                gap: 1,
            }),
            ..LinkConfig::default()
        },
        LinkConfig {
            bw: 10_000_000,
            ..LinkConfig::default()
        },
    ];
    for link in links {
        let config = [
            pipe_cfg(1, link.clone(), FlowsetConfig::default()),
            pipe_cfg(
                2,
                LinkConfig {
                    bw: 3_000_000,
                    delay: 2 * MS,
                    ..LinkConfig::default()
                },
                FlowsetConfig::default(),
            ),
            rule(
                100,
                Action::Pipe(1),
                vec![Cond::new(CondKind::DstPort(vec![PortRange {
                    lo: 80,
                    hi: 80,
                }]))],
            ),
            rule(200, Action::Pipe(2), vec![]),
        ];
        // Bursts to both pipes, 300 packets over about 60 ms.
        let sends: Vec<(Nanos, PacketInfo)> = (0..300u64)
            .map(|i| {
                let t = (i / 10) * 2 * MS + (i % 10) * 50 * US;
                let port = if i % 3 == 0 { 443 } else { 80 };
                (t, udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, port, 1000))
            })
            .collect();
        let every = drive(&config, &sends, |e| e.next_deadline());
        let outputs_only = drive(&config, &sends, |e| e.next_output_deadline());
        assert_eq!(every.len(), 300, "{link:?}");
        assert_eq!(every, outputs_only, "{link:?}");
    }
}

/// Feeds `sends` to a fresh engine, polling only at the times `next` gives
/// (and at each input); returns (packet, time, delivered) for every output,
/// after checking that each came out at a time it was polled for.
fn drive(
    config: &[Command],
    sends: &[(Nanos, PacketInfo)],
    next: impl Fn(&Engine<u64>) -> Option<Nanos>,
) -> Vec<(u64, Nanos, bool)> {
    let mut e: Engine<u64> = Engine::new(7);
    for c in config {
        e.apply(0, c.clone()).unwrap();
    }
    let mut out = Vec::new();
    let poll = |e: &mut Engine<u64>, now: Nanos, out: &mut Vec<(u64, Nanos, bool)>| {
        while let Some(o) = e.poll(now) {
            assert_eq!(o.at, now, "an output due at {} found at {now}", o.at);
            out.push((o.payload, o.at, o.delivered()));
        }
    };
    let run_until = |e: &mut Engine<u64>, t: Nanos, out: &mut Vec<(u64, Nanos, bool)>| {
        while let Some(d) = next(e).filter(|&d| d < t) {
            poll(e, d, out);
        }
    };
    for (id, &(t, info)) in sends.iter().enumerate() {
        run_until(&mut e, t, &mut out);
        match e.input(t, info, id as u64) {
            Verdict::Queued { .. } => {}
            Verdict::Pass { payload, .. } => out.push((payload, t, true)),
            Verdict::Drop { payload, .. } => out.push((payload, t, false)),
        }
        poll(&mut e, t, &mut out);
    }
    run_until(&mut e, Nanos::MAX, &mut out);
    out.sort_unstable();
    out
}

/// `least_transit` reads the rules as a shell's or a bridge's would be
/// read: what every packet coming in on an interface must go through.
#[test]
fn least_transit_is_the_least_delay_every_incoming_packet_must_wait() {
    let shell = |e: &mut Engine<u64>| {
        e.apply(0, pipe(1, 50_000_000, 10 * MS)).unwrap();
        e.apply(0, pipe(2, 50_000_000, 7 * MS)).unwrap();
        e.apply(0, rule(100, Action::Pipe(1), vec![recv("app")]))
            .unwrap();
        e.apply(0, rule(200, Action::Pipe(2), vec![recv("peer")]))
            .unwrap();
        e.apply(0, rule(65000, Action::Allow, vec![])).unwrap();
    };
    let mut e: Engine<u64> = Engine::new(1);
    let (app, peer, other) = (e.iface("app"), e.iface("peer"), e.iface("other"));
    shell(&mut e);
    // Each interface's packets go to their own pipe: its delay, not the
    // least of all (a joined link's 10 ms is not cut short by another
    // link's shorter delay).
    assert_eq!(e.least_transit(app), 10 * MS);
    assert_eq!(e.least_transit(peer), 7 * MS);
    // Neither pipe's rule matches: rule 65000 passes it at once.
    assert_eq!(e.least_transit(other), 0);
    // A rule that may send them to either pipe: the lesser delay. A pipe
    // that does not exist drops what it is sent (nothing leaves).
    let both = e.config_epoch();
    e.apply(0, rule(90, Action::Pipe(2), vec![recv("app"), web_port()]))
        .unwrap();
    assert_eq!(e.least_transit(app), 7 * MS);
    e.apply(0, Command::DeleteRules(vec![90])).unwrap();
    assert_ne!(e.config_epoch(), both);
    e.apply(0, rule(90, Action::Pipe(9), vec![recv("app"), web_port()]))
        .unwrap();
    assert_eq!(e.least_transit(app), 10 * MS);
    e.apply(0, pipe(9, 0, 3 * MS)).unwrap();
    assert_eq!(e.least_transit(app), 3 * MS, "a pipe made later counts");
    e.apply(0, Command::DeleteRules(vec![90])).unwrap();

    // A rule before them that passes some packets: 0.
    let epoch = e.config_epoch();
    let web = Cond::new(CondKind::DstPort(vec![PortRange { lo: 80, hi: 80 }]));
    e.apply(0, rule(50, Action::Allow, vec![web.clone()]))
        .unwrap();
    assert_ne!(e.config_epoch(), epoch, "a change moves the epoch");
    assert_eq!(e.least_transit(app), 0);
    // Counted, or skipped to a pipe for sure: the pipe still decides.
    e.apply(0, Command::DeleteRules(vec![50])).unwrap();
    e.apply(0, rule(50, Action::Count, vec![web.clone()]))
        .unwrap();
    e.apply(0, rule(60, Action::Skipto(100), vec![])).unwrap();
    assert_eq!(e.least_transit(app), 10 * MS);
    // A skipto only some packets take: it may lead past every pipe.
    e.apply(0, Command::DeleteRules(vec![60])).unwrap();
    e.apply(0, rule(60, Action::Skipto(65000), vec![web]))
        .unwrap();
    assert_eq!(e.least_transit(app), 0);

    // Denied, all of them: nothing ever leaves.
    let mut e: Engine<u64> = Engine::new(1);
    let app = e.iface("app");
    e.apply(0, rule(100, Action::Deny, vec![])).unwrap();
    assert_eq!(e.least_transit(app), Nanos::MAX);
    // The default rule passes, with no rules: at once.
    let mut settings = dummynet_engine::Settings::default();
    settings.default_to_accept = true;
    let mut e: Engine<u64> = Engine::with_settings(1, settings);
    let app = e.iface("app");
    assert_eq!(e.least_transit(app), 0);
    // A pipe that takes packets only by chance leaves the rest to it.
    let mut chance = RuleSpec {
        number: Some(100),
        action: Action::Pipe(1),
        prob: Some(Probability::new(0.5).unwrap()),
        body: vec![],
        extra: Default::default(),
    };
    e.apply(0, pipe(1, 0, 10 * MS)).unwrap();
    e.apply(0, Command::AddRule(chance.clone())).unwrap();
    assert_eq!(e.least_transit(app), 0);
    chance.prob = None;
    e.apply(0, Command::DeleteRules(vec![100])).unwrap();
    e.apply(0, Command::AddRule(chance)).unwrap();
    assert_eq!(e.least_transit(app), 10 * MS);
}

/// A live data plane that reads arrivals late, up to `least_transit` after
/// it last looked, and runs each at the time the kernel stamped on it, sees
/// what one reading every arrival at once sees: the same outputs at the same
/// times, and no departure due before the wake-up that found it.
#[test]
fn reading_arrivals_late_by_the_least_transit_changes_nothing() {
    let links = [
        LinkConfig {
            bw: 10_000_000,
            delay: 10 * MS,
            ..LinkConfig::default()
        },
        LinkConfig {
            delay: 3 * MS,
            jitter: Some(uniform(2 * MS)),
            ..LinkConfig::default()
        },
        LinkConfig {
            bw: 1_000_000,
            delay: 5 * MS,
            ..LinkConfig::default()
        },
    ];
    for link in links {
        let config = [
            pipe_cfg(
                1,
                link.clone(),
                FlowsetConfig {
                    limit: QueueLimit::Slots(20),
                    ..FlowsetConfig::default()
                },
            ),
            pipe(2, 20_000_000, 4 * MS),
            rule(100, Action::Pipe(1), vec![recv("app")]),
            rule(200, Action::Pipe(2), vec![recv("peer")]),
            rule(65000, Action::Allow, vec![]),
        ];
        // Bursts both ways, 400 packets over about 80 ms, then single
        // packets further apart than the least transit, each way in turn.
        let sends: Vec<(Nanos, PacketInfo, &str)> = (0..400u64)
            .map(|i| {
                let t = (i / 10) * 2 * MS + (i % 10) * 37 * US;
                (t, if i % 4 == 0 { "peer" } else { "app" })
            })
            .chain((0..40).map(|i| {
                let t = 100 * MS + i * 5_300 * US;
                (t, if i % 2 == 0 { "peer" } else { "app" })
            }))
            .map(|(t, side)| (t, udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80, 1200), side))
            .collect();
        let eager = drive_ifaces(&config, &sends, None);
        let lazy = drive_ifaces(&config, &sends, Some(()));
        assert_eq!(eager.len(), 440, "{link:?}");
        if link.bw > 0 {
            assert!(eager.iter().any(|o| !o.2), "some queue-full drops");
        }
        assert_eq!(eager, lazy, "{link:?}");
    }
}

/// Feeds `sends` (time, packet, receive interface) to a fresh engine and
/// returns every output as (packet, time, delivered), sorted. Eager
/// (`lazy` None): each arrival is read at its time, and the engine polled
/// at every output deadline. Lazy: the reader wakes only at
/// `next_output_deadline` or `least_transit` after its last read, whichever
/// comes first (at the next arrival when the engine is empty), and then
/// runs what arrived since at the arrivals' own times; it checks that every
/// delivered output is found at a wake-up at its exact time.
fn drive_ifaces(
    config: &[Command],
    sends: &[(Nanos, PacketInfo, &str)],
    lazy: Option<()>,
) -> Vec<(u64, Nanos, bool)> {
    let mut e: Engine<u64> = Engine::new(7);
    for c in config {
        e.apply(0, c.clone()).unwrap();
    }
    let arrivals: Vec<(Nanos, PacketInfo)> = sends
        .iter()
        .map(|&(t, info, side)| {
            let recv_if = Some(e.iface(side));
            (t, PacketInfo { recv_if, ..info })
        })
        .collect();
    let transit = ["app", "peer"]
        .iter()
        .map(|s| {
            let i = e.iface(s);
            e.least_transit(i)
        })
        .min()
        .unwrap();
    if lazy.is_some() {
        assert!(transit > 0 && transit < Nanos::MAX);
    }
    let mut out = Vec::new();
    let mut next = 0;
    let mut last_read: Nanos = 0;
    loop {
        let wake = match (lazy, e.next_output_deadline()) {
            (None, d) => match (d, arrivals.get(next)) {
                (Some(d), Some(a)) => d.min(a.0),
                (Some(d), None) => d,
                (None, Some(a)) => a.0,
                (None, None) => break,
            },
            (Some(()), Some(d)) => d.min(last_read.saturating_add(transit)),
            (Some(()), None) => match arrivals.get(next) {
                Some(a) => a.0,
                None => break,
            },
        };
        // Everything that arrived by now, each at its own time.
        while let Some(&(t, info)) = arrivals.get(next).filter(|a| a.0 <= wake) {
            while let Some(o) = e.poll(t) {
                assert!(
                    !o.delivered() || o.at == wake,
                    "departure at {} found at {wake}",
                    o.at
                );
                out.push((o.payload, o.at, o.delivered()));
            }
            match e.input(t, info, next as u64) {
                Verdict::Queued { .. } => {}
                Verdict::Pass { payload, .. } => out.push((payload, t, true)),
                Verdict::Drop { payload, .. } => out.push((payload, t, false)),
            }
            next += 1;
        }
        last_read = wake;
        while let Some(o) = e.poll(wake) {
            assert!(
                !o.delivered() || o.at == wake,
                "departure at {} found at {wake}",
                o.at
            );
            out.push((o.payload, o.at, o.delivered()));
        }
    }
    out.sort_unstable();
    out
}

/// Out-of-range AQM and scheduler values are brought within the plug-in's
/// bounds, as FreeBSD's kernel bounds them (`BOUND_VAR`), with a note for
/// the user; a refused command leaves no note behind.
#[test]
fn aqm_and_scheduler_values_out_of_range_are_clamped_with_a_note() {
    let mut e: Engine<u64> = Engine::new(1);
    // FreeBSD's own test script: `fq_codel target 0ms interval 0ms`.
    let fq = SchedConfig {
        kind: Some("fq_codel".into()),
        params: vec![
            ("target".into(), 0),
            ("interval".into(), 0),
            ("quantum".into(), 100_000),
        ],
        ..SchedConfig::default()
    };
    e.apply(0, Command::ConfigSched(1, fq)).unwrap();
    let notes: Vec<String> = e.take_notes().iter().map(ToString::to_string).collect();
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes[0].starts_with("fq_codel target 0"), "{notes:?}");
    assert!(notes[0].contains("below 1us"), "{notes:?}");
    assert!(
        notes[2].contains("quantum 100000 is above 9000"),
        "{notes:?}"
    );
    assert!(e.take_notes().is_empty(), "taken once");
    let sched = e
        .snapshot()
        .scheds
        .into_iter()
        .find(|s| s.number == 1)
        .unwrap();
    let get = |k: &str| sched.params.iter().find(|(n, _)| n == k).map(|&(_, v)| v);
    assert_eq!(
        (get("target"), get("interval"), get("quantum")),
        (Some(1_000), Some(1_000), Some(9000))
    );
    // An AQM on a pipe: codel's target above 5 s.
    let codel = dummynet_engine::aqm::lookup("codel").unwrap();
    let cfg = PipeConfig {
        flowset: FlowsetConfig {
            aqm: dummynet_engine::aqm::AqmConfig::new(codel, vec![("target".into(), 9_000 * MS)]),
            ..FlowsetConfig::default()
        },
        ..PipeConfig::default()
    };
    e.apply(0, Command::ConfigPipe(2, cfg)).unwrap();
    let notes: Vec<String> = e.take_notes().iter().map(ToString::to_string).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("codel target 9s is above 5s"),
        "{notes:?}"
    );
    // Within bounds: nothing to say. Refused: nothing left to say either.
    e.apply(0, pipe(3, 1_000_000, MS)).unwrap();
    assert!(e.take_notes().is_empty());
    let bad = SchedConfig {
        kind: Some("fq_codel".into()),
        params: vec![("target".into(), 0), ("nonsense".into(), 1)],
        ..SchedConfig::default()
    };
    assert!(e.apply(0, Command::ConfigSched(4, bad)).is_err());
    assert!(e.take_notes().is_empty());
}

/// Whether a packet may end at a default rule that denies: what a daemon
/// warns its user of at start.
#[test]
fn a_ruleset_that_falls_to_the_default_deny_is_told_apart() {
    let mut e: Engine<u64> = Engine::new(1);
    assert!(e.drops_by_default(), "no rules: everything is denied");
    e.apply(0, rule(100, Action::Pipe(1), vec![recv("eth0")]))
        .unwrap();
    assert!(e.drops_by_default(), "only eth0's traffic is piped");
    e.apply(0, rule(200, Action::Pipe(1), vec![])).unwrap();
    assert!(!e.drops_by_default(), "a pipe for everything ends the walk");
    e.apply(0, Command::Set(Setting::OnePass(false))).unwrap();
    assert!(e.drops_by_default(), "without one_pass, packets come back");
    e.apply(0, rule(300, Action::Allow, vec![])).unwrap();
    assert!(!e.drops_by_default());
    e.apply(0, Command::DeleteRules(vec![300])).unwrap();
    e.apply(0, Command::Set(Setting::DefaultToAccept(true)))
        .unwrap();
    assert!(!e.drops_by_default(), "the default rule allows");
}

/// Pipe and queue rules that say neither `in` nor `out`: what a bridge
/// warns of, since each frame crosses its rules twice.
#[test]
fn pipe_rules_without_a_direction_are_found() {
    let mut e: Engine<u64> = Engine::new(1);
    let dir = |d| Cond::new(CondKind::Dir(d));
    e.apply(0, rule(100, Action::Pipe(1), vec![])).unwrap();
    e.apply(0, rule(200, Action::Queue(2), vec![recv("eth0")]))
        .unwrap();
    e.apply(0, rule(300, Action::Pipe(1), vec![dir(Direction::In)]))
        .unwrap();
    e.apply(
        0,
        rule(
            400,
            Action::Pipe(1),
            vec![Cond::not(CondKind::Dir(Direction::Out))],
        ),
    )
    .unwrap();
    e.apply(0, rule(500, Action::Allow, vec![])).unwrap();
    assert_eq!(e.undirected_pipe_rules(), vec![100, 200]);
}

/// Rules that send to `pipe N` while scheduler N is FQ-CoDel bypass it, as
/// in FreeBSD: the engine says so (a typed note), once per command that
/// makes it so, whichever comes first; not for the default WF2Q+, not once
/// the rule sends to a queue of the scheduler.
#[test]
fn a_rule_sending_to_a_pipe_whose_scheduler_it_bypasses_is_noted() {
    let fq = || PipeConfig {
        sched: Some(PipeSched {
            kind: "fq_codel".into(),
            params: Vec::new(),
        }),
        ..PipeConfig::default()
    };
    let rule = |number, action| {
        Command::AddRule(RuleSpec {
            number: Some(number),
            action,
            prob: None,
            body: Vec::new(),
            extra: RuleExtra::default(),
        })
    };
    let mut e: Engine<()> = Engine::new(1);
    e.apply(0, Command::ConfigPipe(1, fq())).unwrap();
    assert!(e.take_notes().is_empty(), "no rule sends to it yet");
    e.apply(0, rule(100, Action::Pipe(1))).unwrap();
    let want = ConfigNote::PipeBypassesSched {
        pipe: 1,
        kind: "FQ_CODEL",
        rules: vec![100],
    };
    assert_eq!(e.take_notes(), vec![want]);
    e.apply(0, rule(200, Action::Allow)).unwrap();
    assert!(e.take_notes().is_empty(), "said once, not again");
    // The other way round: the rules first, then the type.
    e.apply(0, rule(150, Action::Pipe(1))).unwrap();
    e.take_notes();
    e.apply(0, Command::ConfigPipe(1, fq())).unwrap();
    let notes = e.take_notes();
    assert_eq!(
        notes,
        vec![ConfigNote::PipeBypassesSched {
            pipe: 1,
            kind: "FQ_CODEL",
            rules: vec![100, 150],
        }]
    );
    assert!(notes[0]
        .to_string()
        .starts_with("rules 100, 150 send to pipe 1"));
    // A pipe with the default scheduler, and a queue of FQ-CoDel: no note.
    e.apply(0, Command::ConfigPipe(2, PipeConfig::default()))
        .unwrap();
    e.apply(0, rule(300, Action::Pipe(2))).unwrap();
    e.apply(
        0,
        Command::ConfigQueue(
            5,
            QueueConfig {
                sched: Some(1),
                ..QueueConfig::default()
            },
        ),
    )
    .unwrap();
    e.apply(0, rule(400, Action::Queue(5))).unwrap();
    assert!(e.take_notes().is_empty());
}

/// The engine's notes since the last call, in words.
fn said(e: &mut Engine<u64>) -> Vec<String> {
    e.take_notes().iter().map(ToString::to_string).collect()
}

/// Issue 25 item 9: a flush removes what it names and leaves the `at`
/// schedules alone (FreeBSD has no `at`; `ipfw flush` leaves the pipes and
/// tables, `pipe flush` the rules, and both leave the schedules), but says
/// how many steps remain and how to cancel them; the steps then run.
#[test]
fn a_flush_says_how_many_scheduled_steps_remain() {
    let mut e: Engine<u64> = Engine::new(1);
    e.apply(0, pipe(1, 1_000_000, 0)).unwrap();
    e.apply(0, rule(100, Action::Pipe(1), vec![])).unwrap();
    // Nothing scheduled: nothing to say.
    e.apply(0, Command::FlushRules).unwrap();
    assert!(e.take_notes().is_empty());
    e.apply(
        0,
        Command::Schedule(Schedule {
            steps: vec![(SEC, pipe(1, 2_000_000, 0)), (2 * SEC, pipe(2, 0, 0))],
            every: None,
        }),
    )
    .unwrap();
    let note = "2 scheduled `at` steps are still pending: a flush leaves schedules alone \
                (`at flush` cancels them)";
    e.apply(MS, Command::FlushRules).unwrap();
    assert_eq!(said(&mut e), [note]);
    e.apply(MS, Command::FlushDummynet).unwrap();
    assert_eq!(said(&mut e), [note]);
    assert!(!e.snapshot().links.iter().any(|l| l.number == 1));
    // The first step runs at 1 s and makes pipe 1 again.
    e.apply(1500 * MS, rule(100, Action::Pipe(1), vec![]))
        .unwrap();
    assert!(e.snapshot().links.iter().any(|l| l.number == 1));
    e.apply(1500 * MS, Command::FlushDummynet).unwrap();
    assert_eq!(
        said(&mut e),
        [
            "1 scheduled `at` step is still pending: a flush leaves schedules alone \
          (`at flush` cancels them)"
        ]
    );
    // Once cancelled, a flush has nothing to say.
    e.apply(1500 * MS, Command::CancelSchedules).unwrap();
    e.apply(1500 * MS, Command::FlushDummynet).unwrap();
    assert!(e.take_notes().is_empty());
    assert_eq!(e.schedule_stats().cancelled, 1);
}

/// A scheduler given a new mask lets its old instances drain their delay
/// lines; deleting it then drops those too, at once.
#[test]
fn deleting_a_remasked_pipe_drops_the_old_instances_delay_lines() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 10 * SEC));
    h.apply(Command::ConfigQueue(
        5,
        QueueConfig {
            sched: Some(1),
            ..Default::default()
        },
    ));
    h.apply(rule(100, Action::Queue(5), vec![]));
    for i in 0..10 {
        h.send(i * 4 * MS, udp([1; 4], [2; 4], 1, 2, 500));
    }
    h.apply_at(
        100 * MS,
        Command::ConfigSched(
            1,
            SchedConfig {
                kind: Some("fifo".into()),
                mask: FlowMask::ALL,
                ..Default::default()
            },
        ),
    );
    // The old instance drains: nothing is lost to the new mask.
    assert_eq!(h.e.totals().inside, 10);
    assert_eq!(h.dropped(DropReason::Deleted), 0);
    h.send(150 * MS, udp([1; 4], [2; 4], 1, 2, 500));
    h.apply_at(300 * MS, Command::DeletePipes(vec![1]));
    assert_eq!(h.e.totals().inside, 0);
    assert_eq!(h.e.memory().instances, 0);
    h.finish();
    assert_eq!(h.delivered(), 0);
    assert_eq!(h.dropped(DropReason::Deleted), 11);
}
