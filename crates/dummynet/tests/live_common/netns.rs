//! Daemons that shape another namespace (`live_netns`, `live_container`):
//! starting one from the test's own namespace, `dummynet ps` read about it,
//! and waiting for it to stop on its own.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{expect_success, run_bounded, wait_for_socket, Proc, Scratch, DUMMYNET, SETUP_WAIT};

/// Starts `dummynet run --host --netns TARGET --queue QUEUE` with
/// `config` from the test's own namespace, its control socket
/// `ctl.sock` and its stderr `daemon.log` in `scratch`; returns once the
/// socket is up.
pub fn host_netns_daemon(target: &str, queue: &str, scratch: &Scratch, config: &str) -> Proc {
    let config = scratch.write("ipfw.conf", config);
    let socket = scratch.path("ctl.sock");
    let log = std::fs::File::create(scratch.path("daemon.log")).expect("daemon log");
    let mut cmd = Command::new(DUMMYNET);
    cmd.args(["run", "--host", "--netns", target, "--queue", queue])
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        // The traffic's programs share the two cores with the daemon.
        .args(["--precision", "timer", "--nice"])
        .stdout(Stdio::null())
        .stderr(log);
    let mut d = Proc::spawn(cmd, "dummynet run --host --netns");
    wait_for_socket(&socket, &mut d);
    d
}

/// `dummynet ps --json`'s entry for `pid`, waited for (bounded): the
/// record is written just after the socket is up.
pub fn ps_entry(pid: u32) -> serde_json::Value {
    let deadline = Instant::now() + SETUP_WAIT;
    loop {
        if let Some(e) = ps_json_entry(pid) {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "dummynet ps --json does not list pid {pid}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn ps_json_entry(pid: u32) -> Option<serde_json::Value> {
    let out = run_bounded(
        Command::new(DUMMYNET).args(["ps", "--json"]),
        Duration::from_secs(5),
        "dummynet ps --json",
    );
    let text = expect_success(&out, "dummynet ps --json");
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("ps --json: {e}: {text}"));
    let daemons = v["daemons"]
        .as_array()
        .expect("daemons is an array")
        .clone();
    daemons
        .into_iter()
        .find(|d| d["pid"].as_u64() == Some(u64::from(pid)))
}

/// `dummynet ps`'s text line for `pid`.
pub fn ps_line(pid: u32) -> Option<String> {
    let out = run_bounded(
        Command::new(DUMMYNET).arg("ps"),
        Duration::from_secs(5),
        "dummynet ps",
    );
    expect_success(&out, "dummynet ps")
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .map(str::to_owned)
}

/// Waits (bounded) for `d` to exit on its own; its status code.
pub fn wait_exit(d: &mut Proc, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = d.child.try_wait().expect("wait") {
            return s.code();
        }
        assert!(
            Instant::now() < deadline,
            "{} still runs {limit:?} after its namespace went",
            d.what
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
