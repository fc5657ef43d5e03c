//! A test harness on virtual time, in the manner of quinn-proto's `Pair`:
//! it jumps straight to each deadline, records every outcome, and checks the
//! conservation law after every step.
#![allow(dead_code)]

pub mod tcp;

use std::net::Ipv4Addr;

use dummynet_engine::config::*;
use dummynet_engine::flow::proto;
use dummynet_engine::{
    Command, Direction, DropReason, Engine, FlowKey, Nanos, Output, PacketInfo, Verdict,
};

pub const MS: Nanos = 1_000_000;
pub const US: Nanos = 1_000;
pub const SEC: Nanos = 1_000_000_000;

/// One packet's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Delivered { at: Nanos, rule: u16 },
    Dropped { at: Nanos, reason: DropReason },
}

pub struct Harness {
    pub e: Engine<u64>,
    /// Indexed by packet id.
    pub sent: Vec<(Nanos, PacketInfo)>,
    pub fates: Vec<Option<Fate>>,
    pub outputs: Vec<Output<u64>>,
    /// Fates of copies made by `duplicate` (a copy carries its original's
    /// id, so whichever of the two comes out second lands here).
    pub copies: Vec<Fate>,
    /// Bytes of packets the engine queued, and of packets `poll` returned:
    /// without copies, their difference is what it holds.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Harness {
    pub fn new(seed: u64) -> Self {
        Harness {
            e: Engine::new(seed),
            sent: Vec::new(),
            fates: Vec::new(),
            outputs: Vec::new(),
            copies: Vec::new(),
            bytes_in: 0,
            bytes_out: 0,
        }
    }

    pub fn apply(&mut self, cmd: Command) {
        let now = self.sent.last().map_or(0, |s| s.0);
        if let Err(e) = self.e.apply(now, cmd.clone()) {
            panic!("command {cmd:?} refused: {e}");
        }
    }

    pub fn apply_at(&mut self, now: Nanos, cmd: Command) {
        self.run_until(now);
        if let Err(e) = self.e.apply(now, cmd.clone()) {
            panic!("command {cmd:?} refused: {e}");
        }
        self.collect(now);
    }

    /// Sends a packet at `t` (after delivering everything due before it).
    pub fn send(&mut self, t: Nanos, info: PacketInfo) -> u64 {
        self.run_until(t);
        let id = self.sent.len() as u64;
        self.sent.push((t, info));
        self.fates.push(None);
        match self.e.input(t, info, id) {
            Verdict::Pass { payload, rule } => {
                self.fates[payload as usize] = Some(Fate::Delivered { at: t, rule });
            }
            Verdict::Drop {
                payload, reason, ..
            } => {
                self.fates[payload as usize] = Some(Fate::Dropped { at: t, reason });
            }
            Verdict::Queued { .. } => self.bytes_in += u64::from(info.len),
        }
        self.collect(t);
        self.check();
        id
    }

    fn collect(&mut self, now: Nanos) {
        while let Some(o) = self.e.poll(now) {
            assert!(o.at <= now, "output at {} reported by poll({now})", o.at);
            let fate = match o.drop {
                None => Fate::Delivered {
                    at: o.at,
                    rule: o.rule.unwrap_or(0),
                },
                Some(reason) => Fate::Dropped { at: o.at, reason },
            };
            self.bytes_out += u64::from(o.info.len);
            let slot = &mut self.fates[o.payload as usize];
            if slot.is_some() {
                assert!(
                    (self.copies.len() as u64) < self.e.totals().duplicated,
                    "packet {} came out twice",
                    o.payload
                );
                self.copies.push(fate);
            } else {
                *slot = Some(fate);
            }
            self.outputs.push(o);
        }
    }

    /// Runs every deadline up to and including `t`.
    pub fn run_until(&mut self, t: Nanos) {
        while let Some(d) = self.e.next_deadline() {
            if d > t {
                break;
            }
            self.collect(d);
        }
        self.check();
    }

    /// Runs every deadline up to `t` and collects what is due at `t` itself.
    pub fn advance(&mut self, t: Nanos) {
        self.run_until(t);
        self.collect(t);
    }

    pub fn finish(&mut self) {
        self.run_until(Nanos::MAX);
        assert_eq!(self.e.next_deadline(), None);
        assert_eq!(self.e.totals().inside, 0, "packets left inside");
    }

    /// Conservation: arrived = delivered + dropped + inside, and `inside`
    /// equals the packets actually found in queues, links and delay lines.
    pub fn check(&self) {
        let t = self.e.totals();
        assert!(t.conserved(), "conservation broken: {t:?}");
        assert_eq!(
            t.inside,
            self.e.held_packets(),
            "inside counter disagrees with the queues"
        );
        assert_eq!(t.arrived, self.sent.len() as u64 + t.duplicated);
        let decided = self.fates.iter().filter(|f| f.is_some()).count() + self.copies.len();
        assert_eq!(decided as u64, t.delivered + t.dropped());
        if t.duplicated == 0 {
            assert_eq!(
                t.held_bytes,
                self.bytes_in - self.bytes_out,
                "held bytes disagree with what went in and came out"
            );
        }
        if t.inside == 0 {
            assert_eq!(t.held_bytes, 0, "bytes held with no packet inside");
        }
    }

    pub fn departure(&self, id: u64) -> Nanos {
        match self.fates[id as usize] {
            Some(Fate::Delivered { at, .. }) => at,
            other => panic!("packet {id} not delivered: {other:?}"),
        }
    }

    pub fn delivered(&self) -> usize {
        self.fates
            .iter()
            .filter(|f| matches!(f, Some(Fate::Delivered { .. })))
            .count()
    }

    pub fn dropped(&self, reason: DropReason) -> usize {
        self.fates
            .iter()
            .filter(|f| matches!(f, Some(Fate::Dropped { reason: r, .. }) if *r == reason))
            .count()
    }
}

pub fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, len: u32) -> PacketInfo {
    PacketInfo {
        len,
        key: FlowKey::v4(
            Ipv4Addr::from(src),
            Ipv4Addr::from(dst),
            proto::UDP,
            sport,
            dport,
        ),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    }
}

pub fn with_proto(mut p: PacketInfo, proto: u8) -> PacketInfo {
    p.key.proto = proto;
    p
}

pub fn rule(number: u16, action: Action, body: Vec<Cond>) -> Command {
    Command::AddRule(RuleSpec {
        number: Some(number),
        action,
        prob: None,
        extra: Default::default(),
        body,
    })
}

pub fn pipe(n: u32, bw: u64, delay: Nanos) -> Command {
    Command::ConfigPipe(
        n,
        PipeConfig {
            link: LinkConfig {
                bw,
                delay,
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

pub fn pipe_cfg(n: u32, link: LinkConfig, flowset: FlowsetConfig) -> Command {
    Command::ConfigPipe(
        n,
        PipeConfig {
            link,
            flowset,
            sched: None,
        },
    )
}
