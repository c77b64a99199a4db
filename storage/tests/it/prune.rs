//! Retention: prune a thread's events and checkpoints older than a chosen checkpoint.

use cairn_storage::{
    Batch, CheckpointFilter, CheckpointId, CheckpointKind, Error, Lsn, Page, Pruned, RedbStore,
    Seq, Store,
};
use cairn_storage::{Catalog, Maintenance, ThreadLog};

use crate::common::*;

fn save(store: &impl Store, thread: &str) -> CheckpointId {
    let batch = Batch {
        checkpoints: vec![checkpoint(thread, CheckpointKind::Periodic, &["p"])],
        ..Batch::default()
    };
    append(store, batch).checkpoints[0]
}

#[test]
fn prune_keeps_the_checkpoint_and_everything_after_it() {
    let (_dir, path, store) = open_fast();
    create_thread(&store, "t", 3);
    create_thread(&store, "other", 2);
    let old = save(&store, "t"); // covers 3
    events(&store, "t", 3);
    let keep = save(&store, "t"); // covers 6
    events(&store, "t", 2); // 7, 8
    let t = tid("t");
    let pruned = store.prune(&t, keep).expect("queued").wait_blocking().expect("prune");
    assert_eq!(pruned, Pruned { events: 6, checkpoints: 1, first_seq: Seq(7) });
    assert!(matches!(
        store.read_since(&t, Seq(0), 10).wait(),
        Err(Error::Pruned { first_available: Seq(7), .. })
    ));
    assert!(matches!(store.read_range(&t, Seq(6), Seq(8)).wait(), Err(Error::Pruned { .. })));
    let rest = store.read_since(&t, Seq(6), 10).wait().expect("read after the checkpoint");
    assert_eq!(rest.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>(), vec![7, 8]);
    let restored =
        store.latest_checkpoint_at_or_before(&t, Seq(8)).wait().expect("read").expect("kept");
    assert_eq!((restored.id, restored.covers.seq), (keep, Seq(6)));
    assert!(!store.checkpoint_exists(old).wait().expect("exists"));
    let listed =
        store.list_checkpoints(&CheckpointFilter::default(), Page::default()).wait().expect("list");
    assert_eq!(listed.iter().map(|c| c.id).collect::<Vec<_>>(), vec![keep]);
    assert_eq!(store.thread(&t).wait().expect("read").expect("present").first_seq, Seq(7));
    // Other threads and the global feed are intact (minus the pruned events).
    assert_eq!(store.read_since(&tid("other"), Seq(0), 10).wait().expect("read").len(), 2);
    let feed = store.read_all_since(Lsn(0), 100).wait().expect("feed");
    assert_eq!(feed.len(), 4);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    // Appends continue; a reopen keeps first_seq and the lsn counter.
    assert_eq!(events(&store, "t", 1).bookmarks[0].seq, Seq(9));
    store.close().expect("close");
    let store = RedbStore::open(&path, fast()).expect("reopen");
    assert!(matches!(store.read_since(&t, Seq(3), 1).wait(), Err(Error::Pruned { .. })));
    assert!(store.verify().expect("verify").is_clean());
}

#[test]
fn pruning_the_newest_lsn_never_lets_an_lsn_be_reused() {
    let (_dir, path, store) = open_fast();
    create_thread(&store, "t", 4);
    let keep = save(&store, "t");
    let last = store.last_lsn();
    store.prune(&tid("t"), keep).expect("queued").wait_blocking().expect("prune");
    assert!(store.read_all_since(Lsn(0), 10).wait().expect("feed").is_empty());
    store.close().expect("close");
    let store = RedbStore::open(&path, fast()).expect("reopen");
    let next = events(&store, "t", 1).bookmarks[0];
    assert_eq!((next.seq, next.lsn), (Seq(5), Lsn(last.0 + 1)));
    assert!(store.verify().expect("verify").is_clean());
}

#[test]
fn prune_refuses_unknown_and_foreign_checkpoints() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "a", 1);
    create_thread(&store, "b", 1);
    let b = save(&store, "b");
    let unknown = store.prune(&tid("a"), CheckpointId(99)).expect("queued").wait_blocking();
    assert!(matches!(unknown, Err(Error::UnknownCheckpoint(CheckpointId(99)))));
    let foreign = store.prune(&tid("a"), b).expect("queued").wait_blocking();
    assert!(matches!(foreign, Err(Error::Invalid { .. })));
    assert_eq!(store.read_since(&tid("a"), Seq(0), 10).wait().expect("read").len(), 1);
    // Pruning twice to the same checkpoint removes nothing more.
    store.prune(&tid("b"), b).expect("queued").wait_blocking().expect("prune");
    let again = store.prune(&tid("b"), b).expect("queued").wait_blocking().expect("prune");
    assert_eq!(again, Pruned { events: 0, checkpoints: 0, first_seq: Seq(2) });
}

#[test]
fn prune_cuts_through_seq_index_chunks_and_the_tail() {
    let (_dir, path, store) = open_fast();
    create_thread(&store, "t", 0);
    create_thread(&store, "u", 0);
    let t = tid("t");
    // t and u interleaved, so t's lsns are not consecutive. Checkpoints at t's seqs 40 (inside
    // the chunk 33..=64), 66 and 70 (inside the tail 65..), then 5 more events.
    let mut checkpoints = Vec::new();
    for n in 1..=75u64 {
        events(&store, "t", 1);
        events(&store, "u", 1);
        if [40, 66, 70].contains(&n) {
            checkpoints.push(save(&store, "t"));
        }
    }
    for (keep, first) in checkpoints.into_iter().zip([41u64, 67, 71]) {
        let pruned = store.prune(&t, keep).expect("queued").wait_blocking().expect("prune");
        assert_eq!(pruned.first_seq, Seq(first));
        assert!(matches!(
            store.read_since(&t, Seq(first - 2), 10).wait(),
            Err(Error::Pruned { .. })
        ));
        let rest = store.read_since(&t, Seq(first - 1), 1_000).wait().expect("read after");
        assert_eq!(
            rest.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>(),
            (first..=75).collect::<Vec<_>>()
        );
        let report = store.verify().expect("verify");
        assert!(report.is_clean(), "after pruning to {}: {:?}", first - 1, report.problems);
    }
    assert_eq!(store.read_since(&tid("u"), Seq(0), 1_000).wait().expect("u intact").len(), 75);
    // Appends continue and fill new chunks after the prunes; a reopen agrees.
    events(&store, "t", 40);
    assert!(store.verify().expect("verify").is_clean());
    store.close().expect("close");
    let store = RedbStore::open(&path, fast()).expect("reopen");
    assert_eq!(store.last_bookmark(&t).wait().expect("read").expect("events").seq, Seq(115));
    assert_eq!(store.read_range(&t, Seq(71), Seq(115)).wait().expect("all kept").len(), 45);
    assert!(store.verify().expect("verify").is_clean());
}
