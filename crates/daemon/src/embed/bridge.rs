//! [`Bridge`]: `dummynet run --bridge A B`, started by a program.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use dummynet_engine::config::Setting;
use dummynet_engine::Command;
use dummynet_io::netns::Netns;
use dummynet_io::portlock::{LockError, Port, PortLock};

use super::{Emulator, Error, Report, StartFailure};
use dummynet_dataplane::dataplane::{PlaneOptions, Precision};
use dummynet_dataplane::observer::ObserveOptions;

use crate::running::{open_bridge, Launch, Running};

/// The emulator between two interfaces, as `dummynet run --bridge A B`:
/// frames from one go through the rules and pipes to the other (`in recv
/// A`, then `out xmit B`). The interfaces are the caller's (a veth end
/// each, say), in this namespace or the one given
/// ([`BridgeBuilder::netns`]). The control methods are the [`Emulator`]'s.
/// Dropped, it stops and lets the interfaces go.
pub struct Bridge {
    // In the order they are dropped: the control, the data plane, then
    // the claim on the interfaces.
    emulator: Emulator,
    running: Running,
    _ports: Vec<PortLock>,
}

impl Bridge {
    /// A bridge between `a` and `b`; its rules come from
    /// [`BridgeBuilder::config_text`] (none: the default rule denies all,
    /// unless [`BridgeBuilder::default_allow`]).
    pub fn builder(a: &str, b: &str) -> BridgeBuilder {
        BridgeBuilder {
            ports: (a.to_string(), b.to_string()),
            config: Vec::new(),
            default_allow: false,
            netns: None,
            seed: 1,
            socket: None,
            precision: Precision::Timer,
        }
    }

    /// The control socket, if the builder asked for one.
    pub fn socket(&self) -> Option<&std::path::Path> {
        self.running.socket()
    }

    /// Stops the data plane now and returns its final counters.
    pub fn stop(self) -> Report {
        let Bridge {
            emulator,
            running,
            _ports,
        } = self;
        drop(emulator);
        running.stop()
    }
}

impl std::ops::Deref for Bridge {
    type Target = Emulator;

    fn deref(&self) -> &Emulator {
        &self.emulator
    }
}

/// Options for a [`Bridge`].
#[derive(Debug, Clone)]
pub struct BridgeBuilder {
    ports: (String, String),
    config: Vec<String>,
    default_allow: bool,
    netns: Option<PathBuf>,
    seed: u64,
    socket: Option<PathBuf>,
    precision: Precision,
}

impl BridgeBuilder {
    /// Rules in the language, applied at start after any given before:
    /// `"pipe 1 config delay 10ms\nadd 100 pipe 1 ip from any to any"`.
    /// Files they name are relative to the working directory.
    pub fn config_text(mut self, text: &str) -> Self {
        self.config.push(text.to_string());
        self
    }

    /// Lets through what no rule passes or sends to a pipe (rule 65535
    /// allows), as `run --default-allow`.
    pub fn default_allow(mut self, on: bool) -> Self {
        self.default_allow = on;
        self
    }

    /// Runs the bridge in the network namespace at `path`
    /// (`/run/netns/NAME`, `/proc/PID/ns/net`), where its interfaces are.
    pub fn netns(mut self, path: impl Into<PathBuf>) -> Self {
        self.netns = Some(path.into());
        self
    }

    /// The seed of the random draws (`prob`, `plr`, `loss`, `duplicate`,
    /// `corrupt`, `jitter`, `reorder`, `slot`, profiles, RED and PIE;
    /// default 1).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// A control socket at `path` too, for `dummynet ipfw --socket` or
    /// another process (made in this process's namespace).
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket = Some(path.into());
        self
    }

    /// How exactly departures leave: `timer` by default (`run`'s default,
    /// `max`, spins a core, which a test seldom wants).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Claims both interfaces (refused if another daemon bridges either),
    /// opens them and starts the data plane; returns once it forwards.
    /// The data plane's messages go to stderr unless the program installed
    /// a `tracing` subscriber of its own first.
    pub fn start(self) -> Result<Bridge, Error> {
        crate::stderr::say_to_stderr();
        let (a, b) = self.ports;
        if a == b {
            return Err(StartFailure::SameInterface(a).into());
        }
        let mut config = Vec::new();
        if self.default_allow {
            config.push((0, Command::Set(Setting::DefaultToAccept(true))));
        }
        for text in &self.config {
            let commands = dummynet_dataplane::lang::commands(text, None)
                .map_err(|(line, message)| StartFailure::Config { line, message })?;
            config.extend(commands);
        }
        let ns = match &self.netns {
            Some(path) => Some(Netns::open(path).map_err(|source| StartFailure::Namespace {
                path: path.clone(),
                source,
            })?),
            None => None,
        };
        // The claims are made where the interfaces are.
        let claim = || -> Result<Vec<PortLock>, LockError> {
            [&a, &b]
                .into_iter()
                .map(|i| PortLock::acquire(Port::Interface(i.clone())))
                .collect()
        };
        let ports = match &ns {
            Some(ns) => ns.run(claim).map_err(|source| StartFailure::Namespace {
                path: self.netns.clone().unwrap_or_default(),
                source,
            })?,
            None => claim(),
        }
        .map_err(StartFailure::Port)?;
        let running = Launch::new(config, self.seed, Arc::new(AtomicBool::new(false)))
            .netns(ns.as_ref())
            .socket(self.socket)
            .options(PlaneOptions {
                precision: self.precision,
                ..PlaneOptions::default()
            })
            // An observer with no files (captures: Ethernet frames): the
            // events cost nothing until someone subscribes.
            .observe(Some(ObserveOptions::default()))
            .spawn(open_bridge(a, b, false))
            .map_err(StartFailure::Plane)?;
        Ok(Bridge {
            emulator: Emulator::new(&running)?,
            running,
            _ports: ports,
        })
    }
}
