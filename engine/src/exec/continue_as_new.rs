//! Continue-as-new in the runner: the batch that ends a thread continued as new also creates
//! its successor (`core::continuation`), and the successor is driven once that batch is durable.
//! A thread that ran on a queue puts its successor in line on the same queue and key, with its
//! priority (not its dedup key): the queue's limits hold across the chain, and the threads that
//! waited meanwhile go first.

use cairn_storage::{Batch, Enqueue, QueueOp, ThreadId, ThreadStatus};

use super::runner::Runner;
use super::start::NewThread;
use crate::core::codec;
use crate::core::event::{Body, ThreadPolicy};
use crate::error::Error;

/// Why a successor is driven (its first status change's reason).
const CONTINUED: &str = "continued from its predecessor";

/// The successor a thread's last batch creates.
pub(super) struct Successor {
    id: ThreadId,
    /// Put in line on its predecessor's queue (admission drives it), not driven at once.
    queued: bool,
}

impl Runner {
    /// Adds the creation of the successor this ending thread continues as (its
    /// `continued_as_new` among the emitted events) to `batch`, the thread's last: the
    /// successor's `thread_created` and `continued_from`, its record, and the guard that it
    /// does not exist. The successor runs the thread's workflow with its labels, budgets and
    /// permissions (not its deadline), in line on the thread's queue if it ran on one. `None`
    /// for a thread that does not continue.
    ///
    /// # Errors
    /// [`Error::Invalid`] if the successor's id is taken; storage errors.
    pub(super) async fn successor(
        &mut self,
        batch: &mut Batch,
        now: u64,
    ) -> Result<Option<Successor>, Error> {
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
        let policy = ThreadPolicy {
            deadline_at_ms: None,
            start_at_ms: None,
            ..self.ctx.meta.policy.clone()
        };
        let wf = &self.env.wf;
        let new = NewThread { labels, policy, pin: false, ..NewThread::new(wf, &id, input) };
        if !super::start::prepare_in(&self.shell, new, batch).await? {
            return Err(Error::Invalid(format!(
                "thread {} continues as {id}, but a thread {id} exists",
                self.env.thread
            )));
        }
        let from = Body::ContinuedFrom { thread: self.env.thread.to_string() };
        codec::push_event(batch, &id, &from, now)?;
        let member = self.shell.store.queue_member(&self.env.thread).await?;
        if let Some(member) = &member {
            batch.threads.iter_mut().filter(|r| r.id == id).for_each(|r| {
                r.status = ThreadStatus::Queued;
            });
            batch.queues.push(QueueOp::Enqueue(Enqueue {
                priority: member.priority(),
                continuation: true,
                ..Enqueue::new(id.clone(), member.queue.clone(), member.key.clone(), now)
            }));
        }
        Ok(Some(Successor { id, queued: member.is_some() }))
    }

    /// Drives the successor created with the thread's last batch (now durable), or, put in
    /// line, wakes the admitter.
    pub(super) fn drive_successor(&self, successor: Option<Successor>) {
        match successor {
            Some(Successor { queued: true, .. }) => {
                self.shell.queue_waiting.store(true, std::sync::atomic::Ordering::Relaxed);
                self.shell.admit.notify_one();
            }
            Some(Successor { id, queued: false }) => {
                super::drive::spawn_drive(&self.shell, id, CONTINUED);
            }
            None => {}
        }
    }
}
