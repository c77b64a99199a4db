//! What the engine does when a node fails for good: its retries (the node's [`RetryPolicy`]),
//! if any, are spent, and the failure would end the thread.
//!
//! [`RetryPolicy`]: crate::RetryPolicy

use serde::{Deserialize, Serialize};

use crate::NodeError;

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

/// The kind of a node's failure for good, which picks its recovery when its policy names one
/// for the kind (`NodePolicy::on_failure_of`), else `NodePolicy::on_failure` applies. The
/// engine classifies the final attempt's error with [`FailureKind::of`] (a function of the
/// recorded error alone, so a restore, a replay and a fork choose as the live run did) and
/// records the kind in the `recovery_applied` event.
///
/// # Examples
/// ```
/// use cairn_dsl::{FailureKind, NodeError};
/// assert_eq!(FailureKind::of(&NodeError::Timeout { after_ms: 50 }), FailureKind::Timeout);
/// let e = NodeError::retryable("lock order").with_code("deadlock");
/// assert_eq!(FailureKind::of(&e), FailureKind::Deadlock);
/// assert_eq!(FailureKind::of(&NodeError::fatal("bad input")), FailureKind::Other);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The attempt ran past its policy's `timeout_ms` ([`NodeError::Timeout`]), or the node
    /// failed with the code `"timeout"`.
    Timeout,
    /// A budget of the thread was exceeded ([`NodeError::BudgetExceeded`]), a storage limit or
    /// a full disk refused a write of the node (the engine's error code
    /// `"resource_exhausted"`), or the node failed with that code.
    ResourceExhausted,
    /// A wait for a named lock timed out (a [`NodeError::Lock`] whose detail starts with
    /// `"wait timed out"`), or the node failed with the code `"deadlock"`.
    Deadlock,
    /// Any other failure.
    Other,
}

impl FailureKind {
    /// Every kind, in order.
    pub const ALL: [FailureKind; 4] = [
        FailureKind::Timeout,
        FailureKind::ResourceExhausted,
        FailureKind::Deadlock,
        FailureKind::Other,
    ];

    /// The kind of `error` (see each variant).
    pub fn of(error: &NodeError) -> FailureKind {
        match error {
            NodeError::Timeout { .. } => FailureKind::Timeout,
            NodeError::BudgetExceeded { .. } => FailureKind::ResourceExhausted,
            NodeError::Lock { detail, .. } if detail.starts_with("wait timed out") => {
                FailureKind::Deadlock
            }
            _ => match error.code() {
                Some("timeout") => FailureKind::Timeout,
                Some("resource_exhausted") => FailureKind::ResourceExhausted,
                Some("deadlock") => FailureKind::Deadlock,
                _ => FailureKind::Other,
            },
        }
    }

    /// The kind's name as events and listings show it.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::ResourceExhausted => "resource_exhausted",
            FailureKind::Deadlock => "deadlock",
            FailureKind::Other => "other",
        }
    }

    /// The kind of a byte written by [`FailureKind::byte`].
    pub fn from_byte(b: u8) -> Option<FailureKind> {
        FailureKind::ALL.get(usize::from(b)).copied()
    }

    /// The kind as one byte (its place in [`FailureKind::ALL`]; never renumbered).
    pub fn byte(self) -> u8 {
        match self {
            FailureKind::Timeout => 0,
            FailureKind::ResourceExhausted => 1,
            FailureKind::Deadlock => 2,
            FailureKind::Other => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_error_and_code_and_bytes_round_trip() {
        assert_eq!(FailureKind::of(&NodeError::Timeout { after_ms: 1 }), FailureKind::Timeout);
        let code = |c: &str| FailureKind::of(&NodeError::fatal("x").with_code(c));
        assert_eq!(code("timeout"), FailureKind::Timeout);
        assert_eq!(code("resource_exhausted"), FailureKind::ResourceExhausted);
        assert_eq!(code("deadlock"), FailureKind::Deadlock);
        assert_eq!(code("quota"), FailureKind::Other);
        let budget = NodeError::BudgetExceeded { budget: "tool_calls".into() };
        assert_eq!(FailureKind::of(&budget), FailureKind::ResourceExhausted);
        let lock = NodeError::Lock { name: "a".into(), detail: "wait timed out after 5 ms".into() };
        assert_eq!(FailureKind::of(&lock), FailureKind::Deadlock);
        for k in FailureKind::ALL {
            assert_eq!(FailureKind::from_byte(k.byte()), Some(k));
        }
        assert_eq!(FailureKind::from_byte(4), None);
    }
}
