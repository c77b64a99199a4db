//! The signal inbox (`docs/format.md` §2.3, recovery rows 23 and 24): the migration of a v2
//! file at open, and damaged or misplaced signals.

use cairn_storage::{Batch, Error, NewSignal, Options, RedbStore};
use cairn_storage::{Catalog, Maintenance, ThreadLog};
use redb::{ReadableTable, TableDefinition};

use crate::common::*;
use crate::raw;

const SIGNALS: TableDefinition<'_, (&str, u64), &[u8]> = TableDefinition::new("signals");

fn send(store: &RedbStore, thread: &str, name: &str, data: &[u8]) -> u64 {
    let signal = NewSignal::new(tid(thread), name, data.to_vec(), 0).expect("signal");
    append(store, Batch { signals: vec![signal], ..Batch::default() }).signals[0]
}

#[test]
fn a_v2_file_is_migrated_to_v3_at_open() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, fast()).expect("open");
    create_thread(&store, "m", 3);
    store.close().expect("close");
    // As a v2 build left it: no inbox, format 2.
    raw::write(&path, |txn| {
        raw::rows_to_v6_tables(txn);
        txn.delete_table(SIGNALS).expect("delete the inbox");
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 2u16.to_le_bytes().as_slice()).expect("version 2");
    });
    assert_eq!(raw::format_version(&path), 2);

    // A read-only open migrates its private copy and leaves the file as it was.
    let before = std::fs::read(&path).expect("read");
    let snapshot = RedbStore::open_read_only(&path).expect("read-only open of v2");
    assert!(snapshot.signals(&tid("m"), 0, 10).wait().expect("an empty inbox").is_empty());
    assert!(snapshot.verify().expect("verify").is_clean());
    drop(snapshot);
    assert_eq!(std::fs::read(&path).expect("read"), before, "the file is untouched");

    let store = RedbStore::open(&path, Options::default()).expect("the v2 file opens");
    assert_eq!(send(&store, "m", "go", b"1"), 1, "signals work after the migration");
    assert_eq!(store.read_since(&tid("m"), cairn_storage::Seq(0), 10).wait().unwrap().len(), 3);
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION, "migrated (through v3)");
}

#[test]
fn a_damaged_signal_fails_closed_and_verify_names_it() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, Options::default()).expect("open");
    create_thread(&store, "x", 1);
    create_thread(&store, "y", 1);
    for n in 1..=3u8 {
        send(&store, "x", "a", &[b'0' + n]);
    }
    send(&store, "y", "a", b"9");
    store.close().expect("close");
    raw::write(&path, |txn| {
        let mut inbox = txn.open_table(SIGNALS).expect("inbox");
        // Signal 2 of x: one flipped bit.
        let mut bytes = inbox.get(("x", 2)).expect("get").expect("there").value().to_vec();
        let last = bytes.len() - 5;
        bytes[last] ^= 1;
        inbox.insert(("x", 2), bytes.as_slice()).expect("put");
        // Signal 3 of x moved to number 5 (a gap, and a record under another key).
        let moved = inbox.remove(("x", 3)).expect("remove").expect("there").value().to_vec();
        inbox.insert(("x", 5), moved.as_slice()).expect("put");
    });
    let store = RedbStore::open(&path, Options::default()).expect("open");
    let read = store.signals(&tid("x"), 0, 10).wait();
    assert!(matches!(&read, Err(Error::Corrupted { table: "signals", .. })), "{read:?}");
    assert_eq!(store.signals(&tid("x"), 0, 1).wait().unwrap().len(), 1, "before the damage: read");
    assert_eq!(
        store.signals(&tid("y"), 0, 10).wait().unwrap().len(),
        1,
        "another inbox: unaffected"
    );
    assert_eq!(store.read_since(&tid("x"), cairn_storage::Seq(0), 10).wait().unwrap().len(), 1);
    let report = store.verify().expect("verify");
    let problems: Vec<_> = report.problems.iter().filter(|p| p.table == "signals").collect();
    assert_eq!(problems.len(), 3, "{:?}", report.problems);
    assert!(problems.iter().any(|p| p.detail.contains("crc mismatch")), "{problems:?}");
    assert!(problems.iter().any(|p| p.detail.contains("gap")), "{problems:?}");
    assert!(
        problems.iter().any(|p| p.detail.contains("holds the signal of (x, 3)")),
        "{problems:?}"
    );
    assert_eq!(report.signals, 4);
}
