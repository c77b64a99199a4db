//! The read handlers: health, metrics, threads, one thread, state, checkpoints, graphs and
//! traces. They read the engine's store (live, not a snapshot) with its async reads, awaited on
//! the runtime (on PostgreSQL a round trip suspends the request's task and blocks no thread);
//! the whole-database health and verify reads run on a blocking thread.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use cairn_storage::{CheckpointFilter, Page, ThreadId, ThreadRecord, ThreadStatus};
use serde_json::{Value, json};

use super::app::{App, Params, Segment, blocking, reject};
use super::params::{
    GraphFormat, GraphParams, HealthParams, ListParams, NoParams, RedactParams, Reject, SeqPair,
    StateParams,
};
use crate::debug::rows::{StateDiff, ThreadsPage, VerifyRow};
use crate::debug::views;
use crate::limits::SERVE_PAGE_MAX;
use cairn::Engine;

/// The stored status of thread `id`, read with the store's async reads (a handler that does
/// not move to a blocking thread awaits it), or an error naming `thread`.
pub(super) async fn status_of(engine: &Engine, id: &str) -> Result<ThreadStatus, Reject> {
    let thread = ThreadId::new(id).map_err(|e| Reject::bad("thread", e.to_string()))?;
    let record = cairn::admin::thread_record(engine.store().as_ref(), &thread).await;
    record.map(|r| r.status).map_err(|e| reject(e, "thread"))
}

/// The record of thread `id`, or a 400 (malformed id) or 404 (no such thread) naming `thread`.
pub(super) async fn record_of(engine: &Engine, id: &str) -> Result<ThreadRecord, Reject> {
    let thread = ThreadId::new(id).map_err(|e| Reject::bad("thread", e.to_string()))?;
    engine
        .store()
        .thread(&thread)
        .await
        .map_err(|e| reject(e.into(), "thread"))?
        .ok_or_else(|| Reject::not_found("thread", format!("no thread {id}")))
}

pub(super) async fn health(
    State(app): State<App>,
    Params(HealthParams { watchdog_ms }): Params<HealthParams>,
) -> Result<Json<Value>, Reject> {
    // Every thread listed: off the async workers (a file's reads answer inline), still awaited.
    let runtime = tokio::runtime::Handle::current();
    let report = blocking(move || {
        let report = runtime.block_on(async {
            match watchdog_ms {
                Some(ms) => app.engine.health_with_watchdog(ms).await,
                None => app.engine.health().await,
            }
        });
        report.map_err(|e| reject(e, "health"))
    })
    .await?;
    Ok(Json(serde_json::to_value(report).map_err(|e| reject(e.into(), "health"))?))
}

/// The drain view: per workflow version, its unfinished threads (`Engine::drain`).
pub(super) async fn versions(State(app): State<App>) -> Result<Json<Value>, Reject> {
    // Every unfinished thread listed: off the async workers, as the health report.
    let runtime = tokio::runtime::Handle::current();
    let drain =
        blocking(move || runtime.block_on(app.engine.drain()).map_err(|e| reject(e, "versions")))
            .await?;
    Ok(Json(serde_json::to_value(drain).map_err(|e| reject(e.into(), "versions"))?))
}

/// Every record checked, on the live store (a consistent snapshot of it), as `cairn verify`.
pub(super) async fn verify(
    State(app): State<App>,
    _: Params<NoParams>,
) -> Result<Json<VerifyRow>, Reject> {
    let report =
        blocking(move || app.engine.store().verify().map_err(|e| reject(e.into(), "verify")))
            .await?;
    Ok(Json(views::verify_row(&report)))
}

pub(super) async fn metrics(
    State(app): State<App>,
    _: Params<NoParams>,
) -> Result<Response, Reject> {
    if let Some(text) = exposition(&app) {
        return Ok(text);
    }
    Ok(health(State(app), Params(HealthParams::default())).await?.into_response())
}

/// `GET /metrics`: the Prometheus text, as every scraper expects it at that path; a 404 when
/// the endpoint has no exporter (a library user's without the `prometheus` feature or handle).
pub(super) async fn prometheus(
    State(app): State<App>,
    _: Params<NoParams>,
) -> Result<Response, Reject> {
    exposition(&app).ok_or_else(|| {
        Reject::not_found(
            "path",
            "this endpoint has no Prometheus exporter (`ServeOptions::prometheus`; `cairn serve` has one)",
        )
    })
}

/// The Prometheus text of the endpoint's exporter, if it has one.
fn exposition(app: &App) -> Option<Response> {
    #[cfg(feature = "prometheus")]
    if let Some(handle) = &app.prometheus {
        let headers = [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")];
        return Some((headers, handle.render()).into_response());
    }
    #[cfg(not(feature = "prometheus"))]
    let _ = app;
    None
}

pub(super) async fn list(
    State(app): State<App>,
    Params(p): Params<ListParams>,
) -> Result<Json<ThreadsPage>, Reject> {
    let store = app.engine.store().as_ref();
    let (records, next) =
        views::threads_after(store, &p.filter(), p.after.as_ref(), p.offset, p.limit)
            .await
            .map_err(|e| reject(e, "threads"))?;
    let threads = records.iter().map(views::thread_row).collect();
    let next = next.map(|id| id.to_string());
    Ok(Json(ThreadsPage { limit: p.limit, next, offset: p.offset, threads }))
}

pub(super) async fn show(
    State(app): State<App>,
    Params(RedactParams { redact }): Params<RedactParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let record = record_of(&app.engine, &id).await?;
    let out = views::thread_details(&app.engine, &record).await.map_err(|e| reject(e, "thread"))?;
    Ok(Json(app.answer(json!(out), redact)))
}

pub(super) async fn state(
    State(app): State<App>,
    Params(p): Params<StateParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let engine = &app.engine;
    let record = record_of(engine, &id).await?;
    if let (true, Some(at_ms)) = (p.session, p.at_time) {
        return Ok(Json(super::session::at_time(&app, &id, at_ms, p.redact).await?));
    }
    let out = match p.diff {
        Some(SeqPair(a, b)) => {
            let changes = crate::Operator::new(engine)
                .diff(&id, a, b)
                .await
                .map_err(|e| reject(e, "diff"))?;
            json!(StateDiff { changes, from: a, thread: id, to: b })
        }
        None => {
            let field = if p.at_time.is_some() { "at_time" } else { "at" };
            let row = views::state_at(engine, &record, p.at, p.at_time)
                .await
                .map_err(|e| reject(e, field))?;
            json!(row)
        }
    };
    Ok(Json(app.answer(out, p.redact)))
}

pub(super) async fn checkpoints(
    State(app): State<App>,
    Params(RedactParams { redact }): Params<RedactParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let record = record_of(&app.engine, &id).await?;
    let filter = CheckpointFilter { thread: Some(record.id), ..CheckpointFilter::default() };
    let infos = app
        .engine
        .store()
        .list_checkpoints(&filter, Page { limit: SERVE_PAGE_MAX, offset: 0 })
        .await
        .map_err(|e| reject(e.into(), "thread"))?;
    let rows: Vec<_> = infos.iter().map(views::checkpoint_row).collect();
    let out = json!({"thread": id, "checkpoints": rows});
    Ok(Json(app.answer(out, redact)))
}

pub(super) async fn graph(
    State(app): State<App>,
    Params(p): Params<GraphParams>,
    Segment(id): Segment,
) -> Result<Response, Reject> {
    let wf = app.workflow(&id, p.version)?;
    let text = match p.format {
        GraphFormat::Mermaid => wf.to_mermaid(),
        GraphFormat::Dot => wf.to_dot(),
    };
    let headers = [(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    Ok((headers, text).into_response())
}

pub(super) async fn trace(
    State(app): State<App>,
    Params(RedactParams { redact }): Params<RedactParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let found = views::messages(app.engine.store().as_ref(), &id)
        .await
        .map_err(|e| reject(e, "correlation_id"))?;
    let out = json!({"correlation_id": id, "messages": found});
    Ok(Json(app.answer(out, redact)))
}
