//! `trace FILE [once|loop]`: mahimahi's trace-driven links.
//!
//! TODO(helper): cursor, tests.

use thiserror::Error;

use crate::time::{Nanos, NS_PER_MS};

/// Why a trace file was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TraceError {
    #[error("line {line}: `{token}` is not a time; expected whole milliseconds (0 or more)")]
    BadTime { line: usize, token: String },
    #[error("line {line}: {ms} ms comes after {prev} ms; times must not decrease")]
    Decreasing { line: usize, ms: u64, prev: u64 },
    #[error("the trace has no opportunities")]
    Empty,
    #[error("the trace lasts 0 ms; its last time must be above 0")]
    ZeroLength,
}

/// Reads a mahimahi trace: one whole-millisecond time per line.
pub fn parse(name: &str, text: &str, mode: TraceMode) -> Result<Trace, TraceError> {
    let mut times = Vec::new();
    let mut prev = 0;
    for (i, line) in text.lines().enumerate() {
        let token = line.trim();
        if token.is_empty() {
            continue;
        }
        let ms = token.parse::<u64>().map_err(|_| TraceError::BadTime {
            line: i + 1,
            token: token.to_string(),
        })?;
        if ms < prev {
            return Err(TraceError::Decreasing {
                line: i + 1,
                ms,
                prev,
            });
        }
        prev = ms;
        times.push(ms.saturating_mul(NS_PER_MS));
    }
    match times.last() {
        None => Err(TraceError::Empty),
        Some(0) => Err(TraceError::ZeroLength),
        Some(_) => Ok(Trace {
            name: name.to_string(),
            times,
            mode,
        }),
    }
}

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

/// An opportunity: lap `lap` of the trace, line `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceCursor {
    pub lap: u64,
    pub index: usize,
}

impl Trace {
    pub fn period(&self) -> Nanos {
        self.times.last().copied().unwrap_or(0).max(1)
    }

    /// The first opportunity strictly after `t`, for a trace started at `start`.
    pub fn first_after(&self, start: Nanos, t: Nanos) -> Option<TraceCursor> {
        let (lap, rel) = if t < start {
            return self.times.first().map(|_| TraceCursor { lap: 0, index: 0 });
        } else {
            let rel = t - start;
            (rel / self.period(), rel % self.period())
        };
        let index = self.times.partition_point(|&x| x <= rel);
        let c = if index < self.times.len() {
            TraceCursor { lap, index }
        } else {
            TraceCursor {
                lap: lap + 1,
                index: 0,
            }
        };
        (self.mode == TraceMode::Loop || c.lap == 0).then_some(c)
    }

    pub fn at(&self, start: Nanos, c: TraceCursor) -> Nanos {
        let t = self.times.get(c.index).copied().unwrap_or(0);
        start
            .saturating_add(c.lap.saturating_mul(self.period()))
            .saturating_add(t)
    }

    pub fn next(&self, c: TraceCursor) -> Option<TraceCursor> {
        if c.index + 1 < self.times.len() {
            return Some(TraceCursor {
                lap: c.lap,
                index: c.index + 1,
            });
        }
        (self.mode == TraceMode::Loop).then_some(TraceCursor {
            lap: c.lap + 1,
            index: 0,
        })
    }
}
