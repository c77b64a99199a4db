//! Recovery strategies (`NodePolicy::on_failure`): each one, what the log records of it
//! (`recovery_applied` after the node's failure), and that a replay of the thread agrees.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn::dsl::{Ctx, NodeError, NodeOutput, NodePolicy, Recovery, RetryPolicy, Workflow};
use cairn::event::Body;
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, engine_on};

/// START -> a -> work -> END, where `work` fails its first `failures` runs (counted in
/// `runs`), has two attempts per run, and recovers with `recovery`; `fallback` is its goto.
fn flaky(recovery: Recovery, failures: u32, runs: Arc<AtomicU32>) -> Workflow<Tally> {
    let policy = NodePolicy::default().retry(RetryPolicy::fixed(2, 1)).on_failure(recovery);
    Workflow::<Tally>::builder("flaky", 1)
        .node_with(
            "a",
            |_s, _ctx| async move { Ok(NodeOutput::update((1, "a".to_owned()))) },
            NodePolicy::default().checkpoint_after(true),
        )
        .node_with(
            "work",
            move |_s, _ctx: Ctx| {
                let run = runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    if run < failures {
                        return Err(NodeError::retryable(format!("run {run} failed")));
                    }
                    Ok(NodeOutput::update((10, "work".to_owned())))
                }
            },
            policy,
        )
        .node(
            "fallback",
            |_s, _ctx| async move { Ok(NodeOutput::update((100, "fallback".to_owned()))) },
        )
        .edge(START, "a")
        .edge("a", "work")
        .edge("work", END)
        .gotos("work", ["fallback"])
        .edge("fallback", END)
        .build()
        .unwrap()
}

/// The kinds of the thread's events that tell its failure and recovery, in order.
async fn story(engine: &Engine, thread: &str) -> Vec<String> {
    let mut events = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        out.push(match e.body {
            Body::NodeFailed { task, attempt, terminal, .. } => {
                format!("{task} failed #{attempt}{}", if terminal { " for good" } else { "" })
            }
            Body::RetryScheduled { task, attempt, .. } => format!("{task} retry #{attempt}"),
            Body::RecoveryApplied { strategy, .. } => format!("recovery {}", strategy.name()),
            Body::InputRequested { task, .. } => format!("{task} asks"),
            Body::RolledBack { to_seq, .. } => format!("rolled back to seq {to_seq}"),
            Body::NodeCompleted { task, .. } => format!("{task} done"),
            Body::StatusChanged { to, .. } => format!("-> {to}"),
            _ => continue,
        });
    }
    out
}

async fn deterministic(engine: &Engine, thread: &str) {
    let report = engine.replay(thread, &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{:?}", report.divergence);
}

#[tokio::test]
async fn fallback_routes_the_step_to_the_fallback_node() {
    let (_d, path) = db();
    let wf = flaky(Recovery::Fallback("fallback".into()), u32::MAX, Arc::default());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("flaky", Tally::default(), StartOptions::id("f")).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, ["a", "fallback"]);
    assert_eq!(
        story(&engine, "f").await,
        [
            "-> running",
            "a done",
            "work failed #1",
            "work retry #2",
            "work failed #2",
            "recovery fallback",
            "fallback done",
            "-> completed"
        ]
    );
    deterministic(&engine, "f").await;
    engine.shutdown().await;
}

#[tokio::test]
async fn abandon_ends_the_thread_cancelled_not_failed() {
    let (_d, path) = db();
    let wf = flaky(Recovery::Abandon, u32::MAX, Arc::default());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("flaky", Tally::default(), StartOptions::id("x")).await.unwrap();
    let outcome = t.finished().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Cancelled);
    let s = story(&engine, "x").await;
    assert_eq!(s[s.len() - 3..], ["work failed #2 for good", "recovery abandon", "-> cancelled"]);
    engine.shutdown().await;
}

#[tokio::test]
async fn escalate_waits_for_a_person_and_an_answer_runs_the_node_again() {
    let (_d, path) = db();
    let runs = Arc::new(AtomicU32::new(0));
    let wf = flaky(Recovery::Escalate, 2, runs.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("flaky", Tally::default(), StartOptions::id("e")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let waiting =
        cairn_tools::Operator::new(&engine).state_at("e", None).await.unwrap().meta.waiting;
    let prompt = serde_json::to_value(waiting).unwrap();
    assert_eq!(prompt["prompt"]["escalated"], "work");
    assert_eq!(prompt["prompt"]["error"], "node failed: run 1 failed");
    engine.send_input("e", "try again").await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, ["a", "work"]);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "two failed attempts, then the one after the answer"
    );
    assert_eq!(
        story(&engine, "e").await[2..],
        [
            "work failed #1",
            "work retry #2",
            "work failed #2",
            "recovery escalate",
            "work retry #3",
            "work asks",
            "-> waiting_input",
            "-> running",
            "work done",
            "-> completed"
        ]
    );
    deterministic(&engine, "e").await;
    engine.shutdown().await;
}

#[tokio::test]
async fn restore_and_retry_rolls_back_to_the_latest_checkpoint_and_runs_on() {
    let (_d, path) = db();
    let runs = Arc::new(AtomicU32::new(0));
    let wf = flaky(Recovery::RestoreAndRetry, 2, runs.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("flaky", Tally::default(), StartOptions::id("r")).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    // `a` ran once: the thread went back to the checkpoint after it, not to its start.
    assert_eq!(out.log, ["a", "work"]);
    let s = story(&engine, "r").await;
    let at = s.iter().position(|e| e == "recovery restore_and_retry").unwrap();
    assert!(s[at + 1].starts_with("rolled back to seq "), "{s:?}");
    assert_eq!(s[at + 2..], ["work done", "-> completed"]);
    assert_eq!(
        cairn_tools::Operator::new(&engine).state_at("r", None).await.unwrap().meta.restores,
        1
    );
    deterministic(&engine, "r").await;

    // A failure that comes back from every restore fails the thread after the bound.
    let wf = flaky(Recovery::RestoreAndRetry, u32::MAX, Arc::default());
    engine.shutdown().await;
    drop((t, engine));
    let (_d2, path2) = db();
    let engine = engine_on(&path2, &[&wf], None).await;
    let t = engine.start_json("flaky", Tally::default(), StartOptions::id("r2")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Failed);
    let s = story(&engine, "r2").await;
    let restores = s.iter().filter(|e| e.as_str() == "recovery restore_and_retry").count();
    assert_eq!(restores as u32, cairn_core::limits::RESTORES_PER_THREAD_MAX);
    assert_eq!(s[s.len() - 2..], ["work failed #2 for good", "-> failed"]);
    engine.shutdown().await;
}
