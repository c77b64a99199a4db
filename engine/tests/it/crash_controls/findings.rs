//! Engine defects the controls proptest found (2026-11-22), each as a small deterministic test
//! of the behaviour the engine has since they were fixed: regression tests.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn::clock::ManualClock;
use cairn::dsl::{Budgets, Ctx, NodeOutput, Workflow};
use cairn::storage::ThreadId;
use cairn::storage::limits::READ_LIMIT_MAX;
use cairn::{Durability, END, Engine, NodeError, START, Seq, StartOptions, ThreadStatus};

use super::driver::bump;
use super::{Acc, CLOCK_START_MS};

/// One node around one tool whose body is `tool_body`, on an engine with a manual clock.
async fn one_tool_engine(
    path: &Path,
    clock: &ManualClock,
    calls: u64,
    tool_body: Arc<dyn Fn() + Send + Sync>,
) -> Engine {
    let wf = Workflow::<Acc>::builder("tools", 1)
        .node("n", move |_s: Arc<Acc>, ctx: Ctx| {
            let tool_body = tool_body.clone();
            async move {
                let mut out = Vec::new();
                for i in 0..calls {
                    let body = tool_body.clone();
                    let v: u64 = ctx
                        .tool("work", i, move |x: u64, _| {
                            body();
                            async move { Ok::<_, cairn::ToolError>(x) }
                        })
                        .await?;
                    out.push(v);
                }
                Ok(NodeOutput::update(out))
            }
        })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap();
    Engine::builder(path)
        .durability(Durability::None)
        .clock(Arc::new(clock.clone()))
        .workflow(&wf)
        .open()
        .await
        .unwrap()
}

/// Found by the proptest (with hour-long sleeps, one thread's timer moved the shared clock
/// past another's lease): a tool call that outlasts the runner's lease (`LEASE_TTL_MS`, renewed
/// only at step boundaries) cannot record its result. The `ToolReturned` append carries
/// `Guard::Lease` at the call's end time, storage rejects it, the runner stops with an error,
/// and the thread stays Running with no runner until the next open, which runs the tool again.
#[tokio::test]
async fn a_tool_call_longer_than_the_lease_still_completes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lease.db");
    let clock = ManualClock::new(CLOCK_START_MS);
    let during = clock.clone();
    let body: Arc<dyn Fn() + Send + Sync> = Arc::new(move || during.advance_ms(61_000));
    let engine = one_tool_engine(&path, &clock, 1, body).await;
    let h = engine.start_json("tools", Acc::default(), StartOptions::id("long")).await.unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), h.output::<Acc>()).await;
    let log = {
        let id = ThreadId::new("long").unwrap();
        let events = engine.store().read_since(&id, Seq(0), READ_LIMIT_MAX).wait().unwrap();
        let store = engine.store().as_ref();
        events
            .into_iter()
            .map(|e| format!("{:?}", cairn::blocking::decode(store, e).unwrap().body))
            .collect::<Vec<_>>()
    };
    assert!(matches!(&out, Ok(Ok(acc)) if acc.items == vec![0]), "{out:?}; log {log:#?}");
    engine.shutdown().await;
}

/// DESIGN.md promises "a clean stop" at a budget's limit. A tool-call budget reached inside a
/// node instead fails the node with the permanent `BudgetExceeded` and the thread ends Failed,
/// so raising the budget cannot resume it (a step or tool-call limit met at a step boundary
/// does stop cleanly: Paused, as the proptest checks).
#[tokio::test]
async fn a_tool_call_budget_reached_inside_a_node_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.db");
    let clock = ManualClock::new(CLOCK_START_MS);
    let runs = Arc::new(AtomicU64::new(0));
    let counted = runs.clone();
    let body: Arc<dyn Fn() + Send + Sync> = Arc::new(move || bump(&counted));
    let engine = one_tool_engine(&path, &clock, 3, body).await;
    let budgets = Budgets { max_tool_calls: Some(2), ..Budgets::default() };
    let opts = StartOptions { budgets: Some(budgets), ..StartOptions::id("b") };
    let h = engine.start_json("tools", Acc::default(), opts).await.unwrap();
    let outcome = h.wait().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Paused, "{outcome:?}");
    engine.set_budgets("b", Budgets::default()).await.unwrap();
    engine.resume("b").await.unwrap();
    assert_eq!(h.output::<Acc>().await.unwrap().items, vec![0, 1, 2]);
    assert_eq!(runs.load(Ordering::SeqCst), 3, "no tool call ran twice");
    engine.shutdown().await;
}

/// Found by the proptest (`cancel_early`): `cancel` of a running thread waits on the
/// thread's status watch until it leaves Running, but a watch made while the thread was Created
/// (any handle's `wait` before its runner started) still holds Created: a runner records Running
/// without notifying watchers. So `cancel` returns at once, before the Cancelled status is
/// written, and a crash in between loses a cancel the caller saw acknowledged (`pause` waits the
/// same way).
#[tokio::test]
async fn cancel_of_a_running_thread_returns_once_it_is_cancelled() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("early.db");
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let (hung_tx, hung_rx) = tokio::sync::oneshot::channel::<()>();
    let hung_tx = Arc::new(Mutex::new(Some(hung_tx)));
    let wf = Workflow::<Acc>::builder("two", 1)
        .node("n", move |_s: Arc<Acc>, ctx: Ctx| {
            let (mut gate, hung_tx) = (gate_rx.clone(), hung_tx.clone());
            async move {
                if ctx.thread_id() == "first" {
                    // Holds the only runner permit until the test opens the gate.
                    let _ = gate.wait_for(|open| *open).await;
                    return Ok(NodeOutput::update(vec![1]));
                }
                if let Some(tx) = hung_tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                ctx.cancelled().await;
                Err(NodeError::Cancelled)
            }
        })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap();
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .concurrency(1)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let first = engine.start_json("two", Acc::default(), StartOptions::id("first")).await.unwrap();
    let second =
        engine.start_json("two", Acc::default(), StartOptions::id("second")).await.unwrap();
    assert_eq!(
        second.status().await.unwrap(),
        ThreadStatus::Created,
        "waits for the runner permit"
    );
    // A status watch made now holds Created.
    assert!(second.wait().now_or_never().is_none());
    gate.send_replace(true);
    first.finished().await.unwrap();
    hung_rx.await.unwrap();
    engine.cancel("second", "stop").await.unwrap();
    assert_eq!(
        second.status().await.unwrap(),
        ThreadStatus::Cancelled,
        "cancel returned before it"
    );
    engine.shutdown().await;
}
