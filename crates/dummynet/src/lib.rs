//! The `dummynet` binary's code, as a library so that the fuzz targets
//! (`fuzz/`, a crate of its own) can reach the decoders of untrusted input
//! that live here: captures ([`capture::parse`]) and control requests
//! ([`live::control`]). `src/main.rs` is only the command line on top.
//!
//! It is also the library a Rust program embeds the emulator with: the
//! names at the crate root ([`Shell`], [`Bridge`], the [`Emulator`] they
//! control, [`Error`]), from [`embed`] (the daemon crate's: a program that
//! needs no more can depend on `dummynet-daemon` alone, with no HTTP or
//! plotting stack). Those are the API meant for use;
//! the modules beyond are public because the binary and the fuzz targets
//! use them, and they change with the binary.

pub use dummynet_dataplane::{capture, events, lang, workers};
pub use dummynet_sim::{bench, gen, plot, sim, tracegen};

pub use dummynet_daemon::embed;
pub mod experiment;
pub mod install;
pub mod live;
pub mod manuals;
pub mod tc;

pub use embed::{
    Bridge, BridgeBuilder, Emulator, Error, ErrorAt, ErrorKind, EventFilter, Napi, ObserverStats,
    Pipe, Reply, Report, Shell, ShellBuilder, StartFailure, Subscription,
};
