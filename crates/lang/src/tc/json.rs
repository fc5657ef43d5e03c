//! `tc -j qdisc show`: a qdisc as iproute2 prints it in JSON, with the names,
//! nesting and order of keys its print_json calls give (tc_qdisc.c for the
//! qdisc, q_netem.c, q_tbf.c and q_fq_codel.c for the options).

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{FqCodel, Loss, Netem, Parent, Qdisc, QdiscStats, SlotTimes, Tbf};
use crate::tc::units::Percent;
use crate::tc::Chance;

/// A JSON value whose objects keep their keys in the order given, as
/// iproute2 prints them.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Bool(bool),
    Uint(u64),
    Int(i64),
    Float(f64),
    Str(String),
    Object(Vec<(&'static str, Json)>),
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Uint(n) => s.serialize_u64(*n),
            Json::Int(n) => s.serialize_i64(*n),
            Json::Float(x) => s.serialize_f64(*x),
            Json::Str(t) => s.serialize_str(t),
            Json::Object(entries) => {
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

/// One qdisc as `tc -j qdisc show` prints it: `dev` only when the command
/// named no device (as tc), and with `stats` (`-s`) tc's counters after the
/// options.
pub fn qdisc_json(
    handle: u16,
    parent: &Parent,
    dev: Option<&str>,
    qdisc: &Qdisc,
    stats: Option<&QdiscStats>,
) -> Json {
    let mut o = vec![
        ("kind", Json::Str(qdisc.kind().into())),
        ("handle", Json::Str(format!("{handle:x}:"))),
    ];
    if let Some(dev) = dev {
        o.push(("dev", Json::Str(dev.into())));
    }
    match parent {
        Parent::Root => {
            o.push(("root", Json::Bool(true)));
            o.push(("refcnt", Json::Uint(2)));
        }
        Parent::Class(..) => o.push(("parent", Json::Str(super::class_name(parent)))),
    }
    o.push(("options", qdisc.json()));
    if let Some(st) = stats {
        o.extend([
            ("bytes", Json::Uint(st.bytes)),
            ("packets", Json::Uint(st.packets)),
            ("drops", Json::Uint(st.drops)),
            ("overlimits", Json::Uint(st.overlimits)),
            ("requeues", Json::Uint(0)),
            ("backlog", Json::Uint(st.backlog_bytes)),
            ("qlen", Json::Uint(st.backlog_packets)),
        ]);
    }
    Json::Object(o)
}

impl Qdisc {
    /// The options object of `tc -j qdisc show`.
    pub fn json(&self) -> Json {
        match self {
            Qdisc::Netem(n) => n.json(),
            Qdisc::Tbf(t) => t.json(),
            Qdisc::FqCodel(f) => f.json(),
        }
    }
}

/// netem's probabilities: fractions of 1.
fn fraction(p: Percent) -> Json {
    Json::Float(p.fraction())
}

/// netem's `{"WORD": P, "correlation": C}`.
fn chance(word: &'static str, c: &Chance) -> Json {
    Json::Object(vec![
        (word, fraction(c.p)),
        ("correlation", fraction(c.corr)),
    ])
}

/// netem's times: seconds.
fn seconds_ns(ns: u64) -> Json {
    Json::Float(ns as f64 / 1e9)
}

impl Netem {
    /// Times in seconds, probabilities as fractions, the rate in bytes/s.
    pub fn json(&self) -> Json {
        let mut o = vec![("limit", Json::Uint(self.limit))];
        if self.delay_us > 0 {
            o.push((
                "delay",
                Json::Object(vec![
                    ("delay", Json::Float(self.delay_us as f64 / 1e6)),
                    ("jitter", Json::Float(self.jitter_us as f64 / 1e6)),
                    ("correlation", fraction(self.delay_corr)),
                ]),
            ));
        }
        match &self.loss {
            Some(Loss::Random(c)) if c.p.0 > 0 => o.push(("loss-random", chance("loss", c))),
            Some(Loss::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            }) => o.push((
                "loss-state",
                Json::Object(vec![
                    ("p13", fraction(*p13)),
                    ("p31", fraction(*p31)),
                    ("p32", fraction(*p32)),
                    ("p23", fraction(*p23)),
                    ("p14", fraction(*p14)),
                ]),
            )),
            Some(Loss::GeModel {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }) => o.push((
                "loss-gemodel",
                Json::Object(vec![
                    ("p", fraction(*p)),
                    ("r", fraction(*r)),
                    ("1-h", fraction(*one_minus_h)),
                    ("1-k", fraction(*one_minus_k)),
                ]),
            )),
            _ => {}
        }
        for (word, c) in [
            ("duplicate", &self.duplicate),
            ("reorder", &self.reorder),
            ("corrupt", &self.corrupt),
        ] {
            if let Some(c) = c.as_ref().filter(|c| c.p.0 > 0) {
                o.push((word, chance(word, c)));
            }
        }
        if let Some(r) = self.rate.as_ref().filter(|r| r.bps > 0) {
            o.push((
                "rate",
                Json::Object(vec![
                    ("rate", Json::Uint(r.bps / 8)),
                    ("packetoverhead", Json::Int(r.packet_overhead.into())),
                    ("cellsize", Json::Uint(r.cell_size.into())),
                    ("celloverhead", Json::Int(r.cell_overhead.into())),
                ]),
            ));
        }
        if let Some(slot) = &self.slot {
            let mut s = match &slot.times {
                SlotTimes::Uniform { min_ns, max_ns } => vec![
                    ("min-delay", seconds_ns(*min_ns)),
                    ("max-delay", seconds_ns(*max_ns)),
                ],
                SlotTimes::Distribution {
                    delay_ns,
                    jitter_ns,
                    ..
                } => vec![
                    ("distribution", seconds_ns(*delay_ns)),
                    ("jitter", seconds_ns(*jitter_ns)),
                ],
            };
            s.push(("packets", Json::Int(slot.packets.unwrap_or(0).into())));
            let bytes = slot
                .bytes
                .map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX));
            s.push(("bytes", Json::Int(bytes)));
            o.push(("slot", Json::Object(s)));
        }
        if let Some(seed) = self.seed {
            o.push(("seed", Json::Uint(seed)));
        }
        o.push(("ecn", Json::Bool(self.ecn)));
        o.push(("gap", Json::Uint(self.gap.into())));
        Json::Object(o)
    }
}

impl Tbf {
    /// The rates in bytes/s, sizes in bytes, `lat` in microseconds (or
    /// `limit` when the bucket is larger than it). iproute2 prints the
    /// peak rate as text only, and so leaves it out here too.
    pub fn json(&self) -> Json {
        let mut o = vec![
            ("rate", Json::Uint(self.rate_bps / 8)),
            ("burst", Json::Uint(self.burst)),
        ];
        if let (Some(_), Some(mtu)) = (self.peakrate_bps, self.mtu) {
            o.push(("minburst", Json::Uint(mtu)));
        }
        let lat = self.latency_us();
        if lat >= 0.0 {
            o.push(("lat", Json::Uint(lat as u64)));
        } else {
            o.push(("limit", Json::Uint(self.limit)));
        }
        if self.overhead > 0 {
            o.push(("overhead", Json::Int(self.overhead.into())));
        }
        Json::Object(o)
    }
}

impl FqCodel {
    /// Times in microseconds, `memory_limit` in bytes; `ecn` only when on.
    pub fn json(&self) -> Json {
        let mut o = vec![
            ("limit", Json::Uint(self.limit.into())),
            ("flows", Json::Uint(self.flows.into())),
            ("quantum", Json::Uint(self.quantum.into())),
            ("target", Json::Uint(self.target_us)),
        ];
        if let Some(ce) = self.ce_threshold_us {
            o.push(("ce_threshold", Json::Uint(ce)));
        }
        o.push(("interval", Json::Uint(self.interval_us)));
        o.push(("memory_limit", Json::Uint(self.memory_limit)));
        if self.ecn {
            o.push(("ecn", Json::Bool(true)));
        }
        if self.drop_batch > 0 {
            o.push(("drop_batch", Json::Uint(self.drop_batch.into())));
        }
        Json::Object(o)
    }
}
