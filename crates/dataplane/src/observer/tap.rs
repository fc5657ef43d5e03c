//! The data plane's half of the observer ([`Tap`]): one per data-plane
//! worker, it turns the engine's steps into records and frames and sends
//! them down a bounded channel to the observer thread, never waiting (what
//! the channel cannot take is counted), and says the worker's floor and
//! sleep for the merge ([`super::merge`]).

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use dummynet_engine::config::Trace;
use dummynet_engine::{Engine, IfaceId, Nanos, Payload};

use super::options::ObserveOptions;
use super::record::{Kind, Msg, Record};
use super::shared::{ObserverStats, PlaneCounters, Shared};
use crate::clock::Clock;
use crate::Carrier;

/// Frame buffers a capture circulates between the data plane and the
/// observer: made once, at start, so the data plane never allocates (an
/// allocation there could wait on the allocator's lock, held by the
/// observer freeing one); at most 4096, and at most 16 MiB of them.
pub(super) const SPARE_BUFFERS: usize = 4096;
pub(super) const SPARE_BYTES: usize = 16 << 20;

/// The data plane's half ([`super::dataplane::DataPlane::with_tap`]).
pub struct Tap {
    /// The data-plane worker this tap is on (0 with `--workers 1`).
    pub(super) index: usize,
    pub(super) tx: SyncSender<Msg>,
    /// Frame buffers the observer is done with.
    pub(super) spare: Receiver<Vec<u8>>,
    pub(super) shared: Arc<Shared>,
    pub(super) capture_in: bool,
    pub(super) capture_out: bool,
    pub(super) snaplen: usize,
    /// Records are wanted: files are written or someone subscribes
    /// ([`Tap::refresh`], once a turn).
    pub on: bool,
    /// Interfaces whose names the observer has.
    pub(super) named: Vec<bool>,
    /// The pipe `--mm-log` follows, the trace last sent for it (trace,
    /// start), and a change the channel could not take yet.
    pub(super) mm_pipe: Option<u32>,
    pub(super) mm_trace: Option<(Arc<Trace>, Nanos)>,
    pub(super) mm_pending: Option<Msg>,
}

impl Tap {
    /// A tap for `o`, the receiving end of its channel and the way back
    /// for its buffers.
    #[cfg(test)]
    pub(super) fn new(o: &ObserveOptions) -> (Tap, Receiver<Msg>, SyncSender<Vec<u8>>) {
        Tap::join(Shared::new(o, 1), 0, o)
    }

    /// Worker `index`'s tap of the observer `shared` is (each worker has a
    /// channel, counters and a pool of frame buffers of its own: workers
    /// never share a cache line for a record).
    pub(super) fn join(
        shared: Arc<Shared>,
        index: usize,
        o: &ObserveOptions,
    ) -> (Tap, Receiver<Msg>, SyncSender<Vec<u8>>) {
        let files = shared.files;
        let (tx, rx) = mpsc::sync_channel(o.buffer.max(1));
        let (spare_tx, spare_rx) = mpsc::sync_channel(SPARE_BUFFERS);
        if o.capture_in.is_some() || o.capture_out.is_some() {
            let size = (o.snaplen as usize).max(1);
            for _ in 0..SPARE_BUFFERS.min(SPARE_BYTES / size).max(1) {
                if spare_tx.try_send(Vec::with_capacity(size)).is_err() {
                    break;
                }
            }
        }
        let tap = Tap {
            index,
            tx,
            spare: spare_rx,
            shared,
            capture_in: o.capture_in.is_some(),
            capture_out: o.capture_out.is_some(),
            snaplen: o.snaplen as usize,
            on: files,
            named: Vec::new(),
            // The pipe's trace changes on every replica alike: one worker
            // tells.
            mm_pipe: o
                .mm_log
                .as_ref()
                .map(|(_, pipe)| *pipe)
                .filter(|_| index == 0),
            mm_trace: None,
            mm_pending: None,
        };
        (tap, rx, spare_tx)
    }

    /// The counters this tap's worker writes.
    #[inline]
    fn counters(&self) -> &PlaneCounters {
        &self.shared.plane[self.index]
    }

    /// Once a turn, after the records of the turn: none this worker sends
    /// from now on is older than `floor` (its engine's time); `reads_late`
    /// if it leaves arrivals in the kernel for a while. Two stores to this
    /// worker's own cache line, which the observer reads every few ms.
    #[inline]
    pub fn floor(&self, floor: Nanos, reads_late: bool) {
        let c = self.counters();
        c.reads_late.store(reads_late, Ordering::Relaxed);
        c.floor.store(floor, Ordering::Release);
    }
}

impl Tap {
    /// Once a turn: are records wanted?
    #[inline]
    pub fn refresh(&mut self) {
        self.on = self.shared.files || self.shared.subscribers.load(Ordering::Relaxed) > 0;
        if self.mm_pending.is_some() {
            self.send_pending();
        }
    }

    /// After a configuration change (and once at the start): if the
    /// `--mm-log` pipe's trace changed, tells the observer, which logs
    /// the trace's delivery opportunities (`T # 1504`) itself, off the data
    /// plane. Only the change crosses the channel, never an opportunity.
    pub fn reconfigured(&mut self, engine: &Engine<Carrier>, now: Nanos) {
        let Some(pipe) = self.mm_pipe else {
            return;
        };
        let trace = engine.pipe_trace(pipe);
        let same = match (&trace, &self.mm_trace) {
            (Some((a, sa)), Some((b, sb))) => Arc::ptr_eq(a, b) && sa == sb,
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        self.mm_trace.clone_from(&trace);
        self.mm_pending = Some(Msg::Trace { at: now, trace });
        self.send_pending();
    }

    /// Sends the trace change; kept for the next turn if the channel is
    /// full (records may be shed; this one may not).
    fn send_pending(&mut self) {
        if let Some(msg) = self.mm_pending.take() {
            if let Err(TrySendError::Full(msg)) = self.tx.try_send(msg) {
                self.mm_pending = Some(msg);
            }
        }
    }

    /// First, before any packet: the wall clock of the data plane's t = 0.
    pub fn start(&mut self, wall_ns: u64) {
        self.shared.wall_ns.store(wall_ns, Ordering::Relaxed);
        let _ = self.tx.try_send(Msg::Start {
            wall_ns,
            clock: None,
        });
    }

    /// [`Self::start`] with the data plane's clock, which `t_ns` counts:
    /// the merge of several workers' records tells how old a record is by
    /// it (the wall clock may be stepped or slewed meanwhile).
    pub fn start_clock(&mut self, wall_ns: u64, clock: Clock) {
        self.shared.wall_ns.store(wall_ns, Ordering::Relaxed);
        let _ = self.tx.try_send(Msg::Start {
            wall_ns,
            clock: Some(clock),
        });
    }

    /// The worker goes to sleep until its ports, its bell or `deadline`
    /// (its engine's next) wake it, every port watched (not reading
    /// late): while it sleeps, the merge takes its floor to be the time
    /// then, less [`SLEEP_SLACK`](super::SLEEP_SLACK), up to `deadline`. Only with several
    /// workers.
    #[inline]
    pub fn sleeping(&self, deadline: Nanos) {
        let c = self.counters();
        c.sleep_until.store(deadline, Ordering::Relaxed);
        c.asleep.store(true, Ordering::Release);
    }

    /// A packet of `at` went into the ring to worker `to`, which records
    /// it with that time: while `to` sleeps, the merge waits for it from
    /// `at` on, however long it takes to wake (up to
    /// [`MERGE_WINDOW`](super::MERGE_WINDOW)). Only with several workers.
    #[inline]
    pub fn handed(&self, to: usize, at: Nanos) {
        if let Some(c) = self.shared.plane.get(to) {
            c.handed_since.fetch_min(at, Ordering::Release);
        }
    }

    /// The worker is about to take what was handed to it (after this,
    /// whatever is still to come sets [`Self::handed`] again).
    #[inline]
    pub fn taking_handoffs(&self) {
        self.counters()
            .handed_since
            .store(Nanos::MAX, Ordering::Release);
    }

    /// Awake, before anything is done.
    #[inline]
    pub fn woke(&self) {
        self.counters().asleep.store(false, Ordering::Release);
    }

    /// Hands `r` over, with `frame`'s first bytes if `capture` (the
    /// buffer's copy is the only per-packet work a capture adds).
    pub fn push<P: Payload>(&mut self, engine: &Engine<P>, r: Record, frame: Option<&[u8]>) {
        for i in [r.iface, r.bridge_to].into_iter().flatten() {
            self.name(engine, i);
        }
        let msg = match frame {
            // A buffer from the pool, made at start with room for the snap
            // length: no allocation here. None free (the observer is
            // behind): the record goes without its bytes, counted.
            Some(bytes) => match self.spare.try_recv() {
                Ok(mut buf) => {
                    buf.clear();
                    buf.extend_from_slice(&bytes[..bytes.len().min(self.snaplen)]);
                    Msg::Frame(r, buf, len32(bytes))
                }
                Err(_) => {
                    let lost = &self.counters().frames_lost;
                    lost.store(lost.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    Msg::Packet(r)
                }
            },
            None => Msg::Packet(r),
        };
        // Only this thread writes these: a load and a store, no locked
        // instruction.
        let count = match self.tx.try_send(msg) {
            Ok(()) => &self.counters().sent,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                let i = Kind::ALL.iter().position(|k| *k == r.kind).unwrap_or(0);
                &self.counters().lost[i]
            }
        };
        count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Whether arrivals' bytes go with their records.
    #[inline]
    pub fn wants_in(&self) -> bool {
        self.capture_in
    }

    #[inline]
    pub fn wants_out(&self) -> bool {
        self.capture_out
    }

    /// Sends an interface's name the first time a record names it (and
    /// again later if the channel could not take it).
    fn name<P: Payload>(&mut self, engine: &Engine<P>, i: IfaceId) {
        let at = usize::from(i.0);
        if self.named.get(at).copied().unwrap_or(false) {
            return;
        }
        let name = engine.iface_name(i).unwrap_or("?").to_string();
        if self.tx.try_send(Msg::Iface(i, name)).is_ok() {
            if self.named.len() <= at {
                self.named.resize(at + 1, false);
            }
            self.named[at] = true;
        }
    }

    /// The counters, for the data plane's report.
    pub fn stats(&self) -> ObserverStats {
        self.shared.stats()
    }
}

fn len32(b: &[u8]) -> u32 {
    u32::try_from(b.len()).unwrap_or(u32::MAX)
}
