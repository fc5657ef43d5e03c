//! The snapshot `show` is printed from.

use super::*;

impl<P: Payload> Engine<P> {
    /// Everything `show` prints, at the engine's current state.
    pub fn snapshot(&self) -> Snapshot {
        let rules = self
            .rules
            .rules()
            .iter()
            .map(|r| RuleView {
                number: r.number,
                spec: r.spec.clone(),
                packets: r.counters.packets,
                bytes: r.counters.bytes,
                last_match: r.counters.last_match,
                is_default: r.number == DEFAULT_RULE,
                logged: r.counters.logged,
            })
            .collect();
        let states = &self.rules.states;
        let mut dynamic: Vec<StateView> = states
            .iter()
            .filter(|st| st.expire > self.now)
            .map(|st| StateView {
                rule: st.parent.number,
                packets: st.packets,
                bytes: st.bytes,
                expires_in: st.expire - self.now,
                key: *st.flow(),
                name: states.name(st.name).to_string(),
                limit: st.is_limit(),
            })
            .collect();
        dynamic.sort_by_key(|a| (a.rule, a.key));
        let tables = self
            .rules
            .tables
            .all()
            .map(|t| TableView {
                name: t.name.clone(),
                ty: t.ty,
                entries: t.entries(),
            })
            .collect();
        let mut links: Vec<LinkView> = self
            .dn
            .link_numbers()
            .into_iter()
            .filter_map(|n| {
                self.dn.link_params(n).map(|c| LinkView {
                    number: n,
                    config: c.clone(),
                })
            })
            .collect();
        links.sort_by_key(|l| l.number);
        let mut scheds = self.dn.sched_numbers();
        scheds.sort_unstable();
        let mut flowsets = self.dn.flowset_numbers();
        flowsets.sort_unstable();
        Snapshot {
            now: self.now,
            rules,
            links,
            scheds: scheds
                .into_iter()
                .filter_map(|n| self.dn.sched_view(n))
                .collect(),
            flowsets: flowsets
                .into_iter()
                .filter_map(|n| self.dn.flowset_view(n))
                .collect(),
            settings: self.settings.clone(),
            totals: self.totals(),
            disabled_sets: self.rules.disabled_sets,
            states: dynamic,
            states_refused: states.refused,
            tables,
            memory: self.memory(),
        }
    }
}
