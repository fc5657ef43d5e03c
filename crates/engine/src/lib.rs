//! # dummynet-engine
//!
//! FreeBSD's ipfw + dummynet as a sans-I/O state machine, on exact
//! nanosecond time.
//!
//! The layers, outermost first:
//! - [`classifier`]: the ipfw ruleset. First match wins; `pipe`/`queue`
//!   actions hand the packet to dummynet.
//! - [`dummynet`]: flowsets and their per-flow queues, scheduler instances,
//!   links (bandwidth, burst, profiles) and delay lines.
//! - [`sched`] and [`aqm`]: the pluggable policies, one file each, whose
//!   parameters and sysctl defaults are declared in [`params`]' terms.
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
pub mod config;
pub mod dummynet;
mod engine;
pub mod flow;
pub mod impair;
pub mod limits;
pub mod modify;
pub mod packet;
pub mod params;
pub mod percentile;
pub mod rng;
pub mod sched;
pub mod stats;
pub mod time;
pub mod wire;

pub use config::{Command, Settings};
pub use engine::{
    BatchError, Classified, ConfigError, ConfigErrorKind, ConfigNote, Engine, ScheduleStats, Shaped,
};
pub use flow::{FlowKey, FlowMask};
pub use packet::{Direction, IfaceId, Output, PacketInfo, Payload, Target, Verdict};
pub use stats::{DropReason, MemoryReport, Snapshot, Totals};
pub use time::Nanos;
