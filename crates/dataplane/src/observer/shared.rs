//! What the data plane, the observer thread and the handles share: the
//! counters (the data plane's on a cache line of their own), the
//! subscribers joining, the first write error; and [`ObserverStats`], the
//! counters as `dummynet stats` gives them.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dummynet_engine::Nanos;

use super::options::ObserveOptions;
use super::record::Kind;
use super::subscribe::Subscriber;

/// What the data plane, the observer thread and the handles share.
pub(super) struct Shared {
    /// Subscribers waiting to be taken up by the observer thread.
    pub(super) joining: Mutex<Vec<Subscriber>>,
    /// Subscribers there are (joining or taken up).
    pub(super) subscribers: AtomicUsize,
    /// One per data-plane worker (`run --workers N`; one otherwise), each
    /// written by its worker only.
    pub(super) plane: Vec<PlaneCounters>,
    /// Records the merge of several workers' streams met after it had
    /// already written a later one (see [`MERGE_WINDOW`]): written where
    /// they came, out of time order, and counted here.
    pub(super) out_of_order: AtomicU64,
    /// Events written to the log, frames to the captures.
    pub(super) logged: AtomicU64,
    pub(super) captured_in: AtomicU64,
    pub(super) captured_out: AtomicU64,
    pub(super) mm_lines: AtomicU64,
    /// Events subscribers were too slow for, over all subscriptions.
    pub(super) subscriber_lost: AtomicU64,
    /// The first write error; files are no longer written after it.
    pub(super) error: Mutex<Option<String>>,
    /// Events not written to the files because of it.
    pub(super) unwritten: AtomicU64,
    /// The wall clock of t = 0, once the data plane has said.
    pub(super) wall_ns: AtomicU64,
    /// Files are written (the data plane always sends records).
    pub(super) files: bool,
    pub(super) stopped: AtomicBool,
}

/// The data plane's counters, on a cache line of their own: the observer
/// thread's counters beside them would make each record's count a cache
/// miss on the data plane.
#[derive(Default)]
#[repr(align(64))]
pub(super) struct PlaneCounters {
    /// Records handed over.
    pub(super) sent: AtomicU64,
    /// Records the channel could not take, by [`Kind`].
    pub(super) lost: [AtomicU64; 5],
    /// Frames a capture missed: no spare buffer was at hand (the record
    /// still went, without its bytes).
    pub(super) frames_lost: AtomicU64,
    /// The worker's floor: no record it sends from now on is older (its
    /// engine's time, which an arrival's is never before), set once a turn
    /// ([`Tap::floor`]); what the merge of several workers waits for.
    pub(super) floor: AtomicU64,
    /// The worker leaves arrivals in the kernel for a while (late reading,
    /// the data plane's `LatePlan`): they may come older than the merge
    /// window, so the merge waits for its floor however old.
    pub(super) reads_late: AtomicBool,
    /// The worker sleeps, every port watched, until `sleep_until` at most
    /// ([`Tap::sleeping`]).
    pub(super) asleep: AtomicBool,
    pub(super) sleep_until: AtomicU64,
    /// The earliest time of a packet another worker handed this one and it
    /// may not have taken yet ([`Tap::handed`]); `Nanos::MAX`: none.
    pub(super) handed_since: AtomicU64,
}

/// The observer's counters, for `dummynet stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ObserverStats {
    /// Records the data plane handed over.
    pub sent: u64,
    /// Records the channel could not take, by kind (non-zero only),
    /// summed over the workers.
    pub lost: Vec<(&'static str, u64)>,
    /// The same, by data-plane worker (one entry with `--workers 1`).
    pub lost_by_worker: Vec<u64>,
    /// Records the merge of several workers' streams wrote out of time
    /// order (they came later than [`MERGE_WINDOW`](super::MERGE_WINDOW) after their time).
    pub out_of_order: u64,
    pub logged: u64,
    pub captured_in: u64,
    pub captured_out: u64,
    /// Frames the captures missed for want of a free buffer.
    pub capture_lost: u64,
    pub mm_lines: u64,
    pub subscribers: u64,
    pub subscriber_lost: u64,
    /// Events the files did not get after a write error (`error`).
    pub unwritten: u64,
    pub error: Option<String>,
}

impl ObserverStats {
    /// Events lost: the channel's, and those the files did not get after
    /// a write error.
    pub fn lost_total(&self) -> u64 {
        self.lost.iter().map(|(_, n)| n).sum::<u64>() + self.unwritten
    }
}

impl std::fmt::Display for ObserverStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "observer: {} records, {} lost; {} log lines, {} frames in, {} out ({} missed), \
             {} mm-log lines; {} subscribers, {} events they lost",
            self.sent,
            self.lost_total(),
            self.logged,
            self.captured_in,
            self.captured_out,
            self.capture_lost,
            self.mm_lines,
            self.subscribers,
            self.subscriber_lost
        )?;
        if !self.lost.is_empty() {
            let list: Vec<String> = self.lost.iter().map(|(k, n)| format!("{k} {n}")).collect();
            write!(f, " (lost: {})", list.join(", "))?;
        }
        if self.lost_by_worker.len() > 1 && self.lost_total() > 0 {
            let list: Vec<String> = self.lost_by_worker.iter().map(u64::to_string).collect();
            write!(f, " (lost by worker: {})", list.join(", "))?;
        }
        if self.out_of_order > 0 {
            write!(
                f,
                "; {} written out of time order (late to the merge)",
                self.out_of_order
            )?;
        }
        if let Some(e) = &self.error {
            write!(
                f,
                "; stopped {e} ({} events not written since)",
                self.unwritten
            )?;
        }
        Ok(())
    }
}

impl Shared {
    pub(super) fn stats(&self) -> ObserverStats {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let sum = |f: fn(&PlaneCounters) -> &AtomicU64| self.plane.iter().map(|p| n(f(p))).sum();
        ObserverStats {
            sent: sum(|p| &p.sent),
            lost: Kind::ALL
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let v: u64 = self.plane.iter().map(|p| n(&p.lost[i])).sum();
                    (k.as_str(), v)
                })
                .filter(|(_, v)| *v > 0)
                .collect(),
            lost_by_worker: self
                .plane
                .iter()
                .map(|p| p.lost.iter().map(n).sum())
                .collect(),
            out_of_order: n(&self.out_of_order),
            logged: n(&self.logged),
            captured_in: n(&self.captured_in),
            captured_out: n(&self.captured_out),
            capture_lost: sum(|p| &p.frames_lost),
            mm_lines: n(&self.mm_lines),
            subscribers: self.subscribers.load(Ordering::Relaxed) as u64,
            subscriber_lost: n(&self.subscriber_lost),
            unwritten: n(&self.unwritten),
            error: match self.error.lock() {
                Ok(e) => e.clone(),
                Err(p) => p.into_inner().clone(),
            },
        }
    }
}

impl Shared {
    /// What an observer of `workers` data-plane workers shares.
    pub(super) fn new(o: &ObserveOptions, workers: usize) -> Arc<Shared> {
        let files = o.log.is_some()
            || o.capture_in.is_some()
            || o.capture_out.is_some()
            || o.mm_log.is_some();
        Arc::new(Shared {
            joining: Mutex::new(Vec::new()),
            subscribers: AtomicUsize::new(0),
            plane: (0..workers.max(1))
                .map(|_| PlaneCounters {
                    handed_since: AtomicU64::new(Nanos::MAX),
                    ..PlaneCounters::default()
                })
                .collect(),
            out_of_order: AtomicU64::new(0),
            logged: AtomicU64::new(0),
            captured_in: AtomicU64::new(0),
            captured_out: AtomicU64::new(0),
            mm_lines: AtomicU64::new(0),
            subscriber_lost: AtomicU64::new(0),
            error: Mutex::new(None),
            unwritten: AtomicU64::new(0),
            wall_ns: AtomicU64::new(0),
            files,
            stopped: AtomicBool::new(false),
        })
    }
}
