//! What the `dummynet sim` tests share: a scratch directory per test,
//! running the binary, writing captures and reading back what a run wrote.
#![allow(dead_code)] // each test file uses its own part

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde_json::Value;

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;

/// A fresh, empty directory for one test: `group` is the test file,
/// `name` the test.
pub fn scratch(group: &str, name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(group)
        .join(name);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

pub fn dummynet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dummynet"))
        .args(args)
        .output()
        .unwrap()
}

/// The standard output of a run that must succeed.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "dummynet failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The error message of a run that must fail.
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "expected failure, got: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

/// `dummynet gen --out DIR/NAME ARGS...`.
pub fn gen(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let p = dir.join(name);
    let mut a = vec!["gen", "--out", s(&p)];
    a.extend_from_slice(args);
    ok(dummynet(&a));
    p
}

/// A nanosecond pcap of `frames`, each (timestamp ns, bytes).
pub fn write_pcap(p: &Path, linktype: DataLink, frames: &[(u64, Vec<u8>)]) {
    let header = PcapHeader {
        datalink: linktype,
        ts_resolution: TsResolution::NanoSecond,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(fs::File::create(p).unwrap(), header).unwrap();
    for (ns, f) in frames {
        w.write_packet(&PcapPacket::new(
            Duration::from_nanos(*ns),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
}

/// (link type, [(timestamp ns, frame)]) of a nanosecond pcap file.
pub fn read_pcap(p: &Path) -> (u32, Vec<(u64, Vec<u8>)>) {
    let mut r = PcapReader::new(fs::File::open(p).unwrap()).unwrap();
    assert_eq!(r.header().ts_resolution, TsResolution::NanoSecond);
    let mut v = Vec::new();
    while let Some(pkt) = r.next_packet() {
        let pkt = pkt.unwrap();
        v.push((pkt.timestamp.as_nanos() as u64, pkt.data.into_owned()));
    }
    (u32::from(r.header().datalink), v)
}

/// The events of a `--log` file, one JSON object per line.
pub fn read_log(p: &Path) -> Vec<Value> {
    fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn events<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["event"] == kind).collect()
}

/// What a successful `sim` printed and wrote.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    /// The output capture's link type.
    pub linktype: u32,
    /// The output capture: (departure ns, frame).
    pub out: Vec<(u64, Vec<u8>)>,
    /// The event log.
    pub log: Vec<Value>,
}

impl Run {
    pub fn events(&self, kind: &str) -> Vec<&Value> {
        events(&self.log, kind)
    }

    /// The departure times in the output capture.
    pub fn times(&self) -> Vec<u64> {
        self.out.iter().map(|f| f.0).collect()
    }
}

/// `dummynet sim --config CONFIG --pcap P... EXTRA...`, writing its capture
/// and event log in `dir`; the run must succeed.
pub fn sim(dir: &Path, config: &Path, pcaps: &[&str], extra: &[&str]) -> Run {
    let (out, log) = (dir.join("out.pcap"), dir.join("events.jsonl"));
    let mut a = vec![
        "sim",
        "--config",
        s(config),
        "--out",
        s(&out),
        "--log",
        s(&log),
    ];
    for p in pcaps {
        a.extend(["--pcap", p]);
    }
    a.extend_from_slice(extra);
    let o = dummynet(&a);
    let stderr = String::from_utf8(o.stderr).unwrap();
    assert!(
        o.status.success(),
        "dummynet sim failed: {stderr}\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let (linktype, frames) = read_pcap(&out);
    Run {
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr,
        linktype,
        out: frames,
        log: read_log(&log),
    }
}
