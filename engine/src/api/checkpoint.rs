//! Manual checkpoints (of a running thread through its runner, see `exec/checkpoint_asks.rs`),
//! and checkpoints written from outside a runner: of a parked thread, and at a migration.
//!
//! A parked thread has no runner, so these writes claim the thread in-process (no runner can
//! start meanwhile), guard on its status in storage, and append one `checkpoint_created` event
//! with the checkpoint in the same batch, exactly as a runner does: the snapshot is the context
//! after that event, so restore from it equals the fold through it.

use cairn_storage::{
    Batch, CheckpointId, CheckpointKind, CheckpointMeta, Guard, NewCheckpoint, ThreadId,
    ThreadRecord, ThreadStatus,
};

use tokio::sync::oneshot;

use crate::api::engine::Engine;
use crate::coord::{Asked, CheckpointAsk};
use crate::core::checkpoint_plan::manual_description;
use crate::core::codec;
use crate::core::event::Body;
use crate::core::thread_ctx::{Snapshot, ThreadCtx};
use crate::error::Error;

/// Rounds of [`Engine::checkpoint_now`]: a round ends when the thread's runner answers or goes
/// away; only a thread woken again between rounds needs another, and a few cover any such race.
const CHECKPOINT_ROUNDS_MAX: usize = 4;

impl Engine {
    /// Writes a manual checkpoint of a thread with the given metadata (tags, description,
    /// custom fields, stored as given) and returns its id once it is durable.
    ///
    /// A thread a runner of this engine drives is checkpointed by that runner at its next step
    /// boundary (after the step under way, never inside it); a thread nobody drives (paused,
    /// waiting, sleeping, blocked, parked by recovery, or ended) is checkpointed at once. A
    /// runner that parks or ends the thread before its next boundary leaves it to the parked
    /// path, so either way the checkpoint is of a state the thread really had.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::WrongStatus`] while another process drives the
    /// thread (on a shared database) or it is Running without a runner here (left by a crash,
    /// before recovery resumes it); [`Error::LimitExceeded`] when
    /// 16 asks already wait for the thread's next step;
    /// [`Error::UnknownWorkflow`] if the workflow of a parked thread is not registered (its
    /// state needs the reducer); storage errors (limits of the metadata, a failed commit).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let meta = cairn::storage::CheckpointMeta {
    ///     creator: "alice".into(),
    ///     description: "before trying the other plan".into(),
    ///     tags: vec!["bookmark".into()],
    ///     ..Default::default()
    /// };
    /// let id = engine.checkpoint_now("t1", meta).await?;
    /// # Ok(()) }
    /// ```
    pub async fn checkpoint_now(
        &self,
        thread: &str,
        meta: CheckpointMeta,
    ) -> Result<CheckpointId, Error> {
        let id = ThreadId::new(thread)?;
        let record = crate::exec::fetch::record(self.store().as_ref(), &id).await?;
        // Refuse metadata storage would refuse before a runner tries to commit it.
        NewCheckpoint {
            thread: id.clone(),
            workflow: record.workflow.clone(),
            kind: CheckpointKind::Manual,
            snapshot: Vec::new(),
            meta: meta.clone(),
            created_at_ms: 0,
        }
        .check_limits()?;
        let parked = || async { self.checkpoint_parked(&id, meta.clone()).await.map(Some) };
        let written = self.at_boundary_or_parked(&id, &Asked::Now(meta.clone()), parked).await?;
        written.ok_or_else(|| Error::Invalid(format!("no checkpoint of thread {id} was written")))
    }

    /// Hands `what` to the runner of this engine that drives `id`, for its next step boundary,
    /// and waits for its answer; when none drives it, does `parked` (a write to the parked
    /// thread) instead. Each round ends in an answer, or in the runner going away (then the
    /// thread is parked or ended, and the next round writes it here); a thread that keeps being
    /// driven again in between (woken, resumed) is what bounds the rounds.
    ///
    /// # Errors
    /// The runner's or `parked`'s; [`Error::LimitExceeded`] when
    /// [`crate::limits::CHECKPOINT_ASKS_MAX`] asks already wait for the thread's next step;
    /// [`Error::WrongStatus`] when it is driven again at every round.
    pub(crate) async fn at_boundary_or_parked<F, Fut>(
        &self,
        id: &ThreadId,
        what: &Asked,
        parked: F,
    ) -> Result<Option<CheckpointId>, Error>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Option<CheckpointId>, Error>>,
    {
        for _ in 0..CHECKPOINT_ROUNDS_MAX {
            let (reply, answer) = oneshot::channel();
            let ask = CheckpointAsk { what: what.clone(), reply };
            match self.shell.coord.ask_checkpoint(id, ask) {
                Ok(()) => match answer.await {
                    Ok(result) => return result,
                    Err(_) => continue,
                },
                Err(_) if self.shell.coord.is_driven(id) => {
                    return Err(Error::LimitExceeded {
                        limit: "checkpoint asks waiting for one thread's next step",
                        value: crate::limits::CHECKPOINT_ASKS_MAX as u64 + 1,
                        max: crate::limits::CHECKPOINT_ASKS_MAX as u64,
                    });
                }
                Err(_) => {}
            }
            match parked().await {
                Err(Error::WrongStatus { .. }) if self.shell.coord.is_driven(id) => continue,
                other => return other,
            }
        }
        Err(busy(id))
    }

    /// [`Engine::checkpoint_now`] of a thread nobody drives.
    async fn checkpoint_parked(
        &self,
        id: &ThreadId,
        meta: CheckpointMeta,
    ) -> Result<CheckpointId, Error> {
        let record = crate::exec::fetch::record(self.store().as_ref(), id).await?;
        let last = record.last.map_or(0, |b| b.seq.0);
        let ctx = super::versioned::restore_at(self, id, last).await?;
        let description = manual_description(&meta);
        let checkpoint = ParkedCheckpoint { kind: CheckpointKind::Manual, description, meta };
        self.write_parked(record, ctx, Vec::new(), checkpoint, Ok).await
    }

    /// Appends `preface` (each applied to the context in turn: a rollback's events), then
    /// `checkpoint_created` and a checkpoint of the context after them, to a thread no runner
    /// drives. `reshape` may change the snapshot before it is stored (a migration puts the new
    /// state and workflow there). The record takes the snapshot's workflow and the context's
    /// status and summary; the batch is guarded on the status the record had.
    pub(crate) async fn write_parked(
        &self,
        mut record: ThreadRecord,
        mut ctx: ThreadCtx,
        preface: Vec<Body>,
        checkpoint: ParkedCheckpoint,
        reshape: impl FnOnce(Snapshot) -> Result<Snapshot, Error>,
    ) -> Result<CheckpointId, Error> {
        let ParkedCheckpoint { kind, description, meta } = checkpoint;
        let id = record.id.clone();
        let last = record.last.map_or(0, |b| b.seq.0);
        if ctx.meta.seq != last {
            return Err(Error::Invalid(format!(
                "thread {id} moved on (seq {last}) while its state at seq {} was computed",
                ctx.meta.seq
            )));
        }
        let now = self.clock().now_ms();
        let expected = record.status;
        // Only a checkpoint that changes the thread (a rollback's events, a migration's new
        // workflow) updates it; a manual one changes no usage, budget or time of it.
        let moves = !preface.is_empty() || kind != CheckpointKind::Manual;
        let mut bodies = preface;
        bodies.push(Body::CheckpointCreated { kind, description, checkpoint: None });
        let mut batch = Batch::default();
        for (seq, body) in (last + 1..).zip(&bodies) {
            ctx.apply(seq, now, body)?;
            codec::push_event(&mut batch, &id, body, now)?;
        }
        let snapshot = reshape(ctx.snapshot()?)?;
        batch.checkpoints.push(NewCheckpoint {
            thread: id.clone(),
            workflow: snapshot.meta.workflow.clone(),
            kind,
            snapshot: serde_json::to_vec(&snapshot)?,
            meta,
            created_at_ms: now,
        });
        record.workflow = snapshot.meta.workflow.clone();
        record.status = ctx.meta.status;
        record.summary = crate::core::summary::summary_bytes(&ctx);
        if moves {
            record.updated_at_ms = now;
        }
        batch.threads.push(record);
        batch.guards.push(Guard::Status { thread: id.clone(), expected });
        self.claim_parked(&id).await?;
        // Under the claim no runner of this process can start; the thread must still be where
        // its state was computed.
        let result = async {
            let now_last = crate::exec::fetch::record(self.store().as_ref(), &id)
                .await?
                .last
                .map_or(0, |b| b.seq.0);
            if now_last != last {
                return Err(Error::Invalid(format!("thread {id} moved on to seq {now_last}")));
            }
            Ok(self.write(batch).await?)
        }
        .await;
        self.shell.coord.release(&id);
        let appended = result?;
        self.shell.metrics.checkpoint(kind);
        appended
            .checkpoints
            .first()
            .copied()
            .ok_or_else(|| Error::Invalid(format!("storage stored no checkpoint for thread {id}")))
    }
}

/// The checkpoint `Engine::write_parked` (and [`super::admin::write_parked`]) writes: kind,
/// event description, stored metadata.
pub struct ParkedCheckpoint {
    /// Its kind (`Manual` for a rollback or a manual checkpoint).
    pub kind: CheckpointKind,
    /// The description of its `checkpoint_created` event.
    pub description: String,
    /// The metadata stored with it (creator, description, tags, custom fields).
    pub meta: CheckpointMeta,
}

impl Engine {
    /// Claims a parked thread for a write from outside a runner. A runner that has just
    /// committed the step that parked the thread still holds its claim for a moment (its commit
    /// is visible before it lets go), so while the stored status is a parked one this waits for
    /// it; a thread whose stored status is Running is being driven: [`Error::WrongStatus`].
    pub(crate) async fn claim_parked(&self, id: &ThreadId) -> Result<(), Error> {
        let store = self.store().as_ref();
        let parked = || -> futures::future::BoxFuture<'_, bool> {
            Box::pin(async move {
                let status = crate::exec::fetch::status(store, id).await;
                matches!(status, Ok(Some(s)) if s != ThreadStatus::Running)
            })
        };
        match self.shell.coord.claim_parked(id, &parked).await {
            Some(_) => Ok(()),
            None => Err(busy(id)),
        }
    }
}

/// The error for a thread a runner drives.
pub(crate) fn busy(id: &ThreadId) -> Error {
    Error::WrongStatus {
        thread: id.to_string(),
        status: ThreadStatus::Running,
        detail: "a runner is driving it".into(),
    }
}
