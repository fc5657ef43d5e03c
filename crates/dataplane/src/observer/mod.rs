//! Watching the live daemon packet by packet, off the data plane: the
//! per-packet log (`--log`, the schema of [`crate::events`]), the captures
//! of what entered and what left (`--capture-in`, `--capture-out`), a
//! mahimahi link log of one pipe (`--mm-log`), and an event tap others
//! subscribe to (the HTTP API's `GET /v1/events`).
//!
//! Two halves:
//! - [`Tap`], owned by the data-plane thread: for each packet event it
//!   pushes one fixed-size [`Record`] (and, only while a capture is on, the
//!   frame's first `--capture-snaplen` bytes, in a buffer the observer hands
//!   back for reuse) into a bounded channel with `try_send`. What the
//!   channel cannot take is counted by kind and dropped: the data plane
//!   never waits for an observer. A daemon without any observer option and
//!   no subscriber pays one predictable branch per packet event.
//! - The observer thread ([`Observer::start`]): it takes what the channel
//!   holds every few milliseconds (it never blocks on the channel, so the
//!   data plane never has to wake it), builds the events, writes the files
//!   through buffers, and hands the events to the subscribers.
//!
//! # The subscribe API
//!
//! ```ignore
//! let sub: Subscription = observer.subscribe(
//!     EventFilter { pipe: Some(1), rule: None, sample: Some(10) },
//!     1024, // events the subscriber's channel holds
//! );
//! loop {
//!     match sub.recv_timeout(Duration::from_secs(1)) {
//!         Ok(event) => send(serde_json::to_string(&event)?), // an `Event<String>`
//!         Err(RecvTimeoutError::Timeout) => {}              // keep-alive
//!         Err(RecvTimeoutError::Disconnected) => break,     // the daemon stopped
//!     }
//!     let lost = sub.lost(); // events this subscriber was too slow for
//! }
//! ```
//!
//! [`Observer::subscribe`]`(&self, filter: EventFilter, capacity: usize) ->
//! Subscription` registers a subscriber; the [`Observer`] handle is
//! `Clone + Send + Sync` (from [`super::run::Running::observer`]). The data
//! plane starts sending records as soon as there is a subscriber, and stops
//! when the last one is dropped (unless files are being written). Each
//! subscriber gets already-built [`Event`](crate::events::Event)s, `Event<String>`, which
//! serialize (serde) to exactly the log's lines, through a bounded channel
//! of its own: the observer thread fans out with `try_send`, so a slow
//! subscriber loses events ([`Subscription::lost`]) and slows nobody else.
//! The [`EventFilter`] keeps events that name pipe `pipe` (forward,
//! departure and drop events: the pipe a packet left or was dropped by),
//! rule `rule`, and, with `sample: Some(n)`, only packets whose id is a
//! multiple of `n`, all of each such packet's events. The start line (the
//! wall clock of `t_ns` 0) is sent to each new subscriber first. Dropping
//! the [`Subscription`] unsubscribes.
//!
//! # Several workers (`run --workers N`)
//!
//! Each data-plane worker has a [`Tap`] of its own (its channel, its
//! counters on a cache line of their own, its pool of frame buffers), and
//! sheds what its channel cannot take, counted per worker
//! ([`ObserverStats::lost_by_worker`]) and summed. A packet's id carries
//! the worker that read it ([`ID_WORKER_SHIFT`]), so its events can be
//! followed as it is handed to the worker that owns its pipe and back.
//! The observer thread merges the workers' records into one stream, the
//! one the log, the captures and the subscribers get. What "in order"
//! means there:
//!
//! - Each worker says, once a turn, its floor: its engine's time, before
//!   which it will send nothing more. A worker with nothing to do keeps an
//!   old one, so it also says when it goes to sleep with every port
//!   watched: anything that comes then wakes it, and until it is awake
//!   again its floor is the time the observer looks, less [`SLEEP_SLACK`]
//!   (the kernel's time to wake it), up to its next deadline. A worker
//!   awake with an old floor (a change being applied) is waited for
//!   [`MERGE_WINDOW`] at most, one that reads late (leaves arrivals in the
//!   kernel, under a long pipe) [`MERGE_HOLD_MAX`]. A record is written
//!   once it is older than every worker's floor, as the observer sees them
//!   now and saw them at its last look (a packet handed over just before
//!   may still be in its ring). What is written is in order of time, and
//!   among records of one time by the step of a packet's way (arrival,
//!   into a pipe, forward, into the `out` pass's pipe, departure or drop),
//!   then by worker, then as the worker sent them.
//! - A record that reaches the observer when a later one has been written
//!   already (a worker that took longer than [`SLEEP_SLACK`] to wake, or
//!   was held off its core longer than the window) is written as it comes
//!   and counted ([`ObserverStats::out_of_order`]): the stream is in time
//!   order exactly when that count is 0.
//! - A packet's own events are never out of order with each other: along
//!   its way the time never goes back and the step always goes on, and a
//!   record is written only after a whole sweep of every channel has ended
//!   since it was taken, by when the packet's earlier events (sent before
//!   it, by whichever worker) have been taken too.
//!
//! With one worker the records are written as they come, as before.
//!
//! Times: `t_ns` is the data plane's clock, ns since it started; the start
//! line gives the wall clock of that moment, and the captures' stamps are
//! wall-clock (nanosecond pcap). An arrival's time is the kernel's receive
//! stamp where the backend has one; a departure's, when the data plane
//! released it to its port's send batch (handed to the kernel within
//! microseconds: `dummynet stats` gives the lateness).

mod handle;
mod merge;
mod options;
mod output;
mod record;
mod shared;
mod subscribe;
mod tap;
#[cfg(test)]
mod tests;
mod thread;
mod writers;

pub use handle::{Observer, ObserverError, ObserverThread};
pub use merge::{MERGE_HOLD_MAX, MERGE_WINDOW, SLEEP_SLACK};
pub use options::{ObserveOptions, DEFAULT_BUFFER, DEFAULT_SNAPLEN};
pub use record::{carrier_bytes, first_id, Kind, Record, ID_COUNT_MASK, ID_WORKER_SHIFT};
pub use shared::ObserverStats;
pub use subscribe::{EventFilter, Subscription};
pub use tap::Tap;
