//! `dummynet bench --workers N`: the sharded data plane's CPU costs, in
//! memory (no kernel I/O), on real threads: each worker "reads" its share
//! of the packets (packet i by worker i mod N, as RSS spreads flows),
//! classifies them on its replica, queues those bound for pipes it owns
//! and hands the rest over the rings, takes what the others hand it, and
//! releases what its pipes have due, on a virtual clock of its own.
//!
//! What it tells: the per-packet cost of classification plus pipe work on
//! one worker, and what a second worker adds (the ring hand-off, the cache
//! lines a crossing packet drags along) against what it takes away, with
//! one pipe (every packet ends on one worker: the others only classify)
//! and with two (one per worker).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use dummynet_engine::flow::proto;
use dummynet_engine::{BatchError, Direction, Engine, FlowKey, Nanos, PacketInfo, Verdict};
use serde::Serialize;

use dummynet_engine::Classified;

use super::{mesh, Handoff, Links, Routed, RING_SLOTS};

/// Packets a worker reads before it looks at its rings and its pipes, as
/// the live data plane reads a batch per port per turn.
const BATCH: u64 = 32;

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersReport {
    pub workers: usize,
    pub pipes: u32,
    pub packets: u64,
    pub size: u32,
    /// Packets through per second of wall time, all workers together.
    pub pps: f64,
    /// CPU time of all workers per packet, less the time they spun
    /// waiting with nothing to do (for room in a full ring, or at the end
    /// for the others): on a busy machine a worker that loses its CPU
    /// leaves the others spinning, which says nothing of the costs.
    pub cpu_ns_per_packet: f64,
    /// Each worker's CPU time per packet it read.
    pub worker_cpu_ns: Vec<f64>,
    /// Packets that crossed to another worker.
    pub handed: u64,
    /// Times a worker found the ring to another full and waited.
    pub ring_full_waits: u64,
    pub delivered: u64,
}

fn config(pipes: u32) -> String {
    let mut text = String::new();
    for p in 1..=pipes {
        text.push_str(&format!("pipe {p} config queue 100\n"));
    }
    // Source addresses 10.0.0.0/24 spread evenly over the pipes.
    for p in 1..=pipes {
        text.push_str(&format!(
            "add {} pipe {p} ip from 10.0.{}.0/24 to any\n",
            p * 100,
            p - 1
        ));
    }
    text
}

/// Why a bench run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The bench's own configuration does not parse: the line and the
    /// parser's words.
    #[error("line {line}: {message}")]
    Parse { line: usize, message: String },
    /// The engine refused the bench's configuration.
    #[error(transparent)]
    Apply(#[from] BatchError),
    /// A worker's own engine could not be configured.
    #[error("the bench configuration does not apply")]
    WorkerConfig,
    #[error("starting a worker thread: {source}")]
    Thread { source: std::io::Error },
    #[error("a worker thread panicked")]
    Panicked,
    /// The workers' counts do not add up to the packets read.
    #[error(
        "{workers} workers, {pipes} pipes: packets not accounted for: {packets} read, \
         {delivered} delivered, {dropped} dropped"
    )]
    Unaccounted {
        workers: usize,
        pipes: u32,
        packets: u64,
        delivered: u64,
        dropped: u64,
    },
}

fn engine(text: &str) -> Result<Engine<u32>, BenchError> {
    let cmds = crate::lang::commands(text, None)
        .map_err(|(line, message)| BenchError::Parse { line, message })?;
    let mut e = Engine::new(1);
    e.apply_all(0, cmds.into_iter().map(|(_, c)| c).collect())?;
    Ok(e)
}

/// Packet `i` of a 64-flow mix read by one of `workers`, its source in
/// the subnet of pipe `1 + (i / workers) mod pipes`: each worker reads
/// packets for every pipe in turn (the kernel's spreading knows nothing of
/// pipes), so with two pipes on two workers half of what each reads
/// crosses.
fn packet(i: u64, workers: u64, pipes: u32, size: u32) -> PacketInfo {
    let pipe = ((i / workers) % u64::from(pipes)) as u8;
    PacketInfo {
        len: size,
        key: FlowKey::v4(
            Ipv4Addr::new(10, 0, pipe, (i % 64) as u8),
            Ipv4Addr::new(10, 255, 0, 1),
            proto::UDP,
            (i % 64) as u16 + 1000,
            9,
        ),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    }
}

struct Tally {
    cpu: f64,
    read: u64,
    delivered: u64,
    dropped: u64,
    /// Times a ring was full and the worker waited.
    waits: u64,
    /// CPU time spent waiting (for room in a ring, or at the end for the
    /// others), with nothing to take: left out of `cpu`.
    idle: u64,
    links: super::LinkCounters,
    /// Wall time from the start to the end of this worker's work.
    span: (Instant, Instant),
}

fn cpu_now() -> Nanos {
    crate::clock::thread_cpu()
}

fn worker(
    text: &str,
    mut links: Links<u32>,
    packets: u64,
    pipes: u32,
    size: u32,
    start: &Barrier,
    done: &AtomicUsize,
) -> Result<Tally, BenchError> {
    // Made here, not by the spawning thread: each worker's engine in its
    // own thread's heap. Made side by side, two replicas' per-packet
    // counters shared cache lines, and the workers spent most of their
    // time passing those lines to each other (3 to 4 times the CPU a
    // packet).
    let Ok(mut engine) = engine(text) else {
        return Err(BenchError::WorkerConfig);
    };
    let (n, w) = (links.workers as u64, links.index as u64);
    let infos: Vec<PacketInfo> = (0..64 * n * u64::from(pipes))
        .map(|i| packet(i, n, pipes, size))
        .collect();
    let mut t = Tally {
        cpu: 0.0,
        read: 0,
        delivered: 0,
        dropped: 0,
        waits: 0,
        idle: 0,
        links: Default::default(),
        span: (Instant::now(), Instant::now()),
    };
    let count = |t: &mut Tally, v: &Verdict<u32>| match v {
        Verdict::Pass { .. } => t.delivered += 1,
        Verdict::Drop { .. } => t.dropped += 1,
        Verdict::Queued { .. } => {}
    };
    start.wait();
    let t0 = Instant::now();
    let cpu0 = cpu_now();
    let mut now: Nanos = 0;
    let mut i = w;
    while i < packets {
        let end = (i + BATCH * n).min(packets);
        while i < end {
            now = i * 100;
            let info = infos[(i % infos.len() as u64) as usize];
            if n == 1 {
                if let Routed::Here(v) = links.input(&mut engine, now, info, i as u32) {
                    count(&mut t, &v);
                }
            } else {
                // As `Links::input`, but a full ring is waited on (taking
                // this worker's own meanwhile) rather than a drop: the
                // bench measures costs, and a worker of a busy machine
                // loses its CPU now and then.
                match engine.classify(now, info, i as u32) {
                    Classified::Done(v) => count(&mut t, &v),
                    Classified::Shaped(shaped) => {
                        let to = links.owner_of(&engine, &shaped);
                        if to == links.index {
                            let v = engine.enqueue(now, shaped);
                            count(&mut t, &v);
                        } else {
                            let mut h = Handoff { at: now, shaped };
                            while let Err(back) = links.hand(to, h) {
                                h = back;
                                t.waits += 1;
                                let c0 = cpu_now();
                                let got =
                                    links.receive(&mut engine, |_, _, _, v| count(&mut t, &v));
                                if got == 0 {
                                    t.idle += cpu_now() - c0;
                                }
                                std::hint::spin_loop();
                            }
                        }
                    }
                }
            }
            t.read += 1;
            i += n;
        }
        links.receive(&mut engine, |_, _, _, v| count(&mut t, &v));
        while let Some(o) = engine.poll(now) {
            if o.delivered() {
                t.delivered += 1;
            } else {
                t.dropped += 1;
            }
        }
    }
    done.fetch_add(1, Ordering::AcqRel);
    // Take what the others still hand over until all have read their share.
    loop {
        let all = done.load(Ordering::Acquire) == n as usize;
        let c0 = cpu_now();
        let got = links.receive(&mut engine, |_, _, _, v| count(&mut t, &v));
        if got == 0 {
            t.idle += cpu_now() - c0;
        }
        if all && links.waiting() == 0 {
            break;
        }
        std::hint::spin_loop();
    }
    while let Some(d) = engine.next_deadline() {
        while let Some(o) = engine.poll(d.max(now)) {
            if o.delivered() {
                t.delivered += 1;
            } else {
                t.dropped += 1;
            }
        }
    }
    t.cpu = (cpu_now() - cpu0).saturating_sub(t.idle) as f64;
    t.links = links.counters;
    t.span = (t0, Instant::now());
    Ok(t)
}

/// One run of `packets` 64-flow packets of `size` bytes over `pipes`
/// unlimited pipes on `workers` threads.
pub fn run(
    workers: usize,
    pipes: u32,
    packets: u64,
    size: u32,
) -> Result<WorkersReport, BenchError> {
    let text = config(pipes);
    let start = Arc::new(Barrier::new(workers + 1));
    let done = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    engine(&text)?;
    for links in mesh::<u32>(workers, RING_SLOTS) {
        let (start, done, text) = (start.clone(), done.clone(), text.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("bench-worker-{}", links.index))
                .spawn(move || worker(&text, links, packets, pipes, size, &start, &done))
                .map_err(|source| BenchError::Thread { source })?,
        );
    }
    start.wait();
    let mut tallies = Vec::new();
    for h in handles {
        tallies.push(h.join().map_err(|_| BenchError::Panicked)??);
    }
    // From the first worker's start to the last one's end (this thread
    // may not run at all meanwhile).
    let first = tallies.iter().map(|t| t.span.0).min();
    let last = tallies.iter().map(|t| t.span.1).max();
    let wall = match (first, last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    }
    .max(1e-9);
    let delivered: u64 = tallies.iter().map(|t| t.delivered).sum();
    let dropped: u64 = tallies.iter().map(|t| t.dropped).sum();
    if delivered + dropped != packets {
        return Err(BenchError::Unaccounted {
            workers,
            pipes,
            packets,
            delivered,
            dropped,
        });
    }
    let cpu: f64 = tallies.iter().map(|t| t.cpu).sum();
    Ok(WorkersReport {
        workers,
        pipes,
        packets,
        size,
        pps: packets as f64 / wall,
        cpu_ns_per_packet: cpu / packets as f64,
        worker_cpu_ns: tallies
            .iter()
            .map(|t| t.cpu / t.read.max(1) as f64)
            .collect(),
        handed: tallies.iter().map(|t| t.links.handed_out).sum(),
        ring_full_waits: tallies.iter().map(|t| t.waits).sum(),
        delivered,
    })
}
