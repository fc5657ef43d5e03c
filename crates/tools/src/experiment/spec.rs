//! The experiment file (TOML): what it may say, read into the runs it
//! describes. A sweep's variables (`[sweep] bw = ["1Mbit/s", "10Mbit/s"]`)
//! are written `{bw}` in any string of the file (the link's options, a
//! commands file, a flow's `cc`); the runs are every combination of them.
//! Every value is checked for every run before anything starts, and an
//! error names the line and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use dummynet_engine::Nanos;
use serde::Deserialize;
use toml::Spanned;

use super::check::Check;
use dummynet_daemon::shell::link::{link_config, LinkError};
use dummynet_sim::gen::{parse_duration, parse_rate};

/// Most runs a sweep may expand to.
pub const MAX_RUNS: usize = 64;
/// Most flows (counting `count`), pings and UDP flows of one run.
pub const MAX_FLOWS: u32 = 64;
/// Longest run.
pub const MAX_DURATION: Nanos = 3600 * 1_000_000_000;
/// Shortest sampling interval.
pub const MIN_INTERVAL: Nanos = 10_000_000;

/// What is wrong with the file: where (line, from 1), which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub line: Option<usize>,
    pub key: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if !self.key.is_empty() {
            write!(f, "`{}`: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpecError {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Option<String>,
    duration: Spanned<String>,
    interval: Option<Spanned<String>>,
    seed: Option<u64>,
    link: Spanned<RawLink>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
    #[serde(default)]
    ping: Vec<Spanned<RawPing>>,
    #[serde(default)]
    udp: Vec<Spanned<RawUdp>>,
    #[serde(default)]
    sweep: BTreeMap<String, Spanned<Vec<String>>>,
    /// Checks of each run's summary (`flows.all.srtt_p50 < 31ms`).
    #[serde(default)]
    assert: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    /// A file of ipfw commands (interfaces `app` and `peer`), relative to
    /// the experiment file.
    config: Option<Spanned<String>>,
    /// The same commands written in the file.
    commands: Option<Spanned<String>>,
    preset: Option<Spanned<String>>,
    up: Option<Spanned<String>>,
    down: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    direction: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    bytes: Option<Spanned<u64>>,
    cc: Option<Spanned<String>>,
    ecn: Option<bool>,
    count: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPing {
    interval: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdp {
    direction: Option<Spanned<String>>,
    rate: Spanned<String>,
    size: Option<Spanned<u32>>,
    start: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
}

/// Which way a flow's data goes: `Up` from the shell's namespace out
/// (pipe 1), `Down` into it (pipe 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
}

/// The emulated link: rules given whole, or `dummynet shell`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// ipfw commands (interfaces `app` and `peer`).
    Commands(String),
    Options {
        preset: Option<String>,
        up: Option<String>,
        down: Option<String>,
    },
}

/// When a flow stops sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// After this long (ns).
    Time(Nanos),
    /// Once this many bytes are written (or the run ends).
    Bytes(u64),
}

/// One TCP flow (one of `count` alike).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub direction: Direction,
    pub start: Nanos,
    pub until: Until,
    /// `None`: the namespace's default.
    pub cc: Option<String>,
    pub ecn: bool,
}

/// UDP echoes at a fixed interval, their RTT measured (an unprivileged
/// `ping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    pub interval: Nanos,
    pub start: Nanos,
    pub duration: Nanos,
}

/// A constant-rate UDP flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp {
    pub direction: Direction,
    /// bit/s.
    pub rate: u64,
    /// Payload bytes per datagram.
    pub size: u32,
    pub start: Nanos,
    pub duration: Nanos,
}

/// One run, every value resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// `name` plus the sweep's values: the run's directory name.
    pub label: String,
    /// The sweep's values for this run, in the file's order of keys.
    pub vars: Vec<(String, String)>,
    pub duration: Nanos,
    pub interval: Nanos,
    pub seed: u64,
    pub link: Link,
    /// One per flow (a `count` of 4 is four here).
    pub flows: Vec<Flow>,
    pub pings: Vec<Ping>,
    pub udp: Vec<Udp>,
    /// The file's `assert` list, read.
    pub checks: Vec<Check>,
}

/// The line (from 1) of byte `offset` in `src`.
fn line_of(src: &str, offset: usize) -> usize {
    src.as_bytes()[..offset.min(src.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Reads the experiment file at `path` into its runs.
pub fn load(path: &Path) -> Result<Vec<Run>, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        line: None,
        key: String::new(),
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    parse(&text, path.parent().unwrap_or(Path::new(".")))
}

/// The runs `src` describes; `dir` is where its files are.
pub fn parse(src: &str, dir: &Path) -> Result<Vec<Run>, SpecError> {
    let raw: RawFile = toml::from_str(src).map_err(|e| {
        let line = e.span().map(|s| line_of(src, s.start));
        // serde names unknown and missing keys; for a bad value the key is
        // the one on its line.
        let key = line
            .and_then(|l| src.lines().nth(l - 1))
            .and_then(|t| t.split_once('='))
            .map(|(k, _)| k.trim().to_string())
            .unwrap_or_default();
        SpecError {
            line,
            key,
            message: e.message().trim().to_string(),
        }
    })?;
    let cx = Cx { src };
    // The sweep: every combination, the file's first key varying slowest.
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in &raw.sweep {
        if values.get_ref().is_empty() {
            return Err(cx.err(values, &format!("sweep.{name}"), "a sweep needs a value"));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(cx.err(
                values,
                &format!("sweep.{name}"),
                "a sweep's name is letters, digits and _",
            ));
        }
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.get_ref().iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
        if combos.len() > MAX_RUNS {
            return Err(cx.err(
                values,
                &format!("sweep.{name}"),
                &format!("the sweep makes more than {MAX_RUNS} runs"),
            ));
        }
    }
    // A variable nobody uses is a mistake (a typo in `{bw}`).
    let config_text = match &raw.link.get_ref().config {
        Some(c) => Some((
            c,
            std::fs::read_to_string(dir.join(c.get_ref())).map_err(|e| {
                cx.err(
                    c,
                    "link.config",
                    &format!("cannot read {}: {e}", dir.join(c.get_ref()).display()),
                )
            })?,
        )),
        None => None,
    };
    for (name, values) in &raw.sweep {
        let mark = format!("{{{name}}}");
        let in_config = config_text.as_ref().is_some_and(|(_, t)| t.contains(&mark));
        if !src.contains(&mark) && !in_config {
            return Err(cx.err(
                values,
                &format!("sweep.{name}"),
                &format!("`{mark}` is written nowhere: a sweep's values replace it in the file's strings"),
            ));
        }
    }
    let name = raw.name.clone().unwrap_or_else(|| "run".to_string());
    combos
        .into_iter()
        .map(|vars| cx.run(&raw, &name, config_text.as_ref(), vars))
        .collect()
}

/// What resolving needs: the source, for the lines of errors.
struct Cx<'a> {
    src: &'a str,
}

impl Cx<'_> {
    fn err<T>(&self, at: &Spanned<T>, key: &str, message: &str) -> SpecError {
        SpecError {
            line: Some(line_of(self.src, at.span().start)),
            key: key.to_string(),
            message: message.to_string(),
        }
    }

    fn run(
        &self,
        raw: &RawFile,
        name: &str,
        config: Option<&(&Spanned<String>, String)>,
        vars: Vec<(String, String)>,
    ) -> Result<Run, SpecError> {
        let r = RunCx {
            cx: self,
            vars: &vars,
        };
        let (duration, interval) = r.times(raw)?;
        let link = r.link(raw, config)?;
        let flows = r.flows(raw, duration)?;
        let pings = r.pings(raw, duration)?;
        let udp = r.udp(raw, duration)?;
        if flows.len() + pings.len() + udp.len() > MAX_FLOWS as usize {
            return Err(self.err(
                &raw.duration,
                "flow",
                &format!("at most {MAX_FLOWS} flows, pings and UDP flows in a run"),
            ));
        }
        let checks = raw
            .assert
            .iter()
            .map(|a| {
                let text = r.value(a, "assert")?;
                Check::parse(&text).map_err(|e| r.with_run(self.err(a, "assert", &e.0)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut label = name.to_string();
        for (k, v) in r.vars {
            label.push_str(&format!("_{k}={v}"));
        }
        let label = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_=.".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        Ok(Run {
            label,
            vars,
            duration,
            interval,
            seed: raw.seed.unwrap_or(1),
            link,
            flows,
            pings,
            udp,
            checks,
        })
    }
}

/// Resolving one run: the file's context and the run's sweep values.
struct RunCx<'a> {
    cx: &'a Cx<'a>,
    vars: &'a [(String, String)],
}

impl RunCx<'_> {
    /// `s` with the run's values in place of `{name}`.
    fn sub(&self, s: &str) -> String {
        self.vars
            .iter()
            .fold(s.to_string(), |s, (k, v)| s.replace(&format!("{{{k}}}"), v))
    }

    /// A value with the run's values in, checked: the error says which
    /// run when the value came from the sweep.
    fn value(&self, v: &Spanned<String>, key: &str) -> Result<String, SpecError> {
        let s = self.sub(v.get_ref());
        if let Some(open) = s.find('{').filter(|i| s[*i..].contains('}')) {
            let end = s[open..].find('}').map_or(s.len(), |e| open + e + 1);
            return Err(self.cx.err(
                v,
                key,
                &format!("`{}` names no sweep variable", &s[open..end]),
            ));
        }
        Ok(s)
    }

    /// `e`, saying which run of a sweep it is about.
    fn with_run(&self, mut e: SpecError) -> SpecError {
        if !self.vars.is_empty() {
            let run: Vec<String> = self.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
            e.message = format!("{} (in the run {})", e.message, run.join(", "));
        }
        e
    }

    fn time(&self, v: &Spanned<String>, key: &str) -> Result<Nanos, SpecError> {
        let s = self.value(v, key)?;
        parse_duration(&s).map_err(|m| self.with_run(self.cx.err(v, key, &m.to_string())))
    }

    fn time_or(
        &self,
        v: &Option<Spanned<String>>,
        key: &str,
        default: Nanos,
    ) -> Result<Nanos, SpecError> {
        match v {
            Some(v) => self.time(v, key),
            None => Ok(default),
        }
    }

    fn direction(&self, v: &Option<Spanned<String>>, key: &str) -> Result<Direction, SpecError> {
        match v {
            None => Ok(Direction::Up),
            Some(d) => match self.value(d, key)?.as_str() {
                "up" => Ok(Direction::Up),
                "down" => Ok(Direction::Down),
                other => Err(self.cx.err(
                    d,
                    key,
                    &format!("`{other}`: a direction is `up` (from the shell out) or `down`"),
                )),
            },
        }
    }

    /// The run's duration and sampling interval.
    fn times(&self, raw: &RawFile) -> Result<(Nanos, Nanos), SpecError> {
        let duration = self.time(&raw.duration, "duration")?;
        if duration == 0 || duration > MAX_DURATION {
            return Err(self.cx.err(
                &raw.duration,
                "duration",
                "a run lasts more than 0 s and at most an hour",
            ));
        }
        let interval = self.time_or(&raw.interval, "interval", 100_000_000)?;
        if interval < MIN_INTERVAL || interval > duration {
            let at = raw.interval.as_ref().unwrap_or(&raw.duration);
            return Err(self.cx.err(
                at,
                "interval",
                "the sampling interval is at least 10ms and at most the run's duration",
            ));
        }

        Ok((duration, interval))
    }

    /// The link: a file of commands, commands written here, or presets.
    fn link(
        &self,
        raw: &RawFile,
        config: Option<&(&Spanned<String>, String)>,
    ) -> Result<Link, SpecError> {
        let l = raw.link.get_ref();
        let given = [
            l.config.is_some(),
            l.commands.is_some(),
            l.preset.is_some() || l.up.is_some() || l.down.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(self.cx.err(
                &raw.link,
                "link",
                "give one of: `config` (a file of ipfw commands), `commands` (the same, \
                 written here), or `preset`/`up`/`down` (as `dummynet shell` takes them)",
            ));
        }
        Ok(if let Some((at, text)) = config {
            let text = self.sub(text);
            dummynet_dataplane::lang::commands(&text, None).map_err(|(line, e)| {
                self.with_run(self.cx.err(
                    at,
                    "link.config",
                    &format!("{} line {line}: {e}", at.get_ref()),
                ))
            })?;
            Link::Commands(text)
        } else if let Some(c) = &l.commands {
            let text = self.value(c, "link.commands")?;
            dummynet_dataplane::lang::commands(&text, None).map_err(|(line, e)| {
                self.with_run(
                    self.cx
                        .err(c, "link.commands", &format!("command {line}: {e}")),
                )
            })?;
            Link::Commands(text)
        } else {
            let opt = |v: &Option<Spanned<String>>, key: &str| {
                v.as_ref().map(|v| self.value(v, key)).transpose()
            };
            let (preset, up, down) = (
                opt(&l.preset, "link.preset")?,
                opt(&l.up, "link.up")?,
                opt(&l.down, "link.down")?,
            );
            link_config(preset.as_deref(), up.as_deref(), down.as_deref()).map_err(|e| {
                // Which key: the options the error is about (the
                // command line's `--up` is the file's `up`).
                let (key, at) = match &e {
                    LinkError::Options { what: "--up", .. } => ("link.up", l.up.as_ref()),
                    LinkError::Options { what: "--down", .. } => ("link.down", l.down.as_ref()),
                    _ => ("link.preset", l.preset.as_ref()),
                };
                let e = e
                    .to_string()
                    .replace("--up", "up")
                    .replace("--down", "down");
                match at {
                    Some(at) => self.with_run(self.cx.err(at, key, &e)),
                    None => self.with_run(self.cx.err(&raw.link, key, &e)),
                }
            })?;
            Link::Options { preset, up, down }
        })
    }

    /// The TCP flows, each `[[flow]]` as many times as its count.
    fn flows(&self, raw: &RawFile, duration: Nanos) -> Result<Vec<Flow>, SpecError> {
        let mut flows = Vec::new();
        // Which `[[flow]]` each flow comes from (a count makes several).
        let mut origin = Vec::new();
        for (k, f) in raw.flow.iter().enumerate() {
            let ff = f.get_ref();
            let direction = self.direction(&ff.direction, "flow.direction")?;
            let start = self.time_or(&ff.start, "flow.start", 0)?;
            let until = match (&ff.duration, &ff.bytes) {
                (Some(_), Some(b)) => {
                    return Err(self.cx.err(
                        b,
                        "flow.bytes",
                        "a flow has a duration or bytes, not both",
                    ))
                }
                (Some(d), None) => Until::Time(self.time(d, "flow.duration")?),
                (None, Some(b)) if *b.get_ref() == 0 => {
                    return Err(self
                        .cx
                        .err(b, "flow.bytes", "a flow sends at least one byte"))
                }
                (None, Some(b)) => Until::Bytes(*b.get_ref()),
                (None, None) => Until::Time(duration.saturating_sub(start)),
            };
            if start >= duration {
                let at = ff.start.as_ref().unwrap_or(&raw.duration);
                return Err(self
                    .cx
                    .err(at, "flow.start", "a flow starts before the run ends"));
            }
            let cc = ff
                .cc
                .as_ref()
                .map(|c| self.value(c, "flow.cc"))
                .transpose()?;
            if let (Some(c), Some(at)) = (&cc, &ff.cc) {
                if c.is_empty() || c.len() > 15 || !c.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(self.with_run(self.cx.err(
                        at,
                        "flow.cc",
                        &format!("`{c}` is not a congestion control's name (cubic, reno, bbr...)"),
                    )));
                }
            }
            let count = ff.count.as_ref().map_or(1, |c| *c.get_ref());
            if count == 0 {
                let at = ff.count.as_ref().map(|c| c.span()).unwrap_or(f.span());
                return Err(SpecError {
                    line: Some(line_of(self.cx.src, at.start)),
                    key: "flow.count".into(),
                    message: "a flow's count is at least 1".into(),
                });
            }
            let flow = Flow {
                direction,
                start,
                until,
                cc,
                ecn: ff.ecn.unwrap_or(false),
            };
            let n = (count as usize).min(MAX_FLOWS as usize + 1);
            flows.extend(std::iter::repeat_n(flow, n));
            origin.extend(std::iter::repeat_n(k, n));
            if flows.len() > MAX_FLOWS as usize {
                return Err(self.cx.err(
                    f,
                    "flow.count",
                    &format!("at most {MAX_FLOWS} flows in a run"),
                ));
            }
        }
        // Linux turns ECN on per network namespace (net.ipv4.tcp_ecn), and
        // every connection is opened from the shell's side.
        if let Some(first) = flows.first() {
            if let Some((i, _)) = flows.iter().enumerate().find(|(_, f)| f.ecn != first.ecn) {
                let at = &raw.flow[origin[i]];
                return Err(self.cx.err(
                    at,
                    "flow.ecn",
                    "every flow of a run has ECN on or every one off: Linux turns it on per \
                     network namespace (net.ipv4.tcp_ecn)",
                ));
            }
        }
        Ok(flows)
    }

    fn pings(&self, raw: &RawFile, duration: Nanos) -> Result<Vec<Ping>, SpecError> {
        let mut pings = Vec::new();
        for p in &raw.ping {
            let pp = p.get_ref();
            let interval = self.time_or(&pp.interval, "ping.interval", 100_000_000)?;
            if interval < 1_000_000 {
                return Err(self
                    .cx
                    .err(p, "ping.interval", "pings are at least 1ms apart"));
            }
            let start = self.time_or(&pp.start, "ping.start", 0)?;
            pings.push(Ping {
                interval,
                start,
                duration: self.time_or(
                    &pp.duration,
                    "ping.duration",
                    duration.saturating_sub(start),
                )?,
            });
        }
        Ok(pings)
    }

    fn udp(&self, raw: &RawFile, duration: Nanos) -> Result<Vec<Udp>, SpecError> {
        let mut udp = Vec::new();
        for u in &raw.udp {
            let uu = u.get_ref();
            let s = self.value(&uu.rate, "udp.rate")?;
            let rate = parse_rate(&s)
                .map_err(|m| self.with_run(self.cx.err(&uu.rate, "udp.rate", &m.to_string())))?;
            if rate == 0 {
                return Err(self
                    .cx
                    .err(&uu.rate, "udp.rate", "a UDP flow's rate is above 0"));
            }
            let size = uu.size.as_ref().map_or(1200, |s| *s.get_ref());
            if !(16..=1472).contains(&size) {
                let at = uu.size.as_ref().map(|s| s.span()).unwrap_or(u.span());
                return Err(SpecError {
                    line: Some(line_of(self.cx.src, at.start)),
                    key: "udp.size".into(),
                    message: "a datagram's payload is 16 to 1472 bytes".into(),
                });
            }
            let start = self.time_or(&uu.start, "udp.start", 0)?;
            udp.push(Udp {
                direction: self.direction(&uu.direction, "udp.direction")?,
                rate,
                size,
                start,
                duration: self.time_or(
                    &uu.duration,
                    "udp.duration",
                    duration.saturating_sub(start),
                )?,
            });
        }
        Ok(udp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(src: &str) -> Result<Vec<Run>, SpecError> {
        parse(src, Path::new("."))
    }

    fn error(src: &str) -> SpecError {
        match runs(src) {
            Ok(r) => panic!("accepted: {r:?}"),
            Err(e) => e,
        }
    }

    const BASE: &str =
        "name = \"t\"\nduration = \"10s\"\n[link]\nup = \"bw 10Mbit/s delay 10ms\"\n";

    #[test]
    fn a_whole_file_reads_into_one_run() {
        let src = format!(
            "{BASE}down = \"delay 10ms\"\n\
             [[flow]]\ndirection = \"down\"\nstart = \"2s\"\nduration = \"5s\"\ncc = \"reno\"\ncount = 2\n\
             [[flow]]\nbytes = 1000000\n\
             [[ping]]\ninterval = \"200ms\"\n\
             [[udp]]\nrate = \"1Mbit/s\"\nsize = 1000\nstart = \"1s\"\n"
        );
        let r = runs(&src).unwrap();
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.label, "t");
        assert_eq!(r.duration, 10_000_000_000);
        assert_eq!(r.interval, 100_000_000);
        assert_eq!(r.seed, 1);
        assert_eq!(r.flows.len(), 3);
        assert_eq!(
            r.flows[0],
            Flow {
                direction: Direction::Down,
                start: 2_000_000_000,
                until: Until::Time(5_000_000_000),
                cc: Some("reno".into()),
                ecn: false,
            }
        );
        assert_eq!(r.flows[1], r.flows[0]);
        assert_eq!(r.flows[2].until, Until::Bytes(1_000_000));
        assert_eq!(r.flows[2].direction, Direction::Up);
        assert_eq!(r.pings[0].interval, 200_000_000);
        assert_eq!(r.pings[0].duration, 10_000_000_000);
        assert_eq!(r.udp[0].rate, 1_000_000);
        assert_eq!(r.udp[0].duration, 9_000_000_000, "to the run's end");
        assert_eq!(
            r.link,
            Link::Options {
                preset: None,
                up: Some("bw 10Mbit/s delay 10ms".into()),
                down: Some("delay 10ms".into())
            }
        );
    }

    #[test]
    fn a_sweep_expands_into_every_combination() {
        let src = "name = \"m\"\nduration = \"10s\"\nassert = [\"flows.0.goodput > {bw}\"]\n\
                   [link]\nup = \"bw {bw} delay 10ms\"\n\
                   [[flow]]\ncc = \"{cc}\"\n\
                   [sweep]\nbw = [\"1Mbit/s\", \"10Mbit/s\"]\ncc = [\"cubic\", \"reno\", \"bbr\"]\n";
        let r = runs(src).unwrap();
        assert_eq!(r.len(), 6);
        // Keys in order (bw before cc), the first varying slowest.
        let got: Vec<(String, Option<String>, String)> = r
            .iter()
            .map(|r| {
                let Link::Options { up, .. } = &r.link else {
                    panic!()
                };
                (up.clone().unwrap(), r.flows[0].cc.clone(), r.label.clone())
            })
            .collect();
        assert_eq!(got[0].0, "bw 1Mbit/s delay 10ms");
        assert_eq!(got[0].1.as_deref(), Some("cubic"));
        assert_eq!(got[0].2, "m_bw=1Mbit-s_cc=cubic");
        assert_eq!(got[2].1.as_deref(), Some("bbr"));
        assert_eq!(got[3].0, "bw 10Mbit/s delay 10ms");
        assert_eq!(got[5].2, "m_bw=10Mbit-s_cc=bbr");
        // A sweep's values go into the assertions too.
        assert_eq!(r[0].checks[0].text, "flows.0.goodput > 1Mbit/s");
        assert_eq!(r[3].checks[0].text, "flows.0.goodput > 10Mbit/s");
        assert_eq!(
            r[4].vars,
            vec![
                ("bw".into(), "10Mbit/s".into()),
                ("cc".into(), "reno".into())
            ]
        );
    }

    #[test]
    fn bad_input_names_the_line_and_the_key() {
        // Syntax.
        let e = error("duration = \"10s\n");
        assert_eq!(e.line, Some(1), "{e}");
        // A key the file does not know.
        let e = error(&format!("{BASE}[[flow]]\ncongestion = \"bbr\"\n"));
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("unknown field `congestion`"), "{e}");
        // A value of the wrong type: the key is the one on its line.
        let e = error(&format!("{BASE}[[flow]]\ncount = \"four\"\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "count"), "{e}");
        // A time that is not one.
        let e = error(&format!("{BASE}[[flow]]\nstart = \"soon\"\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "flow.start"), "{e}");
        assert!(e.message.contains("soon"), "{e}");
        // A direction.
        let e = error(&format!("{BASE}[[flow]]\ndirection = \"sideways\"\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "flow.direction"), "{e}");
        assert!(
            e.to_string()
                .starts_with("line 6: `flow.direction`: `sideways`"),
            "{e}"
        );
        // The link's options are the shell's, checked as it checks them.
        let e = error("duration = \"10s\"\n[link]\nup = \"dealy 5ms\"\n");
        assert_eq!((e.line, e.key.as_str()), (Some(3), "link.up"), "{e}");
        // Commands that do not parse, with the command's number.
        let e =
            error("duration = \"1s\"\n[link]\ncommands = \"\"\"\npipe 1 config bw fast\n\"\"\"\n");
        assert_eq!((e.line, e.key.as_str()), (Some(3), "link.commands"), "{e}");
        assert!(e.message.starts_with("command 1:"), "{e}");
        // Two ways of giving the link.
        let e = error("duration = \"1s\"\n[link]\npreset = \"lte\"\ncommands = \"\"\n");
        assert_eq!(e.key, "link");
        // A duration and bytes.
        let e = error(&format!("{BASE}[[flow]]\nduration = \"1s\"\nbytes = 5\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(7), "flow.bytes"), "{e}");
        // A missing duration.
        let e = error("[link]\npreset = \"lte\"\n");
        assert!(e.message.contains("missing field `duration`"), "{e}");
        // A start past the end.
        let e = error(&format!("{BASE}[[flow]]\nstart = \"11s\"\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "flow.start"), "{e}");
        // ECN on for some flows only.
        let e = error(&format!(
            "{BASE}[[flow]]\necn = true\n[[flow]]\necn = false\n"
        ));
        assert_eq!((e.line, e.key.as_str()), (Some(7), "flow.ecn"), "{e}");
        // A sweep value that makes a bad option names the run.
        let e = error(
            "duration = \"1s\"\n[link]\nup = \"bw {bw}\"\n[sweep]\nbw = [\"1Mbit/s\", \"fast\"]\n",
        );
        assert_eq!((e.line, e.key.as_str()), (Some(3), "link.up"), "{e}");
        assert!(e.message.ends_with("(in the run bw=fast)"), "{e}");
        // A sweep variable written nowhere, and a placeholder that is no
        // variable.
        let e = error(&format!("{BASE}[sweep]\nbq = [\"1\"]\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "sweep.bq"), "{e}");
        let e = error(&format!("{BASE}[[flow]]\ncc = \"{{cc}}\"\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "flow.cc"), "{e}");
        // A sampling interval longer than the run.
        let e = error(&format!("interval = \"20s\"\n{BASE}"));
        assert_eq!((e.line, e.key.as_str()), (Some(1), "interval"), "{e}");
        // A count of 0, too many flows.
        let e = error(&format!("{BASE}[[flow]]\ncount = 0\n"));
        assert_eq!((e.line, e.key.as_str()), (Some(6), "flow.count"), "{e}");
        let e = error(&format!("{BASE}[[flow]]\ncount = 65\n"));
        assert_eq!(e.key, "flow.count", "{e}");
    }
}
