//! The loop's own tests: real threads, real time, made-up backends.

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dummynet_engine::{Direction, FlowKey, PacketInfo};

use super::*;
use crate::{Body, LateReading};

/// A port that delivers `burst` frames on its first read and counts
/// what the data plane sends through it.
struct Port {
    burst: Vec<Arrival>,
    pending: u64,
    sent: Arc<Mutex<(u64, u64)>>,
    /// Says its arrivals carry the kernel's time, and how much room.
    late: Option<LateReading>,
    /// Wall-clock times of the hand-overs.
    sent_at: Arc<Mutex<Vec<u64>>>,
    /// Nothing to read before this...
    hold_until: Option<Instant>,
    /// ...though this says there is, so the data plane keeps looking.
    readable: Option<(UnixStream, UnixStream)>,
}

impl Backend for Port {
    fn describe(&self) -> String {
        "test port".into()
    }
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.readable.iter().map(|(r, _)| r.as_fd()).collect()
    }
    fn receive(&mut self, _: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
        if self.hold_until.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        arrivals.append(&mut self.burst);
        false
    }
    fn late_reading(&self) -> Option<LateReading> {
        self.late.clone()
    }
    fn complete(&mut self, _: Carrier, deliver: bool) {
        assert!(deliver, "nothing here should be dropped");
        self.pending += 1;
    }
    fn flush(&mut self) {
        if self.pending > 0 {
            let wall = Clock::new().realtime().wall;
            self.sent_at.lock().unwrap().push(wall);
            let mut sent = self.sent.lock().unwrap();
            sent.0 += self.pending;
            sent.1 += 1;
            self.pending = 0;
        }
    }
    fn stats(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

fn frame(n: u16) -> Arrival {
    let info = PacketInfo {
        len: 1000,
        key: FlowKey::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            n,
            9,
        ),
        dir: Direction::In,
        recv_if: None,
        xmit_if: None,
    };
    let carrier = Carrier {
        backend: 0,
        out_pass: None,
        id: 0,
        copy: false,
        reader: 0,
        body: Body::Frame(crate::bridge::EtherFrame {
            buf: vec![0; 1000],
            vnet: None,
            port: 0,
        }),
    };
    Arrival {
        info,
        carrier,
        stamp_ns: 0,
    }
}

/// An engine given `commands`, each of which must be accepted.
fn configured(commands: &[&str]) -> Engine<Carrier> {
    let mut engine = Engine::new(1);
    for cmd in commands {
        let parsed = crate::lang::commands(cmd, None).unwrap_or_else(|e| panic!("{cmd}: {e:?}"));
        let cmds = parsed.into_iter().map(|(_, c)| c).collect();
        if let Err(e) = engine.apply_all(0, cmds) {
            panic!("{cmd}: {e:?}");
        }
    }
    engine
}

/// A port that reads `burst` (at `hold_until`, if given; then it keeps
/// the data plane looking, with a descriptor that stays readable).
fn port_with(burst: Vec<Arrival>, hold_until: Option<Instant>) -> Port {
    let readable = hold_until.map(|_| {
        let pair = UnixStream::pair().unwrap();
        (&pair.1).write_all(b"x").unwrap();
        pair
    });
    Port {
        burst,
        pending: 0,
        sent: Arc::default(),
        late: None,
        sent_at: Arc::default(),
        hold_until,
        readable,
    }
}

/// Runs a data plane (nice, not real-time) over `port` until it has
/// sent `want` packets or 10 s have passed; returns its report, the
/// packets and hand-overs sent, and the hand-overs' wall-clock times.
fn run_until_sent(
    engine: Engine<Carrier>,
    port: Port,
    precision: Precision,
    want: u64,
) -> (Report, (u64, u64), Vec<u64>) {
    let (sent, sent_at) = (port.sent.clone(), port.sent_at.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let plane = DataPlane::new(engine, vec![Box::new(port)], None, stop.clone()).with_options(
        PlaneOptions {
            priority: Priority::Nice,
            precision,
            spin: DEFAULT_SPIN,
        },
    );
    let thread = std::thread::spawn(move || plane.run());
    let give_up = Instant::now() + Duration::from_secs(10);
    while sent.lock().unwrap().0 < want && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let report = thread.join().unwrap();
    let sent = *sent.lock().unwrap();
    let at = sent_at.lock().unwrap().clone();
    (report, sent, at)
}

/// A port whose kernel has no room for its frame the first `refusals`
/// times it is flushed (it holds the frame meanwhile, as the bridge
/// does), with nothing else to wake the data plane.
struct Refusing {
    burst: Vec<Arrival>,
    pending: u64,
    refusals: u32,
    sent: Arc<Mutex<Option<Instant>>>,
}

impl Backend for Refusing {
    fn describe(&self) -> String {
        "refusing port".into()
    }
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
    fn receive(&mut self, _: &mut Engine<Carrier>, arrivals: &mut Vec<Arrival>) -> bool {
        arrivals.append(&mut self.burst);
        false
    }
    fn complete(&mut self, _: Carrier, deliver: bool) {
        self.pending += u64::from(deliver);
    }
    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        if self.refusals > 0 {
            self.refusals -= 1;
            return;
        }
        self.pending = 0;
        *self.sent.lock().unwrap() = Some(Instant::now());
    }
    fn holding(&self) -> bool {
        self.pending > 0
    }
    fn stats(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// A port holding a refused frame is tried again every 100 us, not at
/// the data plane's next reason to wake (here none: it would sleep
/// 100 ms at a time, and 20 refusals would take 2 s).
#[test]
fn a_port_holding_frames_is_flushed_again_soon() {
    for precision in [Precision::Timer, Precision::Max] {
        let sent = Arc::new(Mutex::new(None));
        let port = Refusing {
            burst: vec![frame(1)],
            pending: 0,
            refusals: 20,
            sent: sent.clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let engine = configured(&["add 100 allow ip from any to any"]);
        let plane = DataPlane::new(engine, vec![Box::new(port)], None, stop.clone()).with_options(
            PlaneOptions {
                priority: Priority::Nice,
                precision,
                spin: DEFAULT_SPIN,
            },
        );
        let start = Instant::now();
        let thread = std::thread::spawn(move || plane.run());
        let give_up = start + Duration::from_secs(5);
        while sent.lock().unwrap().is_none() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        let report = thread.join().unwrap();
        let at = sent.lock().unwrap().expect("the held frame never left");
        let took = at.duration_since(start);
        // 20 tries 100 us apart: 2 ms, and generous room for a loaded
        // machine; without the retries, 2 s.
        assert!(
            took < Duration::from_millis(600),
            "{precision:?}: held {took:?}"
        );
        assert_eq!(report.delivered, 1, "{precision:?}");
    }
}

#[test]
fn a_control_plane_that_hangs_up_is_answered_then_no_longer_watched() {
    let (req_tx, req_rx) = std::sync::mpsc::channel();
    let (wake_rx, wake_tx) = UnixStream::pair().unwrap();
    wake_rx.set_nonblocking(true).unwrap();
    let (reply_tx, reply_rx) = std::sync::mpsc::channel();
    req_tx
        .send(Request {
            kind: RequestKind::Stats,
            reply: reply_tx,
            ticket: Ticket::default(),
        })
        .unwrap();
    drop((req_tx, wake_tx));
    let inbox = Inbox {
        requests: req_rx,
        wake: wake_rx,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut plane = DataPlane::new(Engine::new(1), Vec::new(), Some(inbox), stop);
    plane.serve_control();
    // The last request is still answered...
    let Ok(Answer::Stats(report)) = reply_rx.try_recv() else {
        panic!("the stats request was not answered with stats");
    };
    let text = report.to_string();
    assert!(text.contains("packets: 0 arrived"), "{text}");
    // No held_limit here, so packets are unbounded: the memory line
    // says so, and how to bound them (`ipfw memory` has the parts).
    assert!(text.contains("\nmemory: "), "{text}");
    assert!(
        text.contains("nothing bounds the packets held (no held_limit)")
            && text.contains("net.inet.ip.dummynet.held_limit"),
        "{text}"
    );
    // ...and the closed socket, which would poll readable forever, is
    // out of the wait.
    assert!(plane.mailbox.inbox.is_none());
}

/// A backend whose descriptor hangs up, as a bridge port's socket
/// polls with an error when its interface goes down.
struct HangsUp {
    sock: Option<UnixStream>,
    told: Arc<Mutex<Vec<RawFd>>>,
}

impl Backend for HangsUp {
    fn describe(&self) -> String {
        "hangs up".into()
    }
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.sock.iter().map(|s| s.as_fd()).collect()
    }
    /// Told: stops watching the descriptor, and gives up.
    fn fd_failed(&mut self, fd: RawFd) {
        self.told.lock().unwrap().push(fd);
        self.sock = None;
    }
    fn failure(&self) -> Option<String> {
        (!self.told.lock().unwrap().is_empty()).then(|| "port gone".to_string())
    }
    fn receive(&mut self, _: &mut Engine<Carrier>, _: &mut Vec<Arrival>) -> bool {
        false
    }
    fn complete(&mut self, _: Carrier, _: bool) {}
    fn flush(&mut self) {}
    fn stats(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// The data plane hands a backend the descriptor that failed (once:
/// the backend then leaves it out), and a backend's failure stops it
/// with that reason in the report.
#[test]
fn a_failed_descriptor_goes_to_its_backend_whose_failure_stops_the_plane() {
    failed_descriptor_after(0);
}

/// The same behind 70 quiet backends (a daemon with many joined
/// shells), with the control socket among the descriptors: the failed
/// one is the 72nd polled, beyond the 64 bits a wait used to report
/// (and the data plane then spun until the backend left).
#[test]
fn a_failed_descriptor_beyond_the_first_64_goes_to_its_backend() {
    failed_descriptor_after(70);
}

/// A backend with one descriptor that stays quiet.
struct Quiet(UnixStream, #[allow(dead_code)] UnixStream);

impl Backend for Quiet {
    fn describe(&self) -> String {
        "quiet".into()
    }
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.0.as_fd()]
    }
    /// Every backend hears of every failed descriptor; a quiet one's
    /// own must never be among them.
    fn fd_failed(&mut self, fd: RawFd) {
        assert_ne!(fd, self.0.as_raw_fd(), "a quiet descriptor reported failed");
    }
    fn receive(&mut self, _: &mut Engine<Carrier>, _: &mut Vec<Arrival>) -> bool {
        false
    }
    fn complete(&mut self, _: Carrier, _: bool) {}
    fn flush(&mut self) {}
    fn stats(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

fn failed_descriptor_after(quiet: usize) {
    let (sock, peer) = UnixStream::pair().unwrap();
    drop(peer);
    let fd = sock.as_raw_fd();
    let told = Arc::new(Mutex::new(Vec::new()));
    let mut backends: Vec<Box<dyn Backend>> = (0..quiet)
        .map(|_| {
            let (a, b) = UnixStream::pair().unwrap();
            Box::new(Quiet(a, b)) as Box<dyn Backend>
        })
        .collect();
    backends.push(Box::new(HangsUp {
        sock: Some(sock),
        told: told.clone(),
    }));
    // A control socket whose peer stays open: polled first, quiet.
    let (_requests_tx, requests) = std::sync::mpsc::channel();
    let (wake, _wake_peer) = UnixStream::pair().unwrap();
    wake.set_nonblocking(true).unwrap();
    let inbox = Inbox { requests, wake };
    let stop = Arc::new(AtomicBool::new(false));
    let plane = DataPlane::new(Engine::new(1), backends, Some(inbox), stop.clone()).with_options(
        PlaneOptions {
            priority: Priority::Nice,
            ..PlaneOptions::default()
        },
    );
    let thread = std::thread::spawn(move || plane.run());
    let give_up = Instant::now() + Duration::from_secs(5);
    while !thread.is_finished() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let report = thread.join().unwrap();
    assert_eq!(report.failure.as_deref(), Some("port gone"));
    assert_eq!(*told.lock().unwrap(), [fd]);
}

/// In both precisions, departures 4 ms apart are each woken for and
/// handed over on their own, and never before their time.
#[test]
fn departures_leave_one_by_one_and_never_early() {
    for precision in [Precision::Timer, Precision::Max] {
        departures_one_by_one(precision);
    }
}

fn departures_one_by_one(precision: Precision) {
    let engine = configured(&[
        "pipe 1 config bw 2Mbit/s delay 1ms",
        "add 100 pipe 1 ip from any to any",
    ]);
    // 8 frames of 1000 bytes at 2 Mbit/s: departures 4 ms apart, each
    // one woken for, staged and handed over on its own.
    let port = port_with((0..8).map(frame).collect(), None);
    let (report, sent, _) = run_until_sent(engine, port, precision, 8);
    assert_eq!((report.arrived, report.delivered, report.inside), (8, 8, 0));
    assert_eq!(sent.0, 8, "{report}");
    assert_eq!(report.lateness.early, 0, "{report}");
    // A thread woken later than the 4 ms gap (a loaded machine without
    // real-time priority, as here) rightly hands over the departures
    // due by then together; only an on-time plane can show them apart.
    if report.lateness.max_ns < 3_000_000 {
        assert_eq!(sent.1, 8, "{report}");
        assert_eq!(report.lateness.samples, 8, "{report}");
    } else {
        println!(
            "woken {} us late: not checking one by one",
            report.lateness.max_ns / 1000
        );
    }
}

/// A bridged frame passes the rules twice (`in`, then `out`): the
/// report counts it once, and its passes apart.
#[test]
fn a_bridged_frame_counts_once_though_it_passes_the_rules_twice() {
    let mut engine = configured(&[
        "pipe 1 config delay 1ms",
        "add 100 pipe 1 ip from any to any in",
        "add 200 allow ip from any to any",
    ]);
    let xmit = engine.iface("b0");
    let burst = (0..4)
        .map(|n| {
            let mut a = frame(n);
            a.carrier.out_pass = Some(xmit);
            a
        })
        .collect();
    let port = port_with(burst, None);
    let (report, sent, _) = run_until_sent(engine, port, Precision::Timer, 4);
    assert_eq!(sent.0, 4, "{report}");
    assert_eq!(
        (
            report.arrived,
            report.delivered,
            report.dropped,
            report.inside
        ),
        (4, 4, 0, 0),
        "{report}"
    );
    assert_eq!(report.passes, 8, "{report}");
}

/// Arrivals the kernel stamped run at those times, however late they
/// are read: frames that waited 30 ms unread in a 50 ms pipe leave 20 ms
/// after they are read, 50 ms after they arrived.
#[test]
fn arrivals_run_at_the_time_the_kernel_stamped_on_them() {
    let engine = configured(&[
        "pipe 1 config delay 50ms",
        "add 100 pipe 1 ip from any to any",
    ]);
    // Stamped 10 ms from now (after the data plane's clock starts), read
    // 40 ms from now.
    let stamp = Clock::new().realtime().wall + 10_000_000;
    let burst = (0..4)
        .map(|n| Arrival {
            stamp_ns: stamp + u64::from(n) * 1_000,
            ..frame(n)
        })
        .collect();
    let port = port_with(burst, Some(Instant::now() + Duration::from_millis(40)));
    let (report, _, sent_at) = run_until_sent(engine, port, Precision::Timer, 4);
    assert_eq!((report.arrived, report.delivered), (4, 4), "{report}");
    assert_eq!(report.lateness.early, 0, "{report}");
    // Never before 50 ms after the stamp; well before 50 ms after the
    // read (30 ms later), however busy the machine.
    let after = sent_at[0].saturating_sub(stamp);
    assert!((50_000_000..75_000_000).contains(&after), "{after} ns");
}

/// A batch of arrivals read late leaves in one hand-over: what they
/// release was due long ago, but has waited no time in the data plane.
#[test]
fn a_batch_read_late_still_leaves_in_one_hand_over() {
    let engine = configured(&["pipe 1 config bw 0", "add 100 pipe 1 ip from any to any"]);
    // Stamped 20 ms from now, read 30 ms from now: 10 ms late.
    let stamp = Clock::new().realtime().wall + 20_000_000;
    let burst = (0..32)
        .map(|n| Arrival {
            stamp_ns: stamp + u64::from(n) * 100,
            ..frame(n)
        })
        .collect();
    let port = port_with(burst, Some(Instant::now() + Duration::from_millis(30)));
    let (report, (packets, hand_overs), _) = run_until_sent(engine, port, Precision::Timer, 32);
    // One hand-over per FLUSH_SLACK the batch takes to run (a release
    // build: 1-2; a debug build: 6-8 here), never one per arrival (32,
    // when the slack counted from the departures' due times).
    assert_eq!(packets, 32, "{report}");
    assert!(hand_overs <= 16, "{hand_overs} hand-overs for 32 packets");
}
