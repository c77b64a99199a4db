//! The routes: the route table (the router is built from it, and `serve::route_table` lists it)
//! and the router over it.
//!
//! The route table is in the module docs of `serve`.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{MethodRouter, delete, get, post};

use super::access::{self, Access};
use super::app::App;
use super::params::Reject;
use super::{
    batches, checkpoint_requests, checkpoints, controls, events, messages, openapi, ops, pages,
    promises, queues, results, sse, start, stream, threads, updates,
};
use crate::limits::SERVE_BODY_BYTES_MAX;

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

/// The path of a thread's periodic checkpoint request (`POST` asks, `DELETE` cancels).
const PERIODIC: &str = "/api/threads/{id}/checkpoints/periodic";

/// Every route of the endpoint: the JSON API's and the web view's.
pub(super) fn table() -> Table {
    let t = Table::new()
        .get("/metrics", threads::prometheus)
        .get("/api/openapi.json", openapi::openapi)
        .get("/api/health", threads::health)
        .get("/api/versions", threads::versions)
        .get("/api/verify", threads::verify)
        .get("/api/metrics", threads::metrics)
        .get("/api/threads", threads::list)
        .get("/api/threads/{id}", threads::show)
        .at("DELETE", "/api/threads/{id}", delete(results::delete))
        .get("/api/threads/{id}/result", results::result)
        .get("/api/threads/{id}/events", sse::events)
        .get("/api/threads/{id}/stream", stream::stream)
        .get("/api/threads/{id}/state", threads::state)
        .get("/api/threads/{id}/checkpoints", threads::checkpoints)
        .get("/api/threads/{id}/bundle", ops::bundle)
        .get("/api/threads/{id}/replay", ops::replay)
        .get("/api/threads/{id}/published", promises::all)
        .get("/api/threads/{id}/published/{key}", promises::one)
        .get("/api/threads/{id}/promises", promises::list)
        .at("POST", "/api/promises/{id}", post(promises::complete))
        .get("/api/resumable", ops::resumable)
        .get("/api/workflows/{id}/graph", threads::graph)
        .get("/api/trace/{id}", threads::trace)
        .get("/api/trace", messages::trace)
        .get("/api/queues", queues::list)
        .get("/api/checkpoints", checkpoints::list)
        .get("/api/checkpoints/{id}", checkpoints::show)
        .at("POST", PERIODIC, post(checkpoint_requests::periodic))
        .at("DELETE", PERIODIC, delete(checkpoint_requests::cancel_periodic))
        .at("POST", "/api/threads/{id}/checkpoints/at-node", post(checkpoint_requests::at_node))
        .at("POST", "/api/threads/{id}/{control}", post(controls::control))
        .at("POST", "/api/threads/{id}/updates/{name}", post(updates::update))
        .at("POST", "/api/workflows/{id}/threads", post(start::start))
        .at("POST", "/api/events", post(events::emit))
        .at("POST", "/api/batches", post(batches::create))
        .get("/api/batches/{id}", batches::show);
    pages::routes(t)
}

/// The routes of [`table`], the fallbacks and the access layer ([`access::guard`]: over every
/// route and fallback alike), over `app`.
pub(super) fn router(app: App, access: Arc<Access>) -> Router {
    table()
        .router
        .fallback(|| async { Reject::not_found("path", "no such route") })
        .method_not_allowed_fallback(|| async {
            Reject::new(405, "method", "reads are GET, controls POST")
        })
        .layer(DefaultBodyLimit::max(SERVE_BODY_BYTES_MAX))
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
        .with_state(app)
}
