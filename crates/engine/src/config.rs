//! Typed configuration: what the ipfw/dnctl language compiles to.
//!
//! Every value here is already validated for syntax and units by the parser;
//! [`crate::Engine::apply`] validates it against the engine's state (limits,
//! references) before changing anything, so a rejected command changes nothing.

use std::net::IpAddr;

use crate::flow::FlowMask;
use crate::rng::Probability;
use crate::time::Nanos;

/// Highest user-visible rule, pipe, queue or scheduler number.
pub const MAX_NUMBER: u32 = 65535;
/// FreeBSD's `DN_MAX_ID`: `pipe N` also creates FIFO scheduler `N + DN_MAX_ID`
/// and flowset `N + 2 * DN_MAX_ID` (the `q131073` of `pipe 1 show`).
pub const DN_MAX_ID: u32 = 65536;
/// The default rule's number.
pub const DEFAULT_RULE: u16 = 65535;

/// One configuration change.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `add [N] ACTION [prob P] BODY`
    AddRule(RuleSpec),
    /// `delete N [N ...]`: all rules with these numbers.
    DeleteRules(Vec<u16>),
    /// `flush`: every rule but the default one.
    FlushRules,
    /// `zero [N ...]`: counters of the given rules, or of all.
    ZeroRules(Vec<u16>),
    /// `pipe N config ...`
    ConfigPipe(u32, PipeConfig),
    /// `queue N config ...`
    ConfigQueue(u32, QueueConfig),
    /// `sched N config ...`
    ConfigSched(u32, SchedConfig),
    /// `pipe N delete`: the link, its schedulers and its implicit queue.
    DeletePipes(Vec<u32>),
    DeleteQueues(Vec<u32>),
    DeleteScheds(Vec<u32>),
    /// `pipe flush` / `queue flush` / `sched flush`: every dummynet object.
    FlushDummynet,
    /// `sysctl NAME=VALUE` / `kenv NAME=VALUE`.
    Set(Setting),
}

/// Run-time settings, named after the FreeBSD sysctls they mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `net.inet.ip.fw.one_pass` (default 1): a packet leaving a pipe or queue
    /// is accepted; with 0 it re-enters the ruleset after the rule that sent it.
    OnePass(bool),
    /// `net.inet.ip.fw.default_to_accept` (default 0): the action of rule 65535.
    DefaultToAccept(bool),
    /// `net.inet.ip.dummynet.expire` (default 1): reclaim idle dynamic queues
    /// and scheduler instances once a table outgrows its `buckets`.
    Expire(bool),
    /// `net.inet.ip.dummynet.pipe_slot_limit` (default 100): largest `queue N` in slots.
    PipeSlotLimit(u32),
    /// `net.inet.ip.dummynet.pipe_byte_limit` (default 1 MiB): largest `queue NKbytes`.
    PipeByteLimit(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub one_pass: bool,
    pub default_to_accept: bool,
    pub expire: bool,
    pub pipe_slot_limit: u32,
    pub pipe_byte_limit: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            one_pass: true,
            default_to_accept: false,
            expire: true,
            pipe_slot_limit: MAX_QUEUE_SLOTS,
            pipe_byte_limit: MAX_QUEUE_BYTES,
        }
    }
}

// ---------------------------------------------------------------- rules

#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// `None`: FreeBSD's autoincrement, 100 after the last rule (below 65535).
    pub number: Option<u16>,
    pub action: Action,
    /// `prob P`: the rule matches with this probability once its body matches.
    pub prob: Option<Probability>,
    /// All conditions must hold (the body `proto from SRC to DST [options]`).
    pub body: Vec<Cond>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// allow / accept / pass / permit
    Allow,
    /// deny / drop
    Deny,
    Pipe(u32),
    Queue(u32),
    /// Continue at the first rule numbered N or higher (N must exceed the rule's own number).
    Skipto(u16),
    /// Update counters and continue.
    Count,
}

/// One condition of a rule body, possibly negated with `not`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cond {
    pub negate: bool,
    pub kind: CondKind,
}

impl Cond {
    pub fn new(kind: CondKind) -> Self {
        Cond {
            negate: false,
            kind,
        }
    }
    pub fn not(kind: CondKind) -> Self {
        Cond { negate: true, kind }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum CondKind {
    /// A protocol number (`tcp`, `udp`, `icmp`, `ipv6-icmp`, or a number).
    Proto(u8),
    /// `ip4` / `ip6` as the protocol, or `ipversion N`.
    IpVersion(u8),
    SrcAddr(Vec<AddrMatch>),
    DstAddr(Vec<AddrMatch>),
    SrcPort(Vec<PortRange>),
    DstPort(Vec<PortRange>),
    /// `in` / `out`
    Dir(crate::packet::Direction),
    /// `recv IF`: the packet was received on IF.
    Recv(IfaceSpec),
    /// `xmit IF`: the packet leaves on IF.
    Xmit(IfaceSpec),
    /// `via IF`: `recv IF` for incoming packets, `xmit IF` for outgoing ones.
    Via(IfaceSpec),
}

/// An address or network: `10.0.0.1`, `10.0.0.0/8`, `2001:db8::/32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrMatch {
    pub addr: IpAddr,
    /// Prefix length (0..=32 for IPv4, 0..=128 for IPv6).
    pub prefix: u8,
}

/// An inclusive port range; a single port is `lo == hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

/// An interface name, possibly a shell pattern with `*` / `?` as ipfw allows
/// (`ppp*`), or `any` (matches a packet that has that interface at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfaceSpec {
    Name(String),
    Pattern(String),
    Any,
}

// ---------------------------------------------------------------- dummynet

/// The link of a pipe (`bw`, `delay`, `burst`, `profile`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkConfig {
    /// Bits per second; 0 means unlimited.
    pub bw: u64,
    /// Propagation delay added after the link.
    pub delay: Nanos,
    /// FreeBSD `burst`: bytes an idle link may send at line speed.
    pub burst: u64,
    pub profile: Option<Profile>,
}

/// A delay profile in FreeBSD's file format (`ipfw pipe N config profile FILE`).
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    /// Overrides the pipe's `bw` when present in the file.
    pub bw: Option<u64>,
    /// FreeBSD's `loss-level`: the fraction of samples that keep the packet;
    /// a drawn sample at or above `loss_level × samples` marks it lost.
    pub loss_level: f64,
    /// Extra link occupancy in nanoseconds, one entry per sample, interpolated
    /// from the file's (probability, delay) points: `samples[i]` is the delay at
    /// cumulative probability `i / samples.len()`.
    pub samples: Vec<Nanos>,
}

/// Queue size limit: FreeBSD's `queue N` (slots) or `queue NKbytes` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Slots(u32),
    Bytes(u64),
}

/// FreeBSD: 50 slots by default; at most 100 slots and 1 MiB unless the
/// `pipe_slot_limit` / `pipe_byte_limit` settings raise the bounds.
pub const DEFAULT_QUEUE_SLOTS: u32 = 50;
pub const MAX_QUEUE_SLOTS: u32 = 100;
pub const MAX_QUEUE_BYTES: u64 = 1024 * 1024;
/// FreeBSD's default hash size for masked flowsets.
pub const DEFAULT_BUCKETS: u32 = 64;
pub const MAX_BUCKETS: u32 = 65536;
pub const MAX_WEIGHT: u32 = 100;

impl Default for QueueLimit {
    fn default() -> Self {
        QueueLimit::Slots(DEFAULT_QUEUE_SLOTS)
    }
}

/// Queue management of a flowset (`droptail`, `red`, `gred`, `codel`, `pie`).
///
/// Times are [`Nanos`]; FreeBSD keeps them in microseconds, so `show` prints
/// them truncated to the microsecond. Fractions (`w_q`, `max_p`, `alpha`,
/// `beta`, `max_ecnth`) are `f64`: FreeBSD stores them in kernel fixed point
/// (16 or 13 fraction bits) only because its kernel has no floating point; the
/// RFCs and the RED paper define them as reals, and keeping the value the user
/// typed means `show` prints it back unchanged. Ranges are checked by
/// [`crate::aqm::validate`] when a command is applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum AqmConfig {
    /// `droptail`: only the queue limit (FreeBSD's default).
    #[default]
    DropTail,
    /// `red w_q/min_th/max_th/max_p`: Random Early Detection.
    Red(RedConfig),
    /// `gred w_q/min_th/max_th/max_p`: gentle RED, whose drop probability
    /// rises on a second slope from `max_p` at `max_th` to 1 at `2 * max_th`
    /// instead of jumping to 1.
    Gred(RedConfig),
    /// `codel [target T] [interval T] [ecn|noecn]` (RFC 8289).
    Codel(CodelConfig),
    /// `pie [target T] [tupdate T] [max_burst T] [max_ecnth F] [alpha F]
    /// [beta F] [ecn|noecn] [capdrop|nocapdrop] [onoff] [dre|ts]
    /// [derand|noderand]` (RFC 8033).
    Pie(PieConfig),
}

/// RED and gentle RED, written `w_q/min_th/max_th/max_p` after `red` / `gred`.
///
/// FreeBSD has no defaults for these (all four are required on the command
/// line); [`Default`] gives Floyd and Jacobson's usual values so that a
/// parser can start from it.
#[derive(Debug, Clone, PartialEq)]
pub struct RedConfig {
    /// Weight of the average queue estimate, `0 < w_q <= 1`.
    pub w_q: f64,
    /// Lower threshold of the average queue: in slots, or in bytes when the
    /// flowset's queue limit is in bytes (ipfw accepts a `K` suffix, x1024).
    pub min_th: u64,
    /// Upper threshold, same unit as `min_th`; `> 0` and `> min_th`
    /// (`>= min_th` with `ecn`).
    pub max_th: u64,
    /// Drop probability reached at `max_th`, `0 <= max_p <= 1`.
    pub max_p: f64,
    /// The flowset's `ecn` flag: mark ECN-capable packets instead of dropping
    /// them. As in FreeBSD, with `ecn` every packet that finds the average
    /// above `min_th` is marked (or dropped if it cannot be marked).
    pub ecn: bool,
}

impl Default for RedConfig {
    fn default() -> Self {
        RedConfig {
            w_q: 0.002,
            min_th: 5,
            max_th: 15,
            max_p: 0.1,
            ecn: false,
        }
    }
}

/// CoDel's parameters, FreeBSD's defaults (`net.inet.ip.dummynet.codel.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CodelConfig {
    /// `target T`: acceptable standing queue delay; default 5 ms, range 1 us..5 s.
    /// (ipfw reads a bare number as milliseconds.)
    pub target: Nanos,
    /// `interval T`: window over which the delay must stay above `target`
    /// before dropping starts; default 100 ms, range 1 us..5 s.
    pub interval: Nanos,
    /// `ecn` / `noecn` (default): mark ECN-capable packets instead of dropping.
    pub ecn: bool,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig {
            target: 5 * crate::time::NS_PER_MS,
            interval: 100 * crate::time::NS_PER_MS,
            ecn: false,
        }
    }
}

/// PIE's parameters, FreeBSD's defaults (`net.inet.ip.dummynet.pie.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct PieConfig {
    /// `target T`: queue delay reference; default 15 ms, range 1 us..10 s.
    pub target: Nanos,
    /// `tupdate T`: drop probability update period; default 15 ms, range 1 us..10 s.
    pub tupdate: Nanos,
    /// `max_burst T`: burst allowance; default 150 ms, range 0..10 s.
    pub max_burst: Nanos,
    /// `max_ecnth F`: above this drop probability ECN-capable packets are
    /// dropped rather than marked; default 0.1, range 0..1.
    pub max_ecnth: f64,
    /// `alpha F`: weight of the delay error, per second; default 0.125, range 0..7.
    pub alpha: f64,
    /// `beta F`: weight of the delay trend, per second; default 1.25, range 0..7.
    pub beta: f64,
    /// `ecn` / `noecn` (default).
    pub ecn: bool,
    /// `capdrop` (default) / `nocapdrop`: once the probability is 10% or more,
    /// one update raises it by at most 2%.
    pub capdrop: bool,
    /// `onoff`: PIE stays off until the queue is a third full and turns off
    /// again when it is idle (default: always on).
    pub onoff: bool,
    /// `dre` (default, true): queue delay from the departure rate estimate;
    /// `ts` (false): from packet timestamps.
    pub dre: bool,
    /// `derand` (default) / `noderand`: RFC 8033's de-randomization, which
    /// spaces drops evenly using the accumulated probability.
    pub derand: bool,
}

impl Default for PieConfig {
    fn default() -> Self {
        PieConfig {
            target: 15 * crate::time::NS_PER_MS,
            tupdate: 15 * crate::time::NS_PER_MS,
            max_burst: 150 * crate::time::NS_PER_MS,
            max_ecnth: 0.1,
            alpha: 0.125,
            beta: 1.25,
            ecn: false,
            capdrop: true,
            onoff: false,
            dre: true,
            derand: true,
        }
    }
}

/// Parameters shared by a pipe's implicit queue and a `queue N` flowset.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowsetConfig {
    /// 1..=100 (FreeBSD); only meaningful for weighted schedulers.
    pub weight: u32,
    pub limit: QueueLimit,
    /// `plr`: probability of dropping a packet as it arrives.
    pub plr: Probability,
    /// `mask ...`: one queue per masked flow id.
    pub mask: FlowMask,
    pub buckets: u32,
    pub aqm: AqmConfig,
    /// `noerror`: a drop is not reported to the sender (FreeBSD returns ENOBUFS
    /// to local senders otherwise). Kept for host mode.
    pub noerror: bool,
}

impl Default for FlowsetConfig {
    fn default() -> Self {
        FlowsetConfig {
            weight: 1,
            limit: QueueLimit::default(),
            plr: Probability::ZERO,
            mask: FlowMask::default(),
            buckets: DEFAULT_BUCKETS,
            aqm: AqmConfig::default(),
            noerror: false,
        }
    }
}

/// `pipe N config`: link N, scheduler N (its type kept if it exists, else
/// WF2Q+), FIFO scheduler N+65536 and flowset N+131072, as FreeBSD does.
/// The pipe's `mask` applies to its flowset and to both schedulers, so a
/// masked pipe gives every flow its own link.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PipeConfig {
    pub link: LinkConfig,
    pub flowset: FlowsetConfig,
}

/// `queue N config (sched M | pipe M) ...`: a flowset feeding scheduler M.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueConfig {
    /// Scheduler number; `pipe M` and `sched M` both name scheduler M.
    /// `None`: FreeBSD's default of scheduler 1.
    pub sched: Option<u32>,
    pub flowset: FlowsetConfig,
}

/// `sched N config [type T] [mask ...] [link params] [type params]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchedConfig {
    /// A registered scheduler name (`fifo`, `wf2q+`, ...); `None` keeps the
    /// current type, or WF2Q+ for a new scheduler.
    pub kind: Option<String>,
    pub mask: FlowMask,
    /// Link parameters given on the sched command; `None` leaves link N as is.
    pub link: Option<LinkConfig>,
    /// Type-specific parameters (`quantum 1514`, `lmax 1500`...), checked by the
    /// scheduler type when applied.
    pub params: Vec<(String, u64)>,
}
