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

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dummynet_engine::wire::{self, LinkType, WireError};
use dummynet_engine::{
    Command, Direction, DropReason, Engine, Nanos, PacketInfo, Payload, Snapshot, Target, Verdict,
};
use serde::Serialize;

use crate::capture::{self, Capture};

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// ipfw / dnctl commands, one per line, applied at time 0.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// A pcap or pcapng capture to replay, entering on IFACE (default sim0)
    /// in direction in (default) or out. Repeat to merge several captures by
    /// timestamp.
    #[arg(long = "pcap", value_name = "IN.pcap[@IFACE[:in|:out]]", required = true, value_parser = PcapSpec::parse)]
    pub pcaps: Vec<PcapSpec>,
    /// Write delivered packets here (pcap, nanosecond timestamps).
    #[arg(long, value_name = "OUT.pcap")]
    pub out: Option<PathBuf>,
    /// Write one JSON line per arrival, departure and drop here.
    #[arg(long, value_name = "EVENTS.jsonl")]
    pub log: Option<PathBuf>,
    /// Seed of the engine's random numbers (plr, prob, profiles).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Where a capture enters the firewall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapSpec {
    pub path: PathBuf,
    pub iface: String,
    pub dir: Direction,
}

impl PcapSpec {
    /// `PATH[@IFACE[:in|:out]]`. The last `@` splits, so a path may contain `@`
    /// as long as an interface follows it.
    pub fn parse(s: &str) -> Result<PcapSpec, String> {
        let (path, at) = match s.rsplit_once('@') {
            Some((p, a)) => (p, Some(a)),
            None => (s, None),
        };
        if path.is_empty() {
            return Err(format!(
                "`{s}`: no file name (expected PATH[@IFACE[:in|:out]])"
            ));
        }
        let (iface, dir) = match at {
            None => ("sim0", Direction::In),
            Some(a) => match a.rsplit_once(':') {
                None => (a, Direction::In),
                Some((i, "in")) => (i, Direction::In),
                Some((i, "out")) => (i, Direction::Out),
                Some((_, d)) => {
                    return Err(format!("`{s}`: direction must be `in` or `out`, not `{d}`"))
                }
            },
        };
        if iface.is_empty()
            || !iface
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(format!(
                "`{s}`: interface name `{iface}` must be letters, digits, `.`, `_` or `-` (expected PATH[@IFACE[:in|:out]])"
            ));
        }
        Ok(PcapSpec {
            path: PathBuf::from(path),
            iface: iface.to_string(),
            dir,
        })
    }
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

fn run_files(args: &SimArgs) -> Result<String, String> {
    let config = load_config(&args.config)?;
    let engine = configure(&config, args.seed)
        .map_err(|(line, e)| format!("{}:{line}: {e}", args.config.display()))?;
    let mut inputs = Vec::with_capacity(args.pcaps.len());
    for spec in &args.pcaps {
        let capture = capture::read_file(&spec.path)?;
        inputs.push(Input {
            capture,
            iface: spec.iface.clone(),
            dir: spec.dir,
        });
    }
    let first = inputs.first().map(|i| i.capture.linktype);
    if let Some((spec, input)) = args
        .pcaps
        .iter()
        .zip(&inputs)
        .find(|(_, i)| Some(i.capture.linktype) != first)
    {
        return Err(format!(
            "{} has link type {} but {} has link type {}: OUT keeps one link type, so merge captures of one kind",
            spec.path.display(),
            input.capture.linktype,
            args.pcaps[0].path.display(),
            inputs[0].capture.linktype
        ));
    }
    let mut out = args.out.as_deref().map(create).transpose()?;
    let mut log = args.log.as_deref().map(create).transpose()?;
    let summary = simulate(
        engine,
        inputs,
        out.as_mut().map(|w| w as &mut dyn Write),
        log.as_mut().map(|w| w as &mut dyn Write),
    )?;
    for (w, path) in [(out, &args.out), (log, &args.log)] {
        if let (Some(mut w), Some(path)) = (w, path) {
            w.flush()
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(summary.report())
}

fn create(path: &Path) -> Result<BufWriter<File>, String> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// The configuration's commands, or an error naming the file and line.
pub fn load_config(path: &Path) -> Result<Vec<(usize, Command)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    crate::lang::commands(&text, path.parent())
        .map_err(|(line, e)| format!("{}:{line}: {e}", path.display()))
}

/// One capture and where it enters.
pub struct Input {
    pub capture: Capture,
    pub iface: String,
    pub dir: Direction,
}

/// What the engine carries: the frame itself, so an AQM can mark ECN in it
/// and OUT.pcap gets the bytes as they left.
pub struct Packet {
    id: u64,
    frame: Vec<u8>,
    ip_offset: usize,
    /// Made by `duplicate`: it keeps its original's id, and the log marks it.
    copy: bool,
}

impl Payload for Packet {
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
        })
    }
}

/// The log's note on a copy made by `duplicate`.
const DUPLICATE: &str = "duplicate";

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
enum Event<'a> {
    Arrival {
        t_ns: Nanos,
        id: u64,
        len: u32,
        iface: &'a str,
        dir: &'static str,
    },
    Departure {
        t_ns: Nanos,
        id: u64,
        rule: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pipe: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        queue: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<&'a str>,
    },
    Drop {
        t_ns: Nanos,
        id: u64,
        reason: &'a str,
        rule: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pipe: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        queue: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<&'a str>,
    },
}

fn split_target(t: Option<Target>) -> (Option<u32>, Option<u32>) {
    match t {
        Some(Target::Pipe(n)) => (Some(n), None),
        Some(Target::Queue(n)) => (None, Some(n)),
        None => (None, None),
    }
}

fn dir_str(d: Direction) -> &'static str {
    match d {
        Direction::In => "in",
        Direction::Out => "out",
    }
}

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
        s.push_str(&crate::lang::final_state(&self.snapshot));
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

/// An engine with the configuration applied at time 0, or the line of the
/// first command it refused and why.
pub fn configure<P: dummynet_engine::Payload>(
    config: &[(usize, Command)],
    seed: u64,
) -> Result<Engine<P>, (usize, String)> {
    let mut engine = Engine::new(seed);
    for (line, cmd) in config {
        engine
            .apply(0, cmd.clone())
            .map_err(|e| (*line, e.to_string()))?;
        for note in engine.take_notes() {
            eprintln!("dummynet: config line {line}: warning: {note}");
        }
    }
    Ok(engine)
}

/// Runs the captures through a configured engine.
pub fn simulate<'w>(
    mut engine: Engine<Packet>,
    inputs: Vec<Input>,
    out: Option<&'w mut dyn Write>,
    log: Option<&'w mut dyn Write>,
) -> Result<Summary, String> {
    let linktype = inputs.first().map_or(1, |i| i.capture.linktype);
    let out = out.map(|w| capture::Writer::new(w, linktype)).transpose()?;
    let ports: Vec<Port> = inputs
        .iter()
        .map(|i| Port {
            link: i.capture.link,
            iface: engine.iface(&i.iface),
            name: i.iface.clone(),
            dir: i.dir,
        })
        .collect();

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
        delay: None,
    };
    for (k, frame) in frames {
        sim.arrive(&ports[k], frame)?;
    }
    sim.drain(Nanos::MAX)?;
    Ok(sim.finish())
}

struct Port {
    link: LinkType,
    iface: dummynet_engine::IfaceId,
    name: String,
    dir: Direction,
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
    delay: Option<Delays>,
}

impl Sim<'_> {
    fn arrive(&mut self, port: &Port, frame: capture::Frame) -> Result<(), String> {
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
        })?;
        let p = match parsed {
            Ok(p) => p,
            Err(WireError::NotIp { ethertype }) => {
                self.not_ip += 1;
                let note = format!("not IP (ethertype {ethertype:#06x}): passed through");
                return self.deliver(t, id, &frame.data, None, None, Some(&note));
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
                    note: Some(&note),
                });
            }
        };
        let (recv_if, xmit_if) = match port.dir {
            Direction::In => (Some(port.iface), None),
            Direction::Out => (None, Some(port.iface)),
        };
        let info = PacketInfo {
            len: p.len,
            key: p.key,
            dir: port.dir,
            recv_if,
            xmit_if,
        };
        let packet = Packet {
            id,
            frame: frame.data,
            ip_offset: p.ip_offset,
            copy: false,
        };
        match self.engine.input(t, info, packet) {
            Verdict::Pass { payload, rule } => {
                self.deliver(t, id, &payload.frame, Some(rule), None, None)
            }
            Verdict::Drop {
                payload,
                reason,
                rule,
                target,
            } => self.dropped(t, payload.id, reason, rule, target, None),
            Verdict::Queued { .. } => Ok(()),
        }
    }

    /// Runs the engine through every deadline up to `until`, in time order.
    /// The final drain (`until` = MAX) follows packets only: a repeating
    /// schedule would otherwise keep the run going forever.
    fn drain(&mut self, until: Nanos) -> Result<(), String> {
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
                // A copy's delay is its original's; the summary's delays are
                // over originals only.
                let note = o.payload.copy.then_some(DUPLICATE);
                let (at, id) = (o.at, o.payload.id);
                match o.drop {
                    None => self.deliver(at, id, &o.payload.frame, o.rule, o.target, note)?,
                    Some(reason) => self.dropped(at, id, reason, o.rule, o.target, note)?,
                }
            }
            // A deadline that poll leaves in place would spin forever.
            if !progressed && self.engine.next_deadline().is_some_and(|n| n <= now) {
                return Err(format!(
                    "engine stalled at t={now} ns: a deadline is due but poll returns nothing"
                ));
            }
        }
        Ok(())
    }

    fn deliver(
        &mut self,
        at: Nanos,
        id: u64,
        frame: &[u8],
        rule: Option<u16>,
        target: Option<Target>,
        note: Option<&str>,
    ) -> Result<(), String> {
        self.delivered += 1;
        let (arrived, orig_len) = self.arrivals.get(id as usize).copied().unwrap_or((at, 0));
        if note.is_none() {
            self.delay = Some(Delays::add(self.delay, at.saturating_sub(arrived)));
        }
        if let Some(out) = &mut self.out {
            let ts = self
                .epoch
                .checked_add(at)
                .ok_or("departure time overflows the pcap clock")?;
            out.write(ts, orig_len, frame)
                .map_err(|e| format!("writing OUT: {e}"))?;
        }
        let (pipe, queue) = split_target(target);
        self.log(&Event::Departure {
            t_ns: at,
            id,
            rule,
            pipe,
            queue,
            note,
        })
    }

    fn dropped(
        &mut self,
        at: Nanos,
        id: u64,
        reason: DropReason,
        rule: Option<u16>,
        target: Option<Target>,
        note: Option<&str>,
    ) -> Result<(), String> {
        let (pipe, queue) = split_target(target);
        self.log(&Event::Drop {
            t_ns: at,
            id,
            reason: reason.as_str(),
            rule,
            pipe,
            queue,
            note,
        })
    }

    fn log(&mut self, e: &Event) -> Result<(), String> {
        if let Some(w) = &mut self.log {
            serde_json::to_writer(&mut *w, e)
                .map_err(|e| e.to_string())
                .and_then(|()| w.write_all(b"\n").map_err(|e| e.to_string()))
                .map_err(|e| format!("writing the log: {e}"))?;
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
    use crate::capture::Frame;
    use dummynet_engine::config::{Action, LinkConfig, PipeConfig, QueueLimit, RuleSpec};
    use dummynet_engine::time::NS_PER_MS;

    #[test]
    fn pcap_specs() {
        let p = |s: &str| PcapSpec::parse(s);
        assert_eq!(
            p("a.pcap").unwrap(),
            PcapSpec {
                path: "a.pcap".into(),
                iface: "sim0".into(),
                dir: Direction::In
            }
        );
        assert_eq!(p("a.pcap@em0").unwrap().iface, "em0");
        assert_eq!(p("a.pcap@em0:out").unwrap().dir, Direction::Out);
        assert_eq!(
            p("me@host/a.pcap@vlan.10:in").unwrap().path,
            PathBuf::from("me@host/a.pcap")
        );
        for bad in [
            "",
            "@em0",
            "a.pcap@",
            "a.pcap@:in",
            "a.pcap@em0:both",
            "a.pcap@e m0",
        ] {
            assert!(p(bad).is_err(), "{bad}");
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
        };
        vec![
            (1, Command::ConfigPipe(1, pipe)),
            (
                2,
                Command::AddRule(RuleSpec {
                    number: Some(100),
                    action: Action::Pipe(1),
                    prob: None,
                    body: vec![],
                }),
            ),
        ]
    }

    proptest::proptest! {
        /// Whatever the frames, sim does not panic and accounts for every one.
        #[test]
        fn arbitrary_frames_are_conserved(
            frames in proptest::collection::vec(
                (0u64..50_000_000, proptest::collection::vec(proptest::num::u8::ANY, 0..80)),
                0..40,
            ),
            raw in proptest::bool::ANY,
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
            let input = Input { capture: Capture { linktype, link, frames }, iface: "sim0".into(), dir: Direction::In };
            let (mut out, mut log) = (Vec::new(), Vec::new());
            let s = simulate(configure(&config(), 7).unwrap(), vec![input], Some(&mut out), Some(&mut log)).unwrap();
            proptest::prop_assert_eq!(s.arrived, n);
            proptest::prop_assert_eq!(s.delivered + s.dropped() + s.inside, n);
            proptest::prop_assert_eq!(s.inside, 0);
            let lines = String::from_utf8(log).unwrap();
            proptest::prop_assert_eq!(lines.lines().count() as u64, 2 * n);
        }
    }
}
