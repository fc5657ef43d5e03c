//! Bridge mode: two interfaces joined through the engine, as FreeBSD's
//! `if_bridge` with ipfw or the seeds' `kipfw valeA:f valeB:f`.
//!
//! A frame read on A is classified `in recv A`; if it passes, it is
//! classified again `out recv A xmit B` (FreeBSD calls ipfw on the way into
//! the bridge and on the way out of it), then written to B. Frames that are
//! not IP (ARP, LLDP, ...) cross untouched, as with `net.link.ether.ipfw=0`.
//!
//! GSO/GRO super-packets stay whole (the ports use `virtio_net_hdr`) and
//! are billed for the bytes their segments would put on the wire.
//!
//! A port whose interface goes down or is deleted is not polled until it
//! is back (its socket would poll with an error at once, every time): the
//! bridge says so on stderr, looks at the link every [`LINK_LOOK`], drops
//! and counts the frames due out of it (`IF.link_down_dropped`), and
//! forwards again when the interface is up, reopening the port if it is a
//! new interface of the same name; or, told to
//! ([`Bridge::exit_on_link_loss`]), stops the daemon when it is deleted.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use dummynet_engine::wire::{self, LinkType, WireError};
use dummynet_engine::{Direction, Engine, IfaceId, PacketInfo};
use dummynet_io::afpacket::{LinkState, Port, PortError, PortOptions, RxFrame, TxFrame, VnetHdr};
use nix::errno::Errno;

use super::held::{self, HeldCounters, Overflow};
use super::{Arrival, Backend, Body, Carrier, LateReading, PacketBody};

/// An Ethernet frame to transmit on port `port` of a bridge, with the
/// kernel's segmentation header if it came as a super-packet.
#[derive(Debug)]
pub struct EtherFrame {
    pub buf: Vec<u8>,
    pub vnet: Option<VnetHdr>,
    pub port: u8,
}

/// Where the IP header of an Ethernet frame starts, past up to two VLAN
/// tags; `None` if the frame does not carry IPv4 or IPv6.
pub(crate) fn ip_offset(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..3 {
        let ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        match ethertype {
            0x0800 | 0x86dd => return Some(at + 2),
            0x8100 | 0x88a8 => at += 4,
            _ => return None,
        }
    }
    None
}

impl PacketBody for EtherFrame {
    #[inline]
    fn frame_bytes(&self) -> Option<&[u8]> {
        Some(&self.buf)
    }
    #[inline]
    fn ip_bytes(&self) -> Option<&[u8]> {
        self.buf.get(ip_offset(&self.buf)?..)
    }
    #[inline]
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        let at = ip_offset(&self.buf)?;
        self.buf.get_mut(at..)
    }
    /// Copied byte for byte.
    fn duplicate(&self) -> Option<Body> {
        Some(Body::Frame(EtherFrame {
            buf: self.buf.clone(),
            vnet: self.vnet,
            port: self.port,
        }))
    }
    #[inline]
    fn wire_bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Frames read per port per turn of the data plane.
const RX_BATCH: usize = 64;

/// How often the link of a port that is down or gone is looked at (two
/// `ioctl`s). The data plane wakes at least every 100 ms anyway, so a port
/// forwards again at most about 200 ms after its interface is back.
pub const LINK_LOOK: Duration = Duration::from_millis(100);

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    non_ip: u64,
    malformed: u64,
    tx_failed: u64,
}

/// A frame waiting to be sent out of a port.
struct Outgoing {
    data: Vec<u8>,
    vnet: Option<VnetHdr>,
    /// The engine delivered it (it is in the engine's books); false for a
    /// frame that crossed without the engine (not IP).
    engine: bool,
    /// When the port first refused it for lack of room ([`held`]).
    held_at: Option<Instant>,
}

/// What one port's interface has done, for `stats`.
#[derive(Debug, Default, Clone, Copy)]
struct LinkCounters {
    /// Frames due out of the port while its interface was down or gone.
    down_dropped: u64,
    /// Times the interface was found down or gone.
    losses: u64,
}

/// What the bridge knows of one port's interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Forwarding: the port is polled.
    Up,
    /// Down (`gone`: deleted) since `since`, with `dropped` frames for it
    /// counted then; not polled, looked at again at `next_look`.
    Lost {
        since: Instant,
        gone: bool,
        dropped: u64,
        next_look: Instant,
    },
}

pub struct Bridge {
    ports: [Port; 2],
    /// What the ports were opened with, to open one again on a new
    /// interface of the same name.
    opts: PortOptions,
    links: [Link; 2],
    link_counters: [LinkCounters; 2],
    /// Stop the daemon ([`Backend::failure`]) when a port's interface is
    /// deleted, instead of waiting for it to come back.
    exit_on_link_loss: bool,
    failure: Option<String>,
    /// A port polled with an error it did not explain was reported (once).
    told_odd_error: bool,
    /// A frame the kernel refused to send out of this port was reported
    /// (once per port: the rest are counted).
    told_tx_error: [bool; 2],
    /// Each port's MTU and when it was read ([`Bridge::frame_limit`]).
    mtu: [Option<(u32, Instant)>; 2],
    /// Super-packets not sent because their segments would be larger than
    /// the port's MTU allows.
    gso_too_large: [u64; 2],
    /// That was reported (once per port).
    told_gso_too_large: [bool; 2],
    ifaces: [IfaceId; 2],
    rx: Vec<RxFrame>,
    tx: [Vec<Outgoing>; 2],
    /// Frames each port refused for lack of room, oldest first: sent
    /// before anything newer for that port ([`held`]).
    held: [Vec<Outgoing>; 2],
    held_counters: [HeldCounters; 2],
    /// A port dropped frames it held (said once per port).
    told_held_dropped: [bool; 2],
    counters: Counters,
    /// Frames the engine delivered that could not be sent (refused by the
    /// kernel, or due out of a port whose link is lost), not yet reported
    /// back to the engine ([`Backend::take_unsent`]).
    unsent: u64,
    /// Told whether super-packets may cross whole, whenever that changes
    /// ([`Bridge::follow_bursts`]), and what it was told last.
    bursts: Option<(Sender<bool>, Option<bool>)>,
    /// The user was told that a pipe rule without `in`/`out` takes a frame
    /// on both passes (once per daemon).
    told_both_passes: bool,
}

impl Bridge {
    /// Opens both interfaces (in the calling thread's network namespace).
    pub fn open(a: &str, b: &str, engine: &mut Engine<Carrier>) -> Result<Bridge, PortError> {
        let opts = PortOptions {
            vnet_hdr: true,
            ..PortOptions::default()
        };
        let mut bridge = Bridge::open_with(a, b, opts)?;
        bridge.ifaces = [engine.iface(a), engine.iface(b)];
        Ok(bridge)
    }

    /// Opens both interfaces off the data-plane thread, for a bridge
    /// attached to a running data plane ([`Backend::attached`] learns the
    /// engine's names for them), with receive rings of `ring_frames` slots:
    /// a joined shell's link is one of many, and the default ring (8 MiB a
    /// port) would make memory, not the CPU, the bound on how many.
    pub fn open_to_attach(a: &str, b: &str, ring_frames: usize) -> Result<Bridge, PortError> {
        let opts = PortOptions {
            vnet_hdr: true,
            rx_ring_frames: ring_frames,
            ..PortOptions::default()
        };
        Bridge::open_with(a, b, opts)
    }

    fn open_with(a: &str, b: &str, opts: PortOptions) -> Result<Bridge, PortError> {
        let pa = Port::open(a, opts.clone())?;
        let pb = Port::open(b, opts.clone())?;
        Ok(Bridge {
            // Placeholders until the engine names them.
            ifaces: [IfaceId(u16::MAX); 2],
            ports: [pa, pb],
            opts,
            links: [Link::Up; 2],
            link_counters: [LinkCounters::default(); 2],
            exit_on_link_loss: false,
            failure: None,
            told_odd_error: false,
            told_tx_error: [false; 2],
            mtu: [None; 2],
            gso_too_large: [0; 2],
            told_gso_too_large: [false; 2],
            rx: Vec::with_capacity(RX_BATCH),
            tx: [Vec::new(), Vec::new()],
            held: [Vec::new(), Vec::new()],
            held_counters: [HeldCounters::default(); 2],
            told_held_dropped: [false; 2],
            counters: Counters::default(),
            unsent: 0,
            bursts: None,
            told_both_passes: false,
        })
    }

    /// The longest frame port `side` may send, link header included, as
    /// the kernel allows a plain frame: its MTU, 14 bytes of Ethernet
    /// header and 4 of a VLAN tag if the frame has one. The MTU is read
    /// again when older than [`LINK_LOOK`] (an `ip link set mtu` takes
    /// effect that soon); `None` when it cannot be read.
    fn frame_limit(&mut self, side: usize, tagged: bool, now: Instant) -> Option<usize> {
        let mtu = match self.mtu[side] {
            Some((mtu, at)) if now.saturating_duration_since(at) < LINK_LOOK => mtu,
            _ => {
                let mtu = self.ports[side].mtu().ok()?;
                self.mtu[side] = Some((mtu, now));
                mtu
            }
        };
        Some(usize::try_from(mtu).ok()? + 14 + if tagged { 4 } else { 0 })
    }

    /// Takes out of `batch` the super-packets whose segments would be
    /// larger than port `side` takes: the kernel checks a plain frame
    /// against the MTU (`EMSGSIZE`) but sends a super-packet's segments
    /// whatever their size, and what becomes of them is then up to the
    /// driver. Each is dropped and counted as a plain frame over the MTU
    /// is (`tx_failed`, `tx-failed` in the engine's books), and in
    /// `IF.tx_gso_too_large`.
    fn drop_oversize_super_packets(&mut self, side: usize, batch: &mut Vec<Outgoing>) {
        if !batch.iter().any(|f| f.vnet.is_some_and(|v| v.is_gso())) {
            return;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < batch.len() {
            let f = &batch[i];
            let Some(seg) = f.vnet.and_then(|v| v.segment_len(&f.data)) else {
                i += 1;
                continue;
            };
            let tagged = matches!(f.data.get(12..14), Some([0x81, 0x00] | [0x88, 0xa8]));
            let Some(limit) = self.frame_limit(side, tagged, now) else {
                i += 1;
                continue;
            };
            if seg <= limit {
                i += 1;
                continue;
            }
            let f = batch.remove(i);
            self.counters.tx_failed += 1;
            self.gso_too_large[side] += 1;
            self.unsent += u64::from(f.engine);
            if !self.told_gso_too_large[side] {
                self.told_gso_too_large[side] = true;
                let name = self.ports[side].ifname();
                say_now!(
                    "dummynet: bridge port {name}: a super-packet of {} bytes would leave in \
                     segments of {seg} bytes, over the {limit} its MTU allows; such frames \
                     are dropped and counted as tx_failed and {name}.tx_gso_too_large \
                     (said once per port)",
                    f.data.len()
                );
            }
            self.ports[side].recycle(f.data);
        }
    }

    /// Spreads both ports over the sockets of several workers
    /// (`PACKET_FANOUT`, by flow hash: [`Port::join_fanout`]): joins the
    /// groups `groups`, or makes them (`None`); returns their ids, for the
    /// next worker's bridge on the same interfaces.
    pub fn join_fanout(&self, groups: Option<[u16; 2]>) -> Result<[u16; 2], PortError> {
        Ok([
            self.ports[0].join_fanout(groups.map(|g| g[0]))?,
            self.ports[1].join_fanout(groups.map(|g| g[1]))?,
        ])
    }

    /// Tells `bursts`, at the start and whenever it changes, whether GSO
    /// super-packets may cross whole (`Engine::only_delays`), for a caller
    /// that makes the senders beyond the ports segment them or not: a
    /// burst billed and queued as one is exact only while no pipe counts
    /// packets.
    pub fn follow_bursts(mut self, bursts: Sender<bool>) -> Self {
        self.bursts = Some((bursts, None));
        self
    }

    /// When a port's interface is deleted, stop the daemon with an error
    /// ([`Backend::failure`]) instead of waiting for an interface of that
    /// name to come back.
    pub fn exit_on_link_loss(mut self, exit: bool) -> Self {
        self.exit_on_link_loss = exit;
        self
    }

    /// Looks at the links of the ports that are down or gone, if it is
    /// time.
    fn look_at_lost_links(&mut self) {
        if self.links.iter().all(|l| *l == Link::Up) {
            return;
        }
        let now = Instant::now();
        for side in 0..2 {
            if let Link::Lost { next_look, .. } = self.links[side] {
                if now >= next_look {
                    self.follow_link(side, now);
                }
            }
        }
    }

    /// Asks the kernel about port `side`'s interface and follows it: a
    /// port whose interface is down or gone stops being polled, one that
    /// is back is polled again (reopened if it is a new interface).
    fn follow_link(&mut self, side: usize, now: Instant) {
        // Twice at most: once more after reopening on a new interface.
        for _ in 0..2 {
            let state = match self.ports[side].link_state() {
                Ok(state) => state,
                Err(e) => {
                    // Unknown: keep what we believed, look again later.
                    say_now!("dummynet: bridge port: {e}");
                    self.next_look(side, now);
                    return;
                }
            };
            let name = self.ports[side].ifname().to_string();
            match (state, self.links[side]) {
                (LinkState::Up, Link::Up) => return,
                (LinkState::Up, Link::Lost { since, dropped, .. }) => {
                    // The error ENETDOWN left on the socket would fail the
                    // first send.
                    let _ = self.ports[side].take_error();
                    self.links[side] = Link::Up;
                    let lost = self.link_counters[side].down_dropped - dropped;
                    say_now!(
                        "dummynet: bridge port {name} is up again after {:.1} s; forwarding \
                         ({lost} frame{} for it dropped meanwhile)",
                        now.saturating_duration_since(since).as_secs_f64(),
                        if lost == 1 { "" } else { "s" },
                    );
                    return;
                }
                (LinkState::Down, Link::Lost { gone: false, .. }) => {
                    self.next_look(side, now);
                    return;
                }
                (LinkState::Down, _) => {
                    self.lose(side, now, false);
                    say_now!(
                        "dummynet: bridge port {name} is down: frames for it are dropped \
                         (counted as {name}.link_down_dropped) until it is up again"
                    );
                    return;
                }
                (LinkState::Gone, Link::Lost { gone: true, .. }) => {
                    self.next_look(side, now);
                    return;
                }
                (LinkState::Gone | LinkState::Replaced { .. }, link) => {
                    let seen_gone = matches!(link, Link::Lost { gone: true, .. });
                    if !seen_gone {
                        self.lose(side, now, true);
                    }
                    if self.exit_on_link_loss {
                        self.failure = Some(format!(
                            "bridge port {name} was deleted (no interface {name} is left in \
                             the daemon's network namespace); stopping, as --exit-on-link-loss \
                             asks"
                        ));
                        return;
                    }
                    if !seen_gone {
                        say_now!(
                            "dummynet: bridge port {name} was deleted: frames for it are \
                             dropped (counted as {name}.link_down_dropped) until an interface \
                             named {name} comes back (--exit-on-link-loss stops the daemon \
                             instead)"
                        );
                    }
                    let LinkState::Replaced { ifindex } = state else {
                        return;
                    };
                    match Port::open(&name, self.opts.clone()) {
                        Ok(port) => {
                            // Bound to an interface that is down, it starts
                            // with ENETDOWN waiting.
                            let _ = port.take_error();
                            self.ports[side] = port;
                            say_now!(
                                "dummynet: bridge port {name} is back as a new interface \
                                 (index {ifindex}); port reopened"
                            );
                            if let Link::Lost { since, dropped, .. } = self.links[side] {
                                // Down until the new interface says up.
                                self.links[side] = Link::Lost {
                                    since,
                                    gone: false,
                                    dropped,
                                    next_look: now,
                                };
                            }
                        }
                        Err(e) => {
                            say_now!("dummynet: bridge port {name}: reopening: {e}");
                            self.next_look(side, now);
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Port `side`'s interface is down (or, `gone`, deleted): stop polling
    /// it, and count.
    fn lose(&mut self, side: usize, now: Instant, gone: bool) {
        let (since, dropped) = match self.links[side] {
            Link::Lost { since, dropped, .. } => (since, dropped),
            Link::Up => {
                self.link_counters[side].losses += 1;
                (now, self.link_counters[side].down_dropped)
            }
        };
        self.links[side] = Link::Lost {
            since,
            gone,
            dropped,
            next_look: now + LINK_LOOK,
        };
    }

    fn next_look(&mut self, side: usize, now: Instant) {
        if let Link::Lost { next_look, .. } = &mut self.links[side] {
            *next_look = now + LINK_LOOK;
        }
    }

    /// Counts the frames waiting to go out of port `side` as lost with its
    /// link, and recycles them.
    fn drop_for_lost_link(&mut self, side: usize, frames: Vec<Outgoing>) {
        self.link_counters[side].down_dropped += frames.len() as u64;
        for f in frames {
            self.held_counters[side].dropped += u64::from(f.held_at.is_some());
            self.unsent += u64::from(f.engine);
            self.ports[side].recycle(f.data);
        }
    }

    /// Drops frames port `side` held (the newest, or all of them), counted
    /// as `tx_failed` (`tx-failed` in the engine's books); said once per
    /// port.
    fn drop_held_frames(&mut self, side: usize, frames: Vec<Outgoing>, why: Overflow) {
        let n = frames.len() as u64;
        self.counters.tx_failed += n;
        self.held_counters[side].dropped += n;
        for f in frames {
            self.unsent += u64::from(f.engine);
            self.ports[side].recycle(f.data);
        }
        if !self.told_held_dropped[side] {
            self.told_held_dropped[side] = true;
            let name = self.ports[side].ifname();
            let why = match why {
                Overflow::Full => format!(
                    "more than {} frames or {} MiB waited for it",
                    held::MAX_FRAMES,
                    held::MAX_BYTES >> 20
                ),
                Overflow::Expired => {
                    format!("some waited {} ms for it", held::MAX_HOLD.as_millis())
                }
                Overflow::Stopping => "the daemon is stopping".to_string(),
            };
            say_now!(
                "dummynet: bridge port {name}: the kernel has no room for its frames (ENOBUFS or \
                 EAGAIN) and {why}: {n} dropped, counted as tx_failed and \
                 {name}.tx_held_dropped (said once per port)"
            );
        }
    }
}

/// What a bridge's user is told of pipe rules without `in` or `out`.
pub fn both_passes_warning(rules: &[u16]) -> String {
    let list: Vec<String> = rules.iter().map(|n| format!("{n:05}")).collect();
    format!(
        "rule{} {} send{} to a pipe or queue without `in` or `out`: on a bridge every \
         frame crosses the rules on its way in and again on its way out, so such a rule \
         can take it twice (a 10 ms pipe adds 20 ms each way), as on FreeBSD; add `in` \
         (or `out`) to take each frame once",
        if rules.len() > 1 { "s" } else { "" },
        list.join(", "),
        if rules.len() > 1 { "" } else { "s" },
    )
}

/// Bytes to bill for a frame: the IP packet, or for a super-packet the IP
/// packets of all its segments (each repeats the IP and transport headers).
fn billed_len(parsed: &wire::Parsed, frame: &RxFrame) -> u32 {
    let Some(v) = frame.vnet.filter(VnetHdr::is_gso) else {
        return parsed.len;
    };
    let segments = v.segments(frame.data.len());
    let headers = v
        .headers_len(&frame.data)
        .map_or(0, |h| h.saturating_sub(parsed.ip_offset));
    let extra = segments.saturating_sub(1).saturating_mul(headers as u64);
    u32::try_from(u64::from(parsed.len).saturating_add(extra)).unwrap_or(u32::MAX)
}

impl Backend for Bridge {
    fn attached(&mut self, engine: &mut Engine<Carrier>) {
        self.ifaces = [
            engine.iface(self.ports[0].ifname()),
            engine.iface(self.ports[1].ifname()),
        ];
    }

    fn describe(&self) -> String {
        format!(
            "bridge {} <-> {}",
            self.ports[0].ifname(),
            self.ports[1].ifname()
        )
    }

    /// The ports whose interfaces are up: one that is down or gone is
    /// looked at every [`LINK_LOOK`] instead.
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.ports
            .iter()
            .zip(&self.links)
            .filter(|(_, l)| **l == Link::Up)
            .map(|(p, _)| p.as_fd())
            .collect()
    }

    /// The kernel flags a port's socket with `ENETDOWN` when its interface
    /// goes down (or is deleted); taken, the flag is cleared, and the link
    /// says what happened.
    fn fd_failed(&mut self, fd: RawFd) {
        let Some(side) = self.ports.iter().position(|p| p.as_raw_fd() == fd) else {
            return;
        };
        let taken = self.ports[side].take_error();
        let now = Instant::now();
        self.follow_link(side, now);
        if self.links[side] != Link::Up {
            return;
        }
        let name = self.ports[side].ifname().to_string();
        match taken {
            // Down and up again before we looked.
            Ok(Some(Errno::ENETDOWN | Errno::ENXIO | Errno::ENODEV)) => {
                self.link_counters[side].losses += 1;
                say_now!("dummynet: bridge port {name} went down and came back up");
            }
            Ok(Some(errno)) => {
                say_now!("dummynet: bridge port {name}: the socket reported {errno}");
            }
            // Polled with an error it does not explain: left alone until
            // the next look, so it cannot make the data plane spin.
            Ok(None) | Err(_) => {
                if !self.told_odd_error {
                    self.told_odd_error = true;
                    say_now!(
                        "dummynet: bridge port {name} polls with an error but has none to \
                         give ({taken:?}); not polled for {} ms at a time while it does",
                        LINK_LOOK.as_millis()
                    );
                }
                self.links[side] = Link::Lost {
                    since: now,
                    gone: false,
                    dropped: self.link_counters[side].down_dropped,
                    next_look: now + LINK_LOOK,
                };
            }
        }
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }

    fn receive(&mut self, _engine: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
        self.look_at_lost_links();
        let mut more = false;
        for side in 0..2 {
            let other = 1 - side;
            self.rx.clear();
            // Errors here are the kernel refusing one read; the counters of
            // the port record them and the next turn tries again.
            let got = self.ports[side].recv_batch(&mut self.rx, RX_BATCH);
            more |= got.is_ok_and(|n| n == RX_BATCH);
            for frame in self.rx.drain(..) {
                match wire::parse(LinkType::Ethernet, &frame.data) {
                    Ok(parsed) => {
                        let info = PacketInfo {
                            len: billed_len(&parsed, &frame),
                            key: parsed.key,
                            dir: Direction::In,
                            recv_if: Some(self.ifaces[side]),
                            xmit_if: None,
                        };
                        let carrier = Carrier {
                            backend: 0,
                            out_pass: Some(self.ifaces[other]),
                            id: 0,
                            copy: false,
                            reader: 0,
                            body: Body::Frame(EtherFrame {
                                buf: frame.data,
                                vnet: frame.vnet,
                                port: other as u8,
                            }),
                        };
                        arrivals.push(Arrival {
                            info,
                            carrier,
                            stamp_ns: frame.stamp_ns,
                        });
                    }
                    // Read late, a frame the engine does not see leaves
                    // late too: within the pipes' least delay (see
                    // `late_reading`).
                    Err(WireError::NotIp { .. }) => {
                        self.counters.non_ip += 1;
                        self.tx[other].push(Outgoing {
                            data: frame.data,
                            vnet: frame.vnet,
                            engine: false,
                            held_at: None,
                        });
                    }
                    Err(_) => {
                        // Claims to be IP but is not well formed: dropped,
                        // as the engine cannot classify it.
                        self.counters.malformed += 1;
                        self.ports[side].recycle(frame.data);
                    }
                }
            }
        }
        more
    }

    fn reconfigured(&mut self, engine: &Engine<Carrier>) {
        if !self.told_both_passes {
            let rules = engine.undirected_pipe_rules();
            if !rules.is_empty() {
                // Once per daemon: a line on stderr, not a cost per packet.
                say_now!("dummynet: warning: {}", both_passes_warning(&rules));
                self.told_both_passes = true;
            }
        }
        let Some((tell, last)) = &mut self.bursts else {
            return;
        };
        let whole = engine.only_delays();
        if *last != Some(whole) {
            *last = Some(whole);
            // Gone only when the shell is ending.
            let _ = tell.send(whole);
        }
    }

    /// Both ports read from rings, whose slots carry the kernel's receive
    /// time. Frames that are not IP (ARP, mostly) cross without the engine,
    /// so when the data plane reads late they are late by as much: never
    /// more than the least delay the pipes give every IP packet.
    fn late_reading(&self) -> Option<LateReading> {
        if !self.ports.iter().all(Port::stamps_frames) {
            return None;
        }
        Some(LateReading {
            room: self.ports.iter().map(Port::rx_ring_frames).min()?,
            ifaces: self.ifaces.to_vec(),
        })
    }

    fn complete(&mut self, carrier: Carrier, deliver: bool) {
        if let Body::Frame(EtherFrame { buf, vnet, port }) = carrier.body {
            let port = usize::from(port).min(1);
            if deliver {
                self.tx[port].push(Outgoing {
                    data: buf,
                    vnet,
                    engine: true,
                    held_at: None,
                });
            } else {
                self.ports[port].recycle(buf);
            }
        }
    }

    fn flush(&mut self) {
        for side in 0..2 {
            if self.tx[side].is_empty() && self.held[side].is_empty() {
                continue;
            }
            // What was held goes first: a port's frames leave in order.
            let mut batch = std::mem::take(&mut self.held[side]);
            batch.append(&mut self.tx[side]);
            if self.links[side] != Link::Up {
                self.drop_for_lost_link(side, batch);
                continue;
            }
            self.drop_oversize_super_packets(side, &mut batch);
            let now = Instant::now();
            let mut start = 0;
            let mut rest = Vec::new();
            while start < batch.len() {
                let frames: Vec<TxFrame<'_>> = batch[start..]
                    .iter()
                    .map(|f| TxFrame {
                        data: &f.data,
                        vnet: f.vnet,
                    })
                    .collect();
                let (n, error) = match self.ports[side].send_batch(&frames) {
                    Ok(n) => (n, None),
                    Err(e) => (e.sent, Some(e.error)),
                };
                for f in &batch[start..start + n] {
                    if let Some(at) = f.held_at {
                        self.held_counters[side].sent(now.saturating_duration_since(at));
                    }
                }
                start += n;
                let Some(error) = error else {
                    continue;
                };
                if matches!(error, PortError::InterfaceDown { .. }) {
                    // Noticed by a send before the socket's error was
                    // polled.
                    self.follow_link(side, Instant::now());
                    if self.links[side] != Link::Up {
                        let unsent = batch.split_off(start);
                        self.drop_for_lost_link(side, unsent);
                        break;
                    }
                }
                if matches!(
                    error,
                    PortError::NoBuffers { .. } | PortError::WouldBlock { .. }
                ) {
                    // No room now: this frame and the rest wait for the
                    // next turn, in order.
                    rest = batch.split_off(start);
                    break;
                }
                // The refused frame is dropped and counted; the rest get
                // another try.
                self.counters.tx_failed += 1;
                if !self.told_tx_error[side] {
                    self.told_tx_error[side] = true;
                    say_now!(
                        "dummynet: bridge port {}: the kernel refused a frame ({}); \
                         refused frames are dropped and counted as tx_failed and \
                         {}.tx_refused in `dummynet stats` (said once per port)",
                        self.ports[side].ifname(),
                        error,
                        self.ports[side].ifname()
                    );
                }
                if let Some(f) = batch.get(start) {
                    self.unsent += u64::from(f.engine);
                    self.held_counters[side].dropped += u64::from(f.held_at.is_some());
                }
                start += 1;
            }
            for f in batch {
                self.ports[side].recycle(f.data);
            }
            for f in &mut rest {
                if f.held_at.is_none() {
                    f.held_at = Some(now);
                    self.held_counters[side].held += 1;
                }
            }
            let old = held::expired(rest.iter().filter_map(|f| f.held_at), now);
            if old > 0 {
                let young = rest.split_off(old);
                self.drop_held_frames(side, rest, Overflow::Expired);
                rest = young;
            }
            let over = held::over_bound(rest.iter().map(|f| f.data.len()));
            if over > 0 {
                let dropped = rest.split_off(rest.len() - over);
                self.drop_held_frames(side, dropped, Overflow::Full);
            }
            self.held[side] = rest;
        }
    }

    fn holding(&self) -> bool {
        self.held.iter().any(|h| !h.is_empty())
    }

    fn drop_held(&mut self) {
        for side in 0..2 {
            let held = std::mem::take(&mut self.held[side]);
            if !held.is_empty() {
                self.drop_held_frames(side, held, Overflow::Stopping);
            }
        }
    }

    fn take_unsent(&mut self) -> u64 {
        std::mem::take(&mut self.unsent)
    }

    fn stats(&mut self) -> Vec<(String, u64)> {
        let mut out = vec![
            ("non_ip_forwarded".to_string(), self.counters.non_ip),
            ("malformed_dropped".to_string(), self.counters.malformed),
            ("tx_failed".to_string(), self.counters.tx_failed),
        ];
        for ((((p, link), lc), too_large), held) in self
            .ports
            .iter_mut()
            .zip(&self.links)
            .zip(&self.link_counters)
            .zip(self.gso_too_large)
            .zip(&self.held_counters)
        {
            let name = p.ifname().to_string();
            out.push((format!("{name}.link_down"), u64::from(*link != Link::Up)));
            out.push((format!("{name}.tx_gso_too_large"), too_large));
            out.push((format!("{name}.link_losses"), lc.losses));
            out.push((format!("{name}.link_down_dropped"), lc.down_dropped));
            out.extend(held.entries(&name));
            if let Ok(s) = p.stats() {
                out.push((format!("{name}.rx_frames"), s.rx_frames));
                out.push((format!("{name}.rx_gso_frames"), s.rx_gso_frames));
                out.push((format!("{name}.tx_frames"), s.tx_frames));
                out.push((format!("{name}.tx_refused"), s.tx_refused));
                out.push((format!("{name}.tx_no_buffers"), s.tx_no_buffers));
                out.push((format!("{name}.tx_would_block"), s.tx_would_block));
                out.push((format!("{name}.kernel_drops"), s.kernel_drops));
                out.push((format!("{name}.rx_truncated"), s.rx_truncated));
            }
        }
        out
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::Carrier;
    use dummynet_engine::Payload;

    fn frame(tags: &[u16], ethertype: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        for t in tags {
            f.extend_from_slice(&t.to_be_bytes());
            f.extend_from_slice(&[0, 7]);
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&[0x45, 0x02]);
        f
    }

    #[test]
    fn the_ip_header_is_found_past_vlan_tags() {
        assert_eq!(ip_offset(&frame(&[], 0x0800)), Some(14));
        assert_eq!(ip_offset(&frame(&[0x8100], 0x86dd)), Some(18));
        assert_eq!(ip_offset(&frame(&[0x88a8, 0x8100], 0x0800)), Some(22));
        assert_eq!(ip_offset(&frame(&[], 0x0806)), None, "ARP is not IP");
        assert_eq!(ip_offset(&[0u8; 13]), None, "too short");
        let c = Carrier {
            backend: 0,
            out_pass: None,
            id: 0,
            copy: false,
            reader: 0,
            body: Body::Frame(EtherFrame {
                buf: frame(&[0x8100], 0x0800),
                vnet: None,
                port: 0,
            }),
        };
        assert_eq!(c.ip_bytes(), Some(&[0x45, 0x02][..]));
    }
}
