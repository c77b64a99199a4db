//! How a thread's counters fold (the counters are in `telemetry.rs`).

use std::collections::BTreeMap;

use crate::error::Error;
use crate::event::Body;
use crate::telemetry::add_usage;
use crate::thread_ctx::{EventAt, ThreadCtx};

/// Folds the counters' part of `e` into `ctx`. Runs after the journals: a step is counted
/// once it completed.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let t = &mut ctx.meta.telemetry;
    match e.body {
        Body::ToolCalled { .. } => t.tool_calls += 1,
        Body::ToolReturned { usage, models, .. } => add_usage(t, usage, models),
        Body::NodeCompleted { task, duration_ms, usage, .. } => {
            add_usage(t, usage, &BTreeMap::new());
            match t.node_ms.get_mut(&*task.node) {
                Some(ms) => *ms += duration_ms,
                None => {
                    t.node_ms.insert(task.node.clone(), *duration_ms);
                }
            }
        }
        Body::NodeFailed { .. } => t.errors += 1,
        Body::RetryScheduled { .. } => t.retries += 1,
        Body::CheckpointCreated { .. } => t.checkpoints += 1,
        Body::StepCompleted { .. } => t.steps += 1,
        _ => {}
    }
    Ok(())
}
