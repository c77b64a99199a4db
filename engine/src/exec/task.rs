//! One task of a step: the node context handed to node code, and the attempt loop around it.
//!
//! The context records everything that would make a re-execution differ: tool results (written
//! before and after each call, and returned from the journal when the task runs again), clock
//! readings, random numbers and ids. A task that runs again after a crash, an interrupt or a
//! timer therefore sees exactly what it saw before, up to the point where it stopped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_dsl::{
    Ctx, DynNodeKind, DynState, DynWorkflow, ErasedTool, Message, NodeContext, NodeError, NodeId,
    Progress, ToolCall, ToolCtx, Usage,
};
use cairn_storage::{Batch, Bookmark, Pending, ThreadId};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::core::drawn::Drawn;
use crate::api::engine::Inner;
use crate::error::Error;
use crate::limits;
use crate::core::codec::{self, Recorded};
use crate::core::event::{Body, TaskKey};
use crate::core::suspend::Suspensions;
use crate::core::thread_ctx::{TaskJournal, ToolRecord};

/// What the runner knows about the thread that tasks need.
pub(crate) struct ThreadEnv {
    pub inner: Arc<Inner>,
    pub thread: ThreadId,
    pub wf: Arc<DynWorkflow>,
    /// Cancelled when the thread is cancelled or times out; tasks get child tokens.
    pub cancel: CancellationToken,
    /// Tool calls the thread made before this step (for the budget check).
    pub tool_calls_before: u64,
    /// Budgets in force.
    pub budgets: cairn_dsl::Budgets,
    /// Permissions tool calls may use.
    pub permissions: std::collections::BTreeSet<String>,
    /// Depth of sub-workflow nesting of this thread.
    pub depth: usize,
    /// The seed of the thread's fresh draws (its recorded seed, or the engine's for an older
    /// thread that has none).
    pub seed: u64,
    /// The runner's batches not yet durable: settled before any write with effects.
    pub pipeline: crate::exec::pipeline::Pipeline,
}

impl ThreadEnv {
    /// Waits until every batch the runner submitted is durable (before a tool call, a lock, a
    /// retry or a child thread, which must never rest on a step a crash could still lose).
    pub(crate) async fn settle(&self) -> Result<(), Error> {
        self.pipeline.settle().await
    }
}

pub(crate) use crate::core::decide::{TaskEnd, TaskRun};

/// Runs one task through its attempts (retry policy, timeout), never returning an `Err`: every
/// outcome, including engine errors, is a [`TaskEnd`].
pub(crate) async fn run_task(
    env: Arc<ThreadEnv>,
    step: u64,
    node: NodeId,
    key: TaskKey,
    item: Option<Value>,
    state: Box<dyn DynState>,
    mut journal: TaskJournal,
) -> TaskRun {
    let spec = &env.wf.nodes()[node];
    let policy = spec.policy.clone();
    let mut appended: Vec<Recorded> = Vec::new();
    journal.attempt = journal.attempt.max(1);
    loop {
        let clock = &env.inner.clock;
        if journal.not_before_ms > clock.now_ms() {
            tokio::select! {
                () = clock.sleep_until(journal.not_before_ms) => {}
                () = env.cancel.cancelled() => {}
            }
        }
        let started = clock.now_ms();
        let ctx = Arc::new(TaskCtx::new(env.clone(), step, key.clone(), item.clone(), &journal));
        let span = tracing::debug_span!(
            "node_attempt",
            node = %key.node,
            task = %key,
            attempt = journal.attempt,
            outcome = tracing::field::Empty,
        );
        let result = run_attempt(&env, spec, state.as_ref(), &ctx, policy.timeout_ms, started)
            .instrument(span.clone())
            .await;
        span.record("outcome", attempt_outcome(&result));
        let duration_ms = clock.now_ms().saturating_sub(started);
        let mut st = ctx.finish().await;
        appended.append(&mut st.appended);
        let attempt = journal.attempt;
        let result = match (result, st.nondeterminism.take()) {
            (Ok(_), Some(detail)) => Err(NodeError::Nondeterminism { detail }),
            (r, _) => r,
        };
        let values = std::mem::take(&mut st.new_values);
        let started_logged = st.started_logged;
        let mut run = |end| TaskRun {
            key: key.clone(),
            attempt,
            item: item.clone(),
            started_at_ms: started,
            duration_ms,
            started_logged,
            values: values.clone(),
            appended: std::mem::take(&mut appended),
            end,
        };
        let error = match result {
            Ok(out) => {
                let messages = std::mem::take(&mut st.messages);
                let usage = st.usage;
                return run(TaskEnd::Done { update: out.update, goto: out.goto, usage, messages });
            }
            Err(NodeError::Interrupted { prompt }) => return run(TaskEnd::WaitInput { prompt }),
            Err(NodeError::Sleeping { until_ms }) => return run(TaskEnd::Sleep { until_ms }),
            // A budget reached inside the node is a clean stop, like one at a step boundary:
            // the thread pauses, its recorded calls kept for when it resumes.
            Err(NodeError::BudgetExceeded { budget }) => return run(TaskEnd::Budget { budget }),
            Err(NodeError::Paused { reason }) => return run(TaskEnd::Paused { reason }),
            Err(error) => error,
        };
        let retry = !env.cancel.is_cancelled()
            && attempt < policy.retry.max_attempts
            && error.is_retryable(&policy.retry);
        if !retry {
            return run(TaskEnd::Failed { error });
        }
        // Jitter comes from the thread's deterministic stream, and the resulting delay is
        // recorded in the RetryScheduled event, so a restore waits for the same instant.
        let unit = jitter_unit(&env.thread, step, &key, attempt);
        let delay_ms = policy.retry.backoff_ms(attempt, unit);
        let now = clock.now_ms();
        let mut bodies = Vec::new();
        if !started_logged {
            bodies.push(Body::NodeStarted { step, task: key.clone(), attempt, item: item.clone() });
        }
        bodies.push(Body::NodeFailed {
            step,
            task: key.clone(),
            attempt,
            error: error.clone(),
            terminal: false,
        });
        bodies.push(Body::RetryScheduled {
            step,
            task: key.clone(),
            attempt: attempt + 1,
            delay_ms,
            at_ms: now + delay_ms,
            error: error.clone(),
        });
        match append_now(&env, bodies, now).await {
            Ok(mut recs) => appended.append(&mut recs),
            Err(e) => {
                let end = TaskEnd::Failed { error: engine_error(&e) };
                return TaskRun {
                    key,
                    attempt,
                    item,
                    started_at_ms: started,
                    duration_ms,
                    started_logged,
                    values,
                    appended,
                    end,
                };
            }
        }
        journal = TaskJournal {
            attempt: attempt + 1,
            not_before_ms: now + delay_ms,
            ..TaskJournal::default()
        };
    }
}

async fn run_attempt(
    env: &Arc<ThreadEnv>,
    spec: &cairn_dsl::DynNode,
    state: &dyn DynState,
    ctx: &Arc<TaskCtx>,
    timeout_ms: Option<u64>,
    started: u64,
) -> Result<cairn_dsl::NodeOutput<Value>, NodeError> {
    let fut: BoxFuture<'static, Result<cairn_dsl::NodeOutput<Value>, NodeError>> = match &spec.kind
    {
        DynNodeKind::Task(handler) => handler(state, Ctx::new(ctx.clone())),
        DynNodeKind::Map { handler, .. } => handler(state, Ctx::new(ctx.clone())),
        DynNodeKind::Subgraph { child, input, output } => match input(state) {
            Ok(child_input) => crate::exec::subgraph::run_child(
                env.clone(),
                ctx.key.clone(),
                ctx.step,
                child.clone(),
                child_input,
                output.clone(),
                ctx.inputs(),
            ),
            Err(e) => return Err(NodeError::Codec { detail: e.to_string() }),
        },
    };
    let cancel = ctx.cancel.clone();
    let clock = env.inner.clock.clone();
    let grace = env.inner.config.cancel_grace_ms;
    let timeout = async {
        match timeout_ms {
            Some(t) => clock.sleep_until(started.saturating_add(t)).await,
            None => futures::future::pending().await,
        }
    };
    let cancelled = async {
        env.cancel.cancelled().await;
        // The node sees the token at once; it has a grace period to stop on its own before its
        // future is dropped.
        clock.sleep_until(clock.now_ms().saturating_add(grace)).await;
    };
    tokio::select! {
        r = fut => r,
        () = timeout => {
            cancel.cancel();
            Err(NodeError::Timeout { after_ms: timeout_ms.unwrap_or_default() })
        }
        () = cancelled => Err(NodeError::Cancelled),
    }
}

/// A deterministic unit interval value for retry jitter, from the task's identity.
fn jitter_unit(thread: &ThreadId, step: u64, key: &TaskKey, attempt: u32) -> f64 {
    let mut h = blake3::Hasher::new();
    h.update(thread.as_str().as_bytes());
    h.update(&step.to_le_bytes());
    h.update(key.to_string().as_bytes());
    h.update(&attempt.to_le_bytes());
    let bytes = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes.as_bytes()[..8]);
    (u64::from_le_bytes(first) >> 11) as f64 / (1u64 << 53) as f64
}

/// Appends events of the thread durably now (used by tasks for tool calls and retries).
pub(crate) async fn append_now(
    env: &ThreadEnv,
    bodies: Vec<Body>,
    at_ms: u64,
) -> Result<Vec<Recorded>, Error> {
    env.settle().await?;
    let (pending, _) = env.pipeline.submit(batch_of(env, &bodies, at_ms)?, at_ms, None).await?;
    let appended = pending.wait().await?;
    Ok(zip_recorded(env, appended.bookmarks, bodies))
}

/// A batch of the thread's events.
fn batch_of(env: &ThreadEnv, bodies: &[Body], at_ms: u64) -> Result<Batch, Error> {
    let mut batch = Batch::default();
    for body in bodies {
        codec::push_event(&mut batch, &env.thread, body, at_ms)?;
    }
    Ok(batch)
}

fn zip_recorded(env: &ThreadEnv, bookmarks: Vec<Bookmark>, bodies: Vec<Body>) -> Vec<Recorded> {
    assert_eq!(bookmarks.len(), bodies.len(), "storage returned one bookmark per event");
    bookmarks
        .into_iter()
        .zip(bodies)
        .map(|(bookmark, body)| Recorded { bookmark, thread: env.thread.clone(), body })
        .collect()
}

/// How an attempt ended, for its span.
fn attempt_outcome<T>(result: &Result<T, NodeError>) -> &'static str {
    match result {
        Ok(_) => "done",
        Err(NodeError::Interrupted { .. }) => "waiting_input",
        Err(NodeError::Sleeping { .. }) => "sleeping",
        Err(NodeError::Paused { .. }) => "paused",
        Err(NodeError::BudgetExceeded { .. }) => "budget",
        Err(_) => "failed",
    }
}

pub(crate) fn engine_error(e: &Error) -> NodeError {
    NodeError::Failed { code: Some("engine".into()), message: e.to_string(), retryable: false }
}

fn lock_state(st: &Mutex<TaskState>) -> MutexGuard<'_, TaskState> {
    // A panic while holding this lock can only come from our own code between two lines that
    // do not panic; poisoning is therefore a bug, but recovering the data is harmless.
    st.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The mutable part of a task's context.
#[derive(Default)]
pub(crate) struct TaskState {
    replay_tools: Vec<ToolRecord>,
    next_call: u32,
    replay_values: VecDeque<Value>,
    pub new_values: Vec<Value>,
    suspensions: Suspensions,
    pub started_logged: bool,
    pub appended: Vec<Recorded>,
    pub usage: Usage,
    pub messages: Vec<Message>,
    progress: Vec<(Pending, Body)>,
    /// Progress reports not yet submitted (the write path was busy when they came): written
    /// when the attempt ends.
    progress_later: Vec<(Body, u64)>,
    pub nondeterminism: Option<String>,
    draws: u64,
    /// Calls of this attempt already counted in the thread's telemetry (recorded before a
    /// suspension or a crash), so the budget check does not count them twice.
    calls_counted: u64,
}

/// The context one attempt of one task sees.
pub(crate) struct TaskCtx {
    env: Arc<ThreadEnv>,
    pub step: u64,
    pub key: TaskKey,
    attempt: u32,
    item: Option<Value>,
    pub cancel: CancellationToken,
    st: Arc<Mutex<TaskState>>,
}

impl TaskCtx {
    fn new(
        env: Arc<ThreadEnv>,
        step: u64,
        key: TaskKey,
        item: Option<Value>,
        j: &TaskJournal,
    ) -> Self {
        let cancel = env.cancel.child_token();
        let st = TaskState {
            replay_tools: j.tools.clone(),
            replay_values: j.values.iter().cloned().collect(),
            suspensions: Suspensions::new(j.inputs.clone(), j.timers_fired),
            calls_counted: u64::from(j.calls_started),
            ..TaskState::default()
        };
        Self { env, step, key, attempt: j.attempt, item, cancel, st: Arc::new(Mutex::new(st)) }
    }

    fn state(&self) -> MutexGuard<'_, TaskState> {
        lock_state(&self.st)
    }

    fn inputs(&self) -> Vec<Value> {
        self.state().suspensions.inputs().to_vec()
    }

    /// Waits for fire-and-forget appends (progress) and hands back the state.
    async fn finish(&self) -> TaskState {
        let mut st = std::mem::take(&mut *self.state());
        for (body, at_ms) in std::mem::take(&mut st.progress_later) {
            let submitted = match batch_of(&self.env, std::slice::from_ref(&body), at_ms) {
                Ok(batch) => self.env.pipeline.submit(batch, at_ms, None).await,
                Err(e) => Err(e),
            };
            match submitted {
                Ok((pending, _)) => st.progress.push((pending, body)),
                Err(e) => {
                    tracing::warn!(thread = %self.env.thread, error = %e, "progress event not recorded")
                }
            }
        }
        for (pending, body) in std::mem::take(&mut st.progress) {
            match pending.wait().await {
                Ok(a) => st.appended.extend(zip_recorded(&self.env, a.bookmarks, vec![body])),
                Err(e) => {
                    tracing::warn!(thread = %self.env.thread, error = %e, "progress event not recorded")
                }
            }
        }
        st.appended.sort_by_key(|r| r.bookmark.seq);
        st
    }

    /// Takes the next recorded value, or records `fresh(index)`, where `index` is the value's
    /// position in the task's sequence of values (so a fresh value after replayed ones is the
    /// same one an uninterrupted run would have drawn there).
    /// A recorded value of another kind is nondeterminism (the code draws in another order):
    /// reported, and read as null, which the caller then refuses as its type.
    fn value(&self, kind: Drawn, fresh: impl FnOnce(u64) -> Value) -> Value {
        let index = {
            let mut st = self.state();
            st.draws += 1;
            if let Some(recorded) = st.replay_values.pop_front() {
                return kind.read(&recorded).unwrap_or_else(|was| {
                    st.nondeterminism.get_or_insert(format!(
                        "the code draws a {} where a {was} value was recorded",
                        kind.name()
                    ));
                    Value::Null
                });
            }
            st.draws
        };
        let v = fresh(index);
        self.state().new_values.push(kind.record(v.clone()));
        v
    }

    /// A fresh random number: the task's `n`th draw, a function of the thread's seed and the
    /// task's identity (recorded like any value, so replay never depends on the seed).
    fn fresh_random(&self, index: u64, sub: u64) -> u64 {
        Inner::task_random(
            self.env.seed,
            &self.env.thread,
            self.step,
            &self.key.to_string(),
            self.attempt,
            index * 2 + sub,
        )
    }

    fn nondeterminism(&self, detail: String) {
        let mut st = self.state();
        st.nondeterminism.get_or_insert(detail);
    }
}

impl NodeContext for TaskCtx {
    fn thread_id(&self) -> &str {
        self.env.thread.as_str()
    }

    fn node(&self) -> &str {
        &self.key.node
    }

    fn step(&self) -> u64 {
        self.step
    }

    fn attempt(&self) -> u32 {
        self.attempt
    }

    fn item(&self) -> Option<&Value> {
        self.item.as_ref()
    }

    fn now_ms(&self) -> u64 {
        let v = self.value(Drawn::Clock, |_| Value::from(self.env.inner.clock.now_ms()));
        v.as_u64().unwrap_or_else(|| {
            self.nondeterminism(format!("recorded value {v} read as a clock reading"));
            self.env.inner.clock.now_ms()
        })
    }

    fn random_u64(&self) -> u64 {
        let v = self.value(Drawn::Random, |i| Value::from(self.fresh_random(i, 0)));
        v.as_u64().unwrap_or_else(|| {
            self.nondeterminism(format!("recorded value {v} read as a random number"));
            0
        })
    }

    fn new_id(&self) -> String {
        let v = self.value(Drawn::Id, |i| {
            Value::from(format!("{:016x}{:016x}", self.fresh_random(i, 0), self.fresh_random(i, 1)))
        });
        match v {
            Value::String(s) => s,
            other => {
                self.nondeterminism(format!("recorded value {other} read as an id"));
                String::new()
            }
        }
    }

    fn call_tool(
        &self,
        call: ToolCall,
        input: Value,
        run: ErasedTool,
    ) -> BoxFuture<'static, Result<Value, NodeError>> {
        let env = self.env.clone();
        let (step, key, attempt) = (self.step, self.key.clone(), self.attempt);
        let cancel = self.cancel.clone();
        // Decide under the lock whether this call is recorded, then leave the lock before any await.
        let (index, recorded, values, log_start, counted) = {
            let mut st = self.state();
            let index = st.next_call;
            st.next_call += 1;
            let recorded = st.replay_tools.get(index as usize).cloned();
            let values =
                if recorded.is_none() { std::mem::take(&mut st.new_values) } else { Vec::new() };
            let log_start = recorded.is_none() && !st.started_logged;
            if log_start {
                st.started_logged = true;
            }
            (index, recorded, values, log_start, st.calls_counted)
        };
        let shared = self.st.clone();
        let item = self.item.clone();
        let span = tracing::debug_span!(
            "tool_call",
            tool = %call.name,
            call = index,
            memo = recorded.is_some(),
        );
        Box::pin(
            async move {
            if index >= limits::TOOL_CALLS_PER_TASK_MAX {
                return Err(NodeError::fatal(format!(
                    "limit tool_calls_per_task exceeded: {index} >= {}",
                    limits::TOOL_CALLS_PER_TASK_MAX
                )));
            }
            if let Some(rec) = recorded {
                if rec.name != call.name {
                    return Err(NodeError::Nondeterminism {
                        detail: format!(
                            "call #{index} of {key} was recorded as tool {} but the code calls {}",
                            rec.name, call.name
                        ),
                    });
                }
                if let Some(recorded) = &rec.input_hash
                    && *recorded != crate::core::thread_ctx::input_hash(&input)
                {
                    return Err(NodeError::Nondeterminism {
                        detail: format!(
                            "call #{index} of {key} (tool {}) was recorded with another input \
                             than the code gives it now",
                            call.name
                        ),
                    });
                }
                return rec.output.map_err(NodeError::from);
            }
            if let Some(p) = &call.permission
                && !env.permissions.contains(p)
            {
                return Err(NodeError::PermissionDenied {
                    tool: call.name.clone(),
                    permission: p.clone(),
                });
            }
            if let Some(max) = env.budgets.max_tool_calls {
                let used = env.tool_calls_before.saturating_sub(counted) + u64::from(index);
                if used >= max {
                    return Err(NodeError::BudgetExceeded { budget: "tool_calls".into() });
                }
            }
            let clock = env.inner.clock.clone();
            let now = clock.now_ms();
            let mut bodies = Vec::new();
            if log_start {
                bodies.push(Body::NodeStarted {
                    step,
                    task: key.clone(),
                    attempt,
                    item: item.clone(),
                });
            }
            bodies.push(Body::ToolCalled {
                step,
                task: key.clone(),
                attempt,
                call: index,
                name: call.name.clone(),
                permission: call.permission.clone(),
                input: input.clone(),
                values,
            });
            let recs = append_now(&env, bodies, now).await.map_err(|e| engine_error(&e))?;
            lock_state(&shared).appended.extend(recs);
            let tool_ctx = ToolCtx::new(cancel);
            let output = run(input, tool_ctx.clone()).await;
            let usage = tool_ctx.usage_reported();
            let done = clock.now_ms();
            let body = Body::ToolReturned {
                step,
                task: key.clone(),
                attempt,
                call: index,
                name: call.name.clone(),
                output: output.clone(),
                usage,
                duration_ms: done.saturating_sub(now),
            };
            let recs = append_now(&env, vec![body], done).await.map_err(|e| engine_error(&e))?;
            lock_state(&shared).appended.extend(recs);
            output.map_err(NodeError::from)
            }
            .instrument(span),
        )
    }

    fn progress(&self, progress: Progress) {
        let body = Body::Progress { task: self.key.clone(), progress };
        let now = self.env.inner.clock.now_ms();
        let batch = batch_of(&self.env, std::slice::from_ref(&body), now);
        let submitted = batch.map(|b| self.env.pipeline.try_submit(b, now));
        match submitted {
            Ok(Some(Ok((pending, _)))) => self.state().progress.push((pending, body)),
            Ok(None) => self.state().progress_later.push((body, now)),
            Ok(Some(Err(e))) | Err(e) => {
                tracing::warn!(thread = %self.env.thread, error = %e, "progress event not recorded")
            }
        }
    }

    fn message(&self, message: Message) {
        self.state().messages.push(message);
    }

    fn usage(&self, usage: Usage) {
        let mut st = self.state();
        st.usage.tokens = st.usage.tokens.saturating_add(usage.tokens);
        st.usage.cost_micros = st.usage.cost_micros.saturating_add(usage.cost_micros);
    }

    fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn interrupt(&self, prompt: Value) -> Result<Value, NodeError> {
        self.state().suspensions.interrupt(prompt)
    }

    fn sleep(&self, duration_ms: u64) -> BoxFuture<'static, Result<(), NodeError>> {
        let now = self.now_ms();
        let result = self.state().suspensions.sleep(now, duration_ms);
        Box::pin(async move { result })
    }

    fn lock(
        &self,
        name: &str,
        ttl_ms: u64,
        wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        let fut = crate::exec::locks::acquire(self.env.clone(), name.to_owned(), ttl_ms, wait);
        let shared = self.st.clone();
        Box::pin(async move {
            let recs = fut.await?;
            lock_state(&shared).appended.extend(recs);
            Ok(())
        })
    }

    fn unlock(&self, name: &str) -> BoxFuture<'static, Result<(), NodeError>> {
        let fut = crate::exec::locks::release(self.env.clone(), name.to_owned());
        let shared = self.st.clone();
        Box::pin(async move {
            let recs = fut.await?;
            lock_state(&shared).appended.extend(recs);
            Ok(())
        })
    }
}
