//! `dummynet run`: the daemon. One engine, its backends, a control socket,
//! and an orderly shutdown on SIGINT/SIGTERM.
//!
//! [`spawn`] is the same thing as a library call, used by `shell` and
//! `demo`: the data plane runs on its own thread, optionally inside a
//! network namespace, and [`Running::stop`] ends it and returns its report.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use dummynet_daemon::start::StartError;
use dummynet_engine::config::Setting;
use dummynet_engine::{Command, Engine};
use dummynet_io::firewall::{Backend as IptablesBackend, Firewall, InterceptSpec};
use dummynet_io::netns::Netns;
use dummynet_io::portlock::{Port, PortLock};

use super::args::{ObserveArgs, PrecisionArg};
use super::bridge::Bridge;
use super::control::{self, ControlOptions, ControlServer};
use super::dataplane::{DataPlane, Inbox, PlaneOptions, Priority, Report};
use super::host::Host;
use super::netns_target::Target;
use super::observer::{ObserveOptions, Observer, ObserverThread, Tap};
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

/// A quarter of `MemTotal` in /proc/meminfo, if it can be read: the
/// default `held_limit` of every live mode.
fn default_memory_limit() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024) / 4)
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

/// A data plane running on its own thread.
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Report>>,
    control: Option<ControlServer>,
    /// The way to the data plane, for an HTTP server started later.
    link: Option<control::PlaneLink>,
    http: Option<super::http::HttpServer>,
    /// The per-packet observer, when asked for: its handle (subscribe,
    /// counters) and its thread, joined after the data plane's.
    observer: Option<Observer>,
    observer_thread: Option<ObserverThread>,
}

impl Running {
    /// Stops the data plane (it stops intercepting, releases what it holds)
    /// and returns its final report.
    pub fn stop(mut self) -> Report {
        self.finish()
    }

    fn finish(&mut self) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        let report = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        self.http.take();
        self.control.take();
        // The data plane is gone, and its tap with it: the observer writes
        // what is left and closes its files.
        if let Some(t) = self.observer_thread.take() {
            t.join();
        }
        report
    }

    /// Serves the HTTP API (`--http`) with `options`, its thread in `ns`
    /// (where the data plane runs). Returns where it listens.
    pub fn serve_http(
        &mut self,
        options: super::http::HttpOptions,
        ns: Option<&Netns>,
    ) -> Result<std::net::SocketAddr, String> {
        let link = self
            .link
            .clone()
            .ok_or("the data plane takes no requests: no HTTP API")?;
        let server = super::http::HttpServer::start(options, link, self.observer.clone(), ns)
            .map_err(|e| e.to_string())?;
        let addr = server.local_addr();
        self.http = Some(server);
        Ok(addr)
    }

    /// The per-packet observer ([`super::observer`]): subscribe to the
    /// daemon's packet events, read its counters. `None` unless the daemon
    /// was started with one.
    pub fn observer(&self) -> Option<&Observer> {
        self.observer.as_ref()
    }

    /// True once the data-plane thread has ended (it only ends on its own
    /// if it failed).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    pub fn socket(&self) -> Option<&std::path::Path> {
        self.control.as_ref().map(|c| c.path())
    }

    /// The way to the data plane, for requests made in this process (the
    /// library's [`crate::embed`]): what the control socket and the HTTP
    /// API use, without either.
    pub fn plane_link(&self) -> Option<&control::PlaneLink> {
        self.link.as_ref()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.finish();
        }
    }
}

/// Opens the backends with `open` on a new data-plane thread (inside `ns`
/// if given, so interfaces are looked up there), applies `config`, and
/// starts the control socket at `socket` if given. Returns once the
/// backends are open, or with the error that prevented it.
#[allow(clippy::too_many_arguments)]
pub fn spawn<F>(
    ns: Option<&Netns>,
    config: Vec<(usize, Command)>,
    seed: u64,
    socket: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    options: PlaneOptions,
    observe: Option<ObserveOptions>,
    open: F,
) -> Result<Running, StartError>
where
    F: FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + 'static,
{
    let socket = socket.map(|path| (path, ControlOptions::default()));
    spawn_controlled(ns, config, seed, socket, stop, options, observe, open)
}

/// Opens the leader's backends of a sharded data plane.
pub type OpenLeader =
    Box<dyn FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send>;

/// Opens worker K's backends (K from 1) of a sharded data plane
/// (`run --workers N`), on the leader's thread, after the leader's own.
pub type OpenWorker = Arc<
    dyn Fn(&mut Engine<Carrier>, usize) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + Sync,
>;

/// [`spawn`] with a say in who may use the control socket and what a
/// client may cost.
#[allow(clippy::too_many_arguments)]
pub fn spawn_controlled<F>(
    ns: Option<&Netns>,
    config: Vec<(usize, Command)>,
    seed: u64,
    socket: Option<(PathBuf, ControlOptions)>,
    stop: Arc<AtomicBool>,
    options: PlaneOptions,
    observe: Option<ObserveOptions>,
    open: F,
) -> Result<Running, StartError>
where
    F: FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + 'static,
{
    spawn_sharded(ns, config, seed, socket, stop, options, observe, open, None)
}

/// [`spawn_controlled`] on `workers.0` data-plane threads when given
/// (`run --workers N`, [`super::sharded`]), the others' backends opened
/// by `workers.1`.
#[allow(clippy::too_many_arguments)]
pub fn spawn_sharded<F>(
    ns: Option<&Netns>,
    config: Vec<(usize, Command)>,
    seed: u64,
    socket: Option<(PathBuf, ControlOptions)>,
    stop: Arc<AtomicBool>,
    options: PlaneOptions,
    observe: Option<ObserveOptions>,
    open: F,
    workers: Option<(usize, OpenWorker)>,
) -> Result<Running, StartError>
where
    F: FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + 'static,
{
    let replicas = config.clone();
    // Every live mode bounds the packet bytes its pipes hold (shell and
    // demo too); `run --memory-limit` and a config's `sysctl` come later and
    // win.
    let mut config = config;
    if let Some(limit) = default_memory_limit() {
        config.insert(0, (0, Command::Set(Setting::HeldLimit(limit))));
    }
    let mut engine: Engine<Carrier> = crate::lang::configure(&config, seed)
        .map_err(|(line, error)| StartError::Configuration { line, error })?;
    let (req_tx, req_rx) = mpsc::channel();
    let (wake_rx, wake_tx) = UnixStream::pair().map_err(|e| StartError::io("socketpair", e))?;
    wake_rx
        .set_nonblocking(true)
        .map_err(|e| StartError::io("socketpair", e))?;
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), StartError>>(1);
    // The files are created here, so that one that cannot be is an error
    // before anything starts.
    // One tap per worker, their records merged by time off the data plane.
    let n = workers.as_ref().map_or(1, |(n, _)| *n);
    let (observer, mut taps, observer_thread) = match &observe {
        Some(o) => {
            let (obs, taps, thread) =
                Observer::start_workers(o, n).map_err(|e| StartError::Backend(e.to_string()))?;
            (
                Some(obs),
                taps.into_iter().map(Some).collect(),
                Some(thread),
            )
        }
        None => (None, (0..n).map(|_| None).collect::<Vec<_>>(), None),
    };
    // Worker 0's (the leader's); the others' go to their threads.
    let tap = if taps.is_empty() {
        None
    } else {
        taps.remove(0)
    };
    let flag = stop.clone();
    let body = move || {
        // In the namespace the data plane runs in: its addresses are `me`,
        // its routes those `verrevpath` follows.
        super::learn_host(&mut engine);
        let backends = match open(&mut engine) {
            Ok(b) => b,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return Report::default();
            }
        };
        let inbox = Inbox {
            requests: req_rx,
            wake: wake_rx,
        };
        let leader = match workers {
            None => None,
            Some((n, open_worker)) => {
                let config = replicas_config(&replicas);
                match start_followers(n, &config, seed, options, open_worker, taps) {
                    Ok(leader) => leader,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Report::default();
                    }
                }
            }
        };
        // Ready (and the control socket up) once every worker has joined
        // its ports' fanout groups: a flow that began earlier would be
        // read by the leader alone at first, then by the worker the full
        // group hashes it to, its first packets' states left behind on
        // the leader (a `limit` place held twice, a `keep-state` made
        // twice).
        let _ = ready_tx.send(Ok(()));
        DataPlane::new(engine, backends, Some(inbox), flag)
            .with_options(options)
            .with_tap(tap)
            .with_worker(leader)
            .run()
    };
    let thread = match ns {
        Some(ns) => ns
            .spawn_thread("dummynet-dataplane", body)
            .map_err(StartError::namespace)?,
        None => std::thread::Builder::new()
            .name("dummynet-dataplane".into())
            .spawn(body)
            .map_err(|e| StartError::Backend(e.to_string()))?,
    };
    // Non-blocking, as the control server's: a full buffer means a
    // wake-up is already pending.
    let link = wake_tx
        .try_clone()
        .and_then(|wake| wake.set_nonblocking(true).map(|()| wake))
        .ok()
        .map(|wake| control::PlaneLink {
            requests: req_tx.clone(),
            wake: Arc::new(wake),
        });
    let mut running = Running {
        stop,
        thread: Some(thread),
        control: None,
        link,
        http: None,
        observer,
        observer_thread,
    };
    match ready_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            running.finish();
            return Err(e);
        }
        Err(_) => {
            running.finish();
            return Err(StartError::PlaneEnded);
        }
    }
    if let Some((path, control)) = socket {
        match ControlServer::start(&path, req_tx, wake_tx, ns, control) {
            Ok(server) => running.control = Some(server),
            Err(e) => {
                running.finish();
                return Err(e.into());
            }
        }
    }
    Ok(running)
}

/// The configuration every replica starts from: what the leader's engine
/// was made with (the memory limit first, as there).
fn replicas_config(config: &[(usize, Command)]) -> Vec<(usize, Command)> {
    let mut config = config.to_vec();
    if let Some(limit) = default_memory_limit() {
        config.insert(0, (0, Command::Set(Setting::HeldLimit(limit))));
    }
    config
}

/// Starts workers 1..n of a sharded data plane, each with an engine made
/// from `config` and backends `open_worker` opens here (on the leader's
/// thread, in its namespace, which the workers' threads inherit); returns
/// the leader's part, which keeps them.
fn start_followers(
    n: usize,
    config: &[(usize, Command)],
    seed: u64,
    options: PlaneOptions,
    open_worker: OpenWorker,
    taps: Vec<Option<Tap>>,
) -> Result<Option<super::sharded::Worker>, StartError> {
    let mut parts = super::sharded::workers(n)
        .map_err(|e| StartError::Backend(e.to_string()))?
        .into_iter();
    let mut taps = taps.into_iter();
    let Some(mut leader) = parts.next() else {
        return Ok(None);
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for part in parts {
        let k = part.index();
        // The engine is made on its worker's thread, in that thread's heap:
        // replicas made side by side shared cache lines of their per-packet
        // counters, and two workers spent more time passing those lines to
        // each other than classifying (`dummynet bench --workers`: 3 to 4
        // times the CPU a packet). One at a time, so that the ports join
        // their fanout groups in worker order.
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), StartError>>(1);
        let (config, open_worker, worker_stop) =
            (config.to_vec(), open_worker.clone(), stop.clone());
        let tap = taps.next().flatten();
        let body = move || {
            let made = crate::lang::configure(&config, seed)
                .map_err(|(line, error)| StartError::Configuration { line, error })
                .and_then(|mut engine: Engine<Carrier>| {
                    super::learn_host(&mut engine);
                    let backends = open_worker(&mut engine, k)?;
                    Ok((engine, backends))
                });
            match made {
                Ok((engine, backends)) => {
                    let _ = ready_tx.send(Ok(()));
                    DataPlane::new(engine, backends, None, worker_stop)
                        .with_options(options)
                        .with_tap(tap)
                        .with_worker(Some(part))
                        .run()
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    Report::default()
                }
            }
        };
        let thread = std::thread::Builder::new()
            .name(format!("dummynet-worker-{k}"))
            .spawn(body)
            .map_err(|e| StartError::io(format!("starting data-plane worker {k}"), e))?;
        let ready = ready_rx.recv().unwrap_or_else(|_| {
            Err(StartError::Backend(format!(
                "data-plane worker {k} ended during setup"
            )))
        });
        threads.push(thread);
        if let Err(e) = ready {
            // The workers started so far stop (none has a job to wait for).
            stop.store(true, Ordering::Relaxed);
            for t in threads {
                let _ = t.join();
            }
            return Err(StartError::Backend(format!("data-plane worker {k}: {e}")));
        }
    }
    leader.adopt(threads, stop);
    Ok(Some(leader))
}

/// `--bridge A B` on a sharded data plane: each worker's own bridge on
/// the two interfaces, their ports joined in one `PACKET_FANOUT` group per
/// interface (the leader's made it; `groups` passes its ids on).
pub fn open_sharded_bridge(
    a: String,
    b: String,
    exit_on_link_loss: bool,
) -> (OpenLeader, OpenWorker) {
    let groups: Arc<std::sync::Mutex<Option<[u16; 2]>>> = Arc::default();
    let open = move |e: &mut Engine<Carrier>,
                     groups: &std::sync::Mutex<Option<[u16; 2]>>|
          -> Result<Vec<Box<dyn Backend>>, StartError> {
        let bridge = Bridge::open(&a, &b, e)?.exit_on_link_loss(exit_on_link_loss);
        let mut g = groups.lock().map_err(|_| "fanout groups: poisoned lock")?;
        let ids = bridge.join_fanout(*g)?;
        *g = Some(ids);
        Ok(vec![Box::new(bridge) as Box<dyn Backend>])
    };
    let open = Arc::new(open);
    let (first, rest) = (open.clone(), open);
    let g1 = groups.clone();
    (
        Box::new(move |e: &mut Engine<Carrier>| first(e, &g1)),
        Arc::new(move |e: &mut Engine<Carrier>, _k: usize| rest(e, &groups)),
    )
}

/// `--bridge A B`'s backend, opened on the data-plane thread by [`spawn`]
/// (where the interfaces are looked up: in its namespace).
pub fn open_bridge(
    a: String,
    b: String,
    exit_on_link_loss: bool,
) -> impl FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + 'static
{
    move |e| {
        let bridge = Bridge::open(&a, &b, e)?.exit_on_link_loss(exit_on_link_loss);
        Ok(vec![Box::new(bridge) as Box<dyn Backend>])
    }
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
    let mut running = spawn_sharded(
        ns,
        config,
        args.seed,
        Some((socket, control)),
        stop.clone(),
        options,
        observe,
        open,
        sharded,
    )?;
    let mut http_addr = None;
    if let Some(http) = http {
        let token = http.token.is_some();
        let addr = running.serve_http(http, ns)?;
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
            // The AF_XDP bridge and its fallback speak in words.
            let plain = move |e: &mut Engine<Carrier>| plain(e).map_err(|e| e.to_string());
            let xdp = super::bridge_xdp::open_or(a, b, opts, args.xdp_attach.into(), plain);
            Box::new(move |e: &mut Engine<Carrier>| xdp(e).map_err(StartError::Backend))
        } else {
            Box::new(plain)
        }
    } else {
        let spec = intercept_spec(args)?;
        let copy_mark = (!args.hold_output).then_some(args.copy_mark);
        Box::new(move |_| {
            let host =
                Host::open(&spec, copy_mark).map_err(|e| StartError::Backend(e.to_string()))?;
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
