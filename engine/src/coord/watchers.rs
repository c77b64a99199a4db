//! Status channels of the threads someone waits on (handles awaiting an outcome).
//!
//! A channel exists while somebody listens to a thread that has not ended (or, opened by a
//! `start` whose runner drives the thread, until that runner lets it go), so the channels are
//! bounded by the threads being waited on or run, not by every thread ever waited on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_storage::{Store, ThreadId, ThreadStatus};
use tokio::sync::watch;

use crate::error::Error;

/// What a status channel carries: the thread's status, how it ended when the runner that
/// ended it published that (so a waiter need not read it back), and the error its runner
/// stopped with when it stopped without ending or parking it (nothing drives it then).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub status: ThreadStatus,
    pub ended: Option<Arc<Ended>>,
    pub stopped: Option<Arc<Error>>,
}

impl Seen {
    fn status(status: ThreadStatus) -> Seen {
        Seen { status, ended: None, stopped: None }
    }
}

/// How a thread ended, as the runner that ended it committed it.
#[derive(Debug)]
pub(crate) struct Ended {
    /// Its terminal status.
    pub status: ThreadStatus,
    /// Its final state, when it completed.
    pub output: Option<serde_json::Value>,
    /// Its last error.
    pub error: Option<String>,
}

/// Locks ordering the status reads and publications of threads: one thread's always take the
/// same, two threads' rarely the same, so waits on different threads do not queue behind each
/// other's reads (a PostgreSQL round trip each).
const READING_STRIPES: usize = 64;

/// The status channels, keyed by thread.
pub(super) struct Watchers {
    store: Arc<dyn Store>,
    channels: Mutex<HashMap<ThreadId, watch::Sender<Seen>>>,
    /// Held across each read of a thread's stored status and what is done with it (publishing
    /// it, opening a channel on it), so that one thread's reads and publications happen in one
    /// order: async locks, since the read is awaited (on PostgreSQL a round trip), striped by
    /// thread ([`READING_STRIPES`]).
    reading: Box<[tokio::sync::Mutex<()>]>,
    /// Ends published by runners, kept until they let their threads go.
    ends: Mutex<HashMap<ThreadId, Ended>>,
}

impl Watchers {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            channels: Mutex::new(HashMap::new()),
            reading: (0..READING_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            ends: Mutex::new(HashMap::new()),
        }
    }

    /// The lock ordering `thread`'s reads and publications.
    fn reading(&self, thread: &ThreadId) -> &tokio::sync::Mutex<()> {
        use std::hash::BuildHasher as _;
        // A fixed hasher: the stripe depends on the id only.
        let hash =
            std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(thread);
        &self.reading[(hash % READING_STRIPES as u64) as usize]
    }

    fn channels(&self) -> MutexGuard<'_, HashMap<ThreadId, watch::Sender<Seen>>> {
        // Nothing panics while this lock is held; a poisoned lock would still hold valid data.
        self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes the stored status of `thread` (or `status` if it cannot be read).
    pub async fn changed(&self, thread: &ThreadId, status: ThreadStatus) {
        let _reading = self.reading(thread).lock().await;
        if !self.channels().contains_key(thread) {
            return;
        }
        // Publish the stored status, read under the lock, not the caller's: callers notify
        // after letting go of the thread, so a later change (a resume right after a pause) may
        // have been committed and notified in between, and must not be overwritten by an older
        // status (a handle would then wait on, or report, a status the thread has left).
        let status = match self.store.thread(thread).await {
            Ok(Some(record)) => record.status,
            _ => status,
        };
        let mut channels = self.channels();
        let Some(tx) = channels.get(thread) else { return };
        tx.send_replace(Seen::status(status));
        // Nobody listens any more (a waiter gave up): the next `watch` starts a new channel.
        if status.is_terminal() || tx.receiver_count() == 0 {
            channels.remove(thread);
        }
    }

    /// Publishes the stored status of every thread someone waits on but `skip` (another process
    /// may have moved it: on a shared database, status changes of threads driven elsewhere
    /// arrive this way).
    pub async fn refresh_all(&self, skip: impl Fn(&ThreadId) -> bool) {
        let threads: Vec<ThreadId> = self.channels().keys().filter(|t| !skip(t)).cloned().collect();
        for thread in threads {
            let current = self.channels().get(&thread).map(|tx| tx.borrow().status);
            if let Some(status) = current {
                self.changed(&thread, status).await;
            }
        }
    }

    /// Drops `thread`'s channel if nobody listens to it any more.
    pub fn unwatch_if_unused(&self, thread: &ThreadId) {
        let mut channels = self.channels();
        if channels.get(thread).is_some_and(|tx| tx.receiver_count() == 0) {
            channels.remove(thread);
        }
    }

    /// Opens `thread`'s channel at `status` unless it is open (see
    /// `Coordinator::expect_status`); it goes, as any, at the next change nobody listens to.
    pub fn expect(&self, thread: &ThreadId, status: ThreadStatus) -> watch::Receiver<Seen> {
        self.channels()
            .entry(thread.clone())
            .or_insert_with(|| watch::channel(Seen::status(status)).0)
            .subscribe()
    }

    /// Publishes how `thread` ended, from the runner that ended it, before it lets the thread
    /// go (no other writer of this engine can have moved it since its last commit; another
    /// engine's later change reaches its waiters through `refresh_all` as any other). The
    /// channel goes: nothing follows an end.
    pub fn ended(&self, thread: &ThreadId, ended: Ended) {
        // Kept until the runner lets the thread go (`publish_end`), after it gave back its
        // runner permit: a waiter woken by it may start another thread at once, which then
        // finds the permit free. Only for a thread somebody waits on (or may: `expect`).
        if self.channels().contains_key(thread) {
            self.ends().insert(thread.clone(), ended);
        }
    }

    /// Publishes the end [`Watchers::ended`] kept for `thread`, if any (called as its runner
    /// lets it go, still holding its claim). The channel goes: nothing follows an end.
    pub fn publish_end(&self, thread: &ThreadId) {
        let Some(ended) = self.ends().remove(thread) else { return };
        // Sent after the map's lock is let go: the send wakes the waiters, and a waiter woken
        // on another CPU (a caller's `finished`) takes this lock at once to unwatch.
        let tx = self.channels().remove(thread);
        if let Some(tx) = tx {
            tx.send_replace(Seen {
                status: ended.status,
                ended: Some(Arc::new(ended)),
                stopped: None,
            });
        }
    }

    /// Tells whoever waits on `thread` that its runner stopped with `error`, leaving it as its
    /// log says with nothing driving it (a commit failed: the disk is full, the store refuses
    /// writes): their waits end with that error instead of waiting for a change that no runner
    /// will make. The channel goes: a later wait starts from the stored status again (a drive
    /// after the store recovered publishes on it as on any).
    pub fn stopped(&self, thread: &ThreadId, error: &Error) {
        let tx = self.channels().remove(thread);
        if let Some(tx) = tx {
            let status = tx.borrow().status;
            tx.send_replace(Seen { status, ended: None, stopped: Some(Arc::new(error.clone())) });
        }
    }

    fn ends(&self) -> MutexGuard<'_, HashMap<ThreadId, Ended>> {
        self.ends.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A receiver of `thread`'s status changes, starting from its stored status.
    pub async fn watch(&self, thread: &ThreadId) -> Result<watch::Receiver<Seen>, Error> {
        let _reading = self.reading(thread).lock().await;
        if let Some(tx) = self.channels().get(thread) {
            return Ok(tx.subscribe());
        }
        // Read under the lock: a runner's notify after its commit either finds this channel or
        // happened before the read, which then sees the committed status.
        let record = self
            .store
            .thread(thread)
            .await?
            .ok_or_else(|| Error::UnknownThread(thread.to_string()))?;
        let mut channels = self.channels();
        let (tx, rx) = watch::channel(Seen::status(record.status));
        if !record.status.is_terminal() {
            channels.insert(thread.clone(), tx);
        }
        Ok(rx)
    }
}
