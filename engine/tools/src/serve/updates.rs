//! `POST /api/threads/{id}/updates/{name}?wait_ms=N`: applies the workflow's update `name` to
//! the thread and answers its reply once the `update_applied` event holding it is durable
//! (`Engine::update`, `docs/updates.md`). Body: `{"args"?, "id"?, "start"? {"workflow",
//! "input", "version"?, "labels"?}}`: the arguments (JSON `null` without them), the update's id
//! (a retry with the same id answers the recorded reply, `"duplicate": true`), and with `start`
//! update-with-start (the thread is created first if it does not exist; the answer adds
//! `"created"`). An unknown update is a 404 naming `name`; arguments that do not convert, a
//! validator's refusal or a handler's error a 400 naming `args`; a finished thread a 409; a
//! runner that did not reach a step boundary within `wait_ms` a 504 (send the same id again).

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use cairn::dsl::UpdateError;
use cairn::{Error, StartOptions, UpdateOptions};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::app::{App, Params, Segment, reject};
use super::params::{Reject, WaitParams};
use super::wire::UpdateAnswer;

/// The body of an update.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdateBody {
    /// The update's arguments (`null` when absent).
    #[serde(default)]
    args: Value,
    /// The update's id: applied once per thread (a fresh one when absent).
    id: Option<String>,
    /// Update-with-start: creates the thread (of this id) first if it does not exist.
    #[schema(inline)]
    start: Option<UpdateStart>,
}

/// The thread an update-with-start creates when it does not exist.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateStart {
    /// The workflow's id.
    workflow: String,
    /// The thread's initial state.
    input: Value,
    /// The workflow's version (the newest compiled in when none).
    version: Option<u32>,
    /// Labels.
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// `POST /api/threads/{id}/updates/{name}`.
pub(super) async fn update(
    State(app): State<App>,
    Segment((id, name)): Segment<(String, String)>,
    Params(wait): Params<WaitParams>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<UpdateAnswer>, Reject> {
    let body = super::app::body(body)?;
    let b: UpdateBody = if body.iter().all(u8::is_ascii_whitespace) {
        UpdateBody::default()
    } else {
        super::controls::parse(&body)?
    };
    let engine = &app.engine;
    let options = UpdateOptions { id: b.id, wait_ms: wait.wait_ms };
    let (updated, created) = match b.start {
        Some(start) => {
            let start_options = StartOptions {
                version: start.version,
                labels: start.labels,
                ..StartOptions::id(&id)
            };
            let done = engine
                .update_with_start(
                    &start.workflow,
                    start.input,
                    start_options,
                    &name,
                    b.args,
                    options,
                )
                .await
                .map_err(refused)?;
            (done.updated, Some(done.created))
        }
        None => {
            super::threads::record_of(engine, &id).await?;
            (engine.update(&id, &name, b.args, options).await.map_err(refused)?, None)
        }
    };
    Ok(Json(UpdateAnswer {
        thread: updated.thread,
        id: updated.id,
        reply: updated.reply,
        seq: updated.seq,
        duplicate: updated.duplicate,
        created,
    }))
}

/// The refusal of an update, naming the field at fault.
fn refused(e: Error) -> Reject {
    match &e {
        Error::UpdateRefused { source: UpdateError::Unknown { .. }, .. } => {
            Reject::not_found("name", e.to_string())
        }
        Error::UpdateRefused { .. } => reject(e, "args"),
        Error::UnknownWorkflow { .. } => Reject::not_found("start", e.to_string()),
        Error::Invalid(_) => reject(e, "id"),
        _ => reject(e, "thread"),
    }
}
