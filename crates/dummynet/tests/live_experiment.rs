//! `dummynet experiment`'s runs end to end, shortened: the AQM report's
//! (seed 002) scenarios 1, 3 and 4 and the FIFO baseline, read from their
//! files in examples/experiments/ and cut to 12–15 s, each checked against
//! what the report describes:
//!
//! - scenario 1 (NewReno, CoDel target 5 ms, 20 ms path): the sender's
//!   srtt median within path + target + 5 ms, goodput at least 85% of the
//!   10 Mbit/s link;
//! - scenario 3 (CUBIC, CoDel with ECN): nothing dropped, CE marks both in
//!   the emulator's count, in its event log (by pipe) and in the sender's
//!   `delivered_ce`;
//! - scenario 4 (four CUBIC flows, FQ-CoDel): Jain's index at least 0.98
//!   over the span when all four run;
//! - FIFO of 1000 packets: the srtt median above path + 10 × target.
//!
//! Every run's event log is whole (`link.events_lost` is 0), and the
//! file's own `assert` checks hold on the shortened run too. `--check`
//! makes a failing check the exit status.
//!
//! Each run's shell is started from a namespace the test creates (its far
//! end and the traffic's outer side are there), removed when the test
//! ends, passed or not; the runs are bounded by their duration (the
//! traffic's loops by the run's end plus a grace). Needs root.

#[allow(dead_code)]
mod live_common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use dummynet_tools::experiment::spec::{self, Run, Until};
use dummynet_tools::experiment::{run_one, RunOptions, RunSummary};
use live_common::*;

const TOOLS: &[&str] = &["ip"];
const S: u64 = 1_000_000_000;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/experiments")
        .join(name)
}

/// The example's one run, every time in it scaled by `num / den`.
fn shortened(name: &str, num: u64, den: u64) -> Run {
    let mut runs = spec::load(&example(name)).expect("the example reads");
    assert_eq!(runs.len(), 1, "{name}");
    let mut r = runs.remove(0);
    let scale = |t: u64| t * num / den;
    r.duration = scale(r.duration);
    for f in &mut r.flows {
        f.start = scale(f.start);
        if let Until::Time(d) = &mut f.until {
            *d = scale(*d);
        }
    }
    for p in &mut r.pings {
        p.start = scale(p.start);
        p.duration = scale(p.duration);
    }
    r
}

/// Runs `r` from a namespace of the test's own, its outputs in a scratch
/// directory; returns the summary and the directory.
fn run(r: &Run) -> (RunSummary, Scratch) {
    let mut r = r.clone();
    // Ten samples a second: enough for medians over a 12 s run.
    r.interval = S / 10;
    let r = &r;
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let options = RunOptions {
        png: false,
        netns: Some(PathBuf::from(format!("/run/netns/{}", ns.name))),
    };
    let stop = AtomicBool::new(false);
    let s = run_one(r, &scratch.path(&r.label), &stop, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", r.label));
    println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
    // The link's view is whole: every event of the run is in its log.
    assert_eq!(s.link.events_lost, 0, "{}: events lost", r.label);
    // The file's own checks hold on the shortened run too.
    for c in &s.checks {
        assert!(c.ok, "{}: {}", r.label, c.line());
    }
    // The run's files are all there.
    let dir = scratch.path(&r.label);
    for f in [
        "flows.csv",
        "link.csv",
        "summary.json",
        "events.jsonl",
        "flows.svg",
        "link-1.svg",
    ] {
        assert!(dir.join(f).is_file(), "{}: {f} missing", r.label);
    }
    (s, scratch)
}

fn srtt_p50(s: &RunSummary) -> f64 {
    s.flows[0].srtt_p50_ms.expect("srtt samples")
}

/// The median of flow 0's srtt samples from `from_s` on, from the run's
/// flows.csv (column 5): the steady state, after slow start's overshoot
/// (which the report's figures show too, as a transient).
fn srtt_p50_from(dir: &Path, from_s: f64) -> f64 {
    let text = std::fs::read_to_string(dir.join("flows.csv")).expect("flows.csv");
    let mut v: Vec<f64> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let t: f64 = f.first()?.parse().ok()?;
            (f.get(1) == Some(&"0") && t >= from_s).then(|| f.get(4)?.parse().ok())?
        })
        .collect();
    assert!(v.len() >= 20, "{} samples", v.len());
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

/// Scenario 1 cut to 12 s: CoDel keeps the standing queue near its
/// target while the link stays busy.
#[test]
fn scenario1_codel_keeps_srtt_near_path_plus_target() {
    if !ready("scenario1_codel_keeps_srtt_near_path_plus_target", TOOLS) {
        return;
    }
    let _serial = serial();
    let r = shortened("aqm-report-s1.toml", 1, 5);
    assert_eq!(r.duration, 12 * S);
    let (s, dir) = run(&r);
    let f = &s.flows[0];
    assert_eq!(f.cc, "reno");
    // 20 ms path + 5 ms target + 5 ms, once slow start is over.
    let steady = srtt_p50_from(&dir.path(&r.label), 2.0);
    println!(
        "srtt p50 from 2 s: {steady} ms (over the whole flow: {})",
        srtt_p50(&s)
    );
    assert!(steady <= 30.0, "srtt p50 {steady} ms");
    assert!(steady >= 20.0, "below the path's RTT: {steady}");
    assert!(
        f.goodput_mean_bps >= 0.85 * 10e6,
        "goodput {} bit/s",
        f.goodput_mean_bps
    );
    // CoDel's drops are the link's only ones, and the log saw them too.
    let aqm = |d: &[(String, u64)]| d.iter().find(|x| x.0 == "aqm").map_or(0, |x| x.1);
    assert!(aqm(&s.link.drops) > 0, "{:?}", s.link.drops);
    assert_eq!(s.link.drops.len(), 1, "{:?}", s.link.drops);
    let up = s.link.paths.iter().find(|p| p.number == 1).expect("path 1");
    assert_eq!(aqm(&up.drops), aqm(&s.link.drops), "log and counters agree");
    assert!(up.utilisation.is_some_and(|u| u > 0.85), "{up:?}");
}

/// Scenario 3 cut to 12 s: with ECN, CoDel marks rather than drops.
#[test]
fn scenario3_codel_ecn_marks_and_drops_nothing() {
    if !ready("scenario3_codel_ecn_marks_and_drops_nothing", TOOLS) {
        return;
    }
    let _serial = serial();
    let r = shortened("aqm-report-s3.toml", 1, 5);
    assert!(r.flows[0].ecn);
    let (s, _dir) = run(&r);
    assert_eq!(s.flows[0].cc, "cubic");
    assert!(s.link.drops.is_empty(), "drops: {:?}", s.link.drops);
    assert!(s.link.ecn_marked > 0, "no CE marks");
    // The emulator's own events say which pipe marked: the data's, up, and
    // as many as its counters (the ACKs down are not ECN-capable).
    println!("marks by pipe: {:?}", s.link.marks);
    let up = s.link.paths.iter().find(|p| p.number == 1).expect("path 1");
    assert!(up.marks > 0, "{up:?}");
    assert_eq!(s.link.marks, vec![(1, up.marks)]);
    assert_eq!(up.marks, s.link.ecn_marked, "log and counters agree");
    assert!(
        s.flows[0].ce_marks > 0,
        "the sender saw no CE: {:?}",
        s.flows[0]
    );
    assert_eq!(s.flows[0].retransmits, 0, "{:?}", s.flows[0]);
}

/// Scenario 4 cut to 15 s (flows from 0, 1.67, 3.33 and 5 s, 10 s each):
/// FQ-CoDel shares the link evenly while all four run (5 to 10 s).
#[test]
fn scenario4_fq_codel_shares_fairly() {
    if !ready("scenario4_fq_codel_shares_fairly", TOOLS) {
        return;
    }
    let _serial = serial();
    let r = shortened("aqm-report-s4.toml", 1, 6);
    assert_eq!(r.duration, 15 * S);
    assert_eq!(r.flows.len(), 4);
    let (s, _dir) = run(&r);
    assert_eq!(s.all_on_s, Some((5.0, 10.0)));
    let jain = s.jain_all_on.expect("a Jain index");
    assert!(jain >= 0.98, "Jain {jain}: {:?}", s.flows);
    // The link's view through a queue (FQ-CoDel's events name queue 1, not
    // a pipe): busy, and CoDel's drops seen per path.
    let up = s.link.paths.iter().find(|p| p.number == 1).expect("path 1");
    assert!(up.utilisation.is_some_and(|u| u > 0.85), "{up:?}");
    assert!(up.sojourn_p50_ms.is_some_and(|d| d >= 10.0), "{up:?}");
}

/// The FIFO baseline cut to 12 s: 1000 packets of droptail queue build a
/// standing queue of hundreds of ms.
#[test]
fn fifo_baseline_bloats_srtt() {
    if !ready("fifo_baseline_bloats_srtt", TOOLS) {
        return;
    }
    let _serial = serial();
    let r = shortened("fifo-bufferbloat.toml", 1, 5);
    let (s, dir) = run(&r);
    // 20 ms path + 10 × the 5 ms target, over the whole flow and once the
    // queue has built.
    assert!(srtt_p50(&s) > 70.0, "srtt p50 {} ms", srtt_p50(&s));
    assert!(srtt_p50_from(&dir.path(&r.label), 2.0) > 70.0);
    // The pings wait behind the same queue.
    let p = &s.pings[0];
    assert!(p.rtt_p50_ms.is_some_and(|v| v > 70.0), "{p:?}");
}

/// A fast link (two TCP flows through 200 Mbit/s, tens of thousands of
/// events a second) for 5 s: the run's event log still keeps every event
/// while it writes and reads them (its drain takes them as they come).
#[test]
fn a_fast_link_loses_no_events() {
    if !ready("a_fast_link_loses_no_events", TOOLS) {
        return;
    }
    let _serial = serial();
    let file = r#"
        name = "fast"
        duration = "5s"
        [link]
        up = "bw 200Mbit/s delay 1ms queue 100"
        down = "bw 200Mbit/s delay 1ms queue 100"
        [[flow]]
        cc = "cubic"
        count = 2
    "#;
    let mut runs = spec::parse(file, Path::new(".")).expect("the file reads");
    let r = runs.remove(0);
    let (s, _dir) = run(&r);
    let up = s.link.paths.iter().find(|p| p.number == 1).expect("path 1");
    // Enough traffic that a log of a few thousand events' room would have
    // had to keep up: over 20 000 packets up in 5 s.
    assert!(up.delivered_packets > 20_000, "{up:?}");
}

/// `--check` gates on the file's `assert` list: the outcome of every check
/// is printed and in summary.json either way, and only with `--check` does
/// a failing one make the exit status 1.
#[test]
fn check_exits_1_when_an_assertion_fails() {
    if !ready("check_exits_1_when_an_assertion_fails", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let file = |name: &str, checks: &str| {
        let path = scratch.path(&format!("{name}.toml"));
        let text = format!(
            "name = \"{name}\"\nduration = \"3s\"\nassert = [{checks}]\n\
             [link]\nup = \"bw 5Mbit/s delay 5ms\"\ndown = \"bw 5Mbit/s delay 5ms\"\n\
             [[flow]]\ncc = \"cubic\"\n"
        );
        std::fs::write(&path, text).expect("write the file");
        path
    };
    let holds = file(
        "holds",
        "\"flows.all.goodput > 1Mbit/s\", \"link.paths.1.utilisation > 50%\"",
    );
    // Nothing carries 50 Mbit/s through a 5 Mbit/s link.
    let fails = file(
        "fails",
        "\"flows.0.goodput > 50Mbit/s\", \"link.events_lost == 0\"",
    );
    let run = |path: &Path, check: bool| {
        let mut cmd = std::process::Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &ns.name,
            DUMMYNET,
            "experiment",
            "--svg-only",
            "-o",
        ])
        .arg(scratch.path("out"))
        .arg(path);
        if check {
            cmd.arg("--check");
        }
        let out = cmd.output().expect("run dummynet experiment");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        println!("{stderr}");
        (out.status.code(), stderr)
    };
    let (status, stderr) = run(&holds, true);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stderr.contains("2 of 2 checks held"), "{stderr}");
    let (status, stderr) = run(&fails, false);
    assert_eq!(status, Some(0), "without --check: {stderr}");
    assert!(
        stderr.contains("FAIL flows.0.goodput > 50Mbit/s: flow 0 "),
        "{stderr}"
    );
    let (status, stderr) = run(&fails, true);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(stderr.contains("1 of 2 checks held"), "{stderr}");
    // summary.json says the same.
    let summary =
        std::fs::read_to_string(scratch.path("out/fails/summary.json")).expect("summary.json");
    let summary: serde_json::Value = serde_json::from_str(&summary).expect("JSON");
    let checks = summary["checks"].as_array().cloned().unwrap_or_default();
    let got: Vec<(String, bool)> = checks
        .iter()
        .map(|c| {
            (
                c["assert"].as_str().unwrap_or("").to_string(),
                c["ok"].as_bool().unwrap_or(true),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("flows.0.goodput > 50Mbit/s".to_string(), false),
            ("link.events_lost == 0".to_string(), true)
        ]
    );
}
