//! A v5 file migrates to format v6 at open (the index tables become entries of the `index`
//! table), read-only copies included, and every index answers what the v5 tables answered:
//! checkpoints by thread, workflow and tag (and the one covering a seq), threads by status and
//! by label.
//!
//! The fixture `tests/fixtures/v5_indexes.db.gz` was written by the v5 build (commit `0afa56d`)
//! of the CLI, in an empty directory, then gzipped (`gzip -9 v5.db`):
//!
//! ```sh
//! cairn demo --db v5.db --threads 3 --quiet --no-serve
//! cairn start --db v5.db --id lab-1 --label team=a --label tier=gold --input '{"question":"q"}' research-agent
//! cairn start --db v5.db --id lab-2 --label team=a --input '{"question":"q"}' research-agent
//! cairn checkpoint create --db v5.db --tag blue --tag release demo-1
//! cairn checkpoint create --db v5.db --tag blue demo-2
//! cairn pause --db v5.db lab-2
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use cairn_storage::{
    CheckpointFilter, Maintenance, Page, RedbStore, Store, ThreadFilter, ThreadId, ThreadStatus,
};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::common::*;
use crate::raw;

const BY_THREAD: TableDefinition<'_, (&str, u64, u64), ()> =
    TableDefinition::new("checkpoints_by_thread");
const BY_WORKFLOW: TableDefinition<'_, (&str, u64), ()> =
    TableDefinition::new("checkpoints_by_workflow");
const BY_TAG: TableDefinition<'_, (&str, u64), ()> = TableDefinition::new("checkpoints_by_tag");
const BY_LABEL: TableDefinition<'_, (&str, &str, &str), ()> =
    TableDefinition::new("threads_by_label");
const BY_STATUS: TableDefinition<'_, (u8, &str), ()> = TableDefinition::new("threads_by_status");

/// What the v5 index tables hold.
#[derive(Default)]
struct V5 {
    by_thread: Vec<(String, u64, u64)>,
    by_workflow: Vec<(String, u64)>,
    by_tag: Vec<(String, u64)>,
    by_status: Vec<(u8, String)>,
    by_label: Vec<(String, String, String)>,
}

fn read_v5(path: &Path) -> V5 {
    let db = Database::open(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let mut v5 = V5::default();
    for entry in txn.open_table(BY_THREAD).expect("table").iter().expect("iter") {
        let key = entry.expect("entry").0;
        let (t, covers, id) = key.value();
        v5.by_thread.push((t.into(), covers, id));
    }
    for (def, out) in [(BY_WORKFLOW, &mut v5.by_workflow), (BY_TAG, &mut v5.by_tag)] {
        for entry in txn.open_table(def).expect("table").iter().expect("iter") {
            let key = entry.expect("entry").0;
            let (name, id) = key.value();
            out.push((name.into(), id));
        }
    }
    for entry in txn.open_table(BY_STATUS).expect("table").iter().expect("iter") {
        let key = entry.expect("entry").0;
        let (status, t) = key.value();
        v5.by_status.push((status, t.into()));
    }
    for entry in txn.open_table(BY_LABEL).expect("table").iter().expect("iter") {
        let key = entry.expect("entry").0;
        let (k, v, t) = key.value();
        v5.by_label.push((k.into(), v.into(), t.into()));
    }
    v5
}

/// Newest first, as listings answer.
fn newest_first(ids: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut ids: Vec<u64> = ids.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
    ids.reverse();
    ids
}

fn listed<S: Store>(store: &S, filter: CheckpointFilter) -> Vec<u64> {
    let page = Page { limit: 1_000, offset: 0 };
    store.list_checkpoints(&filter, page).wait().expect("list").iter().map(|c| c.id.0).collect()
}

fn threads<S: Store>(store: &S, filter: &ThreadFilter) -> Vec<String> {
    let page = Page { limit: 1_000, offset: 0 };
    store
        .list_threads(filter, page)
        .wait()
        .expect("list")
        .iter()
        .map(|r| r.id.to_string())
        .collect()
}

/// Every answer of `store`'s indexes equals what the v5 tables held.
fn answers_as_v5<S: Store>(store: &S, v5: &V5) {
    let mut of_thread: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (t, covers, id) in &v5.by_thread {
        of_thread.entry(t).or_default().push((*covers, *id));
    }
    for (t, entries) in &of_thread {
        let thread = ThreadId::new(*t).expect("id");
        let filter =
            CheckpointFilter { thread: Some(thread.clone()), ..CheckpointFilter::default() };
        assert_eq!(listed(store, filter), newest_first(entries.iter().map(|e| e.1)), "thread {t}");
        for (covers, _) in entries {
            let newest = entries.iter().filter(|e| e.0 == *covers).map(|e| e.1).max();
            let covering = store.checkpoint_covering(&thread, cairn_storage::Seq(*covers));
            assert_eq!(covering.wait().expect("covering").map(|c| c.0), newest);
        }
    }
    let mut of_name: BTreeMap<(bool, &str), Vec<u64>> = BTreeMap::new();
    for (w, id) in &v5.by_workflow {
        of_name.entry((true, w)).or_default().push(*id);
    }
    for (tag, id) in &v5.by_tag {
        of_name.entry((false, tag)).or_default().push(*id);
    }
    for ((workflow, name), ids) in of_name {
        let filter = if workflow {
            CheckpointFilter { workflow_id: Some(name.into()), ..CheckpointFilter::default() }
        } else {
            CheckpointFilter { any_tags: vec![name.into()], ..CheckpointFilter::default() }
        };
        assert_eq!(listed(store, filter), newest_first(ids), "{name}");
    }
    let mut of_status: BTreeMap<u8, Vec<String>> = BTreeMap::new();
    for (status, t) in &v5.by_status {
        of_status.entry(*status).or_default().push(t.clone());
    }
    for (status, ids) in of_status {
        let status = ThreadStatus::from_u8(status).expect("a status");
        let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
        assert_eq!(threads(store, &filter), ids, "{status:?}");
    }
    let mut of_label: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for (k, v, t) in &v5.by_label {
        of_label.entry((k, v)).or_default().push(t.clone());
    }
    for ((k, v), ids) in of_label {
        assert_eq!(threads(store, &ThreadFilter::default().label(k, v)), ids, "{k}={v}");
    }
}

#[test]
fn a_v5_file_migrates_to_v6_with_every_index_answer_unchanged() {
    let (_dir, path) = temp_db();
    let mut bytes = Vec::new();
    let gz = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v5_indexes.db.gz"),
    )
    .expect("fixture");
    flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut bytes).expect("gunzip");
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(raw::format_version(&path), 5);
    let v5 = read_v5(&path);
    // The fixture holds what the indexes answer: several statuses, labels, tags.
    assert!(v5.by_thread.len() >= 6 && v5.by_tag.len() == 3, "{:?}", v5.by_tag);
    assert!(v5.by_status.iter().map(|s| s.0).collect::<BTreeSet<_>>().len() >= 3);
    assert!(v5.by_label.len() >= 3, "{:?}", v5.by_label);
    // (The raw read above may rewrite redb's header: the file is compared from here on.)
    let before = std::fs::read(&path).expect("read");
    let snapshot = RedbStore::open_read_only(&path).expect("read-only open of v5");
    answers_as_v5(&snapshot, &v5);
    assert!(snapshot.verify().expect("verify").is_clean());
    drop(snapshot);
    assert!(std::fs::read(&path).expect("read") == before, "a read-only open leaves the file");
    let store = RedbStore::open(&path, fast()).expect("the v5 file opens");
    answers_as_v5(&store, &v5);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION);
    let db = Database::open(&path).expect("raw open");
    let txn = db.begin_read().expect("read");
    let names: Vec<String> =
        txn.list_tables().expect("list").map(|t| redb::TableHandle::name(&t).to_string()).collect();
    for old in
        ["checkpoints_by_thread", "checkpoints_by_tag", "threads_by_label", "threads_by_status"]
    {
        assert!(!names.iter().any(|n| n == old), "{old} is gone: {names:?}");
    }
    assert!(names.iter().any(|n| n == "index"), "{names:?}");
}
