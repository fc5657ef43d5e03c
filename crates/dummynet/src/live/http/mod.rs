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
//! costs are bounded: connections served at once (more wait in the kernel's
//! backlog), one request per connection, the time to send the headers and
//! to finish the whole exchange, and the body's size.
//!
//! Off loopback a bearer token is required (`--http-token FILE`), compared
//! in constant time. There is no TLS: a TLS proxy goes in front.
//!
//! The reference is `openapi.json` beside this file, served at
//! `GET /v1/openapi.json`; a live test checks real answers against it.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dummynet_io::netns::Netns;
use dummynet_lang::{ParseError, Statement};
use serde_json::{json, Map, Value};

use super::dataplane::{Answer, RequestKind};
use super::observer::Observer;

mod dashboard;
mod events;
use super::protocol::{BatchCommand, Caller, ErrorKind, PlaneLink, Reply};
use events::events;

/// The OpenAPI 3.1 document of this API, served as is.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Bounds on what HTTP clients may cost the daemon.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// How long a client may take to send its request's headers.
    pub header_timeout: Duration,
    /// How long one connection may last, request and answer included.
    pub connection_timeout: Duration,
    /// How long a request waits for the data plane (see [`PlaneLink::ask`]).
    pub answer_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 32,
            // A batch of commands is a few KiB; a megabyte is generous.
            max_body: 1 << 20,
            header_timeout: Duration::from_secs(5),
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

impl Token {
    /// The token in `path`: its first line, without surrounding blanks.
    pub fn read(path: &Path) -> Result<Token, String> {
        let text = dummynet_lang::read_limited(path, 4096)
            .map_err(|e| format!("--http-token {}: {e}", path.display()))?;
        let token = text.lines().next().unwrap_or("").trim();
        if token.len() < MIN_TOKEN {
            return Err(format!(
                "--http-token {}: the token (the file's first line) has {} bytes; \
                 at least {MIN_TOKEN} are needed (e.g. `head -c 32 /dev/urandom | base64 > FILE`)",
                path.display(),
                token.len()
            ));
        }
        if token.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(format!(
                "--http-token {}: the token must be printable ASCII without spaces \
                 (it is sent in an Authorization header)",
                path.display()
            ));
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
}

/// Checks `--http ADDR:PORT` and `--http-token FILE` and binds the address
/// (in the caller's network namespace). Off loopback, a token is required.
pub fn bind(addr: SocketAddr, token: Option<&Path>) -> Result<HttpOptions, String> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "--http {addr}: not a loopback address, so anyone who can reach it could \
             drive the emulator: give --http-token FILE (clients then send \
             `Authorization: Bearer TOKEN`), or listen on 127.0.0.1 or [::1]"
        ));
    }
    let token = token.map(Token::read).transpose()?;
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("--http {addr}: cannot listen: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("--http {addr}: {e}"))?;
    Ok(HttpOptions {
        listener,
        token,
        limits: HttpLimits::default(),
    })
}

/// The running server; it stops when this drops.
pub struct HttpServer {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Serves `options.listener` on a thread of its own (in `ns` if given,
    /// where the data plane runs, so that commands see its addresses and
    /// routes; the listener stays in the namespace it was bound in).
    pub fn start(
        options: HttpOptions,
        link: PlaneLink,
        observer: Option<Observer>,
        ns: Option<&Netns>,
    ) -> Result<HttpServer, String> {
        let addr = options
            .listener
            .local_addr()
            .map_err(|e| format!("--http: {e}"))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(options.limits.max_connections)
            .thread_name("dummynet-http-work")
            .build()
            .map_err(|e| format!("--http: starting the server: {e}"))?;
        let body = move || runtime.block_on(serve(options, link, observer, rx));
        let thread = match ns {
            Some(ns) => ns
                .spawn_thread("dummynet-http", body)
                .map_err(|e| format!("--http: {e}"))?,
            None => std::thread::Builder::new()
                .name("dummynet-http".into())
                .spawn(body)
                .map_err(|e| format!("--http: {e}"))?,
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
        super::say_str("dummynet: --http: the listener could not join the runtime\n");
        return;
    };
    let routes = router(app, limits.max_body);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        let slot = tokio::select! {
            _ = &mut shutdown => return,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
        };
        let stream = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: let it pass.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(routes.clone());
        let limits = limits.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = tokio::time::timeout(limits.connection_timeout, conn).await;
        });
    }
}

// ------------------------------------------------------------------ errors

/// An error answer: `{"error": {"kind": ..., "message": ..., ...}}`, with
/// the HTTP status its kind says.
#[derive(Debug)]
pub struct ApiError {
    kind: &'static str,
    message: String,
    extra: Map<String, Value>,
}

impl ApiError {
    fn new(kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
            extra: Map::new(),
        }
    }

    fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// The status for each kind (the same list is in openapi.json).
    fn status(&self) -> StatusCode {
        match self.kind {
            "syntax" | "invalid" | "unknown_field" => StatusCode::BAD_REQUEST,
            "unauthorized" => StatusCode::UNAUTHORIZED,
            "denied" => StatusCode::FORBIDDEN,
            "not_found" => StatusCode::NOT_FOUND,
            "method_not_allowed" => StatusCode::METHOD_NOT_ALLOWED,
            "conflict" => StatusCode::CONFLICT,
            "too_large" => StatusCode::PAYLOAD_TOO_LARGE,
            "unavailable" => StatusCode::NOT_IMPLEMENTED,
            "busy" | "stopped" => StatusCode::SERVICE_UNAVAILABLE,
            "timeout" => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A command the parser refused: what, where (the token and column)
    /// and, for a misspelt keyword, what was probably meant.
    fn parse(e: &ParseError, command: &str) -> ApiError {
        let kind = match e.kind {
            dummynet_lang::ErrorKind::Syntax => "syntax",
            dummynet_lang::ErrorKind::Range | dummynet_lang::ErrorKind::File => "invalid",
            dummynet_lang::ErrorKind::Unavailable => "unavailable",
        };
        let mut err = ApiError::new(kind, e.message.clone())
            .with("command", command)
            .with("column", e.column);
        if let Some(token) = e.found() {
            err = err.with("token", token);
        }
        if let Some(s) = e.suggestion {
            err = err.with("suggestion", s);
        }
        err
    }

    /// A refusal as the control protocol words it: its kind, and where
    /// (the batch index, the command, the token and column).
    fn reply(reply: &Reply) -> ApiError {
        let message = reply.stderr.trim();
        let message = message
            .strip_prefix("ipfw: ")
            .or_else(|| message.strip_prefix("dummynet: "))
            .unwrap_or(message);
        let mut err = ApiError::new(kind_name(reply.kind), message);
        if let Some(at) = &reply.error {
            err = err.with("command", at.command.as_str());
            if let Some(i) = at.index {
                err = err.with("index", i);
            }
            if let Some(c) = at.column {
                err = err.with("column", c);
            }
            if let Some(t) = &at.found {
                err = err.with("token", t.as_str());
            }
        }
        err
    }
}

/// The API's name for a protocol error kind (`pending`, a request the
/// data plane took without answering in time, is a timeout here too).
fn kind_name(kind: Option<ErrorKind>) -> &'static str {
    match kind {
        Some(ErrorKind::Syntax) => "syntax",
        Some(ErrorKind::Invalid) => "invalid",
        Some(ErrorKind::NotFound) => "not_found",
        Some(ErrorKind::Conflict) => "conflict",
        Some(ErrorKind::Unavailable) => "unavailable",
        Some(ErrorKind::Busy) => "busy",
        Some(ErrorKind::Denied) => "unauthorized",
        Some(ErrorKind::Timeout | ErrorKind::Pending) => "timeout",
        Some(ErrorKind::Stopped) => "stopped",
        Some(ErrorKind::Internal) | None => "internal",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut error = Map::new();
        error.insert("kind".into(), self.kind.into());
        error.insert("message".into(), self.message.into());
        error.extend(self.extra);
        let mut resp = (status, Json(json!({ "error": error }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        match r {
            JsonRejection::BytesRejection(_) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new("too_large", r.body_text())
            }
            _ => ApiError::new(
                "syntax",
                format!("the body is not the JSON expected: {}", r.body_text()),
            ),
        }
    }
}

type ApiResult = Result<Response, ApiError>;

async fn not_found() -> ApiError {
    ApiError::new(
        "not_found",
        "no such endpoint: see GET /v1/openapi.json for the API",
    )
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
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| ApiError::new("internal", "the request's worker failed"))
}

/// A command the data plane applied, and what it warned about.
struct Applied {
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
            host: super::protocol::host_view(),
        };
        match self.ask(kind)? {
            Answer::Applied(Ok(notes)) => Ok(Applied {
                command,
                warnings: parsed.notes.into_iter().chain(notes).collect(),
            }),
            Answer::Applied(Err(e)) => Err(ApiError::new(
                kind_name(Some(super::protocol::config_kind(&e))),
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

fn applied_json(applied: Vec<Applied>) -> Response {
    let list: Vec<Value> = applied
        .into_iter()
        .map(|a| json!({ "command": a.command, "warnings": a.warnings }))
        .collect();
    Json(json!({ "applied": list })).into_response()
}

// ------------------------------------------------------ pipes, queues, scheds

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObjKind {
    Pipe,
    Queue,
    Sched,
}

impl ObjKind {
    fn word(self) -> &'static str {
        match self {
            ObjKind::Pipe => "pipe",
            ObjKind::Queue => "queue",
            ObjKind::Sched => "sched",
        }
    }

    /// The numbers of the objects of this kind the snapshot has.
    fn numbers(self, snap: &dummynet_engine::Snapshot) -> Vec<u32> {
        let max = dummynet_engine::config::MAX_NUMBER;
        let mut v: Vec<u32> = match self {
            ObjKind::Pipe => snap.links.iter().map(|l| l.number).collect(),
            ObjKind::Queue => snap.flowsets.iter().map(|f| f.number).collect(),
            ObjKind::Sched => snap.scheds.iter().map(|s| s.number).collect(),
        };
        // A pipe's own scheduler and queue live above MAX_NUMBER.
        v.retain(|&n| n >= 1 && n <= max);
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// An object number from the URL: 1 to 65535.
fn number(kind: &str, text: &str) -> Result<u32, ApiError> {
    text.parse::<u32>()
        .ok()
        .filter(|n| (1..=dummynet_engine::config::MAX_NUMBER).contains(n))
        .ok_or_else(|| {
            ApiError::new(
                "invalid",
                format!("`{text}` is not a {kind} number (1 to 65535)"),
            )
        })
}

/// The objects numbered `n` (all if empty) as the control protocol's
/// JSON views give them (`pipe show --json`).
fn objects_json(kind: ObjKind, snap: &dummynet_engine::Snapshot, n: &[u32]) -> Value {
    let view = match kind {
        ObjKind::Pipe => serde_json::to_value(super::views::pipes(snap, n)),
        ObjKind::Queue => serde_json::to_value(super::views::queues(snap, n)),
        ObjKind::Sched => serde_json::to_value(super::views::scheds(snap, n)),
    };
    view.unwrap_or(Value::Null)
}

async fn list_objects(State(app): State<App>, kind: ObjKind) -> ApiResult {
    let (snap, _) = blocking(move || app.snapshot()).await??;
    let numbers = kind.numbers(&snap);
    let mut view = objects_json(kind, &snap, &numbers);
    if numbers.is_empty() {
        // No numbers is "all" to the views; here it is none.
        view = json!({ format!("{}s", kind.word()): [] });
    }
    Ok(Json(view).into_response())
}

async fn get_object(
    State(app): State<App>,
    kind: ObjKind,
    UrlPath(n): UrlPath<String>,
) -> ApiResult {
    let n = number(kind.word(), &n)?;
    let (snap, _) = blocking(move || app.snapshot()).await??;
    if !kind.numbers(&snap).contains(&n) {
        return Err(no_such(kind.word(), n));
    }
    let view = objects_json(kind, &snap, &[n]);
    let one = view[format!("{}s", kind.word())][0].clone();
    Ok(Json(one).into_response())
}

fn no_such(word: &str, n: u32) -> ApiError {
    ApiError::new("not_found", format!("there is no {word} {n}"))
}

/// `PUT` (`config`: the options given, the rest at their defaults) or
/// `PATCH` (`modify`: only the options given change).
async fn put_object(
    State(app): State<App>,
    kind: ObjKind,
    UrlPath(n): UrlPath<String>,
    body: Result<Json<Value>, JsonRejection>,
    modify: bool,
) -> ApiResult {
    let n = number(kind.word(), &n)?;
    let Json(body) = body?;
    let verb = if modify { "modify" } else { "config" };
    let (words, keys) = option_words(&body, &[kind.word(), &n.to_string(), verb])?;
    if modify && keys.is_empty() {
        return Err(ApiError::new(
            "invalid",
            "PATCH with no option: nothing to change",
        ));
    }
    let done = blocking(move || {
        if modify {
            let (snap, _) = app.snapshot()?;
            if !kind.numbers(&snap).contains(&n) {
                return Err(no_such(kind.word(), n));
            }
        }
        app.apply(&words).map_err(|e| name_unknown_field(e, &keys))
    })
    .await??;
    Ok(applied_json(vec![done]))
}

async fn delete_object(
    State(app): State<App>,
    kind: ObjKind,
    UrlPath(n): UrlPath<String>,
) -> ApiResult {
    let n = number(kind.word(), &n)?;
    let done = blocking(move || {
        let (snap, _) = app.snapshot()?;
        if !kind.numbers(&snap).contains(&n) {
            return Err(no_such(kind.word(), n));
        }
        app.apply(&[kind.word().into(), n.to_string(), "delete".into()])
    })
    .await??;
    Ok(applied_json(vec![done]))
}

/// A command's words, and which of them are option names (index, name).
type OptionWords = (Vec<String>, Vec<(usize, String)>);

/// The command words for a body of options: `prefix`, then each option's
/// name and value. Names are the command language's; a value is a string
/// in its syntax (split at blanks: `"mask": "src-ip 0xffffff00"`), a
/// number (written as the language reads a bare number: `"plr": 0.01`) or
/// `true` for an option without a value (`"noerror": true`). `type` comes
/// first (a scheduler's parameters follow it), the others in name order.
/// Also returns which word of the result is each option's name, so that
/// an error at one names the field.
fn option_words(body: &Value, prefix: &[&str]) -> Result<OptionWords, ApiError> {
    let Some(map) = body.as_object() else {
        return Err(ApiError::new(
            "syntax",
            "the body must be a JSON object of options, e.g. {\"bw\": \"10Mbit/s\", \"delay\": \"20ms\"}",
        ));
    };
    let mut words: Vec<String> = prefix.iter().map(|w| w.to_string()).collect();
    let mut keys = Vec::new();
    let mut names: Vec<&String> = map.keys().collect();
    names.sort_by_key(|k| (k.as_str() != "type", k.as_str()));
    for name in names {
        let ok_name = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-+.".contains(c));
        if !ok_name {
            return Err(ApiError::new(
                "unknown_field",
                format!("unknown field `{name}`: options are the command language's keywords"),
            )
            .with("field", name.as_str()));
        }
        let bad = |what: &str| {
            ApiError::new(
                "invalid",
                format!("field `{name}`: {what}; give a string in the command language's syntax, a number, or true for an option without a value"),
            )
            .with("field", name.as_str())
        };
        keys.push((words.len(), name.clone()));
        words.push(name.clone());
        match &map[name] {
            Value::String(s) => {
                let before = words.len();
                words.extend(s.split_whitespace().map(String::from));
                if words.len() == before {
                    return Err(bad("an empty value"));
                }
            }
            Value::Number(x) => words.push(x.to_string()),
            Value::Bool(true) => {}
            Value::Bool(false) => return Err(bad("false (leave the option out instead)")),
            Value::Null => return Err(bad("null (leave the option out instead)")),
            Value::Array(_) | Value::Object(_) => return Err(bad("a list or an object")),
        }
    }
    Ok((words, keys))
}

/// A parse error at one of the body's option names is an unknown field,
/// named as such.
fn name_unknown_field(mut e: ApiError, keys: &[(usize, String)]) -> ApiError {
    if e.kind != "syntax" {
        return e;
    }
    let Some(token) = e.extra.get("token").and_then(Value::as_str) else {
        return e;
    };
    let Some(col) = e.extra.get("column").and_then(Value::as_u64) else {
        return e;
    };
    let Some(Value::String(command)) = e.extra.get("command") else {
        return e;
    };
    // The word the column falls on (the words are joined by single spaces).
    let mut start = 1u64;
    let mut at = None;
    for (i, w) in command.split(' ').enumerate() {
        let end = start + w.chars().count() as u64;
        if col >= start && col < end.max(start + 1) {
            at = Some(i);
            break;
        }
        start = end + 1;
    }
    if let Some((_, name)) = keys.iter().find(|(i, k)| Some(*i) == at && k == token) {
        let name = name.clone();
        e.message = format!("unknown field `{name}`: {}", e.message);
        e.kind = "unknown_field";
        e.extra.insert("field".into(), name.into());
    }
    e
}

// -------------------------------------------------------------------- rules

fn rule_number(text: &str) -> Result<u16, ApiError> {
    text.parse::<u16>().ok().filter(|n| *n >= 1).ok_or_else(|| {
        ApiError::new(
            "invalid",
            format!("`{text}` is not a rule number (1 to 65535)"),
        )
    })
}

/// `ipfw --json -d show [N]`'s view: the rules numbered `numbers` (all if
/// empty) and the dynamic rules they made.
fn rules_json(snap: &dummynet_engine::Snapshot, numbers: &[u16]) -> super::views::RulesJson {
    let mut view = super::views::rules(snap, numbers, true);
    if let Some(states) = &mut view.states {
        states.retain(|st| numbers.is_empty() || numbers.contains(&st.rule));
    }
    view
}

async fn list_rules(State(app): State<App>) -> ApiResult {
    let (snap, _) = blocking(move || app.snapshot()).await??;
    Ok(Json(rules_json(&snap, &[])).into_response())
}

async fn get_rule(State(app): State<App>, UrlPath(n): UrlPath<String>) -> ApiResult {
    let n = rule_number(&n)?;
    let (snap, _) = blocking(move || app.snapshot()).await??;
    let view = rules_json(&snap, &[n]);
    if view.rules.is_empty() {
        return Err(ApiError::new("not_found", format!("there is no rule {n}")));
    }
    Ok(Json(view).into_response())
}

/// `{"rule": "pipe 1 ip from any to any"}`: what follows `add N`.
fn rule_words(body: &Value, number: Option<u16>) -> Result<Vec<String>, ApiError> {
    let map = body.as_object().ok_or_else(|| {
        ApiError::new(
            "syntax",
            "the body must be a JSON object: {\"rule\": \"pipe 1 ip from any to any\"}",
        )
    })?;
    if let Some(extra) = map.keys().find(|k| k.as_str() != "rule") {
        return Err(ApiError::new(
            "unknown_field",
            format!("unknown field `{extra}`: a rule is given as {{\"rule\": \"ACTION BODY\"}}"),
        )
        .with("field", extra.as_str()));
    }
    let rule = map.get("rule").and_then(Value::as_str).ok_or_else(|| {
        ApiError::new(
            "invalid",
            "`rule` is required: a string such as \"pipe 1 ip from any to any\"",
        )
        .with("field", "rule")
    })?;
    let mut words = vec!["add".to_string()];
    words.extend(number.map(|n| n.to_string()));
    words.extend(rule.split_whitespace().map(String::from));
    Ok(words)
}

async fn add_rule(State(app): State<App>, body: Result<Json<Value>, JsonRejection>) -> ApiResult {
    let Json(body) = body?;
    let words = rule_words(&body, None)?;
    let done = blocking(move || app.apply(&words)).await??;
    Ok((StatusCode::CREATED, applied_json(vec![done])).into_response())
}

async fn add_rule_at(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let n = rule_number(&n)?;
    let Json(body) = body?;
    let words = rule_words(&body, Some(n))?;
    let done = blocking(move || app.apply(&words)).await??;
    Ok((StatusCode::CREATED, applied_json(vec![done])).into_response())
}

async fn delete_rule(State(app): State<App>, UrlPath(n): UrlPath<String>) -> ApiResult {
    let n = rule_number(&n)?;
    let done = blocking(move || {
        let (snap, _) = app.snapshot()?;
        if n == dummynet_engine::config::DEFAULT_RULE || !snap.rules.iter().any(|r| r.number == n) {
            return Err(ApiError::new(
                "not_found",
                format!("there is no rule {n} to delete"),
            ));
        }
        app.apply(&["delete".into(), n.to_string()])
    })
    .await??;
    Ok(applied_json(vec![done]))
}

/// `PUT /v1/rules/N {"rule": "..."}`: rule N becomes this one rule, in
/// one step (the rules numbered N deleted and the new one added, all or
/// nothing); made if there was none.
async fn replace_rule(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let n = rule_number(&n)?;
    let Json(body) = body?;
    let add = rule_words(&body, Some(n))?.join(" ");
    blocking(move || {
        let (snap, _) = app.snapshot()?;
        let mut lines = Vec::new();
        if snap.rules.iter().any(|r| r.number == n) {
            lines.push(format!("delete {n}"));
        }
        lines.push(add);
        apply_batch(&app, &lines)
    })
    .await?
}

/// `PUT /v1/rules {"rules": ["100 pipe 1 ip from any to any", ...]}`: the
/// whole ruleset (but the default rule) replaced by these, in one step:
/// `flush` and each `add`, all or nothing.
async fn replace_rules(
    State(app): State<App>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let rules = string_list(&body, "rules", "100 pipe 1 ip from any to any")?;
    let lines: Vec<String> = std::iter::once("-f flush".to_string())
        .chain(rules.iter().map(|rule| format!("add {rule}")))
        .collect();
    // An error's `index` names the rule in the body, not the batch's line
    // (the `flush` is line 0).
    blocking(move || apply_batch(&app, &lines))
        .await?
        .map_err(|mut e| {
            if let Some(i) = e.extra.get("index").and_then(Value::as_u64) {
                e.extra.insert("index".into(), json!(i.saturating_sub(1)));
            }
            e
        })
}

async fn flush_rules(State(app): State<App>) -> ApiResult {
    let done = blocking(move || app.apply(&["-f".into(), "flush".into()])).await??;
    Ok(applied_json(vec![done]))
}

// ----------------------------------------------------------------- commands

/// `{"commands": ["pipe 1 config bw 1Mbit/s", ...]}`, each a command line
/// as `dummynet ipfw` takes it.
fn command_lines(body: &Value) -> Result<Vec<String>, ApiError> {
    string_list(body, "commands", "pipe 1 config bw 10Mbit/s")
}

/// A body that is `{FIELD: ["...", ...]}` and nothing else: its strings,
/// or an error naming what is wrong (`example` shows one entry).
fn string_list(body: &Value, field: &str, example: &str) -> Result<Vec<String>, ApiError> {
    let map = body.as_object().ok_or_else(|| {
        ApiError::new(
            "syntax",
            format!("the body must be a JSON object: {{\"{field}\": [\"{example}\"]}}"),
        )
    })?;
    if let Some(extra) = map.keys().find(|k| k.as_str() != field) {
        return Err(
            ApiError::new("unknown_field", format!("unknown field `{extra}`"))
                .with("field", extra.as_str()),
        );
    }
    let list = map.get(field).and_then(Value::as_array).ok_or_else(|| {
        ApiError::new(
            "invalid",
            format!("`{field}` is required: a list such as [\"{example}\"]"),
        )
        .with("field", field)
    })?;
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            c.as_str().map(String::from).ok_or_else(|| {
                ApiError::new("invalid", format!("{field}[{i}] is not a string")).with("index", i)
            })
        })
        .collect()
}

async fn commands(State(app): State<App>, body: Result<Json<Value>, JsonRejection>) -> ApiResult {
    let Json(body) = body?;
    let lines = command_lines(&body)?;
    blocking(move || apply_batch(&app, &lines)).await?
}

/// Applies `lines` all or nothing, as the control socket's batches are
/// ([`super::protocol::parse_batch`], then one request the data plane
/// applies with `Engine::apply_all`): every line is parsed first, and an
/// engine refusal of any leaves the others unapplied too.
fn apply_batch(app: &App, lines: &[String]) -> Result<Response, ApiError> {
    let commands: Vec<BatchCommand> = lines.iter().cloned().map(BatchCommand::Line).collect();
    let batch = super::protocol::parse_batch(&commands, None, &Caller::NoFiles)
        .map_err(|r| ApiError::reply(&r))?;
    let reply = super::protocol::apply_batch(batch, &app.link, app.answer_timeout);
    if reply.status != 0 {
        return Err(ApiError::reply(&reply));
    }
    let applied: Vec<Value> = lines
        .iter()
        .map(|l| json!({ "command": l.split_whitespace().collect::<Vec<_>>().join(" "), "warnings": [] }))
        .collect();
    let warnings: Vec<&str> = reply
        .stderr
        .lines()
        .map(|l| l.trim_start_matches("ipfw: warning: "))
        .collect();
    Ok(Json(json!({ "applied": applied, "warnings": warnings })).into_response())
}

// --------------------------------------------------------- stats, metrics

async fn stats(State(app): State<App>) -> ApiResult {
    let report = blocking(move || match app.ask(RequestKind::Stats)? {
        Answer::Stats(r) => Ok(r),
        _ => Err(ApiError::new(
            "internal",
            "unexpected answer from the data plane",
        )),
    })
    .await??;
    let text = super::stats_json::StatsJson::of(&report).to_line();
    Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response())
}

async fn reset(State(app): State<App>) -> ApiResult {
    let done = blocking(move || app.apply(&["zero".into()])).await??;
    Ok(applied_json(vec![done]))
}

async fn metrics(State(app): State<App>) -> ApiResult {
    let text = blocking(move || {
        let report = match app.ask(RequestKind::Stats)? {
            Answer::Stats(r) => r,
            _ => {
                return Err(ApiError::new(
                    "internal",
                    "unexpected answer from the data plane",
                ))
            }
        };
        let (snap, _) = app.snapshot()?;
        super::metrics::render(&report, &snap)
            .map_err(|e| ApiError::new("internal", format!("writing the metrics: {e}")))
    })
    .await??;
    Ok(([(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)], text).into_response())
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
        assert!(e.contains("--http-token FILE"), "{e}");
        let ok = bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        assert!(ok.token.is_none());
        // A token too short to be safe is refused with the rule.
        let dir = std::env::temp_dir().join(format!("dummynet-http-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "short\n").unwrap();
        let e = bind("0.0.0.0:0".parse().unwrap(), Some(&file)).unwrap_err();
        assert!(e.contains("at least 16"), "{e}");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        assert!(bind("0.0.0.0:0".parse().unwrap(), Some(&file)).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_body_becomes_command_words() {
        let body = json!({"delay": "20ms", "bw": "10Mbit/s", "plr": 0.01, "noerror": true,
                          "mask": "src-ip 0xffffff00"});
        let (words, keys) = option_words(&body, &["pipe", "1", "config"]).unwrap();
        assert_eq!(
            words.join(" "),
            "pipe 1 config bw 10Mbit/s delay 20ms mask src-ip 0xffffff00 noerror plr 0.01"
        );
        assert_eq!(keys[0], (3, "bw".to_string()));
        // It parses as the same command the CLI would take.
        assert!(dummynet_lang::parse_args(&words).is_ok());
        // `type` first, so a scheduler's parameters follow it.
        let (words, _) = option_words(
            &json!({"quantum": 1514, "type": "fq_codel"}),
            &["sched", "1", "config"],
        )
        .unwrap();
        assert_eq!(words.join(" "), "sched 1 config type fq_codel quantum 1514");
        for bad in [
            json!({"bw": false}),
            json!({"bw": null}),
            json!({"bw": ["1"]}),
            json!({"bw": ""}),
            json!([1]),
        ] {
            assert!(
                option_words(&bad, &["pipe", "1", "config"]).is_err(),
                "{bad}"
            );
        }
        let e = option_words(&json!({"Bw; flush": 1}), &["pipe", "1", "config"]).unwrap_err();
        assert_eq!(e.kind, "unknown_field");
    }

    #[test]
    fn a_parse_error_at_an_option_name_names_the_field() {
        let body = json!({"bw": "1Mbit/s", "dleay": "20ms"});
        let (words, keys) = option_words(&body, &["pipe", "1", "config"]).unwrap();
        let e = dummynet_lang::parse_args(&words).unwrap_err();
        let e = name_unknown_field(ApiError::parse(&e, &words.join(" ")), &keys);
        assert_eq!(e.kind, "unknown_field");
        assert_eq!(e.extra["field"], "dleay");
        assert_eq!(e.extra["suggestion"], "delay");
        // An error in a value is not about a field name.
        let body = json!({"bw": "1Mbit/s", "delay": "20parsecs"});
        let (words, keys) = option_words(&body, &["pipe", "1", "config"]).unwrap();
        let e = dummynet_lang::parse_args(&words).unwrap_err();
        let e = name_unknown_field(ApiError::parse(&e, &words.join(" ")), &keys);
        assert_ne!(e.kind, "unknown_field");
    }
}
