//! `GET /api/trace`: the messages of a session (`thread`, repeatable) or of every thread,
//! filtered as `cairn trace` filters them (correlation id, two parties, a time window, a chain of
//! parents), in the JSON `cairn trace --json` prints; with `states=1`, the chain stepped
//! through with the state after each message (`super::session`).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::app::{App, Params, reject};
use super::params::{Reject, TraceParams};
use crate::debug::rows::Traced;
use crate::debug::views::message_row;
use crate::debug::{TraceQuery, TraceScope};

pub(super) async fn trace(
    State(app): State<App>,
    Params(p): Params<TraceParams>,
) -> Result<Json<Value>, Reject> {
    let scope = if p.threads.is_empty() { TraceScope::All } else { TraceScope::Threads(p.threads) };
    let mut query = TraceQuery::new(scope);
    query.correlation_id = p.correlation_id;
    query.between = <[String; 2]>::try_from(p.between).ok().map(|[a, b]| (a, b));
    (query.from_ms, query.to_ms, query.chain_to) = (p.from_ms, p.to_ms, p.chain);
    if p.states {
        return Ok(Json(super::session::chain(&app, &query).await?));
    }
    let found =
        crate::Operator::new(&app.engine).trace(&query).await.map_err(|e| reject(e, "trace"))?;
    Ok(Json(json!(Traced { messages: found.iter().map(message_row).collect() })))
}
