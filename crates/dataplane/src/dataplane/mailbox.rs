//! The control plane's requests and the data plane's answers.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use dummynet_engine::Nanos;

use super::{DataPlane, Report, MAX_BACKENDS};
use crate::Backend;

/// A request from the control plane, answered on `reply`. The control
/// thread has already parsed and checked it: the data plane only applies a
/// typed command or copies what `show` and `stats` print, so that nothing
/// a client sends costs forwarding more than that.
pub struct Request {
    pub kind: RequestKind,
    pub reply: Sender<Answer>,
    pub ticket: Ticket,
}

pub enum RequestKind {
    /// Apply a parsed command, after telling the engine what the host
    /// looks like now (read on the control thread: /proc and netlink).
    Apply {
        command: Box<dummynet_engine::Command>,
        host: HostView,
    },
    /// Apply parsed commands as one unit: all of them or none
    /// (`Engine::apply_all`).
    ApplyAll {
        commands: Vec<dummynet_engine::Command>,
        host: HostView,
    },
    /// A copy of the engine's state, for `show`, rendered by the asker.
    Snapshot,
    /// `dummynet stats`.
    Stats,
    /// A backend opened off this thread (a joined shell's ports,
    /// [`crate::join`]), to read and write from now on, with the commands
    /// that give it its pipes and rules (all or none). Refused, the
    /// backend comes back in the answer, to be closed off this thread.
    Attach {
        backend: Box<dyn Backend>,
        commands: Vec<dummynet_engine::Command>,
        host: HostView,
    },
    /// Takes the backend out of `slot` and applies `commands` (deleting
    /// its pipes and rules: what they hold is dropped). The backend comes
    /// back in the answer, to be closed off this thread.
    Detach {
        slot: usize,
        commands: Vec<dummynet_engine::Command>,
    },
}

/// What the data plane answers.
pub enum Answer {
    /// The engine's notes (values it brought within bounds), or why it
    /// refused the command.
    Applied(Result<Vec<dummynet_engine::ConfigNote>, dummynet_engine::ConfigError>),
    /// The notes of every command of a batch, or the one refused (and
    /// then none was applied).
    AppliedAll(Result<Vec<dummynet_engine::ConfigNote>, dummynet_engine::BatchError>),
    Snapshot {
        snap: Box<dummynet_engine::Snapshot>,
        now: Nanos,
    },
    Stats(Box<Report>),
    /// The slot the backend took, or why it was refused and the backend.
    Attached(Result<usize, (String, Box<dyn Backend>)>),
    /// The backend taken out (`None`: the slot held none), and what the
    /// commands said.
    Detached(
        Option<Box<dyn Backend>>,
        Result<Vec<dummynet_engine::ConfigNote>, dummynet_engine::BatchError>,
    ),
}

/// The addresses `me` matches and the routes `verrevpath` follows, as the
/// control thread read them for a command.
#[derive(Debug, Clone, Default)]
pub struct HostView {
    pub addrs: Vec<std::net::IpAddr>,
    pub routes: Option<Vec<dummynet_engine::config::Route>>,
}

/// Who acts on a request: the data plane, which takes it before acting,
/// or the asker, which abandons it when it stops waiting. Exactly one of
/// the two wins, so a client told "not applied" is never contradicted by
/// the command taking effect later.
#[derive(Clone, Default)]
pub struct Ticket(Arc<std::sync::atomic::AtomicU8>);

pub(super) const TICKET_OPEN: u8 = 0;
pub(super) const TICKET_TAKEN: u8 = 1;
pub(super) const TICKET_ABANDONED: u8 = 2;

impl Ticket {
    /// The data plane's side: true if it may act on the request.
    pub fn take(&self) -> bool {
        self.0
            .compare_exchange(
                TICKET_OPEN,
                TICKET_TAKEN,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// The asker's side: true if the request will now never be acted on;
    /// false if the data plane has already taken it (its answer follows).
    pub fn abandon(&self) -> bool {
        self.0
            .compare_exchange(
                TICKET_OPEN,
                TICKET_ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}

/// The control plane's way in: requests plus a socket whose readability
/// wakes the data plane from its wait.
pub struct Inbox {
    pub requests: Receiver<Request>,
    pub wake: UnixStream,
}

/// The data plane's end of the control plane's way in, and whether its
/// wake socket was readable at the last wake-up (or nothing has looked yet):
/// only then is it read, not on every turn.
pub(super) struct Mailbox {
    pub(super) inbox: Option<Inbox>,
    pub(super) ready: bool,
}

impl Mailbox {
    pub(super) fn new(inbox: Option<Inbox>) -> Self {
        Mailbox { inbox, ready: true }
    }
}

impl DataPlane {
    /// Serves the control inbox at once, as a turn does when its wake
    /// socket is readable: for the control plane's tests.
    #[doc(hidden)]
    pub fn serve_inbox_now(&mut self) {
        self.mailbox.ready = true;
        self.serve_control();
    }

    pub(super) fn serve_control(&mut self) {
        let Some(inbox) = self.mailbox.inbox.as_mut().filter(|_| self.mailbox.ready) else {
            return;
        };
        self.mailbox.ready = false;
        let mut buf = [0u8; 64];
        let hung_up = loop {
            match inbox.wake.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // WouldBlock: drained.
                Err(_) => break false,
            }
        };
        let pending: Vec<Request> = inbox.requests.try_iter().collect();
        if hung_up {
            // The control plane is gone (or there never was one: a demo or
            // shell without a socket), so nothing more will come. A socket
            // whose peer has closed polls readable forever, and left in the
            // wait it would turn every sleep into a spin.
            self.mailbox.inbox = None;
        }
        for req in pending {
            if !req.ticket.take() {
                // The asker gave up waiting and said so: not applied.
                continue;
            }
            let kind = match self.sharded_request(req.kind) {
                Ok(answer) => {
                    let _ = req.reply.send(answer);
                    continue;
                }
                Err(kind) => kind,
            };
            let answer = match kind {
                RequestKind::Apply { command, host } => {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    Answer::Applied(
                        self.engine
                            .apply(now, *command)
                            .map(|()| self.engine.take_notes()),
                    )
                }
                RequestKind::ApplyAll { commands, host } => {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    Answer::AppliedAll(self.engine.apply_all(now, commands))
                }
                RequestKind::Snapshot => Answer::Snapshot {
                    snap: Box::new(self.engine.snapshot()),
                    now: self.clock.now(),
                },
                RequestKind::Stats => Answer::Stats(Box::new(self.report())),
                RequestKind::Attach {
                    backend,
                    commands,
                    host,
                } => {
                    self.engine.set_local_addrs(&host.addrs);
                    self.engine.set_routes(host.routes.as_deref());
                    let now = self.clock.now();
                    if !self.backends.has_room() {
                        let why = format!("no room for another backend ({MAX_BACKENDS})");
                        let _ = req.reply.send(Answer::Attached(Err((why, backend))));
                        continue;
                    }
                    let mut backend = backend;
                    backend.attached(&mut self.engine);
                    match self.engine.apply_all(now, commands) {
                        Err(e) => Answer::Attached(Err((e.to_string(), backend))),
                        Ok(_) => match self.backends.attach(backend) {
                            Ok(slot) => {
                                // The new ports count in how late arrivals
                                // may be read, and learn the configuration.
                                self.backends.epoch = None;
                                Answer::Attached(Ok(slot))
                            }
                            Err(b) => Answer::Attached(Err((
                                format!("no room for another backend ({MAX_BACKENDS})"),
                                b,
                            ))),
                        },
                    }
                }
                RequestKind::Detach { slot, commands } => {
                    let taken = self.backends.detach(slot);
                    let now = self.clock.now();
                    let applied = self.engine.apply_all(now, commands);
                    self.backends.epoch = None;
                    Answer::Detached(taken, applied)
                }
            };
            // The client may have gone; nothing to do about it.
            let _ = req.reply.send(answer);
        }
    }
}
