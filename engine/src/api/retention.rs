//! Deleting finished threads: by hand ([`Engine::delete`]) and by the retention policy
//! ([`EngineBuilder::retention`]), whose passes run in the background every
//! [`RetentionPolicy::every_ms`] of the engine's clock.
//!
//! A pass walks the thread records of each finished status whose period is set, a page of
//! 256 at a time (a cursor over ids, so deleting as it goes
//! skips nothing), and deletes those that ended (`updated_at_ms`) at least the period ago; the
//! deletes of one page are in flight together and share group commits. The store refuses a
//! delete of a thread that is no longer finished, so a thread resumed or rolled back between
//! the listing and its delete is kept. A child thread of a sub-workflow whose parent has not
//! finished is kept (its parent's node may still read it).

use cairn_storage::{DeleteOptions, Deleted, ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};
use tracing::Instrument;

use super::builder::EngineBuilder;
use super::engine::Engine;
use crate::config::{RetentionPolicy, RetentionReport};
use crate::error::Error;
use crate::exec::fetch::unfinished_parent;
use crate::limits::{RETENTION_EVERY_MS_DEFAULT, RETENTION_PAGE_MAX};

/// The cancellation reason a runner still driving a forcibly deleted thread is given.
const DELETED_REASON: &str = "the thread was deleted";

/// The finished statuses, in the order a pass visits them.
const FINISHED: [ThreadStatus; 4] = [
    ThreadStatus::Completed,
    ThreadStatus::Failed,
    ThreadStatus::TimedOut,
    ThreadStatus::Cancelled,
];

impl EngineBuilder {
    /// Deletes finished threads on its own once `policy`'s period for their status has passed
    /// (see [`RetentionPolicy`]). An engine opened read-only runs no passes.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// use cairn::RetentionPolicy;
    /// let engine = cairn::Engine::builder("cairn.db")
    ///     .retention(RetentionPolicy::after_ms(7 * 24 * 60 * 60 * 1_000))
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn retention(mut self, policy: RetentionPolicy) -> Self {
        self.config.retention = Some(policy);
        self
    }
}

impl Engine {
    /// Deletes thread `thread` whole (`cairn_storage::Maintenance::delete_thread`): its record, log,
    /// checkpoints, locks and the payloads no other thread references, in one transaction.
    /// Afterwards the id is free: [`Engine::start`] with it starts a new thread. `None`: there
    /// was no such thread.
    ///
    /// # Errors
    /// [`cairn_storage::Error::Unfinished`] (as [`Error::Storage`]) for a thread that has not
    /// finished, unless `options.force`: a runner still driving a forcibly deleted thread is
    /// fenced at its next batch and stops; a runner of this engine has its node cancelled too
    /// (the node gets the engine's cancellation grace period, then is dropped). [`Error::Invalid`] for a malformed id; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn::storage::DeleteOptions;
    /// if let Some(deleted) = engine.delete("order-7", DeleteOptions::default()).await? {
    ///     println!("{} events removed", deleted.events);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete(
        &self,
        thread: &str,
        options: DeleteOptions,
    ) -> Result<Option<Deleted>, Error> {
        let id = ThreadId::new(thread)?;
        let deleted = self.shell.store.delete_thread(&id, options)?.wait().await?;
        if let Some(d) = &deleted {
            if !d.status.is_terminal() {
                // A runner of this engine may still be in a node of it: cancelled, the node has
                // its grace period and is then dropped, and the runner's next batch is fenced
                // (a runner in another process is fenced at that batch, its node not cancelled).
                let cancel = crate::coord::Request::Cancel(DELETED_REASON.to_owned());
                self.shell.coord.deliver(&id, cancel).await;
            }
            self.forget_deleted(&id);
            self.shell.metrics.deleted_by_hand.increment(1);
            tracing::info!(thread = %id, status = %d.status, events = d.events, "thread deleted");
        }
        Ok(deleted)
    }

    /// One retention pass now, under the engine's policy (nothing without one).
    ///
    /// # Errors
    /// Storage errors reading the records or deleting (the pass stops at the first).
    pub async fn retention_pass(&self) -> Result<RetentionReport, Error> {
        let Some(policy) = self.shell.config.retention else {
            return Ok(RetentionReport::default());
        };
        let now = self.shell.clock.now_ms();
        let span = tracing::info_span!(
            "retention_pass",
            at_ms = now,
            scanned = tracing::field::Empty,
            deleted = tracing::field::Empty,
        );
        let pass = async {
            let mut report = RetentionReport { at_ms: now, ..RetentionReport::default() };
            for status in FINISHED {
                if let Some(period) = policy.period_ms(status) {
                    self.retention_status(status, now, period, &mut report).await?;
                }
            }
            Ok::<_, Error>(report)
        };
        // Instrumented, not entered: the pass awaits its deletes, and an entered span would stay
        // entered on the worker thread while the task is suspended.
        let report = pass.instrument(span.clone()).await?;
        span.record("scanned", report.scanned);
        span.record("deleted", report.deleted);
        if report.deleted > 0 {
            tracing::info!(
                parent: &span,
                deleted = report.deleted,
                scanned = report.scanned,
                "retention pass"
            );
        }
        Ok(report)
    }

    /// Deletes the threads of `status` that ended at least `period_ms` before `now_ms`, page by
    /// page.
    async fn retention_status(
        &self,
        status: ThreadStatus,
        now_ms: u64,
        period_ms: u64,
        report: &mut RetentionReport,
    ) -> Result<(), Error> {
        let store = &self.shell.store;
        let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
        let mut pages = super::ThreadPages::new(filter, None, RETENTION_PAGE_MAX);
        while let Some(page) = pages.next(store.as_ref()).await? {
            report.scanned += page.len() as u64;
            let mut pending = Vec::new();
            // Added, not subtracted from now: a clock earlier than the period deletes nothing.
            let due = |r: &&ThreadRecord| r.updated_at_ms.saturating_add(period_ms) <= now_ms;
            for record in page.iter().filter(due) {
                if self.parent_unfinished(record).await? {
                    report.kept_for_parent += 1;
                    continue;
                }
                pending
                    .push((&record.id, store.delete_thread(&record.id, DeleteOptions::default())?));
            }
            for (id, deleting) in pending {
                match deleting.wait().await {
                    Ok(Some(_)) => {
                        report.deleted += 1;
                        self.forget_deleted(id);
                        self.shell.metrics.deleted_by_retention.increment(1);
                    }
                    // Gone already (deleted by hand meanwhile) or no longer finished: kept.
                    Ok(None) | Err(cairn_storage::Error::Unfinished { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Whether `record` is a sub-workflow child whose parent (named by its `parent` label)
    /// has not finished.
    async fn parent_unfinished(&self, record: &ThreadRecord) -> Result<bool, Error> {
        Ok(unfinished_parent(self.shell.store.as_ref(), record).await?.is_some())
    }

    /// Drops what this engine holds in memory about a deleted thread.
    fn forget_deleted(&self, id: &ThreadId) {
        self.shell.coord.disarm(id);
        self.shell.verified.forget(id);
    }

    /// The report of the latest retention pass the engine ran on its own (changes after each).
    pub fn retention_reports(&self) -> tokio::sync::watch::Receiver<RetentionReport> {
        self.shell.retention.subscribe()
    }

    /// Runs a retention pass every [`RetentionPolicy::every_ms`] of the engine's clock until
    /// shutdown (a manual clock's advance wakes it). The passes keep their cadence from the
    /// moment the engine opened, whenever the task that runs them gets to run: a clock that
    /// jumped past a pass's time runs one pass at once (not one per interval skipped), and the
    /// cadence goes on one interval after it.
    ///
    /// With [`EngineBuilder::prune_history`] on, each pass also runs a history pass
    /// ([`Engine::prune_covered`]), at the retention cadence (its default without a policy).
    pub(super) fn spawn_retention(&self) {
        let config = &self.shell.config;
        if config.retention.is_none() && !config.prune_history {
            return;
        }
        let engine = self.clone();
        let stopping = self.shell.tasks.stopping().clone();
        // At least 1 ms: a zero interval would run passes back to back.
        let every = config.retention.map_or(RETENTION_EVERY_MS_DEFAULT, |p| p.every_ms).max(1);
        // Read now, not when the task first runs: a clock moved meanwhile is a pass due.
        let mut next = engine.shell.clock.now_ms().saturating_add(every);
        self.shell.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = engine.shell.clock.sleep_until(next) => {}
                    () = stopping.cancelled() => return,
                }
                // The pass's own time, read before its report is out: whoever moves the clock
                // on seeing the report moves it after this.
                let ran_at = match engine.retention_pass().await {
                    Ok(report) => {
                        let at = report.at_ms;
                        engine.shell.retention.send_replace(report);
                        at
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "retention pass");
                        next
                    }
                };
                if engine.shell.config.prune_history
                    && let Err(e) = engine.prune_covered().await
                {
                    tracing::warn!(error = %e, "history pass");
                }
                next = next_pass(next, every, ran_at);
            }
        });
    }
}

/// When the pass after the one due at `due`, which ran at `ran_at`, runs: one interval after
/// `due`, or, when the clock had already passed that (it jumped, or the pass was late), one
/// interval after `ran_at` (the pass that ran was the catch-up: one pass, not one per interval
/// skipped).
fn next_pass(due: u64, every: u64, ran_at: u64) -> u64 {
    let on_cadence = due.saturating_add(every);
    if on_cadence > ran_at { on_cadence } else { ran_at.saturating_add(every) }
}

#[cfg(test)]
mod tests {
    use super::next_pass;

    #[test]
    fn passes_keep_their_cadence_and_a_jump_runs_one_pass() {
        assert_eq!(next_pass(1_000, 1_000, 1_000), 2_000, "on time");
        assert_eq!(next_pass(1_000, 1_000, 1_700), 2_000, "a slow pass keeps the cadence");
        assert_eq!(next_pass(1_000, 1_000, 60_000), 61_000, "a jump: that pass caught up");
        assert_eq!(next_pass(1_000, 1_000, 2_000), 3_000);
        assert_eq!(next_pass(u64::MAX - 1, 1_000, 0), u64::MAX);
    }
}
