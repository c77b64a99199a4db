//! A v7 file migrates to format v8 at open: the thread-by-status entries of completed threads
//! leave the `index` table (a completed thread has none since v8; a listing of completed threads
//! scans the thread rows), every other entry and row stays, and every listing by status answers
//! as before. The file is the T12 fixture of format v7 (`tests/fixtures/v7`, written by the
//! engine at that version: see `engine/tests/reliability/fixtures.rs`).

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::Path;

use cairn_storage::{Maintenance, Page, RedbStore, Store, ThreadFilter, ThreadStatus};
use redb::{Database, ReadableDatabase};

use crate::common::*;
use crate::raw;

/// The v7 fixture's bytes.
fn fixture() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v7/cairn.db.gz");
    let gz = std::fs::read(path).expect("fixture");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut bytes).expect("gunzip");
    bytes
}

/// Every key of the `index` table.
fn index_keys(path: &Path) -> BTreeSet<Vec<u8>> {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let index = txn.open_table(raw::INDEX).expect("index");
    let keys = redb::ReadableTable::iter(&index).expect("iter");
    keys.map(|entry| entry.expect("entry").0.value().to_vec()).collect()
}

/// The thread-by-status entry prefix of completed threads (kind 4, status 6).
const COMPLETED: [u8; 2] = [4, ThreadStatus::Completed as u8];

/// For each status, the ids a listing by it answers.
fn by_status<S: Store>(store: &S) -> Vec<(ThreadStatus, Vec<String>)> {
    let page = Page { limit: 1_000, offset: 0 };
    ThreadStatus::ALL
        .iter()
        .map(|&status| {
            let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
            let listed = store.list_threads(&filter, page).wait().expect("list");
            (status, listed.into_iter().map(|r| r.id.to_string()).collect())
        })
        .collect()
}

#[test]
fn a_v7_file_migrates_to_v8_dropping_only_the_completed_threads_status_entries() {
    let (_dir, path) = temp_db();
    std::fs::write(&path, fixture()).expect("write");
    assert_eq!(raw::format_version(&path), 7);
    let before = index_keys(&path);
    let completed = before.iter().filter(|k| k.starts_with(&COMPLETED)).count();
    assert!(completed > 0, "the fixture has completed threads");
    let image = std::fs::read(&path).expect("read");
    let snapshot = RedbStore::open_read_only(&path).expect("read-only open of v7");
    let answered = by_status(&snapshot);
    assert!(snapshot.verify().expect("verify").is_clean());
    drop(snapshot);
    assert!(std::fs::read(&path).expect("read") == image, "a read-only open leaves the file");
    let listed_completed = &answered.iter().find(|(s, _)| *s == ThreadStatus::Completed).unwrap().1;
    assert_eq!(listed_completed.len(), completed, "completed threads listed from the scan");
    let store = RedbStore::open(&path, fast()).expect("the v7 file opens");
    assert_eq!(by_status(&store), answered);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION);
    let want: BTreeSet<_> = before.into_iter().filter(|k| !k.starts_with(&COMPLETED)).collect();
    assert!(index_keys(&path) == want, "only the completed threads' status entries went");
}

#[test]
fn a_crash_at_any_write_of_the_v8_migration_leaves_a_file_that_opens_whole() {
    let image = fixture();
    let want = {
        let store = RedbStore::with_backend(
            cairn_storage_testkit::fault::FaultBackend::from_image(image.clone()),
            fast(),
        )
        .expect("open migrates");
        by_status(&store)
    };
    let (ops, outcomes) = crash_each_write_of_open(&image, |reopened, op, model| {
        assert_eq!(by_status(reopened), want, "op {op} {model:?}");
        let report = reopened.verify().expect("verify");
        assert!(report.is_clean(), "op {op} {model:?}: {:?}", report.problems);
    });
    eprintln!(
        "RELIABILITY v8_migration_crash ops={ops} failed_opens={} opens={}",
        outcomes[0], outcomes[1]
    );
    assert!(outcomes[0] > 0, "some crash hit the migration");
}
