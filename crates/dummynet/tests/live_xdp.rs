//! `dummynet run --bridge A B --xdp` end to end, in namespaces each test
//! makes (A — M — B, veth pairs; deleted by their guards even when an
//! assertion fails): frames cross both ways intact (ping's pattern is
//! checked on every reply), ARP crosses, a pipe delays by its
//! configuration, `dummynet stats --json` balances, a UMEM held full by a
//! long delay line under a flood counts drops and does not stall, and an
//! interface AF_XDP cannot serve falls back to AF_PACKET saying why.
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

/// A backend counter (`"name": value` anywhere under `backends`).
fn backend_counter(v: &serde_json::Value, name: &str) -> Option<u64> {
    fn find(v: &serde_json::Value, name: &str) -> Option<u64> {
        match v {
            serde_json::Value::Object(m) => m
                .get(name)
                .and_then(serde_json::Value::as_u64)
                .or_else(|| m.values().find_map(|x| find(x, name))),
            serde_json::Value::Array(a) => a.iter().find_map(|x| find(x, name)),
            _ => None,
        }
    }
    find(&v["backends"], name)
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

/// An interface AF_XDP cannot serve here (an MTU whose frames do not fit
/// a UMEM chunk): `--xdp` says why and bridges with AF_PACKET.
#[test]
fn xdp_falls_back_to_af_packet_saying_why() {
    if !ready("xdp_falls_back_to_af_packet_saying_why", TOOLS) {
        return;
    }
    let _serial = serial();
    let bed = bed(
        "add 65000 allow ip from any to any\n",
        &["--xdp"],
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
/// as `umem_held`); when the pipe is deleted they still leave at their
/// time (the engine keeps what a deleted pipe holds), and their chunks
/// come back; the books balance, and the bridge forwards on.
#[test]
fn xdp_frames_in_a_deleted_pipe_leave_and_give_their_chunks_back() {
    if !ready(
        "xdp_frames_in_a_deleted_pipe_leave_and_give_their_chunks_back",
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
        "xdp_frames_in_a_deleted_pipe_leave_and_give_their_chunks_back",
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
    assert!(
        total(&v, "/totals/inside") > 0,
        "the deleted pipe's packets are still inside: {v}"
    );
    assert_eq!(
        backend_counter(&v, "umem_held"),
        Some(total(&v, "/totals/inside")),
        "in their chunks: {v}"
    );
    std::thread::sleep(Duration::from_millis(3500));
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
