//! The dummynet daemon's control plane, as a library: the requests and
//! replies ([`protocol`]) and their JSON views ([`views`], [`stats_json`]),
//! the control socket's server and its client ([`control`], [`client`]),
//! `shell --join` ([`join`]), the daemons' records ([`registry`]), typical
//! links ([`presets`]), the shell's parts ([`shell`]: its link's
//! rules, its path of namespaces, NAT, NAPI, rootless), and why a daemon
//! could not start ([`start`]).
//!
//! It prints nothing: what it has to say goes out as `tracing` events of
//! the data plane's targets ([`dummynet_dataplane::say`]).

/// A line for the daemon's stderr: a `tracing` event of target
/// [`dummynet_dataplane::say::TARGET`].
macro_rules! say {
    ($($arg:tt)*) => {
        tracing::info!(target: "dummynet", "{}", format_args!($($arg)*))
    };
}

pub mod client;
pub mod control;
pub mod join;
pub mod limits;
pub mod presets;
pub mod protocol;
pub mod registry;
pub mod shell;
pub mod start;
pub mod stats_json;
pub mod system;
pub mod views;
