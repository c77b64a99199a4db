//! What the engine writes into the log: the body of every event, and how it maps to storage.
//!
//! Storage keeps an event's kind, node, status and summary in the framed record and treats the
//! kind-specific data as opaque bytes. The engine fills those bytes with a [`Body`] in its binary
//! form (`crate::codec`; older logs hold its JSON, which still reads), and any tool (the CLI, a
//! debug bundle, a diff) reads an event through the codec, without the user's types, and shows it
//! as JSON (the `Serialize` below). Values that are larger than [`crate::limits::INLINE_VALUE_BYTES_MAX`] (tool outputs, big
//! inputs) are moved to the content-addressed payload table and referenced from the event.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use cairn_dsl::{Budgets, Message, NodeError, Progress, Recovery, Target, ToolError, Usage};
use cairn_storage::{
    CheckpointId, CheckpointKind, EventKind, EventStatus, ThreadStatus, WorkflowRef,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod summary;

/// One unit of work in a step: a node, or one item of a map node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskKey {
    /// The node's name (shared: a key is copied into the journal, the history and each
    /// attempt's context).
    pub node: Arc<str>,
    /// The item's index, for a map node's task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
}

impl TaskKey {
    /// The task of a plain node.
    pub fn node(name: impl Into<Arc<str>>) -> Self {
        Self { node: name.into(), item: None }
    }
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.item {
            Some(i) => write!(f, "{}[{i}]", self.node),
            None => f.write_str(&self.node),
        }
    }
}

/// A thread's own policy, set at start; `None` fields fall back to the workflow's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadPolicy {
    /// When the thread times out (engine clock, ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at_ms: Option<u64>,
    /// Budgets replacing the workflow's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Budgets>,
    /// Permissions granted to tool calls, replacing the workflow's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<BTreeSet<String>>,
    /// When the thread starts, for one created to start later (engine clock, ms since the
    /// epoch): it stays `created` until then. Absent in logs written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_ms: Option<u64>,
}

impl ThreadPolicy {
    /// Whether nothing is set.
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// Where a thread came from when it was forked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The thread it was forked from.
    pub thread: String,
    /// The seq of the parent whose state it starts from.
    pub seq: u64,
}

/// The kind-specific part of an event, stored in the event's data (binary since format v6, JSON
/// before: `docs/format.md` §10); its JSON (this type's serde) is what the edges show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Body {
    /// The thread exists: its workflow, input (the initial state) and first frontier.
    ThreadCreated {
        /// Workflow id, version and fingerprint the thread is pinned to.
        workflow: WorkflowRef,
        /// The input, which is the initial state.
        input: Value,
        /// The nodes that run in step 1.
        frontier: Vec<String>,
        /// Labels given at start.
        labels: BTreeMap<String, String>,
        /// Set when the thread is a fork.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fork: Option<ForkOrigin>,
        /// Join arrivals carried over by a fork.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        arrivals: BTreeMap<String, Vec<String>>,
        /// Loop-bound visit counts carried over by a fork.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        visits: BTreeMap<String, u32>,
        /// The thread's own policy (deadline, budgets, permissions), over the workflow's. Boxed:
        /// the largest field of any body, and one event of a thread carries it.
        #[serde(default, skip_serializing_if = "ThreadPolicy::is_default")]
        policy: Box<ThreadPolicy>,
        /// The seed of the thread's fresh draws (`random_u64`, `new_id`): recorded at creation so
        /// that any process that drives the thread draws what the first one would have. Absent in
        /// logs written before it existed; such threads draw from the driving engine's seed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seed: Option<u64>,
    },
    /// The thread's budgets were changed (raised to resume a thread stopped by one).
    BudgetsSet {
        /// The new budgets.
        budgets: Budgets,
    },
    /// The status machine moved.
    StatusChanged {
        /// Before.
        from: ThreadStatus,
        /// After.
        to: ThreadStatus,
        /// Why, in words.
        reason: String,
    },
    /// A task began (its `at_ms` is in the bookmark). Written when the start must be on record
    /// before the task ends (it calls tools, retries, fails, suspends, or works on a map item);
    /// for a task that completes in the batch that starts it, it is implied by the
    /// `NodeCompleted` (started at its `at_ms` minus `duration_ms`).
    NodeStarted {
        /// The step the task belongs to.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// 1-based attempt number.
        attempt: u32,
        /// The map item the task works on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<Value>,
    },
    /// A task finished: its update is applied when the step completes.
    NodeCompleted {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// 1-based attempt number.
        attempt: u32,
        /// The state update (JSON of the workflow's update type), if any.
        update: Option<Value>,
        /// Targets the node chose itself.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        goto: Vec<Target>,
        /// Recorded clock readings, random numbers and ids not yet recorded by a tool call.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<Value>,
        /// How long the attempt ran, in ms of engine clock.
        duration_ms: u64,
        /// Tokens and cost the task reported outside tool calls.
        #[serde(default)]
        usage: Usage,
    },
    /// A task failed.
    NodeFailed {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// 1-based attempt number.
        attempt: u32,
        /// What went wrong.
        error: NodeError,
        /// True when no retry follows: the failure ends the thread.
        terminal: bool,
    },
    /// A tool is about to run (written durably before it runs).
    ToolCalled {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// Attempt of the task.
        attempt: u32,
        /// 0-based index of the call within the attempt.
        call: u32,
        /// Tool name.
        name: String,
        /// Permission the call declared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission: Option<String>,
        /// The input (or `null` with the event's payload reference, when large).
        input: Value,
        /// Values recorded by the node before this call.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<Value>,
    },
    /// A tool finished (written durably before the node sees the result).
    ToolReturned {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// Attempt of the task.
        attempt: u32,
        /// 0-based index of the call within the attempt.
        call: u32,
        /// Tool name.
        name: String,
        /// The output or the tool's error (output is `null` plus a payload reference when large).
        output: Result<Value, ToolError>,
        /// What the tool reported using.
        #[serde(default)]
        usage: Usage,
        /// The part of `usage` the tool named by model (`ToolCtx::report_model_usage`).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        models: BTreeMap<String, Usage>,
        /// How long the call took, in ms of engine clock.
        duration_ms: u64,
    },
    /// A failed attempt will be retried after a delay.
    RetryScheduled {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// The attempt that will run next.
        attempt: u32,
        /// The delay before it.
        delay_ms: u64,
        /// When it runs (engine clock).
        at_ms: u64,
        /// The error that caused the retry.
        error: NodeError,
    },
    /// A node asked for human input; the step stays open.
    InputRequested {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// What the node asked.
        prompt: Value,
        /// Values the node recorded before it asked.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<Value>,
    },
    /// Human input arrived for a waiting task.
    InputReceived {
        /// Which task.
        task: TaskKey,
        /// The input.
        value: Value,
    },
    /// A node waits for a signal (`ctx.recv`) and none is there; the step stays open and the
    /// thread parks (WaitingInput) until one is sent. Filed under the storage kind
    /// `input_requested`.
    SignalAwaited {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// The signal's name.
        name: String,
        /// Values the node recorded before it waited (signals it received among them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<Value>,
    },
    /// A signal the waiting task asked for was sent: the thread wakes and runs the task again,
    /// which receives it. Filed under the storage kind `input_received`.
    SignalArrived {
        /// Which task.
        task: TaskKey,
        /// The signal's name.
        name: String,
    },
    /// A node started a durable timer; the step stays open.
    TimerSet {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// When it fires (engine clock).
        until_ms: u64,
        /// Values the node recorded before it slept.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<Value>,
    },
    /// A durable timer fired.
    TimerFired {
        /// Which task.
        task: TaskKey,
        /// When it was due.
        until_ms: u64,
    },
    /// A step finished: all its updates are applied in task order and the next frontier is set.
    StepCompleted {
        /// The step.
        step: u64,
        /// Nodes of the next step, in declaration order.
        next: Vec<String>,
        /// Join arrivals still waiting for other branches after this step.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        arrivals: BTreeMap<String, Vec<String>>,
    },
    /// A checkpoint was written in the same batch as this event; it covers this event's seq.
    CheckpointCreated {
        /// Its kind.
        kind: CheckpointKind,
        /// Why (creator / description).
        description: String,
        /// The checkpoint's id. The store assigns it at commit, after the event is encoded, so
        /// the log does not hold it: the engine's announced read (`exec/fetch.rs`; event streams,
        /// `cairn events`) fills it in when the event is read (the checkpoint of this thread
        /// covering this event's seq), `None` once that checkpoint was deleted or pruned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint: Option<CheckpointId>,
    },
    /// Progress reported by a node.
    Progress {
        /// Which task.
        task: TaskKey,
        /// What it reported.
        progress: Progress,
    },
    /// A conversation message.
    Message {
        /// Which task.
        task: TaskKey,
        /// The message.
        message: Message,
    },
    /// The thread's work is driven again after its runner died (or stalled past its lease): it
    /// was found unfinished when the engine opened (or at a look for work on a shared database),
    /// or a runner took it over from another engine instance's runner that never let it go (a
    /// sub-workflow child driven on by its recovered parent). What was in flight when the old
    /// runner stopped (a `tool_called` without its `tool_returned`, say) runs again after it.
    Recovered {
        /// What the engine did with it: "resumed" (by recovery), "parked" (by recovery, for a
        /// `resume`), or "taken over" (by a runner, from another engine instance's).
        action: String,
    },
    /// The thread finished; its output (the final state).
    Output {
        /// The final state.
        output: Value,
    },
    /// A lock was taken or released.
    Lock {
        /// Lock name.
        name: String,
        /// True for acquired, false for released.
        acquired: bool,
    },
    /// A budget is near or at its limit.
    Budget {
        /// Which budget ("steps", "tool_calls", "tokens", "cost", "wall_ms").
        budget: String,
        /// Used so far.
        used: u64,
        /// The limit.
        limit: u64,
    },
    /// A node failed for good and its recovery strategy (`NodePolicy::on_failure`) ran: what
    /// follows in the batch is that strategy's doing (a fallback route, a wait for a person, a
    /// rollback, the end of the thread).
    RecoveryApplied {
        /// The step.
        step: u64,
        /// Which task.
        task: TaskKey,
        /// The attempt that failed last.
        attempt: u32,
        /// The strategy that ran.
        strategy: Recovery,
        /// The failure it answered.
        error: NodeError,
        /// The kind of that failure ([`cairn_dsl::FailureKind::of`] the error), which chose
        /// the strategy (`NodePolicy::on_failure_of`); absent in events written before kinds
        /// were recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<cairn_dsl::FailureKind>,
    },
    /// The thread was rolled back in place to an earlier checkpoint (`cairn_tools::Operator::rollback`): from
    /// this event on it is the context that checkpoint holds, at this seq. The events between
    /// stay in the log (what happened is never erased); a restore folding through this event
    /// takes the context from it, so it needs neither the checkpoint nor the events before.
    RolledBack {
        /// The checkpoint it went back to.
        checkpoint: CheckpointId,
        /// The seq that checkpoint covers.
        to_seq: u64,
        /// Why, in words.
        reason: String,
        /// The context the checkpoint holds: the JSON of its `thread_ctx::Snapshot` (large
        /// ones go to the payload table with the rest of the body).
        snapshot: Value,
    },
    /// The thread ended by continuing as new (`ctx.continue_as_new`): the successor this
    /// names was created in the same commit, on `input`.
    ContinuedAsNew {
        /// The successor's id.
        thread: String,
        /// Its input (initial state).
        input: Value,
    },
    /// The thread is the successor of `thread`, which continued as new (its second event).
    ContinuedFrom {
        /// The predecessor's id.
        thread: String,
    },
    /// The thread failed for good with undos registered: they run now, last registered first
    /// (`core::compensation`); the thread stays Running until the last one finished.
    CompensationBegan {
        /// Why the thread failed.
        reason: String,
        /// How many undos are registered.
        undos: u32,
    },
    /// An undo is about to run (written durably before it runs).
    UndoStarted {
        /// Its index in registration order.
        index: u32,
        /// The compensation's name.
        name: String,
        /// Its arguments.
        args: Value,
    },
    /// An undo finished (its output, or its error: a failed undo is recorded and the unwinding
    /// goes on with the next).
    UndoFinished {
        /// Its index in registration order.
        index: u32,
        /// The compensation's name.
        name: String,
        /// What it returned.
        output: Result<Value, ToolError>,
        /// How long it took, in ms of engine clock.
        duration_ms: u64,
    },
    /// Nodes of the step changed the thread's labels (`ctx.set_label`, `ctx.remove_label`):
    /// written before the step's `step_completed`, in the batch that updates the record.
    LabelsChanged {
        /// Labels set, to these values.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        set: BTreeMap<String, String>,
        /// Labels removed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        removed: Vec<String>,
    },
    /// The thread's state was replaced or updated from outside a node (fork, migration, user).
    StateUpdated {
        /// The update applied (JSON of the update type).
        update: Value,
        /// Who did it.
        reason: String,
    },
    /// An update (`Engine::update`) was applied at a step boundary: its request, the reply the
    /// caller got, and the whole state after its handler. Folding it replaces the state (the
    /// handler never runs again on replay) and notes `id`, so the same id is not applied twice.
    UpdateApplied {
        /// The update's id (given by the caller, or generated): one application per id.
        id: String,
        /// The update's name.
        name: String,
        /// Its arguments.
        args: Value,
        /// What the handler returned to the caller.
        reply: Value,
        /// The state after the handler.
        state: Value,
    },
    /// A node published `value` under `key` (`ctx.set_event`): written and durable before the
    /// call returns; the latest value of a key wins (`Engine::get_event`).
    EventPublished {
        /// The task that published it.
        task: TaskKey,
        /// The key.
        key: String,
        /// The value.
        value: Value,
    },
    /// A node created a promise (`ctx.promise`): written and durable before its id is handed
    /// out, so that a completion (`Engine::complete_promise`) finds it.
    PromiseCreated {
        /// The task that created it.
        task: TaskKey,
        /// Its id (`docs/promises.md`: the thread's id, `~`, and a suffix derived from the
        /// step, the task and the task's count of promises).
        promise: String,
    },
    /// A checkpoint was asked for at run time (`Engine::checkpoint_every`,
    /// `cancel_periodic_checkpoint`, `checkpoint_at_node`): in force from this event on.
    CheckpointRequested {
        /// What was asked.
        request: crate::checkpoint_requests::CheckpointRequest,
    },
    /// An update sent to an engine that does not drive the thread (on a database several
    /// processes share) was refused by the driving runner (its validator, its handler, a
    /// limit): recorded so that the caller, which waits on the log in its own process, hears
    /// it. The state is unchanged; folding it notes `id`, so the id answers the same refusal.
    UpdateRefused {
        /// The update's id.
        id: String,
        /// The update's name.
        name: String,
        /// Why, in words.
        error: String,
    },
}

impl Body {
    /// The storage kind under which this body is filed.
    pub fn kind(&self) -> EventKind {
        match self {
            Body::ThreadCreated { .. } => EventKind::ThreadCreated,
            Body::StatusChanged { to: ThreadStatus::Cancelled, .. } => EventKind::Cancelled,
            Body::StatusChanged { to: ThreadStatus::TimedOut, .. } => EventKind::TimedOut,
            Body::StatusChanged { .. } => EventKind::StatusChanged,
            Body::NodeStarted { .. } => EventKind::NodeStarted,
            Body::NodeCompleted { .. } => EventKind::NodeCompleted,
            Body::NodeFailed { .. } => EventKind::NodeFailed,
            Body::ToolCalled { .. } => EventKind::ToolCalled,
            Body::ToolReturned { .. } => EventKind::ToolReturned,
            Body::RetryScheduled { .. } => EventKind::RetryScheduled,
            Body::InputRequested { .. } => EventKind::InputRequested,
            Body::InputReceived { .. } => EventKind::InputReceived,
            Body::SignalAwaited { .. } => EventKind::InputRequested,
            Body::SignalArrived { .. } => EventKind::InputReceived,
            Body::TimerSet { .. } => EventKind::TimerSet,
            Body::TimerFired { .. } => EventKind::TimerFired,
            Body::StepCompleted { .. } => EventKind::StepCompleted,
            Body::CheckpointCreated { .. } => EventKind::CheckpointCreated,
            Body::Progress { .. } => EventKind::Progress,
            Body::Message { .. } => EventKind::Message,
            Body::Recovered { .. } => EventKind::Recovered,
            Body::Output { .. } => EventKind::StateUpdated,
            Body::Lock { acquired: true, .. } => EventKind::LockAcquired,
            Body::Lock { acquired: false, .. } => EventKind::LockReleased,
            Body::Budget { used, limit, .. } if used >= limit => EventKind::BudgetExceeded,
            Body::Budget { .. } => EventKind::BudgetWarning,
            Body::StateUpdated { .. } | Body::RolledBack { .. } | Body::UpdateApplied { .. } => {
                EventKind::StateUpdated
            }
            Body::BudgetsSet { .. }
            | Body::RecoveryApplied { .. }
            | Body::ContinuedAsNew { .. }
            | Body::ContinuedFrom { .. }
            | Body::LabelsChanged { .. }
            | Body::CompensationBegan { .. }
            | Body::UndoStarted { .. }
            | Body::UndoFinished { .. }
            | Body::EventPublished { .. }
            | Body::PromiseCreated { .. }
            | Body::CheckpointRequested { .. }
            | Body::UpdateRefused { .. } => EventKind::Custom,
        }
    }

    /// The status shown with the event.
    pub fn status(&self) -> EventStatus {
        match self {
            Body::NodeFailed { .. } => EventStatus::Failure,
            Body::ToolReturned { output: Err(_), .. } => EventStatus::Failure,
            Body::StatusChanged { to: ThreadStatus::Failed, .. } => EventStatus::Failure,
            Body::StatusChanged { to: ThreadStatus::Completed, .. } => EventStatus::Success,
            Body::StatusChanged {
                to: ThreadStatus::Cancelled | ThreadStatus::TimedOut, ..
            } => EventStatus::Warning,
            Body::RetryScheduled { .. }
            | Body::Budget { .. }
            | Body::Recovered { .. }
            | Body::RecoveryApplied { .. }
            | Body::CompensationBegan { .. }
            | Body::UndoFinished { output: Err(_), .. }
            | Body::RolledBack { .. } => EventStatus::Warning,
            Body::NodeCompleted { .. } | Body::StepCompleted { .. } | Body::Output { .. } => {
                EventStatus::Success
            }
            Body::ToolReturned { output: Ok(_), .. } => EventStatus::Success,
            _ => EventStatus::Info,
        }
    }

    /// The node the event is about, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            Body::NodeStarted { task, .. }
            | Body::NodeCompleted { task, .. }
            | Body::NodeFailed { task, .. }
            | Body::ToolCalled { task, .. }
            | Body::ToolReturned { task, .. }
            | Body::RetryScheduled { task, .. }
            | Body::InputRequested { task, .. }
            | Body::InputReceived { task, .. }
            | Body::SignalAwaited { task, .. }
            | Body::SignalArrived { task, .. }
            | Body::TimerSet { task, .. }
            | Body::TimerFired { task, .. }
            | Body::Progress { task, .. }
            | Body::RecoveryApplied { task, .. }
            | Body::EventPublished { task, .. }
            | Body::PromiseCreated { task, .. }
            | Body::Message { task, .. } => Some(&task.node),
            _ => None,
        }
    }
}
