//! The routes and what they share: the app state, the JSON error response, and the mapping of
//! engine errors onto HTTP statuses.
//!
//! The route table is in the module docs of `serve`.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::params::Reject;
use super::{checkpoints, controls, messages, ops, queues, results, sse, threads};
use crate::api::engine::Engine;
use crate::debug::Redactor;
use crate::error::Error;
use crate::limits::SERVE_BODY_BYTES_MAX;

/// What every handler sees.
#[derive(Clone)]
pub(super) struct App {
    pub engine: Engine,
    pub token: Arc<str>,
    pub redactor: Arc<Redactor>,
    /// Cancelled when the server stops (ends followed logs).
    pub stop: CancellationToken,
    #[cfg(feature = "prometheus")]
    pub prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

impl App {
    /// `out` as answered: with the bundle redaction rules applied when the request asked.
    pub fn answer(&self, mut out: serde_json::Value, redact: bool) -> serde_json::Value {
        if redact {
            self.redactor.value(&mut out);
        }
        out
    }
}

/// The JSON API's routes, `extra` (the web view's, given by the caller so that this file does
/// not import the pages) and the fallbacks, over `app`.
pub(super) fn router(app: App, extra: Router<App>) -> Router {
    Router::new()
        .route("/api/health", get(threads::health))
        .route("/api/verify", get(threads::verify))
        .route("/api/metrics", get(threads::metrics))
        .route("/api/threads", get(threads::list))
        .route("/api/threads/{id}", get(threads::show).delete(results::delete))
        .route("/api/threads/{id}/result", get(results::result))
        .route("/api/threads/{id}/events", get(sse::events))
        .route("/api/threads/{id}/state", get(threads::state))
        .route("/api/threads/{id}/checkpoints", get(threads::checkpoints))
        .route("/api/threads/{id}/bundle", get(ops::bundle))
        .route("/api/threads/{id}/replay", get(ops::replay))
        .route("/api/resumable", get(ops::resumable))
        .route("/api/workflows/{id}/graph", get(threads::graph))
        .route("/api/trace/{id}", get(threads::trace))
        .route("/api/trace", get(messages::trace))
        .route("/api/queues", get(queues::list))
        .route("/api/checkpoints", get(checkpoints::list))
        .route("/api/checkpoints/{id}", get(checkpoints::show))
        .route("/api/threads/{id}/{control}", post(controls::control))
        .merge(extra)
        .fallback(|| async {
            Reject { status: 404, error: "no such route".into(), field: Some("path".into()) }
        })
        .method_not_allowed_fallback(|| async {
            let error = "reads are GET, controls POST".into();
            Reject { status: 405, error, field: Some("method".into()) }
        })
        .layer(DefaultBodyLimit::max(SERVE_BODY_BYTES_MAX))
        .with_state(app)
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, axum::Json(json!({"error": self.error, "field": self.field}))).into_response()
    }
}

/// An engine error as a response about `field`: an unknown thread 404, a refused control or a
/// thread whose workflow is not compiled in 409, a caller's mistake 400, the rest 500.
pub(super) fn reject(e: Error, field: &str) -> Reject {
    let status = match &e {
        Error::UnknownThread(_) => 404,
        Error::WrongStatus { .. }
        | Error::Transition { .. }
        | Error::UnknownWorkflow { .. }
        | Error::FingerprintChanged { .. }
        | Error::NoMigration { .. } => 409,
        Error::Invalid(_) | Error::Codec(_) | Error::LimitExceeded { .. } => 400,
        Error::Storage(
            cairn_storage::Error::Invalid { .. } | cairn_storage::Error::LimitExceeded { .. },
        ) => 400,
        _ => 500,
    };
    if status == 500 {
        tracing::warn!(error = %e, "an endpoint request failed");
    }
    Reject { status, error: e.to_string(), field: Some(field.to_owned()) }
}

/// The query pairs, or a 400 naming `query`.
pub(super) fn pairs(
    query: Result<
        axum::extract::Query<Vec<(String, String)>>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Vec<(String, String)>, Reject> {
    query.map(|q| q.0).map_err(|e| Reject::bad("query", e.body_text()))
}

/// Runs a blocking store read off the async workers: what is left for it is reading the whole
/// database (`verify`, health, the web view's list of every thread); every read of one thread
/// or page is awaited in its handler.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Reject> + Send + 'static,
) -> Result<T, Reject> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(Reject { status: 500, error: format!("the read failed: {e}"), field: None })
    })
}
