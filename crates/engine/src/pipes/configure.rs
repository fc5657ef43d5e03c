//! Configuration: links, schedulers and flowsets made, changed and deleted
//! while packets are inside, as FreeBSD's `config_*` handlers do.

use super::path::{forget_bucket, new_policy};
use super::*;

impl<P: Payload> Pipes<P> {
    pub fn has_link(&self, n: u32) -> bool {
        self.links.contains_key(&n)
    }

    pub fn has_sched(&self, n: u32) -> bool {
        self.scheds.contains_key(&n)
    }

    pub fn has_flowset(&self, n: u32) -> bool {
        self.flowsets.contains_key(&n)
    }

    pub fn sched_kind(&self, n: u32) -> Option<&'static SchedType> {
        self.scheds.get(&n).map(|s| s.kind)
    }

    pub fn sched_mask(&self, n: u32) -> Option<FlowMask> {
        self.scheds.get(&n).map(|s| s.mask)
    }

    /// Flowset `n`'s configuration and the scheduler it feeds.
    pub fn flowset_config(&self, n: u32) -> Option<(&FlowsetConfig, u32)> {
        self.flowsets.get(&n).map(|f| (&f.cfg, f.sched))
    }

    pub fn sched_params(&self, n: u32) -> Option<&[(String, u64)]> {
        self.scheds.get(&n).map(|s| s.params.as_slice())
    }

    /// Takes every queued packet out (in arrival order) and resets every
    /// scheduler policy, so the configuration can change underneath. Links,
    /// delay lines and counters stay. Follow with [`Self::refill`].
    pub fn drain(&mut self) -> Vec<Held<P>> {
        let mut out = Vec::new();
        for item in self.queues.items.iter_mut().flatten() {
            out.extend(item.pkts.drain(..));
            item.bytes = 0;
        }
        for inst in self.instances.items.iter_mut().flatten() {
            inst.backlog = 0;
        }
        out.sort_by_key(|h| h.seq);
        out
    }

    /// Link `n`'s trace and when it started (its opportunities count from
    /// there), if the link is trace-driven.
    pub fn trace(&self, n: u32) -> Option<(std::sync::Arc<crate::impair::trace::Trace>, Nanos)> {
        let trace = self.links.get(&n)?.trace.clone()?;
        Some((trace, self.trace_starts.get(&n).copied().unwrap_or(0)))
    }

    /// Sets link `n` and every scheduler driving it, at `now`: a new or
    /// changed trace starts then; an unchanged one keeps its clock. A
    /// configuration without a `seed` keeps the link's; a changed seed
    /// restarts the streams of the pipe's queues and instances from it.
    pub fn set_link(&mut self, n: u32, mut cfg: LinkConfig, now: Nanos) {
        let old_seed = self.links.get(&n).and_then(|l| l.seed);
        if cfg.seed.is_none() {
            cfg.seed = old_seed;
        }
        let reseed = cfg.seed != old_seed;
        let same_trace = self
            .links
            .get(&n)
            .is_some_and(|old| old.trace.is_some() && old.trace == cfg.trace);
        if cfg.trace.is_none() {
            self.trace_starts.remove(&n);
        } else if !same_trace {
            self.trace_starts.insert(n, now);
        }
        let start = self.trace_starts.get(&n).copied().unwrap_or(0);
        let params = LinkParams::from_config(&cfg, start);
        for s in [n, n + DN_MAX_ID] {
            if let Some(sched) = self.scheds.get_mut(&s) {
                sched.link = params.clone();
                for &i in sched.instances.values() {
                    if let Some(inst) = self.instances.get_mut(i) {
                        inst.link.change_rate(now, &inst.params, &params);
                        inst.params = params.clone();
                    }
                }
            }
        }
        self.links.insert(n, cfg);
        self.least_delay = self.links.values().map(least_delay).min().unwrap_or(0);
        if reseed {
            self.reseed(n);
        }
    }

    /// Gives the queues and instances on link `n` fresh streams, named as
    /// new ones would be now (their other state stays).
    fn reseed(&mut self, n: u32) {
        let (seed, links) = (self.seed, &self.links);
        for s in [n, n + DN_MAX_ID] {
            let Some(sched) = self.scheds.get(&s) else {
                continue;
            };
            for (sid, &i) in &sched.instances {
                if let Some(inst) = self.instances.get_mut(i) {
                    inst.rng = object_stream(seed, links, 2, s, s, sid);
                }
            }
        }
        for (&nr, fs) in &self.flowsets {
            if fs.sched % DN_MAX_ID != n {
                continue;
            }
            for (&(_, qid), &q) in &fs.queues {
                if let Some(fx) = self.queues.get_mut(q).and_then(|q| q.fx.as_deref_mut()) {
                    fx.rng = object_stream(seed, links, 1, nr, fs.sched, &qid);
                }
            }
        }
    }

    /// Creates or changes scheduler `n` (its link must exist or be created by
    /// the caller first). A changed mask retires the old instances.
    pub fn set_sched(
        &mut self,
        n: u32,
        kind: &'static SchedType,
        params: Vec<(String, u64)>,
        mask: FlowMask,
    ) {
        let start = self.trace_starts.get(&(n % DN_MAX_ID)).copied();
        let link = self
            .links
            .get(&(n % DN_MAX_ID))
            .map(|c| LinkParams::from_config(c, start.unwrap_or(0)))
            .unwrap_or_default();
        let sub = kind.sub_queues.map(|f| f(&params));
        match self.scheds.get_mut(&n) {
            Some(s) => {
                let remask = s.mask != mask;
                // Queues made for other buckets or another AQM go (they are
                // drained); the refill makes them again under the new rules.
                // The sub-queues follow from the type and its parameters.
                let requeue = (s.sub.is_some() || sub.is_some())
                    && (!std::ptr::eq(s.kind, kind) || s.params != params);
                s.kind = kind;
                s.params = params;
                s.mask = mask;
                s.link = link;
                s.sizes = SchedSizes::of(kind, &s.params, sub.as_ref());
                s.sub = sub;
                for &i in s.instances.values() {
                    if let Some(inst) = self.instances.get_mut(i) {
                        inst.params = s.link.clone();
                        inst.bypass = kind.idle_bypass;
                        inst.limit = s.sub.as_ref().map(|s| s.limit);
                    }
                }
                if remask {
                    self.retire_instances(n);
                } else if requeue {
                    let fed: Vec<u32> = self
                        .flowsets
                        .iter()
                        .filter(|(_, f)| f.sched == n)
                        .map(|(&nr, _)| nr)
                        .collect();
                    for nr in fed {
                        self.remove_queues_of(nr);
                    }
                }
            }
            None => {
                self.scheds.insert(
                    n,
                    Sched {
                        kind,
                        mask,
                        link,
                        instances: FxHashMap::default(),
                        sizes: SchedSizes::of(kind, &params, sub.as_ref()),
                        params,
                        sub,
                    },
                );
            }
        }
    }

    /// Creates or changes flowset `n`. A changed mask or scheduler drops its
    /// (empty, drained) queues so they are rebuilt under the new rules.
    pub fn set_flowset(&mut self, n: u32, cfg: FlowsetConfig, sched: u32) {
        match self.flowsets.get_mut(&n) {
            Some(fs) => {
                let rekey = fs.cfg.mask != cfg.mask || fs.sched != sched;
                // AQM state depends on the queue limit too (PIE's third,
                // RED's unit), so either change gives the queues fresh state.
                let aqm_changed = fs.cfg.aqm != cfg.aqm || fs.cfg.limit != cfg.limit;
                fs.aqm_bytes = own_aqm_bytes(&cfg);
                fs.cfg = cfg;
                fs.sched = sched;
                if rekey {
                    self.remove_queues_of(n);
                } else {
                    let own_aqm = self.scheds.get(&sched).is_none_or(|s| s.sub.is_none());
                    self.refresh_queue_fx(n, aqm_changed && own_aqm);
                }
            }
            None => {
                self.flowsets.insert(
                    n,
                    Flowset {
                        aqm_bytes: own_aqm_bytes(&cfg),
                        cfg,
                        sched,
                        queues: FxHashMap::default(),
                        solo: None,
                    },
                );
            }
        }
    }

    /// Keeps flowset `n`'s queues' [`QueueFx`] in step with its
    /// configuration: made (with the queue's own stream) where now needed,
    /// and the AQM state made fresh if `new_aqm`. A queue keeps its stream
    /// and its loss state across changes, as a pipe keeps its packets.
    fn refresh_queue_fx(&mut self, n: u32, new_aqm: bool) {
        let Some(fs) = self.flowsets.get(&n) else {
            return;
        };
        for (&(_, qid), &q) in &fs.queues {
            let Some(queue) = self.queues.get_mut(q) else {
                continue;
            };
            let has_aqm = queue.fx.as_ref().is_some_and(|f| f.aqm.is_some());
            let fresh = new_aqm.then(|| aqm::new_state(&fs.cfg.aqm, fs.cfg.limit));
            let will_have_aqm = fresh.as_ref().map_or(has_aqm, Option::is_some);
            if queue.fx.is_none() && !needs_queue_fx(&fs.cfg, will_have_aqm) {
                continue;
            }
            match (&mut queue.fx, fresh) {
                (Some(fx), Some(a)) => {
                    fx.aqm = a;
                    fx.entry = EntryOptions::of(&fs.cfg);
                    fx.staged = States::entry(fx.staged.take(), &fs.cfg.staged);
                }
                (Some(fx), None) => {
                    fx.entry = EntryOptions::of(&fs.cfg);
                    fx.staged = States::entry(fx.staged.take(), &fs.cfg.staged);
                }
                (None, a) => {
                    let rng = object_stream(self.seed, &self.links, 1, n, fs.sched, &qid);
                    queue.fx = Some(QueueFx::new(rng, a.flatten(), &fs.cfg));
                }
            }
        }
    }

    pub fn delete_flowset(&mut self, n: u32) {
        self.remove_queues_of(n);
        self.flowsets.remove(&n);
    }

    /// Deletes scheduler `n` at `now`. As FreeBSD's `si_destroy` frees an
    /// instance's delay line, what its instances hold past their queues (on
    /// the link, on the delay lines) leaves at once as `Deleted` drops and
    /// the instances are freed; their queued packets are the caller's (they
    /// were drained, and `refill` finds no scheduler for them).
    pub fn delete_sched(&mut self, n: u32, now: Nanos) {
        self.retire_instances(n);
        // Its instances retired just now, and those an earlier new mask
        // retired that are still draining.
        let ids: Vec<InstId> = self
            .instances
            .iter()
            .filter(|(_, i)| i.sched == n && i.retired)
            .map(|(id, _)| id)
            .collect();
        for i in ids {
            self.purge(i, now);
        }
        self.scheds.remove(&n);
    }

    /// Frees retired instance `inst` now, its packets in flight leaving at
    /// `now` as `Deleted` drops, in the order they arrived. Its timers go
    /// stale and are skipped when they come up.
    fn purge(&mut self, inst: InstId, now: Nanos) {
        if !self.instances.get(inst).is_some_and(|i| i.retired) {
            return;
        }
        let Some(mut instance) = self.instances.remove(inst) else {
            return;
        };
        let mut doomed: Vec<Held<P>> = instance.dline.drain(..).collect();
        if let Some(fx) = instance.fx.as_deref_mut() {
            doomed.extend(fx.head.take().map(|(h, _)| h));
            while let Some(h) = fx.pop_early() {
                doomed.push(h);
            }
        }
        doomed.sort_by_key(|h| h.seq);
        for held in doomed {
            self.exits.push_back(Exit {
                held,
                at: now,
                drop: Some(DropReason::Deleted),
            });
        }
    }

    pub fn delete_link(&mut self, n: u32) {
        self.links.remove(&n);
        self.trace_starts.remove(&n);
        self.least_delay = self.links.values().map(least_delay).min().unwrap_or(0);
    }

    pub fn link_numbers(&self) -> Vec<u32> {
        self.links.keys().copied().collect()
    }

    pub fn sched_numbers(&self) -> Vec<u32> {
        self.scheds.keys().copied().collect()
    }

    pub fn flowset_numbers(&self) -> Vec<u32> {
        self.flowsets.keys().copied().collect()
    }

    /// The flowsets feeding scheduler `sched`, with their configuration.
    pub fn flowsets_of(&self, sched: u32) -> impl Iterator<Item = (u32, &FlowsetConfig)> {
        self.flowsets
            .iter()
            .filter(move |(_, fs)| fs.sched == sched)
            .map(|(&n, fs)| (n, &fs.cfg))
    }

    fn remove_queues_of(&mut self, fs_nr: u32) {
        let Some(fs) = self.flowsets.get_mut(&fs_nr) else {
            return;
        };
        fs.solo = None;
        let qs: Vec<((InstId, FlowKey), QueueId)> = fs.queues.drain().collect();
        for ((inst, qid), q) in qs {
            forget_bucket(&mut self.instances, inst, fs_nr, &qid, q);
            self.remove_queue(q);
        }
        // Its bucket tables go too: made again, at the new size, by the
        // first packet that needs one.
        for inst in self.instances.items.iter_mut().flatten() {
            inst.tables.retain(|t| t.flowset != fs_nr);
        }
    }

    fn remove_queue(&mut self, q: QueueId) {
        if let Some(queue) = self.queues.remove(q) {
            if let Some(inst) = self.instances.get_mut(queue.inst) {
                inst.queues.retain(|&x| x != q);
            }
            let inst = queue.inst;
            self.reap(inst);
        }
    }

    /// Detaches scheduler `n`'s instances: their queues go, and they live on
    /// only to finish their delay lines (after a new mask; a deletion then
    /// purges them).
    fn retire_instances(&mut self, n: u32) {
        let Some(sched) = self.scheds.get_mut(&n) else {
            return;
        };
        let ids: Vec<InstId> = sched.instances.drain().map(|(_, i)| i).collect();
        let mut doomed = Vec::new();
        for &i in &ids {
            if let Some(inst) = self.instances.get_mut(i) {
                inst.retired = true;
                inst.tables.clear();
                doomed.extend(inst.queues.iter().copied());
            }
        }
        for fs in self.flowsets.values_mut() {
            fs.queues.retain(|_, q| !doomed.contains(q));
            if fs.solo.is_some_and(|q| doomed.contains(&q)) {
                fs.solo = None;
            }
        }
        for q in doomed {
            self.remove_queue(q);
        }
        for i in ids {
            self.reap(i);
        }
    }

    /// After a configuration change: gives every live instance a fresh policy
    /// with its queues re-added at their flowsets' current weights, then puts
    /// the drained packets back, in arrival order, without re-applying limits,
    /// `plr` or AQM (they were accepted once). Packets whose target is gone
    /// come back as `Rejected`.
    pub fn refill(&mut self, now: Nanos, drained: Vec<Held<P>>) -> Vec<Rejected<P>> {
        let live: Vec<InstId> = self
            .instances
            .iter()
            .filter(|(_, i)| !i.retired)
            .map(|(id, _)| id)
            .collect();
        for id in live {
            let Some(inst) = self.instances.get_mut(id) else {
                continue;
            };
            let Some(sched) = self.scheds.get(&inst.sched) else {
                continue;
            };
            inst.policy = new_policy(sched.kind, &sched.params);
            inst.params = sched.link.clone();
            inst.bypass = sched.kind.idle_bypass;
            inst.limit = sched.sub.as_ref().map(|s| s.limit);
            for &q in &inst.queues {
                if let Some(queue) = self.queues.get_mut(q) {
                    let (weight, lmax) = self
                        .flowsets
                        .get(&queue.flowset)
                        .map_or((1, 0), |f| (f.cfg.weight, f.cfg.lmax));
                    queue.slot = inst.policy.add_queue_with_lmax(q, weight, lmax);
                }
            }
        }
        let mut rejected = Vec::new();
        let mut touched = Vec::new();
        for held in drained {
            let fs_nr = flowset_of(held.target);
            let linked = self
                .flowsets
                .get(&fs_nr)
                .map(|f| self.scheds.contains_key(&f.sched));
            match linked {
                None => rejected.push(Rejected {
                    held,
                    reason: DropReason::Deleted,
                }),
                Some(false) => rejected.push(Rejected {
                    held,
                    reason: DropReason::Deleted,
                }),
                Some(true) => match self.queue_for(fs_nr, &held.info.key, true) {
                    Ok((inst, q)) => {
                        self.push(q, inst, held);
                        touched.push(inst);
                    }
                    Err(reason) => rejected.push(Rejected { held, reason }),
                },
            }
        }
        touched.dedup();
        for inst in touched {
            self.kick(now, inst, None);
        }
        rejected
    }
}
