//! Checkpoints written from outside a runner: on demand (manual) and at a migration.
//!
//! A parked thread has no runner, so these writes claim the thread in-process (no runner can
//! start meanwhile), guard on its status in storage, and append one `checkpoint_created` event
//! with the checkpoint in the same batch, exactly as a runner does: the snapshot is the context
//! after that event, so restore from it equals the fold through it.

use cairn_storage::{
    Batch, CheckpointId, CheckpointKind, CheckpointMeta, Guard, NewCheckpoint, ThreadId,
    ThreadRecord, ThreadStatus,
};

use crate::api::engine::Engine;
use crate::core::codec;
use crate::core::event::Body;
use crate::core::thread_ctx::{Snapshot, ThreadCtx};
use crate::error::Error;

impl Engine {
    /// Writes a manual checkpoint of a thread that no runner drives (paused, waiting, sleeping,
    /// blocked, parked by recovery, or ended), with the given metadata (tags, description,
    /// custom fields), and returns its id.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::WrongStatus`] while a runner drives the thread;
    /// [`Error::UnknownWorkflow`] if its workflow is not registered (the state at its last seq
    /// needs the reducer); storage errors (limits of the metadata, a concurrent status change).
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
        let record = self.thread_record(&id)?;
        let last = record.last.map_or(0, |b| b.seq.0);
        let ctx = self.restore_at(&id, last)?;
        let description = if meta.description.is_empty() {
            "manual checkpoint".to_owned()
        } else {
            meta.description.clone()
        };
        self.write_parked_checkpoint(record, ctx, CheckpointKind::Manual, description, meta, |s| {
            Ok(s)
        })
        .await
    }

    /// Appends `checkpoint_created` and a checkpoint of the context after it to a thread no
    /// runner drives. `reshape` may change the snapshot before it is stored (a migration puts
    /// the new state and workflow there); the thread record takes the snapshot's workflow.
    pub(crate) async fn write_parked_checkpoint(
        &self,
        mut record: ThreadRecord,
        mut ctx: ThreadCtx,
        kind: CheckpointKind,
        description: String,
        meta: CheckpointMeta,
        reshape: impl FnOnce(Snapshot) -> Result<Snapshot, Error>,
    ) -> Result<CheckpointId, Error> {
        let id = record.id.clone();
        let last = record.last.map_or(0, |b| b.seq.0);
        if ctx.meta.seq != last {
            return Err(Error::Invalid(format!(
                "thread {id} moved on (seq {last}) while its state at seq {} was computed",
                ctx.meta.seq
            )));
        }
        let now = self.clock().now_ms();
        let body = Body::CheckpointCreated { kind, description };
        ctx.apply(last + 1, now, &body)?;
        let snapshot = reshape(ctx.snapshot()?)?;
        let mut batch = Batch::default();
        codec::push_event(&mut batch, &id, &body, now)?;
        batch.checkpoints.push(NewCheckpoint {
            thread: id.clone(),
            workflow: snapshot.meta.workflow.clone(),
            kind,
            snapshot: serde_json::to_vec(&snapshot)?,
            meta,
            created_at_ms: now,
        });
        record.workflow = snapshot.meta.workflow.clone();
        record.updated_at_ms = now;
        let expected = record.status;
        batch.threads.push(record);
        batch.guards.push(Guard::Status { thread: id.clone(), expected });
        self.claim_parked(&id).await?;
        // Under the claim no runner of this process can start; the thread must still be where
        // its state was computed.
        let result = async {
            let now_last = self.thread_record(&id)?.last.map_or(0, |b| b.seq.0);
            if now_last != last {
                return Err(Error::Invalid(format!("thread {id} moved on to seq {now_last}")));
            }
            Ok(self.store().append(batch)?.wait().await?)
        }
        .await;
        self.shell.coord.release(&id);
        let appended = result?;
        appended
            .checkpoints
            .first()
            .copied()
            .ok_or_else(|| Error::Invalid(format!("storage stored no checkpoint for thread {id}")))
    }
}

impl Engine {
    /// Claims a parked thread for a write from outside a runner. A runner that has just
    /// committed the step that parked the thread still holds its claim for a moment (its commit
    /// is visible before it lets go), so while the stored status is a parked one this waits for
    /// it; a thread whose stored status is Running is being driven: [`Error::WrongStatus`].
    pub(crate) async fn claim_parked(&self, id: &ThreadId) -> Result<(), Error> {
        let parked =
            || matches!(self.store().thread(id), Ok(Some(r)) if r.status != ThreadStatus::Running);
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
