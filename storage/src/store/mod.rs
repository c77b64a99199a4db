//! The [`Store`]: everything the engine asks of storage, with no storage-engine types in any
//! signature (redb is the default implementation, PostgreSQL the shared one), split by role so
//! that a backend, or a decorator of one, writes each part once:
//!
//! | trait | what | methods |
//! |---|---|---|
//! | [`Append`] | the writer: batches in, acknowledged when durable | `append`, `append_async`, `durability` |
//! | [`ThreadLog`] | a thread's events (or all, in lsn order), payloads, checkpoints | `read_since`, `read_range`, `last_lsn`, `read_all_since`, `read_correlated`, `subscribe`, `payload`, `checkpoint`, `latest_checkpoint_at_or_before`, `list_checkpoints` |
//! | [`Catalog`] | thread records and the indexes over them | `thread`, `list_threads`, `list_threads_after`, `signals`, `queues`, `queue_member`, `locks` |
//! | [`Maintenance`] | removing and checking data | `prune`, `delete_thread`, `delete_checkpoint`, `clear_checkpoints`, `verify` |
//! | [`SharedDatabase`] | only where several processes write: wake index, commits heard, driver messages | `due_threads`, `commits`, `tell_driver`, `driver_messages` |
//! | [`Backend`] | what the backend offers, declared by it and carried by every decorator | `shared`, `intend_write`, `metrics`, `refusals`, `database` |
//!
//! Reads have one API: each answers a [`Reading`], which an async caller awaits (a store whose
//! reads cross the network suspends the task, blocking no thread) and a sync caller
//! [`Reading::wait`]s for. Writes queue to one writer and resolve through [`Pending`] when their
//! commit completes. A decorator that changes some roles hands the others to the store it
//! wraps through [`Decorates`] and the `Forward*` marker traits. `docs/backend.md` says how to
//! write a backend.

mod append;
mod backend;
mod catalog;
mod forward;
mod log;
mod maintain;
mod shared;

use std::future::Future;

pub use append::{Append, Durability};
pub use backend::Backend;
pub use catalog::{Catalog, Page, ThreadFilter};
pub use forward::{Decorates, ForwardAppend, ForwardCatalog, ForwardLog, ForwardMaintenance};
pub(crate) use log::range;
pub use log::{CheckpointFilter, Scope, ThreadLog};
pub use maintain::{Maintenance, Problem, VerifyReport};
pub use shared::{DriverMessage, DueThread, SharedDatabase};

use crate::batch::{Appended, Batch, Guard, LeaseOp, LockOp};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::pending::Pending;
use crate::reading::Reading;
use crate::thread::{ThreadRecord, ThreadStatus};

/// The storage interface: every role (see the module documentation), and what the backend
/// offers ([`Backend`]). Object-safe; see the crate docs for the invariants every
/// implementation keeps.
pub trait Store: Append + ThreadLog + Catalog + Maintenance + Backend {}

/// Convenience helpers over any [`Store`]; each builds one batch and waits for its commit.
pub trait StoreExt: Store {
    /// Appends and waits for the commit.
    ///
    /// # Errors
    ///
    /// As [`Append::append`] and [`Pending::wait`].
    fn append_wait(&self, batch: Batch) -> impl Future<Output = Result<Appended, Error>> + Send {
        let queued = self.append_async(batch);
        async move { queued.await?.wait().await }
    }

    /// Applies one lock operation (take, renew, release, release all of an owner's) and waits
    /// for its commit.
    ///
    /// # Errors
    ///
    /// [`Error::LockHeld`] taking a lock another owner holds; [`Error::LockNotHeld`] renewing
    /// or releasing one held by another owner (releasing a missing lock is fine).
    fn lock(&self, op: LockOp) -> impl Future<Output = Result<(), Error>> + Send {
        unit(self.append_async(Batch { locks: vec![op], ..Batch::default() }))
    }

    /// Applies one lease operation (take, renew, release) on a thread and waits for its commit.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] taking a lease another runner holds; [`Error::LeaseNotHeld`]
    /// renewing or releasing one held by another; [`Error::UnknownThread`].
    fn lease(&self, op: LeaseOp) -> impl Future<Output = Result<(), Error>> + Send {
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
        let read = self.thread(thread);
        let thread = thread.clone();
        async move {
            let mut record = read.await?.ok_or_else(|| Error::UnknownThread(thread.clone()))?;
            record.status = new;
            record.updated_at_ms = now_ms;
            let guard = Guard::Status { thread, expected };
            let batch =
                Batch { threads: vec![record.clone()], guards: vec![guard], ..Batch::default() };
            self.append_async(batch).await?.wait().await?;
            Ok(record)
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

async fn unit(queued: Reading<Pending>) -> Result<(), Error> {
    queued.await?.wait().await?;
    Ok(())
}
