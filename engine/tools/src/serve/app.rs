//! What the handlers share: the app state, the JSON error response, the mapping of engine
//! errors onto HTTP statuses, the query pairs and blocking reads.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::params::Reject;
use super::query::{Check, parse};
use super::wire::Refusal;
use crate::debug::Redactor;
use cairn::Engine;
use cairn::error::Error;

/// What every handler sees.
#[derive(Clone)]
pub(super) struct App {
    pub engine: Engine,
    pub redactor: Arc<Redactor>,
    /// The endpoint is public: every answer is redacted (JSON answers by the access layer, a
    /// followed log and the sequence picture where they are made).
    pub public: bool,
    /// Cancelled when the server stops (ends followed logs).
    pub stop: CancellationToken,
    #[cfg(feature = "prometheus")]
    pub prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

impl App {
    /// `out` as answered: with the bundle redaction rules applied when the request asked (or
    /// the endpoint is public).
    pub fn answer(&self, mut out: serde_json::Value, redact: bool) -> serde_json::Value {
        if redact || self.public {
            self.redactor.value(&mut out);
        }
        out
    }

    /// The compiled-in workflow `id` at `version` (its latest without one), or a 404 naming
    /// the workflow.
    pub fn workflow(
        &self,
        id: &str,
        version: Option<u32>,
    ) -> Result<Arc<cairn_dsl::DynWorkflow>, Reject> {
        let found = self
            .engine
            .workflows()
            .into_iter()
            .filter(|w| w.id() == id && version.is_none_or(|v| w.version() == v))
            .max_by_key(|w| w.version());
        found.ok_or_else(|| {
            Reject::not_found("workflow", format!("workflow {id} is not compiled in"))
        })
    }
}

/// A picture of a workflow as an SVG answer, or a 500 naming the workflow when it cannot be
/// drawn.
pub(super) fn svg_answer(svg: Result<String, String>) -> Result<Response, Reject> {
    let svg = svg.map_err(|e| Reject::new(500, "workflow", e))?;
    let headers = [(axum::http::header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")];
    Ok((headers, svg).into_response())
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        let retry = self.retry_after_s;
        let mut response =
            (status, axum::Json(Refusal { error: self.error, field: self.field })).into_response();
        if let Some(s) = retry {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, s.into());
        }
        response
    }
}

/// An engine error as a response about `field`: an unknown thread 404, a refused control or a
/// thread whose workflow is not compiled in or a body sealed with a key the endpoint lacks 409, a caller's mistake 400, a database that does
/// not answer 503 (the error says why), the rest 500.
pub(super) fn reject(e: Error, field: &str) -> Reject {
    let status = match &e {
        Error::UnknownThread(_) | Error::UnknownPromise(_) => 404,
        Error::PromiseCompleted { .. }
        | Error::WrongStatus { .. }
        | Error::Transition { .. }
        | Error::UnknownWorkflow { .. }
        | Error::FingerprintChanged { .. }
        | Error::NoMigration { .. }
        // Sealed at rest, and this endpoint holds no key that opens it (`CAIRN_KEYS`).
        | Error::Sealed { .. } => 409,
        Error::Invalid(_)
        | Error::SeqUnavailable { .. }
        | Error::Codec(_)
        | Error::LimitExceeded { .. }
        | Error::SignalRefused { .. }
        | Error::UpdateRefused { .. } => 400,
        // The runner did not reach a step boundary in time: the same id sent again answers.
        Error::UpdatePending { .. } => 504,
        Error::Storage(
            cairn_storage::Error::Invalid { .. } | cairn_storage::Error::LimitExceeded { .. },
        ) => 400,
        // The database does not answer (the store knows it), or a read got nothing within its
        // deadline: try again later, as it says why.
        Error::Storage(
            cairn_storage::Error::Unavailable { .. } | cairn_storage::Error::TimedOut { .. },
        ) => 503,
        // A queue that drops starts over its rate: try again when the window frees one.
        Error::RateLimited { retry_after_ms, .. } => {
            let mut r = Reject::new(429, field, e.to_string());
            r.retry_after_s = Some(retry_after_ms.div_ceil(1_000).max(1));
            return r;
        }
        _ => 500,
    };
    if status == 500 {
        tracing::warn!(error = %e, "an endpoint request failed");
    }
    Reject::new(status, field, e.to_string())
}

/// A handler's query parameters, read and checked ([`super::query::parse`]); a bad one is a 400
/// naming it.
pub(super) struct Params<T>(pub T);

impl<T: Check, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Reject;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Reject> {
        let query = axum::extract::Query::try_from_uri(&parts.uri);
        parse(&pairs(query)?).map(Params)
    }
}

/// A route's path segments (`{id}`, or `{id}/{control}` as a pair), or a 400 naming `path`
/// (not UTF-8 once decoded).
pub(super) struct Segment<T = String>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Segment<T> {
    type Rejection = Reject;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Reject> {
        let path = Path::<T>::from_request_parts(parts, state).await;
        path.map(|p| Self(p.0)).map_err(|e| Reject::bad("path", e.body_text()))
    }
}

/// A request's body, or its refusal (413 for one too large) naming `body`.
pub(super) fn body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Reject> {
    body.map_err(|e| Reject::new(e.status().as_u16(), "body", e.body_text()))
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
        Err(Reject {
            status: 500,
            error: format!("the read failed: {e}"),
            field: None,
            retry_after_s: None,
        })
    })
}
