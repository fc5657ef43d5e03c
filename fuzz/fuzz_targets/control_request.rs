//! What a client may send on the control socket: one line, decoded as the
//! daemon decodes it (`decode_request`), then handled as the daemon handles
//! it (`handle`: parse, send typed work to a data plane, render) against a
//! stand-in data plane that owns an engine. Never a panic, every answer has
//! a known status and, if it failed, says why, and encodes to a line a
//! client can read back.
#![no_main]

use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use dummynet::live::control::{decode_request, handle, Caller, Limits, PlaneLink, Reply};
use dummynet::live::dataplane::{Answer, Request, RequestKind};
use dummynet_engine::Engine;
use libfuzzer_sys::fuzz_target;

/// A data plane that applies each request to its own engine, as the
/// daemon's does between packets, until every sender is gone.
fn stand_in_plane(requests: mpsc::Receiver<Request>) {
    let mut engine: Engine<()> = Engine::new(1);
    let mut now = 0;
    while let Ok(req) = requests.recv() {
        if !req.ticket.take() {
            continue;
        }
        now += 1_000_000;
        let answer = match req.kind {
            RequestKind::Stats => Answer::Stats(Box::default()),
            RequestKind::Snapshot => Answer::Snapshot {
                snap: Box::new(engine.snapshot()),
                now,
            },
            RequestKind::Apply { command, .. } => {
                Answer::Applied(engine.apply(now, *command).map(|()| engine.take_notes()))
            }
            RequestKind::ApplyAll { commands, .. } => {
                Answer::AppliedAll(engine.apply_all(now, commands))
            }
            // A joined shell's ports: no request line makes these (they come
            // from `shell --join`'s session), but the stand-in answers them
            // as a plane without room would.
            RequestKind::Attach { backend, .. } => {
                Answer::Attached(Err(("no ports here".into(), backend)))
            }
            RequestKind::Detach { commands, .. } => {
                Answer::Detached(None, engine.apply_all(now, commands))
            }
        };
        let _ = req.reply.send(answer);
    }
}

fuzz_target!(|data: &[u8]| {
    // No generated host name may become a DNS query.
    dummynet_lang::resolve_host_names(false);
    let limits = Limits {
        answer_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let req = match decode_request(data, limits.max_request) {
        Ok(req) => req,
        Err(why) => {
            assert!(!why.to_string().is_empty());
            return;
        }
    };
    // A line names at most a few commands; the rest is not worth a thread.
    let (tx, rx) = mpsc::channel();
    let Ok((wake, _wake_peer)) = UnixStream::pair() else {
        return;
    };
    let _ = wake.set_nonblocking(true);
    let plane = std::thread::spawn(move || stand_in_plane(rx));
    let link = PlaneLink {
        requests: tx,
        wake: Arc::new(wake),
    };
    // Files are refused unread: the fuzzer must not read the machine's.
    let reply = handle(req, &Caller::NoFiles, &link, &limits);
    drop(link);
    let _ = plane.join();
    assert!(
        matches!(reply.status, 0 | 64 | 65 | 69),
        "unexpected status: {reply:?}"
    );
    if reply.status != 0 {
        assert!(
            !reply.stderr.is_empty(),
            "a failure that says nothing: {reply:?}"
        );
        assert!(reply.kind.is_some(), "a failure without a kind: {reply:?}");
    }
    let line = serde_json::to_string(&reply).expect("a reply encodes");
    assert!(!line.contains('\n'), "an answer line with a newline inside");
    let back: Reply = serde_json::from_str(&line).expect("a reply decodes");
    assert_eq!(back, reply);
});
