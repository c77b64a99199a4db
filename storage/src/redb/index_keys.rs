//! What the thread search index (`thread_index.rs`, format v5) holds: its two tables and the
//! keys a thread record needs in them. A leaf: the writer's tables (`tables.rs`) open these
//! tables, the upkeep and the reads use them.

use std::collections::BTreeMap;

use ::redb::TableDefinition;

use crate::codec::{self, table};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::thread::ThreadRecord;

/// Threads by label: `(key, value, thread)`.
pub(crate) const BY_LABEL: TableDefinition<'_, (&str, &str, &str), ()> =
    TableDefinition::new(table::THREADS_BY_LABEL);
/// Threads by status: `(status discriminant, thread)`.
pub(crate) const BY_STATUS: TableDefinition<'_, (u8, &str), ()> =
    TableDefinition::new(table::THREADS_BY_STATUS);

/// What the index holds for one thread: its status and its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexKeys {
    pub(crate) status: u8,
    pub(crate) labels: BTreeMap<String, String>,
}

impl IndexKeys {
    /// The entries `record` needs.
    pub(crate) fn of(record: &ThreadRecord) -> IndexKeys {
        IndexKeys { status: record.status as u8, labels: record.labels.clone() }
    }
}

/// The index keys of the framed thread record `bytes` stored under `id`.
pub(crate) fn keys_of_frame(id: &ThreadId, bytes: &[u8]) -> Result<IndexKeys, Error> {
    let record = codec::decode_thread(bytes).map_err(|e| codec::locate(e, Some(id), None))?;
    Ok(IndexKeys::of(&record))
}
