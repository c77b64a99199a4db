//! Batch operations by filter from outside (`docs/batches.md`): `POST /api/batches` (a control:
//! the access layer, `super::access`, checks the token before) makes a batch, or with
//! `dry_run` counts what it would apply to; `GET /api/batches/{id}` answers its progress.
//!
//! The body is `{"op", "filter", "reason"?, "name"?, "value"?, "to_version"?, "build"?,
//! "unpin"?, "to"?, "id"?, "dry_run"?}`: `op` one of `cancel` (with `reason`, "batch" when absent),
//! `pause`, `resume`, `signal` (with `name` and `value`), `delete`, `migrate` (with
//! `to_version`), `repin` (with `build`, or `"unpin": true`), `reset` (with `to`: `start`, the
//! default, `checkpoint` or `seq:N`); `filter`
//! `{workflow?, status?, labels?, version?, created_from_ms?, created_to_ms?, ids?}` (`labels`
//! an object of strings, `ids` an array of thread ids); `id` makes the call idempotent (a batch of that id answers as it stands).
//! A new batch is a 201, an existing one or a dry run a 200; a bad body is a 400 naming its
//! field.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::app::{App, Segment, reject};
use super::controls::parse;
use super::params::Reject;
use super::wire::BatchAnswer;
use cairn::{BatchFilter, BatchOp};

/// The body of `POST /api/batches`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BatchBody {
    /// `cancel`, `pause`, `resume`, `signal`, `delete`, `migrate`, `repin` or `reset`.
    op: String,
    /// Which threads (every part given must match).
    #[serde(default)]
    #[schema(inline)]
    filter: FilterBody,
    /// A cancel's reason ("batch" when absent).
    reason: Option<String>,
    /// A signal's name.
    name: Option<String>,
    /// A signal's value (`null` when absent).
    value: Option<Value>,
    /// A migration's target version.
    to_version: Option<u32>,
    /// A repin's worker build.
    build: Option<String>,
    /// A repin that unpins (instead of `build`).
    #[serde(default)]
    unpin: bool,
    /// A reset's point: `start` (when absent), `checkpoint` or `seq:N`.
    to: Option<String>,
    /// The batch's id: a batch of that id answers as it stands (an idempotent call).
    id: Option<String>,
    /// Count the matching threads, apply nothing.
    #[serde(default)]
    dry_run: bool,
}

/// The filter of a batch body (`cairn::BatchFilter`).
#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct FilterBody {
    /// The workflow's id.
    workflow: Option<String>,
    /// The status (`running`, `paused`, `waiting_input`, ...).
    status: Option<String>,
    /// Labels, each key set to its value.
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// The workflow version.
    version: Option<u32>,
    /// Created at or after this time (ms since the epoch).
    created_from_ms: Option<u64>,
    /// Created before this time.
    created_to_ms: Option<u64>,
    /// These threads only, by id (at most 1,000; an id of no thread is skipped, counted so).
    #[serde(default)]
    ids: Vec<String>,
}

impl BatchBody {
    /// The engine's operation and filter, or a 400 naming the field that is wrong.
    fn op_and_filter(&self) -> Result<(BatchOp, BatchFilter), Reject> {
        let op = match self.op.as_str() {
            "cancel" => BatchOp::Cancel { reason: self.reason.clone().unwrap_or("batch".into()) },
            "pause" => BatchOp::Pause,
            "resume" => BatchOp::Resume,
            "delete" => BatchOp::Delete,
            "signal" => {
                let name = self
                    .name
                    .clone()
                    .ok_or_else(|| Reject::bad("name", "a signal needs a name"))?;
                BatchOp::Signal { name, value: self.value.clone().unwrap_or(Value::Null) }
            }
            "migrate" => {
                let to = self
                    .to_version
                    .ok_or_else(|| Reject::bad("to_version", "a migration needs to_version"))?;
                BatchOp::Migrate { to_version: to }
            }
            "repin" => match (&self.build, self.unpin) {
                (Some(_), true) => {
                    return Err(Reject::bad("unpin", "give build or unpin, not both"));
                }
                (Some(build), false) => BatchOp::Repin { build: Some(build.clone()) },
                (None, true) => BatchOp::Repin { build: None },
                (None, false) => {
                    return Err(Reject::bad("build", "a repin needs build (or unpin)"));
                }
            },
            "reset" => {
                let to = self.to.as_deref().unwrap_or("start");
                let point =
                    to.parse().map_err(|e: cairn::Error| Reject::bad("to", e.to_string()))?;
                BatchOp::Reset { point }
            }
            other => {
                let why = format!(
                    "no operation {other:?}: cancel, pause, resume, signal, delete, migrate, \
                     repin, reset"
                );
                return Err(Reject::bad("op", why));
            }
        };
        let f = &self.filter;
        let status = f
            .status
            .as_deref()
            .map(|s| {
                s.parse().map_err(|_| Reject::bad("filter.status", format!("no status {s:?}")))
            })
            .transpose()?;
        let filter = BatchFilter {
            workflow: f.workflow.clone(),
            status,
            labels: f.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            version: f.version,
            created_from_ms: f.created_from_ms,
            created_to_ms: f.created_to_ms,
            ids: f.ids.clone(),
        };
        Ok((op, filter))
    }
}

/// `POST /api/batches`.
pub(super) async fn create(
    State(app): State<App>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Reject> {
    let body = super::app::body(body)?;
    let body = parse::<BatchBody>(&body)?;
    let (op, filter) = body.op_and_filter()?;
    let engine = &app.engine;
    if body.dry_run {
        let count = engine.batch_count(&filter).await.map_err(|e| reject(e, "filter"))?;
        return Ok(Json(BatchAnswer::dry_run(&op, count)).into_response());
    }
    let existed = match &body.id {
        Some(id) => {
            let thread =
                cairn::ThreadId::new(id.as_str()).map_err(|e| Reject::bad("id", e.to_string()))?;
            engine.store().thread(&thread).await.map_err(|e| reject(e.into(), "id"))?.is_some()
        }
        None => false,
    };
    let made = match &body.id {
        Some(id) => engine.batch_as(id, op, filter).await,
        None => engine.batch(op, filter).await,
    };
    let info = made.map_err(|e| reject(e, "body"))?;
    let status = if existed { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(BatchAnswer::of(&info))).into_response())
}

/// `GET /api/batches/{id}`.
pub(super) async fn show(
    State(app): State<App>,
    Segment(id): Segment,
) -> Result<Json<BatchAnswer>, Reject> {
    let info = app.engine.batch_info(&id).await.map_err(|e| match e {
        cairn::Error::UnknownThread(_) | cairn::Error::Invalid(_) => {
            Reject::not_found("id", format!("no batch {id}"))
        }
        other => reject(other, "id"),
    })?;
    Ok(Json(BatchAnswer::of(&info)))
}
