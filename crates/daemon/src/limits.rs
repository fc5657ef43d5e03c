//! What one client may cost the daemon ([`Limits`], enforced by the
//! control socket's server) and how a client waits out a daemon that
//! answered `busy` ([`BusyBackoff`]).

use std::time::Duration;

/// Bounds on what one client may cost the daemon.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Clients served at once. When all places are taken a new client
    /// takes the place of the oldest that has not sent its whole request
    /// (or has not read its answer for [`Limits::stall`]); only if none
    /// has is it told `busy` (and retries).
    pub max_clients: usize,
    /// Places one user of the `--socket-group` (not root, not the
    /// daemon's user) may hold at once.
    pub per_user: usize,
    /// The longest request line, in bytes.
    pub max_request: usize,
    /// How long a client may take to send its whole request.
    pub read_timeout: Duration,
    /// How long a client may take to read its whole answer.
    pub write_timeout: Duration,
    /// How long a client must have left its answer unread before its
    /// place may go to a new client.
    pub stall: Duration,
    /// How long a request waits for the data plane before it is abandoned
    /// (and then never applied). One the data plane took is waited for as
    /// long again, then reported still pending (exit 75).
    pub answer_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_clients: 32,
            per_user: 16,
            // A request is a few hundred bytes; a megabyte bounds a client
            // that never sends a newline.
            max_request: 1 << 20,
            // Clients write their line at once.
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(5),
            stall: Duration::from_millis(250),
            answer_timeout: Duration::from_secs(10),
        }
    }
}

/// How long a client keeps asking a daemon that answers `busy`.
pub const BUSY_WAIT: Duration = Duration::from_secs(10);

/// The waits between asks of a daemon that answered `busy`: it refuses a
/// connection beyond its cap before reading the request, so asking again
/// is safe. A burst of clients (hundreds of `shell --join` started at once)
/// finds the cap full only while the accept loop hands their first lines
/// to threads, so waits start short; they double to 250 ms, and each is
/// stretched by a part that differs between processes, so that the burst
/// does not come back in step.
pub struct BusyBackoff {
    next: Duration,
    until: std::time::Instant,
    spread: u32,
}

impl BusyBackoff {
    pub fn new(limit: Duration) -> BusyBackoff {
        BusyBackoff {
            next: Duration::from_millis(5),
            until: std::time::Instant::now() + limit,
            spread: std::process::id(),
        }
    }

    /// Sleeps before the next ask; false (without sleeping) once the time
    /// is up.
    pub fn wait(&mut self) -> bool {
        let now = std::time::Instant::now();
        if now >= self.until {
            return false;
        }
        // 0 to 7/8 more, by the process and the attempt.
        self.spread = self.spread.wrapping_mul(2_654_435_761).rotate_left(7);
        let stretched = self.next + self.next * (self.spread % 8) / 8;
        std::thread::sleep(stretched.min(self.until - now));
        self.next = (self.next * 2).min(Duration::from_millis(250));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_backoff_doubles_and_stops_at_its_limit() {
        let start = std::time::Instant::now();
        let mut b = BusyBackoff::new(Duration::from_millis(300));
        let mut waits = 0;
        while b.wait() {
            waits += 1;
            assert!(waits < 100, "the backoff never ends");
        }
        let spent = start.elapsed();
        // 5, 10, 20, 40, 80, 160 ms (each up to 7/8 longer), cut at 300:
        // six waits, fewer if the machine oversleeps, not the sixty of a
        // wait that does not grow; and no sleep past the limit.
        assert!((2..=7).contains(&waits), "{waits} waits");
        assert!(spent >= Duration::from_millis(300), "{spent:?}");
        assert!(!b.wait(), "a wait past the limit");
    }
}
