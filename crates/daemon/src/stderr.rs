//! The daemon's words on stderr: what its layers say as `tracing` events
//! ([`dummynet_dataplane::say`]) written a line each, without blocking the
//! data plane on a stderr that takes nothing. The binary installs it; so do
//! the [`crate::embed`] builders when the program has no subscriber.

use std::io::Write as _;

/// How long `say!` waits for stderr to take a message.
pub const SAY_WAIT: std::time::Duration = dummynet_dataplane::say::WAIT;

/// Writes `text` to stderr, waiting at most `wait` for room before each
/// piece of up to 4 KiB (a pipe with room for one takes it without
/// blocking); a failure or a timeout is counted, not raised (`say!`).
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
