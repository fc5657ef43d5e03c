//! The run's traffic and what it measures, without iperf3: TCP senders
//! and receivers on both sides of the shell's link (each connection opened
//! from inside the shell's namespace, so that its `net.inet.tcp_ecn` rules
//! it), each sender's `TCP_INFO` sampled at the interval, the receivers'
//! bytes, UDP echoes' RTTs and constant-rate UDP flows. Every loop ends by
//! the run's deadline (plus a grace); sockets have timeouts, so none
//! blocks past it.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dummynet_engine::Nanos;
use dummynet_io::netns::Netns;
use dummynet_io::tcpinfo::{self, TcpInfo};

use super::spec::{Direction, Run, Until};

/// How long the traffic may go on past the run's end (a sender blocked on
/// a full window, a receiver reading what is still in flight).
const GRACE: Duration = Duration::from_secs(3);
/// Socket timeouts: how often a blocked loop looks at the clock.
const POLL: Duration = Duration::from_millis(100);
const CHUNK: usize = 64 * 1024;

/// Moves bytes with `step` (a read or a write) while `more()` and it moves
/// some, telling `moved` each count; a socket timeout or an interruption
/// is tried again. The error that ended it, if one did.
fn pump(
    mut step: impl FnMut() -> std::io::Result<usize>,
    more: impl Fn() -> bool,
    mut moved: impl FnMut(usize),
) -> std::io::Result<()> {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    while more() {
        match step() {
            Ok(0) => break,
            Ok(n) => moved(n),
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One sample of one TCP flow.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FlowSample {
    /// Since the run's time 0, ns.
    pub t: Nanos,
    /// Bytes the receiver has read so far.
    pub received: u64,
    /// The sender's view (`None` before it started or once it is closed).
    pub info: Option<TcpInfo>,
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// Per TCP flow, its samples in time order.
    pub flows: Vec<Vec<FlowSample>>,
    /// The congestion control each flow's sender ended with.
    pub cc: Vec<String>,
    /// Per ping: (time sent since time 0, RTT) in ns; lost ones `None`.
    pub pings: Vec<Echoes>,
    /// Per UDP flow: (t, bytes received so far) at each sample, and the
    /// bytes sent.
    pub udp: Vec<(Vec<(Nanos, u64)>, u64)>,
    /// Problems met (a flow that could not connect...), for the summary.
    pub warnings: Vec<String>,
}

/// One ping flow's echoes: (time sent since time 0, RTT), `None` if lost.
pub type Echoes = Vec<(Nanos, Option<Nanos>)>;

/// A TCP flow's two ends: `tx` sends, `rx` receives; `inside` says which
/// of them lives in the shell's namespace.
struct TcpFlow {
    tx: Arc<TcpStream>,
    rx: TcpStream,
    received: Arc<AtomicU64>,
    started: Arc<AtomicBool>,
}

/// A socket made in `ns` (its namespace stays with it).
fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> std::io::Result<T> + Send) -> Result<T, String> {
    ns.run(f)
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Opens the run's connections: each TCP flow connected from inside to a
/// listener on `peer`, its sender's congestion control set.
fn connect(run: &Run, ns: &Netns, outside: &Netns, peer: Ipv4Addr) -> Result<Vec<TcpFlow>, String> {
    let listener = in_ns(outside, || TcpListener::bind((peer, 0)))
        .map_err(|e| format!("cannot listen on {peer}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (i, f) in run.flows.iter().enumerate() {
        let inside = in_ns(ns, || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        })
        .map_err(|e| format!("flow {i}: cannot connect to {addr}: {e}"))?;
        let (outside, _) = listener
            .accept()
            .map_err(|e| format!("flow {i}: accept: {e}"))?;
        let (tx, rx) = match f.direction {
            Direction::Up => (inside, outside),
            Direction::Down => (outside, inside),
        };
        if let Some(cc) = &f.cc {
            tcpinfo::set_congestion(tx.as_fd(), cc).map_err(|e| {
                let offered =
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                        .unwrap_or_default();
                format!(
                    "flow {i}: congestion control `{cc}`: {e} (this kernel offers: {})",
                    offered.trim()
                )
            })?;
        }
        for s in [&tx, &rx] {
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
            s.set_write_timeout(Some(POLL)).map_err(|e| e.to_string())?;
        }
        out.push(TcpFlow {
            tx: Arc::new(tx),
            rx,
            received: Arc::new(AtomicU64::new(0)),
            started: Arc::new(AtomicBool::new(false)),
        });
    }
    Ok(out)
}

fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn sleep_until(t: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= t {
            return;
        }
        std::thread::sleep((t - now).min(POLL));
    }
}

/// Turns ECN on for the connections the shell's namespace opens (the far
/// end accepts it under the kernel's default, `tcp_ecn = 2`), or off.
pub fn set_ecn(ns: &Netns, on: bool) -> Result<(), String> {
    in_ns(ns, || {
        std::fs::write("/proc/sys/net/ipv4/tcp_ecn", if on { "1" } else { "2" })
    })
    .map_err(|e| format!("net.ipv4.tcp_ecn in the shell's namespace: {e}"))
}

/// Starts a thread named `name` (what `top -H` shows).
fn named(
    name: String,
    f: Box<dyn FnOnce() -> Option<String> + Send>,
) -> Result<JoinHandle<Option<String>>, String> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| format!("starting the thread {name}: {e}"))
}

/// Runs `run`'s traffic through the link between `ns` (inside) and
/// `peer` (the end in `outside`, where the shell was started) and samples it; returns when the run is
/// over (at most [`GRACE`] past its duration). Returns the run's time 0
/// on the wall clock (ns since the epoch), also stored in `time0` as soon
/// as it is known (the event log starts its series there); `at_end` is
/// called the moment the run's duration is over.
pub fn drive(
    run: &Run,
    ns: &Netns,
    outside: &Netns,
    peer: Ipv4Addr,
    stop: &AtomicBool,
    time0: &AtomicU64,
    at_end: &mut dyn FnMut(),
) -> Result<(u64, Measured), String> {
    let flows = connect(run, ns, outside, peer)?;
    let mut m = Measured::default();
    let t0 = Instant::now();
    let wall0 = super::wall_ns();
    time0.store(wall0, Ordering::Relaxed);
    let end = t0 + Duration::from_nanos(run.duration);
    let mut crew = Crew {
        threads: Vec::new(),
        done: Arc::new(AtomicBool::new(false)),
        t0,
        end,
        hard_end: end + GRACE,
    };
    m.cc = tcp_threads(&mut crew, run, &flows)?;
    let ping_results = ping_threads(&mut crew, run, ns, outside, peer)?;
    let udp_rx = udp_threads(&mut crew, run, ns, outside, peer)?;
    sample(run, &crew, &flows, &udp_rx, stop, &mut m);
    // The run is over: what the link counted is read now, before the
    // senders' FINs (not ECN-capable, so an AQM in its dropping state may
    // drop one) and what is still queued reach it.
    at_end();
    crew.done.store(true, Ordering::Relaxed);
    for t in crew.threads {
        match t.join() {
            Ok(Some(w)) => m.warnings.push(w),
            Ok(None) => {}
            Err(_) => m.warnings.push("a traffic thread panicked".into()),
        }
    }
    for ((_, sent), (_, total)) in udp_rx.iter().zip(m.udp.iter_mut()) {
        *total = sent.load(Ordering::Relaxed);
    }
    m.pings = ping_results
        .iter()
        .map(|r| r.lock().map(|v| v.clone()).unwrap_or_default())
        .collect();
    Ok((wall0, m))
}

/// A UDP flow's bytes received and sent.
type UdpCount = (Arc<AtomicU64>, Arc<AtomicU64>);

/// The run's traffic threads, its clock, and the flag that stops them.
struct Crew {
    threads: Vec<JoinHandle<Option<String>>>,
    done: Arc<AtomicBool>,
    t0: Instant,
    end: Instant,
    /// The run's end and [`GRACE`]: no thread goes on past it.
    hard_end: Instant,
}

impl Crew {
    /// Starts a thread named `name`; one that cannot start stops those
    /// already running.
    fn spawn(
        &mut self,
        name: String,
        f: Box<dyn FnOnce() -> Option<String> + Send>,
    ) -> Result<(), String> {
        let t = named(name, f).inspect_err(|_| self.done.store(true, Ordering::Relaxed))?;
        self.threads.push(t);
        Ok(())
    }
}

/// Each TCP flow's sender and receiver; returns their congestion controls.
fn tcp_threads(crew: &mut Crew, run: &Run, flows: &[TcpFlow]) -> Result<Vec<String>, String> {
    let (t0, end, hard_end) = (crew.t0, crew.end, crew.hard_end);
    let mut cc = Vec::new();
    for (i, (f, spec)) in flows.iter().zip(&run.flows).enumerate() {
        cc.push(tcpinfo::congestion(f.tx.as_fd()).unwrap_or_default());
        // The sender.
        let tx = Arc::clone(&f.tx);
        let started = Arc::clone(&f.started);
        let start = t0 + Duration::from_nanos(spec.start);
        let until = spec.until;
        let done_tx = Arc::clone(&crew.done);
        crew.spawn(
            format!("dn-tx-{i}"),
            Box::new(move || {
                sleep_until(start, &done_tx);
                started.store(true, Ordering::Relaxed);
                let stop_at = match until {
                    Until::Time(d) => (start + Duration::from_nanos(d)).min(end),
                    Until::Bytes(_) => end,
                };
                let limit = match until {
                    Until::Bytes(b) => b,
                    Until::Time(_) => u64::MAX,
                };
                let buf = vec![0x5au8; CHUNK];
                let sent = std::cell::Cell::new(0u64);
                let pumped = pump(
                    || (&*tx).write(&buf[..(limit - sent.get()).min(CHUNK as u64) as usize]),
                    || {
                        sent.get() < limit
                            && Instant::now() < stop_at
                            && !done_tx.load(Ordering::Relaxed)
                    },
                    |n| sent.set(sent.get() + n as u64),
                );
                if let Err(e) = pumped {
                    return Some(format!("sender: {e}"));
                }
                let _ = tx.shutdown(Shutdown::Write);
                None
            }),
        )?;
        // The receiver.
        let mut rx = match f.rx.try_clone() {
            Ok(s) => s,
            Err(e) => return Err(format!("receiver: {e}")),
        };
        let received = Arc::clone(&f.received);
        let done_rx = Arc::clone(&crew.done);
        crew.spawn(
            format!("dn-rx-{i}"),
            Box::new(move || {
                let mut buf = vec![0u8; CHUNK];
                let pumped = pump(
                    || rx.read(&mut buf),
                    || Instant::now() < hard_end && !done_rx.load(Ordering::Relaxed),
                    |n| {
                        received.fetch_add(n as u64, Ordering::Relaxed);
                    },
                );
                if let Err(e) = pumped {
                    return Some(format!("receiver: {e}"));
                }
                None
            }),
        )?;
    }

    Ok(cc)
}

/// Pings: an echo server outside, a client inside for each `[[ping]]`;
/// returns where each client's echoes go.
fn ping_threads(
    crew: &mut Crew,
    run: &Run,
    ns: &Netns,
    outside: &Netns,
    peer: Ipv4Addr,
) -> Result<Vec<Arc<Mutex<Echoes>>>, String> {
    let (t0, end, hard_end) = (crew.t0, crew.end, crew.hard_end);
    let ping_results: Vec<Arc<Mutex<Echoes>>> = run.pings.iter().map(|_| Arc::default()).collect();
    if !run.pings.is_empty() {
        let echo =
            in_ns(outside, || UdpSocket::bind((peer, 0))).map_err(|e| format!("ping echo: {e}"))?;
        echo.set_read_timeout(Some(POLL))
            .map_err(|e| e.to_string())?;
        let echo_addr = echo.local_addr().map_err(|e| e.to_string())?;
        let done_echo = Arc::clone(&crew.done);
        crew.spawn(
            "dn-echo".into(),
            Box::new(move || {
                let mut buf = [0u8; 64];
                while Instant::now() < hard_end && !done_echo.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = echo.recv_from(&mut buf) {
                        let _ = echo.send_to(&buf[..n], from);
                    }
                }
                None
            }),
        )?;
        for (k, (p, out)) in run.pings.iter().zip(&ping_results).enumerate() {
            let sock = in_ns(ns, || UdpSocket::bind(("0.0.0.0", 0)))?;
            sock.connect(echo_addr).map_err(|e| e.to_string())?;
            let p = *p;
            let out = Arc::clone(out);
            let done_p = Arc::clone(&crew.done);
            crew.spawn(
                format!("dn-ping-{k}"),
                Box::new(move || {
                    ping_loop(
                        &sock, t0, p.start, p.duration, p.interval, end, &out, &done_p,
                    );
                    None
                }),
            )?;
        }
    }

    Ok(ping_results)
}

/// Constant-rate UDP flows: a sender and a receiver each; returns each
/// one's bytes received and sent.
fn udp_threads(
    crew: &mut Crew,
    run: &Run,
    ns: &Netns,
    outside: &Netns,
    peer: Ipv4Addr,
) -> Result<Vec<UdpCount>, String> {
    let (t0, end, hard_end) = (crew.t0, crew.end, crew.hard_end);
    let mut udp_rx: Vec<UdpCount> = Vec::new();
    for (k, u) in run.udp.iter().enumerate() {
        let inside = in_ns(ns, || UdpSocket::bind(("0.0.0.0", 0)))?;
        let outer = in_ns(outside, || UdpSocket::bind((peer, 0)))?;
        let inside_addr = SocketAddr::new(
            in_ns(ns, || {
                let probe = UdpSocket::bind(("0.0.0.0", 0))?;
                probe.connect((peer, 9))?;
                probe.local_addr()
            })?
            .ip(),
            inside.local_addr().map_err(|e| e.to_string())?.port(),
        );
        let outer_addr = outer.local_addr().map_err(|e| e.to_string())?;
        let (tx, rx, to) = match u.direction {
            Direction::Up => (inside, outer, outer_addr),
            Direction::Down => (outer, inside, inside_addr),
        };
        rx.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
        let got = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let (got_r, sent_t) = (Arc::clone(&got), Arc::clone(&sent));
        let done_r = Arc::clone(&crew.done);
        crew.spawn(
            format!("dn-udp-rx-{k}"),
            Box::new(move || {
                let mut buf = [0u8; 2048];
                while Instant::now() < hard_end && !done_r.load(Ordering::Relaxed) {
                    if let Ok(n) = rx.recv(&mut buf) {
                        got_r.fetch_add(n as u64, Ordering::Relaxed);
                    }
                }
                None
            }),
        )?;
        let u = *u;
        let done_t = Arc::clone(&crew.done);
        crew.spawn(
            format!("dn-udp-tx-{k}"),
            Box::new(move || {
                let start = t0 + Duration::from_nanos(u.start);
                let stop_at = (start + Duration::from_nanos(u.duration)).min(end);
                sleep_until(start, &done_t);
                let gap = Duration::from_nanos(u64::from(u.size) * 8 * 1_000_000_000 / u.rate);
                let buf = vec![0xa5u8; u.size as usize];
                let mut next = start;
                while next < stop_at && !done_t.load(Ordering::Relaxed) {
                    sleep_until(next, &done_t);
                    if tx.send_to(&buf, to).is_ok() {
                        sent_t.fetch_add(u64::from(u.size), Ordering::Relaxed);
                    }
                    next += gap;
                    // A sender that fell behind (no CPU) does not burst to
                    // catch up more than a sampling interval's worth.
                    let now = Instant::now();
                    if now > next + Duration::from_millis(100) {
                        next = now;
                    }
                }
                None
            }),
        )?;
        udp_rx.push((got, sent));
    }

    Ok(udp_rx)
}

/// The sampler, on the calling thread, at the run's interval, until its
/// end or `stop`.
fn sample(
    run: &Run,
    crew: &Crew,
    flows: &[TcpFlow],
    udp_rx: &[UdpCount],
    stop: &AtomicBool,
    m: &mut Measured,
) {
    let (t0, end) = (crew.t0, crew.end);
    // Every receiver starts from nothing at time 0: the first bin's
    // goodput is from there.
    m.flows = vec![vec![FlowSample::default()]; flows.len()];
    m.udp = vec![(vec![(0, 0)], 0); run.udp.len()];
    let interval = Duration::from_nanos(run.interval);
    let mut k = 1u32;
    loop {
        let at = t0 + interval * k;
        if at > end || stop.load(Ordering::Relaxed) {
            break;
        }
        sleep_until(at, stop);
        let t = nanos(Instant::now() - t0);
        for (f, series) in flows.iter().zip(m.flows.iter_mut()) {
            let info = if f.started.load(Ordering::Relaxed) {
                tcpinfo::tcp_info(f.tx.as_fd()).ok()
            } else {
                None
            };
            series.push(FlowSample {
                t,
                received: f.received.load(Ordering::Relaxed),
                info,
            });
        }
        for ((got, _), (series, _)) in udp_rx.iter().zip(m.udp.iter_mut()) {
            series.push((t, got.load(Ordering::Relaxed)));
        }
        k += 1;
    }
}

/// One ping flow: a datagram (its sequence number) every `interval`, the
/// echoes matched by number; each RTT on the client's clock.
#[allow(clippy::too_many_arguments)]
fn ping_loop(
    sock: &UdpSocket,
    t0: Instant,
    start: Nanos,
    duration: Nanos,
    interval: Nanos,
    end: Instant,
    out: &Mutex<Echoes>,
    done: &AtomicBool,
) {
    let start_at = t0 + Duration::from_nanos(start);
    let stop_at = (start_at + Duration::from_nanos(duration)).min(end);
    let mut sent: Vec<(Instant, Option<Nanos>)> = Vec::new();
    let mut next = start_at;
    sleep_until(start_at, done);
    let mut buf = [0u8; 16];
    // Echoes are awaited up to a second past the last send.
    while Instant::now() < stop_at + Duration::from_secs(1) && !done.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next && now < stop_at && sent.len() < 1_000_000 {
            let seq = sent.len() as u64;
            if sock.send(&seq.to_be_bytes()).is_ok() {
                sent.push((now, None));
            }
            next += Duration::from_nanos(interval);
        }
        let wait = next
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(1), POLL);
        let _ = sock.set_read_timeout(Some(wait));
        if let Ok(8) = sock.recv(&mut buf) {
            let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or([0xff; 8]));
            if let Some((at, rtt)) = sent.get_mut(seq as usize) {
                if rtt.is_none() {
                    *rtt = Some(nanos(Instant::now() - *at));
                }
            }
        }
    }
    if let Ok(mut o) = out.lock() {
        *o = sent
            .into_iter()
            .map(|(at, rtt)| (nanos(at.saturating_duration_since(t0)), rtt))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    /// A timeout or an interruption is tried again; 0 bytes ends it, and
    /// so does `more()` saying no; another error is handed back.
    #[test]
    fn pump_retries_transient_errors_and_stops_at_the_end() {
        let mut steps = vec![
            Ok(3),
            Err(Error::from(ErrorKind::WouldBlock)),
            Err(Error::from(ErrorKind::TimedOut)),
            Err(Error::from(ErrorKind::Interrupted)),
            Ok(4),
            Ok(0),
            Ok(100),
        ]
        .into_iter();
        let mut total = 0;
        let r = pump(|| steps.next().unwrap_or(Ok(0)), || true, |n| total += n);
        assert!(r.is_ok());
        assert_eq!(total, 7);
        assert_eq!(steps.next().map(|r| r.ok()), Some(Some(100)));

        let mut calls = 0;
        let r = pump(
            || {
                calls += 1;
                Err(Error::from(ErrorKind::ConnectionReset))
            },
            || true,
            |_| {},
        );
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));
        assert_eq!(calls, 1);

        let moved = std::cell::Cell::new(0);
        let r = pump(
            || Ok(5),
            || moved.get() < 12,
            |n| moved.set(moved.get() + n),
        );
        assert!(r.is_ok());
        assert_eq!(moved.get(), 15, "stops once more() says no");
    }
}
