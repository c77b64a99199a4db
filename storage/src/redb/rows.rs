//! The records the `index` table holds beside its entries (format v7, `docs/format.md` §2.6):
//! thread records, checkpoint metadata and checkpoint snapshots, each under a key of its own
//! kind byte. Until v6 each had a table of its own; redb pays per table a commit touches (a
//! table root, the path to its leaf, their checksums: about 56,000 instructions a table in a
//! small commit, `benches/README.md`), and a thread's commit touched all three, so they moved
//! into the table every such commit touches anyway. A leaf: the writer's tables (`tables.rs`),
//! the reads, the upkeep and `verify.rs` build their keys here.
//!
//! A key is the kind byte, then a thread record's id (its UTF-8 bytes, unprefixed: the rest of
//! the key), or a checkpoint's id (8 bytes, big-endian, so ids sort as numbers). Values are
//! frames, as the tables held them.

use ::redb::ReadableTable;

use crate::codec::{self, StoredThread, table};
use crate::error::Error;
use crate::ids::{CheckpointId, ThreadId};

type Bytes = &'static [u8];

/// The kind byte of a thread record: `thread id` -> framed thread record (kind 2).
pub(crate) const THREAD_ROW: u8 = 6;
/// The kind byte of a checkpoint's metadata: `id` -> framed `CheckpointInfo` (kind 3).
pub(crate) const CHECKPOINT_ROW: u8 = 7;
/// The kind byte of a checkpoint's snapshot: `id` -> framed snapshot (kind 4).
pub(crate) const SNAPSHOT_ROW: u8 = 8;

/// One record of the index table, as its key says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Row<'a> {
    /// The record of a thread.
    Thread(&'a str),
    /// The metadata of a checkpoint.
    Checkpoint(u64),
    /// The snapshot of a checkpoint.
    Snapshot(u64),
}

impl<'a> Row<'a> {
    /// The row's key.
    pub(crate) fn key(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        match self {
            Row::Thread(id) => {
                out.push(THREAD_ROW);
                out.extend_from_slice(id.as_bytes());
            }
            Row::Checkpoint(id) => {
                out.push(CHECKPOINT_ROW);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Row::Snapshot(id) => {
                out.push(SNAPSHOT_ROW);
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
        out
    }

    /// The row `key` is the key of; `None` for an index entry's key or damaged bytes.
    pub(crate) fn decode(key: &'a [u8]) -> Option<Row<'a>> {
        let (&kind, rest) = key.split_first()?;
        let id = || Some(u64::from_be_bytes(rest.try_into().ok()?));
        match kind {
            THREAD_ROW => std::str::from_utf8(rest).ok().map(Row::Thread),
            CHECKPOINT_ROW => id().map(Row::Checkpoint),
            SNAPSHOT_ROW => id().map(Row::Snapshot),
            _ => None,
        }
    }
}

/// Every byte value, so a one-byte key can be borrowed for as long as a range needs it.
static BYTES: [u8; 256] = {
    let mut bytes = [0; 256];
    let mut i = 0;
    while i < 256 {
        bytes[i] = i as u8;
        i += 1;
    }
    bytes
};

/// The keys of every row of `kind` (one of the row kinds): from the kind byte alone up to the
/// next kind.
pub(crate) fn kind_range(kind: u8) -> std::ops::Range<&'static [u8]> {
    let k = usize::from(kind);
    &BYTES[k..=k]..&BYTES[k + 1..=k + 1]
}

/// Reads `key` of the index table.
fn get<'t>(
    index: &'t impl ReadableTable<Bytes, Bytes>,
    key: &[u8],
    op: &'static str,
) -> Result<Option<::redb::AccessGuard<'t, Bytes>>, Error> {
    index.get(key).map_err(|e| Error::storage(op, e))
}

/// The stored record (with its seq-index tail) of thread `id`, checked.
pub(crate) fn stored_thread_in(
    index: &impl ReadableTable<Bytes, Bytes>,
    id: &ThreadId,
) -> Result<Option<StoredThread>, Error> {
    let Some(guard) = get(index, &Row::Thread(id.as_str()).key(), "read thread")? else {
        return Ok(None);
    };
    let stored =
        codec::decode_stored_thread(guard.value()).map_err(|e| codec::locate(e, Some(id), None))?;
    let mismatch = (&stored.record.id != id)
        .then(|| format!("key {id} holds the record of thread {}", stored.record.id));
    codec::key_agrees(mismatch, table::THREADS, Some(id), None)?;
    Ok(Some(stored))
}

/// The framed checkpoint metadata stored under `id`, unchecked (the caller decodes it).
pub(crate) fn checkpoint_frame<'t>(
    index: &'t impl ReadableTable<Bytes, Bytes>,
    id: CheckpointId,
) -> Result<Option<::redb::AccessGuard<'t, Bytes>>, Error> {
    get(index, &Row::Checkpoint(id.0).key(), "read checkpoint")
}

/// The framed snapshot stored under checkpoint `id`, unchecked (the caller decodes it).
pub(crate) fn snapshot_frame<'t>(
    index: &'t impl ReadableTable<Bytes, Bytes>,
    id: CheckpointId,
) -> Result<Option<::redb::AccessGuard<'t, Bytes>>, Error> {
    get(index, &Row::Snapshot(id.0).key(), "read snapshot")
}

/// The highest checkpoint id with a metadata row, if any.
pub(crate) fn last_checkpoint_id(
    index: &impl ReadableTable<Bytes, Bytes>,
) -> Result<Option<u64>, Error> {
    let op = "read counters";
    let mut rows = index.range(kind_range(CHECKPOINT_ROW)).map_err(|e| Error::storage(op, e))?;
    let Some(last) = rows.next_back() else {
        return Ok(None);
    };
    let (key, _) = last.map_err(|e| Error::storage(op, e))?;
    match Row::decode(key.value()) {
        Some(Row::Checkpoint(id)) => Ok(Some(id)),
        _ => Err(Error::Corrupted {
            table: table::CHECKPOINTS,
            thread: None,
            seq: None,
            detail: format!("the last checkpoint key {:?} is not a checkpoint id", key.value()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_keys_decode_to_their_rows_and_sort_by_id() {
        for row in [Row::Thread("t-1"), Row::Thread(""), Row::Checkpoint(7), Row::Snapshot(0)] {
            assert_eq!(Row::decode(&row.key()), Some(row));
            assert!(kind_range(row.key()[0]).contains(&row.key().as_slice()));
        }
        assert!(Row::Checkpoint(255).key() < Row::Checkpoint(256).key());
        assert!(Row::Checkpoint(u64::MAX).key() < Row::Snapshot(0).key());
        // An index entry's key, a short id, a non-UTF-8 thread id: no row.
        for bad in [&[4, 1, b't'][..], &[7, 0, 1], &[6, 0xff], &[8], &[]] {
            assert_eq!(Row::decode(bad), None, "{bad:?}");
        }
    }
}
