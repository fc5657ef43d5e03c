//! A packet's way through the engine: routed, then its verdict acted on.

use dummynet_engine::{Direction, Engine, Nanos, PacketInfo, Target, Verdict};

use super::{complete, Backends, TargetBook, Watch};
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

/// What acting on a verdict needs: the engine (a bridged frame's `out`
/// pass), the backends (sending or discarding), the per-pipe books
/// (`/metrics`), the watchers.
pub(super) struct Settle<'a> {
    pub(super) engine: &'a mut Engine<Carrier>,
    pub(super) backends: &'a mut Backends,
    pub(super) targets: &'a mut TargetBook,
    pub(super) watch: &'a mut Watch,
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
        marked: bool,
    ) -> bool {
        let mut marked = marked;
        let mut verdict = verdict;
        let mut info = info;
        let mut target = target;
        loop {
            let ce = std::mem::take(&mut marked);
            self.watch
                .verdict(self.engine, now, &info, &verdict, target, id, ce);
            match verdict {
                Verdict::Queued { .. } => return false,
                Verdict::Drop {
                    payload,
                    reason,
                    target,
                    ..
                } => {
                    self.targets.dropped(target, reason);
                    complete(self.backends, payload, false);
                    return false;
                }
                Verdict::Pass { mut payload, .. } => match payload.out_pass.take() {
                    Some(xmit) => {
                        self.targets.forwarded();
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
                        complete(self.backends, payload, true);
                        return true;
                    }
                },
            }
        }
    }
}
