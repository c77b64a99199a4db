//! Checkpoints the engine writes and those asked of it: what they say about themselves (kind,
//! node, tags, the id in their `checkpoint_created` event), and manual checkpoints of a thread
//! a runner is driving.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, NodePolicy, NodeResult, Workflow};
use cairn::event::Body;
use cairn::storage::{CheckpointFilter, CheckpointKind, CheckpointMeta, Page};
use cairn::{END, Engine, START, StartOptions, ThreadId, ThreadStatus};
use tokio::sync::Semaphore;

use crate::common::{Tally, db, engine_on, open};

/// A node that adds 1 and notes its name.
fn note(
    name: &'static str,
) -> impl Fn(Arc<Tally>, Ctx) -> std::future::Ready<NodeResult<(u64, String)>> + Send + Sync {
    move |_s, _ctx| std::future::ready(Ok(NodeOutput::update((1, name.to_owned()))))
}

/// Every `checkpoint_created` event of `thread`, with its kind and the id it carries.
async fn announced(engine: &Engine, thread: &str) -> Vec<(CheckpointKind, Option<u64>)> {
    let mut events = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if let Body::CheckpointCreated { kind, checkpoint, .. } = e.body {
            out.push((kind, checkpoint.map(|c| c.0)));
        }
    }
    out
}

#[tokio::test]
async fn a_node_checkpoint_names_its_node_and_tags_and_its_event_carries_its_id() {
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("tagged", 1)
        .node("a", note("a"))
        .node_with(
            "review",
            note("review"),
            NodePolicy::default().checkpoint_after(true).tag("milestone").tag("human"),
        )
        .node("c", note("c"))
        .edge(START, "a")
        .edge("a", "review")
        .edge("review", "c")
        .edge("c", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("tagged", Tally::default(), StartOptions::id("t")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);

    let filter = CheckpointFilter {
        thread: Some(ThreadId::new("t").unwrap()),
        kind: Some(CheckpointKind::Node),
        ..Default::default()
    };
    let nodes = engine.store().list_checkpoints(&filter, Page::default()).wait().unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let cp = &nodes[0];
    assert_eq!(cp.meta.custom.get("node").map(String::as_str), Some("review"));
    assert_eq!(cp.meta.custom.get("step").map(String::as_str), Some("2"));
    assert_eq!(cp.meta.tags, ["milestone", "human"]);
    assert_eq!(cp.meta.creator, "engine");
    // Listing by tag finds it.
    let by_tag = CheckpointFilter { any_tags: vec!["human".into()], ..Default::default() };
    let found = engine.store().list_checkpoints(&by_tag, Page::default()).wait().unwrap();
    assert_eq!(found.iter().map(|c| c.id).collect::<Vec<_>>(), [cp.id]);

    // Each checkpoint's event carries its id: the node one, then the completion one.
    let all = CheckpointFilter { thread: filter.thread.clone(), ..Default::default() };
    let mut stored = engine.store().list_checkpoints(&all, Page::default()).wait().unwrap();
    stored.reverse();
    let expected: Vec<_> = stored.iter().map(|c| (c.kind, Some(c.id.0))).collect();
    assert_eq!(announced(&engine, "t").await, expected);
    assert_eq!(expected.first().map(|e| e.0), Some(CheckpointKind::Node));

    // A deleted checkpoint is no longer announced by id.
    engine.store().delete_checkpoint(cp.id).unwrap().wait().await.unwrap();
    assert_eq!(announced(&engine, "t").await[0], (CheckpointKind::Node, None));
    engine.shutdown().await;
}

#[tokio::test]
async fn a_manual_checkpoint_of_a_running_thread_is_taken_at_its_next_step_boundary() {
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
        .node("after", note("after"))
        .edge(START, "slow")
        .edge("slow", "after")
        .edge("after", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("gated", Tally::default(), StartOptions::id("r")).await.unwrap();
    // The node runs: a runner drives the thread (its stored status may still read Created,
    // the runner's first batch being on its way to disk).
    started.acquire().await.unwrap().forget();

    let meta = CheckpointMeta {
        creator: "test".into(),
        description: "while it runs".into(),
        tags: vec!["live".into()],
        ..Default::default()
    };
    let ask = engine.checkpoint_now("r", meta);
    tokio::pin!(ask);
    // Asked (the first poll queues it for the runner), and not answered inside the step.
    assert!(futures::poll!(&mut ask).is_pending());
    gate.add_permits(1);
    let id = ask.await.unwrap();
    let out = t.finished().await.unwrap();
    assert_eq!(out.status, ThreadStatus::Completed);

    let cp = engine.store().checkpoint(id).wait().unwrap().unwrap();
    assert_eq!(
        (cp.kind, cp.meta.tags.as_slice()),
        (CheckpointKind::Manual, &["live".to_owned()][..])
    );
    assert_eq!(cp.meta.description, "while it runs");
    // Taken between the steps: `slow` is in it, `after` is not.
    let at =
        cairn_tools::Operator::new(&engine).state_at("r", Some(cp.covers.seq.0)).await.unwrap();
    assert_eq!(at.state["log"], serde_json::json!(["slow"]));
    assert_eq!(at.step, 1);
    assert!(announced(&engine, "r").await.contains(&(CheckpointKind::Manual, Some(id.0))));
    engine.shutdown().await;
}

#[tokio::test]
async fn a_rollback_restores_the_thread_in_place_records_it_and_resumes_from_there() {
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("undo", 1)
        .node_with("a", note("a"), NodePolicy::default().checkpoint_after(true))
        .node("b", note("b"))
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "ask".to_owned())))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("undo", Tally::default(), StartOptions::id("u")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let filter = CheckpointFilter {
        thread: Some(ThreadId::new("u").unwrap()),
        kind: Some(CheckpointKind::Node),
        ..Default::default()
    };
    let after_a = engine.store().list_checkpoints(&filter, Page::default()).wait().unwrap()[0].id;
    let before = cairn_tools::Operator::new(&engine).state_at("u", None).await.unwrap();
    assert_eq!(before.state["log"], serde_json::json!(["a", "b"]));

    let written =
        cairn_tools::Operator::new(&engine).rollback("u", after_a, "b went wrong").await.unwrap();
    let now = cairn_tools::Operator::new(&engine).state_at("u", None).await.unwrap();
    assert_eq!(now.status, ThreadStatus::Paused);
    assert_eq!(now.state["log"], serde_json::json!(["a"]));
    assert_eq!((now.step, now.seq), (1, before.seq + 3), "rolled_back, status_changed, checkpoint");
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Paused);
    // Recorded, and nothing erased: the state before is still there to travel to.
    let mut events = t.events(before.seq).unwrap();
    let Some(e) = events.try_next().await.unwrap() else { panic!("no rollback event") };
    let Body::RolledBack { checkpoint, ref reason, .. } = e.body else { panic!("{:?}", e.body) };
    assert_eq!((checkpoint, reason.as_str()), (after_a, "b went wrong"));
    assert_eq!(
        cairn_tools::Operator::new(&engine).state_at("u", Some(before.seq)).await.unwrap().state,
        before.state
    );
    let cp = engine.store().checkpoint(written).wait().unwrap().unwrap();
    assert_eq!(cp.meta.tags, [cairn_tools::debug::ROLLBACK_TAG]);
    // The fold through the event alone gives the same context as the rollback's checkpoint.
    engine.store().delete_checkpoint(written).unwrap().wait().await.unwrap();
    let folded = cairn_tools::Operator::new(&engine).state_at("u", None).await.unwrap();
    assert_eq!((folded.state, folded.status, folded.step), (now.state, now.status, now.step));

    // Resumed, it goes on from the checkpoint: `b` runs again, then the question.
    engine.resume("u").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.send_input("u", 40).await.unwrap();
    let out: Tally = serde_json::from_value(t.finished().await.unwrap().output.unwrap()).unwrap();
    assert_eq!(out.log, ["a", "b", "ask"]);
    assert_eq!(out.total, 42);
    // An ended thread refuses.
    let err =
        cairn_tools::Operator::new(&engine).rollback("u", after_a, "again").await.unwrap_err();
    assert!(matches!(err, cairn::Error::WrongStatus { .. }), "{err}");
    engine.shutdown().await;
}

/// The kinds of `thread`'s stored checkpoints, oldest first.
async fn kinds(engine: &Engine, thread: &str) -> Vec<CheckpointKind> {
    let filter =
        CheckpointFilter { thread: Some(ThreadId::new(thread).unwrap()), ..Default::default() };
    let mut stored = engine.store().list_checkpoints(&filter, Page::default()).wait().unwrap();
    stored.reverse();
    stored.into_iter().map(|c| c.kind).collect()
}

#[tokio::test]
async fn a_periodic_checkpoint_counts_from_the_latest_one_across_parks_and_wakes() {
    let (_d, path) = db();
    // Asks for a number seven times: each answer wakes a new runner, which completes `ask` and
    // goes on to the next question (a step that continues: where periodic checkpoints are due).
    let wf = Workflow::<Tally>::builder("asks", 1)
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, String::new())))
        })
        .edge(START, "ask")
        .route("ask", |s: &Tally| if s.total >= 7 { END } else { "ask" }, ["ask", END])
        .loop_bound("ask", 7)
        .build()
        .unwrap();
    let clock = ManualClock::new(1_000_000);
    let c = clock.clone();
    let engine = open(&path, &[&wf], |b| {
        b.clock(Arc::new(c)).checkpoint_every(None, Some(1_000)).completion_checkpoint_after(0)
    })
    .await;
    let t = engine.start_json("asks", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    // An answer every 400 ms: each runner lives a moment, far less than the interval.
    for _ in 0..6 {
        clock.advance_ms(400);
        engine.send_input("p", 1).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    clock.advance_ms(400);
    engine.send_input("p", 1).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    // At 1,200 ms (1,000 passed since the thread began, none taken) and at 2,400 (1,000 since
    // that one; the answer at 2,800 ends the thread): counted from the latest checkpoint, not from each runner's start, nor from
    // the thread's creation (that would take one at 1,200, 1,600 and 2,000 too).
    use CheckpointKind::{Completion, Periodic};
    assert_eq!(kinds(&engine, "p").await, [Periodic, Periodic, Completion]);
    engine.shutdown().await;
}

/// A thread's end writes its completion checkpoint only once the log after its latest
/// checkpoint is long (100 events by default): a ten-step thread ends without one, and its
/// final state reads from its log the same as a long thread's reads from its snapshot.
#[tokio::test]
async fn a_short_thread_ends_without_a_completion_checkpoint_and_its_state_reads_from_its_log() {
    let (_d, path) = db();
    // `add` runs until the total reaches 60: started at 50 it runs 10 steps, at 0 it runs 60.
    let wf = Workflow::<Tally>::builder("count", 1)
        .node("add", note("x"))
        .edge(START, "add")
        .route("add", |s: &Tally| if s.total >= 60 { END } else { "add" }, ["add", END])
        .loop_bound("add", 60)
        .build()
        .unwrap();
    let ended = |engine: Engine, id: &'static str, from: u64| async move {
        let start = Tally { total: from, log: Vec::new() };
        let t = engine.start_json("count", start, StartOptions::id(id)).await.unwrap();
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
        let view = cairn_tools::Operator::new(&engine).state_at(id, None).await.unwrap();
        (kinds(&engine, id).await, view)
    };
    let engine = open(&path, &[&wf], |b| b).await;
    let (short, short_view) = ended(engine.clone(), "short", 50).await;
    assert_eq!(short, [], "a ten-step thread: no checkpoint at all");
    let done = |v: &cairn_tools::debug::StateView| (v.status, v.step, v.state["total"].clone());
    assert_eq!(done(&short_view), (ThreadStatus::Completed, 10, 60.into()));
    assert_eq!(short_view.state["log"].as_array().map(Vec::len), Some(10));
    let (long, view) = ended(engine.clone(), "long", 0).await;
    assert_eq!(long, [CheckpointKind::Completion], "60 steps: past 100 events");
    assert_eq!(done(&view), (ThreadStatus::Completed, 60, 60.into()));
    engine.shutdown().await;

    // 0: at every completion, as before; the final state is the same either way.
    let (_d2, path2) = db();
    let engine = open(&path2, &[&wf], |b| b.completion_checkpoint_after(0)).await;
    let (always, view) = ended(engine.clone(), "short", 50).await;
    assert_eq!(always, [CheckpointKind::Completion]);
    // One event more: its `checkpoint_created`.
    assert_eq!((view.seq, view.state), (short_view.seq + 1, short_view.state));
    engine.shutdown().await;
}
