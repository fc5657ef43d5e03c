//! Where `limit` and `set-limit` count their states: at most N dynamic
//! states per value of the rule's masked fields (ipfw(8): `limit
//! {src-addr | src-port | dst-addr | dst-port} N`).
//!
//! One engine counts in its own plain map (in its state table). Several
//! engines that classify one system's packets, each holding the states of
//! the flows it reads (a data plane sharded over worker threads), count in
//! one [`LimitTable`] given to each ([`crate::Engine::share_limits`]), so
//! a key's N places are shared by all of them. The table is touched only
//! when a limited state is made or removed, never by a packet that merely
//! matches one.
//!
//! What one engine does when a key is full (it sweeps its expired states
//! first, so a place held by a state that has expired is free again), a
//! shared table does across engines: each limited state holds a [`Lease`],
//! the expiry its engine last gave it, and an engine that finds the key
//! full takes back the places of the leases that have expired, whichever
//! engine holds them ([`Lease::reap`]). The holder finds out the next time
//! it refreshes the state ([`Lease::refresh`]): the state is gone, as it
//! would be in one engine met that late. A place is taken back or given
//! back once: under the table's lock, by an atomic exchange on the lease
//! that the holder's refresh also goes through, so a refresh racing a
//! reap either keeps the state (the reap fails) or loses it (the refresh
//! sees it reaped), and never both.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::command::LimitMask;
use crate::flow::FlowKey;
use crate::time::Nanos;

/// The masked fields a `limit` rule counts by, with the rule: a key whose
/// places are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitKey {
    rule: u32,
    v6: bool,
    src: Option<u128>,
    sport: Option<u16>,
    dst: Option<u128>,
    dport: Option<u16>,
}

impl LimitKey {
    /// The key of flow `k` under rule `rule`'s mask `m`.
    pub fn new(rule: u32, m: LimitMask, k: &FlowKey) -> Self {
        LimitKey {
            rule,
            v6: k.v6,
            src: m.src_addr.then_some(k.src),
            sport: m.src_port.then_some(k.sport),
            dst: m.dst_addr.then_some(k.dst),
            dport: m.dst_port.then_some(k.dport),
        }
    }
}

/// The word of a lease taken back by another engine.
const REAPED: u64 = u64::MAX;
/// The latest expiry a lease stores (about 146 years of [`Nanos`]).
const MAX_EXPIRE: Nanos = (u64::MAX >> 1) - 1;

/// One limited state's place in a [`LimitTable`]: the expiry its engine
/// last gave the state, or taken back. The word is the expiry shifted
/// left by one, its low bit flipped by each refresh, so that a refresh
/// always changes it (a reap that read the word before a refresh then
/// fails, even when the refresh left the expiry where it was).
#[derive(Debug)]
pub struct Lease(AtomicU64);

impl Lease {
    /// A lease for a state that expires at `expire`.
    pub fn new(expire: Nanos) -> Self {
        Lease(AtomicU64::new(expire.min(MAX_EXPIRE) << 1))
    }

    /// The holder moves the state's expiry to `expire`; `false` if the
    /// place was taken back (the state is gone, its place counted out).
    /// Only the holder calls this.
    pub fn refresh(&self, expire: Nanos) -> bool {
        let was = self.0.load(Ordering::Relaxed);
        if was == REAPED {
            return false;
        }
        let word = (expire.min(MAX_EXPIRE) << 1) | ((was & 1) ^ 1);
        self.0.swap(word, Ordering::AcqRel) != REAPED
    }

    /// Takes the place back if the state expired by `now` as its holder
    /// last refreshed it; `true` if it is (now or already) taken back.
    /// A [`LimitTable`] calls this under its lock.
    pub fn reap(&self, now: Nanos) -> bool {
        let word = self.0.load(Ordering::Acquire);
        if word == REAPED {
            return true;
        }
        word >> 1 <= now
            && self
                .0
                .compare_exchange(word, REAPED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Whether the place was taken back.
    pub fn is_reaped(&self) -> bool {
        self.0.load(Ordering::Acquire) == REAPED
    }
}

/// A count of limited states shared by several engines (see the module
/// docs): the places of each key, each held by one state's [`Lease`].
pub trait LimitTable: Send + Sync + fmt::Debug {
    /// A place for a new state of `key`, which expires at `expire`, if
    /// fewer than `max` are held once the leases expired by `now` are
    /// taken back ([`Lease::reap`]); `None` if `max` are held.
    fn take(&self, key: LimitKey, max: u32, now: Nanos, expire: Nanos) -> Option<Arc<Lease>>;

    /// Gives back the place of a state its engine removed (expired,
    /// deleted with its rule, swept); nothing if it was taken back
    /// already.
    fn give_back(&self, key: &LimitKey, lease: &Arc<Lease>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reap_takes_back_only_an_expired_lease_and_the_holder_sees_it() {
        let l = Lease::new(10);
        assert!(!l.reap(9));
        assert!(l.refresh(20));
        assert!(!l.reap(10));
        assert!(l.reap(20));
        assert!(l.is_reaped());
        assert!(!l.refresh(30));
    }

    #[test]
    fn a_refresh_to_the_same_expiry_still_defeats_a_reap_that_read_before_it() {
        let l = Lease::new(10);
        let read = l.0.load(Ordering::Acquire);
        assert!(l.refresh(10));
        assert!(l
            .0
            .compare_exchange(read, REAPED, Ordering::AcqRel, Ordering::Acquire)
            .is_err());
    }
}
