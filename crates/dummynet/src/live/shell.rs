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
use super::rootless::{Gateway, UserNet};
use super::shell_nat::Nat;
pub use dummynet_daemon::shell::link::{describe_links, feed_typed_schedulers, shell_config};
pub use dummynet_daemon::shell::live::{
    start, start_emulator, start_joined, ShellError, ShellLink, ShellOptions,
};
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
        ipv6: true,
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
        let mid = link.path().mid.clone();
        let emulator = link.emulator_mut().ok_or("the emulator has stopped")?;
        let addr = super::run::serve_http(emulator, http, Some(&mid))?;
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
            )
            .map_err(|e| e.to_string())?;
            (link, None)
        }
        None if super::rootless::is_rootless() => start_rootless(options, args.user_net.into())?,
        None => (start(options).map_err(|e| e.to_string())?, None),
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
        .map_err(|e| format!("entering our namespace: {e}"))?
        .map_err(|e| e.to_string())?;
    Ok((link, gateway))
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
