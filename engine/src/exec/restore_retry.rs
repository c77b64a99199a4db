//! The recovery strategy `restore_and_retry` on the runner's side: after the failed step's
//! events (with `recovery_applied`) are durable, the thread is rolled back in place to its
//! latest checkpoint (`rolled_back`, carrying that checkpoint's context, as
//! `Engine::rollback` writes it) and the runner goes on from there. No checkpoint: the thread
//! fails.

use cairn_storage::{Batch, Seq};

use super::runner::{Exit, Runner};
use crate::core::event::Body;
use crate::core::restore::from_checkpoint;
use crate::core::status::Transition;
use crate::error::Error;

impl Runner {
    /// Rolls the thread back to its latest checkpoint after a failure whose strategy is
    /// `restore_and_retry`; `Some` exit when there is none to go back to (the thread fails).
    ///
    /// # Errors
    /// Storage errors; [`Error::Record`] for a damaged checkpoint.
    pub(super) async fn restore_and_retry(&mut self, now: u64) -> Result<Option<Exit>, Error> {
        // The failure and its recovery first, durably: the checkpoint read next must be one
        // this thread really wrote before it.
        self.commit_durable(Batch::default(), None).await?;
        let thread = self.env.thread.clone();
        let latest = self.shell.store.latest_checkpoint_at_or_before(&thread, Seq(u64::MAX));
        let Some(cp) = latest.await? else {
            let why = "a node failed and there is no checkpoint to restore";
            return Ok(Some(self.finish(Transition::Fail, why, now).await?));
        };
        let target = from_checkpoint(&self.env.wf, &thread, &cp)?;
        let body = Body::RolledBack {
            checkpoint: cp.id,
            to_seq: cp.covers.seq.0,
            reason: "recovery: restore and retry".into(),
            snapshot: serde_json::to_value(target.snapshot()?)?,
        };
        self.emit(body, now)?;
        self.commit(Batch::default(), None, None).await?;
        Ok(None)
    }
}
