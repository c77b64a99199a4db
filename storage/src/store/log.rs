//! [`ThreadLog`]: reading the log (a thread's events, or every thread's in lsn order), the
//! payloads events point at, and checkpoints.

use crate::checkpoint::{Checkpoint, CheckpointInfo, CheckpointKind};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::reading::Reading;
use crate::subscription::Subscription;

use super::Page;

/// Which events a [`Subscription`] follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One thread; the subscription's `after` is a [`Seq`].
    Thread(ThreadId),
    /// Every thread in lsn order; the subscription's `after` is an [`Lsn`].
    All,
}

/// Filters for [`ThreadLog::list_checkpoints`]; `None`/empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointFilter {
    /// Only this thread's checkpoints.
    pub thread: Option<ThreadId>,
    /// Only checkpoints of this workflow id.
    pub workflow_id: Option<String>,
    /// Only checkpoints of this kind.
    pub kind: Option<CheckpointKind>,
    /// Only checkpoints carrying at least one of these tags (empty: no tag filter).
    pub any_tags: Vec<String>,
}

/// Reading the log and checkpoints. Every read sees committed data only and answers a
/// [`Reading`]: awaited by async callers, [`Reading::wait`]ed by sync ones.
pub trait ThreadLog: Send + Sync + 'static {
    /// Up to `limit` events of `thread` with seq > `after`, in seq order.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownThread`]; [`Error::Pruned`] when `after + 1` was pruned;
    /// [`Error::Corrupted`] for any record (or gap) that fails a check.
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>>;

    /// The events of `thread` with `from <= seq <= to`.
    ///
    /// # Errors
    ///
    /// As [`ThreadLog::read_since`]; [`Error::LimitExceeded`] past `READ_LIMIT_MAX` events.
    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>>;

    /// The lsn of the last event committed when this store opened or since (by any process, on
    /// a shared database, once heard): 0 for an empty log. It only grows while the store is
    /// open; after deletions a newly opened store reads the highest lsn the log still holds.
    fn last_lsn(&self) -> Lsn;

    /// Up to `limit` events of every thread with lsn > `after`, in lsn order.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] when a record of the log is damaged or not stored under its own lsn.
    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>>;

    /// Up to `limit` events carrying `query.correlation` that pass its thread and time filters,
    /// with lsn > `after`, in lsn order (page on from the last one's lsn), across every thread.
    /// Read through the correlation index (`docs/format.md` §2.2): events that do not carry
    /// the id, and entries the filters refuse, cost no event read.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`Error::Corrupted`] (table
    /// `correlations`) when an entry is damaged or disagrees with the event it points at, or
    /// for a damaged event.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::*;
    /// # fn main() -> Result<(), Error> {
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let store = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
    /// let thread = ThreadId::new("t1")?;
    /// let workflow = WorkflowRef { id: "demo".into(), version: 1, fingerprint: "f".into() };
    /// let message = |correlation: Option<&str>| NewEvent {
    ///     thread: thread.clone(),
    ///     kind: EventKind::Message,
    ///     node: None,
    ///     status: EventStatus::Info,
    ///     summary: "a message".into(),
    ///     payload: None,
    ///     data: Vec::new(),
    ///     at_ms: 0,
    ///     correlation: correlation.map(String::from),
    /// };
    /// let batch = Batch {
    ///     threads: vec![ThreadRecord::new(thread.clone(), workflow, 0)],
    ///     events: vec![message(Some("order-7")), message(None), message(Some("order-8"))],
    ///     ..Batch::default()
    /// };
    /// store.append(batch)?.wait_blocking()?;
    /// let found = store.read_correlated(&CorrelationQuery::new("order-7"), Lsn(0), 100).wait()?;
    /// assert_eq!(found.len(), 1);
    /// assert_eq!(found[0].bookmark.seq, Seq(1));
    /// # Ok(())
    /// # }
    /// ```
    fn read_correlated(
        &self,
        query: &crate::correlation::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>>;

    /// Follows `scope` from `after` (a seq for a thread, an lsn for all): history first, then
    /// live events, each once, in order.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] if the store is closed.
    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, Error>;

    /// The payload's bytes; the hash is re-checked.
    ///
    /// # Errors
    ///
    /// [`Error::MissingPayload`]; [`Error::Corrupted`] if the bytes do not hash to `r`.
    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>>;

    /// The checkpoint with its snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if its records fail their checks.
    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>>;

    /// Whether the checkpoint exists. The provided implementation reads it.
    ///
    /// # Errors
    ///
    /// Storage errors only.
    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.checkpoint(id).map(|cp| cp.is_some())
    }

    /// The newest checkpoint of `thread` covering a seq <= `seq`.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if its records fail their checks.
    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>>;

    /// The id of `thread`'s checkpoint covering exactly `seq` (the one written in the batch
    /// whose last event is `seq`), if there is one. The provided implementation reads it
    /// through [`ThreadLog::latest_checkpoint_at_or_before`]; a backend with an index answers
    /// without reading the snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if its records fail their checks.
    fn checkpoint_covering(&self, thread: &ThreadId, seq: Seq) -> Reading<Option<CheckpointId>> {
        self.latest_checkpoint_at_or_before(thread, seq)
            .map(move |cp| cp.filter(|cp| cp.covers.seq == seq).map(|cp| cp.id))
    }

    /// Checkpoints matching `filter`, newest first, paged.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`Error::Corrupted`].
    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>>;
}

/// The first seq and the number of events of `read_range(from, to)`; `None` for an empty range.
pub(crate) fn range(from: Seq, to: Seq) -> Result<Option<(u64, usize)>, crate::error::Error> {
    if to < from || to.0 == 0 {
        return Ok(None);
    }
    let from = from.0.max(1);
    let count = (to.0 - from).saturating_add(1);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    crate::limits::check("READ_LIMIT_MAX", count, crate::limits::READ_LIMIT_MAX)?;
    Ok(Some((from, count)))
}
