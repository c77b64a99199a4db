//! `cairn versions`: the drain view per workflow version and per worker build. A thread started
//! by an engine with a build id is counted under that build, one started `auto_upgrade` under
//! the unpinned row, in text and JSON.

use std::sync::Arc;

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, ThreadStatus, Workflow};

use crate::harness::{on, tempdir};

/// Waits for a `go` signal.
fn gate() -> Workflow<Replace<String>> {
    Workflow::<Replace<String>>::builder("gate", 1)
        .node("wait", |_s: Arc<Replace<String>>, ctx: Ctx| async move {
            let got: String = ctx.recv("go").await?;
            Ok(NodeOutput::update(got))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .expect("valid workflow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_shows_the_unfinished_threads_of_each_build() {
    let dir = tempdir();
    let db = dir.path().join("builds.db");
    let wf = gate();
    let engine = Engine::builder(&db).workflow(&wf).build_id("2026.12.1").open().await.unwrap();
    engine.start_json("gate", String::new(), StartOptions::id("pinned")).await.unwrap();
    let free = StartOptions::id("free").auto_upgrade();
    engine.start_json("gate", String::new(), free).await.unwrap();
    for id in ["pinned", "free"] {
        let t = engine.thread(id).await.unwrap();
        while t.status().await.unwrap() != ThreadStatus::WaitingInput {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    engine.shutdown().await;
    drop(engine);

    let text = on(&db, &["versions"]).expect(0);
    let build_row = text.stdout.lines().find(|l| l.starts_with("2026.12.1"));
    assert!(build_row.is_some_and(|l| l.contains("waiting_input 1")), "{}", text.stdout);
    assert!(text.stdout.lines().any(|l| l.starts_with("- (unpinned)")), "{}", text.stdout);
    let json = on(&db, &["versions", "--json"]).expect(0).json();
    let builds = json["builds"].as_array().expect("builds");
    let total = |b: Option<&str>| {
        builds.iter().find(|r| r["build"].as_str() == b).map(|r| r["total"].clone())
    };
    assert_eq!(total(Some("2026.12.1")), Some(1.into()), "{json}");
    assert_eq!(total(None), Some(1.into()), "{json}");
    assert!(json["build_here"].is_null(), "the command has no build id: {json}");
}

/// `db` with threads `pinned` (build 2026.12.1) and `free` (unpinned), both waiting.
async fn two_threads(db: &std::path::Path) {
    let wf = gate();
    let engine = Engine::builder(db).workflow(&wf).build_id("2026.12.1").open().await.unwrap();
    engine.start_json("gate", String::new(), StartOptions::id("pinned")).await.unwrap();
    let free = StartOptions::id("free").auto_upgrade();
    engine.start_json("gate", String::new(), free).await.unwrap();
    for id in ["pinned", "free"] {
        let t = engine.thread(id).await.unwrap();
        while t.status().await.unwrap() != ThreadStatus::WaitingInput {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    engine.shutdown().await;
}

/// The unfinished threads per build, as `cairn versions --json` counts them.
fn build_totals(db: &std::path::Path) -> Vec<(Option<String>, u64)> {
    let json = on(db, &["versions", "--json"]).expect(0).json();
    let rows = json["builds"].as_array().expect("builds").iter();
    rows.map(|r| (r["build"].as_str().map(str::to_owned), r["total"].as_u64().unwrap()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `thread`'s labels, as `cairn threads --json` lists them.
fn labels(db: &std::path::Path, thread: &str) -> serde_json::Value {
    let all = on(db, &["threads", "--json"]).expect(0).json();
    let mut rows = all.as_array().expect("an array").iter();
    rows.find(|t| t["thread"] == thread).expect("listed")["labels"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repin_moves_a_thread_to_a_build_and_unpins_it() {
    let dir = tempdir();
    let db = dir.path().join("repin.db");
    two_threads(&db).await;
    let one = |b: &str, n| (Some(b.to_owned()), n);
    assert_eq!(build_totals(&db), [(None, 1), one("2026.12.1", 1)]);

    let out = on(&db, &["repin", "pinned", "2026.12.2"]).expect(0);
    assert!(out.stdout.contains("pinned to build 2026.12.2"), "{}", out.stdout);
    assert_eq!(labels(&db, "pinned")["cairn.build"], "2026.12.2");
    assert_eq!(build_totals(&db), [(None, 1), one("2026.12.2", 1)]);

    let json = on(&db, &["repin", "pinned", "--unpin", "--json"]).expect(0).json();
    assert_eq!(
        (json["build"].clone(), json["status"].clone()),
        (serde_json::Value::Null, "waiting_input".into())
    );
    assert!(labels(&db, "pinned").get("cairn.build").is_none(), "unpinned");
    assert_eq!(build_totals(&db), [(None, 2)]);

    // A bad build id: a usage error (exit 2), nothing written; neither BUILD nor --unpin, or
    // both, likewise; an unknown thread exits 1.
    on(&db, &["repin", "free", "2026.12.3"]).expect(0);
    let events = |t: &str| on(&db, &["events", t, "--json"]).expect(0).stdout;
    let before = events("free");
    let bad = on(&db, &["repin", "free", "has space"]).expect(2);
    assert!(bad.stderr.contains("build id"), "{}", bad.stderr);
    on(&db, &["repin", "free", &"x".repeat(65)]).expect(2);
    on(&db, &["repin", "free"]).expect(2);
    on(&db, &["repin", "free", "b", "--unpin"]).expect(2);
    assert_eq!(events("free"), before, "nothing written");
    assert_eq!(labels(&db, "free")["cairn.build"], "2026.12.3");
    on(&db, &["repin", "nope", "b"]).expect(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_repin_counts_then_moves_one_builds_threads() {
    let dir = tempdir();
    let db = dir.path().join("batch-repin.db");
    two_threads(&db).await;
    let filter = "--filter=label.cairn.build=2026.12.1";
    let dry = on(&db, &["batch", "repin", filter, "--build", "2026.12.2", "--dry-run"]).expect(0);
    assert!(dry.stdout.contains("1 threads match"), "{}", dry.stdout);
    assert_eq!(labels(&db, "pinned")["cairn.build"], "2026.12.1", "a dry run applies nothing");
    on(&db, &["batch", "repin", filter]).expect(2);
    on(&db, &["batch", "repin", filter, "--build", "has space"]).expect(2);
    let done = on(&db, &["batch", "repin", filter, "--build", "2026.12.2", "--json"]).expect(0);
    let json = done.json();
    assert_eq!(
        (json["applied"].as_u64(), json["finished"].as_bool()),
        (Some(1), Some(true)),
        "{json}"
    );
    assert_eq!(labels(&db, "pinned")["cairn.build"], "2026.12.2");
    assert!(labels(&db, "free").get("cairn.build").is_none(), "control: not matched, not moved");
    let one = |b: &str, n| (Some(b.to_owned()), n);
    assert_eq!(build_totals(&db), [(None, 1), one("2026.12.2", 1)]);
}
