//! The control socket: moves the protocol's requests and replies
//! ([`super::protocol`]) over a Unix socket, one JSON object per line each
//! way and one request per connection, with the limits that bound what a
//! client may cost (size, deadlines, clients at once, in places that idle
//! and slow clients cannot exhaust) and a thread per client; plus the
//! client side that `dummynet ipfw`, `dummynet dnctl` and the
//! `ipfw`/`dnctl` names of the binary use. What a request means and
//! how it is answered is the protocol module's.

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dummynet_io::netns::Netns;

use dummynet_dataplane::dataplane::Request;
// The protocol's names, where the fuzz target and older callers find them.
pub use super::protocol::{
    handle, BatchCommand, Caller, ClientRequest, ErrorAt, ErrorKind, PlaneLink, Reply,
    EX_UNAVAILABLE, EX_USAGE,
};

/// Where the daemon listens unless told otherwise (`--socket`, or the
/// `DUMMYNET_SOCKET` environment variable for both sides).
pub const DEFAULT_SOCKET: &str = "/run/dummynet.sock";

/// The socket path: `DUMMYNET_SOCKET` if set, else [`DEFAULT_SOCKET`].
pub fn default_socket() -> PathBuf {
    std::env::var_os("DUMMYNET_SOCKET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

pub use crate::limits::{BusyBackoff, Limits, BUSY_WAIT};
// The client half, where older callers find it.
pub use crate::client::{call, call_within, ClientError};

mod places;
use places::{Clients, Slot, Stage};

/// Who may use the socket besides root, and what it costs them.
#[derive(Debug, Clone, Default)]
pub struct ControlOptions {
    /// `--socket-group`: its members may connect (the socket is then mode
    /// 0660 and owned by the group) and drive the daemon; files their
    /// commands name (profiles, traces) are opened with their own rights.
    pub group: Option<u32>,
    pub limits: Limits,
}

/// A listening control socket; the file is removed when this drops.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Why the daemon could not take its socket.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("a dummynet daemon is already listening on {0}; stop it first or pass --socket PATH")]
    Taken(PathBuf),
    #[error("{0} exists and is not a socket; it is left alone: remove it or pass --socket PATH")]
    NotASocket(PathBuf),
    #[error("cannot listen on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ControlServer {
    /// Listens on `path` (mode 0600: root only, as ipfw is; 0660 and owned
    /// by the group given in `options`), sending work to the data plane
    /// through `requests` and waking it with a byte on `wake`. Clients are
    /// served each on its own thread, in `ns` if given (where the data
    /// plane runs, so that they read its addresses and routes). A stale
    /// socket file (no one answering) is replaced; a live daemon's is
    /// refused, and so is anything that is not a socket (never removed: it
    /// is someone's file).
    pub fn start(
        path: &Path,
        requests: Sender<Request>,
        wake: UnixStream,
        ns: Option<&Netns>,
        options: ControlOptions,
    ) -> Result<ControlServer, ServerError> {
        let io_err = |source| ServerError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(ServerError::NotASocket(path.to_path_buf()))
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => return Err(ServerError::Taken(path.to_path_buf())),
                // Nobody listens: a daemon killed before it could remove it.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(io_err)?
                }
                Err(e) => return Err(io_err(e)),
            },
        }
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(io_err)?;
            }
        }
        let listener = UnixListener::bind(path).map_err(io_err)?;
        let mode = match options.group {
            Some(gid) => {
                std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_err)?;
                0o660
            }
            None => 0o600,
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io_err)?;
        listener.set_nonblocking(true).map_err(io_err)?;
        wake.set_nonblocking(true).map_err(io_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let link = PlaneLink {
            requests,
            wake: Arc::new(wake),
        };
        let body = move || accept_loop(listener, link, options, flag);
        let thread = match ns {
            Some(ns) => ns
                .spawn_thread("dummynet-control", body)
                .map_err(|e| io_err(std::io::Error::other(e.to_string())))?,
            None => std::thread::Builder::new()
                .name("dummynet-control".into())
                .spawn(body)
                .map_err(io_err)?,
        };
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether `path` is a socket file on which nobody listens: a daemon's that
/// was killed before it could remove it. Only "connection refused" says
/// so; a live socket, a file of another type or an error that proves
/// nothing (permission denied) does not.
pub fn is_stale_socket(path: &Path) -> bool {
    let socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    socket
        && matches!(
            UnixStream::connect(path),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
        )
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        // Only the accept loop is joined: it polls the flag every few
        // milliseconds. Client threads are bounded by their timeouts and
        // never hold up the daemon's exit.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(
    listener: UnixListener,
    link: PlaneLink,
    options: ControlOptions,
    stop: Arc<AtomicBool>,
) {
    let clients = Clients::new(&options.limits);
    let book = Arc::new(super::join::JoinBook::default());
    let me = nix::unistd::geteuid().as_raw();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let limits = &options.limits;
                // Accepted sockets do not inherit the listener's
                // non-blocking mode on Linux; the timeouts bound each call.
                let set = conn
                    .set_read_timeout(Some(limits.read_timeout))
                    .and_then(|()| conn.set_write_timeout(Some(limits.write_timeout)));
                if set.is_err() {
                    continue;
                }
                let Some(caller) = admitted(&conn, me, options.group) else {
                    refuse(
                        &conn,
                        ErrorKind::Denied,
                        "dummynet: permission denied: the control socket is for root \
                         (and the --socket-group of the daemon)\n",
                    );
                    continue;
                };
                let user = match &caller {
                    Caller::As(id) => Some(id.uid),
                    Caller::Trusted | Caller::NoFiles => None,
                };
                let Some(slot) = Slot::take(&clients, user, &conn) else {
                    refuse(
                        &conn,
                        ErrorKind::Busy,
                        &format!(
                            "dummynet: busy: {} clients are being served; try again\n",
                            match user {
                                Some(_) => limits.per_user.min(limits.max_clients),
                                None => limits.max_clients,
                            }
                        ),
                    );
                    continue;
                };
                let (link, limits, book) = (link.clone(), limits.clone(), book.clone());
                let spawned = std::thread::Builder::new()
                    .name("dummynet-client".into())
                    .spawn(move || serve_client(&conn, &caller, &link, &limits, &book, slot));
                // Out of threads: the connection went with the closure.
                drop(spawned);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Whether the peer may use the socket: root, the daemon's own user, or a
/// member of `group`; and if so, as whom it names files. The socket
/// file's mode already keeps others out; this holds even if it was
/// changed.
fn admitted(conn: &UnixStream, me: u32, group: Option<u32>) -> Option<Caller> {
    let cred =
        nix::sys::socket::getsockopt(conn, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    if cred.uid() == 0 || cred.uid() == me {
        return Some(Caller::Trusted);
    }
    let gid = group?;
    // The groups it had when it connected, as the kernel recorded them.
    let groups = dummynet_io::fsident::peer_groups(conn).ok()?;
    (cred.gid() == gid || groups.contains(&gid)).then(|| {
        Caller::As(dummynet_io::fsident::FsIdentity {
            uid: cred.uid(),
            gid: cred.gid(),
            groups,
        })
    })
}

/// Tells a client it is not served, without waiting on it.
fn refuse(conn: &UnixStream, kind: ErrorKind, why: &str) {
    let _ = conn.set_nonblocking(true);
    let _ = write_reply(conn, &Reply::err(kind, EX_UNAVAILABLE, why));
}

fn serve_client(
    conn: &UnixStream,
    caller: &Caller,
    link: &PlaneLink,
    limits: &Limits,
    book: &super::join::JoinBook,
    slot: Slot,
) {
    let request = read_line(conn, limits.max_request, limits.read_timeout);
    // Its whole request is in: it keeps its place from now on.
    slot.stage(Stage::Working);
    let reply = match request.and_then(|line| decode_request(&line, limits.max_request)) {
        // A joined shell holds its connection as long as it lives: not
        // one of the clients served at once (the book bounds those).
        Ok(ClientRequest {
            join: Some(join), ..
        }) => {
            drop(slot);
            let allowed = matches!(caller, Caller::Trusted);
            super::join::serve(conn, join, allowed, link, limits, book);
            return;
        }
        Ok(req) => handle(req, caller, link, limits),
        Err(e) => Reply::err(
            ErrorKind::Syntax,
            EX_USAGE,
            format!("dummynet: bad control request: {e}\n"),
        ),
    };
    slot.stage(Stage::Writing(Instant::now()));
    let _ = write_reply_within(conn, &reply, limits.write_timeout);
}

/// One request line of at most `max` bytes (one past it when longer), all
/// of it within `deadline`
/// (however slowly it trickles in).
fn read_line(
    mut conn: &UnixStream,
    max: usize,
    deadline: Duration,
) -> Result<Vec<u8>, RequestError> {
    let until = Instant::now() + deadline;
    let mut line = Vec::new();
    let mut chunk = [0u8; 8192];
    while !line.ends_with(b"\n") && line.len() <= max {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RequestError::Late);
        }
        conn.set_read_timeout(Some(left))?;
        // Up to the newline or one byte past the limit; a client sends
        // nothing after its line before it is answered.
        let room = (max + 1 - line.len()).min(chunk.len());
        let n = match std::io::Read::read(&mut conn, &mut chunk[..room]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(RequestError::Late)
            }
            Err(e) => return Err(e.into()),
        };
        let got = &chunk[..n];
        match got.iter().position(|&b| b == b'\n') {
            Some(end) => line.extend_from_slice(&got[..=end]),
            None => line.extend_from_slice(got),
        }
    }
    Ok(line)
}

/// The request in `line`, as read from a client: at most `max` bytes, a
/// newline at the end, one JSON object. Whatever the bytes, an error that
/// says what is wrong, never a panic (the `control_request` fuzz target).
pub fn decode_request(line: &[u8], max: usize) -> Result<ClientRequest, RequestError> {
    if line.len() > max {
        return Err(RequestError::TooLarge { max });
    }
    if !line.ends_with(b"\n") {
        return Err(RequestError::Incomplete);
    }
    Ok(serde_json::from_slice(line)?)
}

/// Why a client's request line could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("larger than {max} bytes")]
    TooLarge { max: usize },
    #[error("incomplete (no newline before the connection closed)")]
    Incomplete,
    /// Not all of it within [`Limits::read_timeout`].
    #[error("no complete request in time")]
    Late,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not one JSON object of the protocol's.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// Writes `reply`, all of it within `deadline` (however slowly the client
/// reads).
fn write_reply_within(
    mut conn: &UnixStream,
    reply: &Reply,
    deadline: Duration,
) -> std::io::Result<()> {
    let mut text = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    text.push('\n');
    let until = Instant::now() + deadline;
    let mut left = text.as_bytes();
    while !left.is_empty() {
        let time = until.saturating_duration_since(Instant::now());
        if time.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        conn.set_write_timeout(Some(time))?;
        match conn.write(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => left = &left[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_reply(mut conn: &UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut text = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    text.push('\n');
    conn.write_all(text.as_bytes())
}

/// Parses a command line and applies it (the engine fills what it leaves
/// out from its current settings), in tests.
#[cfg(test)]
pub fn run_command<P: dummynet_engine::Payload>(
    engine: &mut dummynet_engine::Engine<P>,
    now: dummynet_engine::Nanos,
    argv: &[String],
    cwd: Option<&Path>,
) -> Reply {
    match dummynet_lang::parse_args_in(argv, cwd) {
        Ok(parsed) => super::protocol::execute(engine, now, &parsed, false),
        Err(e) => super::protocol::parse_error(&e, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::call_once;
    use crate::protocol::EX_TEMPFAIL;
    use dummynet_dataplane::dataplane::{Answer, DataPlane, Inbox, RequestKind};
    use dummynet_engine::Engine;
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;

    fn run(engine: &mut Engine<()>, line: &str) -> Reply {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        run_command(engine, 0, &argv, None)
    }

    #[test]
    fn a_sysctl_sets_the_default_of_a_later_command() {
        let mut engine: Engine<()> = Engine::new(1);
        let r = run(&mut engine, "pipe 1 config codel");
        assert_eq!(r.status, 0, "{}", r.stderr);
        let show = run(&mut engine, "pipe 1 show").stdout;
        assert!(show.contains("AQM CoDel target 5ms"), "{show}");

        // FreeBSD's unit for this sysctl is microseconds.
        let r = run(&mut engine, "sysctl net.inet.ip.dummynet.codel.target=7000");
        assert_eq!(r.status, 0, "{}", r.stderr);
        run(&mut engine, "pipe 2 config codel");
        let show = run(&mut engine, "pipe 2 show").stdout;
        assert!(show.contains("AQM CoDel target 7ms"), "{show}");
    }

    /// FreeBSD's own test script gives fq_codel `target 0ms interval 0ms`:
    /// taken, brought within bounds, with a warning on stderr (status 0).
    #[test]
    fn a_value_out_of_a_plug_in_bounds_is_clamped_with_a_warning() {
        let mut engine: Engine<()> = Engine::new(1);
        let r = run(
            &mut engine,
            "sched 1 config type fq_codel target 0ms interval 0ms",
        );
        assert_eq!(r.status, 0, "{}", r.stderr);
        assert_eq!(
            r.stderr.matches("ipfw: warning: fq_codel").count(),
            2,
            "{}",
            r.stderr
        );
        let show = run(&mut engine, "sched 1 show").stdout;
        assert!(show.contains("target 1us interval 1us"), "{show}");
        // The next command, within bounds, says nothing.
        let r = run(&mut engine, "pipe 1 config bw 1Mbit/s");
        assert_eq!((r.status, r.stderr.as_str()), (0, ""));
        // The parser's doubts come the same way.
        let r = run(&mut engine, "pipe 1 config bw 10");
        assert_eq!(r.status, 0, "{}", r.stderr);
        assert!(
            r.stderr.starts_with("ipfw: warning: `bw 10` is 10 bit/s"),
            "{}",
            r.stderr
        );
    }

    /// `dnctl flush` (the client sends its own name first) removes the
    /// pipes and keeps the rules; `ipfw flush` the opposite.
    #[test]
    fn dnctl_flush_is_about_pipes_and_ipfw_flush_about_rules() {
        let mut engine: Engine<()> = Engine::new(1);
        for line in [
            "pipe 1 config bw 1Mbit/s",
            "add 100 pipe 1 ip from any to any",
        ] {
            assert_eq!(run(&mut engine, line).status, 0, "{line}");
        }
        assert_eq!(run(&mut engine, "dnctl -q flush").status, 0);
        assert!(run(&mut engine, "pipe show").stdout.is_empty());
        assert!(run(&mut engine, "show").stdout.contains("00100"));
        assert_eq!(run(&mut engine, "ipfw -q flush").status, 0);
        assert!(!run(&mut engine, "show").stdout.contains("00100"));
    }

    #[test]
    fn a_bad_command_is_a_usage_error_and_changes_nothing() {
        let mut engine: Engine<()> = Engine::new(1);
        let r = run(&mut engine, "pipe 1 config codel target 5parsecs");
        assert_eq!(r.status, EX_USAGE);
        assert!(r.stderr.contains("5parsecs"), "{}", r.stderr);
        assert!(run(&mut engine, "pipe show").stdout.is_empty());
    }

    /// A control server in front of a stand-in data plane that answers
    /// every request at once (unless `held`: then it waits until it is
    /// not), with `limits`.
    struct Served {
        server: Option<ControlServer>,
        dir: PathBuf,
        plane: Option<std::thread::JoinHandle<()>>,
        held: Arc<AtomicBool>,
        /// Requests the stand-in data plane took.
        taken: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Served {
        fn new(name: &str, limits: Limits) -> Served {
            let dir = std::env::temp_dir()
                .join(format!("dummynet-control-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let (req_tx, req_rx) = mpsc::channel::<Request>();
            let (_wake_rx, wake_tx) = UnixStream::pair().unwrap();
            let held = Arc::new(AtomicBool::new(false));
            let hold = held.clone();
            let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let count = taken.clone();
            let plane = std::thread::spawn(move || {
                let _wake_rx = _wake_rx;
                let engine: Engine<()> = Engine::new(1);
                let mut pending = Vec::new();
                // Ends when the server, and so every sender, is gone.
                loop {
                    match req_rx.recv_timeout(Duration::from_millis(5)) {
                        Ok(req) if req.ticket.take() => {
                            pending.push(req);
                            count.fetch_add(1, Ordering::AcqRel);
                        }
                        Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                    if hold.load(Ordering::Acquire) {
                        continue;
                    }
                    for req in pending.drain(..) {
                        let answer = match req.kind {
                            RequestKind::Stats => Answer::Stats(Box::default()),
                            RequestKind::Snapshot => Answer::Snapshot {
                                snap: Box::new(engine.snapshot()),
                                now: 0,
                            },
                            RequestKind::Apply { .. } => Answer::Applied(Ok(Vec::new())),
                            RequestKind::ApplyAll { .. } => Answer::AppliedAll(Ok(Vec::new())),
                            RequestKind::Attach { backend, .. } => {
                                Answer::Attached(Err(("no ports here".into(), backend)))
                            }
                            RequestKind::Detach { .. } => Answer::Detached(None, Ok(Vec::new())),
                        };
                        let _ = req.reply.send(answer);
                    }
                }
            });
            let options = ControlOptions {
                group: None,
                limits,
            };
            let server =
                ControlServer::start(&dir.join("sock"), req_tx, wake_tx, None, options).unwrap();
            Served {
                server: Some(server),
                dir,
                plane: Some(plane),
                held,
                taken,
            }
        }

        fn path(&self) -> PathBuf {
            self.dir.join("sock")
        }

        fn stats(&self) -> Reply {
            let req = ClientRequest {
                stats: true,
                ..Default::default()
            };
            call(&self.path(), &req).unwrap()
        }

        /// Sends `bytes` raw and reads the answer line (bounded by the
        /// server's own timeouts, and 10 s here).
        fn raw(&self, bytes: &[u8]) -> Reply {
            let mut conn = UnixStream::connect(self.path()).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            // The server may answer and close before all of it is sent.
            let _ = conn.write_all(bytes);
            let mut line = String::new();
            BufReader::new(&conn).read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap()
        }
    }

    impl Drop for Served {
        fn drop(&mut self) {
            drop(self.server.take());
            if let Some(p) = self.plane.take() {
                let _ = p.join();
            }
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn short() -> Limits {
        Limits {
            max_clients: 4,
            per_user: 4,
            max_request: 4096,
            read_timeout: Duration::from_millis(300),
            write_timeout: Duration::from_millis(300),
            stall: Duration::from_millis(100),
            answer_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_request_over_the_size_limit_is_refused_with_the_limit() {
        let served = Served::new("size", short());
        let mut big = vec![b'x'; 5000];
        big.push(b'\n');
        let r = served.raw(&big);
        assert_eq!(r.status, EX_USAGE);
        assert!(r.stderr.contains("larger than 4096 bytes"), "{}", r.stderr);
        // An endless line without a newline is cut off the same way.
        let r = served.raw(&vec![b'{'; 8192]);
        assert!(r.stderr.contains("larger than 4096 bytes"), "{}", r.stderr);
        assert_eq!(served.stats().status, 0);
    }

    #[test]
    fn a_silent_client_is_cut_off_while_others_are_served() {
        let served = Served::new("silent", short());
        let silent = UnixStream::connect(served.path()).unwrap();
        silent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Served meanwhile, not after the silent one's timeout.
        let shown = call(
            &served.path(),
            &ClientRequest {
                argv: vec!["show".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(shown.status, 0, "{shown:?}");
        assert!(shown.stdout.contains("65535"), "{}", shown.stdout);
        // The silent one is told why it is dropped once its time is up.
        let mut line = String::new();
        BufReader::new(&silent).read_line(&mut line).unwrap();
        let r: Reply = serde_json::from_str(&line).unwrap();
        assert!(
            r.stderr.contains("no complete request in time"),
            "{}",
            r.stderr
        );
    }

    /// A data plane that takes a request and never answers holds its
    /// client for two answer timeouts, then the client hears the request
    /// is still pending: not "withdrawn" (it was taken), not silence.
    #[test]
    fn a_taken_request_left_unanswered_is_reported_pending_in_bounded_time() {
        let (req_tx, req_rx) = mpsc::channel::<Request>();
        let (_wake_rx, wake_tx) = UnixStream::pair().unwrap();
        wake_tx.set_nonblocking(true).unwrap();
        let (held_tx, held_rx) = mpsc::channel();
        let plane = std::thread::spawn(move || {
            let req = req_rx.recv().unwrap();
            assert!(req.ticket.take());
            // Holds the reply channel open, unanswered, until told.
            let _ = held_rx.recv();
            drop(req);
        });
        let link = PlaneLink {
            requests: req_tx,
            wake: Arc::new(wake_tx),
        };
        let limits = Limits {
            answer_timeout: Duration::from_millis(200),
            ..short()
        };
        let started = std::time::Instant::now();
        // On a thread of its own, so that a wait without bound fails this
        // test instead of hanging it.
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let argv = ["pipe", "1", "config", "bw", "1Mbit/s"]
                .map(String::from)
                .to_vec();
            let req = ClientRequest {
                argv,
                ..Default::default()
            };
            let _ = done_tx.send(handle(req, &Caller::Trusted, &link, &limits));
        });
        let got = done_rx.recv_timeout(Duration::from_secs(10));
        let waited = started.elapsed();
        held_tx.send(()).unwrap();
        plane.join().unwrap();
        let r = got.expect("the client was still waiting after 10 s");
        assert_eq!(r.status, EX_TEMPFAIL, "{r:?}");
        assert_eq!(r.kind, Some(ErrorKind::Pending));
        assert!(r.stderr.contains("still pending"), "{}", r.stderr);
        assert!(r.stderr.contains("within 400 ms"), "{}", r.stderr);
        assert!(
            waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
            "waited {waited:?}"
        );
    }

    /// Whatever a client sends, decoding says what is wrong, and a good
    /// line decodes (the `control_request` fuzz target's seeds).
    #[test]
    fn request_lines_that_do_not_decode_are_kinds() {
        assert!(matches!(
            decode_request(&[b'x'; 64], 32),
            Err(RequestError::TooLarge { max: 32 })
        ));
        assert!(matches!(
            decode_request(b"{}", 4096),
            Err(RequestError::Incomplete)
        ));
        assert!(matches!(
            decode_request(b"{\"argv\": 7}\n", 4096),
            Err(RequestError::Json(_))
        ));
    }

    #[test]
    fn request_lines_decode_or_say_why() {
        let ok = decode_request(b"{\"argv\": [\"show\"], \"cwd\": \"/tmp\"}\n", 4096).unwrap();
        assert_eq!(ok.argv, ["show"]);
        assert_eq!(ok.cwd.as_deref(), Some(Path::new("/tmp")));
        let e = decode_request(b"{\"argv\": [\"show\"]}", 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no newline"), "{e}");
        let e = decode_request(&[b'x'; 64], 32).unwrap_err().to_string();
        assert!(e.contains("larger than 32 bytes"), "{e}");
        let e = decode_request(b"{\"argv\": 7}\n", 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type"), "{e}");
        let e = decode_request(b"\xff\xfe\n", 4096).unwrap_err().to_string();
        assert!(!e.is_empty());
    }

    /// Clients that hold their place: each asks for the stats, which the
    /// held data plane does not answer until it is let go; returns once it
    /// took them all.
    fn working(served: &Served, n: usize) -> Vec<std::thread::JoinHandle<Reply>> {
        served.held.store(true, Ordering::Release);
        let before = served.taken.load(Ordering::Acquire);
        let stats = ClientRequest {
            stats: true,
            ..Default::default()
        };
        let threads = (0..n)
            .map(|_| {
                let (path, stats) = (served.path(), stats.clone());
                std::thread::spawn(move || {
                    call_within(&path, &stats, Duration::from_secs(5)).unwrap()
                })
            })
            .collect();
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        while served.taken.load(Ordering::Acquire) < before + n {
            assert!(std::time::Instant::now() < give_up, "not all taken");
            std::thread::sleep(Duration::from_millis(5));
        }
        threads
    }

    #[test]
    fn clients_beyond_the_cap_are_told_to_retry() {
        let served = Served::new(
            "cap",
            Limits {
                max_clients: 2,
                ..short()
            },
        );
        let busy_ones = working(&served, 2);
        // Both places are taken by requests being answered (bounded: the
        // held plane lets go after 10 s).
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        let busy = loop {
            let r = served.raw(b"{\"stats\": true}\n");
            if r.status != 0 || std::time::Instant::now() > give_up {
                break r;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(busy.status, EX_UNAVAILABLE, "{busy:?}");
        assert_eq!(busy.kind, Some(ErrorKind::Busy));
        assert!(busy.stderr.contains("busy: 2 clients"), "{}", busy.stderr);
        served.held.store(false, Ordering::Release);
        for t in busy_ones {
            assert_eq!(t.join().unwrap().status, 0);
        }
        assert_eq!(served.stats().status, 0);
    }

    #[test]
    fn idle_and_stalled_clients_give_their_place_to_a_new_one() {
        let served = Served::new(
            "evict",
            Limits {
                max_clients: 2,
                read_timeout: Duration::from_secs(10),
                ..short()
            },
        );
        let idle = UnixStream::connect(served.path()).unwrap();
        let mut partial = UnixStream::connect(served.path()).unwrap();
        partial.write_all(b"{\"stats\"").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Served at once, not after their 10 s; the oldest gave way.
        let started = std::time::Instant::now();
        let r = call_within(
            &served.path(),
            &ClientRequest {
                stats: true,
                ..Default::default()
            },
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(r.status, 0, "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        let cut = std::io::Read::read_to_end(&mut &idle, &mut rest);
        assert!(cut.is_ok(), "{cut:?}");
        // A client whose request is being answered keeps its place: the
        // next one is told to retry rather than take it.
        drop(partial);
        let holders = working(&served, 2);
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        let busy = loop {
            let r = served.raw(b"{\"stats\": true}\n");
            if r.status != 0 || std::time::Instant::now() > give_up {
                break r;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(busy.kind, Some(ErrorKind::Busy), "{busy:?}");
        served.held.store(false, Ordering::Release);
        for t in holders {
            assert_eq!(t.join().unwrap().status, 0);
        }
    }

    #[test]
    fn a_client_asks_a_busy_daemon_again_until_a_place_is_free() {
        let served = Served::new(
            "retry",
            Limits {
                max_clients: 1,
                ..short()
            },
        );
        let stats = ClientRequest {
            stats: true,
            ..Default::default()
        };
        // One request being answered holds the only place.
        let holder = working(&served, 1);
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let r = call_within(&served.path(), &stats, Duration::ZERO).unwrap();
            if r.kind == Some(ErrorKind::Busy) {
                break;
            }
            assert!(std::time::Instant::now() < give_up, "never busy: {r:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Without time to wait, the answer is `busy`...
        let r = call_within(&served.path(), &stats, Duration::ZERO).unwrap();
        assert_eq!(r.kind, Some(ErrorKind::Busy), "{r:?}");
        // ...with time, the client asks again and is served once the
        // first is answered.
        let held = served.held.clone();
        let leave = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            held.store(false, Ordering::Release);
        });
        let r = call_within(&served.path(), &stats, Duration::from_secs(5)).unwrap();
        leave.join().unwrap();
        assert_eq!(r.status, 0, "{r:?}");
        for t in holder {
            assert_eq!(t.join().unwrap().status, 0);
        }
    }

    /// A daemon that answers `busy` and closes before reading: the client's
    /// write fails (a request larger than the socket's buffers is still
    /// being sent), and the answer is read all the same.
    #[test]
    fn a_busy_answer_is_read_though_the_request_could_not_be_sent() {
        let dir = std::env::temp_dir().join(format!("dummynet-busy-epipe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let busy = Reply::err(ErrorKind::Busy, EX_UNAVAILABLE, "dummynet: busy\n");
            let mut text = serde_json::to_string(&busy).unwrap();
            text.push('\n');
            conn.write_all(text.as_bytes()).unwrap();
            // Closed unread: the client's write then fails.
        });
        let req = ClientRequest {
            argv: vec!["x".repeat(8 << 20)],
            ..Default::default()
        };
        let r = call_once(&path, &req);
        server.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(r.unwrap().kind, Some(ErrorKind::Busy));
    }

    fn words(line: &str) -> ClientRequest {
        ClientRequest {
            argv: line.split(' ').map(String::from).collect(),
            ..Default::default()
        }
    }

    /// A command that times out waiting for a data plane that is not
    /// serving is answered "withdrawn", and it stays so: when the data plane
    /// serves its inbox later, the command is skipped, not applied.
    #[test]
    fn a_command_the_client_stopped_waiting_for_never_takes_effect() {
        let (req_tx, req_rx) = std::sync::mpsc::channel();
        let (wake_rx, wake_tx) = UnixStream::pair().unwrap();
        wake_rx.set_nonblocking(true).unwrap();
        wake_tx.set_nonblocking(true).unwrap();
        let link = PlaneLink {
            requests: req_tx,
            wake: Arc::new(wake_tx),
        };
        let limits = Limits {
            answer_timeout: Duration::from_millis(50),
            ..Default::default()
        };
        let inbox = Inbox {
            requests: req_rx,
            wake: wake_rx,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let mut plane = DataPlane::new(Engine::new(1), Vec::new(), Some(inbox), stop);
        // Nobody calls serve_control while the client waits.
        let reply = handle(
            words("pipe 1 config bw 1Mbit/s"),
            &Caller::Trusted,
            &link,
            &limits,
        );
        assert_eq!(reply.status, EX_UNAVAILABLE, "{reply:?}");
        assert!(reply.stderr.contains("within 50 ms"), "{}", reply.stderr);
        assert!(
            reply.stderr.contains("will not take effect"),
            "{}",
            reply.stderr
        );
        // Now the data plane gets to its inbox: the request is there...
        plane.serve_inbox_now();
        // ...and is skipped.
        assert!(
            plane.engine().snapshot().links.is_empty(),
            "applied after all"
        );

        // A request the data plane serves in time is applied and answered.
        let served = std::thread::scope(|s| {
            let asked = s.spawn(|| {
                let limits = Limits {
                    answer_timeout: Duration::from_secs(10),
                    ..Default::default()
                };
                handle(
                    words("pipe 2 config bw 1Mbit/s"),
                    &Caller::Trusted,
                    &link,
                    &limits,
                )
            });
            let give_up = Instant::now() + Duration::from_secs(10);
            while !asked.is_finished() && Instant::now() < give_up {
                plane.serve_inbox_now();
                std::thread::sleep(Duration::from_millis(1));
            }
            asked.join().unwrap()
        });
        assert_eq!(served.status, 0, "{served:?}");
        assert_eq!(plane.engine().snapshot().links.len(), 1);
    }

    /// Parsing happens before the data plane is asked: a bad command
    /// reaches no inbox at all.
    #[test]
    fn a_bad_command_is_refused_without_the_data_plane() {
        let (req_tx, req_rx) = std::sync::mpsc::channel();
        let (_wake_rx, wake_tx) = UnixStream::pair().unwrap();
        let link = PlaneLink {
            requests: req_tx,
            wake: Arc::new(wake_tx),
        };
        let bad = format!("sysctl {}=1", "x".repeat(1 << 16));
        let reply = handle(words(&bad), &Caller::Trusted, &link, &Limits::default());
        assert_eq!(
            reply.status,
            64,
            "{}",
            &reply.stderr[..200.min(reply.stderr.len())]
        );
        assert!(req_rx.try_recv().is_err(), "the data plane was asked");
    }
}
