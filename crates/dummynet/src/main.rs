//! `dummynet`: FreeBSD's ipfw + dummynet in userspace.
//!
//! Subcommands:
//! - `sim`: replay pcap captures through the engine on virtual time, offline.
//! - `gen`: write synthetic constant-rate traffic as a pcap.
//! - `bench`: push synthetic packets through the engine, no I/O.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod capture;
mod gen;
mod lang;
mod sim;

#[derive(Debug, Parser)]
#[command(
    name = "dummynet",
    version,
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
    /// Write synthetic constant-rate traffic to a pcap file.
    ///
    /// Deterministic: the same arguments always write the same bytes.
    Gen(gen::GenArgs),
    /// Measure the engine's packet rate on synthetic traffic.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Sim(a) => sim::run(a),
        Cmd::Gen(a) => gen::run(a),
        Cmd::Bench(a) => bench::run(a),
    }
}
