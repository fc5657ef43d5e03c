//! The data path: a packet's way through a flowset's queue, its scheduler
//! instance, the link and the delay line, and the timers that move it.

use super::*;

impl<P: Payload> Pipes<P> {
    // -------------------------------------------------------- data path

    /// The scheduler instance a packet bound for `target` with flow `key`
    /// would join: its scheduler's number and the flow under the
    /// scheduler's mask (see `Engine::instance`). `None` when the target
    /// or its scheduler does not exist.
    pub fn instance_of(&self, target: Target, key: &FlowKey) -> Option<(u32, FlowKey)> {
        let fs = self.flowsets.get(&flowset_of(target))?;
        let sched = self.scheds.get(&fs.sched)?;
        Some((fs.sched, sched.mask.apply(key)))
    }

    /// Queues a packet for `held.target`, or says why not. A copy made by
    /// `duplicate` is queued after it (or dropped into `exits`) and counted
    /// in `new_copies`.
    #[inline]
    pub fn enqueue(&mut self, now: Nanos, mut held: Held<P>) -> Result<(), Rejected<P>> {
        let fs_nr = flowset_of(held.target);
        let Some(fs) = self.flowsets.get(&fs_nr) else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let limit = fs.cfg.limit;
        // Fast path: an unmasked flowset on an unmasked scheduler has one queue.
        let (inst, q) = match fs
            .solo
            .and_then(|q| self.queues.get(q).map(|queue| (queue.inst, q)))
        {
            Some(found) => found,
            None => {
                if !self.scheds.contains_key(&fs.sched) {
                    return Err(Rejected {
                        held,
                        reason: DropReason::Unlinked,
                    });
                }
                match self.queue_for(fs_nr, &held.info.key, false) {
                    Ok(found) => found,
                    Err(reason) => return Err(Rejected { held, reason }),
                }
            }
        };
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let len = held.info.len;
        queue.tot_pkts += 1;
        queue.tot_bytes += u64::from(len);
        queue.touched = true;
        instance.counters.tot_pkts += 1;
        instance.counters.tot_bytes += u64::from(len);
        instance.touched = true;

        // FreeBSD's order: random loss, then AQM, then the limit; netem's
        // loss, duplicate and corrupt follow `plr` as more random loss.
        let mut copy = None;
        if let Some(fx) = queue.fx.as_deref_mut() {
            let EntryOptions {
                plr,
                loss,
                duplicate: dup,
                corrupt,
            } = fx.entry;
            if !plr.is_zero() && fx.rng.chance(plr) {
                queue.drops += 1;
                instance.counters.drops += 1;
                return Err(Rejected {
                    held,
                    reason: DropReason::Plr,
                });
            }
            if let Some(m) = &loss {
                if fx.loss.lost(m, &mut fx.rng) {
                    queue.drops += 1;
                    instance.counters.drops += 1;
                    return Err(Rejected {
                        held,
                        reason: DropReason::Loss,
                    });
                }
            }
            if let Some(staged) = fx.staged.as_deref_mut() {
                if staged.lost(now, len, &mut fx.rng) {
                    queue.drops += 1;
                    instance.counters.drops += 1;
                    return Err(Rejected {
                        held,
                        reason: DropReason::Loss,
                    });
                }
            }
            // The copy is made before corruption, as netem makes it.
            if dup.is_some_and(|d| fx.dup.copy(d, &mut fx.rng)) {
                let fits = u64::from(len) <= self.copy_room;
                match fits.then(|| held.payload.duplicate()).flatten() {
                    Some(payload) => {
                        copy = Some(Held {
                            payload,
                            info: held.info,
                            tags: held.tags,
                            seq: held.seq,
                            rule: held.rule,
                            target: held.target,
                            enq_time: now,
                            out_time: now,
                            lost: false,
                            marked: false,
                        })
                    }
                    None => self.copies_failed += 1,
                }
            }
            if corrupt.is_some_and(|c| fx.corrupt.hit(c, &mut fx.rng)) {
                self.corrupted += 1;
                if let Some(bytes) = held.payload.bytes_mut() {
                    corrupt::flip_one_bit(bytes, &mut fx.rng);
                }
            }
        }
        match copy {
            None => self.admit(now, q, inst, held, limit),
            Some(copy) => self.admit_with_copy(now, q, inst, held, copy, limit),
        }
    }

    /// [`Self::admit`] for a packet and then the copy `duplicate` made of
    /// it; if the queue refuses the copy, it leaves at once as a drop. Out
    /// of line, so that the packet without a copy goes straight from
    /// `admit` to the caller.
    #[inline(never)]
    fn admit_with_copy(
        &mut self,
        now: Nanos,
        q: QueueId,
        inst: InstId,
        held: Held<P>,
        copy: Held<P>,
        limit: QueueLimit,
    ) -> Result<(), Rejected<P>> {
        let result = self.admit(now, q, inst, held, limit);
        self.new_copies += 1;
        let len = u64::from(copy.info.len);
        self.new_copy_bytes += len;
        if let (Some(queue), Some(instance)) =
            (self.queues.get_mut(q), self.instances.get_mut(inst))
        {
            queue.tot_pkts += 1;
            queue.tot_bytes += len;
            instance.counters.tot_pkts += 1;
            instance.counters.tot_bytes += len;
        }
        if let Err(Rejected { held, reason }) = self.admit(now, q, inst, copy, limit) {
            self.exits.push_back(Exit {
                held,
                at: now,
                drop: Some(reason),
            });
        }
        result
    }

    /// The rest of the entry for a packet that survived random loss: its
    /// queue's AQM and limit, then the scheduler (or straight to an idle link).
    /// Always inlined: a call would move the packet (some 150 bytes) once
    /// more on every entry, and write its refusal once more on the way out.
    #[inline(always)]
    fn admit(
        &mut self,
        now: Nanos,
        q: QueueId,
        inst: InstId,
        mut held: Held<P>,
        limit: QueueLimit,
    ) -> Result<(), Rejected<P>> {
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return Err(Rejected {
                held,
                reason: DropReason::NoSuchTarget,
            });
        };
        let len = held.info.len;
        let state = QueueState {
            len_pkts: queue.pkts.len() as u32,
            len_bytes: queue.bytes,
        };
        let mut reason = None;
        let mut marked = false;
        if let Some(QueueFx {
            aqm: Some(a), rng, ..
        }) = queue.fx.as_deref_mut()
        {
            // A flow-queueing policy takes an idle queue back as a new flow:
            // FreeBSD's fq_codel and fq_pie restart its AQM then. Done before
            // the AQM sees the packet, which matches FreeBSD's fq_pie, where
            // the PIE of an idle flow is off and so cannot drop it.
            if state.len_pkts == 0 && instance.policy.is_idle(queue.slot) {
                a.restart(now);
            }
            let arrival = Arrival {
                now,
                len,
                ect: ecn::capable(held.payload.ip_bytes()),
                queue: state,
                link_bw: instance.params.bw,
            };
            match a.on_enqueue(&arrival, rng) {
                AqmVerdict::Accept => {}
                AqmVerdict::Mark => {
                    marked = held.payload.ip_bytes_mut().is_some_and(ecn::set_ce);
                    if !marked {
                        reason = Some(DropReason::Aqm);
                    }
                }
                AqmVerdict::Drop => reason = Some(DropReason::Aqm),
            }
        }
        // FreeBSD compares the bytes already queued, so one packet may
        // overshoot a byte limit; kept for identical drop counts.
        if reason.is_none() && instance.limit.is_none() && aqm::queue_full(limit, state) {
            reason = Some(DropReason::QueueFull);
        }
        if let Some(reason) = reason {
            queue.drops += 1;
            instance.counters.drops += 1;
            return Err(Rejected { held, reason });
        }
        if marked {
            queue.marks += 1;
            self.marks += 1;
            held.marked = true;
        }
        held.enq_time = now;
        // A link still sending (or packets queued ahead): this one waits for
        // bandwidth. Counted without a branch, on the hot path.
        let busy = instance.backlog != 0 || instance.link.active;
        instance.counters.waited += u64::from(busy);
        // A queue with an AQM always goes through enqueue and dequeue, so
        // the AQM sees every departure (as in FreeBSD). A gated link (slots,
        // a trace) decides itself when a packet may start.
        if !busy
            && instance.bypass
            && queue.fx.as_ref().is_none_or(|f| f.aqm.is_none())
            && !instance.params.gated
        {
            // Nothing queued and an idle link: the policy would hand this
            // packet straight back, so give it to the link directly.
            self.kick(now, inst, Some(held));
            return Ok(());
        }
        self.push(q, inst, held);
        if let Some(instance) = self.instances.get(inst) {
            if instance.limit.is_some_and(|l| instance.backlog > l) {
                self.drop_longest(now, inst);
            }
        }
        self.kick(now, inst, None);
        Ok(())
    }

    /// A flow-queueing instance holds more than its limit: drops the head
    /// packet of its longest queue (by packets; the first found on a tie), as
    /// FreeBSD's fq_codel and fq_pie do, which is seldom the queue of the
    /// light flow that just arrived. The scan is over the instance's queues,
    /// at most `flows` of them, and only on overflow.
    fn drop_longest(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        let mut longest: Option<(usize, QueueId)> = None;
        for &q in &instance.queues {
            let n = self.queues.get(q).map_or(0, |queue| queue.pkts.len());
            if n > longest.map_or(0, |(m, _)| m) {
                longest = Some((n, q));
            }
        }
        let Some(queue) = longest.and_then(|(_, q)| self.queues.get_mut(q)) else {
            return;
        };
        let Some(held) = queue.pkts.pop_front() else {
            return;
        };
        queue.bytes = queue.bytes.saturating_sub(u64::from(held.info.len));
        queue.drops += 1;
        instance.backlog = instance.backlog.saturating_sub(1);
        instance.counters.drops += 1;
        self.exits.push_back(Exit {
            held,
            at: now,
            drop: Some(DropReason::QueueFull),
        });
    }

    /// Appends to a queue and tells its scheduler.
    #[inline]
    pub(super) fn push(&mut self, q: QueueId, inst: InstId, held: Held<P>) {
        let (Some(queue), Some(instance)) = (self.queues.get_mut(q), self.instances.get_mut(inst))
        else {
            return;
        };
        let len = held.info.len;
        let was_empty = queue.pkts.is_empty();
        queue.bytes += u64::from(len);
        queue.pkts.push_back(held);
        instance.backlog += 1;
        instance.policy.enqueue(queue.slot, len, was_empty);
    }

    /// Starts an idle link, granting its burst allowance, and serves it;
    /// `first` is a packet handed over without queueing (see
    /// [`SchedType::idle_bypass`]), sent before anything the policy holds.
    /// Always inlined: a call would move `first` once more on its way to
    /// the link.
    #[inline(always)]
    pub(super) fn kick(&mut self, now: Nanos, inst: InstId, first: Option<Held<P>>) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        if instance.link.active {
            return;
        }
        instance.link.wake(now, &instance.params);
        if instance.params.gated && !self.wake_gate(now, inst) {
            return;
        }
        self.serve(now, inst, first);
    }

    /// A gated link wakes: a slotted one is served in its slot (true); a
    /// traced one waits for its next opportunity, those up to now having
    /// passed with nothing to send (false).
    fn wake_gate(&mut self, now: Nanos, inst: InstId) -> bool {
        let Some(instance) = self.instances.get_mut(inst) else {
            return false;
        };
        let fx = instance.fx.get_or_insert_with(Default::default);
        if let Some(slot) = &instance.params.slot {
            fx.slot.wake(now, slot, &mut instance.rng);
        }
        if let Some(tr) = &instance.params.trace {
            let start = instance.params.trace_start;
            fx.cursor = tr.first_after(start, now);
            // A finished `once` trace carries nothing more: its packets
            // stay queued (and are counted inside).
            if let Some(c) = fx.cursor {
                let at = tr.at(start, c);
                instance.link.active = true;
                instance.link_timer = Some(at);
                self.timers.arm(at, inst, TimerKind::Link);
            }
            return false;
        }
        true
    }

    /// FreeBSD's `serve_sched`: while the link has credit, dequeue and put on
    /// the wire; the packet that overdraws the credit finishes when the credit
    /// is back to zero, and the link sleeps until then. A slotted link also
    /// stops when its slot closes and sleeps until the next one opens.
    fn serve(&mut self, now: Nanos, inst: InstId, mut first: Option<Held<P>>) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        if instance.params.trace.is_some() {
            self.serve_trace(now, inst);
            return;
        }
        let Instance {
            params,
            link,
            link_timer,
            policy,
            backlog,
            limit,
            dline,
            rng,
            fx,
            counters,
            retired,
            ..
        } = instance;
        link.active = false;
        *link_timer = None;
        link.refill(now, params);
        if params.needs_fx() {
            fx.get_or_insert_with(Default::default);
        }
        // A packet a trace was sending when the link was reconfigured goes first.
        if first.is_none() {
            first = fx.as_mut().and_then(|f| f.head.take()).map(|(h, _)| h);
        }
        let lines_were_idle = dline.is_empty() && fx.as_ref().is_none_or(|f| f.early_is_empty());
        let mut ops = Ops {
            queues: &mut self.queues,
            popped: None,
            now,
            aqm_drops: Vec::new(),
            marks: 0,
        };
        let mut overtook = false;
        let mut slot_wait = None;
        // `backlog` guards the loop so an emptied instance costs no extra
        // call into its policy, except for a flow-queueing one (`limit`):
        // FreeBSD's fq_codel and fq_pie learn that their flows went idle
        // from the dequeue that finds them empty, which takes each out of
        // its list, so a returning flow is new again (and its AQM restarted).
        let flow_queueing = limit.is_some();
        while link.credit >= 0 {
            if let Some(t) = fx
                .as_ref()
                .filter(|_| params.slot.is_some())
                .and_then(|f| f.slot.closed_until(now))
            {
                if first.is_some() || *backlog > 0 {
                    slot_wait = Some(t);
                }
                break;
            }
            let mut held = match first.take() {
                Some(h) => h,
                None => {
                    if (*backlog == 0 && !flow_queueing) || policy.dequeue(&mut ops).is_none() {
                        break;
                    }
                    let Some(h) = ops.popped.take() else {
                        break;
                    };
                    *backlog = backlog.saturating_sub(1);
                    h
                }
            };
            let mut extra = 0;
            if let Some(pf) = &params.profile {
                let (e, lost) = profile::draw(pf, rng);
                extra = e;
                held.lost = lost;
            }
            link.credit -= params.cost(held.info.len, extra);
            if let (Some(slot), Some(f)) = (&params.slot, fx.as_mut()) {
                f.slot.sent(now, held.info.len, slot, rng);
            }
            // The packet that overdraws the credit is off the wire when the
            // credit is back to zero.
            let exit = if link.credit < 0 {
                now.saturating_add(link.time_to_zero(params))
            } else {
                now
            };
            if params.delay == 0
                && !params.shaped_delay
                && exit == now
                && dline.is_empty()
                && fx.as_ref().is_none_or(|f| f.early_is_empty())
            {
                // Off the wire at once with no delay to serve: skip the delay
                // line. (A packet that overdraws the credit still goes there,
                // to wait for the end of its transmission.)
                let drop = held.lost.then_some(DropReason::ProfileLoss);
                if drop.is_some() {
                    counters.drops += 1;
                }
                self.exits.push_back(Exit {
                    held,
                    at: now,
                    drop,
                });
                continue;
            }
            overtook |= delayline::place(params, fx.as_deref_mut(), rng, dline, held, exit);
        }
        self.marks += ops.marks;
        exit_aqm_drops(&mut self.exits, &mut ops.aqm_drops, backlog, counters, now);
        if link.credit >= 0 && slot_wait.is_none() {
            link.idle_time = now;
        } else {
            let mut at = if link.credit < 0 {
                now.saturating_add(link.time_to_zero(params))
            } else {
                now
            };
            if let Some(t) = slot_wait {
                at = at.max(t);
                // No credit builds up while the link waits for its slot: it
                // is not idle (its packets wait), just not allowed to send.
                link.credit = link.credit.max(0);
                link.sched_time = at;
            }
            link.active = true;
            *link_timer = Some(at);
            self.timers.arm(at, inst, TimerKind::Link);
        }
        let holds = !dline.is_empty() || fx.as_ref().is_some_and(|f| !f.early_is_empty());
        if lines_were_idle || overtook {
            if holds {
                self.release(now, inst);
            } else if *retired {
                self.reap(inst);
            }
        }
    }

    /// A traced link at one of its opportunities (mahimahi's
    /// `rationalize`): each opportunity at `now` carries 1504 bytes of the
    /// queue, a packet larger than what is left finishing in a later one;
    /// what an opportunity cannot use is lost. The link then sleeps until
    /// the next opportunity if anything waits, or goes idle.
    fn serve_trace(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        let Instance {
            params,
            link,
            link_timer,
            policy,
            backlog,
            limit,
            dline,
            rng,
            fx,
            counters,
            ..
        } = instance;
        let Some(tr) = params.trace.clone() else {
            return;
        };
        let start = params.trace_start;
        link.active = false;
        *link_timer = None;
        let fx = fx.get_or_insert_with(Default::default);
        let lines_were_idle = dline.is_empty() && fx.early_is_empty();
        // The opportunity this timer was set for; found again if the link
        // changed underneath.
        let mut cur = match fx.cursor.filter(|&c| tr.at(start, c) == now) {
            Some(c) => Some(c),
            None => tr.first_after(start, now.saturating_sub(1)),
        };
        let mut ops = Ops {
            queues: &mut self.queues,
            popped: None,
            now,
            aqm_drops: Vec::new(),
            marks: 0,
        };
        let flow_queueing = limit.is_some();
        let mut overtook = false;
        while let Some(c) = cur.filter(|&c| tr.at(start, c) <= now) {
            // The run of opportunities at this instant is one credit: the
            // same as serving them one by one (a packet's bytes carry from
            // one to the next, and what the queue leaves is lost either
            // way), at a cost that does not grow with the run.
            let run = tr.run_len(c.index).max(1);
            self.trace_runs += 1;
            let mut budget = u64::from(trace::OPPORTUNITY_BYTES).saturating_mul(run as u64);
            while budget > 0 {
                if fx.head.is_none() {
                    if (*backlog == 0 && !flow_queueing) || policy.dequeue(&mut ops).is_none() {
                        break;
                    }
                    let Some(h) = ops.popped.take() else {
                        break;
                    };
                    *backlog = backlog.saturating_sub(1);
                    let bill = params.billed(h.info.len).max(1);
                    fx.head = Some((h, bill));
                }
                let Some((_, left)) = fx.head.as_mut() else {
                    break;
                };
                if *left > budget {
                    *left -= budget;
                    budget = 0;
                } else {
                    budget -= *left;
                    if let Some((h, _)) = fx.head.take() {
                        overtook |= delayline::place(params, Some(&mut *fx), rng, dline, h, now);
                    }
                }
            }
            cur = tr.next(trace::TraceCursor {
                lap: c.lap,
                index: c.index + run - 1,
            });
        }
        fx.cursor = cur;
        self.marks += ops.marks;
        exit_aqm_drops(&mut self.exits, &mut ops.aqm_drops, backlog, counters, now);
        if fx.head.is_some() || *backlog > 0 {
            if let Some(c) = cur {
                let at = tr.at(start, c);
                link.active = true;
                *link_timer = Some(at);
                self.timers.arm(at, inst, TimerKind::Link);
            }
        }
        let holds = !dline.is_empty() || !fx.early_is_empty();
        if (lines_were_idle || overtook) && holds {
            self.release(now, inst);
        }
    }

    /// Moves due packets off the delay lines, in exit order, and arms the
    /// release for the next.
    fn release(&mut self, now: Nanos, inst: InstId) {
        let Some(instance) = self.instances.get_mut(inst) else {
            return;
        };
        instance.dline_timer = None;
        while let Some((at, fifo)) = delayline::next_out(&instance.dline, instance.fx.as_deref()) {
            if at > now {
                instance.dline_timer = Some(at);
                self.timers.arm(at, inst, TimerKind::DelayLine);
                break;
            }
            let h = if fifo {
                instance.dline.pop_front()
            } else {
                instance.fx.as_mut().and_then(|f| f.pop_early())
            };
            let Some(h) = h else {
                break;
            };
            let (at, drop) = (h.out_time, h.lost.then_some(DropReason::ProfileLoss));
            if drop.is_some() {
                instance.counters.drops += 1;
            }
            self.exits.push_back(Exit { held: h, at, drop });
        }
        // Only a retired instance can be reaped; checked here, where the
        // instance is at hand, the release of a live one skips the call.
        if instance.retired {
            self.reap(inst);
        }
        if self.timers.bloated() {
            self.timers.compact(&self.instances);
        }
    }

    /// Frees a retired instance once it holds nothing.
    pub(super) fn reap(&mut self, inst: InstId) {
        let done = self.instances.get(inst).is_some_and(|i| {
            i.retired
                && !i.holds_in_flight()
                && i.backlog == 0
                && !i.link.active
                && i.queues.is_empty()
        });
        if done {
            self.instances.remove(inst);
        }
    }

    /// Whether every link only delays (no bandwidth, profile or
    /// impairment) and every flowset takes packets as they come (no `plr`,
    /// impairment or AQM): then nothing here counts packets, and a burst
    /// fares as the packets it stands for would.
    pub fn only_delays(&self) -> bool {
        let link =
            |l: &LinkConfig| l.bw == 0 && l.profile.is_none() && l.impairments().next().is_none();
        let flowset = |f: &Flowset| {
            f.cfg.plr.is_zero() && f.cfg.impairments().next().is_none() && f.cfg.aqm.is_droptail()
        };
        self.links.values().all(link) && self.flowsets.values().all(flowset)
    }

    /// The least time any configured link keeps a packet after its
    /// transmission (0 without links).
    pub fn least_delay(&self) -> Nanos {
        self.least_delay
    }

    /// The least time a packet sent to `target` stays inside: the least
    /// delay of the link its scheduler feeds. `None` when the target or
    /// its link does not exist (the packet is dropped at the entry).
    pub fn least_delay_of(&self, target: Target) -> Option<Nanos> {
        let fs = self.flowsets.get(&flowset_of(target))?;
        // A pipe's FIFO scheduler is numbered DN_MAX_ID above its link.
        self.links.get(&(fs.sched % DN_MAX_ID)).map(least_delay)
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.timers.heap.peek().map(|Reverse((t, ..))| *t)
    }

    /// The earliest time a packet may leave: each delay-line timer's time,
    /// each link timer's plus the least delay of any link, whichever comes
    /// first. A lower bound, never later than a real exit, so a caller that
    /// only needs to be awake when packets leave may sleep through the link
    /// timers before it: they run, at their own times, whenever the engine
    /// is next driven. Worked out over the timers when they are few (a
    /// shell, a bridge with a few pipes); with more, it is
    /// [`Self::next_deadline`], which keeps the packet path free of any
    /// bookkeeping for it.
    pub fn next_output_deadline(&self) -> Option<Nanos> {
        const SCANNED: usize = 64;
        if self.least_delay == 0 || self.timers.heap.len() > SCANNED {
            return self.next_deadline();
        }
        self.timers
            .heap
            .iter()
            .map(|&Reverse((t, _, _, kind))| match kind {
                TimerKind::Link => t.saturating_add(self.least_delay),
                TimerKind::DelayLine => t,
            })
            .min()
    }

    /// Runs the earliest timer if it is due at or before `now`. Returns false
    /// when nothing is due. Exits land in `self.exits`.
    pub fn run_timer(&mut self, now: Nanos) -> bool {
        let Some(&Reverse((at, _, inst, kind))) = self.timers.heap.peek() else {
            return false;
        };
        if at > now {
            return false;
        }
        if self.timers.bloated() {
            self.timers.compact(&self.instances);
            return true;
        }
        self.timers.heap.pop();
        let Some(i) = self.instances.get(inst) else {
            return true;
        };
        match kind {
            TimerKind::Link if i.link_timer == Some(at) => self.serve(at, inst, None),
            TimerKind::DelayLine if i.dline_timer == Some(at) => self.release(at, inst),
            _ => {} // superseded
        }
        true
    }

    /// The instance and queue for a key in flowset `fs_nr` (which exists and
    /// is linked), created on first use. Past `instance_limit` a new one is
    /// refused (`InstanceLimit`), unless `beyond_limit`: packets already
    /// inside, put back after a reconfiguration, are never lost to it.
    pub(super) fn queue_for(
        &mut self,
        fs_nr: u32,
        key: &FlowKey,
        beyond_limit: bool,
    ) -> Result<(InstId, QueueId), DropReason> {
        let Some(fs) = self.flowsets.get_mut(&fs_nr) else {
            return Err(DropReason::NoSuchTarget);
        };
        if let Some(q) = fs.solo {
            if let Some(queue) = self.queues.get(q) {
                return Ok((queue.inst, q));
            }
        }
        let Some(sched) = self.scheds.get_mut(&fs.sched) else {
            return Err(DropReason::Unlinked);
        };
        let cap = if beyond_limit {
            usize::MAX
        } else {
            self.instance_limit as usize
        };
        let sid = sched.mask.apply(key);
        let inst = match sched.instances.get(&sid) {
            Some(&i) => i,
            // Refused before anything is made: a flow needs both.
            None if self.instances.len() >= cap || self.queues.len() >= cap => {
                return Err(DropReason::InstanceLimit)
            }
            None => {
                let rng = object_stream(self.seed, &self.links, 2, fs.sched, fs.sched, &sid);
                let i = self.instances.insert(Instance {
                    sched: fs.sched,
                    id: sid,
                    policy: new_policy(sched.kind, &sched.params),
                    queues: Vec::new(),
                    tables: Vec::new(),
                    backlog: 0,
                    link: LinkState::default(),
                    params: sched.link.clone(),
                    bypass: sched.kind.idle_bypass,
                    limit: sched.sub.as_ref().map(|s| s.limit),
                    link_timer: None,
                    dline: VecDeque::new(),
                    dline_timer: None,
                    rng,
                    fx: None,
                    counters: FlowCounters::default(),
                    retired: false,
                    touched: true,
                });
                sched.instances.insert(sid, i);
                i
            }
        };
        // A flow-queueing type hashes the 5-tuple into its own buckets and
        // manages them with its own AQM; the flowset's mask and AQM step aside.
        let buckets = sched.sub.as_ref().map_or(0, |sub| sub.buckets);
        let bucket = sched.sub.as_ref().map(|_| sched::bucket_of(key, buckets));
        if let Some(b) = bucket {
            if let Some(q) = bucket_queue(&self.instances, &self.queues, inst, fs_nr, b) {
                return Ok((inst, q));
            }
        }
        let qid = match bucket {
            Some(b) => FlowKey {
                src: u128::from(b),
                ..FlowKey::default()
            },
            None => fs.cfg.mask.apply(key),
        };
        if let Some(&q) = fs.queues.get(&(inst, qid)) {
            if let Some(b) = bucket {
                set_bucket_queue(&mut self.instances, inst, fs_nr, (b, buckets), q);
            }
            return Ok((inst, q));
        }
        if self.queues.len() >= cap {
            // A new flow of the flowset's mask in an instance that exists.
            return Err(DropReason::InstanceLimit);
        }
        let aqm = match &sched.sub {
            Some(sub) => sub.aqm.new_state(sub.aqm_limit),
            None => aqm::new_state(&fs.cfg.aqm, fs.cfg.limit),
        };
        let rng = object_stream(self.seed, &self.links, 1, fs_nr, fs.sched, &qid);
        let fx = needs_queue_fx(&fs.cfg, aqm.is_some()).then(|| QueueFx::new(rng, aqm, &fs.cfg));
        let q = self.queues.insert(FlowQueue {
            pkts: VecDeque::new(),
            bytes: 0,
            flowset: fs_nr,
            inst,
            slot: 0,
            tot_pkts: 0,
            tot_bytes: 0,
            drops: 0,
            marks: 0,
            fx,
            touched: true,
        });
        if let Some(instance) = self.instances.get_mut(inst) {
            let slot = instance
                .policy
                .add_queue_with_lmax(q, fs.cfg.weight, fs.cfg.lmax);
            instance.queues.push(q);
            if let Some(queue) = self.queues.get_mut(q) {
                queue.slot = slot;
            }
        }
        fs.queues.insert((inst, qid), q);
        if fs.cfg.mask.is_empty() && sched.mask.is_empty() && sched.sub.is_none() {
            fs.solo = Some(q);
        }
        if let Some(b) = bucket {
            set_bucket_queue(&mut self.instances, inst, fs_nr, (b, buckets), q);
        }
        Ok((inst, q))
    }

    /// FreeBSD's `expire`, run by the engine about once a second: frees the
    /// per-flow queues and scheduler instances that masks created and that
    /// have been empty with no arrival since the previous sweep, so a flow
    /// goes one to two sweep periods after its last packet. Their counters go
    /// with them, as in FreeBSD. Queues that stay (of unmasked flowsets) give
    /// back the buffer they grew while busy. Returns how many queues and
    /// instances were freed.
    pub fn expire_idle(&mut self) -> (usize, usize) {
        let mut freed_queues = 0;
        for (&fs_nr, fs) in self.flowsets.iter_mut() {
            let sched_masked = self
                .scheds
                .get(&fs.sched)
                .is_some_and(|s| !s.mask.is_empty());
            if fs.cfg.mask.is_empty() && !sched_masked {
                continue;
            }
            let queues = &mut self.queues;
            let instances = &mut self.instances;
            fs.queues.retain(|&(inst, qid), &mut q| {
                let Some(queue) = queues.get(q) else {
                    forget_bucket(instances, inst, fs_nr, &qid, q);
                    return false;
                };
                if queue.touched || !queue.pkts.is_empty() {
                    return true;
                }
                forget_bucket(instances, inst, fs_nr, &qid, q);
                if let Some(inst) = instances.get_mut(queue.inst) {
                    inst.policy.remove_queue(queue.slot);
                    inst.queues.retain(|&x| x != q);
                }
                queues.remove(q);
                freed_queues += 1;
                false
            });
        }
        for item in self.queues.items.iter_mut().flatten() {
            if !item.touched && item.pkts.is_empty() && item.pkts.capacity() > 0 {
                item.pkts = VecDeque::new();
            }
            item.touched = false;
        }
        let mut freed_instances = 0;
        for sched in self.scheds.values_mut() {
            if sched.mask.is_empty() {
                continue;
            }
            let instances = &mut self.instances;
            sched.instances.retain(|_, &mut i| {
                let Some(inst) = instances.get(i) else {
                    return false;
                };
                let idle = !inst.touched
                    && inst.queues.is_empty()
                    && inst.backlog == 0
                    && !inst.holds_in_flight()
                    && !inst.link.active;
                if idle {
                    instances.remove(i);
                    freed_instances += 1;
                }
                !idle
            });
        }
        for inst in self.instances.items.iter_mut().flatten() {
            inst.touched = false;
            // Room left by queues that went, given back, so what the
            // instances' lists hold stays within twice the queues that exist.
            if inst.queues.capacity() > 2 * inst.queues.len() + 4 {
                inst.queues.shrink_to_fit();
            }
        }
        (freed_queues, freed_instances)
    }

    /// Bytes an idle per-flow queue costs: its record, its slot in the
    /// flowset's table and its entry in the scheduler policy.
    pub fn idle_queue_bytes(&self) -> usize {
        std::mem::size_of::<Option<FlowQueue<P>>>()
            + std::mem::size_of::<((InstId, FlowKey), QueueId)>()
            + 1 // hashbrown's control byte
    }

    /// Entries in the timer heap (stale ones included).
    pub fn timer_entries(&self) -> usize {
        self.timers.heap.len()
    }

    /// Bytes of the timer heap now and at most: two timers per instance,
    /// which [`Timers::compact`] keeps within twice that plus its minimum,
    /// in an allocation that grew by doubling.
    pub fn timer_bytes(&self) -> (u64, u64) {
        let entry = std::mem::size_of::<Timer>();
        let now = self.timers.heap.capacity() * entry;
        let n_i = (self.instance_limit as usize).max(self.instances.len());
        let most = (2 * 2 * n_i).max(COMPACT_MIN).max(self.timers.compact_at) + 1;
        let worst = (most.next_power_of_two() * entry).max(now);
        (now as u64, worst as u64)
    }

    /// Queues and scheduler instances that exist now (retired ones
    /// finishing their delay lines included): what `instance_limit` bounds.
    pub fn instance_counts(&self) -> (usize, usize) {
        (self.queues.len(), self.instances.len())
    }

    /// Bytes of queue and instance records in use now and at most,
    /// `[queues, instances]`, each `(now, worst)`. Packets are not in them
    /// (see [`crate::Engine::memory`]). The worst case takes `instance_limit`
    /// of each (or as many as exist, if it was lowered under that), each
    /// as large as the largest the configuration makes, in slabs that grew by
    /// doubling: the bound holds whatever traffic arrives.
    pub fn record_bytes(&self) -> [(u64, u64); 2] {
        use std::mem::size_of;
        let slot_q = size_of::<Option<FlowQueue<P>>>();
        let slot_i = size_of::<Option<Instance<P>>>();
        // A slot's index on the free list.
        let free = size_of::<u32>();
        // A hashbrown entry and its control byte.
        let q_entry = size_of::<((InstId, FlowKey), QueueId)>() + 1;
        let i_entry = size_of::<(FlowKey, InstId)>() + 1;
        let fx_base = size_of::<QueueFx>();
        let aqm_bytes =
            |a: &Option<Box<dyn AqmState>>| a.as_deref().map_or(0, std::mem::size_of_val);
        let queue_bytes = |q: &FlowQueue<P>| {
            let fx = q.fx.as_ref().map_or(0, |fx| fx_base + aqm_bytes(&fx.aqm));
            let state = self
                .instances
                .get(q.inst)
                .and_then(|i| self.scheds.get(&i.sched))
                .map_or(0, |s| s.kind.queue_state_bytes);
            q_entry + fx + state
        };
        let instance_bytes = |i: &Instance<P>| {
            let tables: usize = i
                .tables
                .iter()
                .map(|t| t.queues.capacity() * size_of::<QueueId>())
                .sum();
            i_entry
                + std::mem::size_of_val(&*i.policy)
                + i.tables.capacity() * size_of::<BucketTable>()
                + tables
                + i.fx.as_ref().map_or(0, |_| size_of::<LinkFx<P>>())
        };
        // Now: the slabs as allocated, and each live record's own parts.
        let mut queues_now =
            self.queues.items.capacity() * slot_q + self.queues.free.capacity() * free;
        let mut per_queue = 0;
        for (_, q) in self.queues.iter() {
            let b = queue_bytes(q);
            queues_now += b;
            per_queue = per_queue.max(b);
        }
        let mut inst_now =
            self.instances.items.capacity() * slot_i + self.instances.free.capacity() * free;
        let mut lists = 0;
        let mut per_inst = 0;
        for (_, i) in self.instances.iter() {
            let b = instance_bytes(i);
            inst_now += b;
            lists += i.queues.capacity() * size_of::<QueueId>();
            per_inst = per_inst.max(b);
        }
        inst_now += lists;
        // Worst: as many as may exist, each as large as the largest that
        // exists (a retired instance keeps its old policy while it drains)
        // or that the configuration can make.
        for fs in self.flowsets.values() {
            let sched = self.scheds.get(&fs.sched);
            let aqm = match sched.filter(|s| s.sub.is_some()) {
                Some(s) => Some(s.sizes.sub_aqm).filter(|&b| b > 0),
                None => fs.aqm_bytes,
            };
            let fx = if needs_queue_fx(&fs.cfg, aqm.is_some()) {
                fx_base + aqm.unwrap_or(0)
            } else {
                0
            };
            let state = sched.map_or(0, |s| s.kind.queue_state_bytes);
            per_queue = per_queue.max(q_entry + fx + state);
        }
        let fed = |n: u32| self.flowsets.values().filter(|f| f.sched == n).count();
        for (&n, s) in &self.scheds {
            let policy = s.sizes.policy;
            // One bucket table per flowset fed, `buckets` queue ids each, in
            // a list that starts with room for 4.
            let tables = s.sub.as_ref().map_or(0, |sub| {
                let fed = fed(n);
                fed.next_power_of_two().max(4) * size_of::<BucketTable>()
                    + fed * sub.buckets as usize * size_of::<QueueId>()
            });
            per_inst = per_inst.max(i_entry + policy + tables + size_of::<LinkFx<P>>());
        }
        // An instance's list of its queues holds at most every queue, once.
        let limit = self.instance_limit as usize;
        let n_q = limit.max(self.queues.len());
        let n_i = limit.max(self.instances.len());
        let slab = |n: usize, slot: usize, now_cap: usize, now_free: usize| {
            let grown = n.next_power_of_two().max(4);
            grown.max(now_cap) * slot + grown.max(now_free) * free
        };
        let queues_worst = slab(
            n_q,
            slot_q,
            self.queues.items.capacity(),
            self.queues.free.capacity(),
        ) + n_q * per_queue;
        let inst_worst = slab(
            n_i,
            slot_i,
            self.instances.items.capacity(),
            self.instances.free.capacity(),
        ) + n_i * per_inst
            // The instances' lists of their queues: each keeps room for
            // at most 4 more than twice its queues (see `expire_idle`), or
            // what it had grown to when the sweep last looked.
            + (2 * n_q + 4 * n_i).max(lists / size_of::<QueueId>()) * size_of::<QueueId>();
        [
            (queues_now as u64, queues_worst as u64),
            (inst_now as u64, inst_worst as u64),
        ]
    }

    /// Packets held anywhere inside (queues, links, delay lines, exits).
    pub fn held(&self) -> u64 {
        let queued: u64 = self.queues.iter().map(|(_, q)| q.pkts.len() as u64).sum();
        let lines: u64 = self
            .instances
            .iter()
            .map(|(_, i)| (i.dline.len() + i.fx.as_ref().map_or(0, |f| f.held())) as u64)
            .sum();
        queued + lines + self.exits.len() as u64
    }
}

/// The queue of `bucket` for flowset `fs_nr` in flow-queueing instance
/// `inst`, if its [`BucketTable`] knows it.
#[inline]
fn bucket_queue<P>(
    instances: &Slab<Instance<P>>,
    queues: &Slab<FlowQueue<P>>,
    inst: InstId,
    fs_nr: u32,
    bucket: u32,
) -> Option<QueueId> {
    let q = *instances
        .get(inst)?
        .tables
        .iter()
        .find(|t| t.flowset == fs_nr)?
        .queues
        .get(bucket as usize)?;
    queues
        .get(q)
        .is_some_and(|queue| queue.inst == inst && queue.flowset == fs_nr)
        .then_some(q)
}

/// Queue `q`, made for key `qid` of flowset `fs_nr` in `inst`, is leaving:
/// its [`BucketTable`] entry goes, so that a reused id is never found there.
/// (A flow-queueing queue's key holds its bucket in `src`; for any other
/// queue no entry names `q`.)
pub(super) fn forget_bucket<P>(
    instances: &mut Slab<Instance<P>>,
    inst: InstId,
    fs_nr: u32,
    qid: &FlowKey,
    q: QueueId,
) {
    let Some(instance) = instances.get_mut(inst) else {
        return;
    };
    let entry = instance
        .tables
        .iter_mut()
        .find(|t| t.flowset == fs_nr)
        .and_then(|t| t.queues.get_mut(usize::try_from(qid.src).ok()?));
    if let Some(e) = entry.filter(|e| **e == q) {
        *e = NO_QUEUE;
    }
}

/// Records `q` as the queue of `bucket` (of `buckets`) for flowset `fs_nr`
/// in `inst`.
fn set_bucket_queue<P>(
    instances: &mut Slab<Instance<P>>,
    inst: InstId,
    fs_nr: u32,
    (bucket, buckets): (u32, u32),
    q: QueueId,
) {
    let Some(instance) = instances.get_mut(inst) else {
        return;
    };
    let i = match instance.tables.iter().position(|t| t.flowset == fs_nr) {
        Some(i) => i,
        None => {
            instance.tables.push(BucketTable {
                flowset: fs_nr,
                queues: Vec::new(),
            });
            instance.tables.len() - 1
        }
    };
    let table = &mut instance.tables[i].queues;
    let b = bucket as usize;
    if table.len() <= b {
        table.resize((buckets as usize).max(b + 1), NO_QUEUE);
    }
    table[b] = q;
}

pub(super) fn new_policy(kind: &SchedType, params: &[(String, u64)]) -> Box<dyn SchedInstance> {
    // Parameters were validated when the scheduler was configured; FIFO is
    // the fallback that cannot fail.
    (kind.new_instance)(params).unwrap_or_else(|_| Box::new(sched::Fifo::default()))
}

/// The scheduler's window on the queues: pops run the queue's AQM.
struct Ops<'a, P> {
    queues: &'a mut Slab<FlowQueue<P>>,
    popped: Option<Held<P>>,
    now: Nanos,
    aqm_drops: Vec<Held<P>>,
    /// ECN marks set during this service.
    marks: u64,
}

impl<P: Payload> QueueOps for Ops<'_, P> {
    #[inline]
    fn head_len(&self, q: QueueId) -> Option<u32> {
        self.queues
            .get(q)
            .and_then(|q| q.pkts.front())
            .map(|h| h.info.len)
    }

    #[inline]
    fn pop(&mut self, q: QueueId) -> Option<u32> {
        let queue = self.queues.get_mut(q)?;
        let mut resumed = false;
        while let Some(mut h) = queue.pkts.pop_front() {
            let state = QueueState {
                len_pkts: queue.pkts.len() as u32 + 1,
                len_bytes: queue.bytes,
            };
            queue.bytes -= u64::from(h.info.len);
            let verdict = match queue.fx.as_deref_mut() {
                Some(QueueFx {
                    aqm: Some(a), rng, ..
                }) => {
                    let departure = Departure {
                        now: self.now,
                        enqueued_at: h.enq_time,
                        len: h.info.len,
                        ect: ecn::capable(h.payload.ip_bytes()),
                        queue: state,
                        resumed,
                    };
                    match a.on_dequeue(&departure, rng) {
                        AqmVerdict::Mark if h.payload.ip_bytes_mut().is_some_and(ecn::set_ce) => {
                            queue.marks += 1;
                            self.marks += 1;
                            h.marked = true;
                            AqmVerdict::Accept
                        }
                        AqmVerdict::Mark => AqmVerdict::Drop,
                        v => v,
                    }
                }
                _ => AqmVerdict::Accept,
            };
            if verdict == AqmVerdict::Drop {
                queue.drops += 1;
                self.aqm_drops.push(h);
                resumed = true;
                continue;
            }
            let len = h.info.len;
            self.popped = Some(h);
            return Some(len);
        }
        None
    }
}
