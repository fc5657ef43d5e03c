//! The emulator embedded in a Rust program: a test starts a link, runs its
//! traffic through it, changes the link's conditions mid-test and reads
//! what happened, with no daemon to start and no socket to speak: the
//! Rust counterpart of the Python client's `dummynet.shell()` and
//! `dummynet.daemon()`.
//!
//! - [`Shell`]: `dummynet shell`'s link (pipe 1 carries what the inside
//!   sends, pipe 2 what it receives), with [`Shell::command`] to run a
//!   program inside.
//! - [`Bridge`]: `dummynet run --bridge A B` between two interfaces, in a
//!   network namespace of the caller's choice.
//!
//! Both are an [`Emulator`] (through `Deref`): [`Emulator::run`] takes a
//! command line as `ipfw` would, [`Emulator::apply`] several all or
//! nothing, [`Emulator::pipe`] a pipe's `config`/`modify`/`show`,
//! [`Emulator::stats`] the data plane's counters ([`Report`]),
//! [`Emulator::show_pipes`] and the other `show_*` the JSON views of
//! `show` as Rust values, and [`Emulator::events`] the packet events. The
//! requests go straight to the data plane's request channel, as the control
//! socket's would, parsed on the caller's thread ([`crate::protocol`]);
//! a refusal is an [`Error`] whose [`Error::kind`] says why.
//!
//! Dropping the handle (or [`Shell::stop`], [`Bridge::stop`]) takes
//! everything down, a test's panic included: the emulator, then the NAT,
//! the veth and the namespaces a shell made. It needs root (namespaces,
//! raw sockets): unlike the command line's shell, it cannot move a process
//! that already runs threads into a user namespace of its own.
//!
//! ```no_run
//! # fn main() -> Result<(), dummynet_daemon::embed::Error> {
//! let link = dummynet_daemon::embed::Shell::builder().up("delay 20ms").down("delay 20ms").start()?;
//! let out = link
//!     .command("ping")
//!     .args(["-c", "3", "-i", "0.2", &link.peer().to_string()])
//!     .output()?;
//! link.pipe(1).modify("delay 50ms")?;
//! println!("{}", link.stats()?.delivered);
//! # Ok(())
//! # }
//! ```

use dummynet_dataplane::dataplane::{Answer, RequestKind};
use dummynet_dataplane::observer::Observer;

use crate::control::Limits;
use crate::protocol::{self, BatchCommand, Caller, ClientRequest, PlaneLink};
use crate::views;

pub use crate::protocol::{ErrorAt, ErrorKind, Reply};
pub use crate::shell::napi::Napi;
pub use crate::shell::nat::Nat;
pub use dummynet_dataplane::dataplane::Report;
pub use dummynet_dataplane::observer::{EventFilter, ObserverStats, Subscription};

mod bridge;
mod shell;

pub use bridge::{Bridge, BridgeBuilder};
pub use shell::{Shell, ShellBuilder};

/// What went wrong: the emulator could not start ([`Error::Start`], with
/// its [`StartFailure`]), a request was refused ([`Error::Refused`], with
/// the protocol's [`ErrorKind`]), or a program could not be run inside
/// ([`Error::Io`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Setting up (or taking down) failed; nothing is left behind.
    #[error(transparent)]
    Start(#[from] StartFailure),
    /// The emulator refused a request, and changed nothing.
    #[error("{message}")]
    Refused {
        kind: ErrorKind,
        /// What `ipfw` would print on stderr, without its newline.
        message: String,
        /// Where: which command of a batch, which column.
        at: Option<Box<ErrorAt>>,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why an embedded emulator could not start (or a shell's link not come
/// down), by kind.
#[derive(Debug, thiserror::Error)]
pub enum StartFailure {
    /// An embedded shell needs root: a process that already runs threads
    /// cannot enter a user namespace of its own.
    #[error(
        "an embedded shell needs root (uid 0, here or in a user namespace the \
         process was started in): a process that already runs threads cannot \
         enter a user namespace of its own. Without root, spawn \
         `dummynet shell -- COMMAND`, which can"
    )]
    NotRoot,
    /// The builder's options do not go together.
    #[error("{0}")]
    Options(&'static str),
    /// A bridge between an interface and itself.
    #[error("bridge {0} {0}: the two interfaces must differ")]
    SameInterface(String),
    /// A line of the rules given as text that does not parse.
    #[error("config line {line}: {message}")]
    Config { line: usize, message: String },
    /// A rules file that cannot be read, or a line of it that does not parse.
    #[error(transparent)]
    ConfigFile(#[from] dummynet_dataplane::lang::LoadError),
    /// The link's preset, up or down options (named as the builder's
    /// methods, not as the command line's `--up`/`--down`).
    #[error("{}", .0.to_string().replace("--up", "up").replace("--down", "down"))]
    Link(#[from] crate::shell::link::LinkError),
    /// The network namespace the builder named.
    #[error("{}: {source}", path.display())]
    Namespace {
        path: std::path::PathBuf,
        source: dummynet_io::netns::NetnsError,
    },
    /// An interface another daemon bridges, or whose claim failed.
    #[error(transparent)]
    Port(#[from] dummynet_io::portlock::LockError),
    /// The shell's link could not be built, or not be taken down whole.
    #[error(transparent)]
    Shell(#[from] crate::shell::live::ShellError),
    /// The data plane could not start.
    #[error(transparent)]
    Plane(#[from] crate::start::StartError),
    /// The emulator is not there to be controlled (it stopped at once).
    #[error("{0}")]
    Gone(&'static str),
}

impl Error {
    /// Why a request was refused (`None` for the other errors).
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Refused { kind, .. } => Some(*kind),
            Error::Start(_) | Error::Io(_) => None,
        }
    }

    /// Where a refused request went wrong, when the emulator says.
    pub fn at(&self) -> Option<&ErrorAt> {
        match self {
            Error::Refused { at, .. } => at.as_deref(),
            Error::Start(_) | Error::Io(_) => None,
        }
    }

    /// A reply with a status other than 0 as an error.
    fn refused(reply: Reply) -> Error {
        Error::Refused {
            kind: reply.kind.unwrap_or(ErrorKind::Internal),
            message: reply.stderr.trim_end().to_string(),
            at: reply.error,
        }
    }
}

/// A reply: `Ok` when its status is 0.
fn checked(reply: Reply) -> Result<Reply, Error> {
    if reply.status == 0 {
        Ok(reply)
    } else {
        Err(Error::refused(reply))
    }
}

/// How many events a subscription holds before it loses some
/// ([`Subscription::lost`]): a second of pings many times over.
pub const EVENTS_CAPACITY: usize = 4096;

/// The control of a running emulator, shared by [`Shell`] and [`Bridge`].
pub struct Emulator {
    link: PlaneLink,
    observer: Observer,
    limits: Limits,
}

impl Emulator {
    fn new(running: &crate::running::Running) -> Result<Emulator, Error> {
        let link = running
            .plane_link()
            .cloned()
            .ok_or(StartFailure::Gone("the data plane takes no requests"))?;
        let observer = running
            .observer()
            .cloned()
            .ok_or(StartFailure::Gone("the emulator has no observer"))?;
        Ok(Emulator {
            link,
            observer,
            limits: Limits::default(),
        })
    }

    fn ask(&self, req: ClientRequest) -> Result<Reply, Error> {
        checked(protocol::handle(
            req,
            &Caller::Trusted,
            &self.link,
            &self.limits,
        ))
    }

    /// Runs one command line as `ipfw` (or `dnctl`) would, its program name
    /// left out: `"pipe 1 config bw 1Mbit/s"`, `"add 100 pipe 1 ip from any
    /// to any"`, `"pipe show"` (the text in [`Reply::stdout`]). Files it
    /// names are read with this process's rights, relative to its working
    /// directory. The reply's `stderr` holds the warnings, if any.
    pub fn run(&self, line: &str) -> Result<Reply, Error> {
        self.ask(ClientRequest {
            argv: line.split_whitespace().map(String::from).collect(),
            ..ClientRequest::default()
        })
    }

    /// Applies `commands` (configuration commands, one line each) as one
    /// unit between two packets: all of them, or, if one does not parse or
    /// the emulator refuses it, none ([`Error::at`] says which).
    pub fn apply<I>(&self, commands: I) -> Result<Reply, Error>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let commands = commands
            .into_iter()
            .map(|c| BatchCommand::Line(c.as_ref().to_string()))
            .collect();
        self.ask(ClientRequest {
            commands: Some(commands),
            ..ClientRequest::default()
        })
    }

    /// Pipe `number`, to configure, change or show.
    pub fn pipe(&self, number: u32) -> Pipe<'_> {
        Pipe {
            emulator: self,
            number,
        }
    }

    /// The data plane's counters now (what `dummynet stats` prints; its
    /// JSON form is [`crate::stats_json::StatsJson::of`] of it).
    pub fn stats(&self) -> Result<Report, Error> {
        match self
            .link
            .ask(RequestKind::Stats, self.limits.answer_timeout)
        {
            Ok(Answer::Stats(report)) => Ok(*report),
            Ok(_) => Err(Error::Refused {
                kind: ErrorKind::Internal,
                message: "the data plane answered something else than its counters".into(),
                at: None,
            }),
            Err(reply) => Err(Error::refused(reply)),
        }
    }

    /// A copy of the engine's state, and its clock then.
    fn snapshot(&self) -> Result<(Box<dummynet_engine::Snapshot>, dummynet_engine::Nanos), Error> {
        protocol::snapshot(&self.link, self.limits.answer_timeout).map_err(Error::refused)
    }

    /// `pipe show` as the JSON view's Rust value (every pipe).
    pub fn show_pipes(&self) -> Result<views::PipesJson, Error> {
        let (snap, _) = self.snapshot()?;
        Ok(views::pipes(&snap, &[]))
    }

    /// `queue show` (every queue).
    pub fn show_queues(&self) -> Result<views::QueuesJson, Error> {
        let (snap, _) = self.snapshot()?;
        Ok(views::queues(&snap, &[]))
    }

    /// `sched show` (every scheduler).
    pub fn show_scheds(&self) -> Result<views::SchedsJson, Error> {
        let (snap, _) = self.snapshot()?;
        Ok(views::scheds(&snap, &[]))
    }

    /// `show` (every rule, with its counters; `dynamic`: with the states
    /// `keep-state` made, as `-d`).
    pub fn show_rules(&self, dynamic: bool) -> Result<views::RulesJson, Error> {
        let (snap, _) = self.snapshot()?;
        Ok(views::rules(&snap, &[], dynamic))
    }

    /// The packet events that pass `filter` from now on (the start line
    /// first), as the HTTP API's event stream and `--log` have them; see
    /// [`dummynet_dataplane::observer`]. The subscription holds
    /// [`EVENTS_CAPACITY`] events and counts those it loses; dropping it
    /// unsubscribes. Until the first subscription the data plane sends the
    /// observer nothing.
    pub fn events(&self, filter: EventFilter) -> Subscription {
        self.observer.subscribe(filter, EVENTS_CAPACITY)
    }

    /// [`Emulator::events`] through a channel of `capacity` events: room
    /// for a consumer that must lose nothing while it catches up.
    pub fn events_holding(&self, filter: EventFilter, capacity: usize) -> Subscription {
        self.observer.subscribe(filter, capacity)
    }

    /// The observer's counters so far: the records the data plane could
    /// not hand it ([`ObserverStats::lost`]) are missing from every
    /// subscription.
    pub fn observer_stats(&self) -> ObserverStats {
        self.observer.stats()
    }
}

/// One pipe of an [`Emulator`] ([`Emulator::pipe`]). `options` are the
/// language's, as after `pipe N config` (`"bw 10Mbit/s delay 20ms"`).
pub struct Pipe<'a> {
    emulator: &'a Emulator,
    number: u32,
}

impl Pipe<'_> {
    fn command(&self, verb: &str, options: &str) -> Result<Reply, Error> {
        self.emulator
            .run(&format!("pipe {} {verb} {options}", self.number))
    }

    /// `pipe N config OPTIONS`: the whole configuration (what is not given
    /// takes its default).
    pub fn config(&self, options: &str) -> Result<Reply, Error> {
        self.command("config", options)
    }

    /// `pipe N modify OPTIONS`: only the options given change; packets
    /// queued stay.
    pub fn modify(&self, options: &str) -> Result<Reply, Error> {
        self.command("modify", options)
    }

    /// `pipe N delete`.
    pub fn delete(&self) -> Result<Reply, Error> {
        self.command("delete", "")
    }

    /// `pipe N show` as the JSON view's Rust value; `NotFound` if there is
    /// no such pipe.
    pub fn show(&self) -> Result<views::PipeJson, Error> {
        let (snap, _) = self.emulator.snapshot()?;
        views::pipes(&snap, &[self.number])
            .pipes
            .into_iter()
            .next()
            .ok_or_else(|| Error::Refused {
                kind: ErrorKind::NotFound,
                message: format!("pipe {} does not exist", self.number),
                at: None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_reply_is_an_error_with_its_kind_and_place() {
        let reply = Reply {
            status: protocol::EX_DATAERR,
            stdout: String::new(),
            stderr: "ipfw: pipe 9 does not exist\n".into(),
            kind: Some(ErrorKind::NotFound),
            error: Some(Box::new(ErrorAt {
                index: Some(1),
                command: "pipe 9 modify delay 1ms".into(),
                column: None,
                found: None,
            })),
        };
        let e = checked(reply).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::NotFound));
        assert_eq!(e.to_string(), "ipfw: pipe 9 does not exist");
        assert_eq!(e.at().and_then(|a| a.index), Some(1));
        // A status of 0 is a success, warnings and all.
        let ok = Reply {
            stderr: "ipfw: warning: rounded\n".into(),
            ..Reply::ok("")
        };
        assert_eq!(checked(ok.clone()).unwrap(), ok);
        // A failure without a kind (an older daemon's) is still an error.
        let e = checked(Reply {
            kind: None,
            ..Reply::err(ErrorKind::Busy, 69, "busy\n")
        })
        .unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Internal));
    }

    /// Options are checked before anything is set up: these need no root.
    #[test]
    fn bad_options_are_refused_before_anything_is_built() {
        let message = |b: ShellBuilder| match b.start() {
            Ok(_) => panic!("started"),
            Err(e) => {
                assert_eq!(e.kind(), None);
                e.to_string()
            }
        };
        let e = message(Shell::builder().up("dealy 5ms"));
        assert!(e.starts_with("up:"), "{e}");
        let e = message(Shell::builder().preset("lte").down("bw fast"));
        assert!(e.starts_with("down:"), "{e}");
        let e = message(Shell::builder().preset("no-such-link"));
        assert!(e.contains("unknown preset `no-such-link`"), "{e}");
        let e = message(
            Shell::builder()
                .up("delay 1ms")
                .config_text("pipe 1 config"),
        );
        assert!(e.contains("not both"), "{e}");
        let e = message(Shell::builder().config_text("add 100 pipe 1 ip from\n"));
        assert!(e.starts_with("config line 1:"), "{e}");
        let e = match Bridge::builder("x0", "x0").start() {
            Ok(_) => panic!("started"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("must differ"), "{e}");
        let e = match Bridge::builder("x0", "x1")
            .config_text("pipe 1 config bw fast")
            .start()
        {
            Ok(_) => panic!("started"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with("config line 1:"), "{e}");
    }
}
