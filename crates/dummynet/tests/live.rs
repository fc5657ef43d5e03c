//! The live emulator end to end, with real `ping` and `iperf3`: the seeds'
//! experiments (000: delay and BDP-sized queues; 001: per-protocol pipes,
//! per-host masks, the link to the moon; 002: CoDel and FQ-CoDel against
//! droptail with real TCP; 004: FIFO vs WF2Q+ under a UDP flood, and
//! WF2Q+'s 70/30 share) through `dummynet shell`, then
//! `dummynet run --bridge` and `dummynet run --host`, reconfiguration
//! under load, nested shells, and what a shell sets up and removes: the way
//! beyond the host (forwarding and NAT, IPv4 and IPv6), `dummynet` on PATH,
//! its command's death with it, its control socket.
//!
//! Seed 000's delay, seed 004 and reconfiguration under load are written
//! once and run in several modes ([`live_common::Testbed`]): the same
//! ipfw rules, with `{up}`/`{down}` standing for the mode's match on the
//! client's traffic and on traffic towards it, and the same `sh` script on
//! the client's side.
//!
//! Isolation: every test works inside network namespaces it creates
//! (`dnt-<pid>-<n>`, deleted by a guard even when an assertion fails); a
//! `dummynet shell` is itself started inside such a namespace, so the veth
//! it adds to its caller's namespace lands there. Traffic only goes to
//! addresses inside those namespaces: "beyond the host" is a second test
//! namespace holding 198.51.100.1 and 2001:db8:100::1 (TEST-NET-2 and the
//! documentation prefix), where the shell's namespace routes by default. Every ping has a count, every iperf3
//! run lasts at most 5 s, every wait has a deadline.
//!
//! Timing: the tests hold one lock for their whole run (see
//! [`live_common::serial`]): on a 2-vCPU machine, two bandwidth tests at once
//! would measure each other. Tolerances are stated where they are used.
//!
//! Without root, `ip`, `ping` or `iperf3`, each test prints `skipped: ...`
//! and passes.

// Each test binary compiles live_common on its own; this one does not use
// all of it.
#[allow(dead_code)]
mod live_common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use dummynet_engine::sched::bucket_of;
use dummynet_engine::FlowKey;
use live_common::*;

/// Longest a whole `dummynet shell` invocation may take.
const SHELL_LIMIT: Duration = Duration::from_secs(20);

/// Tools every test here needs.
const TOOLS: &[&str] = &["ip", "ping", "iperf3"];

/// Runs `dummynet shell OPTS -- sh -c SCRIPT` inside `ns` and returns what
/// it printed. The script finds the binary in `$DN` and the scratch
/// directory in `$OUT`; `$DUMMYNET_PEER` and `$DUMMYNET_SOCKET` come from
/// the shell.
fn shell(ns: &TestNs, scratch: &Scratch, opts: &[&str], script: &str) -> Output {
    let mut args = vec!["shell"];
    args.extend_from_slice(opts);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut cmd = ns.command(DUMMYNET, &args);
    cmd.env("DN", DUMMYNET).env("OUT", &scratch.dir);
    run_bounded(
        &mut cmd,
        SHELL_LIMIT,
        &format!("dummynet shell {}", opts.join(" ")),
    )
}

/// `shell` that must succeed; returns its stdout.
fn shell_ok(ns: &TestNs, scratch: &Scratch, opts: &[&str], script: &str) -> String {
    let out = shell(ns, scratch, opts, script);
    expect_success(&out, &format!("dummynet shell {opts:?} -- {script}"))
}

/// `|measured - expected| <= tolerance`, with a message naming `what`.
fn assert_near(what: &str, measured: f64, expected: f64, tolerance: f64) {
    assert!(
        (measured - expected).abs() <= tolerance,
        "{what}: measured {measured:.3}, expected {expected} ± {tolerance}"
    );
}

fn mbit(bps: f64) -> f64 {
    bps / 1e6
}

// ---------------------------------------------------------------------------
// Seed 000: one pipe per direction, delay and bandwidth, BDP-sized queues
// ---------------------------------------------------------------------------

/// Seed 000: `pipe 1 config delay 10ms`, `pipe 2 config delay 10ms` → ping
/// RTT 20 ms, in `mode`, with one pipe per direction as the seed has them
/// (`{up}`: the client's traffic, `{down}`: traffic towards it). The same
/// path with both delays set to 0 afterwards (through the emulator's
/// control socket) gives the RTT of the path itself.
///
/// `ping -U`: the time the reply reaches ping, not the kernel's receive
/// timestamp, which Linux takes when the frame reaches the interface: in
/// host mode that is before the INPUT hook where the `in` pipe holds it,
/// and the RTT would leave pipe 2 out (measured: 10.2 ms instead of 20.5).
/// `chrt -f 1`: see [`RT_PING`].
fn seed000_10ms_each_way_gives_20ms_rtt(mode: Mode) {
    let bed = Testbed::new(mode);
    bed.run_ok(
        "pipe 1 config delay 10ms\n\
         pipe 2 config delay 10ms\n\
         add 100 pipe 1 ip from any to any {up}\n\
         add 200 pipe 2 ip from any to any {down}\n\
         add 65000 allow ip from any to any\n",
        &format!(
            "{RT_PING} -U -c 20 -i 0.2 -W 1 $DUMMYNET_PEER > $OUT/delayed.txt && \
         \"$DN\" ipfw pipe 1 config delay 0ms && \"$DN\" ipfw pipe 2 config delay 0ms && \
         {RT_PING} -U -c 10 -i 0.1 -W 1 $DUMMYNET_PEER > $OUT/base.txt"
        ),
    );
    let delayed = Ping::parse(&bed.scratch.read("delayed.txt"));
    let base = Ping::parse(&bed.scratch.read("base.txt"));
    println!(
        "seed 000 delay, {mode:?}: RTTs {:?} ms; same path without delay: {:?} ms",
        delayed.rtts(),
        base.rtts()
    );
    assert_added_rtt(&delayed, &base, 20.0);
}

#[test]
fn seed000_shell_10ms_each_way_gives_20ms_rtt() {
    if !ready("seed000_shell_10ms_each_way_gives_20ms_rtt", TOOLS) {
        return;
    }
    let _serial = serial();
    seed000_10ms_each_way_gives_20ms_rtt(Mode::Shell);
}

#[test]
fn seed000_bridge_10ms_each_way_gives_20ms_rtt() {
    if !ready("seed000_bridge_10ms_each_way_gives_20ms_rtt", TOOLS) {
        return;
    }
    let _serial = serial();
    seed000_10ms_each_way_gives_20ms_rtt(Mode::Bridge);
}

/// In host mode both pipes hold packets in the kernel's NFQUEUE: the
/// requests on their way out of the client, the replies on their way in.
#[test]
fn seed000_host_10ms_each_way_gives_20ms_rtt() {
    let tools = Mode::Host.tools(TOOLS);
    if !ready("seed000_host_10ms_each_way_gives_20ms_rtt", &tools) {
        return;
    }
    let _serial = serial();
    seed000_10ms_each_way_gives_20ms_rtt(Mode::Host);
}

/// Checks RTTs through the emulator against the delay configured, with
/// `base` the same path with no delay (its median: the path's own RTT):
/// no loss, and [`check_added`] on every reply.
fn assert_added_rtt(delayed: &Ping, base: &Ping, expected: f64) {
    assert_eq!(delayed.lost(), 0, "{delayed:?}");
    assert_eq!(base.lost(), 0, "{base:?}");
    check_added("RTT", &delayed.rtts(), median(&base.rtts()), expected);
}

/// The emulator's share of each RTT (`rtt - base_rtt`) against `expected`:
///
/// - none early: a pipe never releases a packet before its delay (noise
///   only ever adds time, so this holds on any machine);
/// - the fastest reply at most 0.5 ms past the delay and the path's own
///   RTT: the delay is the one configured and no more (a wrong delay, one
///   applied twice or to the wrong direction, or a timer late on every
///   packet fails here);
/// - stalls: at most a tenth of the replies (at least one) more than 10 ms
///   late, and none more than 50 ms: a packet left waiting for the next
///   event (a lost wake-up) would go out with the next ping, 100-200 ms on.
///
/// The fastest reply, not the median, is held to 0.5 ms: on the 2-vCPU
/// machine with two busy loops beside the test, whole runs of replies came
/// back one scheduler slice late (host mode: 7 of 10 replies 7-8 ms late,
/// median 27.2 ms for 20; bridge mode: one 20 ms late), which is the
/// scheduler's doing, not the emulator's: the precision of its timer is
/// held by `the_default_precision_sleeps_when_idle_and_keeps_its_promise`,
/// from the daemon's own accounting. The base is subtracted because the
/// path itself costs 0.1-0.4 ms here (two veths and a user-space bridge
/// each way, more in a debug build or while other work loads the two
/// vCPUs). It is an upper bound only: a delayed packet runs at the time
/// the kernel received it, so it does not pay for the data plane's
/// wake-up on arrival, which an undelayed one does. The median and the
/// average are printed.
fn check_added(what: &str, rtts: &[f64], base_rtt: f64, expected: f64) {
    let added: Vec<f64> = rtts.iter().map(|r| r - base_rtt).collect();
    let avg = added.iter().sum::<f64>() / added.len() as f64;
    println!(
        "{what}: added by the emulator: median {:.3} ms, average {avg:.3} ms \
         (expected {expected}; path's own RTT {base_rtt:.3} ms)",
        median(&added)
    );
    let min = rtts.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        min >= expected,
        "{what}: a reply after {min} ms < {expected} ms"
    );
    assert!(
        min - expected <= base_rtt + 0.5,
        "{what}: the fastest reply is {:.3} ms past the {expected} ms delay, beyond the \
         path's own {base_rtt:.3} ms + 0.5",
        min - expected
    );
    let late: Vec<f64> = added
        .iter()
        .copied()
        .filter(|a| *a > expected + 10.0)
        .collect();
    assert!(
        late.len() <= rtts.len().div_ceil(10),
        "{what}: {} of {} replies more than 10 ms after the path's own RTT and the {expected} ms \
         delay: {late:?}",
        late.len(),
        rtts.len()
    );
    let worst = added.iter().copied().fold(f64::MIN, f64::max);
    assert!(
        worst <= expected + 50.0,
        "{what}: a reply {worst:.3} ms after the path's own RTT (expected {expected})"
    );
}

/// What one seed 000 TCP run measured.
#[derive(Debug, Clone, Copy)]
struct TcpRun {
    /// The receiver's bitrate, bit/s.
    bps: f64,
    /// Packets the emulator dropped (both pipes).
    dropped: u64,
    /// The sender's largest smoothed RTT, ms: base RTT plus queueing.
    max_rtt_ms: f64,
}

/// The TCP run of seed 000 over `up`/`down`, with BDP-sized queues or not.
/// `wire_sized`: the command's interface sends no GSO super-packets (one
/// frame per segment, as the seed's bhyve guest put on its tap).
///
/// The sender uses `-C reno`: the seed's FreeBSD guest ran NewReno, and
/// the result should not depend on the host's default (here BBR, which
/// paces at the bottleneck rate and hardly notices the queue's size).
fn seed000_tcp_run(up: &str, down: &str, wire_sized: bool) -> TcpRun {
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let port = unique_port();
    let _server = iperf3_server(&ns, port, None);
    let prep = if wire_sized {
        "ip link set dn0 gso_max_segs 1 && "
    } else {
        ""
    };
    let script = format!(
        "{prep}iperf3 -c $DUMMYNET_PEER -p {port} -t 4 -C reno -J > $OUT/tcp.json; s=$?; \
         \"$DN\" stats > $OUT/stats.txt; exit $s"
    );
    shell_ok(&ns, &scratch, &["--up", up, "--down", down], &script);
    let json = scratch.read("tcp.json");
    let stats = scratch.read("stats.txt");
    let run = TcpRun {
        bps: iperf3_received_bps(&json),
        dropped: stats_dropped(&stats),
        max_rtt_ms: iperf3_max_rtt_ms(&json),
    };
    println!(
        "seed 000 TCP, up `{up}`, down `{down}`, wire-sized {wire_sized}: {:.2} Mbit/s, \
         {} dropped, max RTT {:.1} ms\n{stats}",
        mbit(run.bps),
        run.dropped,
        run.max_rtt_ms
    );
    run
}

const SEED000_UP_BIG: &str = "delay 10ms bw 50Mbit/s queue 1000KBytes";
const SEED000_DOWN_BIG: &str = "delay 10ms bw 10Mbit/s queue 200KBytes";
const SEED000_UP: &str = "delay 10ms bw 50Mbit/s";
const SEED000_DOWN: &str = "delay 10ms bw 10Mbit/s";

/// Seed 000: 50 Mbit/s up, 10 Mbit/s down, 10 ms each way, queues of one
/// BDP (1000 KB and 200 KB) → iperf3 receives at least 44 Mbit/s (the
/// seed's 44.0; the ceiling is 50 × 1448/1500 = 48.3 Mbit/s of payload).
#[test]
fn seed000_shell_bdp_queues_reach_44mbit() {
    if !ready("seed000_shell_bdp_queues_reach_44mbit", TOOLS) {
        return;
    }
    let _serial = serial();
    let run = seed000_tcp_run(SEED000_UP_BIG, SEED000_DOWN_BIG, false);
    assert!(run.bps >= 44e6, "received {:.2} Mbit/s < 44", mbit(run.bps));
}

/// Seed 000's default queue against BDP-sized ones, `wire_sized` or not.
///
/// The default queue is 50 slots: 75 KB of 1500-byte packets, 12 ms at
/// 50 Mbit/s, less than the 125 KB BDP. So with it the same pipes must drop
/// packets, TCP must get less than with BDP-sized queues (the seed: 35.7
/// against 44.0 Mbit/s), and no packet can wait more than 12 ms in the up
/// queue: the sender's RTT stays under 20 + 12 ms plus the down pipe's
/// ACK serialisation (0.05 ms each), 40 ms with margin.
fn seed000_default_queue_vs_bdp(wire_sized: bool) {
    let big = seed000_tcp_run(SEED000_UP_BIG, SEED000_DOWN_BIG, wire_sized);
    let small = seed000_tcp_run(SEED000_UP, SEED000_DOWN, wire_sized);
    assert!(small.dropped > 0, "the 50-slot queue never overflowed");
    assert!(
        small.max_rtt_ms <= 40.0,
        "RTT reached {:.1} ms behind a 50-slot queue (at most 32 ms for \
         1500-byte packets)",
        small.max_rtt_ms
    );
    assert!(
        small.bps < big.bps,
        "default queue {:.2} Mbit/s, not below the BDP queues' {:.2}",
        mbit(small.bps),
        mbit(big.bps)
    );
}

/// Seed 000's default queue, with the command's interface sending one
/// frame per segment as the seed's guest did (measured: 44.8-46.3 against
/// 47.5 Mbit/s, about 125 drops). See the next test for the
/// shell's default.
#[test]
fn seed000_shell_default_queue_is_short_of_the_bdp() {
    if !ready("seed000_shell_default_queue_is_short_of_the_bdp", TOOLS) {
        return;
    }
    let _serial = serial();
    seed000_default_queue_vs_bdp(true);
}

/// The same with nothing set by the test: the shell itself makes both ends
/// of its path segment before sending (`gso_max_segs 1`, unless `--gso`),
/// so each of the 50 slots holds one wire packet. (Before it did, GSO
/// super-packets of up to 64 KB took one slot each: 3.2 MB behind a
/// "50-slot" queue, RTT 148 ms, and no difference from the BDP queues.)
#[test]
fn seed000_shell_default_queue_is_short_of_the_bdp_by_default() {
    if !ready(
        "seed000_shell_default_queue_is_short_of_the_bdp_by_default",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed000_default_queue_vs_bdp(false);
}

// ---------------------------------------------------------------------------
// Seed 001: per-protocol pipes, per-host masks, the link to the moon
// ---------------------------------------------------------------------------

/// Seed 001's "TCP to 2 Mbit/s, UDP to its own pipe", on the command's
/// outgoing traffic: TCP and UDP at the same time each get their own
/// pipe's rate.
///
/// The command's interface sends one frame per segment (`gso_max_segs 1`),
/// as a real link carries them: with GSO super-packets each of the 50
/// default slots holds up to 64 KB, the TCP pipe's queue grows to seconds
/// at 2 Mbit/s (measured: 3.2 MB queued, RTT 1.2 s, a 4 s run taking 7 s),
/// and the iperf3 control exchange queued behind it makes the run slow.
/// See `seed000_shell_default_queue_is_short_of_the_bdp_by_default`. Reno,
/// as in seed 000, so that the result does not depend on the host's
/// default congestion control.
#[test]
fn seed001_tcp_and_udp_get_their_own_pipes() {
    if !ready("seed001_tcp_and_udp_get_their_own_pipes", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let config = scratch.write(
        "ipfw.conf",
        "pipe 1 config bw 2Mbit/s\n\
         pipe 2 config bw 1Mbit/s\n\
         add 100 pipe 1 tcp from any to any in recv app\n\
         add 200 pipe 2 udp from any to any in recv app\n\
         add 65000 allow ip from any to any\n",
    );
    let (tcp_port, udp_port) = (unique_port(), unique_port());
    let _tcp_server = iperf3_server(&ns, tcp_port, None);
    let _udp_server = iperf3_server(&ns, udp_port, None);
    let script = format!(
        "ip link set dn0 gso_max_segs 1 || exit 99; \
         iperf3 -c $DUMMYNET_PEER -p {tcp_port} -t 4 -C reno -J > $OUT/tcp.json & \
         iperf3 -c $DUMMYNET_PEER -p {udp_port} -u -b 5M -t 4 -J > $OUT/udp.json; u=$?; \
         wait $!; t=$?; \"$DN\" ipfw show > $OUT/show.txt; [ $t = 0 ] && [ $u = 0 ]"
    );
    shell_ok(
        &ns,
        &scratch,
        &["--config", config.to_str().unwrap()],
        &script,
    );
    let tcp = iperf3_received_bps(&scratch.read("tcp.json"));
    let udp = iperf3_received_bps(&scratch.read("udp.json"));
    let show = scratch.read("show.txt");
    println!(
        "seed 001 per protocol: TCP {:.3} Mbit/s, UDP {:.3} Mbit/s\n{show}",
        mbit(tcp),
        mbit(udp)
    );
    assert!(rule_packets(&show, 100) > 0 && rule_packets(&show, 200) > 0);
    // ±15%: the pipes bill IP bytes and iperf3 counts payload (1448 of
    // 1500 for TCP, 1448 of 1476 for UDP: -3.5% and -2%), and a 4 s TCP
    // run spends part of its first second in slow start.
    assert_near("TCP Mbit/s", mbit(tcp), 2.0, 0.3);
    assert_near("UDP Mbit/s", mbit(udp), 1.0, 0.15);
}

/// Seed 001's "ADSL link to the moon": 1 s of delay each way (plus 128
/// Kbit/s up and 640 Kbit/s down, which add 5.3 + 1.1 ms for a ping) →
/// one ping's RTT between 2000 and 2100 ms.
#[test]
fn seed001_link_to_the_moon() {
    if !ready("seed001_link_to_the_moon", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let out = shell_ok(
        &ns,
        &scratch,
        &[
            "--up",
            "bw 128Kbit/s queue 10 delay 1000ms",
            "--down",
            "bw 640Kbit/s queue 30 delay 1000ms",
        ],
        "ping -c 1 -W 5 $DUMMYNET_PEER",
    );
    let ping = Ping::parse(&out);
    println!("seed 001 moon: RTT {:?} ms", ping.rtts());
    assert_eq!(ping.received, 1, "{out}");
    let rtt = ping.avg();
    assert!((2000.0..=2100.0).contains(&rtt), "RTT {rtt} ms");
}

/// Seed 001's per-host limit: `pipe 4 config bw 1Mbit/s mask dst-ip
/// 0xffffffff` gives each destination a pipe of its own. Two far addresses
/// (198.18.0.1 and .2, the benchmarking range, on `lo` of the shell's
/// caller namespace: the command's default route leads there) each get one
/// UDP flood of 3 Mbit/s. Without the mask they share 1 Mbit/s; with it
/// each gets 1 Mbit/s.
///
/// Only UDP enters the pipe: iperf3's control connection (TCP) would share
/// a queue losing 67-83% of its packets, and its end-of-test exchange could
/// then stall in retransmission back-off for tens of seconds.
#[test]
fn seed001_mask_gives_each_host_its_own_pipe() {
    if !ready("seed001_mask_gives_each_host_its_own_pipe", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let hosts = ["198.18.0.1", "198.18.0.2"];
    for h in hosts {
        ns.ip(&["addr", "add", &format!("{h}/32"), "dev", "lo"]);
    }
    let run = |mask: &str| -> [f64; 2] {
        let config = scratch.write(
            "ipfw.conf",
            &format!(
                "pipe 4 config bw 1Mbit/s {mask}\n\
                 add 100 pipe 4 udp from any to any in recv app\n\
                 add 65000 allow ip from any to any\n"
            ),
        );
        let ports = [unique_port(), unique_port()];
        // Bound to its address: an unbound UDP server would answer from
        // the address of the route back (the shell's veth), and the
        // client's connected socket would ignore that answer.
        let _servers: Vec<Proc> = (0..2)
            .map(|i| iperf3_server(&ns, ports[i], Some(hosts[i])))
            .collect();
        let script = format!(
            "iperf3 -c {h0} -p {p0} -u -b 3M -t 4 -J > $OUT/a.json & \
             iperf3 -c {h1} -p {p1} -u -b 3M -t 4 -J > $OUT/b.json; b=$?; \
             wait $!; a=$?; [ $a = 0 ] && [ $b = 0 ]",
            h0 = hosts[0],
            h1 = hosts[1],
            p0 = ports[0],
            p1 = ports[1],
        );
        shell_ok(
            &ns,
            &scratch,
            &["--config", config.to_str().unwrap()],
            &script,
        );
        let r = [
            iperf3_received_bps(&scratch.read("a.json")),
            iperf3_received_bps(&scratch.read("b.json")),
        ];
        println!(
            "seed 001 mask `{mask}`: {:.3} + {:.3} Mbit/s",
            mbit(r[0]),
            mbit(r[1])
        );
        r
    };
    // ±15% as for the per-protocol pipes (payload vs IP bytes: -2%).
    let shared = run("");
    assert_near(
        "unmasked total Mbit/s",
        mbit(shared[0] + shared[1]),
        1.0,
        0.15,
    );
    let per_host = run("mask dst-ip 0xffffffff");
    assert_near("masked, host 1, Mbit/s", mbit(per_host[0]), 1.0, 0.15);
    assert_near("masked, host 2, Mbit/s", mbit(per_host[1]), 1.0, 0.15);
}

// ---------------------------------------------------------------------------
// Seed 004: FIFO vs WF2Q+ under a UDP flood
// ---------------------------------------------------------------------------

/// The link of seed 004: 10 Mbit/s (of IP packets), 10 ms.
const SEED004_LINK_BPS: f64 = 10e6;
/// The IP packets a veth carries at most (its default MTU).
const MTU: f64 = 1500.0;

/// Seed 004's default scheduler: one FIFO for everything the client sends.
const SEED004_FIFO: &str = "add 1000 pipe 1 ip from any to any {up}\n";
/// Seed 004's WF2Q+: TCP, UDP and ICMP in queues weighted 69, 30 and 1,
/// each flow a queue of its own (`mask all`).
const SEED004_WF2Q: &str = "sched 1 config pipe 1 type wf2q+\n\
                            queue 100 config sched 1 weight 69 mask all\n\
                            queue 200 config sched 1 weight 30 mask all\n\
                            queue 300 config sched 1 weight 1 mask all\n\
                            add 1000 queue 100 tcp from any to any {up}\n\
                            add 1001 queue 200 udp from any to any {up}\n\
                            add 1002 queue 300 icmp from any to any {up}\n";

/// What one seed 004 run measured.
#[derive(Debug)]
struct Seed004Run {
    ping: Ping,
    /// The UDP flood's receiver, payload bit/s, and its datagrams' payload.
    flood_bps: f64,
    flood_blksize: u64,
    /// With TCP alongside: the receiver's payload bit/s and the MSS.
    tcp: Option<(f64, u64)>,
}

/// One run of seed 004 on `bed`: a 10 Mbit/s, 10 ms pipe on the client's
/// outgoing traffic, scheduled by `scheduler` (the rules feeding it), a
/// 4 s UDP flood (`iperf3 -u FLOOD`), 20 pings from 0.5 s on, and with
/// `with_tcp` a 4 s TCP transfer (reno, as in seed 000) alongside.
fn seed004_run(
    bed: &Testbed,
    name: &str,
    scheduler: &str,
    flood: &str,
    with_tcp: bool,
) -> Seed004Run {
    let udp_port = unique_port();
    let tcp_port = unique_port();
    // Harness, not experiment: iperf3's control connections skip the
    // bottleneck. In the FIFO one would lose half its packets to the
    // flood, and the end-of-test exchange could stall in TCP back-off.
    // The TCP data connection, to the same server port, is told apart by
    // its client port (the client's namespace has nothing else on it).
    let cport = 4999;
    let mut config = String::new();
    let mut tcp = "t=; ".to_string();
    if with_tcp {
        config = format!(
            "add 890 queue 100 tcp from any {cport} to any {tcp_port} {{up}}\n\
             add 900 allow tcp from any to any {tcp_port} {{up}}\n"
        );
        tcp = format!(
            "iperf3 -c $DUMMYNET_PEER -p {tcp_port} --cport {cport} -C reno -t 4 -J \
             > $OUT/{name}-tcp.json & t=$!; "
        );
    }
    config += &format!(
        "add 901 allow tcp from any to any {udp_port} {{up}}\n\
         pipe 1 config bw 10Mbit/s delay 10ms\n\
         {scheduler}\
         add 65000 allow ip from any to any\n"
    );
    let _udp_server = iperf3_server(&bed.far, udp_port, None);
    let _tcp_server = with_tcp.then(|| iperf3_server(&bed.far, tcp_port, None));
    // The flood starts first and outlasts the 20 pings (2 s).
    let script = format!(
        "iperf3 -c $DUMMYNET_PEER -p {udp_port} -u {flood} -t 4 -J > $OUT/{name}-flood.json \
         & f=$!; {tcp}sleep 0.5; ping -c 20 -i 0.1 -W 1 $DUMMYNET_PEER > $OUT/{name}-ping.txt; \
         wait $f || exit 91; [ -z \"$t\" ] || wait $t || exit 92"
    );
    bed.run_ok(&config, &script);
    let flood = bed.scratch.read(&format!("{name}-flood.json"));
    let r = Seed004Run {
        ping: Ping::parse(&bed.scratch.read(&format!("{name}-ping.txt"))),
        flood_bps: iperf3_received_bps(&flood),
        flood_blksize: iperf3_blksize(&flood),
        tcp: with_tcp.then(|| {
            let json = bed.scratch.read(&format!("{name}-tcp.json"));
            (iperf3_received_bps(&json), iperf3_mss(&json))
        }),
    };
    println!(
        "seed 004 {:?} {name}: ping lost {} of {}, RTTs {:?} ms; flood received \
         {:.2} Mbit/s ({} B datagrams); TCP {:?}",
        bed.mode,
        r.ping.lost(),
        r.ping.transmitted,
        r.ping.rtts(),
        mbit(r.flood_bps),
        r.flood_blksize,
        r.tcp
            .map(|(bps, mss)| format!("{:.2} Mbit/s, MSS {mss}", mbit(bps)))
    );
    r
}

/// Seed 004 in `mode`: a 10 Mbit/s, 10 ms bottleneck on the client's
/// outgoing traffic, flooded by 20 Mbit/s of UDP. With the default FIFO,
/// pings are lost (the seed: 19 of 100); with WF2Q+ and ICMP in a queue of
/// its own, none is, though TCP now runs alongside the flood. Returns the
/// WF2Q+ run for [`assert_shares_70_30`].
///
/// The FIFO's flood comes from four sockets of 5 Mbit/s: in host mode the
/// kernel charges a packet the emulator holds to its sender's socket, and
/// one UDP socket's send buffer (208 KB, about 49 packets) is less than
/// the 50-slot queue plus the delay line, so a single sender blocks rather
/// than overflow the queue (measured: 0 drops, every ping through at
/// 55 ms). The seed's flood came from another machine, which nothing held
/// back. The WF2Q+ flood is one socket of 20 Mbit/s: under `mask all` each
/// flow is a queue with its flowset's weight, and four UDP flows would
/// weigh 4 × 30.
fn seed004_wf2q_keeps_ping_alive(mode: Mode) -> Seed004Run {
    let bed = Testbed::new(mode);
    let fifo = seed004_run(&bed, "fifo", SEED004_FIFO, "-P 4 -b 5M", false);
    assert_eq!(fifo.ping.transmitted, 20);
    assert!(fifo.ping.lost() > 0, "FIFO under a flood lost no ping");
    let wf2q = seed004_run(&bed, "wf2q", SEED004_WF2Q, "-b 20M", true);
    assert_eq!(wf2q.ping.transmitted, 20);
    assert_eq!(wf2q.ping.lost(), 0, "WF2Q+ lost pings: {:?}", wf2q.ping);
    wf2q
}

/// Seed 004's "approximately 70/30" for TCP and UDP at the same time under
/// WF2Q+. The shares are compared in IP bytes, which the scheduler weighs
/// and the link bills: TCP's payload is `mss` (1448) of each 1500-byte
/// packet, UDP's is iperf3's datagram (`blksize`, sized to the path's MSS)
/// of `blksize + 28`. With 69/30 (ICMP's 1 is nearly unused) TCP's share
/// is 69/99 = 0.70; 0.60..0.78 leaves room for TCP's first round trips and
/// its sawtooth. Together they must carry 85% of the payload the link can.
fn assert_shares_70_30(mode: Mode, wf2q: &Seed004Run) {
    let (tcp_bps, mss) = wf2q.tcp.expect("the WF2Q+ run has TCP");
    let blk = wf2q.flood_blksize as f64;
    let tcp_ip = tcp_bps * MTU / mss as f64;
    let udp_ip = wf2q.flood_bps * (blk + 28.0) / blk;
    let share = tcp_ip / (tcp_ip + udp_ip);
    // The payload the link carries when split as measured.
    let ceiling =
        SEED004_LINK_BPS * (share * mss as f64 / MTU + (1.0 - share) * blk / (blk + 28.0));
    println!(
        "seed 004 {mode:?} share: TCP {:.2} + UDP {:.2} Mbit/s of payload \
         ({:.2} + {:.2} Mbit/s of IP packets, {:.0}% of the link; payload ceiling {:.2}); \
         TCP's share {share:.3}",
        mbit(tcp_bps),
        mbit(wf2q.flood_bps),
        mbit(tcp_ip),
        mbit(udp_ip),
        100.0 * (tcp_ip + udp_ip) / SEED004_LINK_BPS,
        mbit(ceiling),
    );
    assert!(
        (0.60..=0.78).contains(&share),
        "TCP's share {share:.3} of TCP+UDP is not about 69/99"
    );
    assert!(
        tcp_bps + wf2q.flood_bps >= 0.85 * ceiling,
        "TCP + UDP received {:.2} Mbit/s of payload, under 85% of the {:.2} the link carries",
        mbit(tcp_bps + wf2q.flood_bps),
        mbit(ceiling)
    );
}

#[test]
fn seed004_shell_wf2q_keeps_ping_alive_and_shares_70_30() {
    if !ready(
        "seed004_shell_wf2q_keeps_ping_alive_and_shares_70_30",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let wf2q = seed004_wf2q_keeps_ping_alive(Mode::Shell);
    assert_shares_70_30(Mode::Shell, &wf2q);
}

#[test]
fn seed004_bridge_wf2q_keeps_ping_alive_and_shares_70_30() {
    if !ready(
        "seed004_bridge_wf2q_keeps_ping_alive_and_shares_70_30",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let wf2q = seed004_wf2q_keeps_ping_alive(Mode::Bridge);
    assert_shares_70_30(Mode::Bridge, &wf2q);
}

/// Host mode: the client's TCP is the host's own. With its packets held in
/// the queue it got about 20% of the link, not 70% (Linux's TCP Small
/// Queues let a socket have only a few packets not yet freed by the stack,
/// and a held packet is not freed until it leaves its pipe; TCP alone got
/// 2.0 Mbit/s through 10 Mbit/s + 10 ms). The daemon frees each outgoing
/// original at once and sends a copy when it leaves its pipe.
#[test]
fn seed004_host_wf2q_keeps_ping_alive_and_shares_70_30() {
    let tools = Mode::Host.tools(TOOLS);
    if !ready(
        "seed004_host_wf2q_keeps_ping_alive_and_shares_70_30",
        &tools,
    ) {
        return;
    }
    let _serial = serial();
    let wf2q = seed004_wf2q_keeps_ping_alive(Mode::Host);
    assert_shares_70_30(Mode::Host, &wf2q);
}

// ---------------------------------------------------------------------------
// Bridge mode
// ---------------------------------------------------------------------------

/// `dummynet run --bridge` in the middle of A — M — B: 10 ms each way gives
/// a 20 ms RTT; `ipfw pipe 1 config delay 30ms` through the socket while a
/// ping runs moves it to 40 ms without losing a packet; `ipfw show` counts
/// the traffic; SIGTERM ends the daemon with status 0 and removes the
/// socket.
#[test]
fn bridge_delays_and_reconfigures_live() {
    if !ready("bridge_delays_and_reconfigures_live", TOOLS) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let mut daemon = path.daemon(
        "ctl",
        Some(
            "pipe 1 config delay 10ms\n\
             pipe 2 config delay 10ms\n\
             add 100 pipe 1 ip from any to any in recv m-a\n\
             add 200 pipe 2 ip from any to any in recv m-b\n\
             add 65000 allow ip from any to any\n",
        ),
        &[],
    );
    let (a, socket) = (&path.a, daemon.socket.clone());

    let ping = |count: &str| rt_ping(a, &["-c", count, "-i", "0.1", "-W", "1", B_ADDR]);
    let run_ping = |count: &str, what: &str| {
        let out = run_bounded(&mut ping(count), Duration::from_secs(10), what);
        Ping::parse(&expect_success(&out, what))
    };
    let before = run_ping("10", "ping A→B");
    println!("bridge, 10 ms each way: RTTs {:?} ms", before.rtts());

    // 20 pings 100 ms apart; the change lands after about the 10th.
    let mut cmd = ping("20");
    let running = std::thread::spawn(move || {
        run_bounded(&mut cmd, Duration::from_secs(10), "ping during the change")
    });
    std::thread::sleep(Duration::from_millis(1000));
    let t = Instant::now();
    ipfw(&socket, &["pipe", "1", "config", "delay", "30ms"]);
    println!("reconfigured in {:?}", t.elapsed());
    let out = running.join().expect("the ping thread");
    let during = Ping::parse(&expect_success(&out, "ping across the change"));
    println!("bridge, across the change: {:?}", during.replies);

    // The path's own RTT: the same bridge with no delay at all.
    ipfw(&socket, &["pipe", "1", "config", "delay", "0ms"]);
    ipfw(&socket, &["pipe", "2", "config", "delay", "0ms"]);
    let base = run_ping("10", "ping A→B without delay");
    println!("bridge, no delay: RTTs {:?} ms", base.rtts());

    assert_added_rtt(&before, &base, 20.0);
    assert_eq!(during.lost(), 0, "pings lost across the change: {during:?}");
    let base_rtt = median(&base.rtts());
    // The first and last five are well clear of the change.
    let rtts = during.rtts();
    check_added("before the change", &rtts[..5], base_rtt, 20.0);
    check_added("after the change", &rtts[rtts.len() - 5..], base_rtt, 40.0);

    let show = ipfw(&socket, &["show"]);
    println!("{show}");
    // 40 echo requests through pipe 1 and 40 replies through pipe 2 (and
    // IPv6 neighbour discovery, also IP).
    assert!(rule_packets(&show, 100) >= 40, "{show}");
    assert!(rule_packets(&show, 200) >= 40, "{show}");

    let status = daemon.proc.terminate(Duration::from_secs(5));
    assert!(
        status.success(),
        "daemon exit status after SIGTERM: {status}\n{}",
        daemon.log()
    );
    assert!(!socket.exists(), "the control socket outlived the daemon");
}

/// One change of [`reconfiguring_under_load_loses_no_queued_packet`]: the
/// ipfw command, whether it acts on stream A's queue (the pipe's own) or
/// on stream B's (queue 100), and how many packets that queue must hold
/// when it comes (for a shrink: more than the new limit).
struct Change {
    command: &'static str,
    on_pipe: bool,
    holding_more_than: u64,
}

/// Reconfiguration while traffic flows loses no queued packet, in `mode`.
///
/// Two UDP streams of 3 Mbit/s for 4 s (iperf3, 1448-byte datagrams, 259
/// a second): stream A through `pipe 1` (its own FIFO queue), stream B
/// through `queue 100` of scheduler 1 (WF2Q+) on the same link, `bw
/// 2Mbit/s delay 50ms`, 100 slots each (the most `pipe_slot_limit` allows
/// by default), so both queues fill. Every half second one ipfw command
/// changes the link (bandwidth, delay, the pipe's queue size), queue 100
/// (weight, and a limit below what it holds) or scheduler 1's type, each
/// while the queue it acts on holds packets. The last change (at 2.5 s)
/// gives the link more than the streams send, so the queues are empty for
/// the last 1.5 s and every drop is followed by datagrams the server sees.
///
/// Afterwards:
/// - `dummynet stats` balances: arrived = delivered + dropped + inside,
///   with nothing inside;
/// - every drop is one the queues counted on arrival (their `Drp` sum to
///   the engine's dropped). With no `plr`, AQM or profile configured those
///   can only be queue-full drops; a packet dropped for reason "deleted"
///   (or "unlinked-queue", "no-such-pipe") is counted by the engine alone,
///   and `dummynet stats` has no per-reason counts to ask directly;
/// - for each stream, every datagram iperf3 sent reached its queue
///   (`Tot_pkt`), and the datagrams the receiver lost are exactly that
///   queue's drops (the server counts gaps below the highest sequence
///   number it saw, hence the empty queues at the end).
fn reconfiguring_under_load_loses_no_queued_packet(mode: Mode) {
    let bed = Testbed::new(mode);
    let (port_a, port_b) = (unique_port(), unique_port());
    let _servers = [
        iperf3_server(&bed.far, port_a, None),
        iperf3_server(&bed.far, port_b, None),
    ];
    // 259 datagrams a second (of 1476 bytes) into 2 Mbit/s (169/s): each
    // queue gains 90 a second; at 1 Mbit/s (85/s), 174. Expected when each
    // change comes: A about 45, 100 (full since 0.8 s), 100, 100 (its
    // limit drops to 50: arrivals are refused until it drains below), 50;
    // B about 45, 100 (its limit drops to 30), 60, 30, 30.
    let changes = [
        Change {
            command: "pipe 1 config bw 1Mbit/s delay 80ms queue 100",
            on_pipe: true,
            holding_more_than: 0,
        },
        Change {
            command: "queue 100 config sched 1 weight 10 queue 30",
            on_pipe: false,
            holding_more_than: 30,
        },
        Change {
            command: "sched 1 config pipe 1 type fifo",
            on_pipe: false,
            holding_more_than: 0,
        },
        Change {
            command: "pipe 1 config bw 3Mbit/s delay 20ms queue 50",
            on_pipe: true,
            holding_more_than: 50,
        },
        Change {
            command: "pipe 1 config bw 10Mbit/s delay 5ms queue 50",
            on_pipe: true,
            holding_more_than: 0,
        },
    ];
    let steps: String = changes
        .iter()
        .map(|c| format!("change {}\n", c.command))
        .collect();
    let script = format!(
        "iperf3 -c $DUMMYNET_PEER -p {port_a} -u -b 3M -t 4 -J > $OUT/a.json & a=$!\n\
         iperf3 -c $DUMMYNET_PEER -p {port_b} -u -b 3M -t 4 -J > $OUT/b.json & b=$!\n\
         n=0\n\
         change() {{\n\
           sleep 0.5; n=$((n + 1))\n\
           \"$DN\" ipfw pipe 1 show > $OUT/pipe-$n.txt || exit 90\n\
           \"$DN\" ipfw queue 100 show > $OUT/queue-$n.txt || exit 90\n\
           \"$DN\" ipfw \"$@\" || exit 91\n\
         }}\n\
         {steps}\
         wait $a || exit 92; wait $b || exit 92\n\
         \"$DN\" stats > $OUT/stats.txt && \"$DN\" ipfw show > $OUT/show.txt && \
         \"$DN\" ipfw pipe 1 show > $OUT/pipe-end.txt && \
         \"$DN\" ipfw queue 100 show > $OUT/queue-end.txt\n"
    );
    let t = Instant::now();
    bed.run_ok(
        &format!(
            "pipe 1 config bw 2Mbit/s delay 50ms queue 100\n\
             sched 1 config pipe 1 type wf2q+\n\
             queue 100 config sched 1 weight 30 queue 100\n\
             add 100 pipe 1 udp from any to any {port_a} {{up}}\n\
             add 200 queue 100 udp from any to any {port_b} {{up}}\n\
             add 65000 allow ip from any to any\n"
        ),
        &script,
    );
    println!("{mode:?}: ran for {:?}", t.elapsed());
    let read = |f: &str| bed.scratch.read(f);
    for (i, c) in changes.iter().enumerate() {
        let (pipe, queue) = (
            flow_sum(&flow_rows(&read(&format!("pipe-{}.txt", i + 1)))),
            flow_sum(&flow_rows(&read(&format!("queue-{}.txt", i + 1)))),
        );
        println!(
            "before `{}`: pipe 1 holds {}, queue 100 holds {}",
            c.command, pipe.len_pkts, queue.len_pkts
        );
        let held = if c.on_pipe { pipe } else { queue }.len_pkts;
        assert!(
            held > c.holding_more_than,
            "`{}` came with {held} packets queued, not more than {}",
            c.command,
            c.holding_more_than
        );
    }
    let stats = read("stats.txt");
    let show = read("show.txt");
    let (pipe_end, queue_end) = (read("pipe-end.txt"), read("queue-end.txt"));
    println!("{stats}{show}{pipe_end}{queue_end}");
    let totals = PacketTotals::parse(&stats);
    assert_eq!(totals.inside, 0, "{stats}");
    assert_eq!(
        totals.arrived,
        totals.delivered + totals.dropped + totals.inside,
        "packets unaccounted for: {stats}"
    );
    let pipe = flow_sum(&flow_rows(&pipe_end));
    let queue = flow_sum(&flow_rows(&queue_end));
    assert_eq!(
        pipe.drops + queue.drops,
        totals.dropped,
        "drops the queues did not count (deleted, unlinked...):\n{stats}{pipe_end}{queue_end}"
    );
    for (name, json, flows, rule) in [
        ("A (pipe 1)", "a.json", pipe, 100),
        ("B (queue 100)", "b.json", queue, 200),
    ] {
        let udp = iperf3_udp_counts(&read(json));
        println!(
            "stream {name}: iperf3 sent {}, the server saw up to {} and lost {}; \
             the queue took {} and dropped {}",
            udp.sent, udp.seen, udp.lost, flows.tot_pkts, flows.drops
        );
        // Plus one: iperf3 opens a UDP stream with one 4-byte datagram of
        // its own (UDP_CONNECT_MSG), not in its counts.
        assert_eq!(
            flows.tot_pkts,
            udp.sent + 1,
            "stream {name}: datagrams sent vs packets its queue saw"
        );
        assert_eq!(rule_packets(&show, rule), udp.sent + 1, "{show}");
        assert!(flows.drops > 0, "stream {name}: its queue never overflowed");
        assert_eq!(
            udp.lost, flows.drops,
            "stream {name}: datagrams lost vs queue-full drops"
        );
    }
}

#[test]
fn bridge_reconfiguring_under_load_loses_no_queued_packet() {
    if !ready(
        "bridge_reconfiguring_under_load_loses_no_queued_packet",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    reconfiguring_under_load_loses_no_queued_packet(Mode::Bridge);
}

#[test]
fn shell_reconfiguring_under_load_loses_no_queued_packet() {
    if !ready(
        "shell_reconfiguring_under_load_loses_no_queued_packet",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    reconfiguring_under_load_loses_no_queued_packet(Mode::Shell);
}

// ---------------------------------------------------------------------------
// Host mode
// ---------------------------------------------------------------------------

/// The DUMMYNET chains the iptables programs of `ns` list.
fn dummynet_chains(ns: &TestNs) -> Vec<String> {
    let mut found = Vec::new();
    for prog in [
        "iptables-legacy",
        "ip6tables-legacy",
        "iptables-nft",
        "ip6tables-nft",
        "iptables",
        "ip6tables",
    ] {
        if find_program(prog).is_none() {
            continue;
        }
        let out = run_bounded(
            &mut ns.command(prog, &["-w", "5", "-S"]),
            Duration::from_secs(10),
            prog,
        );
        found.extend(
            text(&out.stdout)
                .lines()
                .filter(|l| l.contains("DUMMYNET"))
                .map(|l| format!("{prog}: {l}")),
        );
    }
    found
}

/// The lines of `nft list ruleset` in `ns` that name a dummynet table or
/// chain (empty without the `nft` program).
fn nft_rules(ns: &TestNs) -> Vec<String> {
    if find_program("nft").is_none() {
        return Vec::new();
    }
    let out = run_bounded(
        &mut ns.command("nft", &["list", "ruleset"]),
        Duration::from_secs(10),
        "nft list ruleset",
    );
    expect_success(&out, "nft list ruleset")
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("dummynet"))
        .map(str::to_string)
        .collect()
}

/// `nft -s list table inet dummynet-QUEUE` in `ns`, if the table exists.
fn nft_table(ns: &TestNs, queue: &str) -> Option<String> {
    let name = format!("dummynet-{queue}");
    // `-s`: without counter values, which move with any stray packet (an
    // IPv6 router solicitation) and are not part of what the table is.
    let out = run_bounded(
        &mut ns.command("nft", &["-s", "list", "table", "inet", &name]),
        Duration::from_secs(10),
        "nft list table",
    );
    out.status.success().then(|| text(&out.stdout))
}

/// `dummynet run --host --queue QUEUE` in `ns` with `config`, its control
/// socket at `socket`, and `extra` options; returns once the socket is up.
fn host_daemon(ns: &TestNs, queue: &str, config: &Path, socket: &Path, extra: &[&str]) -> Proc {
    let mut args = vec![
        "run",
        "--host",
        "--queue",
        queue,
        "--config",
        config.to_str().unwrap(),
        "--socket",
        socket.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut cmd = ns.command(DUMMYNET, &args);
    cmd.env("DUMMYNET_SOCKET", socket);
    let mut daemon = Proc::spawn(cmd, "dummynet run --host");
    wait_for_socket(socket, &mut daemon);
    daemon
}

/// `pipe 1 config delay 20ms` on C's outgoing traffic, the rest allowed.
const HOST_DELAY_20MS: &str = "pipe 1 config delay 20ms\n\
                               add 100 pipe 1 ip from any to any out\n\
                               add 65000 allow ip from any to any\n";

/// `dummynet run --host` in a client namespace C, talking to S over a
/// veth: `add pipe 1 ip from any to any out` with `delay 20ms` adds 20 ms
/// to C's pings. The rules are where `firewall` puts them and nowhere
/// else; after SIGTERM none is left and the pings still get through,
/// unshaped.
fn host_mode_delays_own_traffic_and_cleans_up(test: &str, firewall: &str) {
    let mut tools = TOOLS.to_vec();
    tools.push(if firewall == "nftables" {
        "nft"
    } else {
        "iptables"
    });
    if !ready(test, &tools) {
        return;
    }
    let _serial = serial();
    let pair = HostPair::new();
    let c = &pair.c;
    let baseline = pair.ping();
    println!("host mode, baseline RTTs {:?} ms", baseline.rtts());
    assert_eq!(baseline.lost(), 0);

    let scratch = Scratch::new();
    let config = scratch.write("ipfw.conf", HOST_DELAY_20MS);
    let socket = scratch.path("ctl.sock");
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut daemon = host_daemon(c, &queue, &config, &socket, &["--firewall", firewall]);
    let chains = dummynet_chains(c);
    let tables = nft_rules(c);
    println!("iptables: {chains:?}\nnft: {tables:?}");
    if firewall == "nftables" {
        let table = nft_table(c, &queue).expect("no nftables table while the daemon runs");
        println!("{table}");
        assert!(
            table.contains(&format!("queue num {queue} bypass")),
            "{table}"
        );
        assert!(chains.is_empty(), "iptables rules too: {chains:?}");
    } else {
        // Where the distribution's `iptables -S` shows them.
        let listed = run_ok(
            "ip",
            &["netns", "exec", &c.name, "iptables", "-w", "5", "-S"],
        );
        assert!(listed.contains(&format!("-j DUMMYNET-{queue}")), "{listed}");
        // With iptables-nft, nft sees the same rules.
        let version = run_ok("iptables", &["-V"]);
        if version.contains("nf_tables") && find_program("nft").is_some() {
            assert!(
                tables
                    .iter()
                    .any(|l| l.contains(&format!("DUMMYNET-{queue}"))),
                "{tables:?}"
            );
        }
        assert!(nft_table(c, &queue).is_none(), "an nftables table too");
    }

    let shaped = pair.ping();
    println!("host mode, delay 20ms out: RTTs {:?} ms", shaped.rtts());
    let show = ipfw(&socket, &["show"]);
    assert!(rule_packets(&show, 100) >= 10, "{show}");
    // The same interception with no delay: what the NFQUEUE round trips
    // (out and in) cost by themselves.
    ipfw(&socket, &["pipe", "1", "config", "delay", "0ms"]);
    let intercepted = pair.ping();
    println!(
        "host mode, intercepted, no delay: RTTs {:?} ms",
        intercepted.rtts()
    );
    assert_added_rtt(&shaped, &intercepted, 20.0);
    // Against the baseline without the daemon (medians, as in
    // `check_added`): 20 ms more, plus the two queue round trips (under
    // 1 ms together).
    let more = median(&shaped.rtts()) - median(&baseline.rtts());
    assert!((20.0..=21.0).contains(&more), "{more} ms more than before");

    let status = daemon.terminate(Duration::from_secs(5));
    assert!(
        status.success(),
        "daemon exit status after SIGTERM: {status}"
    );
    assert!(!socket.exists(), "the control socket outlived the daemon");
    let left = dummynet_chains(c);
    assert!(left.is_empty(), "left behind: {left:?}");
    let left = nft_rules(c);
    assert!(left.is_empty(), "left behind: {left:?}");
    let after = pair.ping();
    println!("host mode, after the daemon: RTTs {:?} ms", after.rtts());
    assert_eq!(after.lost(), 0, "traffic black-holed after the daemon left");
    assert!(median(&after.rtts()) < 5.0, "still shaped: {after:?}");
}

#[test]
fn host_mode_nftables_delays_own_traffic_and_cleans_up() {
    host_mode_delays_own_traffic_and_cleans_up(
        "host_mode_nftables_delays_own_traffic_and_cleans_up",
        "nftables",
    );
}

/// The fallback, chosen by hand as where nftables is missing.
#[test]
fn host_mode_iptables_delays_own_traffic_and_cleans_up() {
    host_mode_delays_own_traffic_and_cleans_up(
        "host_mode_iptables_delays_own_traffic_and_cleans_up",
        "iptables",
    );
}

/// A host daemon killed with SIGKILL cannot remove its rules: the kernel
/// deletes its nftables table with its netlink socket, so traffic flows
/// unshaped, and its lock dies with it, so a new daemon takes the queue.
#[test]
fn host_mode_killed_daemon_leaves_no_table_and_frees_its_queue() {
    let mut tools = TOOLS.to_vec();
    tools.push("nft");
    if !ready(
        "host_mode_killed_daemon_leaves_no_table_and_frees_its_queue",
        &tools,
    ) {
        return;
    }
    let _serial = serial();
    let pair = HostPair::new();
    let scratch = Scratch::new();
    let config = scratch.write("ipfw.conf", HOST_DELAY_20MS);
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut daemon = host_daemon(&pair.c, &queue, &config, &scratch.path("1.sock"), &[]);
    assert!(
        nft_table(&pair.c, &queue).is_some(),
        "no table: {:?}",
        nft_rules(&pair.c)
    );
    assert!(pair.ping().rtts().iter().all(|&r| r >= 20.0), "not shaped");

    daemon.child.kill().expect("SIGKILL");
    daemon.child.wait().expect("wait");
    let deadline = Instant::now() + SETUP_WAIT;
    while nft_table(&pair.c, &queue).is_some() {
        assert!(Instant::now() < deadline, "the table outlived its daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = pair.ping();
    assert_eq!(after.lost(), 0, "traffic black-holed after the kill");
    assert!(median(&after.rtts()) < 5.0, "still shaped: {after:?}");

    let socket = scratch.path("2.sock");
    let mut next = host_daemon(&pair.c, &queue, &config, &socket, &[]);
    let shaped = pair.ping();
    assert!(shaped.rtts().iter().all(|&r| r >= 20.0), "{shaped:?}");
    assert!(rule_packets(&ipfw(&socket, &["show"]), 100) >= 10);
    assert!(next.terminate(Duration::from_secs(5)).success());
}

// ---------------------------------------------------------------------------
// One daemon per port
// ---------------------------------------------------------------------------

/// Runs a second `dummynet run` in `ns` that must be refused: exit status
/// 69 (EX_UNAVAILABLE) and a message naming `what` and `holder`'s pid.
fn assert_refused(ns: &TestNs, args: &[&str], what: &str, holder: &Proc) {
    let out = run_bounded(
        &mut ns.command(DUMMYNET, args),
        Duration::from_secs(10),
        "a second dummynet run",
    );
    let err = text(&out.stderr);
    println!("{err}");
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(
        err.contains(&format!("{what} in network namespace net:[")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "already used by another dummynet daemon, pid {}",
            holder.pid()
        )),
        "{err}"
    );
}

/// A second `run --bridge` on ports a running bridge uses (in either
/// order) is refused before it opens them, and the first goes on
/// forwarding; once the first has stopped, a new one starts.
#[test]
fn a_second_bridge_on_the_same_ports_is_refused() {
    if !ready("a_second_bridge_on_the_same_ports_is_refused", TOOLS) {
        return;
    }
    let _serial = serial();
    let BridgePath {
        a,
        m,
        b: _b,
        scratch,
    } = BridgePath::new();
    let config = scratch.write(
        "ipfw.conf",
        "pipe 1 config delay 10ms\n\
         add 100 pipe 1 ip from any to any in recv m-a\n\
         add 65000 allow ip from any to any\n",
    );
    let config = config.to_str().unwrap();
    let bridge = |socket: &Path| {
        let socket = socket.to_str().unwrap().to_string();
        move |first: &str, second: &str| -> Vec<String> {
            [
                "run", "--bridge", first, second, "--config", config, "--socket", &socket,
            ]
            .map(String::from)
            .to_vec()
        }
    };
    let socket1 = scratch.path("1.sock");
    let args1 = bridge(&socket1)("m-a", "m-b");
    let args1: Vec<&str> = args1.iter().map(String::as_str).collect();
    let mut first = Proc::spawn(m.command(DUMMYNET, &args1), "first bridge");
    wait_for_socket(&socket1, &mut first);
    let ping = || {
        let out = run_bounded(
            &mut a.command("ping", &["-c", "5", "-i", "0.1", "-W", "1", "192.0.2.2"]),
            Duration::from_secs(10),
            "ping A→B",
        );
        Ping::parse(&expect_success(&out, "ping A→B"))
    };
    assert!(ping().rtts().iter().all(|&r| r >= 10.0));

    let socket2 = scratch.path("2.sock");
    for (x, y, held) in [
        ("m-a", "m-b", "interface m-a"),
        ("m-b", "m-a", "interface m-b"),
    ] {
        let args2 = bridge(&socket2)(x, y);
        let args2: Vec<&str> = args2.iter().map(String::as_str).collect();
        assert_refused(&m, &args2, held, &first);
        assert!(!socket2.exists(), "the refused daemon made its socket");
    }
    // Only the first bridge forwards: each echo request crosses pipe 1
    // once (a second reader of m-a would have sent every frame twice).
    first.assert_running();
    let before = rule_packets(&ipfw(&socket1, &["show"]), 100);
    let p = ping();
    assert_eq!(p.lost(), 0);
    assert!(p.rtts().iter().all(|&r| r >= 10.0), "{p:?}");
    let after = rule_packets(&ipfw(&socket1, &["show"]), 100);
    assert!(after - before >= 5, "{before} → {after}");

    assert!(first.terminate(Duration::from_secs(5)).success());
    let args2 = bridge(&socket2)("m-a", "m-b");
    let args2: Vec<&str> = args2.iter().map(String::as_str).collect();
    let mut next = Proc::spawn(m.command(DUMMYNET, &args2), "next bridge");
    wait_for_socket(&socket2, &mut next);
    assert!(ping().rtts().iter().all(|&r| r >= 10.0));
    assert!(next.terminate(Duration::from_secs(5)).success());
}

/// A second `run --host` on the queue a running daemon uses is refused
/// before it touches the rules: the first daemon's table stays and it goes
/// on shaping. A daemon on another queue is not refused. Once the first
/// has stopped, a new one takes the queue.
#[test]
fn a_second_host_daemon_on_the_same_queue_is_refused() {
    let mut tools = TOOLS.to_vec();
    tools.push("nft");
    if !ready("a_second_host_daemon_on_the_same_queue_is_refused", &tools) {
        return;
    }
    let _serial = serial();
    let pair = HostPair::new();
    let scratch = Scratch::new();
    let config = scratch.write("ipfw.conf", HOST_DELAY_20MS);
    let queue = (7000 + unique_port() % 1000).to_string();
    let socket1 = scratch.path("1.sock");
    let first = host_daemon(&pair.c, &queue, &config, &socket1, &[]);
    let table = nft_table(&pair.c, &queue).expect("the first daemon's table");

    let socket2 = scratch.path("2.sock");
    let args = [
        "run",
        "--host",
        "--queue",
        &queue,
        "--config",
        config.to_str().unwrap(),
        "--socket",
        socket2.to_str().unwrap(),
    ];
    for firewall in ["auto", "iptables"] {
        let mut with = args.to_vec();
        with.extend(["--firewall", firewall]);
        assert_refused(&pair.c, &with, &format!("NFQUEUE {queue}"), &first);
    }
    assert_eq!(
        nft_table(&pair.c, &queue),
        Some(table),
        "the first table changed"
    );
    let shaped = pair.ping();
    assert!(shaped.rtts().iter().all(|&r| r >= 20.0), "{shaped:?}");
    assert!(rule_packets(&ipfw(&socket1, &["show"]), 100) >= 10);

    // Another queue is another port.
    let other = (queue.parse::<u16>().expect("queue") + 1).to_string();
    let allow = scratch.write("allow.conf", "add 65000 allow ip from any to any\n");
    let mut second = host_daemon(&pair.c, &other, &allow, &socket2, &[]);
    assert!(second.terminate(Duration::from_secs(5)).success());

    let mut first = first;
    assert!(first.terminate(Duration::from_secs(5)).success());
    let socket3 = scratch.path("3.sock");
    let mut next = host_daemon(&pair.c, &queue, &config, &socket3, &[]);
    assert!(nft_table(&pair.c, &queue).is_some());
    assert!(next.terminate(Duration::from_secs(5)).success());
}

// ---------------------------------------------------------------------------
// Shells: nesting, failure, cleanliness
// ---------------------------------------------------------------------------

/// A shell inside a shell: the inner shell's far end is the outer shell's
/// command namespace, so the inner ping crosses only the inner emulator:
/// RTT = 5 + 5 = 10 ms (not 20: the outer emulator is not on that path).
/// The inner emulator's counters show the pings, and nothing is left in
/// the test namespace afterwards.
#[test]
fn shell_inside_a_shell() {
    if !ready("shell_inside_a_shell", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let links_before = ns.links();
    // The inner command pings its peer, then sets its (inner) pipes to no
    // delay and pings again for the path's own RTT.
    let inner = "echo $DUMMYNET_SOCKET > $OUT/inner-socket && \
                 ping -c 5 -i 0.2 -W 1 $DUMMYNET_PEER > $OUT/delayed.txt && \
                 \"$DN\" ipfw show > $OUT/inner-show.txt && \
                 \"$DN\" ipfw pipe 1 config delay 0ms && \"$DN\" ipfw pipe 2 config delay 0ms && \
                 ping -c 10 -i 0.1 -W 1 $DUMMYNET_PEER > $OUT/base.txt";
    let script = format!(
        "echo $DUMMYNET_SOCKET > $OUT/outer-socket; \
         \"$DN\" shell --up 'delay 5ms' --down 'delay 5ms' -- sh -c '{inner}'"
    );
    shell_ok(
        &ns,
        &scratch,
        &["--up", "delay 5ms", "--down", "delay 5ms"],
        &script,
    );
    let delayed = Ping::parse(&scratch.read("delayed.txt"));
    let base = Ping::parse(&scratch.read("base.txt"));
    println!(
        "nested shells: RTTs {:?} ms; inner pipes without delay: {:?} ms",
        delayed.rtts(),
        base.rtts()
    );
    assert_added_rtt(&delayed, &base, 10.0);
    let show = scratch.read("inner-show.txt");
    assert!(rule_packets(&show, 100) >= 5, "{show}");
    assert!(rule_packets(&show, 200) >= 5, "{show}");
    let gone = ns.wait_links(&links_before, Duration::from_secs(2));
    println!("the shell's veth was gone {gone:?} after it exited");
    for f in ["outer-socket", "inner-socket"] {
        let sock = scratch.read(f);
        let sock = Path::new(sock.trim());
        assert!(!sock.exists(), "{} left behind", sock.display());
    }
}

/// `dummynet shell -- /nonexistent`: a non-zero status, a message naming
/// the command, and no interface left behind.
#[test]
fn shell_with_a_missing_command_fails_cleanly() {
    if !ready("shell_with_a_missing_command_fails_cleanly", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let links_before = ns.links();
    let out = run_bounded(
        &mut ns.command(DUMMYNET, &["shell", "--", "/nonexistent"]),
        SHELL_LIMIT,
        "dummynet shell -- /nonexistent",
    );
    let stderr = text(&out.stderr);
    println!("status {}, stderr: {stderr}", out.status);
    assert!(!out.status.success());
    assert!(
        stderr.contains("/nonexistent") && stderr.contains("No such file"),
        "unclear message: {stderr}"
    );
    let gone = ns.wait_links(&links_before, Duration::from_secs(2));
    println!("the shell's veth was gone {gone:?} after it exited");
}

/// The command's exit status is the shell's.
#[test]
fn shell_passes_the_command_status_on() {
    if !ready("shell_passes_the_command_status_on", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let out = run_bounded(
        &mut ns.command(DUMMYNET, &["shell", "--", "sh", "-c", "exit 7"]),
        SHELL_LIMIT,
        "dummynet shell -- sh -c 'exit 7'",
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
}

/// `dummynet shell` with no command runs `$SHELL` behind the link, as
/// mahimahi's shells do, and passes its status on.
#[test]
fn shell_without_a_command_runs_the_users_shell() {
    if !ready("shell_without_a_command_runs_the_users_shell", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let login = scratch.write(
        "login.sh",
        "#!/bin/sh\necho \"$DUMMYNET_PEER\" > \"$OUT/peer\"\nexit 6\n",
    );
    std::fs::set_permissions(&login, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the script executable");
    let mut cmd = ns.command(DUMMYNET, &["shell", "--up", "delay 1ms"]);
    cmd.env("SHELL", &login).env("OUT", &scratch.dir);
    let out = run_bounded(&mut cmd, SHELL_LIMIT, "dummynet shell (no command)");
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    let peer = scratch.read("peer");
    assert!(
        peer.trim().starts_with("100."),
        "$DUMMYNET_PEER inside: {peer:?}"
    );
}

// ---------------------------------------------------------------------------
// Shells: beyond the host (forwarding and NAT), PATH, SIGKILL, sockets
// ---------------------------------------------------------------------------

/// The server "outside" a host, over IPv4 and IPv6 (TEST-NET-2 and the
/// documentation prefix: nothing on the machine routes them elsewhere).
const OUTSIDE_V4: &str = "198.51.100.1";
const OUTSIDE_V6: &str = "2001:db8:100::1";

/// A host namespace, where `dummynet shell` runs, whose default routes
/// lead to an `outside` namespace holding [`OUTSIDE_V4`] and
/// [`OUTSIDE_V6`]. The outside has no route back to the shells' private
/// addresses (100.64.0.0/10, fd64:646e::/32): a command's packets come
/// back only if the host forwarded and masqueraded them.
struct World {
    host: TestNs,
    outside: TestNs,
}

impl World {
    fn new() -> World {
        let world = World {
            host: TestNs::new(),
            outside: TestNs::new(),
        };
        veth(&world.host, "wan0", &world.outside, "srv0");
        world
            .host
            .ip(&["addr", "add", "198.51.100.2/24", "dev", "wan0"]);
        world
            .outside
            .ip(&["addr", "add", "198.51.100.1/24", "dev", "srv0"]);
        world
            .host
            .ip(&["addr", "add", "2001:db8:100::2/64", "dev", "wan0", "nodad"]);
        world
            .outside
            .ip(&["addr", "add", "2001:db8:100::1/64", "dev", "srv0", "nodad"]);
        world
            .host
            .ip(&["route", "add", "default", "via", OUTSIDE_V4]);
        world
            .host
            .ip(&["-6", "route", "add", "default", "via", OUTSIDE_V6]);
        world
    }
}

/// `sysctl -n NAME` in `ns`.
fn sysctl_in(ns: &TestNs, name: &str) -> String {
    run_ok("ip", &["netns", "exec", &ns.name, "sysctl", "-n", name])
        .trim()
        .to_string()
}

/// The forwarding settings a shell changes in the namespace it runs in.
fn forwarding_state(ns: &TestNs) -> Vec<(String, String)> {
    let mut names = vec![
        "net.ipv4.ip_forward".to_string(),
        "net.ipv6.conf.all.forwarding".to_string(),
    ];
    for link in ns.links().into_iter().filter(|l| l != "lo") {
        let ff = format!("/proc/sys/net/ipv6/conf/{link}/force_forwarding");
        if Path::new(&ff).exists() {
            names.push(format!("net.ipv6.conf.{link}.force_forwarding"));
        }
    }
    names
        .into_iter()
        .map(|n| {
            let v = sysctl_in(ns, &n);
            (n, v)
        })
        .collect()
}

/// What shells left in `ns`'s firewall: their nft tables, and their
/// iptables chains if iptables is installed.
fn nat_leftovers(ns: &TestNs) -> Vec<String> {
    let mut left: Vec<String> = run_ok("ip", &["netns", "exec", &ns.name, "nft", "list", "tables"])
        .lines()
        .filter(|l| l.contains("dummynet-shell-"))
        .map(String::from)
        .collect();
    for ipt in ["iptables", "ip6tables"] {
        if find_program(ipt).is_some() {
            let rules = run_ok(
                "ip",
                &["netns", "exec", &ns.name, ipt, "-w", "-t", "nat", "-S"],
            );
            left.extend(
                rules
                    .lines()
                    .filter(|l| l.contains("DN-SHELL-"))
                    .map(|l| format!("{ipt}: {l}")),
            );
        }
    }
    left
}

/// Asserts that `ping`'s output in `file` has all `count` replies, none
/// sooner than `min_rtt` ms (the emulator's delay on the way).
fn assert_pinged(scratch: &Scratch, file: &str, count: u32, min_rtt: f64) {
    let ping = Ping::parse(&scratch.read(file));
    println!("{file}: RTTs {:?} ms", ping.rtts());
    assert_eq!(ping.received, count, "{file}: {ping:?}");
    for rtt in ping.rtts() {
        assert!(
            rtt >= min_rtt,
            "{file}: an RTT of {rtt} ms, under {min_rtt}"
        );
    }
}

/// The command reaches a server beyond the host over IPv4 and IPv6, through
/// the emulated link (5 ms each way), with the host forwarding and
/// masquerading for it with `nat` ("nft" or "iptables"); once the shell
/// has exited, its rules are gone and forwarding is as it was.
fn shell_reaches_the_outside(nat: &str) {
    let _serial = serial();
    let world = World::new();
    let scratch = Scratch::new();
    let links_before = world.host.links();
    let forwarding_before = forwarding_state(&world.host);
    let script = format!(
        "ping -c 3 -i 0.2 -W 2 {OUTSIDE_V4} > $OUT/v4.txt; \
         ping -6 -c 3 -i 0.2 -W 2 {OUTSIDE_V6} > $OUT/v6.txt; \
         echo \"$DUMMYNET_ADDR6\" > $OUT/addr6"
    );
    shell_ok(
        &world.host,
        &scratch,
        &["--nat", nat, "--up", "delay 5ms", "--down", "delay 5ms"],
        &script,
    );
    assert_pinged(&scratch, "v4.txt", 3, 10.0);
    assert_pinged(&scratch, "v6.txt", 3, 10.0);
    let addr6 = scratch.read("addr6");
    assert!(
        addr6.starts_with("fd64:646e:"),
        "$DUMMYNET_ADDR6: {addr6:?}"
    );
    assert_eq!(nat_leftovers(&world.host), Vec::<String>::new());
    assert_eq!(forwarding_state(&world.host), forwarding_before);
    world.host.wait_links(&links_before, Duration::from_secs(2));
}

#[test]
fn shell_reaches_the_outside_over_ipv4_and_ipv6() {
    if !ready(
        "shell_reaches_the_outside_over_ipv4_and_ipv6",
        &["ip", "ping", "nft", "sysctl"],
    ) {
        return;
    }
    shell_reaches_the_outside("nft");
}

#[test]
fn shell_reaches_the_outside_with_iptables_too() {
    if !ready(
        "shell_reaches_the_outside_with_iptables_too",
        &["ip", "ping", "nft", "iptables", "ip6tables", "sysctl"],
    ) {
        return;
    }
    shell_reaches_the_outside("iptables");
}

/// Without NAT (`--nat off`), the outside is out of reach (its replies have
/// no way back) while the shell's peer is not: the test above does not
/// pass by accident.
#[test]
fn shell_without_nat_reaches_only_its_peer() {
    if !ready(
        "shell_without_nat_reaches_only_its_peer",
        &["ip", "ping", "nft", "sysctl"],
    ) {
        return;
    }
    let _serial = serial();
    let world = World::new();
    let scratch = Scratch::new();
    let forwarding_before = forwarding_state(&world.host);
    let script = format!(
        "ping -c 1 -W 1 $DUMMYNET_PEER > $OUT/peer.txt; \
         ping -c 2 -i 0.2 -W 1 {OUTSIDE_V4} > $OUT/v4.txt; exit 0"
    );
    shell_ok(&world.host, &scratch, &["--nat", "off"], &script);
    assert_pinged(&scratch, "peer.txt", 1, 0.0);
    assert_eq!(Ping::parse(&scratch.read("v4.txt")).received, 0);
    assert_eq!(forwarding_state(&world.host), forwarding_before);
}

/// The rules go with the shell when its command cannot even start, and when
/// the shell is stopped by SIGTERM while its command runs.
#[test]
fn shell_nat_is_removed_on_failure_and_on_sigterm() {
    if !ready(
        "shell_nat_is_removed_on_failure_and_on_sigterm",
        &["ip", "ping", "nft", "sysctl"],
    ) {
        return;
    }
    let _serial = serial();
    let world = World::new();
    let scratch = Scratch::new();
    let links_before = world.host.links();
    let forwarding_before = forwarding_state(&world.host);
    let out = run_bounded(
        &mut world
            .host
            .command(DUMMYNET, &["shell", "--", "/nonexistent"]),
        SHELL_LIMIT,
        "dummynet shell -- /nonexistent",
    );
    assert!(!out.status.success(), "{}", text(&out.stderr));
    assert_eq!(nat_leftovers(&world.host), Vec::<String>::new());
    assert_eq!(forwarding_state(&world.host), forwarding_before);

    let mut cmd = world.host.command(
        DUMMYNET,
        &[
            "shell",
            "--",
            "sh",
            "-c",
            "echo up > $OUT/up; exec sleep 20",
        ],
    );
    cmd.env("OUT", &scratch.dir);
    let mut shell = Proc::spawn(cmd, "dummynet shell -- sleep");
    wait_for_file(&scratch.path("up"), &mut shell);
    let during = nat_leftovers(&world.host);
    assert_eq!(
        during.len(),
        1,
        "the shell's table while it runs: {during:?}"
    );
    assert_eq!(sysctl_in(&world.host, "net.ipv4.ip_forward"), "1");
    shell.terminate(Duration::from_secs(10));
    assert_eq!(nat_leftovers(&world.host), Vec::<String>::new());
    assert_eq!(forwarding_state(&world.host), forwarding_before);
    world.host.wait_links(&links_before, Duration::from_secs(2));
}

/// Waits (bounded) until `path` exists, failing early if `proc` exits.
fn wait_for_file(path: &Path, proc: &mut Proc) {
    let deadline = Instant::now() + SETUP_WAIT;
    while !path.exists() {
        proc.assert_running();
        assert!(
            Instant::now() < deadline,
            "{} did not appear within {SETUP_WAIT:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell inside a shell reaches the outer shell's peer (through both
/// emulators: 3 + 5 ms each way) and, through both NATs, the outside; the
/// inner `dummynet` is found on PATH.
#[test]
fn nested_shell_reaches_the_outer_peer_and_the_outside() {
    if !ready(
        "nested_shell_reaches_the_outer_peer_and_the_outside",
        &["ip", "ping", "nft", "sysctl"],
    ) {
        return;
    }
    let _serial = serial();
    let world = World::new();
    let scratch = Scratch::new();
    let inner = format!(
        "ping -c 3 -i 0.2 -W 2 $OUTER_PEER > $OUT/outer-peer.txt; \
         ping -c 3 -i 0.2 -W 2 $OUTER_PEER6 > $OUT/outer-peer6.txt; \
         ping -c 3 -i 0.2 -W 2 {OUTSIDE_V4} > $OUT/v4.txt; \
         ping -6 -c 3 -i 0.2 -W 2 {OUTSIDE_V6} > $OUT/v6.txt"
    );
    let script = format!(
        "OUTER_PEER=$DUMMYNET_PEER OUTER_PEER6=$DUMMYNET_PEER6 \
         dummynet shell --up 'delay 3ms' --down 'delay 3ms' -- sh -c '{inner}'"
    );
    shell_ok(
        &world.host,
        &scratch,
        &["--up", "delay 5ms", "--down", "delay 5ms"],
        &script,
    );
    for f in ["outer-peer.txt", "outer-peer6.txt", "v4.txt", "v6.txt"] {
        assert_pinged(&scratch, f, 3, 16.0);
    }
    assert_eq!(nat_leftovers(&world.host), Vec::<String>::new());
}

/// Inside the shell `dummynet` is on PATH even when the caller's PATH does
/// not have it, and talks to the shell's own emulator: with `--preset lte
/// --up "delay 50ms"`, pipe 1 has lte's uplink bandwidth and the new delay,
/// as the shell printed at start.
#[test]
fn dummynet_is_on_path_inside_and_sees_the_merged_preset() {
    if !ready(
        "dummynet_is_on_path_inside_and_sees_the_merged_preset",
        &["ip", "nft", "sysctl"],
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let mut cmd = ns.command(
        DUMMYNET,
        &[
            "shell",
            "--preset",
            "lte",
            "--up",
            "delay 50ms",
            "--",
            "sh",
            "-c",
            "command -v dummynet > $OUT/which && dummynet ipfw pipe 1 show > $OUT/pipe1",
        ],
    );
    cmd.env(
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    )
    .env("OUT", &scratch.dir);
    let out = run_bounded(
        &mut cmd,
        SHELL_LIMIT,
        "dummynet shell --preset lte --up 'delay 50ms'",
    );
    let stderr = text(&out.stderr);
    expect_success(&out, "dummynet shell --preset lte --up 'delay 50ms'");
    let which = scratch.read("which");
    let found = Path::new(which.trim())
        .canonicalize()
        .unwrap_or_else(|e| panic!("`command -v dummynet` said {which:?}: {e}"));
    let ours = Path::new(DUMMYNET)
        .canonicalize()
        .expect("the binary under test");
    assert_eq!(found, ours);
    let pipe1 = scratch.read("pipe1");
    println!("stderr:\n{stderr}\npipe 1 inside:\n{pipe1}");
    // The shell's one line per pipe, and pipe 1 as `ipfw pipe 1 show` says it.
    assert!(stderr.contains("up (pipe 1): 10Mbit/s, 50 ms,"), "{stderr}");
    assert!(pipe1.contains("10.000 Mbit/s   50 ms"), "{pipe1}");
    assert!(
        stderr.contains("down (pipe 2): 50Mbit/s, 50 ms,"),
        "down is lte's: {stderr}"
    );
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
fn exited(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// SIGKILL of `dummynet shell` kills its command too (within 5 s), and the
/// next shell started there removes what the killed one left: its NAT
/// table and forwarding.
#[test]
fn sigkill_of_the_shell_kills_its_command() {
    if !ready(
        "sigkill_of_the_shell_kills_its_command",
        &["ip", "nft", "sysctl"],
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let forwarding_before = forwarding_state(&ns);
    let mut cmd = ns.command(
        DUMMYNET,
        &[
            "shell",
            "--",
            "sh",
            "-c",
            "echo $$ > $OUT/pid.tmp && mv $OUT/pid.tmp $OUT/pid && exec sleep 30",
        ],
    );
    cmd.env("OUT", &scratch.dir);
    let mut shell = Proc::spawn(cmd, "dummynet shell -- sleep 30");
    wait_for_file(&scratch.path("pid"), &mut shell);
    let pid: i32 = scratch
        .read("pid")
        .trim()
        .parse()
        .expect("the command wrote its pid");
    assert!(!exited(pid), "the command {pid} is not running");
    nix::sys::signal::kill(shell.pid(), nix::sys::signal::Signal::SIGKILL).expect("SIGKILL");
    let _ = shell.child.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !exited(pid) {
        assert!(
            Instant::now() < deadline,
            "the command {pid} outlived its shell by 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The killed shell could not clean up; the next one does.
    assert_eq!(nat_leftovers(&ns).len(), 1, "{:?}", nat_leftovers(&ns));
    let out = run_bounded(
        &mut ns.command(DUMMYNET, &["shell", "--", "true"]),
        SHELL_LIMIT,
        "dummynet shell -- true",
    );
    expect_success(&out, "dummynet shell -- true");
    assert_eq!(nat_leftovers(&ns), Vec::<String>::new());
    assert_eq!(forwarding_state(&ns), forwarding_before);
}

/// `--socket`: a socket file nobody listens on (a killed daemon's) is
/// replaced; a regular file is refused with a clear message and kept; so
/// is a socket someone listens on.
#[test]
fn shell_replaces_a_stale_socket_but_not_a_file() {
    if !ready(
        "shell_replaces_a_stale_socket_but_not_a_file",
        &["ip", "nft", "sysctl"],
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let stale = scratch.path("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind a socket"));
    assert!(stale.exists());
    let stale_arg = stale.to_str().expect("a UTF-8 scratch path");
    let out = run_bounded(
        &mut ns.command(
            DUMMYNET,
            &[
                "shell",
                "--socket",
                stale_arg,
                "--",
                "sh",
                "-c",
                "dummynet ipfw pipe 1 show",
            ],
        ),
        SHELL_LIMIT,
        "dummynet shell --socket STALE",
    );
    let shown = expect_success(&out, "dummynet shell --socket STALE");
    assert!(shown.contains("00001:"), "{shown}");
    assert!(!stale.exists(), "the shell left its socket behind");

    let file = scratch.write("file.sock", "keep me\n");
    let file_arg = file.to_str().expect("a UTF-8 scratch path");
    let links_before = ns.links();
    let out = run_bounded(
        &mut ns.command(DUMMYNET, &["shell", "--socket", file_arg, "--", "true"]),
        SHELL_LIMIT,
        "dummynet shell --socket FILE",
    );
    let stderr = text(&out.stderr);
    println!("status {}, stderr: {stderr}", out.status);
    assert!(!out.status.success());
    assert!(
        stderr.contains(file_arg) && stderr.contains("not a socket"),
        "unclear message: {stderr}"
    );
    assert_eq!(scratch.read("file.sock"), "keep me\n");
    assert_eq!(nat_leftovers(&ns), Vec::<String>::new());
    ns.wait_links(&links_before, Duration::from_secs(2));

    let live = scratch.path("live.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&live).expect("bind a socket");
    let live_arg = live.to_str().expect("a UTF-8 scratch path");
    let out = run_bounded(
        &mut ns.command(DUMMYNET, &["shell", "--socket", live_arg, "--", "true"]),
        SHELL_LIMIT,
        "dummynet shell --socket LIVE",
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("already listening"),
        "unclear message: {stderr}"
    );
    assert!(live.exists(), "a live socket was removed");
}

/// The number after `before` in `text` (up to the next space or `%`).
fn number_after(text: &str, before: &str) -> f64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("no `{before}` in:\n{text}"));
    let rest = &text[at + before.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|e| panic!("`{before}` in {text}: {e}"))
}

/// At the default precision an idle shell sleeps (under 2% of a core over
/// 2 s of nothing), and under pings its releases stay precise: the median
/// lateness is well under the 1 ms of a tick-based timer. (Not compared with
/// the timer's own recent wake-ups: on a shared CI machine the two are
/// measured over different windows, and a neighbour's burst moves one
/// without the other.)
#[test]
fn the_default_precision_sleeps_when_idle_and_keeps_its_promise() {
    if !ready(
        "the_default_precision_sleeps_when_idle_and_keeps_its_promise",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let link = ["--up", "delay 10ms", "--down", "delay 10ms"];
    // Long enough that start-up (~0.05 s of CPU) is a small share even on a loaded machine.
    let idle = shell(&ns, &scratch, &link, "sleep 5");
    let cost = text(&idle.stderr);
    assert!(idle.status.success(), "{cost}");
    let share = number_after(&cost, "s (");
    println!("idle shell: {cost}");
    assert!(share < 2.0, "an idle shell used {share}% of a core: {cost}");
    assert!(cost.contains("precision timer"), "{cost}");

    let stats = shell_ok(
        &ns,
        &scratch,
        &link,
        "ping -q -c 200 -i 0.01 $DUMMYNET_PEER >/dev/null && $DN stats",
    );
    println!("{stats}");
    let p50 = number_after(&stats, "hand-overs: p50 ");
    let timer_median = number_after(&stats, "timer lately wakes ");
    assert!(
        p50 < 1000.0,
        "median release lateness {p50} us: not better than a 1 ms tick"
    );
    assert!(
        timer_median < 1000.0,
        "the precision timer wakes {timer_median} us late (median): not better than a 1 ms tick"
    );
}

/// A bridge counter from `dummynet stats` (`app.rx_gso_frames 12`); 0 when
/// it is not shown (only non-zero counters are).
fn stats_counter(stats: &str, name: &str) -> u64 {
    let key = format!("{name} ");
    stats
        .find(&key)
        .map_or(0, |_| number_after(stats, &key) as u64)
}

/// `--gso auto` follows the configuration: TCP's super-packets cross whole
/// while the pipes only delay; once `ipfw` gives a pipe a bandwidth, the
/// command's end segments before sending (`gso_max_segs 1`), so the pipe
/// bills and queues each wire packet; with the bandwidth gone, whole again.
#[test]
fn super_packets_cross_whole_only_while_every_pipe_only_delays() {
    if !ready(
        "super_packets_cross_whole_only_while_every_pipe_only_delays",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let (port, port2) = (unique_port(), unique_port());
    let _server = iperf3_server(&ns, port, None);
    let _server2 = iperf3_server(&ns, port2, None);
    let script = format!(
        "segs() {{ ip -d link show dn0 | sed -n 's/.*gso_max_segs \\([0-9]*\\).*/\\1/p'; }}; \
         settle() {{ for i in $(seq 1 100); do [ \"$(segs)\" = \"$1\" ] && return 0; sleep 0.02; done; }}; \
         segs > $OUT/segs0; \
         iperf3 -c $DUMMYNET_PEER -p {port} -t 1 -J > $OUT/whole.json || exit 97; \
         \"$DN\" stats > $OUT/whole.txt; \
         \"$DN\" ipfw pipe 1 config bw 20Mbit/s delay 5ms || exit 98; \
         settle 1; segs > $OUT/segs1; \
         \"$DN\" stats > $OUT/before.txt; \
         iperf3 -c $DUMMYNET_PEER -p {port2} -t 2 -J > $OUT/limited.json || exit 97; \
         \"$DN\" stats > $OUT/after.txt; \
         \"$DN\" ipfw pipe 1 config bw 0 delay 5ms || exit 96; \
         settle 65535; segs > $OUT/segs2"
    );
    shell_ok(
        &ns,
        &scratch,
        &["--up", "delay 5ms", "--down", "delay 5ms"],
        &script,
    );
    let segs = |f: &str| scratch.read(f).trim().to_string();
    let (whole, before, after) = (
        scratch.read("whole.txt"),
        scratch.read("before.txt"),
        scratch.read("after.txt"),
    );
    println!("{whole}\n{after}");
    assert_eq!(segs("segs0"), "65535", "delay only: whole");
    assert!(
        stats_counter(&whole, "app.rx_gso_frames") > 0,
        "TCP through delay-only pipes sent no super-packet"
    );
    assert_eq!(
        segs("segs1"),
        "1",
        "with a bandwidth: one frame per segment"
    );
    assert_eq!(
        stats_counter(&after, "app.rx_gso_frames"),
        stats_counter(&before, "app.rx_gso_frames"),
        "super-packets reached a pipe with a bandwidth"
    );
    let limited = iperf3_received_bps(&scratch.read("limited.json"));
    assert!(
        limited < 20e6,
        "{:.2} Mbit/s through 20 Mbit/s",
        mbit(limited)
    );
    assert_eq!(segs("segs2"), "65535", "delay only again: whole");
}

// ---------------------------------------------------------------------------
// Seed 002: CoDel and FQ-CoDel with real TCP
// ---------------------------------------------------------------------------

/// Seed 002's bottleneck: 10 Mbit/s each way (of IP packets).
const SEED002_LINK_BPS: f64 = 10e6;
/// The seed's 1000-packet buffer, in bytes (about 680 full packets: the
/// pipe's slot limit is 100, its byte limit 1 MiB). CoDel runs and
/// droptail runs get the same buffer, so the AQM is the only difference.
const SEED002_BUFFER: &str = "queue 1000KBytes";

/// What one seed 002 run measured.
#[derive(Debug)]
struct Seed002Run {
    /// Every TCP client's report (`iperf3 -J`), in start order.
    tcp: Vec<String>,
    /// The pings sent through the bottleneck while TCP ran.
    ping: Ping,
    /// `dummynet stats` at the end of the run.
    stats: String,
}

impl Seed002Run {
    /// The ping RTTs' median, ms.
    fn ping_median(&self) -> f64 {
        // Behind a full droptail buffer some pings are dropped with the
        // TCP packets (seen: up to 8 of 25); the rest still tell the
        // queue's delay.
        assert!(
            self.ping.received >= self.ping.transmitted / 3,
            "most pings lost under load: {:?}",
            self.ping
        );
        median(&self.ping.rtts())
    }

    /// The TCP flows whose FQ-CoDel bucket (of `buckets`) the pings share,
    /// in either direction: the echo requests with the data, or the replies
    /// with the ACKs. The hash is fixed (`dummynet_engine::sched::bucket_of`)
    /// but each run's ephemeral ports are not, so about one run in
    /// `buckets / flows` finds a collision.
    fn ping_shares_bucket(&self, buckets: u32) -> Vec<usize> {
        let key = |src, sport, dst, dport, proto| {
            bucket_of(&FlowKey::v4(src, dst, proto, sport, dport), buckets)
        };
        const ICMP: u8 = 1;
        const TCP: u8 = 6;
        self.tcp
            .iter()
            .enumerate()
            .filter(|(_, json)| {
                let (client, cport, server, sport) = iperf3_connection(json);
                let (up, down) = (
                    key(client, 0, server, 0, ICMP),
                    key(server, 0, client, 0, ICMP),
                );
                key(client, cport, server, sport, TCP) == up
                    || key(server, sport, client, cport, TCP) == down
            })
            .map(|(k, _)| k)
            .collect()
    }
}

/// One seed 002 run on `bed` with the ipfw commands `config` (a
/// [`Testbed::rules`] template): TCP clients (`iperf3 -C cc`) started at
/// `starts` seconds, each lasting `secs` s (iperf3 takes whole seconds),
/// and `pings` pings every 0.1 s from `ping_at` s, all through the
/// bottleneck. `prep` runs first in the client's namespace.
#[allow(clippy::too_many_arguments)]
fn seed002_run(
    bed: &Testbed,
    name: &str,
    config: &str,
    prep: &str,
    cc: &str,
    starts: &[f64],
    secs: u32,
    ping_at: f64,
    pings: u32,
) -> Seed002Run {
    let ports: Vec<u16> = starts.iter().map(|_| unique_port()).collect();
    let _servers: Vec<Proc> = ports
        .iter()
        .map(|&p| iperf3_server_json(&bed.far, p))
        .collect();
    // Each client sleeps until its start; the server's report (0.5 s
    // intervals) gives [`iperf3_span_bps`] what arrived when.
    let mut script = format!("{prep}pids=; ");
    for (k, (&start, port)) in starts.iter().zip(&ports).enumerate() {
        script += &format!(
            "(sleep {start}; exec iperf3 -c $DUMMYNET_PEER -p {port} -t {secs} -C {cc} -J --get-server-output \
             > $OUT/tcp{k}.json) & pids=\"$pids $!\"; "
        );
    }
    // `-U`: the time the reply reaches ping, after the host mode's `in`
    // pipe (plain ping stamps it as it reaches the interface, before);
    // `chrt -f 1`: see [`RT_PING`].
    script += &format!(
        "sleep {ping_at}; {RT_PING} -U -c {pings} -i 0.1 -W 2 $DUMMYNET_PEER > $OUT/ping.txt; \
         s=0; for p in $pids; do wait $p || s=1; done; \"$DN\" stats > $OUT/stats.txt; exit $s"
    );
    bed.run_ok(config, &script);
    let run = Seed002Run {
        tcp: (0..starts.len())
            .map(|k| bed.scratch.read(&format!("tcp{k}.json")))
            .collect(),
        ping: Ping::parse(&bed.scratch.read("ping.txt")),
        stats: bed.scratch.read("stats.txt"),
    };
    let rates: Vec<String> = run
        .tcp
        .iter()
        .map(|j| format!("{:.2}", mbit(iperf3_received_bps(j))))
        .collect();
    println!(
        "seed 002 {:?} {name}: TCP {} Mbit/s; ping lost {} of {}, median {:.1} ms, RTTs {:?}\n{}",
        bed.mode,
        rates.join(" + "),
        run.ping.lost(),
        run.ping.transmitted,
        median(&run.ping.rtts()),
        run.ping.rtts(),
        run.stats
    );
    run
}

/// Seed 002's CoDel config: pipe 1 up and pipe 2 down, each configured
/// with `link` (the seed's router ran its AQM on the bottleneck in each
/// direction).
fn seed002_pipes(link: &str) -> String {
    format!(
        "pipe 1 config {link}\n\
         pipe 2 config {link}\n\
         add 100 pipe 1 ip from any to any {{up}}\n\
         add 200 pipe 2 ip from any to any {{down}}\n\
         add 65000 allow ip from any to any\n"
    )
}

/// Seed 002's scenarios 1 and 2: one NewReno flow (`-C reno`) over a
/// 10 Mbit/s bottleneck with `base_rtt` ms of path RTT, CoDel at its
/// defaults (target 5 ms, interval 100 ms, no ECN), against the same
/// buffer with droptail. 5 s of TCP; 25 pings from 1.5 s on, after slow
/// start, measure the RTT under load.
///
/// - Goodput from 1.5 s on, CoDel: at least `min_share` of the link (the payload
///   ceiling is 10 × 1448/1500 = 9.65 Mbit/s), scaled by the share of
///   that ceiling droptail's run carried (1 on a quiet machine; below it
///   when the machine starved the endpoints), which must be 75% or more. CoDel keeps only a few
///   packets queued, so after each drop Reno's halved window is below the
///   path's BDP and the link idles until it grows back by one packet per
///   RTT. At 20 ms (BDP 17 packets) the window comes back in about 8 RTTs,
///   0.16 s, and most of each drop interval runs full: 80%. At 40 ms (BDP
///   33 packets) it takes about 0.6 s, and the seed itself notes that the
///   defaults "can degrade TCP throughput" when the RTT is high: 70%.
/// - RTT under load, CoDel: the median ping at most `base_rtt` + 25 ms.
///   CoDel holds the standing queue near its 5 ms target; above it the
///   queue grows for up to an interval (100 ms) before a drop: Reno adds
///   one packet per RTT (1.2 ms of queue at 10 Mbit/s), about 5 packets
///   (6 ms) in 100 ms at 20 ms RTT, so the queue swings between 0 and
///   about 5 + 6 + a slow-start overshoot. 25 ms is twice that.
/// - Droptail on the same buffer (about 800 ms at 10 Mbit/s): Reno fills
///   it until it overflows, so the median ping must wait at least 100 ms
///   more than with CoDel (bufferbloat), and nothing is dropped by an AQM.
/// - CoDel's drops are `aqm` drops in `stats`, and there are some.
fn seed002_codel_vs_droptail(mode: Mode, one_way_ms: u32, min_share: f64) {
    let bed = Testbed::new(mode);
    let base = 2.0 * f64::from(one_way_ms);
    let name = format!("CoDel, {base} ms RTT");
    let codel = seed002_run(
        &bed,
        &name,
        &seed002_pipes(&format!(
            "bw 10Mbit/s delay {one_way_ms}ms {SEED002_BUFFER} codel"
        )),
        "",
        "reno",
        &[0.0],
        5,
        1.5,
        25,
    );
    let name = format!("droptail, {base} ms RTT");
    let droptail = seed002_run(
        &bed,
        &name,
        &seed002_pipes(&format!(
            "bw 10Mbit/s delay {one_way_ms}ms {SEED002_BUFFER}"
        )),
        "",
        "reno",
        &[0.0],
        5,
        1.5,
        25,
    );
    // Goodput in the steady state, from 1.5 s (as the pings) to the end:
    // slow start's overshoot and CoDel's first drops, which a 5 s run
    // cannot average out (whole runs at 40 ms: 6.67 to 8.3 Mbit/s), are
    // not what the bound is about.
    let steady = |json: &str| iperf3_span_bps(json, 1.5, 5.0);
    let bps = steady(&codel.tcp[0]);
    println!(
        "CoDel at {base} ms RTT: {:.2} Mbit/s from 1.5 s, {:.2} over the whole run",
        mbit(bps),
        mbit(iperf3_received_bps(&codel.tcp[0]))
    );
    // What TCP could carry through this link on the machine as it was:
    // droptail's full buffer keeps the link busy, so its goodput falls
    // short of the payload ceiling only when the endpoints are starved
    // of CPU (load average 17 on the 2 vCPUs: droptail 8.30 Mbit/s and
    // CoDel 7.80, under 8.0). CoDel's floor scales with it, and droptail
    // must carry at least 75% itself, so a slow link still fails.
    let ceiling = SEED002_LINK_BPS * 1448.0 / 1500.0;
    let carried = steady(&droptail.tcp[0]).min(ceiling) / ceiling;
    assert!(
        carried >= 0.75,
        "droptail at {base} ms RTT: TCP received {:.2} Mbit/s of {:.2}",
        mbit(carried * ceiling),
        mbit(ceiling)
    );
    assert!(
        bps >= min_share * SEED002_LINK_BPS * carried,
        "CoDel at {base} ms RTT: TCP received {:.2} Mbit/s, under {min_share} of 10 \
         × {carried:.3} (droptail's share of the payload ceiling)",
        mbit(bps)
    );
    let (c, d) = (codel.ping_median(), droptail.ping_median());
    assert!(
        c <= base + 25.0,
        "CoDel at {base} ms RTT: median RTT under load {c:.1} ms > {base} + 25"
    );
    assert!(
        d >= c + 100.0,
        "droptail at {base} ms RTT: median RTT under load {d:.1} ms, not clearly \
         above CoDel's {c:.1} ms (+100 ms)"
    );
    assert!(
        stats_drops_for(&codel.stats, "aqm") > 0,
        "CoDel dropped nothing:\n{}",
        codel.stats
    );
    assert_eq!(
        stats_drops_for(&droptail.stats, "aqm"),
        0,
        "droptail run with AQM drops:\n{}",
        droptail.stats
    );
}

#[test]
fn seed002_shell_codel_20ms_rtt_keeps_delay_near_target() {
    if !ready(
        "seed002_shell_codel_20ms_rtt_keeps_delay_near_target",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed002_codel_vs_droptail(Mode::Shell, 10, 0.8);
}

#[test]
fn seed002_shell_codel_40ms_rtt_keeps_delay_near_target() {
    if !ready(
        "seed002_shell_codel_40ms_rtt_keeps_delay_near_target",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed002_codel_vs_droptail(Mode::Shell, 20, 0.7);
}

/// FQ-CoDel's hash buckets in seed 002 (Table II's default).
const SEED002_FQ_FLOWS: u32 = 1024;

/// Seed 002's FQ-CoDel config: pipe 1 up and pipe 2 down configured with
/// `link`, each scheduled by its own `type fq_codel` at
/// the seed's parameters (Table II's defaults, written out: target 5 ms,
/// interval 100 ms, quantum 1514, limit 10240, 1024 flows, no ECN). The
/// scheduler hashes each 5-tuple into a sub-queue of its own; the queue
/// needs no mask, as in the seed's examples.
fn seed002_fq_codel(link: &str) -> String {
    let fq = format!(
        "type fq_codel target 5ms interval 100ms quantum 1514 limit 10240 \
         flows {SEED002_FQ_FLOWS} noecn"
    );
    format!(
        "pipe 1 config {link}\n\
         pipe 2 config {link}\n\
         sched 1 config pipe 1 {fq}\n\
         sched 2 config pipe 2 {fq}\n\
         queue 1 config sched 1\n\
         queue 2 config sched 2\n\
         add 100 queue 1 ip from any to any {{up}}\n\
         add 200 queue 2 ip from any to any {{down}}\n\
         add 65000 allow ip from any to any\n"
    )
}

/// Seed 002's scenarios 4 and 5: four CUBIC flows (`-C cubic`, as the seed
/// ran) with staggered starts and ends, each lasting 4 s from 0, 0.5, 1
/// and 1.5 s (the seed's 60 s from 0, 10, 20 and 30 s, scaled), over
/// `bw_bps` and 20 ms RTT with FQ-CoDel; 20 pings from 2 s on. Against the
/// same flows through one droptail FIFO of `fifo_queue`.
///
/// - Fair shares: from 2 to 4 s all four run (the last has had 0.5 s to
///   start); over that span, from the servers' 0.5 s intervals, each flow
///   gets between 0.5 and 1.5 of the four's mean. DRR gives each
///   backlogged sub-queue one quantum per round, so while every flow keeps
///   a packet queued the shares are equal; what moves them is a flow whose
///   window, halved by a CoDel drop, briefly cannot keep its sub-queue
///   backlogged, a sender that gets no CPU for a while (on the loaded
///   2-vCPU machine: [3.2, 1.5, 3.2, 1.8] Mbit/s, 1.32 and 0.62 of the
///   mean, where 0.75..1.25 had been held), and the span's edges (a flow's
///   0.5 s interval is not exactly the others'). A FIFO in its place still
///   fails: through it the first flow keeps most of the link (printed:
///   7.0 of 9.7 Mbit/s at 10 Mbit/s, 2.7 of the mean, loaded or not).
/// - Together they carry at least 80% of the link's payload (1448 of each
///   1500 bytes: 9.65 Mbit/s at 10, 0.965 at 1).
/// - The pings are a sparse flow: each arrives at an empty sub-queue, goes
///   on the new list and is served next, behind at most the packet on the
///   wire (1.2 ms at 10 Mbit/s, 12 ms at 1). The median stays within
///   `ping_slack` ms of the base RTT; through the FIFO it waits behind the
///   whole standing queue, at least 100 ms more.
/// - FQ-CoDel drops (`aqm` in `stats`): each sub-queue's CoDel acts.
fn seed002_fq_codel_vs_fifo(mode: Mode, bw: &str, bw_bps: f64, fifo_queue: &str, ping_slack: f64) {
    let bed = Testbed::new(mode);
    let (one_way_ms, base) = (10, 20.0);
    let starts = [0.0, 0.5, 1.0, 1.5];
    let (from, to) = (2.0, 4.0);
    let fq = seed002_run(
        &bed,
        &format!("FQ-CoDel, 4 flows, {bw}"),
        &seed002_fq_codel(&format!("bw {bw} delay {one_way_ms}ms")),
        "",
        "cubic",
        &starts,
        4,
        from,
        20,
    );
    let fifo = seed002_run(
        &bed,
        &format!("FIFO, 4 flows, {bw}"),
        &seed002_pipes(&format!("bw {bw} delay {one_way_ms}ms {fifo_queue}")),
        "",
        "cubic",
        &starts,
        4,
        from,
        20,
    );
    // Each flow's span in its own test's time.
    let span = |run: &Seed002Run| -> Vec<f64> {
        run.tcp
            .iter()
            .zip(starts)
            .map(|(j, s)| iperf3_span_bps(j, from - s, to - s))
            .collect()
    };
    let rates = span(&fq);
    let total: f64 = rates.iter().sum();
    let mean = total / rates.len() as f64;
    let round = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .map(|&b| (mbit(b) * 1000.0).round() / 1000.0)
            .collect()
    };
    println!(
        "seed 002 at {bw}, {from}..{to} s, Mbit/s: FQ-CoDel {:?} (total {:.3}); FIFO {:?}",
        round(&rates),
        mbit(total),
        round(&span(&fifo)),
    );
    let ceiling = bw_bps * 1448.0 / 1500.0;
    assert!(
        total >= 0.8 * ceiling,
        "FQ-CoDel: the four flows carried {:.3} Mbit/s, under 80% of {:.3}",
        mbit(total),
        mbit(ceiling)
    );
    for (k, &t) in rates.iter().enumerate() {
        let share = t / mean;
        assert!(
            // 0.5..1.5, not 0.75..1.25: a starved sender (see above).
            (0.5..=1.5).contains(&share),
            "FQ-CoDel at {bw}: flow {k} got {:.3} Mbit/s, {share:.2} of the mean {:.3}",
            mbit(t),
            mbit(mean)
        );
    }
    let (f, d) = (fq.ping_median(), fifo.ping_median());
    let shared = fq.ping_shares_bucket(SEED002_FQ_FLOWS);
    if shared.is_empty() {
        assert!(
            f <= base + ping_slack,
            "FQ-CoDel at {bw}: median ping RTT under load {f:.1} ms > {base} + {ping_slack}"
        );
    } else {
        // A ping hashed into a bulk flow's bucket queues behind it: FQ-CoDel
        // isolates buckets, not flows (RFC 8290 section 5.1). That bucket's
        // CoDel still holds its queue near the target, so the ping waits
        // about as long as seed 002's single CoDel queue lets it (scenario 1's
        // bound: 25 ms over the base).
        println!(
            "seed 002 at {bw}: the pings share an FQ-CoDel bucket with flow(s) {shared:?} \
             (ephemeral ports), so they wait in that flow's queue"
        );
        assert!(
            f <= base + ping_slack.max(25.0),
            "FQ-CoDel at {bw}: median ping RTT under load {f:.1} ms > {base} + {}, \
             sharing a bucket with flow(s) {shared:?}",
            ping_slack.max(25.0)
        );
    }
    assert!(
        d >= f + 100.0,
        "FIFO at {bw}: median ping RTT under load {d:.1} ms, not clearly above \
         FQ-CoDel's {f:.1} (+100)"
    );
    assert!(
        stats_drops_for(&fq.stats, "aqm") > 0,
        "FQ-CoDel dropped nothing:\n{}",
        fq.stats
    );
}

/// Scenario 4, 10 Mbit/s, against a FIFO with the seed's buffer. A ping
/// may wait for one 1500-byte packet on the wire (1.2 ms) and for the
/// reply's turn at the other end: 10 ms of slack.
#[test]
fn seed002_shell_fq_codel_4_flows_share_and_keep_ping_fast() {
    if !ready(
        "seed002_shell_fq_codel_4_flows_share_and_keep_ping_fast",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed002_fq_codel_vs_fifo(Mode::Shell, "10Mbit/s", 10e6, SEED002_BUFFER, 10.0);
}

/// Scenario 5, 1 Mbit/s. The FIFO gets the default 50 slots (600 ms at
/// 1 Mbit/s), not the seed's buffer: 1000 KB would be 8 s of queue, and
/// iperf3's own end-of-test exchange behind it would outlast the test's
/// time limit. A ping may wait for one packet on the wire (12 ms) and its
/// own serialisation (0.7 ms each way): 25 ms of slack.
#[test]
fn seed002_shell_fq_codel_1mbit_4_flows_share_and_keep_ping_fast() {
    if !ready(
        "seed002_shell_fq_codel_1mbit_4_flows_share_and_keep_ping_fast",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed002_fq_codel_vs_fifo(Mode::Shell, "1Mbit/s", 1e6, "", 25.0);
}

/// Scenario 1 with the emulator as a bridge between the client's and the
/// server's namespaces.
#[test]
fn seed002_bridge_codel_20ms_rtt_keeps_delay_near_target() {
    if !ready(
        "seed002_bridge_codel_20ms_rtt_keeps_delay_near_target",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed002_codel_vs_droptail(Mode::Bridge, 10, 0.8);
}

/// Scenario 1 on the client's own host: its TCP sender's packets go out
/// as copies (see `src/live/host.rs`), or TCP Small Queues would keep the
/// flow far below the link.
#[test]
fn seed002_host_codel_20ms_rtt_keeps_delay_near_target() {
    let tools = Mode::Host.tools(TOOLS);
    if !ready(
        "seed002_host_codel_20ms_rtt_keeps_delay_near_target",
        &tools,
    ) {
        return;
    }
    let _serial = serial();
    seed002_codel_vs_droptail(Mode::Host, 10, 0.8);
}

/// Scenario 4 through a bridge.
#[test]
fn seed002_bridge_fq_codel_4_flows_share_and_keep_ping_fast() {
    if !ready(
        "seed002_bridge_fq_codel_4_flows_share_and_keep_ping_fast",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    seed002_fq_codel_vs_fifo(Mode::Bridge, "10Mbit/s", 10e6, SEED002_BUFFER, 10.0);
}

/// Scenario 4 on the client's own host.
#[test]
fn seed002_host_fq_codel_4_flows_share_and_keep_ping_fast() {
    let tools = Mode::Host.tools(TOOLS);
    if !ready(
        "seed002_host_fq_codel_4_flows_share_and_keep_ping_fast",
        &tools,
    ) {
        return;
    }
    let _serial = serial();
    seed002_fq_codel_vs_fifo(Mode::Host, "10Mbit/s", 10e6, SEED002_BUFFER, 10.0);
}

/// Seed 002's scenario 3: one CUBIC flow over 10 Mbit/s and 20 ms RTT with
/// `codel target 10ms interval 100ms ecn`, and ECN on in the client's TCP
/// (`net.ipv4.tcp_ecn=1`, set in the client's namespace only; the server's
/// default, 2, accepts ECN when asked). The seed "confirmed that ECN is
/// functional with nothing dropped". Here:
///
/// - CoDel marks (`ECN-marked` in `stats`), and drops at most as many
///   packets as it marks: what it drops instead of marking is what is not
///   ECN-capable (the pings, and TCP retransmissions, which Linux never
///   sends as ECT), while every one of its signals to the flow is a mark.
/// - Goodput at least 80% of the link, as with CoDel dropping at 20 ms.
/// - The median ping at most 20 + 30 ms: the standing queue stays near the
///   10 ms target, and swings above it as in the dropping case (25 ms of
///   slack there, with a 5 ms target).
///
/// This test found that the live payload did not expose its IP bytes to the
/// engine, so every live packet looked Not-ECT and CoDel dropped where it
/// should have marked (now `impl Payload for Carrier` in `src/live/mod.rs`).
#[test]
fn seed002_shell_codel_ecn_marks_instead_of_dropping() {
    if !ready("seed002_shell_codel_ecn_marks_instead_of_dropping", TOOLS) {
        return;
    }
    let _serial = serial();
    let run = seed002_run(
        &Testbed::new(Mode::Shell),
        "CoDel ECN, 20 ms RTT",
        &seed002_pipes(&format!(
            "bw 10Mbit/s delay 10ms {SEED002_BUFFER} codel target 10ms interval 100ms ecn"
        )),
        "echo 1 > /proc/sys/net/ipv4/tcp_ecn || exit 98; ",
        "cubic",
        &[0.0],
        5,
        1.5,
        25,
    );
    let marked = stats_ecn_marked(&run.stats);
    let dropped = stats_drops_for(&run.stats, "aqm");
    assert!(marked > 0, "CoDel with ecn marked nothing:\n{}", run.stats);
    assert!(
        dropped <= marked,
        "CoDel with ecn dropped {dropped} packets and marked {marked}:\n{}",
        run.stats
    );
    let bps = iperf3_received_bps(&run.tcp[0]);
    assert!(
        bps >= 0.8 * SEED002_LINK_BPS,
        "CoDel ECN: TCP received {:.2} Mbit/s, under 80% of 10",
        mbit(bps)
    );
    let m = run.ping_median();
    assert!(
        m <= 20.0 + 30.0,
        "CoDel ECN: median RTT under load {m:.1} ms > 20 + 30"
    );
}

/// ipfw(8)'s stateful firewall, live in host mode: C's own TCP session to
/// S passes both ways by the state its SYN made, while a connection S
/// opens to C is dropped; `ipfw -d show` lists the state.
#[test]
fn host_mode_stateful_rules_pass_a_session_and_block_the_unsolicited() {
    let mut tools = TOOLS.to_vec();
    tools.push("nft");
    if !ready("host_mode_stateful", &tools) {
        return;
    }
    let _serial = serial();
    let pair = HostPair::new();
    let (c, s) = (&pair.c, &pair.s);
    let scratch = Scratch::new();
    let config = scratch.write(
        "ipfw.conf",
        "add 100 check-state\n\
         add 200 allow tcp from me to any setup keep-state\n\
         add 300 deny ip from any to any\n",
    );
    let socket = scratch.path("ctl.sock");
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut daemon = host_daemon(c, &queue, &config, &socket, &[]);

    // C → S: the session is C's own, so it passes.
    let port = unique_port();
    let mut server = iperf3_server(s, port, None);
    let out = run_bounded(
        &mut c.command(
            "iperf3",
            &[
                "-c",
                "192.0.2.2",
                "-p",
                &port.to_string(),
                "-t",
                "1",
                "--connect-timeout",
                "2000",
            ],
        ),
        Duration::from_secs(15),
        "iperf3 C→S",
    );
    expect_success(&out, "iperf3 C→S through the state");
    server.terminate(Duration::from_secs(5));
    let show = ipfw(&socket, &["-d", "show"]);
    println!("{show}");
    assert!(show.contains("## Dynamic rules"), "{show}");
    assert!(show.contains("STATE tcp 192.0.2.1"), "{show}");
    assert!(rule_packets(&show, 200) >= 10, "{show}");

    // S → C: unsolicited, so dropped by rule 300.
    let port = unique_port();
    let mut server = iperf3_server(c, port, None);
    let before = rule_packets(&ipfw(&socket, &["show"]), 300);
    let out = run_bounded(
        &mut s.command(
            "iperf3",
            &[
                "-c",
                "192.0.2.1",
                "-p",
                &port.to_string(),
                "-t",
                "1",
                "--connect-timeout",
                "1000",
            ],
        ),
        Duration::from_secs(15),
        "iperf3 S→C",
    );
    assert!(
        !out.status.success(),
        "an unsolicited connection got through"
    );
    let after = rule_packets(&ipfw(&socket, &["show"]), 300);
    assert!(after > before, "rule 300 saw nothing: {before} -> {after}");
    server.terminate(Duration::from_secs(5));
    let status = daemon.terminate(Duration::from_secs(5));
    assert!(status.success(), "daemon: {status}");
}

/// `verrevpath` live, against the daemon's namespace's routes: S's pings
/// come in on c0, where C's route back to S leaves, so they pass; once C
/// routes S's address to nowhere (`ip route add unreachable`), the same
/// pings fail the check and `deny ... not verrevpath` drops them.
#[test]
fn host_mode_verrevpath_follows_the_namespaces_routes() {
    let mut tools = TOOLS.to_vec();
    tools.push("nft");
    if !ready("host_mode_verrevpath", &tools) {
        return;
    }
    let _serial = serial();
    let pair = HostPair::new();
    let (c, s) = (&pair.c, &pair.s);
    let scratch = Scratch::new();
    let config = scratch.write(
        "ipfw.conf",
        "add 100 deny ip from any to any in not verrevpath\n\
         add 200 allow ip from any to any\n",
    );
    let socket = scratch.path("ctl.sock");
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut daemon = host_daemon(c, &queue, &config, &socket, &[]);
    let ping_from_s = || {
        run_bounded(
            &mut s.command("ping", &["-c", "3", "-i", "0.2", "-W", "1", "192.0.2.1"]),
            Duration::from_secs(10),
            "ping S→C",
        )
    };
    let out = ping_from_s();
    expect_success(&out, "ping S→C with the route back on c0");
    assert_eq!(rule_packets(&ipfw(&socket, &["show"]), 100), 0);
    c.ip(&["route", "add", "unreachable", "192.0.2.2/32"]);
    // The daemon reads the routes before each command.
    ipfw(&socket, &["zero"]);
    let out = ping_from_s();
    assert!(!out.status.success(), "pings passed a failed verrevpath");
    let show = ipfw(&socket, &["show"]);
    assert!(rule_packets(&show, 100) >= 3, "{show}");
    let status = daemon.terminate(Duration::from_secs(5));
    assert!(status.success(), "daemon: {status}");
}

// ---------------------------------------------------------------------------
// Control socket under abuse (issue 14)
// ---------------------------------------------------------------------------

/// Descriptors `pid` holds open.
fn open_fds(pid: nix::unistd::Pid) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A bridge daemon with 12000 rules, whose `show` is far larger than a
/// socket's buffer: 100 connections that come and go leak no descriptor;
/// a client that asks for `show` and never reads, plus idle ones that send
/// nothing, do not keep `ipfw show` from others; and SIGTERM ends the
/// daemon promptly with them still connected.
/// `ipfw show`, tried again while the daemon says it is busy: threads of
/// the 100 clients before may still hold their slots on a loaded machine
/// (the answer says "try again"); bounded at 10 s.
fn show_when_not_busy(socket: &Path) -> String {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let out = run_bounded(
            std::process::Command::new(DUMMYNET)
                .args(["ipfw", "--socket"])
                .arg(socket)
                .arg("show"),
            Duration::from_secs(5),
            "dummynet ipfw show",
        );
        if !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("busy")
            && Instant::now() < give_up
        {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        return expect_success(&out, "dummynet ipfw show");
    }
}

#[test]
fn abusive_control_clients_leak_nothing_and_hold_up_no_one() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    if !ready(
        "abusive_control_clients_leak_nothing_and_hold_up_no_one",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let mut rules = String::new();
    for n in 1..=12000 {
        rules.push_str(&format!(
            "add {n} count ip from 198.51.100.{} to any\n",
            n % 250
        ));
    }
    rules.push_str("add 65000 allow ip from any to any\n");
    let mut daemon = path.daemon("ctl", Some(&rules), &["--nice", "--precision", "timer"]);
    let socket = daemon.socket.clone();
    let shown = ipfw(&socket, &["show"]);
    assert!(shown.contains("\n12000 "), "the rules are not all there");
    // Several times what the socket buffers on both sides hold.
    assert!(shown.len() > 500_000, "show is only {} bytes", shown.len());

    // Connections that come and go, some with half a request.
    let pid = daemon.proc.pid();
    let before = open_fds(pid);
    for i in 0..100 {
        let mut c = UnixStream::connect(&socket).expect("connect");
        if i % 2 == 0 {
            let _ = c.write_all(b"{\"argv\": [\"sh");
        }
    }
    let give_up = Instant::now() + Duration::from_secs(10);
    while open_fds(pid) > before && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(open_fds(pid), before, "descriptors leaked by 100 clients");

    // One asks for the large answer and never reads it; three say nothing.
    let mut greedy = UnixStream::connect(&socket).expect("connect");
    greedy
        .write_all(b"{\"argv\": [\"show\"]}\n")
        .expect("send show");
    let idle: Vec<UnixStream> = (0..3)
        .map(|_| UnixStream::connect(&socket).expect("connect"))
        .collect();
    for _ in 0..3 {
        let again = show_when_not_busy(&socket);
        assert_eq!(again.lines().count(), shown.lines().count());
    }
    let status = daemon.proc.terminate(Duration::from_secs(3));
    assert!(status.success(), "daemon exited with {status}");
    assert!(!socket.exists(), "socket file left behind");
    drop((greedy, idle));
}

/// At start the shell says each pipe in one line; `-v` in full, as `pipe
/// show` does; `--quiet` says nothing at all when nothing goes wrong.
#[test]
fn shell_says_one_line_per_pipe_more_with_v_nothing_with_quiet() {
    if !ready(
        "shell_says_one_line_per_pipe_more_with_v_nothing_with_quiet",
        &["ip"],
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let said = |flags: &[&str]| {
        let mut args = vec!["shell", "--nat", "off", "--up", "delay 5ms"];
        args.extend(flags);
        args.extend(["--", "true"]);
        let out = run_bounded(
            &mut ns.command(DUMMYNET, &args),
            SHELL_LIMIT,
            "dummynet shell",
        );
        expect_success(&out, "dummynet shell -- true");
        text(&out.stderr)
    };
    let plain = said(&[]);
    let pipe_lines: Vec<&str> = plain.lines().filter(|l| l.contains("(pipe ")).collect();
    assert_eq!(pipe_lines.len(), 2, "{plain}");
    assert!(
        pipe_lines[0].starts_with("dummynet shell: up (pipe 1): unlimited, 5 ms, queue 50 slots"),
        "{plain}"
    );
    assert!(!plain.contains("q131073"), "{plain}");
    let verbose = said(&["-v"]);
    assert!(verbose.contains("q131073"), "{verbose}");
    let quiet = said(&["--quiet"]);
    assert_eq!(quiet.trim(), "", "--quiet said something");
}
