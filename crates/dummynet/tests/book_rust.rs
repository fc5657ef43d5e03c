//! The book's Rust examples, as printed: tests/docs.rs checks that every
//! ```` ```rust test ```` block of README.md and docs/book/src is here line for
//! line, and these tests run them.
//!
//! The engine's example runs on the virtual clock, as it is. Each live one
//! (a `Shell`) runs inside a network namespace the test makes (so the
//! shell's veth end lands there, not on the host): the test runs this same
//! test binary again under `ip netns exec`, with `DN_BOOK_INSIDE` set and a
//! stand-in `my-app` (a ping of its last argument) on PATH. Without root or
//! `ip`/`ping` it prints `skipped: ...` and passes.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

type Example = Result<(), Box<dyn std::error::Error>>;

/// docs/book/src/guides/developers.md, "In tests: Rust".
#[rustfmt::skip]
fn developers_guide() -> Example {
    let link = dummynet::Shell::builder().preset("lte").start()?;
    let out = link.command("my-app").arg(link.peer().to_string()).output()?;
    assert!(out.status.success());
    Ok(())
}

/// docs/book/src/reference/rust.md.
#[rustfmt::skip]
fn rust_reference() -> Example {
    let link = dummynet::Shell::builder().up("bw 10Mbit/s delay 20ms").start()?;
    let out = link.command("ping").args(["-c", "3", &link.peer().to_string()]).output()?;
    link.pipe(1).modify("delay 50ms")?;                 // mid-test
    link.apply(["pipe 1 config bw 1Mbit/s", "pipe 2 config bw 1Mbit/s"])?;   // all or nothing
    let report = link.stats()?;                         // arrived, delivered, dropped, inside...
    drop(link);                                         // or link.stop(): everything is removed
    assert!(out.status.success(), "ping through the link: {out:?}");
    assert!(report.delivered >= 6, "3 pings and 3 replies delivered: {report:?}");
    assert_eq!(
        report.arrived,
        report.delivered + report.dropped + report.inside,
        "the books balance: {report:?}"
    );
    Ok(())
}

/// docs/book/src/internals/layout.md: the engine on virtual time, no I/O.
#[rustfmt::skip]
fn engine_api() -> Example {
    use dummynet_engine::{Direction, Engine, FlowKey, PacketInfo, Verdict};
    use dummynet_lang::{parse_command, Statement};
    let (seed, now) = (1, 0);
    let info = PacketInfo {
        len: 1500,
        key: FlowKey::default(),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    };
    let mut left = Vec::new();
    let mut e: Engine<u64> = Engine::new(seed);        // u64: the caller's handle of a packet
    for line in ["pipe 1 config bw 1Mbit/s delay 10ms", "add 100 pipe 1 ip from any to any"] {
        if let Statement::Apply(command) = parse_command(line)?.statement {
            e.apply(now, command)?;                    // typed config; rejected = unchanged
        }
    }
    match e.input(now, info, 7) {                      // Pass | Drop{reason} | Queued
        Verdict::Queued { .. } => {}
        other => panic!("pipe 1 holds it, not {other:?}"),
    }
    while let Some(wake_at) = e.next_deadline() {      // sleep until then
        while let Some(out) = e.poll(wake_at) {        // departures and late drops, in time order
            left.push((out.payload, out.at));
        }
    }
    assert_eq!(left, [(7, 22_000_000)]);               // 12 ms at 1 Mbit/s, then 10 ms
    Ok(())
}

#[test]
fn the_engine_api_example_runs() {
    if let Err(e) = engine_api() {
        panic!("{e}");
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A namespace and a scratch directory, removed even when the test fails.
struct Sandbox {
    netns: String,
    dir: PathBuf,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `example` here if this is the run inside the namespace; else makes
/// the namespace and runs the test `name` of this binary again inside it.
fn in_a_namespace(name: &str, example: fn() -> Example) {
    if std::env::var_os("DN_BOOK_INSIDE").is_some() {
        if let Err(e) = example() {
            panic!("{name}: {e}");
        }
        return;
    }
    if !is_root() {
        println!("skipped: {name}: needs root (network namespaces)");
        return;
    }
    let tag = format!("dnb-{}-{name}", std::process::id());
    let sandbox = Sandbox {
        netns: tag.clone(),
        dir: std::env::temp_dir().join(&tag),
    };
    std::fs::create_dir_all(&sandbox.dir).expect("scratch directory");
    let app = sandbox.dir.join("my-app");
    std::fs::write(
        &app,
        "#!/bin/sh\nfor a; do :; done\nping -c 1 -W 5 \"$a\" >/dev/null\n",
    )
    .expect("my-app");
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let made = Command::new("ip").args(["netns", "add", &tag]).status();
    if !made.is_ok_and(|s| s.success()) {
        println!("skipped: {name}: cannot make a network namespace (ip netns add)");
        return;
    }
    let me = std::env::current_exe().expect("this test binary");
    let path = format!(
        "{}:{}",
        sandbox.dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .args(["-k", "5", "120", "ip", "netns", "exec", &tag])
        .arg(me)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("DN_BOOK_INSIDE", "1")
        .env("PATH", path)
        .output()
        .expect("run the example inside the namespace");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} inside {tag}: {}\n{text}",
        out.status
    );
    assert!(
        text.contains("1 passed"),
        "{name} did not run inside {tag}:\n{text}"
    );
}

#[test]
fn the_developers_guides_rust_example_runs() {
    in_a_namespace("the_developers_guides_rust_example_runs", developers_guide);
}

#[test]
fn the_rust_references_example_runs() {
    in_a_namespace("the_rust_references_example_runs", rust_reference);
}
