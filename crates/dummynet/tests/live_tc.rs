//! `dummynet tc`: tc(8)'s netem commands, carried out by dummynet on an
//! interface's egress inside the namespace where they run, as they would
//! be by the kernel's sch_netem (which this machine lacks).
//!
//! ```text
//!   C                           S
//!   c0 192.0.2.1/24 ─────────── s0 192.0.2.2/24
//! ```
//!
//! Each test shapes C's `c0` with `ip netns exec C dummynet tc qdisc ...`
//! (or from outside with `--netns`, or through `nsenter` as a chaos tool
//! does) and measures from C. Every ping and transfer has a count and a
//! deadline. The namespaces' guards kill the daemons inside them; a guard
//! here removes their state under /run/dummynet/tc.
//!
//! Without root or the tools, each test prints `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use live_common::*;

const TOOLS: &[&str] = &["ip", "ping", "nft"];

/// C and S, and the state directory of C's tc daemons (removed on drop).
struct World {
    pair: HostPair,
    state: PathBuf,
}

impl World {
    fn new() -> World {
        let pair = HostPair::new();
        let ino = std::fs::metadata(format!("/run/netns/{}", pair.c.name))
            .expect("the namespace's file")
            .ino();
        World {
            pair,
            state: PathBuf::from(format!("/run/dummynet/tc/{ino}")),
        }
    }

    /// `dummynet tc ARGS` inside C.
    fn tc(&self, args: &[&str]) -> Output {
        let mut full = vec!["tc"];
        full.extend_from_slice(args);
        run_bounded(
            &mut self.pair.c.command(DUMMYNET, &full),
            Duration::from_secs(30),
            &format!("tc {}", args.join(" ")),
        )
    }

    fn tc_ok(&self, args: &[&str]) -> String {
        expect_success(&self.tc(args), &format!("tc {}", args.join(" ")))
    }

    /// `count` pings C→S, `interval` seconds apart.
    fn ping(&self, count: u32, interval: &str, limit: Duration) -> Ping {
        let count = count.to_string();
        let out = run_bounded(
            &mut rt_ping(
                &self.pair.c,
                &["-q", "-c", &count, "-i", interval, "-W", "2", B_ADDR],
            ),
            limit,
            "ping C→S",
        );
        Ping::parse(&text(&out.stdout))
    }

    fn ping_avg(&self) -> f64 {
        let out = run_bounded(
            &mut rt_ping(&self.pair.c, &["-c", "10", "-i", "0.1", "-W", "2", B_ADDR]),
            Duration::from_secs(15),
            "ping C→S",
        );
        Ping::parse(&expect_success(&out, "ping C→S")).avg()
    }

    /// The control socket of c0's daemon.
    fn socket(&self) -> PathBuf {
        self.state.join("c0/sock")
    }

    fn daemon_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.state.join("c0/pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// The nftables tables in C.
    fn tables(&self) -> String {
        let out = self
            .pair
            .c
            .command("nft", &["list", "tables"])
            .output()
            .expect("nft list tables");
        text(&out.stdout)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next().map(String::from))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

/// `Sent B bytes P pkt (dropped D, ...` and `backlog Xb Np` of the first
/// qdisc in a `tc -s qdisc show` output.
fn sent_dropped_backlog(show: &str) -> (u64, u64, u64, u64) {
    let words: Vec<&str> = show
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let after = |key: &str| -> u64 {
        let i = words
            .iter()
            .position(|w| *w == key)
            .unwrap_or_else(|| panic!("no `{key}` in:\n{show}"));
        words[i + 1]
            .trim_end_matches(['b', 'p'])
            .parse()
            .unwrap_or_else(|_| panic!("no number after `{key}` in:\n{show}"))
    };
    let i = words.iter().position(|w| *w == "backlog").expect("backlog");
    let backlog_p: u64 = words[i + 2].trim_end_matches('p').parse().expect("Np");
    (
        after("Sent"),
        words[words.iter().position(|w| *w == "Sent").unwrap() + 3]
            .parse()
            .expect("pkt"),
        after("dropped"),
        backlog_p,
    )
}

/// `overlimits N` of the first qdisc in a `tc -s qdisc show` output.
fn overlimits(show: &str) -> u64 {
    let mut words = show.split_whitespace();
    words
        .by_ref()
        .find(|w| *w == "overlimits")
        .unwrap_or_else(|| panic!("no `overlimits` in:\n{show}"));
    words
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `overlimits` in:\n{show}"))
}

#[test]
fn netem_delay_adds_its_delay_to_the_rtt_and_del_restores_the_interface() {
    if !ready("tc delay", TOOLS) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    let before_show = w.tc_ok(&["qdisc", "show", "dev", "c0"]);
    let before_tables = w.tables();
    let base = w.ping_avg();

    w.tc_ok(&[
        "qdisc", "add", "dev", "c0", "root", "netem", "delay", "100ms",
    ]);
    let pid = w.daemon_pid().expect("the daemon's pid");
    let shaped = w.ping_avg();
    println!("RTT: {base:.3} ms before, {shaped:.3} ms with netem delay 100ms");
    assert!(
        (97.0..150.0).contains(&(shaped - base)),
        "netem delay 100ms added {:.3} ms to the RTT ({base:.3} → {shaped:.3})",
        shaped - base
    );

    // tc's own format, the qdisc as added (with `dev` named, tc does not
    // repeat it).
    let show = w.tc_ok(&["-s", "qdisc", "show", "dev", "c0"]);
    assert!(
        show.starts_with("qdisc netem 8001: root refcnt 2 limit 1000 delay 100ms\n Sent "),
        "{show}"
    );
    // Its counters add up with the daemon's books: what rule 100 sent to
    // the pipe is sent, dropped or still inside.
    let (bytes, pkts, dropped, backlog) = sent_dropped_backlog(&show);
    let rules = ipfw(&w.socket(), &["show"]);
    let into_pipe = rule_packets(&rules, 100);
    assert!(pkts >= 10 && bytes >= 10 * 84, "{show}");
    assert_eq!(into_pipe, pkts + dropped + backlog, "{show}\n{rules}");
    // No rate: nothing waits for one.
    assert_eq!(overlimits(&show), 0, "{show}");
    // Without dev, the other interfaces are the system's.
    let all = w.tc_ok(&["qdisc", "show"]);
    assert!(all.contains("dev lo root"), "{all}");
    assert!(all.contains("qdisc netem 8001: dev c0 root"), "{all}");
    // Only c0's egress is intercepted, by a table of the daemon's own.
    let table = text(
        &w.pair
            .c
            .command("nft", &["list", "ruleset"])
            .output()
            .expect("nft")
            .stdout,
    );
    assert!(table.contains("oifname \"c0\""), "{table}");

    // A second add is refused and changes nothing.
    let again = w.tc(&["qdisc", "add", "dev", "c0", "root", "netem", "delay", "1ms"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("Exclusivity flag on"));
    assert!(w
        .tc_ok(&["qdisc", "show", "dev", "c0"])
        .contains("delay 100ms"));
    // So are words tc would not read, and a change to another kind, in
    // tc's words.
    let bad = w.tc(&[
        "qdisc", "change", "dev", "c0", "root", "netem", "delay", "1ms", "foo",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).starts_with("What is \"foo\"?"),
        "{}",
        text(&bad.stderr)
    );
    let kind = w.tc(&[
        "qdisc", "change", "dev", "c0", "root", "tbf", "rate", "1mbit", "burst", "10k", "latency",
        "10ms",
    ]);
    assert_eq!(kind.status.code(), Some(2));
    assert!(
        text(&kind.stderr).contains("Invalid qdisc name"),
        "{}",
        text(&kind.stderr)
    );
    let nodev = w.tc(&[
        "qdisc", "add", "dev", "nosuch0", "root", "netem", "delay", "1ms",
    ]);
    assert_eq!(text(&nodev.stderr).trim(), "Cannot find device \"nosuch0\"");
    assert_eq!(
        w.tc_ok(&["qdisc", "show", "dev", "c0"]),
        format!("{}\n", show.lines().next().unwrap_or_default())
    );
    assert_eq!(w.daemon_pid(), Some(pid));

    w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);
    assert!(!running(pid), "the daemon {pid} still runs after del");
    assert!(!w.state.exists(), "{} is left after del", w.state.display());
    assert_eq!(w.tables(), before_tables, "nftables after del");
    assert_eq!(w.tc_ok(&["qdisc", "show", "dev", "c0"]), before_show);
    let after = w.ping_avg();
    assert!(
        after < base + 20.0,
        "RTT after del: {after:.3} ms (before: {base:.3})"
    );
    // Nothing left to delete: tc's answer.
    let none = w.tc(&["qdisc", "del", "dev", "c0", "root"]);
    assert_eq!(none.status.code(), Some(2));
}

#[test]
fn netem_loss_drops_its_share_of_two_thousand_pings() {
    if !ready("tc loss", TOOLS) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    w.tc_ok(&["qdisc", "add", "dev", "c0", "root", "netem", "loss", "10%"]);
    let p = w.ping(2000, "0.002", Duration::from_secs(60));
    let lost = f64::from(p.lost());
    // Binomial(2000, 0.1): mean 200, σ = 13.4; ±5σ.
    println!(
        "loss 10%: {} of {} pings lost ({:.2}%)",
        p.lost(),
        p.transmitted,
        100.0 * lost / f64::from(p.transmitted)
    );
    assert_eq!(p.transmitted, 2000);
    assert!((133.0..=267.0).contains(&lost), "{} lost of 2000", p.lost());
    let show = w.tc_ok(&["-s", "qdisc", "show", "dev", "c0"]);
    assert!(show.contains("loss 10%"), "{show}");
    let (_, _, dropped, _) = sent_dropped_backlog(&show);
    // Every lost ping is a drop in the books (a few other packets may be).
    assert!(
        dropped >= u64::from(p.lost()) && dropped <= u64::from(p.lost()) + 5,
        "dropped {dropped}, pings lost {}\n{show}",
        p.lost()
    );
    w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);
}

#[test]
fn netem_rate_paces_a_tcp_transfer_and_change_loses_nothing() {
    if !ready("tc rate", &["ip", "ping", "nft", "iperf3"]) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    w.tc_ok(&[
        "qdisc", "add", "dev", "c0", "root", "netem", "rate", "1mbit", "limit", "100",
    ]);
    let port = unique_port();
    let _server = iperf3_server(&w.pair.s, port, None);
    let port_s = port.to_string();
    let out = run_bounded(
        &mut w
            .pair
            .c
            .command("iperf3", &["-c", B_ADDR, "-p", &port_s, "-t", "6", "-J"]),
        Duration::from_secs(40),
        "iperf3 through rate 1mbit",
    );
    let bps = iperf3_received_bps(&expect_success(&out, "iperf3"));
    println!("rate 1mbit: iperf3 received {:.3} Mbit/s", bps / 1e6);
    assert!((0.80e6..1.05e6).contains(&bps), "{bps} bit/s");

    // TCP filled the 100-packet queue: its drops are counted, and are
    // the only ones.
    // Read once the queue has drained (100 packets at 1 Mbit/s: 1.2 s).
    let mut show = w.tc_ok(&["-s", "qdisc", "show", "dev", "c0"]);
    for _ in 0..40 {
        if sent_dropped_backlog(&show).3 == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        show = w.tc_ok(&["-s", "qdisc", "show", "dev", "c0"]);
    }
    let (_, sent, tcp_dropped, backlog) = sent_dropped_backlog(&show);
    // The counters add up with the books: what rule 100 sent into the
    // pipe was sent, dropped or is inside; and the packets that waited for
    // the rate (overlimits) are among those it took, most of a transfer
    // that keeps the queue full.
    let into_pipe = rule_packets(&ipfw(&w.socket(), &["show"]), 100);
    assert_eq!(into_pipe, sent + tcp_dropped + backlog, "{show}");
    let waited = overlimits(&show);
    println!("rate 1mbit: {waited} of {sent} packets sent waited for the rate");
    assert!(waited > sent / 2 && waited <= sent + backlog, "{show}");

    // change mid-transfer: UDP below both rates, the qdisc changed twice
    // while it runs; nothing is lost in the daemon or on the way.
    w.tc_ok(&[
        "qdisc", "change", "dev", "c0", "root", "netem", "delay", "50ms", "rate", "10mbit",
    ]);
    let _server = iperf3_server(&w.pair.s, port + 1, None);
    let port_s = (port + 1).to_string();
    let mut client = w.pair.c.command(
        "iperf3",
        &[
            "-c", B_ADDR, "-p", &port_s, "-u", "-b", "2M", "-t", "4", "-J",
        ],
    );
    client.stdout(std::process::Stdio::piped());
    let client = client.spawn().expect("iperf3 -u");
    std::thread::sleep(Duration::from_millis(1500));
    w.tc_ok(&[
        "qdisc", "change", "dev", "c0", "root", "netem", "delay", "10ms", "rate", "5mbit",
    ]);
    std::thread::sleep(Duration::from_millis(1000));
    w.tc_ok(&[
        "qdisc", "replace", "dev", "c0", "root", "netem", "delay", "30ms", "rate", "8mbit",
    ]);
    let out = client.wait_with_output().expect("iperf3 -u ends");
    let report = expect_success(&out, "iperf3 -u");
    let v: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    let sum = &v["end"]["sum"];
    println!(
        "change mid-transfer: {} datagrams, {} lost",
        sum["packets"], sum["lost_packets"]
    );
    assert!(sum["packets"].as_u64().unwrap_or(0) > 500, "{sum}");
    assert_eq!(sum["lost_packets"].as_u64(), Some(0), "{sum}");
    let show = w.tc_ok(&["-s", "qdisc", "show", "dev", "c0"]);
    assert!(show.contains("delay 30ms rate 8Mbit"), "{show}");
    let (_, _, dropped, _) = sent_dropped_backlog(&show);
    assert_eq!(dropped, tcp_dropped, "{show}");
    w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);
}

#[test]
fn a_containers_namespace_is_shaped_through_nsenter_and_from_outside() {
    if !ready("tc nsenter", &["ip", "ping", "nft", "nsenter", "sleep"]) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    let base = w.ping_avg();
    // The "container": a process in C, entered by its pid as chaos tools do.
    let mut sleeper = w.pair.c.command("sleep", &["60"]);
    let container = Proc::spawn(
        {
            sleeper.stdout(std::process::Stdio::null());
            sleeper
        },
        "the container's process",
    );
    let pid = container.pid().to_string();
    // `ip netns exec` enters the namespace after fork: wait until the pid is inside it.
    let target = std::fs::metadata(format!("/run/netns/{}", w.pair.c.name)).expect("netns file");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        use std::os::unix::fs::MetadataExt;
        let now_in = std::fs::metadata(format!("/proc/{pid}/ns/net")).map(|m| m.ino());
        if now_in.ok() == Some(target.ino()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "pid {pid} never entered the namespace"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let nsenter = |args: &[&str]| {
        let mut c = Command::new("nsenter");
        c.args(["-t", &pid, "-n", DUMMYNET, "tc"]).args(args);
        expect_success(
            &run_bounded(&mut c, Duration::from_secs(30), "nsenter tc"),
            "nsenter tc",
        )
    };
    nsenter(&[
        "qdisc", "add", "dev", "c0", "root", "netem", "delay", "50ms",
    ]);
    let shaped = w.ping_avg();
    println!("nsenter: RTT {base:.3} ms → {shaped:.3} ms with delay 50ms");
    assert!((48.0..90.0).contains(&(shaped - base)), "{base} → {shaped}");
    // From outside, by the namespace's name: the same qdisc.
    let outside = run_bounded(
        Command::new(DUMMYNET).args(["tc", "-n", &w.pair.c.name, "qdisc", "show", "dev", "c0"]),
        Duration::from_secs(30),
        "tc -n",
    );
    assert!(expect_success(&outside, "tc -n")
        .contains("qdisc netem 8001: root refcnt 2 limit 1000 delay 50ms"),);
    let del = run_bounded(
        Command::new(DUMMYNET).args([
            "tc",
            "--netns",
            &w.pair.c.name,
            "qdisc",
            "del",
            "dev",
            "c0",
            "root",
        ]),
        Duration::from_secs(30),
        "tc --netns del",
    );
    expect_success(&del, "tc --netns del");
    assert!(!w.tables().contains("dummynet"), "{}", w.tables());
    nsenter(&["qdisc", "show", "dev", "c0"]);
}

/// The command lines chaos tools run, through a `tc` shim
/// (`dummynet install --tc-shim DIR`, DIR first on PATH) inside C.
struct Shim {
    dir: Scratch,
}

impl Shim {
    fn new() -> Shim {
        let dir = Scratch::new();
        let out = run_bounded(
            Command::new(DUMMYNET)
                .args(["install", "--tc-shim"])
                .arg(dir.path("bin")),
            Duration::from_secs(10),
            "install --tc-shim",
        );
        expect_success(&out, "install --tc-shim");
        Shim { dir }
    }

    /// `tc ARGS` as a tool runs it: by name, found on PATH, inside C.
    fn tc(&self, w: &World, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut full = vec![format!("PATH={path}"), "tc".to_string()];
        full.extend(args.iter().map(|a| a.to_string()));
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        run_bounded(
            &mut w.pair.c.command("env", &full),
            Duration::from_secs(30),
            &format!("tc {}", args.join(" ")),
        )
    }

    fn tc_ok(&self, w: &World, line: &str) -> String {
        let args: Vec<&str> = line.split(' ').collect();
        expect_success(&self.tc(w, &args), line)
    }
}

#[test]
fn chaos_tools_command_lines_run_through_the_tc_shim() {
    if !ready("tc shim", TOOLS) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    let shim = Shim::new();
    let base = w.ping_avg();

    // Pumba (alexei-led/pumba): pkg/container/docker_client.go,
    // startNetemContainer, runs `tc qdisc add dev IFACE root netem` and
    // the netem words, which pkg/chaos/netem/delay_test.go gives for
    // `pumba netem delay --time 200 --jitter 50 --correlation 25.5` as
    // `delay 200ms 50ms 25.50`; stopNetemContainer runs `tc qdisc del dev
    // IFACE root netem`.
    shim.tc_ok(&w, "qdisc add dev c0 root netem delay 200ms 50ms 25.50");
    let show = shim.tc_ok(&w, "qdisc show dev c0");
    println!("pumba: {show}");
    assert!(
        show.starts_with("qdisc netem 8001: root refcnt 2 limit 1000 delay 200ms  50ms 25.5%"),
        "{show}"
    );
    let shaped = w.ping_avg();
    println!("pumba delay 200ms 50ms: RTT {base:.3} → {shaped:.3} ms");
    assert!(
        (140.0..270.0).contains(&(shaped - base)),
        "{base} → {shaped}"
    );
    shim.tc_ok(&w, "qdisc del dev c0 root netem");
    assert!(!w.tables().contains("dummynet"), "{}", w.tables());

    // Chaos Mesh's chaos daemon (chaos-mesh/chaos-mesh):
    // pkg/chaosdaemon/tc_server.go first flushes every interface with `tc
    // qdisc del dev IF root`, accepting "Cannot delete qdisc with handle
    // of zero." as nothing to delete; then addNetem runs `tc qdisc add dev
    // IF root handle 1: netem ARGS`, ARGS from convertNetemToArgs: times
    // in bare microseconds, percentages as %f (`delay 50000 10000
    // 25.000000 limit 1000 loss 1.000000`); addTbf runs `tc qdisc add dev
    // IF root handle 1: tbf rate R burst B limit L` (convertTbfToArgs).
    let flush = shim.tc(&w, &["qdisc", "del", "dev", "c0", "root"]);
    assert!(!flush.status.success());
    assert!(
        text(&flush.stderr).contains("Cannot delete qdisc with handle of zero."),
        "{}",
        text(&flush.stderr)
    );
    shim.tc_ok(
        &w,
        "qdisc add dev c0 root handle 1: netem delay 50000 10000 25.000000 limit 1000 loss 1.000000",
    );
    let show = shim.tc_ok(&w, "qdisc show dev c0");
    println!("chaos mesh netem: {show}");
    assert!(
        show.starts_with("qdisc netem 1: root refcnt 2 limit 1000 delay 50ms  10ms 25% loss 1%"),
        "{show}"
    );
    shim.tc_ok(&w, "qdisc del dev c0 root");
    shim.tc_ok(
        &w,
        "qdisc add dev c0 root handle 1: tbf rate 1000000 burst 10000 limit 20000",
    );
    let show = shim.tc_ok(&w, "qdisc show dev c0");
    println!("chaos mesh tbf: {show}");
    assert!(
        show.starts_with("qdisc tbf 1: root refcnt 2 rate 1Mbit burst 10000b"),
        "{show}"
    );
    shim.tc_ok(&w, "qdisc del dev c0 root");

    // containerlab (srl-labs/containerlab) does not run tc: `tools netem
    // set` (internal/tc/tc.go, SetImpairments) replaces the root qdisc
    // over netlink with handle 1:, a 10000-packet limit, delay, jitter,
    // loss and a rate in kbit. The same request as a tc command line:
    shim.tc_ok(
        &w,
        "qdisc replace dev c0 root handle 1: netem limit 10000 delay 100ms 10ms loss 5% rate 1000kbit",
    );
    let show = shim.tc_ok(&w, "qdisc show dev c0");
    println!("containerlab's request: {show}");
    assert!(
        show.starts_with(
            "qdisc netem 1: root refcnt 2 limit 10000 delay 100ms  10ms loss 5% rate 1Mbit"
        ),
        "{show}"
    );
    shim.tc_ok(&w, "qdisc del dev c0 root");

    // What the shim does not emulate goes to the system's tc.
    let filter = shim.tc(&w, &["filter", "show", "dev", "c0"]);
    assert!(filter.status.success(), "{}", text(&filter.stderr));
    assert!(!w.tables().contains("dummynet"), "{}", w.tables());
}

/// The `icmp_seq` of each reply to `count` pings C→S, 10 ms apart.
fn answered(w: &World, count: u32) -> Vec<u32> {
    let count = count.to_string();
    let out = run_bounded(
        &mut rt_ping(
            &w.pair.c,
            &["-n", "-c", &count, "-i", "0.01", "-W", "2", B_ADDR],
        ),
        Duration::from_secs(60),
        "ping C→S",
    );
    let mut seqs: Vec<u32> = text(&out.stdout)
        .lines()
        .filter_map(|l| l.split("icmp_seq=").nth(1))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    seqs
}

#[test]
fn netems_seed_is_the_pipes_so_interfaces_with_one_seed_drop_alike() {
    if !ready("tc seed", TOOLS) {
        return;
    }
    let _serial = serial();
    let worlds = [World::new(), World::new()];
    for w in &worlds {
        // Nothing but the pings leaves c0 (no IPv6 neighbour or router
        // traffic), so the pipe draws once per ping.
        expect_success(
            &w.pair
                .c
                .command("sysctl", &["-w", "net.ipv6.conf.c0.disable_ipv6=1"])
                .output()
                .expect("sysctl"),
            "disable IPv6 on c0",
        );
        w.tc_ok(&[
            "qdisc", "add", "dev", "c0", "root", "netem", "loss", "20%", "seed", "7",
        ]);
        assert!(w
            .tc_ok(&["qdisc", "show", "dev", "c0"])
            .contains("loss 20% seed 7"));
        // The pipe's own seed, not the daemon's.
        let pipe = ipfw(&w.socket(), &["pipe", "1", "show"]);
        assert!(pipe.contains("seed 7"), "{pipe}");
    }
    let first: Vec<Vec<u32>> = worlds.iter().map(|w| answered(w, 300)).collect();
    for w in &worlds {
        let rules = ipfw(&w.socket(), &["show"]);
        assert_eq!(rule_packets(&rules, 100), 300, "{rules}");
    }
    let lost = 300 - first[0].len();
    println!("loss 20% seed 7: {lost} of 300 lost on each interface");
    // Binomial(300, 0.2): mean 60, σ ≈ 6.9.
    assert!((25..=95).contains(&lost), "{lost} lost");
    assert_eq!(first[0], first[1], "the same seed dropped other pings");

    // `change` to another seed: that interface's draws start again from it,
    // the other's go on from 7.
    worlds[1].tc_ok(&[
        "qdisc", "change", "dev", "c0", "root", "netem", "loss", "20%", "seed", "8",
    ]);
    assert!(worlds[1]
        .tc_ok(&["qdisc", "show", "dev", "c0"])
        .contains("loss 20% seed 8"));
    let pipe = ipfw(&worlds[1].socket(), &["pipe", "1", "show"]);
    assert!(pipe.contains("seed 8"), "{pipe}");
    let second: Vec<Vec<u32>> = worlds.iter().map(|w| answered(w, 300)).collect();
    assert!(second.iter().all(|s| (200..=280).contains(&s.len())));
    assert_ne!(second[0], second[1], "seeds 7 and 8 dropped the same pings");
    for w in &worlds {
        w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);
    }
}

#[test]
fn tc_json_show_prints_each_qdisc_as_iproute2_does_with_the_pipes_counters() {
    if !ready("tc json", TOOLS) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    // Nothing but the pings leaves c0 (no IPv6 neighbour or router
    // traffic), so the books hold still between two reads.
    expect_success(
        &w.pair
            .c
            .command("sysctl", &["-w", "net.ipv6.conf.c0.disable_ipv6=1"])
            .output()
            .expect("sysctl"),
        "disable IPv6 on c0",
    );
    w.tc_ok(&[
        "qdisc", "add", "dev", "c0", "root", "netem", "delay", "10ms", "2ms", "25%", "loss", "10%",
        "seed", "3",
    ]);
    let p = w.ping(50, "0.01", Duration::from_secs(30));
    let parse = |s: &str| -> Vec<serde_json::Value> {
        serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
    };
    let one = parse(&w.tc_ok(&["-s", "-j", "qdisc", "show", "dev", "c0"]));
    assert_eq!(one.len(), 1, "{one:?}");
    let q = &one[0];
    assert_eq!(q["kind"], "netem");
    assert_eq!(q["handle"], "8001:");
    assert!(
        q.get("dev").is_none(),
        "tc names no device it was given: {q}"
    );
    assert_eq!(q["root"], true);
    let o = &q["options"];
    assert_eq!(o["limit"], 1000);
    assert_eq!(o["seed"], 3);
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    assert!((f(&o["delay"]["delay"]) - 0.010).abs() < 1e-9, "{o}");
    assert!((f(&o["delay"]["jitter"]) - 0.002).abs() < 1e-9, "{o}");
    assert!((f(&o["delay"]["correlation"]) - 0.25).abs() < 1e-6, "{o}");
    assert!((f(&o["loss-random"]["loss"]) - 0.10).abs() < 1e-6, "{o}");
    // The counters are the pipe's books: what rule 100 sent into it was
    // sent, dropped or is still inside.
    let n = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("no {k} in {q}"));
    let rules = ipfw(&w.socket(), &["show"]);
    assert_eq!(
        rule_packets(&rules, 100),
        n("packets") + n("drops") + n("qlen")
    );
    assert!(
        n("drops") >= u64::from(p.lost()) && n("packets") >= 25,
        "{q}"
    );
    assert_eq!((n("requeues"), n("overlimits")), (0, 0), "no rate: {q}");
    // Without dev: the system's qdiscs, and ours in place of c0's, once.
    let all = parse(&w.tc_ok(&["-j", "qdisc", "show"]));
    assert!(all.iter().any(|q| q["dev"] == "lo"), "{all:?}");
    let ours: Vec<_> = all.iter().filter(|q| q["dev"] == "c0").collect();
    assert_eq!(ours.len(), 1, "{all:?}");
    assert_eq!(ours[0]["kind"], "netem");
    assert!(ours[0].get("bytes").is_none(), "{all:?}");
    w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);

    // tbf and fq_codel print as iproute2 prints them too (tbf's options
    // are what iproute2 6.1 printed for this command on a kernel with tbf).
    w.tc_ok(&[
        "qdisc", "add", "dev", "c0", "root", "tbf", "rate", "1mbit", "burst", "32kbit", "latency",
        "400ms",
    ]);
    let p = w.ping(20, "0.01", Duration::from_secs(30));
    let one = parse(&w.tc_ok(&["-s", "-j", "qdisc", "show", "dev", "c0"]));
    assert_eq!(one.len(), 1, "{one:?}");
    let q = &one[0];
    assert_eq!((&q["kind"], &q["handle"]), (&"tbf".into(), &"8001:".into()));
    assert_eq!(
        q["options"],
        serde_json::json!({"rate": 125000, "burst": 4096, "lat": 400000})
    );
    let n = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("no {k} in {q}"));
    let rules = ipfw(&w.socket(), &["show"]);
    assert_eq!(
        rule_packets(&rules, 100),
        n("packets") + n("drops") + n("qlen"),
        "{q}\n{rules}"
    );
    assert!(n("packets") >= u64::from(p.received), "{q}");
    w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);

    w.tc_ok(&[
        "qdisc", "add", "dev", "c0", "root", "fq_codel", "limit", "1000", "noecn",
    ]);
    let all = parse(&w.tc_ok(&["-j", "qdisc", "show"]));
    let ours: Vec<_> = all.iter().filter(|q| q["dev"] == "c0").collect();
    assert_eq!(ours.len(), 1, "{all:?}");
    assert_eq!(ours[0]["kind"], "fq_codel");
    assert_eq!(
        ours[0]["options"],
        serde_json::json!({"limit": 1000, "flows": 1024, "quantum": 1514, "target": 5000,
            "interval": 100000, "memory_limit": 33554432, "drop_batch": 64})
    );
    w.tc_ok(&["qdisc", "del", "dev", "c0", "root"]);
}
