//! `dummynet run --bridge` when a port's interface goes down or away: the
//! daemon must say so, wait without burning CPU, count the frames it could
//! not send, and forward again when the interface is back; or, with
//! `--exit-on-link-loss`, exit 69 naming the port when it is deleted.
//!
//! Each test builds its own three namespaces (`dnt-<pid>-<n>`, deleted by
//! a guard even when an assertion fails):
//!
//! ```text
//!   A                     M (dummynet run --bridge m-a m-b)     B
//!   a0 192.0.2.1/24 ───── m-a                    m-b ───── b0 192.0.2.2/24
//! ```
//!
//! and takes `m-a` down, up, away and back with `ip`. Traffic only goes
//! between A and B; every ping has a count and a deadline, and so has every
//! wait. The CPU and resume-time bounds are the ones the issue asks for.
//!
//! Without root or `ping`, each test prints `skipped: ...` and passes.

// Each test binary compiles live_common on its own; this one does not use
// all of it.
#[allow(dead_code)]
mod live_common;

use std::fs;
use std::process::ExitStatus;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use live_common::*;

/// A — M — B with `dummynet run --bridge m-a m-b --default-allow
/// EXTRA...` in M; returns once the first ping crosses.
fn start(extra: &[&str]) -> Bridged {
    let mut args = vec!["--default-allow"];
    args.extend_from_slice(extra);
    let bridged = BridgePath::new().start(None, &args);
    let ping = bridged.ping_from_a(3, "0.2");
    assert!(
        ping.received > 0,
        "no ping crossed the bridge at the start: {ping:?}\n{}",
        bridged.log()
    );
    bridged
}

impl Bridged {
    fn log(&self) -> String {
        self.daemon.log()
    }

    /// `ping -c COUNT -i INTERVAL` from A to B (at most about 1 s past the
    /// last one).
    fn ping_from_a(&self, count: u32, interval: &str) -> Ping {
        let out = run_bounded(
            &mut self.path.a.command(
                "ping",
                &["-c", &count.to_string(), "-i", interval, "-W", "1", B_ADDR],
            ),
            Duration::from_secs(15),
            "ping A → B",
        );
        Ping::parse(&text(&out.stdout))
    }

    /// The daemon's CPU time so far (all its threads: user + system), from
    /// /proc/PID/stat.
    fn cpu(&self) -> Duration {
        let pid = self.daemon.proc.pid();
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/stat: {e}"));
        // Fields after the command name, which is in parentheses and may
        // hold spaces: state is field 3, utime 14, stime 15.
        let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|w| w.parse().unwrap_or(0))
            .collect();
        let ticks = f[11] + f[12];
        let per_sec = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .and_then(|t| u64::try_from(t).ok())
            .filter(|t| *t > 0)
            .expect("the clock tick rate");
        Duration::from_nanos(ticks * 1_000_000_000 / per_sec)
    }

    /// `dummynet stats` of the daemon.
    fn stats(&self) -> String {
        self.daemon.stats()
    }

    /// Waits (at most `limit`) for the daemon to exit.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(s) = self.daemon.proc.child.try_wait().expect("wait") {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits (at most `limit`) until the daemon's log has `line`.
    fn wait_log(&self, line: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log();
            if log.contains(line) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "no `{line}` in the daemon's log after {limit:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The counter `name` of `dummynet stats`' bridge line (0 when absent: the
/// line lists non-zero counters only).
fn bridge_counter(stats: &str, name: &str) -> u64 {
    let Some(line) = stats.lines().find(|l| l.starts_with("bridge ")) else {
        panic!("no bridge line in dummynet stats:\n{stats}");
    };
    line.split_once(": ")
        .map_or("", |(_, list)| list)
        .split(", ")
        .filter_map(|item| item.rsplit_once(' '))
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| {
            v.parse()
                .unwrap_or_else(|_| panic!("no count after `{name}` in {line}"))
        })
}

/// The time of the first reply of a `ping -D` output (its `[SECONDS]`
/// prefix), as time since the epoch.
fn first_reply_at(out: &str) -> Option<Duration> {
    let line = out.lines().find(|l| l.contains("bytes from"))?;
    let stamp = line.strip_prefix('[')?.split(']').next()?;
    let secs: f64 = stamp.parse().ok()?;
    Some(Duration::from_secs_f64(secs))
}

#[test]
fn first_reply_times_are_read_from_ping_d() {
    let out = "PING 192.0.2.2 (192.0.2.2) 56(84) bytes of data.\n\
               [1718000000.250000] 64 bytes from 192.0.2.2: icmp_seq=3 ttl=64 time=0.3 ms\n\
               [1718000001.000000] 64 bytes from 192.0.2.2: icmp_seq=4 ttl=64 time=0.3 ms\n";
    assert_eq!(
        first_reply_at(out),
        Some(Duration::from_secs_f64(1_718_000_000.25))
    );
    assert_eq!(first_reply_at("no replies\n"), None);
    let stats = "packets: 1 arrived\nbridge m-a <-> m-b: non_ip_forwarded 7, m-a.link_down 1, \
                 m-a.link_down_dropped 12, m-b.rx_frames 3\n";
    assert_eq!(bridge_counter(stats, "m-a.link_down_dropped"), 12);
    assert_eq!(bridge_counter(stats, "m-a.link_down"), 1);
    assert_eq!(bridge_counter(stats, "m-b.link_down"), 0);
}

/// The issue's case: with its port down for 5 s the daemon spun at 93% of
/// a CPU, silently, and kept spinning once the port was back. Now: a line
/// in the log, under 5% of the 5 s in CPU (all the daemon's threads), the
/// frames for the port counted, and pings through again within 1 s of the
/// port coming up.
#[test]
fn a_port_that_goes_down_costs_no_cpu_and_forwards_again_when_up() {
    let _serial = serial();
    if !ready(
        "a_port_that_goes_down_costs_no_cpu_and_forwards_again_when_up",
        &["ip", "ping"],
    ) {
        return;
    }
    let mut br = start(&[]);
    br.path.m.ip(&["link", "set", "m-a", "down"]);
    let log = br.wait_log("bridge port m-a is down", Duration::from_secs(2));
    assert!(log.contains("m-a.link_down_dropped"), "{log}");
    // Pings from B towards A while the port is down: each is a frame due
    // out of m-a, which the bridge must count.
    let cpu_before = br.cpu();
    let started = Instant::now();
    let pings = run_bounded(
        &mut br
            .path
            .b
            .command("ping", &["-c", "10", "-i", "0.2", "-W", "1", A_ADDR]),
        Duration::from_secs(10),
        "ping B → A while m-a is down",
    );
    assert_eq!(Ping::parse(&text(&pings.stdout)).received, 0);
    std::thread::sleep(Duration::from_secs(5).saturating_sub(started.elapsed()));
    let down_for = started.elapsed();
    let cpu = br.cpu().saturating_sub(cpu_before);
    br.daemon.proc.assert_running();
    println!(
        "CPU while m-a was down: {:.3} s in {:.2} s ({:.2}%)",
        cpu.as_secs_f64(),
        down_for.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / down_for.as_secs_f64()
    );
    assert!(
        cpu.as_secs_f64() < 0.05 * down_for.as_secs_f64(),
        "the daemon used {cpu:?} of CPU in {down_for:?} with m-a down\n{}",
        br.log()
    );
    let stats = br.stats();
    assert_eq!(bridge_counter(&stats, "m-a.link_down"), 1, "{stats}");
    assert_eq!(bridge_counter(&stats, "m-a.link_losses"), 1, "{stats}");
    assert!(
        bridge_counter(&stats, "m-a.link_down_dropped") >= 10,
        "the 10 pings towards A were not counted:\n{stats}"
    );

    // Up again: pings every 20 ms from A, stamped by ping itself (-D).
    br.path.m.ip(&["link", "set", "m-a", "up"]);
    let up_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970");
    let out = run_bounded(
        &mut br.path.a.command(
            "ping",
            &["-D", "-c", "100", "-i", "0.02", "-W", "1", B_ADDR],
        ),
        Duration::from_secs(10),
        "ping A → B after m-a is up",
    );
    let out = text(&out.stdout);
    let first = first_reply_at(&out)
        .unwrap_or_else(|| panic!("no ping crossed once m-a was up:\n{out}\n{}", br.log()));
    let resumed = first.saturating_sub(up_at);
    println!(
        "first reply {:.0} ms after m-a was up",
        resumed.as_secs_f64() * 1e3
    );
    assert!(
        resumed < Duration::from_secs(1),
        "forwarding resumed {resumed:?} after m-a came up:\n{out}\n{}",
        br.log()
    );
    let log = br.wait_log("bridge port m-a is up again", Duration::from_secs(2));
    let stats = br.stats();
    assert_eq!(bridge_counter(&stats, "m-a.link_down"), 0, "{stats}");
    let status = br.daemon.proc.terminate(Duration::from_secs(5));
    assert!(status.success(), "{status}\n{log}");
}

/// A port deleted without --exit-on-link-loss: the daemon says so, waits,
/// and when an interface of the same name is made again it reopens the port
/// on it and forwards.
#[test]
fn a_deleted_port_is_reopened_when_an_interface_of_its_name_comes_back() {
    let _serial = serial();
    if !ready(
        "a_deleted_port_is_reopened_when_an_interface_of_its_name_comes_back",
        &["ip", "ping"],
    ) {
        return;
    }
    let mut br = start(&[]);
    // Deleting m-a deletes its peer a0 in A too.
    br.path.m.ip(&["link", "del", "m-a"]);
    let log = br.wait_log("bridge port m-a was deleted", Duration::from_secs(2));
    assert!(log.contains("--exit-on-link-loss"), "{log}");
    std::thread::sleep(Duration::from_millis(500));
    br.daemon.proc.assert_running();
    veth(&br.path.a, "a0", &br.path.m, "m-a");
    br.path
        .a
        .ip(&["addr", "add", &format!("{A_ADDR}/24"), "dev", "a0"]);
    br.wait_log(
        "bridge port m-a is back as a new interface",
        Duration::from_secs(2),
    );
    let ping = br.ping_from_a(10, "0.1");
    assert!(
        ping.received > 0,
        "nothing crossed the reopened port: {ping:?}\n{}",
        br.log()
    );
    let log = br.wait_log("bridge port m-a is up again", Duration::from_secs(2));
    let status = br.daemon.proc.terminate(Duration::from_secs(5));
    assert!(status.success(), "{status}\n{log}");
}

/// With --exit-on-link-loss, deleting a port ends the daemon with
/// EX_UNAVAILABLE (69) and a message that names the port.
#[test]
fn with_exit_on_link_loss_a_deleted_port_ends_the_daemon_with_69() {
    let _serial = serial();
    if !ready(
        "with_exit_on_link_loss_a_deleted_port_ends_the_daemon_with_69",
        &["ip", "ping"],
    ) {
        return;
    }
    let mut br = start(&["--exit-on-link-loss"]);
    br.path.m.ip(&["link", "del", "m-a"]);
    let status = br.wait_exit(Duration::from_secs(3));
    let log = br.log();
    let status =
        status.unwrap_or_else(|| panic!("still running 3 s after m-a was deleted:\n{log}"));
    assert_eq!(status.code(), Some(69), "{log}");
    assert!(
        log.contains("dummynet run: bridge port m-a was deleted")
            && log.contains("--exit-on-link-loss"),
        "{log}"
    );
    assert!(
        !br.daemon.socket.exists(),
        "the control socket outlived the daemon"
    );
}
