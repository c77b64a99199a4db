//! Constructs for threads that live long or undo what they did: compensations (an undo
//! registered by a completed step, run by the engine in reverse order when the thread fails for
//! good) and continue-as-new (a node ends its thread and starts its successor on new input).

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::ToolCtx;
use crate::{Ctx, NodeError, State, ToolError, WorkflowBuilder};

/// A compensation with its types erased: the recorded JSON arguments and a [`ToolCtx`] (whose
/// idempotency key names the undo) to the JSON result.
pub type DynCompensation =
    Arc<dyn Fn(Value, ToolCtx) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;

impl<S: State> WorkflowBuilder<S> {
    /// Declares the compensation `name`: the undo a node registers with [`Ctx::on_undo`] once it
    /// did something that must be undone if the thread fails for good (a booking to cancel, a
    /// charge to refund). The engine runs the registered undos of a failed thread durably, in
    /// reverse order of registration, each once (`docs/long-lived.md`). Compensations are not
    /// part of the fingerprint (like node bodies, they are code). A name declared twice is a
    /// build error.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, ToolError, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("trip", 1)
    ///     .node("book", |_s, ctx| async move {
    ///         ctx.on_undo("cancel_flight", &"LH-123")?;
    ///         Ok(NodeOutput::update(1))
    ///     })
    ///     .edge(START, "book")
    ///     .edge("book", END)
    ///     .compensation("cancel_flight", |flight: String, _ctx| async move {
    ///         Ok::<_, ToolError>(format!("cancelled {flight}"))
    ///     })
    ///     .build()
    ///     .unwrap();
    /// assert!(wf.as_dyn().compensation("cancel_flight").is_some());
    /// ```
    pub fn compensation<A, O, F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize,
        F: Fn(A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let f = Arc::new(f);
        let erased: DynCompensation = Arc::new(move |args: Value, ctx: ToolCtx| {
            let f = Arc::clone(&f);
            Box::pin(async move {
                let args = A::deserialize(&args).map_err(|e| {
                    ToolError::fatal(format!("undo arguments do not decode: {e}"))
                        .with_code("codec")
                })?;
                let out = f(args, ctx).await?;
                serde_json::to_value(out).map_err(|e| {
                    ToolError::fatal(format!("undo output does not encode: {e}")).with_code("codec")
                })
            })
        });
        self.decls.compensations.push((name.into(), erased));
        self
    }
}

impl Ctx {
    /// Registers the undo of what this task did: the compensation `name` (declared with
    /// [`WorkflowBuilder::compensation`]) with `args`. The registration takes effect when the
    /// task completes (a task that fails or is retried registers nothing); if the thread later
    /// fails for good, the engine runs every registered undo, last registered first, each
    /// exactly once across crashes, and only then marks the thread failed. Recorded like a
    /// drawn value, so a task that runs again after a crash registers it once.
    ///
    /// # Errors
    /// [`NodeError::Codec`] if `args` do not serialise; the engine refuses a name the workflow
    /// does not declare ([`NodeError::Failed`]).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn book(ctx: &Ctx) -> Result<(), NodeError> {
    ///     // ... the booking tool call ...
    ///     ctx.on_undo("cancel_hotel", &serde_json::json!({"booking": "H-7"}))
    /// }
    /// ```
    pub fn on_undo<A: Serialize>(&self, name: &str, args: &A) -> Result<(), NodeError> {
        let args = serde_json::to_value(args).map_err(|e| NodeError::codec("undo arguments", e))?;
        self.inner().on_undo(name, args)
    }

    /// Ends this thread once the current step completes and starts its successor, a new thread
    /// of the same workflow on `input` (its initial state) with the thread's labels, in the same
    /// commit. The thread completes with its state as output and links to the successor
    /// (`continued_as`); the successor links back (`continued_from`). Use it where a loop would
    /// grow the log without bound (a schedule's thread, a conversation): each thread of the
    /// chain starts with an empty log. Recorded like a drawn value.
    ///
    /// # Errors
    /// [`NodeError::Codec`] if `input` does not serialise; the engine refuses an input that is
    /// not a valid state of the workflow.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn tick(ctx: &Ctx, done: u64) -> Result<(), NodeError> {
    ///     if done >= 1_000 {
    ///         ctx.continue_as_new(&0_u64)?; // a fresh thread, counting again from 0
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn continue_as_new<I: Serialize>(&self, input: &I) -> Result<(), NodeError> {
        let input =
            serde_json::to_value(input).map_err(|e| NodeError::codec("successor input", e))?;
        self.inner().continue_as_new(input)
    }
}
