//! An imported bundle is a runnable thread: it replays against the workflow compiled in, and a
//! fork of it at a seq runs to completion.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::replay::ReplayOptions;
use cairn::storage::EventKind;
use cairn::{END, START, StartOptions, ThreadStatus};
use cairn_tools::debug::{Bundle, ExportOptions, ForkFrom, ForkOptions, Redaction};

use crate::common::{Tally, db, open};

/// START -> plan -> fetch (a tool call) -> write -> END.
fn three_steps() -> Workflow<Tally> {
    Workflow::<Tally>::builder("three", 1)
        .node("plan", |_s, _ctx| async move { Ok(NodeOutput::update((1, "plan".to_owned()))) })
        .node("fetch", |s: Arc<Tally>, ctx: Ctx| async move {
            let v: u64 =
                ctx.tool("lookup", s.total, |n: u64, _| async move { Ok(n * 10 + 7) }).await?;
            Ok(NodeOutput::update((v, "fetch".to_owned())))
        })
        .node("write", |s: Arc<Tally>, _ctx| async move {
            Ok(NodeOutput::update((s.total, "write".to_owned())))
        })
        .edge(START, "plan")
        .edge("plan", "fetch")
        .edge("fetch", "write")
        .edge("write", END)
        .build()
        .expect("three-step workflow")
}

#[tokio::test]
async fn an_imported_bundle_replays_and_forks_into_a_thread_that_runs_to_completion() {
    let wf = three_steps();
    let (_d, path) = db();
    let origin = open(&path, &[&wf], |b| b.seed(3)).await;
    let done = origin.start_json("three", Tally::default(), StartOptions::id("t")).await.unwrap();
    let original: Tally = done.output().await.unwrap();
    assert_eq!(original.log, ["plan", "fetch", "write"]);
    let options = ExportOptions { redaction: Redaction::none(), ..ExportOptions::default() };
    let bytes = cairn_tools::Operator::new(&origin)
        .export_bundle("t", &options)
        .await
        .unwrap()
        .to_bytes(true)
        .unwrap();
    origin.shutdown().await;

    // A fresh database with the workflow compiled in.
    let (_d2, path2) = db();
    let fresh = open(&path2, &[&wf], |b| b.seed(3)).await;
    let bundle = Bundle::from_bytes(&bytes).unwrap();
    cairn_tools::Operator::new(&fresh).import_bundle(&bundle).await.unwrap();

    let report = fresh.replay("t", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{:?}", report.divergence);
    assert_eq!(report.tasks_replayed, 3);

    // Fork after the step that ran `plan`: fetch and write run again in the fork.
    let plan_done = bundle
        .events
        .events
        .iter()
        .find(|e| e.kind == EventKind::StepCompleted)
        .map(|e| e.seq)
        .expect("a step_completed event");
    let fork = cairn_tools::Operator::new(&fresh)
        .fork("t", ForkFrom::Seq(plan_done), ForkOptions::id("t-fork"))
        .await
        .unwrap();
    let forked: Tally = fork.output().await.unwrap();
    assert_eq!(forked, original, "the fork reaches the original's output");
    assert_eq!(fork.status().await.unwrap(), ThreadStatus::Completed);
    let view = cairn_tools::Operator::new(&fresh).state_at("t-fork", None).await.unwrap();
    assert_eq!(view.meta.telemetry.tool_calls, 1, "the fork ran the tool itself");
    assert_eq!(fresh.replay("t-fork", &ReplayOptions::default()).await.unwrap().divergence, None);
    assert!(fresh.store().verify().unwrap().is_clean());
    fresh.shutdown().await;
}
