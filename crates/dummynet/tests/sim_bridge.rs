//! `dummynet sim` with captures crossing a bridge (`--pcap IN@RECV:bridge:XMIT`):
//! each frame meets the rules `in` on RECV, then `out` on XMIT, as
//! `run --bridge` passes it, all on the virtual clock.

mod sim_common;

use std::path::{Path, PathBuf};

use pcap_file::DataLink;
use serde_json::Value;
use sim_common::*;

fn scratch(name: &str) -> PathBuf {
    sim_common::scratch("sim-bridge-tests", name)
}

/// `sim` of `config` (text) on the given captures.
fn bridge_sim(dir: &Path, config: &str, pcaps: &[&str]) -> Run {
    sim(dir, &write(dir, "c.conf", config), pcaps, &[])
}

/// Five 1500-byte packets 12 ms apart, from capture time 1000 s.
fn five(dir: &Path) -> PathBuf {
    gen(
        dir,
        "in.pcap",
        &["--packets", "5", "--rate", "1Mbit/s", "--start", "1000"],
    )
}

const FIVE_AT: [u64; 5] = [0, 12 * MS, 24 * MS, 36 * MS, 48 * MS];

fn bridged(p: &Path) -> String {
    format!("{}@eth0:bridge:eth1", s(p))
}

#[test]
fn a_pipe_without_direction_takes_a_bridged_frame_on_both_passes() {
    let d = scratch("both-passes");
    let pcap = five(&d);
    let input = read_pcap(&pcap).1;
    let r = bridge_sim(
        &d,
        "pipe 1 config delay 10ms\nadd 100 pipe 1 ip from any to any\n",
        &[&bridged(&pcap)],
    );
    // Into the pipe on the way in, and again on the way out: 20 ms, exactly.
    let want: Vec<(u64, Vec<u8>)> = input
        .iter()
        .map(|(ts, f)| (ts + 20 * MS, f.clone()))
        .collect();
    assert_eq!(r.out, want);
    assert_eq!(input[0].0, 1000 * S);

    let arr = r.events("arrival");
    let fwd = r.events("forward");
    let dep = r.events("departure");
    assert_eq!((arr.len(), fwd.len(), dep.len()), (5, 5, 5));
    for (i, at) in FIVE_AT.iter().enumerate() {
        assert_eq!(
            (
                &arr[i]["t_ns"],
                &arr[i]["iface"],
                &arr[i]["dir"],
                &arr[i]["bridge_to"]
            ),
            (
                &Value::from(*at),
                &Value::from("eth0"),
                &Value::from("in"),
                &Value::from("eth1")
            )
        );
        // The `in` pass ends when pipe 1 lets the frame out...
        assert_eq!(fwd[i]["id"], i as u64);
        assert_eq!(fwd[i]["t_ns"], at + 10 * MS);
        assert_eq!((&fwd[i]["rule"], &fwd[i]["pipe"]), (&100.into(), &1.into()));
        assert_eq!(fwd[i]["iface"], "eth1");
        // ...and the `out` pass sends it through pipe 1 again, out of eth1.
        assert_eq!(dep[i]["id"], i as u64);
        assert_eq!(dep[i]["t_ns"], at + 20 * MS);
        assert_eq!((&dep[i]["rule"], &dep[i]["pipe"]), (&100.into(), &1.into()));
        assert_eq!(dep[i]["iface"], "eth1");
    }
    assert!(
        r.stdout
            .contains("delay (ms):    mean 20.000000  min 20.000000  max 20.000000"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("out passes:    5 "), "{}", r.stdout);
    assert!(r.stdout.contains("still inside:  0"), "{}", r.stdout);
    // The live bridge's warning, word for word.
    assert!(
        r.stderr
            .contains("warning: rule 00100 sends to a pipe or queue without `in` or `out`"),
        "{}",
        r.stderr
    );

    // The same capture entering on eth0 alone meets the rules once.
    let plain = format!("{}@eth0", s(&pcap));
    let r = bridge_sim(
        &d,
        "pipe 1 config delay 10ms\nadd 100 pipe 1 ip from any to any\n",
        &[&plain],
    );
    let got = r.times();
    let want: Vec<u64> = input.iter().map(|f| f.0 + 10 * MS).collect();
    assert_eq!(got, want);
    assert!(r.events("forward").is_empty());
    assert!(!r.stdout.contains("out passes"), "{}", r.stdout);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

#[test]
fn a_pipe_rule_with_in_takes_a_bridged_frame_once() {
    let d = scratch("in-only");
    let pcap = five(&d);
    let r = bridge_sim(
        &d,
        "pipe 1 config delay 10ms\nadd 100 pipe 1 ip from any to any in\n\
         add 200 allow ip from any to any\n",
        &[&bridged(&pcap)],
    );
    let got = r.times();
    let want: Vec<u64> = FIVE_AT.iter().map(|t| 1000 * S + t + 10 * MS).collect();
    assert_eq!(got, want);
    let (fwd, dep) = (r.events("forward"), r.events("departure"));
    for (i, at) in FIVE_AT.iter().enumerate() {
        assert_eq!(fwd[i]["t_ns"], at + 10 * MS);
        assert_eq!((&fwd[i]["rule"], &fwd[i]["pipe"]), (&100.into(), &1.into()));
        // The `out` pass: rule 100 is for `in` only, so rule 200 lets it go
        // at once.
        assert_eq!(dep[i]["t_ns"], at + 10 * MS);
        assert_eq!(dep[i]["rule"], 200);
        assert!(dep[i].get("pipe").is_none(), "{}", dep[i]);
        assert_eq!(dep[i]["iface"], "eth1");
    }
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);

    // Without rule 200 the `out` pass ends at the default rule, which
    // denies: as a live bridge would, from that rule, on that pass.
    let r = bridge_sim(
        &d,
        "pipe 1 config delay 10ms\nadd 100 pipe 1 ip from any to any in\n",
        &[&bridged(&pcap)],
    );
    assert!(r.out.is_empty());
    let drop = r.events("drop");
    assert_eq!(drop.len(), 5);
    for (i, at) in FIVE_AT.iter().enumerate() {
        assert_eq!(drop[i]["t_ns"], at + 10 * MS);
        assert_eq!(
            (&drop[i]["reason"], &drop[i]["rule"], &drop[i]["dir"]),
            (&"rule-deny".into(), &65535.into(), &"out".into())
        );
    }
}

#[test]
fn a_deny_out_xmit_drops_bridged_frames_on_their_out_pass() {
    let d = scratch("deny-out");
    let a = five(&d);
    // The other way across the bridge, 1 ms later.
    let b = gen(
        &d,
        "b.pcap",
        &[
            "--packets",
            "5",
            "--rate",
            "1Mbit/s",
            "--start",
            "1000001ms",
            "--src",
            "10.9.0.0/24",
        ],
    );
    let r = bridge_sim(
        &d,
        "pipe 1 config delay 10ms\n\
         add 50 pipe 1 ip from any to any in\n\
         add 100 deny ip from any to any out xmit eth1\n\
         add 200 allow ip from any to any\n",
        &[&bridged(&a), &format!("{}@eth1:bridge:eth0", s(&b))],
    );
    let (fwd, dep, drop) = (r.events("forward"), r.events("departure"), r.events("drop"));
    assert_eq!((fwd.len(), dep.len(), drop.len()), (10, 5, 5));
    // Arrivals interleave: even ids cross eth0 -> eth1, odd ones eth1 -> eth0.
    for (i, at) in FIVE_AT.iter().enumerate() {
        let (to_eth1, to_eth0) = (2 * i as u64, 2 * i as u64 + 1);
        assert_eq!(drop[i]["id"], to_eth1);
        assert_eq!(drop[i]["t_ns"], at + 10 * MS);
        assert_eq!(
            (&drop[i]["reason"], &drop[i]["rule"], &drop[i]["dir"]),
            (&"rule-deny".into(), &100.into(), &"out".into())
        );
        assert_eq!(dep[i]["id"], to_eth0);
        assert_eq!(dep[i]["t_ns"], at + MS + 10 * MS);
        assert_eq!(
            (&dep[i]["rule"], &dep[i]["iface"]),
            (&200.into(), &"eth0".into())
        );
    }
    // Both directions passed the `in` pass through pipe 1.
    assert!(fwd.iter().all(|e| e["rule"] == 50 && e["pipe"] == 1));
    let got = r.times();
    let want: Vec<u64> = FIVE_AT.iter().map(|t| 1000 * S + t + 11 * MS).collect();
    assert_eq!(got, want);
    assert!(r.stdout.contains("  rule-deny:   5"), "{}", r.stdout);
    assert!(r.stdout.contains("out passes:    10 "), "{}", r.stdout);

    // The `out` pass keeps the frame's `recv`, as live does.
    let r = bridge_sim(
        &d,
        "add 100 deny ip from any to any out recv eth0\n\
         add 200 allow ip from any to any\n",
        &[&bridged(&a), &format!("{}@eth1:bridge:eth0", s(&b))],
    );
    let drop = r.events("drop");
    assert_eq!(drop.len(), 5);
    for (i, at) in FIVE_AT.iter().enumerate() {
        assert_eq!(
            (&drop[i]["id"], &drop[i]["t_ns"]),
            (&(2 * i).into(), &(*at).into())
        );
        assert_eq!(
            (&drop[i]["rule"], &drop[i]["dir"]),
            (&100.into(), &"out".into())
        );
    }
    assert_eq!(r.out.len(), 5);
}

#[test]
fn a_frame_that_is_not_ip_crosses_the_bridge_at_once() {
    let d = scratch("non-ip");
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    let p = d.join("arp.pcap");
    write_pcap(&p, DataLink::ETHERNET, &[(7 * S, arp.clone())]);
    let r = bridge_sim(
        &d,
        "pipe 1 config delay 10ms\nadd 100 pipe 1 ip from any to any\n",
        &[&bridged(&p)],
    );
    assert_eq!(r.out, [(7 * S, arp)]);
    let dep = r.events("departure");
    assert_eq!(dep.len(), 1);
    assert_eq!(
        (&dep[0]["t_ns"], &dep[0]["iface"]),
        (&0.into(), &"eth1".into())
    );
    assert!(dep[0]["rule"].is_null());
    assert!(r.events("forward").is_empty());
}

#[test]
fn bad_bridge_specs_fail_with_clear_messages() {
    let d = scratch("bad-specs");
    let conf = write(&d, "c.conf", "add 100 allow ip from any to any\n");
    let pcap = five(&d);
    let run = |spec: &str| dummynet(&["sim", "--config", s(&conf), "--pcap", spec]);
    for (spec, says) in [
        (
            "x.pcap@eth0:bridge:".to_string(),
            "the bridge's sending interface (after `:bridge:`) is empty",
        ),
        ("@eth0:bridge:eth1".to_string(), "no file name"),
        (
            "x.pcap@eth0:brdge:eth1".to_string(),
            "`brdge` between the two interfaces must be `bridge`",
        ),
        (
            format!("{}@eth0:bridge:eth0", s(&pcap)),
            "not back out of `eth0`",
        ),
    ] {
        let o = run(&spec);
        assert!(!o.status.success(), "{spec} was taken");
        let e = String::from_utf8(o.stderr).unwrap();
        assert!(
            e.contains(&format!("`{spec}`")) && e.contains(says),
            "{spec}: {e}"
        );
        assert!(e.contains("RECV:bridge:XMIT"), "{spec}: {e}");
    }
}

#[test]
fn every_bridged_packet_is_accounted_for() {
    let d = scratch("conservation");
    let a = gen(
        &d,
        "a.pcap",
        &[
            "--packets",
            "300",
            "--rate",
            "4Mbit/s",
            "--size",
            "500",
            "--flows",
            "3",
        ],
    );
    let b = gen(
        &d,
        "b.pcap",
        &[
            "--packets",
            "100",
            "--rate",
            "2Mbit/s",
            "--size",
            "500",
            "--src",
            "10.9.0.0/24",
        ],
    );
    // Losses on both passes: queue-full and random loss going in,
    // queue-full coming out; copies made going in take the `out` pass too.
    let r = bridge_sim(
        &d,
        "pipe 1 config bw 3Mbit/s delay 5ms queue 5 plr 0.05 duplicate 0.1\n\
         pipe 2 config bw 2Mbit/s queue 3\n\
         add 100 pipe 1 ip from any to any in\n\
         add 200 pipe 2 ip from any to any out\n",
        &[&bridged(&a), &format!("{}@eth2", s(&b))],
    );
    let (arr, fwd, dep, drop) = (
        r.events("arrival"),
        r.events("forward"),
        r.events("departure"),
        r.events("drop"),
    );
    assert_eq!(arr.len(), 400);
    // An original ends once; copies, which keep their original's id, are
    // marked and end once each.
    let mut ends = vec![0u32; 400];
    let mut copies = 0;
    for e in dep.iter().chain(&drop) {
        let id = e["id"].as_u64().unwrap() as usize;
        assert!(e["t_ns"].as_u64() >= arr[id]["t_ns"].as_u64());
        if e.get("note").is_some_and(|n| n == "duplicate") {
            copies += 1;
        } else {
            ends[id] += 1;
        }
    }
    assert!(ends.iter().all(|n| *n == 1), "{ends:?}");
    assert!(copies > 0);
    // Losses on both passes, and only bridged frames have an `out` pass.
    for (reason, dir) in [("queue-full", "in"), ("plr", "in"), ("queue-full", "out")] {
        assert!(
            drop.iter()
                .any(|e| e["reason"] == reason && e["dir"] == dir),
            "no {reason} on the {dir} pass"
        );
    }
    let bridged_ids = |e: &&Value| arr[e["id"].as_u64().unwrap() as usize]["bridge_to"] == "eth1";
    assert!(fwd.iter().all(bridged_ids));
    assert!(drop.iter().filter(|e| e["dir"] == "out").all(bridged_ids));
    // The eth2 input's frames meet only rule 100; with `in` alone they
    // leave nowhere known.
    assert!(dep
        .iter()
        .all(|e| e.get("iface").is_some() == bridged_ids(e)));
    assert_eq!(r.out.len(), dep.len());

    let line = |name: &str| -> u64 {
        let l = r
            .stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` in {}", r.stdout));
        l[name.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(line("packets in:"), 400);
    assert_eq!(line("delivered:"), dep.len() as u64);
    assert_eq!(line("dropped:"), drop.len() as u64);
    assert_eq!(line("still inside:"), 0);
    assert_eq!(line("duplicated:"), copies);
    assert_eq!(line("out passes:"), fwd.len() as u64);
    assert_eq!(dep.len() + drop.len(), 400 + copies as usize);
}
