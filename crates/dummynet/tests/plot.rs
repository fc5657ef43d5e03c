//! `dummynet plot` and `sim --plot` end to end: `gen` traffic through `sim`
//! into a log, the log into a picture, the picture read back as XML.

mod sim_common;

use std::fs;
use std::path::{Path, PathBuf};

use sim_common::{dummynet, fails, ok, s, write};

fn scratch(name: &str) -> PathBuf {
    sim_common::scratch("plot", name)
}

/// 1000-byte packets at 15 Mbit/s for 3 s into a 10 Mbit/s pipe: saturated,
/// its queue full, the excess dropped. Returns the config and the capture.
fn saturated(dir: &Path) -> (PathBuf, PathBuf) {
    let config = write(
        dir,
        "link.conf",
        "pipe 1 config bw 10Mbit/s delay 5ms queue 50\nadd 100 pipe 1 ip from any to any\n",
    );
    let pcap = dir.join("in.pcap");
    ok(dummynet(&[
        "gen",
        "--out",
        s(&pcap),
        "--rate",
        "15Mbit/s",
        "--size",
        "1000",
        "--duration",
        "3s",
    ]));
    (config, pcap)
}

/// The value and unit after `what ` in the summary line, in bit/s.
fn rate_after(summary: &str, what: &str) -> f64 {
    let rest = &summary[summary
        .find(what)
        .unwrap_or_else(|| panic!("{what} in {summary}"))
        + what.len()..];
    let mut words = rest.split_whitespace();
    let value: f64 = words.next().unwrap().parse().unwrap();
    let scale = match words.next().unwrap().trim_end_matches(',') {
        "bit/s" => 1.0,
        "kbit/s" => 1e3,
        "Mbit/s" => 1e6,
        "Gbit/s" => 1e9,
        u => panic!("unit {u} in {summary}"),
    };
    value * scale
}

/// The texts of the SVG's `<text>` elements, and how many `<polyline>`s
/// are stroked with each colour.
fn read_svg(path: &Path) -> (Vec<String>, std::collections::BTreeMap<String, usize>) {
    let text = fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    let mut lines = std::collections::BTreeMap::new();
    for n in doc.descendants().filter(|n| n.has_tag_name("polyline")) {
        *lines
            .entry(n.attribute("stroke").unwrap_or("").to_string())
            .or_insert(0) += 1;
    }
    (texts, lines)
}

#[test]
fn a_saturated_pipe_plots_at_its_rate() {
    let dir = scratch("saturated");
    let (config, pcap) = saturated(&dir);
    let log = dir.join("events.jsonl");
    ok(dummynet(&[
        "sim",
        "--config",
        s(&config),
        "--pcap",
        s(&pcap),
        "--log",
        s(&log),
    ]));
    let svg = dir.join("plot.svg");
    let summary = ok(dummynet(&[
        "plot",
        s(&log),
        "-o",
        s(&svg),
        "--config",
        s(&config),
        "--what",
        "throughput,delay,queue,drops",
        "--title",
        "saturated",
    ]));
    assert_eq!(summary.lines().count(), 1, "{summary}");
    let mean = rate_after(&summary, "throughput ");
    assert!((mean - 10e6).abs() < 0.01 * 10e6, "{summary}");
    assert_eq!(rate_after(&summary, "capacity "), 10e6, "{summary}");
    assert!(
        summary.contains("drops ") && summary.contains("queue-full"),
        "{summary}"
    );

    let (texts, lines) = read_svg(&svg);
    let has = |t: &str| texts.iter().any(|x| x == t);
    for label in [
        "saturated",
        "throughput (Mbit/s)",
        "delay (ms)",
        "packets inside (mean)",
        "kB inside (mean)",
        "drops per 100 ms",
        "capacity (pipe 1 bw 10.000 Mbit/s)",
        "ingress (all packets)",
        "per-packet delay",
        "95th percentile per window",
    ] {
        assert!(has(label), "no `{label}` in {texts:?}");
    }
    // The time axis is named once, under the bottom panel.
    assert_eq!(texts.iter().filter(|t| *t == "time (s)").count(), 1);
    assert!(
        texts.iter().any(|t| t.starts_with("queue-full (")),
        "{texts:?}"
    );
    // Ingress and per-packet delay: one line each, and its legend sample.
    assert_eq!(lines.get("#E69F00"), Some(&2), "{lines:?}");
    assert_eq!(lines.get("#56B4E9"), Some(&2), "{lines:?}");
    // The capacity is a shaded area: one polygon.
    let doc = fs::read_to_string(&svg).unwrap();
    assert_eq!(doc.matches("<polygon").count(), 1);

    // sim --plot draws the same picture from the run, without a log.
    let direct = dir.join("direct.svg");
    let report = ok(dummynet(&[
        "sim",
        "--config",
        s(&config),
        "--pcap",
        s(&pcap),
        "--plot",
        s(&direct),
        "--what",
        "throughput,delay,queue,drops",
        "--title",
        "saturated",
    ]));
    assert!(
        report.contains(&format!("plot: {}", summary.trim())),
        "{report}"
    );
    assert_eq!(fs::read(&direct).unwrap(), fs::read(&svg).unwrap());
}

#[test]
fn pipe_selection_and_capacity_of_that_pipe() {
    let dir = scratch("pipe");
    // Two pipes in series on a bridge: 4 Mbit/s in, 2 Mbit/s out.
    let config = write(
        &dir,
        "two.conf",
        "pipe 1 config bw 4Mbit/s\npipe 2 config bw 2Mbit/s queue 100\n\
         add 100 pipe 1 ip from any to any in\nadd 200 pipe 2 ip from any to any out\n",
    );
    let pcap = dir.join("in.pcap");
    ok(dummynet(&[
        "gen",
        "--out",
        s(&pcap),
        "--rate",
        "3Mbit/s",
        "--size",
        "500",
        "--duration",
        "1s",
    ]));
    let spec = format!("{}@eth0:bridge:eth1", s(&pcap));
    let log = dir.join("events.jsonl");
    ok(dummynet(&[
        "sim",
        "--config",
        s(&config),
        "--pcap",
        &spec,
        "--log",
        s(&log),
    ]));
    let plot = |pipe: &str| {
        ok(dummynet(&[
            "plot",
            s(&log),
            "-o",
            s(&dir.join(format!("p{pipe}.svg"))),
            "--config",
            s(&config),
            "--pipe",
            pipe,
        ]))
    };
    let p1 = plot("1");
    let p2 = plot("2");
    assert_eq!(rate_after(&p1, "capacity "), 4e6, "{p1}");
    assert_eq!(rate_after(&p2, "capacity "), 2e6, "{p2}");
    // Pipe 1 is not the bottleneck: all goes through at the 3 Mbit/s
    // offered. Pipe 2 is: it delivers its 2 Mbit/s and drops the rest.
    let m1 = rate_after(&p1, "throughput ");
    let m2 = rate_after(&p2, "throughput ");
    assert!((m1 - 3e6).abs() < 0.01 * 3e6, "{p1}");
    assert!((m2 - 2e6).abs() < 0.01 * 2e6, "{p2}");
    assert!(
        p1.contains("drops 0") && p2.contains("queue-full"),
        "{p1}\n{p2}"
    );
    // Without --pipe, two pipes: no capacity line, and the legend says why.
    let all = ok(dummynet(&[
        "plot",
        s(&log),
        "-o",
        s(&dir.join("all.svg")),
        "--config",
        s(&config),
    ]));
    assert!(all.contains("capacity unknown"), "{all}");
    let (texts, _) = read_svg(&dir.join("all.svg"));
    assert!(
        texts
            .iter()
            .any(|t| t.contains("2 pipes (choose one with --pipe)")),
        "{texts:?}"
    );
}

#[test]
fn png_needs_a_font_and_says_so() {
    let dir = scratch("png");
    let log = write(
        &dir,
        "e.jsonl",
        "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":1000}\n\
         {\"event\":\"departure\",\"t_ns\":8000000,\"id\":0,\"pipe\":1}\n",
    );
    let png = dir.join("p.png");
    let out = dummynet(&["plot", s(&log), "-o", s(&png), "--capacity", "1Mbit/s"]);
    let fonts = ["/usr/share/fonts", "/usr/local/share/fonts"]
        .iter()
        .any(|d| Path::new(d).exists());
    if fonts && out.status.success() {
        let bytes = fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // Twice the SVG's 960 pixels across.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 1920);
    } else {
        assert!(fails(out).contains("needs a font"));
    }
}

#[test]
fn bad_input_is_named() {
    let dir = scratch("bad");
    let log = write(
        &dir,
        "e.jsonl",
        "{\"event\":\"arrival\",\"t_ns\":0,\"id\":0,\"len\":1000}\n{\"event\":\"departure\",\"t_ns\":5,\n",
    );
    let svg = dir.join("p.svg");
    let e = fails(dummynet(&["plot", s(&log), "-o", s(&svg)]));
    assert!(e.contains("e.jsonl: line 2: not an event object"), "{e}");
    assert!(!svg.exists());
    let e = fails(dummynet(&["plot", s(&log), "-o", s(&dir.join("p.pdf"))]));
    assert!(e.contains("must end in .svg or .png"), "{e}");
    let e = fails(dummynet(&[
        "plot",
        s(&log),
        "-o",
        s(&svg),
        "--window",
        "0ms",
    ]));
    assert!(e.contains("longer than 0"), "{e}");
    let e = fails(dummynet(&[
        "plot",
        s(&log),
        "-o",
        s(&svg),
        "--what",
        "latency",
    ]));
    assert!(e.contains("throughput") && e.contains("drops"), "{e}");
    // sim's plot options need --plot.
    let (config, pcap) = saturated(&dir);
    let e = fails(dummynet(&[
        "sim",
        "--config",
        s(&config),
        "--pcap",
        s(&pcap),
        "--pipe",
        "1",
    ]));
    assert!(e.contains("--pipe shapes the plot"), "{e}");
}
