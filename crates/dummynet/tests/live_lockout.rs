//! Idle and slow clients lock nobody out (issue 25): while a crowd holds
//! 64 idle connections, 32 that sent half a request and 32 that sent a
//! whole one and never read the answer (each reopened as soon as the
//! daemon drops it), a client's `GET /v1/stats` and `ipfw show` over the
//! control socket each answer within a second, every time, for ten seconds;
//! and an event stream opened before the crowd came is still open after it.

#[allow(dead_code)]
mod live_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dummynet_io::netns::Netns;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn};
use nix::sys::time::TimeVal;

use live_common::*;

const PORT: u16 = 8080;
/// Connections that send nothing.
const IDLE: usize = 64;
/// Connections that send part of a request and stall; as many again send
/// a whole request and never read the answer.
const HALF: usize = 32;
/// How long the crowd stays.
const WINDOW: Duration = Duration::from_secs(10);
/// The longest a client's request may take while it does.
const BOUND: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
enum Kind {
    Idle,
    Partial,
    Deaf,
}

/// Opens one connection of a kind, having sent what that kind sends.
type Connect = Box<dyn Fn(Kind, usize) -> Option<OwnedFd> + Send>;

/// The crowd: its connections are held open on a thread of their own
/// until it stops (at most [`WINDOW`] and a margin).
struct Crowd {
    stop: Arc<AtomicBool>,
    open: Arc<AtomicUsize>,
    reopened: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Crowd {
    /// Starts the crowd on a thread (in `ns` if given) and returns once
    /// every connection was tried at least once.
    fn start(ns: Option<&Netns>, connect: Connect) -> Crowd {
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(AtomicUsize::new(0));
        let reopened = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicBool::new(false));
        let (s, o, r, st) = (
            stop.clone(),
            open.clone(),
            reopened.clone(),
            started.clone(),
        );
        let body = move || hold(&connect, &s, &o, &r, &st);
        let thread = match ns {
            Some(ns) => ns.spawn_thread("crowd", body).expect("the crowd's thread"),
            None => std::thread::spawn(body),
        };
        let deadline = Instant::now() + SETUP_WAIT;
        while !started.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the crowd never connected");
            std::thread::sleep(Duration::from_millis(10));
        }
        Crowd {
            stop,
            open,
            reopened,
            thread: Some(thread),
        }
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The crowd's loop: every connection the daemon closed (or never took)
/// is opened again, every 20 ms, until `stop` or the window and a margin
/// are over.
fn hold(
    connect: &Connect,
    stop: &AtomicBool,
    open: &AtomicUsize,
    reopened: &AtomicUsize,
    started: &AtomicBool,
) {
    let kinds: Vec<Kind> = (0..IDLE)
        .map(|_| Kind::Idle)
        .chain((0..HALF).map(|_| Kind::Partial))
        .chain((0..HALF).map(|_| Kind::Deaf))
        .collect();
    let mut conns: Vec<Option<OwnedFd>> = kinds
        .iter()
        .enumerate()
        .map(|(i, &k)| connect(k, i))
        .collect();
    started.store(true, Ordering::Release);
    let end = Instant::now() + WINDOW + Duration::from_secs(5);
    while !stop.load(Ordering::Acquire) && Instant::now() < end {
        let gone: Vec<bool> = {
            let mut fds: Vec<PollFd> = conns
                .iter()
                .flatten()
                .map(|fd| PollFd::new(fd.as_fd(), rdhup()))
                .collect();
            let _ = poll(&mut fds, PollTimeout::ZERO);
            let mut hung = fds.iter().map(|p| {
                p.revents()
                    .is_none_or(|r| r.intersects(rdhup() | PollFlags::POLLHUP | PollFlags::POLLERR))
            });
            conns
                .iter()
                .map(|c| c.is_none() || hung.next().unwrap_or(true))
                .collect()
        };
        for (i, gone) in gone.into_iter().enumerate() {
            if gone {
                conns[i] = connect(kinds[i], i);
                reopened.fetch_add(1, Ordering::Relaxed);
            }
        }
        open.store(conns.iter().flatten().count(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// POLLRDHUP (not among nix's names): the peer closed its side.
fn rdhup() -> PollFlags {
    PollFlags::from_bits_retain(nix::libc::POLLRDHUP)
}

/// Times `request` every 400 ms while the crowd holds on, and checks that
/// each took at most [`BOUND`].
fn measure(what: &str, crowd: &Crowd, mut request: impl FnMut() -> Result<(), String>) {
    // Let the crowd settle in every slot it can get.
    std::thread::sleep(Duration::from_millis(500));
    let end = Instant::now() + WINDOW;
    let mut took = Vec::new();
    while Instant::now() < end {
        let t = Instant::now();
        let result = request();
        took.push((t.elapsed(), result));
        std::thread::sleep(Duration::from_millis(400));
    }
    let ms: Vec<String> = took
        .iter()
        .map(|(d, r)| format!("{}{}", d.as_millis(), if r.is_ok() { "" } else { "!" }))
        .collect();
    println!(
        "{what} under the crowd ({} open at the end, {} reopened), ms: {}",
        crowd.open.load(Ordering::Relaxed),
        crowd.reopened.load(Ordering::Relaxed),
        ms.join(" ")
    );
    for (d, r) in &took {
        assert!(
            r.is_ok() && *d <= BOUND,
            "{what}: a request took {d:?} ({r:?}) with the crowd on; all (ms, ! failed): {}",
            ms.join(" ")
        );
    }
    assert!(took.len() >= 10, "{what}: only {} requests", took.len());
}

/// A TCP connection to the API from 127.0.0.2 to .5 (four peers), with a
/// tiny receive buffer so that an answer that is not read stays unsent.
fn http_connect(kind: Kind, i: usize) -> Option<OwnedFd> {
    let fd = socket::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .ok()?;
    socket::setsockopt(&fd, sockopt::RcvBuf, &2048).ok()?;
    // connect(2) gives up after the send timeout.
    socket::setsockopt(&fd, sockopt::SendTimeout, &TimeVal::new(0, 200_000)).ok()?;
    let peer = u8::try_from(2 + i % 4).ok()?;
    socket::bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::new(127, 0, 0, peer, 0),
    )
    .ok()?;
    socket::connect(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::new(127, 0, 0, 1, PORT),
    )
    .ok()?;
    let mut s = TcpStream::from(fd);
    let sent: &[u8] = match kind {
        Kind::Idle => b"",
        Kind::Partial => b"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        Kind::Deaf => b"GET /v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    };
    s.write_all(sent).ok()?;
    Some(s.into())
}

#[test]
fn idle_and_slow_clients_do_not_lock_out_the_http_api() {
    if !ready(
        "idle_and_slow_clients_do_not_lock_out_the_http_api",
        &["ip"],
    ) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let mut daemon = path.daemon("lockout", None, &["--http", &format!("127.0.0.1:{PORT}")]);
    let ns = Netns::open_named(&path.m.name).expect("the daemon's namespace");
    // A client from 127.0.0.1: the whole exchange, Connection: close.
    let stats = || -> Result<(), String> {
        ns.run(|| {
            let mut s = TcpStream::connect(("127.0.0.1", PORT)).map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(|e| e.to_string())?;
            s.write_all(b"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            s.read_to_end(&mut out).map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out);
            if text.starts_with("HTTP/1.1 200") {
                Ok(())
            } else {
                Err(format!("answer: {}", text.lines().next().unwrap_or("")))
            }
        })
        .map_err(|e| e.to_string())?
    };
    let up = Instant::now() + SETUP_WAIT;
    while stats().is_err() {
        daemon.proc.assert_running();
        assert!(Instant::now() < up, "no HTTP API after {SETUP_WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A long-lived stream, read all along: never evicted for being long.
    let stream = ns
        .run(|| TcpStream::connect(("127.0.0.1", PORT)))
        .expect("entering the daemon's namespace")
        .expect("connecting for the event stream");
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let answered = answered.clone();
        let mut stream = stream;
        std::thread::spawn(move || -> Result<String, String> {
            stream
                .write_all(b"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .map_err(|e| e.to_string())?;
            stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .map_err(|e| e.to_string())?;
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            let end = Instant::now() + WINDOW + Duration::from_secs(10);
            while !stop.load(Ordering::Acquire) && Instant::now() < end {
                match stream.read(&mut buf) {
                    Ok(0) => return Err("the stream ended".into()),
                    Ok(n) => {
                        head.extend_from_slice(&buf[..n.min(4096 - head.len().min(4096))]);
                        answered.store(true, Ordering::Release);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(format!("the stream broke: {e}")),
                }
            }
            Ok(String::from_utf8_lossy(&head).into_owned())
        })
    };
    let deadline = Instant::now() + SETUP_WAIT;
    while !answered.load(Ordering::Acquire) {
        assert!(Instant::now() < deadline, "the event stream never answered");
        std::thread::sleep(Duration::from_millis(10));
    }
    let crowd = Crowd::start(Some(&ns), Box::new(http_connect));
    measure("GET /v1/stats", &crowd, stats);
    drop(crowd);
    stop.store(true, Ordering::Release);
    let head = reader
        .join()
        .expect("the stream's reader")
        .unwrap_or_else(|e| panic!("the event stream did not outlast the crowd: {e}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    daemon.proc.assert_running();
}

#[test]
fn idle_and_slow_clients_do_not_lock_out_the_control_socket() {
    if !ready(
        "idle_and_slow_clients_do_not_lock_out_the_control_socket",
        &["ip"],
    ) {
        return;
    }
    let _serial = serial();
    let path = BridgePath::new();
    let mut daemon = path.daemon("lockout", Some("add 100 allow ip from any to any\n"), &[]);
    let socket: PathBuf = daemon.socket.clone();
    let at = socket.clone();
    let connect = move |kind: Kind, _: usize| -> Option<OwnedFd> {
        let mut s = UnixStream::connect(&at).ok()?;
        let sent: &[u8] = match kind {
            Kind::Idle => b"",
            Kind::Partial => b"{\"argv\": [\"show\"",
            Kind::Deaf => b"{\"argv\": [\"show\"]}\n",
        };
        s.write_all(sent).ok()?;
        Some(s.into())
    };
    // `ipfw show` as a user runs it: the binary, which asks a busy daemon
    // again (BusyBackoff) before it gives up.
    let show = || -> Result<(), String> {
        let out = run_bounded(
            Command::new(DUMMYNET)
                .args(["ipfw", "--socket"])
                .arg(&socket)
                .arg("show"),
            Duration::from_secs(15),
            "dummynet ipfw show",
        );
        let said = text(&out.stdout);
        if out.status.success() && said.contains("00100") {
            Ok(())
        } else {
            Err(format!("{}: {}{}", out.status, said, text(&out.stderr)))
        }
    };
    show().expect("ipfw show before the crowd");
    let crowd = Crowd::start(None, Box::new(connect));
    measure("ipfw show", &crowd, show);
    drop(crowd);
    daemon.proc.assert_running();
}
