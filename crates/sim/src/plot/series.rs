//! From an event log to the time series `dummynet plot` draws: pure, no
//! drawing and no files, so every number on a plot is unit-tested here.
//!
//! The log is read one line at a time ([`Reader::line`]); what is kept grows
//! with the number of windows, not of lines: per window a few counters and
//! the delays of the packets that left in it, plus the arrival of each
//! packet still in flight, forgotten when it ends. Lines are read by field
//! name: fields this reader does not use and event kinds it does not know
//! are skipped, so logs that carry more (the live daemon's) read the same.
//!
//! Which packets count:
//! - without a pipe, everything the log shows: arrivals are the ingress,
//!   departures the delivered traffic, a packet's delay is departure −
//!   arrival, and it is inside from its arrival until it ends;
//! - with `--pipe N`, the packets that pipe N let out or dropped. Arrivals
//!   do not say where a packet goes, so that is learnt when it leaves (the
//!   `departure`, `forward` or `drop` names the pipe); it entered the pipe
//!   when its pass through the rules started: its arrival, or for a
//!   bridged frame's second pass, its `forward`. Ingress is counted at
//!   that entry, delivered traffic when it leaves.
//!
//! A copy made by `duplicate` (`"note":"duplicate"`) keeps its original's id:
//! it counts as delivered or dropped, but not in the delays (its delay is its
//! original's) nor in the queue, and it does not end its original.

use std::collections::HashMap;

use dummynet_engine::percentile::nearest_rank;
use dummynet_engine::Nanos;
use serde::Deserialize;

/// More windows than this is a window too small for the log: a plot has a
/// few thousand pixels across.
pub const MAX_WINDOWS: u64 = 1_000_000;

/// Per-packet delays kept for drawing each packet; past this many, the plot
/// shows each window's range instead (the percentiles keep every delay).
pub const MAX_POINTS: usize = 50_000;

/// The log's note on a copy made by `duplicate`.
const DUPLICATE: &str = "duplicate";

/// One line of the log: only the fields read here.
#[derive(Debug, Deserialize)]
struct Line {
    event: String,
    t_ns: Option<Nanos>,
    id: Option<u64>,
    len: Option<u32>,
    pipe: Option<u32>,
    reason: Option<String>,
    note: Option<String>,
}

/// One window's counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// Bits that arrived (at the pipe, with `--pipe`).
    pub ingress_bits: u64,
    /// Bits delivered (let out of the pipe, with `--pipe`).
    pub delivered_bits: u64,
    pub delivered: u64,
    /// Delays of the originals delivered in this window, in ns (sorted once
    /// the log is read).
    pub delays: Vec<Nanos>,
    /// Drops by reason: index into [`Series::reasons`].
    pub drops: Vec<u64>,
    /// ∫ packets inside dt and ∫ bytes inside dt over the window, in ns.
    pub packet_ns: u128,
    pub byte_ns: u128,
}

/// What a log says, window by window.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub window: Nanos,
    /// `t_ns` of the log's first line: time 0 of the plot.
    pub start: Nanos,
    /// The last `t_ns` of the log, from `start`.
    pub span: Nanos,
    /// The last delivery counted, from `start`: the mean rate is over
    /// [0, this], so that a pipe's rate is not diluted by what the log
    /// shows of other pipes after its last packet.
    pub last_delivery: Nanos,
    pub windows: Vec<Window>,
    /// Drop reasons in the order they were first seen.
    pub reasons: Vec<String>,
    /// (departure, delay) of each original delivered, times from `start`;
    /// empty if there were more than [`MAX_POINTS`] (`points_dropped`).
    pub points: Vec<(Nanos, Nanos)>,
    pub points_dropped: bool,
    /// Lines read, and of them events of kinds this reader does not know.
    pub lines: u64,
    pub unknown_events: u64,
}

/// Per-window delay statistics, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowDelay {
    pub min: Nanos,
    pub p95: Nanos,
    pub max: Nanos,
}

impl Series {
    pub fn delivered_bits(&self) -> u64 {
        self.windows.iter().map(|w| w.delivered_bits).sum()
    }

    pub fn delivered(&self) -> u64 {
        self.windows.iter().map(|w| w.delivered).sum()
    }

    /// Mean delivered rate from the log's start to the last delivery,
    /// bit/s (0 if that is no time at all).
    pub fn mean_bps(&self) -> f64 {
        if self.last_delivery == 0 {
            return 0.0;
        }
        self.delivered_bits() as f64 * 1e9 / self.last_delivery as f64
    }

    /// Drops over the whole log by reason, in [`Series::reasons`] order.
    pub fn drops_by_reason(&self) -> Vec<(&str, u64)> {
        self.reasons
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let n = self
                    .windows
                    .iter()
                    .map(|w| w.drops.get(i).copied().unwrap_or(0))
                    .sum();
                (r.as_str(), n)
            })
            .collect()
    }

    /// Every delay, sorted.
    pub fn all_delays(&self) -> Vec<Nanos> {
        let mut all: Vec<Nanos> = self
            .windows
            .iter()
            .flat_map(|w| w.delays.iter().copied())
            .collect();
        all.sort_unstable();
        all
    }

    /// Each window's delay range and 95th percentile (nearest rank), `None`
    /// for a window in which nothing was delivered.
    pub fn window_delays(&self) -> Vec<Option<WindowDelay>> {
        self.windows
            .iter()
            .map(|w| {
                Some(WindowDelay {
                    min: *w.delays.first()?,
                    p95: nearest_rank(&w.delays, 95)?,
                    max: *w.delays.last()?,
                })
            })
            .collect()
    }

    /// Window `k`'s length: `window`, but the last one ends with the log.
    pub fn window_len(&self, k: usize) -> Nanos {
        let from = self.window.saturating_mul(k as u64);
        self.window.min(self.span.saturating_sub(from)).max(1)
    }

    /// Mean packets and bytes inside over window `k`.
    pub fn mean_inside(&self, k: usize) -> (f64, f64) {
        let len = self.window_len(k) as f64;
        self.windows.get(k).map_or((0.0, 0.0), |w| {
            (w.packet_ns as f64 / len, w.byte_ns as f64 / len)
        })
    }
}

/// A packet in flight: when it arrived, when its current pass started, its
/// length.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    arrived: Nanos,
    entered: Nanos,
    len: u32,
}

/// Reads a log line by line into a [`Series`].
pub struct Reader {
    pipe: Option<u32>,
    series: Series,
    in_flight: HashMap<u64, InFlight>,
    started: bool,
}

impl Reader {
    /// `pipe`: keep the packets of that pipe only; `window` > 0 ns.
    pub fn new(pipe: Option<u32>, window: Nanos) -> Reader {
        Reader {
            pipe,
            series: Series {
                window: window.max(1),
                start: 0,
                span: 0,
                last_delivery: 0,
                windows: Vec::new(),
                reasons: Vec::new(),
                points: Vec::new(),
                points_dropped: false,
                lines: 0,
                unknown_events: 0,
            },
            in_flight: HashMap::new(),
            started: false,
        }
    }

    /// One line of the log; `number` (from 1) names it in errors. Blank
    /// lines are skipped.
    pub fn line(&mut self, number: u64, text: &str) -> Result<(), SeriesError> {
        if text.trim().is_empty() {
            return Ok(());
        }
        self.series.lines += 1;
        let line: Line = serde_json::from_str(text).map_err(|source| SeriesError::NotEvent {
            line: number,
            source,
        })?;
        let known = matches!(
            line.event.as_str(),
            "arrival" | "forward" | "departure" | "drop"
        );
        if !known {
            self.series.unknown_events += 1;
            return Ok(());
        }
        let need = |v: Option<u64>, field: &'static str| {
            v.ok_or_else(|| SeriesError::Missing {
                line: number,
                event: line.event.clone(),
                field,
            })
        };
        let t = need(line.t_ns, "t_ns")?;
        let id = need(line.id, "id")?;
        if !self.started {
            self.started = true;
            self.series.start = t;
        }
        // A line earlier than the first (a live log's threads may interleave
        // a little) counts in the first window.
        let t = t.saturating_sub(self.series.start);
        if t / self.series.window >= MAX_WINDOWS {
            return Err(SeriesError::TooManyWindows {
                line: number,
                secs: t / 1_000_000_000,
                window_ms: self.series.window as f64 / 1e6,
            });
        }
        self.series.span = self.series.span.max(t);
        let copy = line.note.as_deref() == Some(DUPLICATE);
        let ours = self.pipe.is_none() || line.pipe == self.pipe;
        match line.event.as_str() {
            "arrival" => {
                let len = line.len.ok_or(SeriesError::NoLen { line: number })?;
                if !copy {
                    self.in_flight.insert(
                        id,
                        InFlight {
                            arrived: t,
                            entered: t,
                            len,
                        },
                    );
                }
                if self.pipe.is_none() {
                    self.window(t).ingress_bits += u64::from(len) * 8;
                }
            }
            "forward" => {
                // The end of a bridged frame's first pass: with a pipe, the
                // packet leaves it if that pass was through it; either way
                // its next pass starts now.
                if self.pipe.is_some() && !copy {
                    if ours {
                        self.left(id, t, line.len, true);
                    }
                    if let Some(p) = self.in_flight.get_mut(&id) {
                        p.entered = t;
                    }
                }
            }
            "departure" => {
                if ours {
                    if copy {
                        let len = line.len.or_else(|| self.in_flight.get(&id).map(|p| p.len));
                        self.series.last_delivery = self.series.last_delivery.max(t);
                        let w = self.window(t);
                        w.delivered += 1;
                        w.delivered_bits += u64::from(len.unwrap_or(0)) * 8;
                    } else {
                        self.left(id, t, line.len, true);
                    }
                }
                if !copy {
                    self.in_flight.remove(&id);
                }
            }
            _ => {
                // "drop"
                if ours {
                    let reason = line.reason.as_deref().unwrap_or("unknown");
                    let r = match self.series.reasons.iter().position(|x| x == reason) {
                        Some(r) => r,
                        None => {
                            self.series.reasons.push(reason.to_string());
                            self.series.reasons.len() - 1
                        }
                    };
                    let w = self.window(t);
                    if w.drops.len() <= r {
                        w.drops.resize(r + 1, 0);
                    }
                    w.drops[r] += 1;
                    if !copy {
                        self.left(id, t, line.len, false);
                    }
                }
                if !copy {
                    self.in_flight.remove(&id);
                }
            }
        }
        Ok(())
    }

    /// Packet `id` leaves the part of the path being plotted at `t`,
    /// delivered or not: its time inside, its delay and (with a pipe) its
    /// ingress.
    fn left(&mut self, id: u64, t: Nanos, len: Option<u32>, delivered: bool) {
        let p = self.in_flight.get(&id).copied();
        let len = len.or(p.map(|p| p.len)).unwrap_or(0);
        let bits = u64::from(len) * 8;
        if let Some(p) = p {
            let entered = if self.pipe.is_some() {
                p.entered
            } else {
                p.arrived
            };
            if self.pipe.is_some() {
                self.window(entered).ingress_bits += bits;
            }
            self.inside(entered, t, len);
            if delivered {
                let delay = t.saturating_sub(entered);
                self.window(t).delays.push(delay);
                let s = &mut self.series;
                if !s.points_dropped {
                    if s.points.len() < MAX_POINTS {
                        s.points.push((t, delay));
                    } else {
                        s.points = Vec::new();
                        s.points_dropped = true;
                    }
                }
            }
        }
        if delivered {
            self.series.last_delivery = self.series.last_delivery.max(t);
            let w = self.window(t);
            w.delivered += 1;
            w.delivered_bits += bits;
        }
    }

    /// A packet of `len` bytes was inside from `from` to `to`: its share of
    /// each window it overlapped.
    fn inside(&mut self, from: Nanos, to: Nanos, len: u32) {
        let width = self.series.window;
        let mut a = from;
        while a < to {
            let k = a / width;
            let b = to.min((k + 1).saturating_mul(width));
            let w = self.window(a);
            let dt = u128::from(b - a);
            w.packet_ns += dt;
            w.byte_ns += dt * u128::from(len);
            a = b;
        }
    }

    /// The window holding time `t` (from the start), made if need be.
    fn window(&mut self, t: Nanos) -> &mut Window {
        let k = (t / self.series.window) as usize;
        let windows = &mut self.series.windows;
        if windows.len() <= k {
            windows.resize_with(k + 1, Window::default);
        }
        &mut windows[k]
    }

    /// The series, once every line is read. Packets still in flight count
    /// as inside until the log's end (without a pipe: with one, where they
    /// are is not known).
    pub fn finish(mut self) -> Series {
        if self.pipe.is_none() {
            let end = self.series.span;
            let left: Vec<InFlight> = self.in_flight.values().copied().collect();
            for p in left {
                self.inside(p.arrived, end, p.len);
            }
        }
        let last = (self.series.span / self.series.window) as usize;
        if self.started && self.series.windows.len() <= last {
            self.series.windows.resize_with(last + 1, Window::default);
        }
        for w in &mut self.series.windows {
            w.delays.sort_unstable();
        }
        self.series
    }
}

/// Why a line of the log cannot be read; `line` counts from 1.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    #[error("line {line}: not an event object: {source}")]
    NotEvent {
        line: u64,
        #[source]
        source: serde_json::Error,
    },
    #[error("line {line}: a `{event}` event needs `{field}` (a whole number)")]
    Missing {
        line: u64,
        event: String,
        field: &'static str,
    },
    #[error("line {line}: an `arrival` event needs `len` (bytes)")]
    NoLen { line: u64 },
    #[error(
        "line {line}: t_ns is {secs} s after the first line's; windows of {window_ms} ms would \
         make more than {MAX_WINDOWS} of them: give a wider --window"
    )]
    TooManyWindows {
        line: u64,
        secs: u64,
        window_ms: f64,
    },
    #[error("line {line}: {source}")]
    Read {
        line: u64,
        #[source]
        source: std::io::Error,
    },
}

/// Reads a whole log from `lines` (each with its number from 1).
pub fn read<R: std::io::BufRead>(
    mut input: R,
    pipe: Option<u32>,
    window: Nanos,
) -> Result<Series, SeriesError> {
    let mut reader = Reader::new(pipe, window);
    let mut buf = String::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        let n = input
            .read_line(&mut buf)
            .map_err(|source| SeriesError::Read {
                line: number + 1,
                source,
            })?;
        if n == 0 {
            break;
        }
        number += 1;
        reader.line(number, &buf)?;
    }
    Ok(reader.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn series(log: &str, pipe: Option<u32>, window: Nanos) -> Series {
        read(log.as_bytes(), pipe, window).unwrap()
    }

    /// A 1 Mbit/s pipe fed 1250-byte packets (10 ms each on the wire) every
    /// 5 ms: twice its rate, for 100 ms.
    fn saturated() -> String {
        let mut log = String::new();
        let mut busy_until: Nanos = 0;
        for id in 0..20u64 {
            let t = id * 5 * MS;
            log += &format!(
                r#"{{"event":"arrival","t_ns":{t},"id":{id},"len":1250,"iface":"sim0","dir":"in"}}"#
            );
            log.push('\n');
            // A queue of 5 beyond the one on the wire: the rest is dropped.
            let queued = busy_until.saturating_sub(t) / (10 * MS);
            if queued > 5 {
                log += &format!(
                    r#"{{"event":"drop","t_ns":{t},"id":{id},"reason":"queue_full","rule":100,"pipe":1,"dir":"in"}}"#
                );
            } else {
                busy_until = busy_until.max(t) + 10 * MS;
                log += &format!(
                    r#"{{"event":"departure","t_ns":{busy_until},"id":{id},"rule":100,"pipe":1,"future":[1,2]}}"#
                );
            }
            log.push('\n');
        }
        log
    }

    #[test]
    fn saturated_pipe_delivers_its_rate() {
        let s = series(&saturated(), None, 100 * MS);
        // Departures at 10, 20, ... ms: 9 in [0, 100 ms), the rest after.
        assert_eq!(s.windows[0].delivered, 9);
        assert_eq!(s.windows[0].delivered_bits, 9 * 10_000);
        // Ingress: 20 packets in the first 100 ms, 2 Mbit/s.
        assert_eq!(s.windows[0].ingress_bits, 20 * 10_000);
        assert_eq!(s.windows.len(), 2);
        // Every packet is delivered or dropped, the queue full from the 12th.
        let dropped: u64 = s.drops_by_reason().iter().map(|(_, n)| n).sum();
        assert_eq!(s.delivered() + dropped, 20);
        assert_eq!(
            s.drops_by_reason(),
            vec![("queue_full", 20 - s.delivered())]
        );
        // One packet every 10 ms at 1250 bytes: exactly 1 Mbit/s while busy.
        let last = s.span;
        assert_eq!(last, s.delivered() * 10 * MS);
        assert!((s.mean_bps() - 1e6).abs() < 1.0, "{}", s.mean_bps());
    }

    #[test]
    fn delays_and_percentiles() {
        let s = series(&saturated(), Some(1), 100 * MS);
        // Packet 0 waits 10 ms (its own transmission), packet 1 arrives at 5
        // and leaves at 20: 15 ms, then 20, 25...: until the queue first
        // overflows (packet 12), the k-th waits 10 + 5k ms.
        let delays = s.all_delays();
        let expect: Vec<Nanos> = (0..12).map(|k| (10 + 5 * k) * MS).collect();
        assert_eq!(delays[..12], expect);
        assert_eq!(delays.len() as u64, s.delivered());
        assert_eq!(s.points[0], (10 * MS, 10 * MS));
        let w = s.window_delays();
        // Window 0: departures at 10..=90 ms, delays 10..=50 ms.
        assert_eq!(
            w[0],
            Some(WindowDelay {
                min: 10 * MS,
                p95: 50 * MS,
                max: 50 * MS
            })
        );
    }

    #[test]
    fn queue_levels() {
        // Two packets: 100 bytes inside from 0 to 15 ms, 300 bytes from 5 to
        // 10 ms; windows of 10 ms.
        let log = r#"{"event":"arrival","t_ns":0,"id":0,"len":100}
{"event":"arrival","t_ns":5000000,"id":1,"len":300}
{"event":"departure","t_ns":10000000,"id":1,"pipe":2}
{"event":"departure","t_ns":15000000,"id":0,"pipe":2}
"#;
        let s = series(log, None, 10 * MS);
        assert_eq!(s.windows.len(), 2);
        // Window 0: packet 0 for 10 ms, packet 1 for 5: 1.5 packets on
        // average, (100·10 + 300·5)/10 = 250 bytes.
        assert_eq!(s.mean_inside(0), (1.5, 250.0));
        // Window 1 is the last 5 ms of the log: packet 0 throughout.
        assert_eq!(s.window_len(1), 5 * MS);
        assert_eq!(s.mean_inside(1), (1.0, 100.0));
        // The same with --pipe 2: each entered at its arrival.
        assert_eq!(series(log, Some(2), 10 * MS).mean_inside(0), (1.5, 250.0));
        // And nothing for another pipe.
        let other = series(log, Some(3), 10 * MS);
        assert_eq!(other.mean_inside(0), (0.0, 0.0));
        assert_eq!(other.delivered(), 0);
        assert_eq!(other.windows[0].ingress_bits, 0);
    }

    #[test]
    fn packets_still_inside_at_the_end_count_until_it() {
        let log = r#"{"event":"arrival","t_ns":0,"id":0,"len":100}
{"event":"arrival","t_ns":20000000,"id":1,"len":100}
"#;
        let s = series(log, None, 10 * MS);
        assert_eq!(s.mean_inside(0), (1.0, 100.0));
        assert_eq!(s.mean_inside(1), (1.0, 100.0));
        // With a pipe, where they are is unknown.
        assert_eq!(series(log, Some(1), 10 * MS).mean_inside(0), (0.0, 0.0));
    }

    #[test]
    fn drops_by_reason_and_pipe() {
        let log = r#"{"event":"arrival","t_ns":0,"id":0,"len":100}
{"event":"drop","t_ns":0,"id":0,"reason":"queue_full","rule":1,"pipe":1}
{"event":"arrival","t_ns":1000000,"id":1,"len":100}
{"event":"drop","t_ns":1000000,"id":1,"reason":"deny","rule":5}
{"event":"arrival","t_ns":12000000,"id":2,"len":100}
{"event":"drop","t_ns":13000000,"id":2,"reason":"plr","rule":1,"pipe":1}
{"event":"arrival","t_ns":14000000,"id":3,"len":100}
{"event":"drop","t_ns":14000000,"id":3,"reason":"queue_full","rule":1,"pipe":1}
"#;
        let all = series(log, None, 10 * MS);
        assert_eq!(
            all.drops_by_reason(),
            vec![("queue_full", 2), ("deny", 1), ("plr", 1)]
        );
        assert_eq!(all.windows[0].drops, vec![1, 1]);
        assert_eq!(all.windows[1].drops, vec![1, 0, 1]);
        let pipe = series(log, Some(1), 10 * MS);
        assert_eq!(pipe.drops_by_reason(), vec![("queue_full", 2), ("plr", 1)]);
        // Dropped packets arrived at the pipe all the same.
        assert_eq!(pipe.windows[0].ingress_bits, 800);
        assert_eq!(pipe.windows[1].ingress_bits, 1600);
        assert_eq!(pipe.delivered(), 0);
        // Packet 2 was inside the pipe for 1 ms before plr took it.
        assert_eq!(pipe.windows[1].packet_ns, u128::from(MS));
    }

    #[test]
    fn bridged_second_pass_enters_at_the_forward() {
        // In through pipe 1 (10 ms), then out through pipe 2 (5 ms).
        let log = r#"{"event":"arrival","t_ns":0,"id":0,"len":1000,"bridge_to":"eth1"}
{"event":"forward","t_ns":10000000,"id":0,"rule":1,"pipe":1,"iface":"eth1"}
{"event":"departure","t_ns":15000000,"id":0,"rule":2,"pipe":2,"iface":"eth1"}
"#;
        let p1 = series(log, Some(1), 100 * MS);
        assert_eq!(p1.all_delays(), vec![10 * MS]);
        assert_eq!(p1.delivered_bits(), 8000);
        let p2 = series(log, Some(2), 100 * MS);
        assert_eq!(p2.all_delays(), vec![5 * MS]);
        let all = series(log, None, 100 * MS);
        assert_eq!(all.all_delays(), vec![15 * MS]);
        assert_eq!(all.delivered(), 1);
    }

    #[test]
    fn duplicates_count_as_delivered_but_not_as_delays() {
        let log = r#"{"event":"arrival","t_ns":0,"id":0,"len":100}
{"event":"departure","t_ns":1000000,"id":0,"pipe":1,"note":"duplicate"}
{"event":"departure","t_ns":2000000,"id":0,"pipe":1}
"#;
        let s = series(log, Some(1), 10 * MS);
        assert_eq!(s.delivered(), 2);
        assert_eq!(s.delivered_bits(), 1600);
        assert_eq!(s.all_delays(), vec![2 * MS]);
    }

    #[test]
    fn unknown_fields_and_events_are_skipped_bad_lines_named() {
        let log = "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":100,\"new\":{\"x\":1}}\n\n\
                   {\"event\":\"mark\",\"t_ns\":5,\"id\":0}\n\
                   {\"event\":\"departure\",\"t_ns\":7,\"id\":0}\n";
        let s = series(log, None, 10 * MS);
        assert_eq!((s.lines, s.unknown_events, s.delivered()), (3, 1, 1));

        for (bad, says) in [
            ("{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":1}\nnot json\n", "line 2: not an event object"),
            ("{\"t_ns\":0}\n", "line 1: not an event object"),
            ("{\"event\":\"drop\",\"id\":0}\n", "line 1: a `drop` event needs `t_ns`"),
            ("{\"event\":\"arrival\",\"t_ns\":0,\"id\":0}\n", "line 1: an `arrival` event needs `len`"),
            ("{\"event\":\"departure\",\"t_ns\":-1,\"id\":0}\n", "line 1: not an event object"),
            (
                "{\"event\":\"departure\",\"t_ns\":0,\"id\":0}\n{\"event\":\"departure\",\"t_ns\":2000000000000,\"id\":1}\n",
                "line 2: t_ns is 2000 s after",
            ),
        ] {
            match read(bad.as_bytes(), None, MS) {
                Ok(s) => panic!("{bad:?} was read as {s:?}"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains(says), "{bad:?}: {e}")
                }
            }
        }
    }

    #[test]
    fn points_give_way_to_ranges_on_big_logs() {
        let mut log = String::new();
        for id in 0..=MAX_POINTS as u64 {
            log += &format!("{{\"event\":\"arrival\",\"t_ns\":{id},\"id\":{id},\"len\":1}}\n");
            log += &format!(
                "{{\"event\":\"departure\",\"t_ns\":{},\"id\":{id}}}\n",
                id + 3
            );
        }
        let s = series(&log, None, 1000);
        assert!(s.points_dropped && s.points.is_empty());
        assert_eq!(s.all_delays().len(), MAX_POINTS + 1);
        assert!(s.all_delays().iter().all(|d| *d == 3));
    }
}
