//! The v6 -> v7 step (`migrate.rs`): thread records, checkpoint metadata and snapshots leave
//! their tables (`threads`, `checkpoints`, `checkpoint_snapshots`) for rows of the `index` table
//! (`rows.rs`). Each value is copied as it is (the frames do not change; a damaged one stays
//! damaged, for its reads and `verify` to report), under its row key; then the old tables are
//! deleted. Their definitions live here, for this step and the v5 -> v6 one before it.

use ::redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::index::storage;
use super::index_keys::INDEX;
use super::rows::Row;
use crate::codec::table;
use crate::error::Error;

/// Thread records until format v6: `thread id` -> framed record.
pub(crate) const THREADS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new(table::THREADS);
/// Checkpoint metadata until format v6: `id` -> framed `CheckpointInfo`.
pub(crate) const CHECKPOINTS: TableDefinition<'_, u64, &[u8]> =
    TableDefinition::new(table::CHECKPOINTS);
/// Checkpoint snapshots until format v6: `id` -> framed snapshot.
pub(crate) const SNAPSHOTS: TableDefinition<'_, u64, &[u8]> =
    TableDefinition::new(table::SNAPSHOTS);

/// What [`convert`] moved.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    pub(crate) threads: u64,
    pub(crate) checkpoints: u64,
    pub(crate) snapshots: u64,
}

/// Moves every row of the three tables into the `index` table and deletes them. The caller sets
/// the format version and commits.
///
/// # Errors
/// Storage errors; the caller aborts the transaction.
pub(crate) fn convert(txn: &WriteTransaction) -> Result<Moved, Error> {
    let op = storage("migrate the records to format v7");
    let open_table = |e| Error::storage("open table", e);
    let mut index = txn.open_table(INDEX).map_err(open_table)?;
    let mut moved = Moved::default();
    for entry in txn.open_table(THREADS).map_err(open_table)?.iter().map_err(&op)? {
        let (key, value) = entry.map_err(&op)?;
        index.insert(Row::Thread(key.value()).key().as_slice(), value.value()).map_err(&op)?;
        moved.threads += 1;
    }
    moved.checkpoints = move_numbered(txn, &mut index, CHECKPOINTS, Row::Checkpoint)?;
    moved.snapshots = move_numbered(txn, &mut index, SNAPSHOTS, Row::Snapshot)?;
    drop(index);
    txn.delete_table(THREADS).map_err(open_table)?;
    txn.delete_table(CHECKPOINTS).map_err(open_table)?;
    txn.delete_table(SNAPSHOTS).map_err(open_table)?;
    Ok(moved)
}

/// Copies every row of `def` (keyed by a number) into `index` under `row`'s key; how many.
fn move_numbered(
    txn: &WriteTransaction,
    index: &mut ::redb::Table<'_, &'static [u8], &'static [u8]>,
    def: TableDefinition<'_, u64, &[u8]>,
    row: fn(u64) -> Row<'static>,
) -> Result<u64, Error> {
    let op = storage("migrate the records to format v7");
    let mut n = 0;
    for entry in
        txn.open_table(def).map_err(|e| Error::storage("open table", e))?.iter().map_err(&op)?
    {
        let (key, value) = entry.map_err(&op)?;
        index.insert(row(key.value()).key().as_slice(), value.value()).map_err(&op)?;
        n += 1;
    }
    Ok(n)
}
