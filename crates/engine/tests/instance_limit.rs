//! `net.inet.ip.dummynet.instance_limit`: the per-flow queues and scheduler
//! instances that masks make are bounded, a packet that would need one
//! more is dropped as `instance-limit`, and the engine's memory report never
//! shows more in use than its worst case for the configuration.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::{Command, DropReason, Engine, FlowMask};

fn instance_limit(n: u32) -> Command {
    Command::Set(Setting::InstanceLimit(n))
}

/// A pipe whose mask gives every source its own queue and instance.
fn masked_pipe(n: u32, bw: u64, delay: Nanos, limit: u32) -> Command {
    pipe_cfg(
        n,
        LinkConfig {
            bw,
            delay,
            ..Default::default()
        },
        FlowsetConfig {
            mask: FlowMask::ALL,
            limit: QueueLimit::Slots(limit),
            ..Default::default()
        },
    )
}

use dummynet_engine::Nanos;

/// Source address number `i`, all different for i < 2^24.
fn src(i: u64) -> [u8; 4] {
    [10, (i >> 16) as u8, (i >> 8) as u8, i as u8]
}

fn counts(e: &Engine<u64>) -> (u64, u64) {
    let m = e.memory();
    (m.queues, m.instances)
}

/// A random-source flood through `mask all`: 5000 sources in half a second
/// (before the first expiry sweep), with room for 100 flows. The first 100
/// get a queue and an instance each and are delivered; the other 4900 are
/// `instance-limit` drops; the books balance after every packet. Once the
/// flows have gone idle, expiry frees them and new sources are taken again.
#[test]
fn a_random_source_flood_stays_at_the_cap() {
    let mut h = Harness::new(7);
    h.apply(instance_limit(100));
    h.apply(masked_pipe(1, 0, 10 * MS, 50));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    let mut most = (0, 0);
    for i in 0..5000u64 {
        h.send(i * 100 * US, udp(src(i), [10, 9, 9, 9], 1000, 53, 100));
        let (q, n) = counts(&h.e);
        assert!(q <= 100 && n <= 100, "{q} queues, {n} instances");
        most = (most.0.max(q), most.1.max(n));
    }
    assert_eq!(most, (100, 100));
    for i in 0..100 {
        assert!(
            matches!(h.fates[i], Some(Fate::Delivered { .. }) | None),
            "flow {i}: {:?}",
            h.fates[i]
        );
    }
    assert_eq!(h.dropped(DropReason::InstanceLimit), 4900);
    assert_eq!(h.e.totals().drops_for(DropReason::InstanceLimit), 4900);
    // Every fate is decided by now: the flows' last packets left at 10 ms
    // after they came.
    h.run_until(SEC);
    assert_eq!(h.delivered(), 100);
    // The sweep at 1 s frees nothing (the flows had arrivals since the
    // start), so a new source is still refused; the one at 2 s frees them.
    let early = h.send(SEC + MS, udp(src(9000), [10, 9, 9, 9], 1000, 53, 100));
    assert_eq!(
        h.fates[early as usize],
        Some(Fate::Dropped {
            at: SEC + MS,
            reason: DropReason::InstanceLimit
        })
    );
    assert_eq!(counts(&h.e), (100, 100));
    h.send(2 * SEC + MS, udp(src(9001), [10, 9, 9, 9], 1000, 53, 100));
    assert_eq!(counts(&h.e), (1, 1));
    // Back under the cap: new sources are taken.
    for i in 0..50u64 {
        h.send(
            2 * SEC + 2 * MS + i * US,
            udp(src(10_000 + i), [10, 9, 9, 9], 1, 2, 100),
        );
    }
    h.finish();
    assert_eq!(h.delivered(), 151);
    assert_eq!(h.dropped(DropReason::InstanceLimit), 4901);
    assert_eq!(DropReason::InstanceLimit.as_str(), "instance-limit");
    assert!(DropReason::ALL.contains(&DropReason::InstanceLimit));
}

/// `queue 1 config pipe 1 mask all` on a slow pipe: 40 flows queue 5
/// packets each; the cap is lowered to 10 live. Nothing queued is lost (also
/// across a reconfiguration of the pipe, which takes the packets out and
/// puts them back), existing flows keep being served, new flows are
/// refused; a refused setting changes nothing.
#[test]
fn lowering_the_cap_live_loses_nothing_queued() {
    let mut h = Harness::new(3);
    h.apply(pipe(1, 1_000_000, 0));
    h.apply(Command::ConfigQueue(
        1,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                mask: FlowMask {
                    src_ip: u32::MAX,
                    ..FlowMask::default()
                },
                ..Default::default()
            },
        },
    ));
    h.apply(rule(100, Action::Queue(1), vec![]));
    for k in 0..5u64 {
        for i in 0..40u64 {
            h.send((k * 40 + i) * US, udp(src(i), [10, 9, 9, 9], 1, 2, 1000));
        }
    }
    assert_eq!(h.dropped(DropReason::QueueFull), 0);
    let inside = h.e.totals().inside;
    assert!(inside > 150, "only {inside} queued");
    assert_eq!(counts(&h.e).0, 40);
    let at = 300 * US;
    h.apply_at(at, instance_limit(10));
    assert_eq!(h.e.settings().instance_limit, 10);
    assert!(h.e.apply(at, instance_limit(0)).is_err());
    assert_eq!(h.e.settings().instance_limit, 10);
    // The pipe is reconfigured: its 40 queues' packets come back.
    h.apply_at(at + US, pipe(1, 2_000_000, 0));
    assert_eq!(h.e.totals().inside, inside);
    // An existing flow is still taken; a new one is not.
    let old = h.send(at + 2 * US, udp(src(3), [10, 9, 9, 9], 1, 2, 1000));
    let new = h.send(at + 3 * US, udp(src(77), [10, 9, 9, 9], 1, 2, 1000));
    assert_eq!(
        h.fates[new as usize],
        Some(Fate::Dropped {
            at: at + 3 * US,
            reason: DropReason::InstanceLimit
        })
    );
    h.finish();
    assert!(matches!(
        h.fates[old as usize],
        Some(Fate::Delivered { .. })
    ));
    assert_eq!(h.delivered(), 201);
    assert_eq!(h.dropped(DropReason::InstanceLimit), 1);
    assert_eq!(h.e.totals().dropped(), 1);
}

/// The default cap is there without any setting, and a flowset-level
/// `buckets` keeps FreeBSD's meaning (a hash size): 1 bucket still allows
/// many flows.
#[test]
fn the_default_cap_and_buckets() {
    let e: Engine<u64> = Engine::new(1);
    assert_eq!(e.settings().instance_limit, DEFAULT_INSTANCE_LIMIT);
    let mut h = Harness::new(1);
    h.apply(pipe_cfg(
        1,
        LinkConfig::default(),
        FlowsetConfig {
            mask: FlowMask::ALL,
            buckets: 1,
            ..Default::default()
        },
    ));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    for i in 0..300u64 {
        h.send(i * US, udp(src(i), [10, 9, 9, 9], 1, 2, 100));
    }
    assert_eq!(counts(&h.e), (300, 300));
    h.finish();
    assert_eq!(h.delivered(), 300);
}

/// The memory report: with `held_limit` and a masked flood, every part's
/// use stays within its worst case, queues and instances reach it in count,
/// and without `held_limit` packets are reported unbounded.
#[test]
fn the_worst_case_bounds_the_use() {
    let mut h = Harness::new(5);
    let m = h.e.memory();
    assert_eq!(m.part("packets").and_then(|p| p.worst), None);
    assert_eq!(m.worst(), None);
    h.apply(Command::Set(Setting::HeldLimit(200_000)));
    h.apply(instance_limit(64));
    h.apply(masked_pipe(1, 1_000_000, 50 * MS, 100));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    for i in 0..2000u64 {
        h.send(i * 20 * US, udp(src(i % 500), [10, 9, 9, 9], 1, 2, 1500));
        let m = h.e.memory();
        for p in &m.parts {
            let worst = p.worst.unwrap_or_else(|| panic!("{} unbounded", p.name));
            assert!(
                p.now <= worst,
                "{}: {} now > {} at worst",
                p.name,
                p.now,
                worst
            );
        }
    }
    let m = h.e.memory();
    assert_eq!((m.queues, m.instances), (64, 64));
    assert!(m.part("packets").is_some_and(|p| p.now > 100_000));
    let text = m.to_string();
    assert!(text.starts_with("memory: "), "{text}");
    assert!(
        text.contains("queues") && text.contains("64 of at most 64"),
        "{text}"
    );
    h.finish();
}
