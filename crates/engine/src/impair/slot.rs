//! `slot MIN [MAX] [packets N] [bytes B]`: netem's slotting.
//!
//! Some links send in bursts at moments they are granted (Wi-Fi
//! aggregation, DOCSIS and LTE grants). A slotted link starts sending only
//! when a slot is open. As in netem, a slot opens at a time drawn uniformly
//! from `[MIN, MAX]` after the previous one closed, and closes once it has
//! let `N` packets or `B` bytes through (the packet that crosses `B` still
//! goes); without `packets` or `bytes` it stays open while packets keep
//! coming. A slot left open while nothing waited is stale: the next packet
//! to reach the idle link waits for a fresh draw, which is what makes an
//! isolated packet wait for its grant.
//!
//! Here the gate sits in front of the link (the transmitter waits for its
//! grant, then serializes at `bw`); netem gates its output after the delay.
//! With no `bw`, packets let through by one slot leave together at its start.

use super::{Impairment, On, Stage};
use crate::params::ParamError;
use crate::rng::Rng;
use crate::time::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub min: Nanos,
    /// `>= min`; `== min` for a fixed spacing.
    pub max: Nanos,
    pub packets: Option<u32>,
    pub bytes: Option<u64>,
}

/// Per-instance state.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotState {
    /// When the current slot opens (opened, if in the past); `None` before
    /// the first packet.
    next: Option<Nanos>,
    packets_left: i64,
    bytes_left: i64,
}

impl SlotState {
    /// A packet reached the idle link at `now`: a slot that opened before
    /// now is stale, so a new one is drawn from now.
    pub fn wake(&mut self, now: Nanos, s: &Slot, rng: &mut Rng) {
        if self.next.is_none_or(|t| t < now) {
            self.draw(now, s, rng);
        }
    }

    /// The time the link must wait for before sending, if the slot is not
    /// open at `now`.
    #[inline]
    pub fn closed_until(&self, now: Nanos) -> Option<Nanos> {
        self.next.filter(|&t| t > now)
    }

    /// A packet of `len` bytes went through at `now`.
    pub fn sent(&mut self, now: Nanos, len: u32, s: &Slot, rng: &mut Rng) {
        self.packets_left -= 1;
        self.bytes_left -= i64::from(len);
        if self.packets_left <= 0 || self.bytes_left <= 0 {
            self.draw(now, s, rng);
        }
    }

    fn draw(&mut self, now: Nanos, s: &Slot, rng: &mut Rng) {
        let span = s.max.saturating_sub(s.min);
        let wait = if span == 0 {
            s.min
        } else {
            s.min + ((u128::from(rng.next_u64()) * (u128::from(span) + 1)) >> 64) as u64
        };
        self.next = Some(now.saturating_add(wait));
        self.packets_left = s.packets.map_or(i64::MAX, i64::from);
        self.bytes_left = s
            .bytes
            .map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
    }
}

impl Impairment for Slot {
    fn name(&self) -> &'static str {
        "slot"
    }

    fn stage(&self) -> Stage {
        Stage::Link
    }

    fn check(&self, _on: On<'_>) -> Result<(), ParamError> {
        let s = self;
        if s.max < s.min {
            return Err("slot MAX must not be below MIN".into());
        }
        if s.max == 0 {
            return Err("slot needs a spacing above 0".into());
        }
        if s.packets == Some(0) || s.bytes == Some(0) {
            return Err("slot packets and bytes must be at least 1".into());
        }
        Ok(())
    }

    fn display(&self) -> String {
        let s = self;
        let t = crate::units::fmt_time;
        let mut out = format!("slot {}", t(s.min));
        if s.max != s.min {
            out.push_str(&format!(" {}", t(s.max)));
        }
        if let Some(p) = s.packets {
            out.push_str(&format!(" packets {p}"));
        }
        if let Some(b) = s.bytes {
            out.push_str(&format!(" bytes {b}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    #[test]
    fn budget_closes_the_slot_and_draws_in_range() {
        let s = Slot {
            min: 10 * NS_PER_MS,
            max: 20 * NS_PER_MS,
            packets: Some(2),
            bytes: None,
        };
        let mut st = SlotState::default();
        let mut rng = Rng::new(5);
        st.wake(0, &s, &mut rng);
        let open = st.closed_until(0).unwrap();
        assert!((10 * NS_PER_MS..=20 * NS_PER_MS).contains(&open));
        assert_eq!(st.closed_until(open), None);
        st.sent(open, 100, &s, &mut rng);
        assert_eq!(st.closed_until(open), None, "one packet left");
        st.sent(open, 100, &s, &mut rng);
        let next = st.closed_until(open).unwrap();
        assert!((open + 10 * NS_PER_MS..=open + 20 * NS_PER_MS).contains(&next));
        // Stale: a packet arriving long after the slot opened waits anew.
        st.wake(next + NS_PER_MS, &s, &mut rng);
        assert!(st.closed_until(next + NS_PER_MS).unwrap() >= next + 11 * NS_PER_MS);
    }
}
