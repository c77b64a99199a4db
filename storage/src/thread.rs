//! Thread records: one per thread, the row listings and leases work on.
//!
//! Invariant: `last`, `first_seq` and `lease` are maintained by the store (from appended events,
//! prunes and lease operations); whatever a caller puts there on an upsert is replaced.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Bookmark, Seq, ThreadId};
use crate::limits::{self, LABEL_BYTES_MAX, LABELS_PER_THREAD_MAX, TEXT_BYTES_MAX};
use crate::wire_enum::wire_enum;

wire_enum! {
    /// A thread's status. The transition table lives in the engine; storage stores the value.
    /// Discriminants are stored on disk: never reuse one.
    pub enum ThreadStatus: u8, from_u8 {
        /// Created, not started.
        Created = 1 => "created",
        /// Being driven by a runner.
        Running = 2 => "running",
        /// Paused at a step boundary.
        Paused = 3 => "paused",
        /// Waiting for human input.
        WaitingInput = 4 => "waiting_input",
        /// Waiting for a timer.
        Sleeping = 5 => "sleeping",
        /// Finished successfully (terminal).
        Completed = 6 => "completed",
        /// Finished with a failure (terminal).
        Failed = 7 => "failed",
        /// Cancelled (terminal).
        Cancelled = 8 => "cancelled",
        /// Ran past its deadline (terminal).
        TimedOut = 9 => "timed_out",
        /// Waiting for a resource (a lock, a budget).
        Blocked = 10 => "blocked",
        /// Waiting in a named queue until its limits admit it (format v4; see
        /// `docs/queues.md`): only the store moves it on, to Created.
        Queued = 11 => "queued",
    }
}

impl ThreadStatus {
    /// Whether no further transition is possible.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::ThreadStatus;
    /// assert!(ThreadStatus::Completed.is_terminal());
    /// assert!(!ThreadStatus::Paused.is_terminal());
    /// ```
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled | Self::TimedOut)
    }
}

/// Which workflow (and which version of it) a thread or checkpoint belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkflowRef {
    /// The workflow id (shared: a clone of a record counts a reference).
    pub id: Arc<str>,
    /// Its version.
    pub version: u32,
    /// The graph fingerprint of that version (shared, as `id`).
    pub fingerprint: Arc<str>,
}

impl WorkflowRef {
    pub(crate) fn check_limits(&self) -> Result<(), Error> {
        limits::check("TEXT_BYTES_MAX", self.id.len(), TEXT_BYTES_MAX)?;
        limits::check("TEXT_BYTES_MAX", self.fingerprint.len(), TEXT_BYTES_MAX)
    }
}

/// Who drives a thread, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The runner holding the lease (shared, as a thread id: a record's clone counts a
    /// reference).
    pub owner: Arc<str>,
    /// When it lapses, in engine-clock ms.
    pub expires_at_ms: u64,
}

/// The stored record of a thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRecord {
    /// The thread's id.
    pub id: ThreadId,
    /// The workflow it runs.
    pub workflow: WorkflowRef,
    /// Its status.
    pub status: ThreadStatus,
    /// When it was created, in engine-clock ms.
    pub created_at_ms: u64,
    /// When it was last updated, in engine-clock ms.
    pub updated_at_ms: u64,
    /// The bookmark of its last event (store-maintained).
    pub last: Option<Bookmark>,
    /// Its first stored seq: 1, or the first kept after a prune (store-maintained).
    pub first_seq: Seq,
    /// Labels for filtering listings.
    pub labels: BTreeMap<String, String>,
    /// The runner lease (store-maintained through lease operations).
    pub lease: Option<Lease>,
    /// The thread and seq it was forked from, if any.
    pub parent: Option<(ThreadId, Seq)>,
    /// Engine-owned small bytes shown in listings.
    #[serde(with = "crate::bytes_serde")]
    pub summary: Vec<u8>,
}

impl ThreadRecord {
    /// A new record in status `Created` with no events, no labels and no lease.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{ThreadId, ThreadRecord, ThreadStatus, WorkflowRef};
    /// let workflow = WorkflowRef { id: "orders".into(), version: 1, fingerprint: "f".into() };
    /// let record = ThreadRecord::new(ThreadId::new("t1")?, workflow, 1_000);
    /// assert_eq!(record.status, ThreadStatus::Created);
    /// assert!(record.last.is_none());
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn new(id: ThreadId, workflow: WorkflowRef, now_ms: u64) -> ThreadRecord {
        ThreadRecord {
            id,
            workflow,
            status: ThreadStatus::Created,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            last: None,
            first_seq: Seq(1),
            labels: BTreeMap::new(),
            lease: None,
            parent: None,
            summary: Vec::new(),
        }
    }

    /// Checks this record against [`crate::limits`].
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] naming the first bound exceeded.
    pub fn check_limits(&self) -> Result<(), Error> {
        self.workflow.check_limits()?;
        limits::check("LABELS_PER_THREAD_MAX", self.labels.len(), LABELS_PER_THREAD_MAX)?;
        for (key, value) in &self.labels {
            limits::check("LABEL_BYTES_MAX", key.len(), LABEL_BYTES_MAX)?;
            limits::check("LABEL_BYTES_MAX", value.len(), LABEL_BYTES_MAX)?;
        }
        if let Some(lease) = &self.lease {
            limits::check("TEXT_BYTES_MAX", lease.owner.len(), TEXT_BYTES_MAX)?;
        }
        limits::check(
            "THREAD_SUMMARY_BYTES_MAX",
            self.summary.len(),
            limits::THREAD_SUMMARY_BYTES_MAX,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_terminal_set() {
        let terminal: Vec<_> = ThreadStatus::ALL.iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal.len(), 4);
        for status in ThreadStatus::ALL {
            assert_eq!(ThreadStatus::from_u8(status.to_repr()), Some(*status));
            assert_eq!(status.as_str().parse::<ThreadStatus>().ok(), Some(*status));
        }
    }
}
