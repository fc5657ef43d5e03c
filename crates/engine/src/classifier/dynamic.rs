//! Dynamic rules (ipfw(8), STATEFUL FIREWALL): `keep-state`, `limit` and
//! `record-state` make a state per flow, which then matches the flow's
//! packets in both directions with the action of the rule that made it.
//!
//! A state lives for a lifetime set by the `net.inet.ip.fw.dyn_*` sysctls
//! and refreshed by each packet: TCP's follows the connection (SYN only,
//! established, closing, reset), UDP's and the rest's are fixed. Expired
//! states are dropped when met and swept with the engine's idle-flow sweep;
//! there are at most `dyn_max` of them, about 100 bytes each.

use std::collections::HashMap;
use std::sync::Arc;

use crate::command::{DynSetting, LimitMask, Settings};
use crate::flow::{proto, FlowKey};
use crate::limits::{Lease, LimitKey, LimitTable};
use crate::time::{Nanos, NS_PER_SEC};

use super::headers::tcp_flag;

/// The flow name of a state (`:name`); 0 is `default`.
pub(crate) type NameId = u16;

/// Which states a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameSel {
    One(NameId),
    /// `check-state :any`
    Any,
}

/// One end of a flow.
type End = (u128, u16);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    v6: bool,
    proto: u8,
    /// The lower end first, so both directions find the same state.
    lo: End,
    hi: End,
    name: NameId,
}

impl Key {
    fn new(k: &FlowKey, name: NameId) -> Self {
        let (a, b) = ((k.src, k.sport), (k.dst, k.dport));
        Key {
            v6: k.v6,
            proto: k.proto,
            lo: a.min(b),
            hi: a.max(b),
            name,
        }
    }
}

mod seen {
    pub const SYN_FWD: u8 = 1;
    pub const SYN_REV: u8 = 2;
    pub const FIN_FWD: u8 = 4;
    pub const FIN_REV: u8 = 8;
    pub const RST: u8 = 16;
    pub const BOTH_SYN: u8 = SYN_FWD | SYN_REV;
    pub const BOTH_FIN: u8 = FIN_FWD | FIN_REV;
}

/// The rule a state acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parent {
    pub rule_id: u32,
    pub number: u16,
    /// The rule's last known index in the ruleset, checked before use.
    pub hint: usize,
    /// `tablearg` as it was when the state was made.
    pub arg: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct State {
    pub parent: Parent,
    /// The end that sent the first packet.
    fwd: End,
    key: FlowKey,
    seen: u8,
    pub expire: Nanos,
    pub packets: u64,
    pub bytes: u64,
    limit: Option<LimitKey>,
    /// Its place in a shared `limit` count ([`States::share`]).
    lease: Option<Arc<Lease>>,
    pub name: NameId,
}

impl State {
    /// The flow as its first packet went.
    pub fn flow(&self) -> &FlowKey {
        &self.key
    }

    pub fn is_limit(&self) -> bool {
        self.limit.is_some()
    }

    /// Its place in a shared count was taken back by another engine
    /// (it expired there first): gone, though not yet removed here.
    fn is_reaped(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| l.is_reaped())
    }
}

/// Why a state could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `dyn_max` states exist.
    Full,
    /// The rule's `limit` is reached for these fields.
    Limit,
}

#[derive(Debug, Default)]
pub(crate) struct States {
    map: HashMap<Key, State>,
    /// The `limit` counts, while they are this table's own.
    limits: HashMap<LimitKey, u32>,
    /// The `limit` counts shared with other engines' tables, once given
    /// ([`Self::share`]): then `limits` is empty.
    shared: Option<Arc<dyn LimitTable>>,
    names: Vec<String>,
    /// States refused for `dyn_max` or a `limit`.
    pub refused: u64,
}

fn lifetime(p: u8, seen: u8, s: &Settings) -> Nanos {
    let d = match p {
        proto::TCP if seen & seen::RST != 0 => DynSetting::RstLifetime,
        proto::TCP if seen & seen::BOTH_FIN == seen::BOTH_FIN => DynSetting::FinLifetime,
        proto::TCP if seen & seen::BOTH_SYN == seen::BOTH_SYN => DynSetting::AckLifetime,
        proto::TCP => DynSetting::SynLifetime,
        proto::UDP => DynSetting::UdpLifetime,
        _ => DynSetting::ShortLifetime,
    };
    u64::from(s.dyn_value(d)) * NS_PER_SEC
}

/// What a TCP segment tells a state, seen from the state's first sender.
fn observe(st: &mut State, k: &FlowKey, tcp: Option<u8>) {
    let Some(flags) = tcp else { return };
    let fwd = (k.src, k.sport) == st.fwd;
    if flags & tcp_flag::SYN != 0 {
        st.seen |= if fwd { seen::SYN_FWD } else { seen::SYN_REV };
    }
    if flags & tcp_flag::FIN != 0 {
        st.seen |= if fwd { seen::FIN_FWD } else { seen::FIN_REV };
    }
    if flags & tcp_flag::RST != 0 {
        st.seen |= seen::RST;
    }
}

impl States {
    /// The id of flow name `name` (`None`: `default`).
    pub fn name_id(&mut self, name: Option<&str>) -> NameId {
        let name = name.unwrap_or("default");
        if self.names.is_empty() {
            self.names.push("default".into());
        }
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return i as NameId;
        }
        self.names.push(name.to_string());
        (self.names.len() - 1) as NameId
    }

    pub fn name(&self, id: NameId) -> &str {
        self.names
            .get(usize::from(id))
            .map_or("default", String::as_str)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Bytes one state costs in the tables: its entry, and the `limit`
    /// count it may hold (hash table slack not included).
    pub fn bytes_per_state() -> usize {
        std::mem::size_of::<(Key, State)>() + std::mem::size_of::<(LimitKey, u32)>() + 2
    }

    pub fn iter(&self) -> impl Iterator<Item = &State> {
        self.map.values().filter(|st| !st.is_reaped())
    }

    /// Counts `limit` states in `table`, shared with other engines, from
    /// now on; the limited states this table holds take their places in
    /// it, over the limit if need be (they exist already).
    pub fn share(&mut self, table: Arc<dyn LimitTable>) {
        for st in self.map.values_mut() {
            if let Some(lk) = st.limit {
                st.lease = table.take(lk, u32::MAX, 0, st.expire);
            }
        }
        self.limits.clear();
        self.shared = Some(table);
    }

    /// The live state of the packet's flow, refreshed by the packet; an
    /// expired one is removed and not found (so is one whose place in a
    /// shared `limit` count another engine took back, having found it
    /// expired).
    pub fn check(
        &mut self,
        now: Nanos,
        k: &FlowKey,
        sel: NameSel,
        tcp: Option<u8>,
        len: u32,
        s: &Settings,
    ) -> Option<&mut State> {
        let key = match sel {
            NameSel::One(name) => Key::new(k, name),
            NameSel::Any => (0..self.names.len().max(1))
                .map(|n| Key::new(k, n as NameId))
                .find(|key| self.map.contains_key(key))?,
        };
        let expired = self.map.get(&key)?.expire <= now;
        if expired {
            self.remove(&key);
            return None;
        }
        let st = self.map.get_mut(&key)?;
        observe(st, k, tcp);
        let expire = now.saturating_add(lifetime(k.proto, st.seen, s));
        if st.lease.as_ref().is_some_and(|l| !l.refresh(expire)) {
            // Expired, and another engine took its place back: gone (it
            // is removed when made again or swept).
            return None;
        }
        st.expire = expire;
        st.packets += 1;
        st.bytes += u64::from(len);
        Some(st)
    }

    /// Makes the state of the packet's flow for `parent` (refreshing it if
    /// it exists), within `dyn_max` and the rule's `limit`.
    #[allow(clippy::too_many_arguments)]
    pub fn make(
        &mut self,
        now: Nanos,
        k: &FlowKey,
        name: NameId,
        parent: Parent,
        limit: Option<(LimitMask, u32)>,
        tcp: Option<u8>,
        len: u32,
        s: &Settings,
    ) -> Result<(), Refused> {
        let key = Key::new(k, name);
        if self.map.get(&key).is_some_and(|st| st.expire > now)
            && self
                .check(now, k, NameSel::One(name), tcp, len, s)
                .is_some()
        {
            return Ok(());
        }
        self.remove(&key);
        let max = s.dyn_value(DynSetting::Max) as usize;
        let lkey = limit.map(|(m, _)| LimitKey::new(parent.rule_id, m, k));
        // A shared count is asked only once the state is otherwise made.
        let over_limit = |me: &Self| {
            me.shared.is_none()
                && limit
                    .zip(lkey)
                    .is_some_and(|((_, n), lk)| me.limits.get(&lk).copied().unwrap_or(0) >= n)
        };
        if self.map.len() >= max || over_limit(self) {
            self.sweep(now);
        }
        if self.map.len() >= max {
            self.refused += 1;
            return Err(Refused::Full);
        }
        if over_limit(self) {
            self.refused += 1;
            return Err(Refused::Limit);
        }
        let mut st = State {
            parent,
            fwd: (k.src, k.sport),
            key: *k,
            seen: 0,
            expire: 0,
            packets: 1,
            bytes: u64::from(len),
            limit: lkey,
            lease: None,
            name,
        };
        observe(&mut st, k, tcp);
        st.expire = now.saturating_add(lifetime(k.proto, st.seen, s));
        if let (Some(((_, n), lk)), Some(table)) = (limit.zip(lkey), &self.shared) {
            let Some(lease) = table.take(lk, n, now, st.expire) else {
                self.refused += 1;
                return Err(Refused::Limit);
            };
            st.lease = Some(lease);
        } else if let Some(lk) = lkey {
            *self.limits.entry(lk).or_default() += 1;
        }
        self.map.insert(key, st);
        Ok(())
    }

    fn remove(&mut self, key: &Key) {
        if let Some(st) = self.map.remove(key) {
            self.release(st.limit, st.lease);
        }
    }

    /// Gives back the place a removed state held in its `limit` count.
    fn release(&mut self, lk: Option<LimitKey>, lease: Option<Arc<Lease>>) {
        let Some(lk) = lk else { return };
        match (lease, &self.shared) {
            (Some(lease), Some(table)) => table.give_back(&lk, &lease),
            _ => {
                if let Some(n) = self.limits.get_mut(&lk) {
                    *n -= 1;
                    if *n == 0 {
                        self.limits.remove(&lk);
                    }
                }
            }
        }
    }

    /// Drops every state expired by `now` (and those whose place in a
    /// shared count another engine took back: expired there first).
    pub fn sweep(&mut self, now: Nanos) {
        self.retain(|st| st.expire > now && !st.is_reaped());
    }

    /// Drops the states of rules that are gone.
    pub fn retain(&mut self, mut keep: impl FnMut(&State) -> bool) {
        let mut freed = Vec::new();
        self.map.retain(|_, st| {
            let k = keep(st);
            if !k {
                freed.push((st.limit, st.lease.take()));
            }
            k
        });
        for (lk, lease) in freed {
            self.release(lk, lease);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn flow(a: [u8; 4], sp: u16, b: [u8; 4], dp: u16) -> FlowKey {
        FlowKey::v4(Ipv4Addr::from(a), Ipv4Addr::from(b), proto::TCP, sp, dp)
    }

    fn parent() -> Parent {
        Parent {
            rule_id: 1,
            number: 100,
            hint: 0,
            arg: 0,
        }
    }

    #[test]
    fn a_state_matches_both_ways_and_follows_tcp() {
        let s = Settings::default();
        let mut st = States::default();
        let fwd = flow([10, 0, 0, 1], 5000, [10, 0, 0, 2], 80);
        let rev = flow([10, 0, 0, 2], 80, [10, 0, 0, 1], 5000);
        let any = NameSel::One(st.name_id(None));
        st.make(0, &fwd, 0, parent(), None, Some(tcp_flag::SYN), 60, &s)
            .unwrap();
        // SYN only: dyn_syn_lifetime (20 s).
        let got = st.check(
            NS_PER_SEC,
            &rev,
            any,
            Some(tcp_flag::SYN | tcp_flag::ACK),
            60,
            &s,
        );
        assert_eq!(got.map(|x| x.expire), Some(NS_PER_SEC + 300 * NS_PER_SEC));
        assert!(st
            .check(
                2 * NS_PER_SEC,
                &flow([10, 0, 0, 3], 1, [10, 0, 0, 2], 80),
                any,
                None,
                1,
                &s
            )
            .is_none());
        // Both FINs: dyn_fin_lifetime (1 s); then it expires.
        st.check(3 * NS_PER_SEC, &fwd, any, Some(tcp_flag::FIN), 40, &s);
        let e = st
            .check(3 * NS_PER_SEC, &rev, any, Some(tcp_flag::FIN), 40, &s)
            .map(|x| x.expire);
        assert_eq!(e, Some(4 * NS_PER_SEC));
        assert!(st.check(4 * NS_PER_SEC, &fwd, any, None, 40, &s).is_none());
        assert_eq!(st.len(), 0);
    }

    #[test]
    fn limits_and_dyn_max_refuse() {
        let mut s = Settings::default();
        s.set(crate::command::Setting::Dyn(DynSetting::Max, 3))
            .unwrap();
        let mut st = States::default();
        let m = LimitMask {
            src_addr: true,
            ..LimitMask::default()
        };
        let f = |p| flow([10, 0, 0, 1], p, [10, 0, 0, 2], 80);
        assert!(st
            .make(0, &f(1), 0, parent(), Some((m, 2)), None, 1, &s)
            .is_ok());
        assert!(st
            .make(0, &f(2), 0, parent(), Some((m, 2)), None, 1, &s)
            .is_ok());
        assert_eq!(
            st.make(0, &f(3), 0, parent(), Some((m, 2)), None, 1, &s),
            Err(Refused::Limit)
        );
        let g = flow([10, 0, 0, 9], 1, [10, 0, 0, 2], 80);
        assert!(st.make(0, &g, 0, parent(), None, None, 1, &s).is_ok());
        let h = flow([10, 0, 0, 8], 1, [10, 0, 0, 2], 80);
        assert_eq!(
            st.make(0, &h, 0, parent(), None, None, 1, &s),
            Err(Refused::Full)
        );
        // Once the first ones expire (SYN lifetime 20 s), room again.
        assert!(st
            .make(
                21 * NS_PER_SEC,
                &f(3),
                0,
                parent(),
                Some((m, 2)),
                None,
                1,
                &s
            )
            .is_ok());
        assert_eq!(st.refused, 2);
    }
}
