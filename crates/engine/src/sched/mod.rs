//! Packet schedulers: the policy that picks which queue a link serves next.
//!
//! This is FreeBSD's `dn_alg` table in Rust. Packets always live in the
//! engine's per-flow queues; a scheduler instance only keeps its own per-queue
//! state (weights, virtual times, deficits) and, when asked, pops the head of
//! the queue it chooses through [`QueueOps`]. Adding a scheduler is one file
//! implementing [`SchedInstance`] plus one line in [`REGISTRY`].

pub mod fifo;
pub mod fq_codel;
pub mod fq_pie;
mod prio;
mod qfq;
mod rr;
#[cfg(test)]
mod testkit;
mod wf2q;
pub mod workload;

pub use fifo::Fifo;

use std::ops::RangeInclusive;
use std::sync::Arc;

use crate::aqm::AqmModel;
use crate::flow::FlowKey;
use crate::params::OutOfRange;
use crate::units::QueueLimit;
use crate::units::MAX_WEIGHT;

/// An engine-wide handle to a flow queue.
pub type QueueId = u32;

/// A scheduler-local handle, returned by [`SchedInstance::add_queue`].
pub type Slot = u32;

/// The scheduler's window on the queues it serves.
pub trait QueueOps {
    /// Length in bytes of the packet at the head of `q`.
    fn head_len(&self, q: QueueId) -> Option<u32>;
    /// Removes the head packet of `q` for transmission and returns its length.
    /// Queue management may drop packets on the way (CoDel drops at dequeue),
    /// so this returns `None` if `q` had nothing left to send.
    fn pop(&mut self, q: QueueId) -> Option<u32>;
}

/// One scheduler instance (one per masked flow id of the scheduler's mask).
pub trait SchedInstance: Send {
    /// A queue of weight `weight` joins this instance (it is still empty).
    fn add_queue(&mut self, q: QueueId, weight: u32) -> Slot;
    /// As [`Self::add_queue`], with the flowset's `lmax` (bytes: the largest
    /// packet the queue expects; 0 when not set). FreeBSD's RR and QFQ read
    /// it per flowset (`fs.par[1]`); the other types ignore it, as here.
    fn add_queue_with_lmax(&mut self, q: QueueId, weight: u32, _lmax: u32) -> Slot {
        self.add_queue(q, weight)
    }
    /// The queue at `slot` leaves; it is empty when this is called.
    fn remove_queue(&mut self, slot: Slot);
    /// The flowset's weight changed.
    fn set_weight(&mut self, slot: Slot, weight: u32);
    /// A packet of `len` bytes was appended to the queue at `slot`;
    /// `was_empty` tells whether the queue was empty before.
    fn enqueue(&mut self, slot: Slot, len: u32, was_empty: bool);
    /// Picks a queue and pops its head packet with `ops.pop`; returns the queue
    /// served, or `None` if nothing is backlogged.
    fn dequeue(&mut self, ops: &mut dyn QueueOps) -> Option<QueueId>;
    /// The queue at `slot` is out of every list the policy serves, so its
    /// next packet brings it back as a new flow (fq_codel, fq_pie); the
    /// engine then restarts the queue's AQM ([`crate::aqm::AqmState::restart`]).
    /// Asked only when the queue is empty. Policies without such lists keep
    /// the default, false.
    fn is_idle(&self, _slot: Slot) -> bool {
        false
    }
}

use crate::params::Tunable;
pub use crate::params::{ParamError, ParamKind, ParamSpec, Params};

/// Validates a type's parameters and builds an instance.
pub type NewInstance = fn(&Params) -> Result<Box<dyn SchedInstance>, ParamError>;

/// A scheduler type, as registered.
pub struct SchedType {
    /// Name in `type NAME` (lower case).
    pub name: &'static str,
    /// Other accepted spellings.
    pub aliases: &'static [&'static str],
    /// Name shown by `sched show` (FreeBSD's upper-case form).
    pub display: &'static str,
    /// Parameters it accepts after `type NAME`, and how each is written.
    pub params: &'static [ParamSpec],
    /// The sysctls that fill parameters a command leaves out (filled by the
    /// engine when the scheduler is configured, as FreeBSD's kernel does).
    pub tunables: &'static [Tunable],
    /// Validates parameters and builds an instance.
    pub new_instance: NewInstance,
    /// A packet that finds an instance of this type with nothing queued may
    /// go straight to the link without passing through `enqueue`/`dequeue`,
    /// because the policy would return it at once and keeps no state about
    /// it (true of FIFO; not of WF2Q+, whose virtual time must see it).
    pub idle_bypass: bool,
    /// Bytes of state an instance keeps per queue, idle or not (for the
    /// memory-per-flow figure that `expire` keeps in check).
    pub queue_state_bytes: usize,
    /// Flow queueing (fq_codel, fq_pie): the type, not the flowset, decides
    /// how packets are split into queues and how those queues are managed.
    /// `None` for every other type.
    pub sub_queues: Option<fn(&Params) -> SubQueues>,
    /// The parameter line `sched show` prints under the scheduler, in
    /// FreeBSD's format; `None` prints the parameters as `name value`.
    pub describe: Option<fn(&Params) -> String>,
    /// Its flowsets' weights are priorities, and 0 (served first) is one
    /// of them (prio); every other type takes a weight of 1 or more.
    pub weight_is_priority: bool,
    /// The `lmax` a flowset may give one of its queues (bytes), for the
    /// types that read it; `None`: the type ignores it.
    pub lmax: Option<RangeInclusive<u32>>,
}

impl SchedType {
    /// Whether a flowset's `weight` and `lmax` (0: not set) suit this type,
    /// and why not. FreeBSD rewrites such values silently; this engine
    /// refuses them.
    pub fn fits(&self, weight: u32, lmax: u32) -> Result<(), ParamError> {
        if weight == 0 && !self.weight_is_priority {
            return Err(format!(
                "weight 0 is a priority, only for queues of a prio scheduler (other types \
                 take 1..{MAX_WEIGHT})"
            )
            .into());
        }
        match &self.lmax {
            Some(r) if lmax != 0 && !r.contains(&lmax) => {
                Err(OutOfRange::new("lmax", lmax, r.start(), r.end())
                    .unit("bytes")
                    .for_type(self.display)
                    .into())
            }
            _ => Ok(()),
        }
    }
}

/// How a flow-queueing type wants its queues made, as FreeBSD's fq_codel and
/// fq_pie do inside their instances: the engine hashes each packet's 5-tuple
/// into one of `buckets` queues (in place of the flowset's mask), gives every
/// such queue its own state of `aqm` (in place of the flowset's AQM), and
/// holds at most `limit` packets across the instance's queues (in place of
/// the flowset's per-queue limit); on overflow it drops the head packet of
/// the longest queue. The scheduler itself only orders the queues.
#[derive(Debug, Clone)]
pub struct SubQueues {
    /// Number of hash buckets (`flows`), at least 1.
    pub buckets: u32,
    /// Packets held across all buckets of one instance (`limit`).
    pub limit: u32,
    /// Queue management of each bucket, checked by the type's own bounds
    /// (fq_codel's `interval` goes to 100 s, plain CoDel's to 5 s).
    pub aqm: Arc<dyn AqmModel>,
    /// The queue limit that AQM is told about (PIE sizes its `onoff`
    /// threshold from it).
    pub aqm_limit: QueueLimit,
}

/// The bucket of `key` among `buckets`: a fixed mix of protocol, addresses
/// and ports, so a run can be replayed (FreeBSD seeds its Jenkins hash with a
/// random perturbation per instance; this one has none).
pub fn bucket_of(key: &FlowKey, buckets: u32) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = u64::from(key.proto);
    for w in [
        key.src as u64,
        (key.src >> 64) as u64,
        key.dst as u64,
        (key.dst >> 64) as u64,
        u64::from(key.sport) << 16 | u64::from(key.dport),
    ] {
        h = (h ^ w).wrapping_mul(K);
        h ^= h >> 29;
    }
    h = h.wrapping_mul(K);
    h ^= h >> 32;
    // Multiply-shift maps the hash onto 0..buckets without a division.
    ((u128::from(h) * u128::from(buckets.max(1))) >> 64) as u32
}

/// Every scheduler type, one line each.
pub static REGISTRY: &[&SchedType] = &[
    &fifo::TYPE,
    &wf2q::TYPE,
    &rr::TYPE,
    &qfq::TYPE,
    &prio::TYPE,
    &fq_codel::TYPE,
    &fq_pie::TYPE,
];

/// The scheduler a new `sched N` or `pipe N` gets: WF2Q+ as in FreeBSD, once registered.
pub const DEFAULT_TYPE: &str = "wf2q+";

/// Looks a type up by name or alias, case-insensitively.
pub fn lookup(name: &str) -> Option<&'static SchedType> {
    REGISTRY.iter().copied().find(|t| {
        t.name.eq_ignore_ascii_case(name) || t.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// All names and aliases, for error messages and suggestions.
pub fn names() -> Vec<&'static str> {
    REGISTRY
        .iter()
        .flat_map(|t| std::iter::once(t.name).chain(t.aliases.iter().copied()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamError;

    #[test]
    fn each_type_says_which_weights_and_lmax_its_queues_take() {
        let t = |n| lookup(n).unwrap();
        let words = |r: Result<(), ParamError>| r.unwrap_err().to_string();
        assert_eq!(t("prio").fits(0, 0), Ok(()));
        for n in ["fifo", "wf2q+", "rr", "qfq", "fq_codel", "fq_pie"] {
            assert_eq!(
                words(t(n).fits(0, 0)),
                "weight 0 is a priority, only for queues of a prio scheduler (other types \
                 take 1..100)",
                "{n}"
            );
        }
        assert_eq!(t("rr").fits(1, 64), Ok(()));
        assert_eq!(t("rr").fits(1, 2048), Ok(()));
        assert_eq!(
            words(t("rr").fits(1, 63)),
            "lmax 63 is out of range 64..2048 bytes for RR"
        );
        assert_eq!(t("qfq").fits(1, 2000), Ok(()));
        assert_eq!(
            words(t("qfq").fits(1, 2001)),
            "lmax 2001 is out of range 1..2000 bytes for QFQ"
        );
        // The other types ignore lmax, whatever it is.
        assert_eq!(t("wf2q+").fits(1, 65535), Ok(()));
        assert_eq!(t("prio").fits(0, 65535), Ok(()));
    }

    #[test]
    fn a_value_out_of_range_is_told_as_fields() {
        let Err(ParamError::OutOfRange(r)) = lookup("rr").unwrap().fits(1, 63) else {
            panic!("not an OutOfRange");
        };
        assert_eq!(
            (
                r.name.as_str(),
                r.value.as_str(),
                r.min.as_str(),
                r.max.as_str()
            ),
            ("lmax", "63", "64", "2048")
        );
        assert_eq!((r.unit, r.for_type), ("bytes", Some("RR")));
        let quantum = [("quantum".to_string(), 9)];
        let Err(ParamError::OutOfRange(r)) = (lookup("rr").unwrap().new_instance)(&quantum) else {
            panic!("not an OutOfRange");
        };
        assert_eq!(
            (r.owner.as_str(), r.name.as_str(), r.value.as_str()),
            ("rr", "quantum", "9")
        );
        assert_eq!(
            r.to_string(),
            "rr quantum 9 is out of range 64..=2048 bytes"
        );
    }
}
