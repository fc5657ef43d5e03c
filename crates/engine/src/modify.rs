//! `pipe|queue|sched N modify`: a configuration changed only in the option
//! groups a command names ([`Fields`]), everything else kept.
//!
//! `config` keeps FreeBSD's meaning (options left out go back to their
//! defaults); `modify` is this engine's addition for links that change over
//! time (a bandwidth step, a loss burst, a handover), alone or in a
//! [`crate::command::Schedule`].

use crate::command::{Field, Fields, FlowsetConfig, LinkConfig, SchedConfig};
use crate::impair::{staged, Stage, REGISTRY};

/// `cur` with the link options `f` names taken from `new`.
pub fn link(cur: &LinkConfig, new: &LinkConfig, f: Fields) -> LinkConfig {
    let mut out = cur.clone();
    if f.contains(Field::Bw) {
        out.bw = new.bw;
    }
    if f.contains(Field::Delay) {
        out.delay = new.delay;
    }
    if f.contains(Field::Burst) {
        out.burst = new.burst;
    }
    if f.contains(Field::Profile) {
        out.profile = new.profile.clone();
    }
    if f.contains(Field::Jitter) {
        out.jitter = new.jitter.clone();
    }
    if f.contains(Field::Reorder) {
        out.reorder = new.reorder;
    }
    if f.contains(Field::Overhead) {
        out.overhead = new.overhead;
    }
    if f.contains(Field::Slot) {
        out.slot = new.slot;
    }
    if f.contains(Field::Trace) {
        out.trace = new.trace.clone();
    }
    if f.contains(Field::Seed) {
        out.seed = new.seed;
    }
    out.staged = staged::merge(&cur.staged, &new.staged, |i| f.contains_staged(i));
    // `bw` and `trace` exclude each other: setting one clears the other.
    if f.contains(Field::Bw) && new.bw > 0 && !f.contains(Field::Trace) {
        out.trace = None;
    }
    if f.contains(Field::Trace) && new.trace.is_some() && !f.contains(Field::Bw) {
        out.bw = 0;
    }
    out
}

/// Whether `f` names any link option.
pub fn touches_link(f: Fields) -> bool {
    use Field::*;
    [
        Bw, Delay, Burst, Profile, Jitter, Reorder, Overhead, Slot, Trace, Seed,
    ]
    .into_iter()
    .any(|x| f.contains(x))
        || (0..REGISTRY.len()).any(|i| f.contains_staged(i) && REGISTRY[i].stage != Stage::Entry)
}

/// `cur` with the queue options `f` names taken from `new`.
pub fn flowset(cur: &FlowsetConfig, new: &FlowsetConfig, f: Fields) -> FlowsetConfig {
    let mut out = cur.clone();
    if f.contains(Field::Limit) {
        out.limit = new.limit;
    }
    if f.contains(Field::Plr) {
        out.plr = new.plr;
    }
    if f.contains(Field::Loss) {
        out.loss = new.loss;
    }
    if f.contains(Field::Duplicate) {
        out.duplicate = new.duplicate;
    }
    if f.contains(Field::Corrupt) {
        out.corrupt = new.corrupt;
    }
    out.staged = staged::merge(&cur.staged, &new.staged, |i| f.contains_staged(i));
    if f.contains(Field::Mask) {
        out.mask = new.mask;
    }
    if f.contains(Field::Buckets) {
        out.buckets = new.buckets;
    }
    if f.contains(Field::Weight) {
        out.weight = new.weight;
    }
    if f.contains(Field::Lmax) {
        out.lmax = new.lmax;
    }
    if f.contains(Field::Pri) {
        out.pri = new.pri;
    }
    if f.contains(Field::Aqm) {
        out.aqm = new.aqm.clone();
    }
    if f.contains(Field::Noerror) {
        out.noerror = new.noerror;
    }
    out
}

/// A scheduler's parameters after a `modify`: those given replace the ones
/// of the same name; with a new type, only the given ones count (another
/// type's parameters mean nothing to it).
pub fn sched_params(
    cur: &[(String, u64)],
    new: &SchedConfig,
    f: Fields,
    type_changed: bool,
) -> Vec<(String, u64)> {
    if type_changed {
        return new.params.clone();
    }
    let mut out = cur.to_vec();
    if f.contains(Field::Params) {
        for (k, v) in &new.params {
            match out.iter_mut().find(|(name, _)| name == k) {
                Some(slot) => slot.1 = *v,
                None => out.push((k.clone(), *v)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Probability;

    #[test]
    fn only_named_groups_change() {
        let cur = LinkConfig {
            bw: 10_000_000,
            delay: 5,
            burst: 3,
            ..Default::default()
        };
        let new = LinkConfig {
            bw: 1_000_000,
            delay: 99,
            ..Default::default()
        };
        let out = link(&cur, &new, [Field::Bw].into_iter().collect());
        assert_eq!((out.bw, out.delay, out.burst), (1_000_000, 5, 3));
        let fs = FlowsetConfig {
            weight: 7,
            ..Default::default()
        };
        let new = FlowsetConfig {
            plr: Probability::ONE,
            ..Default::default()
        };
        let out = flowset(&fs, &new, [Field::Plr].into_iter().collect());
        assert_eq!((out.weight, out.plr), (7, Probability::ONE));
    }

    #[test]
    fn params_merge_by_name() {
        let cur = vec![("quantum".to_string(), 1514), ("limit".to_string(), 10240)];
        let new = SchedConfig {
            params: vec![("limit".to_string(), 500)],
            ..Default::default()
        };
        let f = [Field::Params].into_iter().collect();
        assert_eq!(
            sched_params(&cur, &new, f, false),
            vec![("quantum".to_string(), 1514), ("limit".to_string(), 500)]
        );
    }
}
