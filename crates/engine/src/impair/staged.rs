//! Registered impairments: an impairment declared as one table entry (its
//! option word, its stage, its parameters in [`crate::params`]' terms) that
//! the language parses, `modify` merges, `show` prints and the data path
//! runs with no code of their own. Adding one is its file and a line in
//! [`super::REGISTRY`]; the manual's plug-in chapter walks through it.

use std::sync::Arc;

use super::{Impairment, On, Stage};
use crate::params::{ParamError, ParamKind, ParamSpec, Params};
use crate::rng::Rng;
use crate::time::Nanos;

/// A registered impairment: how it is written and what it makes.
pub struct ImpairType {
    /// The option word (`drop-every`).
    pub name: &'static str,
    /// [`Stage::Entry`] (set on a pipe or queue, per queue) or
    /// [`Stage::DelayLine`] (set on a pipe or sched, per instance).
    pub stage: Stage,
    /// One line for the reference pages.
    pub summary: &'static str,
    /// Values written in this order right after the word, each required.
    pub positional: &'static [ParamSpec],
    /// Keyword parameters after them.
    pub params: &'static [ParamSpec],
    /// Its model from the parameters (positional ones under their names),
    /// or why not: where its bounds are checked.
    pub build: fn(&Params) -> Result<Arc<dyn StageModel>, ParamError>,
}

impl std::fmt::Debug for ImpairType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A registered impairment as configured: what every object holding it shares.
pub trait StageModel: std::fmt::Debug + Send + Sync {
    /// How it goes with the rest of what it is on (its own bounds are `build`'s).
    fn check(&self, _on: On<'_>) -> Result<(), ParamError> {
        Ok(())
    }
    /// Fresh state for one queue (entry) or one scheduler instance (delay line).
    fn new_state(&self) -> Box<dyn StageState>;
}

/// A registered impairment's state on one queue or instance: one hook per stage.
pub trait StageState: std::fmt::Debug + Send {
    /// Entry: whether the packet of `len` bytes arriving at `now` is lost.
    fn lost(&mut self, _now: Nanos, _len: u32, _rng: &mut Rng) -> bool {
        false
    }
    /// Delay line: how much longer than its delay (and jitter) the packet
    /// that leaves the link at `exit` waits. The line keeps its order.
    fn extra_delay(&mut self, _exit: Nanos, _len: u32, _rng: &mut Rng) -> Nanos {
        0
    }
}

/// A registered impairment with its parameters, on a link or a flowset.
#[derive(Debug, Clone)]
pub struct Staged {
    pub kind: &'static ImpairType,
    /// As written: positional values under their names, then keywords.
    pub params: Vec<(String, u64)>,
    model: Arc<dyn StageModel>,
}

impl Staged {
    /// `kind` with `params`, or why `kind` refuses them.
    pub fn new(kind: &'static ImpairType, params: Vec<(String, u64)>) -> Result<Self, ParamError> {
        let model = (kind.build)(&params)?;
        Ok(Staged {
            kind,
            params,
            model,
        })
    }
}

impl PartialEq for Staged {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.kind, other.kind) && self.params == other.params
    }
}

impl Impairment for Staged {
    fn name(&self) -> &'static str {
        self.kind.name
    }

    fn stage(&self) -> Stage {
        self.kind.stage
    }

    fn check(&self, on: On<'_>) -> Result<(), ParamError> {
        let fits = match on {
            On::Queue => self.kind.stage == Stage::Entry,
            On::Link(_) => self.kind.stage != Stage::Entry,
        };
        if !fits {
            let (what, set) = match self.kind.stage {
                Stage::Entry => ("a queue's", "pipe or queue"),
                _ => ("a link's", "pipe or sched"),
            };
            return Err(format!(
                "`{}` is {what} impairment: set it on a {set}",
                self.kind.name
            )
            .into());
        }
        self.model.check(on)
    }

    fn display(&self) -> String {
        let value = |spec: &ParamSpec| crate::params::get(&self.params, spec.name);
        let mut words = vec![self.kind.name.to_string()];
        for spec in self.kind.positional {
            if let Some(v) = value(spec) {
                words.push(spec.show(v));
            }
        }
        for spec in self.kind.params {
            match (value(spec), spec.kind) {
                (None, _) => {}
                (Some(0), ParamKind::Flag { off }) => words.push(off.to_string()),
                (Some(_), ParamKind::Flag { .. }) => words.push(spec.name.to_string()),
                (Some(v), _) => words.extend([spec.name.to_string(), spec.show(v)]),
            }
        }
        words.join(" ")
    }
}

/// Where `kind` is in [`super::REGISTRY`]: the bit `modify` names it by.
pub fn index(kind: &ImpairType) -> usize {
    super::REGISTRY
        .iter()
        .position(|k| std::ptr::eq(*k, kind))
        .unwrap_or(usize::MAX)
}

/// Puts `s` in `list` in place of any of its kind, in the registry's order.
pub fn put(list: &mut Vec<Staged>, s: Staged) {
    remove(list, s.kind);
    let at = list.partition_point(|x| index(x.kind) < index(s.kind));
    list.insert(at, s);
}

/// Takes `kind` out of `list`.
pub fn remove(list: &mut Vec<Staged>, kind: &ImpairType) {
    list.retain(|x| !std::ptr::eq(x.kind, kind));
}

/// `cur` with the kinds `named` (by [`index`]) taken from `new`: set there,
/// or taken off. The others keep their models, so their state goes on.
pub fn merge(cur: &[Staged], new: &[Staged], named: impl Fn(usize) -> bool) -> Vec<Staged> {
    let mut out: Vec<Staged> = cur
        .iter()
        .filter(|s| !named(index(s.kind)))
        .cloned()
        .collect();
    for s in new.iter().filter(|s| named(index(s.kind))) {
        put(&mut out, s.clone());
    }
    out
}

/// The models of a link's or flowset's registered impairments, as the data
/// path holds them; `None` when there are none.
pub type Models = Arc<[Arc<dyn StageModel>]>;

/// The [`Models`] of `list`.
pub fn models(list: &[Staged]) -> Option<Models> {
    (!list.is_empty()).then(|| list.iter().map(|s| Arc::clone(&s.model)).collect())
}

/// The state of a queue's or instance's registered impairments, remade for a
/// model it has not seen (one named again by `modify`, or new).
#[derive(Debug, Default)]
pub struct States {
    of: Vec<Arc<dyn StageModel>>,
    states: Vec<Box<dyn StageState>>,
}

impl States {
    /// The state of a queue's entry impairments in `list`, keeping what
    /// `prev` had for the models `list` still holds; `None` for none (a
    /// queue without them carries one pointer).
    pub fn entry(prev: Option<Box<States>>, list: &[Staged]) -> Option<Box<States>> {
        if list.is_empty() {
            return None;
        }
        let models: Vec<_> = list.iter().map(|s| Arc::clone(&s.model)).collect();
        let mut states = prev.unwrap_or_default();
        states.sync(&models);
        Some(states)
    }

    fn sync(&mut self, models: &[Arc<dyn StageModel>]) {
        let same = self.of.len() == models.len()
            && self
                .of
                .iter()
                .zip(models.iter())
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if same {
            return;
        }
        // A model kept across the change keeps its state.
        let mut old: Vec<_> = self.of.drain(..).zip(self.states.drain(..)).collect();
        for m in models.iter() {
            let state = match old.iter().position(|(o, _)| Arc::ptr_eq(o, m)) {
                Some(i) => old.swap_remove(i).1,
                None => m.new_state(),
            };
            self.of.push(Arc::clone(m));
            self.states.push(state);
        }
    }

    /// Entry: whether one of `models` loses the packet (the first that does
    /// takes it; those after it do not see it).
    #[inline]
    pub fn lost(&mut self, now: Nanos, len: u32, rng: &mut Rng) -> bool {
        self.states.iter_mut().any(|s| s.lost(now, len, rng))
    }

    /// Delay line: the extra wait `models` give the packet leaving at `exit`.
    #[inline]
    pub fn extra_delay(&mut self, models: &Models, exit: Nanos, len: u32, rng: &mut Rng) -> Nanos {
        self.sync(models);
        self.states.iter_mut().fold(0, |d: Nanos, s| {
            d.saturating_add(s.extra_delay(exit, len, rng))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impair::REGISTRY;

    #[test]
    fn every_registered_impairment_is_well_formed() {
        let mut names = std::collections::HashSet::new();
        for k in REGISTRY {
            assert!(names.insert(k.name), "{} registered twice", k.name);
            assert_ne!(
                k.stage,
                Stage::Link,
                "{}: no hook runs at the link stage",
                k.name
            );
            assert!(!k.summary.is_empty(), "{} has no summary", k.name);
            assert!(
                k.name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{}: an option word is lower case",
                k.name
            );
        }
    }

    #[test]
    fn merge_keeps_what_is_not_named_and_its_model() {
        let [a, b, ..] = REGISTRY else {
            panic!("two registered impairments expected");
        };
        // Each kind with its first value `v` (a time in ms) and any other
        // value it needs ten times larger: valid for both kinds registered.
        let first = |k: &'static ImpairType, v: u64| {
            let scale = |s: &ParamSpec| match s.kind {
                ParamKind::Time => crate::time::NS_PER_MS,
                _ => 1,
            };
            let p = k
                .positional
                .iter()
                .map(|s| (s.name.to_string(), v * scale(s)));
            let every = k.params.iter().filter(|s| s.name == "every");
            let p = p.chain(every.map(|s| (s.name.to_string(), 10 * v * scale(s))));
            Staged::new(k, p.collect()).unwrap()
        };
        let cur = vec![first(a, 3), first(b, 4)];
        let new = vec![first(b, 5)];
        let out = merge(&cur, &new, |i| i == index(b));
        assert_eq!(out, vec![first(a, 3), first(b, 5)]);
        assert!(
            Arc::ptr_eq(&out[0].model, &cur[0].model),
            "an untouched one keeps its model"
        );
        let out = merge(&cur, &[], |i| i == index(a));
        assert_eq!(out, vec![first(b, 4)], "named and absent: taken off");
    }
}
