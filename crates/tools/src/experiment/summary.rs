//! A run's numbers: per-flow goodput, RTT and window statistics, Jain's
//! fairness index over the span when every flow runs, and the link's
//! utilisation, drops and marks. Percentiles are the engine's one
//! definition (nearest rank).

use dummynet_engine::percentile::nearest_rank;
use dummynet_engine::Nanos;
use serde::Serialize;

use super::spec::{Run, Until};
use super::traffic::FlowSample;

/// One TCP flow's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowSummary {
    pub direction: super::spec::Direction,
    pub cc: String,
    pub ecn: bool,
    /// Its active span, s from time 0.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    /// Goodput over its span, and the median of its sampling bins, bit/s.
    pub goodput_mean_bps: f64,
    pub goodput_p50_bps: f64,
    /// The sender's smoothed RTT, ms (`None` with no sample).
    pub srtt_p50_ms: Option<f64>,
    pub srtt_p90_ms: Option<f64>,
    pub srtt_p99_ms: Option<f64>,
    /// Congestion window, segments.
    pub cwnd_min: Option<u32>,
    pub cwnd_max: Option<u32>,
    pub retransmits: u32,
    /// Segments delivered with CE (the sender's `delivered_ce`).
    pub ce_marks: u32,
}

/// When a flow is active: from its start to its last byte or the run's end.
pub fn span(run: &Run, i: usize) -> (Nanos, Nanos) {
    let f = &run.flows[i];
    let end = match f.until {
        Until::Time(d) => f.start.saturating_add(d).min(run.duration),
        Until::Bytes(_) => run.duration,
    };
    (f.start, end)
}

/// Goodput of each sampling bin that lies inside [from, to]: (bin's end, bit/s).
pub fn goodput_bins(samples: &[FlowSample], from: Nanos, to: Nanos) -> Vec<(Nanos, f64)> {
    let mut out = Vec::new();
    let mut prev: Option<&FlowSample> = None;
    for s in samples {
        if let Some(p) = prev {
            if p.t >= from && s.t <= to && s.t > p.t {
                let bits = s.received.saturating_sub(p.received) as f64 * 8.0;
                out.push((s.t, bits * 1e9 / (s.t - p.t) as f64));
            }
        }
        prev = Some(s);
    }
    out
}

/// Bytes received between the samples nearest `from` and `to` (inside
/// them), and the time between those samples.
fn bytes_within(samples: &[FlowSample], from: Nanos, to: Nanos) -> Option<(u64, Nanos)> {
    let first = samples.iter().find(|s| s.t >= from)?;
    let last = samples.iter().rev().find(|s| s.t <= to)?;
    (last.t > first.t).then(|| {
        (
            last.received.saturating_sub(first.received),
            last.t - first.t,
        )
    })
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal,
/// 1/n when one takes all. `None` for no values or all zero.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

/// The span when every flow runs (latest start to earliest end), if any.
pub fn all_on(run: &Run) -> Option<(Nanos, Nanos)> {
    let spans: Vec<_> = (0..run.flows.len()).map(|i| span(run, i)).collect();
    let from = spans.iter().map(|s| s.0).max()?;
    let to = spans.iter().map(|s| s.1).min()?;
    (to > from).then_some((from, to))
}

/// Jain's index of the flows' goodputs over [`all_on`] (with at least two
/// sampling intervals in it).
pub fn jain_all_on(run: &Run, flows: &[Vec<FlowSample>]) -> Option<f64> {
    let (from, to) = all_on(run)?;
    let x: Option<Vec<f64>> = flows
        .iter()
        .map(|s| {
            let (bytes, dt) = bytes_within(s, from, to)?;
            (dt >= 2 * run.interval).then(|| bytes as f64 * 8e9 / dt as f64)
        })
        .collect();
    jain(&x?)
}

fn ms(us: u32) -> f64 {
    f64::from(us) / 1000.0
}

/// Flow `i`'s summary from its samples.
pub fn flow(run: &Run, i: usize, samples: &[FlowSample], cc: &str) -> FlowSummary {
    let (from, to) = span(run, i);
    let bins = goodput_bins(samples, from, to);
    let mut rates: Vec<f64> = bins.iter().map(|b| b.1).collect();
    rates.sort_by(f64::total_cmp);
    let mut srtt: Vec<u32> = samples
        .iter()
        .filter_map(|s| s.info.map(|i| i.srtt_us))
        .collect();
    srtt.sort_unstable();
    let cwnd: Vec<u32> = samples
        .iter()
        .filter_map(|s| s.info.map(|i| i.cwnd))
        .collect();
    let last = samples.iter().rev().find_map(|s| s.info);
    let bytes = samples.last().map_or(0, |s| s.received);
    // Over the flow's span only: what a full queue hands over after the
    // sender stopped is not goodput of that span.
    let goodput_mean_bps =
        bytes_within(samples, from, to).map_or(0.0, |(b, dt)| b as f64 * 8e9 / dt as f64);
    FlowSummary {
        direction: run.flows[i].direction,
        cc: cc.to_string(),
        ecn: run.flows[i].ecn,
        start_s: from as f64 / 1e9,
        end_s: to as f64 / 1e9,
        bytes,
        goodput_mean_bps,
        goodput_p50_bps: nearest_rank(&rates, 50).unwrap_or(0.0),
        srtt_p50_ms: nearest_rank(&srtt, 50).map(ms),
        srtt_p90_ms: nearest_rank(&srtt, 90).map(ms),
        srtt_p99_ms: nearest_rank(&srtt, 99).map(ms),
        cwnd_min: cwnd.iter().copied().min(),
        cwnd_max: cwnd.iter().copied().max(),
        retransmits: last.map_or(0, |l| l.total_retrans),
        ce_marks: last.map_or(0, |l| l.delivered_ce),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::spec::{Direction, Flow, Link};
    use dummynet_io::tcpinfo::TcpInfo;

    const S: Nanos = 1_000_000_000;

    fn run(flows: Vec<Flow>) -> Run {
        Run {
            label: "t".into(),
            vars: vec![],
            duration: 10 * S,
            interval: S,
            seed: 1,
            link: Link::Commands(String::new()),
            flows,
            pings: vec![],
            udp: vec![],
            checks: vec![],
        }
    }

    fn flow(start: Nanos, until: Until) -> Flow {
        Flow {
            direction: Direction::Up,
            start,
            until,
            cc: None,
            ecn: false,
        }
    }

    fn sample(t: Nanos, received: u64, srtt_us: u32, cwnd: u32) -> FlowSample {
        FlowSample {
            t,
            received,
            info: Some(TcpInfo {
                srtt_us,
                cwnd,
                total_retrans: 3,
                delivered_ce: 7,
                ..TcpInfo::default()
            }),
        }
    }

    #[test]
    fn jain_by_hand() {
        assert_eq!(jain(&[2.0, 2.0, 2.0, 2.0]), Some(1.0));
        // (1+3)² / (2·(1+9)) = 16/20.
        assert_eq!(jain(&[1.0, 3.0]), Some(0.8));
        // One takes all of four: 1/4.
        assert_eq!(jain(&[5.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    /// Five 1 s bins receiving 1, 2, 3, 4 and 5 hundred kB (0.8 to 4 Mbit/s
    /// the bin): the median bin is 300 kB/s = 2.4 Mbit/s.
    #[test]
    fn a_flows_statistics_by_hand() {
        let r = run(vec![flow(S, Until::Time(5 * S))]);
        let mut samples = vec![sample(S, 0, 10_000, 10)];
        let mut total = 0;
        for k in 1..=5u64 {
            total += k * 100_000;
            samples.push(sample(
                (1 + k) * S,
                total,
                10_000 + k as u32 * 10_000,
                10 * k as u32,
            ));
        }
        // After the flow's end: not in its bins.
        samples.push(sample(8 * S, total + 5_000_000, 20_000, 60));
        let f = super::flow(&r, 0, &samples, "reno");
        let bins = goodput_bins(&samples, S, 6 * S);
        assert_eq!(bins.len(), 5);
        assert_eq!(bins[0], (2 * S, 800_000.0));
        assert_eq!(bins[4], (6 * S, 4_000_000.0));
        assert_eq!(f.goodput_p50_bps, 2_400_000.0);
        // All the bytes it received, the late ones too; its mean is over
        // its span, 1.5 MB in 5 s.
        assert_eq!(f.bytes, 6_500_000);
        assert_eq!(f.goodput_mean_bps, 2_400_000.0);
        // srtt: 10, 20, 20, 30, 40, 50, 60 ms: p50 30, p90 60, p99 60.
        assert_eq!(f.srtt_p50_ms, Some(30.0));
        assert_eq!(f.srtt_p90_ms, Some(60.0));
        assert_eq!(f.srtt_p99_ms, Some(60.0));
        assert_eq!((f.cwnd_min, f.cwnd_max), (Some(10), Some(60)));
        assert_eq!((f.retransmits, f.ce_marks), (3, 7));
        assert_eq!((f.start_s, f.end_s), (1.0, 6.0));
    }

    /// Two flows, the second from 2 s to 6 s: all on from 2 to 6 s. Over
    /// it the first gets 4 MB, the second 1 MB: 8 and 2 Mbit/s, Jain
    /// (10)² / (2·(64+4)) = 100/136.
    #[test]
    fn jain_over_the_span_when_all_run() {
        let r = run(vec![
            flow(0, Until::Time(10 * S)),
            flow(2 * S, Until::Time(4 * S)),
        ]);
        assert_eq!(all_on(&r), Some((2 * S, 6 * S)));
        let a: Vec<FlowSample> = (0..=10)
            .map(|k| sample(k * S, k * 1_000_000, 0, 0))
            .collect();
        let b: Vec<FlowSample> = (0..=10)
            .map(|k| sample(k * S, k.clamp(2, 6).saturating_sub(2) * 250_000, 0, 0))
            .collect();
        let j = jain_all_on(&r, &[a, b]).unwrap();
        assert!((j - 100.0 / 136.0).abs() < 1e-12, "{j}");
        // Flows that never all run: no index.
        let r = run(vec![
            flow(0, Until::Time(2 * S)),
            flow(3 * S, Until::Time(2 * S)),
        ]);
        assert_eq!(all_on(&r), None);
    }
}
