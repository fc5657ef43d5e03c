//! [`Shell`]: `dummynet shell`'s link, started by a program.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use dummynet_io::netns::Netns;

use super::{Emulator, Error, Nat, Report, StartFailure};
use dummynet_dataplane::dataplane::Precision;
use dummynet_dataplane::observer::ObserveOptions;

use crate::shell::live::{self as cli, ShellLink, ShellOptions};
use crate::shell::napi::Napi;
use crate::shell::path::Gso;

/// Links this process has started: each gets a veth end of its own here.
static LINKS: AtomicU32 = AtomicU32::new(0);

/// A link of this process has NAT on: a second one would share its
/// firewall table (named after the process) and take it for a stale one.
static NAT_TAKEN: AtomicBool = AtomicBool::new(false);

/// An emulated link between this namespace and a new one, as `dummynet
/// shell` makes it:
///
/// ```text
///   this namespace                     the shell's namespace
///   dn-PID-N  peer()  <-- emulator -->  dn0  addr()
///                   pipe 2 (down) <-    -> pipe 1 (up)
/// ```
///
/// What runs inside ([`Shell::command`]) reaches this namespace at
/// [`Shell::peer`], its traffic through pipe 1 (up) and the answers through
/// pipe 2 (down). The control methods are the [`Emulator`]'s. Dropped, it
/// stops the emulator and removes the NAT, the veth and the namespaces.
pub struct Shell {
    // In the order they are dropped: the control first, then the link,
    // then the claim on NAT the link's firewall table held.
    emulator: Emulator,
    link: ShellLink,
    _nat: Option<NatClaim>,
}

impl Shell {
    /// A link with no limit either way until configured.
    pub fn builder() -> ShellBuilder {
        ShellBuilder::default()
    }

    /// The address of this end (the namespace that started the shell),
    /// `$DUMMYNET_PEER` inside.
    pub fn peer(&self) -> Ipv4Addr {
        self.link.path().far_addr
    }

    /// The shell's own address, `$DUMMYNET_ADDR` inside.
    pub fn addr(&self) -> Ipv4Addr {
        self.link.path().near_addr
    }

    /// [`Shell::peer`] in IPv6, if the link has IPv6 (the host may have it
    /// disabled).
    pub fn peer6(&self) -> Option<Ipv6Addr> {
        self.link.path().v6.map(|v6| v6.far_addr)
    }

    /// [`Shell::addr`] in IPv6.
    pub fn addr6(&self) -> Option<Ipv6Addr> {
        self.link.path().v6.map(|v6| v6.near_addr)
    }

    /// The veth end in this namespace (`dn-PID-N`): gone once the shell
    /// is dropped.
    pub fn interface(&self) -> &str {
        self.link.veth()
    }

    /// The shell's network namespace (where [`Shell::command`] runs).
    pub fn netns(&self) -> &Netns {
        self.link.app()
    }

    /// The emulator's control socket, if the builder asked for one
    /// ([`ShellBuilder::socket`]): for `dummynet ipfw --socket` or another
    /// process.
    pub fn socket(&self) -> Option<&std::path::Path> {
        self.link.socket()
    }

    /// A [`std::process::Command`] for `program` that runs inside the
    /// shell's namespace, with `DUMMYNET_PEER`, `DUMMYNET_ADDR` (and the
    /// IPv6 ones, and `DUMMYNET_SOCKET` with a socket) set as `dummynet
    /// shell` sets them. Only the network namespace differs from this
    /// process's. A program still running when the shell is dropped keeps
    /// the namespace, but no longer has a link: wait for it first.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut cmd = self.link.app().command(program);
        cmd.envs(self.link.env());
        cmd
    }

    /// Takes everything down now and returns the emulator's final counters
    /// (dropping the shell does the same and forgets them).
    pub fn stop(self) -> Result<Report, Error> {
        let Shell {
            emulator,
            link,
            _nat,
        } = self;
        drop(emulator);
        let (report, undone) = link.stop();
        drop(_nat);
        undone.map_err(StartFailure::Shell)?;
        Ok(report)
    }
}

impl std::ops::Deref for Shell {
    type Target = Emulator;

    fn deref(&self) -> &Emulator {
        &self.emulator
    }
}

/// This process's one shell with NAT on, released once its link is down.
struct NatClaim;

impl NatClaim {
    fn take() -> Result<NatClaim, Error> {
        if NAT_TAKEN.swap(true, Ordering::SeqCst) {
            return Err(StartFailure::Options(
                "another shell of this process has NAT on; one at a time",
            )
            .into());
        }
        Ok(NatClaim)
    }
}

impl Drop for NatClaim {
    fn drop(&mut self) {
        NAT_TAKEN.store(false, Ordering::SeqCst);
    }
}

/// Options for a [`Shell`], as `dummynet shell`'s, with the defaults of
/// the Python client: no NAT (the inside reaches this namespace and
/// nothing beyond, and the host's forwarding is left alone), no socket.
#[derive(Debug, Clone, Default)]
pub struct ShellBuilder {
    preset: Option<String>,
    up: Option<String>,
    down: Option<String>,
    config: Option<Config>,
    seed: Option<u64>,
    nat: bool,
    socket: Option<PathBuf>,
    precision: Option<Precision>,
    napi: Napi,
    netns: Option<PathBuf>,
    ipv4_only: bool,
}

/// Rules given whole, instead of the link's options.
#[derive(Debug, Clone)]
enum Config {
    Text(String),
    File(PathBuf),
}

impl ShellBuilder {
    /// A preset for both directions (`dummynet presets`); `up` and `down`
    /// then change its options one by one, as `--preset` with `--up`.
    pub fn preset(mut self, name: &str) -> Self {
        self.preset = Some(name.to_string());
        self
    }

    /// Pipe 1's options (what the inside sends): `"bw 10Mbit/s delay 20ms"`.
    pub fn up(mut self, options: &str) -> Self {
        self.up = Some(options.to_string());
        self
    }

    /// Pipe 2's options (what the inside receives).
    pub fn down(mut self, options: &str) -> Self {
        self.down = Some(options.to_string());
        self
    }

    /// The emulator's rules in the language, instead of preset, up and
    /// down (`--config`): its interfaces are `app` (towards the inside) and
    /// `peer`. Files they name are relative to the working directory.
    pub fn config_text(mut self, text: &str) -> Self {
        self.config = Some(Config::Text(text.to_string()));
        self
    }

    /// The same from a file (names in it are relative to its directory).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = Some(Config::File(path.into()));
        self
    }

    /// The seed of the random draws (`prob`, `plr`, `loss`, `duplicate`,
    /// `corrupt`, `jitter`, `reorder`, `slot`, profiles, RED and PIE;
    /// default 1).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Lets the inside's traffic beyond this host (forwarding and NAT, as
    /// `--nat auto`); off by default. One shell of a process at a time.
    pub fn nat(mut self, on: bool) -> Self {
        self.nat = on;
        self
    }

    /// A link without IPv6: its ends send nothing of their own (no router
    /// solicitations, no MLD reports), so that only what the program sends
    /// crosses the emulator, as an experiment's counts need. Off by default.
    pub fn ipv4_only(mut self, on: bool) -> Self {
        self.ipv4_only = on;
        self
    }

    /// A control socket for the emulator at `path` too (a socket file
    /// nobody listens on is replaced).
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket = Some(path.into());
        self
    }

    /// Starts the shell from the network namespace at `path`
    /// (`/run/netns/NAME`, `/proc/PID/ns/net`) rather than this thread's:
    /// the veth end and [`Shell::peer`] are there, and so is the NAT.
    pub fn netns(mut self, path: impl Into<PathBuf>) -> Self {
        self.netns = Some(path.into());
        self
    }

    /// How exactly departures leave (default `timer`, as the shell's).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = Some(precision);
        self
    }

    /// Who runs the link's receiving stacks (`--napi`): the kernel's NAPI
    /// threads (the default, as the command line's), or the emulator's
    /// thread inside its sends ([`Napi::Inline`]: the veths as the kernel
    /// makes them; what `duplicate` needs to reach a NAT'd inside twice).
    pub fn napi(mut self, napi: Napi) -> Self {
        self.napi = napi;
        self
    }

    /// Builds the link and starts the emulator; returns once it forwards.
    /// The data plane's messages go to stderr unless the program installed
    /// a `tracing` subscriber of its own first.
    pub fn start(self) -> Result<Shell, Error> {
        crate::stderr::say_to_stderr();
        // `dummynet shell` runs without root by moving itself into a user
        // namespace before it starts any thread; the kernel allows that
        // only to a single-threaded process, which the caller's (a test
        // harness's) is not.
        if !nix::unistd::geteuid().is_root() {
            return Err(StartFailure::NotRoot.into());
        }
        let seed = self.seed.unwrap_or(1);
        let config = match &self.config {
            Some(_) if self.up.is_some() || self.down.is_some() || self.preset.is_some() => {
                return Err(StartFailure::Options(
                    "a shell's rules are config_text/config_file or preset/up/down, not both",
                )
                .into())
            }
            Some(Config::Text(text)) => dummynet_dataplane::lang::commands(text, None)
                .map_err(|(line, message)| StartFailure::Config { line, message })?,
            Some(Config::File(path)) => {
                dummynet_dataplane::lang::load_config(path).map_err(StartFailure::ConfigFile)?
            }
            None => crate::shell::link::link_config(
                self.preset.as_deref(),
                self.up.as_deref(),
                self.down.as_deref(),
            )
            .map_err(StartFailure::Link)?,
        };
        let claim = self.nat.then(NatClaim::take).transpose()?;
        let n = LINKS.fetch_add(1, Ordering::Relaxed);
        let options = ShellOptions {
            config,
            seed,
            nat: if claim.is_some() { Nat::Auto } else { Nat::Off },
            socket: self.socket,
            gso: Gso::Auto,
            precision: self.precision.unwrap_or(Precision::Timer),
            napi: self.napi,
            // An observer with no files: the events cost nothing until
            // someone subscribes.
            observe: Some(ObserveOptions::default()),
            veth: format!("dn-{}-{n}", std::process::id()),
            ipv6: !self.ipv4_only,
        };
        let link = match &self.netns {
            None => cli::start(options).map_err(StartFailure::Shell),
            Some(path) => Netns::open(path)
                .and_then(|ns| ns.run(move || cli::start(options)))
                .map_err(|source| StartFailure::Namespace {
                    path: path.clone(),
                    source,
                })
                .and_then(|started| started.map_err(StartFailure::Shell)),
        }?;
        let emulator = match link.emulator().map(Emulator::new) {
            Some(Ok(e)) => e,
            Some(Err(e)) => return Err(e),
            None => return Err(StartFailure::Gone("the emulator stopped at once").into()),
        };
        Ok(Shell {
            emulator,
            link,
            _nat: claim,
        })
    }
}
