//! One event body of every kind, for the fold's tests: the coverage table
//! (`fold.rs`) walks them, each against each concern.

use std::collections::BTreeMap;

use cairn_dsl::{
    Budgets, DynWorkflow, Message, NodeError, Progress, Recovery, Target, ToolError, Usage,
};
use cairn_storage::{CheckpointKind, ThreadStatus, WorkflowRef};
use serde_json::{Value, json};

use crate::drawn::Drawn;
use crate::event::{Body, TaskKey};
use crate::marks;
use crate::thread_ctx::ThreadCtx;

/// The `thread_created` of thread `t` of `wf` (input 1, seed 7), its frontier `first`.
pub(crate) fn created(wf: &DynWorkflow, first: &str, labels: BTreeMap<String, String>) -> Body {
    let workflow = WorkflowRef {
        id: wf.id().into(),
        version: wf.version(),
        fingerprint: wf.fingerprint().to_string().into(),
    };
    Body::ThreadCreated {
        workflow,
        input: json!(1),
        frontier: vec![first.into()],
        labels,
        fork: None,
        arrivals: BTreeMap::new(),
        visits: BTreeMap::new(),
        policy: Default::default(),
        seed: Some(7),
    }
}

/// The `status_changed` that starts a created thread.
pub(crate) fn started() -> Body {
    Body::StatusChanged {
        from: ThreadStatus::Created,
        to: ThreadStatus::Running,
        reason: "started".into(),
    }
}

/// A running thread of `wf` at the start of step 1 (seq 2), its frontier `first`.
pub(crate) fn running(wf: &DynWorkflow, first: &str) -> ThreadCtx {
    let created = created(wf, first, BTreeMap::new());
    let mut ctx = ThreadCtx::created(wf, "t", &created, 10).expect("created");
    ctx.apply(2, 10, &started()).expect("running");
    ctx
}

/// A running thread of a one-node workflow `id` (node `a`, which does nothing), at the start of
/// its first step.
pub(crate) fn running_one_node(id: &str) -> ThreadCtx {
    use cairn_dsl::{END, NodeOutput, Replace, START, Workflow};
    let noop = |_s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(0)) };
    let wf = Workflow::<Replace<u64>>::builder(id, 1)
        .node("a", noop)
        .edge(START, "a")
        .edge("a", END)
        .build()
        .expect("workflow")
        .erase();
    running(&wf, "a")
}

/// A signal `name` received as its `n`th, as a node's drawn values record it.
fn signal(name: &str, n: u64) -> Value {
    Drawn::Signal.record(json!({"name": name, "n": n, "value": n}))
}

/// One body of every kind, its fields varied by `k` (task `b` or `c`, attempt 1 or 2, step
/// `k % 3 + 1`...), with drawn values that mark a signal, an undo, a label and a successor
/// where a kind carries values. `snapshot` is what a `rolled_back` restores.
#[allow(clippy::too_many_lines, reason = "a table of sample bodies, one per kind: test data")]
pub(crate) fn samples(k: u64, snapshot: &Value) -> Vec<Body> {
    let task = TaskKey::node(if k.is_multiple_of(2) { "b" } else { "c" });
    let attempt = u32::try_from(k % 2).unwrap_or(0) + 1;
    let step = k % 3 + 1;
    let values = vec![signal("s", k + 3), json!({"random": k})];
    let completed_values = vec![
        signal("s", k + 4),
        marks::undo("refund", json!(k)),
        marks::label("tier", Some(if k.is_multiple_of(3) { "gold" } else { "silver" })),
        marks::successor(json!(k)),
    ];
    let error = NodeError::fatal(format!("boom {k}"));
    let usage = Usage { tokens: k + 1, cost_micros: 2 * k + 1 };
    vec![
        Body::ThreadCreated {
            workflow: WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() },
            input: json!(k),
            frontier: vec!["a".into()],
            labels: BTreeMap::new(),
            fork: None,
            arrivals: BTreeMap::new(),
            visits: BTreeMap::new(),
            policy: Default::default(),
            seed: None,
        },
        Body::BudgetsSet { budgets: Budgets { max_tool_calls: Some(k + 5), ..Budgets::default() } },
        Body::StatusChanged {
            from: ThreadStatus::Running,
            to: [ThreadStatus::WaitingInput, ThreadStatus::Paused, ThreadStatus::Running]
                [usize::try_from(k % 3).unwrap_or(0)],
            reason: "why".into(),
        },
        Body::NodeStarted { step, task: task.clone(), attempt, item: None },
        Body::NodeCompleted {
            step,
            task: task.clone(),
            attempt,
            update: Some(json!(k)),
            goto: vec![Target::Node("a".into())],
            values: completed_values,
            duration_ms: 7 + k,
            usage,
        },
        Body::NodeFailed {
            step,
            task: task.clone(),
            attempt,
            error: error.clone(),
            terminal: k.is_multiple_of(2),
        },
        Body::ToolCalled {
            step,
            task: task.clone(),
            attempt,
            call: 1,
            name: "search".into(),
            permission: None,
            input: json!({"q": k}),
            values: values.clone(),
        },
        Body::ToolReturned {
            step,
            task: task.clone(),
            attempt,
            call: 1,
            name: "search".into(),
            output: if k % 4 == 3 {
                Err(ToolError { message: "no".into(), retryable: false, code: None })
            } else {
                Ok(json!(k))
            },
            usage,
            models: BTreeMap::from([("m".to_owned(), usage)]),
            duration_ms: 3,
        },
        Body::RetryScheduled {
            step,
            task: task.clone(),
            attempt: attempt + 1,
            delay_ms: 10,
            at_ms: 500 + k,
            error: error.clone(),
        },
        Body::InputRequested {
            step,
            task: task.clone(),
            prompt: json!("go?"),
            values: values.clone(),
        },
        Body::InputReceived { task: task.clone(), value: json!(k) },
        Body::SignalAwaited { step, task: task.clone(), name: "s".into(), values: values.clone() },
        Body::SignalArrived { task: task.clone(), name: "s".into() },
        Body::TimerSet { step, task: task.clone(), until_ms: 900 + k, values },
        Body::TimerFired { task: task.clone(), until_ms: 900 + k },
        Body::StepCompleted {
            step,
            next: vec!["a".into()],
            arrivals: BTreeMap::from([("j".to_owned(), vec!["a".to_owned()])]),
        },
        Body::CheckpointCreated {
            kind: CheckpointKind::Periodic,
            description: "every step".into(),
            checkpoint: None,
        },
        Body::Progress {
            task: task.clone(),
            progress: Progress {
                step: 1,
                total: 3,
                message: "one".into(),
                percent: None,
                detail: None,
            },
        },
        Body::Message {
            task: task.clone(),
            message: Message {
                role: "user".into(),
                content: format!("hello {k}"),
                correlation_id: None,
                to: None,
                id: None,
                parent: None,
            },
        },
        Body::Recovered { action: "resumed".into() },
        Body::Output { output: json!(k) },
        Body::Lock { name: "l".into(), acquired: k.is_multiple_of(2) },
        Body::Budget { budget: "max_tool_calls".into(), used: k % 5, limit: 3 },
        Body::RecoveryApplied {
            step,
            task: task.clone(),
            attempt,
            strategy: [
                Recovery::Fallback("a".into()),
                Recovery::RestoreAndRetry,
                Recovery::Escalate,
            ][usize::try_from(k % 3).unwrap_or(0)]
            .clone(),
            error,
            kind: [
                None,
                Some(cairn_dsl::FailureKind::Timeout),
                Some(cairn_dsl::FailureKind::Other),
            ][usize::try_from(k % 3).unwrap_or(0)],
        },
        Body::RolledBack {
            checkpoint: cairn_storage::CheckpointId(1),
            to_seq: 3,
            reason: "restore".into(),
            snapshot: snapshot.clone(),
        },
        Body::ContinuedAsNew { thread: format!("t~{k}"), input: json!(k) },
        Body::ContinuedFrom { thread: format!("t~{k}") },
        Body::CompensationBegan { reason: "failed".into(), undos: 2 },
        Body::UndoStarted {
            index: u32::try_from(k % 2).unwrap_or(0),
            name: "refund".into(),
            args: json!(k),
        },
        Body::UndoFinished {
            index: 0,
            name: "refund".into(),
            output: Ok(json!(null)),
            duration_ms: 4,
        },
        Body::LabelsChanged {
            set: BTreeMap::from([("tier".to_owned(), format!("t{k}"))]),
            removed: vec!["old".into()],
        },
        Body::StateUpdated { update: json!(k + 100), reason: "user".into() },
        Body::UpdateApplied {
            id: format!("u-{k}"),
            name: "add".into(),
            args: json!(k),
            reply: json!(k + 200),
            state: json!(k + 200),
        },
        Body::UpdateRefused { id: format!("r-{k}"), name: "add".into(), error: "no".into() },
        Body::EventPublished { task: task.clone(), key: format!("k{}", k % 2), value: json!(k) },
        Body::PromiseCreated {
            task: task.clone(),
            promise: crate::published::promise_id("t", step, &task, 0),
        },
        Body::CheckpointRequested {
            request: crate::checkpoint_requests::CheckpointRequest::Every {
                interval_ms: k + 1,
                meta: cairn_storage::CheckpointMeta::default(),
            },
        },
    ]
}
