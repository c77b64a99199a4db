//! Whole-thread deletion: what [`crate::Maintenance::delete_thread`] is asked and answers, and the
//! rule both backends use to tell whether a payload is still referenced.
//!
//! A thread is deleted in one transaction (redb: one write transaction of the writer's group;
//! PostgreSQL: the group's SQL transaction), so a crash leaves it whole or gone. Removed with
//! it: its record, every event and the correlation-index entry of each, every checkpoint with
//! its snapshot and index entries, the locks it owns (a thread owns its locks under its id:
//! `engine/src/exec/locks.rs`), and each payload its events reference that no other stored event
//! references. Payloads are content-addressed and shared (two threads with the same large body
//! store it once), so a payload is removed only when a scan of the remaining log finds no
//! record holding its 32-byte hash; a false match (the hash's bytes inside some other record)
//! only keeps a payload, it never removes one still in use. The scan runs only for a thread
//! whose events reference payloads (bodies over the engine's offload threshold, 16 KiB).

use crate::thread::ThreadStatus;

/// How [`crate::Maintenance::delete_thread`] treats a thread that has not finished.
///
/// # Examples
///
/// ```
/// use cairn_storage::DeleteOptions;
/// assert!(!DeleteOptions::default().force, "an unfinished thread is refused by default");
/// let forced = DeleteOptions { force: true };
/// assert!(forced.force);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Delete the thread whatever its status. Without it a thread that is not finished
    /// (completed, failed, cancelled, timed out) is refused with
    /// [`crate::Error::Unfinished`]. A runner still driving a forcibly deleted thread is fenced:
    /// its next batch fails its lease and last-seq guards and writes nothing.
    pub force: bool,
}

/// What a committed [`crate::Maintenance::delete_thread`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// The thread's status when it was deleted.
    pub status: ThreadStatus,
    /// Events removed (the thread's whole stored log; fewer than its last seq if it was pruned).
    pub events: u64,
    /// Checkpoints removed.
    pub checkpoints: u64,
    /// Locks the thread owned, removed.
    pub locks: u64,
    /// Payloads removed (those no other event references).
    pub payloads: u64,
}

/// Whether a stored record may reference the payload `hash`: its bytes hold the hash (an event
/// body stores a payload reference's hash as 32 raw bytes, `docs/format.md` §5). True for every
/// record that references it, so a payload found in no record is referenced by none.
pub(crate) fn may_refer_to(record: &[u8], hash: &[u8; 32]) -> bool {
    record.windows(hash.len()).any(|w| w == hash)
}

#[cfg(test)]
mod tests {
    use super::may_refer_to;

    #[test]
    fn a_record_holding_the_hash_refers_to_it_and_others_do_not() {
        let hash = [7_u8; 32];
        let mut record = vec![1, 2, 3];
        assert!(!may_refer_to(&record, &hash));
        record.extend_from_slice(&hash);
        record.push(9);
        assert!(may_refer_to(&record, &hash));
        assert!(!may_refer_to(&record[..record.len() - 2], &hash), "a cut hash is no reference");
    }
}
