//! `dummynet shell`: run one command behind an emulated link, as the
//! mahimahi and rattan shells do.
//!
//! ```text
//!   this namespace                 emulator namespace              command's namespace
//!   dn-PID  100.64.K.1/30  <-veth->  peer  [bridge]  app  <-veth->  dn0  100.64.K.2/30
//!           fd64:646e:…::1/64                                           fd64:646e:…::2/64
//! ```
//!
//! Both new namespaces are anonymous: they exist only while this process
//! (or the command) holds them, so whatever happens to us, the kernel
//! removes them, and with them the veth end `dn-PID` in this namespace; the
//! command is spawned with a parent-death signal, so it does not outlive
//! us either. Inside the emulator, the command's traffic is `in recv app`
//! and goes to pipe 1 (`--up`); traffic towards it is `in recv peer` and
//! goes to pipe 2 (`--down`). Beyond `dn-PID`, this namespace forwards and
//! masquerades the link's addresses ([`super::shell_nat`]), so the command
//! reaches what we reach. A shell started inside a shell picks another /30
//! (and /64), and its NAT leads into the outer shell's link.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dummynet_engine::Command;
use dummynet_io::netns::Netns;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use super::args::{GsoArg, NapiArg, NatArg, PrecisionArg, UserNetArg};
use super::bridge::Bridge;
use super::dataplane::{PlaneOptions, Precision, Report};
use super::rootless::{Gateway, UserNet};
use super::run::{spawn, Running};
use super::shell_napi::{move_receive_work, warning, Napi};
use super::shell_nat::{Inside, Nat, WayOut};
use super::Backend;
pub use dummynet_daemon::shell::link::{describe_links, feed_typed_schedulers, shell_config};
pub use dummynet_daemon::shell::path::*;

#[derive(Debug, clap::Args)]
pub struct ShellArgs {
    /// A preset for both directions (`dummynet presets` lists them: the
    /// typical-links table of the FreeBSD dummynet article, browser and
    /// mobile test tools' profiles, lossy, jittery and trace-driven links). With --up or --down, the options they give
    /// replace the preset's of the same kind and the rest stays (`--preset
    /// lte --up "delay 50ms"` is lte with a 50 ms uplink delay), as `pipe
    /// N modify` does; the resulting configuration is printed at start.
    #[arg(long)]
    pub preset: Option<String>,
    /// Pipe options for the command's outgoing traffic, e.g. "bw 10Mbit/s
    /// delay 20ms" (pipe 1): the whole configuration, or with --preset the
    /// options changed from it.
    #[arg(long)]
    pub up: Option<String>,
    /// Pipe options for traffic towards the command (pipe 2), as --up.
    #[arg(long)]
    pub down: Option<String>,
    /// An ipfw commands file for the emulator instead (its interfaces are
    /// `app`, towards the command, and `peer`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seed of the engine's random draws, so that a run can be replayed:
    /// rules' `prob`, `plr`, netem's `loss`, `duplicate` and `corrupt`
    /// (which packets, and which bit), `jitter`, `reorder`, `slot`,
    /// profiles' loss and delay draws, and RED's, GRED's and PIE's random
    /// drops.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print each pipe's configuration in full at start, as `pipe show`
    /// does (by default: one line per pipe).
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Print nothing but errors and warnings: no configuration at start,
    /// no report at the end.
    #[arg(short, long)]
    pub quiet: bool,
    /// How the command's traffic goes beyond this host: the shell turns
    /// forwarding on in the namespace it was started in and masquerades
    /// the link's addresses (IPv4 and IPv6) in a table of its own, removed
    /// when it ends (`auto`: with `nft`, else with `iptables`). `off`: the
    /// command reaches this host (its peer) only.
    #[arg(long, value_enum, default_value_t = NatArg::Auto)]
    pub nat: NatArg,
    /// Without root only (see the book's "Without root" chapter): the userspace
    /// network stack that connects the shell's own namespaces to this
    /// host's network: `auto` takes pasta (package passt) if installed,
    /// else slirp4netns, else none; `none`: the command reaches its peer
    /// only.
    #[arg(long, value_enum, default_value_t = UserNetArg::Auto)]
    pub user_net: UserNetArg,
    /// The emulator's control socket, which `dummynet ipfw` inside the
    /// shell finds in $DUMMYNET_SOCKET (default
    /// /run/dummynet/shell-PID.sock; without root
    /// $XDG_RUNTIME_DIR/dummynet/shell-PID.sock, else
    /// /tmp/dummynet-UID/shell-PID.sock). A socket file nobody listens on
    /// is replaced; anything else there is an error.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The HTTP API, in the namespace the shell was started in (not the
    /// command's).
    #[command(flatten)]
    pub http: super::run::HttpArgs,
    /// Whether TCP's GSO super-packets (up to 64 KB) cross whole, which
    /// multi-Gbit/s rates need: `auto` (the default) lets them while that
    /// changes nothing a pipe does (every pipe only delays), and makes every
    /// frame one wire packet otherwise, following the configuration as
    /// `ipfw` commands change it; `on` (also plain `--gso`) always, though a
    /// super-packet then takes one queue slot, one loss draw and one
    /// billing; `off` never.
    #[arg(long, value_enum, default_value_t = GsoArg::Auto, num_args = 0..=1, default_missing_value = "on")]
    pub gso: GsoArg,
    /// How exactly departures leave: `timer` (default: within the kernel
    /// timer's jitter, for a small share of a core) or `max` (within about a
    /// microsecond, spinning a core under load). See `dummynet run --help`.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Timer)]
    pub precision: PrecisionArg,
    /// Who runs the receiving TCP stacks of the link's endpoints:
    /// `threaded` (default) the kernel's NAPI threads (GRO on and threaded
    /// NAPI on the link's ends, TSO off on the emulator's ports while the
    /// ends segment, as --gso decides), so the emulator's thread only sends; `inline` leaves the ends as the kernel
    /// makes them, and a veth then runs its receiver's stack inside each of
    /// the emulator's sends (which makes releases late with many links).
    /// What the kernel refuses is said once; the link works either way.
    #[arg(long, value_enum, default_value_t = NapiArg::Threaded)]
    pub napi: NapiArg,
    #[command(flatten)]
    pub observe: super::args::ObserveArgs,
    /// Put this shell's link in the emulator already running behind SOCKET
    /// (another `dummynet shell`'s, or `dummynet run --bridge`'s) instead of
    /// starting one: its own pipes and rules, created with the shell and
    /// removed when it ends or dies, so many links cost one data plane.
    /// Super-packets are split (as --gso off) unless --gso on.
    #[arg(long, value_name = "SOCKET", conflicts_with_all = ["config", "socket"])]
    pub join: Option<PathBuf>,
    /// The command and its arguments; without one, your shell ($SHELL, or
    /// /bin/sh), as mahimahi's shells do.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// [`dummynet_daemon::shell::link::link_config`], its refusal in words
/// (the command line's and the experiment files' edge).
pub fn link_config(
    preset: Option<&str>,
    up: Option<&str>,
    down: Option<&str>,
) -> Result<Vec<(usize, Command)>, String> {
    dummynet_daemon::shell::link::link_config(preset, up, down).map_err(|e| e.to_string())
}

pub fn run(args: ShellArgs) -> ExitCode {
    // Without root: into a user namespace of our own before anything else,
    // while this process has one thread (the kernel's rule).
    if !nix::unistd::geteuid().is_root() {
        if let Err(e) = super::rootless::enter() {
            say!("dummynet shell: {e}");
            return ExitCode::from(125);
        }
    }
    match run_inner(&args) {
        Ok(code) => code,
        Err(e) => {
            say!("dummynet shell: {e}");
            ExitCode::from(125)
        }
    }
}

/// Starts the emulator on a path whose far end is `far`, with the data
/// plane inside the path's middle namespace, and the per-packet observer
/// `observe` if given (its captures hold Ethernet frames).
#[allow(clippy::too_many_arguments)]
pub fn start_emulator(
    path: &Path,
    config: Vec<(usize, Command)>,
    seed: u64,
    socket: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    precision: Precision,
    gso: Gso,
    observe: Option<super::observer::ObserveOptions>,
) -> Result<Running, String> {
    let (tell, first) = match gso {
        Gso::Auto => {
            let (tell, first) = follow_bursts(path).map_err(|e| e.to_string())?;
            (Some(tell), Some(first))
        }
        Gso::On | Gso::Off => (None, None),
    };
    let running = spawn(
        Some(&path.mid),
        config,
        seed,
        socket,
        stop,
        PlaneOptions {
            precision,
            ..PlaneOptions::default()
        },
        observe,
        |e| {
            let mut bridge = Bridge::open(APP_IF, PEER_IF, e)?;
            if let Some(tell) = tell {
                bridge = bridge.follow_bursts(tell);
            }
            Ok(vec![Box::new(bridge) as Box<dyn Backend>])
        },
    )
    .map_err(|e| e.to_string())?;
    // The command starts only once its end segments as the configuration
    // needs.
    if let Some(first) = first {
        let failed = match first.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("setting the ends' segmentation: {e}")),
            Err(_) => Some(
                "the emulator did not say within 5 s whether super-packets may cross whole".into(),
            ),
        };
        if let Some(e) = failed {
            running.stop();
            return Err(e);
        }
    }
    Ok(running)
}

/// What [`start`] builds: the link's rules and how the emulator runs them.
pub struct ShellOptions {
    /// The emulator's rules (pipe 1 up, pipe 2 down: [`link_config`]).
    pub config: Vec<(usize, Command)>,
    pub seed: u64,
    pub nat: Nat,
    /// The emulator's control socket, if it should have one.
    pub socket: Option<PathBuf>,
    pub gso: Gso,
    pub precision: Precision,
    /// Who runs the ends' receiving stacks ([`super::shell_napi`]).
    pub napi: Napi,
    /// The per-packet observer, if any (its captures hold Ethernet frames).
    pub observe: Option<super::observer::ObserveOptions>,
    /// Our end of the veth in the namespace we are started in: `dn-PID`
    /// for the command line; unique per link in this process.
    pub veth: String,
}

/// A shell's link, up: the command's namespace and the emulator's (both
/// anonymous), the veth end in the namespace it was started in, the NAT
/// and forwarding there ([`WayOut`]), and the emulator with its socket
/// ([`Running`]). `dummynet shell` runs its command in [`ShellLink::app`];
/// the library's [`crate::Shell`] hands it to a program.
///
/// Dropped (or [`ShellLink::stop`]ped), it comes down in the order that
/// leaves nothing behind and nothing black-holed: the emulator first, then
/// the NAT and forwarding, then the veth end; the namespaces go with their
/// last handle (and whatever still runs inside them).
pub struct ShellLink {
    emulator: Option<Running>,
    /// A joined shell's link in another process's emulator ([`super::join`]).
    joined: Option<super::join::Session>,
    way_out: Option<WayOut>,
    veth: Option<OurVeth>,
    path: Path,
    socket: Option<PathBuf>,
}

/// Shells are built one at a time in a process: [`free_subnet`] reads the
/// routes, then [`build_path`] adds the addresses that take the subnet,
/// and two links built at once would both pick the same one.
static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Builds a shell's link in the calling thread's namespace and starts its
/// emulator: see [`ShellLink`]. On an error, whatever was set up is undone.
pub fn start(options: ShellOptions) -> Result<ShellLink, String> {
    let ShellOptions {
        config,
        seed,
        nat,
        socket,
        gso,
        precision,
        napi,
        observe,
        veth,
    } = options;
    let here = Netns::current().map_err(|e| e.to_string())?;
    let app = Netns::new_anonymous().map_err(|e| format!("creating a namespace: {e}"))?;
    let veth = OurVeth {
        name: veth,
        ns: here.clone(),
    };
    let mut path = {
        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
        build_path(&app, &here, &veth.name, gso).map_err(|e| e.to_string())?
    };
    if napi == Napi::Threaded {
        // With --gso auto, super-packets cross whole until the emulator's
        // first word says otherwise (and TSO follows it from then on).
        say_unset(&move_receive_work(
            &mut path,
            [APP_IF, PEER_IF],
            gso != Gso::Off,
        ));
    }
    let way_out = WayOut::open(
        nat,
        &Inside {
            far_if: &veth.name,
            v4: (path.subnet, V4_PREFIX),
            v6: path.v6.map(|v6| (v6.subnet, V6_PREFIX)),
        },
    )
    .map_err(|e| format!("letting the command's traffic out (--nat off does without): {e}"))?;
    let emulator = start_emulator(
        &path,
        config,
        seed,
        socket.clone(),
        Arc::new(AtomicBool::new(false)),
        precision,
        gso,
        observe,
    )?;
    Ok(ShellLink {
        emulator: Some(emulator),
        joined: None,
        way_out,
        veth: Some(veth),
        path,
        socket,
    })
}

/// Builds a shell's link in the calling thread's namespace through the
/// emulator behind `socket` ([`super::join`]): the daemon offers a link
/// number and its namespace, the path is built with its ends there, and
/// the daemon attaches them. On an error, whatever was set up is undone
/// (the daemon removes its side when the connection closes).
pub fn start_joined(
    socket: &std::path::Path,
    request: super::join::JoinRequest,
    nat: Nat,
    gso: Gso,
    napi: Napi,
    veth: String,
) -> Result<ShellLink, String> {
    let mut session = super::join::Session::request(socket, request).map_err(|e| e.to_string())?;
    let offer = session.offer.clone();
    let mid = Netns::open(&offer.netns)
        .map_err(|e| format!("the emulator's namespace {}: {e}", offer.netns.display()))?;
    let here = Netns::current().map_err(|e| e.to_string())?;
    let app = Netns::new_anonymous().map_err(|e| format!("creating a namespace: {e}"))?;
    let veth = OurVeth {
        name: veth,
        ns: here.clone(),
    };
    // Segments are split unless asked otherwise: nobody follows the
    // configuration for this link's ends.
    let gso = if gso == Gso::On { Gso::On } else { Gso::Off };
    let mut path = {
        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
        build_path_in(
            mid,
            [offer.app_if.as_str(), offer.peer_if.as_str()],
            &app,
            &here,
            &veth.name,
            gso,
        )
        .map_err(|e| e.to_string())?
    };
    if napi == Napi::Threaded {
        say_unset(&move_receive_work(
            &mut path,
            [offer.app_if.as_str(), offer.peer_if.as_str()],
            gso == Gso::On,
        ));
    }
    let way_out = WayOut::open(
        nat,
        &Inside {
            far_if: &veth.name,
            v4: (path.subnet, V4_PREFIX),
            v6: path.v6.map(|v6| (v6.subnet, V6_PREFIX)),
        },
    )
    .map_err(|e| format!("letting the command's traffic out (--nat off does without): {e}"))?;
    let said = session.attach().map_err(|e| e.to_string())?;
    say!("dummynet shell: {}", said.trim_end());
    Ok(ShellLink {
        emulator: None,
        joined: Some(session),
        way_out,
        veth: Some(veth),
        path,
        socket: Some(socket.to_path_buf()),
    })
}

impl ShellLink {
    /// True once a joined link's emulator has stopped (the link went with
    /// it); false for a link with its own emulator.
    pub fn emulator_gone(&self) -> bool {
        self.joined.as_ref().is_some_and(|s| s.daemon_gone())
    }

    /// The command's namespace.
    pub fn app(&self) -> &Netns {
        &self.path.near
    }

    /// The link's namespaces and addresses.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Our end of the veth, in the namespace the link was started in.
    pub fn veth(&self) -> &str {
        self.veth.as_ref().map_or("", |v| v.name.as_str())
    }

    /// The emulator's control socket, if it has one.
    pub fn socket(&self) -> Option<&std::path::Path> {
        self.socket.as_deref()
    }

    /// The emulator (`None` only while it is being stopped).
    pub fn emulator(&self) -> Option<&Running> {
        self.emulator.as_ref()
    }

    /// What the NAT's setup has to say (IPv6 left local, and why).
    pub fn notes(&self) -> &[String] {
        self.way_out.as_ref().map_or(&[], |w| w.notes.as_slice())
    }

    /// Serves the HTTP API with its thread where the emulator runs (the
    /// socket was bound where the shell started). Returns where it listens.
    pub fn serve_http(
        &mut self,
        http: super::http::HttpOptions,
    ) -> Result<std::net::SocketAddr, String> {
        let mid = self.path.mid.clone();
        match &mut self.emulator {
            Some(e) => e.serve_http(http, Some(&mid)),
            None => Err("the emulator has stopped".into()),
        }
    }

    /// The variables a command inside gets: `DUMMYNET_PEER` (the far
    /// end's address), `DUMMYNET_ADDR` (its own), the IPv6 ones if the
    /// link has IPv6, and `DUMMYNET_SOCKET` if there is a socket.
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut env = vec![
            ("DUMMYNET_PEER", self.path.far_addr.to_string().into()),
            ("DUMMYNET_ADDR", self.path.near_addr.to_string().into()),
        ];
        if let Some(socket) = &self.socket {
            env.push(("DUMMYNET_SOCKET", socket.clone().into_os_string()));
        }
        if let Some(v6) = &self.path.v6 {
            env.push(("DUMMYNET_PEER6", v6.far_addr.to_string().into()));
            env.push(("DUMMYNET_ADDR6", v6.near_addr.to_string().into()));
        }
        env
    }

    /// Takes the link down (see [`ShellLink`]) and returns the emulator's
    /// final report, and what could not be undone, if anything.
    pub fn stop(mut self) -> (Report, Result<(), String>) {
        self.finish()
    }

    fn finish(&mut self) -> (Report, Result<(), String>) {
        // First: nothing goes through the link once it stops intercepting.
        let report = self.emulator.take().map(Running::stop).unwrap_or_default();
        // A joined link: the daemon takes its ports, pipes and rules out,
        // and deletes its ends, ours with them.
        let left = match self.joined.take() {
            Some(s) if s.daemon_gone() => Err("the shared emulator had stopped".to_string()),
            Some(s) => s.detach().map(drop).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        // The NAT's programs run in the namespace it was set up in, from
        // whichever thread stops the link.
        let undone = match self.way_out.take() {
            Some(w) => {
                let what = w.describe();
                let close = move || w.close().map_err(|e| e.to_string());
                let closed = self
                    .path
                    .far
                    .run(close)
                    .unwrap_or_else(|e| Err(format!("entering its namespace: {e}")));
                closed.map_err(|e| format!("removing {what}: {e}"))
            }
            None => Ok(()),
        };
        drop(self.veth.take());
        (report, left.and(undone))
    }
}

impl Drop for ShellLink {
    fn drop(&mut self) {
        if self.emulator.is_some()
            || self.joined.is_some()
            || self.way_out.is_some()
            || self.veth.is_some()
        {
            if let (_, Err(e)) = self.finish() {
                say!("dummynet shell: {e}");
            }
        }
    }
}

fn run_inner(args: &ShellArgs) -> Result<ExitCode, String> {
    let config = config_of(args)?;
    // Caught from the start, so that whatever the shell sets up is undone
    // however it is asked to stop (SIGHUP: the terminal went away).
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot catch signal {sig}: {e}"))?;
    }
    let me = std::process::id();
    let socket = match &args.socket {
        Some(path) => path.clone(),
        None => {
            let dir = super::rootless::runtime_dir();
            sweep_stale_sockets(dir);
            dir.join(format!("shell-{me}.sock"))
        }
    };
    // Bound here, in the namespace the shell was started in, before the
    // command's exists.
    let http = args.http.bind()?;
    // `--http`'s event stream subscribes to an observer, without files
    // when none is asked for.
    let observe = match (args.observe.any(), &http) {
        (true, _) => Some(args.observe.options(&config, 1)?),
        (false, Some(_)) => Some(super::observer::ObserveOptions::default()),
        (false, None) => None,
    };
    let options = ShellOptions {
        config,
        seed: args.seed,
        nat: args.nat.into(),
        socket: Some(socket),
        gso: args.gso.into(),
        precision: args.precision.into(),
        napi: args.napi.into(),
        observe,
        veth: format!("dn-{me}"),
    };
    // Declared before the link, so dropped after it: the link's NAT leads
    // into the gateway's tap.
    let _gateway: Option<Gateway>;
    let mut link;
    (link, _gateway) = start_link(args, options, http.is_some())?;
    for note in link.notes() {
        say!("dummynet shell: {note}");
    }
    let mut http_addr = None;
    if let Some(mut http) = http {
        let token = http.token.is_some();
        // The pipes --up and --down made (a --config file's are its own).
        if args.config.is_none() && args.join.is_none() {
            http.roles = vec![
                (1, "up: from the command".into()),
                (2, "down: to the command".into()),
            ];
        }
        let addr = link.serve_http(http)?;
        http_addr = Some(addr);
        super::run::say_http(addr, token);
    }
    let command = match args.command.as_slice() {
        [] => vec![login_shell()],
        given => given.to_vec(),
    };
    let (program, rest) = command.split_first().ok_or("no command given after --")?;
    // For `dummynet ps`: the emulator's namespace (anonymous) and socket.
    // A shell without root writes its record in its user's own directory.
    let _registered = super::registry::announce(
        super::registry::Mode::Shell {
            command: command.clone(),
        },
        super::registry::Namespace {
            inode: link.path().mid.inode().unwrap_or(0),
            ..Default::default()
        },
        link.socket(),
        http_addr,
    );
    // Spawned from this (the main) thread, which lives as long as we do:
    // the command is killed with us even by a SIGKILL we cannot catch.
    let mut cmd = link.app().command_dying_with_parent(program);
    cmd.args(rest).envs(link.env());
    match ourselves() {
        Ok((exe, search)) => {
            cmd.env("DUMMYNET", exe);
            if let Some(search) = search {
                cmd.env("PATH", search);
            }
        }
        Err(e) => say!("dummynet shell: warning: `dummynet` is not on PATH inside: {e}"),
    }
    let spawned = if stop.load(Ordering::Relaxed) {
        Err("stopped by a signal before the command started".to_string())
    } else {
        cmd.spawn()
            .map_err(|e| format!("cannot run `{program}`: {e}"))
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let (report, undone) = link.stop();
            // On stderr: the command's output stays its own.
            if !args.quiet {
                say!("dummynet shell: {}", report.cost());
            }
            if let Err(e) = undone {
                say!("dummynet shell: {e}");
            }
            return Err(e);
        }
    };
    let status = wait_for(&mut child, &link, &stop);
    let joined = args.join.is_some();
    let (report, undone) = link.stop();
    // On stderr: the command's output stays its own. A joined shell's
    // emulator goes on: its cost is the daemon's to tell.
    if !joined && !args.quiet {
        say!("dummynet shell: {}", report.cost());
    }
    if let Err(e) = undone {
        say!("dummynet shell: {e}");
    }
    Ok(match status {
        Some(s) => exit_code(s),
        None => ExitCode::from(125),
    })
}

/// The shell's configuration: `--config`'s file, or the pipes
/// `--preset`/`--up`/`--down` make (described on stderr unless `--quiet`).
fn config_of(args: &ShellArgs) -> Result<Vec<(usize, Command)>, String> {
    Ok(match &args.config {
        Some(path) => {
            if args.up.is_some() || args.down.is_some() || args.preset.is_some() {
                return Err("--config replaces --preset/--up/--down; give one or the other".into());
            }
            crate::lang::load_config(path).map_err(|e| e.to_string())?
        }
        None => {
            let config = link_config(
                args.preset.as_deref(),
                args.up.as_deref(),
                args.down.as_deref(),
            )?;
            // On stderr: the command's output stays its own.
            let merged = args.up.is_some() || args.down.is_some();
            if let (Some(name), true, false) = (&args.preset, merged, args.quiet) {
                say!("dummynet shell: preset {name}, with --up/--down merged onto it option by option");
            }
            let described =
                describe_links(&config, args.seed, args.verbose).map_err(|e| e.to_string())?;
            if !args.quiet {
                super::say_str(&described);
            }
            config
        }
    })
}

/// The shell's link: joined to a shared emulator (`--join`), without root
/// (through a user namespace and its gateway), or with its own emulator.
fn start_link(
    args: &ShellArgs,
    options: ShellOptions,
    http: bool,
) -> Result<(ShellLink, Option<Gateway>), String> {
    Ok(match &args.join {
        Some(shared) => {
            if http || options.observe.is_some() {
                return Err(
                    "--join: the shared emulator's --http and observer are its own; \
                     give them to the shell that started it"
                        .into(),
                );
            }
            let request = super::join::JoinRequest {
                preset: args.preset.clone(),
                up: args.up.clone(),
                down: args.down.clone(),
            };
            let link = start_joined(
                shared,
                request,
                args.nat.into(),
                args.gso.into(),
                args.napi.into(),
                options.veth,
            )?;
            (link, None)
        }
        None if super::rootless::is_rootless() => start_rootless(options, args.user_net.into())?,
        None => (start(options)?, None),
    })
}

/// Waits for the command; a signal to us (or a joined link's emulator
/// going away) is passed on to it as SIGTERM, once.
fn wait_for(
    child: &mut std::process::Child,
    link: &ShellLink,
    stop: &AtomicBool,
) -> Option<std::process::ExitStatus> {
    let mut signalled = false;
    let mut looked = 0u32;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(_) => break None,
        }
        // A joined link went with its emulator: the command is told, as
        // by Ctrl-C.
        looked += 1;
        if !signalled && looked.is_multiple_of(20) && link.emulator_gone() {
            say!("dummynet shell: the shared emulator stopped; stopping the command");
            stop.store(true, Ordering::Relaxed);
        }
        if stop.load(Ordering::Relaxed) && !signalled {
            // Ctrl-C reached the command too (same process group); a
            // SIGTERM to us is passed on. Either way we wait for it.
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            signalled = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`start`] for a shell without root, in the user namespace
/// [`super::rootless::enter`] made: the link is built from a network
/// namespace of our own that stands in for the host, connected to the
/// user's by pasta or slirp4netns if one is found (else the command
/// reaches only its peer, and the shell says how to get more). Says what
/// it found, once.
fn start_rootless(
    mut options: ShellOptions,
    user_net: UserNet,
) -> Result<(ShellLink, Option<Gateway>), String> {
    let here = Netns::new_anonymous().map_err(|e| format!("creating a namespace: {e}"))?;
    let gateway = match Gateway::connect(&here, user_net) {
        Ok(g) => {
            say!(
                "dummynet shell: without root: in a user namespace of its own, reaching this \
                 host's network through {}; the data plane gets the scheduling a user may \
                 have (`stats` says which)",
                g.tool()
            );
            Some(g)
        }
        Err(e) => {
            say!("dummynet shell: without root: {e}");
            // Nothing to forward to.
            options.nat = Nat::Off;
            None
        }
    };
    let link = here
        .run(|| start(options))
        .map_err(|e| format!("entering our namespace: {e}"))??;
    Ok((link, gateway))
}

/// Says once what [`move_receive_work`] could not set, if anything.
fn say_unset(failed: &[String]) {
    if let Some(line) = warning(failed) {
        say!("{line}");
    }
}

/// Our end of the veth in the namespace we were started in. The kernel
/// removes it with the shell's namespaces, a moment after they go; this
/// removes it at once, so that the caller sees a clean state when we
/// return, on success or on error. Removed in that namespace, whichever
/// thread drops it.
struct OurVeth {
    name: String,
    ns: Netns,
}

impl Drop for OurVeth {
    fn drop(&mut self) {
        if let Ok(mut rtnl) = self.ns.rtnl() {
            let _ = rtnl.delete_link(&self.name);
        }
    }
}

/// Removes the sockets of shells killed before they could (`shell-PID.sock`
/// in `dir` whose PID no longer runs and on which nobody listens). A
/// running shell's socket and anything that is not a socket are left.
fn sweep_stale_sockets(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("shell-")?.strip_suffix(".sock"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let running = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        let path = entry.path();
        if !running && super::control::is_stale_socket(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// This binary, and a PATH for the command on which `dummynet` is this
/// binary (`None`: it is already): its directory first, unless the binary
/// is named otherwise (then only `$DUMMYNET` names it).
fn ourselves() -> Result<(PathBuf, Option<std::ffi::OsString>), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding our own binary: {e}"))?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let same = |p: &std::path::Path| {
        p.canonicalize()
            .is_ok_and(|c| exe.canonicalize().is_ok_and(|e| e == c))
    };
    let found = dirs
        .iter()
        .map(|d| d.join("dummynet"))
        .find(|p| p.is_file());
    if found.as_deref().is_some_and(same) {
        return Ok((exe, None));
    }
    let dir = match (exe.file_name(), exe.parent()) {
        (Some(name), Some(dir)) if name == "dummynet" => dir.to_path_buf(),
        _ => {
            return Err(format!(
                "this binary is {}, not named `dummynet`; $DUMMYNET names it",
                exe.display()
            ))
        }
    };
    let search = std::env::join_paths(std::iter::once(dir).chain(dirs))
        .map_err(|e| format!("a PATH with {}: {e}", exe.display()))?;
    Ok((exe, Some(search)))
}

/// What `dummynet shell` runs without a command: the user's shell.
fn login_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "/bin/sh".to_string())
}

/// The command's exit status as a shell reports it (128 + signal).
fn exit_code(s: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        (None, Some(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(255)),
        _ => ExitCode::from(1),
    }
}
