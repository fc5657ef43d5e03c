//! A closed-loop, TCP-like source on the virtual clock, and a harness that
//! runs a few of them through an [`Engine`].
//!
//! Open-loop sources (constant bit rate) cannot show what an AQM is for: a
//! queue that stays short because the *senders* slow down when it drops. This
//! is the smallest sender that does, modelled on NewReno:
//!
//! - slow start and congestion avoidance (RFC 5681 §3.1), window in whole
//!   segments, one ACK per segment (no delayed ACKs);
//! - fast retransmit on the third duplicate ACK and NewReno fast recovery:
//!   halve once per window of data, retransmit the next hole on each partial
//!   ACK (RFC 5681 §3.2, RFC 6582 §3.2);
//! - a retransmission timer as the fallback (RFC 6298), after which the
//!   sender goes back to the oldest unacknowledged segment with a window of
//!   one (RFC 5681 §3.1, eq. 4).
//!
//! Not modelled: SACK, delayed ACKs, ECN, the receive window (always open),
//! Nagle and application pacing (the sender always has data until it stops),
//! byte sequence numbers (a segment is the unit), header options, and any
//! shaping or loss on the reverse path (ACKs take a fixed delay and do not go
//! through the engine). The model is deterministic: no randomness, and ties
//! at the same instant are broken by flow index and arrival order.
//!
//! Without SACK the model shares NewReno's known weakness: a window that
//! loses many segments (slow start overshooting a large drop-tail buffer
//! loses every other one) is repaired one hole per RTT until the timer
//! fires, and then by going back over data the receiver may already hold,
//! while duplicate ACKs below `recover` cannot start a fast retransmit. A
//! flow in a shared drop-tail FIFO can so be shut out for seconds. Under
//! CoDel and FQ-CoDel, which drop single packets far apart, this does not
//! arise; the drop-tail runs are there for their queueing delay, which it
//! does not lower.
//!
//! Time is the engine's: `u64` nanoseconds, virtual.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::net::Ipv4Addr;

use dummynet_engine::flow::proto;
use dummynet_engine::{Direction, DropReason, Engine, FlowKey, Nanos, Output, PacketInfo, Verdict};

use super::{MS, SEC};

/// Bytes of one data segment on the wire (IP packet), as the engine bills it.
pub const WIRE_LEN: u32 = 1500;
/// Payload bytes per segment: 1500 less 20 (IP), 20 (TCP) and 12 (timestamp
/// option), what iperf's goodput counts.
pub const MSS: u64 = 1448;
/// RFC 5681 §3.1: IW = min(4·SMSS, max(2·SMSS, 4380 bytes)), three
/// segments of 1448 bytes.
const INITIAL_WINDOW: u64 = 3;
/// RFC 5681 §3.2: the third duplicate ACK signals a loss.
const DUP_THRESH: u32 = 3;
/// RFC 6298 §2.1: the RTO before any RTT sample.
const INITIAL_RTO: Nanos = SEC;
/// RFC 6298 §2.4 asks for at least 1 s; Linux and FreeBSD use far less
/// (200 ms and 30 ms). 200 ms keeps a timeout rare but not crippling.
const MIN_RTO: Nanos = 200 * MS;
/// RFC 6298 §2.5 allows a cap of at least 60 s.
const MAX_RTO: Nanos = 60 * SEC;

/// What a sender has done, cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments handed to the network, retransmissions included.
    pub sent: u64,
    pub retransmits: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
}

/// NewReno's sender state, in segments.
#[derive(Debug)]
pub struct Sender {
    /// SND.UNA: the oldest unacknowledged segment.
    una: u64,
    /// SND.NXT: the next segment to send; back to `una` after a timeout.
    nxt: u64,
    /// SND.MAX: one past the highest segment ever sent.
    max: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    /// Segments acknowledged since `cwnd` last grew in congestion avoidance:
    /// it grows by one segment per window acknowledged, i.e. per RTT (RFC
    /// 5681 §3.1, the byte-counting form of eq. 3).
    acked_in_ca: u64,
    dupacks: u32,
    /// RFC 6582's `recover`: SND.MAX when the last loss was detected. An ACK
    /// at or past it ends fast recovery; duplicate ACKs below it start no new
    /// one, so a window's losses halve `cwnd` once. (Compared as FreeBSD
    /// does: `ack >= recover` is a full ACK, `ack > recover` may start a
    /// new recovery.)
    recover: u64,
    in_recovery: bool,
    /// Whether this recovery has seen a partial ACK yet (RFC 6582's
    /// "Impatient" timer: only the first one restarts the timer, so a window
    /// with many holes falls back to a timeout instead of taking one RTT per
    /// hole).
    partial_seen: bool,
    srtt: Option<Nanos>,
    rttvar: Nanos,
    rto: Nanos,
    /// When the retransmission timer fires, if armed.
    pub rto_at: Option<Nanos>,
    /// The one segment being timed, and when it was sent (RFC 6298 §3:
    /// Karn's algorithm, no sample from a retransmitted segment).
    timing: Option<(u64, Nanos)>,
    /// No new data is sent from `stop` on (retransmissions still are).
    stop: Nanos,
    /// Segments to hand to the network, in order; the harness drains it.
    outbox: Vec<u64>,
    pub stats: SenderStats,
}

impl Sender {
    pub fn new(stop: Nanos) -> Self {
        Sender {
            una: 0,
            nxt: 0,
            max: 0,
            cwnd: INITIAL_WINDOW,
            // RFC 5681 §3.1: "arbitrarily high" at first.
            ssthresh: u64::MAX,
            acked_in_ca: 0,
            dupacks: 0,
            recover: 0,
            in_recovery: false,
            partial_seen: false,
            srtt: None,
            rttvar: 0,
            rto: INITIAL_RTO,
            rto_at: None,
            timing: None,
            stop,
            outbox: Vec::new(),
            stats: SenderStats::default(),
        }
    }

    /// RFC 5681's FlightSize: data sent and not yet acknowledged.
    fn flight(&self) -> u64 {
        self.max - self.una
    }

    /// Sends what the window allows: from SND.NXT on (a retransmission when
    /// SND.NXT is below SND.MAX after a timeout), new data only before
    /// `stop`.
    pub fn send(&mut self, now: Nanos) {
        while self.nxt < self.una + self.cwnd && (self.nxt < self.max || now < self.stop) {
            let seq = self.nxt;
            self.nxt += 1;
            if seq < self.max {
                self.note_retransmit();
            } else {
                self.max = seq + 1;
                if self.timing.is_none() {
                    self.timing = Some((seq, now));
                }
            }
            self.outbox.push(seq);
            self.stats.sent += 1;
            // RFC 6298 §5.1: arm the timer if it is not running.
            if self.rto_at.is_none() {
                self.rto_at = Some(now + self.rto);
            }
        }
    }

    fn retransmit(&mut self, seq: u64) {
        self.note_retransmit();
        self.outbox.push(seq);
        self.stats.sent += 1;
    }

    fn note_retransmit(&mut self) {
        self.stats.retransmits += 1;
        // Karn: an ACK after a retransmission cannot tell which copy it
        // answers.
        self.timing = None;
    }

    /// RFC 6298 §5.2–5.3: stop the timer when everything is acknowledged,
    /// else restart it.
    fn restart_timer(&mut self, now: Nanos) {
        self.rto_at = (self.una < self.max).then(|| now + self.rto);
    }

    /// RFC 6298 §2.2–2.3, with a clock granularity of one nanosecond.
    fn sample_rtt(&mut self, r: Nanos) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                self.rttvar = (3 * self.rttvar + s.abs_diff(r)) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        self.rto = (self.srtt.unwrap() + 4 * self.rttvar).clamp(MIN_RTO, MAX_RTO);
    }

    /// A cumulative ACK: every segment below `ack` has arrived.
    pub fn on_ack(&mut self, now: Nanos, ack: u64) {
        if ack > self.una {
            let acked = ack - self.una;
            self.una = ack;
            self.nxt = self.nxt.max(ack);
            if let Some((seq, at)) = self.timing {
                if ack > seq {
                    self.timing = None;
                    self.sample_rtt(now - at);
                }
            }
            if self.in_recovery && ack < self.recover {
                // RFC 6582 §3.2 step 5, partial ACK: the segment at `ack`
                // was lost too. Retransmit it, deflate the window by what
                // was acknowledged and add back one segment.
                self.retransmit(self.una);
                self.cwnd = self.cwnd.saturating_sub(acked) + 1;
                if !self.partial_seen {
                    self.partial_seen = true;
                    self.restart_timer(now);
                }
            } else if self.in_recovery {
                // Step 3, full ACK: leave recovery with
                // min(ssthresh, FlightSize + 1 segment), so that little in
                // flight does not become a burst.
                self.in_recovery = false;
                self.dupacks = 0;
                self.cwnd = self.ssthresh.min(self.flight() + 1);
                self.restart_timer(now);
            } else {
                self.dupacks = 0;
                if self.cwnd < self.ssthresh {
                    // RFC 5681 eq. 2: at most one segment per ACK.
                    self.cwnd += 1;
                } else {
                    self.acked_in_ca += acked;
                    if self.acked_in_ca >= self.cwnd {
                        self.acked_in_ca -= self.cwnd;
                        self.cwnd += 1;
                    }
                }
                self.restart_timer(now);
            }
        } else if ack == self.una && self.una < self.max {
            // A duplicate ACK (RFC 5681 §2): data outstanding, no progress.
            self.dupacks += 1;
            if self.in_recovery {
                // RFC 5681 §3.2 step 4: each one means a segment left the
                // network, so the window may let one more in.
                self.cwnd += 1;
            } else if self.dupacks == DUP_THRESH && ack > self.recover {
                // RFC 5681 §3.2 steps 2–3, RFC 6582 §3.2 steps 1–2.
                self.ssthresh = (self.flight() / 2).max(2);
                self.recover = self.max;
                self.in_recovery = true;
                self.partial_seen = false;
                self.acked_in_ca = 0;
                self.retransmit(self.una);
                self.cwnd = self.ssthresh + u64::from(DUP_THRESH);
                self.stats.fast_retransmits += 1;
            }
        }
        self.send(now);
    }

    /// The retransmission timer fired (RFC 6298 §5.4–5.6, RFC 5681 eq. 4):
    /// halve ssthresh, go back to one segment from SND.UNA, back off.
    pub fn on_timeout(&mut self, now: Nanos) {
        self.ssthresh = (self.flight() / 2).max(2);
        self.cwnd = 1;
        // RFC 6582 §4: duplicate ACKs for data sent before the timeout must
        // not start a fast retransmit.
        self.recover = self.max;
        self.in_recovery = false;
        self.dupacks = 0;
        self.acked_in_ca = 0;
        self.nxt = self.una;
        self.rto = (2 * self.rto).min(MAX_RTO);
        self.stats.timeouts += 1;
        self.rto_at = Some(now + self.rto);
        self.send(now);
    }

    /// Segments acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.una
    }
}

/// The receiving end: cumulative ACKs, out-of-order segments kept.
#[derive(Debug, Default)]
pub struct Receiver {
    /// RCV.NXT: every segment below it has arrived.
    pub next: u64,
    above: BTreeSet<u64>,
}

impl Receiver {
    /// A segment arrives; the ACK it triggers (RFC 5681 §4.2: every segment
    /// is acknowledged at once — out-of-order ones must be, and delaying the
    /// others would only halve the growth in slow start).
    pub fn on_segment(&mut self, seq: u64) -> u64 {
        if seq == self.next {
            self.next += 1;
            while self.above.remove(&self.next) {
                self.next += 1;
            }
        } else if seq > self.next {
            self.above.insert(seq);
        }
        self.next
    }
}

/// One TCP-like flow: when it runs and its two ends.
#[derive(Debug)]
pub struct TcpFlow {
    /// Source port; the flow's 5-tuple is 10.0.0.1:sport → 10.0.0.2:5001.
    pub sport: u16,
    pub start: Nanos,
    started: bool,
    pub sender: Sender,
    pub receiver: Receiver,
    /// Data bytes that left the engine (delivered by the bottleneck).
    link_bytes: u64,
    /// Data segments the engine dropped, at once or after queueing.
    drops: u64,
}

impl TcpFlow {
    /// A flow that starts sending at `start` and sends no new data from
    /// `stop` on.
    pub fn new(sport: u16, start: Nanos, stop: Nanos) -> Self {
        TcpFlow {
            sport,
            start,
            started: false,
            sender: Sender::new(stop),
            receiver: Receiver::default(),
            link_bytes: 0,
            drops: 0,
        }
    }

    pub fn info(&self) -> PacketInfo {
        PacketInfo {
            len: WIRE_LEN,
            key: FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                proto::TCP,
                self.sport,
                5001,
            ),
            dir: Direction::In,
            recv_if: None,
            xmit_if: None,
        }
    }
}

/// A flow's cumulative counters at some instant; the difference of two
/// tells what happened in between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowTotals {
    pub sender: SenderStats,
    /// Bytes the bottleneck delivered (retransmissions included).
    pub link_bytes: u64,
    /// Segments delivered in order to the receiving application.
    pub goodput_segments: u64,
    pub drops: u64,
}

impl FlowTotals {
    pub fn since(&self, earlier: &FlowTotals) -> FlowTotals {
        FlowTotals {
            sender: SenderStats {
                sent: self.sender.sent - earlier.sender.sent,
                retransmits: self.sender.retransmits - earlier.sender.retransmits,
                fast_retransmits: self.sender.fast_retransmits - earlier.sender.fast_retransmits,
                timeouts: self.sender.timeouts - earlier.sender.timeouts,
            },
            link_bytes: self.link_bytes - earlier.link_bytes,
            goodput_segments: self.goodput_segments - earlier.goodput_segments,
            drops: self.drops - earlier.drops,
        }
    }
}

/// Where a data segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Inside,
    Delivered,
    Dropped(DropReason),
}

#[derive(Debug)]
struct Segment {
    flow: usize,
    seq: u64,
    sent_at: Nanos,
    fate: Fate,
}

/// A data segment the bottleneck delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub at: Nanos,
    pub flow: usize,
    /// Time spent waiting in the bottleneck's queue: from arrival to
    /// departure, less the segment's transmission time and the pipe's delay.
    pub queue_delay: Nanos,
}

/// N flows through an engine whose rules send every data segment into the
/// bottleneck (the forward path); departures reach the receiver, whose ACKs
/// come back `reverse_delay` later on a path that is not shaped. The base
/// RTT is the pipe's delay + one transmission time + `reverse_delay`.
pub struct TcpSim {
    pub engine: Engine<u64>,
    /// The bottleneck's rate and delay as configured in the engine (to tell
    /// queueing delay from transmission and propagation).
    bw: u64,
    pipe_delay: Nanos,
    reverse_delay: Nanos,
    pub flows: Vec<TcpFlow>,
    /// Every data segment handed to the engine; its index is the payload.
    segments: Vec<Segment>,
    delivered: u64,
    dropped: u64,
    /// ACKs on the reverse path: (arrival, order sent, flow, ack).
    acks: BinaryHeap<Reverse<(Nanos, u64, usize, u64)>>,
    acks_sent: u64,
    acks_arrived: u64,
    pub departures: Vec<Departure>,
    pub now: Nanos,
}

impl TcpSim {
    pub fn new(
        engine: Engine<u64>,
        bw: u64,
        pipe_delay: Nanos,
        reverse_delay: Nanos,
        flows: Vec<TcpFlow>,
    ) -> Self {
        TcpSim {
            engine,
            bw,
            pipe_delay,
            reverse_delay,
            flows,
            segments: Vec::new(),
            delivered: 0,
            dropped: 0,
            acks: BinaryHeap::new(),
            acks_sent: 0,
            acks_arrived: 0,
            departures: Vec::new(),
            now: 0,
        }
    }

    /// The next instant anything happens: an engine deadline, an ACK
    /// arriving, a timer, a flow starting.
    fn next_event(&self) -> Option<Nanos> {
        let flows = self.flows.iter().filter_map(|f| {
            if f.started {
                f.sender.rto_at
            } else {
                Some(f.start)
            }
        });
        let ack = self.acks.peek().map(|Reverse(a)| a.0);
        flows.chain(ack).chain(self.engine.next_deadline()).min()
    }

    /// Runs every event up to and including `end`, jumping from one to the
    /// next; the conservation law is checked after each.
    pub fn run_until(&mut self, end: Nanos) {
        while let Some(t) = self.next_event().filter(|&t| t <= end) {
            self.now = t;
            while let Some(out) = self.engine.poll(t) {
                self.on_output(out);
            }
            while let Some(&Reverse((at, _, f, ack))) = self.acks.peek() {
                if at > t {
                    break;
                }
                self.acks.pop();
                self.acks_arrived += 1;
                self.flows[f].sender.on_ack(t, ack);
                self.flush(f);
            }
            for f in 0..self.flows.len() {
                let flow = &mut self.flows[f];
                if !flow.started && flow.start <= t {
                    flow.started = true;
                    flow.sender.send(t);
                } else if flow.started && flow.sender.rto_at.is_some_and(|r| r <= t) {
                    flow.sender.on_timeout(t);
                }
                self.flush(f);
            }
            self.check();
        }
        self.now = end;
    }

    /// Hands flow `f`'s queued segments to the engine.
    fn flush(&mut self, f: usize) {
        let info = self.flows[f].info();
        for seq in std::mem::take(&mut self.flows[f].sender.outbox) {
            let id = self.segments.len() as u64;
            self.segments.push(Segment {
                flow: f,
                seq,
                sent_at: self.now,
                fate: Fate::Inside,
            });
            match self.engine.input(self.now, info, id) {
                Verdict::Queued { .. } => {}
                Verdict::Drop {
                    payload, reason, ..
                } => self.on_drop(payload, reason),
                Verdict::Pass { .. } => panic!("a data segment bypassed the bottleneck"),
            }
        }
    }

    fn on_drop(&mut self, id: u64, reason: DropReason) {
        let s = &mut self.segments[id as usize];
        assert_eq!(s.fate, Fate::Inside, "segment {id} decided twice");
        s.fate = Fate::Dropped(reason);
        self.flows[s.flow].drops += 1;
        self.dropped += 1;
    }

    fn on_output(&mut self, out: Output<u64>) {
        if let Some(reason) = out.drop {
            return self.on_drop(out.payload, reason);
        }
        let s = &mut self.segments[out.payload as usize];
        assert_eq!(
            s.fate,
            Fate::Inside,
            "segment {} came out twice",
            out.payload
        );
        s.fate = Fate::Delivered;
        self.delivered += 1;
        let tx = u64::from(WIRE_LEN) * 8 * SEC / self.bw;
        let queue_delay = (out.at - s.sent_at).saturating_sub(tx + self.pipe_delay);
        self.departures.push(Departure {
            at: out.at,
            flow: s.flow,
            queue_delay,
        });
        let flow = &mut self.flows[s.flow];
        flow.link_bytes += u64::from(out.info.len);
        let ack = flow.receiver.on_segment(s.seq);
        self.acks.push(Reverse((
            out.at + self.reverse_delay,
            self.acks_sent,
            s.flow,
            ack,
        )));
        self.acks_sent += 1;
    }

    /// Every data segment is delivered, dropped or inside the engine, and
    /// the engine agrees; every ACK sent has arrived or is on its way.
    pub fn check(&self) {
        let t = self.engine.totals();
        assert!(t.conserved(), "engine conservation broken: {t:?}");
        assert_eq!(t.inside, self.engine.held_packets());
        let sent = self.segments.len() as u64;
        assert_eq!(t.arrived, sent);
        assert_eq!((t.delivered, t.dropped()), (self.delivered, self.dropped));
        assert_eq!(sent, self.delivered + self.dropped + t.inside);
        let by_flow: u64 = self.flows.iter().map(|f| f.sender.stats.sent).sum();
        assert_eq!(by_flow, sent, "segments the senders sent");
        assert_eq!(self.acks_sent, self.acks_arrived + self.acks.len() as u64);
    }

    /// Every flow's counters now.
    pub fn totals(&self) -> Vec<FlowTotals> {
        self.flows
            .iter()
            .map(|f| FlowTotals {
                sender: f.sender.stats,
                link_bytes: f.link_bytes,
                goodput_segments: f.receiver.next,
                drops: f.drops,
            })
            .collect()
    }

    /// Queueing delays of the segments that departed in `[from, to)`, of
    /// flow `flow` or of all.
    pub fn queue_delays(&self, flow: Option<usize>, from: Nanos, to: Nanos) -> Vec<Nanos> {
        self.departures
            .iter()
            .filter(|d| d.at >= from && d.at < to && flow.is_none_or(|f| d.flow == f))
            .map(|d| d.queue_delay)
            .collect()
    }
}

/// The `p`-th percentile (0..=100) of `v`, nearest rank.
pub fn percentile(v: &[Nanos], p: u64) -> Nanos {
    let mut v = v.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return 0;
    }
    let rank = (p * v.len() as u64).div_ceil(100).max(1);
    v[rank as usize - 1]
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one takes
/// everything.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * squares)
}
