//! Starting a thread from outside: `POST /api/workflows/{id}/threads[?wait_ms=N]`, a control
//! (the access layer, `super::access`, checks the token before).
//!
//! The body is JSON: `input` (required: the thread's initial state), and optionally `id` (an
//! idempotent start: an id that exists answers its thread, 200, where a new one is 201),
//! `labels` (an object of strings), `version`, `queue` with `key`, `priority` (0 to 255) and
//! `dedup` (a dedup key held answers its holder, 200), `deadline_ms` (the thread times out this
//! long after its creation), `budgets` (`max_steps`, `max_tool_calls`, `max_tokens`,
//! `max_cost_micros`, `max_wall_ms`, `warn_fraction`: replacing the workflow's), `permissions`,
//! and a delayed start, `start_at_ms` (engine clock) or `delay_ms` (from now), not with a queue:
//! the thread is created at once and runs from that time. Everything `StartOptions` takes.
//!
//! The answer is `{"thread", "created", "link"}` with a `Location` header of the thread's
//! link. With `wait_ms`, the call also waits for the thread's result up to that long (at most
//! [`crate::limits::RESULT_WAIT_MS_MAX`]) and adds what `GET /api/threads/{id}/result` answers
//! (`finished`, `status`, `output`, `error`): a start and its outcome in one request.
//!
//! An unknown workflow is a 404 naming `workflow`, an unknown queue a 404 naming `queue`; a bad
//! body a 400 naming its field (`input` for an input that is not a state of the workflow).

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::app::{App, Params, Segment, reject};
use super::controls::parse;
use super::params::{Reject, WaitParams};
use super::results::answer;
use super::wire::Started;
use cairn::config::StartOptions;
use cairn::error::Error;

/// The body of a start.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StartBody {
    /// The thread's initial state.
    input: Value,
    /// The thread's id (an idempotent start: an existing id answers its thread).
    id: Option<String>,
    /// Labels.
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// The workflow's version (the newest compiled in when none).
    version: Option<u32>,
    /// The queue to wait on.
    queue: Option<String>,
    /// The queue's key (with `queue`).
    key: Option<String>,
    /// The priority on the queue, 0 to 255 (with `queue`).
    priority: Option<u8>,
    /// A dedup key (with `queue`): a key held answers its holder.
    dedup: Option<String>,
    /// The thread times out this long after its creation (ms): it ends `timed_out`.
    deadline_ms: Option<u64>,
    /// Budgets replacing the workflow's: each limit given, the others unlimited.
    #[schema(inline)]
    budgets: Option<StartBudgets>,
    /// Permissions replacing the workflow's for the thread's tool calls.
    permissions: Option<std::collections::BTreeSet<String>>,
    /// A delayed start (not with `queue` or `delay_ms`): the thread is created at once and
    /// runs from this time (engine clock, ms since the epoch).
    start_at_ms: Option<u64>,
    /// A delayed start this long from now (ms), as `start_at_ms`.
    delay_ms: Option<u64>,
}

/// The budgets of a start body (`cairn_dsl::Budgets`, every field optional).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct StartBudgets {
    /// Steps.
    max_steps: Option<u64>,
    /// Tool calls.
    max_tool_calls: Option<u64>,
    /// Model tokens.
    max_tokens: Option<u64>,
    /// Cost in millionths of the currency unit.
    max_cost_micros: Option<u64>,
    /// Wall-clock duration of the thread (ms).
    max_wall_ms: Option<u64>,
    /// Fraction of a limit at which a warning is recorded (0 < f <= 1; 0.8 when absent).
    warn_fraction: Option<f64>,
}

impl StartBudgets {
    /// The engine's budgets, or a 400 naming `budgets` for a bad warning fraction.
    fn budgets(self) -> Result<cairn_dsl::Budgets, Reject> {
        let mut b = cairn_dsl::Budgets {
            max_steps: self.max_steps,
            max_tool_calls: self.max_tool_calls,
            max_tokens: self.max_tokens,
            max_cost_micros: self.max_cost_micros,
            max_wall_ms: self.max_wall_ms,
            ..cairn_dsl::Budgets::default()
        };
        if let Some(f) = self.warn_fraction {
            if !(f > 0.0 && f <= 1.0) {
                let why = format!("budgets.warn_fraction is {f}; it must be in (0, 1]");
                return Err(Reject::bad("budgets", why));
            }
            b.warn_fraction = f;
        }
        Ok(b)
    }
}

impl StartBody {
    /// The engine's options for this body (`now_ms`: the engine's clock, for `delay_ms`), or a
    /// 400 naming the field that cannot be honoured.
    fn options(self, now_ms: u64) -> Result<(Value, StartOptions), Reject> {
        let start_at_ms = match (self.start_at_ms, self.delay_ms) {
            (Some(_), Some(_)) => {
                return Err(Reject::bad("delay_ms", "give start_at_ms or delay_ms, not both"));
            }
            (at, delay) => at.or(delay.map(|d| now_ms.saturating_add(d))),
        };
        if start_at_ms.is_some() && self.queue.is_some() {
            let field = if self.delay_ms.is_some() { "delay_ms" } else { "start_at_ms" };
            return Err(Reject::bad(field, "a delayed start cannot wait on a queue as well"));
        }
        let budgets = self.budgets.map(StartBudgets::budgets).transpose()?;
        if self.queue.is_none() {
            let queued_only = [
                ("key", self.key.is_some()),
                ("priority", self.priority.is_some()),
                ("dedup", self.dedup.is_some()),
            ];
            if let Some((field, _)) = queued_only.iter().find(|(_, given)| *given) {
                return Err(Reject::bad(field, format!("{field} needs a queue (give \"queue\")")));
            }
        }
        if let Some(id) = &self.id {
            cairn_storage::ThreadId::new(id.as_str())
                .map_err(|e| Reject::bad("id", e.to_string()))?;
        }
        let mut options = StartOptions {
            thread_id: self.id,
            labels: self.labels,
            version: self.version,
            deadline_ms: self.deadline_ms,
            budgets,
            permissions: self.permissions,
            start_at_ms,
            ..StartOptions::default()
        };
        if let Some(queue) = self.queue {
            options = options.on_queue(queue).priority(self.priority.unwrap_or(0));
            options.queue_key = self.key;
            options.dedup_key = self.dedup;
        }
        Ok((self.input, options))
    }
}

/// `POST /api/workflows/{id}/threads`.
pub(super) async fn start(
    State(app): State<App>,
    Params(p): Params<WaitParams>,
    Segment(workflow): Segment,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Reject> {
    let body = super::app::body(body)?;
    let now_ms = app.engine.clock().now_ms();
    let (input, options) = parse::<StartBody>(&body)?.options(now_ms)?;
    let engine = &app.engine;
    let wf =
        cairn::admin::latest_workflow(engine, &workflow, options.version).map_err(|e| match e {
            Error::UnknownWorkflow { .. } => Reject::not_found("workflow", e.to_string()),
            other => reject(other, "workflow"),
        })?;
    // Checked here, not left to the write, so that the 400 names the field.
    wf.state_from_json(&input).map_err(|e| {
        Reject::bad("input", format!("not a valid state of {} v{}: {e}", wf.id(), wf.version()))
    })?;
    let creation = cairn::admin::start_created(engine, &workflow, input, options).await.map_err(
        |e| match e {
            Error::Storage(cairn_storage::Error::UnknownQueue(_)) => {
                Reject::not_found("queue", e.to_string())
            }
            other => reject(other, "body"),
        },
    )?;
    let thread = creation.thread.id().as_str().to_owned();
    let link = format!("/api/threads/{}", super::wire::path_segment(&thread));
    let result = match p.wait_ms {
        Some(_) => Some(answer(&app, &thread, p.wait()).await?.result),
        None => None,
    };
    let out = Started { thread, created: creation.created, link: link.clone(), result };
    let status = if creation.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, [(header::LOCATION, link)], Json(out)).into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(text: &str) -> Result<(Value, StartOptions), Reject> {
        parse::<StartBody>(&Bytes::from(text.to_owned()))?.options(1_000)
    }

    fn field(text: &str) -> String {
        body(text).err().and_then(|r| r.field).unwrap_or_default()
    }

    #[test]
    fn a_body_maps_onto_start_options_or_names_its_bad_field() {
        let (input, o) = body(
            r#"{"input": {"n": 1}, "id": "t-1", "labels": {"team": "a"}, "queue": "q",
                "key": "k", "priority": 7, "dedup": "d"}"#,
        )
        .unwrap();
        assert_eq!(input, json!({"n": 1}));
        assert_eq!(o.thread_id.as_deref(), Some("t-1"));
        assert_eq!(o.labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(
            (o.queue.as_deref(), o.queue_key.as_deref(), o.priority, o.dedup_key.as_deref()),
            (Some("q"), Some("k"), 7, Some("d"))
        );
        assert_eq!(field(r#"{"id": "x"}"#), "input");
        assert_eq!(field(r#"{"input": 1, "labels": {"a": 1}}"#), "labels.a");
        assert_eq!(field(r#"{"input": 1, "priority": 300, "queue": "q"}"#), "priority");
        assert_eq!(field(r#"{"input": 1, "start_at_ms": 5, "queue": "q"}"#), "start_at_ms");
        assert_eq!(field(r#"{"input": 1, "start_at_ms": 5, "delay_ms": 5}"#), "delay_ms");
        assert_eq!(field(r#"{"input": 1, "budgets": {"warn_fraction": 2.0}}"#), "budgets");
        assert_eq!(field(r#"{"input": 1, "budgets": {"max_stepz": 2}}"#), "max_stepz");
        let (_, o) = body(
            r#"{"input": 1, "deadline_ms": 60000, "delay_ms": 500, "permissions": ["net"],
                "budgets": {"max_steps": 9}}"#,
        )
        .unwrap();
        assert_eq!((o.deadline_ms, o.start_at_ms), (Some(60_000), Some(1_500)));
        assert_eq!(o.budgets.and_then(|b| b.max_steps), Some(9));
        assert!(o.permissions.is_some_and(|p| p.contains("net")));
        assert_eq!(field(r#"{"input": 1, "key": "k"}"#), "key");
        assert_eq!(field(r#"{"input": 1, "colour": "red"}"#), "colour");
        assert_eq!(field(r#"{"input": 1, "id": ""}"#), "id");
        assert_eq!(field("{"), "body");
    }
}
