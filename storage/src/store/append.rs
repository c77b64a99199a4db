//! [`Append`]: the one way in. Every change to a database is a [`Batch`] queued to the
//! store's one writer and acknowledged, through its [`Pending`], when the commit that holds it
//! is durable (as [`Durability`] says).

use serde::{Deserialize, Serialize};

use crate::batch::Batch;
use crate::error::Error;
use crate::pending::Pending;
use crate::reading::Reading;

/// When an append is acknowledged, and what a crash may lose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durability {
    /// Acknowledged only after a durable commit (fsync). A crash loses nothing acknowledged.
    #[default]
    Immediate,
    /// Acknowledged after a non-durable commit; a durable commit happens at least every
    /// `interval_ms`. A crash loses at most that window, never part of a batch. (A non-durable
    /// commit of a lone caller's small hand-over may run on the caller's thread: see
    /// [`Append::append_all`].)
    Periodic {
        /// Longest time between durable commits, in ms.
        interval_ms: u64,
    },
    /// Never fsynced while open (tests); made durable on a clean close.
    None,
}

/// Appending batches: the store's writer side.
pub trait Append: Send + Sync + 'static {
    /// Queues a batch for the next group commit. Limits are checked here, before queueing.
    /// A full queue blocks the calling thread until there is room: async callers use
    /// [`Append::append_async`].
    ///
    /// # Errors
    ///
    /// Up front: [`Error::LimitExceeded`], [`Error::Invalid`], [`Error::Poisoned`],
    /// [`Error::Closed`], [`Error::ReadOnly`]. At commit (through the [`Pending`]): guard, lock,
    /// lease and unknown-thread errors, which reject only this batch; storage errors.
    fn append(&self, batch: Batch) -> Result<Pending, Error>;

    /// [`Append::append`] for async callers: resolves to the batch's [`Pending`] once the batch
    /// is queued, waiting (suspended, never blocking its thread) while the writer's queue is
    /// full. Batches queued one after the other by one task (each awaited before the next is
    /// asked for) reach the writer in that order.
    ///
    /// Required, so that no wrapper loses a backend's queueing by omission: a store whose
    /// queueing never waits on the network answers `Reading::ready(self.append(batch))`.
    ///
    /// # Errors
    ///
    /// As [`Append::append`].
    fn append_async(&self, batch: Batch) -> Reading<Pending>;

    /// Takes every batch out of `batches` (leaving its capacity for the caller's next ones) and
    /// queues them in order, as one hand-over: each batch's [`Pending`], in order. A store
    /// whose writer takes several writes at once wakes it once for them all (the file store,
    /// when its writer rests, nothing else is queued or announced and the group need not be
    /// durable, commits a small hand-over on the calling thread instead, before returning:
    /// never with an fsync); this default
    /// queues each through [`Append::append`] (so a full queue blocks as it does). The first
    /// batch refused up front ends the hand-over: it and every batch after it answer that
    /// error, and none of them is queued (a later batch of a thread's pipeline expects the
    /// earlier one's events).
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::*;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let store = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
    /// let mut batches = vec![Batch::default(), Batch::default()];
    /// let pending = store.append_all(&mut batches);
    /// assert_eq!(pending.len(), 2);
    /// assert!(batches.is_empty(), "taken, the vector kept for the next ones");
    /// for p in pending {
    ///     assert!(p.wait().await?.bookmarks.is_empty(), "an empty batch writes nothing");
    /// }
    /// // A batch over a limit ends the hand-over: it and the batches after it are refused,
    /// // the one before it is written.
    /// let t = ThreadId::new("t")?;
    /// let guard = Guard::Absent { thread: t.clone() };
    /// let over = Batch { guards: vec![guard; limits::BATCH_OPS_MAX + 1], ..Batch::default() };
    /// let created = Batch { guards: vec![Guard::Absent { thread: t }], ..Batch::default() };
    /// let mut pending = store.append_all(&mut vec![created, over, Batch::default()]).into_iter();
    /// assert!(pending.next().expect("first").wait().await.is_ok());
    /// for p in pending {
    ///     assert!(matches!(p.wait().await, Err(Error::LimitExceeded { .. })));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    fn append_all(&self, batches: &mut Vec<Batch>) -> Vec<Pending> {
        let mut refused: Option<Error> = None;
        let mut pending = Vec::with_capacity(batches.len());
        for batch in batches.drain(..) {
            let queued = match &refused {
                Some(error) => Err(error.clone()),
                None => self.append(batch),
            };
            pending.push(queued.unwrap_or_else(|error| {
                refused = Some(error.clone());
                Pending::ready(Err(error))
            }));
        }
        pending
    }

    /// The durability mode writes are acknowledged under.
    fn durability(&self) -> Durability;
}
