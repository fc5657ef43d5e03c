//! The sharded data plane on the virtual clock (`dummynet::workers`):
//! several engine replicas and their rings, stepped from one thread at
//! exact times, against one engine fed the same packets.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use dummynet::workers::{Cluster, Routed, SharedLimits};
use dummynet_engine::flow::proto;
use dummynet_engine::{
    Command, Direction, DropReason, Engine, FlowKey, Nanos, PacketInfo, Target, Verdict,
};

const MS: Nanos = 1_000_000;

fn commands(text: &str) -> Vec<Command> {
    dummynet::lang::commands(text, None)
        .expect("test configuration parses")
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

/// Four pipes fed by source address, and a masked pipe whose flows each
/// get an instance (a link of their own) that hashes to some worker.
const CONFIG: &str = "
pipe 1 config bw 10Mbit/s delay 5ms queue 50
pipe 2 config bw 20Mbit/s delay 1ms queue 50
pipe 3 config bw 5Mbit/s queue 5
pipe 4 config delay 3ms
pipe 5 config bw 2Mbit/s delay 2ms queue 10 mask src-port 0xffff
add 100 pipe 1 ip from 10.0.0.1 to any
add 200 pipe 2 ip from 10.0.0.2 to any
add 300 pipe 3 ip from 10.0.0.3 to any
add 400 pipe 4 ip from 10.0.0.4 to any
add 500 pipe 5 ip from 10.0.0.5 to any
add 600 deny ip from 10.0.0.6 to any
add 700 allow ip from any to any
";

fn engine(text: &str) -> Engine<u32> {
    let mut e = Engine::new(7);
    e.apply_all(0, commands(text))
        .expect("test configuration applies");
    e
}

/// Packet `i`: from 10.0.0.(1 + i mod 7), source port 1000 + i mod 13.
fn packet(i: u32) -> PacketInfo {
    PacketInfo {
        len: 200 + (i % 5) * 100,
        key: FlowKey::v4(
            Ipv4Addr::new(10, 0, 0, 1 + (i % 7) as u8),
            Ipv4Addr::new(10, 9, 0, 1),
            proto::UDP,
            1000 + (i % 13) as u16,
            9,
        ),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    }
}

/// What became of each packet: delivered at a time, or dropped for a
/// reason, and the pipe it was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Passed(Nanos),
    Delivered(Nanos, Option<Target>),
    Dropped(DropReason, Option<Target>),
}

fn record(fates: &mut BTreeMap<u32, Fate>, now: Nanos, v: Verdict<u32>) {
    match v {
        Verdict::Pass { payload, .. } => {
            fates.insert(payload, Fate::Passed(now));
        }
        Verdict::Drop {
            payload,
            reason,
            target,
            ..
        } => {
            fates.insert(payload, Fate::Dropped(reason, target));
        }
        Verdict::Queued { .. } => {}
    }
}

fn record_output(fates: &mut BTreeMap<u32, Fate>, o: dummynet_engine::Output<u32>) {
    let fate = match o.drop {
        None => Fate::Delivered(o.at, o.target),
        Some(r) => Fate::Dropped(r, o.target),
    };
    fates.insert(o.payload, fate);
}

/// Times of the packets: bursts close together (queues build up), with
/// gaps (they drain).
fn arrival(i: u32) -> Nanos {
    Nanos::from(i) * 20_000 + Nanos::from(i / 100) * 20 * MS
}

fn run_single(packets: u32) -> BTreeMap<u32, Fate> {
    let mut e = engine(CONFIG);
    let mut fates = BTreeMap::new();
    for i in 0..packets {
        let now = arrival(i);
        while let Some(o) = e.poll(now) {
            record_output(&mut fates, o);
        }
        let v = e.input(now, packet(i), i);
        record(&mut fates, now, v);
    }
    while let Some(d) = e.next_deadline() {
        while let Some(o) = e.poll(d) {
            record_output(&mut fates, o);
        }
    }
    assert!(e.totals().conserved());
    fates
}

/// The same packets read by `workers` workers in turn (packet i by worker
/// i mod workers: what RSS spreading does to a flow mix), every ring
/// drained after each arrival.
fn run_sharded(workers: usize, packets: u32) -> (BTreeMap<u32, Fate>, Cluster<u32>) {
    let mut c = Cluster::new(workers, 64, |_| engine(CONFIG));
    let mut fates = BTreeMap::new();
    for i in 0..packets {
        let now = arrival(i);
        for (_, o) in c.poll(now) {
            record_output(&mut fates, o);
        }
        match c.input(i as usize % workers, now, packet(i), i) {
            Routed::Here(v) => record(&mut fates, now, v),
            Routed::Handed { .. } | Routed::Home { .. } => {}
        }
        for (_, _, v) in c.take_handoffs() {
            record(&mut fates, now, v);
        }
        let t = c.totals();
        assert_eq!(
            t.arrived,
            t.delivered + t.dropped() + t.inside + c.in_rings(),
            "books after packet {i}"
        );
    }
    while let Some(d) = c.next_deadline() {
        for (_, o) in c.poll(d) {
            record_output(&mut fates, o);
        }
    }
    (fates, c)
}

#[test]
fn sharded_replicas_give_every_packet_the_fate_one_engine_gives_it() {
    let packets = 2_000;
    let single = run_single(packets);
    assert_eq!(single.len(), packets as usize);
    // Not a vacuous comparison: every kind of fate happens.
    let has = |f: &dyn Fn(&Fate) -> bool| single.values().any(f);
    assert!(has(&|f| matches!(f, Fate::Passed(_))));
    assert!(has(&|f| matches!(f, Fate::Delivered(..))));
    assert!(has(&|f| matches!(
        f,
        Fate::Dropped(DropReason::QueueFull, _)
    )));
    assert!(has(&|f| matches!(
        f,
        Fate::Dropped(DropReason::RuleDeny, _)
    )));
    for workers in [2, 3, 4] {
        let (sharded, c) = run_sharded(workers, packets);
        assert_eq!(
            sharded.len(),
            packets as usize,
            "{workers} workers: every packet has a fate"
        );
        for (id, fate) in &single {
            assert_eq!(
                sharded.get(id),
                Some(fate),
                "{workers} workers: packet {id} (from {:?})",
                packet(*id).key
            );
        }
        // The work was really spread: packets crossed, and every worker
        // delivered some out of pipes it owns.
        let handed: u64 = c.links.iter().map(|l| l.counters.handed_out).sum();
        assert!(handed > 0, "{workers} workers: nothing crossed");
        for (w, e) in c.engines.iter().enumerate() {
            assert!(
                e.totals().delivered > 0,
                "{workers} workers: worker {w} delivered nothing"
            );
        }
        let t = c.totals();
        assert!(t.conserved(), "{workers} workers: {t:?}");
        assert_eq!(t.arrived, u64::from(packets));
        // `show` reads as one system: rule counters summed over the
        // replicas count every packet once.
        let mut snap = c.engines[0].snapshot();
        for e in &c.engines[1..] {
            snap.merge(e.snapshot());
        }
        let counted: u64 = snap
            .rules
            .iter()
            .filter(|r| !r.is_default)
            .map(|r| r.packets)
            .sum();
        assert_eq!(counted, u64::from(packets));
        // Pipe 5's masked scheduler (a pipe's own scheduler is numbered
        // past 65536).
        let instances: Vec<u16> = snap
            .scheds
            .iter()
            .filter(|s| s.mask.src_port != 0)
            .flat_map(|s| s.instances.iter().map(|i| i.id.sport))
            .collect();
        let mut ports = instances.clone();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(
            (instances.len(), ports.len()),
            (13, 13),
            "one instance per source port, on one worker each"
        );
    }
}

#[test]
fn order_within_a_pipe_is_kept_across_workers() {
    // One pipe, one flow, read alternately by two workers: it leaves in the
    // order it came, at the link's pace.
    let mut c = Cluster::new(2, 64, |_| engine(CONFIG));
    let mut out = Vec::new();
    for i in 0..80u32 {
        let now = Nanos::from(i) * 200_000;
        out.extend(c.poll(now).into_iter().map(|(w, o)| (w, o.payload, o.at)));
        let mut p = packet(0);
        p.len = 500;
        let _ = c.input(i as usize % 2, now, p, i);
        c.take_handoffs();
    }
    while let Some(d) = c.next_deadline() {
        out.extend(c.poll(d).into_iter().map(|(w, o)| (w, o.payload, o.at)));
    }
    assert_eq!(out.len(), 80, "pipe 1 holds 50: none dropped");
    let ids: Vec<u32> = out.iter().map(|(_, id, _)| *id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "in order");
    let owner = out[0].0;
    assert!(
        out.iter().all(|(w, _, _)| *w == owner),
        "one worker owns pipe 1"
    );
    // 500 bytes at 10 Mbit/s: 400 us apart once the queue has built.
    let gaps: Vec<Nanos> = out.windows(2).map(|w| w[1].2 - w[0].2).collect();
    assert!(gaps[40..].iter().all(|g| *g == 400_000), "{gaps:?}");
}

#[test]
fn a_full_ring_is_a_counted_drop_and_the_books_still_balance() {
    // Rings of 4 slots, never drained while 100 packets arrive at once.
    let mut c = Cluster::new(2, 4, |_| engine(CONFIG));
    let mut full = 0;
    for i in 0..100u32 {
        if let Routed::Here(Verdict::Drop {
            reason: DropReason::HandoffFull,
            ..
        }) = c.input(0, 0, packet(i), i)
        {
            full += 1;
        }
    }
    let t = c.totals();
    assert!(full > 0, "some packets found their ring full");
    assert_eq!(t.drops_for(DropReason::HandoffFull), full);
    assert_eq!(c.links[0].counters.handoff_full, full);
    assert_eq!(c.in_rings(), 4, "the ring to worker 1 is full");
    assert_eq!(
        t.arrived,
        t.delivered + t.dropped() + t.inside + c.in_rings()
    );
    c.take_handoffs();
    assert_eq!(c.in_rings(), 0);
    while let Some(d) = c.next_deadline() {
        c.poll(d);
    }
    let t = c.totals();
    assert!(t.conserved(), "{t:?}");
    assert_eq!(t.arrived, 100);
    assert_eq!(t.inside, 0);
}

#[test]
fn a_change_mid_traffic_is_atomic_across_workers() {
    // Rule 100 sends 10.0.0.1 to pipe 1 (5 ms); the change makes pipe 6
    // (40 ms) and sends 10.0.0.1 there instead, in one batch. Every packet
    // classified before it leaves through pipe 1, every one after through
    // pipe 6; none is lost (pipe 1 keeps what it holds) and none meets a
    // half-made change (no `no-such-pipe`).
    let config = "
pipe 1 config delay 5ms
add 100 pipe 1 ip from 10.0.0.1 to any
add 700 allow ip from any to any
";
    let mut c = Cluster::new(2, 64, |_| engine(config));
    let change =
        commands("pipe 6 config delay 40ms\ndelete 100\nadd 100 pipe 6 ip from 10.0.0.1 to any\n");
    // Between two drains of the rings (packets 200 and 201 wait there).
    let switch_at = 202 * 250_000;
    let mut sent = BTreeMap::new();
    let mut outs = Vec::new();
    let mut change = Some(change);
    for i in 0..400u32 {
        let now = Nanos::from(i) * 250_000;
        outs.extend(c.poll(now));
        if now >= switch_at {
            if let Some(cmds) = change.take() {
                // Some packets are still in the rings when the change comes:
                // they were classified before it.
                let before = c.in_rings();
                assert!(before > 0, "packets in the rings at the change");
                let (r, drained) = c.apply_all(now, cmds);
                r.expect("the change applies");
                assert_eq!(drained.len() as u64, before);
                assert_eq!(c.in_rings(), 0);
            }
        }
        let mut p = packet(0);
        p.key.sport = 1000 + (i % 50) as u16;
        sent.insert(i, now);
        let _ = c.input(i as usize % 2, now, p, i);
        // Drained only every fourth packet: the rest wait in the rings.
        if i % 4 == 3 {
            c.take_handoffs();
        }
    }
    c.take_handoffs();
    while let Some(d) = c.next_deadline() {
        outs.extend(c.poll(d));
    }
    assert_eq!(outs.len(), 400, "every packet delivered");
    for (_, o) in &outs {
        assert_eq!(o.drop, None, "packet {} dropped", o.payload);
        let at = sent[&o.payload];
        let (pipe, delay) = if at < switch_at {
            (Target::Pipe(1), 5 * MS)
        } else {
            (Target::Pipe(6), 40 * MS)
        };
        assert_eq!(o.target, Some(pipe), "packet {} sent at {at}", o.payload);
        // Handed over late (drained every fourth packet), a packet enters
        // its pipe at most three arrivals after it was classified.
        assert!(
            o.at >= at + delay && o.at <= at + delay + 750_000,
            "packet {} sent at {at} left at {}",
            o.payload,
            o.at
        );
    }
    assert!(c.totals().conserved());
}

#[test]
fn what_cannot_be_sharded_is_refused_on_every_replica() {
    let mut c = Cluster::new(2, 64, |_| engine(CONFIG));
    let (r, _) = c.apply_all(0, commands("pipe 9 config delay 1ms\ndisable one_pass\n"));
    let e = r.expect_err("one_pass 0 is refused");
    assert!(e.to_string().contains("one worker"), "{e}");
    for (w, engine) in c.engines.iter().enumerate() {
        let snap = engine.snapshot();
        assert!(
            snap.links.iter().all(|l| l.number != 9),
            "worker {w} has pipe 9"
        );
        assert!(snap.settings.one_pass);
    }
    // Several workers take the rules with dynamic state, counted ones too.
    let (r, _) = c.apply_all(
        0,
        commands("add 40 check-state\nadd 50 allow ip from any to any keep-state\nadd 60 allow ip from any to any record-state :x\nadd 70 allow ip from any to any limit src-addr 4 :y\nadd 80 allow ip from any to any set-limit dst-addr,dst-port 2 :z\n"),
    );
    r.expect("keep-state, record-state, check-state, limit and set-limit work with workers");
}

#[test]
fn consecutive_pipes_are_on_different_workers() {
    // Pipe N is on worker N mod workers (its own scheduler is 65536 + N):
    // two pipes, two workers, one each, whichever worker reads.
    for workers in [2usize, 4] {
        let mut c = Cluster::new(workers, 64, |_| engine(CONFIG));
        let mut owners = std::collections::HashMap::new();
        for i in 0..4u32 {
            // Sources 10.0.0.1 to .4: pipes 1 to 4.
            let now = Nanos::from(i) * MS;
            let _ = c.input(0, now, packet(i), i);
            c.take_handoffs();
        }
        while let Some(d) = c.next_deadline() {
            for (w, o) in c.poll(d) {
                owners.insert(o.target, w);
            }
        }
        for pipe in 1..=4u32 {
            assert_eq!(
                owners.get(&Some(Target::Pipe(pipe))),
                Some(&(pipe as usize % workers)),
                "{workers} workers: pipe {pipe}"
            );
        }
    }
}

/// A packet for a worker that has stopped (its end of the ring dropped,
/// as when the daemon ends) is not lost in the ring: the reading worker's
/// twin of the pipe takes it, and it leaves with the pipe's delay.
#[test]
fn a_packet_for_a_stopped_worker_is_kept_by_the_one_that_read_it() {
    let mut cluster = Cluster::new(2, 16, |_| engine(CONFIG));
    // Pipe 1 (10.0.0.1) is on worker 1 of 2 (its scheduler 65537 is odd).
    let before = cluster.input(0, 0, packet(0), 0);
    assert!(matches!(before, Routed::Handed { to: 1, .. }));
    // Worker 1 stops: its rings go with it.
    drop(cluster.links.pop());
    let after = cluster.input(0, MS, packet(7), 7);
    assert!(
        matches!(after, Routed::Here(Verdict::Queued { .. })),
        "queued by worker 0 instead"
    );
    let out = cluster.engines[0]
        .poll(100 * MS)
        .expect("worker 0 lets it out");
    assert_eq!(out.payload, 7);
    assert!(out.drop.is_none());
    // 400 bytes at 10 Mbit/s (320 us), then 5 ms of delay.
    assert_eq!(out.at, MS + 320_000 + 5 * MS);
}

/// A bridge's rules with dynamic state, both ways: forward flows from
/// 10.0.0.1-3 go to pipes 1-3 and make a `:fwd` state there (their `in`
/// pass), which their `out` pass and their replies then match (and so go
/// to the state's pipe); flows from 10.0.0.4-5 are let in, and their `out`
/// pass makes a `:back` state in pipe 4, which lets their replies in. A
/// reply with no state is denied.
const STATEFUL: &str = "
pipe 1 config bw 10Mbit/s delay 5ms queue 20
pipe 2 config bw 4Mbit/s delay 1ms queue 10
pipe 3 config delay 2ms mask src-port 0xffff
pipe 4 config bw 8Mbit/s delay 3ms queue 30
add 100 check-state :fwd
add 110 pipe 1 udp from 10.0.0.1 to any in keep-state :fwd
add 120 pipe 2 udp from 10.0.0.2 to any in keep-state :fwd
add 130 pipe 3 udp from 10.0.0.3 to any in keep-state :fwd
add 140 allow udp from 10.0.0.0/24 to any in
add 200 pipe 4 udp from 10.0.0.0/24 to any out record-state :back
add 300 check-state :back
add 400 deny ip from any to any
";

/// Flows 0..20: from 10.0.0.(1 + f mod 5):(2000 + f) to 10.9.0.(1 + f mod
/// 2):53. Packet `i` is of flow i mod 20, forward, or a reply one round in
/// three; flows 18 and 19 only ever reply (nothing opened them).
fn stateful_packet(i: u32) -> PacketInfo {
    let f = i % 20;
    let (a, b) = (
        (Ipv4Addr::new(10, 0, 0, 1 + (f % 5) as u8), 2000 + f as u16),
        (Ipv4Addr::new(10, 9, 0, 1 + (f % 2) as u8), 53),
    );
    let reply = f >= 18 || (i / 20) % 3 == 2;
    let ((src, sport), (dst, dport)) = if reply { (b, a) } else { (a, b) };
    PacketInfo {
        len: 300 + (i % 4) * 200,
        key: FlowKey::v4(src, dst, proto::UDP, sport, dport),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    }
}

fn is_reply(i: u32) -> bool {
    stateful_packet(i).key.src.to_be_bytes()[13] == 9
}

/// Bursts of 40 packets 30 us apart, then 15 ms of quiet.
fn stateful_arrival(i: u32) -> Nanos {
    Nanos::from(i) * 30_000 + Nanos::from(i / 40) * 15 * MS
}

/// What became of a bridged frame after both passes: sent on at a time,
/// or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bridged {
    Sent(Nanos),
    Dropped(DropReason),
}

/// One engine as a bridge: each frame's `in` pass, then (once it passed,
/// at once or out of a pipe) its `out` pass.
struct BridgeSingle {
    e: Engine<u32>,
    fates: BTreeMap<u32, Bridged>,
    out_pass: std::collections::HashSet<u32>,
}

impl BridgeSingle {
    fn verdict(&mut self, now: Nanos, info: PacketInfo, v: Verdict<u32>) {
        let mut v = v;
        loop {
            match v {
                Verdict::Pass { payload, .. } if self.out_pass.insert(payload) => {
                    let out = PacketInfo {
                        dir: Direction::Out,
                        ..info
                    };
                    v = self.e.input(now, out, payload);
                }
                Verdict::Pass { payload, .. } => {
                    self.fates.insert(payload, Bridged::Sent(now));
                    return;
                }
                Verdict::Drop {
                    payload, reason, ..
                } => {
                    self.fates.insert(payload, Bridged::Dropped(reason));
                    return;
                }
                Verdict::Queued { .. } => return,
            }
        }
    }

    fn step(&mut self, until: Nanos) {
        while let Some(d) = self.e.next_deadline().filter(|d| *d <= until) {
            while let Some(o) = self.e.poll(d) {
                let info = o.info;
                self.verdict(d, info, output_verdict(o));
            }
        }
    }
}

/// What leaving a pipe is for a bridged frame: passing it, or a drop.
fn output_verdict(o: dummynet_engine::Output<u32>) -> Verdict<u32> {
    match o.drop {
        None => Verdict::Pass {
            payload: o.payload,
            rule: 0,
        },
        Some(reason) => Verdict::Drop {
            payload: o.payload,
            reason,
            rule: None,
            target: None,
        },
    }
}

fn bridge_single(packets: u32) -> (BTreeMap<u32, Bridged>, Engine<u32>) {
    let mut b = BridgeSingle {
        e: engine(STATEFUL),
        fates: BTreeMap::new(),
        out_pass: std::collections::HashSet::new(),
    };
    for i in 0..packets {
        let now = stateful_arrival(i);
        b.step(now);
        let v = b.e.input(now, stateful_packet(i), i);
        b.verdict(now, stateful_packet(i), v);
    }
    b.step(Nanos::MAX);
    (b.fates, b.e)
}

/// The same frames on a cluster of `workers`, each read by the worker
/// the kernel's fanout would give its flow ([`dummynet::workers::reader`]),
/// its `out` pass run by [`dummynet::workers::Links::out_pass`] where it
/// left its pipe. `naive`: the `out` pass runs there whoever read the
/// frame (what a sharded bridge would do without sending it back), to
/// show that the comparison can fail.
struct BridgeCluster {
    c: Cluster<u32>,
    fates: BTreeMap<u32, Bridged>,
    reader: BTreeMap<u32, usize>,
    out_pass: std::collections::HashSet<u32>,
    naive: bool,
}

impl BridgeCluster {
    fn routed(&mut self, w: usize, now: Nanos, info: PacketInfo, r: Routed<u32>) {
        match r {
            Routed::Here(v) => self.verdict(w, now, info, v),
            Routed::Handed { .. } | Routed::Home { .. } => {}
        }
    }

    fn verdict(&mut self, w: usize, now: Nanos, info: PacketInfo, v: Verdict<u32>) {
        match v {
            Verdict::Pass { payload, .. } if self.out_pass.insert(payload) => {
                let out = PacketInfo {
                    dir: Direction::Out,
                    ..info
                };
                let reader = if self.naive { w } else { self.reader[&payload] };
                let r = self.c.links[w].out_pass(&mut self.c.engines[w], now, out, payload, reader);
                self.routed(w, now, out, r);
            }
            Verdict::Pass { payload, .. } => {
                self.fates.insert(payload, Bridged::Sent(now));
            }
            Verdict::Drop {
                payload, reason, ..
            } => {
                self.fates.insert(payload, Bridged::Dropped(reason));
            }
            Verdict::Queued { .. } => {}
        }
    }

    /// What the rings hold, taken (and what that hands on, taken too).
    fn drain(&mut self, now: Nanos) {
        while self.c.in_rings() > 0 {
            for (w, info, v) in self.c.take_handoffs() {
                self.verdict(w, now, info, v);
            }
        }
    }

    fn step(&mut self, until: Nanos) {
        while let Some(d) = self.c.next_deadline().filter(|d| *d <= until) {
            for (w, o) in self.c.poll(d) {
                let info = o.info;
                self.verdict(w, d, info, output_verdict(o));
            }
            self.drain(d);
        }
    }
}

fn bridge_sharded(workers: usize, packets: u32, naive: bool) -> BridgeCluster {
    let mut b = BridgeCluster {
        c: Cluster::new(workers, 256, |_| engine(STATEFUL)),
        fates: BTreeMap::new(),
        reader: BTreeMap::new(),
        out_pass: std::collections::HashSet::new(),
        naive,
    };
    for i in 0..packets {
        let now = stateful_arrival(i);
        b.step(now);
        let info = stateful_packet(i);
        let (w, r) = b.c.read(now, info, i);
        b.reader.insert(i, w);
        b.routed(w, now, info, r);
        b.drain(now);
    }
    b.step(Nanos::MAX);
    b
}

#[test]
fn states_work_both_ways_across_workers_as_in_one_engine() {
    let packets = 1_200;
    let (single, one) = bridge_single(packets);
    assert_eq!(single.len(), packets as usize);
    // Not vacuous: replies pass on their flow's state (both kinds), replies
    // with none are denied, and queues overflow.
    let replies_sent = (0..packets)
        .filter(|i| is_reply(*i) && matches!(single[i], Bridged::Sent(_)))
        .count();
    assert!(replies_sent > 100, "{replies_sent} replies passed");
    let denied: Vec<u32> = (0..packets)
        .filter(|i| single[i] == Bridged::Dropped(DropReason::RuleDeny))
        .collect();
    assert!(!denied.is_empty() && denied.iter().all(|i| is_reply(*i)));
    assert!(single
        .values()
        .any(|f| *f == Bridged::Dropped(DropReason::QueueFull)));
    let snap = one.snapshot();
    // Both kinds of state matched packets after the one that made them.
    for name in ["fwd", "back"] {
        assert!(
            snap.states.iter().any(|s| s.name == name && s.packets > 5),
            "{name}: {:?}",
            snap.states
        );
    }
    for workers in [2, 3, 4] {
        let b = bridge_sharded(workers, packets, false);
        // Flows were read by every worker, and frames went back to their
        // readers for their `out` pass.
        let readers: std::collections::BTreeSet<usize> = b.reader.values().copied().collect();
        assert_eq!(readers.len(), workers, "{workers} workers: {readers:?}");
        for (id, fate) in &single {
            assert_eq!(
                b.fates.get(id),
                Some(fate),
                "{workers} workers: frame {id} ({:?})",
                stateful_packet(*id).key
            );
        }
        assert_eq!(b.fates.len(), single.len());
        // `ipfw -d show` as one system: every state once, as one engine
        // has it (made, matched and counted on one worker each).
        let mut merged = b.c.engines[0].snapshot();
        for e in &b.c.engines[1..] {
            merged.merge(e.snapshot());
        }
        let strip =
            |s: &dummynet_engine::stats::StateView| (s.rule, s.key, s.name.clone(), s.packets);
        let want: Vec<_> = snap.states.iter().map(strip).collect();
        let got: Vec<_> = merged.states.iter().map(strip).collect();
        assert!(want.len() >= 18, "{want:?}");
        assert_eq!(got, want, "{workers} workers");
        assert_eq!(merged.totals, snap.totals, "{workers} workers");
    }
    // Run where they left their pipe, `out` passes miss the states their
    // readers hold: the comparison above would fail.
    let naive = bridge_sharded(2, packets, true);
    assert!(
        single.iter().any(|(id, f)| naive.fates.get(id) != Some(f)),
        "out passes away from their reader changed nothing"
    );
}

#[test]
fn states_expire_across_workers_as_in_one_engine() {
    // UDP states live 10 s (dyn_udp_lifetime) from their last packet.
    let (_, mut one) = bridge_single(200);
    let mut b = bridge_sharded(3, 200, false);
    let last = stateful_arrival(199);
    let merged = |b: &BridgeCluster| {
        let mut m = b.c.engines[0].snapshot();
        for e in &b.c.engines[1..] {
            m.merge(e.snapshot());
        }
        m
    };
    let before = merged(&b).states.len();
    assert!(before > 0 && before == one.snapshot().states.len());
    // Time passes on one worker only (a frame nobody's rules take): the
    // others' clocks stand still, and the merged view still tells the
    // states that ran out from the live ones.
    let late = last + 9 * 1_000_000_000;
    let stray = PacketInfo {
        key: FlowKey::v4(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 2),
            proto::UDP,
            1,
            1,
        ),
        ..stateful_packet(0)
    };
    let at = |b: &mut BridgeCluster, one: &mut Engine<u32>, now: Nanos, id: u32| {
        let _ = b.c.input(0, now, stray, id);
        let _ = one.input(now, stray, id);
    };
    at(&mut b, &mut one, late, 10_000);
    let live_then = one.snapshot().states.len();
    assert_eq!(merged(&b).states.len(), live_then);
    at(&mut b, &mut one, late + 2_000_000_000, 10_001);
    assert_eq!(one.snapshot().states.len(), 0, "one engine: all expired");
    assert_eq!(merged(&b).states.len(), 0, "workers: all expired");
}

/// `limit src-addr 2` on UDP flows from six sources, five flows each;
/// replies (from 10.9.0.1) pass on their flow's state, and a flow the
/// limit refused is denied both ways.
const LIMITED: &str = "
add 100 allow udp from 10.0.0.0/16 to any limit src-addr 2
add 200 deny ip from any to any
";

/// Packet `i` of the limited mix and its time. Round `r` (200 packets,
/// 60 ms apart, then 4 s of quiet) sends on three of each source's five
/// flows, a different three each round: a flow left out lives out its
/// state (dyn_udp_lifetime: 10 s after its last packet) during the next
/// round, and flows the limit refused then get in, read by whichever
/// worker the fanout gives them.
fn limited_packet(i: u32) -> (Nanos, PacketInfo) {
    let round = i / 200;
    let r = i.wrapping_mul(2_654_435_761).rotate_left(13);
    let source = r % 6;
    let flow = (round + (r >> 8) % 3) % 5;
    let reply = (r >> 16).is_multiple_of(4);
    let host = (Ipv4Addr::new(10, 0, source as u8, 1), 3000 + flow as u16);
    let server = (Ipv4Addr::new(10, 9, 0, 1), 53);
    let ((src, sport), (dst, dport)) = if reply {
        (server, host)
    } else {
        (host, server)
    };
    let at = Nanos::from(i) * 60 * MS + Nanos::from(round) * 4_000 * MS;
    let info = PacketInfo {
        len: 100,
        key: FlowKey::v4(src, dst, proto::UDP, sport, dport),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    };
    (at, info)
}

/// Passed (true) or denied, per packet, by one engine.
fn limited_single(packets: u32) -> (Vec<bool>, Engine<u32>) {
    let mut e = engine(LIMITED);
    let fates = (0..packets)
        .map(|i| {
            let (at, info) = limited_packet(i);
            matches!(e.input(at, info, i), Verdict::Pass { .. })
        })
        .collect();
    (fates, e)
}

/// The same on `workers` workers, each packet read by its flow's reader;
/// `own_counts`: each worker counts `limit` on its own (what sharding
/// without a shared count would do), to show the comparison can fail.
fn limited_sharded(
    workers: usize,
    packets: u32,
    own_counts: bool,
) -> (Vec<bool>, Cluster<u32>, std::sync::Arc<SharedLimits>) {
    let shared = std::sync::Arc::new(SharedLimits::default());
    let mut c = Cluster::with_limits(workers, 64, |_| engine(LIMITED), shared.clone());
    if own_counts {
        for e in &mut c.engines {
            e.share_limits(std::sync::Arc::new(SharedLimits::default()));
        }
    }
    let fates = (0..packets)
        .map(|i| {
            let (at, info) = limited_packet(i);
            let (_, r) = c.read(at, info, i);
            matches!(r, Routed::Here(Verdict::Pass { .. }))
        })
        .collect();
    (fates, c, shared)
}

#[test]
fn limit_admits_across_workers_what_one_engine_admits() {
    let packets = 1_400;
    let (single, one) = limited_single(packets);
    // Not vacuous: the limit refused flows, and flows it refused in one
    // round got in once others' states expired (their counts went down).
    let denied: Vec<u32> = (0..packets).filter(|i| !single[*i as usize]).collect();
    assert!(denied.len() > 100, "{} denied", denied.len());
    let key = |i: u32| limited_packet(i).1.key;
    let admitted_later = denied.iter().any(|d| {
        (*d..packets).any(|j| {
            single[j as usize] && key(j) == key(*d) && limited_packet(j).0 > limited_packet(*d).0
        })
    });
    assert!(admitted_later, "no refused flow got in later");
    let want = one.snapshot();
    assert!(want.states_refused > 10);
    for workers in [2, 3, 4] {
        let (sharded, c, shared) = limited_sharded(workers, packets, false);
        // The flows of one source were read by several workers.
        let readers: std::collections::BTreeSet<usize> = (0..packets)
            .filter(|i| limited_packet(*i).1.key.src == want_src(0))
            .map(|i| dummynet::workers::reader(&limited_packet(i).1.key, workers))
            .collect();
        assert!(readers.len() > 1, "{workers} workers: {readers:?}");
        for i in 0..packets {
            assert_eq!(
                sharded[i as usize],
                single[i as usize],
                "{workers} workers: packet {i} ({:?}) at {}",
                key(i),
                limited_packet(i).0
            );
        }
        // `ipfw -d show` as one system: the same live states, counted as
        // one engine counts them.
        let mut merged = c.engines[0].snapshot();
        for e in &c.engines[1..] {
            merged.merge(e.snapshot());
        }
        let strip = |s: &dummynet_engine::stats::StateView| (s.rule, s.key, s.packets, s.limit);
        let got: Vec<_> = merged.states.iter().map(strip).collect();
        let wanted: Vec<_> = want.states.iter().map(strip).collect();
        assert_eq!(got, wanted, "{workers} workers");
        assert_eq!(merged.states_refused, want.states_refused);
        // Never more than two places a source, however many workers.
        assert!(shared.held() <= 2 * 6, "{} held", shared.held());
    }
    // Each worker counting its own: a source gets two flows per worker.
    let (own, _, _) = limited_sharded(3, packets, true);
    assert!(
        (0..packets as usize).any(|i| own[i] != single[i]),
        "counting apart changed nothing"
    );
}

fn want_src(source: u8) -> u128 {
    u128::from(u32::from(Ipv4Addr::new(10, 0, source, 1)))
}

#[test]
fn a_limit_count_goes_down_when_rules_change_or_states_expire_on_any_worker() {
    let (_, mut c, shared) = limited_sharded(3, 200, false);
    let held = shared.held();
    assert_eq!(held, 12, "two places for each of six sources");
    // The rule goes: every worker's states of it go, and their places.
    let (r, _) = c.apply_all(limited_packet(200).0, commands("delete 100\n"));
    r.expect("delete applies");
    assert_eq!(shared.held(), 0);
    assert!(c.engines.iter().all(|e| e.snapshot().states.is_empty()));
    // Back, with states again; then 11 s on, a frame no rule keeps state
    // for reaches each worker (its sweep of expired states runs on
    // arrivals): the places of the expired states are given back, by
    // every worker.
    let (r, _) = c.apply_all(
        limited_packet(200).0,
        commands("add 100 allow udp from 10.0.0.0/16 to any limit src-addr 2\n"),
    );
    r.expect("add applies");
    let t = limited_packet(200).0;
    for i in 0..60 {
        let (_, info) = limited_packet(i);
        let _ = c.read(t, info, i);
    }
    assert_eq!(shared.held(), 12);
    let later = t + 11_000 * MS;
    let stray = PacketInfo {
        key: FlowKey::v4(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 2),
            proto::UDP,
            1,
            1,
        ),
        ..limited_packet(0).1
    };
    let mut spread = 0;
    for w in 0..3 {
        let own = c.engines[w].snapshot().states.len();
        spread += usize::from(own > 0);
        let before = shared.held();
        let _ = c.input(w, later, stray, 10_000 + w as u32);
        assert_eq!(
            shared.held(),
            before - own,
            "worker {w} gave back its {own}"
        );
    }
    assert!(spread > 1, "the places were held by several workers");
    assert_eq!(shared.held(), 0);
}

/// The per-packet log of a sharded data plane on the virtual clock: each
/// worker hands its records (arrival where it read the packet, into its
/// pipe and out of it, or its drop, where the pipe's owner is) to its own
/// tap of one observer, as the live workers do, and says its floor (its
/// engine's time) after each step. The log reads as one system: in time
/// order, with no record out of order, each packet once with an id that
/// names its reader, every packet accounted for (arrival first, departure
/// or drop last), in the numbers of the replicas' books.
#[test]
fn the_workers_log_is_one_stream_in_time_order_with_every_packet_whole() {
    use dummynet::live::observer::{first_id, Kind, ObserveOptions, Observer, Record, Tap};
    let dir = std::env::temp_dir().join(format!("dummynet-wlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = ObserveOptions {
        log: Some(dir.join("log.jsonl")),
        ..ObserveOptions::default()
    };
    let (workers, packets) = (3usize, 3_000u32);
    let (observer, mut taps, thread) = Observer::start_workers(&options, workers).unwrap();
    // The start an hour from now on the wall clock: only the floors let
    // records out, never the merge's window, so the order is exact.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        + 3_600_000_000_000;
    for t in &mut taps {
        t.start(wall);
    }
    let mut c = Cluster::new(workers, 64, |_| engine(CONFIG));
    // Packet i is read by worker i mod workers, which numbers it.
    let id = |i: u32| first_id(i as usize % workers) + u64::from(i) / workers as u64;
    let rec = |kind, t, i: u32, info: &PacketInfo| Record {
        len: info.len,
        dir: info.dir,
        ..Record::new(kind, t, (id(i), false))
    };
    let fate = |v: &Verdict<u32>| match v {
        Verdict::Pass { payload, .. } => (Kind::Departure, *payload, None),
        Verdict::Drop {
            payload, reason, ..
        } => (Kind::Drop, *payload, Some(*reason)),
        Verdict::Queued { .. } => (Kind::Enqueue, 0, None),
    };
    let polled = |c: &mut Cluster<u32>, taps: &mut [Tap], now: Nanos| {
        for (w, o) in c.poll(now) {
            let kind = if o.drop.is_some() {
                Kind::Drop
            } else {
                Kind::Departure
            };
            let r = Record {
                reason: o.drop,
                target: o.target,
                ..rec(kind, o.at, o.payload, &o.info)
            };
            taps[w].push(&c.engines[w], r, None);
        }
    };
    for i in 0..packets {
        let now = arrival(i);
        polled(&mut c, &mut taps, now);
        let (w, info) = (i as usize % workers, packet(i));
        taps[w].push(&c.engines[w], rec(Kind::Arrival, now, i, &info), None);
        if let Routed::Here(v) = c.input(w, now, info, i) {
            let (kind, _, reason) = fate(&v);
            let r = Record {
                reason,
                ..rec(kind, now, i, &info)
            };
            taps[w].push(&c.engines[w], r, None);
        }
        // Handed packets enter their owner's pipe (or are refused) now.
        for (o, info, v) in c.take_handoffs() {
            // Only packet i was handed just now: a queued one is it.
            let (kind, p, reason) = fate(&v);
            let p = if kind == Kind::Enqueue { i } else { p };
            let r = Record {
                reason,
                ..rec(kind, now, p, &info)
            };
            taps[o].push(&c.engines[o], r, None);
        }
        for (w, tap) in taps.iter().enumerate() {
            tap.floor(c.engines[w].now(), false);
        }
    }
    while let Some(d) = c.next_deadline() {
        polled(&mut c, &mut taps, d);
    }
    drop(taps);
    thread.join();
    let stats = observer.stats();
    assert_eq!(stats.out_of_order, 0, "{stats}");
    assert_eq!(stats.lost_total(), 0, "{stats}");

    let text = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let times: Vec<u64> = events.iter().map(|e| e["t_ns"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order");
    let mut steps: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for e in &events {
        let kind = e["event"].as_str().unwrap().to_string();
        steps
            .entry(e["id"].as_u64().unwrap())
            .or_default()
            .push(kind);
    }
    assert_eq!(steps.len(), packets as usize, "every packet, once");
    for i in 0..packets {
        let s = &steps[&id(i)];
        assert!(
            s.len() == 2 && s[0] == "arrival" && (s[1] == "departure" || s[1] == "drop"),
            "packet {i}: {s:?}"
        );
    }
    let t = c.totals();
    let count = |k: &str| events.iter().filter(|e| e["event"] == k).count() as u64;
    assert_eq!(
        (count("arrival"), count("departure"), count("drop")),
        (t.arrived, t.delivered, t.dropped())
    );
    // Not vacuous: packets crossed, and every kind of end happened.
    assert!(c.links.iter().map(|l| l.counters.handed_out).sum::<u64>() > 0);
    assert!(count("drop") > 0 && count("departure") > 0);
}
