//! `dummynet run --bridge --workers 2` end to end, in namespaces the test
//! creates (A — M — B, the bridge in M): pings take both pipes' delay and
//! none is lost across a change applied through the socket; a bounded flood
//! of 16 flows is spread over both workers (each worker's ports read some)
//! and through a masked pipe whose instances live on both; `stats` adds the
//! workers up and its books balance once the pipes are empty; `show` counts
//! every packet once; `one_pass 0` is refused, saying why. Rules with
//! dynamic state work with 2 workers: pings from 16 addresses (flows the
//! kernel's fanout spreads over both workers) are answered only through a
//! state their `out` pass made, and `ipfw -d show` lists each state once;
//! `limit src-addr 3` lets exactly 3 of 16 flows from one address through
//! (the workers count together), and 3 again once their states expired.
//! The per-packet log and captures read as one system with 2 workers: a
//! bounded flood of 16 flows through a masked pipe (handed between the
//! workers) appears whole in `--log`, in time order, each packet once with
//! an id of its own, arrival first and departure last, in numbers that
//! match the daemon's books; the captures hold the same packets in time
//! order; the HTTP event stream gives the log's records in the log's order
//! (what a slow client lost, it is told, and the two add up).
//!
//! Without root or `ip`/`ping`, it prints `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::time::Duration;

use live_common::*;

const TOOLS: &[&str] = &["ip", "ping"];

/// `dummynet stats --socket SOCKET`.
fn stats(socket: &std::path::Path) -> String {
    let out = run_bounded(
        std::process::Command::new(DUMMYNET)
            .args(["stats", "--socket"])
            .arg(socket),
        Duration::from_secs(5),
        "dummynet stats",
    );
    expect_success(&out, "dummynet stats")
}

/// The `NAME.rx_frames` counter on the stats line of worker `w`'s bridge.
fn rx_frames(stats: &str, w: usize, port: &str) -> u64 {
    let prefix = format!("worker {w}: bridge");
    let line = stats
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{stats}"));
    let key = format!("{port}.rx_frames ");
    line.split(", ")
        .find_map(|kv| kv.rsplit(": ").next()?.strip_prefix(&key)?.parse().ok())
        .unwrap_or(0)
}

/// `dummynet run --bridge m-a m-b --workers 2` in `m` with `config`, its
/// control socket up.
fn two_workers(m: &TestNs, config: &std::path::Path, socket: &std::path::Path, what: &str) -> Proc {
    let mut daemon = Proc::spawn(
        m.command(
            DUMMYNET,
            &[
                "run",
                "--bridge",
                "m-a",
                "m-b",
                "--workers",
                "2",
                "--config",
                config.to_str().unwrap(),
                "--socket",
                socket.to_str().unwrap(),
            ],
        ),
        what,
    );
    wait_for_socket(socket, &mut daemon);
    daemon
}

#[test]
fn two_workers_bridge_shape_reconfigure_and_keep_their_books() {
    if !ready(
        "two_workers_bridge_shape_reconfigure_and_keep_their_books",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let (a, m, b) = (TestNs::new(), TestNs::new(), TestNs::new());
    veth(&a, "a0", &m, "m-a");
    veth(&b, "b0", &m, "m-b");
    a.ip(&["addr", "add", "192.0.2.1/24", "dev", "a0"]);
    b.ip(&["addr", "add", "192.0.2.2/24", "dev", "b0"]);
    let scratch = Scratch::new();
    // Pipes 1 and 2 (one per direction of the pings) are on two workers;
    // pipe 3's 16 flows are instances spread over both.
    let config = scratch.write(
        "ipfw.conf",
        "pipe 1 config delay 10ms\n\
         pipe 2 config delay 10ms\n\
         pipe 3 config delay 2ms mask src-port 0xffff\n\
         add 50 pipe 3 udp from any to any in recv m-a\n\
         add 100 pipe 1 ip from any to any in recv m-a\n\
         add 200 pipe 2 ip from any to any in recv m-b\n\
         add 65000 allow ip from any to any\n",
    );
    let socket = scratch.path("ctl.sock");
    let mut daemon = two_workers(&m, &config, &socket, "dummynet run --bridge --workers 2");

    let ping = |count: &str| a.command("ping", &["-c", count, "-i", "0.1", "-W", "1", "192.0.2.2"]);
    let run_ping = |count: &str, what: &str| {
        let out = run_bounded(&mut ping(count), Duration::from_secs(10), what);
        Ping::parse(&expect_success(&out, what))
    };
    let before = run_ping("10", "ping A→B");
    println!("2 workers, 10 ms each way: RTTs {:?} ms", before.rtts());
    assert_eq!(before.lost(), 0, "{before:?}");
    let rtt = median(&before.rtts());
    assert!((20.0..35.0).contains(&rtt), "RTT {rtt} ms, 20 ms of pipes");

    // A change while pings cross: pipe 1 (its owner) takes 30 ms, and no
    // ping is lost or meets half of it.
    let mut cmd = ping("20");
    let running = std::thread::spawn(move || {
        run_bounded(&mut cmd, Duration::from_secs(10), "ping during the change")
    });
    std::thread::sleep(Duration::from_millis(1000));
    ipfw(&socket, &["pipe", "1", "config", "delay", "30ms"]);
    let out = running.join().expect("the ping thread");
    let during = Ping::parse(&expect_success(&out, "ping across the change"));
    println!("2 workers, across the change: {:?}", during.replies);
    assert_eq!(during.lost(), 0, "pings lost across the change: {during:?}");
    let rtts = during.rtts();
    let last = median(&rtts[rtts.len() - 5..]);
    assert!(
        (40.0..55.0).contains(&last),
        "RTT after the change {last} ms"
    );

    // 16 flows, 2 s at 20 000 frames/s, through pipe 3.
    println!("{}", flood16(&a, 2, 20_000));
    std::thread::sleep(Duration::from_millis(300));

    let s = stats(&socket);
    println!("{s}");
    assert!(s.contains("workers: 2"), "{s}");
    for w in 0..2 {
        assert!(
            rx_frames(&s, w, "m-a") > 1000,
            "worker {w} read few frames from m-a:\n{s}"
        );
    }
    let t = PacketTotals::parse(&s);
    assert_eq!(t.inside, 0, "{s}");
    assert_eq!(t.arrived, t.delivered + t.dropped + t.inside, "{s}");
    assert!(t.delivered > 10_000, "{s}");
    assert!(!s.contains(" early"), "a hand-over before its time: {s}");

    let show = ipfw(&socket, &["show"]);
    println!("{show}");
    let flooded = rule_packets(&show, 50);
    assert!(flooded > 10_000, "{show}");
    let pipes = ipfw(&socket, &["pipe", "show"]);
    let rows = flow_rows(&pipes);
    // Pipe 3's instances, one per source port: gathered from both workers.
    assert!(rows.len() >= 16, "{pipes}");
    let in_rows: u64 = rows.iter().map(|r| r.tot_pkts).sum();
    assert!(
        in_rows >= flooded,
        "instances count {in_rows} of {flooded}:\n{pipes}"
    );

    let status = daemon.terminate(Duration::from_secs(5));
    assert!(
        status.success(),
        "daemon exit status after SIGTERM: {status}"
    );
}

#[test]
fn what_cannot_be_sharded_is_refused_at_start() {
    // Refused before any port is opened (no root or interface needed).
    let scratch = Scratch::new();
    let config = scratch.write("one-pass.conf", "sysctl net.inet.ip.fw.one_pass=0\n");
    let out = run_bounded(
        std::process::Command::new(DUMMYNET).args([
            "run",
            "--bridge",
            "dnt-no-such-a",
            "dnt-no-such-b",
            "--workers",
            "2",
            "--config",
            config.to_str().unwrap(),
            "--socket",
            scratch.path("ctl.sock").to_str().unwrap(),
        ]),
        Duration::from_secs(10),
        "dummynet run --workers 2 with one_pass 0",
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("--workers 2") && err.contains("one worker"),
        "{err}"
    );
}

/// The states `ipfw -d show` lists for rule `rule`, by source port.
fn limit_states(show: &str, rule: u32) -> Vec<u16> {
    let prefix = format!("{rule:05} ");
    let mut ports: Vec<u16> = show
        .lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(" LIMIT udp "))
        .filter_map(|l| {
            let (_, rest) = l.split_once(" LIMIT udp ")?;
            rest.split_whitespace().nth(1)?.parse().ok()
        })
        .collect();
    ports.sort_unstable();
    ports
}

#[test]
fn two_workers_count_a_limit_together() {
    if !ready("two_workers_count_a_limit_together", TOOLS) {
        return;
    }
    let _serial = serial();
    let (a, m, b) = (TestNs::new(), TestNs::new(), TestNs::new());
    veth(&a, "a0", &m, "m-a");
    veth(&b, "b0", &m, "m-b");
    let scratch = Scratch::new();
    // 16 UDP flows from one address (source ports 1024-1039), which the
    // kernel's fanout spreads over both workers (all on one: 2^-15); the
    // limit lets 3 make a state, all workers counting. Pipe 2 (masked by
    // source port) counts the flows whose frames got through, on their
    // way out to m-b. UDP states live 2 s.
    let config = scratch.write(
        "ipfw.conf",
        "sysctl net.inet.ip.fw.dyn_udp_lifetime=2\n\
         pipe 2 config mask src-port 0xffff\n\
         add 50 pipe 2 udp from 192.0.2.1 to 192.0.2.2 out xmit m-b\n\
         add 100 allow udp from 192.0.2.1 to 192.0.2.2 in recv m-a limit src-addr 3\n\
         add 65000 allow ip from any to any\n",
    );
    let socket = scratch.path("ctl.sock");
    let mut daemon = two_workers(&m, &config, &socket, "dummynet run --workers 2 (limit)");
    let flood = || println!("{}", flood16(&a, 1, 3200));
    flood();
    let s = stats(&socket);
    println!("{s}");
    for w in 0..2 {
        assert!(
            rx_frames(&s, w, "m-a") > 100,
            "worker {w} read few frames from m-a:\n{s}"
        );
    }
    let show = ipfw(&socket, &["-d", "show"]);
    println!("{show}");
    let first = limit_states(&show, 100);
    assert_eq!(first.len(), 3, "3 states in all:\n{show}");
    let pipes = ipfw(&socket, &["pipe", "show"]);
    println!("{pipes}");
    let through = flow_rows(&pipes);
    assert_eq!(
        through.len(),
        3,
        "only the 3 flows with a state got through"
    );
    // The other 13 were denied at the limit, most of their frames.
    let t = PacketTotals::parse(&s);
    assert!(t.dropped > 13 * 100, "{s}");

    // Once the states expired (2 s idle), the places are free again: 3
    // flows get in again, wherever their states were held.
    std::thread::sleep(Duration::from_millis(3000));
    flood();
    let show = ipfw(&socket, &["-d", "show"]);
    println!("{show}");
    assert_eq!(limit_states(&show, 100).len(), 3, "3 states again:\n{show}");

    let status = daemon.terminate(Duration::from_secs(5));
    assert!(
        status.success(),
        "daemon exit status after SIGTERM: {status}"
    );
}

#[test]
fn two_workers_keep_state_both_ways() {
    if !ready("two_workers_keep_state_both_ways", TOOLS) {
        return;
    }
    let _serial = serial();
    let (a, m, b) = (TestNs::new(), TestNs::new(), TestNs::new());
    veth(&a, "a0", &m, "m-a");
    veth(&b, "b0", &m, "m-b");
    // 16 sources: 16 flows, each read (both ways) by the worker the
    // kernel's fanout hash gives it; all but chance (2^-16) put some on
    // each worker.
    let sources: Vec<String> = (0..16).map(|k| format!("192.0.2.{}", 10 + k)).collect();
    for s in &sources {
        a.ip(&["addr", "add", &format!("{s}/24"), "dev", "a0"]);
    }
    b.ip(&["addr", "add", "192.0.2.2/24", "dev", "b0"]);
    let scratch = Scratch::new();
    // A request takes pipe 1 (worker 1's) on its way in; its `out` pass
    // (on m-b) makes a `:back` state, which alone lets the reply in: the
    // `out` pass has to run on the worker that reads the flow, wherever
    // pipe 1 let it out.
    let config = scratch.write(
        "ipfw.conf",
        "pipe 1 config delay 5ms\n\
         add 100 pipe 1 icmp from 192.0.2.0/24 to 192.0.2.2 in recv m-a\n\
         add 110 allow icmp from 192.0.2.0/24 to 192.0.2.2 out xmit m-b record-state :back\n\
         add 120 check-state :back\n\
         add 130 deny icmp from any to any\n\
         add 65000 allow ip from any to any\n",
    );
    let socket = scratch.path("ctl.sock");
    let mut daemon = two_workers(
        &m,
        &config,
        &socket,
        "dummynet run --bridge --workers 2 (keep-state)",
    );

    let pings: Vec<_> = sources
        .iter()
        .map(|s| {
            let mut cmd = a.command(
                "ping",
                &["-c", "3", "-i", "0.2", "-W", "1", "-I", s, "192.0.2.2"],
            );
            let what = format!("ping from {s}");
            std::thread::spawn(move || {
                (run_bounded(&mut cmd, Duration::from_secs(10), &what), what)
            })
        })
        .collect();
    for p in pings {
        let (out, what) = p.join().expect("a ping thread");
        let ping = Ping::parse(&expect_success(&out, &what));
        assert_eq!(ping.lost(), 0, "{what}: {ping:?}");
        let rtt = median(&ping.rtts());
        assert!(
            (5.0..30.0).contains(&rtt),
            "{what}: RTT {rtt} ms, 5 ms of pipe"
        );
    }

    let s = stats(&socket);
    println!("{s}");
    for w in 0..2 {
        assert!(
            rx_frames(&s, w, "m-b") > 0,
            "worker {w} read no reply from m-b:\n{s}"
        );
    }
    // One state per source, listed once, made by rule 110, each having
    // let its 3 replies in (and its 3 requests out).
    let show = ipfw(&socket, &["-d", "show"]);
    println!("{show}");
    let states: Vec<&str> = show.lines().filter(|l| l.contains(" STATE ")).collect();
    assert_eq!(states.len(), sources.len(), "{show}");
    for src in &sources {
        let mine: Vec<&&str> = states
            .iter()
            .filter(|l| l.contains(&format!(" {src} ")))
            .collect();
        assert_eq!(mine.len(), 1, "{src}: {show}");
        assert!(mine[0].starts_with("00110 "), "{show}");
        assert!(mine[0].ends_with(":back"), "{show}");
    }
    // No reply was denied.
    assert_eq!(rule_packets(&show, 130), 0, "{show}");

    let status = daemon.terminate(Duration::from_secs(5));
    assert!(
        status.success(),
        "daemon exit status after SIGTERM: {status}"
    );
}

/// `run --workers 2 --log --capture-in --capture-out`: every worker's
/// packets in one log, in time order, each with its own id (the worker
/// that read it in the high bits), every one accounted for.
#[test]
fn two_workers_log_and_capture_every_packet_in_time_order() {
    if !ready(
        "two_workers_log_and_capture_every_packet_in_time_order",
        TOOLS,
    ) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let port = unique_port();
    let (log, cap_in, cap_out) = (
        path.scratch.path("events.jsonl"),
        path.scratch.path("in.pcap"),
        path.scratch.path("out.pcap"),
    );
    // 16 flows, each its own instance of pipe 3 (spread over both workers
    // by hash, while the kernel's fanout spreads their reading): most
    // frames are read by one worker and queued by the other.
    let mut daemon = path.daemon(
        "workers-log",
        Some(
            "pipe 3 config delay 2ms mask src-port 0xffff\n\
             add 50 pipe 3 udp from any to any in recv m-a\n\
             add 65000 allow ip from any to any\n",
        ),
        &[
            "--workers",
            "2",
            "--log",
            log.to_str().unwrap(),
            "--capture-in",
            cap_in.to_str().unwrap(),
            "--capture-out",
            cap_out.to_str().unwrap(),
            "--http",
            &format!("127.0.0.1:{port}"),
        ],
    );
    // The HTTP event stream, read while the flood runs (in M, where the
    // daemon listens), until 1.5 s after it ends.
    let stream = event_stream(&path.m, port, Duration::from_millis(2500));
    let flooded = flood16(&path.a, 1, 5000);
    println!("{flooded}");
    let sent: u64 = flooded
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {flooded:?}"));
    assert!(sent >= 4000, "{flooded}");
    std::thread::sleep(Duration::from_millis(300));
    let json = daemon.stats_json();
    let obs = &json["observer"];
    println!("observer: {obs}");
    assert_eq!(obs["lost"], 0, "{obs}");
    assert_eq!(obs["lost_by_worker"], serde_json::json!([0, 0]), "{obs}");
    assert_eq!(obs["capture_lost"], 0, "{obs}");
    let status = daemon.proc.terminate(Duration::from_secs(5));
    assert!(status.success(), "daemon exit status: {status}");
    // The books at the end, from the report the daemon printed as it
    // stopped (after the last frame).
    let report = daemon.log();
    let books = PacketTotals::parse(&report);
    let observer_line = report
        .lines()
        .find(|l| l.trim_start().starts_with("observer:"))
        .unwrap_or_else(|| panic!("no observer line in:\n{report}"));
    assert!(observer_line.contains(" 0 lost"), "{observer_line}");
    assert!(
        !observer_line.contains("out of time order"),
        "{observer_line}"
    );

    let text = std::fs::read_to_string(&log).expect("the log");
    let mut lines = text.lines().map(|l| {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))
    });
    let start = lines.next().expect("a start line");
    assert_eq!(start["event"], "start", "{start}");
    let events: Vec<serde_json::Value> = lines.collect();
    // One stream, in time order.
    let times: Vec<u64> = events.iter().map(|e| e["t_ns"].as_u64().unwrap()).collect();
    if let Some(i) = times.windows(2).position(|w| w[0] > w[1]) {
        panic!(
            "out of time order at {i}: {} then {}",
            events[i],
            events[i + 1]
        );
    }
    // Each packet: one arrival, first; one departure or drop, last.
    let mut by_id: std::collections::BTreeMap<u64, Vec<&str>> = Default::default();
    for e in &events {
        assert!(e.get("note").is_none(), "no duplicates here: {e}");
        let id = e["id"].as_u64().unwrap();
        by_id
            .entry(id)
            .or_default()
            .push(e["event"].as_str().unwrap());
    }
    for (id, steps) in &by_id {
        let last = steps[steps.len() - 1];
        assert!(
            steps[0] == "arrival"
                && steps[1..].iter().all(|s| *s != "arrival")
                && (last == "departure" || last == "drop")
                && steps[..steps.len() - 1]
                    .iter()
                    .all(|s| *s == "arrival" || *s == "forward"),
            "packet {id}: {steps:?}"
        );
    }
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count() as u64;
    let (arrivals, departures, drops) = (count("arrival"), count("departure"), count("drop"));
    println!(
        "log: {arrivals} arrivals, {departures} departures, {drops} drops; books: {} arrived, \
         {} delivered, {} dropped",
        books.arrived, books.delivered, books.dropped
    );
    assert_eq!(arrivals, by_id.len() as u64);
    // A bridged frame goes through the engine twice, its `in` pass and its
    // `out` pass (which a forward starts); the books count frames, each
    // once, though the two workers may each see one of its passes.
    assert_eq!(
        (arrivals, departures, drops),
        (books.arrived, books.delivered, books.dropped)
    );
    // Every frame the flood sent came in by m-a, and left by m-b.
    let from_a = events
        .iter()
        .filter(|e| e["event"] == "arrival" && e["iface"] == "m-a")
        .count() as u64;
    assert!(from_a >= sent, "{from_a} arrivals from m-a, {sent} sent");
    // Both workers read some: ids carry the reader in bit 47 up.
    let worker1 = by_id.keys().filter(|id| **id >> 47 == 1).count();
    assert!(
        worker1 > 0 && worker1 < by_id.len(),
        "{worker1} of {} packets read by worker 1",
        by_id.len()
    );
    // Every flooded frame passed its pipe and went on to its `out` pass.
    let forwards = count("forward");
    assert!(forwards >= sent, "{forwards} forwards");

    // The captures: the same packets, in time order.
    for (file, n) in [(&cap_in, arrivals), (&cap_out, departures)] {
        let cap = dummynet::capture::read_file(file).expect("a capture");
        assert_eq!(cap.frames.len() as u64, n, "{}", file.display());
        assert!(
            cap.frames.windows(2).all(|w| w[0].ts <= w[1].ts),
            "{}: out of time order",
            file.display()
        );
    }

    // The HTTP event stream: the `start` line, then the log's own records
    // from where the subscription began, in the log's order. A client too
    // slow for its events (the stream's task starved on a loaded machine)
    // is told how many it lost (`lost` notices, before the next event it
    // gets): what it got and what it was told it lost add up to the log's
    // records over the same span.
    let streamed = stream.join().expect("the event stream's reader");
    let (first, rest) = streamed.split_first().expect("a start event on the stream");
    assert_eq!(first["event"], "start", "{first}");
    let key = |e: &serde_json::Value| (e["id"].as_u64(), e["event"].clone(), e["t_ns"].as_u64());
    let (mut got, mut lost, mut lost_before_last) = (Vec::new(), 0u64, 0u64);
    for e in rest {
        if e["event"] == "lost" {
            lost += e["count"].as_u64().expect("a lost count");
        } else {
            got.push(key(e));
            lost_before_last = lost;
        }
    }
    let head = got.first().expect("events on the stream");
    let at = events
        .iter()
        .position(|e| key(e) == *head)
        .unwrap_or_else(|| panic!("the stream's first event {head:?} is not in the log"));
    // In the log's order: each streamed event is found after the one before.
    let mut next = at;
    for (i, k) in got.iter().enumerate() {
        let found = events[next..].iter().position(|e| key(e) == *k);
        let Some(skip) = found else {
            panic!(
                "the stream's event {i} of {}, {k:?}, is not in the log after its last",
                got.len()
            );
        };
        next += skip + 1;
    }
    assert_eq!(
        (next - at) as u64,
        got.len() as u64 + lost_before_last,
        "the log's records over the stream's span against those streamed and told lost"
    );
    let streamed_from_a = rest
        .iter()
        .filter(|e| e["event"] == "arrival" && e["iface"] == "m-a")
        .count() as u64;
    println!(
        "stream: {} events, {streamed_from_a} arrivals from m-a, {lost} told lost",
        got.len()
    );
    assert!(
        streamed_from_a + lost >= sent,
        "{streamed_from_a} streamed arrivals from m-a and {lost} lost, {sent} sent"
    );
}

/// `dummynet flood` from A's `a0` to B: 16 flows of 64-byte frames for
/// `seconds` at `rate` frames/s (bounded by 10 s); what it printed.
fn flood16(a: &TestNs, seconds: u32, rate: u32) -> String {
    let (seconds, rate) = (seconds.to_string(), rate.to_string());
    let out = run_bounded(
        &mut a.command(
            DUMMYNET,
            &[
                "flood",
                "a0",
                "--seconds",
                &seconds,
                "--rate",
                &rate,
                "--flows",
                "16",
                "--src",
                A_ADDR,
                "--dst",
                B_ADDR,
            ],
        ),
        Duration::from_secs(10),
        "dummynet flood",
    );
    expect_success(&out, "dummynet flood")
}

/// `GET /v1/events` from the daemon listening on 127.0.0.1:`port` in
/// `ns`, read for `limit` on a thread of its own: the events (the JSON of
/// each `data:` line), with the response's chunked encoding undone.
fn event_stream(
    ns: &TestNs,
    port: u16,
    limit: Duration,
) -> std::thread::JoinHandle<Vec<serde_json::Value>> {
    use std::io::{BufRead, BufReader, Read, Write};
    let netns = dummynet_io::netns::Netns::open_named(&ns.name).expect("the daemon's namespace");
    let conn = netns
        .run(|| std::net::TcpStream::connect(("127.0.0.1", port)))
        .expect("entering the daemon's namespace")
        .expect("connecting to the HTTP API");
    let deadline = std::time::Instant::now() + limit;
    std::thread::spawn(move || {
        let mut conn = conn;
        let ask = format!("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
        conn.write_all(ask.as_bytes())
            .expect("asking for the stream");
        conn.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a read timeout");
        // Everything that comes until the deadline (a read that times out
        // just tries again).
        let mut raw = Vec::new();
        let mut buf = [0u8; 65536];
        while std::time::Instant::now() < deadline {
            match conn.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("reading the stream: {e}"),
            }
        }
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("the response's header");
        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("text/event-stream"), "{head}");
        // Undo the chunked encoding: SIZE (hex) CRLF, SIZE bytes, CRLF; the
        // last chunk may be cut by the deadline.
        let mut body = Vec::new();
        let mut rest = BufReader::new(&raw[end + 4..]);
        let mut size_line = String::new();
        while rest.read_line(&mut size_line).unwrap_or(0) > 0 {
            let Ok(size) = usize::from_str_radix(size_line.trim(), 16) else {
                break;
            };
            size_line.clear();
            let got = (&mut rest)
                .take(size as u64)
                .read_to_end(&mut body)
                .unwrap_or(0);
            if got < size {
                break;
            }
            let mut crlf = String::new();
            let _ = rest.read_line(&mut crlf);
        }
        // Whole lines only: the deadline may cut the last one.
        let text = String::from_utf8_lossy(&body);
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
            .collect()
    })
}
