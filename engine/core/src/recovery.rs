//! Recovery strategies, sans I/O: what a node's failure for good (retries spent) turns into,
//! under its `NodePolicy::on_failure` ([`Recovery`]), or the one its policy names for the
//! failure's kind (`NodePolicy::on_failure_of`, [`FailureKind::of`] the final error: a
//! function of the recorded error, so a restore, a replay and a fork choose alike), and how the `recovery_applied` event
//! folds (`recovery_fold.rs`).
//!
//! Every strategy writes `node_failed` (terminal only when the thread ends of it) and
//! `recovery_applied` naming the strategy, then what the strategy does:
//!
//! | strategy | events after `recovery_applied` | the thread |
//! |---|---|---|
//! | `fail` (default) | none | fails |
//! | `fallback(node)` | none (the fold gives the task the outcome "go to `node`") | goes on: the step routes to `node` |
//! | `escalate` | `retry_scheduled` (next attempt), `input_requested` (what failed) | waits for a person; any answer runs the node again |
//! | `restore_and_retry` | the runner's `rolled_back` to the latest checkpoint | runs on from that checkpoint (at most [`RESTORES_PER_THREAD_MAX`] times, then fails) |
//! | `abandon` | `status_changed` to cancelled | ends Cancelled, "abandoned" |
//!
//! Retrying is the node's `RetryPolicy`, before any of these (`retry_scheduled` events).

use cairn_dsl::{DynWorkflow, FailureKind, NodeError, Recovery};
use serde_json::json;

use crate::error::Error;
use crate::event::{Body, TaskKey};
use crate::fold;
use crate::limits::RESTORES_PER_THREAD_MAX;
use crate::thread_ctx::ThreadCtx;

/// What the thread does after a task's failure for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterFailure {
    /// The thread fails.
    Fail,
    /// The step goes on (a fallback route).
    Recovered,
    /// The thread waits for a person.
    Escalated,
    /// The runner rolls the thread back to its latest checkpoint and goes on from there.
    Restore,
    /// The thread ends Cancelled, for this reason.
    Abandon(String),
}

/// A failed task of step `step`, with what it needs to be recovered.
pub struct Failure {
    /// The step the task ran in.
    pub step: u64,
    /// The task.
    pub task: TaskKey,
    /// Its final attempt.
    pub attempt: u32,
    /// Its error.
    pub error: NodeError,
    /// When it failed (ms since the epoch).
    pub at_ms: u64,
}

/// Emits the events of `failure` under its node's strategy and says what follows.
/// `wait_free`: no other task of the step waits for input already (a thread waits for one
/// thing at a time; an escalation that finds the slot taken schedules the next attempt, which
/// runs when the thread resumes and escalates again then if it fails).
///
/// # Errors
/// As [`fold::emit`].
pub fn failed(
    ctx: &mut ThreadCtx,
    events: &mut Vec<(Body, u64)>,
    wf: &DynWorkflow,
    failure: Failure,
    wait_free: bool,
) -> Result<AfterFailure, Error> {
    let Failure { step, task, attempt, error, at_ms } = failure;
    let kind = FailureKind::of(&error);
    let mut strategy = wf
        .node_id(&task.node)
        .map(|id| wf.nodes()[id].policy.recovery_for(kind).clone())
        .unwrap_or_default();
    if strategy == Recovery::RestoreAndRetry && ctx.meta.restores >= RESTORES_PER_THREAD_MAX {
        strategy = Recovery::Fail;
    }
    let terminal = matches!(strategy, Recovery::Fail | Recovery::Abandon);
    let failed =
        Body::NodeFailed { step, task: task.clone(), attempt, error: error.clone(), terminal };
    fold::emit(ctx, events, failed, at_ms)?;
    if strategy.is_fail() {
        return Ok(AfterFailure::Fail);
    }
    let applied = Body::RecoveryApplied {
        step,
        task: task.clone(),
        attempt,
        strategy: strategy.clone(),
        error: error.clone(),
        kind: Some(kind),
    };
    fold::emit(ctx, events, applied, at_ms)?;
    Ok(match strategy {
        Recovery::Fallback(_) => AfterFailure::Recovered,
        Recovery::RestoreAndRetry => AfterFailure::Restore,
        Recovery::Abandon => AfterFailure::Abandon(format!(
            "abandoned by its recovery policy: {task} failed: {error}"
        )),
        _ => {
            let next = attempt.saturating_add(1);
            let retry = Body::RetryScheduled {
                step,
                task: task.clone(),
                attempt: next,
                delay_ms: 0,
                at_ms,
                error: error.clone(),
            };
            fold::emit(ctx, events, retry, at_ms)?;
            if !wait_free {
                return Ok(AfterFailure::Recovered);
            }
            let prompt = json!({
                "escalated": task.to_string(),
                "error": error.to_string(),
                "question": "answer anything to run it again; cancel or abandon the thread to give up",
            });
            let values = Vec::new();
            fold::emit(ctx, events, Body::InputRequested { step, task, prompt, values }, at_ms)?;
            AfterFailure::Escalated
        }
    })
}
