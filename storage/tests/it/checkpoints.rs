//! Checkpoints: latest at or before, listing with filters and paging, delete, clear, id reuse.

use cairn_storage::{
    Batch, CheckpointFilter, CheckpointId, CheckpointKind, NewCheckpoint, Page, RedbStore, Seq,
    Store,
};
use cairn_storage::{Maintenance, ThreadLog};

use crate::common::*;

fn save(store: &impl Store, cp: NewCheckpoint) -> CheckpointId {
    append(store, Batch { checkpoints: vec![cp], ..Batch::default() }).checkpoints[0]
}

fn ids(infos: Vec<cairn_storage::CheckpointInfo>) -> Vec<u64> {
    infos.into_iter().map(|i| i.id.0).collect()
}

#[test]
fn latest_at_or_before_picks_the_newest_covering_checkpoint() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 2);
    let c1 = save(&store, checkpoint("t", CheckpointKind::Periodic, &[])); // covers 2
    events(&store, "t", 3);
    let c2 = save(&store, checkpoint("t", CheckpointKind::Periodic, &[])); // covers 5
    let c3 = save(&store, checkpoint("t", CheckpointKind::Manual, &[])); // covers 5 too
    let t = tid("t");
    let at = |seq| {
        store.latest_checkpoint_at_or_before(&t, Seq(seq)).wait().expect("read").map(|c| c.id)
    };
    assert_eq!(at(1), None);
    assert_eq!(at(2), Some(c1));
    assert_eq!(at(4), Some(c1));
    assert_eq!(at(5), Some(c3));
    assert_eq!(at(100), Some(c3));
    assert!(c2 < c3);
    assert_eq!(
        store.latest_checkpoint_at_or_before(&tid("other"), Seq(9)).wait().expect("read"),
        None
    );
}

#[test]
fn listing_filters_pages_and_orders_newest_first() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "a", 1);
    create_thread(&store, "b", 1);
    let mut other_wf = checkpoint("b", CheckpointKind::Node, &["blue"]);
    other_wf.workflow = workflow("other");
    let c1 = save(&store, checkpoint("a", CheckpointKind::Manual, &["red"])).0;
    let c2 = save(&store, checkpoint("b", CheckpointKind::Periodic, &["red", "blue"])).0;
    let c3 = save(&store, other_wf).0;
    let c4 = save(&store, checkpoint("a", CheckpointKind::Failure, &[])).0;
    let list = |filter: CheckpointFilter, page: Page| {
        ids(store.list_checkpoints(&filter, page).wait().expect("list"))
    };
    let all = Page { limit: 100, offset: 0 };
    assert_eq!(list(CheckpointFilter::default(), all), vec![c4, c3, c2, c1]);
    assert_eq!(
        list(CheckpointFilter { thread: Some(tid("a")), ..Default::default() }, all),
        vec![c4, c1]
    );
    assert_eq!(
        list(CheckpointFilter { workflow_id: Some("wf".into()), ..Default::default() }, all),
        vec![c4, c2, c1]
    );
    assert_eq!(
        list(CheckpointFilter { kind: Some(CheckpointKind::Node), ..Default::default() }, all),
        vec![c3]
    );
    let tags = |t: &[&str]| CheckpointFilter {
        any_tags: t.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    assert_eq!(list(tags(&["red"]), all), vec![c2, c1]);
    assert_eq!(list(tags(&["red", "blue"]), all), vec![c3, c2, c1]);
    let combined = CheckpointFilter {
        thread: Some(tid("b")),
        any_tags: vec!["red".into()],
        ..Default::default()
    };
    assert_eq!(list(combined, all), vec![c2]);
    assert_eq!(list(CheckpointFilter::default(), Page { limit: 2, offset: 1 }), vec![c3, c2]);
    assert_eq!(list(CheckpointFilter::default(), Page { limit: 2, offset: 3 }), vec![c1]);
    assert_eq!(list(CheckpointFilter::default(), Page { limit: 0, offset: 0 }), Vec::<u64>::new());
}

#[test]
fn delete_and_clear_remove_checkpoints_and_their_index_entries() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "a", 1);
    create_thread(&store, "b", 1);
    let a1 = save(&store, checkpoint("a", CheckpointKind::Manual, &["x"]));
    let a2 = save(&store, checkpoint("a", CheckpointKind::Manual, &["x"]));
    let b1 = save(&store, checkpoint("b", CheckpointKind::Manual, &["x"]));
    assert!(store.delete_checkpoint(a1).expect("queued").wait_blocking().expect("delete"));
    assert!(!store.delete_checkpoint(a1).expect("queued").wait_blocking().expect("delete"));
    assert!(!store.checkpoint_exists(a1).wait().expect("exists"));
    assert_eq!(store.checkpoint(a1).wait().expect("read"), None);
    let by_tag = CheckpointFilter { any_tags: vec!["x".into()], ..Default::default() };
    assert_eq!(
        ids(store.list_checkpoints(&by_tag, Page::default()).wait().expect("list")),
        vec![b1.0, a2.0]
    );
    assert_eq!(
        store.clear_checkpoints(&tid("a")).expect("queued").wait_blocking().expect("clear"),
        1
    );
    assert_eq!(
        store.clear_checkpoints(&tid("a")).expect("queued").wait_blocking().expect("clear"),
        0
    );
    assert_eq!(
        ids(store.list_checkpoints(&by_tag, Page::default()).wait().expect("list")),
        vec![b1.0]
    );
    assert_eq!(store.latest_checkpoint_at_or_before(&tid("a"), Seq(9)).wait().expect("read"), None);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.checkpoints, 1);
}

#[test]
fn checkpoint_ids_are_never_reused_even_across_reopen() {
    let (_dir, path, store) = open_fast();
    create_thread(&store, "t", 1);
    let first = save(&store, checkpoint("t", CheckpointKind::Manual, &[]));
    store.delete_checkpoint(first).expect("queued").wait_blocking().expect("delete");
    store.close().expect("close");
    let store = RedbStore::open(&path, fast()).expect("reopen");
    let second = save(&store, checkpoint("t", CheckpointKind::Manual, &[]));
    assert!(second > first);
}

/// The `index` table is checked against the checkpoints both ways: an entry whose checkpoint
/// does not match it (another workflow, a tag it lacks) or does not exist is stale, and an entry
/// a checkpoint needs and lacks is missing; one problem each, in the index.
#[test]
fn verify_names_index_entries_their_checkpoint_does_not_match() {
    use crate::raw::{INDEX, Part, index_key};
    let (_dir, path, store) = open_fast();
    create_thread(&store, "a", 1);
    let c1 = save(&store, checkpoint("a", CheckpointKind::Manual, &["red"])).0;
    let filter = CheckpointFilter::default();
    let covers = store.list_checkpoints(&filter, Page { limit: 1, offset: 0 }).wait().unwrap()[0]
        .covers
        .seq
        .0;
    store.close().expect("close");
    let by_thread = |id| index_key(1, &[Part::Str("a"), Part::U64(covers), Part::U64(id)]);
    crate::raw::write(&path, |txn| {
        let mut index = txn.open_table(INDEX).expect("index");
        for key in [
            index_key(2, &[Part::Str("other"), Part::U64(c1)]),
            index_key(3, &[Part::Str("blue"), Part::U64(c1)]),
            by_thread(99),
        ] {
            index.insert(key.as_slice(), &[][..]).expect("stale");
        }
        assert!(index.remove(by_thread(c1).as_slice()).expect("remove").is_some(), "missing");
    });
    let store = RedbStore::open(&path, fast()).expect("open");
    let report = store.verify().expect("verify");
    let found: Vec<(&str, String, Option<u64>)> =
        report.problems.iter().map(|p| (p.table, p.detail.clone(), p.seq.map(|s| s.0))).collect();
    assert_eq!(
        found,
        [
            ("index", format!("stale entry: checkpoint-by-thread (a, {covers}, 99)"), Some(99)),
            ("index", format!("stale entry: checkpoint-by-workflow (other, {c1})"), Some(c1)),
            ("index", format!("stale entry: checkpoint-by-tag (\"blue\", {c1})"), Some(c1)),
            ("index", format!("missing entry: checkpoint-by-thread (a, {covers}, {c1})"), Some(c1)),
        ]
    );
}
