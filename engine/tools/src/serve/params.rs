//! The request parameters of the HTTP endpoint: derived structs (`Deserialize` to read them from
//! the query with [`super::query::parse`], `IntoParams` for the OpenAPI document) and the
//! checks across fields ([`Check`]). Pure (no I/O, no axum), so the fuzz target `serve_params` drives them
//! directly. Every refusal names the field it is about; none panics, whatever the input.

use std::str::FromStr;

use cairn_storage::{
    CheckpointFilter, CheckpointKind, EventKind, ThreadFilter, ThreadId, ThreadStatus,
};
use serde::Deserialize;
use serde::de::{self, Deserializer};
use utoipa::{IntoParams, ToSchema};

use super::query::{Check, text};
use crate::limits::SERVE_PAGE_MAX;

/// A refused request: the HTTP status, what is wrong, and the field (query parameter, path
/// segment or body field) it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The HTTP status code (400, 401, 404, 405, 409, 413, 500, 503).
    pub status: u16,
    /// What is wrong, for a person.
    pub error: String,
    /// The field it is about, if one.
    pub field: Option<String>,
    /// For a 429: when to try again, in seconds (the `Retry-After` header).
    pub retry_after_s: Option<u64>,
}

impl Reject {
    /// A refusal with HTTP status `status` about `field`.
    pub fn new(status: u16, field: &str, error: impl Into<String>) -> Self {
        Self { status, error: error.into(), field: Some(field.to_owned()), retry_after_s: None }
    }

    /// A 400 about `field`.
    pub fn bad(field: &str, error: impl Into<String>) -> Self {
        Self::new(400, field, error)
    }

    /// A 404 about `field`.
    pub fn not_found(field: &str, error: impl Into<String>) -> Self {
        Self::new(404, field, error)
    }
}

/// `GET /api/threads`: filters and a page, in the store's id order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only threads with this status (`running`, `paused`, `completed`, ...).
    #[serde(default, deserialize_with = "text")]
    #[param(value_type = Option<String>)]
    pub status: Option<ThreadStatus>,
    /// Only threads of this workflow.
    pub workflow: Option<String>,
    /// Only threads with these labels (`KEY=VALUE`, several joined by `,`: all must match).
    #[serde(default, deserialize_with = "text")]
    #[param(value_type = Option<String>)]
    pub label: Option<KeyValues>,
    /// At most this many threads (1..=[`SERVE_PAGE_MAX`], default 100).
    #[serde(default = "default_limit", deserialize_with = "page")]
    pub limit: usize,
    /// Only threads after this id (the cursor: the previous page's `next`).
    #[serde(default, deserialize_with = "text")]
    #[param(value_type = Option<String>)]
    pub after: Option<ThreadId>,
    /// Threads skipped first (after the cursor); each costs a read, so page with `after`.
    #[serde(default)]
    pub offset: usize,
}

impl ListParams {
    /// The store's filter for these parameters.
    pub fn filter(&self) -> ThreadFilter {
        let labels = self.label.iter().flat_map(|l| &l.0).map(|l| (l.key.clone(), l.value.clone()));
        ThreadFilter {
            status: self.status,
            workflow_id: self.workflow.clone(),
            labels: labels.collect(),
        }
    }
}

/// `GET /api/checkpoints`: filters and a page, newest first (as `cairn checkpoints`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CheckpointsParams {
    /// Only the checkpoints of this thread.
    #[serde(default, deserialize_with = "text")]
    #[param(value_type = Option<String>)]
    pub thread: Option<ThreadId>,
    /// Only the checkpoints of this workflow's threads.
    pub workflow: Option<String>,
    /// Only checkpoints of this kind.
    #[serde(default, deserialize_with = "text")]
    #[param(value_type = Option<String>)]
    pub kind: Option<CheckpointKind>,
    /// Only checkpoints with any of these tags (comma-separated).
    pub tag: Option<String>,
    /// At most this many checkpoints (1..=[`SERVE_PAGE_MAX`], default 100).
    #[serde(default = "default_limit", deserialize_with = "page")]
    pub limit: usize,
    /// Checkpoints skipped first.
    #[serde(default)]
    pub offset: usize,
}

impl CheckpointsParams {
    /// The store's filter for these parameters.
    pub fn filter(&self) -> CheckpointFilter {
        let tags = self.tag.iter().flat_map(|t| t.split(',')).filter(|t| !t.is_empty());
        CheckpointFilter {
            thread: self.thread.clone(),
            workflow_id: self.workflow.clone(),
            kind: self.kind,
            any_tags: tags.map(str::to_owned).collect(),
        }
    }
}

/// `GET /api/threads/{id}/events`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Only events after this seq (a bookmark's seq).
    #[serde(default)]
    pub since: u64,
    /// Only events of these kinds (comma-separated; all when empty).
    #[serde(default, rename = "kind", deserialize_with = "kinds")]
    #[param(rename = "kind", value_type = Option<String>)]
    pub kinds: Vec<EventKind>,
    /// At most this many events in a page (1..=[`SERVE_PAGE_MAX`], default the maximum).
    #[serde(default = "page_max", deserialize_with = "page")]
    pub limit: usize,
    /// Follow live as Server-Sent Events until the thread ends (`1`).
    #[serde(default)]
    pub follow: bool,
    /// Apply the bundle redaction rules (`1`).
    #[serde(default)]
    pub redact: bool,
}

/// `GET /api/threads/{id}/stream`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StreamParams {
    /// Resume after this seq (a `closed` or `ended` event's id): the closes after it and the
    /// chunks written from now on. A `Last-Event-ID` header (an `EventSource` reconnecting)
    /// takes its place.
    #[serde(default)]
    pub since: u64,
    /// Apply the bundle redaction rules (`1`).
    #[serde(default)]
    pub redact: bool,
}

/// `GET /api/threads/{id}/state`: the state after a seq, or the diff between two.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StateParams {
    /// The state after this seq (the latest when none of `at`, `at_time`, `diff`).
    pub at: Option<u64>,
    /// The state as it stood at this engine-clock time (ms): after the last event at or before.
    pub at_time: Option<u64>,
    /// The diff between the states after these two seqs (`SEQ,SEQ`).
    #[serde(default, deserialize_with = "text")]
    #[param(value_type = Option<String>)]
    pub diff: Option<SeqPair>,
    /// Apply the bundle redaction rules (`1`).
    #[serde(default)]
    pub redact: bool,
    /// With `at_time`: the session, the thread and every thread it had started by then
    /// (sub-workflow and child threads, at any depth), each as it stood then (`1`).
    #[serde(default)]
    pub session: bool,
}

/// `GET /api/workflows/{id}/graph`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GraphParams {
    /// The version (the newest compiled in when none).
    #[serde(default, deserialize_with = "version")]
    pub version: Option<u32>,
    /// `dot` (the default) or `mermaid`.
    #[serde(default)]
    pub format: GraphFormat,
}

/// The text a graph is drawn in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GraphFormat {
    /// Graphviz.
    #[default]
    Dot,
    /// Mermaid.
    Mermaid,
}

/// `GET /api/trace`: the messages of a session or of every thread, as `cairn trace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TraceParams {
    /// The session's threads (repeatable; every thread when none).
    #[serde(default, rename = "thread")]
    #[param(rename = "thread")]
    pub threads: Vec<String>,
    /// Only messages carrying this correlation id.
    pub correlation_id: Option<String>,
    /// Only messages between two parties (given twice, or not at all).
    #[serde(default)]
    pub between: Vec<String>,
    /// Only messages written at or after this time (ms).
    pub from_ms: Option<u64>,
    /// Only messages written at or before this time (ms).
    pub to_ms: Option<u64>,
    /// The chain of parents ending at the message with this id.
    pub chain: Option<String>,
    /// With `chain`: each message of the chain with its thread's state right after it (`1`).
    #[serde(default)]
    pub states: bool,
}

/// `GET /api/health`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HealthParams {
    /// A running thread with no step for this long (ms) is stuck (the engine's own watchdog
    /// when not given).
    pub watchdog_ms: Option<u64>,
}

/// `GET /api/threads/{id}/result` and a start's wait.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WaitParams {
    /// Wait up to this long (ms, at most [`crate::limits::RESULT_WAIT_MS_MAX`]) for an
    /// unfinished thread's result.
    pub wait_ms: Option<u64>,
}

impl WaitParams {
    /// `wait_ms` (0 without it), cut to [`crate::limits::RESULT_WAIT_MS_MAX`].
    pub fn wait(&self) -> std::time::Duration {
        let ms = self.wait_ms.unwrap_or(0).min(crate::limits::RESULT_WAIT_MS_MAX);
        std::time::Duration::from_millis(ms)
    }
}

/// `DELETE /api/threads/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ForceParams {
    /// Delete an unfinished thread too (`true`).
    #[serde(default)]
    pub force: bool,
}

/// `GET /api/workflows/{id}/graph.svg`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct VersionParams {
    /// The version (the newest compiled in when none).
    #[serde(default, deserialize_with = "version")]
    pub version: Option<u32>,
}

/// Routes that take only `redact`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RedactParams {
    /// Apply the bundle redaction rules (`1`).
    #[serde(default)]
    pub redact: bool,
}

/// Routes that take no parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct NoParams {}

/// `KEY=VALUE` (a label, a bundle's metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// Before the first `=` (not empty).
    pub key: String,
    /// After it.
    pub value: String,
}

impl FromStr for KeyValue {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok(Self { key: k.to_owned(), value: v.to_owned() }),
            _ => Err("expected KEY=VALUE".to_owned()),
        }
    }
}

/// `KEY=VALUE,KEY=VALUE` (a thread filter's labels, all of which must match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValues(pub Vec<KeyValue>);

impl FromStr for KeyValues {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',').map(str::parse).collect::<Result<_, _>>().map(Self)
    }
}

/// `SEQ,SEQ` (a diff's two seqs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqPair(pub u64, pub u64);

impl FromStr for SeqPair {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, &'static str> {
        let (a, b) = s.split_once(',').ok_or("expected SEQ,SEQ")?;
        match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) => Ok(Self(a, b)),
            _ => Err("expected SEQ,SEQ (two numbers)"),
        }
    }
}

impl Check for ListParams {}
impl Check for CheckpointsParams {}
impl Check for EventsParams {}
impl Check for StreamParams {}
impl Check for GraphParams {}
impl Check for HealthParams {}
impl Check for WaitParams {}
impl Check for ForceParams {}
impl Check for VersionParams {}
impl Check for RedactParams {}
impl Check for NoParams {}

/// `thread` may be repeated (at most 100), `between` must be given twice or
/// not at all.
impl Check for TraceParams {
    fn check(&self) -> Result<(), Reject> {
        for thread in &self.threads {
            ThreadId::new(thread.as_str()).map_err(|e| Reject::bad("thread", e.to_string()))?;
        }
        if !matches!(self.between.len(), 0 | 2) {
            return Err(Reject::bad("between", "give two parties (between twice)"));
        }
        if self.threads.len() > TRACE_THREADS_MAX {
            return Err(Reject::bad("thread", format!("at most {TRACE_THREADS_MAX} threads")));
        }
        if self.states && self.chain.is_none() {
            return Err(Reject::bad("states", "a step-through needs a chain (give chain)"));
        }
        Ok(())
    }
}

/// Threads one `GET /api/trace` may name (a session's roots; each brings its sub-workflows).
const TRACE_THREADS_MAX: usize = 100;

/// `at`, `at_time` and `diff`: one at most (refused naming the later one).
impl Check for StateParams {
    fn check(&self) -> Result<(), Reject> {
        if self.at.is_some() && self.diff.is_some() {
            return Err(Reject::bad("diff", "give at or diff, not both"));
        }
        if self.at_time.is_some() && (self.at.is_some() || self.diff.is_some()) {
            return Err(Reject::bad("at_time", "give one of at, at_time and diff"));
        }
        if self.session && self.at_time.is_none() {
            return Err(Reject::bad("session", "a session is read at a time (give at_time)"));
        }
        Ok(())
    }
}

/// Threads listed when no `limit` is given (as `cairn threads`).
fn default_limit() -> usize {
    100
}

fn page_max() -> usize {
    SERVE_PAGE_MAX
}

/// A page size within 1..=[`SERVE_PAGE_MAX`].
fn page<'de, D: Deserializer<'de>>(de: D) -> Result<usize, D::Error> {
    let n = usize::deserialize(de)?;
    if n == 0 || n > SERVE_PAGE_MAX {
        return Err(de::Error::custom(format!("{n} is not in 1..={SERVE_PAGE_MAX}")));
    }
    Ok(n)
}

/// Comma-separated event kinds.
fn kinds<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<EventKind>, D::Error> {
    let raw = String::deserialize(de)?;
    let each = raw.split(',').filter(|k| !k.is_empty());
    each.map(|k| k.parse().map_err(|_| de::Error::custom(format!("{k:?} is not an event kind"))))
        .collect()
}

/// A version number.
fn version<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u32>, D::Error> {
    let raw = String::deserialize(de)?;
    raw.parse().map(Some).map_err(|_| de::Error::custom(format!("{raw:?} is not a version number")))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::serve::query::{parse, q};

    /// The field named by the refusal of `pairs` read as a `T` (`None`: they read).
    fn refused<T: Check>(pairs: &[(&str, &str)]) -> Option<String> {
        parse::<T>(&q(pairs)).err()?.field
    }

    #[test]
    fn each_refusal_names_its_field() {
        assert_eq!(refused::<ListParams>(&[("limit", "0")]).as_deref(), Some("limit"));
        assert_eq!(refused::<ListParams>(&[("status", "asleep")]).as_deref(), Some("status"));
        assert_eq!(refused::<ListParams>(&[("colour", "x")]).as_deref(), Some("colour"));
        assert_eq!(refused::<EventsParams>(&[("since", "-1")]).as_deref(), Some("since"));
        assert_eq!(
            refused::<StateParams>(&[("at", "1"), ("diff", "1,2")]).as_deref(),
            Some("diff")
        );
        assert_eq!(refused::<StateParams>(&[("at", "1"), ("at", "2")]).as_deref(), Some("at"));
        assert_eq!(refused::<ListParams>(&[("after", "")]).as_deref(), Some("after"));
        assert_eq!(
            refused::<StateParams>(&[("at", "1"), ("at_time", "2")]).as_deref(),
            Some("at_time")
        );
        assert_eq!(refused::<CheckpointsParams>(&[("kind", "sometimes")]).as_deref(), Some("kind"));
        assert_eq!(
            refused::<HealthParams>(&[("watchdog_ms", "soon")]).as_deref(),
            Some("watchdog_ms")
        );
        assert_eq!(refused::<TraceParams>(&[("between", "a")]).as_deref(), Some("between"));
        assert_eq!(refused::<TraceParams>(&[("states", "1")]).as_deref(), Some("states"));
        assert_eq!(
            refused::<TraceParams>(&[("chain", "m"), ("states", "x")]).as_deref(),
            Some("states")
        );
        assert!(parse::<TraceParams>(&q(&[("chain", "m"), ("states", "1")])).unwrap().states);
        assert_eq!(refused::<StateParams>(&[("session", "1")]).as_deref(), Some("session"));
        assert_eq!(
            refused::<StateParams>(&[("at", "1"), ("session", "1")]).as_deref(),
            Some("session")
        );
        assert!(parse::<StateParams>(&q(&[("at_time", "5"), ("session", "1")])).unwrap().session);
        let trace = parse::<TraceParams>(&q(&[("thread", "a"), ("thread", "b"), ("between", "x")]));
        assert_eq!(trace.unwrap_err().field.as_deref(), Some("between"));
        let trace =
            parse::<TraceParams>(&q(&[("thread", "a"), ("thread", "b"), ("to_ms", "5")])).unwrap();
        assert_eq!((trace.threads.len(), trace.to_ms), (2, Some(5)));
        let ok =
            parse::<ListParams>(&q(&[("status", "paused"), ("label", "a=b"), ("offset", "3")]));
        let ok = ok.unwrap();
        assert_eq!((ok.filter().status, ok.offset, ok.limit), (Some(ThreadStatus::Paused), 3, 100));
        let two = parse::<ListParams>(&q(&[("label", "a=b,c=d=e")])).unwrap().filter();
        assert_eq!(two.labels, [("a".into(), "b".into()), ("c".into(), "d=e".into())]);
        assert_eq!(refused::<ListParams>(&[("label", "a=b,c")]).as_deref(), Some("label"));
        assert_eq!(parse::<StateParams>(&q(&[("diff", "2,5")])).unwrap().diff, Some(SeqPair(2, 5)));
    }

    proptest! {
        /// What the fuzz target `serve_params` checks, on a budget the default suite affords:
        /// any query, split as a form, is parsed or refused with a 4xx naming a field.
        #[test]
        fn any_query_is_parsed_or_refused_naming_a_field(
            pairs in proptest::collection::vec(
                ("(status|workflow|label|limit|offset|after|since|kind|follow|redact|at|at_time|diff|version|format|thread|tag|watchdog_ms|between|correlation_id|from_ms|to_ms|chain|q|to|last|secret|redact_key|meta|checkpoints|last_events|max_payload_bytes|max_age_ms|session|states|[a-z]{0,4})",
                 "[-a-z0-9_,=]{0,12}"),
                0..5,
            )
        ) {
            let refused_well = |r: Reject| {
                assert!((400..500).contains(&r.status) && r.field.is_some(), "{r:?}");
            };
            match parse::<ListParams>(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.limit)),
                Err(r) => refused_well(r),
            }
            match parse::<EventsParams>(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.limit)),
                Err(r) => refused_well(r),
            }
            match parse::<StateParams>(&pairs) {
                Ok(p) => prop_assert!(p.at.is_none() || p.diff.is_none()),
                Err(r) => refused_well(r),
            }
            if let Err(r) = parse::<GraphParams>(&pairs) {
                refused_well(r);
            }
            match parse::<CheckpointsParams>(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.limit)),
                Err(r) => refused_well(r),
            }
            if let Err(r) = parse::<HealthParams>(&pairs) {
                refused_well(r);
            }
            if let Err(r) = parse::<TraceParams>(&pairs) {
                refused_well(r);
            }
            match crate::serve::params_view::view_threads_params(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.list.limit)),
                Err(r) => refused_well(r),
            }
            match parse::<crate::serve::params_view::TimelineParams>(&pairs) {
                Ok(p) => prop_assert!(
                    (1..=crate::serve::params_view::TIMELINE_EVENTS_MAX).contains(&p.last)
                        && p.to != Some(0)
                ),
                Err(r) => refused_well(r),
            }
            match parse::<crate::serve::params_ops::BundleParams>(&pairs).map(|p| p.options()) {
                Ok(o) => prop_assert!(o.last_events != Some(0)),
                Err(r) => refused_well(r),
            }
            if let Err(r) = parse::<crate::serve::params_ops::ResumableParams>(&pairs) {
                refused_well(r);
            }
        }
    }
}
