//! `POST /v1/commands`: command lines applied all or nothing, as the
//! control socket's batches are.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::body::JsonBody;
use super::{blocking, ApiError, ApiResult, App};
use dummynet_daemon::protocol::{BatchCommand, Caller};

/// `{"commands": ["pipe 1 config bw 1Mbit/s", ...]}`, each a command line
/// as `dummynet ipfw` takes it.
pub(super) fn command_lines(body: &Value) -> Result<Vec<String>, ApiError> {
    string_list(body, "commands", "pipe 1 config bw 10Mbit/s")
}

/// A body that is `{FIELD: ["...", ...]}` and nothing else: its strings,
/// or an error naming what is wrong (`example` shows one entry).
pub(super) fn string_list(
    body: &Value,
    field: &str,
    example: &str,
) -> Result<Vec<String>, ApiError> {
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

pub(super) async fn commands(State(app): State<App>, JsonBody(body): JsonBody) -> ApiResult {
    let lines = command_lines(&body)?;
    blocking(move || apply_batch(&app, &lines)).await?
}

/// Applies `lines` all or nothing, as the control socket's batches are
/// ([`dummynet_daemon::protocol::parse_batch`], then one request the data plane
/// applies with `Engine::apply_all`): every line is parsed first, and an
/// engine refusal of any leaves the others unapplied too.
pub(super) fn apply_batch(app: &App, lines: &[String]) -> Result<Response, ApiError> {
    let commands: Vec<BatchCommand> = lines.iter().cloned().map(BatchCommand::Line).collect();
    let batch = dummynet_daemon::protocol::parse_batch(&commands, None, &Caller::NoFiles)
        .map_err(|r| ApiError::reply(&r))?;
    let reply = dummynet_daemon::protocol::apply_batch(batch, &app.link, app.answer_timeout);
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
