//! The command line's options for the library crates' types: clap's forms
//! of what `dummynet-dataplane` and `dummynet-daemon` take as plain values,
//! and their conversions.

use std::path::PathBuf;

use dummynet_daemon::shell::napi::Napi;
use dummynet_daemon::shell::nat::Nat;
use dummynet_daemon::shell::path::Gso;
use dummynet_daemon::shell::rootless::UserNet;
use dummynet_dataplane::bridge_xdp::AttachChoice;
use dummynet_dataplane::dataplane::Precision;
use dummynet_dataplane::observer;

/// How exactly the data plane releases departures, and what it spends on
/// it (`--precision`, [`Precision`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PrecisionArg {
    /// Sleep on the kernel's timer up to each departure, aimed so that the
    /// median wake-up lands on time, and spin only what is left (at most
    /// 50 µs); no polling after arrivals, and arrivals that carry the
    /// kernel's receive time wait in the kernel until the next departure
    /// whenever every one stays inside at least 1 ms. Departures leave
    /// within the timer's jitter (tens of µs on a VM) for a small share of
    /// a core: the default.
    #[default]
    Timer,
    /// Spin the last 300 µs (or `--spin-us`) before every departure,
    /// release it ahead and hand it over on the nanosecond, and poll the
    /// ports a while after every arrival: about a microsecond late, at the
    /// cost of a core whenever departures are closer together than the
    /// spin.
    Max,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Precision {
        match p {
            PrecisionArg::Timer => Precision::Timer,
            PrecisionArg::Max => Precision::Max,
        }
    }
}

/// `--xdp-attach`: where the XDP program runs ([`AttachChoice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachArg {
    /// Generic XDP if either port is a veth, the driver's XDP otherwise.
    Auto,
    /// The driver's XDP (zero-copy where the driver has it).
    Driver,
    /// The kernel's generic XDP, with super-packets through AF_PACKET.
    Generic,
}

impl From<AttachArg> for AttachChoice {
    fn from(a: AttachArg) -> AttachChoice {
        match a {
            AttachArg::Auto => AttachChoice::Auto,
            AttachArg::Driver => AttachChoice::Driver,
            AttachArg::Generic => AttachChoice::Generic,
        }
    }
}

/// Which userspace network stack connects a rootless shell to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum UserNetArg {
    /// pasta if installed, else slirp4netns, else none (and say so).
    #[default]
    Auto,
    Pasta,
    Slirp4netns,
    /// The command reaches its peer only.
    None,
}

impl From<UserNetArg> for UserNet {
    fn from(a: UserNetArg) -> UserNet {
        match a {
            UserNetArg::Auto => UserNet::Auto,
            UserNetArg::Pasta => UserNet::Pasta,
            UserNetArg::Slirp4netns => UserNet::Slirp4netns,
            UserNetArg::None => UserNet::None,
        }
    }
}

/// How (and whether) the shell lets its command's traffic out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NatArg {
    /// `nft` if installed, else `iptables`/`ip6tables`.
    #[default]
    Auto,
    Nft,
    Iptables,
    /// No forwarding and no NAT: the command reaches this namespace's
    /// addresses (its peer) and nothing further.
    Off,
}

impl From<NatArg> for Nat {
    fn from(a: NatArg) -> Nat {
        match a {
            NatArg::Auto => Nat::Auto,
            NatArg::Nft => Nat::Nft,
            NatArg::Iptables => Nat::Iptables,
            NatArg::Off => Nat::Off,
        }
    }
}

/// Who runs a link's receiving stacks (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NapiArg {
    /// The kernel's NAPI threads: GRO on and threaded NAPI on the ends,
    /// TSO off on the emulator's ports while the ends segment.
    #[default]
    Threaded,
    /// The emulator's thread, inside its sends: the ends as the kernel
    /// makes them (GRO off, TSO on, NAPI not threaded).
    Inline,
}

impl From<NapiArg> for Napi {
    fn from(a: NapiArg) -> Napi {
        match a {
            NapiArg::Threaded => Napi::Threaded,
            NapiArg::Inline => Napi::Inline,
        }
    }
}

/// Whether GSO super-packets cross the shell whole (see [`ShellArgs::gso`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum GsoArg {
    /// While the engine says they fare as their segments would
    /// (`Engine::only_delays`), following its configuration.
    #[default]
    Auto,
    On,
    Off,
}

impl From<GsoArg> for Gso {
    fn from(a: GsoArg) -> Gso {
        match a {
            GsoArg::Auto => Gso::Auto,
            GsoArg::On => Gso::On,
            GsoArg::Off => Gso::Off,
        }
    }
}

/// The observer options of `run` and `shell`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ObserveArgs {
    /// Write one JSON line per packet event here (arrival, forward,
    /// departure, drop; the schema of `sim --log`), after a first line with
    /// the wall-clock time of `t_ns` 0. Written off the data plane: events
    /// it cannot keep up with are counted (`dummynet stats`), not waited for.
    #[arg(long, value_name = "FILE.jsonl")]
    pub log: Option<PathBuf>,
    /// Write what entered the emulator here (pcap, nanosecond stamps: the
    /// kernel's receive time), each frame cut to --capture-snaplen bytes.
    #[arg(long, value_name = "FILE.pcap")]
    pub capture_in: Option<PathBuf>,
    /// Write what left the emulator here (pcap, nanosecond stamps: when it
    /// was released), each frame cut to --capture-snaplen bytes.
    #[arg(long, value_name = "FILE.pcap")]
    pub capture_out: Option<PathBuf>,
    /// Bytes of each frame the captures keep (the data plane copies only
    /// those).
    #[arg(long, value_name = "BYTES", default_value_t = observer::DEFAULT_SNAPLEN,
          value_parser = clap::value_parser!(u32).range(14..=65535))]
    pub capture_snaplen: u32,
    /// Write a mahimahi link log of one pipe here (what mm-link's --uplink-log
    /// writes, for mm-throughput-graph and mm-delay-graph): `# base
    /// timestamp: T` (the start, ms since the Unix epoch), then `T + BYTES`
    /// for a packet entering the pipe, `T - BYTES DELAY` for one leaving it
    /// (DELAY in ms since it entered), `T # BYTES` for a delivery
    /// opportunity of a trace-driven pipe; T in ms.
    #[arg(long, value_name = "FILE")]
    pub mm_log: Option<PathBuf>,
    /// The pipe --mm-log follows (default: the first pipe the configuration
    /// makes).
    #[arg(long, value_name = "N", requires = "mm_log")]
    pub mm_log_pipe: Option<u32>,
}

impl ObserveArgs {
    /// True if any file is asked for.
    pub fn any(&self) -> bool {
        self.log.is_some()
            || self.capture_in.is_some()
            || self.capture_out.is_some()
            || self.mm_log.is_some()
    }

    /// What the observer needs, with `--mm-log-pipe` defaulting to the
    /// first pipe `config` makes; `linktype` is the captures' (1: Ethernet
    /// frames of a bridge; 101: a host's IP packets).
    pub fn options(
        &self,
        config: &[(usize, dummynet_engine::Command)],
        linktype: u32,
    ) -> Result<observer::ObserveOptions, String> {
        let mm_pipe = match (&self.mm_log, self.mm_log_pipe) {
            (None, _) => None,
            (Some(_), Some(n)) => Some(n),
            (Some(_), None) => Some(
                config
                    .iter()
                    .find_map(|(_, c)| match c {
                        dummynet_engine::Command::ConfigPipe(n, _) => Some(*n),
                        _ => None,
                    })
                    .ok_or(
                        "--mm-log follows a pipe, and the configuration makes none: \
                         name the one it will with --mm-log-pipe N",
                    )?,
            ),
        };
        Ok(observer::ObserveOptions {
            log: self.log.clone(),
            capture_in: self.capture_in.clone(),
            capture_out: self.capture_out.clone(),
            snaplen: self.capture_snaplen,
            mm_log: self.mm_log.clone().zip(mm_pipe),
            linktype,
            buffer: observer::DEFAULT_BUFFER,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_dataplane::dataplane::{DEFAULT_SPIN, LATE_MIN_TRANSIT, TIMER_MAX_SPIN};

    /// `--help` states the numbers as they are (clap shows the variants'
    /// documentation, where a link to a constant would print as its name).
    #[test]
    fn the_precision_help_says_what_the_constants_are() {
        use clap::ValueEnum;
        let help = |p: PrecisionArg| {
            p.to_possible_value()
                .and_then(|v| v.get_help().map(|h| h.to_string()))
                .unwrap_or_default()
        };
        let timer = help(PrecisionArg::Timer);
        assert!(
            timer.contains(&format!("at most {} µs", TIMER_MAX_SPIN / 1_000)),
            "{timer}"
        );
        assert!(timer.contains(&format!("at least {} ms", LATE_MIN_TRANSIT / 1_000_000)));
        let max = help(PrecisionArg::Max);
        assert!(
            max.contains(&format!("last {} µs", DEFAULT_SPIN / 1_000)),
            "{max}"
        );
        assert!(!timer.contains('[') && !max.contains('['));
    }
}
