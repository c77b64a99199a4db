//! The [`Store`] trait: everything the engine asks of storage, with no storage-engine types in
//! any signature (redb is the default implementation; a server database can implement it later).
//!
//! Reads see committed data only. The reads the engine makes on its async paths have async
//! twins (`thread_async`, `read_since_async`...: a [`Reading`] to await), which a store whose
//! reads cross the network answers without blocking its caller's thread. Writes go through [`Store::append`] (and the retention calls),
//! queue to one writer and resolve through [`Pending`] when their commit completes.

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::{
    Appended, Batch, Bookmark, Checkpoint, CheckpointId, CheckpointInfo, CheckpointKind,
    DeleteOptions, Deleted, Error, Event, Guard, LeaseOp, LockOp, LockRecord, Lsn, PayloadRef,
    Pending, Pruned, Reading, Seq, Subscription, ThreadId, ThreadRecord, ThreadStatus,
};

/// When an append is acknowledged, and what a crash may lose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durability {
    /// Acknowledged only after a durable commit (fsync). A crash loses nothing acknowledged.
    #[default]
    Immediate,
    /// Acknowledged after a non-durable commit; a durable commit happens at least every
    /// `interval_ms`. A crash loses at most that window, never part of a batch.
    Periodic {
        /// Longest time between durable commits, in ms.
        interval_ms: u64,
    },
    /// Never fsynced while open (tests); made durable on a clean close.
    None,
}

/// Which events a [`Subscription`] follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One thread; the subscription's `after` is a [`Seq`].
    Thread(ThreadId),
    /// Every thread in lsn order; the subscription's `after` is an [`Lsn`].
    All,
}

/// A thread the wake index says is due, with the time it is due from: the cursor of the next
/// page of [`Store::due_threads`] is the last one's `(ready_at_ms, id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueThread {
    /// Due from (ms since the epoch; 0: due now).
    pub ready_at_ms: u64,
    /// The thread as stored.
    pub record: ThreadRecord,
}

/// Pagination for list calls: skip `offset`, return at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Most items returned (at most [`crate::limits::READ_LIMIT_MAX`]).
    pub limit: usize,
    /// Items skipped first.
    pub offset: usize,
}

impl Default for Page {
    fn default() -> Page {
        Page { limit: 100, offset: 0 }
    }
}

/// Filters for [`Store::list_threads`]; `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadFilter {
    /// Only threads with this status.
    pub status: Option<ThreadStatus>,
    /// Only threads of this workflow id.
    pub workflow_id: Option<String>,
    /// Only threads with this label key set to this value.
    pub label: Option<(String, String)>,
}

/// Filters for [`Store::list_checkpoints`]; `None`/empty matches everything.
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

/// One thing [`Store::verify`] found wrong, with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The table it is in.
    pub table: &'static str,
    /// The thread, when known.
    pub thread: Option<ThreadId>,
    /// The seq (events) or id (checkpoints), when known.
    pub seq: Option<Seq>,
    /// What is wrong.
    pub detail: String,
}

/// What [`Store::verify`] scanned and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Everything wrong; empty when the store is sound.
    pub problems: Vec<Problem>,
    /// Thread records scanned.
    pub threads: u64,
    /// Events scanned.
    pub events: u64,
    /// Checkpoints scanned.
    pub checkpoints: u64,
    /// Payloads scanned (hashes re-checked).
    pub payloads: u64,
    /// Locks scanned.
    pub locks: u64,
    /// Signals scanned (the signal inbox, format v3).
    pub signals: u64,
    /// Queue records and members scanned (format v4).
    pub queues: u64,
}

impl VerifyReport {
    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The storage interface. Object-safe; see the crate docs for the invariants every
/// implementation keeps.
pub trait Store: Send + Sync + 'static {
    /// Queues a batch for the next group commit. Limits are checked here, before queueing.
    ///
    /// # Errors
    ///
    /// Up front: [`Error::LimitExceeded`], [`Error::Invalid`], [`Error::Poisoned`],
    /// [`Error::Closed`], [`Error::ReadOnly`]. At commit (through the [`Pending`]): guard, lock,
    /// lease and unknown-thread errors, which reject only this batch; storage errors.
    fn append(&self, batch: Batch) -> Result<Pending, Error>;

    /// [`Store::append`] for async callers: resolves to the batch's [`Pending`] once the batch
    /// is queued, waiting (suspended, never blocking its thread) while the writer's queue is
    /// full. Batches queued one after the other by one task (each awaited before the next is
    /// asked for) reach the writer in that order.
    ///
    /// The provided implementation calls [`Store::append`]: right for a store whose queueing
    /// never waits on the network.
    ///
    /// # Errors
    ///
    /// As [`Store::append`].
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        Reading::ready(self.append(batch))
    }

    /// Up to `limit` events of `thread` with seq > `after`, in seq order.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownThread`]; [`Error::Pruned`] when `after + 1` was pruned;
    /// [`Error::Corrupted`] for any record (or gap) that fails a check.
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Result<Vec<Event>, Error>;

    /// The events of `thread` with `from <= seq <= to`.
    ///
    /// # Errors
    ///
    /// As [`Store::read_since`]; [`Error::LimitExceeded`] past `READ_LIMIT_MAX` events.
    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Result<Vec<Event>, Error>;

    /// The bookmark of `thread`'s last event, or `None` if it has none or does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if the thread record fails its checks.
    fn last_bookmark(&self, thread: &ThreadId) -> Result<Option<Bookmark>, Error>;

    /// Up to `limit` events of every thread with lsn > `after`, in lsn order.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] when a record of the log is damaged or not stored under its own lsn.
    fn read_all_since(&self, after: Lsn, limit: usize) -> Result<Vec<Event>, Error>;

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
    /// let found = store.read_correlated(&CorrelationQuery::new("order-7"), Lsn(0), 100)?;
    /// assert_eq!(found.len(), 1);
    /// assert_eq!(found[0].bookmark.seq, Seq(1));
    /// # Ok(())
    /// # }
    /// ```
    fn read_correlated(
        &self,
        query: &crate::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Result<Vec<Event>, Error>;

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
    fn payload(&self, r: &PayloadRef) -> Result<Vec<u8>, Error>;

    /// The checkpoint with its snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if its records fail their checks.
    fn checkpoint(&self, id: CheckpointId) -> Result<Option<Checkpoint>, Error>;

    /// Whether the checkpoint exists.
    ///
    /// # Errors
    ///
    /// Storage errors only.
    fn checkpoint_exists(&self, id: CheckpointId) -> Result<bool, Error>;

    /// The newest checkpoint of `thread` covering a seq <= `seq`.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if its records fail their checks.
    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Result<Option<Checkpoint>, Error>;

    /// The id of `thread`'s checkpoint covering exactly `seq` (the one written in the batch
    /// whose last event is `seq`), if there is one. The default reads it through
    /// [`Store::latest_checkpoint_at_or_before`]; a backend with an index answers without
    /// reading the snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if its records fail their checks.
    fn checkpoint_covering(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Result<Option<CheckpointId>, Error> {
        Ok(self
            .latest_checkpoint_at_or_before(thread, seq)?
            .filter(|cp| cp.covers.seq == seq)
            .map(|cp| cp.id))
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
    ) -> Result<Vec<CheckpointInfo>, Error>;

    /// Deletes a checkpoint; resolves to whether it existed.
    ///
    /// # Errors
    ///
    /// As [`Store::append`].
    fn delete_checkpoint(&self, id: CheckpointId) -> Result<Pending<bool>, Error>;

    /// Deletes every checkpoint of `thread`; resolves to how many were deleted.
    ///
    /// # Errors
    ///
    /// As [`Store::append`].
    fn clear_checkpoints(&self, thread: &ThreadId) -> Result<Pending<u64>, Error>;

    /// The thread's record.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] if it fails its checks.
    fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, Error>;

    /// Thread records matching `filter`, in id order, paged.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`Error::Corrupted`].
    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Result<Vec<ThreadRecord>, Error>;

    /// Thread records matching `filter` whose ids come after `after` (from the first when
    /// `None`) in the order [`Store::list_threads`] lists, at most `limit`: one page of a cursor
    /// walk (pass the last id returned as the next `after`). Memory holds the page only, and the
    /// file backend and PostgreSQL start reading at the cursor, so walking every thread costs
    /// one read of each whatever their number.
    ///
    /// The provided implementation pages through [`Store::list_threads`] and skips ids up to
    /// `after` in byte order (the file backend's order): correct for a store that lists in byte
    /// order, and slower than a range read; the backends override it.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`Error::Corrupted`].
    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, Error> {
        crate::limits::check("READ_LIMIT_MAX", limit, crate::limits::READ_LIMIT_MAX)?;
        let mut out = Vec::new();
        let mut offset = 0;
        loop {
            let page = self.list_threads(filter, Page { limit: limit.max(1), offset })?;
            let n = page.len();
            offset += n;
            for record in page {
                let past =
                    after.is_none_or(|a| record.id.as_str().as_bytes() > a.as_str().as_bytes());
                if past && out.len() < limit {
                    out.push(record);
                }
            }
            if n < limit.max(1) || out.len() >= limit {
                return Ok(out);
            }
        }
    }

    /// Up to `limit` signals of `thread`'s inbox with n > `after`, in n order (signals are
    /// numbered from 1 per thread; see [`crate::Batch::signals`]). An unknown thread has none.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`Error::Corrupted`] (table `signals`)
    /// for a damaged signal or one under another key.
    fn signals(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<crate::Signal>, Error>;

    /// Every queue with its limits and counts (running and waiting, per key), by name
    /// (`docs/queues.md`).
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] (table `queues`) for a damaged record.
    fn queues(&self) -> Result<Vec<crate::QueueState>, Error>;

    /// `thread`'s place in a queue: waiting (`admitted_at_ms` is `None`) or holding a slot;
    /// `None` when it is in no queue (never was, or has ended).
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`] (table `queue_members`) for a damaged record.
    fn queue_member(&self, thread: &ThreadId) -> Result<Option<crate::QueueMember>, Error>;

    /// Every stored lock (live or lapsed), by name.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupted`].
    fn locks(&self) -> Result<Vec<LockRecord>, Error>;

    /// Removes `thread`'s events covered by checkpoint `keep_from` and its older checkpoints, so
    /// the thread restores from `keep_from` and reads on from there.
    ///
    /// # Errors
    ///
    /// As [`Store::append`]; at commit [`Error::UnknownCheckpoint`] or [`Error::Invalid`] if the
    /// checkpoint is not this thread's.
    fn prune(&self, thread: &ThreadId, keep_from: CheckpointId) -> Result<Pending<Pruned>, Error>;

    /// Deletes `thread` whole, in one transaction (a crash leaves it whole or gone): its
    /// record, every event with its correlation-index entry, every checkpoint with its snapshot
    /// and index entries, the locks it owns, and the payloads its events reference that no
    /// other event references (see [`Deleted`]). Resolves to what was removed, or `None` when
    /// there is no such thread. Afterwards the id is free: a new thread may be created under
    /// it, starting again at seq 1 (lsns and checkpoint ids are never reused).
    ///
    /// Every record removed is read and checked first, as by [`Store::prune`]: a damaged one
    /// rejects the delete and nothing is removed. A thread whose events reference payloads
    /// costs a scan of the remaining log for other references to them (see the module docs of
    /// `storage/src/delete.rs`).
    ///
    /// # Errors
    ///
    /// As [`Store::append`]; at commit [`Error::Unfinished`] for a thread that has not finished
    /// unless `options.force`; [`Error::Corrupted`] for a record of the thread that fails its
    /// checks.
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
    /// let mut record = ThreadRecord::new(thread.clone(), workflow, 0);
    /// record.status = ThreadStatus::Completed;
    /// store.append(Batch { threads: vec![record], ..Batch::default() })?.wait_blocking()?;
    /// let deleted = store.delete_thread(&thread, DeleteOptions::default())?.wait_blocking()?;
    /// assert_eq!(deleted.map(|d| d.status), Some(ThreadStatus::Completed));
    /// assert!(store.thread(&thread)?.is_none());
    /// assert!(store.delete_thread(&thread, DeleteOptions::default())?.wait_blocking()?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    fn delete_thread(
        &self,
        thread: &ThreadId,
        options: DeleteOptions,
    ) -> Result<Pending<Option<Deleted>>, Error>;

    /// Scans everything and reports what is wrong.
    ///
    /// # Errors
    ///
    /// Storage errors only; problems in the data are in the report.
    fn verify(&self) -> Result<VerifyReport, Error>;

    // Async reads. Each is the sync read of the same name, as a future the caller awaits: what
    // the engine reads on its async paths. The defaults run the sync read inline, when the
    // method is called, and return its answer ready: right for a store whose reads are local
    // (a redb file reads memory and the page cache, microseconds, like any computation on a
    // runtime worker), and free of allocation. A store whose reads cross the network
    // (PostgreSQL) overrides them to hand the read to a connection of its own, so that the
    // caller's task is suspended for the round trip and no runtime worker is blocked.

    /// [`Store::thread`], awaited. The default reads inline (see the comment above these
    /// methods: local reads answer at once).
    fn thread_async(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        Reading::ready(self.thread(id))
    }

    /// [`Store::read_since`], awaited. The default reads inline.
    fn read_since_async(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        Reading::ready(self.read_since(thread, after, limit))
    }

    /// [`Store::read_range`], awaited. The default reads inline.
    fn read_range_async(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        Reading::ready(self.read_range(thread, from, to))
    }

    /// [`Store::read_all_since`], awaited. The default reads inline.
    fn read_all_since_async(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        Reading::ready(self.read_all_since(after, limit))
    }

    /// [`Store::read_correlated`], awaited (see the comment above these methods).
    fn read_correlated_async(
        &self,
        query: &crate::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        Reading::ready(self.read_correlated(query, after, limit))
    }

    /// [`Store::payload`], awaited. The default reads inline.
    fn payload_async(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        Reading::ready(self.payload(r))
    }

    /// [`Store::checkpoint`], awaited. The default reads inline.
    fn checkpoint_async(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        Reading::ready(self.checkpoint(id))
    }

    /// [`Store::latest_checkpoint_at_or_before`], awaited. The default reads inline.
    fn latest_checkpoint_at_or_before_async(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        Reading::ready(self.latest_checkpoint_at_or_before(thread, seq))
    }

    /// [`Store::checkpoint_covering`], awaited. The default reads inline.
    fn checkpoint_covering_async(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<CheckpointId>> {
        Reading::ready(self.checkpoint_covering(thread, seq))
    }

    /// [`Store::list_checkpoints`], awaited. The default reads inline.
    fn list_checkpoints_async(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        Reading::ready(self.list_checkpoints(filter, page))
    }

    /// [`Store::list_threads`], awaited. The default reads inline.
    fn list_threads_async(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>> {
        Reading::ready(self.list_threads(filter, page))
    }

    /// [`Store::list_threads_after`], awaited. The default reads inline.
    fn list_threads_after_async(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        Reading::ready(self.list_threads_after(filter, after, limit))
    }

    /// [`Store::signals`], awaited. The default reads inline.
    fn signals_async(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Reading<Vec<crate::Signal>> {
        Reading::ready(self.signals(thread, after, limit))
    }

    /// [`Store::locks`], awaited. The default reads inline.
    fn locks_async(&self) -> Reading<Vec<LockRecord>> {
        Reading::ready(self.locks())
    }

    /// [`Store::queues`], awaited. The default reads inline.
    fn queues_async(&self) -> Reading<Vec<crate::QueueState>> {
        Reading::ready(self.queues())
    }

    /// [`Store::queue_member`], awaited. The default reads inline.
    fn queue_member_async(&self, thread: &ThreadId) -> Reading<Option<crate::QueueMember>> {
        Reading::ready(self.queue_member(thread))
    }

    /// [`Store::due_threads`], awaited. The default reads inline.
    fn due_threads_async(
        &self,
        workflows: &[String],
        horizon_ms: u64,
        after: Option<&(u64, ThreadId)>,
        limit: usize,
    ) -> Reading<Option<Vec<DueThread>>> {
        Reading::ready(self.due_threads(workflows, horizon_ms, after, limit))
    }

    /// The durability mode writes are acknowledged under.
    fn durability(&self) -> Durability;

    /// Whether only this process can write the database (a redb file, held by its lock), so
    /// that a lease found on a thread belongs to a process that died. False for a database that
    /// several processes share (PostgreSQL).
    fn exclusive(&self) -> bool {
        true
    }

    /// Announces a write the caller is computing and will queue soon (see [`crate::WriteIntent`]):
    /// while the returned guard is held, a store that gathers writes into group commits may keep
    /// a group open for it, within its usual gathering bound. `None`: this store does not use
    /// intents (the default). Grouping only: what is written, and when a write is acknowledged
    /// (after the commit that holds it), is the same either way.
    fn intend_write(&self) -> Option<crate::WriteIntent> {
        None
    }

    /// Unfinished threads of `workflows` that may need an engine by now plus `horizon_ms`
    /// (a lease lapsing, a timer or deadline falling due, or not known: see
    /// [`crate::Batch::wakes`]), soonest first (by `(ready_at_ms, id)`), after `after` (the last
    /// of the previous page), at most `limit`; read through an index, so a worker looking for
    /// work reads the threads due, not every unfinished one. `None`: this store keeps no such
    /// index (a redb file, whose one engine finds its work at open), and the caller lists
    /// unfinished threads instead. What is due is a hint: the caller decides from the record
    /// (and the log) as it would from a listing.
    ///
    /// # Errors
    /// Storage errors.
    fn due_threads(
        &self,
        workflows: &[String],
        horizon_ms: u64,
        after: Option<&(u64, ThreadId)>,
        limit: usize,
    ) -> Result<Option<Vec<DueThread>>, Error> {
        let _ = (workflows, horizon_ms, after, limit);
        Ok(None)
    }

    /// The last committed lsn, moving as commits land, where the database may be written by
    /// other processes too (PostgreSQL: heard through LISTEN/NOTIFY): engines serving a shared
    /// database look for work when it moves. `None` where only this process writes.
    fn commits(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// The metric handles this store's writer reports its group commits to
    /// ([`crate::telemetry`]); `None` for a store that reports none (a read-only one).
    fn metrics(&self) -> Option<&crate::telemetry::StoreMetrics> {
        None
    }

    /// Whether the database answers, as the store's connections last found (a store on a
    /// server: PostgreSQL); `None` for a store that has no server to lose (a file). Known
    /// without a round trip, so a health check asks it first.
    fn database(&self) -> Option<crate::telemetry::DatabaseState> {
        self.metrics().and_then(crate::telemetry::StoreMetrics::database)
    }

    /// Passes `message` to whichever process drives `thread`, where the database is shared (on
    /// PostgreSQL a NOTIFY that every store on the database hears, through
    /// [`Store::driver_messages`]). Best effort and not durable: a message can be lost (a
    /// listener reconnecting), so a sender that needs an outcome waits for it in the store and
    /// acts itself when it does not come. Where only this process writes there is nobody else
    /// to tell, and this does nothing. The caller awaits the send (on PostgreSQL a round trip to
    /// the server, made by a connection of the store's own: no runtime worker waits for it).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a message over [`crate::limits::DRIVER_MESSAGE_BYTES_MAX`];
    /// storage errors.
    fn tell_driver(&self, thread: &ThreadId, message: &str) -> Reading<()> {
        let _ = (thread, message);
        Reading::ready(Ok(()))
    }

    /// The messages of [`Store::tell_driver`] sent by any process on the database (this one
    /// included), from now on; `None` where only this process writes. A receiver that falls
    /// behind by more than [`crate::limits::DRIVER_MESSAGES_QUEUED_MAX`] loses the oldest.
    fn driver_messages(&self) -> Option<tokio::sync::broadcast::Receiver<DriverMessage>> {
        None
    }
}

/// A message for the driver of a thread: see [`Store::tell_driver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverMessage {
    /// The thread it is about.
    pub thread: ThreadId,
    /// What it says (the engine's business).
    pub message: String,
}

/// Convenience helpers over any [`Store`]; each builds one batch and waits for its commit.
pub trait StoreExt: Store {
    /// Appends and waits for the commit.
    ///
    /// # Errors
    ///
    /// As [`Store::append`] and [`Pending::wait`].
    fn append_wait(&self, batch: Batch) -> impl Future<Output = Result<Appended, Error>> + Send {
        let queued = self.append_async(batch);
        async move { queued.await?.wait().await }
    }

    /// Takes lock `name` for `owner` until `now_ms + ttl_ms`.
    ///
    /// # Errors
    ///
    /// [`Error::LockHeld`] while another owner holds it.
    fn acquire_lock(
        &self,
        name: &str,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LockOp::Acquire { name: name.into(), owner: owner.into(), now_ms, ttl_ms };
        unit(self.append_async(Batch { locks: vec![op], ..Batch::default() }))
    }

    /// Extends lock `name` held by `owner` to `now_ms + ttl_ms`.
    ///
    /// # Errors
    ///
    /// [`Error::LockNotHeld`].
    fn renew_lock(
        &self,
        name: &str,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LockOp::Renew { name: name.into(), owner: owner.into(), now_ms, ttl_ms };
        unit(self.append_async(Batch { locks: vec![op], ..Batch::default() }))
    }

    /// Releases lock `name` held by `owner` (a missing lock is fine).
    ///
    /// # Errors
    ///
    /// [`Error::LockNotHeld`] if another owner holds it.
    fn release_lock(
        &self,
        name: &str,
        owner: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LockOp::Release { name: name.into(), owner: owner.into() };
        unit(self.append_async(Batch { locks: vec![op], ..Batch::default() }))
    }

    /// Releases every lock `owner` holds.
    ///
    /// # Errors
    ///
    /// Storage errors only.
    fn release_all_locks(&self, owner: &str) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LockOp::ReleaseAll { owner: owner.into() };
        unit(self.append_async(Batch { locks: vec![op], ..Batch::default() }))
    }

    /// Takes `thread`'s lease for `owner` until `now_ms + ttl_ms`.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] while another runner holds it; [`Error::UnknownThread`].
    fn acquire_lease(
        &self,
        thread: &ThreadId,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LeaseOp::Acquire { thread: thread.clone(), owner: owner.into(), now_ms, ttl_ms };
        unit(self.append_async(Batch { leases: vec![op], ..Batch::default() }))
    }

    /// Extends `thread`'s lease held by `owner` to `now_ms + ttl_ms`.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseNotHeld`]; [`Error::UnknownThread`].
    fn renew_lease(
        &self,
        thread: &ThreadId,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LeaseOp::Renew { thread: thread.clone(), owner: owner.into(), now_ms, ttl_ms };
        unit(self.append_async(Batch { leases: vec![op], ..Batch::default() }))
    }

    /// Releases `thread`'s lease held by `owner`.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseNotHeld`] if another runner holds it; [`Error::UnknownThread`].
    fn release_lease(
        &self,
        thread: &ThreadId,
        owner: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let op = LeaseOp::Release { thread: thread.clone(), owner: owner.into() };
        unit(self.append_async(Batch { leases: vec![op], ..Batch::default() }))
    }

    /// Sets `thread`'s status to `new` (and `updated_at_ms` to `now_ms`) if it is `expected`;
    /// returns the record as written (its store-maintained fields as they were read).
    ///
    /// The guard makes the status change a compare-and-set; the other fields of the record are
    /// those read just before, so a concurrent upsert of the same thread's labels or summary
    /// between the read and the commit is overwritten (one runner drives a thread, under its
    /// lease, so this does not arise in the engine).
    ///
    /// # Errors
    ///
    /// [`Error::GuardFailed`] if the status is not `expected`; [`Error::UnknownThread`].
    fn set_status_cas(
        &self,
        thread: &ThreadId,
        expected: ThreadStatus,
        new: ThreadStatus,
        now_ms: u64,
    ) -> impl Future<Output = Result<ThreadRecord, Error>> + Send {
        let prepared = self.thread(thread).and_then(|record| {
            let mut record = record.ok_or_else(|| Error::UnknownThread(thread.clone()))?;
            record.status = new;
            record.updated_at_ms = now_ms;
            let guard = Guard::Status { thread: thread.clone(), expected };
            let batch =
                Batch { threads: vec![record.clone()], guards: vec![guard], ..Batch::default() };
            Ok((record, self.append_async(batch)))
        });
        async move {
            let (record, queued) = prepared?;
            queued.await?.wait().await?;
            Ok(record)
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

async fn unit(queued: Reading<Pending>) -> Result<(), Error> {
    queued.await?.wait().await?;
    Ok(())
}
