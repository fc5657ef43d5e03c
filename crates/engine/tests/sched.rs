//! The schedulers through the whole engine, on the virtual clock: saturated
//! classes share a rate-limited link within each algorithm's published
//! fairness bound, PRIO is strict, and queues joining, leaving, changing
//! weight or counting in the thousands stay correct. The harness checks
//! conservation (arrived = delivered + dropped + inside) after every step.
//!
//! The bounds, with `L` the largest packet (1500 bytes here):
//!
//! * DRR (RR), Shreedhar & Varghese, SIGCOMM 1995. Their invariant: what a
//!   queue carries over between visits is less than one packet, so its
//!   credit is always in `[0, Q_i + L)`, and in a round every backlogged
//!   queue is granted exactly once. From a start where every queue joins
//!   with one quantum, queue `i` has sent more than `g_i·Q_i − L` and at
//!   most `(g_i + 1)·Q_i` after `g_i` grants, and grants differ by at most
//!   one between queues: `|sent_i/Q_i − sent_j/Q_j| < 2 + L/min(Q_i, Q_j)`
//!   (their fairness measure, `2Q + L` bytes for equal quanta). Over an
//!   interval starting anywhere, the credit in hand at its start adds one
//!   quantum and one packet: `< 3 + L/Q_i + L/Q_j`.
//! * WF2Q+, Bennett & Zhang, SIGCOMM 1996 / ToN 1997. A packet starts only
//!   once its fluid start has passed, so a queue is never more than
//!   `L_k − φ_k·L_k` ahead of its fluid service; each packet ends at most
//!   one packet time after its fluid finish, so it is never more than
//!   `L + φ_k·L` behind. Over any interval in which queue `k` is backlogged
//!   it gets at least `φ_k·W − B_k` of the `W` bytes sent, with
//!   `B_k = L_k + L + φ_k·L` and `φ_k = w_k/Σw`. (Counting from the start of
//!   a busy period instead, `L + φ_k·L` would do: the unit tests in
//!   `wf2q.rs` check that form.)
//! * QFQ, Checconi, Rizzo & Valente, ToN 2013: the worst-case fair index
//!   `B_k = 3·φ_k·σ_i + 2·L`, `σ_i` the slot size of the group of `k`, the
//!   power of two at or above `lmax/w_k`; in bytes `φ_k·σ_i` is `w_k·σ_i`
//!   with `σ_i` in bytes per unit of weight. It is about twice WF2Q+'s: the
//!   price of rounded timestamps and groups.
//!
//! With every queue backlogged, the others' lower bounds give each queue an
//! upper bound too: `W_k <= φ_k·W + Σ_{j≠k} B_j`. A scheduler that ignored
//! weights or favoured a queue would drift from `φ_k·W` in proportion to
//! `W` and fail these within a few hundred packets.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::{Command, FlowMask, Nanos, PacketInfo, Verdict};

/// Largest packet in these tests.
const L: u64 = 1500;
/// 8 Mbit/s: a byte takes a microsecond.
const BW: u64 = 8_000_000;

/// Deterministic packet sizes in 64..=1500 (a 64-bit LCG, Knuth's MMIX
/// constants), so mixed-size runs need no RNG from the engine.
struct Sizes(u64);

impl Sizes {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        64 + ((self.0 >> 33) % 1437) as u32
    }
}

fn class_packet(class: usize, len: u32) -> PacketInfo {
    udp([10, 0, 0, 1], [10, 0, 0, 2], 7, 1000 + class as u16, len)
}

/// Pipe 1 at [`BW`] driven by scheduler 1 of type `kind`, and one queue per
/// weight: class `i` is queue `10 + i`, picked by destination port `1000 + i`.
fn weighted_link(kind: &str, params: Vec<(String, u64)>, weights: &[u32]) -> Harness {
    let mut h = Harness::new(7);
    h.apply(Command::Set(Setting::PipeSlotLimit(100_000)));
    h.apply(pipe(1, BW, 0));
    h.apply(Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some(kind.into()),
            params,
            ..Default::default()
        },
    ));
    for (i, &w) in weights.iter().enumerate() {
        set_class(&mut h, i, w);
        let port = 1000 + i as u16;
        h.apply(rule(
            100 + i as u16,
            Action::Queue(10 + i as u32),
            vec![Cond::new(CondKind::DstPort(vec![PortRange {
                lo: port,
                hi: port,
            }]))],
        ));
    }
    h
}

fn set_class(h: &mut Harness, class: usize, weight: u32) {
    h.apply(Command::ConfigQueue(
        10 + class as u32,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                weight,
                limit: QueueLimit::Slots(100_000),
                ..Default::default()
            },
        },
    ));
}

/// Departures in order: (class, bytes), where `class_of` maps a packet id to
/// its class. Only deliveries at or after `from` count.
fn departures(h: &Harness, from: Nanos, class_of: impl Fn(u64) -> usize) -> Vec<(usize, u64)> {
    let mut outs: Vec<(Nanos, usize, u64)> = h
        .outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.delivered() && o.at >= from)
        .map(|(i, o)| (o.at, i, o.payload))
        .collect();
    outs.sort();
    outs.iter()
        .map(|&(_, _, id)| (class_of(id), u64::from(h.sent[id as usize].1.len)))
        .collect()
}

/// The prefix of `order` during which every class is still backlogged: up
/// to and including the departure that empties the first class.
fn backlogged_window(order: &[(usize, u64)], sent_per_class: &[usize]) -> usize {
    let mut left = sent_per_class.to_vec();
    for (n, &(c, _)) in order.iter().enumerate() {
        left[c] -= 1;
        if left[c] == 0 {
            return n + 1;
        }
    }
    order.len()
}

/// The smallest power of two (>= 2^-8, group 0) at or above `lmax / w`, in
/// bytes per unit of weight: QFQ's `σ_i` for the group of a class.
fn qfq_sigma(lmax: u64, w: u64) -> f64 {
    let mut s = 1.0 / 256.0;
    while s * (w as f64) < lmax as f64 {
        s *= 2.0;
    }
    s
}

/// Per-class worst-case fair index in bytes, `B_k`.
fn bwfi(kind: &str, weights: &[u32], lmax: u64) -> Vec<f64> {
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    weights
        .iter()
        .map(|&w| {
            let phi = f64::from(w) / wsum;
            match kind {
                "wf2q+" => 2.0 * L as f64 + phi * L as f64,
                "qfq" => 3.0 * f64::from(w) * qfq_sigma(lmax, u64::from(w)) + 2.0 * L as f64,
                other => panic!("no B-WFI for {other}"),
            }
        })
        .collect()
}

/// Checks WF2Q+/QFQ's guarantee on every interval of `order` that starts at
/// a multiple of `step` (and at 0) and ends anywhere: each class within
/// `[φ_k·W − B_k, φ_k·W + Σ_{j≠k} B_j]`.
fn assert_fair_intervals(order: &[(usize, u64)], weights: &[u32], b: &[f64], step: usize) {
    let n = weights.len();
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let btot: f64 = b.iter().sum();
    for start in (0..order.len()).step_by(step.max(1)) {
        let mut bytes = vec![0u64; n];
        let mut total = 0u64;
        for (end, &(c, len)) in order.iter().enumerate().skip(start) {
            bytes[c] += len;
            total += len;
            for k in 0..n {
                let fluid = f64::from(weights[k]) / wsum * total as f64;
                let got = bytes[k] as f64;
                assert!(
                    got >= fluid - b[k] - 1e-6 && got <= fluid + (btot - b[k]) + 1e-6,
                    "interval {start}..={end}: class {k} (weight {}) got {got} bytes, \
                     fluid share {fluid:.0}, bound {:.0} below / {:.0} above",
                    weights[k],
                    b[k],
                    btot - b[k]
                );
            }
        }
    }
}

/// DRR from a start where every class joined with one quantum: at every
/// prefix, `|sent_i/Q_i − sent_j/Q_j| < 2 + L/min(Q_i, Q_j)`.
fn assert_drr_prefixes(order: &[(usize, u64)], quanta: &[u64]) {
    let mut bytes = vec![0u64; quanta.len()];
    for (n, &(c, len)) in order.iter().enumerate() {
        bytes[c] += len;
        for i in 0..quanta.len() {
            for j in 0..quanta.len() {
                let gap = bytes[i] as f64 / quanta[i] as f64 - bytes[j] as f64 / quanta[j] as f64;
                let bound = 2.0 + L as f64 / quanta[i].min(quanta[j]) as f64;
                assert!(
                    gap < bound,
                    "after {n}: class {i} sent {} (Q {}), class {j} sent {} (Q {}): \
                     normalized gap {gap:.3} >= {bound:.3}",
                    bytes[i],
                    quanta[i],
                    bytes[j],
                    quanta[j]
                );
            }
        }
    }
}

/// Loads `per_class` packets into every class at time 0 (sizes from
/// `sizes`, or `L` each), in round-robin order, and runs the link dry.
/// With `blocker`, a packet of one more class goes first and holds the
/// link while the others arrive, so all of them join before the first
/// real dequeue. Returns the departures and the packets sent per class.
fn saturate(
    h: &mut Harness,
    classes: usize,
    per_class: usize,
    sizes: Option<Sizes>,
    blocker: bool,
) -> (Vec<(usize, u64)>, Vec<usize>) {
    saturate_uneven(h, &vec![per_class; classes], sizes, blocker)
}

/// [`saturate`] with `per_class[c]` packets for class `c`.
fn saturate_uneven(
    h: &mut Harness,
    per_class: &[usize],
    mut sizes: Option<Sizes>,
    blocker: bool,
) -> (Vec<(usize, u64)>, Vec<usize>) {
    let classes = per_class.len();
    let mut class_of = Vec::new();
    if blocker {
        class_of.push(classes);
        h.send(0, class_packet(classes, L as u32));
    }
    let rounds = per_class.iter().copied().max().unwrap_or(0);
    for round in 0..rounds {
        for (c, &n) in per_class.iter().enumerate() {
            if round < n {
                let len = sizes.as_mut().map_or(L as u32, Sizes::next);
                class_of.push(c);
                h.send(0, class_packet(c, len));
            }
        }
    }
    h.finish();
    assert_eq!(h.delivered(), class_of.len(), "nothing may be lost");
    let mut order = departures(h, 0, |id| class_of[id as usize]);
    if blocker {
        assert_eq!(order[0].0, classes, "the blocker went first");
        order.remove(0);
    } else {
        // The first packet was dequeued alone, before the others arrived.
        order.remove(0);
    }
    let mut sent = per_class.to_vec();
    if !blocker {
        sent[0] -= 1;
    }
    (order, sent)
}

#[test]
fn rr_shares_within_the_deficit_bound() {
    for mixed in [false, true] {
        let weights = [1, 2, 5];
        let mut h = weighted_link("rr", vec![], &weights);
        // The blocker is class 3, weight 1.
        set_class(&mut h, 3, 1);
        h.apply(rule(
            103,
            Action::Queue(13),
            vec![Cond::new(CondKind::DstPort(vec![PortRange {
                lo: 1003,
                hi: 1003,
            }]))],
        ));
        let sizes = mixed.then_some(Sizes(42));
        let (order, sent) = saturate(&mut h, 3, 600, sizes, true);
        let window = backlogged_window(&order, &sent);
        assert!(window > 900, "window {window}");
        let quanta: Vec<u64> = weights.iter().map(|&w| u64::from(w) * 1500).collect();
        assert_drr_prefixes(&order[..window], &quanta);
        // Interval form, starting anywhere in the window.
        for start in (0..window).step_by(37) {
            let mut bytes = [0u64; 3];
            for &(c, len) in &order[start..window] {
                bytes[c] += len;
                for i in 0..3 {
                    for j in 0..3 {
                        let gap =
                            bytes[i] as f64 / quanta[i] as f64 - bytes[j] as f64 / quanta[j] as f64;
                        let bound = 3.0 + L as f64 / quanta[i] as f64 + L as f64 / quanta[j] as f64;
                        assert!(gap < bound, "from {start}: {bytes:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn rr_lmax_sets_the_quantum() {
    // Base 64 and 1000-byte packets: weight 1 needs 16 rounds per packet,
    // weight 4 four; shares still follow the weights.
    let weights = [1, 4];
    let mut h = weighted_link("rr", vec![("lmax".into(), 64)], &weights);
    let (order, sent) = saturate(&mut h, 2, 300, None, false);
    let window = backlogged_window(&order, &sent);
    let mut n = [0usize; 2];
    for &(c, _) in &order[..window] {
        n[c] += 1;
    }
    // 1:4 in packets, within a round's worth plus a packet each side.
    assert!(
        (n[1] as f64 / n[0] as f64 - 4.0).abs() < 0.1,
        "{n:?} over {window}"
    );
}

#[test]
fn wf2q_and_qfq_shares_within_their_worst_case_fair_index() {
    for kind in ["wf2q+", "qfq"] {
        for mixed in [false, true] {
            let weights = [1, 2, 5, 13];
            let mut h = weighted_link(kind, vec![], &weights);
            let sizes = mixed.then_some(Sizes(7));
            let (order, sent) = saturate(&mut h, 4, 500, sizes, false);
            let window = backlogged_window(&order, &sent);
            assert!(window > 500, "{kind}: window {window}");
            let b = bwfi(kind, &weights, 1500);
            assert_fair_intervals(&order[..window], &weights, &b, 50);
        }
    }
}

#[test]
fn a_heavy_queue_among_many_light_ones_is_not_held_back() {
    // One queue of weight 40 and twenty of weight 1: the heavy one must be
    // served about every 1.5 packets even when many light queues are
    // eligible at once. Serving eligible queues in the wrong order (not by
    // finish time, or QFQ not taking the first group of ER) lets it fall
    // behind by many packets.
    for kind in ["wf2q+", "qfq"] {
        let mut weights = vec![40];
        weights.extend([1; 20]);
        let mut h = weighted_link(kind, vec![], &weights);
        let mut per_class = vec![600];
        per_class.extend([60; 20]);
        let (order, sent) = saturate_uneven(&mut h, &per_class, Some(Sizes(5)), false);
        let window = backlogged_window(&order, &sent);
        assert!(window > 800, "{kind}: window {window}");
        let b = bwfi(kind, &weights, 1500);
        assert_fair_intervals(&order[..window], &weights, &b, 25);
    }
}

#[test]
fn qfq_lmax_and_weights_across_groups() {
    // lmax 2000 (FreeBSD's maximum) and weights far apart put the classes in
    // different groups: 2000/1 → group 19, 2000/100 → group 13.
    let weights = [1, 7, 100];
    let mut h = weighted_link("qfq", vec![("lmax".into(), 2000)], &weights);
    let (order, sent) = saturate(&mut h, 3, 1200, Some(Sizes(3)), false);
    let window = backlogged_window(&order, &sent);
    let b = bwfi("qfq", &weights, 2000);
    assert_fair_intervals(&order[..window], &weights, &b, 100);
}

#[test]
fn qfq_and_wf2q_agree_on_long_run_shares() {
    let weights = [3, 10, 30, 57];
    let mut runs = Vec::new();
    for kind in ["wf2q+", "qfq"] {
        let mut h = weighted_link(kind, vec![], &weights);
        let (order, sent) = saturate(&mut h, 4, 2000, Some(Sizes(99)), false);
        let window = backlogged_window(&order, &sent);
        runs.push((order, window));
    }
    // Compare the same number of bytes: the shorter window.
    let cut = |order: &[(usize, u64)], total: u64| {
        let mut bytes = [0u64; 4];
        let mut sum = 0;
        for &(c, len) in order {
            if sum + len > total {
                break;
            }
            bytes[c] += len;
            sum += len;
        }
        bytes
    };
    let total = runs
        .iter()
        .map(|(o, w)| o[..*w].iter().map(|x| x.1).sum::<u64>())
        .min()
        .unwrap();
    let wf2q = cut(&runs[0].0, total);
    let qfq = cut(&runs[1].0, total);
    let (bw, bq) = (bwfi("wf2q+", &weights, 1500), bwfi("qfq", &weights, 1500));
    for k in 0..4 {
        // Both are within their bounds of the same fluid share (plus the
        // one packet the cut may leave out).
        let slack = bw.iter().sum::<f64>() + bq.iter().sum::<f64>() + L as f64;
        assert!(
            (wf2q[k] as f64 - qfq[k] as f64).abs() <= slack,
            "class {k}: wf2q+ {} vs qfq {} bytes of {total}",
            wf2q[k],
            qfq[k]
        );
        let share = |b: u64| b as f64 / total as f64;
        let fluid = f64::from(weights[k]) / 100.0;
        assert!((share(wf2q[k]) - fluid).abs() < 0.01, "{wf2q:?}");
        assert!((share(qfq[k]) - fluid).abs() < 0.01, "{qfq:?}");
    }
}

#[test]
fn prio_is_strict_and_fifo_within_a_level() {
    // Classes 0 and 1 at priority 2, class 2 at priority 1 (served first),
    // class 3 at priority 7; class 4 blocks the link first (priority 9).
    let weights = [2, 2, 1, 7, 9];
    let mut h = weighted_link("prio", vec![], &weights);
    let mut class_of = Vec::new();
    let send = |h: &mut Harness, t: Nanos, c: usize, class_of: &mut Vec<usize>| {
        class_of.push(c);
        h.send(t, class_packet(c, 1000))
    };
    send(&mut h, 0, 4, &mut class_of);
    // Interleaved arrivals of every class at t = 0.
    let mut level2 = Vec::new();
    for i in 0..20 {
        for c in [3, 0, 1, 2] {
            if i % 3 == 0 || c != 1 {
                let id = send(&mut h, 0, c, &mut class_of);
                if c < 2 {
                    level2.push(id);
                }
            }
        }
    }
    // Once class 2's burst is out (20 ms), and while the lower classes
    // drain, more priority-1 packets arrive.
    let mut t = 20 * MS;
    let mut late = Vec::new();
    for _ in 0..30 {
        t += 2_500 * US;
        late.push(send(&mut h, t, 2, &mut class_of));
    }
    h.finish();
    assert_eq!(h.delivered(), class_of.len());
    let order: Vec<(u64, usize)> = {
        let mut outs: Vec<(Nanos, u64)> = h.outputs.iter().map(|o| (o.at, o.payload)).collect();
        outs.sort();
        outs.iter()
            .map(|&(_, id)| (id, class_of[id as usize]))
            .collect()
    };
    // A 1000-byte packet takes 1 ms. Strictness: a packet of a class was
    // dequeued (1 ms before its departure) only when no packet of a better
    // class was waiting.
    let prio = |c: usize| weights[c];
    for &(id, c) in &order {
        let dequeued = h.departure(id) - MS;
        for &(other, oc) in &order {
            // Arrivals at the instant of a dequeue come after it, unless
            // the dequeue was that of an arrival finding the link idle.
            let sent_at = h.sent[other as usize].0;
            let arrived = sent_at < dequeued || (sent_at == dequeued && other < id);
            let waiting = arrived && h.departure(other) > dequeued;
            assert!(
                !(waiting && prio(oc) < prio(c) && other != id),
                "packet {id} (class {c}) dequeued at {dequeued} while {other} (class {oc}) waited"
            );
        }
    }
    // FIFO within level 2: queues 0 and 1 interleaved in arrival order.
    let level2_order: Vec<u64> = order
        .iter()
        .filter(|&&(_, c)| c < 2)
        .map(|&(id, _)| id)
        .collect();
    assert_eq!(level2_order, level2);
    // Late high-priority packets wait at most for the packet on the wire.
    for id in late {
        assert!(h.departure(id) - h.sent[id as usize].0 <= 2 * MS);
    }
}

#[test]
fn prio_serves_priority_0_before_1() {
    // FreeBSD's prio takes the weight as the priority, 0 (its default and
    // best) to 63. Class 1 (weight 1) is backlogged first; class 0's
    // packets, arriving later at weight 0, all go before class 1's rest.
    let weights = [0, 1];
    let mut h = weighted_link("prio", vec![], &weights);
    let ones: Vec<u64> = (0..10).map(|_| h.send(0, class_packet(1, 1000))).collect();
    let zeros: Vec<u64> = (0..5)
        .map(|_| h.send(100 * US, class_packet(0, 1000)))
        .collect();
    h.finish();
    assert_eq!(h.delivered(), 15);
    // Packet 0 of class 1 took the link at t = 0 (1 ms per packet).
    let last_zero = zeros.iter().map(|&id| h.departure(id)).max().unwrap();
    assert_eq!(last_zero, 6 * MS);
    assert!(ones[1..].iter().all(|&id| h.departure(id) > last_zero));
}

#[test]
fn weight_0_is_only_for_prio_queues() {
    let mut h = weighted_link("prio", vec![], &[0, 5]);
    // Another type under a weight-0 queue is refused, and so is a weight-0
    // queue under another type, and on a pipe (its own queue is FIFO).
    let to_wf2q = Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some("wf2q+".into()),
            ..Default::default()
        },
    );
    let e = h.e.apply(0, to_wf2q.clone()).unwrap_err().to_string();
    assert!(e.contains("queue 10 does not fit it: weight 0"), "{e}");
    set_class(&mut h, 0, 1);
    h.apply(to_wf2q);
    let zero = |sched| {
        Command::ConfigQueue(
            11,
            QueueConfig {
                sched: Some(sched),
                flowset: FlowsetConfig {
                    weight: 0,
                    ..Default::default()
                },
            },
        )
    };
    let e = h.e.apply(0, zero(1)).unwrap_err().to_string();
    assert!(e.contains("scheduler 1 is WF2Q+"), "{e}");
    // A scheduler that does not exist yet is checked when it is configured.
    h.apply(zero(7));
    let mut p = pipe(2, BW, 0);
    if let Command::ConfigPipe(_, cfg) = &mut p {
        cfg.flowset.weight = 0;
    }
    assert!(h.e.apply(0, p).unwrap_err().to_string().contains("FIFO"));
}

/// Class `class` (queue 10 + class) of weight 1 with `lmax` set on its flowset.
fn set_class_lmax(h: &mut Harness, class: usize, lmax: u32) -> Result<(), String> {
    let cmd = Command::ConfigQueue(
        10 + class as u32,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                weight: 1,
                lmax,
                limit: QueueLimit::Slots(100_000),
                ..Default::default()
            },
        },
    );
    h.e.apply(0, cmd).map_err(|e| e.to_string())
}

/// Bytes each class sent while all were backlogged.
fn backlogged_bytes(h: &mut Harness, classes: usize, len: u32) -> Vec<u64> {
    let ids: Vec<Vec<u64>> = (0..classes)
        .map(|c| (0..400).map(|_| h.send(0, class_packet(c, len))).collect())
        .collect();
    h.finish();
    let first_done = ids
        .iter()
        .map(|v| v.iter().map(|&id| h.departure(id)).max().unwrap())
        .min()
        .unwrap();
    ids.iter()
        .map(|v| {
            v.iter()
                .filter(|&&id| h.departure(id) <= first_done)
                .count() as u64
                * u64::from(len)
        })
        .collect()
}

#[test]
fn rr_quantum_is_weight_times_the_queues_lmax() {
    // FreeBSD's rr_new_queue: quantum = weight × the flowset's lmax. Equal
    // weights, lmax 500 against the default 1500: a 1:3 share of bytes.
    let mut h = weighted_link("rr", vec![], &[1, 1]);
    set_class_lmax(&mut h, 0, 500).unwrap();
    let bytes = backlogged_bytes(&mut h, 2, 100);
    let share = bytes[0] as f64 / (bytes[0] + bytes[1]) as f64;
    assert!((share - 0.25).abs() < 0.01, "{bytes:?}");
}

#[test]
fn qfq_groups_each_queue_by_its_lmax() {
    // QFQ files a class by lmax / weight and counts a packet at most at its
    // group's size (the safety net for packets over lmax). A queue that
    // declares lmax 200 but sends 1500-byte packets is counted ~256 bytes a
    // packet, so it outruns an equal-weight queue filed by the default 1500;
    // filed alike (the scheduler's lmax for both), they would share evenly.
    let mut h = weighted_link("qfq", vec![], &[1, 1]);
    set_class_lmax(&mut h, 0, 200).unwrap();
    let bytes = backlogged_bytes(&mut h, 2, 1500);
    let share = bytes[0] as f64 / (bytes[0] + bytes[1]) as f64;
    assert!(share > 0.75, "{bytes:?}");
    let mut even = weighted_link("qfq", vec![], &[1, 1]);
    let bytes = backlogged_bytes(&mut even, 2, 1500);
    // (Class 0 had the idle link first, and one packet more in hand.)
    assert!(bytes[0].abs_diff(bytes[1]) <= 2 * 1500, "{bytes:?}");
}

#[test]
fn lmax_bounds_are_the_schedulers() {
    // RR: 64..=2048 (rr_config); QFQ: 1..=2000 (qfq_new_fsk); others ignore it.
    let mut h = weighted_link("qfq", vec![], &[1]);
    let e = set_class_lmax(&mut h, 0, 2001).unwrap_err();
    assert!(
        e.contains("lmax 2001 is out of range 1..2000 bytes for QFQ"),
        "{e}"
    );
    set_class_lmax(&mut h, 0, 50).unwrap();
    let to_rr = Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some("rr".into()),
            ..Default::default()
        },
    );
    let e = h.e.apply(0, to_rr.clone()).unwrap_err().to_string();
    assert!(e.contains("queue 10 does not fit it: lmax 50"), "{e}");
    set_class_lmax(&mut h, 0, 2048).unwrap_err();
    set_class_lmax(&mut h, 0, 64).unwrap();
    h.apply(to_rr);
    set_class_lmax(&mut h, 0, 2048).unwrap();
    let mut h = weighted_link("wf2q+", vec![], &[1]);
    set_class_lmax(&mut h, 0, 5).unwrap();
}

#[test]
fn a_schedulers_refusal_comes_with_its_fields() {
    use dummynet_engine::params::ParamError;
    use dummynet_engine::{ConfigError, ConfigErrorKind};
    let mut h = weighted_link("qfq", vec![], &[1]);
    let cmd = Command::ConfigQueue(
        10,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                weight: 1,
                lmax: 2001,
                ..Default::default()
            },
        },
    );
    let e = h.e.apply(0, cmd).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Invalid);
    assert_eq!(
        e.message(),
        "queue 10: lmax 2001 is out of range 1..2000 bytes for QFQ; scheduler 1 is QFQ"
    );
    let ConfigError::Plugin {
        error: ParamError::OutOfRange(r),
        ..
    } = e
    else {
        panic!("{e:?}");
    };
    assert_eq!((r.name.as_str(), r.value.as_str()), ("lmax", "2001"));
    assert_eq!((r.min.as_str(), r.max.as_str()), ("1", "2000"));
}

/// `mask all` on one flowset of weight `w`: a queue per flow, by source port.
fn masked_link(kind: &str, weight: u32, limit: u32) -> Harness {
    let mut h = Harness::new(3);
    h.apply(Command::Set(Setting::PipeSlotLimit(100_000)));
    h.apply(pipe(1, BW, 0));
    h.apply(Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some(kind.into()),
            ..Default::default()
        },
    ));
    h.apply(Command::ConfigQueue(
        10,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig {
                weight,
                mask: FlowMask::ALL,
                limit: QueueLimit::Slots(limit),
                buckets: 65536,
                ..Default::default()
            },
        },
    ));
    h.apply(rule(100, Action::Queue(10), vec![]));
    h
}

fn flow_packet(flow: u32, len: u32) -> PacketInfo {
    udp(
        [10, 1, (flow >> 8) as u8, flow as u8],
        [10, 0, 0, 2],
        1,
        9,
        len,
    )
}

fn flows_in(h: &Harness) -> usize {
    h.e.snapshot()
        .flowsets
        .iter()
        .find(|f| f.number == 10)
        .map_or(0, |f| f.flows.len())
}

#[test]
fn queues_join_and_leave_and_shares_follow() {
    // Flows 0..3 saturate (each offers the whole link); flow 1 stops at 1 s
    // and its queue expires (remove_queue on an empty queue); flow 3 joins
    // at 3 s and may take the freed slot. Shares are checked on the windows
    // where the set of backlogged flows is fixed.
    for kind in ["rr", "qfq", "wf2q+"] {
        let mut h = masked_link(kind, 10, 20);
        let mut flow_of = Vec::new();
        let mut t: Nanos = 0;
        while t < 5 * SEC {
            for f in 0..4u32 {
                let on = match f {
                    1 => t < SEC,
                    3 => t >= 3 * SEC,
                    _ => true,
                };
                if on {
                    flow_of.push(f as usize);
                    h.send(t, flow_packet(f, 1000));
                }
            }
            t += MS; // 1000 bytes per ms per flow: each alone fills the link
        }
        let before_join = flows_in(&h);
        h.finish();
        let t = h.e.totals();
        assert_eq!(t.arrived, t.delivered + t.dropped());
        assert_eq!(before_join, 3, "{kind}: flow 1's queue expired");
        for (from, to, flows) in [
            (SEC / 10, SEC, vec![0, 1, 2]),
            (SEC + 100 * MS, 3 * SEC, vec![0, 2]),
            (3 * SEC + 100 * MS, 5 * SEC, vec![0, 2, 3]),
        ] {
            // Departures in [from, to), numbered by the window's flows.
            let mut outs: Vec<(Nanos, u64)> = h
                .outputs
                .iter()
                .filter(|o| o.delivered() && o.at >= from && o.at < to)
                .map(|o| (o.at, o.payload))
                .collect();
            outs.sort();
            let order: Vec<(usize, u64)> =
                outs.iter()
                    .map(|&(_, id)| {
                        let f = flow_of[id as usize];
                        let idx = flows.iter().position(|&x| x == f).unwrap_or_else(|| {
                            panic!("{kind}: flow {f} sent in a window without it")
                        });
                        (idx, 1000)
                    })
                    .collect();
            let weights = vec![10; flows.len()];
            match kind {
                "rr" => {
                    let mut bytes = vec![0u64; flows.len()];
                    for &(c, len) in &order {
                        bytes[c] += len;
                        let (max, min) = (bytes.iter().max(), bytes.iter().min());
                        let gap = (max.unwrap() - min.unwrap()) as f64 / 15_000.0;
                        // Equal quanta (15,000 bytes): 3 + 2L/Q.
                        assert!(gap < 3.0 + 2.0 * 0.1, "{kind} {from}: {bytes:?}");
                    }
                }
                _ => {
                    let b = bwfi(kind, &weights, 1500);
                    assert_fair_intervals(&order, &weights, &b, 200);
                }
            }
        }
    }
}

#[test]
fn a_weight_change_applies_to_the_following_service() {
    for kind in ["rr", "qfq", "wf2q+"] {
        let weights = [1, 3];
        let mut h = weighted_link(kind, vec![], &weights);
        let mut class_of = Vec::new();
        for _ in 0..1500 {
            for c in 0..2 {
                class_of.push(c);
                h.send(0, class_packet(c, 1000));
            }
        }
        // After 1 s (1000 packets), class 0 goes to weight 9.
        h.run_until(SEC);
        set_class(&mut h, 0, 9);
        h.finish();
        assert_eq!(h.delivered(), class_of.len());
        let after: Vec<(usize, u64)> = {
            let mut outs: Vec<(Nanos, u64)> = h
                .outputs
                .iter()
                .filter(|o| o.at > SEC + MS)
                .map(|o| (o.at, o.payload))
                .collect();
            outs.sort();
            outs.iter()
                .map(|&(_, id)| (class_of[id as usize], 1000))
                .collect()
        };
        let sent: Vec<usize> = (0..2)
            .map(|c| after.iter().filter(|x| x.0 == c).count())
            .collect();
        let window = backlogged_window(&after, &sent);
        assert!(window > 500, "{kind}: window {window}");
        let new = [9, 3];
        let mut n = [0u64; 2];
        for &(c, _) in &after[..window] {
            n[c] += 1;
        }
        let share0 = n[0] as f64 / window as f64;
        assert!(
            (share0 - 0.75).abs() < 0.02,
            "{kind}: class 0 share {share0} after the change, {n:?}"
        );
        if kind != "rr" {
            let b = bwfi(kind, &new, 1500);
            assert_fair_intervals(&after[..window], &new, &b, 100);
        }
    }
}

/// Sends `infos` at time `t` like [`Harness::send`] but checks conservation
/// once at the end instead of after each packet (which walks every queue:
/// quadratic with 10,000 flows).
fn send_all(h: &mut Harness, t: Nanos, infos: impl IntoIterator<Item = PacketInfo>) {
    h.run_until(t);
    for info in infos {
        let id = h.sent.len() as u64;
        h.sent.push((t, info));
        h.fates.push(None);
        match h.e.input(t, info, id) {
            Verdict::Pass { payload, rule } => {
                h.fates[payload as usize] = Some(Fate::Delivered { at: t, rule });
            }
            Verdict::Drop {
                payload, reason, ..
            } => {
                h.fates[payload as usize] = Some(Fate::Dropped { at: t, reason });
            }
            Verdict::Queued { .. } => h.bytes_in += u64::from(info.len),
        }
    }
    h.advance(t);
    h.check();
}

#[test]
fn ten_thousand_flows_each_get_their_turn() {
    const N: u32 = 10_000;
    for kind in ["rr", "qfq", "wf2q+", "fifo"] {
        let mut h = masked_link(kind, 5, 10);
        let mut flow_of = Vec::new();
        for round in 0..3 {
            flow_of.extend(0..N as usize);
            send_all(
                &mut h,
                0,
                (0..N).map(|f| flow_packet(f, if round == 1 { 200 } else { 1000 })),
            );
        }
        assert_eq!(flows_in(&h), N as usize);
        h.finish();
        assert_eq!(h.delivered(), flow_of.len());
        let order = departures(&h, 0, |id| flow_of[id as usize]);
        // Skip the first packet (dequeued alone); then, at every tenth of a
        // round, no flow is more than the algorithm's bound ahead of another.
        let mut bytes = vec![0u64; N as usize];
        for (n, &(f, len)) in order.iter().enumerate().skip(1) {
            bytes[f] += len;
            if n % 1000 == 0 && n < 2 * N as usize {
                let max = *bytes.iter().max().unwrap();
                let min = *bytes.iter().min().unwrap();
                // Equal weights: WF2Q+/QFQ within their B-WFI sums of the
                // fluid share; DRR within 2Q + L of each other (Q = 7500);
                // FIFO serves in arrival order, one round at a time.
                let bound = match kind {
                    "rr" => 2 * 7500 + L,
                    "fifo" => 1000,
                    k => {
                        let b = bwfi(k, &[5, 5], 1500)[0];
                        (2.0 * b) as u64
                    }
                };
                assert!(
                    max - min <= bound,
                    "{kind} after {n}: flows span {min}..{max} bytes"
                );
            }
        }
        // Every flow got all three packets through.
        let mut count = vec![0u8; N as usize];
        for &(f, _) in &order {
            count[f] += 1;
        }
        assert!(count.iter().all(|&c| c == 3));
    }
}

#[test]
fn schedulers_are_registered_with_freebsd_names_and_limits() {
    use dummynet_engine::sched;
    for (name, display) in [
        ("rr", "RR"),
        ("qfq", "QFQ"),
        ("prio", "PRIO"),
        ("fifo", "FIFO"),
        ("wf2q+", "WF2Q+"),
    ] {
        let t = sched::lookup(name).unwrap_or_else(|| panic!("{name} registered"));
        assert_eq!(t.display, display);
        assert!((t.new_instance)(&[]).is_ok());
    }
    let rr = sched::lookup("rr").unwrap();
    assert!((rr.new_instance)(&[("lmax".into(), 2048)]).is_ok());
    assert!((rr.new_instance)(&[("lmax".into(), 2049)]).is_err());
    let qfq = sched::lookup("qfq").unwrap();
    assert!((qfq.new_instance)(&[("lmax".into(), 2000)]).is_ok());
    assert!((qfq.new_instance)(&[("lmax".into(), 2001)]).is_err());
    // Through the engine: a bad parameter is refused at configuration.
    let mut h = Harness::new(1);
    h.apply(pipe(1, BW, 0));
    let bad = Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some("qfq".into()),
            params: vec![("lmax".into(), 0)],
            ..Default::default()
        },
    );
    assert!(h.e.apply(0, bad).is_err());
    // Only QFQ (like WF2Q+) must see every packet; the others may let a
    // packet that finds them idle go straight to the link.
    assert!(!qfq.idle_bypass && rr.idle_bypass && sched::lookup("prio").unwrap().idle_bypass);
}
