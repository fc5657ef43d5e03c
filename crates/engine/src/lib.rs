//! # dummynet-engine
//!
//! FreeBSD's ipfw + dummynet as a sans-I/O state machine, on exact
//! nanosecond time.
//!
//! The layers, outermost first:
//! - [`classifier`]: the ipfw ruleset. First match wins; `pipe`/`queue`
//!   actions hand the packet to dummynet.
//! - [`pipes`]: FreeBSD dummynet's objects: flowsets and their per-flow
//!   queues, scheduler instances, links (bandwidth, burst, profiles) and
//!   delay lines.
//! - [`sched`] and [`aqm`]: the pluggable policies, one file each, whose
//!   parameters and sysctl defaults are declared in [`params`]' terms;
//!   [`plugin`] answers for all of them at once. [`impair`]: netem's and
//!   mahimahi's impairments, one file each.
//! - [`command`]: what the language compiles to; [`units`]: the bounds and
//!   formats every layer shares. [`config`] gathers the configuration types
//!   of all of these in one place for callers.
//! - [`Engine`]: ties them together and keeps the event queue.
//!
//! What it is not: it does no I/O, reads no clock, spawns no thread. Callers
//! hand it packets with [`Engine::input`] and the current time, collect what
//! is due with [`Engine::poll`], and sleep until [`Engine::next_deadline`].
//! All randomness comes from one seeded [`rng::Rng`] (xoshiro256++), so a
//! seed fixes a run on every machine.
//!
//! Every packet is accounted for: delivered, dropped with a [`DropReason`],
//! or still inside ([`Totals::conserved`]).

pub mod aqm;
pub mod classifier;
pub mod command;
mod engine;
pub mod error;
pub mod flow;
pub mod impair;
pub mod limits;
pub mod modify;
pub mod packet;
pub mod params;
pub mod percentile;
pub mod pipes;
pub mod plugin;
pub mod rng;
pub mod sched;
pub mod stats;
pub mod time;
pub mod two_pass;
pub mod units;
pub mod wire;

/// Typed configuration, as callers name it: the [`command`]s with every
/// type they carry, wherever it is defined (AQMs in [`aqm`], impairments in
/// [`impair`], bounds in [`units`]). Nothing inside the engine imports it.
pub mod config {
    pub use crate::aqm::codel::CodelConfig;
    pub use crate::aqm::pie::PieConfig;
    pub use crate::aqm::red::RedConfig;
    pub use crate::aqm::AqmConfig;
    pub use crate::command::*;
    pub use crate::impair::correlated::Correlated;
    pub use crate::impair::corrupt::Corrupt;
    pub use crate::impair::dist::{DistTable, Distribution};
    pub use crate::impair::duplicate::Duplicate;
    pub use crate::impair::jitter::Jitter;
    pub use crate::impair::loss::LossModel;
    pub use crate::impair::overhead::Overhead;
    pub use crate::impair::reorder::Reorder;
    pub use crate::impair::seed::Seed;
    pub use crate::impair::slot::Slot;
    pub use crate::impair::trace::{Trace, TraceMode};
    pub use crate::units::{
        QueueLimit, DEFAULT_BUCKETS, DEFAULT_INSTANCE_LIMIT, DEFAULT_QUEUE_SLOTS, DEFAULT_RULE,
        DN_MAX_ID, MAX_BUCKETS, MAX_LMAX, MAX_NUMBER, MAX_PRI, MAX_QUEUE_BYTES, MAX_QUEUE_SLOTS,
        MAX_WEIGHT,
    };
}

pub use command::{Command, SettingError, Settings};
pub use engine::{Classified, ConfigNote, Engine, ScheduleStats, Shaped};
pub use error::{BatchError, ConfigError, ConfigErrorKind};
pub use flow::{FlowKey, FlowMask};
pub use packet::{Direction, DropReason, IfaceId, Output, PacketInfo, Payload, Target, Verdict};
pub use stats::{MemoryReport, Snapshot, Totals};
pub use time::Nanos;
