//! `cairn result THREAD --follow` and `cairn show`: a chain of threads continued as new
//! (`ctx.continue_as_new`), written by an application, read by the command line, which does not
//! have the workflow.

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, Workflow};

use crate::harness::{on, tempdir};

/// Each thread counts to 2; a thread whose input is below 2 continues as new on input + 1
/// once it got there.
fn chain() -> Workflow<Replace<(u64, u64)>> {
    Workflow::<Replace<(u64, u64)>>::builder("chain", 1)
        .node("tick", |s: std::sync::Arc<Replace<(u64, u64)>>, ctx: Ctx| async move {
            let (generation, n) = s.0;
            if n + 1 == 2 && generation < 2 {
                ctx.continue_as_new(&(generation + 1, 0_u64))?;
            }
            Ok(NodeOutput::update((generation, n + 1)))
        })
        .edge(START, "tick")
        .route(
            "tick",
            |s: &Replace<(u64, u64)>| if s.0.1 >= 2 { END } else { "tick" },
            ["tick", END],
        )
        .loop_bound("tick", 2)
        .build()
        .expect("chain")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_follows_a_chain_of_threads_continued_as_new() {
    let dir = tempdir();
    let db = dir.path().join("chain.db");
    let wf = chain();
    let engine = Engine::builder(&db).workflow(&wf).open().await.expect("open");
    engine.start_json("chain", (0_u64, 0_u64), StartOptions::id("c")).await.expect("start");
    let (last, _) = engine
        .result_following("c", std::time::Duration::from_secs(30))
        .await
        .expect("the chain ends");
    assert_eq!(last, "c~2");
    engine.shutdown().await;
    drop(engine);

    let first = on(&db, &["result", "c", "--json"]).expect(0).json();
    assert_eq!((&first["thread"], &first["output"]), (&"c".into(), &serde_json::json!([0, 2])));
    let followed = on(&db, &["result", "c", "--follow", "--json"]).expect(0).json();
    assert_eq!(followed["thread"], "c~2", "{followed}");
    assert_eq!(followed["output"], serde_json::json!([2, 2]), "{followed}");
    let shown = on(&db, &["show", "c~1", "--json"]).expect(0).json();
    assert_eq!((&shown["continued_from"], &shown["continued_as"]), (&"c".into(), &"c~2".into()));
    let text = on(&db, &["show", "c"]).expect(0).stdout;
    assert!(text.contains("continued_as") && text.contains("c~1"), "{text}");
}
