//! `dummynet sim` with a stateful ruleset: a TCP session passes both ways,
//! the unsolicited is dropped, and `me` is what `--me` says.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("sim-rules-tests")
        .join(name);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// A raw-IP pcap of (ms, packet).
fn pcap(p: &Path, frames: &[(u64, Vec<u8>)]) {
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ts_resolution: TsResolution::NanoSecond,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(fs::File::create(p).unwrap(), header).unwrap();
    for (ms, f) in frames {
        w.write_packet(&PcapPacket::new(
            Duration::from_millis(*ms),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
}

fn tcp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, flags: &str) -> Vec<u8> {
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sport, dport, 1, 65535);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(1),
            'P' => b.psh(),
            _ => unreachable!(),
        };
    }
    let mut out = Vec::new();
    b.write(&mut out, b"x").unwrap();
    out
}

/// Runs the session through the stateful rules; returns (departed ids,
/// dropped (id, rule)).
fn run(d: &Path, me: Option<&str>) -> (Vec<u64>, Vec<(u64, u64)>) {
    let conf = d.join("rules.conf");
    fs::write(
        &conf,
        "ipfw add 100 check-state\n\
         ipfw add 200 allow tcp from me to any setup keep-state\n\
         ipfw add 300 deny ip from any to any\n",
    )
    .unwrap();
    let (me_ip, srv, other) = ([10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 3]);
    pcap(
        &d.join("out.pcap"),
        &[
            (0, tcp(me_ip, 5000, srv, 80, "S")),
            (2, tcp(me_ip, 5000, srv, 80, "A")),
        ],
    );
    pcap(
        &d.join("in.pcap"),
        &[
            (1, tcp(srv, 80, me_ip, 5000, "SA")),
            (3, tcp(srv, 80, me_ip, 5000, "PA")),
            (4, tcp(other, 4000, me_ip, 22, "S")),
        ],
    );
    let log = d.join("events.jsonl");
    let mut args: Vec<String> = [
        "sim",
        "--config",
        conf.to_str().unwrap(),
        "--pcap",
        &format!("{}@eth0:out", d.join("out.pcap").display()),
        "--pcap",
        &format!("{}@eth0:in", d.join("in.pcap").display()),
        "--log",
        log.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(me) = me {
        args.extend(["--me".to_string(), me.to_string()]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_dummynet"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut departed = Vec::new();
    let mut dropped = Vec::new();
    for e in &events {
        match e["event"].as_str() {
            Some("departure") => departed.push(e["id"].as_u64().unwrap()),
            Some("drop") => dropped.push((e["id"].as_u64().unwrap(), e["rule"].as_u64().unwrap())),
            _ => {}
        }
    }
    assert_eq!(departed.len() + dropped.len(), 5, "every packet ends once");
    (departed, dropped)
}

#[test]
fn a_tcp_session_passes_by_its_state_and_the_unsolicited_is_dropped() {
    let d = scratch("stateful");
    let (departed, dropped) = run(&d, Some("10.0.0.1"));
    // Arrival order (ids) is time order: SYN, SYN-ACK, ACK, data, stranger.
    assert_eq!(departed, [0, 1, 2, 3]);
    assert_eq!(dropped, [(4, 300)]);
    // Without --me, `from me` matches nothing: no state, all denied.
    let (departed, dropped) = run(&d, None);
    assert!(departed.is_empty());
    assert_eq!(dropped.len(), 5);
}

#[test]
fn a_config_files_doubtful_values_are_warned_with_their_line() {
    let d = scratch("bw-warning");
    let conf = d.join("c.conf");
    fs::write(
        &conf,
        "# a link\npipe 1 config bw 10\nadd 100 pipe 1 ip from any to any\n",
    )
    .unwrap();
    pcap(
        &d.join("in.pcap"),
        &[(0, tcp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, "S"))],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_dummynet"))
        .args([
            "sim",
            "--config",
            conf.to_str().unwrap(),
            "--pcap",
            d.join("in.pcap").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config line 2: warning: `bw 10` is 10 bit/s"),
        "{err}"
    );
}
