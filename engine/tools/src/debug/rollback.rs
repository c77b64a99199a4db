//! Rollback: a thread restored in place to one of its earlier checkpoints.
//!
//! Unlike a fork (a new thread), a rollback moves the thread itself back: one batch appends
//! `rolled_back` (carrying the checkpoint's context, so the fold needs nothing else), a status
//! change to Paused when the thread was not paused already, `checkpoint_created` and a
//! checkpoint of the context after them (restores start from it). Nothing is erased: the
//! events between the checkpoint and the rollback stay in the log, and time travel still shows
//! them. The thread goes on from the checkpoint's state when it is resumed.

use cairn_storage::{CheckpointId, CheckpointKind, CheckpointMeta, ThreadId, ThreadStatus};

use crate::Operator;
use cairn::admin::{self, ParkedCheckpoint};
use cairn::error::Error;
use cairn::event::Body;
use cairn::status::{Transition, transition};
use cairn_core::checkpoint_plan::STEP_FIELD;
use cairn_core::restore::from_checkpoint;

/// The tag of the checkpoint a rollback writes.
pub const ROLLBACK_TAG: &str = "rollback";

/// The custom field of a rollback's checkpoint naming the checkpoint it went back to.
pub const ROLLED_BACK_TO_FIELD: &str = "rolled_back_to";

impl Operator {
    /// Rolls `thread` back in place to its checkpoint `to` and leaves it Paused (resume it to
    /// go on from there); returns the id of the checkpoint the rollback wrote.
    ///
    /// The thread must be parked and not ended: paused, waiting for input, sleeping or blocked
    /// (an ended thread's status is final; fork it from the checkpoint instead). A durable
    /// timer it slept on no longer wakes it (it is Paused); the checkpoint's own wait, if it
    /// was taken during one, is what a resume goes back into.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::WrongStatus`] for a running or ended thread;
    /// [`Error::Invalid`] if `to` does not exist, is another thread's, or belongs to another
    /// version of the workflow (a migration came between: fork from it instead);
    /// [`Error::UnknownWorkflow`]; [`Error::Record`] if the checkpoint is damaged; storage
    /// errors (a concurrent change of the thread, a snapshot over `PAYLOAD_BYTES_MAX`).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine, good: cairn::storage::CheckpointId) -> Result<(), cairn::Error> {
    /// cairn_tools::Operator::new(&engine).rollback("t1", good, "the plan went wrong after this").await?;
    /// engine.resume("t1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn rollback(
        &self,
        thread: &str,
        to: CheckpointId,
        reason: &str,
    ) -> Result<CheckpointId, Error> {
        let id = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &id).await?;
        let status = record.status;
        if !matches!(
            status,
            ThreadStatus::Paused
                | ThreadStatus::WaitingInput
                | ThreadStatus::Sleeping
                | ThreadStatus::Blocked
        ) {
            return Err(Error::WrongStatus {
                thread: id.to_string(),
                status,
                detail: "only a parked thread that has not ended can be rolled back".into(),
            });
        }
        let cp = self
            .engine
            .store()
            .checkpoint(to)
            .await?
            .ok_or_else(|| Error::Invalid(format!("no checkpoint {to} in this database")))?;
        if cp.thread != id {
            return Err(Error::Invalid(format!(
                "checkpoint {to} is of thread {}, not {id}",
                cp.thread
            )));
        }
        if cp.workflow != record.workflow {
            return Err(Error::Invalid(format!(
                "checkpoint {to} is of {} v{}, the thread now runs v{}: fork from it instead",
                cp.workflow.id, cp.workflow.version, record.workflow.version
            )));
        }
        let wf = admin::workflow_for(&self.engine, &record)?;
        let target = from_checkpoint(&wf, &id, &cp)?;
        let last = record.last.map_or(0, |b| b.seq.0);
        let ctx = admin::restore_at(&self.engine, &id, last).await?;
        let reason = if reason.is_empty() { "rolled back".to_owned() } else { reason.to_owned() };
        let mut preface = vec![Body::RolledBack {
            checkpoint: to,
            to_seq: cp.covers.seq.0,
            reason: reason.clone(),
            snapshot: serde_json::to_value(target.snapshot()?)?,
        }];
        if status != ThreadStatus::Paused {
            let to_status = transition(status, Transition::Pause)
                .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
            let why = format!("rolled back to checkpoint {to}");
            preface.push(Body::StatusChanged { from: status, to: to_status, reason: why });
        }
        let mut meta = CheckpointMeta {
            creator: "rollback".into(),
            description: format!("rolled back to checkpoint {to}: {reason}"),
            tags: vec![ROLLBACK_TAG.to_owned()],
            ..CheckpointMeta::default()
        };
        meta.custom.insert(ROLLED_BACK_TO_FIELD.to_owned(), to.to_string());
        meta.custom.insert(STEP_FIELD.to_owned(), target.meta.step.to_string());
        let description = meta.description.clone();
        let checkpoint = ParkedCheckpoint { kind: CheckpointKind::Manual, description, meta };
        let written =
            admin::write_parked(&self.engine, record, ctx, preface, checkpoint, Ok).await?;
        admin::status_changed(&self.engine, &id, ThreadStatus::Paused).await;
        Ok(written)
    }
}
