//! Following a chain of threads continued as new (`ctx.continue_as_new`): the successor of a
//! thread, and the result of the last thread of a chain, waited for from its first id.

use std::time::{Duration, Instant};

use super::engine::Engine;
use super::handle::Outcome;
use crate::core::event::Body;
use crate::error::Error;

/// The most links [`Engine::result_following`] follows in one call: a bound on a chain that
/// keeps continuing while the call follows it.
pub const CHAIN_FOLLOW_MAX: usize = 100_000;

/// How far back from a completed thread's last event [`Engine::continued_as`] looks for its
/// `continued_as_new` before it restores the thread (the completing batch's events after it:
/// the status change, the checkpoint's, lock releases).
const LAST_BATCH_EVENTS: u64 = 64;

impl Engine {
    /// The successor thread `thread` continued as, once it did (`None` while it has not, or if
    /// it ended otherwise).
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// if let Some(next) = engine.continued_as("ticker").await? {
    ///     println!("ticker goes on as {next}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn continued_as(&self, thread: &str) -> Result<Option<String>, Error> {
        let id = cairn_storage::ThreadId::new(thread)?;
        let store = self.store().as_ref();
        let record = crate::exec::fetch::record(store, &id).await?;
        if record.status != cairn_storage::ThreadStatus::Completed {
            return Ok(None);
        }
        // The link is in the batch that completed the thread, among its last events: read
        // without the workflow (a command line that does not have it answers too).
        if let Some(last) = record.last.filter(|l| l.seq >= record.first_seq) {
            let from = last.seq.0.saturating_sub(LAST_BATCH_EVENTS).max(record.first_seq.0).max(1);
            // A thread pruned while it ran may hold fewer: its context says (below).
            let events = match store.read_range(&id, cairn_storage::Seq(from), last.seq).await {
                Err(cairn_storage::Error::Pruned { .. }) => Vec::new(),
                read => read?,
            };
            for event in events.into_iter().rev() {
                // The completing batch holds `output`, then `continued_as_new` when it continued.
                match crate::exec::fetch::decode(store, event).await?.body {
                    Body::ContinuedAsNew { thread, .. } => return Ok(Some(thread)),
                    Body::Output { .. } => return Ok(None),
                    _ => {}
                }
            }
        }
        // Pruned, or appended to since: the thread's context says.
        let wf = self.shell.registry.workflow_for(&record)?;
        let ctx = crate::exec::fetch::restore(store, &wf, &id, None).await?;
        Ok(ctx.meta.continued_as)
    }

    /// [`Engine::await_result`] of the last thread of the chain that starts at `thread`: while
    /// the thread waited for continued as new, the wait goes on with its successor, within the
    /// same `timeout`. Returns the id of the thread the answer is about, and its outcome
    /// (`None` if that thread has not finished by the end of the wait).
    ///
    /// # Errors
    /// As [`Engine::await_result`]; [`Error::Invalid`] past [`CHAIN_FOLLOW_MAX`] links.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use std::time::Duration;
    /// let (last, outcome) = engine.result_following("ticker", Duration::from_secs(30)).await?;
    /// println!("{last}: {:?}", outcome.map(|o| o.status));
    /// # Ok(()) }
    /// ```
    pub async fn result_following(
        &self,
        thread: &str,
        timeout: Duration,
    ) -> Result<(String, Option<Outcome>), Error> {
        let deadline = Instant::now() + timeout;
        let mut current = thread.to_owned();
        for _ in 0..CHAIN_FOLLOW_MAX {
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = self.await_result(&current, left).await?;
            let next = match &outcome {
                Some(o) if o.status == cairn_storage::ThreadStatus::Completed => {
                    self.continued_as(&current).await?
                }
                _ => None,
            };
            match next {
                Some(next) => current = next,
                None => return Ok((current, outcome)),
            }
        }
        Err(Error::Invalid(format!("{thread}: a chain of more than {CHAIN_FOLLOW_MAX} threads")))
    }
}
