//! The stuck action `StuckAction::Retry` (issue 43 seed row 004): a health pass that finds a
//! thread stuck in a node attempt ends that attempt as its timeout would, and the node's retry
//! policy runs the next one (recorded, so a replay agrees); with no attempt left the node fails
//! with the timeout. Control: `StuckAction::Report` leaves the attempt running.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cairn::dsl::{Ctx, NodeError, NodeOutput, NodePolicy, RetryPolicy, Workflow};
use cairn::event::Body;
use cairn::{END, Engine, HealthPolicy, START, StartOptions, StuckAction, ThreadStatus};

use crate::common::{Tally, db};

/// `work`: its first attempt hangs for good; a later one returns. `attempts` counts the
/// attempts begun.
fn first_attempt_hangs(attempts: Arc<AtomicU32>, max_attempts: u32) -> Workflow<Tally> {
    let retry = RetryPolicy {
        max_attempts,
        initial_backoff_ms: 10,
        max_backoff_ms: 10,
        ..RetryPolicy::default()
    };
    Workflow::<Tally>::builder("hangs", 1)
        .node_with(
            "work",
            move |_s: Arc<Tally>, ctx: Ctx| {
                let attempts = attempts.clone();
                async move {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    if ctx.attempt() == 1 {
                        std::future::pending::<()>().await;
                    }
                    Ok(NodeOutput::update((1, format!("attempt {}", ctx.attempt()))))
                }
            },
            NodePolicy::default().retry(retry),
        )
        .edge(START, "work")
        .edge("work", END)
        .build()
        .unwrap()
}

async fn engine(path: &std::path::Path, wf: &Workflow<Tally>, stuck: StuckAction) -> Engine {
    Engine::builder(path)
        .workflow(wf)
        .watchdog_ms(200)
        .cancel_grace_ms(100)
        .health_every_ms(None)
        .health_policy(HealthPolicy { stuck, ..HealthPolicy::default() })
        .open()
        .await
        .unwrap()
}

/// Starts thread `id`, waits until its first attempt runs and the watchdog's time has passed,
/// then runs a health pass and its policy; what the policy did.
async fn stuck_then_act(engine: &Engine, id: &str, attempts: &AtomicU32) -> Vec<String> {
    engine.start_json("hangs", Tally::default(), StartOptions::id(id)).await.unwrap();
    while attempts.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let report = engine.health().await.unwrap();
    assert_eq!(report.stuck_threads, 1, "{report:?}");
    engine.act_on_health(&report).await
}

fn bodies(engine: &Engine, id: &str) -> Vec<Body> {
    let store = engine.store();
    let thread = cairn::ThreadId::new(id).unwrap();
    let events = store.read_since(&thread, cairn::storage::Seq(0), 10_000).wait().unwrap();
    events.into_iter().map(|e| cairn::blocking::decode(store.as_ref(), e).unwrap().body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_stuck_action_runs_the_next_attempt_and_report_leaves_the_attempt_running() {
    // Control: Report finds the thread and leaves its attempt running.
    let (_d, path) = db();
    let attempts = Arc::new(AtomicU32::new(0));
    let wf = first_attempt_hangs(attempts.clone(), 3);
    let reporting = engine(&path, &wf, StuckAction::Report).await;
    let done = stuck_then_act(&reporting, "t1", &attempts).await;
    assert!(done.is_empty(), "{done:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "still in its first attempt");
    let status = reporting.thread("t1").await.unwrap().status().await.unwrap();
    assert_eq!(status, ThreadStatus::Running);
    reporting.cancel("t1", "end of the control").await.unwrap();
    reporting.shutdown().await;

    // Retry: the first attempt ends as a timeout, attempt 2 runs and the thread completes.
    let (_d2, path) = db();
    let attempts = Arc::new(AtomicU32::new(0));
    let wf = first_attempt_hangs(attempts.clone(), 3);
    let retrying = engine(&path, &wf, StuckAction::Retry).await;
    let done = stuck_then_act(&retrying, "t2", &attempts).await;
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(
        done[0].starts_with(
            "thread t2 told to retry the node attempts it runs (watchdog: no step for"
        ),
        "{done:?}"
    );
    let outcome = retrying.thread("t2").await.unwrap().finished().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Completed);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    let out: Tally = retrying.thread("t2").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, ["attempt 2"]);
    let log = bodies(&retrying, "t2");
    assert!(
        log.iter().any(|b| matches!(
            b,
            Body::NodeFailed { attempt: 1, error: NodeError::Timeout { .. }, terminal: false, .. }
        )),
        "{log:?}"
    );
    assert!(log.iter().any(|b| matches!(b, Body::RetryScheduled { attempt: 2, .. })), "{log:?}");
    let replay = retrying.replay("t2", &cairn::replay::ReplayOptions::default()).await.unwrap();
    assert!(replay.is_deterministic(), "{replay:?}");
    retrying.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_stuck_action_with_no_attempt_left_fails_the_node_with_the_timeout() {
    let (_d, path) = db();
    let attempts = Arc::new(AtomicU32::new(0));
    let wf = first_attempt_hangs(attempts.clone(), 1);
    let engine = engine(&path, &wf, StuckAction::Retry).await;
    stuck_then_act(&engine, "t3", &attempts).await;
    let outcome = engine.thread("t3").await.unwrap().finished().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Failed);
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "no second attempt");
    let log = bodies(&engine, "t3");
    assert!(
        log.iter().any(|b| matches!(
            b,
            Body::NodeFailed { attempt: 1, error: NodeError::Timeout { .. }, terminal: true, .. }
        )),
        "{log:?}"
    );
    engine.shutdown().await;
}
