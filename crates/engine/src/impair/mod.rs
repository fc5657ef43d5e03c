//! Impairments: what netem and mahimahi do to a link, on a dummynet pipe.
//!
//! FreeBSD's dummynet models a link as a queue, a serializer at `bw` and a
//! delay line. The impairments here add what Linux's `tc netem` and
//! mahimahi's link shells add, each at the stage of the path where it acts:
//!
//! | stage | impairment | file | per |
//! |---|---|---|---|
//! | entry (with `plr`) | `loss` random / gemodel / state | [`loss`] | queue |
//! | entry | `duplicate` | [`duplicate`] | queue |
//! | entry | `corrupt` | [`corrupt`] | queue |
//! | link | `overhead` / `cellsize` | [`overhead`] | pipe |
//! | link | `slot` | [`slot`] | instance |
//! | link | `trace` (replaces `bw`) | [`trace`] | instance |
//! | delay line | `jitter` (with [`dist`] tables) | [`jitter`] | instance |
//! | delay line | `reorder` | [`reorder`] | instance |
//! | every stage's draws | `seed` | [`seed`] | pipe |
//! | entry | `drop-every` (registered) | [`drop_every`] | queue |
//! | delay line | `stall` (registered) | [`stall`] | instance |
//!
//! Every impairment is one file holding its configuration type (what the
//! language parses into), which implements [`Impairment`] (its checks and
//! its words on `show`'s `impair:` line), and its per-queue or per-instance
//! state. `LinkConfig::impairments` and `FlowsetConfig::impairments`
//! list the impairments of each stage, one line each; the engine checks and
//! `show` prints through them alone. What an impairment does to a packet is
//! called where its stage runs, in the pipes' data path.
//!
//! The netem and mahimahi impairments above keep their own grammar and
//! fields. A new impairment is *registered* instead ([`REGISTRY`],
//! [`staged`]): a table entry the language, `modify`, `show` and the data
//! path all read, so it takes its own file and one line here.
//!
//! Random draws come from the stream of the queue or instance they act on
//! ([`crate::rng::Rng::stream`]), so configuring one pipe never changes
//! another pipe's draws; a pipe with a `seed` names its streams from it. Correlated draws follow netem's definition
//! ([`correlated`]).

pub mod correlated;
pub mod corrupt;
pub mod dist;
pub mod drop_every;
pub mod duplicate;
pub mod jitter;
pub mod loss;
pub mod overhead;
pub mod reorder;
pub mod seed;
pub mod slot;
pub mod staged;
pub mod stall;
pub mod trace;

use crate::params::ParamError;
use crate::time::Nanos;
pub use staged::{ImpairType, Staged};

/// The registered impairments ([`staged`]): a new one is its file and a line here.
pub static REGISTRY: &[&ImpairType] = &[&drop_every::TYPE, &stall::TYPE];

/// The registered impairment named `name` (case-insensitively).
pub fn lookup(name: &str) -> Option<&'static ImpairType> {
    REGISTRY
        .iter()
        .copied()
        .find(|k| k.name.eq_ignore_ascii_case(name))
}

/// Where on a packet's path an impairment acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// As the packet enters its queue, after `plr` (per queue).
    Entry,
    /// On the link: what it bills and when it may send (per pipe or instance).
    Link,
    /// On the delay line after the link (per instance).
    DelayLine,
}

/// What an impairment is configured on, for the checks that involve the
/// rest of it (`reorder` needs a delay; `trace` excludes `bw`).
#[derive(Debug, Clone, Copy)]
pub enum On<'a> {
    /// A pipe's link (`LinkConfig`).
    Link(&'a dyn LinkShape),
    /// A pipe's or queue's flowset.
    Queue,
}

/// The rest of a link, as an impairment's checks see it.
pub trait LinkShape: std::fmt::Debug {
    /// `bw`, bit/s (0: unlimited).
    fn bw(&self) -> u64;
    fn delay(&self) -> Nanos;
    /// `burst`, bytes.
    fn burst(&self) -> u64;
    fn has_profile(&self) -> bool;
    fn has_slot(&self) -> bool;
}

/// An impairment's configuration, whatever its stage.
pub trait Impairment: std::fmt::Debug {
    /// The option word that sets it (`jitter`, `loss`).
    fn name(&self) -> &'static str;
    fn stage(&self) -> Stage;
    /// Its bounds, and how it goes with what it is configured on. The engine
    /// refuses a command whose impairments say no, before anything changes.
    fn check(&self, _on: On<'_>) -> Result<(), ParamError> {
        Ok(())
    }
    /// Its words on the `impair:` line under its pipe or queue in `show`,
    /// which read back as the same option.
    fn display(&self) -> String;
}
