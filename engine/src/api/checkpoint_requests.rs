//! Checkpoints asked for at run time: a periodic checkpoint per thread with the caller's
//! metadata ([`Engine::checkpoint_every`], [`Engine::cancel_periodic_checkpoint`]), and one
//! the next time the thread completes a node ([`Engine::checkpoint_at_node`]).
//!
//! Each is one `checkpoint_requested` event in the thread's log (the fold keeps the requests in
//! force: `cairn_core::checkpoint_requests`), written like a manual checkpoint: by the thread's
//! runner at its next step boundary when one of this engine drives it, else to the parked
//! thread under its claim, guarded on its status. The call returns once the event is durable:
//! the request then survives any crash, and the node's one is used up by the node's completion
//! (in the same fold), so no crash and no second call takes its checkpoint twice.

use cairn_storage::{CheckpointKind, CheckpointMeta, NewCheckpoint, ThreadId, ThreadRecord};

use super::checkpoint::busy;
use super::engine::Engine;
use crate::coord::Asked;
use crate::core::checkpoint_requests::CheckpointRequest;
use crate::core::event::Body;
use crate::error::Error;
use crate::exec::parked;

impl Engine {
    /// Asks for a periodic checkpoint of a thread every `interval_ms` of the engine's clock,
    /// each stored with `meta`; replaces an earlier periodic request of the thread. Counted from
    /// the thread's latest checkpoint, and taken (as the engine's own periodic checkpoints) after
    /// a step the thread goes on from; besides any periodic policy of the engine or workflow.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::WrongStatus`] for a finished thread (or one driven
    /// elsewhere, as [`Engine::checkpoint_now`]); [`Error::Invalid`] for a zero interval;
    /// storage errors (limits of the metadata, a failed commit).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let meta = cairn::storage::CheckpointMeta { creator: "ops".into(), ..Default::default() };
    /// engine.checkpoint_every("t1", 60_000, meta).await?;
    /// engine.cancel_periodic_checkpoint("t1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn checkpoint_every(
        &self,
        thread: &str,
        interval_ms: u64,
        meta: CheckpointMeta,
    ) -> Result<(), Error> {
        if interval_ms == 0 {
            return Err(Error::Invalid(
                "a periodic checkpoint's interval must be over 0 ms".into(),
            ));
        }
        self.request_checkpoint(thread, CheckpointRequest::Every { interval_ms, meta }).await
    }

    /// Cancels the periodic checkpoint [`Engine::checkpoint_every`] asked for (the engine's and
    /// the workflow's own periodic policies stay). Cancelling none is no error.
    ///
    /// # Errors
    /// As [`Engine::checkpoint_every`].
    pub async fn cancel_periodic_checkpoint(&self, thread: &str) -> Result<(), Error> {
        self.request_checkpoint(thread, CheckpointRequest::CancelEvery).await
    }

    /// Asks for a checkpoint with `meta` the next time the thread completes `node` (with the
    /// step that completes it; once). Replaces an earlier request for the node. A step that
    /// ends the thread takes its completion checkpoint instead.
    ///
    /// # Errors
    /// As [`Engine::checkpoint_every`]; [`Error::Invalid`] for a node the thread's workflow
    /// does not have; [`Error::UnknownWorkflow`] if that workflow is not registered.
    pub async fn checkpoint_at_node(
        &self,
        thread: &str,
        node: &str,
        meta: CheckpointMeta,
    ) -> Result<(), Error> {
        let request = CheckpointRequest::AtNode { node: node.to_owned(), meta };
        self.request_checkpoint(thread, request).await
    }

    /// Checks `request` against the thread and records it (the module's doc).
    async fn request_checkpoint(
        &self,
        thread: &str,
        request: CheckpointRequest,
    ) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let record = super::admin::thread_record(self.store().as_ref(), &id).await?;
        self.check_request(&record, &request)?;
        let parked = || self.request_parked(&id, &request);
        self.at_boundary_or_parked(&id, &Asked::Request(Box::new(request.clone())), parked).await?;
        Ok(())
    }

    /// Refuses a request of a finished thread, of a node its workflow does not have, or with
    /// metadata storage would refuse.
    fn check_request(
        &self,
        record: &ThreadRecord,
        request: &CheckpointRequest,
    ) -> Result<(), Error> {
        if record.status.is_terminal() {
            return Err(finished(record));
        }
        let meta = match request {
            CheckpointRequest::Every { meta, .. } => meta,
            CheckpointRequest::CancelEvery => return Ok(()),
            CheckpointRequest::AtNode { node, meta } => {
                let wf = self.shell.registry.workflow_for(record)?;
                if wf.node_id(node).is_none() {
                    return Err(Error::Invalid(format!(
                        "workflow {} v{} has no node {node:?}",
                        wf.id(),
                        wf.version()
                    )));
                }
                meta
            }
        };
        NewCheckpoint {
            thread: record.id.clone(),
            workflow: record.workflow.clone(),
            kind: CheckpointKind::Periodic,
            snapshot: Vec::new(),
            meta: meta.clone(),
            created_at_ms: 0,
        }
        .check_limits()?;
        Ok(())
    }

    /// Records `request` in the log of a thread nobody drives.
    async fn request_parked(
        &self,
        id: &ThreadId,
        request: &CheckpointRequest,
    ) -> Result<Option<cairn_storage::CheckpointId>, Error> {
        let record = super::admin::thread_record(self.store().as_ref(), id).await?;
        if record.status.is_terminal() {
            return Err(finished(&record));
        }
        if record.status == cairn_storage::ThreadStatus::Running {
            // Driven by another engine, or left by a crash before recovery resumes it.
            return Err(busy(id));
        }
        let body = Body::CheckpointRequested { request: request.clone() };
        parked::write_parked(&self.shell, id, record.status, vec![body], None).await?;
        Ok(None)
    }
}

/// The refusal of a request of a finished thread.
fn finished(record: &ThreadRecord) -> Error {
    Error::WrongStatus {
        thread: record.id.to_string(),
        status: record.status,
        detail: "it has finished: no checkpoint is taken of it any more".into(),
    }
}
