//! CoDel, Controlled Delay (RFC 8289), as FreeBSD's `dn_aqm_codel` plugs it
//! into a dummynet queue.
//!
//! CoDel watches each packet's sojourn time as it leaves. Once the sojourn
//! has stayed at or above `target` for a whole `interval` (and more than one
//! maximum-size packet is queued), it enters the dropping state: it drops the
//! head packet and schedules the next drop `interval / sqrt(count)` later,
//! dropping faster until the sojourn falls below `target`.
//!
//! The RFC's `dequeue()` may drop several packets in one call. The engine
//! asks one packet at a time instead, telling us with [`Departure::resumed`]
//! that a packet replaces one we just dropped, so the state machine below is
//! the RFC's, cut at each `dodequeue()`:
//!
//! - `Pending::DropLoop`: inside the RFC's `while (now >= drop_next &&
//!   dropping)` loop, after `drop(); ++count;`.
//! - `Pending::Entered`: just entered the dropping state; the RFC returns the
//!   next packet whatever its sojourn.
//!
//! If the queue ran dry after a drop, the RFC's `dodequeue()` returned no
//! packet; we apply that outcome (first_above_time = 0, and leaving the drop
//! loop) at the next dequeue, before anything reads the state.
//!
//! Choices where RFC 8289 leaves room, and how FreeBSD differs:
//! - `maxpacket` (the RFC's "SHOULD use interface MTU") is the largest packet
//!   seen at enqueue, starting at 500 bytes, as FreeBSD does.
//! - The count on re-entering the dropping state follows RFC 8289 (the Linux
//!   rule: `count - lastcount` if above 1 and the last drop is less than 16
//!   intervals ago). FreeBSD still uses an older draft's rule (`count - 2`
//!   within 8 intervals).
//! - In the drop loop RFC 8289 increments `count` before looking at the next
//!   packet; FreeBSD increments it only if that packet keeps it dropping.
//! - `interval / sqrt(count)` is computed in double precision and truncated
//!   to the nanosecond; FreeBSD uses a Newton step of 1/sqrt in 16-bit fixed
//!   point on microseconds.
//! - ECN (not in the RFC's pseudo-code) as FreeBSD and Linux do it: a packet
//!   that would be dropped is marked instead and sent; in the drop loop the
//!   mark counts like a drop (`count += 1`, next drop scheduled) and ends
//!   the loop.

use super::{AqmConfig, AqmModel, AqmState, AqmType, AqmVerdict, Arrival, Departure};
use crate::params::{self, ParamError, ParamSpec, Params, Tunable, TunableUnit};
use crate::rng::Rng;
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};
use crate::units::QueueLimit;

/// `codel [target T] [interval T] [ecn|noecn]`.
pub static TYPE: AqmType = AqmType {
    name: "codel",
    positional: &[],
    params: &[
        ParamSpec::time("target").within(TIME_RANGE.0, TIME_RANGE.1),
        ParamSpec::time("interval").within(TIME_RANGE.0, TIME_RANGE.1),
        ParamSpec::flag("ecn", "noecn"),
    ],
    flowset_ecn: false,
    tunables: &[
        Tunable {
            sysctl: "codel.target",
            param: "target",
            unit: TunableUnit::Micros,
            default: 5_000,
            min: 1,
            max: 5_000_000,
        },
        Tunable {
            sysctl: "codel.interval",
            param: "interval",
            unit: TunableUnit::Micros,
            default: 100_000,
            min: 1,
            max: 5_000_000,
        },
    ],
    build: |p| Ok(Box::new(CodelConfig::from_params(p)?)),
};

/// FreeBSD bounds both times to 1 us..5 s.
const TIME_RANGE: (Nanos, Nanos) = (NS_PER_US, 5 * NS_PER_SEC);

/// CoDel's parameters; [`Default`] gives FreeBSD's defaults
/// (`net.inet.ip.dummynet.codel.*`).
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
            target: 5 * NS_PER_MS,
            interval: 100 * NS_PER_MS,
            ecn: false,
        }
    }
}

impl CodelConfig {
    /// Reads [`TYPE`]'s parameters, starting from the defaults, and checks
    /// FreeBSD's bounds.
    pub fn from_params(params: &Params) -> Result<Self, ParamError> {
        let mut c = CodelConfig::default();
        for (k, v) in params {
            match k.as_str() {
                "target" => c.target = params::time_in("codel", k, *v, TIME_RANGE)?,
                "interval" => c.interval = params::time_in("codel", k, *v, TIME_RANGE)?,
                "ecn" => c.ecn = *v != 0,
                _ => {
                    return Err(
                        format!("codel takes target, interval and ecn|noecn, not `{k}`").into(),
                    )
                }
            }
        }
        Ok(c)
    }
}

impl From<&CodelConfig> for AqmConfig {
    fn from(c: &CodelConfig) -> Self {
        let params = [
            ("target", c.target),
            ("interval", c.interval),
            ("ecn", u64::from(c.ecn)),
        ];
        AqmConfig::new(&TYPE, params.iter().map(|&(k, v)| (k.into(), v)).collect())
    }
}

impl AqmModel for CodelConfig {
    fn new_state(&self, _limit: QueueLimit) -> Option<Box<dyn AqmState>> {
        Some(Box::new(Codel::new(self)))
    }

    /// `AQM CoDel target 5ms interval 100ms NoECN`.
    fn display(&self) -> String {
        format!(
            "AQM CoDel target {} interval {} {}",
            crate::units::fmt_time(self.target),
            crate::units::fmt_time(self.interval),
            if self.ecn { "ECN" } else { "NoECN" }
        )
    }
}

/// FreeBSD's initial `maxpkt_size` before any packet was seen.
pub const INITIAL_MAXPACKET: u32 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    DropLoop,
    Entered,
}

/// The CoDel state of one queue.
#[derive(Debug, Clone)]
pub struct Codel {
    target: Nanos,
    interval: Nanos,
    ecn: bool,
    /// When the sojourn will have been above target for an interval (0: below).
    first_above_time: Nanos,
    drop_next: Nanos,
    count: u32,
    lastcount: u32,
    dropping: bool,
    maxpacket: u32,
    pending: Pending,
}

impl Codel {
    pub fn new(cfg: &CodelConfig) -> Self {
        Codel {
            target: cfg.target,
            interval: cfg.interval,
            ecn: cfg.ecn,
            first_above_time: 0,
            drop_next: 0,
            count: 0,
            lastcount: 0,
            dropping: false,
            maxpacket: INITIAL_MAXPACKET,
            pending: Pending::None,
        }
    }

    /// In the dropping state.
    pub fn dropping(&self) -> bool {
        self.dropping
    }

    /// Drops since entering the dropping state.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// When the next drop is due (meaningful while dropping).
    pub fn drop_next(&self) -> Nanos {
        self.drop_next
    }

    /// `t + interval / sqrt(count)`.
    fn control_law(&self, t: Nanos, count: u32) -> Nanos {
        let step = self.interval as f64 / f64::from(count.max(1)).sqrt();
        t.saturating_add(step as Nanos)
    }

    /// The RFC's `dodequeue()` for a packet that was queued since
    /// `enqueued_at`, leaving `bytes_after` bytes behind it: true when it is
    /// OK to drop.
    fn dodequeue(&mut self, now: Nanos, enqueued_at: Nanos, bytes_after: u64) -> bool {
        let sojourn = now.saturating_sub(enqueued_at);
        if sojourn < self.target || bytes_after <= u64::from(self.maxpacket) {
            self.first_above_time = 0;
            false
        } else if self.first_above_time == 0 {
            // Time 0 stands for "not above", as in the RFC; a real deadline
            // is never 0 since interval is at least 1 us.
            self.first_above_time = now.saturating_add(self.interval);
            false
        } else {
            now >= self.first_above_time
        }
    }

    /// `dodequeue()` found the queue empty after a drop.
    fn queue_ran_dry(&mut self) {
        self.first_above_time = 0;
        if self.pending == Pending::DropLoop {
            self.dropping = false;
        }
        self.pending = Pending::None;
    }

    /// Entering the dropping state at `now` (the RFC's `else if (ok_to_drop)`).
    fn enter(&mut self, now: Nanos) {
        self.dropping = true;
        let delta = self.count.wrapping_sub(self.lastcount);
        // Signed difference: a drop_next in the future counts as recent.
        let since = i128::from(now) - i128::from(self.drop_next);
        self.count = if delta > 1 && since < 16 * i128::from(self.interval) {
            delta
        } else {
            1
        };
        self.drop_next = self.control_law(now, self.count);
        self.lastcount = self.count;
    }

    /// The packet at hand is due for a drop inside the drop loop.
    fn signal_in_loop(&mut self, ect: bool) -> AqmVerdict {
        self.count = self.count.saturating_add(1);
        if self.ecn && ect {
            self.drop_next = self.control_law(self.drop_next, self.count);
            AqmVerdict::Mark
        } else {
            self.pending = Pending::DropLoop;
            AqmVerdict::Drop
        }
    }
}

impl AqmState for Codel {
    fn on_enqueue(&mut self, a: &Arrival, _rng: &mut Rng) -> AqmVerdict {
        self.maxpacket = self.maxpacket.max(a.len);
        AqmVerdict::Accept
    }

    fn on_dequeue(&mut self, d: &Departure, _rng: &mut Rng) -> AqmVerdict {
        if !d.resumed && self.pending != Pending::None {
            self.queue_ran_dry();
        }
        let now = d.now;
        let ok = self.dodequeue(now, d.enqueued_at, d.after().len_bytes);
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::Entered => AqmVerdict::Accept,
            Pending::DropLoop => {
                if !ok {
                    self.dropping = false;
                    return AqmVerdict::Accept;
                }
                self.drop_next = self.control_law(self.drop_next, self.count);
                if now >= self.drop_next {
                    self.signal_in_loop(d.ect)
                } else {
                    AqmVerdict::Accept
                }
            }
            Pending::None if self.dropping => {
                if !ok {
                    self.dropping = false;
                    return AqmVerdict::Accept;
                }
                if now >= self.drop_next {
                    self.signal_in_loop(d.ect)
                } else {
                    AqmVerdict::Accept
                }
            }
            Pending::None if ok => {
                self.enter(now);
                if self.ecn && d.ect {
                    AqmVerdict::Mark
                } else {
                    self.pending = Pending::Entered;
                    AqmVerdict::Drop
                }
            }
            Pending::None => AqmVerdict::Accept,
        }
    }

    /// FreeBSD's fq_codel_enqueue, for a flow that was inactive: out of the
    /// dropping state, and not above target (a sojourn must stay above it
    /// for a whole interval again). `count`, `drop_next` and `maxpacket`
    /// stay, as there.
    fn restart(&mut self, _now: Nanos) {
        self.dropping = false;
        self.first_above_time = 0;
        self.pending = Pending::None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::QueueState;
    use crate::time::NS_PER_MS;

    const MS: Nanos = NS_PER_MS;

    fn dep(now: Nanos, enq: Nanos, pkts: u32, bytes: u64, resumed: bool) -> Departure {
        Departure {
            now,
            enqueued_at: enq,
            len: 1000,
            ect: false,
            queue: QueueState {
                len_pkts: pkts,
                len_bytes: bytes,
            },
            resumed,
        }
    }

    #[test]
    fn drops_only_after_a_whole_interval_above_target() {
        let mut c = Codel::new(&CodelConfig::default());
        let mut rng = Rng::new(1);
        // Sojourn 10 ms with a deep queue: first above at t = 10 ms, so
        // dropping may start at 110 ms.
        assert_eq!(
            c.on_dequeue(&dep(10 * MS, 0, 20, 20_000, false), &mut rng),
            AqmVerdict::Accept
        );
        assert_eq!(
            c.on_dequeue(&dep(109 * MS, 99 * MS, 20, 20_000, false), &mut rng),
            AqmVerdict::Accept
        );
        assert_eq!(
            c.on_dequeue(&dep(110 * MS, 100 * MS, 20, 20_000, false), &mut rng),
            AqmVerdict::Drop
        );
        assert!(c.dropping());
        assert_eq!(c.count(), 1);
        assert_eq!(c.drop_next(), 210 * MS);
        // The packet after the entry drop is sent whatever its sojourn.
        assert_eq!(
            c.on_dequeue(&dep(110 * MS, 100 * MS, 19, 19_000, true), &mut rng),
            AqmVerdict::Accept
        );
        // Next drop at 210 ms; count 2 schedules the one after 100/sqrt(2) ms later.
        assert_eq!(
            c.on_dequeue(&dep(210 * MS, 200 * MS, 19, 19_000, false), &mut rng),
            AqmVerdict::Drop
        );
        assert_eq!(c.count(), 2);
        assert_eq!(
            c.on_dequeue(&dep(210 * MS, 200 * MS, 18, 18_000, true), &mut rng),
            AqmVerdict::Accept
        );
        assert_eq!(c.drop_next(), 210 * MS + 70_710_678);
    }

    #[test]
    fn a_short_queue_is_never_dropped_from() {
        // One maximum-size packet or less behind the head: no drop, whatever the delay.
        let mut c = Codel::new(&CodelConfig::default());
        let mut rng = Rng::new(1);
        for i in 0..1000 {
            let now = i * MS;
            assert_eq!(
                c.on_dequeue(&dep(now, 0, 2, 1500, false), &mut rng),
                AqmVerdict::Accept
            );
        }
    }

    #[test]
    fn ecn_marks_instead_of_dropping() {
        let mut c = Codel::new(&CodelConfig {
            ecn: true,
            ..CodelConfig::default()
        });
        let mut rng = Rng::new(1);
        let mut d = dep(10 * MS, 0, 20, 20_000, false);
        d.ect = true;
        c.on_dequeue(&d, &mut rng);
        d.now = 110 * MS;
        d.enqueued_at = 100 * MS;
        assert_eq!(c.on_dequeue(&d, &mut rng), AqmVerdict::Mark);
        d.now = 210 * MS;
        d.enqueued_at = 200 * MS;
        assert_eq!(c.on_dequeue(&d, &mut rng), AqmVerdict::Mark);
        assert_eq!(c.count(), 2);
        // A Not-ECT packet is dropped even with ecn on.
        d.ect = false;
        d.now = 300 * MS;
        d.enqueued_at = 290 * MS;
        assert_eq!(c.on_dequeue(&d, &mut rng), AqmVerdict::Drop);
    }

    #[test]
    fn ranges() {
        let read = |target, interval| {
            CodelConfig::from_params(&[("target".into(), target), ("interval".into(), interval)])
        };
        assert_eq!(read(MS, 5000 * MS).map(|c| c.target), Ok(MS));
        for (target, interval) in [(0, MS), (MS, 0), (5001 * MS, MS), (MS, 5001 * MS)] {
            assert!(read(target, interval).is_err(), "{target} {interval}");
        }
        let c = CodelConfig {
            target: 7 * MS,
            interval: 70 * MS,
            ecn: true,
        };
        assert_eq!(CodelConfig::from_params(&AqmConfig::from(&c).params), Ok(c));
    }
}
