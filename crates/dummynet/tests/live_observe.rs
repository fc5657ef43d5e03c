//! The live per-packet observer end to end: a bridge daemon with `--log`,
//! `--capture-in`, `--capture-out` and `--mm-log`, a bounded ping through
//! it, then SIGTERM; the files must account for every packet the daemon's
//! own books (`dummynet stats --json`) count.

#[allow(dead_code)]
mod live_common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use live_common::*;

const UP_DELAY_MS: u64 = 20;
const DOWN_DELAY_MS: u64 = 10;
const PINGS: u32 = 30;

/// No IPv6 in a test namespace: nothing but the test's pings crosses the
/// bridge, so the books taken while the daemon runs are final.
fn quiet(ns: &TestNs) {
    for key in ["all", "default"] {
        let out = run_bounded(
            &mut ns.command(
                "sysctl",
                &["-qw", &format!("net.ipv6.conf.{key}.disable_ipv6=1")],
            ),
            Duration::from_secs(5),
            "sysctl disable_ipv6",
        );
        expect_success(&out, "sysctl disable_ipv6");
    }
}

/// Reads a nanosecond pcap with pcap-file: its frames' (stamp in ns since
/// the epoch, whole length).
fn pcap_frames(path: &Path) -> Vec<(u64, u32)> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = pcap_file::pcap::PcapReader::new(file).expect("a pcap header");
    assert_eq!(
        reader.header().ts_resolution,
        pcap_file::TsResolution::NanoSecond,
        "{}",
        path.display()
    );
    assert_eq!(reader.header().datalink, pcap_file::DataLink::ETHERNET);
    let mut frames = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.expect("a whole packet record");
        assert!(p.data.len() <= 256, "cut to the default snap length");
        frames.push((p.timestamp.as_nanos() as u64, p.orig_len));
    }
    frames
}

#[test]
fn a_bridge_logs_and_captures_every_packet_it_books() {
    if !ready("live observer", &["ip", "ping", "sysctl"]) {
        return;
    }
    let _serial = serial();
    let (a, m, b) = (TestNs::new(), TestNs::new(), TestNs::new());
    for ns in [&a, &m, &b] {
        quiet(ns);
    }
    let path = BridgePath::join(a, m, b);
    let scratch = &path.scratch;
    let (log, cin, cout, mm) = (
        scratch.path("events.jsonl"),
        scratch.path("in.pcap"),
        scratch.path("out.pcap"),
        scratch.path("mm.log"),
    );
    let p = |p: &Path| p.to_str().expect("a UTF-8 path").to_string();
    let (log_s, cin_s, cout_s, mm_s) = (p(&log), p(&cin), p(&cout), p(&mm));
    // Pipe 1 (A → B) also loses a tenth, so that drops are logged too.
    let mut daemon = path.daemon(
        "ctl",
        Some(&format!(
            "pipe 1 config delay {UP_DELAY_MS}ms plr 0.1\n\
             pipe 2 config delay {DOWN_DELAY_MS}ms\n\
             add 100 pipe 1 ip from any to any in recv m-a\n\
             add 200 pipe 2 ip from any to any in recv m-b\n\
             add 65000 allow ip from any to any\n"
        )),
        &[
            "--nice",
            "--precision",
            "timer",
            "--log",
            &log_s,
            "--capture-in",
            &cin_s,
            "--capture-out",
            &cout_s,
            "--mm-log",
            &mm_s,
        ],
    );

    let out = run_bounded(
        &mut path.a.command(
            "ping",
            &["-c", &PINGS.to_string(), "-i", "0.05", "-W", "1", B_ADDR],
        ),
        Duration::from_secs(20),
        "ping A → B",
    );
    let ping = Ping::parse(&text(&out.stdout));
    // Every echo request that is answered took both pipes, and the ping's
    // round trip is never under their sum.
    if let Some(min) = ping.rtts().into_iter().reduce(f64::min) {
        assert!(min >= (UP_DELAY_MS + DOWN_DELAY_MS) as f64, "{min} ms");
    }
    // The last replies are out (the pipes hold nothing for long).
    std::thread::sleep(Duration::from_millis(300));
    let stats = daemon.stats_json();
    daemon.proc.terminate(Duration::from_secs(10));

    let n = |p: &str| {
        stats
            .pointer(p)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("{p} missing: {stats}"))
    };
    assert_eq!(n("/totals/inside"), 0, "{stats}");
    assert_eq!(n("/observer/lost"), 0, "{stats}");
    assert!(n("/totals/arrived") >= u64::from(PINGS), "{stats}");

    // The log: a start line, then each packet's arrival and exactly one
    // end, as many as the books say.
    let text_log = std::fs::read_to_string(&log).expect("the log");
    let lines: Vec<serde_json::Value> = text_log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines[0]["event"], "start", "{}", lines[0]);
    let wall = lines[0]["wall_ns"].as_u64().expect("wall_ns");
    let mut arrivals: HashMap<u64, &serde_json::Value> = HashMap::new();
    let mut ends: HashMap<u64, &serde_json::Value> = HashMap::new();
    let mut forwards: HashMap<u64, &serde_json::Value> = HashMap::new();
    let mut forwarded_twice = 0;
    let (mut departed, mut dropped) = (0u64, 0u64);
    for e in &lines[1..] {
        let id = e["id"].as_u64().expect("id");
        match e["event"].as_str().expect("event") {
            "arrival" => assert!(arrivals.insert(id, e).is_none(), "two arrivals: {id}"),
            "forward" => {
                if forwards.insert(id, e).is_some() {
                    forwarded_twice += 1;
                }
            }
            "departure" | "drop" => {
                if e["event"] == "drop" {
                    dropped += 1;
                    assert_eq!(e["reason"], "plr", "{e}");
                    assert_eq!(e["pipe"], 1, "{e}");
                } else {
                    departed += 1;
                }
                assert!(ends.insert(id, e).is_none(), "two ends: {id}");
            }
            other => panic!("unknown event {other}: {e}"),
        }
    }
    // The books count packets: a frame that crosses the bridge arrives
    // once and leaves once, though it passes the rules twice (`in`, then
    // `out`), which `passes` counts.
    assert_eq!(forwarded_twice, 0, "a frame crosses the bridge once");
    let forwarded = forwards.len() as u64;
    assert_eq!(arrivals.len() as u64, n("/totals/arrived"), "{stats}");
    assert_eq!(departed, n("/totals/delivered"), "{stats}");
    assert_eq!(
        arrivals.len() as u64 + forwarded,
        n("/totals/passes"),
        "{stats}"
    );
    assert_eq!(dropped, n("/totals/dropped"), "{stats}");
    assert_eq!(n("/observer/log_lines"), lines.len() as u64, "{stats}");
    let ids: Vec<u64> = arrivals.keys().copied().collect();
    for id in &ids {
        assert!(ends.contains_key(id), "packet {id} arrived and never ended");
    }

    // Through a pipe, the `in` pass ends after the pipe's delay (never
    // sooner; the data plane's lateness later).
    let t = |e: &serde_json::Value| e["t_ns"].as_u64().expect("t_ns");
    let mut waits = Vec::new();
    for (id, f) in &forwards {
        let delay_ms = match f["pipe"].as_u64() {
            Some(1) => UP_DELAY_MS,
            Some(2) => DOWN_DELAY_MS,
            _ => panic!("a forward out of no pipe: {f}"),
        };
        let waited = t(f) - t(arrivals[id]);
        assert!(waited >= delay_ms * 1_000_000, "{waited} ns: {f}");
        waits.push(waited as f64 / 1e6 - delay_ms as f64);
        // The out pass lets it straight through.
        assert_eq!(t(ends[id]), t(f), "{}", ends[id]);
    }
    assert_eq!(
        forwards.len() as u64,
        departed,
        "every delivered frame crossed a pipe"
    );
    let late = median(&waits);
    assert!(late < 10.0, "median {late} ms over the pipes' delays");

    // The captures: every arrival in, every departure out, stamped with the
    // log's times on the wall clock, to the nanosecond.
    let frames_in = pcap_frames(&cin);
    let frames_out = pcap_frames(&cout);
    assert_eq!(frames_in.len(), arrivals.len());
    assert_eq!(frames_out.len() as u64, departed);
    let mut in_stamps: Vec<u64> = arrivals.values().map(|e| wall + t(e)).collect();
    in_stamps.sort_unstable();
    let mut got: Vec<u64> = frames_in.iter().map(|f| f.0).collect();
    got.sort_unstable();
    assert_eq!(got, in_stamps, "capture-in stamps are the arrivals' times");
    // An echo request is a 98-byte frame (14 + 20 + 8 + 56).
    assert!(frames_in.iter().all(|f| f.1 == 98), "{frames_in:?}");
    let mut out_stamps: Vec<u64> = ends
        .values()
        .filter(|e| e["event"] == "departure")
        .map(|e| wall + t(e))
        .collect();
    out_stamps.sort_unstable();
    let mut got: Vec<u64> = frames_out.iter().map(|f| f.0).collect();
    got.sort_unstable();
    assert_eq!(
        got, out_stamps,
        "capture-out stamps are the departures' times"
    );

    // The mahimahi log of pipe 1 (the first the config makes): a base,
    // then a `+` for each packet offered to it and a `-` for each that
    // left it, at least its delay later.
    let mm_text = std::fs::read_to_string(&mm).expect("the mm-log");
    let base: u64 = mm_text
        .lines()
        .find_map(|l| l.strip_prefix("# base timestamp: "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no base timestamp: {mm_text}"));
    assert_eq!(base, wall / 1_000_000);
    let (mut plus, mut minus) = (0u64, 0u64);
    for line in mm_text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        let ms: u64 = f[0].parse().unwrap_or_else(|_| panic!("{line}"));
        assert!(ms >= base, "{line}");
        assert_eq!(
            f.get(2).and_then(|b| b.parse::<u64>().ok()),
            Some(84),
            "{line}"
        );
        match f[1] {
            "+" => plus += 1,
            "-" => {
                minus += 1;
                let d: u64 = f[3].parse().unwrap_or_else(|_| panic!("{line}"));
                assert!(d >= UP_DELAY_MS && ms - d >= base, "{line}");
            }
            _ => panic!("not an mm-log line: {line}"),
        }
    }
    let up_forwards = forwards.values().filter(|f| f["pipe"] == 1).count();
    assert_eq!(plus, u64::from(PINGS), "every echo request met pipe 1");
    assert_eq!(minus, up_forwards as u64);
    assert_eq!(plus - minus, dropped, "pipe 1 lost the rest");
}
