//! The HTTP API (`run --http`) against a real daemon bridging two test
//! namespaces: a pipe changed mid-flow through the API changes ping's RTT,
//! a batch with a bad command changes nothing, a token is required off
//! loopback, /metrics parses as Prometheus text and counts the traffic,
//! and every JSON answer the test gets validates against the OpenAPI
//! document the server serves.

#[allow(dead_code)]
mod live_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use dummynet_io::netns::Netns;
use serde_json::{json, Value};

use live_common::*;

const TOOLS: &[&str] = &["ip", "ping"];
const PORT: u16 = 8080;
const TOKEN: &str = "test-token-0123456789abcdef";

/// One answer: status and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A client of the daemon's HTTP API, from inside its namespace (the
/// daemon listens there, on port [`PORT`]).
struct Api {
    ns: Netns,
    token: Option<&'static str>,
    /// Every JSON answer, with the operation it answered, for the
    /// OpenAPI check at the end.
    seen: std::cell::RefCell<Vec<(String, &'static str, u16, Value)>>,
}

impl Api {
    /// `method path` with `body`, HTTP/1.1 with `Connection: close`, read
    /// to the end (bounded by a read timeout). `template` is the path's
    /// name in the OpenAPI document.
    fn call(
        &self,
        method: &'static str,
        template: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Answer {
        self.call_as(method, template, path, body, Some("application/json"))
    }

    /// [`Api::call`] with the body labelled `content_type` (`None`: no
    /// Content-Type header).
    fn call_as(
        &self,
        method: &'static str,
        template: &str,
        path: &str,
        body: Option<&Value>,
        content_type: Option<&str>,
    ) -> Answer {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\
             Content-Length: {}\r\n",
            body.len()
        );
        if let Some(ct) = content_type {
            req.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        if let Some(t) = self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let raw = self
            .ns
            .run(move || -> std::io::Result<Vec<u8>> {
                let mut s = TcpStream::connect(("127.0.0.1", PORT))?;
                s.set_read_timeout(Some(Duration::from_secs(30)))?;
                s.write_all(req.as_bytes())?;
                let mut out = Vec::new();
                s.read_to_end(&mut out)?;
                Ok(out)
            })
            .expect("entering the daemon's namespace")
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{method} {path}: no header end in {text:?}"));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{method} {path}: no status in {head:?}"));
        assert!(
            !head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked"),
            "{head}"
        );
        let content_type = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-type")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_default();
        let answer = Answer {
            status,
            content_type,
            body: body.to_string(),
        };
        if answer.content_type.starts_with("application/json") && template != "/v1/openapi.json" {
            self.seen
                .borrow_mut()
                .push((template.to_string(), method, status, answer.json()));
        }
        answer
    }

    fn wait_up(&self, daemon: &mut Proc) {
        let deadline = Instant::now() + SETUP_WAIT;
        loop {
            let up = self
                .ns
                .run(|| TcpStream::connect(("127.0.0.1", PORT)).is_ok())
                .expect("entering the daemon's namespace");
            if up {
                return;
            }
            daemon.assert_running();
            assert!(
                Instant::now() < deadline,
                "no HTTP API after {SETUP_WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Checks every JSON answer seen against the schema the OpenAPI document
/// gives for its operation and status.
fn validate_against_openapi(doc: &Value, seen: &[(String, &'static str, u16, Value)]) {
    assert_eq!(doc["openapi"], "3.1.0");
    for (template, method, status, body) in seen {
        let op = &doc["paths"][template.as_str()][method.to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "{method} {template} is not in the OpenAPI document"
        );
        let schema = &op["responses"][status.to_string()]["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {template}: status {status} is not documented: {body}"
        );
        // The schema at the root, the components beside it for its $refs.
        let mut root = schema.clone();
        root["components"] = doc["components"].clone();
        let validator = jsonschema::validator_for(&root)
            .unwrap_or_else(|e| panic!("{method} {template} {status}: bad schema: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {template} {status}: {body} does not match the document: {errors:?}"
        );
    }
    println!(
        "{} answers validated against the OpenAPI document",
        seen.len()
    );
}

fn ping_median(a: &TestNs, count: &str, what: &str) -> f64 {
    let out = run_bounded(
        &mut rt_ping(a, &["-c", count, "-i", "0.1", "-W", "1", B_ADDR]),
        Duration::from_secs(10),
        what,
    );
    let p = Ping::parse(&expect_success(&out, what));
    assert_eq!(p.lost(), 0, "{what}: {p:?}");
    median(&p.rtts())
}

fn metric(samples: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
        .unwrap_or_else(|| panic!("no {name}{labels:?} in the metrics"))
}

#[test]
fn http_api_drives_and_watches_a_live_bridge() {
    if !ready("http_api_drives_and_watches_a_live_bridge", TOOLS) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let (a, m) = (&path.a, &path.m);
    let token = path.scratch.write("token", &format!("{TOKEN}\n"));
    let token = token.to_str().expect("a UTF-8 path");

    // Off loopback without a token: refused at start, saying what to do.
    let refused_socket = path.scratch.path("refused.sock");
    let refused = run_bounded(
        &mut m.command(
            DUMMYNET,
            &[
                "run",
                "--bridge",
                "m-a",
                "m-b",
                "--socket",
                refused_socket.to_str().expect("a UTF-8 path"),
                "--http",
                "0.0.0.0:8081",
            ],
        ),
        Duration::from_secs(10),
        "dummynet run --http 0.0.0.0 without a token",
    );
    assert!(!refused.status.success());
    let err = text(&refused.stderr);
    assert!(err.contains("--http-token FILE"), "{err}");

    let all = format!("0.0.0.0:{PORT}");
    let mut daemon = path.daemon(
        "ctl",
        Some(
            "pipe 1 config delay 5ms\n\
             pipe 2 config delay 5ms\n\
             add 100 pipe 1 ip from any to any in recv m-a\n\
             add 200 pipe 2 ip from any to any in recv m-b\n\
             add 65000 allow ip from any to any\n",
        ),
        &["--http", &all, "--http-token", token],
    );
    let ns = Netns::open_named(&m.name).expect("the daemon's namespace");
    let anon = Api {
        ns,
        token: None,
        seen: Default::default(),
    };
    anon.wait_up(&mut daemon.proc);

    // Without the token (or with a wrong one): 401, whatever the endpoint.
    for path in ["/v1/stats", "/metrics", "/v1/pipes"] {
        let r = anon.call("GET", path, path, None);
        assert_eq!(r.status, 401, "{path}: {}", r.body);
        assert_eq!(r.json()["error"]["kind"], "unauthorized");
    }
    let api = Api {
        ns: Netns::open_named(&m.name).expect("the daemon's namespace"),
        token: Some(TOKEN),
        seen: Default::default(),
    };
    let wrong = Api {
        ns: Netns::open_named(&m.name).expect("the daemon's namespace"),
        token: Some("test-token-0123456789abcdeX"),
        seen: Default::default(),
    };
    assert_eq!(
        wrong.call("GET", "/v1/stats", "/v1/stats", None).status,
        401
    );
    let r = api.call("GET", "/v1/stats", "/v1/stats", None);
    assert_eq!(r.status, 200, "{}", r.body);

    // Traffic at 5 ms each way, then pipe 1 at 25 ms through the API.
    let before = ping_median(a, "10", "ping at 5 ms each way");
    let r = api.call(
        "PATCH",
        "/v1/pipes/{n}",
        "/v1/pipes/1",
        Some(&json!({"delay": "25ms"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["applied"][0]["command"],
        "pipe 1 modify delay 25ms"
    );
    let after = ping_median(a, "10", "ping after PATCH delay 25ms");
    println!("median RTT {before:.2} ms, then {after:.2} ms");
    // 20 ms more one way: the RTT grows by 20 ms (the timer's jitter and
    // the path's own time are the same on both sides).
    assert!(
        (after - before - 20.0).abs() < 5.0,
        "RTT {before:.2} ms became {after:.2} ms; 20 ms more expected"
    );

    // A batch with a bad command: 400, naming it and the token, and
    // nothing changed.
    let pipe1 = api.call("GET", "/v1/pipes/{n}", "/v1/pipes/1", None);
    assert_eq!(pipe1.status, 200, "{}", pipe1.body);
    let r = api.call(
        "POST",
        "/v1/commands",
        "/v1/commands",
        Some(&json!({"commands": ["pipe 1 config delay 1ms", "pipe 2 config delay 5parsecs"]})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["index"], 1, "{e}");
    assert_eq!(e["command"], "pipe 2 config delay 5parsecs", "{e}");
    assert_eq!(e["token"], "5parsecs", "{e}");
    let again = api.call("GET", "/v1/pipes/{n}", "/v1/pipes/1", None);
    assert_eq!(again.json(), pipe1.json(), "a refused batch changed pipe 1");

    // An unknown option is named; an absent pipe is 404.
    let r = api.call(
        "PUT",
        "/v1/pipes/{n}",
        "/v1/pipes/3",
        Some(&json!({"dleay": "1ms"})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["kind"], "unknown_field");
    assert_eq!(r.json()["error"]["field"], "dleay");
    let r = api.call("DELETE", "/v1/pipes/{n}", "/v1/pipes/99", None);
    assert_eq!(r.status, 404, "{}", r.body);
    let r = api.call("GET", "/v1/pipes", "/v1/pipes", None);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["pipes"].as_array().map(Vec::len),
        Some(2),
        "{}",
        r.body
    );

    // Rules: add, read, delete.
    let r = api.call(
        "POST",
        "/v1/rules/{n}",
        "/v1/rules/300",
        Some(&json!({"rule": "count ip from 198.51.100.1 to any"})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("GET", "/v1/rules/{n}", "/v1/rules/300", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let added = &r.json()["rules"][0];
    assert_eq!(added["number"], 300, "{}", r.body);
    assert!(
        added["rule"]
            .as_str()
            .unwrap_or("")
            .contains("198.51.100.1"),
        "{}",
        r.body
    );
    // PUT replaces rule 300 in one step.
    let r = api.call(
        "PUT",
        "/v1/rules/{n}",
        "/v1/rules/300",
        Some(&json!({"rule": "count ip from 198.51.100.2 to any"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api.call("GET", "/v1/rules/{n}", "/v1/rules/300", None);
    let texts: Vec<String> = r.json()["rules"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|x| x["rule"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        texts.len() == 1 && texts[0].contains("198.51.100.2"),
        "rule 300 replaced: {texts:?}"
    );
    let r = api.call("DELETE", "/v1/rules/{n}", "/v1/rules/300", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api.call("GET", "/v1/rules/{n}", "/v1/rules/300", None);
    assert_eq!(r.status, 404, "{}", r.body);
    // PUT of the whole ruleset with one bad rule changes nothing.
    let before = api.call("GET", "/v1/rules", "/v1/rules", None).json()["rules"].clone();
    let r = api.call(
        "PUT",
        "/v1/rules",
        "/v1/rules",
        Some(&json!({"rules": ["100 pipe 1 ip from any to any", "200 bogus ip from any to any"]})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["index"], 1, "the second rule: {}", r.body);
    let after = api.call("GET", "/v1/rules", "/v1/rules", None).json()["rules"].clone();
    let numbers = |v: &Value| -> Vec<Value> {
        v.as_array()
            .map(|l| l.iter().map(|x| x["number"].clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        numbers(&after),
        numbers(&before),
        "a refused PUT changed the rules"
    );

    // Metrics: Prometheus text that counts the 20 echo requests through
    // pipe 1 and rule 100.
    let r = api.call("GET", "/metrics", "/metrics", None);
    assert_eq!(r.status, 200);
    assert!(
        r.content_type.contains("openmetrics-text"),
        "{}",
        r.content_type
    );
    let lines = r.body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
    let delivered = metric(
        &scrape,
        "dummynet_pipe_delivered_packets_total",
        &[("pipe", "1")],
    );
    assert!(
        delivered >= 20.0,
        "pipe 1 delivered {delivered}\n{}",
        r.body
    );
    let bytes = metric(
        &scrape,
        "dummynet_pipe_delivered_bytes_total",
        &[("pipe", "1")],
    );
    assert!(bytes >= 20.0 * 84.0, "pipe 1 delivered {bytes} bytes");
    let rule = metric(&scrape, "dummynet_rule_packets_total", &[("rule", "100")]);
    assert!(rule >= 20.0, "rule 100 matched {rule}");
    let total = metric(&scrape, "dummynet_delivered_packets_total", &[]);
    assert!(total >= 40.0, "delivered {total}");
    let lateness = metric(&scrape, "dummynet_release_lateness_seconds_count", &[]);
    assert!(lateness >= 40.0, "{lateness} hand-overs in the histogram");
    metric(&scrape, "dummynet_pipe_queue_packets", &[("pipe", "1")]);

    // Reset zeroes the rules' counters.
    let r = api.call("POST", "/v1/reset", "/v1/reset", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api.call("GET", "/v1/rules", "/v1/rules", None);
    let rules = r.json();
    let rule100 = rules["rules"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["number"] == 100))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&rule100["packets"], &rule100["bytes"]),
        (&json!(0), &json!(0)),
        "{rule100}"
    );

    // The document the server serves describes what it answered.
    let r = api.call("GET", "/v1/openapi.json", "/v1/openapi.json", None);
    assert_eq!(r.status, 200);
    let doc = r.json();
    let mut seen = anon.seen.take();
    seen.extend(api.seen.take());
    validate_against_openapi(&doc, &seen);

    let status = daemon.proc.terminate(Duration::from_secs(10));
    assert!(status.success(), "{status}\n{}", daemon.log());
}

/// A GET document without what moves on its own (counters, flows, the
/// clock), for comparing configurations.
fn configuration(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        if let Value::Object(m) = v {
            for k in [
                "flows",
                "instances",
                "now_ns",
                "states",
                "packets",
                "bytes",
                "last_match_ns",
                "logged",
            ] {
                m.remove(k);
            }
            m.values_mut().for_each(strip);
        } else if let Value::Array(l) = v {
            l.iter_mut().for_each(strip);
        }
    }
    strip(&mut v);
    v
}

/// Every resource kind's GET answer goes back unchanged with PUT and
/// comes out the same; a merge patch changes only what it names; the
/// command language's names still work; a body without (or with a loose)
/// Content-Type is read as JSON, another type is 415; an unknown field
/// gets the name probably meant, in either shape.
#[test]
fn http_bodies_round_trip_in_both_shapes() {
    if !ready("http_bodies_round_trip_in_both_shapes", TOOLS) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let token = path.scratch.write("token", &format!("{TOKEN}\n"));
    let token = token.to_str().expect("a UTF-8 path");
    let at = format!("127.0.0.1:{PORT}");
    let mut daemon = path.daemon("ctl", None, &["--http", &at, "--http-token", token]);
    let api = Api {
        ns: Netns::open_named(&path.m.name).expect("the daemon's namespace"),
        token: Some(TOKEN),
        seen: Default::default(),
    };
    api.wait_up(&mut daemon.proc);
    let r = api.call(
        "POST",
        "/v1/commands",
        "/v1/commands",
        Some(&json!({"commands": [
            "pipe 3 config bw 1Mbit/s delay 20ms jitter 5ms queue 100KB plr 0.01 \
             mask src-ip 0xffffff00 dst-port 0xff loss 1%",
            "sched 4 config type fq_codel quantum 1000 target 7ms",
            "queue 5 config sched 4 weight 7 pri 2 buckets 128 mask dst-ip /24",
            "add 300 set 3 pipe 3 tcp from 10.0.0.0/8 to any dst-port 80 keep-state",
        ]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    let get = |template: &str, url: &str| {
        let r = api.call("GET", template, url, None);
        assert_eq!(r.status, 200, "GET {url}: {}", r.body);
        r.json()
    };
    // (template, URL, a merge patch, what it changes in the GET document)
    let kinds = [
        (
            "/v1/pipes/{n}",
            "/v1/pipes/3",
            json!({"link": {"delay_ns": 50000000}}),
        ),
        ("/v1/queues/{n}", "/v1/queues/5", json!({"weight": 9})),
        (
            "/v1/scheds/{n}",
            "/v1/scheds/4",
            json!({"params": {"quantum": 1500}}),
        ),
        ("/v1/rules/{n}", "/v1/rules/300", json!({"set": 4})),
    ];
    for (template, url, patch) in kinds {
        let before = get(template, url);
        let r = api.call("PUT", template, url, Some(&before));
        assert_eq!(r.status, 200, "PUT {url} of its own GET: {}", r.body);
        let after = get(template, url);
        assert_eq!(
            configuration(after.clone()),
            configuration(before),
            "PUT {url} of its GET changed it"
        );
        let r = api.call("PATCH", template, url, Some(&patch));
        assert_eq!(r.status, 200, "PATCH {url} {patch}: {}", r.body);
        let patched = get(template, url);
        let mut want = configuration(after);
        if template == "/v1/rules/{n}" {
            want["rules"][0]["set"] = json!(4);
        } else {
            merge(&mut want, &patch);
        }
        assert_eq!(configuration(patched), want, "PATCH {url} {patch}");
    }
    // The command language's names, as before.
    let r = api.call(
        "PATCH",
        "/v1/pipes/{n}",
        "/v1/pipes/3",
        Some(&json!({"bw": "2Mbit/s"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        get("/v1/pipes/{n}", "/v1/pipes/3")["link"]["bandwidth_bps"],
        2_000_000
    );

    // JSON under no label or a loose one is read; another type is 415.
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let r = api.call_as(
            "PATCH",
            "/v1/pipes/{n}",
            "/v1/pipes/3",
            Some(&json!({"delay": "7ms"})),
            ct,
        );
        assert_eq!(r.status, 200, "{ct:?}: {}", r.body);
    }
    assert_eq!(
        get("/v1/pipes/{n}", "/v1/pipes/3")["link"]["delay_ns"],
        7_000_000
    );
    let r = api.call_as(
        "PUT",
        "/v1/pipes/{n}",
        "/v1/pipes/3",
        Some(&json!({})),
        Some("application/xml"),
    );
    assert_eq!(r.status, 415, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "unsupported_media_type");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or("")
            .contains("application/json"),
        "{e}"
    );

    // Unknown fields: the name of the other shape is suggested.
    for (body, field, suggestion) in [
        (json!({"delay_ns": 5}), "delay_ns", "delay"),
        (json!({"link": {"delay": 5}}), "link.delay", "link.delay_ns"),
        (
            json!({"link": {"bandwidth": 5}}),
            "link.bandwidth",
            "link.bandwidth_bps",
        ),
    ] {
        let r = api.call("PATCH", "/v1/pipes/{n}", "/v1/pipes/3", Some(&body));
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = &r.json()["error"];
        assert_eq!(
            (&e["kind"], &e["field"]),
            (&json!("unknown_field"), &json!(field)),
            "{e}"
        );
        assert_eq!(e["suggestion"], suggestion, "{e}");
        assert!(
            e["message"].as_str().unwrap_or("").contains("did you mean"),
            "{e}"
        );
    }
    // A number that is not the URL's is refused, and changes nothing.
    let before = get("/v1/pipes/{n}", "/v1/pipes/3");
    let mut other = before.clone();
    other["number"] = json!(4);
    let r = api.call("PUT", "/v1/pipes/{n}", "/v1/pipes/3", Some(&other));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["field"], "number");
    assert_eq!(
        configuration(get("/v1/pipes/{n}", "/v1/pipes/3")),
        configuration(before)
    );

    // The whole ruleset as GET gives it goes back with PUT.
    let before = get("/v1/rules", "/v1/rules");
    let r = api.call("PUT", "/v1/rules", "/v1/rules", Some(&before));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        configuration(get("/v1/rules", "/v1/rules")),
        configuration(before)
    );

    let r = api.call("GET", "/v1/openapi.json", "/v1/openapi.json", None);
    validate_against_openapi(&r.json(), &api.seen.take());
    let status = daemon.proc.terminate(Duration::from_secs(10));
    assert!(status.success(), "{status}\n{}", daemon.log());
}

/// RFC 7396, for the test's expectations.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}
