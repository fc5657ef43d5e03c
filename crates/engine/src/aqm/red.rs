//! RED and gentle RED (Floyd & Jacobson 1993), with FreeBSD's semantics.
//!
//! On each arrival, with `q` the queue length in slots (or in bytes when the
//! flowset's limit is in bytes; the thresholds are in the same unit):
//!
//! - Average: if `q > 0`, `avg += w_q * (q - avg)`. If the queue is empty,
//!   `avg` only decays, as if `m` empty slots had been seen while it was
//!   idle: `avg *= (1 - w_q)^m` with `m = idle time / s`, `s` being the time
//!   the link takes to send a `RED_AVG_PKT_SIZE` (512-byte) packet; on an
//!   unlimited link any idle time empties the average.
//! - `avg < min_th`: accept. `min_th < avg < max_th`: drop with base
//!   probability `p_b = max_p * (avg - min_th) / (max_th - min_th)`.
//!   `avg >= max_th`: drop (RED), or for gentle RED continue on a second
//!   slope `p_b = max_p + (1 - max_p) * (avg - max_th) / max_th`, reaching
//!   1 at `2 * max_th`.
//! - In byte mode `p_b` is scaled by `len / RED_MAX_PKT_SIZE` (1500), so
//!   small packets are dropped less often.
//! - Drops are spread with FreeBSD's count method: after each drop (or on
//!   the first packet above `min_th`) a uniform `R` in `[0, 1)` is drawn, and
//!   the packet that makes `count * p_b > R` is dropped, `count` being the
//!   packets since then. The gap between drops is thus uniform over
//!   `1..1/p_b` packets, the paper's "method 2".
//! - With `ecn`, FreeBSD marks (or drops, if not ECN-capable) every packet
//!   that finds `avg` above `min_th`; we do the same.
//!
//! FreeBSD computes the idle decay from a 256-entry table indexed by idle
//! 1 ms ticks, which in fact decays per tick rather than per small-packet
//! time; we evaluate the defining formula on exact nanoseconds instead.
//! FreeBSD's fixed-point arithmetic (16 fraction bits) is replaced by `f64`.

use super::{AqmConfig, AqmModel, AqmState, AqmType, AqmVerdict, Arrival, Departure};
use crate::params::{self, ParamError, ParamSpec, Params};
use crate::rng::Rng;
use crate::time::{Nanos, NS_PER_SEC};
use crate::units::QueueLimit;

/// `red w_q/min_th/max_th/max_p`, marking with the flowset's `ecn`.
pub static RED: AqmType = AqmType {
    name: "red",
    positional: POSITIONAL,
    params: &[],
    flowset_ecn: true,
    tunables: &[],
    build: |p| build(p, false),
};

/// `gred w_q/min_th/max_th/max_p`: gentle RED.
pub static GRED: AqmType = AqmType {
    name: "gred",
    positional: POSITIONAL,
    params: &[],
    flowset_ecn: true,
    tunables: &[],
    build: |p| build(p, true),
};

const POSITIONAL: &[ParamSpec] = &[
    ParamSpec::fraction_above("w_q", 0.0, 1.0),
    ParamSpec::size("min_th"),
    ParamSpec::size("max_th"),
    ParamSpec::fraction("max_p", 0.0, 1.0),
];

fn build(p: &Params, gentle: bool) -> Result<Box<dyn AqmModel>, ParamError> {
    Ok(Box::new(RedModel {
        cfg: RedConfig::from_params(p, gentle)?,
        gentle,
    }))
}

/// RED and gentle RED, written `w_q/min_th/max_th/max_p` after `red` / `gred`.
///
/// FreeBSD has no defaults for these (all four are required on the command
/// line); [`Default`] gives Floyd and Jacobson's usual values, for tests and
/// programs that build one.
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

impl RedConfig {
    /// Reads `red`'s (or, `gentle`, `gred`'s) parameters, all four values
    /// required, and checks what ipfw refuses: `0 < w_q <= 1`,
    /// `0 <= max_p <= 1`, `max_th > 0`, and `min_th < max_th` (`<=` with
    /// ecn).
    pub fn from_params(params: &Params, gentle: bool) -> Result<Self, ParamError> {
        let name = if gentle { "gred" } else { "red" };
        let need = |k: &str| {
            params::get(params, k)
                .ok_or_else(|| format!("{name} needs w_q/min_th/max_th/max_p; `{k}` is missing"))
        };
        if let Some((k, _)) = params
            .iter()
            .find(|(k, _)| !["w_q", "min_th", "max_th", "max_p", "ecn"].contains(&k.as_str()))
        {
            return Err(format!("{name} takes w_q/min_th/max_th/max_p and ecn, not `{k}`").into());
        }
        let c = RedConfig {
            w_q: params::fraction_in(name, "w_q", need("w_q")?, (0.0, 1.0), true)?,
            min_th: need("min_th")?,
            max_th: need("max_th")?,
            max_p: params::fraction_in(name, "max_p", need("max_p")?, (0.0, 1.0), false)?,
            ecn: params::get(params, "ecn").is_some_and(|v| v != 0),
        };
        if c.max_th == 0 {
            return Err(format!("{name}: max_th must be > 0").into());
        }
        if c.ecn && c.min_th > c.max_th {
            return Err(
                format!("{name}: min_th {} must be <= max_th {}", c.min_th, c.max_th).into(),
            );
        }
        if !c.ecn && c.min_th >= c.max_th {
            return Err(
                format!("{name}: min_th {} must be < max_th {}", c.min_th, c.max_th).into(),
            );
        }
        Ok(c)
    }

    /// As `red` (or, `gentle`, `gred`).
    pub fn aqm(&self, gentle: bool) -> AqmConfig {
        let p = params::to_ppb;
        let params = [
            ("w_q", p(self.w_q)),
            ("min_th", self.min_th),
            ("max_th", self.max_th),
            ("max_p", p(self.max_p)),
            ("ecn", u64::from(self.ecn)),
        ];
        AqmConfig::new(
            if gentle { &GRED } else { &RED },
            params.iter().map(|&(k, v)| (k.into(), v)).collect(),
        )
    }
}

#[derive(Debug)]
struct RedModel {
    cfg: RedConfig,
    gentle: bool,
}

impl AqmModel for RedModel {
    fn new_state(&self, limit: QueueLimit) -> Option<Box<dyn AqmState>> {
        Some(Box::new(Red::new(&self.cfg, self.gentle, limit)))
    }

    /// `"\n\t  RED w_q 0.002000 min_th 5 max_th 15 max_p 0.100000"` (`GRED`
    /// for gentle, ` (ecn)` with ecn): FreeBSD prints RED on its own line.
    fn display(&self) -> String {
        let c = &self.cfg;
        format!(
            "\n\t {}RED w_q {:.6} min_th {} max_th {} max_p {:.6}{}",
            if self.gentle { 'G' } else { ' ' },
            c.w_q,
            c.min_th,
            c.max_th,
            c.max_p,
            if c.ecn { " (ecn)" } else { "" }
        )
    }
}

/// FreeBSD's `net.inet.ip.dummynet.red_avg_pkt_size`: the small packet of the
/// idle decay, in bytes.
pub const RED_AVG_PKT_SIZE: u64 = 512;
/// FreeBSD's `net.inet.ip.dummynet.red_max_pkt_size`: the packet size at which
/// byte-mode drop probabilities are taken as given.
pub const RED_MAX_PKT_SIZE: u64 = 1500;

/// The RED state of one queue.
#[derive(Debug, Clone)]
pub struct Red {
    w_q: f64,
    min_th: f64,
    max_th: f64,
    max_p: f64,
    gentle: bool,
    ecn: bool,
    /// Thresholds and queue length in bytes rather than slots.
    bytes: bool,
    avg: f64,
    /// Packets since the last drop; -1 after the average was below `min_th`.
    count: i64,
    /// The uniform draw the count is compared against.
    random: f64,
    /// When the queue last became empty.
    idle_since: Nanos,
}

impl Red {
    pub fn new(cfg: &RedConfig, gentle: bool, limit: QueueLimit) -> Self {
        Red {
            w_q: cfg.w_q,
            min_th: cfg.min_th as f64,
            max_th: cfg.max_th as f64,
            max_p: cfg.max_p,
            gentle,
            ecn: cfg.ecn,
            bytes: matches!(limit, QueueLimit::Bytes(_)),
            avg: 0.0,
            count: -1,
            random: 0.0,
            idle_since: 0,
        }
    }

    /// The average queue estimate, in slots or bytes.
    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// The base drop probability `p_b` for an average of `avg`, before the
    /// byte-mode scaling and the count spreading; 1 means "drop".
    pub fn base_probability(&self, avg: f64) -> f64 {
        if avg < self.min_th {
            0.0
        } else if avg >= self.max_th {
            if self.gentle {
                self.max_p + (1.0 - self.max_p) * (avg - self.max_th) / self.max_th
            } else {
                1.0
            }
        } else if avg > self.min_th {
            self.max_p * (avg - self.min_th) / (self.max_th - self.min_th)
        } else {
            0.0
        }
    }

    fn update_average(&mut self, now: Nanos, q: f64, link_bw: u64) {
        if q > 0.0 {
            self.avg += (q - self.avg) * self.w_q;
        } else if self.avg != 0.0 {
            let idle = now.saturating_sub(self.idle_since);
            if link_bw == 0 {
                self.avg = 0.0;
            } else {
                // m = idle / s, s = RED_AVG_PKT_SIZE * 8 / bw seconds.
                let m = idle as f64 * link_bw as f64
                    / (RED_AVG_PKT_SIZE as f64 * 8.0 * NS_PER_SEC as f64);
                self.avg *= (1.0 - self.w_q).powf(m);
            }
        }
    }
}

impl AqmState for Red {
    fn on_enqueue(&mut self, a: &Arrival, rng: &mut Rng) -> AqmVerdict {
        let q = if self.bytes {
            a.queue.len_bytes as f64
        } else {
            f64::from(a.queue.len_pkts)
        };
        self.update_average(a.now, q, a.link_bw);
        let signal = if self.ecn {
            AqmVerdict::Mark
        } else {
            AqmVerdict::Drop
        };
        let avg = self.avg;
        if avg < self.min_th {
            self.count = -1;
            return AqmVerdict::Accept;
        }
        if (avg >= self.max_th || avg > self.min_th) && self.ecn {
            return signal;
        }
        if avg >= self.max_th && !self.gentle {
            self.count = -1;
            return signal;
        }
        let mut p_b = self.base_probability(avg);
        if self.bytes {
            p_b = p_b * f64::from(a.len) / RED_MAX_PKT_SIZE as f64;
        }
        self.count += 1;
        if self.count == 0 {
            self.random = super::uniform(rng);
        } else if p_b * self.count as f64 > self.random {
            self.count = 0;
            self.random = super::uniform(rng);
            return signal;
        }
        AqmVerdict::Accept
    }

    fn on_dequeue(&mut self, d: &Departure, _rng: &mut Rng) -> AqmVerdict {
        if d.after().len_pkts == 0 {
            self.idle_since = d.now;
        }
        AqmVerdict::Accept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::QueueState;

    fn arrival(now: Nanos, pkts: u32) -> Arrival {
        Arrival {
            now,
            len: 1000,
            ect: false,
            queue: QueueState {
                len_pkts: pkts,
                len_bytes: u64::from(pkts) * 1000,
            },
            link_bw: 8_000_000,
        }
    }

    #[test]
    fn average_follows_the_ewma_and_decays_when_idle() {
        let cfg = RedConfig {
            w_q: 0.01,
            min_th: 1000,
            max_th: 2000,
            max_p: 0.1,
            ecn: false,
        };
        let mut r = Red::new(&cfg, false, QueueLimit::Slots(100));
        let mut rng = Rng::new(1);
        let mut expect = 0.0f64;
        for (i, q) in [3u32, 7, 7, 0, 12, 40, 5].iter().enumerate() {
            r.on_enqueue(&arrival(i as Nanos, *q), &mut rng);
            if *q > 0 {
                expect = expect * 0.99 + 0.01 * f64::from(*q);
            } else {
                // Idle since time 0 (nothing ever left): i ns of small packets
                // of 512 us each.
                expect *= 0.99f64.powf(i as f64 / 512_000.0);
            }
            assert!((r.avg() - expect).abs() < 1e-12, "{} vs {expect}", r.avg());
        }
        // The queue empties at 1 s; an arrival 2.048 s later finds it idle:
        // at 8 Mbit/s a 512-byte packet takes 512 us, so m = 4000.
        r.on_dequeue(
            &Departure {
                now: NS_PER_SEC,
                enqueued_at: 0,
                len: 1000,
                ect: false,
                queue: QueueState {
                    len_pkts: 1,
                    len_bytes: 1000,
                },
                resumed: false,
            },
            &mut rng,
        );
        r.on_enqueue(&arrival(NS_PER_SEC + 2_048_000_000, 0), &mut rng);
        let decayed = expect * 0.99f64.powf(4000.0);
        assert!((r.avg() - decayed).abs() < 1e-12 * expect);
    }

    #[test]
    fn probabilities_on_both_slopes() {
        let cfg = RedConfig {
            w_q: 0.5,
            min_th: 10,
            max_th: 30,
            max_p: 0.2,
            ecn: false,
        };
        let red = Red::new(&cfg, false, QueueLimit::Slots(100));
        let gred = Red::new(&cfg, true, QueueLimit::Slots(100));
        assert_eq!(red.base_probability(5.0), 0.0);
        assert!((red.base_probability(20.0) - 0.1).abs() < 1e-15);
        assert_eq!(red.base_probability(30.0), 1.0);
        assert!((gred.base_probability(30.0) - 0.2).abs() < 1e-15);
        assert!((gred.base_probability(45.0) - 0.6).abs() < 1e-15);
        assert!((gred.base_probability(60.0) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn ranges() {
        let check = |c: &RedConfig| RedConfig::from_params(&c.aqm(false).params, false);
        let ok = RedConfig::default();
        assert_eq!(check(&ok), Ok(ok.clone()));
        let bad = [
            RedConfig {
                w_q: 0.0,
                ..ok.clone()
            },
            RedConfig {
                w_q: 1.5,
                ..ok.clone()
            },
            RedConfig {
                max_p: 1.1,
                ..ok.clone()
            },
            RedConfig {
                max_th: 0,
                min_th: 0,
                ..ok.clone()
            },
            RedConfig {
                min_th: 15,
                max_th: 15,
                ..ok.clone()
            },
        ];
        for b in bad {
            assert!(check(&b).is_err(), "{b:?}");
        }
        let equal_with_ecn = RedConfig {
            min_th: 15,
            max_th: 15,
            ecn: true,
            ..ok
        };
        assert!(check(&equal_with_ecn).is_ok());
        // All four values are required; nothing else is taken.
        let mut p = RedConfig::default().aqm(true).params;
        p.retain(|(k, _)| k != "max_p");
        assert!(RedConfig::from_params(&p, true)
            .unwrap_err()
            .to_string()
            .contains("max_p"));
        p.push(("target".into(), 1));
        assert!(RedConfig::from_params(&p, true).is_err());
    }
}
