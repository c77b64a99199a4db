//! redb table definitions and the meta table (format marker, version, counters).
//!
//! Key and value layouts are documented in `docs/format.md`; values other than the meta table,
//! the indexes and payloads are frames (see [`crate::frame`]).

use ::redb::{
    ReadTransaction, ReadableDatabase, ReadableTable, Table, TableDefinition, WriteTransaction,
};

use std::collections::BTreeMap;

use super::cache::ThreadCache;
use super::index::storage;
use super::index_keys::{IndexKeys, keys_of_frame};
use super::rows::{self, Row, stored_thread_in};
use crate::codec::{self, StoredThread, table};
use crate::error::Error;
use crate::event::Event;
use crate::ids::ThreadId;

pub(crate) use super::meta::*;

type Bytes = &'static [u8];

pub(crate) const EVENTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new(table::EVENTS);
pub(crate) const SEQ_INDEX: TableDefinition<'_, (&str, u64), &[u8]> =
    TableDefinition::new(table::SEQ_INDEX);
pub(crate) const PAYLOADS: TableDefinition<'_, &[u8; 32], &[u8]> =
    TableDefinition::new(table::PAYLOADS);
pub(crate) const LOCKS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new(table::LOCKS);
pub(crate) const CORRELATIONS: TableDefinition<'_, (&str, u64), &[u8]> =
    TableDefinition::new(table::CORRELATIONS);

/// A key of `queue_waiting`: queue, key, rank, thread.
pub(crate) type WaitingKey = (&'static str, &'static str, u64, &'static str);
/// A key of `queue_dedup`: queue, dedup key, thread.
pub(crate) type DedupKey = (&'static str, &'static str, &'static str);

/// Declares [`Tables`] from one list of its tables (`accessor: definition, key, value;`): a
/// field each, its accessor (which opens the table, creating it if needed, on first use), and
/// `create_all`, which opens them all.
macro_rules! tables {
    ($($name:ident: $def:expr, $key:ty, $value:ty;)+) => {
        /// The tables of one write transaction, each opened on first use: opening a table costs
        /// a lookup in redb's table tree, and an append needs only two or three of the fifteen.
        pub(crate) struct Tables<'txn, 'c> {
            txn: &'txn WriteTransaction,
            /// The writer's thread-record cache (see [`super::cache`]), kept current by every
            /// write of a thread record.
            pub(crate) cache: &'c mut ThreadCache,
            /// Thread records changed in this transaction and not yet written to `threads`: the
            /// latest of each (see [`Tables::stage_thread`]).
            staged: BTreeMap<ThreadId, StoredThread>,
            /// Events of this transaction's batches not yet framed into `events`, in lsn order
            /// (see [`Tables::stage_events`]): the writer's buffer, emptied when this opens, which
            /// keeps its room from one group to the next.
            staged_events: &'c mut Vec<Event>,
            /// Thread rows written in this transaction so far.
            pub(crate) thread_rows: usize,
            $($name: Option<Table<'txn, $key, $value>>,)+
        }

        impl<'txn, 'c> Tables<'txn, 'c> {
            /// No table opened yet; `events` is where its batches' events wait to be framed
            /// (emptied here: a group that failed may have left some).
            pub(crate) fn new(
                txn: &'txn WriteTransaction,
                cache: &'c mut ThreadCache,
                events: &'c mut Vec<Event>,
            ) -> Tables<'txn, 'c> {
                events.clear();
                Tables {
                    txn,
                    cache,
                    staged: BTreeMap::new(),
                    staged_events: events,
                    thread_rows: 0,
                    $($name: None,)+
                }
            }

            /// Opens (creating) every table: a new database has them all, so readers never meet
            /// a missing one.
            pub(crate) fn create_all(&mut self) -> Result<(), Error> {
                $(self.$name()?;)+
                Ok(())
            }

            /// The tables (by accessor) this transaction has opened so far: those its commit
            /// touches (redb pays per table a commit touches, `benches/README.md`).
            pub(crate) fn opened(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$name.is_some() { out.push(stringify!($name)); })+
                out
            }

            $(pub(crate) fn $name(&mut self) -> Result<&mut Table<'txn, $key, $value>, Error> {
                let table = match self.$name.take() {
                    Some(table) => table,
                    None => {
                        self.txn.open_table($def).map_err(|e| Error::storage("open table", e))?
                    }
                };
                Ok(self.$name.insert(table))
            })+
        }
    };
}

tables! {
    meta: META, &'static str, &'static [u8];
    events_table: EVENTS, u64, &'static [u8];
    seq_index: SEQ_INDEX, (&'static str, u64), &'static [u8];
    payloads: PAYLOADS, &'static [u8; 32], &'static [u8];
    locks: LOCKS, &'static str, &'static [u8];
    correlations: CORRELATIONS, (&'static str, u64), &'static [u8];
    signals: super::signals::SIGNALS, (&'static str, u64), &'static [u8];
    queues: super::queues::QUEUES, &'static str, &'static [u8];
    queue_members: super::queues::MEMBERS, &'static str, &'static [u8];
    queue_waiting: super::queues::WAITING, WaitingKey, ();
    queue_dedup: super::queues::DEDUP, DedupKey, ();
    index: super::index_keys::INDEX, &'static [u8], &'static [u8];
}

impl<'txn> Tables<'txn, '_> {
    /// The log, with every staged event framed into it first: whatever reads or changes it
    /// directly (a delete, a prune) sees the transaction's every event.
    pub(crate) fn events(&mut self) -> Result<&mut Table<'txn, u64, &'static [u8]>, Error> {
        self.write_staged_events()?;
        self.events_table()
    }

    /// Takes `events` (above every lsn staged or written so far) into the log of this
    /// transaction, framed once, by [`Tables::write_staged_events`] (before the commit, or
    /// before anything reads the log directly): the batches of one thread that a group holds in
    /// a row (a runner's pipelined steps, their lsns following each other) become one frame
    /// instead of one a batch (`event_batch::frames` cuts runs at 64 events, ~64 KiB).
    pub(crate) fn stage_events(&mut self, events: &mut Vec<Event>) {
        self.staged_events.append(events);
    }

    /// Frames every staged event into the log (see [`Tables::stage_events`]). An error leaves
    /// the transaction half-written: the caller aborts it.
    pub(crate) fn write_staged_events(&mut self) -> Result<(), Error> {
        if self.staged_events.is_empty() {
            return Ok(());
        }
        let mut staged = std::mem::take(self.staged_events);
        let appended = super::log::append(self.events_table()?, &staged);
        staged.clear();
        *self.staged_events = staged;
        appended
    }

    /// The index table, with every staged thread record written first: whatever reads or
    /// changes thread rows directly (a delete, a scan) sees the transaction's latest records.
    pub(crate) fn threads(&mut self) -> Result<&mut Table<'txn, Bytes, Bytes>, Error> {
        self.write_staged_threads()?;
        self.index()
    }

    /// Takes `stored` as the record of `id` from now on in this transaction, written to the
    /// threads table once, by [`Tables::write_staged_threads`] (before the commit, or before
    /// anything reads the table directly). A group of several batches of one thread (a runner's
    /// pipelined steps) rewrites its record once instead of once a batch.
    pub(crate) fn stage_thread(&mut self, id: ThreadId, stored: StoredThread) {
        self.staged.insert(id, stored);
    }

    /// The record of `id` as this transaction has it: staged, else the one this writer last
    /// wrote (the cache), else the stored one, checked.
    pub(crate) fn latest_thread(&mut self, id: &ThreadId) -> Result<Option<StoredThread>, Error> {
        if let Some(staged) = self.staged.get(id) {
            return Ok(Some(staged.clone()));
        }
        if let Some(cached) = self.cache.get(id) {
            return Ok(Some(cached.clone()));
        }
        stored_thread_in(&*self.index()?, id)
    }

    /// Writes every staged thread record (see [`Tables::stage_thread`]) and keeps the cache
    /// current: a leased thread's record stays in it, any other leaves it (nobody drives that
    /// thread now: parked, ended or not yet picked up; its next write is a while away, and a
    /// million parked threads must not sit in the cache). The search index follows each record
    /// (`thread_index.rs`): the old record's entries come from the cache, else from the row the
    /// write replaces. An error leaves the transaction half-written: the caller aborts it.
    pub(crate) fn write_staged_threads(&mut self) -> Result<(), Error> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let op = storage("write thread");
        for (id, stored) in std::mem::take(&mut self.staged) {
            let framed = codec::encode_stored_thread(&stored.record, &stored.tail)?;
            let cached = self.cache.get(&id).map(|old| IndexKeys::of(&old.record));
            let key = Row::Thread(id.as_str()).key();
            let old = match self.index()?.insert(key.as_slice(), framed.as_slice()) {
                Ok(Some(_)) if cached.is_some() => cached,
                Ok(Some(replaced)) => Some(keys_of_frame(&id, replaced.value())?),
                Ok(None) => None,
                Err(e) => return Err(op(e)),
            };
            self.reindex_thread(&id, old.as_ref(), Some(&IndexKeys::of(&stored.record)))?;
            self.thread_rows += 1;
            if stored.record.lease.is_some() {
                self.cache.put(id, stored, framed.len());
            } else {
                self.cache.forget(&id);
            }
        }
        Ok(())
    }
}

/// The counters the writer continues from.
///
/// Each is the larger of its meta-table value and the highest key in use (the events table's last
/// lsn, the last checkpoint row's id). Appends only add keys above both, so the writer stores
/// the counters in the meta table only in groups that remove records (delete, clear, prune),
/// which may remove the highest key: an lsn or a checkpoint id is never reused, and an ordinary
/// append commit writes one table fewer.
pub(crate) use crate::plan::Counters;

/// What `check_meta` found.
pub(crate) enum MetaState {
    /// A Cairn database of a supported version (older ones are migrated at a writable open).
    Cairn(Counters, u16),
    /// A redb database with no tables at all: safe to initialise.
    Empty,
}

/// Checks that `db` holds a Cairn database this build can read.
///
/// # Errors
///
/// [`Error::NotCairn`], [`Error::NewerFormat`], storage errors.
pub(crate) fn check_meta(db: &impl ReadableDatabase) -> Result<MetaState, Error> {
    let txn = db.begin_read().map_err(|e| Error::storage("begin read", e))?;
    check_meta_txn(&txn)
}

/// [`check_meta`] inside an open read transaction.
pub(crate) fn check_meta_txn(txn: &ReadTransaction) -> Result<MetaState, Error> {
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(::redb::TableError::TableDoesNotExist(_)) => {
            return if has_tables(txn)? {
                Err(Error::NotCairn { detail: "a redb database without a Cairn meta table".into() })
            } else {
                Ok(MetaState::Empty)
            };
        }
        Err(::redb::TableError::TableTypeMismatch { .. }) => {
            return Err(Error::NotCairn { detail: "a meta table of another type".into() });
        }
        Err(e) => return Err(Error::storage("open meta table", e)),
    };
    let get = |key: &str| -> Result<Option<Vec<u8>>, Error> {
        let value = meta.get(key).map_err(|e| Error::storage("read meta", e))?;
        Ok(value.map(|v| v.value().to_vec()))
    };
    if get(META_MAGIC)?.as_deref() != Some(MAGIC) {
        return Err(Error::NotCairn { detail: "the meta table lacks the CAIRNDB magic".into() });
    }
    let version = get(META_FORMAT_VERSION)?
        .and_then(|v| <[u8; 2]>::try_from(v.as_slice()).ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| Error::NotCairn {
            detail: "the meta table lacks a format version".into(),
        })?;
    if version > super::FORMAT_VERSION {
        return Err(Error::NewerFormat { found: version, supported: super::FORMAT_VERSION });
    }
    if version == 0 {
        return Err(Error::NotCairn { detail: "format version 0 was never written".into() });
    }
    let counter = |key: &str| -> Result<u64, Error> {
        match get(key)? {
            None => Ok(0),
            Some(bytes) => {
                <[u8; 8]>::try_from(bytes.as_slice()).map(u64::from_le_bytes).map_err(|_| {
                    Error::corrupted(
                        table::META,
                        format!("meta key {key} holds {} bytes, not 8", bytes.len()),
                    )
                })
            }
        }
    };
    // The meta counters are written only by groups that remove records (see `Counters`); the
    // highest key of each table covers everything appended since.
    let op = "read counters";
    let last_event = match txn.open_table(EVENTS) {
        Ok(events) => events.last().map_err(|e| Error::storage(op, e))?.map(|(k, _)| k.value()),
        Err(::redb::TableError::TableDoesNotExist(_)) => None,
        // The layout of v1 before its release (events keyed by (thread, seq), no seq index).
        Err(::redb::TableError::TableTypeMismatch { .. }) => {
            return Err(Error::NotCairn {
                detail: "a pre-release Cairn v1 layout (events keyed by thread and seq); \
                         recreate the database"
                    .into(),
            });
        }
        Err(e) => return Err(Error::storage(op, e)),
    };
    let last_checkpoint = last_checkpoint_id(txn, version)?;
    Ok(MetaState::Cairn(
        Counters {
            last_lsn: counter(META_LAST_LSN)?.max(last_event.unwrap_or(0)),
            last_checkpoint_id: counter(META_LAST_CHECKPOINT_ID)?.max(last_checkpoint.unwrap_or(0)),
        },
        version,
    ))
}

/// The highest checkpoint id stored: the last checkpoint row of the index table (format v7),
/// or the last key of the `checkpoints` table of an older file not migrated yet.
fn last_checkpoint_id(txn: &ReadTransaction, version: u16) -> Result<Option<u64>, Error> {
    let op = "read counters";
    if version >= 7 {
        return match txn.open_table(super::index_keys::INDEX) {
            Ok(index) => rows::last_checkpoint_id(&index),
            Err(::redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(Error::storage(op, e)),
        };
    }
    match txn.open_table(super::migrate_v7::CHECKPOINTS) {
        Ok(table) => Ok(table.last().map_err(|e| Error::storage(op, e))?.map(|(k, _)| k.value())),
        Err(::redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(Error::storage(op, e)),
    }
}

fn has_tables(txn: &ReadTransaction) -> Result<bool, Error> {
    let mut tables = txn.list_tables().map_err(|e| Error::storage("list tables", e))?;
    Ok(tables.next().is_some())
}

/// Writes the meta table and creates every table, in `txn`.
pub(crate) fn initialise(txn: &WriteTransaction, created_at_ms: u64) -> Result<(), Error> {
    let (mut cache, mut events) = (ThreadCache::default(), Vec::new());
    let mut tables = Tables::new(txn, &mut cache, &mut events);
    tables.create_all()?;
    let op = "initialise meta";
    let meta = tables.meta()?;
    meta.insert(META_MAGIC, MAGIC).map_err(|e| Error::storage(op, e))?;
    meta.insert(META_FORMAT_VERSION, super::FORMAT_VERSION.to_le_bytes().as_slice())
        .map_err(|e| Error::storage(op, e))?;
    meta.insert(META_CREATED_AT_MS, created_at_ms.to_le_bytes().as_slice())
        .map_err(|e| Error::storage(op, e))?;
    write_counters(meta, Counters::default())
}

/// Stores the writer's counters.
pub(crate) fn write_counters(
    meta: &mut Table<'_, &'static str, &'static [u8]>,
    counters: Counters,
) -> Result<(), Error> {
    let op = "write counters";
    meta.insert(META_LAST_LSN, counters.last_lsn.to_le_bytes().as_slice())
        .map_err(|e| Error::storage(op, e))?;
    meta.insert(META_LAST_CHECKPOINT_ID, counters.last_checkpoint_id.to_le_bytes().as_slice())
        .map_err(|e| Error::storage(op, e))?;
    Ok(())
}
