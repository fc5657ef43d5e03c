//! The HTTP API (`dummynet run|shell --http ADDR:PORT`): the daemon driven
//! and watched from code, over JSON.
//!
//! It is one more way to the data plane beside the control socket, and
//! goes the same way: a [`PlaneLink`], with commands parsed here, by
//! `dummynet_lang`, off the data plane. Every change a request asks for is
//! written as command text first (`PUT /v1/pipes/1 {"bw": "10Mbit/s"}` is
//! `pipe 1 config bw 10Mbit/s`), so the API and the command language can
//! never disagree.
//!
//! The server runs on a thread of its own, on a current-thread tokio
//! runtime (axum's routing on hyper). Whatever waits for the data plane or
//! parses runs on tokio's blocking pool, bounded like the connections. Its
//! costs are bounded: connections at once, and per peer, in slots that idle
//! and slow clients cannot exhaust ([`slots`]); one request per connection;
//! the time to send the head, the body, to read the answer, and to finish
//! the whole exchange; and the body's size.
//!
//! Off loopback a bearer token is required (`--http-token FILE`), compared
//! in constant time. There is no TLS: a TLS proxy goes in front.
//!
//! The reference is `openapi.json` beside this file, served at
//! `GET /v1/openapi.json`; a live test checks real answers against it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dummynet_io::netns::{Netns, NetnsError};
use dummynet_lang::Statement;
use serde_json::{json, Value};

use dummynet_dataplane::dataplane::{Answer, RequestKind};
use dummynet_dataplane::observer::Observer;

use dummynet_daemon::protocol::PlaneLink;

mod body;
mod commands;
mod counters;
mod dashboard;
mod errors;
mod events;
mod kind;
pub mod metrics;
mod objects;
mod rules;
mod shape;
mod slots;

use commands::commands;
use counters::{metrics, reset, stats};
pub use errors::ApiError;
use errors::{kind_name, not_found};
use events::events;
use kind::ObjKind;
use objects::{delete_object, get_object, list_objects, put_object};
use rules::{
    add_rule, add_rule_at, delete_rule, flush_rules, get_rule, list_rules, patch_rule,
    replace_rule, replace_rules,
};

/// What a handler answers.
type ApiResult = Result<Response, ApiError>;

/// The OpenAPI 3.1 document of this API, served as is.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Bounds on what HTTP clients may cost the daemon.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Connections held at once. When all are taken a new one takes the
    /// place of the oldest that has not sent its whole request (or whose
    /// answer waits on it); only if none has does it wait.
    pub max_connections: usize,
    /// Connections one peer (IP address) may hold at once.
    pub per_peer: usize,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// How long a client may take to send its request's head.
    pub header_timeout: Duration,
    /// How long it may take to send the body after the head.
    pub body_timeout: Duration,
    /// How long a write of the answer may wait on a client that does not
    /// read before the connection is reset.
    pub write_timeout: Duration,
    /// How long a write must have waited before its slot may be given to
    /// a new connection.
    pub stall: Duration,
    /// How long one connection may last, request and answer included.
    pub connection_timeout: Duration,
    /// How long a request waits for the data plane (see [`PlaneLink::ask`]).
    pub answer_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 32,
            // A dashboard's page, its stream and a few requests at once.
            per_peer: 8,
            // A batch of commands is a few KiB; a megabyte is generous.
            max_body: 1 << 20,
            // A head is a few hundred bytes, sent at once.
            header_timeout: Duration::from_secs(2),
            body_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(5),
            stall: Duration::from_millis(250),
            // Two answer timeouts (a request the data plane took is waited
            // for twice) and room to send the answer.
            connection_timeout: Duration::from_secs(30),
            answer_timeout: Duration::from_secs(10),
        }
    }
}

/// A bearer token, as read from `--http-token FILE`.
#[derive(Clone)]
pub struct Token(Arc<Vec<u8>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// The fewest bytes a token may have: guessing it must be hopeless.
pub const MIN_TOKEN: usize = 16;

/// Why `--http` or `--http-token` was refused, or the server could not
/// start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The token file could not be read.
    #[error("--http-token {}: {source}", path.display())]
    TokenFile {
        path: PathBuf,
        source: dummynet_lang::ReadError,
    },
    /// The token (the file's first line) has `len` bytes, fewer than
    /// [`MIN_TOKEN`].
    #[error(
        "--http-token {}: the token (the file's first line) has {len} bytes; \
         at least {MIN_TOKEN} are needed (e.g. `head -c 32 /dev/urandom | base64 > FILE`)",
        path.display()
    )]
    TokenTooShort { path: PathBuf, len: usize },
    /// The token has a byte that cannot go in a header as it is.
    #[error(
        "--http-token {}: the token must be printable ASCII without spaces \
         (it is sent in an Authorization header)",
        path.display()
    )]
    TokenNotPrintable { path: PathBuf },
    /// Off loopback without a token.
    #[error(
        "--http {addr}: not a loopback address, so anyone who can reach it could \
         drive the emulator: give --http-token FILE (clients then send \
         `Authorization: Bearer TOKEN`), or listen on 127.0.0.1 or [::1]"
    )]
    NoToken { addr: SocketAddr },
    #[error("--http {addr}: cannot listen: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The bound socket could not be set up (non-blocking).
    #[error("--http {addr}: {source}")]
    Socket {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The listener's address could not be read.
    #[error("--http: {source}")]
    LocalAddr { source: std::io::Error },
    /// The server's runtime could not be built.
    #[error("--http: starting the server: {source}")]
    Runtime { source: std::io::Error },
    /// The server's thread could not be started (in its namespace).
    #[error("--http: {source}")]
    Thread { source: NetnsError },
    /// The server's thread could not be started.
    #[error("--http: {source}")]
    Spawn { source: std::io::Error },
}

impl Token {
    /// The token in `path`: its first line, without surrounding blanks.
    pub fn read(path: &Path) -> Result<Token, HttpError> {
        let text =
            dummynet_lang::read_limited(path, 4096).map_err(|source| HttpError::TokenFile {
                path: path.to_path_buf(),
                source,
            })?;
        let token = text.lines().next().unwrap_or("").trim();
        if token.len() < MIN_TOKEN {
            return Err(HttpError::TokenTooShort {
                path: path.to_path_buf(),
                len: token.len(),
            });
        }
        if token.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(HttpError::TokenNotPrintable {
                path: path.to_path_buf(),
            });
        }
        Ok(Token(Arc::new(token.as_bytes().to_vec())))
    }

    /// Whether `given` is the token, in time that does not depend on where
    /// they first differ.
    fn matches(&self, given: &[u8]) -> bool {
        let want = self.0.as_slice();
        let diff = want
            .iter()
            .zip(given)
            .fold(u8::from(want.len() != given.len()), |acc, (a, b)| {
                acc | (a ^ b)
            });
        std::hint::black_box(diff) == 0
    }
}

/// What `--http` and `--http-token` asked for, checked and bound.
#[derive(Debug)]
pub struct HttpOptions {
    pub listener: std::net::TcpListener,
    pub token: Option<Token>,
    pub limits: HttpLimits,
    /// What pipes are for, by number, said with them (`role` in the
    /// pipes' answers, and on the dashboard): a shell's pipe 1 is `up:
    /// from the command`.
    pub roles: Vec<(u32, String)>,
}

/// Checks `--http ADDR:PORT` and `--http-token FILE` and binds the address
/// (in the caller's network namespace). Off loopback, a token is required.
pub fn bind(addr: SocketAddr, token: Option<&Path>) -> Result<HttpOptions, HttpError> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(HttpError::NoToken { addr });
    }
    let token = token.map(Token::read).transpose()?;
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| HttpError::Listen { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| HttpError::Socket { addr, source })?;
    Ok(HttpOptions {
        listener,
        token,
        limits: HttpLimits::default(),
        roles: Vec::new(),
    })
}

/// The running server; it stops when this drops.
pub struct HttpServer {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Stops when dropped, as a front-end of a running daemon must.
impl dummynet_daemon::running::FrontEnd for HttpServer {}

impl HttpServer {
    /// Serves `options.listener` on a thread of its own (in `ns` if given,
    /// where the data plane runs, so that commands see its addresses and
    /// routes; the listener stays in the namespace it was bound in).
    pub fn start(
        options: HttpOptions,
        link: PlaneLink,
        observer: Option<Observer>,
        ns: Option<&Netns>,
    ) -> Result<HttpServer, HttpError> {
        let addr = options
            .listener
            .local_addr()
            .map_err(|source| HttpError::LocalAddr { source })?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(options.limits.max_connections)
            .thread_name("dummynet-http-work")
            .build()
            .map_err(|source| HttpError::Runtime { source })?;
        let body = move || runtime.block_on(serve(options, link, observer, rx));
        let thread = match ns {
            Some(ns) => ns
                .spawn_thread("dummynet-http", body)
                .map_err(|source| HttpError::Thread { source })?,
            None => std::thread::Builder::new()
                .name("dummynet-http".into())
                .spawn(body)
                .map_err(|source| HttpError::Spawn { source })?,
        };
        Ok(HttpServer {
            addr,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// Where it listens (the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Clone)]
struct App {
    link: PlaneLink,
    token: Option<Token>,
    answer_timeout: Duration,
    /// The event tap behind `GET /v1/events`, and how many streams are
    /// open on it (each holds a connection slot).
    observer: Option<Observer>,
    streams: Arc<tokio::sync::Semaphore>,
    /// The longest a stream lasts before it ends itself, within the
    /// connection's time; a client (the dashboard, EventSource) reconnects.
    stream_length: Duration,
    /// [`HttpOptions::roles`].
    roles: Arc<Vec<(u32, String)>>,
}

/// The routes, with the token check and the body limit. Public for tests
/// that drive it without a socket.
fn router(app: App, max_body: usize) -> Router {
    let objects = |kind: ObjKind| {
        get(move |s, n| get_object(s, kind, n))
            .put(move |s, n, b| put_object(s, kind, n, b, false))
            .patch(move |s, n, b| put_object(s, kind, n, b, true))
            .delete(move |s, n| delete_object(s, kind, n))
    };
    Router::new()
        .route("/", get(dashboard::index))
        .route("/dashboard.js", get(dashboard::script))
        .route("/dashboard.css", get(dashboard::style))
        .route("/v1/events", get(events))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/pipes", get(|s| list_objects(s, ObjKind::Pipe)))
        .route("/v1/queues", get(|s| list_objects(s, ObjKind::Queue)))
        .route("/v1/scheds", get(|s| list_objects(s, ObjKind::Sched)))
        .route("/v1/pipes/{n}", objects(ObjKind::Pipe))
        .route("/v1/queues/{n}", objects(ObjKind::Queue))
        .route("/v1/scheds/{n}", objects(ObjKind::Sched))
        .route(
            "/v1/rules",
            get(list_rules)
                .post(add_rule)
                .put(replace_rules)
                .delete(flush_rules),
        )
        .route(
            "/v1/rules/{n}",
            get(get_rule)
                .post(add_rule_at)
                .put(replace_rule)
                .patch(patch_rule)
                .delete(delete_rule),
        )
        .route("/v1/commands", post(commands))
        .route("/v1/stats", get(stats))
        .route("/v1/reset", post(reset))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(app.clone(), authorize))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(app)
}

async fn serve(
    options: HttpOptions,
    link: PlaneLink,
    observer: Option<Observer>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let limits = options.limits.clone();
    let app = App {
        link,
        roles: Arc::new(options.roles),
        token: options.token,
        answer_timeout: limits.answer_timeout,
        observer,
        // A quarter of the connections at most, so streams never take
        // every slot from the requests that change things.
        streams: Arc::new(tokio::sync::Semaphore::new(
            (limits.max_connections / 4).max(1),
        )),
        stream_length: limits
            .connection_timeout
            .saturating_sub(Duration::from_secs(2))
            .max(Duration::from_secs(1)),
    };
    let Ok(listener) = tokio::net::TcpListener::from_std(options.listener) else {
        tracing::info!(
            target: "dummynet",
            "dummynet: --http: the listener could not join the runtime"
        );
        return;
    };
    let routes = router(app, limits.max_body);
    let table = slots::Table::new(&limits);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: let it pass.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let slot = loop {
            match table.admit(peer.ip(), Some(&stream)) {
                slots::Admit::In(slot) => break Some(slot),
                slots::Admit::Refused => break None,
                // Every slot is doing real work: wait for one (the next
                // connections wait in the kernel's backlog meanwhile).
                slots::Admit::Full => tokio::select! {
                    _ = &mut shutdown => return,
                    _ = table.freed.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                },
            }
        };
        let Some(slot) = slot else {
            slots::reset_on_close(&stream);
            continue;
        };
        tokio::spawn(serve_connection(
            stream,
            slot,
            routes.clone(),
            limits.clone(),
        ));
    }
}

/// One connection, from its slot to its close: cut short (and reset) when
/// it is evicted, when a write has waited on the client for the write
/// timeout, or at the connection timeout.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    slot: slots::Slot,
    routes: Router,
    limits: HttpLimits,
) {
    let conn = slot.conn.clone();
    let io = hyper_util::rt::TokioIo::new(slots::Watched {
        inner: stream,
        conn: conn.clone(),
    });
    let service = {
        let conn = conn.clone();
        let limits = limits.clone();
        hyper::service::service_fn(move |req| {
            read_then_route(req, conn.clone(), routes.clone(), limits.clone())
        })
    };
    let http = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(false)
        .serve_connection(io, service);
    let stalled = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if conn
                .stalled_for(std::time::Instant::now())
                .is_some_and(|d| d >= limits.write_timeout)
            {
                return;
            }
        }
    };
    let cut = tokio::select! {
        _ = http => false,
        _ = conn.evict.notified() => true,
        _ = stalled => true,
        _ = tokio::time::sleep(limits.connection_timeout) => true,
    };
    if cut {
        conn.reset_on_close();
    }
    drop(slot);
}

/// Reads the whole request body (within the body timeout and size limit)
/// before the request counts as read and goes to the routes: until then
/// its connection may be evicted.
async fn read_then_route(
    req: axum::http::Request<hyper::body::Incoming>,
    conn: Arc<slots::Conn>,
    routes: Router,
    limits: HttpLimits,
) -> Result<Response, std::convert::Infallible> {
    let (parts, body) = req.into_parts();
    let body = axum::body::Body::new(body);
    let bytes = match tokio::time::timeout(
        limits.body_timeout,
        axum::body::to_bytes(body, limits.max_body),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Ok(ApiError::new(
                "too_large",
                format!(
                    "the request body is larger than {} bytes (or was cut off)",
                    limits.max_body
                ),
            )
            .into_response())
        }
        Err(_) => {
            return Ok(ApiError::new(
                "timeout",
                format!(
                    "the request body did not arrive within {:?}",
                    limits.body_timeout
                ),
            )
            .into_response())
        }
    };
    conn.request_read();
    let req = axum::http::Request::from_parts(parts, axum::body::Body::from(bytes));
    let service = hyper_util::service::TowerToHyperService::new(routes);
    hyper::service::Service::call(&service, req).await
}

/// Refuses a request without the token, when there is one.
async fn authorize(
    State(app): State<App>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(token) = &app.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| token.matches(g)) {
            return ApiError::new(
                "unauthorized",
                "this API needs `Authorization: Bearer TOKEN` with the token of --http-token",
            )
            .into_response();
        }
    } else if let Err(e) = local_caller(req.headers()) {
        return e.into_response();
    }
    next.run(req).await
}

/// Without a token the API trusts whoever reaches its loopback port, and a
/// web page open in a browser on this machine can reach it too. Two checks
/// keep such a page out (the browser sets both headers; scripts cannot
/// forge them): the `Host` must name the machine by an address or as
/// `localhost`, which a DNS name rebound to 127.0.0.1 does not; and a
/// request sent by a page (`Origin`) must come from the daemon's own
/// origin, as the dashboard's do. Clients that send no `Origin` (curl,
/// Python) pass.
fn local_caller(headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let denied = |why: String| ApiError::new("denied", why);
    let host = match headers.get(header::HOST).map(|h| h.to_str()) {
        None => return Ok(()),
        Some(Ok(h)) => h,
        Some(Err(_)) => return Err(denied("the Host header is not text".into())),
    };
    if !local_host(host) {
        return Err(denied(format!(
            "Host `{host}` is a name, not this machine's address: without --http-token the API \
             answers only requests to an address or `localhost` (a DNS name pointed at \
             loopback could let a web page in)"
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| o.eq_ignore_ascii_case(host));
        if !same {
            return Err(denied(format!(
                "a request from the page at {} to this API: without --http-token only the \
                 daemon's own pages (http://{host}) may call it",
                String::from_utf8_lossy(origin.as_bytes())
            )));
        }
    }
    Ok(())
}

/// `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080`, or any address
/// literal, with or without a port.
fn local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, _)) => return v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

// --------------------------------------------------------- the data plane

/// Runs blocking work (the data plane's answer, a parse) off the runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| ApiError::new("internal", "the request's worker failed"))
}

/// A command the data plane applied, and what it warned about.
pub(crate) struct Applied {
    command: String,
    warnings: Vec<String>,
}

impl App {
    fn ask(&self, kind: RequestKind) -> Result<Answer, ApiError> {
        self.link
            .ask(kind, self.answer_timeout)
            .map_err(|r| ApiError::reply(&r))
    }

    fn snapshot(&self) -> Result<(dummynet_engine::Snapshot, dummynet_engine::Nanos), ApiError> {
        match self.ask(RequestKind::Snapshot)? {
            Answer::Snapshot { snap, now } => Ok((*snap, now)),
            _ => Err(ApiError::new(
                "internal",
                "unexpected answer from the data plane",
            )),
        }
    }

    /// Parses `words` as one command and has the data plane apply it.
    /// Files are refused unread: an HTTP client has no rights on the
    /// daemon's file system.
    fn apply(&self, words: &[String]) -> Result<Applied, ApiError> {
        let command = words.join(" ");
        let parsed = dummynet_lang::parse_args_untrusted(words, None)
            .map_err(|e| ApiError::parse(&e, &command))?;
        let Statement::Apply(cmd) = parsed.statement else {
            return Err(
                ApiError::new("invalid", "not a change: use the GET endpoints to look")
                    .with("command", command),
            );
        };
        let kind = RequestKind::Apply {
            command: Box::new(cmd),
            host: dummynet_daemon::protocol::host_view(),
        };
        match self.ask(kind)? {
            Answer::Applied(Ok(notes)) => Ok(Applied {
                command,
                warnings: parsed
                    .notes
                    .into_iter()
                    .chain(notes.iter().map(ToString::to_string))
                    .collect(),
            }),
            Answer::Applied(Err(e)) => Err(ApiError::new(
                kind_name(Some(dummynet_daemon::protocol::config_kind(&e))),
                e.message(),
            )
            .with("command", command)),
            _ => Err(ApiError::new(
                "internal",
                "unexpected answer from the data plane",
            )),
        }
    }
}

pub(crate) fn applied_json(applied: Vec<Applied>) -> Response {
    let list: Vec<Value> = applied
        .into_iter()
        .map(|a| json!({ "command": a.command, "warnings": a.warnings }))
        .collect();
    Json(json!({ "applied": list })).into_response()
}

// ------------------------------------------------------------------- misc

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// Whether a request carried the token (for tests of [`Token::matches`]).
#[cfg(test)]
fn bearer(headers: &axum::http::HeaderMap) -> Option<&[u8]> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn token(s: &str) -> Token {
        Token(Arc::new(s.as_bytes().to_vec()))
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> axum::http::HeaderMap {
        let mut h = axum::http::HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k, v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn without_a_token_only_local_hosts_and_the_daemons_own_pages_pass() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:80",
            "10.1.2.3",
        ] {
            assert!(
                local_caller(&headers(&[(header::HOST, host)])).is_ok(),
                "{host}"
            );
        }
        // A DNS name rebound to loopback, and garbage.
        for host in ["evil.example:8080", "127.0.0.1.nip.io", "[::1", "[evil]:80"] {
            let e = local_caller(&headers(&[(header::HOST, host)])).unwrap_err();
            assert_eq!(
                (e.kind, e.status()),
                ("denied", StatusCode::FORBIDDEN),
                "{host}"
            );
        }
        // The dashboard's own requests carry its origin; another page's do not.
        let own = [
            (header::HOST, "127.0.0.1:8080"),
            (header::ORIGIN, "http://127.0.0.1:8080"),
        ];
        assert!(local_caller(&headers(&own)).is_ok());
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "null",
            "https://127.0.0.1:8080",
        ] {
            let h = headers(&[(header::HOST, "127.0.0.1:8080"), (header::ORIGIN, origin)]);
            assert!(local_caller(&h).is_err(), "{origin}");
        }
        // curl and the Python client send neither an Origin nor, over a
        // raw socket, always a Host.
        assert!(local_caller(&headers(&[])).is_ok());
    }

    #[test]
    fn the_token_matches_only_itself() {
        let t = token("0123456789abcdef");
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeF"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b"0123456789abcdef0"));
        assert!(!t.matches(b""));
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef".parse().unwrap(),
        );
        assert!(bearer(&h).is_some_and(|g| t.matches(g)));
    }

    #[test]
    fn off_loopback_a_token_is_required() {
        let e = bind("0.0.0.0:0".parse().unwrap(), None).unwrap_err();
        assert!(matches!(e, HttpError::NoToken { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("--http-token FILE"), "{e}");
        let ok = bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        assert!(ok.token.is_none());
        // A token too short to be safe is refused with the rule.
        let dir = std::env::temp_dir().join(format!("dummynet-http-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "short\n").unwrap();
        let e = bind("0.0.0.0:0".parse().unwrap(), Some(&file)).unwrap_err();
        assert!(
            matches!(e, HttpError::TokenTooShort { len: 5, .. }),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("at least 16"), "{e}");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        assert!(bind("0.0.0.0:0".parse().unwrap(), Some(&file)).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
