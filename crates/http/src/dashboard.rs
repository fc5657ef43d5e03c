//! `GET /`: the dashboard, a page the daemon serves itself. Its three files
//! (`dashboard/`) are compiled into the binary, so the page needs no
//! network beyond the daemon: no CDN, no fonts, no library. It reads the
//! same API as any client (`/metrics`, `/v1/stats`, `/v1/pipes`,
//! `/v1/rules`, the event stream) and applies commands through
//! `POST /v1/commands`; `dashboard.js` says what each chart is made of.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");

/// The page may load only its own files and talk only to its own daemon.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
