//! What the data plane says: `tracing` events of two targets, and the
//! count of those the binary's subscriber could not write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The target of a line that may wait [`WAIT`] for stderr.
pub const TARGET: &str = "dummynet";

/// The target of a line from the data plane's thread, which never waits.
pub const TARGET_NOW: &str = "dummynet::now";

/// How long a line of [`TARGET`] waits for stderr to take it.
pub const WAIT: Duration = Duration::from_secs(1);

/// Messages that could not be written, and the first reason.
static LOST: AtomicU64 = AtomicU64::new(0);
static ERROR: OnceLock<String> = OnceLock::new();

/// Counts one message the writer lost, and why (the first reason is kept).
pub fn lost_one(why: String) {
    LOST.fetch_add(1, Ordering::Relaxed);
    let _ = ERROR.set(why);
}

/// How many messages could not be written to stderr, and the first
/// reason; `None` if none.
pub fn stderr_lost() -> Option<(u64, String)> {
    let n = LOST.load(Ordering::Relaxed);
    (n > 0).then(|| (n, ERROR.get().cloned().unwrap_or_default()))
}
