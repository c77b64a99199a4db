//! Bounded history: dropping what checkpoints cover while the engine runs, by hand
//! ([`Engine::prune`]) and by the history policy ([`EngineBuilder::prune_history`], on by
//! default), whose passes run beside the retention passes.
//!
//! A thread is pruned to the checkpoint restore would use: its newest one
//! (`latest_checkpoint_at_or_before(thread, Seq::MAX)`, as `cairn prune` and restore read it).
//! Every checkpoint in the store was written by a runner after the events it covers were
//! committed, so a thread driven right now is never pruned past what it or a later restore
//! needs. The prune goes through the store's one writer (`Maintenance::prune`) like an append,
//! so writers are not blocked beyond one transaction; a runner that writes a newer checkpoint
//! meanwhile is unaffected (it is kept; the next pass prunes to it).
//!
//! What stays: the newest checkpoint and every event after it. `state_at` and `fork` of a pruned
//! step answer [`crate::Error::SeqUnavailable`] naming what was pruned; other reads of one
//! (`replay`, a bundle from before it) answer [`cairn_storage::Error::Pruned`] naming the first
//! seq still stored.

use cairn_storage::{Pruned, Seq, ThreadFilter, ThreadId, ThreadRecord};

use super::builder::EngineBuilder;
use super::engine::Engine;
use crate::error::Error;
use crate::limits::{PRUNE_PASS_MAX, RETENTION_PAGE_MAX};

/// What one history pass ([`Engine::prune_covered`]) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneReport {
    /// Thread records read.
    pub scanned: u64,
    /// Threads something was removed from.
    pub pruned: u64,
    /// Events removed.
    pub events: u64,
    /// Checkpoints removed (the ones older than each thread's newest).
    pub checkpoints: u64,
    /// Whether the pass stopped at 256 (`PRUNE_PASS_MAX`) pruned threads (the next pass goes on).
    pub stopped_at_limit: bool,
}

impl EngineBuilder {
    /// Whether the engine drops, on its own, the history its checkpoints cover in threads that
    /// have not finished (default `true`; `false` keeps every step readable for time travel,
    /// replay, fork and bundles from the first step): a pass every [`crate::RetentionPolicy::every_ms`] of
    /// the engine's clock (the retention cadence, 60,000 ms
    /// without a retention policy) prunes each such thread to its newest checkpoint (see
    /// [`Engine::prune`]). Finished threads are left whole (retention deletes them). An engine
    /// opened read-only runs no passes.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// // Threads that never end: drop what their newest checkpoint covers, every pass.
    /// let engine = cairn::Engine::builder("cairn.db").prune_history(true).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn prune_history(mut self, on: bool) -> Self {
        self.config.prune_history = on;
        self
    }
}

impl Engine {
    /// Removes thread `thread`'s events and checkpoints that its newest checkpoint covers (the
    /// one restore starts from), while the engine runs: a running thread keeps running. `None`:
    /// the thread has no checkpoint (nothing is covered). Afterwards reads of a removed step
    /// answer [`cairn_storage::Error::Pruned`].
    ///
    /// # Errors
    /// [`Error::Invalid`] for a malformed id; storage errors (a checkpoint deleted between the
    /// read and the prune answers `UnknownCheckpoint`).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// if let Some(pruned) = engine.prune("order-7").await? {
    ///     println!("{} events removed; the log starts at {}", pruned.events, pruned.first_seq);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn prune(&self, thread: &str) -> Result<Option<Pruned>, Error> {
        let id = ThreadId::new(thread)?;
        let store = &self.shell.store;
        let Some(latest) = store.latest_checkpoint_at_or_before(&id, Seq(u64::MAX)).await? else {
            return Ok(None);
        };
        Ok(Some(store.prune(&id, latest.id)?.wait().await?))
    }

    /// One history pass now: prunes every unfinished thread whose newest checkpoint covers
    /// stored events (as [`Engine::prune`]), at most 256 (`PRUNE_PASS_MAX`) threads (the next pass
    /// goes on; threads already pruned cost a record read). Runs whatever
    /// [`EngineBuilder::prune_history`] says.
    ///
    /// # Errors
    /// Storage errors (the pass stops at the first).
    pub async fn prune_covered(&self) -> Result<PruneReport, Error> {
        let mut report = PruneReport::default();
        let mut pages = super::ThreadPages::new(ThreadFilter::default(), None, RETENTION_PAGE_MAX);
        while let Some(page) = pages.next(self.shell.store.as_ref()).await? {
            report.scanned += page.len() as u64;
            for record in page.iter().filter(|r| !r.status.is_terminal()) {
                if report.pruned >= PRUNE_PASS_MAX {
                    report.stopped_at_limit = true;
                    return Ok(report);
                }
                self.prune_record(record, &mut report).await?;
            }
        }
        Ok(report)
    }

    /// Prunes `record`'s thread if its newest checkpoint covers a stored event.
    async fn prune_record(
        &self,
        record: &ThreadRecord,
        report: &mut PruneReport,
    ) -> Result<(), Error> {
        let store = &self.shell.store;
        let Some(latest) = store.latest_checkpoint_at_or_before(&record.id, Seq(u64::MAX)).await?
        else {
            return Ok(());
        };
        if latest.covers.seq < record.first_seq {
            return Ok(());
        }
        match store.prune(&record.id, latest.id)?.wait().await {
            Ok(p) => {
                report.events += p.events;
                report.checkpoints += p.checkpoints;
                if p.events + p.checkpoints > 0 {
                    report.pruned += 1;
                }
                Ok(())
            }
            // Deleted meanwhile (the thread, or the checkpoint by hand): nothing to do.
            Err(
                cairn_storage::Error::UnknownCheckpoint(_) | cairn_storage::Error::UnknownThread(_),
            ) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
