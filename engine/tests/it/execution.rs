//! Execution semantics: linear runs, routes, joins, loops, idempotent start, version pinning.

use cairn::storage::{Catalog, ThreadLog};
use std::sync::Arc;

use cairn::dsl::{NodeOutput, Workflow};
use cairn::{END, Error, START, StartOptions, ThreadStatus};

use crate::common::{Effects, Tally, db, diamond, engine_on, linear};

#[tokio::test]
async fn linear_runs_every_node_once_in_order() {
    let (_d, path) = db();
    let fx = Effects::default();
    let wf = linear(5, fx.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("linear", Tally::default(), StartOptions::id("t1")).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.total, 1 + 2 + 3 + 4 + 5);
    assert_eq!(out.log, vec!["n0", "n1", "n2", "n3", "n4"]);
    assert_eq!(fx.count(), 5);
    let report = engine.store().verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
    engine.shutdown().await;
}

#[tokio::test]
async fn fan_out_join_route_and_loop_bound() {
    let (_d, path) = db();
    let fx = Effects::default();
    let wf = diamond(3, fx.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("diamond", Tally::default(), StartOptions::id("d")).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    // Branch updates are applied in task order (by name), whatever finished first.
    assert_eq!(&out.log[..4], &["split", "b0", "b1", "b2"]);
    assert_eq!(out.log.iter().filter(|l| *l == "merge").count(), 1);
    assert_eq!(out.log.iter().filter(|l| *l == "again").count(), 3);
    assert_eq!(out.log.last().unwrap(), "done");
    assert_eq!(fx.count(), 3);
    engine.shutdown().await;
}

#[tokio::test]
async fn same_thread_id_starts_once() {
    let (_d, path) = db();
    let fx = Effects::default();
    let wf = linear(2, fx.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let a = engine.start_json("linear", Tally::default(), StartOptions::id("same")).await.unwrap();
    let b = engine
        .start_json("linear", Tally { total: 100, log: vec![] }, StartOptions::id("same"))
        .await
        .unwrap();
    let out_a: Tally = a.output().await.unwrap();
    let out_b: Tally = b.output().await.unwrap();
    assert_eq!(out_a, out_b);
    assert_eq!(out_a.total, 3, "the second start's input was ignored");
    assert_eq!(fx.count(), 2);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_thread_stays_on_its_version_and_refuses_a_changed_fingerprint() {
    let (_d, path) = db();
    let v1 = Workflow::<Tally>::builder("pinned", 1)
        .node("wait", |_s, ctx: cairn::Ctx| async move {
            let go: bool = ctx.interrupt("continue?")?;
            Ok(NodeOutput::update((u64::from(go), "v1".to_owned())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&v1], None).await;
    let t = engine.start_json("pinned", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.shutdown().await;
    // Handles share the engine: the file closes when the last of them is gone.
    drop(t);
    drop(engine);

    // Same id and version, different structure: the thread must not be touched.
    let changed = Workflow::<Tally>::builder("pinned", 1)
        .node("wait", |_s, _ctx| async move { Ok(NodeOutput::update((7, "changed".to_owned()))) })
        .node("extra", |_s, _ctx| async move { Ok(NodeOutput::none()) })
        .edge(START, "wait")
        .edge("wait", "extra")
        .edge("extra", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&changed], None).await;
    let before = engine.store().last_bookmark(&cairn::ThreadId::new("p").unwrap()).wait().unwrap();
    let err = engine.send_input("p", true).await.unwrap_err();
    assert!(matches!(err, Error::FingerprintChanged { .. }), "{err}");
    let after = engine.store().last_bookmark(&cairn::ThreadId::new("p").unwrap()).wait().unwrap();
    assert_eq!(before, after, "nothing written");
    engine.shutdown().await;
    drop(engine);

    // A v2 registered beside v1: the old thread finishes on v1, new threads start on v2.
    let v2 = Workflow::<Tally>::builder("pinned", 2)
        .node("go", |_s, _ctx| async move { Ok(NodeOutput::update((2, "v2".to_owned()))) })
        .edge(START, "go")
        .edge("go", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&v1, &v2], None).await;
    engine.send_input("p", true).await.unwrap();
    let old: Tally = engine.thread("p").await.unwrap().output().await.unwrap();
    assert_eq!(old.log, vec!["v1"]);
    let new: Tally = engine
        .start_json("pinned", Tally::default(), StartOptions::id("q"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    assert_eq!(new.log, vec!["v2"]);
    engine.shutdown().await;
}

#[tokio::test]
async fn input_to_a_thread_that_is_not_waiting_is_an_error() {
    let (_d, path) = db();
    let wf = linear(1, Effects::default());
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("linear", Tally::default(), StartOptions::id("x")).await.unwrap();
    t.finished().await.unwrap();
    let err = engine.send_input("x", 1).await.unwrap_err();
    assert!(matches!(err, Error::WrongStatus { .. }), "{err}");
    engine.shutdown().await;
}

/// A step is bounded (one atomic batch): a map of the most items the DSL allows runs in one
/// step; a step over the engine's task limit (a map at the limit beside another branch) fails
/// its thread with an error that names the limit, and never leaves it Running with no runner;
/// a map over the DSL's limit fails the same way.
#[tokio::test]
async fn a_step_over_the_task_limit_fails_its_thread_clearly() {
    use cairn::dsl::limits::MAP_ITEMS_MAX;
    let (_d, path) = db();
    let map = |name: &str, n: u64| {
        Workflow::<Tally>::builder(name, 1)
            .node("plan", |_s, _ctx| async move { Ok(NodeOutput::update((0, String::new()))) })
            .map(
                "each",
                move |_s: &Tally| (0..n).collect::<Vec<u64>>(),
                |_s, _ctx| async move { Ok(NodeOutput::update((1, String::new()))) },
            )
            .node("beside", |_s, _ctx| async move { Ok(NodeOutput::update((0, String::new()))) })
            .edge(START, "plan")
            .fan_out("plan", ["each", "beside"])
            .join(["each", "beside"], "done")
            .node("done", |_s, _ctx| async move { Ok(NodeOutput::update((0, "done".into()))) })
            .edge("done", END)
            .build()
            .unwrap()
    };
    let at_limit = map("at-limit", MAP_ITEMS_MAX as u64 - 1);
    let over_step = map("over-step", MAP_ITEMS_MAX as u64);
    let over_map = map("over-map", MAP_ITEMS_MAX as u64 + 1);
    let engine = engine_on(&path, &[&at_limit, &over_step, &over_map], None).await;

    let ok = engine.start_json("at-limit", Tally::default(), StartOptions::id("ok")).await.unwrap();
    let out: Tally = ok.output().await.unwrap();
    assert_eq!(out.total, MAP_ITEMS_MAX as u64 - 1);

    for (wf, needle) in
        [("over-step", "at most 1024 run in one step"), ("over-map", "items of one map node")]
    {
        let t = engine.start_json(wf, Tally::default(), StartOptions::id(wf)).await.unwrap();
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), t.finished())
            .await
            .unwrap_or_else(|_| panic!("{wf}: the thread never ended"))
            .unwrap();
        assert_eq!(outcome.status, ThreadStatus::Failed, "{wf}: {outcome:?}");
        let error = format!("{:?}", outcome.error);
        assert!(error.contains(needle), "{wf}: {error}");
    }
    engine.shutdown().await;
}

/// A node that runs again (after waiting for input) and calls a recorded tool with another
/// input gets a nondeterminism error, not the result recorded for the other input (the live
/// path used to check the tool's name only).
#[tokio::test]
async fn a_recorded_tool_result_is_never_returned_for_another_input() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let runs = std::sync::Arc::new(AtomicU64::new(0));
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("drifting", 1)
        .node("n", move |_s, ctx: cairn::Ctx| {
            // Not recorded: differs every time the node runs (the bug a user would have).
            let input = runs.fetch_add(1, Ordering::SeqCst);
            async move {
                let r: u64 = ctx
                    .tool("echo", input, |x: u64, _| async move { Ok::<_, cairn::ToolError>(x) })
                    .await?;
                let _: u64 = ctx.interrupt("go on?")?;
                Ok(NodeOutput::update((r, "n".into())))
            }
        })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("drifting", Tally::default(), StartOptions::id("d")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.send_input("d", 1).await.unwrap();
    let outcome = t.finished().await.unwrap();
    assert_ne!(outcome.status, ThreadStatus::Completed, "{outcome:?}");
    let error = format!("{:?}", outcome.error);
    assert!(error.contains("recorded with another input"), "{outcome:?}");
    engine.shutdown().await;
}

/// Every batch of a running thread, its tasks' tool calls included, goes through one write path
/// guarded by the last seq it submitted: an event written to the thread's log behind the runner's
/// back stops the thread before its next tool call runs (a task's batch used to carry no seq
/// guard, so the tool ran on a log the runner no longer knew).
#[tokio::test]
async fn a_write_behind_the_runners_back_stops_the_thread_before_its_next_tool_call() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let ran = std::sync::Arc::new(AtomicU64::new(0));
    let (reached_tx, reached_rx) = tokio::sync::oneshot::channel::<()>();
    let reached = std::sync::Mutex::new(Some(reached_tx));
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let (node_gate, node_ran) = (gate.clone(), ran.clone());
    let wf = Workflow::<Tally>::builder("gated", 1)
        .node("n", move |_s, ctx: cairn::Ctx| {
            let (gate, ran) = (node_gate.clone(), node_ran.clone());
            if let Some(tx) = reached.lock().unwrap().take() {
                let _ = tx.send(());
            }
            async move {
                gate.notified().await;
                let r: u64 = ctx
                    .tool("effect", 1_u64, move |x: u64, _| async move {
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, cairn::ToolError>(x)
                    })
                    .await?;
                Ok(NodeOutput::update((r, "n".into())))
            }
        })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap();
    let (_d, path) = db();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("gated", Tally::default(), StartOptions::id("g")).await.unwrap();
    reached_rx.await.unwrap();
    // Another writer appends to the thread's log (no lease, no guard) while the node runs.
    let id = cairn::ThreadId::new("g").unwrap();
    let mut batch = cairn::storage::Batch::default();
    let body = cairn::event::Body::Progress {
        task: cairn::event::TaskKey::node("n".to_owned()),
        progress: cairn::dsl::Progress {
            step: 1,
            total: 1,
            message: "written elsewhere".into(),
            percent: None,
            detail: None,
        },
    };
    cairn_core::codec::push_event(&mut batch, &id, &body, 0).unwrap();
    engine.store().append(batch).unwrap().wait().await.unwrap();
    gate.notify_one();
    // Shutting down waits for the runner and its task to finish what they are doing.
    engine.shutdown().await;
    let ran = ran.load(Ordering::SeqCst);
    assert_eq!(ran, 0, "the tool ran on a log written behind the runner's back");
    // The thread is left as a stopped engine leaves it: unfinished, for recovery to look at.
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Running);
}

/// `start_many` starts a batch of threads whose creations share durable commits; it is
/// idempotent per id like `start`, and a bad start among them writes nothing at all.
#[tokio::test]
async fn start_many_starts_every_thread_once_and_checks_them_all_first() {
    let (_d, path) = db();
    let fx = Effects::default();
    let wf = linear(2, fx.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let starts = |n: u64| {
        (0..n).map(|i| (Tally { total: i * 100, log: vec![] }, StartOptions::id(format!("m{i}"))))
    };
    let handles = engine.start_many_json("linear", starts(50)).await.unwrap();
    assert_eq!(handles.len(), 50);
    for (i, h) in handles.iter().enumerate() {
        assert_eq!(h.id().as_str(), format!("m{i}"));
        let out: Tally = h.output().await.unwrap();
        assert_eq!(out.total, i as u64 * 100 + 1 + 2);
    }
    assert_eq!(fx.count(), 100, "two nodes per thread, each run once");
    // Again: the same threads, nothing started twice.
    let again = engine.start_many_json("linear", starts(50)).await.unwrap();
    assert_eq!(again.len(), 50);
    assert_eq!(again[7].outcome().await.unwrap().status, ThreadStatus::Completed);
    // A bad input among good ones: refused before anything is written.
    let mixed = vec![
        (serde_json::json!({"total": 1, "log": []}), StartOptions::id("ok-1")),
        (serde_json::json!("not a tally"), StartOptions::id("bad")),
    ];
    let refused = engine.start_many_json("linear", mixed).await;
    assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
    assert!(engine.thread("ok-1").await.is_err(), "nothing was written");
    let report = engine.store().verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
    engine.shutdown().await;
}

/// A node that runs again (after waiting for input) and draws its values in another order gets
/// a nondeterminism error, also when the two kinds share a type (a clock reading and a random
/// number are both numbers): recorded values carry their kind.
#[tokio::test]
async fn values_drawn_in_another_order_on_a_rerun_are_nondeterminism() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let runs = std::sync::Arc::new(AtomicU64::new(0));
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("reordered", 1)
        .node("n", move |_s, ctx: cairn::Ctx| {
            let first_run = runs.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first_run {
                    let _ = (ctx.now_ms(), ctx.random_u64());
                } else {
                    let _ = (ctx.random_u64(), ctx.now_ms());
                }
                let _: u64 = ctx.interrupt("go on?")?;
                Ok(NodeOutput::update((1, "n".into())))
            }
        })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("reordered", Tally::default(), StartOptions::id("r")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.send_input("r", 1).await.unwrap();
    let outcome = t.finished().await.unwrap();
    assert_ne!(outcome.status, ThreadStatus::Completed, "{outcome:?}");
    let error = format!("{:?}", outcome.error);
    assert!(error.contains("draws a random number where a clock value was recorded"), "{error}");
    engine.shutdown().await;
}

/// `start` hands the new thread's runner the context built from the creation: the runner reads
/// nothing of the thread back (a drive of a stored thread restores it from its log first), and
/// the creation itself moves the thread to Running under this engine's lease, so that the run's
/// first batches can follow it into the same commit.
#[tokio::test]
async fn a_started_thread_runs_from_its_creation_without_reading_it_back() {
    use cairn::storage::{EventKind, Options, RedbStore, Seq, Store};
    use cairn_testkit::RecordingStore;

    let (_d, path) = db();
    let redb = RedbStore::open(&path, Options::default()).unwrap();
    let store = Arc::new(RecordingStore::new(Arc::new(redb)));
    let fx = Effects::default();
    let wf = linear(3, fx.clone());
    let as_dyn: Arc<dyn Store> = store.clone();
    let engine = cairn::Engine::with_store(as_dyn).workflow(&wf).open().await.unwrap();
    let before = store.events_read();
    let t = engine.start_json("linear", Tally::default(), StartOptions::id("t1")).await.unwrap();
    let done = t.finished().await.unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    let run = store.events_read() - before;
    // The runner published how the thread ended: the wait read nothing back either.
    assert_eq!(run, 0, "the start, the run and the wait read no event");
    // What the outcome read from storage reads (the end of the log, for the output), and
    // that it is what the wait reported.
    let before = store.events_read();
    let stored = t.outcome().await.unwrap();
    assert!(store.events_read() - before > 0, "the stored outcome reads the end of the log");
    assert_eq!(
        (done.status, &done.output, &done.error),
        (stored.status, &stored.output, &stored.error)
    );
    assert!(done.output.is_some());
    assert_eq!(fx.count(), 3);
    // A wait that begins after the thread ended still gets the end its runner published (the
    // handle of a start subscribed before the runner began): no event read either.
    let t2 = engine.start_json("linear", Tally::default(), StartOptions::id("t2")).await.unwrap();
    let t2_id: cairn::ThreadId = "t2".parse().unwrap();
    while store.thread(&t2_id).wait().unwrap().is_none_or(|r| r.status != ThreadStatus::Completed) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cairn_testkit::runner_released(&engine, &t2_id).await;
    let before = store.events_read();
    assert_eq!(t2.finished().await.unwrap().output, done.output);
    assert_eq!(store.events_read() - before, 0, "a late wait read no event");
    let first = store.read_range(&"t1".parse().unwrap(), Seq(1), Seq(2)).wait().unwrap();
    let kinds: Vec<EventKind> = first.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::ThreadCreated, EventKind::StatusChanged]);
    assert_eq!(first[1].bookmark.lsn.0, first[0].bookmark.lsn.0 + 1, "one batch");
    engine.shutdown().await;
}

/// Many `start`s of one id at once make one thread, run once: one of them creates and drives it,
/// the others find it (claimed by its runner, or created first) and return a handle to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_starts_of_one_id_make_one_thread() {
    let (_d, path) = db();
    let fx = Effects::default();
    let wf = linear(3, fx.clone());
    let engine = engine_on(&path, &[&wf], None).await;
    let mut starts = Vec::new();
    for _ in 0..16 {
        let engine = engine.clone();
        starts.push(tokio::spawn(async move {
            engine.start_json("linear", Tally::default(), StartOptions::id("once")).await
        }));
    }
    for start in starts {
        let handle = start.await.unwrap().unwrap();
        let out: Tally = handle.output().await.unwrap();
        assert_eq!(out.log, vec!["n0", "n1", "n2"]);
    }
    assert_eq!(fx.count(), 3, "every node ran once");
    let report = engine.store().verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
    engine.shutdown().await;
}

/// A step is reported (the step hook) as soon as its batch is durable, while the runner waits
/// in the next step's node: the acknowledger is polled beside the runner in its task, not only
/// when the runner next settles.
#[tokio::test]
async fn a_step_is_acknowledged_while_the_runner_waits_in_the_next_node() {
    let (_d, path) = db();
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let wf = Workflow::<Tally>::builder("gated", 1)
        .node("inc", move |s: Arc<Tally>, _ctx| {
            let mut gate = gate_rx.clone();
            async move {
                if s.total >= 1 {
                    let _ = gate.wait_for(|open| *open).await;
                }
                Ok(NodeOutput::update((1, String::new())))
            }
        })
        .edge(START, "inc")
        .route("inc", |s: &Tally| if s.total >= 3 { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", 3)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    engine.on_step(Arc::new(move |_t, step, _| {
        if step == 1
            && let Some(tx) = tx.lock().unwrap().take()
        {
            let _ = tx.send(());
        }
    }));
    let t = engine.start_json("gated", Tally::default(), StartOptions::id("g")).await.unwrap();
    // Step 2's node waits at the gate until step 1 is reported.
    tokio::time::timeout(std::time::Duration::from_secs(30), rx)
        .await
        .expect("step 1 reported while the runner waits in step 2")
        .unwrap();
    gate.send_replace(true);
    let done = t.finished().await.unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    engine.shutdown().await;
}

/// A seeded engine makes the same ids run after run on the same history, but never again an
/// id it made before on this database: a start without an id after a reopen is a new thread,
/// not the first thread of the engine's previous life found again.
#[tokio::test]
async fn a_seeded_engine_reopened_starts_new_threads() {
    let (_d, path) = db();
    let wf = linear(1, Effects::default());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let engine = engine_on(&path, &[&wf], None).await;
        let t =
            engine.start_json("linear", Tally::default(), StartOptions::default()).await.unwrap();
        t.output::<Tally>().await.unwrap();
        ids.push(t.id().to_string());
        engine.shutdown().await;
    }
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), 3, "ids made: {ids:?}");
    let engine = engine_on(&path, &[&wf], None).await;
    let threads = engine.store().list_threads(&Default::default(), Default::default());
    assert_eq!(threads.wait().unwrap().len(), 3);
    engine.shutdown().await;
}
