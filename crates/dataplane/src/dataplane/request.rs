//! The control plane's requests and the data plane's answers.

use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use dummynet_engine::Nanos;

use super::report::Report;
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
