//! `dummynet`: FreeBSD's ipfw + dummynet in userspace.
//!
//! Subcommands:
//! - `sim`: replay pcap captures through the engine on virtual time, offline.
//! - `plot`: draw throughput, delay, queue and drops from sim's event log.
//! - `gen`: write synthetic constant-rate traffic as a pcap.
//! - `gen-trace`: write a synthetic mahimahi trace for `trace FILE` pipes.
//! - `bench`: push synthetic packets through the engine, no I/O.
//! - `run`: the live daemon (bridge or host mode) with its control socket.
//! - `shell`: run a command behind an emulated link.
//! - `ps`: list the daemons on this machine and what each shapes.
//! - `ipfw` / `dnctl`: talk to a running daemon; the binary also answers to
//!   those names, so seed scripts run verbatim.
//! - `tc`: tc(8)'s netem and tbf qdiscs through dummynet (also as `tc`).

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

// Large blocks (the engine's per-flow tables at high flow counts) on huge
// pages where the kernel wants to be asked: see dummynet_io::hugealloc.
#[global_allocator]
static ALLOC: dummynet_io::hugealloc::HugePageAlloc = dummynet_io::hugealloc::HugePageAlloc;

// The modules are the library's (src/lib.rs), shared with the fuzz targets.
use dummynet::{bench, experiment, gen, install, live, plot, sim, tc, tracegen};

#[derive(Debug, Parser)]
#[command(
    name = "dummynet",
    version = env!("DUMMYNET_VERSION"),
    about = "ipfw + dummynet in userspace: pipes, queues and schedulers on exact time"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Replay captures through an ipfw/dummynet configuration on virtual time.
    ///
    /// Time zero is the earliest packet's capture timestamp, and each packet
    /// enters at its own. OUT.pcap gets every delivered frame in departure
    /// order, stamped with its absolute departure time; the log's `t_ns` are
    /// nanoseconds since time zero and its `id`s number packets in arrival
    /// order. Frames that are not IP pass through untouched; IP frames that
    /// cannot be parsed are dropped as "malformed". The same inputs and seed
    /// always give the same bytes.
    Sim(sim::SimArgs),
    /// Draw throughput, delay, queue and drops from an event log (sim --log).
    ///
    /// mahimahi's graphs: delivered and arriving bits per window against the
    /// link's capacity, each packet's delay with the 95th percentile per
    /// window, packets and bytes inside, drops per window by reason; as
    /// stacked panels sharing the time axis, in SVG or PNG. Prints one
    /// summary line: mean throughput, capacity, delay p50/p95/max, drops.
    Plot(plot::PlotArgs),
    /// Write synthetic constant-rate traffic to a pcap file.
    ///
    /// Deterministic: the same arguments always write the same bytes.
    Gen(gen::GenArgs),
    /// Write a synthetic mahimahi trace (delivery opportunities, one
    /// millisecond per line) for `pipe N config trace FILE`.
    ///
    /// Deterministic: the same arguments always write the same bytes.
    GenTrace(tracegen::GenTraceArgs),
    /// Measure the engine's packet rate on synthetic traffic.
    Bench(bench::BenchArgs),
    /// Two namespaces, the emulator between them with a preset (LTE by
    /// default), measured by built-in probes: configured vs measured.
    Demo(live::demo::DemoArgs),
    /// Run the live emulator: bridge two interfaces or shape this host.
    Run(live::run::RunArgs),
    /// Run a command behind an emulated link, in its own network namespace.
    ///
    /// The command reaches this host at $DUMMYNET_PEER ($DUMMYNET_PEER6 over
    /// IPv6) and, through forwarding and NAT that the shell sets up here and
    /// removes when it ends (--nat), whatever this host reaches. `dummynet`
    /// is on its PATH, and `dummynet ipfw ...` inside talks to this shell's
    /// emulator ($DUMMYNET_SOCKET). The command dies with the shell.
    Shell(live::shell::ShellArgs),
    /// Run an experiment file (TOML): flows through a shell's link, measured
    ///
    /// TCP flows with each sender's TCP_INFO sampled, pings and UDP, the
    /// emulator's own packet events on the same clock; CSVs, a JSON summary
    /// and figures in a directory per run, a sweep's runs compared (root).
    Experiment(experiment::ExperimentArgs),
    /// Send a bounded flood of UDP frames out of an interface (live benchmarks).
    Flood(live::flood::FloodArgs),
    /// List the built-in link presets (the typical-links table of the
    /// FreeBSD dummynet article, browser and mobile test tools' profiles,
    /// lossy and traced links).
    Presets {
        /// Print them as JSON, with each direction's pipe options.
        #[arg(long)]
        json: bool,
        /// Write the trace presets' trace files into DIR and name them there
        /// in the options (ready for `dummynet shell --up/--down`).
        #[arg(long, value_name = "DIR")]
        traces: Option<std::path::PathBuf>,
    },
    /// Copy this binary to a directory on the PATH with `ipfw` and `dnctl`
    /// links, and its man pages and shell completions beside it.
    Install(install::InstallArgs),
    /// List the dummynet daemons on this machine and what each shapes: PID,
    /// mode, network namespace, control socket, HTTP address, uptime.
    Ps(live::ps::PsArgs),
    /// Counters and release lateness (p50/p99/max) of a running daemon.
    Stats {
        /// The daemon's control socket (default: $DUMMYNET_SOCKET or
        /// /run/dummynet.sock).
        #[arg(long, value_name = "PATH")]
        socket: Option<std::path::PathBuf>,
        /// One JSON object instead of text (its field names: the book,
        /// "Live", `stats --json`).
        #[arg(long)]
        json: bool,
    },
    /// Send an ipfw command to a running daemon (`dummynet ipfw pipe 1 show`).
    #[command(disable_help_flag = true)]
    Ipfw {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Send a dnctl command to a running daemon (`dummynet dnctl pipe show`).
    #[command(disable_help_flag = true)]
    Dnctl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// tc(8)'s netem, tbf and fq_codel qdiscs, carried out by dummynet.
    ///
    /// `tc qdisc add|change|replace|del|show dev IF root netem|tbf|fq_codel
    /// ...` on IF's egress, in this network namespace (or `-n NAME`): a
    /// daemon per interface with one pipe, stopped by `del`. The rest is
    /// handed to the system's tc. The binary also answers to the name `tc`
    /// (`dummynet install --tc-shim DIR`).
    #[command(disable_help_flag = true)]
    Tc {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    // The data plane's messages are events: written to stderr as before.
    live::say_to_stderr();
    // Installed as `ipfw` or `dnctl` (links to this binary): be that tool.
    let mut argv = std::env::args();
    let name = argv
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    if name == "ipfw" || name == "dnctl" {
        return live::client::ipfw(&name, argv.collect());
    }
    if name == "tc" {
        return tc::main(argv.collect());
    }
    match Cli::parse().command {
        Cmd::Sim(a) => sim::run(a),
        Cmd::Plot(a) => plot::run(a),
        Cmd::Gen(a) => gen::run(a),
        Cmd::GenTrace(a) => tracegen::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Demo(a) => live::demo::run(a),
        Cmd::Run(a) => live::run::run(a),
        Cmd::Shell(a) => live::shell::run(a),
        Cmd::Experiment(a) => experiment::main(a),
        Cmd::Flood(a) => live::flood::run(a),
        Cmd::Presets { json, traces } => live::presets::print(json, traces.as_deref()),
        Cmd::Ps(a) => live::ps::run(a),
        Cmd::Stats { socket, json } => live::client::stats(socket, json),
        Cmd::Install(a) => install::run(a, &Cli::command()),
        Cmd::Ipfw { args } => live::client::ipfw("ipfw", args),
        Cmd::Dnctl { args } => live::client::ipfw("dnctl", args),
        Cmd::Tc { args } => tc::main(args),
    }
}
