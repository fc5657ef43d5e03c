//! The `limit` count the workers share: one table of places per key
//! (see [`dummynet_engine::limits`]), given to every replica, so that a
//! `limit src-addr 2` rule admits two states per source address in all,
//! though the flows of one address are read, and their states held, by
//! different workers.
//!
//! One lock guards the table; it is taken only when a limited state is
//! made or removed (a packet that matches a state never takes it), and
//! holds it for a lookup and a short list: the workers contend for it no
//! more often than they make limited flows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dummynet_engine::limits::{Lease, LimitKey, LimitTable};
use dummynet_engine::Nanos;

/// The places of each key, each held by one worker's state.
#[derive(Debug, Default)]
pub struct SharedLimits {
    places: Mutex<HashMap<LimitKey, Vec<Arc<Lease>>>>,
}

impl SharedLimits {
    fn places(&self) -> MutexGuard<'_, HashMap<LimitKey, Vec<Arc<Lease>>>> {
        // Nothing panics while it is held; a poisoned table is still whole.
        self.places.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Places held, over all keys (those taken back not counted).
    pub fn held(&self) -> usize {
        self.places().values().map(Vec::len).sum()
    }
}

impl LimitTable for SharedLimits {
    fn take(&self, key: LimitKey, max: u32, now: Nanos, expire: Nanos) -> Option<Arc<Lease>> {
        let max = max as usize;
        let mut places = self.places();
        let held = places.entry(key).or_default();
        if held.len() >= max {
            // As one engine sweeps its expired states when a key is full.
            held.retain(|l| !l.reap(now));
        }
        if held.len() >= max {
            if held.is_empty() {
                places.remove(&key);
            }
            return None;
        }
        let lease = Arc::new(Lease::new(expire));
        held.push(lease.clone());
        Some(lease)
    }

    fn give_back(&self, key: &LimitKey, lease: &Arc<Lease>) {
        let mut places = self.places();
        if let Some(held) = places.get_mut(key) {
            held.retain(|l| !Arc::ptr_eq(l, lease));
            if held.is_empty() {
                places.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    use dummynet_engine::config::LimitMask;
    use dummynet_engine::flow::proto;
    use dummynet_engine::FlowKey;

    fn key(src: u8) -> LimitKey {
        let m = LimitMask {
            src_addr: true,
            ..LimitMask::default()
        };
        let k = FlowKey::v4(
            Ipv4Addr::new(10, 0, 0, src),
            Ipv4Addr::new(10, 9, 0, 1),
            proto::UDP,
            1000,
            53,
        );
        LimitKey::new(1, m, &k)
    }

    /// Threads race to take the last places of one key, each giving its
    /// place back now and then: at no moment do more than `MAX` hold one,
    /// and when they all keep what they got, exactly `MAX` do.
    #[test]
    fn racing_workers_never_hold_more_than_the_limit() {
        const MAX: u32 = 3;
        const THREADS: usize = 6;
        let table = SharedLimits::default();
        let holding = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let admitted = AtomicUsize::new(0);
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (table, holding, most, admitted, start) =
                    (&table, &holding, &most, &admitted, &start);
                s.spawn(move || {
                    start.wait();
                    for round in 0..2_000usize {
                        // Far from expiring: no place is ever taken back.
                        let Some(lease) = table.take(key(1), MAX, 0, u64::MAX) else {
                            continue;
                        };
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        if (round + t) % 7 == 0 {
                            // Keeps it to the end.
                            admitted.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        std::hint::spin_loop();
                        holding.fetch_sub(1, Ordering::SeqCst);
                        table.give_back(&key(1), &lease);
                    }
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= MAX as usize);
        // Some rounds found the key full (the race was real), and those
        // that kept theirs filled it exactly.
        assert_eq!(admitted.load(Ordering::SeqCst), MAX as usize);
        assert_eq!(table.held(), MAX as usize);
        assert!(table.take(key(1), MAX, 0, u64::MAX).is_none());
        // Another key has its own places.
        assert!(table.take(key(2), MAX, 0, u64::MAX).is_some());
    }

    /// A place held by a state that expired is taken back by the next
    /// worker that finds the key full, whoever holds it; a state its
    /// holder refreshed in time keeps its place.
    #[test]
    fn an_expired_place_is_taken_back_and_its_holder_learns_it() {
        let table = SharedLimits::default();
        let a = table.take(key(1), 2, 0, 10).expect("first place");
        let b = table.take(key(1), 2, 0, 10).expect("second place");
        assert!(b.refresh(30), "b's holder refreshes it in time");
        assert!(table.take(key(1), 2, 9, 40).is_none(), "full at 9");
        let c = table.take(key(1), 2, 10, 40).expect("a expired at 10");
        assert!(!a.refresh(50), "a's holder finds it taken back");
        assert!(b.refresh(50) && c.refresh(50));
        assert!(table.take(key(1), 2, 20, 60).is_none());
        // Given back by their holders: the key is empty again.
        table.give_back(&key(1), &b);
        table.give_back(&key(1), &c);
        table.give_back(&key(1), &a);
        assert_eq!(table.held(), 0);
    }

    /// A reap racing a refresh that keeps the state alive past the
    /// reaper's time: either the refresh comes first and the reap finds
    /// the state alive, or the reap does and the holder finds its place
    /// taken back; never both, which would make two live states of one
    /// place.
    #[test]
    fn a_refresh_racing_a_reap_either_keeps_the_place_or_loses_it() {
        for _ in 0..200 {
            let table = SharedLimits::default();
            let lease = table.take(key(1), 1, 0, 5).expect("the place");
            let start = Barrier::new(2);
            let (kept, taken) = std::thread::scope(|s| {
                let holder = s.spawn(|| {
                    start.wait();
                    // Alive past the reaper's time once refreshed.
                    lease.refresh(6)
                });
                let reaper = s.spawn(|| {
                    start.wait();
                    table.take(key(1), 1, 5, 100).is_some()
                });
                (
                    holder.join().unwrap_or(false),
                    reaper.join().unwrap_or(false),
                )
            });
            // Never both: one live state at most.
            assert!(!(kept && taken), "refresh and reap both won");
            assert!(kept || taken);
            assert_eq!(table.held(), 1);
        }
    }
}
