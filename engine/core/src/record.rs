//! What the fold keeps for people to read: each node's latest result, the recent history and
//! errors (bounded by `limits`), the last progress and the conversation. Nothing the thread
//! decides with reads them.

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
                status: "running".into(),
                attempt: *attempt,
                started_at_ms: at_ms,
                finished_at_ms: None,
                error: None,
            };
            m.node_results.insert(task.node.to_string(), result);
        }
        Body::NodeCompleted { step, task, attempt, duration_ms, .. } => {
            completed(m, task, *attempt, at_ms, *duration_ms);
            push_history(m, seq, *step, task, "completed", at_ms);
        }
        Body::NodeFailed { step, task, attempt, error, terminal } => {
            failed(m, e, task, *attempt, error);
            let what = if *terminal { "failed" } else { "attempt failed" };
            push_history(m, seq, *step, task, what, at_ms);
        }
        Body::RetryScheduled { step, task, .. } => {
            push_history(m, seq, *step, task, "retry scheduled", at_ms);
        }
        Body::InputRequested { step, task, .. } => {
            push_history(m, seq, *step, task, "waiting for input", at_ms);
        }
        Body::SignalAwaited { step, task, name, .. } => {
            push_history(m, seq, *step, task, &format!("waiting for signal {name}"), at_ms);
        }
        Body::TimerSet { step, task, .. } => push_history(m, seq, *step, task, "sleeping", at_ms),
        Body::RecoveryApplied { step, task, strategy, .. } => {
            push_history(m, seq, *step, task, &format!("recovery: {}", strategy.name()), at_ms);
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
            status: String::new(),
            attempt,
            started_at_ms: at_ms.saturating_sub(duration_ms),
            finished_at_ms: Some(at_ms),
            error: None,
        };
        // In place when the node ran before (a loop's every step): no allocation.
        let r = match m.node_results.get_mut(&*task.node) {
            Some(r) => {
                let status = std::mem::take(&mut r.status);
                *r = NodeResult { status, ..result };
                r
            }
            None => m.node_results.entry(task.node.to_string()).or_insert(result),
        };
        set_str(&mut r.status, "completed");
    } else if let Some(r) = m.node_results.get_mut(&*task.node) {
        if r.attempt != attempt {
            // A retried attempt that completed in the batch that started it.
            r.attempt = attempt;
            r.started_at_ms = at_ms.saturating_sub(duration_ms);
        }
        set_str(&mut r.status, "completed");
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
        r.status = "failed".into();
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
