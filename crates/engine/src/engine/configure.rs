//! Configuration: a command checked against the engine's state, then
//! applied whole, or refused with nothing changed.

use super::*;
use crate::command::Fields;

impl<P: Payload> Engine<P> {
    /// Applies one command at `now`. The command is validated in full first;
    /// on error nothing changes. Packets already queued are kept across any
    /// reconfiguration; only deleting their pipe or queue drops them
    /// (reported by `poll` with [`DropReason::Deleted`]). Deleting a pipe or
    /// scheduler also drops, at once, what it holds past its queues: its
    /// delay line and a packet on its link.
    pub fn apply(&mut self, now: Nanos, cmd: Command) -> Result<(), ConfigError> {
        self.run_timers(now);
        self.notes.clear();
        let pipes = pipes_touched(&cmd);
        let applied = self.apply_now(now, cmd);
        if applied.is_err() {
            self.notes.clear();
        } else {
            self.note_bypassed_scheds(&pipes);
        }
        applied
    }

    /// Applies `cmds` at `now` as one unit: all of them, in order, or none.
    /// Each command is first tried on a copy of the configuration with no
    /// packets in it (see [`Self::config_shadow`]), as it stands after the
    /// commands before it, so the first refusal is found before anything
    /// changes: the engine, its queued packets and their order are then
    /// left exactly as they were. Once every command passed, they are
    /// applied for real, in one call, between two packets. Returns the
    /// notes of all of them ([`Self::take_notes`]), in order.
    ///
    /// The copy costs about what [`Self::snapshot`] does (the rules are
    /// compiled again, tables and pipes copied), so a single command skips
    /// it: [`Self::apply`] alone is already all or nothing.
    pub fn apply_all(
        &mut self,
        now: Nanos,
        cmds: Vec<Command>,
    ) -> Result<Vec<ConfigNote>, BatchError> {
        // Scheduled steps due by `now` run first, as `apply` would run them,
        // so the copy starts from what the commands will meet.
        self.run_timers(now);
        if cmds.len() > 1 {
            let mut shadow = self.config_shadow();
            for (index, cmd) in cmds.iter().enumerate() {
                shadow
                    .apply(now, cmd.clone())
                    .map_err(|error| BatchError { index, error })?;
            }
        }
        let mut notes = Vec::new();
        for (index, cmd) in cmds.into_iter().enumerate() {
            // Only a copy that differs from the engine would let this
            // fail after an earlier command took effect: a bug, reported
            // with the command it stopped at (tests check the copy).
            self.apply(now, cmd)
                .map_err(|error| BatchError { index, error })?;
            notes.append(&mut self.notes);
        }
        Ok(notes)
    }

    /// [`Self::apply_all`], refused as a whole (nothing applied) when the
    /// configuration the batch would leave fails `accept`, which says why
    /// (for a refusal blamed on the batch's last command). Tried on a copy
    /// of the configuration first, like any batch. A data plane sharded
    /// over replicas refuses this way what it cannot shard.
    pub fn apply_all_where(
        &mut self,
        now: Nanos,
        cmds: Vec<Command>,
        accept: impl Fn(&Engine<()>) -> Option<String>,
    ) -> Result<Vec<ConfigNote>, BatchError> {
        self.run_timers(now);
        let mut shadow = self.config_shadow();
        for (index, cmd) in cmds.iter().enumerate() {
            shadow
                .apply(now, cmd.clone())
                .map_err(|error| BatchError { index, error })?;
        }
        if let Some(why) = accept(&shadow) {
            return Err(BatchError {
                index: cmds.len().saturating_sub(1),
                error: ConfigError::Conflict(why),
            });
        }
        self.apply_all(now, cmds)
    }

    /// An engine with this one's configuration and none of its packets,
    /// flows or counters: the settings, interfaces, tables, rules (compiled
    /// again), rule sets, pipes, schedulers, queues and the number of
    /// running schedules, i.e. everything [`Self::apply`] checks a command
    /// against. [`Self::apply_all`] tries a batch on it.
    fn config_shadow(&self) -> Engine<()> {
        let mut shadow: Engine<()> = Engine::with_settings(0, self.settings.clone());
        shadow.now = self.now;
        shadow.next_expiry = self.next_expiry;
        shadow.ifaces = self.ifaces.clone();
        shadow.rules.tables = self.rules.tables.clone();
        shadow.rules.disabled_sets = self.rules.disabled_sets;
        for r in self.rules.rules() {
            if r.number == DEFAULT_RULE {
                continue;
            }
            let compiled =
                classifier::compile(&r.spec.body, &mut shadow.ifaces, &mut shadow.rules.tables);
            // It compiled when it was added, against the same tables.
            if let Ok(body) = compiled {
                shadow.rules.insert(r.number, r.spec.clone(), body);
            }
        }
        let dn = &mut shadow.dn;
        for n in self.dn.link_numbers() {
            if let Some(link) = self.dn.link_params(n) {
                dn.set_link(n, link.clone(), self.now);
            }
        }
        for n in self.dn.sched_numbers() {
            if let (Some(kind), Some(params), Some(mask)) = (
                self.dn.sched_kind(n),
                self.dn.sched_params(n),
                self.dn.sched_mask(n),
            ) {
                dn.set_sched(n, kind, params.to_vec(), mask);
            }
        }
        for n in self.dn.flowset_numbers() {
            if let Some((cfg, sched)) = self.dn.flowset_config(n) {
                dn.set_flowset(n, cfg.clone(), sched);
            }
        }
        shadow.schedules = self
            .schedules
            .iter()
            .map(|(&id, plan)| {
                let steps = Vec::new();
                let every = plan.every;
                (
                    id,
                    Plan {
                        steps,
                        every,
                        pending: plan.pending,
                    },
                )
            })
            .collect();
        shadow.next_plan_id = self.next_plan_id;
        shadow
    }

    /// What the last command [`Self::apply`] accepted was changed to, in
    /// words for its user: a value outside a plug-in's bounds brought
    /// within them, as FreeBSD's kernel does (`fq_codel target 0 is below
    /// 1us, its least: ...`). Empty when it was taken as given.
    pub fn take_notes(&mut self) -> Vec<ConfigNote> {
        std::mem::take(&mut self.notes)
    }

    fn clamped(&mut self, words: Vec<String>) {
        self.notes
            .extend(words.into_iter().map(ConfigNote::Clamped));
    }

    /// After `pipes` were touched by a command: a note for each whose
    /// scheduler is of a type that the rules sending to `pipe N` bypass
    /// (see [`ConfigNote::PipeBypassesSched`]). Said when a command makes
    /// or renews the situation, never per packet.
    fn note_bypassed_scheds(&mut self, pipes: &[u32]) {
        for &pipe in pipes {
            let exists = self.dn.flowset_config(pipe + 2 * DN_MAX_ID).is_some();
            let Some(kind) = self
                .dn
                .sched_kind(pipe)
                .filter(|k| exists && k.name != default_type().name && k.name != fifo_type().name)
            else {
                continue;
            };
            let rules: Vec<u16> = self
                .rules
                .rules()
                .iter()
                .filter(|r| r.spec.action == Action::Pipe(pipe))
                .map(|r| r.number)
                .collect();
            if !rules.is_empty() {
                self.notes.push(ConfigNote::PipeBypassesSched {
                    pipe,
                    kind: kind.display,
                    rules,
                });
            }
        }
    }

    /// A flush (of the rules or of dummynet) leaves the `at` schedules
    /// alone, as `ipfw flush` leaves tables and pipes: what remains is said,
    /// with how to cancel it, so that a step that re-creates what was just
    /// flushed comes as no surprise.
    fn note_pending_steps(&mut self) {
        let n = self.plan.len();
        if n > 0 {
            self.notes.push(ConfigNote::StepsPending(n));
        }
    }

    /// [`Self::apply`] once every event before `now` has run.
    pub(super) fn apply_now(&mut self, now: Nanos, cmd: Command) -> Result<(), ConfigError> {
        self.epoch += 1;
        match cmd {
            Command::AddRule(spec) => self.add_rule(spec),
            Command::DeleteRules(nums) => {
                for &n in &nums {
                    if n == DEFAULT_RULE {
                        return err("rule 65535 is the default rule and cannot be deleted");
                    }
                    if !self.rules.contains(n) {
                        return missing(format!("rule {n} does not exist"));
                    }
                }
                nums.iter().for_each(|&n| self.rules.delete(n));
                Ok(())
            }
            Command::FlushRules => {
                self.rules.flush();
                self.note_pending_steps();
                Ok(())
            }
            Command::ZeroRules(nums) => {
                if let Some(n) = nums.iter().find(|&&n| !self.rules.contains(n)) {
                    return missing(format!("rule {n} does not exist"));
                }
                if nums.is_empty() {
                    self.rules.zero(None);
                }
                nums.iter().for_each(|&n| self.rules.zero(Some(n)));
                Ok(())
            }
            Command::ConfigPipe(n, cfg) => self.config_pipe(now, n, cfg),
            Command::ConfigQueue(n, cfg) => self.config_queue(now, n, cfg),
            Command::ConfigSched(n, cfg) => self.config_sched(now, n, cfg),
            Command::ModifyPipe(n, cfg, f) => self.modify_pipe(now, n, cfg, f),
            Command::ModifyQueue(n, cfg, f) => self.modify_queue(now, n, cfg, f),
            Command::ModifySched(n, cfg, f) => self.modify_sched(now, n, cfg, f),
            Command::Schedule(sch) => self.schedule(now, sch),
            Command::CancelSchedules => {
                self.schedule_stats.cancelled += self.plan.len() as u64;
                self.plan.clear();
                self.schedules.clear();
                Ok(())
            }
            Command::DeletePipes(nums) => {
                if let Some(n) = nums.iter().find(|&&n| !self.dn.has_link(n)) {
                    return missing(format!("pipe {n} does not exist"));
                }
                self.reconfigure(now, |dn| {
                    for &n in &nums {
                        dn.delete_flowset(n + 2 * DN_MAX_ID);
                        dn.delete_sched(n + DN_MAX_ID, now);
                        dn.delete_sched(n, now);
                        dn.delete_link(n);
                    }
                });
                Ok(())
            }
            Command::DeleteQueues(nums) => {
                if let Some(n) = nums
                    .iter()
                    .find(|&&n| !self.dn.has_flowset(n) || n > MAX_NUMBER)
                {
                    return missing(format!("queue {n} does not exist"));
                }
                self.reconfigure(now, |dn| nums.iter().for_each(|&n| dn.delete_flowset(n)));
                Ok(())
            }
            Command::DeleteScheds(nums) => {
                if let Some(n) = nums
                    .iter()
                    .find(|&&n| !self.dn.has_sched(n) || n > MAX_NUMBER)
                {
                    return missing(format!("scheduler {n} does not exist"));
                }
                self.reconfigure(now, |dn| nums.iter().for_each(|&n| dn.delete_sched(n, now)));
                Ok(())
            }
            Command::FlushDummynet => {
                self.note_pending_steps();
                self.reconfigure(now, |dn| {
                    dn.flowset_numbers()
                        .into_iter()
                        .for_each(|n| dn.delete_flowset(n));
                    dn.sched_numbers()
                        .into_iter()
                        .for_each(|n| dn.delete_sched(n, now));
                    dn.link_numbers()
                        .into_iter()
                        .for_each(|n| dn.delete_link(n));
                });
                Ok(())
            }
            Command::Set(s) => self.set(s),
            Command::Table(name, cmd) => self.table(&name, cmd),
            Command::RuleSets(cmd) => self.rule_sets(cmd),
            Command::DeleteSet(set) => {
                if set == 31 {
                    return err("set 31 holds the default rule and cannot be deleted");
                }
                self.rules.retain(|r| r.spec.extra.set != set);
                Ok(())
            }
            Command::ResetLog(nums) => {
                if let Some(n) = nums.iter().find(|&&n| !self.rules.contains(n)) {
                    return missing(format!("rule {n} does not exist"));
                }
                self.rules.reset_log(&nums);
                Ok(())
            }
        }
    }

    /// `pipe N modify`: the options in `f` merged into pipe N as it is.
    fn modify_pipe(
        &mut self,
        now: Nanos,
        n: u32,
        cfg: PipeConfig,
        f: Fields,
    ) -> Result<(), ConfigError> {
        let (Some(link), Some((fs, _))) = (
            self.dn.link_params(n),
            self.dn.flowset_config(n + 2 * DN_MAX_ID),
        ) else {
            return missing(format!(
                "pipe {n} does not exist; `modify` changes an existing pipe \
                 (create it with `pipe {n} config`)"
            ));
        };
        let merged = PipeConfig {
            link: modify::link(link, &cfg.link, f),
            flowset: modify::flowset(fs, &cfg.flowset, f),
            sched: cfg.sched,
        };
        self.config_pipe(now, n, merged)
    }

    /// `queue N modify`: the options in `f` merged into queue N as it is.
    fn modify_queue(
        &mut self,
        now: Nanos,
        n: u32,
        cfg: QueueConfig,
        f: Fields,
    ) -> Result<(), ConfigError> {
        let Some((fs, sched)) = self.dn.flowset_config(n).filter(|_| n <= MAX_NUMBER) else {
            return missing(format!(
                "queue {n} does not exist; `modify` changes an existing queue \
                 (create it with `queue {n} config`)"
            ));
        };
        let merged = QueueConfig {
            sched: Some(if f.contains(Field::Sched) {
                cfg.sched.unwrap_or(1)
            } else {
                sched
            }),
            flowset: modify::flowset(fs, &cfg.flowset, f),
        };
        self.config_queue(now, n, merged)
    }

    /// `sched N modify`: the options in `f` merged into scheduler N as it is.
    fn modify_sched(
        &mut self,
        now: Nanos,
        n: u32,
        cfg: SchedConfig,
        f: Fields,
    ) -> Result<(), ConfigError> {
        let (Some(kind), Some(params), Some(mask)) = (
            self.dn.sched_kind(n).filter(|_| n <= MAX_NUMBER),
            self.dn.sched_params(n),
            self.dn.sched_mask(n),
        ) else {
            return missing(format!(
                "scheduler {n} does not exist; `modify` changes an existing \
                 scheduler (create it with `sched {n} config`)"
            ));
        };
        let type_changed = f.contains(Field::Type)
            && cfg.kind.as_deref().and_then(sched::lookup).map(|k| k.name) != Some(kind.name);
        let link = modify::touches_link(f).then(|| {
            let cur = self.dn.link_params(n).cloned().unwrap_or_default();
            modify::link(&cur, &cfg.link.clone().unwrap_or_default(), f)
        });
        let merged = SchedConfig {
            kind: Some(if f.contains(Field::Type) {
                cfg.kind.clone().unwrap_or_else(|| kind.name.to_string())
            } else {
                kind.name.to_string()
            }),
            mask: if f.contains(Field::Mask) {
                cfg.mask
            } else {
                mask
            },
            link,
            params: modify::sched_params(params, &cfg, f, type_changed),
        };
        self.config_sched(now, n, merged)
    }

    fn table(&mut self, name: &TableName, cmd: TableCmd) -> Result<(), ConfigError> {
        let tables = &mut self.rules.tables;
        match cmd {
            TableCmd::Create(ty) => Ok(tables.create(name, ty)?),
            TableCmd::Add(entries) => Ok(tables.add(name, &entries)?),
            TableCmd::Delete(keys) => Ok(tables.delete(name, &keys)?),
            TableCmd::Flush => Ok(tables.flush(name)?),
            TableCmd::Destroy => {
                if !tables.exists(name) {
                    return missing(format!("table {name} does not exist"));
                }
                // A table rules read stays (emptied), as ipfw refuses to
                // destroy a referenced table.
                let used = self.rules.rules().iter().find(|r| {
                    self.rules
                        .tables
                        .slot(name)
                        .is_some_and(|s| r.body.uses_table(s))
                });
                if let Some(r) = used {
                    return conflict(format!(
                        "table {name} is used by rule {}; delete the rule first",
                        r.number
                    ));
                }
                Ok(self.rules.tables.destroy(name)?)
            }
        }
    }

    fn rule_sets(&mut self, cmd: SetCmd) -> Result<(), ConfigError> {
        let check = |s: u8| {
            if s > 31 {
                err(format!("set {s} does not exist; sets are 0..31"))
            } else {
                Ok(())
            }
        };
        let movable = |s: u8| {
            check(s)?;
            if s == 31 {
                return err("set 31 holds the default rule; rules are not moved in or out of it");
            }
            Ok(())
        };
        match cmd {
            SetCmd::Toggle { enable, disable } => {
                if (enable | disable) & (1 << 31) != 0 {
                    return err("set 31 holds the default rule and is always enabled");
                }
                if enable & disable != 0 {
                    return err(format!(
                        "set {} is both enabled and disabled",
                        (enable & disable).trailing_zeros()
                    ));
                }
                self.rules.disabled_sets = (self.rules.disabled_sets | disable) & !enable;
            }
            SetCmd::Move { from, to } => {
                movable(from)?;
                movable(to)?;
                self.rules
                    .rules_mut()
                    .iter_mut()
                    .filter(|r| r.spec.extra.set == from)
                    .for_each(|r| r.spec.extra.set = to);
            }
            SetCmd::MoveRule { number, to } => {
                movable(to)?;
                if number == DEFAULT_RULE || !self.rules.contains(number) {
                    return missing(format!("rule {number} does not exist or cannot be moved"));
                }
                self.rules
                    .rules_mut()
                    .iter_mut()
                    .filter(|r| r.number == number)
                    .for_each(|r| r.spec.extra.set = to);
            }
            SetCmd::Swap(a, b) => {
                movable(a)?;
                movable(b)?;
                for r in self.rules.rules_mut() {
                    let s = &mut r.spec.extra.set;
                    if *s == a {
                        *s = b;
                    } else if *s == b {
                        *s = a;
                    }
                }
                // The disabled mask stays with the set numbers, as in
                // FreeBSD: the rules change sets, the sets keep their state.
            }
        }
        self.rules.refresh_rules();
        Ok(())
    }

    /// This host's addresses, which `me` and `me6` match: set by the
    /// daemon from its network namespace, by `sim` from `--me`.
    pub fn set_local_addrs(&mut self, addrs: &[std::net::IpAddr]) {
        let me = &mut self.rules.me;
        me.v4.clear();
        me.v6.clear();
        for a in addrs {
            match a {
                std::net::IpAddr::V4(a) => me.v4.push(u128::from(u32::from(*a))),
                std::net::IpAddr::V6(a) => me.v6.push(u128::from(*a)),
            }
        }
    }

    /// The host's routes, which `verrevpath`, `versrcreach` and
    /// `antispoof` look at (`None`: no routing table, and they hold). A
    /// live daemon gives its namespace's; they are interfaces' routes, so
    /// their interfaces are learnt as `recv` names are.
    pub fn set_routes(&mut self, routes: Option<&[crate::command::Route]>) {
        use crate::classifier::route;
        let Some(routes) = routes else {
            self.rules.routes = None;
            return;
        };
        let mut t = classifier::tables::Table::new(
            TableName::Name("routes".into()),
            crate::command::TableType::Addr,
        );
        for r in routes {
            let id = u32::from(self.iface(&r.iface).0);
            let kind = if r.gateway { route::GATEWAY } else { 0 }
                | if r.reject { route::REJECT } else { 0 };
            t.insert(&crate::command::TableKey::Addr(r.net), id | kind);
        }
        self.rules.routes = Some(t);
    }

    /// Matches of rules with `log` since the last call, oldest first, and
    /// how many were not kept (at most [`classifier::LOG_CAPACITY`] are).
    pub fn take_log(&mut self) -> (Vec<LogEvent>, u64) {
        let lost = std::mem::take(&mut self.rules.log_lost);
        (self.rules.log.drain(..).collect(), lost)
    }

    /// Whether some rule logs (so the daemon knows to take the log).
    pub fn has_log(&self) -> bool {
        !self.rules.log.is_empty() || self.rules.log_lost > 0
    }

    fn config_pipe(&mut self, now: Nanos, n: u32, mut cfg: PipeConfig) -> Result<(), ConfigError> {
        check_number("pipe", n)?;
        self.fill_buckets(&mut cfg.flowset);
        cfg.flowset.aqm.fill_defaults(|t| self.settings.tunable(t));
        let mut clamped = Vec::new();
        cfg.flowset.aqm.clamp(&mut clamped);
        self.clamped(clamped);
        self.check_link(&cfg.link)?;
        self.check_flowset(&cfg.flowset)?;
        if cfg.flowset.weight == 0 {
            return err(format!(
                "pipe {n}: weight 0 is a priority, only for queues of a prio \
                 scheduler; a pipe's own queue is served FIFO (weight 1..{MAX_WEIGHT})"
            ));
        }
        let (kind, params) = match (&cfg.sched, self.dn.sched_kind(n)) {
            // `type T` on the pipe: scheduler N becomes T, as `sched N
            // config type T` would make it.
            (Some(ps), _) => {
                let Some(kind) = sched::lookup(&ps.kind) else {
                    return err(format!(
                        "unknown scheduler type `{}`; available: {}",
                        ps.kind,
                        sched::names().join(", ")
                    ));
                };
                let mut params = ps.params.clone();
                crate::params::fill_defaults(kind.tunables, &mut params, |t| {
                    self.settings.tunable(t)
                });
                let mut clamped = Vec::new();
                crate::params::clamp(kind.name, kind.params, &mut params, &mut clamped);
                self.clamped(clamped);
                if let Err(e) = (kind.new_instance)(&params) {
                    let words = format!("pipe {n} type {}: {e}", kind.name);
                    return refused(e, words);
                }
                if let Some((q, e)) = self
                    .dn
                    .flowsets_of(n)
                    .find_map(|(q, f)| kind.fits(f.weight, f.lmax).err().map(|e| (q, e)))
                {
                    let words = format!(
                        "pipe {n} type {}: queue {q} does not fit it: {e}; reconfigure the queue first",
                        kind.name
                    );
                    return refused(e, words);
                }
                (kind, params)
            }
            (None, Some(k)) => (
                k,
                self.dn
                    .sched_params(n)
                    .map(<[_]>::to_vec)
                    .unwrap_or_default(),
            ),
            (None, None) => {
                let mut params = Vec::new();
                crate::params::fill_defaults(default_type().tunables, &mut params, |t| {
                    self.settings.tunable(t)
                });
                (default_type(), params)
            }
        };
        let fifo = fifo_type();
        let mask = cfg.flowset.mask;
        self.reconfigure(now, |dn| {
            dn.set_link(n, cfg.link, now);
            dn.set_sched(n, kind, params, mask);
            dn.set_sched(n + DN_MAX_ID, fifo, Vec::new(), mask);
            dn.set_flowset(n + 2 * DN_MAX_ID, cfg.flowset, n + DN_MAX_ID);
        });
        Ok(())
    }

    /// `buckets` left out (0) is `net.inet.ip.dummynet.hash_size`.
    fn fill_buckets(&self, f: &mut FlowsetConfig) {
        if f.buckets == 0 {
            f.buckets = self.settings.hash_size;
        }
    }

    fn config_queue(
        &mut self,
        now: Nanos,
        n: u32,
        mut cfg: QueueConfig,
    ) -> Result<(), ConfigError> {
        check_number("queue", n)?;
        self.fill_buckets(&mut cfg.flowset);
        cfg.flowset.aqm.fill_defaults(|t| self.settings.tunable(t));
        let mut clamped = Vec::new();
        cfg.flowset.aqm.clamp(&mut clamped);
        self.clamped(clamped);
        let sched = cfg.sched.unwrap_or(1);
        check_number("scheduler", sched)?;
        self.check_flowset(&cfg.flowset)?;
        // An unlinked queue is checked when its scheduler appears.
        if let Some(kind) = self.dn.sched_kind(sched) {
            if let Err(e) = kind.fits(cfg.flowset.weight, cfg.flowset.lmax) {
                let words = format!("queue {n}: {e}; scheduler {sched} is {}", kind.display);
                return refused(e, words);
            }
        }
        self.reconfigure(now, |dn| dn.set_flowset(n, cfg.flowset, sched));
        Ok(())
    }

    fn config_sched(
        &mut self,
        now: Nanos,
        n: u32,
        mut cfg: SchedConfig,
    ) -> Result<(), ConfigError> {
        check_number("scheduler", n)?;
        let kind = match &cfg.kind {
            Some(name) => match sched::lookup(name) {
                Some(k) => k,
                None => {
                    return err(format!(
                        "unknown scheduler type `{name}`; available: {}",
                        sched::names().join(", ")
                    ))
                }
            },
            None => self.dn.sched_kind(n).unwrap_or_else(default_type),
        };
        crate::params::fill_defaults(kind.tunables, &mut cfg.params, |t| self.settings.tunable(t));
        let mut clamped = Vec::new();
        crate::params::clamp(kind.name, kind.params, &mut cfg.params, &mut clamped);
        self.clamped(clamped);
        if let Err(e) = (kind.new_instance)(&cfg.params) {
            let words = format!("sched {n} type {}: {e}", kind.name);
            return refused(e, words);
        }
        if let Some((q, e)) = self
            .dn
            .flowsets_of(n)
            .find_map(|(q, f)| kind.fits(f.weight, f.lmax).err().map(|e| (q, e)))
        {
            let words = format!(
                "sched {n} type {}: queue {q} does not fit it: {e}; reconfigure the queue first",
                kind.name
            );
            return refused(e, words);
        }
        if let Some(link) = &cfg.link {
            self.check_link(link)?;
        }
        let link = cfg
            .link
            .clone()
            .or_else(|| (!self.dn.has_link(n)).then(LinkConfig::default));
        self.reconfigure(now, |dn| {
            if let Some(link) = link {
                dn.set_link(n, link, now);
            }
            dn.set_sched(n, kind, cfg.params, cfg.mask);
        });
        Ok(())
    }

    fn set(&mut self, s: Setting) -> Result<(), ConfigError> {
        if let Setting::OnePass(_) = s {
            // What already left was decided under the old setting.
            self.settle_exits();
        }
        self.settings.set(s)?;
        self.dn.instance_limit = self.settings.instance_limit;
        Ok(())
    }

    /// Takes queued packets out, changes the objects, and puts the packets
    /// back; those whose pipe or queue is gone leave as `Deleted` drops.
    fn reconfigure(&mut self, now: Nanos, change: impl FnOnce(&mut Pipes<P>)) {
        self.settle_exits();
        let drained = self.dn.drain();
        change(&mut self.dn);
        for Rejected { held, reason } in self.dn.refill(now, drained) {
            self.ready.push_back(output(held, now, Some(reason)));
        }
        self.process_exits();
    }

    fn add_rule(&mut self, spec: RuleSpec) -> Result<(), ConfigError> {
        let number = match spec.number {
            Some(0) => return err("rule number 0 is not allowed; rules are numbered 1..65534"),
            Some(DEFAULT_RULE) => {
                return err("rule 65535 is the default rule; use a number from 1 to 65534")
            }
            Some(n) => n,
            None => self.rules.next_auto_number(),
        };
        match spec.action {
            Action::Pipe(n) => check_number("pipe", n)?,
            Action::Queue(n) => check_number("queue", n)?,
            // A `skipto` back goes on at the next rule (see `classify`).
            _ => {}
        }
        if spec.extra.set > 30 {
            return err(format!(
                "set {} is not for rules; use 0..30 (set 31 holds the default rule)",
                spec.extra.set
            ));
        }
        let before = self.ifaces.len();
        let body = classifier::compile(&spec.body, &mut self.ifaces, &mut self.rules.tables)?;
        let spec = RuleSpec {
            number: Some(number),
            ..spec
        };
        self.rules.insert(number, spec, body);
        if self.ifaces.len() != before {
            self.learn_new_ifaces(before);
        }
        Ok(())
    }

    fn check_link(&self, l: &LinkConfig) -> Result<(), ConfigError> {
        let bw = l.profile.as_ref().and_then(|p| p.bw).unwrap_or(l.bw);
        if bw > MAX_BW {
            return err(format!(
                "bw {bw} bit/s is above the limit of {MAX_BW} bit/s (10 Tbit/s)"
            ));
        }
        if l.delay > MAX_DELAY {
            return err(format!(
                "delay {} ms is above the limit of {} ms (one hour)",
                l.delay / 1_000_000,
                MAX_DELAY / 1_000_000
            ));
        }
        self.check_impairments(l)?;
        if let Some(p) = &l.profile {
            if p.samples.is_empty() {
                return err(format!("profile `{}` has no samples", p.name));
            }
            if !(0.0..=1.0).contains(&p.loss_level) {
                return err(format!(
                    "profile `{}`: loss-level must be within 0..1",
                    p.name
                ));
            }
        }
        Ok(())
    }

    /// netem's and mahimahi's link options: each one's own checks.
    fn check_impairments(&self, l: &LinkConfig) -> Result<(), ConfigError> {
        l.impairments()
            .try_for_each(|i| i.check(On::Link(l)))
            .map_err(ConfigError::from)
    }

    fn check_flowset(&self, f: &FlowsetConfig) -> Result<(), ConfigError> {
        f.impairments()
            .try_for_each(|i| i.check(On::Queue))
            .map_err(ConfigError::from)?;
        if f.weight > MAX_WEIGHT {
            return err(format!(
                "weight {} is out of range 1..{MAX_WEIGHT} (0 for a prio scheduler's queues)",
                f.weight
            ));
        }
        if f.lmax > MAX_LMAX {
            return err(format!(
                "lmax {} is out of range 0..{MAX_LMAX} bytes (0: the scheduler's default)",
                f.lmax
            ));
        }
        if f.pri > MAX_PRI {
            return err(format!("pri {} is out of range 0..{MAX_PRI}", f.pri));
        }
        match f.limit {
            QueueLimit::Slots(s) if s == 0 || s > self.settings.pipe_slot_limit => {
                return err(format!(
                    "queue {s} slots is out of range 1..{} (raise net.inet.ip.dummynet.pipe_slot_limit for more)",
                    self.settings.pipe_slot_limit
                ))
            }
            QueueLimit::Bytes(b) if b == 0 || b > self.settings.pipe_byte_limit => {
                return err(format!(
                    "queue {b} bytes is out of range 1..{} (raise net.inet.ip.dummynet.pipe_byte_limit for more)",
                    self.settings.pipe_byte_limit
                ))
            }
            _ => {}
        }
        if f.buckets == 0 || f.buckets > MAX_BUCKETS {
            return err(format!(
                "buckets {} is out of range 1..{MAX_BUCKETS}",
                f.buckets
            ));
        }
        crate::aqm::validate(&f.aqm).map_err(ConfigError::from)
    }

    /// Accepts a schedule at `now`: its steps count from `now`.
    fn schedule(&mut self, now: Nanos, sch: Schedule) -> Result<(), ConfigError> {
        let last = sch.steps.iter().map(|(t, _)| *t).max().unwrap_or(0);
        if sch.steps.is_empty() {
            return err("a schedule needs at least one `at T COMMAND` step");
        }
        if let Some(every) = sch.every {
            if every == 0 || every < last {
                return err(format!(
                    "repeat every {} ms is shorter than the schedule's last step at {} ms; \
                     the period must be at least as long as the block it repeats",
                    every / 1_000_000,
                    last / 1_000_000
                ));
            }
        }
        if self.schedules.len() >= MAX_SCHEDULES {
            return conflict(format!(
                "{MAX_SCHEDULES} schedules are already running; no more can be added"
            ));
        }
        let id = self.next_plan_id;
        self.next_plan_id = self.next_plan_id.wrapping_add(1);
        for (i, (t, _)) in sch.steps.iter().enumerate() {
            self.plan_seq += 1;
            self.plan.push(Reverse((
                now.saturating_add(*t),
                self.plan_seq,
                id,
                i as u32,
            )));
        }
        self.schedules.insert(
            id,
            Plan {
                pending: sch.steps.len(),
                steps: sch.steps,
                every: sch.every,
            },
        );
        Ok(())
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::Invalid(msg.into()))
}

/// A plug-in's refusal, with the sentence that says where.
fn refused<T>(error: crate::params::ParamError, words: String) -> Result<T, ConfigError> {
    Err(ConfigError::Plugin { error, words })
}

fn missing<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::NotFound(msg.into()))
}

fn conflict<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::Conflict(msg.into()))
}

fn check_number(what: &str, n: u32) -> Result<(), ConfigError> {
    if n == 0 || n > MAX_NUMBER {
        return err(format!("{what} number {n} is out of range 1..{MAX_NUMBER}"));
    }
    Ok(())
}

/// The pipes whose scheduler a command may leave bypassed by rules that
/// send to the pipe ([`Engine::note_bypassed_scheds`]).
fn pipes_touched(cmd: &Command) -> Vec<u32> {
    match cmd {
        Command::AddRule(spec) => match spec.action {
            Action::Pipe(n) => vec![n],
            _ => Vec::new(),
        },
        Command::ConfigPipe(n, _)
        | Command::ModifyPipe(n, ..)
        | Command::ConfigSched(n, _)
        | Command::ModifySched(n, ..) => vec![*n],
        _ => Vec::new(),
    }
}

fn default_type() -> &'static SchedType {
    sched::lookup(sched::DEFAULT_TYPE).unwrap_or_else(fifo_type)
}

fn fifo_type() -> &'static SchedType {
    &sched::fifo::TYPE
}
