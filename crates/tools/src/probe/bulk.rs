//! Throughput: a TCP bulk server and the client that measures through it,
//! in place of `iperf3` (see the [parent module](super) on namespaces and
//! on how every loop ends).
//!
//! # Socket buffers
//!
//! The bulk sockets deliberately keep the kernel's buffer *autotuning*
//! instead of setting `SO_RCVBUF`/`SO_SNDBUF` (which `std` cannot set
//! anyway). On Linux an explicit size is capped by `net.core.rmem_max` /
//! `wmem_max` (208 KiB on a stock kernel) and switches autotuning off for
//! that socket: asking for 4 MiB would really give about 416 KiB, a window
//! below the 720 KB bandwidth-delay product of 50 Mbit/s × 115 ms.
//! Autotuning instead grows each buffer up to the third field of
//! `net.ipv4.tcp_rmem` / `tcp_wmem` (6 MiB and 4 MiB by default, copied into
//! every new namespace), which covers that product. [`TcpBufferLimits`]
//! reads those ceilings so the demo can warn when a preset would be
//! window-limited anyway.

use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::{context, format_bps, invalid_input, is_transient, nanos_between, stopped, POLL};

/// Longest [`bulk_transfer`] accepted, on either side of the connection.
pub const MAX_BULK_DURATION: Duration = Duration::from_secs(60);

/// Request byte: the client uploads, the server measures.
const UPLOAD: u8 = b'U';
/// Request byte: the server sends, the client measures.
const DOWNLOAD: u8 = b'D';
/// Request: the direction byte, then the duration in milliseconds (u32, big
/// endian): the length of the receiver's window, whichever end receives.
const REQUEST_LEN: usize = 5;

/// Marks the receiver's report that ends an upload.
const REPORT_MAGIC: [u8; 4] = *b"DNbk";
/// Report: magic, then bytes, elapsed ns, steady bytes, steady ns (u64, big
/// endian). Integers rather than floats: both ends compute rates the same.
const REPORT_LEN: usize = 36;

/// How long connecting to the bulk server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server waits for the request once a client connects.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A receiver gives up when nothing at all arrives for this long: even the
/// slowest preset delivers a packet every 50 ms, and TCP's retransmission
/// backoff after a few losses in a row stays below this.
const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long past the duration the server goes on sending a download if the
/// client never closes (the client closes when its window is over, and its
/// window starts with its first byte, at most [`STALL_TIMEOUT`] late).
const SEND_GRACE: Duration = Duration::from_secs(15);
/// After sending an upload's report, how long the server goes on reading
/// (and discarding) what is still arriving before it closes. Closing with
/// unread data sends a reset, which travels behind the report on the same
/// path but must not reach the client before it has read the report (it
/// looks after every write, at least every [`POLL`]).
const REPORT_LINGER: Duration = Duration::from_secs(2);
/// Size of one write or read of bulk data.
const CHUNK: usize = 128 * 1024;
/// Connections a bulk server serves at once; more are closed at once.
const MAX_CONNECTIONS: usize = 16;
/// How often the bulk server's non-blocking accept loop looks for clients.
const ACCEPT_POLL: Duration = Duration::from_millis(10);

/// The receiver keeps (time, bytes so far) points about this far apart (at
/// most two per interval), plenty for slices of a tenth of a second or more.
const SAMPLE_EVERY_NS: u64 = 1_000_000;
/// At most this many points (131 s at two per millisecond, more than the
/// longest window): a bound on the receiver's memory.
const MAX_SAMPLES: usize = 1 << 18;
/// The steady-state window (the last two thirds of the transfer) is cut
/// into this many equal slices...
const STEADY_SLICES: usize = 10;
/// ...and this many of the fastest and as many of the slowest are left out:
/// the two middle slices remain, the median.
const STEADY_TRIM: usize = 4;

/// Which way bulk data flows, seen from the client of [`bulk_transfer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The client sends, the server receives and measures.
    Upload,
    /// The server sends, the client receives and measures.
    Download,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Upload => "upload",
            Direction::Download => "download",
        })
    }
}

/// What the receiving end of a [`bulk_transfer`] measured.
///
/// The receiver measures over a window of the requested duration that
/// opens when the first data arrives, so the handshake and the request are
/// not counted, while slow start is (in `goodput_bps`). Whatever is still
/// on its way when the window closes is not counted, and the connection is
/// then cut: a run takes the duration plus about one round trip, however
/// much the sender had buffered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkReport {
    /// Payload bytes received in the window.
    pub bytes: u64,
    /// The window: the requested duration, to the nanosecond.
    pub elapsed: Duration,
    /// `bytes × 8 / elapsed`, in bit/s: the average over the whole transfer,
    /// slow start included. 0 when too little arrived to time it.
    pub goodput_bps: f64,
    /// The steady-state rate, in bit/s: the figure to hold against a
    /// configured bandwidth. The first third of `elapsed` is left out (slow
    /// start), the last two thirds are cut into 10 equal slices, and this is
    /// their median rate: the rate over the two middle slices (their bytes
    /// over their time) once sorted by rate. A slice is timed from the last
    /// read at or before its start to the last read at or before its end,
    /// so that its bytes and its time cover the same span.
    ///
    /// Why the median: the application does not see data when it crosses
    /// the link but when TCP delivers it in order. After a loss (slow start
    /// overshooting the queue, typically) everything behind the hole is
    /// held until the retransmission arrives, then delivered at once: a
    /// slice with nothing, then a slice at several times the link rate. A
    /// plain "bytes after the first third over that time" counts whatever
    /// was held back at the cut and read 12% too high in such a run of 5 s
    /// on the LTE preset. Leaving out only the 2 fastest and 2 slowest
    /// slices was not enough either: with three such bursts in the window
    /// one was kept and read 10.30 Mbit/s on a link that carries at most
    /// 9.65 of TCP payload. The median stays at the link's goodput however
    /// many bursts and holes there are, as long as they are under half of
    /// the slices.
    ///
    /// The run must outlast slow start and the losses that end it by a good
    /// margin: see [`bulk_duration_for`]. 0 when too little arrived to time
    /// it.
    pub steady_bps: f64,
}

impl fmt::Display for BulkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2} MB in {:.3} s: goodput {}, steady {}",
            self.bytes as f64 / 1e6,
            self.elapsed.as_secs_f64(),
            format_bps(self.goodput_bps),
            format_bps(self.steady_bps)
        )
    }
}

/// A bulk transfer duration long enough for `steady_bps` to be the link's
/// rate on a path with round-trip time `rtt`: 40 round trips, at least 4 s,
/// at most [`MAX_BULK_DURATION`].
///
/// Why: after slow start and the losses that end it, TCP's delivery took
/// about 20 round trips to settle on the presets with a large
/// bandwidth-delay product (2.5 s on LTE, 13 s on geo-satellite, through
/// the emulator), and that must fall in the part of the run that
/// `steady_bps` leaves out (the first third, plus what the trimming
/// absorbs). Measured on LTE (IP-level 10 and 50 Mbit/s, so TCP goodput of
/// at most 9.65 and 48.3 with 1448 bytes of payload per 1500): 4 s and 5 s
/// read 9.65 and 48.0, 3 s read 40 to 49 down. On geo-satellite, 20 s read
/// 9.62 of 10 Mbit/s down, 10 s only 5.65. Paths with a small product
/// settle sooner (edge read 231.7 of 240 kbit/s in 10 s, where this says
/// 34 s): a demo in a hurry may cap it there.
pub fn bulk_duration_for(rtt: Duration) -> Duration {
    rtt.saturating_mul(40)
        .clamp(Duration::from_secs(4), MAX_BULK_DURATION)
}

/// `bytes` in `ns` as bit/s; 0 for an empty interval.
fn bits_per_second(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 * 1e9 / ns as f64
    }
}

/// The client's request, the first [`REQUEST_LEN`] bytes of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Request {
    dir: Direction,
    duration_ms: u32,
}

impl Request {
    fn new(dir: Direction, duration: Duration) -> io::Result<Request> {
        if duration.is_zero() || duration > MAX_BULK_DURATION {
            return Err(invalid_input(format!(
                "bulk transfer of {duration:?}: it must be more than 0 and at most \
                 {MAX_BULK_DURATION:?}"
            )));
        }
        // Rounded up, so a sub-millisecond duration is still a request.
        let ms = duration.as_nanos().div_ceil(1_000_000);
        let duration_ms = u32::try_from(ms).map_err(|_| invalid_input("duration too long"))?;
        Ok(Request { dir, duration_ms })
    }

    fn encode(self) -> [u8; REQUEST_LEN] {
        let mut bytes = [0u8; REQUEST_LEN];
        bytes[0] = match self.dir {
            Direction::Upload => UPLOAD,
            Direction::Download => DOWNLOAD,
        };
        bytes[1..].copy_from_slice(&self.duration_ms.to_be_bytes());
        bytes
    }

    /// `None` for an unknown direction or a duration out of range.
    fn decode(bytes: &[u8; REQUEST_LEN]) -> Option<Request> {
        let dir = match bytes[0] {
            UPLOAD => Direction::Upload,
            DOWNLOAD => Direction::Download,
            _ => return None,
        };
        let duration_ms = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        let duration = Duration::from_millis(u64::from(duration_ms));
        (duration_ms > 0 && duration <= MAX_BULK_DURATION).then_some(Request { dir, duration_ms })
    }

    fn duration(self) -> Duration {
        Duration::from_millis(u64::from(self.duration_ms))
    }
}

/// The receiver's measurement, as integers: what an upload's receiver sends
/// back to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Measurement {
    bytes: u64,
    elapsed_ns: u64,
    steady_bytes: u64,
    steady_ns: u64,
}

impl Measurement {
    fn encode(self) -> [u8; REPORT_LEN] {
        let mut out = [0u8; REPORT_LEN];
        out[0..4].copy_from_slice(&REPORT_MAGIC);
        let fields = [
            self.bytes,
            self.elapsed_ns,
            self.steady_bytes,
            self.steady_ns,
        ];
        for (chunk, value) in out[4..].chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&value.to_be_bytes());
        }
        out
    }

    /// `None` unless `bytes` is a well-formed report whose steady window
    /// lies within the transfer.
    fn decode(bytes: &[u8]) -> Option<Measurement> {
        if bytes.len() != REPORT_LEN || bytes.get(0..4)? != REPORT_MAGIC {
            return None;
        }
        let field = |i: usize| -> Option<u64> {
            let start = 4 + 8 * i;
            Some(u64::from_be_bytes(
                bytes.get(start..start + 8)?.try_into().ok()?,
            ))
        };
        let m = Measurement {
            bytes: field(0)?,
            elapsed_ns: field(1)?,
            steady_bytes: field(2)?,
            steady_ns: field(3)?,
        };
        (m.steady_bytes <= m.bytes && m.steady_ns <= m.elapsed_ns).then_some(m)
    }

    fn report(self) -> BulkReport {
        BulkReport {
            bytes: self.bytes,
            elapsed: Duration::from_nanos(self.elapsed_ns),
            goodput_bps: bits_per_second(self.bytes, self.elapsed_ns),
            steady_bps: bits_per_second(self.steady_bytes, self.steady_ns),
        }
    }
}

/// The receiver's running count: bytes so far, and (time, bytes so far)
/// points for the steady-state slices.
#[derive(Debug, Default)]
struct Meter {
    /// Arrival of the first data: time zero.
    start: Option<Instant>,
    bytes: u64,
    /// Arrival of the last data, ns after `start`.
    last_ns: u64,
    /// Each point is exact: all the bytes counted in it had arrived by its
    /// time, and none of those counted after it. The last point is always
    /// (`last_ns`, `bytes`).
    samples: Vec<(u64, u64)>,
}

impl Meter {
    /// `n` bytes arrived at `now`.
    fn record(&mut self, n: usize, now: Instant) {
        let start = *self.start.get_or_insert(now);
        let t = nanos_between(start, now);
        self.bytes = self.bytes.saturating_add(n as u64);
        self.last_ns = t;
        let point = (t, self.bytes);
        // Reads less than SAMPLE_EVERY_NS after the point before the last
        // one move the last point forward instead of adding one: the
        // points stay exact, and there are at most two per interval.
        let full = self.samples.len() >= MAX_SAMPLES;
        match self.samples.as_mut_slice() {
            [.., (before, _), last] if full || t.saturating_sub(*before) < SAMPLE_EVERY_NS => {
                *last = point;
            }
            _ => self.samples.push(point),
        }
    }

    /// The last point at or before `t` ns: its time and the bytes that had
    /// arrived by then; `(0, 0)` before the first.
    fn point_at(&self, t: u64) -> (u64, u64) {
        let after = self.samples.partition_point(|&(ts, _)| ts <= t);
        after
            .checked_sub(1)
            .and_then(|i| self.samples.get(i))
            .copied()
            .unwrap_or((0, 0))
    }

    /// Bytes that had arrived by `t` ns (at the resolution of the points).
    #[cfg(test)]
    fn bytes_by(&self, t: u64) -> u64 {
        self.point_at(t).1
    }

    /// The measurement of a window `end_ns` long (at least up to the last
    /// read), with the steady part described at [`BulkReport::steady_bps`].
    fn finish(&self, end_ns: u64) -> Measurement {
        let elapsed_ns = end_ns.max(self.last_ns);
        let from = elapsed_ns / 3;
        let width = (elapsed_ns - from) / STEADY_SLICES as u64;
        let mut slices: Vec<(u64, u64)> = Vec::with_capacity(STEADY_SLICES);
        if width > 0 {
            for k in 0..STEADY_SLICES as u64 {
                let a = from + k * width;
                // The last slice takes the remainder of the division.
                let b = if k + 1 == STEADY_SLICES as u64 {
                    elapsed_ns
                } else {
                    a + width
                };
                // Timed by the points themselves, not by the slice's
                // bounds: the bytes between two points arrived between
                // their times exactly, whereas a point up to a read's
                // spacing before a bound would put ±0.3% of noise into a
                // 333 ms slice at 10 Mbit/s (9.67 read on a link that
                // carries 9.65).
                let (ta, ba) = self.point_at(a);
                let (tb, bb) = self.point_at(b);
                slices.push((bb.saturating_sub(ba), tb.saturating_sub(ta)));
            }
        }
        slices.sort_by(|x, y| bits_per_second(x.0, x.1).total_cmp(&bits_per_second(y.0, y.1)));
        let kept = slices
            .get(STEADY_TRIM..slices.len().saturating_sub(STEADY_TRIM))
            .unwrap_or(&[]);
        Measurement {
            bytes: self.bytes,
            elapsed_ns,
            steady_bytes: kept.iter().map(|s| s.0).sum(),
            steady_ns: kept.iter().map(|s| s.1).sum(),
        }
    }
}

/// Fills `buf` from `stream` (whose reads time out every [`POLL`]) by
/// `deadline`.
fn read_full(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        if stop.load(Ordering::Acquire) {
            return Err(stopped());
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "peer too slow"));
        }
        match stream.read(&mut buf[filled..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection",
                ))
            }
            Ok(n) => filled += n,
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf` to `stream` (whose writes time out every [`POLL`])
/// by `deadline`.
fn write_full(
    stream: &mut TcpStream,
    buf: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut written = 0;
    while written < buf.len() {
        if stop.load(Ordering::Acquire) {
            return Err(stopped());
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "peer not reading"));
        }
        match stream.write(&buf[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes bulk data to `stream` for `duration`; returns the bytes written.
fn send_for(stream: &mut TcpStream, duration: Duration, stop: &AtomicBool) -> io::Result<u64> {
    // Zeros: nothing on the path compresses TCP payload.
    let chunk = vec![0u8; CHUNK];
    let end = Instant::now() + duration;
    let mut written = 0u64;
    while Instant::now() < end {
        if stop.load(Ordering::Acquire) {
            return Err(stopped());
        }
        match stream.write(&chunk) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written = written.saturating_add(n as u64),
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Reads and counts bulk data for `window`, from the first byte on, and
/// returns the measurement. Errors: the sender closing before the window is
/// over, nothing arriving for `stall` ([`STALL_TIMEOUT`] but in tests), or
/// the socket's.
fn receive_for(
    stream: &mut TcpStream,
    window: Duration,
    stall: Duration,
    stop: &AtomicBool,
) -> io::Result<Measurement> {
    let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    let mut buf = vec![0u8; CHUNK];
    let mut meter = Meter::default();
    let mut last_progress = Instant::now();
    loop {
        if stop.load(Ordering::Acquire) {
            return Err(stopped());
        }
        let now = Instant::now();
        if meter
            .start
            .is_some_and(|start| nanos_between(start, now) >= window_ns)
        {
            return Ok(meter.finish(window_ns));
        }
        if now.duration_since(last_progress) >= stall {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "nothing arrived for {stall:?} ({} bytes received)",
                    meter.bytes
                ),
            ));
        }
        match stream.read(&mut buf) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the sender closed the connection after {} bytes, before the end of \
                         the {window:?} window",
                        meter.bytes
                    ),
                ))
            }
            Ok(n) => {
                let now = Instant::now();
                // Read after the window closed: these bytes may have come
                // in before, but when is unknown, so they are left out.
                if meter
                    .start
                    .is_some_and(|start| nanos_between(start, now) > window_ns)
                {
                    return Ok(meter.finish(window_ns));
                }
                meter.record(n, now);
                last_progress = now;
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads and discards until the peer closes, `deadline` or `stop`.
fn discard_until(stream: &mut TcpStream, deadline: Instant, stop: &AtomicBool) {
    let mut buf = vec![0u8; CHUNK];
    while Instant::now() < deadline && !stop.load(Ordering::Acquire) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_transient(&e) => {}
            Err(_) => return,
        }
    }
}

/// The client side of an upload: sends until the server's report comes
/// back, looking for it (without blocking) after every write.
fn upload_until_report(stream: &mut TcpStream, duration: Duration) -> io::Result<Measurement> {
    let chunk = vec![0u8; CHUNK];
    let mut report = [0u8; REPORT_LEN];
    let mut got = 0;
    // The server's window opens with its first byte (at most STALL_TIMEOUT
    // late, or it gives up) and its report then needs a one-way trip.
    let deadline = Instant::now() + duration + STALL_TIMEOUT + REQUEST_TIMEOUT;
    loop {
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no report from the server long after the end of its window",
            ));
        }
        match stream.write(&chunk) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
        stream.set_nonblocking(true)?;
        let read = stream.read(&mut report[got..]);
        stream.set_nonblocking(false)?;
        match read {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection without a report",
                ))
            }
            Ok(n) => {
                got += n;
                if got == REPORT_LEN {
                    return Measurement::decode(&report).ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "malformed upload report")
                    });
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// A TCP bulk-transfer server on its own thread, for [`bulk_transfer`] in
/// both directions.
///
/// Protocol: the client opens a connection and sends a 5-byte request, the
/// direction (`'U'`: the client uploads; `'D'`: the server sends) then the
/// duration in milliseconds (u32, big endian, at most
/// [`MAX_BULK_DURATION`]). Whichever end receives measures over a window of
/// that duration opened by the first data byte, and the window's end ends
/// the transfer:
///
/// - `'U'`: the client sends until the server's report comes back. The
///   server reads and discards; when its window is over it sends its
///   measurement (36 bytes: `DNbk`, then bytes, window ns, steady bytes,
///   steady ns as big-endian u64) and one more byte, shuts down its write
///   side, goes on discarding for 2 s at most so that its close cannot
///   overtake the report, and closes. The client reads the report, leaves
///   the extra byte unread and closes, which resets the connection.
/// - `'D'`: the server sends until the client, its window over, closes the
///   connection (with data unread, which resets it), or for 15 s past the
///   duration at most.
///
/// Either way the connection ends with a reset from the client, which
/// discards what the sender still had buffered: the next measurement on
/// the same path only finds what was already in the emulator's queue.
///
/// Why the receiver's window ends the transfer, rather than the sender
/// stopping after the duration and the receiver reading to the end: the
/// sender's socket buffer (grown by autotuning) drains at the link's rate
/// after it stops. With the emulator on the edge preset, a 10 s upload took
/// 25 s that way. A malformed request closes the connection.
///
/// Each connection is served on a thread of its own, up to 16 at once. The
/// listening socket is created by the thread that calls
/// [`BulkServer::start`] and every thread is spawned from there, so the
/// server lives in the caller's network namespace (see the module
/// documentation). Stopping (or dropping) it ends every thread within about
/// [`POLL`], cutting off transfers in progress.
#[derive(Debug)]
pub struct BulkServer {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BulkServer {
    /// Binds `bind` (port 0 picks a free port: see
    /// [`BulkServer::local_addr`]) and starts accepting.
    pub fn start(bind: SocketAddr) -> io::Result<BulkServer> {
        let listener = TcpListener::bind(bind)
            .map_err(|e| context(e, format_args!("binding the bulk server to {bind}")))?;
        // Non-blocking accept polled every ACCEPT_POLL: std has no accept
        // timeout, and the loop must see `stop`.
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("dn-bulk".to_owned())
                .spawn(move || accept_loop(&listener, &stop))
                .map_err(|e| context(e, "starting the bulk server thread"))?
        };
        Ok(BulkServer {
            local_addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address the server listens on, with the port the kernel chose.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops the server, ending transfers in progress, and waits for its
    /// threads (about [`POLL`]).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // A panic would be a bug, already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

impl Drop for BulkServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(listener: &TcpListener, stop: &Arc<AtomicBool>) {
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        connections.retain(|c| !c.is_finished());
        match listener.accept() {
            Ok((stream, _peer)) => {
                if connections.len() >= MAX_CONNECTIONS {
                    // Dropping it closes it: the client sees the refusal.
                    continue;
                }
                let stop = Arc::clone(stop);
                let spawned = thread::Builder::new()
                    .name("dn-bulk-conn".to_owned())
                    .spawn(move || {
                        // The client sees any failure as the connection
                        // closing early; there is no one else to tell.
                        let _ = serve_connection(stream, &stop);
                    });
                if let Ok(connection) = spawned {
                    connections.push(connection);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // ECONNABORTED, EMFILE...: may repeat at once, so do not spin.
            Err(_) => thread::sleep(ACCEPT_POLL),
        }
    }
    for connection in connections {
        let _ = connection.join();
    }
}

fn serve_connection(mut stream: TcpStream, stop: &AtomicBool) -> io::Result<()> {
    // Accepted sockets do not inherit O_NONBLOCK on Linux, but say so.
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(POLL))?;
    let mut header = [0u8; REQUEST_LEN];
    read_full(
        &mut stream,
        &mut header,
        Instant::now() + REQUEST_TIMEOUT,
        stop,
    )?;
    let request = Request::decode(&header)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed bulk request"))?;
    match request.dir {
        Direction::Upload => {
            let measured = receive_for(&mut stream, request.duration(), STALL_TIMEOUT, stop)?;
            // One byte more than the report, which the client leaves unread:
            // closing a socket with unread data resets the connection at
            // once (RFC 2525, 2.17), which throws away the upload data still
            // in the client's socket buffer instead of letting it drain
            // across the link, queueing ahead of whatever is measured next.
            // (std cannot set SO_LINGER to 0, the usual way to do that.)
            let mut answer = [0u8; REPORT_LEN + 1];
            answer[..REPORT_LEN].copy_from_slice(&measured.encode());
            write_full(&mut stream, &answer, Instant::now() + REQUEST_TIMEOUT, stop)?;
            stream.shutdown(Shutdown::Write)?;
            discard_until(&mut stream, Instant::now() + REPORT_LINGER, stop);
            Ok(())
        }
        Direction::Download => {
            match send_for(&mut stream, request.duration() + SEND_GRACE, stop) {
                Ok(_) => stream.shutdown(Shutdown::Write),
                // The client closing after its window: the normal end.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// Measures TCP goodput to or from a [`BulkServer`] over `duration`, as the
/// *receiving* side sees it (see [`BulkReport`]).
///
/// [`Direction::Upload`]: this end sends, and returns the measurement the
/// server sends back when its window is over. [`Direction::Download`]: the
/// server sends, this end measures, then closes. Either way the call takes
/// `duration` plus about one round trip (plus the connection's setup). It
/// gives up with `TimedOut` when nothing arrives for 10 s. The socket is
/// opened on the calling thread, hence in its network namespace.
pub fn bulk_transfer(
    server: SocketAddr,
    dir: Direction,
    duration: Duration,
) -> io::Result<BulkReport> {
    let request = Request::new(dir, duration)?;
    let mut stream = TcpStream::connect_timeout(&server, CONNECT_TIMEOUT)
        .map_err(|e| context(e, format_args!("connecting to the bulk server at {server}")))?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(POLL))?;
    // Nothing stops a client but its deadlines.
    let never = AtomicBool::new(false);
    write_full(
        &mut stream,
        &request.encode(),
        Instant::now() + REQUEST_TIMEOUT,
        &never,
    )
    .map_err(|e| context(e, format_args!("sending the {dir} request to {server}")))?;
    let measured = match dir {
        Direction::Upload => upload_until_report(&mut stream, duration)
            .map_err(|e| context(e, format_args!("uploading to {server}")))?,
        Direction::Download => receive_for(&mut stream, duration, STALL_TIMEOUT, &never)
            .map_err(|e| context(e, format_args!("downloading from {server}")))?,
    };
    // Closing with data unread (the byte after the report, or the rest of
    // the download) resets the connection: the sender's buffer is thrown
    // away instead of draining across the link (see BulkServer).
    drop(stream);
    Ok(measured.report())
}

/// The ceilings of Linux's TCP buffer autotuning (the third field of
/// `net.ipv4.tcp_rmem` and `tcp_wmem`), in bytes: how far one connection's
/// buffers can grow, hence its window (see the module documentation on why
/// we rely on autotuning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpBufferLimits {
    /// Largest receive buffer.
    pub rmem_max: u64,
    /// Largest send buffer.
    pub wmem_max: u64,
}

impl TcpBufferLimits {
    /// Reads the ceilings of the calling thread's network namespace (files
    /// under `/proc/sys/net` show the namespace of the thread that opens
    /// them).
    pub fn read() -> io::Result<TcpBufferLimits> {
        Ok(TcpBufferLimits {
            rmem_max: third_field("/proc/sys/net/ipv4/tcp_rmem")?,
            wmem_max: third_field("/proc/sys/net/ipv4/tcp_wmem")?,
        })
    }

    /// The largest bandwidth-delay product, in bytes, one connection can
    /// keep in flight without being window-limited, conservatively: half of
    /// the smaller ceiling, since part of each buffer goes to the kernel's
    /// per-packet overhead rather than to data (`tcp_adv_win_scale`).
    pub fn max_bdp(&self) -> u64 {
        self.rmem_max.min(self.wmem_max) / 2
    }
}

fn third_field(path: &str) -> io::Result<u64> {
    let text = fs::read_to_string(path).map_err(|e| context(e, format_args!("reading {path}")))?;
    text.split_whitespace()
        .nth(2)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path}: expected three numbers, found {:?}", text.trim()),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::EchoServer;
    use super::*;

    #[test]
    fn bulk_upload_on_loopback() {
        let _heavy = exclusive();
        let server = BulkServer::start(loopback()).unwrap();
        let started = Instant::now();
        let r = bulk_transfer(
            server.local_addr(),
            Direction::Upload,
            Duration::from_secs(1),
        )
        .unwrap();
        // The receiver's window ends the run: no waiting for buffers.
        assert!(started.elapsed() < Duration::from_millis(1300));
        println!("loopback upload: {r}");
        check_loopback_bulk(&r);
        server.stop();
    }

    #[test]
    fn bulk_download_on_loopback() {
        let _heavy = exclusive();
        let server = BulkServer::start(loopback()).unwrap();
        let started = Instant::now();
        let r = bulk_transfer(
            server.local_addr(),
            Direction::Download,
            Duration::from_secs(1),
        )
        .unwrap();
        // The receiver's window ends the run: no waiting for buffers.
        assert!(started.elapsed() < Duration::from_millis(1300));
        println!("loopback download: {r}");
        check_loopback_bulk(&r);
        server.stop();
    }

    fn check_loopback_bulk(r: &BulkReport) {
        assert!(r.bytes > 10_000_000, "{r}");
        assert_eq!(r.elapsed, Duration::from_secs(1), "{r}");
        let expected = r.bytes as f64 * 8.0 / r.elapsed.as_secs_f64();
        assert!((r.goodput_bps - expected).abs() < expected * 1e-6, "{r}");
        assert!(r.steady_bps > 80e6, "{r}");
    }

    #[test]
    fn steady_rate_leaves_out_slow_start_and_recovery_bursts() {
        // One read per millisecond for 900 ms: 0.5 MB each for the first
        // 250 ms (slow start), then 1 MB per millisecond, except that from
        // 250 to 349 ms TCP holds everything back behind a lost segment
        // and delivers it all at 350 ms, across the start of the window.
        let t0 = Instant::now();
        let mut meter = Meter::default();
        for ms in 0..=900u64 {
            let n = match ms {
                250..=349 => continue,
                350 => 101_000_000,
                0..=249 => 500_000,
                _ => 1_000_000,
            };
            meter.record(n, t0 + Duration::from_millis(ms));
        }
        let m = meter.finish(900_000_000);
        assert_eq!(m.elapsed_ns, 900_000_000);
        assert_eq!(m.bytes, 250 * 500_000 + 101_000_000 + 550 * 1_000_000);
        // Window 300..900 ms in slices of 60 ms; the burst's slice and the
        // slowest ones are left out, the 2 middle ones carry 1 MB per ms.
        assert_eq!(m.steady_ns, 2 * 60_000_000);
        assert_eq!(m.steady_bytes, 2 * 60_000_000);
        let r = m.report();
        assert!((r.steady_bps - 8e9).abs() < 1.0, "{}", r.steady_bps);
        assert!(r.goodput_bps < r.steady_bps);
        // What "bytes after the first third over that time" would say.
        let naive = bits_per_second(m.bytes - meter.bytes_by(300_000_000), 600_000_000);
        assert!(naive > 8.5e9, "{naive}");

        // Three losses: the one above, whose burst lands in the window's
        // first slice, and two more inside it, each holding 40 ms of data
        // back (a slice at a third of the rate) and delivering it at once
        // in the next slice (at 5/3 of the rate). Leaving out the two
        // fastest and two slowest slices keeps one burst and reads 11% high;
        // the median does not.
        let mut lossy = Meter::default();
        for ms in 0..=900u64 {
            let n = match ms {
                250..=349 | 500..=539 | 680..=719 => continue,
                350 => 101_000_000,
                540 | 720 => 41_000_000,
                _ => 1_000_000,
            };
            lossy.record(n, t0 + Duration::from_millis(ms));
        }
        let r = lossy.finish(900_000_000).report();
        assert!((r.steady_bps - 8e9).abs() < 1.0, "{}", r.steady_bps);

        // A steady 1448 bytes every 1.2 ms (9.653 Mbit/s) for 5 s, a period
        // that does not divide the slices: the rate comes out exact.
        let mut steady = Meter::default();
        for k in 0..=4_166u64 {
            steady.record(1448, t0 + Duration::from_micros(k * 1_200));
        }
        let r = steady.finish(5_000_000_000).report();
        let link = 1448.0 * 8.0 / 1.2e-3;
        assert!(
            (r.steady_bps / link - 1.0).abs() < 1e-9,
            "{} of {link}",
            r.steady_bps
        );

        // Reads closer together than the point spacing keep exact points.
        let mut dense = Meter::default();
        for us in 0..=10_000u64 {
            dense.record(10, t0 + Duration::from_micros(us * 100));
        }
        assert!(dense.samples.len() <= 2_100, "{}", dense.samples.len());
        assert_eq!(dense.samples.last(), Some(&(1_000_000_000, 100_010)));
        for &(t, bytes) in &dense.samples {
            assert_eq!(bytes, (t / 100_000 + 1) * 10);
        }

        // One read: nothing to time, rates are zero rather than NaN.
        let mut single = Meter::default();
        single.record(100, t0);
        let r = single.finish(0).report();
        assert_eq!((r.bytes, r.goodput_bps, r.steady_bps), (100, 0.0, 0.0));
    }

    #[test]
    fn wire_formats_round_trip_and_reject_garbage() {
        let m = Measurement {
            bytes: 10,
            elapsed_ns: 20,
            steady_bytes: 5,
            steady_ns: 9,
        };
        assert_eq!(Measurement::decode(&m.encode()), Some(m));
        let mut bad = m.encode();
        bad[0] = b'X';
        assert_eq!(Measurement::decode(&bad), None);
        let inconsistent = Measurement {
            steady_bytes: 11,
            ..m
        };
        assert_eq!(Measurement::decode(&inconsistent.encode()), None);
        assert_eq!(Measurement::decode(&m.encode()[..REPORT_LEN - 1]), None);

        let req = Request::new(Direction::Download, Duration::from_micros(1500)).unwrap();
        assert_eq!(req.duration_ms, 2);
        assert_eq!(Request::decode(&req.encode()), Some(req));
        assert_eq!(Request::decode(b"X\0\0\0\x01"), None);
        assert_eq!(Request::decode(b"U\0\0\0\0"), None);
        assert_eq!(Request::decode(b"D\xff\xff\xff\xff"), None);
        for bad in [Duration::ZERO, MAX_BULK_DURATION + Duration::from_millis(1)] {
            let err = Request::new(Direction::Upload, bad).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn bulk_server_drops_garbage_and_stops_fast_with_idle_clients() {
        let _heavy = exclusive();
        let server = BulkServer::start(loopback()).unwrap();
        let addr = server.local_addr();
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"Xjunk").unwrap();
        junk.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 16];
        // Closed by the server: end of file (or a reset).
        assert!(matches!(junk.read(&mut buf), Ok(0) | Err(_)));
        // Still serving after that.
        let r = bulk_transfer(addr, Direction::Download, Duration::from_millis(200)).unwrap();
        assert!(r.bytes > 0);
        // A client that connects and says nothing does not hold up stop().
        let _idle = TcpStream::connect(addr).unwrap();
        thread::sleep(Duration::from_millis(30));
        let started = Instant::now();
        server.stop();
        assert!(started.elapsed() < Duration::from_millis(300));
    }

    #[test]
    fn a_silent_sender_is_given_up_on() {
        let listener = TcpListener::bind(loopback()).unwrap();
        let _silent = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(POLL)).unwrap();
        let never = AtomicBool::new(false);
        let started = Instant::now();
        let stall = Duration::from_millis(200);
        let err = receive_for(&mut stream, Duration::from_secs(4), stall, &never).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("nothing arrived"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn servers_stop_within_about_poll() {
        let echo = EchoServer::start(loopback()).unwrap();
        let bulk = BulkServer::start(loopback()).unwrap();
        let started = Instant::now();
        drop(echo);
        drop(bulk);
        assert!(started.elapsed() < Duration::from_millis(300));
    }

    #[test]
    fn bulk_transfer_to_a_closed_port_fails_clearly() {
        let port = TcpListener::bind(loopback()).unwrap().local_addr().unwrap();
        let started = Instant::now();
        let err = bulk_transfer(port, Direction::Upload, Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        assert!(
            err.to_string().contains("connecting to the bulk server"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn bulk_durations_scale_with_the_rtt() {
        let ms = Duration::from_millis;
        assert_eq!(bulk_duration_for(ms(0)), Duration::from_secs(4));
        assert_eq!(bulk_duration_for(ms(115)), ms(4600));
        assert_eq!(bulk_duration_for(ms(650)), ms(26_000));
        assert_eq!(bulk_duration_for(Duration::MAX), MAX_BULK_DURATION);
    }

    #[test]
    fn tcp_buffer_ceilings_are_read() {
        let limits = TcpBufferLimits::read().unwrap();
        assert!(limits.rmem_max > 0 && limits.wmem_max > 0, "{limits:?}");
    }
}
