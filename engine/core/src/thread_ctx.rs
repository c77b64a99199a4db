//! The thread context (what a checkpoint's snapshot holds) and the pure function that moves it
//! one event on.
//!
//! This is the functional core: [`ThreadCtx::apply`] takes one recorded event and returns the
//! context after it, touching nothing else; each concern folds its own part (`fold.rs`). The runner builds a step's events, applies them here,
//! and appends them; restore loads a checkpoint's [`Snapshot`] and applies the events after it.
//! Because both go through the same function, the state restored at any seq equals the state the
//! live run had at that seq.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use cairn_dsl::{DynState, DynWorkflow, Message, NodeError, Progress, Target, ToolError};
use cairn_storage::{ThreadStatus, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;
use crate::event::{Body, ForkOrigin, TaskKey, ThreadPolicy};
pub use crate::telemetry::Telemetry;

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
    /// Events this attempt published and promises it created (`ctx.set_event`,
    /// `ctx.promise`), in call order: a re-execution writes none of these again, and one that
    /// publishes another thing in a recorded place is nondeterminism. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<Publication>,
}

/// What a task published in one place of its call order: an event under a key, or a promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Publication {
    /// `ctx.set_event(key, ..)`.
    Event(String),
    /// `ctx.promise()`.
    Promise,
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
    pub status: Cow<'static, str>,
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
    pub what: Cow<'static, str>,
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
    pub visits: BTreeMap<Arc<str>, u32>,
    /// Journals of the open step's tasks.
    #[serde(with = "crate::task_map")]
    pub open: BTreeMap<TaskKey, TaskJournal>,
    /// What a parked thread waits for.
    pub waiting: Option<Waiting>,
    /// Per-node latest results.
    pub node_results: BTreeMap<Arc<str>, NodeResult>,
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
    #[serde(default, skip_serializing_if = "crate::recovery_fold::is_zero")]
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
    /// The updates applied (`update_applied`): id -> the seq of its event, so that an id sent
    /// again answers the recorded reply and applies nothing. Absent when none was applied.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub updates: BTreeMap<String, u64>,
    /// The updates sent from another process that the driving runner refused
    /// (`update_refused`): id -> the refusal's words, so that the id sent again answers the
    /// same refusal. Absent when none was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub updates_refused: BTreeMap<String, String>,
    /// The successor this thread continued as (`ctx.continue_as_new`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_as: Option<String>,
    /// The thread this one continues (it is that thread's successor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_from: Option<String>,
    /// Undos registered by completed tasks (`ctx.on_undo`), in registration order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undos: Vec<crate::compensation::Undo>,
    /// Set once the thread failed for good and its undos run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwinding: Option<crate::compensation::Unwinding>,
    /// The latest value of each key the thread's nodes published (`ctx.set_event`). Absent
    /// when none was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub published: BTreeMap<String, Value>,
    /// The keys of [`ThreadMeta::published`] first published in the open step (the one after
    /// [`ThreadMeta::step`]): the keys the thread had when that step began are the others, which
    /// is what its tasks count new keys against (`PublishedKeys`), whether the step runs on from
    /// its start or from a context restored mid-step. Emptied when the step completes; absent
    /// when empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub published_in_step: std::collections::BTreeSet<String>,
    /// The ids of the promises the thread's nodes created (`ctx.promise`). Absent when none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub promises: std::collections::BTreeSet<String>,
    /// The checkpoints asked for at run time (`checkpoint_requested` events) still in force.
    /// Absent when none is.
    #[serde(
        default,
        skip_serializing_if = "crate::checkpoint_requests::CheckpointRequests::is_empty"
    )]
    pub checkpoint_requests: crate::checkpoint_requests::CheckpointRequests,
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
    pub(crate) fn record(&self, seq: u64, detail: String) -> Error {
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
                visits: visits.iter().map(|(node, n)| (Arc::from(node.as_str()), *n)).collect(),
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
                policy: ThreadPolicy::clone(policy),
                budget_warned: Vec::new(),
                restores: 0,
                seed: *seed,
                signals: BTreeMap::new(),
                updates: BTreeMap::new(),
                updates_refused: BTreeMap::new(),
                continued_as: None,
                continued_from: None,
                undos: Vec::new(),
                unwinding: None,
                published: BTreeMap::new(),
                published_in_step: std::collections::BTreeSet::new(),
                promises: std::collections::BTreeSet::new(),
                checkpoint_requests: Default::default(),
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
}

/// The hash a [`ToolRecord`] keeps of its call's input: blake3 of the input's JSON text, 128
/// bits in hex (enough to tell two inputs apart; the input itself stays in the log).
pub fn input_hash(input: &Value) -> String {
    let text = serde_json::to_string(input).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex()[..32].to_owned()
}

/// One recorded event as the fold sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventAt<'a> {
    /// Its seq (already checked to follow the context's).
    pub seq: u64,
    /// When it was recorded.
    pub at_ms: u64,
    /// What it says.
    pub body: &'a Body,
}
