//! A data plane sharded over worker threads, sans-I/O: who owns what, and
//! the rings that carry a packet from the worker that read it to the one
//! that owns its pipe.
//!
//! Every worker holds an engine replica with the same configuration. A
//! packet is classified where it is read ([`Engine::classify`]: the rules,
//! their counters); if the rules send it to a pipe or queue, the scheduler
//! instance it joins ([`Engine::instance`]: the scheduler and the flow
//! under its mask) decides its owner ([`owner`]), and only the owner's
//! replica ever queues into that instance, so a pipe's order and timing
//! are those of one engine. A packet for another worker's instance crosses
//! a bounded single-producer single-consumer ring ([`Links`]); a full ring
//! is a drop counted as `handoff-full`, never a wait.
//!
//! Counters read as one system when summed over the replicas
//! ([`dummynet_engine::Totals::add`], [`dummynet_engine::Snapshot::merge`]):
//! a rule counts on the worker that classified, an instance on its owner.
//! A configuration change is applied to every replica between the same two
//! packets: every worker stops classifying, the rings are drained into
//! their owners, then each replica applies the batch (validated once:
//! replicas with one configuration accept or refuse it alike) before any
//! worker reads again ([`Cluster::apply_all`] on the virtual clock; the live
//! daemon does the same with its threads).
//!
//! Dynamic state (`keep-state`, `record-state`, `check-state`) lives in the
//! replica that made it, which is right as long as every pass of a flow,
//! both ways, is classified by one worker: the flow's reader. The live
//! bridge gets that from the kernel (its `PACKET_FANOUT_HASH` groups hash
//! a frame by a symmetric flow hash, so a flow and its replies are read by
//! one worker: [`reader`] is this module's model of it), and a frame that
//! left a pipe on another worker is handed back to its reader for its
//! `out` pass ([`Links::out_pass`]) when the rules keep state. `limit` and
//! `set-limit` count states across flows (per source address, say),
//! whose states different replicas hold: the replicas count them in one
//! table ([`SharedLimits`], given to each by [`Cluster::new`] and the live
//! daemon), touched only when a limited state is made or removed. What is
//! not sharded: `one_pass 0` (a packet leaving a pipe would walk the rules
//! again in its owner's replica and could enter a pipe another worker
//! owns). [`check_shardable`] says so before such a change is applied.

pub mod bench;
mod limits;

pub use limits::SharedLimits;

use std::hash::{Hash, Hasher};

use dummynet_engine::{
    BatchError, Classified, Command, DropReason, Engine, FlowKey, Nanos, Output, PacketInfo,
    Payload, Shaped, Target, Totals, Verdict,
};

/// Slots of each ring between two workers: at 64-byte line rate on a
/// 10 Gbit/s port (14.9 Mpps) about 70 µs of frames, more than a worker
/// that is awake leaves unread between two turns.
pub const RING_SLOTS: usize = 1024;

/// The worker that owns the scheduler instance `instance`
/// ([`Engine::instance`]) among `workers`, the same on every worker: an
/// unmasked pipe or scheduler N is on worker N mod `workers` (a pipe's
/// own scheduler is numbered 65536 + N, so pipes 1 and 2 are on two
/// workers), a masked one's instances are spread by their hash.
pub fn owner(instance: u64, workers: usize) -> usize {
    (instance % workers.max(1) as u64) as usize
}

/// Why a configuration cannot run sharded, if it cannot: `None` when it
/// can. Checked on the replica after a change (and refused then, before
/// any replica applies it: see [`Cluster::apply_all`]).
pub fn check_shardable<P: Payload>(engine: &Engine<P>, workers: usize) -> Option<String> {
    if workers <= 1 {
        return None;
    }
    if !engine.one_pass() {
        return Some(format!(
            "one_pass 0 needs one worker: a packet leaving a pipe walks the rules again \
             where its pipe is, and the {workers} workers' pipes are apart; run with \
             --workers 1"
        ));
    }
    None
}

/// The worker that reads the flow `key` among `workers`, both ways: a
/// model of the kernel's `PACKET_FANOUT_HASH` (which hashes a frame by
/// `__skb_get_hash_symmetric`: the flow's ends sorted before hashing, so
/// a flow and its replies go to the same member of the group). The hash
/// itself is not the kernel's (that one is keyed by a secret of the
/// boot); what matters, and what this keeps, is that both directions
/// agree.
pub fn reader(key: &FlowKey, workers: usize) -> usize {
    let (a, b) = ((key.src, key.sport), (key.dst, key.dport));
    let mut h = std::hash::DefaultHasher::new();
    (key.v6, key.proto, a.min(b), a.max(b)).hash(&mut h);
    (h.finish() % workers.max(1) as u64) as usize
}

/// A packet on its way to the worker that owns its instance, with the
/// time it was classified at (it enters the pipe then, or as soon after
/// as the owner's engine has got to).
pub struct Handoff<P> {
    pub at: Nanos,
    pub shaped: Shaped<P>,
}

/// What crosses a ring: a packet for its owner's pipe, or one that left
/// a pipe going back to the worker that read it, for its `out` pass
/// ([`Links::out_pass`]).
enum Sent<P> {
    Queue(Handoff<P>),
    Pass {
        at: Nanos,
        info: PacketInfo,
        payload: P,
    },
}

/// What [`Links::input`] did with a packet.
pub enum Routed<P> {
    /// Decided here: passed or dropped by the rules, or queued into (or
    /// refused by) a pipe this worker owns, or dropped for a full ring.
    Here(Verdict<P>),
    /// Handed to the worker that owns its instance.
    Handed { target: Target, to: usize },
    /// Handed back to the worker that read it, for its `out` pass there.
    Home { to: usize },
}

/// Counters of one worker's rings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkCounters {
    /// Packets this worker classified and handed to another.
    pub handed_out: u64,
    /// Packets other workers handed to this one.
    pub handed_in: u64,
    /// Packets dropped because the ring to their owner was full.
    pub handoff_full: u64,
}

/// One worker's ends of the rings: a producer to every other worker and a
/// consumer from each.
pub struct Links<P> {
    pub index: usize,
    pub workers: usize,
    to: Vec<Option<rtrb::Producer<Sent<P>>>>,
    from: Vec<rtrb::Consumer<Sent<P>>>,
    pub counters: LinkCounters,
    /// Workers handed a packet since [`Self::take_handed_to`] (bit per
    /// worker; beyond 64 workers, all): whom to wake.
    handed_to: u64,
    /// Whether the rules keep state (a frame that left a pipe then goes
    /// back to its reader for its `out` pass), for the configuration of
    /// this epoch ([`Engine::config_epoch`]).
    keeps_state: Option<(u64, bool)>,
}

/// The rings between `workers` workers, `slots` each way between any two:
/// one [`Links`] per worker, in order.
pub fn mesh<P>(workers: usize, slots: usize) -> Vec<Links<P>> {
    let mut links: Vec<Links<P>> = (0..workers)
        .map(|index| Links {
            index,
            workers,
            to: (0..workers).map(|_| None).collect(),
            from: Vec::new(),
            counters: LinkCounters::default(),
            handed_to: 0,
            keeps_state: None,
        })
        .collect();
    for a in 0..workers {
        for b in 0..workers {
            if a != b {
                let (tx, rx) = rtrb::RingBuffer::new(slots.max(1));
                links[a].to[b] = Some(tx);
                links[b].from.push(rx);
            }
        }
    }
    links
}

impl<P: Payload> Links<P> {
    /// A packet read by this worker at `now`: classified by its replica,
    /// then queued here if this worker owns the instance it is bound for,
    /// or handed to the owner.
    #[inline]
    pub fn input(
        &mut self,
        engine: &mut Engine<P>,
        now: Nanos,
        info: PacketInfo,
        payload: P,
    ) -> Routed<P> {
        if self.workers <= 1 {
            return Routed::Here(engine.input(now, info, payload));
        }
        let shaped = match engine.classify(now, info, payload) {
            Classified::Done(v) => return Routed::Here(v),
            Classified::Shaped(s) => s,
        };
        let to = owner(engine.instance(&shaped), self.workers);
        if to == self.index {
            return Routed::Here(engine.enqueue(now, shaped));
        }
        let target = shaped.target();
        // No ring, or its owner has stopped (the daemon is ending): the
        // pipe's twin in this replica lets it out rather than losing it.
        let Some(ring) = self
            .to
            .get_mut(to)
            .and_then(Option::as_mut)
            .filter(|r| !r.is_abandoned())
        else {
            return Routed::Here(engine.enqueue(now, shaped));
        };
        // One producer per ring: room seen here is room for the push.
        if ring.is_full() {
            self.counters.handoff_full += 1;
            return Routed::Here(engine.refuse_shaped(shaped, DropReason::HandoffFull));
        }
        let _ = ring.push(Sent::Queue(Handoff { at: now, shaped }));
        self.counters.handed_out += 1;
        self.handed_to |= bit(to);
        Routed::Handed { target, to }
    }

    /// The `out` pass of a bridged frame that left a pipe on this worker
    /// at `now`, read by worker `reader`: run here, unless the rules keep
    /// state and another worker read it. Then it goes back to its reader,
    /// whose replica holds its flow's states (both ways: the kernel's
    /// fanout reads a flow and its replies on one worker), so that what
    /// the `out` pass matches or makes is found by the flow's later
    /// packets, as in one engine. A full ring is a drop counted as
    /// `handoff-full` (the pipe counted it delivered; the books move it).
    pub fn out_pass(
        &mut self,
        engine: &mut Engine<P>,
        now: Nanos,
        info: PacketInfo,
        payload: P,
        reader: usize,
    ) -> Routed<P> {
        if reader == self.index || self.workers <= 1 || !self.keeps_state(engine) {
            return self.input(engine, now, info, payload);
        }
        let Some(ring) = self
            .to
            .get_mut(reader)
            .and_then(Option::as_mut)
            .filter(|r| !r.is_abandoned())
        else {
            // Its reader has stopped (the daemon is ending): here, then.
            return self.input(engine, now, info, payload);
        };
        if ring.is_full() {
            self.counters.handoff_full += 1;
            engine.unsent(DropReason::HandoffFull, 1);
            return Routed::Here(Verdict::Drop {
                payload,
                reason: DropReason::HandoffFull,
                rule: None,
                target: None,
            });
        }
        let _ = ring.push(Sent::Pass {
            at: now,
            info,
            payload,
        });
        self.counters.handed_out += 1;
        self.handed_to |= bit(reader);
        Routed::Home { to: reader }
    }

    /// Whether the rules keep state, worked out again only when the
    /// configuration may have changed.
    fn keeps_state(&mut self, engine: &Engine<P>) -> bool {
        let epoch = engine.config_epoch();
        match self.keeps_state {
            Some((e, k)) if e == epoch => k,
            _ => {
                let k = engine.has_stateful_rules();
                self.keeps_state = Some((epoch, k));
                k
            }
        }
    }

    /// The workers handed a packet since the last call (bit per worker;
    /// beyond 64 workers, all bits): whom to wake.
    pub fn take_handed_to(&mut self) -> u64 {
        std::mem::take(&mut self.handed_to)
    }

    /// The worker that owns the instance `shaped` is bound for.
    pub fn owner_of(&self, engine: &Engine<P>, shaped: &Shaped<P>) -> usize {
        owner(engine.instance(shaped), self.workers)
    }

    /// Puts a packet in the ring to worker `to`, or gives it back if the
    /// ring is full (or `to` is this worker). [`Self::input`] drops it
    /// then; a caller that would rather wait (`dummynet bench`) takes its
    /// own rings and tries again.
    pub fn hand(&mut self, to: usize, h: Handoff<P>) -> Result<(), Handoff<P>> {
        let Some(ring) = self.to.get_mut(to).and_then(Option::as_mut) else {
            return Err(h);
        };
        if ring.is_full() {
            return Err(h);
        }
        let _ = ring.push(Sent::Queue(h));
        self.counters.handed_out += 1;
        self.handed_to |= bit(to);
        Ok(())
    }

    /// Packets in the rings to this worker, not yet taken.
    pub fn waiting(&self) -> usize {
        self.from.iter().map(|c| c.slots()).sum()
    }

    /// Packets this worker has put in the rings to others that they have
    /// not taken yet.
    pub fn in_flight_out(&self) -> usize {
        self.to
            .iter()
            .flatten()
            .map(|p| p.buffer().capacity() - p.slots())
            .sum()
    }

    /// Queues what other workers handed this one into its replica, each
    /// at its classification time or the replica's own time if later,
    /// ring by ring in order, and gives `settle` each verdict (`Queued`,
    /// or a drop at the pipe's entry) with the packet's info. A frame
    /// handed back for its `out` pass ([`Self::out_pass`]) runs it here,
    /// and `settle` gets its verdict (unless that hands it on again, to
    /// the pipe the `out` pass sends it to). Returns how many were taken.
    pub fn receive(
        &mut self,
        engine: &mut Engine<P>,
        mut settle: impl FnMut(&mut Engine<P>, Nanos, PacketInfo, Verdict<P>),
    ) -> usize {
        self.receive_tagged(engine, |_| (), |e, at, info, v, ()| settle(e, at, info, v))
    }

    /// [`Self::receive`], `settle` also given `tag` of each packet, taken
    /// before it goes in (a `Queued` verdict no longer has it): the live
    /// data plane's packet id, for the observer.
    pub fn receive_tagged<T>(
        &mut self,
        engine: &mut Engine<P>,
        tag: impl Fn(&P) -> T,
        mut settle: impl FnMut(&mut Engine<P>, Nanos, PacketInfo, Verdict<P>, T),
    ) -> usize {
        let mut n = 0;
        for r in 0..self.from.len() {
            while let Ok(sent) = self.from[r].pop() {
                n += 1;
                match sent {
                    Sent::Queue(Handoff { at, shaped }) => {
                        let at = at.max(engine.now());
                        let info = *shaped.info();
                        let t = tag(shaped.payload());
                        let v = engine.enqueue(at, shaped);
                        settle(engine, at, info, v, t);
                    }
                    Sent::Pass { at, info, payload } => {
                        let at = at.max(engine.now());
                        let t = tag(&payload);
                        if let Routed::Here(v) = self.input(engine, at, info, payload) {
                            settle(engine, at, info, v, t);
                        }
                    }
                }
            }
        }
        self.counters.handed_in += n as u64;
        n
    }
}

/// Several workers' replicas and rings driven from one thread on a
/// virtual clock: the sharded data plane's logic without threads or I/O,
/// for tests and `dummynet bench --workers` (which runs the same pieces on
/// threads).
pub struct Cluster<P> {
    pub engines: Vec<Engine<P>>,
    pub links: Vec<Links<P>>,
}

impl<P: Payload> Cluster<P> {
    /// `workers` replicas made by `make` (which must configure them alike),
    /// with rings of `slots`.
    /// They count `limit` states in one [`SharedLimits`].
    pub fn new(workers: usize, slots: usize, make: impl Fn(usize) -> Engine<P>) -> Self {
        Self::with_limits(workers, slots, make, std::sync::Arc::default())
    }

    /// [`Self::new`], the replicas counting `limit` states in `limits`.
    pub fn with_limits(
        workers: usize,
        slots: usize,
        make: impl Fn(usize) -> Engine<P>,
        limits: std::sync::Arc<SharedLimits>,
    ) -> Self {
        let engines = (0..workers)
            .map(|w| {
                let mut e = make(w);
                e.share_limits(limits.clone());
                e
            })
            .collect();
        Cluster {
            engines,
            links: mesh(workers, slots),
        }
    }

    /// A packet read by worker `w` at `now`.
    pub fn input(&mut self, w: usize, now: Nanos, info: PacketInfo, payload: P) -> Routed<P> {
        self.links[w].input(&mut self.engines[w], now, info, payload)
    }

    /// A packet read at `now` by the worker the kernel's fanout gives its
    /// flow ([`reader`]): both directions of a flow on one worker.
    pub fn read(&mut self, now: Nanos, info: PacketInfo, payload: P) -> (usize, Routed<P>) {
        let w = reader(&info.key, self.engines.len());
        (w, self.input(w, now, info, payload))
    }

    /// Every worker takes what was handed to it; the verdicts (drops at a
    /// pipe's entry among them) with the worker that gave them.
    pub fn take_handoffs(&mut self) -> Vec<(usize, PacketInfo, Verdict<P>)> {
        let mut out = Vec::new();
        for (w, (links, engine)) in self.links.iter_mut().zip(&mut self.engines).enumerate() {
            links.receive(engine, |_, _, info, v| out.push((w, info, v)));
        }
        out
    }

    /// What every replica has due by `now`, by worker.
    pub fn poll(&mut self, now: Nanos) -> Vec<(usize, Output<P>)> {
        let mut out = Vec::new();
        for (w, e) in self.engines.iter_mut().enumerate() {
            while let Some(o) = e.poll(now) {
                out.push((w, o));
            }
        }
        out
    }

    /// The earliest deadline of any replica.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.engines.iter().filter_map(Engine::next_deadline).min()
    }

    /// Packets in the rings, handed but not yet taken.
    pub fn in_rings(&self) -> u64 {
        self.links.iter().map(|l| l.waiting() as u64).sum()
    }

    /// The replicas' books, summed.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for e in &self.engines {
            t.add(&e.totals());
        }
        t
    }

    /// Applies `cmds` to every replica as one change: the rings are
    /// drained first (what was classified before the change enters its
    /// pipe before it), then the first replica applies the batch, which
    /// decides for all; a configuration that cannot run sharded
    /// ([`check_shardable`]) is refused, undone by the batch's own
    /// all-or-nothing rule. Returns the drained packets' verdicts too.
    #[allow(clippy::type_complexity)]
    pub fn apply_all(
        &mut self,
        now: Nanos,
        cmds: Vec<Command>,
    ) -> (
        Result<Vec<dummynet_engine::ConfigNote>, BatchError>,
        Vec<(usize, PacketInfo, Verdict<P>)>,
    ) {
        // A frame back for its `out` pass may go on to another ring.
        let mut drained = Vec::new();
        while self.in_rings() > 0 {
            drained.extend(self.take_handoffs());
        }
        let workers = self.engines.len();
        let Some((first, rest)) = self.engines.split_first_mut() else {
            return (Ok(Vec::new()), drained);
        };
        let r = apply_checked(first, now, cmds.clone(), workers);
        if r.is_ok() {
            for e in rest {
                // Same configuration, same batch: the same answer.
                let _ = e.apply_all(now, cmds.clone());
            }
        }
        (r, drained)
    }
}

/// `engine.apply_all(now, cmds)`, refused as a whole (nothing applied) if
/// the configuration it leaves cannot run on `workers` workers
/// ([`check_shardable`]).
pub fn apply_checked<P: Payload>(
    engine: &mut Engine<P>,
    now: Nanos,
    cmds: Vec<Command>,
    workers: usize,
) -> Result<Vec<dummynet_engine::ConfigNote>, BatchError> {
    if workers <= 1 {
        return engine.apply_all(now, cmds);
    }
    engine.apply_all_where(now, cmds, |shadow| check_shardable(shadow, workers))
}

/// Worker `to`'s bit in a set of workers to wake (all bits beyond 64).
fn bit(to: usize) -> u64 {
    1u64.checked_shl(to as u32).unwrap_or(u64::MAX)
}
