//! The context node code sees during one attempt of one task.
//!
//! It records everything that would make a re-execution differ: tool results (written before
//! and after each call, and returned from the journal when the task runs again), clock readings,
//! random numbers and ids. A task that runs again after a crash, an interrupt or a timer
//! therefore sees exactly what it saw before, up to the point where it stopped.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_dsl::{
    ErasedTool, Message, NodeContext, NodeError, Progress, StreamSink, ToolCall, ToolCtx, Usage,
};
use cairn_storage::Pending;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::env::ThreadEnv;
use super::streams::TaskStream;
use crate::core::codec::Recorded;
use crate::core::drawn::Drawn;
use crate::core::event::{Body, TaskKey};
use crate::core::suspend::Suspensions;
use crate::core::thread_ctx::{Publication, TaskJournal, ToolRecord};
use crate::limits;

mod child;
mod patch;
mod published;
mod recorded;
mod select;

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
    /// Tool calls recorded for this attempt (started, returned or both): a patch call made
    /// before the last of them is a point the recorded run went past.
    calls_recorded: u32,
    /// The answer of each patch id this attempt asked (`ctx.patched`), so later calls agree.
    patches: BTreeMap<String, bool>,
    /// Calls of this attempt already counted in the thread's telemetry (recorded before a
    /// suspension or a crash), so the budget check does not count them twice.
    calls_counted: u64,
    /// Children this attempt started fresh (`node_context/child.rs`).
    children_started: usize,
    /// Children this attempt joined, so a second join of one is refused.
    joined: std::collections::BTreeSet<String>,
    /// Events published and promises created by this attempt so far (`node_context/published.rs`).
    published: u32,
    /// Those the journal holds (written before a crash or a park): not written again.
    replay_published: Vec<Publication>,
    /// The keys this attempt counts against `PUBLISHED_KEYS_PER_THREAD_MAX`: the thread's at
    /// the step's start and its own new ones, never its siblings' (`PublishedKeys`).
    keys: crate::core::published::PublishedKeys,
    /// The locks the attempt waits for (`ctx.lock`, `ctx.lock_all`) while it waits: an attempt
    /// timed out then failed waiting for a lock (`cairn_dsl::FailureKind::Deadlock`).
    lock_wait: Option<String>,
}

/// The context one attempt of one task sees.
pub(crate) struct LiveNodeContext {
    env: Arc<ThreadEnv>,
    pub step: u64,
    pub key: TaskKey,
    attempt: u32,
    item: Option<Value>,
    /// The attempt's cancellation: a child of the thread's, made when first asked for (by a
    /// tool call, the node, or a timeout that cancels the attempt); most attempts never ask.
    cancel: std::sync::OnceLock<CancellationToken>,
    st: Arc<Mutex<TaskState>>,
    /// Where `ctx.stream` and the task's tools write, made when first written to (most
    /// attempts never are) and closed when the attempt ends ([`Self::stream`]).
    stream: Mutex<StreamSlot>,
}

/// The attempt's stream, if made, and whether the attempt ended (a stream made after that is
/// closed at once).
#[derive(Default)]
struct StreamSlot {
    stream: Option<Arc<TaskStream>>,
    ended: bool,
}

impl LiveNodeContext {
    pub(super) fn new(
        env: Arc<ThreadEnv>,
        step: u64,
        key: TaskKey,
        item: Option<Value>,
        j: &TaskJournal,
    ) -> Self {
        let cancel = std::sync::OnceLock::new();
        let st = TaskState {
            replay_tools: j.tools.clone(),
            replay_values: j.values.iter().cloned().collect(),
            suspensions: Suspensions::new(j.inputs.clone(), j.timers_fired),
            calls_counted: u64::from(j.calls_started),
            calls_recorded: j.calls_started.max(u32::try_from(j.tools.len()).unwrap_or(u32::MAX)),
            replay_published: j.published.clone(),
            keys: env.published_keys().for_task(),
            ..TaskState::default()
        };
        let st = Arc::new(Mutex::new(st));
        let stream = Mutex::default();
        Self { env, step, key, attempt: j.attempt, item, cancel, st, stream }
    }

    /// The attempt's stream, made on first use (closed if the attempt ended already).
    fn stream(&self) -> Arc<TaskStream> {
        let mut slot = self.stream.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ended = slot.ended;
        let stream = slot.stream.get_or_insert_with(|| {
            let (live, thread) = (self.env.stream.clone(), self.env.thread.clone());
            Arc::new(TaskStream::new(live, thread, self.step, self.key.node.clone()))
        });
        if ended {
            stream.close();
        }
        stream.clone()
    }

    fn state(&self) -> MutexGuard<'_, TaskState> {
        lock_state(&self.st)
    }

    /// The attempt's cancellation token (see the field).
    pub(super) fn attempt_token(&self) -> &CancellationToken {
        self.cancel.get_or_init(|| self.env.cancel.child_token())
    }

    /// The locks the attempt was waiting for when asked (comma-separated), if it was.
    pub(super) fn lock_wait(&self) -> Option<String> {
        self.state().lock_wait.clone()
    }

    pub(super) fn inputs(&self) -> Vec<Value> {
        self.state().suspensions.inputs().to_vec()
    }

    /// Waits for fire-and-forget appends (progress) and hands back the state.
    pub(super) async fn finish(&self) -> TaskState {
        {
            let mut slot = self.stream.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            slot.ended = true;
            if let Some(stream) = &slot.stream {
                stream.close();
            }
        }
        let mut st = std::mem::take(&mut *self.state());
        if !st.progress_later.is_empty() || !st.progress.is_empty() {
            // Boxed: most attempts report no progress, and this wait made the future of every
            // attempt (and of each step that awaits one) 1.8 KiB larger, copied at each await.
            Box::pin(self.record_progress(&mut st)).await;
        }
        st.appended.sort_by_key(|r| r.bookmark.seq);
        st
    }

    /// Submits the progress the attempt reported before its thread's write path was free, and
    /// waits for all its progress to be recorded (into `st.appended`).
    async fn record_progress(&self, st: &mut TaskState) {
        let lost = |e: &dyn std::fmt::Display| {
            tracing::warn!(thread = %self.env.thread, error = %e, "progress event not recorded");
        };
        for (body, at_ms) in std::mem::take(&mut st.progress_later) {
            let batch = self.env.batch_of(std::slice::from_ref(&body), at_ms);
            match async { self.env.pipeline.submit(batch?, at_ms, None).await }.await {
                Ok((pending, _)) => st.progress.push((pending, body)),
                Err(e) => lost(&e),
            }
        }
        for (pending, body) in std::mem::take(&mut st.progress) {
            match pending.wait().await {
                Ok(a) => st.appended.extend(self.env.zip_recorded(a.bookmarks, vec![body])),
                Err(e) => lost(&e),
            }
        }
    }

    /// The task's stream as a tool's [`ToolCtx`] writes it.
    fn sink(&self) -> StreamSink {
        let stream = self.stream();
        StreamSink::new(move |v| stream.write(v))
    }

    fn nondeterminism(&self, detail: String) {
        let mut st = self.state();
        st.nondeterminism.get_or_insert(detail);
    }
}

impl NodeContext for LiveNodeContext {
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
        let v = self.value(Drawn::Clock, |_| Value::from(self.env.clock.now_ms()));
        v.as_u64().unwrap_or_else(|| {
            self.nondeterminism(format!("recorded value {v} read as a clock reading"));
            self.env.clock.now_ms()
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

    fn patched(&self, id: &str) -> bool {
        self.patch(id, false)
    }
    fn deprecate_patch(&self, id: &str) {
        self.patch(id, true);
    }
    fn on_undo(&self, name: &str, args: Value) -> Result<(), NodeError> {
        self.undo(name, args)
    }
    fn continue_as_new(&self, input: Value) -> Result<(), NodeError> {
        self.continue_as(input)
    }
    fn set_event(&self, key: &str, value: Value) -> BoxFuture<'static, Result<(), NodeError>> {
        self.publish_event(key, value)
    }
    fn promise(&self) -> BoxFuture<'static, Result<cairn_dsl::Promise, NodeError>> {
        self.create_promise()
    }
    fn change_label(&self, key: &str, value: Option<&str>) -> Result<(), NodeError> {
        self.label(key, value)
    }

    fn call_tool(
        &self,
        call: ToolCall,
        input: Value,
        run: ErasedTool,
    ) -> BoxFuture<'static, Result<Value, NodeError>> {
        let env = self.env.clone();
        let (step, key, attempt) = (self.step, self.key.clone(), self.attempt);
        let cancel = self.cancellation();
        let sink = self.sink();
        // Decide under the lock whether this call is recorded, then leave the lock before any await.
        let NextCall { index, recorded, values, log_start, counted } = self.state().next_call();
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
                    same_call(&rec, &call, &input, &key, index)?;
                    env.metrics.tool_call(true);
                    return rec.output.map_err(NodeError::from);
                }
                may_call(&env, &call, counted, index)?;
                let clock = env.clock.clone();
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
                let recs = env.append_now(bodies, now).await.map_err(|e| env.stop.node_error(e))?;
                lock_state(&shared).appended.extend(recs);
                env.metrics.tool_call(false);
                let tool_ctx = ToolCtx::new(cancel)
                    .with_idempotency_key(super::idempotency::key(&env, step, &key, attempt, index))
                    .with_stream(sink);
                let output = env.metrics.time_tool(run(input, tool_ctx.clone())).await;
                let (usage, models) = (tool_ctx.usage_reported(), tool_ctx.models_reported());
                let done = clock.now_ms();
                let body = Body::ToolReturned {
                    step,
                    task: key.clone(),
                    attempt,
                    call: index,
                    name: call.name.clone(),
                    output: output.clone(),
                    usage,
                    models,
                    duration_ms: done.saturating_sub(now),
                };
                let recs =
                    env.append_now(vec![body], done).await.map_err(|e| env.stop.node_error(e))?;
                lock_state(&shared).appended.extend(recs);
                output.map_err(NodeError::from)
            }
            .instrument(span),
        )
    }

    fn progress(&self, progress: Progress) {
        let body = Body::Progress { task: self.key.clone(), progress };
        let now = self.env.clock.now_ms();
        let batch = self.env.batch_of(std::slice::from_ref(&body), now);
        let submitted = batch.map(|b| self.env.pipeline.try_submit(b, now));
        match submitted {
            Ok(Some(Ok((pending, _)))) => self.state().progress.push((pending, body)),
            Ok(None) => self.state().progress_later.push((body, now)),
            Ok(Some(Err(e))) | Err(e) => {
                tracing::warn!(thread = %self.env.thread, error = %e, "progress event not recorded")
            }
        }
    }

    fn stream(&self, value: Value) -> Result<(), NodeError> {
        LiveNodeContext::stream(self).write(value)
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
        self.attempt_token().clone()
    }

    fn interrupt(&self, prompt: Value) -> Result<Value, NodeError> {
        self.state().suspensions.interrupt(prompt)
    }

    fn recv(&self, name: &str) -> BoxFuture<'static, Result<Value, NodeError>> {
        let received = self.receive(name, true);
        Box::pin(async move { received.await.map(Option::unwrap_or_default) })
    }

    fn try_recv(&self, name: &str) -> BoxFuture<'static, Result<Option<Value>, NodeError>> {
        self.receive(name, false)
    }

    fn signal_set_aside(&self, name: &str, detail: &str) {
        self.set_aside(name, detail);
    }

    fn sleep(&self, duration_ms: u64) -> BoxFuture<'static, Result<(), NodeError>> {
        let now = self.now_ms();
        let result = self.state().suspensions.sleep(now, duration_ms);
        Box::pin(async move { result })
    }

    fn sleep_until(&self, at_ms: u64) -> BoxFuture<'static, Result<(), NodeError>> {
        let result = self.state().suspensions.sleep_until(at_ms);
        Box::pin(async move { result })
    }

    fn select(
        &self,
        signals: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Option<(String, Value)>, NodeError>> {
        self.select_wait(signals, until_ms)
    }

    fn select_children(
        &self,
        signals: Vec<String>,
        children: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<cairn_dsl::Selected, NodeError>> {
        self.select_any(signals, children, until_ms)
    }

    fn lock(
        &self,
        name: &str,
        ttl_ms: u64,
        wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        self.lock_all(vec![name.to_owned()], ttl_ms, wait)
    }

    fn lock_all(
        &self,
        names: Vec<String>,
        ttl_ms: u64,
        wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        if wait {
            self.state().lock_wait = Some(names.join(","));
        }
        let write = super::locks::acquire(self.env.clone(), names, ttl_ms, wait);
        let (st, taken) = (self.st.clone(), super::locks::appending(self.st.clone(), write));
        Box::pin(async move {
            let r = taken.await;
            lock_state(&st).lock_wait = None;
            r
        })
    }

    fn unlock(&self, name: &str) -> BoxFuture<'static, Result<(), NodeError>> {
        let write = super::locks::release(self.env.clone(), name.to_owned());
        super::locks::appending(self.st.clone(), write)
    }

    fn start_child(
        &self,
        start: cairn_dsl::ChildStart,
    ) -> BoxFuture<'static, Result<String, NodeError>> {
        self.start_child_of(start)
    }

    fn join_child(
        &self,
        child: &str,
    ) -> BoxFuture<'static, Result<cairn_dsl::ChildEnded, NodeError>> {
        self.join_child_of(child)
    }
}

/// A tool call about to be made, as the task's state decides it.
struct NextCall {
    /// Its index among the attempt's calls.
    index: u32,
    /// Its recorded result, when the call is re-executed.
    recorded: Option<ToolRecord>,
    /// The values drawn since the last recorded call (flushed with a new call).
    values: Vec<Value>,
    /// Whether the call records the task's start too (its first new write).
    log_start: bool,
    /// The attempt's calls already counted in the thread's telemetry.
    counted: u64,
}

impl TaskState {
    /// Takes the next call's index, and decides whether it is recorded.
    fn next_call(&mut self) -> NextCall {
        let index = self.next_call;
        self.next_call += 1;
        let recorded = self.replay_tools.get(index as usize).cloned();
        let values =
            if recorded.is_none() { std::mem::take(&mut self.new_values) } else { Vec::new() };
        let log_start = recorded.is_none() && !self.started_logged;
        if log_start {
            self.started_logged = true;
        }
        NextCall { index, recorded, values, log_start, counted: self.calls_counted }
    }
}

/// Whether re-executed tool call `index` of task `key` is the call `rec` recorded: refused as
/// nondeterminism when the code now calls another tool or gives it another input.
fn same_call(
    rec: &ToolRecord,
    call: &ToolCall,
    input: &Value,
    key: &TaskKey,
    index: u32,
) -> Result<(), NodeError> {
    if rec.name != call.name {
        return Err(NodeError::Nondeterminism {
            detail: format!(
                "call #{index} of {key} was recorded as tool {} but the code calls {}",
                rec.name, call.name
            ),
        });
    }
    if let Some(recorded) = &rec.input_hash
        && *recorded != crate::core::thread_ctx::input_hash(input)
    {
        return Err(NodeError::Nondeterminism {
            detail: format!(
                "call #{index} of {key} (tool {}) was recorded with another input \
                 than the code gives it now",
                call.name
            ),
        });
    }
    Ok(())
}

/// Whether a new tool call `index` may run: the tool's permission granted, the thread's
/// tool-call budget not spent (`counted`: the calls of this task already counted before it).
fn may_call(env: &ThreadEnv, call: &ToolCall, counted: u64, index: u32) -> Result<(), NodeError> {
    if let Some(p) = &call.permission
        && !env.permissions.contains(p)
    {
        return Err(NodeError::PermissionDenied { tool: call.name.clone(), permission: p.clone() });
    }
    if let Some(max) = env.budgets.max_tool_calls {
        let used = env.tool_calls_before.saturating_sub(counted) + u64::from(index);
        if used >= max {
            return Err(NodeError::BudgetExceeded { budget: "tool_calls".into() });
        }
    }
    Ok(())
}
