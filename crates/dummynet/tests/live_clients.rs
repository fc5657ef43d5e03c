//! Clients of the control socket that must not be trusted: floods of
//! connections, garbage, endless and huge requests, silent clients, users
//! outside the socket's group, and group members naming files they may or
//! may not read. Each runs against a real daemon (`run --bridge` in test
//! namespaces); other users are throwaway numeric ids set on a child
//! process (no /etc entries, nothing to clean up).

#[allow(dead_code)]
mod live_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use live_common::*;

/// A member of the socket's group (its primary group), and a user outside
/// it. Numbers no real account on a test machine uses.
const GROUP: u32 = 64_771;
const MEMBER: u32 = 64_772;
const OUTSIDER: u32 = 64_773;

/// A bridge daemon between two test namespaces, with its control socket in
/// a scratch directory others may traverse.
fn start(extra: &[&str]) -> Bridged {
    let path = BridgePath::new();
    std::fs::set_permissions(&path.scratch.dir, std::fs::Permissions::from_mode(0o755))
        .expect("open the scratch directory to other users");
    let mut args = vec!["--nice", "--precision", "timer", "--default-allow"];
    args.extend_from_slice(extra);
    path.start(None, &args)
}

impl Bridged {
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.daemon.proc.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.daemon.proc.pid()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

/// The answer line to `bytes` sent raw (bounded: 15 s), as JSON.
fn raw_answer(socket: &Path, bytes: &[u8]) -> serde_json::Value {
    let mut c = UnixStream::connect(socket).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    // The daemon may answer and close before all of it is sent.
    let _ = c.write_all(bytes);
    read_answer(&c)
}

fn read_answer(c: &UnixStream) -> serde_json::Value {
    let mut line = String::new();
    BufReader::new(c)
        .read_line(&mut line)
        .expect("an answer line");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer {line:?}: {e}"))
}

fn stderr_of(v: &serde_json::Value) -> &str {
    v["stderr"].as_str().unwrap_or("")
}

/// `ipfw show` from another client answers, and quickly, while `what`
/// holds its connection.
fn show_still_answers(d: &Bridged, what: &str) {
    let started = Instant::now();
    let shown = ipfw(&d.daemon.socket, &["show"]);
    assert!(shown.contains("65535"), "show while {what}: {shown}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "show took {:?} while {what}",
        started.elapsed()
    );
}

/// 10,000 connections in a row, each closing at once after nothing, half
/// a request or garbage, leave the daemon's descriptors as they were.
#[test]
fn ten_thousand_connections_leak_no_descriptor() {
    if !ready("ten_thousand_connections_leak_no_descriptor", &["ip"]) {
        return;
    }
    let _serial = serial();
    let d = start(&[]);
    let before = d.fds();
    assert!(before > 0, "cannot count the daemon's descriptors");
    let mut refused = 0;
    for i in 0..10_000u32 {
        let mut c = match UnixStream::connect(&d.daemon.socket) {
            Ok(c) => c,
            // The listen backlog full for a moment: not a leak; bounded.
            Err(_) => {
                refused += 1;
                assert!(refused < 1000, "{refused} connections refused");
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
        };
        let _ = match i % 4 {
            0 => Ok(()),
            1 => c.write_all(b"{\"argv\": [\"sh"),
            2 => c.write_all(b"\x00\xff garbage \x7f\n"),
            _ => c.write_all(b"{\"stats\": true}\n"),
        };
    }
    let give_up = Instant::now() + Duration::from_secs(20);
    while d.fds() > before && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(d.fds(), before, "descriptors leaked by 10,000 clients");
    show_still_answers(&d, "after 10,000 clients");
    stats_json_balances(&d);
}

/// `dummynet stats --json`: one object whose books balance and whose drops
/// by reason add up to `dropped`.
fn stats_json_balances(d: &Bridged) {
    let out = run_bounded(
        Command::new(DUMMYNET)
            .args(["stats", "--json", "--socket"])
            .arg(&d.daemon.socket),
        Duration::from_secs(5),
        "dummynet stats --json",
    );
    let text = expect_success(&out, "dummynet stats --json");
    let v: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("stats --json is not one JSON object ({e}): {text}"));
    let n = |p: &str| {
        v.pointer(p)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("{p} missing: {v}"))
    };
    assert_eq!(
        n("/totals/arrived"),
        n("/totals/delivered") + n("/totals/dropped") + n("/totals/inside"),
        "{v}"
    );
    let by_reason: u64 = v["drops_by_reason"]
        .as_object()
        .expect("drops_by_reason")
        .values()
        .filter_map(serde_json::Value::as_u64)
        .sum();
    assert_eq!(by_reason, n("/totals/dropped"), "{v}");
    assert!(
        v["backends"].as_object().is_some_and(|b| !b.is_empty()),
        "{v}"
    );
    n("/lateness_ns/p99");
    n("/memory_bytes/parts/queues/now");
}

/// Garbage, an endless line, a 100 MB message and a silent client are each
/// cut off at a bounded cost, while another client's `ipfw show` answers.
#[test]
fn abusive_requests_are_cut_off_at_a_bounded_cost() {
    if !ready("abusive_requests_are_cut_off_at_a_bounded_cost", &["ip"]) {
        return;
    }
    let _serial = serial();
    let d = start(&[]);
    let rss_before = d.rss_kib();

    let garbage = raw_answer(&d.daemon.socket, b"\x00\x01 not json at all }{\n");
    assert_eq!(garbage["status"], 64, "{garbage}");
    assert!(
        stderr_of(&garbage).contains("bad control request"),
        "{garbage}"
    );

    // A line that never ends: cut off at the 1 MiB limit, with the limit.
    let endless = UnixStream::connect(&d.daemon.socket).expect("connect");
    endless
        .set_write_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    endless
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let writer = {
        let mut w = endless.try_clone().expect("clone");
        std::thread::spawn(move || {
            let chunk = vec![b'['; 64 << 10];
            let mut sent = 0u64;
            // 100 MB, or until the daemon stops reading and closes.
            while sent < 100_000_000 {
                match w.write(&chunk) {
                    Ok(n) => sent += n as u64,
                    Err(_) => break,
                }
            }
            sent
        })
    };
    show_still_answers(&d, "a 100 MB line is being sent");
    let cut = read_answer(&endless);
    let sent = writer.join().expect("writer");
    assert_eq!(cut["status"], 64, "{cut}");
    assert!(
        stderr_of(&cut).contains("larger than 1048576 bytes"),
        "{cut}"
    );
    assert!(
        sent < 20_000_000,
        "the daemon took {sent} bytes of a 100 MB request before cutting it off"
    );
    drop(endless);

    // A client that says nothing holds its own thread only, and is told
    // why it is dropped when its 2 s are up.
    let silent = UnixStream::connect(&d.daemon.socket).expect("connect");
    silent
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let started = Instant::now();
    show_still_answers(&d, "a client is silent");
    let dropped = read_answer(&silent);
    let waited = started.elapsed();
    assert!(
        stderr_of(&dropped).contains("no complete request in time"),
        "{dropped}"
    );
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(12),
        "silent client cut off after {waited:?}"
    );

    let grown = d.rss_kib().saturating_sub(rss_before);
    assert!(
        grown < 64 << 10,
        "the daemon grew by {grown} KiB serving abusive clients"
    );
    show_still_answers(&d, "after the abusers left");
}

/// A raw request sent by a child process running as `uid`/`gid`, with no
/// supplementary groups: the test binary itself, re-run as
/// [`raw_client_child`] below. Its output: the answer line, or `connect:
/// ERROR`.
fn raw_as(uid: u32, gid: u32, socket: &Path, line: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary");
    let out = run_bounded(
        Command::new(exe)
            .args([
                "--exact",
                "raw_client_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("DNT_RAW_SOCKET", socket)
            .env("DNT_RAW_LINE", line)
            .uid(uid)
            .gid(gid),
        Duration::from_secs(20),
        "raw client as another user",
    );
    let stdout = text(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("DNT_RAW: ").map(|(_, answer)| answer))
        .unwrap_or_else(|| {
            panic!(
                "no answer from the raw client: {stdout} {}",
                text(&out.stderr)
            )
        })
        .to_string()
}

/// Not a test of its own: the body of [`raw_as`]'s child process, which
/// does nothing unless that function started it.
#[test]
fn raw_client_child() {
    let (Some(socket), Some(line)) = (
        std::env::var_os("DNT_RAW_SOCKET"),
        std::env::var("DNT_RAW_LINE").ok(),
    ) else {
        return;
    };
    let answer = match UnixStream::connect(&socket) {
        Err(e) => format!("connect: {e}"),
        Ok(mut c) => {
            c.set_read_timeout(Some(Duration::from_secs(15)))
                .expect("timeout");
            // A refused client may find the connection closed before it
            // has sent anything (the daemon answers at accept): the
            // refusal is still there to read.
            let _ = c.write_all(format!("{line}\n").as_bytes());
            // One line: a refused client's connection is reset after it
            // (the daemon never read the request), so read no further.
            let mut got = String::new();
            match BufReader::new(c.take(1 << 20)).read_line(&mut got) {
                Ok(_) => got.trim_end().to_string(),
                Err(e) => format!("read: {e}"),
            }
        }
    };
    println!("DNT_RAW: {answer}");
}

fn request(argv: &str) -> String {
    let argv: Vec<&str> = argv.split_whitespace().collect();
    serde_json::json!({ "argv": argv }).to_string()
}

/// `--socket-group`: a member drives the daemon, a user outside the group
/// cannot connect, and a member names a file only if it can read it
/// itself (the daemon opens it with the member's identity, not root's).
#[test]
fn socket_group_members_drive_the_daemon_and_read_only_their_own_files() {
    if !ready(
        "socket_group_members_drive_the_daemon_and_read_only_their_own_files",
        &["ip"],
    ) {
        return;
    }
    let _serial = serial();
    let group = GROUP.to_string();
    let d = start(&["--socket-group", &group]);

    // The member's own `dummynet ipfw show`, as the CLI sends it.
    let out = run_bounded(
        Command::new(DUMMYNET)
            .args(["ipfw", "--socket"])
            .arg(&d.daemon.socket)
            .arg("show")
            .uid(MEMBER)
            .gid(GROUP),
        Duration::from_secs(10),
        "ipfw show as a group member",
    );
    let shown = expect_success(&out, "ipfw show as a group member");
    assert!(shown.contains("65535"), "{shown}");

    // Outside the group: the socket file's mode refuses it.
    let out = run_bounded(
        Command::new(DUMMYNET)
            .args(["ipfw", "--socket"])
            .arg(&d.daemon.socket)
            .arg("show")
            .uid(OUTSIDER)
            .gid(OUTSIDER),
        Duration::from_secs(10),
        "ipfw show as an outsider",
    );
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    assert!(text(&out.stderr).contains("permission denied"), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // And were the mode loosened, the daemon's own check (SO_PEERCRED).
    std::fs::set_permissions(&d.daemon.socket, std::fs::Permissions::from_mode(0o666))
        .expect("chmod the socket");
    let answer = raw_as(OUTSIDER, OUTSIDER, &d.daemon.socket, &request("show"));
    assert!(answer.contains("permission denied"), "{answer}");
    assert!(!answer.contains("65535"), "{answer}");

    // Files: one only root may read, one the group may, one the member
    // owns. Sent raw, as a client that skips the CLI's own check would.
    let trace = "1\n2\n3\n4\n5\n";
    let secret = d.path.scratch.write("secret.trace", trace);
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let shared = d.path.scratch.write("shared.trace", trace);
    std::os::unix::fs::chown(&shared, None, Some(GROUP)).expect("chown");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let own = d.path.scratch.write("own.trace", trace);
    std::os::unix::fs::chown(&own, Some(MEMBER), Some(MEMBER)).expect("chown");
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let cmd = |pipe: u32, f: &Path| request(&format!("pipe {pipe} config trace {}", f.display()));

    let refused = raw_as(MEMBER, GROUP, &d.daemon.socket, &cmd(1, &secret));
    assert!(refused.contains("\"status\":64"), "{refused}");
    assert!(refused.contains("permission denied"), "{refused}");
    assert!(refused.contains("secret.trace"), "{refused}");
    for (pipe, file) in [(2, &shared), (3, &own)] {
        let taken = raw_as(MEMBER, GROUP, &d.daemon.socket, &cmd(pipe, file));
        assert!(
            taken.contains("\"status\":0"),
            "{}: {taken}",
            file.display()
        );
    }
    let pipes = ipfw(&d.daemon.socket, &["pipe", "show"]);
    assert!(
        !pipes.contains("00001:"),
        "the refused pipe exists: {pipes}"
    );
    assert!(
        pipes.contains("00002:") && pipes.contains("00003:"),
        "{pipes}"
    );
    // Root (the test) may still name the secret one.
    let as_root = raw_answer(
        &d.daemon.socket,
        format!("{}\n", cmd(1, &secret)).as_bytes(),
    );
    assert_eq!(as_root["status"], 0, "{as_root}");
}

/// The protocol through a real daemon: a batch the engine refuses leaves
/// nothing applied and says which command and what kind of refusal; a
/// good one is taken whole; `ipfw --json` answers one JSON document.
#[test]
fn batches_and_json_views_through_the_socket() {
    if !ready("batches_and_json_views_through_the_socket", &["ip"]) {
        return;
    }
    let _serial = serial();
    let d = start(&[]);
    let refused = raw_answer(
        &d.daemon.socket,
        b"{\"commands\": [\"pipe 4 config bw 1Mbit/s\", \"add 40 pipe 4 ip from any to any\", \
          \"pipe 9 delete\"]}\n",
    );
    assert_eq!(refused["status"], 65, "{refused}");
    assert_eq!(refused["kind"], "not_found", "{refused}");
    assert_eq!(refused["error"]["index"], 2, "{refused}");
    let pipes = ipfw(&d.daemon.socket, &["pipe", "show"]);
    assert!(!pipes.contains("00004"), "half applied: {pipes}");
    let taken = raw_answer(
        &d.daemon.socket,
        b"{\"commands\": [\"pipe 4 config bw 1Mbit/s delay 7ms\", \
          [\"add\", \"40\", \"pipe\", \"4\", \"ip\", \"from\", \"any\", \"to\", \"any\"]]}\n",
    );
    assert_eq!(taken["status"], 0, "{taken}");
    let out = run_bounded(
        Command::new(DUMMYNET)
            .args(["ipfw", "--socket"])
            .arg(&d.daemon.socket)
            .args(["--json", "pipe", "4", "show"]),
        Duration::from_secs(5),
        "dummynet ipfw --json pipe 4 show",
    );
    let text = expect_success(&out, "dummynet ipfw --json pipe 4 show");
    let v: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {text}"));
    assert_eq!(v["pipes"][0]["link"]["bandwidth_bps"], 1_000_000, "{v}");
    assert_eq!(v["pipes"][0]["link"]["delay_ns"], 7_000_000, "{v}");
    let shown = raw_answer(
        &d.daemon.socket,
        b"{\"argv\": [\"show\", \"40\"], \"json\": true}\n",
    );
    let rules: serde_json::Value =
        serde_json::from_str(shown["stdout"].as_str().unwrap_or("")).expect("JSON rules");
    assert_eq!(
        rules["rules"][0]["rule"], "pipe 4 ip from any to any",
        "{rules}"
    );
}
