//! `GET /api/queues`: every queue of the store with its limits and its counts (running and
//! waiting, in all and per key), as `cairn queue list --json` prints them, and the engine
//! clock's time (a queue's `recent` admissions count against its rate limit until
//! `at + period_ms`).

use axum::Json;
use axum::extract::State;

use super::app::{App, Params, reject};
use super::params::{NoParams, Reject};
use crate::debug::rows::QueuesPage;

/// The queues, by name.
pub(super) async fn list(
    State(app): State<App>,
    _: Params<NoParams>,
) -> Result<Json<QueuesPage>, Reject> {
    let queues = app.engine.store().queues().await.map_err(|e| reject(e.into(), "queues"))?;
    let now_ms = app.engine.clock().now_ms();
    Ok(Json(QueuesPage { now_ms, queues }))
}
