//! The drain view (`Engine::drain`, `GET /api/versions`, `cairn versions`): per workflow
//! version, the threads that have not finished and whether the engine carries the version. An
//! engine without a version leaves its threads alone and says so.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{END, START, StartOptions};

use crate::common::{Tally, db, open};

/// Waits for one `go` signal; `version` numbers it.
fn gate(version: u32) -> Workflow<Tally> {
    Workflow::<Tally>::builder("gate", version)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((n, "went".to_owned())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_drain_view_counts_each_versions_unfinished_threads() {
    let (_d, path) = db();
    let (v1, v2) = (gate(1), gate(2));
    let engine = open(&path, &[&v1, &v2], |b| b).await;
    for (id, version) in [("a", 1), ("b", 1), ("c", 2), ("d", 2)] {
        let options = StartOptions { version: Some(version), ..StartOptions::id(id) };
        engine.start_json("gate", Tally::default(), options).await.unwrap();
    }
    engine.signal("d", "go", 1u64).await.unwrap();
    engine.thread("d").await.unwrap().finished().await.unwrap();
    for id in ["a", "b", "c"] {
        let t = engine.thread(id).await.unwrap();
        while t.status().await.unwrap() != cairn::ThreadStatus::WaitingInput {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    let drain = engine.drain().await.unwrap();
    let rows: Vec<(&str, u32, u64, bool)> = drain
        .versions
        .iter()
        .map(|v| (v.workflow.as_str(), v.version, v.total, v.registered_here))
        .filter(|(w, ..)| *w == "gate")
        .collect();
    assert_eq!(rows, [("gate", 1, 2, true), ("gate", 2, 1, true)], "d finished: not counted");
    assert_eq!(
        drain
            .versions
            .iter()
            .find(|v| v.workflow == "gate" && v.version == 1)
            .map(|v| v.unfinished["waiting_input"]),
        Some(2)
    );
    assert!(!drain.partial);
    engine.shutdown().await;
    drop(engine);

    // An engine carrying only version 2: version 1's threads still wait, and it says it lacks it.
    let engine = open(&path, &[&v2], |b| b).await;
    let drain = engine.drain().await.unwrap();
    let v1 = drain.versions.iter().find(|v| v.workflow == "gate" && v.version == 1).unwrap();
    assert_eq!((v1.total, v1.registered_here), (2, false));
    engine.shutdown().await;
}

/// Waits until thread `id` is waiting for input.
async fn waiting(engine: &cairn::Engine, id: &str) {
    let t = engine.thread(id).await.unwrap();
    while t.status().await.unwrap() != cairn::ThreadStatus::WaitingInput {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The drain view's rows per build: (build, total, taken here).
fn builds(drain: &cairn::Drain) -> Vec<(Option<&str>, u64, bool)> {
    drain.builds.iter().map(|b| (b.build.as_deref(), b.total, b.taken_here)).collect()
}

#[tokio::test]
async fn a_file_reopened_by_another_build_leaves_the_first_builds_threads_alone() {
    let (_d, path) = db();
    let v1 = gate(1);
    for bad in ["", "has space", &"x".repeat(65)] {
        let b = cairn::Engine::builder(&path).workflow(&v1).build_id(bad);
        assert!(matches!(b.open().await, Err(cairn::Error::Invalid(_))), "{bad:?} refused");
    }
    let engine = open(&path, &[&v1], |b| b.build_id("2026.12.1")).await;
    engine.start_json("gate", Tally::default(), StartOptions::id("pinned")).await.unwrap();
    let free = StartOptions::id("free").auto_upgrade();
    engine.start_json("gate", Tally::default(), free).await.unwrap();
    waiting(&engine, "pinned").await;
    waiting(&engine, "free").await;
    let id = cairn::storage::ThreadId::new("pinned").unwrap();
    let labels = engine.store().thread(&id).wait().unwrap().unwrap().labels;
    assert_eq!(labels.get("cairn.build").map(String::as_str), Some("2026.12.1"));
    let refused = StartOptions::id("x").label("cairn.build", "other");
    assert!(engine.start_json("gate", Tally::default(), refused).await.is_err(), "reserved");
    engine.shutdown().await;
    drop(engine);

    // Build 2026.12.2 on the same file: the unpinned thread is its to run, the pinned one not.
    let engine = open(&path, &[&v1], |b| b.build_id("2026.12.2")).await;
    let drain = engine.drain().await.unwrap();
    assert_eq!(drain.build_here.as_deref(), Some("2026.12.2"));
    assert_eq!(
        builds(&drain),
        [(None, 1, true), (Some("2026.12.1"), 1, false), (Some("2026.12.2"), 0, true)]
    );
    engine.signal("free", "go", 1u64).await.unwrap();
    engine.signal("pinned", "go", 1u64).await.unwrap();
    engine.thread("free").await.unwrap().finished().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let pinned = engine.thread("pinned").await.unwrap();
    assert!(!pinned.status().await.unwrap().is_terminal(), "not run by another build");

    // Repinned by an operator: this build takes it and runs it to its end.
    assert!(matches!(engine.repin("pinned", Some("bad id")).await, Err(cairn::Error::Invalid(_))));
    engine.repin("pinned", Some("2026.12.2")).await.unwrap();
    pinned.finished().await.unwrap();
    assert_eq!(
        builds(&engine.drain().await.unwrap()),
        [(None, 0, true), (Some("2026.12.2"), 0, true)]
    );
    engine.shutdown().await;
}
