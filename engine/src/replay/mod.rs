//! Replay: re-run a thread's nodes against the current code, feeding them what was recorded
//! (tool results, clock readings, random numbers, ids, human input), and compare what they
//! produce with what was recorded. The first difference is reported precisely (a
//! non-determinism report). Overrides of recorded tool results give a what-if: the node runs
//! with the alternative result and the report shows what it would have produced instead.
//! Replay reads the log only; it never writes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use cairn_dsl::{Ctx, DynNodeKind, DynWorkflow, Target};
use cairn_storage::{Event, Seq, Store, ThreadId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::core::codec;
use crate::error::Error;
use crate::limits;

mod child;
mod node;
use crate::core::event::{Body, TaskKey};
use crate::core::thread_ctx::{TaskJournal, ThreadCtx};
use node::{ReplayNodeContext, ReplayNodeState};

/// What to replay with.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// What-if: recorded tool results to replace, by (step, task as shown in events, call index).
    pub overrides: BTreeMap<(u64, String, u32), Value>,
    /// The code to replay against, when not the registered workflow (e.g. a changed definition
    /// under test); its fingerprint is not checked.
    pub workflow: Option<Arc<DynWorkflow>>,
}

/// The first place the current code disagrees with the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// The step.
    pub step: u64,
    /// The task (node, or `node[item]`).
    pub task: String,
    /// The seq of the recorded event compared against.
    pub seq: u64,
    /// What differs.
    pub what: String,
    /// What was recorded.
    pub recorded: Value,
    /// What the code produced now.
    pub produced: Value,
    /// The sub-workflow child thread it happened in, when not the replayed thread itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

impl std::fmt::Display for Divergence {
    /// One line for people (a status reason, a log line): where, what, and both sides, each
    /// value cut to a readable length.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(child) = &self.child {
            write!(f, "in child thread {child}, ")?;
        }
        write!(
            f,
            "step {}, task {} (event seq {}): {}: recorded {}, the code now gives {}",
            self.step,
            self.task,
            self.seq,
            self.what,
            cut(&self.recorded),
            cut(&self.produced)
        )
    }
}

/// `v` as JSON, cut to [`DISPLAY_VALUE_CHARS`] characters.
fn cut(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(DISPLAY_VALUE_CHARS) {
        Some((end, _)) => format!("{}...", &s[..end]),
        None => s,
    }
}

/// Characters of each value a [`Divergence`]'s one-line form shows (the report keeps them whole).
const DISPLAY_VALUE_CHARS: usize = 200;

/// The result of a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// The thread.
    pub thread: String,
    /// Replay started from the context after this seq: 1 (the thread's creation) for a whole
    /// replay, a checkpoint's seq for a replay of the tail since that checkpoint.
    pub after_seq: u64,
    /// Tasks re-run and compared.
    pub tasks_replayed: u64,
    /// Sub-workflow tasks not re-run themselves: their child threads are replayed (and
    /// counted in `tasks_replayed`) instead.
    pub tasks_skipped: u64,
    /// Sub-workflow child threads replayed with it (at any depth).
    pub children_replayed: u64,
    /// The first difference, if any (with overrides: the first effect of the overrides).
    pub divergence: Option<Divergence>,
}

impl ReplayReport {
    /// Whether the code reproduced the record exactly.
    pub fn is_deterministic(&self) -> bool {
        self.divergence.is_none()
    }
}

/// A recorded tool call: name, input (`None` when only the checkpoint's journal knows the call,
/// which keeps name and result but not input), result.
pub(crate) type RecordedCall = (String, Option<Value>, Result<Value, cairn_dsl::ToolError>);

/// The child workflow with id `id` that a sub-workflow node of `parent` runs.
pub(crate) fn child_workflow(parent: &DynWorkflow, id: &str) -> Option<Arc<DynWorkflow>> {
    parent.nodes().iter().find_map(|node| match &node.kind {
        DynNodeKind::Subgraph { child, .. } if child.id() == id => Some(child.clone()),
        _ => None,
    })
}

/// Replays the events of `id` after `start` (the context at some seq: the thread's creation, or
/// a checkpoint) against `wf`: re-runs each task completed after it with what was recorded and
/// compares. Tasks of a step open at `start` find the tool results and values drawn before it in
/// `start`'s journals. Reads only; the cost is the events after `start`.
///
/// # Errors
/// Storage and record errors (a log that does not fold onto `start`).
pub(crate) async fn replay_after(
    store: &dyn Store,
    wf: &Arc<DynWorkflow>,
    id: &ThreadId,
    start: ThreadCtx,
    overrides: &BTreeMap<(u64, String, u32), Value>,
) -> Result<ReplayReport, Error> {
    let mut report = ReplayReport {
        thread: id.to_string(),
        after_seq: start.meta.seq,
        tasks_replayed: 0,
        tasks_skipped: 0,
        children_replayed: 0,
        divergence: None,
    };
    let mut c = start;
    let mut recordings = Recordings::open_at(&c);
    // What every task's replay context shares, made once for the whole replay.
    let shared = Arc::new(Shared {
        thread: id.to_string(),
        overrides: overrides.clone(),
        cancel: CancellationToken::new(),
    });
    let mut after = c.meta.seq;
    loop {
        let events = store.read_since(id, Seq(after), limits::READ_CHUNK_EVENTS).await?;
        let n = events.len();
        for event in events {
            // An offloaded payload is read here, awaited (`core` decodes what it is given).
            let event = match crate::core::restore::offloaded(&event) {
                Some(r) => Event { data: store.payload(r).await?, ..event },
                None => event,
            };
            let rec = codec::decode_loaded(event)?;
            let seq = rec.bookmark.seq.0;
            after = seq;
            recordings.note(&rec.body);
            match &rec.body {
                Body::NodeCompleted {
                    step, task, attempt, update, goto, values: drawn, ..
                } if report.divergence.is_none() => {
                    let node = wf.node_id(&task.node).map(|i| &wf.nodes()[i]);
                    if matches!(node.map(|n| &n.kind), Some(DynNodeKind::Subgraph { .. })) {
                        report.tasks_skipped += 1;
                    } else {
                        // Values the task drew: those flushed with its tool calls and inputs
                        // (in the journal) plus those recorded at completion.
                        let empty = TaskJournal::default();
                        let journal = c.meta.open.get(task).unwrap_or(&empty);
                        let mut values: VecDeque<Value> = journal.values.iter().cloned().collect();
                        values.extend(drawn.iter().cloned());
                        let (recorded_calls, item) = recordings.take(*step, task, *attempt);
                        let run = ReplayNodeContext {
                            shared: shared.clone(),
                            step: *step,
                            task: task.clone(),
                            attempt: *attempt,
                            item,
                            st: Mutex::new(ReplayNodeState::of(
                                journal,
                                values,
                                recorded_calls,
                                &c.meta,
                            )),
                        };
                        report.tasks_replayed += 1;
                        report.divergence =
                            compare(wf, run, &c, seq, update.as_ref(), goto).await?;
                    }
                }
                Body::StepCompleted { step, next, .. } if report.divergence.is_none() => {
                    report.divergence = routing_divergence(wf, &c, *step, next, seq);
                }
                _ => {}
            }
            if report.divergence.is_some() {
                // The first difference is the report; what follows it would only echo it.
                return Ok(report);
            }
            c.apply(seq, rec.bookmark.at_ms, &rec.body)?;
        }
        if n < limits::READ_CHUNK_EVENTS {
            break;
        }
    }
    Ok(report)
}

/// What the log recorded for tasks not completed yet: their tool calls per (step, task,
/// attempt), from ToolCalled and ToolReturned, and their map items per (step, task).
#[derive(Default)]
struct Recordings {
    calls: BTreeMap<(u64, TaskKey, u32), Vec<RecordedCall>>,
    items: BTreeMap<(u64, TaskKey), Value>,
}

impl Recordings {
    /// Those of the step open at `start`: the tool calls its journals kept (inputs unknown, so
    /// not compared).
    fn open_at(start: &ThreadCtx) -> Self {
        let mut calls = BTreeMap::new();
        for (task, journal) in &start.meta.open {
            let r = (0..journal.calls_started.max(journal.tools.len() as u32) as usize)
                .map(|i| match journal.tools.get(i) {
                    Some(t) => (t.name.clone(), None, t.output.clone()),
                    // Started, not yet returned at `start`: its ToolReturned follows.
                    None => (String::new(), None, Ok(Value::Null)),
                })
                .collect();
            calls.insert((start.meta.step + 1, task.clone(), journal.attempt), r);
        }
        Recordings { calls, items: BTreeMap::new() }
    }

    /// Notes what `body` records for a task: its map item, a tool call, or the call's result.
    fn note(&mut self, body: &Body) {
        let Recordings { calls, items } = self;
        match body {
            Body::NodeStarted { step, task, item: Some(item), .. } => {
                items.insert((*step, task.clone()), item.clone());
            }
            Body::ToolCalled { step, task, attempt, call, name, input, .. } => {
                // By index: a call in flight at a crash is issued again after it (same
                // index), and only the second one has a result.
                let r = calls.entry((*step, task.clone(), *attempt)).or_default();
                let i = *call as usize;
                if r.len() <= i {
                    r.resize(i + 1, (String::new(), None, Ok(Value::Null)));
                }
                r[i] = (name.clone(), Some(input.clone()), Ok(Value::Null));
            }
            Body::ToolReturned { step, task, attempt, call, name, output, .. } => {
                if let Some(slot) = calls
                    .get_mut(&(*step, task.clone(), *attempt))
                    .and_then(|r| r.get_mut(*call as usize))
                {
                    slot.0.clone_from(name);
                    slot.2 = output.clone();
                }
            }
            _ => {}
        }
    }

    /// The tool calls and the item recorded for the attempt of `task` at `step` that completes:
    /// an attempt completes once, so they are not kept (the maps stay empty for tasks that call
    /// no tool and map no item).
    fn take(
        &mut self,
        step: u64,
        task: &TaskKey,
        attempt: u32,
    ) -> (Vec<RecordedCall>, Option<Value>) {
        let calls = if self.calls.is_empty() {
            Vec::new()
        } else {
            self.calls.remove(&(step, task.clone(), attempt)).unwrap_or_default()
        };
        // A map task logs its item with its start in every run that completes (`NodeStarted`),
        // so the item is after `start` whenever the completion is.
        let item =
            if self.items.is_empty() { None } else { self.items.remove(&(step, task.clone())) };
        (calls, item)
    }
}

/// The divergence of the routing after `step` (recorded as `next` at `seq`) from the one `wf`
/// computes on `c` now, if they differ.
fn routing_divergence(
    wf: &DynWorkflow,
    c: &ThreadCtx,
    step: u64,
    next: &[String],
    seq: u64,
) -> Option<Divergence> {
    let routed = crate::core::decide::route_step(wf, c, step);
    // Compared as they are; turned into JSON for the report only when they differ.
    let differs = match &routed {
        Ok((now, _)) => now != next,
        Err(_) => true,
    };
    if !differs {
        return None;
    }
    let produced = match routed {
        Ok((now, _)) => serde_json::to_value(now).unwrap_or(Value::Null),
        Err(e) => Value::String(e.to_string()),
    };
    let recorded = serde_json::to_value(next).unwrap_or(Value::Null);
    Some(Divergence {
        child: None,
        step,
        task: c.meta.open.keys().map(ToString::to_string).collect::<Vec<_>>().join(","),
        seq,
        what: "the routing after the step differs".into(),
        recorded,
        produced,
    })
}

/// What the replay contexts of all tasks of one replay share.
pub(super) struct Shared {
    /// The thread's id.
    pub(super) thread: String,
    /// The what-if's replaced tool results.
    pub(super) overrides: BTreeMap<(u64, String, u32), Value>,
    /// The tasks' cancellation token (a replay is never cancelled).
    pub(super) cancel: CancellationToken,
}

/// Runs the task `replay_ctx` replays against `wf` on `ctx`, and compares what it produces with
/// the completion recorded at `seq` (`update`, `goto`).
async fn compare(
    wf: &DynWorkflow,
    replay_ctx: ReplayNodeContext,
    ctx: &ThreadCtx,
    seq: u64,
    update: Option<&Value>,
    goto: &[Target],
) -> Result<Option<Divergence>, Error> {
    let step = replay_ctx.step;
    let Some(id) = wf.node_id(&replay_ctx.task.node) else {
        let node = Value::String(replay_ctx.task.node.to_string());
        let what = "the node no longer exists";
        return Ok(Some(divergence(step, &replay_ctx.task, seq, what, node, Value::Null)));
    };
    let handler = match &wf.nodes()[id].kind {
        DynNodeKind::Task(h) | DynNodeKind::Map { handler: h, .. } => h.clone(),
        DynNodeKind::Subgraph { .. } => return Ok(None),
    };
    let replay_ctx = Arc::new(replay_ctx);
    let produced = handler(ctx.state.as_ref(), Ctx::new(replay_ctx.clone())).await;
    let task = &replay_ctx.task;
    let differs = |what: &str, recorded, produced| {
        Some(divergence(step, task, seq, what, recorded, produced))
    };
    let st = replay_ctx.st.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((what, recorded, now)) = st.first.clone() {
        return Ok(differs(&what, recorded, now));
    }
    if (st.next_call as usize) < st.calls.len() {
        let missing = &st.calls[st.next_call as usize];
        return Ok(differs(
            "the code made fewer tool calls than recorded",
            Value::String(missing.0.clone()),
            Value::Null,
        ));
    }
    let out = match produced {
        Ok(out) => out,
        Err(e) => {
            let now = serde_json::to_value(&e).unwrap_or(Value::Null);
            return Ok(differs(
                "the node failed where it completed",
                update.cloned().unwrap_or(Value::Null),
                now,
            ));
        }
    };
    if out.update.as_ref() != update {
        return Ok(differs(
            "the update differs",
            update.cloned().unwrap_or(Value::Null),
            out.update.unwrap_or(Value::Null),
        ));
    }
    if out.goto != goto {
        let rec = serde_json::to_value(goto).unwrap_or(Value::Null);
        let now = serde_json::to_value(&out.goto).unwrap_or(Value::Null);
        return Ok(differs("the chosen targets differ", rec, now));
    }
    Ok(None)
}

/// The report of a difference in `task` of `step`, seen at `seq`.
fn divergence(
    step: u64,
    task: &TaskKey,
    seq: u64,
    what: &str,
    recorded: Value,
    produced: Value,
) -> Divergence {
    Divergence {
        child: None,
        step,
        task: task.to_string(),
        seq,
        what: what.to_owned(),
        recorded,
        produced,
    }
}
