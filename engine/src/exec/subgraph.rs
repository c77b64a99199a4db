//! Sub-workflows: a subgraph node runs its child workflow as a child thread.
//!
//! The child thread's id is derived from the parent's thread, task and step, so running the
//! parent task again (after a crash, or after input) finds the same child and resumes it instead
//! of starting another: starting is idempotent. The child is driven inline by the parent's
//! runner (it needs no concurrency permit of its own), and its nesting depth is bounded.

use std::sync::Arc;

use cairn_dsl::{DynWorkflow, NodeError, NodeOutput, StateError};
use cairn_storage::{ThreadId, ThreadStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::limits;
use crate::core::event::TaskKey;
use crate::exec::runner::{Exit, drive_under};
use crate::exec::task::{ThreadEnv, engine_error};
use crate::core::thread_ctx::Waiting;

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

/// Drives the child thread `id` to its end or its next park, and returns its status then. If
/// another runner of this process drives it (one woken by the child's own timer, say), the
/// parent waits for that runner to let go and looks again: whoever drives the child, the parent
/// goes on from where the child stands, and is never failed because of who drove it.
async fn drive_child(env: &Arc<ThreadEnv>, id: &ThreadId) -> Result<ThreadStatus, NodeError> {
    let inner = &env.inner;
    loop {
        let exit = drive_under(
            inner.clone(),
            id.clone(),
            env.depth + 1,
            "sub-workflow",
            Some(env.cancel.clone()),
        )
        .await
        .map_err(|e| engine_error(&e))?;
        match exit {
            Exit::Status(s) => return Ok(s),
            Exit::Shutdown => return Err(NodeError::Cancelled),
            Exit::Busy => {
                tokio::select! {
                    () = inner.claims.wait_released(id) => {}
                    () = env.cancel.cancelled() => return Err(NodeError::Cancelled),
                }
                // The other driver may have let go because the engine is stopping: do not pick
                // the child up again then (recovery will, at the next open).
                if inner.shutdown.is_cancelled() {
                    return Err(NodeError::Cancelled);
                }
            }
        }
    }
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
        env.settle().await.map_err(|e| engine_error(&e))?;
        let inner = env.inner.clone();
        let id = ThreadId::new(child_id(&env.thread, &task, step))
            .map_err(|e| engine_error(&e.into()))?;
        let mut labels = std::collections::BTreeMap::new();
        labels.insert(crate::core::children::PARENT_LABEL.to_owned(), env.thread.to_string());
        crate::exec::start::create(&inner, &child, &id, input, labels, None, Default::default())
            .await
            .map_err(|e| engine_error(&e))?;
        // Input the parent received while the child waited goes on to the child.
        if let (Some(value), Some(record)) =
            (inputs.last(), inner.store.thread(&id).map_err(|e| engine_error(&e.into()))?)
            && record.status == ThreadStatus::WaitingInput
        {
            crate::api::controls::deliver_input(&inner, &child, &id, value.clone())
                .await
                .map_err(|e| engine_error(&e))?;
        }
        let status = drive_child(&env, &id).await?;
        let ctx = crate::core::restore::restore(inner.store.as_ref(), &child, &id, None)
            .map_err(|e| engine_error(&e))?;
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
