//! The library's embedding API ([`dummynet::Shell`], [`dummynet::Bridge`])
//! end to end, as a Rust test would use it: a link started in-process,
//! `ping` through it, the delay changed mid-test and seen in the RTTs, a
//! refused batch that changes nothing, counters whose books balance, the
//! packet events, and nothing left behind once the handle is dropped.
//!
//! Isolation as in `live.rs`: the shell is started from a namespace the
//! test creates (`ShellBuilder::netns`), so its veth end lands there; the
//! bridge runs between namespaces the test creates. Every ping has a count
//! and a deadline. Without root or `ip`/`ping`, each test prints
//! `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use dummynet::events::Event;
use dummynet::{Bridge, Error, ErrorKind, EventFilter, Napi, Shell, StartFailure, Subscription};
use live_common::*;

const TOOLS: &[&str] = &["ip", "ping"];

/// Five pings 200 ms apart, within 10 s, from `cmd`; all must come back.
fn ping(mut cmd: std::process::Command, what: &str) -> Ping {
    let out = run_bounded(&mut cmd, Duration::from_secs(10), what);
    let ping = Ping::parse(&expect_success(&out, what));
    assert_eq!(ping.lost(), 0, "{what}: {ping:?}");
    ping
}

const PING_ARGS: [&str; 6] = ["-c", "5", "-i", "0.2", "-w", "10"];

/// The arrivals on `iface` of IPv4 packets of `len` bytes (an ICMP echo of
/// ping's 56 bytes is 84) among the events waiting in `sub`, taken until
/// it has been quiet for a while or has ended.
fn arrivals(sub: &Subscription, iface: &str, len: u32) -> usize {
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match sub.recv_timeout(Duration::from_millis(300)) {
            Ok(Event::Arrival {
                iface: i, len: l, ..
            }) if i == iface && l == len => n += 1,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    n
}

/// The books of a report: every packet that arrived was delivered,
/// dropped, or is still inside.
fn assert_books_balance(r: &dummynet::Report) {
    assert_eq!(
        r.arrived,
        r.delivered + r.dropped + r.inside,
        "arrived = delivered + dropped + inside: {r:?}"
    );
}

#[test]
fn a_shell_started_in_process_is_driven_and_torn_down() {
    if !ready("a_shell_started_in_process_is_driven_and_torn_down", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let before = ns.links();
    let shell = Shell::builder()
        .up("delay 10ms")
        .down("delay 10ms")
        .netns(format!("/run/netns/{}", ns.name))
        .start()
        .expect("the shell starts");
    let interface = shell.interface().to_string();
    assert!(
        ns.links().contains(&interface),
        "{interface} in {:?}",
        ns.links()
    );
    let events = shell.events(EventFilter::default());
    let peer = shell.peer().to_string();
    let pinging = || {
        let mut cmd = shell.command("ping");
        cmd.args(PING_ARGS).arg(&peer);
        cmd
    };

    // 10 ms each way.
    let first = ping(pinging(), "ping through the shell");
    println!("10 ms each way: RTTs {:?} ms", first.rtts());
    assert!(first.rtts().iter().all(|&t| t >= 20.0), "{first:?}");

    // The uplink's delay to 50 ms, mid-test: the RTT follows.
    shell.pipe(1).modify("delay 50ms").expect("modify pipe 1");
    assert_eq!(
        shell.pipe(1).show().expect("pipe 1").link.delay_ns,
        50_000_000
    );
    let second = ping(pinging(), "ping after the change");
    println!("50 ms up, 10 ms down: RTTs {:?} ms", second.rtts());
    assert!(second.rtts().iter().all(|&t| t >= 60.0), "{second:?}");
    assert!(
        median(&second.rtts()) > median(&first.rtts()) + 30.0,
        "{first:?} then {second:?}"
    );

    // A batch the engine refuses as a whole: the first command is not
    // applied either.
    let e = shell
        .apply(["pipe 2 config delay 1ms", "pipe 9 modify delay 5ms"])
        .expect_err("pipe 9 does not exist");
    assert_eq!(e.kind(), Some(ErrorKind::NotFound), "{e}");
    assert_eq!(e.at().and_then(|a| a.index), Some(1), "{e:?}");
    assert_eq!(
        shell.pipe(2).show().expect("pipe 2").link.delay_ns,
        10_000_000
    );
    // One that does not parse: nothing is sent.
    let e = shell
        .apply(["pipe 2 config delay 1ms", "pipe 2 config dealy 5ms"])
        .expect_err("a typo");
    assert_eq!(e.kind(), Some(ErrorKind::Syntax), "{e}");
    assert_eq!(
        shell.pipe(2).show().expect("pipe 2").link.delay_ns,
        10_000_000
    );
    let e = shell.pipe(7).show().expect_err("no pipe 7");
    assert_eq!(e.kind(), Some(ErrorKind::NotFound));
    // A good batch goes through whole.
    shell
        .apply(["pipe 1 config delay 5ms", "pipe 2 config delay 5ms"])
        .expect("a good batch");
    let pipes = shell.show_pipes().expect("pipe show");
    let delays: Vec<u64> = pipes.pipes.iter().map(|p| p.link.delay_ns).collect();
    assert_eq!(delays, [5_000_000, 5_000_000]);

    // The books: ten echo requests and ten replies at least went through.
    let stats = shell.stats().expect("stats");
    assert_books_balance(&stats);
    assert!(stats.delivered >= 20, "{stats:?}");
    let rules = shell.show_rules(false).expect("show");
    let up = rules
        .rules
        .iter()
        .find(|r| r.number == 100)
        .expect("rule 100");
    assert!(up.packets >= 10, "{up:?}");

    // The events: each echo request arrived on the emulator's `app` side.
    let seen = arrivals(&events, "app", 84);
    assert_eq!(
        seen,
        10,
        "echo requests seen arriving (lost: {})",
        events.lost()
    );

    // Dropped: the emulator stops (the event stream ends), and the veth end
    // in the test's namespace is gone at once.
    // Events still buffered (IPv6 router solicitations cross the link on
    // their own) come first; then the stream must end, within 5 s.
    drop(shell);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let end = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(_) if !left.is_zero() => continue,
            Ok(_) => break None,
            Err(e) => break Some(e),
        }
    };
    assert_eq!(end, Some(RecvTimeoutError::Disconnected));
    assert_eq!(ns.links(), before, "left behind after the drop");
}

/// An IPv4-only shell's link carries what its program sends and nothing
/// else: no router solicitation or MLD report of its ends (which an AQM
/// in its dropping state would drop, into an experiment's counts).
#[test]
fn an_ipv4_only_shell_carries_only_what_is_sent() {
    if !ready("an_ipv4_only_shell_carries_only_what_is_sent", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let shell = Shell::builder()
        .ipv4_only(true)
        .netns(format!("/run/netns/{}", ns.name))
        .start()
        .expect("the shell starts");
    assert_eq!(shell.addr6(), None);
    let events = shell.events(EventFilter::default());
    // Three seconds of a link at rest: an IPv6 end says something in them
    // (its MLD reports, a router solicitation after its DAD).
    std::thread::sleep(Duration::from_secs(3));
    let mut cmd = shell.command("ping");
    cmd.args(PING_ARGS).arg(shell.peer().to_string());
    ping(cmd, "ping through an IPv4-only shell");
    drop(shell);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Ok(e) = events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if let Event::Arrival { iface, len, .. } = e {
            seen.push((iface, len));
        }
    }
    let echo = |side: &str| (side.to_string(), 84);
    let want: Vec<_> = (0..5).flat_map(|_| [echo("app"), echo("peer")]).collect();
    assert_eq!(seen, want, "lost: {}", events.lost());
}

#[test]
fn a_shell_with_bad_options_says_which_and_leaves_nothing() {
    if !ready(
        "a_shell_with_bad_options_says_which_and_leaves_nothing",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let before = ns.links();
    let start = |b: dummynet::ShellBuilder| match b.netns(format!("/run/netns/{}", ns.name)).start()
    {
        Ok(_) => panic!("started"),
        Err(e) => e,
    };
    // Each refusal has its kind, and words that name the builder's method.
    let e = start(Shell::builder().up("dealy 5ms"));
    assert!(e.to_string().starts_with("up:"), "{e}");
    assert!(matches!(e, Error::Start(StartFailure::Link(_))), "{e:?}");
    assert_eq!(e.kind(), None);
    let e = start(Shell::builder().preset("no-such-link"));
    assert!(e.to_string().contains("unknown preset"), "{e}");
    assert!(matches!(e, Error::Start(StartFailure::Link(_))), "{e:?}");
    let e = start(
        Shell::builder()
            .up("delay 5ms")
            .config_text("pipe 1 config delay 1ms"),
    );
    assert!(e.to_string().contains("not both"), "{e}");
    assert!(matches!(e, Error::Start(StartFailure::Options(_))), "{e:?}");
    let e =
        start(Shell::builder().config_text("pipe 1 config delay 1ms\nadd 100 pipe 1 ip from\n"));
    assert!(e.to_string().starts_with("config line 2:"), "{e}");
    assert!(
        matches!(e, Error::Start(StartFailure::Config { line: 2, .. })),
        "{e:?}"
    );
    let e = start(Shell::builder().config_file("/nonexistent/dummynet.conf"));
    assert!(
        matches!(e, Error::Start(StartFailure::ConfigFile(_))),
        "{e:?}"
    );
    assert!(e.to_string().contains("/nonexistent/dummynet.conf"), "{e}");
    assert_eq!(ns.links(), before);
}

#[test]
fn a_bridge_started_in_process_is_driven_and_lets_its_ports_go() {
    if !ready(
        "a_bridge_started_in_process_is_driven_and_lets_its_ports_go",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let BridgePath { a, m, .. } = &BridgePath::new();
    let middle = format!("/run/netns/{}", m.name);
    let builder = Bridge::builder("m-a", "m-b")
        .config_text(
            "pipe 1 config delay 10ms\n\
             pipe 2 config delay 10ms\n\
             add 100 pipe 1 ip from any to any in recv m-a\n\
             add 200 pipe 2 ip from any to any in recv m-b",
        )
        .default_allow(true)
        .netns(&middle);
    let bridge = builder.clone().start().expect("the bridge starts");
    // A second bridge on the same ports is refused while the first runs.
    let e = match builder.clone().start() {
        Ok(_) => panic!("a second bridge on m-a and m-b started"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("m-a"), "{e}");
    assert!(matches!(e, Error::Start(StartFailure::Port(_))), "{e:?}");
    let e = match dummynet::Bridge::builder("m-a", "m-a").start() {
        Ok(_) => panic!("a bridge of m-a to itself started"),
        Err(e) => e,
    };
    assert!(
        matches!(&e, Error::Start(StartFailure::SameInterface(i)) if i == "m-a"),
        "{e:?}"
    );

    let events = bridge.events(EventFilter::default());
    let pinging = || a.command("ping", &[&PING_ARGS[..], &[B_ADDR]].concat());
    let first = ping(pinging(), "ping across the bridge");
    println!("bridge, 10 ms each way: RTTs {:?} ms", first.rtts());
    assert!(first.rtts().iter().all(|&t| t >= 20.0), "{first:?}");

    bridge.pipe(2).modify("delay 40ms").expect("modify pipe 2");
    let second = ping(pinging(), "ping after the change");
    println!("bridge, 10 ms and 40 ms: RTTs {:?} ms", second.rtts());
    assert!(second.rtts().iter().all(|&t| t >= 50.0), "{second:?}");

    let e = bridge
        .apply([
            "pipe 1 config delay 1ms",
            "add 300 pipe 1 ip from any to any bogus",
        ])
        .expect_err("a typo");
    assert_eq!(e.kind(), Some(ErrorKind::Syntax), "{e}");
    assert_eq!(e.at().and_then(|a| a.index), Some(1), "{e:?}");
    assert_eq!(
        bridge.pipe(1).show().expect("pipe 1").link.delay_ns,
        10_000_000
    );

    let stats = bridge.stats().expect("stats");
    assert_books_balance(&stats);
    assert!(stats.delivered >= 20, "{stats:?}");
    assert_eq!(arrivals(&events, "m-a", 84), 10, "lost: {}", events.lost());

    // Stopped: its last counters, and the ports are free for another.
    let last = bridge.stop();
    assert_books_balance(&last);
    assert!(last.delivered >= stats.delivered);
    let again = builder.start().expect("the ports were let go");
    drop(again);
}

#[test]
fn a_test_that_panics_leaves_nothing_behind() {
    if !ready("a_test_that_panics_leaves_nothing_behind", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let before = ns.links();
    let at = format!("/run/netns/{}", ns.name);
    let (tx, rx) = std::sync::mpsc::channel();
    let failed = std::thread::spawn(move || {
        let shell = Shell::builder()
            .up("delay 5ms")
            .netns(at)
            .start()
            .expect("the shell starts");
        let _ = tx.send(shell.interface().to_string());
        panic!("a failing assertion, with the shell up");
    })
    .join();
    assert!(failed.is_err(), "the thread panicked");
    let interface = rx.recv().expect("the shell was up");
    assert!(!ns.links().contains(&interface));
    assert_eq!(ns.links(), before, "left behind by the panic");
}

/// The builder's `napi` reaches the link: by default the inside's `dn0`
/// has GRO on and threaded NAPI, as `dummynet shell`'s; with
/// `Napi::Inline` it is as the kernel made it.
#[test]
fn a_shells_napi_choice_reaches_its_ends() {
    if !ready("a_shells_napi_choice_reaches_its_ends", TOOLS) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let read = |shell: &Shell| {
        shell
            .netns()
            .run(|| {
                (
                    dummynet_io::netdev::feature("dn0", dummynet_io::netdev::Feature::Gro),
                    dummynet_io::netdev::threaded("dn0"),
                )
            })
            .map(|(g, t)| (g.expect("GRO of dn0"), t.expect("threaded of dn0")))
            .expect("entering the shell's namespace")
    };
    for (napi, want) in [(None, (true, true)), (Some(Napi::Inline), (false, false))] {
        let mut b = Shell::builder()
            .up("delay 1ms")
            .netns(format!("/run/netns/{}", ns.name));
        if let Some(n) = napi {
            b = b.napi(n);
        }
        let shell = b.start().expect("the shell starts");
        assert_eq!(read(&shell), want, "napi {napi:?}: (GRO, threaded) of dn0");
        let peer = shell.peer().to_string();
        let mut cmd = shell.command("ping");
        cmd.args(PING_ARGS).arg(&peer);
        let p = ping(cmd, "ping through the shell");
        assert_eq!(p.lost(), 0, "napi {napi:?}: {p:?}");
        shell.stop().expect("the shell stops");
    }
}
