//! A v6 file migrates to format v7 at open (the `threads`, `checkpoints` and
//! `checkpoint_snapshots` tables become rows of the `index` table), read-only copies included:
//! every record is the same bytes under its new key, the old tables are gone, and the store
//! reads every thread, checkpoint and snapshot as before.
//!
//! The fixture `tests/fixtures/v6_tables.db.gz` was written by the v6 build (commit `7bc9671`)
//! of the CLI, in an empty directory, then gzipped (`gzip -9 v6.db`):
//!
//! ```sh
//! cairn demo --db v6.db --threads 3 --quiet --no-serve
//! cairn start --db v6.db --id lab-1 --label team=a --label tier=gold --input '{"question":"q"}' research-agent
//! cairn start --db v6.db --id lab-2 --label team=a --input '{"question":"q"}' research-agent
//! cairn checkpoint create --db v6.db --tag blue --tag release demo-1
//! cairn checkpoint create --db v6.db --tag blue demo-2
//! cairn pause --db v6.db lab-2
//! ```

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use cairn_storage::{
    Catalog, CheckpointFilter, CheckpointId, Maintenance, Page, RedbStore, Store, ThreadFilter,
};
use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};

use cairn_storage_testkit::fault::FaultBackend;

use crate::common::*;
use crate::raw;

/// The v6 fixture's bytes.
fn fixture() -> Vec<u8> {
    let gz =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v6_tables.db.gz"))
            .expect("fixture");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut bytes).expect("gunzip");
    bytes
}

/// Every record of a file, by its v7 `index` key.
type Rows = BTreeMap<Vec<u8>, Vec<u8>>;

/// The records of the v6 tables, keyed as v7 keys them.
fn v6_rows(path: &Path) -> Rows {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let mut rows = Rows::new();
    for entry in txn.open_table(raw::THREADS).expect("threads").iter().expect("iter") {
        let (key, value) = entry.expect("entry");
        rows.insert(raw::thread_key(key.value()), value.value().to_vec());
    }
    for (def, kind) in [(raw::CHECKPOINTS, 7u8), (raw::SNAPSHOTS, 8u8)] {
        for entry in txn.open_table(def).expect("table").iter().expect("iter") {
            let (key, value) = entry.expect("entry");
            let row = if kind == 7 { raw::checkpoint_key } else { raw::snapshot_key };
            rows.insert(row(key.value()), value.value().to_vec());
        }
    }
    rows
}

/// The rows (kinds 6 to 8) of the `index` table of a v7 file.
fn v7_rows(path: &Path) -> Rows {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let index = txn.open_table(raw::INDEX).expect("index");
    let mut rows = Rows::new();
    for entry in index.range::<&[u8]>(&[6u8][..]..&[9u8][..]).expect("range") {
        let (key, value) = entry.expect("entry");
        rows.insert(key.value().to_vec(), value.value().to_vec());
    }
    rows
}

/// Threads (id, status, last seq) and checkpoints (id, thread, snapshot length).
type Answers = (Vec<(String, String, u64)>, Vec<(u64, String, usize)>);

/// What a store answers of the fixture: every thread with its status and last seq, every
/// checkpoint with its snapshot's length.
fn answers<S: Store>(store: &S) -> Answers {
    let page = Page { limit: 1_000, offset: 0 };
    let threads = store.list_threads(&ThreadFilter::default(), page).wait().expect("threads");
    let threads = threads
        .iter()
        .map(|r| (r.id.to_string(), format!("{:?}", r.status), r.last.map_or(0, |b| b.seq.0)))
        .collect();
    let infos = store.list_checkpoints(&CheckpointFilter::default(), page).wait().expect("list");
    let checkpoints = infos
        .iter()
        .map(|info| {
            let loaded = store.checkpoint(info.id).wait().expect("load").expect("present");
            (info.id.0, info.thread.to_string(), loaded.snapshot.len())
        })
        .collect();
    (threads, checkpoints)
}

#[test]
fn a_v6_file_migrates_to_v7_with_every_record_unchanged_under_its_new_key() {
    let (_dir, path) = temp_db();
    std::fs::write(&path, fixture()).expect("write");
    assert_eq!(raw::format_version(&path), 6);
    let before_rows = v6_rows(&path);
    let count = |kind: u8| before_rows.keys().filter(|k| k[0] == kind).count();
    // Five threads, the demo's completion checkpoints and the two made by hand, a snapshot each.
    assert_eq!(count(6), 5);
    assert!(count(7) >= 5 && count(7) == count(8), "{} {}", count(7), count(8));
    // (The raw read above may rewrite redb's header: the file is compared from here on.)
    let before = std::fs::read(&path).expect("read");
    let snapshot = RedbStore::open_read_only(&path).expect("read-only open of v6");
    let answered = answers(&snapshot);
    assert!(snapshot.verify().expect("verify").is_clean());
    drop(snapshot);
    assert!(std::fs::read(&path).expect("read") == before, "a read-only open leaves the file");
    assert_eq!(answered.0.len(), 5);
    assert_eq!(answered.1.len(), count(7));
    let store = RedbStore::open(&path, fast()).expect("the v6 file opens");
    assert_eq!(answers(&store), answered);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.threads, 5);
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION);
    assert!(v7_rows(&path) == before_rows, "every record is the same bytes under its new key");
    // A thread found by its label, and the checkpoint ids carried on: the next checkpoint takes
    // the id after the fixture's last.
    let store = RedbStore::open(&path, fast()).expect("reopen");
    let gold = ThreadFilter::default().label("tier", "gold");
    let listed = store.list_threads(&gold, Page { limit: 10, offset: 0 }).wait().expect("label");
    assert_eq!(listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["lab-1"]);
    let last = answered.1.iter().map(|c| c.0).max().expect("a checkpoint");
    let new = checkpoint("lab-1", cairn_storage::CheckpointKind::Manual, &[]);
    let batch = cairn_storage::Batch { checkpoints: vec![new], ..cairn_storage::Batch::default() };
    assert_eq!(append(&store, batch).checkpoints[0], CheckpointId(last + 1));
    store.close().expect("close");
    let db = Database::open(&path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let names: Vec<String> =
        txn.list_tables().expect("list").map(|t| t.name().to_string()).collect();
    for old in ["threads", "checkpoints", "checkpoint_snapshots"] {
        assert!(!names.iter().any(|n| n == old), "{old} is gone: {names:?}");
    }
}

#[test]
fn a_crash_at_any_write_of_the_v7_migration_leaves_a_file_that_opens_whole() {
    let image = fixture();
    let want = {
        let store = RedbStore::with_backend(FaultBackend::from_image(image.clone()), fast())
            .expect("open migrates");
        answers(&store)
    };
    let (ops, outcomes) = crash_each_write_of_open(&image, |reopened, op, model| {
        assert_eq!(answers(reopened), want, "op {op} {model:?}");
        let report = reopened.verify().expect("verify");
        assert!(report.is_clean(), "op {op} {model:?}: {:?}", report.problems);
    });
    eprintln!(
        "RELIABILITY v7_migration_crash ops={ops} failed_opens={} opens={}",
        outcomes[0], outcomes[1]
    );
    assert!(outcomes[0] > 0, "some crash hit the migration");
}
