//! Criterion benches for the engine's hot paths: classification, a packet
//! through an unlimited pipe, a scheduler with many backlogged flows, and
//! a packet that matches a dynamic state.
//! `cargo bench -p dummynet-engine`.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dummynet_engine::config::*;
use dummynet_engine::flow::proto;
use dummynet_engine::limits::{Lease, LimitKey, LimitTable};
use dummynet_engine::{Command, Direction, Engine, FlowKey, FlowMask, PacketInfo};

fn pkt(i: u32) -> PacketInfo {
    PacketInfo {
        len: 128,
        key: FlowKey::v4(
            Ipv4Addr::from(0x0a00_0000 | (i >> 16)),
            Ipv4Addr::new(10, 255, 0, 1),
            proto::UDP,
            i as u16,
            9,
        ),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    }
}

fn rule(n: u16, action: Action, body: Vec<Cond>) -> Command {
    Command::AddRule(RuleSpec {
        number: Some(n),
        action,
        prob: None,
        extra: Default::default(),
        body,
    })
}

fn classify(c: &mut Criterion) {
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(1));
    // One allow rule, and the same behind 20 non-matching rules.
    for misses in [0u16, 20] {
        let mut e: Engine<u32> = Engine::new(1);
        for i in 0..misses {
            let net = AddrMatch {
                addr: "192.168.0.0"
                    .parse()
                    .unwrap_or(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                prefix: 16,
            };
            let _ = e.apply(
                0,
                rule(
                    i + 1,
                    Action::Deny,
                    vec![Cond::new(CondKind::SrcAddr(vec![net]))],
                ),
            );
        }
        let _ = e.apply(0, rule(1000, Action::Allow, vec![]));
        let p = pkt(1);
        let mut now = 0;
        g.bench_function(BenchmarkId::new("allow_after_misses", misses), |b| {
            b.iter(|| {
                now += 100;
                black_box(e.input(now, p, 0));
            })
        });
    }
    g.finish();
}

fn pipe(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipe");
    g.throughput(Throughput::Elements(1));
    for (name, delay) in [("unlimited", 0), ("delay10ms", 10_000_000)] {
        let mut e: Engine<u32> = Engine::new(1);
        let link = LinkConfig {
            delay,
            ..Default::default()
        };
        let _ = e.apply(
            0,
            Command::ConfigPipe(
                1,
                PipeConfig {
                    link,
                    ..Default::default()
                },
            ),
        );
        let _ = e.apply(0, rule(100, Action::Pipe(1), vec![]));
        let p = pkt(1);
        let mut now = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                now += 100;
                black_box(e.input(now, p, 0));
                while let Some(o) = e.poll(now) {
                    black_box(o);
                }
            })
        });
    }
    g.finish();
}

fn schedulers(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched");
    g.throughput(Throughput::Elements(1));
    for kind in ["fifo", "wf2q+"] {
        for flows in [1u32, 100, 10_000] {
            let mut e: Engine<u32> = Engine::new(1);
            let bw = 128 * 8 * 10_000_000; // one packet every 100 ns
            let link = LinkConfig {
                bw,
                ..Default::default()
            };
            let _ = e.apply(
                0,
                Command::ConfigPipe(
                    1,
                    PipeConfig {
                        link,
                        ..Default::default()
                    },
                ),
            );
            let _ = e.apply(
                0,
                Command::ConfigSched(
                    1,
                    SchedConfig {
                        kind: Some(kind.into()),
                        ..Default::default()
                    },
                ),
            );
            let fs = FlowsetConfig {
                mask: FlowMask::ALL,
                limit: QueueLimit::Slots(4),
                ..Default::default()
            };
            let _ = e.apply(
                0,
                Command::ConfigQueue(
                    1,
                    QueueConfig {
                        sched: Some(1),
                        flowset: fs,
                    },
                ),
            );
            let _ = e.apply(0, rule(100, Action::Queue(1), vec![]));
            let pkts: Vec<PacketInfo> = (0..flows).map(pkt).collect();
            for _ in 0..2 {
                for p in &pkts {
                    e.input(0, *p, 0);
                }
            }
            let mut now = 0;
            let mut i = 0usize;
            g.bench_function(BenchmarkId::new(kind, flows), |b| {
                b.iter(|| {
                    now += 100;
                    e.input(now, pkts[i], 0);
                    i = (i + 1) % pkts.len();
                    while let Some(o) = e.poll(now) {
                        black_box(o);
                    }
                })
            });
        }
    }
    g.finish();
}

/// A shared count with room for every state (the bench measures packets
/// that match a state, which never ask it).
#[derive(Debug)]
struct Unbounded;

impl LimitTable for Unbounded {
    fn take(&self, _: LimitKey, _: u32, _: u64, expire: u64) -> Option<std::sync::Arc<Lease>> {
        Some(std::sync::Arc::new(Lease::new(expire)))
    }

    fn give_back(&self, _: &LimitKey, _: &std::sync::Arc<Lease>) {}
}

/// A packet of a flow whose dynamic state exists: `keep-state`, and
/// `limit src-addr` (the state's place counted, never touched by a packet
/// that only matches it), over 64 flows from 8 sources.
fn states(c: &mut Criterion) {
    let mut g = c.benchmark_group("states");
    g.throughput(Throughput::Elements(1));
    let src_addr = LimitMask {
        src_addr: true,
        ..LimitMask::default()
    };
    let limit = StateKind::Limit {
        mask: src_addr,
        max: 1000,
    };
    for (name, kind, shared) in [
        ("keep_state_hit", StateKind::Keep, false),
        ("limit_hit", limit, false),
        // Its place in a count shared with other engines: a packet that
        // matches the state refreshes its lease (the table is not touched).
        ("limit_hit_shared", limit, true),
    ] {
        let mut e: Engine<u32> = Engine::new(1);
        if shared {
            e.share_limits(std::sync::Arc::new(Unbounded));
        }
        let _ = e.apply(
            0,
            Command::AddRule(RuleSpec {
                number: Some(100),
                action: Action::Allow,
                prob: None,
                extra: RuleExtra {
                    state: Some(kind),
                    ..RuleExtra::default()
                },
                body: vec![],
            }),
        );
        let flow = |i: u32| pkt(((i % 8) << 16) | (1000 + i % 64));
        for i in 0..64 {
            let _ = e.input(0, flow(i), 0);
        }
        let (mut now, mut i) = (0, 0u32);
        g.bench_function(name, |b| {
            b.iter(|| {
                now += 100;
                i = i.wrapping_add(1);
                black_box(e.input(now, flow(i), 0));
            })
        });
    }
    g.finish();
}

criterion_group!(benches, classify, pipe, schedulers, states);
criterion_main!(benches);
