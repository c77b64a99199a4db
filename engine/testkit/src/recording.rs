//! [`RecordingStore`]: a [`Store`] wrapper that remembers every event the store acknowledged
//! and notices the first storage failure.
//!
//! The crash harness needs two facts the engine does not expose: which events were
//! acknowledged (their `Pending` resolved `Ok`: under [`Durability::Immediate`] that is the
//! promise "this survives any crash"), and the moment storage failed (after which the process is
//! as good as dead: the store is poisoned until reopened). The wrapper answers both by forwarding
//! every call and watching the answers. It changes nothing the engine sees: the same results, in
//! the same order, and an acknowledged batch is recorded *before* the engine learns of it, so a
//! test never sees an acknowledgement the record lacks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cairn_storage::{
    Append, Appended, Backend, Batch, Bookmark, Catalog, Checkpoint, CheckpointFilter,
    CheckpointId, CheckpointInfo, Durability, Error, Event, LockRecord, Lsn, Maintenance, Page,
    PayloadRef, Pending, Pruned, Reading, Scope, Seq, SharedDatabase, Store, Subscription,
    ThreadFilter, ThreadId, ThreadLog, ThreadRecord, VerifyReport,
};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Called with every acknowledged event, in acknowledgement order (see
/// [`RecordingStore::on_ack`]).
pub type AckHook = Arc<dyn Fn(&Event) + Send + Sync>;

/// A [`Store`] that forwards everything to another store and records what it acknowledged.
///
/// Give it to [`Engine::with_store`](cairn::Engine::with_store) (as `Arc<dyn Store>`) and keep
/// a clone of the `Arc` to ask, at any time, which events were acknowledged, how many appends
/// were, and whether (and how) storage failed.
///
/// A *failure* is an error that means the store can no longer be trusted to write:
/// [`Error::Storage`], [`Error::DiskFull`], [`Error::Poisoned`], [`Error::Closed`] or
/// [`Error::Corrupted`]. Errors
/// that reject one request and leave the store healthy (a failed guard, a held lock, an unknown
/// thread, a limit) are passed on and not counted.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use cairn::storage::{Options, RedbStore, Store};
/// use cairn_testkit::RecordingStore;
///
/// # fn main() -> Result<(), cairn::Error> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let redb = RedbStore::open(dir.path().join("t.db"), Options::default())?;
/// let store = Arc::new(RecordingStore::new(Arc::new(redb)));
/// let for_engine: Arc<dyn Store> = store.clone();
/// # drop(for_engine);
/// assert_eq!(store.acked_appends(), 0);
/// assert!(store.failure().is_none());
/// # Ok(()) }
/// ```
pub struct RecordingStore {
    inner: Arc<dyn Store>,
    shared: Arc<Shared>,
}

struct Shared {
    acked: Mutex<Vec<Event>>,
    appends: watch::Sender<u64>,
    failed: CancellationToken,
    first_error: Mutex<Option<Error>>,
    in_flight: TaskTracker,
    hook: Mutex<Option<AckHook>>,
    /// Events returned by the event reads (`read_since`, `read_range`, `read_all_since`,
    /// `read_correlated`).
    events_read: AtomicU64,
}

impl RecordingStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Store>) -> RecordingStore {
        let (appends, _) = watch::channel(0);
        RecordingStore {
            inner,
            shared: Arc::new(Shared {
                acked: Mutex::new(Vec::new()),
                appends,
                failed: CancellationToken::new(),
                first_error: Mutex::new(None),
                in_flight: TaskTracker::new(),
                hook: Mutex::new(None),
                events_read: AtomicU64::new(0),
            }),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    /// Every event acknowledged so far, in acknowledgement order, with the bookmark the store
    /// gave it.
    pub fn acked_events(&self) -> Vec<Event> {
        lock(&self.shared.acked).clone()
    }

    /// The acknowledged events from number `n` on (0-based, in acknowledgement order).
    pub fn acked_since(&self, n: usize) -> Vec<Event> {
        lock(&self.shared.acked).get(n..).map(<[Event]>::to_vec).unwrap_or_default()
    }

    /// How many appends were acknowledged so far.
    pub fn acked_appends(&self) -> u64 {
        *self.shared.appends.borrow()
    }

    /// A receiver of the acknowledged-append count: it changes after every acknowledged append
    /// (the harness waits on it instead of sleeping).
    pub fn watch_appends(&self) -> watch::Receiver<u64> {
        self.shared.appends.subscribe()
    }

    /// Calls `hook` with every event acknowledged from now on, before the engine sees the
    /// acknowledgement (the reliability suite's child process prints each one).
    pub fn on_ack(&self, hook: AckHook) {
        *lock(&self.shared.hook) = Some(hook);
    }

    /// The failure seen, if any: the first storage or corruption error (the cause, also when
    /// it was seen as the `Poisoned` refusal that names it), else `Closed` when no cause was
    /// seen.
    pub fn failure(&self) -> Option<Error> {
        lock(&self.shared.first_error).clone()
    }

    /// Completes once a failure has been seen (at once if one was).
    pub async fn failed(&self) {
        self.shared.failed.cancelled().await;
    }

    /// Whether a failure has been seen.
    pub fn has_failed(&self) -> bool {
        self.shared.failed.is_cancelled()
    }

    /// Waits until every write handed to the inner store has been answered (and recorded).
    pub async fn settle(&self) {
        self.shared.in_flight.close();
        self.shared.in_flight.wait().await;
        self.shared.in_flight.reopen();
    }

    /// Events the store has returned to event reads (`read_since`, `read_range`,
    /// `read_all_since`, `read_correlated`) through this wrapper: what a query cost in records.
    pub fn events_read(&self) -> u64 {
        self.shared.events_read.load(Ordering::Relaxed)
    }

    fn watch<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &result {
            self.shared.fail(e);
        }
        result
    }

    /// Checks a read's answer as it arrives.
    fn watch_read<T: Send + 'static>(&self, reading: Reading<T>) -> Reading<T> {
        self.watch_events(reading, |_| 0)
    }

    /// Checks a read's answer as it arrives, and adds the events `count` says it holds to
    /// [`RecordingStore::events_read`].
    fn watch_events<T>(&self, reading: Reading<T>, count: fn(&T) -> usize) -> Reading<T>
    where
        T: Send + 'static,
    {
        let shared = self.shared.clone();
        reading.inspect(move |result| match result {
            Ok(value) => {
                shared.events_read.fetch_add(count(value) as u64, Ordering::Relaxed);
            }
            Err(e) => shared.fail(e),
        })
    }

    /// Forwards `pending`'s answer through a task that records it first.
    fn forward<T: Send + 'static>(
        &self,
        pending: Pending<T>,
        on_ok: impl FnOnce(&Shared, &T) + Send + 'static,
    ) -> Pending<T> {
        let shared = self.shared.clone();
        let relay = async move |pending: Pending<T>| {
            let result = pending.wait().await;
            match &result {
                Ok(value) => on_ok(&shared, value),
                Err(e) => shared.fail(e),
            }
            result
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let (tx, rx) = oneshot::channel();
                let task = relay(pending);
                self.shared.in_flight.spawn_on(
                    async move {
                        let _ = tx.send(task.await);
                    },
                    &handle,
                );
                Pending::new(rx)
            }
            // Outside a runtime the caller blocks on the answer anyway.
            Err(_) => Pending::ready(futures::executor::block_on(relay(pending))),
        }
    }
}

impl Shared {
    fn fail(&self, error: &Error) {
        // A refusal names the failure that poisoned the store: that failure is what was seen.
        let error = match error {
            Error::Poisoned { cause } => cause.as_ref(),
            other => other,
        };
        let fatal = matches!(
            error,
            Error::Storage { .. }
                | Error::DiskFull { .. }
                | Error::Poisoned { .. }
                | Error::Closed
                | Error::Corrupted { .. }
        );
        if fatal {
            // Keep the cause, not its echo: once a commit failed, later writes are refused
            // (`Closed` when the store stopped), and those refusals may be answered first.
            let cause = |e: &Error| {
                matches!(
                    e,
                    Error::Storage { .. } | Error::DiskFull { .. } | Error::Corrupted { .. }
                )
            };
            let mut first = lock(&self.first_error);
            if first.as_ref().is_none_or(|known| !cause(known) && cause(error)) {
                *first = Some(error.clone());
            }
            drop(first);
            self.failed.cancel();
        }
    }

    fn acknowledge(&self, events: Vec<Event>) {
        let hook = lock(&self.hook).clone();
        if let Some(hook) = hook {
            for event in &events {
                hook(event);
            }
        }
        lock(&self.acked).extend(events);
        self.appends.send_modify(|n| *n += 1);
    }
}

impl std::fmt::Debug for RecordingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingStore")
            .field("acked_appends", &self.acked_appends())
            .field("failure", &self.failure())
            .finish_non_exhaustive()
    }
}

impl Append for RecordingStore {
    fn append(&self, batch: Batch) -> Result<Pending, Error> {
        let new_events = batch.events.clone();
        let pending = self.watch(self.inner.append(batch))?;
        Ok(self.forward(pending, move |shared, appended: &Appended| {
            let events = new_events
                .into_iter()
                .zip(&appended.bookmarks)
                .map(|(new, bookmark)| Event {
                    bookmark: *bookmark,
                    thread: new.thread,
                    kind: new.kind,
                    node: new.node,
                    status: new.status,
                    summary: new.summary,
                    payload: new.payload,
                    data: new.data,
                    correlation: new.correlation,
                })
                .collect();
            shared.acknowledge(events);
        }))
    }

    /// Queued as [`RecordingStore::append`] queues (blocking while the writer's queue is full),
    /// so that every acknowledgement is recorded on the one path.
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        Reading::ready(self.append(batch))
    }

    fn durability(&self) -> Durability {
        self.inner.durability()
    }
}

/// What the wrapped store offers, carried (its shared database's reads checked like the
/// others, below).
impl Backend for RecordingStore {
    fn shared(&self) -> Option<&dyn SharedDatabase> {
        // Shared exactly when the wrapped store is (the methods below reach it).
        self.inner.shared().map(|_| self as &dyn SharedDatabase)
    }

    fn intend_write(&self) -> Option<cairn_storage::WriteIntent> {
        self.inner.intend_write()
    }

    fn metrics(&self) -> Option<&cairn_storage::telemetry::StoreMetrics> {
        self.inner.metrics()
    }

    fn refusals(&self) -> Option<tokio::sync::watch::Receiver<Option<Error>>> {
        self.inner.refusals()
    }

    fn database(&self) -> Option<cairn_storage::telemetry::DatabaseState> {
        self.inner.database()
    }
}

impl ThreadLog for RecordingStore {
    fn last_lsn(&self) -> Lsn {
        self.inner.last_lsn()
    }

    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        self.watch_events(self.inner.read_since(thread, after, limit), Vec::len)
    }

    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        self.watch_events(self.inner.read_range(thread, from, to), Vec::len)
    }

    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        self.watch_events(self.inner.read_all_since(after, limit), Vec::len)
    }

    fn read_correlated(
        &self,
        query: &cairn_storage::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        self.watch_events(self.inner.read_correlated(query, after, limit), Vec::len)
    }

    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, Error> {
        self.watch(self.inner.subscribe(scope, after))
    }

    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        self.watch_read(self.inner.payload(r))
    }

    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        self.watch_read(self.inner.checkpoint(id))
    }

    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.watch_read(self.inner.checkpoint_exists(id))
    }

    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        self.watch_read(self.inner.latest_checkpoint_at_or_before(thread, seq))
    }

    fn checkpoint_covering(&self, thread: &ThreadId, seq: Seq) -> Reading<Option<CheckpointId>> {
        self.watch_read(self.inner.checkpoint_covering(thread, seq))
    }

    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        self.watch_read(self.inner.list_checkpoints(filter, page))
    }
}

impl Catalog for RecordingStore {
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        self.watch_read(self.inner.thread(id))
    }

    fn last_bookmark(&self, thread: &ThreadId) -> Reading<Option<Bookmark>> {
        self.watch_read(self.inner.last_bookmark(thread))
    }

    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>> {
        self.watch_read(self.inner.list_threads(filter, page))
    }

    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        self.watch_read(self.inner.list_threads_after(filter, after, limit))
    }

    fn signals(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Reading<Vec<cairn_storage::Signal>> {
        self.watch_read(self.inner.signals(thread, after, limit))
    }

    fn queues(&self) -> Reading<Vec<cairn_storage::QueueState>> {
        self.watch_read(self.inner.queues())
    }

    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<cairn_storage::QueueMember>> {
        self.watch_read(self.inner.queue_member(thread))
    }

    fn locks(&self) -> Reading<Vec<LockRecord>> {
        self.watch_read(self.inner.locks())
    }
}

impl Maintenance for RecordingStore {
    fn delete_checkpoint(&self, id: CheckpointId) -> Result<Pending<bool>, Error> {
        let pending = self.watch(self.inner.delete_checkpoint(id))?;
        Ok(self.forward(pending, |_, _| {}))
    }

    fn clear_checkpoints(&self, thread: &ThreadId) -> Result<Pending<u64>, Error> {
        let pending = self.watch(self.inner.clear_checkpoints(thread))?;
        Ok(self.forward(pending, |_, _| {}))
    }

    fn prune(&self, thread: &ThreadId, keep_from: CheckpointId) -> Result<Pending<Pruned>, Error> {
        let pending = self.watch(self.inner.prune(thread, keep_from))?;
        Ok(self.forward(pending, |_, _| {}))
    }

    fn delete_thread(
        &self,
        thread: &ThreadId,
        options: cairn_storage::DeleteOptions,
    ) -> Result<Pending<Option<cairn_storage::Deleted>>, Error> {
        let pending = self.watch(self.inner.delete_thread(thread, options))?;
        Ok(self.forward(pending, |_, _| {}))
    }

    fn verify(&self) -> Result<VerifyReport, Error> {
        self.watch(self.inner.verify())
    }
}

// The shared database's reads, checked like the others (the rest forwarded as they are).
impl SharedDatabase for RecordingStore {
    fn due_threads(
        &self,
        workflows: &[String],
        horizon_ms: u64,
        after: Option<&(u64, ThreadId)>,
        limit: usize,
    ) -> Reading<Vec<cairn_storage::DueThread>> {
        match self.inner.shared() {
            Some(db) => self.watch_read(db.due_threads(workflows, horizon_ms, after, limit)),
            None => Reading::ready(Ok(Vec::new())),
        }
    }

    fn commits(&self) -> watch::Receiver<u64> {
        self.inner.shared().map_or_else(|| watch::channel(0).1, SharedDatabase::commits)
    }

    fn tell_driver(&self, thread: &ThreadId, message: &str) -> Reading<()> {
        self.inner.shared().map_or(Reading::ready(Ok(())), |db| db.tell_driver(thread, message))
    }

    fn driver_messages(&self) -> tokio::sync::broadcast::Receiver<cairn_storage::DriverMessage> {
        self.inner
            .shared()
            .map_or_else(|| tokio::sync::broadcast::channel(1).1, SharedDatabase::driver_messages)
    }
}

impl Store for RecordingStore {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The recorded data stays valid if a hook panicked while the lock was held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
