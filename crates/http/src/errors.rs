//! The API's errors: `{"error": {"kind", "message", ...}}`, the HTTP
//! status chosen by the kind (the same table is in openapi.json).

use axum::extract::rejection::JsonRejection;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use dummynet_lang::ParseError;

use dummynet_daemon::protocol::{ErrorKind, Reply};

/// An error answer: `{"error": {"kind": ..., "message": ..., ...}}`, with
/// the HTTP status its kind says.
#[derive(Debug)]
pub struct ApiError {
    pub(super) kind: &'static str,
    pub(super) message: String,
    pub(super) extra: Map<String, Value>,
}

impl ApiError {
    pub(super) fn new(kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
            extra: Map::new(),
        }
    }

    pub(super) fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// The status for each kind (the same list is in openapi.json).
    pub(super) fn status(&self) -> StatusCode {
        match self.kind {
            "syntax" | "invalid" | "unknown_field" => StatusCode::BAD_REQUEST,
            "unauthorized" => StatusCode::UNAUTHORIZED,
            "denied" => StatusCode::FORBIDDEN,
            "not_found" => StatusCode::NOT_FOUND,
            "method_not_allowed" => StatusCode::METHOD_NOT_ALLOWED,
            "conflict" => StatusCode::CONFLICT,
            "too_large" => StatusCode::PAYLOAD_TOO_LARGE,
            "unsupported_media_type" => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unavailable" => StatusCode::NOT_IMPLEMENTED,
            "busy" | "stopped" => StatusCode::SERVICE_UNAVAILABLE,
            "timeout" => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A command the parser refused: what, where (the token and column)
    /// and, for a misspelt keyword, what was probably meant.
    pub(super) fn parse(e: &ParseError, command: &str) -> ApiError {
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
    pub(super) fn reply(reply: &Reply) -> ApiError {
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
pub(super) fn kind_name(kind: Option<ErrorKind>) -> &'static str {
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

pub(super) async fn not_found() -> ApiError {
    ApiError::new(
        "not_found",
        "no such endpoint: see GET /v1/openapi.json for the API",
    )
}
