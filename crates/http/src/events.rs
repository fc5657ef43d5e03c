//! `GET /v1/events`: the daemon's per-packet events as Server-Sent Events,
//! one `data:` line of JSON each, in the schema of the `--log` file
//! ([`dummynet_dataplane::events`]): first the `start` line (the wall clock of `t_ns`
//! 0), then `arrival`, `forward`, `departure` and `drop` events as they
//! happen.
//!
//! Filters, in the query: `pipe=N` (events that name pipe N), `rule=N`,
//! `sample=N` (every event of one packet in N, by id, so a sampled
//! packet's arrival and end both come). The events come from the
//! observer's tap ([`dummynet_dataplane::observer`]): the data plane never waits
//! for a stream, and a client too slow to keep up loses events, which it is
//! told as `{"event": "lost", "count": N}` (SSE event name `lost`), so a
//! chart of them is a sample that says so.
//!
//! A stream holds a connection slot, so at most a quarter of them may be
//! streams, and each ends itself within the connection's time limit
//! (EventSource, and the dashboard, reconnect).

use std::convert::Infallible;
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, ApiResult, App};
use dummynet_dataplane::observer::{EventFilter, Subscription};

/// Events a stream's subscription holds while the client reads: about a
/// second of a busy pipe's events.
const SUBSCRIBER_CAPACITY: usize = 8192;

/// How long a stream waits before looking for events again once it has
/// sent all it had: the dashboard's charts are per second, so 20 ms of
/// batching is invisible, and an idle stream costs 50 wake-ups a second.
const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Filter {
    pipe: Option<u32>,
    rule: Option<u16>,
    sample: Option<u32>,
}

/// A stream's state between two events.
struct Stream {
    sub: Subscription,
    /// Released when the stream ends.
    _slot: tokio::sync::OwnedSemaphorePermit,
    until: Instant,
    /// What the subscription had lost when the client was last told.
    told_lost: u64,
}

impl Stream {
    /// The next message: a `lost` notice if events were lost since the
    /// last one, else the next event; `None` once the stream is over (the
    /// daemon stopped, or its time is up).
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Stream)> {
        loop {
            let lost = self.sub.lost();
            if lost > self.told_lost {
                let count = lost - self.told_lost;
                self.told_lost = lost;
                let notice = json!({ "event": "lost", "count": count }).to_string();
                return Some((Ok(SseEvent::default().event("lost").data(notice)), self));
            }
            match self.sub.try_recv() {
                Ok(event) => match serde_json::to_string(&event) {
                    Ok(line) => return Some((Ok(SseEvent::default().data(line)), self)),
                    // Every event serializes; one that did not is skipped.
                    Err(_) => continue,
                },
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) if Instant::now() >= self.until => return None,
                Err(TryRecvError::Empty) => tokio::time::sleep(POLL).await,
            }
        }
    }
}

pub(super) async fn events(
    State(app): State<App>,
    filter: Result<Query<Filter>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(filter) = filter.map_err(|e| {
        ApiError::new(
            "invalid",
            format!(
                "{}; the filters are pipe=N, rule=N and sample=N",
                e.body_text()
            ),
        )
    })?;
    if filter.sample == Some(0) {
        return Err(ApiError::new(
            "invalid",
            "sample=0: sample keeps one packet in N, N >= 1",
        ));
    }
    let Some(observer) = app.observer.clone() else {
        return Err(ApiError::new(
            "unavailable",
            "this daemon has no event tap (it was started without one)",
        ));
    };
    let slot = app.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            "busy",
            "as many event streams are open as this daemon serves; close one or try again",
        )
    })?;
    let sub = observer.subscribe(
        EventFilter {
            pipe: filter.pipe,
            rule: filter.rule,
            sample: filter.sample,
        },
        SUBSCRIBER_CAPACITY,
    );
    let stream = Stream {
        sub,
        _slot: slot,
        until: Instant::now() + app.stream_length,
        told_lost: 0,
    };
    let messages = futures_util::stream::unfold(stream, Stream::next);
    Ok(Sse::new(messages)
        .keep_alive(KeepAlive::default())
        .into_response())
}
