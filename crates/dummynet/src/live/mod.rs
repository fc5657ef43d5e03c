//! Live dummynet: the data plane ([`dummynet_dataplane`]) and the control
//! plane ([`dummynet_daemon`]), re-exported here, with the commands.
//!
//! - [`protocol`]: the requests and replies of the control plane, and the
//!   typed work they become; [`views`] are the JSON forms of `show`.
//! - [`control`]: the Unix socket that carries them, behind `dummynet
//!   ipfw|dnctl` and the `ipfw`/`dnctl` names of the binary.
//! - [`http`]: the HTTP API (`--http`), with [`metrics`] for Prometheus
//!   ([`dummynet_http`]).
//! - [`run`], [`shell`] and [`demo`]: the commands built from those pieces;
//!   [`presets`] are typical links: the typical-links table of the FreeBSD
//!   dummynet article, browser and mobile test tools' profiles, lossy, jittery and trace-driven variants.
//! - [`registry`] and [`ps`]: the daemons' records and `dummynet ps`, which
//!   lists them.
//! - [`args`]: clap's forms of the data plane's options.

pub use dummynet_daemon::shell::{napi as shell_napi, nat as shell_nat, rootless};
pub use dummynet_daemon::{client, control, join, presets, protocol, registry, stats_json, views};
pub use dummynet_dataplane::say::stderr_lost;
pub use dummynet_dataplane::{
    bridge, bridge_xdp, clock, dataplane, floor, held, host, learn_host, local_addrs, netns_target,
    observer, routes, rulelog, sharded, Arrival, Backend, Body, Carrier, LateReading,
};
#[cfg(feature = "http")]
pub use dummynet_http::{self as http, metrics};
#[cfg(not(feature = "http"))]
pub use no_http as http;

/// What a daemon says on stderr, as `eprintln!` would, but a write that
/// fails does not panic and one stderr does not take does not block for
/// long: stderr may be a file on a full disk (ENOSPC) or a pipe nobody
/// reads, and the daemon must go on forwarding and stop when told. Each
/// message waits at most [`SAY_WAIT`] for room; lost ones are counted
/// ([`stderr_lost`]) and `stats` reports them with the first reason.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::live::say_within(
            &format!("{}\n", format_args!($($arg)*)),
            $crate::live::SAY_WAIT,
        )
    };
}

/// [`say!`] for the data plane's thread, which never waits: a message
/// stderr cannot take at once is counted as lost.
#[allow(unused_macros)]
macro_rules! say_now {
    ($($arg:tt)*) => {
        $crate::live::say_within(
            &format!("{}\n", format_args!($($arg)*)),
            std::time::Duration::ZERO,
        )
    };
}

pub mod args;
pub mod demo;
pub mod flood;
#[cfg(not(feature = "http"))]
pub mod no_http;
pub mod ps;
pub mod run;
pub mod shell;

pub use dummynet_daemon::stderr::{say_str, say_to_stderr, say_within, SayToStderr, SAY_WAIT};
