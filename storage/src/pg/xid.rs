//! The log's order on PostgreSQL: lsns taken from the transaction id, read below the xmin
//! watermark.
//!
//! Every group commit is one transaction; its events get the lsns `xid << LSN_SHIFT` + 1, + 2,
//! ... (and its checkpoints ids the same way), where `xid` is the transaction's own id
//! (`txid_current()`, epoch included, so it never wraps). Transactions of many writers commit
//! at once and in any order, so a reader of the global log must not move its cursor past an
//! lsn a transaction still running may take: it reads only lsns below `xmin << LSN_SHIFT`,
//! where `xmin` is the oldest transaction id still running in its snapshot
//! ([`below_watermark!`]). Every transaction with an id below that has ended, and every one
//! that ends later has an id at or above it, so whatever a reader reads below the watermark
//! is final: a later commit never lands behind its cursor (a plain sequence allows that skip:
//! `storage/tests/it/pg.rs`).
//!
//! Within a thread, lsns must also rise with seqs. A transaction takes its id when it begins,
//! then locks the thread rows it writes; if a younger transaction wrote one of them meanwhile
//! (the row's `last_xid` is above this transaction's id), this one's lsns would sort before
//! events it follows. It then stops with [`Conflict`] and the writer runs the group again in a
//! new transaction (a younger id), as it does after a unique violation or a deadlock.

use std::fmt;

use crate::error::Error;

/// Bits of an lsn (and of a checkpoint id) below the transaction id.
pub(crate) const LSN_SHIFT: u32 = 20;

/// Lsns (and checkpoint ids) one transaction may assign: the writer closes a group before its
/// requests could need more.
pub(crate) const IDS_PER_TRANSACTION: u64 = 1 << LSN_SHIFT;

/// The condition on `lsn` that keeps a read of the global log below the watermark (the
/// statement's snapshot's oldest running transaction id, shifted as lsns are).
macro_rules! below_watermark {
    () => {
        "lsn < (txid_snapshot_xmin(txid_current_snapshot()) << 20)"
    };
}
pub(crate) use below_watermark;

/// [`below_watermark`] for a row of runs of events (`events.rs`): all its lsns are of the
/// transaction that wrote it, so its first lsn decides.
macro_rules! first_lsn_below_watermark {
    () => {
        "first_lsn < (txid_snapshot_xmin(txid_current_snapshot()) << 20)"
    };
}
pub(crate) use first_lsn_below_watermark;

/// The lsn (and checkpoint id) a transaction's assignments count up from: its first is one
/// above.
///
/// # Errors
/// [`Error::Invalid`] for a transaction id too large to shift into a `bigint` (2^43
/// transactions: beyond any real server's life).
pub(crate) fn base(xid: i64) -> Result<u64, Error> {
    u64::try_from(xid)
        .ok()
        .filter(|x| x.leading_zeros() > LSN_SHIFT)
        .map(|x| x << LSN_SHIFT)
        .ok_or_else(|| Error::Invalid {
            detail: format!("transaction id {xid} does not fit the lsn space"),
        })
}

/// A thread row this transaction locked was written by a younger transaction since this one
/// began: the group runs again in a new transaction.
#[derive(Debug)]
pub(crate) struct Conflict {
    /// The thread.
    pub thread: String,
    /// The younger writer's transaction id.
    pub written_by: i64,
    /// This transaction's id.
    pub xid: i64,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread {} was written by transaction {}, younger than this one ({})",
            self.thread, self.written_by, self.xid
        )
    }
}

impl std::error::Error for Conflict {}

impl Conflict {
    /// Checks a locked row's writer against this transaction.
    ///
    /// # Errors
    /// The conflict, as a storage error the writer retries.
    pub(crate) fn check(thread: &str, written_by: i64, xid: i64) -> Result<(), Error> {
        if written_by > xid {
            let c = Conflict { thread: thread.to_owned(), written_by, xid };
            return Err(Error::Storage { op: "lock a thread", source: std::sync::Arc::new(c) });
        }
        Ok(())
    }
}

/// Whether a group that failed with `e` may succeed in a new transaction: a younger
/// transaction wrote a row first ([`Conflict`]), two groups created the same row at once
/// (unique violation), or two waited on each other (deadlock, serialization failure).
pub(crate) fn retryable(e: &Error) -> bool {
    let Error::Storage { source, .. } = e else { return false };
    if source.downcast_ref::<Conflict>().is_some() {
        return true;
    }
    let Some(code) =
        source.downcast_ref::<tokio_postgres::Error>().and_then(tokio_postgres::Error::code)
    else {
        return false;
    };
    use tokio_postgres::error::SqlState;
    [
        SqlState::UNIQUE_VIOLATION,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::T_R_SERIALIZATION_FAILURE,
    ]
    .contains(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_leaves_room_for_a_transactions_ids_and_refuses_what_cannot_shift() {
        assert_eq!(base(1).unwrap(), IDS_PER_TRANSACTION);
        assert_eq!(base(5).unwrap() + IDS_PER_TRANSACTION, base(6).unwrap());
        assert!(base((1 << 43) - 1).is_ok());
        assert!(base(1 << 43).is_err());
        assert!(base(-1).is_err());
        assert!(below_watermark!().contains(&format!("<< {LSN_SHIFT})")));
    }

    #[test]
    fn only_a_conflict_a_unique_violation_or_a_deadlock_is_retried() {
        assert!(retryable(&Conflict::check("t", 9, 8).unwrap_err()));
        assert!(Conflict::check("t", 8, 8).is_ok());
        assert!(!retryable(&Error::Closed));
        let io = std::io::Error::other("reset");
        assert!(!retryable(&Error::Storage { op: "x", source: std::sync::Arc::new(io) }));
    }
}
