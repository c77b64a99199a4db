//! The thread context (what a checkpoint's snapshot holds) and the pure function that moves it
//! one event on.
//!
//! This is the functional core: [`ThreadCtx::apply`] takes one recorded event and returns the
//! context after it, touching nothing else. The runner builds a step's events, applies them here,
//! and appends them; restore loads a checkpoint's [`Snapshot`] and applies the events after it.
//! Because both go through the same function, the state restored at any seq equals the state the
//! live run had at that seq.

use std::collections::{BTreeMap, VecDeque};

use cairn_dsl::{DynState, DynWorkflow, Message, NodeError, Progress, Target, ToolError};
use cairn_storage::{ThreadStatus, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::compensation::Unwinding;
use crate::core::event::{Body, ForkOrigin, TaskKey, ThreadPolicy};
pub use crate::core::telemetry::Telemetry;
use crate::core::telemetry::add_usage;
use crate::error::Error;
use crate::limits;

/// One tool call recorded in an open step: what the memo returns when the task runs again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// Tool name (checked against the call on re-execution).
    pub name: String,
    /// A hash of the call's input ([`input_hash`]), checked against the call on re-execution:
    /// a recorded result is only ever returned for the input it was recorded for. `None` in
    /// snapshots written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_hash: Option<String>,
    /// The recorded result.
    pub output: Result<Value, ToolError>,
}

/// What a finished task of the open step produced, waiting for the step to complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOutcome {
    /// The update, applied when the step completes.
    pub update: Option<Value>,
    /// Targets the node chose.
    pub goto: Vec<Target>,
}

/// The journal of one task of the open step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskJournal {
    /// The current attempt (1-based).
    pub attempt: u32,
    /// Results of tool calls, in call order, for this attempt.
    pub tools: Vec<ToolRecord>,
    /// Tool calls started (a call started but not returned was in flight at a crash).
    pub calls_started: u32,
    /// The input hash of the call started last, until its result is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub called_input_hash: Option<String>,
    /// Recorded clock readings, random numbers and ids, in the order the node drew them.
    pub values: Vec<Value>,
    /// Human inputs delivered, in order of the node's interrupts.
    pub inputs: Vec<Value>,
    /// Durable timers of this task that have fired.
    pub timers_fired: u32,
    /// When the next attempt may start (after a retry backoff).
    pub not_before_ms: u64,
    /// Set once the task finished in this step.
    pub outcome: Option<TaskOutcome>,
}

/// What a parked thread waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Waiting {
    /// Human input for a task.
    Input {
        /// The waiting task.
        task: TaskKey,
        /// What it asked.
        prompt: Value,
    },
    /// A signal for a task (`ctx.recv`).
    Signal {
        /// The waiting task.
        task: TaskKey,
        /// The signal's name.
        name: String,
    },
    /// A durable timer.
    Timer {
        /// The sleeping task.
        task: TaskKey,
        /// When it fires.
        until_ms: u64,
    },
}

/// The latest result of a node (its status, attempt, times and error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeResult {
    /// "running", "completed" or "failed".
    pub status: String,
    /// Attempt number of the latest run.
    pub attempt: u32,
    /// When the latest attempt started.
    pub started_at_ms: u64,
    /// When it ended.
    pub finished_at_ms: Option<u64>,
    /// Its error, if it failed.
    pub error: Option<NodeError>,
}

/// One entry of the execution history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The seq of the event.
    pub seq: u64,
    /// The step.
    pub step: u64,
    /// The task.
    pub task: TaskKey,
    /// "completed", "failed", "retry", "waiting".
    pub what: String,
    /// When.
    pub at_ms: u64,
}

/// One recorded error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEntry {
    /// The seq of the event.
    pub seq: u64,
    /// The task.
    pub task: TaskKey,
    /// The error.
    pub error: NodeError,
    /// When.
    pub at_ms: u64,
}

/// Everything about a thread except its user state, serialisable (the checkpoint body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMeta {
    /// Thread id.
    pub thread: String,
    /// Workflow it is pinned to.
    pub workflow: WorkflowRef,
    /// Status.
    pub status: ThreadStatus,
    /// The input (the initial state).
    pub input: Value,
    /// The final state, once completed.
    pub output: Option<Value>,
    /// The last seq applied.
    pub seq: u64,
    /// Steps completed.
    pub step: u64,
    /// Nodes of the next (or open) step.
    pub frontier: Vec<String>,
    /// Joins waiting for branches: join node -> sources arrived.
    pub arrivals: BTreeMap<String, Vec<String>>,
    /// How often each node ran (loop bounds).
    pub visits: BTreeMap<String, u32>,
    /// Journals of the open step's tasks.
    #[serde(with = "crate::core::task_map")]
    pub open: BTreeMap<TaskKey, TaskJournal>,
    /// What a parked thread waits for.
    pub waiting: Option<Waiting>,
    /// Per-node latest results.
    pub node_results: BTreeMap<String, NodeResult>,
    /// The most recent history entries (the full history is the event log).
    pub history: VecDeque<HistoryEntry>,
    /// The most recent errors.
    pub errors: VecDeque<ErrorEntry>,
    /// The conversation.
    pub conversation: Vec<Message>,
    /// Last progress reported.
    pub progress: Option<Progress>,
    /// Counters.
    pub telemetry: Telemetry,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Fork origin.
    pub fork: Option<ForkOrigin>,
    /// The thread's own policy.
    #[serde(default)]
    pub policy: ThreadPolicy,
    /// Budgets already warned about (a warning is emitted once per budget).
    #[serde(default)]
    pub budget_warned: Vec<String>,
    /// Rollbacks its recovery strategy `restore_and_retry` made (kept across them, so the
    /// strategy's bound holds). Absent when 0.
    #[serde(default, skip_serializing_if = "crate::core::recovery_fold::is_zero")]
    pub restores: u32,
    /// The seed of the thread's fresh draws, from its `ThreadCreated` event (`None` for threads
    /// created before seeds were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The number of the last signal of each name the thread received (recorded by its
    /// nodes' `recv` / `try_recv`): the next receive of a name takes the first signal of that
    /// name after it. Absent when none was received.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub signals: BTreeMap<String, u64>,
    /// The successor this thread continued as (`ctx.continue_as_new`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_as: Option<String>,
    /// The thread this one continues (it is that thread's successor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_from: Option<String>,
    /// Undos registered by completed tasks (`ctx.on_undo`), in registration order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undos: Vec<crate::core::compensation::Undo>,
    /// Set once the thread failed for good and its undos run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwinding: Option<crate::core::compensation::Unwinding>,
    /// Created at (engine clock).
    pub created_at_ms: u64,
    /// Updated at (engine clock).
    pub updated_at_ms: u64,
}

/// A serialised thread context: what a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Everything but the user state.
    pub meta: ThreadMeta,
    /// The user state as JSON.
    pub state: Value,
}

/// The live thread context: the user state in its own type plus [`ThreadMeta`].
#[derive(Debug)]
pub struct ThreadCtx {
    /// Everything but the user state.
    pub meta: ThreadMeta,
    /// The user state.
    pub state: Box<dyn DynState>,
}

impl Clone for ThreadCtx {
    fn clone(&self) -> Self {
        Self { meta: self.meta.clone(), state: self.state.clone_box() }
    }
}

impl ThreadMeta {
    /// An [`Error::Record`] of this thread at `seq`.
    fn record(&self, seq: u64, detail: String) -> Error {
        Error::record(&self.thread, seq, detail)
    }

    /// The budgets in force: the thread's own, else the workflow's.
    pub fn budgets<'a>(&'a self, wf: &'a DynWorkflow) -> &'a cairn_dsl::Budgets {
        self.policy.budgets.as_ref().unwrap_or_else(|| wf.budgets())
    }

    /// The permissions tool calls may use: the thread's own, else the workflow's.
    pub fn permissions<'a>(
        &'a self,
        wf: &'a DynWorkflow,
    ) -> &'a std::collections::BTreeSet<String> {
        self.policy.permissions.as_ref().unwrap_or_else(|| wf.permissions())
    }
}

impl ThreadCtx {
    /// The context right after the `ThreadCreated` event at `seq` 1.
    ///
    /// # Errors
    /// [`Error::Record`] if `body` is not a `ThreadCreated`, or the input is not a valid state.
    pub fn created(wf: &DynWorkflow, thread: &str, body: &Body, at_ms: u64) -> Result<Self, Error> {
        let Body::ThreadCreated {
            workflow,
            input,
            frontier,
            labels,
            fork,
            arrivals,
            visits,
            policy,
            seed,
        } = body
        else {
            let detail = "the first event of a thread is not thread_created";
            return Err(Error::record(thread, 1, detail));
        };
        let state = wf.state_from_json(input).map_err(|e| {
            Error::record(thread, 1, format!("the input is not a valid state: {e}"))
        })?;
        Ok(Self {
            state,
            meta: ThreadMeta {
                thread: thread.to_owned(),
                workflow: workflow.clone(),
                status: ThreadStatus::Created,
                input: input.clone(),
                output: None,
                seq: 1,
                step: 0,
                frontier: frontier.clone(),
                arrivals: arrivals.clone(),
                visits: visits.clone(),
                open: BTreeMap::new(),
                waiting: None,
                node_results: BTreeMap::new(),
                history: VecDeque::new(),
                errors: VecDeque::new(),
                conversation: Vec::new(),
                progress: None,
                telemetry: Telemetry::default(),
                labels: labels.clone(),
                fork: fork.clone(),
                policy: policy.clone(),
                budget_warned: Vec::new(),
                restores: 0,
                seed: *seed,
                signals: BTreeMap::new(),
                continued_as: None,
                continued_from: None,
                undos: Vec::new(),
                unwinding: None,
                created_at_ms: at_ms,
                updated_at_ms: at_ms,
            },
        })
    }

    /// Rebuilds a context from a checkpoint's snapshot.
    ///
    /// # Errors
    /// [`Error::Record`] if the state does not decode as the workflow's state type.
    pub fn from_snapshot(wf: &DynWorkflow, snapshot: Snapshot) -> Result<Self, Error> {
        let state = wf.state_from_json(&snapshot.state).map_err(|e| {
            let detail = format!("checkpoint state does not decode: {e}");
            Error::record(&snapshot.meta.thread, snapshot.meta.seq, detail)
        })?;
        Ok(Self { meta: snapshot.meta, state })
    }

    /// The serialisable form of this context.
    ///
    /// # Errors
    /// [`Error::Codec`] if the user state does not serialise.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        let state = self.state.to_json().map_err(|e| Error::Codec(e.to_string()))?;
        Ok(Snapshot { meta: self.meta.clone(), state })
    }

    /// The JSON of [`ThreadCtx::snapshot`], serialised from the context as it is (the meta
    /// borrowed, not cloned): what the runner's checkpoints store.
    ///
    /// # Errors
    /// [`Error::Codec`] if the state does not serialise.
    pub fn snapshot_json(&self) -> Result<Vec<u8>, Error> {
        /// [`Snapshot`]'s fields, borrowed: the same JSON, byte for byte.
        #[derive(Serialize)]
        struct Borrowed<'a> {
            meta: &'a ThreadMeta,
            state: Value,
        }
        let state = self.state.to_json().map_err(|e| Error::Codec(e.to_string()))?;
        Ok(serde_json::to_vec(&Borrowed { meta: &self.meta, state })?)
    }

    /// Applies one recorded event. Pure: the result depends only on `self` and the event.
    ///
    /// # Errors
    /// [`Error::Record`] when the event cannot follow the context (a seq gap, an update that does
    /// not decode): the log and the workflow disagree, which restore must not paper over.
    #[expect(clippy::too_many_lines, reason = "split by issue 39's decide helper")]
    pub fn apply(&mut self, seq: u64, at_ms: u64, body: &Body) -> Result<(), Error> {
        if seq != self.meta.seq + 1 {
            return Err(self.meta.record(seq, format!("expected seq {}", self.meta.seq + 1)));
        }
        self.meta.seq = seq;
        // A checkpoint records the thread where it stands and does not move it: its time is not
        // the thread's (a checkpoint of a finished thread made a day later would add the day to
        // the thread's wall time and "updated").
        if !matches!(body, Body::CheckpointCreated { .. }) {
            self.meta.updated_at_ms = self.meta.updated_at_ms.max(at_ms);
        }
        let m = &mut self.meta;
        if let Body::ToolCalled { values, .. }
        | Body::NodeCompleted { values, .. }
        | Body::InputRequested { values, .. }
        | Body::SignalAwaited { values, .. }
        | Body::TimerSet { values, .. } = body
        {
            for (name, n) in crate::core::drawn::signals_in(values) {
                let last = m.signals.entry(name.to_owned()).or_default();
                *last = (*last).max(n);
            }
        }
        match body {
            Body::ThreadCreated { .. } => {
                return Err(self.meta.record(seq, "thread_created after the first event".into()));
            }
            Body::StatusChanged { to, .. } => m.status = *to,
            Body::NodeStarted { task, attempt, .. } => {
                let j = m.open.entry(task.clone()).or_default();
                if j.attempt != *attempt {
                    *j = TaskJournal { attempt: *attempt, ..TaskJournal::default() };
                }
                m.node_results.insert(
                    task.node.clone(),
                    NodeResult {
                        status: "running".into(),
                        attempt: *attempt,
                        started_at_ms: at_ms,
                        finished_at_ms: None,
                        error: None,
                    },
                );
            }
            Body::ToolCalled { task, attempt, values, input, .. } => {
                let j = journal(m, task, *attempt);
                j.calls_started += 1;
                j.called_input_hash = Some(input_hash(input));
                j.values.extend(values.iter().cloned());
                m.telemetry.tool_calls += 1;
            }
            Body::ToolReturned { task, attempt, name, output, usage, models, .. } => {
                let j = journal(m, task, *attempt);
                let input_hash = j.called_input_hash.take();
                j.tools.push(ToolRecord { name: name.clone(), input_hash, output: output.clone() });
                add_usage(&mut m.telemetry, usage, models);
            }
            Body::NodeCompleted {
                step,
                task,
                attempt,
                update,
                goto,
                values,
                duration_ms,
                usage,
            } => {
                // No NodeStarted of this attempt before it: the runner left it implied (the
                // task completed in the batch that started it).
                let implied = m.open.get(task).is_none_or(|j| j.attempt != *attempt);
                let j = journal(m, task, *attempt);
                j.values.extend(values.iter().cloned());
                j.outcome = Some(TaskOutcome { update: update.clone(), goto: goto.clone() });
                let undos = crate::core::compensation::registered(task, *step, &j.values);
                m.undos.extend(undos);
                add_usage(&mut m.telemetry, usage, &BTreeMap::new());
                match m.telemetry.node_ms.get_mut(&task.node) {
                    Some(ms) => *ms += duration_ms,
                    None => {
                        m.telemetry.node_ms.insert(task.node.clone(), *duration_ms);
                    }
                }
                if implied {
                    let result = NodeResult {
                        status: String::new(),
                        attempt: *attempt,
                        started_at_ms: at_ms.saturating_sub(*duration_ms),
                        finished_at_ms: Some(at_ms),
                        error: None,
                    };
                    // In place when the node ran before (a loop's every step): no allocation.
                    let r = match m.node_results.get_mut(&task.node) {
                        Some(r) => {
                            let status = std::mem::take(&mut r.status);
                            *r = NodeResult { status, ..result };
                            r
                        }
                        None => m.node_results.entry(task.node.clone()).or_insert(result),
                    };
                    set_str(&mut r.status, "completed");
                } else if let Some(r) = m.node_results.get_mut(&task.node) {
                    if r.attempt != *attempt {
                        // A retried attempt that completed in the batch that started it.
                        r.attempt = *attempt;
                        r.started_at_ms = at_ms.saturating_sub(*duration_ms);
                    }
                    set_str(&mut r.status, "completed");
                    r.finished_at_ms = Some(at_ms);
                    r.error = None;
                }
                push_history(m, seq, *step, task, "completed", at_ms);
            }
            Body::NodeFailed { step, task, attempt, error, terminal } => {
                m.telemetry.errors += 1;
                if let Some(r) = m.node_results.get_mut(&task.node) {
                    r.status = "failed".into();
                    r.attempt = *attempt;
                    r.finished_at_ms = Some(at_ms);
                    r.error = Some(error.clone());
                }
                m.errors.push_back(ErrorEntry {
                    seq,
                    task: task.clone(),
                    error: error.clone(),
                    at_ms,
                });
                while m.errors.len() > limits::SNAPSHOT_ERRORS_ENTRIES_MAX {
                    m.errors.pop_front();
                }
                let what = if *terminal { "failed" } else { "attempt failed" };
                push_history(m, seq, *step, task, what, at_ms);
            }
            Body::RetryScheduled { step, task, attempt, at_ms: not_before, .. } => {
                m.telemetry.retries += 1;
                let j = m.open.entry(task.clone()).or_default();
                *j = TaskJournal {
                    attempt: *attempt,
                    not_before_ms: *not_before,
                    ..TaskJournal::default()
                };
                push_history(m, seq, *step, task, "retry scheduled", at_ms);
            }
            Body::InputRequested { step, task, prompt, values } => {
                let attempt = m.open.get(task).map_or(1, |j| j.attempt);
                journal(m, task, attempt).values.extend(values.iter().cloned());
                m.waiting = Some(Waiting::Input { task: task.clone(), prompt: prompt.clone() });
                push_history(m, seq, *step, task, "waiting for input", at_ms);
            }
            Body::InputReceived { task, value } => {
                m.open.entry(task.clone()).or_default().inputs.push(value.clone());
                m.waiting = None;
            }
            Body::SignalAwaited { step, task, name, values } => {
                let attempt = m.open.get(task).map_or(1, |j| j.attempt);
                journal(m, task, attempt).values.extend(values.iter().cloned());
                m.waiting = Some(Waiting::Signal { task: task.clone(), name: name.clone() });
                push_history(m, seq, *step, task, &format!("waiting for signal {name}"), at_ms);
            }
            Body::SignalArrived { .. } => m.waiting = None,
            Body::TimerSet { step, task, until_ms, values } => {
                let attempt = m.open.get(task).map_or(1, |j| j.attempt);
                journal(m, task, attempt).values.extend(values.iter().cloned());
                m.waiting = Some(Waiting::Timer { task: task.clone(), until_ms: *until_ms });
                push_history(m, seq, *step, task, "sleeping", at_ms);
            }
            Body::TimerFired { task, .. } => {
                m.open.entry(task.clone()).or_default().timers_fired += 1;
                m.waiting = None;
            }
            Body::StepCompleted { step, next, arrivals } => {
                if *step != m.step + 1 {
                    let detail = format!("step {step} follows step {}", m.step);
                    return Err(self.meta.record(seq, detail));
                }
                self.complete_step(seq, *step, next, arrivals)?;
            }
            Body::CheckpointCreated { .. } => m.telemetry.checkpoints += 1,
            Body::Progress { progress, .. } => m.progress = Some(progress.clone()),
            Body::Message { message, .. } => {
                m.conversation.push(message.clone());
            }
            Body::Output { output } => m.output = Some(output.clone()),
            Body::StateUpdated { update, .. } => {
                let detail = |e| format!("state update does not apply: {e}");
                self.state.apply_json(update).map_err(|e| self.meta.record(seq, detail(e)))?;
            }
            Body::Budget { budget, used, limit } => {
                if used < limit && !m.budget_warned.contains(budget) {
                    m.budget_warned.push(budget.clone());
                }
            }
            Body::BudgetsSet { budgets } => {
                m.policy.budgets = Some(budgets.clone());
                // New limits: warn again when the new fractions are crossed.
                m.budget_warned.clear();
            }
            Body::RolledBack { snapshot, .. } => {
                let bad = |detail: String| {
                    self.meta
                        .record(seq, format!("the rolled-back context does not apply: {detail}"))
                };
                let to = Snapshot::deserialize(snapshot).map_err(|e| bad(e.to_string()))?;
                self.state.replace_json(&to.state).map_err(|e| bad(e.to_string()))?;
                // The checkpoint's context, at this seq; the status moves by its own event.
                let (status, updated_at_ms) = (self.meta.status, self.meta.updated_at_ms);
                let restores = self.meta.restores;
                self.meta = ThreadMeta { seq, status, updated_at_ms, restores, ..to.meta };
            }
            Body::RecoveryApplied { step, task, strategy, .. } => {
                crate::core::recovery_fold::apply(m, *step, task, strategy);
                push_history(m, seq, *step, task, &format!("recovery: {}", strategy.name()), at_ms);
            }
            Body::ContinuedAsNew { thread, .. } => m.continued_as = Some(thread.clone()),
            Body::ContinuedFrom { thread } => m.continued_from = Some(thread.clone()),
            Body::LabelsChanged { set, removed } => {
                m.labels.retain(|k, _| !removed.contains(k));
                m.labels.extend(set.clone());
            }
            Body::CompensationBegan { reason, .. } => {
                let reason = reason.clone();
                m.unwinding = Some(Unwinding { reason, done: 0, running: None });
            }
            Body::UndoStarted { index, .. } => {
                if let Some(u) = &mut m.unwinding {
                    u.running = Some(*index);
                }
            }
            Body::UndoFinished { .. } => {
                if let Some(u) = &mut m.unwinding {
                    u.running = None;
                    u.done += 1;
                }
            }
            Body::Recovered { .. } | Body::Lock { .. } => {}
        }
        Ok(())
    }

    /// Applies the open step's outcomes in task order and moves to the next frontier.
    fn complete_step(
        &mut self,
        seq: u64,
        step: u64,
        next: &[String],
        arrivals: &BTreeMap<String, Vec<String>>,
    ) -> Result<(), Error> {
        let open = std::mem::take(&mut self.meta.open);
        let mut ran: Vec<&str> = Vec::new();
        // BTreeMap order: by node name, then item index. This fixed order is what makes a
        // step's result independent of which task finished first.
        for (task, journal) in &open {
            if ran.last() != Some(&task.node.as_str()) {
                ran.push(&task.node);
            }
            let Some(outcome) = &journal.outcome else {
                return Err(self
                    .meta
                    .record(seq, format!("step {step} completed but {task} did not")));
            };
            if let Some(update) = &outcome.update {
                let detail = |e| format!("update of {task} does not apply: {e}");
                self.state.apply_json(update).map_err(|e| self.meta.record(seq, detail(e)))?;
            }
        }
        for node in ran {
            match self.meta.visits.get_mut(node) {
                Some(n) => *n += 1,
                None => {
                    self.meta.visits.insert(node.to_owned(), 1);
                }
            }
        }
        self.meta.step = step;
        next.clone_into(&mut self.meta.frontier);
        self.meta.arrivals.clone_from(arrivals);
        self.meta.telemetry.steps += 1;
        Ok(())
    }
}

/// The hash a [`ToolRecord`] keeps of its call's input: blake3 of the input's JSON text, 128
/// bits in hex (enough to tell two inputs apart; the input itself stays in the log).
pub fn input_hash(input: &Value) -> String {
    let text = serde_json::to_string(input).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex()[..32].to_owned()
}

fn journal<'a>(m: &'a mut ThreadMeta, task: &TaskKey, attempt: u32) -> &'a mut TaskJournal {
    // The key is cloned only for a task not yet open.
    if !m.open.contains_key(task) {
        m.open.insert(task.clone(), TaskJournal::default());
    }
    let j = m.open.get_mut(task).expect("inserted above");
    if j.attempt != attempt {
        *j = TaskJournal { attempt, ..TaskJournal::default() };
    }
    j
}

fn push_history(m: &mut ThreadMeta, seq: u64, step: u64, task: &TaskKey, what: &str, at_ms: u64) {
    // A full history drops its oldest entry for the new one: that entry's strings are reused.
    let entry = if m.history.len() >= limits::SNAPSHOT_HISTORY_ENTRIES_MAX {
        m.history.pop_front()
    } else {
        None
    };
    let entry = match entry {
        Some(mut e) => {
            e.seq = seq;
            e.step = step;
            e.task.node.clone_from(&task.node);
            e.task.item = task.item;
            set_str(&mut e.what, what);
            e.at_ms = at_ms;
            e
        }
        None => HistoryEntry { seq, step, task: task.clone(), what: what.to_owned(), at_ms },
    };
    m.history.push_back(entry);
    while m.history.len() > limits::SNAPSHOT_HISTORY_ENTRIES_MAX {
        m.history.pop_front();
    }
}

/// Sets `s` to `to`, reusing its allocation.
fn set_str(s: &mut String, to: &str) {
    s.clear();
    s.push_str(to);
}
