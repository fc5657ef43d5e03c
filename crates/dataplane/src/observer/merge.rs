//! The observer's merge of several workers' records (`run --workers N`):
//! each data-plane worker sends its records in its own time order down its
//! own channel; the observer thread holds them here until no worker can
//! still send an earlier one (its floor, [`worker_floor`]), then writes
//! them in one order of (time, [`step`], worker), so the files and the
//! event stream read as one system. One worker needs none of this: its
//! records are written as they come ([`super::thread::Worker::run`]).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use dummynet_engine::config::Trace;
use dummynet_engine::{Direction, Nanos};

use super::record::{Kind, Record};
use super::shared::PlaneCounters;
use crate::clock::Clock;

/// How far back the merge of several workers' records (`run --workers N`)
/// waits for a worker awake whose floor stays behind (one asleep is
/// [`SLEEP_SLACK`]'s): its engine keeps the time of its last packet, and
/// the others' records would wait for it forever. A record that reaches
/// the observer later than this after its time is written when it comes,
/// out of time order, and counted ([`ObserverStats::out_of_order`](super::ObserverStats::out_of_order)).
pub const MERGE_WINDOW: Nanos = 50_000_000;

/// ... and for a worker that reads late (leaves arrivals in the kernel
/// until a pipe's least transit would make them due): its floor is exact,
/// and it moves on by its next departure, but nothing waits longer than
/// this.
pub const MERGE_HOLD_MAX: Nanos = 1_000_000_000;

/// While a worker sleeps with every port watched, anything that comes
/// wakes it: a frame it reads then arrived after the merge last looked,
/// less the time the kernel takes to wake it. The merge takes the time it
/// looks, less this, as that worker's floor (and the previous look's
/// floors as the horizon, for a packet handed to it just before).
pub const SLEEP_SLACK: Nanos = 1_000_000;

/// A record's place among others of the same time, by the step of a
/// packet's way it is: arrival, into a pipe on the `in` pass, out of it
/// (forward), into a pipe on the `out` pass, gone (departure or drop).
/// Along one packet's way the time never goes back (a packet handed to
/// another worker enters its pipe at its classification time or later) and
/// the step always goes on, so ordering by (time, step) keeps every
/// packet's events in the order they happened, whichever workers made them.
pub(super) fn step(r: &Record) -> u8 {
    match (r.kind, r.dir) {
        (Kind::Arrival, _) => 1,
        (Kind::Enqueue, Direction::In) => 2,
        (Kind::Forward, _) => 3,
        (Kind::Enqueue, Direction::Out) => 4,
        (Kind::Departure | Kind::Drop, _) => 5,
    }
}

/// Worker `p`'s floor as the merge takes it at `now`: what it said
/// ([`Tap::floor`]), and, for a worker that keeps an old one because it
/// has nothing to do, more: while it sleeps with every port watched, `now`
/// less [`SLEEP_SLACK`] up to its next deadline; awake, `now` less
/// [`MERGE_WINDOW`] (or [`MERGE_HOLD_MAX`] if it reads late).
pub(super) fn worker_floor(p: &PlaneCounters, now: Nanos) -> Nanos {
    let floor = p.floor.load(Ordering::Acquire);
    let later = if p.asleep.load(Ordering::Acquire) {
        // A packet handed to it keeps its hand-off time, however late the
        // worker wakes to take it; a hand-off it took just before sleeping
        // may leave that time behind, so the window bounds the wait.
        now.saturating_sub(SLEEP_SLACK)
            .min(p.sleep_until.load(Ordering::Relaxed))
            .min(p.handed_since.load(Ordering::Acquire))
            .max(now.saturating_sub(MERGE_WINDOW))
    } else if p.reads_late.load(Ordering::Relaxed) {
        now.saturating_sub(MERGE_HOLD_MAX)
    } else {
        now.saturating_sub(MERGE_WINDOW)
    };
    floor.max(later)
}

/// A record waiting in the merge, with its frame's bytes if it has them,
/// or a change of the `--mm-log` pipe's trace (ordered by its time too).
pub(super) enum Item {
    Packet(Record, Option<(Vec<u8>, u32)>),
    Trace {
        at: Nanos,
        trace: Option<(Arc<Trace>, Nanos)>,
    },
}

/// One [`Item`] held by the merge, with its place: (time, [`step`]).
pub(super) struct Held {
    pub(super) key: (Nanos, u8),
    /// The sweep of the channels that took it ([`Merge::sweeps`]).
    pub(super) sweep: u64,
    pub(super) item: Item,
}

/// The merge of several workers' records (`run --workers N`): one queue
/// per worker, each in order of (time, [`step`]) (a worker sends in time
/// order; one that did not would be put in its place), held until no
/// worker can send an earlier one, then written by taking the least of
/// the queues' heads, (time, step, worker): a few comparisons a record,
/// where a heap of all would move each record at every level.
#[derive(Default)]
pub(super) struct Merge {
    pub(super) queues: Vec<VecDeque<Held>>,
    /// Sweeps that emptied every channel. A record taken in sweep `k` is
    /// written only once sweep `k + 1` has ended: a packet's earlier event
    /// was sent (by whichever worker) before its later one, so by then it
    /// has been taken too, and the order puts it first.
    pub(super) sweeps: u64,
    /// The latest time written.
    pub(super) last: Nanos,
    /// Workers whose channel has closed (they stopped).
    pub(super) ended: Vec<bool>,
    /// The workers' floors at the last look.
    pub(super) floors: Vec<Nanos>,
    /// The data plane's clock, once the start has brought it.
    pub(super) clock: Option<Clock>,
}
