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
//! `onoff` has no negative keyword in ipfw; `noonoff` is this engine's,
//! so that the flag table can express it.

use super::fq_codel::{
    fq_param, fq_tunable, FqDrr, BYTES, DEFAULT_FLOWS, DEFAULT_LIMIT, DEFAULT_QUANTUM, FLOWS,
    FLOW_STATE_BYTES, MAX_FLOWS, MAX_LIMIT, MAX_QUANTUM, PACKETS,
};
use super::{ParamSpec, SchedType, SubQueues};
use crate::units::{fmt_g, fmt_time};
use std::sync::Arc;

use crate::aqm::pie::PieConfig;

use crate::params::ParamError;
use crate::params::TunableUnit;
use crate::time::{Nanos, NS_PER_SEC, NS_PER_US};
use crate::units::QueueLimit;

const MAX_TIME: Nanos = 5 * NS_PER_SEC;

pub static TYPE: SchedType = SchedType {
    name: "fq_pie",
    aliases: &["fq-pie"],
    display: "FQ_PIE",
    params: &[
        ParamSpec::time("target").within(NS_PER_US, MAX_TIME),
        ParamSpec::time("tupdate").within(NS_PER_US, MAX_TIME),
        ParamSpec::time("max_burst").within(0, MAX_TIME),
        ParamSpec::count("quantum").within(1, MAX_QUANTUM as u64),
        ParamSpec::count("limit").within(1, MAX_LIMIT as u64),
        ParamSpec::count("flows").within(1, MAX_FLOWS as u64),
        ParamSpec::flag("ecn", "noecn"),
        ParamSpec::flag("capdrop", "nocapdrop"),
        ParamSpec::flag("onoff", "noonoff"),
        ParamSpec::flag("dre", "ts"),
        ParamSpec::flag("derand", "noderand"),
        ParamSpec::fraction("max_ecnth", 0.0, 1.0),
        ParamSpec::fraction("alpha", 0.0, 7.0),
        ParamSpec::fraction("beta", 0.0, 7.0),
    ],
    tunables: &[
        fq_tunable(
            "fqpie.target",
            "target",
            TunableUnit::Micros,
            15_000,
            10_000_000,
        ),
        fq_tunable(
            "fqpie.tupdate",
            "tupdate",
            TunableUnit::Micros,
            15_000,
            10_000_000,
        ),
        fq_tunable(
            "fqpie.max_burst",
            "max_burst",
            TunableUnit::Micros,
            150_000,
            10_000_000,
        ),
        fq_tunable(
            "fqpie.max_ecnth",
            "max_ecnth",
            TunableUnit::Thousandths,
            100,
            1000,
        ),
        fq_tunable("fqpie.alpha", "alpha", TunableUnit::Thousandths, 125, 7000),
        fq_tunable("fqpie.beta", "beta", TunableUnit::Thousandths, 1250, 7000),
        fq_tunable("fqpie.quantum", "quantum", BYTES, 1514, MAX_QUANTUM as u64),
        fq_tunable("fqpie.limit", "limit", PACKETS, 10240, MAX_LIMIT as u64),
        fq_tunable("fqpie.flows", "flows", FLOWS, 1024, MAX_FLOWS as u64),
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
    weight_is_priority: false,
    lmax: None,
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
    pub fn parse(params: &[(String, u64)]) -> Result<Self, ParamError> {
        let mut p = FqPieParams::default();
        for (k, v) in params {
            let k = k.to_ascii_lowercase();
            if !p.pie.read(&k, *v, "fq_pie", MAX_TIME)?
                && !fq_param(&mut p.quantum, &mut p.limit, &mut p.flows, "fq_pie", &k, *v)?
            {
                return Err(format!(
                    "fq_pie takes target, tupdate, max_burst, max_ecnth, alpha, beta, quantum, \
                     limit, flows, ecn|noecn, capdrop|nocapdrop, onoff, dre|ts and \
                     derand|noderand, not `{k}`"
                )
                .into());
            }
        }
        Ok(p)
    }

    pub fn sub_queues(&self) -> SubQueues {
        SubQueues {
            buckets: self.flows,
            limit: self.limit,
            aqm: Arc::new(self.pie.clone()),
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
             quantum {} limit {} flows {} {}",
            fmt_time(c.target),
            fmt_time(c.tupdate),
            fmt_g(c.alpha, 6),
            fmt_g(c.beta, 6),
            fmt_time(c.max_burst),
            fmt_g(c.max_ecnth, 3),
            self.quantum,
            self.limit,
            self.flows,
            c.flags(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::to_ppb;
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
            ("alpha".into(), to_ppb(0.25)),
            ("max_ecnth".into(), to_ppb(0.2)),
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
        assert_eq!(
            p.sub_queues().aqm.display(),
            crate::aqm::AqmModel::display(&p.pie)
        );
        for bad in [
            ("quantum", 0),
            ("limit", 0),
            ("flows", 70000),
            ("tupdate", 0),
            ("max_burst", 6 * NS_PER_SEC),
            ("interval", NS_PER_MS),
            ("beta", to_ppb(7.001)),
            ("max_ecnth", to_ppb(1.001)),
        ] {
            assert!(
                (TYPE.new_instance)(&[(bad.0.into(), bad.1)]).is_err(),
                "{bad:?}"
            );
        }
    }
}
