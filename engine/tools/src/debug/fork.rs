//! Forks: a new thread that starts from another thread's state at a seq or checkpoint.
//!
//! The fork's `thread_created` event carries the origin (thread and seq), the origin's frontier,
//! join arrivals and loop visits at that point, and the origin's state as its input; its record
//! names the parent. An optional update is recorded as the fork's first `state_updated` event.
//! Nothing is written to the origin. A fork from a seq inside an open step (a task had started,
//! or the thread waited for input) starts at that step's beginning: the step runs again in full
//! in the fork, since its tasks' recorded results belong to the origin's run.

use cairn_storage::ThreadId;

use super::{ForkFrom, ForkOptions};
use crate::Operator;
use cairn::ThreadHandle;
use cairn::admin;
use cairn::error::Error;
use cairn::event::ForkOrigin;

impl Operator {
    /// Starts a new thread from `thread`'s state at `from`, optionally with `options.update`
    /// applied first, and runs it unless `options.start` is false.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] for a seq outside the thread, a checkpoint of
    /// another thread, an update that does not apply, or a fork id that exists already;
    /// [`Error::UnknownWorkflow`] if the workflow the origin ran at that point is not registered;
    /// [`Error::Invalid`] for a thread imported from a seed-format bundle (it has no Cairn
    /// workflow); storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// use cairn_tools::Operator;
    /// use cairn_tools::debug::{ForkFrom, ForkOptions};
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// // Re-run from seq 12 with a different plan, keeping the original as it was.
    /// let fork = Operator::new(&engine)
    ///     .fork("t1", ForkFrom::Seq(12), ForkOptions::id("t1-b").update(("plan", "B")))
    ///     .await?;
    /// let outcome = fork.finished().await?;
    /// # Ok(()) }
    /// ```
    pub async fn fork(
        &self,
        thread: &str,
        from: ForkFrom,
        options: ForkOptions,
    ) -> Result<ThreadHandle, Error> {
        let origin = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &origin).await?;
        let seq = match from {
            ForkFrom::Seq(seq) => seq,
            ForkFrom::Checkpoint(cp) => {
                let info = self
                    .engine
                    .store()
                    .checkpoint(cp)
                    .await?
                    .ok_or_else(|| Error::Invalid(format!("no checkpoint {}", cp.0)))?;
                if info.thread != origin {
                    return Err(Error::Invalid(format!(
                        "checkpoint {} belongs to thread {}, not {origin}",
                        cp.0, info.thread
                    )));
                }
                info.covers.seq.0
            }
        };
        super::time_travel::check_seq(&record, seq)?;
        if super::is_seed_workflow(&record.workflow) {
            // Said as it is, not as a workflow to register: no build has a seed thread's.
            return Err(Error::Invalid(format!(
                "thread {origin} was imported from a seed-format ({}) bundle and has no Cairn \
                 workflow to fork onto",
                super::SEED_VERSION
            )));
        }
        let wf = admin::workflow_at(&self.engine, &origin, seq).await?;
        let ctx = admin::restore_at(&self.engine, &origin, seq).await?;
        if let Some(update) = &options.update {
            let mut probe = ctx.state.clone_box();
            probe.apply_json(update).map_err(|e| {
                Error::Invalid(format!("the update does not apply to {}'s state: {e}", wf.id()))
            })?;
        }
        // Labels the engine reserves are its own to set: given, nothing is written.
        admin::check_labels(&options.labels)?;
        let id = match &options.thread_id {
            Some(id) => ThreadId::new(id.clone())?,
            None => ThreadId::new(admin::new_thread_id(&self.engine))?,
        };
        if self.engine.store().thread(&id).await?.is_some() {
            return Err(Error::Invalid(format!(
                "thread {id} exists already; a fork needs a new id"
            )));
        }
        // The origin's labels at the fork point (a node may have changed them), less the
        // parent link (a fork is no sub-workflow), under those the options give.
        let mut labels = ctx.meta.labels.clone();
        labels.remove(admin::PARENT_LABEL);
        labels.extend(options.labels);
        let fork = admin::Fork {
            id,
            workflow: &wf,
            origin: ForkOrigin { thread: origin.to_string(), seq },
            ctx: &ctx,
            labels,
            update: options.update,
            start: options.start,
        };
        admin::start_fork(&self.engine, fork).await
    }
}
