//! Published events and promises over HTTP (`docs/promises.md`):
//!
//! - `GET /api/threads/{id}/published`: every key the thread published with its latest value,
//!   `{"thread", "published": {key: value}}`.
//! - `GET /api/threads/{id}/published/{key}[?wait_ms=N]`: `{"thread", "key", "state", ..}`:
//!   `"set"` with `value`, `"pending"` (not yet, the thread runs on), or `"never_set"` (the
//!   thread ended without it), with the thread's `status`. With `wait_ms`, a key not yet
//!   published is waited for up to that long (at most `cairn::limits::GET_EVENT_WAIT_MS_MAX`
//!   and the endpoint's `RESULT_WAIT_MS_MAX`): a long poll.
//! - `GET /api/threads/{id}/promises`: every promise the thread created, in id order, with its
//!   completion when one is stored: `{"thread", "promises": [{"promise", "state": "open" |
//!   "completed", "value"? | "error"?, "signal"?}]}` (the thread's inbox is read in pages of
//!   `INBOX_PAGE`, at most its `SIGNALS_PER_THREAD_MAX` signals).
//! - `POST /api/promises/{id}`, a control (the access layer checks the token), body
//!   `{"value": ..}` or `{"error": ".."}`: completes the promise (`Engine::complete_promise`);
//!   `{"promise", "thread", "signal", "duplicate"}`. The same completion again is a 200 with
//!   `duplicate: true`; another one a 409; an unknown id a 404; a finished thread a 409.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use cairn_core::published::promise_signal;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::app::{App, Params, Segment, reject};
use super::params::{NoParams, Reject, WaitParams};
use crate::limits::INBOX_PAGE;

/// The body of `POST /api/promises/{id}`: a value or an error, not both.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CompleteBody {
    /// The value the promise is completed with.
    value: Option<Value>,
    /// The error it is completed with, for a person.
    error: Option<String>,
}

pub(super) async fn all(
    State(app): State<App>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let published = app.engine.published(&id).await.map_err(|e| reject(e, "thread"))?;
    Ok(Json(json!({ "thread": id, "published": published })))
}

pub(super) async fn one(
    State(app): State<App>,
    Params(p): Params<WaitParams>,
    Segment((id, key)): Segment<(String, String)>,
) -> Result<Json<Value>, Reject> {
    let engine = &app.engine;
    let wait = Some(p.wait());
    let got = tokio::select! {
        got = engine.get_event(&id, &key, wait) => got.map_err(|e| reject(e, "thread"))?,
        // A server stopping answers what it has instead of holding the request.
        () = app.stop.cancelled() => engine.get_event(&id, &key, None).await.map_err(|e| reject(e, "thread"))?,
    };
    let mut answer =
        serde_json::to_value(got).map_err(|e| Reject::new(500, "key", e.to_string()))?;
    answer["thread"] = json!(id);
    answer["key"] = json!(key);
    Ok(Json(answer))
}

pub(super) async fn list(
    State(app): State<App>,
    _: Params<NoParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let record = super::threads::record_of(&app.engine, &id).await?;
    let created = crate::debug::views::promises_created(&app.engine, &record.id)
        .await
        .map_err(|e| reject(e, "thread"))?;
    // The completion of each, by the name of the signal that carries it.
    let mut by_signal: BTreeMap<String, Option<(u64, Value)>> =
        created.iter().map(|p| (promise_signal(p), None)).collect();
    let mut after = 0;
    while !created.is_empty() {
        let page = app
            .engine
            .store()
            .signals(&record.id, after, INBOX_PAGE)
            .await
            .map_err(|e| reject(e.into(), "thread"))?;
        for s in &page {
            if let Some(slot @ None) = by_signal.get_mut(&s.name) {
                let value = serde_json::from_slice(&s.data).unwrap_or(Value::Null);
                *slot = Some((s.n, value));
            }
        }
        match page.last() {
            Some(last) if page.len() == INBOX_PAGE => after = last.n,
            _ => break,
        }
    }
    let promises: Vec<Value> = created
        .iter()
        .map(|p| match by_signal.get(&promise_signal(p)).cloned().flatten() {
            None => json!({ "promise": p, "state": "open" }),
            Some((n, sent)) => {
                let mut row = json!({ "promise": p, "state": "completed", "signal": n });
                for field in ["value", "error"] {
                    if let Some(v) = sent.get(field) {
                        row[field] = v.clone();
                    }
                }
                row
            }
        })
        .collect();
    Ok(Json(app.answer(json!({ "thread": id, "promises": promises }), false)))
}

pub(super) async fn complete(
    State(app): State<App>,
    Segment(id): Segment,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<cairn::Completed>, Reject> {
    let body = super::app::body(body)?;
    let b: CompleteBody = super::controls::parse(&body)?;
    let outcome = match (b.value, b.error) {
        (Some(value), None) => Ok(value),
        (None, Some(error)) => Err(error),
        _ => return Err(Reject::bad("body", "give value or error, not both")),
    };
    let done = app.engine.complete_promise(&id, outcome).await;
    done.map(Json).map_err(|e| reject(e, "promise"))
}
