//! A request's JSON body, whatever a client labelled it: `curl -d` sends
//! `application/x-www-form-urlencoded`, a bare client sends no
//! `Content-Type` or `text/plain`, and each is read as JSON when it parses
//! as JSON. Any other media type is refused with 415, naming the accepted
//! ones.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use serde_json::Value;

use super::ApiError;

/// The media types read as JSON (`application/*+json` too).
pub(super) const ACCEPTED: &[&str] = &[
    "application/json",
    "text/plain",
    "application/x-www-form-urlencoded",
];

/// A body that parsed as JSON.
pub(super) struct JsonBody(pub Value);

/// Whether a `Content-Type` value (parameters and case aside) is one the
/// API reads as JSON; `None` (no header) is.
fn accepted(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else {
        return true;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence.is_empty()
        || ACCEPTED.contains(&essence.as_str())
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let ct = req
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("(not text)").to_string());
        if !accepted(ct.as_deref()) {
            return Err(ApiError::new(
                "unsupported_media_type",
                format!(
                    "a body of type `{}` cannot be read: send JSON as {} (or with no Content-Type)",
                    ct.unwrap_or_default(),
                    ACCEPTED.join(", ")
                ),
            )
            .with("accepted", ACCEPTED));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            let too_large = r.status() == StatusCode::PAYLOAD_TOO_LARGE;
            let text = r.into_response().status().to_string();
            if too_large {
                ApiError::new("too_large", format!("the body is too large ({text})"))
            } else {
                ApiError::new("syntax", format!("the body could not be read ({text})"))
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::new("syntax", format!("the body is not the JSON expected: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_under_any_label_a_bare_client_sends() {
        for ct in [
            None,
            Some("application/json"),
            Some("application/json; charset=utf-8"),
            Some("Text/Plain"),
            Some("application/x-www-form-urlencoded"),
            Some("application/merge-patch+json"),
        ] {
            assert!(accepted(ct), "{ct:?}");
        }
        for ct in ["application/xml", "multipart/form-data", "image/png"] {
            assert!(!accepted(Some(ct)), "{ct}");
        }
    }
}
