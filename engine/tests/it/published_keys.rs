//! The bound on the distinct keys one thread publishes (`PUBLISHED_KEYS_PER_THREAD_MAX`): the
//! new key past it is refused with an error that names the limit and nothing is written; a key
//! published before may be published again at the bound; the node that runs again (after a
//! wake) meets the same refusal at the same place, and replay agrees.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, START, StartOptions, ThreadStatus};
use serde_json::json;

use crate::common::{Tally, db, open};

/// `PUBLISHED_KEYS_PER_THREAD_MAX` (engine/src/limits.rs).
const KEYS_MAX: usize = 1_024;
/// `PUBLICATIONS_PER_TASK_MAX`: node `a` publishes this many keys, node `b` the rest.
const FIRST: usize = 1_000;

/// `a` publishes keys `k0`..; `b` publishes the rest up to the bound, `k0` again, then one key
/// too many (its error is the log), then waits for `go` (so that it runs again).
fn keys() -> Workflow<Tally> {
    Workflow::<Tally>::builder("keys", 1)
        .node("a", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in 0..FIRST {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            Ok(NodeOutput::update((0, String::new())))
        })
        .node("b", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in FIRST..KEYS_MAX {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            ctx.set_event("k0", "again").await?;
            let refused = match ctx.set_event(&format!("k{KEYS_MAX}"), 0u64).await {
                Ok(()) => "published".to_owned(),
                Err(e) => e.to_string(),
            };
            ctx.set_event("k1", "after").await?;
            let _go: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((1, refused)))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_key_past_the_bound_is_refused_a_known_one_is_not_and_replay_agrees() {
    let (_d, path) = db();
    let wf = keys();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("keys", Tally::default(), StartOptions::id("k")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("k", "go", 1u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log.len(), 1, "{:?}", out.log);
    let refused = &out.log[0];
    assert!(
        refused.contains("PUBLISHED_KEYS_PER_THREAD_MAX") && refused.contains("k1024"),
        "the node that ran again is refused the same: {refused}"
    );
    let published = engine.published("k").await.unwrap();
    assert_eq!(published.len(), KEYS_MAX, "nothing written for the refused key");
    assert!(!published.contains_key(&format!("k{KEYS_MAX}")));
    assert_eq!(published["k0"], json!("again"), "a known key at the bound");
    assert_eq!(published["k1"], json!("after"), "and after the refusal");
    let report = engine.replay("k", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b).await;
    assert_eq!(engine.published("k").await.unwrap(), published, "restored from the log");
    let report = engine.replay("k", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
}
