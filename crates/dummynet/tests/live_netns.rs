//! `dummynet run --netns` and `dummynet ps`: a daemon started in the
//! test's own namespace shapes another namespace's traffic from outside
//! it, as it would a container's, and `ps` lists it while it runs.
//!
//! Each test builds its own namespaces (`dnt-<pid>-<n>`, deleted by a guard
//! even when an assertion fails). C stands in for a container:
//!
//! ```text
//!   C ("container")          S                          O
//!   c0 192.0.2.1/24 ─────── s0 192.0.2.2/24
//!                           s1 198.51.100.2/24 ─────── o0 198.51.100.1/24
//! ```
//!
//! The daemon runs `add 100 pipe 1 ip from any to any out` with `delay
//! 20ms` inside C: C's pings to S come back 20 ms later, S's pings to O are
//! untouched, and the NFQUEUE is bound in C only. Every ping has a count
//! and a deadline, and so has every wait.
//!
//! Without root or `ping`, each test prints `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use live_common::*;

const TOOLS: &[&str] = &["ip", "ping"];

const S_ADDR: &str = B_ADDR;
const O_ADDR: &str = "198.51.100.1";

/// `pipe 1 config delay 20ms` on the container's outgoing traffic.
const DELAY_20MS: &str = "pipe 1 config delay 20ms\n\
                          add 100 pipe 1 ip from any to any out\n\
                          add 65000 allow ip from any to any\n";

/// The container C, its neighbour S, and S's other neighbour O.
struct World {
    c: TestNs,
    s: TestNs,
    _o: TestNs,
}

impl World {
    fn new() -> World {
        let HostPair { c, s } = HostPair::new();
        let o = TestNs::new();
        veth(&s, "s1", &o, "o0");
        s.ip(&["addr", "add", "198.51.100.2/24", "dev", "s1"]);
        o.ip(&["addr", "add", "198.51.100.1/24", "dev", "o0"]);
        World { c, s, _o: o }
    }

    /// `/run/netns/NAME` of C.
    fn c_path(&self) -> String {
        format!("/run/netns/{}", self.c.name)
    }

    /// C's namespace inode.
    fn c_inode(&self) -> u64 {
        std::fs::metadata(self.c_path())
            .expect("stat /run/netns/C")
            .ino()
    }
}

/// 10 pings from `ns` to `to`, 100 ms apart ([`RT_PING`]: the medians
/// are held to 2 ms).
fn ping(ns: &TestNs, to: &str) -> Ping {
    let out = run_bounded(
        &mut rt_ping(ns, &["-c", "10", "-i", "0.1", "-W", "1", to]),
        Duration::from_secs(10),
        "ping",
    );
    Ping::parse(&expect_success(
        &out,
        &format!("ping {to} from {}", ns.name),
    ))
}

/// The NFQUEUE numbers bound in `ns` (None: the test's own namespace).
fn queues_in(ns: Option<&TestNs>) -> Vec<String> {
    let file = "/proc/self/net/netfilter/nfnetlink_queue";
    let text = match ns {
        Some(ns) => {
            let out = run_bounded(
                &mut ns.command("cat", &[file]),
                Duration::from_secs(5),
                "cat nfnetlink_queue",
            );
            text(&out.stdout)
        }
        None => std::fs::read_to_string(file).unwrap_or_default(),
    };
    text.lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn median_ms(p: &Ping) -> f64 {
    median(&p.rtts())
}

/// By path: C's own pings take 20 ms more, S's do not; the queue is C's
/// alone; the control socket works from here; `ps` lists the daemon with
/// C's inode, name and the socket, in text and JSON, and no longer once it
/// stopped; C's traffic is unshaped again.
#[test]
fn netns_by_path_shapes_the_container_and_ps_lists_it() {
    if !ready("netns_by_path_shapes_the_container_and_ps_lists_it", TOOLS) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    let base_c = ping(&w.c, S_ADDR);
    let base_s = ping(&w.s, O_ADDR);
    assert_eq!(base_c.lost() + base_s.lost(), 0);

    let scratch = Scratch::new();
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut d = host_netns_daemon(&w.c_path(), &queue, &scratch, DELAY_20MS);
    let pid = d.child.id();
    let socket = scratch.path("ctl.sock");

    let e = ps_entry(pid);
    println!("ps --json: {e}");
    assert_eq!(e["mode"]["kind"], "host", "{e}");
    assert_eq!(e["mode"]["queue"].as_u64(), queue.parse().ok(), "{e}");
    assert_eq!(e["netns"]["inode"].as_u64(), Some(w.c_inode()), "{e}");
    assert_eq!(e["netns"]["name"].as_str(), Some(w.c.name.as_str()), "{e}");
    assert_eq!(e["socket"].as_str(), socket.to_str(), "{e}");
    assert!(e["uptime_s"].as_u64().is_some(), "{e}");
    let line = ps_line(pid).expect("dummynet ps lists the daemon");
    println!("ps: {line}");
    assert!(line.contains(&format!("host queue {queue}")), "{line}");
    assert!(
        line.contains(&format!("net:[{}] netns {}", w.c_inode(), w.c.name)),
        "{line}"
    );
    assert!(line.contains(socket.to_str().unwrap()), "{line}");

    // The queue is claimed in C: a second daemon for C on it is refused
    // (69, naming the holder), before it touches anything.
    let second = run_bounded(
        Command::new(DUMMYNET)
            .args(["run", "--host", "--netns", &w.c_path(), "--queue", &queue])
            .arg("--socket")
            .arg(scratch.path("second.sock")),
        Duration::from_secs(10),
        "a second dummynet run --netns",
    );
    let err = text(&second.stderr);
    assert_eq!(second.status.code(), Some(69), "{err}");
    assert!(
        err.contains(&format!("net:[{}]", w.c_inode())) && err.contains(&pid.to_string()),
        "{err}"
    );
    // The queue is bound in C, not here and not in S.
    assert!(queues_in(Some(&w.c)).contains(&queue), "not bound in C");
    assert!(!queues_in(Some(&w.s)).contains(&queue), "bound in S");
    assert!(!queues_in(None).contains(&queue), "bound in the test's own");

    let shaped = ping(&w.c, S_ADDR);
    let beside = ping(&w.s, O_ADDR);
    println!(
        "C→S RTTs {:?} ms (before {:?}); S→O {:?} ms",
        shaped.rtts(),
        base_c.rtts(),
        beside.rtts()
    );
    assert_eq!(shaped.lost(), 0);
    let more = median_ms(&shaped) - median_ms(&base_c);
    assert!((19.5..=22.0).contains(&more), "C: {more} ms more, not 20");
    let more_s = median_ms(&beside) - median_ms(&base_s);
    assert!(more_s < 2.0, "S's own traffic was slowed by {more_s} ms");
    // The control socket is in the test's file system and namespace.
    let show = ipfw(&socket, &["show"]);
    assert!(rule_packets(&show, 100) >= 10, "{show}");

    let status = d.terminate(Duration::from_secs(5));
    assert!(status.success(), "daemon after SIGTERM: {status}");
    assert!(ps_json_entry(pid).is_none(), "ps lists a stopped daemon");
    assert!(ps_line(pid).is_none(), "ps lists a stopped daemon");
    assert!(
        !Path::new(&format!("/run/dummynet/daemons/{pid}.json")).exists(),
        "the record outlived the daemon"
    );
    assert!(!queues_in(Some(&w.c)).contains(&queue), "queue left in C");
    let after = ping(&w.c, S_ADDR);
    assert_eq!(after.lost(), 0, "C black-holed after the daemon");
    assert!(
        median_ms(&after) < 5.0,
        "C still shaped: {:?}",
        after.rtts()
    );
}

/// By PID of a process inside C (`ip netns exec C sleep`): the same
/// shaping, `ps` names the PID; when the process ends, the daemon says so
/// and exits with status 69, and `ps` forgets it.
#[test]
fn netns_by_pid_follows_the_process_and_stops_when_it_ends() {
    if !ready(
        "netns_by_pid_follows_the_process_and_stops_when_it_ends",
        &["ip", "ping", "sleep"],
    ) {
        return;
    }
    let _serial = serial();
    let w = World::new();
    let base = ping(&w.c, S_ADDR);
    // `ip netns exec` execs `sleep`: the child's pid is the sleeper's.
    let mut sleeper = Proc::spawn(w.c.command("sleep", &["60"]), "sleep in C");
    let sleeper_pid = sleeper.child.id();
    // Until `ip` has entered C and exec'd, the pid is not yet in C.
    let deadline = Instant::now() + SETUP_WAIT;
    while std::fs::metadata(format!("/proc/{sleeper_pid}/ns/net"))
        .map(|m| m.ino())
        .ok()
        != Some(w.c_inode())
    {
        assert!(Instant::now() < deadline, "sleep never entered C");
        std::thread::sleep(Duration::from_millis(10));
    }

    let scratch = Scratch::new();
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut d = host_netns_daemon(&sleeper_pid.to_string(), &queue, &scratch, DELAY_20MS);
    let pid = d.child.id();
    let e = ps_entry(pid);
    println!("ps --json: {e}");
    assert_eq!(e["netns"]["inode"].as_u64(), Some(w.c_inode()), "{e}");
    assert_eq!(
        e["netns"]["pid"].as_u64(),
        Some(u64::from(sleeper_pid)),
        "{e}"
    );
    // ps finds C's name by its inode, though --netns gave a PID.
    assert_eq!(e["netns"]["name"].as_str(), Some(w.c.name.as_str()), "{e}");

    let shaped = ping(&w.c, S_ADDR);
    println!("C→S RTTs {:?} ms (before {:?})", shaped.rtts(), base.rtts());
    let more = median_ms(&shaped) - median_ms(&base);
    assert!((19.5..=22.0).contains(&more), "C: {more} ms more, not 20");

    sleeper.terminate(Duration::from_secs(5));
    let code = wait_exit(&mut d, Duration::from_secs(5));
    let log = scratch.read("daemon.log");
    println!("{log}");
    assert_eq!(code, Some(69), "exit status when the namespace went: {log}");
    assert!(
        log.contains(&format!("process {sleeper_pid}")) && log.contains("has ended"),
        "{log}"
    );
    assert!(ps_json_entry(pid).is_none(), "ps lists a stopped daemon");
}

/// `run --bridge --netns /run/netns/M`: the bridge's interfaces are M's;
/// `ip netns del M` while it runs stops it with status 69.
#[test]
fn netns_bridge_inside_and_stops_when_the_name_goes() {
    if !ready("netns_bridge_inside_and_stops_when_the_name_goes", TOOLS) {
        return;
    }
    let _serial = serial();
    // A reaches B only through the bridge: no baseline without it (veths
    // alone add some tens of µs).
    let path = BridgePath::new();
    let (a, m, scratch) = (&path.a, &path.m, &path.scratch);
    let config = scratch.write(
        "ipfw.conf",
        "pipe 1 config delay 15ms\n\
         add 100 pipe 1 ip from any to any in recv m-a\n\
         add 65000 allow ip from any to any\n",
    );
    let socket = scratch.path("ctl.sock");
    let log = scratch.path("daemon.log");
    let mut cmd = Command::new(DUMMYNET);
    cmd.args(["run", "--bridge", "m-a", "m-b", "--netns"])
        .arg(format!("/run/netns/{}", m.name))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .args(["--precision", "timer", "--nice"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("daemon log"));
    let proc = Proc::spawn(cmd, "dummynet run --bridge --netns");
    let Daemon { proc: mut d, .. } = Daemon::up(proc, socket, log);
    let e = ps_entry(d.child.id());
    assert_eq!(e["mode"]["kind"], "bridge", "{e}");
    assert_eq!(e["mode"]["interfaces"][0], "m-a", "{e}");

    let shaped = ping(a, S_ADDR);
    println!("A→B RTTs {:?} ms", shaped.rtts());
    let rtt = median_ms(&shaped);
    assert!(
        (15.0..=17.0).contains(&rtt),
        "{rtt} ms, not 15 ms more than none"
    );

    run_ok("ip", &["netns", "del", &m.name]);
    let code = wait_exit(&mut d, Duration::from_secs(5));
    let log = scratch.read("daemon.log");
    println!("{log}");
    assert_eq!(code, Some(69), "exit status when the name went: {log}");
    // `ip netns del` unmounts the name, then removes the file: the daemon
    // may look in between, and then finds a file that names another thing.
    assert!(
        log.contains("is gone") || log.contains("no longer names the network namespace"),
        "{log}"
    );
}

/// What `--netns` refuses, each with its reason, before it claims or
/// creates anything (no socket, no record).
#[test]
fn netns_errors_say_what_is_wrong() {
    if !ready("netns_errors_say_what_is_wrong", &["ip", "true"]) {
        return;
    }
    let scratch = Scratch::new();
    let plain = scratch.write("plain", "not a namespace\n");
    // A PID that was and is no more (reuse within this test is unlikely;
    // either way it is not a live daemon target we could confuse).
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let gone_pid = gone.id();
    gone.wait().expect("wait true");
    let cases: Vec<(String, &str)> = vec![
        (plain.display().to_string(), "is not a network namespace"),
        ("/proc/self/ns/uts".into(), "a namespace of another type"),
        (
            scratch.path("missing").display().to_string(),
            "no such file",
        ),
        ("4194305".into(), "no process 4194305"),
        (gone_pid.to_string(), "ended"),
        ("".into(), "empty"),
    ];
    let socket = scratch.path("ctl.sock");
    for (arg, want) in &cases {
        let out = run_bounded(
            Command::new(DUMMYNET)
                .args(["run", "--host", "--netns", arg.as_str(), "--socket"])
                .arg(&socket),
            Duration::from_secs(10),
            "dummynet run --netns (bad)",
        );
        let err = text(&out.stderr);
        println!("--netns {arg:?}: {err}");
        assert_eq!(out.status.code(), Some(1), "--netns {arg:?}: {err}");
        assert!(
            err.contains(want),
            "--netns {arg:?}: wanted {want:?} in {err}"
        );
        assert!(!socket.exists(), "--netns {arg:?} made a socket");
    }

    // Not permitted: as `nobody`, entering a namespace (setns) is refused.
    if find_program("setpriv").is_some() {
        let ns = TestNs::new();
        let bin = scratch.path("dummynet");
        std::fs::copy(DUMMYNET, &bin).expect("copy the binary");
        let out = run_bounded(
            Command::new("setpriv")
                .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
                .arg(&bin)
                .args(["run", "--host", "--netns"])
                .arg(format!("/run/netns/{}", ns.name))
                .arg("--socket")
                .arg(&socket),
            Duration::from_secs(10),
            "dummynet run --netns as nobody",
        );
        let err = text(&out.stderr);
        println!("as nobody: {err}");
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("not permitted to enter"), "{err}");
    }
}
