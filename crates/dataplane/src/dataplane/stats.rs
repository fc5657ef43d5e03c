//! `stats` and the report at the end: what every part of the data plane
//! counted, gathered into one [`Report`].

use super::{DataPlane, Report};
use crate::clock;

impl DataPlane {
    pub fn report(&mut self) -> Report {
        let (stderr_lost, stderr_error) = crate::say::stderr_lost().unzip();
        let stderr_lost = stderr_lost.unwrap_or(0);
        let t = self.engine.totals();
        let sched = self.engine.schedule_stats();
        let memory = self.engine.memory();
        Report {
            memory: memory
                .parts
                .iter()
                .map(|p| (p.name, p.now, p.worst))
                .collect(),
            memory_counts: (memory.queues, memory.instances, memory.instance_limit),
            // Frames, not passes: a bridged frame's `out` pass is not
            // another packet, and its `in` pass did not deliver it. With
            // workers, one worker may count the forward and another the
            // pass: each report may be "negative", their (wrapping) sum
            // is not ([`crate::sharded::absorb`]).
            arrived: t.arrived.wrapping_sub(self.departures.targets.1),
            delivered: t.delivered.wrapping_sub(self.departures.targets.1),
            passes: t.arrived,
            dropped: t.dropped(),
            drops: dummynet_engine::DropReason::ALL
                .iter()
                .zip(t.drops)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.as_str(), n))
                .collect(),
            inside: t.inside,
            marked: t.marks,
            duplicated: t.duplicated,
            duplicate_failed: t.duplicate_failed,
            corrupted: t.corrupted,
            schedule_applied: sched.applied,
            schedule_failed: sched.failed,
            schedule_pending: sched.pending as u64,
            schedule_cancelled: sched.cancelled,
            schedule_late_last_ns: sched.last_late,
            schedule_late_max_ns: sched.max_late,
            schedule_last_error: sched.last_error.map(|(_, e)| e),
            lateness: self.departures.lateness.summary(),
            lateness_histogram: self.departures.lateness.histogram(),
            targets: self.departures.targets.list(),
            scheduling: self.pacing.scheduling,
            memory_locked: self.pacing.memory_locked,
            rests: self.pacing.rest.as_ref().map_or(0, |r| r.rests),
            rest_ns: self.pacing.rest.as_ref().map_or(0, |r| r.rest_ns),
            precision: self.pacing.options.precision.as_str(),
            timer_median_ns: self.pacing.timer.median(),
            timer_worst_ns: self.pacing.timer.worst(),
            cpu_ns: clock::thread_cpu(),
            wall_ns: self.clock.now(),
            wakes: self.pacing.wakes,
            late_reads_within_ns: self.late.active.map(|p| p.transit),
            late_watched: self.late.active.map_or(0, |p| {
                (0..self.late.transits.len())
                    .filter(|&i| self.late.watched(i, Some(p)))
                    .count()
            }),
            backends: self
                .backends
                .slots
                .iter_mut()
                .zip(&self.backends.vacant)
                .filter(|(_, vacant)| !**vacant)
                .map(|(b, _)| (b.describe(), b.stats()))
                .collect(),
            failure: self.failure.clone(),
            stderr_lost,
            stderr_error,
            observer: self.watch.stats(),
            workers: None,
            lateness_recent: Vec::new(),
        }
    }
}
