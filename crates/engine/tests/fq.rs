//! FQ-CoDel and FQ-PIE (RFC 8290; FreeBSD's fq_codel and fq_pie) through the
//! whole engine on the virtual clock. The harness checks conservation
//! (arrived = delivered + dropped + inside) after every step; each test also
//! names the behaviour that would break it.
//!
//! Links run at 8 Mbit/s unless said otherwise: a byte takes a microsecond,
//! a 1500-byte packet 1.5 ms.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::percentile::nearest_rank;
use dummynet_engine::sched::{self, bucket_of};
use dummynet_engine::{Command, DropReason, Engine, Nanos, PacketInfo, Payload, Verdict};

const BW: u64 = 8_000_000;
const QUANTUM: u64 = 1514;

fn params(p: &[(&str, u64)]) -> Vec<(String, u64)> {
    p.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// Pipe 1 at `bw` driven by scheduler 1 of type `kind`; queue 10 (default
/// flowset: 50 slots, drop tail) feeds it and takes every packet.
fn fq_link(kind: &str, bw: u64, p: &[(&str, u64)]) -> Harness {
    let mut h = Harness::new(7);
    h.apply(pipe(1, bw, 0));
    h.apply(Command::ConfigSched(
        1,
        SchedConfig {
            kind: Some(kind.into()),
            params: params(p),
            ..Default::default()
        },
    ));
    h.apply(Command::ConfigQueue(
        10,
        QueueConfig {
            sched: Some(1),
            flowset: FlowsetConfig::default(),
        },
    ));
    h.apply(rule(100, Action::Queue(10), vec![]));
    h
}

/// A packet of flow `f` (its source port is `sport(f)`).
fn flow_packet(sport: u16, len: u32) -> PacketInfo {
    udp([10, 0, 0, 1], [10, 0, 0, 2], sport, 80, len)
}

/// Source ports for `n` flows that land in `n` different buckets of
/// `buckets`, so a test of isolation is not spoilt by a hash collision.
fn distinct_ports(n: usize, buckets: u32) -> Vec<u16> {
    let mut seen = Vec::new();
    let mut ports = Vec::new();
    for port in 1000u16.. {
        let b = bucket_of(&flow_packet(port, 100).key, buckets);
        if !seen.contains(&b) {
            seen.push(b);
            ports.push(port);
            if ports.len() == n {
                break;
            }
        }
    }
    ports
}

/// Per-flow (by source port) outcome of a run.
#[derive(Debug, Default, Clone)]
struct FlowStats {
    sent: u64,
    delivered_bytes: u64,
    drops: u64,
    /// Queueing delay of each delivered packet (departure − arrival −
    /// transmission time).
    delays: Vec<Nanos>,
}

/// Outcomes of flow `port` among packets that arrived in `[from, to)`.
fn flow_stats(h: &Harness, port: u16, bw: u64, from: Nanos, to: Nanos) -> FlowStats {
    let mut s = FlowStats::default();
    for (id, &(t, info)) in h.sent.iter().enumerate() {
        if info.key.sport != port || t < from || t >= to {
            continue;
        }
        s.sent += 1;
        match h.fates[id] {
            Some(Fate::Delivered { at, .. }) => {
                s.delivered_bytes += u64::from(info.len);
                let tx = u64::from(info.len) * 8 * 1_000_000_000 / bw;
                s.delays.push(at - t - tx);
            }
            Some(Fate::Dropped { .. }) => s.drops += 1,
            None => {}
        }
    }
    s
}

fn median(v: &[Nanos]) -> Nanos {
    let mut v = v.to_vec();
    v.sort_unstable();
    nearest_rank(&v, 50).unwrap_or(0)
}

/// An open-loop source: `len`-byte packets at `rate` bit/s from `start` to
/// `end`, as (time, port, len).
fn cbr(port: u16, rate: u64, len: u32, start: Nanos, end: Nanos) -> Vec<(Nanos, u16, u32)> {
    let gap = u64::from(len) * 8 * 1_000_000_000 / rate;
    (0..)
        .map(|i| start + i * gap)
        .take_while(|&t| t < end)
        .map(|t| (t, port, len))
        .collect()
}

/// Sends every arrival in time order and runs the link dry.
fn run(h: &mut Harness, mut arrivals: Vec<(Nanos, u16, u32)>) {
    arrivals.sort_by_key(|a| (a.0, a.1));
    for (t, port, len) in arrivals {
        h.send(t, flow_packet(port, len));
    }
    h.finish();
}

// ------------------------------------------------------------ scheduling

#[test]
fn a_sparse_flow_overtakes_the_bulk_backlog() {
    for (kind, quick) in [("fq_codel", true), ("fq_pie", true), ("rr", false)] {
        let mut h = fq_link(kind, BW, &[]);
        let ports = distinct_ports(5, 1024);
        let mut arrivals = Vec::new();
        // Four bulk flows with 40 packets each: 240 ms of backlog at t = 0.
        for &p in &ports[..4] {
            arrivals.extend((0..40).map(|_| (0, p, 1500)));
        }
        // A ping into that backlog at 50 ms.
        arrivals.push((50 * MS, ports[4], 100));
        if kind == "rr" {
            h.apply(Command::ConfigQueue(
                10,
                QueueConfig {
                    sched: Some(1),
                    flowset: FlowsetConfig {
                        mask: dummynet_engine::FlowMask::ALL,
                        limit: QueueLimit::Slots(100),
                        ..Default::default()
                    },
                },
            ));
        }
        run(&mut h, arrivals);
        let ping = h.sent.len() as u64 - 1;
        let wait = h.departure(ping) - 50 * MS;
        // RFC 8290 §4.2: the ping's queue is new, so it goes as soon as the
        // packet on the wire is out: at most 1.5 ms plus its own 0.1 ms.
        // Plain DRR (rr) makes it wait its turn behind the bulk flows' quanta.
        assert_eq!(
            wait <= 1_600 * US,
            quick,
            "{kind}: the ping waited {wait} ns"
        );
    }
}

#[test]
fn drr_gives_equal_bytes_whatever_the_packet_size() {
    for kind in ["fq_codel", "fq_pie"] {
        // Targets out of reach so that only the scheduler decides.
        let p: &[(&str, u64)] = if kind == "fq_codel" {
            &[("target", 5 * SEC), ("interval", 100 * SEC)]
        } else {
            &[("target", 5 * SEC), ("max_burst", 5 * SEC)]
        };
        let mut h = fq_link(kind, BW, p);
        let ports = distinct_ports(3, 1024);
        let sizes = [1500u32, 576, 64];
        let mut arrivals = Vec::new();
        for (&port, &len) in ports.iter().zip(&sizes) {
            let n = 300_000 / len;
            arrivals.extend((0..n).map(|_| (0, port, len)));
        }
        let total: Vec<u64> = ports
            .iter()
            .map(|&p| arrivals.iter().filter(|a| a.1 == p).count() as u64)
            .collect();
        run(&mut h, arrivals);
        assert_eq!(h.e.totals().dropped(), 0, "{kind}");
        // Departures in order; bytes per flow while all three are backlogged.
        let mut deps: Vec<(Nanos, usize, u32)> = h
            .sent
            .iter()
            .enumerate()
            .map(|(id, (_, info))| {
                let f = ports.iter().position(|&p| p == info.key.sport).unwrap();
                (h.departure(id as u64), f, info.len)
            })
            .collect();
        deps.sort_unstable();
        let mut bytes = [0u64; 3];
        let mut count = [0u64; 3];
        let mut worst = 0;
        for (_, f, len) in deps {
            bytes[f] += u64::from(len);
            count[f] += 1;
            if count.iter().zip(&total).any(|(c, t)| c == t) {
                break;
            }
            let spread = bytes.iter().max().unwrap() - bytes.iter().min().unwrap();
            worst = worst.max(spread);
        }
        // After k turns a flow has sent between k·Q and k·Q + L (it sends
        // while its deficit is not negative); turns differ by at most one
        // between flows, so shares differ by less than Q + L. Counting
        // packets instead of bytes would put the 1500-byte flow 23 times
        // ahead of the 64-byte one.
        assert!(worst < QUANTUM + 1500, "{kind}: spread {worst} bytes");
        assert!(bytes.iter().all(|&b| b > 250_000), "{kind}: {bytes:?}");
    }
}

// ------------------------------------------------------------ per-flow AQM

/// A heavy flow at 9 Mbit/s and a light one at 160 kbit/s on an 8 Mbit/s
/// link for 4 s: the heavy flow's own AQM drops; the light flow's does not.
fn heavy_and_light(kind: &str) {
    let mut h = fq_link(kind, BW, &[]);
    let ports = distinct_ports(2, 1024);
    let end = 4 * SEC;
    let mut arrivals = cbr(ports[0], 9_000_000, 1500, 0, end);
    arrivals.extend(cbr(ports[1], 160_000, 200, 0, end));
    run(&mut h, arrivals);
    let heavy = flow_stats(&h, ports[0], BW, 0, end);
    let light = flow_stats(&h, ports[1], BW, 0, end);
    assert_eq!(light.drops, 0, "{kind}: the light flow lost packets");
    assert!(heavy.drops > 0, "{kind}: the heavy flow lost nothing");
    assert_eq!(h.dropped(DropReason::Aqm) as u64, heavy.drops, "{kind}");
    // The light flow is new at most arrivals and goes as soon as the packet
    // on the wire is out; at worst it arrives while its queue still sits in
    // the old list (RFC 8290's rule against flows staying new) and waits
    // for one turn of the heavy flow too: 1.5 ms + 1514 + 1500 bytes.
    let worst = light.delays.iter().max().copied().unwrap_or(0);
    assert!(worst <= 4_500 * US, "{kind}: light flow waited {worst} ns");
    assert!(median(&light.delays) <= 1_500 * US, "{kind}");
    // Over the last 2 s the heavy flow's queue is held to tens of
    // milliseconds: the AQM's drops follow its own queue's delay. (An
    // open-loop source does not slow down, so CoDel's control law is still
    // raising its drop rate; a tail-drop queue would be past half a second.)
    let late = flow_stats(&h, ports[0], BW, 2 * SEC, end);
    let m = median(&late.delays);
    assert!(m < 120 * MS, "{kind}: heavy median delay {m} ns");
}

#[test]
fn each_flow_has_its_own_codel() {
    heavy_and_light("fq_codel");
}

#[test]
fn each_flow_has_its_own_pie() {
    heavy_and_light("fq_pie");
}

// ------------------------------------------------------------ limits

#[test]
fn overflow_drops_the_head_of_the_longest_flow() {
    for kind in ["fq_codel", "fq_pie"] {
        let mut h = fq_link(kind, BW, &[("limit", 20)]);
        let ports = distinct_ports(2, 1024);
        // 30 packets of a heavy flow at t = 0 (the first goes on the wire),
        // then 3 of a light one.
        let mut ids = Vec::new();
        for _ in 0..30 {
            ids.push(h.send(0, flow_packet(ports[0], 1500)));
        }
        let light: Vec<u64> = (0..3)
            .map(|_| h.send(10 * US, flow_packet(ports[1], 100)))
            .collect();
        h.finish();
        // 29 queued against a limit of 20: 9 go, then one per light packet,
        // always from the heavy flow's head (its oldest packets).
        let dropped: Vec<u64> = (0..h.sent.len() as u64)
            .filter(|&id| matches!(h.fates[id as usize], Some(Fate::Dropped { .. })))
            .collect();
        assert_eq!(dropped, ids[1..13].to_vec(), "{kind}");
        assert_eq!(h.dropped(DropReason::QueueFull), 12, "{kind}");
        for id in light {
            h.departure(id);
        }
        let view = h.e.snapshot();
        let s = view.scheds.iter().find(|s| s.number == 1).unwrap();
        assert_eq!(s.instances[0].counters.drops, 12, "{kind}: counted");
    }
}

#[test]
fn the_flowset_limit_and_aqm_do_not_apply() {
    // Queue 10 has the default 50-slot drop-tail limit; fq_codel holds up
    // to its own `limit` across its flows instead, as FreeBSD does.
    let mut h = fq_link(
        "fq_codel",
        BW,
        &[("target", 5 * SEC), ("interval", 100 * SEC)],
    );
    for _ in 0..200 {
        h.send(0, flow_packet(1000, 1500));
    }
    h.finish();
    assert_eq!(h.e.totals().dropped(), 0);
}

// ------------------------------------------------------------ reactivation

/// When the first of flow `port`'s packets that arrived at or after `from`
/// was dropped by the AQM.
fn first_aqm_drop(h: &Harness, port: u16, from: Nanos) -> Option<Nanos> {
    h.sent
        .iter()
        .zip(&h.fates)
        .filter(|((t, info), _)| info.key.sport == port && *t >= from)
        .filter_map(|(_, fate)| match fate {
            Some(Fate::Dropped {
                at,
                reason: DropReason::Aqm,
            }) => Some(*at),
            _ => None,
        })
        .min()
}

#[test]
fn fq_codel_restarts_a_returning_flows_codel() {
    // FreeBSD's fq_codel_enqueue clears `dropping` and `first_above_time`
    // when an inactive flow gets a packet. Flow A's queue is emptied by
    // overflow drops (not by dequeues, which would clear the state anyway)
    // while its CoDel has been above target for long, so that state is stale
    // when A comes back. Target 1 ms, below the 1.5 ms A's first packet back
    // waits behind C's: with the stale state, that first dequeue would find
    // the sojourn "above target since long ago" and drop at once.
    let p = [("target", MS), ("limit", 10)];
    let ports = distinct_ports(15, 1024);
    let (a, c, others) = (ports[0], ports[1], &ports[2..]);
    let back = 400 * MS;
    let mut comeback = vec![(back, c, 1500)];
    comeback.extend((0..5).map(|_| (back + US, a, 1500)));
    comeback.extend(cbr(a, 10_000_000, 1500, back + 2 * MS, back + 400 * MS));

    // A at 10 Mbit/s for 300 ms, then twelve one-packet flows at once push
    // its last packets out over the limit of 10; then A is idle for 80 ms.
    let mut history = cbr(a, 10_000_000, 1500, 0, 300 * MS);
    history.extend(others.iter().map(|&p| (300 * MS, p, 200)));
    let mut h = fq_link("fq_codel", BW, &p);
    run(&mut h, [history, comeback.clone()].concat());
    assert!(first_aqm_drop(&h, a, 0).is_some_and(|t| t < 300 * MS));

    let mut fresh = fq_link("fq_codel", BW, &p);
    run(&mut fresh, comeback);
    let want = first_aqm_drop(&fresh, a, back);
    // A fresh CoDel first drops an interval after the sojourn went above
    // target; the returning flow's does the same.
    assert!(want.is_some_and(|t| t >= back + 100 * MS), "{want:?}");
    assert_eq!(first_aqm_drop(&h, a, back), want);
}

#[test]
fn fq_pie_restarts_a_returning_flows_pie() {
    // FreeBSD's fq_pie_enqueue re-initialises an inactive flow's PIE when it
    // gets a packet: drop probability 0 and a full burst allowance
    // (max_burst, 150 ms), so nothing is dropped early in its first 150 ms
    // back, however hard it was being dropped before it went idle.
    let ports = distinct_ports(1, 1024);
    let a = ports[0];
    let back = 2_100 * MS;
    let comeback = cbr(a, 12_000_000, 1500, back, back + 500 * MS);
    for history in [cbr(a, 12_000_000, 1500, 0, 2 * SEC), Vec::new()] {
        let had_history = !history.is_empty();
        let mut h = fq_link("fq_pie", BW, &[]);
        run(&mut h, [history, comeback.clone()].concat());
        if had_history {
            assert!(first_aqm_drop(&h, a, 0).is_some_and(|t| t < 2 * SEC));
        }
        let first = first_aqm_drop(&h, a, back);
        assert!(
            first.is_some_and(|t| t >= back + 150 * MS),
            "history {had_history}: first drop back at {first:?}"
        );
    }
}

// ------------------------------------------------------------ hashing

#[test]
fn one_bucket_is_codel_on_one_queue() {
    // Three flows over one bucket, against a FIFO pipe with CoDel: same
    // departures, same drops, packet for packet.
    let mut arrivals = Vec::new();
    for (i, port) in [1000u16, 2000, 3000].into_iter().enumerate() {
        arrivals.extend(cbr(
            port,
            4_000_000 + i as u64 * 1_000_000,
            1000,
            0,
            2 * SEC,
        ));
    }
    arrivals.sort_by_key(|a| (a.0, a.1));

    let mut fq = fq_link("fq_codel", BW, &[("flows", 1)]);
    run(&mut fq, arrivals.clone());

    let mut fifo = Harness::new(7);
    fifo.apply(Command::Set(Setting::PipeSlotLimit(100_000)));
    fifo.apply(pipe_cfg(
        1,
        LinkConfig {
            bw: BW,
            ..Default::default()
        },
        FlowsetConfig {
            limit: QueueLimit::Slots(10240),
            aqm: AqmConfig::from(&CodelConfig::default()),
            ..Default::default()
        },
    ));
    fifo.apply(rule(100, Action::Pipe(1), vec![]));
    run(&mut fifo, arrivals);

    assert!(fq.dropped(DropReason::Aqm) > 100, "CoDel should act");
    assert_eq!(fq.fates, fifo.fates);
}

#[test]
fn with_many_buckets_flows_are_apart() {
    // The same traffic with 1024 buckets: the 4 Mbit/s flow (below its
    // share of 8/3) loses nothing, unlike in one shared queue.
    let ports = distinct_ports(3, 1024);
    let mut arrivals = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        arrivals.extend(cbr(
            port,
            2_000_000 + i as u64 * 1_000_000,
            1000,
            0,
            2 * SEC,
        ));
    }
    let mut fq = fq_link("fq_codel", BW, &[]);
    run(&mut fq, arrivals.clone());
    assert_eq!(flow_stats(&fq, ports[0], BW, 0, 2 * SEC).drops, 0);
    let mut one = fq_link("fq_codel", BW, &[("flows", 1)]);
    run(&mut one, arrivals);
    assert!(flow_stats(&one, ports[0], BW, 0, 2 * SEC).drops > 0);
}

// ------------------------------------------------------------ seed 002

/// Four open-loop flows starting 1 s apart at 15%, 28%, 30% and 32% of the
/// link (105% together once all run). Max-min fairness gives the first two
/// what they send and 28.5% each to the others; a FIFO would give each
/// 1/1.05 of what it sends.
fn staggered(kind: &str, bw: u64) {
    let mut h = fq_link(kind, bw, &[]);
    let ports = distinct_ports(4, 1024);
    let shares = [15u64, 28, 30, 32];
    let end = 8 * SEC;
    let mut arrivals = Vec::new();
    for (i, (&port, &pct)) in ports.iter().zip(&shares).enumerate() {
        arrivals.extend(cbr(port, bw * pct / 100, 1500, i as u64 * SEC, end));
    }
    run(&mut h, arrivals);
    // Steady state: the last 3 s.
    let from = 5 * SEC;
    let window = (end - from) as f64 / 1e9;
    let rate = |s: &FlowStats| s.delivered_bytes as f64 * 8.0 / window / bw as f64;
    let stats: Vec<FlowStats> = ports
        .iter()
        .map(|&p| flow_stats(&h, p, bw, from, end))
        .collect();
    let got: Vec<f64> = stats.iter().map(rate).collect();
    let want = [0.15, 0.28, 0.285, 0.285];
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() < 0.02,
            "{kind} at {bw}: flow {i} got {g:.3} of the link, fair is {w}: {got:?}"
        );
    }
    // The light flow is untouched and barely waits.
    assert_eq!(stats[0].drops, 0, "{kind} at {bw}");
    let packet_time = 1500 * 8 * 1_000_000_000 / bw;
    assert!(
        median(&stats[0].delays) <= packet_time,
        "{kind} at {bw}: light flow median delay {}",
        median(&stats[0].delays)
    );
    // The flows over their share see a queue near the AQM's target (5 ms
    // for CoDel, 15 ms for PIE) plus their wait for the other flows'
    // packets in each round (at 1 Mbit/s a 1500-byte packet takes 12 ms, so
    // a round of four is 48 ms: the low-rate case of seed 002). A tail-drop
    // queue would grow by their excess, past 100 ms, for as long as it ran.
    let target = if kind == "fq_codel" { 5 * MS } else { 15 * MS };
    for s in &stats[2..] {
        assert!(s.drops > 0, "{kind} at {bw}: no drops");
        let m = median(&s.delays);
        assert!(
            m <= 2 * target + 6 * packet_time,
            "{kind} at {bw}: median queueing delay {m} ns"
        );
    }
}

#[test]
fn seed_002_staggered_flows_at_10_mbit() {
    staggered("fq_codel", 10_000_000);
}

#[test]
fn seed_002_staggered_flows_at_1_mbit() {
    staggered("fq_codel", 1_000_000);
}

#[test]
fn fq_pie_staggered_flows_share_fairly() {
    staggered("fq_pie", 10_000_000);
}

// ------------------------------------------------------------ ECN

/// A payload with a 20-byte IPv4 header carrying `ecn` bits.
#[derive(Debug)]
struct Ip4(Vec<u8>);

impl Ip4 {
    fn new(ecn: u8, len: u32) -> Self {
        let l = (len as u16).to_be_bytes();
        let mut h = vec![
            0x45, ecn, l[0], l[1], 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let mut acc: u32 = h
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        h[10..12].copy_from_slice(&(!(acc as u16)).to_be_bytes());
        Ip4(h)
    }
}

impl Payload for Ip4 {
    fn ip_bytes(&self) -> Option<&[u8]> {
        Some(&self.0)
    }
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.0)
    }
}

fn tally(c: &mut [u64; 4], drop: Option<DropReason>, p: &Ip4) {
    match drop {
        None => {
            c[0] += 1;
            c[1] += u64::from(p.0[1] & 3 == 3);
        }
        Some(DropReason::Aqm) => c[2] += 1,
        Some(_) => c[3] += 1,
    }
}

#[test]
fn with_ecn_capable_packets_are_marked_not_dropped() {
    for (ecn_on, ect) in [(true, true), (true, false), (false, true)] {
        let mut e: Engine<Ip4> = Engine::new(3);
        let p: &[(&str, u64)] = if ecn_on {
            &[("ecn", 1), ("limit", 100)]
        } else {
            &[("limit", 100)]
        };
        for cmd in [
            pipe(1, BW, 0),
            Command::ConfigSched(
                1,
                SchedConfig {
                    kind: Some("fq_codel".into()),
                    params: params(p),
                    ..Default::default()
                },
            ),
            Command::ConfigQueue(
                10,
                QueueConfig {
                    sched: Some(1),
                    flowset: FlowsetConfig::default(),
                },
            ),
            rule(100, Action::Queue(10), vec![]),
        ] {
            e.apply(0, cmd).unwrap();
        }
        // 10 Mbit/s into 8 for 2 s.
        let arrivals = cbr(1000, 10_000_000, 1500, 0, 2 * SEC);
        // Delivered, delivered with CE, AQM drops, other drops.
        let mut c = [0u64; 4];
        let mut now = 0;
        for &(t, port, len) in &arrivals {
            while let Some(d) = e.next_deadline().filter(|&d| d <= t) {
                now = d;
                while let Some(o) = e.poll(now) {
                    tally(&mut c, o.drop, &o.payload);
                }
            }
            now = now.max(t);
            let bits = if ect { 0b10 } else { 0 };
            match e.input(t, flow_packet(port, len), Ip4::new(bits, len)) {
                Verdict::Queued { .. } => {}
                Verdict::Drop {
                    reason, payload, ..
                } => tally(&mut c, Some(reason), &payload),
                Verdict::Pass { .. } => panic!("bypassed the pipe"),
            }
            while let Some(o) = e.poll(now) {
                tally(&mut c, o.drop, &o.payload);
            }
            let t = e.totals();
            assert!(t.conserved(), "{t:?}");
        }
        while let Some(d) = e.next_deadline() {
            while let Some(o) = e.poll(d) {
                tally(&mut c, o.drop, &o.payload);
            }
        }
        let [delivered, ce, aqm_drops, other_drops] = c;
        let t = e.totals();
        assert!(t.conserved() && t.inside == 0, "{t:?}");
        assert_eq!(delivered + aqm_drops + other_drops, arrivals.len() as u64);
        assert_eq!(t.marks, ce);
        if ecn_on && ect {
            // CoDel marks instead of dropping; the source ignores the marks,
            // so the queue reaches `limit` and overflow drops take over.
            assert!(ce > 50, "marks {ce}");
            assert_eq!(aqm_drops, 0);
            assert!(other_drops > 0);
        } else {
            assert_eq!(ce, 0);
            assert!(aqm_drops > 50, "drops {aqm_drops}");
        }
    }
}

// ------------------------------------------------------------ types

#[test]
fn both_types_are_registered_with_freebsd_defaults() {
    let t = sched::lookup("fq_codel").unwrap();
    assert_eq!(t.display, "FQ_CODEL");
    let d = t.describe.unwrap();
    assert_eq!(
        d(&[]),
        " FQ_CODEL target 5ms interval 100ms quantum 1514 limit 10240 flows 1024 NoECN"
    );
    let s = (t.sub_queues.unwrap())(&params(&[("flows", 8), ("ecn", 1)]));
    assert_eq!((s.buckets, s.limit), (8, 10240));
    let t = sched::lookup("FQ_PIE").unwrap();
    assert!((t.describe.unwrap())(&[]).starts_with("  FQ_PIE target 15ms tupdate 15ms"));
    // Every key lands in range, whatever the count.
    for n in [1, 2, 1000, 65536] {
        for port in 0..200 {
            assert!(bucket_of(&flow_packet(port, 1).key, n) < n);
        }
    }
}

#[test]
fn changing_type_or_parameters_with_packets_inside_loses_none() {
    let mut h = fq_link("fq_codel", BW, &[]);
    let ports = distinct_ports(3, 1024);
    let mut t = 0;
    for (kind, p) in [
        ("fq_codel", &[("flows", 4)][..]),
        ("fifo", &[][..]),
        ("fq_pie", &[("quantum", 300)][..]),
        ("fq_codel", &[][..]),
        ("rr", &[][..]),
        ("fq_codel", &[("limit", 5)][..]),
    ] {
        for i in 0..30 {
            h.send(t, flow_packet(ports[i % 3], 1000));
        }
        t += 10 * MS;
        h.apply_at(
            t,
            Command::ConfigSched(
                1,
                SchedConfig {
                    kind: Some(kind.into()),
                    params: params(p),
                    ..Default::default()
                },
            ),
        );
        h.check();
    }
    for i in 0..30 {
        h.send(t, flow_packet(ports[i % 3], 1000));
    }
    h.finish();
    // Only the last type's limit of 5 drops (the refill does not re-apply
    // limits), and nothing is lost in the changes.
    let t = h.e.totals();
    assert_eq!(t.dropped(), t.drops_for(DropReason::QueueFull));
    assert_eq!(t.delivered + t.dropped(), h.sent.len() as u64);
}
