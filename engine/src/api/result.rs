//! A thread's result by id, for a caller that did not start it (another process, a later run):
//! read from the store, and awaited through the coordinator's status watch, which on a shared
//! database (PostgreSQL) follows other processes' commits too. For a redb file held by another
//! process, the same wait runs in that process behind its endpoint
//! (`GET /api/threads/{id}/result?wait_ms=`, `cairn result THREAD --wait SECS`).

use std::time::Duration;

use super::engine::Engine;
use super::handle::Outcome;
use crate::error::Error;

impl Engine {
    /// How thread `thread` ended, or `None` while it has not finished (it runs, or is parked:
    /// paused, sleeping, waiting for input).
    ///
    /// # Errors
    /// [`Error::UnknownThread`] (never started, or deleted); storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// if let Some(outcome) = engine.result("order-7").await? {
    ///     println!("order-7 ended {}: {:?}", outcome.status, outcome.output);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn result(&self, thread: &str) -> Result<Option<Outcome>, Error> {
        let outcome = self.thread(thread).await?.outcome().await?;
        Ok(outcome.status.is_terminal().then_some(outcome))
    }

    /// [`Engine::result`], waiting up to `timeout` for the thread to finish: `None` if it has
    /// not by then. The wait is woken by the thread's status changes, in this process or, on a
    /// shared database, committed by another; it holds no store resources while it waits.
    ///
    /// # Errors
    /// As [`Engine::result`]; [`Error::ShutDown`] if the engine shuts down first.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use std::time::Duration;
    /// match engine.await_result("order-7", Duration::from_secs(30)).await? {
    ///     Some(outcome) => println!("ended {}", outcome.status),
    ///     None => println!("still running after 30 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn await_result(
        &self,
        thread: &str,
        timeout: Duration,
    ) -> Result<Option<Outcome>, Error> {
        let id = cairn_storage::ThreadId::new(thread)?;
        let handle = crate::api::handle::ThreadHandle::new(self.clone(), id);
        let outcome = handle.outcome().await?;
        if outcome.status.is_terminal() {
            return Ok(Some(outcome));
        }
        // Past the timeout: no result yet.
        tokio::time::timeout(timeout, handle.finished()).await.ok().transpose()
    }
}
