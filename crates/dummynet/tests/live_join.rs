//! `dummynet shell --join`: two shells joined to a first one's emulator.
//! Each gets its own pipes and rules (distinct from the first shell's and
//! from each other's), its own delay (checked by ping), and leaves nothing
//! behind when it ends: on its own, or SIGKILLed (the daemon notices the
//! connection close). The emulator's books balance throughout.
//!
//! Everything runs in a namespace the test creates (`dnt-<pid>-<n>`, the
//! shells' far ends), removed by its guard even when an assertion fails;
//! each ping has a count and a deadline, each wait a bound. Without root
//! or `ping`, the test prints `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::path::Path;
use std::time::{Duration, Instant};

use live_common::*;
use nix::sys::signal::{kill, Signal};

/// A joined shell that pings its far end 5 times into `out`, then idles.
fn joined(ns: &TestNs, socket: &Path, delay_ms: u32, out: &Path) -> Proc {
    let link = format!("delay {delay_ms}ms");
    let script = format!(
        "ping -c 5 -i 0.2 -W 2 \"$DUMMYNET_PEER\" > {0}.tmp 2>&1; mv {0}.tmp {0}; sleep 60",
        out.display()
    );
    let sock = socket.to_string_lossy().into_owned();
    let cmd = ns.command(
        DUMMYNET,
        &[
            "shell", "--join", &sock, "--nat", "off", "--up", &link, "--down", &link, "--", "sh",
            "-c", &script,
        ],
    );
    Proc::spawn(cmd, "a joined dummynet shell")
}

/// Waits (bounded) for `path`, and reads it.
fn wait_file(path: &Path, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {} after {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (bounded) until `ipfw show` and `pipe show` satisfy `ok`.
fn wait_config(socket: &Path, what: &str, ok: impl Fn(&str, &str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rules = ipfw(socket, &["show"]);
        let pipes = ipfw(socket, &["pipe", "show"]);
        if ok(&rules, &pipes) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not so after 10 s:\n{rules}\n{pipes}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn has_rule(rules: &str, n: u16) -> bool {
    rules.lines().any(|l| l.starts_with(&format!("{n:05} ")))
}

fn has_pipe(pipes: &str, n: u32) -> bool {
    pipes.lines().any(|l| l.starts_with(&format!("{n:05}:")))
}

/// `arrived = delivered + dropped + inside`, from `stats --json`.
fn books_balance(socket: &Path) {
    let out = run_bounded(
        std::process::Command::new(DUMMYNET)
            .arg("stats")
            .arg("--socket")
            .arg(socket)
            .arg("--json"),
        Duration::from_secs(5),
        "dummynet stats",
    );
    let text = expect_success(&out, "dummynet stats --json");
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("stats JSON");
    let t = &v["totals"];
    let n = |k: &str| {
        t[k].as_u64()
            .unwrap_or_else(|| panic!("no totals.{k} in {t}"))
    };
    assert!(n("arrived") > 0, "{t}");
    assert_eq!(
        n("arrived"),
        n("delivered") + n("dropped") + n("inside"),
        "the books: {t}"
    );
}

#[test]
fn joined_shells_get_their_own_pipes_and_rules_and_leave_nothing_behind() {
    if !ready("joined shells", &["ip", "ping"]) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let socket = scratch.path("shared.sock");
    let sock = socket.to_string_lossy().into_owned();
    let mut first = Proc::spawn(
        ns.command(
            DUMMYNET,
            &[
                "shell",
                "--nat",
                "off",
                "--socket",
                &sock,
                "--up",
                "delay 1ms",
                "--down",
                "delay 1ms",
                "--",
                "sleep",
                "60",
            ],
        ),
        "the first dummynet shell",
    );
    wait_for_socket(&socket, &mut first);
    let (out_a, out_b) = (scratch.path("ping-a"), scratch.path("ping-b"));
    let mut a = joined(&ns, &socket, 5, &out_a);
    // One after the other: link numbers 1 and 2, in order.
    wait_config(&socket, "link 1 joined", |r, _| has_rule(r, 1004));
    let mut b = joined(&ns, &socket, 15, &out_b);
    wait_config(&socket, "link 2 joined", |r, _| has_rule(r, 1008));

    // Distinct pipes and rules, the first shell's untouched.
    wait_config(&socket, "every pipe and rule", |r, p| {
        [100, 200, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011]
            .iter()
            .all(|&n| has_rule(r, n))
            && (1..=6).all(|n| has_pipe(p, n))
    });
    let rules = ipfw(&socket, &["show"]);
    assert!(
        rules.contains("pipe 3 ip from any to any in recv app-1"),
        "{rules}"
    );
    assert!(
        rules.contains("pipe 6 ip from any to any in recv peer-2"),
        "{rules}"
    );

    // Each link's delay: 2 x 5 ms and 2 x 15 ms.
    for (out, rtt) in [(&out_a, 10.0), (&out_b, 30.0)] {
        let ping = Ping::parse(&wait_file(out, Duration::from_secs(20)));
        assert_eq!(ping.lost(), 0, "{ping:?}");
        let avg = ping.avg();
        assert!(
            avg >= rtt && avg < rtt + 5.0,
            "RTT {avg:.2} ms through a {rtt} ms link: {ping:?}"
        );
    }
    books_balance(&socket);

    // A ends on its own (SIGTERM, passed to its command): its pipes, rules
    // and interfaces go; B's stay.
    let status = a.terminate(Duration::from_secs(10));
    assert!(
        status.code().is_some() || status.signal_or_none(),
        "{status}"
    );
    wait_config(&socket, "link 1 removed", |r, p| {
        (1004..=1007).all(|n| !has_rule(r, n))
            && !has_pipe(p, 3)
            && !has_pipe(p, 4)
            && has_rule(r, 1008)
            && has_pipe(p, 5)
    });
    let dn_a = format!("dn-{}", a.pid());
    assert!(!ns.links().contains(&dn_a), "{dn_a} left: {:?}", ns.links());

    // B is killed outright: the daemon removes its link all the same.
    let dn_b = format!("dn-{}", b.pid());
    kill(b.pid(), Signal::SIGKILL).expect("SIGKILL");
    let _ = b.child.wait();
    wait_config(&socket, "link 2 removed after SIGKILL", |r, p| {
        (1008..=1011).all(|n| !has_rule(r, n))
            && !has_pipe(p, 5)
            && !has_pipe(p, 6)
            && has_rule(r, 100)
            && has_pipe(p, 1)
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while ns.links().contains(&dn_b) {
        assert!(Instant::now() < deadline, "{dn_b} left: {:?}", ns.links());
        std::thread::sleep(Duration::from_millis(50));
    }
    books_balance(&socket);
    first.assert_running();
}

trait SignalOrNone {
    fn signal_or_none(&self) -> bool;
}

impl SignalOrNone for std::process::ExitStatus {
    fn signal_or_none(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.signal().is_some()
    }
}
