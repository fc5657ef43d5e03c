//! The sharded data plane's turns (`run --workers N`, [`crate::sharded`]).

use super::{Answer, DataPlane, HostView, Report, RequestKind, Settle};
use crate::sharded::{Broken, Done, Job, Worker};
use crate::Carrier;

/// The sharded data plane's turns (`run --workers N`, [`crate::sharded`]).
impl DataPlane {
    /// Once a turn: a follower joins the job the leader started, if any;
    /// every worker takes what the others handed it.
    pub(super) fn shard_turn(&mut self) {
        let Some(mut w) = self.worker.take() else {
            return;
        };
        if w.job_pending() {
            self.shard_follow(&mut w);
        }
        self.take_handoffs(&mut w);
        // A frame back for its `out` pass may have gone on to its pipe.
        w.ring_bells();
        self.worker = Some(w);
    }

    /// Queues what other workers handed this one, and acts on what its
    /// pipes say at once (a drop at the entry).
    pub(super) fn take_handoffs(&mut self, w: &mut Worker) {
        let (backends, targets, watch) = (
            &mut self.backends,
            &mut self.departures.targets,
            &mut self.watch,
        );
        watch.taking_handoffs();
        let id = |c: &Carrier| (c.id, c.copy);
        w.links
            .receive_tagged(&mut self.engine, id, |engine, at, info, v, id| {
                let mut s = Settle {
                    engine,
                    backends,
                    targets,
                    watch,
                    worker: None,
                    id,
                };
                s.verdict(at, info, v);
            });
    }

    /// Every worker, stopped for a job, drains its rings into its pipes,
    /// twice: a frame taken back for its `out` pass (rules with state) may
    /// go on to a pipe whose owner has drained already, and the second
    /// round takes it (that one only enqueues: nothing goes on from it).
    pub(super) fn drain_for_job(&mut self, w: &mut Worker) -> Result<(), Broken> {
        for _ in 0..2 {
            self.take_handoffs(w);
            w.barrier()?;
        }
        Ok(())
    }

    /// Worker `index`'s report, to add to the others': its backends named
    /// with it, its recent lateness samples kept.
    pub(super) fn shard_report(&mut self, index: usize) -> Report {
        let mut r = self.report();
        r.backends = tag_worker(std::mem::take(&mut r.backends), index);
        r.lateness_recent = self.departures.lateness.recent_sorted();
        r
    }

    /// A follower's part in the leader's job ([`Worker::join_job`]). If
    /// the workers' gate breaks meanwhile, it gives up: the loop sees the
    /// gate broken and stops.
    pub(super) fn shard_follow(&mut self, w: &mut Worker) {
        let _ = self.try_shard_follow(w);
    }

    pub(super) fn try_shard_follow(&mut self, w: &mut Worker) -> Result<(), Broken> {
        let job = w.join_job()?;
        self.drain_for_job(w)?;
        let accepted = w.wait_decision()?;
        let done = match job {
            Some(Job::Apply { commands, host }) => {
                if accepted {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    // Same configuration, same batch: taken as the leader
                    // took it.
                    let _ = self.engine.apply_all(now, commands);
                }
                Done::Applied
            }
            Some(Job::Snapshot) => Done::Snapshot(Box::new(self.engine.snapshot())),
            Some(Job::Report) => Done::Report(Box::new(self.shard_report(w.index()))),
            None => Done::Applied,
        };
        w.done(done)
    }

    /// The leader runs `job` on every worker; `mine` is its own part,
    /// done once all have stopped and drained their rings, before theirs.
    /// `Err` if a worker has stopped before `mine` was done (it is not
    /// done then); after, the others' parts may be missing (the data plane
    /// stops at its next turn either way).
    pub(super) fn shard_lead<T>(
        &mut self,
        w: &mut Worker,
        job: Job,
        mine: impl FnOnce(&mut Self) -> (T, bool),
    ) -> Result<(T, Vec<Done>), Broken> {
        w.begin(job)?;
        self.drain_for_job(w)?;
        let (out, accepted) = mine(self);
        let done = w.decide(accepted).and_then(|()| w.end());
        Ok((out, done.unwrap_or_default()))
    }

    /// A control request on a sharded data plane's leader: carried out by
    /// every worker, or given back (`Err`) when there is no sharding.
    pub(super) fn sharded_request(&mut self, kind: RequestKind) -> Result<Answer, RequestKind> {
        let Some(mut w) = self.worker.take() else {
            return Err(kind);
        };
        let workers = w.workers();
        let apply = |me: &mut Self, commands: Vec<dummynet_engine::Command>, host: &HostView| {
            me.engine.set_local_addrs(&host.addrs);
            me.engine.set_routes(host.routes.as_deref());
            let now = me.clock.now();
            let r = crate::workers::apply_checked(&mut me.engine, now, commands, workers);
            let ok = r.is_ok();
            (r, ok)
        };
        // A worker has stopped: nothing is changed, and what is read is
        // this worker's alone (the data plane stops at its next turn).
        let stopping = |b: Broken| {
            dummynet_engine::ConfigError::Conflict(format!(
                "the data plane is stopping ({}); nothing was changed",
                b.0
            ))
        };
        let answer = match kind {
            RequestKind::Apply { command, host } => {
                let job = Job::Apply {
                    commands: vec![(*command).clone()],
                    host: host.clone(),
                };
                match self.shard_lead(&mut w, job, |me| apply(me, vec![*command], &host)) {
                    Ok((r, _)) => Answer::Applied(r.map_err(|e| e.error)),
                    Err(b) => Answer::Applied(Err(stopping(b))),
                }
            }
            RequestKind::ApplyAll { commands, host } => {
                let job = Job::Apply {
                    commands: commands.clone(),
                    host: host.clone(),
                };
                match self.shard_lead(&mut w, job, |me| apply(me, commands, &host)) {
                    Ok((r, _)) => Answer::AppliedAll(r),
                    Err(b) => Answer::AppliedAll(Err(dummynet_engine::BatchError {
                        index: 0,
                        error: stopping(b),
                    })),
                }
            }
            RequestKind::Snapshot => {
                let (mut snap, done) = self
                    .shard_lead(&mut w, Job::Snapshot, |me| (me.engine.snapshot(), true))
                    .unwrap_or_else(|_| (self.engine.snapshot(), Vec::new()));
                for d in done {
                    if let Done::Snapshot(s) = d {
                        snap.merge(*s);
                    }
                }
                Answer::Snapshot {
                    snap: Box::new(snap),
                    now: self.clock.now(),
                }
            }
            RequestKind::Stats => {
                let own = |me: &mut Self| me.shard_report(0);
                let (mut report, done) = self
                    .shard_lead(&mut w, Job::Report, |me| (own(me), true))
                    .unwrap_or_else(|b| {
                        let mut r = own(self);
                        r.failure.get_or_insert(b.0);
                        (r, Vec::new())
                    });
                for d in done {
                    if let Done::Report(r) = d {
                        crate::sharded::absorb(&mut report, *r);
                    }
                }
                report.workers = Some(workers);
                Answer::Stats(Box::new(report))
            }
            RequestKind::Attach { backend, .. } => Answer::Attached(Err((
                format!(
                    "this daemon runs {workers} data-plane workers; shell --join needs one \
                     (run --workers 1)"
                ),
                backend,
            ))),
            RequestKind::Detach { .. } => Answer::Detached(
                None,
                Err(dummynet_engine::BatchError {
                    index: 0,
                    error: dummynet_engine::ConfigError::Conflict(format!(
                        "this daemon runs {workers} data-plane workers and has no joined shells"
                    )),
                }),
            ),
        };
        self.worker = Some(w);
        Ok(answer)
    }

    /// The end of a sharded data plane's worker: the leader stops the
    /// followers and adds their reports to its own (and drains its rings
    /// of what they handed it meanwhile).
    pub(super) fn shard_end(&mut self, mut w: Worker) -> Report {
        // Nobody waits for this worker any more, and if it failed, the
        // others stop and say why.
        if let Some(why) = &self.failure {
            w.leave(Some(why));
        }
        let mut reports = Vec::new();
        if w.is_leader() {
            for h in w.stop_followers() {
                reports.push(h.join());
            }
        }
        // What the others handed this worker before they stopped.
        self.take_handoffs(&mut w);
        let now = self.clock.now();
        while let Some(d) = self.engine.next_packet_deadline() {
            self.release(d.max(now));
        }
        self.departures.due = None;
        self.flush_all();
        let mut report = self.shard_report(w.index());
        for r in reports {
            match r {
                Ok(r) => crate::sharded::absorb(&mut report, r),
                Err(_) => {
                    report
                        .failure
                        .get_or_insert_with(|| "a data-plane worker panicked".into());
                }
            }
        }
        report.workers = Some(w.workers());
        report
    }
}

/// Backends' names with the worker that ran them.
pub(super) fn tag_worker(
    backends: Vec<(String, Vec<(String, u64)>)>,
    worker: usize,
) -> Vec<(String, Vec<(String, u64)>)> {
    backends
        .into_iter()
        .map(|(name, c)| (format!("worker {worker}: {name}"), c))
        .collect()
}
