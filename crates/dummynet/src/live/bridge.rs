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

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc::Sender;

use dummynet_engine::wire::{self, LinkType, WireError};
use dummynet_engine::{Direction, Engine, IfaceId, PacketInfo};
use dummynet_io::afpacket::{Port, PortError, PortOptions, RxFrame, TxFrame, VnetHdr};

use super::{Arrival, Backend, Body, Carrier, LateReading};

/// Frames read per port per turn of the data plane.
const RX_BATCH: usize = 64;

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    non_ip: u64,
    malformed: u64,
    tx_failed: u64,
}

pub struct Bridge {
    ports: [Port; 2],
    ifaces: [IfaceId; 2],
    rx: Vec<RxFrame>,
    tx: [Vec<(Vec<u8>, Option<VnetHdr>)>; 2],
    counters: Counters,
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
        let pa = Port::open(a, opts.clone())?;
        let pb = Port::open(b, opts)?;
        Ok(Bridge {
            ifaces: [engine.iface(a), engine.iface(b)],
            ports: [pa, pb],
            rx: Vec::with_capacity(RX_BATCH),
            tx: [Vec::new(), Vec::new()],
            counters: Counters::default(),
            bursts: None,
            told_both_passes: false,
        })
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
    fn describe(&self) -> String {
        format!(
            "bridge {} <-> {}",
            self.ports[0].ifname(),
            self.ports[1].ifname()
        )
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.ports.iter().map(|p| p.as_fd()).collect()
    }

    fn receive(&mut self, _engine: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
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
                            body: Body::Frame {
                                buf: frame.data,
                                vnet: frame.vnet,
                                port: other as u8,
                            },
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
                        self.tx[other].push((frame.data, frame.vnet));
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
                eprintln!("dummynet: warning: {}", both_passes_warning(&rules));
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
        if let Body::Frame { buf, vnet, port } = carrier.body {
            let port = usize::from(port).min(1);
            if deliver {
                self.tx[port].push((buf, vnet));
            } else {
                self.ports[port].recycle(buf);
            }
        }
    }

    fn flush(&mut self) {
        for side in 0..2 {
            if self.tx[side].is_empty() {
                continue;
            }
            let batch = std::mem::take(&mut self.tx[side]);
            let mut start = 0;
            while start < batch.len() {
                let frames: Vec<TxFrame<'_>> = batch[start..]
                    .iter()
                    .map(|(data, vnet)| TxFrame { data, vnet: *vnet })
                    .collect();
                match self.ports[side].send_batch(&frames) {
                    Ok(n) => start += n,
                    Err(e) => {
                        // The refused frame is dropped and counted; the rest
                        // get another try.
                        self.counters.tx_failed += 1;
                        start += e.sent + 1;
                    }
                }
            }
            for (buf, _) in batch {
                self.ports[side].recycle(buf);
            }
        }
    }

    fn stats(&mut self) -> Vec<(String, u64)> {
        let mut out = vec![
            ("non_ip_forwarded".to_string(), self.counters.non_ip),
            ("malformed_dropped".to_string(), self.counters.malformed),
            ("tx_failed".to_string(), self.counters.tx_failed),
        ];
        for p in &mut self.ports {
            let name = p.ifname().to_string();
            if let Ok(s) = p.stats() {
                out.push((format!("{name}.rx_frames"), s.rx_frames));
                out.push((format!("{name}.rx_gso_frames"), s.rx_gso_frames));
                out.push((format!("{name}.tx_frames"), s.tx_frames));
                out.push((format!("{name}.kernel_drops"), s.kernel_drops));
                out.push((format!("{name}.rx_truncated"), s.rx_truncated));
            }
        }
        out
    }
}
