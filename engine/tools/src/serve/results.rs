//! A thread's result, long-polled, and its deletion:
//!
//! - `GET /api/threads/{id}/result[?wait_ms=N]`: `{"thread", "finished", "status", "output",
//!   "error"}`. With `wait_ms`, an unfinished thread is waited for up to that long (at most
//!   [`RESULT_WAIT_MS_MAX`](crate::limits::RESULT_WAIT_MS_MAX); more is cut to it), so a client in another process awaits it with
//!   one request per period (`cairn result --wait`); `finished: false` when it has not.
//! - `DELETE /api/threads/{id}[?force=true]`, a control (the access layer checks the token): deletes the
//!   thread whole (`Engine::delete`); 409 for an unfinished one without `force`, 404 for none.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use cairn_storage::DeleteOptions;
use serde_json::Value;

use super::app::{App, Params, Segment, reject};
use super::params::{ForceParams, Reject, WaitParams};
use super::wire::{Finish, ThreadResult};
use cairn::error::Error;

pub(super) async fn result(
    State(app): State<App>,
    Params(p): Params<WaitParams>,
    Segment(id): Segment,
) -> Result<Json<ThreadResult>, Reject> {
    let wait = p.wait();
    Ok(Json(answer(&app, &id, wait).await?))
}

/// The result of thread `id` as `GET /api/threads/{id}/result` answers it, waiting up to `wait`
/// (already bounded by [`WaitParams::wait`]) for an unfinished thread.
pub(super) async fn answer(app: &App, id: &str, wait: Duration) -> Result<ThreadResult, Reject> {
    let engine = &app.engine;
    let outcome = tokio::select! {
        outcome = engine.await_result(id, wait) => outcome,
        // A server stopping answers what it has instead of holding the request.
        () = app.stop.cancelled() => Ok(None),
    };
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            // A thread whose outcome is sealed with a key this endpoint lacks: its clear
            // status and a placeholder for its output.
            let p = crate::debug::sealed::lacking(engine, e).map_err(|e| reject(e, "thread"))?;
            let record = super::threads::record_of(engine, id).await?;
            let result = Finish::sealed(&record, &p);
            return Ok(ThreadResult { thread: id.to_owned(), result });
        }
    };
    let status = match &outcome {
        Some(o) => o.status,
        None => super::threads::status_of(engine, id).await?,
    };
    let result = Finish::new(status.as_str(), outcome.as_ref());
    Ok(ThreadResult { thread: id.to_owned(), result })
}

pub(super) async fn delete(
    State(app): State<App>,
    Params(ForceParams { force }): Params<ForceParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    match app.engine.delete(&id, DeleteOptions { force }).await {
        Ok(Some(d)) => Ok(Json(serde_json::json!(crate::debug::views::deleted_row(&id, &d)))),
        Ok(None) => Err(Reject::not_found("thread", format!("no thread {id}"))),
        Err(Error::Storage(e @ cairn_storage::Error::Unfinished { .. })) => {
            Err(Reject::new(409, "force", e.to_string()))
        }
        Err(e) => Err(reject(e, "thread")),
    }
}
