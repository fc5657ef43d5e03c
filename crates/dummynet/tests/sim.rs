//! `dummynet sim` and `dummynet gen` end to end, through the built binary.

mod sim_common;

use std::borrow::Cow;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use serde_json::Value;
use sim_common::*;

fn scratch(name: &str) -> PathBuf {
    sim_common::scratch("sim-tests", name)
}

const PIPE_10M_10MS: &str =
    "pipe 1 config bw 10Mbit/s delay 10ms queue 50\nadd 100 pipe 1 ip from any to any in\n";

#[test]
fn departures_are_exact_to_the_nanosecond() {
    let d = scratch("exact");
    let conf = write(&d, "c.conf", PIPE_10M_10MS);
    // Line rate: each 1500-byte packet arrives as the previous one finishes.
    let paced = gen(
        &d,
        "paced.pcap",
        &["--packets", "20", "--rate", "10Mbit/s", "--start", "1000"],
    );
    let r = sim(&d, &conf, &[s(&paced)], &[]);
    assert_eq!(r.linktype, 1);
    let want: Vec<u64> = (0..20)
        .map(|i| 1000 * S + i * 1_200_000 + 1_200_000 + 10 * MS)
        .collect();
    assert_eq!(r.times(), want);
    for (i, e) in r.events("departure").iter().enumerate() {
        assert_eq!(e["id"], i as u64);
        assert_eq!(e["t_ns"], i as u64 * 1_200_000 + 11_200_000);
        assert_eq!(
            (e["rule"].as_u64(), e["pipe"].as_u64()),
            (Some(100), Some(1))
        );
    }
    assert!(
        r.stdout
            .contains("delay (ms):    mean 11.200000  min 11.200000  max 11.200000"),
        "{}",
        r.stdout
    );

    // A burst at 100 Mbit/s queues: packet i leaves after i+1 serialisations.
    let burst = gen(
        &d,
        "burst.pcap",
        &["--packets", "10", "--rate", "100Mbit/s"],
    );
    let got = sim(&d, &conf, &[s(&burst)], &[]).times();
    let want: Vec<u64> = (0..10).map(|i| (i + 1) * 1_200_000 + 10 * MS).collect();
    assert_eq!(got, want);
}

#[test]
fn every_packet_is_accounted_for() {
    let d = scratch("conservation");
    let conf = write(
        &d,
        "c.conf",
        "pipe 1 config bw 1Mbit/s delay 5ms queue 5\nadd 100 pipe 1 ip from any to any in\n",
    );
    let pcap = gen(
        &d,
        "in.pcap",
        &[
            "--packets",
            "200",
            "--rate",
            "5Mbit/s",
            "--size",
            "500",
            "--flows",
            "3",
        ],
    );
    let r = sim(&d, &conf, &[s(&pcap)], &[]);
    let stdout = &r.stdout;
    let (arr, dep, drop) = (r.events("arrival"), r.events("departure"), r.events("drop"));
    assert_eq!(arr.len(), 200);
    assert_eq!(arr.len(), dep.len() + drop.len());
    assert!(
        !drop.is_empty()
            && drop
                .iter()
                .all(|e| e["reason"] == "queue-full" && e["pipe"] == 1)
    );
    // Each id arrives once and leaves once, after it arrived.
    let mut seen = [0u8; 200];
    for e in dep.iter().chain(&drop) {
        seen[e["id"].as_u64().unwrap() as usize] += 1;
        assert!(e["t_ns"].as_u64() >= arr[e["id"].as_u64().unwrap() as usize]["t_ns"].as_u64());
    }
    assert!(seen.iter().all(|n| *n == 1));
    assert_eq!(r.out.len(), dep.len());
    assert!(
        stdout.contains(&format!("delivered:     {}", dep.len())),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  queue-full:  {}", drop.len())),
        "{stdout}"
    );
    assert!(stdout.contains("still inside:  0"), "{stdout}");
}

#[test]
fn reruns_are_byte_identical() {
    let d = scratch("rerun");
    let conf = write(
        &d,
        "c.conf",
        // Random loss and a random rule, so the seed matters.
        "pipe 1 config bw 2Mbit/s delay 3ms queue 8 plr 0.1\n\
         add 100 prob 0.9 pipe 1 ip from any to any in\nadd 200 allow ip from any to any\n",
    );
    let pcap = gen(
        &d,
        "in.pcap",
        &[
            "--packets",
            "300",
            "--rate",
            "3Mbit/s",
            "--size",
            "300",
            "--flows",
            "5",
        ],
    );
    let run = |tag: &str, seed: &str| {
        let (out, log) = (
            d.join(format!("out{tag}.pcap")),
            d.join(format!("log{tag}.jsonl")),
        );
        let stdout = ok(dummynet(&[
            "sim",
            "--config",
            s(&conf),
            "--pcap",
            s(&pcap),
            "--out",
            s(&out),
            "--log",
            s(&log),
            "--seed",
            seed,
        ]));
        (stdout, fs::read(out).unwrap(), fs::read(log).unwrap())
    };
    let (a, b) = (run("a", "42"), run("b", "42"));
    assert!(!a.1.is_empty() && !a.2.is_empty());
    assert!(a == b, "two runs with the same seed differ");
    assert!(a.0.contains("plr:"), "{}", a.0);
    let c = run("c", "43");
    assert!(a.2 != c.2, "another seed gave the same run");
}

#[test]
fn pcapng_input_microsecond_timestamps() {
    let d = scratch("pcapng");
    let conf = write(&d, "c.conf", PIPE_10M_10MS);
    let pcap = gen(&d, "in.pcap", &["--packets", "5", "--start", "7"]);
    // The same packets as pcapng with the default (microsecond) resolution.
    let ng = d.join("in.pcapng");
    let mut w = PcapNgWriter::new(fs::File::create(&ng).unwrap()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![],
    })
    .unwrap();
    let frames = read_pcap(&pcap).1;
    for (ts, data) in &frames {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            // pcap-file writes this raw count; in microseconds here.
            timestamp: Duration::from_nanos(ts / 1000),
            original_len: data.len() as u32,
            data: Cow::Borrowed(data),
            options: vec![],
        })
        .unwrap();
    }
    drop(w);
    let r = sim(&d, &conf, &[s(&ng)], &[]);
    assert_eq!(r.linktype, 1);
    let want: Vec<u64> = (0..5).map(|i| 7 * S + i * 1_200_000 + 11_200_000).collect();
    assert_eq!(r.times(), want);
    assert_eq!(r.out[0].1, frames[0].1);

    // Nanosecond resolution through if_tsresol = 9.
    let ng9 = d.join("in9.pcapng");
    let mut w = PcapNgWriter::new(fs::File::create(&ng9).unwrap()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![InterfaceDescriptionOption::IfTsResol(9)],
    })
    .unwrap();
    for (ts, data) in &frames {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(*ts + 3),
            original_len: data.len() as u32,
            data: Cow::Borrowed(data),
            options: vec![],
        })
        .unwrap();
    }
    drop(w);
    let r = sim(&d, &conf, &[s(&ng9)], &[]);
    assert_eq!(r.out[0].0, 7 * S + 3 + 11_200_000);
}

#[test]
fn ipv6_and_raw_ip_inputs() {
    let d = scratch("ipv6");
    let conf = write(&d, "c.conf", PIPE_10M_10MS);
    for (name, args, linktype) in [
        ("eth6.pcap", &["--ipv6"][..], 1),
        ("raw6.pcap", &["--ipv6", "--raw"][..], 101),
        ("raw4.pcap", &["--raw", "--proto", "tcp"][..], 101),
    ] {
        let mut a = vec!["--packets", "3"];
        a.extend_from_slice(args);
        let pcap = gen(&d, name, &a);
        let r = sim(&d, &conf, &[s(&pcap)], &[]);
        assert_eq!(r.linktype, linktype, "{name}");
        // 1500 IP bytes billed whatever the link: exactly 1.2 ms each.
        assert_eq!(r.times(), [11_200_000, 12_400_000, 13_600_000], "{name}");
        assert!(r.events("arrival").iter().all(|e| e["len"] == 1500));
    }
}

#[test]
fn two_inputs_merge_by_time_and_take_their_interface_and_direction() {
    let d = scratch("two-inputs");
    let conf = write(
        &d,
        "c.conf",
        // recv/xmit see the interface each capture was given.
        "pipe 1 config bw 10Mbit/s delay 10ms\npipe 2 config bw 10Mbit/s delay 50ms\n\
         add 100 pipe 1 ip from any to any in recv sim0\n\
         add 200 pipe 2 ip from any to any out xmit eth1\n",
    );
    let a = gen(&d, "a.pcap", &["--packets", "3", "--rate", "1Mbit/s"]);
    // Starts 1 ms later, so arrivals interleave: a0 b0 a1 b1...
    let b = gen(
        &d,
        "b.pcap",
        &[
            "--packets",
            "3",
            "--rate",
            "1Mbit/s",
            "--start",
            "1ms",
            "--src",
            "10.9.0.0/24",
        ],
    );
    let spec_b = format!("{}@eth1:out", s(&b));
    let r = sim(&d, &conf, &[s(&a), &spec_b], &[]);
    let arr = r.events("arrival");
    let order: Vec<(&str, &str, u64)> = arr
        .iter()
        .map(|e| {
            (
                e["iface"].as_str().unwrap(),
                e["dir"].as_str().unwrap(),
                e["t_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("sim0", "in", 0),
            ("eth1", "out", MS),
            ("sim0", "in", 12 * MS),
            ("eth1", "out", 13 * MS),
            ("sim0", "in", 24 * MS),
            ("eth1", "out", 25 * MS)
        ]
    );
    for e in r.events("departure") {
        let id = e["id"].as_u64().unwrap();
        let (pipe, delay) = if id % 2 == 0 {
            (1, 10 * MS)
        } else {
            (2, 50 * MS)
        };
        assert_eq!(e["pipe"], pipe);
        assert_eq!(
            e["t_ns"].as_u64().unwrap(),
            arr[id as usize]["t_ns"].as_u64().unwrap() + 1_200_000 + delay
        );
    }
    assert_eq!(r.out.len(), 6);
    // Equal timestamps keep input order.
    let c = gen(
        &d,
        "c.pcap",
        &[
            "--packets",
            "3",
            "--rate",
            "1Mbit/s",
            "--src",
            "10.9.0.0/24",
        ],
    );
    let spec_c = format!("{}@eth1:out", s(&c));
    let ifaces: Vec<_> = sim(&d, &conf, &[&spec_c, s(&a)], &[])
        .events("arrival")
        .iter()
        .map(|e| e["iface"].clone())
        .collect();
    assert_eq!(ifaces, ["eth1", "sim0", "eth1", "sim0", "eth1", "sim0"]);
}

/// A pcap of the given frames, one millisecond apart.
fn raw_pcap(dir: &Path, name: &str, linktype: DataLink, frames: &[Vec<u8>]) -> PathBuf {
    let p = dir.join(name);
    let timed: Vec<(u64, Vec<u8>)> = (0..).map(|i| i * MS).zip(frames.iter().cloned()).collect();
    write_pcap(&p, linktype, &timed);
    p
}

#[test]
fn non_ip_passes_through_and_malformed_is_dropped() {
    let d = scratch("non-ip");
    let conf = write(&d, "c.conf", PIPE_10M_10MS);
    let ip = read_pcap(&gen(&d, "one.pcap", &["--packets", "1"]))
        .1
        .remove(0)
        .1;
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    let truncated = ip[..30].to_vec();
    let pcap = raw_pcap(
        &d,
        "mixed.pcap",
        DataLink::ETHERNET,
        &[arp.clone(), ip, truncated],
    );
    let r = sim(&d, &conf, &[s(&pcap)], &[]);
    let dep = r.events("departure");
    assert_eq!(dep[0]["id"], 0);
    assert_eq!(dep[0]["t_ns"], 0);
    assert!(dep[0]["rule"].is_null());
    assert!(dep[0]["note"].as_str().unwrap().contains("0x0806"));
    let drop = r.events("drop");
    assert_eq!(
        (drop.len(), &drop[0]["id"], &drop[0]["reason"]),
        (1, &Value::from(2), &Value::from("malformed"))
    );
    assert!(drop[0]["note"].as_str().unwrap().contains("truncated"));
    assert_eq!(r.out[0], (0, arp));
    assert_eq!(r.out.len(), 2);
    assert!(r.stdout.contains("malformed:"), "{}", r.stdout);
}

#[test]
fn bad_inputs_fail_with_clear_messages() {
    let d = scratch("errors");
    let conf = write(&d, "c.conf", PIPE_10M_10MS);
    let pcap = gen(&d, "in.pcap", &["--packets", "2"]);
    let run = |conf: &Path, pcap: &str| dummynet(&["sim", "--config", s(conf), "--pcap", pcap]);

    let e = fails(run(&conf, s(&d.join("missing.pcap"))));
    assert!(
        e.contains("missing.pcap") && e.contains("cannot read"),
        "{e}"
    );

    let garbage = write(&d, "garbage.pcap", "this is not a capture");
    let e = fails(run(&conf, s(&garbage)));
    assert!(
        e.contains("garbage.pcap") && e.contains("not a pcap"),
        "{e}"
    );

    let mut cut = fs::read(&pcap).unwrap();
    cut.truncate(cut.len() - 100);
    let cut_path = d.join("cut.pcap");
    fs::write(&cut_path, cut).unwrap();
    let e = fails(run(&conf, s(&cut_path)));
    assert!(
        e.contains("cut.pcap") && e.contains("packet 2") && e.contains("truncated"),
        "{e}"
    );

    let bad_conf = write(
        &d,
        "bad.conf",
        "pipe 1 config bw 10Mbit/s\nadd 100 pipe 1 ip frm any to any\n",
    );
    let e = fails(run(&bad_conf, s(&pcap)));
    assert!(e.contains("bad.conf") && e.contains('2'), "{e}");

    let e = fails(run(&d.join("nope.conf"), s(&pcap)));
    assert!(e.contains("nope.conf"), "{e}");

    let e = fails(run(&conf, &format!("{}@eth0:sideways", s(&pcap))));
    assert!(
        e.contains("sideways") && e.contains("in") && e.contains("out"),
        "{e}"
    );
    let e = fails(run(&conf, &format!("{}@", s(&pcap))));
    assert!(e.contains("interface"), "{e}");

    let raw = gen(&d, "raw.pcap", &["--packets", "2", "--raw"]);
    let e = fails(dummynet(&[
        "sim",
        "--config",
        s(&conf),
        "--pcap",
        s(&pcap),
        "--pcap",
        s(&raw),
    ]));
    assert!(e.contains("link type"), "{e}");

    let wifi = raw_pcap(&d, "wifi.pcap", DataLink::IEEE802_11, &[vec![0; 40]]);
    let e = fails(run(&conf, s(&wifi)));
    assert!(e.contains("link type 105"), "{e}");

    let e = fails(dummynet(&[
        "gen",
        "--out",
        s(&d.join("x.pcap")),
        "--size",
        "10",
    ]));
    assert!(e.contains("--size"), "{e}");
    let e = fails(dummynet(&[
        "gen",
        "--out",
        s(&d.join("x.pcap")),
        "--rate",
        "fast",
    ]));
    assert!(e.contains("fast"), "{e}");
}

#[test]
fn gen_is_deterministic() {
    let d = scratch("gen");
    let a = gen(
        &d,
        "a.pcap",
        &["--packets", "50", "--flows", "4", "--proto", "tcp"],
    );
    let b = gen(
        &d,
        "b.pcap",
        &["--packets", "50", "--flows", "4", "--proto", "tcp"],
    );
    assert_eq!(fs::read(a).unwrap(), fs::read(b).unwrap());
}

#[test]
fn shipped_demo_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let d = scratch("demo");
    let conf = root.join("examples/demo.conf");
    let pcap = root.join("examples/demo.pcap");
    let r = sim(&d, &conf, &[s(&pcap)], &[]);
    assert_eq!(
        r.events("arrival").len(),
        r.events("departure").len() + r.events("drop").len()
    );
    assert!(r.stdout.contains("still inside:  0"), "{}", r.stdout);
    // The shipped capture is what examples/README.md says regenerates it.
    let regen = d.join("demo.pcap");
    let args: Vec<String> = fs::read_to_string(root.join("examples/README.md"))
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("dummynet gen ").map(str::to_string))
        .expect("examples/README.md shows the gen command")
        .split_whitespace()
        .map(|w| {
            if w == "examples/demo.pcap" {
                s(&regen).to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    let mut a = vec!["gen"];
    a.extend(args.iter().map(String::as_str));
    ok(dummynet(&a));
    assert_eq!(fs::read(regen).unwrap(), fs::read(pcap).unwrap());
}

#[test]
fn netem_options_and_a_repeating_schedule_run_in_sim() {
    let d = scratch("netem");
    let conf = write(
        &d,
        "c.conf",
        "pipe 1 config delay 20ms jitter 5ms duplicate 10% corrupt 5% loss 2% queue 100\n\
         add 100 pipe 1 ip from any to any in\n\
         # the link goes down for 100 ms of every 400\n\
         at 200ms pipe 1 modify plr 1\n\
         at 300ms pipe 1 modify plr 0\n\
         repeat every 400ms\n",
    );
    // 2,000 packets of 500 bytes at 8 Mbit/s: one every 500 µs, 1 s in all.
    let pcap = gen(
        &d,
        "in.pcap",
        &["--packets", "2000", "--rate", "8Mbit/s", "--size", "500"],
    );
    let r = sim(&d, &conf, &[s(&pcap)], &["--seed", "7"]);
    let stdout = &r.stdout;
    let (arr, dep, drop) = (r.events("arrival"), r.events("departure"), r.events("drop"));
    let copies = |v: &[&Value]| v.iter().filter(|e| e["note"] == "duplicate").count();
    let dups = copies(&dep) + copies(&drop);
    // Books: every capture packet and every copy leaves once.
    assert_eq!(arr.len() + dups, dep.len() + drop.len());
    assert!(
        stdout.contains(&format!("duplicated:    {dups} ")),
        "{stdout}"
    );
    assert!(stdout.contains("still inside:  0"), "{stdout}");
    // Down in [200, 300) and [600, 700) ms of the capture: every arrival
    // there is a plr drop, and none outside it.
    let t0 = arr[0]["t_ns"].as_u64().unwrap();
    for e in &drop {
        let t = e["t_ns"].as_u64().unwrap() - t0;
        let down = (200 * MS..300 * MS).contains(&t) || (600 * MS..700 * MS).contains(&t);
        assert_eq!(e["reason"] == "plr", down, "drop at {t} ns: {e}");
    }
    let plr = drop.iter().filter(|e| e["reason"] == "plr").count();
    assert!(
        (390..=420).contains(&plr),
        "{plr} plr drops (200 ms of 500 µs arrivals, plus copies)"
    );
    // Delays stay within 20 ± 5 ms (in order: a packet may wait for the one ahead).
    for e in dep.iter().filter(|e| e["note"].is_null()) {
        let id = e["id"].as_u64().unwrap() as usize;
        let delay = e["t_ns"].as_u64().unwrap() - arr[id]["t_ns"].as_u64().unwrap();
        assert!((15 * MS..=25 * MS).contains(&delay), "delay {delay}");
    }
    // Steps at 200, 300, 600, 700 and 1000 ms ran (the last packets leave
    // after 1000 ms); the run ends with both steps of the next cycle waiting.
    assert!(
        stdout.contains("scheduled:     5 applied, 0 refused, 2 pending, 0 cancelled"),
        "{stdout}"
    );
    assert!(stdout.contains("impair: jitter 5ms"), "{stdout}");
    assert!(
        stdout.contains("impair: loss 2% duplicate 10% corrupt 5%"),
        "{stdout}"
    );
    // And the same seed gives the same run.
    let again = sim(&d, &conf, &[s(&pcap)], &["--seed", "7"]).stdout;
    assert_eq!(*stdout, again);
}

/// Issue 25 item 3: `at 300ms pipe 1 delete` drops what pipe 1 holds, its
/// 10 s delay line as well as its queue, at 300 ms, as `deleted`; nothing
/// leaves after it (before the fix the delay line left 9.7 s later).
#[test]
fn deleting_a_pipe_drops_its_delay_line_in_sim() {
    let d = scratch("delete-delay-line");
    let conf = write(
        &d,
        "c.conf",
        "pipe 1 config bw 500Kbit/s delay 10s\n\
         add 100 pipe 1 ip from any to any in\n\
         at 300ms pipe 1 delete\n",
    );
    // 75 packets of 500 bytes, one every 4 ms (1 Mbit/s), the last at
    // 296 ms: at half that rate, about half are past the link by 300 ms.
    let pcap = gen(
        &d,
        "in.pcap",
        &["--packets", "75", "--rate", "1Mbit/s", "--size", "500"],
    );
    let r = sim(&d, &conf, &[s(&pcap)], &[]);
    let (arr, dep, drop) = (r.events("arrival"), r.events("departure"), r.events("drop"));
    assert_eq!(arr.len(), 75);
    assert!(dep.is_empty(), "delivered after the pipe went: {dep:?}");
    assert_eq!(drop.len(), 75);
    let t0 = arr[0]["t_ns"].as_u64().unwrap();
    for e in &drop {
        assert_eq!(e["reason"], "deleted", "{e}");
        assert_eq!(e["t_ns"].as_u64().unwrap() - t0, 300 * MS, "{e}");
    }
    assert!(r.stdout.contains("still inside:  0"), "{}", r.stdout);
}

#[test]
fn a_trace_pipe_in_sim_carries_the_traces_rate() {
    let d = scratch("trace");
    let trace =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces/constant-12mbit.trace");
    let conf = write(
        &d,
        "c.conf",
        &format!(
            "sysctl net.inet.ip.dummynet.pipe_slot_limit=10000\n\
             pipe 1 config trace {} queue 5000\nadd 100 pipe 1 ip from any to any in\n",
            trace.display()
        ),
    );
    // 1 s of 1504-byte packets at 24 Mbit/s: twice what the trace carries.
    let pcap = gen(
        &d,
        "in.pcap",
        &["--duration", "1s", "--rate", "24Mbit/s", "--size", "1504"],
    );
    let times = sim(&d, &conf, &[s(&pcap)], &[]).times();
    // One 1504-byte packet per opportunity, one opportunity per ms: the
    // departures are whole milliseconds apart, each exactly on one.
    assert!(times.len() > 1000, "{}", times.len());
    let first = times[0];
    for (i, t) in times.iter().enumerate() {
        assert_eq!(t - first, i as u64 * MS, "departure {i}");
    }
}

/// `--seed`'s help names everything the seed drives, on each command
/// that takes it.
#[test]
fn seed_help_names_every_random_draw() {
    for command in ["sim", "run", "shell"] {
        let help = ok(dummynet(&[command, "--help"]));
        let seed = help
            .split("--seed")
            .nth(1)
            .unwrap_or_else(|| panic!("no --seed in `{command} --help`"));
        let seed = seed.split("\n      --").next().unwrap_or(seed);
        for word in [
            "prob",
            "plr",
            "loss",
            "duplicate",
            "corrupt",
            "jitter",
            "reorder",
            "slot",
            "profile",
            "RED",
            "PIE",
        ] {
            assert!(
                seed.contains(word),
                "`{command} --help`: --seed: no `{word}`:{seed}"
            );
        }
    }
}
