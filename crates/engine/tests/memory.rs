//! `net.inet.ip.dummynet.held_limit`: the packet bytes held inside the
//! engine are bounded, whatever a delay line would take, and the packets
//! refused for it are drops of their own reason. Also the books of packets
//! delivered that the caller then could not send (`Engine::unsent`).

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::rng::Probability;
use dummynet_engine::{Command, DropReason, Engine, Verdict};

const FRAME: u32 = 1514;

fn held_limit(bytes: u64) -> Command {
    Command::Set(Setting::HeldLimit(bytes))
}

/// `pipe 1 config delay 60s` under a flood of 1514-byte packets, one every
/// 10 ms for 70 s: with room for 100 of them, the first 100 fill the delay
/// line; then each arrival is refused until a packet leaves, one minute
/// after it came, and from then on exactly one is taken per departure.
#[test]
fn a_long_delay_line_holds_no_more_than_the_limit() {
    let mut h = Harness::new(1);
    let limit = 100 * u64::from(FRAME);
    h.apply(held_limit(limit));
    h.apply(pipe(1, 0, 60 * SEC));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let mut most = 0;
    for k in 0..7000u64 {
        h.send(k * 10 * MS, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, FRAME));
        let held = h.e.totals().held_bytes;
        assert!(held <= limit, "{held} bytes held, above the limit {limit}");
        most = most.max(held);
    }
    assert_eq!(most, limit);
    h.finish();
    assert_eq!(h.e.totals().held_bytes, 0);
    // Taken: 0..99 at once, 6000..6099 as 0..99 leave (60 s after each).
    assert_eq!(h.delivered(), 200);
    assert_eq!(h.dropped(DropReason::MemoryLimit), 6800);
    assert_eq!(h.e.totals().drops_for(DropReason::MemoryLimit), 6800);
    assert_eq!(h.departure(0), 60 * SEC);
    assert_eq!(h.departure(99), 60 * SEC + 990 * MS);
    assert_eq!(h.departure(6000), 120 * SEC);
    assert_eq!(h.departure(6099), 120 * SEC + 990 * MS);
    assert_eq!(
        h.fates[100],
        Some(Fate::Dropped {
            at: SEC,
            reason: DropReason::MemoryLimit
        })
    );
    assert_eq!(
        h.fates[6100],
        Some(Fate::Dropped {
            at: 61 * SEC,
            reason: DropReason::MemoryLimit
        })
    );
}

/// Without the setting, nothing is refused for memory (the engine's
/// default is no limit; the daemon sets one).
#[test]
fn no_limit_by_default() {
    let mut h = Harness::new(1);
    assert_eq!(h.e.settings().held_limit, 0);
    h.apply(pipe(1, 0, 60 * SEC));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    for k in 0..1000u64 {
        h.send(k * MS, udp([1; 4], [2; 4], 1, 2, FRAME));
    }
    assert_eq!(h.e.totals().held_bytes, 1000 * u64::from(FRAME));
    h.finish();
    assert_eq!(h.delivered(), 1000);
    assert_eq!(h.dropped(DropReason::MemoryLimit), 0);
}

/// Lowered below what is held, the limit drops nothing already inside but
/// refuses arrivals until enough has left; set to 0 it is gone.
#[test]
fn a_live_change_of_the_limit_applies_to_the_next_arrival() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 0, SEC));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let p = || udp([1; 4], [2; 4], 1, 2, 1000);
    for k in 0..10u64 {
        h.send(k * MS, p());
    }
    assert_eq!(h.e.totals().held_bytes, 10_000);
    h.apply_at(10 * MS, held_limit(5000));
    assert_eq!(h.e.totals().held_bytes, 10_000, "nothing held is dropped");
    let refused = h.send(20 * MS, p());
    // Packets 0..5 leave at 1.000..1.005 s: 4 packets, 4000 bytes, remain.
    let taken = h.send(SEC + 5 * MS + 500 * US, p());
    let over = h.send(SEC + 5 * MS + 600 * US, p());
    h.apply_at(SEC + 5 * MS + 700 * US, held_limit(0));
    let unlimited = h.send(SEC + 5 * MS + 800 * US, p());
    h.finish();
    let memory = |at| {
        Some(Fate::Dropped {
            at,
            reason: DropReason::MemoryLimit,
        })
    };
    assert_eq!(h.fates[refused as usize], memory(20 * MS));
    assert_eq!(h.fates[over as usize], memory(SEC + 5 * MS + 600 * US));
    assert_eq!(h.departure(taken), 2 * SEC + 5 * MS + 500 * US);
    assert_eq!(h.departure(unlimited), 2 * SEC + 5 * MS + 800 * US);
    for k in 0..10 {
        assert_eq!(h.departure(k), SEC + k * MS);
    }
    assert_eq!(h.dropped(DropReason::MemoryLimit), 2);
    assert_eq!(h.delivered(), 12);
}

/// A copy `duplicate` would make is not made when the limit has no room
/// for it; the packet itself still goes in.
#[test]
fn duplicate_makes_no_copy_beyond_the_limit() {
    let mut h = Harness::new(1);
    let always = Correlated::new(Probability::ONE, Probability::ZERO);
    let fs = FlowsetConfig {
        duplicate: Some(Duplicate(always)),
        ..Default::default()
    };
    let link = LinkConfig {
        delay: SEC,
        ..Default::default()
    };
    h.apply(held_limit(3000));
    h.apply(pipe_cfg(1, link, fs));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let p = || udp([1; 4], [2; 4], 1, 2, 1000);
    h.send(0, p());
    // The first packet and its copy: 2000 bytes. The second fits, its copy not.
    h.send(MS, p());
    assert_eq!(h.e.totals().held_bytes, 3000);
    let third = h.send(2 * MS, p());
    h.finish();
    let t = h.e.totals();
    assert_eq!(t.duplicated, 1);
    assert_eq!(t.duplicate_failed, 1);
    assert_eq!(t.delivered, 3);
    assert_eq!(
        h.fates[third as usize],
        Some(Fate::Dropped {
            at: 2 * MS,
            reason: DropReason::MemoryLimit
        })
    );
    assert_eq!(t.held_bytes, 0);
}

/// A packet delivered that the caller could not send moves from the
/// delivered count to `tx-failed`; the books still balance, and no more
/// than was delivered can move.
#[test]
fn unsent_packets_become_tx_failed_drops() {
    let mut e: Engine<u64> = Engine::new(1);
    e.apply(0, held_limit(0))
        .unwrap_or_else(|err| panic!("{err}"));
    e.apply(0, pipe(1, 0, 10 * MS))
        .unwrap_or_else(|err| panic!("{err}"));
    e.apply(0, rule(100, Action::Pipe(1), vec![]))
        .unwrap_or_else(|err| panic!("{err}"));
    for id in 0..3u64 {
        let v = e.input(0, udp([1; 4], [2; 4], 1, 2, 100), id);
        assert!(matches!(v, Verdict::Queued { .. }));
    }
    let mut out = 0;
    while e.poll(10 * MS).is_some() {
        out += 1;
    }
    assert_eq!(out, 3);
    assert_eq!(e.unsent(DropReason::TxFailed, 2), 2);
    let t = e.totals();
    assert_eq!(t.delivered, 1);
    assert_eq!(t.drops_for(DropReason::TxFailed), 2);
    assert!(t.conserved(), "{t:?}");
    // Only one is left to move.
    assert_eq!(e.unsent(DropReason::TxFailed, 5), 1);
    let t = e.totals();
    assert_eq!(
        (t.arrived, t.delivered, t.dropped(), t.inside),
        (3, 0, 3, 0)
    );
    assert_eq!(t.drops_for(DropReason::TxFailed), 3);
    assert!(t.conserved(), "{t:?}");
}

#[test]
fn drop_reasons_have_their_names() {
    assert_eq!(DropReason::MemoryLimit.as_str(), "memory-limit");
    assert_eq!(DropReason::TxFailed.as_str(), "tx-failed");
    assert!(DropReason::ALL.contains(&DropReason::MemoryLimit));
    assert!(DropReason::ALL.contains(&DropReason::TxFailed));
}

/// A delay line that packets keep overtaking (`reorder`: 90% skip a 2 s
/// delay) re-armed its release for each overtaking packet, and every
/// superseded entry waited in the timer heap until its time: 12,000
/// arrivals in 120 ms left some 10,800 entries for 1,200 packets held. Now the heap is swept once it doubles, and stays within its
/// minimum (1024) for one instance, while every packet still leaves at
/// its time: the 10% delayed leave exactly 2 s after they came.
#[test]
fn overtaking_packets_do_not_pile_up_timers() {
    let mut h = Harness::new(9);
    let reorder = dummynet_engine::impair::reorder::Reorder {
        p: Correlated::new(Probability::new(0.9).unwrap_or_default(), Probability::ZERO),
        gap: 1,
    };
    h.apply(pipe_cfg(
        1,
        LinkConfig {
            delay: 2 * SEC,
            reorder: Some(reorder),
            ..Default::default()
        },
        FlowsetConfig::default(),
    ));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let mut most = 0;
    for i in 0..12_000u64 {
        h.send(i * 10 * US, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100));
        most = most.max(h.e.timer_entries());
        let m = h.e.memory();
        let timers = m.part("timers").map(|p| (p.now, p.worst));
        assert!(
            timers.is_some_and(|(now, worst)| worst.is_some_and(|w| now <= w)),
            "{timers:?}"
        );
    }
    let inside = h.e.totals().inside;
    assert!(inside > 1000, "only {inside} held");
    assert!(most <= 1025, "{most} timer entries for one instance");
    h.finish();
    let delayed: Vec<u64> = (0..12_000u64)
        .filter(|&i| h.departure(i) != i * 10 * US)
        .collect();
    assert!(delayed.len() > 1000, "{} delayed", delayed.len());
    for i in delayed {
        assert_eq!(h.departure(i), i * 10 * US + 2 * SEC, "packet {i}");
    }
}

/// A pipe's delay lowered live while a packet is in its delay line: the
/// packets after it wait for it (the line is a FIFO) instead of leaving
/// before it, and departures never go back in time. Found by the
/// `engine_sequence` fuzzer (`pipe 1 config` after a 500 kbit/s, 1 ms
/// pipe filled at time 0).
#[test]
fn a_delay_lowered_live_keeps_the_delay_line_in_order() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 500_000, MS));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    for k in 0..4u64 {
        h.send(
            0,
            udp([10, 0, 0, 1], [10, 0, 1, 1], 1000 + k as u16, 80, 1400),
        );
    }
    // The first is on the link until 22.4 ms, then 1 ms in the line.
    h.apply(pipe(1, 0, 0));
    h.finish();
    let times: Vec<u64> = h
        .outputs
        .iter()
        .filter(|o| o.drop.is_none())
        .map(|o| o.at)
        .collect();
    assert_eq!(times.len(), 4);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(times[0], 22_400_000 + MS, "{times:?}");
    assert!(
        times.iter().all(|&t| t == times[0]),
        "the others wait for it: {times:?}"
    );
}
