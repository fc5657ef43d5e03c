//! `--http` in a binary built without the cargo feature `http`: the names
//! `run` and `shell` use, and an error that says how to get the API.

use std::net::SocketAddr;
use std::path::Path;

use dummynet_daemon::protocol::PlaneLink;
use dummynet_dataplane::observer::Observer;
use dummynet_io::netns::Netns;

/// A bearer token (never read here).
pub struct Token;

/// What [`bind`] would give (it never does here).
pub struct HttpOptions {
    pub token: Option<Token>,
    pub roles: Vec<(u32, String)>,
}

/// Refuses `--http`: this binary has no HTTP API.
pub fn bind(addr: SocketAddr, _token: Option<&Path>) -> Result<HttpOptions, String> {
    Err(format!(
        "--http {addr}: this dummynet was built without the HTTP API \
         (build it with the cargo feature `http`, on by default)"
    ))
}

/// A server that cannot exist here.
pub enum HttpServer {}

impl dummynet_daemon::running::FrontEnd for HttpServer {}

impl HttpServer {
    /// Never reached: [`bind`] refuses first.
    pub fn start(
        _options: HttpOptions,
        _link: PlaneLink,
        _observer: Option<Observer>,
        _ns: Option<&Netns>,
    ) -> Result<HttpServer, String> {
        Err("--http: this dummynet was built without the HTTP API".into())
    }

    pub fn local_addr(&self) -> SocketAddr {
        match *self {}
    }
}
