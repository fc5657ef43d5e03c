//! Live tests of the AF_XDP ports, in three network namespaces of the
//! test's own, removed on drop whether the test passed or not:
//!
//! ```text
//!   ns A                 ns M (XdpPorts)              ns B
//!   va 10.78.0.1/24 ──── pa  ⇄  one UMEM  ⇄  pb ──── vb 10.78.0.2/24
//! ```
//!
//! A thread in M forwards between the ports with nothing in between (no
//! engine): what crosses, how the UMEM is accounted, and that a UMEM with
//! no free chunk drops instead of waiting. Every loop is bounded in count
//! and time. Without root, `ip` or AF_XDP the tests say why and pass.

// Each test binary compiles common on its own; this one does not use all
// of it.
#[allow(dead_code)]
mod common;

use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::*;
use dummynet_io::xdp::{XdpFrame, XdpOptions, XdpPorts, XskStats};
use nix::poll::{poll, PollFd, PollFlags};

const B_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
/// The length of the flood's frames: 64 bytes of UDP payload.
const FLOOD_FRAME: usize = 14 + 20 + 8 + 64;
const LIMIT: Duration = Duration::from_secs(5);
/// How long a test's bridge forwards at most.
const BRIDGE_LIMIT: Duration = Duration::from_secs(20);

/// The fixture of this file: `dnio-xdp-...` namespaces, 10.78.0.0/24.
fn fixture(test: &str) -> Option<Fixture> {
    common::fixture(test, "xdp", "10.78.0")
}

/// The thread forwarding between the ports.
type Forwarder = JoinHandle<Result<Report, String>>;

#[derive(Debug)]
struct Report {
    stats: [XskStats; 2],
    forwarded: u64,
    /// Frames held back (never sent) by `hold`.
    held: usize,
    /// (free, lent, sending, held) once the held frames are dropped.
    chunks: (u64, u64, u64, u64),
    /// Every free chunk, then filled with a full-size frame of its own
    /// pattern, starts it after the kernel's headroom (so it ends inside
    /// its chunk) and still held its own bytes after all were written: no
    /// two frames overlap (the chunks that came back from dropped frames
    /// included).
    free_chunks_apart: bool,
}

/// Forwards between pa and pb until stopped or [`BRIDGE_LIMIT`]; the
/// first `hold` frames of [`FLOOD_FRAME`] bytes read are kept (as a long
/// delay line would), not sent.
fn start_bridge(
    fx: &Fixture,
    opts: XdpOptions,
    hold: usize,
) -> Result<(Arc<AtomicBool>, Forwarder), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let h = in_netns(&fx.m, move || {
        let mut ports = match XdpPorts::open("pa", "pb", &opts) {
            Ok(p) => {
                let _ = ready_tx.send(Ok(p.mode().to_string()));
                p
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return Err(e.to_string());
            }
        };
        let start = Instant::now();
        let mut batch: Vec<XdpFrame> = Vec::with_capacity(64);
        let mut kept = Vec::new();
        let mut forwarded = 0;
        while !flag.load(Ordering::Relaxed) && start.elapsed() < BRIDGE_LIMIT {
            let mut fds = [
                PollFd::new(ports.fd(0), PollFlags::POLLIN),
                PollFd::new(ports.fd(1), PollFlags::POLLIN),
            ];
            poll(&mut fds, 20u16).map_err(|e| format!("poll: {e}"))?;
            for side in 0..2 {
                ports.recv_batch(side, &mut batch, 64);
                for f in batch.drain(..) {
                    if kept.len() < hold && f.len() == FLOOD_FRAME {
                        kept.push(f);
                    } else if ports.send(1 - side, f) {
                        forwarded += 1;
                    }
                }
                ports.flush(1 - side);
            }
        }
        let held = kept.len();
        // Dropped, not handed back: the chunks come back as strays.
        drop(kept);
        ports.flush(0);
        ports.flush(1);
        let chunks = ports.chunks();
        let mut filled = Vec::new();
        for i in 0..chunks.0 {
            let pattern = vec![(i % 251) as u8; 1792];
            if let Some(f) = ports.alloc(&pattern) {
                filled.push(f);
            }
        }
        let free_chunks_apart = filled.len() as u64 == chunks.0
            && filled.iter().all(|f| f.headroom(2048) == 256)
            && filled
                .iter()
                .enumerate()
                .all(|(i, f)| f.iter().all(|&b| b == (i % 251) as u8));
        for f in filled {
            ports.recycle(f);
        }
        Ok(Report {
            stats: [ports.stats(0), ports.stats(1)],
            forwarded,
            held,
            chunks,
            free_chunks_apart,
        })
    });
    match ready_rx.recv_timeout(LIMIT) {
        Ok(Ok(mode)) => {
            eprintln!("xdp ports: {mode}");
            Ok((stop, h))
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(format!("bridge did not start: {e}")),
    }
}

/// Whether `err`, from opening the ports, says this kernel has no AF_XDP
/// or BPF for us (the test is then skipped): anything else fails it.
fn unsupported(test: &str, err: &str) -> bool {
    let no = ["EAFNOSUPPORT", "ENOSYS", "EPERM", "no AF_XDP"]
        .iter()
        .any(|w| err.contains(w));
    if no {
        eprintln!("{test}: skipped (AF_XDP cannot be used here: {err})");
    }
    no
}

fn ping(fx: &Fixture, count: u32) -> u32 {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &fx.a, "ping", "-n", "-q", "-i", "0.1", "-W", "1", "-w", "4",
        ])
        .args(["-c", &count.to_string(), "10.78.0.2"])
        .output();
    let Ok(out) = out else { return 0 };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split(',')
        .find_map(|p| p.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn ping_udp_and_tcp_cross_the_xdp_ports() {
    let Some(fx) = fixture("ping_udp_and_tcp_cross_the_xdp_ports") else {
        return;
    };
    let (stop, h) = match start_bridge(&fx, XdpOptions::default(), 0) {
        Err(e) if unsupported("ping_udp_and_tcp_cross_the_xdp_ports", &e) => return,
        r => r.expect("xdp ports"),
    };
    let replies = ping(&fx, 3);
    eprintln!("ping: {replies} replies");
    // UDP: datagrams with a checksum the sender's stack left to offload.
    let server = in_netns(&fx.b, || {
        let s = UdpSocket::bind((B_IP, 7000)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 2048];
        let mut got = 0;
        for _ in 0..12 {
            if got == 10 {
                break;
            }
            if let Ok(n) = s.recv(&mut buf) {
                if buf[..n].iter().all(|&b| b == 0x5a) && n == 1000 {
                    got += 1;
                }
            }
        }
        Ok(got)
    });
    thread::sleep(Duration::from_millis(100));
    let client = in_netns(&fx.a, || {
        let s = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
        for _ in 0..10 {
            s.send_to(&[0x5a; 1000], (B_IP, 7000))
                .map_err(|e| e.to_string())?;
            thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    });
    join(client).expect("udp client");
    let udp = join(server).expect("udp server");
    eprintln!("udp: {udp} datagrams");
    // TCP: 2 MB, checked byte for byte.
    let total = 2_000_000usize;
    let server = in_netns(&fx.b, move || {
        let l = TcpListener::bind((B_IP, 7001)).map_err(|e| e.to_string())?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let mut c = loop {
            match l.accept() {
                Ok((c, _)) => break c,
                Err(_) if start.elapsed() < LIMIT => thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("accept: {e}")),
            }
        };
        c.set_nonblocking(false).map_err(|e| e.to_string())?;
        c.set_read_timeout(Some(Duration::from_secs(3)))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 65536];
        let mut n = 0usize;
        while n < total {
            match std::io::Read::read(&mut c, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    if buf[..k]
                        .iter()
                        .enumerate()
                        .any(|(i, &b)| b != ((n + i) % 251) as u8)
                    {
                        return Err(format!("byte {n}+ differs"));
                    }
                    n += k;
                }
            }
        }
        Ok(n)
    });
    thread::sleep(Duration::from_millis(100));
    let client = in_netns(&fx.a, move || {
        let mut c = TcpStream::connect_timeout(&(B_IP, 7001).into(), Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        c.set_write_timeout(Some(Duration::from_secs(3)))
            .map_err(|e| e.to_string())?;
        let data: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        std::io::Write::write_all(&mut c, &data).map_err(|e| e.to_string())
    });
    let sent = join(client);
    let tcp = join(server);
    stop.store(true, Ordering::Relaxed);
    let report = join(h).expect("bridge");
    eprintln!("{report:?}");
    assert_eq!(replies, 3, "ping replies");
    assert_eq!(udp, 10, "UDP datagrams intact");
    sent.expect("tcp send");
    assert_eq!(tcp, Ok(total), "TCP bytes intact");
    assert!(report.forwarded >= 3 * 2 + 10);
    let (free, lent, sending, held) = report.chunks;
    assert_eq!(
        held, 0,
        "no frame is held: every chunk is free or the kernel's"
    );
    assert_eq!(free + lent + sending, 16384);
    assert!(lent <= 2 * 2048);
}

/// A UMEM whose chunks are nearly all held (as by a long delay line)
/// under a flood: the kernel drops what it has no chunk for and counts
/// it; the ports go on forwarding with what is left, and the held chunks
/// come back when their frames are dropped.
#[test]
fn a_full_umem_drops_and_counts_never_stalls() {
    let Some(fx) = fixture("a_full_umem_drops_and_counts_never_stalls") else {
        return;
    };
    let opts = XdpOptions {
        frames: 256,
        ring: 64,
        ..XdpOptions::default()
    };
    let (stop, h) = match start_bridge(&fx, opts, 190) {
        Err(e) if unsupported("a_full_umem_drops_and_counts_never_stalls", &e) => return,
        r => r.expect("xdp ports"),
    };
    // Resolve B's address first (ARP crosses the ports too).
    let _ = ping(&fx, 1);
    let flood = in_netns(&fx.a, || {
        let s = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        for _ in 0..5000 {
            // ENOBUFS under a flood is fine: the point is pressure.
            let _ = s.send_to(&[7; 64], (B_IP, 9));
        }
        Ok(())
    });
    join(flood).expect("flood");
    thread::sleep(Duration::from_millis(200));
    let replies = ping(&fx, 3);
    stop.store(true, Ordering::Relaxed);
    let report = join(h).expect("bridge");
    eprintln!("{report:?}");
    assert_eq!(report.held, 190, "all but what the fill rings hold");
    assert!(
        report.stats[0].rx_fill_ring_empty > 0,
        "the kernel counted frames it had no chunk for"
    );
    assert_eq!(replies, 3, "still forwarding with the chunks left");
    let (free, lent, sending, held) = report.chunks;
    assert_eq!(held, 0, "the held frames' chunks came back");
    assert_eq!(free + lent + sending, 256);
    assert!(
        report.free_chunks_apart,
        "full-size frames in the free chunks cross their chunk or overlap"
    );
}

/// Raw frames sent by an AF_PACKET port on `from` (in namespace `src`)
/// and read by one on `to` (in `dst`): those whose source MAC is
/// [`TEST_SRC`], in arrival order.
fn raw_across(
    src: &str,
    from: &'static str,
    dst: &str,
    to: &'static str,
    frames: Vec<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, String> {
    common::raw_across((src, from), (dst, to), frames, |f| {
        f.get(6..12) == Some(&TEST_SRC[..])
    })
}

const TEST_SRC: [u8; 6] = [0x02, 0xdd, 0, 0, 0, 0x0a];

/// Frames of every kind the bridge meets: a non-IP one (EtherType 0x88b5,
/// which crosses untouched) and UDP/IPv4 ones with correct checksums
/// (which the ports' checksum pass must leave as they are), of lengths
/// from the minimum to the MTU, to a MAC nobody has.
fn test_frames(seed: u8) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (k, len) in [60usize, 61, 128, 999, 1514].into_iter().enumerate() {
        let mut f = vec![0x02, 0xdd, 0, 0, 0, 0x99];
        f.extend_from_slice(&TEST_SRC);
        f.extend_from_slice(&[0x88, 0xb5]);
        f.extend((0..len - 14).map(|i| (i as u8).wrapping_add(seed)));
        out.push(f);
        let payload = len - 14 - 20 - 8;
        let mut u = vec![0x02, 0xdd, 0, 0, 0, 0x99];
        u.extend_from_slice(&TEST_SRC);
        u.extend_from_slice(&[0x08, 0x00]);
        let ip_len = (20 + 8 + payload) as u16;
        u.extend_from_slice(&[0x45, 0]);
        u.extend_from_slice(&ip_len.to_be_bytes());
        u.extend_from_slice(&[
            0, k as u8, 0x40, 0, 64, 17, 0, 0, 10, 78, 0, 1, 10, 78, 0, 9,
        ]);
        let mut sum = 0u32;
        for w in u[14..34].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        u[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        u.extend_from_slice(&[0x30, 0x39, 0x00, 0x09]);
        u.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend((0..payload).map(|i| (i as u8) ^ seed));
        assert!(dummynet_io::xdp::finish_checksum(&mut u));
        out.push(u);
    }
    out
}

/// Frames cross the ports byte for byte, each way, in order.
#[test]
fn frames_cross_byte_exact_both_ways() {
    let Some(fx) = fixture("frames_cross_byte_exact_both_ways") else {
        return;
    };
    let (stop, h) = match start_bridge(&fx, XdpOptions::default(), 0) {
        Err(e) if unsupported("frames_cross_byte_exact_both_ways", &e) => return,
        r => r.expect("xdp ports"),
    };
    let ab = raw_across(&fx.a, "va", &fx.b, "vb", test_frames(1));
    let ba = raw_across(&fx.b, "vb", &fx.a, "va", test_frames(7));
    stop.store(true, Ordering::Relaxed);
    join(h).expect("bridge");
    assert_eq!(ab.expect("A to B"), test_frames(1), "A to B");
    assert_eq!(ba.expect("B to A"), test_frames(7), "B to A");
}
