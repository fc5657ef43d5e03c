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
pub(crate) mod dynamic;
pub(crate) mod headers;
pub(crate) mod tables;

use std::collections::VecDeque;

use crate::command::{Action, ArgAction, RuleExtra, RuleSpec, Settings, StateKind};

use crate::flow::{proto, FlowKey};
use crate::packet::{Direction, PacketInfo, Target};
use crate::rng::{Probability, Rng};
use crate::time::Nanos;
use crate::units::DEFAULT_RULE;

use crate::packet::IfaceId;
pub use cond::Tags;
pub(crate) use cond::{
    compile, route, Compiled, Cx, IfaceGuard, Interfaces, LocalAddrs, TagSets, Tri,
};
use dynamic::{NameSel, Parent, Refused, States};
pub use headers::Bytes;
use headers::View;
pub use tables::TableError;
use tables::Tables;

/// What the ruleset decided for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Deny,
    Pipe(u32),
    Queue(u32),
    /// A `keep-state` or `limit` rule matched but could not make its state
    /// (`dyn_max` states, or the limit): denied, as FreeBSD denies it.
    StateRefused,
}

/// A match of a rule with `log`, for the daemon's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEvent {
    pub at: Nanos,
    pub rule: u16,
    /// The rule's action, as its spec says.
    pub action: Action,
    /// `tablearg` at the match (what a `pipe tablearg` sent it to).
    pub arg: u32,
    pub key: FlowKey,
    pub dir: Direction,
    pub recv_if: Option<IfaceId>,
    pub xmit_if: Option<IfaceId>,
    pub len: u32,
}

/// Log events kept until the daemon takes them; more are counted, not kept.
pub const LOG_CAPACITY: usize = 1024;

/// How deep `call` may nest (FreeBSD's `IP_FW_CALLSTACK_SIZE`).
const CALL_DEPTH: usize = 16;

/// Where a packet's first pass through the ruleset may end, as far as the
/// rules alone tell ([`Ruleset::reach_in`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reach {
    /// Some packet may leave passed, without a pipe or queue.
    pub pass: bool,
    /// Some packet may enter a pipe or queue.
    pub shaped: bool,
    /// The pipes and queues they may enter, when the rules name them all;
    /// `None` when some rule may send a packet to one they do not name
    /// (`pipe tablearg`, a dynamic state, a `call`).
    pub targets: Option<Vec<Target>>,
}

impl Reach {
    fn shaped_into(&mut self, target: Option<Target>) {
        if !self.shaped {
            self.targets = Some(Vec::new());
        }
        self.shaped = true;
        match (target, &mut self.targets) {
            (Some(t), Some(ts)) => ts.push(t),
            _ => self.targets = None,
        }
    }
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
    /// Matches logged since the last `resetlog`.
    pub logged: u32,
}

#[derive(Debug)]
pub(crate) struct Rule {
    /// Unique for the engine's lifetime; never reused.
    pub id: u32,
    pub number: u16,
    /// What the walk must do besides matching and acting ([`quick`]),
    /// kept beside the body so that a plain rule costs one test.
    pub quick: u8,
    /// `1 << set`, to test against the disabled sets.
    pub set_bit: u32,
    pub spec: RuleSpec,
    pub body: Compiled,
    pub counters: RuleCounters,
}

/// [`Rule::quick`] bits.
mod quick {
    /// Dynamic states are looked up here (`check-state`, `keep-state`, `limit`).
    pub const CHECK: u8 = 1;
    /// A match has more to do: `log`, `tag`, a state to make.
    pub const EXTRA: u8 = 2;
}

impl Rule {
    fn new(id: u32, number: u16, spec: RuleSpec, body: Compiled) -> Rule {
        let mut r = Rule {
            id,
            number,
            quick: 0,
            set_bit: 0,
            spec,
            body,
            counters: RuleCounters::default(),
        };
        r.refresh();
        r
    }

    /// Recomputes [`Self::quick`] and [`Self::set_bit`] from the spec.
    pub fn refresh(&mut self) {
        let x = &self.spec.extra;
        let checks = matches!(self.spec.action, Action::CheckState)
            || x.state.is_some_and(StateKind::checks);
        let extra = x.log.is_some() || x.tag.is_some() || x.state.is_some();
        self.quick = if checks { quick::CHECK } else { 0 } | if extra { quick::EXTRA } else { 0 };
        self.set_bit = 1 << x.set.min(31);
    }
}

#[derive(Debug)]
pub(crate) struct Ruleset {
    /// Sorted by number; the last element is the default rule.
    rules: Vec<Rule>,
    next_id: u32,
    /// Bit N set: rules of set N are skipped.
    pub disabled_sets: u32,
    pub tables: Tables,
    pub states: States,
    pub me: LocalAddrs,
    /// The host's routes, when the caller gave them (`verrevpath`...).
    pub routes: Option<tables::Table>,
    pub log: VecDeque<LogEvent>,
    /// Log events not kept: the daemon did not take them fast enough.
    pub log_lost: u64,
    /// `call`'s return stack, kept between walks so a walk allocates nothing.
    calls: Vec<u16>,
    /// The tag sets of queued packets.
    pub tag_sets: TagSets,
    /// Which rules name the interface a packet must be on, so that a walk
    /// steps over those for other interfaces; rebuilt after any change.
    index: IfaceIndex,
}

/// Where the rules that name one interface are ([`Compiled::iface_guard`]).
///
/// A daemon with many links (`shell --join`: four rules per link, each
/// `recv` or `xmit` its link's interface) would otherwise test every
/// other link's rules for every packet: a walk as long as the links are
/// many. With this, a walk at a rule whose interface the packet is not on
/// goes straight to the next rule that may match it: one with no such
/// guard, or one guarded by the packet's own receive or transmit
/// interface. Only rules whose body cannot match (and with nothing to do
/// when they do not match: no state lookups) are passed over, so what a
/// walk decides, counts and logs is unchanged.
#[derive(Debug, Default)]
struct IfaceIndex {
    /// Built for the rules as they are now; cleared by every change.
    built: bool,
    /// Some rule has a guard: a ruleset without (no `recv NAME`) pays one
    /// branch per rule for the index.
    any: bool,
    /// Each rule's guard (none for a rule that looks up states).
    guards: Vec<Option<IfaceGuard>>,
    /// For each rule, the first rule at or after it without a guard.
    next_open: Vec<u32>,
    /// Positions of the rules guarded by receive interface `id`
    /// (`recv[id]`), and by transmit interface, ascending.
    recv: Vec<Vec<u32>>,
    xmit: Vec<Vec<u32>>,
}

impl IfaceIndex {
    fn build(&mut self, rules: &[Rule]) {
        self.guards.clear();
        self.guards.extend(rules.iter().map(|r| {
            (r.quick & quick::CHECK == 0)
                .then(|| r.body.iface_guard())
                .flatten()
        }));
        self.next_open.clear();
        self.next_open.resize(rules.len(), 0);
        let mut open = rules.len() as u32;
        for i in (0..rules.len()).rev() {
            if self.guards[i].is_none() {
                open = i as u32;
            }
            self.next_open[i] = open;
        }
        self.recv.iter_mut().for_each(Vec::clear);
        self.xmit.iter_mut().for_each(Vec::clear);
        for (i, g) in self.guards.iter().enumerate() {
            let Some(g) = g else { continue };
            let lists = if g.xmit {
                &mut self.xmit
            } else {
                &mut self.recv
            };
            let id = usize::from(g.id.0);
            if lists.len() <= id {
                lists.resize_with(id + 1, Vec::new);
            }
            lists[id].push(i as u32);
        }
        self.any = self.guards.iter().any(Option::is_some);
        self.built = true;
    }

    /// The guard of rule `i`, if it is one the packet fails: then the next
    /// rule to look at (after `i`), else `None`.
    #[inline]
    fn skip(&self, i: usize, pkt: &PacketInfo) -> Option<usize> {
        if !self.any {
            return None;
        }
        let g = self.guards.get(i).copied().flatten()?;
        if g.admits(pkt) {
            return None;
        }
        let after = |lists: &[Vec<u32>], on: Option<IfaceId>| {
            let list = lists.get(usize::from(on?.0))?;
            let at = list.partition_point(|&p| (p as usize) < i);
            list.get(at).copied()
        };
        let mut next = self.next_open.get(i).copied().unwrap_or(u32::MAX);
        for p in [
            after(&self.recv, pkt.recv_if),
            after(&self.xmit, pkt.xmit_if),
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(p);
        }
        // Never backwards nor in place: rule `i` is in neither list (its
        // guard is for another interface) and has a guard.
        Some((next as usize).max(i + 1))
    }
}

/// What a walk needs besides the rules: the packet's bytes, interface
/// names for interface tables, and the settings.
pub(crate) struct Walk<'a> {
    pub bytes: Bytes<'a>,
    pub ifs: &'a Interfaces,
    pub settings: &'a Settings,
}

/// FreeBSD's autoincrement step for rules added without a number.
const AUTOINC_STEP: u32 = 100;

impl Ruleset {
    pub fn new() -> Self {
        let default = Rule::new(
            0,
            DEFAULT_RULE,
            RuleSpec {
                number: Some(DEFAULT_RULE),
                action: Action::Deny,
                prob: None,
                body: Vec::new(),
                extra: RuleExtra {
                    set: 31,
                    ..RuleExtra::default()
                },
            },
            Compiled::default(),
        );
        Ruleset {
            rules: vec![default],
            next_id: 1,
            disabled_sets: 0,
            tables: Tables::default(),
            states: States::default(),
            me: LocalAddrs::default(),
            routes: None,
            log: VecDeque::new(),
            log_lost: 0,
            calls: Vec::with_capacity(CALL_DEPTH),
            tag_sets: TagSets::default(),
            index: IfaceIndex::default(),
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rules_mut(&mut self) -> &mut [Rule] {
        // A body or a spec may change (an interface learned, a set moved).
        self.index.built = false;
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
        self.rules.insert(at, Rule::new(id, number, spec, body));
        self.index.built = false;
    }

    pub fn contains(&self, number: u16) -> bool {
        self.rules.iter().any(|r| r.number == number)
    }

    pub fn delete(&mut self, number: u16) {
        self.retain(|r| r.number != number || r.number == DEFAULT_RULE);
    }

    /// `flush`: every rule but the default one and those of set 31.
    pub fn flush(&mut self) {
        self.retain(|r| r.spec.extra.set == 31);
    }

    /// Keeps the rules `keep` says; the states of the others go with them.
    pub fn retain(&mut self, keep: impl Fn(&Rule) -> bool) {
        self.rules.retain(|r| keep(r));
        self.index.built = false;
        let ids: std::collections::HashSet<u32> = self.rules.iter().map(|r| r.id).collect();
        self.states.retain(|st| ids.contains(&st.parent.rule_id));
    }

    /// `resetlog`: the given rules (all if none) may log again.
    pub fn reset_log(&mut self, numbers: &[u16]) {
        for r in &mut self.rules {
            if numbers.is_empty() || numbers.contains(&r.number) {
                r.counters.logged = 0;
            }
        }
    }

    pub fn zero(&mut self, number: Option<u16>) {
        for r in &mut self.rules {
            if number.is_none_or(|n| n == r.number) {
                r.counters = RuleCounters {
                    logged: r.counters.logged,
                    ..RuleCounters::default()
                };
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
            i += 1;
            if self.set_disabled(rule) {
                continue;
            }
            let m = match rule.body.decides_in(recv_if) {
                Tri::Always if rule.spec.prob.is_some() => Tri::Maybe,
                m => m,
            };
            if m == Tri::Never {
                continue;
            }
            let always = m == Tri::Always;
            match rule.spec.action {
                _ if rule.number == DEFAULT_RULE => {
                    reach.pass |= default_to_accept;
                    break;
                }
                // A state may hold any action; a keep-state rule may be
                // refused its state.
                _ if rule.spec.extra.state.is_some() => {
                    reach.pass = true;
                    reach.shaped_into(None);
                }
                Action::Allow => reach.pass = true,
                Action::Deny => {}
                Action::Pipe(n) => reach.shaped_into(Some(Target::Pipe(n))),
                Action::Queue(n) => reach.shaped_into(Some(Target::Queue(n))),
                Action::Count => continue,
                Action::Skipto(n) if always => {
                    i = self.rules.partition_point(|r| r.number < n).max(i);
                    continue;
                }
                Action::Skipto(_) => reach.pass = true,
                Action::CheckState | Action::Call(_) | Action::Return | Action::Tablearg(_) => {
                    reach.pass = true;
                    reach.shaped_into(None);
                    continue;
                }
            }
            if always {
                break;
            }
        }
        reach
    }

    /// Whether a packet may reach the default rule: no rule before it
    /// matches every packet (no test, no `prob`, no state) and ends its
    /// walk (`allow`, `deny`, and with `one_pass` a pipe or queue).
    pub fn default_reachable(&self, one_pass: bool) -> bool {
        !self.rules.iter().any(|r| {
            r.number != DEFAULT_RULE
                && !self.set_disabled(r)
                && r.spec.prob.is_none()
                && r.spec.extra.state.is_none()
                && r.body.matches_all()
                && match r.spec.action {
                    Action::Allow | Action::Deny => true,
                    Action::Pipe(_)
                    | Action::Queue(_)
                    | Action::Tablearg(ArgAction::Pipe | ArgAction::Queue) => one_pass,
                    _ => false,
                }
        })
    }

    #[inline]
    fn set_disabled(&self, r: &Rule) -> bool {
        self.disabled_sets & r.set_bit != 0
    }

    /// After rules changed sets (`set move`, `set swap`).
    pub fn refresh_rules(&mut self) {
        self.index.built = false;
        self.rules.iter_mut().for_each(Rule::refresh);
    }

    /// Walks the rules from index `start`. Always ends at a rule: the default
    /// rule matches everything.
    #[inline]
    pub fn classify(
        &mut self,
        start: usize,
        now: Nanos,
        pkt: &PacketInfo,
        tags: &mut Tags,
        walk: &Walk<'_>,
        rng: &mut Rng,
    ) -> (Decision, RuleRef) {
        if !self.index.built {
            self.index.build(&self.rules);
        }
        let Ruleset {
            rules,
            index,
            disabled_sets,
            tables,
            states,
            me,
            routes,
            log,
            log_lost,
            calls,
            ..
        } = self;
        let mut cx = Cx {
            view: View::new(&walk.bytes),
            tables,
            routes: routes.as_ref(),
            me,
            ifs: walk.ifs,
            tags,
            arg: 0,
        };
        calls.clear();
        // Dynamic states are looked up once per walk, at the first rule
        // that checks them.
        let mut checked = false;
        let mut i = start;
        let (decision, at) = loop {
            if let Some(next) = index.skip(i, pkt) {
                i = next;
                continue;
            }
            let Some(rule) = rules.get_mut(i) else {
                // Unreachable while the default rule exists; deny is the safe answer.
                let r = &rules[rules.len() - 1];
                break (Decision::Deny, at(r));
            };
            if *disabled_sets & rule.set_bit != 0 {
                i += 1;
                continue;
            }
            if rule.quick & quick::CHECK != 0 && !checked {
                checked = true;
                if let Some(p) = check_state(rules, states, i, now, pkt, walk, &mut cx) {
                    count(&mut rules[p], now, pkt);
                    match act(rules, p, calls, cx.arg) {
                        Step::Done(d) => break (d, at(&rules[p])),
                        Step::Goto(n) => {
                            i = n;
                            continue;
                        }
                    }
                }
            }
            let rule = &mut rules[i];
            if matches!(rule.spec.action, Action::CheckState) {
                i += 1;
                continue;
            }
            cx.arg = 0;
            if !rule.body.matches(pkt, &mut cx) || !chance(rule.spec.prob, rng) {
                i += 1;
                continue;
            }
            count(rule, now, pkt);
            if rule.quick & quick::EXTRA != 0
                && !matched_extra(rule, i, now, pkt, walk, &mut cx, states, log, log_lost)
            {
                break (Decision::StateRefused, at(&rules[i]));
            }
            if rules[i].number == DEFAULT_RULE {
                let d = if walk.settings.default_to_accept {
                    Decision::Allow
                } else {
                    Decision::Deny
                };
                break (d, at(&rules[i]));
            }
            match act(rules, i, calls, cx.arg) {
                Step::Done(d) => break (d, at(&rules[i])),
                Step::Goto(n) => i = n,
            }
        };
        (decision, at)
    }
}

/// The packet's dynamic state, looked up at rule `i`: the index of the
/// rule that made it (its action is the packet's), with `tablearg` as it
/// was then. An expired state, or one whose rule is gone, is none.
#[cold]
#[inline(never)]
fn check_state(
    rules: &[Rule],
    states: &mut States,
    i: usize,
    now: Nanos,
    pkt: &PacketInfo,
    walk: &Walk<'_>,
    cx: &mut Cx<'_, '_>,
) -> Option<usize> {
    let sel = flow_sel(&rules[i], states);
    let tcp = tcp_flags(pkt, &mut cx.view);
    let st = states.check(now, &pkt.key, sel, tcp, pkt.len, walk.settings)?;
    let parent = st.parent;
    let p = rules
        .get(parent.hint)
        .filter(|r| r.id == parent.rule_id)
        .map(|_| parent.hint)
        .or_else(|| rules.iter().position(|r| r.id == parent.rule_id))?;
    st.parent.hint = p;
    cx.arg = parent.arg;
    Some(p)
}

/// What a matching rule does besides its action: `log`, `tag`, and the
/// state it makes. `false` if the state was refused (`dyn_max`, a limit).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn matched_extra(
    rule: &mut Rule,
    i: usize,
    now: Nanos,
    pkt: &PacketInfo,
    walk: &Walk<'_>,
    cx: &mut Cx<'_, '_>,
    states: &mut States,
    log: &mut VecDeque<LogEvent>,
    log_lost: &mut u64,
) -> bool {
    if let Some(amount) = rule.spec.extra.log {
        if amount == 0 || rule.counters.logged < amount {
            rule.counters.logged += 1;
            if log.len() < LOG_CAPACITY {
                log.push_back(LogEvent {
                    at: now,
                    rule: rule.number,
                    action: rule.spec.action,
                    arg: cx.arg,
                    key: pkt.key,
                    dir: pkt.dir,
                    recv_if: pkt.recv_if,
                    xmit_if: pkt.xmit_if,
                    len: pkt.len,
                });
            } else {
                *log_lost += 1;
            }
        }
    }
    if let Some(t) = rule.spec.extra.tag {
        if t.untag {
            cx.tags.remove(t.tag);
        } else {
            cx.tags.add(t.tag);
        }
    }
    let Some(kind) = rule.spec.extra.state else {
        return true;
    };
    let limit = match kind {
        StateKind::Limit { mask, max } | StateKind::SetLimit { mask, max } => Some((mask, max)),
        StateKind::Keep | StateKind::Record => None,
    };
    let NameSel::One(name) = flow_sel(rule, states) else {
        // `:any` selects states; the parser refuses it where one is made.
        return true;
    };
    let parent = Parent {
        rule_id: rule.id,
        number: rule.number,
        hint: i,
        arg: cx.arg,
    };
    let tcp = tcp_flags(pkt, &mut cx.view);
    let made = states.make(
        now,
        &pkt.key,
        name,
        parent,
        limit,
        tcp,
        pkt.len,
        walk.settings,
    );
    !matches!(made, Err(Refused::Full | Refused::Limit))
}

/// The dynamic states a rule's `:name` stands for: its own name
/// (`default` when it has none), or every name for `check-state :any`.
fn flow_sel(rule: &Rule, states: &mut States) -> NameSel {
    match rule.spec.extra.flow.as_deref() {
        Some("any") => NameSel::Any,
        n => NameSel::One(states.name_id(n)),
    }
}

/// Where the walk goes after a rule's action.
enum Step {
    Done(Decision),
    Goto(usize),
}

fn at(r: &Rule) -> RuleRef {
    RuleRef {
        id: r.id,
        number: r.number,
    }
}

#[inline]
fn count(r: &mut Rule, now: Nanos, pkt: &PacketInfo) {
    r.counters.packets += 1;
    r.counters.bytes += u64::from(pkt.len);
    r.counters.last_match = Some(now);
}

/// The TCP flags of a TCP packet, for dynamic state.
fn tcp_flags(pkt: &PacketInfo, view: &mut View<'_>) -> Option<u8> {
    (pkt.key.proto == proto::TCP)
        .then(|| view.tcp().map(|t| t.flags))
        .flatten()
}

/// The first rule numbered `n` or above, never back: a target at or
/// before rule `i` means the next one, as in FreeBSD's ip_fw2.c.
fn jump(rules: &[Rule], i: usize, n: u32) -> usize {
    rules
        .partition_point(|r| u32::from(r.number) < n)
        .max(i + 1)
        .min(rules.len() - 1)
}

/// Rule `i`'s action, for a packet whose body (or state) matched it.
#[inline(always)]
fn act(rules: &[Rule], i: usize, calls: &mut Vec<u16>, arg: u32) -> Step {
    let rule = &rules[i];
    let call = |calls: &mut Vec<u16>, n: u32| {
        // A full stack: FreeBSD logs it and goes on at the next rule.
        if calls.len() == CALL_DEPTH {
            return Step::Goto(i + 1);
        }
        calls.push(rule.number);
        Step::Goto(jump(rules, i, n))
    };
    match rule.spec.action {
        Action::Allow => Step::Done(Decision::Allow),
        Action::Deny => Step::Done(Decision::Deny),
        Action::Pipe(n) => Step::Done(Decision::Pipe(n)),
        Action::Queue(n) => Step::Done(Decision::Queue(n)),
        Action::Count | Action::CheckState => Step::Goto(i + 1),
        Action::Skipto(n) => Step::Goto(jump(rules, i, u32::from(n))),
        Action::Call(n) => call(calls, u32::from(n)),
        // An empty stack: FreeBSD goes on at the next rule.
        Action::Return => match calls.pop() {
            None => Step::Goto(i + 1),
            Some(from) => Step::Goto(
                rules
                    .partition_point(|r| r.number <= from)
                    .min(rules.len() - 1),
            ),
        },
        Action::Tablearg(a) => match a {
            ArgAction::Pipe => Step::Done(Decision::Pipe(arg)),
            ArgAction::Queue => Step::Done(Decision::Queue(arg)),
            ArgAction::Skipto => Step::Goto(jump(rules, i, arg)),
            ArgAction::Call => call(calls, arg),
        },
    }
}

#[inline]
fn chance(prob: Option<Probability>, rng: &mut Rng) -> bool {
    prob.is_none_or(|p| rng.chance(p))
}
