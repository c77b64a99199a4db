//! The step decision, sans I/O: from a thread context and what its step's tasks did, to the
//! step's events, the checkpoint to write with them, and what the thread does next.
//!
//! Pure: no tokio, no store, no clock (the time is an argument). The runner (`runner.rs`) runs
//! the tasks, hands their results here, then carries out the decision: it submits the events,
//! parks or ends the thread. The events are applied to the context as they are decided (the
//! routing of the step reads the updates its tasks produced), under the seqs that follow the
//! context's last one, exactly as the live run and a restore fold them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::{
    DynNodeKind, DynState, DynWorkflow, Message, NextTarget, NodeError, NodeId, Target, Usage,
};
use cairn_storage::CheckpointKind;
use serde_json::Value;

use crate::checkpoint_plan::CheckpointPlan;
use crate::codec::Recorded;
use crate::continuation;
use crate::error::Error;
use crate::event::{Body, TaskKey};
pub use crate::fold::{emit, emit_status};
use crate::limits;
use crate::recovery::{self, AfterFailure, Failure};
use crate::status::Transition;
use crate::step_end::{self, Claim, Claims, Ending};
use crate::thread_ctx::ThreadCtx;

/// Join node -> the branches that arrived.
pub type Arrivals = BTreeMap<String, Vec<String>>;

/// How a task ended.
#[derive(Debug)]
pub enum TaskEnd {
    /// The node returned.
    Done {
        /// Its state update, if any.
        update: Option<Value>,
        /// Where it asked to go next (empty: the workflow's edges decide).
        goto: Vec<Target>,
        /// The usage its tools reported.
        usage: Usage,
        /// The messages it sent.
        messages: Vec<Message>,
    },
    /// The node interrupted and asks for human input.
    WaitInput {
        /// What it asks, as it gave it.
        prompt: Value,
    },
    /// The node waits for a signal of this name (`ctx.recv`) and none is there.
    WaitSignal {
        /// The signal's name.
        name: String,
    },
    /// The node started a durable timer.
    Sleep {
        /// When it fires (ms since the epoch).
        until_ms: u64,
    },
    /// A budget ran out inside the node (a tool call it may not make).
    Budget {
        /// The budget's name.
        budget: String,
    },
    /// Something the node waits on is paused (a sub-workflow's child thread).
    Paused {
        /// Why, in words.
        reason: String,
    },
    /// The node failed (after its retries, or not retryable).
    Failed {
        /// Its error.
        error: NodeError,
    },
}

/// The result of running one task to its end (through any retries).
#[derive(Debug)]
pub struct TaskRun {
    /// The task.
    pub key: TaskKey,
    /// Its final attempt (1 for the first).
    pub attempt: u32,
    /// Its map item, for a task of a map node.
    pub item: Option<Value>,
    /// When its final attempt started (ms since the epoch).
    pub started_at_ms: u64,
    /// How long its final attempt ran.
    pub duration_ms: u64,
    /// Whether a NodeStarted for the final attempt is already in the log.
    pub started_logged: bool,
    /// Values drawn and not yet logged.
    pub values: Vec<Value>,
    /// Events this task appended itself (tool calls, retries, progress), with their bookmarks.
    pub appended: Vec<Recorded>,
    /// How it ended.
    pub end: TaskEnd,
}

/// The log after a thread's latest checkpoint: what a restore reads and folds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// Events.
    pub events: u64,
    /// Bytes of their bodies, summaries and offloaded payloads.
    pub bytes: u64,
}

/// What the checkpoint policy needs to know besides the step.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckpointRules {
    /// A periodic checkpoint every N steps.
    pub every_steps: Option<u64>,
    /// A periodic checkpoint once T ms passed since the last checkpoint.
    pub every_ms: Option<u64>,
    /// When the last checkpoint was written (engine clock).
    pub last_checkpoint_ms: u64,
    /// A periodic checkpoint once the tail after the latest one holds this many events...
    pub tail_events_max: Option<u64>,
    /// ...or this many bytes.
    pub tail_bytes_max: Option<u64>,
    /// The log submitted after the latest checkpoint, before this step's events.
    pub tail: Tail,
    /// A completing thread writes its completion checkpoint when at least this many events
    /// follow its latest one (its last step's included), or when its last step would have taken
    /// one anyway (`CheckpointRules::completion_due`); 0: at every completion.
    pub completion_after_events: u64,
}

/// What the thread does after the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The next step runs; the step's batch is submitted without waiting for its commit.
    Continue,
    /// The thread parks (waits for input or a timer): its status event is among the events;
    /// the batch is made durable, with the lease released, before anything is reported.
    Park(Transition),
    /// The thread stops with this transition and reason (the runner records the status, frees
    /// the lease and, for an end, the locks).
    Stop(Transition, String),
    /// A failed node's recovery strategy rolls the thread back to its latest checkpoint (the
    /// runner commits the step's events, then the `rolled_back`, and goes on from there).
    Restore,
}

/// The step's decision.
#[derive(Debug)]
pub struct Decision {
    /// The events, in order, with their times; already applied to the context.
    pub events: Vec<(Body, u64)>,
    /// The checkpoint to write with them.
    pub checkpoint: Option<CheckpointPlan>,
    /// What comes next.
    pub next: Next,
}

/// A task of a step: its node, key and map item.
pub type PlannedTask = (NodeId, TaskKey, Option<Value>);

/// Expands the frontier of `ctx` into step `step`'s tasks, in task order, or the task and error
/// that fail the step before anything runs (a loop bound reached, map items that do not
/// serialise, more tasks than a step may hold).
///
/// # Errors
/// [`Error::Record`] if the frontier names a node the workflow does not have.
#[allow(clippy::type_complexity, reason = "the two failure levels are the point of the signature")]
pub fn plan_step(
    ctx: &ThreadCtx,
    wf: &DynWorkflow,
    step: u64,
) -> Result<Result<Vec<PlannedTask>, (TaskKey, NodeError)>, Error> {
    let mut tasks = Vec::with_capacity(ctx.meta.frontier.len());
    for name in &ctx.meta.frontier {
        let Some(id) = wf.node_id(name) else {
            let detail =
                format!("the frontier names node {name}, which the workflow does not have");
            return Err(Error::record(&ctx.meta.thread, ctx.meta.seq, detail));
        };
        let node = &wf.nodes()[id];
        let visits = ctx.meta.visits.get(name.as_str()).copied().unwrap_or(0);
        if let Some(max) = node.policy.max_visits
            && visits >= max
        {
            let error = NodeError::Failed {
                code: Some("loop_bound".into()),
                message: format!(
                    "node {name} would run a {}th time; its loop bound is {max}",
                    visits + 1
                ),
                retryable: false,
            };
            return Ok(Err((TaskKey::node(name.clone()), error)));
        }
        match &node.kind {
            DynNodeKind::Map { items, .. } => {
                let items = match items(ctx.state.as_ref()) {
                    Ok(items) => items,
                    Err(e) => {
                        let error =
                            NodeError::Codec { detail: format!("items of map node {name}: {e}") };
                        return Ok(Err((TaskKey::node(name.clone()), error)));
                    }
                };
                let node = shared_name(wf, id);
                for (i, item) in items.into_iter().enumerate() {
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    tasks.push((id, TaskKey { node: node.clone(), item: Some(index) }, Some(item)));
                }
            }
            DynNodeKind::Task(_) | DynNodeKind::Subgraph { .. } => {
                tasks.push((id, TaskKey { node: shared_name(wf, id), item: None }, None));
            }
        }
    }
    if tasks.len() > limits::TASKS_PER_STEP_MAX {
        // A step is one atomic batch, so its tasks are bounded: the thread fails here, with
        // the limit in words, rather than leaving a runner error behind a Running thread.
        let first = tasks.first().map_or_else(String::new, |t| t.1.node.to_string());
        let error = NodeError::Failed {
            code: Some("tasks_per_step".into()),
            message: format!(
                "step {step} would run {} tasks (fan-out branches plus map items); at most \
                 {} run in one step",
                tasks.len(),
                limits::TASKS_PER_STEP_MAX
            ),
            retryable: false,
        };
        return Ok(Err((TaskKey::node(first), error)));
    }
    tasks.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(Ok(tasks))
}

/// The name of node `id` of `wf` (an id `wf` gave), shared.
fn shared_name(wf: &DynWorkflow, id: NodeId) -> Arc<str> {
    wf.shared_name(id).expect("an id the workflow gave names one of its nodes").clone()
}

/// Decides the end of step `step` of `ctx` from its task runs (in task order; the events they
/// appended themselves already folded into `ctx`), at time `now`: each run's events and its
/// concern's claim, then the first claim in `step_end::PRECEDENCE` decides. The events are
/// collected into `events`, which must be empty (a caller's vector, passed in to reuse its
/// capacity step after step).
///
/// # Errors
/// [`Error::Record`] if an event does not apply (a bug, or a context that is not the thread's);
/// [`Error::Transition`] for a status move the table refuses; [`Error::Codec`] if the final
/// state does not serialise.
#[expect(
    clippy::too_many_arguments,
    reason = "the step's inputs, each its own thing; `events` is the caller's vector, reused"
)]
pub fn close_step(
    ctx: &mut ThreadCtx,
    events: Vec<(Body, u64)>,
    wf: &DynWorkflow,
    step: u64,
    runs: impl IntoIterator<Item = TaskRun>,
    now: u64,
    rules: CheckpointRules,
    max_tool_calls: Option<u64>,
) -> Result<Decision, Error> {
    assert!(events.is_empty(), "a step's events are collected into an empty vector");
    let out = Out { ctx, events };
    let claims = Claims::default();
    let mut c = Closing { out, wf, step, now, rules, max_tool_calls, claims, checkpoint: None };
    for run in runs {
        c.collect(run)?;
    }
    let (next, checkpoint) = step_end::resolve(&mut c)?;
    Ok(Decision { events: c.out.events, checkpoint, next })
}

/// A step being closed: its events so far, and the claims its task runs made.
pub(crate) struct Closing<'a> {
    pub out: Out<'a>,
    pub wf: &'a DynWorkflow,
    pub step: u64,
    pub now: u64,
    pub rules: CheckpointRules,
    pub max_tool_calls: Option<u64>,
    pub claims: Claims,
    /// The checkpoint the completed tasks' nodes ask for (the strongest).
    pub checkpoint: Option<CheckpointPlan>,
}

impl Closing<'_> {
    /// Records `run`'s events and its concern's claim on the step's end.
    fn collect(&mut self, run: TaskRun) -> Result<(), Error> {
        let at = run.started_at_ms;
        // A task that completes in this batch without a map item needs no NodeStarted: nothing
        // could see it before the completion (same commit), and its start is the completion's
        // time minus its duration. Failed and suspended tasks and map items (replay reads the
        // item from it) keep theirs.
        let implied = run.item.is_none() && matches!(run.end, TaskEnd::Done { .. });
        if !run.started_logged && !implied {
            let (task, attempt, item) = (run.key.clone(), run.attempt, run.item.clone());
            self.out.emit(Body::NodeStarted { step: self.step, task, attempt, item }, at)?;
        }
        let done_at = at + run.duration_ms;
        match run.end {
            TaskEnd::Done { update, goto, usage, messages } => {
                let done = Done { update, goto, usage, messages };
                self.completed(run.key, run.attempt, run.values, run.duration_ms, done, done_at)
            }
            TaskEnd::Failed { error } => {
                let (task, attempt, at_ms) = (run.key, run.attempt, done_at);
                self.failed(Failure { step: self.step, task, attempt, error, at_ms })
            }
            end @ (TaskEnd::WaitInput { .. }
            | TaskEnd::WaitSignal { .. }
            | TaskEnd::Sleep { .. }) => self.waits(run.key, run.values, end, done_at),
            // Runs again (its recorded calls replayed) when the thread resumes.
            TaskEnd::Budget { budget } => {
                self.claims.claim(Ending::Budget, Claim::Budget(budget));
                Ok(())
            }
            // Runs again when the thread resumes (a paused child thread is driven on then).
            TaskEnd::Paused { reason } => {
                self.claims.claim(Ending::Pause, Claim::Stop(Transition::Pause, reason));
                Ok(())
            }
        }
    }

    /// A completed task: its messages, the checkpoint its node asks for, its completion.
    fn completed(
        &mut self,
        task: TaskKey,
        attempt: u32,
        values: Vec<Value>,
        duration_ms: u64,
        done: Done,
        at: u64,
    ) -> Result<(), Error> {
        let Done { update, goto, usage, messages } = done;
        for message in messages {
            self.out.emit(Body::Message { task: task.clone(), message }, at)?;
        }
        let policy = &self.wf.nodes()[self.wf.node_id(&task.node).unwrap_or(0)].policy;
        let asked = if policy.phase {
            Some(CheckpointKind::Phase)
        } else {
            policy.checkpoint_after.then_some(CheckpointKind::Node)
        };
        // A checkpoint asked for this node at run time takes the place of the node's own (its
        // kind, the caller's metadata); its request is used up by the completion's fold.
        let requests = &self.out.ctx.meta.checkpoint_requests;
        let requested = requests.at_node(&task.node, asked.unwrap_or(CheckpointKind::Node));
        let own = asked.map(|kind| {
            let node = Some(task.node.to_string());
            CheckpointPlan { kind, node, tags: policy.tags.clone(), given: None }
        });
        if let Some(plan) = requested.or(own) {
            self.checkpoint = CheckpointPlan::stronger(self.checkpoint.take(), plan);
        }
        let step = self.step;
        let body =
            Body::NodeCompleted { step, task, attempt, update, goto, values, duration_ms, usage };
        self.out.emit(body, at)
    }

    /// Failure and recovery: a failed task's events under its node's strategy, and its claim.
    fn failed(&mut self, failure: Failure) -> Result<(), Error> {
        let wait_free = !self.claims.has(Ending::Park);
        let out = &mut self.out;
        let claim = match recovery::failed(out.ctx, &mut out.events, self.wf, failure, wait_free)? {
            AfterFailure::Fail => {
                (Ending::Fail, Claim::Stop(Transition::Fail, "a node failed".into()))
            }
            AfterFailure::Recovered => return Ok(()),
            AfterFailure::Escalated => {
                (Ending::Park, Claim::Park(Transition::WaitInput, "waiting for input"))
            }
            AfterFailure::Restore => (Ending::Restore, Claim::Restore),
            AfterFailure::Abandon(reason) => {
                (Ending::Abandon, Claim::Stop(Transition::Cancel, reason))
            }
        };
        self.claims.claim(claim.0, claim.1);
        Ok(())
    }

    /// Parking and waits: a task that waits for input, a signal or a timer. A second waiting
    /// task in the same step runs again when the thread resumes and waits again then; recording
    /// one wait at a time keeps `waiting` single. A step that fails records none.
    fn waits(
        &mut self,
        task: TaskKey,
        values: Vec<Value>,
        end: TaskEnd,
        at: u64,
    ) -> Result<(), Error> {
        if self.claims.has(Ending::Park) || self.claims.has(Ending::Fail) {
            return Ok(());
        }
        let step = self.step;
        let (body, t, why) = match end {
            TaskEnd::WaitInput { prompt } => {
                let body = Body::InputRequested { step, task, prompt, values };
                (body, Transition::WaitInput, "waiting for input")
            }
            TaskEnd::WaitSignal { name } => {
                let body = Body::SignalAwaited { step, task, name, values };
                (body, Transition::WaitInput, "waiting for a signal")
            }
            TaskEnd::Sleep { until_ms } => {
                let body = Body::TimerSet { step, task, until_ms, values };
                (body, Transition::Sleep, "sleeping on a durable timer")
            }
            _ => return Ok(()),
        };
        self.claims.claim(Ending::Park, Claim::Park(t, why));
        self.out.emit(body, at)
    }
}

/// What a completed task's end carries.
struct Done {
    update: Option<Value>,
    goto: Vec<Target>,
    usage: Usage,
    messages: Vec<Message>,
}

/// The events decided so far, each applied to the context as it is decided.
pub(crate) struct Out<'a> {
    pub ctx: &'a mut ThreadCtx,
    pub events: Vec<(Body, u64)>,
}

impl Out<'_> {
    pub(crate) fn emit(&mut self, body: Body, at_ms: u64) -> Result<(), Error> {
        emit(self.ctx, &mut self.events, body, at_ms)
    }

    pub(crate) fn emit_status(
        &mut self,
        t: Transition,
        reason: &str,
        at_ms: u64,
    ) -> Result<(), Error> {
        emit_status(self.ctx, &mut self.events, t, reason, at_ms)
    }
}

impl CheckpointRules {
    /// Whether a periodic checkpoint is due after step `step`, at `now`, with `events` more
    /// submitted after the latest checkpoint.
    pub(crate) fn periodic_due(&self, step: u64, now: u64, events: u64) -> bool {
        let tail_events = self.tail.events + events;
        self.every_steps.is_some_and(|n| n > 0 && step.is_multiple_of(n))
            || self.every_ms.is_some_and(|ms| now.saturating_sub(self.last_checkpoint_ms) >= ms)
            || self.tail_events_max.is_some_and(|max| tail_events >= max)
            || self.tail_bytes_max.is_some_and(|max| self.tail.bytes >= max)
    }

    /// Whether the step `step` that completes the thread, at `now`, with `events` more
    /// submitted after the latest checkpoint, writes the completion checkpoint: when the step
    /// asked for one (`asked`: a node's or phase's policy, a request at run time), when a
    /// periodic one is due, or when the log after the latest checkpoint is long enough that
    /// reading the final state from it would cost more than a snapshot. A short thread's final
    /// state is read from its log instead (every read folds it from the latest checkpoint).
    pub(crate) fn completion_due(&self, asked: bool, step: u64, now: u64, events: u64) -> bool {
        asked
            || self.tail.events + events >= self.completion_after_events
            || self.periodic_due(step, now, events)
    }
}

/// The next frontier and join arrivals after the open step of `ctx` (used by the step decision
/// and by replay, which checks the recorded routing against the current code). Errors here are
/// the workflow's (a route to an undeclared target, a join that can no longer be satisfied), so
/// they fail the thread.
pub fn route_step(
    wf: &DynWorkflow,
    ctx: &ThreadCtx,
    step: u64,
) -> Result<(Vec<String>, Arrivals), NodeError> {
    if continuation::requested(&ctx.meta).is_some() {
        return Ok((Vec::new(), Arrivals::new())); // the thread ends: its successor goes on
    }
    let gotos = step_gotos(wf, ctx, step)?;
    let state = state_after_step(wf, ctx, &gotos)?;
    let state = state.as_deref().unwrap_or(ctx.state.as_ref());
    let mut next: Vec<NodeId> = Vec::new();
    let mut arrivals = ctx.meta.arrivals.clone();
    for (from, goto) in &gotos {
        let targets = wf.next(*from, state, goto).map_err(|e| NodeError::Failed {
            code: Some("route".into()),
            message: e.to_string(),
            retryable: false,
        })?;
        let from_name = &wf.nodes()[*from].name;
        for target in targets {
            let NextTarget::Node(to) = target else { continue };
            match wf.join_sources(to) {
                None => next.push(to),
                Some(sources) => {
                    let to_name = wf.nodes()[to].name.clone();
                    let arrived = arrivals.entry(to_name.clone()).or_default();
                    if !arrived.contains(from_name) {
                        arrived.push(from_name.clone());
                        arrived.sort();
                    }
                    if sources.iter().all(|s| arrived.contains(&wf.nodes()[*s].name)) {
                        arrivals.remove(&to_name);
                        next.push(to);
                    }
                }
            }
        }
    }
    // In node order, each once: the frontier is a set.
    next.sort_unstable();
    next.dedup();
    if next.is_empty() && !arrivals.is_empty() {
        let waiting: Vec<String> = arrivals.keys().cloned().collect();
        return Err(NodeError::Failed {
            code: Some("join".into()),
            message: format!(
                "every branch ended but join(s) {} still wait for branches",
                waiting.join(", ")
            ),
            retryable: false,
        });
    }
    Ok((next.into_iter().map(|id| wf.nodes()[id].name.clone()).collect(), arrivals))
}

/// A node of a step and the gotos its tasks chose.
type Gotos<'c> = (NodeId, Cow<'c, [Target]>);

/// Each node of the open step of `ctx`, in node order, with the gotos its tasks chose (a node's
/// tasks in task order): borrowed for a node of one task, as most are.
fn step_gotos<'c>(
    wf: &DynWorkflow,
    ctx: &'c ThreadCtx,
    step: u64,
) -> Result<Vec<Gotos<'c>>, NodeError> {
    let mut gotos: Vec<Gotos<'c>> = Vec::with_capacity(ctx.meta.open.len());
    // The journals are keyed by (node, item): a node's tasks are next to each other.
    let mut last: Option<&str> = None;
    for (task, journal) in &ctx.meta.open {
        let outcome = journal
            .outcome
            .as_ref()
            .ok_or_else(|| NodeError::fatal(format!("step {step}: task {task} has no outcome")))?;
        if last == Some(&*task.node) {
            let (_, goto) = gotos.last_mut().expect("the node's first task was pushed");
            goto.to_mut().extend(outcome.goto.iter().cloned());
            continue;
        }
        last = Some(&task.node);
        let id = wf
            .node_id(&task.node)
            .ok_or_else(|| NodeError::fatal(format!("unknown node {}", task.node)))?;
        gotos.push((id, Cow::Borrowed(&outcome.goto)));
    }
    gotos.sort_by_key(|(id, _)| *id);
    Ok(gotos)
}

/// The state after the open step's updates, if a route of the step's nodes reads it (`None`:
/// none does, and the routing reads no state). Made on a copy: the context's state takes the
/// updates when the step's completion is folded.
fn state_after_step(
    wf: &DynWorkflow,
    ctx: &ThreadCtx,
    gotos: &[Gotos<'_>],
) -> Result<Option<Box<dyn DynState>>, NodeError> {
    if !gotos.iter().any(|(from, goto)| wf.routes_on_state(*from, goto)) {
        return Ok(None);
    }
    let mut state = ctx.state.clone_box();
    for journal in ctx.meta.open.values() {
        if let Some(update) = journal.outcome.as_ref().and_then(|o| o.update.as_ref()) {
            state.apply_json(update).map_err(|e| NodeError::Codec { detail: e.to_string() })?;
        }
    }
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    //! The step decision without tokio, a store or a clock: a context, task results, a time.

    use std::sync::Arc;

    use cairn_dsl::{DynWorkflow, END, NodeOutput, NodePolicy, Replace, START, Workflow};
    use cairn_storage::ThreadStatus;
    use serde_json::json;

    use super::*;

    /// `a` then `b` (which checkpoints after itself), on a `u64` state.
    fn two_nodes() -> Arc<DynWorkflow> {
        let noop = |_s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(0)) };
        Workflow::<Replace<u64>>::builder("two", 1)
            .node("a", noop)
            .node_with("b", noop, NodePolicy::default().checkpoint_after(true))
            .edge(START, "a")
            .edge("a", "b")
            .edge("b", END)
            .build()
            .expect("workflow")
            .erase()
    }

    fn run(node: &str, end: TaskEnd) -> TaskRun {
        TaskRun {
            key: TaskKey::node(node.to_owned()),
            attempt: 1,
            item: None,
            started_at_ms: 100,
            duration_ms: 5,
            started_logged: false,
            values: Vec::new(),
            appended: Vec::new(),
            end,
        }
    }

    fn done(update: u64) -> TaskEnd {
        TaskEnd::Done {
            update: Some(json!(update)),
            goto: Vec::new(),
            usage: Usage::default(),
            messages: Vec::new(),
        }
    }

    /// [`close_step`] into a new vector, without a tool-call budget.
    fn close(
        ctx: &mut ThreadCtx,
        wf: &DynWorkflow,
        step: u64,
        runs: Vec<TaskRun>,
        now: u64,
        rules: CheckpointRules,
    ) -> Result<Decision, Error> {
        close_step(ctx, Vec::new(), wf, step, runs, now, rules, None)
    }

    /// Closes `step` of `ctx` (at 200 ms the first, 100 ms more each next) with `node` done and
    /// its update `update`.
    fn step_done(
        ctx: &mut ThreadCtx,
        wf: &DynWorkflow,
        step: u64,
        node: &str,
        update: u64,
    ) -> Decision {
        let at_ms = 100 + 100 * step;
        close(ctx, wf, step, vec![run(node, done(update))], at_ms, Default::default())
            .expect("decision")
    }

    fn kinds(d: &Decision) -> Vec<&'static str> {
        d.events.iter().map(|(b, _)| b.kind().as_str()).collect()
    }

    #[test]
    fn a_completed_task_closes_the_step_and_the_next_one_runs() {
        let wf = two_nodes();
        let mut ctx = crate::fold_samples::running(&wf, "a");
        let plan = plan_step(&ctx, &wf, 1).expect("plan").expect("tasks");
        assert_eq!(plan.len(), 1);
        let d = step_done(&mut ctx, &wf, 1, "a", 5);
        // No NodeStarted: implied by the completion in the same batch.
        assert_eq!(kinds(&d), ["node_completed", "step_completed"]);
        assert_eq!((d.next, d.checkpoint), (Next::Continue, None));
        assert_eq!(ctx.meta.frontier, ["b"]);
        assert_eq!(ctx.meta.seq, 4, "the events were applied under the following seqs");
        assert_eq!(ctx.state.to_json().expect("json"), json!(5));
    }

    #[test]
    fn the_last_node_ends_the_thread_with_its_output() {
        let wf = two_nodes();
        let mut ctx = crate::fold_samples::running(&wf, "a");
        step_done(&mut ctx, &wf, 1, "a", 5);
        let d = step_done(&mut ctx, &wf, 2, "b", 9);
        assert_eq!(kinds(&d), ["node_completed", "step_completed", "state_updated"]);
        assert_eq!(d.next, Next::Stop(Transition::Complete, "every branch reached END".into()));
        let kind = d.checkpoint.map(|c| c.kind);
        assert_eq!(kind, Some(CheckpointKind::Completion), "0 events asked: at every completion");
        assert_eq!(ctx.meta.output, Some(json!(9)));
    }

    #[test]
    fn a_borrowed_snapshot_is_the_json_of_the_owned_one() {
        let wf = two_nodes();
        let mut ctx = crate::fold_samples::running(&wf, "a");
        step_done(&mut ctx, &wf, 1, "a", 5);
        step_done(&mut ctx, &wf, 2, "b", 9);
        let owned = serde_json::to_vec(&ctx.snapshot().expect("snapshot")).expect("json");
        assert_eq!(ctx.snapshot_json().expect("borrowed"), owned);
    }

    #[test]
    fn a_failed_task_stops_the_thread_and_a_suspension_parks_it() {
        let wf = two_nodes();
        let mut ctx = crate::fold_samples::running(&wf, "a");
        let failed = TaskEnd::Failed { error: NodeError::fatal("boom") };
        let d = close(&mut ctx, &wf, 1, vec![run("a", failed)], 200, Default::default())
            .expect("decision");
        assert_eq!(kinds(&d), ["node_started", "node_failed"]);
        assert_eq!(d.next, Next::Stop(Transition::Fail, "a node failed".into()));

        let mut ctx = crate::fold_samples::running(&wf, "a");
        let waiting = TaskEnd::WaitInput { prompt: json!("go?") };
        let d = close(&mut ctx, &wf, 1, vec![run("a", waiting)], 200, Default::default())
            .expect("decision");
        assert_eq!(kinds(&d), ["node_started", "input_requested", "status_changed"]);
        assert_eq!(d.next, Next::Park(Transition::WaitInput));
        assert_eq!(ctx.meta.status, ThreadStatus::WaitingInput);
    }

    #[test]
    fn a_continue_as_new_request_ends_the_thread_and_names_its_successor() {
        let wf = two_nodes();
        let mut ctx = crate::fold_samples::running(&wf, "a");
        let mut asked = run("a", done(5));
        asked.values = vec![crate::marks::successor(json!(0))];
        let d = close(&mut ctx, &wf, 1, vec![asked], 200, Default::default()).expect("decision");
        // `a` routes to `b`, but the request ends the thread with the step.
        assert_eq!(
            kinds(&d),
            ["node_completed", "step_completed", "state_updated", "custom"],
            "{:?}",
            d.events
        );
        assert_eq!(d.next, Next::Stop(Transition::Complete, continuation::REASON.into()));
        assert_eq!(ctx.meta.continued_as.as_deref(), Some("t~1"));
        assert!(ctx.meta.frontier.is_empty());
        assert!(
            matches!(&d.events[3].0, Body::ContinuedAsNew { thread, input } if thread == "t~1" && input == &json!(0))
        );
    }

    #[test]
    fn checkpoints_follow_the_node_policy_and_the_periodic_rules() {
        let wf = two_nodes();
        // The kind of checkpoint a first step of `a` writes under `rules`, if any.
        let first_step = |rules| {
            let mut ctx = crate::fold_samples::running(&wf, "a");
            let d = close(&mut ctx, &wf, 1, vec![run("a", done(1))], 200, rules);
            d.expect("step 1").checkpoint.map(|c| c.kind)
        };
        let periodic = Some(CheckpointKind::Periodic);
        let every_step = CheckpointRules { every_steps: Some(1), ..Default::default() };
        assert_eq!(first_step(every_step), periodic);
        let by_time =
            CheckpointRules { every_ms: Some(100), last_checkpoint_ms: 150, ..Default::default() };
        assert_eq!(first_step(by_time), None, "50 ms since the last one");
        // The tail after the latest checkpoint: 9 events, then this step's 2 reach 10.
        let tail = |events| CheckpointRules {
            tail_events_max: Some(10),
            tail: Tail { events, bytes: 0 },
            ..Default::default()
        };
        assert_eq!(first_step(tail(8)), periodic, "8 + 2 events");
        assert_eq!(first_step(tail(7)), None, "7 + 2 events");
        let bytes = CheckpointRules {
            tail_bytes_max: Some(1_000),
            tail: Tail { events: 0, bytes: 1_000 },
            ..Default::default()
        };
        assert_eq!(first_step(bytes), periodic, "by bytes");
        let mut ctx = crate::fold_samples::running(&wf, "a");
        close(&mut ctx, &wf, 1, vec![run("a", done(1))], 200, by_time).expect("1");
        // `b` checkpoints after itself, but it ends the thread: the completion checkpoint wins.
        let d = close(&mut ctx, &wf, 2, vec![run("b", done(1))], 300, by_time).expect("step 2");
        assert!(matches!(d.next, Next::Stop(Transition::Complete, _)));
        assert_eq!(d.checkpoint.map(|c| c.kind), Some(CheckpointKind::Completion));
    }

    #[test]
    fn a_completion_writes_its_checkpoint_once_the_tail_is_long_or_the_step_asks_for_one() {
        // The kind of checkpoint `wf`'s last step (of `last`) writes under `rules`, if any.
        let last_step = |wf: &DynWorkflow, last: &str, rules: CheckpointRules| {
            let mut ctx = crate::fold_samples::running(wf, "a");
            let none = CheckpointRules { completion_after_events: u64::MAX, ..rules };
            close(&mut ctx, wf, 1, vec![run("a", done(1))], 200, none).expect("1");
            let d = close(&mut ctx, wf, 2, vec![run(last, done(2))], 300, rules);
            let d = d.expect("step 2");
            assert!(matches!(d.next, Next::Stop(Transition::Complete, _)), "{:?}", d.next);
            d.checkpoint.map(|c| c.kind)
        };
        let completion = Some(CheckpointKind::Completion);
        // The last step writes node_completed, step_completed, state_updated (the output), and
        // the runner the status change: 4 events after a tail of `events`.
        let after = |events, min| CheckpointRules {
            tail: Tail { events, bytes: 0 },
            completion_after_events: min,
            ..Default::default()
        };
        let noop = |_s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(0)) };
        let plain = Workflow::<Replace<u64>>::builder("plain", 1)
            .node("a", noop)
            .node("b", noop)
            .edge(START, "a")
            .edge("a", "b")
            .edge("b", END)
            .build()
            .expect("workflow")
            .erase();
        assert_eq!(last_step(&plain, "b", after(95, 100)), None, "95 + 4 events");
        assert_eq!(last_step(&plain, "b", after(96, 100)), completion, "96 + 4 events");
        assert_eq!(last_step(&plain, "b", after(0, 0)), completion, "0: always");
        // A periodic policy due at the last step.
        let every_2 = CheckpointRules { every_steps: Some(2), ..after(0, 100) };
        assert_eq!(last_step(&plain, "b", every_2), completion, "every 2 steps, step 2");
        let every_3 = CheckpointRules { every_steps: Some(3), ..after(0, 100) };
        assert_eq!(last_step(&plain, "b", every_3), None, "every 3 steps, step 2");
        // The last node's policy asks for one: the completion checkpoint takes its place.
        assert_eq!(last_step(&two_nodes(), "b", after(0, 100)), completion, "b asks");
    }
}
