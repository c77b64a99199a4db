//! Controls of threads from outside: cancel, pause, resume, human input, resumable tasks.
//!
//! A running thread gets the request through its in-process [`crate::coord::claims::Control`] and its
//! runner records the outcome at the next step boundary (cancel reaches the running node at once
//! through its cancellation token). A parked thread is changed directly by a guarded write.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{
    Batch, Guard, LockOp, Page, ThreadFilter, ThreadId, ThreadRecord, ThreadStatus,
};
use serde::Serialize;
use serde_json::Value;

use crate::api::engine::{Engine, Inner};
use crate::error::Error;
use crate::core::codec;
use crate::core::event::{Body, TaskKey};
use crate::core::status::{Transition, transition};
use crate::exec::subgraph::child_id;
use crate::core::thread_ctx::Waiting;

impl Engine {
    fn record(&self, id: &ThreadId) -> Result<ThreadRecord, Error> {
        self.store().thread(id)?.ok_or_else(|| Error::UnknownThread(id.to_string()))
    }

    /// Cancels a thread. A running node sees its cancellation token at once and has the grace
    /// period to stop; the thread ends Cancelled, its locks released, with `reason` recorded.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Transition`] if the thread has ended already.
    pub async fn cancel(&self, thread: &str, reason: &str) -> Result<(), Error> {
        self.end_from_outside(thread, Transition::Cancel, reason).await
    }

    /// Gives up a resumable thread for good: it ends Cancelled.
    ///
    /// # Errors
    /// As [`Engine::cancel`].
    pub async fn abandon(&self, thread: &str) -> Result<(), Error> {
        self.end_from_outside(thread, Transition::Cancel, "abandoned").await
    }

    /// Times out a parked thread whose deadline passed (a running one times out through its
    /// runner's own watcher).
    pub(crate) async fn time_out_parked(&self, thread: &ThreadId) -> Result<(), Error> {
        if self.inner.claims.get(thread).is_some() {
            return Ok(());
        }
        let record = self.record(thread)?;
        if record.status.is_terminal() || record.status == ThreadStatus::Running {
            return Ok(());
        }
        let why = "the thread's deadline passed";
        self.end_from_outside(thread.as_str(), Transition::TimeOut, why).await
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
        let record = self.record(&id)?;
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
        self.inner.write_parked(&id, record.status, vec![body], None).await
    }

    /// Ends a thread from outside, then its unfinished descendants (sub-workflow child
    /// threads), found level by level without recursion.
    async fn end_from_outside(
        &self,
        thread: &str,
        t: Transition,
        reason: &str,
    ) -> Result<(), Error> {
        self.end_one(thread, t, reason).await?;
        let mut parents = vec![ThreadId::new(thread)?];
        while let Some(parent) = parents.pop() {
            let children = crate::core::children::children_of(self.store().as_ref(), &parent)?;
            for child in children.into_iter().filter(|c| !c.status.is_terminal()) {
                let why = format!("parent {parent} ended: {reason}");
                if let Err(e) = self.end_one(child.id.as_str(), t, &why).await {
                    tracing::warn!(thread = %child.id, error = %e, "child thread not ended");
                }
                parents.push(child.id);
            }
        }
        Ok(())
    }

    async fn end_one(&self, thread: &str, t: Transition, reason: &str) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let wanted = transition(ThreadStatus::Running, t)
            .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
        let mut asked = false;
        loop {
            if let Some(control) = self.inner.claims.get(&id) {
                if t == Transition::TimeOut {
                    control.time_out();
                } else {
                    control.cancel(reason.to_owned());
                }
                drop(control);
                // Done only once the end is durable: wait for the runner to let go, then read
                // how it left the thread (it may have parked or ended before it saw the
                // request; a parked thread is ended below).
                self.inner.claims.wait_released(&id).await;
                asked = true;
                continue;
            }
            let record = self.record(&id)?;
            if asked && record.status == wanted {
                return Ok(());
            }
            let to = transition(record.status, t)
                .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
            let now = self.inner.clock.now_ms();
            let mut bodies = Vec::new();
            for lock in self.store().locks()?.into_iter().filter(|l| l.owner == id.as_str()) {
                bodies.push(Body::Lock { name: lock.name, acquired: false });
            }
            bodies.push(Body::StatusChanged { from: record.status, to, reason: reason.to_owned() });
            let mut batch = Batch::default();
            for body in &bodies {
                codec::push_event(&mut batch, &id, body, now)?;
            }
            let mut rec = record.clone();
            rec.status = to;
            rec.updated_at_ms = now;
            rec.lease = None;
            batch.threads.push(rec);
            batch.locks.push(LockOp::ReleaseAll { owner: id.to_string() });
            batch.guards.push(Guard::Status { thread: id.clone(), expected: record.status });
            let Some(_claim) = self.inner.claims.claim(&id) else { continue };
            let result = async { self.store().append(batch)?.wait().await }.await;
            self.inner.claims.release(&id);
            match result {
                Ok(_) => {
                    self.inner.timers.disarm(&id);
                    self.inner.notify(&id, to);
                    self.inner.locks_released.notify_waiters();
                    crate::exec::resume_check::forget(&self.inner, &id);
                    return Ok(());
                }
                // The status moved under us (a timer fired, input arrived): look again.
                Err(cairn_storage::Error::GuardFailed { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Asks a thread to pause at its next step boundary (a parked thread pauses at once: one
    /// waiting for input then refuses input, and one sleeping does not wake, until resumed).
    /// Survives a restart: the Paused status is recorded. Once this returns, only
    /// [`Engine::resume`] moves the thread out of Paused.
    ///
    /// # Errors
    /// [`Error::Transition`] if the thread cannot pause from its status.
    pub async fn pause(&self, thread: &str) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        loop {
            if let Some(control) = self.inner.claims.get(&id) {
                control.request_pause();
                drop(control);
                // As for cancel: done once the runner has let go with the pause durable, or
                // has parked otherwise (then the parked thread is paused below).
                self.inner.claims.wait_released(&id).await;
                continue;
            }
            let record = self.record(&id)?;
            if record.status == ThreadStatus::Paused {
                return Ok(());
            }
            let to = transition(record.status, Transition::Pause)
                .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
            let body = Body::StatusChanged { from: record.status, to, reason: "paused".into() };
            // A paused sleeper's timer stays armed: when it fires it finds the thread Paused and
            // does nothing (`resume` arms it again). Disarming it here could race a resume's
            // new timer.
            match self.write_status(&record, to, vec![body]).await {
                // A runner took the thread (or its status moved) between our read and our
                // write: look again.
                Err(Error::WrongStatus { .. })
                | Err(Error::Storage(cairn_storage::Error::GuardFailed { .. })) => continue,
                other => return other,
            }
        }
    }

    async fn write_status(
        &self,
        record: &ThreadRecord,
        to: ThreadStatus,
        bodies: Vec<Body>,
    ) -> Result<(), Error> {
        let id = &record.id;
        let now = self.inner.clock.now_ms();
        let mut batch = Batch::default();
        for body in &bodies {
            codec::push_event(&mut batch, id, body, now)?;
        }
        let mut rec = record.clone();
        rec.status = to;
        rec.updated_at_ms = now;
        batch.threads.push(rec);
        batch.guards.push(Guard::Status { thread: id.clone(), expected: record.status });
        let Some(_claim) = self.inner.claims.claim(id) else {
            return Err(Error::WrongStatus {
                thread: id.to_string(),
                status: ThreadStatus::Running,
                detail: "a runner is driving it".into(),
            });
        };
        let result = async { self.store().append(batch)?.wait().await }.await;
        self.inner.claims.release(id);
        result?;
        self.inner.notify(id, to);
        Ok(())
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
        let record = self.record(&id)?;
        match record.status {
            ThreadStatus::Paused => {
                if self.unpause_tree(&record).await? {
                    self.inner.spawn_drive(id, "resumed");
                }
                Ok(())
            }
            ThreadStatus::Blocked => {
                self.inner.workflow_for(&record)?;
                self.inner.write_parked(&id, record.status, vec![], Some(Transition::Run)).await?;
                self.inner.spawn_drive(id, "resumed");
                Ok(())
            }
            ThreadStatus::Running | ThreadStatus::Created
                if self.inner.claims.get(&id).is_none() =>
            {
                self.inner.workflow_for(&record)?;
                self.inner.spawn_drive(id, "resumed");
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
            let wf = self.inner.workflow_for(&record)?;
            let ctx = crate::core::restore::restore(self.store().as_ref(), &wf, &record.id, None)?;
            let next = match ctx.meta.waiting {
                Some(Waiting::Input { .. }) => Transition::WaitInput,
                Some(Waiting::Timer { .. }) => Transition::Sleep,
                None => Transition::Run,
            };
            self.inner.write_parked(&record.id, ThreadStatus::Paused, vec![], Some(next)).await?;
            if next == Transition::Sleep {
                self.inner.schedule_timers(&record.id, &ctx);
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
                if let Some(child) = self.store().thread(&ThreadId::new(id)?)?
                    && child.status == ThreadStatus::Paused
                {
                    paused.push(child);
                }
            }
        }
        Ok(root_runs)
    }

    /// Threads that can be resumed: paused, blocked, or unfinished without a runner (parked by
    /// recovery), in id order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn resumable(&self) -> Result<Vec<ThreadRecord>, Error> {
        let mut out = Vec::new();
        for status in [
            ThreadStatus::Running,
            ThreadStatus::Created,
            ThreadStatus::Paused,
            ThreadStatus::Blocked,
        ] {
            let mut offset = 0;
            loop {
                let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
                let page = self.store().list_threads(&filter, Page { limit: 500, offset })?;
                offset += page.len();
                let done = page.len() < 500;
                out.extend(page.into_iter().filter(|r| self.inner.claims.get(&r.id).is_none()));
                if done {
                    break;
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Sends human input to a thread waiting for it, and resumes it.
    ///
    /// # Errors
    /// [`Error::WrongStatus`] if the thread is not waiting for input.
    pub async fn send_input(&self, thread: &str, input: impl Serialize) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let value = serde_json::to_value(input)?;
        let record = self.record(&id)?;
        let wf = self.inner.workflow_for(&record)?;
        deliver_input(&self.inner, &wf, &id, value).await?;
        self.inner.spawn_drive(id, "input received");
        Ok(())
    }
}

/// Records `value` as the input a waiting thread asked for.
///
/// # Errors
/// [`Error::WrongStatus`] if the thread is not waiting for input.
pub(crate) async fn deliver_input(
    inner: &Arc<Inner>,
    wf: &DynWorkflow,
    id: &ThreadId,
    value: Value,
) -> Result<(), Error> {
    let ctx = crate::core::restore::restore(inner.store.as_ref(), wf, id, None)?;
    let Some(Waiting::Input { task, .. }) = ctx.meta.waiting.clone() else {
        return Err(Error::WrongStatus {
            thread: id.to_string(),
            status: ctx.meta.status,
            detail: "it is not waiting for input".into(),
        });
    };
    inner
        .write_parked(
            id,
            ThreadStatus::WaitingInput,
            vec![Body::InputReceived { task, value }],
            Some(Transition::Run),
        )
        .await
}
