//! The data plane's end of the control plane's way in: the requests it
//! serves between packets.

use std::io::Read;

use super::{Answer, DataPlane, Inbox, Request, RequestKind, MAX_BACKENDS};

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
