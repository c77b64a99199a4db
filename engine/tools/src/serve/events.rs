//! Emitting an event from outside: `POST /api/events`, a control (the access layer,
//! `super::access`, checks the token before). The body is `{"name", "id", "payload"}`; the
//! answer lists the thread each subscribed workflow has for the event (`created`: by this
//! call), none when no workflow subscribes to the name (`docs/events.md`).
//!
//! An emit of an id emitted before answers the same threads, none created; an empty id is a
//! 400 naming `id`, a payload over the limit or not a valid input of a subscriber a 400 naming
//! `payload`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::app::{App, reject};
use super::controls::parse;
use super::params::Reject;
use super::wire::{Emitted, EventThread};

/// The body of an emit.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EmitBody {
    /// The event's name: the workflows subscribed to it start.
    name: String,
    /// The event's id: once per id, whatever the number of emits.
    id: String,
    /// The input of each thread started (`null` when absent).
    #[serde(default)]
    payload: Value,
}

/// `POST /api/events`.
pub(super) async fn emit(
    State(app): State<App>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Emitted>, Reject> {
    let body = super::app::body(body)?;
    let EmitBody { name, id, payload } = parse::<EmitBody>(&body)?;
    let emitted = app.engine.emit(&name, &id, payload).await.map_err(|e| {
        // The engine's refusals of the id say "event's id"; its others are of the payload.
        let field = match &e {
            _ if e.to_string().contains("event's id") => "id",
            cairn::Error::Invalid(_) | cairn::Error::LimitExceeded { .. } => "payload",
            _ => "body",
        };
        reject(e, field)
    })?;
    let threads = emitted.threads.into_iter().map(|t| EventThread {
        link: format!("/api/threads/{}", super::wire::path_segment(&t.thread)),
        workflow: t.workflow,
        thread: t.thread,
        created: t.created,
    });
    Ok(Json(Emitted { threads: threads.collect() }))
}
