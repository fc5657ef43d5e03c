//! Bridge mode over AF_XDP (`dummynet run --bridge A B --xdp`): the same
//! two passes through the rules as [`super::bridge`], with frames read and
//! sent through AF_XDP sockets that share one UMEM
//! ([`dummynet_io::xdp::XdpPorts`]).
//!
//! A frame stays in the UMEM chunk it arrived in from the moment it is
//! read until it leaves by the other port (or is dropped): the engine
//! holds it as [`Body::Xdp`] ([`XdpBody`]), so a pipe's delay line holds chunks, not
//! copies. When every chunk is held, the kernel drops what arrives for
//! want of one and counts it (`IF.rx_fill_ring_empty` in `dummynet
//! stats`); the bridge never waits for a chunk. The only copies are the
//! rare `duplicate`s, made on the heap and put in a chunk when sent.
//!
//! Frames that are not IP (ARP, IPv6 neighbour discovery is IP) cross
//! without the engine, as with the AF_PACKET bridge: the XDP program
//! redirects every frame of the ports' queue that fits a chunk to the
//! bridge.
//!
//! On a veth ([`AttachChoice::Auto`]) the program runs in generic XDP, so
//! that the veth's peer keeps its GSO (driver XDP on a veth turns it off,
//! and TCP then crosses 1500 bytes at a time), and it passes TCP and
//! frames longer than a chunk to the kernel, where the AF_PACKET bridge
//! ([`super::bridge`]), opened beside this one on the same ports, reads
//! super-packets whole; both feed the same engine, so a pipe sees every
//! frame and the books count both. TCP goes that way whole because a flow
//! split between two rings is reordered (they are read one after the
//! other), which TCP takes for loss.
//!
//! Not done here, unlike the AF_PACKET bridge: following a port whose
//! interface is deleted (the daemon stops with an error instead, found
//! by a look every [`LINK_LOOK`]; a port that is only down keeps what is
//! due out of it on its tx ring, and what does not fit is dropped and
//! counted as `tx_failed`), super-packets through AF_XDP itself (the
//! AF_PACKET bridge beside it carries them, in generic XDP), and reading
//! late by kernel receive times (AF_XDP gives none).

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Instant;

use dummynet_engine::wire::{self, LinkType, WireError};
use dummynet_engine::{Direction, Engine, IfaceId, PacketInfo};
use dummynet_io::xdp::{Attach, Mode, XdpError, XdpFrame, XdpOptions, XdpPorts};

use super::bridge::{ip_offset, EtherFrame, LINK_LOOK};
use super::{Arrival, Backend, Body, Carrier, PacketBody};

/// An Ethernet frame of the AF_XDP bridge, still in the UMEM chunk it
/// arrived in, to transmit on port `port`.
#[derive(Debug)]
pub struct XdpBody {
    pub frame: XdpFrame,
    pub port: u8,
}

impl PacketBody for XdpBody {
    #[inline]
    fn frame_bytes(&self) -> Option<&[u8]> {
        Some(&self.frame)
    }
    #[inline]
    fn ip_bytes(&self) -> Option<&[u8]> {
        self.frame.get(ip_offset(&self.frame)?..)
    }
    #[inline]
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        let at = ip_offset(&self.frame)?;
        self.frame.get_mut(at..)
    }
    /// Made on the heap (put in a UMEM chunk when it is sent).
    fn duplicate(&self) -> Option<Body> {
        Some(Body::Frame(EtherFrame {
            buf: self.frame.to_vec(),
            vnet: None,
            port: self.port,
        }))
    }
    #[inline]
    fn wire_bytes(&self) -> &[u8] {
        &self.frame
    }
}

/// Frames read per port per turn of the data plane.
const RX_BATCH: usize = 64;

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    non_ip: u64,
    malformed: u64,
    /// Frames the engine delivered that found no room on the tx ring, or
    /// (a duplicate) no free chunk.
    tx_failed: u64,
}

/// `--xdp-attach`: where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachChoice {
    /// Generic XDP if either port is a veth, the driver's XDP otherwise.
    Auto,
    /// The driver's XDP (zero-copy where the driver has it).
    Driver,
    /// The kernel's generic XDP, with super-packets through AF_PACKET.
    Generic,
}

impl AttachChoice {
    /// Where to attach on ports `a` and `b` (looked up in the calling
    /// thread's network namespace), and why, for the start-up line.
    pub fn resolve(self, a: &str, b: &str) -> (Attach, &'static str) {
        match self {
            AttachChoice::Driver => (Attach::Driver, "--xdp-attach driver"),
            AttachChoice::Generic => (Attach::Generic, "--xdp-attach generic"),
            AttachChoice::Auto => {
                let veth = [a, b]
                    .iter()
                    .any(|i| dummynet_io::xdp::driver_name(i).as_deref() == Some("veth"));
                if veth {
                    (
                        Attach::Generic,
                        "a veth port: driver XDP there would make the peer segment TCP",
                    )
                } else {
                    (Attach::Driver, "no veth port")
                }
            }
        }
    }
}

/// The UMEM and rings for `--xdp-frames frames`: rings of a quarter of
/// the frames, 4096 slots at most (a flood outruns 2048 in bursts).
pub fn options(frames: u32) -> XdpOptions {
    XdpOptions {
        frames,
        ring: (frames / 4).clamp(64, 4096),
        ..XdpOptions::default()
    }
}

/// `--bridge A B --xdp`'s backends, opened on the data-plane thread: the
/// AF_XDP bridge, attached as `attach` says; in generic XDP, with the
/// AF_PACKET bridge (`afpacket`) beside it on the same ports, reading the
/// frames too long for a chunk (GSO super-packets) that the XDP program
/// passes to the kernel. Where AF_XDP cannot serve the ports, the
/// AF_PACKET bridge alone, after a line saying why.
pub fn open_or<F, E>(
    a: String,
    b: String,
    mut opts: XdpOptions,
    attach: AttachChoice,
    afpacket: F,
) -> impl FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, E> + Send + 'static
where
    F: FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, E> + Send + 'static,
{
    move |e| {
        let (how, why) = attach.resolve(&a, &b);
        opts.attach = how;
        match XdpBridge::open(&a, &b, e, &opts) {
            Ok(bridge) if bridge.mode().driver => {
                say!("dummynet: {}", bridge.describe());
                if dummynet_io::xdp::driver_name(&a).as_deref() == Some("veth")
                    || dummynet_io::xdp::driver_name(&b).as_deref() == Some("veth")
                {
                    say!("dummynet: --xdp: {}", VETH_DRIVER_COST);
                }
                Ok(vec![Box::new(bridge) as Box<dyn Backend>])
            }
            Ok(mut bridge) => {
                say!(
                    "dummynet: {} ({why}); frames longer than a chunk (GSO super-packets) \
                     cross through the AF_PACKET bridge beside it",
                    bridge.describe()
                );
                // The AF_PACKET bridge warns of rules that take both
                // passes: once is enough.
                bridge.told_both_passes = true;
                let mut backends = vec![Box::new(bridge) as Box<dyn Backend>];
                backends.extend(afpacket(e)?);
                Ok(backends)
            }
            Err(why) => {
                say!(
                    "dummynet: --xdp: AF_XDP cannot be used here ({why}); falling back to the \
                     AF_PACKET bridge"
                );
                afpacket(e)
            }
        }
    }
}

/// What the driver's XDP costs on a veth, said at start when it is asked
/// for there.
pub const VETH_DRIVER_COST: &str = "driver XDP on a veth turns off GSO on its peer (the \
    kernel's veth does, to fit frames into pages), so TCP from the far side arrives in \
    MTU-sized segments, each a trip through the bridge: expect a few Gbit/s of TCP, not the \
    tens the kernel's bridge moves (--xdp-attach generic, the default on veth, keeps GSO)";

pub struct XdpBridge {
    ports: XdpPorts,
    ifaces: [IfaceId; 2],
    rx: Vec<XdpFrame>,
    counters: Counters,
    unsent: u64,
    told_both_passes: bool,
    told_tx_failed: bool,
    failure: Option<String>,
    /// When the ports' interfaces are next looked at.
    next_look: Instant,
}

impl XdpBridge {
    /// Opens both interfaces (in the calling thread's network namespace).
    pub fn open(
        a: &str,
        b: &str,
        engine: &mut Engine<Carrier>,
        opts: &XdpOptions,
    ) -> Result<XdpBridge, XdpError> {
        let ports = XdpPorts::open(a, b, opts)?;
        Ok(XdpBridge {
            ports,
            ifaces: [engine.iface(a), engine.iface(b)],
            rx: Vec::with_capacity(RX_BATCH),
            counters: Counters::default(),
            unsent: 0,
            told_both_passes: false,
            told_tx_failed: false,
            failure: None,
            next_look: Instant::now() + LINK_LOOK,
        })
    }

    pub fn mode(&self) -> Mode {
        self.ports.mode()
    }

    /// Every [`LINK_LOOK`], whether both interfaces are still there: an
    /// AF_XDP socket whose interface is deleted does not poll with an
    /// error, it just goes quiet.
    fn look_at_links(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let now = Instant::now();
        if now < self.next_look {
            return;
        }
        self.next_look = now + LINK_LOOK;
        if let Some(side) = (0..2).find(|&s| !self.ports.link_present(s)) {
            self.failure = Some(format!(
                "bridge port {} was deleted (or replaced); the AF_XDP bridge does not \
                 follow a lost link: restart it, or run without --xdp, whose bridge waits \
                 for the interface to come back",
                self.ports.ifname(side)
            ));
        }
    }

    fn count_tx_failed(&mut self, side: usize, engine: bool) {
        self.counters.tx_failed += 1;
        self.unsent += u64::from(engine);
        if !self.told_tx_failed {
            self.told_tx_failed = true;
            say_now!(
                "dummynet: bridge port {}: a frame found its AF_XDP tx ring full (or, a \
                 duplicate, no free UMEM chunk); such frames are dropped and counted as \
                 tx_failed (said once)",
                self.ports.ifname(side)
            );
        }
    }
}

impl Backend for XdpBridge {
    fn describe(&self) -> String {
        format!(
            "bridge {} <-> {} (AF_XDP, {})",
            self.ports.ifname(0),
            self.ports.ifname(1),
            self.ports.mode()
        )
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        if self.failure.is_some() {
            return Vec::new();
        }
        vec![self.ports.fd(0), self.ports.fd(1)]
    }

    /// Should an AF_XDP socket poll with an error (its interface gone, so
    /// the queue it was bound to), the daemon stops and says why; a
    /// deleted interface is also found by [`XdpBridge::look_at_links`],
    /// since the kernel does not always say so on the socket.
    fn fd_failed(&mut self, fd: RawFd) {
        let Some(side) = (0..2).find(|&s| self.ports.fd(s).as_raw_fd() == fd) else {
            return;
        };
        if self.failure.is_none() {
            self.failure = Some(format!(
                "bridge port {}: its AF_XDP socket reports an error (the interface went \
                 down or away); the AF_XDP bridge does not follow a lost link: restart it, \
                 or run without --xdp, whose bridge waits for the interface to come back",
                self.ports.ifname(side)
            ));
        }
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }

    fn receive(&mut self, _engine: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
        self.look_at_links();
        let mut more = false;
        for side in 0..2 {
            let other = 1 - side;
            self.rx.clear();
            let n = self.ports.recv_batch(side, &mut self.rx, RX_BATCH);
            more |= n == RX_BATCH;
            let mut rx = std::mem::take(&mut self.rx);
            for frame in rx.drain(..) {
                match wire::parse(LinkType::Ethernet, &frame) {
                    Ok(parsed) => {
                        let info = PacketInfo {
                            len: parsed.len,
                            key: parsed.key,
                            dir: Direction::In,
                            recv_if: Some(self.ifaces[side]),
                            xmit_if: None,
                        };
                        arrivals.push(Arrival {
                            info,
                            carrier: Carrier {
                                backend: 0,
                                out_pass: Some(self.ifaces[other]),
                                id: 0,
                                copy: false,
                                reader: 0,
                                body: Body::Xdp(XdpBody {
                                    frame,
                                    port: other as u8,
                                }),
                            },
                            stamp_ns: 0,
                        });
                    }
                    Err(WireError::NotIp { .. }) => {
                        self.counters.non_ip += 1;
                        if !self.ports.send(other, frame) {
                            self.count_tx_failed(other, false);
                        }
                    }
                    Err(_) => {
                        self.counters.malformed += 1;
                        self.ports.recycle(frame);
                    }
                }
            }
            self.rx = rx;
        }
        more
    }

    fn reconfigured(&mut self, engine: &Engine<Carrier>) {
        if !self.told_both_passes {
            let rules = engine.undirected_pipe_rules();
            if !rules.is_empty() {
                say_now!(
                    "dummynet: warning: {}",
                    super::bridge::both_passes_warning(&rules)
                );
                self.told_both_passes = true;
            }
        }
    }

    fn complete(&mut self, carrier: Carrier, deliver: bool) {
        match carrier.body {
            Body::Xdp(XdpBody { frame, port }) => {
                let port = usize::from(port).min(1);
                if !deliver {
                    self.ports.recycle(frame);
                } else if !self.ports.send(port, frame) {
                    self.count_tx_failed(port, true);
                }
            }
            // A duplicate, made on the heap.
            Body::Frame(EtherFrame { buf, port, .. }) if deliver => {
                let port = usize::from(port).min(1);
                if !self.ports.send_copy(port, &buf) {
                    self.count_tx_failed(port, true);
                }
            }
            _ => {}
        }
    }

    fn flush(&mut self) {
        self.ports.flush(0);
        self.ports.flush(1);
    }

    /// Frames the kernel did not take stay on the tx ring (its 16384
    /// slots are the backlog: only a full ring drops), and the data plane
    /// turns soon to hand them over again.
    fn holding(&self) -> bool {
        self.ports.tx_pending(0) || self.ports.tx_pending(1)
    }

    fn take_unsent(&mut self) -> u64 {
        std::mem::take(&mut self.unsent)
    }

    fn stats(&mut self) -> Vec<(String, u64)> {
        let (free, lent, sending, held) = self.ports.chunks();
        let mut out = vec![
            ("non_ip_forwarded".to_string(), self.counters.non_ip),
            ("malformed_dropped".to_string(), self.counters.malformed),
            ("tx_failed".to_string(), self.counters.tx_failed),
            ("umem_free".to_string(), free),
            ("umem_lent_to_kernel".to_string(), lent),
            ("umem_sending".to_string(), sending),
            ("umem_held".to_string(), held),
            ("umem_exhausted".to_string(), self.ports.umem_exhausted()),
            (
                "xdp_zero_copy".to_string(),
                u64::from(self.ports.mode().zero_copy),
            ),
        ];
        for side in 0..2 {
            let name = self.ports.ifname(side).to_string();
            let s = self.ports.stats(side);
            out.push((format!("{name}.rx_frames"), s.rx_frames));
            out.push((format!("{name}.tx_frames"), s.tx_frames));
            out.push((format!("{name}.rx_fill_ring_empty"), s.rx_fill_ring_empty));
            out.push((format!("{name}.rx_ring_full"), s.rx_ring_full));
            out.push((format!("{name}.rx_dropped"), s.rx_dropped));
            out.push((format!("{name}.tx_ring_full"), s.tx_ring_full));
            out.push((format!("{name}.rx_invalid"), s.rx_invalid));
            out.push((format!("{name}.tx_invalid"), s.tx_invalid));
        }
        out
    }
}
