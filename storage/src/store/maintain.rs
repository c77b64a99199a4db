//! [`Maintenance`]: what removes data (prune, delete) or checks all of it (verify). Writes go
//! through the store's one writer, like appends, and resolve through a [`Pending`].

use crate::batch::Pruned;
use crate::delete::{DeleteOptions, Deleted};
use crate::error::Error;
use crate::ids::{CheckpointId, Seq, ThreadId};
use crate::pending::Pending;

/// One thing [`Maintenance::verify`] found wrong, with its location.
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

impl Problem {
    /// The problem an [`Error::Corrupted`] names; any other error back as it is.
    pub(crate) fn of(error: Error) -> Result<Problem, Error> {
        match error {
            Error::Corrupted { table, thread, seq, detail } => {
                Ok(Problem { table, thread, seq, detail })
            }
            other => Err(other),
        }
    }
}

/// What [`Maintenance::verify`] scanned and found.
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

/// Removing and checking data.
pub trait Maintenance: Send + Sync + 'static {
    /// Deletes a checkpoint; resolves to whether it existed.
    ///
    /// # Errors
    ///
    /// As [`crate::Append::append`].
    fn delete_checkpoint(&self, id: CheckpointId) -> Result<Pending<bool>, Error>;

    /// Deletes every checkpoint of `thread`; resolves to how many were deleted.
    ///
    /// # Errors
    ///
    /// As [`crate::Append::append`].
    fn clear_checkpoints(&self, thread: &ThreadId) -> Result<Pending<u64>, Error>;

    /// Removes `thread`'s events covered by checkpoint `keep_from` and its older checkpoints, so
    /// the thread restores from `keep_from` and reads on from there.
    ///
    /// # Errors
    ///
    /// As [`crate::Append::append`]; at commit [`Error::UnknownCheckpoint`] or [`Error::Invalid`] if the
    /// checkpoint is not this thread's.
    fn prune(&self, thread: &ThreadId, keep_from: CheckpointId) -> Result<Pending<Pruned>, Error>;

    /// Deletes `thread` whole, in one transaction (a crash leaves it whole or gone): its
    /// record, every event with its correlation-index entry, every checkpoint with its snapshot
    /// and index entries, the locks it owns, and the payloads its events reference that no
    /// other event references (see [`Deleted`]). Resolves to what was removed, or `None` when
    /// there is no such thread. Afterwards the id is free: a new thread may be created under
    /// it, starting again at seq 1 (lsns and checkpoint ids are never reused).
    ///
    /// Every record removed is read and checked first, as by [`Maintenance::prune`]: a damaged one
    /// rejects the delete and nothing is removed. A thread whose events reference payloads
    /// costs a scan of the remaining log for other references to them (see the module docs of
    /// `storage/src/delete.rs`).
    ///
    /// # Errors
    ///
    /// As [`crate::Append::append`]; at commit [`Error::Unfinished`] for a thread that has not finished
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
    /// assert!(store.thread(&thread).wait()?.is_none());
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
}
