//! Time is plain nanoseconds on whatever clock the caller drives the engine with.
//!
//! The engine never reads a clock: every entry point takes `now`. A live backend
//! passes a monotonic clock, `sim` passes capture timestamps, and tests jump
//! straight to the next deadline.

/// A point in time or a duration, in nanoseconds.
pub type Nanos = u64;

pub const NS_PER_US: Nanos = 1_000;
pub const NS_PER_MS: Nanos = 1_000_000;
pub const NS_PER_SEC: Nanos = 1_000_000_000;
