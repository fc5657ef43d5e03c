//! Properties: whatever the configuration and traffic, every packet is
//! accounted for exactly once, nothing panics, and a seed fixes the outcome.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::rng::Probability;
use dummynet_engine::{Command, Direction, FlowKey, FlowMask, Nanos, PacketInfo};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Cmd(Box<Command>),
    Packet { dt: Nanos, info: PacketInfo },
    Wait(Nanos),
}

fn mask() -> impl Strategy<Value = FlowMask> {
    prop_oneof![
        Just(FlowMask::default()),
        Just(FlowMask::ALL),
        Just(FlowMask {
            dst_ip: 0xff,
            ..FlowMask::default()
        }),
        Just(FlowMask {
            src_port: 0xffff,
            ..FlowMask::default()
        }),
    ]
}

fn chance() -> impl Strategy<Value = Correlated> {
    (0.0f64..0.5, prop_oneof![Just(0.0f64), 0.0f64..1.0]).prop_map(|(p, c)| {
        Correlated::new(
            Probability::new(p).unwrap_or_default(),
            Probability::new(c).unwrap_or_default(),
        )
    })
}

fn loss() -> impl Strategy<Value = LossModel> {
    let p = || (0.0f64..1.0).prop_map(|x| Probability::new(x).unwrap_or_default());
    prop_oneof![
        chance().prop_map(LossModel::Random),
        (p(), p(), p(), p()).prop_map(|(p, r, loss_bad, loss_good)| {
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            }
        }),
        (p(), p()).prop_map(|(p13, p31)| dummynet_engine::impair::loss::defaults_state(
            p13,
            Some(p31),
            None,
            None,
            None
        )),
    ]
}

/// netem's entry impairments, each present or not.
type Entry = (Option<LossModel>, Option<Correlated>, Option<Correlated>);

fn entry() -> impl Strategy<Value = Entry> {
    (
        proptest::option::weighted(0.2, loss()),
        proptest::option::weighted(0.2, chance()),
        proptest::option::weighted(0.2, chance()),
    )
}

fn flowset() -> impl Strategy<Value = FlowsetConfig> {
    (
        1u32..=100,
        prop_oneof![
            (1u32..=100).prop_map(QueueLimit::Slots),
            (1u64..=100_000).prop_map(QueueLimit::Bytes)
        ],
        0.0f64..0.3,
        mask(),
        entry(),
    )
        .prop_map(
            |(weight, limit, plr, mask, (loss, duplicate, corrupt))| FlowsetConfig {
                weight,
                limit,
                plr: Probability::new(plr).unwrap_or_default(),
                mask,
                loss,
                duplicate: duplicate.map(dummynet_engine::config::Duplicate),
                corrupt: corrupt.map(dummynet_engine::config::Corrupt),
                ..Default::default()
            },
        )
}

/// netem's and mahimahi's link impairments, each present or not (some
/// combinations are refused, which the properties cover too).
type Shaping = (
    Option<Jitter>,
    Option<Reorder>,
    Option<Overhead>,
    Option<Slot>,
    Option<std::sync::Arc<Trace>>,
);

fn shaping() -> impl Strategy<Value = Shaping> {
    let jitter = (0u64..=20_000_000, any::<bool>(), any::<bool>()).prop_map(
        |(amount, normal, unordered)| Jitter {
            amount,
            correlation: Probability::ZERO,
            distribution: if normal {
                dummynet_engine::impair::dist::builtin("normal")
                    .map_or(Distribution::Uniform, Distribution::Table)
            } else {
                Distribution::Uniform
            },
            unordered,
        },
    );
    let reorder = (chance(), 1u32..=6).prop_map(|(p, gap)| Reorder { p, gap });
    let overhead = (-40i32..=100, prop_oneof![Just(0u32), 1u32..=100], 0i32..=10).prop_map(
        |(bytes, cell_size, cell_overhead)| Overhead {
            bytes,
            cell_size,
            cell_overhead: if cell_size == 0 { 0 } else { cell_overhead },
        },
    );
    let slot = (
        1u64..=5_000_000,
        0u64..=5_000_000,
        proptest::option::of(1u32..=8),
    )
        .prop_map(|(min, extra, packets)| Slot {
            min,
            max: min + extra,
            packets,
            bytes: None,
        });
    // Looping traces only: a finished `once` trace keeps its packets forever.
    let trace = proptest::collection::vec(0u64..=20, 1..=8).prop_map(|mut ms| {
        ms.sort_unstable();
        let last = ms.last().copied().unwrap_or(0).max(1);
        ms.push(last);
        std::sync::Arc::new(Trace {
            name: "prop".into(),
            times: ms.iter().map(|m| m * 1_000_000).collect(),
            mode: TraceMode::Loop,
        })
    });
    (
        proptest::option::weighted(0.2, jitter),
        proptest::option::weighted(0.1, reorder),
        proptest::option::weighted(0.1, overhead),
        proptest::option::weighted(0.1, slot),
        proptest::option::weighted(0.1, trace),
    )
}

fn link() -> impl Strategy<Value = LinkConfig> {
    (
        prop_oneof![Just(0u64), 1_000u64..=10_000_000_000],
        0u64..=50_000_000,
        0u64..=20_000,
        shaping(),
    )
        .prop_map(
            |(bw, delay, burst, (jitter, reorder, overhead, slot, trace))| LinkConfig {
                // A trace takes the place of `bw` (with both, the pipe is refused).
                bw: if trace.is_some() { 0 } else { bw },
                delay,
                burst: if trace.is_some() { 0 } else { burst },
                jitter,
                reorder,
                overhead,
                slot: if trace.is_some() { None } else { slot },
                trace,
                ..LinkConfig::default()
            },
        )
}

fn command() -> impl Strategy<Value = Command> {
    let n = 1u32..=4;
    prop_oneof![
        (n.clone(), link(), flowset()).prop_map(|(n, link, flowset)| Command::ConfigPipe(
            n,
            PipeConfig {
                link,
                flowset,
                sched: None
            }
        )),
        (n.clone(), n.clone(), flowset()).prop_map(|(q, s, flowset)| Command::ConfigQueue(
            q,
            QueueConfig {
                sched: Some(s),
                flowset
            }
        )),
        (
            n.clone(),
            prop_oneof![Just("fifo"), Just("wf2q+")],
            mask(),
            proptest::option::of(link())
        )
            .prop_map(|(s, kind, mask, link)| Command::ConfigSched(
                s,
                SchedConfig {
                    kind: Some(kind.into()),
                    mask,
                    link,
                    params: vec![]
                }
            )),
        (
            1u16..=5,
            prop_oneof![
                n.clone().prop_map(Action::Pipe),
                n.clone().prop_map(Action::Queue),
                Just(Action::Allow),
                Just(Action::Deny),
                Just(Action::Count),
                (1u16..=6).prop_map(|x| Action::Skipto(x * 100)),
            ],
            any::<bool>()
        )
            .prop_map(|(num, action, udp_only)| {
                let body = if udp_only {
                    vec![Cond::new(CondKind::Proto(17))]
                } else {
                    vec![]
                };
                Command::AddRule(RuleSpec {
                    number: Some(num * 100),
                    action,
                    prob: None,
                    extra: Default::default(),
                    body,
                })
            }),
        (1u16..=5).prop_map(|n| Command::DeleteRules(vec![n * 100])),
        n.clone().prop_map(|n| Command::DeletePipes(vec![n])),
        n.clone().prop_map(|n| Command::DeleteQueues(vec![n])),
        n.prop_map(|n| Command::DeleteScheds(vec![n])),
        Just(Command::FlushDummynet),
        any::<bool>().prop_map(|b| Command::Set(Setting::OnePass(b))),
        any::<bool>().prop_map(|b| Command::Set(Setting::DefaultToAccept(b))),
    ]
}

fn packet() -> impl Strategy<Value = PacketInfo> {
    (
        any::<u8>(),
        any::<u8>(),
        prop_oneof![Just(6u8), Just(17), Just(1), any::<u8>()],
        any::<u16>(),
        20u32..=9000,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(s, d, proto, port, len, v6, out)| PacketInfo {
            len,
            key: FlowKey {
                src: u128::from(s),
                dst: u128::from(d),
                sport: port,
                dport: port.rotate_left(3),
                proto,
                v6,
                flow_label: 0,
            },
            dir: if out { Direction::Out } else { Direction::In },
            recv_if: None,
            xmit_if: None,
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => command().prop_map(|c| Step::Cmd(Box::new(c))),
        8 => (0u64..2_000_000, packet()).prop_map(|(dt, info)| Step::Packet { dt, info }),
        1 => (0u64..100_000_000).prop_map(Step::Wait),
    ]
}

/// Runs the steps; returns every packet's fate. Panics if conservation breaks.
fn run(seed: u64, steps: &[Step]) -> Vec<Option<Fate>> {
    let mut h = Harness::new(seed);
    let mut now = 0;
    for s in steps {
        match s {
            Step::Cmd(c) => {
                // Refusals are fine (e.g. deleting a missing pipe) but must
                // change nothing. Time is brought to `now` first so that only
                // the command itself could make a difference.
                h.advance(now);
                let before = h.e.snapshot();
                if h.e.apply(now, Command::clone(c)).is_err() {
                    assert_eq!(h.e.snapshot(), before, "a refused {c:?} changed state");
                }
                h.advance(now);
            }
            Step::Packet { dt, info } => {
                now += dt;
                h.send(now, *info);
            }
            Step::Wait(dt) => {
                now += dt;
                h.run_until(now);
            }
        }
    }
    h.finish();
    h.check();
    assert!(
        h.fates.iter().all(Option::is_some),
        "a packet never came out"
    );
    h.fates
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_packet_is_accounted_for(seed in any::<u64>(), steps in proptest::collection::vec(step(), 1..160)) {
        run(seed, &steps);
    }

    #[test]
    fn a_seed_fixes_the_outcome(seed in any::<u64>(), steps in proptest::collection::vec(step(), 1..80)) {
        prop_assert_eq!(run(seed, &steps), run(seed, &steps));
    }
}

/// As [`step`], with commands that change the bounds on memory as well:
/// `instance_limit` (raised or lowered live) and flow-queueing schedulers,
/// whose bucket tables grow with their `flows`.
fn memory_step() -> impl Strategy<Value = Step> {
    let extra = prop_oneof![
        (1u32..=40).prop_map(|n| Command::Set(Setting::InstanceLimit(n))),
        (1u64..=300_000).prop_map(|b| Command::Set(Setting::HeldLimit(b))),
        (
            1u32..=4,
            prop_oneof![Just("fq_codel"), Just("fq_pie")],
            mask(),
            1u64..=64
        )
            .prop_map(|(s, kind, mask, flows)| Command::ConfigSched(
                s,
                SchedConfig {
                    kind: Some(kind.into()),
                    mask,
                    link: None,
                    params: vec![("flows".into(), flows)],
                }
            )),
    ];
    prop_oneof![
        6 => step(),
        1 => extra.prop_map(|c| Step::Cmd(Box::new(c))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the configuration and traffic, no part of the engine's
    /// memory report is ever above its worst case, and the queues and
    /// instances never outnumber `instance_limit` unless it was lowered
    /// under what existed.
    #[test]
    fn the_worst_case_memory_bounds_the_use(
        seed in any::<u64>(),
        first in (link(), flowset()),
        steps in proptest::collection::vec(memory_step(), 1..160),
    ) {
        let mut h = Harness::new(seed);
        h.apply(Command::Set(Setting::HeldLimit(100_000)));
        h.apply(Command::Set(Setting::InstanceLimit(16)));
        // UDP goes to a pipe with `mask all` from the start (until the steps
        // change it), so that floods of new flows meet the cap.
        let (link, flowset) = first;
        let flowset = FlowsetConfig { mask: FlowMask::ALL, ..flowset };
        if h.e.apply(0, Command::ConfigPipe(5, PipeConfig { link, flowset, sched: None })).is_ok() {
            h.apply(Command::AddRule(RuleSpec {
                number: Some(50),
                action: Action::Pipe(5),
                prob: None,
                extra: Default::default(),
                body: vec![Cond::new(CondKind::Proto(17))],
            }));
        }
        let mut now = 0;
        let mut lowered = false;
        for s in &steps {
            match s {
                Step::Cmd(c) => {
                    h.advance(now);
                    let before = h.e.memory();
                    let applied = h.e.apply(now, Command::clone(c)).is_ok();
                    if applied {
                        if let Command::Set(Setting::InstanceLimit(n)) = **c {
                            lowered |= u64::from(n) < before.queues.max(before.instances);
                        }
                    }
                    h.advance(now);
                }
                Step::Packet { dt, info } => {
                    now += dt;
                    h.send(now, *info);
                }
                Step::Wait(dt) => {
                    now += dt;
                    h.run_until(now);
                }
            }
            let m = h.e.memory();
            for p in &m.parts {
                let worst = p.worst.unwrap_or(u64::MAX);
                prop_assert!(p.now <= worst, "{}: {} now > {} at worst", p.name, p.now, worst);
            }
            if !lowered {
                let cap = u64::from(m.instance_limit);
                prop_assert!(m.queues <= cap && m.instances <= cap, "{m:?}");
            }
        }
        h.finish();
    }
}
