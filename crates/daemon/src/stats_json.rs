//! `dummynet stats --json`: the data plane's [`Report`] as one JSON object
//! whose field names are a promise (the book: "stats --json"). Durations are
//! integer nanoseconds (`_ns`), sizes bytes (`_bytes`); every drop reason
//! is present, 0 when it never happened, so a script can read any of them
//! without checking it exists.

use std::collections::BTreeMap;

use serde::Serialize;

use dummynet_dataplane::dataplane::Report;

/// The JSON form of a [`Report`].
#[derive(Debug, Serialize)]
pub struct StatsJson<'a> {
    /// The books, in packets: `arrived = delivered + dropped + inside`,
    /// copies made by `duplicate` counted in `arrived`; a bridged frame
    /// counts once though it passes the rules twice (`passes`).
    pub totals: Totals,
    pub drops_by_reason: BTreeMap<&'static str, u64>,
    pub lateness_ns: Lateness,
    /// Scheduled commands (`at ... repeat`).
    pub schedule: Schedule<'a>,
    pub memory_bytes: Memory,
    /// Each backend's counters, by its name (`bridge A <-> B`, `host
    /// nfqueue N`).
    pub backends: BTreeMap<&'a str, BTreeMap<&'a str, u64>>,
    pub data_plane: DataPlane<'a>,
    /// The per-packet observer (`--log`, `--capture-in/-out`, `--mm-log`,
    /// the event tap), or `null` when the daemon has none.
    pub observer: Option<Observer<'a>>,
}

/// What the observer did with the data plane's records.
#[derive(Debug, Serialize)]
pub struct Observer<'a> {
    /// Records the data plane handed over.
    pub records: u64,
    /// Records its buffer could not take, by kind (`arrival`, `enqueue`,
    /// `forward`, `departure`, `drop`; every kind present); `lost` is their
    /// sum plus the events the files did not get after a write error
    /// (`error`): dropped from the observer, never from the traffic.
    pub lost: u64,
    pub lost_by_kind: BTreeMap<&'static str, u64>,
    /// The same sum by data-plane worker (`run --workers N`; one entry
    /// otherwise): each worker has a buffer of its own.
    pub lost_by_worker: Vec<u64>,
    /// Records the merge of the workers' streams wrote out of time order:
    /// they reached it more than its window after their time (0 with one
    /// worker, whose records are written as they come).
    pub out_of_order: u64,
    /// Lines written to `--log`, frames to the captures, lines to `--mm-log`.
    pub log_lines: u64,
    pub captured_in: u64,
    pub captured_out: u64,
    /// Frames the captures missed: no free buffer (their records still went).
    pub capture_lost: u64,
    pub mm_log_lines: u64,
    /// Subscribers of the event tap now, and the events they were too slow
    /// for (each subscription also counts its own).
    pub subscribers: u64,
    pub subscriber_lost: u64,
    /// The first write error, naming the file; files are not written
    /// after it.
    pub error: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct Totals {
    pub arrived: u64,
    pub delivered: u64,
    /// Passes through the rules: `arrived` and each bridged frame's `out`
    /// pass (what the rules' counters add up to).
    pub passes: u64,
    pub dropped: u64,
    pub inside: u64,
    pub duplicated: u64,
    pub duplicate_failed: u64,
    pub corrupted: u64,
    /// Marked ECN CE by an AQM instead of dropped.
    pub marked: u64,
}

/// How late departures were handed to the kernel (over the recent ones;
/// `max` since the start).
#[derive(Debug, Serialize)]
pub struct Lateness {
    pub samples: u64,
    pub p50: u64,
    pub p99: u64,
    pub max_recent: u64,
    pub max: u64,
    /// Handed over before their time: never, unless there is a bug.
    pub early: u64,
}

#[derive(Debug, Serialize)]
pub struct Schedule<'a> {
    pub applied: u64,
    pub refused: u64,
    pub pending: u64,
    pub cancelled: u64,
    pub late_last_ns: u64,
    pub late_max_ns: u64,
    pub last_error: Option<&'a str>,
}

/// `ipfw memory`: each part now and at worst (`null`: unbounded).
#[derive(Debug, Serialize)]
pub struct Memory {
    pub parts: BTreeMap<&'static str, MemoryPart>,
    pub queues: u64,
    pub instances: u64,
    pub instance_limit: u32,
}

#[derive(Debug, Serialize)]
pub struct MemoryPart {
    pub now: u64,
    pub worst: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct DataPlane<'a> {
    /// `SCHED_FIFO`, `nice -20` or `normal`.
    pub scheduling: &'a str,
    pub memory_locked: bool,
    /// `timer` or `max`.
    pub precision: &'a str,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub timer_median_late_ns: Option<u64>,
    pub timer_worst_late_ns: Option<u64>,
    pub wakes_for_input: u64,
    pub wakes_for_deadline: u64,
    pub naps: u64,
    /// Why it stopped by itself, if it did.
    pub failure: Option<&'a str>,
    /// Messages that could not be written to stderr.
    pub stderr_lost: u64,
}

impl<'a> StatsJson<'a> {
    pub fn of(r: &'a Report) -> StatsJson<'a> {
        let mut drops: BTreeMap<&'static str, u64> = dummynet_engine::DropReason::ALL
            .iter()
            .map(|d| (d.as_str(), 0))
            .collect();
        for &(name, n) in &r.drops {
            *drops.entry(name).or_default() += n;
        }
        StatsJson {
            totals: Totals {
                arrived: r.arrived,
                delivered: r.delivered,
                passes: r.passes,
                dropped: r.dropped,
                inside: r.inside,
                duplicated: r.duplicated,
                duplicate_failed: r.duplicate_failed,
                corrupted: r.corrupted,
                marked: r.marked,
            },
            drops_by_reason: drops,
            lateness_ns: Lateness {
                samples: r.lateness.samples,
                p50: r.lateness.p50_ns,
                p99: r.lateness.p99_ns,
                max_recent: r.lateness.max_recent_ns,
                max: r.lateness.max_ns,
                early: r.lateness.early,
            },
            schedule: Schedule {
                applied: r.schedule_applied,
                refused: r.schedule_failed,
                pending: r.schedule_pending,
                cancelled: r.schedule_cancelled,
                late_last_ns: r.schedule_late_last_ns,
                late_max_ns: r.schedule_late_max_ns,
                last_error: r.schedule_last_error.as_deref(),
            },
            memory_bytes: Memory {
                parts: r
                    .memory
                    .iter()
                    .map(|&(name, now, worst)| (name, MemoryPart { now, worst }))
                    .collect(),
                queues: r.memory_counts.0,
                instances: r.memory_counts.1,
                instance_limit: r.memory_counts.2,
            },
            backends: r
                .backends
                .iter()
                .map(|(name, counters)| {
                    let c = counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                    (name.as_str(), c)
                })
                .collect(),
            data_plane: DataPlane {
                scheduling: r.scheduling,
                memory_locked: r.memory_locked,
                precision: r.precision,
                cpu_ns: r.cpu_ns,
                wall_ns: r.wall_ns,
                timer_median_late_ns: r.timer_median_ns,
                timer_worst_late_ns: r.timer_worst_ns,
                wakes_for_input: r.wakes[0],
                wakes_for_deadline: r.wakes[1],
                naps: r.wakes[2],
                failure: r.failure.as_deref(),
                stderr_lost: r.stderr_lost,
            },
            observer: r.observer.as_ref().map(|o| Observer {
                records: o.sent,
                lost: o.lost_total(),
                lost_by_kind: dummynet_dataplane::observer::Kind::ALL
                    .iter()
                    .map(|k| {
                        let n = o.lost.iter().find(|(name, _)| *name == k.as_str());
                        (k.as_str(), n.map_or(0, |(_, n)| *n))
                    })
                    .collect(),
                lost_by_worker: o.lost_by_worker.clone(),
                out_of_order: o.out_of_order,
                log_lines: o.logged,
                captured_in: o.captured_in,
                captured_out: o.captured_out,
                capture_lost: o.capture_lost,
                mm_log_lines: o.mm_lines,
                subscribers: o.subscribers,
                subscriber_lost: o.subscriber_lost,
                error: o.error.as_deref(),
            }),
        }
    }

    /// One line of JSON.
    pub fn to_line(&self) -> String {
        // Only maps with string keys, strings and integers: serializing
        // cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_names_are_the_documented_ones() {
        let r = Report {
            arrived: 10,
            delivered: 6,
            dropped: 3,
            inside: 1,
            drops: vec![("queue-full", 2), ("plr", 1)],
            backends: vec![(
                "bridge a <-> b".to_string(),
                vec![("a.rx_frames".to_string(), 10)],
            )],
            memory: vec![("packets", 1500, Some(6000)), ("states", 0, None)],
            memory_counts: (2, 1, 65536),
            ..Report::default()
        };
        let v: serde_json::Value = serde_json::from_str(&StatsJson::of(&r).to_line()).unwrap();
        let t = &v["totals"];
        assert_eq!(
            (&t["arrived"], &t["delivered"], &t["dropped"], &t["inside"]),
            (&10.into(), &6.into(), &3.into(), &1.into())
        );
        let drops = v["drops_by_reason"].as_object().unwrap();
        assert_eq!(drops.len(), dummynet_engine::DropReason::ALL.len());
        assert_eq!(
            (&drops["queue-full"], &drops["plr"]),
            (&2.into(), &1.into())
        );
        assert_eq!(drops["memory-limit"], 0);
        assert_eq!(
            drops.values().map(|n| n.as_u64().unwrap()).sum::<u64>(),
            3,
            "the reasons add up to dropped"
        );
        for k in ["samples", "p50", "p99", "max", "max_recent", "early"] {
            assert!(v["lateness_ns"][k].is_u64(), "lateness_ns.{k}: {v}");
        }
        assert_eq!(v["backends"]["bridge a <-> b"]["a.rx_frames"], 10);
        let m = &v["memory_bytes"];
        assert_eq!(
            (
                &m["parts"]["packets"]["now"],
                &m["parts"]["packets"]["worst"]
            ),
            (&1500.into(), &6000.into())
        );
        assert!(m["parts"]["states"]["worst"].is_null(), "unbounded: {m}");
        assert_eq!(
            (&m["queues"], &m["instance_limit"]),
            (&2.into(), &65536.into())
        );
        assert!(v["data_plane"]["cpu_ns"].is_u64());
        assert!(v["observer"].is_null(), "no observer: {v}");
        let r = Report {
            observer: Some(dummynet_dataplane::observer::ObserverStats {
                sent: 9,
                lost: vec![("departure", 2)],
                logged: 7,
                ..Default::default()
            }),
            ..Report::default()
        };
        let v: serde_json::Value = serde_json::from_str(&StatsJson::of(&r).to_line()).unwrap();
        let o = &v["observer"];
        assert_eq!(
            (&o["records"], &o["lost"], &o["log_lines"]),
            (&9.into(), &2.into(), &7.into())
        );
        assert_eq!(o["lost_by_kind"]["departure"], 2);
        assert_eq!(
            o["lost_by_kind"]["arrival"], 0,
            "every kind is present: {o}"
        );
    }
}
