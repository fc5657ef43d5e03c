//! Host mode: this machine's own traffic, as FreeBSD's `ipfw add pipe 1 ...
//! out` shapes it. An nftables table of ours (or, where nftables is
//! missing, an iptables chain: see `dummynet_io::firewall`) sends packets to
//! an NFQUEUE; each one is held by the kernel while the engine holds our
//! copy of its facts, and gets its verdict (ACCEPT or DROP) when it leaves
//! its pipe.
//!
//! Hooks map to ipfw's directions: INPUT is `in` (with `recv` the incoming
//! interface), OUTPUT is `out` (with `xmit`), FORWARD is `out` with both.
//!
//! The host's own outgoing packets (OUTPUT) are the exception to "held by
//! the kernel": by default they travel as copies. The kernel charges a
//! packet to the socket that sent it until the packet is freed, and Linux's
//! TCP Small Queues let a TCP socket have only about a millisecond of its
//! pacing rate (at least two packets) charged at once. A packet held in the
//! queue for its pipe's delay stays charged, so TCP through `delay 10ms`
//! could keep only a few packets in the pipe: 2.0 Mbit/s through 10 Mbit/s.
//! So the data plane takes a copy of such a packet, lets the kernel free
//! the original at once (TCP already counts it as sent: queueing succeeded),
//! and sends the copy into the output path from a raw socket when it leaves
//! its pipe, with a mark that the interception chain lets through. The
//! kernel segments GSO packets and completes checksums before queueing, so
//! every copy is a wire packet. `run --host --hold-output` keeps the
//! originals instead (their socket mark and priority then survive, at the
//! cost above).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};

use dummynet_engine::wire::{self, LinkType};
use dummynet_engine::{Direction, Engine, IfaceId, PacketInfo};
use dummynet_io::firewall::{self, FirewallError, InterceptSpec, Interception};
use dummynet_io::nfqueue::{
    Hook, HostPacket, HostQueue, Interface, NfqError, QueueOptions, Verdict,
};
use dummynet_io::rawip::RawSender;

use super::{Arrival, Backend, Body, Carrier, PacketBody};

/// A copy of one of the host's own outgoing IP packets (the original is
/// already freed), sent from a raw socket when it leaves its pipe.
#[derive(Debug)]
pub struct IpCopy(pub Vec<u8>);

impl PacketBody for IpCopy {
    #[inline]
    fn frame_bytes(&self) -> Option<&[u8]> {
        None
    }
    #[inline]
    fn ip_bytes(&self) -> Option<&[u8]> {
        Some(&self.0)
    }
    #[inline]
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.0)
    }
    fn duplicate(&self) -> Option<Body> {
        Some(Body::Ip(IpCopy(self.0.clone())))
    }
    #[inline]
    fn wire_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A packet the kernel holds for its verdict. ECN marks it only if the
/// kernel will take it back modified (a finished checksum).
impl PacketBody for HostPacket {
    #[inline]
    fn frame_bytes(&self) -> Option<&[u8]> {
        None
    }
    #[inline]
    fn ip_bytes(&self) -> Option<&[u8]> {
        Some(self.payload())
    }
    #[inline]
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.payload_mut().ok()
    }
    /// Not copied: the kernel takes one verdict per packet, and an
    /// incoming copy has no way back into the stack (a failed copy).
    fn duplicate(&self) -> Option<Body> {
        None
    }
    #[inline]
    fn wire_bytes(&self) -> &[u8] {
        self.payload()
    }
}

/// Packets read from the queue per turn of the data plane.
const RX_BATCH: usize = 64;

/// The netfilter mark of the copies the daemon sends (ASCII "dn"), unless
/// `run --copy-mark` says otherwise.
pub const DEFAULT_COPY_MARK: u32 = 0x646e;

/// Why host mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The raw sockets that send the copies of outgoing packets.
    #[error("opening the raw sockets that send outgoing copies: {source} (or use --hold-output)")]
    CopySockets { source: std::io::Error },
    /// A dead daemon's interception rules could not be removed.
    #[error("removing a dead daemon's rules: {source}")]
    Stale { source: FirewallError },
    /// The NFQUEUE could not be bound.
    #[error(transparent)]
    Queue(#[from] NfqError),
    /// The rules that send packets to the queue could not be installed.
    #[error(transparent)]
    Intercept(FirewallError),
}

pub struct Host {
    queue: HostQueue,
    interception: Option<Interception>,
    ifaces: HashMap<u32, IfaceId>,
    verdicts: Vec<(HostPacket, Verdict)>,
    /// Sends the copies of outgoing packets; `None` with `--hold-output`.
    copies: Option<RawSender>,
    /// Copies that left their pipe, sent at the next flush.
    outbox: Vec<Vec<u8>>,
    not_ip: u64,
    read_errors: u64,
    copies_sent: u64,
    copy_errors: u64,
}

impl Host {
    /// Binds the queue first, then installs the firewall rules, so no
    /// packet is queued before someone reads the queue. With `copy_mark`,
    /// the host's own outgoing packets travel as copies sent with that mark
    /// (see the module documentation).
    ///
    /// The caller holds the queue's lock (`dummynet_io::portlock`, taken
    /// by `run`): rules found for this queue are then a dead daemon's, and
    /// are removed.
    pub fn open(spec: &InterceptSpec, copy_mark: Option<u32>) -> Result<Host, HostError> {
        let copies = match copy_mark {
            Some(mark) => {
                Some(RawSender::open(mark).map_err(|source| HostError::CopySockets { source })?)
            }
            None => None,
        };
        let opts = QueueOptions {
            // Copies must be wire packets with their checksums done.
            gso: copies.is_none(),
            ..QueueOptions::default()
        };
        // A daemon that died may have left its rules in place, letting
        // traffic through with bypass (an nftables table dies with its
        // daemon; an iptables chain does not). Take them out before binding:
        // the kernel drops (does not bypass) a packet that reaches a queue
        // between its bind and its copy mode.
        let stale =
            firewall::remove_stale(spec.queue).map_err(|source| HostError::Stale { source })?;
        if !stale.is_empty() {
            say!(
                "dummynet: removed what a dead daemon left for NFQUEUE {}: {stale}",
                spec.queue
            );
        }
        let queue = HostQueue::open(spec.queue, opts)?;
        let spec = InterceptSpec {
            pass_mark: copy_mark,
            ..spec.clone()
        };
        let interception = Interception::install(&spec).map_err(HostError::Intercept)?;
        if let Some(why) = interception.fallback_reason() {
            say!("dummynet: nftables not used: {why}");
        }
        say!(
            "dummynet: host mode: NFQUEUE {} fed by {} (see `{}`)",
            spec.queue,
            interception.describe(),
            interception.list_command()
        );
        Ok(Host {
            queue,
            interception: Some(interception),
            ifaces: HashMap::new(),
            verdicts: Vec::new(),
            copies,
            outbox: Vec::new(),
            not_ip: 0,
            read_errors: 0,
            copies_sent: 0,
            copy_errors: 0,
        })
    }

    fn iface(&mut self, engine: &mut Engine<Carrier>, i: Option<&Interface>) -> Option<IfaceId> {
        let i = i?;
        if let Some(&id) = self.ifaces.get(&i.index) {
            return Some(id);
        }
        let id = match &i.name {
            Some(name) => engine.iface(name),
            None => engine.iface(&format!("if{}", i.index)),
        };
        self.ifaces.insert(i.index, id);
        Some(id)
    }
}

/// Whether the kernel can route a copy of `packet` by its destination
/// alone. Multicast, broadcast and IPv6 link-local destinations need the
/// interface the original was leaving by, which a raw send does not name;
/// such packets (neighbour discovery, MLD, DHCP...) are few and stay held
/// as originals.
fn routable_by_destination(packet: &[u8]) -> bool {
    match packet.first().map(|b| b >> 4) {
        Some(4) => match packet.get(16..20) {
            Some(&[a, b, c, d]) => {
                let dst = std::net::Ipv4Addr::new(a, b, c, d);
                !dst.is_multicast() && !dst.is_broadcast()
            }
            _ => false,
        },
        Some(6) => match packet.get(24..26) {
            Some(&[a, b]) => a != 0xff && !(a == 0xfe && b & 0xc0 == 0x80),
            _ => false,
        },
        _ => false,
    }
}

impl Backend for Host {
    fn describe(&self) -> String {
        format!("host nfqueue {}", self.queue.num())
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.queue.as_fd()]
    }

    fn receive(&mut self, engine: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
        for _ in 0..RX_BATCH {
            let pkt = match self.queue.recv() {
                Ok(Some(p)) => p,
                Ok(None) => return false,
                Err(_) => {
                    self.read_errors += 1;
                    return false;
                }
            };
            let Ok(parsed) = wire::parse(LinkType::RawIp, pkt.payload()) else {
                // Not something we can classify: let it go as it came.
                self.not_ip += 1;
                self.verdicts.push((pkt, Verdict::Accept));
                continue;
            };
            let (dir, recv_if, xmit_if) = match pkt.hook() {
                Hook::PreRouting | Hook::Input => (Direction::In, pkt.indev().cloned(), None),
                Hook::Forward => (Direction::Out, pkt.indev().cloned(), pkt.outdev().cloned()),
                _ => (Direction::Out, None, pkt.outdev().cloned()),
            };
            let info = PacketInfo {
                len: u32::try_from(pkt.original_len()).unwrap_or(parsed.len),
                key: parsed.key,
                dir,
                recv_if: self.iface(engine, recv_if.as_ref()),
                xmit_if: self.iface(engine, xmit_if.as_ref()),
            };
            let body = if self.copies.is_some()
                && pkt.hook() == Hook::Output
                && !pkt.is_truncated()
                && !pkt.is_gso()
                && routable_by_destination(pkt.payload())
            {
                // The original is freed now (its socket's charge with it);
                // the copy goes out when it leaves its pipe.
                let mut pkt = pkt;
                let copy = pkt.take_payload();
                self.verdicts.push((pkt, Verdict::Drop));
                Body::Ip(IpCopy(copy))
            } else {
                Body::Host(pkt)
            };
            let carrier = Carrier {
                backend: 0,
                out_pass: None,
                id: 0,
                copy: false,
                reader: 0,
                body,
            };
            arrivals.push(Arrival {
                info,
                carrier,
                stamp_ns: 0,
            });
        }
        true
    }

    fn complete(&mut self, carrier: Carrier, deliver: bool) {
        match carrier.body {
            Body::Host(pkt) => {
                let v = if deliver {
                    Verdict::Accept
                } else {
                    Verdict::Drop
                };
                self.verdicts.push((pkt, v));
            }
            Body::Ip(IpCopy(copy)) if deliver => self.outbox.push(copy),
            // A dropped copy: its original is already gone.
            _ => {}
        }
    }

    fn flush(&mut self) {
        if let Some(sender) = &self.copies {
            for copy in self.outbox.drain(..) {
                match sender.send(&copy) {
                    Ok(()) => self.copies_sent += 1,
                    Err(_) => self.copy_errors += 1,
                }
            }
        }
        if !self.verdicts.is_empty() {
            // A failed batch is counted by the queue (verdict_errors); the
            // kernel then drops or, with fail-open, accepts those packets.
            let _ = self.queue.verdict_batch(self.verdicts.drain(..));
        }
    }

    fn stats(&mut self) -> Vec<(String, u64)> {
        let c = self.queue.counters();
        let mut out = vec![
            ("received".to_string(), c.received),
            ("accepted".to_string(), c.accepted),
            ("dropped".to_string(), c.dropped),
            ("not_ip_accepted".to_string(), self.not_ip),
            ("enobufs".to_string(), c.enobufs),
            ("verdict_errors".to_string(), c.verdict_errors),
            ("read_errors".to_string(), self.read_errors),
        ];
        if self.copies.is_some() {
            // Each copy's original counts among `dropped` above.
            out.push(("copies_sent".into(), self.copies_sent));
            out.push(("copy_errors".into(), self.copy_errors));
        }
        if let Some(k) = self.queue.kernel_stats() {
            out.push(("kernel_queue_dropped".into(), u64::from(k.queue_dropped)));
            out.push(("kernel_user_dropped".into(), u64::from(k.user_dropped)));
        }
        out
    }

    fn stop_intercepting(&mut self) {
        if let Some(i) = self.interception.take() {
            if let Err(e) = i.remove() {
                say!("dummynet: removing the interception rules: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1];
        p.extend_from_slice(&dst);
        p
    }

    fn v6(dst: [u8; 2]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
        p.extend_from_slice(&[0; 16]);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&[0; 14]);
        p
    }

    #[test]
    fn only_destinations_that_need_no_interface_are_copied() {
        assert!(routable_by_destination(&v4([10, 0, 0, 2])));
        assert!(!routable_by_destination(&v4([224, 0, 0, 251])));
        assert!(!routable_by_destination(&v4([255, 255, 255, 255])));
        assert!(routable_by_destination(&v6([0x20, 0x01])));
        assert!(!routable_by_destination(&v6([0xff, 0x02])));
        assert!(!routable_by_destination(&v6([0xfe, 0x80])));
        assert!(!routable_by_destination(&v6([0xfe, 0xbf])));
        assert!(routable_by_destination(&v6([0xfe, 0xc0])));
        // Too short, or not IP: never.
        assert!(!routable_by_destination(&v4([10, 0, 0, 2])[..19]));
        assert!(!routable_by_destination(&[0x50; 40]));
        assert!(!routable_by_destination(&[]));
    }
}
