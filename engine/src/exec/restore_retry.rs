//! The recovery strategy `restore_and_retry` on the runner's side: after the failed step's
//! events (with `recovery_applied`) are durable, the thread is rolled back in place to its
//! latest checkpoint (`rolled_back`, carrying that checkpoint's context, as
//! `Engine::rollback` writes it) and the runner goes on from there. The checkpoint is found by
//! restore's own entry (`Restore::at_checkpoint`), so a damaged latest one is skipped for an
//! older intact one as in every restore. No intact checkpoint: the thread fails.

use cairn_storage::Batch;

use super::fetch;
use super::runner::{Exit, Runner};
use crate::core::event::Body;
use crate::core::restore::{Origin, Restore};
use crate::core::status::Transition;
use crate::error::Error;

impl Runner {
    /// Rolls the thread back to its latest intact checkpoint after a failure whose strategy is
    /// `restore_and_retry`; `Some` exit when there is none to go back to (the thread fails).
    ///
    /// # Errors
    /// Storage errors; [`Error::Record`] if the log does not fold.
    pub(super) async fn restore_and_retry(&mut self, now: u64) -> Result<Option<Exit>, Error> {
        // The failure and its recovery first, durably: the checkpoint read next must be one
        // this thread really wrote before it.
        self.commit_durable(Batch::default(), None).await?;
        let (store, thread) = (self.shell.store.clone(), self.env.thread.clone());
        let entry = || Restore::at_checkpoint(&self.env.wf, thread.clone(), None);
        let restored = fetch::restored(store.as_ref(), &thread, entry).await?;
        let Origin::Checkpoint { id, seq, .. } = restored.from else {
            let why = "a node failed and there is no checkpoint to restore";
            return Ok(Some(self.finish(Transition::Fail, why, now).await?));
        };
        let body = Body::RolledBack {
            checkpoint: id,
            to_seq: seq,
            reason: "recovery: restore and retry".into(),
            snapshot: serde_json::to_value(restored.ctx.snapshot()?)?,
        };
        self.emit(body, now)?;
        self.commit(Batch::default(), None, None, self.now()).await?;
        Ok(None)
    }
}
