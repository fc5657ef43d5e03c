//! Frames a port could not send yet: the kernel said `ENOBUFS` (its device
//! queue or qdisc was full) or `EAGAIN` (the socket's send buffer was). The
//! emulated link delivered them, so they are held, in order, and sent again
//! on the next turns; only a port that stays unable to send drops them.
//!
//! Retried on a timer ([`RETRY`]), not on `POLLOUT`: a full qdisc refuses
//! with `ENOBUFS` while the socket itself polls writable, so only trying
//! again tells.

use std::time::{Duration, Instant};

/// While frames are held, the data plane turns at least this often to try
/// them again. A 1500-byte frame takes 120 µs on a 100 Mbit/s link, so a
/// queue that drains at that rate has room again by the next try; it costs
/// at most 10,000 wake-ups a second, and only while a port is refusing.
pub const RETRY: u64 = 100_000;

/// At most this many frames wait per port: as many as a default device
/// queue (`txqueuelen` 1000) holds, i.e. as if the port had one more such
/// queue. Beyond it, the newest are dropped (a tail drop, as that queue's).
pub const MAX_FRAMES: usize = 1024;

/// And at most this many bytes per port, whichever comes first: 1024
/// super-packets of 64 KiB would otherwise hold 64 MiB a port.
pub const MAX_BYTES: usize = 4 << 20;

/// A frame held this long is dropped: by then TCP has retransmitted it
/// (its minimum RTO is 200 ms), so sending it would only delay what
/// follows. A port that takes nothing at all drops everything it holds
/// after this long; one slower than the emulated link, the frames that
/// wait too long behind it.
pub const MAX_HOLD: Duration = Duration::from_millis(200);

/// Upper bounds of the lateness buckets of held frames, in µs (the last
/// bucket counts the later ones).
pub const LATE_BUCKETS_US: [u64; 4] = [100, 1_000, 10_000, 100_000];

/// What became of the frames a port held, for `stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HeldCounters {
    /// Frames refused for lack of room and held (each counted once).
    pub held: u64,
    /// Held frames sent since.
    pub sent_late: u64,
    /// Held frames dropped ([`Overflow`], or the port's link lost).
    pub dropped: u64,
    /// Sum and maximum of how late held frames left (from their first
    /// refusal), in µs.
    pub late_sum_us: u64,
    pub late_max_us: u64,
    /// How many left within each of [`LATE_BUCKETS_US`], then later.
    pub late_buckets: [u64; LATE_BUCKETS_US.len() + 1],
}

impl HeldCounters {
    /// A held frame left `late` after it was first refused.
    pub fn sent(&mut self, late: Duration) {
        let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
        self.sent_late += 1;
        self.late_sum_us = self.late_sum_us.saturating_add(us);
        self.late_max_us = self.late_max_us.max(us);
        let b = LATE_BUCKETS_US
            .iter()
            .position(|&le| us <= le)
            .unwrap_or(LATE_BUCKETS_US.len());
        self.late_buckets[b] += 1;
    }

    /// `stats` entries, named after the port (`IF.tx_held`, ...).
    pub fn entries(&self, name: &str) -> Vec<(String, u64)> {
        let mut out = vec![
            (format!("{name}.tx_held"), self.held),
            (format!("{name}.tx_held_sent"), self.sent_late),
            (format!("{name}.tx_held_dropped"), self.dropped),
            (format!("{name}.tx_held_late_sum_us"), self.late_sum_us),
            (format!("{name}.tx_held_late_max_us"), self.late_max_us),
        ];
        for (i, n) in self.late_buckets.iter().enumerate() {
            let label = match LATE_BUCKETS_US.get(i) {
                Some(le) => format!("{name}.tx_held_late_le_{le}us"),
                None => format!("{name}.tx_held_late_over_{}us", LATE_BUCKETS_US[i - 1]),
            };
            out.push((label, *n));
        }
        out
    }
}

/// Why a port dropped frames it held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// More than [`MAX_FRAMES`] or [`MAX_BYTES`] waited.
    Full,
    /// They waited [`MAX_HOLD`].
    Expired,
    /// The daemon is stopping with frames still held.
    Stopping,
}

/// How many of the held frames, oldest first, have waited [`MAX_HOLD`] at
/// `now` (`held_at`: when each was first refused).
pub fn expired(held_at: impl Iterator<Item = Instant>, now: Instant) -> usize {
    held_at
        .take_while(|&at| now.saturating_duration_since(at) >= MAX_HOLD)
        .count()
}

/// How many of the newest of `lens` (the held frames' lengths, oldest
/// first) go over [`MAX_FRAMES`] or [`MAX_BYTES`]; the oldest frame is
/// always kept.
pub fn over_bound(lens: impl ExactSizeIterator<Item = usize>) -> usize {
    let n = lens.len();
    let mut bytes = 0usize;
    let mut keep = 0usize;
    for len in lens {
        bytes = bytes.saturating_add(len);
        if keep > 0 && (keep >= MAX_FRAMES || bytes > MAX_BYTES) {
            break;
        }
        keep += 1;
    }
    n - keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_keeps_the_oldest_within_its_bounds() {
        assert_eq!(over_bound([1500usize; 10].into_iter()), 0);
        assert_eq!(over_bound(vec![100; MAX_FRAMES + 7].into_iter()), 7);
        // 64 super-packets of 64 KiB fill the bytes; the 65th goes.
        assert_eq!(over_bound(vec![65_536; 70].into_iter()), 6);
        // One frame over the byte bound alone is still kept.
        assert_eq!(over_bound([MAX_BYTES + 1].into_iter()), 0);
    }

    #[test]
    fn frames_held_too_long_expire_oldest_first() {
        let t0 = Instant::now();
        let at = [t0, t0 + Duration::from_millis(50), t0 + MAX_HOLD];
        assert_eq!(expired(at.into_iter(), t0 + Duration::from_millis(199)), 0);
        assert_eq!(expired(at.into_iter(), t0 + MAX_HOLD), 1);
        assert_eq!(expired(at.into_iter(), t0 + Duration::from_millis(260)), 2);
        assert_eq!(expired(at.into_iter(), t0 + Duration::from_secs(1)), 3);
    }

    #[test]
    fn lateness_lands_in_its_bucket() {
        let mut c = HeldCounters::default();
        c.sent(Duration::from_micros(50));
        c.sent(Duration::from_micros(100));
        c.sent(Duration::from_millis(5));
        c.sent(Duration::from_secs(2));
        assert_eq!(c.late_buckets, [2, 0, 1, 0, 1]);
        assert_eq!(c.sent_late, 4);
        assert_eq!(c.late_max_us, 2_000_000);
        assert_eq!(c.late_sum_us, 2_005_150);
        let e = c.entries("p");
        assert!(e.contains(&("p.tx_held_late_over_100000us".to_string(), 1)));
        assert!(e.contains(&("p.tx_held_late_le_100us".to_string(), 2)));
    }
}
