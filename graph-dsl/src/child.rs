//! Children a node starts at run time: [`Ctx::start_child`] starts a thread of any registered
//! workflow and hands back a [`ChildHandle`]; [`Ctx::join_child`] (or [`Ctx::join_children`])
//! waits for it to end, in the same node or a later one (keep the handle in the state), or the
//! node leaves it to run on its own.
//!
//! Both are recorded in the parent's log: the start as the child's id (derived from the parent
//! thread, the step, the node and the start's place among the task's recorded values, so a node
//! that runs again after a crash finds the same child and never starts a second one), the join
//! as how the child ended. What becomes of a child the parent never joins when the parent ends
//! is its [`ParentClose`] policy: by default the child runs on ([`ParentClose::Abandon`]).

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Ctx, NodeError, State, Workflow};

/// What becomes of a started child that is still running when the thread that started it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentClose {
    /// The child runs on (the default): its start is a durable fact, and the work a parent
    /// hands off (a notification, a clean-up, a long report) usually outlives it on purpose.
    #[default]
    Abandon,
    /// The child is cancelled when the parent ends (completes, fails, is cancelled or times
    /// out), once the parent's end is durable.
    Cancel,
}

/// A start of a child thread, as a node asks the engine for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildStart {
    /// The registered workflow's id (its latest registered version runs).
    pub workflow: String,
    /// The child's first state.
    pub input: Value,
    /// What becomes of the child when the parent ends.
    pub parent_close: ParentClose,
}

/// How a joined child ended, as the engine recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildEnded {
    /// The child thread's id.
    pub child: String,
    /// Its terminal status (`completed`, `failed`, `cancelled`, `timed_out`).
    pub status: String,
    /// Its output (its final state, or what its workflow's output gives), when it completed.
    pub output: Option<Value>,
    /// Its last error, when it did not complete.
    pub error: Option<String>,
}

/// A child thread a node started: keep it (it is serialisable, so it can live in the state) and
/// join it once ([`Ctx::join_child`]) or let the child run on.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChildHandle<S> {
    id: String,
    #[serde(skip)]
    state: PhantomData<fn() -> S>,
}

impl<S> ChildHandle<S> {
    /// A handle of the child thread `id` (as [`ChildHandle::id`] gave it).
    pub fn from_id(id: impl Into<String>) -> Self {
        Self { id: id.into(), state: PhantomData }
    }

    /// The child thread's id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Ctx {
    /// Starts a child thread of `workflow` (registered with the engine) on `input`, and returns
    /// its handle; the child runs on its own, like a thread `Engine::start` started. The child's
    /// id is derived from this thread, step and node and the start's place in the node, and the
    /// start is recorded: a node that runs again after a crash gets the same handle and starts
    /// nothing, and a node that starts another workflow or input there than it did is reported
    /// as nondeterminism. A child not joined runs on after the parent ends
    /// ([`ParentClose::Abandon`]); see [`Ctx::start_child_with`].
    ///
    /// # Errors
    /// [`NodeError::Failed`] (not retryable) for a workflow the engine does not have, an input
    /// that is not a valid state of it, or more children than the limits allow
    /// (`CHILDREN_PER_TASK_MAX`, `CHILDREN_PER_THREAD_MAX` in the engine); [`NodeError::Codec`]
    /// if the input does not serialise.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{ChildHandle, Ctx, NodeError, Replace, Workflow};
    /// async fn fan_out(ctx: &Ctx, report: &Workflow<Replace<u64>>) -> Result<u64, NodeError> {
    ///     let a: ChildHandle<Replace<u64>> = ctx.start_child(report, Replace(1)).await?;
    ///     let b = ctx.start_child(report, Replace(2)).await?;
    ///     let totals: Vec<u64> = ctx.join_children([a, b]).await?;
    ///     Ok(totals.iter().sum())
    /// }
    /// ```
    pub async fn start_child<S: State>(
        &self,
        workflow: &Workflow<S>,
        input: S,
    ) -> Result<ChildHandle<S>, NodeError> {
        self.start_child_with(workflow, input, ParentClose::default()).await
    }

    /// [`Ctx::start_child`] with the policy for the child when this thread ends.
    ///
    /// # Errors
    /// As [`Ctx::start_child`].
    pub async fn start_child_with<S: State>(
        &self,
        workflow: &Workflow<S>,
        input: S,
        parent_close: ParentClose,
    ) -> Result<ChildHandle<S>, NodeError> {
        let input = serde_json::to_value(input).map_err(|e| NodeError::codec("child input", e))?;
        let start = ChildStart { workflow: workflow.id().to_owned(), input, parent_close };
        let id = self.inner().start_child(start).await?;
        Ok(ChildHandle::from_id(id))
    }

    /// Waits until the child ends and returns its output as an `O` (its final state, or its
    /// workflow's output). How it ended is recorded: a node that runs again gets the same.
    /// The handle is used up; a handle joined twice in one node is refused.
    ///
    /// # Errors
    /// [`NodeError::Failed`] (not retryable) when the child did not complete (naming its status
    /// and last error), for a thread this one did not start, or a handle joined twice;
    /// [`NodeError::Codec`] if the output is not an `O`; [`NodeError::Cancelled`] when this
    /// thread is cancelled while it waits.
    pub async fn join_child<S, O: DeserializeOwned>(
        &self,
        handle: ChildHandle<S>,
    ) -> Result<O, NodeError> {
        let ended = self.join_child_ended(handle).await?;
        match ended.output {
            Some(output) if ended.status == "completed" => {
                O::deserialize(&output).map_err(|e| NodeError::codec("child output", e))
            }
            _ => Err(NodeError::fatal(format!(
                "child thread {} ended {}{}",
                ended.child,
                ended.status,
                ended.error.map(|e| format!(": {e}")).unwrap_or_default()
            ))),
        }
    }

    /// Waits until the child ends and returns how it ended, whatever that was (so the node can
    /// go on after a child that failed).
    ///
    /// # Errors
    /// As [`Ctx::join_child`], except for a child that did not complete.
    pub async fn join_child_ended<S>(
        &self,
        handle: ChildHandle<S>,
    ) -> Result<ChildEnded, NodeError> {
        self.inner().join_child(handle.id()).await
    }

    /// Joins each of `handles` in turn ([`Ctx::join_child`]) and returns their outputs in
    /// their order.
    ///
    /// # Errors
    /// The first error of [`Ctx::join_child`].
    pub async fn join_children<S, O: DeserializeOwned>(
        &self,
        handles: impl IntoIterator<Item = ChildHandle<S>>,
    ) -> Result<Vec<O>, NodeError> {
        let mut outputs = Vec::new();
        for handle in handles {
            outputs.push(self.join_child(handle).await?);
        }
        Ok(outputs)
    }
}
