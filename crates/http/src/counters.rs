//! `GET /v1/stats`, `POST /v1/reset`, `GET /metrics`: the data plane's
//! counters, as JSON and as Prometheus text.

use axum::extract::State;
use axum::response::IntoResponse;

use super::{applied_json, blocking, ApiError, ApiResult, App};
use axum::http::header;
use dummynet_dataplane::dataplane::{Answer, RequestKind};

pub(super) async fn stats(State(app): State<App>) -> ApiResult {
    let report = blocking(move || match app.ask(RequestKind::Stats)? {
        Answer::Stats(r) => Ok(r),
        _ => Err(ApiError::new(
            "internal",
            "unexpected answer from the data plane",
        )),
    })
    .await??;
    let text = dummynet_daemon::stats_json::StatsJson::of(&report).to_line();
    Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response())
}

pub(super) async fn reset(State(app): State<App>) -> ApiResult {
    let done = blocking(move || app.apply(&["zero".into()])).await??;
    Ok(applied_json(vec![done]))
}

pub(super) async fn metrics(State(app): State<App>) -> ApiResult {
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
        crate::metrics::render(&report, &snap)
            .map_err(|e| ApiError::new("internal", format!("writing the metrics: {e}")))
    })
    .await??;
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}
