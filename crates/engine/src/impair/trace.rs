//! `trace FILE [once|loop]`: mahimahi's trace-driven links.
//!
//! mahimahi (Netravali et al., "Mahimahi: Accurate Record-and-Replay for
//! HTTP", USENIX ATC 2015) replaces a link's rate with a list of *delivery
//! opportunities*. A trace file holds one whole number of milliseconds per
//! line, nondecreasing; each line is one opportunity to deliver
//! [`OPPORTUNITY_BYTES`] bytes at that time, and a time listed k times is k
//! opportunities at the same instant. The trace's period is its last time:
//! looping, opportunity `i` of lap `k` falls at `k·period + times[i]`. With a
//! first line of `0`, the last opportunity of one lap and the first of the
//! next share the instant `k·period`; mahimahi does the same, and a trace
//! written for it keeps its rate here. `once` stops after the first lap,
//! after which the link carries nothing.
//!
//! A traced pipe serves its queue the way mahimahi's link does:
//! - at each opportunity the head of the queue gets up to 1504 bytes; a
//!   packet longer than what is left of the opportunity keeps its remaining
//!   bytes for the next opportunities, and leaves the link at the one that
//!   carries its last byte;
//! - an opportunity that finds the queue empty is lost, and so are the unused
//!   bytes of an opportunity once the queue empties: a link idle at its
//!   opportunities does not save them up.
//!
//! `bw` and `trace` exclude each other (configuring one clears the other):
//! the trace *is* the link's rate. Trace time 0 is when the pipe was
//! configured with the trace, so every run replays the trace from its start.
//!
//! Files are mahimahi's own format, with no extension: blank lines are
//! skipped (and the last line may lack its newline), but there are no comment
//! lines, so a file that reads here also reads in mahimahi.

use thiserror::Error;

use super::{Impairment, On, Stage};
use crate::params::ParamError;
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC};

/// Why a trace file was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TraceError {
    #[error(
        "line {line}: `{token}` is not a time; expected whole milliseconds (0 or more), \
         one per line, with no comments"
    )]
    BadTime { line: usize, token: String },
    #[error("line {line}: {ms} ms comes after {prev} ms; times must not decrease")]
    Decreasing { line: usize, ms: u64, prev: u64 },
    #[error(
        "line {line}: {ms} ms is more than a year ({max} ms) after the trace's start; \
         a trace is at most a year long"
    )]
    TooLong { line: usize, ms: u64, max: u64 },
    #[error("the trace has no opportunities")]
    Empty,
    #[error("the trace lasts 0 ms; its last time must be above 0")]
    ZeroLength,
}

/// The latest time a trace may list: a year, in ms. Far past any recorded
/// link (mahimahi's traces last seconds to minutes), and it keeps every
/// time, and many laps of it, exact in nanoseconds.
pub const MAX_TRACE_MS: u64 = 365 * 24 * 3600 * 1000;

/// Reads a mahimahi trace: one whole-millisecond time per line.
pub fn parse(name: &str, text: &str, mode: TraceMode) -> Result<Trace, TraceError> {
    let mut times = Vec::new();
    let mut prev = 0;
    for (i, line) in text.lines().enumerate() {
        let token = line.trim();
        if token.is_empty() {
            continue;
        }
        // `u64::from_str` also takes a leading `+`; a trace never has one.
        let ms = token
            .parse::<u64>()
            .ok()
            .filter(|_| token.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| TraceError::BadTime {
                line: i + 1,
                token: token.to_string(),
            })?;
        if ms > MAX_TRACE_MS {
            return Err(TraceError::TooLong {
                line: i + 1,
                ms,
                max: MAX_TRACE_MS,
            });
        }
        if ms < prev {
            return Err(TraceError::Decreasing {
                line: i + 1,
                ms,
                prev,
            });
        }
        prev = ms;
        times.push(ms * NS_PER_MS);
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

/// One delivery opportunity of a trace: opportunity `index` of lap `lap`.
/// Laps count from 0; in `once` mode there is only lap 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct TraceCursor {
    pub lap: u64,
    pub index: usize,
}

impl Trace {
    /// The length of one lap: the last time of the file (0 only for a trace
    /// [`parse`] would have refused).
    pub fn period(&self) -> Nanos {
        self.times.last().copied().unwrap_or(0)
    }

    /// The first opportunity strictly after `t`, for a trace that started at
    /// `start` (opportunity `i` of lap `k` is at `start + k·period + times[i]`);
    /// `None` once a `once` trace is over (or for an empty trace).
    ///
    /// "Strictly after" lets a link that has just used the opportunity at
    /// `t` ask for the next one without getting the same instant back; the
    /// other opportunities at the same instant are reached with [`next`].
    ///
    /// [`next`]: Trace::next
    pub fn first_after(&self, start: Nanos, t: Nanos) -> Option<TraceCursor> {
        let period = self.period();
        if period == 0 {
            return None;
        }
        let Some(rel) = t.checked_sub(start) else {
            // Every opportunity, even one at time 0, is at or after `start`.
            return Some(TraceCursor { lap: 0, index: 0 });
        };
        let lap = rel / period;
        let into = rel % period;
        // Opportunities of earlier laps are at most `lap·period <= rel`, so
        // the answer is in this lap; `into < period = times[last]`, so this
        // lap always has one after it.
        let index = self.times.partition_point(|&x| x <= into);
        match self.mode {
            TraceMode::Once if lap > 0 => None,
            _ => Some(TraceCursor { lap, index }),
        }
    }

    /// The absolute time of opportunity `c` for a trace started at `start`,
    /// saturating at `Nanos::MAX` (also for a cursor this trace cannot have
    /// made).
    pub fn at(&self, start: Nanos, c: TraceCursor) -> Nanos {
        match self.times.get(c.index) {
            Some(&offset) => start
                .saturating_add(c.lap.saturating_mul(self.period()))
                .saturating_add(offset),
            None => Nanos::MAX,
        }
    }

    /// The opportunity after `c`: the next line, or the first line of the
    /// next lap; `None` after the last line of a `once` trace.
    pub fn next(&self, c: TraceCursor) -> Option<TraceCursor> {
        if c.index + 1 < self.times.len() {
            return Some(TraceCursor {
                lap: c.lap,
                index: c.index + 1,
            });
        }
        match self.mode {
            TraceMode::Once => None,
            TraceMode::Loop => Some(TraceCursor {
                lap: c.lap.checked_add(1)?,
                index: 0,
            }),
        }
    }

    /// How many opportunities, from `index` on, share its instant in one
    /// lap (0 past the end). A dense trace lists the same time many times;
    /// this finds the run in O(log run) comparisons (a gallop, then a
    /// binary search), so a link serves it as one credit of
    /// run × [`OPPORTUNITY_BYTES`], whatever its length.
    pub fn run_len(&self, index: usize) -> usize {
        let Some(rest) = self.times.get(index..).filter(|r| !r.is_empty()) else {
            return 0;
        };
        let t = rest[0];
        // rest[hi / 2] == t throughout.
        let mut hi = 1;
        while hi < rest.len() && rest[hi] == t {
            hi = hi.saturating_mul(2);
        }
        let hi = hi.min(rest.len());
        let lo = hi / 2;
        lo + rest[lo..hi].partition_point(|&x| x == t)
    }

    /// The rate the trace offers on average, in bit/s: every opportunity
    /// used in full over one period (`opportunities × 1504 × 8 / period`).
    pub fn mean_rate(&self) -> u64 {
        let period = u128::from(self.period());
        if period == 0 {
            return 0;
        }
        let bits = self.times.len() as u128 * u128::from(OPPORTUNITY_BYTES) * 8;
        u64::try_from(bits * u128::from(NS_PER_SEC) / period).unwrap_or(u64::MAX)
    }
}

/// The trace's words on the pipe's `show` line:
/// `trace NAME [once] (N opportunities over P ms, mean X Mbit/s)`.
/// A summary for people: `trace NAME [once] (N opportunities over T ms,
/// mean R)`.
pub fn summary(t: &Trace) -> String {
    let mode = match t.mode {
        TraceMode::Loop => "",
        TraceMode::Once => " once",
    };
    format!(
        "trace {}{mode} ({} opportunities over {} ms, mean {})",
        t.name,
        t.times.len(),
        t.period() / NS_PER_MS,
        fmt_rate(t.mean_rate())
    )
}

/// A rate with three decimals at most, in Mbit/s from 1 Mbit/s up and in
/// Kbit/s below, computed in integers so `show` never prints float noise.
fn fmt_rate(bps: u64) -> String {
    let (unit, name) = if bps >= 1_000_000 {
        (1_000_000, "Mbit/s")
    } else {
        (1_000, "Kbit/s")
    };
    let whole = bps / unit;
    let milli = bps % unit / (unit / 1_000);
    let frac = format!("{milli:03}");
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{whole} {name}")
    } else {
        format!("{whole}.{frac} {name}")
    }
}

impl Impairment for Trace {
    fn name(&self) -> &'static str {
        "trace"
    }

    fn stage(&self) -> Stage {
        Stage::Link
    }

    /// A trace is the link's rate: nothing else may set or shape it.
    fn check(&self, on: On<'_>) -> Result<(), ParamError> {
        if let On::Link(l) = on {
            let other = [
                (l.bw() > 0, "bw"),
                (l.has_profile(), "profile"),
                (l.burst() > 0, "burst"),
                (l.has_slot(), "slot"),
            ];
            if let Some((_, what)) = other.iter().find(|(set, _)| *set) {
                return Err(format!(
                    "`trace` and `{what}` exclude each other: a traced link sends \
                     only at its trace's opportunities"
                )
                .into());
            }
        }
        if self.times.is_empty() {
            return Err(format!("trace `{}` has no opportunities", self.name).into());
        }
        Ok(())
    }

    /// `trace NAME` (` once` in that mode).
    fn display(&self) -> String {
        match self.mode {
            TraceMode::Loop => format!("trace {}", self.name),
            TraceMode::Once => format!("trace {} once", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NS_PER_MS;

    fn trace(text: &str, mode: TraceMode) -> Trace {
        parse("t", text, mode).unwrap()
    }

    fn cur(lap: u64, index: usize) -> Option<TraceCursor> {
        Some(TraceCursor { lap, index })
    }

    #[test]
    fn parse_errors_name_the_line() {
        assert_eq!(
            parse("t", "1\n\n2\nx3\n", TraceMode::Loop),
            Err(TraceError::BadTime {
                line: 4,
                token: "x3".into()
            })
        );
        assert_eq!(
            parse("t", "5\n3\n", TraceMode::Loop),
            Err(TraceError::Decreasing {
                line: 2,
                ms: 3,
                prev: 5
            })
        );
        for bad in ["-1", "+1", "1.5", "# comment", "1 2"] {
            assert!(
                matches!(
                    parse("t", &format!("0\n{bad}\n9\n"), TraceMode::Loop),
                    Err(TraceError::BadTime { line: 2, .. })
                ),
                "{bad}"
            );
        }
        // A year is the longest trace: its times stay exact in ns.
        let year = format!("1\n{MAX_TRACE_MS}\n");
        assert_eq!(trace(&year, TraceMode::Loop).period(), MAX_TRACE_MS * MS);
        let past = MAX_TRACE_MS + 1;
        assert_eq!(
            parse("t", &format!("1\n{past}\n"), TraceMode::Loop),
            Err(TraceError::TooLong {
                line: 2,
                ms: past,
                max: MAX_TRACE_MS
            })
        );
        assert_eq!(parse("t", "\n \n", TraceMode::Loop), Err(TraceError::Empty));
        assert_eq!(
            parse("t", "0\n0\n", TraceMode::Loop),
            Err(TraceError::ZeroLength)
        );
        let msg = parse("t", "1\nabc", TraceMode::Loop)
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("line 2: `abc`"), "{msg}");
        // CRLF files and a missing final newline are fine.
        let t = trace("1\r\n1\r\n3", TraceMode::Loop);
        assert_eq!(t.times, [MS, MS, 3 * MS]);
        assert_eq!(t.period(), 3 * MS);
    }

    #[test]
    fn first_after_is_strictly_after() {
        let t = trace("1\n2\n2\n5\n", TraceMode::Loop);
        let start = 1_000 * MS;
        // Before the trace started, and at its start.
        assert_eq!(t.first_after(start, 0), cur(0, 0));
        assert_eq!(t.first_after(start, start - 1), cur(0, 0));
        assert_eq!(t.first_after(start, start), cur(0, 0));
        // Exactly at an opportunity: the next one, not the same.
        assert_eq!(t.first_after(start, start + MS), cur(0, 1));
        assert_eq!(t.first_after(start, start + MS - 1), cur(0, 0));
        // Duplicates: both 2 ms opportunities are after 1.5 ms; after 2 ms,
        // neither is.
        assert_eq!(t.first_after(start, start + 3 * MS / 2), cur(0, 1));
        assert_eq!(t.next(TraceCursor { lap: 0, index: 1 }), cur(0, 2));
        assert_eq!(t.first_after(start, start + 2 * MS), cur(0, 3));
        // The period's end: lap 1 starts at 5 ms, with its first
        // opportunity at 5 + 1 ms.
        assert_eq!(t.first_after(start, start + 5 * MS - 1), cur(0, 3));
        assert_eq!(t.first_after(start, start + 5 * MS), cur(1, 0));
        // Far laps are found without walking them.
        let far = start + 1_000_000 * 5 * MS + 2 * MS;
        let c = t.first_after(start, far).unwrap();
        assert_eq!(
            c,
            TraceCursor {
                lap: 1_000_000,
                index: 3
            }
        );
        assert_eq!(t.at(start, c), start + 1_000_000 * 5 * MS + 5 * MS);
        assert!(t.at(start, c) > far);
    }

    #[test]
    fn time_zero_and_period_share_an_instant() {
        // mahimahi's behaviour: with a first line of 0, the last opportunity
        // of a lap and the first of the next are both at k·period.
        let t = trace("0\n4\n", TraceMode::Loop);
        let a = t.first_after(0, 3 * MS).unwrap();
        let b = t.next(a).unwrap();
        assert_eq!(
            (a, b),
            (
                TraceCursor { lap: 0, index: 1 },
                TraceCursor { lap: 1, index: 0 }
            )
        );
        assert_eq!(t.at(0, a), 4 * MS);
        assert_eq!(t.at(0, b), 4 * MS);
        // Strictly after 4 ms skips both.
        assert_eq!(t.first_after(0, 4 * MS), cur(1, 1));
        assert_eq!(t.at(0, TraceCursor { lap: 1, index: 1 }), 8 * MS);
    }

    #[test]
    fn once_ends() {
        let t = trace("1\n3\n", TraceMode::Once);
        assert_eq!(t.first_after(0, 2 * MS), cur(0, 1));
        assert_eq!(t.first_after(0, 3 * MS - 1), cur(0, 1));
        assert_eq!(t.first_after(0, 3 * MS), None);
        assert_eq!(t.first_after(0, 100 * MS), None);
        assert_eq!(t.next(TraceCursor { lap: 0, index: 0 }), cur(0, 1));
        assert_eq!(t.next(TraceCursor { lap: 0, index: 1 }), None);
        // The same trace looping goes on.
        let l = Trace {
            mode: TraceMode::Loop,
            ..t
        };
        assert_eq!(l.first_after(0, 3 * MS), cur(1, 0));
        assert_eq!(l.next(TraceCursor { lap: 0, index: 1 }), cur(1, 0));
    }

    #[test]
    fn walking_with_next_matches_first_after() {
        let t = trace("0\n0\n1\n7\n7\n7\n10\n", TraceMode::Loop);
        let start = 123;
        let mut c = t.first_after(start, 0).unwrap();
        let mut prev = 0;
        for _ in 0..100 {
            let at = t.at(start, c);
            assert!(at >= prev, "times never go back");
            // Whatever the opportunity, asking just before it finds one at
            // that same instant.
            let found = t.first_after(start, at - 1).unwrap();
            assert_eq!(t.at(start, found), at);
            prev = at;
            c = t.next(c).unwrap();
        }
        // 100 opportunities at 7 per 10 ms lap: past lap 13.
        assert_eq!(c.lap, 14);
    }

    #[test]
    fn run_len_counts_an_instants_opportunities() {
        let t = trace("0\n0\n0\n1\n2\n2\n5\n", TraceMode::Loop);
        let runs: Vec<usize> = (0..=t.times.len()).map(|i| t.run_len(i)).collect();
        assert_eq!(runs, [3, 2, 1, 1, 2, 1, 1, 0]);
        // Every length up to past a power of two, at every offset.
        for n in 1..70 {
            let text: String = "3\n".repeat(n) + "4\n";
            let t = trace(&text, TraceMode::Loop);
            for i in 0..n {
                assert_eq!(t.run_len(i), n - i, "run of {n} from {i}");
            }
            assert_eq!(t.run_len(n), 1);
        }
    }

    #[test]
    fn saturation_and_bad_cursors() {
        let t = trace("1\n2\n", TraceMode::Loop);
        let huge = TraceCursor {
            lap: u64::MAX,
            index: 1,
        };
        assert_eq!(t.at(0, huge), Nanos::MAX);
        assert_eq!(t.next(huge), None);
        assert_eq!(t.at(0, TraceCursor { lap: 0, index: 9 }), Nanos::MAX);
        let empty = Trace {
            name: "e".into(),
            times: vec![],
            mode: TraceMode::Loop,
        };
        assert_eq!(empty.first_after(0, 5), None);
        assert_eq!(empty.mean_rate(), 0);
    }

    #[test]
    fn mean_rate_and_display() {
        let text: String = (1..=1000).map(|ms| format!("{ms}\n")).collect();
        let t = trace(&text, TraceMode::Loop);
        assert_eq!(t.period(), 1_000 * MS);
        assert_eq!(t.mean_rate(), 12_032_000);
        assert_eq!(
            summary(&t),
            "trace t (1000 opportunities over 1000 ms, mean 12.032 Mbit/s)"
        );
        // Two opportunities per 10 ms: 2 × 12032 bits / 10 ms.
        let slow = Trace {
            name: "slow".into(),
            ..trace("10\n10\n", TraceMode::Once)
        };
        assert_eq!(slow.mean_rate(), 2_406_400);
        assert_eq!(
            summary(&slow),
            "trace slow once (2 opportunities over 10 ms, mean 2.406 Mbit/s)"
        );
        assert_eq!(fmt_rate(376_000), "376 Kbit/s");
        assert_eq!(fmt_rate(1_500_000), "1.5 Mbit/s");
    }
}
