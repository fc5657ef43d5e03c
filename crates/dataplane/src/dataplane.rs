//! The data-plane loop: one thread, one engine, any number of backends.
//!
//! Each turn: read every backend (a batch each), run the arrivals through
//! the engine at the current clock time, release whatever the engine has
//! due, hand the batches to the kernel, answer control requests, then wait
//! for the next deadline or the next arrival. Control requests are applied
//! between packets, so a configuration change is atomic with respect to the
//! traffic, and the engine itself keeps queued packets across it.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use dummynet_engine::{Direction, DropReason, Engine, Nanos, PacketInfo, Target, Verdict};

use super::clock::{
    self, Clock, Lateness, LatenessHistogram, LatenessSummary, Pace, Rest, TimerWatch, Woke,
};
use super::observer::{self, Kind, ObserverStats, Record, Tap};
use super::sharded::{Broken, Done, Job, Worker};
use super::{Arrival, Backend, Carrier};

/// Default spin before a deadline. On the 2-vCPU VMs this was tuned on, a
/// `ppoll` timeout fires 15-80 µs late (p50 16 µs with a 50 µs spin); with
/// 300 µs the median lateness is about 1 µs. It costs a core only while
/// deadlines are closer together than that, i.e. under load.
pub const DEFAULT_SPIN: Nanos = 300_000;

/// The spin of a `SCHED_FIFO` data plane that is behind on its idle time
/// ([`Pace::Behind`]) before its timer has said how late it wakes: short
/// enough that a gap of a few hundred µs between departures is mostly
/// slept. After that, the spin covers the worst of the recent wake-ups
/// ([`TimerWatch`]), at least [`MIN_SHORT_SPIN`].
pub const SHORT_SPIN: Nanos = 100_000;
pub const MIN_SHORT_SPIN: Nanos = 20_000;

/// `SCHED_FIFO` priority of the data-plane thread when asked for: above
/// ordinary tasks, below the kernel's own real-time threads (50 and up).
pub const RT_PRIORITY: i32 = 10;

/// After a turn that received frames, the data plane polls its ports this
/// long before it sleeps (see [`clock::wait`]). Measured with 64-byte floods
/// through a bridge on veths: without it, every frame that found the data
/// plane asleep made its sender pay for the wake-up, and the sender slowed
/// to about half the rate the data plane could forward.
pub const BUSY_POLL: Nanos = 50_000;

/// While a batch of arrivals is processed, departures released in the
/// middle of it are handed to the kernel once the earliest has waited this
/// long, instead of at the end of the batch.
const FLUSH_SLACK: Nanos = 5_000;

/// The data plane wakes this long before a departure to release it from
/// the engine and run its `out` pass ahead of time, then spins until the
/// departure's time and only hands it to the kernel then (see
/// [`DataPlane::stage`]). Measured with pings through a bridge at 10 ms each
/// way: after a 10 ms sleep the release took 2.1-2.5 µs at p50 and about
/// 4 µs at p90 (cold caches), all of which was lateness; staged, the p50
/// hand-over is 0.1 µs after the deadline. The price: a packet arriving in
/// these last microseconds is read once the departure has gone.
const STAGE_LEAD: Nanos = 8_000;

/// In [`Precision::Timer`], the spin before a deadline while the timer has
/// not yet said how late it wakes, and the most it may become: the spin
/// follows the timer's median overshoot, so that the median wake-up lands
/// on the deadline, and stops there on a machine whose timer is worse.
pub const TIMER_FIRST_SPIN: Nanos = 10_000;
pub const TIMER_MAX_SPIN: Nanos = 50_000;

/// In [`Precision::Timer`], a long sleep wakes earlier still: by
/// 1/[`TIMER_GAP_SHARE`] of it, up to [`TIMER_GAP_SPIN`]. A vCPU that
/// sleeps long is the one a busy host gives away, and it comes back late
/// by up to hundreds of µs; spinning a small share of each gap absorbs
/// that for at most that share of a core (a ping every 10 ms: 3%), while
/// departures close together (a 50 Mbit/s link's, 240 µs apart) keep the
/// median's short spin.
pub const TIMER_GAP_SHARE: Nanos = 64;
pub const TIMER_GAP_SPIN: Nanos = 150_000;

/// At [`Precision::Timer`], arrivals stay in the kernel until the next
/// departure, and each runs at the time the kernel stamped on it, when every
/// backend stamps them and every one must spend at least this long inside
/// the engine ([`Engine::least_transit`]: the least delay of the pipes the
/// rules send them to). Below it, the wake-ups that bound the wait would
/// outnumber the arrivals'.
pub const LATE_MIN_TRANSIT: Nanos = 1_000_000;

/// A late read comes this long (or the timer's worst recent lateness, if
/// more) before a packet that arrived just after the previous read could
/// be due to leave.
pub const LATE_MARGIN: Nanos = 200_000;

/// Arrivals wait unread at most this long, however long IP packets stay
/// inside: frames that are not IP (ARP) cross the bridge at once, and a
/// host resolving its peer waits on them (a 1 s link would otherwise hold
/// an ARP request until its next departure). At worst 200 wake-ups a
/// second, only while departures are sparser than that.
pub const LATE_NON_IP: Nanos = 5_000_000;

/// Between late reads, at the rate the last read found, at most this share
/// of the kernel's room for unread arrivals fills.
const LATE_ROOM_SHARE: u64 = 4;

/// At a shutdown, ports that refused frames for lack of room get this long
/// to take them before they are dropped.
const SHUTDOWN_HELD: Nanos = 200_000_000;

/// At [`Precision::Timer`], how often the data plane checks that it keeps
/// the idle time its real-time budget asks for ([`Rest`]).
const PACE_EVERY: Nanos = 1_000_000;

/// How exactly the data plane releases departures, and what it spends on
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Precision {
    /// Sleep on the kernel's timer up to each departure, aimed so that the
    /// median wake-up lands on time, and spin only what is left (at most
    /// 50 µs); no polling after arrivals, and arrivals that carry the
    /// kernel's receive time wait in the kernel until the next departure
    /// whenever every one stays inside at least 1 ms. Departures leave
    /// within the timer's jitter (tens of µs on a VM) for a small share of
    /// a core: the default.
    #[default]
    Timer,
    /// Spin the last 300 µs (or `--spin-us`) before every departure,
    /// release it ahead and hand it over on the nanosecond, and poll the
    /// ports a while after every arrival: about a microsecond late, at the
    /// cost of a core whenever departures are closer together than the
    /// spin.
    Max,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Timer => "timer",
            Precision::Max => "max",
        }
    }
}

/// How the data plane runs: its scheduling, its precision and, at
/// [`Precision::Max`], how long it spins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneOptions {
    pub priority: Priority,
    pub precision: Precision,
    /// At [`Precision::Max`], spin (instead of sleeping) this long before a
    /// deadline.
    pub spin: Nanos,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        PlaneOptions {
            priority: Priority::default(),
            precision: Precision::default(),
            spin: DEFAULT_SPIN,
        }
    }
}

/// How one wait of the data plane goes: polling the ports for `busy`
/// first, then sleeping until `spin` before `until`, then spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPlan {
    /// Wake for this time (a departure's, or ahead of it to stage it).
    pub until: Option<Nanos>,
    pub spin: Nanos,
    pub busy: Nanos,
}

/// The wait at `now` before `deadline` (the engine's next), from the data plane's
/// precision and spin, whether the last turn received frames, whether it
/// is behind on the idle time its real-time budget asks for, and how late
/// its timer has lately woken (`timer_median`, `timer_worst`: `None`
/// before the first timed sleep). Pure, so it is tested on its own.
pub fn plan_wait(
    o: &PlaneOptions,
    now: Nanos,
    deadline: Option<Nanos>,
    received: bool,
    behind: bool,
    timer_median: Option<Nanos>,
    timer_worst: Option<Nanos>,
) -> WaitPlan {
    match o.precision {
        Precision::Timer => {
            let median = timer_median.unwrap_or(TIMER_FIRST_SPIN).min(TIMER_MAX_SPIN);
            let gap = deadline.map_or(0, |d| d.saturating_sub(now));
            WaitPlan {
                until: deadline,
                spin: median.max((gap / TIMER_GAP_SHARE).min(TIMER_GAP_SPIN)),
                busy: 0,
            }
        }
        Precision::Max => {
            let until = deadline.map(|d| d.saturating_sub(STAGE_LEAD));
            if behind {
                let short = timer_worst.unwrap_or(SHORT_SPIN);
                WaitPlan {
                    until,
                    spin: short.clamp(MIN_SHORT_SPIN.min(o.spin), o.spin),
                    busy: 0,
                }
            } else {
                WaitPlan {
                    until,
                    spin: o.spin,
                    busy: if received { BUSY_POLL } else { 0 },
                }
            }
        }
    }
}

/// How the data-plane thread asks to be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Priority {
    /// `SCHED_FIFO`, falling back to nice -20 without the privilege. The
    /// default: measured on a 2-vCPU VM with other work running, a thread
    /// at nice -20 still woke milliseconds late at p99 (nice only orders
    /// tasks within one cgroup), and a `SCHED_FIFO` one 7-13 µs late. It
    /// keeps the kernel's share of idle time (7% by default, see
    /// [`clock::Rest`]) so the kernel never stops it.
    #[default]
    Realtime,
    /// Nice -20 only.
    Nice,
}

/// A request from the control plane, answered on `reply`. The control
/// thread has already parsed and checked it: the data plane only applies a
/// typed command or copies what `show` and `stats` print, so that nothing
/// a client sends costs forwarding more than that.
pub struct Request {
    pub kind: RequestKind,
    pub reply: Sender<Answer>,
    pub ticket: Ticket,
}

pub enum RequestKind {
    /// Apply a parsed command, after telling the engine what the host
    /// looks like now (read on the control thread: /proc and netlink).
    Apply {
        command: Box<dummynet_engine::Command>,
        host: HostView,
    },
    /// Apply parsed commands as one unit: all of them or none
    /// (`Engine::apply_all`).
    ApplyAll {
        commands: Vec<dummynet_engine::Command>,
        host: HostView,
    },
    /// A copy of the engine's state, for `show`, rendered by the asker.
    Snapshot,
    /// `dummynet stats`.
    Stats,
    /// A backend opened off this thread (a joined shell's ports,
    /// [`super::join`]), to read and write from now on, with the commands
    /// that give it its pipes and rules (all or none). Refused, the
    /// backend comes back in the answer, to be closed off this thread.
    Attach {
        backend: Box<dyn Backend>,
        commands: Vec<dummynet_engine::Command>,
        host: HostView,
    },
    /// Takes the backend out of `slot` and applies `commands` (deleting
    /// its pipes and rules: what they hold is dropped). The backend comes
    /// back in the answer, to be closed off this thread.
    Detach {
        slot: usize,
        commands: Vec<dummynet_engine::Command>,
    },
}

/// What the data plane answers.
pub enum Answer {
    /// The engine's notes (values it brought within bounds), or why it
    /// refused the command.
    Applied(Result<Vec<dummynet_engine::ConfigNote>, dummynet_engine::ConfigError>),
    /// The notes of every command of a batch, or the one refused (and
    /// then none was applied).
    AppliedAll(Result<Vec<dummynet_engine::ConfigNote>, dummynet_engine::BatchError>),
    Snapshot {
        snap: Box<dummynet_engine::Snapshot>,
        now: Nanos,
    },
    Stats(Box<Report>),
    /// The slot the backend took, or why it was refused and the backend.
    Attached(Result<usize, (String, Box<dyn Backend>)>),
    /// The backend taken out (`None`: the slot held none), and what the
    /// commands said.
    Detached(
        Option<Box<dyn Backend>>,
        Result<Vec<dummynet_engine::ConfigNote>, dummynet_engine::BatchError>,
    ),
}

/// The addresses `me` matches and the routes `verrevpath` follows, as the
/// control thread read them for a command.
#[derive(Debug, Clone, Default)]
pub struct HostView {
    pub addrs: Vec<std::net::IpAddr>,
    pub routes: Option<Vec<dummynet_engine::config::Route>>,
}

/// Who acts on a request: the data plane, which takes it before acting,
/// or the asker, which abandons it when it stops waiting. Exactly one of
/// the two wins, so a client told "not applied" is never contradicted by
/// the command taking effect later.
#[derive(Clone, Default)]
pub struct Ticket(Arc<std::sync::atomic::AtomicU8>);

const TICKET_OPEN: u8 = 0;
const TICKET_TAKEN: u8 = 1;
const TICKET_ABANDONED: u8 = 2;

impl Ticket {
    /// The data plane's side: true if it may act on the request.
    pub fn take(&self) -> bool {
        self.0
            .compare_exchange(
                TICKET_OPEN,
                TICKET_TAKEN,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// The asker's side: true if the request will now never be acted on;
    /// false if the data plane has already taken it (its answer follows).
    pub fn abandon(&self) -> bool {
        self.0
            .compare_exchange(
                TICKET_OPEN,
                TICKET_ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}

/// The control plane's way in: requests plus a socket whose readability
/// wakes the data plane from its wait.
pub struct Inbox {
    pub requests: Receiver<Request>,
    pub wake: UnixStream,
}

/// What became of the packets a rule sent to one pipe or queue: delivered
/// out of it, or dropped there (on entry or inside), by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TargetCounts {
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub drops: [u64; DropReason::ALL.len()],
}

/// [`TargetCounts`] by pipe and queue, kept by the data plane as packets
/// leave the engine: a hash lookup and two adds per packet; an entry is
/// made the first time a target is seen and kept (at most one per pipe or
/// queue number that ever carried traffic).
///
/// Also counts the bridged frames that passed their `in` pass and went on
/// to their `out` pass: the engine counts each pass as a packet arriving
/// (and the first as delivered), the report counts frames.
#[derive(Debug, Default)]
pub struct TargetBook(
    std::collections::HashMap<Target, TargetCounts, TargetHasher>,
    u64,
);

/// Targets are two small numbers: FxHash is plenty, and cheap per packet.
type TargetHasher = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

impl TargetBook {
    fn delivered(&mut self, target: Option<Target>, bytes: u32) {
        if let Some(t) = target {
            let c = self.0.entry(t).or_default();
            c.delivered += 1;
            c.delivered_bytes += u64::from(bytes);
        }
    }

    fn dropped(&mut self, target: Option<Target>, reason: DropReason) {
        if let Some(t) = target {
            if let Some(i) = DropReason::ALL.iter().position(|r| *r == reason) {
                self.0.entry(t).or_default().drops[i] += 1;
            }
        }
    }

    fn forwarded(&mut self) {
        self.1 += 1;
    }

    fn list(&self) -> Vec<(Target, TargetCounts)> {
        self.0.iter().map(|(t, c)| (*t, *c)).collect()
    }
}

/// A line about the engine's memory for `stats` and the report at the end,
/// only when it calls for something: packets without a bound, a
/// configuration whose worst case exceeds the machine's memory (`total`),
/// or packets near their `held_limit`. Otherwise `None`; `ipfw memory`
/// shows every part, always.
pub fn memory_advice(m: &dummynet_engine::MemoryReport, total: Option<u64>) -> Option<String> {
    use dummynet_engine::stats::human_bytes;
    let now = human_bytes(m.now());
    let packets = m.part("packets");
    let Some(worst) = m.worst() else {
        return Some(format!(
            "memory: {now} now, and nothing bounds the packets held (no held_limit): a long \
             delay at a high rate can take all of this machine's memory; set a bound with \
             `sysctl net.inet.ip.dummynet.held_limit=SIZE` (or `run --memory-limit SIZE`)"
        ));
    };
    if let Some(total) = total.filter(|t| worst > *t) {
        let biggest = m.parts.iter().max_by_key(|p| p.worst.unwrap_or(0))?;
        let what = match biggest.name {
            "packets" => "lower `net.inet.ip.dummynet.held_limit` (or `run --memory-limit`)".to_string(),
            "queues" | "instances" | "timers" => format!(
                "lower `net.inet.ip.dummynet.instance_limit` (now {}: each masked pipe may make that \
                 many per-flow queues), or use narrower masks",
                m.instance_limit
            ),
            "states" => "lower `net.inet.ip.fw.dyn_max`".to_string(),
            _ => "see `dummynet ipfw memory`".to_string(),
        };
        return Some(format!(
            "memory: {now} now, but this configuration could take up to {} (more than this \
             machine's {}), mostly {}: {what}; `dummynet ipfw memory` shows each part",
            human_bytes(worst),
            human_bytes(total),
            biggest.name
        ));
    }
    if let Some(p) = packets.filter(|p| {
        p.worst
            .is_some_and(|w| p.now.saturating_mul(5) >= w.saturating_mul(4))
    }) {
        return Some(format!(
            "memory: the packets held take {} of at most {} (held_limit): arrivals beyond it \
             are dropped (`held-limit`); raise `net.inet.ip.dummynet.held_limit` if that is \
             not what you want",
            human_bytes(p.now),
            human_bytes(p.worst.unwrap_or(0))
        ));
    }
    None
}

/// This machine's memory (`MemTotal`), for [`memory_advice`].
fn mem_total() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Everything the data plane counted, reported at shutdown and by `stats`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Packets (a bridged frame once, though it passes the rules twice).
    pub arrived: u64,
    pub delivered: u64,
    /// Passes through the rules: `arrived` plus the bridged frames' `out`
    /// passes.
    pub passes: u64,
    pub dropped: u64,
    /// Drops by reason (`queue-full`, `plr`, `deleted`, ...), non-zero only.
    pub drops: Vec<(&'static str, u64)>,
    pub inside: u64,
    /// Packets an AQM marked ECN CE instead of dropping (delivered or inside).
    pub marked: u64,
    /// Copies `duplicate` made (each also in `arrived`), copies it could not
    /// make (a packet the kernel holds), and packets `corrupt` hit.
    pub duplicated: u64,
    pub duplicate_failed: u64,
    pub corrupted: u64,
    /// Scheduled commands (`at`): applied, refused, waiting, and how late
    /// the data plane reached them (ns; the last and the worst).
    pub schedule_applied: u64,
    pub schedule_failed: u64,
    pub schedule_pending: u64,
    pub schedule_cancelled: u64,
    pub schedule_late_last_ns: u64,
    pub schedule_late_max_ns: u64,
    pub schedule_last_error: Option<String>,
    pub lateness: LatenessSummary,
    /// Every hand-over since the start by how late (for `/metrics`).
    pub lateness_histogram: LatenessHistogram,
    /// What left each pipe and queue since the start (for `/metrics`).
    #[serde(skip)]
    pub targets: Vec<(Target, TargetCounts)>,
    /// What the data plane got: "SCHED_FIFO", "nice -20" or "normal".
    pub scheduling: &'static str,
    /// The process's memory is locked (no page faults on the data path).
    pub memory_locked: bool,
    /// Rests a `SCHED_FIFO` data plane forced on itself, and their total
    /// length in ns (see [`Rest`]).
    pub rests: u64,
    pub rest_ns: u64,
    /// `timer` or `max` ([`Precision`]).
    pub precision: &'static str,
    /// How late the kernel's timer has lately woken the data plane (ns, the
    /// median and the worst of its last timed sleeps): what a `timer`
    /// precision can promise. `None` before the first.
    pub timer_median_ns: Option<u64>,
    pub timer_worst_ns: Option<u64>,
    /// The data-plane thread's CPU time and the wall time since it started.
    pub cpu_ns: u64,
    pub wall_ns: u64,
    /// The data plane's wake-ups: for input, for a deadline, naps.
    pub wakes: [u64; 3],
    /// While arrivals are read late ([`LATE_MIN_TRANSIT`]), the least time
    /// every one must stay inside, which bounds how late; `None` while
    /// they are read as they come.
    pub late_reads_within_ns: Option<u64>,
    /// Meanwhile, the backends still read as their packets come (their
    /// packets may leave sooner).
    pub late_watched: usize,
    pub backends: Vec<(String, Vec<(String, u64)>)>,
    /// The engine's memory by part: (name, bytes now, bytes at worst for
    /// the configuration, `None` if unbounded), then the queues and
    /// scheduler instances that exist and `instance_limit`
    /// ([`dummynet_engine::Engine::memory`]; rendered off the data plane).
    pub memory: Vec<(&'static str, u64, Option<u64>)>,
    pub memory_counts: (u64, u64, u32),
    /// Why the data plane stopped by itself: a backend could not go on
    /// ([`Backend::failure`]). `None` when it was asked to stop.
    pub failure: Option<String>,
    /// Messages the daemon could not write to stderr (a full disk, a
    /// closed pipe), and the first error ([`super::say`]).
    pub stderr_lost: u64,
    pub stderr_error: Option<String>,
    /// The per-packet observer's counters (`--log`, captures, the event
    /// tap), when there is one.
    pub observer: Option<ObserverStats>,
    /// Data-plane workers (`run --workers N`), when more than one; the
    /// counts above are then their sums.
    pub workers: Option<usize>,
    /// A worker of several: its recent lateness samples, sorted, for the
    /// percentiles of all workers' ([`super::sharded::absorb`]).
    #[serde(skip)]
    pub lateness_recent: Vec<u64>,
}

impl Report {
    /// One line for a user at exit: the traffic carried and what it cost.
    pub fn cost(&self) -> String {
        let secs = |ns: u64| ns as f64 / 1e9;
        format!(
            "{} packets delivered in {:.1} s; emulator CPU {:.2} s ({:.1}% of a core), \
             precision {}, release lateness p50 {:.1} us, p99 {:.1} us",
            self.delivered,
            secs(self.wall_ns),
            secs(self.cpu_ns),
            100.0 * self.cpu_ns as f64 / self.wall_ns.max(1) as f64,
            self.precision,
            self.lateness.p50_ns as f64 / 1e3,
            self.lateness.p99_ns as f64 / 1e3,
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "packets: {} arrived, {} delivered, {} dropped, {} inside",
            self.arrived, self.delivered, self.dropped, self.inside
        )?;
        if self.marked > 0 {
            write!(f, " ({} ECN-marked)", self.marked)?;
        }
        if self.passes != self.arrived {
            write!(f, ", {} passes through the rules", self.passes)?;
        }
        writeln!(f)?;
        if self.duplicated + self.duplicate_failed + self.corrupted > 0 {
            writeln!(
                f,
                "impairments: {} duplicated ({} could not be copied), {} corrupted",
                self.duplicated, self.duplicate_failed, self.corrupted
            )?;
        }
        if self.schedule_applied
            + self.schedule_failed
            + self.schedule_pending
            + self.schedule_cancelled
            > 0
        {
            write!(
                f,
                "scheduled: {} applied, {} refused, {} pending, {} cancelled; \
                 late by {:.1} us last, {:.1} us worst",
                self.schedule_applied,
                self.schedule_failed,
                self.schedule_pending,
                self.schedule_cancelled,
                self.schedule_late_last_ns as f64 / 1e3,
                self.schedule_late_max_ns as f64 / 1e3
            )?;
            if let Some(e) = &self.schedule_last_error {
                write!(f, "; last refusal: {e}")?;
            }
            writeln!(f)?;
        }
        if !self.drops.is_empty() {
            let list: Vec<String> = self
                .drops
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            writeln!(f, "drops: {}", list.join(", "))?;
        }
        write!(f, "{} ({}", self.lateness, self.scheduling)?;
        if self.memory_locked {
            write!(f, ", memory locked")?;
        }
        if self.rests > 0 {
            write!(
                f,
                "; {} forced rests, {:.1} ms",
                self.rests,
                self.rest_ns as f64 / 1e6
            )?;
        }
        writeln!(f, ")")?;
        write!(f, "precision {}", self.precision)?;
        if let (Some(m), Some(w)) = (self.timer_median_ns, self.timer_worst_ns) {
            write!(
                f,
                ": the timer lately wakes {:.1} us late (median), {:.1} us at worst",
                m as f64 / 1e3,
                w as f64 / 1e3
            )?;
        }
        write!(
            f,
            "; CPU {:.2} s in {:.1} s; woke {} times for input, {} for a deadline, {} napping",
            self.cpu_ns as f64 / 1e9,
            self.wall_ns as f64 / 1e9,
            self.wakes[0],
            self.wakes[1],
            self.wakes[2]
        )?;
        match self.late_reads_within_ns {
            Some(t) => {
                write!(
                    f,
                    "; arrivals read at departures, run at their kernel times (every one stays {:.1} ms)",
                    t as f64 / 1e6
                )?;
                match self.late_watched {
                    0 => writeln!(f)?,
                    n => writeln!(
                        f,
                        ", but {n} backend{} read as they come (theirs may leave sooner)",
                        if n == 1 { "" } else { "s" }
                    )?,
                }
            }
            None => writeln!(f, "; arrivals read as they come")?,
        }
        if self.stderr_lost > 0 {
            writeln!(
                f,
                "stderr: {} messages could not be written: {}",
                self.stderr_lost,
                self.stderr_error.as_deref().unwrap_or("unknown error")
            )?;
        }
        let memory = dummynet_engine::MemoryReport {
            parts: self
                .memory
                .iter()
                .map(|&(name, now, worst)| dummynet_engine::stats::MemoryPart { name, now, worst })
                .collect(),
            queues: self.memory_counts.0,
            instances: self.memory_counts.1,
            instance_limit: self.memory_counts.2,
        };
        if let Some(advice) = memory_advice(&memory, mem_total()) {
            writeln!(f, "{advice}")?;
        }
        if let Some(o) = &self.observer {
            writeln!(f, "{o}")?;
        }
        if let Some(n) = self.workers {
            writeln!(f, "workers: {n} (the counts above are their sums)")?;
        }
        for (name, counters) in &self.backends {
            let list: Vec<String> = counters
                .iter()
                .filter(|(_, v)| *v != 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            writeln!(f, "{name}: {}", list.join(", "))?;
        }
        Ok(())
    }
}

/// What reading arrivals late needs to know ([`Precision::Timer`]; see
/// [`LATE_MIN_TRANSIT`]).
///
/// Judged backend by backend: a daemon with many joined shells has one
/// backend per link, and a link whose packets may leave at once (a first
/// shell with no delay) must not make every other link's arrivals be read
/// as they come. Its ports are watched; the others' wait in the kernel.
#[derive(Debug, Default)]
struct LateReads {
    /// Each backend slot's least transit: the least time every arrival it
    /// reads stays inside the engine; `Some(0)` when it cannot stamp its
    /// arrivals, `None` when it reads none (a vacant slot).
    transits: Vec<Option<Nanos>>,
    /// Arrivals the backends' kernel buffers hold unread, at least.
    room: usize,
    /// When the backends were last read, how long after the read before,
    /// what it found, and whether it stopped at a batch limit.
    read_at: Nanos,
    span: Nanos,
    got: usize,
    more: bool,
    /// The last wait left some backends' arrivals in the kernel.
    active: Option<LatePlan>,
}

/// A wait that leaves some backends' arrivals in the kernel
/// ([`LateReads::next_read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LatePlan {
    /// Read them all by then.
    until: Nanos,
    /// The least transit among the backends read late.
    transit: Nanos,
    /// A backend whose transit is less is watched (read as packets come).
    watch_below: Nanos,
}

impl LateReads {
    /// When to read next, before `deadline` (the next departure), if some
    /// backends' arrivals may wait until then: see
    /// [`DataPlane::late_until`]. `timer_worst` is the worst recent
    /// lateness of the timer. Pure, so it is tested on its own.
    fn next_read(&self, deadline: Nanos, timer_worst: Option<Nanos>) -> Option<LatePlan> {
        // (Worked out at each configuration change: see `reconfigured`.)
        let margin = timer_worst.unwrap_or(0).max(LATE_MARGIN);
        if self.more {
            return None;
        }
        let watch_below = LATE_MIN_TRANSIT.max(2 * margin);
        let transit = self
            .transits
            .iter()
            .flatten()
            .copied()
            .filter(|&t| t >= watch_below)
            .min()?;
        let mut until = self
            .read_at
            .saturating_add((transit - margin).min(LATE_NON_IP));
        if self.got > 0 {
            let room = (self.room as u64 / LATE_ROOM_SHARE).max(1);
            let fill = self.span.saturating_mul(room) / self.got as u64;
            until = until.min(self.read_at.saturating_add(fill));
        }
        Some(LatePlan {
            until: deadline.min(until),
            transit,
            watch_below,
        })
    }

    /// Whether slot `i`'s ports are watched under `plan` (all of them
    /// without one).
    fn watched(&self, i: usize, plan: Option<LatePlan>) -> bool {
        match (plan, self.transits.get(i)) {
            (None, _) => true,
            (Some(p), Some(Some(t))) => *t < p.watch_below,
            (Some(_), _) => false,
        }
    }
}

/// The data plane's backends, in slots that keep their place: a backend
/// attached at run time (`shell --join`: [`RequestKind::Attach`]) takes a
/// vacant slot or a new one, and one detached leaves its slot vacant. A
/// packet carries its backend's slot and the slot's generation
/// ([`Carrier::backend`]), so one read by a detached backend is never sent
/// out of the backend that took its slot since.
pub struct Backends {
    slots: Vec<Box<dyn Backend>>,
    generations: Vec<u16>,
    vacant: Vec<bool>,
}

impl Backends {
    fn new(backends: Vec<Box<dyn Backend>>) -> Self {
        let n = backends.len();
        Backends {
            slots: backends,
            generations: vec![0; n],
            vacant: vec![false; n],
        }
    }

    /// What a packet read by slot `i` carries ([`Carrier::backend`]).
    fn id(&self, i: usize) -> u32 {
        let generation = self.generations.get(i).copied().unwrap_or(0);
        (u32::from(generation) << 16) | (i as u32 & 0xffff)
    }

    /// Puts `b` in the first vacant slot (or a new one, up to
    /// [`MAX_BACKENDS`]); returns the slot, or gives `b` back.
    fn attach(&mut self, b: Box<dyn Backend>) -> Result<usize, Box<dyn Backend>> {
        if let Some(i) = self.vacant.iter().position(|v| *v) {
            self.slots[i] = b;
            self.vacant[i] = false;
            return Ok(i);
        }
        if self.slots.len() >= MAX_BACKENDS {
            return Err(b);
        }
        self.slots.push(b);
        self.generations.push(0);
        self.vacant.push(false);
        Ok(self.slots.len() - 1)
    }

    fn has_room(&self) -> bool {
        self.slots.len() < MAX_BACKENDS || self.vacant.iter().any(|v| *v)
    }

    /// Takes the backend out of slot `i`, leaving it vacant for a later
    /// generation.
    fn detach(&mut self, i: usize) -> Option<Box<dyn Backend>> {
        if self.vacant.get(i) != Some(&false) {
            return None;
        }
        self.vacant[i] = true;
        self.generations[i] = self.generations[i].wrapping_add(1);
        Some(std::mem::replace(&mut self.slots[i], Box::new(Vacant)))
    }

    /// Backends attached (vacant slots left out).
    pub fn attached(&self) -> usize {
        self.vacant.iter().filter(|v| !**v).count()
    }
}

/// Most backend slots: a packet carries its slot in 16 bits.
pub const MAX_BACKENDS: usize = 1 << 16;

/// What a detached backend leaves in its slot: no descriptors, no packets,
/// and no say in how late arrivals may be read.
struct Vacant;

impl Backend for Vacant {
    fn describe(&self) -> String {
        "vacant".into()
    }
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
    fn receive(&mut self, _: &mut Engine<Carrier>, _: &mut Vec<Arrival>) -> bool {
        false
    }
    fn late_reading(&self) -> Option<super::LateReading> {
        Some(super::LateReading {
            room: usize::MAX,
            ifaces: Vec::new(),
        })
    }
    fn complete(&mut self, _: Carrier, _: bool) {}
    fn flush(&mut self) {}
    fn stats(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

pub struct DataPlane {
    pub engine: Engine<Carrier>,
    backends: Backends,
    clock: Clock,
    lateness: Lateness,
    targets: TargetBook,
    inbox: Option<Inbox>,
    stop: Arc<AtomicBool>,
    options: PlaneOptions,
    arrivals: Vec<Arrival>,
    late: LateReads,
    /// The engine configuration epoch last looked at ([`Self::reconfigured`]).
    epoch: Option<u64>,
    /// Earliest departure time among packets released but not yet handed
    /// to the kernel.
    due: Option<Nanos>,
    /// When the first of those was released (clock time): it is handed
    /// over once it has waited [`FLUSH_SLACK`] since, even mid-batch.
    due_since: Nanos,
    /// The share of the CPU a `SCHED_FIFO` data plane leaves to others.
    rest: Option<Rest>,
    timer: TimerWatch,
    /// The last turn received something: poll a while before sleeping.
    busy: bool,
    /// The control socket was readable at the last wake-up (or nothing has
    /// looked yet): only then is it read, not on every turn.
    inbox_ready: bool,
    /// Wake-ups: for input, for a deadline, and naps with neither.
    wakes: [u64; 3],
    /// At [`Precision::Timer`], when the real-time budget is next looked at
    /// (a CPU clock read is a system call; once a millisecond is plenty).
    next_pace: Nanos,
    scheduling: &'static str,
    memory_locked: bool,
    /// Why a backend stopped the data plane ([`Backend::failure`]).
    failure: Option<String>,
    /// Where `log` rules' matches go (written off this thread).
    rule_log: Option<super::rulelog::RuleLog>,
    /// The per-packet observer's end, if there is one ([`observer`]).
    tap: Option<Tap>,
    /// The next packet's number ([`Carrier::id`]).
    next_id: u64,
    /// This data plane's part in a sharded one (`run --workers N`):
    /// [`super::sharded`]. `None`: the only worker, today's path.
    worker: Option<Worker>,
}

impl DataPlane {
    pub fn new(
        engine: Engine<Carrier>,
        backends: Vec<Box<dyn Backend>>,
        inbox: Option<Inbox>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        DataPlane {
            engine,
            backends: Backends::new(backends),
            clock: Clock::new(),
            lateness: Lateness::default(),
            targets: TargetBook::default(),
            inbox,
            stop,
            options: PlaneOptions::default(),
            arrivals: Vec::with_capacity(256),
            late: LateReads::default(),
            epoch: None,
            due: None,
            due_since: 0,
            rest: None,
            timer: TimerWatch::default(),
            busy: false,
            inbox_ready: true,
            wakes: [0; 3],
            next_pace: 0,
            scheduling: "normal",
            memory_locked: false,
            failure: None,
            rule_log: None,
            tap: None,
            next_id: 0,
            worker: None,
        }
    }

    /// Makes this data plane one worker of a sharded one (see
    /// [`super::sharded`]); its engine must be configured as the others'.
    /// Its engine counts `limit` states in the table the workers share.
    pub fn with_worker(mut self, worker: Option<Worker>) -> Self {
        if let Some(w) = &worker {
            self.clock = w.clock();
            self.engine.share_limits(w.limits());
            // Ids unique across the workers ([`observer::ID_WORKER_SHIFT`]).
            self.next_id = observer::first_id(w.index());
        }
        self.worker = worker;
        self
    }

    /// Hands each packet event to an observer ([`observer::Observer`]).
    pub fn with_tap(mut self, tap: Option<Tap>) -> Self {
        self.tap = tap;
        self
    }

    /// Chooses how the data-plane thread is scheduled and how long it
    /// spins before a deadline (before [`Self::run`]).
    pub fn with_options(mut self, o: PlaneOptions) -> Self {
        self.options = o;
        self
    }

    /// Runs until the stop flag is set (or a backend fails:
    /// [`Report::failure`]), then shuts down in order: stop intercepting,
    /// release what is inside (delivered as if its time had come, so no
    /// connection is left hanging), and report.
    pub fn run(mut self) -> Report {
        clock::tighten_timer_slack();
        // Best effort, like the scheduling below (needs CAP_IPC_LOCK or a
        // large enough RLIMIT_MEMLOCK); `stats` says whether it worked.
        self.memory_locked = dummynet_io::rt::lock_memory().is_ok();
        // Best effort: without CAP_SYS_NICE the thread keeps normal
        // scheduling, and `stats` says so.
        self.scheduling = match self.options.priority {
            Priority::Realtime if dummynet_io::rt::set_fifo(RT_PRIORITY).is_ok() => {
                self.rest = Rest::for_this_kernel();
                "SCHED_FIFO"
            }
            _ if dummynet_io::rt::set_nice(-20).is_ok() => "nice -20",
            _ => "normal",
        };
        if let Some(tap) = &mut self.tap {
            let r = self.clock.realtime();
            tap.start_clock(r.wall.saturating_sub(r.clock), self.clock);
        }
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(tap) = &mut self.tap {
                tap.refresh();
            }
            if let Some(why) = self.backends.slots.iter().find_map(|b| b.failure()) {
                self.failure = Some(why);
                break;
            }
            if let Some(w) = &self.worker {
                // Another worker stopped: so does this one, saying why.
                if let Some(why) = w.broken().filter(|_| !self.stop.load(Ordering::Relaxed)) {
                    self.failure = Some(why);
                    break;
                }
                self.shard_turn();
            }
            // Arrivals and the departures due among them, in time order,
            // then whatever else is due.
            self.receive_all();
            self.release(self.clock.now());
            self.flush_all();
            self.serve_control();
            self.reconfigured();
            if self.engine.has_log() {
                self.rule_log
                    .get_or_insert_with(super::rulelog::RuleLog::start)
                    .take(&mut self.engine);
            }
            if let (Some(tap), Some(_)) = (&self.tap, &self.worker) {
                // What the merge of the workers' records waits for.
                tap.floor(self.engine.now(), self.late.active.is_some());
            }
            if let Some(d) = self.wait() {
                self.stage(d);
            }
        }
        for b in self.backends.slots.iter_mut() {
            b.stop_intercepting();
        }
        // Read what is already in the sockets, then let everything out:
        // following packets only, since a repeating schedule never ends
        // (steps due before a packet's time still run, in order).
        self.receive_all();
        let now = self.clock.now();
        while let Some(d) = self.engine.next_packet_deadline() {
            self.release(d.max(now));
        }
        // Released ahead of time on purpose: not lateness.
        self.due = None;
        self.flush_all();
        // Frames a port refused for lack of room get a little longer
        // (bounded) to leave, then what is still held is dropped.
        let give_up = self.clock.now().saturating_add(SHUTDOWN_HELD);
        while self.backends.slots.iter().any(|b| b.holding()) && self.clock.now() < give_up {
            std::thread::sleep(std::time::Duration::from_nanos(super::held::RETRY));
            self.flush_all();
        }
        for b in self.backends.slots.iter_mut() {
            b.drop_held();
        }
        self.flush_all();
        match self.worker.take() {
            Some(w) => self.shard_end(w),
            None => self.report(),
        }
    }

    /// Reads a batch from every backend and runs it through the engine in
    /// time order, each arrival at the time the kernel received it (when
    /// the backend says; at the read otherwise), never before what the
    /// engine has already run. Departures that fell due before an arrival
    /// leave before it is run, and are handed to the kernel once they have
    /// waited [`FLUSH_SLACK`], so a long batch cannot hold back a delayed
    /// packet by more than that.
    fn receive_all(&mut self) {
        let read_at = self.clock.now();
        let mut more = false;
        for i in 0..self.backends.slots.len() {
            let first = self.arrivals.len();
            let id = self.backends.id(i);
            more |= self.backends.slots[i].receive(&mut self.engine, &mut self.arrivals);
            for a in &mut self.arrivals[first..] {
                a.carrier.backend = id;
            }
        }
        let late = &mut self.late;
        late.span = read_at.saturating_sub(late.read_at);
        late.read_at = read_at;
        late.got = self.arrivals.len();
        late.more = more;
        let mut arrivals = std::mem::take(&mut self.arrivals);
        self.busy = !arrivals.is_empty();
        if !arrivals.is_empty() {
            let real = self.clock.realtime();
            for a in &mut arrivals {
                if a.stamp_ns == 0 {
                    a.stamp_ns = real.wall;
                }
            }
            // Two ports' rings, each in order, read one after the other.
            if !arrivals.is_sorted_by_key(|a| a.stamp_ns) {
                arrivals.sort_by_key(|a| a.stamp_ns);
            }
            for Arrival {
                info,
                mut carrier,
                stamp_ns,
            } in arrivals.drain(..)
            {
                let at = real.arrival(stamp_ns, self.engine.now());
                carrier.id = self.next_id;
                self.next_id += 1;
                self.release(at);
                if let Some(tap) = self.tap.as_mut().filter(|t| t.on) {
                    arrived(tap, &self.engine, at, &info, &carrier);
                }
                // Measured from the release, not from the departure time: an
                // arrival read late releases what was due long ago, and the
                // batch should still go out whole.
                if self.due.is_some()
                    && self.clock.now().saturating_sub(self.due_since) >= FLUSH_SLACK
                {
                    self.flush_all();
                }
                let id = (carrier.id, carrier.copy);
                let Some(verdict) =
                    route(&mut self.engine, self.worker.as_mut(), at, info, carrier)
                else {
                    continue;
                };
                let mut s = Settle {
                    engine: &mut self.engine,
                    backends: &mut self.backends,
                    targets: &mut self.targets,
                    tap: &mut self.tap,
                    worker: self.worker.as_mut(),
                    marked: false,
                };
                s.settle(at, info, verdict, None, id);
            }
        }
        self.arrivals = arrivals;
        if let Some(w) = &mut self.worker {
            w.ring_bells();
        }
    }

    /// At [`Precision::Timer`], when to read arrivals next if they may wait
    /// in the kernel until then: the next departure, or earlier if a packet
    /// arriving just after the last read could be due before it (less
    /// [`LATE_MARGIN`]), or if the kernel's room for unread arrivals would
    /// fill a [`LATE_ROOM_SHARE`]th. `None` when they must be read as they
    /// come: nothing is inside (nothing to wake for anyway), the last read
    /// stopped at a batch limit, some backend cannot stamp its arrivals,
    /// or some may leave sooner than [`LATE_MIN_TRANSIT`].
    fn late_until(&mut self, deadline: Option<Nanos>) -> Option<LatePlan> {
        if self.options.precision != Precision::Timer {
            return None;
        }
        self.late.next_read(deadline?, self.timer.worst())
    }

    /// After any change of the engine's configuration (a command, a
    /// scheduled step; and once at the start): works out again how late
    /// arrivals may be read, and lets the backends follow.
    fn reconfigured(&mut self) {
        let epoch = self.engine.config_epoch();
        if self.epoch == Some(epoch) {
            return;
        }
        self.epoch = Some(epoch);
        let mut room = usize::MAX;
        let engine = &self.engine;
        self.late.transits = self
            .backends
            .slots
            .iter()
            .map(|b| match b.late_reading() {
                None => Some(0),
                Some(r) => {
                    room = room.min(r.room);
                    r.ifaces.into_iter().map(|i| engine.least_transit(i)).min()
                }
            })
            .collect();
        self.late.room = room;
        for b in self.backends.slots.iter_mut() {
            b.reconfigured(&self.engine);
        }
        if let Some(tap) = &mut self.tap {
            tap.reconfigured(&self.engine, self.clock.now());
        }
    }

    /// Everything due by `now` leaves the engine (into the backends' send
    /// batches; [`Self::flush_all`] hands those to the kernel).
    fn release(&mut self, now: Nanos) {
        if self.engine.next_deadline().is_none_or(|d| d > now) {
            return;
        }
        while let Some(out) = self.engine.poll(now) {
            match out.drop {
                None => self.targets.delivered(out.target, out.info.len),
                Some(reason) => self.targets.dropped(out.target, reason),
            }
            if out.delivered() {
                // Leaving a pipe is passing it: a bridged frame still has its
                // `out` pass to run, which `settle` does.
                let id = (out.payload.id, out.payload.copy);
                let pass = Verdict::Pass {
                    payload: out.payload,
                    rule: out.rule.unwrap_or(0),
                };
                let mut s = Settle {
                    engine: &mut self.engine,
                    backends: &mut self.backends,
                    targets: &mut self.targets,
                    tap: &mut self.tap,
                    worker: self.worker.as_mut(),
                    marked: out.marked,
                };
                // Lateness is counted for what goes to the kernel now, not
                // for the engine's inner timers (the end of a transmission
                // before the delay line) nor for a packet the `out` pass
                // sends into another pipe.
                if s.settle(now, out.info, pass, out.target, id) {
                    if self.due.is_none() {
                        self.due_since = self.clock.now();
                    }
                    self.due = Some(self.due.map_or(out.at, |e| e.min(out.at)));
                }
            } else {
                if let Some(tap) = self.tap.as_mut().filter(|t| t.on) {
                    let r = Record {
                        len: out.info.len,
                        dir: out.info.dir,
                        rule: out.rule,
                        target: out.target,
                        reason: out.drop,
                        ..Record::new(Kind::Drop, out.at, (out.payload.id, out.payload.copy))
                    };
                    tap.push(&self.engine, r, None);
                }
                complete(&mut self.backends, out.payload, false);
            }
        }
    }

    /// Hands every send batch to the kernel, and records how late the
    /// earliest departure in it was.
    fn flush_all(&mut self) {
        // Measured as the batch goes in: what the kernel then does with it
        // (on a veth, the receiver's whole stack, inline) is not the
        // emulator's delay.
        if let Some(due) = self.due.take() {
            self.lateness.record(self.clock.now(), due);
        }
        for b in self.backends.slots.iter_mut() {
            b.flush();
            // Delivered by the engine, then refused: drops in its books.
            let unsent = b.take_unsent();
            if unsent > 0 {
                self.engine.unsent(DropReason::TxFailed, unsent);
            }
        }
    }

    /// Serves the control inbox at once, as a turn does when its wake
    /// socket is readable: for the control plane's tests.
    #[doc(hidden)]
    pub fn serve_inbox_now(&mut self) {
        self.inbox_ready = true;
        self.serve_control();
    }

    /// The engine, as the data plane holds it between turns.
    pub fn engine(&self) -> &Engine<Carrier> {
        &self.engine
    }

    fn serve_control(&mut self) {
        let Some(inbox) = self.inbox.as_mut().filter(|_| self.inbox_ready) else {
            return;
        };
        self.inbox_ready = false;
        let mut buf = [0u8; 64];
        let hung_up = loop {
            match inbox.wake.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // WouldBlock: drained.
                Err(_) => break false,
            }
        };
        let pending: Vec<Request> = inbox.requests.try_iter().collect();
        if hung_up {
            // The control plane is gone (or there never was one: a demo or
            // shell without a socket), so nothing more will come. A socket
            // whose peer has closed polls readable forever, and left in the
            // wait it would turn every sleep into a spin.
            self.inbox = None;
        }
        for req in pending {
            if !req.ticket.take() {
                // The asker gave up waiting and said so: not applied.
                continue;
            }
            let kind = match self.sharded_request(req.kind) {
                Ok(answer) => {
                    let _ = req.reply.send(answer);
                    continue;
                }
                Err(kind) => kind,
            };
            let answer = match kind {
                RequestKind::Apply { command, host } => {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    Answer::Applied(
                        self.engine
                            .apply(now, *command)
                            .map(|()| self.engine.take_notes()),
                    )
                }
                RequestKind::ApplyAll { commands, host } => {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    Answer::AppliedAll(self.engine.apply_all(now, commands))
                }
                RequestKind::Snapshot => Answer::Snapshot {
                    snap: Box::new(self.engine.snapshot()),
                    now: self.clock.now(),
                },
                RequestKind::Stats => Answer::Stats(Box::new(self.report())),
                RequestKind::Attach {
                    backend,
                    commands,
                    host,
                } => {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    if !self.backends.has_room() {
                        let why = format!("no room for another backend ({MAX_BACKENDS})");
                        let _ = req.reply.send(Answer::Attached(Err((why, backend))));
                        continue;
                    }
                    let mut backend = backend;
                    backend.attached(&mut self.engine);
                    match self.engine.apply_all(now, commands) {
                        Err(e) => Answer::Attached(Err((e.to_string(), backend))),
                        Ok(_) => match self.backends.attach(backend) {
                            Ok(slot) => {
                                // The new ports count in how late arrivals
                                // may be read, and learn the configuration.
                                self.epoch = None;
                                Answer::Attached(Ok(slot))
                            }
                            Err(b) => Answer::Attached(Err((
                                format!("no room for another backend ({MAX_BACKENDS})"),
                                b,
                            ))),
                        },
                    }
                }
                RequestKind::Detach { slot, commands } => {
                    let taken = self.backends.detach(slot);
                    let now = self.clock.now();
                    let applied = self.engine.apply_all(now, commands);
                    self.epoch = None;
                    Answer::Detached(taken, applied)
                }
            };
            // The client may have gone; nothing to do about it.
            let _ = req.reply.send(answer);
        }
    }

    /// Waits for an arrival, a control request or the next departure, as
    /// [`plan_wait`] plans it. Returns that departure's time when it woke
    /// for it (at [`Precision::Max`], [`STAGE_LEAD`] ahead of time, for
    /// [`Self::stage`]).
    fn wait(&mut self) -> Option<Nanos> {
        // Not `next_deadline`: a transmission ending before a delay line
        // moves a packet only inside the engine, which catches up on it at
        // its own time whenever it is next driven.
        let deadline = self.engine.next_output_deadline();
        let late = self.late_until(deadline);
        self.late.active = late;
        let sharded = self.worker.is_some();
        // The control socket first, so that its readiness is always among
        // the 64 bits `Woke::Ready` carries (with more than 63 backend
        // descriptors, a joined shell's ports, it would otherwise have to
        // be read on every wake-up).
        let mut fds: Vec<BorrowedFd<'_>> = Vec::new();
        if let Some(inbox) = &self.inbox {
            fds.push(inbox.wake.as_fd());
        }
        let first_backend_fd = fds.len();
        for (i, b) in self.backends.slots.iter().enumerate() {
            if self.late.watched(i, late) {
                fds.extend(b.fds());
            }
        }
        let backend_end = fds.len();
        // A worker of several: tell the others what was handed to them,
        // and sleep only if no job or hand-off is waiting; its bell last.
        if let Some(w) = &mut self.worker {
            w.ring_bells();
            if !w.going_to_sleep() {
                return None;
            }
            fds.push(w.bell_fd());
        }
        let now = self.clock.now();
        let look = self.options.precision == Precision::Max || now >= self.next_pace;
        let pace = match self.rest.as_mut().filter(|_| look) {
            Some(rest) => match rest.pace(now, clock::thread_cpu()) {
                Pace::Rest(ns) => {
                    rest.take(ns);
                    // Whatever fell due meanwhile goes at the top of the loop.
                    return None;
                }
                pace => pace,
            },
            None => Pace::Fine,
        };
        let mut plan = plan_wait(
            &self.options,
            now,
            late.map(|p| p.until).or(deadline),
            self.busy,
            pace == Pace::Behind,
            self.timer.median(),
            self.timer.spin_needed(),
        );
        // A port holds frames it refused: try them again soon, whatever
        // else is due (a wake-up for this is not one for a departure).
        let retry = now.saturating_add(super::held::RETRY);
        let retrying =
            self.backends.slots.iter().any(|b| b.holding()) && plan.until.is_none_or(|u| u > retry);
        if retrying {
            plan.until = Some(retry);
            plan.spin = plan.spin.min(super::held::RETRY / 2);
        }
        if look {
            self.next_pace = now + PACE_EVERY;
        }
        // A worker of several, every port watched: whatever comes wakes it,
        // and the merge of the workers' records need not wait for it
        // meanwhile (said only here, around the wait itself: not while it
        // rests, ports unwatched).
        let tap = self.tap.as_ref().filter(|_| sharded && late.is_none());
        if let Some(tap) = tap {
            tap.sleeping(self.engine.next_deadline().unwrap_or(Nanos::MAX));
        }
        let woke = clock::wait(
            &self.clock,
            &fds,
            plan.until,
            plan.spin,
            plan.busy,
            &mut self.timer,
        );
        if let Some(tap) = tap {
            tap.woke();
        }
        // The control socket, when there is one, is the first descriptor.
        if let (Woke::Ready { any, .. }, Some(_)) = (woke, &self.inbox) {
            self.inbox_ready |= any & 1 != 0;
        }
        // A backend's descriptor with an error polls ready at once until the
        // backend deals with it (the control socket's hang-up is seen by
        // reading it). Which ones is asked only then, and of every backend
        // descriptor: one beyond the first 64 left unreported would make
        // every later wait return at once, a spin until its backend left.
        let failed: Vec<RawFd> = match woke {
            Woke::Ready { failed: true, .. } => {
                let backend_fds = &fds[first_backend_fd..backend_end];
                clock::failed_fds(backend_fds)
                    .into_iter()
                    .filter_map(|i| backend_fds.get(i).map(|fd| fd.as_raw_fd()))
                    .collect()
            }
            _ => Vec::new(),
        };
        drop(fds);
        if let Some(w) = &mut self.worker {
            w.woke();
        }
        for fd in failed {
            for b in self.backends.slots.iter_mut() {
                b.fd_failed(fd);
            }
        }
        self.wakes[match woke {
            Woke::Ready { .. } => 0,
            Woke::Deadline => 1,
            Woke::Nap => 2,
        }] += 1;
        // Staged only at `max`: at `timer`, what arrived meanwhile runs
        // first, at its own times (the top of the loop).
        deadline.filter(|_| {
            woke == Woke::Deadline && !retrying && self.options.precision == Precision::Max
        })
    }

    /// Releases what falls due at `d` ahead of time (the engine's work and
    /// the `out` pass, slow after a sleep has let the caches go cold), spins
    /// until `d` without looking at the ports, and only then hands it to
    /// the kernel. Never early: the hand-over waits for the clock.
    fn stage(&mut self, d: Nanos) {
        self.release(d);
        if self.due.is_some() {
            clock::spin_until(&self.clock, d);
            self.flush_all();
        }
    }

    pub fn report(&mut self) -> Report {
        let (stderr_lost, stderr_error) = super::say::stderr_lost().unzip();
        let stderr_lost = stderr_lost.unwrap_or(0);
        let t = self.engine.totals();
        let sched = self.engine.schedule_stats();
        let memory = self.engine.memory();
        Report {
            memory: memory
                .parts
                .iter()
                .map(|p| (p.name, p.now, p.worst))
                .collect(),
            memory_counts: (memory.queues, memory.instances, memory.instance_limit),
            // Frames, not passes: a bridged frame's `out` pass is not
            // another packet, and its `in` pass did not deliver it. With
            // workers, one worker may count the forward and another the
            // pass: each report may be "negative", their (wrapping) sum
            // is not ([`super::sharded::absorb`]).
            arrived: t.arrived.wrapping_sub(self.targets.1),
            delivered: t.delivered.wrapping_sub(self.targets.1),
            passes: t.arrived,
            dropped: t.dropped(),
            drops: dummynet_engine::DropReason::ALL
                .iter()
                .zip(t.drops)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.as_str(), n))
                .collect(),
            inside: t.inside,
            marked: t.marks,
            duplicated: t.duplicated,
            duplicate_failed: t.duplicate_failed,
            corrupted: t.corrupted,
            schedule_applied: sched.applied,
            schedule_failed: sched.failed,
            schedule_pending: sched.pending as u64,
            schedule_cancelled: sched.cancelled,
            schedule_late_last_ns: sched.last_late,
            schedule_late_max_ns: sched.max_late,
            schedule_last_error: sched.last_error.map(|(_, e)| e),
            lateness: self.lateness.summary(),
            lateness_histogram: self.lateness.histogram(),
            targets: self.targets.list(),
            scheduling: self.scheduling,
            memory_locked: self.memory_locked,
            rests: self.rest.as_ref().map_or(0, |r| r.rests),
            rest_ns: self.rest.as_ref().map_or(0, |r| r.rest_ns),
            precision: self.options.precision.as_str(),
            timer_median_ns: self.timer.median(),
            timer_worst_ns: self.timer.worst(),
            cpu_ns: clock::thread_cpu(),
            wall_ns: self.clock.now(),
            wakes: self.wakes,
            late_reads_within_ns: self.late.active.map(|p| p.transit),
            late_watched: self.late.active.map_or(0, |p| {
                (0..self.late.transits.len())
                    .filter(|&i| self.late.watched(i, Some(p)))
                    .count()
            }),
            backends: self
                .backends
                .slots
                .iter_mut()
                .zip(&self.backends.vacant)
                .filter(|(_, vacant)| !**vacant)
                .map(|(b, _)| (b.describe(), b.stats()))
                .collect(),
            failure: self.failure.clone(),
            stderr_lost,
            stderr_error,
            observer: self.tap.as_ref().map(Tap::stats),
            workers: None,
            lateness_recent: Vec::new(),
        }
    }
}

/// Hands a packet back to the backend that read it, if it is still
/// attached: one detached since ([`RequestKind::Detach`]) has left a vacant
/// slot, or a slot taken by another backend of a later generation, and the
/// packet is let go.
fn complete(backends: &mut Backends, carrier: Carrier, deliver: bool) {
    let slot = (carrier.backend & 0xffff) as usize;
    let generation = (carrier.backend >> 16) as u16;
    if backends.generations.get(slot) == Some(&generation) {
        if let Some(b) = backends.slots.get_mut(slot) {
            b.complete(carrier, deliver);
        }
    }
}

/// An arrival's record, with its bytes if the capture of what enters is on.
fn arrived(tap: &mut Tap, engine: &Engine<Carrier>, at: Nanos, info: &PacketInfo, c: &Carrier) {
    let r = Record {
        len: info.len,
        dir: info.dir,
        iface: match info.dir {
            Direction::In => info.recv_if,
            Direction::Out => info.xmit_if,
        },
        bridge_to: c.out_pass,
        ..Record::new(Kind::Arrival, at, (c.id, c.copy))
    };
    let bytes = tap.wants_in().then(|| observer::carrier_bytes(c));
    tap.push(engine, r, bytes);
}

/// What acting on a verdict needs: the engine (a bridged frame's `out`
/// pass), the backends (sending or discarding), the per-pipe books
/// (`/metrics`), the observer's tap.
struct Settle<'a> {
    engine: &'a mut Engine<Carrier>,
    backends: &'a mut Backends,
    targets: &'a mut TargetBook,
    tap: &'a mut Option<Tap>,
    /// Sharded: the `out` pass may send the frame to a pipe another
    /// worker owns.
    worker: Option<&'a mut Worker>,
    /// An AQM of the pipe it left marked it CE: said by its next record.
    marked: bool,
}

impl Settle<'_> {
    /// Acts on an immediate verdict: a bridged frame that passed its `in`
    /// pass runs its `out` pass at once; anything else is sent on or
    /// discarded. `target` is the pipe or queue the packet just left, if
    /// any, and `id` the packet's number (a `Queued` verdict no longer has
    /// the packet). True if the packet went into a backend's send batch.
    fn settle(
        &mut self,
        now: Nanos,
        info: PacketInfo,
        verdict: Verdict<Carrier>,
        target: Option<Target>,
        id: (u64, bool),
    ) -> bool {
        let mut verdict = verdict;
        let mut info = info;
        let mut target = target;
        loop {
            let tap = self.tap.as_mut().filter(|t| t.on);
            match verdict {
                Verdict::Queued { rule, target } => {
                    if let Some(tap) = tap {
                        let r = Record {
                            len: info.len,
                            dir: info.dir,
                            rule: Some(rule),
                            target: Some(target),
                            ..Record::new(Kind::Enqueue, now, id)
                        };
                        tap.push(self.engine, r, None);
                    }
                    return false;
                }
                Verdict::Drop {
                    payload,
                    reason,
                    rule,
                    target,
                } => {
                    if let Some(tap) = tap {
                        let r = Record {
                            len: info.len,
                            dir: info.dir,
                            rule,
                            target,
                            reason: Some(reason),
                            at_entry: true,
                            ..Record::new(Kind::Drop, now, id)
                        };
                        tap.push(self.engine, r, None);
                    }
                    self.targets.dropped(target, reason);
                    complete(self.backends, payload, false);
                    return false;
                }
                Verdict::Pass { mut payload, rule } => match payload.out_pass.take() {
                    Some(xmit) => {
                        self.targets.forwarded();
                        if let Some(tap) = tap {
                            let r = Record {
                                len: info.len,
                                dir: info.dir,
                                iface: Some(xmit),
                                rule: Some(rule),
                                target,
                                marked: std::mem::take(&mut self.marked),
                                ..Record::new(Kind::Forward, now, id)
                            };
                            tap.push(self.engine, r, None);
                        }
                        target = None;
                        info = PacketInfo {
                            dir: Direction::Out,
                            xmit_if: Some(xmit),
                            ..info
                        };
                        let Some(v) =
                            route(self.engine, self.worker.as_deref_mut(), now, info, payload)
                        else {
                            return false;
                        };
                        verdict = v;
                    }
                    None => {
                        if let Some(tap) = tap {
                            let r = Record {
                                len: info.len,
                                dir: info.dir,
                                iface: info.xmit_if,
                                rule: Some(rule),
                                target,
                                marked: std::mem::take(&mut self.marked),
                                ..Record::new(Kind::Departure, now, id)
                            };
                            let bytes = tap.wants_out().then(|| observer::carrier_bytes(&payload));
                            tap.push(self.engine, r, bytes);
                        }
                        complete(self.backends, payload, true);
                        return true;
                    }
                },
            }
        }
    }
}

/// The sharded data plane's turns (`run --workers N`, [`super::sharded`]).
impl DataPlane {
    /// Once a turn: a follower joins the job the leader started, if any;
    /// every worker takes what the others handed it.
    fn shard_turn(&mut self) {
        let Some(mut w) = self.worker.take() else {
            return;
        };
        if w.job_pending() {
            self.shard_follow(&mut w);
        }
        self.take_handoffs(&mut w);
        // A frame back for its `out` pass may have gone on to its pipe.
        w.ring_bells();
        self.worker = Some(w);
    }

    /// Queues what other workers handed this one, and acts on what its
    /// pipes say at once (a drop at the entry).
    fn take_handoffs(&mut self, w: &mut Worker) {
        let (backends, targets, tap) = (&mut self.backends, &mut self.targets, &mut self.tap);
        let id = |c: &Carrier| (c.id, c.copy);
        w.links
            .receive_tagged(&mut self.engine, id, |engine, at, info, v, id| {
                let mut s = Settle {
                    engine,
                    backends,
                    targets,
                    tap,
                    worker: None,
                    marked: false,
                };
                s.settle(at, info, v, None, id);
            });
    }

    /// Every worker, stopped for a job, drains its rings into its pipes,
    /// twice: a frame taken back for its `out` pass (rules with state) may
    /// go on to a pipe whose owner has drained already, and the second
    /// round takes it (that one only enqueues: nothing goes on from it).
    fn drain_for_job(&mut self, w: &mut Worker) -> Result<(), Broken> {
        for _ in 0..2 {
            self.take_handoffs(w);
            w.barrier()?;
        }
        Ok(())
    }

    /// Worker `index`'s report, to add to the others': its backends named
    /// with it, its recent lateness samples kept.
    fn shard_report(&mut self, index: usize) -> Report {
        let mut r = self.report();
        r.backends = tag_worker(std::mem::take(&mut r.backends), index);
        r.lateness_recent = self.lateness.recent_sorted();
        r
    }

    /// A follower's part in the leader's job ([`Worker::join_job`]). If
    /// the workers' gate breaks meanwhile, it gives up: the loop sees the
    /// gate broken and stops.
    fn shard_follow(&mut self, w: &mut Worker) {
        let _ = self.try_shard_follow(w);
    }

    fn try_shard_follow(&mut self, w: &mut Worker) -> Result<(), Broken> {
        let job = w.join_job()?;
        self.drain_for_job(w)?;
        let accepted = w.wait_decision()?;
        let done = match job {
            Some(Job::Apply { commands, host }) => {
                if accepted {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    // Same configuration, same batch: taken as the leader
                    // took it.
                    let _ = self.engine.apply_all(now, commands);
                }
                Done::Applied
            }
            Some(Job::Snapshot) => Done::Snapshot(Box::new(self.engine.snapshot())),
            Some(Job::Report) => Done::Report(Box::new(self.shard_report(w.index()))),
            None => Done::Applied,
        };
        w.done(done)
    }

    /// The leader runs `job` on every worker; `mine` is its own part,
    /// done once all have stopped and drained their rings, before theirs.
    /// `Err` if a worker has stopped before `mine` was done (it is not
    /// done then); after, the others' parts may be missing (the data plane
    /// stops at its next turn either way).
    fn shard_lead<T>(
        &mut self,
        w: &mut Worker,
        job: Job,
        mine: impl FnOnce(&mut Self) -> (T, bool),
    ) -> Result<(T, Vec<Done>), Broken> {
        w.begin(job)?;
        self.drain_for_job(w)?;
        let (out, accepted) = mine(self);
        let done = w.decide(accepted).and_then(|()| w.end());
        Ok((out, done.unwrap_or_default()))
    }

    /// A control request on a sharded data plane's leader: carried out by
    /// every worker, or given back (`Err`) when there is no sharding.
    fn sharded_request(&mut self, kind: RequestKind) -> Result<Answer, RequestKind> {
        let Some(mut w) = self.worker.take() else {
            return Err(kind);
        };
        let workers = w.workers();
        let apply = |me: &mut Self, commands: Vec<dummynet_engine::Command>, host: &HostView| {
            me.engine.set_local_addrs(&host.addrs);
            me.engine.set_routes(host.routes.as_deref());
            let now = me.clock.now();
            let r = crate::workers::apply_checked(&mut me.engine, now, commands, workers);
            let ok = r.is_ok();
            (r, ok)
        };
        // A worker has stopped: nothing is changed, and what is read is
        // this worker's alone (the data plane stops at its next turn).
        let stopping = |b: Broken| {
            dummynet_engine::ConfigError::Conflict(format!(
                "the data plane is stopping ({}); nothing was changed",
                b.0
            ))
        };
        let answer = match kind {
            RequestKind::Apply { command, host } => {
                let job = Job::Apply {
                    commands: vec![(*command).clone()],
                    host: host.clone(),
                };
                match self.shard_lead(&mut w, job, |me| apply(me, vec![*command], &host)) {
                    Ok((r, _)) => Answer::Applied(r.map_err(|e| e.error)),
                    Err(b) => Answer::Applied(Err(stopping(b))),
                }
            }
            RequestKind::ApplyAll { commands, host } => {
                let job = Job::Apply {
                    commands: commands.clone(),
                    host: host.clone(),
                };
                match self.shard_lead(&mut w, job, |me| apply(me, commands, &host)) {
                    Ok((r, _)) => Answer::AppliedAll(r),
                    Err(b) => Answer::AppliedAll(Err(dummynet_engine::BatchError {
                        index: 0,
                        error: stopping(b),
                    })),
                }
            }
            RequestKind::Snapshot => {
                let (mut snap, done) = self
                    .shard_lead(&mut w, Job::Snapshot, |me| (me.engine.snapshot(), true))
                    .unwrap_or_else(|_| (self.engine.snapshot(), Vec::new()));
                for d in done {
                    if let Done::Snapshot(s) = d {
                        snap.merge(*s);
                    }
                }
                Answer::Snapshot {
                    snap: Box::new(snap),
                    now: self.clock.now(),
                }
            }
            RequestKind::Stats => {
                let own = |me: &mut Self| me.shard_report(0);
                let (mut report, done) = self
                    .shard_lead(&mut w, Job::Report, |me| (own(me), true))
                    .unwrap_or_else(|b| {
                        let mut r = own(self);
                        r.failure.get_or_insert(b.0);
                        (r, Vec::new())
                    });
                for d in done {
                    if let Done::Report(r) = d {
                        super::sharded::absorb(&mut report, *r);
                    }
                }
                report.workers = Some(workers);
                Answer::Stats(Box::new(report))
            }
            RequestKind::Attach { backend, .. } => Answer::Attached(Err((
                format!(
                    "this daemon runs {workers} data-plane workers; shell --join needs one \
                     (run --workers 1)"
                ),
                backend,
            ))),
            RequestKind::Detach { .. } => Answer::Detached(
                None,
                Err(dummynet_engine::BatchError {
                    index: 0,
                    error: dummynet_engine::ConfigError::Conflict(format!(
                        "this daemon runs {workers} data-plane workers and has no joined shells"
                    )),
                }),
            ),
        };
        self.worker = Some(w);
        Ok(answer)
    }

    /// The end of a sharded data plane's worker: the leader stops the
    /// followers and adds their reports to its own (and drains its rings
    /// of what they handed it meanwhile).
    fn shard_end(&mut self, mut w: Worker) -> Report {
        // Nobody waits for this worker any more, and if it failed, the
        // others stop and say why.
        if let Some(why) = &self.failure {
            w.leave(Some(why));
        }
        let mut reports = Vec::new();
        if w.is_leader() {
            for h in w.stop_followers() {
                reports.push(h.join());
            }
        }
        // What the others handed this worker before they stopped.
        self.take_handoffs(&mut w);
        let now = self.clock.now();
        while let Some(d) = self.engine.next_packet_deadline() {
            self.release(d.max(now));
        }
        self.due = None;
        self.flush_all();
        let mut report = self.shard_report(w.index());
        for r in reports {
            match r {
                Ok(r) => super::sharded::absorb(&mut report, r),
                Err(_) => {
                    report
                        .failure
                        .get_or_insert_with(|| "a data-plane worker panicked".into());
                }
            }
        }
        report.workers = Some(w.workers());
        report
    }
}

/// A packet read (or leaving a pipe for its `out` pass) at `now` goes
/// through the engine: here, or, on a sharded data plane, handed to the
/// worker that owns its pipe (`None`: that worker has it now).
#[inline]
fn route(
    engine: &mut Engine<Carrier>,
    worker: Option<&mut Worker>,
    now: Nanos,
    info: PacketInfo,
    payload: Carrier,
) -> Option<Verdict<Carrier>> {
    let Some(w) = worker else {
        return Some(engine.input(now, info, payload));
    };
    w.route(engine, now, info, payload)
}

/// Backends' names with the worker that ran them.
fn tag_worker(
    backends: Vec<(String, Vec<(String, u64)>)>,
    worker: usize,
) -> Vec<(String, Vec<(String, u64)>)> {
    backends
        .into_iter()
        .map(|(name, c)| (format!("worker {worker}: {name}"), c))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::Ipv4Addr;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use dummynet_engine::FlowKey;

    use super::*;
    use crate::{Body, LateReading};

    /// A port that delivers `burst` frames on its first read and counts
    /// what the data plane sends through it.
    struct Port {
        burst: Vec<Arrival>,
        pending: u64,
        sent: Arc<Mutex<(u64, u64)>>,
        /// Says its arrivals carry the kernel's time, and how much room.
        late: Option<LateReading>,
        /// Wall-clock times of the hand-overs.
        sent_at: Arc<Mutex<Vec<u64>>>,
        /// Nothing to read before this...
        hold_until: Option<Instant>,
        /// ...though this says there is, so the data plane keeps looking.
        readable: Option<(UnixStream, UnixStream)>,
    }

    impl Backend for Port {
        fn describe(&self) -> String {
            "test port".into()
        }
        fn fds(&self) -> Vec<BorrowedFd<'_>> {
            self.readable.iter().map(|(r, _)| r.as_fd()).collect()
        }
        fn receive(&mut self, _: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
            if self.hold_until.is_some_and(|t| Instant::now() < t) {
                return false;
            }
            arrivals.append(&mut self.burst);
            false
        }
        fn late_reading(&self) -> Option<LateReading> {
            self.late.clone()
        }
        fn complete(&mut self, _: Carrier, deliver: bool) {
            assert!(deliver, "nothing here should be dropped");
            self.pending += 1;
        }
        fn flush(&mut self) {
            if self.pending > 0 {
                let wall = Clock::new().realtime().wall;
                self.sent_at.lock().unwrap().push(wall);
                let mut sent = self.sent.lock().unwrap();
                sent.0 += self.pending;
                sent.1 += 1;
                self.pending = 0;
            }
        }
        fn stats(&mut self) -> Vec<(String, u64)> {
            Vec::new()
        }
    }

    fn frame(n: u16) -> Arrival {
        let info = PacketInfo {
            len: 1000,
            key: FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                17,
                n,
                9,
            ),
            dir: Direction::In,
            recv_if: None,
            xmit_if: None,
        };
        let carrier = Carrier {
            backend: 0,
            out_pass: None,
            id: 0,
            copy: false,
            reader: 0,
            body: Body::Frame {
                buf: vec![0; 1000],
                vnet: None,
                port: 0,
            },
        };
        Arrival {
            info,
            carrier,
            stamp_ns: 0,
        }
    }

    /// An engine given `commands`, each of which must be accepted.
    fn configured(commands: &[&str]) -> Engine<Carrier> {
        let mut engine = Engine::new(1);
        for cmd in commands {
            let parsed =
                crate::lang::commands(cmd, None).unwrap_or_else(|e| panic!("{cmd}: {e:?}"));
            let cmds = parsed.into_iter().map(|(_, c)| c).collect();
            if let Err(e) = engine.apply_all(0, cmds) {
                panic!("{cmd}: {e:?}");
            }
        }
        engine
    }

    /// A port that reads `burst` (at `hold_until`, if given; then it keeps
    /// the data plane looking, with a descriptor that stays readable).
    fn port_with(burst: Vec<Arrival>, hold_until: Option<Instant>) -> Port {
        let readable = hold_until.map(|_| {
            let pair = UnixStream::pair().unwrap();
            (&pair.1).write_all(b"x").unwrap();
            pair
        });
        Port {
            burst,
            pending: 0,
            sent: Arc::default(),
            late: None,
            sent_at: Arc::default(),
            hold_until,
            readable,
        }
    }

    /// Runs a data plane (nice, not real-time) over `port` until it has
    /// sent `want` packets or 10 s have passed; returns its report, the
    /// packets and hand-overs sent, and the hand-overs' wall-clock times.
    fn run_until_sent(
        engine: Engine<Carrier>,
        port: Port,
        precision: Precision,
        want: u64,
    ) -> (Report, (u64, u64), Vec<u64>) {
        let (sent, sent_at) = (port.sent.clone(), port.sent_at.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let plane = DataPlane::new(engine, vec![Box::new(port)], None, stop.clone()).with_options(
            PlaneOptions {
                priority: Priority::Nice,
                precision,
                spin: DEFAULT_SPIN,
            },
        );
        let thread = std::thread::spawn(move || plane.run());
        let give_up = Instant::now() + Duration::from_secs(10);
        while sent.lock().unwrap().0 < want && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        let report = thread.join().unwrap();
        let sent = *sent.lock().unwrap();
        let at = sent_at.lock().unwrap().clone();
        (report, sent, at)
    }

    /// A port whose kernel has no room for its frame the first `refusals`
    /// times it is flushed (it holds the frame meanwhile, as the bridge
    /// does), with nothing else to wake the data plane.
    struct Refusing {
        burst: Vec<Arrival>,
        pending: u64,
        refusals: u32,
        sent: Arc<Mutex<Option<Instant>>>,
    }

    impl Backend for Refusing {
        fn describe(&self) -> String {
            "refusing port".into()
        }
        fn fds(&self) -> Vec<BorrowedFd<'_>> {
            Vec::new()
        }
        fn receive(&mut self, _: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
            arrivals.append(&mut self.burst);
            false
        }
        fn complete(&mut self, _: Carrier, deliver: bool) {
            self.pending += u64::from(deliver);
        }
        fn flush(&mut self) {
            if self.pending == 0 {
                return;
            }
            if self.refusals > 0 {
                self.refusals -= 1;
                return;
            }
            self.pending = 0;
            *self.sent.lock().unwrap() = Some(Instant::now());
        }
        fn holding(&self) -> bool {
            self.pending > 0
        }
        fn stats(&mut self) -> Vec<(String, u64)> {
            Vec::new()
        }
    }

    /// A port holding a refused frame is tried again every 100 us, not at
    /// the data plane's next reason to wake (here none: it would sleep
    /// 100 ms at a time, and 20 refusals would take 2 s).
    #[test]
    fn a_port_holding_frames_is_flushed_again_soon() {
        for precision in [Precision::Timer, Precision::Max] {
            let sent = Arc::new(Mutex::new(None));
            let port = Refusing {
                burst: vec![frame(1)],
                pending: 0,
                refusals: 20,
                sent: sent.clone(),
            };
            let stop = Arc::new(AtomicBool::new(false));
            let engine = configured(&["add 100 allow ip from any to any"]);
            let plane = DataPlane::new(engine, vec![Box::new(port)], None, stop.clone())
                .with_options(PlaneOptions {
                    priority: Priority::Nice,
                    precision,
                    spin: DEFAULT_SPIN,
                });
            let start = Instant::now();
            let thread = std::thread::spawn(move || plane.run());
            let give_up = start + Duration::from_secs(5);
            while sent.lock().unwrap().is_none() && Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::Relaxed);
            let report = thread.join().unwrap();
            let at = sent.lock().unwrap().expect("the held frame never left");
            let took = at.duration_since(start);
            // 20 tries 100 us apart: 2 ms, and generous room for a loaded
            // machine; without the retries, 2 s.
            assert!(
                took < Duration::from_millis(600),
                "{precision:?}: held {took:?}"
            );
            assert_eq!(report.delivered, 1, "{precision:?}");
        }
    }

    #[test]
    fn a_control_plane_that_hangs_up_is_answered_then_no_longer_watched() {
        let (req_tx, req_rx) = std::sync::mpsc::channel();
        let (wake_rx, wake_tx) = UnixStream::pair().unwrap();
        wake_rx.set_nonblocking(true).unwrap();
        let (reply_tx, reply_rx) = std::sync::mpsc::channel();
        req_tx
            .send(Request {
                kind: RequestKind::Stats,
                reply: reply_tx,
                ticket: Ticket::default(),
            })
            .unwrap();
        drop((req_tx, wake_tx));
        let inbox = Inbox {
            requests: req_rx,
            wake: wake_rx,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let mut plane = DataPlane::new(Engine::new(1), Vec::new(), Some(inbox), stop);
        plane.serve_control();
        // The last request is still answered...
        let Ok(Answer::Stats(report)) = reply_rx.try_recv() else {
            panic!("the stats request was not answered with stats");
        };
        let text = report.to_string();
        assert!(text.contains("packets: 0 arrived"), "{text}");
        // No held_limit here, so packets are unbounded: the memory line
        // says so, and how to bound them (`ipfw memory` has the parts).
        assert!(text.contains("\nmemory: "), "{text}");
        assert!(
            text.contains("nothing bounds the packets held (no held_limit)")
                && text.contains("net.inet.ip.dummynet.held_limit"),
            "{text}"
        );
        // ...and the closed socket, which would poll readable forever, is
        // out of the wait.
        assert!(plane.inbox.is_none());
    }

    /// A backend whose descriptor hangs up, as a bridge port's socket
    /// polls with an error when its interface goes down.
    struct HangsUp {
        sock: Option<UnixStream>,
        told: Arc<Mutex<Vec<RawFd>>>,
    }

    impl Backend for HangsUp {
        fn describe(&self) -> String {
            "hangs up".into()
        }
        fn fds(&self) -> Vec<BorrowedFd<'_>> {
            self.sock.iter().map(|s| s.as_fd()).collect()
        }
        /// Told: stops watching the descriptor, and gives up.
        fn fd_failed(&mut self, fd: RawFd) {
            self.told.lock().unwrap().push(fd);
            self.sock = None;
        }
        fn failure(&self) -> Option<String> {
            (!self.told.lock().unwrap().is_empty()).then(|| "port gone".to_string())
        }
        fn receive(&mut self, _: &mut Engine<Carrier>, _: &mut Vec<Arrival>) -> bool {
            false
        }
        fn complete(&mut self, _: Carrier, _: bool) {}
        fn flush(&mut self) {}
        fn stats(&mut self) -> Vec<(String, u64)> {
            Vec::new()
        }
    }

    /// The data plane hands a backend the descriptor that failed (once:
    /// the backend then leaves it out), and a backend's failure stops it
    /// with that reason in the report.
    #[test]
    fn a_failed_descriptor_goes_to_its_backend_whose_failure_stops_the_plane() {
        failed_descriptor_after(0);
    }

    /// The same behind 70 quiet backends (a daemon with many joined
    /// shells), with the control socket among the descriptors: the failed
    /// one is the 72nd polled, beyond the 64 bits a wait used to report
    /// (and the data plane then spun until the backend left).
    #[test]
    fn a_failed_descriptor_beyond_the_first_64_goes_to_its_backend() {
        failed_descriptor_after(70);
    }

    /// A backend with one descriptor that stays quiet.
    struct Quiet(UnixStream, #[allow(dead_code)] UnixStream);

    impl Backend for Quiet {
        fn describe(&self) -> String {
            "quiet".into()
        }
        fn fds(&self) -> Vec<BorrowedFd<'_>> {
            vec![self.0.as_fd()]
        }
        /// Every backend hears of every failed descriptor; a quiet one's
        /// own must never be among them.
        fn fd_failed(&mut self, fd: RawFd) {
            assert_ne!(fd, self.0.as_raw_fd(), "a quiet descriptor reported failed");
        }
        fn receive(&mut self, _: &mut Engine<Carrier>, _: &mut Vec<Arrival>) -> bool {
            false
        }
        fn complete(&mut self, _: Carrier, _: bool) {}
        fn flush(&mut self) {}
        fn stats(&mut self) -> Vec<(String, u64)> {
            Vec::new()
        }
    }

    fn failed_descriptor_after(quiet: usize) {
        let (sock, peer) = UnixStream::pair().unwrap();
        drop(peer);
        let fd = sock.as_raw_fd();
        let told = Arc::new(Mutex::new(Vec::new()));
        let mut backends: Vec<Box<dyn Backend>> = (0..quiet)
            .map(|_| {
                let (a, b) = UnixStream::pair().unwrap();
                Box::new(Quiet(a, b)) as Box<dyn Backend>
            })
            .collect();
        backends.push(Box::new(HangsUp {
            sock: Some(sock),
            told: told.clone(),
        }));
        // A control socket whose peer stays open: polled first, quiet.
        let (_requests_tx, requests) = std::sync::mpsc::channel();
        let (wake, _wake_peer) = UnixStream::pair().unwrap();
        wake.set_nonblocking(true).unwrap();
        let inbox = Inbox { requests, wake };
        let stop = Arc::new(AtomicBool::new(false));
        let plane = DataPlane::new(Engine::new(1), backends, Some(inbox), stop.clone())
            .with_options(PlaneOptions {
                priority: Priority::Nice,
                ..PlaneOptions::default()
            });
        let thread = std::thread::spawn(move || plane.run());
        let give_up = Instant::now() + Duration::from_secs(5);
        while !thread.is_finished() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        let report = thread.join().unwrap();
        assert_eq!(report.failure.as_deref(), Some("port gone"));
        assert_eq!(*told.lock().unwrap(), [fd]);
    }

    /// In both precisions, departures 4 ms apart are each woken for and
    /// handed over on their own, and never before their time.
    #[test]
    fn departures_leave_one_by_one_and_never_early() {
        for precision in [Precision::Timer, Precision::Max] {
            departures_one_by_one(precision);
        }
    }

    fn departures_one_by_one(precision: Precision) {
        let engine = configured(&[
            "pipe 1 config bw 2Mbit/s delay 1ms",
            "add 100 pipe 1 ip from any to any",
        ]);
        // 8 frames of 1000 bytes at 2 Mbit/s: departures 4 ms apart, each
        // one woken for, staged and handed over on its own.
        let port = port_with((0..8).map(frame).collect(), None);
        let (report, sent, _) = run_until_sent(engine, port, precision, 8);
        assert_eq!((report.arrived, report.delivered, report.inside), (8, 8, 0));
        assert_eq!(sent.0, 8, "{report}");
        assert_eq!(report.lateness.early, 0, "{report}");
        // A thread woken later than the 4 ms gap (a loaded machine without
        // real-time priority, as here) rightly hands over the departures
        // due by then together; only an on-time plane can show them apart.
        if report.lateness.max_ns < 3_000_000 {
            assert_eq!(sent.1, 8, "{report}");
            assert_eq!(report.lateness.samples, 8, "{report}");
        } else {
            println!(
                "woken {} us late: not checking one by one",
                report.lateness.max_ns / 1000
            );
        }
    }

    /// The memory line shows only when it calls for something, and says
    /// what to do.
    #[test]
    fn the_memory_line_is_said_only_when_useful() {
        use dummynet_engine::stats::MemoryPart;
        let report = |packets: Option<u64>, queues: u64, held: u64| dummynet_engine::MemoryReport {
            parts: vec![
                MemoryPart {
                    name: "packets",
                    now: held,
                    worst: packets,
                },
                MemoryPart {
                    name: "queues",
                    now: 1000,
                    worst: Some(queues),
                },
            ],
            queues: 1,
            instances: 1,
            instance_limit: 65536,
        };
        const GIB: u64 = 1 << 30;
        // Bounded, within the machine, far from the limit: nothing to say.
        assert_eq!(
            memory_advice(&report(Some(GIB), GIB, 0), Some(8 * GIB)),
            None
        );
        // More than the machine could give: what to lower.
        let said = memory_advice(&report(Some(GIB), 80 * GIB, 0), Some(8 * GIB)).unwrap();
        assert!(
            said.contains("instance_limit") && said.contains("8.0 GiB"),
            "{said}"
        );
        // Unbounded packets: how to bound them.
        let said = memory_advice(&report(None, GIB, 0), Some(8 * GIB)).unwrap();
        assert!(said.contains("held_limit"), "{said}");
        // Packets near their bound: that arrivals will be dropped.
        let said = memory_advice(&report(Some(GIB), GIB, GIB - 1), Some(8 * GIB)).unwrap();
        assert!(said.contains("held-limit"), "{said}");
        // The report says nothing of memory when there is nothing to say.
        let r = Report {
            memory: vec![("packets", 0, Some(GIB)), ("queues", 1000, Some(GIB))],
            ..Report::default()
        };
        assert!(!r.to_string().contains("memory"), "{r}");
    }

    /// A bridged frame passes the rules twice (`in`, then `out`): the
    /// report counts it once, and its passes apart.
    #[test]
    fn a_bridged_frame_counts_once_though_it_passes_the_rules_twice() {
        let mut engine = configured(&[
            "pipe 1 config delay 1ms",
            "add 100 pipe 1 ip from any to any in",
            "add 200 allow ip from any to any",
        ]);
        let xmit = engine.iface("b0");
        let burst = (0..4)
            .map(|n| {
                let mut a = frame(n);
                a.carrier.out_pass = Some(xmit);
                a
            })
            .collect();
        let port = port_with(burst, None);
        let (report, sent, _) = run_until_sent(engine, port, Precision::Timer, 4);
        assert_eq!(sent.0, 4, "{report}");
        assert_eq!(
            (
                report.arrived,
                report.delivered,
                report.dropped,
                report.inside
            ),
            (4, 4, 0, 0),
            "{report}"
        );
        assert_eq!(report.passes, 8, "{report}");
    }

    /// Arrivals the kernel stamped run at those times, however late they
    /// are read: frames that waited 30 ms unread in a 50 ms pipe leave 20 ms
    /// after they are read, 50 ms after they arrived.
    #[test]
    fn arrivals_run_at_the_time_the_kernel_stamped_on_them() {
        let engine = configured(&[
            "pipe 1 config delay 50ms",
            "add 100 pipe 1 ip from any to any",
        ]);
        // Stamped 10 ms from now (after the data plane's clock starts), read
        // 40 ms from now.
        let stamp = Clock::new().realtime().wall + 10_000_000;
        let burst = (0..4)
            .map(|n| Arrival {
                stamp_ns: stamp + u64::from(n) * 1_000,
                ..frame(n)
            })
            .collect();
        let port = port_with(burst, Some(Instant::now() + Duration::from_millis(40)));
        let (report, _, sent_at) = run_until_sent(engine, port, Precision::Timer, 4);
        assert_eq!((report.arrived, report.delivered), (4, 4), "{report}");
        assert_eq!(report.lateness.early, 0, "{report}");
        // Never before 50 ms after the stamp; well before 50 ms after the
        // read (30 ms later), however busy the machine.
        let after = sent_at[0].saturating_sub(stamp);
        assert!((50_000_000..75_000_000).contains(&after), "{after} ns");
    }

    /// A batch of arrivals read late leaves in one hand-over: what they
    /// release was due long ago, but has waited no time in the data plane.
    #[test]
    fn a_batch_read_late_still_leaves_in_one_hand_over() {
        let engine = configured(&["pipe 1 config bw 0", "add 100 pipe 1 ip from any to any"]);
        // Stamped 20 ms from now, read 30 ms from now: 10 ms late.
        let stamp = Clock::new().realtime().wall + 20_000_000;
        let burst = (0..32)
            .map(|n| Arrival {
                stamp_ns: stamp + u64::from(n) * 100,
                ..frame(n)
            })
            .collect();
        let port = port_with(burst, Some(Instant::now() + Duration::from_millis(30)));
        let (report, (packets, hand_overs), _) = run_until_sent(engine, port, Precision::Timer, 32);
        // One hand-over per FLUSH_SLACK the batch takes to run (a release
        // build: 1-2; a debug build: 6-8 here), never one per arrival (32,
        // when the slack counted from the departures' due times).
        assert_eq!(packets, 32, "{report}");
        assert!(hand_overs <= 16, "{hand_overs} hand-overs for 32 packets");
    }

    /// Backends with these transits, last read at 100 ms (8 arrivals, 2 ms
    /// after the read before), with room for 4096 unread.
    fn late_reads(transits: Vec<Option<Nanos>>) -> LateReads {
        const MS: Nanos = 1_000_000;
        LateReads {
            transits,
            room: 4096,
            read_at: 100 * MS,
            span: 2 * MS,
            got: 8,
            more: false,
            active: None,
        }
    }

    /// When arrivals may wait in the kernel, and until when.
    #[test]
    fn arrivals_wait_in_the_kernel_only_while_no_departure_can_need_them() {
        const MS: Nanos = 1_000_000;
        let l = late_reads(vec![Some(4 * MS)]);
        let until = |l: &LateReads, deadline, worst| l.next_read(deadline, worst).map(|p| p.until);
        // The next departure, if it comes before a packet that arrived just
        // after the read could be due (less the margin)...
        assert_eq!(until(&l, 103 * MS, None), Some(103 * MS));
        assert_eq!(until(&l, 500 * MS, None), Some(104 * MS - LATE_MARGIN));
        // ...or the timer's worst lateness, if larger.
        assert_eq!(until(&l, 500 * MS, Some(MS)), Some(103 * MS));
        // A timer that bad leaves no room: read as they come.
        assert_eq!(until(&l, 500 * MS, Some(3 * MS)), None);
        // Pipes that let packets out sooner than LATE_MIN_TRANSIT: no.
        let short = LateReads {
            transits: vec![Some(LATE_MIN_TRANSIT - 1)],
            ..l
        };
        assert_eq!(until(&short, 103 * MS, None), None);
        // A read that stopped at its batch: more is waiting, read it now.
        let more = LateReads {
            more: true,
            transits: l.transits.clone(),
            ..l
        };
        assert_eq!(until(&more, 103 * MS, None), None);
        // 1024 frames in 2 ms: a quarter of 4096 slots fills in 2 ms.
        let busy = LateReads {
            got: 1024,
            transits: l.transits.clone(),
            ..l
        };
        assert_eq!(until(&busy, 500 * MS, None), Some(102 * MS));
        // A 1 s link: an ARP request, which crosses at once, still waits
        // no longer than LATE_NON_IP.
        let moon = LateReads {
            transits: vec![Some(1000 * MS)],
            ..l
        };
        assert_eq!(until(&moon, 900 * MS, None), Some(100 * MS + LATE_NON_IP));
    }

    /// Backend by backend: one whose packets may leave at once (or that
    /// cannot stamp its arrivals) is watched, and the others are still
    /// read late, by the least transit among them; a vacant slot is
    /// neither.
    #[test]
    fn a_backend_that_must_be_read_at_once_leaves_the_others_late() {
        const MS: Nanos = 1_000_000;
        let l = late_reads(vec![
            Some(0),
            Some(10 * MS),
            None,
            Some(4 * MS),
            Some(MS / 2),
        ]);
        let plan = l
            .next_read(500 * MS, None)
            .expect("some backends read late");
        assert_eq!(plan.transit, 4 * MS);
        assert_eq!(plan.until, 104 * MS - LATE_MARGIN);
        let watched: Vec<bool> = (0..5).map(|i| l.watched(i, Some(plan))).collect();
        assert_eq!(watched, [true, false, false, false, true]);
        // No plan: every backend is watched.
        assert!((0..5).all(|i| l.watched(i, None)));
        // Every backend short: no plan.
        let all_short = LateReads {
            transits: vec![Some(0), None, Some(MS / 2)],
            ..l
        };
        assert_eq!(all_short.next_read(500 * MS, None), None);
    }

    /// The pacing decisions, on made-up timer readings.
    #[test]
    fn the_wait_spins_only_what_the_timer_cannot_hit() {
        let timer = PlaneOptions::default();
        assert_eq!(timer.precision, Precision::Timer);
        let max = PlaneOptions {
            precision: Precision::Max,
            ..timer
        };
        // 100 µs ahead: short enough that the gap's share is below the median.
        const NOW: Nanos = 900_000;
        let d = Some(1_000_000);
        // Timer: wake for the departure itself, spin the timer's median
        // overshoot (so half the wake-ups land early and spin the rest),
        // never poll after arrivals.
        let p = plan_wait(&timer, NOW, d, true, false, Some(12_000), Some(80_000));
        assert_eq!((p.until, p.spin, p.busy), (d, 12_000, 0));
        // Before any reading, a small first guess; a bad timer is capped.
        assert_eq!(
            plan_wait(&timer, NOW, d, false, false, None, None).spin,
            TIMER_FIRST_SPIN
        );
        let p = plan_wait(&timer, NOW, d, false, false, Some(400_000), Some(900_000));
        assert_eq!(p.spin, TIMER_MAX_SPIN);
        // A long sleep spins a share of its length, up to TIMER_GAP_SPIN.
        let p = plan_wait(&timer, 0, Some(6_400_000), false, false, Some(12_000), None);
        assert_eq!(p.spin, 100_000);
        let p = plan_wait(
            &timer,
            0,
            Some(64_000_000),
            false,
            false,
            Some(12_000),
            None,
        );
        assert_eq!(p.spin, TIMER_GAP_SPIN);
        // Nothing due: sleep until woken.
        assert_eq!(
            plan_wait(&timer, NOW, None, false, false, None, None).until,
            None
        );
        // Max: wake STAGE_LEAD early, spin the whole spin, poll after arrivals.
        let p = plan_wait(&max, NOW, d, true, false, Some(12_000), Some(80_000));
        assert_eq!(
            (p.until, p.spin, p.busy),
            (Some(1_000_000 - STAGE_LEAD), DEFAULT_SPIN, BUSY_POLL)
        );
        assert_eq!(plan_wait(&max, NOW, d, false, false, None, None).busy, 0);
        // Max, behind on the real-time budget's idle time: a spin sized from
        // the worst recent wake-up, within [MIN_SHORT_SPIN, spin].
        let p = plan_wait(&max, NOW, d, true, true, Some(12_000), Some(80_000));
        assert_eq!((p.spin, p.busy), (80_000, 0));
        assert_eq!(
            plan_wait(&max, NOW, d, true, true, None, None).spin,
            SHORT_SPIN
        );
        let p = plan_wait(&max, NOW, d, true, true, None, Some(1_000));
        assert_eq!(p.spin, MIN_SHORT_SPIN);
    }
}
