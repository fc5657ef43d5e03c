//! What the data plane counted: `stats` and the report at the end.

use dummynet_engine::Target;

use super::books::TargetCounts;
use crate::clock::{LatenessHistogram, LatenessSummary};
use crate::observer::ObserverStats;

/// A line about the engine's memory for `stats` and the report at the end,
/// only when it calls for something: packets without a bound, a
/// configuration whose worst case exceeds the machine's memory (`total`),
/// or packets near their `held_limit`. Otherwise `None`; `ipfw memory`
/// shows every part, always.
pub fn memory_advice(m: &dummynet_engine::MemoryReport, total: Option<u64>) -> Option<String> {
    use dummynet_engine::stats::human_bytes;
    let now = human_bytes(m.now());
    let packets = m.part("packets");
    let Some(worst) = m.worst() else {
        return Some(format!(
            "memory: {now} now, and nothing bounds the packets held (no held_limit): a long \
             delay at a high rate can take all of this machine's memory; set a bound with \
             `sysctl net.inet.ip.dummynet.held_limit=SIZE` (or `run --memory-limit SIZE`)"
        ));
    };
    if let Some(total) = total.filter(|t| worst > *t) {
        let biggest = m.parts.iter().max_by_key(|p| p.worst.unwrap_or(0))?;
        let what = match biggest.name {
            "packets" => "lower `net.inet.ip.dummynet.held_limit` (or `run --memory-limit`)".to_string(),
            "queues" | "instances" | "timers" => format!(
                "lower `net.inet.ip.dummynet.instance_limit` (now {}: each masked pipe may make that \
                 many per-flow queues), or use narrower masks",
                m.instance_limit
            ),
            "states" => "lower `net.inet.ip.fw.dyn_max`".to_string(),
            _ => "see `dummynet ipfw memory`".to_string(),
        };
        return Some(format!(
            "memory: {now} now, but this configuration could take up to {} (more than this \
             machine's {}), mostly {}: {what}; `dummynet ipfw memory` shows each part",
            human_bytes(worst),
            human_bytes(total),
            biggest.name
        ));
    }
    if let Some(p) = packets.filter(|p| {
        p.worst
            .is_some_and(|w| p.now.saturating_mul(5) >= w.saturating_mul(4))
    }) {
        return Some(format!(
            "memory: the packets held take {} of at most {} (held_limit): arrivals beyond it \
             are dropped (`held-limit`); raise `net.inet.ip.dummynet.held_limit` if that is \
             not what you want",
            human_bytes(p.now),
            human_bytes(p.worst.unwrap_or(0))
        ));
    }
    None
}

/// This machine's memory (`MemTotal`), for [`memory_advice`].
pub(super) fn mem_total() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Everything the data plane counted, reported at shutdown and by `stats`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Packets (a bridged frame once, though it passes the rules twice).
    pub arrived: u64,
    pub delivered: u64,
    /// Passes through the rules: `arrived` plus the bridged frames' `out`
    /// passes.
    pub passes: u64,
    pub dropped: u64,
    /// Drops by reason (`queue-full`, `plr`, `deleted`, ...), non-zero only.
    pub drops: Vec<(&'static str, u64)>,
    pub inside: u64,
    /// Packets an AQM marked ECN CE instead of dropping (delivered or inside).
    pub marked: u64,
    /// Copies `duplicate` made (each also in `arrived`), copies it could not
    /// make (a packet the kernel holds), and packets `corrupt` hit.
    pub duplicated: u64,
    pub duplicate_failed: u64,
    pub corrupted: u64,
    /// Scheduled commands (`at`): applied, refused, waiting, and how late
    /// the data plane reached them (ns; the last and the worst).
    pub schedule_applied: u64,
    pub schedule_failed: u64,
    pub schedule_pending: u64,
    pub schedule_cancelled: u64,
    pub schedule_late_last_ns: u64,
    pub schedule_late_max_ns: u64,
    pub schedule_last_error: Option<String>,
    pub lateness: LatenessSummary,
    /// Every hand-over since the start by how late (for `/metrics`).
    pub lateness_histogram: LatenessHistogram,
    /// What left each pipe and queue since the start (for `/metrics`).
    #[serde(skip)]
    pub targets: Vec<(Target, TargetCounts)>,
    /// What the data plane got: "SCHED_FIFO", "nice -20" or "normal".
    pub scheduling: &'static str,
    /// The process's memory is locked (no page faults on the data path).
    pub memory_locked: bool,
    /// Rests a `SCHED_FIFO` data plane forced on itself, and their total
    /// length in ns (see [`Rest`]).
    pub rests: u64,
    pub rest_ns: u64,
    /// `timer` or `max` ([`Precision`]).
    pub precision: &'static str,
    /// How late the kernel's timer has lately woken the data plane (ns, the
    /// median and the worst of its last timed sleeps): what a `timer`
    /// precision can promise. `None` before the first.
    pub timer_median_ns: Option<u64>,
    pub timer_worst_ns: Option<u64>,
    /// The data-plane thread's CPU time and the wall time since it started.
    pub cpu_ns: u64,
    pub wall_ns: u64,
    /// The data plane's wake-ups: for input, for a deadline, naps.
    pub wakes: [u64; 3],
    /// While arrivals are read late ([`LATE_MIN_TRANSIT`]), the least time
    /// every one must stay inside, which bounds how late; `None` while
    /// they are read as they come.
    pub late_reads_within_ns: Option<u64>,
    /// Meanwhile, the backends still read as their packets come (their
    /// packets may leave sooner).
    pub late_watched: usize,
    pub backends: Vec<(String, Vec<(String, u64)>)>,
    /// The engine's memory by part: (name, bytes now, bytes at worst for
    /// the configuration, `None` if unbounded), then the queues and
    /// scheduler instances that exist and `instance_limit`
    /// ([`dummynet_engine::Engine::memory`]; rendered off the data plane).
    pub memory: Vec<(&'static str, u64, Option<u64>)>,
    pub memory_counts: (u64, u64, u32),
    /// Why the data plane stopped by itself: a backend could not go on
    /// ([`Backend::failure`]). `None` when it was asked to stop.
    pub failure: Option<String>,
    /// Messages the daemon could not write to stderr (a full disk, a
    /// closed pipe), and the first error ([`crate::say`]).
    pub stderr_lost: u64,
    pub stderr_error: Option<String>,
    /// The per-packet observer's counters (`--log`, captures, the event
    /// tap), when there is one.
    pub observer: Option<ObserverStats>,
    /// Data-plane workers (`run --workers N`), when more than one; the
    /// counts above are then their sums.
    pub workers: Option<usize>,
    /// A worker of several: its recent lateness samples, sorted, for the
    /// percentiles of all workers' ([`crate::sharded::absorb`]).
    #[serde(skip)]
    pub lateness_recent: Vec<u64>,
}

impl Report {
    /// One line for a user at exit: the traffic carried and what it cost.
    pub fn cost(&self) -> String {
        let secs = |ns: u64| ns as f64 / 1e9;
        format!(
            "{} packets delivered in {:.1} s; emulator CPU {:.2} s ({:.1}% of a core), \
             precision {}, release lateness p50 {:.1} us, p99 {:.1} us",
            self.delivered,
            secs(self.wall_ns),
            secs(self.cpu_ns),
            100.0 * self.cpu_ns as f64 / self.wall_ns.max(1) as f64,
            self.precision,
            self.lateness.p50_ns as f64 / 1e3,
            self.lateness.p99_ns as f64 / 1e3,
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "packets: {} arrived, {} delivered, {} dropped, {} inside",
            self.arrived, self.delivered, self.dropped, self.inside
        )?;
        if self.marked > 0 {
            write!(f, " ({} ECN-marked)", self.marked)?;
        }
        if self.passes != self.arrived {
            write!(f, ", {} passes through the rules", self.passes)?;
        }
        writeln!(f)?;
        if self.duplicated + self.duplicate_failed + self.corrupted > 0 {
            writeln!(
                f,
                "impairments: {} duplicated ({} could not be copied), {} corrupted",
                self.duplicated, self.duplicate_failed, self.corrupted
            )?;
        }
        if self.schedule_applied
            + self.schedule_failed
            + self.schedule_pending
            + self.schedule_cancelled
            > 0
        {
            write!(
                f,
                "scheduled: {} applied, {} refused, {} pending, {} cancelled; \
                 late by {:.1} us last, {:.1} us worst",
                self.schedule_applied,
                self.schedule_failed,
                self.schedule_pending,
                self.schedule_cancelled,
                self.schedule_late_last_ns as f64 / 1e3,
                self.schedule_late_max_ns as f64 / 1e3
            )?;
            if let Some(e) = &self.schedule_last_error {
                write!(f, "; last refusal: {e}")?;
            }
            writeln!(f)?;
        }
        if !self.drops.is_empty() {
            let list: Vec<String> = self
                .drops
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            writeln!(f, "drops: {}", list.join(", "))?;
        }
        write!(f, "{} ({}", self.lateness, self.scheduling)?;
        if self.memory_locked {
            write!(f, ", memory locked")?;
        }
        if self.rests > 0 {
            write!(
                f,
                "; {} forced rests, {:.1} ms",
                self.rests,
                self.rest_ns as f64 / 1e6
            )?;
        }
        writeln!(f, ")")?;
        write!(f, "precision {}", self.precision)?;
        if let (Some(m), Some(w)) = (self.timer_median_ns, self.timer_worst_ns) {
            write!(
                f,
                ": the timer lately wakes {:.1} us late (median), {:.1} us at worst",
                m as f64 / 1e3,
                w as f64 / 1e3
            )?;
        }
        write!(
            f,
            "; CPU {:.2} s in {:.1} s; woke {} times for input, {} for a deadline, {} napping",
            self.cpu_ns as f64 / 1e9,
            self.wall_ns as f64 / 1e9,
            self.wakes[0],
            self.wakes[1],
            self.wakes[2]
        )?;
        match self.late_reads_within_ns {
            Some(t) => {
                write!(
                    f,
                    "; arrivals read at departures, run at their kernel times (every one stays {:.1} ms)",
                    t as f64 / 1e6
                )?;
                match self.late_watched {
                    0 => writeln!(f)?,
                    n => writeln!(
                        f,
                        ", but {n} backend{} read as they come (theirs may leave sooner)",
                        if n == 1 { "" } else { "s" }
                    )?,
                }
            }
            None => writeln!(f, "; arrivals read as they come")?,
        }
        if self.stderr_lost > 0 {
            writeln!(
                f,
                "stderr: {} messages could not be written: {}",
                self.stderr_lost,
                self.stderr_error.as_deref().unwrap_or("unknown error")
            )?;
        }
        let memory = dummynet_engine::MemoryReport {
            parts: self
                .memory
                .iter()
                .map(|&(name, now, worst)| dummynet_engine::stats::MemoryPart { name, now, worst })
                .collect(),
            queues: self.memory_counts.0,
            instances: self.memory_counts.1,
            instance_limit: self.memory_counts.2,
        };
        if let Some(advice) = memory_advice(&memory, mem_total()) {
            writeln!(f, "{advice}")?;
        }
        if let Some(o) = &self.observer {
            writeln!(f, "{o}")?;
        }
        if let Some(n) = self.workers {
            writeln!(f, "workers: {n} (the counts above are their sums)")?;
        }
        for (name, counters) in &self.backends {
            let list: Vec<String> = counters
                .iter()
                .filter(|(_, v)| *v != 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            writeln!(f, "{name}: {}", list.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory line shows only when it calls for something, and says
    /// what to do.
    #[test]
    fn the_memory_line_is_said_only_when_useful() {
        use dummynet_engine::stats::MemoryPart;
        let report = |packets: Option<u64>, queues: u64, held: u64| dummynet_engine::MemoryReport {
            parts: vec![
                MemoryPart {
                    name: "packets",
                    now: held,
                    worst: packets,
                },
                MemoryPart {
                    name: "queues",
                    now: 1000,
                    worst: Some(queues),
                },
            ],
            queues: 1,
            instances: 1,
            instance_limit: 65536,
        };
        const GIB: u64 = 1 << 30;
        // Bounded, within the machine, far from the limit: nothing to say.
        assert_eq!(
            memory_advice(&report(Some(GIB), GIB, 0), Some(8 * GIB)),
            None
        );
        // More than the machine could give: what to lower.
        let said = memory_advice(&report(Some(GIB), 80 * GIB, 0), Some(8 * GIB)).unwrap();
        assert!(
            said.contains("instance_limit") && said.contains("8.0 GiB"),
            "{said}"
        );
        // Unbounded packets: how to bound them.
        let said = memory_advice(&report(None, GIB, 0), Some(8 * GIB)).unwrap();
        assert!(said.contains("held_limit"), "{said}");
        // Packets near their bound: that arrivals will be dropped.
        let said = memory_advice(&report(Some(GIB), GIB, GIB - 1), Some(8 * GIB)).unwrap();
        assert!(said.contains("held-limit"), "{said}");
        // The report says nothing of memory when there is nothing to say.
        let r = Report {
            memory: vec![("packets", 0, Some(GIB)), ("queues", 1000, Some(GIB))],
            ..Report::default()
        };
        assert!(!r.to_string().contains("memory"), "{r}");
    }
}
