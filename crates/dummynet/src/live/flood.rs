//! `dummynet flood`: a packet generator for live benchmarks.
//!
//! Sends one UDP flow of fixed-size Ethernet frames out of an interface with
//! batched `sendmmsg` on an AF_PACKET socket, as fast as it can or at a set
//! rate, for a bounded time. A socket-based generator (iperf3 -u) spends most
//! of its core in the UDP stack and tops out near 300 kpps on the 2-vCPU VMs
//! this project runs on, which is below what the kernel bridge and dummynet
//! forward; this one is not the bottleneck.
//!
//! The destination MAC defaults to a locally administered address no host
//! owns, so the receiving stack drops the frames at once as "other host":
//! the sink costs almost nothing and the forwarder between is what is
//! measured. It sends only where it is told to, and the bench script runs
//! it inside a namespace it created.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use dummynet_io::afpacket::{Port, PortOptions, TxFrame};

/// Frames per `sendmmsg`.
const BATCH: usize = 64;

#[derive(Debug, clap::Args)]
pub struct FloodArgs {
    /// Interface to send on.
    pub iface: String,
    /// How long to send, in seconds (at most 60).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Frame size in bytes, Ethernet header included, without FCS (60..=1514).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Frames per second; 0 sends as fast as the socket takes them.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Destination MAC address.
    #[arg(long, default_value = "02:00:00:00:00:02")]
    pub dst_mac: String,
    /// Source and destination IPv4 addresses of the UDP flow.
    #[arg(long, default_value = "10.203.0.1")]
    pub src: Ipv4Addr,
    #[arg(long, default_value = "10.203.0.2")]
    pub dst: Ipv4Addr,
    /// Number of UDP flows (1..=65535): the source port cycles from 1024
    /// over this many values, frame by frame, so that a `mask src-port`
    /// makes this many dynamic queues.
    #[arg(long, default_value_t = 1)]
    pub flows: u16,
}

pub fn run(a: FloodArgs) -> ExitCode {
    match flood(&a) {
        Ok(r) => {
            println!(
                "sent {} frames of {} B in {:.3} s: {:.0} frames/s ({} refused)",
                r.sent,
                a.size,
                r.elapsed.as_secs_f64(),
                r.sent as f64 / r.elapsed.as_secs_f64().max(1e-9),
                r.refused
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet flood: {e}");
            ExitCode::from(2)
        }
    }
}

pub struct FloodReport {
    pub sent: u64,
    pub refused: u64,
    pub elapsed: Duration,
}

pub fn flood(a: &FloodArgs) -> Result<FloodReport, String> {
    if !(0.0..=60.0).contains(&a.seconds) || a.seconds.is_nan() {
        return Err(format!("--seconds {}: allowed 0 to 60", a.seconds));
    }
    if !(60..=1514).contains(&a.size) {
        return Err(format!(
            "--size {}: an Ethernet frame without FCS is 60 to 1514 bytes",
            a.size
        ));
    }
    if a.flows == 0 {
        return Err("--flows 0: allowed 1 to 65535".into());
    }
    let dst_mac = parse_mac(&a.dst_mac)?;
    let frames = flow_frames(&udp_frame(dst_mac, a.src, a.dst, a.size), a.flows);
    // Send only: no promiscuous mode, and no receive ring to fill.
    let opts = PortOptions {
        promiscuous: false,
        rx_ring_frames: 0,
        ..PortOptions::default()
    };
    let mut port = Port::open(&a.iface, opts).map_err(|e| e.to_string())?;
    let mut batch: Vec<TxFrame<'_>> = Vec::with_capacity(BATCH);
    let mut next_flow = 0usize;
    let start = Instant::now();
    let end = Duration::from_secs_f64(a.seconds);
    let (mut sent, mut refused) = (0u64, 0u64);
    loop {
        let elapsed = start.elapsed();
        if elapsed >= end {
            break;
        }
        let mut n = BATCH;
        if a.rate > 0 {
            // Send what the rate allows by now; sleep a little if nothing.
            let due = (elapsed.as_secs_f64() * a.rate as f64) as u64;
            let behind = due.saturating_sub(sent + refused);
            if behind == 0 {
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            n = n.min(usize::try_from(behind).unwrap_or(BATCH));
        }
        batch.clear();
        for _ in 0..n {
            batch.push(TxFrame {
                data: &frames[next_flow],
                vnet: None,
            });
            next_flow = (next_flow + 1) % frames.len();
        }
        match port.send_batch(&batch) {
            Ok(k) => sent += k as u64,
            Err(e) => {
                // A full device queue: count the frame and go on.
                sent += e.sent as u64;
                refused += 1;
            }
        }
    }
    Ok(FloodReport {
        sent,
        refused,
        elapsed: start.elapsed(),
    })
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("--dst-mac {s:?}: expected six hex bytes like 02:00:00:00:00:02");
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

/// An Ethernet + IPv4 + UDP frame of `size` bytes with a valid IP checksum
/// and a zero (absent) UDP checksum.
fn udp_frame(dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (size - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&9u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// `flows` copies of the UDP frame `frame`, with source ports from 1024 on.
/// They differ only in that port, which no checksum covers (the UDP
/// checksum is left absent).
fn flow_frames(frame: &[u8], flows: u16) -> Vec<Vec<u8>> {
    (0..flows)
        .map(|i| {
            let mut f = frame.to_vec();
            f[34..36].copy_from_slice(&1024u16.wrapping_add(i).to_be_bytes());
            f
        })
        .collect()
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_engine::wire::{self, LinkType};

    #[test]
    fn the_frame_parses_as_the_flow_asked_for() {
        let f = udp_frame(
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            64,
        );
        assert_eq!(f.len(), 64);
        let p = wire::parse(LinkType::Ethernet, &f).expect("a valid frame");
        assert_eq!(p.len, 50);
        assert_eq!(p.key.proto, 17);
        // A correct header checksums to zero.
        assert_eq!(checksum(&f[14..34]), 0);
        let flows = flow_frames(&f, 3);
        let ports: Vec<u16> = flows
            .iter()
            .map(|g| {
                let p = wire::parse(LinkType::Ethernet, g).expect("a valid frame");
                assert_eq!(p.key.dport, 9);
                p.key.sport
            })
            .collect();
        assert_eq!(ports, [1024, 1025, 1026]);
    }

    #[test]
    fn bad_mac_and_size_are_refused() {
        assert!(parse_mac("02:00:00:00:00").is_err());
        assert!(parse_mac("02:00:00:00:00:zz").is_err());
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Ok([2, 0, 0, 0, 0, 10]));
        let a = FloodArgs {
            iface: "lo".into(),
            seconds: 1.0,
            size: 20,
            rate: 0,
            dst_mac: "02:00:00:00:00:02".into(),
            src: Ipv4Addr::LOCALHOST,
            dst: Ipv4Addr::LOCALHOST,
            flows: 1,
        };
        assert!(flood(&a).is_err());
        let no_flows = FloodArgs {
            size: 64,
            flows: 0,
            ..a
        };
        let e = flood(&no_flows).err().unwrap_or_default();
        assert!(e.contains("--flows 0"), "{e}");
    }
}
