//! Scaffolding for the live end-to-end tests: test-owned network
//! namespaces, child processes that cannot outlive a failed test, bounded
//! waits, and parsers for what `ping`, `iperf3 -J` and `dummynet` print.
//!
//! Everything a test creates is named `dnt-<pid>-<n>` (namespaces, scratch
//! directories) and removed by a guard's `Drop`, so a panicking assertion
//! still leaves the machine as it found it.

mod netns;
// Each test binary takes what it uses of this scaffolding (its `mod
// live_common` allows dead code; an unused re-export needs its own allow).
#[allow(unused_imports)]
pub use netns::*;

use std::fs;
use std::io::Read;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dummynet_engine::percentile::nearest_rank;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The binary under test.
pub const DUMMYNET: &str = env!("CARGO_BIN_EXE_dummynet");

/// Upper bound on any wait for something to come up (a socket, a listener).
pub const SETUP_WAIT: Duration = Duration::from_secs(5);

/// How long a stopped process gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// `dnt-<pid>-<n>`: unique to this process and call.
pub fn unique_name() -> String {
    format!(
        "dnt-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A TCP port for a test's iperf3 server. The servers live in namespaces of
/// their own, so clashes are impossible anyway; distinct ports only make
/// logs easier to read.
pub fn unique_port() -> u16 {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let spread = (std::process::id() % 1000) * 20 + n % 20;
    20_000 + u16::try_from(spread).expect("below 20000")
}

/// Timing and bandwidth results are only meaningful when one test at a time
/// loads the two vCPUs of the machine: every live test holds this lock for
/// its whole run. A test that panicked poisons it; the next one goes on.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Where `prog` is found on $PATH.
pub fn find_program(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// True when the test can run: root, and every tool of `tools` on $PATH
/// (and `chrt` with `ping`).
/// Otherwise prints `skipped: <why>` and returns false.
pub fn ready(test: &str, tools: &[&str]) -> bool {
    if effective_uid() != Some(0) {
        println!("skipped: {test}: needs root (network namespaces, veths, iptables)");
        return false;
    }
    // Pings are timed under chrt ([`RT_PING`]): a test that pings needs it.
    let chrt = tools.contains(&"ping").then_some("chrt");
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .chain(chrt)
        .filter(|t| find_program(t).is_none())
        .collect();
    if !missing.is_empty() {
        println!("skipped: {test}: not installed: {}", missing.join(", "));
        return false;
    }
    true
}

/// Runs a setup command to completion; panics with its output if it fails.
pub fn run_ok(prog: &str, args: &[&str]) -> String {
    let out = run_bounded(
        Command::new(prog).args(args),
        Duration::from_secs(10),
        &format!("{prog} {}", args.join(" ")),
    );
    assert!(
        out.status.success(),
        "{prog} {}: {}\n{}",
        args.join(" "),
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A named network namespace made for one test, with `lo` up. On drop,
/// every process still inside it (servers, daemons of this test) is killed
/// and the namespace deleted, which removes its interfaces and the veth
/// peers in other namespaces.
pub struct TestNs {
    pub name: String,
}

impl TestNs {
    pub fn new() -> TestNs {
        let name = unique_name();
        run_ok("ip", &["netns", "add", &name]);
        let ns = TestNs { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NAME ARGS`, which must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        run_ok("ip", &full)
    }

    /// A command that runs `prog args` inside this namespace
    /// (`ip netns exec`, which execs the program: its pid is the program's).
    pub fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, prog]).args(args);
        c
    }

    /// Names of the interfaces in this namespace.
    pub fn links(&self) -> Vec<String> {
        self.ip(&["-o", "link", "show"])
            .lines()
            .filter_map(|l| {
                let name = l.split(':').nth(1)?.trim();
                Some(name.split('@').next()?.to_string())
            })
            .collect()
    }
}

impl TestNs {
    /// Waits (at most `limit`) until the interfaces are `expected` again;
    /// returns how long that took. A shell's veth end in this namespace
    /// goes when the kernel tears the shell's namespaces down, which it
    /// does in a work queue, a moment after the shell has exited.
    pub fn wait_links(&self, expected: &[String], limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let now = self.links();
            if now == expected {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < limit,
                "interfaces left behind in {} after {limit:?}: {now:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        // `ip netns pids` lists only processes inside this namespace: all
        // of them were started by this test.
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in text(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Joins `ns_a` and `ns_b` with a veth pair, `if_a` in `ns_a` and `if_b`
/// in `ns_b`, both ends up.
pub fn veth(ns_a: &TestNs, if_a: &str, ns_b: &TestNs, if_b: &str) {
    ns_a.ip(&[
        "link", "add", if_a, "type", "veth", "peer", "name", if_b, "netns", &ns_b.name,
    ]);
    ns_a.ip(&["link", "set", if_a, "up"]);
    ns_b.ip(&["link", "set", if_b, "up"]);
}

/// A scratch directory for config files, JSON reports and control sockets,
/// removed on drop. Short path: a Unix socket path must fit in 108 bytes.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = std::env::temp_dir().join(unique_name());
        fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.path(name);
        fs::write(&p, contents).expect("write a scratch file");
        p
    }

    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.path(name))
            .unwrap_or_else(|e| panic!("reading {}: {e}", self.path(name).display()))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Asks `pid` to stop with SIGTERM; after [`GRACE`], kills it.
fn stop_child(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    let pid = Pid::from_raw(i32::try_from(child.id()).ok()?);
    let _ = kill(pid, Signal::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// A background process (daemon, iperf3 server) that is stopped when the
/// guard drops: SIGTERM first, so a `dummynet run --host` removes its
/// iptables rules, then SIGKILL.
pub struct Proc {
    pub child: Child,
    pub what: String,
}

impl Proc {
    pub fn spawn(mut cmd: Command, what: &str) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Proc {
            child,
            what: what.to_string(),
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"))
    }

    /// Sends SIGTERM and waits (bounded) for the exit.
    pub fn terminate(&mut self, limit: Duration) -> ExitStatus {
        kill(self.pid(), Signal::SIGTERM).expect("SIGTERM");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {limit:?} of SIGTERM",
                self.what
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Panics if the process already exited (a daemon that died early).
    pub fn assert_running(&mut self) {
        if let Some(s) = self.child.try_wait().expect("wait") {
            panic!("{} exited early: {s}", self.what);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Runs `cmd` to completion with its output captured, but for at most
/// `limit`: past it the command gets SIGTERM (a `dummynet shell` passes it
/// on to its command and tears its namespaces down), then SIGKILL, and the
/// test fails with what the command printed so far.
pub fn run_bounded(cmd: &mut Command, limit: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out_t = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err_t = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break stop_child(&mut child).expect("the child ends once killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    assert!(
        !timed_out,
        "{what}: still running after {limit:?}; stdout:\n{}\nstderr:\n{}",
        text(&stdout),
        text(&stderr)
    );
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Panics unless `out` is a success; returns its stdout.
pub fn expect_success(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Waits until something listens on TCP `port` in `ns` (read from the
/// namespace's /proc/net/tcp, so `ss` is not needed).
pub fn wait_listening(ns: &TestNs, port: u16) {
    let want = format!(":{port:04X}");
    let deadline = Instant::now() + SETUP_WAIT;
    loop {
        let out = ns
            .command("cat", &["/proc/net/tcp", "/proc/net/tcp6"])
            .output()
            .expect("cat /proc/net/tcp");
        let listening = text(&out.stdout).lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // local_address is ADDR:PORT in hex; state 0A is LISTEN.
            f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
        });
        if listening {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing listens on port {port} in {} after {SETUP_WAIT:?}",
            ns.name
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An iperf3 server for one test (`-1`: it serves one client and exits),
/// in `ns`, optionally bound to `bind`; returns once it listens.
pub fn iperf3_server(ns: &TestNs, port: u16, bind: Option<&str>) -> Proc {
    let port_s = port.to_string();
    let mut args = vec!["-s", "-1", "-p", port_s.as_str()];
    if let Some(b) = bind {
        args.extend_from_slice(&["-B", b]);
    }
    let mut cmd = ns.command("iperf3", &args);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let p = Proc::spawn(cmd, &format!("iperf3 server on port {port}"));
    wait_listening(ns, port);
    p
}

/// Waits for a daemon's control socket file to appear.
pub fn wait_for_socket(path: &Path, daemon: &mut Proc) {
    let deadline = Instant::now() + SETUP_WAIT;
    while !path.exists() {
        daemon.assert_running();
        assert!(
            Instant::now() < deadline,
            "no control socket at {} after {SETUP_WAIT:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `dummynet ipfw --socket SOCKET ARGS` (with `$DUMMYNET_SOCKET` pointing
/// elsewhere, so the option is what finds the daemon).
pub fn ipfw(socket: &Path, args: &[&str]) -> String {
    let out = run_bounded(
        Command::new(DUMMYNET)
            .arg("ipfw")
            .arg("--socket")
            .arg(socket)
            .args(args)
            .env("DUMMYNET_SOCKET", "/nonexistent/dummynet.sock"),
        Duration::from_secs(5),
        "dummynet ipfw",
    );
    expect_success(&out, &format!("dummynet ipfw {}", args.join(" ")))
}

/// `ping` at `SCHED_FIFO` priority 1 (`chrt -f 1`, util-linux): below
/// the daemon's data plane (10), above every ordinary task. An RTT then
/// measures the network and the emulator, not how long the scheduler kept
/// ping from reading its reply: with two busy loops beside the tests on
/// the 2-vCPU machine, a plain ping read replies late in runs, by 4 to
/// 40 ms in steps of the 4 ms scheduler tick, while the data plane
/// released them on time. For scripts; [`rt_ping`] for a `Command`.
pub const RT_PING: &str = "chrt -f 1 ping";

/// [`RT_PING`] with `args` inside `ns`.
pub fn rt_ping(ns: &TestNs, args: &[&str]) -> Command {
    let mut full = vec!["-f", "1", "ping"];
    full.extend_from_slice(args);
    ns.command("chrt", &full)
}

/// What one `ping` run printed.
#[derive(Debug)]
pub struct Ping {
    pub transmitted: u32,
    pub received: u32,
    /// (icmp_seq, RTT in ms) of every reply, in the order printed.
    pub replies: Vec<(u32, f64)>,
}

impl Ping {
    pub fn parse(out: &str) -> Ping {
        let mut replies = Vec::new();
        let mut counts = None;
        for line in out.lines() {
            if let (Some(seq), Some(time)) = (field(line, "icmp_seq="), field(line, "time=")) {
                if let (Ok(s), Ok(t)) = (seq.parse(), time.parse()) {
                    replies.push((s, t));
                }
            }
            if line.contains("packets transmitted") {
                let nums: Vec<u32> = line
                    .split([',', ' '])
                    .filter_map(|w| w.parse().ok())
                    .collect();
                if nums.len() >= 2 {
                    counts = Some((nums[0], nums[1]));
                }
            }
        }
        let (transmitted, received) =
            counts.unwrap_or_else(|| panic!("no ping summary in:\n{out}"));
        Ping {
            transmitted,
            received,
            replies,
        }
    }

    pub fn rtts(&self) -> Vec<f64> {
        self.replies.iter().map(|&(_, t)| t).collect()
    }

    pub fn avg(&self) -> f64 {
        let r = self.rtts();
        assert!(!r.is_empty(), "no replies: {self:?}");
        r.iter().sum::<f64>() / r.len() as f64
    }

    pub fn lost(&self) -> u32 {
        self.transmitted - self.received
    }
}

/// The value after `key` in a ping line, up to the next space.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    nearest_rank(&v, 50).expect("the median of no values")
}

/// `end.sum_received.bits_per_second` of an `iperf3 -J` report: the rate
/// the receiver saw (for UDP, only what arrived).
pub fn iperf3_received_bps(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("iperf3 -J output is not JSON ({e}):\n{json}"));
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| {
            panic!(
                "no end.sum_received in the iperf3 report (error: {}):\n{json}",
                v["error"]
            )
        })
}

/// The sender's largest smoothed RTT in an `iperf3 -J` TCP report
/// (`end.streams[0].sender.max_rtt`, from the kernel's TCP_INFO), in ms.
pub fn iperf3_max_rtt_ms(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("iperf3 -J output is not JSON ({e}):\n{json}"));
    let us = v["end"]["streams"][0]["sender"]["max_rtt"]
        .as_f64()
        .unwrap_or_else(|| panic!("no end.streams[0].sender.max_rtt in:\n{json}"));
    us / 1000.0
}

/// The `D dropped` of `dummynet stats`' first line.
pub fn stats_dropped(stats: &str) -> u64 {
    let line = stats
        .lines()
        .find(|l| l.starts_with("packets:"))
        .unwrap_or_else(|| panic!("no `packets:` line in dummynet stats:\n{stats}"));
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let i = words
        .iter()
        .position(|w| *w == "dropped")
        .unwrap_or_else(|| panic!("no `dropped` in {line}"));
    words[i - 1].parse().expect("a count before `dropped`")
}

/// The packet counter of rule `number` in `ipfw show` output.
pub fn rule_packets(show: &str, number: u32) -> u64 {
    let want = format!("{number:05}");
    let line = show
        .lines()
        .find(|l| l.split_whitespace().next() == Some(want.as_str()))
        .unwrap_or_else(|| panic!("no rule {number} in:\n{show}"));
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no packet counter in `{line}`"))
}

/// What `dummynet stats`' first line counts: the engine's conservation law
/// is `arrived == delivered + dropped + inside`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketTotals {
    pub arrived: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub inside: u64,
}

impl PacketTotals {
    /// Parses `packets: A arrived, D delivered, X dropped, I inside`.
    pub fn parse(stats: &str) -> PacketTotals {
        let line = stats
            .lines()
            .find(|l| l.starts_with("packets:"))
            .unwrap_or_else(|| panic!("no `packets:` line in dummynet stats:\n{stats}"));
        let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        let count = |name: &str| -> u64 {
            let i = words
                .iter()
                .position(|w| *w == name)
                .unwrap_or_else(|| panic!("no `{name}` in {line}"));
            words[i - 1]
                .parse()
                .unwrap_or_else(|_| panic!("no count before `{name}` in {line}"))
        };
        PacketTotals {
            arrived: count("arrived"),
            delivered: count("delivered"),
            dropped: count("dropped"),
            inside: count("inside"),
        }
    }
}

/// One row of the flow tables that `pipe show`, `queue show` and `sched
/// show` print (FreeBSD's `Tot_pkt/bytes Pkt/Byte Drp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRow {
    /// Packets that arrived at this queue or scheduler instance, including
    /// those it then dropped.
    pub tot_pkts: u64,
    /// Packets queued right now (not counting the delay line).
    pub len_pkts: u64,
    /// Packets it dropped when they arrived: queue full, `plr`, or an AQM.
    pub drops: u64,
}

/// Every flow row of a `show` output: the lines after a `BKT` header, whose
/// last five columns are the counters.
pub fn flow_rows(show: &str) -> Vec<FlowRow> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in show.lines() {
        if line.starts_with("BKT") {
            in_table = true;
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let counters: Option<Vec<u64>> = (f.len() > 5)
            .then(|| f[f.len() - 5..].iter().map(|w| w.parse().ok()).collect())
            .flatten();
        match counters {
            Some(c) if in_table => rows.push(FlowRow {
                tot_pkts: c[0],
                len_pkts: c[2],
                drops: c[4],
            }),
            _ => in_table = false,
        }
    }
    rows
}

/// The sum of `rows`' counters.
pub fn flow_sum(rows: &[FlowRow]) -> FlowRow {
    rows.iter().fold(
        FlowRow {
            tot_pkts: 0,
            len_pkts: 0,
            drops: 0,
        },
        |a, r| FlowRow {
            tot_pkts: a.tot_pkts + r.tot_pkts,
            len_pkts: a.len_pkts + r.len_pkts,
            drops: a.drops + r.drops,
        },
    )
}

fn iperf3_json(json: &str) -> serde_json::Value {
    serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("iperf3 -J output is not JSON ({e}):\n{json}"))
}

/// The data connection of an `iperf3 -J` TCP client, as the client saw it
/// (`start.connected[0]`): its address and port, the server's address and port.
pub fn iperf3_connection(json: &str) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    let c = &iperf3_json(json)["start"]["connected"][0];
    let addr = |k: &str| -> Ipv4Addr {
        c[k].as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no IPv4 start.connected[0].{k} in:\n{json}"))
    };
    let port = |k: &str| -> u16 {
        c[k].as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or_else(|| panic!("no start.connected[0].{k} in:\n{json}"))
    };
    (
        addr("local_host"),
        port("local_port"),
        addr("remote_host"),
        port("remote_port"),
    )
}

/// The payload bytes of one UDP datagram of an `iperf3 -u -J` run
/// (`start.test_start.blksize`: iperf3 sizes them to the path's MSS).
pub fn iperf3_blksize(json: &str) -> u64 {
    iperf3_json(json)["start"]["test_start"]["blksize"]
        .as_u64()
        .unwrap_or_else(|| panic!("no start.test_start.blksize in:\n{json}"))
}

/// The payload bytes of one full TCP segment of an `iperf3 -J` TCP run
/// (`start.tcp_mss_default`: the MSS less the timestamp option).
pub fn iperf3_mss(json: &str) -> u64 {
    iperf3_json(json)["start"]["tcp_mss_default"]
        .as_u64()
        .unwrap_or_else(|| panic!("no start.tcp_mss_default in:\n{json}"))
}

// ---------------------------------------------------------------------------
// The test networks: A — M — B for bridges, C — S for host daemons
// ---------------------------------------------------------------------------

/// The client's address on `a0` (bridge) or `c0` (host), TEST-NET-1.
pub const A_ADDR: &str = "192.0.2.1";
/// The server's address on `b0` (bridge) or `s0` (host).
pub const B_ADDR: &str = "192.0.2.2";

/// Three test namespaces for a bridge daemon, joined by veths, with
/// [`A_ADDR`] on `a0` and [`B_ADDR`] on `b0`, and a scratch directory:
///
/// ```text
///   A                     M (dummynet run --bridge m-a m-b)     B
///   a0 192.0.2.1/24 ───── m-a                    m-b ───── b0 192.0.2.2/24
/// ```
///
/// No daemon yet: [`Self::daemon`] starts one in M. Fields drop in order:
/// the namespaces (killing whatever still runs inside, a daemon too), then
/// the scratch directory.
pub struct BridgePath {
    pub a: TestNs,
    pub m: TestNs,
    pub b: TestNs,
    pub scratch: Scratch,
}

impl BridgePath {
    pub fn new() -> BridgePath {
        BridgePath::join(TestNs::new(), TestNs::new(), TestNs::new())
    }

    /// The path made of namespaces the caller prepared before any
    /// interface existed (a sysctl, say).
    pub fn join(a: TestNs, m: TestNs, b: TestNs) -> BridgePath {
        veth(&a, "a0", &m, "m-a");
        veth(&b, "b0", &m, "m-b");
        a.ip(&["addr", "add", &format!("{A_ADDR}/24"), "dev", "a0"]);
        b.ip(&["addr", "add", &format!("{B_ADDR}/24"), "dev", "b0"]);
        BridgePath {
            a,
            m,
            b,
            scratch: Scratch::new(),
        }
    }

    /// `dummynet run --bridge m-a m-b [--config NAME.conf] --socket
    /// NAME.sock EXTRA...` in M, its stderr into NAME.log in the scratch
    /// directory; returns once the socket is up.
    pub fn daemon(&self, name: &str, config: Option<&str>, extra: &[&str]) -> Daemon {
        let log = self.scratch.path(&format!("{name}.log"));
        let file = fs::File::create(&log).expect("create the daemon log");
        self.daemon_with_stderr(name, config, extra, file.into())
    }

    /// [`Self::daemon`] with its stderr on `stderr` (NAME.log stays empty).
    pub fn daemon_with_stderr(
        &self,
        name: &str,
        config: Option<&str>,
        extra: &[&str],
        stderr: Stdio,
    ) -> Daemon {
        let socket = self.scratch.path(&format!("{name}.sock"));
        let log = self.scratch.path(&format!("{name}.log"));
        let conf = config.map(|c| self.scratch.write(&format!("{name}.conf"), c));
        let mut args = vec!["run", "--bridge", "m-a", "m-b"];
        if let Some(conf) = &conf {
            args.extend(["--config", conf.to_str().expect("a UTF-8 path")]);
        }
        args.extend(["--socket", socket.to_str().expect("a UTF-8 path")]);
        args.extend_from_slice(extra);
        let mut cmd = self.m.command(DUMMYNET, &args);
        cmd.stdout(Stdio::null()).stderr(stderr);
        let proc = Proc::spawn(cmd, &format!("dummynet {}", args.join(" ")));
        Daemon::up(proc, socket, log)
    }

    /// The path with a daemon ([`Self::daemon`] named `daemon`) that
    /// lives as long as it does.
    pub fn start(self, config: Option<&str>, extra: &[&str]) -> Bridged {
        let daemon = self.daemon("daemon", config, extra);
        Bridged { daemon, path: self }
    }

    /// `ping -c COUNT -i INTERVAL -s SIZE` from A to B ([`RT_PING`]), with
    /// `-M dont` so that a large one is sent whole (at most about 1 s past
    /// the last).
    pub fn ping(&self, count: u32, interval: &str, size: u32) -> Ping {
        let out = run_bounded(
            &mut rt_ping(
                &self.a,
                &[
                    "-c",
                    &count.to_string(),
                    "-i",
                    interval,
                    "-s",
                    &size.to_string(),
                    "-M",
                    "dont",
                    "-W",
                    "1",
                    B_ADDR,
                ],
            ),
            Duration::from_secs(20),
            "ping A → B",
        );
        Ping::parse(&text(&out.stdout))
    }

    /// A ping flood from A to B in the background, bounded by `-c` and
    /// `-w` (and killed when the guard drops).
    pub fn flood(&self, size: u32, secs: u32) -> Proc {
        let mut cmd = self.a.command(
            "ping",
            &[
                "-f",
                "-c",
                "1000000",
                "-w",
                &secs.to_string(),
                "-s",
                &size.to_string(),
                "-M",
                "dont",
                B_ADDR,
            ],
        );
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        Proc::spawn(cmd, "ping -f A → B")
    }
}

/// A [`BridgePath`] and its daemon. Fields drop in order: the daemon
/// first, on SIGTERM (as a user would stop it), then the namespaces, then
/// the scratch directory.
pub struct Bridged {
    pub daemon: Daemon,
    pub path: BridgePath,
}

/// A host daemon's client C and server S, joined by a veth (`c0` — `s0`),
/// with [`A_ADDR`] on `c0` and [`B_ADDR`] on `s0`.
pub struct HostPair {
    pub c: TestNs,
    pub s: TestNs,
}

impl HostPair {
    pub fn new() -> HostPair {
        let (c, s) = (TestNs::new(), TestNs::new());
        veth(&c, "c0", &s, "s0");
        c.ip(&["addr", "add", &format!("{A_ADDR}/24"), "dev", "c0"]);
        s.ip(&["addr", "add", &format!("{B_ADDR}/24"), "dev", "s0"]);
        HostPair { c, s }
    }

    /// 10 pings C→S, 100 ms apart ([`RT_PING`]); ping must succeed.
    pub fn ping(&self) -> Ping {
        let out = run_bounded(
            &mut rt_ping(&self.c, &["-c", "10", "-i", "0.1", "-W", "1", B_ADDR]),
            Duration::from_secs(10),
            "ping C→S",
        );
        Ping::parse(&expect_success(&out, "ping C→S"))
    }
}

/// A daemon (bridge or host) started by a test: the process, its control
/// socket and the file its stderr goes to.
pub struct Daemon {
    pub proc: Proc,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Waits (at most [`SETUP_WAIT`]) for `proc`'s control socket; a
    /// daemon that exits first fails the test with its log.
    pub fn up(mut proc: Proc, socket: PathBuf, log: PathBuf) -> Daemon {
        let deadline = Instant::now() + SETUP_WAIT;
        while !socket.exists() {
            if let Some(s) = proc.child.try_wait().expect("wait") {
                let said = fs::read_to_string(&log).unwrap_or_default();
                panic!("{} exited early: {s}\n{said}", proc.what);
            }
            assert!(
                Instant::now() < deadline,
                "no control socket at {} after {SETUP_WAIT:?}\n{}",
                socket.display(),
                fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { proc, socket, log }
    }

    /// What the daemon wrote to its log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `dummynet stats --socket SOCKET`, which must succeed.
    pub fn stats(&self) -> String {
        let out = run_bounded(
            Command::new(DUMMYNET)
                .args(["stats", "--socket"])
                .arg(&self.socket),
            Duration::from_secs(5),
            "dummynet stats",
        );
        expect_success(&out, "dummynet stats")
    }

    /// `dummynet stats --json --socket SOCKET`, parsed.
    pub fn stats_json(&self) -> serde_json::Value {
        let out = run_bounded(
            Command::new(DUMMYNET)
                .args(["stats", "--json", "--socket"])
                .arg(&self.socket),
            Duration::from_secs(5),
            "dummynet stats --json",
        );
        let text = expect_success(&out, "dummynet stats --json");
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("stats --json ({e}): {text}"))
    }

    /// `dummynet ipfw --socket SOCKET ARGS`, which must succeed.
    pub fn ipfw(&self, args: &[&str]) -> String {
        ipfw(&self.socket, args)
    }

    /// SIGKILL, and the exit reaped.
    pub fn sigkill(&mut self) {
        kill(self.proc.pid(), Signal::SIGKILL).expect("SIGKILL");
        let _ = self.proc.child.wait();
    }
}

// ---------------------------------------------------------------------------
// The three modes: one path, client → emulator → server
// ---------------------------------------------------------------------------

/// How a test puts the emulator between its client and its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `dummynet shell --config ...`: the client is the shell's command,
    /// the server lives in the namespace the shell was started in.
    Shell,
    /// `dummynet run --bridge m-a m-b` in a namespace M between the client
    /// A (`a0`) and the server B (`b0`).
    Bridge,
    /// `dummynet run --host` in the client's namespace C, shaping its own
    /// traffic to the server S over a veth (`c0` — `s0`): loopback is not
    /// intercepted, so the server cannot share C.
    Host,
}

/// Client and server addresses in bridge and host modes.
const NEAR_ADDR: &str = A_ADDR;
const FAR_ADDR: &str = B_ADDR;

/// Longest one run of a script behind the emulator may take.
pub const RUN_LIMIT: Duration = Duration::from_secs(20);

impl Mode {
    /// The ipfw match for the client's outgoing traffic where the emulator
    /// sees it. In bridge mode every frame is classified twice (`in recv
    /// m-a`, then `out recv m-a xmit m-b`): `in` keeps it to one pass.
    pub fn up(self) -> &'static str {
        match self {
            Mode::Shell => "in recv app",
            Mode::Bridge => "in recv m-a",
            Mode::Host => "out",
        }
    }

    /// The ipfw match for traffic towards the client.
    pub fn down(self) -> &'static str {
        match self {
            Mode::Shell => "in recv peer",
            Mode::Bridge => "in recv m-b",
            Mode::Host => "in",
        }
    }

    /// The programs a test in this mode needs, besides `extra`.
    pub fn tools(self, extra: &[&'static str]) -> Vec<&'static str> {
        let mut t = extra.to_vec();
        if self == Mode::Host {
            t.push("iptables");
        }
        t
    }
}

/// A client and a server with the emulator between them, in one of the
/// three modes. Experiments are `sh` scripts run on the client's side with
/// the same environment in every mode: `$DUMMYNET_PEER` (the server's
/// address), `$DUMMYNET_SOCKET` (the emulator's control socket), `$DN` (the
/// binary) and `$OUT` (the scratch directory).
pub struct Testbed {
    pub mode: Mode,
    /// Where servers run: the shell's caller, B, or S.
    pub far: TestNs,
    /// Bridge and host modes: the client's namespace (A or C).
    near: Option<TestNs>,
    /// Bridge mode: the daemon's namespace (M).
    mid: Option<TestNs>,
    pub scratch: Scratch,
}

impl Testbed {
    pub fn new(mode: Mode) -> Testbed {
        let far = TestNs::new();
        let (near, mid) = match mode {
            Mode::Shell => (None, None),
            Mode::Bridge => {
                let (a, m) = (TestNs::new(), TestNs::new());
                veth(&a, "a0", &m, "m-a");
                veth(&far, "b0", &m, "m-b");
                (Some(a), Some(m))
            }
            Mode::Host => {
                let c = TestNs::new();
                veth(&c, "c0", &far, "s0");
                (Some(c), None)
            }
        };
        if let Some(near) = &near {
            let (near_if, far_if) = Self::ends(mode);
            near.ip(&["addr", "add", &format!("{NEAR_ADDR}/24"), "dev", near_if]);
            far.ip(&["addr", "add", &format!("{FAR_ADDR}/24"), "dev", far_if]);
            // As the shell does for its own path: both ends segment before
            // sending, so a frame is one wire packet and takes one slot.
            near.ip(&["link", "set", near_if, "gso_max_segs", "1"]);
            far.ip(&["link", "set", far_if, "gso_max_segs", "1"]);
        }
        Testbed {
            mode,
            far,
            near,
            mid,
            scratch: Scratch::new(),
        }
    }

    /// The client's and the server's interfaces (bridge and host modes).
    fn ends(mode: Mode) -> (&'static str, &'static str) {
        match mode {
            Mode::Bridge => ("a0", "b0"),
            _ => ("c0", "s0"),
        }
    }

    /// `template` with `{up}` and `{down}` replaced by this mode's matches.
    pub fn rules(&self, template: &str) -> String {
        template
            .replace("{up}", self.mode.up())
            .replace("{down}", self.mode.down())
    }

    /// Runs `sh -c script` on the client's side behind an emulator started
    /// for this run with the ipfw commands `config` (a [`Self::rules`]
    /// template), and stops the emulator afterwards; returns what the
    /// script printed. Bridge and host daemons must exit with status 0 on
    /// SIGTERM and remove their socket.
    pub fn run(&self, config: &str, script: &str) -> Output {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let conf = self
            .scratch
            .write(&format!("ipfw-{n}.conf"), &self.rules(config));
        let conf = conf.to_str().expect("a UTF-8 path");
        let what = format!("{:?} run {n}: {script}", self.mode);
        let Some(near) = &self.near else {
            let mut cmd = self.far.command(
                DUMMYNET,
                &["shell", "--config", conf, "--", "sh", "-c", script],
            );
            cmd.env("DN", DUMMYNET).env("OUT", &self.scratch.dir);
            return run_bounded(&mut cmd, RUN_LIMIT, &what);
        };
        let socket = self.scratch.path(&format!("ctl-{n}.sock"));
        let log_path = self.scratch.path(&format!("daemon-{n}.log"));
        let log = fs::File::create(&log_path).expect("create the daemon log");
        let sock = socket.to_str().expect("a UTF-8 path");
        let queue = (7000 + n % 1000).to_string();
        let (ns, args): (&TestNs, Vec<&str>) = match self.mode {
            Mode::Bridge => (
                self.mid.as_ref().expect("bridge mode has M"),
                vec!["run", "--bridge", "m-a", "m-b"],
            ),
            _ => (near, vec!["run", "--host", "--queue", &queue]),
        };
        let mut args = args;
        args.extend_from_slice(&["--config", conf, "--socket", sock]);
        let mut cmd = ns.command(DUMMYNET, &args);
        cmd.stdout(Stdio::null()).stderr(log);
        let proc = Proc::spawn(cmd, &format!("dummynet {}", args.join(" ")));
        let mut daemon = Daemon::up(proc, socket.clone(), log_path);
        let mut cmd = near.command("sh", &["-c", script]);
        cmd.env("DN", DUMMYNET)
            .env("OUT", &self.scratch.dir)
            .env("DUMMYNET_PEER", FAR_ADDR)
            .env("DUMMYNET_ADDR", NEAR_ADDR)
            .env("DUMMYNET_SOCKET", &socket);
        let out = run_bounded(&mut cmd, RUN_LIMIT, &what);
        let status = daemon.proc.terminate(Duration::from_secs(5));
        println!("{}:\n{}", daemon.proc.what, daemon.log());
        assert!(
            status.success(),
            "{}: exit status {status}",
            daemon.proc.what
        );
        assert!(!socket.exists(), "the control socket outlived the daemon");
        out
    }

    /// [`Self::run`] that must succeed; returns the script's stdout.
    pub fn run_ok(&self, config: &str, script: &str) -> String {
        let out = self.run(config, script);
        expect_success(&out, &format!("{:?} run: {script}", self.mode))
    }
}

/// What an `iperf3 -u -J` client reports of its datagrams: how many it
/// sent (`end.sum_sent.packets`), the highest sequence number the server
/// saw (`end.sum_received.packets`) and the gaps below it
/// (`end.sum_received.lost_packets`). Datagrams after the last one the
/// server saw are in neither count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpCounts {
    pub sent: u64,
    pub seen: u64,
    pub lost: u64,
}

pub fn iperf3_udp_counts(json: &str) -> UdpCounts {
    let v = iperf3_json(json);
    let get = |sum: &str, key: &str| {
        v["end"][sum][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no end.{sum}.{key} in the iperf3 report:\n{json}"))
    };
    UdpCounts {
        sent: get("sum_sent", "packets"),
        seen: get("sum_received", "packets"),
        lost: get("sum_received", "lost_packets"),
    }
}

/// The count of drops for `reason` (`aqm`, `queue-full`, ...) on `dummynet
/// stats`' `drops:` line; 0 when the line or the reason is absent (the
/// line lists non-zero reasons only).
pub fn stats_drops_for(stats: &str, reason: &str) -> u64 {
    let Some(line) = stats.lines().find_map(|l| l.strip_prefix("drops:")) else {
        return 0;
    };
    line.split(',')
        .filter_map(|item| item.trim().rsplit_once(' '))
        .find(|(r, _)| *r == reason)
        .map(|(_, n)| {
            n.parse()
                .unwrap_or_else(|_| panic!("no count after `{reason}` in `drops:{line}`"))
        })
        .unwrap_or(0)
}

/// The `(N ECN-marked)` of `dummynet stats`' first line; 0 when absent.
pub fn stats_ecn_marked(stats: &str) -> u64 {
    let line = stats
        .lines()
        .find(|l| l.starts_with("packets:"))
        .unwrap_or_else(|| panic!("no `packets:` line in dummynet stats:\n{stats}"));
    let Some(i) = line.find(" ECN-marked)") else {
        return 0;
    };
    let open = line[..i].rfind('(').expect("`(` before ECN-marked");
    line[open + 1..i]
        .parse()
        .unwrap_or_else(|_| panic!("no count before ECN-marked in {line}"))
}

/// [`iperf3_server`] that reports in JSON (`-J`) every 0.5 s: a client's
/// `--get-server-output` then carries the server's report as
/// `server_output_json`.
pub fn iperf3_server_json(ns: &TestNs, port: u16) -> Proc {
    let port_s = port.to_string();
    let mut cmd = ns.command("iperf3", &["-s", "-1", "-J", "-i", "0.5", "-p", &port_s]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let p = Proc::spawn(cmd, &format!("iperf3 -J server on port {port}"));
    wait_listening(ns, port);
    p
}

/// The receiver's payload bit/s of an `iperf3 -J --get-server-output` TCP
/// client (of an [`iperf3_server_json`]) from `from` to `to` seconds of its
/// test, from the server's own report (`server_output_json`): the bytes of
/// the server's intervals inside that span (50 ms of slack at each end),
/// over their total length. (The client's intervals count bytes written
/// into its socket, which run ahead of what arrives by the send buffer.)
pub fn iperf3_span_bps(json: &str, from: f64, to: f64) -> f64 {
    let v = iperf3_json(json);
    let intervals = v["server_output_json"]["intervals"]
        .as_array()
        .unwrap_or_else(|| panic!("no server_output_json.intervals in the iperf3 report:\n{json}"));
    let (mut bytes, mut secs) = (0.0, 0.0);
    for i in intervals {
        let s = &i["sum"];
        let (Some(start), Some(stop), Some(b)) =
            (s["start"].as_f64(), s["end"].as_f64(), s["bytes"].as_f64())
        else {
            continue;
        };
        if start >= from - 0.05 && stop <= to + 0.05 {
            bytes += b;
            secs += stop - start;
        }
    }
    assert!(
        secs >= 0.5 * (to - from),
        "server intervals cover {secs} s of {from}..{to} s in:\n{json}"
    );
    8.0 * bytes / secs
}
