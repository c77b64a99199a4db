//! Seed 004's session reads over the endpoint, as `cairn state --at-time --session` and
//! `cairn trace --chain --states` read them (both through [`crate::Operator`]): a session as it
//! stood at a time (`GET /api/threads/{id}/state?at_time=MS&session=1`), and a chain of
//! messages stepped through with the state after each (`GET /api/trace?chain=ID&states=1`).

use serde_json::{Value, json};

use super::app::{App, reject};
use super::params::Reject;
use crate::debug::TraceQuery;
use crate::debug::rows::{ChainStates, SessionAt};

/// The session rooted at `id` as it stood at `at_ms`: `{thread, at_time, threads}`, the
/// threads as `cairn state --at-time --session --json` prints them (bounded by
/// [`crate::limits::SESSION_THREADS_MAX`]).
pub(super) async fn at_time(
    app: &App,
    id: &str,
    at_ms: u64,
    redact: bool,
) -> Result<Value, Reject> {
    let threads = crate::Operator::new(&app.engine)
        .session_state_at_time(id, at_ms)
        .await
        .map_err(|e| reject(e, "session"))?;
    let out = SessionAt { thread: id.to_owned(), at_time: at_ms, threads };
    Ok(app.answer(json!(out), redact))
}

/// The chain `query` names, each message with its thread's state right after it:
/// `{chain, steps}`, the steps as `cairn trace --chain --states --json` prints them (bounded by
/// [`crate::limits::CHAIN_STATES_MAX`]).
pub(super) async fn chain(app: &App, query: &TraceQuery) -> Result<Value, Reject> {
    let steps = crate::Operator::new(&app.engine)
        .replay_chain(query)
        .await
        .map_err(|e| reject(e, "chain"))?;
    let out = ChainStates { chain: query.chain_to.clone().unwrap_or_default(), steps };
    Ok(app.answer(json!(out), false))
}
