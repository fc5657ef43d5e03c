//! Live tests of the AF_PACKET bridge ports.
//!
//! Each test builds its own three network namespaces with the `ip` command,
//! named after the pid and a counter, and removes them on drop, failed test or
//! not:
//!
//! ```text
//!   ns A                 ns M (the bridge)            ns B
//!   va 10.77.0.1/24 ──── pa  ⇄ Port ⇄ Port  pb ──── vb 10.77.0.2/24
//! ```
//!
//! The ports run in a thread that has `setns`'d into M; traffic comes from
//! threads in A and B (std sockets) or `ip netns exec A ping`. Every loop is
//! bounded in count and in time. Without root or `ip` the tests print why and
//! pass.

// Each test binary compiles common on its own; this one does not use all
// of it.
#[allow(dead_code)]
mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::*;
use dummynet_io::afpacket::{
    LinkState, Port, PortError, PortOptions, PortStats, RxFrame, TxFrame, VnetHdr,
    DEFAULT_RX_RING_FRAMES, DEFAULT_RX_RING_FRAME_SIZE,
};
use nix::poll::{poll, PollFd, PollFlags};

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const LIMIT: Duration = Duration::from_secs(5);

/// The fixture of this file: `dnio-af-...` namespaces, 10.77.0.0/24.
fn fixture(test: &str) -> Option<Fixture> {
    common::fixture(test, "af", "10.77.0")
}

/// What one direction of the bridge saw.
#[derive(Debug, Default, Clone)]
struct Direction {
    frames: u64,
    bytes: u64,
    wire_bytes: u64,
    arp: u64,
    gso: u64,
    max_len: usize,
    max_gso_size: u16,
    /// GSO frames whose wire_len was larger than their length.
    gso_wire_longer: u64,
    /// GSO frames whose kernel hdr_len equals the headers read from the frame.
    hdr_len_exact: u64,
    /// recv_batch calls that returned frames.
    batches: u64,
    /// Frames refused on send, with the reason.
    drops: Vec<String>,
    /// Frames whose receive time (`stamp_ns`) lay between the previous read
    /// and this one, as it must; and the others.
    stamped_in_order: u64,
    stamped_wrong: u64,
}

#[derive(Debug)]
struct Report {
    a_to_b: Direction,
    b_to_a: Direction,
    stats_a: PortStats,
    stats_b: PortStats,
    ignores_outgoing: bool,
    /// First to last frame forwarded.
    active: Duration,
}

struct Bridge {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Report, String>>,
}

impl Bridge {
    /// Opens ports on pa and pb in `fx.m` and forwards between them until
    /// stopped, `max_frames` frames, or 5 s.
    fn start(fx: &Fixture, opts: PortOptions, max_frames: u64) -> Result<Bridge, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let flag = stop.clone();
        let handle = in_netns(&fx.m, move || {
            let opened = Port::open("pa", opts.clone())
                .and_then(|a| Ok((a, Port::open("pb", opts)?)))
                .map_err(|e| e.to_string());
            let (pa, pb) = match opened {
                Ok(p) => {
                    let _ = ready_tx.send(Ok(()));
                    p
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.clone()));
                    return Err(e);
                }
            };
            run_bridge(pa, pb, &flag, max_frames)
        });
        match ready_rx.recv_timeout(LIMIT) {
            Ok(Ok(())) => Ok(Bridge { stop, handle }),
            Ok(Err(e)) => Err(format!("opening the ports: {e}")),
            Err(e) => Err(format!("bridge did not start: {e}")),
        }
    }

    fn finish(self) -> Result<Report, String> {
        self.stop.store(true, Ordering::Relaxed);
        join(self.handle)
    }
}

fn run_bridge(
    mut pa: Port,
    mut pb: Port,
    stop: &AtomicBool,
    max_frames: u64,
) -> Result<Report, String> {
    let start = Instant::now();
    let mut a_to_b = Direction::default();
    let mut b_to_a = Direction::default();
    let mut batch = Vec::with_capacity(64);
    let (mut first, mut last) = (None, None);
    while !stop.load(Ordering::Relaxed)
        && start.elapsed() < LIMIT
        && a_to_b.frames + b_to_a.frames < max_frames
    {
        let mut fds = [
            PollFd::new(pa.as_fd(), PollFlags::POLLIN),
            PollFd::new(pb.as_fd(), PollFlags::POLLIN),
        ];
        poll(&mut fds, 20u16).map_err(|e| format!("poll: {e}"))?;
        let moved = forward(&mut pa, &mut pb, &mut batch, &mut a_to_b)?
            + forward(&mut pb, &mut pa, &mut batch, &mut b_to_a)?;
        if moved > 0 {
            let now = Instant::now();
            first.get_or_insert(now);
            last = Some(now);
        }
    }
    let active = match (first, last) {
        (Some(f), Some(l)) => l - f,
        _ => Duration::ZERO,
    };
    Ok(Report {
        a_to_b,
        b_to_a,
        stats_a: pa.stats().map_err(|e| e.to_string())?,
        stats_b: pb.stats().map_err(|e| e.to_string())?,
        ignores_outgoing: pa.ignores_outgoing_in_kernel(),
        active,
    })
}

/// One batch from `from` to `to`; refused frames are counted with their
/// reason and not retried.
fn forward(
    from: &mut Port,
    to: &mut Port,
    batch: &mut Vec<RxFrame>,
    dir: &mut Direction,
) -> Result<usize, String> {
    batch.clear();
    let realtime = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    // The ring slots read below were written at most a few seconds ago.
    let before = realtime().saturating_sub(LIMIT.as_nanos() as u64);
    let n = from.recv_batch(batch, 64).map_err(|e| e.to_string())?;
    let after = realtime();
    if n > 0 {
        dir.batches += 1;
    }
    for f in batch.iter() {
        if from.stamps_frames() && (before..=after).contains(&f.stamp_ns) {
            dir.stamped_in_order += 1;
        } else {
            dir.stamped_wrong += 1;
        }
        dir.frames += 1;
        dir.bytes += f.data.len() as u64;
        dir.wire_bytes += f.wire_len;
        dir.max_len = dir.max_len.max(f.data.len());
        if f.data.get(12..14) == Some(&[0x08, 0x06]) {
            dir.arp += 1;
        }
        if let Some(v) = f.vnet.filter(|v| v.is_gso()) {
            dir.gso += 1;
            dir.max_gso_size = dir.max_gso_size.max(v.gso_size);
            if f.wire_len > f.data.len() as u64 {
                dir.gso_wire_longer += 1;
            }
            if v.headers_len(&f.data) == Some(usize::from(v.hdr_len)) {
                dir.hdr_len_exact += 1;
            }
        }
    }
    let frames: Vec<TxFrame<'_>> = batch.iter().map(RxFrame::as_tx).collect();
    let mut off = 0;
    while off < frames.len() {
        match to.send_batch(&frames[off..]) {
            Ok(k) => off += k,
            Err(e) => {
                dir.drops.push(e.error.to_string());
                off += e.sent + 1;
            }
        }
    }
    for f in batch.drain(..) {
        from.recycle(f.data);
    }
    Ok(n)
}

/// `ping -c count` from A; returns how many replies came back.
fn ping(fx: &Fixture, to: &str, count: u32, size: u32) -> Result<u32, String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &fx.a, "ping", "-n", "-q", "-i", "0.2", "-W", "1",
        ])
        .args([
            "-w",
            "4",
            "-c",
            &count.to_string(),
            "-s",
            &size.to_string(),
            to,
        ])
        .output()
        .map_err(|e| format!("ping: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "3 packets transmitted, 3 received, 0% packet loss, time 402ms"
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("ping output not understood: {text}"))
}

/// Sends `count` numbered datagrams from A to an echo server in B, one at a
/// time; returns how many came back intact.
fn udp_echo(fx: &Fixture, count: u32) -> Result<u32, String> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = in_netns(&fx.b, move || {
        let sock = UdpSocket::bind((B_IP, 7777)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        let start = Instant::now();
        let mut buf = [0u8; 2048];
        let mut echoed = 0;
        while echoed < count && start.elapsed() < LIMIT {
            if let Ok((n, peer)) = sock.recv_from(&mut buf) {
                sock.send_to(&buf[..n], peer).map_err(|e| e.to_string())?;
                echoed += 1;
            }
        }
        Ok(echoed)
    });
    ready_rx
        .recv_timeout(LIMIT)
        .map_err(|e| format!("echo server: {e}"))?;
    let client = in_netns(&fx.a, move || {
        let sock = UdpSocket::bind((A_IP, 0)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_millis(1000)))
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let mut good = 0;
        let mut buf = [0u8; 2048];
        for i in 0..count {
            if start.elapsed() > LIMIT {
                break;
            }
            let msg = format!("dummynet bridge datagram {i}");
            sock.send_to(msg.as_bytes(), (B_IP, 7777))
                .map_err(|e| e.to_string())?;
            if let Ok(n) = sock.recv(&mut buf) {
                if &buf[..n] == msg.as_bytes() {
                    good += 1;
                }
            }
        }
        Ok(good)
    });
    let good = join(client)?;
    join(server)?;
    Ok(good)
}

/// The bytes of a TCP transfer: a pattern that shows reordering or loss.
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 11)) as u8
}

/// Sends `total` bytes over TCP from A to B, writing for at most `limit`;
/// returns (bytes B received intact, seconds taken). B reads for 0.5 s more.
fn tcp_transfer(fx: &Fixture, total: usize, limit: Duration) -> Result<(usize, f64), String> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = in_netns(&fx.b, move || {
        let listener = TcpListener::bind((B_IP, 5001)).map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        let start = Instant::now();
        let mut conn = loop {
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(_) if start.elapsed() < limit => thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("accept: {e}")),
            }
        };
        conn.set_nonblocking(false).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        let mut good = 0usize;
        let mut buf = vec![0u8; 256 * 1024];
        while start.elapsed() < limit + Duration::from_millis(500) {
            match conn.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    for (k, b) in buf[..n].iter().enumerate() {
                        if *b != pattern(good + k) {
                            return Err(format!("byte {} differs", good + k));
                        }
                    }
                    good += n;
                }
                Err(_) => {}
            }
        }
        Ok(good)
    });
    ready_rx
        .recv_timeout(LIMIT)
        .map_err(|e| format!("tcp server: {e}"))?;
    let client = in_netns(&fx.a, move || {
        let to = SocketAddr::from((B_IP, 5001));
        let start = Instant::now();
        let mut conn = TcpStream::connect_timeout(&to, Duration::from_secs(2))
            .map_err(|e| format!("connect: {e}"))?;
        conn.set_write_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        let data: Vec<u8> = (0..total).map(pattern).collect();
        let mut sent = 0;
        while sent < total && start.elapsed() < limit {
            match conn.write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                // The server gave up at its deadline: what it read is the result.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        let _ = conn.shutdown(std::net::Shutdown::Write);
        Ok(start)
    });
    let start = join(client)?;
    let good = join(server)?;
    Ok((good, start.elapsed().as_secs_f64()))
}

#[test]
fn ping_and_udp_cross_the_bridge() {
    let Some(fx) = fixture("ping_and_udp_cross_the_bridge") else {
        return;
    };
    let bridge = Bridge::start(&fx, PortOptions::default(), 10_000).expect("bridge");
    let replies = ping(&fx, "10.77.0.2", 3, 56);
    let echoed = udp_echo(&fx, 20);
    let report = bridge.finish().expect("bridge report");
    eprintln!("{report:#?}");

    assert_eq!(replies, Ok(3), "ping A → B across the bridge");
    assert_eq!(echoed, Ok(20), "UDP echoes A → B → A");
    // ARP crossed both ways (who-has from A, is-at from B, and B's own).
    assert!(report.a_to_b.arp >= 1, "no ARP A → B");
    assert!(report.b_to_a.arp >= 1, "no ARP B → A");
    assert!(report.a_to_b.drops.is_empty() && report.b_to_a.drops.is_empty());
    // Nothing we sent came back to be forwarded again: a loop would have
    // forwarded thousands of frames for this little traffic.
    assert!(
        report.a_to_b.frames + report.b_to_a.frames < 500,
        "forwarding loop?"
    );
    assert!(report.ignores_outgoing, "kernel ≥ 4.20 expected here");
    assert_eq!(report.stats_a.rx_outgoing_skipped, 0);
    assert_eq!(report.stats_a.rx_truncated + report.stats_b.rx_truncated, 0);
    // The kernel counted at least what we delivered, and dropped nothing.
    assert!(report.stats_a.kernel_packets >= report.stats_a.rx_frames);
    assert_eq!(report.stats_a.kernel_drops + report.stats_b.kernel_drops, 0);
    // A's and B's UDP checksums were left to "hardware"; the ports finished
    // them, or B and A would have dropped the datagrams.
    assert!(report.stats_a.rx_csum_completed >= 20);
    assert!(report.stats_b.rx_csum_completed >= 20);
    assert_eq!(report.stats_a.rx_frames, report.a_to_b.frames);
    assert_eq!(report.stats_b.tx_frames, report.a_to_b.frames);
    // Plain frames: the wire carries exactly the frame.
    assert_eq!(report.a_to_b.wire_bytes, report.a_to_b.bytes);
    // Every frame read from the ring said when the kernel received it.
    for d in [&report.a_to_b, &report.b_to_a] {
        assert_eq!((d.stamped_in_order, d.stamped_wrong), (d.frames, 0));
    }
}

/// Sends `frames` from a port on va in A and collects, for up to 2 s, the
/// frames with EtherType 0x88b5 (local experimental) read by a port on vb
/// in B, VLAN tags included.
fn raw_across(fx: &Fixture, frames: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
    common::raw_across((&fx.a, "va"), (&fx.b, "vb"), frames, |f| {
        // The EtherType after zero, one or two tags.
        [12, 16, 20]
            .iter()
            .any(|&at| f.get(at..at + 2) == Some(&[0x88, 0xb5]))
    })
}

#[test]
fn vlan_tags_are_put_back() {
    let Some(fx) = fixture("vlan_tags_are_put_back") else {
        return;
    };
    let bridge = Bridge::start(&fx, PortOptions::default(), 10_000).expect("bridge");
    // Every receive path takes the outer tag out of the frame before packet
    // sockets see it; the ports of the bridge (and the one reading in B) must
    // put it back. 802.1Q with priority 5 / VLAN 10; 802.1ad QinQ 20 over 30.
    let broadcast_from = |tags: &[u8]| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
        f.extend_from_slice(tags);
        f.extend_from_slice(&[0x88, 0xb5]);
        f.extend_from_slice(&[0x5a; 46]);
        f
    };
    let frames = vec![
        broadcast_from(&[0x81, 0x00, 0xa0, 0x0a]),
        broadcast_from(&[0x88, 0xa8, 0x00, 0x14, 0x81, 0x00, 0x00, 0x1e]),
        broadcast_from(&[]),
    ];
    let seen = raw_across(&fx, frames.clone());
    let report = bridge.finish().expect("bridge report");
    eprintln!("{report:#?}");
    assert_eq!(
        seen,
        Ok(frames),
        "frames arrive in B byte for byte, tags included"
    );
    assert!(report.stats_a.rx_vlan_restored >= 2);
}

#[test]
fn frames_longer_than_a_slot_are_counted_not_cut() {
    let Some(fx) = fixture("frames_longer_than_a_slot_are_counted_not_cut") else {
        return;
    };
    let opts = PortOptions {
        frame_capacity: 256,
        ..PortOptions::default()
    };
    let bridge = Bridge::start(&fx, opts, 10_000).expect("bridge");
    // 1000-byte pings make 1042-byte frames; ARP (42 bytes) still fits.
    let replies = ping(&fx, "10.77.0.2", 2, 1000);
    let report = bridge.finish().expect("bridge report");
    eprintln!("{report:#?}");
    assert_eq!(replies, Ok(0), "a cut frame must not be delivered");
    assert!(report.stats_a.rx_truncated >= 2, "truncations not counted");
    assert!(report.a_to_b.arp >= 1 && report.b_to_a.arp >= 1);
    assert!(report.a_to_b.max_len <= 256);
}

#[test]
fn vnet_hdr_carries_tcp_super_packets() {
    let Some(fx) = fixture("vnet_hdr_carries_tcp_super_packets") else {
        return;
    };
    let opts = PortOptions {
        vnet_hdr: true,
        ..PortOptions::default()
    };
    let bridge = Bridge::start(&fx, opts, 1_000_000).expect("bridge");
    let total = 4 << 20;
    let transfer = tcp_transfer(&fx, total, Duration::from_secs(4));
    let report = bridge.finish().expect("bridge report");
    eprintln!("{report:#?}");
    let (got, _) = transfer.expect("tcp transfer");
    assert_eq!(got, total, "all bytes arrive, in order");
    let ab = &report.a_to_b;
    assert!(ab.drops.is_empty(), "{:?}", ab.drops);
    // veth has TSO on: A's TCP hands it 64 KiB super-packets, which cross
    // to pa whole.
    assert!(ab.gso > 0, "no super-packets seen: {ab:?}");
    assert!(ab.max_len > 1514, "largest frame {}", ab.max_len);
    assert!(ab.max_gso_size > 0 && ab.max_gso_size <= 1460);
    assert_eq!(
        ab.gso_wire_longer, ab.gso,
        "wire_len counts repeated headers"
    );
    assert!(
        ab.wire_bytes > total as u64,
        "wire carries payload + headers"
    );
    assert_eq!(report.stats_a.rx_gso_frames, ab.gso);
    assert_eq!(report.stats_a.rx_truncated, 0);
}

#[test]
fn without_vnet_hdr_super_packets_are_refused_loudly() {
    let Some(fx) = fixture("without_vnet_hdr_super_packets_are_refused_loudly") else {
        return;
    };
    let bridge = Bridge::start(&fx, PortOptions::default(), 100_000).expect("bridge");
    // Whatever happens to the transfer, the bridge must say why frames did
    // not cross.
    let transfer = tcp_transfer(&fx, 1 << 20, Duration::from_secs(2));
    let report = bridge.finish().expect("bridge report");
    eprintln!("transfer: {transfer:?}\n{:#?}", report.a_to_b.drops.len());
    let ab = &report.a_to_b;
    if ab.max_len > 1514 {
        let too_large = ab.drops.iter().filter(|d| d.contains("EMSGSIZE")).count();
        assert!(too_large > 0, "super-packets vanished: {ab:?}");
        assert_eq!(report.stats_b.tx_refused, too_large as u64);
    }
    // The TCP segments from A had unfinished checksums, finished by the port.
    assert!(report.stats_a.rx_csum_completed > 0);
}

#[test]
fn refused_frames_say_which_and_why() {
    let Some(fx) = fixture("refused_frames_say_which_and_why") else {
        return;
    };
    // Sent from A's side into the fixture; nothing listens, nothing leaves it.
    let r = join(in_netns(&fx.a, || {
        let mut port = Port::open("va", PortOptions::default()).map_err(|e| e.to_string())?;
        let mut good = vec![0xffu8; 6];
        good.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x0a, 0x88, 0xb5]);
        good.resize(1000, 0x5a);
        let ok = TxFrame {
            data: &good,
            vnet: None,
        };
        let unknown_gso = TxFrame {
            data: &good,
            vnet: Some(VnetHdr {
                gso_type: 0x42,
                gso_size: 100,
                ..VnetHdr::default()
            }),
        };
        let hdr_past_end = TxFrame {
            data: &good,
            vnet: Some(VnetHdr {
                hdr_len: 5000,
                ..VnetHdr::default()
            }),
        };
        let big = vec![0xffu8; 3000];
        let too_big = TxFrame {
            data: &big,
            vnet: None,
        };
        let mut outcomes = Vec::new();
        for batch in [
            vec![ok, unknown_gso, ok],
            vec![ok, ok, hdr_past_end],
            vec![too_big],
        ] {
            outcomes.push(match port.send_batch(&batch) {
                Ok(n) => format!("all {n}"),
                Err(e) => match e.error {
                    PortError::Refused { len, .. } => format!("{} then refused {len}", e.sent),
                    PortError::TooLarge { len, .. } => format!("{} then too large {len}", e.sent),
                    other => format!("{} then {other}", e.sent),
                },
            });
        }
        let stats = port.stats().map_err(|e| e.to_string())?;
        Ok((outcomes, stats.tx_frames, stats.tx_refused))
    }));
    let (outcomes, sent, refused) = r.expect("sender in A");
    assert_eq!(
        outcomes,
        [
            "1 then refused 1000",
            "2 then refused 1000",
            "0 then too large 3000"
        ]
    );
    assert_eq!((sent, refused), (3, 3));
}

/// Source MAC of every frame the ring tests send from va: the sinks keep
/// only these, so the namespaces' own traffic cannot confuse them.
const TEST_SRC: [u8; 6] = [0x02, 0xdd, 0, 0, 0, 0x0a];

/// A broadcast frame from [`TEST_SRC`] of `len` bytes (tags included), with
/// `tags` after the MAC addresses, EtherType 0x88b5 and a payload that
/// numbers its bytes from `seed`.
fn test_frame(len: usize, tags: &[u8], seed: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&TEST_SRC);
    f.extend_from_slice(tags);
    f.extend_from_slice(&[0x88, 0xb5]);
    let mut i = seed;
    while f.len() < len {
        f.push(i);
        i = i.wrapping_add(1);
    }
    f
}

/// A TCPv4 super-packet from [`TEST_SRC`] to a MAC nobody has (B's stack
/// drops it as PACKET_OTHERHOST), with a valid IPv4 header, a 20-byte TCP
/// header whose checksum holds the pseudo-header sum (left to the
/// "hardware", as a stack would) and `payload` bytes, and the
/// virtio_net_hdr that makes the kernel pass it whole (segments of 1448).
fn tso_frame(payload: usize) -> (Vec<u8>, VnetHdr) {
    let ip_len = 20 + 20 + payload;
    let mut f = vec![0x02, 0xdd, 0, 0, 0, 0x99];
    f.extend_from_slice(&TEST_SRC);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&(ip_len as u16).to_be_bytes());
    ip.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, 6, 0, 0]);
    ip.extend_from_slice(&A_IP.octets());
    ip.extend_from_slice(&Ipv4Addr::new(10, 77, 0, 99).octets());
    let sum = internet_sum(&ip);
    ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
    f.extend_from_slice(&ip);
    let mut tcp = vec![0u8; 20];
    tcp[0..4].copy_from_slice(&[0x9c, 0x40, 0x13, 0x89]);
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    let mut pseudo = A_IP.octets().to_vec();
    pseudo.extend_from_slice(&[10, 77, 0, 99, 0, 6]);
    pseudo.extend_from_slice(&((20 + payload) as u16).to_be_bytes());
    tcp[16..18].copy_from_slice(&internet_sum(&pseudo).to_be_bytes());
    f.extend_from_slice(&tcp);
    f.extend((0..payload).map(|i| (i * 7 + 3) as u8));
    let vnet = VnetHdr {
        flags: VnetHdr::F_NEEDS_CSUM,
        gso_type: VnetHdr::GSO_TCPV4,
        hdr_len: 54,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    (f, vnet)
}

/// The ones' complement sum of RFC 1071 (not complemented).
fn internet_sum(bytes: &[u8]) -> u16 {
    let mut acc: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// What one sink port read: the test's frames, and its counters.
#[derive(Debug)]
struct Capture {
    frames: Vec<RxFrame>,
    stats: PortStats,
    ring_frames: usize,
}

/// Opens one port per entry of `sinks` on pa in M (va's peer), sends
/// `frames` from a port on va in A (all at once), and collects on every
/// sink, for up to 2 s, the frames from [`TEST_SRC`] until each has
/// `frames.len()`.
fn capture(
    fx: &Fixture,
    sinks: Vec<PortOptions>,
    frames: Vec<(Vec<u8>, Option<VnetHdr>)>,
) -> Result<Vec<Capture>, String> {
    let want = frames.len();
    let (ready_tx, ready_rx) = mpsc::channel();
    let sink = in_netns(&fx.m, move || {
        let mut ports = Vec::new();
        for opts in sinks {
            ports.push(Port::open("pa", opts).map_err(|e| e.to_string())?);
        }
        let _ = ready_tx.send(());
        let start = Instant::now();
        let mut seen: Vec<Vec<RxFrame>> = ports.iter().map(|_| Vec::new()).collect();
        let mut batch = Vec::new();
        while seen.iter().any(|s| s.len() < want) && start.elapsed() < Duration::from_secs(2) {
            let mut fds: Vec<PollFd<'_>> = ports
                .iter()
                .map(|p| PollFd::new(p.as_fd(), PollFlags::POLLIN))
                .collect();
            poll(&mut fds, 20u16).map_err(|e| e.to_string())?;
            drop(fds);
            for (port, seen) in ports.iter_mut().zip(seen.iter_mut()) {
                port.recv_batch(&mut batch, 64).map_err(|e| e.to_string())?;
                for f in batch.drain(..) {
                    if f.data.get(6..12) == Some(&TEST_SRC[..]) {
                        seen.push(f);
                    } else {
                        port.recycle(f.data);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (mut port, frames) in ports.into_iter().zip(seen) {
            out.push(Capture {
                frames,
                stats: port.stats().map_err(|e| e.to_string())?,
                ring_frames: port.rx_ring_frames(),
            });
        }
        Ok(out)
    });
    ready_rx.recv_timeout(LIMIT).map_err(|e| e.to_string())?;
    let sent = join(send_from_a(fx, frames))?;
    if sent != want {
        return Err(format!("sent {sent} of {want}"));
    }
    join(sink)
}

/// The first difference between two lists of frames, in a line (frames are
/// too long to print whole).
fn first_difference(got: &[RxFrame], want: &[(Vec<u8>, Option<VnetHdr>)]) -> Option<String> {
    if got.len() != want.len() {
        let lens = |v: Vec<usize>| format!("{v:?}");
        return Some(format!(
            "{} frames of lengths {}, expected {} of lengths {}",
            got.len(),
            lens(got.iter().map(|f| f.data.len()).collect()),
            want.len(),
            lens(want.iter().map(|(d, _)| d.len()).collect()),
        ));
    }
    for (i, (g, (data, vnet))) in got.iter().zip(want).enumerate() {
        if &g.data != data {
            let at = g.data.iter().zip(data).position(|(a, b)| a != b);
            return Some(format!(
                "frame {i}: {} bytes, expected {}; first differing byte at {at:?}",
                g.data.len(),
                data.len()
            ));
        }
        if let Some(v) = vnet {
            if g.vnet != Some(*v) {
                return Some(format!("frame {i}: vnet {:?}, expected {v:?}", g.vnet));
            }
        }
    }
    None
}

/// Frames as expected from a port that read them: its data and header.
fn as_expected(frames: &[RxFrame]) -> Vec<(Vec<u8>, Option<VnetHdr>)> {
    frames.iter().map(|f| (f.data.clone(), f.vnet)).collect()
}

/// Sends `frames` from a port on va in A; returns how many the kernel took.
fn send_from_a(
    fx: &Fixture,
    frames: Vec<(Vec<u8>, Option<VnetHdr>)>,
) -> JoinHandle<Result<usize, String>> {
    in_netns(&fx.a, move || {
        let mut port = Port::open("va", PortOptions::default()).map_err(|e| e.to_string())?;
        let tx: Vec<TxFrame<'_>> = frames
            .iter()
            .map(|(data, vnet)| TxFrame { data, vnet: *vnet })
            .collect();
        let mut sent = 0;
        while sent < tx.len() {
            match port.send_batch(&tx[sent..]) {
                Ok(n) => sent += n,
                Err(e) => return Err(format!("after {}: {}", sent + e.sent, e.error)),
            }
        }
        Ok(sent)
    })
}

/// Turns IPv6 off on va in A, so that nothing but the test's frames crosses
/// to B (no router solicitations, MLD reports or DAD probes).
fn quiet_a(fx: &Fixture) -> Result<(), String> {
    join(in_netns(&fx.a, || {
        dummynet_io::rtnl::set_sysctl("net/ipv6/conf/va/disable_ipv6", "1")
            .map_err(|e| e.to_string())
    }))
}

/// Frames of many lengths, with and without VLAN tags; lengths around 180
/// bytes straddle the edge of a 256-byte ring slot (76 bytes of header).
fn assorted_frames() -> Vec<Vec<u8>> {
    let dot1q = [0x81, 0x00, 0xa0, 0x0a];
    let qinq = [0x88, 0xa8, 0x00, 0x14, 0x81, 0x00, 0x00, 0x1e];
    let mut frames = Vec::new();
    for (i, len) in [60, 64, 100, 179, 180, 181, 200, 1000, 1514]
        .into_iter()
        .enumerate()
    {
        frames.push(test_frame(len, &[], i as u8));
    }
    for (i, len) in [64, 184, 185, 1518].into_iter().enumerate() {
        frames.push(test_frame(len, &dot1q, 100 + i as u8));
    }
    for (i, len) in [68, 1000].into_iter().enumerate() {
        frames.push(test_frame(len, &qinq, 200 + i as u8));
    }
    frames
}

#[test]
fn frames_round_trip_byte_exact_through_the_ring() {
    let Some(fx) = fixture("frames_round_trip_byte_exact_through_the_ring") else {
        return;
    };
    let frames = assorted_frames();
    let sinks = vec![PortOptions::default()];
    let caps = capture(
        &fx,
        sinks,
        frames.iter().map(|f| (f.clone(), None)).collect(),
    )
    .expect("capture");
    let cap = &caps[0];
    eprintln!("{:?}", cap.stats);
    assert_eq!(cap.ring_frames, 4096, "the default port reads from a ring");
    let got: Vec<&[u8]> = cap.frames.iter().map(|f| f.data.as_slice()).collect();
    let sent: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(
        got, sent,
        "every frame, in order, byte for byte, tags included"
    );
    assert!(cap
        .frames
        .iter()
        .all(|f| f.vnet.is_none() && f.wire_len == f.data.len() as u64));
    // The outer tag of each of the 6 tagged frames came through the slot
    // header and was put back.
    assert_eq!(cap.stats.rx_vlan_restored, 6);
    assert_eq!(cap.stats.rx_ring_copied, 0, "all fit a 2 KiB slot");
    assert_eq!(cap.stats.rx_truncated + cap.stats.rx_malformed, 0);
}

#[test]
fn ring_and_recvmmsg_give_the_same_frames() {
    let Some(fx) = fixture("ring_and_recvmmsg_give_the_same_frames") else {
        return;
    };
    let with_vnet = |rx_ring_frames, rx_ring_frame_size| PortOptions {
        vnet_hdr: true,
        rx_ring_frames,
        rx_ring_frame_size,
        ..PortOptions::default()
    };
    // Three sockets on the same interface see the same frames: the default
    // ring, a ring of 256-byte slots (frames over 180 bytes take the
    // TP_STATUS_COPY path) and recvmmsg.
    let sinks = vec![
        with_vnet(DEFAULT_RX_RING_FRAMES, DEFAULT_RX_RING_FRAME_SIZE),
        with_vnet(64, 256),
        with_vnet(0, DEFAULT_RX_RING_FRAME_SIZE),
    ];
    let mut frames: Vec<(Vec<u8>, Option<VnetHdr>)> =
        assorted_frames().into_iter().map(|f| (f, None)).collect();
    let (big, vnet) = tso_frame(6000);
    frames.push((big, Some(vnet)));
    frames.push((test_frame(300, &[], 77), None));
    let caps = capture(&fx, sinks, frames.clone()).expect("capture");
    for c in &caps {
        eprintln!("ring {}: {:?}", c.ring_frames, c.stats);
    }
    let [ring, small, plain] = &caps[..] else {
        panic!("three captures");
    };
    assert_eq!(
        (ring.ring_frames, small.ring_frames, plain.ring_frames),
        (4096, 64, 0)
    );
    // What crossed is what was sent (tags restored), and the super-packet
    // kept its segmentation header.
    assert_eq!(first_difference(&plain.frames, &frames), None, "recvmmsg");
    // The rings give the same frames, headers and wire lengths.
    assert_eq!(
        first_difference(&ring.frames, &as_expected(&plain.frames)),
        None
    );
    assert_eq!(
        first_difference(&small.frames, &as_expected(&plain.frames)),
        None
    );
    // Byte for byte, header for header; only the rings know when each
    // frame arrived.
    let seen = |c: &[RxFrame]| -> Vec<(Vec<u8>, Option<VnetHdr>, u64)> {
        c.iter()
            .map(|f| (f.data.clone(), f.vnet, f.wire_len))
            .collect()
    };
    assert!(
        seen(&ring.frames) == seen(&plain.frames) && seen(&small.frames) == seen(&plain.frames)
    );
    assert!(ring
        .frames
        .iter()
        .chain(&small.frames)
        .all(|f| f.stamp_ns > 0));
    assert!(plain.frames.iter().all(|f| f.stamp_ns == 0));
    // 181, 200, 1000, 1514, 185 and 1518 (4 bytes of tag in the header, not
    // the slot), 1000 (QinQ), the super-packet and 300: longer than 180.
    assert_eq!(small.stats.rx_ring_copied, 9);
    assert_eq!(ring.stats.rx_ring_copied, 1, "only the super-packet");
    assert_eq!(plain.stats.rx_ring_copied, 0);
    for c in &caps {
        assert_eq!(
            c.stats.rx_truncated + c.stats.rx_malformed,
            0,
            "{:?}",
            c.stats
        );
    }
}

#[test]
fn a_super_packet_crosses_the_ring_whole() {
    let Some(fx) = fixture("a_super_packet_crosses_the_ring_whole") else {
        return;
    };
    let (big, vnet) = tso_frame(20_000);
    let sinks = vec![PortOptions {
        vnet_hdr: true,
        ..PortOptions::default()
    }];
    let caps = capture(&fx, sinks, vec![(big.clone(), Some(vnet))]).expect("capture");
    let cap = &caps[0];
    eprintln!("{:?}", cap.stats);
    assert_eq!(cap.ring_frames, 4096);
    let [f] = &cap.frames[..] else {
        panic!("one frame expected, got {}", cap.frames.len());
    };
    // veth passes the GSO frame unsegmented; far longer than a 2 KiB slot,
    // it came through the socket's queue, whole.
    assert_eq!(f.data.len(), big.len());
    assert_eq!(f.data, big);
    let got = f.vnet.expect("a vnet header");
    assert_eq!(got.gso_kind(), VnetHdr::GSO_TCPV4);
    assert_eq!(got.gso_size, 1448);
    assert!(got.needs_csum());
    assert_eq!((got.csum_start, got.csum_offset), (34, 16));
    // 20 000 bytes of payload: 14 segments, 13 more copies of 54 bytes.
    assert_eq!(f.wire_len, (big.len() + 13 * 54) as u64);
    assert_eq!(cap.stats.rx_ring_copied, 1);
    assert_eq!(cap.stats.rx_gso_frames, 1);
    assert_eq!(cap.stats.rx_truncated, 0);
}

#[test]
fn a_burst_larger_than_the_ring_is_counted_as_kernel_drops() {
    let Some(fx) = fixture("a_burst_larger_than_the_ring_is_counted_as_kernel_drops") else {
        return;
    };
    quiet_a(&fx).expect("IPv6 off on va");
    const BURST: usize = 1000;
    let opts = PortOptions {
        rx_ring_frames: 64,
        ..PortOptions::default()
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    // The sink, on va's peer, does not read until the whole burst was sent.
    let sink = in_netns(&fx.m, move || {
        let mut port = Port::open("pa", opts).map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        sent_rx.recv_timeout(LIMIT).map_err(|e| e.to_string())?;
        let (mut ours, mut others) = (0usize, 0usize);
        let mut batch = Vec::new();
        let start = Instant::now();
        let mut idle = Instant::now();
        while idle.elapsed() < Duration::from_millis(200) && start.elapsed() < LIMIT {
            let n = port.recv_batch(&mut batch, 64).map_err(|e| e.to_string())?;
            if n > 0 {
                idle = Instant::now();
            } else {
                thread::sleep(Duration::from_millis(5));
            }
            for f in batch.drain(..) {
                if f.data.get(6..12) == Some(&TEST_SRC[..]) {
                    ours += 1;
                } else {
                    others += 1;
                }
                port.recycle(f.data);
            }
        }
        let stats = port.stats().map_err(|e| e.to_string())?;
        Ok((ours, others, stats, port.rx_ring_frames()))
    });
    ready_rx.recv_timeout(LIMIT).expect("sink ready");
    let frames = (0..BURST)
        .map(|i| (test_frame(64, &[], i as u8), None))
        .collect();
    let sent = join(send_from_a(&fx, frames)).expect("burst sent");
    let _ = sent_tx.send(());
    let (ours, others, stats, ring) = join(sink).expect("sink");
    eprintln!("sent {sent}, received {ours} (+{others} others), ring {ring}: {stats:?}");
    assert_eq!(sent, BURST);
    assert_eq!(others, 0, "nothing but the burst crossed");
    assert_eq!(ring, 64);
    assert_eq!(
        ours, ring,
        "the ring was full, and every slot was delivered"
    );
    assert_eq!(
        ours as u64 + stats.kernel_drops,
        sent as u64,
        "every frame was received or counted as dropped"
    );
    // The kernel saw every frame (tp_packets counts drops too).
    assert_eq!(stats.kernel_packets, sent as u64);
}

#[test]
fn opening_a_missing_interface_says_so() {
    let Some(fx) = fixture("opening_a_missing_interface_says_so") else {
        return;
    };
    let r = join(in_netns(&fx.m, || {
        Ok(match Port::open("nosuch0", PortOptions::default()) {
            Err(PortError::NoSuchInterface { ifname, .. }) => ifname,
            other => format!("unexpected: {other:?}"),
        })
    }));
    assert_eq!(r, Ok("nosuch0".to_string()));
}

/// A port follows its interface down, up, deleted and made again: the
/// kernel's `ENETDOWN` is on the socket (POLLERR) until taken, and the
/// link state says which of the four it is.
#[test]
fn a_port_says_when_its_interface_goes_down_or_away() {
    let Some(fx) = fixture("a_port_says_when_its_interface_goes_down_or_away") else {
        return;
    };
    let (m, a) = (fx.m.clone(), fx.a.clone());
    let r = join(in_netns(&fx.m, move || {
        let port = Port::open("pa", PortOptions::default()).map_err(|e| e.to_string())?;
        let state = |p: &Port| p.link_state().map_err(|e| e.to_string());
        let pollerr = |p: &Port| -> Result<bool, String> {
            let mut fds = [PollFd::new(p.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, 0u16).map_err(|e| e.to_string())?;
            Ok(fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLERR)))
        };
        let mut seen = vec![(state(&port)?, pollerr(&port)?)];
        ip(&["-n", &m, "link", "set", "pa", "down"])?;
        seen.push((state(&port)?, pollerr(&port)?));
        let taken = port.take_error().map_err(|e| e.to_string())?;
        // Taken once: the socket no longer polls with an error.
        seen.push((state(&port)?, pollerr(&port)?));
        ip(&["-n", &m, "link", "set", "pa", "up"])?;
        seen.push((state(&port)?, pollerr(&port)?));
        ip(&["-n", &m, "link", "del", "pa"])?;
        seen.push((state(&port)?, false));
        ip(&[
            "link", "add", "va", "netns", &a, "type", "veth", "peer", "name", "pa", "netns", &m,
        ])?;
        let again = state(&port)?;
        Ok((seen, taken, again, port.ifindex()))
    }));
    let (seen, taken, again, old_index) = r.expect("the port thread");
    assert_eq!(
        seen,
        [
            (LinkState::Up, false),
            (LinkState::Down, true),
            (LinkState::Down, false),
            (LinkState::Up, false),
            (LinkState::Gone, false),
        ]
    );
    assert_eq!(taken, Some(nix::errno::Errno::ENETDOWN));
    assert!(
        matches!(again, LinkState::Replaced { ifindex } if ifindex != old_index),
        "{again:?}"
    );
}

/// Frames per second through the bridge, with and without vnet_hdr. Prints,
/// asserts nothing about speed. `cargo test -p dummynet-io --release --test
/// afpacket -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_frames_per_second() {
    if let Some(why) = unavailable() {
        eprintln!("measure_frames_per_second: skipped ({why})");
        return;
    }
    for (vnet_hdr, rx_ring_frames) in [(false, 0), (true, 0), (true, DEFAULT_RX_RING_FRAMES)] {
        let fx = Fixture::new("af", "10.77.0").expect("fixture");
        let opts = PortOptions {
            vnet_hdr,
            rx_ring_frames,
            ..PortOptions::default()
        };
        let bridge = Bridge::start(&fx, opts, u64::MAX).expect("bridge");
        let (sent, received) = udp_blast(&fx, 1_000_000, Duration::from_secs(2)).expect("blast");
        let r = bridge.finish().expect("report");
        let ab = &r.a_to_b;
        println!(
            "UDP 18-byte payload, vnet_hdr={vnet_hdr}, ring={rx_ring_frames}: {:.0} frames/s forwarded ({} frames in {:.2} s, {:.1} per read); A sent {sent}, B received {received}, kernel drops at pa {}",
            ab.frames as f64 / r.active.as_secs_f64().max(1e-9),
            ab.frames,
            r.active.as_secs_f64(),
            ab.frames as f64 / ab.batches.max(1) as f64,
            r.stats_a.kernel_drops,
        );
    }
    for (vnet_hdr, super_packets, rx_ring_frames) in [
        (false, false, DEFAULT_RX_RING_FRAMES),
        (true, false, DEFAULT_RX_RING_FRAMES),
        (true, true, 0),
        (true, true, DEFAULT_RX_RING_FRAMES),
    ] {
        let fx = Fixture::new("af", "10.77.0").expect("fixture");
        if !super_packets {
            fx.no_super_packets().expect("gso_max_segs");
        }
        let opts = PortOptions {
            vnet_hdr,
            rx_ring_frames,
            ..PortOptions::default()
        };
        let bridge = Bridge::start(&fx, opts, u64::MAX).expect("bridge");
        let (got, secs) =
            tcp_transfer(&fx, 256 << 20, Duration::from_secs(3)).expect("tcp transfer");
        let r = bridge.finish().expect("report");
        let ab = &r.a_to_b;
        let active = r.active.as_secs_f64().max(1e-9);
        println!(
            "TCP A→B, vnet_hdr={vnet_hdr}, super-packets={super_packets}, ring={rx_ring_frames}: {:.2} Gbit/s goodput, {:.0} frames/s A→B ({} frames, {:.1} per read, {} GSO, largest {} B), wire {:.2} Gbit/s, refused {}, kernel drops at pa {}",
            got as f64 * 8.0 / secs / 1e9,
            ab.frames as f64 / active,
            ab.frames,
            ab.frames as f64 / ab.batches.max(1) as f64,
            ab.gso,
            ab.max_len,
            ab.wire_bytes as f64 * 8.0 / active / 1e9,
            ab.drops.len(),
            r.stats_a.kernel_drops,
        );
    }
}

/// Sends up to `count` small datagrams from A to B as fast as A can, for at
/// most `limit`; returns (sent, received in B).
fn udp_blast(fx: &Fixture, count: u64, limit: Duration) -> Result<(u64, u64), String> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let done_rx = done.clone();
    let sink = in_netns(&fx.b, move || {
        let sock = UdpSocket::bind((B_IP, 9999)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        let start = Instant::now();
        let mut buf = [0u8; 2048];
        let mut n = 0;
        while start.elapsed() < LIMIT {
            match sock.recv(&mut buf) {
                Ok(_) => n += 1,
                Err(_) if done_rx.load(Ordering::Relaxed) => break,
                Err(_) => {}
            }
        }
        Ok(n)
    });
    ready_rx.recv_timeout(LIMIT).map_err(|e| e.to_string())?;
    let source = in_netns(&fx.a, move || {
        let sock = UdpSocket::bind((A_IP, 0)).map_err(|e| e.to_string())?;
        sock.connect((B_IP, 9999)).map_err(|e| e.to_string())?;
        // Resolve ARP before the flood.
        let _ = sock.send(b"hello");
        thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        let mut sent = 0;
        while sent < count && start.elapsed() < limit {
            if sock.send(b"dummynet bridge!!!").is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    });
    let sent = join(source)?;
    thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::Relaxed);
    let received = join(sink)?;
    Ok((sent, received))
}

/// The reader's cost per frame, ring against recvmmsg, without the
/// scheduling that dominates a live flood on a small VM: `frames` 64-byte
/// frames are sent from A while a port on pa does not read, then the port
/// drains them with `recv_batch` (64 at a time, buffers recycled) and the
/// drain is timed. Returns (ns per frame, frames read, kernel drops).
fn drain_cost(fx: &Fixture, opts: PortOptions, frames: usize) -> Result<(f64, usize, u64), String> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    let sink = in_netns(&fx.m, move || {
        let mut port = Port::open("pa", opts).map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        sent_rx.recv_timeout(LIMIT).map_err(|e| e.to_string())?;
        let mut batch = Vec::with_capacity(64);
        let mut read = 0;
        let start = Instant::now();
        let mut last = start;
        while read < frames && last.elapsed() < Duration::from_millis(100) {
            let n = port.recv_batch(&mut batch, 64).map_err(|e| e.to_string())?;
            if n > 0 {
                read += n;
                last = Instant::now();
            }
            for f in batch.drain(..) {
                port.recycle(f.data);
            }
        }
        let ns = (last - start).as_nanos() as f64 / read.max(1) as f64;
        let drops = port.stats().map_err(|e| e.to_string())?.kernel_drops;
        Ok((ns, read, drops))
    });
    ready_rx.recv_timeout(LIMIT).map_err(|e| e.to_string())?;
    let burst = (0..frames)
        .map(|i| (test_frame(64, &[], i as u8), None))
        .collect();
    join(send_from_a(fx, burst))?;
    let _ = sent_tx.send(());
    join(sink)
}

/// `cargo test -p dummynet-io --release --test afpacket measure_receive_cost
/// -- --ignored --nocapture`. Prints, asserts nothing about speed.
#[test]
#[ignore]
fn measure_receive_cost() {
    let Some(fx) = fixture("measure_receive_cost") else {
        return;
    };
    quiet_a(&fx).expect("IPv6 off on va");
    const FRAMES: usize = 30_000;
    let ring = PortOptions {
        rx_ring_frames: 32 * 1024,
        ..PortOptions::default()
    };
    let recvmmsg = PortOptions {
        rx_ring_frames: 0,
        socket_buffer: 64 << 20,
        ..PortOptions::default()
    };
    for round in 0..3 {
        for (name, opts) in [("recvmmsg", &recvmmsg), ("ring", &ring)] {
            let (ns, read, drops) = drain_cost(&fx, opts.clone(), FRAMES).expect("drain");
            println!(
                "round {round} {name:8}: {ns:6.1} ns per 64-byte frame ({read} read, {drops} kernel drops)"
            );
        }
    }
}
