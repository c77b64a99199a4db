//! Recovery chosen by the kind of failure (`NodePolicy::on_failure_of`, `FailureKind`): a
//! timeout, a deadlock and any other failure of one node take their own recoveries, the kind
//! is recorded in `recovery_applied`, and a replay and a restore agree with the live run.

use cairn::dsl::{Ctx, FailureKind, NodeError, NodeOutput, NodePolicy, Recovery, Workflow};
use cairn::event::Body;
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, engine_on};

/// START -> work -> END, `fallback` its goto. `work` fails by its input's total: 0 hangs past
/// its 100 ms timeout, 1 fails with the code "deadlock", any other fails plainly. Timeouts fall
/// back, deadlocks are abandoned, the rest fails the thread.
fn kinds() -> Workflow<Tally> {
    let policy = NodePolicy::default()
        .timeout_ms(100)
        .on_failure_of(FailureKind::Timeout, Recovery::Fallback("fallback".into()))
        .on_failure_of(FailureKind::Deadlock, Recovery::Abandon);
    Workflow::<Tally>::builder("kinds", 1)
        .node_with(
            "work",
            |s: std::sync::Arc<Tally>, _ctx: Ctx| async move {
                match s.total {
                    0 => {
                        futures::future::pending::<()>().await;
                        unreachable!("the timeout drops the attempt")
                    }
                    1 => Err(NodeError::fatal("lock order").with_code("deadlock")),
                    _ => Err(NodeError::fatal("bad input")),
                }
            },
            policy,
        )
        .node(
            "fallback",
            |_s, _ctx| async move { Ok(NodeOutput::update((100, "fallback".to_owned()))) },
        )
        .edge(START, "work")
        .edge("work", END)
        .gotos("work", ["fallback"])
        .edge("fallback", END)
        .build()
        .unwrap()
}

/// The kind and strategy of each `recovery_applied` of the thread.
async fn applied(engine: &Engine, thread: &str) -> Vec<(Option<FailureKind>, String)> {
    let mut events = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if let Body::RecoveryApplied { kind, strategy, .. } = e.body {
            out.push((kind, strategy.name().to_owned()));
        }
    }
    out
}

fn input(total: u64) -> Tally {
    Tally { total, log: Vec::new() }
}

#[tokio::test]
async fn a_timeout_falls_back_while_another_error_fails_the_thread() {
    let (_d, path) = db();
    let wf = kinds();
    let engine = engine_on(&path, &[&wf], None).await;
    let slow = engine.start_json("kinds", input(0), StartOptions::id("slow")).await.unwrap();
    let bad = engine.start_json("kinds", input(7), StartOptions::id("bad")).await.unwrap();
    let out: Tally = slow.output().await.unwrap();
    assert_eq!(out.log, ["fallback"]);
    assert_eq!(bad.finished().await.unwrap().status, ThreadStatus::Failed);
    assert_eq!(applied(&engine, "slow").await, [(Some(FailureKind::Timeout), "fallback".into())]);
    assert!(applied(&engine, "bad").await.is_empty(), "fail writes no recovery_applied");
    // A restore of the log folds to what the live run left.
    let view = cairn_tools::Operator::new(&engine).state_at("slow", None).await.unwrap();
    assert_eq!(view.state, serde_json::to_value(&out).unwrap());
    assert_eq!(view.status, ThreadStatus::Completed);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_deadlock_code_takes_its_own_recovery_and_replays_the_same() {
    let (_d, path) = db();
    let wf = kinds();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("kinds", input(1), StartOptions::id("dl")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Cancelled, "abandoned");
    assert_eq!(applied(&engine, "dl").await, [(Some(FailureKind::Deadlock), "abandon".into())]);
    let report = engine.replay("dl", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{:?}", report.divergence);
    let view = cairn_tools::Operator::new(&engine).state_at("dl", None).await.unwrap();
    assert_eq!(view.status, ThreadStatus::Cancelled);
    engine.shutdown().await;
}

/// A node whose timeout cuts its wait for a lock another thread holds fails as a deadlock
/// (`NodeError::Lock`, "wait timed out"), not a timeout, and takes the deadlock's recovery.
#[tokio::test]
async fn a_lock_wait_cut_by_the_timeout_is_a_deadlock() {
    let (_d, path) = db();
    let holder = Workflow::<Tally>::builder("holder", 1)
        .node("hold", |_s, ctx: Ctx| async move {
            ctx.lock("res", 60_000).await?;
            let _: u64 = ctx.recv("never").await?;
            Ok(NodeOutput::update((1, "held".to_owned())))
        })
        .edge(START, "hold")
        .edge("hold", END)
        .build()
        .unwrap();
    let policy = NodePolicy::default()
        .timeout_ms(100)
        .on_failure_of(FailureKind::Timeout, Recovery::Fallback("fallback".into()))
        .on_failure_of(FailureKind::Deadlock, Recovery::Abandon);
    let waiter = Workflow::<Tally>::builder("waiter", 1)
        .node_with(
            "take",
            |_s, ctx: Ctx| async move {
                ctx.lock("res", 1_000).await?;
                Ok(NodeOutput::update((1, "took".to_owned())))
            },
            policy,
        )
        .node(
            "fallback",
            |_s, _ctx| async move { Ok(NodeOutput::update((100, "fallback".to_owned()))) },
        )
        .edge(START, "take")
        .edge("take", END)
        .gotos("take", ["fallback"])
        .edge("fallback", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&holder, &waiter], None).await;
    let h = engine.start_json("holder", Tally::default(), StartOptions::id("h")).await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::WaitingInput, "holds the lock");
    let w = engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await.unwrap();
    assert_eq!(w.finished().await.unwrap().status, ThreadStatus::Cancelled, "abandoned");
    assert_eq!(applied(&engine, "w").await, [(Some(FailureKind::Deadlock), "abandon".into())]);
    engine.cancel("h", "test over").await.unwrap();
    engine.shutdown().await;
}
