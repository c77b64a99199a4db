//! The local HTTP endpoint an engine serves (feature `http`): JSON reads of threads, events,
//! state, checkpoints, graphs, messages, metrics and health, Server-Sent Events that follow a
//! thread's log, and the controls (pause, resume, cancel, input, fork) behind a bearer token.
//!
//! Start it with [`ServingBuilder`] (with the engine it opens) or [`serve`] on an open engine; `cairn serve --db FILE`
//! does the latter. It owns three things and these invariants:
//! - the listener: loopback unless [`ServeOptions::public`] says otherwise (a non-loopback
//!   address is refused without it);
//! - the token (`<db>.token`, mode 0600, made at start, see [`token`]): every control needs it,
//!   and on a public endpoint every read too;
//! - the access layer (`access`), one `from_fn` middleware over every route and fallback: it
//!   refuses a `Host` that is not the served address or an allowed name (421: no DNS
//!   rebinding), a control from another origin (403), a request without the token that needs it
//!   (401), and on a public endpoint redacts every answer as `redact=1` does;
//! - the announcement (`<db>.endpoint`, see [`discovery`]): written once the listener is bound,
//!   removed when the [`Server`] is shut down or dropped.
//!
//! The CLI's read commands read through this endpoint when one is announced for their file
//! (the CLI calls the endpoint, never the other way), so every answer is what the command
//! prints with `--json`.
//!
//! Every request is bounded ([`crate::limits::SERVE_PAGE_MAX`] items a page,
//! [`crate::limits::SERVE_BODY_BYTES_MAX`] bytes a body); a bad one gets a 4xx with
//! `{"error": ..., "field": ...}` naming the parameter, path segment or body field, never a panic.
//! Routes:
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/api/openapi.json` | this table as an OpenAPI 3.1 document, built from the route table and the handlers' parameter and body types (see `openapi`) |
//! | GET | `/api/health?watchdog_ms=` | the health report (a running thread with no step past the watchdog is stuck) |
//! | GET | `/api/versions` | the drain view: per workflow version, its unfinished threads by status, and whether this engine has it registered; per worker build (`builds`, the `cairn.build` pin) the same counts (`Engine::drain`) |
//! | GET | `/metrics` | Prometheus text (`text/plain; version=0.0.4`; feature `prometheus`, with a handle; else 404) |
//! | GET | `/api/metrics` | Prometheus text (feature `prometheus`, with a handle) or the health report |
//! | GET | `/api/threads?status=&workflow=&label=K=V,K2=V2&limit=&after=&offset=` | a page of threads in the store's id order; `next` is the `after` of the next page (`null`: none follows) |
//! | GET | `/api/threads/{id}` | the thread as `cairn show` reports it |
//! | GET | `/api/threads/{id}/events?since=&kind=&limit=&redact=1` | events after a seq, with `next_since`, the thread's `status` (read first) and `first_seq`; `follow=1`: SSE until the thread ends |
//! | GET | `/api/threads/{id}/stream?since=&redact=1` | the thread's live stream as SSE (see `stream`): `chunk` (ephemeral), `gap`, `closed` and `ended` (durable, their seq as the SSE id, so an `EventSource` resumes with `Last-Event-ID`) |
//! | GET | `/api/threads/{id}/state?at=SEQ`, `?at_time=MS` or `?diff=A,B` (`&redact=1`) | state after a seq or at a time, or a diff; `?at_time=MS&session=1`: `{thread, at_time, threads}`, the session as it stood then (see `session`) |
//! | GET | `/api/threads/{id}/checkpoints` | the thread's checkpoints |
//! | GET | `/api/threads/{id}/result?wait_ms=` | `{thread, finished, status, output, error}`; an unfinished thread is waited for up to `wait_ms` (at most [`crate::limits::RESULT_WAIT_MS_MAX`]): a long poll |
//! | DELETE | `/api/threads/{id}?force=` | deletes the thread whole (a control); 409 for an unfinished one without `force=true` |
//! | GET | `/api/workflows/{id}/graph?format=dot\|mermaid&version=` | a compiled-in workflow's graph |
//! | GET | `/api/trace/{correlation_id}` | messages carrying the id, across threads |
//! | GET | `/api/trace?thread=&correlation_id=&between=&from_ms=&to_ms=&chain=` | messages as `cairn trace` finds them (`thread` repeatable, `between` twice); `&chain=ID&states=1`: `{chain, steps}`, each message with its thread's state after it (see `session`) |
//! | GET | `/api/queues` | every queue: limits, running and waiting threads in all and per key, admissions in the rate window, as `cairn queue list --json`, with the engine clock's `now_ms` |
//! | GET | `/api/checkpoints?thread=&workflow=&kind=&tag=A,B&limit=&offset=` | a page of checkpoints, newest first |
//! | GET | `/api/checkpoints/{id}` (`?redact=1`) | one checkpoint with its snapshot, as `cairn checkpoint show` |
//! | GET | `/api/threads/{id}/bundle?redact_key=&secret=&meta=&checkpoints=&last_events=&max_payload_bytes=` | the thread's debug bundle from the live store, as `cairn bundle export` writes it (see `ops`) |
//! | GET | `/api/threads/{id}/replay` | the thread replayed against the engine's code, as `cairn replay --json` |
//! | GET | `/api/threads/{id}/published` | every key the thread published (`ctx.set_event`) with its latest value (see `promises`) |
//! | GET | `/api/threads/{id}/published/{key}?wait_ms=` | one key: `state` `set` (with `value`), `pending` or `never_set`; a key not yet published is waited for up to `wait_ms`: a long poll |
//! | GET | `/api/threads/{id}/promises` | every promise the thread created (`ctx.promise`): `state` `open`, or `completed` with its `value` or `error` and the `signal` that carries it |
//! | POST | `/api/promises/{id}` | completes a promise (a control): body `{"value"}` or `{"error"}`; the same completion again 200 `duplicate: true`, another 409, an unknown id 404 |
//! | GET | `/api/resumable?max_age_ms=` | threads the engine could resume and does not drive, as `cairn resumable --json` |
//! | POST | `/api/threads/{id}/pause\|resume\|cancel\|input\|signal\|fork\|repin\|reset` | controls (`reset`: `{"to", "key"?}`, answers the new thread, see `reset`) |
//! | POST, DELETE | `/api/threads/{id}/checkpoints/periodic` | asks for a periodic checkpoint (a control): body `{interval_ms, meta?}`; `DELETE` cancels it (see `checkpoint_requests`) |
//! | POST | `/api/threads/{id}/checkpoints/at-node` | asks for a checkpoint when a node completes next (a control): body `{node, meta?}` |
//! | POST | `/api/threads/{id}/updates/{name}?wait_ms=` | applies an update (a control): body `{args?, id?, start?}`; `{thread, id, reply, seq, duplicate, created?}` once durable (see `updates`) |
//! | GET | `/api/schedules` | every schedule with its next ticks and last runs (see `catalog`) |
//! | POST | `/api/schedules/{name}/pause\|resume\|trigger` | schedule controls |
//! | POST | `/api/schedules/{name}/backfill` | one run per tick of a range, each once (a control): body `{from_ms, to_ms}` |
//! | DELETE | `/api/schedules/{name}` | deletes a schedule (a control) |
//! | POST | `/api/workflows/{id}/threads?wait_ms=` | starts a thread (a control): body `{input, id?, labels?, version?, queue?, key?, priority?, dedup?}`; 201 new, 200 existing, 429 with `Retry-After` over the rate of a queue that drops (`docs/queues.md`); `{thread, created, link}`, with `wait_ms` also its result (see `start`) |
//! | POST | `/api/events` | emits an event (a control): body `{name, id, payload}`; starts each workflow subscribed to `name` once per `id`; `{threads: [{workflow, thread, created, link}]}`, none without subscribers (see `events`) |
//! | POST | `/api/batches` | applies an operation to every thread a filter matches, as a durable job (a control): body `{op, filter, reason?, name?, value?, to_version?, id?, dry_run?}`; 201 new, 200 existing or a dry run; the batch's progress (see `batches`) |
//! | GET | `/api/batches/{id}` | a batch's progress: `{id, status, op, total, done, applied, skipped, skips, finished}` |
//!
//! Every `POST` and `DELETE` (a control) needs `Authorization: Bearer <token>`; on a public
//! endpoint every `GET` does too, but the web view's pages and assets. [`route_table`] lists
//! the routes.
//!
//! The web view's pages (`/ui/threads`, `/ui/threads/{id}`, `/ui/messages/{id}`, `/ui/queues`,
//! `/ui/workflows`, `/ui/schedules`,
//! see `pages`) and the reads they need beyond these ([`view`]) are served at the same address.

mod access;
mod app;
pub mod discovery;
pub mod params;
pub mod params_ops;
pub mod params_view;
pub mod query;
pub mod token;

mod batches;
mod catalog;
mod checkpoint_requests;
mod checkpoints;
mod controls;
mod events;
mod graph_svg;
mod messages;
mod openapi;
mod ops;
mod pages;
mod promises;
mod queues;
mod reset;
pub(crate) mod results;
mod routes;
mod session;
mod sse;
mod start;
mod stream;
mod threads;
mod updates;
pub mod view;
pub mod wire;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::debug::{Redaction, Redactor};
use cairn::Engine;
use cairn::EngineBuilder;
use cairn::error::Error;

pub use discovery::{Endpoint, endpoint_path};
pub use token::token_path;

/// How an endpoint is served.
#[derive(Clone)]
pub struct ServeOptions {
    /// Where to listen (port 0: any free port; [`Server::addr`] says which).
    pub addr: SocketAddr,
    /// Allow an address other than loopback. A public endpoint needs the token for reads as for
    /// controls (but the web view's static pages), and redacts every answer as `redact=1` does.
    pub public: bool,
    /// The rules `?redact=1` applies to state and events (default: the bundle defaults).
    pub redaction: Redaction,
    /// Names besides the served address a request's `Host` may carry (`host` or `host:port`;
    /// without a port, the served one): the names the endpoint is reached by, behind a proxy or
    /// on a public address. Any other is refused (421), which stops a web page from reading a
    /// loopback endpoint through DNS rebinding.
    pub allow_hosts: Vec<String>,
    /// What `/metrics` and `/api/metrics` render: the Prometheus text of this handle (without
    /// one, `/metrics` is a 404 and `/api/metrics` the health report as JSON).
    #[cfg(feature = "prometheus")]
    pub prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

impl ServeOptions {
    /// Loopback-only options at `addr`, default redaction.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            public: false,
            redaction: Redaction::default(),
            allow_hosts: Vec::new(),
            #[cfg(feature = "prometheus")]
            prometheus: None,
        }
    }
}

/// A running endpoint. Dropping it (or [`Server::shutdown`]) stops it and removes the endpoint
/// file; the engine keeps running.
#[must_use = "dropping the Server stops the endpoint"]
pub struct Server {
    addr: SocketAddr,
    token: String,
    files: Option<(PathBuf, PathBuf)>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bearer token controls need (and a public endpoint's reads).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The file holding the token (`<db>.token`), when the engine is on a file.
    pub fn token_file(&self) -> Option<&Path> {
        self.files.as_ref().map(|(t, _)| t.as_path())
    }

    /// The endpoint announcement (`<db>.endpoint`), when the engine is on a file.
    pub fn endpoint_file(&self) -> Option<&Path> {
        self.files.as_ref().map(|(_, e)| e.as_path())
    }

    /// Stops accepting requests, lets those in flight finish (a followed log ends), and removes
    /// the endpoint file.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Waits until the endpoint stops (it never stops by itself unless its listener fails).
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some((_, endpoint)) = &self.files {
            discovery::withdraw(endpoint);
        }
    }
}

/// Serves `engine` as `options` say; `db` is the database file beside which the token and the
/// endpoint announcement are written (`None` for a store without a file: the token is then only
/// in [`Server::token`]).
///
/// # Errors
/// [`Error::Invalid`] for a non-loopback address without [`ServeOptions::public`], an entry of
/// [`ServeOptions::allow_hosts`] that is no host name, an address that cannot be bound, or a
/// token or endpoint file that cannot be written.
///
/// # Examples
/// ```no_run
/// # async fn run() -> Result<(), cairn::Error> {
/// use cairn_tools::serve::{ServeOptions, serve};
/// use std::path::Path;
/// let engine = cairn::Engine::builder("cairn.db").open().await?;
/// let options = ServeOptions::new(([127, 0, 0, 1], 0).into());
/// let server = serve(&engine, Some(Path::new("cairn.db")), options).await?;
/// tracing::info!(addr = %server.addr(), "serving");
/// # Ok(()) }
/// ```
pub async fn serve(
    engine: &Engine,
    db: Option<&Path>,
    options: ServeOptions,
) -> Result<Server, Error> {
    check_addr(&options)?;
    let redactor = Arc::new(Redactor::new(&options.redaction)?);
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| Error::Invalid(format!("cannot listen on {}: {e}", options.addr)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Invalid(format!("the listener has no address: {e}")))?;
    let token = token::generate()?;
    let access = access::Access::new(
        addr,
        Arc::from(token.as_str()),
        options.public,
        &options.allow_hosts,
        redactor.clone(),
    )?;
    let files = match db {
        Some(db) => {
            let (token_file, endpoint_file) = (token_path(db), endpoint_path(db));
            token::write(&token_file, &token)?;
            let endpoint =
                Endpoint { address: addr, pid: std::process::id(), token_file: token_file.clone() };
            discovery::announce(&endpoint_file, &endpoint)?;
            Some((token_file, endpoint_file))
        }
        None => None,
    };
    let state = app::App {
        engine: engine.clone(),
        redactor: redactor.clone(),
        public: options.public,
        stop: CancellationToken::new(),
        #[cfg(feature = "prometheus")]
        prometheus: options.prometheus.clone(),
    };
    let stop = state.stop.clone();
    let router = routes::router(state, Arc::new(access));
    let until = stop.clone();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(until.clone().cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the HTTP endpoint stopped");
        }
        until.cancel();
    });
    Ok(Server { addr, token, files, stop, task: Some(task) })
}

/// A route of the endpoint: its method and its path pattern (`{id}` a segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// `GET`, `POST` or `DELETE`.
    pub method: &'static str,
    /// The path, with `{name}` for a segment.
    pub path: &'static str,
}

/// Every route the endpoint serves, read from the table its router is built from: a test (or a
/// proxy's configuration) can walk them all. Every route but a `GET` is a control and needs the
/// token.
///
/// # Examples
/// ```
/// let routes = cairn_tools::serve::route_table();
/// assert!(routes.iter().any(|r| r.method == "POST" && r.path == "/api/threads/{id}/{control}"));
/// assert!(routes.iter().any(|r| r.method == "GET" && r.path == "/metrics"));
/// ```
pub fn route_table() -> Vec<Route> {
    routes::table().into_routes()
}

/// Refuses a non-loopback address unless the options allow it.
fn check_addr(options: &ServeOptions) -> Result<(), Error> {
    if !options.addr.ip().is_loopback() && !options.public {
        return Err(Error::Invalid(format!(
            "{} is not a loopback address: serving it lets anyone who reaches it read every \
             thread (allow it with `public`, `--public`)",
            options.addr
        )));
    }
    Ok(())
}

/// An engine builder that also serves the endpoint once the engine is open: an application's
/// engine with its endpoint.
///
/// # Examples
/// ```no_run
/// # async fn run() -> Result<(), cairn::Error> {
/// let builder = cairn::Engine::builder("cairn.db");
/// let (engine, server) =
///     cairn_tools::serve::ServingBuilder::new(builder, ([127, 0, 0, 1], 0).into()).open().await?;
/// tracing::info!(addr = %server.addr(), token_file = ?server.token_file(), "serving");
/// # Ok(()) }
/// ```
#[must_use]
pub struct ServingBuilder {
    builder: EngineBuilder,
    options: ServeOptions,
}

/// [`ServingBuilder::new`] as a method of the engine's builder: `builder.serve(addr)`.
///
/// # Examples
/// ```no_run
/// use cairn_tools::serve::Serve as _;
/// # async fn run() -> Result<(), cairn::Error> {
/// let (engine, server) =
///     cairn::Engine::builder("cairn.db").serve(([127, 0, 0, 1], 0).into()).open().await?;
/// # Ok(()) }
/// ```
pub trait Serve {
    /// The builder that opens this engine and serves its endpoint at `addr`.
    fn serve(self, addr: SocketAddr) -> ServingBuilder;
}

impl Serve for EngineBuilder {
    fn serve(self, addr: SocketAddr) -> ServingBuilder {
        ServingBuilder::new(self, addr)
    }
}

impl ServingBuilder {
    /// Serves the HTTP endpoint at `addr` (loopback; port 0 for any free port) once the engine
    /// `builder` builds is open: [`ServingBuilder::open`] returns the engine and its [`Server`].
    pub fn new(builder: EngineBuilder, addr: SocketAddr) -> ServingBuilder {
        ServingBuilder { builder, options: ServeOptions::new(addr) }
    }

    /// Replaces the serve options (address, public, redaction, allowed hosts, Prometheus
    /// handle).
    pub fn options(mut self, options: ServeOptions) -> Self {
        self.options = options;
        self
    }

    /// Serves a non-loopback address too ([`ServeOptions::public`]): reads need the token and
    /// every answer is redacted.
    pub fn public(mut self) -> Self {
        self.options.public = true;
        self
    }

    /// Accepts requests whose `Host` is `host` (`name` or `name:port`) besides the served
    /// address ([`ServeOptions::allow_hosts`]).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let builder = cairn::Engine::builder("cairn.db");
    /// let (engine, server) = cairn_tools::serve::ServingBuilder::new(builder, ([127, 0, 0, 1], 8080).into())
    ///     .allow_host("cairn.internal")
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.options.allow_hosts.push(host.into());
        self
    }

    /// Opens the engine (as [`EngineBuilder::open`]) and starts its endpoint. An address refused
    /// is refused before the engine opens; an endpoint that fails to start shuts the engine down.
    ///
    /// # Errors
    /// As [`EngineBuilder::open`] and [`serve`].
    pub async fn open(self) -> Result<(Engine, Server), Error> {
        // Checked before the engine opens: a refused address leaves nothing running.
        check_addr(&self.options)?;
        let db = self.builder.file_path().map(Path::to_path_buf);
        let engine = self.builder.open().await?;
        match serve(&engine, db.as_deref(), self.options).await {
            Ok(server) => Ok((engine, server)),
            Err(e) => {
                engine.shutdown().await;
                Err(e)
            }
        }
    }
}
