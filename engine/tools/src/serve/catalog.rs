//! The web view's workflows and schedules: what is registered and what it has run, and the
//! schedule controls. Routes (the access layer, `super::access`, guards them as every route:
//! the controls need the token):
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/api/view/workflows` | each workflow compiled in or with threads, the application's first and the engine's own (`builtin`) after: its versions, node count, thread counts by status and by version |
//! | GET | `/api/workflows/{id}/graph.svg?version=` | a compiled-in workflow's graph as SVG, every node unmarked (the newest version without `version`) |
//! | GET | `/api/schedules` | every schedule as [`Engine::schedules`] reads it (`thread`: its live link; `status` its thread's, `deleted` once deleted), with its next ticks (at most [`NEXT_TICKS`]), last runs (at most [`LAST_RUNS`]), threads `started` (by its ticks and its triggers, `triggered`) and the engine clock's `now_ms` |
//! | POST | `/api/schedules/{name}/pause\|resume\|trigger` | [`Engine::pause_schedule`], [`Engine::resume_schedule`], [`Engine::trigger_schedule`] (the answer names the started thread) |
//! | DELETE | `/api/schedules/{name}` | [`Engine::delete_schedule`] |
//! | POST | `/api/schedules/{name}/backfill` | [`Engine::backfill_schedule`]: body `{"from_ms", "to_ms"}`; answers `{"schedule", "ticks", "created"}` |
//!
//! A schedule control takes no body (nothing, or `{}`); an unknown schedule is a 404, one in a
//! status that refuses the control a 409, as for a thread.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;
use cairn_storage::{Page, ThreadFilter, ThreadRecord, ThreadStatus};
use serde_json::{Value, json};

use super::app::{App, Params, Segment, blocking, reject, svg_answer};
use super::graph_svg::workflow_svg;
use super::params::{NoParams, Reject, VersionParams};
use cairn::Engine;
use cairn::ScheduleInfo;
use cairn::ScheduleSpec;
use cairn::admin::Rule;

/// Upcoming ticks listed per schedule: enough to see its rhythm, few enough to read.
pub const NEXT_TICKS: usize = 5;

/// Threads a schedule started listed per schedule, newest first.
pub const LAST_RUNS: usize = 5;

/// Thread records read per page while counting threads by workflow.
const COUNT_PAGE: usize = 1_000;

/// `GET /api/view/workflows`.
pub(super) async fn workflows(
    State(app): State<App>,
    _: Params<NoParams>,
) -> Result<Json<Value>, Reject> {
    blocking(move || {
        let store = app.engine.store().as_ref();
        // (workflow, status) and (workflow, version) counts over every thread record (records
        // only, never a log), in pages.
        let mut by_status: BTreeMap<String, BTreeMap<&'static str, u64>> = BTreeMap::new();
        let mut by_version: BTreeMap<String, BTreeMap<u32, u64>> = BTreeMap::new();
        let mut seen = 0;
        loop {
            let batch = store
                .list_threads(&ThreadFilter::default(), Page { limit: COUNT_PAGE, offset: seen })
                .wait()
                .map_err(|e| reject(e.into(), "threads"))?;
            seen += batch.len();
            for r in &batch {
                let id = r.workflow.id.to_string();
                *by_status.entry(id.clone()).or_default().entry(r.status.as_str()).or_default() +=
                    1;
                *by_version.entry(id).or_default().entry(r.workflow.version).or_default() += 1;
            }
            if batch.len() < COUNT_PAGE {
                break;
            }
        }
        let mut compiled: BTreeMap<String, Vec<(u32, usize)>> = BTreeMap::new();
        for w in app.engine.workflows() {
            compiled.entry(w.id().to_owned()).or_default().push((w.version(), w.nodes().len()));
        }
        let ids: BTreeSet<&String> = compiled.keys().chain(by_status.keys()).collect();
        // The application's workflows first, the engine's own after them.
        let (builtin, own): (Vec<&String>, Vec<&String>) =
            ids.into_iter().partition(|id| is_builtin(id));
        let rows: Vec<Value> = own
            .into_iter()
            .chain(builtin)
            .map(|id| {
                let mut versions = compiled.get(id).cloned().unwrap_or_default();
                versions.sort_unstable();
                let counts = by_status.get(id).cloned().unwrap_or_default();
                json!({
                    "workflow": id,
                    "versions": versions.iter().map(|(v, _)| v).collect::<Vec<_>>(),
                    "nodes": versions.last().map(|(_, n)| n),
                    "compiled": !versions.is_empty(),
                    "builtin": is_builtin(id),
                    "total": counts.values().sum::<u64>(),
                    "counts": counts,
                    "thread_versions": by_version.get(id).cloned().unwrap_or_default(),
                })
            })
            .collect();
        Ok(Json(json!({ "workflows": rows })))
    })
    .await
}

/// Whether workflow `id` is the engine's own (schedules run as [`ScheduleSpec::WORKFLOW`],
/// batches as [`cairn::BatchInfo::WORKFLOW`]), not the application's.
fn is_builtin(id: &str) -> bool {
    id == ScheduleSpec::WORKFLOW || id == cairn::BatchInfo::WORKFLOW
}

/// `GET /api/workflows/{id}/graph.svg?version=`.
pub(super) async fn workflow_graph_svg(
    State(app): State<App>,
    Params(VersionParams { version }): Params<VersionParams>,
    Segment(id): Segment,
) -> Result<Response, Reject> {
    let wf = app.workflow(&id, version)?;
    svg_answer(workflow_svg(&wf, &BTreeMap::new()))
}

/// `GET /api/schedules`.
pub(super) async fn schedules(
    State(app): State<App>,
    _: Params<NoParams>,
) -> Result<Json<Value>, Reject> {
    let engine = &app.engine;
    let list = engine.schedules().await.map_err(|e| reject(e, "schedules"))?;
    let mut rows = Vec::with_capacity(list.len());
    for info in &list {
        let runs = runs(engine, &info.name).await?;
        rows.push(schedule_json(info, &runs));
    }
    Ok(Json(json!({ "now_ms": engine.clock().now_ms(), "schedules": rows })))
}

/// `POST /api/schedules/{name}/{control}`: `pause`, `resume` or `trigger`, no body.
pub(super) async fn control(
    State(app): State<App>,
    Segment((name, control)): Segment<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, Reject> {
    let body = super::app::body(body)?;
    if !matches!(control.as_str(), "pause" | "resume" | "trigger") {
        return Err(Reject::not_found("control", format!("no schedule control {control:?}")));
    }
    super::controls::no_body(&body, "a schedule control")?;
    let engine = &app.engine;
    let mut started = None;
    match control.as_str() {
        "pause" => engine.pause_schedule(&name).await,
        "resume" => engine.resume_schedule(&name).await,
        _ => engine.trigger_schedule(&name).await.map(|h| started = Some(h.id().to_string())),
    }
    .map_err(|e| reject(e, "schedule"))?;
    let mut answer = answer(engine, &name).await?;
    if let Some(thread) = started {
        answer["thread"] = json!(thread);
    }
    Ok(Json(answer))
}

/// The body of `POST /api/schedules/{name}/backfill`: the range, both ends included.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BackfillBody {
    /// The range's first time (ms since the epoch).
    from_ms: u64,
    /// The range's last time (ms since the epoch).
    to_ms: u64,
}

/// `POST /api/schedules/{name}/backfill`: one run per tick of the range, each once.
pub(super) async fn backfill(
    State(app): State<App>,
    Segment(name): Segment,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, Reject> {
    let b: BackfillBody = super::controls::parse(&super::app::body(body)?)?;
    if b.to_ms < b.from_ms {
        return Err(Reject::bad("to_ms", format!("{} is before from_ms {}", b.to_ms, b.from_ms)));
    }
    let done = app.engine.backfill_schedule(&name, b.from_ms, b.to_ms).await;
    // A range of too many ticks is the body's; anything else is the schedule's.
    let done = done.map_err(|e| match e {
        e @ cairn::Error::LimitExceeded { .. } => reject(e, "to_ms"),
        e => reject(e, "schedule"),
    })?;
    Ok(Json(json!({ "schedule": name, "ticks": done.ticks, "created": done.created })))
}

/// `DELETE /api/schedules/{name}`.
pub(super) async fn delete(
    State(app): State<App>,
    Segment(name): Segment,
) -> Result<Json<Value>, Reject> {
    app.engine.delete_schedule(&name).await.map_err(|e| reject(e, "schedule"))?;
    Ok(Json(answer(&app.engine, &name).await?))
}

/// `{"schedule", "status"}` of schedule `name` as it now stands.
async fn answer(engine: &Engine, name: &str) -> Result<Value, Reject> {
    let info = engine.schedule(name).await.map_err(|e| reject(e, "schedule"))?;
    let status = info.map_or("unknown", |i| status(i.status));
    Ok(json!({ "schedule": name, "status": status }))
}

/// A schedule's status as its page words it: its live thread's, but `deleted` for the
/// cancelled thread of a deleted schedule (the only way a schedule's thread is cancelled).
fn status(thread: ThreadStatus) -> &'static str {
    match thread {
        ThreadStatus::Cancelled => "deleted",
        other => other.as_str(),
    }
}

/// The threads a schedule started that are still stored: the last few, and how many of them
/// its triggers started.
struct Runs {
    /// Newest first, at most [`LAST_RUNS`].
    last: Vec<ThreadRecord>,
    /// Those started by a trigger (`Engine::trigger_schedule`), not a tick: the schedule's own
    /// count is of its ticks.
    triggered: u64,
}

/// The threads schedule `name` started (its label says so). Every one is read to sort them: a
/// schedule's runs are pruned with retention.
async fn runs(engine: &Engine, name: &str) -> Result<Runs, Reject> {
    let filter = ThreadFilter {
        labels: vec![(ScheduleSpec::LABEL.to_owned(), name.to_owned())],
        ..ThreadFilter::default()
    };
    let store = engine.store();
    let mut runs: Vec<ThreadRecord> = Vec::new();
    loop {
        let page = Page { limit: COUNT_PAGE, offset: runs.len() };
        let batch =
            store.list_threads(&filter, page).await.map_err(|e| reject(e.into(), "runs"))?;
        let done = batch.len() < COUNT_PAGE;
        runs.extend(batch);
        if done {
            break;
        }
    }
    // The schedule's own thread carries its label too: it is no run.
    runs.retain(|r| &*r.workflow.id != ScheduleSpec::WORKFLOW);
    let prefix = ScheduleSpec::triggered_prefix(name);
    let triggered = runs.iter().filter(|r| r.id.as_str().starts_with(&prefix)).count() as u64;
    runs.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then_with(|| b.id.cmp(&a.id)));
    runs.truncate(LAST_RUNS);
    Ok(Runs { last: runs, triggered })
}

/// A schedule as the schedules page shows it: `started` counts its ticks' threads and the
/// stored threads its triggers started (`triggered`).
fn schedule_json(info: &ScheduleInfo, runs: &Runs) -> Value {
    let s = &info.state;
    let last: Vec<Value> = runs
        .last
        .iter()
        .map(|r| {
            json!({
                "thread": r.id.as_str(),
                "status": r.status.as_str(),
                "created_at_ms": r.created_at_ms,
            })
        })
        .collect();
    json!({
        "name": info.name,
        "status": status(info.status),
        "thread": info.thread,
        "workflow": s.spec.workflow,
        "spec": s.spec,
        "last_tick_ms": s.last_tick_ms,
        "next_tick_ms": s.next_tick_ms,
        "next_ticks": next_ticks(info),
        "started": s.started + runs.triggered,
        "triggered": runs.triggered,
        "skipped": s.skipped,
        "last_runs": last,
    })
}

/// The schedule's next ticks from its stored next one, before its end: none once it ended
/// (deleted, or past its end).
fn next_ticks(info: &ScheduleInfo) -> Vec<u64> {
    let s = &info.state;
    let mut out = Vec::new();
    if info.status.is_terminal() {
        return out;
    }
    // A spec that was accepted at creation parses; one that no longer does shows no ticks.
    let Ok(rule) = Rule::new(&s.spec.every) else { return out };
    let mut next = s.next_tick_ms;
    while let Some(at) = next {
        if out.len() >= NEXT_TICKS || s.spec.end_ms.is_some_and(|end| at >= end) {
            break;
        }
        out.push(at);
        next = rule.next_after(at, s.anchor_ms);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn::Every;
    use cairn::{ScheduleSpec, ScheduleState};

    fn info(status: ThreadStatus, next: Option<u64>, end_ms: Option<u64>) -> ScheduleInfo {
        let spec = ScheduleSpec::new("w", Every::Interval { ms: 1_000 }).between(Some(500), end_ms);
        let state = ScheduleState {
            name: "s".into(),
            spec,
            anchor_ms: 500,
            last_tick_ms: None,
            next_tick_ms: next,
            started: 0,
            skipped: 0,
            last_run: None,
            buffered: None,
        };
        ScheduleInfo { name: "s".into(), status, thread: "schedule:s".into(), state }
    }

    #[test]
    fn next_ticks_follow_the_rule_from_the_stored_next_one_before_the_end() {
        let running = info(ThreadStatus::Sleeping, Some(1_500), None);
        assert_eq!(next_ticks(&running), vec![1_500, 2_500, 3_500, 4_500, 5_500]);
        let ending = info(ThreadStatus::Sleeping, Some(1_500), Some(3_500));
        assert_eq!(next_ticks(&ending), vec![1_500, 2_500], "no tick at or after the end");
        let paused = info(ThreadStatus::Paused, Some(1_500), None);
        assert_eq!(next_ticks(&paused).len(), NEXT_TICKS, "a paused schedule's rhythm is shown");
        for ended in [ThreadStatus::Cancelled, ThreadStatus::Completed] {
            assert_eq!(next_ticks(&info(ended, Some(1_500), None)), Vec::<u64>::new());
        }
        assert_eq!(next_ticks(&info(ThreadStatus::Sleeping, None, None)), Vec::<u64>::new());
    }
}
