//! The file's `assert` list: comparisons of a run's summary numbers
//! (`flows.all.srtt_p50 < 31ms`, `link.drops.aqm == 0`, `jain.all_on >
//! 0.98`), read with the file and held against each run's summary, so
//! that `dummynet experiment --check` can gate a CI pipeline.

use std::fmt;

use serde::Serialize;

use super::{PathSummary, RunSummary};
use dummynet_sim::gen::{parse_duration, parse_rate};

/// One assertion, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// As written (after a sweep's values are put in).
    pub text: String,
    quantity: Quantity,
    op: Op,
    /// In the quantity's unit: ms, bit/s, a count or a ratio.
    bound: f64,
    unit: Unit,
}

/// What a check found on one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    #[serde(rename = "assert")]
    pub text: String,
    pub ok: bool,
    /// Each value the check compared (`flows.all` has one per flow), named,
    /// in the quantity's unit; `None`: the run has no such value (a flow
    /// without an RTT sample), which fails the check.
    pub values: Vec<(String, Option<f64>)>,
    #[serde(skip)]
    unit: Unit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    const ALL: [(&'static str, Op); 6] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];

    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// How a quantity's bound is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// A time with its unit (`31ms`, `1.5s`), compared in ms.
    Time,
    /// A rate with its unit (`9Mbit/s`), compared in bit/s.
    Rate,
    /// A plain number.
    Count,
    /// A plain number or a percentage (`0.9`, `90%`).
    Ratio,
}

/// Which of several: every one, or the one at an index (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    All,
    At(usize),
}

/// A number of the summary, by its name in an assertion.
#[derive(Debug, Clone, PartialEq)]
enum Quantity {
    Flow(Which, &'static str),
    Ping(Which, &'static str),
    Udp(Which, &'static str),
    Jain,
    /// The link's counters: drops (of one reason, or all), CE marks.
    Drops(Option<String>),
    EcnMarked,
    EventsLost,
    /// A path (pipe) by number: one of its numbers, or its drops.
    Path(u32, &'static str),
    PathDrops(u32, Option<String>),
}

const FLOW: [(&str, Unit); 11] = [
    ("goodput", Unit::Rate),
    ("goodput_mean", Unit::Rate),
    ("goodput_p50", Unit::Rate),
    ("srtt_p50", Unit::Time),
    ("srtt_p90", Unit::Time),
    ("srtt_p99", Unit::Time),
    ("cwnd_min", Unit::Count),
    ("cwnd_max", Unit::Count),
    ("retransmits", Unit::Count),
    ("ce_marks", Unit::Count),
    ("bytes", Unit::Count),
];
const PING: [(&str, Unit); 6] = [
    ("rtt_p50", Unit::Time),
    ("rtt_p90", Unit::Time),
    ("rtt_p99", Unit::Time),
    ("sent", Unit::Count),
    ("lost", Unit::Count),
    ("loss", Unit::Ratio),
];
const UDP: [(&str, Unit); 3] = [
    ("sent_bytes", Unit::Count),
    ("received_bytes", Unit::Count),
    ("delivered", Unit::Ratio),
];
const PATH: [(&str, Unit); 5] = [
    ("utilisation", Unit::Ratio),
    ("sojourn_p50", Unit::Time),
    ("sojourn_p99", Unit::Time),
    ("delivered", Unit::Count),
    ("marks", Unit::Count),
];

/// The names an assertion may compare, for the error that lists them.
const NAMES: &str = "flows.all|N.{goodput, goodput_mean, goodput_p50, srtt_p50, srtt_p90, \
    srtt_p99, cwnd_min, cwnd_max, retransmits, ce_marks, bytes}, pings.all|N.{rtt_p50, rtt_p90, \
    rtt_p99, sent, lost, loss}, udp.all|N.{sent_bytes, received_bytes, delivered}, jain.all_on, \
    link.drops[.REASON], link.ecn_marked, link.events_lost, link.paths.PIPE.{utilisation, \
    sojourn_p50, sojourn_p99, delivered, marks, drops[.REASON]}";

/// Why an assertion cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError(pub String);

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(message: String) -> Result<T, CheckError> {
    Err(CheckError(message))
}

impl Check {
    /// Reads `NAME OP VALUE`.
    pub fn parse(text: &str) -> Result<Check, CheckError> {
        let text = text.trim();
        let Some((at, sym, op)) = Op::ALL
            .iter()
            .filter_map(|(sym, op)| text.find(sym).map(|at| (at, *sym, *op)))
            .min_by_key(|(at, sym, _)| (*at, usize::MAX - sym.len()))
        else {
            return err(format!(
                "`{text}`: an assertion is NAME OP VALUE, OP one of < <= > >= == !="
            ));
        };
        let (name, value) = (text[..at].trim(), text[at + sym.len()..].trim());
        let (quantity, unit) = quantity(name)?;
        let bound = bound(value, unit).map_err(|m| CheckError(format!("`{text}`: {m}")))?;
        Ok(Check {
            text: text.to_string(),
            quantity,
            op,
            bound,
            unit,
        })
    }

    /// Holds the check against a run's summary.
    pub fn eval(&self, s: &RunSummary) -> Outcome {
        let values = values(&self.quantity, s);
        let ok = !values.is_empty()
            && values
                .iter()
                .all(|(_, v)| v.is_some_and(|v| self.op.holds(v, self.bound)));
        Outcome {
            text: self.text.clone(),
            ok,
            values,
            unit: self.unit,
        }
    }
}

impl Outcome {
    /// `ok   flows.all.srtt_p50 < 31ms: flow 0 26.1`, or `FAIL ...`.
    pub fn line(&self) -> String {
        let values: Vec<String> = if self.values.is_empty() {
            vec!["nothing to compare (no such flow, ping, UDP flow or path)".into()]
        } else {
            self.values
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => format!("{k} {}", self.unit.show(*v)),
                    None => format!("{k} none"),
                })
                .collect()
        };
        let tag = if self.ok { "ok  " } else { "FAIL" };
        format!("{tag} {}: {}", self.text, values.join(", "))
    }
}

impl Unit {
    /// A value as its bound is written: `26.02ms`, `9.035Mbit/s`, `0.9648`.
    fn show(self, v: f64) -> String {
        match self {
            Unit::Time => format!("{}ms", short(v)),
            Unit::Rate => {
                let (scale, name) = [(1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "Kbit/s")]
                    .into_iter()
                    .find(|(s, _)| v.abs() >= *s)
                    .unwrap_or((1.0, "bit/s"));
                format!("{}{name}", short(v / scale))
            }
            Unit::Count | Unit::Ratio => short(v),
        }
    }
}

/// A number as people write it: at most 4 decimals, no trailing zeros.
fn short(v: f64) -> String {
    // -0 (a float sum of nothing, say) is written 0.
    let v = v + 0.0;
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn which(w: &str, name: &str) -> Result<Which, CheckError> {
    if w == "all" {
        return Ok(Which::All);
    }
    w.parse().map(Which::At).or_else(|_| {
        err(format!(
            "`{name}`: `{w}` is `all` or an index from 0 (as in summary.json)"
        ))
    })
}

fn metric(
    table: &[(&'static str, Unit)],
    m: &str,
    name: &str,
) -> Result<(&'static str, Unit), CheckError> {
    table.iter().find(|x| x.0 == m).copied().map_or_else(
        || {
            let known: Vec<&str> = table.iter().map(|x| x.0).collect();
            err(format!(
                "`{name}`: no number `{m}` here; there are {}",
                known.join(", ")
            ))
        },
        Ok,
    )
}

fn quantity(name: &str) -> Result<(Quantity, Unit), CheckError> {
    let parts: Vec<&str> = name.split('.').collect();
    let q = match parts.as_slice() {
        ["flows", w, m] => {
            let (m, unit) = metric(&FLOW, m, name)?;
            (Quantity::Flow(which(w, name)?, m), unit)
        }
        ["pings", w, m] => {
            let (m, unit) = metric(&PING, m, name)?;
            (Quantity::Ping(which(w, name)?, m), unit)
        }
        ["udp", w, m] => {
            let (m, unit) = metric(&UDP, m, name)?;
            (Quantity::Udp(which(w, name)?, m), unit)
        }
        ["jain", "all_on"] => (Quantity::Jain, Unit::Ratio),
        ["link", "drops"] => (Quantity::Drops(None), Unit::Count),
        ["link", "drops", reason] => (Quantity::Drops(Some(reason.to_string())), Unit::Count),
        ["link", "ecn_marked"] => (Quantity::EcnMarked, Unit::Count),
        ["link", "events_lost"] => (Quantity::EventsLost, Unit::Count),
        ["link", "paths", n, rest @ ..] => {
            let n: u32 = n.parse().or_else(|_| {
                err(format!(
                    "`{name}`: `{n}` is a path's pipe number (the shell's 1 up, 2 down)"
                ))
            })?;
            match rest {
                ["drops"] => (Quantity::PathDrops(n, None), Unit::Count),
                ["drops", reason] => (
                    Quantity::PathDrops(n, Some(reason.to_string())),
                    Unit::Count,
                ),
                [m] => {
                    let (m, unit) = metric(&PATH, m, name)?;
                    (Quantity::Path(n, m), unit)
                }
                _ => return err(format!("`{name}`: no such number; the names are {NAMES}")),
            }
        }
        _ => return err(format!("`{name}`: no such number; the names are {NAMES}")),
    };
    Ok(q)
}

fn bound(value: &str, unit: Unit) -> Result<f64, String> {
    let plain = |v: &str| {
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("`{v}` is not a number"))
    };
    let starts_with_digit = |v: &str| v.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    match unit {
        Unit::Count => plain(value),
        Unit::Ratio => match value.strip_suffix('%') {
            Some(p) => plain(p.trim()).map(|p| p / 100.0),
            None => plain(value),
        },
        Unit::Time if value.parse::<f64>().is_ok() => {
            Err(format!("a time needs its unit: `{value}ms` or `{value}s`"))
        }
        Unit::Time if starts_with_digit(value) => parse_duration(value)
            .map_err(|e| e.to_string())
            .map(|ns| ns as f64 / 1e6),
        Unit::Rate if value.parse::<f64>().is_ok() => Err(format!(
            "a rate needs its unit: `{value}Mbit/s`, `{value}Kbit/s` or `{value}bit/s`"
        )),
        Unit::Rate if starts_with_digit(value) => parse_rate(value)
            .map_err(|e| e.to_string())
            .map(|b| b as f64),
        Unit::Time => Err(format!("`{value}`: a time such as 31ms or 1.5s")),
        Unit::Rate => Err(format!("`{value}`: a rate such as 9Mbit/s")),
    }
}

fn pick<'a, T>(items: &'a [T], w: Which, noun: &str) -> Vec<(String, Option<&'a T>)> {
    match w {
        Which::All => items
            .iter()
            .enumerate()
            .map(|(i, x)| (format!("{noun} {i}"), Some(x)))
            .collect(),
        Which::At(i) => vec![(format!("{noun} {i}"), items.get(i))],
    }
}

fn drops(list: &[(String, u64)], reason: Option<&str>) -> f64 {
    list.iter()
        .filter(|d| reason.is_none_or(|r| d.0 == r))
        .map(|d| d.1)
        .sum::<u64>() as f64
}

fn values(q: &Quantity, s: &RunSummary) -> Vec<(String, Option<f64>)> {
    let one = |k: &str, v: Option<f64>| vec![(k.to_string(), v)];
    let path = |n: u32| s.link.paths.iter().find(|p| p.number == n);
    match q {
        Quantity::Flow(w, m) => pick(&s.flows, *w, "flow")
            .into_iter()
            .map(|(k, f)| {
                let v = f.and_then(|f| match *m {
                    "goodput" | "goodput_mean" => Some(f.goodput_mean_bps),
                    "goodput_p50" => Some(f.goodput_p50_bps),
                    "srtt_p50" => f.srtt_p50_ms,
                    "srtt_p90" => f.srtt_p90_ms,
                    "srtt_p99" => f.srtt_p99_ms,
                    "cwnd_min" => f.cwnd_min.map(f64::from),
                    "cwnd_max" => f.cwnd_max.map(f64::from),
                    "retransmits" => Some(f64::from(f.retransmits)),
                    "ce_marks" => Some(f64::from(f.ce_marks)),
                    "bytes" => Some(f.bytes as f64),
                    _ => None,
                });
                (k, v)
            })
            .collect(),
        Quantity::Ping(w, m) => pick(&s.pings, *w, "ping")
            .into_iter()
            .map(|(k, p)| {
                let v = p.and_then(|p| match *m {
                    "rtt_p50" => p.rtt_p50_ms,
                    "rtt_p90" => p.rtt_p90_ms,
                    "rtt_p99" => p.rtt_p99_ms,
                    "sent" => Some(p.sent as f64),
                    "lost" => Some(p.lost as f64),
                    "loss" => (p.sent > 0).then(|| p.lost as f64 / p.sent as f64),
                    _ => None,
                });
                (k, v)
            })
            .collect(),
        Quantity::Udp(w, m) => pick(&s.udp, *w, "udp")
            .into_iter()
            .map(|(k, u)| {
                let v = u.and_then(|u| match *m {
                    "sent_bytes" => Some(u.sent_bytes as f64),
                    "received_bytes" => Some(u.received_bytes as f64),
                    "delivered" => {
                        (u.sent_bytes > 0).then(|| u.received_bytes as f64 / u.sent_bytes as f64)
                    }
                    _ => None,
                });
                (k, v)
            })
            .collect(),
        Quantity::Jain => one("jain", s.jain_all_on),
        Quantity::Drops(r) => one("link", Some(drops(&s.link.drops, r.as_deref()))),
        Quantity::EcnMarked => one("link", Some(s.link.ecn_marked as f64)),
        Quantity::EventsLost => one("link", Some(s.link.events_lost as f64)),
        // A pipe that carried nothing is no path of the summary: 0 of
        // everything counted, no utilisation or sojourn.
        Quantity::Path(n, m) => {
            let p: Option<&PathSummary> = path(*n);
            let v = match *m {
                "utilisation" => p.and_then(|p| p.utilisation),
                "sojourn_p50" => p.and_then(|p| p.sojourn_p50_ms),
                "sojourn_p99" => p.and_then(|p| p.sojourn_p99_ms),
                "delivered" => Some(p.map_or(0.0, |p| p.delivered_packets as f64)),
                "marks" => Some(p.map_or(0.0, |p| p.marks as f64)),
                _ => None,
            };
            one(&format!("path {n}"), v)
        }
        Quantity::PathDrops(n, r) => one(
            &format!("path {n}"),
            Some(path(*n).map_or(0.0, |p| drops(&p.drops, r.as_deref()))),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FlowSummary, LinkSummary, PingSummary};
    use super::*;

    fn flow(goodput: f64, srtt: Option<f64>) -> FlowSummary {
        FlowSummary {
            direction: super::super::Direction::Up,
            cc: "reno".into(),
            ecn: false,
            start_s: 0.0,
            end_s: 10.0,
            bytes: 1000,
            goodput_mean_bps: goodput,
            goodput_p50_bps: goodput,
            srtt_p50_ms: srtt,
            srtt_p90_ms: srtt,
            srtt_p99_ms: srtt,
            cwnd_min: Some(10),
            cwnd_max: Some(40),
            retransmits: 3,
            ce_marks: 0,
        }
    }

    fn summary() -> RunSummary {
        RunSummary {
            label: "t".into(),
            vars: vec![],
            duration_s: 10.0,
            interval_s: 0.1,
            seed: 1,
            time0_wall_ns: 0,
            time0_events_t_ns: None,
            flows: vec![flow(9e6, Some(26.0)), flow(8e6, Some(32.0))],
            jain_all_on: Some(0.99),
            all_on_s: None,
            pings: vec![PingSummary {
                sent: 100,
                lost: 2,
                rtt_p50_ms: Some(21.0),
                rtt_p90_ms: None,
                rtt_p99_ms: None,
            }],
            udp: vec![],
            link: LinkSummary {
                paths: vec![PathSummary {
                    number: 1,
                    utilisation: Some(0.93),
                    drops: vec![("aqm".into(), 150)],
                    ..PathSummary::default()
                }],
                ecn_marked: 0,
                drops: vec![("aqm".into(), 150), ("queue_full".into(), 2)],
                marks: vec![],
                events_lost: 0,
            },
            warnings: vec![],
            checks: vec![],
        }
    }

    fn ok(text: &str) -> bool {
        Check::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .eval(&summary())
            .ok
    }

    #[test]
    fn all_holds_only_when_every_flow_does() {
        assert!(ok("flows.all.srtt_p50 < 33ms"));
        assert!(!ok("flows.all.srtt_p50 < 31ms"), "flow 1 is at 32 ms");
        assert!(ok("flows.0.srtt_p50 < 31ms"));
        assert!(ok("flows.1.goodput >= 8Mbit/s"));
        assert!(!ok("flows.1.goodput > 8Mbit/s"));
        assert!(ok("flows.all.retransmits <= 3"));
        let line = |t: &str| Check::parse(t).map(|c| c.eval(&summary()).line()).ok();
        assert_eq!(
            line("flows.1.goodput > 8Mbit/s").as_deref(),
            Some("FAIL flows.1.goodput > 8Mbit/s: flow 1 8Mbit/s")
        );
        assert_eq!(
            line("link.paths.1.utilisation > 90%").as_deref(),
            Some("ok   link.paths.1.utilisation > 90%: path 1 0.93")
        );
        let o = Check::parse("flows.all.srtt_p50 < 31ms")
            .map(|c| c.eval(&summary()))
            .ok();
        assert_eq!(
            o.map(|o| o.line()).as_deref(),
            Some("FAIL flows.all.srtt_p50 < 31ms: flow 0 26ms, flow 1 32ms")
        );
    }

    #[test]
    fn the_link_the_paths_pings_and_jain() {
        assert!(ok("link.drops.aqm == 150"));
        assert!(ok("link.drops == 152"));
        assert!(ok("link.drops.plr == 0"), "an absent reason is 0");
        assert!(ok("link.paths.1.utilisation > 90%"));
        assert!(!ok("link.paths.1.utilisation > 0.95"));
        assert!(ok("link.paths.1.drops.aqm > 0"));
        assert!(ok("link.paths.2.drops == 0"), "a path that carried nothing");
        assert!(!ok("link.paths.2.utilisation > 0"), "has no utilisation");
        assert!(ok("jain.all_on > 0.98"));
        assert!(ok("pings.0.loss < 5%"));
        assert!(ok("pings.0.rtt_p50 <= 21ms"));
        assert!(!ok("pings.0.rtt_p90 < 1s"), "no value fails");
        assert!(!ok("pings.3.sent > 0"), "no such ping fails");
        assert!(!ok("udp.all.sent_bytes > 0"), "nothing to compare fails");
    }

    #[test]
    fn nothing_counted_reads_0_not_minus_0() {
        let line = |t: &str| Check::parse(t).map(|c| c.eval(&summary()).line()).ok();
        assert_eq!(
            line("link.paths.2.drops == 0").as_deref(),
            Some("ok   link.paths.2.drops == 0: path 2 0")
        );
        assert_eq!(short(-0.0), "0");
    }

    #[test]
    fn bad_assertions_say_what_is_allowed() {
        let e = |t: &str| Check::parse(t).err().map(|e| e.0).unwrap_or_default();
        assert!(e("flows.all.srtt_p50 31ms").contains("NAME OP VALUE"));
        assert!(e("flows.all.srtt_p50 < 31").contains("`31ms`"));
        assert!(e("flows.all.goodput > 9").contains("Mbit/s"));
        assert!(e("flows.all.rtt < 31ms").contains("srtt_p50"));
        assert!(e("flows.first.bytes > 0").contains("an index"));
        assert!(e("link.paths.up.marks > 0").contains("pipe number"));
        assert!(e("jain > 0.9").contains("jain.all_on"));
        assert!(e("link.drops.aqm == lots").contains("not a number"));
        assert_eq!(
            Check::parse("link.drops.aqm>=1").map(|c| (c.op, c.bound)),
            Ok((Op::Ge, 1.0))
        );
    }
}
