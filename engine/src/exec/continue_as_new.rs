//! Continue-as-new in the runner: the batch that ends a thread continued as new also creates
//! its successor (`core::continuation`), and the successor is driven once that batch is durable.

use cairn_storage::{Batch, ThreadId, ThreadStatus};

use super::runner::Runner;
use super::start::NewThread;
use crate::core::codec;
use crate::core::event::{Body, ThreadPolicy};
use crate::error::Error;

/// Why a successor is driven (its first status change's reason).
const CONTINUED: &str = "continued from its predecessor";

impl Runner {
    /// Adds the creation of the successor this ending thread continues as (its
    /// `continued_as_new` among the emitted events) to `batch`, the thread's last: the
    /// successor's `thread_created` and `continued_from`, its record, and the guard that it
    /// does not exist. The successor runs the thread's workflow with its labels, budgets and
    /// permissions (not its deadline). `None` for a thread that does not continue.
    ///
    /// # Errors
    /// [`Error::Invalid`] if the successor's id is taken; storage errors.
    pub(super) async fn successor(
        &mut self,
        batch: &mut Batch,
        now: u64,
    ) -> Result<Option<ThreadId>, Error> {
        if self.ctx.meta.status != ThreadStatus::Completed {
            return Ok(None);
        }
        let Some((id, input)) = self.emitted.iter().rev().find_map(|(body, _)| match body {
            Body::ContinuedAsNew { thread, input } => Some((thread.clone(), input.clone())),
            _ => None,
        }) else {
            return Ok(None);
        };
        let id = ThreadId::new(id)?;
        let labels = self.ctx.meta.labels.clone();
        let policy = ThreadPolicy { deadline_at_ms: None, ..self.ctx.meta.policy.clone() };
        let wf = &self.env.wf;
        let new = NewThread { labels, policy, ..NewThread::new(wf, &id, input) };
        if !super::start::prepare_in(&self.shell, new, batch).await? {
            return Err(Error::Invalid(format!(
                "thread {} continues as {id}, but a thread {id} exists",
                self.env.thread
            )));
        }
        let from = Body::ContinuedFrom { thread: self.env.thread.to_string() };
        codec::push_event(batch, &id, &from, now)?;
        Ok(Some(id))
    }

    /// Drives the successor created with the thread's last batch (now durable).
    pub(super) fn drive_successor(&self, successor: Option<ThreadId>) {
        if let Some(id) = successor {
            super::drive::spawn_drive(&self.shell, id, CONTINUED);
        }
    }
}
