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

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use std::fmt::Write as _;

use dummynet_engine::config::{Fields, PipeConfig};
use dummynet_engine::{modify, Command};
use dummynet_io::netns::Netns;
use dummynet_io::rtnl::Via;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use super::args::PrecisionArg;
use super::bridge::Bridge;
use super::dataplane::{PlaneOptions, Precision, Report};
use super::presets;
use super::rootless::{Gateway, UserNet};
use super::run::{spawn, Running};
use super::shell_napi::{move_receive_work, warning, Napi};
use super::shell_nat::{Inside, Nat, WayOut};
use super::Backend;

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
    #[arg(long, value_enum, default_value_t = Nat::Auto)]
    pub nat: Nat,
    /// Without root only (see the book's "Without root" chapter): the userspace
    /// network stack that connects the shell's own namespaces to this
    /// host's network: `auto` takes pasta (package passt) if installed,
    /// else slirp4netns, else none; `none`: the command reaches its peer
    /// only.
    #[arg(long, value_enum, default_value_t = UserNet::Auto)]
    pub user_net: UserNet,
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
    #[arg(long, value_enum, default_value_t = Gso::Auto, num_args = 0..=1, default_missing_value = "on")]
    pub gso: Gso,
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
    #[arg(long, value_enum, default_value_t = Napi::Threaded)]
    pub napi: Napi,
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

/// Whether GSO super-packets cross the shell whole (see [`ShellArgs::gso`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Gso {
    /// While the engine says they fare as their segments would
    /// (`Engine::only_delays`), following its configuration.
    #[default]
    Auto,
    On,
    Off,
}

/// The three namespaces of a path through the emulator, joined by veths.
#[derive(Clone)]
pub struct Path {
    /// Where the emulator runs.
    pub mid: Netns,
    /// The namespaces at the ends, and the far end's interface.
    pub near: Netns,
    pub far: Netns,
    pub far_if: String,
    /// Address of the near end (the command's side) and of the far end.
    pub near_addr: Ipv4Addr,
    pub far_addr: Ipv4Addr,
    /// The link's /30.
    pub subnet: Ipv4Addr,
    /// The same for IPv6 (a /64 of fd64:646e::/32), unless IPv6 could not
    /// be set up (disabled on the host, say).
    pub v6: Option<V6Link>,
    /// With `--napi threaded`: the emulator's two ports, whose TSO follows
    /// the ends' segmentation ([`super::shell_napi`]): off while the ends
    /// segment, on while super-packets cross whole.
    pub tso_follows: Option<[String; 2]>,
}

/// The IPv6 side of a [`Path`].
#[derive(Clone, Copy, Debug)]
pub struct V6Link {
    pub subnet: Ipv6Addr,
    pub near_addr: Ipv6Addr,
    pub far_addr: Ipv6Addr,
}

/// Prefix lengths of the link's subnets.
pub const V4_PREFIX: u8 = 30;
pub const V6_PREFIX: u8 = 64;

/// Emulator-side interface towards the command.
pub const APP_IF: &str = "app";
/// Emulator-side interface towards the far end.
pub const PEER_IF: &str = "peer";
/// The command's interface.
pub const NEAR_IF: &str = "dn0";

/// Builds near ↔ mid ↔ far: `NEAR_IF` in `near`, `far_if` in `far`, both
/// with addresses of a free /30 of 100.64.0.0/10 (the shared address space,
/// unlikely to clash with a user's own networks) and of the /64 of
/// fd64:646e::/32 that spells the same /30 (100.64.1.4/30 gives
/// fd64:646e:6440:104::/64; unique local addresses), a default route per
/// family on the near side towards the far end, and the bridge ports in
/// `mid`. IPv6 is best effort: where it cannot be set up (disabled on the
/// host), the path is IPv4 only and a warning says why.
///
/// With `Gso::Off`, both ends segment before sending (`gso_max_segs 1`),
/// so every frame the emulator sees is one wire packet and takes one queue
/// slot, as on a real link; otherwise TCP's super-packets of up to 64 KB
/// cross whole (billed for all their bytes), which multi-Gbit/s runs need
/// but which lets a slot-limited queue hold far more than it says, until
/// [`start_emulator`] says otherwise (`Gso::Auto`).
pub fn build_path(near: &Netns, far: &Netns, far_if: &str, gso: Gso) -> Result<Path, String> {
    let mid = Netns::new_anonymous().map_err(|e| format!("creating a namespace: {e}"))?;
    build_path_in(mid, [APP_IF, PEER_IF], near, far, far_if, gso)
}

/// [`build_path`] through `mid`, an existing namespace (a joined shell's:
/// the running emulator's), with its ends there named `mid_ifs` (towards
/// `near`, towards `far`).
pub fn build_path_in(
    mid: Netns,
    mid_ifs: [&str; 2],
    near: &Netns,
    far: &Netns,
    far_if: &str,
    gso: Gso,
) -> Result<Path, String> {
    let [app_if, peer_if] = mid_ifs;
    let whole = gso != Gso::Off;
    let subnet = far
        .run(free_subnet)
        .map_err(|e| format!("reading routes: {e}"))??;
    let far_addr = Ipv4Addr::from(u32::from(subnet) + 1);
    let near_addr = Ipv4Addr::from(u32::from(subnet) + 2);
    let mut m = mid.rtnl().map_err(|e| e.to_string())?;
    m.add_veth(app_if, NEAR_IF, Some(near.as_fd_borrowed()))
        .map_err(|e| e.to_string())?;
    m.add_veth(peer_if, far_if, Some(far.as_fd_borrowed()))
        .map_err(|e| e.to_string())?;
    m.set_up(app_if).map_err(|e| e.to_string())?;
    m.set_up(peer_if).map_err(|e| e.to_string())?;
    let mut f = far.rtnl().map_err(|e| e.to_string())?;
    f.add_address(far_if, IpAddr::V4(far_addr), V4_PREFIX)
        .map_err(|e| e.to_string())?;
    if !whole {
        f.set_gso_max_segs(far_if, 1).map_err(|e| e.to_string())?;
    }
    f.set_up(far_if).map_err(|e| e.to_string())?;
    let mut n = near.rtnl().map_err(|e| e.to_string())?;
    n.add_address(NEAR_IF, IpAddr::V4(near_addr), V4_PREFIX)
        .map_err(|e| e.to_string())?;
    if !whole {
        n.set_gso_max_segs(NEAR_IF, 1).map_err(|e| e.to_string())?;
    }
    n.set_up(NEAR_IF).map_err(|e| e.to_string())?;
    n.add_route(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        0,
        Via::Gateway(IpAddr::V4(far_addr)),
    )
    .map_err(|e| e.to_string())?;
    let v6 = v6_of(subnet);
    let v6 = match (|| -> Result<(), dummynet_io::rtnl::RtnlError> {
        f.add_address(far_if, IpAddr::V6(v6.far_addr), V6_PREFIX)?;
        n.add_address(NEAR_IF, IpAddr::V6(v6.near_addr), V6_PREFIX)?;
        n.add_route(
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            0,
            Via::Gateway(IpAddr::V6(v6.far_addr)),
        )
    })() {
        Ok(()) => Some(v6),
        Err(e) => {
            say!("dummynet: warning: the link is IPv4 only: {e}");
            None
        }
    };
    Ok(Path {
        mid,
        near: near.clone(),
        far: far.clone(),
        far_if: far_if.to_string(),
        near_addr,
        far_addr,
        subnet,
        v6,
        tso_follows: None,
    })
}

/// The /64 that goes with the /30 `v4`: fd64:646e, then its 32 bits.
fn v6_of(v4: Ipv4Addr) -> V6Link {
    let bits = u32::from(v4);
    let subnet = Ipv6Addr::new(0xfd64, 0x646e, (bits >> 16) as u16, bits as u16, 0, 0, 0, 0);
    let host = |n: u128| Ipv6Addr::from(u128::from(subnet) + n);
    V6Link {
        subnet,
        far_addr: host(1),
        near_addr: host(2),
    }
}

/// `gso_max_segs` that lets a sender's super-packets stay whole: the
/// kernel's default (`GSO_MAX_SEGS`).
const WHOLE_SEGS: u32 = 65_535;

impl Path {
    /// Makes both ends segment their super-packets before sending, or lets
    /// them send them whole.
    fn set_bursts(&self, whole: bool) -> Result<(), String> {
        let segs = if whole { WHOLE_SEGS } else { 1 };
        let near = self.near.rtnl().map_err(|e| e.to_string())?;
        let far = self.far.rtnl().map_err(|e| e.to_string())?;
        for (mut rtnl, name) in [(near, NEAR_IF), (far, self.far_if.as_str())] {
            rtnl.set_gso_max_segs(name, segs)
                .map_err(|e| e.to_string())?;
        }
        if let Some(ports) = &self.tso_follows {
            // Not fatal: the link works either way (see shell_napi).
            for e in super::shell_napi::follow_segmentation(self, ports, whole) {
                say!("dummynet shell: {e}");
            }
        }
        Ok(())
    }
}

/// Where the outcome of applying the first word arrives.
type FirstApplied = Receiver<Result<(), String>>;

/// A thread that sets the path's segmentation as the emulator's bridge
/// tells it (`Bridge::follow_bursts`), until the bridge is gone: netlink
/// is no work for the data plane. Returns the bridge's end of the channel.
fn follow_bursts(path: &Path) -> Result<(Sender<bool>, FirstApplied), String> {
    let (tell, words) = mpsc::channel::<bool>();
    let (done, first) = mpsc::channel();
    let path = path.clone();
    std::thread::Builder::new()
        .name("dummynet-bursts".into())
        .spawn(move || {
            let mut done = Some(done);
            for whole in words {
                let applied = path.set_bursts(whole);
                match (done.take(), applied) {
                    (Some(done), applied) => {
                        let _ = done.send(applied);
                    }
                    (None, Err(e)) => say!("dummynet shell: segmentation: {e}"),
                    (None, Ok(())) => {}
                }
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok((tell, first))
}

trait BorrowFd {
    fn as_fd_borrowed(&self) -> std::os::fd::BorrowedFd<'_>;
}

impl BorrowFd for Netns {
    fn as_fd_borrowed(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

/// A /30 of 100.64.0.0/10 that no route of the calling thread's namespace
/// overlaps, and whose /64 ([`v6_of`]) no IPv6 route overlaps either (run
/// inside the namespace that gets the far address).
fn free_subnet() -> Result<Ipv4Addr, String> {
    let routes = std::fs::read_to_string("/proc/thread-self/net/route")
        .map_err(|e| format!("/proc/thread-self/net/route: {e}"))?;
    let taken: Vec<(u32, u32)> = routes
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // /proc prints each network-order address as a native integer:
            // its native bytes are the address bytes.
            let addr = |hex: &str| {
                u32::from_str_radix(hex, 16)
                    .ok()
                    .map(|v| u32::from_be_bytes(v.to_ne_bytes()))
            };
            let (dst, mask) = (addr(f.get(1)?)?, addr(f.get(7)?)?);
            (mask != 0).then_some((dst, mask))
        })
        .collect();
    // Without IPv6 in the kernel there is no such file, and no clash.
    let taken6 =
        routes6(&std::fs::read_to_string("/proc/thread-self/net/ipv6_route").unwrap_or_default());
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 0));
    // Start at a spot that depends on the pid so that parallel shells
    // rarely try the same one first.
    let start = std::process::id() % 1024;
    for i in 0..(1u32 << 20) {
        let net = base + (((start + i) % (1 << 20)) << 2);
        let clash = taken
            .iter()
            .any(|&(dst, mask)| (net & mask) == (dst & mask) || (dst & 0xffff_fffc) == net);
        let net6 = u128::from(v6_of(Ipv4Addr::from(net)).subnet);
        let clash6 = taken6.iter().any(|&(dst, len)| {
            // Equal on the shorter of the two prefixes.
            let common = u32::from(len.min(V6_PREFIX));
            (net6 ^ dst).checked_shr(128 - common).unwrap_or(0) == 0
        });
        if !clash && !clash6 {
            return Ok(Ipv4Addr::from(net));
        }
    }
    Err("no free /30 in 100.64.0.0/10 (with a free /64 in fd64:646e::/32)".into())
}

/// The IPv6 routes of `/proc/net/ipv6_route` (destination, prefix length),
/// default routes left out.
fn routes6(text: &str) -> Vec<(u128, u8)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let dst = u128::from_str_radix(f.next()?, 16).ok()?;
            let len = u8::from_str_radix(f.next()?, 16).ok()?;
            (len != 0).then_some((dst, len))
        })
        .collect()
}

/// The emulator's rules for a shell: pipe 1 up, pipe 2 down, everything
/// else (the `out` pass, ARP is not IP) allowed. A direction given a
/// scheduler type (`bw 10Mbit/s type fq_codel`) is shaped so that the type
/// applies ([`feed_typed_schedulers`]).
pub fn shell_config(up: &str, down: &str) -> Result<Vec<(usize, Command)>, String> {
    let mut config = pipes_and_rules(up, down)?;
    feed_typed_schedulers(&mut config);
    Ok(config)
}

/// A pipe's `type T` sets its scheduler N, which packets sent to `pipe N`
/// never meet: they take the pipe's own FIFO queue, as in FreeBSD. For a
/// pipe given a type, this adds queue N of scheduler N (with the pipe's
/// queue options: size, loss, AQM...) and sends the rules' packets there
/// (`queue N` for `pipe N`), which is what `--up "... type fq_codel"` asks.
pub fn feed_typed_schedulers(config: &mut Vec<(usize, Command)>) {
    let typed: Vec<(usize, u32, dummynet_engine::config::FlowsetConfig)> = config
        .iter()
        .enumerate()
        .filter_map(|(i, (_, c))| match c {
            Command::ConfigPipe(n, cfg) if cfg.sched.is_some() => {
                Some((i, *n, cfg.flowset.clone()))
            }
            _ => None,
        })
        .collect();
    for (i, n, flowset) in typed.into_iter().rev() {
        let line = config[i].0;
        let queue = dummynet_engine::config::QueueConfig {
            sched: Some(n),
            flowset,
        };
        config.insert(i + 1, (line, Command::ConfigQueue(n, queue)));
        for (_, c) in config.iter_mut() {
            if let Command::AddRule(spec) = c {
                if spec.action == dummynet_engine::config::Action::Pipe(n) {
                    spec.action = dummynet_engine::config::Action::Queue(n);
                }
            }
        }
    }
}

fn pipes_and_rules(up: &str, down: &str) -> Result<Vec<(usize, Command)>, String> {
    let text = format!(
        "pipe 1 config {up}\n\
         pipe 2 config {down}\n\
         add 100 pipe 1 ip from any to any in recv {APP_IF}\n\
         add 200 pipe 2 ip from any to any in recv {PEER_IF}\n\
         add 65000 allow ip from any to any\n"
    );
    crate::lang::commands(&text, None).map_err(|(line, e)| {
        let what = match line {
            1 => "--up",
            2 => "--down",
            _ => "the generated rules",
        };
        format!("{what}: {e}")
    })
}

/// The emulator's rules for `--preset`, `--up` and `--down`: the preset's
/// pipe options (or `bw 0`, no limit, without one) with each of `--up` and
/// `--down` merged onto them option by option, as `pipe N modify` would:
/// `--preset lte --up "delay 50ms"` keeps lte's uplink bandwidth and queue
/// and replaces only its delay. Without a preset, `--up` and `--down` are
/// the whole configuration of their pipe.
pub fn link_config(
    preset: Option<&str>,
    up: Option<&str>,
    down: Option<&str>,
) -> Result<Vec<(usize, Command)>, String> {
    let Some(name) = preset else {
        return shell_config(up.unwrap_or("bw 0"), down.unwrap_or("bw 0"));
    };
    let p = presets::lookup(name).ok_or_else(|| {
        format!(
            "unknown preset `{name}`; known: {}",
            presets::names().join(", ")
        )
    })?;
    let (base_up, base_down) = p.options_for_use()?;
    let mut config =
        pipes_and_rules(&base_up, &base_down).map_err(|e| format!("preset `{name}`: {e}"))?;
    for (number, flag, given) in [(1, "--up", up), (2, "--down", down)] {
        let Some(given) = given else { continue };
        let (change, fields) = parse_modify(number, given).map_err(|e| format!("{flag}: {e}"))?;
        let pipe = config
            .iter_mut()
            .find_map(|(_, c)| match c {
                Command::ConfigPipe(n, cfg) if *n == number => Some(cfg),
                _ => None,
            })
            .ok_or_else(|| format!("preset `{name}` has no pipe {number} to merge {flag} onto"))?;
        *pipe = PipeConfig {
            link: modify::link(&pipe.link, &change.link, fields),
            flowset: modify::flowset(&pipe.flowset, &change.flowset, fields),
            sched: change.sched.or_else(|| pipe.sched.take()),
        };
    }
    feed_typed_schedulers(&mut config);
    Ok(config)
}

/// `OPTIONS` read as `pipe N modify OPTIONS`: the options given and the
/// groups they name.
fn parse_modify(number: u32, options: &str) -> Result<(PipeConfig, Fields), String> {
    let parsed = crate::lang::commands(&format!("pipe {number} modify {options}\n"), None)
        .map_err(|(_, e)| e)?;
    match parsed.into_iter().next() {
        Some((_, Command::ModifyPipe(_, cfg, fields))) => Ok((cfg, fields)),
        _ => Err(format!("`{options}` is not a list of pipe options")),
    }
}

/// What each direction of a shell's link is, for the start of a shell:
/// the configuration after any merge, checked by an engine as the
/// emulator will check it. One line per pipe (`dummynet shell: up (pipe
/// 1): 10 Mbit/s, 20 ms, queue 50 slots`); `verbose`: as `pipe show`
/// prints it (link and queue lines).
pub fn describe_links(
    config: &[(usize, Command)],
    seed: u64,
    verbose: bool,
) -> Result<String, String> {
    let engine: dummynet_engine::Engine<crate::live::Carrier> =
        crate::lang::configure(config, seed)
            .map_err(|(line, e)| format!("the link configuration (line {line}): {e}"))?;
    let snapshot = engine.snapshot();
    let mut out = String::new();
    for (number, what) in [(1, "up (pipe 1)"), (2, "down (pipe 2)")] {
        if !verbose {
            let views = super::views::pipes(&snapshot, &[number]);
            if let Some(pipe) = views.pipes.first() {
                let _ = writeln!(out, "dummynet shell: {what}: {}", one_line(pipe));
            }
            continue;
        }
        let shown = dummynet_lang::format_pipes(&snapshot, &[number]);
        let _ = writeln!(out, "dummynet shell: {what}:");
        // The scheduler lines say nothing about a pipe's own FIFO.
        for line in shown.lines().take_while(|l| !l.starts_with(" sched")) {
            let _ = writeln!(out, "    {line}");
        }
    }
    Ok(out)
}

/// A pipe in a few words: its rate, delay, queue and what else it does.
fn one_line(pipe: &super::views::PipeJson) -> String {
    let link = &pipe.link;
    let mut parts = vec![match (&link.profile, link.trace, link.bandwidth_bps) {
        (Some(p), _, _) => format!("profile {p}"),
        (None, true, _) => "trace-driven".to_string(),
        (None, false, 0) => "unlimited".to_string(),
        (None, false, bw) => super::presets::format_bw(bw),
    }];
    parts.push(format!("{} ms", link.delay_ns as f64 / 1e6));
    parts.extend(link.impairments.iter().cloned());
    if let Some(q) = &pipe.queue {
        match (q.limit_packets, q.limit_bytes) {
            (Some(n), _) => parts.push(format!("queue {n} slots")),
            (None, Some(b)) => parts.push(format!("queue {b} bytes")),
            (None, None) => {}
        }
        if q.plr > 0.0 {
            parts.push(format!("plr {}", q.plr));
        }
        if q.aqm != "droptail" {
            parts.push(q.aqm.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        parts.extend(q.impairments.iter().cloned());
    }
    parts.join(", ")
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
            let (tell, first) = follow_bursts(path)?;
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
            let mut bridge = Bridge::open(APP_IF, PEER_IF, e).map_err(|e| e.to_string())?;
            if let Some(tell) = tell {
                bridge = bridge.follow_bursts(tell);
            }
            Ok(vec![Box::new(bridge) as Box<dyn Backend>])
        },
    )?;
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
        build_path(&app, &here, &veth.name, gso)?
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
    let mut session = super::join::Session::request(socket, request)?;
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
        )?
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
    let said = session.attach()?;
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
            Some(s) => s.detach().map(drop),
            None => Ok(()),
        };
        // The NAT's programs run in the namespace it was set up in, from
        // whichever thread stops the link.
        let undone = match self.way_out.take() {
            Some(w) => {
                let what = w.describe();
                let close = move || w.close();
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
    let config = match &args.config {
        Some(path) => {
            if args.up.is_some() || args.down.is_some() || args.preset.is_some() {
                return Err("--config replaces --preset/--up/--down; give one or the other".into());
            }
            crate::lang::load_config(path)?
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
            let described = describe_links(&config, args.seed, args.verbose)?;
            if !args.quiet {
                super::say_str(&described);
            }
            config
        }
    };
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
        nat: args.nat,
        socket: Some(socket),
        gso: args.gso,
        precision: args.precision.into(),
        napi: args.napi,
        observe,
        veth: format!("dn-{me}"),
    };
    // Declared before the link, so dropped after it: the link's NAT leads
    // into the gateway's tap.
    let _gateway: Option<Gateway>;
    let mut link = match &args.join {
        Some(shared) => {
            if http.is_some() || options.observe.is_some() {
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
            _gateway = None;
            start_joined(shared, request, args.nat, args.gso, args.napi, options.veth)?
        }
        None if super::rootless::is_rootless() => {
            let (link, gateway) = start_rootless(options, args.user_net)?;
            _gateway = gateway;
            link
        }
        None => {
            _gateway = None;
            start(options)?
        }
    };
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
    let mut signalled = false;
    let mut looked = 0u32;
    let status = loop {
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
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn super_packets_cross_whole_only_where_no_pipe_counts_packets() {
        let engine = |c: &[(usize, Command)]| -> dummynet_engine::Engine<crate::live::Carrier> {
            crate::lang::configure(c, 1).unwrap()
        };
        let whole = |up: &str, down: &str| engine(&shell_config(up, down).unwrap()).only_delays();
        assert!(whole("bw 0", "bw 0"));
        assert!(whole("delay 20ms", "delay 20ms queue 10"));
        for limited in [
            "bw 10Mbit/s",
            "delay 10ms plr 0.01",
            "delay 10ms jitter 1ms",
            "delay 10ms loss 1%",
            "delay 10ms codel",
            "trace examples/traces/constant-12mbit.trace",
        ] {
            if let Ok(c) = shell_config(limited, "bw 0") {
                assert!(!engine(&c).only_delays(), "{limited}");
            }
        }
        assert!(!whole("delay 10ms", "bw 1Mbit/s"));
        // A schedule may bring a limit in; once it has, the state says so.
        let mut c = shell_config("bw 0", "bw 0").unwrap();
        c.extend(crate::lang::commands("at 5s pipe 1 modify bw 1Mbit/s\n", None).unwrap());
        let mut e = engine(&c);
        assert!(!e.only_delays());
        let _ = e.poll(6_000_000_000);
        assert_eq!(e.schedule_stats().applied, 1);
        assert!(!e.only_delays());
        // A change back to delay only, by hand: whole again, and the
        // configuration epoch moved both times.
        let epoch = e.config_epoch();
        let argv: Vec<String> = "pipe 1 modify bw 0".split(' ').map(String::from).collect();
        let reply = crate::live::control::run_command(&mut e, 7_000_000_000, &argv, None);
        assert_eq!(reply.status, 0, "{}", reply.stderr);
        assert!(e.only_delays());
        assert!(e.config_epoch() > epoch);
    }

    /// The pipe config a shell's commands give pipe `n`.
    fn pipe(config: &[(usize, Command)], n: u32) -> &PipeConfig {
        config
            .iter()
            .find_map(|(_, c)| match c {
                Command::ConfigPipe(m, cfg) if *m == n => Some(cfg),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no pipe {n} in {config:?}"))
    }

    #[test]
    fn an_override_is_merged_onto_the_preset_option_by_option() {
        let lte = presets::lookup("lte").unwrap();
        let (lte_up, lte_down) = lte.options_for_use().unwrap();
        let preset = shell_config(&lte_up, &lte_down).unwrap();
        let merged = link_config(Some("lte"), Some("delay 50ms"), None).unwrap();
        let (was, now) = (pipe(&preset, 1), pipe(&merged, 1));
        // The preset's bandwidth and queue, the new delay.
        assert_eq!(now.link.bw, lte.up.bw);
        assert_eq!(now.link.bw, 10_000_000);
        assert_eq!(now.link.delay, 50_000_000);
        assert_ne!(was.link.delay, now.link.delay);
        assert_eq!(now.flowset.limit, was.flowset.limit);
        // The other direction is the preset's, untouched.
        assert_eq!(pipe(&merged, 2), pipe(&preset, 2));
        // Options the preset lacks are added; the rest stays.
        let lossy = link_config(Some("lte"), None, Some("plr 0.01")).unwrap();
        let down = pipe(&lossy, 2);
        assert!(!down.flowset.plr.is_zero());
        assert_eq!(down.link.bw, lte.down.bw);
        assert_eq!(down.link.delay, pipe(&preset, 2).link.delay);
        // What the shell prints at start is that merged configuration.
        let shown = describe_links(&merged, 1, true).unwrap();
        println!("{shown}");
        assert!(shown.contains("10.000 Mbit/s   50 ms"), "{shown}");
        // By default, one line per pipe, saying the same.
        let short = describe_links(&merged, 1, false).unwrap();
        println!("{short}");
        assert_eq!(short.lines().count(), 2, "{short}");
        assert!(
            short.starts_with("dummynet shell: up (pipe 1): 10Mbit/s, 50 ms, queue "),
            "{short}"
        );
        // Without a preset, --up is the whole configuration of pipe 1.
        let bare = link_config(None, Some("delay 50ms"), None).unwrap();
        assert_eq!(pipe(&bare, 1).link.bw, 0);
    }

    #[test]
    fn a_bad_override_or_preset_is_named() {
        let e = link_config(Some("lte"), Some("dealy 50ms"), None).unwrap_err();
        assert!(e.starts_with("--up:"), "{e}");
        let e = link_config(Some("lte"), None, Some("bw fast")).unwrap_err();
        assert!(e.starts_with("--down:"), "{e}");
        let e = link_config(Some("no-such-link"), None, None).unwrap_err();
        assert!(
            e.contains("unknown preset `no-such-link`") && e.contains("lte"),
            "{e}"
        );
    }

    /// `--up "bw 1Mbit/s type fq_codel"` really runs FQ-CoDel: the shell
    /// sends the direction to a queue of scheduler 1 (not to the pipe's own
    /// FIFO queue), so on the virtual clock a lone packet of a new flow
    /// leaves right away behind a bulk flow's backlog, which a FIFO would
    /// make it wait behind (or drop it, full).
    #[test]
    fn a_scheduler_type_in_up_is_fed_and_isolates_flows() {
        use dummynet_engine::{FlowKey, PacketInfo};
        let lone_wait = |up: &str| -> Option<u64> {
            let config = link_config(None, Some(up), None).unwrap();
            let mut e: dummynet_engine::Engine<()> = crate::lang::configure(&config, 1).unwrap();
            let app = e.iface(APP_IF);
            let packet = |sport: u16| PacketInfo {
                len: 1500,
                key: FlowKey::v4(
                    std::net::Ipv4Addr::new(10, 0, 0, 1),
                    std::net::Ipv4Addr::new(10, 0, 0, 2),
                    17,
                    sport,
                    9,
                ),
                dir: dummynet_engine::Direction::In,
                recv_if: Some(app),
                xmit_if: None,
            };
            // 40 packets of a bulk flow (480 ms of 1 Mbit/s), then one of
            // another flow at 1 ms.
            for _ in 0..40 {
                let _ = e.input(0, packet(1000), ());
            }
            let lone = 1_000_000;
            let _ = e.input(lone, packet(2000), ());
            let mut now = 0;
            while now < 2_000_000_000 {
                while let Some(out) = e.poll(now) {
                    if out.info.key.sport == 2000 {
                        return out.delivered().then(|| out.at - lone);
                    }
                }
                now += 1_000_000;
            }
            None
        };
        let fq = lone_wait("bw 1Mbit/s type fq_codel").expect("the lone packet left");
        // Behind a few of the bulk flow's packets (12 ms each), not 40.
        assert!(fq <= 50_000_000, "waited {fq} ns under FQ-CoDel");
        let fifo = lone_wait("bw 1Mbit/s").expect("the lone packet left");
        assert!(
            fifo >= 400_000_000,
            "a FIFO makes it wait behind the backlog: {fifo} ns"
        );
        // The generated commands: queue 1 of scheduler 1, the rule to it.
        let config = link_config(None, Some("bw 1Mbit/s type fq_codel"), None).unwrap();
        assert!(config.iter().any(|(_, c)| matches!(c,
            Command::ConfigQueue(1, q) if q.sched == Some(1))));
        assert!(config.iter().any(|(_, c)| matches!(c,
            Command::AddRule(r) if r.action == dummynet_engine::config::Action::Queue(1))));
        assert!(!config
            .iter()
            .any(|(_, c)| matches!(c, Command::ConfigQueue(2, _))));
    }

    #[test]
    fn shell_config_names_the_bad_direction() {
        assert!(shell_config("bw 1Mbit/s", "delay 5ms").is_ok());
        let e = shell_config("bw 1Mbit/s", "dealy 5ms").unwrap_err();
        assert!(e.starts_with("--down:"), "{e}");
        let e = shell_config("bw fast", "delay 5ms").unwrap_err();
        assert!(e.starts_with("--up:"), "{e}");
    }
}
