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
