//! Queue management: what a flow queue does when it grows.
//!
//! Every queue enforces its size limit (tail drop). An AQM may in addition
//! drop or mark on arrival (RED, PIE) or at departure (CoDel). This is
//! FreeBSD's `dn_aqm` table in Rust: an AQM is one file declaring an
//! [`AqmType`] (its parameters, the sysctls that default them, and how it
//! builds a queue's [`AqmState`]) plus one line in [`REGISTRY`]. The
//! language parses every AQM from its table; the engine fills what a
//! command leaves out from the sysctls when it applies it, as FreeBSD's
//! kernel does, and checks the values before anything changes.
//!
//! | AQM | decides at | reference |
//! |---|---|---|
//! | [`droptail`] | (limit only) | FreeBSD's default |
//! | [`red`] (`red`, `gred`) | arrival | Floyd & Jacobson 1993; FreeBSD's `red_drops` |
//! | [`codel`] | departure | RFC 8289 |
//! | [`pie`] | arrival (departures feed its estimator) | RFC 8033 |
//!
//! ECN: an AQM answers [`AqmVerdict::Mark`] only for a packet the engine said
//! is ECN-capable ([`Arrival::ect`], [`Departure::ect`]); the engine then sets
//! CE with [`ecn::set_ce`] (fixing the IPv4 checksum) and counts a mark, or
//! drops the packet if its payload cannot be marked after all.
//!
//! The engine has no per-AQM timers: whatever an AQM does periodically (PIE's
//! probability update) it catches up on at its next event, from the queue
//! state it is shown, which is exact because a queue does not change between
//! its own events.

pub mod codel;
pub mod droptail;
pub mod ecn;
pub mod pie;
pub mod red;

use crate::params::{self, ParamError, ParamSpec, Params, Tunable};
use crate::rng::Rng;
use crate::time::{Nanos, NS_PER_SEC};
use crate::units::QueueLimit;

/// What the AQM decides for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AqmVerdict {
    Accept,
    Drop,
    /// Signal congestion with ECN CE instead of dropping. The engine drops
    /// the packet instead if it turns out not to be markable.
    Mark,
}

/// The queue a decision is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueState {
    pub len_pkts: u32,
    pub len_bytes: u64,
}

/// A packet arriving at a queue.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub now: Nanos,
    /// Its length in bytes.
    pub len: u32,
    /// It carries ECT(0), ECT(1) or CE, so it can be marked instead of dropped.
    pub ect: bool,
    /// The queue before the packet is added.
    pub queue: QueueState,
    /// Bandwidth of the link serving the queue, bit/s (0: unlimited).
    pub link_bw: u64,
}

/// The head packet leaving a queue.
#[derive(Debug, Clone, Copy)]
pub struct Departure {
    pub now: Nanos,
    /// When it entered the queue.
    pub enqueued_at: Nanos,
    pub len: u32,
    pub ect: bool,
    /// The queue still counting this packet.
    pub queue: QueueState,
    /// The previous packet of this same dequeue was just dropped by this AQM
    /// and this one is taken in its place (CoDel's drop loop). `false` for
    /// the first packet a dequeue looks at.
    pub resumed: bool,
}

impl Departure {
    /// The queue once this packet has left.
    pub fn after(&self) -> QueueState {
        QueueState {
            len_pkts: self.queue.len_pkts.saturating_sub(1),
            len_bytes: self.queue.len_bytes.saturating_sub(u64::from(self.len)),
        }
    }
}

/// Per-queue AQM state.
pub trait AqmState: Send + std::fmt::Debug {
    /// A packet arrives. The engine applies the queue limit after an
    /// `Accept` (FreeBSD's order: random loss, AQM, limit).
    fn on_enqueue(&mut self, a: &Arrival, rng: &mut Rng) -> AqmVerdict;
    /// The head packet is about to leave. After a `Drop` the engine calls
    /// again with the next packet (`resumed` set) at the same time.
    fn on_dequeue(&mut self, d: &Departure, rng: &mut Rng) -> AqmVerdict;
    /// The queue's flow comes back into a flow-queueing scheduler's service
    /// lists after having left them, at `now`, before its packet's
    /// `on_enqueue`. FreeBSD's fq_codel and fq_pie re-initialise the flow's
    /// AQM then (see [`crate::sched::SchedInstance::is_idle`]); a flowset's
    /// own AQM is never told.
    fn restart(&mut self, _now: Nanos) {}
}

/// An AQM's parameters, read and checked: what its queues are made from.
pub trait AqmModel: Send + Sync + std::fmt::Debug {
    /// The state of a new queue whose limit is `limit`; `None` when the AQM
    /// keeps none (drop tail).
    fn new_state(&self, limit: QueueLimit) -> Option<Box<dyn AqmState>>;
    /// What FreeBSD's `ipfw pipe|queue show` prints for it at the end of
    /// the flowset line, without the separating space (see [`display`]).
    fn display(&self) -> String;
}

/// Reads and checks an AQM's parameters.
pub type Build = fn(&Params) -> Result<Box<dyn AqmModel>, ParamError>;

/// An AQM, as registered.
pub struct AqmType {
    /// The word that selects it on a flowset (lower case).
    pub name: &'static str,
    /// Values written right after the name, joined by `/`, all required
    /// (RED's `w_q/min_th/max_th/max_p`).
    pub positional: &'static [ParamSpec],
    /// Parameters that may follow the name (and the positional values), in
    /// any order; the first word that is not one ends them.
    pub params: &'static [ParamSpec],
    /// The flowset's own `ecn` word sets this AQM's `ecn` parameter, as
    /// FreeBSD's flowset flag does for RED. AQMs without it take `ecn`
    /// among their [`Self::params`] instead, if at all.
    pub flowset_ecn: bool,
    /// The sysctls that fill parameters a command leaves out.
    pub tunables: &'static [Tunable],
    pub build: Build,
}

impl std::fmt::Debug for AqmType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every AQM, one line each.
pub static REGISTRY: &[&AqmType] = &[
    &droptail::TYPE,
    &red::RED,
    &red::GRED,
    &codel::TYPE,
    &pie::TYPE,
];

/// Looks an AQM up by name, case-insensitively.
pub fn lookup(name: &str) -> Option<&'static AqmType> {
    REGISTRY
        .iter()
        .copied()
        .find(|t| t.name.eq_ignore_ascii_case(name))
}

/// Every AQM's name.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|t| t.name)
}

/// The queue management of a flowset: an AQM and its parameters, as
/// written (the language's output) or, once applied, with the defaults
/// filled in.
#[derive(Clone)]
pub struct AqmConfig {
    pub kind: &'static AqmType,
    /// In the units of the type's [`ParamSpec`]s.
    pub params: Vec<(String, u64)>,
}

impl AqmConfig {
    pub fn new(kind: &'static AqmType, params: Vec<(String, u64)>) -> Self {
        AqmConfig { kind, params }
    }

    /// `droptail`: the queue limit alone, FreeBSD's default.
    pub fn droptail() -> Self {
        AqmConfig::new(&droptail::TYPE, Vec::new())
    }

    pub fn is_droptail(&self) -> bool {
        std::ptr::eq(self.kind, &droptail::TYPE)
    }

    /// Fills the parameters left out from the value `sysctl` gives each
    /// tunable (the engine passes its settings').
    pub fn fill_defaults(&mut self, sysctl: impl Fn(&Tunable) -> u64) {
        params::fill_defaults(self.kind.tunables, &mut self.params, sysctl);
    }

    /// Brings the parameters within the AQM's bounds, noting each it
    /// changes ([`params::clamp`]).
    pub fn clamp(&mut self, notes: &mut Vec<String>) {
        params::clamp(self.kind.name, self.kind.params, &mut self.params, notes);
    }

    /// The parameters read and checked against the AQM's bounds.
    pub fn model(&self) -> Result<Box<dyn AqmModel>, ParamError> {
        (self.kind.build)(&self.params)
    }
}

impl Default for AqmConfig {
    fn default() -> Self {
        AqmConfig::droptail()
    }
}

impl PartialEq for AqmConfig {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.kind, other.kind) && self.params == other.params
    }
}

impl std::fmt::Debug for AqmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{:?}", self.kind.name, self.params)
    }
}

/// Whether a queue in state `q` refuses one more packet: FreeBSD compares
/// the bytes already queued for a byte limit (so one packet may overshoot
/// it) and the packet count for a slot limit.
#[inline]
pub fn queue_full(limit: QueueLimit, q: QueueState) -> bool {
    match limit {
        QueueLimit::Bytes(b) => q.len_bytes > b,
        QueueLimit::Slots(s) => q.len_pkts >= s,
    }
}

/// The state a new queue of a flowset with this AQM and queue limit gets;
/// `None` for drop tail. The configuration was checked when it was
/// applied ([`validate`]), so a refusal here cannot happen; it would give
/// the queue drop tail.
pub fn new_state(cfg: &AqmConfig, limit: QueueLimit) -> Option<Box<dyn AqmState>> {
    if cfg.is_droptail() {
        return None;
    }
    let model = cfg.model();
    debug_assert!(model.is_ok(), "{cfg:?} was applied unchecked");
    model.ok()?.new_state(limit)
}

/// What FreeBSD's `ipfw pipe|queue show` prints for the AQM at the end of the
/// flowset line, without the separating space:
///
/// - `droptail`
/// - `AQM CoDel target 5ms interval 100ms NoECN`
/// - `AQM type PIE target 15ms tupdate 15ms alpha 0.125 beta 1.25 max_burst 150ms max_ecnth 0.1 NoECN CapDrop DRE Derand`
/// - RED and GRED go on a line of their own, as FreeBSD prints them, so the
///   text starts with a newline and a tab:
///   `"\n\t  RED w_q 0.002000 min_th 5 max_th 15 max_p 0.100000"`,
///   `"\n\t GRED w_q ..."`, with ` (ecn)` appended under `ecn`.
///
/// Times print as FreeBSD's `us_to_time` does (`0`, `NNus`, `%gms`), except
/// that whole seconds print as `%gs` where FreeBSD writes `%gfs`, a typo.
pub fn display(cfg: &AqmConfig) -> String {
    match cfg.model() {
        Ok(m) => m.display(),
        Err(e) => format!("{} (invalid: {e})", cfg.kind.name),
    }
}

/// Checks the AQM's parameters against what FreeBSD accepts. The engine
/// calls this before applying a `pipe`/`queue config`, so a refused command
/// changes nothing.
pub fn validate(cfg: &AqmConfig) -> Result<(), ParamError> {
    cfg.model().map(drop)
}

/// A uniform draw in `[0, 1)` from the engine's RNG: one `next_u32` scaled by
/// 2^-32. Every AQM draws this way, so a seeded run can be replayed.
#[inline]
pub fn uniform(rng: &mut Rng) -> f64 {
    f64::from(rng.next_u32()) / 4_294_967_296.0
}

/// Time in seconds, for the AQMs whose laws are written in seconds.
#[inline]
pub(crate) fn secs(t: f64) -> f64 {
    t / NS_PER_SEC as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_compare_like_freebsd() {
        let q = |len_pkts, len_bytes| QueueState {
            len_pkts,
            len_bytes,
        };
        assert!(!queue_full(QueueLimit::Slots(2), q(1, 9999)));
        assert!(queue_full(QueueLimit::Slots(2), q(2, 0)));
        assert!(!queue_full(QueueLimit::Bytes(3000), q(9, 3000)));
        assert!(queue_full(QueueLimit::Bytes(3000), q(1, 3001)));
    }

    /// Every registered AQM: its parameters' defaults build, display and
    /// make a state as the type says; each declared parameter and tunable
    /// is one its build reads; a parameter it does not know is refused.
    #[test]
    fn every_registered_aqm_holds_together() {
        for ty in REGISTRY {
            let cfg = AqmConfig::new(ty, Vec::new());
            let mut filled = cfg.clone();
            filled.fill_defaults(|t| t.default);
            // RED has no defaults: its four values are required.
            if ty.positional.is_empty() {
                let m = filled
                    .model()
                    .unwrap_or_else(|e| panic!("{}: {e}", ty.name));
                assert!(!m.display().is_empty(), "{}", ty.name);
                let state = new_state(&filled, QueueLimit::default());
                assert_eq!(state.is_some(), !cfg.is_droptail(), "{}", ty.name);
            } else {
                assert!(
                    cfg.model().is_err(),
                    "{}: positional values required",
                    ty.name
                );
            }
            for t in ty.tunables {
                assert!(
                    ty.params
                        .iter()
                        .chain(ty.positional)
                        .any(|p| p.name == t.param),
                    "{}: tunable {} fills an undeclared parameter",
                    ty.name,
                    t.sysctl
                );
            }
            let mut bad = filled.params.clone();
            bad.push(("no_such_parameter".into(), 1));
            assert!((ty.build)(&bad).is_err(), "{}", ty.name);
            assert_eq!(
                lookup(&ty.name.to_uppercase()).map(|t| t.name),
                Some(ty.name)
            );
        }
    }

    #[test]
    fn defaults_display_as_freebsd_prints_them() {
        let shown = |name: &str, params: &[(&str, u64)]| {
            let mut c = AqmConfig::new(
                lookup(name).unwrap(),
                params.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            );
            c.fill_defaults(|t| t.default);
            display(&c)
        };
        assert_eq!(shown("droptail", &[]), "droptail");
        assert_eq!(
            shown("codel", &[]),
            "AQM CoDel target 5ms interval 100ms NoECN"
        );
        assert_eq!(
            shown("pie", &[]),
            "AQM type PIE target 15ms tupdate 15ms alpha 0.125 beta 1.25 \
             max_burst 150ms max_ecnth 0.1 NoECN CapDrop DRE Derand"
        );
        let red = [
            ("w_q", params::to_ppb(0.002)),
            ("min_th", 5),
            ("max_th", 15),
            ("max_p", params::to_ppb(0.1)),
        ];
        assert_eq!(
            shown("red", &red),
            "\n\t  RED w_q 0.002000 min_th 5 max_th 15 max_p 0.100000"
        );
        let mut gred = red.to_vec();
        gred.push(("ecn", 1));
        assert_eq!(
            shown("gred", &gred),
            "\n\t GRED w_q 0.002000 min_th 5 max_th 15 max_p 0.100000 (ecn)"
        );
    }
}
