//! Live dummynet: the engine on real time, fed by real packets.
//!
//! - [`dataplane`]: one thread owns the engine, reads every backend, releases
//!   packets when the engine says, and answers control requests between
//!   packets, so a configuration change is applied atomically.
//! - Backends ([`Backend`]): [`bridge`] (two interfaces, AF_PACKET) and
//!   [`host`] (this machine's own traffic, NFQUEUE).
//! - [`control`]: the Unix-socket protocol behind `dummynet ipfw|dnctl` and
//!   the `ipfw`/`dnctl` names of the binary.
//! - [`run`], [`shell`] and [`demo`]: the commands built from those pieces;
//!   [`presets`] are seed 000's table of typical links.

use std::os::fd::BorrowedFd;

use dummynet_engine::{Engine, IfaceId, PacketInfo, Payload};
use dummynet_io::afpacket::VnetHdr;
use dummynet_io::nfqueue::HostPacket;

pub mod bridge;
pub mod client;
pub mod clock;
pub mod control;
pub mod dataplane;
pub mod demo;
pub mod flood;
pub mod host;
pub mod presets;
pub mod probe;
pub mod run;
pub mod shell;

/// What the engine carries for a live packet: enough to send it on (or
/// give the kernel its verdict) when it leaves.
#[derive(Debug)]
pub struct Carrier {
    /// Index of the backend that read it, set by the data plane.
    pub backend: u8,
    /// For a bridged frame after its `in` pass: the interface of the `out`
    /// pass still to run (a FreeBSD bridge calls ipfw once on the way in,
    /// once on the way out).
    pub out_pass: Option<IfaceId>,
    pub body: Body,
}

#[derive(Debug)]
pub enum Body {
    /// An Ethernet frame to transmit on port `port` of a bridge.
    Frame {
        buf: Vec<u8>,
        vnet: Option<VnetHdr>,
        port: u8,
    },
    /// A packet held by the kernel until we give a verdict.
    Host(HostPacket),
}

// ECN marking (a later AQM feature) will expose the IP bytes here.
impl Payload for Carrier {}

/// A packet source and sink around the engine.
pub trait Backend: Send {
    /// One line for logs and `dummynet stats`.
    fn describe(&self) -> String;
    /// Descriptors that become readable when packets wait.
    fn fds(&self) -> Vec<BorrowedFd<'_>>;
    /// Reads what is waiting (a batch at most). IP packets go to `arrivals`
    /// with what the classifier needs; anything else is forwarded (or given
    /// its verdict) by the backend itself.
    fn receive(&mut self, engine: &mut Engine<Carrier>, arrivals: &mut Vec<(PacketInfo, Carrier)>);
    /// The engine decided: send the packet on, or discard it.
    fn complete(&mut self, carrier: Carrier, deliver: bool);
    /// Hands batched frames or verdicts to the kernel.
    fn flush(&mut self);
    /// Counters, one `name value` pair per entry.
    fn stats(&mut self) -> Vec<(String, u64)>;
    /// First step of a shutdown: stop taking packets from the system (the
    /// host backend removes its iptables rules) so nothing is black-holed.
    fn stop_intercepting(&mut self) {}
}
