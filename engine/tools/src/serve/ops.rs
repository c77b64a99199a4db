//! The operations reads the CLI's `bundle export`, `replay` and `resumable` make through a
//! running engine: computed by the engine on its live store, so that the command needs no copy
//! of the file. Routes:
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/api/threads/{id}/bundle?redact_key=&secret=&meta=K=V&checkpoints=&last_events=&max_payload_bytes=` | the thread's debug bundle, redacted, as JSON (uncompressed) |
//! | GET | `/api/threads/{id}/replay` | the thread replayed against the engine's code: the replay report |
//! | GET | `/api/resumable?max_age_ms=` | the threads this engine could resume and does not drive, as `cairn resumable --json` |
//!
//! A bundle holds the events up to the thread's last seq when the export read its record
//! (events are never rewritten, and states and checkpoints are taken at or before that seq), so
//! it is a consistent picture of the thread even while the thread moves on.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::app::{App, Params, Segment, blocking, reject};
use super::params::{NoParams, Reject};
use super::params_ops::{BundleParams, ResumableParams};
use super::threads::record_of;
use crate::debug::rows::ResumablePage;
use crate::debug::{Redactor, views};
use cairn::replay::{ReplayOptions, ReplayReport};

pub(super) async fn bundle(
    State(app): State<App>,
    Params(p): Params<BundleParams>,
    Segment(id): Segment,
) -> Result<Response, Reject> {
    let as_stored = p.changes_nothing();
    let options = p.options();
    record_of(&app.engine, &id).await?;
    Redactor::new(&options.redaction).map_err(|e| reject(e, "secret"))?;
    let operator = crate::Operator::new(&app.engine);
    let bytes = match operator.export_bundle(&id, &options).await {
        Ok(bundle) => bundle.to_bytes(false),
        // Sealed with a key this endpoint lacks: the bundle goes out sealed, as stored, when
        // nothing asked for changes a body (those need the key: the error, a 409).
        Err(e)
            if as_stored
                && cairn::admin::sealed_view(&app.engine).placeholder_for(&e).is_some() =>
        {
            operator.export_sealed_bundle(&id).await.and_then(|b| b.to_bytes(false))
        }
        Err(e) => Err(e),
    }
    .map_err(|e| reject(e, "thread"))?;
    let headers = [(axum::http::header::CONTENT_TYPE, "application/json")];
    Ok((headers, bytes).into_response())
}

pub(super) async fn replay(
    State(app): State<App>,
    _: Params<NoParams>,
    Segment(id): Segment,
) -> Result<Json<ReplayReport>, Reject> {
    record_of(&app.engine, &id).await?;
    let report =
        app.engine.replay(&id, &ReplayOptions::default()).await.map_err(|e| reject(e, "thread"))?;
    Ok(Json(report))
}

pub(super) async fn resumable(
    State(app): State<App>,
    Params(ResumableParams { max_age_ms }): Params<ResumableParams>,
) -> Result<Json<ResumablePage>, Reject> {
    // Every thread listed: off the async workers (a file's reads answer inline), still awaited.
    let runtime = tokio::runtime::Handle::current();
    blocking(move || {
        let engine = &app.engine;
        let records = runtime
            .block_on(async {
                match max_age_ms {
                    Some(ms) => engine.resumable_within(ms).await,
                    None => engine.resumable().await,
                }
            })
            .map_err(|e| reject(e, "resumable"))?;
        Ok(Json(ResumablePage { threads: views::resumable_rows(engine, records) }))
    })
    .await
}
