//! Direct redb access to a closed store's file, to damage it the way the recovery table describes.
//! The table definitions mirror `storage/src/redb/tables.rs` (redb checks the types match).

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

pub const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("cairn_meta");
pub const EVENTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("events");
pub const SEQ_INDEX: TableDefinition<'_, (&str, u64), &[u8]> = TableDefinition::new("seq_index");
/// Thread records, checkpoints and snapshots until format v6 (v7 keeps them in `index`).
pub const THREADS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("threads");
pub const CHECKPOINTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("checkpoints");
pub const SNAPSHOTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("checkpoint_snapshots");
pub const PAYLOADS: TableDefinition<'_, &[u8; 32], &[u8]> = TableDefinition::new("payloads");
/// Every secondary index (format v6) and, since v7, the thread records, checkpoints and
/// snapshots; keys as `index_key` and `thread_key`, `checkpoint_key`, `snapshot_key` build them.
pub const INDEX: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("index");

/// A part of an `index` key: a length-prefixed string, a big-endian integer, or raw bytes
/// (the thread id that ends a thread entry's key).
pub enum Part<'a> {
    Str(&'a str),
    U64(u64),
    Raw(&'a [u8]),
}

/// The `index` key of kind `kind` (1 checkpoint by thread, 2 by workflow, 3 by tag, 4 thread by
/// status, 5 by label) made of `parts` (`docs/format.md` §2.6).
pub fn index_key(kind: u8, parts: &[Part<'_>]) -> Vec<u8> {
    let mut key = vec![kind];
    for part in parts {
        match part {
            Part::Str(s) => {
                key.extend_from_slice(&u32::try_from(s.len()).expect("short").to_be_bytes());
                key.extend_from_slice(s.as_bytes());
            }
            Part::U64(n) => key.extend_from_slice(&n.to_be_bytes()),
            Part::Raw(bytes) => key.extend_from_slice(bytes),
        }
    }
    key
}

/// The `index` key of thread `id`'s record (kind 6, then the id's bytes; `docs/format.md` §2.6).
pub fn thread_key(id: &str) -> Vec<u8> {
    index_key(6, &[Part::Raw(id.as_bytes())])
}

/// The `index` key of checkpoint `id`'s metadata (kind 7).
pub fn checkpoint_key(id: u64) -> Vec<u8> {
    index_key(7, &[Part::U64(id)])
}

/// The `index` key of checkpoint `id`'s snapshot (kind 8).
pub fn snapshot_key(id: u64) -> Vec<u8> {
    index_key(8, &[Part::U64(id)])
}

/// Takes the rows of `index` back into the tables of format v6 (`threads`, `checkpoints`,
/// `checkpoint_snapshots`), leaving `index` with its entries only: the layout before v7, for
/// tests that build an older file from a current one.
pub fn rows_to_v6_tables(txn: &WriteTransaction) {
    let mut index = txn.open_table(INDEX).expect("index");
    let mut rows = Vec::new();
    for entry in index.range::<&[u8]>(&[6u8][..]..&[9u8][..]).expect("range") {
        let (key, value) = entry.expect("entry");
        rows.push((key.value().to_vec(), value.value().to_vec()));
    }
    let (mut threads, mut checkpoints, mut snapshots) = (
        txn.open_table(THREADS).expect("threads"),
        txn.open_table(CHECKPOINTS).expect("checkpoints"),
        txn.open_table(SNAPSHOTS).expect("snapshots"),
    );
    for (key, value) in rows {
        index.remove(key.as_slice()).expect("remove");
        let number = || u64::from_be_bytes(key[1..].try_into().expect("8 bytes"));
        match key[0] {
            6 => threads.insert(std::str::from_utf8(&key[1..]).expect("utf-8"), value.as_slice()),
            7 => checkpoints.insert(number(), value.as_slice()),
            _ => snapshots.insert(number(), value.as_slice()),
        }
        .expect("insert");
    }
}

/// Runs `f` in a write transaction on the file at `path` and commits.
pub fn write(path: &Path, f: impl FnOnce(&WriteTransaction)) {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_write().expect("raw write");
    f(&txn);
    txn.commit().expect("raw commit");
}

/// The key (its last lsn) of the batch frame holding event (thread, seq), found by decoding the
/// whole log.
pub fn lsn_of(path: &Path, thread: &str, seq: u64) -> u64 {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("raw read");
    let table = txn.open_table(EVENTS).expect("events table");
    for entry in table.iter().expect("iter") {
        let (key, value) = entry.expect("entry");
        let frame = cairn_storage::codec::decode_event_batch(value.value()).expect("a clean log");
        if frame.iter().any(|e| e.thread.as_str() == thread && e.bookmark.seq.0 == seq) {
            return key.value();
        }
    }
    panic!("event ({thread}, {seq}) not in the log");
}

/// The stored bytes of the batch frame holding event (thread, seq).
pub fn event_bytes(path: &Path, thread: &str, seq: u64) -> Vec<u8> {
    let lsn = lsn_of(path, thread, seq);
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("raw read");
    let table = txn.open_table(EVENTS).expect("events table");
    table.get(lsn).expect("get").expect("event present").value().to_vec()
}

/// Replaces the stored bytes of the batch frame holding event (thread, seq) (under its key).
pub fn put_event_bytes(path: &Path, thread: &str, seq: u64, bytes: &[u8]) {
    let lsn = lsn_of(path, thread, seq);
    write(path, |txn| {
        let mut table = txn.open_table(EVENTS).expect("events table");
        table.insert(lsn, bytes).expect("insert");
    });
}

/// Re-frames a body with a valid CRC (to build records that pass the CRC but fail another check).
pub fn with_valid_crc(mut covered: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&covered);
    covered.extend_from_slice(&crc.to_le_bytes());
    covered
}

/// The format version the file's meta table holds.
pub fn format_version(path: &Path) -> u16 {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let meta = txn.open_table(META).expect("meta");
    let v = meta.get("format_version").expect("get").expect("present");
    u16::from_le_bytes(v.value().try_into().expect("2 bytes"))
}
