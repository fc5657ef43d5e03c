//! A packet's way through the engine: routed, then its verdict acted on.

use dummynet_engine::{Direction, Engine, Nanos, PacketInfo, Target, Verdict};

use super::{complete, Backends, TargetBook};
use crate::observer::{self, Kind, Record, Tap};
use crate::sharded::Worker;
use crate::Carrier;

/// A packet read (or leaving a pipe for its `out` pass) at `now` goes
/// through the engine: here, or, on a sharded data plane, handed to the
/// worker that owns its pipe (`None`: that worker has it now).
#[inline]
pub(super) fn route(
    engine: &mut Engine<Carrier>,
    worker: Option<&mut Worker>,
    now: Nanos,
    info: PacketInfo,
    payload: Carrier,
) -> Option<Verdict<Carrier>> {
    let Some(w) = worker else {
        return Some(engine.input(now, info, payload));
    };
    w.route(engine, now, info, payload)
}

/// An arrival's record, with its bytes if the capture of what enters is on.
pub(super) fn arrived(
    tap: &mut Tap,
    engine: &Engine<Carrier>,
    at: Nanos,
    info: &PacketInfo,
    c: &Carrier,
) {
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

/// What acting on a verdict needs: the engine (a bridged frame's `out`
/// pass), the backends (sending or discarding), the per-pipe books
/// (`/metrics`), the observer's tap.
pub(super) struct Settle<'a> {
    pub(super) engine: &'a mut Engine<Carrier>,
    pub(super) backends: &'a mut Backends,
    pub(super) targets: &'a mut TargetBook,
    pub(super) tap: &'a mut Option<Tap>,
    /// Sharded: the `out` pass may send the frame to a pipe another
    /// worker owns.
    pub(super) worker: Option<&'a mut Worker>,
}

impl Settle<'_> {
    /// Acts on an immediate verdict: a bridged frame that passed its `in`
    /// pass runs its `out` pass at once; anything else is sent on or
    /// discarded. `target` is the pipe or queue the packet just left, if
    /// any, and `id` the packet's number (a `Queued` verdict no longer has
    /// the packet). True if the packet went into a backend's send batch.
    pub(super) fn settle(
        &mut self,
        now: Nanos,
        info: PacketInfo,
        verdict: Verdict<Carrier>,
        target: Option<Target>,
        id: (u64, bool),
    ) -> bool {
        let mut verdict = verdict;
        let mut info = info;
        let mut target = target;
        loop {
            let tap = self.tap.as_mut().filter(|t| t.on);
            match verdict {
                Verdict::Queued { rule, target } => {
                    if let Some(tap) = tap {
                        let r = Record {
                            len: info.len,
                            dir: info.dir,
                            rule: Some(rule),
                            target: Some(target),
                            ..Record::new(Kind::Enqueue, now, id)
                        };
                        tap.push(self.engine, r, None);
                    }
                    return false;
                }
                Verdict::Drop {
                    payload,
                    reason,
                    rule,
                    target,
                } => {
                    if let Some(tap) = tap {
                        let r = Record {
                            len: info.len,
                            dir: info.dir,
                            rule,
                            target,
                            reason: Some(reason),
                            at_entry: true,
                            ..Record::new(Kind::Drop, now, id)
                        };
                        tap.push(self.engine, r, None);
                    }
                    self.targets.dropped(target, reason);
                    complete(self.backends, payload, false);
                    return false;
                }
                Verdict::Pass { mut payload, rule } => match payload.out_pass.take() {
                    Some(xmit) => {
                        self.targets.forwarded();
                        if let Some(tap) = tap {
                            let r = Record {
                                len: info.len,
                                dir: info.dir,
                                iface: Some(xmit),
                                rule: Some(rule),
                                target,
                                ..Record::new(Kind::Forward, now, id)
                            };
                            tap.push(self.engine, r, None);
                        }
                        target = None;
                        info = PacketInfo {
                            dir: Direction::Out,
                            xmit_if: Some(xmit),
                            ..info
                        };
                        let Some(v) =
                            route(self.engine, self.worker.as_deref_mut(), now, info, payload)
                        else {
                            return false;
                        };
                        verdict = v;
                    }
                    None => {
                        if let Some(tap) = tap {
                            let r = Record {
                                len: info.len,
                                dir: info.dir,
                                iface: info.xmit_if,
                                rule: Some(rule),
                                target,
                                ..Record::new(Kind::Departure, now, id)
                            };
                            let bytes = tap.wants_out().then(|| observer::carrier_bytes(&payload));
                            tap.push(self.engine, r, bytes);
                        }
                        complete(self.backends, payload, true);
                        return true;
                    }
                },
            }
        }
    }
}
