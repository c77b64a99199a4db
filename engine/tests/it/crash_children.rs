//! A crash at every append of a parent that starts, joins and leaves children (and of the
//! children themselves) neither loses nor doubles a child start: after recovery the parent ends
//! with the joined sum, and exactly the three children exist, each completed once.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cairn::dsl::Replace;
use cairn::storage::{Durability, RedbStore, Store};
use cairn::{Engine, StartOptions, ThreadStatus};

use crate::children::{children_ended, double, fan};
use crate::crash::Dying;

fn redb(path: &std::path::Path) -> Arc<dyn Store> {
    let options = cairn::storage::Options { durability: Durability::None, ..Default::default() };
    Arc::new(RedbStore::open(path, options).unwrap())
}

/// Runs the parent over a store that dies after `crash_after` appends (never with `None`);
/// returns the appends made.
async fn run(path: &std::path::Path, crash_after: Option<i64>) -> u64 {
    let child = double();
    let wf = fan(&child, [1, 2, 5]);
    let dying = Dying::over_file(path, crash_after);
    let engine =
        Engine::with_store(dying.clone()).workflow(&wf).workflow(&child).open().await.unwrap();
    if let Ok(h) = engine.start(&wf, Replace(0), StartOptions::id("p")).await {
        let done = async {
            let _ = h.finished().await;
            if crash_after.is_none() {
                children_ended(&engine, "p").await;
            }
        };
        tokio::select! {
            () = dying.died.notified() => {}
            () = done => {}
        }
    }
    engine.crash().await;
    drop(engine);
    dying.appends.load(Ordering::SeqCst)
}

/// Reopens `path` and checks the parent and its children after recovery.
async fn check(path: &std::path::Path, crash_after: i64) {
    let child = double();
    let wf = fan(&child, [1, 2, 5]);
    let engine =
        Engine::with_store(redb(path)).workflow(&wf).workflow(&child).open().await.unwrap();
    let h = engine.start(&wf, Replace(0), StartOptions::id("p")).await.unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), h.output()).await;
    assert_eq!(out.expect("the parent ends").unwrap(), Replace(6), "crash after {crash_after}");
    let children = children_ended(&engine, "p").await;
    assert_eq!(children.len(), 3, "crash after {crash_after}: {children:?}");
    for c in &children {
        assert_eq!(c.status, ThreadStatus::Completed, "crash after {crash_after}: {c:?}");
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_every_append_neither_loses_nor_doubles_a_child_start() {
    let dir = tempfile::tempdir().unwrap();
    let appends = run(&dir.path().join("clean.db"), None).await;
    assert!(appends > 5, "the clean run appends: {appends}");
    for k in 1..=i64::try_from(appends).unwrap() {
        let path = dir.path().join(format!("crash-{k}.db"));
        run(&path, Some(k)).await;
        check(&path, k).await;
    }
    eprintln!(
        "RELIABILITY children_crash crash_points={appends} children_per_case=3 lost=0 doubled=0"
    );
}
