//! The commands the ipfw/dnctl language compiles to, and what they carry:
//! settings, rules, and the configuration of pipes, queues and schedulers.
//!
//! Every value here is already validated for syntax and units by the parser;
//! [`crate::Engine::apply`] validates it against the engine's state (limits,
//! references) before changing anything, so a rejected command changes nothing.

use std::collections::BTreeMap;
use std::net::IpAddr;

use std::sync::Arc;

use crate::aqm::AqmConfig;
use crate::flow::FlowMask;
use crate::impair::corrupt::Corrupt;
use crate::impair::duplicate::Duplicate;
use crate::impair::jitter::Jitter;
use crate::impair::loss::LossModel;
use crate::impair::overhead::Overhead;
use crate::impair::reorder::Reorder;
use crate::impair::seed::Seed;
use crate::impair::slot::Slot;
use crate::impair::trace::Trace;
use crate::impair::{Impairment, LinkShape, Staged};
use crate::params::{ParamError, Tunable};
use crate::rng::Probability;
use crate::time::Nanos;
use crate::units::{
    QueueLimit, DEFAULT_BUCKETS, DEFAULT_INSTANCE_LIMIT, MAX_BUCKETS, MAX_QUEUE_BYTES,
    MAX_QUEUE_SLOTS,
};

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
    /// `at flush`: every scheduled step still waiting is cancelled, repeating
    /// schedules included; what already ran stays as it is.
    CancelSchedules,
    /// `pipe N delete`: the link, its schedulers and its implicit queue.
    DeletePipes(Vec<u32>),
    DeleteQueues(Vec<u32>),
    DeleteScheds(Vec<u32>),
    /// `pipe flush` / `queue flush` / `sched flush`: every dummynet object.
    FlushDummynet,
    /// `sysctl NAME=VALUE` / `kenv NAME=VALUE`.
    Set(Setting),
    /// `table N ...`
    Table(TableName, TableCmd),
    /// `set enable|disable|move|swap ...`
    RuleSets(SetCmd),
    /// `delete set N`: every rule of set N (the default rule stays).
    DeleteSet(u8),
    /// `resetlog [N ...]`: the `logamount` budget of the given rules, or of
    /// all, starts again.
    ResetLog(Vec<u16>),
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
    Seed,
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

/// The option groups a `modify` names, and the registered impairments it
/// names (by their place in [`crate::impair::REGISTRY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Fields {
    groups: u64,
    staged: u64,
}

impl Fields {
    pub fn insert(&mut self, f: Field) {
        self.groups |= 1 << (f as u32);
    }
    pub fn contains(self, f: Field) -> bool {
        self.groups & (1 << (f as u32)) != 0
    }
    /// Names the registered impairment at `index` in the registry.
    pub fn insert_staged(&mut self, index: usize) {
        self.staged |= 1u64.checked_shl(index as u32).unwrap_or(0);
    }
    pub fn contains_staged(self, index: usize) -> bool {
        self.staged & 1u64.checked_shl(index as u32).unwrap_or(0) != 0
    }
    pub fn is_empty(self) -> bool {
        self.groups == 0 && self.staged == 0
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
/// The defaults of AQM and scheduler parameters
/// (`net.inet.ip.dummynet.{codel,pie,fqcodel,fqpie}.*`) are the plug-ins'
/// own [`Tunable`]s, in FreeBSD's units (times in microseconds, PIE's
/// fractions in thousandths: `alpha=125` is 0.125). They fill the parameters
/// a later `codel`, `pie`, `type fq_codel` or `type fq_pie` leaves out;
/// objects already configured keep their values, as in FreeBSD, where the
/// kernel copies the defaults when a flowset or scheduler is configured.
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
    /// `net.inet.ip.dummynet.held_limit` (not FreeBSD's; default 0, none):
    /// the most packet bytes the engine holds at once, over every queue,
    /// link, delay line and packet waiting for `poll`. A packet that would
    /// go above it is dropped as it arrives ([`crate::stats::DropReason::MemoryLimit`]).
    /// A queue's limit bounds what waits for a link, but nothing else bounds
    /// a delay line: an unlimited pipe with `delay 60s` holds a minute of
    /// whatever arrives. Lowered below what is held, it drops nothing held:
    /// arrivals are refused until enough has left.
    HeldLimit(u64),
    /// `net.inet.ip.dummynet.instance_limit` (not FreeBSD's; default
    /// [`DEFAULT_INSTANCE_LIMIT`], at least 1): the most per-flow queues, and
    /// separately the most scheduler instances, that may exist at once over
    /// every flowset and scheduler (masked or not; a flow-queueing type's
    /// sub-queues count as queues). A packet that would need a new one past
    /// it is dropped as it arrives ([`crate::stats::DropReason::InstanceLimit`]);
    /// packets of flows that have theirs go on as before. Without it a
    /// random-source flood through `mask all` makes one queue and one
    /// instance per packet until `expire` catches up. FreeBSD's `buckets`
    /// stays what it is there, the size of a hash table, not a cap.
    /// Lowered below what exists, it frees nothing: new flows are refused
    /// until expiry brings the count under it.
    InstanceLimit(u32),
    /// `net.inet.ip.dummynet.hash_size` (default [`DEFAULT_BUCKETS`],
    /// 1..[`MAX_BUCKETS`]): the `buckets` of a pipe or queue configured
    /// later without one (`buckets` 0), as FreeBSD's kernel fills it.
    HashSize(u32),
    /// `net.inet.ip.fw.enable` (default 1; `ipfw enable|disable firewall`):
    /// with 0 every packet passes, unclassified.
    Firewall(bool),
    /// `net.inet.ip.fw.dyn_*`: dynamic state lifetimes (seconds) and the
    /// most states kept.
    Dyn(DynSetting, u32),
    /// `net.inet.ip.dummynet.<sysctl>=<value>`: a plug-in parameter's
    /// default ([`crate::plugin::tunable`] finds it by name), in its unit.
    Tunable { sysctl: &'static str, value: u64 },
}

/// The `net.inet.ip.fw.dyn_*` sysctls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynSetting {
    AckLifetime,
    SynLifetime,
    FinLifetime,
    RstLifetime,
    UdpLifetime,
    ShortLifetime,
    Max,
    /// Accepted and kept for `sysctl`, without effect: nothing here sends
    /// keepalives.
    Keepalive,
}

impl DynSetting {
    pub const ALL: [DynSetting; 8] = [
        DynSetting::AckLifetime,
        DynSetting::SynLifetime,
        DynSetting::FinLifetime,
        DynSetting::RstLifetime,
        DynSetting::UdpLifetime,
        DynSetting::ShortLifetime,
        DynSetting::Max,
        DynSetting::Keepalive,
    ];

    /// The sysctl's name after `net.inet.ip.fw.`.
    pub fn name(self) -> &'static str {
        match self {
            DynSetting::AckLifetime => "dyn_ack_lifetime",
            DynSetting::SynLifetime => "dyn_syn_lifetime",
            DynSetting::FinLifetime => "dyn_fin_lifetime",
            DynSetting::RstLifetime => "dyn_rst_lifetime",
            DynSetting::UdpLifetime => "dyn_udp_lifetime",
            DynSetting::ShortLifetime => "dyn_short_lifetime",
            DynSetting::Max => "dyn_max",
            DynSetting::Keepalive => "dyn_keepalive",
        }
    }

    /// FreeBSD's default.
    pub fn default_value(self) -> u32 {
        match self {
            DynSetting::AckLifetime => 300,
            DynSetting::SynLifetime => 20,
            DynSetting::FinLifetime => 1,
            DynSetting::RstLifetime => 1,
            DynSetting::UdpLifetime => 10,
            DynSetting::ShortLifetime => 5,
            DynSetting::Max => 16384,
            DynSetting::Keepalive => 1,
        }
    }

    /// The largest value taken: a lifetime of a day, a million states
    /// (about 100 MB).
    pub fn max_value(self) -> u32 {
        match self {
            DynSetting::Max => 1 << 20,
            DynSetting::Keepalive => 1,
            _ => 86_400,
        }
    }
}

/// Run-time settings, named after the FreeBSD sysctls they mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub firewall: bool,
    /// `net.inet.ip.fw.dyn_*`, in [`DynSetting::ALL`]'s order.
    pub dyn_: [u32; 8],
    pub one_pass: bool,
    pub default_to_accept: bool,
    pub expire: bool,
    pub pipe_slot_limit: u32,
    pub pipe_byte_limit: u64,
    /// [`Setting::HeldLimit`]: bytes, 0 for no limit.
    pub held_limit: u64,
    /// [`Setting::InstanceLimit`].
    pub instance_limit: u32,
    /// [`Setting::HashSize`].
    pub hash_size: u32,
    /// The plug-in defaults set away from FreeBSD's, by sysctl name.
    tunables: BTreeMap<&'static str, u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            firewall: true,
            dyn_: DynSetting::ALL.map(DynSetting::default_value),
            one_pass: true,
            default_to_accept: false,
            expire: true,
            pipe_slot_limit: MAX_QUEUE_SLOTS,
            pipe_byte_limit: MAX_QUEUE_BYTES,
            held_limit: 0,
            instance_limit: DEFAULT_INSTANCE_LIMIT,
            hash_size: DEFAULT_BUCKETS,
            tunables: BTreeMap::new(),
        }
    }
}

impl Settings {
    pub fn dyn_value(&self, d: DynSetting) -> u32 {
        self.dyn_[d as usize]
    }

    /// The value of a plug-in default, in its unit.
    pub fn tunable(&self, t: &Tunable) -> u64 {
        self.tunables.get(t.sysctl).copied().unwrap_or(t.default)
    }

    /// Applies `s` if its value is in range; the error says why not.
    /// (The engine's own settings are set through [`crate::Engine::apply`].)
    pub fn set(&mut self, s: Setting) -> Result<(), SettingError> {
        match s {
            Setting::OnePass(v) => self.one_pass = v,
            Setting::DefaultToAccept(v) => self.default_to_accept = v,
            Setting::Expire(v) => self.expire = v,
            Setting::Firewall(v) => self.firewall = v,
            Setting::Dyn(d, v) => {
                if v > d.max_value() || (v == 0 && d != DynSetting::Keepalive) {
                    return Err(SettingError::Dyn {
                        setting: d,
                        value: v,
                    });
                }
                self.dyn_[d as usize] = v;
            }
            Setting::PipeSlotLimit(0) => return Err(SettingError::Zero("pipe_slot_limit")),
            Setting::PipeSlotLimit(v) => self.pipe_slot_limit = v,
            Setting::PipeByteLimit(0) => return Err(SettingError::Zero("pipe_byte_limit")),
            Setting::PipeByteLimit(v) => self.pipe_byte_limit = v,
            Setting::HeldLimit(v) => self.held_limit = v,
            Setting::InstanceLimit(0) => return Err(SettingError::NoInstances),
            Setting::InstanceLimit(v) => self.instance_limit = v,
            Setting::HashSize(v) if v == 0 || v > MAX_BUCKETS => {
                return Err(SettingError::HashSize { value: v })
            }
            Setting::HashSize(v) => self.hash_size = v,
            Setting::Tunable { sysctl, value } => {
                let t = crate::plugin::tunable(sysctl).ok_or(SettingError::Unknown { sysctl })?;
                if t.check(value)? == t.default {
                    self.tunables.remove(t.sysctl);
                } else {
                    self.tunables.insert(t.sysctl, value);
                }
            }
        }
        Ok(())
    }
}

/// A [`Setting`] whose value is out of range, or that names no setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// `net.inet.ip.fw.dyn_*` outside 1..=max (0 is taken by `dyn_keepalive`).
    #[error("net.inet.ip.fw.{} must be within 1..{}", setting.name(), setting.max_value())]
    Dyn { setting: DynSetting, value: u32 },
    /// A limit that must be at least 1 (its name).
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error(
        "net.inet.ip.dummynet.instance_limit must be at least 1 \
         (every pipe or queue needs a queue and an instance)"
    )]
    NoInstances,
    #[error("net.inet.ip.dummynet.hash_size must be within 1..{MAX_BUCKETS}")]
    HashSize { value: u32 },
    /// No plug-in registers this sysctl (the name after `net.inet.ip.dummynet.`).
    #[error("unknown setting `net.inet.ip.dummynet.{sysctl}`")]
    Unknown { sysctl: &'static str },
    /// The plug-in's sysctl refused the value.
    #[error(transparent)]
    Tunable(#[from] ParamError),
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
    /// What ipfw keeps beside the match and the action: the set, the action
    /// modifiers (`log`, `tag`), dynamic state and the comment.
    pub extra: RuleExtra,
}

/// The parts of a rule that are neither its match nor its action.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleExtra {
    /// `set N` (0..=30; 31 holds the default rule). Rules of a disabled set
    /// are skipped.
    pub set: u8,
    /// `log [logamount N]`: matches are logged, at most N times (0: no limit)
    /// until `resetlog`.
    pub log: Option<u32>,
    /// `tag N` / `untag N`: attach or remove a tag when the rule matches.
    pub tag: Option<TagOp>,
    /// `keep-state`, `record-state`, `limit`, `set-limit`.
    pub state: Option<StateKind>,
    /// `:flowname` of `keep-state`, `limit` or `check-state` (ipfw's
    /// default name is `default`; `check-state :any` checks all).
    pub flow: Option<String>,
    /// `// text`: kept and shown.
    pub comment: Option<String>,
}

/// `tag N` or `untag N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagOp {
    pub untag: bool,
    pub tag: u16,
}

/// How a rule makes dynamic state (ipfw(8), STATEFUL FIREWALL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// `keep-state`: checks for a state here (if no check was made before
    /// in this walk), else makes one.
    Keep,
    /// `record-state`: makes one, without the check.
    Record,
    /// `limit MASK N`: keep-state, with at most `max` states per value of
    /// the masked fields.
    Limit { mask: LimitMask, max: u32 },
    /// `set-limit MASK N`: limit, without the check.
    SetLimit { mask: LimitMask, max: u32 },
}

impl StateKind {
    /// Whether the rule checks for an existing state before its body.
    pub fn checks(self) -> bool {
        matches!(self, StateKind::Keep | StateKind::Limit { .. })
    }
}

/// The fields `limit` counts states by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct LimitMask {
    pub src_addr: bool,
    pub src_port: bool,
    pub dst_addr: bool,
    pub dst_port: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// allow / accept / pass / permit
    Allow,
    /// deny / drop
    Deny,
    Pipe(u32),
    Queue(u32),
    /// Continue at the first rule numbered N or higher (a target at or
    /// before the rule means the next rule, as in FreeBSD).
    Skipto(u16),
    /// Update counters and continue.
    Count,
    /// `check-state [:flowname]`: if the packet belongs to a dynamic state,
    /// the action of the rule that made it; else continue.
    CheckState,
    /// `call N`: as `skipto N`, remembering where to `return`.
    Call(u16),
    /// `return`: back after the last `call`.
    Return,
    /// `pipe tablearg`, `queue tablearg`, `skipto tablearg`, `call tablearg`:
    /// the number is the value of the body's last table lookup.
    Tablearg(ArgAction),
}

/// The actions that take `tablearg` for their number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgAction {
    Pipe,
    Queue,
    Skipto,
    Call,
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
    /// `from me` / `from me6`: an address of this host (`v6` for `me6`).
    SrcMe {
        v6: bool,
    },
    DstMe {
        v6: bool,
    },
    /// `from table(N[,VALUE])` / `src-ip table(...)`.
    SrcTable(TableRef),
    DstTable(TableRef),
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
    /// `{ A or B or ... }`: any of the alternatives.
    Or(Vec<Cond>),
    /// `setup`: TCP with SYN and without ACK.
    Setup,
    /// `established`: TCP with RST or ACK.
    Established,
    /// `tcpflags SPEC`
    TcpFlags(Bits),
    /// `tcpoptions SPEC` ([`tcp_option`] bits).
    TcpOptions(Bits),
    TcpSeq(u32),
    TcpAck(u32),
    TcpWin(Vec<PortRange>),
    TcpDataLen(Vec<PortRange>),
    /// `frag [SPEC]`: IPv4 fragment flags ([`frag_bit`]); bare `frag` is
    /// "not the first fragment".
    Frag(Bits),
    IpLen(Vec<PortRange>),
    IpTtl(Vec<PortRange>),
    IpId(Vec<PortRange>),
    /// `iptos SPEC` (IPv4 TOS bits, IPv6 traffic class).
    IpTos(Bits),
    /// `ipprecedence N` (the top 3 bits of TOS).
    IpPrecedence(u8),
    /// `dscp LIST`: a bitmap of the 64 code points.
    Dscp(u64),
    /// `icmptypes LIST` / `icmp6types LIST`: a bitmap of the 256 types.
    IcmpTypes {
        v6: bool,
        types: [u64; 4],
    },
    /// `mac DST SRC`: Ethernet addresses under masks (layer 2 only).
    Mac {
        dst: MacMatch,
        src: MacMatch,
    },
    /// `mac-type LIST`: the Ethernet type (layer 2 only).
    MacType(Vec<PortRange>),
    /// `layer2`: the packet came with its Ethernet header (a bridge).
    Layer2,
    /// `antispoof`, `verrevpath`, `versrcreach`: route checks on the source.
    Antispoof,
    Verrevpath,
    Versrcreach,
    /// `tagged LIST`
    Tagged(Vec<PortRange>),
    /// `lookup FIELD table(N)`: the field's value is in the table (ports in
    /// a number table, addresses in an address table); its entry's value
    /// becomes `tablearg`.
    Lookup(LookupField, TableRef),
    /// `diverted`, `diverted-loopback`, `diverted-output`: never true
    /// (nothing here diverts).
    Diverted,
}

/// What `lookup` looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupField {
    SrcIp,
    DstIp,
    SrcPort,
    DstPort,
}

impl LookupField {
    pub fn as_str(self) -> &'static str {
        match self {
            LookupField::SrcIp => "src-ip",
            LookupField::DstIp => "dst-ip",
            LookupField::SrcPort => "src-port",
            LookupField::DstPort => "dst-port",
        }
    }
}

/// Bits that must be set and bits that must be clear (`syn,!ack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bits {
    pub set: u8,
    pub clear: u8,
}

/// TCP option bits of [`CondKind::TcpOptions`], as ipfw names them.
pub mod tcp_option {
    pub const MSS: u8 = 1;
    pub const WINDOW: u8 = 2;
    pub const SACK: u8 = 4;
    pub const TS: u8 = 8;
    pub const CC: u8 = 16;
}

/// IPv4 fragment bits of [`CondKind::Frag`].
pub mod frag_bit {
    /// A fragment offset above 0: not the first fragment.
    pub const OFFSET: u8 = 1;
    pub const MF: u8 = 2;
    pub const DF: u8 = 4;
    pub const RF: u8 = 8;
}

/// An Ethernet address under a mask; `any` is an all-zero mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MacMatch {
    pub addr: [u8; 6],
    pub mask: [u8; 6],
}

/// A route of the host's routing table, for `verrevpath`, `versrcreach`
/// and `antispoof`: the live daemon reads its namespace's, `sim` has none
/// (and those options then hold, as they would on a host that routes
/// everything back the way it came).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub net: AddrMatch,
    /// The interface the route goes out of.
    pub iface: String,
    /// Through a gateway (else the network is directly connected).
    pub gateway: bool,
    /// A reject or blackhole route: the network is unreachable.
    pub reject: bool,
}

/// A lookup table: `table(N)` or `table(NAME)`, optionally with the value
/// the entry must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub name: TableName,
    pub value: Option<u32>,
}

/// ipfw tables are named by number (legacy) or by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TableName {
    Number(u32),
    Name(String),
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableName::Number(n) => write!(f, "{n}"),
            TableName::Name(s) => f.write_str(s),
        }
    }
}

/// What a table's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableType {
    /// IPv4 and IPv6 prefixes.
    Addr,
    /// Interface names.
    Iface,
    /// Numbers (ports, tags...).
    Number,
}

impl TableType {
    pub fn as_str(self) -> &'static str {
        match self {
            TableType::Addr => "addr",
            TableType::Iface => "iface",
            TableType::Number => "number",
        }
    }
}

/// A table's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TableKey {
    Addr(AddrMatch),
    Iface(String),
    Number(u32),
}

impl TableKey {
    pub fn table_type(&self) -> TableType {
        match self {
            TableKey::Addr(_) => TableType::Addr,
            TableKey::Iface(_) => TableType::Iface,
            TableKey::Number(_) => TableType::Number,
        }
    }
}

/// `table N ...` commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableCmd {
    /// `table N create [type T]` (addr unless said).
    Create(TableType),
    Destroy,
    /// `table N add KEY [VALUE] ...`; value 0 when left out.
    Add(Vec<(TableKey, u32)>),
    Delete(Vec<TableKey>),
    Flush,
}

/// `set ...` commands (rule sets 0..31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCmd {
    /// `set enable A disable B ...`: bitmasks of sets to enable and disable.
    Toggle { enable: u32, disable: u32 },
    /// `set move A to B`: every rule of set A into set B.
    Move { from: u8, to: u8 },
    /// `set move rule N to B`
    MoveRule { number: u16, to: u8 },
    /// `set swap A B`
    Swap(u8, u8),
}

/// An address or network: `10.0.0.1`, `10.0.0.0/8`, `2001:db8::/32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrMatch {
    pub addr: IpAddr,
    /// Prefix length (0..=32 for IPv4, 0..=128 for IPv6).
    pub prefix: u8,
}

/// An inclusive range of ports (or of another 16-bit field: `iplen`,
/// `ipttl`, `tcpwin`, `mac-type`, tags); a single value is `lo == hi`.
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
    /// `recv table(N)`: a name in an interface table.
    Table(TableRef),
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
    /// `seed N`: the pipe's random streams are named from N instead of the
    /// engine's seed ([`crate::impair::seed`]). A configuration without one
    /// keeps the link's; a changed seed restarts the streams.
    pub seed: Option<Seed>,
    /// Registered impairments of the delay-line stage (`stall ...`), in the
    /// registry's order ([`crate::impair::staged`]).
    pub staged: Vec<Staged>,
}

impl LinkConfig {
    /// The link's impairments that are set, in `show`'s order: one line
    /// per impairment of the link and delay-line stages.
    pub fn impairments(&self) -> impl Iterator<Item = &dyn Impairment> {
        [
            self.jitter.as_ref().map(|x| x as &dyn Impairment),
            self.reorder.as_ref().map(|x| x as &dyn Impairment),
            self.overhead.as_ref().map(|x| x as &dyn Impairment),
            self.slot.as_ref().map(|x| x as &dyn Impairment),
            self.trace.as_deref().map(|x| x as &dyn Impairment),
            self.seed.as_ref().map(|x| x as &dyn Impairment),
        ]
        .into_iter()
        .flatten()
        .chain(self.staged.iter().map(|x| x as &dyn Impairment))
    }
}

impl LinkShape for LinkConfig {
    fn bw(&self) -> u64 {
        self.bw
    }
    fn delay(&self) -> Nanos {
        self.delay
    }
    fn burst(&self) -> u64 {
        self.burst
    }
    fn has_profile(&self) -> bool {
        self.profile.is_some()
    }
    fn has_slot(&self) -> bool {
        self.slot.is_some()
    }
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
    pub duplicate: Option<Duplicate>,
    /// `corrupt P [correlation C]`.
    pub corrupt: Option<Corrupt>,
    /// Registered impairments of the entry stage (`drop-every ...`), in
    /// the registry's order; they act after `loss` ([`crate::impair::staged`]).
    pub staged: Vec<Staged>,
    /// `mask ...`: one queue per masked flow id.
    pub mask: FlowMask,
    /// The size of the per-flow hash table; 0: `net.inet.ip.dummynet.hash_size`
    /// when the pipe or queue is configured, as in FreeBSD.
    pub buckets: u32,
    pub aqm: AqmConfig,
    /// `noerror`: a drop is not reported to the sender (FreeBSD returns ENOBUFS
    /// to local senders otherwise). Kept for host mode.
    pub noerror: bool,
}

impl FlowsetConfig {
    /// The queue's entry impairments that are set, in the order they act
    /// (and `show` prints them): one line per impairment of the entry stage.
    pub fn impairments(&self) -> impl Iterator<Item = &dyn Impairment> {
        entry_impairments(&self.loss, &self.staged, &self.duplicate, &self.corrupt)
    }
}

/// A flowset's entry impairments in the order they act, for its
/// configuration and for its view alike.
pub(crate) fn entry_impairments<'a>(
    loss: &'a Option<LossModel>,
    staged: &'a [Staged],
    duplicate: &'a Option<Duplicate>,
    corrupt: &'a Option<Corrupt>,
) -> impl Iterator<Item = &'a dyn Impairment> {
    let rest = [
        duplicate.as_ref().map(|x| x as &dyn Impairment),
        corrupt.as_ref().map(|x| x as &dyn Impairment),
    ];
    loss.as_ref()
        .map(|x| x as &dyn Impairment)
        .into_iter()
        .chain(staged.iter().map(|x| x as &dyn Impairment))
        .chain(rest.into_iter().flatten())
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
            staged: Vec::new(),
            mask: FlowMask::default(),
            buckets: 0,
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
    /// `type T [params]` on a pipe: the type of scheduler N, which the
    /// queues of `queue M config pipe N` feed (FreeBSD takes scheduler
    /// options on `pipe N config`; OPNsense writes them there). `None`
    /// keeps scheduler N as it is.
    pub sched: Option<PipeSched>,
}

/// A scheduler type and its parameters, given on `pipe N config`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PipeSched {
    pub kind: String,
    pub params: Vec<(String, u64)>,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Out-of-range settings are refused with the setting and the value,
    /// in the words the user has always read, and change nothing.
    #[test]
    fn a_setting_out_of_range_is_refused_and_says_its_range() {
        let mut s = Settings::default();
        let e = s.set(Setting::Dyn(DynSetting::Max, 0)).unwrap_err();
        assert_eq!(
            e,
            SettingError::Dyn {
                setting: DynSetting::Max,
                value: 0
            }
        );
        assert_eq!(
            e.to_string(),
            "net.inet.ip.fw.dyn_max must be within 1..1048576"
        );
        let e = s.set(Setting::PipeSlotLimit(0)).unwrap_err();
        assert_eq!(e.to_string(), "pipe_slot_limit must be at least 1");
        let e = s.set(Setting::HashSize(0)).unwrap_err();
        assert_eq!(e, SettingError::HashSize { value: 0 });
        assert_eq!(
            e.to_string(),
            format!("net.inet.ip.dummynet.hash_size must be within 1..{MAX_BUCKETS}")
        );
        let e = s
            .set(Setting::Tunable {
                sysctl: "no_such_knob",
                value: 1,
            })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown setting `net.inet.ip.dummynet.no_such_knob`"
        );
        assert_eq!(s, Settings::default());
    }
}
