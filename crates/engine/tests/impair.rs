//! netem's and mahimahi's impairments on a dummynet pipe, on virtual time.
//!
//! Each test drives the engine with exact arrival times and checks what
//! comes out against what the impairment's definition says: exact times
//! where the definition is deterministic (overhead, slots, traces, reorder
//! gaps, schedules), rates and moments within bounds derived in the test
//! where it is random. Every step checks the books: arrived (originals and
//! copies) = delivered + dropped + inside, and inside matches what the
//! engine holds.

mod common;

use std::sync::Arc;

use common::{rule, udp, MS, SEC, US};
use dummynet_engine::config::{
    Action, Command, Correlated, Corrupt, DistTable, Distribution, Duplicate, Field, Fields,
    FlowsetConfig, Jitter, LinkConfig, LossModel, Overhead, PipeConfig, QueueLimit, Reorder,
    Schedule, Setting, Slot, Trace, TraceMode,
};
use dummynet_engine::rng::Probability;
use dummynet_engine::{DropReason, Engine, Nanos, PacketInfo, Payload, Verdict};

/// A packet that knows whether it is a copy, with bytes to corrupt.
#[derive(Debug, Clone, PartialEq)]
struct Pkt {
    id: u64,
    copy: bool,
    bytes: Vec<u8>,
}

impl Payload for Pkt {
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.bytes)
    }
    fn duplicate(&self) -> Option<Self> {
        Some(Pkt {
            copy: true,
            ..self.clone()
        })
    }
}

#[derive(Debug, Clone)]
struct Out {
    id: u64,
    copy: bool,
    at: Nanos,
    drop: Option<DropReason>,
    bytes: Vec<u8>,
}

struct Bench {
    e: Engine<Pkt>,
    sent: Vec<Nanos>,
    outs: Vec<Out>,
}

impl Bench {
    fn new(seed: u64) -> Self {
        let mut e = Engine::new(seed);
        e.apply(0, rule(100, Action::Pipe(1), vec![]))
            .expect("rule");
        // Room for the long queues of the saturating tests.
        e.apply(0, Command::Set(Setting::PipeSlotLimit(1_000_000)))
            .expect("slot limit");
        Bench {
            e,
            sent: Vec::new(),
            outs: Vec::new(),
        }
    }

    fn pipe(&mut self, now: Nanos, link: LinkConfig, flowset: FlowsetConfig) {
        self.apply(
            now,
            Command::ConfigPipe(
                1,
                PipeConfig {
                    link,
                    flowset,
                    sched: None,
                },
            ),
        );
    }

    fn apply(&mut self, now: Nanos, cmd: Command) {
        self.run_until(now);
        if let Err(e) = self.e.apply(now, cmd.clone()) {
            panic!("{cmd:?} refused: {e}");
        }
        self.collect(now);
    }

    fn send_bytes(&mut self, t: Nanos, info: PacketInfo, bytes: Vec<u8>) -> u64 {
        self.run_until(t);
        let id = self.sent.len() as u64;
        self.sent.push(t);
        let p = Pkt {
            id,
            copy: false,
            bytes,
        };
        match self.e.input(t, info, p) {
            Verdict::Pass { .. } => panic!("packet {id} bypassed the pipe"),
            Verdict::Drop {
                payload, reason, ..
            } => self.outs.push(Out {
                id,
                copy: false,
                at: t,
                drop: Some(reason),
                bytes: payload.bytes,
            }),
            Verdict::Queued { .. } => {}
        }
        self.collect(t);
        self.check();
        id
    }

    fn send(&mut self, t: Nanos, len: u32) -> u64 {
        self.send_bytes(
            t,
            udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, len),
            Vec::new(),
        )
    }

    fn collect(&mut self, now: Nanos) {
        while let Some(o) = self.e.poll(now) {
            assert!(o.at <= now);
            self.outs.push(Out {
                id: o.payload.id,
                copy: o.payload.copy,
                at: o.at,
                drop: o.drop,
                bytes: o.payload.bytes,
            });
        }
    }

    fn run_until(&mut self, t: Nanos) {
        while let Some(d) = self.e.next_deadline().filter(|&d| d <= t) {
            self.collect(d);
        }
        self.check();
    }

    fn finish(&mut self) {
        self.run_until(Nanos::MAX);
        assert_eq!(self.e.totals().inside, 0, "packets left inside");
    }

    fn check(&self) {
        let t = self.e.totals();
        assert!(t.conserved(), "conservation broken: {t:?}");
        assert_eq!(t.inside, self.e.held_packets(), "inside disagrees");
        assert_eq!(t.arrived, self.sent.len() as u64 + t.duplicated);
        assert_eq!(self.outs.len() as u64, t.delivered + t.dropped());
    }

    /// Delivery time of each original packet, by id (None if dropped or inside).
    fn departures(&self) -> Vec<Option<Nanos>> {
        let mut d = vec![None; self.sent.len()];
        for o in self.outs.iter().filter(|o| !o.copy && o.drop.is_none()) {
            d[o.id as usize] = Some(o.at);
        }
        d
    }

    /// The order originals were delivered in.
    fn delivery_order(&self) -> Vec<u64> {
        self.outs
            .iter()
            .filter(|o| !o.copy && o.drop.is_none())
            .map(|o| o.id)
            .collect()
    }
}

fn p(x: f64) -> Probability {
    Probability::new(x).expect("probability")
}

fn plain(p: f64) -> Correlated {
    Correlated::new(self::p(p), Probability::ZERO)
}

fn delay_link(delay: Nanos, jitter: Option<Jitter>) -> LinkConfig {
    LinkConfig {
        delay,
        jitter,
        ..Default::default()
    }
}

fn jitter(amount: Nanos, distribution: Distribution, unordered: bool) -> Jitter {
    Jitter {
        amount,
        correlation: Probability::ZERO,
        distribution,
        unordered,
    }
}

fn big_queue() -> FlowsetConfig {
    FlowsetConfig {
        limit: QueueLimit::Slots(100_000),
        ..Default::default()
    }
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Sends `n` packets `gap` apart through the pipe and returns each one's
/// time on the pipe, in ms.
fn delays(b: &mut Bench, n: usize, gap: Nanos) -> Vec<f64> {
    for i in 0..n {
        b.send(SEC + i as Nanos * gap, 100);
    }
    b.finish();
    b.departures()
        .iter()
        .zip(&b.sent)
        .map(|(d, s)| (d.expect("delivered") - s) as f64 / MS as f64)
        .collect()
}

// ------------------------------------------------------------------ jitter

#[test]
fn uniform_jitter_has_the_configured_mean_sd_and_range() {
    let mut b = Bench::new(1);
    let j = jitter(10 * MS, Distribution::Uniform, false);
    b.pipe(0, delay_link(100 * MS, Some(j)), FlowsetConfig::default());
    // 50 ms apart, wider than the 20 ms spread: order never holds a packet back.
    let d = delays(&mut b, 10_000, 50 * MS);
    let (mean, sd) = mean_sd(&d);
    // Uniform on [90, 110] ms: sd = 10/√3 = 5.774 ms. The mean of 10,000
    // draws has a standard error of 0.0577 ms: 5 of them is 0.29 ms. The
    // sample sd of a uniform (kurtosis 1.8) has a relative standard error
    // of √(0.8 / 4n) = 0.45%: 3% is over 6 of them.
    assert!((mean - 100.0).abs() < 0.29, "mean {mean}");
    assert!((sd / 5.7735 - 1.0).abs() < 0.03, "sd {sd}");
    let (lo, hi) = d
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(lo >= 90.0 && hi <= 110.0, "range {lo}..{hi}");
    // Both ends are reached (10,000 draws: the chance of none below 90.1
    // is (1 − 0.005)^10000 ≈ 2e-22).
    assert!(lo < 90.1 && hi > 109.9, "range {lo}..{hi}");
}

#[test]
fn a_dist_table_reproduces_its_own_distribution() {
    // A table of four values (−2, −1, +1, +2 standard deviations): each
    // packet's delay is 100 ms plus one of −10, −5, +5, +10 ms, a quarter each.
    let table = DistTable {
        name: "four".into(),
        values: vec![-16384, -8192, 8192, 16384],
    };
    let mut b = Bench::new(2);
    let j = jitter(5 * MS, Distribution::Table(Arc::new(table)), false);
    b.pipe(0, delay_link(100 * MS, Some(j)), FlowsetConfig::default());
    let d = delays(&mut b, 8_000, 50 * MS);
    for (v, want) in [(90.0, 0.25), (95.0, 0.25), (105.0, 0.25), (110.0, 0.25)] {
        let share = d.iter().filter(|&&x| x == v).count() as f64 / d.len() as f64;
        // sd of a share of 8,000 at 1/4: 0.0048; 5 of them 0.024.
        assert!((share - want).abs() < 0.024, "{v} ms: {share}");
    }
    assert_eq!(
        d.iter()
            .filter(|&&x| ![90.0, 95.0, 105.0, 110.0].contains(&x))
            .count(),
        0
    );
}

#[test]
fn delay_never_goes_below_zero() {
    let mut b = Bench::new(3);
    let j = jitter(10 * MS, Distribution::Uniform, true);
    b.pipe(0, delay_link(2 * MS, Some(j)), FlowsetConfig::default());
    let d = delays(&mut b, 2_000, 30 * MS);
    assert!(d.iter().all(|&x| (0.0..=12.0).contains(&x)));
    // About 40% of the draws fall below −2 ms and are clamped to 0.
    let zero = d.iter().filter(|&&x| x == 0.0).count();
    assert!((700..900).contains(&zero), "{zero} at zero");
}

#[test]
fn jitter_keeps_order_unless_unordered() {
    for unordered in [false, true] {
        let mut b = Bench::new(4);
        let j = jitter(10 * MS, Distribution::Uniform, unordered);
        b.pipe(0, delay_link(50 * MS, Some(j)), FlowsetConfig::default());
        // 1 ms apart, well inside the 20 ms spread.
        let d = delays(&mut b, 2_000, MS);
        let order = b.delivery_order();
        let in_order = order.windows(2).all(|w| w[0] < w[1]);
        let deps = b.departures();
        let never_earlier = deps.windows(2).all(|w| w[0] <= w[1]);
        if unordered {
            assert!(!in_order, "unordered jitter must let packets overtake");
            // Each packet keeps its own draw.
            assert!(d.iter().all(|&x| (40.0..=60.0).contains(&x)));
        } else {
            assert!(in_order && never_earlier, "ordered jitter reordered");
            // A packet held behind a later draw waits, never less than its own.
            // A packet held behind an earlier one's longer draw waits, never
            // less than its own draw and never past the longest draw of all.
            assert!(d.iter().all(|&x| (40.0..=60.0).contains(&x)));
        }
    }
}

// ------------------------------------------------------------------ reorder

#[test]
fn reorder_gap_five_sends_exactly_every_fifth_at_once() {
    let mut b = Bench::new(5);
    let link = LinkConfig {
        delay: 10 * MS,
        reorder: Some(Reorder {
            p: Correlated::new(Probability::ONE, Probability::ZERO),
            gap: 5,
        }),
        ..Default::default()
    };
    b.pipe(0, link, FlowsetConfig::default());
    for i in 0..100 {
        b.send(i * MS, 100);
    }
    b.finish();
    for (i, (d, s)) in b.departures().iter().zip(&b.sent).enumerate() {
        let want = if (i + 1) % 5 == 0 { *s } else { s + 10 * MS };
        assert_eq!(d.expect("delivered"), want, "packet {i}");
    }
    // And they overtook: packet 4 leaves before packets 0..3.
    assert_eq!(b.delivery_order()[0], 4);
}

#[test]
fn reorder_without_delay_is_refused() {
    let mut e: Engine<u64> = Engine::new(1);
    let link = LinkConfig {
        reorder: Some(Reorder {
            p: plain(0.25),
            gap: 1,
        }),
        ..Default::default()
    };
    let err = e
        .apply(
            0,
            Command::ConfigPipe(
                1,
                PipeConfig {
                    link,
                    flowset: FlowsetConfig::default(),
                    sched: None,
                },
            ),
        )
        .unwrap_err();
    assert!(err.message().contains("reorder needs a delay"), "{err}");
}

// ------------------------------------------------------------------ entry

#[test]
fn duplicates_are_packets_of_their_own() {
    let mut b = Bench::new(6);
    let fs = FlowsetConfig {
        duplicate: Some(Duplicate(plain(0.1))),
        ..big_queue()
    };
    b.pipe(0, delay_link(10 * MS, None), fs);
    let n = 50_000;
    for i in 0..n {
        b.send_bytes(
            i * 100 * US,
            udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100),
            vec![i as u8; 8],
        );
    }
    b.finish();
    let t = b.e.totals();
    // Binomial(50,000, 0.1): sd 67; 5 sd = 335.
    assert!(
        (t.duplicated as i64 - 5_000).abs() < 335,
        "{}",
        t.duplicated
    );
    assert_eq!(t.arrived, n + t.duplicated);
    assert_eq!(t.delivered, t.arrived, "nothing dropped");
    // Every copy leaves with its original, byte for byte, right after it.
    let copies: Vec<&Out> = b.outs.iter().filter(|o| o.copy).collect();
    assert_eq!(copies.len() as u64, t.duplicated);
    for c in copies {
        let orig = b
            .outs
            .iter()
            .find(|o| o.id == c.id && !o.copy)
            .expect("original");
        assert_eq!((c.at, &c.bytes), (orig.at, &orig.bytes));
    }
}

#[test]
fn a_copy_can_be_dropped_by_the_queue_limit() {
    let mut b = Bench::new(7);
    let link = LinkConfig {
        bw: 1_000_000,
        ..Default::default()
    };
    let fs = FlowsetConfig {
        duplicate: Some(Duplicate(Correlated::new(
            Probability::ONE,
            Probability::ZERO,
        ))),
        limit: QueueLimit::Slots(3),
        ..Default::default()
    };
    b.pipe(0, link, fs);
    // Ten 1000-byte packets at once: the first goes to the wire, its copy
    // and the next two fill the queue; everything later finds it full.
    for _ in 0..10 {
        b.send(0, 1000);
    }
    b.finish();
    let t = b.e.totals();
    assert_eq!(t.duplicated, 10);
    assert_eq!(t.arrived, 20);
    assert_eq!(t.delivered, 4);
    assert_eq!(t.drops_for(DropReason::QueueFull), 16);
}

#[test]
fn corrupt_flips_exactly_one_bit() {
    let mut b = Bench::new(8);
    let fs = FlowsetConfig {
        corrupt: Some(Corrupt(plain(0.05))),
        ..big_queue()
    };
    b.pipe(0, LinkConfig::default(), fs);
    let n = 40_000u64;
    let pattern: Vec<u8> = (0..64).map(|i| (i * 37) as u8).collect();
    for i in 0..n {
        b.send_bytes(
            i * US,
            udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64),
            pattern.clone(),
        );
    }
    b.finish();
    let mut hit = 0u64;
    for o in &b.outs {
        let flipped: u32 = o
            .bytes
            .iter()
            .zip(&pattern)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert!(flipped <= 1, "packet {} has {flipped} bits flipped", o.id);
        hit += u64::from(flipped);
    }
    assert_eq!(hit, b.e.totals().corrupted);
    // Binomial(40,000, 0.05): sd 43.6; 5 sd = 218.
    assert!((hit as i64 - 2_000).abs() < 218, "{hit}");
}

#[test]
fn random_loss_has_its_rate_and_reason() {
    let mut b = Bench::new(9);
    let fs = FlowsetConfig {
        loss: Some(LossModel::Random(plain(0.02))),
        ..big_queue()
    };
    b.pipe(0, LinkConfig::default(), fs);
    for i in 0..100_000 {
        b.send(i * US, 100);
    }
    b.finish();
    let lost = b.e.totals().drops_for(DropReason::Loss);
    // Binomial(100,000, 0.02): sd 44.3; 5 sd = 221.
    assert!((lost as i64 - 2_000).abs() < 221, "{lost}");
}

#[test]
fn gilbert_elliott_matches_its_closed_forms() {
    let (pp, r) = (0.01, 0.1);
    let mut b = Bench::new(10);
    let fs = FlowsetConfig {
        loss: Some(LossModel::GilbertElliott {
            p: p(pp),
            r: p(r),
            loss_bad: Probability::ONE,
            loss_good: Probability::ZERO,
        }),
        ..big_queue()
    };
    b.pipe(0, LinkConfig::default(), fs);
    let n = 400_000;
    for i in 0..n {
        b.send(i * US, 100);
    }
    b.finish();
    let mut lost = vec![false; n as usize];
    for o in b.outs.iter().filter(|o| o.drop == Some(DropReason::Loss)) {
        lost[o.id as usize] = true;
    }
    let rate = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
    let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() + usize::from(lost[0]);
    let mean_burst = lost.iter().filter(|&&l| l).count() as f64 / bursts as f64;
    // p/(p+r) = 0.0909 over ~3,300 bursts of mean 10 (geometric, sd ≈ 9.5):
    // the burst mean has a standard error of about 1.7%, the rate (bursts
    // and gaps both random) about 2.5%; 10% is 4 of them.
    let want = pp / (pp + r);
    assert!((rate / want - 1.0).abs() < 0.1, "rate {rate} vs {want}");
    assert!(
        (mean_burst / (1.0 / r) - 1.0).abs() < 0.1,
        "burst {mean_burst}"
    );
}

// ------------------------------------------------------------------ link

#[test]
fn overhead_is_billed_on_the_link() {
    // 400 bytes + 100 of overhead at 1 Mbit/s: 500 × 8 µs = 4 ms exactly.
    let mut b = Bench::new(11);
    let link = LinkConfig {
        bw: 1_000_000,
        overhead: Some(Overhead {
            bytes: 100,
            ..Default::default()
        }),
        ..Default::default()
    };
    b.pipe(0, link, FlowsetConfig::default());
    let a = b.send(0, 400);
    let c = b.send(0, 400);
    b.finish();
    assert_eq!(b.departures()[a as usize], Some(4 * MS));
    assert_eq!(b.departures()[c as usize], Some(8 * MS));

    // ATM: 100 + 10 bytes in 48-byte cells of 53: 3 cells, 159 bytes, 1.272 ms.
    let mut b = Bench::new(12);
    let link = LinkConfig {
        bw: 1_000_000,
        overhead: Some(Overhead {
            bytes: 10,
            cell_size: 48,
            cell_overhead: 5,
        }),
        ..Default::default()
    };
    b.pipe(0, link, FlowsetConfig::default());
    let a = b.send(0, 100);
    b.finish();
    assert_eq!(b.departures()[a as usize], Some(1_272 * US));
}

#[test]
fn slots_release_bursts_at_their_boundaries() {
    let mut b = Bench::new(13);
    let link = LinkConfig {
        delay: MS,
        slot: Some(Slot {
            min: 10 * MS,
            max: 10 * MS,
            packets: Some(2),
            bytes: None,
        }),
        ..Default::default()
    };
    b.pipe(0, link, FlowsetConfig::default());
    for _ in 0..6 {
        b.send(SEC, 100);
    }
    b.finish();
    // The first packet finds the link idle: a slot opens 10 ms later and
    // lets two through; each closed slot opens the next 10 ms on.
    let d: Vec<Nanos> = b
        .departures()
        .iter()
        .map(|d| d.expect("delivered"))
        .collect();
    let want: Vec<Nanos> = [11, 11, 21, 21, 31, 31]
        .iter()
        .map(|m| SEC + m * MS)
        .collect();
    assert_eq!(d, want);
}

#[test]
fn slots_without_a_budget_let_a_busy_period_through() {
    let mut b = Bench::new(14);
    let link = LinkConfig {
        bw: 8_000_000, // 1 byte per µs
        slot: Some(Slot {
            min: 5 * MS,
            max: 5 * MS,
            packets: None,
            bytes: None,
        }),
        ..Default::default()
    };
    b.pipe(0, link, FlowsetConfig::default());
    for _ in 0..3 {
        b.send(0, 1000);
    }
    // Much later, an isolated packet waits for a fresh slot.
    let late = b.send(SEC, 1000);
    b.finish();
    let d = b.departures();
    // Serialized back to back once the slot opens at 5 ms, no credit saved up.
    assert_eq!(d[..3], [Some(6 * MS), Some(7 * MS), Some(8 * MS)]);
    assert_eq!(d[late as usize], Some(SEC + 6 * MS));
}

fn trace_of(ms: &[u64], mode: TraceMode) -> Arc<Trace> {
    Arc::new(Trace {
        name: "test".into(),
        times: ms.iter().map(|m| m * MS).collect(),
        mode,
    })
}

fn traced(trace: Arc<Trace>, delay: Nanos) -> LinkConfig {
    LinkConfig {
        delay,
        trace: Some(trace),
        ..Default::default()
    }
}

#[test]
fn a_saturated_trace_link_departs_exactly_at_opportunities() {
    let mut b = Bench::new(15);
    // One opportunity every ms for a second, looping.
    let ms: Vec<u64> = (1..=1000).collect();
    b.pipe(
        0,
        traced(trace_of(&ms, TraceMode::Loop), 20 * MS),
        big_queue(),
    );
    let n = 2_000u64;
    for _ in 0..n {
        b.send(0, 1500);
    }
    b.finish();
    // Packet k (from 0) finishes in the opportunity where 1504·m first
    // covers 1500·(k + 1) bytes: m = ⌈1500 (k + 1) / 1504⌉, at m ms.
    for (k, d) in b.departures().iter().enumerate() {
        let m = (1500 * (k as u64 + 1)).div_ceil(1504);
        assert_eq!(d.expect("delivered"), m * MS + 20 * MS, "packet {k}");
    }
    // 2,000 packets past the first lap: looping works. What mahimahi
    // carries on a 1504-byte-per-ms trace: 12.032 Mbit/s, here 1504 bytes
    // per ms exactly over the 1995 ms it took.
    let last = b.departures()[n as usize - 1].expect("delivered") - 20 * MS;
    assert_eq!(last, 1995 * MS);
}

/// Issue 25 item 5: a dense trace (here a million opportunities at every
/// 1 ms instant; mahimahi's format allows it) is served a run at a time,
/// the run at one instant being one credit: the work per instant does not
/// grow with the run, and the link carries what its opportunities add up to.
#[test]
fn a_dense_trace_costs_one_step_per_instant() {
    let mut b = Bench::new(17);
    let mut ms = vec![0u64; 1_000_000];
    ms.push(1);
    b.pipe(
        0,
        traced(trace_of(&ms, TraceMode::Loop), 10 * MS),
        big_queue(),
    );
    // 3,000 packets at the trace's start wait for the next instant, 1 ms
    // (strictly after their arrival), where one run ends lap 0 and a run of
    // a million starts lap 1: room for all of them.
    for _ in 0..3_000 {
        b.send(0, 1500);
    }
    // The link idles, then one packet at 5.5 ms leaves at the 6 ms instant.
    let late = b.send(5_500 * US, 1500);
    b.finish();
    let d = b.departures();
    assert!(
        d[..3_000].iter().all(|&x| x == Some(11 * MS)),
        "{:?}",
        &d[..3]
    );
    assert_eq!(d[late as usize], Some(16 * MS));
    // Two instants of two runs each: 4 steps, not 2 million.
    assert_eq!(b.e.trace_runs(), 4);

    // A run is exactly the opportunities it stands for: four per instant
    // (one ending a lap, three starting the next) carry four 1504-byte
    // packets each ms, and no more.
    let mut b = Bench::new(18);
    b.pipe(
        0,
        traced(trace_of(&[0, 0, 0, 1], TraceMode::Loop), 0),
        big_queue(),
    );
    for _ in 0..40 {
        b.send(500 * US, 1504);
    }
    b.finish();
    for (i, d) in b.departures().iter().enumerate() {
        assert_eq!(*d, Some((1 + i as u64 / 4) * MS), "packet {i}");
    }
    assert_eq!(b.e.trace_runs(), 20);
}

#[test]
fn an_opportunity_that_finds_the_queue_empty_is_lost() {
    let mut b = Bench::new(16);
    b.pipe(
        0,
        traced(trace_of(&[1, 2, 3, 4], TraceMode::Once), 0),
        FlowsetConfig::default(),
    );
    // 1000 bytes use part of the 1 ms opportunity; the rest is lost, so the
    // next packet, arriving at 1.5 ms, waits for the 2 ms one.
    let a = b.send(500 * US, 1000);
    let c = b.send(1_500 * US, 1000);
    // Two packets at once: the second needs 1000 bytes, 504 are left of the
    // 3 ms opportunity, so it finishes in the 4 ms one.
    let d = b.send(2_500 * US, 1000);
    let e = b.send(2_500 * US, 1000);
    // A `once` trace is over after 4 ms: this packet stays inside.
    b.send(10 * MS, 100);
    b.run_until(SEC);
    let deps = b.departures();
    assert_eq!(deps[a as usize], Some(MS));
    assert_eq!(deps[c as usize], Some(2 * MS));
    assert_eq!(deps[d as usize], Some(3 * MS));
    assert_eq!(deps[e as usize], Some(4 * MS));
    assert_eq!(b.e.totals().inside, 1);
    assert_eq!(b.e.next_deadline(), None);
}

#[test]
fn equal_lines_are_several_opportunities() {
    let mut b = Bench::new(17);
    b.pipe(
        0,
        traced(trace_of(&[5, 5, 5, 10], TraceMode::Loop), 0),
        FlowsetConfig::default(),
    );
    for _ in 0..5 {
        b.send(0, 1504);
    }
    b.finish();
    let d: Vec<Nanos> = b
        .departures()
        .iter()
        .map(|d| d.expect("delivered"))
        .collect();
    // Three at 5 ms, one at 10 ms, then the next lap's 15 ms.
    assert_eq!(d, vec![5 * MS, 5 * MS, 5 * MS, 10 * MS, 15 * MS]);
}

#[test]
fn bw_and_trace_exclude_each_other() {
    let mut e: Engine<u64> = Engine::new(1);
    let link = LinkConfig {
        bw: 1_000_000,
        ..traced(trace_of(&[1], TraceMode::Loop), 0)
    };
    let err = e
        .apply(
            0,
            Command::ConfigPipe(
                1,
                PipeConfig {
                    link,
                    flowset: FlowsetConfig::default(),
                    sched: None,
                },
            ),
        )
        .unwrap_err();
    assert!(err.message().contains("exclude each other"), "{err}");
}

// ------------------------------------------------------------------ changes over time

fn modify(n: u32, link: LinkConfig, flowset: FlowsetConfig, fields: &[Field]) -> Command {
    Command::ModifyPipe(
        n,
        PipeConfig {
            link,
            flowset,
            sched: None,
        },
        fields.iter().copied().collect::<Fields>(),
    )
}

#[test]
fn a_scheduled_bandwidth_step_happens_exactly_at_its_time() {
    let mut b = Bench::new(18);
    let link = LinkConfig {
        bw: 1_000_000,
        delay: 5 * MS,
        ..Default::default()
    };
    b.pipe(0, link, big_queue());
    let faster = modify(
        1,
        LinkConfig {
            bw: 2_000_000,
            ..Default::default()
        },
        FlowsetConfig::default(),
        &[Field::Bw],
    );
    b.apply(
        0,
        Command::Schedule(Schedule {
            steps: vec![(SEC, faster)],
            every: None,
        }),
    );
    // 1250-byte packets back to back from 0.9 s: 10 ms each at 1 Mbit/s.
    // The one on the wire at 1 s (started 0.995 s) keeps its end, 1.005 s;
    // the rest take 5 ms each.
    for _ in 0..20 {
        b.send(900 * MS, 1250);
    }
    b.finish();
    let d: Vec<Nanos> = b
        .departures()
        .iter()
        .map(|d| d.expect("delivered") - 5 * MS)
        .collect();
    let mut want = Vec::new();
    let mut t = 900 * MS;
    while want.len() < 20 {
        t += if t < SEC { 10 * MS } else { 5 * MS };
        want.push(t);
    }
    assert_eq!(d, want);
    let st = b.e.schedule_stats();
    assert_eq!(
        (st.applied, st.failed, st.pending, st.max_late),
        (1, 0, 0, 0)
    );
}

#[test]
fn modify_keeps_queued_packets_and_other_options() {
    let mut b = Bench::new(19);
    let link = LinkConfig {
        bw: 1_000_000,
        delay: 50 * MS,
        ..Default::default()
    };
    let fs = FlowsetConfig {
        limit: QueueLimit::Slots(20),
        weight: 7,
        ..Default::default()
    };
    b.pipe(0, link, fs);
    for _ in 0..10 {
        b.send(0, 1250);
    }
    let lossy = FlowsetConfig {
        plr: Probability::ONE,
        ..Default::default()
    };
    b.apply(
        5 * MS,
        modify(1, LinkConfig::default(), lossy, &[Field::Plr]),
    );
    // Queued packets stay and keep their timing; new arrivals meet plr 1.
    let late = b.send(6 * MS, 1250);
    b.finish();
    let d = b.departures();
    for (k, dep) in d.iter().take(10).enumerate() {
        assert_eq!(*dep, Some((k as u64 + 1) * 10 * MS + 50 * MS), "packet {k}");
    }
    assert_eq!(d[late as usize], None);
    assert_eq!(b.e.totals().drops_for(DropReason::Plr), 1);
    let s = b.e.snapshot();
    let link = &s
        .links
        .iter()
        .find(|l| l.number == 1)
        .expect("pipe 1")
        .config;
    assert_eq!((link.bw, link.delay), (1_000_000, 50 * MS));
    let q = s
        .flowsets
        .iter()
        .find(|f| f.number == 1 + 131_072)
        .expect("queue");
    assert_eq!((q.limit, q.plr), (QueueLimit::Slots(20), Probability::ONE));
}

#[test]
fn a_repeating_schedule_takes_a_link_down_and_up() {
    let mut b = Bench::new(20);
    b.pipe(0, delay_link(MS, None), FlowsetConfig::default());
    let down = modify(
        1,
        LinkConfig::default(),
        FlowsetConfig {
            plr: Probability::ONE,
            ..Default::default()
        },
        &[Field::Plr],
    );
    let up = modify(
        1,
        LinkConfig::default(),
        FlowsetConfig::default(),
        &[Field::Plr],
    );
    b.apply(
        0,
        Command::Schedule(Schedule {
            steps: vec![(100 * MS, down), (200 * MS, up)],
            every: Some(300 * MS),
        }),
    );
    // One packet every 10 ms for 1.2 s: down during [100, 200) of every 300.
    for i in 0..120 {
        b.send(i * 10 * MS, 100);
    }
    // A repeating schedule never ends: run to a time, not to the last event.
    b.run_until(1_250 * MS);
    assert_eq!(b.e.totals().inside, 0);
    for (i, d) in b.departures().iter().enumerate() {
        let phase = (i as u64 * 10) % 300;
        assert_eq!(
            d.is_none(),
            (100..200).contains(&phase),
            "packet {i} at phase {phase}"
        );
    }
    assert_eq!(b.e.schedule_stats().applied, 8);
}

/// `at flush` stops a repeating schedule: the steps waiting are cancelled
/// and counted, what already ran stays, and a link left up stays up.
#[test]
fn cancelling_stops_a_repeating_schedule() {
    let mut b = Bench::new(22);
    b.pipe(0, delay_link(MS, None), FlowsetConfig::default());
    let plr = |p| {
        modify(
            1,
            LinkConfig::default(),
            FlowsetConfig {
                plr: p,
                ..Default::default()
            },
            &[Field::Plr],
        )
    };
    b.apply(
        0,
        Command::Schedule(Schedule {
            steps: vec![
                (100 * MS, plr(Probability::ONE)),
                (200 * MS, plr(Probability::ZERO)),
            ],
            every: Some(300 * MS),
        }),
    );
    b.apply(650 * MS, Command::CancelSchedules);
    let st = b.e.schedule_stats();
    assert_eq!((st.applied, st.pending, st.cancelled), (4, 0, 2));
    for i in 0..60 {
        b.send(650 * MS + i * 10 * MS, 100);
    }
    b.run_until(2 * SEC);
    assert!(b.departures().iter().all(Option::is_some));
    assert_eq!(b.e.schedule_stats().applied, 4);
    assert_eq!(b.e.next_deadline(), None);
}

#[test]
fn a_failed_scheduled_step_is_reported_and_changes_nothing() {
    let mut b = Bench::new(21);
    b.pipe(0, delay_link(MS, None), FlowsetConfig::default());
    let on_missing = modify(
        9,
        LinkConfig::default(),
        FlowsetConfig::default(),
        &[Field::Plr],
    );
    b.apply(
        0,
        Command::Schedule(Schedule {
            steps: vec![(SEC, on_missing)],
            every: None,
        }),
    );
    let before = b.e.snapshot().links;
    b.run_until(2 * SEC);
    let st = b.e.schedule_stats();
    assert_eq!((st.applied, st.failed), (0, 1));
    let (at, why) = st.last_error.expect("error kept");
    assert_eq!(at, SEC);
    assert!(why.contains("pipe 9 does not exist"), "{why}");
    assert_eq!(b.e.snapshot().links, before);
}

// ------------------------------------------------------------------ determinism

/// Pipe 1's fate for each of its packets, with or without a busy pipe 2
/// full of impairments alongside it.
fn pipe_one_fates(with_neighbour: bool) -> Vec<Option<Nanos>> {
    let mut b = Bench::new(22);
    let j = jitter(3 * MS, Distribution::Uniform, true);
    let fs = FlowsetConfig {
        plr: p(0.2),
        ..big_queue()
    };
    b.pipe(0, delay_link(10 * MS, Some(j)), fs);
    if with_neighbour {
        let link = LinkConfig {
            delay: 5 * MS,
            jitter: Some(jitter(2 * MS, Distribution::Uniform, false)),
            ..Default::default()
        };
        let fs = FlowsetConfig {
            loss: Some(LossModel::Random(plain(0.3))),
            duplicate: Some(Duplicate(plain(0.3))),
            ..big_queue()
        };
        b.apply(
            0,
            Command::ConfigPipe(
                2,
                PipeConfig {
                    link,
                    flowset: fs,
                    sched: None,
                },
            ),
        );
        b.apply(
            0,
            rule(
                50,
                Action::Pipe(2),
                vec![dummynet_engine::config::Cond::new(
                    dummynet_engine::config::CondKind::DstPort(vec![
                        dummynet_engine::config::PortRange { lo: 9, hi: 9 },
                    ]),
                )],
            ),
        );
    }
    let mut mine = Vec::new();
    for i in 0..2_000 {
        mine.push(b.send(i * MS, 100));
        if with_neighbour {
            b.send_bytes(
                i * MS + 1,
                udp([10, 0, 0, 3], [10, 0, 0, 4], 1, 9, 100),
                vec![],
            );
        }
    }
    b.finish();
    let d = b.departures();
    mine.iter().map(|&id| d[id as usize]).collect()
}

#[test]
fn another_pipe_changes_none_of_this_pipes_draws() {
    let alone = pipe_one_fates(false);
    let crowded = pipe_one_fates(true);
    assert_eq!(alone, crowded);
    // And the draws did something: about a fifth lost.
    let lost = alone.iter().filter(|d| d.is_none()).count();
    assert!((300..500).contains(&lost), "{lost}");
}

/// Every impairment is reached through its stage's list: with all of them
/// set, the engine accepts the pipe, each one's checks run (a bad value of
/// any one refuses the command), and the snapshot lists each one once,
/// under the name of the option that sets it.
#[test]
fn every_impairment_is_listed_checked_and_shown() {
    use dummynet_engine::impair::{Impairment, On, Stage};
    let link = LinkConfig {
        delay: 10 * MS,
        jitter: Some(Jitter {
            amount: MS,
            correlation: Probability::ZERO,
            distribution: Distribution::Uniform,
            unordered: false,
        }),
        reorder: Some(Reorder {
            p: plain(0.1),
            gap: 2,
        }),
        overhead: Some(Overhead {
            bytes: 24,
            ..Overhead::default()
        }),
        ..LinkConfig::default()
    };
    let flowset = FlowsetConfig {
        loss: Some(LossModel::Random(plain(0.01))),
        duplicate: Some(Duplicate(plain(0.01))),
        corrupt: Some(Corrupt(plain(0.01))),
        ..FlowsetConfig::default()
    };
    let names = |all: Vec<&dyn Impairment>| all.iter().map(|i| i.name()).collect::<Vec<_>>();
    assert_eq!(
        names(link.impairments().collect()),
        ["jitter", "reorder", "overhead"]
    );
    assert_eq!(
        names(flowset.impairments().collect()),
        ["loss", "duplicate", "corrupt"]
    );
    assert!(flowset.impairments().all(|i| i.stage() == Stage::Entry));
    assert!(link.impairments().all(|i| i.stage() != Stage::Entry));
    let mut b = Bench::new(30);
    b.pipe(0, link.clone(), flowset.clone());
    let snap = b.e.snapshot();
    let fs = snap
        .flowsets
        .iter()
        .find(|f| f.number == 1 + 131_072)
        .unwrap();
    let shown: Vec<String> = fs.impairments().map(|i| i.display()).collect();
    let want: Vec<String> = flowset.impairments().map(|i| i.display()).collect();
    assert_eq!(shown, want);
    // A refused value of any one refuses the whole command.
    let bad_reorder = LinkConfig {
        delay: 0,
        jitter: None,
        ..link.clone()
    };
    assert!(bad_reorder
        .impairments()
        .any(|i| i.check(On::Link(&bad_reorder)).is_err()));
    let refused = b.e.apply(
        0,
        Command::ConfigPipe(
            1,
            PipeConfig {
                link: bad_reorder,
                flowset,
                sched: None,
            },
        ),
    );
    assert!(refused.is_err());
    assert_eq!(b.e.snapshot().links[0].config, link);
}

#[test]
fn a_modify_of_entry_options_reaches_a_queue_that_exists() {
    // The pipe's queue is made plain; each modify must reach it: first
    // giving it impairments, then changing and removing them.
    let mut b = Bench::new(31);
    b.pipe(0, delay_link(MS, None), FlowsetConfig::default());
    let entry = |loss: Option<f64>, duplicate: Option<f64>, corrupt: Option<f64>| FlowsetConfig {
        loss: loss.map(|x| LossModel::Random(plain(x))),
        duplicate: duplicate.map(|x| Duplicate(plain(x))),
        corrupt: corrupt.map(|x| Corrupt(plain(x))),
        ..Default::default()
    };
    let fields = [Field::Loss, Field::Duplicate, Field::Corrupt];
    let steps = [
        (None, None, None),
        (None, Some(1.0), None),
        (Some(1.0), Some(1.0), None),
        (None, None, Some(1.0)),
        (None, None, None),
    ];
    let mut t = 0;
    let mut books = Vec::new();
    for (i, &(loss, duplicate, corrupt)) in steps.iter().enumerate() {
        if i > 0 {
            let cmd = modify(
                1,
                LinkConfig::default(),
                entry(loss, duplicate, corrupt),
                &fields,
            );
            b.apply(t, cmd);
        }
        for _ in 0..10 {
            t += MS;
            b.send(t, 100);
        }
        let totals = b.e.totals();
        books.push((
            totals.drops_for(DropReason::Loss),
            totals.duplicated,
            totals.corrupted,
        ));
    }
    b.finish();
    assert_eq!(
        books,
        [
            (0, 0, 0),
            (0, 10, 0),
            (10, 10, 0),
            (10, 10, 10),
            (10, 10, 10)
        ]
    );
}

// ------------------------------------------------------------ seed

/// What became of each of 400 packets sent 1 ms apart to pipe `nr`
/// (configured with `link` and a 30% loss, seed `seed` if any) on an engine
/// seeded `engine_seed`: `None` if dropped, else its time in the pipe. With
/// `crowd`, pipe 99 (jitter, loss, no seed of its own) carries three packets
/// between each two of them.
fn seeded_fates(engine_seed: u64, nr: u32, seed: Option<u64>, crowd: bool) -> Vec<Option<Nanos>> {
    use dummynet_engine::config::{Cond, CondKind, PortRange, Seed};
    let port = |p: u16| {
        vec![Cond::new(CondKind::DstPort(vec![PortRange {
            lo: p,
            hi: p,
        }]))]
    };
    let mut e: Engine<Pkt> = Engine::new(engine_seed);
    let ok = |r: Result<(), dummynet_engine::ConfigError>| r.expect("configured");
    ok(e.apply(0, rule(100, Action::Pipe(nr), port(1))));
    ok(e.apply(0, rule(200, Action::Pipe(99), port(2))));
    let lossy = |x: f64| FlowsetConfig {
        loss: Some(LossModel::Random(plain(x))),
        ..FlowsetConfig::default()
    };
    let link = LinkConfig {
        delay: 10 * MS,
        jitter: Some(jitter(5 * MS, Distribution::Uniform, true)),
        seed: seed.map(Seed),
        ..LinkConfig::default()
    };
    ok(e.apply(0, common::pipe_cfg(nr, link, lossy(0.3))));
    let other = LinkConfig {
        delay: 20 * MS,
        jitter: Some(jitter(10 * MS, Distribution::Uniform, true)),
        ..LinkConfig::default()
    };
    ok(e.apply(0, common::pipe_cfg(99, other, lossy(0.5))));
    let n = 400;
    let mut fates = vec![None; n];
    let drain = |e: &mut Engine<Pkt>, now: Nanos, fates: &mut Vec<Option<Nanos>>| {
        while let Some(o) = e.poll(now) {
            if let (Some(i), None) = (o.payload.id.checked_sub(1_000_000), o.drop) {
                fates[i as usize] = Some(o.at - i * MS);
            }
        }
    };
    let mut send = |e: &mut Engine<Pkt>, t: Nanos, id: u64, dport: u16| {
        while let Some(d) = e.next_deadline().filter(|&d| d <= t) {
            drain(e, d, &mut fates);
        }
        let pkt = Pkt {
            id,
            copy: false,
            bytes: Vec::new(),
        };
        let info = udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, dport, 500);
        if let Verdict::Pass { .. } = e.input(t, info, pkt) {
            panic!("packet {id} bypassed the pipes");
        }
    };
    for i in 0..n as u64 {
        send(&mut e, i * MS, 1_000_000 + i, 1);
        if crowd {
            for k in 1..=3 {
                send(&mut e, i * MS + k * 200 * US, i * 10 + k, 2);
            }
        }
    }
    while let Some(d) = e.next_deadline() {
        drain(&mut e, d, &mut fates);
    }
    assert_eq!(e.totals().inside, 0);
    fates
}

#[test]
fn a_pipes_seed_fixes_its_draws_whatever_else_the_engine_carries() {
    let alone = seeded_fates(1, 1, Some(42), false);
    let lost = alone.iter().filter(|f| f.is_none()).count();
    // Binomial(400, 0.3): mean 120, σ ≈ 9.2.
    assert!((80..160).contains(&lost), "{lost} of 400 lost");
    // Its jitter draws too: the times in the pipe vary within 10 ms ± 5 ms.
    let times: std::collections::BTreeSet<Nanos> = alone.iter().flatten().copied().collect();
    assert!(times.len() > 100 && times.iter().all(|t| (5 * MS..=15 * MS).contains(t)));
    // The same seed: the same drops and delays, with another pipe's traffic
    // in between, under another engine seed, on another pipe number.
    assert_eq!(seeded_fates(1, 1, Some(42), true), alone);
    assert_eq!(seeded_fates(7, 1, Some(42), true), alone);
    assert_eq!(seeded_fates(7, 5, Some(42), true), alone);
    // Another seed, other draws.
    let other = seeded_fates(1, 1, Some(43), false);
    assert_ne!(other, alone);
    assert_ne!(
        other.iter().map(Option::is_none).collect::<Vec<_>>(),
        alone.iter().map(Option::is_none).collect::<Vec<_>>()
    );
    // Without one, the pipe's draws are the engine seed's.
    assert_eq!(
        seeded_fates(1, 1, None, true),
        seeded_fates(1, 1, None, false)
    );
    assert_ne!(
        seeded_fates(1, 1, None, false),
        seeded_fates(2, 1, None, false)
    );
}

#[test]
fn a_pipes_seed_stays_through_config_and_modify_restarts_its_draws_keeping_packets() {
    use dummynet_engine::config::Seed;
    let lossy = || FlowsetConfig {
        loss: Some(LossModel::Random(plain(0.3))),
        ..big_queue()
    };
    let link = |seed: Option<u64>| LinkConfig {
        bw: 1_000_000,
        seed: seed.map(Seed),
        ..LinkConfig::default()
    };
    let seed_of = |b: &Bench| {
        let snap = b.e.snapshot();
        snap.links
            .iter()
            .find(|l| l.number == 1)
            .and_then(|l| l.config.seed)
    };
    // Which of `n` packets, sent 100 µs apart from `t` (far faster than
    // 1 Mbit/s drains 500 bytes), the loss took.
    let burst = |b: &mut Bench, t: Nanos, n: u64| -> Vec<bool> {
        let ids: Vec<u64> = (0..n).map(|i| b.send(t + i * 100 * US, 500)).collect();
        ids.iter()
            .map(|id| {
                b.outs
                    .iter()
                    .any(|o| o.id == *id && o.drop == Some(DropReason::Loss))
            })
            .collect()
    };
    let mut fresh = Bench::new(3);
    fresh.pipe(0, link(Some(42)), lossy());
    let first = burst(&mut fresh, 0, 200);

    let mut b = Bench::new(3);
    b.pipe(0, link(Some(7)), lossy());
    let under_7 = burst(&mut b, 0, 200);
    assert_ne!(under_7, first);
    let inside = b.e.totals().inside;
    assert!(inside > 100, "{inside} queued");
    // `pipe 1 modify seed 42`: the queued packets stay, and the draws
    // start again as a new pipe seeded 42 draws them.
    let t = 20 * MS + 1;
    b.apply(
        t,
        Command::ModifyPipe(
            1,
            PipeConfig {
                link: link(Some(42)),
                ..PipeConfig::default()
            },
            [Field::Seed].into_iter().collect(),
        ),
    );
    assert_eq!(seed_of(&b), Some(Seed(42)));
    assert!(b.e.totals().inside >= inside - 5, "{:?}", b.e.totals());
    assert_eq!(
        b.e.totals().dropped(),
        under_7.iter().filter(|x| **x).count() as u64
    );
    assert_eq!(burst(&mut b, t, 200), first);
    // `pipe 1 config` without a seed keeps it (and its draws go on).
    b.pipe(t + 30 * MS, link(None), lossy());
    assert_eq!(seed_of(&b), Some(Seed(42)));
    let next = burst(&mut fresh, 20 * MS, 200);
    assert_eq!(burst(&mut b, t + 30 * MS, 200), next);
    b.finish();
}

// ------------------------------------------------ registered impairments

fn registered(name: &str, params: &[(&str, u64)]) -> dummynet_engine::impair::Staged {
    let kind = dummynet_engine::impair::lookup(name).expect("registered");
    let p = params.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    dummynet_engine::impair::Staged::new(kind, p).expect("valid")
}

/// `drop-every 3` drops exactly the 3rd, 6th, 9th... arrival as `loss`,
/// counts on across a `modify` of something else, and starts counting
/// again when it is named anew.
#[test]
fn drop_every_drops_exactly_its_pattern_and_keeps_its_count() {
    let mut b = Bench::new(1);
    let fs = FlowsetConfig {
        staged: vec![registered("drop-every", &[("n", 3)])],
        ..big_queue()
    };
    b.pipe(0, LinkConfig::default(), fs.clone());
    let fs_again = || FlowsetConfig {
        staged: vec![registered("drop-every", &[("n", 3)])],
        ..big_queue()
    };
    for i in 0..7 {
        b.send(i * MS, 100);
    }
    // A change of `plr` (0 again) keeps the queue's count: 7 seen so far.
    b.apply(
        8 * MS,
        modify(1, LinkConfig::default(), fs.clone(), &[Field::Plr]),
    );
    for i in 7..10 {
        b.send(i * MS + 8 * MS, 100);
    }
    // Named again: the count starts over.
    let mut fields: Fields = std::iter::empty().collect();
    fields.insert_staged(0);
    b.apply(
        30 * MS,
        Command::ModifyPipe(
            1,
            PipeConfig {
                link: LinkConfig::default(),
                flowset: fs_again(),
                sched: None,
            },
            fields,
        ),
    );
    for i in 10..14 {
        b.send(i * MS + 30 * MS, 100);
    }
    b.finish();
    let dropped: Vec<(u64, Option<DropReason>)> = b
        .outs
        .iter()
        .filter(|o| o.drop.is_some())
        .map(|o| (o.id, o.drop))
        .collect();
    let loss = Some(DropReason::Loss);
    // Ids count from 0: arrivals 3, 6, 9 before the restart, then the 3rd after it.
    assert_eq!(dropped, vec![(2, loss), (5, loss), (8, loss), (12, loss)]);
}

/// `stall 20ms every 100ms from 0` on a 10 ms pipe: a packet leaving the
/// link inside a stall waits for its end, behind the ones ahead; the rest
/// wait their delay alone; every packet is delivered.
#[test]
fn a_stall_holds_what_leaves_in_it_until_it_ends() {
    let mut b = Bench::new(1);
    let link = LinkConfig {
        delay: 10 * MS,
        staged: vec![registered(
            "stall",
            &[("length", 20 * MS), ("every", 100 * MS), ("from", 0)],
        )],
        ..LinkConfig::default()
    };
    b.pipe(0, link, big_queue());
    let sent = [0, 5, 19, 20, 50, 100, 130];
    for &t in &sent {
        b.send(t * MS, 100);
    }
    b.finish();
    let at: Vec<Nanos> = b
        .departures()
        .into_iter()
        .map(|d| d.expect("delivered") / MS)
        .collect();
    // 0, 5 and 19 leave the link inside the stall [0, 20): out at 20 + 10.
    // 100 is in the next one [100, 120): out at 130.
    assert_eq!(at, vec![30, 30, 30, 30, 60, 130, 140]);
    assert_eq!(
        b.delivery_order(),
        (0..sent.len() as u64).collect::<Vec<_>>()
    );
}

/// A registered impairment is listed, shown and checked like the others:
/// on the wrong object it is refused, and the refusal changes nothing.
#[test]
fn a_registered_impairment_on_the_wrong_object_is_refused() {
    let mut e: Engine<Pkt> = Engine::new(1);
    let wrong = FlowsetConfig {
        staged: vec![registered("stall", &[("length", MS), ("every", 10 * MS)])],
        ..FlowsetConfig::default()
    };
    let err = e
        .apply(
            0,
            Command::ConfigPipe(
                1,
                PipeConfig {
                    link: LinkConfig::default(),
                    flowset: wrong,
                    sched: None,
                },
            ),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("`stall` is a link's impairment"),
        "{err}"
    );
    assert!(
        e.snapshot().links.is_empty(),
        "a refused command changes nothing"
    );
}
