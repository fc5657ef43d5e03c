//! `dummynet bench`: synthetic packets through the engine in one thread, no I/O.
//!
//! Two clocks are involved and never mixed: the engine runs on virtual time
//! (packets are spaced by a fixed interval), while the bench thread's CPU
//! clock measures how long the CPU took. `pps` and `ns_per_packet` are CPU
//! cost; `delivered_pps` is the rate the emulated link delivered in virtual
//! time. The CPU clock rather than the wall clock, because on a shared
//! machine the wall clock also counts the time the thread waited for a CPU
//! (±40% between runs on two busy vCPUs); it falls back to the wall clock
//! where the system has no per-thread CPU clock.
//!
//! Scenarios mirror the ones the userspace ipfw on netmap reported (128-byte
//! packets): one allow rule, an unlimited pipe, a 1 Gbit/s pipe and a pipe
//! with 10 ms of delay; `--sched TYPE --flows N` measures one enqueue plus
//! one dequeue with N backlogged flows, twice: through the whole engine
//! (classifier, queues, link) and for the scheduler policy alone, which is
//! how FreeBSD's `dn_test` measured its schedulers.
//!
//! Impaired pipes (issue 11) have scenarios of their own: `jitter` (delay
//! 10 ms, jitter 2 ms uniform, in order), `jitter-normal`,
//! `jitter-unordered`, `netem` (the jitter pipe plus 1% loss and 1%
//! duplicate, measured interleaved with `delay10ms` and reported as a
//! ratio to it; `netem-sparse` the same with packets 4.1 ms apart, wider
//! than the jitter's spread, against `delay10ms-sparse`), `trace` (a mahimahi trace link, saturated) and `slot`
//! (netem slotting, saturated). Every scenario ends by checking the books:
//! each packet offered and each copy made was delivered or dropped once.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::time::{clock_gettime, ClockId};

use dummynet_engine::config::{
    Action, Correlated, Distribution, Duplicate, FlowsetConfig, Jitter, LinkConfig, LossModel,
    PipeConfig, QueueConfig, QueueLimit, RuleSpec, SchedConfig, Setting, Slot, Trace, TraceMode,
    DEFAULT_INSTANCE_LIMIT,
};
use dummynet_engine::flow::proto;
use dummynet_engine::impair::dist;
use dummynet_engine::rng::Probability;
use dummynet_engine::sched::{self, workload::Mix, workload::PolicyWorkload};
use dummynet_engine::{Command, Direction, Engine, FlowKey, FlowMask, Nanos, PacketInfo, Verdict};
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// allow | pipe | bw1g | delay10ms (all four when neither this nor
    /// --sched is given), or an impaired pipe: jitter | jitter-normal |
    /// jitter-unordered | netem (also runs delay10ms and prints the ratio) |
    /// netem-sparse (packets 4.1 ms apart, against delay10ms-sparse) |
    /// trace | slot. Several, comma-separated, run in the order given.
    #[arg(long)]
    pub scenario: Option<String>,
    /// Scheduler cost mode: a registered scheduler type (fifo, wf2q+, ...).
    #[arg(long)]
    pub sched: Option<String>,
    /// Backlogged flows for --sched (default: 1, 100, 10000 and 1000000).
    /// A million flows hold two million packets: about 1 GB and 10 s.
    #[arg(long)]
    pub flows: Option<u32>,
    /// Packets per scenario.
    #[arg(long, default_value_t = 5_000_000)]
    pub packets: u64,
    /// Packet size in bytes.
    #[arg(long, default_value_t = 128)]
    pub size: u32,
    /// Print one JSON object per result instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Instead of the engine: measure this machine's floor under the live
    /// data plane's release lateness, over SECONDS (default 6): how often
    /// and how long a spinning thread loses the CPU, and how late its wait
    /// wakes for a deadline (see `live::floor`).
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "6")]
    pub clock: Option<u64>,
    /// Instead of the scenarios: the sharded data plane (`run --workers`)
    /// on this many worker threads, in memory, each a comma-separated
    /// count (e.g. `1,2`), over `--pipes` unlimited pipes (see
    /// `workers::bench`).
    #[arg(long, value_name = "N,...")]
    pub workers: Option<String>,
    /// With --workers: how many pipes the packets are spread over, each a
    /// comma-separated count (default `1,2`).
    #[arg(long, value_name = "N,...", requires = "workers")]
    pub pipes: Option<String>,
}

/// One measured result.
#[derive(Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub packets: u64,
    pub size: u32,
    /// Packets processed per second of CPU time.
    pub pps: f64,
    pub ns_per_packet: f64,
    /// Rate of delivered packets in virtual time, where packets are delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_pps: Option<f64>,
    /// The emulated link's line rate in packets/s, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_rate_pps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// `--sched`: the policy alone, equal packet lengths and weights.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_ns_per_packet: Option<f64>,
    /// `--sched`: the policy alone, lengths 64..1500 B and weights 1..100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_mixed_ns_per_packet: Option<f64>,
    /// Saturated gated links (`trace`, `slot`): CPU time per packet
    /// delivered, the cost of the packets dropped at the queue included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_delivered: Option<f64>,
    /// `netem`: the scenario it is compared with, measured in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_ns_per_packet: Option<f64>,
    /// `ns_per_packet / baseline_ns_per_packet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}

/// Why a bench cannot run, or what it found wrong.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("--{what} {input}: each must be a whole number from 1 to {max}")]
    List {
        what: &'static str,
        input: String,
        max: u32,
    },
    #[error("--workers measures its own scenario; leave out --scenario and --sched")]
    WorkersAlone,
    #[error("--size {size} is out of range 20..65535 bytes")]
    Size { size: u32 },
    /// The workers bench's own error.
    #[error(transparent)]
    Workers(#[from] dummynet_dataplane::workers::bench::BenchError),
    #[error("--packets must be at least 1")]
    ZeroPackets,
    #[error("--flows must be at least 1")]
    ZeroFlows,
    #[error(
        "{kind} holds at most {max} packets, and the bench keeps 2 per flow queued ({queued})"
    )]
    CannotHold { kind: String, max: u32, queued: u64 },
    #[error("--flows goes with --sched TYPE")]
    FlowsWithoutSched,
    #[error("unknown scenario `{name}`; use {}", SCENARIOS.join(", "))]
    UnknownScenario { name: String },
    #[error(transparent)]
    Config(#[from] dummynet_engine::ConfigError),
    #[error("{percent}% is not a probability")]
    Probability { percent: f64 },
    #[error("no built-in normal table")]
    NoNormalTable,
    #[error(
        "{name}: packets not accounted for: offered {packets} + copies {} vs \
         delivered {delivered} + dropped {dropped} seen by the bench; engine: {totals:?}, \
         holding {holding}",
        totals.duplicated
    )]
    Books {
        name: String,
        packets: u64,
        delivered: u64,
        dropped: u64,
        totals: Box<dummynet_engine::stats::Totals>,
        holding: u64,
    },
    #[error("no run")]
    NoRun,
    #[error("scheduler bench dropped {dropped} packets; the backlog was not steady")]
    Unsteady { dropped: u64 },
    #[error("found no 5-tuples for all {flows} buckets of {kind} in {bound} tries")]
    NoTuples {
        flows: u32,
        kind: String,
        bound: u64,
    },
    #[error("unknown scheduler type `{kind}`; known: {}", sched::names().join(", "))]
    UnknownSched { kind: String },
    /// The policy workload's own error.
    #[error(transparent)]
    Workload(#[from] dummynet_engine::sched::workload::WorkloadError),
    #[error("{kind}: the policy lost its backlog")]
    LostBacklog { kind: String },
}

pub fn run(args: BenchArgs) -> ExitCode {
    if let Some(seconds) = args.clock {
        if !(1..=3600).contains(&seconds) {
            eprintln!("dummynet bench: --clock {seconds} is out of range 1..3600 seconds");
            return ExitCode::FAILURE;
        }
        let floor = dummynet_dataplane::floor::measure(std::time::Duration::from_secs(seconds));
        if args.json {
            println!("{}", serde_json::to_string(&floor).unwrap_or_default());
        } else {
            println!("{floor}");
        }
        return ExitCode::SUCCESS;
    }
    if let Some(workers) = &args.workers {
        return match workers_bench(workers, args.pipes.as_deref().unwrap_or("1,2"), &args) {
            Ok(reports) => {
                print_workers(&reports, args.json);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("dummynet bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run_inner(&args) {
        Ok(reports) => {
            print_reports(&reports, args.json);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--workers LIST --pipes LIST`: every pair, in order.
fn workers_bench(
    workers: &str,
    pipes: &str,
    args: &BenchArgs,
) -> Result<Vec<dummynet_dataplane::workers::bench::WorkersReport>, BenchError> {
    let list = |what: &'static str, s: &str, max: u32| -> Result<Vec<u32>, BenchError> {
        s.split(',')
            .map(|x| match x.trim().parse::<u32>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(BenchError::List {
                    what,
                    input: s.to_string(),
                    max,
                }),
            })
            .collect()
    };
    let workers = list("workers", workers, 64)?;
    let pipes = list("pipes", pipes, 255)?;
    if args.scenario.is_some() || args.sched.is_some() {
        return Err(BenchError::WorkersAlone);
    }
    if args.size < 20 || args.size > 65_535 {
        return Err(BenchError::Size { size: args.size });
    }
    let mut out = Vec::new();
    for &p in &pipes {
        for &w in &workers {
            out.push(
                dummynet_dataplane::workers::bench::run(
                    w as usize,
                    p,
                    args.packets.max(1),
                    args.size,
                )
                .map_err(BenchError::Workers)?,
            );
        }
    }
    Ok(out)
}

fn run_inner(args: &BenchArgs) -> Result<Vec<Report>, BenchError> {
    if args.size < 20 || args.size > 65_535 {
        return Err(BenchError::Size { size: args.size });
    }
    if args.packets == 0 {
        return Err(BenchError::ZeroPackets);
    }
    let mut out = Vec::new();
    if let Some(kind) = &args.sched {
        let flows = match args.flows {
            Some(0) => return Err(BenchError::ZeroFlows),
            Some(n) => vec![n],
            None => vec![1, 100, 10_000, 1_000_000],
        };
        for n in flows {
            if let Some(why) = cannot_hold(kind, n) {
                if args.flows.is_some() {
                    return Err(why);
                }
                eprintln!("skipping {n} flows: {why}");
                continue;
            }
            out.push(sched_cost(kind, n, args.packets, args.size)?);
        }
        return Ok(out);
    }
    if args.flows.is_some() {
        return Err(BenchError::FlowsWithoutSched);
    }
    let scenarios: Vec<&str> = match args.scenario.as_deref() {
        Some(s) => s.split(',').map(str::trim).collect(),
        None => DEFAULT_SCENARIOS.to_vec(),
    };
    // Refuse a misspelt name before spending time on the others.
    if let Some(bad) = scenarios.iter().find(|s| !SCENARIOS.contains(s)) {
        return Err(BenchError::UnknownScenario {
            name: bad.to_string(),
        });
    }
    for s in scenarios {
        out.push(scenario(s, args.packets, args.size)?);
    }
    Ok(out)
}

fn print_reports(reports: &[Report], json: bool) {
    if json {
        for r in reports {
            // Serializing plain numbers and strings cannot fail.
            println!("{}", serde_json::to_string(r).unwrap_or_default());
        }
        return;
    }
    println!(
        "{:<22} {:>10} {:>12} {:>10} {:>14}",
        "scenario", "packets", "Mpps", "ns/pkt", "delivered Mpps"
    );
    let policy = |r: &Report| match (r.policy_ns_per_packet, r.policy_mixed_ns_per_packet) {
        (Some(eq), Some(mixed)) => format!("   policy alone {eq:.1} ns (mixed {mixed:.1} ns)"),
        _ => String::new(),
    };
    let per_delivered = |r: &Report| match r.ns_per_delivered {
        Some(d) => format!("   {d:.1} ns per delivered packet"),
        None => String::new(),
    };
    let versus = |r: &Report| match (&r.baseline, r.baseline_ns_per_packet, r.ratio) {
        (Some(b), Some(ns), Some(x)) => format!(
            "   {b} {ns:.1} ns, ratio {x:.2} (limit {NETEM_LIMIT}) {}",
            if x <= NETEM_LIMIT { "ok" } else { "OVER" }
        ),
        _ => String::new(),
    };
    for r in reports {
        let name = match r.flows {
            Some(f) => format!("{} x{}", r.scenario, f),
            None => r.scenario.clone(),
        };
        let delivered = match (r.delivered_pps, r.line_rate_pps) {
            (Some(d), Some(l)) => format!("{:.3} (line {:.3})", d / 1e6, l / 1e6),
            (Some(d), None) => format!("{:.3}", d / 1e6),
            _ => "-".into(),
        };
        println!(
            "{:<22} {:>10} {:>12.3} {:>10.1} {:>14}{}{}{}",
            name,
            r.packets,
            r.pps / 1e6,
            r.ns_per_packet,
            delivered,
            policy(r),
            per_delivered(r),
            versus(r)
        );
    }
}

/// CPU time spent by the calling thread since `start`, or wall time if the
/// thread's CPU clock cannot be read.
enum Stopwatch {
    Cpu(Duration),
    Wall(Instant),
}

impl Stopwatch {
    fn start() -> Self {
        match thread_cpu_time() {
            Some(t) => Stopwatch::Cpu(t),
            None => Stopwatch::Wall(Instant::now()),
        }
    }

    fn elapsed_secs(&self) -> f64 {
        match self {
            Stopwatch::Cpu(t0) => {
                thread_cpu_time().map_or(0.0, |t| t.saturating_sub(*t0).as_secs_f64())
            }
            Stopwatch::Wall(t0) => t0.elapsed().as_secs_f64(),
        }
    }
}

fn thread_cpu_time() -> Option<Duration> {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(Duration::from)
}

fn packet(i: u32, size: u32) -> PacketInfo {
    // Distinct 5-tuples: vary the source address and port with `i`.
    let src = Ipv4Addr::from(0x0a00_0000 | (i >> 16));
    PacketInfo {
        len: size,
        key: FlowKey::v4(
            src,
            Ipv4Addr::new(10, 255, 0, 1),
            proto::UDP,
            (i & 0xffff) as u16,
            9,
        ),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    }
}

fn apply(e: &mut Engine<u32>, cmd: Command) -> Result<(), BenchError> {
    Ok(e.apply(0, cmd)?)
}

fn to_all(n: u32, action: fn(u32) -> Action) -> Command {
    Command::AddRule(RuleSpec {
        number: Some(100),
        action: action(n),
        prob: None,
        extra: Default::default(),
        body: Vec::new(),
    })
}

fn pipe_cmd(bw: u64, delay: Nanos, limit: QueueLimit) -> Command {
    Command::ConfigPipe(
        1,
        PipeConfig {
            link: LinkConfig {
                bw,
                delay,
                ..Default::default()
            },
            flowset: FlowsetConfig {
                limit,
                ..Default::default()
            },
            sched: None,
        },
    )
}

/// Drains everything due by `now`; returns how many were delivered.
#[inline]
fn drain(e: &mut Engine<u32>, now: Nanos) -> u64 {
    let mut n = 0;
    while let Some(o) = e.poll(now) {
        n += u64::from(o.delivered());
    }
    n
}

/// Every scenario `--scenario` takes (comma-separated for several, run in
/// the order given, so that scenarios to compare can be interleaved).
pub const SCENARIOS: &[&str] = &[
    "allow",
    "pipe",
    "bw1g",
    "delay10ms",
    "jitter",
    "jitter-normal",
    "jitter-unordered",
    "netem",
    "delay10ms-sparse",
    "netem-sparse",
    "trace",
    "slot",
];

/// What runs when neither `--scenario` nor `--sched` is given.
const DEFAULT_SCENARIOS: &[&str] = &["allow", "pipe", "bw1g", "delay10ms"];

/// The scenario a `netem` one is compared with, and how much slower it may
/// be (issue 11: jitter, loss and duplicate within 1.5x of a plain delay
/// pipe).
fn baseline_of(name: &str) -> Option<&'static str> {
    match name {
        "netem" => Some("delay10ms"),
        "netem-sparse" => Some("delay10ms-sparse"),
        _ => None,
    }
}
const NETEM_LIMIT: f64 = 1.5;
/// Spacing of the `-sparse` scenarios: wider than the 4 ms spread of
/// `jitter 2ms`, so that jitter in order holds no packet back and every
/// packet leaves the delay line on its own.
const SPARSE: Nanos = 4_100_000;
/// Interleaved runs of `netem` and its baseline; the best of each is kept.
const NETEM_ROUNDS: usize = 3;

const MS: Nanos = dummynet_engine::time::NS_PER_MS;

/// How a scenario offers its packets: their virtual spacing, and the
/// emulated link's line rate in packets/s where it has one.
struct Offer {
    spacing: Nanos,
    line_rate: Option<f64>,
}

fn pipe_with(link: LinkConfig, flowset: FlowsetConfig) -> Command {
    Command::ConfigPipe(
        1,
        PipeConfig {
            link,
            flowset,
            sched: None,
        },
    )
}

fn jitter_2ms(distribution: Distribution, unordered: bool) -> Option<Jitter> {
    Some(Jitter {
        amount: 2 * MS,
        correlation: Probability::ZERO,
        distribution,
        unordered,
    })
}

fn percent(p: f64) -> Result<Probability, BenchError> {
    Probability::new(p / 100.0).ok_or(BenchError::Probability { percent: p })
}

/// The `trace` scenario's trace: 100 delivery opportunities at every
/// millisecond, looping (mahimahi's whole-millisecond times; 1.2 Gbit/s).
fn bench_trace() -> Arc<Trace> {
    Arc::new(Trace {
        name: "bench-100-per-ms".into(),
        times: vec![MS; 100],
        mode: TraceMode::Loop,
    })
}

/// Spacing that offers twice `rate_bps` in packets of `size` bytes, and
/// that rate in packets/s.
fn twice(rate_bps: u64, size: u32) -> Offer {
    let bits = u64::from(size) * 8;
    Offer {
        spacing: (bits * 1_000_000_000 / rate_bps / 2).max(1),
        line_rate: Some(rate_bps as f64 / bits as f64),
    }
}

/// Configures scenario `name` on a new engine.
fn setup(e: &mut Engine<u32>, name: &str, size: u32) -> Result<Offer, BenchError> {
    let unlimited = Offer {
        spacing: 100,
        line_rate: None,
    };
    let delay = |jitter: Option<Jitter>| LinkConfig {
        delay: 10 * MS,
        jitter,
        ..Default::default()
    };
    let offer = match name {
        "allow" => {
            apply(e, to_all(0, |_| Action::Allow))?;
            return Ok(unlimited);
        }
        "pipe" => {
            apply(e, pipe_cmd(0, 0, QueueLimit::default()))?;
            unlimited
        }
        "bw1g" => {
            // Offered at twice the line rate: the queue stays full and the
            // link must deliver exactly its line rate.
            let bw = 1_000_000_000u64;
            apply(e, pipe_cmd(bw, 0, QueueLimit::default()))?;
            twice(bw, size)
        }
        "delay10ms" | "delay10ms-sparse" => {
            apply(e, pipe_cmd(0, 10 * MS, QueueLimit::default()))?;
            unlimited
        }
        // `delay 10ms jitter 2ms` with 100 ns between packets: in order,
        // almost every packet waits for the one ahead (the cost of the draw
        // is paid all the same); unordered, 200,000 packets are on the
        // early line at once.
        "jitter" | "jitter-normal" | "jitter-unordered" => {
            let j = match name {
                "jitter" => jitter_2ms(Distribution::Uniform, false),
                "jitter-normal" => {
                    let t = dist::builtin("normal").ok_or(BenchError::NoNormalTable)?;
                    jitter_2ms(Distribution::Table(t), false)
                }
                _ => jitter_2ms(Distribution::Uniform, true),
            };
            apply(e, pipe_with(delay(j), FlowsetConfig::default()))?;
            unlimited
        }
        // At 100 ns apart, jitter in order leaves packets in batches behind
        // the longest draw so far (one release per ~160 packets); sparse,
        // each packet has its own release, as with the plain delay pipe.
        "netem" | "netem-sparse" => {
            let flowset = FlowsetConfig {
                loss: Some(LossModel::Random(Correlated::new(
                    percent(1.0)?,
                    Probability::ZERO,
                ))),
                duplicate: Some(Duplicate(Correlated::new(percent(1.0)?, Probability::ZERO))),
                ..Default::default()
            };
            let link = delay(jitter_2ms(Distribution::Uniform, false));
            apply(e, pipe_with(link, flowset))?;
            unlimited
        }
        "trace" => {
            // Offered at twice the trace's rate. Its opportunities come 100
            // at a time, 1175 packets of 128 bytes each millisecond, so the
            // queue must hold a millisecond of them for the link to use
            // every opportunity.
            let trace = bench_trace();
            let offer = twice(trace.mean_rate(), size);
            apply(e, Command::Set(Setting::PipeSlotLimit(4096)))?;
            let link = LinkConfig {
                trace: Some(trace),
                ..Default::default()
            };
            let flowset = FlowsetConfig {
                limit: QueueLimit::Slots(4096),
                ..Default::default()
            };
            apply(e, pipe_with(link, flowset))?;
            offer
        }
        "slot" => {
            // `delay 10ms slot 90us 110us packets 32`: bursts of 32 packets
            // about every 100 us (320,000 packets/s), offered at twice that.
            let link = LinkConfig {
                delay: 10 * MS,
                slot: Some(Slot {
                    min: 90_000,
                    max: 110_000,
                    packets: Some(32),
                    bytes: None,
                }),
                ..Default::default()
            };
            apply(e, pipe_with(link, FlowsetConfig::default()))?;
            Offer {
                spacing: 100_000 / 32 / 2,
                line_rate: Some(32.0 * 1e9 / 100_000.0),
            }
        }
        other => {
            return Err(BenchError::UnknownScenario {
                name: other.to_string(),
            })
        }
    };
    apply(e, to_all(1, Action::Pipe))?;
    if name.ends_with("-sparse") {
        return Ok(Offer {
            spacing: SPARSE,
            line_rate: None,
        });
    }
    Ok(offer)
}

/// One timed run of a scenario.
struct Run {
    elapsed: f64,
    delivered: u64,
    first_delivery: Option<Nanos>,
    last_delivery: Nanos,
    /// Virtual time of the last arrival.
    end: Nanos,
    line_rate: Option<f64>,
}

fn run_once(name: &str, packets: u64, size: u32) -> Result<Run, BenchError> {
    let mut e: Engine<u32> = Engine::new(1);
    let Offer { spacing, line_rate } = setup(&mut e, name, size)?;
    // A handful of distinct flows, as a real source would have.
    let infos: Vec<PacketInfo> = (0..64).map(|i| packet(i, size)).collect();
    let mut delivered = 0u64;
    let mut dropped = 0u64;
    let mut first_delivery: Option<Nanos> = None;
    let mut last_delivery: Nanos = 0;
    let start = Stopwatch::start();
    let mut now: Nanos = 0;
    for i in 0..packets {
        now += spacing;
        let info = infos[(i % infos.len() as u64) as usize];
        match e.input(now, info, i as u32) {
            Verdict::Pass { .. } => delivered += 1,
            Verdict::Drop { .. } => dropped += 1,
            Verdict::Queued { .. } => {}
        }
        while let Some(o) = e.poll(now) {
            if o.delivered() {
                delivered += 1;
                first_delivery.get_or_insert(o.at);
                last_delivery = o.at;
            } else {
                dropped += 1;
            }
        }
    }
    let elapsed = start.elapsed_secs();
    // Let the tail drain (not timed) so the delivered rate covers a whole run.
    while let Some(d) = e.next_deadline() {
        while let Some(o) = e.poll(d) {
            if o.delivered() {
                delivered += 1;
                first_delivery.get_or_insert(o.at);
                last_delivery = o.at;
            } else {
                dropped += 1;
            }
        }
    }
    check_books(&e, name, packets, delivered, dropped)?;
    Ok(Run {
        elapsed,
        delivered,
        first_delivery,
        last_delivery,
        end: now,
        line_rate,
    })
}

/// Every packet offered, and every copy `duplicate` made, was delivered or
/// dropped exactly once, as the bench saw them and as the engine counts.
fn check_books(
    e: &Engine<u32>,
    name: &str,
    packets: u64,
    delivered: u64,
    dropped: u64,
) -> Result<(), BenchError> {
    let t = e.totals();
    let ok = t.conserved()
        && t.inside == 0
        && e.held_packets() == 0
        && t.arrived == packets + t.duplicated
        && t.delivered == delivered
        && t.dropped() == dropped
        && delivered + dropped + t.inside == packets + t.duplicated;
    if ok {
        return Ok(());
    }
    Err(BenchError::Books {
        name: name.to_string(),
        packets,
        delivered,
        dropped,
        totals: Box::new(t),
        holding: e.held_packets(),
    })
}

fn scenario(name: &str, packets: u64, size: u32) -> Result<Report, BenchError> {
    if let Some(base) = baseline_of(name) {
        return versus_baseline(name, base, packets, size);
    }
    Ok(report(name, packets, size, &run_once(name, packets, size)?))
}

fn report(name: &str, packets: u64, size: u32, r: &Run) -> Report {
    let delivered_pps = match (name, r.first_delivery) {
        ("allow", _) => Some(r.delivered as f64 / (r.end as f64 / 1e9)),
        (_, Some(first)) if r.last_delivery > first && r.delivered > 1 => {
            // Deliveries are spaced over (last - first): n-1 intervals.
            Some((r.delivered - 1) as f64 / ((r.last_delivery - first) as f64 / 1e9))
        }
        _ => None,
    };
    // Where the scenario saturates a gated link, what a delivered packet
    // costs (dropped ones included).
    let ns_per_delivered = (matches!(name, "trace" | "slot") && r.delivered > 0)
        .then(|| r.elapsed * 1e9 / r.delivered as f64);
    Report {
        scenario: name.to_string(),
        packets,
        size,
        pps: packets as f64 / r.elapsed,
        ns_per_packet: r.elapsed * 1e9 / packets as f64,
        delivered_pps,
        line_rate_pps: r.line_rate,
        flows: None,
        policy_ns_per_packet: None,
        policy_mixed_ns_per_packet: None,
        ns_per_delivered,
        baseline: None,
        baseline_ns_per_packet: None,
        ratio: None,
    }
}

/// A `netem` scenario against its plain delay pipe, interleaved so that
/// both see the same machine: the best of [`NETEM_ROUNDS`] runs of each.
fn versus_baseline(
    name: &str,
    baseline: &str,
    packets: u64,
    size: u32,
) -> Result<Report, BenchError> {
    let mut best: Option<Run> = None;
    let mut base = f64::INFINITY;
    for _ in 0..NETEM_ROUNDS {
        base = base.min(run_once(baseline, packets, size)?.elapsed);
        let r = run_once(name, packets, size)?;
        if best.as_ref().is_none_or(|b| r.elapsed < b.elapsed) {
            best = Some(r);
        }
    }
    let best = best.ok_or(BenchError::NoRun)?;
    let mut rep = report(name, packets, size, &best);
    rep.baseline = Some(baseline.to_string());
    rep.baseline_ns_per_packet = Some(base * 1e9 / packets as f64);
    rep.ratio = Some(best.elapsed / base);
    Ok(rep)
}

/// Cost of one enqueue plus one dequeue with `flows` flows always backlogged.
///
/// A queue with `mask all` on a scheduler of the given type feeds a link
/// sized so that one packet takes exactly 100 ns (10.24 Gbit/s for 128 bytes). Every flow is pre-filled with two packets; then each step advances
/// virtual time by exactly one packet time and offers one packet to the next
/// flow in turn, so one packet leaves per packet that arrives and the backlog
/// stays at `2 × flows`.
/// The bench keeps two packets per flow queued. A type with its own packet
/// limit (fq_codel, fq_pie: at most 20480) cannot hold that for every size.
fn cannot_hold(kind: &str, flows: u32) -> Option<BenchError> {
    let max = fq_max_limit(kind)?;
    (u64::from(flows) * 2 > u64::from(max)).then(|| BenchError::CannotHold {
        kind: kind.to_string(),
        max,
        queued: u64::from(flows) * 2,
    })
}

/// The largest `limit` an fq type accepts.
fn fq_max_limit(kind: &str) -> Option<u32> {
    match kind {
        "fq_codel" | "fq_pie" => Some(dummynet_engine::sched::fq_codel::MAX_LIMIT),
        _ => None,
    }
}

/// Parameters that let an fq type hold the bench's backlog without its AQM
/// dropping: the largest limit, as many buckets as flows (each flow gets a
/// bucket of its own, see [`flow_infos`]), and a target out of reach (the
/// bench measures the scheduler, not the AQM).
fn fq_params(kind: &str, flows: u32) -> Vec<(String, u64)> {
    let Some(max) = fq_max_limit(kind) else {
        return Vec::new();
    };
    let mut p = vec![
        ("limit".to_string(), u64::from(max)),
        ("flows".to_string(), u64::from(flows.clamp(1, 65536))),
        ("target".to_string(), 5 * dummynet_engine::time::NS_PER_SEC),
    ];
    if kind == "fq_codel" {
        p.push((
            "interval".to_string(),
            100 * dummynet_engine::time::NS_PER_SEC,
        ));
    }
    p
}

pub fn sched_cost(kind: &str, flows: u32, packets: u64, size: u32) -> Result<Report, BenchError> {
    let mut e: Engine<u32> = Engine::new(1);
    let tx: Nanos = 100;
    let bw = u64::from(size) * 8 * (1_000_000_000 / tx);
    apply(&mut e, Command::Set(Setting::PipeSlotLimit(1_000_000)))?;
    // A queue per flow, and the pipe's own: room for them all.
    let room = flows.saturating_add(1).max(DEFAULT_INSTANCE_LIMIT);
    apply(&mut e, Command::Set(Setting::InstanceLimit(room)))?;
    apply(&mut e, pipe_cmd(bw, 0, QueueLimit::default()))?;
    apply(
        &mut e,
        Command::ConfigSched(
            1,
            SchedConfig {
                kind: Some(kind.to_string()),
                params: fq_params(kind, flows),
                ..Default::default()
            },
        ),
    )?;
    let fs = FlowsetConfig {
        mask: FlowMask::ALL,
        // Two packets per flow on average; DRR (rr) serves a flow's packets
        // in a batch, so one flow's backlog swings up to five.
        limit: QueueLimit::Slots(8),
        buckets: 65536,
        ..Default::default()
    };
    apply(
        &mut e,
        Command::ConfigQueue(
            1,
            QueueConfig {
                sched: Some(1),
                flowset: fs,
            },
        ),
    )?;
    apply(&mut e, to_all(1, Action::Queue))?;
    let infos = flow_infos(kind, flows, size)?;
    let mut now: Nanos = 0;
    for round in 0..2 {
        for (i, info) in infos.iter().enumerate() {
            e.input(now, *info, (round * flows as usize + i) as u32);
        }
    }
    drain(&mut e, now);
    let mut delivered = 0u64;
    let start = Stopwatch::start();
    for i in 0..packets {
        now += tx;
        let info = infos[(i % u64::from(flows)) as usize];
        e.input(now, info, i as u32);
        delivered += drain(&mut e, now);
    }
    let elapsed = start.elapsed_secs();
    let t = e.totals();
    if t.dropped() > 0 {
        return Err(BenchError::Unsteady {
            dropped: t.dropped(),
        });
    }
    Ok(Report {
        scenario: format!("sched-{kind}"),
        packets,
        size,
        pps: packets as f64 / elapsed,
        ns_per_packet: elapsed * 1e9 / packets as f64,
        delivered_pps: Some(delivered as f64 / (now as f64 / 1e9)),
        line_rate_pps: Some(bw as f64 / (f64::from(size) * 8.0)),
        flows: Some(flows),
        policy_ns_per_packet: Some(policy_cost(kind, flows, packets, Mix::Equal)?),
        policy_mixed_ns_per_packet: Some(policy_cost(kind, flows, packets, Mix::Mixed)?),
        ns_per_delivered: None,
        baseline: None,
        baseline_ns_per_packet: None,
        ratio: None,
    })
}

/// The bench's `flows` flows, one 5-tuple each. For an fq type, tuples that
/// hash into distinct buckets of its `flows` buckets, so that every flow has
/// a queue of its own, as under `mask all` with the other types: hashed at
/// random, N flows would share about 63% of N buckets, and fewer, longer
/// queues flatter the fq types.
fn flow_infos(kind: &str, flows: u32, size: u32) -> Result<Vec<PacketInfo>, BenchError> {
    let buckets = flows.clamp(1, 65536);
    if fq_max_limit(kind).is_none() || flows > buckets {
        return Ok((0..flows).map(|i| packet(i, size)).collect());
    }
    let mut taken = vec![false; buckets as usize];
    let mut infos = Vec::with_capacity(flows as usize);
    // Collecting every bucket takes about N ln N candidates (coupon
    // collector); the bound only stops a hash gone wrong.
    let bound = u64::from(flows) * 64 + 1_000_000;
    let mut i: u32 = 0;
    while infos.len() < flows as usize {
        if u64::from(i) >= bound {
            return Err(BenchError::NoTuples {
                flows,
                kind: kind.to_string(),
                bound,
            });
        }
        let p = packet(i, size);
        let b = sched::bucket_of(&p.key, buckets) as usize;
        if let Some(t) = taken.get_mut(b).filter(|t| !**t) {
            *t = true;
            infos.push(p);
        }
        i += 1;
    }
    Ok(infos)
}

/// ns per packet of the scheduler policy alone ([`PolicyWorkload`]), best of
/// three runs so that a busy neighbour on the machine shows less.
pub fn policy_cost(kind: &str, flows: u32, packets: u64, mix: Mix) -> Result<f64, BenchError> {
    let t = sched::lookup(kind).ok_or_else(|| BenchError::UnknownSched {
        kind: kind.to_string(),
    })?;
    let mut w = PolicyWorkload::new(t, flows, mix).map_err(BenchError::Workload)?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Stopwatch::start();
        for _ in 0..packets {
            if w.step().is_none() {
                return Err(BenchError::LostBacklog {
                    kind: kind.to_string(),
                });
            }
        }
        best = best.min(start.elapsed_secs() * 1e9 / packets as f64);
    }
    Ok(best)
}

/// The workers' scenarios, as JSON lines or as a table.
fn print_workers(reports: &[dummynet_dataplane::workers::bench::WorkersReport], json: bool) {
    if json {
        for r in reports {
            println!("{}", serde_json::to_string(r).unwrap_or_default());
        }
        return;
    }
    println!(
        "{:>7} {:>5} {:>10} {:>8} {:>10} {:>9} {:>12}  per worker ns/pkt read",
        "workers", "pipes", "packets", "Mpps", "CPU ns/pkt", "crossed", "ring full"
    );
    for r in reports {
        let per: Vec<String> = r.worker_cpu_ns.iter().map(|n| format!("{n:.1}")).collect();
        println!(
            "{:>7} {:>5} {:>10} {:>8.3} {:>10.1} {:>8.1}% {:>12}  {}",
            r.workers,
            r.pipes,
            r.packets,
            r.pps / 1e6,
            r.cpu_ns_per_packet,
            100.0 * r.handed as f64 / r.packets as f64,
            r.ring_full_waits,
            per.join(" ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bw1g_delivers_exactly_the_line_rate() {
        let r = scenario("bw1g", 200_000, 128).unwrap();
        let (d, l) = (r.delivered_pps.unwrap(), r.line_rate_pps.unwrap());
        assert_eq!(l, 976_562.5);
        assert!((d - l).abs() / l < 1e-9, "delivered {d} vs line {l}");
    }

    #[test]
    fn delay_scenario_delivers_everything() {
        let r = scenario("delay10ms", 100_000, 128).unwrap();
        // 10 Mpps offered over 10 ms of virtual time, all delivered, in order.
        let d = r.delivered_pps.unwrap();
        assert!((d - 1e10 / 1000.0).abs() / 1e7 < 1e-6, "delivered {d}");
    }

    #[test]
    fn every_scenario_keeps_its_books() {
        // `run_once` refuses a run whose packets are not all accounted for.
        for name in SCENARIOS {
            let r = scenario(name, 5_000, 128).unwrap();
            assert_eq!(r.scenario, *name);
            assert!(r.ns_per_packet > 0.0, "{name}");
        }
    }

    #[test]
    fn netem_reports_its_ratio_to_the_delay_pipe() {
        let r = scenario("netem", 20_000, 128).unwrap();
        assert_eq!(r.baseline.as_deref(), Some("delay10ms"));
        let (ns, base) = (r.ns_per_packet, r.baseline_ns_per_packet.unwrap());
        assert!((r.ratio.unwrap() - ns / base).abs() < 1e-9);
        let r = scenario("netem-sparse", 2_000, 128).unwrap();
        assert_eq!(r.baseline.as_deref(), Some("delay10ms-sparse"));
        // 1% lost, 1% copied: about as many delivered as offered.
        let mut e: Engine<u32> = Engine::new(1);
        setup(&mut e, "netem", 128).unwrap();
        let infos: Vec<PacketInfo> = (0..64).map(|i| packet(i, 128)).collect();
        for i in 0..100_000u64 {
            e.input(i * 100, infos[(i % 64) as usize], i as u32);
            drain(&mut e, i * 100);
        }
        let t = e.totals();
        let lost = t.drops_for(dummynet_engine::DropReason::Loss);
        assert!((800..1200).contains(&lost), "lost {lost}");
        assert!(
            (800..1200).contains(&t.duplicated),
            "copies {}",
            t.duplicated
        );
    }

    #[test]
    fn saturated_trace_and_slot_deliver_their_rate() {
        for (name, tolerance) in [("trace", 0.03), ("slot", 0.05)] {
            let r = scenario(name, 100_000, 128).unwrap();
            let (d, l) = (r.delivered_pps.unwrap(), r.line_rate_pps.unwrap());
            assert!(
                (d - l).abs() / l < tolerance,
                "{name}: delivered {d} vs {l}"
            );
            assert!(r.ns_per_delivered.unwrap() > r.ns_per_packet);
        }
        // 100 opportunities of 1504 bytes per ms.
        let l = scenario("trace", 10, 128).unwrap().line_rate_pps.unwrap();
        assert_eq!(l, 1_203_200_000.0 / 1024.0);
    }

    #[test]
    fn scenarios_can_be_listed() {
        let args = |s: &str| BenchArgs {
            scenario: Some(s.into()),
            sched: None,
            flows: None,
            packets: 1_000,
            size: 128,
            json: true,
            clock: None,
            workers: None,
            pipes: None,
        };
        let names: Vec<String> = run_inner(&args("delay10ms, jitter,trace"))
            .unwrap()
            .into_iter()
            .map(|r| r.scenario)
            .collect();
        assert_eq!(names, ["delay10ms", "jitter", "trace"]);
        assert!(run_inner(&args("delay10ms,nope")).is_err());
    }

    #[test]
    fn sched_cost_keeps_a_steady_backlog() {
        for kind in sched::REGISTRY.iter().map(|t| t.name) {
            let r = sched_cost(kind, 100, 10_000, 128).unwrap();
            assert_eq!(r.flows, Some(100));
            assert!(r.delivered_pps.unwrap() > 0.0);
        }
        assert!(sched_cost("nope", 1, 10, 128).is_err());
    }

    #[test]
    fn fq_flows_get_a_bucket_each() {
        for n in [1, 100, 10_000] {
            let infos = flow_infos("fq_codel", n, 128).unwrap();
            let mut buckets: Vec<u32> = infos.iter().map(|p| sched::bucket_of(&p.key, n)).collect();
            buckets.sort_unstable();
            buckets.dedup();
            assert_eq!(buckets.len(), n as usize);
        }
        assert_eq!(flow_infos("rr", 3, 128).unwrap()[2].key, packet(2, 128).key);
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(scenario("nope", 10, 128).is_err());
        let args = BenchArgs {
            scenario: None,
            sched: None,
            flows: Some(3),
            packets: 10,
            size: 128,
            json: true,
            clock: None,
            workers: None,
            pipes: None,
        };
        assert!(run_inner(&args).is_err());
        let args = BenchArgs {
            scenario: None,
            sched: None,
            flows: None,
            packets: 10,
            size: 5,
            json: true,
            clock: None,
            workers: None,
            pipes: None,
        };
        assert!(run_inner(&args).is_err());
    }
}
