//! Manual checkpoints of a running thread: the runner takes the asks queued on its `Control`
//! at a step boundary (nothing of a step is in flight in its context then, though earlier
//! steps' batches may still be on their way to disk), writes one `checkpoint_created` event
//! with a checkpoint of the context after it in one batch, waits until that batch (and every
//! batch before it) is durable, and answers each asker with the checkpoint's id.

use cairn_storage::{Batch, Seq};

use super::runner::Runner;
use crate::coord::Control;
use crate::core::checkpoint_plan::CheckpointPlan;
use crate::error::Error;

impl Runner {
    /// Writes and answers every manual checkpoint asked of this thread since the last step
    /// boundary, oldest first.
    ///
    /// # Errors
    /// The commit's errors (the thread then stops as for any failed write; the asker hears
    /// the error in words).
    pub(super) async fn answer_checkpoint_asks(&mut self, control: &Control) -> Result<(), Error> {
        for ask in control.take_checkpoint_asks() {
            let plan = CheckpointPlan::manual(ask.meta);
            let written = self.commit_durable(Batch::default(), Some(plan)).await;
            let (reply, result) = match written {
                Ok(()) => {
                    let seq = Seq(self.ctx.meta.seq);
                    let found = self.shell.store.checkpoint_covering(&self.env.thread, seq).await;
                    match found {
                        Ok(Some(id)) => (Ok(id), Ok(())),
                        Ok(None) => (Err(no_checkpoint(seq)), Ok(())),
                        Err(e) => (Err(Error::Invalid(e.to_string())), Err(e.into())),
                    }
                }
                Err(e) => {
                    (Err(Error::Invalid(format!("the checkpoint was not written: {e}"))), Err(e))
                }
            };
            // The asker may have given up waiting; nothing to do then.
            let _ = ask.reply.send(reply);
            result?;
        }
        Ok(())
    }
}

fn no_checkpoint(seq: Seq) -> Error {
    Error::Invalid(format!("storage stored no checkpoint covering seq {seq}"))
}
