//! Controls of threads from outside: cancel, pause, resume, human input, resumable tasks.
//!
//! A running thread gets the request through the coordinator, which hands it to its runner; the
//! runner records the outcome at the next step boundary (cancel reaches the running node at once
//! through its cancellation token). A parked thread is changed directly by a guarded write
//! (`exec/parked.rs`).

use cairn_storage::{ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};
use serde::Serialize;

use super::engine::Engine;
use crate::coord::Due;
use crate::core::event::{Body, TaskKey};
use crate::core::status::Transition;
use crate::core::thread_ctx::Waiting;
use crate::error::Error;
use crate::exec::drive::spawn_drive;
use crate::exec::parked;
use crate::exec::subgraph::child_id;

impl Engine {
    /// Cancels a thread. A running node sees its cancellation token at once and has the grace
    /// period to stop; the thread ends Cancelled, its locks released, with `reason` recorded.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Transition`] if the thread has ended already.
    pub async fn cancel(&self, thread: &str, reason: &str) -> Result<(), Error> {
        parked::end_from_outside(&self.shell, thread, Transition::Cancel, reason).await?;
        self.ended_from_outside(thread);
        Ok(())
    }

    /// Gives up a resumable thread for good: it ends Cancelled.
    ///
    /// # Errors
    /// As [`Engine::cancel`].
    pub async fn abandon(&self, thread: &str) -> Result<(), Error> {
        parked::end_from_outside(&self.shell, thread, Transition::Abandon, "abandoned").await?;
        self.ended_from_outside(thread);
        Ok(())
    }

    /// After `thread` was ended from outside: a parent parked in a select of its end is woken
    /// (a thread its runner ended wakes it from its drive).
    fn ended_from_outside(&self, thread: &str) {
        if let Ok(id) = cairn_storage::ThreadId::new(thread) {
            crate::exec::drive::wake_selecting_parent(&self.shell, &id);
        }
    }

    /// Replaces the budgets of a parked thread (e.g. raises the one that stopped it); resume it
    /// afterwards with [`Engine::resume`].
    ///
    /// # Errors
    /// [`Error::WrongStatus`] if the thread is running or has ended.
    pub async fn set_budgets(
        &self,
        thread: &str,
        budgets: cairn_dsl::Budgets,
    ) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let record = parked::stored(&self.shell, &id).await?;
        // A thread whose stored status is parked may still have its runner for a moment (it
        // releases right after the commit that parked it): `write_parked` waits for that.
        if record.status.is_terminal()
            || matches!(record.status, ThreadStatus::Running | ThreadStatus::Created)
        {
            return Err(Error::WrongStatus {
                thread: id.to_string(),
                status: record.status,
                detail: "budgets change on parked threads only: pause it first".into(),
            });
        }
        let body = Body::BudgetsSet { budgets };
        parked::write_parked(&self.shell, &id, record.status, vec![body], None).await
    }

    /// Asks a thread to pause at its next step boundary (a parked thread pauses at once: one
    /// waiting for input then refuses input, and one sleeping does not wake, until resumed).
    /// Survives a restart: the Paused status is recorded. Once this returns, only
    /// [`Engine::resume`] moves the thread out of Paused.
    ///
    /// # Errors
    /// [`Error::Transition`] if the thread cannot pause from its status.
    pub async fn pause(&self, thread: &str) -> Result<(), Error> {
        parked::pause(&self.shell, thread).await
    }

    /// Resumes a paused, blocked or recovered (parked) thread in the background. A thread
    /// paused while it waited for input or a timer goes back into that wait (Waiting or
    /// Sleeping; a timer whose time passed meanwhile fires at once). Its paused sub-workflow
    /// threads are resumed with it (a paused child is what paused its parent).
    ///
    /// # Errors
    /// [`Error::WrongStatus`] for a thread that waits for input or a timer, or has ended.
    pub async fn resume(&self, thread: &str) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let record = parked::stored(&self.shell, &id).await?;
        match record.status {
            ThreadStatus::Paused
                if self
                    .store()
                    .queue_member(&id)
                    .await?
                    .is_some_and(|m| m.admitted_at_ms.is_none()) =>
            {
                // Paused while it waited in a queue: back in line, where it was.
                let requeue = Some(Transition::Requeue);
                parked::write_parked(&self.shell, &id, record.status, vec![], requeue).await?;
                self.shell.admit.notify_one();
                Ok(())
            }
            ThreadStatus::Paused => {
                if self.unpause_tree(&record).await? {
                    spawn_drive(&self.shell, id, "resumed");
                }
                Ok(())
            }
            ThreadStatus::Blocked => {
                self.shell.registry.workflow_for(&record)?;
                parked::write_parked(
                    &self.shell,
                    &id,
                    record.status,
                    vec![],
                    Some(Transition::Run),
                )
                .await?;
                spawn_drive(&self.shell, id, "resumed");
                Ok(())
            }
            ThreadStatus::Running | ThreadStatus::Created if !self.shell.coord.is_driven(&id) => {
                self.shell.registry.workflow_for(&record)?;
                spawn_drive(&self.shell, id, "resumed");
                Ok(())
            }
            status => Err(Error::WrongStatus {
                thread: id.to_string(),
                status,
                detail: "only paused, blocked or parked threads resume".into(),
            }),
        }
    }

    /// Moves a Paused thread, and the paused sub-workflow threads its open step drives (a
    /// paused child is what paused its parent), out of Paused: each back into the wait it was
    /// paused in (input, or a timer, which fires at once if its time passed), else to Running.
    /// Level by level without recursion, by point reads: a child's id is a function of its
    /// parent, task and step. True if `root` now needs a runner (its nodes drive the children).
    async fn unpause_tree(&self, root: &ThreadRecord) -> Result<bool, Error> {
        let mut root_runs = false;
        let mut paused = vec![root.clone()];
        while let Some(record) = paused.pop() {
            let wf = self.shell.registry.workflow_for(&record)?;
            let ctx =
                crate::exec::fetch::restore(self.store().as_ref(), &wf, &record.id, None).await?;
            let next = match ctx.meta.waiting {
                Some(Waiting::Input { .. } | Waiting::Signal { .. }) => Transition::WaitInput,
                Some(Waiting::Timer { .. }) => Transition::Sleep,
                None => Transition::Run,
            };
            parked::write_parked(&self.shell, &record.id, ThreadStatus::Paused, vec![], Some(next))
                .await?;
            if next == Transition::Sleep
                && let Some(due) = Due::timer_of(&ctx)
            {
                self.shell.coord.arm(&record.id, due);
            }
            if record.id == root.id {
                root_runs = next == Transition::Run;
            }
            let step = ctx.meta.step + 1;
            for name in &ctx.meta.frontier {
                let sub = wf.node_id(name).is_some_and(|i| {
                    matches!(wf.nodes()[i].kind, cairn_dsl::DynNodeKind::Subgraph { .. })
                });
                if !sub {
                    continue;
                }
                let id = child_id(&record.id, &TaskKey::node(name.clone()), step);
                if let Some(child) = self.store().thread(&ThreadId::new(id)?).await?
                    && child.status == ThreadStatus::Paused
                {
                    paused.push(child);
                }
            }
        }
        // A signal sent while the tree was paused, to any thread of it parked in `recv`,
        // wakes it now (through the thread that drives it).
        if !root_runs
            && let Some(top) = crate::exec::signals::wake_if_sent(&self.shell, &root.id).await?
        {
            spawn_drive(&self.shell, top, "signal received");
        }
        Ok(root_runs)
    }

    /// Threads that can be resumed: paused, blocked, or unfinished without a runner (parked by
    /// recovery), in id order.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn resumable(&self) -> Result<Vec<ThreadRecord>, Error> {
        let mut out = Vec::new();
        for status in [
            ThreadStatus::Running,
            ThreadStatus::Created,
            ThreadStatus::Paused,
            ThreadStatus::Blocked,
        ] {
            let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
            let mut pages = super::ThreadPages::new(filter, None, 500);
            while let Some(page) = pages.next(self.store().as_ref()).await? {
                out.extend(page.into_iter().filter(|r| !self.shell.coord.is_driven(&r.id)));
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// [`Engine::resumable`], only the threads last updated within `max_age_ms` of now (engine
    /// clock): what an operator still wants offered after a restart, not last month's.
    ///
    /// # Errors
    /// Storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// const DAY_MS: u64 = 24 * 60 * 60 * 1_000;
    /// for record in engine.resumable_within(DAY_MS).await? {
    ///     println!("{} ({})", record.id, record.status);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn resumable_within(&self, max_age_ms: u64) -> Result<Vec<ThreadRecord>, Error> {
        let since = self.clock().now_ms().saturating_sub(max_age_ms);
        Ok(self.resumable().await?.into_iter().filter(|r| r.updated_at_ms >= since).collect())
    }

    /// Sends human input to a thread waiting for it, and resumes it.
    ///
    /// # Errors
    /// [`Error::WrongStatus`] if the thread is not waiting for input.
    pub async fn send_input(&self, thread: &str, input: impl Serialize) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let value = serde_json::to_value(input)?;
        let record = parked::stored(&self.shell, &id).await?;
        let wf = self.shell.registry.workflow_for(&record)?;
        parked::deliver_input(&self.shell, &wf, &id, value).await?;
        spawn_drive(&self.shell, id, "input received");
        Ok(())
    }
}
