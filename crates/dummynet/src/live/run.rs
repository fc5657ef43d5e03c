//! `dummynet run`: the daemon. One engine, its backends, a control socket,
//! and an orderly shutdown on SIGINT/SIGTERM.
//!
//! [`Launch`] ([`dummynet_daemon::running`]) is the same thing as a library
//! call, used by `shell` and `demo`: the data plane runs on its own thread,
//! optionally inside a network namespace, and [`Running::stop`] ends it and
//! returns its report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use dummynet_daemon::running::{
    default_memory_limit, open_bridge, open_sharded_bridge, FrontEnd, Launch, OpenLeader,
    OpenWorker, Running,
};
use dummynet_daemon::start::StartError;
use dummynet_engine::config::Setting;
use dummynet_engine::{Command, Engine};
use dummynet_io::firewall::{Backend as IptablesBackend, Firewall, InterceptSpec};
use dummynet_io::netns::Netns;
use dummynet_io::portlock::{Port, PortLock};

use super::args::{ObserveArgs, PrecisionArg};
use super::control::{self, ControlOptions};
use super::dataplane::{PlaneOptions, Priority, Report};
use super::host::Host;
use super::netns_target::Target;
use super::observer::ObserveOptions;
use super::registry;
use super::{Backend, Carrier};

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("mode").required(true).args(["bridge", "host"]))]
#[command(after_help = "\
One daemon per port: `run` on an interface or NFQUEUE number that a running daemon \
uses (in the same network namespace) is refused with exit status 69, naming that \
daemon's pid. The lock behind it, a file under /run/dummynet, dies with its daemon.

Host mode's rules: `nft list table inet dummynet-QUEUE` with nftables, \
`iptables -S DUMMYNET-QUEUE` with the iptables fallback; the daemon prints which. \
They are removed when the daemon stops; an nftables table also when it is killed.

--netns runs all of it (ports, queue, rules, the data plane) inside another network \
namespace, a container's; the control socket and --http stay in this one. \
`dummynet ps` lists the daemons that run and what each shapes.")]
pub struct RunArgs {
    /// Bridge two interfaces: frames from one go through the rules and pipes
    /// to the other (`in recv IF_A`, then `out xmit IF_B`).
    ///
    /// A port whose interface goes down is not polled until it is up again:
    /// the daemon says so on stderr, drops the frames due out of it
    /// (`IF.link_down_dropped` in `dummynet stats`) and forwards again
    /// within about 200 ms of the interface coming back. If the interface
    /// is deleted, it waits for one of the same name and reopens the port
    /// on it (see --exit-on-link-loss).
    #[arg(long, num_args = 2, value_names = ["IF_A", "IF_B"])]
    pub bridge: Option<Vec<String>>,
    /// --bridge: if a port's interface is deleted, exit with status 69
    /// (EX_UNAVAILABLE) and a message naming it, instead of waiting for an
    /// interface of the same name to come back.
    #[arg(long, requires = "bridge")]
    pub exit_on_link_loss: bool,
    /// --bridge over AF_XDP sockets sharing one UMEM (zero-copy where the
    /// driver allows, copy mode elsewhere, as on veth); where AF_XDP
    /// cannot be used, the AF_PACKET bridge, with a message saying why.
    /// Each port's receive queue 0 only; in driver XDP, MTU up to 1774.
    #[arg(long, requires = "bridge")]
    pub xdp: bool,
    /// --xdp: frames the UMEM holds, in the kernel's rings and in pipes
    /// together (a power of two, 256 to 1048576; 2 KiB each). A pipe
    /// holding them all makes the kernel drop arrivals, counted as
    /// IF.rx_fill_ring_empty.
    #[arg(long, requires = "xdp", default_value_t = 16384)]
    pub xdp_frames: u32,
    /// --xdp: where the XDP program runs. `generic` (the kernel's generic
    /// XDP): frames up to a chunk (1792 bytes) cross through AF_XDP, longer
    /// ones (GSO super-packets) through an AF_PACKET bridge beside it, and
    /// a veth's peer keeps its GSO. `driver`: the driver's XDP, zero-copy
    /// where the driver has it, every frame through AF_XDP; on a veth the
    /// peer then segments TCP. `auto`: generic if a port is a veth.
    #[arg(long, requires = "xdp", value_enum, default_value_t = super::args::AttachArg::Auto)]
    pub xdp_attach: super::args::AttachArg,
    /// --bridge: data-plane worker threads, each reading its share of both
    /// ports (the kernel spreads frames by flow hash, PACKET_FANOUT) and
    /// owning a share of the pipes (pipe N on worker N mod WORKERS; a
    /// masked pipe's instances by flow hash), with a frame for another
    /// worker's pipe handed over a lock-free ring. `auto` (the default):
    /// one per CPU this process may run on (its affinity mask) less one
    /// for the control plane and the kernel's own work, at least 1 (so 1
    /// on two cores); 1 where workers do not apply (--xdp, host mode, a
    /// configuration with `one_pass 0`), said at start. AF_PACKET bridge
    /// only. See the book's "Workers" chapter.
    #[arg(long, default_value = "auto", value_parser = parse_workers)]
    pub workers: Workers,
    /// Shape this machine's own traffic: a netfilter table of the daemon's
    /// own (see --firewall) sends its packets to an NFQUEUE.
    #[arg(long)]
    pub host: bool,
    /// NFQUEUE number for --host.
    #[arg(long, default_value_t = 7000)]
    pub queue: u16,
    /// --host: without the queue's bypass flag, traffic stops if the
    /// daemon dies (by default it flows unshaped).
    #[arg(long)]
    pub no_bypass: bool,
    /// --host: also intercept loopback traffic.
    #[arg(long)]
    pub loopback: bool,
    /// --host: directions to intercept: in, out, forward (comma-separated).
    #[arg(long, default_value = "in,out")]
    pub hooks: String,
    /// --host: intercept only packets leaving by interface IF (an
    /// `oifname IF` match; with --hooks out and/or forward). `dummynet tc`
    /// runs its daemons so.
    #[arg(long, value_name = "IF", requires = "host")]
    pub oif: Option<String>,
    /// --host: hold the host's own outgoing packets in the kernel until they
    /// leave their pipe, instead of freeing them at once and sending copies
    /// (TCP Small Queues then limit a TCP sender through a delay to a few
    /// packets in flight).
    #[arg(long)]
    pub hold_output: bool,
    /// --host: which firewall sends the host's packets to the queue: `auto`
    /// (nftables, a table `inet dummynet-QUEUE` of its own, or iptables
    /// where nftables cannot be used), `nftables`, `iptables` (the programs
    /// the distribution's `iptables` is), `iptables-nft` or
    /// `iptables-legacy`.
    #[arg(long, value_enum, default_value_t = FirewallArg::Auto)]
    pub firewall: FirewallArg,
    /// --host: the netfilter mark of the copies of outgoing packets, which
    /// the interception rules let pass.
    #[arg(long, default_value_t = super::host::DEFAULT_COPY_MARK, value_parser = parse_mark)]
    pub copy_mark: u32,
    /// Work inside another network namespace, a running container's,
    /// from outside it: the interfaces (--bridge), the NFQUEUE and its rules
    /// (--host) and the data plane are that namespace's; the control
    /// socket and --http stay in this one. PATH|PID: /proc/PID/ns/net,
    /// /run/netns/NAME, a container runtime's namespace file, or a PID.
    /// Needs root. If the namespace's process ends (or PATH no longer
    /// names the namespace), the daemon stops with exit status 69.
    #[arg(long, value_name = "PATH|PID")]
    pub netns: Option<String>,
    /// An ipfw commands file applied at start.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Let through what no rule passes or sends to a pipe: rule 65535
    /// allows, as `kenv net.inet.ip.fw.default_to_accept=1` makes it on
    /// FreeBSD (by default it denies, as there).
    #[arg(long)]
    pub default_allow: bool,
    /// Control socket (default: $DUMMYNET_SOCKET or /run/dummynet.sock).
    /// 32 clients at once, each with 2 s to send its request; one still
    /// sending yields its place to a newcomer (and is told busy).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// A group (name or number) whose members may also use the control
    /// socket (made mode 0660 and owned by it); they may not name files
    /// (profiles, traces), which the daemon would read as root.
    #[arg(long, value_parser = parse_group)]
    pub socket_group: Option<u32>,
    #[command(flatten)]
    pub http: HttpArgs,
    /// Seed of the engine's random draws, so that a run can be replayed:
    /// rules' `prob`, `plr`, netem's `loss`, `duplicate` and `corrupt`
    /// (which packets, and which bit), `jitter`, `reorder`, `slot`,
    /// profiles' loss and delay draws, and RED's, GRED's and PIE's random
    /// drops.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the data plane at nice -20 instead of SCHED_FIFO (the default,
    /// when permitted: far lower lateness on a busy machine; it leaves the
    /// kernel's share of its CPU, 7% by default, to other tasks so that the
    /// kernel never throttles it).
    #[arg(long)]
    pub nice: bool,
    /// How exactly departures leave: `max` (the default for `run`, which
    /// usually has a machine to itself) spins before each one and leaves
    /// within about a microsecond, and polls its ports after arrivals so
    /// that a sender does not pay for waking it, for a core whenever
    /// departures come closer together than the spin; `timer` (the default
    /// of `shell` and `demo`, which share their cores with the traffic's
    /// own programs) sleeps on the kernel's timer to each one, within its
    /// jitter (tens of µs on a VM), for a small share of a core.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Max)]
    pub precision: PrecisionArg,
    /// At `--precision max`: microseconds the data plane spins before
    /// each deadline instead of sleeping: more is more exact on a busy
    /// machine, and burns more CPU. Under SCHED_FIFO, while short of the
    /// idle time the kernel's RT budget asks for, it spins only as long as
    /// its timer has lately needed (at most this).
    #[arg(long, default_value_t = 300)]
    pub spin_us: u64,
    /// The most packet bytes the daemon holds in its pipes at once (queues
    /// and delay lines): a packet that would go above it is dropped as
    /// `memory-limit`. SIZE in bytes, with K, M or G (powers of 1024), or
    /// 0 for none. Default: a quarter of the machine's memory. It counts
    /// packet bytes; each held frame costs a little more. Settable live:
    /// `sysctl net.inet.ip.dummynet.held_limit=BYTES`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<u64>,
    #[command(flatten)]
    pub observe: ObserveArgs,
}

/// `--memory-limit SIZE`: bytes, or K/M/G (1024-based).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let shift = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "`{s}`: a size is bytes, or a number with K, M, G or T"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}`: a size is bytes, or a number with K, M, G or T"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// `run --firewall`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FirewallArg {
    Auto,
    Nftables,
    Iptables,
    IptablesNft,
    IptablesLegacy,
}

impl FirewallArg {
    fn firewall(self) -> Firewall {
        match self {
            FirewallArg::Auto => Firewall::Auto,
            FirewallArg::Nftables => Firewall::Nftables,
            FirewallArg::Iptables => Firewall::Iptables(IptablesBackend::System),
            FirewallArg::IptablesNft => Firewall::Iptables(IptablesBackend::Nft),
            FirewallArg::IptablesLegacy => Firewall::Iptables(IptablesBackend::Legacy),
        }
    }
}

/// `--http` and `--http-token`, for `run` and `shell`.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Serve the HTTP API (JSON, /metrics for Prometheus) on ADDR:PORT,
    /// e.g. 127.0.0.1:8080 (port 0: any free port, printed at start). Off
    /// by default. Any address but loopback needs --http-token. No TLS:
    /// put a TLS proxy in front. Idle and slow clients cannot lock it out:
    /// 32 connections, 8 per address, 2 s to send a request's head; one
    /// that has not sent it yields its slot to a newcomer. See the book's
    /// "HTTP API" chapter.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<std::net::SocketAddr>,
    /// A file whose first line is the bearer token HTTP clients must send
    /// (`Authorization: Bearer TOKEN`), at least 16 bytes; required for an
    /// --http address other than loopback.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub http_token: Option<PathBuf>,
}

impl HttpArgs {
    /// Checks the options and binds the address, in this thread's network
    /// namespace; `None` without `--http`.
    pub fn bind(&self) -> Result<Option<super::http::HttpOptions>, String> {
        self.http
            .map(|addr| super::http::bind(addr, self.http_token.as_deref()))
            .transpose()
            .map_err(|e| e.to_string())
    }
}

/// Tells the user where the HTTP API listens.
pub fn say_http(addr: std::net::SocketAddr, token: bool) {
    let auth = if token {
        " (bearer token required)"
    } else {
        ""
    };
    say!("dummynet: HTTP API on http://{addr}/v1/{auth}, metrics at http://{addr}/metrics");
}

/// Serves the HTTP API (`--http`) of `running` with `options`, its thread in
/// `ns` (where the data plane runs). Returns where it listens.
pub fn serve_http(
    running: &mut Running,
    options: super::http::HttpOptions,
    ns: Option<&Netns>,
) -> Result<std::net::SocketAddr, String> {
    let link = running
        .plane_link()
        .cloned()
        .ok_or("the data plane takes no requests: no HTTP API")?;
    let server = super::http::HttpServer::start(options, link, running.observer().cloned(), ns)
        .map_err(|e| e.to_string())?;
    let addr = server.local_addr();
    running.attach(Box::new(server));
    Ok(addr)
}

/// `run --workers`: a number of data-plane workers, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// One per CPU of the affinity mask less one, where workers apply.
    Auto,
    Exactly(u16),
}

impl std::fmt::Display for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Workers::Auto => f.write_str("auto"),
            Workers::Exactly(n) => write!(f, "{n}"),
        }
    }
}

/// The most workers `--workers` takes (each holds two sockets per port
/// and an engine replica).
const MAX_WORKERS: u16 = 64;

fn parse_workers(s: &str) -> Result<Workers, String> {
    if s == "auto" {
        return Ok(Workers::Auto);
    }
    match s.parse::<u16>() {
        Ok(n @ 1..=MAX_WORKERS) => Ok(Workers::Exactly(n)),
        _ => Err(format!(
            "`{s}` is not a number of workers: give 1 to {MAX_WORKERS}, or auto"
        )),
    }
}

/// How many data-plane workers this daemon runs: `--workers N` as given
/// (refused, saying why, where workers do not apply), or for `auto` the
/// CPUs of this process's affinity mask less one (the control plane and
/// the kernel's own work need a core), at least 1, and 1 wherever workers
/// do not apply.
fn workers_for(args: &RunArgs, checked: &Engine<Carrier>) -> Result<usize, Failure> {
    let applies = if args.bridge.is_none() {
        Err("workers shard the bridge only (--bridge)".to_string())
    } else if args.xdp {
        Err("workers shard the AF_PACKET bridge only; leave out --xdp".to_string())
    } else {
        Ok(())
    };
    match args.workers {
        Workers::Exactly(1) => Ok(1),
        Workers::Exactly(n) => {
            applies.map_err(|why| format!("--workers {n}: {why}, or use --workers 1"))?;
            let n = usize::from(n);
            if let Some(why) = crate::workers::check_shardable(checked, n) {
                return Err(format!("--workers {n}: the configuration: {why}").into());
            }
            Ok(n)
        }
        Workers::Auto => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let n = cpus.saturating_sub(1).clamp(1, usize::from(MAX_WORKERS));
            if n == 1 || applies.is_err() {
                return Ok(1);
            }
            if let Some(why) = crate::workers::check_shardable(checked, n) {
                say!("dummynet: one data-plane worker, not {n} (--workers auto): {why}");
                return Ok(1);
            }
            Ok(n)
        }
    }
}

/// A group for `--socket-group`: a number, or a name from the group
/// database.
fn parse_group(s: &str) -> Result<u32, String> {
    if let Ok(gid) = s.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(s) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!("no group named `{s}`")),
        Err(e) => Err(format!("looking up group `{s}`: {e}")),
    }
}

/// A netfilter mark: decimal or 0x-prefixed hexadecimal, not zero (an
/// unmarked packet has mark 0).
fn parse_mark(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("`{s}` is not a 32-bit mark (decimal or 0x hexadecimal)"))?;
    if v == 0 {
        return Err("mark 0 is every unmarked packet's; choose another".into());
    }
    Ok(v)
}

/// The `--host` interception spec from the command line.
fn intercept_spec(args: &RunArgs) -> Result<InterceptSpec, String> {
    let mut spec = InterceptSpec::new(args.queue);
    spec.bypass = !args.no_bypass;
    spec.loopback = args.loopback;
    spec.firewall = args.firewall.firewall();
    spec.directions.input = false;
    spec.directions.output = false;
    spec.directions.forward = false;
    if let Some(oif) = &args.oif {
        spec.matches = vec!["-o".into(), oif.clone()];
    }
    for h in args
        .hooks
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
    {
        match h {
            "in" => spec.directions.input = true,
            "out" => spec.directions.output = true,
            "forward" => spec.directions.forward = true,
            other => {
                return Err(format!(
                    "--hooks: unknown direction `{other}`; use in, out and/or forward"
                ))
            }
        }
    }
    Ok(spec)
}

/// Why `run` ended early, and its exit status.
struct Failure {
    status: u8,
    message: String,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure { status: 1, message }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        Failure::from(message.to_string())
    }
}

impl From<StartError> for Failure {
    fn from(e: StartError) -> Failure {
        // A port another daemon holds: EX_UNAVAILABLE, as a command the
        // daemon cannot serve gets from the control socket.
        let status = if e.is_port_held() {
            u8::try_from(control::EX_UNAVAILABLE).unwrap_or(1)
        } else {
            1
        };
        Failure {
            status,
            message: e.to_string(),
        }
    }
}

/// Claims the ports of `args` (both bridge interfaces, or the queue) in
/// this process's network namespace, before anything is touched: a second
/// daemon on them is refused, and host mode's cleanup of a dead daemon's
/// rules never meets a live daemon's. Held until `run` returns.
fn claim_ports(args: &RunArgs) -> Result<Vec<PortLock>, Failure> {
    let ports: Vec<Port> = match &args.bridge {
        Some(ifs) => ifs.iter().map(|i| Port::Interface(i.clone())).collect(),
        None => vec![Port::Queue(args.queue)],
    };
    ports
        .into_iter()
        .map(|p| PortLock::acquire(p).map_err(|e| Failure::from(StartError::from(e))))
        .collect()
}

pub fn run(args: RunArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(report) => match &report.failure {
            None => {
                super::say_str(&format!("dummynet: stopped.\n{report}"));
                ExitCode::SUCCESS
            }
            // A bridge port deleted under --exit-on-link-loss: what the
            // daemon needs is gone (EX_UNAVAILABLE).
            Some(why) => {
                super::say_str(&report.to_string());
                say!("dummynet run: {why}");
                ExitCode::from(u8::try_from(control::EX_UNAVAILABLE).unwrap_or(1))
            }
        },
        Err(f) => {
            say!("dummynet run: {}", f.message);
            ExitCode::from(f.status)
        }
    }
}

fn run_inner(args: &RunArgs) -> Result<Report, Failure> {
    // First: a bad --netns is refused before anything is said or done.
    let target = args
        .netns
        .as_deref()
        .map(Target::open)
        .transpose()
        .map_err(|e| e.to_string())?;
    let ns = target.as_ref().map(|t| &t.ns);
    if let Some(t) = &target {
        say!("dummynet: in network namespace {}", t.describe());
    }
    let config = config_of(args)?;
    let checked: Engine<Carrier> = crate::lang::configure(&config, args.seed)
        .map_err(|(line, error)| StartError::Configuration { line, error })?;
    let workers = workers_for(args, &checked)?;
    if checked.drops_by_default() {
        say!("dummynet: warning: {}", default_deny_warning(args.host));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot catch signal {sig}: {e}"))?;
    }
    let socket = args.socket.clone().unwrap_or_else(control::default_socket);
    let options = PlaneOptions {
        priority: if args.nice {
            Priority::Nice
        } else {
            Priority::Realtime
        },
        precision: args.precision.into(),
        spin: args.spin_us.saturating_mul(1000),
    };
    let (open, sharded) = open_backends(args, workers)?;
    // A bridge's captures hold Ethernet frames; a host's, IP packets.
    let linktype = if args.bridge.is_some() { 1 } else { 101 };
    let http = args.http.bind()?;
    // The HTTP API's event stream (`GET /v1/events`) subscribes to an
    // observer, started without files when none is asked for: it costs the
    // data plane nothing until someone subscribes.
    let observe = match (args.observe.any(), &http) {
        (true, _) => Some(args.observe.options(&config, linktype)?),
        (false, Some(_)) => Some(ObserveOptions::default()),
        (false, None) => None,
    };
    // The ports are the target namespace's: locked there.
    let _ports = match ns {
        Some(ns) => ns
            .run(|| claim_ports(args))
            .map_err(|e| Failure::from(StartError::namespace(e)))??,
        None => claim_ports(args)?,
    };
    let control = ControlOptions {
        group: args.socket_group,
        ..ControlOptions::default()
    };
    if let Some((n, _)) = &sharded {
        say!(
            "dummynet: {n} data-plane workers: each reads a share of both ports (PACKET_FANOUT \
             by flow hash); pipe N is on worker N mod {n}"
        );
    }
    let mut running = Launch::new(config, args.seed, stop.clone())
        .netns(ns)
        .control(socket, control)
        .options(options)
        .observe(observe)
        .workers(sharded)
        .spawn(open)?;
    let mut http_addr = None;
    if let Some(http) = http {
        let token = http.token.is_some();
        let addr = serve_http(&mut running, http, ns)?;
        http_addr = Some(addr);
        say_http(addr, token);
    }
    let _registered = registry::announce(
        run_mode(args),
        registry::Namespace::of_run(target.as_ref()),
        running.socket(),
        http_addr,
    );
    if let Some(path) = running.socket() {
        // The hint works as printed: with the socket named unless it is the
        // one the client finds by itself.
        let flag = if path == control::default_socket() {
            String::new()
        } else {
            format!(" --socket {}", path.display())
        };
        say!(
            "dummynet: running; control socket {} (try `dummynet ipfw{flag} show`), Ctrl-C to stop",
            path.display()
        );
    }
    while !stop.load(Ordering::Relaxed) {
        // The container went away: the namespace lives on only because we
        // hold it; let it go, and say so.
        if let Some(why) = target.as_ref().and_then(Target::gone) {
            let report = running.stop();
            super::say_str(&report.to_string());
            return Err(Failure {
                status: u8::try_from(control::EX_UNAVAILABLE).unwrap_or(1),
                message: format!("{why}: stopping"),
            });
        }
        if running.is_finished() {
            let report = running.stop();
            if report.failure.is_some() {
                return Ok(report);
            }
            return Err("the data plane stopped unexpectedly".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(running.stop())
}

/// The configuration to start with: `--config`'s commands after
/// `--memory-limit` (so that the file's `sysctl ...held_limit` wins) and
/// `--default-allow`.
fn config_of(args: &RunArgs) -> Result<Vec<(usize, Command)>, Failure> {
    let mut config = match &args.config {
        Some(path) => crate::lang::load_config(path).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    if args.default_allow {
        config.insert(0, (0, Command::Set(Setting::DefaultToAccept(true))));
    }
    // First, so that a `sysctl ...held_limit` in the config file wins.
    let memory_limit = match args.memory_limit {
        Some(n) => n,
        None => default_memory_limit().ok_or(
            "cannot read MemTotal in /proc/meminfo for the default --memory-limit; give one",
        )?,
    };
    config.insert(0, (0, Command::Set(Setting::HeldLimit(memory_limit))));
    match memory_limit {
        0 => say!("dummynet: no memory limit on packets held (--memory-limit 0)"),
        n => say!(
            "dummynet: packets held in pipes are limited to {} MiB (--memory-limit; \
             sysctl net.inet.ip.dummynet.held_limit)",
            n >> 20
        ),
    }
    Ok(config)
}

/// Opens the backends on the data-plane thread.
type Open =
    Box<dyn FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send>;

/// How the backends are opened: the bridge (AF_PACKET, AF_XDP, or sharded
/// over `workers`) or the host's interception; with several workers, how
/// each of the others opens its own.
fn open_backends(
    args: &RunArgs,
    workers: usize,
) -> Result<(Open, Option<(usize, OpenWorker)>), Failure> {
    let mut sharded: Option<(usize, OpenWorker)> = None;
    let open: Open = if let Some(ifs) = &args.bridge {
        let (a, b) = match ifs.as_slice() {
            [a, b] => (a.clone(), b.clone()),
            _ => return Err("--bridge takes two interfaces".into()),
        };
        if a == b {
            return Err(format!("--bridge {a} {b}: the two interfaces must differ").into());
        }
        let plain = open_bridge(a.clone(), b.clone(), args.exit_on_link_loss);
        if workers > 1 {
            let (first, rest) = open_sharded_bridge(a, b, args.exit_on_link_loss);
            sharded = Some((workers, rest));
            first
        } else if args.xdp {
            let opts = super::bridge_xdp::options(args.xdp_frames);
            Box::new(super::bridge_xdp::open_or(
                a,
                b,
                opts,
                args.xdp_attach.into(),
                plain,
            ))
        } else {
            Box::new(plain)
        }
    } else {
        let spec = intercept_spec(args)?;
        let copy_mark = (!args.hold_output).then_some(args.copy_mark);
        Box::new(move |_| {
            let host = Host::open(&spec, copy_mark)?;
            Ok(vec![Box::new(host) as Box<dyn Backend>])
        })
    };
    Ok((open, sharded))
}

/// What `dummynet ps` shows this daemon shaping.
fn run_mode(args: &RunArgs) -> registry::Mode {
    match args.bridge.as_deref() {
        Some([a, b]) => registry::Mode::Bridge {
            interfaces: [a.clone(), b.clone()],
        },
        _ => registry::Mode::Host { queue: args.queue },
    }
}

/// What a user starting a daemon whose rules fall through to the default
/// `deny` is told.
fn default_deny_warning(host: bool) -> String {
    let whose = if host {
        " (in host mode, this machine's own traffic: an SSH session to it \
         included)"
    } else {
        ""
    };
    format!(
        "the rules end in the default rule 65535, which denies: every packet no \
         rule passes or sends to a pipe is dropped{whose}. Pass --default-allow, or \
         end the rules with `add 65000 allow ip from any to any`."
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn workers_are_a_number_from_1_to_64_or_auto() {
        use super::{parse_workers, Workers};
        assert_eq!(parse_workers("auto"), Ok(Workers::Auto));
        assert_eq!(parse_workers("1"), Ok(Workers::Exactly(1)));
        assert_eq!(parse_workers("64"), Ok(Workers::Exactly(64)));
        for bad in ["0", "65", "-1", "two", ""] {
            let e = parse_workers(bad).unwrap_err();
            assert!(e.contains("give 1 to 64, or auto"), "{bad}: {e}");
        }
        assert_eq!(Workers::Auto.to_string(), "auto");
    }

    #[test]
    fn memory_limit_sizes() {
        assert_eq!(super::parse_size("0"), Ok(0));
        assert_eq!(super::parse_size("1500"), Ok(1500));
        assert_eq!(super::parse_size("64K"), Ok(64 << 10));
        assert_eq!(super::parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(super::parse_size("2G"), Ok(2 << 30));
        assert!(super::parse_size("2X").is_err());
        assert!(super::parse_size("").is_err());
        assert!(super::parse_size("99999999999T").is_err());
    }

    use super::*;

    #[test]
    fn copy_marks_are_decimal_or_hex_and_never_zero() {
        assert_eq!(parse_mark("0x646e"), Ok(0x646e));
        assert_eq!(parse_mark("0XFF"), Ok(255));
        assert_eq!(parse_mark("25710"), Ok(25710));
        assert_eq!(parse_mark("4294967295"), Ok(u32::MAX));
        for bad in ["0", "0x0", "", "0x", "-1", "4294967296", "dn"] {
            assert!(parse_mark(bad).is_err(), "{bad:?}");
        }
    }
}
