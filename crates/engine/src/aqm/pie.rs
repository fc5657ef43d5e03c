//! PIE, Proportional Integral controller Enhanced (RFC 8033), with
//! FreeBSD's `dn_aqm_pie` options.
//!
//! Every `tupdate` PIE moves a drop probability by
//! `alpha * (qdelay - target) + beta * (qdelay - qdelay_old)` (delays in
//! seconds), scaled down while the probability is small (RFC 8033's
//! auto-tuning: /2048 below 1e-6 ... /2 below 0.1), capped at +2% per update
//! once it is 10% or more (`capdrop`), decayed by 2% per update once the
//! queue delay has been 0 twice in a row. Arrivals are dropped with that
//! probability, except
//! - during the burst allowance (`max_burst`, reset whenever the probability
//!   is 0 and both delays are below target/2, and spent `tupdate` per update);
//! - when the last delay was below target/2 and the probability below 20%,
//!   or when at most two mean packets (1600 bytes) are queued (the RFC's
//!   work-conserving safeguards);
//! - with `derand`, while the accumulated probability since the last drop is
//!   below 0.85; from 8.5 on the drop is certain (the RFC's de-randomization).
//!
//! With `ecn` an ECN-capable packet is marked instead while the probability
//! is below `max_ecnth`. The queue delay comes from the departure rate
//! (`dre`: a queue of `DQ_THRESHOLD` bytes drains in `avg_dq_time`, measured
//! over cycles of 16 KB of departures and averaged with weight 1/4) or from
//! the sojourn time of the last packet sent (`ts`, reset to 0 when an update
//! finds the queue empty, as FreeBSD does). With `onoff`, PIE turns on when
//! the queue reaches a third of its limit and off when it is idle again.
//!
//! The update timer is not a timer here: each event first runs the updates
//! that fell due since the previous one (at `start + k * tupdate`, `start`
//! being when PIE turned on), on the queue as it was since that previous
//! event, which is what a timer would have seen. An update due at `t` runs
//! before a packet event at `t`. A long idle stretch costs nothing once the
//! state stops changing (it then skips straight to the present).
//!
//! Differences from FreeBSD, all towards RFC 8033: the decay factor is
//! 0.98 (FreeBSD: 1 - 1/64); the first departure rate measurement ends its
//! cycle like any other (FreeBSD keeps measuring until a second one);
//! arithmetic is `f64` on nanoseconds rather than 31-bit fixed point on
//! microseconds. Uniform draws are [`super::uniform`].

use super::{AqmConfig, AqmModel, AqmState, AqmType, AqmVerdict, Arrival, Departure, QueueState};
use crate::params::{self, ParamError, ParamSpec, Params, Tunable, TunableUnit};
use crate::rng::Rng;
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};
use crate::units::QueueLimit;

/// `pie [target T] [tupdate T] [max_burst T] [max_ecnth F] [alpha F]
/// [beta F] [ecn|noecn] [capdrop|nocapdrop] [onoff] [dre|ts]
/// [derand|noderand]`.
pub static TYPE: AqmType = AqmType {
    name: "pie",
    positional: &[],
    params: PARAMS,
    flowset_ecn: false,
    tunables: &[
        tunable(
            "pie.target",
            "target",
            TunableUnit::Micros,
            15_000,
            10_000_000,
        ),
        tunable(
            "pie.tupdate",
            "tupdate",
            TunableUnit::Micros,
            15_000,
            10_000_000,
        ),
        tunable(
            "pie.max_burst",
            "max_burst",
            TunableUnit::Micros,
            150_000,
            10_000_000,
        ),
        tunable(
            "pie.max_ecnth",
            "max_ecnth",
            TunableUnit::Thousandths,
            100,
            1000,
        ),
        tunable("pie.alpha", "alpha", TunableUnit::Thousandths, 125, 7000),
        tunable("pie.beta", "beta", TunableUnit::Thousandths, 1250, 7000),
    ],
    build: |p| {
        Ok(Box::new(PieConfig::from_params(
            p,
            "pie",
            PieConfig::default(),
        )?))
    },
};

/// The longest `target`, `tupdate` and `max_burst` PIE runs with.
const MAX_TIME: Nanos = 10 * NS_PER_SEC;

/// PIE's parameters, as `pie` takes them; fq_pie takes the same.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec::time("target").within(NS_PER_US, MAX_TIME),
    ParamSpec::time("tupdate").within(NS_PER_US, MAX_TIME),
    ParamSpec::time("max_burst").within(0, MAX_TIME),
    ParamSpec::fraction("max_ecnth", 0.0, 1.0),
    ParamSpec::fraction("alpha", 0.0, 7.0),
    ParamSpec::fraction("beta", 0.0, 7.0),
    ParamSpec::flag("ecn", "noecn"),
    ParamSpec::flag("capdrop", "nocapdrop"),
    ParamSpec::flag("onoff", "noonoff"),
    ParamSpec::flag("dre", "ts"),
    ParamSpec::flag("derand", "noderand"),
];

/// A PIE sysctl (lowest value 1, in its unit), for this table and fq_pie's.
pub const fn tunable(
    sysctl: &'static str,
    param: &'static str,
    unit: TunableUnit,
    default: u64,
    max: u64,
) -> Tunable {
    Tunable {
        sysctl,
        param,
        unit,
        default,
        min: 1,
        max,
    }
}

/// PIE's parameters; [`Default`] gives FreeBSD's defaults
/// (`net.inet.ip.dummynet.pie.*`).
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
            target: 15 * NS_PER_MS,
            tupdate: 15 * NS_PER_MS,
            max_burst: 150 * NS_PER_MS,
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

impl PieConfig {
    /// Reads the [`PARAMS`] among `params` into `base`, checking FreeBSD's
    /// bounds (target and tupdate 1 us..10 s, max_burst 0..10 s, max_ecnth
    /// 0..1, alpha and beta 0..7); `owner` names the AQM in messages.
    /// Unknown names are refused.
    pub fn from_params(params: &Params, owner: &str, base: PieConfig) -> Result<Self, ParamError> {
        let mut c = base;
        for (k, v) in params {
            if !c.read(k, *v, owner, MAX_TIME)? {
                return Err(format!(
                    "{owner} takes target, tupdate, max_burst, max_ecnth, alpha, beta, \
                     ecn|noecn, capdrop|nocapdrop, onoff, dre|ts and derand|noderand, not `{k}`"
                )
                .into());
            }
        }
        Ok(c)
    }

    /// Reads parameter `k` if it is one of PIE's (times up to `max_time`);
    /// false if it is not.
    pub fn read(
        &mut self,
        k: &str,
        v: u64,
        owner: &str,
        max_time: Nanos,
    ) -> Result<bool, ParamError> {
        let fraction = |max| params::fraction_in(owner, k, v, (0.0, max), false);
        let on = v != 0;
        match k {
            "target" => self.target = params::time_in(owner, k, v, (NS_PER_US, max_time))?,
            "tupdate" => self.tupdate = params::time_in(owner, k, v, (NS_PER_US, max_time))?,
            "max_burst" => self.max_burst = params::time_in(owner, k, v, (0, max_time))?,
            "max_ecnth" => self.max_ecnth = fraction(1.0)?,
            "alpha" => self.alpha = fraction(7.0)?,
            "beta" => self.beta = fraction(7.0)?,
            "ecn" => self.ecn = on,
            "capdrop" => self.capdrop = on,
            "onoff" => self.onoff = on,
            "dre" => self.dre = on,
            "derand" => self.derand = on,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The parameters that give this configuration.
    pub fn to_params(&self) -> Vec<(String, u64)> {
        let p = params::to_ppb;
        [
            ("target", self.target),
            ("tupdate", self.tupdate),
            ("max_burst", self.max_burst),
            ("max_ecnth", p(self.max_ecnth)),
            ("alpha", p(self.alpha)),
            ("beta", p(self.beta)),
            ("ecn", u64::from(self.ecn)),
            ("capdrop", u64::from(self.capdrop)),
            ("onoff", u64::from(self.onoff)),
            ("dre", u64::from(self.dre)),
            ("derand", u64::from(self.derand)),
        ]
        .iter()
        .map(|&(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The flags at the end of `show`'s line: `NoECN CapDrop DRE Derand`,
    /// with ` OnOff` before the estimator when set.
    pub fn flags(&self) -> String {
        format!(
            "{} {}{} {} {}",
            if self.ecn { "ECN" } else { "NoECN" },
            if self.capdrop { "CapDrop" } else { "NoCapDrop" },
            if self.onoff { " OnOff" } else { "" },
            if self.dre { "DRE" } else { "TS" },
            if self.derand { "Derand" } else { "NoDerand" },
        )
    }
}

impl From<&PieConfig> for AqmConfig {
    fn from(c: &PieConfig) -> Self {
        AqmConfig::new(&TYPE, c.to_params())
    }
}

impl AqmModel for PieConfig {
    fn new_state(&self, limit: QueueLimit) -> Option<Box<dyn AqmState>> {
        Some(Box::new(Pie::new(self, limit)))
    }

    /// `AQM type PIE target 15ms tupdate 15ms alpha 0.125 beta 1.25
    /// max_burst 150ms max_ecnth 0.1 NoECN CapDrop DRE Derand`.
    fn display(&self) -> String {
        format!(
            "AQM type PIE target {} tupdate {} alpha {} beta {} max_burst {} max_ecnth {} {}",
            crate::units::fmt_time(self.target),
            crate::units::fmt_time(self.tupdate),
            crate::units::fmt_g(self.alpha, 6),
            crate::units::fmt_g(self.beta, 6),
            crate::units::fmt_time(self.max_burst),
            crate::units::fmt_g(self.max_ecnth, 3),
            self.flags(),
        )
    }
}

/// Bytes of departures per rate measurement cycle (2^14).
pub const DQ_THRESHOLD: u64 = 1 << 14;
/// Weight of a new measurement in the departure time average (2^14 / 2^16).
pub const DQ_WEIGHT: f64 = 0.25;
/// FreeBSD's `MEAN_PKTSIZE`: PIE never drops with 2 of these or less queued.
pub const MEAN_PKTSIZE: u64 = 800;
/// Decay of the probability per update once the queue delay stays at 0.
pub const DECAY: f64 = 0.98;

/// The PIE state of one queue.
#[derive(Debug, Clone)]
pub struct Pie {
    cfg: PieConfig,
    limit: QueueLimit,
    /// Has seen its first event (the moment FreeBSD would create it).
    started: bool,
    active: bool,
    in_measurement: bool,
    drop_prob: f64,
    accu_prob: f64,
    burst_allowance: Nanos,
    /// Queue delay estimates, in nanoseconds.
    current_qdelay: f64,
    qdelay_old: f64,
    measurement_start: Nanos,
    dq_count: u64,
    /// Time to send DQ_THRESHOLD bytes, in nanoseconds (0: not measured yet).
    avg_dq_time: f64,
    next_update: Nanos,
}

impl Pie {
    pub fn new(cfg: &PieConfig, limit: QueueLimit) -> Self {
        Pie {
            cfg: cfg.clone(),
            limit,
            started: false,
            active: false,
            in_measurement: false,
            drop_prob: 0.0,
            accu_prob: 0.0,
            burst_allowance: cfg.max_burst,
            current_qdelay: 0.0,
            qdelay_old: 0.0,
            measurement_start: 0,
            dq_count: 0,
            avg_dq_time: 0.0,
            next_update: 0,
        }
    }

    /// The drop probability, as of the last event.
    pub fn drop_prob(&self) -> f64 {
        self.drop_prob
    }

    /// The current queue delay estimate in nanoseconds, as of the last update.
    pub fn current_qdelay(&self) -> f64 {
        self.current_qdelay
    }

    pub fn burst_allowance(&self) -> Nanos {
        self.burst_allowance
    }

    pub fn active(&self) -> bool {
        self.active
    }

    /// When the next periodic update falls due (meaningful while active).
    pub fn next_update(&self) -> Nanos {
        self.next_update
    }

    fn tupdate(&self) -> Nanos {
        self.cfg.tupdate.max(1)
    }

    fn half_target(&self) -> f64 {
        self.cfg.target as f64 / 2.0
    }

    fn start(&mut self, now: Nanos) {
        if !self.started {
            self.started = true;
            if !self.cfg.onoff {
                self.activate(now);
            }
        }
    }

    fn activate(&mut self, now: Nanos) {
        self.active = true;
        self.drop_prob = 0.0;
        self.qdelay_old = 0.0;
        self.burst_allowance = self.cfg.max_burst;
        self.accu_prob = 0.0;
        self.dq_count = 0;
        self.avg_dq_time = 0.0;
        self.in_measurement = true;
        self.measurement_start = now;
        self.next_update = now.saturating_add(self.tupdate());
    }

    fn deactivate(&mut self) {
        self.active = false;
        self.in_measurement = false;
    }

    /// Runs the periodic updates due by `now` on a queue that has been in
    /// state `q` since the previous event.
    fn catch_up(&mut self, now: Nanos, q: QueueState) {
        let period = self.tupdate();
        while self.active && self.next_update <= now {
            let before = self.snapshot();
            self.update(q);
            let Some(next) = self.next_update.checked_add(period) else {
                self.next_update = Nanos::MAX;
                break;
            };
            self.next_update = next;
            if self.snapshot() == before && next <= now {
                // A fixed point: the remaining updates would change nothing.
                let skipped = (now - next) / period + 1;
                self.next_update = next.saturating_add(skipped.saturating_mul(period));
            }
        }
    }

    fn snapshot(&self) -> (u64, u64, u64, Nanos) {
        (
            self.drop_prob.to_bits(),
            self.current_qdelay.to_bits(),
            self.qdelay_old.to_bits(),
            self.burst_allowance,
        )
    }

    /// RFC 8033's `calculate_drop_prob()`.
    fn update(&mut self, q: QueueState) {
        if self.cfg.dre {
            self.current_qdelay = q.len_bytes as f64 * self.avg_dq_time / DQ_THRESHOLD as f64;
        } else if q.len_bytes == 0 {
            self.current_qdelay = 0.0;
        }
        let target = self.cfg.target as f64;
        let prob = self.drop_prob;
        let mut p = self.cfg.alpha * super::secs(self.current_qdelay - target)
            + self.cfg.beta * super::secs(self.current_qdelay - self.qdelay_old);
        p /= if prob < 0.000_001 {
            2048.0
        } else if prob < 0.000_01 {
            512.0
        } else if prob < 0.000_1 {
            128.0
        } else if prob < 0.001 {
            32.0
        } else if prob < 0.01 {
            8.0
        } else if prob < 0.1 {
            2.0
        } else {
            1.0
        };
        if self.cfg.capdrop && prob >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        let mut next = prob + p;
        if next < 0.0 {
            next = 0.0;
        } else {
            if self.current_qdelay == 0.0 && self.qdelay_old == 0.0 {
                next *= DECAY;
            }
            next = next.min(1.0);
        }
        self.drop_prob = next;
        self.qdelay_old = self.current_qdelay;
        self.burst_allowance = self.burst_allowance.saturating_sub(self.cfg.tupdate);
    }

    /// RFC 8033's `drop_early()`, with `bytes` queued.
    fn drop_early(&mut self, bytes: u64, rng: &mut Rng) -> bool {
        if (self.qdelay_old < self.half_target() && self.drop_prob < 0.2)
            || bytes <= 2 * MEAN_PKTSIZE
        {
            return false;
        }
        if self.drop_prob == 0.0 {
            self.accu_prob = 0.0;
        }
        if self.cfg.derand {
            self.accu_prob += self.drop_prob;
            if self.accu_prob < 0.85 {
                return false;
            }
            if self.accu_prob >= 8.5 {
                return true;
            }
        }
        if super::uniform(rng) < self.drop_prob {
            self.accu_prob = 0.0;
            return true;
        }
        false
    }
}

impl AqmState for Pie {
    fn on_enqueue(&mut self, a: &Arrival, rng: &mut Rng) -> AqmVerdict {
        self.start(a.now);
        self.catch_up(a.now, a.queue);
        let (qlen, third) = match self.limit {
            QueueLimit::Bytes(b) => (a.queue.len_bytes, b / 3),
            QueueLimit::Slots(s) => (u64::from(a.queue.len_pkts), u64::from(s / 3)),
        };
        // A full queue is the engine's tail drop, which comes next; PIE only
        // notes that a packet was dropped.
        let full = super::queue_full(self.limit, a.queue);
        let mut dropped = full;
        let mut verdict = AqmVerdict::Accept;
        if !full
            && self.active
            && self.burst_allowance == 0
            && self.drop_early(a.queue.len_bytes, rng)
        {
            if self.cfg.ecn && self.drop_prob < self.cfg.max_ecnth && a.ect {
                verdict = AqmVerdict::Mark;
            } else {
                verdict = AqmVerdict::Drop;
                dropped = true;
            }
        }
        if !self.active && qlen >= third {
            self.activate(a.now);
        }
        let half = self.half_target();
        if self.active
            && self.drop_prob == 0.0
            && self.current_qdelay < half
            && self.qdelay_old < half
        {
            self.burst_allowance = self.cfg.max_burst;
            if self.cfg.onoff && qlen == 0 {
                self.deactivate();
            }
        }
        if dropped {
            self.accu_prob = 0.0;
        }
        verdict
    }

    fn on_dequeue(&mut self, d: &Departure, _rng: &mut Rng) -> AqmVerdict {
        self.start(d.now);
        self.catch_up(d.now, d.queue);
        if !self.active {
            return AqmVerdict::Accept;
        }
        if self.cfg.dre {
            if self.in_measurement {
                self.dq_count += u64::from(d.len);
                if self.dq_count >= DQ_THRESHOLD {
                    let dq_time = d.now.saturating_sub(self.measurement_start) as f64;
                    self.avg_dq_time = if self.avg_dq_time == 0.0 {
                        dq_time
                    } else {
                        dq_time * DQ_WEIGHT + self.avg_dq_time * (1.0 - DQ_WEIGHT)
                    };
                    self.in_measurement = false;
                }
            }
            if !self.in_measurement && d.after().len_bytes >= DQ_THRESHOLD {
                self.in_measurement = true;
                self.measurement_start = d.now;
                self.dq_count = 0;
            }
        } else {
            self.current_qdelay = d.now.saturating_sub(d.enqueued_at) as f64;
        }
        AqmVerdict::Accept
    }

    /// FreeBSD's fq_activate_pie, for a flow that was inactive: on, with
    /// probability 0, a full burst allowance, a new departure rate
    /// measurement and the update clock started at `now`.
    fn restart(&mut self, now: Nanos) {
        self.started = true;
        self.activate(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    const MS: Nanos = NS_PER_MS;

    fn arrival(now: Nanos, pkts: u32, bytes: u64) -> Arrival {
        Arrival {
            now,
            len: 1000,
            ect: false,
            queue: QueueState {
                len_pkts: pkts,
                len_bytes: bytes,
            },
            link_bw: 0,
        }
    }

    #[test]
    fn timestamp_updates_follow_the_control_law() {
        // TS mode, a queue delay held at 40 ms: each 15 ms update adds
        // alpha * (40 - 15) ms + beta * (40 - old) ms, auto-tuned.
        let cfg = PieConfig {
            dre: false,
            ..PieConfig::default()
        };
        let mut pie = Pie::new(&cfg, QueueLimit::Slots(100));
        let mut rng = Rng::new(1);
        pie.on_enqueue(&arrival(0, 0, 0), &mut rng);
        // Sojourn of 40 ms measured at t = 40 ms.
        let d = Departure {
            now: 40 * MS,
            enqueued_at: 0,
            len: 1000,
            ect: false,
            queue: QueueState {
                len_pkts: 10,
                len_bytes: 10_000,
            },
            resumed: false,
        };
        pie.on_dequeue(&d, &mut rng);
        // Updates at 15 and 30 ms saw qdelay 0; the one at 45 ms sees 40 ms.
        pie.on_enqueue(&arrival(45 * MS, 10, 10_000), &mut rng);
        let mut expect = 0.0f64;
        for _ in 0..2 {
            let p: f64 = (0.125 * (0.0 - 0.015) + 1.25 * 0.0) / 2048.0;
            expect = (expect + p).max(0.0);
        }
        let p = (0.125 * (0.040 - 0.015) + 1.25 * 0.040) / 2048.0;
        expect += p;
        assert!(
            (pie.drop_prob() - expect).abs() < 1e-15,
            "{}",
            pie.drop_prob()
        );
        assert_eq!(pie.burst_allowance(), 150 * MS - 3 * 15 * MS);
    }

    #[test]
    fn a_long_idle_stretch_is_skipped_not_iterated() {
        let mut pie = Pie::new(&PieConfig::default(), QueueLimit::Slots(100));
        let mut rng = Rng::new(1);
        pie.on_enqueue(&arrival(0, 0, 0), &mut rng);
        // Ten years later: the catch-up must take no time and land on the grid.
        let later = 10 * 365 * 24 * 3600 * NS_PER_SEC;
        pie.on_enqueue(&arrival(later, 0, 0), &mut rng);
        assert_eq!(pie.drop_prob(), 0.0);
        assert!(pie.next_update() > later && pie.next_update() <= later + 15 * MS);
        assert_eq!(pie.next_update() % (15 * MS), 0);
    }

    #[test]
    fn display_and_ranges() {
        let c = PieConfig {
            target: 20 * MS,
            tupdate: 30 * MS,
            max_burst: 0,
            max_ecnth: 0.25,
            alpha: 0.1,
            beta: 2.0,
            ecn: true,
            capdrop: false,
            onoff: true,
            dre: false,
            derand: false,
        };
        assert_eq!(
            c.display(),
            "AQM type PIE target 20ms tupdate 30ms alpha 0.1 beta 2 max_burst 0 \
             max_ecnth 0.25 ECN NoCapDrop OnOff TS NoDerand"
        );
        let read = |p: &[(String, u64)]| PieConfig::from_params(p, "pie", PieConfig::default());
        assert_eq!(read(&c.to_params()), Ok(c.clone()));
        let ppb = params::to_ppb;
        for (k, v) in [
            ("target", 0),
            ("tupdate", 11 * NS_PER_SEC),
            ("max_burst", 10 * NS_PER_SEC + 1),
            ("max_ecnth", ppb(1.5)),
            ("beta", ppb(7.5)),
            ("alpha", u64::MAX),
            ("interval", MS),
        ] {
            assert!(read(&[(k.to_string(), v)]).is_err(), "{k} {v}");
        }
    }
}
