//! The request parameters of the HTTP endpoint, parsed from decoded query pairs: pure functions
//! (no I/O, no axum), so the fuzz target `serve_params` drives them directly. Every refusal names
//! the field it is about; none panics, whatever the input.

use cairn_storage::{
    CheckpointFilter, CheckpointKind, EventKind, ThreadFilter, ThreadId, ThreadStatus,
};

use crate::limits::SERVE_PAGE_MAX;

/// A refused request: the HTTP status, what is wrong, and the field (query parameter, path
/// segment or body field) it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The HTTP status code (400, 401, 404, 405, 409, 413, 500).
    pub status: u16,
    /// What is wrong, for a person.
    pub error: String,
    /// The field it is about, if one.
    pub field: Option<String>,
}

impl Reject {
    /// A 400 about `field`.
    pub fn bad(field: &str, error: impl Into<String>) -> Self {
        Self { status: 400, error: error.into(), field: Some(field.to_owned()) }
    }

    /// A 404 about `field`.
    pub fn not_found(field: &str, error: impl Into<String>) -> Self {
        Self { status: 404, error: error.into(), field: Some(field.to_owned()) }
    }
}

/// `GET /api/threads`: filters and a page, in the store's id order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListParams {
    /// Filters (status, workflow, label).
    pub filter: ThreadFilter,
    /// At most this many threads (1..=[`SERVE_PAGE_MAX`], default 100).
    pub limit: usize,
    /// Only threads after this id (the cursor: the previous page's `next`).
    pub after: Option<ThreadId>,
    /// Threads skipped first (after the cursor); each costs a read, so page with `after`.
    pub offset: usize,
}

/// `GET /api/checkpoints`: filters and a page, newest first (as `cairn checkpoints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointsParams {
    /// Filters (thread, workflow, kind, any of the tags).
    pub filter: CheckpointFilter,
    /// At most this many checkpoints (1..=[`SERVE_PAGE_MAX`], default 100).
    pub limit: usize,
    /// Checkpoints skipped first.
    pub offset: usize,
}

/// `GET /api/threads/{id}/events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsParams {
    /// Only events after this seq (a bookmark's seq).
    pub since: u64,
    /// Only events of these kinds (comma-separated; all when empty).
    pub kinds: Vec<EventKind>,
    /// At most this many events in a page (1..=[`SERVE_PAGE_MAX`], default the maximum).
    pub limit: usize,
    /// Follow live as Server-Sent Events until the thread ends.
    pub follow: bool,
    /// Apply the bundle redaction rules.
    pub redact: bool,
}

/// `GET /api/threads/{id}/state`: the state after a seq, or the diff between two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateParams {
    /// The state after this seq (the latest when `None`).
    pub at: Option<u64>,
    /// The state as it stood at this engine-clock time (ms): after the last event at or before.
    pub at_time: Option<u64>,
    /// The diff between the states after these two seqs.
    pub diff: Option<(u64, u64)>,
    /// Apply the bundle redaction rules.
    pub redact: bool,
}

/// `GET /api/workflows/{id}/graph`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphParams {
    /// The version (the newest compiled in when `None`).
    pub version: Option<u32>,
    /// `mermaid` (true) or `dot` (false, the default).
    pub mermaid: bool,
}

/// Parses the query of `GET /api/threads`.
///
/// # Errors
/// A 400 naming the parameter: unknown, repeated, or malformed.
pub fn list_params(pairs: &[(String, String)]) -> Result<ListParams, Reject> {
    let mut p = ListParams {
        filter: ThreadFilter::default(),
        limit: DEFAULT_LIMIT,
        after: None,
        offset: 0,
    };
    let known = ["status", "workflow", "label", "limit", "after", "offset"];
    for (key, value) in unique(pairs, &known)? {
        match key {
            "status" => {
                let status = value.parse::<ThreadStatus>().map_err(|_| {
                    Reject::bad("status", format!("{value:?} is not a thread status"))
                })?;
                p.filter.status = Some(status);
            }
            "workflow" => p.filter.workflow_id = Some(value.to_owned()),
            "label" => match value.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    p.filter.label = Some((k.to_owned(), v.to_owned()));
                }
                _ => {
                    return Err(Reject::bad("label", format!("expected KEY=VALUE, got {value:?}")));
                }
            },
            "limit" => p.limit = limit(value)?,
            "after" => {
                let id = ThreadId::new(value).map_err(|e| Reject::bad("after", e.to_string()))?;
                p.after = Some(id);
            }
            _ => p.offset = number("offset", value)?,
        }
    }
    Ok(p)
}

/// Parses the query of `GET /api/checkpoints` (`tag` is a comma-separated list: any of them).
///
/// # Errors
/// A 400 naming the parameter.
pub fn checkpoints_params(pairs: &[(String, String)]) -> Result<CheckpointsParams, Reject> {
    let mut p =
        CheckpointsParams { filter: CheckpointFilter::default(), limit: DEFAULT_LIMIT, offset: 0 };
    let known = ["thread", "workflow", "kind", "tag", "limit", "offset"];
    for (key, value) in unique(pairs, &known)? {
        match key {
            "thread" => {
                let id = ThreadId::new(value).map_err(|e| Reject::bad("thread", e.to_string()))?;
                p.filter.thread = Some(id);
            }
            "workflow" => p.filter.workflow_id = Some(value.to_owned()),
            "kind" => {
                let kind = value.parse::<CheckpointKind>().map_err(|_| {
                    Reject::bad("kind", format!("{value:?} is not a checkpoint kind"))
                })?;
                p.filter.kind = Some(kind);
            }
            "tag" => {
                let tags = value.split(',').filter(|t| !t.is_empty()).map(str::to_owned);
                p.filter.any_tags = tags.collect();
            }
            "limit" => p.limit = limit(value)?,
            _ => p.offset = number("offset", value)?,
        }
    }
    Ok(p)
}

/// `GET /api/trace`: the messages of a session or of every thread, as `cairn trace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceParams {
    /// The session's threads (`thread`, repeatable; every thread when empty).
    pub threads: Vec<String>,
    /// Only messages carrying this correlation id.
    pub correlation_id: Option<String>,
    /// Only messages between these two parties (`between` given twice).
    pub between: Option<(String, String)>,
    /// Only messages written at or after this time (ms).
    pub from_ms: Option<u64>,
    /// Only messages written at or before this time (ms).
    pub to_ms: Option<u64>,
    /// The chain of parents ending at the message with this id.
    pub chain: Option<String>,
}

/// Parses the query of `GET /api/trace`: `thread` may be repeated, `between` must be given
/// twice or not at all, the rest once.
///
/// # Errors
/// A 400 naming the parameter.
pub fn trace_params(pairs: &[(String, String)]) -> Result<TraceParams, Reject> {
    let mut p = TraceParams::default();
    let mut between = Vec::new();
    let mut rest = Vec::new();
    for (key, value) in pairs {
        match key.as_str() {
            "thread" => {
                ThreadId::new(value).map_err(|e| Reject::bad("thread", e.to_string()))?;
                p.threads.push(value.clone());
            }
            "between" => between.push(value.clone()),
            _ => rest.push((key.clone(), value.clone())),
        }
    }
    let known = ["correlation_id", "from_ms", "to_ms", "chain"];
    for (key, value) in unique(&rest, &known)? {
        match key {
            "correlation_id" => p.correlation_id = Some(value.to_owned()),
            "from_ms" => p.from_ms = Some(number("from_ms", value)?),
            "to_ms" => p.to_ms = Some(number("to_ms", value)?),
            _ => p.chain = Some(value.to_owned()),
        }
    }
    match <[String; 2]>::try_from(between) {
        Ok([a, b]) => p.between = Some((a, b)),
        Err(given) if given.is_empty() => {}
        Err(_) => return Err(Reject::bad("between", "give two parties (between twice)")),
    }
    if p.threads.len() > TRACE_THREADS_MAX {
        return Err(Reject::bad("thread", format!("at most {TRACE_THREADS_MAX} threads")));
    }
    Ok(p)
}

/// Threads one `GET /api/trace` may name (a session's roots; each brings its sub-workflows).
const TRACE_THREADS_MAX: usize = 100;

/// Parses the query of `GET /api/health`: the watchdog in ms (the engine's own when `None`).
///
/// # Errors
/// A 400 naming the parameter.
pub fn health_params(pairs: &[(String, String)]) -> Result<Option<u64>, Reject> {
    let mut watchdog_ms = None;
    for (_, value) in unique(pairs, &["watchdog_ms"])? {
        watchdog_ms = Some(number("watchdog_ms", value)?);
    }
    Ok(watchdog_ms)
}

/// Parses the query of `GET /api/threads/{id}/events`.
///
/// # Errors
/// A 400 naming the parameter.
pub fn events_params(pairs: &[(String, String)]) -> Result<EventsParams, Reject> {
    let mut p = EventsParams {
        since: 0,
        kinds: Vec::new(),
        limit: SERVE_PAGE_MAX,
        follow: false,
        redact: false,
    };
    for (key, value) in unique(pairs, &["since", "kind", "limit", "follow", "redact"])? {
        match key {
            "since" => p.since = number("since", value)?,
            "kind" => {
                for k in value.split(',').filter(|k| !k.is_empty()) {
                    let kind = k
                        .parse::<EventKind>()
                        .map_err(|_| Reject::bad("kind", format!("{k:?} is not an event kind")))?;
                    p.kinds.push(kind);
                }
            }
            "limit" => p.limit = limit(value)?,
            "follow" => p.follow = flag("follow", value)?,
            _ => p.redact = flag("redact", value)?,
        }
    }
    Ok(p)
}

/// Parses the query of `GET /api/threads/{id}/state`.
///
/// # Errors
/// A 400 naming the parameter (`at`, `at_time` and `diff`: one at most; refused naming the
/// later one).
pub fn state_params(pairs: &[(String, String)]) -> Result<StateParams, Reject> {
    let mut p = StateParams { at: None, at_time: None, diff: None, redact: false };
    for (key, value) in unique(pairs, &["at", "at_time", "diff", "redact"])? {
        match key {
            "at" => p.at = Some(number("at", value)?),
            "at_time" => p.at_time = Some(number("at_time", value)?),
            "diff" => {
                let Some((a, b)) = value.split_once(',') else {
                    return Err(Reject::bad("diff", format!("expected SEQ,SEQ, got {value:?}")));
                };
                p.diff = Some((number("diff", a)?, number("diff", b)?));
            }
            _ => p.redact = flag("redact", value)?,
        }
    }
    if p.at.is_some() && p.diff.is_some() {
        return Err(Reject::bad("diff", "give at or diff, not both"));
    }
    if p.at_time.is_some() && (p.at.is_some() || p.diff.is_some()) {
        return Err(Reject::bad("at_time", "give one of at, at_time and diff"));
    }
    Ok(p)
}

/// Parses the query of `GET /api/workflows/{id}/graph`.
///
/// # Errors
/// A 400 naming the parameter.
pub fn graph_params(pairs: &[(String, String)]) -> Result<GraphParams, Reject> {
    let mut p = GraphParams { version: None, mermaid: false };
    for (key, value) in unique(pairs, &["version", "format"])? {
        match key {
            "version" => {
                let v = value.parse::<u32>().map_err(|_| {
                    Reject::bad("version", format!("{value:?} is not a version number"))
                })?;
                p.version = Some(v);
            }
            _ => {
                p.mermaid = match value {
                    "mermaid" => true,
                    "dot" => false,
                    _ => {
                        return Err(Reject::bad(
                            "format",
                            format!("{value:?}: expected dot or mermaid"),
                        ));
                    }
                }
            }
        }
    }
    Ok(p)
}

/// Refuses every parameter (for routes that take none).
///
/// # Errors
/// A 400 naming the first parameter.
pub fn no_params(pairs: &[(String, String)]) -> Result<(), Reject> {
    unique(pairs, &[]).map(drop)
}

/// Refuses every parameter but `redact` (for routes that take only that).
///
/// # Errors
/// A 400 naming the parameter.
pub fn redact_only(pairs: &[(String, String)]) -> Result<bool, Reject> {
    let mut redact = false;
    for (_, value) in unique(pairs, &["redact"])? {
        redact = flag("redact", value)?;
    }
    Ok(redact)
}

/// Threads listed when no `limit` is given (as `cairn threads`).
const DEFAULT_LIMIT: usize = 100;

/// The pairs, each key known and given once.
pub(super) fn unique<'a>(
    pairs: &'a [(String, String)],
    known: &[&'static str],
) -> Result<Vec<(&'static str, &'a str)>, Reject> {
    let mut out: Vec<(&'static str, &'a str)> = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        let Some(name) = known.iter().find(|k| **k == key.as_str()) else {
            let field = key.chars().take(64).collect::<String>();
            return Err(Reject::bad(
                &field,
                if known.is_empty() {
                    "this route takes no parameters".to_owned()
                } else {
                    format!("unknown parameter (known: {})", known.join(", "))
                },
            ));
        };
        if out.iter().any(|(k, _)| k == name) {
            return Err(Reject::bad(name, "given more than once"));
        }
        out.push((name, value.as_str()));
    }
    Ok(out)
}

pub(super) fn number<T: std::str::FromStr>(field: &str, value: &str) -> Result<T, Reject> {
    value.parse::<T>().map_err(|_| Reject::bad(field, format!("{value:?} is not a number")))
}

fn limit(value: &str) -> Result<usize, Reject> {
    let n: usize = number("limit", value)?;
    if n == 0 || n > SERVE_PAGE_MAX {
        return Err(Reject::bad("limit", format!("{n} is not in 1..={SERVE_PAGE_MAX}")));
    }
    Ok(n)
}

pub(super) fn flag(field: &str, value: &str) -> Result<bool, Reject> {
    match value {
        "1" | "true" | "" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(Reject::bad(field, format!("{value:?}: expected 1 or 0"))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn each_refusal_names_its_field() {
        assert_eq!(list_params(&q(&[("limit", "0")])).unwrap_err().field.as_deref(), Some("limit"));
        assert_eq!(
            list_params(&q(&[("status", "asleep")])).unwrap_err().field.as_deref(),
            Some("status")
        );
        assert_eq!(
            list_params(&q(&[("colour", "x")])).unwrap_err().field.as_deref(),
            Some("colour")
        );
        assert_eq!(
            events_params(&q(&[("since", "-1")])).unwrap_err().field.as_deref(),
            Some("since")
        );
        assert_eq!(
            state_params(&q(&[("at", "1"), ("diff", "1,2")])).unwrap_err().field.as_deref(),
            Some("diff")
        );
        assert_eq!(
            state_params(&q(&[("at", "1"), ("at", "2")])).unwrap_err().field.as_deref(),
            Some("at")
        );
        assert_eq!(list_params(&q(&[("after", "")])).unwrap_err().field.as_deref(), Some("after"));
        assert_eq!(
            state_params(&q(&[("at", "1"), ("at_time", "2")])).unwrap_err().field.as_deref(),
            Some("at_time")
        );
        assert_eq!(
            checkpoints_params(&q(&[("kind", "sometimes")])).unwrap_err().field.as_deref(),
            Some("kind")
        );
        assert_eq!(
            health_params(&q(&[("watchdog_ms", "soon")])).unwrap_err().field.as_deref(),
            Some("watchdog_ms")
        );
        assert_eq!(
            trace_params(&q(&[("between", "a")])).unwrap_err().field.as_deref(),
            Some("between")
        );
        let trace = trace_params(&q(&[("thread", "a"), ("thread", "b"), ("between", "x")]));
        assert_eq!(trace.unwrap_err().field.as_deref(), Some("between"));
        let trace = trace_params(&q(&[("thread", "a"), ("thread", "b"), ("to_ms", "5")])).unwrap();
        assert_eq!((trace.threads.len(), trace.to_ms), (2, Some(5)));
        let ok = list_params(&q(&[("status", "paused"), ("label", "a=b"), ("offset", "3")]));
        let ok = ok.unwrap();
        assert_eq!((ok.filter.status, ok.offset, ok.limit), (Some(ThreadStatus::Paused), 3, 100));
        assert_eq!(state_params(&q(&[("diff", "2,5")])).unwrap().diff, Some((2, 5)));
    }

    proptest! {
        /// What the fuzz target `serve_params` checks, on a budget the default suite affords:
        /// any query, split as a form, is parsed or refused with a 4xx naming a field.
        #[test]
        fn any_query_is_parsed_or_refused_naming_a_field(
            pairs in proptest::collection::vec(
                ("(status|workflow|label|limit|offset|after|since|kind|follow|redact|at|at_time|diff|version|format|thread|tag|watchdog_ms|between|correlation_id|from_ms|to_ms|chain|q|to|last|secret|redact_key|meta|checkpoints|last_events|max_payload_bytes|max_age_ms|[a-z]{0,4})",
                 "[-a-z0-9_,=]{0,12}"),
                0..5,
            )
        ) {
            let refused_well = |r: Reject| {
                assert!((400..500).contains(&r.status) && r.field.is_some(), "{r:?}");
            };
            match list_params(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.limit)),
                Err(r) => refused_well(r),
            }
            match events_params(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.limit)),
                Err(r) => refused_well(r),
            }
            match state_params(&pairs) {
                Ok(p) => prop_assert!(p.at.is_none() || p.diff.is_none()),
                Err(r) => refused_well(r),
            }
            if let Err(r) = graph_params(&pairs) {
                refused_well(r);
            }
            match checkpoints_params(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.limit)),
                Err(r) => refused_well(r),
            }
            if let Err(r) = health_params(&pairs) {
                refused_well(r);
            }
            if let Err(r) = trace_params(&pairs) {
                refused_well(r);
            }
            match crate::serve::params_view::view_threads_params(&pairs) {
                Ok(p) => prop_assert!((1..=SERVE_PAGE_MAX).contains(&p.list.limit)),
                Err(r) => refused_well(r),
            }
            match crate::serve::params_view::timeline_params(&pairs) {
                Ok(p) => prop_assert!(
                    (1..=crate::serve::params_view::TIMELINE_EVENTS_MAX).contains(&p.last)
                        && p.to != Some(0)
                ),
                Err(r) => refused_well(r),
            }
            match crate::serve::params_ops::bundle_params(&pairs) {
                Ok(o) => prop_assert!(o.last_events != Some(0)),
                Err(r) => refused_well(r),
            }
            if let Err(r) = crate::serve::params_ops::resumable_params(&pairs) {
                refused_well(r);
            }
        }
    }
}
