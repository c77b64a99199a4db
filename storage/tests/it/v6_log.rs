//! The v5 -> v6 migration of the log (`storage/src/redb/migrate_v6_log.rs`): a v5 log (one
//! record an event, under its lsn) becomes batch frames at open, read-only opens included, in
//! one transaction that a crash leaves undone or done.

use cairn_storage::{Batch, Event, Lsn, Maintenance, RedbStore, Seq, ThreadLog, codec};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use std::path::Path;

use crate::common::*;
use crate::raw;

/// Threads "t" (45 events: 40 in one append, then singles between u's) and "u" (5 singles, one
/// with a correlation id), closed; returns every event as the feed reads it.
fn build(path: &Path) -> Vec<Event> {
    let store = RedbStore::open(path, fast()).expect("open");
    create_thread(&store, "t", 40);
    create_thread(&store, "u", 0);
    for i in 0..5 {
        let mut e = event("u", i + 1);
        if i == 2 {
            e.correlation = Some("c-1".into());
        }
        append(&store, Batch { events: vec![e], ..Batch::default() });
        events(&store, "t", 1);
    }
    let all = store.read_all_since(Lsn(0), 1_000).wait().expect("feed");
    store.close().expect("close");
    all
}

/// Rewrites the log of the closed file at `path` as a v5 build wrote it (each event its own
/// record, kind 1 or 7, under its lsn) and marks the file v5.
fn to_v5(path: &Path) {
    raw::write(path, |txn| {
        raw::rows_to_v6_tables(txn);
        let mut log = txn.open_table(raw::EVENTS).expect("events");
        let frames: Vec<(u64, Vec<u8>)> = log
            .iter()
            .expect("iter")
            .map(|e| e.expect("entry"))
            .map(|(k, v)| (k.value(), v.value().to_vec()))
            .collect();
        for (key, bytes) in frames {
            log.remove(key).expect("remove");
            for event in codec::decode_event_batch(&bytes).expect("a batch frame") {
                let framed = codec::encode_event(&event).expect("encode");
                log.insert(event.bookmark.lsn.0, framed.as_slice()).expect("insert");
            }
        }
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 5u16.to_le_bytes().as_slice()).expect("version 5");
    });
}

fn log_len(path: &Path) -> u64 {
    let db = redb::Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    txn.open_table(raw::EVENTS).expect("events").len().expect("len")
}

/// Every event, read by thread and through the feed, equals `want` (the feed's order).
fn assert_reads(store: &RedbStore, want: &[Event]) {
    assert_eq!(store.read_all_since(Lsn(0), 1_000).wait().expect("feed"), want);
    for thread in ["t", "u"] {
        let mine: Vec<Event> =
            want.iter().filter(|e| e.thread.as_str() == thread).cloned().collect();
        assert_eq!(store.read_since(&tid(thread), Seq(0), 1_000).wait().expect("read"), mine);
    }
    let correlated = store
        .read_correlated(&cairn_storage::CorrelationQuery::new("c-1"), Lsn(0), 10)
        .wait()
        .expect("correlated");
    assert_eq!(correlated.len(), 1);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn a_v5_file_is_migrated_to_v6_at_open_event_for_event() {
    let (_dir, path) = temp_db();
    let want = build(&path);
    assert_eq!(want.len(), 50);
    to_v5(&path);
    assert_eq!((raw::format_version(&path), log_len(&path)), (5, 50));
    let before = std::fs::read(&path).expect("read");
    // A read-only open migrates its private copy and leaves the file as it was.
    let snapshot = RedbStore::open_read_only(&path).expect("read-only open of v5");
    assert_reads(&snapshot, &want);
    drop(snapshot);
    assert_eq!(std::fs::read(&path).expect("read"), before, "the file is untouched");
    let store = RedbStore::open(&path, fast()).expect("the v5 file opens");
    assert_reads(&store, &want);
    store.close().expect("close");
    // Through v6 (frames) on to v7 (rows in the index table).
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION);
    // t 1..=40 is one run (one frame), then each single is its own.
    assert_eq!(log_len(&path), 11, "runs became frames");
}

#[test]
fn a_crash_at_any_write_of_the_v6_migration_leaves_a_file_that_opens_whole() {
    let (_dir, path) = temp_db();
    let want = build(&path);
    to_v5(&path);
    let image = std::fs::read(&path).expect("read");
    let (ops, outcomes) =
        crash_each_write_of_open(&image, |reopened, _, _| assert_reads(reopened, &want));
    eprintln!(
        "RELIABILITY v6_migration_crash ops={ops} failed_opens={} opens={}",
        outcomes[0], outcomes[1]
    );
    assert!(outcomes[0] > 0, "some crash hit the migration");
}
