//! Checkpoints asked for at run time (the token is checked before, by the access layer):
//! `POST /api/threads/{id}/checkpoints/periodic` `{"interval_ms", "meta"?}` (a periodic
//! checkpoint, replacing an earlier one), `DELETE` of the same path (cancelled), and
//! `POST /api/threads/{id}/checkpoints/at-node` `{"node", "meta"?}` (a checkpoint the next time
//! the thread completes the node). `meta` is `{"creator"?, "description"?, "tags"?, "custom"?}`
//! (creator `endpoint` when none). Each answers `{thread, status}` once the request is durable.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use cairn_storage::CheckpointMeta;
use serde::Deserialize;
use utoipa::ToSchema;

use super::app::{App, Segment, reject};
use super::controls::{no_body, parse};
use super::params::Reject;
use super::threads::record_of;
use super::wire::Controlled;

/// The metadata stored with the checkpoints a request makes.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct MetaBody {
    /// Who asked (`endpoint` when none).
    creator: Option<String>,
    /// What the checkpoints are for.
    #[serde(default)]
    description: String,
    /// Tags, to find them by.
    #[serde(default)]
    tags: Vec<String>,
    /// Free-form fields.
    #[serde(default)]
    custom: BTreeMap<String, String>,
}

impl From<MetaBody> for CheckpointMeta {
    fn from(m: MetaBody) -> Self {
        CheckpointMeta {
            creator: m.creator.unwrap_or_else(|| "endpoint".into()),
            description: m.description,
            tags: m.tags,
            custom: m.custom,
        }
    }
}

/// `POST /api/threads/{id}/checkpoints/periodic`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PeriodicBody {
    /// The interval in ms of the engine's clock (over 0), counted from the latest checkpoint.
    interval_ms: u64,
    #[serde(default)]
    #[schema(inline)]
    meta: MetaBody,
}

/// `POST /api/threads/{id}/checkpoints/at-node`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AtNodeBody {
    /// The node whose next completion takes the checkpoint.
    node: String,
    #[serde(default)]
    #[schema(inline)]
    meta: MetaBody,
}

pub(super) async fn periodic(
    State(app): State<App>,
    Segment(id): Segment<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Controlled>, Reject> {
    let b: PeriodicBody = parse(&super::app::body(body)?)?;
    record_of(&app.engine, &id).await?;
    let field = if b.interval_ms == 0 { "interval_ms" } else { "meta" };
    let asked = app.engine.checkpoint_every(&id, b.interval_ms, b.meta.into()).await;
    asked.map_err(|e| reject(e, field))?;
    answer(&app, id).await
}

pub(super) async fn cancel_periodic(
    State(app): State<App>,
    Segment(id): Segment<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Controlled>, Reject> {
    no_body(&super::app::body(body)?, "cancelling a periodic checkpoint")?;
    record_of(&app.engine, &id).await?;
    let cancelled = app.engine.cancel_periodic_checkpoint(&id).await;
    cancelled.map_err(|e| reject(e, "thread"))?;
    answer(&app, id).await
}

pub(super) async fn at_node(
    State(app): State<App>,
    Segment(id): Segment<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Controlled>, Reject> {
    let b: AtNodeBody = parse(&super::app::body(body)?)?;
    record_of(&app.engine, &id).await?;
    let asked = app.engine.checkpoint_at_node(&id, &b.node, b.meta.into()).await;
    asked.map_err(|e| reject(e, "node"))?;
    answer(&app, id).await
}

async fn answer(app: &App, thread: String) -> Result<Json<Controlled>, Reject> {
    let status = super::threads::status_of(&app.engine, &thread).await?.as_str().to_owned();
    Ok(Json(Controlled { thread, status, signal: None, duplicate: None, created: None }))
}
