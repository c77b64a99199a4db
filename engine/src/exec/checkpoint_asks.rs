//! Manual checkpoints and checkpoint requests of a running thread: the runner takes the asks
//! queued on its `Control` at a step boundary (nothing of a step is in flight in its context
//! then, though earlier steps' batches may still be on their way to disk), writes for each one
//! batch (a manual checkpoint: one `checkpoint_created` event with a checkpoint of the context
//! after it; a request: one `checkpoint_requested` event), waits until that batch (and every
//! batch before it) is durable, and answers the asker.

use cairn_storage::{Batch, CheckpointId, CheckpointMeta, Seq};

use super::runner::Runner;
use crate::coord::{Asked, Control};
use crate::core::checkpoint_plan::CheckpointPlan;
use crate::core::checkpoint_requests::CheckpointRequest;
use crate::core::event::Body;
use crate::error::Error;

impl Runner {
    /// Writes and answers every manual checkpoint and checkpoint request asked of this thread
    /// since the last step boundary, oldest first.
    ///
    /// # Errors
    /// The commit's errors (the thread then stops as for any failed write; the asker hears
    /// the error in words).
    pub(super) async fn answer_checkpoint_asks(&mut self, control: &Control) -> Result<(), Error> {
        for ask in control.take_checkpoint_asks() {
            let (reply, result) = match ask.what {
                // Boxed: asks are rare, and the run loop awaits this at every step.
                Asked::Now(meta) => Box::pin(self.checkpoint_now(meta)).await,
                Asked::Request(request) => Box::pin(self.record_request(*request)).await,
            };
            // The asker may have given up waiting; nothing to do then.
            let _ = ask.reply.send(reply);
            result?;
        }
        Ok(())
    }

    /// A manual checkpoint with `meta`: the answer, and what the runner makes of the write.
    async fn checkpoint_now(&mut self, meta: CheckpointMeta) -> (Answer, Result<(), Error>) {
        let plan = CheckpointPlan::manual(meta);
        match self.commit_durable(Batch::default(), Some(plan)).await {
            Ok(()) => {
                let seq = Seq(self.ctx.meta.seq);
                let found = self.shell.store.checkpoint_covering(&self.env.thread, seq).await;
                match found {
                    Ok(Some(id)) => (Ok(Some(id)), Ok(())),
                    Ok(None) => (Err(no_checkpoint(seq)), Ok(())),
                    Err(e) => (Err(Error::Invalid(e.to_string())), Err(e.into())),
                }
            }
            Err(e) => (Err(not_written("checkpoint", &e)), Err(e)),
        }
    }

    /// A `checkpoint_requested` event: in force from the next step on.
    async fn record_request(&mut self, request: CheckpointRequest) -> (Answer, Result<(), Error>) {
        let now = self.now();
        let written = match self.emit(Body::CheckpointRequested { request }, now) {
            Ok(()) => self.commit_durable(Batch::default(), None).await,
            Err(e) => Err(e),
        };
        match written {
            Ok(()) => (Ok(None), Ok(())),
            Err(e) => (Err(not_written("request", &e)), Err(e)),
        }
    }
}

/// A runner's answer to an ask.
type Answer = Result<Option<CheckpointId>, Error>;

fn not_written(what: &str, e: &Error) -> Error {
    Error::Invalid(format!("the {what} was not written: {e}"))
}

fn no_checkpoint(seq: Seq) -> Error {
    Error::Invalid(format!("storage stored no checkpoint covering seq {seq}"))
}
