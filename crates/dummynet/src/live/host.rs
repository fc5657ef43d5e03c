//! Host mode: this machine's own traffic, as FreeBSD's `ipfw add pipe 1 ...
//! out` shapes it. iptables sends packets to an NFQUEUE; each one is held by
//! the kernel while the engine holds our copy of its facts, and gets its
//! verdict (ACCEPT or DROP) when it leaves its pipe.
//!
//! Hooks map to ipfw's directions: INPUT is `in` (with `recv` the incoming
//! interface), OUTPUT is `out` (with `xmit`), FORWARD is `out` with both.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};

use dummynet_engine::wire::{self, LinkType};
use dummynet_engine::{Direction, Engine, IfaceId, PacketInfo};
use dummynet_io::nfqueue::{
    Hook, HostPacket, HostQueue, InterceptSpec, Interception, Interface, NfqError, QueueOptions,
    Verdict,
};

use super::{Backend, Body, Carrier};

/// Packets read from the queue per turn of the data plane.
const RX_BATCH: usize = 64;

pub struct Host {
    queue: HostQueue,
    interception: Option<Interception>,
    ifaces: HashMap<u32, IfaceId>,
    verdicts: Vec<(HostPacket, Verdict)>,
    not_ip: u64,
    read_errors: u64,
}

impl Host {
    /// Binds the queue first, then installs the iptables rules, so no packet
    /// is queued before someone reads the queue.
    pub fn open(spec: &InterceptSpec) -> Result<Host, NfqError> {
        let queue = HostQueue::open(spec.queue, QueueOptions::default())?;
        let interception = Interception::install(spec)?;
        Ok(Host {
            queue,
            interception: Some(interception),
            ifaces: HashMap::new(),
            verdicts: Vec::new(),
            not_ip: 0,
            read_errors: 0,
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

impl Backend for Host {
    fn describe(&self) -> String {
        format!("host nfqueue {}", self.queue.num())
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.queue.as_fd()]
    }

    fn receive(&mut self, engine: &mut Engine<Carrier>, arrivals: &mut Vec<(PacketInfo, Carrier)>) {
        for _ in 0..RX_BATCH {
            let pkt = match self.queue.recv() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(_) => {
                    self.read_errors += 1;
                    break;
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
            let carrier = Carrier {
                backend: 0,
                out_pass: None,
                body: Body::Host(pkt),
            };
            arrivals.push((info, carrier));
        }
    }

    fn complete(&mut self, carrier: Carrier, deliver: bool) {
        if let Body::Host(pkt) = carrier.body {
            let v = if deliver {
                Verdict::Accept
            } else {
                Verdict::Drop
            };
            self.verdicts.push((pkt, v));
        }
    }

    fn flush(&mut self) {
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
        if let Some(k) = self.queue.kernel_stats() {
            out.push(("kernel_queue_dropped".into(), u64::from(k.queue_dropped)));
            out.push(("kernel_user_dropped".into(), u64::from(k.user_dropped)));
        }
        out
    }

    fn stop_intercepting(&mut self) {
        if let Some(i) = self.interception.take() {
            if let Err(e) = i.remove() {
                eprintln!("dummynet: removing the iptables rules: {e}");
            }
        }
    }
}
