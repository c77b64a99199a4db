//! The checkpoint reads: `GET /api/checkpoints` (a filtered page, newest first, as
//! `cairn checkpoints`) and `GET /api/checkpoints/{id}` (one with its snapshot, as
//! `cairn checkpoint show`).

use axum::Json;
use axum::extract::State;
use cairn_storage::{CheckpointId, Page};
use serde_json::{Value, json};

use super::app::{App, Params, Segment, reject};
use super::params::{CheckpointsParams, RedactParams, Reject};
use crate::debug::rows::CheckpointsPage;
use crate::debug::views;

pub(super) async fn list(
    State(app): State<App>,
    Params(p): Params<CheckpointsParams>,
) -> Result<Json<CheckpointsPage>, Reject> {
    let page = Page { limit: p.limit, offset: p.offset };
    let infos = app
        .engine
        .store()
        .list_checkpoints(&p.filter(), page)
        .await
        .map_err(|e| reject(e.into(), "checkpoints"))?;
    let checkpoints = infos.iter().map(views::checkpoint_row).collect();
    Ok(Json(CheckpointsPage { checkpoints, limit: p.limit, offset: p.offset }))
}

pub(super) async fn show(
    State(app): State<App>,
    Params(RedactParams { redact }): Params<RedactParams>,
    Segment(text): Segment,
) -> Result<Json<Value>, Reject> {
    let id = text
        .parse::<u64>()
        .map_err(|_| Reject::bad("checkpoint", format!("{text:?} is not a checkpoint id")))?;
    let found = app
        .engine
        .store()
        .checkpoint(CheckpointId(id))
        .await
        .map_err(|e| reject(e.into(), "checkpoint"))?;
    let Some(cp) = found else {
        return Err(Reject::not_found("checkpoint", format!("no checkpoint {id}")));
    };
    let out = views::checkpoint_details(&cp).map_err(|e| reject(e, "checkpoint"))?;
    Ok(Json(app.answer(json!(out), redact)))
}
