//! Sub-workflows: a subgraph node runs its child workflow as a child thread.
//!
//! The child thread's id is derived from the parent's thread, task and step, so running the
//! parent task again (after a crash, or after input) finds the same child and resumes it instead
//! of starting another: starting is idempotent. The child is driven inline by the parent's
//! runner (it needs no concurrency permit of its own, see `child_run.rs`), and its nesting
//! depth is bounded. This file is the node's side: the child's id, and what its stop means for
//! the parent's node.

use std::sync::Arc;

use cairn_dsl::{DynWorkflow, NodeError, NodeOutput, StateError};
use cairn_storage::{ThreadId, ThreadStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::env::ThreadEnv;
use crate::core::event::TaskKey;
use crate::core::thread_ctx::Waiting;
use crate::limits;

/// The id of the child thread of `task` at `step` of `parent`.
pub fn child_id(parent: &ThreadId, task: &TaskKey, step: u64) -> String {
    let id = format!("{parent}/{task}@{step}");
    if id.len() <= cairn_storage::limits::THREAD_ID_BYTES_MAX {
        return id;
    }
    // Deep nesting makes long ids: keep a readable tail and a hash of the whole.
    let hash = blake3::hash(id.as_bytes()).to_hex();
    format!("sub-{}-{}", &hash[..32], &task.node.chars().take(64).collect::<String>())
}

type OutputFn = Arc<dyn Fn(&Value) -> Result<Value, StateError> + Send + Sync>;

/// Runs (or resumes) the child thread and maps its final state to the parent's update.
pub(crate) fn run_child(
    env: Arc<ThreadEnv>,
    task: TaskKey,
    step: u64,
    child: Arc<DynWorkflow>,
    input: Value,
    output: OutputFn,
    inputs: Vec<Value>,
) -> BoxFuture<'static, Result<NodeOutput<Value>, NodeError>> {
    Box::pin(async move {
        if env.depth + 1 > limits::SUBGRAPH_DEPTH_MAX {
            return Err(NodeError::fatal(format!(
                "limit subgraph_depth exceeded: {} > {}",
                env.depth + 1,
                limits::SUBGRAPH_DEPTH_MAX
            )));
        }
        env.settle().await.map_err(|e| env.stop.node_error(e))?;
        let id = ThreadId::new(child_id(&env.thread, &task, step))
            .map_err(|e| env.stop.node_error(e.into()))?;
        // Input the parent received while the child waited goes on to the child.
        let (status, ctx) =
            env.children.run(id.clone(), child, input, inputs.last().cloned()).await?;
        match status {
            ThreadStatus::Completed => {
                let final_state = match ctx.meta.output.clone() {
                    Some(output) => output,
                    None => ctx
                        .state
                        .to_json()
                        .map_err(|e| NodeError::Codec { detail: e.to_string() })?,
                };
                let update =
                    output(&final_state).map_err(|e| NodeError::Codec { detail: e.to_string() })?;
                Ok(NodeOutput::update(update))
            }
            ThreadStatus::WaitingInput => {
                let prompt = match &ctx.meta.waiting {
                    Some(Waiting::Input { prompt, .. }) => prompt.clone(),
                    _ => Value::Null,
                };
                Err(NodeError::Interrupted {
                    prompt: json!({ "child": id.to_string(), "prompt": prompt }),
                })
            }
            ThreadStatus::Sleeping => match &ctx.meta.waiting {
                Some(Waiting::Timer { until_ms, .. }) => {
                    Err(NodeError::Sleeping { until_ms: *until_ms })
                }
                _ => Err(NodeError::retryable(format!("child thread {id} sleeps without a timer"))),
            },
            // Paused by a control (or a budget of its own): the parent pauses at this node too;
            // resuming the parent resumes the child.
            ThreadStatus::Paused => {
                Err(NodeError::Paused { reason: format!("child thread {id} is paused") })
            }
            other => Err(NodeError::fatal(format!("child thread {id} ended {other}"))),
        }
    })
}
