//! The thread search index of a redb file (format v5, `docs/format.md` §2.6): the tables
//! `threads_by_label` `(key, value, thread) -> ()` and `threads_by_status` `(status, thread) ->
//! ()`, kept equal to the thread records by every write and delete of a record in the same
//! write transaction, their check in `verify`, and the migration of a v4 file (which lacks
//! them) to v5. Their layout is `index_keys.rs`; the reads through them are `thread_search.rs`.

use std::collections::{BTreeMap, BTreeSet};

use ::redb::{Database, ReadTransaction, ReadableTable};

use super::index::storage;
use super::index_keys::{BY_LABEL, BY_STATUS, IndexKeys, keys_of_frame};
use super::meta::{META, META_FORMAT_VERSION};
use super::tables::{THREADS, Tables};
use crate::codec::table;
use crate::error::Error;
use crate::ids::{Seq, ThreadId};
use crate::store::Problem;
use crate::thread::ThreadRecord;

/// The format that added the two tables.
const WITH_THREAD_INDEX: u16 = 5;

impl Tables<'_, '_> {
    /// Moves `id`'s index entries from what `old` needs to what `new` needs (`None`: no record),
    /// touching only the entries that differ.
    pub(crate) fn reindex_thread(
        &mut self,
        id: &ThreadId,
        old: Option<&IndexKeys>,
        new: Option<&IndexKeys>,
    ) -> Result<(), Error> {
        if old == new {
            return Ok(());
        }
        let op = storage("write thread index");
        let thread = id.as_str();
        let (old_status, new_status) = (old.map(|k| k.status), new.map(|k| k.status));
        if old_status != new_status {
            if let Some(status) = old_status {
                self.threads_by_status()?.remove((status, thread)).map_err(&op)?;
            }
            if let Some(status) = new_status {
                self.threads_by_status()?.insert((status, thread), ()).map_err(&op)?;
            }
        }
        let empty = BTreeMap::new();
        let old_labels = old.map_or(&empty, |k| &k.labels);
        let new_labels = new.map_or(&empty, |k| &k.labels);
        for (key, value) in old_labels {
            if new_labels.get(key) != Some(value) {
                self.threads_by_label()?
                    .remove((key.as_str(), value.as_str(), thread))
                    .map_err(&op)?;
            }
        }
        for (key, value) in new_labels {
            if old_labels.get(key) != Some(value) {
                self.threads_by_label()?
                    .insert((key.as_str(), value.as_str(), thread), ())
                    .map_err(&op)?;
            }
        }
        Ok(())
    }
}

/// Migrates a v4 file to v5: builds both tables from every thread record and sets the format
/// version, in one transaction (a crash leaves v4, and the next open migrates again; the tables
/// are emptied first, so a rerun builds the same entries).
///
/// # Errors
/// Storage errors; the file is left as it was.
pub(crate) fn migrate(db: &Database) -> Result<(), Error> {
    let txn = db.begin_write().map_err(|e| Error::storage("begin migration", e))?;
    let (mut indexed, mut skipped) = (0u64, 0u64);
    {
        let op = storage("migrate to format v5");
        let open_table = |e| Error::storage("open table", e);
        let threads = txn.open_table(THREADS).map_err(open_table)?;
        let mut by_label = txn.open_table(BY_LABEL).map_err(open_table)?;
        let mut by_status = txn.open_table(BY_STATUS).map_err(open_table)?;
        by_label.retain(|_, ()| false).map_err(&op)?;
        by_status.retain(|_, ()| false).map_err(&op)?;
        for entry in threads.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            // A damaged record is left out (reads of it and verify report it); the migration
            // goes on, so one damaged record does not keep the file from opening.
            let keys = ThreadId::new(key.value()).and_then(|id| keys_of_frame(&id, value.value()));
            let keys = match keys {
                Ok(keys) => keys,
                Err(error) => {
                    tracing::warn!(key = key.value(), %error, "a thread record left unindexed");
                    skipped += 1;
                    continue;
                }
            };
            let id = key.value();
            by_status.insert((keys.status, id), ()).map_err(&op)?;
            for (k, v) in &keys.labels {
                by_label.insert((k.as_str(), v.as_str(), id), ()).map_err(&op)?;
            }
            indexed += 1;
        }
        let mut meta = txn.open_table(META).map_err(open_table)?;
        meta.insert(META_FORMAT_VERSION, WITH_THREAD_INDEX.to_le_bytes().as_slice())
            .map_err(&op)?;
    }
    txn.commit().map_err(|e| Error::storage("commit migration", e))?;
    tracing::info!(threads = indexed, skipped, "built the thread search index: format v5");
    Ok(())
}

/// Checks both tables against `records` (every decodable thread record), both ways: a missing
/// entry and a stale one are each a problem. Returns the entries read.
///
/// # Errors
/// Storage errors (the caller reports them as one problem of the table).
pub(crate) fn verify<'r>(
    txn: &ReadTransaction,
    records: impl Iterator<Item = &'r ThreadRecord>,
    problems: &mut Vec<Problem>,
) -> Result<u64, Error> {
    let mut want_labels = BTreeSet::new();
    let mut want_status = BTreeSet::new();
    for record in records {
        let id = record.id.as_str().to_string();
        want_status.insert((record.status as u8, id.clone()));
        for (k, v) in &record.labels {
            want_labels.insert((k.clone(), v.clone(), id.clone()));
        }
    }
    let op = storage("verify thread index");
    let open_table = |e| Error::storage("open table", e);
    let mut read = 0;
    let mut problem = |table: &'static str, thread: &str, detail: String| {
        problems.push(Problem {
            table,
            thread: ThreadId::new(thread).ok(),
            seq: None::<Seq>,
            detail,
        });
    };
    for entry in txn.open_table(BY_LABEL).map_err(open_table)?.iter().map_err(&op)? {
        let (key, _) = entry.map_err(&op)?;
        read += 1;
        let (k, v, thread) = key.value();
        if !want_labels.remove(&(k.to_string(), v.to_string(), thread.to_string())) {
            let detail = format!("stale entry: thread {thread} has no label {k}={v}");
            problem(table::THREADS_BY_LABEL, thread, detail);
        }
    }
    for (k, v, thread) in want_labels {
        let detail = format!("missing entry: thread {thread} has the label {k}={v}");
        problem(table::THREADS_BY_LABEL, &thread, detail);
    }
    for entry in txn.open_table(BY_STATUS).map_err(open_table)?.iter().map_err(&op)? {
        let (key, _) = entry.map_err(&op)?;
        read += 1;
        let (status, thread) = key.value();
        if !want_status.remove(&(status, thread.to_string())) {
            let detail = format!("stale entry: thread {thread} is not in status {status}");
            problem(table::THREADS_BY_STATUS, thread, detail);
        }
    }
    for (status, thread) in want_status {
        let detail = format!("missing entry: thread {thread} is in status {status}");
        problem(table::THREADS_BY_STATUS, &thread, detail);
    }
    Ok(read)
}
