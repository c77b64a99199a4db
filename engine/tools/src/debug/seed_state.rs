//! A seed bundle's `State` object as a Cairn snapshot.
//!
//! The whole seed `State` becomes the snapshot's user state, unchanged, so nothing of it is
//! lost; the parts Cairn tracks itself are copied into the snapshot's meta, so that `cairn show`
//! and the bundle summary see them:
//!
//! | seed `State`                                  | Cairn `ThreadMeta`                        |
//! |-----------------------------------------------|-------------------------------------------|
//! | `id`                                          | `thread` (the thread id)                  |
//! | `createdAt`, `updatedAt`                      | `created_at_ms`, `updated_at_ms`          |
//! | `conversation.messages[]` `{role, content}`   | `conversation` (a `timestamp` is dropped) |
//! | `task.currentNode`                            | `frontier` (one node)                     |
//! | `task.progress` (0..=100), `currentStepIndex`, `steps[]` | `progress` (`percent`, step of total) |
//! | `telemetry.tokenCount`, `toolCallCount`, `errorCount`, `retryCount`, `nodeTimings` | `telemetry.tokens`, `tool_calls`, `errors`, `retries`, `node_ms` |
//! | `policy.maxToolCalls`, `maxDuration`          | `policy.budgets.max_tool_calls`, `max_wall_ms` |
//! | `policy.permissions` (name -> bool)           | `policy.permissions` (the names set true) |
//!
//! `memory`, `artifacts`, `task.goal`/`plan`, `policy.maxRetries` and `telemetry.totalDuration`
//! have no place in the meta and stay in the user state (`totalDuration` also becomes the
//! bundle's `telemetry.totalDuration`). Every field above is optional except `id`, `createdAt` and
//! `updatedAt`; one that is present with the wrong type is an error naming its path.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use cairn_dsl::{Budgets, Message, Progress};
use cairn_storage::{ThreadId, ThreadStatus, WorkflowRef};
use serde_json::Value;

use super::bundle_summary::BundleTelemetry;
use super::reader::{Obj, array, bad};
use cairn::error::Error;
use cairn::event::ThreadPolicy;
use cairn::thread_ctx::{Snapshot, Telemetry, ThreadMeta};

/// A seed `State`, read and checked.
pub(super) struct SeedState {
    /// The thread id (`id`).
    pub id: ThreadId,
    /// `createdAt`.
    pub created_at_ms: u64,
    /// `updatedAt`.
    pub updated_at_ms: u64,
    /// `task.progress`, when given.
    pub progress: Option<f64>,
    /// The bundle telemetry it gives.
    pub telemetry: BundleTelemetry,
    meta: ThreadMeta,
    value: Value,
}

impl SeedState {
    /// Reads the seed `State` at `path`.
    pub fn read(v: &Value, path: &str, workflow: &WorkflowRef) -> Result<Self, Error> {
        let o = Obj::new(v, path)?;
        let id = ThreadId::new(o.string("id")?).map_err(|e| bad(o.at("id"), e.to_string()))?;
        let created_at_ms = o.u64("createdAt")?;
        let updated_at_ms = o.u64("updatedAt")?;
        let conversation = match object_at(&o, "conversation")? {
            Some(c) => messages(&c)?,
            None => Vec::new(),
        };
        let (frontier, progress, percent) = match object_at(&o, "task")? {
            Some(t) => task(&t)?,
            None => (Vec::new(), None, None),
        };
        let (telemetry, bundle_telemetry) = match object_at(&o, "telemetry")? {
            Some(t) => telemetry(&t, updated_at_ms.saturating_sub(created_at_ms))?,
            None => (
                Telemetry::default(),
                BundleTelemetry {
                    total_duration: updated_at_ms.saturating_sub(created_at_ms),
                    ..BundleTelemetry::default()
                },
            ),
        };
        let policy = match object_at(&o, "policy")? {
            Some(p) => policy(&p)?,
            None => ThreadPolicy::default(),
        };
        let meta = ThreadMeta {
            restores: 0,
            thread: id.to_string(),
            workflow: workflow.clone(),
            status: ThreadStatus::Paused,
            input: Value::Null,
            output: None,
            seq: 0,
            step: 0,
            frontier,
            arrivals: BTreeMap::new(),
            visits: BTreeMap::new(),
            open: BTreeMap::new(),
            waiting: None,
            node_results: BTreeMap::new(),
            history: VecDeque::new(),
            errors: VecDeque::new(),
            conversation,
            progress,
            telemetry,
            labels: BTreeMap::new(),
            fork: None,
            policy,
            budget_warned: Vec::new(),
            seed: None,
            signals: BTreeMap::new(),
            updates: Default::default(),
            updates_refused: BTreeMap::new(),
            continued_as: None,
            continued_from: None,
            undos: Vec::new(),
            unwinding: None,
            published: BTreeMap::new(),
            published_in_step: std::collections::BTreeSet::new(),
            promises: std::collections::BTreeSet::new(),
            checkpoint_requests: Default::default(),
            created_at_ms,
            updated_at_ms,
        };
        Ok(Self {
            id,
            created_at_ms,
            updated_at_ms,
            progress: percent,
            telemetry: bundle_telemetry,
            meta,
            value: v.clone(),
        })
    }

    /// The snapshot after `seq`, at `step` (node runs completed), with `status`.
    pub fn snapshot(&self, seq: u64, step: u64, status: ThreadStatus) -> Snapshot {
        let mut meta = self.meta.clone();
        meta.seq = seq;
        meta.step = step;
        meta.telemetry.steps = step;
        meta.status = status;
        Snapshot { meta, state: self.value.clone() }
    }
}

/// The object at `key`, `None` when absent or null.
fn object_at<'a>(o: &Obj<'a>, key: &str) -> Result<Option<Obj<'a>>, Error> {
    o.opt(key).map(|v| Obj::new(v, &o.at(key))).transpose()
}

fn messages(c: &Obj<'_>) -> Result<Vec<Message>, Error> {
    let Some(list) = c.opt("messages") else { return Ok(Vec::new()) };
    let path = c.at("messages");
    let mut out = Vec::new();
    for (i, item) in array(list, &path)?.iter().enumerate() {
        let m = Obj::new(item, &format!("{path}[{i}]"))?;
        out.push(Message::new(m.string("role")?, m.string("content")?));
    }
    Ok(out)
}

/// What a seed `task` gives: the frontier, the progress, and its percent.
type TaskParts = (Vec<String>, Option<Progress>, Option<f64>);

fn task(t: &Obj<'_>) -> Result<TaskParts, Error> {
    let frontier = t.opt_string("currentNode")?.into_iter().collect();
    let Some(p) = t.opt("progress") else { return Ok((frontier, None, None)) };
    let percent = p
        .as_f64()
        .filter(|p| (0.0..=100.0).contains(p))
        .ok_or_else(|| bad(t.at("progress"), "expected a number in 0..=100"))?;
    let total = match t.opt("steps") {
        Some(s) => array(s, &t.at("steps"))?.len(),
        None => 0,
    };
    let index = t.opt_u64("currentStepIndex")?.unwrap_or(0);
    let progress = Progress {
        step: u32::try_from(index.saturating_add(1)).unwrap_or(u32::MAX),
        total: u32::try_from(total).unwrap_or(u32::MAX),
        message: String::new(),
        percent: Some(percent as f32),
        detail: None,
    };
    Ok((frontier, Some(progress), Some(percent)))
}

fn telemetry(t: &Obj<'_>, elapsed_ms: u64) -> Result<(Telemetry, BundleTelemetry), Error> {
    let node_ms: BTreeMap<String, u64> = t.opt_typed("nodeTimings")?.unwrap_or_default();
    let cairn = Telemetry {
        tool_calls: t.opt_u64("toolCallCount")?.unwrap_or(0),
        errors: t.opt_u64("errorCount")?.unwrap_or(0),
        retries: t.opt_u64("retryCount")?.unwrap_or(0),
        tokens: t.opt_u64("tokenCount")?.unwrap_or(0),
        node_ms: node_ms.iter().map(|(k, ms)| (k.as_str().into(), *ms)).collect(),
        ..Telemetry::default()
    };
    let bundle = BundleTelemetry {
        total_duration: t.opt_u64("totalDuration")?.unwrap_or(elapsed_ms),
        token_count: cairn.tokens,
        tool_call_count: cairn.tool_calls,
        error_count: cairn.errors,
        retry_count: cairn.retries,
        node_timings: node_ms,
    };
    Ok((cairn, bundle))
}

fn policy(p: &Obj<'_>) -> Result<ThreadPolicy, Error> {
    let max_tool_calls = p.opt_u64("maxToolCalls")?;
    let max_wall_ms = p.opt_u64("maxDuration")?;
    let budgets = (max_tool_calls.is_some() || max_wall_ms.is_some()).then(|| Budgets {
        max_tool_calls,
        max_wall_ms,
        ..Budgets::default()
    });
    let permissions = p
        .opt_typed::<BTreeMap<String, bool>>("permissions")?
        .map(|m| m.into_iter().filter(|(_, on)| *on).map(|(k, _)| k).collect::<BTreeSet<_>>());
    Ok(ThreadPolicy { deadline_at_ms: None, budgets, permissions, start_at_ms: None })
}
