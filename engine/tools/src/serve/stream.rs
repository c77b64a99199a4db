//! `GET /api/threads/{id}/stream`: a thread's stream ([`cairn::Engine::stream_after`]) as
//! Server-Sent Events: `chunk` for a value a task wrote (ephemeral, no SSE id), `gap` for chunks
//! the reader missed (it fell behind the engine's bounded buffer), `closed` for a task's end and
//! `ended` for the thread's end (durable, read from the log; their seq is the SSE id, so an
//! `EventSource` that reconnects sends it back as `Last-Event-ID` and resumes after it), then
//! the response ends. `error` for a read that failed, then the end. Each event's data is the
//! item as JSON (`cairn::StreamItem`, tagged by `kind`), redacted as the log is.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cairn::StreamItem;
use futures::StreamExt as _;
use serde_json::json;

use super::app::{App, Params, Segment, reject};
use super::params::{Reject, StreamParams};

pub(super) async fn stream(
    State(app): State<App>,
    Params(p): Params<StreamParams>,
    Segment(id): Segment,
    headers: HeaderMap,
) -> Result<Response, Reject> {
    let after = last_event_id(&headers)?.unwrap_or(p.since);
    let reader = app.engine.stream_after(&id, after).await.map_err(|e| reject(e, "thread"))?;
    let stop = app.stop.clone();
    let events = reader
        .map(move |item| Ok::<_, Infallible>(event(&app, item, p.redact)))
        .take_until(stop.cancelled_owned());
    Ok(Sse::new(events).keep_alive(KeepAlive::default()).into_response())
}

/// The `Last-Event-ID` an `EventSource` sends when it reconnects, or a 400 naming it.
fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, Reject> {
    let Some(value) = headers.get("last-event-id") else { return Ok(None) };
    let text = value.to_str().unwrap_or_default().trim();
    text.parse().map(Some).map_err(|_| {
        Reject::bad(
            "Last-Event-ID",
            format!("{text:?} is not a seq (a closed or ended event's id)"),
        )
    })
}

/// One item as an SSE event.
fn event(app: &App, item: Result<StreamItem, cairn::Error>, redact: bool) -> Event {
    let item = match item {
        Ok(item) => item,
        Err(e) => {
            return Event::default()
                .event("error")
                .data(json!({"error": e.to_string()}).to_string());
        }
    };
    let (name, id) = match &item {
        StreamItem::Chunk { .. } => ("chunk", None),
        StreamItem::Gap { .. } => ("gap", None),
        StreamItem::Closed { seq, .. } => ("closed", Some(*seq)),
        StreamItem::Ended { seq, .. } => ("ended", Some(*seq)),
    };
    let data = app.answer(json!(item), redact).to_string();
    let event = Event::default().event(name).data(data);
    match id {
        Some(seq) => event.id(seq.to_string()),
        None => event,
    }
}
