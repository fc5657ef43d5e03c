//! The tools above the daemon, as libraries the binary's commands drive:
//! experiments in one file ([`experiment`]: a shell's link, built-in
//! traffic, the emulator's events, summaries and figures) and the
//! measuring instruments `dummynet demo` uses instead of ping and iperf3
//! ([`probe`]). Nothing here parses flags or prints: errors and warnings
//! are returned, and the binary says them.

pub mod experiment;
pub mod probe;
