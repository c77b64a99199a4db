//! What a thread's log says happened: the tool calls it recorded and the human inputs it got.
//!
//! The crash harness reads this from the store before and after recovery: the tool calls whose
//! results were recorded are the ones recovery must not run again, and the recorded calls at the
//! end must equal the uninterrupted run's.

use std::collections::{BTreeMap, HashMap};

use cairn_dsl::ToolError;
use cairn_storage::{Event, EventKind, Seq, Store, ThreadId};
use serde_json::Value;

use crate::effects::Effect;
use cairn::Error;
use cairn::event::Body;

/// One recorded tool call: where it was made, what it was asked, what it returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The thread that made it: the harness's thread, or one of its sub-workflow child threads
    /// (whose ids derive from the parent, task and step, so they are the same in every run).
    pub thread: String,
    /// The step.
    pub step: u64,
    /// The task (`node` or `node[i]`).
    pub task: String,
    /// The attempt of the task.
    pub attempt: u32,
    /// The call's index within the attempt.
    pub call: u32,
    /// The tool's name.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// Its recorded result.
    pub output: Result<Value, ToolError>,
}

impl ToolCallRecord {
    /// The side effect this call stands for.
    pub fn effect(&self) -> Effect {
        Effect::new(&self.name, &self.input)
    }
}

/// A thread's log, read back and decoded.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogView {
    /// Every event of the observed thread itself, in seq order.
    pub events: Vec<Event>,
    /// Tool calls with a recorded result, in log order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Results recorded twice for one (step, task, attempt, call): must never happen.
    pub duplicate_commits: u64,
    /// Human inputs delivered.
    pub inputs_received: usize,
}

/// Every event of `thread` (none if it does not exist yet).
///
/// # Errors
/// Storage errors (a damaged record is [`cairn_storage::Error::Corrupted`]).
pub(crate) fn read_all(store: &dyn Store, thread: &ThreadId) -> Result<Vec<Event>, Error> {
    let mut out: Vec<Event> = Vec::new();
    loop {
        let after = out.last().map_or(Seq(0), |e| e.bookmark.seq);
        match store.read_since(thread, after, cairn_storage::limits::READ_LIMIT_MAX).wait() {
            Ok(events) if events.is_empty() => return Ok(out),
            Ok(events) => out.extend(events),
            Err(cairn_storage::Error::UnknownThread(_)) => return Ok(out),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads and decodes `thread`'s log; the tool calls, inputs and duplicate commits of its
/// sub-workflow child threads (and theirs) count too. `events` are the thread's own.
///
/// # Errors
/// Storage errors; [`Error::Record`] for a body that does not decode.
pub(crate) fn observe(store: &dyn Store, thread: &ThreadId) -> Result<LogView, Error> {
    let mut view = observe_one(store, thread)?;
    // Sub-workflow child threads make tool calls of their own: they are part of what the thread
    // did. Level by level, without recursion (nesting is bounded by the DSL's depth limit).
    let mut parents = vec![thread.clone()];
    while let Some(parent) = parents.pop() {
        for child in cairn::blocking::children_of(store, &parent)?.into_iter().map(|r| r.id) {
            let child_view = observe_one(store, &child)?;
            view.tool_calls.extend(child_view.tool_calls);
            view.duplicate_commits += child_view.duplicate_commits;
            view.inputs_received += child_view.inputs_received;
            parents.push(child);
        }
    }
    Ok(view)
}

/// One thread's own log, without its children.
fn observe_one(store: &dyn Store, thread: &ThreadId) -> Result<LogView, Error> {
    let events = read_all(store, thread)?;
    let mut view = LogView::default();
    let mut inputs: HashMap<(u64, String, u32, u32), (String, Value)> = HashMap::new();
    let mut returned: BTreeMap<(u64, String, u32, u32), u32> = BTreeMap::new();
    for event in &events {
        if !matches!(
            event.kind,
            EventKind::ToolCalled | EventKind::ToolReturned | EventKind::InputReceived
        ) {
            continue;
        }
        match cairn::blocking::decode(store, event.clone())?.body {
            Body::ToolCalled { step, task, attempt, call, name, input, .. } => {
                inputs.insert((step, task.to_string(), attempt, call), (name, input));
            }
            Body::ToolReturned { step, task, attempt, call, name, output, .. } => {
                let key = (step, task.to_string(), attempt, call);
                let times = returned.entry(key.clone()).or_default();
                *times += 1;
                if *times > 1 {
                    view.duplicate_commits += 1;
                }
                let input = inputs.get(&key).map(|(_, input)| input.clone()).unwrap_or(Value::Null);
                view.tool_calls.push(ToolCallRecord {
                    thread: thread.to_string(),
                    step,
                    task: key.1,
                    attempt,
                    call,
                    name,
                    input,
                    output,
                });
            }
            Body::InputReceived { .. } => view.inputs_received += 1,
            _ => {}
        }
    }
    view.events = events;
    Ok(view)
}

/// The tool calls in a canonical order (thread, step, task, attempt, call): concurrent tasks record
/// their calls in whatever order they ran, which is not part of what must be equal.
pub(crate) fn canonical(calls: &[ToolCallRecord]) -> Vec<ToolCallRecord> {
    let mut sorted = calls.to_vec();
    sorted.sort_by(|a, b| {
        (&a.thread, a.step, &a.task, a.attempt, a.call)
            .cmp(&(&b.thread, b.step, &b.task, b.attempt, b.call))
    });
    sorted
}

/// Counts of each effect.
pub(crate) fn multiset(effects: impl IntoIterator<Item = Effect>) -> BTreeMap<Effect, u64> {
    let mut out = BTreeMap::new();
    for effect in effects {
        *out.entry(effect).or_insert(0) += 1;
    }
    out
}
