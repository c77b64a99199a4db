//! [`Append`]: the one way in. Every change to a database is a [`Batch`] queued to the
//! store's one writer and acknowledged, through its [`Pending`], when the commit that holds it
//! is durable (as [`Durability`] says).

use serde::{Deserialize, Serialize};

use crate::{Batch, Error, Pending, Reading};

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
    /// The provided implementation calls [`Append::append`]: right for a store whose queueing
    /// never waits on the network.
    ///
    /// # Errors
    ///
    /// As [`Append::append`].
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        Reading::ready(self.append(batch))
    }

    /// The durability mode writes are acknowledged under.
    fn durability(&self) -> Durability;

    /// Announces a write the caller is computing and will queue soon (see [`crate::WriteIntent`]):
    /// while the returned guard is held, a store that gathers writes into group commits may keep
    /// a group open for it, within its usual gathering bound. `None`: this store does not use
    /// intents (the default). Grouping only: what is written, and when a write is acknowledged
    /// (after the commit that holds it), is the same either way.
    fn intend_write(&self) -> Option<crate::WriteIntent> {
        None
    }

    /// The metric handles this store's writer reports its group commits to
    /// ([`crate::telemetry`]); `None` for a store that reports none (a read-only one).
    fn metrics(&self) -> Option<&crate::telemetry::StoreMetrics> {
        None
    }

    /// The failure that makes this store refuse every write now (`None` while it accepts
    /// them), as a channel that follows it: a [`crate::RedbStore`] sets it at a failed commit
    /// (the disk is full, an I/O error: writes are then refused with [`Error::Poisoned`] naming
    /// it) and clears it once it has reopened its database from what is durable. An engine
    /// ends its callers' waits with the cause while it is set, and restores its unfinished
    /// threads when it clears. `None` (the default): a store that never refuses writes as a
    /// whole (PostgreSQL retries each write on a fresh connection).
    fn refusals(&self) -> Option<tokio::sync::watch::Receiver<Option<Error>>> {
        None
    }

    /// Whether the database answers, as the store's connections last found (a store on a
    /// server: PostgreSQL), and whether it takes writes (false while a failed commit keeps the
    /// store poisoned); `None` for a file store that never had a commit fail. Known without a
    /// round trip, so a health check asks it first.
    fn database(&self) -> Option<crate::telemetry::DatabaseState> {
        self.metrics().and_then(crate::telemetry::StoreMetrics::database)
    }
}
