//! The migrations of an older file, in order: each takes the file one format version up in its
//! own transaction, so a crash between two leaves a file the next open takes on from there.
//! Run at a writable open (`mod.rs`) and in the private copy of a read-only open
//! (`snapshot.rs`).

use ::redb::{Database, TableError, WriteTransaction};

use super::guard::guard;
use super::index::storage;
use super::index_keys::{INDEX, THREAD_BY_STATUS};
use super::meta::{META, META_FORMAT_VERSION};
use super::queues::{DEDUP, MEMBERS, QUEUES, WAITING};
use super::signals::SIGNALS;
use crate::error::Error;
use crate::thread::ThreadStatus;

/// Takes `db`, of format `version`, to the current format (`super::FORMAT_VERSION`).
///
/// # Errors
/// Storage errors, a panic in redb (as [`guard`] reports it); the migration under way is not
/// committed.
pub(crate) fn upgrade(db: &Database, version: u16, op: &'static str) -> Result<(), Error> {
    if version < 2 {
        guard(op, || super::correlations::migrate(db))?;
    }
    if version < 3 {
        let create = |txn: &WriteTransaction| txn.open_table(SIGNALS).map(drop);
        guard(op, || new_tables(db, 3, "migrate to format v3", "the signal inbox", create))?;
    }
    if version < 4 {
        let create = |txn: &WriteTransaction| {
            txn.open_table(QUEUES)?;
            txn.open_table(MEMBERS)?;
            txn.open_table(WAITING)?;
            txn.open_table(DEDUP).map(drop)
        };
        guard(op, || new_tables(db, 4, "migrate to format v4", "the queue tables", create))?;
    }
    // v4 and v5 alike: the v6 step builds the index table from the records (v5 added only the
    // thread tables it replaces).
    if version < 6 {
        guard(op, || to_v6(db))?;
    }
    if version < 7 {
        guard(op, || to_v7(db))?;
    }
    if version < 8 {
        guard(op, || to_v8(db))?;
    }
    Ok(())
}

/// Takes a v4 or v5 file to v6 in one transaction: each conversion of the step, then the
/// version (a crash leaves the format before, and the next open converts again).
fn to_v6(db: &Database) -> Result<(), Error> {
    let txn = db.begin_write().map_err(|e| Error::storage("begin migration", e))?;
    super::migrate_v6_log::convert(&txn)?;
    let indexed = super::migrate_v6_indexes::convert(&txn)?;
    set_version(&txn, 6, "migrate to format v6")?;
    txn.commit().map_err(|e| Error::storage("commit migration", e))?;
    tracing::info!(?indexed, "format v6");
    Ok(())
}

/// Takes a v6 file to v7 in one transaction: the thread records, checkpoints and snapshots
/// become rows of the `index` table, then the version.
fn to_v7(db: &Database) -> Result<(), Error> {
    let txn = db.begin_write().map_err(|e| Error::storage("begin migration", e))?;
    let moved = super::migrate_v7::convert(&txn)?;
    set_version(&txn, 7, "migrate to format v7")?;
    txn.commit().map_err(|e| Error::storage("commit migration", e))?;
    tracing::info!(?moved, "format v7");
    Ok(())
}

/// Takes a v7 file to v8 in one transaction: the thread-by-status entries of completed
/// threads go (`index_keys::status_indexed`), then the version.
fn to_v8(db: &Database) -> Result<(), Error> {
    let txn = db.begin_write().map_err(|e| Error::storage("begin migration", e))?;
    let removed = completed_entries_removed(&txn)?;
    set_version(&txn, 8, "migrate to format v8")?;
    txn.commit().map_err(|e| Error::storage("commit migration", e))?;
    tracing::info!(removed, "format v8");
    Ok(())
}

/// Removes every thread-by-status entry of status completed; how many.
fn completed_entries_removed(txn: &WriteTransaction) -> Result<u64, Error> {
    let completed = ThreadStatus::Completed as u8;
    let start = [THREAD_BY_STATUS, completed];
    let end = [THREAD_BY_STATUS, completed + 1];
    let mut index = txn.open_table(INDEX).map_err(|e| Error::storage("open table", e))?;
    let removed = index
        .extract_from_if::<&[u8], _>(&start[..]..&end[..], |_, _| true)
        .map_err(storage("migrate to format v8"))?
        .count();
    Ok(removed as u64)
}

/// Writes format version `to` in `txn`.
fn set_version(txn: &WriteTransaction, to: u16, op: &'static str) -> Result<(), Error> {
    let mut meta = txn.open_table(META).map_err(|e| Error::storage("open table", e))?;
    meta.insert(META_FORMAT_VERSION, to.to_le_bytes().as_slice()).map_err(storage(op))?;
    Ok(())
}

/// Takes `db` to format `to` (the migration `op`) in one transaction that creates the empty
/// tables `create` opens (a crash leaves the format before, and the next open migrates again).
fn new_tables(
    db: &Database,
    to: u16,
    op: &'static str,
    what: &str,
    create: impl FnOnce(&WriteTransaction) -> Result<(), TableError>,
) -> Result<(), Error> {
    let txn = db.begin_write().map_err(|e| Error::storage("begin migration", e))?;
    create(&txn).map_err(|e| Error::storage("open table", e))?;
    set_version(&txn, to, op)?;
    txn.commit().map_err(|e| Error::storage("commit migration", e))?;
    tracing::info!("created {what}: format v{to}");
    Ok(())
}
