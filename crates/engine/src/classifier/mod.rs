//! The ipfw ruleset: numbered rules, first match wins.
//!
//! Rules are kept sorted by number; rules sharing a number stay in insertion
//! order, as in FreeBSD. The default rule 65535 is always last and cannot be
//! removed; its action follows the `default_to_accept` setting.
//!
//! A rule body is compiled once, when the rule is added, into conditions that
//! compare integers only: addresses become (network, mask) pairs, interface
//! names become interned ids.

mod cond;

use crate::config::{Action, RuleSpec, DEFAULT_RULE};
use crate::packet::PacketInfo;
use crate::rng::{Probability, Rng};
use crate::time::Nanos;

use crate::packet::IfaceId;
pub(crate) use cond::{compile, Compiled, Interfaces, Tri};

/// What the ruleset decided for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Deny,
    Pipe(u32),
    Queue(u32),
}

/// Where a packet's first pass through the ruleset may end, as far as the
/// rules alone tell ([`Ruleset::reach_in`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Reach {
    /// Some packet may leave passed, without a pipe or queue.
    pub pass: bool,
    /// Some packet may enter a pipe or queue.
    pub shaped: bool,
}

/// The rule that decided, so a packet leaving dummynet can re-enter after it
/// (`one_pass` = 0) even if rules were added or deleted meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RuleRef {
    pub id: u32,
    pub number: u16,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RuleCounters {
    pub packets: u64,
    pub bytes: u64,
    pub last_match: Option<Nanos>,
}

#[derive(Debug)]
pub(crate) struct Rule {
    /// Unique for the engine's lifetime; never reused.
    pub id: u32,
    pub number: u16,
    pub spec: RuleSpec,
    pub body: Compiled,
    pub counters: RuleCounters,
}

#[derive(Debug)]
pub(crate) struct Ruleset {
    /// Sorted by number; the last element is the default rule.
    rules: Vec<Rule>,
    next_id: u32,
}

/// FreeBSD's autoincrement step for rules added without a number.
const AUTOINC_STEP: u32 = 100;

impl Ruleset {
    pub fn new() -> Self {
        let default = Rule {
            id: 0,
            number: DEFAULT_RULE,
            spec: RuleSpec {
                number: Some(DEFAULT_RULE),
                action: Action::Deny,
                prob: None,
                body: Vec::new(),
            },
            body: Compiled::default(),
            counters: RuleCounters::default(),
        };
        Ruleset {
            rules: vec![default],
            next_id: 1,
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rules_mut(&mut self) -> &mut [Rule] {
        &mut self.rules
    }

    /// The number a rule added without one gets, as FreeBSD numbers it:
    /// the highest non-default rule's plus 100 (`autoinc_step`) while that
    /// stays below the default rule, else the highest's own (so after rule
    /// 65534, 65534 again; rules sharing a number keep their order).
    pub fn next_auto_number(&self) -> u16 {
        let last = self
            .rules
            .iter()
            .rev()
            .find(|r| r.number != DEFAULT_RULE)
            .map_or(0, |r| r.number);
        if u32::from(last) + AUTOINC_STEP < u32::from(DEFAULT_RULE) {
            last + AUTOINC_STEP as u16
        } else {
            last
        }
    }

    /// Inserts after every rule with the same or a lower number.
    pub fn insert(&mut self, number: u16, spec: RuleSpec, body: Compiled) {
        let at = self
            .rules
            .partition_point(|r| r.number <= number && r.number != DEFAULT_RULE);
        let id = self.next_id;
        self.next_id += 1;
        self.rules.insert(
            at,
            Rule {
                id,
                number,
                spec,
                body,
                counters: RuleCounters::default(),
            },
        );
    }

    pub fn contains(&self, number: u16) -> bool {
        self.rules.iter().any(|r| r.number == number)
    }

    pub fn delete(&mut self, number: u16) {
        self.rules
            .retain(|r| r.number != number || number == DEFAULT_RULE);
    }

    pub fn flush(&mut self) {
        self.rules.retain(|r| r.number == DEFAULT_RULE);
    }

    pub fn zero(&mut self, number: Option<u16>) {
        for r in &mut self.rules {
            if number.is_none_or(|n| n == r.number) {
                r.counters = RuleCounters::default();
            }
        }
    }

    /// Index of the rule a packet leaving dummynet re-enters at: the one after
    /// the rule that sent it, or, if that rule is gone, the first rule numbered
    /// above it.
    pub fn resume_after(&self, from: RuleRef) -> usize {
        let first = self.rules.partition_point(|r| r.number < from.number);
        self.rules[first..]
            .iter()
            .take_while(|r| r.number == from.number)
            .position(|r| r.id == from.id)
            .map_or_else(
                || self.rules.partition_point(|r| r.number <= from.number),
                |p| first + p + 1,
            )
            .min(self.rules.len() - 1)
    }

    /// What the first pass may do with packets coming `in` on `recv_if`
    /// (before they have a transmit interface: a bridge's `in` pass, a
    /// host's incoming packets), judged from the rules without a packet: a
    /// rule whose tests are all about the direction and the interfaces
    /// matches all of them or none ([`Compiled::decides_in`]); any other
    /// rule, or one with `prob`, may match some. Errs towards `pass`: a
    /// `skipto` that may or may not be taken counts as one.
    pub fn reach_in(&self, recv_if: IfaceId, default_to_accept: bool) -> Reach {
        let mut reach = Reach::default();
        let mut i = 0;
        while let Some(rule) = self.rules.get(i) {
            let m = match rule.body.decides_in(recv_if) {
                Tri::Always if rule.spec.prob.is_some() => Tri::Maybe,
                m => m,
            };
            i += 1;
            if m == Tri::Never {
                continue;
            }
            let always = m == Tri::Always;
            match rule.spec.action {
                _ if rule.number == DEFAULT_RULE => {
                    reach.pass |= default_to_accept;
                    break;
                }
                Action::Allow => reach.pass = true,
                Action::Deny => {}
                Action::Pipe(_) | Action::Queue(_) => reach.shaped = true,
                Action::Count => continue,
                Action::Skipto(n) if always => {
                    i = self.rules.partition_point(|r| r.number < n).max(i);
                    continue;
                }
                Action::Skipto(_) => reach.pass = true,
            }
            if always {
                break;
            }
        }
        reach
    }

    /// Whether a packet may reach the default rule: no rule before it
    /// matches every packet (no test, no `prob`) and ends its walk
    /// (`allow`, `deny`, and with `one_pass` a pipe or queue).
    pub fn default_reachable(&self, one_pass: bool) -> bool {
        !self.rules.iter().any(|r| {
            r.number != DEFAULT_RULE
                && r.spec.prob.is_none()
                && r.body.matches_all()
                && match r.spec.action {
                    Action::Allow | Action::Deny => true,
                    Action::Pipe(_) | Action::Queue(_) => one_pass,
                    Action::Count | Action::Skipto(_) => false,
                }
        })
    }

    /// Walks the rules from index `start`. Always ends at a rule: the default
    /// rule matches everything.
    #[inline]
    pub fn classify(
        &mut self,
        start: usize,
        now: Nanos,
        pkt: &PacketInfo,
        default_to_accept: bool,
        rng: &mut Rng,
    ) -> (Decision, RuleRef) {
        let mut i = start;
        while let Some(rule) = self.rules.get_mut(i) {
            if !rule.body.matches(pkt) || !chance(rule.spec.prob, rng) {
                i += 1;
                continue;
            }
            rule.counters.packets += 1;
            rule.counters.bytes += u64::from(pkt.len);
            rule.counters.last_match = Some(now);
            let at = RuleRef {
                id: rule.id,
                number: rule.number,
            };
            let decision = match rule.spec.action {
                _ if rule.number == DEFAULT_RULE => {
                    if default_to_accept {
                        Decision::Allow
                    } else {
                        Decision::Deny
                    }
                }
                Action::Allow => Decision::Allow,
                Action::Deny => Decision::Deny,
                Action::Pipe(n) => Decision::Pipe(n),
                Action::Queue(n) => Decision::Queue(n),
                Action::Count => {
                    i += 1;
                    continue;
                }
                Action::Skipto(n) => {
                    // Never back: a target at or before this rule means the
                    // next one, as in FreeBSD's ip_fw2.c.
                    i = self.rules.partition_point(|r| r.number < n).max(i + 1);
                    continue;
                }
            };
            return (decision, at);
        }
        // Unreachable while the default rule exists; deny is the safe answer.
        let last = self.rules.len().saturating_sub(1);
        let r = &self.rules[last];
        (
            Decision::Deny,
            RuleRef {
                id: r.id,
                number: r.number,
            },
        )
    }
}

#[inline]
fn chance(prob: Option<Probability>, rng: &mut Rng) -> bool {
    prob.is_none_or(|p| rng.chance(p))
}
