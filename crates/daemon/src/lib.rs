//! The dummynet daemon's control plane, as a library: the requests and
//! replies ([`protocol`]) and their JSON views ([`views`], [`stats_json`]),
//! the control socket's server and its client ([`control`], [`client`]),
//! `shell --join` ([`join`]), the daemons' records ([`registry`]), typical
//! links ([`presets`]), a data plane on threads of its own with its
//! socket and front-ends ([`running`]), the shell's parts ([`shell`]: its
//! link's rules, its path of namespaces, NAT, NAPI, rootless, the link
//! up), why a daemon could not start ([`start`]), and the façade a Rust
//! program embeds the emulator with ([`embed`]).
//!
//! What it has to say goes out as `tracing` events of the data plane's
//! targets ([`dummynet_dataplane::say`]); [`stderr`] writes them, installed
//! by the binary (and by [`embed`]'s builders when nothing else is).

/// A line for the daemon's stderr: a `tracing` event of target
/// [`dummynet_dataplane::say::TARGET`].
macro_rules! say {
    ($($arg:tt)*) => {
        tracing::info!(target: "dummynet", "{}", format_args!($($arg)*))
    };
}

pub mod client;
pub mod control;
pub mod embed;
pub mod join;
pub mod limits;
pub mod presets;
pub mod protocol;
pub mod registry;
pub mod running;
pub mod shell;
pub mod start;
pub mod stats_json;
pub mod stderr;
pub mod system;
pub mod views;
