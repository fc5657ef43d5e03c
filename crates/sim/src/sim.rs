//! `dummynet sim`: replay captures through the engine on virtual time.
//!
//! The clock is the captures' own: time zero is the earliest packet's
//! timestamp, each packet enters at its capture time, and the engine is
//! driven exactly to every deadline in between, so departures are exact to
//! the nanosecond and a run is a pure function of (config, captures, seed).
//!
//! Outputs:
//! - OUT.pcap: every delivered frame, in departure order, stamped with its
//!   absolute departure time (capture epoch + virtual time), same link type.
//! - EVENTS.jsonl: one line per arrival, departure and drop. `t_ns` is
//!   virtual time, nanoseconds since the first packet; `id` numbers packets
//!   in arrival order from 0.
//!
//! Frames that are not IP (ARP, LLDP...) never enter the engine: a firewall
//! at the IP layer does not see them, so they leave as they arrived. Frames
//! that claim to be IP but cannot be parsed are dropped as "malformed", as
//! ipfw drops packets whose headers it cannot pull up.
//!
//! A capture meets the rules where its `--pcap` spec says ([`Entry`]): once,
//! `in` or `out` on one interface, as a host's packets do (`run --host`), or
//! twice when it crosses a bridge (`run --bridge`): `in recv RECV`, then,
//! once the rules let it through or a pipe lets it out, `out recv RECV xmit
//! XMIT` at that moment, through the same calls the live bridge makes, so a
//! ruleset means the same in sim and live.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dummynet_dataplane::capture::{self, Capture};
use dummynet_dataplane::events::{dir_str, split_target};
use dummynet_dataplane::lang::{configure_for as configure, load_config};
use dummynet_engine::two_pass::{self, LetGo, OutPass, Passes};
use dummynet_engine::wire::{self, LinkType, WireError};
use dummynet_engine::{
    Direction, DropReason, Engine, IfaceId, Nanos, PacketInfo, Payload, Snapshot, Target, Verdict,
};

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// ipfw / dnctl commands, one per line, applied at time 0.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// A pcap or pcapng capture to replay, entering on IFACE (default sim0)
    /// in direction in (default) or out, one pass through the rules; or
    /// crossing a bridge from RECV to XMIT (IN.pcap@RECV:bridge:XMIT), two
    /// passes: in on RECV, then out on XMIT. Repeat to merge several
    /// captures by timestamp.
    #[arg(long = "pcap", value_name = "IN.pcap[@IFACE[:in|:out]|@RECV:bridge:XMIT]", required = true, value_parser = PcapSpec::parse)]
    pub pcaps: Vec<PcapSpec>,
    /// Write delivered packets here (pcap, nanosecond timestamps).
    #[arg(long, value_name = "OUT.pcap")]
    pub out: Option<PathBuf>,
    /// Write one JSON line per arrival, departure and drop here.
    #[arg(long, value_name = "EVENTS.jsonl")]
    pub log: Option<PathBuf>,
    /// Seed of the engine's random draws, so that a run can be replayed:
    /// rules' `prob`, `plr`, netem's `loss`, `duplicate` and `corrupt`
    /// (which packets, and which bit), `jitter`, `reorder`, `slot`,
    /// profiles' loss and delay draws, and RED's, GRED's and PIE's random
    /// drops.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The addresses rules' `me` and `me6` match (this host's, as the
    /// capture sees it), comma-separated: `--me 10.0.0.1,2001:db8::1`.
    /// Without it, `me` matches nothing.
    #[arg(long, value_name = "ADDR[,ADDR...]", value_delimiter = ',')]
    pub me: Vec<std::net::IpAddr>,
    /// Draw the run as `dummynet plot` would from its log (.svg or .png),
    /// with the capacity of --config's pipe (--pipe N, or the only one).
    #[arg(long, value_name = "OUT.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten, next_help_heading = "Plot (with --plot)")]
    pub plot_options: crate::plot::PlotOptions,
}

/// A `--pcap` argument: a capture and where it meets the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapSpec {
    pub path: PathBuf,
    pub entry: Entry,
}

/// Where a capture's frames meet the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// One pass, as a host sees its own traffic: `in recv IFACE` for a
    /// packet arriving on IFACE, `out xmit IFACE` for one leaving by it.
    Iface { name: String, dir: Direction },
    /// A frame crossing a bridge from `recv` to `xmit`: classified `in recv
    /// RECV`, then `out recv RECV xmit XMIT`, and sent out of `xmit`.
    Bridge { recv: String, xmit: String },
}

/// Why a `--pcap` argument cannot be read; every message quotes `spec`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PcapSpecError {
    #[error("`{spec}`: no file name (expected {PCAP_FORMS})")]
    NoFile { spec: String },
    #[error("`{spec}`: {what} is empty (expected {PCAP_FORMS})")]
    EmptyName { spec: String, what: &'static str },
    #[error("`{spec}`: {what} `{name}` must be letters, digits, `.`, `_` or `-` (expected {PCAP_FORMS})")]
    BadName {
        spec: String,
        what: &'static str,
        name: String,
    },
    #[error("`{spec}`: `bridge` needs the interface the frames leave by after it (expected PATH@RECV:bridge:XMIT)")]
    BridgeWithoutXmit { spec: String },
    #[error("`{spec}`: direction must be `in` or `out`, not `{dir}` (expected {PCAP_FORMS})")]
    Direction { spec: String, dir: String },
    #[error("`{spec}`: a bridge sends a frame out of another port than it came in by, not back out of `{iface}` (expected PATH@RECV:bridge:XMIT)")]
    BridgeLoop { spec: String, iface: String },
    #[error("`{spec}`: `{word}` between the two interfaces must be `bridge` (expected PATH@RECV:bridge:XMIT)")]
    NotBridge { spec: String, word: String },
    #[error("`{spec}`: too many `:` after `@` (expected {PCAP_FORMS})")]
    TooManyColons { spec: String },
}

/// The forms of a `--pcap` argument, for error messages.
const PCAP_FORMS: &str = "PATH, PATH@IFACE, PATH@IFACE:in, PATH@IFACE:out or PATH@RECV:bridge:XMIT";

impl PcapSpec {
    /// `PATH[@IFACE[:in|:out]]` or `PATH@RECV:bridge:XMIT`. The last `@`
    /// splits, so a path may contain `@` as long as an interface follows it;
    /// interface names cannot contain `:`, so `:` splits the rest.
    pub fn parse(s: &str) -> Result<PcapSpec, PcapSpecError> {
        let (path, at) = match s.rsplit_once('@') {
            Some((p, a)) => (p, Some(a)),
            None => (s, None),
        };
        if path.is_empty() {
            return Err(PcapSpecError::NoFile { spec: s.into() });
        }
        let name = |n: &str, what: &'static str| -> Result<String, PcapSpecError> {
            if n.is_empty() {
                return Err(PcapSpecError::EmptyName {
                    spec: s.into(),
                    what,
                });
            }
            if !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            {
                return Err(PcapSpecError::BadName {
                    spec: s.into(),
                    what,
                    name: n.into(),
                });
            }
            Ok(n.to_string())
        };
        let parts: Vec<&str> = at.map_or_else(Vec::new, |a| a.split(':').collect());
        let entry = match parts[..] {
            [] => Entry::Iface {
                name: "sim0".to_string(),
                dir: Direction::In,
            },
            [i] | [i, "in"] => Entry::Iface {
                name: name(i, "the interface name")?,
                dir: Direction::In,
            },
            [i, "out"] => Entry::Iface {
                name: name(i, "the interface name")?,
                dir: Direction::Out,
            },
            [_, "bridge"] => return Err(PcapSpecError::BridgeWithoutXmit { spec: s.into() }),
            [_, d] => {
                return Err(PcapSpecError::Direction {
                    spec: s.into(),
                    dir: d.into(),
                })
            }
            [r, "bridge", x] => {
                let recv = name(r, "the bridge's receiving interface (before `:bridge:`)")?;
                let xmit = name(x, "the bridge's sending interface (after `:bridge:`)")?;
                if recv == xmit {
                    return Err(PcapSpecError::BridgeLoop {
                        spec: s.into(),
                        iface: recv,
                    });
                }
                Entry::Bridge { recv, xmit }
            }
            [_, w, _] => {
                return Err(PcapSpecError::NotBridge {
                    spec: s.into(),
                    word: w.into(),
                })
            }
            _ => return Err(PcapSpecError::TooManyColons { spec: s.into() }),
        };
        Ok(PcapSpec {
            path: PathBuf::from(path),
            entry,
        })
    }
}

/// Why a run cannot be made or finished.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
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
    #[error(transparent)]
    Capture(#[from] capture::CaptureError),
    #[error(
        "{} has link type {linktype} but {} has link type {first_linktype}: OUT keeps one link type, so merge captures of one kind",
        path.display(),
        first.display()
    )]
    LinkTypes {
        path: PathBuf,
        linktype: u32,
        first: PathBuf,
        first_linktype: u32,
    },
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("engine stalled at t={at} ns: a deadline is due but poll returns nothing")]
    Stalled { at: Nanos },
    #[error("departure time overflows the pcap clock")]
    PcapClock,
    #[error("writing OUT: {0}")]
    WriteOut(#[source] capture::CaptureError),
    #[error("writing the log: {0}")]
    Log(#[source] std::io::Error),
}

pub fn run(args: SimArgs) -> ExitCode {
    match run_files(&args) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet sim: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_files(args: &SimArgs) -> Result<String, SimError> {
    if args.plot.is_none() {
        crate::plot::check_unused(&args.plot_options)?;
    }
    let config = load_config(&args.config).map_err(SimError::Config)?;
    let mut engine =
        configure(&config, args.seed).map_err(|(line, message)| SimError::ConfigLine {
            path: args.config.clone(),
            line,
            message,
        })?;
    engine.set_local_addrs(&args.me);
    let mut inputs = Vec::with_capacity(args.pcaps.len());
    for spec in &args.pcaps {
        let capture = capture::read_file(&spec.path)?;
        inputs.push(Input {
            capture,
            entry: spec.entry.clone(),
        });
    }
    let first = inputs.first().map(|i| i.capture.linktype);
    if let Some((spec, input)) = args
        .pcaps
        .iter()
        .zip(&inputs)
        .find(|(_, i)| Some(i.capture.linktype) != first)
    {
        return Err(SimError::LinkTypes {
            path: spec.path.clone(),
            linktype: input.capture.linktype,
            first: args.pcaps[0].path.clone(),
            first_linktype: inputs[0].capture.linktype,
        });
    }
    let mut out = args.out.as_deref().map(create).transpose()?;
    let mut log = args.log.as_deref().map(create).transpose()?;
    // --plot reads the log's lines as they are written, file or not.
    let mut plot = args
        .plot
        .as_ref()
        .map(|_| crate::plot::LogSink::new(&args.plot_options));
    let mut tee = match (&mut log, &mut plot) {
        (Some(f), Some(p)) => Some(Box::new(crate::plot::Tee(f, p)) as Box<dyn Write>),
        (Some(f), None) => Some(Box::new(f) as Box<dyn Write>),
        (None, Some(p)) => Some(Box::new(p) as Box<dyn Write>),
        (None, None) => None,
    };
    let summary = simulate(
        engine,
        inputs,
        out.as_mut().map(|w| w as &mut dyn Write),
        tee.as_mut().map(|w| w as &mut dyn Write),
    )?;
    drop(tee);
    for (w, path) in [(out, &args.out), (log, &args.log)] {
        if let (Some(mut w), Some(path)) = (w, path) {
            w.flush().map_err(|source| SimError::Write {
                path: path.clone(),
                source,
            })?;
        }
    }
    let mut report = summary.report();
    if let (Some(sink), Some(path)) = (plot, &args.plot) {
        let config = (args.config.as_path(), &config[..]);
        let drawn = crate::plot::sim_plot(sink, config, &args.plot_options, path)?;
        report.push_str(&format!("\nplot: {drawn}\n"));
    }
    Ok(report)
}

fn create(path: &Path) -> Result<BufWriter<File>, SimError> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|source| SimError::Create {
            path: path.to_path_buf(),
            source,
        })
}

/// One capture and where it meets the rules.
pub struct Input {
    pub capture: Capture,
    pub entry: Entry,
}

/// What the engine carries: the frame itself, so an AQM can mark ECN in it
/// and OUT.pcap gets the bytes as they left.
pub struct Packet {
    id: u64,
    frame: Vec<u8>,
    ip_offset: usize,
    /// Made by `duplicate`: it keeps its original's id, and the log marks it.
    copy: bool,
    /// The frame starts with an Ethernet header (`mac`, `layer2` rules).
    ethernet: bool,
    /// A bridged frame before its `in` pass has ended: the interface of the
    /// `out` pass still to run (the live bridge's `Carrier::out_pass`).
    out_pass: Option<IfaceId>,
}

impl Payload for Packet {
    fn frame_bytes(&self) -> Option<&[u8]> {
        self.ethernet.then_some(&self.frame[..])
    }
    fn ip_bytes(&self) -> Option<&[u8]> {
        self.frame.get(self.ip_offset..)
    }
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.frame.get_mut(self.ip_offset..)
    }
    fn duplicate(&self) -> Option<Self> {
        Some(Packet {
            id: self.id,
            frame: self.frame.clone(),
            ip_offset: self.ip_offset,
            copy: true,
            ethernet: self.ethernet,
            out_pass: self.out_pass,
        })
    }
}

impl OutPass for Packet {
    fn take_out_pass(&mut self) -> Option<IfaceId> {
        self.out_pass.take()
    }
}

/// The engine's two passes of a bridged frame, with the log's events.
impl Passes<Packet> for Sim<'_> {
    type Error = SimError;

    fn pass(
        &mut self,
        at: Nanos,
        info: PacketInfo,
        packet: Packet,
    ) -> Result<Option<Verdict<Packet>>, SimError> {
        Ok(Some(self.engine.input(at, info, packet)))
    }

    fn forward(
        &mut self,
        at: Nanos,
        _: &PacketInfo,
        packet: &Packet,
        xmit: IfaceId,
        by: LetGo,
    ) -> Result<(), SimError> {
        self.forwarded += 1;
        let (pipe, queue) = split_target(by.target);
        let name = self.iface_name(Some(xmit));
        self.log(&Event::Forward {
            t_ns: at,
            id: packet.id,
            rule: by.rule,
            pipe,
            queue,
            iface: name.as_deref().unwrap_or_default(),
            ce: by.ce,
            note: packet.copy.then_some(DUPLICATE),
        })
    }

    fn leave(
        &mut self,
        at: Nanos,
        info: PacketInfo,
        packet: Packet,
        by: LetGo,
    ) -> Result<(), SimError> {
        let decided = Decided::by(by, &packet);
        self.deliver(at, packet.id, &packet.frame, info.xmit_if, decided, by.ce)
    }

    fn drop(
        &mut self,
        at: Nanos,
        info: PacketInfo,
        packet: Packet,
        reason: DropReason,
        by: LetGo,
    ) -> Result<(), SimError> {
        let decided = Decided::by(by, &packet);
        self.dropped(at, packet.id, reason, Some(info.dir), decided)
    }
}

/// The log's note on a copy made by `duplicate`.
const DUPLICATE: &str = dummynet_dataplane::events::DUPLICATE;

/// One line of the log: the schema the live daemon's `--log` shares.
type Event<'a> = dummynet_dataplane::events::Event<&'a str>;

/// Reason name for frames that never reached the engine.
pub const MALFORMED: &str = "malformed";

#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Capture time of virtual time zero, ns since the epoch.
    pub epoch: Nanos,
    pub arrived: u64,
    /// Delivered by the engine, plus passed-through non-IP frames.
    pub delivered: u64,
    pub not_ip: u64,
    /// Count per reason, in [`DropReason::ALL`] order then `malformed`; zeros omitted.
    pub drops: Vec<(&'static str, u64)>,
    pub inside: u64,
    /// Bridged frames (copies included) whose `in` pass let them through,
    /// so that they ran their `out` pass; each is still counted once, as
    /// delivered, dropped or inside.
    pub forwarded: u64,
    /// Copies `duplicate` made: each also counts as delivered or dropped.
    pub duplicated: u64,
    /// Packets `corrupt` flipped a bit in.
    pub corrupted: u64,
    /// Scheduled commands (`at` lines) applied and refused, and the last refusal.
    pub schedule: dummynet_engine::ScheduleStats,
    /// Departure − arrival over the original packets the engine delivered.
    pub delay: Option<Delays>,
    pub snapshot: Snapshot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delays {
    pub min: Nanos,
    pub max: Nanos,
    pub sum: u128,
    pub count: u64,
}

impl Delays {
    fn add(d: Option<Delays>, x: Nanos) -> Delays {
        match d {
            None => Delays {
                min: x,
                max: x,
                sum: u128::from(x),
                count: 1,
            },
            Some(d) => Delays {
                min: d.min.min(x),
                max: d.max.max(x),
                sum: d.sum + u128::from(x),
                count: d.count + 1,
            },
        }
    }

    fn mean(&self) -> Nanos {
        u64::try_from(self.sum / u128::from(self.count.max(1))).unwrap_or(Nanos::MAX)
    }
}

impl Summary {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }

    pub fn report(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "packets in:    {}", self.arrived);
        let _ = writeln!(
            s,
            "delivered:     {} ({} not IP, passed through)",
            self.delivered, self.not_ip
        );
        let _ = writeln!(s, "dropped:       {}", self.dropped());
        for (reason, n) in &self.drops {
            let _ = writeln!(s, "  {:<12} {n}", format!("{reason}:"));
        }
        let _ = writeln!(s, "still inside:  {}", self.inside);
        if self.forwarded > 0 {
            let _ = writeln!(
                s,
                "out passes:    {} (bridged frames the in pass let through)",
                self.forwarded
            );
        }
        if self.duplicated > 0 {
            let _ = writeln!(
                s,
                "duplicated:    {} (in delivered and dropped)",
                self.duplicated
            );
        }
        if self.corrupted > 0 {
            let _ = writeln!(s, "corrupted:     {}", self.corrupted);
        }
        let sc = &self.schedule;
        if sc.applied + sc.failed + sc.cancelled > 0 || sc.pending > 0 {
            let _ = writeln!(
                s,
                "scheduled:     {} applied, {} refused, {} pending, {} cancelled",
                sc.applied, sc.failed, sc.pending, sc.cancelled
            );
            if let Some((at, why)) = &sc.last_error {
                let _ = writeln!(s, "  refused at {} ms: {why}", ms(*at));
            }
        }
        match self.delay {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "delay (ms):    mean {}  min {}  max {}",
                    ms(d.mean()),
                    ms(d.min),
                    ms(d.max)
                );
            }
            None => {
                let _ = writeln!(s, "delay (ms):    no packet delivered through the engine");
            }
        }
        let _ = writeln!(s, "time zero:     capture time {} s", secs(self.epoch));
        s.push('\n');
        s.push_str(&dummynet_dataplane::lang::final_state(&self.snapshot));
        s
    }
}

/// Exact decimal milliseconds, so reports compare byte for byte.
fn ms(ns: Nanos) -> String {
    format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000)
}

fn secs(ns: Nanos) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Runs the captures through a configured engine.
pub fn simulate<'w>(
    mut engine: Engine<Packet>,
    inputs: Vec<Input>,
    out: Option<&'w mut dyn Write>,
    log: Option<&'w mut dyn Write>,
) -> Result<Summary, SimError> {
    let linktype = inputs.first().map_or(1, |i| i.capture.linktype);
    let out = out.map(|w| capture::Writer::new(w, linktype)).transpose()?;
    let ports: Vec<Port> = inputs
        .iter()
        .map(|i| Port::new(&mut engine, i.capture.link, &i.entry))
        .collect();
    if ports.iter().any(|p| p.out_pass.is_some()) {
        // What `run --bridge` says of the same rules.
        let rules = engine.undirected_pipe_rules();
        if !rules.is_empty() {
            eprintln!(
                "dummynet sim: warning: {}",
                dummynet_dataplane::bridge::both_passes_warning(&rules)
            );
        }
    }

    // Stable: equal timestamps keep input order, then file order.
    let mut frames: Vec<(usize, capture::Frame)> = Vec::new();
    for (k, input) in inputs.into_iter().enumerate() {
        frames.extend(input.capture.frames.into_iter().map(|f| (k, f)));
    }
    frames.sort_by_key(|(_, f)| f.ts);
    let epoch = frames.first().map_or(0, |(_, f)| f.ts);

    let mut sim = Sim {
        engine,
        epoch,
        arrivals: Vec::with_capacity(frames.len()),
        out,
        log,
        now: 0,
        delivered: 0,
        not_ip: 0,
        malformed: 0,
        forwarded: 0,
        delay: None,
    };
    for (k, frame) in frames {
        sim.arrive(&ports[k], frame)?;
    }
    sim.drain(Nanos::MAX)?;
    Ok(sim.finish())
}

/// Where one input's frames meet the engine: the first pass's direction and
/// interfaces, and for a bridge the interface of the second.
struct Port {
    link: LinkType,
    name: String,
    dir: Direction,
    recv_if: Option<IfaceId>,
    xmit_if: Option<IfaceId>,
    /// A bridge's sending port: its `out` pass, and where it leaves.
    out_pass: Option<IfaceId>,
    bridge_to: Option<String>,
}

impl Port {
    fn new(engine: &mut Engine<Packet>, link: LinkType, entry: &Entry) -> Port {
        match entry {
            Entry::Iface { name, dir } => {
                let id = engine.iface(name);
                let (recv_if, xmit_if) = match dir {
                    Direction::In => (Some(id), None),
                    Direction::Out => (None, Some(id)),
                };
                Port {
                    link,
                    name: name.clone(),
                    dir: *dir,
                    recv_if,
                    xmit_if,
                    out_pass: None,
                    bridge_to: None,
                }
            }
            // As the live bridge reads a frame: `in`, received on `recv`,
            // where it will leave not yet known to the rules.
            Entry::Bridge { recv, xmit } => Port {
                link,
                name: recv.clone(),
                dir: Direction::In,
                recv_if: Some(engine.iface(recv)),
                xmit_if: None,
                out_pass: Some(engine.iface(xmit)),
                bridge_to: Some(xmit.clone()),
            },
        }
    }

    /// The interface a frame that never meets the rules leaves by.
    fn leaves_by(&self) -> Option<IfaceId> {
        self.out_pass.or(self.xmit_if)
    }
}

struct Sim<'w> {
    engine: Engine<Packet>,
    epoch: Nanos,
    /// Arrival time and wire length of each packet, by id.
    arrivals: Vec<(Nanos, u32)>,
    out: Option<capture::Writer<&'w mut dyn Write>>,
    log: Option<&'w mut dyn Write>,
    /// The latest time handed to the engine; it never goes back.
    now: Nanos,
    delivered: u64,
    not_ip: u64,
    malformed: u64,
    forwarded: u64,
    delay: Option<Delays>,
}

/// The rule, and the pipe or queue, that last decided a packet's fate,
/// and the log's note on it.
#[derive(Clone, Copy)]
struct Decided<'a> {
    rule: Option<u16>,
    target: Option<Target>,
    note: Option<&'a str>,
}

impl Decided<'static> {
    /// What let `packet` go, for the log (a copy's note included).
    fn by(by: LetGo, packet: &Packet) -> Self {
        Decided {
            rule: by.rule,
            target: by.target,
            note: packet.copy.then_some(DUPLICATE),
        }
    }
}

impl Sim<'_> {
    fn arrive(&mut self, port: &Port, frame: capture::Frame) -> Result<(), SimError> {
        let t = frame.ts - self.epoch;
        self.drain(t)?;
        self.now = self.now.max(t);
        let id = self.arrivals.len() as u64;
        self.arrivals.push((t, frame.orig_len));
        let parsed = wire::parse(port.link, &frame.data);
        let len = match &parsed {
            Ok(p) => p.len,
            Err(_) => u32::try_from(frame.data.len()).unwrap_or(u32::MAX),
        };
        self.log(&Event::Arrival {
            t_ns: t,
            id,
            len,
            iface: &port.name,
            dir: dir_str(port.dir),
            bridge_to: port.bridge_to.as_deref(),
        })?;
        let p = match parsed {
            Ok(p) => p,
            Err(WireError::NotIp { ethertype }) => {
                self.not_ip += 1;
                let note = format!("not IP (ethertype {ethertype:#06x}): passed through");
                let by = Decided {
                    rule: None,
                    target: None,
                    note: Some(&note),
                };
                return self.deliver(t, id, &frame.data, port.leaves_by(), by, false);
            }
            Err(e) => {
                self.malformed += 1;
                let note = e.to_string();
                return self.log(&Event::Drop {
                    t_ns: t,
                    id,
                    reason: MALFORMED,
                    rule: None,
                    pipe: None,
                    queue: None,
                    dir: None,
                    note: Some(&note),
                });
            }
        };
        let info = PacketInfo {
            len: p.len,
            key: p.key,
            dir: port.dir,
            recv_if: port.recv_if,
            xmit_if: port.xmit_if,
        };
        let packet = Packet {
            id,
            frame: frame.data,
            ip_offset: p.ip_offset,
            copy: false,
            ethernet: port.link == LinkType::Ethernet,
            out_pass: port.out_pass,
        };
        self.input(t, info, packet)
    }

    /// One pass through the rules at `at`, and whatever it settles at once
    /// (a bridged frame's `out` pass, as the live data plane runs it).
    fn input(&mut self, at: Nanos, info: PacketInfo, packet: Packet) -> Result<(), SimError> {
        let verdict = self.engine.input(at, info, packet);
        two_pass::settle(self, at, info, verdict).map(drop)
    }

    fn iface_name(&self, id: Option<IfaceId>) -> Option<String> {
        id.and_then(|i| self.engine.iface_name(i))
            .map(str::to_string)
    }

    /// Runs the engine through every deadline up to `until`, in time order.
    /// The final drain (`until` = MAX) follows packets only: a repeating
    /// schedule would otherwise keep the run going forever.
    fn drain(&mut self, until: Nanos) -> Result<(), SimError> {
        let next = |e: &Engine<Packet>| {
            if until == Nanos::MAX {
                e.next_packet_deadline()
            } else {
                e.next_deadline()
            }
        };
        while let Some(d) = next(&self.engine) {
            if d > until {
                break;
            }
            let now = d.max(self.now);
            self.now = now;
            let mut progressed = false;
            while let Some(o) = self.engine.poll(now) {
                progressed = true;
                match o.drop {
                    // Driven to every deadline, the engine hands each packet
                    // over at its own time (`o.at` = `now`), where a bridged
                    // frame's `out` pass starts, as live starts it at the
                    // poll that releases the frame.
                    None => {
                        let by = LetGo {
                            rule: o.rule,
                            target: o.target,
                            ce: o.marked,
                        };
                        two_pass::released(self, o.at, o.info, o.payload, by)?;
                    }
                    Some(reason) => {
                        let note = o.payload.copy.then_some(DUPLICATE);
                        let by = Decided {
                            rule: o.rule,
                            target: o.target,
                            note,
                        };
                        self.dropped(o.at, o.payload.id, reason, Some(o.info.dir), by)?
                    }
                }
            }
            // A deadline that poll leaves in place would spin forever.
            if !progressed && self.engine.next_deadline().is_some_and(|n| n <= now) {
                return Err(SimError::Stalled { at: now });
            }
        }
        Ok(())
    }

    fn deliver(
        &mut self,
        at: Nanos,
        id: u64,
        frame: &[u8],
        leaves_by: Option<IfaceId>,
        by: Decided,
        ce: bool,
    ) -> Result<(), SimError> {
        let Decided { rule, target, note } = by;
        self.delivered += 1;
        let (arrived, orig_len) = self.arrivals.get(id as usize).copied().unwrap_or((at, 0));
        // A copy's delay is its original's; the summary's delays are over
        // originals only.
        if note.is_none() {
            self.delay = Some(Delays::add(self.delay, at.saturating_sub(arrived)));
        }
        if let Some(out) = &mut self.out {
            let ts = self.epoch.checked_add(at).ok_or(SimError::PcapClock)?;
            out.write(ts, orig_len, frame).map_err(SimError::WriteOut)?;
        }
        let (pipe, queue) = split_target(target);
        let name = self.iface_name(leaves_by);
        self.log(&Event::Departure {
            t_ns: at,
            id,
            rule,
            pipe,
            queue,
            iface: name.as_deref(),
            ce,
            note,
        })
    }

    fn dropped(
        &mut self,
        at: Nanos,
        id: u64,
        reason: DropReason,
        dir: Option<Direction>,
        by: Decided,
    ) -> Result<(), SimError> {
        let Decided { rule, target, note } = by;
        let (pipe, queue) = split_target(target);
        self.log(&Event::Drop {
            t_ns: at,
            id,
            reason: reason.as_str(),
            rule,
            pipe,
            queue,
            dir: dir.map(dir_str),
            note,
        })
    }

    fn log(&mut self, e: &Event) -> Result<(), SimError> {
        if let Some(w) = &mut self.log {
            serde_json::to_writer(&mut *w, e)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .map_err(SimError::Log)?;
        }
        Ok(())
    }

    fn finish(self) -> Summary {
        let totals = self.engine.totals();
        let drops: Vec<(&'static str, u64)> = DropReason::ALL
            .iter()
            .map(|r| (r.as_str(), totals.drops_for(*r)))
            .chain([(MALFORMED, self.malformed)])
            .filter(|(_, n)| *n > 0)
            .collect();
        Summary {
            epoch: self.epoch,
            arrived: self.arrivals.len() as u64,
            delivered: self.delivered,
            not_ip: self.not_ip,
            drops,
            inside: totals.inside,
            forwarded: self.forwarded,
            duplicated: totals.duplicated,
            corrupted: totals.corrupted,
            schedule: self.engine.schedule_stats(),
            delay: self.delay,
            snapshot: self.engine.snapshot(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_dataplane::capture::Frame;
    use dummynet_engine::config::{Action, LinkConfig, PipeConfig, QueueLimit, RuleSpec};
    use dummynet_engine::time::NS_PER_MS;
    use dummynet_engine::Command;

    #[test]
    fn pcap_specs() {
        let p = |s: &str| PcapSpec::parse(s);
        let iface = |name: &str, dir| Entry::Iface {
            name: name.into(),
            dir,
        };
        assert_eq!(
            p("a.pcap").unwrap(),
            PcapSpec {
                path: "a.pcap".into(),
                entry: iface("sim0", Direction::In),
            }
        );
        assert_eq!(p("a.pcap@em0").unwrap().entry, iface("em0", Direction::In));
        assert_eq!(
            p("a.pcap@em0:in").unwrap().entry,
            iface("em0", Direction::In)
        );
        assert_eq!(
            p("a.pcap@em0:out").unwrap().entry,
            iface("em0", Direction::Out)
        );
        assert_eq!(
            p("me@host/a.pcap@vlan.10:in").unwrap().path,
            PathBuf::from("me@host/a.pcap")
        );
        assert_eq!(
            p("me@host/a.pcap@eth0:bridge:eth1").unwrap(),
            PcapSpec {
                path: "me@host/a.pcap".into(),
                entry: Entry::Bridge {
                    recv: "eth0".into(),
                    xmit: "eth1".into()
                },
            }
        );
        // Each bad spec, and what its error must name.
        for (bad, says) in [
            ("", "no file name"),
            ("@em0", "no file name"),
            ("@eth0:bridge:eth1", "no file name"),
            ("a.pcap@", "interface name is empty"),
            ("a.pcap@:in", "interface name is empty"),
            ("a.pcap@em0:both", "not `both`"),
            ("a.pcap@e m0", "`e m0` must be"),
            (
                "a.pcap@eth0:bridge:",
                "sending interface (after `:bridge:`) is empty",
            ),
            (
                "a.pcap@:bridge:eth1",
                "receiving interface (before `:bridge:`) is empty",
            ),
            ("a.pcap@eth0:bridge:e/1", "`e/1` must be"),
            (
                "a.pcap@eth0:brdge:eth1",
                "`brdge` between the two interfaces must be `bridge`",
            ),
            (
                "a.pcap@eth0:bridge",
                "needs the interface the frames leave by",
            ),
            ("a.pcap@eth0:bridge:eth0", "not back out of `eth0`"),
            ("a.pcap@eth0:bridge:eth1:out", "too many `:`"),
        ] {
            match p(bad).map_err(|e| e.to_string()) {
                Ok(spec) => panic!("{bad:?} was taken as {spec:?}"),
                Err(e) => assert!(
                    e.contains(says) && e.contains(&format!("`{bad}`")),
                    "{bad:?}: {e}"
                ),
            }
        }
    }

    fn config() -> Vec<(usize, Command)> {
        let pipe = PipeConfig {
            link: LinkConfig {
                bw: 1_000_000,
                delay: 5 * NS_PER_MS,
                ..LinkConfig::default()
            },
            flowset: dummynet_engine::config::FlowsetConfig {
                limit: QueueLimit::Slots(3),
                ..Default::default()
            },
            sched: None,
        };
        vec![
            (1, Command::ConfigPipe(1, pipe)),
            (
                2,
                Command::AddRule(RuleSpec {
                    number: Some(100),
                    action: Action::Pipe(1),
                    prob: None,
                    extra: Default::default(),
                    body: vec![],
                }),
            ),
        ]
    }

    proptest::proptest! {
        /// Whatever the frames, sim does not panic and accounts for every
        /// one: bridged or not, each arrives once and ends once, delivered
        /// or dropped, whatever passes it went through.
        #[test]
        fn arbitrary_frames_are_conserved(
            frames in proptest::collection::vec(
                (0u64..50_000_000, proptest::collection::vec(proptest::num::u8::ANY, 0..80)),
                0..40,
            ),
            raw in proptest::bool::ANY,
            bridged in proptest::bool::ANY,
        ) {
            let frames: Vec<Frame> = frames
                .into_iter()
                .map(|(ts, mut data)| {
                    // Half the time, make it look like IPv4 so it gets deeper.
                    if ts % 2 == 0 {
                        if raw { if let Some(b) = data.first_mut() { *b = 0x45 } }
                        else if data.len() > 14 { data[12] = 8; data[13] = 0; data[14] = 0x45; }
                    }
                    Frame { ts, orig_len: data.len() as u32, data }
                })
                .collect();
            let n = frames.len() as u64;
            let (linktype, link) = if raw { (101, LinkType::RawIp) } else { (1, LinkType::Ethernet) };
            let entry = if bridged {
                Entry::Bridge { recv: "eth0".into(), xmit: "eth1".into() }
            } else {
                Entry::Iface { name: "sim0".into(), dir: Direction::In }
            };
            let input = Input { capture: Capture { linktype, link, frames }, entry };
            let (mut out, mut log) = (Vec::new(), Vec::new());
            let s = simulate(configure(&config(), 7).unwrap(), vec![input], Some(&mut out), Some(&mut log)).unwrap();
            proptest::prop_assert_eq!(s.arrived, n);
            proptest::prop_assert_eq!(s.delivered + s.dropped() + s.inside, n);
            proptest::prop_assert_eq!(s.inside, 0);
            if !bridged {
                proptest::prop_assert_eq!(s.forwarded, 0);
            }
            let lines = String::from_utf8(log).unwrap();
            let mut ends = vec![0u32; n as usize];
            let mut forwards = 0;
            for line in lines.lines() {
                let e: serde_json::Value = serde_json::from_str(line).unwrap();
                let id = e["id"].as_u64().unwrap() as usize;
                match e["event"].as_str().unwrap() {
                    "departure" | "drop" => ends[id] += 1,
                    "forward" => forwards += 1,
                    _ => {}
                }
            }
            proptest::prop_assert!(ends.iter().all(|k| *k == 1), "{lines}");
            proptest::prop_assert_eq!(forwards, s.forwarded);
            proptest::prop_assert_eq!(lines.lines().count() as u64, 2 * n + s.forwarded);
        }
    }
}
