//! What the engine does when a node fails for good: its retries (the node's [`RetryPolicy`]),
//! if any, are spent, and the failure would end the thread.
//!
//! [`RetryPolicy`]: crate::RetryPolicy

use serde::{Deserialize, Serialize};

/// A node's recovery strategy (`NodePolicy::on_failure`, or a workflow's default through
/// `WorkflowBuilder::on_failure`). The engine records which one ran as a `recovery_applied`
/// event, before what it does.
///
/// # Examples
/// ```
/// use cairn_dsl::{NodeOutput, NodePolicy, Recovery, Replace, RetryPolicy, Workflow, END, START};
/// let wf = Workflow::<Replace<String>>::builder("code", 1)
///     .node_with(
///         "gpu",
///         |_s, _ctx| async { Err(cairn_dsl::NodeError::retryable("out of memory")) },
///         // Two attempts, then run the fallback instead of failing the thread.
///         NodePolicy::default()
///             .retry(RetryPolicy::fixed(2, 10))
///             .on_failure(Recovery::Fallback("cpu".into())),
///     )
///     .node("cpu", |_s, _ctx| async { Ok(NodeOutput::update("ran on cpu".to_owned())) })
///     .edge(START, "gpu")
///     .edge("gpu", END)
///     .gotos("gpu", ["cpu"])
///     .edge("cpu", END)
///     .build()?;
/// # Ok::<(), cairn_dsl::BuildError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Recovery {
    /// The thread fails (the default).
    #[default]
    Fail,
    /// The failed node's step goes on to this node instead, as if the node had chosen it
    /// (it must be one of the node's declared gotos, `WorkflowBuilder::gotos`).
    Fallback(String),
    /// The thread is rolled back in place to its latest checkpoint and runs on from there
    /// (at most `RESTORES_PER_THREAD_MAX` times a thread, then it fails).
    RestoreAndRetry,
    /// The thread parks waiting for a person (its prompt says what failed); any answer runs
    /// the node again, one more attempt; cancel or abandon the thread to give up.
    Escalate,
    /// The thread ends Cancelled ("abandoned"), not Failed: the work is given up on purpose.
    Abandon,
}

impl Recovery {
    /// The strategy's name as events and listings show it.
    pub fn name(&self) -> &'static str {
        match self {
            Recovery::Fail => "fail",
            Recovery::Fallback(_) => "fallback",
            Recovery::RestoreAndRetry => "restore_and_retry",
            Recovery::Escalate => "escalate",
            Recovery::Abandon => "abandon",
        }
    }

    /// Whether this is [`Recovery::Fail`].
    pub fn is_fail(&self) -> bool {
        *self == Recovery::Fail
    }
}
