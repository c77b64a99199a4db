//! The events of a seed bundle, read and mapped onto Cairn bodies (the table is in `seed.rs`).

use std::collections::{BTreeMap, HashMap};

use cairn_dsl::{NodeError, ToolError, Usage};
use cairn_storage::limits::{NODE_NAME_BYTES_MAX, SUMMARY_BYTES_MAX, TEXT_BYTES_MAX};
use cairn_storage::{CheckpointKind, EventKind, EventStatus};
use serde_json::{Map, Value};

use super::reader::{Obj, bad};
use super::seed_names::seed_event_kind;
use cairn::error::Error;
use cairn::event::{Body, TaskKey};

/// One seed event, read.
pub(super) struct SeedEvent {
    path: String,
    /// The seed's event id.
    pub id: String,
    /// `timestamp`.
    pub timestamp: u64,
    kind: EventKind,
    node: Option<String>,
    failed: bool,
    /// `summary`.
    pub summary: String,
    meta: Map<String, Value>,
    /// Its payload, taken out of the seed's payloads when the body has a place for it.
    payload: Option<(String, Value)>,
}

impl SeedEvent {
    /// Reads the seed event at `path`; `payloads` are the seed's, to resolve its reference.
    pub fn read(v: &Value, path: &str, payloads: &BTreeMap<String, Value>) -> Result<Self, Error> {
        let o = Obj::new(v, path)?;
        o.only(super::reader::SEED_EVENT_FIELDS)?;
        let name = o.string("type")?;
        let kind = seed_event_kind(&name).ok_or_else(|| {
            bad(
                o.at("type"),
                format!(
                    "unknown seed event type {name:?} (node_start, node_end, tool_call, \
                     tool_result, error, retry, checkpoint, budget_warning, budget_exceeded)"
                ),
            )
        })?;
        let status: EventStatus = o.parsed("status")?;
        let meta = match o.opt("metadata") {
            Some(m) => Obj::new(m, &o.at("metadata"))?.map.clone(),
            None => Map::new(),
        };
        let payload = match o.opt_string("payloadRef")? {
            None => None,
            Some(r) => {
                let v = payloads.get(&r).cloned().ok_or_else(|| {
                    bad(o.at("payloadRef"), format!("dangling payload reference {r}"))
                })?;
                Some((r, v))
            }
        };
        let id = o.string("id")?;
        let node = o.opt_string("nodeId")?;
        let summary = o.string("summary")?;
        // The limits the converted bundle is checked against, checked here so that the error
        // names the seed bundle's path.
        for (key, len, max) in [
            ("id", id.len(), TEXT_BYTES_MAX),
            ("nodeId", node.as_ref().map_or(0, String::len), NODE_NAME_BYTES_MAX),
            ("summary", summary.len(), SUMMARY_BYTES_MAX),
        ] {
            if len > max {
                return Err(bad(o.at(key), format!("{len} bytes, over the limit of {max}")));
            }
        }
        Ok(Self {
            path: path.to_owned(),
            id,
            timestamp: o.u64("timestamp")?,
            kind,
            node,
            failed: status == EventStatus::Failure,
            summary,
            meta,
            payload,
        })
    }

    fn at(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    fn task(&self, name: &str) -> Result<TaskKey, Error> {
        let node = self.node.as_ref().ok_or_else(|| {
            bad(self.at("nodeId"), format!("missing field: a {name} event names its node"))
        })?;
        Ok(TaskKey::node(node.clone()))
    }

    fn meta_str(&self, key: &str) -> Result<Option<String>, Error> {
        match self.meta.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(self.at(&format!("metadata.{key}")), "expected a string")),
        }
    }

    fn meta_u64(&self, key: &str) -> Result<Option<u64>, Error> {
        match self.meta.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                bad(self.at(&format!("metadata.{key}")), "expected a non-negative integer")
            }),
        }
    }

    /// `metadata.<key>`, else the payload (taken: it is no longer kept aside), else null.
    fn data(&self, key: &str, payloads: &mut BTreeMap<String, Value>) -> Value {
        if let Some(v) = self.meta.get(key) {
            return v.clone();
        }
        match &self.payload {
            Some((r, v)) => {
                payloads.remove(r);
                v.clone()
            }
            None => Value::Null,
        }
    }
}

/// What the mapping of events needs to remember: steps, attempts, calls.
#[derive(Default)]
pub(super) struct Converter {
    /// `node_start`s so far: the current step.
    step: u64,
    /// `node_end`s so far.
    pub completed: u64,
    /// Per node: its attempt, the start of its run, its calls (name, time) in this run.
    attempt: HashMap<String, u32>,
    started_at: HashMap<String, u64>,
    calls: HashMap<String, Vec<(String, u64)>>,
}

impl Converter {
    /// The body of `e`; `later` are the seed events after it, `left` the payloads not yet taken.
    pub fn body(
        &mut self,
        e: &SeedEvent,
        later: &[Value],
        left: &mut BTreeMap<String, Value>,
    ) -> Result<Body, Error> {
        let name = e.kind.as_str();
        let step = self.step.max(1);
        Ok(match e.kind {
            EventKind::NodeStarted => {
                let task = e.task("node_start")?;
                self.step += 1;
                self.started_at.insert(task.node.to_string(), e.timestamp);
                self.calls.remove(&*task.node);
                let attempt = self.attempt(&task);
                Body::NodeStarted { step: self.step, task, attempt, item: None }
            }
            EventKind::NodeCompleted => {
                let task = e.task("node_end")?;
                let since = self.started_at.get(&*task.node).copied().unwrap_or(e.timestamp);
                let duration_ms =
                    e.meta_u64("duration")?.unwrap_or(e.timestamp.saturating_sub(since));
                let attempt = self.attempt.remove(&*task.node).unwrap_or(1);
                self.completed += 1;
                Body::NodeCompleted {
                    step,
                    task,
                    attempt,
                    update: None,
                    goto: Vec::new(),
                    values: Vec::new(),
                    duration_ms,
                    usage: Usage::default(),
                }
            }
            EventKind::ToolCalled => self.tool_called(e, step, left)?,
            EventKind::ToolReturned => self.tool_returned(e, step, left)?,
            EventKind::NodeFailed => {
                let task = e.task(name)?;
                let message = e.meta_str("error")?.unwrap_or_else(|| e.summary.clone());
                let mut error = NodeError::fatal(message);
                if let Some(code) = e.meta_str("code")? {
                    error = error.with_code(code);
                }
                let terminal = !retry_follows(later, &task.node);
                Body::NodeFailed { step, attempt: self.attempt(&task), task, error, terminal }
            }
            EventKind::RetryScheduled => {
                let task = e.task(name)?;
                let attempt = self.attempt(&task).saturating_add(1);
                self.attempt.insert(task.node.to_string(), attempt);
                let delay_ms = e.meta_u64("delay")?.unwrap_or(0);
                Body::RetryScheduled {
                    step,
                    task,
                    attempt,
                    delay_ms,
                    at_ms: e.timestamp.saturating_add(delay_ms),
                    error: NodeError::retryable(e.summary.clone()),
                }
            }
            EventKind::CheckpointCreated => Body::CheckpointCreated {
                kind: CheckpointKind::Manual,
                description: e.summary.clone(),
                checkpoint: None,
            },
            EventKind::BudgetWarning | EventKind::BudgetExceeded => budget(e, name)?,
            other => unreachable!("seed_event_kind never gives {other}"),
        })
    }

    /// The body of `tool_call` event `e` of `step` (its input taken from `left`).
    fn tool_called(
        &mut self,
        e: &SeedEvent,
        step: u64,
        left: &mut BTreeMap<String, Value>,
    ) -> Result<Body, Error> {
        let task = e.task("tool_call")?;
        let tool = e.meta_str("toolName")?.ok_or_else(|| {
            bad(e.at("metadata.toolName"), "missing field: a tool_call names its tool")
        })?;
        let calls = self.calls.entry(task.node.to_string()).or_default();
        let call = u32::try_from(calls.len()).unwrap_or(u32::MAX);
        calls.push((tool.clone(), e.timestamp));
        Ok(Body::ToolCalled {
            step,
            attempt: self.attempt(&task),
            task,
            call,
            name: tool,
            permission: None,
            input: e.data("input", left),
            values: Vec::new(),
        })
    }

    /// The body of `tool_result` event `e` of `step` (its output taken from `left`): the call
    /// it answers is the task's last.
    fn tool_returned(
        &self,
        e: &SeedEvent,
        step: u64,
        left: &mut BTreeMap<String, Value>,
    ) -> Result<Body, Error> {
        let task = e.task("tool_result")?;
        let calls = self.calls.get(&*task.node).map(Vec::as_slice).unwrap_or_default();
        let last_call = calls.last().cloned();
        let tool = match (e.meta_str("toolName")?, &last_call) {
            (Some(t), _) => t,
            (None, Some((t, _))) => t.clone(),
            (None, None) => {
                return Err(bad(
                    e.at("metadata.toolName"),
                    "missing field: a tool_result with no tool_call before it names its tool",
                ));
            }
        };
        let call = u32::try_from(calls.len().saturating_sub(1)).unwrap_or(u32::MAX);
        let since = last_call.map_or(e.timestamp, |(_, at)| at);
        let output = if e.failed {
            Err(ToolError::fatal(e.meta_str("error")?.unwrap_or_else(|| e.summary.clone())))
        } else {
            Ok(e.data("output", left))
        };
        Ok(Body::ToolReturned {
            step,
            attempt: self.attempt(&task),
            task,
            call,
            name: tool,
            output,
            usage: Usage::default(),
            models: BTreeMap::new(),
            duration_ms: e.meta_u64("duration")?.unwrap_or(e.timestamp.saturating_sub(since)),
        })
    }

    fn attempt(&self, task: &TaskKey) -> u32 {
        self.attempt.get(&*task.node).copied().unwrap_or(1)
    }
}

/// The body of budget event `e` (`name`: its seed type), which must agree with its figures.
fn budget(e: &SeedEvent, name: &str) -> Result<Body, Error> {
    let missing = |k: &str| bad(e.at(&format!("metadata.{k}")), "missing field");
    let budget = e.meta_str("budget")?.ok_or_else(|| missing("budget"))?;
    let used = e.meta_u64("used")?.ok_or_else(|| missing("used"))?;
    let limit = e.meta_u64("limit")?.ok_or_else(|| missing("limit"))?;
    let body = Body::Budget { budget, used, limit };
    if body.kind() != e.kind {
        let detail = format!("{used} of {limit} is not a {name} (type)");
        return Err(bad(e.at("metadata.used"), detail));
    }
    Ok(body)
}

/// Whether the next of `later` about `node` is a `retry`.
fn retry_follows(later: &[Value], node: &str) -> bool {
    later
        .iter()
        .find(|e| e.get("nodeId").and_then(Value::as_str) == Some(node))
        .and_then(|e| e.get("type"))
        .is_some_and(|t| t == "retry")
}
