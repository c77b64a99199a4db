//! Checkpoints asked for at run time (`Engine::checkpoint_every`,
//! `Engine::cancel_periodic_checkpoint`, `Engine::checkpoint_at_node`): taken where asked with
//! the caller's metadata, durable across a restart, refused when they cannot hold, and neither
//! lost nor doubled by a crash at any write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, NodeResult, Workflow};
use cairn::event::Body;
use cairn::storage::{CheckpointFilter, CheckpointKind, CheckpointMeta, Page};
use cairn::{END, Engine, Error, START, StartOptions, ThreadId, ThreadStatus};
use cairn_core::checkpoint_requests::CheckpointRequest;
use tokio::sync::Semaphore;

use crate::common::{Tally, db, engine_on, open};
use crate::crash::every_write;

/// A node that adds 1 and notes its name.
fn note(
    name: &'static str,
) -> impl Fn(Arc<Tally>, Ctx) -> std::future::Ready<NodeResult<(u64, String)>> + Send + Sync {
    move |_s, _ctx| std::future::ready(Ok(NodeOutput::update((1, name.to_owned()))))
}

/// START -> ask (waits for a number) -> review -> done -> END.
fn asks_then_reviews() -> Workflow<Tally> {
    Workflow::<Tally>::builder("review", 1)
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "ask".to_owned())))
        })
        .node("review", note("review"))
        .node("done", note("done"))
        .edge(START, "ask")
        .edge("ask", "review")
        .edge("review", "done")
        .edge("done", END)
        .build()
        .unwrap()
}

fn meta(tag: &str) -> CheckpointMeta {
    CheckpointMeta {
        creator: "test".into(),
        description: format!("asked: {tag}"),
        tags: vec![tag.into()],
        custom: [("ticket".to_owned(), "T-7".to_owned())].into(),
    }
}

/// `thread`'s stored checkpoints of `kind`, oldest first.
async fn of_kind(engine: &Engine, thread: &str, kind: CheckpointKind) -> Vec<CheckpointMeta> {
    let filter = CheckpointFilter {
        thread: Some(ThreadId::new(thread).unwrap()),
        kind: Some(kind),
        ..Default::default()
    };
    let mut stored = engine.store().list_checkpoints(&filter, Page::default()).wait().unwrap();
    stored.reverse();
    stored.into_iter().map(|c| c.meta).collect()
}

/// The requests in `thread`'s log, oldest first.
async fn requests(engine: &Engine, thread: &str) -> Vec<CheckpointRequest> {
    let mut events = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if let Body::CheckpointRequested { request } = e.body {
            out.push(request);
        }
    }
    out
}

#[tokio::test]
async fn a_node_checkpoint_asked_of_a_parked_thread_survives_a_restart_and_is_taken_once() {
    let (_d, path) = db();
    let wf = asks_then_reviews();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("review", Tally::default(), StartOptions::id("n")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.checkpoint_at_node("n", "review", meta("before-done")).await.unwrap();
    // Refused: a node the workflow lacks, a zero interval, a thread that does not exist.
    let err = engine.checkpoint_at_node("n", "nope", meta("x")).await.unwrap_err();
    assert!(matches!(&err, Error::Invalid(m) if m.contains("nope")), "{err}");
    let err = engine.checkpoint_every("n", 0, meta("x")).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let err = engine.checkpoint_at_node("ghost", "review", meta("x")).await.unwrap_err();
    assert!(matches!(err, Error::UnknownThread(_)), "{err}");
    engine.shutdown().await;
    drop((t, engine));

    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.thread("n").await.unwrap();
    engine.send_input("n", 5).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    // Taken after `review`, with the metadata as given; `done` took none.
    assert_eq!(of_kind(&engine, "n", CheckpointKind::Node).await, [meta("before-done")]);
    let at = cairn_tools::Operator::new(&engine).state_at("n", None).await.unwrap();
    assert_eq!(at.state["log"], serde_json::json!(["ask", "review", "done"]));
    // A finished thread refuses every request.
    for err in [
        engine.checkpoint_at_node("n", "review", meta("x")).await.unwrap_err(),
        engine.checkpoint_every("n", 10, meta("x")).await.unwrap_err(),
        engine.cancel_periodic_checkpoint("n").await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WrongStatus { status: ThreadStatus::Completed, .. }), "{err}");
    }
    engine.shutdown().await;
}

#[tokio::test]
async fn a_node_checkpoint_asked_of_a_running_thread_is_recorded_at_its_next_step_boundary() {
    let (_d, path) = db();
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(Semaphore::new(0));
    let (g, s) = (gate.clone(), started.clone());
    let wf = Workflow::<Tally>::builder("gated", 1)
        .node("slow", move |_s, _ctx| {
            let (gate, started) = (g.clone(), s.clone());
            async move {
                started.add_permits(1);
                gate.acquire().await.expect("gate open").forget();
                Ok(NodeOutput::update((1, "slow".to_owned())))
            }
        })
        .node("review", note("review"))
        .node("after", note("after"))
        .edge(START, "slow")
        .edge("slow", "review")
        .edge("review", "after")
        .edge("after", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("gated", Tally::default(), StartOptions::id("r")).await.unwrap();
    started.acquire().await.unwrap().forget();
    let ask = engine.checkpoint_at_node("r", "review", meta("live"));
    tokio::pin!(ask);
    // Queued for the runner, and not recorded inside the step.
    assert!(futures::poll!(&mut ask).is_pending());
    gate.add_permits(1);
    ask.await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(of_kind(&engine, "r", CheckpointKind::Node).await, [meta("live")]);
    let asked = CheckpointRequest::AtNode { node: "review".into(), meta: meta("live") };
    assert_eq!(requests(&engine, "r").await, [asked]);
    engine.shutdown().await;
}

/// START -> ask (a number) -> back to ask until the total reaches 9 -> END.
fn asks_nine_times() -> Workflow<Tally> {
    Workflow::<Tally>::builder("asks", 1)
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, String::new())))
        })
        .edge(START, "ask")
        .route("ask", |s: &Tally| if s.total >= 9 { END } else { "ask" }, ["ask", END])
        .loop_bound("ask", 9)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_periodic_checkpoint_asked_at_run_time_carries_its_metadata_until_cancelled() {
    let (_d, path) = db();
    let wf = asks_nine_times();
    let clock = ManualClock::new(1_000_000);
    let c = clock.clone();
    let engine = open(&path, &[&wf], |b| b.clock(Arc::new(c.clone()))).await;
    let t = engine.start_json("asks", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.checkpoint_every("p", 1_000, meta("hourly")).await.unwrap();
    let answer = async |engine: &Engine| {
        clock.advance_ms(400);
        engine.send_input("p", 1).await.unwrap();
        engine.thread("p").await.unwrap().wait().await.unwrap().status
    };
    // Answers at 400, 800 and 1,200 ms: at 1,200, 1,000 have passed since the thread began.
    for _ in 0..3 {
        assert_eq!(answer(&engine).await, ThreadStatus::WaitingInput);
    }
    assert_eq!(of_kind(&engine, "p", CheckpointKind::Periodic).await, [meta("hourly")]);
    // Across a restart the request holds: at 2,400, 1,000 since the last one.
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b.clock(Arc::new(c))).await;
    for _ in 0..3 {
        assert_eq!(answer(&engine).await, ThreadStatus::WaitingInput);
    }
    assert_eq!(of_kind(&engine, "p", CheckpointKind::Periodic).await.len(), 2);
    // Cancelled: none at 3,800 (1,400 after the last one), nor at 4,200.
    engine.cancel_periodic_checkpoint("p").await.unwrap();
    clock.advance_ms(1_000);
    for _ in 0..2 {
        assert_eq!(answer(&engine).await, ThreadStatus::WaitingInput);
    }
    assert_eq!(answer(&engine).await, ThreadStatus::Completed);
    assert_eq!(of_kind(&engine, "p", CheckpointKind::Periodic).await.len(), 2);
    engine.shutdown().await;
}

/// What a crash run's calls were acknowledged.
#[derive(Default)]
struct Acked {
    at_node: AtomicBool,
    every: AtomicBool,
}

/// The store dies at each write in turn while a parked thread is asked for a node checkpoint
/// and a periodic one and then answered; the reopened engine finds every acknowledged request
/// in the log, asks again what was not acknowledged (as a caller would), and the thread takes
/// the node's checkpoint exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_checkpoint_request_neither_loses_nor_doubles_it() {
    let wf = asks_then_reviews();
    let every = CheckpointRequest::Every { interval_ms: 1 << 40, meta: meta("p") };
    let run = async |engine: &Engine, acked: &Acked| {
        let t = engine.start_json("review", Tally::default(), StartOptions::id("c")).await?;
        t.wait().await?;
        engine.checkpoint_at_node("c", "review", meta("n")).await?;
        acked.at_node.store(true, Ordering::SeqCst);
        engine.checkpoint_every("c", 1 << 40, meta("p")).await?;
        acked.every.store(true, Ordering::SeqCst);
        engine.send_input("c", 1).await?;
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, acked: &Acked, crash_after: i64| {
        let t = match engine.thread("c").await {
            Ok(t) => t,
            Err(_) => {
                engine.start_json("review", Tally::default(), StartOptions::id("c")).await.unwrap()
            }
        };
        let status = t.wait().await.unwrap().status;
        let asked = requests(engine, "c").await;
        let node = CheckpointRequest::AtNode { node: "review".into(), meta: meta("n") };
        if acked.at_node.load(Ordering::SeqCst) {
            assert!(asked.contains(&node), "crash_after {crash_after}: lost {asked:?}");
        }
        if acked.every.load(Ordering::SeqCst) {
            assert!(asked.contains(&every), "crash_after {crash_after}: lost {asked:?}");
        }
        if status == ThreadStatus::WaitingInput {
            if !asked.contains(&node) {
                engine.checkpoint_at_node("c", "review", meta("n")).await.unwrap();
            }
            engine.send_input("c", 1).await.unwrap();
        }
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
        let taken = of_kind(engine, "c", CheckpointKind::Node).await;
        assert_eq!(taken, [meta("n")], "crash_after {crash_after}");
        assert!(engine.store().verify().unwrap().is_clean());
    };
    let crashes = every_write(100, Acked::default, |b, _| b.workflow(&wf), run, check).await;
    assert!(crashes >= 5, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY checkpoint_request_crash crash_points={crashes} lost=0 doubled=0"
    ));
}
