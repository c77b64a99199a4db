//! The step decision, sans I/O: from a thread context and what its step's tasks did, to the
//! step's events, the checkpoint to write with them, and what the thread does next.
//!
//! Pure: no tokio, no store, no clock (the time is an argument). The runner (`runner.rs`) runs
//! the tasks, hands their results here, then carries out the decision: it submits the events,
//! parks or ends the thread. The events are applied to the context as they are decided (the
//! routing of the step reads the updates its tasks produced), under the seqs that follow the
//! context's last one, exactly as the live run and a restore fold them.

use std::collections::{BTreeMap, BTreeSet};

use cairn_dsl::{DynNodeKind, DynWorkflow, Message, NextTarget, NodeError, NodeId, Target, Usage};
use cairn_storage::CheckpointKind;
use serde_json::Value;

use crate::core::checkpoint_plan::CheckpointPlan;
use crate::core::codec::Recorded;
use crate::core::event::{Body, TaskKey};
use crate::core::recovery::{self, AfterFailure, Failure};
use crate::core::status::{Transition, transition};
use crate::core::thread_ctx::ThreadCtx;
use crate::core::{continuation, labels};
use crate::error::Error;
use crate::limits;

/// Join node -> the branches that arrived.
pub(crate) type Arrivals = BTreeMap<String, Vec<String>>;

/// How a task ended.
#[derive(Debug)]
pub(crate) enum TaskEnd {
    Done {
        update: Option<Value>,
        goto: Vec<Target>,
        usage: Usage,
        messages: Vec<Message>,
    },
    WaitInput {
        prompt: Value,
    },
    /// The node waits for a signal of this name (`ctx.recv`) and none is there.
    WaitSignal {
        name: String,
    },
    Sleep {
        until_ms: u64,
    },
    /// A budget ran out inside the node (a tool call it may not make).
    Budget {
        budget: String,
    },
    /// Something the node waits on is paused (a sub-workflow's child thread).
    Paused {
        reason: String,
    },
    Failed {
        error: NodeError,
    },
}

/// The result of running one task to its end (through any retries).
#[derive(Debug)]
pub(crate) struct TaskRun {
    pub key: TaskKey,
    pub attempt: u32,
    pub item: Option<Value>,
    pub started_at_ms: u64,
    pub duration_ms: u64,
    /// Whether a NodeStarted for the final attempt is already in the log.
    pub started_logged: bool,
    /// Values drawn and not yet logged.
    pub values: Vec<Value>,
    /// Events this task appended itself (tool calls, retries, progress), with their bookmarks.
    pub appended: Vec<Recorded>,
    pub end: TaskEnd,
}

/// The log after a thread's latest checkpoint: what a restore reads and folds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Events.
    pub events: u64,
    /// Bytes of their bodies, summaries and offloaded payloads.
    pub bytes: u64,
}

/// What the checkpoint policy needs to know besides the step.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CheckpointRules {
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
}

/// What the thread does after the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
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
pub(crate) struct Decision {
    /// The events, in order, with their times; already applied to the context.
    pub events: Vec<(Body, u64)>,
    /// The checkpoint to write with them.
    pub checkpoint: Option<CheckpointPlan>,
    /// What comes next.
    pub next: Next,
}

/// A task of a step: its node, key and map item.
pub(crate) type PlannedTask = (NodeId, TaskKey, Option<Value>);

/// Expands the frontier of `ctx` into step `step`'s tasks, in task order, or the task and error
/// that fail the step before anything runs (a loop bound reached, map items that do not
/// serialise, more tasks than a step may hold).
///
/// # Errors
/// [`Error::Record`] if the frontier names a node the workflow does not have.
#[allow(clippy::type_complexity, reason = "the two failure levels are the point of the signature")]
pub(crate) fn plan_step(
    ctx: &ThreadCtx,
    wf: &DynWorkflow,
    step: u64,
) -> Result<Result<Vec<PlannedTask>, (TaskKey, NodeError)>, Error> {
    let mut tasks = Vec::new();
    for name in &ctx.meta.frontier {
        let Some(id) = wf.node_id(name) else {
            let detail =
                format!("the frontier names node {name}, which the workflow does not have");
            return Err(Error::record(&ctx.meta.thread, ctx.meta.seq, detail));
        };
        let node = &wf.nodes()[id];
        let visits = ctx.meta.visits.get(name).copied().unwrap_or(0);
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
                for (i, item) in items.into_iter().enumerate() {
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    tasks.push((id, TaskKey { node: name.clone(), item: Some(index) }, Some(item)));
                }
            }
            DynNodeKind::Task(_) | DynNodeKind::Subgraph { .. } => {
                tasks.push((id, TaskKey::node(name.clone()), None));
            }
        }
    }
    if tasks.len() > limits::TASKS_PER_STEP_MAX {
        // A step is one atomic batch, so its tasks are bounded: the thread fails here, with
        // the limit in words, rather than leaving a runner error behind a Running thread.
        let first = tasks.first().map_or_else(String::new, |t| t.1.node.clone());
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

/// Decides the end of step `step` of `ctx` from its task runs (in task order; the events they
/// appended themselves already folded into `ctx`), at time `now`.
///
/// # Errors
/// [`Error::Record`] if an event does not apply (a bug, or a context that is not the thread's);
/// [`Error::Transition`] for a status move the table refuses; [`Error::Codec`] if the final
/// state does not serialise.
#[expect(clippy::too_many_lines, reason = "split by issue 39's decide helper")]
pub(crate) fn close_step(
    ctx: &mut ThreadCtx,
    wf: &DynWorkflow,
    step: u64,
    runs: Vec<TaskRun>,
    now: u64,
    rules: CheckpointRules,
    max_tool_calls: Option<u64>,
) -> Result<Decision, Error> {
    let mut out = Out { ctx, events: Vec::new() };
    let mut failed = false;
    let mut suspended: Option<Transition> = None;
    let mut waits_signal = false;
    let mut budget_stop: Option<String> = None;
    let mut paused_by: Option<String> = None;
    let mut checkpoint: Option<CheckpointPlan> = None;
    let (mut restore, mut abandoned) = (false, None::<String>);
    for run in runs {
        let at = run.started_at_ms;
        // A task that completes in this batch without a map item needs no NodeStarted: nothing
        // could see it before the completion (same commit), and its start is the completion's
        // time minus its duration. Failed and suspended tasks and map items (replay reads the
        // item from it) keep theirs.
        let implied = run.item.is_none() && matches!(run.end, TaskEnd::Done { .. });
        if !run.started_logged && !implied {
            let (task, attempt, item) = (run.key.clone(), run.attempt, run.item.clone());
            out.emit(Body::NodeStarted { step, task, attempt, item }, at)?;
        }
        let done_at = at + run.duration_ms;
        match run.end {
            TaskEnd::Done { update, goto, usage, messages } => {
                for message in messages {
                    out.emit(Body::Message { task: run.key.clone(), message }, done_at)?;
                }
                let policy = &wf.nodes()[wf.node_id(&run.key.node).unwrap_or(0)].policy;
                let asked = if policy.phase {
                    Some(CheckpointKind::Phase)
                } else {
                    policy.checkpoint_after.then_some(CheckpointKind::Node)
                };
                if let Some(kind) = asked {
                    let node = Some(run.key.node.clone());
                    let plan =
                        CheckpointPlan { kind, node, tags: policy.tags.clone(), given: None };
                    checkpoint = CheckpointPlan::stronger(checkpoint, plan);
                }
                let body = Body::NodeCompleted {
                    step,
                    task: run.key,
                    attempt: run.attempt,
                    update,
                    goto,
                    values: run.values,
                    duration_ms: run.duration_ms,
                    usage,
                };
                out.emit(body, done_at)?;
            }
            TaskEnd::Failed { error } => {
                let (task, attempt, at_ms) = (run.key, run.attempt, done_at);
                let failure = Failure { step, task, attempt, error, at_ms };
                let wait_free = suspended.is_none();
                match recovery::failed(out.ctx, &mut out.events, wf, failure, wait_free)? {
                    AfterFailure::Fail => failed = true,
                    AfterFailure::Recovered => {}
                    AfterFailure::Escalated => suspended = Some(Transition::WaitInput),
                    AfterFailure::Restore => restore = true,
                    AfterFailure::Abandon(reason) => {
                        abandoned.get_or_insert(reason);
                    }
                }
            }
            TaskEnd::WaitInput { prompt } if suspended.is_none() && !failed => {
                suspended = Some(Transition::WaitInput);
                let (task, values) = (run.key, run.values);
                out.emit(Body::InputRequested { step, task, prompt, values }, done_at)?;
            }
            TaskEnd::WaitSignal { name } if suspended.is_none() && !failed => {
                suspended = Some(Transition::WaitInput);
                waits_signal = true;
                let (task, values) = (run.key, run.values);
                out.emit(Body::SignalAwaited { step, task, name, values }, done_at)?;
            }
            TaskEnd::Sleep { until_ms } if suspended.is_none() && !failed => {
                suspended = Some(Transition::Sleep);
                let (task, values) = (run.key, run.values);
                out.emit(Body::TimerSet { step, task, until_ms, values }, done_at)?;
            }
            // A second suspended task in the same step runs again when the thread resumes and
            // suspends again then; recording one wait at a time keeps `waiting` single.
            TaskEnd::WaitInput { .. } | TaskEnd::WaitSignal { .. } | TaskEnd::Sleep { .. } => {}
            // Runs again (its recorded calls replayed) when the thread resumes.
            TaskEnd::Budget { budget } => {
                budget_stop.get_or_insert(budget);
            }
            // Runs again when the thread resumes (a paused child thread is driven on then).
            TaskEnd::Paused { reason } => {
                paused_by.get_or_insert(reason);
            }
        }
    }
    let stop = |t, reason: &str| Next::Stop(t, reason.to_owned());
    if failed {
        return Ok(out.decide(None, stop(Transition::Fail, "a node failed")));
    }
    if let Some(reason) = abandoned {
        return Ok(out.decide(None, stop(Transition::Cancel, &reason)));
    }
    if restore {
        return Ok(out.decide(None, Next::Restore));
    }
    if let Some(budget) = budget_stop
        && suspended.is_none()
    {
        let limit = max_tool_calls.unwrap_or(0);
        let used = out.ctx.meta.telemetry.tool_calls;
        out.emit(Body::Budget { budget: budget.clone(), used, limit }, now)?;
        let why = format!("budget {budget} exhausted inside a node");
        return Ok(out.decide(None, Next::Stop(Transition::Pause, why)));
    }
    if let Some(reason) = paused_by
        && suspended.is_none()
    {
        return Ok(out.decide(None, Next::Stop(Transition::Pause, reason)));
    }
    if let Some(t) = suspended {
        let why = if waits_signal {
            "waiting for a signal"
        } else if t == Transition::WaitInput {
            "waiting for input"
        } else {
            "sleeping on a durable timer"
        };
        out.emit_status(t, why, now)?;
        return Ok(out.decide(checkpoint, Next::Park(t)));
    }
    match labels::requested(&out.ctx.meta) {
        Ok(Some(change)) => out.emit(change, now)?,
        Ok(None) => {}
        Err(message) => {
            let task = TaskKey::node(out.ctx.meta.frontier.first().cloned().unwrap_or_default());
            let error = NodeError::Failed { code: Some("label".into()), message, retryable: false };
            out.emit(Body::NodeFailed { step, task, attempt: 1, error, terminal: true }, now)?;
            return Ok(out.decide(None, stop(Transition::Fail, "labels past their limit")));
        }
    }
    let (next, arrivals) = match route_step(wf, out.ctx, step) {
        Ok(x) => x,
        Err(error) => {
            let task = TaskKey::node(out.ctx.meta.frontier.first().cloned().unwrap_or_default());
            out.emit(Body::NodeFailed { step, task, attempt: 1, error, terminal: true }, now)?;
            return Ok(out.decide(None, stop(Transition::Fail, "routing failed")));
        }
    };
    let ended = next.is_empty();
    let successor = continuation::requested(&out.ctx.meta).cloned();
    out.emit(Body::StepCompleted { step, next, arrivals }, now)?;
    if ended {
        let output = out.ctx.state.to_json().map_err(|e| Error::Codec(e.to_string()))?;
        out.emit(Body::Output { output }, now)?;
        if let Some(input) = successor {
            let thread = continuation::successor_id(&out.ctx.meta.thread);
            out.emit(Body::ContinuedAsNew { thread, input }, now)?;
            return Ok(out.decide(None, stop(Transition::Complete, continuation::REASON)));
        }
        return Ok(out.decide(None, stop(Transition::Complete, "every branch reached END")));
    }
    let tail_events = rules.tail.events + out.events.len() as u64;
    if rules.every_steps.is_some_and(|n| n > 0 && step.is_multiple_of(n))
        || rules.every_ms.is_some_and(|ms| now.saturating_sub(rules.last_checkpoint_ms) >= ms)
        || rules.tail_events_max.is_some_and(|max| tail_events >= max)
        || rules.tail_bytes_max.is_some_and(|max| rules.tail.bytes >= max)
    {
        checkpoint =
            CheckpointPlan::stronger(checkpoint, CheckpointPlan::of(CheckpointKind::Periodic));
    }
    Ok(out.decide(checkpoint, Next::Continue))
}

/// The events decided so far, each applied to the context as it is decided.
struct Out<'a> {
    ctx: &'a mut ThreadCtx,
    events: Vec<(Body, u64)>,
}

impl Out<'_> {
    fn emit(&mut self, body: Body, at_ms: u64) -> Result<(), Error> {
        emit(self.ctx, &mut self.events, body, at_ms)
    }

    fn emit_status(&mut self, t: Transition, reason: &str, at_ms: u64) -> Result<(), Error> {
        emit_status(self.ctx, &mut self.events, t, reason, at_ms)
    }

    fn decide(self, checkpoint: Option<CheckpointPlan>, next: Next) -> Decision {
        Decision { events: self.events, checkpoint, next }
    }
}

/// Applies `body` to `ctx` under the next seq and keeps it in `events` (the batch being built).
///
/// # Errors
/// [`Error::Record`] if it does not apply.
pub(crate) fn emit(
    ctx: &mut ThreadCtx,
    events: &mut Vec<(Body, u64)>,
    body: Body,
    at_ms: u64,
) -> Result<(), Error> {
    let seq = ctx.meta.seq + 1;
    ctx.apply(seq, at_ms, &body)?;
    events.push((body, at_ms));
    Ok(())
}

/// [`emit`]s the status change `t` leads to from the context's status.
///
/// # Errors
/// [`Error::Transition`] if the status table refuses it; as [`emit`].
pub(crate) fn emit_status(
    ctx: &mut ThreadCtx,
    events: &mut Vec<(Body, u64)>,
    t: Transition,
    reason: &str,
    at_ms: u64,
) -> Result<(), Error> {
    let from = ctx.meta.status;
    let to = transition(from, t)
        .map_err(|source| Error::Transition { thread: ctx.meta.thread.clone(), source })?;
    emit(ctx, events, Body::StatusChanged { from, to, reason: reason.to_owned() }, at_ms)
}

/// The next frontier and join arrivals after the open step of `ctx` (used by the step decision
/// and by replay, which checks the recorded routing against the current code). Errors here are
/// the workflow's (a route to an undeclared target, a join that can no longer be satisfied), so
/// they fail the thread.
pub(crate) fn route_step(
    wf: &DynWorkflow,
    ctx: &ThreadCtx,
    step: u64,
) -> Result<(Vec<String>, Arrivals), NodeError> {
    if continuation::requested(&ctx.meta).is_some() {
        return Ok((Vec::new(), Arrivals::new())); // the thread ends: its successor goes on
    }
    let mut state = ctx.state.clone_box();
    let mut gotos: BTreeMap<NodeId, Vec<Target>> = BTreeMap::new();
    for (task, journal) in &ctx.meta.open {
        let outcome = journal
            .outcome
            .as_ref()
            .ok_or_else(|| NodeError::fatal(format!("step {step}: task {task} has no outcome")))?;
        if let Some(update) = &outcome.update {
            state.apply_json(update).map_err(|e| NodeError::Codec { detail: e.to_string() })?;
        }
        let id = wf
            .node_id(&task.node)
            .ok_or_else(|| NodeError::fatal(format!("unknown node {}", task.node)))?;
        gotos.entry(id).or_default().extend(outcome.goto.iter().cloned());
    }
    let mut next: BTreeSet<NodeId> = BTreeSet::new();
    let mut arrivals = ctx.meta.arrivals.clone();
    for (from, goto) in &gotos {
        let targets = wf.next(*from, state.as_ref(), goto).map_err(|e| NodeError::Failed {
            code: Some("route".into()),
            message: e.to_string(),
            retryable: false,
        })?;
        let from_name = &wf.nodes()[*from].name;
        for target in targets {
            let NextTarget::Node(to) = target else { continue };
            match wf.join_sources(to) {
                None => {
                    next.insert(to);
                }
                Some(sources) => {
                    let to_name = wf.nodes()[to].name.clone();
                    let arrived = arrivals.entry(to_name.clone()).or_default();
                    if !arrived.contains(from_name) {
                        arrived.push(from_name.clone());
                        arrived.sort();
                    }
                    if sources.iter().all(|s| arrived.contains(&wf.nodes()[*s].name)) {
                        arrivals.remove(&to_name);
                        next.insert(to);
                    }
                }
            }
        }
    }
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

#[cfg(test)]
mod tests {
    //! The step decision without tokio, a store or a clock: a context, task results, a time.

    use std::sync::Arc;

    use cairn_dsl::{DynWorkflow, END, NodeOutput, NodePolicy, Replace, START, Workflow};
    use cairn_storage::{ThreadStatus, WorkflowRef};
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

    /// A running thread of `wf` at the start of step 1.
    fn running(wf: &DynWorkflow) -> ThreadCtx {
        let workflow = WorkflowRef {
            id: wf.id().to_owned(),
            version: wf.version(),
            fingerprint: wf.fingerprint().to_string(),
        };
        let created = Body::ThreadCreated {
            workflow,
            input: json!(1),
            frontier: vec!["a".into()],
            labels: BTreeMap::new(),
            fork: None,
            arrivals: BTreeMap::new(),
            visits: BTreeMap::new(),
            policy: Default::default(),
            seed: Some(7),
        };
        let mut ctx = ThreadCtx::created(wf, "t", &created, 10).expect("created");
        let running = Body::StatusChanged {
            from: ThreadStatus::Created,
            to: ThreadStatus::Running,
            reason: "started".into(),
        };
        ctx.apply(2, 10, &running).expect("running");
        ctx
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
        close_step(ctx, wf, step, vec![run(node, done(update))], at_ms, Default::default(), None)
            .expect("decision")
    }

    fn kinds(d: &Decision) -> Vec<&'static str> {
        d.events.iter().map(|(b, _)| b.kind().as_str()).collect()
    }

    #[test]
    fn a_completed_task_closes_the_step_and_the_next_one_runs() {
        let wf = two_nodes();
        let mut ctx = running(&wf);
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
        let mut ctx = running(&wf);
        step_done(&mut ctx, &wf, 1, "a", 5);
        let d = step_done(&mut ctx, &wf, 2, "b", 9);
        assert_eq!(kinds(&d), ["node_completed", "step_completed", "state_updated"]);
        assert_eq!(d.next, Next::Stop(Transition::Complete, "every branch reached END".into()));
        assert_eq!(d.checkpoint, None, "the runner's stop writes the completion checkpoint");
        assert_eq!(ctx.meta.output, Some(json!(9)));
    }

    #[test]
    fn a_borrowed_snapshot_is_the_json_of_the_owned_one() {
        let wf = two_nodes();
        let mut ctx = running(&wf);
        step_done(&mut ctx, &wf, 1, "a", 5);
        step_done(&mut ctx, &wf, 2, "b", 9);
        let owned = serde_json::to_vec(&ctx.snapshot().expect("snapshot")).expect("json");
        assert_eq!(ctx.snapshot_json().expect("borrowed"), owned);
    }

    #[test]
    fn a_failed_task_stops_the_thread_and_a_suspension_parks_it() {
        let wf = two_nodes();
        let mut ctx = running(&wf);
        let failed = TaskEnd::Failed { error: NodeError::fatal("boom") };
        let d = close_step(&mut ctx, &wf, 1, vec![run("a", failed)], 200, Default::default(), None)
            .expect("decision");
        assert_eq!(kinds(&d), ["node_started", "node_failed"]);
        assert_eq!(d.next, Next::Stop(Transition::Fail, "a node failed".into()));

        let mut ctx = running(&wf);
        let waiting = TaskEnd::WaitInput { prompt: json!("go?") };
        let d =
            close_step(&mut ctx, &wf, 1, vec![run("a", waiting)], 200, Default::default(), None)
                .expect("decision");
        assert_eq!(kinds(&d), ["node_started", "input_requested", "status_changed"]);
        assert_eq!(d.next, Next::Park(Transition::WaitInput));
        assert_eq!(ctx.meta.status, ThreadStatus::WaitingInput);
    }

    #[test]
    fn a_continue_as_new_request_ends_the_thread_and_names_its_successor() {
        let wf = two_nodes();
        let mut ctx = running(&wf);
        let mut asked = run("a", done(5));
        asked.values = vec![crate::core::marks::successor(json!(0))];
        let d = close_step(&mut ctx, &wf, 1, vec![asked], 200, Default::default(), None)
            .expect("decision");
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
            let mut ctx = running(&wf);
            let d = close_step(&mut ctx, &wf, 1, vec![run("a", done(1))], 200, rules, None);
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
        let mut ctx = running(&wf);
        close_step(&mut ctx, &wf, 1, vec![run("a", done(1))], 200, by_time, None).expect("1");
        // `b` checkpoints after itself, but it ends the thread: the completion checkpoint wins.
        let d = close_step(&mut ctx, &wf, 2, vec![run("b", done(1))], 300, by_time, None)
            .expect("step 2");
        assert!(matches!(d.next, Next::Stop(Transition::Complete, _)));
    }
}
