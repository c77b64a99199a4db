//! `cairn update` on a thread whose workflow declares the update, through the endpoint of the
//! application that serves the file (this binary does not have the workflow): the reply, the
//! same `--id` answered as a duplicate, an unknown update and a refusal exit 2 and change
//! nothing, and the thread keeps waiting for its signal.

use std::path::Path;
use std::sync::Arc;

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, ThreadStatus, Workflow};

use crate::harness::{Run, on, tempdir};

/// Waits for `go`; the update `add` adds to the number and replies the new one (refuses 0).
fn counter() -> Workflow<Replace<u64>> {
    Workflow::<Replace<u64>>::builder("counter", 1)
        .node("wait", |s: Arc<Replace<u64>>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update(s.0 + n))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .update(
            "add",
            |_s: &Replace<u64>, by: &u64| {
                if *by == 0 { Err("add at least 1".into()) } else { Ok(()) }
            },
            |s: &mut Replace<u64>, by: u64| {
                s.0 += by;
                Ok(s.0)
            },
        )
        .build()
        .expect("valid workflow")
}

/// `cairn ARGS... --db DB`, off the runtime's workers (the engine serving DB runs on them).
async fn cairn_on(db: &Path, args: &'static [&'static str]) -> Run {
    let db = db.to_path_buf();
    tokio::task::spawn_blocking(move || on(&db, args)).await.expect("the command's thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_prints_the_reply_once_and_refusals_exit_2() {
    let dir = tempdir();
    let db = dir.path().join("counters.db");
    let builder = Engine::builder(&db).workflow(&counter());
    let builder = cairn_tools::serve::ServingBuilder::new(builder, ([127, 0, 0, 1], 0).into());
    let (engine, server) = builder.open().await.expect("a serving engine");
    let t = engine.start_json("counter", 10u64, StartOptions::id("c")).await.expect("start");
    assert_eq!(t.wait().await.expect("parks").status, ThreadStatus::WaitingInput);

    let args = &["update", "c", "add", "--args", "5", "--id", "u-1", "--json"];
    let done = cairn_on(&db, args).await.expect(0);
    assert_eq!(
        (done.json()["reply"].as_u64(), done.json()["duplicate"].as_bool()),
        (Some(15), Some(false))
    );
    let again = cairn_on(&db, args).await.expect(0);
    assert_eq!(
        (again.json()["reply"].as_u64(), again.json()["duplicate"].as_bool()),
        (Some(15), Some(true))
    );
    let text = cairn_on(&db, &["update", "c", "add", "--args", "1"]).await.expect(0);
    assert!(text.stdout.contains("applied to c: reply 16"), "{}", text.stdout);

    let unknown = cairn_on(&db, &["update", "c", "nope", "--args", "1"]).await.expect(2);
    assert!(unknown.stderr.contains(r#"has no update "nope""#), "{}", unknown.stderr);
    let refused = cairn_on(&db, &["update", "c", "add", "--args", "0"]).await.expect(2);
    assert!(refused.stderr.contains("add at least 1"), "{}", refused.stderr);
    assert_eq!(t.status().await.expect("status"), ThreadStatus::WaitingInput);

    engine.signal("c", "go", 1u64).await.expect("signal");
    assert_eq!(t.output::<Replace<u64>>().await.expect("output").0, 17, "10 + 5 + 1, then 1");
    server.shutdown().await;
    engine.shutdown().await;
}
