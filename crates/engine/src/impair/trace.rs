//! `trace FILE [once|loop]`: mahimahi's trace-driven links.
//!
//! TODO(helper): parse, cursor, tests.

use crate::time::Nanos;

/// Bytes one delivery opportunity carries (mahimahi's `PACKET_SIZE`).
pub const OPPORTUNITY_BYTES: u32 = 1504;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceMode {
    /// After the last opportunity, start again (mahimahi's behaviour).
    #[default]
    Loop,
    /// After the last opportunity, the link carries nothing more.
    Once,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The file's name, for `show`.
    pub name: String,
    /// Opportunity times from the trace's start, nondecreasing, in ns
    /// (the file's milliseconds × 10⁶); a time listed k times is k
    /// opportunities.
    pub times: Vec<Nanos>,
    pub mode: TraceMode,
}
