//! Answering a request: parsed here, on the caller's thread, then handed
//! to the data plane as typed work ([`handle`], [`parse_batch`] and
//! [`apply_batch`]), and `show` rendered from a copy of its state
//! ([`snapshot`], [`render`]).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use dummynet_engine::{BatchError, Command, ConfigError, Nanos, Snapshot};
use dummynet_lang::{ShowRequest, Statement};

use super::*;
use crate::views;
use dummynet_dataplane::dataplane::{Answer, HostView, Request, RequestKind, Ticket};

/// The way to the data plane: its request channel and the socket whose
/// readability wakes it.
#[derive(Clone)]
pub struct PlaneLink {
    pub requests: Sender<Request>,
    pub wake: Arc<UnixStream>,
}

impl PlaneLink {
    /// Sends `kind` and waits up to `timeout` for the answer. A request not
    /// yet taken by then is abandoned, and the data plane skips it: the
    /// error says it was not applied, and that stays true. One already
    /// taken is being answered, so its answer is awaited.
    pub fn ask(&self, kind: RequestKind, timeout: Duration) -> Result<Answer, Reply> {
        let stopped = || {
            Reply::err(
                ErrorKind::Stopped,
                EX_UNAVAILABLE,
                "dummynet: the data plane has stopped\n",
            )
        };
        let (tx, rx) = mpsc::channel();
        let ticket = Ticket::default();
        let req = Request {
            kind,
            reply: tx,
            ticket: ticket.clone(),
        };
        if self.requests.send(req).is_err() {
            return Err(stopped());
        }
        // Non-blocking: a full buffer means a wake-up is already pending.
        let _ = (&*self.wake).write(&[1]);
        match rx.recv_timeout(timeout) {
            Ok(answer) => Ok(answer),
            Err(mpsc::RecvTimeoutError::Timeout) if ticket.abandon() => Err(Reply::err(
                ErrorKind::Timeout,
                EX_UNAVAILABLE,
                format!(
                    "dummynet: the data plane did not answer within {}; \
                     the request was withdrawn and will not take effect\n",
                    humanize(timeout)
                ),
            )),
            // Taken: the data plane is acting on it, and its answer should
            // follow at once. It gets one more timeout; past it the client
            // is told the request is still pending (it was taken, so it
            // cannot be withdrawn), rather than held without bound.
            Err(mpsc::RecvTimeoutError::Timeout) => match rx.recv_timeout(timeout) {
                Ok(answer) => Ok(answer),
                Err(mpsc::RecvTimeoutError::Timeout) => Err(Reply::err(
                    ErrorKind::Pending,
                    EX_TEMPFAIL,
                    format!(
                        "dummynet: the data plane took the request but has not answered \
                         within {}; it is still pending and may yet take effect: \
                         check with `ipfw show` or `pipe show`\n",
                        humanize(timeout.saturating_mul(2))
                    ),
                )),
                Err(mpsc::RecvTimeoutError::Disconnected) => Err(stopped()),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(stopped()),
        }
    }
}

fn humanize(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn unexpected() -> Reply {
    Reply::err(
        ErrorKind::Internal,
        EX_UNAVAILABLE,
        "dummynet: unexpected answer\n",
    )
}

/// Answers one request: parses it here, on the caller's thread, and hands
/// the data plane only typed work. Files the commands name are opened with
/// the `caller`'s rights (see [`Caller`]).
pub fn handle(req: ClientRequest, caller: &Caller, link: &PlaneLink, limits: &Limits) -> Reply {
    let timeout = limits.answer_timeout;
    if let Some(commands) = &req.commands {
        if !req.argv.is_empty() || req.stats {
            return Reply::err(
                ErrorKind::Syntax,
                EX_USAGE,
                "dummynet: a request has `commands` (a batch), `argv` (one command) \
                 or `stats`, not several\n",
            );
        }
        return match parse_batch(commands, req.cwd.as_deref(), caller) {
            Ok(batch) => apply_batch(batch, link, timeout),
            Err(reply) => reply,
        };
    }
    if req.stats {
        return match link.ask(RequestKind::Stats, timeout) {
            Ok(Answer::Stats(report)) if req.json => {
                Reply::ok(crate::stats_json::StatsJson::of(&report).to_line() + "\n")
            }
            Ok(Answer::Stats(report)) => Reply::ok(report.to_string()),
            Ok(_) => unexpected(),
            Err(reply) => reply,
        };
    }
    let parsed = match parse_as(&req.argv, req.cwd.as_deref(), caller) {
        Ok(p) => p,
        Err(e) => return parse_error(&e, None),
    };
    match &parsed.statement {
        Statement::Apply(cmd) => {
            let kind = RequestKind::Apply {
                command: Box::new(cmd.clone()),
                host: host_view(),
            };
            match link.ask(kind, timeout) {
                Ok(Answer::Applied(result)) => applied(&parsed.notes, result),
                Ok(_) => unexpected(),
                Err(reply) => reply,
            }
        }
        Statement::Show(show) => match snapshot(link, timeout) {
            Ok((snap, now)) => render(show, parsed.flags, &snap, now, req.json),
            Err(reply) => reply,
        },
        Statement::Nop(_) => applied(&parsed.notes, Ok(Vec::new())),
    }
}

/// A copy of the engine's state, taken by the data plane between two
/// packets, and its clock then: for `show`, rendered by the caller
/// ([`crate::views`] for JSON).
pub fn snapshot(link: &PlaneLink, timeout: Duration) -> Result<(Box<Snapshot>, Nanos), Reply> {
    match link.ask(RequestKind::Snapshot, timeout) {
        Ok(Answer::Snapshot { snap, now }) => Ok((snap, now)),
        Ok(_) => Err(unexpected()),
        Err(reply) => Err(reply),
    }
}

/// A batch parsed and ready for the data plane ([`parse_batch`]).
#[derive(Debug, Clone)]
pub struct Batch {
    /// The configuration commands, in order.
    commands: Vec<Command>,
    /// For each, its place in the request and its text.
    origin: Vec<(usize, String)>,
    /// The parser's warnings, each with its command's place.
    notes: Vec<String>,
}

impl Batch {
    /// How many commands the data plane will apply (blank ones and
    /// `kldload`-like no-ops left out).
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

/// Parses every command of a batch, on the caller's thread, before anything
/// is sent: the first that does not parse is the answer (`error.index`
/// names it, `error.column` and `error.found` the culprit in it). Only
/// configuration commands may be batched (not `show`).
pub fn parse_batch(
    commands: &[BatchCommand],
    cwd: Option<&std::path::Path>,
    caller: &Caller,
) -> Result<Batch, Reply> {
    if commands.is_empty() {
        return Err(Reply::err(
            ErrorKind::Syntax,
            EX_USAGE,
            "dummynet: an empty batch: `commands` needs at least one command\n",
        ));
    }
    let mut batch = Batch {
        commands: Vec::new(),
        origin: Vec::new(),
        notes: Vec::new(),
    };
    for (index, c) in commands.iter().enumerate() {
        let words = c.words();
        let text = words.join(" ");
        let parsed = parse_as(&words, cwd, caller).map_err(|e| parse_error(&e, Some(index)))?;
        match parsed.statement {
            Statement::Apply(cmd) => {
                batch.commands.push(cmd);
                batch.origin.push((index, text));
            }
            Statement::Show(_) => {
                return Err(Reply::err(
                    ErrorKind::Syntax,
                    EX_USAGE,
                    format!(
                        "ipfw: command {} of the batch (`{text}`) shows something; a batch \
                         takes only configuration commands: send it on its own\n",
                        index + 1
                    ),
                )
                .at(ErrorAt {
                    index: Some(index),
                    command: text,
                    column: Some(1),
                    found: None,
                }))
            }
            Statement::Nop(_) => {}
        }
        batch.notes.extend(
            parsed
                .notes
                .iter()
                .map(|n| format!("command {}: {n}", index + 1)),
        );
    }
    Ok(batch)
}

/// Applies a parsed batch as one unit between two packets
/// ([`dummynet_engine::Engine::apply_all`]): every command, or none if the
/// engine refuses one (`error.index` names it); packets already queued are
/// kept either way.
pub fn apply_batch(batch: Batch, link: &PlaneLink, timeout: Duration) -> Reply {
    if batch.is_empty() {
        return applied(&batch.notes, Ok(Vec::new()));
    }
    let kind = RequestKind::ApplyAll {
        commands: batch.commands,
        host: host_view(),
    };
    match link.ask(kind, timeout) {
        Ok(Answer::AppliedAll(Ok(notes))) => applied(&batch.notes, Ok(notes)),
        Ok(Answer::AppliedAll(Err(BatchError { index, error }))) => {
            let (at, text) = batch.origin.get(index).cloned().unwrap_or_default();
            Reply::err(
                config_kind(&error),
                EX_DATAERR,
                format!(
                    "ipfw: command {} of the batch (`{text}`): {error}; \
                     none of the batch was applied\n",
                    at + 1
                ),
            )
            .at(ErrorAt {
                index: Some(at),
                command: text,
                column: None,
                found: None,
            })
        }
        Ok(_) => unexpected(),
        Err(reply) => reply,
    }
}

/// The answer to an applied (or refused) command: the parser's doubts and
/// the values the engine brought within a plug-in's bounds are warnings.
fn applied(
    parser_notes: &[String],
    result: Result<Vec<dummynet_engine::ConfigNote>, ConfigError>,
) -> Reply {
    match result {
        Ok(notes) => Reply {
            stderr: parser_notes
                .iter()
                .cloned()
                .chain(notes.iter().map(ToString::to_string))
                .map(|n| format!("ipfw: warning: {n}\n"))
                .collect(),
            ..Reply::ok("")
        },
        Err(e) => Reply::err(config_kind(&e), EX_DATAERR, format!("ipfw: {e}\n")),
    }
}

/// What `show` prints for `req`, from a copy of the engine's state taken
/// at `now`: ipfw's text, or with `json` one JSON document
/// ([`crate::views`]).
pub fn render(
    req: &ShowRequest,
    f: dummynet_lang::Flags,
    snap: &Snapshot,
    now: Nanos,
    json: bool,
) -> Reply {
    if json {
        let line = match req {
            ShowRequest::Rules { numbers, .. } => {
                views::to_line(&views::rules(snap, numbers, f.dynamic))
            }
            ShowRequest::Pipes(n) => views::to_line(&views::pipes(snap, n)),
            ShowRequest::Queues(n) => views::to_line(&views::queues(snap, n)),
            ShowRequest::Scheds(n) => views::to_line(&views::scheds(snap, n)),
            ShowRequest::Sets => views::to_line(&views::sets(snap)),
            ShowRequest::Memory => views::to_line(&views::memory(snap)),
            ShowRequest::Tables(name) => match views::tables(snap, name.as_ref()) {
                Some(t) => views::to_line(&t),
                None => return no_table(name.as_ref()),
            },
        };
        return Reply::ok(line + "\n");
    }
    let text = match req {
        ShowRequest::Rules { numbers, counters } => dummynet_lang::format_rules_with(
            snap,
            &dummynet_lang::RuleShow {
                numbers,
                counters: *counters || f.counters,
                timestamps: f.timestamps,
                dynamic: f.dynamic,
                sets: f.sets,
                wall: Some((now, std::time::SystemTime::now())),
                epoch: f.epoch,
            },
        ),
        ShowRequest::Pipes(n) => dummynet_lang::format_pipes(snap, n),
        ShowRequest::Queues(n) => dummynet_lang::format_queues(snap, n),
        ShowRequest::Scheds(n) => dummynet_lang::format_scheds(snap, n),
        ShowRequest::Sets => dummynet_lang::format_sets(snap),
        ShowRequest::Memory => snap.memory.to_string(),
        ShowRequest::Tables(name) => match dummynet_lang::format_tables(snap, name.as_ref()) {
            Ok(t) => t,
            Err(_) => return no_table(name.as_ref()),
        },
    };
    Reply::ok(text)
}

fn no_table(name: Option<&dummynet_engine::config::TableName>) -> Reply {
    let name = name.map(ToString::to_string).unwrap_or_default();
    Reply::err(
        ErrorKind::NotFound,
        EX_DATAERR,
        format!("ipfw: table {name} does not exist\n"),
    )
}

/// The host as the engine should see it for a command: read here, in the
/// daemon's namespace (the control threads run where the data plane does),
/// so that /proc and netlink are never read on the data-plane thread.
pub fn host_view() -> HostView {
    HostView {
        addrs: dummynet_dataplane::local_addrs(),
        routes: dummynet_dataplane::routes::host_routes(),
    }
}

/// Parses a command line, opening the files it names as `caller`. The
/// identity is taken for the parse only, on this thread only.
fn parse_as(
    argv: &[String],
    cwd: Option<&std::path::Path>,
    caller: &Caller,
) -> Result<dummynet_lang::Parsed, dummynet_lang::ParseError> {
    match caller {
        Caller::Trusted => dummynet_lang::parse_args_in(argv, cwd),
        Caller::NoFiles => dummynet_lang::parse_args_untrusted(argv, cwd),
        Caller::As(who) => match dummynet_io::fsident::assume(who) {
            Ok(_as) => dummynet_lang::parse_args_in(argv, cwd),
            // Not root: files are refused, with the reason.
            Err(_) => dummynet_lang::parse_args_untrusted(argv, cwd),
        },
    }
}

/// The kind and exit status of a command that did not parse.
pub fn parse_kind(e: &dummynet_lang::ParseError) -> (ErrorKind, i32) {
    use dummynet_lang::ErrorKind as K;
    match e.kind {
        K::Syntax => (ErrorKind::Syntax, EX_USAGE),
        K::Range | K::File => (ErrorKind::Invalid, EX_USAGE),
        K::Unavailable => (ErrorKind::Unavailable, EX_UNAVAILABLE),
    }
}

/// The reply to a command that did not parse (`index`: its place in a
/// batch).
pub fn parse_error(e: &dummynet_lang::ParseError, index: Option<usize>) -> Reply {
    let (kind, status) = parse_kind(e);
    let stderr = match index {
        Some(i) => format!("ipfw: command {} of the batch: {e}\n", i + 1),
        None => format!("ipfw: {e}\n"),
    };
    Reply::err(kind, status, stderr).at(ErrorAt {
        index,
        command: e.source.clone(),
        column: Some(e.column),
        found: e.found().map(String::from),
    })
}

/// Applies or shows one parsed command against an engine the caller owns
/// (a test's; the daemon's goes through [`handle`]).
#[cfg(test)]
pub fn execute<P: dummynet_engine::Payload>(
    engine: &mut dummynet_engine::Engine<P>,
    now: Nanos,
    parsed: &dummynet_lang::Parsed,
    json: bool,
) -> Reply {
    match &parsed.statement {
        Statement::Apply(cmd) => applied(
            &parsed.notes,
            engine.apply(now, cmd.clone()).map(|()| engine.take_notes()),
        ),
        Statement::Show(req) => render(req, parsed.flags, &engine.snapshot(), now, json),
        Statement::Nop(_) => applied(&parsed.notes, Ok(Vec::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_engine::flow::FlowKey;
    use dummynet_engine::{Direction, Engine, PacketInfo};
    use std::net::Ipv4Addr;

    const MS: Nanos = 1_000_000;

    /// A data plane on a thread of its own that answers every request
    /// against its engine, as the daemon's does between packets; the
    /// engine comes back when the link is dropped.
    struct Plane {
        link: Option<PlaneLink>,
        thread: Option<std::thread::JoinHandle<Engine<()>>>,
        _wake: UnixStream,
    }

    impl Plane {
        fn new(mut engine: Engine<()>) -> Plane {
            let (tx, rx) = mpsc::channel::<Request>();
            let (wake, peer) = UnixStream::pair().unwrap();
            peer.set_nonblocking(true).unwrap();
            let thread = std::thread::spawn(move || {
                let now = engine.now();
                while let Ok(req) = rx.recv() {
                    if !req.ticket.take() {
                        continue;
                    }
                    let answer = match req.kind {
                        RequestKind::Stats => Answer::Stats(Box::default()),
                        RequestKind::Snapshot => Answer::Snapshot {
                            snap: Box::new(engine.snapshot()),
                            now,
                        },
                        RequestKind::Apply { command, .. } => Answer::Applied(
                            engine.apply(now, *command).map(|()| engine.take_notes()),
                        ),
                        RequestKind::ApplyAll { commands, .. } => {
                            Answer::AppliedAll(engine.apply_all(now, commands))
                        }
                        RequestKind::Attach { backend, .. } => {
                            Answer::Attached(Err(("no ports here".into(), backend)))
                        }
                        RequestKind::Detach { commands, .. } => {
                            Answer::Detached(None, engine.apply_all(now, commands))
                        }
                    };
                    let _ = req.reply.send(answer);
                }
                engine
            });
            Plane {
                link: Some(PlaneLink {
                    requests: tx,
                    wake: Arc::new(peer),
                }),
                thread: Some(thread),
                _wake: wake,
            }
        }

        fn ask(&self, req: ClientRequest) -> Reply {
            let link = self.link.as_ref().unwrap();
            handle(req, &Caller::NoFiles, link, &Limits::default())
        }

        fn line(&self, line: &str, json: bool) -> Reply {
            self.ask(ClientRequest {
                argv: line.split_whitespace().map(String::from).collect(),
                json,
                ..Default::default()
            })
        }

        fn batch(&self, commands: &[&str]) -> Reply {
            self.ask(ClientRequest {
                commands: Some(
                    commands
                        .iter()
                        .map(|c| BatchCommand::Line(c.to_string()))
                        .collect(),
                ),
                ..Default::default()
            })
        }

        fn json(&self, line: &str) -> serde_json::Value {
            let r = self.line(line, true);
            assert_eq!(r.status, 0, "{line}: {r:?}");
            assert!(r.stdout.ends_with('\n') && r.stdout.matches('\n').count() == 1);
            serde_json::from_str(&r.stdout).unwrap()
        }

        fn engine(mut self) -> Engine<()> {
            drop(self.link.take());
            self.thread.take().unwrap().join().unwrap()
        }
    }

    fn configured(lines: &[&str]) -> Engine<()> {
        let mut e: Engine<()> = Engine::new(1);
        for line in lines {
            let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
            let parsed = dummynet_lang::parse_args(&argv).unwrap();
            let Statement::Apply(cmd) = parsed.statement else {
                panic!("{line}")
            };
            e.apply(0, cmd)
                .unwrap_or_else(|err| panic!("{line}: {err}"));
        }
        e
    }

    fn udp(src: [u8; 4], sport: u16, len: u32) -> PacketInfo {
        PacketInfo {
            len,
            key: FlowKey::v4(
                Ipv4Addr::from(src),
                Ipv4Addr::new(10, 0, 0, 9),
                17,
                sport,
                53,
            ),
            dir: Direction::In,
            recv_if: None,
            xmit_if: None,
        }
    }

    /// Pipes, queues, a scheduler, rules with a state, a table, a disabled
    /// set, and packets queued in them.
    fn busy_engine() -> Engine<()> {
        let mut e = configured(&[
            "pipe 1 config bw 1Mbit/s delay 20ms queue 10 plr 0.25",
            "sched 2 config type wf2q+ bw 2Mbit/s",
            "queue 3 config sched 2 weight 5 queue 30KBytes mask src-ip 0xffffffff",
            "table 7 create",
            "table 7 add 10.1.0.0/16 42",
            "add 100 pipe 1 udp from any to any dst-port 53 keep-state",
            "add 200 set 4 queue 3 ip from any to any",
            "set disable 4",
        ]);
        for i in 0..3 {
            let _ = e.input(i * MS, udp([10, 1, 0, 1], 1000 + i as u16, 1000), ());
        }
        e
    }

    #[test]
    fn rules_show_as_json_with_counters_and_states() {
        let plane = Plane::new(busy_engine());
        let v = plane.json("-d show");
        let rules = v["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 3, "{v}");
        let r = &rules[0];
        assert_eq!(r["number"], 100);
        assert_eq!(r["set"], 0);
        assert_eq!(
            r["rule"],
            "pipe 1 udp from any to any dst-port 53 keep-state"
        );
        assert_eq!((&r["packets"], &r["bytes"]), (&3.into(), &3000.into()));
        assert_eq!(r["last_match_ns"], 2 * MS);
        assert_eq!(r["default"], false);
        assert_eq!(rules[1]["set"], 4);
        assert_eq!(rules[2]["number"], 65535);
        assert_eq!(rules[2]["rule"], "deny ip from any to any");
        assert_eq!(rules[2]["default"], true);
        assert!(rules[2]["last_match_ns"].is_null());
        let states = v["states"].as_array().unwrap();
        assert_eq!(states.len(), 3, "one per source port: {v}");
        let s = &states[0];
        assert_eq!(s["rule"], 100);
        assert_eq!(s["flow"]["src"], "10.1.0.1");
        assert_eq!(s["flow"]["dst"], "10.0.0.9");
        assert_eq!(
            (&s["flow"]["proto"], &s["flow"]["dst_port"]),
            (&17.into(), &53.into())
        );
        assert_eq!((&s["packets"], &s["bytes"]), (&1.into(), &1000.into()));
        assert!(s["expires_in_ns"].as_u64().unwrap() > 0);
        // Without -d there are no states; with numbers, only those rules.
        let v = plane.json("show 200");
        assert!(v.get("states").is_none(), "{v}");
        assert_eq!(v["rules"].as_array().unwrap().len(), 1);
        // The sets.
        let v = plane.json("set show");
        assert_eq!(v["disabled"], serde_json::json!([4]));
        assert_eq!(v["enabled"].as_array().unwrap().len(), 31);
    }

    #[test]
    fn pipes_queues_and_scheds_show_as_json() {
        let plane = Plane::new(busy_engine());
        let v = plane.json("pipe show");
        let pipes = v["pipes"].as_array().unwrap();
        assert_eq!(
            pipes.len(),
            2,
            "sched 2's link is listed too, as in text: {v}"
        );
        let p = &pipes[0];
        assert_eq!(p["number"], 1);
        assert_eq!(p["link"]["bandwidth_bps"], 1_000_000);
        assert_eq!(p["link"]["delay_ns"], 20 * MS);
        assert_eq!(p["link"]["burst_bytes"], 0);
        assert_eq!(p["sched_type"], "WF2Q+");
        let q = &p["queue"];
        assert_eq!(q["limit_packets"], 10);
        assert!(q["limit_bytes"].is_null());
        assert_eq!(q["plr"], 0.25);
        let flows = q["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 1, "no mask: one queue: {v}");
        // Each of the 3 packets passed the plr draw or was dropped by it;
        // those that passed wait for the 1 Mbit/s link or are on it.
        let total = flows[0]["total_packets"].as_u64().unwrap();
        let dropped = flows[0]["dropped_packets"].as_u64().unwrap();
        assert_eq!(total, 3);
        assert!(dropped <= 3);
        assert_eq!(flows[0]["total_bytes"], 3000);
        // 1000 bytes take 8 ms at 1 Mbit/s and they came 1 ms apart: all
        // but the first that passed found the link busy.
        assert_eq!(p["waited_packets"], (total - dropped).saturating_sub(1));
        assert_eq!(pipes[1]["waited_packets"], 0);

        let v = plane.json("queue show");
        let queues = v["queues"].as_array().unwrap();
        assert_eq!(queues.len(), 1, "{v}");
        let q = &queues[0];
        assert_eq!((&q["number"], &q["sched"]), (&3.into(), &2.into()));
        assert_eq!((&q["weight"], &q["linked"]), (&5.into(), &true.into()));
        assert_eq!(q["limit_bytes"], 30 * 1024);
        assert!(q["limit_packets"].is_null());
        assert_eq!(q["mask"]["src_ip"], "255.255.255.255");
        assert_eq!(q["mask"]["dst_ip"], "0.0.0.0");
        assert_eq!(q["aqm"], "droptail");
        assert_eq!(
            q["flows"].as_array().unwrap().len(),
            0,
            "rule 200 is disabled"
        );

        let v = plane.json("sched show");
        let scheds = v["scheds"].as_array().unwrap();
        let s = scheds.iter().find(|s| s["number"] == 2).unwrap();
        assert_eq!(s["type"], "WF2Q+");
        assert_eq!(s["link"]["bandwidth_bps"], 2_000_000);
        assert!(s["params"].is_object());
        // Pipe 1 has its scheduler 1 too, as FreeBSD lists it.
        assert!(scheds.iter().any(|s| s["number"] == 1), "{v}");
        let v = plane.json("pipe 9 show");
        assert_eq!(v["pipes"], serde_json::json!([]));
    }

    #[test]
    fn tables_and_memory_show_as_json() {
        let plane = Plane::new(busy_engine());
        let v = plane.json("table 7 list");
        assert_eq!(
            v,
            serde_json::json!({"tables": [{"name": "7", "type": "addr",
                "entries": [{"key": "10.1.0.0/16", "value": 42}]}]})
        );
        assert_eq!(
            plane.json("table all list")["tables"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        let r = plane.line("table 8 list", true);
        assert_eq!((r.status, r.kind), (EX_DATAERR, Some(ErrorKind::NotFound)));
        assert!(r.stderr.contains("table 8 does not exist"), "{r:?}");
        let v = plane.json("memory");
        let m = &v["memory_bytes"];
        assert!(m["parts"]["packets"]["now"].as_u64().unwrap() > 0, "{v}");
        assert!(m["parts"]["rules"]["worst"].is_u64(), "{v}");
        assert!(m["instance_limit"].as_u64().unwrap() > 0);
        // Without --json the same request is text, as before.
        let r = plane.line("table 7 list", false);
        assert_eq!(r.stdout, "--- table(7), set(0) ---\n10.1.0.0/16 42\n");
    }

    #[test]
    fn errors_carry_their_kind_and_the_status_ipfw_gives() {
        let plane = Plane::new(configured(&["pipe 1 config bw 1Mbit/s"]));
        let cases = [
            ("pipe 1 config bw", ErrorKind::Syntax, EX_USAGE),
            ("pipe 1 confg bw 1Mbit/s", ErrorKind::Syntax, EX_USAGE),
            ("pipe 1 config plr 1.5", ErrorKind::Invalid, EX_USAGE),
            (
                "nat 1 config if eth0",
                ErrorKind::Unavailable,
                EX_UNAVAILABLE,
            ),
            ("pipe 9 delete", ErrorKind::NotFound, EX_DATAERR),
            ("delete 300", ErrorKind::NotFound, EX_DATAERR),
            ("pipe 1 config queue 500", ErrorKind::Invalid, EX_DATAERR),
        ];
        for (line, kind, status) in cases {
            let r = plane.line(line, false);
            assert_eq!((r.kind, r.status), (Some(kind), status), "{line}: {r:?}");
            assert!(r.stderr.starts_with("ipfw: "), "{r:?}");
        }
        plane.line("table 1 create", false);
        let r = plane.line("table 1 create", false);
        assert_eq!(r.kind, Some(ErrorKind::Conflict), "{r:?}");
        // A parse error says where.
        let r = plane.line("pipe 1 confg bw 1Mbit/s", false);
        let at = *r.error.unwrap();
        assert_eq!((at.index, at.column), (None, Some(8)));
        assert_eq!(at.found.as_deref(), Some("confg"));
        assert_eq!(at.command, "pipe 1 confg bw 1Mbit/s");
        // Success has no kind, and the JSON line has no such field.
        let r = plane.line("pipe 1 config bw 2Mbit/s", false);
        assert_eq!((r.status, r.kind), (0, None));
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains("kind") && !line.contains("error"), "{line}");
        let r = plane.line("pipe 9 delete", false);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["kind"], "not_found");
    }

    /// `ipfw del pipe 1` deletes nothing, as FreeBSD's does, and the
    /// client is told, with the command that would.
    #[test]
    fn delete_pipe_n_succeeds_deleting_nothing_with_a_warning() {
        let plane = Plane::new(configured(&["pipe 1 config bw 1Mbit/s"]));
        let r = plane.line("del pipe 1", false);
        assert_eq!(r.status, 0, "{r:?}");
        assert!(
            r.stderr
                .starts_with("ipfw: warning: `delete pipe 1` deletes nothing")
                && r.stderr.contains("`pipe 1 delete` deletes pipe 1"),
            "{}",
            r.stderr
        );
        assert!(plane
            .engine()
            .snapshot()
            .links
            .iter()
            .any(|l| l.number == 1));
    }

    #[test]
    fn a_batch_that_does_not_parse_names_the_command_and_sends_nothing() {
        let plane = Plane::new(Engine::new(1));
        let r = plane.batch(&[
            "pipe 1 config bw 1Mbit/s",
            "add 100 pipe 1 ip from any to any",
            "add 200 pipe 1 ip frm any to any",
        ]);
        assert_eq!(
            (r.status, r.kind),
            (EX_USAGE, Some(ErrorKind::Syntax)),
            "{r:?}"
        );
        let at = *r.error.clone().unwrap();
        assert_eq!(at.index, Some(2));
        assert_eq!(at.command, "add 200 pipe 1 ip frm any to any");
        assert_eq!(at.found.as_deref(), Some("frm"));
        assert_eq!(at.column, Some(19));
        assert!(
            r.stderr.starts_with("ipfw: command 3 of the batch: "),
            "{}",
            r.stderr
        );
        // `show` is not a configuration command.
        let r = plane.batch(&["pipe 1 config bw 1Mbit/s", "pipe 1 show"]);
        assert_eq!(r.error.and_then(|a| a.index), Some(1));
        // Nor is an empty batch, or a batch with argv.
        assert_eq!(plane.batch(&[]).kind, Some(ErrorKind::Syntax));
        let r = plane.ask(ClientRequest {
            argv: vec!["show".into()],
            commands: Some(vec![BatchCommand::Line("flush".into())]),
            ..Default::default()
        });
        assert_eq!(r.kind, Some(ErrorKind::Syntax));
        let snap = plane.engine().snapshot();
        assert!(
            snap.links.is_empty() && snap.rules.len() == 1,
            "nothing applied"
        );
    }

    #[test]
    fn a_batch_the_engine_refuses_leaves_nothing_applied() {
        let plane = Plane::new(busy_engine());
        let held = busy_engine().held_packets();
        assert!(held > 0);
        let before = plane.line("show", false).stdout;
        let r = plane.batch(&[
            "pipe 5 config bw 5Mbit/s",
            "add 50 pipe 5 ip from any to any",
            "queue 9 delete",
        ]);
        assert_eq!(
            (r.status, r.kind),
            (EX_DATAERR, Some(ErrorKind::NotFound)),
            "{r:?}"
        );
        let at = *r.error.clone().unwrap();
        assert_eq!((at.index, at.command.as_str()), (Some(2), "queue 9 delete"));
        assert!(
            r.stderr.contains("none of the batch was applied"),
            "{}",
            r.stderr
        );
        assert_eq!(plane.line("show", false).stdout, before);
        assert!(plane.json("pipe 5 show")["pipes"]
            .as_array()
            .unwrap()
            .is_empty());
        // Taken whole, with words as well as lines, and warnings kept.
        let r = plane.ask(ClientRequest {
            commands: Some(vec![
                BatchCommand::Line("pipe 5 config bw 10".into()),
                BatchCommand::Words(
                    ["add", "50", "pipe", "5", "ip", "from", "any", "to", "any"]
                        .map(String::from)
                        .to_vec(),
                ),
            ]),
            ..Default::default()
        });
        assert_eq!(r.status, 0, "{r:?}");
        assert!(
            r.stderr.starts_with("ipfw: warning: command 1: `bw 10`"),
            "{}",
            r.stderr
        );
        let e = plane.engine();
        assert_eq!(e.held_packets(), held, "the queued packets stayed");
        let snap = e.snapshot();
        assert!(snap.links.iter().any(|l| l.number == 5));
        assert!(snap.rules.iter().any(|r| r.number == 50));
    }

    /// The copy `apply_all` tries a batch on agrees with the engine: for
    /// pairs of commands on a configured engine, the batch is refused at
    /// the command sequential application refuses first, and leaves the
    /// configuration as it was; taken, it leaves what the two left.
    #[test]
    fn a_batch_is_refused_exactly_where_applying_one_by_one_would_fail() {
        let base = [
            "pipe 1 config bw 1Mbit/s",
            "sched 2 config type qfq",
            "queue 3 config sched 2 weight 4",
            "table 1 create",
            "add 100 pipe 1 ip from table(1) to any",
            "add 200 set 3 queue 3 ip from any to any",
        ];
        let candidates = [
            "pipe 1 delete",
            "pipe 2 config delay 5ms",
            "pipe 2 delete",
            "sched 2 config type prio",
            "sched 2 config type wf2q+",
            "queue 3 config sched 2 weight 0",
            "queue 3 delete",
            "queue 4 config sched 2 lmax 100",
            "queue 4 modify weight 2",
            "pipe 1 modify delay 10ms",
            "table 1 destroy",
            "table 1 create",
            "table 1 add 10.0.0.0/8",
            "table 1 delete 10.0.0.0/8",
            "delete 100",
            "delete 100",
            "add 300 pipe 2 ip from any to any",
            "set move 3 to 4",
            "delete set 3",
            "sysctl net.inet.ip.dummynet.pipe_slot_limit=20",
            "pipe 6 config queue 30",
            "flush",
            "dnctl flush",
        ];
        let parse = |line: &str| {
            let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
            match dummynet_lang::parse_args(&argv).unwrap().statement {
                Statement::Apply(c) => c,
                _ => panic!("{line}"),
            }
        };
        let show = |e: &Engine<()>| {
            let s = e.snapshot();
            format!(
                "{:?} {:?} {:?} {:?} {:?}",
                s.rules, s.links, s.flowsets, s.tables, s.settings
            )
        };
        let mut refused = 0;
        for a in candidates {
            for b in candidates {
                let mut one_by_one = configured(&base);
                let first = one_by_one.apply(0, parse(a));
                let second = first.is_ok().then(|| one_by_one.apply(0, parse(b)));
                let mut batched = configured(&base);
                let before = show(&batched);
                let r = batched.apply_all(0, vec![parse(a), parse(b)]);
                match (first, second) {
                    (Err(e), _) => {
                        assert_eq!(r.map_err(|x| (x.index, x.error)), Err((0, e)), "{a} / {b}");
                        assert_eq!(show(&batched), before, "{a} / {b}");
                        refused += 1;
                    }
                    (Ok(()), Some(Err(e))) => {
                        assert_eq!(r.map_err(|x| (x.index, x.error)), Err((1, e)), "{a} / {b}");
                        assert_eq!(show(&batched), before, "{a} / {b}: half applied");
                        refused += 1;
                    }
                    _ => {
                        assert!(r.is_ok(), "{a} / {b}: {r:?}");
                        assert_eq!(show(&batched), show(&one_by_one), "{a} / {b}");
                    }
                }
            }
        }
        assert!(refused > 50, "the pairs test refusals too: {refused}");
    }
}
