//! A packet's way through the engine: routed, then its verdict acted on
//! (the engine's [`two_pass`] driver, with this data plane's side of it).

use std::convert::Infallible;

use dummynet_engine::two_pass::{self, LetGo, Passes};
use dummynet_engine::{DropReason, Engine, IfaceId, Nanos, PacketInfo, Verdict};

use super::{complete, Backends, TargetBook, Watch};
use crate::sharded::Worker;
use crate::Carrier;

/// A packet read (or leaving a pipe for its `out` pass) at `now` goes
/// through the engine: here, or, on a sharded data plane, handed to the
/// worker that owns its pipe (`None`: that worker has it now, and the
/// merge of the workers' records knows it from `now` on).
#[inline]
pub(super) fn route(
    engine: &mut Engine<Carrier>,
    worker: Option<&mut Worker>,
    watch: &Watch,
    now: Nanos,
    info: PacketInfo,
    payload: Carrier,
) -> Option<Verdict<Carrier>> {
    let Some(w) = worker else {
        return Some(engine.input(now, info, payload));
    };
    match w.route(engine, now, info, payload) {
        Ok(v) => Some(v),
        Err(to) => {
            watch.handed(to, now);
            None
        }
    }
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
    /// The packet's number (a `Queued` verdict no longer has the packet).
    pub(super) id: (u64, bool),
}

impl Settle<'_> {
    /// Acts on the verdict of a pass through the rules. True if the packet
    /// went into a backend's send batch.
    #[inline]
    pub(super) fn verdict(&mut self, now: Nanos, info: PacketInfo, v: Verdict<Carrier>) -> bool {
        let Ok(settled) = two_pass::settle(self, now, info, v);
        settled == two_pass::Settled::Left
    }

    /// Acts on a packet a pipe let go. True as for [`Self::verdict`].
    #[inline]
    pub(super) fn released(&mut self, now: Nanos, info: PacketInfo, p: Carrier, by: LetGo) -> bool {
        let Ok(settled) = two_pass::released(self, now, info, p, by);
        settled == two_pass::Settled::Left
    }
}

impl Passes<Carrier> for Settle<'_> {
    type Error = Infallible;

    #[inline]
    fn pass(
        &mut self,
        now: Nanos,
        info: PacketInfo,
        payload: Carrier,
    ) -> Result<Option<Verdict<Carrier>>, Infallible> {
        let worker = self.worker.as_deref_mut();
        Ok(route(self.engine, worker, self.watch, now, info, payload))
    }

    #[inline]
    fn seen(
        &mut self,
        now: Nanos,
        info: &PacketInfo,
        verdict: &Verdict<Carrier>,
        by: LetGo,
    ) -> Result<(), Infallible> {
        self.watch
            .verdict(self.engine, now, info, verdict, by.target, self.id, by.ce);
        Ok(())
    }

    #[inline]
    fn forward(
        &mut self,
        _: Nanos,
        _: &PacketInfo,
        _: &Carrier,
        _: IfaceId,
        _: LetGo,
    ) -> Result<(), Infallible> {
        self.targets.forwarded();
        Ok(())
    }

    #[inline]
    fn leave(
        &mut self,
        _: Nanos,
        _: PacketInfo,
        payload: Carrier,
        _: LetGo,
    ) -> Result<(), Infallible> {
        complete(self.backends, payload, true);
        Ok(())
    }

    #[inline]
    fn drop(
        &mut self,
        _: Nanos,
        _: PacketInfo,
        payload: Carrier,
        reason: DropReason,
        by: LetGo,
    ) -> Result<(), Infallible> {
        self.targets.dropped(by.target, reason);
        complete(self.backends, payload, false);
        Ok(())
    }
}
