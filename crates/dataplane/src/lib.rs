//! The live data plane: the engine on real time, fed by real packets.
//!
//! - [`dataplane`]: one thread owns the engine, reads every backend, releases
//!   packets when the engine says, and answers control requests between
//!   packets, so a configuration change is applied atomically.
//! - Backends ([`Backend`]): [`bridge`] (two interfaces, AF_PACKET),
//!   [`bridge_xdp`] (the same over AF_XDP, `--xdp`) and [`host`] (this
//!   machine's own traffic, NFQUEUE).
//! - [`sharded`] and [`workers`]: the data plane on several threads.
//! - [`observer`] and [`rulelog`]: the packets' events, to files and to
//!   subscribers, and the rules' `log` lines.
//! - [`netns_target`]: `run --netns`, a container's namespace entered from
//!   outside.
//! - [`floor`]: `dummynet bench --clock`, how precisely this machine can
//!   release a packet at its time, with no packets at all.
//!
//! Nothing here prints: what the data plane has to say goes out as
//! `tracing` events (see [`say`]), which the binary writes to stderr.

use std::os::fd::{BorrowedFd, RawFd};

use dummynet_engine::{Engine, IfaceId, PacketInfo, Payload};

/// A line for the daemon's stderr, as a `tracing` event of target
/// [`say::TARGET`]: its subscriber gives stderr at most [`say::WAIT`] to
/// take it.
macro_rules! say {
    ($($arg:tt)*) => {
        tracing::info!(target: "dummynet", "{}", format_args!($($arg)*))
    };
}

/// [`say!`] for the data plane's thread, which never waits: an event of
/// target [`say::TARGET_NOW`], which stderr must take at once or lose.
macro_rules! say_now {
    ($($arg:tt)*) => {
        tracing::info!(target: "dummynet::now", "{}", format_args!($($arg)*))
    };
}

pub mod body;
pub mod bridge;
pub mod bridge_xdp;
pub mod capture;
pub mod clock;
pub mod dataplane;
pub mod events;
pub mod floor;
pub mod held;
pub mod host;
pub mod lang;
pub mod netns_target;
pub mod observer;
pub mod routes;
pub mod rulelog;
pub mod say;
pub mod sharded;
pub mod workers;

pub use body::PacketBody;

body::bodies! {
    /// An Ethernet frame of the AF_PACKET bridge (or a copy of any bridged one).
    Frame(bridge::EtherFrame),
    /// A packet held by the kernel until we give a verdict (host mode).
    Host(dummynet_io::nfqueue::HostPacket),
    /// A copy of one of the host's own outgoing IP packets (host mode).
    Ip(host::IpCopy),
    /// An Ethernet frame of the AF_XDP bridge, in its UMEM chunk.
    Xdp(bridge_xdp::XdpBody),
}

/// What the engine carries for a live packet: enough to send it on (or
/// give the kernel its verdict) when it leaves.
#[derive(Debug)]
pub struct Carrier {
    /// The backend that read it, set by the data plane: its slot (low 16
    /// bits) and the slot's generation (high 16 bits).
    pub backend: u32,
    /// For a bridged frame after its `in` pass: the interface of the `out`
    /// pass still to run (a FreeBSD bridge calls ipfw once on the way in,
    /// once on the way out).
    pub out_pass: Option<IfaceId>,
    /// The packet's number, set by the data plane as it reads it (the
    /// per-packet log's `id`; with `--workers N`, the reader's number in
    /// the high bits: [`observer::ID_WORKER_SHIFT`]), kept as it is handed
    /// between workers; a copy made by `duplicate` keeps its original's,
    /// and is marked `copy`.
    pub id: u64,
    pub copy: bool,
    /// The data-plane worker that read it (`run --workers N`; 0 with one):
    /// where its `out` pass runs when the rules keep state
    /// ([`crate::workers::Links::out_pass`]).
    pub reader: u16,
    pub body: Body,
}

impl dummynet_engine::two_pass::OutPass for Carrier {
    #[inline]
    fn take_out_pass(&mut self) -> Option<IfaceId> {
        self.out_pass.take()
    }
}

/// ECN marking: an AQM reads and sets the ECN field of the IP header. A
/// bridged frame's IP header follows its Ethernet header (and VLAN tags);
/// a host packet is IP from the start. On a GSO super-packet the kernel
/// copies the marked header into every segment. A host packet the kernel
/// will not take back modified (an unfinished checksum) is not marked, and
/// the AQM drops it instead.
impl Payload for Carrier {
    #[inline]
    fn frame_bytes(&self) -> Option<&[u8]> {
        self.body.frame_bytes()
    }

    #[inline]
    fn ip_bytes(&self) -> Option<&[u8]> {
        self.body.ip_bytes()
    }

    #[inline]
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.body.ip_bytes_mut()
    }

    /// `duplicate`: the copy its body makes ([`PacketBody::duplicate`]),
    /// with the original's number, marked a copy.
    fn duplicate(&self) -> Option<Self> {
        Some(Carrier {
            backend: self.backend,
            out_pass: self.out_pass,
            id: self.id,
            copy: true,
            reader: self.reader,
            body: self.body.duplicate()?,
        })
    }
}

/// The addresses of this network namespace's interfaces: what `me` and
/// `me6` match. Read when the daemon starts and before each command it
/// applies (a netlink dump: never per packet).
pub fn local_addrs() -> Vec<std::net::IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut out: Vec<std::net::IpAddr> = addrs
        .filter_map(|a| a.address)
        .filter_map(|sa| {
            if let Some(v4) = sa.as_sockaddr_in() {
                Some(std::net::IpAddr::V4(v4.ip()))
            } else {
                sa.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip()))
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What the rules know of the host: its addresses (`me`) and routes
/// (`verrevpath`...), read now, in the calling thread's namespace. Done
/// when the daemon starts and before each command, never per packet.
pub fn learn_host<P: Payload>(engine: &mut Engine<P>) {
    engine.set_local_addrs(&local_addrs());
    engine.set_routes(routes::host_routes().as_deref());
}

/// A packet a backend read, for the engine.
pub struct Arrival {
    pub info: PacketInfo,
    pub carrier: Carrier,
    /// When the kernel received it (`CLOCK_REALTIME`, ns since the epoch),
    /// or 0 when the backend cannot say: it then arrived when it was read.
    pub stamp_ns: u64,
}

/// A backend whose arrivals may wait in the kernel to be read late
/// ([`Backend::late_reading`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateReading {
    /// Frames that can wait unread before the kernel drops any.
    pub room: usize,
    /// The interfaces arrivals come `in` on (the engine says how long
    /// packets from each must stay inside: `Engine::least_transit`).
    pub ifaces: Vec<IfaceId>,
}

/// A packet source and sink around the engine.
pub trait Backend: Send {
    /// One line for logs and `dummynet stats`.
    fn describe(&self) -> String;
    /// Descriptors that become readable when packets wait.
    fn fds(&self) -> Vec<BorrowedFd<'_>>;
    /// `fd`, one of [`Backend::fds`], polled with an error or hung up
    /// (`POLLERR`, `POLLHUP`): `poll` reports that at once, every time, so
    /// the backend must clear it or leave the descriptor out of `fds`, or
    /// the data plane spins. (A bridge port whose interface goes down.)
    fn fd_failed(&mut self, _fd: RawFd) {}
    /// `Some(why)` when the backend cannot go on and the daemon should
    /// stop with an error (a bridge port deleted under
    /// `--exit-on-link-loss`). Asked once a turn.
    fn failure(&self) -> Option<String> {
        None
    }
    /// Attached to a running data plane ([`dataplane::RequestKind::Attach`]):
    /// the backend learns the engine's names for its interfaces. On the
    /// data-plane thread.
    fn attached(&mut self, _engine: &mut Engine<Carrier>) {}
    /// Reads what is waiting (a batch at most). IP packets go to `arrivals`
    /// with what the classifier needs; anything else is forwarded (or given
    /// its verdict) by the backend itself. True when it stopped at its
    /// batch, so more may be waiting.
    fn receive(&mut self, engine: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool;
    /// `Some` when every arrival carries the kernel's receive time, so the
    /// data plane may leave arrivals in the kernel a while and run each at
    /// its own time when it reads it; `None` (the default) when arrivals
    /// must be read as they come.
    fn late_reading(&self) -> Option<LateReading> {
        None
    }
    /// The engine's configuration changed (or the data plane just
    /// started): a backend whose kernel setup follows it looks at it here.
    /// On the data-plane thread, between packets: anything slow goes to
    /// another thread.
    fn reconfigured(&mut self, _engine: &Engine<Carrier>) {}
    /// The engine decided: send the packet on, or discard it.
    fn complete(&mut self, carrier: Carrier, deliver: bool);
    /// Hands batched frames or verdicts to the kernel.
    fn flush(&mut self);
    /// How many packets the engine delivered ([`Backend::complete`] with
    /// `deliver`) the backend could not send since it was last asked: the
    /// data plane moves them to the engine's `tx-failed` drops.
    fn take_unsent(&mut self) -> u64 {
        0
    }
    /// True while the backend holds frames a port refused for lack of room
    /// ([`held`]): the data plane then turns at least every
    /// [`held::RETRY`] ns so that [`Backend::flush`] tries them again.
    fn holding(&self) -> bool {
        false
    }
    /// The daemon is stopping: what is still held is dropped (and counted
    /// as unsent).
    fn drop_held(&mut self) {}
    /// Counters, one `name value` pair per entry.
    fn stats(&mut self) -> Vec<(String, u64)>;
    /// First step of a shutdown: stop taking packets from the system (the
    /// host backend removes its iptables rules) so nothing is black-holed.
    fn stop_intercepting(&mut self) {}
}
