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
//!
//! Every impairment file holds its configuration type (what the language
//! parses into), its `validate` (ranges the engine checks before applying),
//! its `display` (its words on the pipe's `show` line) and its per-queue or
//! per-instance state. Random draws come from the stream of the queue or
//! instance they act on ([`crate::rng::Rng::stream`]), so configuring one
//! pipe never changes another pipe's draws. Correlated draws follow netem's
//! definition ([`correlated`]).

pub mod correlated;
pub mod corrupt;
pub mod dist;
pub mod duplicate;
pub mod jitter;
pub mod loss;
pub mod overhead;
pub mod reorder;
pub mod slot;
pub mod trace;
