//! `dummynet shell` run by an ordinary user (uid and gid 65534, through
//! util-linux's `setpriv`; the tests themselves run as root to make their
//! namespaces): the shell enters a user namespace of its own, delays the
//! command's traffic, answers `dummynet ipfw` on a socket in the user's
//! runtime directory, and with pasta or slirp4netns reaches beyond itself.
//!
//! "Beyond" is kept inside namespaces the test makes: the shell runs in a
//! test namespace `host` whose only way anywhere is a veth to a second
//! one, `world`, where a TCP listener waits; another listens on `host`'s
//! loopback, which pasta maps to its gateway address (10.200.0.1, `world`'s
//! end of the veth) and slirp4netns to 10.0.2.2. No traffic leaves them.
//! Each test skips (and says why) without root, without its tools, or
//! where the kernel refuses unprivileged user namespaces.

#[allow(dead_code)]
mod live_common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dummynet_io::netns::Netns;
use live_common::*;

/// The ordinary user the shell runs as.
const NOBODY: u32 = 65534;

/// Longest a whole `dummynet shell` invocation may take.
const SHELL_LIMIT: Duration = Duration::from_secs(20);

/// `setpriv` arguments that make the rest run as [`NOBODY`], no groups.
fn as_nobody() -> Vec<String> {
    vec![
        format!("--reuid={NOBODY}"),
        format!("--regid={NOBODY}"),
        "--clear-groups".into(),
        "--".into(),
    ]
}

/// True when the test can run: root and the tools (see [`ready`]), and an
/// ordinary user may create a user namespace here.
fn ready_rootless(test: &str, tools: &[&str]) -> bool {
    let mut all = vec!["ip", "setpriv", "unshare", "sh"];
    all.extend_from_slice(tools);
    if !ready(test, &all) {
        return false;
    }
    let mut probe = Command::new("setpriv");
    probe
        .args(as_nobody())
        .args(["unshare", "--user", "--map-root-user", "true"]);
    let out = run_bounded(&mut probe, Duration::from_secs(10), "unshare --user");
    if !out.status.success() {
        println!(
            "skipped: {test}: unprivileged user namespaces are off here: {}",
            text(&out.stderr).trim()
        );
        return false;
    }
    true
}

/// A scratch directory the user can write to: `$OUT` for the script, and
/// `run/`, the user's `$XDG_RUNTIME_DIR` (mode 0700, theirs).
fn users_scratch() -> Scratch {
    let scratch = Scratch::new();
    let run = scratch.path("run");
    std::fs::create_dir(&run).expect("create run/");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).expect("chmod run/");
    for dir in [&scratch.dir, &run] {
        nix::unistd::chown(
            dir,
            Some(nix::unistd::Uid::from_raw(NOBODY)),
            Some(nix::unistd::Gid::from_raw(NOBODY)),
        )
        .expect("chown to the user");
    }
    scratch
}

/// Runs `dummynet shell OPTS -- sh -c SCRIPT` as the user inside `ns`.
fn shell_as_user(ns: &TestNs, scratch: &Scratch, opts: &[&str], script: &str) -> Output {
    let mut args = as_nobody();
    args.extend([DUMMYNET.to_string(), "shell".to_string()]);
    args.extend(opts.iter().map(|s| s.to_string()));
    args.extend(["--", "sh", "-c", script].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = ns.command("setpriv", &args);
    cmd.env("OUT", &scratch.dir)
        .env("XDG_RUNTIME_DIR", scratch.path("run"));
    run_bounded(
        &mut cmd,
        SHELL_LIMIT,
        &format!("dummynet shell {} (as uid {NOBODY})", opts.join(" ")),
    )
}

#[test]
fn a_user_gets_a_delayed_link_and_its_control_socket() {
    if !ready_rootless(
        "a_user_gets_a_delayed_link_and_its_control_socket",
        &["ping"],
    ) {
        return;
    }
    let _serial = serial();
    let host = TestNs::new();
    let scratch = users_scratch();
    let out = shell_as_user(
        &host,
        &scratch,
        &["--user-net", "none", "--up", "delay 20ms"],
        "id -u > $OUT/uid; \
         ping -c 3 -i 0.2 -W 2 $DUMMYNET_PEER > $OUT/ping.txt; \
         echo \"$DUMMYNET_SOCKET\" > $OUT/socket; \
         dummynet ipfw pipe 1 show > $OUT/show.txt; \
         dummynet ps --json > $OUT/ps.json; \
         unshare -m sh -c 'mount -t sysfs none /sys && \
             cat /sys/class/net/dn0/threaded' > $OUT/threaded",
    );
    let stderr = text(&out.stderr);
    expect_success(&out, "the shell as a user");
    println!("{stderr}");
    // Root inside its own user namespace, and nowhere else.
    assert_eq!(scratch.read("uid").trim(), "0");
    let ping = Ping::parse(&scratch.read("ping.txt"));
    println!("RTTs {:?} ms", ping.rtts());
    assert_eq!(ping.received, 3, "{ping:?}");
    for rtt in ping.rtts() {
        assert!(rtt >= 20.0, "an RTT of {rtt} ms, under the 20 ms delay");
    }
    let socket = scratch.read("socket");
    assert!(
        socket.starts_with(&format!(
            "{}/dummynet/shell-",
            scratch.path("run").display()
        )),
        "the socket is in the user's runtime directory: {socket}"
    );
    let show = scratch.read("show.txt");
    assert!(
        show.contains("00001:") && show.contains("20 ms"),
        "pipe 1 show: {show}"
    );
    // `dummynet ps` lists it, from the user's own directory, as the user's.
    let ps: serde_json::Value =
        serde_json::from_str(&scratch.read("ps.json")).expect("ps --json is JSON");
    let daemons = ps["daemons"].as_array().expect("a list of daemons");
    let ours: Vec<_> = daemons
        .iter()
        .filter(|d| d["socket"].as_str() == Some(socket.trim()))
        .collect();
    assert_eq!(ours.len(), 1, "ps lists the shell once: {ps}");
    assert_eq!(ours[0]["mode"]["kind"], "shell", "{ps}");
    assert_eq!(ours[0]["user"], NOBODY, "{ps}");
    assert!(
        stderr.contains("without root") && stderr.contains("reaches only $DUMMYNET_PEER"),
        "the shell says it has no way out: {stderr}"
    );
    // `--napi threaded` (the default) works in the user's namespaces too:
    // dn0's NAPI is threaded (read through a sysfs of the command's own
    // namespace), and nothing was refused.
    assert_eq!(scratch.read("threaded").trim(), "1", "dn0's threaded NAPI");
    assert!(
        !stderr.contains("receiving TCP stacks may run"),
        "threaded NAPI set up without root: {stderr}"
    );
}

#[test]
fn a_user_reaches_the_outside_through_pasta() {
    if !ready_rootless(
        "a_user_reaches_the_outside_through_pasta",
        &["pasta", "bash"],
    ) {
        return;
    }
    reaches_the_outside("pasta", "10.200.0.1");
}

#[test]
fn a_user_reaches_the_outside_through_slirp4netns() {
    if !ready_rootless(
        "a_user_reaches_the_outside_through_slirp4netns",
        &["slirp4netns", "bash"],
    ) {
        return;
    }
    reaches_the_outside("slirp4netns", "10.0.2.2");
}

/// The command, behind a 10 ms uplink, exchanges a line over TCP with a
/// listener in `world` and with one on `host`'s loopback (at
/// `host_loopback`, the tool's name for it); once the shell has ended, no
/// process of the tool is left in `host`.
fn reaches_the_outside(tool: &str, host_loopback: &str) {
    let _serial = serial();
    let host = TestNs::new();
    let world = TestNs::new();
    veth(&host, "h0", &world, "w0");
    host.ip(&["addr", "add", "10.200.0.2/24", "dev", "h0"]);
    host.ip(&["route", "add", "default", "via", "10.200.0.1"]);
    world.ip(&["addr", "add", "10.200.0.1/24", "dev", "w0"]);
    world.ip(&["addr", "add", "10.200.1.1/24", "dev", "w0"]);
    host.ip(&["addr", "add", "fd00:200::2/64", "dev", "h0", "nodad"]);
    host.ip(&["-6", "route", "add", "default", "via", "fd00:200::1"]);
    world.ip(&["addr", "add", "fd00:200::1/64", "dev", "w0", "nodad"]);
    world.ip(&["addr", "add", "fd00:201::1/64", "dev", "w0", "nodad"]);
    let far_port = unique_port();
    let far6_port = unique_port();
    let near_port = unique_port();
    let far = echo_once(&world, "10.200.1.1", far_port, "far");
    let far6 = echo_once(&world, "fd00:201::1", far6_port, "far6");
    let near = echo_once(&host, "127.0.0.1", near_port, "near");
    let scratch = users_scratch();
    let script = format!(
        "talk() {{ timeout 5 bash -c \"exec 3<>/dev/tcp/$1/$2 && echo hello >&3 && head -1 <&3\"; }}; \
         talk 10.200.1.1 {far_port} > $OUT/far.txt; \
         talk fd00:201::1 {far6_port} > $OUT/far6.txt; \
         talk {host_loopback} {near_port} > $OUT/near.txt"
    );
    let out = shell_as_user(
        &host,
        &scratch,
        &["--user-net", tool, "--up", "delay 10ms"],
        &script,
    );
    let stderr = text(&out.stderr);
    expect_success(&out, &format!("the shell as a user, through {tool}"));
    println!("{stderr}");
    assert!(
        stderr.contains(&format!("through {tool}")),
        "the shell names its way out: {stderr}"
    );
    assert_eq!(scratch.read("far.txt").trim(), "far says hello");
    assert_eq!(scratch.read("far6.txt").trim(), "far6 says hello", "IPv6");
    assert_eq!(scratch.read("near.txt").trim(), "near says hello");
    assert!(far.join().expect("far listener").is_some());
    assert!(far6.join().expect("far6 listener").is_some());
    assert!(near.join().expect("near listener").is_some());
    let pids = host.ip(&["netns", "pids", &host.name]);
    // By the program it was started as: Debian's pasta runs as passt.avx2.
    let left: Vec<String> = pids
        .split_whitespace()
        .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
        .map(|c| text(&c).replace('\0', " "))
        .filter(|c| {
            c.split(' ')
                .next()
                .is_some_and(|argv0| argv0.rsplit('/').next() == Some(tool))
        })
        .collect();
    assert!(left.is_empty(), "{tool} outlived the shell: {left:?}");
}

/// `dummynet experiment` by the user: like the shell, it enters a user
/// namespace of its own (its links' far ends and its traffic's outer sides
/// in a network namespace of its own), and a 3 s flow through 10 Mbit/s
/// gets its run's directory, with the link's view whole.
#[test]
fn a_user_runs_an_experiment() {
    if !ready_rootless("a_user_runs_an_experiment", &[]) {
        return;
    }
    let _serial = serial();
    let host = TestNs::new();
    let scratch = users_scratch();
    let file = scratch.write(
        "x.toml",
        "name = \"rootless\"\n\
         duration = \"3s\"\n\
         [link]\n\
         up = \"bw 10Mbit/s delay 10ms\"\n\
         down = \"bw 10Mbit/s delay 10ms\"\n\
         [[flow]]\n\
         cc = \"cubic\"\n",
    );
    let out_dir = scratch.path("out");
    let mut args = as_nobody();
    args.extend([
        DUMMYNET.to_string(),
        "experiment".into(),
        file.display().to_string(),
        "-o".into(),
        out_dir.display().to_string(),
        "--svg-only".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = host.command("setpriv", &args);
    cmd.env("XDG_RUNTIME_DIR", scratch.path("run"));
    let out = run_bounded(
        &mut cmd,
        Duration::from_secs(60),
        &format!("dummynet experiment (as uid {NOBODY})"),
    );
    expect_success(&out, "the experiment as a user");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("rootless/summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    println!("{summary:#}");
    let goodput = summary["flows"][0]["goodput_mean_bps"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(goodput > 2e6, "goodput {goodput}");
    assert!(goodput < 1.05 * 10e6, "the link's 10 Mbit/s: {goodput}");
    assert_eq!(summary["link"]["events_lost"], 0);
    let up = &summary["link"]["paths"][0];
    assert_eq!(up["number"], 1);
    assert!(up["delivered_packets"].as_u64().unwrap_or(0) > 500, "{up}");
}

/// Listens on `addr:port` inside `ns` and answers one client's line with
/// `NAME says LINE`; gives up after [`SHELL_LIMIT`]. The thread returns
/// the line it got, if a client came.
fn echo_once(ns: &TestNs, addr: &str, port: u16, name: &'static str) -> JoinHandle<Option<String>> {
    let netns = Netns::open_named(&ns.name).expect("open the test namespace");
    let at = format!("{addr}:{port}");
    // Bound on a thread inside `ns`: the socket stays there.
    let listener = netns
        .run(|| TcpListener::bind(&at))
        .expect("enter the test namespace")
        .unwrap_or_else(|e| panic!("listening on {at}: {e}"));
    listener.set_nonblocking(true).expect("non-blocking");
    std::thread::spawn(move || {
        let deadline = Instant::now() + SHELL_LIMIT;
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).ok()?;
                    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
                    let mut line = String::new();
                    BufReader::new(&stream).read_line(&mut line).ok()?;
                    let mut w = &stream;
                    writeln!(w, "{name} says {}", line.trim()).ok()?;
                    return Some(line);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        None
    })
}
