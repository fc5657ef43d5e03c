//! The soak in one minute: `scripts/soak.sh 1` against the binary under
//! test, 30 s in bridge mode and 30 s in host mode, with floods at several
//! times what the pipes carry, TCP, thousands of mask-made instances and
//! queues, a reconfiguration storm and polling clients all at once.
//!
//! The script judges memory (RSS flat after warm-up), forwarding (delivered
//! rises between every two samples) and the books (balanced and empty once
//! the traffic stops); this test asserts that it passed and reads its
//! samples again, so that a script that sampled nothing cannot pass. Nothing
//! here is about speed: the data plane runs at `--precision timer` and the
//! binary is a debug build on a machine other tests may load.
//!
//! Isolation is the script's: namespaces named `dns<pid>-*`, deleted on any
//! exit; traffic only between them; every loop ends by its deadline.

#[allow(dead_code)]
mod live_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use live_common::*;

/// Two modes of 30 s, the drain and the namespaces' setup, with room for a
/// loaded machine; past it the script is stopped (its trap cleans up).
const LIMIT: Duration = Duration::from_secs(240);

/// One row of `samples.csv`: (seconds, RSS kB, delivered, arrived,
/// dropped, inside).
type Row = (u64, u64, u64, u64, u64, u64);

/// The rows of `samples.csv`, by mode, checked against its header.
fn samples(csv: &str) -> BTreeMap<String, Vec<Row>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("a header line").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name} in samples.csv: {header:?}"))
    };
    let (mode, t, rss) = (col("mode"), col("t_s"), col("rss_kb"));
    let (arrived, delivered, dropped, inside) = (
        col("arrived"),
        col("delivered"),
        col("dropped"),
        col("inside"),
    );
    let mut by_mode: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| -> u64 {
            f.get(i)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("column {} of `{line}` is not a count", header[i]))
        };
        by_mode.entry(f[mode].to_string()).or_default().push((
            num(t),
            num(rss),
            num(delivered),
            num(arrived),
            num(dropped),
            num(inside),
        ));
    }
    by_mode
}

#[test]
fn soak_one_minute_in_bridge_and_host_mode() {
    let tools = Mode::Host.tools(&["ip", "iperf3", "bash", "awk"]);
    if !ready("soak_one_minute_in_bridge_and_host_mode", &tools) {
        return;
    }
    let _serial = serial();
    let scratch = Scratch::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/soak.sh");
    let out = run_bounded(
        Command::new("bash")
            .arg(&script)
            .args(["--bin", DUMMYNET, "--precision", "timer", "--out"])
            .arg(&scratch.dir)
            .arg("1"),
        LIMIT,
        "scripts/soak.sh 1",
    );
    let report = expect_success(&out, "scripts/soak.sh 1");
    assert!(report.contains("soak passed"), "{report}");

    let by_mode = samples(&scratch.read("samples.csv"));
    for mode in ["bridge", "host"] {
        let rows = by_mode
            .get(mode)
            .unwrap_or_else(|| panic!("no {mode} samples:\n{report}"));
        // 30 s at one sample every 2 s: at least a few even if the machine
        // is slow to answer `stats`.
        assert!(rows.len() >= 5, "{mode}: {} samples:\n{report}", rows.len());
        for w in rows.windows(2) {
            assert!(w[1].0 > w[0].0, "{mode}: time not increasing: {w:?}");
            assert!(w[1].2 > w[0].2, "{mode}: forwarding stopped: {w:?}");
        }
        for r in rows {
            // Each sample is one snapshot of the engine's books.
            assert_eq!(r.3, r.2 + r.4 + r.5, "{mode}: books of {r:?}");
            assert!(r.1 > 0, "{mode}: no RSS in {r:?}");
        }
        // The floods are several times what their pipes carry.
        let last = rows[rows.len() - 1];
        assert!(
            last.4 > 0,
            "{mode}: an overload that dropped nothing: {last:?}"
        );
        assert!(
            report.contains(&format!("== {mode}:")),
            "no {mode} section:\n{report}"
        );
    }
}

/// The daemon's resident memory, from /proc.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// Found by the soak: the daemon locks its memory, and each control client
/// is served on a thread of its own. Locked at mapping time, every client
/// thread's whole stack (2 MiB) was resident, and glibc keeps finished
/// threads' stacks for reuse: 30 clients at once took an idle daemon from
/// 29 to 53 MB, for good. Locked as touched, a client costs what it uses.
#[test]
fn concurrent_clients_leave_the_daemons_memory_as_it_was() {
    if !ready(
        "concurrent_clients_leave_the_daemons_memory_as_it_was",
        &["ip"],
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    ns.ip(&["link", "add", "sa", "type", "veth", "peer", "name", "sb"]);
    ns.ip(&["link", "set", "sa", "up"]);
    ns.ip(&["link", "set", "sb", "up"]);
    let scratch = Scratch::new();
    let config = scratch.write("c.conf", "add 65000 allow ip from any to any\n");
    let socket = scratch.path("ctl.sock");
    let mut daemon = Proc::spawn(
        {
            let mut c = ns.command(
                DUMMYNET,
                &["run", "--bridge", "sa", "sb", "--precision", "timer"],
            );
            c.arg("--config").arg(&config).arg("--socket").arg(&socket);
            c.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            c
        },
        "dummynet run --bridge",
    );
    wait_for_socket(&socket, &mut daemon);
    let pid = daemon.child.id();
    // One client first, so that what every client shares (the control
    // thread's buffers, the first rendering) is counted before.
    ipfw(&socket, &["show"]);
    let before = rss_kb(pid);
    for _ in 0..3 {
        let clients: Vec<std::thread::JoinHandle<()>> = (0..30)
            .map(|_| {
                let socket = socket.clone();
                std::thread::spawn(move || {
                    ipfw(&socket, &["show"]);
                })
            })
            .collect();
        for c in clients {
            c.join().expect("a client thread");
        }
    }
    daemon.assert_running();
    let after = rss_kb(pid);
    println!("daemon RSS: {before} kB before the clients, {after} kB after");
    // 30 whole stacks would be 60 MiB (and 40 MiB of them kept); what a
    // client touches is a few pages.
    assert!(
        after <= before + 12 * 1024,
        "90 clients, 30 at a time, took the daemon's RSS from {before} kB to {after} kB"
    );
}
