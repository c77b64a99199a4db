//! The `reset` control, `POST /api/threads/{id}/reset` (docs/batches.md, docs/endpoint.md):
//! `Engine::reset_as` of one thread. The body is `{"to": "start" | "checkpoint" | "seq:N",
//! "key"?}`: the new thread starts at that point of the thread's history, its id is
//! `<thread>.reset.<key>` (a fresh key when none is given), and the original is cancelled
//! naming it. The same key again answers the same new thread and forks nothing. A `to` or `key`
//! that does not parse, or a seq outside the thread's log, is a 400 naming the field and writes
//! nothing; an unknown thread a 404; a reset the engine refuses (a sub-workflow, no checkpoint
//! to go back to, an id held by another thread, a workflow version no longer registered) a 409.
//! The answer names the new thread and its status.

use axum::body::Bytes;
use cairn::{Error, ResetPoint};
use serde::Deserialize;
use utoipa::ToSchema;

use super::app::reject;
use super::controls::parse;
use super::params::Reject;
use super::threads::{record_of, status_of};
use super::wire::Controlled;

/// `reset`'s body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ResetBody {
    /// Where the new thread starts: `start` (the thread's input), `checkpoint` (its latest
    /// checkpoint taken while it went on) or `seq:N` (just after the event at seq N).
    to: String,
    /// The reset's key: the new thread is `<thread>.reset.<key>`, and a retry with the same
    /// key answers it without a second fork (a fresh key when absent).
    key: Option<String>,
}

/// Resets thread `id` as `body` says; answers the new thread and its status.
pub(super) async fn reset(
    engine: &cairn::Engine,
    id: String,
    body: &Bytes,
) -> Result<Controlled, Reject> {
    let b: ResetBody = parse(body)?;
    let point: ResetPoint = b.to.parse().map_err(|e: Error| Reject::bad("to", e.to_string()))?;
    if let Some(key) = &b.key {
        // A key is a piece of a thread id: not empty, no control character, bounded.
        cairn::ThreadId::new(key.as_str()).map_err(|e| Reject::bad("key", format!("key: {e}")))?;
    }
    record_of(engine, &id).await?;
    let done = match &b.key {
        Some(key) => engine.reset_as(&id, point, key).await,
        None => engine.reset(&id, point).await,
    };
    let handle = done.map_err(|e| match e {
        Error::SeqUnavailable { .. } => reject(e, "to"),
        // The engine refuses this thread's reset (a sub-workflow, no checkpoint, an id held).
        Error::Invalid(_) => Reject::new(409, "thread", e.to_string()),
        other => reject(other, "thread"),
    })?;
    let thread = handle.id().as_str().to_owned();
    let status = status_of(engine, &thread).await?.as_str().to_owned();
    Ok(Controlled { thread, status, signal: None, duplicate: None, created: None })
}
