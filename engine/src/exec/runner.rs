//! The imperative shell around [`ThreadCtx`]: drives one thread step by step.
//!
//! A step: expand the frontier into tasks, run them concurrently on one snapshot of the state,
//! then build the step's events in task order, apply them to the context (the pure fold), and
//! append them in one atomic batch, with a checkpoint when the policy asks for one. Nothing of a
//! step is visible (handles, watchers, the demo's counter) before that batch is durable.

use std::sync::Arc;

use cairn_storage::{
    Batch, CheckpointKind, LeaseOp, LockOp, NewCheckpoint, ThreadRecord, ThreadStatus,
};
use futures::future::BoxFuture;

use super::env::ThreadEnv;
use super::shell::Shell;
use super::task::run_task;
use crate::coord::{Control, Due};
use crate::core::checkpoint_plan::CheckpointPlan;
use crate::core::codec;
use crate::core::decide::{self, CheckpointRules, Next, TaskRun};
use crate::core::event::Body;
use crate::core::status::Transition;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;

/// `recovered` actions: resumed by recovery; taken from another engine instance's runner that
/// never let it go.
const RECOVERED_RESUMED: &str = "resumed";
const RECOVERED_TAKEN_OVER: &str = "taken over";

/// Why a drive returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// The thread reached this status (terminal, or parked: paused, waiting, sleeping, blocked).
    Status(ThreadStatus),
    /// The engine is shutting down; the thread stays Running and is recovered at the next open.
    Shutdown,
    /// Another runner of this engine is driving the thread already.
    Busy,
    /// Another engine drives the thread (its lease is live on a shared database), or took it
    /// between this runner's read and its first write.
    Elsewhere,
}

/// The runner of one claimed thread: its context, the batch being built, and what it runs on.
pub(crate) struct Runner {
    pub(super) shell: Arc<Shell>,
    pub(super) env: Arc<ThreadEnv>,
    pub(super) ctx: ThreadCtx,
    record: ThreadRecord,
    /// Events of the batch being built, already applied to `ctx` under their predicted seqs.
    pub(super) emitted: Vec<(Body, u64)>,
    /// The task runs of the step being closed (empty between steps; kept for its capacity).
    runs: Vec<TaskRun>,
    /// When the thread's latest checkpoint was written: what a periodic checkpoint every T ms
    /// counts from.
    last_checkpoint_ms: u64,
}

/// Events a runner's batch has room for from the start: a step's node's end and the step's
/// (with a tool call or two, or a status change) fit, so the vector is not grown by copying in
/// each thread's first steps.
const STEP_EVENTS_CAPACITY: usize = 8;

enum StepEnd {
    Continue,
    Exit(Exit),
}

impl Runner {
    /// A runner for the thread of `env`, restored to `ctx`, whose stored record is `record`,
    /// and whose latest checkpoint was written at `checkpointed_at_ms` (the one its restore
    /// started from; `None`: it has none, and periodic checkpoints count from its creation).
    /// Read from the restore, not from this runner's start: a thread that parks and wakes more
    /// often than a periodic interval still gets its checkpoint once the interval has passed.
    pub fn new(
        shell: Arc<Shell>,
        env: Arc<ThreadEnv>,
        ctx: ThreadCtx,
        mut record: ThreadRecord,
        checkpointed_at_ms: Option<u64>,
    ) -> Self {
        // Each batch makes its record's summary from the context (`commit`).
        record.summary = Vec::new();
        let last_checkpoint_ms = checkpointed_at_ms.unwrap_or(ctx.meta.created_at_ms);
        Runner {
            shell,
            env,
            ctx,
            record,
            emitted: Vec::with_capacity(STEP_EVENTS_CAPACITY),
            runs: Vec::new(),
            last_checkpoint_ms,
        }
    }

    pub(super) fn now(&self) -> u64 {
        self.shell.clock.now_ms()
    }

    /// Applies `body` to the context under the next seq and keeps it for the batch.
    pub(super) fn emit(&mut self, body: Body, at_ms: u64) -> Result<(), Error> {
        decide::emit(&mut self.ctx, &mut self.emitted, body, at_ms).map_err(Error::from)
    }

    fn emit_status(&mut self, t: Transition, reason: &str, at_ms: u64) -> Result<(), Error> {
        decide::emit_status(&mut self.ctx, &mut self.emitted, t, reason, at_ms).map_err(Error::from)
    }

    /// Moves the thread to Running and takes its lease (taking it over from a dead owner, or on
    /// a shared database from one whose lease lapsed by the database's clock). False if another
    /// engine holds or took the lease (on a shared database): nothing of this runner was
    /// written, and it must stop.
    pub async fn begin(&mut self, reason: &str) -> Result<bool, Error> {
        let now = self.now();
        let taken_over =
            self.record.lease.as_ref().is_some_and(|lease| *lease.owner != *self.shell.owner);
        if reason.starts_with("recovered") {
            self.emit(Body::Recovered { action: RECOVERED_RESUMED.into() }, now)?;
        } else if taken_over {
            // Another instance's runner never let it go (died, stalled): its log says so.
            self.emit(Body::Recovered { action: RECOVERED_TAKEN_OVER.into() }, now)?;
        }
        // Woken threads (input, timer, resume) were moved to Running by the write that woke them.
        if self.ctx.meta.status != ThreadStatus::Running {
            self.emit_status(Transition::Run, reason, now)?;
        }
        let mut batch = Batch::default();
        let me = self.shell.owner.clone();
        if let Some(lease) = &self.record.lease
            && lease.owner != me
            && !self.shell.coord.has_peers()
        {
            // Only this process writes the database (the file lock proves it): the owner died,
            // whenever its lease would lapse.
            batch.leases.push(LeaseOp::Release {
                thread: self.env.thread.clone(),
                owner: lease.owner.clone(),
            });
        }
        // On a shared database another owner's lease is taken only by this acquisition, which
        // the store refuses (`LeaseHeld`) while that lease is live by the database's clock: the
        // only clock leases lapse on (this engine's may be anywhere: a test's manual clock, a
        // host's skewed one).
        batch.leases.push(LeaseOp::Acquire {
            thread: self.env.thread.clone(),
            owner: me,
            now_ms: now,
            ttl_ms: self.shell.config.lease_ttl_ms,
        });
        // The stored lease is read above only: an upsert of the record leaves it as stored.
        self.record.lease = None;
        self.commit(batch, None, None, self.now()).await?;
        // Shared database: another engine may hold the lease, or have moved the thread since.
        if self.shell.coord.has_peers() {
            match self.env.settle().await {
                Ok(()) => {}
                Err(Error::Storage(
                    cairn_storage::Error::LeaseHeld { .. }
                    | cairn_storage::Error::GuardFailed { .. },
                )) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        if taken_over {
            self.shell.metrics.lease_takeovers.increment(1);
        }
        Ok(true)
    }

    pub async fn run(&mut self, control: &Arc<Control>) -> Result<Exit, Error> {
        loop {
            // The step's batch is being computed: storage may wait for it.
            self.env.pipeline.intend(None);
            let now = self.now();
            if control.cancel.is_cancelled() {
                if control.timed_out() {
                    let why = "the thread's deadline passed";
                    return self.finish(Transition::TimeOut, why, now).await;
                }
                let reason = control.reason().unwrap_or_else(|| "cancelled".into());
                return self.finish(Transition::Cancel, &reason, now).await;
            }
            if self.shell.tasks.is_stopping() {
                Box::pin(self.park_for_shutdown()).await?;
                return Ok(Exit::Shutdown);
            }
            self.answer_checkpoint_asks(control).await?;
            self.answer_update_asks(control).await?;
            self.answer_update_requests(control).await?;
            if control.take_pause() {
                return self.finish(Transition::Pause, "paused at a step boundary", now).await;
            }
            if let Some(exit) = self.before_step(now).await? {
                return Ok(exit);
            }
            let step = super::observe::step(self.env.clone(), self.ctx.meta.step + 1);
            // Pinned where it is made: the step's future is not moved into its span's.
            match step.run(std::pin::pin!(self.step())).await? {
                StepEnd::Continue => {}
                StepEnd::Exit(exit) => return Ok(exit),
            }
        }
    }

    /// Stops the thread in the status `t` leads to, releasing its lease (and its locks when the
    /// status is terminal), with a failure checkpoint when it fails, times out or is cancelled.
    pub(super) fn finish<'a>(
        &'a mut self,
        t: Transition,
        reason: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Exit, Error>> {
        self.finish_with(t, reason, now, None)
    }

    /// [`Runner::finish`], with the completion checkpoint the last step's decision asks for
    /// (`CheckpointRules::completion_due`) written if the thread completes.
    ///
    /// Boxed: a thread ends once, and its end (its undos, its last durable commit) is a future
    /// of about 4 KiB; held inline, it made every future that may end the thread (a step's, the
    /// run loop's, and the task that drives it) that much larger, and each was copied at its
    /// await.
    fn finish_with<'a>(
        &'a mut self,
        t: Transition,
        reason: &'a str,
        now: u64,
        completion: Option<CheckpointPlan>,
    ) -> BoxFuture<'a, Result<Exit, Error>> {
        Box::pin(self.end(t, reason, now, completion))
    }

    /// The thread's end ([`Runner::finish_with`]).
    async fn end(
        &mut self,
        t: Transition,
        reason: &str,
        now: u64,
        completion: Option<CheckpointPlan>,
    ) -> Result<Exit, Error> {
        let (t, reason, now) = self.unwind(t, reason, now).await?;
        self.emit_status(t, &reason, now)?;
        let status = self.ctx.meta.status;
        let kind = match status {
            ThreadStatus::Completed => completion,
            s if s.is_terminal() => Some(CheckpointPlan::of(CheckpointKind::Failure)),
            _ => None,
        };
        let mut batch = Batch::default();
        let released_locks = self.release_all(&mut batch, now).await?;
        let successor = self.successor(&mut batch, now).await?;
        self.commit_durable(batch, kind).await?;
        self.drive_successor(successor);
        self.shell.coord.locks_released();
        if released_locks && let Ok(locks) = self.shell.store.locks().await {
            self.shell.metrics.set_locks_held(locks.len());
        }
        if status.is_terminal() {
            // Published under the runner's claim still: no writer of this engine moved it since.
            let ended = crate::coord::Ended {
                status,
                output: if status == ThreadStatus::Completed {
                    self.ctx.meta.output.clone()
                } else {
                    None
                },
                error: self.ctx.meta.errors.back().map(|e| e.error.to_string()),
            };
            self.shell.coord.ended(&self.env.thread, ended);
            if self.ctx.meta.labels.contains_key(crate::core::child_start::CLOSES_CHILDREN_LABEL) {
                super::child_close::close_children(&self.shell, &self.env.thread);
            }
        }
        Ok(Exit::Status(status))
    }

    async fn park_for_shutdown(&mut self) -> Result<(), Error> {
        let batch = Batch { leases: vec![self.lease_release()], ..Batch::default() };
        self.commit_durable(batch, None).await
    }

    /// Gives this runner's lease up.
    fn lease_release(&self) -> LeaseOp {
        LeaseOp::Release { thread: self.env.thread.clone(), owner: self.shell.owner.clone() }
    }

    /// Releases the lease, and every lock of the thread when it has ended; true if it held any.
    async fn release_all(&mut self, batch: &mut Batch, now: u64) -> Result<bool, Error> {
        let thread = self.env.thread.clone();
        batch.leases.push(self.lease_release());
        if self.ctx.meta.status.is_terminal()
            && self.env.may_hold_locks.load(std::sync::atomic::Ordering::SeqCst)
        {
            let held: Vec<String> = self
                .shell
                .store
                .locks()
                .await?
                .into_iter()
                .filter(|l| l.owner == thread.as_str())
                .map(|l| l.name)
                .collect();
            let any = !held.is_empty();
            for name in held {
                self.emit(Body::Lock { name, acquired: false }, now)?;
            }
            batch.locks.push(LockOp::ReleaseAll { owner: thread.to_string() });
            return Ok(any);
        }
        Ok(false)
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
        self.env.signals.reset(&self.ctx).await;
        self.env.published_keys().reset(&self.ctx.meta);
        assert!(self.emitted.is_empty(), "events emitted before a step are submitted before it");
        assert!(self.runs.is_empty(), "a step's runs are taken by the step before it closes");
        match <[_; 1]>::try_from(tasks) {
            // One task (a linear step): awaited as it is, without `join_all` and its vectors,
            // and without an `Option` of its future beside the awaited one (that kept two task
            // futures in the step's, doubling it and every future that holds it).
            Ok([(_, key, _)]) if self.ran(&key) => {}
            Ok([(id, key, item)]) => {
                // Pinned where it is made: not moved into the step's future at the await.
                let run = std::pin::pin!(self.task(step, id, key, item)).await;
                self.runs.push(run);
            }
            Err(tasks) => {
                let tasks = tasks.into_iter().filter(|(_, key, _)| !self.ran(key));
                let runs = futures::future::join_all(
                    tasks.map(|(id, key, item)| self.task(step, id, key, item)),
                )
                .await;
                self.runs.extend(runs);
            }
        }
        self.env.stop.check(&self.env.thread)?;
        self.runs.sort_by(|a, b| a.key.cmp(&b.key));
        let mut appended: Vec<_> =
            self.runs.iter_mut().flat_map(|r| std::mem::take(&mut r.appended)).collect();
        appended.sort_by_key(|r| r.bookmark.seq);
        for rec in &appended {
            self.ctx.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body)?;
        }
        if self.env.cancel.is_cancelled() {
            // Cancelled or timed out mid-step: outcomes moot; the loop records the end at its top.
            self.runs.clear();
            return Ok(StepEnd::Continue);
        }
        self.close_step(step).await
    }

    /// Whether task `key` finished before a suspension (its outcome waits in the journal), so
    /// this step does not run it again.
    fn ran(&self, key: &crate::core::event::TaskKey) -> bool {
        self.ctx.meta.open.get(key).is_some_and(|j| j.outcome.is_some())
    }

    /// The run of task `key` (of node `id`) in `step`, on a copy of the state.
    fn task(
        &self,
        step: u64,
        id: cairn_dsl::NodeId,
        key: crate::core::event::TaskKey,
        item: Option<serde_json::Value>,
    ) -> impl std::future::Future<Output = TaskRun> + use<> {
        let journal = self.ctx.meta.open.get(&key).cloned().unwrap_or_default();
        let state = self.ctx.state.clone_box();
        run_task(self.env.clone(), step, id, key, item, state, journal)
    }

    /// Decides the end of the step from its task results (`decide.rs`, pure) and carries the
    /// decision out: submits the events, parks or stops the thread.
    async fn close_step(&mut self, step: u64) -> Result<StepEnd, Error> {
        let now = self.now();
        let config = &self.shell.config;
        let policy = self.env.wf.checkpoint_policy();
        let rules = CheckpointRules {
            every_steps: config.checkpoint_every_steps.or(policy.every_steps),
            every_ms: config.checkpoint_every_ms.or(policy.every_ms),
            last_checkpoint_ms: self.last_checkpoint_ms,
            tail_events_max: config.checkpoint_tail_events,
            tail_bytes_max: config.checkpoint_tail_bytes,
            tail: self.env.pipeline.tail().await,
            completion_after_events: config.completion_checkpoint_after,
        };
        let max_tool_calls = self.env.budgets.max_tool_calls;
        // The emitted events are submitted before a step (`step` asserts it): the vector is
        // empty, and its capacity is the step's.
        let decision = decide::close_step(
            &mut self.ctx,
            std::mem::take(&mut self.emitted),
            &self.env.wf,
            step,
            self.runs.drain(..),
            now,
            rules,
            max_tool_calls,
        )?;
        self.emitted = decision.events;
        match decision.next {
            Next::Continue => {
                self.commit(Batch::default(), decision.checkpoint, Some(step), now).await?;
                Ok(StepEnd::Continue)
            }
            Next::Park(t) => {
                let batch = Batch { leases: vec![self.lease_release()], ..Batch::default() };
                // Boxed, as the rarer ends of a step are: the step's future holds the largest.
                Box::pin(self.commit_durable(batch, decision.checkpoint)).await?;
                if t == Transition::Sleep
                    && let Some(due) = Due::timer_of(&self.ctx)
                {
                    self.shell.coord.arm(&self.env.thread, due);
                }
                Ok(StepEnd::Exit(Exit::Status(self.ctx.meta.status)))
            }
            Next::Stop(t, reason) => {
                let completion = decision.checkpoint;
                Ok(StepEnd::Exit(self.finish_with(t, &reason, now, completion).await?))
            }
            Next::Restore => Ok(match Box::pin(self.restore_and_retry(now)).await? {
                Some(exit) => StepEnd::Exit(exit),
                None => StepEnd::Continue,
            }),
        }
    }

    /// [`Runner::commit`], then waits until it (and every batch before it) is durable: for the
    /// batches that park or end the thread, which is then reported.
    pub(super) async fn commit_durable(
        &mut self,
        batch: Batch,
        checkpoint: Option<CheckpointPlan>,
    ) -> Result<(), Error> {
        self.commit(batch, checkpoint, None, self.now()).await?;
        self.env.settle().await
    }

    /// Submits the emitted events (plus `batch`'s operations) as one atomic batch, with a
    /// checkpoint of the resulting context when `checkpoint` is set, without waiting for its
    /// commit (see [`crate::exec::pipeline`]). `step` is the step the batch closes, reported to the
    /// step hook once durable; `now` is the engine clock's time the batch is made at (a step's
    /// commit uses the time its end was decided at: one clock read fewer a step).
    ///
    /// The batch is made when this is called, and the future only submits it: an `async fn`
    /// held the batch and the checkpoint plan twice (as its arguments and as its locals) beside
    /// the submission, and every step's future held that.
    pub(super) fn commit(
        &mut self,
        batch: Batch,
        checkpoint: Option<CheckpointPlan>,
        step: Option<u64>,
        now: u64,
    ) -> impl std::future::Future<Output = Result<(), Error>> + Send + '_ {
        let sealed = self.sealed(batch, checkpoint, now);
        let pipeline = &self.env.pipeline;
        async move {
            let (batch, first_seq) = sealed?;
            pipeline.submit_step(batch, now, first_seq, step).await
        }
    }

    /// `batch` as [`Runner::commit`] submits it: with the emitted events, the thread's record,
    /// and the checkpoint `checkpoint` asks for; and the seq of its first event.
    fn sealed(
        &mut self,
        mut batch: Batch,
        checkpoint: Option<CheckpointPlan>,
        now: u64,
    ) -> Result<(Batch, u64), Error> {
        let done = self.ctx.meta.step;
        if let Some(plan) = &checkpoint {
            let description = plan.description(done);
            self.emit(
                Body::CheckpointCreated { kind: plan.kind, description, checkpoint: None },
                now,
            )?;
        }
        let first_seq = self.ctx.meta.seq + 1 - self.emitted.len() as u64;
        batch.events.reserve(self.emitted.len());
        // Drained, not taken: the next step's events reuse the vector.
        for (body, at) in self.emitted.drain(..) {
            codec::push_event(&mut batch, &self.env.thread, &body, at)?;
        }
        if let Some(plan) = checkpoint {
            batch.checkpoints.push(NewCheckpoint {
                thread: self.env.thread.clone(),
                workflow: self.record.workflow.clone(),
                kind: plan.kind,
                snapshot: self.ctx.snapshot_json()?,
                meta: plan.meta(done),
                created_at_ms: now,
            });
            self.last_checkpoint_ms = now;
        }
        self.record.status = self.ctx.meta.status;
        self.record.labels.clone_from(&self.ctx.meta.labels); // moved by labels_changed
        self.record.updated_at_ms = now;
        if let Some(wake) = crate::coord::wake_hint(&self.record, Some(&self.ctx)) {
            batch.wakes.push((self.env.thread.clone(), wake));
        }
        // The summary is made for the batch's copy only, and the lease is the store's to keep (an
        // upsert leaves it as stored, see `begin`): neither is copied from the runner's record.
        let mut record = self.record.clone();
        record.summary = crate::core::summary::summary_bytes(&self.ctx);
        batch.threads.push(record);
        Ok((batch, first_seq))
    }
}
