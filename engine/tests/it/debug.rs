//! Time travel, diffs, forks, manual checkpoints and migrations (`cairn_tools::debug`).

use std::sync::{Arc, Mutex};

use cairn::blocking::decode;
use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::storage::{CheckpointFilter, CheckpointMeta, Page, Seq, ThreadId};
use cairn::thread_ctx::ThreadCtx;
use cairn::{Durability, END, Engine, Error, START, StartOptions, ThreadStatus};
use cairn_tools::debug::{ForkFrom, ForkOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::{Tally, db, open};

/// What each node saw: (thread, step, the state snapshot it was given).
type Seen = Arc<Mutex<Vec<(String, u64, Tally)>>>;

/// START -> n0 -> ... -> n{len-1} -> END; every node records the state it sees and adds its
/// index plus a random draw (so the states depend on recorded values too).
fn observed(len: usize, seen: Seen) -> Workflow<Tally> {
    let mut b = Workflow::<Tally>::builder("observed", 1);
    for i in 0..len {
        let seen = seen.clone();
        b = b.node(format!("n{i}"), move |s: Arc<Tally>, ctx: Ctx| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((ctx.thread_id().to_owned(), ctx.step(), (*s).clone()));
                let r = ctx.random_u64() % 5;
                Ok(NodeOutput::update((i as u64 + r, format!("n{i}"))))
            }
        });
    }
    b = b.edge(START, "n0");
    for i in 1..len {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge(format!("n{}", len - 1), END).build().unwrap()
}

/// The state after every seq, folded from seq 1 without any checkpoint (the ground truth).
fn fold_all(engine: &Engine, wf: &Workflow<Tally>, thread: &str) -> Vec<serde_json::Value> {
    let id = ThreadId::new(thread).unwrap();
    let store = engine.store();
    let last = store.last_bookmark(&id).wait().unwrap().unwrap().seq.0;
    let events = store.read_range(&id, Seq(1), Seq(last)).wait().unwrap();
    let dyn_wf = wf.erase();
    let mut out = Vec::new();
    let mut ctx: Option<ThreadCtx> = None;
    for event in events {
        let rec = decode(store.as_ref(), event).unwrap();
        match &mut ctx {
            None => {
                ctx = Some(
                    ThreadCtx::created(&dyn_wf, thread, &rec.body, rec.bookmark.at_ms).unwrap(),
                )
            }
            Some(c) => c.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body).unwrap(),
        }
        out.push(ctx.as_ref().unwrap().state.to_json().unwrap());
    }
    out
}

fn step_completed_seqs(engine: &Engine, thread: &str) -> Vec<(u64, u64)> {
    let id = ThreadId::new(thread).unwrap();
    let last = engine.store().last_bookmark(&id).wait().unwrap().unwrap().seq.0;
    let mut out = Vec::new();
    for event in engine.store().read_range(&id, Seq(1), Seq(last)).wait().unwrap() {
        let rec = decode(engine.store().as_ref(), event).unwrap();
        if let cairn::event::Body::StepCompleted { step, .. } = rec.body {
            out.push((step, rec.bookmark.seq.0));
        }
    }
    out
}

#[tokio::test]
async fn state_at_every_seq_is_the_live_state() {
    let (_d, path) = db();
    let seen: Seen = Arc::default();
    let wf = observed(7, seen.clone());
    let engine = open(&path, &[&wf], |b| b.seed(3).checkpoint_every(Some(2), None)).await;
    let t = engine.start_json("observed", Tally::default(), StartOptions::id("tt")).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    let checkpoints = engine
        .store()
        .list_checkpoints(
            &CheckpointFilter { thread: Some(t.id().clone()), ..Default::default() },
            Page::default(),
        )
        .wait()
        .unwrap();
    assert!(checkpoints.len() >= 3, "periodic checkpoints are used by restore: {checkpoints:?}");

    // Every seq: checkpoint + tail equals the fold from the start.
    let truth = fold_all(&engine, &wf, "tt");
    for (i, expected) in truth.iter().enumerate() {
        let seq = i as u64 + 1;
        let view = cairn_tools::Operator::new(&engine).state_at("tt", Some(seq)).await.unwrap();
        assert_eq!(view.seq, seq);
        assert_eq!(&view.state, expected, "seq {seq}");
    }
    assert_eq!(
        cairn_tools::Operator::new(&engine).state_at("tt", None).await.unwrap().state,
        serde_json::to_value(&out).unwrap()
    );

    // What each node saw at step k is the state after step k-1 (after thread_created for 1).
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 7);
    let boundaries = step_completed_seqs(&engine, "tt");
    for (_, step, state) in &seen {
        let seq =
            if *step == 1 { 1 } else { boundaries.iter().find(|(s, _)| *s == step - 1).unwrap().1 };
        let view = cairn_tools::Operator::new(&engine).state_at("tt", Some(seq)).await.unwrap();
        assert_eq!(view.state, serde_json::to_value(state).unwrap(), "step {step}");
        assert_eq!(view.step, step - 1);
    }

    // states(): one view per completed step, each equal to state_at at its seq.
    let last = truth.len() as u64;
    let views = cairn_tools::Operator::new(&engine).states("tt", 1, last).await.unwrap();
    assert_eq!(views.len(), 7);
    for v in &views {
        assert_eq!(v.state, truth[v.seq as usize - 1]);
    }
    let middle = cairn_tools::Operator::new(&engine)
        .states("tt", boundaries[2].1, boundaries[4].1)
        .await
        .unwrap();
    assert_eq!(middle.iter().map(|v| v.step).collect::<Vec<_>>(), [3, 4, 5]);

    assert!(matches!(
        cairn_tools::Operator::new(&engine).state_at("tt", Some(0)).await,
        Err(Error::SeqUnavailable { .. })
    ));
    let past = cairn_tools::Operator::new(&engine).state_at("tt", Some(last + 1)).await;
    assert!(matches!(past, Err(Error::SeqUnavailable { seq, .. }) if seq == last + 1), "{past:?}");
    assert!(matches!(
        cairn_tools::Operator::new(&engine).states("tt", 5, 4).await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        cairn_tools::Operator::new(&engine).state_at("nope", None).await,
        Err(Error::UnknownThread(_))
    ));
    engine.shutdown().await;
}

#[tokio::test]
async fn diff_names_what_changed_between_two_seqs() {
    let (_d, path) = db();
    let wf = observed(3, Seen::default());
    let engine = open(&path, &[&wf], |b| b.seed(3).checkpoint_every(Some(2), None)).await;
    let t = engine.start_json("observed", Tally::default(), StartOptions::id("d")).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    let b = step_completed_seqs(&engine, "d");
    let changes = cairn_tools::Operator::new(&engine).diff("d", b[0].1, b[2].1).await.unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["/log/1", "/log/2", "/total"]);
    assert_eq!(changes[0].before, None);
    assert_eq!(changes[0].after, Some(json!("n1")));
    assert_eq!(changes[2].after, Some(json!(out.total)));
    assert!(
        cairn_tools::Operator::new(&engine).diff("d", b[1].1, b[1].1).await.unwrap().is_empty()
    );
    engine.shutdown().await;
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]
async fn fork_runs_from_the_fork_point_and_leaves_the_original_untouched() {
    let (_d, path) = db();
    let seen: Seen = Arc::default();
    let wf = observed(5, seen.clone());
    let engine = open(&path, &[&wf], |b| b.seed(3).checkpoint_every(Some(2), None)).await;
    let t =
        engine.start_json("observed", Tally::default(), StartOptions::id("orig")).await.unwrap();
    let original: Tally = t.output().await.unwrap();
    let id = ThreadId::new("orig").unwrap();
    let last = engine.store().last_bookmark(&id).wait().unwrap().unwrap().seq;
    let before = engine.store().read_range(&id, Seq(1), last).wait().unwrap();
    let record_before = engine.store().thread(&id).wait().unwrap().unwrap();
    let b = step_completed_seqs(&engine, "orig");
    let at = b[1].1; // after step 2

    // Without an update: the same nodes from step 3 on, on the state after step 2.
    let f = cairn_tools::Operator::new(&engine)
        .fork("orig", ForkFrom::Seq(at), ForkOptions::id("f1"))
        .await
        .unwrap();
    let forked: Tally = f.output().await.unwrap();
    assert_eq!(&forked.log, &original.log, "same path from the fork point");
    let state_at_fork: Tally = serde_json::from_value(
        cairn_tools::Operator::new(&engine).state_at("orig", Some(at)).await.unwrap().state,
    )
    .unwrap();
    assert_eq!(forked.log[..2], state_at_fork.log[..]);
    let fork_seen: Vec<(u64, Tally)> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, ..)| t == "f1")
        .map(|(_, s, st)| (*s, st.clone()))
        .collect();
    assert_eq!(fork_seen.len(), 3, "only the nodes after the fork point ran");
    assert_eq!(fork_seen[0], (1, state_at_fork.clone()), "a fork counts its own steps from 1");
    let rec = engine.store().thread(&ThreadId::new("f1").unwrap()).wait().unwrap().unwrap();
    assert_eq!(rec.parent, Some((id.clone(), Seq(at))));
    let first = engine.store().read_range(&rec.id, Seq(1), Seq(1)).wait().unwrap();
    match decode(engine.store().as_ref(), first[0].clone()).unwrap().body {
        cairn::event::Body::ThreadCreated { fork: Some(origin), frontier, .. } => {
            assert_eq!((origin.thread.as_str(), origin.seq), ("orig", at));
            assert_eq!(frontier, ["n2"]);
        }
        other => panic!("not a fork's thread_created: {other:?}"),
    }

    // With an update, from a checkpoint.
    let cps = engine
        .store()
        .list_checkpoints(
            &CheckpointFilter { thread: Some(id.clone()), ..Default::default() },
            Page::default(),
        )
        .wait()
        .unwrap();
    let cp = cps.iter().find(|c| c.covers.seq.0 < b[3].1).unwrap();
    let f2 = cairn_tools::Operator::new(&engine)
        .fork(
            "orig",
            ForkFrom::Checkpoint(cp.id),
            ForkOptions::id("f2").update((1000u64, "patched")),
        )
        .await
        .unwrap();
    let patched: Tally = f2.output().await.unwrap();
    let at_cp: Tally = serde_json::from_value(
        cairn_tools::Operator::new(&engine)
            .state_at("orig", Some(cp.covers.seq.0))
            .await
            .unwrap()
            .state,
    )
    .unwrap();
    assert_eq!(patched.log[..at_cp.log.len()], at_cp.log[..]);
    assert_eq!(patched.log[at_cp.log.len()], "patched");
    assert!(patched.total >= at_cp.total + 1000);
    let second = engine.store().read_range(f2.id(), Seq(2), Seq(2)).wait().unwrap();
    assert!(matches!(
        decode(engine.store().as_ref(), second[0].clone()).unwrap().body,
        cairn::event::Body::StateUpdated { .. }
    ));

    // A fork that does not start stays Created.
    let f3 = cairn_tools::Operator::new(&engine)
        .fork("orig", ForkFrom::Seq(1), ForkOptions::id("f3").paused())
        .await
        .unwrap();
    assert_eq!(f3.status().await.unwrap(), ThreadStatus::Created);

    // Refusals write nothing.
    let bad = |r: Result<cairn::ThreadHandle, Error>| matches!(r, Err(Error::Invalid(_)));
    let no_seq =
        |r: Result<cairn::ThreadHandle, Error>| matches!(r, Err(Error::SeqUnavailable { .. }));
    assert!(no_seq(
        cairn_tools::Operator::new(&engine)
            .fork("orig", ForkFrom::Seq(0), ForkOptions::id("x"))
            .await
    ));
    assert!(no_seq(
        cairn_tools::Operator::new(&engine)
            .fork("orig", ForkFrom::Seq(last.0 + 1), ForkOptions::id("x"))
            .await
    ));
    assert!(bad(cairn_tools::Operator::new(&engine)
        .fork("orig", ForkFrom::Seq(at), ForkOptions::id("f1"))
        .await));
    assert!(bad(cairn_tools::Operator::new(&engine)
        .fork("orig", ForkFrom::Seq(at), ForkOptions::id("x").update("no"))
        .await));
    assert!(engine.store().thread(&ThreadId::new("x").unwrap()).wait().unwrap().is_none());

    // The original is untouched.
    assert_eq!(engine.store().read_range(&id, Seq(1), last).wait().unwrap(), before);
    assert_eq!(engine.store().thread(&id).wait().unwrap().unwrap(), record_before);
    engine.shutdown().await;
}

#[tokio::test]
async fn manual_checkpoint_of_a_parked_thread() {
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("ask", 1)
        .node("a", |_s, _ctx| async move { Ok(NodeOutput::update((1, "a".to_owned()))) })
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "ask".to_owned())))
        })
        .edge(START, "a")
        .edge("a", "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let engine = open(&path, &[&wf], |b| b.seed(3).checkpoint_every(Some(2), None)).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("m")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let before = cairn_tools::Operator::new(&engine).state_at("m", None).await.unwrap();
    let meta = CheckpointMeta {
        creator: "test".into(),
        description: "before answering".into(),
        tags: vec!["mark".into()],
        ..Default::default()
    };
    let cp = engine.checkpoint_now("m", meta).await.unwrap();
    let stored = engine.store().checkpoint(cp).wait().unwrap().unwrap();
    assert_eq!(stored.covers.seq.0, before.seq + 1);
    assert_eq!(stored.meta.tags, ["mark"]);
    assert_eq!(stored.kind, cairn::storage::CheckpointKind::Manual);
    let after = cairn_tools::Operator::new(&engine).state_at("m", None).await.unwrap();
    assert_eq!(after.state, before.state);
    assert_eq!(after.status, ThreadStatus::WaitingInput);
    engine.send_input("m", 41).await.unwrap();
    let out: Tally = serde_json::from_value(t.finished().await.unwrap().output.unwrap()).unwrap();
    assert_eq!(out.total, 42);
    engine.shutdown().await;
}

/// Version 1 of a counter: state `{n}`; v2 renames it to `{count, note}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct V1 {
    n: u64,
}

impl State for V1 {
    type Update = u64;
    fn apply(&mut self, add: u64) {
        self.n += add;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct V2 {
    count: u64,
    note: String,
}

impl State for V2 {
    type Update = (u64, String);
    fn apply(&mut self, (add, note): (u64, String)) {
        self.count += add;
        self.note = note;
    }
}

fn counter_v1() -> Workflow<V1> {
    Workflow::<V1>::builder("counter", 1)
        .node("a", |_s, _ctx| async move { Ok(NodeOutput::update(5)) })
        .node("wait", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("more?")?;
            Ok(NodeOutput::update(n))
        })
        .node("b", |_s, _ctx| async move { Ok(NodeOutput::update(1)) })
        .edge(START, "a")
        .edge("a", "wait")
        .edge("wait", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

fn counter_v2() -> Workflow<V2> {
    Workflow::<V2>::builder("counter", 2)
        .node("a", |_s, _ctx| async move { Ok(NodeOutput::update((5, "a".to_owned()))) })
        .node("wait", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("more?")?;
            Ok(NodeOutput::update((n, "wait v2".to_owned())))
        })
        .node("b", |_s, _ctx| async move { Ok(NodeOutput::update((100, "b v2".to_owned()))) })
        .edge(START, "a")
        .edge("a", "wait")
        .edge("wait", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn migration_moves_a_parked_thread_onto_the_new_version() {
    let (_d, path) = db();
    let (v1, v2) = (counter_v1(), counter_v2());
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&v1)
        .workflow(&v2)
        .open()
        .await
        .unwrap();
    let t = engine
        .start_json(
            "counter",
            json!({"n": 0}),
            StartOptions { version: Some(1), ..StartOptions::id("c") },
        )
        .await
        .unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let before = cairn_tools::Operator::new(&engine).state_at("c", None).await.unwrap();
    assert_eq!(before.state, json!({"n": 5}));

    assert!(matches!(engine.migrate("c", 2).await, Err(Error::NoMigration { .. })));
    engine.register_migration("counter", 1, 2, |state| {
        let n = state.get("n").and_then(serde_json::Value::as_u64).ok_or("no n")?;
        Ok(json!({"count": n, "note": "migrated"}))
    });
    assert!(matches!(engine.migrate("c", 3).await, Err(Error::NoMigration { .. })));
    engine.migrate("c", 2).await.unwrap();

    let id = ThreadId::new("c").unwrap();
    let record = engine.store().thread(&id).wait().unwrap().unwrap();
    assert_eq!(record.workflow.version, 2);
    assert_eq!(record.status, ThreadStatus::WaitingInput, "the status is kept");
    let now = cairn_tools::Operator::new(&engine).state_at("c", None).await.unwrap();
    assert_eq!(now.state, json!({"count": 5, "note": "migrated"}));
    assert_eq!(now.meta.workflow.version, 2);
    // Earlier seqs still fold with v1.
    assert_eq!(
        cairn_tools::Operator::new(&engine).state_at("c", Some(before.seq)).await.unwrap().state,
        json!({"n": 5})
    );
    let views = cairn_tools::Operator::new(&engine).states("c", 1, now.seq).await.unwrap();
    assert_eq!(views.len(), 1);

    engine.send_input("c", 7).await.unwrap();
    let done = engine.thread("c").await.unwrap().finished().await.unwrap();
    let out: V2 = serde_json::from_value(done.output.unwrap()).unwrap();
    assert_eq!(out, V2 { count: 5 + 7 + 100, note: "b v2".into() });
    let views = cairn_tools::Operator::new(&engine)
        .states("c", 1, cairn_tools::Operator::new(&engine).state_at("c", None).await.unwrap().seq)
        .await
        .unwrap();
    assert_eq!(views.last().unwrap().state, json!({"count": 112, "note": "b v2"}));
    assert!(matches!(engine.migrate("c", 1).await, Err(Error::WrongStatus { .. })));

    // A migration whose result is not a state of the new version writes nothing.
    engine.register_migration("counter", 1, 2, |_| Ok(json!({"wrong": true})));
    let t2 = engine
        .start_json(
            "counter",
            json!({"n": 1}),
            StartOptions { version: Some(1), ..StartOptions::id("c2") },
        )
        .await
        .unwrap();
    assert_eq!(t2.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let last = engine.store().last_bookmark(t2.id()).wait().unwrap();
    assert!(matches!(engine.migrate("c2", 2).await, Err(Error::Invalid(_))));
    assert_eq!(engine.store().last_bookmark(t2.id()).wait().unwrap(), last);
    engine.shutdown().await;
}

/// Time travel to a point in time: the seq at a time is the highest whose event was recorded at
/// or before it, and the state at a time is the state after that seq.
#[tokio::test]
async fn the_state_at_a_time_is_the_state_after_the_last_event_recorded_by_then() {
    let (_d, path) = db();
    // Every node moves the clock on by 100 ms: the steps' events have times apart.
    let clock = Arc::new(cairn_testkit::ManualClock::new(cairn_testkit::CLOCK_START_MS));
    let mut b = Workflow::<Tally>::builder("timed", 1);
    for i in 0..5 {
        let clock = clock.clone();
        b = b.node(format!("n{i}"), move |_s: Arc<Tally>, _ctx: Ctx| {
            clock.advance_ms(100);
            async move { Ok(NodeOutput::update((i as u64, format!("n{i}")))) }
        });
    }
    b = b.edge(START, "n0").edge("n4", END);
    for i in 1..5 {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    let wf = b.build().unwrap();
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .clock(clock.clone())
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let t = engine.start_json("timed", Tally::default(), StartOptions::id("tm")).await.unwrap();
    let _: Tally = t.output().await.unwrap();
    let id: ThreadId = "tm".parse().unwrap();
    let events = engine.store().read_since(&id, Seq(0), 1_000).wait().unwrap();
    let expected =
        |at: u64| events.iter().filter(|e| e.bookmark.at_ms <= at).map(|e| e.bookmark.seq.0).max();
    let first = events[0].bookmark.at_ms;
    let times: std::collections::BTreeSet<u64> = events.iter().map(|e| e.bookmark.at_ms).collect();
    assert!(times.len() >= 5, "the steps' events have distinct times: {times:?}");
    assert_eq!(
        cairn_tools::Operator::new(&engine).seq_at_time("tm", first - 1).await.unwrap(),
        None,
        "before its first event"
    );
    assert!(cairn_tools::Operator::new(&engine).state_at_time("tm", first - 1).await.is_err());
    for e in &events {
        for at in [e.bookmark.at_ms - 1, e.bookmark.at_ms, e.bookmark.at_ms + 1] {
            let seq = cairn_tools::Operator::new(&engine).seq_at_time("tm", at).await.unwrap();
            assert_eq!(seq, expected(at), "at {at} ms");
            if let Some(seq) = seq {
                let then =
                    cairn_tools::Operator::new(&engine).state_at_time("tm", at).await.unwrap();
                assert_eq!(
                    then.state,
                    cairn_tools::Operator::new(&engine)
                        .state_at("tm", Some(seq))
                        .await
                        .unwrap()
                        .state
                );
            }
        }
    }
    let last = events.last().unwrap();
    assert_eq!(
        cairn_tools::Operator::new(&engine).seq_at_time("tm", u64::MAX).await.unwrap(),
        Some(last.bookmark.seq.0)
    );
    assert!(matches!(
        cairn_tools::Operator::new(&engine).seq_at_time("nope", 0).await,
        Err(Error::UnknownThread(_))
    ));
    engine.shutdown().await;
}
