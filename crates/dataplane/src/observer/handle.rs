//! The observer's handle ([`Observer`]): its start (the files created, a
//! [`Tap`] per data-plane worker, the thread spawned), subscriptions and
//! counters; and the thread's own handle ([`ObserverThread`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use super::merge::Merge;
use super::options::ObserveOptions;
use super::shared::{ObserverStats, Shared};
use super::subscribe::{EventFilter, SubState, Subscriber, Subscription};
use super::tap::Tap;
use super::thread::Worker;
use super::writers::{MmLog, Pcap, RecordFile, SharedFile, Writers};
use crate::capture;

/// Why the observer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ObserverError {
    /// A file it writes (a log, a capture) could not be created.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A capture's file header could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Header {
        path: PathBuf,
        source: capture::CaptureError,
    },
    #[error("the observer made no tap")]
    NoTap,
    #[error("cannot start the observer thread: {source}")]
    Thread { source: std::io::Error },
}

/// The handle: subscribe, read the counters. Cheap to clone.
#[derive(Clone)]
pub struct Observer {
    shared: Arc<Shared>,
}

/// The observer thread, joined once the data plane has stopped (its
/// [`Tap`] dropped): it writes what is left and closes the files.
pub struct ObserverThread(Option<JoinHandle<()>>);

impl ObserverThread {
    pub fn join(mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ObserverThread {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

impl Observer {
    /// Creates the files (an error names the one that could not be) and
    /// starts the observer thread. The [`Tap`] goes to the data plane.
    pub fn start(o: &ObserveOptions) -> Result<(Observer, Tap, ObserverThread), ObserverError> {
        let (observer, taps, thread) = Observer::start_workers(o, 1)?;
        match taps.into_iter().next() {
            Some(tap) => Ok((observer, tap, thread)),
            None => Err(ObserverError::NoTap),
        }
    }

    /// [`Self::start`] for a data plane of `workers` workers (`run
    /// --workers N`): one [`Tap`] each, in worker order, whose streams the
    /// observer thread merges by time (see [`MERGE_WINDOW`](super::MERGE_WINDOW)).
    pub fn start_workers(
        o: &ObserveOptions,
        workers: usize,
    ) -> Result<(Observer, Vec<Tap>, ObserverThread), ObserverError> {
        let cannot_create = |p: &Path| {
            let path = p.to_path_buf();
            move |source| ObserverError::Create { path, source }
        };
        let create = |p: &Path| {
            File::create(p)
                .map(|f| BufWriter::with_capacity(1 << 16, f))
                .map_err(cannot_create(p))
        };
        let records = |p: &Path| RecordFile::create(p).map_err(cannot_create(p));
        let pcap = |p: &Path| -> Result<Pcap, ObserverError> {
            let out = SharedFile(Arc::new(Mutex::new(records(p)?)));
            let writer = capture::Writer::with_snaplen(out.clone(), o.linktype, o.snaplen)
                .map_err(|source| ObserverError::Header {
                    path: p.to_path_buf(),
                    source,
                })?;
            // The file's header is whole: a cut may come back to it.
            out.lock().boundary();
            Ok(Pcap { writer, out })
        };
        let writers = Writers {
            log: o.log.as_deref().map(records).transpose()?,
            capture_in: o.capture_in.as_deref().map(pcap).transpose()?,
            capture_out: o.capture_out.as_deref().map(pcap).transpose()?,
            mm: match &o.mm_log {
                Some((p, pipe)) => Some(MmLog {
                    path: p.clone(),
                    out: create(p)?,
                    pipe: *pipe,
                    base_ms: 0,
                    entered: HashMap::new(),
                    trace: None,
                }),
                None => None,
            },
        };
        let shared = Shared::new(o, workers);
        let (mut taps, mut rx, mut spare) = (Vec::new(), Vec::new(), Vec::new());
        for index in 0..workers.max(1) {
            let (tap, r, s) = Tap::join(shared.clone(), index, o);
            taps.push(tap);
            rx.push(r);
            spare.push(s);
        }
        let worker = Worker {
            rx,
            spare,
            shared: shared.clone(),
            writers,
            names: HashMap::new(),
            subscribers: Vec::new(),
            wall_ns: 0,
            failed: false,
            merge: Merge::default(),
        };
        let thread = std::thread::Builder::new()
            .name("dummynet-observer".into())
            .spawn(move || worker.run())
            .map_err(|source| ObserverError::Thread { source })?;
        Ok((Observer { shared }, taps, ObserverThread(Some(thread))))
    }

    /// Subscribes to the events that pass `filter`, through a channel of
    /// `capacity` events (at least 1); see the module documentation.
    pub fn subscribe(&self, filter: EventFilter, capacity: usize) -> Subscription {
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        let state = Arc::new(SubState::default());
        // Counted now, so that the data plane starts sending records at its
        // next turn; the observer thread takes the subscriber up at its
        // next look.
        self.shared.subscribers.fetch_add(1, Ordering::Relaxed);
        let sub = Subscriber {
            filter,
            tx,
            state: state.clone(),
        };
        match self.shared.joining.lock() {
            Ok(mut j) => j.push(sub),
            Err(poisoned) => poisoned.into_inner().push(sub),
        }
        Subscription { rx, state }
    }

    /// The counters so far.
    pub fn stats(&self) -> ObserverStats {
        self.shared.stats()
    }

    /// True once the daemon has stopped and the observer has written all.
    pub fn stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::Relaxed)
    }
}
