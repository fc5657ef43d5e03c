//! Counters, drop reasons, and the read-only snapshot `show` is printed from.

use crate::command::{LinkConfig, RuleSpec};

use crate::flow::{FlowKey, FlowMask};
use crate::rng::Probability;
use crate::time::Nanos;
use crate::units::QueueLimit;

pub use crate::packet::DropReason;

/// Engine-wide accounting: the conservation law is
/// `arrived == delivered + dropped() + inside`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    pub arrived: u64,
    pub delivered: u64,
    pub drops: [u64; DropReason::ALL.len()],
    /// Packets held in queues, on links or in delay lines right now.
    pub inside: u64,
    /// Packets an AQM marked with ECN CE instead of dropping them. They are
    /// delivered (or still inside) like any other, so marks are not part of
    /// the conservation law.
    pub marks: u64,
    /// Copies `duplicate` made. Each is also counted in `arrived`, as a
    /// packet of its own, and then delivered, dropped or inside.
    pub duplicated: u64,
    /// Copies `duplicate` wanted but did not make: the payload could not be
    /// copied, or `held_limit` had no room for it.
    pub duplicate_failed: u64,
    /// Packets `corrupt` flipped a bit in (they are delivered as usual).
    pub corrupted: u64,
    /// The sum of [`crate::packet::PacketInfo::len`] over the packets
    /// `inside` counts: what `held_limit` bounds. It counts packet bytes,
    /// not the caller's buffers, which may be larger.
    pub held_bytes: u64,
}

impl Totals {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    pub fn drops_for(&self, r: DropReason) -> u64 {
        self.drops[r.index()]
    }

    /// True when every packet that entered is accounted for exactly once.
    pub fn conserved(&self) -> bool {
        self.arrived == self.delivered + self.dropped() + self.inside
    }

    /// Adds another engine's counters: the books of a data plane sharded
    /// over engine replicas are their sum (a packet classified on one and
    /// queued on another is `arrived` on the first, then `inside`,
    /// `delivered` or dropped on the second).
    pub fn add(&mut self, o: &Totals) {
        self.arrived += o.arrived;
        self.delivered += o.delivered;
        for (a, b) in self.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
        self.inside += o.inside;
        self.marks += o.marks;
        self.duplicated += o.duplicated;
        self.duplicate_failed += o.duplicate_failed;
        self.corrupted += o.corrupted;
        self.held_bytes += o.held_bytes;
    }
}

/// Counters of a queue or scheduler instance, as FreeBSD's `Tot_pkt/bytes Pkt/Byte Drp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowCounters {
    /// Packets and bytes that arrived (including those later dropped).
    pub tot_pkts: u64,
    pub tot_bytes: u64,
    /// Currently queued.
    pub len_pkts: u32,
    pub len_bytes: u64,
    pub drops: u64,
    /// A scheduler instance's accepted packets that found its link busy or
    /// packets queued ahead, and so waited for bandwidth (0 for a queue).
    pub waited: u64,
}

/// Everything `show`, `pipe show`, `queue show` and `sched show` print.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub now: Nanos,
    pub rules: Vec<RuleView>,
    pub links: Vec<LinkView>,
    pub scheds: Vec<SchedView>,
    pub flowsets: Vec<FlowsetView>,
    pub settings: crate::command::Settings,
    pub totals: Totals,
    /// Bit N set: rule set N is disabled.
    pub disabled_sets: u32,
    /// Dynamic rules (`keep-state`...), live ones, by rule.
    pub states: Vec<StateView>,
    /// States refused for `dyn_max` or a `limit`.
    pub states_refused: u64,
    /// Lookup tables, by name.
    pub tables: Vec<TableView>,
    /// The engine's memory, now and at worst ([`crate::Engine::memory`]).
    pub memory: MemoryReport,
}

impl Snapshot {
    /// Folds in the snapshot of another engine replica with the same
    /// configuration (a sharded data plane): rule counters add up, and the
    /// scheduler instances, per-flow queues and dynamic states each replica
    /// made are listed together (an instance lives on one replica only,
    /// the one that owns it). The configuration shown is this one's.
    pub fn merge(&mut self, o: Snapshot) {
        // States live until a time: told from the later of the two clocks
        // (a replica with no traffic lately has not seen time pass), those
        // that have run out by then are gone, as one engine at that time
        // would have them.
        let now = self.now.max(o.now);
        let live_at = |states: &mut Vec<StateView>, then: Nanos| {
            let gone = now - then;
            states.retain(|s| s.expires_in > gone);
            for s in states.iter_mut() {
                s.expires_in -= gone;
            }
        };
        live_at(&mut self.states, self.now);
        let mut theirs = o.states;
        live_at(&mut theirs, o.now);
        self.now = now;
        for (r, x) in self.rules.iter_mut().zip(o.rules) {
            if r.number == x.number {
                r.packets += x.packets;
                r.bytes += x.bytes;
                r.last_match = r.last_match.max(x.last_match);
                r.logged += x.logged;
            }
        }
        for (s, x) in self.scheds.iter_mut().zip(o.scheds) {
            if s.number == x.number {
                s.instances.extend(x.instances);
            }
        }
        for (f, x) in self.flowsets.iter_mut().zip(o.flowsets) {
            if f.number == x.number {
                f.flows.extend(x.flows);
            }
        }
        self.totals.add(&o.totals);
        self.states.extend(theirs);
        // In `ipfw -d show`'s order, as one engine lists them.
        self.states.sort_by_key(|a| (a.rule, a.key));
        self.states_refused += o.states_refused;
        for (p, x) in self.memory.parts.iter_mut().zip(o.memory.parts) {
            p.now += x.now;
            p.worst = p.worst.zip(x.worst).map(|(a, b)| a + b);
        }
        self.memory.queues += o.memory.queues;
        self.memory.instances += o.memory.instances;
    }
}

/// A dynamic rule, as `ipfw -d show` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct StateView {
    /// The rule that made it.
    pub rule: u16,
    pub packets: u64,
    pub bytes: u64,
    /// Time left to live.
    pub expires_in: Nanos,
    /// The flow as its first packet went.
    pub key: FlowKey,
    /// Its flow name (`default` unless `:name`).
    pub name: String,
    /// Made by `limit`.
    pub limit: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableView {
    pub name: crate::command::TableName,
    pub ty: crate::command::TableType,
    pub entries: Vec<(crate::command::TableKey, u32)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleView {
    pub number: u16,
    pub spec: RuleSpec,
    pub packets: u64,
    pub bytes: u64,
    /// Time of the last match, if any.
    pub last_match: Option<Nanos>,
    /// True for rule 65535.
    pub is_default: bool,
    /// Matches logged since the last `resetlog`.
    pub logged: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LinkView {
    pub number: u32,
    pub config: LinkConfig,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchedView {
    pub number: u32,
    /// Display name (`FIFO`, `WF2Q+`).
    pub kind: &'static str,
    pub mask: FlowMask,
    /// Type-specific parameters for display.
    pub params: Vec<(String, u64)>,
    /// In no particular order (sort by `id` to show them).
    pub instances: Vec<InstanceView>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InstanceView {
    /// Masked flow id of the instance (all zero without a mask).
    pub id: FlowKey,
    pub counters: FlowCounters,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FlowsetView {
    pub number: u32,
    /// The scheduler it feeds, and whether that scheduler exists.
    pub sched: u32,
    pub linked: bool,
    pub weight: u32,
    /// `lmax` and `pri` as configured (0 when not given).
    pub lmax: u32,
    pub pri: u32,
    pub limit: QueueLimit,
    pub plr: Probability,
    pub mask: FlowMask,
    pub buckets: u32,
    /// AQM display (`droptail`).
    pub aqm: String,
    /// netem's entry impairments, as configured.
    pub loss: Option<crate::impair::loss::LossModel>,
    pub duplicate: Option<crate::impair::duplicate::Duplicate>,
    pub corrupt: Option<crate::impair::corrupt::Corrupt>,
    /// Registered entry impairments (`drop-every`).
    pub staged: Vec<crate::impair::Staged>,
    /// In no particular order (sort by `id` to show them).
    pub flows: Vec<FlowView>,
}

impl FlowsetView {
    /// Its entry impairments, as [`crate::command::FlowsetConfig::impairments`]
    /// lists them for the configuration it shows.
    pub fn impairments(&self) -> impl Iterator<Item = &dyn crate::impair::Impairment> {
        crate::command::entry_impairments(&self.loss, &self.staged, &self.duplicate, &self.corrupt)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FlowView {
    pub id: FlowKey,
    pub counters: FlowCounters,
    /// For a queue feeding a flow-queueing scheduler (FQ-CoDel, FQ-PIE):
    /// the index of the scheduler's sub-queue it is, the 5-tuple's hash
    /// bucket; `id` then names no flow.
    pub sub_queue: Option<u32>,
}

/// One part of the engine's memory: bytes in use now, and the most the
/// current configuration lets it reach whatever traffic arrives (`None`:
/// nothing bounds it, e.g. packets without `held_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPart {
    pub name: &'static str,
    pub now: u64,
    pub worst: Option<u64>,
}

/// The engine's memory by part ([`crate::Engine::memory`]), from the sizes
/// of its own records (`size_of`), not from the allocator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryReport {
    /// `packets`, `queues`, `instances`, `timers`, `states`, `rules`,
    /// `tables`, `log`.
    pub parts: Vec<MemoryPart>,
    /// Per-flow queues and scheduler instances that exist, and
    /// `instance_limit`, which bounds each count.
    pub queues: u64,
    pub instances: u64,
    pub instance_limit: u32,
}

impl MemoryReport {
    pub fn now(&self) -> u64 {
        self.parts.iter().map(|p| p.now).sum()
    }

    /// The sum of the parts' worst cases, `None` if one is unbounded.
    pub fn worst(&self) -> Option<u64> {
        self.parts.iter().map(|p| p.worst).sum()
    }

    pub fn part(&self, name: &str) -> Option<&MemoryPart> {
        self.parts.iter().find(|p| p.name == name)
    }
}

impl std::fmt::Display for MemoryReport {
    /// A `memory:` block: one line per part, now and at worst, then the total.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let worst = |w: Option<u64>| match w {
            Some(b) => human_bytes(b),
            None => "unbounded".to_string(),
        };
        writeln!(
            f,
            "memory: {} now, {} at worst for this configuration",
            human_bytes(self.now()),
            worst(self.worst())
        )?;
        for p in &self.parts {
            write!(
                f,
                "  {:<10} {:>10} now, {:>10} at worst",
                p.name,
                human_bytes(p.now),
                worst(p.worst)
            )?;
            match p.name {
                "packets" if p.worst.is_none() => {
                    write!(f, " (set held_limit, run --memory-limit)")?
                }
                "queues" => write!(f, " ({} of at most {})", self.queues, self.instance_limit)?,
                "instances" => write!(
                    f,
                    " ({} of at most {})",
                    self.instances, self.instance_limit
                )?,
                _ => {}
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Bytes for a reader: B, KiB, MiB or GiB with one decimal.
pub fn human_bytes(b: u64) -> String {
    const K: f64 = 1024.0;
    let x = b as f64;
    if x < K {
        format!("{b} B")
    } else if x < K * K {
        format!("{:.1} KiB", x / K)
    } else if x < K * K * K {
        format!("{:.1} MiB", x / (K * K))
    } else {
        format!("{:.1} GiB", x / (K * K * K))
    }
}
