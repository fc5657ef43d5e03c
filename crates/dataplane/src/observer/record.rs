//! What the data plane hands the observer: a packet's id across workers,
//! one packet event as a fixed-size [`Record`], the messages of the channel
//! between a [`Tap`](super::Tap) and the observer thread, and a packet's
//! bytes as a capture keeps them.

use std::sync::Arc;

use dummynet_engine::config::Trace;
use dummynet_engine::{Direction, DropReason, IfaceId, Nanos, Target};

use crate::clock::Clock;
use crate::Carrier;

/// A packet's id (`Carrier::id`, the log's `id`) with `run --workers N`:
/// the worker that read it in the bits from this one up, its count of the
/// packets it read below. Unique across workers at no cost to the data
/// plane (a shared counter would pass its cache line between the workers'
/// cores for every packet), stable across a packet's hand-overs (the id
/// travels with it), worker 0's ids those of a single data plane, and
/// every id below 2^53 with up to 64 workers (a JSON number JavaScript
/// reads exactly). A worker's count runs into the next worker's ids after
/// 2^47 packets (163 days at 10 Mpps).
pub const ID_WORKER_SHIFT: u32 = 47;

/// The count part of an id ([`ID_WORKER_SHIFT`]).
pub const ID_COUNT_MASK: u64 = (1 << ID_WORKER_SHIFT) - 1;

/// The first id worker `index` gives ([`ID_WORKER_SHIFT`]).
pub fn first_id(index: usize) -> u64 {
    (index as u64) << ID_WORKER_SHIFT
}

/// What happened to a packet, as the data plane saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Arrival,
    /// Taken into a pipe or queue (not a log line: the mahimahi log's `+`).
    Enqueue,
    Forward,
    Departure,
    Drop,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Arrival,
        Kind::Enqueue,
        Kind::Forward,
        Kind::Departure,
        Kind::Drop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Arrival => "arrival",
            Kind::Enqueue => "enqueue",
            Kind::Forward => "forward",
            Kind::Departure => "departure",
            Kind::Drop => "drop",
        }
    }
}

/// One packet event as the data plane hands it over: plain numbers, no
/// allocation, names resolved later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub t_ns: Nanos,
    pub id: u64,
    /// A copy made by `duplicate`.
    pub copy: bool,
    pub len: u32,
    pub dir: Direction,
    /// Arrival: the interface it came in by (or, for a host's outgoing
    /// packet, goes out by); forward: the `out` pass's; departure: the one
    /// it leaves by.
    pub iface: Option<IfaceId>,
    /// Arrival of a bridged frame: the port its `out` pass is for.
    pub bridge_to: Option<IfaceId>,
    pub rule: Option<u16>,
    pub target: Option<Target>,
    pub reason: Option<DropReason>,
    /// A drop at a pipe's entry (it never was inside).
    pub at_entry: bool,
    /// Forward or departure: an AQM of the pipe or queue it left marked
    /// it ECN CE.
    pub marked: bool,
}

impl Record {
    /// A record of `kind` at `t_ns` for packet `id` (its number, and
    /// whether it is a copy), every other field empty.
    pub fn new(kind: Kind, t_ns: Nanos, id: (u64, bool)) -> Record {
        Record {
            kind,
            t_ns,
            id: id.0,
            copy: id.1,
            len: 0,
            dir: Direction::In,
            iface: None,
            bridge_to: None,
            rule: None,
            target: None,
            reason: None,
            at_entry: false,
            marked: false,
        }
    }
}

/// What goes through the data plane's channel.
pub(super) enum Msg {
    /// The wall-clock time of the data plane's t = 0 (first, always).
    Start {
        wall_ns: u64,
        /// The data plane's clock itself (the merge of several workers
        /// reads it for its window; without it, the wall clock stands in).
        clock: Option<Clock>,
    },
    Packet(Record),
    /// A record with the frame's first bytes, for a capture, and its
    /// whole length.
    Frame(Record, Vec<u8>, u32),
    /// The name of an interface, the first time a record names it.
    Iface(IfaceId, String),
    /// The `--mm-log` pipe's trace changed at engine time `at`: the trace
    /// it follows from now on and when that trace started, or none.
    Trace {
        at: Nanos,
        trace: Option<(Arc<Trace>, Nanos)>,
    },
}

/// A live packet's bytes as a capture keeps them: a bridged frame from its
/// Ethernet header, a host's packet from its IP header.
pub fn carrier_bytes(c: &Carrier) -> &[u8] {
    crate::PacketBody::wire_bytes(&c.body)
}
