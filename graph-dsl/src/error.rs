//! Errors of this crate, all in one place.
//!
//! [`NodeError`] is the outcome of a node attempt that did not succeed: the engine records it in
//! the log, so it is serialisable and carries data, not sources. [`ToolError`] is what a tool body
//! returns and becomes a [`NodeError`]. [`RouteError`] and [`StateError`] are what the type-erased
//! workflow reports to the engine at run time; [`VarError`] refuses a write to a read-only
//! variable before it reaches the log. Definition errors are collected in
//! [`BuildError`](crate::BuildError) (see `problem.rs`).
//!
//! Each variant says whether retrying the same thing can help (transient) or not (permanent).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::RetryPolicy;

/// Why a node attempt did not produce an output.
///
/// Failures (`Failed`, `Timeout`, ...) end the attempt; suspensions (`Interrupted`, `Sleeping`, `WaitingSignal`,
/// and a `Lock` wait) park the node until the engine can resume it, and are not failures.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum NodeError {
    /// The node's own code failed; transient if `retryable` (and its code is not listed in the
    /// policy's `non_retryable`), permanent otherwise.
    #[error("node failed{}: {message}", code_suffix(code.as_deref()))]
    Failed {
        /// A stable, machine-readable code that retry policies can name, e.g. `"rate_limited"`.
        code: Option<String>,
        /// Human-readable description.
        message: String,
        /// Whether another attempt may succeed.
        retryable: bool,
    },
    /// Suspension, not a failure: the node asked for human input and none has arrived yet.
    #[error("waiting for input")]
    Interrupted {
        /// What the node asks the human (shown to whoever answers).
        prompt: Value,
    },
    /// Suspension, not a failure: the node is in a durable sleep until `until_ms`.
    #[error("sleeping until {until_ms} ms")]
    Sleeping {
        /// Wall-clock time (engine clock, ms) at which the timer fires.
        until_ms: u64,
    },
    /// Suspension, not a failure: the node waits for a signal named `name` (see
    /// [`Ctx::recv`](crate::Ctx::recv)) and none is there yet; the thread parks until one is
    /// sent, then runs the node again.
    #[error("waiting for signal {name:?}")]
    WaitingSignal {
        /// The signal's name.
        name: String,
    },
    /// Suspension, not a failure: something the node waits on is paused (a sub-workflow's
    /// child thread); the thread pauses at this node and runs it again when resumed.
    #[error("paused: {reason}")]
    Paused {
        /// What is paused, e.g. `"child thread t1.sub.s3 is paused"`.
        reason: String,
    },
    /// Permanent for this attempt: the thread was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// Permanent: a tool call needs a permission the workflow does not hold.
    #[error("tool {tool:?} needs permission {permission:?}")]
    PermissionDenied {
        /// The tool that was refused.
        tool: String,
        /// The permission it needs.
        permission: String,
    },
    /// Permanent: a budget of the thread is exhausted.
    #[error("budget exceeded: {budget}")]
    BudgetExceeded {
        /// Which budget, e.g. `"max_tool_calls"`.
        budget: String,
    },
    /// Permanent: re-execution did not match the recorded history (the code changed or is not
    /// deterministic outside the context's recorded helpers).
    #[error("nondeterminism: {detail}")]
    Nondeterminism {
        /// What differed.
        detail: String,
    },
    /// Transient: a lock could not be taken (held elsewhere) or released.
    #[error("lock {name:?}: {detail}")]
    Lock {
        /// The lock's name.
        name: String,
        /// Why.
        detail: String,
    },
    /// Transient: some of the locks asked for at once are held elsewhere, so none was taken
    /// (see [`Ctx::try_lock_all`](crate::Ctx::try_lock_all)); `held` names each of them.
    #[error("locks held elsewhere, none taken: {}", held_list(held))]
    LocksHeld {
        /// Every lock asked for that another thread holds, in the order asked.
        held: Vec<HeldLock>,
    },
    /// Permanent: a value did not serialise or deserialise as the node expected.
    #[error("codec: {detail}")]
    Codec {
        /// What could not be encoded or decoded, and why.
        detail: String,
    },
    /// Transient: the attempt ran past its policy's `timeout_ms`.
    #[error("timed out after {after_ms} ms")]
    Timeout {
        /// The timeout that fired.
        after_ms: u64,
    },
}

/// A lock another thread holds (what [`NodeError::LocksHeld`] reports).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldLock {
    /// The lock's name.
    pub name: String,
    /// The thread holding it.
    pub owner: String,
    /// When its hold lapses unless renewed (engine clock, ms).
    pub expires_at_ms: u64,
}

fn held_list(held: &[HeldLock]) -> String {
    let each =
        held.iter().map(|h| format!("{} (by {} until {} ms)", h.name, h.owner, h.expires_at_ms));
    each.collect::<Vec<_>>().join(", ")
}

fn code_suffix(code: Option<&str>) -> String {
    code.map(|c| format!(" [{c}]")).unwrap_or_default()
}

impl NodeError {
    /// A failure another attempt may fix (a flaky network, a rate limit).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeError, RetryPolicy};
    /// let e = NodeError::retryable("rate limited").with_code("rate_limited");
    /// assert!(e.is_retryable(&RetryPolicy::exponential(3, 100, 1_000)));
    /// ```
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::Failed { code: None, message: message.into(), retryable: true }
    }

    /// A failure no retry can fix (bad input, a logic error).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeError, RetryPolicy};
    /// assert!(!NodeError::fatal("bad input").is_retryable(&RetryPolicy::exponential(3, 100, 1_000)));
    /// ```
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::Failed { code: None, message: message.into(), retryable: false }
    }

    /// Sets the machine-readable code of a `Failed` error; other variants are returned unchanged.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::NodeError;
    /// let e = NodeError::fatal("quota").with_code("quota");
    /// assert_eq!(e.code(), Some("quota"));
    /// ```
    #[must_use]
    pub fn with_code(self, new_code: impl Into<String>) -> Self {
        match self {
            Self::Failed { message, retryable, .. } => {
                Self::Failed { code: Some(new_code.into()), message, retryable }
            }
            other => other,
        }
    }

    /// The code of a `Failed` error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Failed { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// Whether the engine should run another attempt under `policy` (attempts left permitting):
    /// a `Failed` marked retryable whose code the policy does not list as non-retryable, a
    /// `Timeout`, or a `Lock` error. Suspensions are not failures, so they are never retried.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeError, RetryPolicy};
    /// let policy = RetryPolicy::exponential(3, 100, 1_000).non_retryable("quota");
    /// assert!(NodeError::Timeout { after_ms: 10 }.is_retryable(&policy));
    /// assert!(!NodeError::retryable("x").with_code("quota").is_retryable(&policy));
    /// assert!(!NodeError::Sleeping { until_ms: 5 }.is_retryable(&policy));
    /// ```
    pub fn is_retryable(&self, policy: &RetryPolicy) -> bool {
        match self {
            Self::Failed { code, retryable, .. } => {
                *retryable
                    && code.as_ref().is_none_or(|c| !policy.non_retryable.iter().any(|n| n == c))
            }
            Self::Timeout { .. } | Self::Lock { .. } | Self::LocksHeld { .. } => true,
            Self::Interrupted { .. }
            | Self::Sleeping { .. }
            | Self::WaitingSignal { .. }
            | Self::Paused { .. }
            | Self::Cancelled
            | Self::PermissionDenied { .. }
            | Self::BudgetExceeded { .. }
            | Self::Nondeterminism { .. }
            | Self::Codec { .. } => false,
        }
    }

    /// Whether this is a suspension (waiting for input, a timer, or something paused), which
    /// parks the node instead of failing it.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::NodeError;
    /// assert!(NodeError::Sleeping { until_ms: 1 }.is_suspension());
    /// assert!(!NodeError::Cancelled.is_suspension());
    /// ```
    pub fn is_suspension(&self) -> bool {
        matches!(
            self,
            Self::Interrupted { .. }
                | Self::Sleeping { .. }
                | Self::WaitingSignal { .. }
                | Self::Paused { .. }
        )
    }

    pub(crate) fn codec(what: &str, err: impl std::fmt::Display) -> Self {
        Self::Codec { detail: format!("{what}: {err}") }
    }
}

impl From<StateError> for NodeError {
    fn from(err: StateError) -> Self {
        Self::Codec { detail: err.to_string() }
    }
}

impl From<VarError> for NodeError {
    fn from(err: VarError) -> Self {
        Self::Failed {
            code: Some(err.code().to_owned()),
            message: err.to_string(),
            retryable: false,
        }
    }
}

/// What a tool body returns when it fails; becomes [`NodeError::Failed`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("tool failed{}: {message}", code_suffix(code.as_deref()))]
pub struct ToolError {
    /// Human-readable description.
    pub message: String,
    /// Whether another attempt may succeed (transient) or not (permanent).
    pub retryable: bool,
    /// A machine-readable code that retry policies can name.
    pub code: Option<String>,
}

impl ToolError {
    /// A failure another attempt may fix.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::ToolError;
    /// assert!(ToolError::retryable("503").retryable);
    /// ```
    pub fn retryable(message: impl Into<String>) -> Self {
        Self { message: message.into(), retryable: true, code: None }
    }

    /// A failure no retry can fix.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::ToolError;
    /// assert!(!ToolError::fatal("404").retryable);
    /// ```
    pub fn fatal(message: impl Into<String>) -> Self {
        Self { message: message.into(), retryable: false, code: None }
    }

    /// Sets the machine-readable code.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::ToolError;
    /// assert_eq!(ToolError::fatal("x").with_code("auth").code.as_deref(), Some("auth"));
    /// ```
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }
}

impl From<ToolError> for NodeError {
    fn from(err: ToolError) -> Self {
        Self::Failed { code: err.code, message: err.message, retryable: err.retryable }
    }
}

/// Why the engine cannot tell where a thread goes after a node. Always permanent: the workflow's
/// code chose a target its definition does not declare, so running it again chooses the same.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// Permanent: a route function returned a name outside its declared targets.
    #[error("route of {node:?} returned {returned:?}, which is not among its declared targets")]
    UndeclaredRoute {
        /// The node (or `START`) whose route misbehaved.
        node: String,
        /// What the route returned.
        returned: String,
    },
    /// Permanent: a node's output chose a `goto` target it did not declare.
    #[error("node {node:?} chose goto {target:?}, which is not among its declared gotos")]
    UndeclaredGoto {
        /// The node.
        node: String,
        /// The undeclared target.
        target: String,
    },
    /// Permanent: a node with neither edges nor a route returned no `goto`, so it has nowhere
    /// to go.
    #[error("node {node:?} has only goto targets and chose none")]
    MissingGoto {
        /// The node.
        node: String,
    },
    /// Permanent (an engine bug): the node id is not in this workflow.
    #[error("node id {0} is not in this workflow")]
    UnknownNode(usize),
    /// Permanent: the state could not be read to evaluate the route.
    #[error("route state: {0}")]
    State(#[from] StateError),
}

/// A state, update or mapping value that did not convert between JSON and its Rust type, or a
/// run-time limit that was exceeded. Permanent: the same input fails the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Permanent: a value did not serialise or deserialise.
    #[error("{what}: {detail}")]
    Codec {
        /// What was being converted, e.g. `"state"`, `"update"`, `"map item"`.
        what: &'static str,
        /// The serde error.
        detail: String,
    },
    /// Permanent: a value produced at run time exceeds a limit in [`crate::limits`].
    #[error("{limit} exceeded: {value} > {max}")]
    LimitExceeded {
        /// The limit's name in [`crate::limits`].
        limit: &'static str,
        /// The value found.
        value: u64,
        /// The limit.
        max: u64,
    },
}

impl StateError {
    pub(crate) fn codec(what: &'static str, err: impl std::fmt::Display) -> Self {
        Self::Codec { what, detail: err.to_string() }
    }
}

/// A refused change to a [`Variables`](crate::Variables) state. Permanent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum VarError {
    /// Permanent: the variable is read-only.
    #[error("variable {name:?} is read-only")]
    ReadOnly {
        /// The variable's name.
        name: String,
    },
    /// Permanent: the value is not of the variable's declared type.
    #[error("variable {name:?} is declared {expected:?}; a {found:?} value was given")]
    WrongType {
        /// The variable's name.
        name: String,
        /// Its declared type.
        expected: crate::VarType,
        /// The type of the value given.
        found: crate::VarType,
    },
    /// Permanent: more metadata entries than [`VAR_METADATA_ENTRIES_MAX`](crate::limits::VAR_METADATA_ENTRIES_MAX).
    #[error("variable {name:?} has {entries} metadata entries, over the limit")]
    TooMuchMetadata {
        /// The variable's name.
        name: String,
        /// How many entries were given.
        entries: usize,
    },
}

impl VarError {
    /// A short machine-readable code for the refusal (`read_only`, `wrong_type`, `metadata`).
    pub fn code(&self) -> &'static str {
        match self {
            VarError::ReadOnly { .. } => "read_only",
            VarError::WrongType { .. } => "wrong_type",
            VarError::TooMuchMetadata { .. } => "metadata",
        }
    }
}
