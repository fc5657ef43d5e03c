//! FQ_PIE: flow queueing with PIE (RFC 8033) on every queue, FreeBSD's
//! `dn_sched_fq_pie`.
//!
//! The same scheduler as [`super::fq_codel`] (5-tuple hashed into `flows`
//! queues, RFC 8290's deficit round robin over new and old lists, `limit`
//! packets across the instance with the longest queue's head dropped on
//! overflow), with a PIE controller per queue instead of CoDel. As in
//! FreeBSD (`fq_activate_pie`), a queue that comes back from idle gets its
//! PIE restarted: probability 0, full burst allowance, update clock from now.
//!
//! FreeBSD's defaults (`fq_pie_sysctl`): `target` 15 ms, `tupdate` 15 ms,
//! `max_burst` 150 ms, `max_ecnth` 0.1, `alpha` 0.125, `beta` 1.25,
//! `capdrop` and `derand` on, ECN off, and the queue delay taken from packet
//! timestamps (`ts`: fq_pie's default flags leave out the departure rate
//! estimator that plain PIE uses); `quantum` 1514, `limit` 10240, `flows`
//! 1024. Bounds: target and tupdate 1 us..5 s, max_burst 0..5 s; quantum,
//! limit and flows as fq_codel's.
//!
//! Not yet in the language: `alpha`, `beta` and `max_ecnth` are fractions,
//! and a scheduler parameter can only be a count, a time or a flag so far.
//! The type accepts them in thousandths (`alpha 125` is 0.125), the unit of
//! FreeBSD's `net.inet.ip.dummynet.fqpie.*` sysctls, for a caller that fills
//! them from those settings; they are left out of [`TYPE`]'s parameter table
//! so that `alpha 0.125` is not misread. `onoff` has no negative keyword in
//! ipfw; `noonoff` is this engine's, so that the flag table can express it.

use super::fq_codel::{
    fq_param, time_in, FqDrr, DEFAULT_FLOWS, DEFAULT_LIMIT, DEFAULT_QUANTUM, FLOW_STATE_BYTES,
};
use super::{ParamSpec, SchedType, SubQueues};
use crate::aqm::{fmt_g, fmt_time};
use crate::config::{AqmConfig, PieConfig, QueueLimit};
use crate::time::{Nanos, NS_PER_SEC};

const MAX_TIME: Nanos = 5 * NS_PER_SEC;

pub static TYPE: SchedType = SchedType {
    name: "fq_pie",
    aliases: &["fq-pie"],
    display: "FQ_PIE",
    params: &[
        ParamSpec::time("target"),
        ParamSpec::time("tupdate"),
        ParamSpec::time("max_burst"),
        ParamSpec::count("quantum"),
        ParamSpec::count("limit"),
        ParamSpec::count("flows"),
        ParamSpec::flag("ecn", "noecn"),
        ParamSpec::flag("capdrop", "nocapdrop"),
        ParamSpec::flag("onoff", "noonoff"),
        ParamSpec::flag("dre", "ts"),
        ParamSpec::flag("derand", "noderand"),
    ],
    new_instance: |params| {
        let c = FqPieParams::parse(params)?;
        Ok(Box::new(FqDrr::new(c.quantum)))
    },
    // Every packet must pass through its queue's PIE.
    idle_bypass: false,
    queue_state_bytes: FLOW_STATE_BYTES,
    sub_queues: Some(|params| FqPieParams::parse(params).unwrap_or_default().sub_queues()),
    describe: Some(|params| FqPieParams::parse(params).unwrap_or_default().describe()),
};

/// fq_pie's parameters, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct FqPieParams {
    pub pie: PieConfig,
    pub quantum: u32,
    pub limit: u32,
    pub flows: u32,
}

impl Default for FqPieParams {
    fn default() -> Self {
        FqPieParams {
            pie: PieConfig {
                dre: false,
                ..PieConfig::default()
            },
            quantum: DEFAULT_QUANTUM,
            limit: DEFAULT_LIMIT,
            flows: DEFAULT_FLOWS,
        }
    }
}

impl FqPieParams {
    pub fn parse(params: &[(String, u64)]) -> Result<Self, String> {
        let mut p = FqPieParams::default();
        for (k, v) in params {
            let on = *v != 0;
            match k.to_ascii_lowercase().as_str() {
                "target" => p.pie.target = time_in("fq_pie", k, *v, MAX_TIME)?,
                "tupdate" => p.pie.tupdate = time_in("fq_pie", k, *v, MAX_TIME)?,
                "max_burst" if *v <= MAX_TIME => p.pie.max_burst = *v,
                "max_burst" => return Err("fq_pie max_burst must be at most 5000ms".into()),
                "ecn" => p.pie.ecn = on,
                "capdrop" => p.pie.capdrop = on,
                "onoff" => p.pie.onoff = on,
                "dre" => p.pie.dre = on,
                "derand" => p.pie.derand = on,
                "alpha" => p.pie.alpha = thousandths("alpha", *v, 7000)?,
                "beta" => p.pie.beta = thousandths("beta", *v, 7000)?,
                "max_ecnth" => p.pie.max_ecnth = thousandths("max_ecnth", *v, 1000)?,
                other => {
                    if !fq_param(
                        &mut p.quantum,
                        &mut p.limit,
                        &mut p.flows,
                        "fq_pie",
                        other,
                        *v,
                    )? {
                        return Err(format!(
                            "fq_pie takes target, tupdate, max_burst, quantum, limit, flows, \
                             ecn|noecn, capdrop|nocapdrop, onoff, dre|ts and derand|noderand, \
                             not `{k}`"
                        ));
                    }
                }
            }
        }
        Ok(p)
    }

    pub fn sub_queues(&self) -> SubQueues {
        SubQueues {
            buckets: self.flows,
            limit: self.limit,
            aqm: AqmConfig::Pie(self.pie.clone()),
            aqm_limit: QueueLimit::Slots(self.limit),
        }
    }

    /// FreeBSD's line (two leading spaces, as ipfw prints it): `  FQ_PIE
    /// target 15ms tupdate 15ms alpha 0.125 beta 1.25 max_burst 150ms
    /// max_ecnth 0.1 quantum 1514 limit 10240 flows 1024 NoECN CapDrop TS
    /// Derand`.
    pub fn describe(&self) -> String {
        let c = &self.pie;
        format!(
            "  FQ_PIE target {} tupdate {} alpha {} beta {} max_burst {} max_ecnth {} \
             quantum {} limit {} flows {} {} {}{} {} {}",
            fmt_time(c.target),
            fmt_time(c.tupdate),
            fmt_g(c.alpha, 6),
            fmt_g(c.beta, 6),
            fmt_time(c.max_burst),
            fmt_g(c.max_ecnth, 3),
            self.quantum,
            self.limit,
            self.flows,
            if c.ecn { "ECN" } else { "NoECN" },
            if c.capdrop { "CapDrop" } else { "NoCapDrop" },
            if c.onoff { " OnOff" } else { "" },
            if c.dre { "DRE" } else { "TS" },
            if c.derand { "Derand" } else { "NoDerand" },
        )
    }
}

/// A fraction given in thousandths, within FreeBSD's bound.
fn thousandths(k: &str, v: u64, max: u64) -> Result<f64, String> {
    if v <= max {
        Ok(v as f64 / 1000.0)
    } else {
        Err(format!("fq_pie {k} is in thousandths, at most {max}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    #[test]
    fn parameters_follow_freebsd_defaults_and_bounds() {
        let p = FqPieParams::parse(&[]).unwrap();
        assert_eq!(
            p.describe(),
            "  FQ_PIE target 15ms tupdate 15ms alpha 0.125 beta 1.25 max_burst 150ms \
             max_ecnth 0.1 quantum 1514 limit 10240 flows 1024 NoECN CapDrop TS Derand"
        );
        let p = FqPieParams::parse(&[
            ("target".into(), 20 * NS_PER_MS),
            ("onoff".into(), 1),
            ("dre".into(), 1),
            ("ecn".into(), 1),
            ("alpha".into(), 250),
            ("max_ecnth".into(), 200),
        ])
        .unwrap();
        assert!(
            p.describe().contains("alpha 0.25 beta 1.25"),
            "{}",
            p.describe()
        );
        assert!(p.describe().contains("max_ecnth 0.2 "), "{}", p.describe());
        assert!(
            p.describe().ends_with("ECN CapDrop OnOff DRE Derand"),
            "{}",
            p.describe()
        );
        assert_eq!(p.sub_queues().aqm, AqmConfig::Pie(p.pie.clone()));
        for bad in [
            ("quantum", 0),
            ("limit", 0),
            ("flows", 70000),
            ("tupdate", 0),
            ("max_burst", 6 * NS_PER_SEC),
            ("interval", NS_PER_MS),
            ("beta", 7001),
            ("max_ecnth", 1001),
        ] {
            assert!(
                (TYPE.new_instance)(&[(bad.0.into(), bad.1)]).is_err(),
                "{bad:?}"
            );
        }
    }
}
