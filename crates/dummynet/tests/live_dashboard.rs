//! The dashboard (`GET /` of `--http`) in a real browser: headless
//! Chromium, from the distribution's packages, loads the page from a
//! `dummynet shell` that carries a bounded ping flood through a thin pipe,
//! and the test reads the page's state over the DevTools protocol until
//! every chart of the pipe holds data; a command applied through the
//! page's form reaches the daemon; a screenshot is kept as an artifact
//! (`target/tmp/dashboard.png`).
//!
//! The shell, the browser and every connection live in a network namespace
//! the test creates: the test's own sockets are opened there (see
//! `Netns::run`), and nothing is sent beyond its loopback and the shell's
//! own namespaces.

#[allow(dead_code)]
mod live_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use dummynet_io::netns::Netns;
use live_common::*;
use serde_json::{json, Value};

/// How long the page gets to show every chart with data.
const PAGE_WAIT: Duration = Duration::from_secs(30);

/// The DevTools protocol over one page's WebSocket: numbered calls, their
/// answers picked out among the events the page also sends.
struct Devtools {
    socket: tungstenite::WebSocket<TcpStream>,
    next_id: u64,
}

impl Devtools {
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({ "id": id, "method": method, "params": params });
        self.socket
            .send(tungstenite::Message::text(msg.to_string()))
            .unwrap_or_else(|e| panic!("DevTools {method}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "DevTools {method}: no answer");
            let m = self
                .socket
                .read()
                .unwrap_or_else(|e| panic!("DevTools {method}: {e}"));
            let Ok(text) = m.to_text() else { continue };
            let Ok(v) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            if v["id"] == id {
                assert!(v["error"].is_null(), "DevTools {method}: {}", v["error"]);
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expr` in the page; its value, which must be JSON.
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(
            r["exceptionDetails"].is_null(),
            "page threw on `{expr}`: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }
}

/// A plain HTTP GET on the namespace's loopback; the body of a 200
/// answer, or None while nothing listens. The body is read to its
/// `Content-Length` (Chromium's DevTools server keeps the connection open).
fn http_get(ns: &Netns, port: u16, path: &str) -> Option<String> {
    let mut stream = ns
        .run(|| TcpStream::connect(("127.0.0.1", port)))
        .expect("entering the test namespace")
        .ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let n = stream.read(&mut buf).ok()?;
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            let done = match length {
                Some(len) => body.len() >= len,
                None => n == 0,
            };
            if done {
                return head.starts_with("HTTP/1.1 200").then(|| body.to_string());
            }
        }
        if n == 0 {
            return None;
        }
    }
}

/// Waits until `f` gives a value, at most `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_dashboard_shows_live_charts_in_a_headless_browser() {
    if !ready("dashboard", &["ip", "ping", "chromium"]) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let netns = Netns::open_named(&ns.name).expect("opening the test namespace");
    let scratch = Scratch::new();
    let http_port = unique_port();
    let devtools_port = unique_port();

    // A 400 kbit/s uplink with a 20 ms delay and a 10-slot queue, and
    // pings of 1,200 bytes every 5 ms (ping paces itself to about 80 a
    // second, twice the link; at most 40 s): the queue fills, packets wait
    // and some are dropped, so all four charts have something to show.
    let mut shell = ns.command(
        DUMMYNET,
        &[
            "shell",
            "--nat",
            "off",
            "--http",
            &format!("127.0.0.1:{http_port}"),
            "--up",
            "bw 400Kbit/s delay 20ms queue 10",
            "--down",
            "delay 20ms",
            "--",
            "sh",
            "-c",
            "ping -q -c 8000 -i 0.005 -s 1200 -w 40 \"$DUMMYNET_PEER\" >/dev/null; exit 0",
        ],
    );
    shell.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut shell = Proc::spawn(shell, "dummynet shell --http");
    wait_for("the HTTP API", SETUP_WAIT, || {
        shell.assert_running();
        http_get(&netns, http_port, "/v1/stats")
    });

    let profile = scratch.path("chromium-profile");
    let url = format!("http://127.0.0.1:{http_port}/");
    let mut browser = ns.command(
        "chromium",
        &[
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,1500",
            &format!("--remote-debugging-port={devtools_port}"),
            &format!("--user-data-dir={}", profile.display()),
            &url,
        ],
    );
    browser.stdout(Stdio::null()).stderr(Stdio::null());
    let mut browser = Proc::spawn(browser, "chromium --headless");

    // The page's DevTools WebSocket, from the browser's target list.
    let ws_url = wait_for("chromium's DevTools", Duration::from_secs(20), || {
        browser.assert_running();
        let list: Value =
            serde_json::from_str(&http_get(&netns, devtools_port, "/json/list")?).ok()?;
        list.as_array()?
            .iter()
            .find(|t| t["type"] == "page" && t["url"].as_str() == Some(url.as_str()))
            .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_string))
    });
    let stream = netns
        .run(|| TcpStream::connect(("127.0.0.1", devtools_port)))
        .expect("entering the test namespace")
        .expect("connecting to DevTools");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    let (socket, _) =
        tungstenite::client::client(ws_url.as_str(), stream).expect("DevTools handshake");
    let mut page = Devtools { socket, next_id: 0 };

    // Every chart of pipe 1 (the loaded uplink) holds points, throughput
    // and queue above zero, and the delay chart has per-packet delays from
    // the event stream at least the pipe's 20 ms.
    let deadline = Instant::now() + PAGE_WAIT;
    let pipes = loop {
        let pipes = page.eval(
            "window.dummynetDashboard ? { pipes: window.dummynetDashboard.pipes(), \
             events: window.dummynetDashboard.events(), errors: window.dummynetDashboard.errors(), \
             status: document.getElementById('status').textContent } : null",
        );
        if let Some(p) = full(&pipes["pipes"]) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "every chart of pipe 1 with data, not within {PAGE_WAIT:?}: the page holds {pipes}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    fn full(pipes: &Value) -> Option<Value> {
        let p1 = pipes.as_array()?.iter().find(|p| p["pipe"] == "1")?.clone();
        let points = &p1["points"];
        let max = &p1["max"];
        let full = ["throughput", "queue", "delay", "drops"]
            .iter()
            .all(|k| points[k].as_u64().unwrap_or(0) >= 6)
            && max["throughput"].as_f64().unwrap_or(0.0) > 0.0
            && max["queue"].as_f64().unwrap_or(0.0) > 0.0
            && max["delay"].as_f64().unwrap_or(0.0) >= 20.0;
        full.then(|| pipes.clone())
    }
    let p1 = pipes
        .as_array()
        .and_then(|a| a.iter().find(|p| p["pipe"] == "1"))
        .expect("pipe 1");
    // A 400 kbit/s link delivers at most its rate: the chart's peak, over
    // a one-second poll, stays below 600 kbit/s (polls are not exactly a
    // second apart), and the overload made drops.
    let peak = p1["max"]["throughput"].as_f64().unwrap_or(0.0);
    assert!(
        peak > 150_000.0 && peak < 600_000.0,
        "pipe 1's throughput chart peaks at {peak} bit/s on a 400 kbit/s link"
    );
    assert!(
        p1["max"]["drops"].as_f64().unwrap_or(0.0) > 0.0,
        "twice its rate into a 10-slot pipe drops: {p1}"
    );
    let events = page.eval("window.dummynetDashboard.events()");
    assert!(
        events["received"].as_u64().unwrap_or(0) > 0,
        "the event stream reached the page: {events}"
    );
    // The tables hold the configuration and the rules.
    let rows = page.eval(
        "[document.querySelectorAll('#pipe-table tbody tr').length, \
          document.querySelectorAll('#rule-table tbody tr').length]",
    );
    assert!(
        rows[0].as_u64().unwrap_or(0) >= 2 && rows[1].as_u64().unwrap_or(0) >= 2,
        "pipe and rule tables: {rows}"
    );

    // The form applies a command: pipe 2's delay, read back from the API.
    let result = page.eval(
        "(async () => { \
           document.getElementById('commands').value = 'pipe 2 modify delay 35ms'; \
           document.getElementById('commands-form').requestSubmit(); \
           for (let i = 0; i < 50; i++) { \
             const o = document.getElementById('commands-result'); \
             if (o.dataset.ok) return [o.dataset.ok, o.textContent]; \
             await new Promise(r => setTimeout(r, 100)); \
           } \
           return ['none', '']; })()",
    );
    assert_eq!(result[0], "true", "the form's command: {result}");
    let pipes: Value =
        serde_json::from_str(&http_get(&netns, http_port, "/v1/pipes").expect("GET /v1/pipes"))
            .expect("pipes as JSON");
    let delay2 = pipes["pipes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["number"] == 2))
        .map(|p| p["link"]["delay_ns"].clone());
    assert_eq!(
        delay2,
        Some(json!(35_000_000)),
        "pipe 2 after the form: {pipes}"
    );

    // The screenshot, kept for people to look at.
    let shot = page.call("Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().expect("screenshot data"))
        .expect("screenshot is base64");
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let artifact = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&artifact, &png).expect("writing the screenshot");
    println!("dashboard screenshot: {}", artifact.display());

    drop(page);
    browser.terminate(Duration::from_secs(5));
    shell.terminate(Duration::from_secs(10));
}

/// A shell's pipes carry their roles (`up: from the command`, `down: to
/// the command`) in the API's answers, which the dashboard shows beside
/// their numbers.
#[test]
fn a_shells_pipes_carry_their_roles() {
    if !ready("a_shells_pipes_carry_their_roles", &["ip"]) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let netns = Netns::open_named(&ns.name).expect("opening the test namespace");
    let http_port = unique_port();
    let mut shell = ns.command(
        DUMMYNET,
        &[
            "shell",
            "--nat",
            "off",
            "--http",
            &format!("127.0.0.1:{http_port}"),
            "--up",
            "delay 5ms",
            "--",
            "sleep",
            "60",
        ],
    );
    shell.stdout(Stdio::null()).stderr(Stdio::null());
    let mut shell = Proc::spawn(shell, "dummynet shell --http");
    let pipes: Value = wait_for("the HTTP API", SETUP_WAIT, || {
        shell.assert_running();
        serde_json::from_str(&http_get(&netns, http_port, "/v1/pipes")?).ok()
    });
    let roles: Vec<(Value, Value)> = pipes["pipes"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|p| (p["number"].clone(), p["role"].clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        roles,
        [
            (json!(1), json!("up: from the command")),
            (json!(2), json!("down: to the command"))
        ],
        "{pipes}"
    );
    let one: Value =
        serde_json::from_str(&http_get(&netns, http_port, "/v1/pipes/1").expect("GET /v1/pipes/1"))
            .expect("JSON");
    assert_eq!(one["role"], "up: from the command", "{one}");
    let script = http_get(&netns, http_port, "/dashboard.js").expect("the dashboard's script");
    assert!(script.contains("pipe.role"), "the dashboard shows no role");
    shell.terminate(Duration::from_secs(10));
}
