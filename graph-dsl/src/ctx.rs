//! [`Ctx`]: the typed face of the engine's [`NodeContext`], handed to every node.
//!
//! Typed values cross into the engine as JSON. A tool's input is serialised once, recorded by the
//! engine, and deserialised back inside the erased tool body, so the body always sees exactly the
//! recorded input.

use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::{ErasedTool, Message, NodeContext, Progress, ToolCall, ToolCtx, Usage};
use crate::{NodeError, SignalName, ToolError};

/// The context a node handler receives. Cheap to clone.
#[derive(Clone)]
pub struct Ctx(Arc<dyn NodeContext>);

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("thread_id", &self.0.thread_id())
            .field("node", &self.0.node())
            .field("step", &self.0.step())
            .field("attempt", &self.0.attempt())
            .finish()
    }
}

impl Ctx {
    /// Wraps the engine's context.
    pub fn new(inner: Arc<dyn NodeContext>) -> Self {
        Self(inner)
    }

    /// The engine's context, for calls the typed helpers do not cover.
    pub fn inner(&self) -> &Arc<dyn NodeContext> {
        &self.0
    }

    /// The thread's id.
    pub fn thread_id(&self) -> &str {
        self.0.thread_id()
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        self.0.node()
    }

    /// The thread's step number.
    pub fn step(&self) -> u64 {
        self.0.step()
    }

    /// The attempt number, from 1.
    pub fn attempt(&self) -> u32 {
        self.0.attempt()
    }

    /// The recorded clock, ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    /// A recorded random number.
    pub fn random_u64(&self) -> u64 {
        self.0.random_u64()
    }

    /// A recorded unique id.
    pub fn new_id(&self) -> String {
        self.0.new_id()
    }

    /// Whether this task runs the new code of the change `id` (a patch): `true` for a task that
    /// reaches this call first under the code that has it, `false` for one whose recorded
    /// history, written by the code before the change, already went past this point (it was
    /// waiting for input, a timer or a signal further on, or stopped by a crash). Keep the old
    /// code in the `false` branch, and a thread that ran it replays through it and matches its
    /// log, where an unguarded change would block it.
    ///
    /// The engine records a marker the first time an attempt answers `true` live, so the
    /// answer is the same when the task runs again and in every replay. The answer holds for
    /// the task (each task decides on its own; later calls with the same id in the attempt
    /// give the first answer). A change that spans nodes carries the decision in the state.
    /// Once no unfinished thread needs the old branch (`Engine::threads_without_patch`,
    /// `cairn patches ID`), replace the call with [`Ctx::deprecate_patch`] and delete the old
    /// branch. Ids are free text; keep them unique per change.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn price(ctx: &Ctx, amount: u64) -> Result<u64, NodeError> {
    ///     if ctx.patched("vat-2027") {
    ///         Ok(amount * 121 / 100) // the new rule, for threads that get here from now on
    ///     } else {
    ///         Ok(amount * 120 / 100) // the old rule, for threads that went past it already
    ///     }
    /// }
    /// ```
    pub fn patched(&self, id: &str) -> bool {
        self.0.patched(id)
    }

    /// The change `id` is kept for good and its old branch deleted: put this call where the
    /// `if ctx.patched(id)` was and keep only the new branch. It reads the marker a thread
    /// recorded under `patched`, so logs keep replaying, and records it for a task that gets
    /// here first (so code that still asks `patched(id)`, in a rolling deployment or a
    /// rollback, takes the new branch too). A task whose recorded history went past this point
    /// without the marker needed the old branch: its attempt fails with
    /// [`NodeError::Nondeterminism`] naming the patch (list such threads before deprecating).
    /// Once no thread could still replay a task from the time of `patched`, the call can go too.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn price(ctx: &Ctx, amount: u64) -> Result<u64, NodeError> {
    ///     ctx.deprecate_patch("vat-2027");
    ///     Ok(amount * 121 / 100)
    /// }
    /// ```
    pub fn deprecate_patch(&self, id: &str) {
        self.0.deprecate_patch(id);
    }

    /// The item of a map node's task, as a `T`.
    ///
    /// # Errors
    /// [`NodeError::Codec`] if this is not a map task or the item is not a `T`.
    pub fn item<T: DeserializeOwned>(&self) -> Result<T, NodeError> {
        let item = self.0.item().ok_or_else(|| NodeError::Codec {
            detail: format!("node {:?} is not a map task and has no item", self.node()),
        })?;
        T::deserialize(item).map_err(|e| NodeError::codec("map item", e))
    }

    /// Calls the tool `name` (no permission needed) with `input`; runs `run` only if no result is
    /// recorded for this call.
    ///
    /// # Errors
    /// The tool's error as [`NodeError::Failed`]; [`NodeError::Codec`] if input or output do not
    /// convert; whatever the engine refuses (budget, cancellation).
    pub async fn tool<I, O, F, Fut>(&self, name: &str, input: I, run: F) -> Result<O, NodeError>
    where
        I: Serialize + DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned,
        F: FnOnce(I, ToolCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.call(ToolCall::new(name), input, run).await
    }

    /// Like [`Ctx::tool`], with a full [`ToolCall`] (e.g. one that needs a permission).
    ///
    /// # Errors
    /// As [`Ctx::tool`], plus [`NodeError::PermissionDenied`] when the workflow lacks the
    /// permission.
    pub async fn call<I, O, F, Fut>(&self, call: ToolCall, input: I, run: F) -> Result<O, NodeError>
    where
        I: Serialize + DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned,
        F: FnOnce(I, ToolCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let input = serde_json::to_value(input).map_err(|e| NodeError::codec("tool input", e))?;
        let erased: ErasedTool = Box::new(move |recorded: Value, tool_ctx: ToolCtx| {
            Box::pin(async move {
                let input = I::deserialize(&recorded).map_err(|e| {
                    ToolError::fatal(format!("tool input does not decode: {e}")).with_code("codec")
                })?;
                let output = run(input, tool_ctx).await?;
                serde_json::to_value(output).map_err(|e| {
                    ToolError::fatal(format!("tool output does not encode: {e}")).with_code("codec")
                })
            })
        });
        let output = self.0.call_tool(call, input, erased).await?;
        O::deserialize(&output).map_err(|e| NodeError::codec("tool output", e))
    }

    /// Reports progress: `step` of `total`, with a message.
    pub fn progress(&self, step: u32, total: u32, message: impl Into<String>) {
        let message = message.into();
        self.0.progress(Progress { step, total, message, percent: None, detail: None });
    }

    /// Reports progress with a detail line beside the message (see [`Progress::detail`]).
    pub fn progress_detail(
        &self,
        step: u32,
        total: u32,
        message: impl Into<String>,
        detail: impl Into<String>,
    ) {
        let (message, detail) = (message.into(), Some(detail.into()));
        self.0.progress(Progress { step, total, message, percent: None, detail });
    }

    /// Adds a message to the thread's conversation.
    pub fn message(&self, message: Message) {
        self.0.message(message);
    }

    /// Reports model usage made outside tools.
    pub fn usage(&self, tokens: u64, cost_micros: u64) {
        self.0.usage(Usage { tokens, cost_micros });
    }

    /// Asks a human: returns their answer as an `R` once it has arrived.
    ///
    /// # Errors
    /// [`NodeError::Interrupted`] until the answer arrives (propagate it with `?`: the engine
    /// suspends the node and runs it again with the answer); [`NodeError::Codec`] if the prompt
    /// or answer do not convert.
    pub fn interrupt<P: Serialize, R: DeserializeOwned>(&self, prompt: P) -> Result<R, NodeError> {
        let prompt = serde_json::to_value(prompt).map_err(|e| NodeError::codec("prompt", e))?;
        let answer = self.0.interrupt(prompt)?;
        R::deserialize(&answer).map_err(|e| NodeError::codec("human input", e))
    }

    /// Receives the next signal named `name` sent to this thread (`Engine::signal`,
    /// `cairn signal`), as an `R`. Signals of one name are received in the order they were
    /// sent, each exactly once: the receipt is recorded, so a node that runs again after a
    /// crash receives the same signal, and the next call the next one.
    ///
    /// Declare the signal with the same type
    /// ([`WorkflowBuilder::signal`](crate::WorkflowBuilder::signal)) and a value that is not an
    /// `R` is refused at send. One that arrives anyway (sent before the declaration, or under a
    /// name the workflow does not declare) is set aside: received, so never received again,
    /// reported ([`NodeContext::signal_set_aside`]: the engine logs a warning), and this call
    /// goes on to the next signal of that name, waiting while there is none. The thread keeps
    /// running; it never fails on a value that does not decode.
    ///
    /// # Errors
    /// [`NodeError::WaitingSignal`] while none is there (propagate it with `?`: the thread parks
    /// durably and runs the node again once a signal of that name is sent).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// # #[derive(serde::Deserialize)] struct Payment { amount: u64 }
    /// async fn wait_for_payment(ctx: &Ctx) -> Result<u64, NodeError> {
    ///     let payment: Payment = ctx.recv("payment").await?;
    ///     Ok(payment.amount)
    /// }
    /// ```
    pub async fn recv<R: DeserializeOwned>(
        &self,
        name: impl SignalName<R>,
    ) -> Result<R, NodeError> {
        let name = name.signal_name();
        // Bounded: each turn receives a signal, and a thread is sent finitely many
        // (`SIGNALS_PER_THREAD_MAX` in storage).
        loop {
            let value = self.0.recv(name).await?;
            if let Some(received) = self.decoded(name, &value) {
                return Ok(received);
            }
        }
    }

    /// The next signal named `name` if one is there now, else `None`; never waits. A value
    /// that is not an `R` is set aside as [`Ctx::recv`] does, and the next one looked at.
    ///
    /// # Errors
    /// Whatever the engine refuses (a storage failure stops the node).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn cancelled(ctx: &Ctx) -> Result<bool, NodeError> {
    ///     Ok(ctx.try_recv::<serde_json::Value>("cancel").await?.is_some())
    /// }
    /// ```
    pub async fn try_recv<R: DeserializeOwned>(
        &self,
        name: impl SignalName<R>,
    ) -> Result<Option<R>, NodeError> {
        let name = name.signal_name();
        // Bounded as `recv`'s loop.
        while let Some(value) = self.0.try_recv(name).await? {
            if let Some(received) = self.decoded(name, &value) {
                return Ok(Some(received));
            }
        }
        Ok(None)
    }

    /// `value` as an `R`, or `None` after reporting it set aside.
    fn decoded<R: DeserializeOwned>(&self, name: &str, value: &Value) -> Option<R> {
        match R::deserialize(value) {
            Ok(received) => Some(received),
            Err(e) => {
                let expected = crate::signals::short_type_name(std::any::type_name::<R>());
                let detail = format!("not a {expected}: {e}");
                self.0.signal_set_aside(name, &detail);
                None
            }
        }
    }

    /// Sleeps durably for `ms`: the timer survives a crash.
    ///
    /// # Errors
    /// [`NodeError::Sleeping`] until the timer fires (propagate it with `?`).
    pub async fn sleep_ms(&self, ms: u64) -> Result<(), NodeError> {
        self.0.sleep(ms).await
    }

    /// Sleeps durably until the time `at_ms` (ms since the epoch, on the engine's clock), as
    /// [`Ctx::sleep_ms`] does for a duration. Use it when the node computed the due time itself
    /// (from [`Ctx::now_ms`], a cron rule, an input): `sleep_ms(due - now)` would count the
    /// duration from the sleep's own clock reading, later than `now`, and wake late. A time
    /// already past fires at once.
    ///
    /// # Errors
    /// [`NodeError::Sleeping`] until the timer fires (propagate it with `?`).
    pub async fn sleep_until_ms(&self, at_ms: u64) -> Result<(), NodeError> {
        self.0.sleep_until(at_ms).await
    }

    /// Takes the durable lock `name` for `ttl_ms`, waiting while someone else holds it.
    ///
    /// # Errors
    /// [`NodeError::Lock`] if the lock cannot be taken.
    pub async fn lock(&self, name: &str, ttl_ms: u64) -> Result<(), NodeError> {
        self.0.lock(name, ttl_ms, true).await
    }

    /// Takes the durable lock `name` for `ttl_ms` if it is free.
    ///
    /// # Errors
    /// [`NodeError::Lock`] if someone else holds it.
    pub async fn try_lock(&self, name: &str, ttl_ms: u64) -> Result<(), NodeError> {
        self.0.lock(name, ttl_ms, false).await
    }

    /// Takes every lock of `names` for `ttl_ms`, all or nothing, waiting while any is held
    /// elsewhere (at most [`LOCKS_AT_ONCE_MAX`](crate::limits::LOCKS_AT_ONCE_MAX)).
    ///
    /// # Errors
    /// [`NodeError::Codec`] for no names or too many; [`NodeError::Cancelled`] if the thread is
    /// cancelled while it waits.
    pub async fn lock_all(&self, names: &[&str], ttl_ms: u64) -> Result<(), NodeError> {
        let names = names.iter().map(|n| (*n).to_owned()).collect();
        self.0.lock_all(names, ttl_ms, true).await
    }

    /// Takes every lock of `names` for `ttl_ms` if all are free; otherwise takes none.
    ///
    /// # Errors
    /// [`NodeError::LocksHeld`] naming every lock held elsewhere (with its holder and expiry);
    /// [`NodeError::Lock`] when a single name was asked for (as [`Ctx::try_lock`]).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn both(ctx: &Ctx) -> Result<bool, NodeError> {
    ///     match ctx.try_lock_all(&["gpu-0", "dataset"], 60_000).await {
    ///         Ok(()) => Ok(true),
    ///         Err(NodeError::LocksHeld { held }) => {
    ///             let busy: Vec<_> = held.iter().map(|h| h.name.as_str()).collect();
    ///             ctx.progress(0, 1, format!("waiting on {}", busy.join(", ")));
    ///             Ok(false)
    ///         }
    ///         Err(e) => Err(e),
    ///     }
    /// }
    /// ```
    pub async fn try_lock_all(&self, names: &[&str], ttl_ms: u64) -> Result<(), NodeError> {
        let names = names.iter().map(|n| (*n).to_owned()).collect();
        self.0.lock_all(names, ttl_ms, false).await
    }

    /// Releases the lock `name`.
    ///
    /// # Errors
    /// [`NodeError::Lock`] if it is not held by this thread.
    pub async fn unlock(&self, name: &str) -> Result<(), NodeError> {
        self.0.unlock(name).await
    }

    /// Completes when the thread is cancelled.
    pub async fn cancelled(&self) {
        self.0.cancellation().cancelled_owned().await;
    }

    /// Whether the thread is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancellation().is_cancelled()
    }

    /// The cancellation token, to hand to code that takes one.
    pub fn cancellation(&self) -> tokio_util::sync::CancellationToken {
        self.0.cancellation()
    }
}
