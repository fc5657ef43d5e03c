//! `log` rules, live: the data plane hands the engine's log events to a
//! thread of their own, which writes them to the daemon's stderr in
//! FreeBSD's form (`ipfw: 100 Accept TCP 10.0.0.1:5000 10.0.0.2:80 out via
//! eth0`), so a slow terminal or a full pipe never holds up forwarding.
//! A batch waits at most [`super::say::WAIT`] for stderr, and none waits
//! while stderr takes nothing, so a pipe nobody reads holds up no exit.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use dummynet_engine::classifier::LogEvent;
use dummynet_engine::{Engine, Payload};

/// One hand-over: events with their interfaces' names, and how many the
/// engine could not keep.
struct Batch {
    events: Vec<(LogEvent, Option<String>, Option<String>)>,
    lost: u64,
}

/// Batches in flight at most; more are counted as lost, not queued.
const BACKLOG: usize = 64;

pub struct RuleLog {
    tx: Option<SyncSender<Batch>>,
    thread: Option<JoinHandle<()>>,
    /// Events dropped because the writer fell behind.
    dropped: u64,
}

impl RuleLog {
    pub fn start() -> RuleLog {
        let (tx, rx) = mpsc::sync_channel(BACKLOG);
        let thread = std::thread::Builder::new()
            .name("dummynet-log".into())
            .spawn(move || write_all(rx))
            .ok();
        RuleLog {
            tx: thread.as_ref().map(|_| tx),
            thread,
            dropped: 0,
        }
    }

    /// Takes what the engine logged, if anything; cheap when nothing was.
    pub fn take<P: Payload>(&mut self, engine: &mut Engine<P>) {
        if !engine.has_log() {
            return;
        }
        let (events, lost) = engine.take_log();
        let name = |id: Option<dummynet_engine::IfaceId>| {
            id.and_then(|i| engine.iface_name(i)).map(str::to_string)
        };
        let events: Vec<_> = events
            .into_iter()
            .map(|e| (e, name(e.recv_if), name(e.xmit_if)))
            .collect();
        let n = events.len() as u64;
        let Some(tx) = &self.tx else {
            self.dropped += n;
            return;
        };
        match tx.try_send(Batch {
            events,
            lost: lost + std::mem::take(&mut self.dropped),
        }) {
            Ok(()) => {}
            Err(TrySendError::Full(b) | TrySendError::Disconnected(b)) => {
                self.dropped += b.events.len() as u64 + b.lost;
            }
        }
    }
}

impl Drop for RuleLog {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn write_all(rx: Receiver<Batch>) {
    // Once stderr has kept a batch waiting in vain, the next ones do not
    // wait (each would, and the daemon's exit joins this thread) until
    // one is taken again.
    let mut blocked = false;
    for b in rx {
        let mut out = String::new();
        for (e, recv, xmit) in &b.events {
            out.push_str(&dummynet_lang::format_log(
                e,
                recv.as_deref(),
                xmit.as_deref(),
            ));
            out.push('\n');
        }
        if b.lost > 0 {
            out.push_str(&format!(
                "ipfw: {} log entries lost (the log fell behind)\n",
                b.lost
            ));
        }
        let Some(out) = out.strip_suffix('\n') else {
            continue;
        };
        let lost = super::say::stderr_lost().map_or(0, |(n, _)| n);
        if blocked {
            say_now!("{out}");
        } else {
            say!("{out}");
        }
        blocked = super::say::stderr_lost().map_or(0, |(n, _)| n) > lost;
    }
}
