//! Recovery at open: every unfinished thread is resumed, parked, re-armed or left to its parent.
//! On a shared database with a wake index, only the threads due are read, at open and at every
//! look for work after it.

use cairn_storage::{ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};
use tracing::Instrument as _;

use super::engine::Engine;
use crate::config::RecoveryPolicy;
use crate::coord::{Due, Slot};
use crate::core::event::Body;
use crate::error::Error;
use crate::exec::drive::{arm_parked_deadline, spawn_drive};
use crate::exec::parked::write_parked;

/// What recovery at open found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Threads resumed.
    pub resumed: Vec<ThreadId>,
    /// Threads parked as resumable.
    pub parked: Vec<ThreadId>,
    /// Sleeping threads whose timers were re-armed.
    pub timers: Vec<ThreadId>,
    /// Unfinished sub-workflow child threads left to their unfinished parents, whose nodes
    /// drive them on.
    pub children: Vec<ThreadId>,
    /// Blocked threads found (a divergence or a resource): they wait for a fix and `resume`.
    pub blocked: Vec<ThreadId>,
}

impl Engine {
    /// Finds unfinished threads and resumes or parks them (run by `open`).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn recover(&self) -> Result<RecoveryReport, Error> {
        let span = tracing::info_span!(
            "recovery",
            resumed = tracing::field::Empty,
            parked = tracing::field::Empty,
            timers = tracing::field::Empty,
            children = tracing::field::Empty,
            blocked = tracing::field::Empty,
        );
        let report = self.recover_all().instrument(span.clone()).await?;
        span.record("resumed", report.resumed.len());
        span.record("parked", report.parked.len());
        span.record("timers", report.timers.len());
        span.record("children", report.children.len());
        span.record("blocked", report.blocked.len());
        tracing::info!(
            parent: &span,
            resumed = report.resumed.len(),
            parked = report.parked.len(),
            timers = report.timers.len(),
            children = report.children.len(),
            blocked = report.blocked.len(),
            "recovery done"
        );
        Ok(report)
    }

    /// A whole pass: on a shared database with a wake index, every thread it says is due (the
    /// others are driven, parked for someone to act, or asleep past two polls: later looks
    /// find them when they fall due); otherwise every unfinished thread, listed.
    async fn recover_all(&self) -> Result<RecoveryReport, Error> {
        if let Some(report) = self.recover_due().await? {
            return Ok(report);
        }
        self.recover_listed().await
    }

    /// Every unfinished thread, listed by status (and, on a shared database, by this engine's
    /// workflows).
    async fn recover_listed(&self) -> Result<RecoveryReport, Error> {
        let mut report = RecoveryReport::default();
        // On a shared database, only threads of workflows this engine has: the others are
        // other workers' (a thread this binary cannot run is not even read). On a file, all of
        // them (those without their workflow are reported parked, left as they are).
        let workflows: Vec<Option<String>> = if !self.shell.coord.has_peers() {
            vec![None]
        } else {
            self.workflow_ids().into_iter().map(Some).collect()
        };
        let statuses = [
            ThreadStatus::Running,
            ThreadStatus::Created,
            ThreadStatus::Sleeping,
            ThreadStatus::WaitingInput,
            ThreadStatus::Paused,
            ThreadStatus::Blocked,
        ];
        let lists: Vec<(ThreadStatus, Option<String>)> =
            statuses.iter().flat_map(|s| workflows.iter().map(|w| (*s, w.clone()))).collect();
        for (status, workflow_id) in lists {
            // By cursor (thread id), not offset: the threads this pass resumes leave the status
            // listed while it pages, and an offset would then skip as many others.
            let filter =
                ThreadFilter { status: Some(status), workflow_id, ..ThreadFilter::default() };
            let mut pages = super::ThreadPages::new(filter, None, RECOVERY_PAGE);
            while let Some(page) = pages.next(self.shell.store.as_ref()).await? {
                for record in page {
                    if self.taken(&record.id) {
                        continue;
                    }
                    self.recover_one(record, &mut report).await?;
                }
            }
        }
        Ok(report)
    }

    /// The threads the store's wake index says are due (a lease lapsed, a timer or deadline
    /// within two polls, or not known), page by page in the index's order, each handled as
    /// recovery handles it; `None` for a store without the index.
    async fn recover_due(&self) -> Result<Option<RecoveryReport>, Error> {
        let workflows = self.workflow_ids();
        let horizon_ms = self.shell.config.poll_ms.saturating_mul(2);
        let mut report = RecoveryReport::default();
        let mut after = None;
        loop {
            let Some(index) = self.shell.coord.wake_index() else { return Ok(None) };
            let page = index.due_threads(&workflows, horizon_ms, after.as_ref(), DUE_PAGE).await?;
            let full = page.len() == DUE_PAGE;
            for due in page {
                after = Some((due.ready_at_ms, due.record.id.clone()));
                if due.record.status.is_terminal() || self.taken(&due.record.id) {
                    continue;
                }
                self.recover_one(due.record, &mut report).await?;
            }
            if !full {
                return Ok(Some(report));
            }
        }
    }

    /// One look for work on a shared database: a recovery pass through the wake index.
    async fn look_for_work(&self) -> Result<RecoveryReport, Error> {
        self.recover_all().await
    }

    /// Whether this engine drives `thread` or has a drive of it queued already.
    fn taken(&self, thread: &ThreadId) -> bool {
        self.shell.coord.is_driven(thread) || self.shell.queued.contains(thread)
    }

    /// Handles one unfinished thread as recovery does (drives, parks, arms or leaves it).
    pub(super) async fn recover_one(
        &self,
        record: ThreadRecord,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        let id = record.id.clone();
        if record.status == ThreadStatus::Queued {
            // In line: the store admits it (`api/queues.rs`), never recovery.
            return Ok(());
        }
        if self.pinned_elsewhere(&record) {
            // Pinned to another worker build: left as it is (not driven, woken or armed) for an
            // engine of that build, or until `repin` moves it here.
            tracing::debug!(thread = %id, "thread pinned to another build left as is");
            report.parked.push(id);
            return Ok(());
        }
        if matches!(
            record.status,
            ThreadStatus::WaitingInput | ThreadStatus::Paused | ThreadStatus::Blocked
        ) {
            self.recover_parked(&record, report).await;
            return Ok(());
        }
        if record.status == ThreadStatus::Sleeping {
            return self.recover_sleeping(&record, report).await;
        }
        if let Some(parent) =
            crate::exec::fetch::unfinished_parent(self.shell.store.as_ref(), &record).await?
        {
            // A sub-workflow's child is driven by its parent's node (which re-runs, finds the
            // child and drives it on, under the parent's cancellation): one driver, never two.
            tracing::debug!(thread = %id, %parent, "child thread left to its parent");
            report.children.push(id);
            return Ok(());
        }
        if self.shell.coord.has_peers() && record.lease.is_none() && !self.orphaned(&record) {
            // Just created or woken by another engine, which drives it itself in a moment:
            // taken over only if it is still without a driver after the grace.
            return Ok(());
        }
        self.shell.orphans.forget(&id);
        // A lease of another owner is not judged here: on a file its owner died; on a shared
        // database the wake index listed the thread as its lease lapses by the database's clock,
        // and the runner's acquisition is refused while the lease lives (`Runner::begin`).
        if let Err(e) = self.shell.registry.workflow_for(&record) {
            // Not runnable by this binary: leave it untouched, resumable once registered.
            tracing::warn!(thread = %id, error = %e, "unfinished thread left as is");
            report.parked.push(id);
            return Ok(());
        }
        match self.shell.config.recovery {
            RecoveryPolicy::Resume => {
                spawn_drive(&self.shell, id.clone(), "recovered after restart: resumed");
                report.resumed.push(id);
            }
            RecoveryPolicy::Park => {
                let body = Body::Recovered { action: "parked".into() };
                write_parked(&self.shell, &id, record.status, vec![body], None).await?;
                report.parked.push(id);
            }
        }
        Ok(())
    }

    /// A thread parked on input, a pause or a lock: its deadline armed, a blocked one reported,
    /// one waiting for input woken if its signal was sent while no engine could wake it.
    async fn recover_parked(&self, record: &ThreadRecord, report: &mut RecoveryReport) {
        let id = record.id.clone();
        if !self.shell.coord.is_armed(&id, Slot::Deadline) {
            arm_parked_deadline(&self.shell, &id).await;
        }
        if record.status == ThreadStatus::Blocked {
            report.blocked.push(id);
        } else if record.status == ThreadStatus::WaitingInput {
            self.wake_if_signal_sent(&id).await;
        }
    }

    /// A thread parked on a signal (in `recv`, or in a select, asleep until its deadline)
    /// sent while no engine could wake it (its sender died between the send and the wake):
    /// woken now.
    async fn wake_if_signal_sent(&self, id: &ThreadId) {
        match crate::exec::signals::wake_if_sent(&self.shell, id).await {
            Ok(Some(top)) => spawn_drive(&self.shell, top, "signal received"),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(thread = %id, error = %e, "parked thread not woken by its signal");
            }
        }
    }

    /// A sleeping thread: its timer armed from its restored context (unless armed already).
    async fn recover_sleeping(
        &self,
        record: &ThreadRecord,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        let id = record.id.clone();
        if self.shell.coord.is_armed(&id, Slot::Timer) {
            // Armed by an earlier look: nothing to read again.
            return Ok(());
        }
        match self.shell.registry.workflow_for(record) {
            Ok(wf) => {
                let store = self.shell.store.as_ref();
                let ctx = crate::exec::fetch::restore(store, &wf, &id, None).await?;
                if let Some(due) = Due::timer_of(&ctx) {
                    self.shell.coord.arm(&id, due);
                }
                self.wake_if_signal_sent(&id).await;
                report.timers.push(id);
            }
            Err(e) => tracing::warn!(thread = %id, error = %e, "sleeping thread not re-armed"),
        }
        Ok(())
    }
}

impl Engine {
    /// On a database other engines share: looks for work every [`crate::Config::poll_ms`]
    /// (with jitter, so that engines started together do not poll together) until shutdown.
    /// Each look is a recovery pass: runnable threads whose
    /// lease lapsed (their engine died or stalled) are taken over, due timers and deadlines are
    /// armed, so a thread sleeping on one
    /// engine wakes on whichever is alive when it is due (the first to record the timer wins;
    /// the others' guarded writes are refused).
    pub(crate) fn spawn_poller(&self) {
        let engine = self.clone();
        let stopping = self.shell.tasks.stopping().clone();
        self.shell.tasks.spawn(async move {
            let mut failing = crate::telemetry::repeated::Repeated::new("looking for work");
            loop {
                let base = engine.shell.config.poll_ms;
                let jitter = engine.shell.ids.random_u64() % (base / 2 + 1);
                let pause = std::time::Duration::from_millis(base - base / 4 + jitter);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stopping.cancelled() => return,
                }
                match engine.look_for_work().await {
                    Ok(_) => failing.passed(),
                    Err(e) => {
                        failing.failed(&e);
                    }
                }
            }
        });
    }
}

impl Engine {
    /// Whenever the store takes writes again after refusing them (a file store reopened its
    /// database after a failed commit: the disk had been full; see
    /// [`cairn_storage::Backend::refusals`]), runs the recovery pass of `open` again, until
    /// shutdown: the threads whose runners stopped on the failure are driven on from their
    /// logs, as after a restart.
    pub(crate) fn spawn_recovery_after_refusals(&self) {
        let Some(mut refusals) = self.shell.store.refusals() else { return };
        let engine = self.clone();
        let stopping = self.shell.tasks.stopping().clone();
        self.shell.tasks.spawn(async move {
            loop {
                tokio::select! {
                    changed = refusals.changed() => if changed.is_err() { return },
                    () = stopping.cancelled() => return,
                }
                // A refusal and its end may come as one change: what counts is that it ended.
                if refusals.borrow_and_update().is_some() {
                    continue;
                }
                tracing::info!("the store takes writes again: restoring unfinished threads");
                if let Err(e) = engine.recover().await {
                    tracing::warn!(error = %e, "restoring threads after the store recovered");
                }
            }
        });
    }
}

/// Unfinished threads recovery reads per page.
const RECOVERY_PAGE: usize = 500;

/// Due threads read per page of a look for work.
const DUE_PAGE: usize = 500;

/// How long a runnable thread without a lease is left to the engine that made it runnable (it
/// drives it itself right after its write) before another engine takes it over.
fn orphan_grace_ms(config: &crate::Config) -> u64 {
    config.poll_ms.saturating_mul(4).max(1_000)
}

impl Engine {
    /// Whether a runnable thread without a lease has waited out the orphan grace: its record
    /// was written that long ago by this engine's clock, or this engine has seen it without a
    /// lease for that long in real time (the engine that wrote it may run another clock).
    fn orphaned(&self, record: &ThreadRecord) -> bool {
        let grace = orphan_grace_ms(&self.shell.config);
        let now = self.shell.clock.now_ms();
        now.saturating_sub(record.updated_at_ms) >= grace
            || self.shell.orphans.waited(&record.id, std::time::Duration::from_millis(grace))
    }
}
