//! `GET /metrics`: the daemon's counters in the Prometheus (OpenMetrics)
//! text format, written by `prometheus-client`'s encoder.
//!
//! Each scrape builds a registry afresh from one `stats` report and one
//! snapshot of the engine, both taken by the data plane between packets
//! and rendered here, on the HTTP server's thread. Labels are pipe, queue,
//! rule and drop-reason numbers and names only: never per flow, so the
//! number of series is bounded by the configuration.

use dummynet_engine::config::DN_MAX_ID;
use dummynet_engine::{DropReason, Snapshot, Target};
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use dummynet_dataplane::clock::LATENESS_BUCKETS_NS;
use dummynet_dataplane::dataplane::Report;

/// The answer's content type: the encoder writes OpenMetrics text, which
/// Prometheus reads.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;

fn label(name: &str, value: impl ToString) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

/// A family of counters set from totals the data plane keeps.
fn counters() -> Family<Labels, Counter> {
    Family::default()
}

fn gauges() -> Family<Labels, Gauge> {
    Family::default()
}

fn count(f: &Family<Labels, Counter>, labels: Labels, v: u64) {
    f.get_or_create(&labels).inc_by(v);
}

fn set(f: &Family<Labels, Gauge>, labels: Labels, v: u64) {
    f.get_or_create(&labels)
        .set(i64::try_from(v).unwrap_or(i64::MAX));
}

/// The data plane's lateness histogram, whose buckets it counts itself
/// (a `prometheus_client` histogram only takes observations one by one).
#[derive(Debug)]
struct Lateness {
    /// (upper bound in seconds, hand-overs in that bucket alone).
    buckets: Vec<(f64, u64)>,
    sum_seconds: f64,
    count: u64,
}

impl EncodeMetric for Lateness {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum_seconds, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The metrics text for `report` and `snap`.
pub fn render(report: &Report, snap: &Snapshot) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::default();
    totals(&mut reg, report, snap);
    by_target(&mut reg, report);
    waiting(&mut reg, snap);
    rules(&mut reg, snap);
    lateness(&mut reg, report);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &reg)?;
    Ok(text)
}

/// The engine's totals: arrived, delivered, dropped by reason, inside, marked.
fn totals(reg: &mut Registry, report: &Report, snap: &Snapshot) {
    let arrived = Counter::<u64>::default();
    arrived.inc_by(report.arrived);
    reg.register(
        "dummynet_arrived_packets",
        "Packets that entered the engine (copies duplicate made included)",
        arrived,
    );
    let delivered = Counter::<u64>::default();
    delivered.inc_by(report.delivered);
    reg.register(
        "dummynet_delivered_packets",
        "Packets the engine delivered",
        delivered,
    );
    let dropped = counters();
    for reason in DropReason::ALL {
        let n = report
            .drops
            .iter()
            .find(|(r, _)| *r == reason.as_str())
            .map_or(0, |(_, n)| *n);
        count(&dropped, label("reason", reason.as_str()), n);
    }
    reg.register(
        "dummynet_dropped_packets",
        "Packets dropped, by reason",
        dropped,
    );
    let inside = Gauge::<i64>::default();
    inside.set(i64::try_from(report.inside).unwrap_or(i64::MAX));
    reg.register(
        "dummynet_inside_packets",
        "Packets held in queues, on links and in delay lines now",
        inside,
    );
    let held = Gauge::<i64>::default();
    held.set(i64::try_from(snap.totals.held_bytes).unwrap_or(i64::MAX));
    reg.register(
        "dummynet_inside_bytes",
        "Bytes of the packets held now (what held_limit bounds)",
        held,
    );
    let marked = Counter::<u64>::default();
    marked.inc_by(report.marked);
    reg.register(
        "dummynet_ecn_marked_packets",
        "Packets an AQM marked ECN CE instead of dropping",
        marked,
    );
}

/// By pipe and by queue, as packets left them.
fn by_target(reg: &mut Registry, report: &Report) {
    let families = |what: &str| (counters(), counters(), counters(), what.to_string());
    let mut pipe = families("pipe");
    let mut queue = families("queue");
    let mut targets = report.targets.clone();
    targets.sort_by_key(|(t, _)| match t {
        Target::Pipe(n) => (0, *n),
        Target::Queue(n) => (1, *n),
    });
    for (t, c) in &targets {
        let ((packets, bytes, drops, what), n) = match t {
            Target::Pipe(n) => (&mut pipe, *n),
            Target::Queue(n) => (&mut queue, *n),
        };
        count(packets, label(what, n), c.delivered);
        count(bytes, label(what, n), c.delivered_bytes);
        for (reason, k) in DropReason::ALL.iter().zip(c.drops) {
            if k > 0 {
                let mut l = label(what, n);
                l.push(("reason".into(), reason.as_str().into()));
                count(drops, l, k);
            }
        }
    }
    for (family, what) in [(pipe, "pipe"), (queue, "queue")] {
        let (packets, bytes, drops, _) = family;
        reg.register(
            format!("dummynet_{what}_delivered_packets"),
            format!("Packets that left the {what}"),
            packets,
        );
        reg.register(
            format!("dummynet_{what}_delivered_bytes"),
            format!("Bytes of the packets that left the {what}"),
            bytes,
        );
        reg.register(
            format!("dummynet_{what}_dropped_packets"),
            format!("Packets dropped at or in the {what}, by reason"),
            drops,
        );
    }
}

/// What waits in each pipe's and queue's queues now.
fn waiting(reg: &mut Registry, snap: &Snapshot) {
    let (q_pkts, q_bytes) = (gauges(), gauges());
    let (fs_pkts, fs_bytes) = (gauges(), gauges());
    let pipe_flowset = 2 * DN_MAX_ID;
    for fs in &snap.flowsets {
        let pkts: u64 = fs
            .flows
            .iter()
            .map(|f| u64::from(f.counters.len_pkts))
            .sum();
        let bytes: u64 = fs.flows.iter().map(|f| f.counters.len_bytes).sum();
        if fs.number > pipe_flowset {
            let n = fs.number - pipe_flowset;
            set(&q_pkts, label("pipe", n), pkts);
            set(&q_bytes, label("pipe", n), bytes);
        } else if fs.number < DN_MAX_ID {
            set(&fs_pkts, label("queue", fs.number), pkts);
            set(&fs_bytes, label("queue", fs.number), bytes);
        }
    }
    reg.register(
        "dummynet_pipe_queue_packets",
        "Packets waiting in the pipe's own queue now",
        q_pkts,
    );
    reg.register(
        "dummynet_pipe_queue_bytes",
        "Bytes waiting in the pipe's own queue now",
        q_bytes,
    );
    reg.register(
        "dummynet_queue_packets",
        "Packets waiting in the queue (flowset) now",
        fs_pkts,
    );
    reg.register(
        "dummynet_queue_bytes",
        "Bytes waiting in the queue (flowset) now",
        fs_bytes,
    );
}

/// Each rule's counters.
fn rules(reg: &mut Registry, snap: &Snapshot) {
    let (r_pkts, r_bytes) = (counters(), counters());
    for r in &snap.rules {
        count(&r_pkts, label("rule", r.number), r.packets);
        count(&r_bytes, label("rule", r.number), r.bytes);
    }
    reg.register(
        "dummynet_rule_packets",
        "Packets the rule matched (since the last zero)",
        r_pkts,
    );
    reg.register(
        "dummynet_rule_bytes",
        "Bytes of the packets the rule matched (since the last zero)",
        r_bytes,
    );
}

/// How late departures were handed to the kernel.
fn lateness(reg: &mut Registry, report: &Report) {
    let h = &report.lateness_histogram;
    let mut buckets: Vec<(f64, u64)> = LATENESS_BUCKETS_NS
        .iter()
        .map(|&ns| ns as f64 / 1e9)
        .chain([f64::INFINITY])
        .zip(h.buckets.iter().copied())
        .collect();
    if buckets.is_empty() {
        buckets.push((f64::INFINITY, 0));
    }
    reg.register_with_unit(
        "dummynet_release_lateness",
        "How long after its time each batch of departures was handed to the kernel",
        Unit::Seconds,
        Lateness {
            count: h.buckets.iter().sum(),
            sum_seconds: h.sum_ns as f64 / 1e9,
            buckets,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_dataplane::dataplane::TargetCounts;

    #[test]
    fn the_names_and_labels_are_there() {
        let mut report = Report {
            arrived: 10,
            delivered: 7,
            dropped: 3,
            drops: vec![("queue-full", 3)],
            ..Report::default()
        };
        let mut c = TargetCounts {
            delivered: 7,
            delivered_bytes: 700,
            ..TargetCounts::default()
        };
        c.drops[1] = 3;
        report.targets = vec![(Target::Pipe(1), c)];
        report.lateness_histogram.buckets = vec![0; LATENESS_BUCKETS_NS.len() + 1];
        report.lateness_histogram.buckets[2] = 4;
        report.lateness_histogram.sum_ns = 16_000;
        let snap = dummynet_engine::Engine::<()>::new(1).snapshot();
        let text = render(&report, &snap).unwrap();
        for line in [
            "dummynet_pipe_delivered_packets_total{pipe=\"1\"} 7",
            "dummynet_pipe_delivered_bytes_total{pipe=\"1\"} 700",
            "dummynet_pipe_dropped_packets_total{pipe=\"1\",reason=\"queue-full\"} 3",
            "dummynet_dropped_packets_total{reason=\"queue-full\"} 3",
            "dummynet_dropped_packets_total{reason=\"plr\"} 0",
            "dummynet_arrived_packets_total 10",
            "dummynet_rule_packets_total{rule=\"65535\"} 0",
            "dummynet_release_lateness_seconds_count 4",
            "dummynet_release_lateness_seconds_bucket{le=\"0.000005\"} 4",
            "# TYPE dummynet_release_lateness_seconds histogram",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
