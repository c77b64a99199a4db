//! The routes and what they share: the route table (the router is built from it, and
//! `serve::route_table` lists it), the app state, the JSON error response, and the mapping of
//! engine errors onto HTTP statuses.
//!
//! The route table is in the module docs of `serve`.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::access::{self, Access};
use super::params::Reject;
use super::{checkpoints, controls, messages, ops, pages, queues, results, sse, start, threads};
use crate::api::engine::Engine;
use crate::debug::Redactor;
use crate::error::Error;
use crate::limits::SERVE_BODY_BYTES_MAX;

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
}

/// A router and the list of its routes as it is built: the list is what [`super::route_table`]
/// answers, so it cannot leave out a route the router has.
pub(super) struct Table {
    router: Router<App>,
    routes: Vec<super::Route>,
}

impl Table {
    pub fn new() -> Self {
        Self { router: Router::new(), routes: Vec::new() }
    }

    /// Adds `route` at `path`, listed as `method` (a path may have several methods).
    pub fn at(
        mut self,
        method: &'static str,
        path: &'static str,
        route: MethodRouter<App>,
    ) -> Self {
        self.router = self.router.route(path, route);
        self.routes.push(super::Route { method, path });
        self
    }

    /// `GET path`.
    pub fn get<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: axum::handler::Handler<T, App>,
        T: 'static,
    {
        self.at("GET", path, get(handler))
    }

    /// The routes added, in order.
    pub fn into_routes(self) -> Vec<super::Route> {
        self.routes
    }
}

/// Every route of the endpoint: the JSON API's and the web view's.
pub(super) fn table() -> Table {
    let t = Table::new()
        .get("/metrics", threads::prometheus)
        .get("/api/health", threads::health)
        .get("/api/verify", threads::verify)
        .get("/api/metrics", threads::metrics)
        .get("/api/threads", threads::list)
        .get("/api/threads/{id}", threads::show)
        .at("DELETE", "/api/threads/{id}", delete(results::delete))
        .get("/api/threads/{id}/result", results::result)
        .get("/api/threads/{id}/events", sse::events)
        .get("/api/threads/{id}/state", threads::state)
        .get("/api/threads/{id}/checkpoints", threads::checkpoints)
        .get("/api/threads/{id}/bundle", ops::bundle)
        .get("/api/threads/{id}/replay", ops::replay)
        .get("/api/resumable", ops::resumable)
        .get("/api/workflows/{id}/graph", threads::graph)
        .get("/api/trace/{id}", threads::trace)
        .get("/api/trace", messages::trace)
        .get("/api/queues", queues::list)
        .get("/api/checkpoints", checkpoints::list)
        .get("/api/checkpoints/{id}", checkpoints::show)
        .at("POST", "/api/threads/{id}/{control}", post(controls::control))
        .at("POST", "/api/workflows/{id}/threads", post(start::start));
    pages::routes(t)
}

/// The routes of [`table`], the fallbacks and the access layer ([`access::guard`]: over every
/// route and fallback alike), over `app`.
pub(super) fn router(app: App, access: Arc<Access>) -> Router {
    table()
        .router
        .fallback(|| async {
            Reject { status: 404, error: "no such route".into(), field: Some("path".into()) }
        })
        .method_not_allowed_fallback(|| async {
            let error = "reads are GET, controls POST".into();
            Reject { status: 405, error, field: Some("method".into()) }
        })
        .layer(DefaultBodyLimit::max(SERVE_BODY_BYTES_MAX))
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
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
