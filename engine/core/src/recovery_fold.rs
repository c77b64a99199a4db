//! How a `recovery_applied` event folds into the thread context (see `recovery.rs` for the
//! strategies): a leaf of the fold, so that the step decision and the fold do not import each
//! other through it.

use cairn_dsl::{Recovery, Target};

use crate::event::TaskKey;
use crate::thread_ctx::{TaskOutcome, ThreadMeta};

/// Folds `recovery_applied` into the thread's meta: a fallback gives the failed task the
/// outcome "go to the fallback node" (so the step completes and routes there, live, in a
/// restore and in a replay alike); a restore is counted.
pub fn apply(m: &mut ThreadMeta, _step: u64, task: &TaskKey, strategy: &Recovery) {
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
