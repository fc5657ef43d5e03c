//! `dummynet plot`: the graphs mahimahi users know, from an event log.
//!
//! The log is the one `dummynet sim --log` writes (one JSON object per
//! line); `sim --plot` draws the same from the run itself. Panels, stacked
//! on one time axis:
//! - throughput: bits delivered and bits arriving per window, with the
//!   link's capacity when it is known (`--capacity`, or the pipe's `bw` or
//!   `trace` in `--config`);
//! - delay: each packet's time from arrival (at the pipe, with `--pipe`) to
//!   departure, and each window's 95th percentile;
//! - queue: mean packets and bytes inside per window;
//! - drops: drops per window by reason.
//!
//! [`series`] turns lines into per-window numbers (pure, streamed: memory
//! grows with windows and packets in flight, not with lines), [`draw`] draws
//! them. One summary line goes to stdout.

pub mod draw;
pub mod panels;
pub mod series;

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dummynet_engine::impair::trace::{TraceMode, OPPORTUNITY_BYTES};
use dummynet_engine::percentile::nearest_rank;
use dummynet_engine::Nanos;

use series::{Reader, Series};

/// One panel of the picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Panel {
    Throughput,
    Delay,
    Queue,
    Drops,
}

/// What shapes a plot, shared by `dummynet plot` and `sim --plot`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlotOptions {
    /// Only the packets that pipe N let out or dropped; their delay is from
    /// when they reached the pipe. Default: every packet in the log.
    #[arg(long, value_name = "N")]
    pub pipe: Option<u32>,
    /// Panels, top to bottom, sharing the time axis.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "throughput,delay"
    )]
    pub what: Vec<Panel>,
    /// The link's capacity, drawn on the throughput panel (e.g. 10Mbit/s);
    /// it wins over the configuration's.
    #[arg(long, value_name = "RATE", value_parser = crate::gen::parse_rate)]
    pub capacity: Option<u64>,
    /// Width of the windows that throughput, percentiles, queue and drops
    /// are counted over (e.g. 100ms, 1s).
    #[arg(long, value_name = "TIME", default_value = "100ms", value_parser = parse_window)]
    pub window: Nanos,
    /// A title above the panels.
    #[arg(long)]
    pub title: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// The event log (`dummynet sim --log`): one JSON object per line.
    #[arg(value_name = "EVENTS.jsonl")]
    pub log: PathBuf,
    /// The picture: .svg, or .png (which needs a font on this system).
    #[arg(short = 'o', long = "out", value_name = "OUT.svg|OUT.png")]
    pub out: PathBuf,
    /// The configuration the log was made with: the capacity line is the
    /// pipe's `bw` (or its `trace`'s delivery opportunities); that of pipe
    /// N with --pipe, else of the only pipe.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub options: PlotOptions,
}

/// A `--window` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error(transparent)]
    Unit(#[from] crate::gen::UnitError),
    #[error("`{input}`: a window must be longer than 0")]
    Zero { input: String },
}

fn parse_window(s: &str) -> Result<Nanos, WindowError> {
    match crate::gen::parse_duration(s)? {
        0 => Err(WindowError::Zero {
            input: s.to_string(),
        }),
        w => Ok(w),
    }
}

/// Why a plot cannot be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The configuration file could not be read or parsed (its path and
    /// line in the message).
    #[error(transparent)]
    Config(dummynet_dataplane::lang::LoadError),
    /// A command of the configuration at `path` the engine refused.
    #[error("{}:{line}: {message}", path.display())]
    ConfigLine {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: the picture's name must end in .svg or .png", path.display())]
    OutName { path: PathBuf },
    #[error("{option} shapes the plot: give --plot OUT.svg too")]
    Unused { option: &'static str },
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: series::SeriesError,
    },
    /// The log `sim --plot` reads as the run writes it.
    #[error("--plot: the log's {0}")]
    SimLog(#[source] series::SeriesError),
    /// plotters' message; `what` is the title or "the plot".
    #[error("drawing {what}: {message}")]
    Draw { what: String, message: String },
    #[error(
        "a PNG needs a font for its text and this system has none (searched the usual \
         font directories, such as /usr/share/fonts and ~/.local/share/fonts): install \
         one (Debian: apt-get install fonts-dejavu-core), or write .svg, which needs none"
    )]
    NoFont,
    #[error("rendering the plot to PNG: {0}")]
    Render(#[source] resvg::usvg::Error),
    #[error("rendering the plot to PNG: the picture has no area")]
    NoArea,
    #[error("encoding the PNG: {message}")]
    Encode { message: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl PlotError {
    fn draw(what: &str, e: &dyn std::fmt::Display) -> PlotError {
        PlotError::Draw {
            what: what.to_string(),
            message: e.to_string(),
        }
    }
}

/// The capacity line of the throughput panel.
#[derive(Debug, Clone, PartialEq)]
pub enum Capacity {
    /// A constant rate, bit/s, and where it comes from.
    Rate { bps: u64, from: String },
    /// A trace's delivery opportunities, in bits per window.
    Trace { bits: Vec<u64>, from: String },
    /// Why there is no line.
    Unknown(String),
}

impl Capacity {
    /// For the legend.
    pub fn describe(&self) -> String {
        match self {
            Capacity::Rate { from, .. } | Capacity::Trace { from, .. } => from.clone(),
            Capacity::Unknown(why) => why.clone(),
        }
    }

    /// Mean over the log's span, bit/s.
    fn mean_bps(&self, s: &Series) -> Option<f64> {
        match self {
            Capacity::Rate { bps, .. } => Some(*bps as f64),
            Capacity::Trace { bits, .. } if s.span > 0 => {
                Some(bits.iter().sum::<u64>() as f64 * 1e9 / s.span as f64)
            }
            _ => None,
        }
    }
}

pub fn run(args: PlotArgs) -> ExitCode {
    match plot_file(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet plot: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn plot_file(args: &PlotArgs) -> Result<String, PlotError> {
    let config = args
        .config
        .as_deref()
        .map(|path| {
            dummynet_dataplane::lang::load_config(path)
                .map(|c| (path, c))
                .map_err(PlotError::Config)
        })
        .transpose()?;
    plot_log(
        &args.log,
        config.as_ref().map(|(p, c)| (*p, &c[..])),
        &args.options,
        &args.out,
    )
}

/// Draws the event log at `log` to `out`, the capacity line from
/// `config` (named by its path in messages) unless the options give one;
/// the summary line. For `dummynet plot` and `demo --plot`.
pub fn plot_log(
    log: &Path,
    config: Option<(&Path, &[(usize, dummynet_engine::Command)])>,
    o: &PlotOptions,
    out: &Path,
) -> Result<String, PlotError> {
    check_out(out)?;
    let file = File::open(log).map_err(|source| PlotError::Read {
        path: log.to_path_buf(),
        source,
    })?;
    let series =
        series::read(BufReader::new(file), o.pipe, o.window).map_err(|source| PlotError::Log {
            path: log.to_path_buf(),
            source,
        })?;
    let capacity = capacity(o, config, &series)?;
    write(&series, &capacity, o, out)
}

/// Checks `out`'s name before a long run that ends by drawing to it.
pub fn check_name(out: &Path) -> Result<(), PlotError> {
    check_out(out).map(|_| ())
}

/// The capacity line: `--capacity`, else the configuration's pipe.
fn capacity(
    o: &PlotOptions,
    config: Option<(&Path, &[(usize, dummynet_engine::Command)])>,
    series: &Series,
) -> Result<Capacity, PlotError> {
    Ok(match (config, o.capacity) {
        (_, Some(bps)) => Capacity::Rate {
            bps,
            from: format!("--capacity {}", draw::rate(bps as f64)),
        },
        (Some((path, config)), None) => {
            from_config(config, o.pipe, series).map_err(|(line, message)| {
                PlotError::ConfigLine {
                    path: path.to_path_buf(),
                    line,
                    message,
                }
            })?
        }
        (None, None) => Capacity::Unknown("unknown (give --capacity or --config)".into()),
    })
}

/// `sim --plot`: the run's log, read as it was written, drawn to `out`
/// with the capacity of the run's configuration; the summary line.
pub fn sim_plot(
    sink: LogSink,
    config: (&Path, &[(usize, dummynet_engine::Command)]),
    options: &PlotOptions,
    out: &Path,
) -> Result<String, PlotError> {
    let series = sink.finish().map_err(PlotError::SimLog)?;
    let capacity = capacity(options, Some(config), &series)?;
    write(&series, &capacity, options, out)
}

/// For `sim`: the plot options are only for --plot.
pub fn check_unused(options: &PlotOptions) -> Result<(), PlotError> {
    let given = [
        ("--pipe", options.pipe.is_some()),
        ("--capacity", options.capacity.is_some()),
        ("--title", options.title.is_some()),
    ];
    match given.iter().find(|(_, g)| *g) {
        Some((option, _)) => Err(PlotError::Unused { option }),
        None => Ok(()),
    }
}

/// OUT's format from its name, checked before any work.
fn check_out(out: &Path) -> Result<bool, PlotError> {
    match out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        _ => Err(PlotError::OutName {
            path: out.to_path_buf(),
        }),
    }
}

/// Draws `series` to `out` and returns the summary line.
pub fn write(
    series: &Series,
    capacity: &Capacity,
    options: &PlotOptions,
    out: &Path,
) -> Result<String, PlotError> {
    let png = check_out(out)?;
    let plot = draw::Plot {
        series,
        capacity,
        panels: &options.what,
        title: options.title.as_deref(),
        pipe: options.pipe,
    };
    let svg = draw::svg(&plot)?;
    let bytes = if png {
        draw::png(&svg)?
    } else {
        svg.into_bytes()
    };
    File::create(out)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|source| PlotError::Write {
            path: out.to_path_buf(),
            source,
        })?;
    Ok(summary(series, capacity))
}

/// The one-line summary: mean throughput, capacity, delay percentiles and
/// drops.
pub fn summary(s: &Series, capacity: &Capacity) -> String {
    use std::fmt::Write as _;
    let mut line = format!(
        "throughput {} mean over {:.3} s ({} packets)",
        draw::rate(s.mean_bps()),
        s.last_delivery as f64 / 1e9,
        s.delivered()
    );
    match capacity.mean_bps(s) {
        Some(c) => {
            let _ = write!(line, ", capacity {}", draw::rate(c));
        }
        None => line.push_str(", capacity unknown"),
    }
    let delays = s.all_delays();
    let ms = |p: u32| nearest_rank(&delays, p).map_or(0.0, |d| d as f64 / 1e6);
    if delays.is_empty() {
        line.push_str(", delay: none delivered");
    } else {
        let _ = write!(
            line,
            ", delay p50 {:.3} ms p95 {:.3} ms max {:.3} ms",
            ms(50),
            ms(95),
            ms(100)
        );
    }
    let drops = s.drops_by_reason();
    let total: u64 = drops.iter().map(|(_, n)| n).sum();
    let _ = write!(line, ", drops {total}");
    if total > 0 {
        let by: Vec<String> = drops.iter().map(|(r, n)| format!("{r} {n}")).collect();
        let _ = write!(line, " ({})", by.join(", "));
    }
    line
}

/// The capacity of pipe `pipe` (or of the only pipe) as `config` leaves it
/// at time 0, or the line of the command the engine refused. Commands
/// scheduled for later (`at`) are not followed.
pub fn from_config(
    config: &[(usize, dummynet_engine::Command)],
    pipe: Option<u32>,
    s: &Series,
) -> Result<Capacity, (usize, String)> {
    // Only the configuration is read back: the engine carries nothing.
    let engine = dummynet_dataplane::lang::configure_for::<()>(config, 0)?;
    let snap = engine.snapshot();
    let link = match pipe {
        Some(n) => snap.links.iter().find(|l| l.number == n),
        None if snap.links.len() == 1 => snap.links.first(),
        None => {
            return Ok(Capacity::Unknown(format!(
                "not drawn: the configuration has {} pipes (choose one with --pipe)",
                snap.links.len()
            )))
        }
    };
    let Some(link) = link else {
        return Ok(Capacity::Unknown(format!(
            "not drawn: the configuration has no pipe {}",
            pipe.unwrap_or(0)
        )));
    };
    let n = link.number;
    if let Some(trace) = &link.config.trace {
        return Ok(Capacity::Trace {
            bits: trace_bits(&trace.times, trace.mode, s),
            from: format!("pipe {n} trace {}", trace.name),
        });
    }
    Ok(match link.config.bw {
        0 => Capacity::Unknown(format!("none, pipe {n} is unlimited (bw 0)")),
        bps => Capacity::Rate {
            bps,
            from: format!("pipe {n} bw {}", draw::rate(bps as f64)),
        },
    })
}

/// Bits a trace can deliver in each of the series' windows, the trace
/// starting at the log's time 0 (as in sim, where the configuration is
/// applied at the first packet's time).
fn trace_bits(times: &[Nanos], mode: TraceMode, s: &Series) -> Vec<u64> {
    let mut bits = vec![0u64; s.windows.len()];
    let period = times.last().copied().unwrap_or(0);
    if period == 0 {
        return bits;
    }
    let per = u64::from(OPPORTUNITY_BYTES) * 8;
    let mut lap_start: Nanos = 0;
    'laps: while lap_start <= s.span {
        for t in times {
            let at = lap_start.saturating_add(*t);
            if at > s.span {
                break 'laps;
            }
            if let Some(b) = bits.get_mut((at / s.window) as usize) {
                *b += per;
            }
        }
        if mode == TraceMode::Once {
            break;
        }
        lap_start += period;
    }
    bits
}

/// Feeds the lines `sim` writes to its log to a [`Reader`], for `sim
/// --plot`: a `Write` that splits what it is given at newlines.
pub struct LogSink {
    reader: Reader,
    pending: Vec<u8>,
    lines: u64,
    error: Option<series::SeriesError>,
}

impl LogSink {
    pub fn new(options: &PlotOptions) -> LogSink {
        LogSink {
            reader: Reader::new(options.pipe, options.window),
            pending: Vec::new(),
            lines: 0,
            error: None,
        }
    }

    /// The series, or the first line it could not read.
    pub fn finish(self) -> Result<Series, series::SeriesError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.reader.finish()),
        }
    }
}

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.lines += 1;
            if self.error.is_none() {
                let text = String::from_utf8_lossy(&line);
                if let Err(e) = self.reader.line(self.lines, &text) {
                    self.error = Some(e);
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes to two writers (the log file and the plot's reader).
pub struct Tee<A, B>(pub A, pub B);

impl<A: Write, B: Write> Write for Tee<A, B> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(buf)?;
        self.1.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()?;
        self.1.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn series(log: &str, window: Nanos) -> Series {
        series::read(log.as_bytes(), None, window).unwrap()
    }

    #[test]
    fn trace_opportunities_per_window() {
        // Opportunities at 0, 5 and 10 ms, looping every 10 ms (10 ms is
        // both the last of a lap and the first of the next, as in mahimahi).
        let log = "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":1}\n\
                   {\"event\":\"departure\",\"t_ns\":25000000,\"id\":0}\n";
        let s = series(log, 10 * MS);
        let times = [0, 5 * MS, 10 * MS];
        let per = 1504 * 8;
        // [0,10): 0, 5; [10,20): 10, 10, 15; [20,25]: 20, 20, 25.
        assert_eq!(
            trace_bits(&times, TraceMode::Loop, &s),
            vec![2 * per, 3 * per, 3 * per]
        );
        assert_eq!(
            trace_bits(&times, TraceMode::Once, &s),
            vec![2 * per, per, 0]
        );
    }

    #[test]
    fn capacity_from_a_config() {
        let s = series(
            "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":1}\n",
            MS,
        );
        let cfg = |text: &str| dummynet_dataplane::lang::commands(text, None).unwrap();
        let one = cfg("pipe 1 config bw 1Mbit/s delay 5ms\nadd pipe 1 ip from any to any\n");
        assert_eq!(
            from_config(&one, None, &s).unwrap(),
            Capacity::Rate {
                bps: 1_000_000,
                from: "pipe 1 bw 1.000 Mbit/s".into()
            }
        );
        let two = cfg("pipe 1 config bw 1Mbit/s\npipe 2 config bw 3Mbit/s\n");
        assert!(matches!(
            from_config(&two, Some(2), &s).unwrap(),
            Capacity::Rate { bps: 3_000_000, .. }
        ));
        assert!(
            matches!(from_config(&two, None, &s).unwrap(), Capacity::Unknown(w) if w.contains("2 pipes"))
        );
        assert!(
            matches!(from_config(&two, Some(7), &s).unwrap(), Capacity::Unknown(w) if w.contains("no pipe 7"))
        );
        let unlimited = cfg("pipe 4 config delay 10ms\n");
        assert!(
            matches!(from_config(&unlimited, None, &s).unwrap(), Capacity::Unknown(w) if w.contains("unlimited"))
        );
    }

    #[test]
    fn summary_line() {
        let log = "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":1250}\n\
                   {\"event\":\"departure\",\"t_ns\":10000000,\"id\":0,\"pipe\":1}\n\
                   {\"event\":\"arrival\",\"t_ns\":10000000,\"id\":1,\"len\":1250}\n\
                   {\"event\":\"drop\",\"t_ns\":10000000,\"id\":1,\"reason\":\"plr\",\"pipe\":1}\n";
        let s = series(log, 100 * MS);
        let cap = Capacity::Rate {
            bps: 1_000_000,
            from: String::new(),
        };
        assert_eq!(
            summary(&s, &cap),
            "throughput 1.000 Mbit/s mean over 0.010 s (1 packets), capacity 1.000 Mbit/s, \
             delay p50 10.000 ms p95 10.000 ms max 10.000 ms, drops 1 (plr 1)"
        );
    }

    #[test]
    fn log_sink_reads_split_writes() {
        let log = "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":10}\n{\"event\":\"departure\",\"t_ns\":4,\"id\":0}\n";
        let options = PlotOptions {
            pipe: None,
            what: vec![Panel::Throughput],
            capacity: None,
            window: MS,
            title: None,
        };
        let mut sink = LogSink::new(&options);
        for chunk in log.as_bytes().chunks(7) {
            sink.write_all(chunk).unwrap();
        }
        let s = sink.finish().unwrap();
        assert_eq!((s.delivered(), s.all_delays()), (1, vec![4]));
        let mut bad = LogSink::new(&options);
        bad.write_all(b"{\"event\":\"arrival\"}\n").unwrap();
        let e = bad.finish().unwrap_err().to_string();
        assert!(e.contains("line 1"));
    }

    #[test]
    fn out_names() {
        let check_out = |p: &Path| super::check_out(p).map_err(|e| e.to_string());
        assert_eq!(check_out(Path::new("a.svg")), Ok(false));
        assert_eq!(check_out(Path::new("a.PNG")), Ok(true));
        assert!(check_out(Path::new("a.pdf"))
            .unwrap_err()
            .contains(".svg or .png"));
    }
}
