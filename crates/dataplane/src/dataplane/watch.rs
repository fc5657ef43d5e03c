//! The one place the loop records what happens to packets: the observer's
//! tap ([`crate::observer`]) and `log` rules' matches, as a sink beside the turn.

use dummynet_engine::{Direction, Engine, Nanos, Output, PacketInfo, Target, Verdict};

use crate::clock::Clock;
use crate::observer::{self, Kind, ObserverStats, Record, Tap};
use crate::rulelog::RuleLog;
use crate::Carrier;

/// Who watches the packets: the per-packet observer's end and where `log`
/// rules' matches go (both written off this thread).
#[derive(Default)]
pub(super) struct Watch {
    pub(super) tap: Option<Tap>,
    rule_log: Option<RuleLog>,
}

impl Watch {
    /// The tap, while it records packets.
    #[inline(always)]
    fn on(&mut self) -> Option<&mut Tap> {
        self.tap.as_mut().filter(|t| t.on)
    }

    /// Once, before the first turn: the tap's clock.
    pub(super) fn start(&mut self, clock: &Clock) {
        if let Some(tap) = &mut self.tap {
            let r = clock.realtime();
            tap.start_clock(r.wall.saturating_sub(r.clock), *clock);
        }
    }

    /// At the top of every turn.
    pub(super) fn refresh(&mut self) {
        if let Some(tap) = &mut self.tap {
            tap.refresh();
        }
    }

    /// After the engine's configuration changed.
    pub(super) fn reconfigured(&mut self, engine: &Engine<Carrier>, now: Nanos) {
        if let Some(tap) = &mut self.tap {
            tap.reconfigured(engine, now);
        }
    }

    /// Takes the matches of `log` rules, once the engine has some.
    pub(super) fn rule_log(&mut self, engine: &mut Engine<Carrier>) {
        if engine.has_log() {
            self.rule_log
                .get_or_insert_with(RuleLog::start)
                .take(engine);
        }
    }

    /// A worker of several: how far its records have come, for the merge of
    /// the workers' records.
    pub(super) fn floor(&self, now: Nanos, late: bool) {
        if let Some(tap) = &self.tap {
            tap.floor(now, late);
        }
    }

    /// A worker of several, every port watched, is about to sleep: the
    /// merge of the workers' records need not wait for it meanwhile.
    pub(super) fn sleeping(&self, engine: &Engine<Carrier>) {
        if let Some(tap) = &self.tap {
            tap.sleeping(engine.next_deadline().unwrap_or(Nanos::MAX));
        }
    }

    /// A packet of `now` was handed to worker `to` (it records its
    /// enqueue there, with this time).
    #[inline]
    pub(super) fn handed(&self, to: usize, now: Nanos) {
        if let Some(tap) = &self.tap {
            tap.handed(to, now);
        }
    }

    /// This worker takes what the others handed it.
    #[inline]
    pub(super) fn taking_handoffs(&self) {
        if let Some(tap) = &self.tap {
            tap.taking_handoffs();
        }
    }

    /// ...and woke.
    pub(super) fn woke(&self) {
        if let Some(tap) = &self.tap {
            tap.woke();
        }
    }

    pub(super) fn stats(&self) -> Option<ObserverStats> {
        self.tap.as_ref().map(Tap::stats)
    }

    /// A packet read, about to go through the engine at `at`.
    #[inline(always)]
    pub(super) fn arrival(
        &mut self,
        engine: &Engine<Carrier>,
        at: Nanos,
        info: &PacketInfo,
        c: &Carrier,
    ) {
        if let Some(tap) = self.on() {
            arrival(tap, engine, at, info, c);
        }
    }

    /// A packet the engine dropped after having queued it.
    #[inline(always)]
    pub(super) fn dropped_inside(&mut self, engine: &Engine<Carrier>, out: &Output<Carrier>) {
        if let Some(tap) = self.on() {
            dropped_inside(tap, engine, out);
        }
    }

    /// What a verdict says of the packet, before it is acted on: queued,
    /// dropped at the entry, forwarded to its `out` pass, or departing.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn verdict(
        &mut self,
        engine: &Engine<Carrier>,
        now: Nanos,
        info: &PacketInfo,
        verdict: &Verdict<Carrier>,
        target: Option<Target>,
        id: (u64, bool),
        marked: bool,
    ) {
        if let Some(tap) = self.on() {
            record_verdict(tap, engine, now, info, verdict, target, id, marked);
        }
    }
}

/// An arrival's record, with its bytes if the capture of what enters is on.
fn arrival(tap: &mut Tap, engine: &Engine<Carrier>, at: Nanos, info: &PacketInfo, c: &Carrier) {
    let r = Record {
        len: info.len,
        dir: info.dir,
        iface: match info.dir {
            Direction::In => info.recv_if,
            Direction::Out => info.xmit_if,
        },
        bridge_to: c.out_pass,
        ..Record::new(Kind::Arrival, at, (c.id, c.copy))
    };
    let bytes = tap.wants_in().then(|| observer::carrier_bytes(c));
    tap.push(engine, r, bytes);
}

fn dropped_inside(tap: &mut Tap, engine: &Engine<Carrier>, out: &Output<Carrier>) {
    let r = Record {
        len: out.info.len,
        dir: out.info.dir,
        rule: out.rule,
        target: out.target,
        reason: out.drop,
        ..Record::new(Kind::Drop, out.at, (out.payload.id, out.payload.copy))
    };
    tap.push(engine, r, None);
}

/// `target` is the pipe or queue the packet just left, if any; `marked`, that
/// an AQM there marked it CE (said by the forward or departure record).
#[allow(clippy::too_many_arguments)]
fn record_verdict(
    tap: &mut Tap,
    engine: &Engine<Carrier>,
    now: Nanos,
    info: &PacketInfo,
    verdict: &Verdict<Carrier>,
    target: Option<Target>,
    id: (u64, bool),
    marked: bool,
) {
    let (r, bytes) = match verdict {
        Verdict::Queued { rule, target } => (
            Record {
                len: info.len,
                dir: info.dir,
                rule: Some(*rule),
                target: Some(*target),
                ..Record::new(Kind::Enqueue, now, id)
            },
            None,
        ),
        Verdict::Drop {
            reason,
            rule,
            target,
            ..
        } => (
            Record {
                len: info.len,
                dir: info.dir,
                rule: *rule,
                target: *target,
                reason: Some(*reason),
                at_entry: true,
                ..Record::new(Kind::Drop, now, id)
            },
            None,
        ),
        Verdict::Pass { payload, rule } => match payload.out_pass {
            Some(xmit) => (
                Record {
                    len: info.len,
                    dir: info.dir,
                    iface: Some(xmit),
                    rule: Some(*rule),
                    target,
                    marked,
                    ..Record::new(Kind::Forward, now, id)
                },
                None,
            ),
            None => (
                Record {
                    len: info.len,
                    dir: info.dir,
                    iface: info.xmit_if,
                    rule: Some(*rule),
                    target,
                    marked,
                    ..Record::new(Kind::Departure, now, id)
                },
                tap.wants_out().then(|| observer::carrier_bytes(payload)),
            ),
        },
    };
    tap.push(engine, r, bytes);
}
