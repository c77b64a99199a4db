//! The imperative shell around [`ThreadCtx`]: drives one thread step by step.
//!
//! A step: expand the frontier into tasks, run them concurrently on one snapshot of the state,
//! then build the step's events in task order, apply them to the context (the pure fold), and
//! append them in one atomic batch, with a checkpoint when the policy asks for one. Nothing of a
//! step is visible (handles, watchers, the demo's counter) before that batch is durable.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_storage::{
    Batch, CheckpointKind, CheckpointMeta, LeaseOp, LockOp, NewCheckpoint, ThreadId, ThreadRecord,
    ThreadStatus,
};
use tracing::Instrument;

use crate::coord::claims::Control;
use crate::core::decide::{self, CheckpointRules, Next, TaskRun};
use crate::api::engine::Inner;
use crate::error::Error;
use crate::limits;
use crate::core::codec;
use crate::exec::pipeline::{InFlight, Pipeline};
use crate::core::event::Body;
use crate::core::restore::restore;
use crate::core::status::Transition;
use crate::exec::task::{ThreadEnv, run_task};
use crate::core::thread_ctx::ThreadCtx;

/// Why [`drive`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// The thread reached this status (terminal, or parked: paused, waiting, sleeping, blocked).
    Status(ThreadStatus),
    /// The engine is shutting down; the thread stays Running and is recovered at the next open.
    Shutdown,
    /// Another runner in this process is driving the thread already.
    Busy,
}

/// Drives `thread` until it ends, parks, or the engine shuts down.
///
/// # Errors
/// Storage errors (a failed commit ends the run; nothing unacknowledged is visible), an unknown
/// or changed workflow, a log that does not fold.
pub(crate) async fn drive(
    inner: Arc<Inner>,
    thread: ThreadId,
    depth: usize,
    reason: &str,
) -> Result<Exit, Error> {
    drive_under(inner, thread, depth, reason, None).await
}

/// [`drive`] for a sub-workflow's child thread: cancelling `parent` cancels it too.
pub(crate) async fn drive_under(
    inner: Arc<Inner>,
    thread: ThreadId,
    depth: usize,
    reason: &str,
    parent: Option<tokio_util::sync::CancellationToken>,
) -> Result<Exit, Error> {
    let span = tracing::info_span!(
        "thread",
        thread = %thread,
        workflow = tracing::field::Empty,
        version = tracing::field::Empty,
        depth,
        reason,
    );
    async move {
        let Some(control) = inner.claims.claim_under(&thread, parent.as_ref()) else {
            return Ok(Exit::Busy);
        };
        let result = drive_claimed(&inner, &thread, depth, reason, &control).await;
        inner.claims.release(&thread);
        if let Ok(Exit::Status(s)) = &result {
            inner.notify(&thread, *s);
            if s.is_terminal() {
                crate::exec::resume_check::forget(&inner, &thread);
            } else {
                inner.arm_parked_deadline_from_record(&thread);
            }
        }
        result
    }
    .instrument(span)
    .await
}

async fn drive_claimed(
    inner: &Arc<Inner>,
    thread: &ThreadId,
    depth: usize,
    reason: &str,
    control: &Arc<Control>,
) -> Result<Exit, Error> {
    let record =
        inner.store.thread(thread)?.ok_or_else(|| Error::UnknownThread(thread.to_string()))?;
    if record.status.is_terminal() {
        return Ok(Exit::Status(record.status));
    }
    if record.status == ThreadStatus::Paused {
        // Paused since this run was queued (between the write that woke or started the thread
        // and this claim, the window in which `pause` records Paused itself): only `resume`
        // moves a thread out of Paused, so the acknowledged pause holds.
        return Ok(Exit::Status(ThreadStatus::Paused));
    }
    let wf = inner.workflow_for(&record)?;
    let span = tracing::Span::current();
    span.record("workflow", wf.id());
    span.record("version", wf.version());
    let ctx = restore(inner.store.as_ref(), &wf, thread, None)?;
    if ctx.meta.waiting.is_some() || matches!(record.status, ThreadStatus::Blocked) {
        // Waiting for input or a timer: only `send_input` or the timer may wake it.
        return Ok(Exit::Status(ctx.meta.status));
    }
    // A thread driven for the first time in this process is replayed since its latest
    // checkpoint: if the code now diverges from what it recorded, it is blocked, not run.
    if let Some(s) = crate::exec::resume_check::check(inner, &wf, thread, &ctx, &record, reason).await? {
        return Ok(Exit::Status(s));
    }
    let env = Arc::new(ThreadEnv {
        inner: inner.clone(),
        thread: thread.clone(),
        cancel: control.cancel.clone(),
        tool_calls_before: ctx.meta.telemetry.tool_calls,
        budgets: ctx.meta.budgets(&wf).clone(),
        permissions: ctx.meta.permissions(&wf).clone(),
        wf,
        depth,
        seed: ctx.meta.seed.unwrap_or(inner.seed),
        pipeline: Pipeline::start(inner, thread, ctx.meta.seq, tail_events(inner, thread, &ctx)?),
    });
    if let Some(at) = ctx.meta.policy.deadline_at_ms {
        inner.arm_deadline(thread, at, control);
    }
    let now = inner.clock.now_ms();
    let mut runner = Runner { env, ctx, record, emitted: Vec::new(), last_checkpoint_ms: now };
    runner.begin(reason).await?;
    runner.run(control).await
}

struct Runner {
    env: Arc<ThreadEnv>,
    ctx: ThreadCtx,
    record: ThreadRecord,
    /// Events of the batch being built, already applied to `ctx` under their predicted seqs.
    emitted: Vec<(Body, u64)>,
    last_checkpoint_ms: u64,
}

enum StepEnd {
    Continue,
    Exit(Exit),
}

impl Runner {
    fn inner(&self) -> &Arc<Inner> {
        &self.env.inner
    }

    fn now(&self) -> u64 {
        self.env.inner.clock.now_ms()
    }

    /// Applies `body` to the context under the next seq and keeps it for the batch.
    fn emit(&mut self, body: Body, at_ms: u64) -> Result<(), Error> {
        decide::emit(&mut self.ctx, &mut self.emitted, body, at_ms)
    }

    fn emit_status(&mut self, t: Transition, reason: &str, at_ms: u64) -> Result<(), Error> {
        decide::emit_status(&mut self.ctx, &mut self.emitted, t, reason, at_ms)
    }

    /// Moves the thread to Running and takes its lease (taking it over from a dead owner).
    async fn begin(&mut self, reason: &str) -> Result<(), Error> {
        let now = self.now();
        if reason.starts_with("recovered") {
            self.emit(Body::Recovered { action: "resumed".into() }, now)?;
        }
        // Woken threads (input, timer, resume) were moved to Running by the write that woke them.
        if self.ctx.meta.status != ThreadStatus::Running {
            self.emit_status(Transition::Run, reason, now)?;
        }
        let mut batch = Batch::default();
        let me = self.inner().owner.clone();
        if let Some(lease) = &self.record.lease
            && lease.owner != me
        {
            // The database file is locked by this process, so any other owner is a process
            // that died: its lease is void whatever its expiry says.
            batch.leases.push(LeaseOp::Release {
                thread: self.env.thread.clone(),
                owner: lease.owner.clone(),
            });
        }
        batch.leases.push(LeaseOp::Acquire {
            thread: self.env.thread.clone(),
            owner: me,
            now_ms: now,
            ttl_ms: limits::LEASE_TTL_MS,
        });
        self.commit(batch, None, None).await
    }

    async fn run(&mut self, control: &Arc<crate::coord::claims::Control>) -> Result<Exit, Error> {
        loop {
            let now = self.now();
            if control.cancel.is_cancelled() {
                if control.timed_out() {
                    let why = "the thread's deadline passed";
                    return self.finish(Transition::TimeOut, why, now).await;
                }
                let reason = control.reason().unwrap_or_else(|| "cancelled".into());
                return self.finish(Transition::Cancel, &reason, now).await;
            }
            if self.inner().shutdown.is_cancelled() {
                self.park_for_shutdown().await?;
                return Ok(Exit::Shutdown);
            }
            if control.take_pause() {
                return self.finish(Transition::Pause, "paused at a step boundary", now).await;
            }
            if let Some(exit) = self.check_budgets(now).await? {
                return Ok(exit);
            }
            let step = tracing::debug_span!("step", step = self.ctx.meta.step + 1);
            match self.step().instrument(step).await? {
                StepEnd::Continue => {}
                StepEnd::Exit(exit) => return Ok(exit),
            }
        }
    }

    /// Stops the thread in the status `t` leads to, releasing its lease (and its locks when the
    /// status is terminal).
    async fn finish(&mut self, t: Transition, reason: &str, now: u64) -> Result<Exit, Error> {
        self.emit_status(t, reason, now)?;
        let status = self.ctx.meta.status;
        let kind = status.is_terminal().then(|| {
            if status == ThreadStatus::Completed {
                CheckpointKind::Completion
            } else {
                CheckpointKind::Failure
            }
        });
        let mut batch = Batch::default();
        self.release_all(&mut batch, now)?;
        self.commit_durable(batch, kind).await?;
        self.inner().locks_released.notify_waiters();
        Ok(Exit::Status(status))
    }

    async fn park_for_shutdown(&mut self) -> Result<(), Error> {
        let mut batch = Batch::default();
        batch.leases.push(LeaseOp::Release {
            thread: self.env.thread.clone(),
            owner: self.inner().owner.clone(),
        });
        self.commit_durable(batch, None).await
    }

    /// Releases the lease, and every lock of the thread when it has ended.
    fn release_all(&mut self, batch: &mut Batch, now: u64) -> Result<(), Error> {
        let thread = self.env.thread.clone();
        batch
            .leases
            .push(LeaseOp::Release { thread: thread.clone(), owner: self.inner().owner.clone() });
        if self.ctx.meta.status.is_terminal() {
            let held: Vec<String> = self
                .inner()
                .store
                .locks()?
                .into_iter()
                .filter(|l| l.owner == thread.as_str())
                .map(|l| l.name)
                .collect();
            for name in held {
                self.emit(Body::Lock { name, acquired: false }, now)?;
            }
            batch.locks.push(LockOp::ReleaseAll { owner: thread.to_string() });
        }
        Ok(())
    }

    /// Budget checks at a step boundary: a warning once the configured fraction is crossed, a
    /// clean stop (Paused, resumable) at the limit.
    async fn check_budgets(&mut self, now: u64) -> Result<Option<Exit>, Error> {
        let budgets = self.env.budgets.clone();
        let t = &self.ctx.meta.telemetry;
        let wall = now.saturating_sub(self.ctx.meta.created_at_ms);
        let figures = [
            ("steps", t.steps, budgets.max_steps),
            ("tool_calls", t.tool_calls, budgets.max_tool_calls),
            ("tokens", t.tokens, budgets.max_tokens),
            ("cost", t.cost_micros, budgets.max_cost_micros),
            ("wall_ms", wall, budgets.max_wall_ms),
        ];
        let mut warned = false;
        for (name, used, limit) in figures {
            let Some(limit) = limit else { continue };
            if used >= limit {
                // A clean stop in a resumable state: raise the budget and resume.
                self.emit(Body::Budget { budget: name.to_owned(), used, limit }, now)?;
                let exit = self
                    .finish(Transition::Pause, &format!("budget {name} exhausted"), now)
                    .await?;
                return Ok(Some(exit));
            }
            let threshold = (limit as f64 * budgets.warn_fraction).ceil() as u64;
            if used >= threshold && !self.ctx.meta.budget_warned.iter().any(|b| b == name) {
                self.emit(Body::Budget { budget: name.to_owned(), used, limit }, now)?;
                warned = true;
            }
        }
        if warned {
            // Submit now: tasks append their own events next (after settling), and the seqs
            // predicted for emitted events must not overlap theirs.
            self.commit(Batch::default(), None, None).await?;
        }
        if self.ctx.meta.step >= limits::STEPS_PER_THREAD_MAX {
            return Err(Error::LimitExceeded {
                limit: "the steps of one thread",
                value: self.ctx.meta.step,
                max: limits::STEPS_PER_THREAD_MAX,
            });
        }
        Ok(None)
    }

    async fn step(&mut self) -> Result<StepEnd, Error> {
        let step = self.ctx.meta.step + 1;
        let tasks = match decide::plan_step(&self.ctx, &self.env.wf, step)? {
            Ok(tasks) => tasks,
            Err((task, error)) => {
                let now = self.now();
                self.emit(Body::NodeFailed { step, task, attempt: 1, error, terminal: true }, now)?;
                return Ok(StepEnd::Exit(
                    self.finish(Transition::Fail, "a node failed", now).await?,
                ));
            }
        };
        let mut futures = Vec::new();
        for (id, key, item) in tasks {
            let journal = self.ctx.meta.open.get(&key).cloned().unwrap_or_default();
            if journal.outcome.is_some() {
                continue; // finished before a suspension: its outcome waits in the journal
            }
            let state = self.ctx.state.clone_box();
            futures.push(run_task(self.env.clone(), step, id, key, item, state, journal));
        }
        assert!(self.emitted.is_empty(), "events emitted before a step are submitted before it");
        let mut runs: Vec<TaskRun> = futures::future::join_all(futures).await;
        runs.sort_by(|a, b| a.key.cmp(&b.key));
        let mut appended: Vec<_> =
            runs.iter_mut().flat_map(|r| std::mem::take(&mut r.appended)).collect();
        appended.sort_by_key(|r| r.bookmark.seq);
        for rec in &appended {
            self.ctx.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body)?;
        }
        if self.env.cancel.is_cancelled() {
            // Cancelled or timed out mid-step: the tasks' outcomes are moot; the loop records
            // the end at its top.
            return Ok(StepEnd::Continue);
        }
        self.close_step(step, runs).await
    }

    /// Decides the end of the step from its task results (`decide.rs`, pure) and carries the
    /// decision out: submits the events, parks or stops the thread.
    async fn close_step(&mut self, step: u64, runs: Vec<TaskRun>) -> Result<StepEnd, Error> {
        let now = self.now();
        let config = &self.inner().config;
        let policy = self.env.wf.checkpoint_policy();
        let rules = CheckpointRules {
            every_steps: config.checkpoint_every_steps.or(policy.every_steps),
            every_ms: config.checkpoint_every_ms.or(policy.every_ms),
            last_checkpoint_ms: self.last_checkpoint_ms,
            tail_events_max: config.checkpoint_tail_events,
            tail_bytes_max: config.checkpoint_tail_bytes,
            tail: self.env.pipeline.tail().await,
        };
        let max_tool_calls = self.env.budgets.max_tool_calls;
        let decision = decide::close_step(
            &mut self.ctx,
            &self.env.wf,
            step,
            runs,
            now,
            rules,
            max_tool_calls,
        )?;
        self.emitted.extend(decision.events);
        match decision.next {
            Next::Continue => {
                self.commit(Batch::default(), decision.checkpoint, Some(step)).await?;
                Ok(StepEnd::Continue)
            }
            Next::Park(t) => {
                let mut batch = Batch::default();
                batch.leases.push(LeaseOp::Release {
                    thread: self.env.thread.clone(),
                    owner: self.inner().owner.clone(),
                });
                self.commit_durable(batch, decision.checkpoint).await?;
                if t == Transition::Sleep {
                    self.inner().schedule_timers(&self.env.thread, &self.ctx);
                }
                Ok(StepEnd::Exit(Exit::Status(self.ctx.meta.status)))
            }
            Next::Stop(t, reason) => Ok(StepEnd::Exit(self.finish(t, &reason, now).await?)),
        }
    }

    /// [`Runner::commit`], then waits until it (and every batch before it) is durable: for the
    /// batches that park or end the thread, which is then reported.
    async fn commit_durable(
        &mut self,
        batch: Batch,
        checkpoint: Option<CheckpointKind>,
    ) -> Result<(), Error> {
        self.commit(batch, checkpoint, None).await?;
        self.env.settle().await
    }

    /// Submits the emitted events (plus `batch`'s operations) as one atomic batch, with a
    /// checkpoint of the resulting context when `checkpoint` is set, without waiting for its
    /// commit (see [`crate::exec::pipeline`]). `step` is the step the batch closes, reported to the
    /// step hook once durable.
    async fn commit(
        &mut self,
        mut batch: Batch,
        checkpoint: Option<CheckpointKind>,
        step: Option<u64>,
    ) -> Result<(), Error> {
        let now = self.now();
        if let Some(kind) = checkpoint {
            let description = format!("after step {}", self.ctx.meta.step);
            self.emit(Body::CheckpointCreated { kind, description: description.clone() }, now)?;
        }
        let emitted = std::mem::take(&mut self.emitted);
        let first_seq = self.ctx.meta.seq + 1 - emitted.len() as u64;
        for (body, at) in &emitted {
            codec::push_event(&mut batch, &self.env.thread, body, *at)?;
        }
        if let Some(kind) = checkpoint {
            let snapshot = serde_json::to_vec(&self.ctx.snapshot()?)?;
            batch.checkpoints.push(NewCheckpoint {
                thread: self.env.thread.clone(),
                workflow: self.record.workflow.clone(),
                kind,
                snapshot,
                meta: CheckpointMeta {
                    creator: "engine".into(),
                    description: format!("{kind} checkpoint after step {}", self.ctx.meta.step),
                    tags: Vec::new(),
                    custom: BTreeMap::new(),
                },
                created_at_ms: now,
            });
            self.last_checkpoint_ms = now;
        }
        self.record.status = self.ctx.meta.status;
        self.record.updated_at_ms = now;
        self.record.summary = summary_bytes(&self.ctx);
        batch.threads.push(self.record.clone());
        let (pending, first_seq) = self.env.pipeline.submit(batch, now, Some(first_seq)).await?;
        let in_flight = InFlight { pending, first_seq, step };
        self.env.pipeline.push(in_flight).await
    }
}

/// Events of `thread` after its latest checkpoint (all of them when it has none).
fn tail_events(inner: &Inner, thread: &ThreadId, ctx: &ThreadCtx) -> Result<u64, Error> {
    let filter = cairn_storage::CheckpointFilter {
        thread: Some(thread.clone()),
        ..cairn_storage::CheckpointFilter::default()
    };
    let latest =
        inner.store.list_checkpoints(&filter, cairn_storage::Page { limit: 1, offset: 0 })?;
    let covered = latest.first().map_or(0, |c| c.covers.seq.0);
    Ok(ctx.meta.seq.saturating_sub(covered))
}

/// A small JSON summary kept in the thread record for listings (step, frontier, progress).
/// Written on every batch, so serialised from borrowed fields without building a JSON tree.
fn summary_bytes(ctx: &ThreadCtx) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Summary<'a> {
        step: u64,
        frontier: &'a [String],
        progress: &'a Option<cairn_dsl::Progress>,
        last_error: Option<String>,
        deadline_at_ms: Option<u64>,
    }
    let summary = Summary {
        step: ctx.meta.step,
        frontier: &ctx.meta.frontier,
        progress: &ctx.meta.progress,
        last_error: ctx.meta.errors.back().map(|e| e.error.to_string()),
        deadline_at_ms: ctx.meta.policy.deadline_at_ms,
    };
    serde_json::to_vec(&summary).unwrap_or_default()
}

/// The routing of a step, for replay (it lives in the step decision).
pub(crate) use crate::core::decide::route_step;
