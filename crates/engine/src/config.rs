//! Typed configuration: what the ipfw/dnctl language compiles to.
//!
//! Every value here is already validated for syntax and units by the parser;
//! [`crate::Engine::apply`] validates it against the engine's state (limits,
//! references) before changing anything, so a rejected command changes nothing.

use std::net::IpAddr;

use std::sync::Arc;

use crate::flow::FlowMask;
pub use crate::impair::correlated::Correlated;
pub use crate::impair::dist::{DistTable, Distribution};
pub use crate::impair::jitter::Jitter;
pub use crate::impair::loss::LossModel;
pub use crate::impair::overhead::Overhead;
pub use crate::impair::reorder::Reorder;
pub use crate::impair::slot::Slot;
pub use crate::impair::trace::{Trace, TraceMode};
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
    /// `pipe N modify ...`: only the options in [`Fields`] change; the rest
    /// of the pipe and every queued packet stay.
    ModifyPipe(u32, PipeConfig, Fields),
    /// `queue N modify ...` (a `sched M` or `pipe M` in it is [`Field::Sched`]).
    ModifyQueue(u32, QueueConfig, Fields),
    /// `sched N modify ...`: the type, mask and link options given; scheduler
    /// parameters given replace those of the same name.
    ModifySched(u32, SchedConfig, Fields),
    /// `at T COMMAND` lines (and `repeat every P`): commands applied later,
    /// at times counted from when this command is applied.
    Schedule(Schedule),
    /// `pipe N delete`: the link, its schedulers and its implicit queue.
    DeletePipes(Vec<u32>),
    DeleteQueues(Vec<u32>),
    DeleteScheds(Vec<u32>),
    /// `pipe flush` / `queue flush` / `sched flush`: every dummynet object.
    FlushDummynet,
    /// `sysctl NAME=VALUE` / `kenv NAME=VALUE`.
    Set(Setting),
}

/// One option group of a `modify`: which parts of a configuration it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    // link
    Bw,
    Delay,
    Burst,
    Profile,
    Jitter,
    Reorder,
    Overhead,
    Slot,
    Trace,
    // flowset
    Limit,
    Plr,
    Loss,
    Duplicate,
    Corrupt,
    Mask,
    Buckets,
    Weight,
    Lmax,
    Pri,
    Aqm,
    Noerror,
    // queue
    Sched,
    // scheduler
    Type,
    Params,
}

/// The option groups a `modify` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Fields(u64);

impl Fields {
    pub fn insert(&mut self, f: Field) {
        self.0 |= 1 << (f as u32);
    }
    pub fn contains(self, f: Field) -> bool {
        self.0 & (1 << (f as u32)) != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<Field> for Fields {
    fn from_iter<I: IntoIterator<Item = Field>>(iter: I) -> Self {
        let mut f = Fields::default();
        iter.into_iter().for_each(|x| f.insert(x));
        f
    }
}

/// Commands to apply at later times: `at T COMMAND` lines of a commands
/// file, or `ipfw at T COMMAND` sent to a running daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Offsets from when the schedule is applied, nondecreasing, with the
    /// command to apply at each. Commands at one offset apply in order.
    pub steps: Vec<(Nanos, Command)>,
    /// `repeat every P`: the steps run again every `P` (which exceeds the
    /// last offset), forever.
    pub every: Option<Nanos>,
}

/// Run-time settings, named after the FreeBSD sysctls they mirror.
///
/// The AQM and scheduler defaults (`net.inet.ip.dummynet.{codel,pie,fqcodel,fqpie}.*`)
/// take FreeBSD's units: times in microseconds (here already converted to
/// [`Nanos`]) and PIE's fractions scaled by 1000 (`alpha=125` is 0.125). They
/// fill the parameters a later `codel`, `pie`, `type fq_codel` or
/// `type fq_pie` leaves out; objects already configured keep their values,
/// as in FreeBSD, where the kernel copies the defaults when a flowset or
/// scheduler is configured.
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
    /// `net.inet.ip.dummynet.codel.target` (us, default 5000; 1us..5s).
    CodelTarget(Nanos),
    /// `net.inet.ip.dummynet.codel.interval` (us, default 100000; 1us..5s).
    CodelInterval(Nanos),
    /// `net.inet.ip.dummynet.pie.target` (us, default 15000; 1us..10s).
    PieTarget(Nanos),
    /// `net.inet.ip.dummynet.pie.tupdate` (us, default 15000; 1us..10s).
    PieTupdate(Nanos),
    /// `net.inet.ip.dummynet.pie.max_burst` (us, default 150000; 1us..10s).
    PieMaxBurst(Nanos),
    /// `net.inet.ip.dummynet.pie.max_ecnth` (x1000, default 100; 1..1000).
    PieMaxEcnth(u32),
    /// `net.inet.ip.dummynet.pie.alpha` (x1000, default 125; 1..7000).
    PieAlpha(u32),
    /// `net.inet.ip.dummynet.pie.beta` (x1000, default 1250; 1..7000).
    PieBeta(u32),
    /// `net.inet.ip.dummynet.fqcodel.target` (us, default 5000; 1us..5s).
    FqCodelTarget(Nanos),
    /// `net.inet.ip.dummynet.fqcodel.interval` (us, default 100000; 1us..5s).
    FqCodelInterval(Nanos),
    /// `net.inet.ip.dummynet.fqcodel.quantum` (bytes, default 1514; 1..9000).
    FqCodelQuantum(u32),
    /// `net.inet.ip.dummynet.fqcodel.limit` (packets, default 10240; 1..20480).
    FqCodelLimit(u32),
    /// `net.inet.ip.dummynet.fqcodel.flows` (default 1024; 1..65536).
    FqCodelFlows(u32),
    /// `net.inet.ip.dummynet.fqpie.target` (us, default 15000; 1us..10s).
    FqPieTarget(Nanos),
    /// `net.inet.ip.dummynet.fqpie.tupdate` (us, default 15000; 1us..10s).
    FqPieTupdate(Nanos),
    /// `net.inet.ip.dummynet.fqpie.max_burst` (us, default 150000; 1us..10s).
    FqPieMaxBurst(Nanos),
    /// `net.inet.ip.dummynet.fqpie.max_ecnth` (x1000, default 100; 1..1000).
    FqPieMaxEcnth(u32),
    /// `net.inet.ip.dummynet.fqpie.alpha` (x1000, default 125; 1..7000).
    FqPieAlpha(u32),
    /// `net.inet.ip.dummynet.fqpie.beta` (x1000, default 1250; 1..7000).
    FqPieBeta(u32),
    /// `net.inet.ip.dummynet.fqpie.quantum` (bytes, default 1514; 1..9000).
    FqPieQuantum(u32),
    /// `net.inet.ip.dummynet.fqpie.limit` (packets, default 10240; 1..20480).
    FqPieLimit(u32),
    /// `net.inet.ip.dummynet.fqpie.flows` (default 1024; 1..65536).
    FqPieFlows(u32),
}

/// Ranges the AQM defaults accept, FreeBSD's sysctl handlers' bounds.
pub mod setting_range {
    use crate::time::{Nanos, NS_PER_SEC, NS_PER_US};
    /// CoDel and FQ-CoDel `target` / `interval`.
    pub const CODEL_TIME: (Nanos, Nanos) = (NS_PER_US, 5 * NS_PER_SEC);
    /// PIE and FQ-PIE `target` / `tupdate` / `max_burst`.
    pub const PIE_TIME: (Nanos, Nanos) = (NS_PER_US, 10 * NS_PER_SEC);
    /// PIE `max_ecnth`, in thousandths.
    pub const MAX_ECNTH: (u32, u32) = (1, 1000);
    /// PIE `alpha` / `beta`, in thousandths.
    pub const ALPHA_BETA: (u32, u32) = (1, 7000);
    /// FQ-CoDel / FQ-PIE `quantum`, bytes.
    pub const QUANTUM: (u32, u32) = (1, 9000);
    /// FQ-CoDel / FQ-PIE `limit`, packets.
    pub const LIMIT: (u32, u32) = (1, 20480);
    /// FQ-CoDel / FQ-PIE `flows`.
    pub const FLOWS: (u32, u32) = (1, 65536);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub one_pass: bool,
    pub default_to_accept: bool,
    pub expire: bool,
    pub pipe_slot_limit: u32,
    pub pipe_byte_limit: u64,
    /// `codel.*`: what `codel` without `target` / `interval` gets.
    pub codel_target: Nanos,
    pub codel_interval: Nanos,
    /// `pie.*`: what `pie` without these options gets; fractions in thousandths.
    pub pie_target: Nanos,
    pub pie_tupdate: Nanos,
    pub pie_max_burst: Nanos,
    pub pie_max_ecnth: u32,
    pub pie_alpha: u32,
    pub pie_beta: u32,
    /// `fqcodel.*`: defaults of `sched N config type fq_codel`.
    pub fqcodel_target: Nanos,
    pub fqcodel_interval: Nanos,
    pub fqcodel_quantum: u32,
    pub fqcodel_limit: u32,
    pub fqcodel_flows: u32,
    /// `fqpie.*`: defaults of `sched N config type fq_pie`; fractions in thousandths.
    pub fqpie_target: Nanos,
    pub fqpie_tupdate: Nanos,
    pub fqpie_max_burst: Nanos,
    pub fqpie_max_ecnth: u32,
    pub fqpie_alpha: u32,
    pub fqpie_beta: u32,
    pub fqpie_quantum: u32,
    pub fqpie_limit: u32,
    pub fqpie_flows: u32,
}

impl Default for Settings {
    fn default() -> Self {
        const MS: Nanos = crate::time::NS_PER_MS;
        Settings {
            one_pass: true,
            default_to_accept: false,
            expire: true,
            pipe_slot_limit: MAX_QUEUE_SLOTS,
            pipe_byte_limit: MAX_QUEUE_BYTES,
            codel_target: 5 * MS,
            codel_interval: 100 * MS,
            pie_target: 15 * MS,
            pie_tupdate: 15 * MS,
            pie_max_burst: 150 * MS,
            pie_max_ecnth: 100,
            pie_alpha: 125,
            pie_beta: 1250,
            fqcodel_target: 5 * MS,
            fqcodel_interval: 100 * MS,
            fqcodel_quantum: 1514,
            fqcodel_limit: 10240,
            fqcodel_flows: 1024,
            fqpie_target: 15 * MS,
            fqpie_tupdate: 15 * MS,
            fqpie_max_burst: 150 * MS,
            fqpie_max_ecnth: 100,
            fqpie_alpha: 125,
            fqpie_beta: 1250,
            fqpie_quantum: 1514,
            fqpie_limit: 10240,
            fqpie_flows: 1024,
        }
    }
}

impl Settings {
    /// What `codel` with no options means under these settings.
    pub fn codel_defaults(&self) -> CodelConfig {
        CodelConfig {
            target: self.codel_target,
            interval: self.codel_interval,
            ecn: false,
        }
    }

    /// What `pie` with no options means under these settings.
    pub fn pie_defaults(&self) -> PieConfig {
        PieConfig {
            target: self.pie_target,
            tupdate: self.pie_tupdate,
            max_burst: self.pie_max_burst,
            max_ecnth: f64::from(self.pie_max_ecnth) / 1000.0,
            alpha: f64::from(self.pie_alpha) / 1000.0,
            beta: f64::from(self.pie_beta) / 1000.0,
            ..PieConfig::default()
        }
    }

    /// Applies `s` if its value is in range; the message says why not.
    /// (The engine's own settings are set through [`crate::Engine::apply`].)
    pub fn set(&mut self, s: Setting) -> Result<(), String> {
        use setting_range as r;
        fn check<T: PartialOrd + Copy + std::fmt::Display>(
            name: &str,
            v: T,
            (lo, hi): (T, T),
            unit: &str,
        ) -> Result<T, String> {
            if v < lo || v > hi {
                return Err(format!("{name} {v} is out of range {lo}..{hi}{unit}"));
            }
            Ok(v)
        }
        // Checked in nanoseconds, reported in the sysctl's microseconds.
        fn us(name: &str, v: Nanos, (lo, hi): (Nanos, Nanos)) -> Result<Nanos, String> {
            if v < lo || v > hi {
                return Err(format!(
                    "{name} {} is out of range {}..{} us",
                    v / 1000,
                    lo / 1000,
                    hi / 1000
                ));
            }
            Ok(v)
        }
        match s {
            Setting::OnePass(v) => self.one_pass = v,
            Setting::DefaultToAccept(v) => self.default_to_accept = v,
            Setting::Expire(v) => self.expire = v,
            Setting::PipeSlotLimit(0) => return Err("pipe_slot_limit must be at least 1".into()),
            Setting::PipeSlotLimit(v) => self.pipe_slot_limit = v,
            Setting::PipeByteLimit(0) => return Err("pipe_byte_limit must be at least 1".into()),
            Setting::PipeByteLimit(v) => self.pipe_byte_limit = v,
            Setting::CodelTarget(v) => self.codel_target = us("codel.target", v, r::CODEL_TIME)?,
            Setting::CodelInterval(v) => {
                self.codel_interval = us("codel.interval", v, r::CODEL_TIME)?
            }
            Setting::PieTarget(v) => self.pie_target = us("pie.target", v, r::PIE_TIME)?,
            Setting::PieTupdate(v) => self.pie_tupdate = us("pie.tupdate", v, r::PIE_TIME)?,
            Setting::PieMaxBurst(v) => self.pie_max_burst = us("pie.max_burst", v, r::PIE_TIME)?,
            Setting::PieMaxEcnth(v) => {
                self.pie_max_ecnth = check("pie.max_ecnth", v, r::MAX_ECNTH, "")?
            }
            Setting::PieAlpha(v) => self.pie_alpha = check("pie.alpha", v, r::ALPHA_BETA, "")?,
            Setting::PieBeta(v) => self.pie_beta = check("pie.beta", v, r::ALPHA_BETA, "")?,
            Setting::FqCodelTarget(v) => {
                self.fqcodel_target = us("fqcodel.target", v, r::CODEL_TIME)?
            }
            Setting::FqCodelInterval(v) => {
                self.fqcodel_interval = us("fqcodel.interval", v, r::CODEL_TIME)?
            }
            Setting::FqCodelQuantum(v) => {
                self.fqcodel_quantum = check("fqcodel.quantum", v, r::QUANTUM, "")?
            }
            Setting::FqCodelLimit(v) => {
                self.fqcodel_limit = check("fqcodel.limit", v, r::LIMIT, "")?
            }
            Setting::FqCodelFlows(v) => {
                self.fqcodel_flows = check("fqcodel.flows", v, r::FLOWS, "")?
            }
            Setting::FqPieTarget(v) => self.fqpie_target = us("fqpie.target", v, r::PIE_TIME)?,
            Setting::FqPieTupdate(v) => self.fqpie_tupdate = us("fqpie.tupdate", v, r::PIE_TIME)?,
            Setting::FqPieMaxBurst(v) => {
                self.fqpie_max_burst = us("fqpie.max_burst", v, r::PIE_TIME)?
            }
            Setting::FqPieMaxEcnth(v) => {
                self.fqpie_max_ecnth = check("fqpie.max_ecnth", v, r::MAX_ECNTH, "")?
            }
            Setting::FqPieAlpha(v) => {
                self.fqpie_alpha = check("fqpie.alpha", v, r::ALPHA_BETA, "")?
            }
            Setting::FqPieBeta(v) => self.fqpie_beta = check("fqpie.beta", v, r::ALPHA_BETA, "")?,
            Setting::FqPieQuantum(v) => {
                self.fqpie_quantum = check("fqpie.quantum", v, r::QUANTUM, "")?
            }
            Setting::FqPieLimit(v) => self.fqpie_limit = check("fqpie.limit", v, r::LIMIT, "")?,
            Setting::FqPieFlows(v) => self.fqpie_flows = check("fqpie.flows", v, r::FLOWS, "")?,
        }
        Ok(())
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

/// The link of a pipe (`bw`, `delay`, `burst`, `profile`), with netem's and
/// mahimahi's link impairments (see [`crate::impair`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkConfig {
    /// Bits per second; 0 means unlimited.
    pub bw: u64,
    /// Propagation delay added after the link.
    pub delay: Nanos,
    /// FreeBSD `burst`: bytes an idle link may send at line speed.
    pub burst: u64,
    pub profile: Option<Profile>,
    /// `jitter J ...` on top of `delay`.
    pub jitter: Option<Jitter>,
    /// `reorder P [correlation C] [gap N]`.
    pub reorder: Option<Reorder>,
    /// `overhead N [cellsize C [celloverhead O]]`.
    pub overhead: Option<Overhead>,
    /// `slot MIN [MAX] [packets N] [bytes B]`.
    pub slot: Option<Slot>,
    /// `trace FILE [once|loop]`: delivery opportunities instead of `bw`.
    pub trace: Option<Arc<Trace>>,
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
/// The widest `lmax` any scheduler takes (RR's 2048); each type narrows it
/// ([`crate::sched::lmax_range`]).
pub const MAX_LMAX: u32 = 2048;
/// `pri` is a C `int` in FreeBSD, unchecked.
pub const MAX_PRI: u32 = i32::MAX as u32;

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
    /// 1..=100 (FreeBSD); only meaningful for weighted schedulers, and the
    /// priority under prio, where 0 (the best) is allowed too.
    pub weight: u32,
    /// `lmax L`: the largest packet its queues expect, in bytes (FreeBSD's
    /// `fs.par[1]`), 0 when not given. RR makes a queue's quantum
    /// `weight × lmax` (64..=2048, default 1500); QFQ sizes a queue's group
    /// from `lmax / weight` (1..=2000, default 1500); other types ignore it.
    /// Unset, a queue takes its scheduler's `lmax` parameter, or 1500.
    pub lmax: u32,
    /// `pri P` (FreeBSD's `fs.par[2]`): stored and shown as ipfw does, and
    /// read by no scheduler; PRIO's priority is the weight.
    pub pri: u32,
    pub limit: QueueLimit,
    /// `plr`: probability of dropping a packet as it arrives.
    pub plr: Probability,
    /// `loss ...`: netem's loss models, at arrival after `plr`.
    pub loss: Option<LossModel>,
    /// `duplicate P [correlation C]`.
    pub duplicate: Option<Correlated>,
    /// `corrupt P [correlation C]`.
    pub corrupt: Option<Correlated>,
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
            lmax: 0,
            pri: 0,
            limit: QueueLimit::default(),
            plr: Probability::ZERO,
            loss: None,
            duplicate: None,
            corrupt: None,
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
