//! The event tap's subscribers: which events each gets ([`EventFilter`]),
//! its end ([`Subscription`]) and the observer thread's ([`Subscriber`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use super::record::ID_COUNT_MASK;
use crate::events::Event;

/// Which events a subscriber gets ([`Observer::subscribe`](super::Observer::subscribe)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only events naming this pipe (forward, departure, drop).
    pub pipe: Option<u32>,
    /// Only events naming this rule.
    pub rule: Option<u16>,
    /// Only packets whose id is a multiple of this (every event of each);
    /// 0 and 1 keep all.
    pub sample: Option<u32>,
}

impl EventFilter {
    /// Does `e` pass? (The start line always does.)
    pub fn keeps<S>(&self, e: &Event<S>) -> bool {
        let Some(id) = e.id() else {
            return true;
        };
        if let Some(n) = self.sample.filter(|n| *n > 1) {
            // The worker's count, not its number in the high bits: one in
            // n of each worker's packets.
            if !(id & ID_COUNT_MASK).is_multiple_of(u64::from(n)) {
                return false;
            }
        }
        if self.pipe.is_some() && e.target().0 != self.pipe {
            return false;
        }
        if self.rule.is_some() && e.rule() != self.rule {
            return false;
        }
        true
    }
}

/// One subscriber's end ([`Observer::subscribe`](super::Observer::subscribe)). Dropping it
/// unsubscribes.
pub struct Subscription {
    pub(super) rx: Receiver<Event<String>>,
    pub(super) state: Arc<SubState>,
}

/// What a subscription and the observer thread share.
#[derive(Default)]
pub(super) struct SubState {
    /// Events lost because the subscriber's channel was full.
    pub(super) lost: AtomicU64,
    /// The subscription was dropped.
    pub(super) gone: AtomicBool,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.state.gone.store(true, Ordering::Relaxed);
    }
}

impl Subscription {
    /// The next event, waiting at most `timeout`; `Disconnected` once the
    /// daemon has stopped and every event was taken.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Event<String>, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    /// The next event if one is waiting.
    pub fn try_recv(&self) -> Result<Event<String>, TryRecvError> {
        self.rx.try_recv()
    }

    /// Events this subscriber lost because its channel was full.
    pub fn lost(&self) -> u64 {
        self.state.lost.load(Ordering::Relaxed)
    }
}

/// The observer's side of a subscription.
pub(super) struct Subscriber {
    pub(super) filter: EventFilter,
    pub(super) tx: SyncSender<Event<String>>,
    pub(super) state: Arc<SubState>,
}
