//! The engine: the ruleset in front of dummynet, the event queue behind it,
//! and the accounting that follows every packet.

mod configure;
mod views;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap;

use crate::classifier::{
    self, Bytes, Decision, Interfaces, LogEvent, Reach, RuleRef, Ruleset, Tags, Walk,
};
use crate::command::{
    Action, ArgAction, Command, Field, FlowsetConfig, LinkConfig, PipeConfig, QueueConfig,
    RuleSpec, SchedConfig, Schedule, SetCmd, Setting, Settings, TableCmd, TableName,
};
use crate::error::{BatchError, ConfigError};
use crate::flow::FlowKey;
use crate::impair::On;
use crate::modify;
use crate::packet::{IfaceId, Output, PacketInfo, Payload, Target, Verdict};
use crate::pipes::{Exit, Held, Pipes, Rejected};
use crate::rng::Rng;
use crate::sched::{self, SchedType};
use crate::stats::{
    DropReason, LinkView, MemoryPart, MemoryReport, RuleView, Snapshot, StateView, TableView,
    Totals,
};
use crate::time::{Nanos, NS_PER_SEC};
use crate::units::{
    QueueLimit, DEFAULT_RULE, DN_MAX_ID, MAX_BUCKETS, MAX_LMAX, MAX_NUMBER, MAX_PRI, MAX_WEIGHT,
};
use crate::units::{MAX_BW, MAX_DELAY};

/// What a command was taken with that its user may not expect, said once
/// when the command is applied ([`Engine::take_notes`]); the daemon and the
/// CLI show it as a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigNote {
    /// A plug-in's parameter outside its bounds, brought within them as
    /// FreeBSD's kernel does (`fq_codel target 0 is below 1us, ...`).
    Clamped(String),
    /// `rules` send packets to `pipe N`, whose scheduler N is of type
    /// `kind` (`FQ_CODEL`): as in FreeBSD, such packets go through the
    /// pipe's own queue (N+131072) and its FIFO scheduler (N+65536), never
    /// through scheduler N, which serves the queues of `queue M config
    /// pipe N` only.
    PipeBypassesSched {
        pipe: u32,
        kind: &'static str,
        rules: Vec<u16>,
    },
    /// A flush left this many scheduled `at` steps pending.
    StepsPending(usize),
}

impl std::fmt::Display for ConfigNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigNote::Clamped(words) => f.write_str(words),
            ConfigNote::PipeBypassesSched { pipe, kind, rules } => {
                let list: Vec<String> = rules.iter().map(u16::to_string).collect();
                let (noun, verb) = if rules.len() == 1 {
                    ("rule", "sends")
                } else {
                    ("rules", "send")
                };
                write!(
                    f,
                    "{noun} {} {verb} to pipe {pipe}, whose packets go through the pipe's own \
                     FIFO queue, not its {kind} scheduler (as in FreeBSD); for {kind}, send \
                     them to a queue of it: `queue N config pipe {pipe}` and `add ... queue N`",
                    list.join(", ")
                )
            }
            ConfigNote::StepsPending(n) => {
                let (steps, are) = if *n == 1 {
                    ("step", "is")
                } else {
                    ("steps", "are")
                };
                write!(
                    f,
                    "{n} scheduled `at` {steps} {are} still pending: a flush leaves schedules \
                     alone (`at flush` cancels them)"
                )
            }
        }
    }
}

/// With `expire` on, the per-flow queues and scheduler instances that masks
/// made are swept about this often: one that was empty and saw no arrival
/// since the previous sweep is freed. The sweep runs on arrivals, at most
/// once per period, so an idle engine does no work and sets no timer for it.
pub const EXPIRE_IDLE: Nanos = NS_PER_SEC;

/// The shortest packet the worst case of [`Engine::memory`] counts on: an
/// IPv4 header. (The frame parser makes no shorter IP packet; a caller
/// feeding shorter ones holds more records per `held_limit` byte.)
pub const MIN_PACKET_LEN: u64 = 20;

/// Schedules running at once, at most (each repeating one runs forever).
pub const MAX_SCHEDULES: usize = 4096;

/// ipfw + dummynet on a caller-driven clock. `P` is whatever the caller wants
/// back with each packet (buffer, index, handle).
pub struct Engine<P> {
    rules: Ruleset,
    ifaces: Interfaces,
    dn: Pipes<P>,
    settings: Settings,
    rng: Rng,
    /// Arrival counter, for stable ordering inside dummynet.
    seq: u64,
    /// Packets that have left and wait for `poll`.
    ready: VecDeque<Output<P>>,
    totals: Totals,
    /// Reused buffer for packets leaving dummynet (no allocation per packet).
    spare_exits: VecDeque<Exit<P>>,
    /// The latest time the engine was driven to.
    now: Nanos,
    /// When the next idle-flow sweep is due (`expire`).
    next_expiry: Nanos,
    /// Scheduled commands by due time: (time, order, schedule, step).
    plan: BinaryHeap<Reverse<(Nanos, u64, u32, u32)>>,
    plan_seq: u64,
    schedules: FxHashMap<u32, Plan>,
    next_plan_id: u32,
    schedule_stats: ScheduleStats,
    /// Counts configuration changes ([`Self::config_epoch`]).
    epoch: u64,
    /// What the last command applied changed on its way in
    /// ([`Self::take_notes`]).
    notes: Vec<ConfigNote>,
}

/// What the rules made of a packet ([`Engine::classify`]).
#[derive(Debug)]
pub enum Classified<P> {
    /// Passed or dropped by the rules: nothing more to do in the engine.
    Done(Verdict<P>),
    /// Bound for a pipe or queue: [`Engine::enqueue`] puts it there.
    Shaped(Shaped<P>),
}

/// A packet the rules sent to a pipe or queue, on its way there: what the
/// enqueue needs (the rule that sent it, its tags), and nothing that ties
/// it to the engine that classified it.
#[derive(Debug)]
pub struct Shaped<P> {
    payload: P,
    info: PacketInfo,
    rule: RuleRef,
    tags: Tags,
    target: Target,
}

impl<P> Shaped<P> {
    pub fn target(&self) -> Target {
        self.target
    }
    pub fn info(&self) -> &PacketInfo {
        &self.info
    }
    /// The number of the rule that sent it.
    pub fn rule(&self) -> u16 {
        self.rule.number
    }
    pub fn payload(&self) -> &P {
        &self.payload
    }
}

/// A schedule being carried out.
struct Plan {
    steps: Vec<(Nanos, Command)>,
    every: Option<Nanos>,
    /// Steps still to run (one-shot schedules end when it reaches 0).
    pending: usize,
}

/// What the engine's scheduled commands have done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleStats {
    /// Steps waiting for their time.
    pub pending: usize,
    /// Steps applied.
    pub applied: u64,
    /// Steps the engine refused when their time came (the configuration
    /// had changed underneath: a pipe deleted...); nothing changed for them.
    pub failed: u64,
    /// The last refusal: when, and why.
    pub last_error: Option<(Nanos, String)>,
    /// How long after its time a step was applied, at worst: 0 on a
    /// virtual clock; live, how late the data plane reached the engine.
    pub max_late: Nanos,
    /// The same, for the last step applied.
    pub last_late: Nanos,
    /// Steps cancelled by `at flush` before their time (a repeating
    /// schedule's next round counts once).
    pub cancelled: u64,
}

impl<P: Payload> Engine<P> {
    /// An engine with FreeBSD's defaults: only the default rule (deny), no
    /// pipes, `one_pass` on.
    pub fn new(seed: u64) -> Self {
        Self::with_settings(seed, Settings::default())
    }

    pub fn with_settings(seed: u64, settings: Settings) -> Self {
        let mut dn = Pipes::new(seed);
        dn.instance_limit = settings.instance_limit;
        Engine {
            rules: Ruleset::new(),
            ifaces: Interfaces::default(),
            dn,
            settings,
            rng: Rng::new(seed),
            seq: 0,
            ready: VecDeque::new(),
            totals: Totals::default(),
            spare_exits: VecDeque::new(),
            now: 0,
            next_expiry: EXPIRE_IDLE,
            plan: BinaryHeap::new(),
            plan_seq: 0,
            schedules: FxHashMap::default(),
            next_plan_id: 0,
            schedule_stats: ScheduleStats::default(),
            epoch: 0,
            notes: Vec::new(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The id of interface `name`, for [`PacketInfo::recv_if`] / `xmit_if`.
    pub fn iface(&mut self, name: &str) -> IfaceId {
        let before = self.ifaces.len();
        let id = self.ifaces.intern(name);
        if self.ifaces.len() != before {
            self.epoch += 1;
            self.learn_new_ifaces(before);
        }
        id
    }

    /// The latest time the engine has been driven to.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Changes whenever the configuration may have: a command applied or
    /// refused (scheduled ones included), an interface learnt. What a
    /// caller works out from the configuration ([`Self::least_transit`])
    /// holds while this stays the same.
    pub fn config_epoch(&self) -> u64 {
        self.epoch
    }

    /// Pipe `n`'s trace (`pipe N config trace FILE`) and the time it
    /// started, if its link is trace-driven: what a mahimahi link log needs
    /// for its delivery-opportunity lines.
    pub fn pipe_trace(
        &self,
        n: u32,
    ) -> Option<(std::sync::Arc<crate::impair::trace::Trace>, Nanos)> {
        self.dn.trace(n)
    }

    /// Whether a burst of packets sent as one (a GSO super-packet) fares
    /// exactly as its packets would: every pipe only delays
    /// ([`Pipes::only_delays`]: no bandwidth to bill it against, no
    /// queue-slot limit it could overflow alone, no draw made once for it),
    /// no rule has `prob`, and no scheduled command waits (it may bring
    /// any of these in). A live caller that can make the kernel segment
    /// bursts lets them cross whole only while this holds.
    pub fn only_delays(&self) -> bool {
        self.dn.only_delays()
            && self.plan.is_empty()
            && self.rules.rules().iter().all(|r| r.spec.prob.is_none())
    }

    /// The rules that send to a pipe or queue without saying `in` or `out`.
    /// On a bridge, where every frame crosses the rules twice (on its way
    /// in, then out), such a rule may take it twice: a 10 ms pipe then
    /// adds 20 ms each way, as on FreeBSD.
    pub fn undirected_pipe_rules(&self) -> Vec<u16> {
        self.rules
            .rules()
            .iter()
            .filter(|r| {
                matches!(
                    r.spec.action,
                    Action::Pipe(_)
                        | Action::Queue(_)
                        | Action::Tablearg(ArgAction::Pipe | ArgAction::Queue)
                )
            })
            .filter(|r| !r.body.has_direction())
            .map(|r| r.number)
            .collect()
    }

    /// Whether some packet may end at the default rule 65535 and be
    /// dropped there (`default_to_accept` off): a daemon starting so warns
    /// its user, whose own traffic (an SSH session, in host mode) may be
    /// the packet.
    pub fn drops_by_default(&self) -> bool {
        !self.settings.default_to_accept && self.rules.default_reachable(self.settings.one_pass)
    }

    /// The least time from a packet's arrival `in` on `recv_if` to the
    /// first departure it can cause: when the rules send every such packet
    /// into a pipe or queue, or deny it, the least delay of the pipes they
    /// may send it to (of every pipe, when some rule does not name its
    /// pipe: `pipe tablearg`, a dynamic state); [`Nanos::MAX`] when they
    /// deny them all; 0 when some may pass at once. A live caller with a
    /// kernel timestamp on each arrival may read arrivals this late (and
    /// run them at their own times) without letting any departure leave
    /// late. Judged from the rules alone, erring towards 0 (see
    /// [`Ruleset::reach_in`]). A packet leaving its pipe may enter another
    /// (an `out` pass, `one_pass 0`), which only adds to its time inside.
    pub fn least_transit(&self, recv_if: IfaceId) -> Nanos {
        let reach = self
            .rules
            .reach_in(recv_if, self.settings.default_to_accept);
        match reach {
            Reach { pass: true, .. } => 0,
            Reach {
                shaped: true,
                targets: Some(targets),
                ..
            } => targets
                .iter()
                .map(|&t| self.dn.least_delay_of(t).unwrap_or(Nanos::MAX))
                .min()
                .unwrap_or(Nanos::MAX),
            Reach { shaped: true, .. } => self.dn.least_delay(),
            Reach { .. } => Nanos::MAX,
        }
    }

    pub fn iface_name(&self, id: IfaceId) -> Option<&str> {
        self.ifaces.name(id)
    }

    fn learn_new_ifaces(&mut self, from: usize) {
        for i in from..self.ifaces.len() {
            let id = IfaceId(i as u16);
            let Some(name) = self.ifaces.name(id).map(str::to_string) else {
                continue;
            };
            for r in self.rules.rules_mut() {
                r.body.learn_iface(id, &name);
            }
        }
    }

    // ---------------------------------------------------------------- data path

    /// A packet arrives at `now`. Timers due by `now` run first, so a caller
    /// that polls late still sees departures in the right order.
    ///
    /// The same as [`Self::classify`] then [`Self::enqueue`], in one call:
    /// what a caller with one engine does.
    #[inline]
    pub fn input(&mut self, now: Nanos, info: PacketInfo, payload: P) -> Verdict<P> {
        match self.classify(now, info, payload) {
            Classified::Done(verdict) => verdict,
            Classified::Shaped(shaped) => self.enqueue_now(now, shaped),
        }
    }

    /// The first half of [`Self::input`]: timers due by `now` run, the
    /// packet is counted as arrived and walks the rules. A packet the rules
    /// pass or deny is done ([`Classified::Done`]); one they send to a pipe
    /// or queue comes back [`Classified::Shaped`], for [`Self::enqueue`] on
    /// this engine or on another with the same configuration (a data plane
    /// sharded over workers: [`Shaped::instance`] says which dummynet
    /// instance it is bound for, so that each is fed by one engine only).
    /// Rule counters move here, queue and pipe counters at the enqueue.
    #[inline]
    pub fn classify(&mut self, now: Nanos, info: PacketInfo, payload: P) -> Classified<P> {
        self.run_timers(now);
        if now >= self.next_expiry {
            self.expire(now);
        }
        self.totals.arrived += 1;
        if !self.settings.firewall {
            // `ipfw disable firewall`: nothing is classified.
            self.totals.delivered += 1;
            return Classified::Done(Verdict::Pass {
                payload,
                rule: DEFAULT_RULE,
            });
        }
        let mut tags = Tags::default();
        let walk = Walk {
            bytes: Bytes {
                ip: payload.ip_bytes(),
                frame: payload.frame_bytes(),
            },
            ifs: &self.ifaces,
            settings: &self.settings,
        };
        let (decision, rule) = self
            .rules
            .classify(0, now, &info, &mut tags, &walk, &mut self.rng);
        let target = match decision {
            Decision::Allow => {
                self.totals.delivered += 1;
                return Classified::Done(Verdict::Pass {
                    payload,
                    rule: rule.number,
                });
            }
            Decision::Deny | Decision::StateRefused => {
                let reason = refusal(decision);
                self.totals.drops[reason as usize] += 1;
                return Classified::Done(Verdict::Drop {
                    payload,
                    reason,
                    rule: Some(rule.number),
                    target: None,
                });
            }
            Decision::Pipe(n) => Target::Pipe(n),
            Decision::Queue(n) => Target::Queue(n),
        };
        Classified::Shaped(Shaped {
            payload,
            info,
            rule,
            tags,
            target,
        })
    }

    /// The second half of [`Self::input`]: a packet [`Self::classify`] sent
    /// to a pipe or queue enters it at `now` (timers due by then run
    /// first). On an engine other than the one that classified it, the
    /// packet was counted as arrived there, and is counted inside (then
    /// delivered or dropped) here: sums over both keep the books
    /// ([`crate::Totals::conserved`]).
    #[inline]
    pub fn enqueue(&mut self, now: Nanos, shaped: Shaped<P>) -> Verdict<P> {
        self.run_timers(now);
        self.enqueue_now(now, shaped)
    }

    /// Undoes the arrival [`Self::classify`] counted for a packet it sent to
    /// a pipe that will never see it (a sharded data plane could not hand
    /// it to the pipe's owner): counted as dropped for `reason` instead,
    /// and its payload given back.
    pub fn refuse_shaped(&mut self, shaped: Shaped<P>, reason: DropReason) -> Verdict<P> {
        self.totals.drops[reason.index()] += 1;
        Verdict::Drop {
            payload: shaped.payload,
            reason,
            rule: Some(shaped.rule.number),
            target: Some(shaped.target),
        }
    }

    /// Where a classified packet goes in this engine's dummynet: a number
    /// that is the same for every packet bound for the same scheduler
    /// instance, and the same on every engine with the same configuration.
    /// For a scheduler without a mask (one instance) it is the scheduler's
    /// number, so that consecutive pipes spread evenly over a sharded data
    /// plane's workers (which owns what: `instance % workers`); for a
    /// masked one, a mixed hash of the scheduler and the masked flow. A
    /// target that does not exist (or has no scheduler) is keyed by its
    /// number; its owner then drops the packet with the engine's reason.
    pub fn instance(&self, shaped: &Shaped<P>) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        match self.dn.instance_of(shaped.target, &shaped.info.key) {
            Some((sched, flow)) if flow == FlowKey::default() => return u64::from(sched),
            Some((sched, flow)) => (sched, flow).hash(&mut h),
            None => {
                return u64::from(match shaped.target {
                    Target::Pipe(n) | Target::Queue(n) => n,
                })
            }
        }
        // splitmix64's finaliser: every bit of the hash reaches the low
        // ones, which the modulo keeps.
        let mut z = h.finish();
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Whether some rule keeps dynamic state (`keep-state`, `limit`,
    /// `check-state`...): the state table is one per engine, so a data plane
    /// that classifies on several engines would split it.
    pub fn has_stateful_rules(&self) -> bool {
        self.rules
            .rules()
            .iter()
            .any(|r| matches!(r.spec.action, Action::CheckState) || r.spec.extra.state.is_some())
    }

    /// Counts the states of `limit` and `set-limit` rules in `table`,
    /// shared with the other engines given it, rather than in this
    /// engine's own map (see [`crate::limits`]): engines that classify
    /// one system's packets between them, each holding the states of the
    /// flows it reads, then admit at most N states per key in all. The
    /// states this engine holds already take their places in it. A copy
    /// made to try a change on ([`Self::apply_all`]) counts on its own.
    pub fn share_limits(&mut self, table: std::sync::Arc<dyn crate::limits::LimitTable>) {
        self.rules.states.share(table);
    }

    /// Whether packets leaving a pipe walk the rules again (`one_pass` 0).
    pub fn one_pass(&self) -> bool {
        self.settings.one_pass
    }

    #[inline(always)]
    fn enqueue_now(&mut self, now: Nanos, shaped: Shaped<P>) -> Verdict<P> {
        let Shaped {
            payload,
            info,
            rule,
            tags,
            target,
        } = shaped;
        let len = u64::from(info.len);
        let held_limit = self.settings.held_limit;
        let room = if held_limit == 0 {
            u64::MAX
        } else {
            match held_limit.checked_sub(self.totals.held_bytes + len) {
                Some(room) => room,
                None => return self.refuse_for_memory(payload, rule.number, target),
            }
        };
        self.dn.copy_room = room;
        self.seq += 1;
        let held = Held {
            payload,
            info,
            tags: self.rules.tag_sets.id(tags),
            seq: self.seq,
            rule,
            target,
            enq_time: now,
            out_time: now,
            lost: false,
            marked: false,
        };
        let verdict = self.dn.enqueue(now, held);
        self.count_copies();
        match verdict {
            Ok(()) => {
                self.totals.inside += 1;
                self.totals.held_bytes += len;
                self.process_exits();
                Verdict::Queued {
                    rule: rule.number,
                    target,
                }
            }
            Err(Rejected { held, reason }) => {
                self.totals.drops[reason as usize] += 1;
                Verdict::Drop {
                    payload: held.payload,
                    reason,
                    rule: Some(rule.number),
                    target: Some(target),
                }
            }
        }
    }

    /// Copies `duplicate` just made are new packets: arrived, and inside
    /// until `poll` reports them delivered or dropped.
    #[inline]
    fn count_copies(&mut self) {
        let n = std::mem::take(&mut self.dn.new_copies);
        self.totals.arrived += n;
        self.totals.inside += n;
        self.totals.duplicated += n;
        self.totals.held_bytes += std::mem::take(&mut self.dn.new_copy_bytes);
    }

    /// A packet `held_limit` has no room for: dropped as it arrives, before
    /// any queue sees it (its rule counted it; its queue did not).
    #[cold]
    fn refuse_for_memory(&mut self, payload: P, rule: u16, target: Target) -> Verdict<P> {
        let reason = DropReason::MemoryLimit;
        self.totals.drops[reason.index()] += 1;
        Verdict::Drop {
            payload,
            reason,
            rule: Some(rule),
            target: Some(target),
        }
    }

    /// Packets the engine delivered (from [`Self::poll`], or passed by
    /// [`Self::input`]) that the caller then could not send: `packets` of
    /// them move from `delivered` to the drops for `reason` (usually
    /// [`DropReason::TxFailed`]), so the books say what became of them. At
    /// most what was delivered moves; the number moved is returned.
    pub fn unsent(&mut self, reason: DropReason, packets: u64) -> u64 {
        let n = packets.min(self.totals.delivered);
        self.totals.delivered -= n;
        self.totals.drops[reason.index()] += n;
        n
    }

    /// FreeBSD's `expire`: frees masked flows idle for [`EXPIRE_IDLE`].
    #[cold]
    fn expire(&mut self, now: Nanos) {
        self.next_expiry = now.saturating_add(EXPIRE_IDLE);
        if self.settings.expire {
            self.dn.expire_idle();
        }
        self.rules.states.sweep(now);
    }

    /// The engine's memory by part, now and at worst under the current
    /// configuration (see [`MemoryReport`]). From the sizes of its own
    /// records; a caller's payload `P` counts as `size_of::<P>()` plus the
    /// packet's length, whatever buffer it really holds.
    ///
    /// - packets: each held packet's record and length; at worst
    ///   `held_limit` bytes of packets of at least [`MIN_PACKET_LEN`] bytes
    ///   (or what is held, if it was lowered under that; unbounded without
    ///   `held_limit`: a delay line holds whatever
    ///   arrives in its delay). Room queues keep after a burst is not
    ///   counted; an idle queue gives it back at the next expiry sweep.
    /// - queues, instances: see [`Pipes::record_bytes`].
    /// - timers: the instances' link and delay-line timers, at most about
    ///   four entries per instance (see [`Pipes::timer_bytes`]).
    /// - states: `dyn_max` dynamic rules at worst.
    /// - rules, tables: what the commands made; traffic adds none.
    /// - log: at most [`classifier::LOG_CAPACITY`] events; more are counted
    ///   and shed.
    pub fn memory(&self) -> MemoryReport {
        use std::mem::size_of;
        let record = size_of::<Held<P>>() as u64;
        let packets = MemoryPart {
            name: "packets",
            now: self.totals.inside * record + self.totals.held_bytes,
            worst: match self.settings.held_limit {
                0 => None,
                // Lowered under what is held, it frees nothing: what is
                // held leaves in its time.
                limit => Some(
                    limit.max(self.totals.held_bytes)
                        + (limit / MIN_PACKET_LEN).max(self.totals.inside) * record,
                ),
            },
        };
        let [(q_now, q_worst), (i_now, i_worst)] = self.dn.record_bytes();
        let (t_now, t_worst) = self.dn.timer_bytes();
        let per_state = classifier::dynamic::States::bytes_per_state() as u64;
        let states = MemoryPart {
            name: "states",
            now: self.rules.states.len() as u64 * per_state,
            worst: Some(
                u64::from(self.settings.dyn_value(crate::command::DynSetting::Max))
                    .max(self.rules.states.len() as u64)
                    * per_state,
            ),
        };
        let rules = std::mem::size_of_val(self.rules.rules()) as u64;
        let tables = self.rules.tables.bytes() as u64;
        let log_event = size_of::<LogEvent>() as u64;
        let (queues, instances) = self.dn.instance_counts();
        MemoryReport {
            parts: vec![
                packets,
                MemoryPart {
                    name: "queues",
                    now: q_now,
                    worst: Some(q_worst),
                },
                MemoryPart {
                    name: "instances",
                    now: i_now,
                    worst: Some(i_worst),
                },
                MemoryPart {
                    name: "timers",
                    now: t_now,
                    worst: Some(t_worst),
                },
                states,
                MemoryPart {
                    name: "rules",
                    now: rules,
                    worst: Some(rules),
                },
                MemoryPart {
                    name: "tables",
                    now: tables,
                    worst: Some(tables),
                },
                MemoryPart {
                    name: "log",
                    now: self.rules.log.len() as u64 * log_event,
                    worst: Some(classifier::LOG_CAPACITY as u64 * log_event),
                },
            ],
            queues: queues as u64,
            instances: instances as u64,
            instance_limit: self.settings.instance_limit,
        }
    }

    /// Bytes one idle per-flow queue costs under a scheduler of type `kind`
    /// (see [`EXPIRE_IDLE`] for how they are reclaimed).
    pub fn idle_flow_bytes(&self, kind: &SchedType) -> usize {
        self.dn.idle_queue_bytes() + kind.queue_state_bytes
    }

    /// The next packet whose time has come by `now`, delivered or dropped.
    /// Call until it returns `None`. Always inlined: out of line, each
    /// packet's `Output` goes through memory, 92 instructions a packet more
    /// in `bench --scenario pipe` (LLVM's choice flipped when `Output` and
    /// `Held` gained the ECN mark's field).
    #[inline(always)]
    pub fn poll(&mut self, now: Nanos) -> Option<Output<P>> {
        self.now = self.now.max(now);
        loop {
            let out = match self.ready.pop_front() {
                Some(out) => Some(out),
                // With one_pass, what leaves dummynet is final: no need to
                // move it through `ready`.
                None => self
                    .dn
                    .exits
                    .pop_front()
                    .map(|Exit { held, at, drop }| output(held, at, drop)),
            };
            if let Some(out) = out {
                self.totals.inside -= 1;
                self.totals.held_bytes -= u64::from(out.info.len);
                match out.drop {
                    None => self.totals.delivered += 1,
                    Some(r) => self.totals.drops[r as usize] += 1,
                }
                return Some(out);
            }
            if !self.run_one(now) {
                return None;
            }
        }
    }

    /// When [`Self::poll`] next has something to return, or a scheduled
    /// command is due, if ever.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let packets = self.next_packet_deadline();
        let plan = self.plan.peek().map(|Reverse((t, ..))| *t);
        match (packets, plan) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When a packet may next leave the engine, or a scheduled command is
    /// due: a lower bound (polled then, the engine may still have nothing
    /// to return) that skips the timers at which packets only move inside
    /// it, such as a transmission ending before a delay line. A live caller
    /// sleeps until this rather than [`Self::next_deadline`]: the timers it
    /// skips run at their own times whenever the engine is next driven, so
    /// the outputs are the same, with fewer wake-ups.
    pub fn next_output_deadline(&self) -> Option<Nanos> {
        let packets = match (self.ready.front(), self.dn.exits.front()) {
            (Some(o), _) => Some(o.at),
            (None, Some(e)) => Some(e.at),
            (None, None) => self.dn.next_output_deadline(),
        };
        let plan = self.plan.peek().map(|Reverse((t, ..))| *t);
        match (packets, plan) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`Self::next_deadline`] leaving scheduled commands out: when a packet
    /// next moves. A caller draining the engine at the end of a run stops
    /// when this is `None`, since a repeating schedule never ends (steps due
    /// before a packet deadline still run, in order, when it is polled).
    pub fn next_packet_deadline(&self) -> Option<Nanos> {
        match (self.ready.front(), self.dn.exits.front()) {
            (Some(o), _) => Some(o.at),
            (None, Some(e)) => Some(e.at),
            (None, None) => self.dn.next_deadline(),
        }
    }

    /// Runs the earliest event due by `now`: a scheduled command (first, on
    /// a tie, so a change at T applies to what happens at T) or a dummynet
    /// timer. False when nothing is due.
    #[inline]
    fn run_one(&mut self, now: Nanos) -> bool {
        // Most calls find nothing due (every `input` and every `poll` ends
        // with one): answered here, without the call below.
        let step_due = self.plan.peek().is_some_and(|Reverse((t, ..))| *t <= now);
        if !step_due && self.dn.next_deadline().is_none_or(|d| d > now) {
            return false;
        }
        self.run_due(now)
    }

    /// [`Self::run_one`] once something may be due. Never inlined, so that
    /// `run_one` stays small enough to be inlined where it is called.
    #[inline(never)]
    fn run_due(&mut self, now: Nanos) -> bool {
        let step = self.plan.peek().map(|Reverse((t, ..))| *t);
        if let Some(t) = step.filter(|&t| t <= now) {
            if self.dn.next_deadline().is_none_or(|d| t <= d) {
                self.run_step(now);
                return true;
            }
        }
        if !self.dn.run_timer(now) {
            return false;
        }
        self.process_exits();
        true
    }

    /// Applies the earliest scheduled step, at its own time.
    fn run_step(&mut self, now: Nanos) {
        let Some(Reverse((at, _, id, i))) = self.plan.pop() else {
            return;
        };
        let Some(plan) = self.schedules.get_mut(&id) else {
            return;
        };
        let Some(cmd) = plan.steps.get(i as usize).map(|(_, c)| c.clone()) else {
            return;
        };
        match plan.every {
            Some(every) => {
                self.plan_seq += 1;
                self.plan
                    .push(Reverse((at.saturating_add(every), self.plan_seq, id, i)));
            }
            None => {
                plan.pending -= 1;
                if plan.pending == 0 {
                    self.schedules.remove(&id);
                }
            }
        }
        let late = now.saturating_sub(at);
        let st = &mut self.schedule_stats;
        st.max_late = st.max_late.max(late);
        st.last_late = late;
        let applied = self.apply_now(at, cmd);
        // A scheduled step has nobody to tell.
        self.notes.clear();
        match applied {
            Ok(()) => self.schedule_stats.applied += 1,
            Err(e) => {
                self.schedule_stats.failed += 1;
                self.schedule_stats.last_error = Some((at, e.message().to_string()));
            }
        }
    }

    /// What the scheduled commands have done (and how many wait).
    pub fn schedule_stats(&self) -> ScheduleStats {
        ScheduleStats {
            pending: self.plan.len(),
            ..self.schedule_stats.clone()
        }
    }

    /// Moves packets that already left dummynet, as final outputs, ahead of
    /// anything a configuration change is about to add (keeps time order).
    fn settle_exits(&mut self) {
        while let Some(Exit { held, at, drop }) = self.dn.exits.pop_front() {
            self.ready.push_back(output(held, at, drop));
        }
    }

    fn run_timers(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        while self.run_one(now) {}
    }

    /// Packets leaving dummynet: delivered, dropped, or (with `one_pass` 0)
    /// sent back through the ruleset after the rule that queued them.
    #[inline(always)]
    fn process_exits(&mut self) {
        if self.settings.one_pass {
            // Final as they are; `poll` takes them straight from dummynet.
            return;
        }
        self.reinject_exits();
    }

    /// [`Self::process_exits`] with `one_pass` 0. Kept out of line so that
    /// the check above costs a `one_pass` engine no call.
    fn reinject_exits(&mut self) {
        while !self.dn.exits.is_empty() {
            let mut exits = std::mem::take(&mut self.spare_exits);
            std::mem::swap(&mut exits, &mut self.dn.exits);
            for Exit { mut held, at, drop } in exits.drain(..) {
                if drop.is_some() || self.settings.one_pass {
                    self.ready.push_back(output(held, at, drop));
                    continue;
                }
                let start = self.rules.resume_after(held.rule);
                let walk = Walk {
                    bytes: Bytes {
                        ip: held.payload.ip_bytes(),
                        frame: held.payload.frame_bytes(),
                    },
                    ifs: &self.ifaces,
                    settings: &self.settings,
                };
                let mut tags = self.rules.tag_sets.get(held.tags);
                let (decision, rule) =
                    self.rules
                        .classify(start, at, &held.info, &mut tags, &walk, &mut self.rng);
                held.tags = self.rules.tag_sets.id(tags);
                held.rule = rule;
                let target = match decision {
                    Decision::Allow => {
                        self.ready.push_back(output(held, at, None));
                        continue;
                    }
                    Decision::Deny | Decision::StateRefused => {
                        self.ready
                            .push_back(output(held, at, Some(refusal(decision))));
                        continue;
                    }
                    Decision::Pipe(n) => Target::Pipe(n),
                    Decision::Queue(n) => Target::Queue(n),
                };
                held.target = target;
                // The packet is already counted in `held_bytes`; only a
                // copy of it would add to them.
                self.dn.copy_room = match self.settings.held_limit {
                    0 => u64::MAX,
                    limit => limit.saturating_sub(self.totals.held_bytes),
                };
                let verdict = self.dn.enqueue(at, held);
                self.count_copies();
                if let Err(Rejected { held, reason }) = verdict {
                    self.ready.push_back(output(held, at, Some(reason)));
                }
            }
            self.spare_exits = exits;
        }
    }

    // ---------------------------------------------------------------- accounting

    pub fn totals(&self) -> Totals {
        Totals {
            marks: self.dn.marks,
            duplicate_failed: self.dn.copies_failed,
            corrupted: self.dn.corrupted,
            ..self.totals
        }
    }

    /// Counts the packets actually held in queues, links, delay lines and the
    /// ready list: it must equal `totals().inside` (a check on the counters).
    /// Entries in the timer heap, stale ones included (for tests of its bound).
    pub fn timer_entries(&self) -> usize {
        self.dn.timer_entries()
    }

    /// Runs of trace opportunities served so far, a run being those at one
    /// instant (for tests that a dense trace costs one step per instant).
    pub fn trace_runs(&self) -> u64 {
        self.dn.trace_runs
    }

    pub fn held_packets(&self) -> u64 {
        self.dn.held() + self.ready.len() as u64
    }
}

/// The drop reason of a walk that ended in a refusal.
fn refusal(d: Decision) -> DropReason {
    match d {
        Decision::StateRefused => DropReason::StateRefused,
        _ => DropReason::RuleDeny,
    }
}

fn output<P>(held: Held<P>, at: Nanos, drop: Option<DropReason>) -> Output<P> {
    Output {
        payload: held.payload,
        info: held.info,
        at,
        drop,
        rule: Some(held.rule.number),
        target: Some(held.target),
        marked: held.marked,
    }
}
