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

use std::io::Write as _;

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
pub mod probe;
pub mod ps;
pub mod run;
pub mod shell;

/// How long [`say!`] waits for stderr to take a message.
pub const SAY_WAIT: std::time::Duration = dummynet_dataplane::say::WAIT;

/// Writes `text` to stderr, waiting at most `wait` for room before each
/// piece of up to 4 KiB (a pipe with room for one takes it without
/// blocking); a failure or a timeout is counted, not raised ([`say!`]).
pub fn say_within(text: &str, wait: std::time::Duration) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd as _;
    let lost_one = dummynet_dataplane::say::lost_one;
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    let mut out = std::io::stderr().lock();
    for piece in text.as_bytes().chunks(4096) {
        let ready = {
            let mut fds = [PollFd::new(out.as_fd(), PollFlags::POLLOUT)];
            poll(&mut fds, PollTimeout::from(ms))
        };
        // Ready, or poll cannot tell (then the write says).
        if let Ok(0) = ready {
            lost_one(format!(
                "stderr took nothing for {ms} ms (a full pipe nobody reads?)"
            ));
            return;
        }
        if let Err(e) = out.write_all(piece) {
            lost_one(e.to_string());
            return;
        }
    }
}

/// [`say_within`] with [`SAY_WAIT`].
pub fn say_str(text: &str) {
    say_within(text, SAY_WAIT);
}

/// Writes the data plane's `tracing` events to stderr as [`say_within`]
/// does, each on a line of its own: those of target
/// [`dummynet_dataplane::say::TARGET_NOW`] without waiting, the others
/// waiting at most [`SAY_WAIT`]. Installed once, by the binary (and by
/// an embedder's [`crate::embed`] builders when none is).
pub struct SayToStderr;

/// The text of an event's `message` field.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for SayToStderr {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        let target = meta.target();
        meta.is_event()
            && (target == dummynet_dataplane::say::TARGET
                || target == dummynet_dataplane::say::TARGET_NOW)
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = Message(String::new());
        event.record(&mut text);
        text.0.push('\n');
        let wait = if event.metadata().target() == dummynet_dataplane::say::TARGET_NOW {
            std::time::Duration::ZERO
        } else {
            SAY_WAIT
        };
        say_within(&text.0, wait);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Installs [`SayToStderr`] as the process's subscriber, unless one is
/// already there (an embedder's own).
pub fn say_to_stderr() {
    let _ = tracing::subscriber::set_global_default(SayToStderr);
}
