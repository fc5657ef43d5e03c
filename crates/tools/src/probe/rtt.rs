//! Round-trip time: a UDP echo server and the probe that measures through
//! it, in place of `ping` (see the [parent module](super) on namespaces and
//! on how every loop ends).

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dummynet_engine::percentile::nearest_rank;

use super::{
    any_addr_like, context, format_ms, invalid_input, is_transient, nanos_between, sleep_until,
    POLL,
};

/// Size of an RTT probe and of its echo, in bytes of UDP payload: small, so
/// that serialization adds little to the RTT even on a 10 Mbit/s link
/// (64 B + 28 B of headers take 74 µs there).
pub const PROBE_LEN: usize = 64;

/// Most probes one [`rtt_probe`] call sends. It keeps a timestamp and a
/// result per probe, so this bounds its memory (2.4 MB).
pub const MAX_PROBES: u32 = 100_000;

/// Longest [`rtt_probe`] run accepted, `count × interval + timeout`.
pub const MAX_PROBE_RUN: Duration = Duration::from_secs(600);

/// Marks our probes, so that stray datagrams are not mistaken for replies.
const PROBE_MAGIC: [u8; 4] = *b"DNrt";

/// Timestamp slot value of a probe not sent yet. Real timestamps are
/// nanoseconds since the start of the run and never reach it.
const UNSENT: u64 = u64::MAX;

/// How often the probe receiver wakes up without traffic to see whether the
/// run is over. Short, since it decides how late `rtt_probe` returns.
const PROBE_POLL: Duration = Duration::from_millis(10);

/// Safety net: `rtt_probe` returns at most this long after its schedule
/// (`count × interval + timeout`) even if its sender thread never reported
/// that it was done (it always does; this only turns a bug into a report).
const PROBE_SLACK: Duration = Duration::from_secs(2);

/// A UDP echo server on its own thread: every datagram is sent straight back
/// to where it came from, unchanged, whatever it contains.
///
/// The socket is created by the thread that calls [`EchoServer::start`] and
/// the server thread is spawned from it, so the server lives in the
/// caller's network namespace (see the module documentation). Stopping (or
/// dropping) it ends the thread within about [`POLL`].
#[derive(Debug)]
pub struct EchoServer {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    echoed: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl EchoServer {
    /// Binds `bind` (port 0 picks a free port: see
    /// [`EchoServer::local_addr`]) and starts echoing.
    pub fn start(bind: SocketAddr) -> io::Result<EchoServer> {
        let socket = UdpSocket::bind(bind)
            .map_err(|e| context(e, format_args!("binding the UDP echo server to {bind}")))?;
        // The read timeout is what lets the thread notice `stop`.
        socket.set_read_timeout(Some(POLL))?;
        let local_addr = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let echoed = Arc::new(AtomicU64::new(0));
        let thread = {
            let stop = Arc::clone(&stop);
            let echoed = Arc::clone(&echoed);
            thread::Builder::new()
                .name("dn-echo".to_owned())
                .spawn(move || echo_loop(&socket, &stop, &echoed))
                .map_err(|e| context(e, "starting the UDP echo server thread"))?
        };
        Ok(EchoServer {
            local_addr,
            stop,
            echoed,
            thread: Some(thread),
        })
    }

    /// The address the server is bound to, with the port the kernel chose.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Datagrams echoed so far.
    pub fn echoed(&self) -> u64 {
        self.echoed.load(Ordering::Relaxed)
    }

    /// Stops the server, waits for its thread (about [`POLL`] at most) and
    /// returns how many datagrams it echoed in all. ([`EchoServer::echoed`]
    /// can lag a reply the client already has: the count goes up after the
    /// echo is sent.)
    pub fn stop(mut self) -> u64 {
        self.shutdown();
        self.echoed()
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // The loop cannot panic on network input; a panic would be a
            // bug already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn echo_loop(socket: &UdpSocket, stop: &AtomicBool, echoed: &AtomicU64) {
    // Room for the largest UDP payload: every datagram comes back whole.
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Acquire) {
        match socket.recv_from(&mut buf) {
            Ok((n, peer)) => {
                // A failed echo is a lost reply, which is what the prober
                // measures; there is no one else to tell.
                if socket.send_to(&buf[..n], peer).is_ok() {
                    echoed.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) if is_transient(&e) => {}
            // Anything else (say ENOMEM) may repeat at once: wait a little
            // rather than spin, and keep serving.
            Err(_) => thread::sleep(POLL),
        }
    }
}

// ---------------------------------------------------------------------------
// RTT probe

/// What [`rtt_probe`] measured. Durations are zero when no reply came.
#[derive(Debug, Clone, PartialEq)]
pub struct RttReport {
    /// Probes handed to the kernel.
    pub sent: u32,
    /// Probes whose reply came back within the timeout (each counted once).
    pub received: u32,
    /// `sent - received`: no reply, or a reply later than the timeout.
    pub lost: u32,
    /// Probes the kernel refused to send (counted in neither `sent` nor
    /// `lost`; the first such error is returned instead if every send fails).
    pub send_errors: u32,
    /// Smallest RTT.
    pub min: Duration,
    /// Mean RTT.
    pub avg: Duration,
    /// Largest RTT.
    pub max: Duration,
    /// Median RTT (nearest rank).
    pub p50: Duration,
    /// 99th percentile RTT (nearest rank: the largest one below 100 samples).
    pub p99: Duration,
    /// Mean deviation as `ping` computes it: the standard deviation,
    /// `sqrt(mean(rtt²) − mean(rtt)²)`.
    pub mdev: Duration,
    /// The RTT of every received probe, in sequence (sending) order.
    pub samples: Vec<Duration>,
}

impl RttReport {
    /// Fraction of the probes sent that were lost, 0.0 to 1.0 (0.0 when
    /// nothing was sent).
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            f64::from(self.lost) / f64::from(self.sent)
        }
    }

    /// Statistics over `samples`, in sequence order.
    fn summarize(sent: u32, send_errors: u32, samples: Vec<Duration>) -> RttReport {
        let received = u32::try_from(samples.len()).unwrap_or(u32::MAX);
        let mut report = RttReport {
            sent,
            received,
            lost: sent.saturating_sub(received),
            send_errors,
            min: Duration::ZERO,
            avg: Duration::ZERO,
            max: Duration::ZERO,
            p50: Duration::ZERO,
            p99: Duration::ZERO,
            mdev: Duration::ZERO,
            samples,
        };
        let mut sorted = report.samples.clone();
        sorted.sort_unstable();
        let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) else {
            return report;
        };
        let n = sorted.len() as f64;
        let secs: Vec<f64> = sorted.iter().map(Duration::as_secs_f64).collect();
        let mean = secs.iter().sum::<f64>() / n;
        let mean_sq = secs.iter().map(|s| s * s).sum::<f64>() / n;
        report.min = min;
        report.max = max;
        report.avg = Duration::from_secs_f64(mean.max(0.0));
        report.mdev = Duration::from_secs_f64((mean_sq - mean * mean).max(0.0).sqrt());
        report.p50 = nearest_rank(&sorted, 50).unwrap_or_default();
        report.p99 = nearest_rank(&sorted, 99).unwrap_or_default();
        report
    }
}

impl fmt::Display for RttReport {
    /// One line, like ping's summary: counts, loss, then the RTT statistics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sent, {} received, {:.1}% loss",
            self.sent,
            self.received,
            self.loss_ratio() * 100.0
        )?;
        if self.send_errors > 0 {
            write!(f, ", {} send errors", self.send_errors)?;
        }
        if self.received > 0 {
            write!(
                f,
                ", rtt min/avg/max/mdev = {}/{}/{}/{}, p50 {}, p99 {}",
                format_ms(self.min),
                format_ms(self.avg),
                format_ms(self.max),
                format_ms(self.mdev),
                format_ms(self.p50),
                format_ms(self.p99)
            )?;
        }
        Ok(())
    }
}

/// A probe: magic, session, sequence number, send time in nanoseconds since
/// the start of the run (all big endian), zero padding to [`PROBE_LEN`].
fn encode_probe(session: u32, seq: u32, sent_ns: u64) -> [u8; PROBE_LEN] {
    let mut probe = [0u8; PROBE_LEN];
    probe[0..4].copy_from_slice(&PROBE_MAGIC);
    probe[4..8].copy_from_slice(&session.to_be_bytes());
    probe[8..12].copy_from_slice(&seq.to_be_bytes());
    probe[12..20].copy_from_slice(&sent_ns.to_be_bytes());
    probe
}

/// The sequence number and send time of a reply to one of this run's
/// probes; `None` for anything else (wrong size, magic, session or padding).
fn decode_reply(reply: &[u8], session: u32) -> Option<(u32, u64)> {
    if reply.len() != PROBE_LEN || reply.get(0..4)? != PROBE_MAGIC {
        return None;
    }
    let got_session = u32::from_be_bytes(reply.get(4..8)?.try_into().ok()?);
    let seq = u32::from_be_bytes(reply.get(8..12)?.try_into().ok()?);
    let sent_ns = u64::from_be_bytes(reply.get(12..20)?.try_into().ok()?);
    let padding_ok = reply.get(20..)?.iter().all(|&b| b == 0);
    (got_session == session && padding_ok).then_some((seq, sent_ns))
}

/// What the sender thread shares with the receiver.
struct SendProgress {
    /// Send time of each probe (ns since the run's start), [`UNSENT`] until
    /// it is sent. Written *before* the probe leaves, so that a reply can
    /// never arrive ahead of its timestamp.
    sent_at: Vec<AtomicU64>,
    /// Probes the kernel accepted.
    sent_ok: AtomicU32,
    /// Probes it refused.
    send_errors: AtomicU32,
    /// Send time of the last probe attempted.
    last_sent_ns: AtomicU64,
    /// The sender is finished; the counts above are final.
    done: AtomicBool,
    /// The receiver gave up: the sender stops.
    abort: AtomicBool,
}

/// Sends `count` probes (one per slot of `progress.sent_at`), the `i`th at
/// `base + i × interval`; returns the first send error, if any.
fn send_probes(
    socket: &UdpSocket,
    server: SocketAddr,
    session: u32,
    interval: Duration,
    base: Instant,
    progress: &SendProgress,
) -> Option<io::Error> {
    let mut first_error = None;
    for (seq, slot) in (0u32..).zip(&progress.sent_at) {
        // A fixed schedule rather than sleeping `interval` after each send:
        // no drift, and a late wake-up does not push every later probe.
        let due = base + interval.saturating_mul(seq);
        if !sleep_until(due, &progress.abort) {
            break;
        }
        let sent_ns = nanos_between(base, Instant::now());
        slot.store(sent_ns, Ordering::Release);
        progress.last_sent_ns.store(sent_ns, Ordering::Release);
        let probe = encode_probe(session, seq, sent_ns);
        let mut result = socket.send_to(&probe, server);
        if matches!(&result, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            result = socket.send_to(&probe, server);
        }
        match result {
            Ok(_) => {
                progress.sent_ok.fetch_add(1, Ordering::Release);
            }
            Err(e) => {
                // Nothing can legitimately answer a probe that never left.
                slot.store(UNSENT, Ordering::Release);
                progress.send_errors.fetch_add(1, Ordering::Release);
                first_error.get_or_insert(e);
            }
        }
    }
    progress.done.store(true, Ordering::Release);
    first_error
}

/// Receives replies until every probe sent is answered, or `timeout` after
/// the last one, or the safety deadline. Returns each probe's RTT, `None`
/// when its reply did not come within `timeout`.
fn receive_replies(
    socket: &UdpSocket,
    session: u32,
    timeout: Duration,
    base: Instant,
    hard_deadline: Instant,
    progress: &SendProgress,
) -> io::Result<Vec<Option<Duration>>> {
    let mut rtts: Vec<Option<Duration>> = vec![None; progress.sent_at.len()];
    let mut received: u32 = 0;
    // Larger than a probe, so that an oversized datagram is seen as such
    // (and ignored) instead of being truncated into a probe-sized one.
    let mut buf = [0u8; 2048];
    loop {
        let now = Instant::now();
        if progress.done.load(Ordering::Acquire) {
            if received >= progress.sent_ok.load(Ordering::Acquire) {
                break;
            }
            let last = base + Duration::from_nanos(progress.last_sent_ns.load(Ordering::Acquire));
            if now >= last + timeout {
                break;
            }
        }
        if now >= hard_deadline {
            break;
        }
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if is_transient(&e) => continue,
            // Unconnected UDP sockets do not report ICMP errors on Linux,
            // so an error here is a real local problem.
            Err(e) => return Err(context(e, "receiving RTT probe replies")),
        };
        let arrived = nanos_between(base, Instant::now());
        let Some((seq, sent_ns)) = buf.get(..n).and_then(|r| decode_reply(r, session)) else {
            continue;
        };
        let Ok(index) = usize::try_from(seq) else {
            continue;
        };
        let (Some(slot), Some(rtt_slot)) = (progress.sent_at.get(index), rtts.get_mut(index))
        else {
            continue;
        };
        // The timestamp must be the one we sent: a reply is trusted for its
        // sequence number only, never for the time it claims.
        let recorded = slot.load(Ordering::Acquire);
        if recorded == UNSENT || recorded != sent_ns || rtt_slot.is_some() {
            continue;
        }
        let rtt = Duration::from_nanos(arrived.saturating_sub(sent_ns));
        if rtt <= timeout {
            *rtt_slot = Some(rtt);
            received += 1;
        }
    }
    Ok(rtts)
}

/// Measures round-trip times to a UDP echo server (such as [`EchoServer`]).
///
/// Sends `count` probes of [`PROBE_LEN`] bytes, one every `interval` on a
/// fixed schedule, from a thread of its own, while the calling thread
/// receives replies: a reply may come back after later probes have left
/// (115 ms of RTT with 20 ms between probes). Replies are matched to probes
/// by sequence number and checked against the recorded send time; datagrams
/// that are not replies to this run, duplicates and replies slower than
/// `timeout` are ignored (the latter two count as lost). RTTs come from the
/// monotonic clock ([`Instant`]), taken when `recv` returns.
///
/// Returns once every probe sent is answered, or `timeout` after the last
/// probe: at most about `count × interval + timeout`. The socket is opened
/// on the calling thread, hence in its network namespace. Errors: invalid
/// arguments, the socket, a receive error, or every send failing.
pub fn rtt_probe(
    server: SocketAddr,
    count: u32,
    interval: Duration,
    timeout: Duration,
) -> io::Result<RttReport> {
    if count > MAX_PROBES {
        return Err(invalid_input(format!(
            "{count} probes: at most {MAX_PROBES} per run"
        )));
    }
    if timeout.is_zero() {
        return Err(invalid_input(
            "a probe timeout of zero would lose every reply",
        ));
    }
    let run = interval
        .checked_mul(count)
        .and_then(|schedule| schedule.checked_add(timeout))
        .filter(|run| *run <= MAX_PROBE_RUN)
        .ok_or_else(|| {
            invalid_input(format!(
                "{count} probes every {interval:?} with a {timeout:?} timeout: longer than \
                 {MAX_PROBE_RUN:?}"
            ))
        })?;
    if count == 0 {
        return Ok(RttReport::summarize(0, 0, Vec::new()));
    }

    // Unconnected, unlike `ping`'s socket: replies from another of the
    // server's addresses (a multihomed server bound to 0.0.0.0) still count,
    // and an ICMP port unreachable does not end the run with an error; the
    // session number keeps other traffic out.
    let socket = UdpSocket::bind(any_addr_like(server))
        .map_err(|e| context(e, "opening the RTT probe socket"))?;
    socket.set_read_timeout(Some(PROBE_POLL))?;
    let sender_socket = socket.try_clone()?;
    let session = session_id();
    let progress = SendProgress {
        sent_at: (0..count).map(|_| AtomicU64::new(UNSENT)).collect(),
        sent_ok: AtomicU32::new(0),
        send_errors: AtomicU32::new(0),
        last_sent_ns: AtomicU64::new(0),
        done: AtomicBool::new(false),
        abort: AtomicBool::new(false),
    };
    let base = Instant::now();
    let hard_deadline = base + run + PROBE_SLACK;

    let (received, send_error) = thread::scope(|scope| -> io::Result<_> {
        let sender = thread::Builder::new()
            .name("dn-rtt-send".to_owned())
            .spawn_scoped(scope, || {
                send_probes(&sender_socket, server, session, interval, base, &progress)
            })
            .map_err(|e| context(e, "starting the RTT probe sender thread"))?;
        let received = receive_replies(&socket, session, timeout, base, hard_deadline, &progress);
        progress.abort.store(true, Ordering::Release);
        let send_error = match sender.join() {
            Ok(e) => e,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok((received?, send_error))
    })?;

    let sent = progress.sent_ok.load(Ordering::Acquire);
    let send_errors = progress.send_errors.load(Ordering::Acquire);
    if sent == 0 {
        if let Some(e) = send_error {
            return Err(context(e, format_args!("sending RTT probes to {server}")));
        }
    }
    let samples = received.into_iter().flatten().collect();
    Ok(RttReport::summarize(sent, send_errors, samples))
}

/// Waits until the echo server at `server` answers, sending a probe every
/// 100 ms for at most `within`; returns how long that took.
///
/// Why: a path that was just built does not always carry packets at once.
/// On a fresh veth pair the first replies sometimes took about a second
/// (seen while other namespaces were being created at the same time; one
/// lost ARP request costs a second before the kernel retries), and
/// measuring then reports that second as RTT or loss. So measure after
/// this returns. Any reply to any of the probes will do, however late: the
/// RTT of the path may well be longer than the time between probes.
/// Errors: `TimedOut` if nothing answered in time, or the socket's.
pub fn wait_for_echo(server: SocketAddr, within: Duration) -> io::Result<Duration> {
    const EVERY: Duration = Duration::from_millis(100);
    let socket = UdpSocket::bind(any_addr_like(server))
        .map_err(|e| context(e, "opening the probe socket"))?;
    socket.set_read_timeout(Some(PROBE_POLL))?;
    let session = session_id();
    let start = Instant::now();
    let deadline = start + within;
    let mut next_send = start;
    let mut seq: u32 = 0;
    let mut buf = [0u8; 2048];
    let mut first_error = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            let why = match first_error {
                Some(e) => format!(" (sending: {e})"),
                None => String::new(),
            };
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer from the echo server at {server} within {within:?}{why}"),
            ));
        }
        if now >= next_send {
            let probe = encode_probe(session, seq, nanos_between(start, now));
            // A send can fail while the path comes up (no neighbour yet):
            // keep trying until the deadline, and say why if it comes.
            if let Err(e) = socket.send_to(&probe, server) {
                first_error.get_or_insert(e);
            }
            seq = seq.saturating_add(1);
            next_send += EVERY;
        }
        match socket.recv(&mut buf) {
            Ok(n) => {
                let ours = buf.get(..n).and_then(|r| decode_reply(r, session));
                if matches!(ours, Some((got, _)) if got < seq) {
                    return Ok(start.elapsed());
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(context(e, "waiting for the echo server")),
        }
    }
}

/// A number that differs between runs (and between concurrent runs), so
/// that replies to an earlier run arriving late are not taken for ours.
fn session_id() -> u32 {
    // RandomState is seeded from the OS and changes with every instance.
    let hash = RandomState::new().hash_one(std::process::id());
    (hash ^ (hash >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::super::testkit::*;
    use super::*;

    /// A UDP responder for tests: `respond` turns each datagram into the
    /// datagrams to send back, each after its delay. Stops on drop, and on
    /// its own after 10 s so that a failing test cannot hang.
    struct Responder {
        addr: SocketAddr,
        stop: Arc<AtomicBool>,
        thread: Option<JoinHandle<()>>,
    }

    type Respond = dyn Fn(&[u8]) -> Vec<(Duration, Vec<u8>)> + Send;

    impl Responder {
        fn start(respond: Box<Respond>) -> Responder {
            let socket = UdpSocket::bind(loopback()).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_millis(1)))
                .unwrap();
            let addr = socket.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            let thread = thread::spawn(move || {
                let end = Instant::now() + Duration::from_secs(10);
                let mut pending: Vec<(Instant, Vec<u8>, SocketAddr)> = Vec::new();
                let mut buf = [0u8; 2048];
                while !flag.load(Ordering::Acquire) && Instant::now() < end {
                    if let Ok((n, peer)) = socket.recv_from(&mut buf) {
                        let now = Instant::now();
                        for (delay, data) in respond(&buf[..n]) {
                            pending.push((now + delay, data, peer));
                        }
                    }
                    let now = Instant::now();
                    pending.retain(|(due, data, peer)| {
                        if *due <= now {
                            let _ = socket.send_to(data, *peer);
                            false
                        } else {
                            true
                        }
                    });
                }
            });
            Responder {
                addr,
                stop,
                thread: Some(thread),
            }
        }
    }

    impl Drop for Responder {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Release);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    #[test]
    fn rtt_on_loopback_gets_every_reply_fast() {
        let _heavy = exclusive();
        let server = EchoServer::start(loopback()).unwrap();
        let started = Instant::now();
        let report = rtt_probe(
            server.local_addr(),
            20,
            Duration::from_millis(5),
            Duration::from_secs(1),
        )
        .unwrap();
        let took = started.elapsed();
        println!("loopback rtt: {report} (run {took:?})");
        assert_eq!(report.sent, 20);
        assert_eq!(report.received, 20);
        assert_eq!(report.lost, 0);
        assert_eq!(report.send_errors, 0);
        assert_eq!(report.samples.len(), 20);
        // The median, not the largest: on a loaded machine one reply may
        // wait for the echo thread to get a CPU (see the veth test).
        assert!(report.p50 < Duration::from_millis(10), "{report}");
        assert!(report.min > Duration::ZERO);
        assert!(report.min <= report.p50 && report.p50 <= report.p99);
        assert!(report.p99 <= report.max && report.min <= report.avg);
        assert!(report.avg <= report.max);
        // It returns as soon as the last reply is in, not after the timeout.
        assert!(took < Duration::from_millis(500), "{took:?}");
        assert_eq!(server.stop(), 20);
    }

    #[test]
    fn rtt_without_server_loses_everything_within_the_timeout() {
        // A port nobody listens on (just freed): Linux answers with ICMP
        // port unreachable, which an unconnected socket does not report.
        let port = UdpSocket::bind(loopback()).unwrap().local_addr().unwrap();
        let started = Instant::now();
        let timeout = Duration::from_millis(300);
        let report = rtt_probe(port, 5, Duration::from_millis(10), timeout).unwrap();
        let took = started.elapsed();
        assert_eq!((report.sent, report.received, report.lost), (5, 0, 5));
        assert_eq!(report.loss_ratio(), 1.0);
        assert!(report.samples.is_empty());
        assert_eq!((report.min, report.max, report.mdev), Default::default());
        assert!(took >= timeout, "{took:?}");
        assert!(took < timeout + Duration::from_millis(400), "{took:?}");
        assert!(report.to_string().contains("100.0% loss"), "{report}");
    }

    #[test]
    fn replies_slower_than_the_interval_are_matched() {
        // 30 ms of RTT with a probe every 10 ms: three probes in flight.
        let delay = Duration::from_millis(30);
        let slow = Responder::start(Box::new(move |d| vec![(delay, d.to_vec())]));
        let report = rtt_probe(
            slow.addr,
            10,
            Duration::from_millis(10),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(report.received, 10, "{report}");
        for rtt in &report.samples {
            assert!(*rtt >= delay, "{rtt:?}");
            assert!(*rtt < delay + Duration::from_millis(100), "{rtt:?}");
        }
    }

    #[test]
    fn replies_later_than_the_timeout_are_lost() {
        let slow = Responder::start(Box::new(|d| vec![(Duration::from_millis(150), d.to_vec())]));
        let started = Instant::now();
        let report = rtt_probe(
            slow.addr,
            4,
            Duration::from_millis(10),
            Duration::from_millis(60),
        )
        .unwrap();
        assert_eq!((report.sent, report.received, report.lost), (4, 0, 4));
        assert!(started.elapsed() < Duration::from_millis(400));
    }

    #[test]
    fn malformed_forged_and_duplicate_replies_are_ignored() {
        let hostile = Responder::start(Box::new(|d| {
            let now = Duration::ZERO;
            let mut out = vec![(now, b"abc".to_vec()), (now, vec![0xff; PROBE_LEN])];
            if d.len() == PROBE_LEN {
                let mut wrong_magic = d.to_vec();
                wrong_magic[0] ^= 1;
                let mut far_seq = d.to_vec();
                far_seq[8..12].copy_from_slice(&999u32.to_be_bytes());
                let mut wrong_time = d.to_vec();
                wrong_time[19] ^= 0x40;
                let mut wrong_session = d.to_vec();
                wrong_session[4] ^= 1;
                let mut dirty_padding = d.to_vec();
                dirty_padding[PROBE_LEN - 1] = 7;
                let mut long = d.to_vec();
                long.push(0);
                for bad in [
                    wrong_magic,
                    far_seq,
                    wrong_time,
                    wrong_session,
                    dirty_padding,
                    long,
                ] {
                    out.push((now, bad));
                }
            }
            // The real echo, twice.
            out.push((now, d.to_vec()));
            out.push((Duration::from_millis(2), d.to_vec()));
            out
        }));
        let report = rtt_probe(
            hostile.addr,
            10,
            Duration::from_millis(5),
            Duration::from_millis(500),
        )
        .unwrap();
        assert_eq!((report.sent, report.received, report.lost), (10, 10, 0));
        assert_eq!(report.samples.len(), 10);
        assert!(report.max < Duration::from_millis(10), "{report}");
    }

    #[test]
    fn probe_arguments_are_checked() {
        let addr: SocketAddr = (Ipv4Addr::LOCALHOST, 9).into();
        let ms = Duration::from_millis;
        for (count, interval, timeout) in [
            (MAX_PROBES + 1, ms(1), ms(10)),
            (5, ms(1), Duration::ZERO),
            (100_000, Duration::from_secs(1), ms(10)),
            (u32::MAX, Duration::MAX, ms(1)),
        ] {
            let err = rtt_probe(addr, count, interval, timeout).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        }
        let empty = rtt_probe(addr, 0, ms(1), ms(10)).unwrap();
        assert_eq!((empty.sent, empty.received, empty.lost), (0, 0, 0));
        assert_eq!(empty.loss_ratio(), 0.0);
    }

    #[test]
    fn statistics_match_hand_computed_values() {
        // 1..=100 ms, given out of order, with one probe (of 101) lost.
        let samples: Vec<Duration> = (1..=100u64).rev().map(Duration::from_millis).collect();
        let r = RttReport::summarize(101, 0, samples.clone());
        assert_eq!((r.sent, r.received, r.lost), (101, 100, 1));
        assert_eq!(r.samples, samples, "kept in sequence order");
        assert_eq!(r.min, Duration::from_millis(1));
        assert_eq!(r.max, Duration::from_millis(100));
        assert_eq!(r.p50, Duration::from_millis(50));
        assert_eq!(r.p99, Duration::from_millis(99));
        assert!((r.avg.as_secs_f64() - 0.0505).abs() < 1e-9, "{:?}", r.avg);
        // Population standard deviation of 1..=100: sqrt((100² − 1) / 12).
        let mdev = (9999.0f64 / 12.0).sqrt() / 1e3;
        assert!((r.mdev.as_secs_f64() - mdev).abs() < 1e-9, "{:?}", r.mdev);

        let one = RttReport::summarize(1, 0, vec![Duration::from_millis(7)]);
        assert_eq!(one.p50, Duration::from_millis(7));
        assert_eq!(one.p99, Duration::from_millis(7));
        assert_eq!(one.mdev, Duration::ZERO);
    }

    #[test]
    fn probe_encoding_round_trips_and_rejects_others() {
        let p = encode_probe(0xdead_beef, 42, 123_456_789);
        assert_eq!(decode_reply(&p, 0xdead_beef), Some((42, 123_456_789)));
        assert_eq!(decode_reply(&p, 0xdead_bee0), None);
        assert_eq!(decode_reply(&p[..PROBE_LEN - 1], 0xdead_beef), None);
        assert_eq!(decode_reply(&[], 0xdead_beef), None);
    }
}
