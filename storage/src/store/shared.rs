//! [`SharedDatabase`]: what a database several processes write (PostgreSQL) offers beyond the
//! other roles: an index of threads due for an engine, the commits of other processes as they
//! land, and messages to whichever process drives a thread. A store whose database only this
//! process writes (a redb file, held by its lock) has none of it: its
//! [`crate::Backend::shared`] is `None`, and the engine coordinates in memory.

use crate::ids::ThreadId;
use crate::reading::Reading;
use crate::thread::ThreadRecord;

/// A thread the wake index says is due, with the time it is due from: the cursor of the next
/// page of [`SharedDatabase::due_threads`] is the last one's `(ready_at_ms, id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueThread {
    /// Due from (ms since the epoch; 0: due now).
    pub ready_at_ms: u64,
    /// The thread as stored.
    pub record: ThreadRecord,
}

/// A message for the driver of a thread: see [`SharedDatabase::tell_driver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverMessage {
    /// The thread it is about.
    pub thread: ThreadId,
    /// What it says (the engine's business).
    pub message: String,
}

/// The capabilities of a database several processes share.
pub trait SharedDatabase: Send + Sync {
    /// Unfinished threads of `workflows` that may need an engine by now plus `horizon_ms`
    /// (a lease lapsing, a timer or deadline falling due, or not known: see
    /// [`crate::Batch::wakes`]), soonest first (by `(ready_at_ms, id)`), after `after` (the last
    /// of the previous page), at most `limit`; read through an index, so a worker looking for
    /// work reads the threads due, not every unfinished one. What is due is a hint: the caller
    /// decides from the record (and the log) as it would from a listing.
    ///
    /// # Errors
    /// Storage errors.
    fn due_threads(
        &self,
        workflows: &[String],
        horizon_ms: u64,
        after: Option<&(u64, ThreadId)>,
        limit: usize,
    ) -> Reading<Vec<DueThread>>;

    /// The last committed lsn, moving as commits land in any process (PostgreSQL: heard
    /// through LISTEN/NOTIFY): engines serving a shared database look for work when it moves.
    fn commits(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Passes `message` to whichever process drives `thread` (on PostgreSQL a NOTIFY that
    /// every store on the database hears, through [`SharedDatabase::driver_messages`]). Best
    /// effort and not durable: a message can be lost (a listener reconnecting), so a sender
    /// that needs an outcome waits for it in the store and acts itself when it does not come.
    /// The caller awaits the send (a round trip made by a connection of the store's own: no
    /// runtime worker waits for it).
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for a message over
    /// [`crate::limits::DRIVER_MESSAGE_BYTES_MAX`]; storage errors.
    fn tell_driver(&self, thread: &ThreadId, message: &str) -> Reading<()>;

    /// The messages of [`SharedDatabase::tell_driver`] sent by any process on the database
    /// (this one included), from now on. A receiver that falls behind by more than
    /// [`crate::limits::DRIVER_MESSAGES_QUEUED_MAX`] loses the oldest.
    fn driver_messages(&self) -> tokio::sync::broadcast::Receiver<DriverMessage>;
}
