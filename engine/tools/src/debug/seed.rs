//! Bundles of the framework Cairn grew from (the "seed" format, version [`SEED_VERSION`]),
//! converted on read into a Cairn [`Bundle`] that is then validated like any other.
//!
//! The two formats share their outline (`version`, `timestamp`, `state`, `events.events`,
//! `events.payloads`, `checkpoints`, `metadata`); they differ in what is inside:
//!
//! - `version` `0.1.0` is read as an alias of this format: the converted bundle has Cairn's
//!   version and `metadata.source_version: "0.1.0"`, so writing it out again gives a Cairn
//!   bundle that reads back equal.
//! - `state` (a seed `State`) becomes the snapshot's user state whole; see `seed_state.rs` for
//!   what is also copied into the meta. `state.id` is the thread id.
//! - Seed events carry no engine body, so each is mapped onto the Cairn event kind of
//!   [`seed_event_kind`](super::seed_names::seed_event_kind) with a body built from the seed event's fields (below). Seed event
//!   `i` (0-based) becomes seq `i + 2`: seq 1 is a `thread_created` made up for it (workflow
//!   [`SEED_WORKFLOW_ID`], input `null`, at `state.createdAt`), since every Cairn log starts
//!   with one. The seed's `id` and `summary` stay on the bundle event; its `status` is the
//!   body's (a `tool_result` with status `failure` is a tool error).
//! - A seed payload goes into the body where the body has a place for it (a `tool_call`'s input
//!   when its metadata has none, a `tool_result`'s output when its metadata has none); any other
//!   (the seed's own example stores a query's rows with its `tool_call`) is kept in
//!   `metadata.custom.seedPayloads` under its seed reference, so the bundle loses nothing.
//! - `checkpoints[].eventIndex` counts the seed events before the checkpoint, so it covers seq
//!   `eventIndex + 1`; an index past the events the bundle holds (the seed can cut its event
//!   list to the last N) covers the last seq, and the original index is kept in the
//!   checkpoint's `metadata.custom.seed_event_index`.
//! - `metadata.platform` is the bundle's platform; every other seed metadata field goes to
//!   `metadata.custom`.
//! - The thread's status, which the seed does not record: `failed` if the last event is an
//!   `error`, `completed` if `task.progress` is 100, otherwise `paused`, so that nothing resumes
//!   it. Its workflow is [`SEED_WORKFLOW_ID`], which no Cairn binary has: an imported seed
//!   thread is for viewing. It is read ([`SEED_THREAD_READS`](super::SEED_THREAD_READS): shown,
//!   its events and checkpoints listed, exported again when it has a checkpoint) and controlled
//!   ([`SEED_THREAD_CONTROLS`](super::SEED_THREAD_CONTROLS)); `state_at`, replay, fork, resume,
//!   input and rollback need its workflow, so they refuse it
//!   ([`SEED_THREAD_REFUSED`](super::SEED_THREAD_REFUSED)). `cairn bundle import` says so.
//!
//! | seed `type`       | Cairn kind         | body built from the seed event                      |
//! |-------------------|--------------------|-----------------------------------------------------|
//! | `node_start`      | `node_started`     | `nodeId`; each one begins a new step                |
//! | `node_end`        | `node_completed`   | no update; `metadata.duration` or the time since the node's start |
//! | `tool_call`       | `tool_called`      | `metadata.toolName` (required), `metadata.input`    |
//! | `tool_result`     | `tool_returned`    | `metadata.toolName` (else the node's last call), `metadata.output`, or `metadata.error` / the summary when status is `failure` |
//! | `error`           | `node_failed`      | `metadata.error` or the summary, `metadata.code`; terminal unless a `retry` of the node follows |
//! | `retry`           | `retry_scheduled`  | the next attempt, `metadata.delay` (ms, default 0)  |
//! | `checkpoint`      | `checkpoint_created` | a manual checkpoint described by the summary      |
//! | `budget_warning`, `budget_exceeded` | the same | `metadata.budget`, `metadata.used`, `metadata.limit` (required) |
//!
//! Every node event needs `nodeId`. Anything missing or of the wrong type is an
//! [`Error::Bundle`] naming the seed bundle's JSON path.

use std::collections::BTreeMap;

use cairn_storage::{CheckpointKind, CheckpointMeta, ThreadStatus, WorkflowRef};
use serde_json::Value;

use super::bundle::{
    BUNDLE_EVENTS_MAX, BUNDLE_VERSION, Bundle, BundleCheckpoint, BundleEvent, BundleMetadata,
    BundleRedaction, BundleThread, EventsExport,
};
use super::bundle_summary::tool_results;
use super::reader::{Obj, array, bad};
use super::seed_events::{Converter, SeedEvent};
use super::seed_names::{SEED_VERSION, SEED_WORKFLOW_ID};
use super::seed_state::SeedState;
use super::validate::place_body;
use cairn::error::Error;
use cairn::event::Body;

/// The Cairn bundle of the seed bundle `v` (types and required fields checked here,
/// semantics by `Bundle::validate` after).
pub(crate) fn bundle(v: &Value) -> Result<Bundle, Error> {
    let o = Obj::new(v, "$")?;
    o.only(&["version", "timestamp", "state", "events", "checkpoints", "metadata"])?;
    let workflow =
        WorkflowRef { id: SEED_WORKFLOW_ID.into(), version: 0, fingerprint: SEED_VERSION.into() };
    let state = SeedState::read(o.req("state")?, &o.at("state"), &workflow)?;
    let ev = Obj::new(o.req("events")?, &o.at("events"))?;
    ev.only(&["events", "payloads"])?;
    let all: BTreeMap<String, Value> = match ev.opt("payloads") {
        Some(p) => Obj::new(p, &ev.at("payloads"))?.map.clone().into_iter().collect(),
        None => BTreeMap::new(),
    };
    // The payloads no body takes, kept aside in the metadata.
    let mut left = all.clone();
    let list_path = ev.at("events");
    let items = array(ev.req("events")?, &list_path)?;
    if items.len() >= BUNDLE_EVENTS_MAX {
        let detail = format!("{} events, over the limit of {}", items.len(), BUNDLE_EVENTS_MAX - 1);
        return Err(bad(list_path, detail));
    }
    let mut conv = Converter::default();
    let created = created(&workflow);
    let mut events = EventsExport::default();
    let mut bodies = vec![(1, created.clone())];
    push(&mut events, 1, "thread-created".into(), state.created_at_ms, None, created)?;
    let mut steps_at = vec![0];
    for (i, item) in items.iter().enumerate() {
        let seq = i as u64 + 2;
        let e = SeedEvent::read(item, &format!("{list_path}[{i}]"), &all)?;
        let body = conv.body(&e, &items[i + 1..], &mut left)?;
        bodies.push((seq, body.clone()));
        steps_at.push(conv.completed);
        push(&mut events, seq, e.id, e.timestamp, Some(e.summary), body)?;
    }
    let last = items.len() as u64 + 1;
    let status = match (items.last().and_then(|e| e.get("type")), state.progress) {
        (Some(Value::String(t)), _) if t == "error" => ThreadStatus::Failed,
        (_, Some(p)) if p >= 100.0 => ThreadStatus::Completed,
        _ => ThreadStatus::Paused,
    };
    let checkpoints = match o.opt("checkpoints") {
        None => None,
        Some(v) => {
            Some(checkpoints(v, &o.at("checkpoints"), &state, &workflow, &steps_at, status)?)
        }
    };
    let (platform, custom) = platform_and_custom(&o, left)?;
    let tool_results_summary = tool_results(bodies.iter().map(|(s, b)| (*s, b)))?;
    Ok(Bundle {
        version: BUNDLE_VERSION.to_owned(),
        timestamp: o.u64("timestamp")?,
        state: state.snapshot(last, conv.completed, status),
        events,
        base: None,
        checkpoints,
        telemetry: Some(state.telemetry.clone()),
        tool_results_summary: Some(tool_results_summary),
        metadata: BundleMetadata {
            cairn_version: env!("CARGO_PKG_VERSION").to_owned(),
            workflow,
            platform,
            thread: BundleThread {
                id: state.id.to_string(),
                status,
                created_at_ms: state.created_at_ms,
                updated_at_ms: state.updated_at_ms,
                labels: BTreeMap::new(),
                parent: None,
                first_seq: 1,
                last_seq: last,
            },
            redaction: BundleRedaction::default(),
            custom,
            source_version: Some(SEED_VERSION.to_owned()),
        },
    })
}

/// The creation event of a thread of the seed workflow `workflow`.
fn created(workflow: &WorkflowRef) -> Body {
    Body::ThreadCreated {
        workflow: workflow.clone(),
        input: Value::Null,
        frontier: Vec::new(),
        labels: BTreeMap::new(),
        fork: None,
        arrivals: BTreeMap::new(),
        visits: BTreeMap::new(),
        policy: Default::default(),
        seed: None,
    }
}

/// The platform the seed bundle's metadata names ("unknown" if none), and the rest of its
/// metadata, with the payloads no body took (`left`).
fn platform_and_custom(
    o: &Obj<'_>,
    left: BTreeMap<String, Value>,
) -> Result<(String, BTreeMap<String, Value>), Error> {
    let mut custom: BTreeMap<String, Value> = BTreeMap::new();
    let mut platform = "unknown".to_owned();
    if let Some(m) = o.opt("metadata") {
        for (k, v) in &Obj::new(m, &o.at("metadata"))?.map.clone() {
            match (k.as_str(), v) {
                ("platform", Value::String(p)) => platform.clone_from(p),
                _ => drop(custom.insert(k.clone(), v.clone())),
            }
        }
    }
    if !left.is_empty() {
        custom.insert("seedPayloads".into(), Value::Object(left.into_iter().collect()));
    }
    Ok((platform, custom))
}

/// Appends the bundle event of `body` at `seq`.
fn push(
    out: &mut EventsExport,
    seq: u64,
    id: String,
    timestamp: u64,
    summary: Option<String>,
    body: Body,
) -> Result<(), Error> {
    let (payload_ref, metadata) = place_body(serde_json::to_value(&body)?, &mut out.payloads)?;
    out.events.push(BundleEvent {
        id,
        seq,
        timestamp,
        kind: body.kind(),
        node_id: body.node().map(str::to_owned),
        status: body.status(),
        summary: summary.unwrap_or_else(|| body.summary()),
        payload_ref,
        metadata,
    });
    Ok(())
}

/// The seed's checkpoints, at the seqs they cover, in seq order.
fn checkpoints(
    v: &Value,
    path: &str,
    state: &SeedState,
    workflow: &WorkflowRef,
    steps_at: &[u64],
    status: ThreadStatus,
) -> Result<Vec<BundleCheckpoint>, Error> {
    let last = steps_at.len() as u64;
    let mut out = Vec::new();
    for (i, item) in array(v, path)?.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let o = Obj::new(item, &at)?;
        o.only(&["id", "stateId", "state", "eventIndex", "timestamp", "metadata"])?;
        let state_id = o.string("stateId")?;
        if state_id != state.id.as_str() {
            let detail = format!("is not the bundle's state id {}", state.id);
            return Err(bad(o.at("stateId"), detail));
        }
        let snapshot = SeedState::read(o.req("state")?, &o.at("state"), workflow)?;
        let index = o.u64("eventIndex")?;
        let seq = index.saturating_add(1).min(last);
        let mut custom = BTreeMap::new();
        custom.insert("seed_event_index".to_owned(), index.to_string());
        if let Some(m) = o.opt("metadata") {
            for (k, v) in &Obj::new(m, &o.at("metadata"))?.map.clone() {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                custom.insert(k.clone(), text);
            }
        }
        let step = steps_at.get(usize::try_from(seq - 1).unwrap_or(usize::MAX)).copied();
        let cp_status = if seq == last { status } else { ThreadStatus::Paused };
        let id = o.string("id")?;
        out.push(BundleCheckpoint {
            id: id.clone(),
            state_id: state.id.to_string(),
            state: snapshot.snapshot(seq, step.unwrap_or(0), cp_status),
            event_index: seq,
            timestamp: o.u64("timestamp")?,
            kind: CheckpointKind::Manual,
            workflow: workflow.clone(),
            metadata: CheckpointMeta {
                creator: format!("seed {SEED_VERSION}"),
                description: format!("checkpoint {id} of a seed bundle"),
                tags: vec![SEED_WORKFLOW_ID.to_owned()],
                custom,
            },
        });
    }
    out.sort_by_key(|c| c.event_index);
    Ok(out)
}
