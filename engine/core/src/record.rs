//! What the fold keeps for people to read: each node's latest result, the recent history and
//! errors (bounded by `limits`), the last progress and the conversation. Nothing the thread
//! decides with reads them.

use std::borrow::Cow;

use crate::error::Error;
use crate::event::{Body, TaskKey};
use crate::limits;
use crate::thread_ctx::EventAt;
use crate::thread_ctx::{ErrorEntry, HistoryEntry, NodeResult, ThreadCtx, ThreadMeta};

/// Folds the record's part of `e` into `ctx`. Runs before the journals: a completion reads
/// whether its attempt was started.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let m = &mut ctx.meta;
    let (seq, at_ms) = (e.seq, e.at_ms);
    match e.body {
        Body::NodeStarted { task, attempt, .. } => {
            let result = NodeResult {
                status: Cow::Borrowed("running"),
                attempt: *attempt,
                started_at_ms: at_ms,
                finished_at_ms: None,
                error: None,
            };
            m.node_results.insert(task.node.clone(), result);
        }
        Body::NodeCompleted { step, task, attempt, duration_ms, .. } => {
            completed(m, task, *attempt, at_ms, *duration_ms);
            push_history(m, seq, *step, task, Cow::Borrowed("completed"), at_ms);
        }
        Body::NodeFailed { step, task, attempt, error, terminal } => {
            failed(m, e, task, *attempt, error);
            let what = if *terminal { "failed" } else { "attempt failed" };
            push_history(m, seq, *step, task, Cow::Borrowed(what), at_ms);
        }
        Body::RetryScheduled { step, task, .. } => {
            push_history(m, seq, *step, task, Cow::Borrowed("retry scheduled"), at_ms);
        }
        Body::InputRequested { step, task, .. } => {
            push_history(m, seq, *step, task, Cow::Borrowed("waiting for input"), at_ms);
        }
        Body::SignalAwaited { step, task, name, .. } => {
            push_history(m, seq, *step, task, format!("waiting for signal {name}").into(), at_ms);
        }
        Body::TimerSet { step, task, .. } => {
            push_history(m, seq, *step, task, Cow::Borrowed("sleeping"), at_ms)
        }
        Body::RecoveryApplied { step, task, strategy, .. } => {
            push_history(
                m,
                seq,
                *step,
                task,
                format!("recovery: {}", strategy.name()).into(),
                at_ms,
            );
        }
        Body::Progress { progress, .. } => m.progress = Some(progress.clone()),
        Body::Message { message, .. } => m.conversation.push(message.clone()),
        _ => {}
    }
    Ok(())
}

/// The node's latest result after its task's completion at `at_ms`.
fn completed(m: &mut ThreadMeta, task: &TaskKey, attempt: u32, at_ms: u64, duration_ms: u64) {
    // No NodeStarted of this attempt before it: the runner left it implied (the task
    // completed in the batch that started it).
    let implied = m.open.get(task).is_none_or(|j| j.attempt != attempt);
    if implied {
        let result = NodeResult {
            status: Cow::Borrowed("completed"),
            attempt,
            started_at_ms: at_ms.saturating_sub(duration_ms),
            finished_at_ms: Some(at_ms),
            error: None,
        };
        // The key is the task's shared name: no allocation but the map's.
        m.node_results.insert(task.node.clone(), result);
    } else if let Some(r) = m.node_results.get_mut(&*task.node) {
        if r.attempt != attempt {
            // A retried attempt that completed in the batch that started it.
            r.attempt = attempt;
            r.started_at_ms = at_ms.saturating_sub(duration_ms);
        }
        r.status = Cow::Borrowed("completed");
        r.finished_at_ms = Some(at_ms);
        r.error = None;
    }
}

/// The node's latest result and the recent errors after its task's failure.
fn failed(
    m: &mut ThreadMeta,
    e: EventAt<'_>,
    task: &TaskKey,
    attempt: u32,
    error: &cairn_dsl::NodeError,
) {
    if let Some(r) = m.node_results.get_mut(&*task.node) {
        r.status = Cow::Borrowed("failed");
        r.attempt = attempt;
        r.finished_at_ms = Some(e.at_ms);
        r.error = Some(error.clone());
    }
    let entry = ErrorEntry { seq: e.seq, task: task.clone(), error: error.clone(), at_ms: e.at_ms };
    m.errors.push_back(entry);
    while m.errors.len() > limits::SNAPSHOT_ERRORS_ENTRIES_MAX {
        m.errors.pop_front();
    }
}

/// The history's first allocation, in entries.
const HISTORY_FIRST_CAPACITY: usize = 16;

fn push_history(
    m: &mut ThreadMeta,
    seq: u64,
    step: u64,
    task: &TaskKey,
    what: Cow<'static, str>,
    at_ms: u64,
) {
    while m.history.len() >= limits::SNAPSHOT_HISTORY_ENTRIES_MAX {
        m.history.pop_front();
    }
    if m.history.capacity() == 0 {
        // Room for a short thread's whole history at once, not grown 4, 8, 16.
        m.history.reserve(HISTORY_FIRST_CAPACITY);
    }
    m.history.push_back(HistoryEntry { seq, step, task: task.clone(), what, at_ms });
}
