//! AQMs on virtual time, against independent models.
//!
//! Each model is the reference pseudo-code of its specification (RFC 8289's
//! CoDel, RFC 8033's PIE, FreeBSD's `red_drops` for RED) on top of a small
//! FIFO queue + link simulation written here, with real timers where the
//! engine has none. The engine runs the same arrivals through a pipe; every
//! packet's fate (delivered at, or dropped at with a reason) and ECN mark
//! must be identical, which makes drop times, sojourn times and marks equal.
//! Random decisions use the engine's documented uniform draw
//! (`aqm::uniform`: one `next_u32` of the seeded RNG scaled by 2^-32) from
//! the queue's own stream ([`engine_stream`]), so a model with the same seed
//! draws the same numbers. Every engine step checks
//! the accounting: arrived = delivered + dropped + inside.

mod common;

use std::collections::VecDeque;

use common::{pipe_cfg, rule, udp, MS, SEC, US};
use dummynet_engine::aqm::pie::Pie;
use dummynet_engine::aqm::red::Red;
use dummynet_engine::aqm::{AqmState, AqmVerdict, Arrival, Departure, QueueState};
use dummynet_engine::config::*;
use dummynet_engine::rng::Rng;
use dummynet_engine::{Command, DropReason, Engine, Nanos, Payload, Totals, Verdict};

// ------------------------------------------------------------------ packets

/// What a test packet carries: an IPv4 or IPv6 header with the given ECN
/// bits, or no bytes at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    V4(u8),
    V6(u8),
    Opaque,
}

const NOT_ECT: u8 = 0b00;
const ECT1: u8 = 0b01;
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;

impl Wire {
    fn ect(self) -> bool {
        match self {
            Wire::V4(e) | Wire::V6(e) => e != NOT_ECT,
            Wire::Opaque => false,
        }
    }

    fn bytes(self, len: u32) -> Option<Vec<u8>> {
        match self {
            Wire::V4(ecn) => {
                let l = (len.min(65535) as u16).to_be_bytes();
                // DSCP AF11 so the ECN bits share a byte with other bits.
                let mut h = vec![
                    0x45,
                    0x28 | ecn,
                    l[0],
                    l[1],
                    0xbe,
                    0xef,
                    0x40,
                    0,
                    64,
                    17,
                    0,
                    0,
                    192,
                    0,
                    2,
                    1,
                    198,
                    51,
                    100,
                    7,
                ];
                let c = ones_complement_sum(&h);
                h[10..12].copy_from_slice(&(!c).to_be_bytes());
                Some(h)
            }
            Wire::V6(ecn) => {
                // Traffic class 0xb8 | ecn (DSCP EF), flow label 0x5a5a5.
                let tc = 0xb8 | ecn;
                let mut h = vec![0u8; 40];
                h[0] = 0x60 | (tc >> 4);
                h[1] = (tc << 4) | 0x5;
                h[2] = 0xa5;
                h[3] = 0xa5;
                Some(h)
            }
            Wire::Opaque => None,
        }
    }
}

fn ones_complement_sum(h: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for w in h.chunks(2) {
        acc += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The ECN bits of a header built by [`Wire::bytes`].
fn ecn_of(b: &[u8]) -> u8 {
    if b[0] >> 4 == 4 {
        b[1] & 0b11
    } else {
        (b[1] >> 4) & 0b11
    }
}

/// A payload that exposes its IP header to the engine.
#[derive(Debug)]
struct Pkt {
    id: usize,
    bytes: Option<Vec<u8>>,
}

impl Payload for Pkt {
    fn ip_bytes(&self) -> Option<&[u8]> {
        self.bytes.as_deref()
    }
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.bytes.as_deref_mut()
    }
}

/// One arrival of a scenario.
#[derive(Debug, Clone, Copy)]
struct Arr {
    t: Nanos,
    len: u32,
    wire: Wire,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Delivered(Nanos),
    Dropped(Nanos, DropReason),
}

/// Deterministic traffic: phases of (duration, mean bit rate), packet sizes
/// and headers picked by a 64-bit LCG of its own (not the engine's RNG).
fn traffic(seed: u64, phases: &[(Nanos, u64)], sizes: &[u32], wires: &[Wire]) -> Vec<Arr> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    let mut out = Vec::new();
    let (mut t, mut start) = (0, 0);
    for &(dur, rate) in phases {
        while t < start + dur {
            let len = sizes[next(sizes.len() as u64) as usize];
            let wire = wires[next(wires.len() as u64) as usize];
            out.push(Arr { t, len, wire });
            // Uniform gaps with the phase's mean rate for this size.
            let mean = u64::from(len) * 8 * SEC / rate;
            t += next(2 * mean + 1);
        }
        start += dur;
        t = t.max(start);
    }
    out
}

// ------------------------------------------------------------------ the engine

struct Run {
    e: Engine<Pkt>,
    arrs: Vec<Arr>,
    fates: Vec<Option<Fate>>,
    /// Delivered carrying CE that it did not carry when sent.
    marked: Vec<bool>,
    /// Outputs that say an AQM marked them (`Output::marked`).
    flagged: u64,
    sent: usize,
}

/// The random stream of pipe 1's queue in an engine seeded with `seed`.
fn engine_stream(seed: u64) -> Rng {
    dummynet_engine::pipes::queue_stream(
        seed,
        1 + 2 * dummynet_engine::config::DN_MAX_ID,
        &dummynet_engine::FlowKey::default(),
    )
}

impl Run {
    fn new(seed: u64, bw: u64, flowset: FlowsetConfig) -> Self {
        let mut e = Engine::new(seed);
        let link = LinkConfig {
            bw,
            ..Default::default()
        };
        e.apply(0, pipe_cfg(1, link, flowset)).expect("pipe");
        e.apply(0, rule(100, Action::Pipe(1), vec![]))
            .expect("rule");
        Run {
            e,
            arrs: Vec::new(),
            fates: Vec::new(),
            marked: Vec::new(),
            flagged: 0,
            sent: 0,
        }
    }

    fn send(&mut self, a: Arr) {
        self.run_until(a.t);
        let id = self.sent;
        self.sent += 1;
        self.arrs.push(a);
        self.fates.push(None);
        self.marked.push(false);
        let info = udp([10, 0, 0, 1], [10, 0, 0, 2], 5000, 6000, a.len);
        let payload = Pkt {
            id,
            bytes: a.wire.bytes(a.len),
        };
        match self.e.input(a.t, info, payload) {
            Verdict::Queued { .. } => {}
            Verdict::Drop {
                payload, reason, ..
            } => self.fates[payload.id] = Some(Fate::Dropped(a.t, reason)),
            Verdict::Pass { .. } => panic!("packet {id} bypassed the pipe"),
        }
        self.collect(a.t);
        self.check();
    }

    fn run_until(&mut self, t: Nanos) {
        while let Some(d) = self.e.next_deadline() {
            if d > t {
                break;
            }
            self.collect(d);
            self.check();
        }
    }

    fn collect(&mut self, now: Nanos) {
        while let Some(o) = self.e.poll(now) {
            let id = o.payload.id;
            assert!(self.fates[id].is_none(), "packet {id} came out twice");
            self.flagged += u64::from(o.marked);
            let sent = self.arrs[id].wire;
            let fate = match o.drop {
                None => {
                    if let Some(b) = &o.payload.bytes {
                        let now_ecn = ecn_of(b);
                        if let Wire::V4(_) = sent {
                            assert_eq!(ones_complement_sum(&b[..20]), 0xffff, "checksum of {id}");
                        }
                        let was = match sent {
                            Wire::V4(e) | Wire::V6(e) => e,
                            Wire::Opaque => unreachable!(),
                        };
                        assert!(now_ecn == was || now_ecn == CE, "ECN bits of {id} changed");
                        // Already-CE packets that get marked stay CE: count
                        // them through the totals instead.
                        self.marked[id] = now_ecn == CE && was != CE;
                        let mut original = sent.bytes(self.arrs[id].len).unwrap_or_default();
                        if self.marked[id] {
                            let mut b2 = b.clone();
                            // Only the ECN bits and the checksum may differ.
                            if let Wire::V4(_) = sent {
                                b2[1] = original[1];
                                b2[10..12].copy_from_slice(&original[10..12]);
                            } else {
                                b2[1] = original[1];
                            }
                            assert_eq!(b2, original, "packet {id} altered beyond ECN");
                        } else {
                            original.truncate(b.len());
                            assert_eq!(b, &original, "packet {id} altered");
                        }
                    }
                    Fate::Delivered(o.at)
                }
                Some(r) => Fate::Dropped(o.at, r),
            };
            self.fates[id] = Some(fate);
        }
    }

    fn check(&self) {
        let t = self.e.totals();
        assert!(t.conserved(), "conservation broken: {t:?}");
        assert_eq!(
            t.inside,
            self.e.held_packets(),
            "inside disagrees with the queues"
        );
        assert_eq!(t.arrived, self.sent as u64);
        let decided = self.fates.iter().filter(|f| f.is_some()).count() as u64;
        assert_eq!(decided, t.delivered + t.dropped());
    }

    fn finish(mut self) -> (Vec<Fate>, Vec<bool>, Totals) {
        self.run_until(Nanos::MAX);
        assert_eq!(self.e.next_deadline(), None);
        let t = self.e.totals();
        assert_eq!(t.inside, 0, "packets left inside");
        // Each mark counted is on its packet's output, for the data
        // plane's event log.
        assert_eq!(self.flagged, t.marks, "outputs flagged marked");
        let fates = self
            .fates
            .iter()
            .enumerate()
            .map(|(i, f)| f.unwrap_or_else(|| panic!("packet {i} never came out")))
            .collect();
        (fates, self.marked, t)
    }
}

fn run_engine(
    seed: u64,
    bw: u64,
    flowset: FlowsetConfig,
    arrs: &[Arr],
) -> (Vec<Fate>, Vec<bool>, Totals) {
    let mut r = Run::new(seed, bw, flowset);
    for &a in arrs {
        r.send(a);
    }
    r.finish()
}

// ------------------------------------------------------------------ the model

#[derive(Debug, Clone, Copy)]
struct MPkt {
    id: usize,
    arrival: Nanos,
    len: u32,
    ect: bool,
}

#[derive(Debug, Default)]
struct MQueue {
    pkts: VecDeque<MPkt>,
    bytes: u64,
}

impl MQueue {
    fn pop(&mut self) -> Option<MPkt> {
        let p = self.pkts.pop_front()?;
        self.bytes -= u64::from(p.len);
        Some(p)
    }
    fn push(&mut self, p: MPkt) {
        self.bytes += u64::from(p.len);
        self.pkts.push_back(p);
    }
    fn len(&self) -> usize {
        self.pkts.len()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MVerdict {
    Accept,
    Drop,
    Mark,
}

/// An AQM in the model world.
trait Model {
    /// A packet arrives at `q` (it is not in it yet).
    fn enqueue(&mut self, now: Nanos, p: &MPkt, q: &MQueue) -> MVerdict;
    /// The link asks for a packet: the one to send and whether it is marked;
    /// packets dropped on the way go to `drops`.
    fn dequeue(
        &mut self,
        now: Nanos,
        q: &mut MQueue,
        drops: &mut Vec<MPkt>,
    ) -> Option<(MPkt, bool)>;
    fn next_timer(&self) -> Option<Nanos> {
        None
    }
    fn fire(&mut self, _now: Nanos, _q: &MQueue) {}
    /// Called after each arrival and each departure.
    fn observe(&mut self, _now: Nanos) {}
}

struct Outcome {
    fates: Vec<Fate>,
    marked: Vec<bool>,
    /// Time from arrival to the start of transmission, for sent packets.
    sojourn: Vec<Option<Nanos>>,
}

/// FreeBSD's queue limit (dn_enqueue): bytes already queued above a byte
/// limit, or as many packets as slots.
fn model_full(limit: QueueLimit, q: &MQueue) -> bool {
    match limit {
        QueueLimit::Bytes(b) => q.bytes > b,
        QueueLimit::Slots(s) => q.len() >= s as usize,
    }
}

fn tx_time(len: u32, bw: u64) -> Nanos {
    let bits = u128::from(len) * 8 * u128::from(SEC);
    assert_eq!(
        bits % u128::from(bw),
        0,
        "pick sizes with whole-ns bit times"
    );
    (bits / u128::from(bw)) as Nanos
}

/// A FIFO queue in front of a `bw` link: a dequeue whenever the link is free
/// (also when the queue is empty, as a driver polls), timers first, then the
/// link, then arrivals when several fall at the same instant.
fn simulate(arrs: &[Arr], bw: u64, limit: QueueLimit, m: &mut dyn Model) -> Outcome {
    let n = arrs.len();
    let mut fates: Vec<Option<Fate>> = vec![None; n];
    let mut marked = vec![false; n];
    let mut sojourn = vec![None; n];
    let mut q = MQueue::default();
    let mut busy_until: Option<Nanos> = None;
    let mut i = 0;
    // Until the last packet has left (timers alone would run forever).
    while i < n || busy_until.is_some() {
        let ta = arrs.get(i).map(|a| a.t);
        let tt = m.next_timer();
        let Some(now) = [tt, busy_until, ta].into_iter().flatten().min() else {
            break;
        };
        if tt == Some(now) {
            m.fire(now, &q);
            continue;
        }
        let serve = if busy_until == Some(now) {
            busy_until = None;
            true
        } else {
            let a = arrs[i];
            let p = MPkt {
                id: i,
                arrival: now,
                len: a.len,
                ect: a.wire.ect(),
            };
            i += 1;
            let v = m.enqueue(now, &p, &q);
            if v == MVerdict::Drop || (v == MVerdict::Mark && !p.ect) {
                fates[p.id] = Some(Fate::Dropped(now, DropReason::Aqm));
            } else if model_full(limit, &q) {
                fates[p.id] = Some(Fate::Dropped(now, DropReason::QueueFull));
            } else {
                marked[p.id] = v == MVerdict::Mark;
                q.push(p);
            }
            let queued = fates[p.id].is_none();
            m.observe(now);
            // An idle link is woken by a packet it can send.
            queued && busy_until.is_none()
        };
        if serve {
            let had = q.len() > 0;
            let mut drops = Vec::new();
            let sent = m.dequeue(now, &mut q, &mut drops);
            for d in drops {
                fates[d.id] = Some(Fate::Dropped(now, DropReason::Aqm));
            }
            if let Some((p, mk)) = sent {
                marked[p.id] |= mk && p.ect;
                let end = now + tx_time(p.len, bw);
                fates[p.id] = Some(Fate::Delivered(end));
                sojourn[p.id] = Some(now - p.arrival);
                busy_until = Some(end);
            }
            if had {
                m.observe(now);
            }
        }
    }
    Outcome {
        fates: fates
            .into_iter()
            .map(|f| f.expect("every packet decided"))
            .collect(),
        marked,
        sojourn,
    }
}

/// Engine and model agree packet by packet.
fn assert_same(engine: &(Vec<Fate>, Vec<bool>, Totals), model: &Outcome, arrs: &[Arr], bw: u64) {
    let (fates, marked, totals) = engine;
    assert_eq!(fates.len(), model.fates.len());
    for (i, (e, m)) in fates.iter().zip(&model.fates).enumerate() {
        assert_eq!(
            e, m,
            "packet {i} ({:?}): engine {e:?}, model {m:?}",
            arrs[i]
        );
        if let (Fate::Delivered(at), Some(s)) = (e, model.sojourn[i]) {
            // Delivery ends the transmission that started when it left the queue.
            assert_eq!(
                at - tx_time(arrs[i].len, bw) - arrs[i].t,
                s,
                "sojourn of {i}"
            );
        }
    }
    let sent_ce = |i: usize| matches!(arrs[i].wire, Wire::V4(CE) | Wire::V6(CE));
    for (i, (&e, &m)) in marked.iter().zip(&model.marked).enumerate() {
        if !sent_ce(i) {
            assert_eq!(e, m, "mark of packet {i}");
        }
    }
    let model_marks = model.marked.iter().filter(|&&m| m).count() as u64;
    assert_eq!(totals.marks, model_marks, "marks counted");
    let aqm_drops = model
        .fates
        .iter()
        .filter(|f| matches!(f, Fate::Dropped(_, DropReason::Aqm)))
        .count() as u64;
    assert_eq!(totals.drops_for(DropReason::Aqm), aqm_drops);
}

// ------------------------------------------------------------------ CoDel (RFC 8289)

/// RFC 8289 section 5's pseudo-code, with FreeBSD's choices for what the RFC
/// leaves open: maxpacket is the largest packet enqueued (starting at 500),
/// and ECN marks the packet instead of dropping it (count and drop_next
/// advance as for a drop, and the packet is sent).
struct CodelModel {
    target: Nanos,
    interval: Nanos,
    ecn: bool,
    first_above_time: Nanos,
    drop_next: Nanos,
    count: u32,
    lastcount: u32,
    dropping: bool,
    maxpacket: u64,
    /// Coverage: times the dropping state was entered, and re-entered with
    /// the previous cycle's rate.
    entries: usize,
    reentries_with_memory: usize,
}

impl CodelModel {
    fn new(c: &CodelConfig) -> Self {
        CodelModel {
            target: c.target,
            interval: c.interval,
            ecn: c.ecn,
            first_above_time: 0,
            drop_next: 0,
            count: 0,
            lastcount: 0,
            dropping: false,
            maxpacket: 500,
            entries: 0,
            reentries_with_memory: 0,
        }
    }

    fn control_law(&self, t: Nanos, count: u32) -> Nanos {
        t + (self.interval as f64 / f64::from(count).sqrt()) as Nanos
    }

    fn dodequeue(&mut self, now: Nanos, q: &mut MQueue) -> (Option<MPkt>, bool) {
        let Some(p) = q.pop() else {
            self.first_above_time = 0;
            return (None, false);
        };
        let sojourn_time = now - p.arrival;
        let mut ok_to_drop = false;
        if sojourn_time < self.target || q.bytes <= self.maxpacket {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now + self.interval;
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        (Some(p), ok_to_drop)
    }
}

impl Model for CodelModel {
    fn enqueue(&mut self, _now: Nanos, p: &MPkt, _q: &MQueue) -> MVerdict {
        self.maxpacket = self.maxpacket.max(u64::from(p.len));
        MVerdict::Accept
    }

    fn dequeue(
        &mut self,
        now: Nanos,
        q: &mut MQueue,
        drops: &mut Vec<MPkt>,
    ) -> Option<(MPkt, bool)> {
        let (mut p, mut ok_to_drop) = self.dodequeue(now, q);
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            }
            while now >= self.drop_next && self.dropping {
                let pkt = p?;
                if self.ecn && pkt.ect {
                    self.count += 1;
                    self.drop_next = self.control_law(self.drop_next, self.count);
                    return Some((pkt, true));
                }
                drops.push(pkt);
                self.count += 1;
                (p, ok_to_drop) = self.dodequeue(now, q);
                if !ok_to_drop {
                    self.dropping = false;
                } else {
                    self.drop_next = self.control_law(self.drop_next, self.count);
                }
            }
        } else if ok_to_drop {
            let pkt = p?;
            let mark = self.ecn && pkt.ect;
            if !mark {
                drops.push(pkt);
                (p, _) = self.dodequeue(now, q);
            }
            self.dropping = true;
            self.entries += 1;
            let delta = self.count - self.lastcount;
            self.count = 1;
            if delta > 1 && (now as i128 - self.drop_next as i128) < 16 * self.interval as i128 {
                self.count = delta;
                self.reentries_with_memory += 1;
            }
            self.drop_next = self.control_law(now, self.count);
            self.lastcount = self.count;
            return p.map(|p| (p, mark));
        }
        p.map(|p| (p, false))
    }
}

const MBIT10: u64 = 10_000_000;

fn flowset(limit: QueueLimit, aqm: AqmConfig) -> FlowsetConfig {
    FlowsetConfig {
        limit,
        aqm,
        ..Default::default()
    }
}

/// Mild overloads of a `bw` link separated by short lulls, with mixed sizes
/// so maxpacket moves.
fn overload(seed: u64, bw: u64, sizes: &[u32], wires: &[Wire]) -> Vec<Arr> {
    // CoDel cannot hold back an unresponsive flow far above the link rate
    // (its drop rate grows only with sqrt(count)), so the overloads are mild
    // and the lulls short: it must leave the dropping state in a lull and
    // come back to it within 16 intervals, with the previous rate.
    let rate = |permille: u64| bw / 1000 * permille;
    let mut phases = Vec::new();
    for (r, lull) in [(1080, 300 * MS), (1150, 500 * MS), (1100, 200 * MS)] {
        phases.push((1500 * MS, rate(r)));
        phases.push((lull, rate(400)));
    }
    phases.push((3 * SEC, rate(1300)));
    phases.push((2 * SEC, rate(100)));
    traffic(seed, &phases, sizes, wires)
}

fn codel_case(cfg: CodelConfig, bw: u64, sizes: &[u32], wires: &[Wire], seed: u64) -> CodelModel {
    let limit = QueueLimit::Bytes(1_000_000);
    let arrs = overload(seed, bw, sizes, wires);
    let mut model = CodelModel::new(&cfg);
    let out = simulate(&arrs, bw, limit, &mut model);
    let engine = run_engine(seed, bw, flowset(limit, AqmConfig::from(&cfg)), &arrs);
    assert_same(&engine, &out, &arrs, bw);
    model
}

const SIZES: &[u32] = &[1500, 1000, 576, 64];

#[test]
fn codel_drop_times_match_rfc8289_pseudocode() {
    let model = codel_case(
        CodelConfig::default(),
        MBIT10,
        SIZES,
        &[Wire::V4(NOT_ECT)],
        1,
    );
    // The scenario must exercise the control law and the re-entry rule, or
    // the comparison proves little.
    assert!(model.entries >= 3, "entries {}", model.entries);
    assert!(model.reentries_with_memory >= 1);
}

#[test]
fn codel_with_other_parameters_still_matches() {
    let cfg = CodelConfig {
        target: 2 * MS,
        interval: 40 * MS,
        ecn: false,
    };
    let model = codel_case(cfg, MBIT10, SIZES, &[Wire::V4(ECT0), Wire::Opaque], 7);
    assert!(model.entries >= 3);
}

#[test]
fn codel_on_a_slow_link_stops_at_one_maxpacket() {
    // At 1 Mbit/s a 500-byte packet takes 4 ms: with small packets the
    // sojourn stays above a 2 ms target while less than maxpacket is
    // queued, and the byte test is what stops the dropping.
    let cfg = CodelConfig {
        target: 2 * MS,
        interval: 50 * MS,
        ecn: false,
    };
    let model = codel_case(cfg, 1_000_000, &[400, 200, 64], &[Wire::V4(NOT_ECT)], 17);
    assert!(model.entries >= 3);
    assert_eq!(model.maxpacket, 500);
}

#[test]
fn codel_ecn_marks_at_the_rfc_times() {
    let cfg = CodelConfig {
        ecn: true,
        ..CodelConfig::default()
    };
    let wires = [
        Wire::V4(ECT0),
        Wire::V4(ECT1),
        Wire::V4(NOT_ECT),
        Wire::V6(ECT0),
        Wire::V6(NOT_ECT),
        Wire::Opaque,
    ];
    let model = codel_case(cfg, MBIT10, SIZES, &wires, 3);
    assert!(model.entries >= 1);
}

/// The queue alone, for contrast.
struct DropTailModel;

impl Model for DropTailModel {
    fn enqueue(&mut self, _now: Nanos, _p: &MPkt, _q: &MQueue) -> MVerdict {
        MVerdict::Accept
    }
    fn dequeue(
        &mut self,
        _now: Nanos,
        q: &mut MQueue,
        _drops: &mut Vec<MPkt>,
    ) -> Option<(MPkt, bool)> {
        q.pop().map(|p| (p, false))
    }
}

#[test]
fn codel_keeps_the_standing_queue_short_where_droptail_fills_it() {
    // An outcome check rather than a check of details: 5% more than the
    // link carries for 20 s. Drop tail fills the 1 MB buffer (800 ms of
    // queue); CoDel, even against a flow that does not back off, keeps the
    // median sojourn of the last 10 s within a few targets.
    let cfg = CodelConfig::default();
    let limit = QueueLimit::Bytes(1_000_000);
    let arrs = traffic(11, &[(20 * SEC, 10_500_000)], &[1000], &[Wire::V4(NOT_ECT)]);
    let late = |o: &Outcome| {
        let mut v: Vec<Nanos> = arrs
            .iter()
            .zip(&o.sojourn)
            .filter(|(a, _)| a.t > 10 * SEC)
            .filter_map(|(_, s)| *s)
            .collect();
        v.sort_unstable();
        (v[v.len() / 2], v[v.len() * 9 / 10])
    };
    let codel = simulate(&arrs, MBIT10, limit, &mut CodelModel::new(&cfg));
    let droptail = simulate(&arrs, MBIT10, limit, &mut DropTailModel);
    let (median, p90) = late(&codel);
    assert!(
        median < 30 * MS && p90 < 60 * MS,
        "CoDel median {median} p90 {p90}"
    );
    let (median, _) = late(&droptail);
    assert!(median > 700 * MS, "drop tail median {median}");
    let engine = run_engine(11, MBIT10, flowset(limit, AqmConfig::from(&cfg)), &arrs);
    assert_same(&engine, &codel, &arrs, MBIT10);
}

// ------------------------------------------------------------------ PIE (RFC 8033)

/// RFC 8033's pseudo-code, with the optional parts FreeBSD's flags select,
/// on a real periodic timer.
struct PieModel {
    c: PieConfig,
    limit: QueueLimit,
    rng: Rng,
    started: bool,
    active: bool,
    timer: Option<Nanos>,
    drop_prob: f64,
    accu_prob: f64,
    burst_allowance: Nanos,
    current_qdelay: f64,
    qdelay_old: f64,
    in_measurement: bool,
    measurement_start: Nanos,
    dq_count: u64,
    avg_dq_time: f64,
    /// drop_prob after every packet event.
    at_events: Vec<(Nanos, f64)>,
    updates: usize,
    peak_prob: f64,
}

const DQ_THRESHOLD: u64 = 1 << 14;

impl PieModel {
    fn new(c: &PieConfig, limit: QueueLimit, seed: u64) -> Self {
        PieModel {
            c: c.clone(),
            limit,
            rng: engine_stream(seed),
            started: false,
            active: false,
            timer: None,
            drop_prob: 0.0,
            accu_prob: 0.0,
            burst_allowance: c.max_burst,
            current_qdelay: 0.0,
            qdelay_old: 0.0,
            in_measurement: false,
            measurement_start: 0,
            dq_count: 0,
            avg_dq_time: 0.0,
            at_events: Vec::new(),
            updates: 0,
            peak_prob: 0.0,
        }
    }

    fn random(&mut self) -> f64 {
        f64::from(self.rng.next_u32()) / 4_294_967_296.0
    }

    fn activate(&mut self, now: Nanos) {
        self.active = true;
        self.qdelay_old = 0.0;
        self.drop_prob = 0.0;
        self.in_measurement = true;
        self.dq_count = 0;
        self.avg_dq_time = 0.0;
        self.burst_allowance = self.c.max_burst;
        self.accu_prob = 0.0;
        self.measurement_start = now;
        self.timer = Some(now + self.c.tupdate);
    }

    fn start(&mut self, now: Nanos) {
        if !self.started {
            self.started = true;
            if !self.c.onoff {
                self.activate(now);
            }
        }
    }

    fn qdelay_ref(&self) -> f64 {
        self.c.target as f64
    }

    fn drop_early(&mut self, q: &MQueue) -> bool {
        if (self.qdelay_old < self.qdelay_ref() / 2.0 && self.drop_prob < 0.2) || q.bytes <= 2 * 800
        {
            return false;
        }
        if self.drop_prob == 0.0 {
            self.accu_prob = 0.0;
        }
        if self.c.derand {
            self.accu_prob += self.drop_prob;
            if self.accu_prob < 0.85 {
                return false;
            }
            if self.accu_prob >= 8.5 {
                return true;
            }
        }
        let u = self.random();
        if u < self.drop_prob {
            self.accu_prob = 0.0;
            return true;
        }
        false
    }

    /// calculate_drop_prob(), run by the timer every T_UPDATE.
    fn calculate_drop_prob(&mut self, q: &MQueue) {
        if self.c.dre {
            self.current_qdelay = q.bytes as f64 * self.avg_dq_time / DQ_THRESHOLD as f64;
        } else if q.bytes == 0 {
            self.current_qdelay = 0.0;
        }
        let s = 1e9;
        let mut p = self.c.alpha * (self.current_qdelay - self.qdelay_ref()) / s
            + self.c.beta * (self.current_qdelay - self.qdelay_old) / s;
        let prob = self.drop_prob;
        if prob < 0.000001 {
            p /= 2048.0;
        } else if prob < 0.00001 {
            p /= 512.0;
        } else if prob < 0.0001 {
            p /= 128.0;
        } else if prob < 0.001 {
            p /= 32.0;
        } else if prob < 0.01 {
            p /= 8.0;
        } else if prob < 0.1 {
            p /= 2.0;
        }
        if self.c.capdrop && prob >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        self.drop_prob += p;
        if self.current_qdelay == 0.0 && self.qdelay_old == 0.0 {
            self.drop_prob *= 0.98;
        }
        // Bound drop probability.
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        self.qdelay_old = self.current_qdelay;
        self.burst_allowance = self.burst_allowance.saturating_sub(self.c.tupdate);
        self.updates += 1;
        self.peak_prob = self.peak_prob.max(self.drop_prob);
    }
}

impl Model for PieModel {
    fn enqueue(&mut self, now: Nanos, p: &MPkt, q: &MQueue) -> MVerdict {
        self.start(now);
        let qlen = match self.limit {
            QueueLimit::Bytes(_) => q.bytes,
            QueueLimit::Slots(_) => q.len() as u64,
        };
        let mut verdict = MVerdict::Accept;
        let mut dropped = false;
        if model_full(self.limit, q) {
            // Tail drop (the simulation applies it).
            dropped = true;
        } else if self.active && self.burst_allowance == 0 && self.drop_early(q) {
            if self.c.ecn && self.drop_prob < self.c.max_ecnth && p.ect {
                verdict = MVerdict::Mark;
            } else {
                verdict = MVerdict::Drop;
                dropped = true;
            }
        }
        let third = match self.limit {
            QueueLimit::Bytes(b) => b / 3,
            QueueLimit::Slots(s) => u64::from(s / 3),
        };
        if !self.active && qlen >= third {
            self.activate(now);
        }
        let half = self.qdelay_ref() / 2.0;
        if self.active
            && self.drop_prob == 0.0
            && self.current_qdelay < half
            && self.qdelay_old < half
        {
            self.burst_allowance = self.c.max_burst;
            if self.c.onoff && qlen == 0 {
                self.active = false;
                self.in_measurement = false;
                self.timer = None;
            }
        }
        if dropped {
            self.accu_prob = 0.0;
        }
        verdict
    }

    fn dequeue(
        &mut self,
        now: Nanos,
        q: &mut MQueue,
        _drops: &mut Vec<MPkt>,
    ) -> Option<(MPkt, bool)> {
        let p = q.pop()?;
        self.start(now);
        if !self.active {
            return Some((p, false));
        }
        if self.c.dre {
            if self.in_measurement {
                self.dq_count += u64::from(p.len);
                if self.dq_count >= DQ_THRESHOLD {
                    let dq_time = (now - self.measurement_start) as f64;
                    if self.avg_dq_time == 0.0 {
                        self.avg_dq_time = dq_time;
                    } else {
                        let weight = DQ_THRESHOLD as f64 / 65536.0;
                        self.avg_dq_time = dq_time * weight + self.avg_dq_time * (1.0 - weight);
                    }
                    self.in_measurement = false;
                }
            }
            if q.bytes >= DQ_THRESHOLD && !self.in_measurement {
                self.in_measurement = true;
                self.measurement_start = now;
                self.dq_count = 0;
            }
        } else {
            self.current_qdelay = (now - p.arrival) as f64;
        }
        Some((p, false))
    }

    fn next_timer(&self) -> Option<Nanos> {
        if self.active {
            self.timer
        } else {
            None
        }
    }

    fn fire(&mut self, now: Nanos, q: &MQueue) {
        self.calculate_drop_prob(q);
        self.timer = Some(now + self.c.tupdate);
    }

    fn observe(&mut self, now: Nanos) {
        self.at_events.push((now, self.drop_prob));
    }
}

/// The engine's own AQM state driven by the model's queue, one packet at a
/// time as the engine's dequeue loop does, to read its internal trajectory.
struct Real<A: AqmState> {
    a: A,
    rng: Rng,
    link_bw: u64,
    probe: fn(&A) -> f64,
    at_events: Vec<(Nanos, f64)>,
}

fn qstate(q: &MQueue) -> QueueState {
    QueueState {
        len_pkts: q.len() as u32,
        len_bytes: q.bytes,
    }
}

impl<A: AqmState> Model for Real<A> {
    fn enqueue(&mut self, now: Nanos, p: &MPkt, q: &MQueue) -> MVerdict {
        let a = Arrival {
            now,
            len: p.len,
            ect: p.ect,
            queue: qstate(q),
            link_bw: self.link_bw,
        };
        match self.a.on_enqueue(&a, &mut self.rng) {
            AqmVerdict::Accept => MVerdict::Accept,
            AqmVerdict::Drop => MVerdict::Drop,
            AqmVerdict::Mark => MVerdict::Mark,
        }
    }

    fn dequeue(
        &mut self,
        now: Nanos,
        q: &mut MQueue,
        drops: &mut Vec<MPkt>,
    ) -> Option<(MPkt, bool)> {
        let mut resumed = false;
        loop {
            let queue = qstate(q);
            let p = q.pop()?;
            let d = Departure {
                now,
                enqueued_at: p.arrival,
                len: p.len,
                ect: p.ect,
                queue,
                resumed,
            };
            match self.a.on_dequeue(&d, &mut self.rng) {
                AqmVerdict::Accept => return Some((p, false)),
                AqmVerdict::Mark if p.ect => return Some((p, true)),
                _ => {
                    drops.push(p);
                    resumed = true;
                }
            }
        }
    }

    fn observe(&mut self, now: Nanos) {
        self.at_events.push((now, (self.probe)(&self.a)));
    }
}

fn pie_case(cfg: PieConfig, limit: QueueLimit, wires: &[Wire], seed: u64) -> PieModel {
    let phases = [
        (2 * SEC, 15_000_000),
        (SEC, 3_000_000),
        (2 * SEC, 20_000_000),
        (500 * MS, 500_000),
        (2 * SEC, 12_000_000),
        (2 * SEC, 1_000_000),
    ];
    let arrs = traffic(seed, &phases, &[1500, 1000, 200], wires);
    let mut model = PieModel::new(&cfg, limit, seed);
    let out = simulate(&arrs, MBIT10, limit, &mut model);

    // The drop probability trajectory: the engine's PIE, caught up lazily at
    // each event, against the model's timer-driven one.
    let mut real = Real {
        a: Pie::new(&cfg, limit),
        rng: engine_stream(seed),
        link_bw: MBIT10,
        probe: Pie::drop_prob,
        at_events: Vec::new(),
    };
    let real_out = simulate(&arrs, MBIT10, limit, &mut real);
    assert_eq!(real_out.fates, out.fates);
    assert_eq!(real.at_events.len(), model.at_events.len());
    for (r, m) in real.at_events.iter().zip(&model.at_events) {
        assert_eq!(r.0, m.0);
        assert!(
            (r.1 - m.1).abs() <= 1e-12,
            "drop_prob at {}: engine {} model {}",
            r.0,
            r.1,
            m.1
        );
    }

    let engine = run_engine(seed, MBIT10, flowset(limit, AqmConfig::from(&cfg)), &arrs);
    assert_same(&engine, &out, &arrs, MBIT10);
    let aqm_drops = out
        .fates
        .iter()
        .filter(|f| matches!(f, Fate::Dropped(_, DropReason::Aqm)))
        .count();
    assert!(
        aqm_drops > 0 || out.marked.iter().any(|&m| m),
        "PIE never acted"
    );
    model
}

#[test]
fn pie_matches_rfc8033_pseudocode_with_departure_rate_estimation() {
    let model = pie_case(
        PieConfig::default(),
        QueueLimit::Bytes(1_000_000),
        &[Wire::V4(NOT_ECT)],
        5,
    );
    assert!(model.updates > 500);
    assert!(model.peak_prob > 0.01, "peak {}", model.peak_prob);
}

#[test]
fn pie_without_derandomization_matches_with_timestamps() {
    let cfg = PieConfig {
        dre: false,
        derand: false,
        capdrop: false,
        ..PieConfig::default()
    };
    pie_case(cfg, QueueLimit::Bytes(1_000_000), &[Wire::V4(NOT_ECT)], 9);
}

#[test]
fn pie_onoff_ecn_and_a_slot_limit_match() {
    let cfg = PieConfig {
        onoff: true,
        ecn: true,
        max_burst: 30 * MS,
        target: 10 * MS,
        tupdate: 20 * MS,
        alpha: 0.25,
        beta: 2.0,
        ..PieConfig::default()
    };
    let wires = [Wire::V4(ECT0), Wire::V6(ECT1), Wire::V4(NOT_ECT)];
    let model = pie_case(cfg, QueueLimit::Slots(100), &wires, 13);
    assert!(model.updates > 100);
}

// ------------------------------------------------------------------ RED / GRED

/// FreeBSD's red_drops, from its definition, with the idle decay of the
/// RED paper on exact time.
struct RedModel {
    w_q: f64,
    min_th: f64,
    max_th: f64,
    max_p: f64,
    gentle: bool,
    ecn: bool,
    bytes: bool,
    bw: u64,
    avg: f64,
    count: i64,
    random: f64,
    q_time: Nanos,
    rng: Rng,
    decays: usize,
}

impl RedModel {
    fn new(c: &RedConfig, gentle: bool, limit: QueueLimit, bw: u64, seed: u64) -> Self {
        RedModel {
            w_q: c.w_q,
            min_th: c.min_th as f64,
            max_th: c.max_th as f64,
            max_p: c.max_p,
            gentle,
            ecn: c.ecn,
            bytes: matches!(limit, QueueLimit::Bytes(_)),
            bw,
            avg: 0.0,
            count: -1,
            random: 0.0,
            q_time: 0,
            rng: engine_stream(seed),
            decays: 0,
        }
    }

    fn random(&mut self) -> f64 {
        f64::from(self.rng.next_u32()) / 4_294_967_296.0
    }
}

impl Model for RedModel {
    fn enqueue(&mut self, now: Nanos, p: &MPkt, q: &MQueue) -> MVerdict {
        let q_size = if self.bytes {
            q.bytes as f64
        } else {
            q.len() as f64
        };
        if q_size != 0.0 {
            self.avg += (q_size - self.avg) * self.w_q;
        } else if self.avg != 0.0 {
            // (1 - w_q)^(idle / s), s the time to send 512 bytes.
            let s = 512.0 * 8.0 * 1e9 / self.bw as f64;
            let m = (now - self.q_time) as f64 / s;
            self.avg *= (1.0 - self.w_q).powf(m);
            self.decays += 1;
        }
        let signal = if self.ecn {
            MVerdict::Mark
        } else {
            MVerdict::Drop
        };
        if self.avg < self.min_th {
            self.count = -1;
            return MVerdict::Accept;
        }
        let mut p_b = 0.0;
        if self.avg >= self.max_th {
            if self.ecn {
                return signal;
            }
            if self.gentle {
                // c_3 * avg - c_4, c_3 = (1 - max_p) / max_th, c_4 = 1 - 2 max_p
                p_b = (1.0 - self.max_p) / self.max_th * self.avg - (1.0 - 2.0 * self.max_p);
            } else {
                self.count = -1;
                return signal;
            }
        } else if self.avg > self.min_th {
            if self.ecn {
                return signal;
            }
            // c_1 * avg - c_2, c_1 = max_p / (max_th - min_th), c_2 = c_1 * min_th
            let c1 = self.max_p / (self.max_th - self.min_th);
            p_b = c1 * self.avg - c1 * self.min_th;
        }
        if self.bytes {
            p_b = p_b * f64::from(p.len) / 1500.0;
        }
        self.count += 1;
        if self.count == 0 {
            self.random = self.random();
        } else if p_b * self.count as f64 > self.random {
            self.count = 0;
            self.random = self.random();
            return signal;
        }
        MVerdict::Accept
    }

    fn dequeue(
        &mut self,
        now: Nanos,
        q: &mut MQueue,
        _drops: &mut Vec<MPkt>,
    ) -> Option<(MPkt, bool)> {
        let p = q.pop()?;
        if q.len() == 0 {
            self.q_time = now;
        }
        Some((p, false))
    }
}

fn red_case(
    cfg: RedConfig,
    gentle: bool,
    limit: QueueLimit,
    wires: &[Wire],
    seed: u64,
) -> (RedModel, Outcome) {
    let phases = [
        (1500 * MS, 13_000_000),
        (40 * MS, 1_000_000),
        (800 * MS, 11_000_000),
        (300 * MS, 200_000),
        (1500 * MS, 16_000_000),
    ];
    let arrs = traffic(seed, &phases, &[1500, 1000, 500], wires);
    let mut model = RedModel::new(&cfg, gentle, limit, MBIT10, seed);
    let out = simulate(&arrs, MBIT10, limit, &mut model);
    let aqm = if gentle {
        cfg.aqm(true)
    } else {
        cfg.aqm(false)
    };
    let engine = run_engine(seed, MBIT10, flowset(limit, aqm), &arrs);
    assert_same(&engine, &out, &arrs, MBIT10);
    assert!(model.decays > 0, "the idle decay was never exercised");
    (model, out)
}

fn aqm_drops(o: &Outcome) -> usize {
    o.fates
        .iter()
        .filter(|f| matches!(f, Fate::Dropped(_, DropReason::Aqm)))
        .count()
}

#[test]
fn red_and_gred_in_slots_match_the_definition() {
    let cfg = RedConfig {
        w_q: 0.02,
        min_th: 5,
        max_th: 15,
        max_p: 0.1,
        ecn: false,
    };
    let (_, red) = red_case(
        cfg.clone(),
        false,
        QueueLimit::Slots(50),
        &[Wire::V4(NOT_ECT)],
        21,
    );
    let (_, gred) = red_case(cfg, true, QueueLimit::Slots(50), &[Wire::V4(NOT_ECT)], 21);
    assert!(aqm_drops(&red) > 50 && aqm_drops(&gred) > 50);
}

#[test]
fn red_in_bytes_scales_by_packet_size() {
    let cfg = RedConfig {
        w_q: 0.01,
        min_th: 6000,
        max_th: 30000,
        max_p: 0.2,
        ecn: false,
    };
    let (_, out) = red_case(
        cfg,
        true,
        QueueLimit::Bytes(80_000),
        &[Wire::V6(NOT_ECT)],
        23,
    );
    assert!(aqm_drops(&out) > 50);
}

#[test]
fn red_ecn_marks_what_it_can_and_drops_the_rest() {
    let cfg = RedConfig {
        w_q: 0.05,
        min_th: 4,
        max_th: 12,
        max_p: 0.1,
        ecn: true,
    };
    let wires = [
        Wire::V4(ECT0),
        Wire::V4(NOT_ECT),
        Wire::V6(ECT1),
        Wire::V4(CE),
        Wire::Opaque,
    ];
    let (_, out) = red_case(cfg, false, QueueLimit::Slots(60), &wires, 29);
    assert!(out.marked.iter().filter(|&&m| m).count() > 50);
    assert!(aqm_drops(&out) > 50);
}

/// The gap between RED drops at a fixed base probability `p`: the packet
/// that makes `count * p` exceed a uniform draw. Returns (mean, variance).
fn red_gap(p: f64) -> (f64, f64) {
    // P(N >= n) = 1 - (n - 1) p while positive.
    let (mut mean, mut second) = (0.0, 0.0);
    let mut n = 1.0;
    loop {
        let tail = 1.0 - (n - 1.0) * p;
        if tail <= 0.0 {
            break;
        }
        mean += tail;
        second += (2.0 * n - 1.0) * tail;
        n += 1.0;
    }
    (mean, second - mean * mean)
}

/// Holds the queue at `held` (slots or bytes) and counts drops.
fn red_fraction(
    cfg: &RedConfig,
    gentle: bool,
    limit: QueueLimit,
    held: u64,
    len: u32,
) -> (f64, u64, u64) {
    let mut red = Red::new(cfg, gentle, limit);
    let mut rng = Rng::new(77);
    let queue = match limit {
        QueueLimit::Slots(_) => QueueState {
            len_pkts: held as u32,
            len_bytes: held * 1000,
        },
        QueueLimit::Bytes(_) => QueueState {
            len_pkts: (held / 1000) as u32,
            len_bytes: held,
        },
    };
    let arrival = |i: u64| Arrival {
        now: i * US,
        len,
        ect: false,
        queue,
        link_bw: MBIT10,
    };
    // Warm the average up and check it follows avg += w_q (q - avg).
    let mut expect = 0.0f64;
    for i in 0..2000 {
        red.on_enqueue(&arrival(i), &mut rng);
        expect += (held as f64 - expect) * cfg.w_q;
        assert!((red.avg() - expect).abs() <= 1e-9 * held as f64);
    }
    let (m, mut drops) = (400_000u64, 0u64);
    for i in 0..m {
        if red.on_enqueue(&arrival(2000 + i), &mut rng) == AqmVerdict::Drop {
            drops += 1;
        }
    }
    (red.avg(), drops, m)
}

/// Drops at a held average fall within 5 standard deviations of the rate the
/// definition gives: 1 / E[gap] for base probability p_b.
fn assert_drop_rate(p_b: f64, drops: u64, m: u64) {
    let (mean, var) = red_gap(p_b);
    let expect = m as f64 / mean;
    // Renewal CLT: the number of drops in m packets has variance m var / mean^3.
    let sd = (m as f64 * var / mean.powi(3)).sqrt();
    assert!(
        (drops as f64 - expect).abs() <= 5.0 * sd.max(1.0),
        "p_b {p_b}: {drops} drops in {m}, expected {expect:.0} ± {sd:.1}"
    );
}

#[test]
fn red_drop_rate_at_a_held_average_is_the_defined_one() {
    let cfg = RedConfig {
        w_q: 0.02,
        min_th: 10,
        max_th: 30,
        max_p: 0.2,
        ecn: false,
    };
    let slots = QueueLimit::Slots(100);
    // First slope: p_b = max_p (avg - min_th) / (max_th - min_th).
    for held in [12u64, 20, 27] {
        let (avg, drops, m) = red_fraction(&cfg, false, slots, held, 1000);
        assert!((avg - held as f64).abs() < 1e-6);
        assert_drop_rate(0.2 * (held as f64 - 10.0) / 20.0, drops, m);
    }
    // Below min_th nothing, at or above max_th everything (plain RED).
    let (_, drops, _) = red_fraction(&cfg, false, slots, 8, 1000);
    assert_eq!(drops, 0);
    let (_, drops, m) = red_fraction(&cfg, false, slots, 31, 1000);
    assert_eq!(drops, m);
    // Gentle RED's second slope: max_p + (1 - max_p)(avg - max_th) / max_th.
    for held in [35u64, 45, 55] {
        let (_, drops, m) = red_fraction(&cfg, true, slots, held, 1000);
        assert_drop_rate(0.2 + 0.8 * (held as f64 - 30.0) / 30.0, drops, m);
    }
    let (_, drops, m) = red_fraction(&cfg, true, slots, 61, 1000);
    assert!(
        drops + 1 >= m,
        "beyond 2 max_th gentle RED drops all but the first"
    );
}

#[test]
fn red_in_bytes_drops_small_packets_less() {
    let cfg = RedConfig {
        w_q: 0.02,
        min_th: 10_000,
        max_th: 30_000,
        max_p: 0.2,
        ecn: false,
    };
    let bytes = QueueLimit::Bytes(100_000);
    for len in [1500u32, 750, 300] {
        let (_, drops, m) = red_fraction(&cfg, false, bytes, 20_000, len);
        assert_drop_rate(0.1 * f64::from(len) / 1500.0, drops, m);
    }
}

// ------------------------------------------------------------------ ECN in the engine

#[test]
fn ecn_marks_ect_packets_and_drops_the_others() {
    // RED with ecn and w_q = 1 (the average is the queue length) behind a
    // slow link: every packet that finds more than 2 queued is signalled.
    let cfg = RedConfig {
        w_q: 1.0,
        min_th: 2,
        max_th: 20,
        max_p: 0.1,
        ecn: true,
    };
    let kinds = [
        Wire::V4(ECT0),
        Wire::V4(ECT1),
        Wire::V4(NOT_ECT),
        Wire::V6(ECT0),
        Wire::V6(ECT1),
        Wire::V6(NOT_ECT),
        Wire::V4(CE),
        Wire::Opaque,
    ];
    let arrs: Vec<Arr> = (0..32)
        .map(|i| Arr {
            t: 0,
            len: 1000,
            wire: kinds[i % kinds.len()],
        })
        .collect();
    let (fates, marked, totals) = run_engine(
        1,
        1_000_000,
        flowset(QueueLimit::Slots(50), cfg.aqm(false)),
        &arrs,
    );

    // Expected from the rule alone: the first packet goes on the wire, the
    // queue holds the accepted ones after it.
    let mut queued = 0u32;
    let (mut want_marks, mut want_drops) = (0u64, 0u64);
    for (i, a) in arrs.iter().enumerate() {
        let signalled = i > 0 && queued > 2;
        match (signalled, a.wire.ect(), fates[i]) {
            (false, _, Fate::Delivered(_)) => {
                assert!(!marked[i], "packet {i} marked without cause");
                if i > 0 {
                    queued += 1;
                }
            }
            (true, true, Fate::Delivered(_)) => {
                want_marks += 1;
                queued += 1;
                // CE set (a CE packet stays CE and still counts as a mark).
                assert!(marked[i] || a.wire == Wire::V4(CE), "packet {i} not marked");
            }
            (true, false, Fate::Dropped(0, DropReason::Aqm)) => want_drops += 1,
            other => panic!("packet {i} {:?}: {other:?}", a.wire),
        }
    }
    assert!(want_marks >= 10 && want_drops >= 5);
    assert_eq!(totals.marks, want_marks);
    assert_eq!(totals.drops_for(DropReason::Aqm), want_drops);
    assert_eq!(totals.delivered + totals.dropped(), 32);
}

// ------------------------------------------------------------------ configuration

/// Values FreeBSD refuses (PIE's fractions and RED's, checked by ipfw
/// itself) are refused and change nothing; the times FreeBSD's kernel
/// bounds instead are brought within them (see the engine's
/// `aqm_and_scheduler_values_out_of_range_are_clamped_with_a_note`).
#[test]
fn out_of_range_parameters_are_refused_and_change_nothing() {
    let mut e: Engine<Pkt> = Engine::new(1);
    for (codel, note) in [
        (
            CodelConfig {
                target: 0,
                ..Default::default()
            },
            "codel target 0 is below 1us",
        ),
        (
            CodelConfig {
                interval: 6 * SEC,
                ..Default::default()
            },
            "codel interval 6s is above 5s",
        ),
    ] {
        let cmd = pipe_cfg(
            9,
            LinkConfig::default(),
            flowset(QueueLimit::default(), AqmConfig::from(&codel)),
        );
        e.apply(0, cmd).unwrap();
        let notes: Vec<String> = e.take_notes().iter().map(ToString::to_string).collect();
        assert!(notes.len() == 1 && notes[0].starts_with(note), "{notes:?}");
    }
    e.apply(0, Command::DeletePipes(vec![9])).unwrap();
    let bad = [
        AqmConfig::from(&PieConfig {
            alpha: 8.0,
            ..Default::default()
        }),
        AqmConfig::from(&PieConfig {
            max_ecnth: 1.5,
            ..Default::default()
        }),
        (RedConfig {
            w_q: 0.0,
            ..Default::default()
        })
        .aqm(false),
        (RedConfig {
            min_th: 20,
            max_th: 10,
            ..Default::default()
        })
        .aqm(true),
    ];
    let before = e.snapshot();
    for aqm in bad {
        let cmd = pipe_cfg(
            1,
            LinkConfig::default(),
            flowset(QueueLimit::default(), aqm.clone()),
        );
        assert!(e.apply(0, cmd).is_err(), "{aqm:?} accepted");
        let q = Command::ConfigQueue(
            5,
            QueueConfig {
                sched: Some(1),
                flowset: flowset(QueueLimit::default(), aqm),
            },
        );
        assert!(e.apply(0, q).is_err());
    }
    assert_eq!(e.snapshot(), before);
}

#[test]
fn show_prints_the_aqm_line() {
    let mut e: Engine<Pkt> = Engine::new(1);
    let codel = CodelConfig {
        target: 7 * MS,
        interval: 160 * MS,
        ecn: true,
    };
    e.apply(
        0,
        pipe_cfg(
            1,
            LinkConfig::default(),
            flowset(QueueLimit::default(), AqmConfig::from(&codel)),
        ),
    )
    .expect("pipe");
    e.apply(
        0,
        Command::ConfigQueue(
            2,
            QueueConfig {
                sched: Some(1),
                flowset: flowset(
                    QueueLimit::default(),
                    AqmConfig::from(&PieConfig::default()),
                ),
            },
        ),
    )
    .expect("queue");
    let s = e.snapshot();
    let aqm_of = |n: u32| {
        s.flowsets
            .iter()
            .find(|f| f.number == n)
            .map(|f| f.aqm.clone())
    };
    assert_eq!(
        aqm_of(1 + 2 * DN_MAX_ID).as_deref(),
        Some("AQM CoDel target 7ms interval 160ms ECN")
    );
    assert_eq!(
        aqm_of(2).as_deref(),
        Some("AQM type PIE target 15ms tupdate 15ms alpha 0.125 beta 1.25 max_burst 150ms max_ecnth 0.1 NoECN CapDrop DRE Derand")
    );
}

#[test]
fn changing_the_aqm_under_load_keeps_every_packet_accounted() {
    let mut r = Run::new(
        4,
        MBIT10,
        flowset(
            QueueLimit::Slots(100),
            AqmConfig::from(&CodelConfig::default()),
        ),
    );
    let arrs = traffic(
        4,
        &[(2 * SEC, 14_000_000)],
        &[1000],
        &[Wire::V4(ECT0), Wire::V4(NOT_ECT)],
    );
    let aqms = [
        AqmConfig::from(&PieConfig::default()),
        RedConfig::default().aqm(false),
        AqmConfig::droptail(),
        AqmConfig::from(&CodelConfig {
            ecn: true,
            ..Default::default()
        }),
    ];
    for (i, a) in arrs.iter().enumerate() {
        if i % 500 == 250 {
            r.run_until(a.t);
            let aqm = aqms[(i / 500) % aqms.len()].clone();
            let cmd = pipe_cfg(
                1,
                LinkConfig {
                    bw: MBIT10,
                    ..Default::default()
                },
                flowset(QueueLimit::Slots(100), aqm),
            );
            r.e.apply(a.t, cmd).expect("reconfigure");
            r.collect(a.t);
            r.check();
        }
        r.send(*a);
    }
    let (fates, _, totals) = r.finish();
    assert!(fates
        .iter()
        .any(|f| matches!(f, Fate::Dropped(_, DropReason::Aqm))));
    assert_eq!(totals.arrived, arrs.len() as u64);
}

/// The engine fills what a command leaves out of an AQM or a scheduler from
/// the sysctls in force when it applies the command, as FreeBSD's kernel
/// does; objects configured earlier keep their values, and a sysctl out of
/// range changes nothing.
#[test]
fn the_engine_fills_defaults_from_the_sysctls_when_it_applies() {
    use dummynet_engine::aqm::{codel, AqmConfig};
    let mut e: Engine<u64> = Engine::new(1);
    let codel_pipe = |n| {
        let mut p = PipeConfig::default();
        p.flowset.aqm = AqmConfig::new(&codel::TYPE, vec![("ecn".into(), 1)]);
        Command::ConfigPipe(n, p)
    };
    let tunable = |sysctl, value| Command::Set(Setting::Tunable { sysctl, value });
    e.apply(0, codel_pipe(1)).unwrap();
    e.apply(0, tunable("codel.interval", 150_000)).unwrap();
    assert!(e.apply(0, tunable("codel.target", 0)).is_err());
    assert!(e.apply(0, tunable("codel.nothing", 1)).is_err());
    e.apply(0, codel_pipe(2)).unwrap();
    e.apply(0, tunable("fqcodel.flows", 64)).unwrap();
    e.apply(
        0,
        Command::ConfigSched(
            2,
            SchedConfig {
                kind: Some("fq_codel".into()),
                ..SchedConfig::default()
            },
        ),
    )
    .unwrap();
    let snap = e.snapshot();
    let aqms: Vec<&str> = snap.flowsets.iter().map(|f| f.aqm.as_str()).collect();
    assert_eq!(
        aqms,
        [
            "AQM CoDel target 5ms interval 100ms ECN",
            "AQM CoDel target 5ms interval 150ms ECN"
        ]
    );
    let fq = snap.scheds.iter().find(|s| s.number == 2).unwrap();
    assert!(fq.params.contains(&("flows".into(), 64)), "{:?}", fq.params);
    assert!(
        fq.params.contains(&("quantum".into(), 1514)),
        "{:?}",
        fq.params
    );
    // Back to FreeBSD's value: the settings are the defaults again.
    e.apply(0, tunable("codel.interval", 100_000)).unwrap();
    e.apply(0, tunable("fqcodel.flows", 1024)).unwrap();
    assert_eq!(e.settings(), &Settings::default());
}
