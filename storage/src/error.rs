//! The storage crate's one error type.
//!
//! Every variant says whether retrying can help: *permanent* errors will fail the same way again
//! (bad input, corrupt data, a format this build cannot read); *transient* ones may succeed later
//! (a lock held by someone else, a file held by another process, an I/O error).

use std::path::PathBuf;
use std::sync::Arc;

use crate::ids::{CheckpointId, PayloadRef, Seq, ThreadId};

/// Errors from the storage crate.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Permanent: the database file does not exist and the caller asked not to create it.
    #[error("database file not found: {}", .0.display())]
    NotFound(PathBuf),

    /// Permanent: the path holds something that is not a database file (a directory, a FIFO, a
    /// socket, a device, a link to nothing); it was not opened.
    #[error("{} is {kind}, not a database file", path.display())]
    NotAFile {
        /// The path given.
        path: PathBuf,
        /// What is there, in words ("a directory", "a character device", ...).
        kind: String,
    },

    /// Permanent (until someone changes the file's permissions): the OS refused this process
    /// access to the database file.
    #[error("permission denied ({op})")]
    PermissionDenied {
        /// The operation that was refused.
        op: &'static str,
    },

    /// Permanent: the file is not a Cairn database (not redb, or redb without Cairn's meta table).
    #[error("not a Cairn database: {detail}")]
    NotCairn {
        /// What was found instead.
        detail: String,
    },

    /// Permanent: the file was written by a newer Cairn format than this build reads.
    #[error("database format version {found} is newer than the supported version {supported}")]
    NewerFormat {
        /// The format version in the file.
        found: u16,
        /// The newest format version this build reads.
        supported: u16,
    },

    /// Transient: another process (or another handle in this one) has the file open for writing.
    #[error("database file is locked by another open handle")]
    Locked,

    /// Permanent: a stored record failed a check (CRC, kind, length, key/record mismatch, a seq
    /// gap, an index that disagrees with its table). Never skipped, never returned as data.
    #[error("corrupted record in table {table}{}: {detail}", where_in(thread.as_ref(), *seq))]
    Corrupted {
        /// The redb table the record lives in.
        table: &'static str,
        /// The thread the record belongs to, when known.
        thread: Option<ThreadId>,
        /// The record's seq (events) or id (checkpoints), when known.
        seq: Option<Seq>,
        /// What check failed.
        detail: String,
    },

    /// Permanent for this request: the events asked for were pruned; read from `first_available`.
    #[error("thread {thread} was pruned; the first available seq is {first_available}")]
    Pruned {
        /// The thread read.
        thread: ThreadId,
        /// The first seq still stored.
        first_available: Seq,
    },

    /// Permanent: an input exceeds one of the bounds in [`crate::limits`].
    #[error("{} is {value}, over the limit of {max}", crate::limits::in_words(limit))]
    LimitExceeded {
        /// The name of the constant in [`crate::limits`].
        limit: &'static str,
        /// The value given.
        value: u64,
        /// The maximum allowed.
        max: u64,
    },

    /// Permanent: the caller passed something malformed (an empty id, an unknown name).
    #[error("invalid input: {detail}")]
    Invalid {
        /// What is wrong.
        detail: String,
    },

    /// Permanent: no thread record with this id exists (events and checkpoints need one).
    #[error("unknown thread {0}")]
    UnknownThread(ThreadId),

    /// Permanent until the thread finishes: a delete of a thread that has not finished, asked
    /// without [`crate::DeleteOptions::force`]; nothing was removed.
    #[error(
        "thread {thread} is {status}, not finished: it is deleted only when forced (`cairn delete \
         --force`, `?force=true` over HTTP, `DeleteOptions::force` in code)"
    )]
    Unfinished {
        /// The thread.
        thread: ThreadId,
        /// Its status.
        status: crate::thread::ThreadStatus,
    },

    /// Permanent: a signal was sent to a thread that has ended (completed, failed, cancelled,
    /// timed out); nothing was stored.
    #[error("thread {thread} has finished ({status}): it receives no more signals")]
    Finished {
        /// The thread.
        thread: ThreadId,
        /// How it ended.
        status: crate::thread::ThreadStatus,
    },

    /// Permanent while that thread waits or runs: a start on a queue with a dedup key that a
    /// thread of the queue already holds; nothing was stored.
    #[error("queue {queue} already has thread {thread} with dedup key {dedup}")]
    Duplicate {
        /// The queue.
        queue: String,
        /// The dedup key.
        dedup: String,
        /// The thread that holds it.
        thread: ThreadId,
    },

    /// Transient: a start over a queue's rate on a queue that drops such starts
    /// (`QueueLimits::rate_drops`); nothing was stored. Retry after `retry_after_ms`.
    #[error("queue {queue} (key {key:?}) is over its rate: retry in {retry_after_ms} ms")]
    RateLimited {
        /// The queue.
        queue: String,
        /// The key whose rate (or the queue's) is full.
        key: String,
        /// When the rate window frees a start, from the caller's clock.
        retry_after_ms: u64,
    },

    /// Transient: a debounced start or a batch run found the key's waiting starts moved since
    /// it read them; nothing was stored. Read again and retry.
    #[error("queue {queue} (key {key:?}) changed since it was read: {detail}")]
    QueueMoved {
        /// The queue.
        queue: String,
        /// The key.
        key: String,
        /// What moved.
        detail: String,
    },

    /// Permanent: no queue with this name was defined (`QueueOp::Define`).
    #[error("unknown queue {0}")]
    UnknownQueue(String),

    /// Permanent: no checkpoint with this id exists.
    #[error("unknown checkpoint {0}")]
    UnknownCheckpoint(CheckpointId),

    /// Permanent: an event references a payload that is not stored (or was removed).
    #[error("payload {0} is missing")]
    MissingPayload(PayloadRef),

    /// Transient: a batch guard did not hold, so the whole batch was rejected.
    #[error("guard failed on thread {thread}: {detail}")]
    GuardFailed {
        /// The thread the guard names.
        thread: ThreadId,
        /// Which condition did not hold.
        detail: String,
    },

    /// Transient: the named lock is held by another owner until `expires_at_ms`.
    #[error("lock {name} is held by {owner} until {expires_at_ms} ms")]
    LockHeld {
        /// The lock name.
        name: String,
        /// The current holder.
        owner: String,
        /// When the holder's lease on the lock expires.
        expires_at_ms: u64,
    },

    /// Permanent for this request: renew or release of a lock the caller does not hold.
    #[error("lock {name} is not held by {owner}")]
    LockNotHeld {
        /// The lock name.
        name: String,
        /// The owner that asked.
        owner: String,
    },

    /// Transient: the thread's lease is held by another runner until `expires_at_ms`.
    #[error("lease on thread {thread} is held by {owner} until {expires_at_ms} ms")]
    LeaseHeld {
        /// The thread.
        thread: ThreadId,
        /// The current holder.
        owner: String,
        /// When the lease expires.
        expires_at_ms: u64,
    },

    /// Permanent for this request: renew or release of a lease the caller does not hold.
    #[error("lease on thread {thread} is not held by {owner}")]
    LeaseNotHeld {
        /// The thread.
        thread: ThreadId,
        /// The owner that asked.
        owner: String,
    },

    /// Permanent until the store recovers: a commit failed part way (`cause`: the disk is full,
    /// an I/O error), so the outcome of the batches in it is unknown, and the store refuses
    /// writes until it has reopened its database from what is durable. A [`crate::RedbStore`]
    /// on a file does that by itself, retrying with a bounded backoff until the cause clears;
    /// any store recovers when it is closed and opened again.
    #[error("the store refuses writes until it recovers; poisoned by: {cause}")]
    Poisoned {
        /// The failure that poisoned the store (the first; what failed after it failed
        /// because of it).
        cause: Arc<Error>,
    },

    /// Permanent: the store was closed (or its writer stopped).
    #[error("the store is closed")]
    Closed,

    /// Permanent: the store was opened read-only.
    #[error("the store is read-only")]
    ReadOnly,

    /// Transient: a read-only open could not copy a file image that a live writer left unchanged
    /// during the copy, after [`crate::limits::SNAPSHOT_ATTEMPTS_MAX`] attempts.
    #[error("no stable snapshot after {attempts} attempts: {detail}")]
    SnapshotUnstable {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        detail: String,
    },

    /// Permanent until the key is given: a body sealed at rest (`docs/format.md` §10.3) that
    /// this store cannot open: no codec, another codec, a key id it does not hold, or a key that
    /// does not open it (a wrong key, or damaged bytes). Never returned as plain bytes.
    #[error("sealed body (codec {codec}, key {key}) cannot be opened: {detail}")]
    Sealed {
        /// The codec id the envelope names.
        codec: String,
        /// The key id the envelope names.
        key: String,
        /// Why it does not open.
        detail: String,
    },

    /// Permanent until space is freed: the disk (or the user's quota) is full (the OS error is
    /// `StorageFull`, `QuotaExceeded` or raw `ENOSPC` = 28). Retrying does not help until
    /// someone frees space. A commit that hits it fails and poisons the store like any failed
    /// commit (free space, then reopen: nothing acknowledged is lost); an open or a create that
    /// hits it leaves no new database behind.
    #[error("disk full during {op}: {source}")]
    DiskFull {
        /// The operation that failed.
        op: &'static str,
        /// The underlying error.
        source: Arc<dyn std::error::Error + Send + Sync>,
    },

    /// Transient: the database server is known not to answer (PostgreSQL: a connection or a
    /// check of it failed or missed its deadline), so the request was not sent; `cause` is the
    /// last failure, `since_ms` when the outage began (ms since the Unix epoch, this machine's
    /// clock). The store checks the server on its own and answers again once it does.
    #[error("the database does not answer: {cause}")]
    Unavailable {
        /// The last failure seen (a refused connection, a missed deadline).
        cause: String,
        /// When the database stopped answering.
        since_ms: u64,
    },

    /// Transient: a call to the database server got nothing within its deadline, while the
    /// server itself was not known to be down (PostgreSQL: a read found no reader connection
    /// free within [`crate::limits::PG_READ_CONNECTION_WAIT_MAX`]); `call` names it (`read
    /// thread`, `read events`, ...). Nothing was changed: the same call may be made again.
    #[error("{call} got no answer within {after_ms} ms: {waited_for}")]
    TimedOut {
        /// The call that timed out.
        call: &'static str,
        /// Its deadline, ms.
        after_ms: u64,
        /// What it was waiting for when the deadline passed.
        waited_for: &'static str,
    },

    /// Transient (reads) or poisoning (commits): the storage engine or the OS reported an error.
    #[error("storage error during {op}: {source}")]
    Storage {
        /// The operation that failed.
        op: &'static str,
        /// The underlying error (kept opaque: no storage-engine types in this crate's API).
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// Whether retrying the same request later may succeed (see each variant's doc).
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::Error;
    /// assert!(Error::Locked.is_transient());
    /// assert!(!Error::Closed.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Locked
                | Error::GuardFailed { .. }
                | Error::LockHeld { .. }
                | Error::LeaseHeld { .. }
                | Error::SnapshotUnstable { .. }
                | Error::Unavailable { .. }
                | Error::TimedOut { .. }
                | Error::Storage { .. }
        )
    }

    /// [`Error::Corrupted`] in `table`, of no known thread or seq.
    pub(crate) fn corrupted(table: &'static str, detail: String) -> Error {
        Error::Corrupted { table, thread: None, seq: None, detail }
    }

    /// Wraps an error from the storage engine or the OS: [`Error::DiskFull`] when the OS error
    /// inside it says the disk is full, [`Error::Storage`] otherwise.
    pub(crate) fn storage(
        op: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        let io = crate::os_error::io_cause(&source);
        if io.is_some_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied) {
            return Error::PermissionDenied { op };
        }
        let full = io.is_some_and(is_storage_full);
        if full {
            Error::DiskFull { op, source: Arc::new(source) }
        } else {
            Error::Storage { op, source: Arc::new(source) }
        }
    }
}

/// The OS error numbers "no space left on device" (`ENOSPC` on Linux, macOS and the BSDs).
const ENOSPC: i32 = 28;

/// Whether `error` says the disk or the quota is full.
fn is_storage_full(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(error.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
        || (cfg!(unix) && error.raw_os_error() == Some(ENOSPC))
}

/// ", thread t2, seq 5" (or less, when they are not known) for [`Error::Corrupted`].
fn where_in(thread: Option<&ThreadId>, seq: Option<Seq>) -> String {
    match (thread, seq) {
        (Some(t), Some(s)) => format!(", thread {t}, seq {}", s.0),
        (Some(t), None) => format!(", thread {t}"),
        (None, Some(s)) => format!(", seq or id {}", s.0),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_recognised_through_redb_s_error_types() {
        let full = || std::io::Error::from(std::io::ErrorKind::StorageFull);
        let cases: Vec<Error> = vec![
            Error::storage("a", full()),
            Error::storage("b", std::io::Error::from(std::io::ErrorKind::QuotaExceeded)),
            Error::storage("c", ::redb::StorageError::Io(full())),
            Error::storage("d", ::redb::CommitError::Storage(::redb::StorageError::Io(full()))),
            Error::storage("e", ::redb::DatabaseError::Storage(::redb::StorageError::Io(full()))),
            Error::storage(
                "f",
                ::redb::TransactionError::Storage(::redb::StorageError::Io(full())),
            ),
            Error::storage("g", ::redb::TableError::Storage(::redb::StorageError::Io(full()))),
            Error::storage("h", ::redb::Error::Io(full())),
        ];
        for error in cases {
            assert!(matches!(error, Error::DiskFull { .. }), "{error:?}");
            assert!(!error.is_transient());
        }
        #[cfg(unix)]
        assert!(matches!(
            Error::storage("raw", std::io::Error::from_raw_os_error(ENOSPC)),
            Error::DiskFull { op: "raw", .. }
        ));
        let other = Error::storage("x", ::redb::StorageError::Io(std::io::Error::other("eio")));
        assert!(matches!(other, Error::Storage { .. }));
        assert!(matches!(
            Error::storage("y", ::redb::StorageError::PreviousIo),
            Error::Storage { .. }
        ));
    }
}
