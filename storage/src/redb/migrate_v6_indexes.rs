//! The index part of the v5 -> v6 step (`migrate.rs`): the five index tables of format v5
//! (`checkpoints_by_thread`, `checkpoints_by_workflow`, `checkpoints_by_tag`,
//! `threads_by_label`, `threads_by_status`) become entries of the one `index` table
//! (`index_keys.rs`). The entries are built from what they index (every thread record and
//! every checkpoint), not copied, so a v4 file (which lacks the thread tables) converts the same
//! way, and a stale v5 entry is not carried over; then the old tables are deleted.

use ::redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::index::storage;
use super::index_keys::{Entry, INDEX, checkpoint_entries, keys_of_frame};
use super::migrate_v7::{CHECKPOINTS, THREADS};
use crate::codec;
use crate::error::Error;
use crate::ids::ThreadId;

/// The tables of format v5 the `index` table replaces.
const V5_INDEXES: [&str; 5] = [
    "checkpoints_by_thread",
    "checkpoints_by_workflow",
    "checkpoints_by_tag",
    "threads_by_label",
    "threads_by_status",
];

/// What [`convert`] indexed and left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Converted {
    pub(crate) threads: u64,
    pub(crate) checkpoints: u64,
    /// Records that did not decode: left out of the index (their reads and `verify` report
    /// them), so one damaged record does not keep the file from opening.
    pub(crate) skipped: u64,
}

/// Builds the `index` table from every thread record and checkpoint in `txn` (emptying it
/// first, so a rerun builds the same entries) and deletes the v5 index tables. The caller
/// sets the format version and commits.
///
/// # Errors
/// Storage errors; the caller aborts the transaction.
pub(crate) fn convert(txn: &WriteTransaction) -> Result<Converted, Error> {
    let op = storage("migrate the indexes to format v6");
    let open_table = |e| Error::storage("open table", e);
    let mut index = txn.open_table(INDEX).map_err(open_table)?;
    index.retain(|_, _| false).map_err(&op)?;
    let mut put = |entry: Entry<'_>| index.insert(entry.key().as_slice(), &[][..]).map(drop);
    let mut done = Converted::default();
    for entry in txn.open_table(THREADS).map_err(open_table)?.iter().map_err(&op)? {
        let (key, value) = entry.map_err(&op)?;
        let id = key.value();
        match ThreadId::new(id).and_then(|tid| keys_of_frame(&tid, value.value())) {
            Ok(keys) => {
                keys.entries(id).into_iter().try_for_each(&mut put).map_err(&op)?;
                done.threads += 1;
            }
            Err(error) => {
                tracing::warn!(key = id, %error, "a thread record left unindexed");
                done.skipped += 1;
            }
        }
    }
    for entry in txn.open_table(CHECKPOINTS).map_err(open_table)?.iter().map_err(&op)? {
        let (key, value) = entry.map_err(&op)?;
        match codec::decode_checkpoint(value.value()) {
            Ok(info) if info.id.0 == key.value() => {
                checkpoint_entries(&info).into_iter().try_for_each(&mut put).map_err(&op)?;
                done.checkpoints += 1;
            }
            _ => {
                tracing::warn!(id = key.value(), "a checkpoint left unindexed");
                done.skipped += 1;
            }
        }
    }
    drop(index);
    for name in V5_INDEXES {
        let old: TableDefinition<'_, (), ()> = TableDefinition::new(name);
        txn.delete_table(old).map_err(open_table)?;
    }
    Ok(done)
}
