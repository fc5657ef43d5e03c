//! A researcher's experiment in one file (`dummynet experiment FILE`).
//! The file ([`spec`]) says the link, the flows, the sampling and the
//! sweep; each run ([`run_one`]) gets `dummynet shell`'s link ([`Shell`]), its
//! traffic built in (TCP with each sender's `TCP_INFO`,
//! pings, constant-rate UDP), the emulator's own packet events on the same
//! clock, and a directory of its own with the raw series as CSV, a JSON
//! summary ([`summary`]) and the figures ([`figure`], and the plot
//! module's link panels). A sweep's runs also get comparison figures.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dummynet_engine::percentile::nearest_rank;
use dummynet_engine::Nanos;
use serde::Serialize;

use dummynet_daemon::embed::{EventFilter, ObserverStats, Report, Shell, Subscription};
use dummynet_dataplane::events::Event;
use dummynet_io::netns::NetnsError;
use dummynet_sim::plot::series::SeriesError;
use dummynet_sim::plot::series::{Reader, Series};
use dummynet_sim::plot::{Capacity, Panel as LinkPanel, PlotOptions};

pub use dummynet_sim::plot::panels as figure;
pub mod check;
pub mod spec;
pub mod summary;
mod traffic;

use spec::{Direction, Link, Run};
use summary::FlowSummary;
use traffic::Measured;

/// A run's JSON summary (`summary.json`).
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub label: String,
    pub vars: Vec<(String, String)>,
    pub duration_s: f64,
    pub interval_s: f64,
    pub seed: u64,
    /// The run's time 0 on the wall clock and on the event log's clock
    /// (`t_ns` of events.jsonl): the CSVs' `t_s` is from it.
    pub time0_wall_ns: u64,
    pub time0_events_t_ns: Option<u64>,
    pub flows: Vec<FlowSummary>,
    /// Jain's index of the flows' goodputs over the span when all run.
    pub jain_all_on: Option<f64>,
    pub all_on_s: Option<(f64, f64)>,
    pub pings: Vec<PingSummary>,
    pub udp: Vec<UdpSummary>,
    pub link: LinkSummary,
    pub warnings: Vec<String>,
    /// The file's `assert` checks on this run.
    pub checks: Vec<check::Outcome>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PingSummary {
    pub sent: usize,
    pub lost: usize,
    pub rtt_p50_ms: Option<f64>,
    pub rtt_p90_ms: Option<f64>,
    pub rtt_p99_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UdpSummary {
    pub direction: Direction,
    pub rate_bps: u64,
    pub sent_bytes: u64,
    pub received_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LinkSummary {
    /// Each pipe that carried traffic (a queue's packets count as its
    /// scheduler's pipe's); the shell's pipe 1 is up, 2 down.
    pub paths: Vec<PathSummary>,
    /// Packets an AQM marked CE during the run (all pipes), from the data
    /// plane's counters read before the connections and at the run's end.
    pub ecn_marked: u64,
    /// Drops by reason during the run (all pipes), the same way.
    pub drops: Vec<(String, u64)>,
    /// CE marks by pipe during the run, from the event log (a queue's
    /// count as its pipe's) over the counters' span: (pipe, marks), each
    /// pipe that marked any.
    pub marks: Vec<(u32, u64)>,
    /// Events missing from the run's log (`events.jsonl`, and the paths'
    /// figures from it): those the data plane could not hand the observer
    /// and those the log's subscription could not take. 0: it is whole.
    pub events_lost: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PathSummary {
    pub number: u32,
    pub direction: Option<Direction>,
    /// The pipe's `bw` (0: none).
    pub bandwidth_bps: u64,
    /// Delivered over the run / (bandwidth × duration).
    pub utilisation: Option<f64>,
    pub delivered_packets: u64,
    /// Time inside the pipe (queue, transmission and delay line), ms.
    pub sojourn_p50_ms: Option<f64>,
    pub sojourn_p99_ms: Option<f64>,
    /// Drops by reason, from the event log, over the span of the link's
    /// counters (`LinkSummary::drops`): from before the connections to the
    /// run's end.
    pub drops: Vec<(String, u64)>,
    /// Packets an AQM of the pipe marked CE, from the event log, the same way.
    pub marks: u64,
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The subscription's channel for a run's log: a second of 40 000
/// packets' events, while the log's drain ([`drain_events`]) is late.
const EVENTS_BUFFER: usize = 1 << 17;

/// The event log's side of a run: written to `events.jsonl` and read into
/// one [`Series`] per pipe (a queue's packets count as its pipe's), on a
/// thread of its own.
struct EventLog {
    series: Vec<(u32, Series)>,
    /// (`t_ns` of the log, wall ns) of its start line.
    start: Option<(u64, u64)>,
    /// Events missing from it ([`LinkSummary::events_lost`]).
    lost: u64,
    /// Its drops and CE marks by pipe, with their times.
    tallies: Tallies,
}

/// The drops and CE marks the log saw, by pipe and time, so that the
/// summary counts them over the counters' own span (from the `stats`
/// before the run to the one at its end; both are on the log's clock).
#[derive(Default)]
struct Tallies(Vec<(Nanos, u32, Tally)>);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tally {
    Drop(&'static str),
    Mark,
}

impl Tallies {
    fn note(&mut self, e: &Event<String>) {
        let tally = match e {
            Event::Drop { reason, .. } => Tally::Drop(reason),
            e if e.ce() => Tally::Mark,
            _ => return,
        };
        if let (Some(pipe), _) = e.target() {
            self.0.push((e.t_ns(), pipe, tally));
        }
    }

    /// Those in `(from, to]` (ns on the log's clock).
    fn within(&self, (from, to): (Nanos, Nanos)) -> impl Iterator<Item = (u32, Tally)> + '_ {
        self.0
            .iter()
            .filter(move |x| x.0 > from && x.0 <= to)
            .map(|x| (x.1, x.2))
    }

    /// Pipe `pipe`'s drops by reason within `span`.
    fn drops(&self, pipe: u32, span: (Nanos, Nanos)) -> Vec<(String, u64)> {
        let mut by = std::collections::BTreeMap::new();
        for (p, t) in self.within(span) {
            if let (true, Tally::Drop(reason)) = (p == pipe, t) {
                *by.entry(reason).or_insert(0u64) += 1;
            }
        }
        by.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// CE marks by pipe within `span`, each pipe that marked any.
    fn marks(&self, span: (Nanos, Nanos)) -> std::collections::BTreeMap<u32, u64> {
        let mut by = std::collections::BTreeMap::new();
        for (p, _) in self.within(span).filter(|x| x.1 == Tally::Mark) {
            *by.entry(p).or_insert(0u64) += 1;
        }
        by
    }
}

/// Where the event log's series come from: the pipes, and which pipe
/// each queue feeds (a queue's events name the queue; its scheduler N is
/// pipe N's).
struct Paths {
    pipes: Vec<u32>,
    queues: Vec<(u32, u32)>,
}

/// Takes the subscription's events as they come into `to`, an unbounded
/// channel, until `stop` and a quiet 50 ms; does nothing else, so that it
/// keeps up with the observer however slow the log's writing. Returns
/// the events the subscription lost.
fn drain_events(
    sub: Subscription,
    to: std::sync::mpsc::Sender<Event<String>>,
    stop: Arc<AtomicBool>,
) -> u64 {
    loop {
        match sub.recv_timeout(Duration::from_millis(50)) {
            Ok(e) => {
                if to.send(e).is_err() {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) if stop.load(Ordering::Relaxed) => break,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    sub.lost()
}

/// Writes the drained events to `path` and reads them into the series,
/// until the drain ends.
fn log_events(
    events: std::sync::mpsc::Receiver<Event<String>>,
    path: PathBuf,
    window: Nanos,
    paths: Paths,
    from_wall: Arc<std::sync::atomic::AtomicU64>,
) -> Result<EventLog, RunError> {
    let mut out = create(&path)?;
    let mut readers: Vec<(u32, Reader)> = paths
        .pipes
        .iter()
        .map(|n| (*n, Reader::new(Some(*n), window)))
        .collect();
    // A queue not in the list (made later) keeps its own number.
    let pipe_of = |q: u32| paths.queues.iter().find(|x| x.0 == q).map_or(q, |x| x.1);
    let mut start = None;
    let mut tallies = Tallies::default();
    let mut n = 0u64;
    for e in events {
        let line = json(&e, false, &path)?;
        writeln!(out, "{line}").map_err(io(&path))?;
        if let Event::Start { t_ns, wall_ns } = e {
            start = Some((t_ns, wall_ns));
            continue;
        }
        // A queue's events name it rather than a pipe: its pipe's number.
        let e = e.queue_as_pipe(pipe_of);
        tallies.note(&e);
        // The series start with the run's time 0 (the connections' set-up
        // before it is left out of them).
        let from = from_wall.load(Ordering::Relaxed);
        let at_wall = start.map(|(t, w)| w + e.t_ns().saturating_sub(t));
        if from == 0 || at_wall.is_some_and(|w| w < from) {
            continue;
        }
        let text = json(&e, false, &path)?;
        n += 1;
        for (_, r) in &mut readers {
            r.line(n, &text).map_err(RunError::EventLog)?;
        }
    }
    out.flush().map_err(io(&path))?;
    Ok(EventLog {
        series: readers.into_iter().map(|(n, r)| (n, r.finish())).collect(),
        start,
        lost: 0,
        tallies,
    })
}

/// Events the data plane could not hand the observer (every subscriber
/// misses them), by the observer's counters; its `enqueue` records are
/// no events.
fn plane_lost(stats: &ObserverStats) -> u64 {
    stats
        .lost
        .iter()
        .filter(|(kind, _)| *kind != "enqueue")
        .map(|(_, n)| n)
        .sum()
}

/// Why a run could not be made or written: its kind, with what and where.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A directory or file of the run's output.
    #[error("cannot write {}: {source}", path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The namespace the link's far end and the traffic's outer side go in.
    #[error("the outer namespace: {0}")]
    Namespace(NetnsError),
    /// The shell's link did not start.
    #[error("the link: {0}")]
    Link(dummynet_daemon::embed::Error),
    /// The running emulator did not answer (its pipes, queues or counters).
    #[error("the emulator: {0}")]
    Emulator(dummynet_daemon::embed::Error),
    /// A thread of the run's own could not start.
    #[error("starting {what}: {source}")]
    Thread {
        what: &'static str,
        source: std::io::Error,
    },
    /// One of the run's threads panicked.
    #[error("{0} panicked")]
    Panicked(&'static str),
    /// The traffic: its namespace's settings, connections or threads.
    #[error("{0}")]
    Traffic(String),
    /// The event log could not read an event into its series.
    #[error("the event log: {0}")]
    EventLog(SeriesError),
}

/// An I/O error on `path` as a [`RunError::Output`].
fn io(path: &Path) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |source| RunError::Output {
        path: path.to_path_buf(),
        source,
    }
}

/// JSON of our own types as text (which cannot fail: no maps with
/// non-string keys, no failing `Serialize`); an error is the file's.
fn json<T: Serialize>(v: &T, pretty: bool, path: &Path) -> Result<String, RunError> {
    let text = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    };
    text.map_err(|e| io(path)(std::io::Error::other(e)))
}

/// How a run is made, besides its file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The figures in PNG too, not only SVG.
    pub png: bool,
    /// Start the shell from the network namespace at this path (the far
    /// end of the link and the traffic's outer side are there), rather
    /// than this process's.
    pub netns: Option<PathBuf>,
}

/// Runs one run into `dir`; returns its summary. `stop` set (a signal)
/// ends the traffic early.
pub fn run_one(
    r: &Run,
    dir: &Path,
    stop: &AtomicBool,
    options: &RunOptions,
) -> Result<RunSummary, RunError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let outside = match &options.netns {
        Some(p) => dummynet_io::netns::Netns::open(p),
        None => dummynet_io::netns::Netns::current(),
    }
    .map_err(RunError::Namespace)?;
    // IPv4 only: the ends' own IPv6 chatter (router solicitations, MLD
    // reports, not ECN-capable) would otherwise share the queue with the
    // flows, and an AQM in its dropping state drops it.
    let mut builder = Shell::builder().seed(r.seed).ipv4_only(true);
    if let Some(p) = &options.netns {
        builder = builder.netns(p);
    }
    let builder = match &r.link {
        Link::Commands(text) => builder.config_text(text),
        Link::Options { preset, up, down } => {
            let mut b = builder;
            if let Some(p) = preset {
                b = b.preset(p);
            }
            if let Some(u) = up {
                b = b.up(u);
            }
            if let Some(d) = down {
                b = b.down(d);
            }
            b
        }
    };
    let shell = builder.start().map_err(RunError::Link)?;
    let ecn = r.flows.iter().any(|f| f.ecn);
    traffic::set_ecn(shell.netns(), ecn).map_err(RunError::Traffic)?;
    let bandwidth: Vec<(u32, u64)> = shell
        .show_pipes()
        .map_err(RunError::Emulator)?
        .pipes
        .iter()
        .map(|p| (p.number, p.link.bandwidth_bps))
        .collect();
    let paths = Paths {
        pipes: bandwidth.iter().map(|b| b.0).collect(),
        queues: shell
            .show_queues()
            .map_err(RunError::Emulator)?
            .queues
            .iter()
            .map(|q| (q.number, q.sched))
            .collect(),
    };
    let plane_lost_before = plane_lost(&shell.observer_stats());
    let sub = shell.events_holding(EventFilter::default(), EVENTS_BUFFER);
    let log_stop = Arc::new(AtomicBool::new(false));
    let from_wall = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (to_log, events) = std::sync::mpsc::channel();
    let drain = {
        let log_stop = Arc::clone(&log_stop);
        std::thread::Builder::new()
            .name("dn-events".into())
            .spawn(move || drain_events(sub, to_log, log_stop))
            .map_err(|source| RunError::Thread {
                what: "the event log",
                source,
            })?
    };
    let logger = {
        let (path, window) = (dir.join("events.jsonl"), r.interval);
        let from_wall = Arc::clone(&from_wall);
        std::thread::Builder::new()
            .name("dn-log".into())
            .spawn(move || log_events(events, path, window, paths, from_wall))
            .map_err(|source| RunError::Thread {
                what: "the event log",
                source,
            })?
    };
    let before = shell.stats().map_err(RunError::Emulator)?;
    let mut after = Err(RunError::Traffic("the run ended before its end".into()));
    let driven = traffic::drive(
        r,
        shell.netns(),
        &outside,
        shell.peer(),
        stop,
        &from_wall,
        &mut || after = shell.stats().map_err(RunError::Emulator),
    );
    // The log takes what is still in the observer's hands, then stops.
    std::thread::sleep(Duration::from_millis(200));
    log_stop.store(true, Ordering::Relaxed);
    let sub_lost = drain
        .join()
        .map_err(|_| RunError::Panicked("the event log's drain"))?;
    let mut log = logger
        .join()
        .map_err(|_| RunError::Panicked("the event log's thread"))??;
    log.lost = sub_lost + plane_lost(&shell.observer_stats()).saturating_sub(plane_lost_before);
    let _ = shell.stop();
    let (time0, m) = driven.map_err(RunError::Traffic)?;
    let after = after?;
    let mut s = summarize(r, &m, &log, &before, &after, &bandwidth, time0);
    s.checks = r.checks.iter().map(|c| c.eval(&s)).collect();
    write_outputs(r, dir, &m, &log, &mut s, options.png)?;
    Ok(s)
}

fn sorted_ms(mut v: Vec<u64>) -> impl Fn(u32) -> Option<f64> {
    v.sort_unstable();
    move |p| nearest_rank(&v, p).map(|ns| ns as f64 / 1e6)
}

fn summarize(
    r: &Run,
    m: &Measured,
    log: &EventLog,
    before: &Report,
    after: &Report,
    bandwidth: &[(u32, u64)],
    time0: u64,
) -> RunSummary {
    let flows: Vec<FlowSummary> = m
        .flows
        .iter()
        .enumerate()
        .map(|(i, s)| summary::flow(r, i, s, m.cc.get(i).map_or("", String::as_str)))
        .collect();
    let pings = m
        .pings
        .iter()
        .map(|p| {
            let rtts: Vec<u64> = p.iter().filter_map(|x| x.1).collect();
            let pct = sorted_ms(rtts);
            PingSummary {
                sent: p.len(),
                lost: p.iter().filter(|x| x.1.is_none()).count(),
                rtt_p50_ms: pct(50),
                rtt_p90_ms: pct(90),
                rtt_p99_ms: pct(99),
            }
        })
        .collect();
    let udp = r
        .udp
        .iter()
        .zip(&m.udp)
        .map(|(u, (series, sent))| UdpSummary {
            direction: u.direction,
            rate_bps: u.rate,
            sent_bytes: *sent,
            received_bytes: series.last().map_or(0, |x| x.1),
        })
        .collect();
    // The log's drops and marks over the counters' span, so they agree.
    let counted = (before.wall_ns, after.wall_ns);
    let marks = log.tallies.marks(counted);
    let paths = log
        .series
        .iter()
        .filter(|(_, s)| s.delivered() > 0 || !s.reasons.is_empty())
        .map(|(n, s)| {
            let bw = bandwidth.iter().find(|b| b.0 == *n).map_or(0, |b| b.1);
            // Windows inside the run's duration.
            let whole = (r.duration / s.window) as usize;
            let bits: u64 = s.windows.iter().take(whole).map(|w| w.delivered_bits).sum();
            let span = s.window * whole as u64;
            let pct = sorted_ms(s.all_delays());
            PathSummary {
                number: *n,
                direction: match n {
                    1 => Some(Direction::Up),
                    2 => Some(Direction::Down),
                    _ => None,
                },
                bandwidth_bps: bw,
                utilisation: (bw > 0 && span > 0)
                    .then(|| bits as f64 * 1e9 / span as f64 / bw as f64),
                delivered_packets: s.delivered(),
                sojourn_p50_ms: pct(50),
                sojourn_p99_ms: pct(99),
                drops: log.tallies.drops(*n, counted),
                marks: marks.get(n).copied().unwrap_or(0),
            }
        })
        .collect();
    let drops = after
        .drops
        .iter()
        .map(|(k, v)| {
            let was = before.drops.iter().find(|b| b.0 == *k).map_or(0, |b| b.1);
            (k.to_string(), v - was.min(*v))
        })
        .filter(|d| d.1 > 0)
        .collect();
    let all_on = summary::all_on(r);
    RunSummary {
        label: r.label.clone(),
        vars: r.vars.clone(),
        duration_s: r.duration as f64 / 1e9,
        interval_s: r.interval as f64 / 1e9,
        seed: r.seed,
        time0_wall_ns: time0,
        time0_events_t_ns: log.start.map(|(t, w)| t + time0.saturating_sub(w)),
        flows,
        jain_all_on: summary::jain_all_on(r, &m.flows),
        all_on_s: all_on.map(|(a, b)| (a as f64 / 1e9, b as f64 / 1e9)),
        pings,
        udp,
        link: LinkSummary {
            paths,
            ecn_marked: after.marked.saturating_sub(before.marked),
            drops,
            marks: marks.into_iter().collect(),
            events_lost: log.lost,
        },
        warnings: m.warnings.clone(),
        checks: Vec::new(),
    }
}

fn create(path: &Path) -> Result<BufWriter<File>, RunError> {
    File::create(path).map(BufWriter::new).map_err(io(path))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// Writes a run's files into `dir`: the flows', pings' and UDP senders'
/// samples, each path's windows, the summary, and the figures.
fn write_outputs(
    r: &Run,
    dir: &Path,
    m: &Measured,
    log: &EventLog,
    s: &mut RunSummary,
    png: bool,
) -> Result<(), RunError> {
    write_flows_csv(dir, m)?;
    write_pings_udp_csv(dir, m)?;
    write_link_csv(dir, log, s)?;
    // A figure that could not be made is a warning of the run's.
    if let Some(e) = write_figures(r, dir, m, log, s, png) {
        s.warnings.push(format!("a figure: {e}"));
    }
    let p = dir.join("summary.json");
    let text = json(s, true, &p)?;
    std::fs::write(&p, text + "\n").map_err(io(&p))?;
    Ok(())
}

/// `flows.csv`: each flow's samples, with the goodput since the last.
fn write_flows_csv(dir: &Path, m: &Measured) -> Result<(), RunError> {
    let p = dir.join("flows.csv");
    let mut w = create(&p)?;
    writeln!(w, "t_s,flow,received_bytes,goodput_bps,srtt_ms,rttvar_ms,cwnd,ssthresh,delivery_rate_bps,retransmits,delivered_ce").map_err(io(&p))?;
    for (i, samples) in m.flows.iter().enumerate() {
        let mut prev: Option<&traffic::FlowSample> = None;
        for x in samples {
            let goodput = prev
                .filter(|p| x.t > p.t)
                .map(|p| x.received.saturating_sub(p.received) as f64 * 8e9 / (x.t - p.t) as f64);
            let i_ = x.info;
            writeln!(
                w,
                "{:.3},{i},{},{},{},{},{},{},{},{},{}",
                x.t as f64 / 1e9,
                x.received,
                opt(goodput.map(|g| g.round())),
                opt(i_.map(|v| f64::from(v.srtt_us) / 1e3)),
                opt(i_.map(|v| f64::from(v.rttvar_us) / 1e3)),
                opt(i_.map(|v| v.cwnd)),
                opt(i_.map(|v| v.ssthresh)),
                opt(i_.map(|v| v.delivery_rate * 8)),
                opt(i_.map(|v| v.total_retrans)),
                opt(i_.map(|v| v.delivered_ce)),
            )
            .map_err(io(&p))?;
            prev = Some(x);
        }
    }
    w.flush().map_err(io(&p))?;
    Ok(())
}

/// `pings.csv` and `udp.csv`, when the run has pings or UDP senders.
fn write_pings_udp_csv(dir: &Path, m: &Measured) -> Result<(), RunError> {
    if !m.pings.is_empty() {
        let p = dir.join("pings.csv");
        let mut w = create(&p)?;
        writeln!(w, "ping,t_s,rtt_ms").map_err(io(&p))?;
        for (i, ps) in m.pings.iter().enumerate() {
            for (t, rtt) in ps {
                writeln!(
                    w,
                    "{i},{:.6},{}",
                    *t as f64 / 1e9,
                    opt(rtt.map(|v| v as f64 / 1e6))
                )
                .map_err(io(&p))?;
            }
        }
        w.flush().map_err(io(&p))?;
    }
    if !m.udp.is_empty() {
        let p = dir.join("udp.csv");
        let mut w = create(&p)?;
        writeln!(w, "udp,t_s,received_bytes").map_err(io(&p))?;
        for (i, (series, _)) in m.udp.iter().enumerate() {
            for (t, b) in series {
                writeln!(w, "{i},{:.3},{b}", *t as f64 / 1e9).map_err(io(&p))?;
            }
        }
        w.flush().map_err(io(&p))?;
    }
    Ok(())
}

/// `link.csv`: each path's windows on the run's clock.
fn write_link_csv(dir: &Path, log: &EventLog, s: &RunSummary) -> Result<(), RunError> {
    let p = dir.join("link.csv");
    let mut w = create(&p)?;
    writeln!(
        w,
        "path,t_s,delivered_bps,sojourn_p95_ms,packets_inside,drops,drops_by_reason"
    )
    .map_err(io(&p))?;
    let offset = |series: &Series| -> f64 {
        match (log.start, s.time0_events_t_ns) {
            (Some(_), Some(t0)) => (series.start as f64 - t0 as f64) / 1e9,
            _ => 0.0,
        }
    };
    for (n, series) in &log.series {
        if series.delivered() == 0 && series.reasons.is_empty() {
            continue;
        }
        let off = offset(series);
        let delays = series.window_delays();
        for (k, win) in series.windows.iter().enumerate() {
            let len = series.window_len(k) as f64;
            let reasons: Vec<String> = series
                .reasons
                .iter()
                .zip(&win.drops)
                .filter(|(_, n)| **n > 0)
                .map(|(r, n)| format!("{r}={n}"))
                .collect();
            writeln!(
                w,
                "{n},{:.3},{:.0},{},{:.2},{},{}",
                off + (k as u64 * series.window) as f64 / 1e9,
                win.delivered_bits as f64 * 1e9 / len,
                opt(delays.get(k).copied().flatten().map(|d| d.p95 as f64 / 1e6)),
                series.mean_inside(k).0,
                win.drops.iter().sum::<u64>(),
                reasons.join(";"),
            )
            .map_err(io(&p))?;
        }
    }
    w.flush().map_err(io(&p))?;
    Ok(())
}

/// The figures: the flows' goodput, cwnd and RTT, and each path's link.
/// A figure that cannot be drawn is said, and the run goes on.
/// Returns the first error of a figure that could not be written.
fn write_figures(
    r: &Run,
    dir: &Path,
    m: &Measured,
    log: &EventLog,
    s: &RunSummary,
    png: bool,
) -> Option<String> {
    let x_max = r.duration as f64 / 1e9;
    // The sender's own numbers (cwnd, srtt) end with its flow: an idle
    // socket's last values would run on as flat lines.
    let per_flow =
        |sender: bool,
         f: &dyn Fn(&traffic::FlowSample, Option<&traffic::FlowSample>) -> Option<f64>| {
            m.flows
                .iter()
                .enumerate()
                .map(|(i, samples)| {
                    let mut prev = None;
                    let end = summary::span(r, i).1.saturating_add(r.interval);
                    let pts = samples
                        .iter()
                        .filter(|x| !sender || x.t <= end)
                        .filter_map(|x| {
                            let v = f(x, prev);
                            prev = Some(x);
                            v.map(|v| (x.t as f64 / 1e9, v))
                        })
                        .collect();
                    (
                        format!("flow {i} ({})", m.cc.get(i).map_or("", String::as_str)),
                        pts,
                    )
                })
                .collect::<Vec<_>>()
        };
    let panels = [
        figure::Panel {
            y_label: "goodput (Mbit/s)".into(),
            lines: per_flow(false, &|x, p| {
                p.filter(|p| x.t > p.t && x.info.is_some()).map(|p| {
                    x.received.saturating_sub(p.received) as f64 * 8e3 / (x.t - p.t) as f64
                })
            }),
        },
        figure::Panel {
            y_label: "cwnd (segments)".into(),
            lines: per_flow(true, &|x, _| x.info.map(|i| f64::from(i.cwnd))),
        },
        figure::Panel {
            y_label: "smoothed RTT (ms)".into(),
            lines: per_flow(true, &|x, _| x.info.map(|i| f64::from(i.srtt_us) / 1e3)),
        },
    ];
    let mut png_error = None;
    if !m.flows.is_empty() {
        let title = format!("{}: the flows", r.label);
        if let Err(e) = figure::write(&dir.join("flows"), &title, &panels, x_max, png) {
            png_error = Some(e);
        }
    }
    for (n, series) in &log.series {
        if series.delivered() == 0 && series.reasons.is_empty() {
            continue;
        }
        let bw = s
            .link
            .paths
            .iter()
            .find(|p| p.number == *n)
            .map_or(0, |p| p.bandwidth_bps);
        let capacity = if bw > 0 {
            Capacity::Rate {
                bps: bw,
                from: format!("bw of path {n}"),
            }
        } else {
            Capacity::Unknown("no bw".into())
        };
        let options = PlotOptions {
            pipe: Some(*n),
            what: vec![
                LinkPanel::Throughput,
                LinkPanel::Delay,
                LinkPanel::Queue,
                LinkPanel::Drops,
            ],
            capacity: None,
            window: series.window,
            title: Some(format!(
                "{}: path {n} ({})",
                r.label,
                if *n == 1 { "up" } else { "down" }
            )),
        };
        for ext in ["svg", "png"].iter().take(if png { 2 } else { 1 }) {
            let out = dir.join(format!("link-{n}.{ext}"));
            if let Err(e) = dummynet_sim::plot::write(series, &capacity, &options, &out) {
                png_error.get_or_insert(e);
            }
        }
    }
    png_error.map(|e| e.to_string())
}

/// A sweep's comparison: `matrix.json` (each run's summary) and one figure
/// per metric, each run's flows averaged into one line. Returns what
/// went wrong with the figures (the comparison stands without them).
pub fn write_matrix(
    out: &Path,
    results: &[RunSummary],
    png: bool,
) -> Result<Vec<String>, RunError> {
    let p = out.join("matrix.json");
    let text = json(&results, true, &p)?;
    std::fs::write(&p, text + "\n").map_err(io(&p))?;
    // Read back each run's flows.csv: the figures need the series.
    let mut per_metric: [Vec<figure::Line>; 3] = Default::default();
    let mut x_max = 0.0f64;
    for s in results {
        x_max = x_max.max(s.duration_s);
        let text =
            std::fs::read_to_string(out.join(&s.label).join("flows.csv")).unwrap_or_default();
        // column of goodput, cwnd, srtt
        for (k, col) in [(0usize, 3usize), (1, 6), (2, 4)] {
            let mut by_t: std::collections::BTreeMap<u64, (f64, u32)> = Default::default();
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split(',').collect();
                let (Some(t), Some(v)) = (
                    f.first().and_then(|t| t.parse::<f64>().ok()),
                    f.get(col).and_then(|v| v.parse::<f64>().ok()),
                ) else {
                    continue;
                };
                let e = by_t.entry((t * 1000.0).round() as u64).or_default();
                e.0 += v;
                e.1 += 1;
            }
            let scale = if k == 0 { 1e-6 } else { 1.0 };
            let pts = by_t
                .into_iter()
                .map(|(t, (sum, n))| (t as f64 / 1000.0, sum / f64::from(n) * scale))
                .collect();
            per_metric[k].push((s.label.clone(), pts));
        }
    }
    let mut warnings = Vec::new();
    let names = [
        ("compare-goodput", "goodput, mean of the flows (Mbit/s)"),
        ("compare-cwnd", "cwnd, mean of the flows (segments)"),
        ("compare-srtt", "smoothed RTT, mean of the flows (ms)"),
    ];
    for ((stem, label), lines) in names.iter().zip(per_metric) {
        let panel = figure::Panel {
            y_label: label.to_string(),
            lines,
        };
        if let Err(e) = figure::write(&out.join(stem), stem, &[panel], x_max, png) {
            warnings.push(format!("{stem}: {e}"));
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop(t_ns: Nanos, pipe: u32, reason: &'static str) -> Event<String> {
        Event::Drop {
            t_ns,
            id: t_ns,
            reason,
            rule: Some(100),
            pipe: Some(pipe),
            queue: None,
            dir: None,
            note: None,
        }
    }

    fn departure(t_ns: Nanos, pipe: u32, ce: bool) -> Event<String> {
        Event::Departure {
            t_ns,
            id: t_ns,
            rule: Some(100),
            pipe: Some(pipe),
            queue: None,
            iface: None,
            ce,
            note: None,
        }
    }

    /// The counters' span is `(before, after]`: an event at `before` was
    /// in the first read, one at `after` in the second.
    #[test]
    fn tallies_count_over_the_counters_span() {
        let mut t = Tallies::default();
        for e in [
            drop(10, 1, "aqm"),
            drop(11, 1, "aqm"),
            drop(12, 1, "queue_full"),
            drop(12, 2, "aqm"),
            departure(13, 1, true),
            departure(14, 1, false),
            departure(20, 2, true),
            drop(21, 1, "aqm"),
        ] {
            t.note(&e);
        }
        assert_eq!(
            t.drops(1, (10, 20)),
            vec![("aqm".to_string(), 1), ("queue_full".to_string(), 1)]
        );
        assert_eq!(t.drops(2, (10, 20)), vec![("aqm".to_string(), 1)]);
        assert_eq!(t.drops(1, (0, 30)).first(), Some(&("aqm".to_string(), 3)));
        assert_eq!(
            t.marks((10, 20)).into_iter().collect::<Vec<_>>(),
            vec![(1, 1), (2, 1)]
        );
        assert_eq!(t.marks((13, 19)).len(), 0);
    }
}
