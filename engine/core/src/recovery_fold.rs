//! How recovery folds into the thread context (see `recovery.rs` for the strategies): a
//! `recovery_applied` event, and a `rolled_back` to a checkpoint. A leaf of the fold, so that
//! the step decision and the fold do not import each other through it.

use cairn_dsl::{Recovery, Target};
use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;
use crate::event::{Body, TaskKey};
use crate::thread_ctx::EventAt;
use crate::thread_ctx::{Snapshot, TaskOutcome, ThreadCtx, ThreadMeta};

/// Folds recovery's part of `e` into `ctx`.
///
/// # Errors
/// [`Error::Record`] for a rollback whose context does not decode as the workflow's.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    match e.body {
        Body::RecoveryApplied { step, task, strategy, .. } => {
            apply(&mut ctx.meta, *step, task, strategy);
        }
        Body::RolledBack { snapshot, .. } => rolled_back(ctx, e.seq, snapshot)?,
        _ => {}
    }
    Ok(())
}

/// The context of the checkpoint `snapshot`, at `seq`; the status moves by its own event, and
/// the rollbacks made are kept (the strategy's bound holds across them).
fn rolled_back(ctx: &mut ThreadCtx, seq: u64, snapshot: &Value) -> Result<(), Error> {
    let bad = |detail: String| {
        let detail = format!("the rolled-back context does not apply: {detail}");
        Error::record(&ctx.meta.thread, seq, detail)
    };
    let to = Snapshot::deserialize(snapshot).map_err(|e| bad(e.to_string()))?;
    ctx.state.replace_json(&to.state).map_err(|e| bad(e.to_string()))?;
    let (status, updated_at_ms) = (ctx.meta.status, ctx.meta.updated_at_ms);
    let restores = ctx.meta.restores;
    ctx.meta = ThreadMeta { seq, status, updated_at_ms, restores, ..to.meta };
    Ok(())
}

/// Folds `recovery_applied` into the thread's meta: a fallback gives the failed task the
/// outcome "go to the fallback node" (so the step completes and routes there, live, in a
/// restore and in a replay alike); a restore is counted.
fn apply(m: &mut ThreadMeta, _step: u64, task: &TaskKey, strategy: &Recovery) {
    match strategy {
        Recovery::Fallback(node) => {
            let j = m.open.entry(task.clone()).or_default();
            j.outcome = Some(TaskOutcome { update: None, goto: vec![Target::Node(node.clone())] });
        }
        Recovery::RestoreAndRetry => m.restores = m.restores.saturating_add(1),
        _ => {}
    }
}

/// For serde's `skip_serializing_if`.
#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde passes a reference")]
pub fn is_zero(n: &u32) -> bool {
    *n == 0
}
