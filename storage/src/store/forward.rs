//! Forwarding for decorators: a store that wraps another (to count, delay or fail some calls)
//! implements the roles it changes and marks the others `Forward*`, which hands them, unchanged,
//! to the store it wraps. What the wrapped store offers beyond the roles ([`Backend`]: a
//! shared database, intents, metrics, refusals) every decorator carries by construction: it is
//! implemented here for every [`Decorates`], and a decorator cannot implement it itself.

use tokio::sync::watch;

use crate::batch::{Batch, Pruned};
use crate::checkpoint::{Checkpoint, CheckpointInfo};
use crate::correlation::CorrelationQuery;
use crate::delete::{DeleteOptions, Deleted};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Bookmark, CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::intent::WriteIntent;
use crate::lock::LockRecord;
use crate::pending::Pending;
use crate::queue::{QueueMember, QueueState};
use crate::reading::Reading;
use crate::signal::Signal;
use crate::subscription::Subscription;
use crate::telemetry::{DatabaseState, StoreMetrics};
use crate::thread::ThreadRecord;

use super::{
    Append, Backend, Catalog, CheckpointFilter, Durability, Maintenance, Page, Scope, Store,
    ThreadFilter, ThreadLog, VerifyReport,
};

/// A store wrapping another.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use cairn_storage::*;
///
/// /// Counts appends; everything else is the wrapped store's.
/// struct Counting { inner: Arc<dyn Store>, appends: AtomicU64 }
///
/// impl Decorates for Counting {
///     fn inner(&self) -> &dyn Store { &*self.inner }
/// }
/// impl ForwardLog for Counting {}
/// impl ForwardCatalog for Counting {}
/// impl ForwardMaintenance for Counting {}
/// impl Append for Counting {
///     fn append(&self, batch: Batch) -> Result<Pending, Error> {
///         self.appends.fetch_add(1, Ordering::Relaxed);
///         self.inner.append(batch)
///     }
///     fn append_async(&self, batch: Batch) -> Reading<Pending> {
///         self.appends.fetch_add(1, Ordering::Relaxed);
///         self.inner.append_async(batch)
///     }
///     fn durability(&self) -> Durability { self.inner.durability() }
/// }
/// impl Store for Counting {}
///
/// # fn main() -> Result<(), Error> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let file = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
/// let store = Counting { inner: Arc::new(file), appends: AtomicU64::new(0) };
/// store.append(Batch::default())?.wait_blocking()?;
/// assert_eq!(store.appends.load(Ordering::Relaxed), 1);
/// assert!(store.thread(&ThreadId::new("t1")?).wait()?.is_none());
/// assert!(store.metrics().is_some()); // what the file offers, carried (see [`Backend`])
/// # Ok(())
/// # }
/// ```
pub trait Decorates: Send + Sync + 'static {
    /// The store this one wraps.
    fn inner(&self) -> &dyn Store;
}

/// Hands [`Append`] to [`Decorates::inner`].
pub trait ForwardAppend: Decorates {}

/// Hands [`ThreadLog`] to [`Decorates::inner`].
pub trait ForwardLog: Decorates {}

/// Hands [`Catalog`] to [`Decorates::inner`].
pub trait ForwardCatalog: Decorates {}

/// Hands [`Maintenance`] to [`Decorates::inner`].
pub trait ForwardMaintenance: Decorates {}

impl<T: Decorates> Backend for T {
    fn shared(&self) -> Option<&dyn super::SharedDatabase> {
        self.inner().shared()
    }
    fn intend_write(&self) -> Option<WriteIntent> {
        self.inner().intend_write()
    }
    fn metrics(&self) -> Option<&StoreMetrics> {
        self.inner().metrics()
    }
    fn refusals(&self) -> Option<watch::Receiver<Option<Error>>> {
        self.inner().refusals()
    }
    fn database(&self) -> Option<DatabaseState> {
        self.inner().database()
    }
}

impl<T: ForwardAppend> Append for T {
    fn append(&self, batch: Batch) -> Result<Pending, Error> {
        self.inner().append(batch)
    }
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        self.inner().append_async(batch)
    }
    fn append_all(&self, batches: &mut Vec<Batch>) -> Vec<Pending> {
        self.inner().append_all(batches)
    }
    fn durability(&self) -> Durability {
        self.inner().durability()
    }
}

impl<T: ForwardLog> ThreadLog for T {
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        self.inner().read_since(thread, after, limit)
    }
    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        self.inner().read_range(thread, from, to)
    }
    fn last_lsn(&self) -> Lsn {
        self.inner().last_lsn()
    }
    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        self.inner().read_all_since(after, limit)
    }
    fn read_correlated(
        &self,
        query: &CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        self.inner().read_correlated(query, after, limit)
    }
    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, Error> {
        self.inner().subscribe(scope, after)
    }
    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        self.inner().payload(r)
    }
    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        self.inner().checkpoint(id)
    }
    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.inner().checkpoint_exists(id)
    }
    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        self.inner().latest_checkpoint_at_or_before(thread, seq)
    }
    fn checkpoint_covering(&self, thread: &ThreadId, seq: Seq) -> Reading<Option<CheckpointId>> {
        self.inner().checkpoint_covering(thread, seq)
    }
    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        self.inner().list_checkpoints(filter, page)
    }
}

impl<T: ForwardCatalog> Catalog for T {
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        self.inner().thread(id)
    }
    fn last_bookmark(&self, thread: &ThreadId) -> Reading<Option<Bookmark>> {
        self.inner().last_bookmark(thread)
    }
    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>> {
        self.inner().list_threads(filter, page)
    }
    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        self.inner().list_threads_after(filter, after, limit)
    }
    fn signals(&self, thread: &ThreadId, after: u64, limit: usize) -> Reading<Vec<Signal>> {
        self.inner().signals(thread, after, limit)
    }
    fn queues(&self) -> Reading<Vec<QueueState>> {
        self.inner().queues()
    }
    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<QueueMember>> {
        self.inner().queue_member(thread)
    }
    fn locks(&self) -> Reading<Vec<LockRecord>> {
        self.inner().locks()
    }
}

impl<T: ForwardMaintenance> Maintenance for T {
    fn delete_checkpoint(&self, id: CheckpointId) -> Result<Pending<bool>, Error> {
        self.inner().delete_checkpoint(id)
    }
    fn clear_checkpoints(&self, thread: &ThreadId) -> Result<Pending<u64>, Error> {
        self.inner().clear_checkpoints(thread)
    }
    fn prune(&self, thread: &ThreadId, keep_from: CheckpointId) -> Result<Pending<Pruned>, Error> {
        self.inner().prune(thread, keep_from)
    }
    fn delete_thread(
        &self,
        thread: &ThreadId,
        options: DeleteOptions,
    ) -> Result<Pending<Option<Deleted>>, Error> {
        self.inner().delete_thread(thread, options)
    }
    fn verify(&self) -> Result<VerifyReport, Error> {
        self.inner().verify()
    }
}
