//! The engine finds a flow-queueing instance's queue by its bucket from a
//! table (one index per packet, not a map probe). These tests change the
//! queues underneath that table — expiry frees some and reuses their ids,
//! a new `flows` count renumbers the buckets — and check that every packet
//! still lands in its own bucket's queue.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::sched::bucket_of;
use dummynet_engine::time::NS_PER_SEC;
use dummynet_engine::{Command, FlowMask, PacketInfo};

const MS: u64 = 1_000_000;

fn flow(sport: u16) -> PacketInfo {
    udp([10, 0, 0, 1], [10, 0, 0, 2], sport, 80, 100)
}

/// fq_codel with `flows` buckets on pipe 1; queue 10 has a mask, so that
/// expiry frees its idle bucket queues.
fn setup(flows: u64) -> Harness {
    let mut h = Harness::new(3);
    h.apply(pipe(1, 8_000_000, 0));
    h.apply(sched_cmd(flows));
    h.apply(Command::ConfigQueue(
        10,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                mask: FlowMask {
                    src_port: u16::MAX,
                    ..FlowMask::default()
                },
                ..Default::default()
            },
        },
    ));
    h.apply(rule(100, Action::Queue(10), vec![]));
    h
}

fn sched_cmd(flows: u64) -> Command {
    Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some("fq_codel".into()),
            params: vec![("flows".into(), flows)],
            ..Default::default()
        },
    )
}

/// (bucket, packets that arrived in its queue) of queue 10, by bucket.
fn arrivals_by_bucket(h: &Harness) -> Vec<(u128, u64)> {
    let snap = h.e.snapshot();
    let fs = snap.flowsets.iter().find(|f| f.number == 10).unwrap();
    let mut v: Vec<(u128, u64)> = fs
        .flows
        .iter()
        .map(|f| (f.id.src, f.counters.tot_pkts))
        .collect();
    v.sort();
    v
}

/// `n` source ports in `n` different buckets of `buckets`.
fn ports(n: usize, buckets: u32) -> Vec<u16> {
    let mut seen = Vec::new();
    (1000u16..)
        .filter(|&p| {
            let b = bucket_of(&flow(p).key, buckets);
            let new = !seen.contains(&b);
            seen.push(b);
            new
        })
        .take(n)
        .collect()
}

#[test]
fn a_queue_freed_by_expiry_is_not_found_under_its_old_bucket() {
    let mut h = setup(64);
    let p = ports(4, 64);
    let b = |i: usize| u128::from(bucket_of(&flow(p[i]).key, 64));
    h.send(0, flow(p[0]));
    h.send(0, flow(p[1]));
    // Flow 1 stays busy; flow 0's queue is idle through the sweeps at 2 s
    // and 4 s and freed by the second. Flow 2's new queue takes its id, and
    // flow 0 must get a queue of its own again.
    h.send(2 * NS_PER_SEC, flow(p[1]));
    h.send(4 * NS_PER_SEC, flow(p[1]));
    h.send(4 * NS_PER_SEC + MS, flow(p[2]));
    h.send(4 * NS_PER_SEC + 2 * MS, flow(p[0]));
    h.send(4 * NS_PER_SEC + 3 * MS, flow(p[0]));
    h.finish();
    let mut want = vec![(b(0), 2), (b(1), 3), (b(2), 1)];
    want.sort();
    assert_eq!(arrivals_by_bucket(&h), want);
}

#[test]
fn new_flows_count_renumbers_buckets_without_mixing_queues() {
    let mut h = setup(64);
    let p = ports(3, 1024);
    for &port in &p {
        h.send(0, flow(port));
    }
    h.apply_at(MS, sched_cmd(1024));
    for &port in &p {
        h.send(2 * MS, flow(port));
    }
    h.finish();
    let mut want: Vec<(u128, u64)> = p
        .iter()
        .map(|&port| (u128::from(bucket_of(&flow(port).key, 1024)), 1))
        .collect();
    want.sort();
    // The queues made before the change went with it (their packets were
    // put back under the new buckets, not counted as arrivals again).
    let got = arrivals_by_bucket(&h);
    assert_eq!(got.len(), 3, "{got:?}");
    for ((gb, _), (wb, _)) in got.iter().zip(&want) {
        assert_eq!(gb, wb);
    }
    assert_eq!(h.delivered(), 6);
}
