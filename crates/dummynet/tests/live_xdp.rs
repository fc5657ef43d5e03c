//! `dummynet run --bridge A B --xdp` end to end, in namespaces each test
//! makes (A — M — B, veth pairs; deleted by their guards even when an
//! assertion fails): frames cross both ways intact (ping's pattern is
//! checked on every reply), ARP crosses, a pipe delays by its
//! configuration, `dummynet stats --json` balances, a UMEM held full by a
//! long delay line under a flood counts drops and does not stall, an
//! interface AF_XDP cannot serve falls back to AF_PACKET saying why, and
//! on veth (generic XDP, the default there) the far side keeps sending
//! GSO super-packets, which cross whole through the AF_PACKET bridge
//! beside the AF_XDP one, every byte of a TCP transfer arriving, while
//! driver XDP (asked for) makes the far side segment and says what that
//! costs.
//! Every ping has a count and a deadline. Without root or the tools, each
//! test prints `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::time::Duration;

use live_common::*;

const TOOLS: &[&str] = &["ip", "ping"];

/// A — M — B with the daemon in M, its stderr in its log.
/// (Fields drop in order: the namespaces, the daemon inside them with
/// them, then the daemon's guard.)
struct Bed {
    path: BridgePath,
    daemon: Daemon,
}

/// The daemon bridges m-a and m-b with `extra` options and `config`;
/// `mtu` is set on m-a first.
fn bed(config: &str, extra: &[&str], mtu: Option<&str>) -> Bed {
    let path = BridgePath::new();
    if let Some(mtu) = mtu {
        path.m.ip(&["link", "set", "m-a", "mtu", mtu]);
    }
    let mut args = vec!["--nice", "--precision", "timer"];
    args.extend_from_slice(extra);
    let daemon = path.daemon("xdp", Some(config), &args);
    Bed { path, daemon }
}

/// False (and says the test is skipped) when the daemon fell back to
/// AF_PACKET because this kernel has no AF_XDP or BPF for it: a test of
/// the AF_XDP bridge has nothing to test then. Any other fallback fails.
fn runs_xdp(bed: &Bed, test: &str) -> bool {
    let said = bed.daemon.log();
    if said.contains("AF_XDP,") {
        return true;
    }
    let no = ["EAFNOSUPPORT", "ENOSYS", "EPERM", "no AF_XDP"]
        .iter()
        .any(|w| said.contains(w));
    assert!(
        no,
        "{test}: the daemon does not run AF_XDP, for no reason of the kernel's:\n{said}"
    );
    println!("skipped: {test}: AF_XDP cannot be used here:\n{said}");
    false
}

fn ping(bed: &Bed, args: &[&str], what: &str) -> Ping {
    let mut full = vec!["-n", "-W", "1", "-w", "8"];
    full.extend_from_slice(args);
    full.push(B_ADDR);
    let out = run_bounded(
        &mut bed.path.a.command("ping", &full),
        Duration::from_secs(12),
        what,
    );
    let text = text(&out.stdout);
    assert!(
        !text.contains("wrong data byte"),
        "{what}: a reply's payload differs from what was sent:\n{text}"
    );
    Ping::parse(&text)
}

fn total(v: &serde_json::Value, p: &str) -> u64 {
    v.pointer(p)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("{p} missing: {v}"))
}

/// A backend counter summed over the backends that have it (with generic
/// XDP the AF_XDP bridge and the AF_PACKET one beside it both count, say,
/// `non_ip_forwarded`); `None` if none has it.
fn backend_counter(v: &serde_json::Value, name: &str) -> Option<u64> {
    let backends = v["backends"].as_object()?;
    backends
        .values()
        .filter_map(|b| b.get(name).and_then(serde_json::Value::as_u64))
        .reduce(|a, b| a + b)
}

/// A counter of the backend whose name contains `which` (`AF_XDP`, or
/// `<->` for the first).
fn counter_of(v: &serde_json::Value, which: &str, name: &str) -> Option<u64> {
    let backends = v["backends"].as_object()?;
    let (_, b) = backends
        .iter()
        .find(|(k, _)| k.contains(which) && (which == "AF_XDP" || !k.contains("AF_XDP")))?;
    b.get(name).and_then(serde_json::Value::as_u64)
}

fn balanced(v: &serde_json::Value) {
    assert_eq!(
        total(v, "/totals/arrived"),
        total(v, "/totals/delivered") + total(v, "/totals/dropped") + total(v, "/totals/inside"),
        "the books: {v}"
    );
}

/// The XDP bridge forwards ICMP both ways with its payload intact (ARP
/// first: the ping could not start without it), delays by the pipes'
/// 10 ms each way, and its books balance.
#[test]
fn xdp_bridge_delays_both_ways_intact_and_balances() {
    if !ready("xdp_bridge_delays_both_ways_intact_and_balances", TOOLS) {
        return;
    }
    let _serial = serial();
    let mut bed = bed(
        "pipe 1 config delay 10ms\n\
         pipe 2 config delay 10ms\n\
         add 100 pipe 1 ip from any to any in recv m-a\n\
         add 200 pipe 2 ip from any to any in recv m-b\n\
         add 65000 allow ip from any to any\n",
        &["--xdp"],
        None,
    );
    if !runs_xdp(&bed, "xdp_bridge_delays_both_ways_intact_and_balances") {
        return;
    }
    let delayed = ping(
        &bed,
        &["-c", "10", "-i", "0.1", "-s", "1400", "-p", "a55a0ff0"],
        "ping A→B",
    );
    bed.daemon.ipfw(&["pipe", "1", "config", "delay", "0ms"]);
    bed.daemon.ipfw(&["pipe", "2", "config", "delay", "0ms"]);
    let base = ping(
        &bed,
        &["-c", "10", "-i", "0.1", "-s", "56"],
        "ping A→B, no delay",
    );
    println!("xdp: {:?} vs {:?}", delayed.rtts(), base.rtts());
    assert_eq!(delayed.lost(), 0, "{delayed:?}");
    assert_eq!(base.lost(), 0, "{base:?}");
    let added = median(&delayed.rtts()) - median(&base.rtts());
    assert!(
        (18.0..30.0).contains(&added),
        "10 ms each way adds {added:.2} ms to the RTT"
    );
    let v = bed.daemon.stats_json();
    balanced(&v);
    assert!(total(&v, "/totals/delivered") >= 40, "{v}");
    assert!(
        backend_counter(&v, "non_ip_forwarded").is_some_and(|n| n >= 2),
        "ARP crossed without the engine: {v}"
    );
    assert_eq!(backend_counter(&v, "umem_held"), Some(0), "{v}");
    let status = bed.daemon.proc.terminate(Duration::from_secs(5));
    assert!(status.success(), "exit status {status}");
}

/// A 3 s delay line holding a flood's frames fills a UMEM of 256 frames:
/// the kernel drops what it has no chunk for and the daemon counts it
/// (`m-a.rx_fill_ring_empty`); no packet is lost from the engine's books,
/// and once the delay is gone the bridge forwards again.
#[test]
fn xdp_full_umem_counts_drops_and_never_stalls() {
    if !ready("xdp_full_umem_counts_drops_and_never_stalls", TOOLS) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "pipe 1 config delay 3000ms\n\
         add 100 pipe 1 icmp from any to any in recv m-a\n\
         add 65000 allow ip from any to any\n",
        &["--xdp", "--xdp-frames", "256"],
        None,
    );
    if !runs_xdp(&bed, "xdp_full_umem_counts_drops_and_never_stalls") {
        return;
    }
    // Resolve first: ARP is not held by the pipe.
    let mut arp = bed.path.a.command("ping", &["-c", "1", "-W", "1", B_ADDR]);
    run_bounded(&mut arp, Duration::from_secs(10), "first ping");
    // A flood of 2000 requests, 64 at a time in flight at most.
    let flood = ping(
        &bed,
        &["-f", "-l", "64", "-c", "2000", "-s", "16"],
        "flood A→B",
    );
    println!("flood: {flood:?}");
    let v = bed.daemon.stats_json();
    balanced(&v);
    let empty = backend_counter(&v, "m-a.rx_fill_ring_empty").unwrap_or(0);
    assert!(
        empty > 0,
        "the kernel counted frames it had no chunk for: {v}"
    );
    bed.daemon.ipfw(&["pipe", "1", "config", "delay", "0ms"]);
    std::thread::sleep(Duration::from_millis(3500));
    let after = ping(&bed, &["-c", "5", "-i", "0.1"], "ping after the flood");
    assert_eq!(after.lost(), 0, "the bridge forwards again: {after:?}");
    let v = bed.daemon.stats_json();
    balanced(&v);
    assert_eq!(total(&v, "/totals/inside"), 0, "{v}");
    assert_eq!(backend_counter(&v, "umem_held"), Some(0), "{v}");
}

/// An interface AF_XDP cannot serve here (driver XDP, and an MTU whose
/// frames do not fit a UMEM chunk): `--xdp` says why and bridges with
/// AF_PACKET.
#[test]
fn xdp_falls_back_to_af_packet_saying_why() {
    if !ready("xdp_falls_back_to_af_packet_saying_why", TOOLS) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "add 65000 allow ip from any to any\n",
        &["--xdp", "--xdp-attach", "driver"],
        Some("9000"),
    );
    let got = ping(&bed, &["-c", "3", "-i", "0.1"], "ping over the fallback");
    let said = bed.daemon.log();
    assert!(
        said.contains("--xdp: AF_XDP cannot be used here")
            && said.contains("MTU 9000")
            && said.contains("falling back to the AF_PACKET bridge"),
        "{said}"
    );
    assert_eq!(got.lost(), 0, "{got:?}");
}

/// A port's interface deleted under the AF_XDP bridge: its socket polls
/// with an error, and the daemon stops with EX_UNAVAILABLE (69) and a
/// message naming the port, instead of spinning on the error.
#[test]
fn xdp_port_deleted_stops_the_daemon_saying_why() {
    if !ready("xdp_port_deleted_stops_the_daemon_saying_why", TOOLS) {
        return;
    }
    let _serial = serial();
    let mut bed = bed("add 65000 allow ip from any to any\n", &["--xdp"], None);
    if !runs_xdp(&bed, "xdp_port_deleted_stops_the_daemon_saying_why") {
        return;
    }
    let got = ping(&bed, &["-c", "2", "-i", "0.1"], "ping before");
    assert_eq!(got.lost(), 0, "{got:?}");
    bed.path.m.ip(&["link", "del", "m-a"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = bed.daemon.proc.child.try_wait().expect("wait") {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = bed.daemon.log();
    let status =
        status.unwrap_or_else(|| panic!("the daemon still runs 5 s after m-a went:\n{said}"));
    assert_eq!(status.code(), Some(69), "{said}");
    assert!(said.contains("bridge port m-a"), "{said}");
}

/// Frames held in a pipe's delay line sit in their UMEM chunks (counted
/// as `umem_held`); deleting the pipe drops them at once as `deleted`, as
/// FreeBSD frees a deleted pipe's delay line, and gives their chunks back;
/// the books balance, and the bridge forwards on.
#[test]
fn xdp_frames_in_a_deleted_pipe_are_dropped_and_give_their_chunks_back() {
    if !ready(
        "xdp_frames_in_a_deleted_pipe_are_dropped_and_give_their_chunks_back",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "pipe 1 config delay 3000ms\n\
         add 100 pipe 1 icmp from any to any in recv m-a\n\
         add 65000 allow ip from any to any\n",
        &["--xdp", "--xdp-frames", "1024"],
        None,
    );
    if !runs_xdp(
        &bed,
        "xdp_frames_in_a_deleted_pipe_are_dropped_and_give_their_chunks_back",
    ) {
        return;
    }
    let mut arp = bed.path.a.command("ping", &["-c", "1", "-W", "1", B_ADDR]);
    run_bounded(&mut arp, Duration::from_secs(10), "first ping");
    let _ = ping(
        &bed,
        &["-c", "100", "-i", "0.01", "-W", "1", "-w", "2"],
        "pings into the pipe",
    );
    let v = bed.daemon.stats_json();
    let held = backend_counter(&v, "umem_held").unwrap_or(0);
    assert!(held >= 50, "frames sit in the pipe's delay line: {v}");
    assert_eq!(
        held,
        total(&v, "/totals/inside"),
        "one chunk per packet inside: {v}"
    );
    bed.daemon.ipfw(&["delete", "100"]);
    bed.daemon.ipfw(&["pipe", "1", "delete"]);
    let v = bed.daemon.stats_json();
    assert_eq!(
        total(&v, "/totals/inside"),
        0,
        "the deleted pipe's packets are dropped at once: {v}"
    );
    assert!(
        total(&v, "/drops_by_reason/deleted") >= held,
        "each dropped as `deleted`: {v}"
    );
    assert_eq!(
        backend_counter(&v, "umem_held"),
        Some(0),
        "their chunks are back: {v}"
    );
    let after = ping(
        &bed,
        &["-c", "3", "-i", "0.1"],
        "ping after the pipe is gone",
    );
    assert_eq!(after.lost(), 0, "{after:?}");
    let v = bed.daemon.stats_json();
    balanced(&v);
    assert_eq!(total(&v, "/totals/inside"), 0, "{v}");
    assert_eq!(backend_counter(&v, "umem_held"), Some(0), "{v}");
}

/// Receives on B what A sends, `blocks` blocks of 64 KiB over one TCP
/// connection (python3 at both ends, each with 20 s timeouts): returns
/// what B received and what A sent, each as its length and SHA-256.
fn transfer(bed: &Bed, blocks: u32) -> (String, String) {
    const SERVER: &str = "import socket, hashlib, sys\n\
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(1); s.settimeout(20)\n\
        c, _ = s.accept(); c.settimeout(20); h = hashlib.sha256(); n = 0\n\
        while True:\n    b = c.recv(1 << 20)\n    if not b: break\n    h.update(b); n += len(b)\n\
        print(n, h.hexdigest())\n";
    const CLIENT: &str = "import socket, hashlib, sys\n\
        block = bytes((i * 7 + i // 251) & 255 for i in range(1 << 16))\n\
        c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)\n\
        h = hashlib.sha256(); n = 0\n\
        for k in range(int(sys.argv[3])):\n    b = bytes([k & 255]) + block[1:]\n\
            c.sendall(b); h.update(b); n += len(b)\n\
        c.shutdown(socket.SHUT_WR); c.recv(1); c.close()\n\
        print(n, h.hexdigest())\n";
    let port = unique_port().to_string();
    let server = bed
        .path
        .b
        .command("python3", &["-c", SERVER, &port])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the receiver");
    wait_listening(&bed.path.b, port.parse().expect("a port"));
    let blocks = blocks.to_string();
    let sent = run_bounded(
        &mut bed
            .path
            .a
            .command("python3", &["-c", CLIENT, B_ADDR, &port, &blocks]),
        Duration::from_secs(30),
        "the sender",
    );
    let got = server.wait_with_output().expect("the receiver's output");
    assert!(
        got.status.success(),
        "the receiver failed: {}",
        text(&got.stderr)
    );
    (
        text(&got.stdout).trim().to_string(),
        text(&sent.stdout).trim().to_string(),
    )
}

/// An interface counter (`/sys/class/net/IF/statistics/NAME`) in `ns`.
fn link_counter(ns: &TestNs, ifname: &str, name: &str) -> u64 {
    let path = format!("/sys/class/net/{ifname}/statistics/{name}");
    let out = run_bounded(
        &mut ns.command("cat", &[&path]),
        Duration::from_secs(5),
        "read a link counter",
    );
    text(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// 32 MiB of TCP from A to B through `--xdp` on veth, which attaches in
/// generic XDP by default: every byte arrives, the far side's veth keeps
/// its GSO (its frames average far more than an MTU: super-packets), the
/// super-packets cross whole through the AF_PACKET bridge beside the
/// AF_XDP one (its `rx_gso_frames`), what is not TCP (ARP, ping) through
/// AF_XDP, and the books balance with nothing lost.
#[test]
fn xdp_generic_keeps_gso_and_tcp_arrives_whole() {
    const TEST: &str = "xdp_generic_keeps_gso_and_tcp_arrives_whole";
    if !ready(TEST, &["ip", "ping", "python3"]) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "pipe 1 config bw 0\n\
         add 100 pipe 1 ip from any to any in\n\
         add 65000 allow ip from any to any\n",
        &["--xdp"],
        None,
    );
    if !runs_xdp(&bed, TEST) {
        return;
    }
    let said = bed.daemon.log();
    assert!(
        said.contains("generic XDP") && said.contains("AF_PACKET bridge beside it"),
        "{said}"
    );
    let pinged = ping(&bed, &["-c", "3", "-i", "0.1"], "ping A→B");
    assert_eq!(pinged.lost(), 0, "{pinged:?}");
    let (p0, b0) = (
        link_counter(&bed.path.a, "a0", "tx_packets"),
        link_counter(&bed.path.a, "a0", "tx_bytes"),
    );
    let (received, sent) = transfer(&bed, 512);
    assert_eq!(received, sent, "every byte arrives, in order");
    let (p1, b1) = (
        link_counter(&bed.path.a, "a0", "tx_packets"),
        link_counter(&bed.path.a, "a0", "tx_bytes"),
    );
    let average = (b1 - b0) / (p1 - p0).max(1);
    println!("a0 sent {} frames averaging {average} bytes", p1 - p0);
    assert!(
        average > 3000,
        "a0 keeps its GSO: its frames average {average} bytes, an MTU's are 1514"
    );
    let v = bed.daemon.stats_json();
    balanced(&v);
    assert_eq!(total(&v, "/totals/dropped"), 0, "{v}");
    assert_eq!(total(&v, "/totals/inside"), 0, "{v}");
    let gso = counter_of(&v, "<->", "m-a.rx_gso_frames").unwrap_or(0);
    assert!(gso > 0, "super-packets crossed the AF_PACKET bridge: {v}");
    let xdp_rx = counter_of(&v, "AF_XDP", "m-a.rx_frames").unwrap_or(0);
    assert!(xdp_rx >= 3, "ping and ARP crossed AF_XDP: {v}");
    assert_eq!(counter_of(&v, "AF_XDP", "umem_held"), Some(0), "{v}");
}

/// `--xdp-attach driver` on veth: the far side's veth loses its GSO (the
/// kernel's veth clears it when a driver XDP program is attached to its
/// peer), so TCP crosses in segments of at most an MTU, every one through
/// AF_XDP, and the daemon says at start what that costs.
#[test]
fn xdp_driver_on_veth_says_the_far_side_segments() {
    const TEST: &str = "xdp_driver_on_veth_says_the_far_side_segments";
    if !ready(TEST, &["ip", "ping", "python3"]) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "add 65000 allow ip from any to any\n",
        &["--xdp", "--xdp-attach", "driver"],
        None,
    );
    if !runs_xdp(&bed, TEST) {
        return;
    }
    let said = bed.daemon.log();
    assert!(
        said.contains("driver XDP") && said.contains("turns off GSO on its peer"),
        "{said}"
    );
    let (p0, b0) = (
        link_counter(&bed.path.a, "a0", "tx_packets"),
        link_counter(&bed.path.a, "a0", "tx_bytes"),
    );
    let (received, sent) = transfer(&bed, 128);
    assert_eq!(received, sent, "every byte arrives, in order");
    let (p1, b1) = (
        link_counter(&bed.path.a, "a0", "tx_packets"),
        link_counter(&bed.path.a, "a0", "tx_bytes"),
    );
    let average = (b1 - b0) / (p1 - p0).max(1);
    assert!(
        average <= 1514,
        "a0 segments: its frames average {average} bytes"
    );
    let v = bed.daemon.stats_json();
    balanced(&v);
    assert_eq!(v["backends"].as_object().map(|m| m.len()), Some(1), "{v}");
}

/// Generic XDP takes an MTU no chunk holds: frames up to a chunk cross
/// through AF_XDP, longer ones through the AF_PACKET bridge, and 8000-byte
/// pings come back intact.
#[test]
fn xdp_generic_takes_jumbo_frames_through_af_packet() {
    const TEST: &str = "xdp_generic_takes_jumbo_frames_through_af_packet";
    if !ready(TEST, TOOLS) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "add 65000 allow ip from any to any\n",
        &["--xdp", "--xdp-attach", "generic"],
        Some("9000"),
    );
    for (ns, dev) in [(&bed.path.a, "a0"), (&bed.path.b, "b0")] {
        ns.ip(&["link", "set", dev, "mtu", "9000"]);
    }
    bed.path.m.ip(&["link", "set", "m-b", "mtu", "9000"]);
    if !runs_xdp(&bed, TEST) {
        return;
    }
    let got = ping(
        &bed,
        &[
            "-c", "5", "-i", "0.1", "-s", "8000", "-M", "do", "-p", "5aa5",
        ],
        "jumbo ping",
    );
    assert_eq!(got.lost(), 0, "{got:?}");
    let v = bed.daemon.stats_json();
    balanced(&v);
    let big = counter_of(&v, "<->", "m-a.rx_frames").unwrap_or(0);
    assert!(big >= 5, "the jumbo frames crossed through AF_PACKET: {v}");
}
