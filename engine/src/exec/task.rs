//! One task of a step: the attempt loop around node code (retry policy, timeout, cancellation
//! grace). The context node code sees is `node_context.rs`.

use std::sync::Arc;

use cairn_dsl::{Ctx, DynNodeKind, DynState, NodeError, NodeId};
use cairn_storage::ThreadId;
use futures::future::BoxFuture;
use serde_json::Value;
use tracing::Instrument as _;

use super::env::ThreadEnv;
use super::node_context::{LiveNodeContext, TaskState};
use crate::core::codec::Recorded;
use crate::core::decide::{TaskEnd, TaskRun};
use crate::core::event::{Body, TaskKey};
use crate::core::thread_ctx::TaskJournal;

/// Runs one task through its attempts (retry policy, timeout), never returning an `Err`: every
/// outcome, including engine errors, is a [`TaskEnd`].
pub(crate) async fn run_task(
    env: Arc<ThreadEnv>,
    step: u64,
    node: NodeId,
    key: TaskKey,
    item: Option<Value>,
    state: Box<dyn DynState>,
    mut journal: TaskJournal,
) -> TaskRun {
    let spec = &env.wf.nodes()[node];
    let policy = spec.policy.clone();
    let mut appended: Vec<Recorded> = Vec::new();
    journal.attempt = journal.attempt.max(1);
    let (last, end) = loop {
        let clock = &env.clock;
        let mut started = clock.now_ms();
        if journal.not_before_ms > started {
            tokio::select! {
                () = clock.sleep_until(journal.not_before_ms) => {}
                () = env.cancel.cancelled() => {}
            }
            started = clock.now_ms();
        }
        let ctx =
            Arc::new(LiveNodeContext::new(env.clone(), step, key.clone(), item.clone(), &journal));
        let span = tracing::debug_span!(
            "node_attempt",
            node = %key.node,
            task = %key,
            attempt = journal.attempt,
            outcome = tracing::field::Empty,
        );
        let result = run_attempt(&env, spec, state.as_ref(), &ctx, policy.timeout_ms, started)
            .instrument(span.clone())
            .await;
        span.record("outcome", attempt_outcome(&result));
        let duration_ms = clock.now_ms().saturating_sub(started);
        env.metrics.node_attempt(&key.node, duration_ms);
        let mut st = ctx.finish().await;
        appended.append(&mut st.appended);
        let attempt = journal.attempt;
        let result = match (result, st.nondeterminism.take()) {
            (Ok(_), Some(detail)) => Err(NodeError::Nondeterminism { detail }),
            (r, _) => r,
        };
        let started_logged = st.started_logged;
        let last = LastAttempt {
            attempt,
            started_at_ms: started,
            duration_ms,
            started_logged,
            values: std::mem::take(&mut st.new_values),
        };
        let error = match task_end(result, &mut st) {
            Ok(end) => break (last, end),
            Err(error) => error,
        };
        let retry = !env.cancel.is_cancelled()
            && attempt < policy.retry.max_attempts
            && error.is_retryable(&policy.retry);
        env.metrics.node_failed(&key.node, retry);
        if !retry {
            break (last, TaskEnd::Failed { error });
        }
        // Jitter comes from the thread's deterministic stream, and the resulting delay is
        // recorded in the RetryScheduled event, so a restore waits for the same instant.
        let unit = jitter_unit(&env.thread, step, &key, attempt);
        let delay_ms = policy.retry.backoff_ms(attempt, unit);
        let now = clock.now_ms();
        let mut bodies = Vec::new();
        if !started_logged {
            bodies.push(Body::NodeStarted { step, task: key.clone(), attempt, item: item.clone() });
        }
        bodies.extend(retry_scheduled(step, &key, attempt, &error, delay_ms, now));
        // Boxed: a retry is rare, and its append made every attempt's future 1 KiB larger.
        match Box::pin(env.append_now(bodies, now)).await {
            Ok(mut recs) => appended.append(&mut recs),
            Err(e) => break (last, TaskEnd::Failed { error: env.stop.node_error(e) }),
        }
        journal = TaskJournal {
            attempt: attempt + 1,
            not_before_ms: now + delay_ms,
            ..TaskJournal::default()
        };
    };
    last.into_run(key, item, appended, end)
}

/// What a task's last attempt leaves for its [`TaskRun`].
struct LastAttempt {
    attempt: u32,
    started_at_ms: u64,
    duration_ms: u64,
    started_logged: bool,
    values: Vec<Value>,
}

impl LastAttempt {
    /// The run of task `key` that ended so: its key, item and events move into it, uncopied.
    fn into_run(
        self,
        key: TaskKey,
        item: Option<Value>,
        appended: Vec<Recorded>,
        end: TaskEnd,
    ) -> TaskRun {
        TaskRun {
            key,
            attempt: self.attempt,
            item,
            started_at_ms: self.started_at_ms,
            duration_ms: self.duration_ms,
            started_logged: self.started_logged,
            values: self.values,
            appended,
            end,
        }
    }
}

/// How an attempt's `result` ends its task, or the error the retry policy decides on.
fn task_end(
    result: Result<cairn_dsl::NodeOutput<Value>, NodeError>,
    st: &mut TaskState,
) -> Result<TaskEnd, NodeError> {
    match result {
        Ok(out) => {
            let messages = std::mem::take(&mut st.messages);
            let usage = st.usage;
            Ok(TaskEnd::Done { update: out.update, goto: out.goto, usage, messages })
        }
        Err(NodeError::Interrupted { prompt }) => Ok(TaskEnd::WaitInput { prompt }),
        Err(NodeError::Sleeping { until_ms }) => Ok(TaskEnd::Sleep { until_ms }),
        Err(NodeError::WaitingSignal { name }) => Ok(TaskEnd::WaitSignal { name }),
        // A budget reached inside the node is a clean stop, like one at a step boundary:
        // the thread pauses, its recorded calls kept for when it resumes.
        Err(NodeError::BudgetExceeded { budget }) => Ok(TaskEnd::Budget { budget }),
        Err(NodeError::Paused { reason }) => Ok(TaskEnd::Paused { reason }),
        Err(error) => Err(error),
    }
}

/// The events of a failed attempt retried after `delay_ms` (from `now`).
fn retry_scheduled(
    step: u64,
    key: &TaskKey,
    attempt: u32,
    error: &NodeError,
    delay_ms: u64,
    now: u64,
) -> [Body; 2] {
    [
        Body::NodeFailed {
            step,
            task: key.clone(),
            attempt,
            error: error.clone(),
            terminal: false,
        },
        Body::RetryScheduled {
            step,
            task: key.clone(),
            attempt: attempt + 1,
            delay_ms,
            at_ms: now + delay_ms,
            error: error.clone(),
        },
    ]
}

async fn run_attempt(
    env: &Arc<ThreadEnv>,
    spec: &cairn_dsl::DynNode,
    state: &dyn DynState,
    ctx: &Arc<LiveNodeContext>,
    timeout_ms: Option<u64>,
    started: u64,
) -> Result<cairn_dsl::NodeOutput<Value>, NodeError> {
    let fut: BoxFuture<'static, Result<cairn_dsl::NodeOutput<Value>, NodeError>> = match &spec.kind
    {
        DynNodeKind::Task(handler) => handler(state, Ctx::new(ctx.clone())),
        DynNodeKind::Map { handler, .. } => handler(state, Ctx::new(ctx.clone())),
        DynNodeKind::Subgraph { child, input, output } => match input(state) {
            Ok(child_input) => super::subgraph::run_child(
                env.clone(),
                ctx.key.clone(),
                ctx.step,
                child.clone(),
                child_input,
                output.clone(),
                ctx.inputs(),
            ),
            Err(e) => return Err(NodeError::Codec { detail: e.to_string() }),
        },
    };
    let clock = env.clock.clone();
    let grace = env.cancel_grace_ms;
    let timeout = async {
        match timeout_ms {
            Some(t) => clock.sleep_until(started.saturating_add(t)).await,
            None => futures::future::pending().await,
        }
    };
    let cancelled = async {
        env.cancel.cancelled().await;
        // The node sees the token at once; it has a grace period to stop on its own before its
        // future is dropped.
        clock.sleep_until(clock.now_ms().saturating_add(grace)).await;
    };
    tokio::select! {
        r = fut => r,
        () = timeout => Err(timed_out(ctx, timeout_ms.unwrap_or_default())),
        // A stuck thread's health action: the attempt ends as if its timeout came now.
        () = env.retry.notified() => {
            Err(timed_out(ctx, clock.now_ms().saturating_sub(started)))
        }
        () = cancelled => Err(NodeError::Cancelled),
    }
}

/// Cancels the attempt of `ctx`, timed out after `after_ms`, and says so: a timeout, or a lock
/// error when it waited for a lock (the kind of failure is a deadlock, not a slow node:
/// `cairn_dsl::FailureKind::of`).
fn timed_out(ctx: &LiveNodeContext, after_ms: u64) -> NodeError {
    ctx.attempt_token().cancel();
    match ctx.lock_wait() {
        Some(name) => {
            NodeError::Lock { name, detail: format!("wait timed out after {after_ms} ms") }
        }
        None => NodeError::Timeout { after_ms },
    }
}

/// A deterministic unit interval value for retry jitter, from the task's identity.
fn jitter_unit(thread: &ThreadId, step: u64, key: &TaskKey, attempt: u32) -> f64 {
    let mut h = blake3::Hasher::new();
    h.update(thread.as_str().as_bytes());
    h.update(&step.to_le_bytes());
    h.update(key.to_string().as_bytes());
    h.update(&attempt.to_le_bytes());
    let bytes = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes.as_bytes()[..8]);
    (u64::from_le_bytes(first) >> 11) as f64 / (1u64 << 53) as f64
}

/// How an attempt ended, for its span.
fn attempt_outcome<T>(result: &Result<T, NodeError>) -> &'static str {
    match result {
        Ok(_) => "done",
        Err(NodeError::Interrupted { .. }) => "waiting_input",
        Err(NodeError::Sleeping { .. }) => "sleeping",
        Err(NodeError::WaitingSignal { .. }) => "waiting_signal",
        Err(NodeError::Paused { .. }) => "paused",
        Err(NodeError::BudgetExceeded { .. }) => "budget",
        Err(_) => "failed",
    }
}
