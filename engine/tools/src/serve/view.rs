//! The reads the web view's pages need beyond the JSON API's: a threads listing with a search,
//! a total and counts by status; a thread's graph as SVG coloured by where it stands, its
//! sub-workflow nodes linked to their child threads; a timeline of node runs, tool calls,
//! retries and waits over a window of its log; and the messages of a correlation id as a
//! sequence picture. Routes:
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/api/view/threads?status=&workflow=&label=&q=&limit=&offset=` | a page, `total`, `counts` by status (over the other filters), `workflows`, `now_ms` |
//! | GET | `/api/threads/{id}/graph.svg` | the workflow's graph, each node `<g class="node st-STATUS">`, a sub-workflow node that ran inside `<a href="/ui/threads/CHILD">` |
//! | GET | `/api/threads/{id}/timeline?to=SEQ&last=N` | runs, tool calls and waits folded from the N events up to seq `to` (default the last; N default and max [`TIMELINE_EVENTS_MAX`]), with `earlier` / `later`: the `to` of the windows before and after; a run of a sub-workflow names its `child` thread |
//! | GET | `/api/trace/{id}/sequence.svg` | the messages carrying a correlation id, as a sequence picture |
//!
//! Every read is bounded: a listing reads the thread records (not their logs), a timeline at most
//! [`TIMELINE_EVENTS_MAX`] events, whatever the size of the thread.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use cairn_dsl::DynNodeKind;
use cairn_storage::{Page, Seq, ThreadId, ThreadRecord};
use serde_json::{Value, json};

use super::app::{App, Params, Segment, blocking, pairs, reject, svg_answer};
use super::graph_svg::{Mark, NodeStatus, esc, workflow_svg};
use super::params::{NoParams, Reject};
pub use super::params_view::TIMELINE_EVENTS_MAX;
use super::params_view::{TimelineParams, view_threads_params};
use super::threads::record_of;
use crate::debug::rows::{ThreadDetails, ThreadRow};
use crate::debug::views;
use cairn::admin::{child_id, children_of, decode};
use cairn::event::{Body, TaskKey};
use cairn_core::limits::READ_CHUNK_EVENTS;

type Q = Result<Query<Vec<(String, String)>>, QueryRejection>;

pub(super) async fn threads(State(app): State<App>, q: Q) -> Result<Json<Value>, Reject> {
    let view = view_threads_params(&pairs(q)?)?;
    let (p, search) = (view.list, view.search);
    blocking(move || {
        let store = app.engine.store().as_ref();
        // Every record of the workflow and label filters (the status filter applies after the
        // counts), in pages.
        let mut filter = p.filter();
        let status = filter.status.take();
        const PAGE: usize = 1_000;
        let mut records: Vec<ThreadRecord> = Vec::new();
        loop {
            let batch = store
                .list_threads(&filter, Page { limit: PAGE, offset: records.len() })
                .wait()
                .map_err(|e| reject(e.into(), "threads"))?;
            let done = batch.len() < PAGE;
            records.extend(batch);
            if done {
                break;
            }
        }
        if let Some(q) = search.as_deref() {
            records.retain(|r| matches(r, q));
        }
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        for r in &records {
            *counts.entry(r.status.as_str()).or_default() += 1;
        }
        if let Some(s) = status {
            records.retain(|r| r.status == s);
        }
        let total = records.len();
        records.sort_by(|a, b| views::natural_cmp(a.id.as_str(), b.id.as_str()));
        let rows: Vec<ThreadRow> =
            records.iter().skip(p.offset).take(p.limit).map(views::thread_row).collect();
        let workflows: BTreeSet<String> =
            app.engine.workflows().iter().map(|w| w.id().to_owned()).collect();
        Ok(Json(json!({
            "threads": rows,
            "offset": p.offset,
            "limit": p.limit,
            "total": total,
            "counts": counts,
            "workflows": workflows,
            "now_ms": app.engine.clock().now_ms(),
        })))
    })
    .await
}

/// Whether the search text `q` (lower case) is in the thread's id, workflow or a label.
fn matches(r: &ThreadRecord, q: &str) -> bool {
    r.id.as_str().to_lowercase().contains(q)
        || r.workflow.id.to_lowercase().contains(q)
        || r.labels.iter().any(|(k, v)| format!("{k}={v}").to_lowercase().contains(q))
}

pub(super) async fn graph_svg(
    State(app): State<App>,
    _: Params<NoParams>,
    Segment(id): Segment,
) -> Result<Response, Reject> {
    let record = record_of(&app.engine, &id).await?;
    let wf = match cairn::admin::workflow_for(&app.engine, &record) {
        Ok(wf) => wf,
        // A thread of another version: the newest compiled in of its workflow, if any.
        Err(e) => app.workflow(&record.workflow.id, None).map_err(|_| reject(e, "workflow"))?,
    };
    let details =
        views::thread_details(&app.engine, &record).await.map_err(|e| reject(e, "thread"))?;
    let mut marks = marks(&details);
    let children = children_of(app.engine.store().as_ref(), &record.id)
        .await
        .map_err(|e| reject(e, "thread"))?;
    for node in wf.nodes().iter().filter(|n| matches!(n.kind, DynNodeKind::Subgraph { .. })) {
        if let Some(child) = latest_child(&record.id, &node.name, &children) {
            let mark = marks.entry(node.name.clone()).or_insert_with(|| Mark {
                status: NodeStatus::Idle,
                title: node.name.clone(),
                child: None,
            });
            let _ = write!(mark.title, " (child thread {child})");
            mark.child = Some(child);
        }
    }
    svg_answer(workflow_svg(&wf, &marks))
}

/// The child thread of `parent`'s sub-workflow node `node` that was made last (a node that ran
/// in several steps had one child in each).
fn latest_child(parent: &ThreadId, node: &str, children: &[ThreadRecord]) -> Option<String> {
    let plain = format!("{parent}/{node}@");
    // Deep nesting gives hashed ids (`exec::subgraph::child_id`) ending in the node's name.
    let hashed = format!("-{}", node.chars().take(64).collect::<String>());
    children
        .iter()
        .filter(|c| {
            let id = c.id.as_str();
            id.starts_with(&plain) || (id.starts_with("sub-") && id.ends_with(&hashed))
        })
        .max_by_key(|c| (c.created_at_ms, c.id.as_str().len(), c.id.as_str().to_owned()))
        .map(|c| c.id.to_string())
}

/// Where each node stands, from a thread's details (`cairn show`'s JSON): the waiting node, the
/// latest result of each node that ran, the frontier of a thread that has not ended.
pub(crate) fn marks(details: &ThreadDetails) -> BTreeMap<String, Mark> {
    let mut out = BTreeMap::new();
    let terminal =
        matches!(details.status.as_str(), "completed" | "failed" | "cancelled" | "timed_out");
    // Node results sealed with a key this reader lacks are a placeholder, no node's.
    let sealed = cairn::sealing::Placeholder::of_json(&details.node_results).is_some();
    if let Some(results) = details.node_results.as_object().filter(|_| !sealed) {
        for (node, r) in results {
            let status = match r["status"].as_str() {
                Some("running") if !terminal => NodeStatus::Running,
                Some("failed") => NodeStatus::Failed,
                Some("completed") => NodeStatus::Completed,
                _ => NodeStatus::Idle,
            };
            let attempt = r["attempt"].as_u64().unwrap_or(0);
            let mut title = format!("{node}: {} (attempt {attempt})", status.as_str());
            if let Some(e) = r["error"].as_object() {
                let message = e.values().find_map(|v| v["message"].as_str()).unwrap_or_default();
                let _ = write!(title, ": {message}");
            }
            out.insert(node.clone(), Mark { status, title, child: None });
        }
    }
    if !terminal {
        for node in &details.frontier {
            let running = out.get(node).is_some_and(|m| m.status == NodeStatus::Running);
            if !running {
                let title = format!("{node}: due in the next step");
                let mark = Mark { status: NodeStatus::Pending, title, child: None };
                out.insert(node.clone(), mark);
            }
        }
    }
    let waiting = details.waiting.as_ref().unwrap_or(&Value::Null);
    if let Some(node) = waiting["task"]["node"].as_str() {
        let what = match waiting["type"].as_str() {
            Some("timer") => "a timer".to_owned(),
            _ => format!("input: {}", waiting["prompt"]),
        };
        let title = format!("{node}: waiting for {what}");
        out.insert(node.to_owned(), Mark { status: NodeStatus::Waiting, title, child: None });
    }
    out
}

pub(super) async fn timeline(
    State(app): State<App>,
    Params(p): Params<TimelineParams>,
    Segment(id): Segment,
) -> Result<Json<Value>, Reject> {
    let record = record_of(&app.engine, &id).await?;
    let store = app.engine.store().as_ref();
    let last = record.last.map_or(0, |b| b.seq.0);
    let first = record.first_seq.0.max(1);
    let to = p.to.map_or(last, |to| to.min(last)).max(first.min(last));
    let from = to.saturating_sub(p.last - 1).max(first);
    let children = children_of(store, &record.id).await.map_err(|e| reject(e, "thread"))?;
    let mut fold = Timeline {
        parent: Some(record.id.clone()),
        children: children.iter().map(|c| c.id.to_string()).collect(),
        ..Timeline::default()
    };
    let mut after = from.saturating_sub(1);
    while after < to {
        let chunk = store
            .read_since(&record.id, Seq(after), READ_CHUNK_EVENTS)
            .await
            .map_err(|e| reject(e.into(), "thread"))?;
        let Some(end) = chunk.last().map(|e| e.bookmark.seq.0) else { break };
        for event in chunk.into_iter().filter(|e| e.bookmark.seq.0 <= to) {
            let rec = decode(store, event).await.map_err(|e| reject(e, "thread"))?;
            fold.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body);
        }
        after = end;
    }
    Ok(Json(json!({
        "thread": id,
        "from_seq": from,
        "to_seq": to,
        "last_seq": last,
        "whole": from <= first && to >= last,
        "earlier": (from > first).then(|| from - 1),
        "later": (to < last).then(|| to.saturating_add(p.last).min(last)),
        "runs": fold.runs,
        "waits": fold.waits,
    })))
}

/// Runs, tool calls, retries and waits folded from a window of a thread's log. A run whose start
/// is before the window starts at its first event in it.
#[derive(Default)]
struct Timeline {
    /// The thread, whose sub-workflow runs name their child thread when it is in `children`.
    parent: Option<ThreadId>,
    children: BTreeSet<String>,
    runs: Vec<Value>,
    /// Task (as text) -> index in `runs` of its open run.
    open: BTreeMap<String, usize>,
    waits: Vec<Value>,
    /// Task -> index in `waits` of its open wait.
    open_waits: BTreeMap<String, usize>,
}

impl Timeline {
    fn run(&mut self, key: &TaskKey, step: u64, attempt: u32, at: u64, seq: u64) -> usize {
        let task = key.to_string();
        if let Some(&i) = self.open.get(&task)
            && self.runs[i]["attempt"] == attempt
        {
            return i;
        }
        let child = self
            .parent
            .as_ref()
            .map(|parent| child_id(parent, key, step))
            .filter(|child| self.children.contains(child));
        self.runs.push(json!({
            "task": task, "node": key.node, "step": step, "attempt": attempt, "status": "running",
            "start_ms": at, "end_ms": null, "tools": [], "seq": seq, "child": child,
        }));
        let i = self.runs.len() - 1;
        self.open.insert(task, i);
        i
    }

    fn apply(&mut self, seq: u64, at: u64, body: &Body) {
        match body {
            Body::NodeStarted { step, task, attempt, .. } => {
                let i = self.run(task, *step, *attempt, at, seq);
                self.runs[i]["status"] = json!("running");
            }
            Body::NodeCompleted { step, task, attempt, duration_ms, .. } => {
                let started = at.saturating_sub(*duration_ms);
                let i = self.run(task, *step, *attempt, started, seq);
                let run = &mut self.runs[i];
                run["status"] = json!("completed");
                run["end_ms"] = json!(at);
                self.open.remove(&task.to_string());
            }
            Body::NodeFailed { step, task, attempt, error, terminal } => {
                let i = self.run(task, *step, *attempt, at, seq);
                let run = &mut self.runs[i];
                run["status"] = json!("failed");
                run["end_ms"] = json!(at);
                run["error"] = json!(error.to_string());
                run["terminal"] = json!(terminal);
                self.open.remove(&task.to_string());
            }
            Body::RetryScheduled { task, attempt, delay_ms, .. } => {
                // Marks the failed attempt's run (the one before `attempt`, the next): a retry
                // follows after the delay.
                let key = task.to_string();
                let failed = self.runs.iter_mut().rev().find(|r| {
                    r["task"] == key
                        && r["attempt"].as_u64().is_some_and(|a| a < u64::from(*attempt))
                });
                if let Some(run) = failed {
                    run["retry_delay_ms"] = json!(delay_ms);
                }
            }
            Body::ToolCalled { step, task, attempt, call, name, .. } => {
                let i = self.run(task, *step, *attempt, at, seq);
                if let Some(tools) = self.runs[i]["tools"].as_array_mut() {
                    tools.push(json!({"call": call, "name": name, "start_ms": at, "end_ms": null}));
                }
            }
            Body::ToolReturned { step, task, attempt, call, name, output, duration_ms, .. } => {
                let i = self.run(task, *step, *attempt, at, seq);
                let Some(tools) = self.runs[i]["tools"].as_array_mut() else { return };
                let ok = output.is_ok();
                match tools.iter_mut().rev().find(|t| t["call"] == *call) {
                    Some(t) => {
                        t["end_ms"] = json!(at);
                        t["ok"] = json!(ok);
                    }
                    None => tools.push(json!({
                        "call": call, "name": name, "start_ms": at.saturating_sub(*duration_ms),
                        "end_ms": at, "ok": ok,
                    })),
                }
            }
            Body::InputRequested { task, .. } => self.wait(task.to_string(), "input", at, None),
            Body::TimerSet { task, until_ms, .. } => {
                self.wait(task.to_string(), "timer", at, Some(*until_ms));
            }
            Body::InputReceived { task, .. } | Body::TimerFired { task, .. } => {
                let key = task.to_string();
                match self.open_waits.remove(&key) {
                    Some(i) => self.waits[i]["end_ms"] = json!(at),
                    None => {
                        let kind =
                            if matches!(body, Body::TimerFired { .. }) { "timer" } else { "input" };
                        self.waits.push(
                            json!({"task": key, "kind": kind, "start_ms": null, "end_ms": at}),
                        );
                    }
                }
            }
            Body::StatusChanged { to, .. } if to.is_terminal() => {
                for (_, i) in std::mem::take(&mut self.open) {
                    if self.runs[i]["status"] == "running" {
                        self.runs[i]["status"] = json!("cancelled");
                        self.runs[i]["end_ms"] = json!(at);
                    }
                }
            }
            _ => {}
        }
    }

    /// A wait of `task` starts; its open run, if any, is waiting until it starts again.
    fn wait(&mut self, task: String, kind: &str, at: u64, until: Option<u64>) {
        if let Some(&i) = self.open.get(&task) {
            self.runs[i]["status"] = json!("waiting");
        }
        self.waits.push(
            json!({"task": task, "kind": kind, "start_ms": at, "end_ms": null, "until_ms": until}),
        );
        self.open_waits.insert(task, self.waits.len() - 1);
    }
}

pub(super) async fn sequence_svg(
    State(app): State<App>,
    _: Params<NoParams>,
    Segment(id): Segment,
) -> Result<Response, Reject> {
    let found = views::messages(app.engine.store().as_ref(), &id)
        .await
        .map_err(|e| reject(e, "correlation_id"))?;
    // A picture is no JSON the access layer redacts: a public endpoint redacts what it shows.
    let found = app.answer(Value::Array(found), false);
    let found = found.as_array().map_or(&[][..], Vec::as_slice);
    svg_answer(Ok(sequence(&id, found)))
}

/// The messages as a sequence picture: one lifeline per participant (a node of a thread, or the
/// name a message was sent to), one arrow per message, top to bottom in log order.
///
/// Hand-drawn rather than laid out by a crate: a sequence picture has no layout to search for.
/// Columns are the participants in order of first appearance and rows the messages in order, so
/// every coordinate follows from two indexes. No two texts overlap, whatever the font: a
/// message's label starts right of the left gutter (where its lsn note is) on its own row, and
/// a text that must fit a fixed width (a note in the gutter, a participant's name in its box)
/// is drawn at that width at most (`textLength`) when it could be wider.
pub(crate) fn sequence(correlation_id: &str, messages: &[Value]) -> String {
    const COL: f64 = 190.;
    const ROW: f64 = 46.;
    const TOP: f64 = 70.;
    const LEFT: f64 = 160.;
    let (lifelines, arrows) = participants(messages);
    let x = |col: usize| LEFT + COL * col as f64 + COL / 2.;
    // Each label starts right of its arrow's left end and runs right: the picture is as wide as
    // the longest reaches, counted at a wide character's width.
    let label_of = |m: &Value| {
        let role = m["role"].as_str().unwrap_or_default();
        let content = m["content"].as_str().map_or_else(|| m["content"].to_string(), str::to_owned);
        clip(&format!("{role}: {content}"), LABEL_CHARS_MAX)
    };
    let label_x = |from: usize, to: usize| {
        if from == to { x(from) + 48. } else { x(from.min(to)) + 10. }
    };
    let reach = arrows
        .iter()
        .map(|(from, to, m)| {
            label_x(*from, *to) + WIDE_CHAR_PX * label_of(m).chars().count() as f64 + 10.
        })
        .fold(0., f64::max);
    let width = (LEFT + COL * lifelines.len().max(1) as f64).max(reach);
    let height = TOP + ROW * (arrows.len() as f64 + 1.) + 20.;
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"seq\" data-correlation-id=\"{}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" height=\"{height:.0}\">\
         <style>.seq text{{font:12px sans-serif;fill:#111827}}.life{{stroke:#9ca3af;\
         stroke-dasharray:4 4}}.head rect{{fill:#e0e7ff;stroke:#4338ca}}.head text{{\
         text-anchor:middle;font-weight:600}}.msg line,.msg path{{stroke:#1f2937;\
         stroke-width:1.5;fill:none}}.msg .when{{fill:#6b7280;font-size:11px}}.msg .label{{\
         paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}}</style><defs>\
         <marker id=\"seq-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"8\" \
         markerHeight=\"8\" orient=\"auto\"><path d=\"M0 0L10 5L0 10z\" fill=\"#1f2937\"/>\
         </marker></defs>",
        esc(correlation_id)
    );
    draw_lifelines(&mut out, &lifelines, x, COL, height);
    for (row, (from, to, m)) in arrows.iter().enumerate() {
        let y = TOP + ROW * (row as f64 + 0.5);
        message_head(&mut out, m, y, LEFT - 14.);
        let (x1, x2) = (x(*from), x(*to));
        let label = esc(&label_of(m));
        let lx = label_x(*from, *to);
        if from == to {
            let _ = write!(
                out,
                "<path d=\"M{x1:.0} {:.0}h40v16h-38\" marker-end=\"url(#seq-arrow)\"/>\
                 <text class=\"label\" x=\"{lx:.0}\" y=\"{:.0}\">{label}</text>",
                y - 8.,
                y + 4.,
            );
        } else {
            let _ = write!(
                out,
                "<line x1=\"{x1:.0}\" y1=\"{y:.0}\" x2=\"{x2:.0}\" y2=\"{y:.0}\" \
                 marker-end=\"url(#seq-arrow)\"/><text class=\"label\" x=\"{lx:.0}\" \
                 y=\"{:.0}\">{label}</text>",
                y - 7.,
            );
        }
        out.push_str("</g>");
    }
    if arrows.is_empty() {
        let _ = write!(
            out,
            "<text x=\"10\" y=\"{TOP:.0}\">no message carries correlation id {}</text>",
            esc(correlation_id)
        );
    }
    out.push_str("</svg>");
    out
}

/// A message's arrow in the sequence picture: (column from, column to, message).
type Arrow<'a> = (usize, usize, &'a Value);

/// The participants of `messages` (key, label), in order of first appearance, and each
/// message's arrow.
fn participants(messages: &[Value]) -> (Vec<(String, String)>, Vec<Arrow<'_>>) {
    let mut lifelines: Vec<(String, String)> = Vec::new();
    let mut column = |key: String, label: String| -> usize {
        match lifelines.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                lifelines.push((key, label));
                lifelines.len() - 1
            }
        }
    };
    let mut arrows = Vec::new();
    for m in messages {
        let thread = m["thread"].as_str().unwrap_or_default();
        let node = m["node"].as_str().unwrap_or_default();
        let from = column(format!("{thread}/{node}"), format!("{thread}\n{node}"));
        let to = match m["to"].as_str() {
            Some(to) => {
                // A name of a node of the same thread is that node; a `thread/node` is that
                // node of that thread; another name stands for itself.
                let key = if to.contains('/') { to.to_owned() } else { format!("{thread}/{to}") };
                let label = match to.split_once('/') {
                    Some((t, n)) => format!("{t}\n{n}"),
                    None => format!("{thread}\n{to}"),
                };
                column(key, label)
            }
            None => from,
        };
        arrows.push((from, to, m));
    }
    (lifelines, arrows)
}

/// Draws one lifeline per participant (`lifelines`: key, label) at `x(column)`, each head
/// `col` wide, each line down to `height`.
fn draw_lifelines(
    out: &mut String,
    lifelines: &[(String, String)],
    x: impl Fn(usize) -> f64,
    col: f64,
    height: f64,
) {
    for (i, (key, label)) in lifelines.iter().enumerate() {
        let cx = x(i);
        let _ = write!(
            out,
            "<g class=\"head\" data-participant=\"{}\"><title>{}</title><rect x=\"{:.0}\" y=\"10\" \
             width=\"{:.0}\" height=\"40\" rx=\"4\"/>",
            esc(key),
            esc(key),
            cx - col / 2. + 8.,
            col - 16.
        );
        for (k, line) in label.lines().enumerate() {
            let y = 26 + 16 * k;
            let _ = write!(out, "<text x=\"{cx:.0}\" y=\"{y}\"{}>", fit(line, col - 28., 9.5));
            let _ = write!(out, "{}</text>", esc(&clip(line, 24)));
        }
        let _ = write!(
            out,
            "</g><line class=\"life\" x1=\"{cx:.0}\" y1=\"50\" x2=\"{cx:.0}\" y2=\"{:.0}\"/>",
            height - 10.
        );
    }
}

/// Opens the group of message `m`, drawn at row `y`: its title and, in the left gutter
/// (`gutter` wide), where it is in the log.
fn message_head(out: &mut String, m: &Value, y: f64, gutter: f64) {
    let role = m["role"].as_str().unwrap_or_default();
    let content = m["content"].as_str().map_or_else(|| m["content"].to_string(), str::to_owned);
    let when = clip(
        &format!("lsn {} · {} #{}", m["lsn"], m["thread"].as_str().unwrap_or_default(), m["seq"]),
        24,
    );
    let _ = write!(
        out,
        "<g class=\"msg\" data-lsn=\"{}\"><title>{}</title><text class=\"when\" x=\"4\" \
         y=\"{:.0}\"{}>{}</text>",
        m["lsn"],
        esc(&format!("{role} → {}: {content}", m["to"].as_str().unwrap_or("(none)"))),
        y + 4.,
        fit(&when, gutter, 7.),
        esc(&when)
    );
}

/// The characters of a message's label at most (the whole message is in the arrow's tooltip
/// and the list beside the picture).
const LABEL_CHARS_MAX: usize = 60;

/// A wide character's width at 12 px (a sans-serif `W` is about 11 px; most are near 7): what
/// the picture's width is counted at, so a label never runs past its right edge.
const WIDE_CHAR_PX: f64 = 9.;

/// A `textLength` attribute holding `text` to `width_px` when it could be wider (at
/// `char_px` a character, a wide one's width at its size), else nothing: a short text is drawn
/// as the font has it.
fn fit(text: &str, width_px: f64, char_px: f64) -> String {
    if text.chars().count() as f64 * char_px <= width_px {
        return String::new();
    }
    format!(" textLength=\"{width_px:.0}\" lengthAdjust=\"spacingAndGlyphs\"")
}

/// At most `max` characters of `s`, with an ellipsis when cut.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}
