//! The node context: everything a node may do besides computing, implemented by the engine.
//!
//! [`NodeContext`] is object-safe and works with JSON so the engine can record every call;
//! [`Ctx`](crate::Ctx) wraps it with typed helpers for node authors. Every value that would make a
//! re-execution differ (time, randomness, ids, tool results, human input) comes from here, so the
//! engine can record it on the first run and return the recorded value on resume or replay.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::child::{ChildEnded, ChildStart};
use crate::limits::MODELS_PER_CALL_MAX;
use crate::stream::StreamSink;
use crate::{NodeError, ToolError};

/// A tool body with its types erased: takes the recorded JSON input and a [`ToolCtx`], returns
/// the JSON output. The engine runs it only when no result is recorded for the call.
pub type ErasedTool =
    Box<dyn FnOnce(Value, ToolCtx) -> BoxFuture<'static, Result<Value, ToolError>> + Send>;

/// What the engine gives a running node. Implemented by the engine; object-safe.
///
/// Methods that return a value the engine records (`now_ms`, `random_u64`, `new_id`,
/// `call_tool`, `interrupt`, `patched`) must return the recorded value when the node is
/// re-executed.
pub trait NodeContext: Send + Sync + 'static {
    /// The thread this node runs in.
    fn thread_id(&self) -> &str;
    /// This node's name.
    fn node(&self) -> &str;
    /// The thread's step number.
    fn step(&self) -> u64;
    /// The attempt number, from 1.
    fn attempt(&self) -> u32;
    /// The item of a map node's task; `None` for other nodes.
    fn item(&self) -> Option<&Value>;
    /// The engine clock in ms since the Unix epoch (recorded).
    fn now_ms(&self) -> u64;
    /// A random number (recorded).
    fn random_u64(&self) -> u64;
    /// A fresh unique id (recorded).
    fn new_id(&self) -> String;
    /// Runs a tool at most once per recorded call: checks the call's permission, records the
    /// input, runs `run` (unless a result is recorded), records and returns the output.
    fn call_tool(
        &self,
        call: ToolCall,
        input: Value,
        run: ErasedTool,
    ) -> BoxFuture<'static, Result<Value, NodeError>>;
    /// Reports progress (emitted as an event).
    fn progress(&self, progress: Progress);
    /// Adds a message to the thread's conversation.
    fn message(&self, message: Message);
    /// Reports model usage made outside tools (counted against budgets).
    fn usage(&self, usage: Usage);
    /// The thread's cancellation token.
    fn cancellation(&self) -> CancellationToken;
    /// `Ok(input)` if human input for this interrupt arrived, else
    /// `Err(NodeError::Interrupted { prompt })`, which suspends the node until it does.
    ///
    /// # Errors
    /// [`NodeError::Interrupted`] while no input has arrived.
    fn interrupt(&self, prompt: Value) -> Result<Value, NodeError>;
    /// The next signal named `name` sent to the thread (signals of one name arrive in the order
    /// they were sent): `Ok(value)` once one is there, else
    /// `Err(NodeError::WaitingSignal { name })`, which parks the thread until one is sent. The
    /// engine records which signal the node received, so a re-execution receives the same one
    /// and the next call takes the next.
    ///
    /// # Errors
    /// [`NodeError::WaitingSignal`] while no signal of that name is waiting.
    fn recv(&self, name: &str) -> BoxFuture<'static, Result<Value, NodeError>>;
    /// As [`NodeContext::recv`], but returns at once: `Ok(None)` when no signal of that name is
    /// waiting (recorded too, so a re-execution sees the same `None`).
    fn try_recv(&self, name: &str) -> BoxFuture<'static, Result<Option<Value>, NodeError>>;
    /// A signal named `name` was received whose value does not decode as the type the node
    /// receives (`detail`: the decoder's error), and [`Ctx::recv`](crate::Ctx::recv) set it
    /// aside to receive the next one. Called again each time the task runs again and reads
    /// that receipt. The provided method does nothing; the engine logs a warning naming the
    /// thread and node.
    fn signal_set_aside(&self, name: &str, detail: &str) {
        let _ = (name, detail);
    }
    /// `Ok(())` once the durable timer fired, else `Err(NodeError::Sleeping { until_ms })`.
    fn sleep(&self, duration_ms: u64) -> BoxFuture<'static, Result<(), NodeError>>;
    /// As [`NodeContext::sleep`], until the absolute time `at_ms` (ms since the epoch) rather
    /// than for a duration from a fresh clock reading: a node that computed a due time from an
    /// earlier reading sleeps until exactly that time.
    fn sleep_until(&self, at_ms: u64) -> BoxFuture<'static, Result<(), NodeError>>;
    /// Waits for the first of a signal named one of `signals` or the time `until_ms` (none:
    /// no deadline), as [`Ctx::select`](crate::Ctx::select) describes: `Ok(Some((name, value)))`
    /// for the signal taken, `Ok(None)` once the deadline passed, else the suspension that
    /// parks the thread (`Sleeping` until the deadline, or `WaitingSignal` for the first name
    /// without one). The engine records the outcome, so a re-execution takes the same branch.
    ///
    /// The provided method, for contexts without a log (test doubles), looks at each name
    /// with [`NodeContext::try_recv`] in order (it makes every look and the sleep before
    /// awaiting the first), then sleeps until the deadline: `None` if the sleep returns.
    ///
    /// # Errors
    /// [`NodeError::Sleeping`] or [`NodeError::WaitingSignal`] while nothing has happened.
    fn select(
        &self,
        signals: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Option<(String, Value)>, NodeError>> {
        let looks: Vec<_> = signals.iter().map(|n| (n.clone(), self.try_recv(n))).collect();
        let sleep = until_ms.map(|at| self.sleep_until(at));
        Box::pin(async move {
            for (name, look) in looks {
                if let Some(value) = look.await? {
                    return Ok(Some((name, value)));
                }
            }
            match (sleep, signals.into_iter().next()) {
                (Some(sleep), _) => sleep.await.map(|()| None),
                (None, Some(name)) => Err(NodeError::WaitingSignal { name }),
                (None, None) => {
                    Err(NodeError::Codec { detail: "a select waits for nothing".into() })
                }
            }
        })
    }
    /// As [`NodeContext::select`], also waiting for the ends of the started `children` (ids),
    /// as [`Ctx::select`](crate::Ctx::select) describes; the engine records the outcome.
    ///
    /// The provided method, for contexts without children, answers a select without any as
    /// [`NodeContext::select`] does and refuses one with children.
    ///
    /// # Errors
    /// As [`NodeContext::select`]; [`NodeError::Codec`] from the provided method for children.
    fn select_children(
        &self,
        signals: Vec<String>,
        children: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<crate::Selected, NodeError>> {
        if !children.is_empty() {
            let detail = "this context cannot wait for a child's end in a select".to_owned();
            return Box::pin(std::future::ready(Err(NodeError::Codec { detail })));
        }
        let chosen = self.select(signals, until_ms);
        Box::pin(async move {
            Ok(chosen.await?.map_or(crate::Selected::Timeout, |(name, value)| {
                crate::Selected::Signal { name, value }
            }))
        })
    }
    /// Takes the durable lock `name` for `ttl_ms`; if `wait`, suspends until it is free.
    fn lock(
        &self,
        name: &str,
        ttl_ms: u64,
        wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>>;
    /// Releases the lock `name`.
    fn unlock(&self, name: &str) -> BoxFuture<'static, Result<(), NodeError>>;
    /// Whether this task takes the new branch of the code change `id` (see
    /// [`Ctx::patched`](crate::Ctx::patched)): true when the task's recorded history holds the
    /// patch's marker here, or nothing past this point (then the engine records the marker);
    /// false when the recorded history, written by code without this call, went past it. The
    /// provided method, for contexts without a history (test doubles), answers true.
    fn patched(&self, id: &str) -> bool {
        let _ = id;
        true
    }
    /// The patch `id` is deprecated: its old branch is gone (see
    /// [`Ctx::deprecate_patch`](crate::Ctx::deprecate_patch)). The engine consumes the patch's
    /// marker here, records it where `patched` would have, and reports nondeterminism for a task
    /// whose recorded history went past this point without it. The provided method does nothing.
    fn deprecate_patch(&self, id: &str) {
        let _ = id;
    }
    /// Registers the undo `name` with `args` for this task, effective when it completes (see
    /// [`Ctx::on_undo`](crate::Ctx::on_undo)); recorded among the task's drawn values. The
    /// provided method, for contexts without a log (test doubles), does nothing.
    ///
    /// # Errors
    /// [`NodeError::Failed`] for a compensation the workflow does not declare.
    fn on_undo(&self, name: &str, args: Value) -> Result<(), NodeError> {
        let _ = (name, args);
        Ok(())
    }
    /// Asks to end the thread when this step completes and start its successor on `input`
    /// (see [`Ctx::continue_as_new`](crate::Ctx::continue_as_new)); recorded among the task's
    /// drawn values. The provided method does nothing.
    ///
    /// # Errors
    /// [`NodeError::Codec`] for an input that is not a valid state.
    fn continue_as_new(&self, input: Value) -> Result<(), NodeError> {
        let _ = input;
        Ok(())
    }
    /// Sets (`Some(value)`) or removes (`None`) the thread's label `key` when this step
    /// completes (see [`Ctx::set_label`](crate::Ctx::set_label)); recorded among the task's
    /// drawn values. The provided method, for contexts without a log, does nothing.
    ///
    /// # Errors
    /// None from the provided method; the engine's reports nondeterminism as the others do.
    fn change_label(&self, key: &str, value: Option<&str>) -> Result<(), NodeError> {
        let _ = (key, value);
        Ok(())
    }
    /// Takes every lock of `names` for `ttl_ms`, all or nothing; if `wait`, suspends until all
    /// are free. The engine takes them in one atomic write; this provided method, for contexts
    /// without one (test doubles), takes them one by one and gives back those it took when
    /// one is refused; it makes every lock and unlock future before awaiting the first (the
    /// returned future cannot borrow the context), so a double that acts when a future is
    /// made, rather than awaited, sees the unlocks too.
    fn lock_all(
        &self,
        names: Vec<String>,
        ttl_ms: u64,
        wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        let each: Vec<_> = names.iter().map(|n| self.lock(n, ttl_ms, wait)).collect();
        let undo: Vec<_> = names.iter().map(|n| self.unlock(n)).collect();
        Box::pin(async move {
            for (taken, lock) in each.into_iter().enumerate() {
                if let Err(e) = lock.await {
                    for unlock in undo.into_iter().take(taken) {
                        let _ = unlock.await;
                    }
                    return Err(e);
                }
            }
            Ok(())
        })
    }
    /// Starts a child thread of the registered workflow `start.workflow` on `start.input` (see
    /// [`Ctx::start_child`](crate::Ctx::start_child)) and returns its id: a recorded value of
    /// the task, so a re-execution returns the same id and starts nothing. The provided method,
    /// for contexts without an engine (test doubles), refuses.
    ///
    /// # Errors
    /// [`NodeError::Failed`] for an unknown workflow, an input that is not its state, or a limit.
    fn start_child(&self, start: ChildStart) -> BoxFuture<'static, Result<String, NodeError>> {
        let refused = NodeError::fatal(format!(
            "this context cannot start child threads (workflow {:?})",
            start.workflow
        ));
        Box::pin(std::future::ready(Err(refused)))
    }
    /// Writes `value` to the thread's live stream (see [`Ctx::stream`](crate::Ctx::stream)):
    /// ephemeral, never in the log. The provided method, for contexts without readers (test
    /// doubles), drops it.
    ///
    /// # Errors
    /// The engine's refusal: the attempt ended, or a chunk over its size limit.
    fn stream(&self, value: Value) -> Result<(), NodeError> {
        let _ = value;
        Ok(())
    }
    /// Publishes `value` under `key` (see [`Ctx::set_event`](crate::Ctx::set_event)): durable
    /// when the future completes; a re-execution publishes nothing it published. The provided
    /// method, for contexts without a log (test doubles), refuses.
    ///
    /// # Errors
    /// [`NodeError::Failed`] for a key or value over the engine's limits, or a context that
    /// cannot publish.
    fn set_event(&self, key: &str, value: Value) -> BoxFuture<'static, Result<(), NodeError>> {
        let _ = value;
        let refused = NodeError::fatal(format!("this context cannot publish event {key:?}"));
        Box::pin(std::future::ready(Err(refused)))
    }
    /// Creates a promise (see [`Ctx::promise`](crate::Ctx::promise)): durable when the future
    /// completes, its id derived so that a re-execution gets the same one. The provided method
    /// refuses.
    ///
    /// # Errors
    /// [`NodeError::Failed`] past the engine's limit, or for a context that cannot create one.
    fn promise(&self) -> BoxFuture<'static, Result<crate::Promise, NodeError>> {
        let refused = NodeError::fatal("this context cannot create promises");
        Box::pin(std::future::ready(Err(refused)))
    }
    /// Waits until the child thread `child` (started by this thread) ends, and returns how it
    /// ended (recorded: a re-execution returns the same). The provided method refuses.
    ///
    /// # Errors
    /// [`NodeError::Failed`] for a thread this one did not start, or one joined twice.
    fn join_child(&self, child: &str) -> BoxFuture<'static, Result<ChildEnded, NodeError>> {
        let refused = NodeError::fatal(format!("this context cannot join child thread {child}"));
        Box::pin(std::future::ready(Err(refused)))
    }
}

/// A tool call's identity: its name and the permission it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Tool name, as recorded and shown.
    pub name: String,
    /// Permission the workflow must hold, if any.
    pub permission: Option<String>,
}

impl ToolCall {
    /// A call to `name` that needs no permission.
    ///
    /// # Examples
    /// ```
    /// let call = cairn_dsl::ToolCall::new("search").permission("net");
    /// assert_eq!(call.permission.as_deref(), Some("net"));
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), permission: None }
    }

    /// Requires `permission` for this call.
    #[must_use]
    pub fn permission(mut self, permission: impl Into<String>) -> Self {
        self.permission = Some(permission.into());
        self
    }
}

/// What a running tool gets: the cancellation token, the call's idempotency key and a place to
/// report usage.
#[derive(Debug, Clone)]
pub struct ToolCtx {
    cancellation: CancellationToken,
    idempotency_key: Arc<str>,
    usage: Arc<Mutex<Usage>>,
    models: Arc<Mutex<BTreeMap<String, Usage>>>,
    stream: Option<StreamSink>,
}

impl ToolCtx {
    /// A context for one tool run (the engine creates it).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{ToolCtx, Usage};
    /// let ctx = ToolCtx::new(tokio_util::sync::CancellationToken::new());
    /// ctx.report_usage(Usage { tokens: 10, cost_micros: 5 });
    /// ctx.report_usage(Usage { tokens: 1, cost_micros: 1 });
    /// assert_eq!(ctx.usage_reported(), Usage { tokens: 11, cost_micros: 6 });
    /// ```
    pub fn new(cancellation: CancellationToken) -> Self {
        Self {
            cancellation,
            idempotency_key: Arc::from(""),
            usage: Arc::default(),
            models: Arc::default(),
            stream: None,
        }
    }

    /// The same context writing [`ToolCtx::stream`] to `sink` (the engine sets the calling
    /// task's stream).
    #[must_use]
    pub fn with_stream(mut self, sink: StreamSink) -> Self {
        self.stream = Some(sink);
        self
    }

    /// Writes `value` to the thread's live stream, as [`Ctx::stream`](crate::Ctx::stream) does
    /// for the task that called the tool: a model tool streams its tokens while it runs.
    /// Dropped by a context made outside the engine ([`ToolCtx::new`]).
    ///
    /// # Errors
    /// A fatal [`ToolError`] (code `stream`) for a value that does not serialise, or the
    /// engine's refusal (the calling task's attempt ended, a chunk over its size limit).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{StreamSink, ToolCtx};
    /// let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let into = seen.clone();
    /// let ctx = ToolCtx::new(tokio_util::sync::CancellationToken::new())
    ///     .with_stream(StreamSink::new(move |v| Ok(into.lock().unwrap().push(v))));
    /// ctx.stream("Hel").unwrap();
    /// ctx.stream("lo").unwrap();
    /// assert_eq!(*seen.lock().unwrap(), ["Hel", "lo"]);
    /// ```
    pub fn stream<T: Serialize>(&self, value: T) -> Result<(), ToolError> {
        let Some(sink) = &self.stream else { return Ok(()) };
        let refused = |e: String| ToolError::fatal(e).with_code("stream");
        let value = serde_json::to_value(value).map_err(|e| refused(e.to_string()))?;
        sink.write(value).map_err(|e| refused(e.to_string()))
    }

    /// The same context with the call's idempotency key (the engine sets it for every call).
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<Arc<str>>) -> Self {
        self.idempotency_key = key.into();
        self
    }

    /// A key that names this recorded call: the same every time the engine runs this call
    /// again (after a crash between its start and its result, when another engine takes the
    /// thread over, in a replay), and different for every other call (another call of the
    /// node, another step, another attempt of the node after a failure, another thread, a
    /// fork). Pass it to an external API that deduplicates requests (a payment's
    /// `Idempotency-Key` header, a message id), and a call the engine runs twice takes effect
    /// once. Empty for a context made outside the engine ([`ToolCtx::new`]).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::ToolCtx;
    /// let ctx = ToolCtx::new(tokio_util::sync::CancellationToken::new())
    ///     .with_idempotency_key("cairn-0123");
    /// assert_eq!(ctx.idempotency_key(), "cairn-0123");
    /// ```
    pub fn idempotency_key(&self) -> &str {
        &self.idempotency_key
    }

    /// The token that fires when the thread is cancelled or the node times out.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Adds `usage` to what this call consumed (saturating).
    pub fn report_usage(&self, usage: Usage) {
        // A poisoned lock only means another reporter panicked mid-add of two integers; the
        // value is still a valid total.
        let mut total = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        *total = total.saturating_add(usage);
    }

    /// Everything reported so far (the engine reads it after the call).
    pub fn usage_reported(&self) -> Usage {
        *self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `usage` of the model `model` to what this call consumed: counted in the total as
    /// [`ToolCtx::report_usage`] does, and recorded by model name (the thread's telemetry sums
    /// it per model). Past [`MODELS_PER_CALL_MAX`] names in one call, the rest is filed under
    /// `(other)`.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{ToolCtx, Usage};
    /// let ctx = ToolCtx::new(tokio_util::sync::CancellationToken::new());
    /// ctx.report_model_usage("small-v2", Usage { tokens: 10, cost_micros: 5 });
    /// ctx.report_usage(Usage { tokens: 1, cost_micros: 1 });
    /// assert_eq!(ctx.usage_reported(), Usage { tokens: 11, cost_micros: 6 });
    /// assert_eq!(ctx.models_reported()["small-v2"], Usage { tokens: 10, cost_micros: 5 });
    /// ```
    pub fn report_model_usage(&self, model: &str, usage: Usage) {
        self.report_usage(usage);
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        let name = if models.contains_key(model) || models.len() < MODELS_PER_CALL_MAX {
            model
        } else {
            "(other)"
        };
        let entry = models.entry(name.to_owned()).or_default();
        *entry = entry.saturating_add(usage);
    }

    /// The usage reported by model name so far.
    pub fn models_reported(&self) -> BTreeMap<String, Usage> {
        self.models.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// A progress report of a long node (`step` of `total`, a message, a percentage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Current step, from 1.
    pub step: u32,
    /// Number of steps.
    pub total: u32,
    /// What is happening.
    pub message: String,
    /// Finer-grained completion, 0..=100, when known.
    pub percent: Option<f32>,
    /// A longer description of the step than `message` (what is being read, which source is
    /// slow...), when there is one. Absent in logs written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A conversation message recorded in the thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `"user"`, `"assistant"`, a module name...
    pub role: String,
    /// The text.
    pub content: String,
    /// Ties request and response messages together.
    pub correlation_id: Option<String>,
    /// Addressee, for messages between modules.
    pub to: Option<String>,
    /// This message's own id, when others answer it (see `parent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The id of the message this one answers: a trace follows these up to the first message
    /// of a chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl Message {
    /// A message from `role`.
    ///
    /// # Examples
    /// ```
    /// let m = cairn_dsl::Message::new("assistant", "done").to("user").correlation_id("c1");
    /// assert_eq!(m.to.as_deref(), Some("user"));
    /// ```
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        let (role, content) = (role.into(), content.into());
        Self { role, content, correlation_id: None, to: None, id: None, parent: None }
    }

    /// Sets this message's id.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the id of the message this one answers.
    #[must_use]
    pub fn parent(mut self, parent: impl Into<String>) -> Self {
        self.parent = Some(parent.into());
        self
    }

    /// Sets the addressee.
    #[must_use]
    pub fn to(mut self, to: impl Into<String>) -> Self {
        self.to = Some(to.into());
        self
    }

    /// Sets the correlation id.
    #[must_use]
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
}

/// Resources consumed by model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Model tokens.
    pub tokens: u64,
    /// Cost in millionths of the currency unit.
    pub cost_micros: u64,
}

impl Usage {
    /// Field-wise saturating sum.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::Usage;
    /// let u = Usage { tokens: u64::MAX, cost_micros: 1 }.saturating_add(Usage { tokens: 1, cost_micros: 2 });
    /// assert_eq!(u, Usage { tokens: u64::MAX, cost_micros: 3 });
    /// ```
    #[must_use]
    pub fn saturating_add(self, other: Self) -> Self {
        Self {
            tokens: self.tokens.saturating_add(other.tokens),
            cost_micros: self.cost_micros.saturating_add(other.cost_micros),
        }
    }
}
