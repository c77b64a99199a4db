//! Recovery on open (both policies), restore cost, subscriptions with no gap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use cairn::dsl::{NodeOutput, Workflow};
use cairn::{Durability, END, Engine, RecoveryPolicy, START, Scope, StartOptions, ThreadStatus};

use crate::common::{Effects, Tally, db, linear};

/// A workflow whose node `stop` parks the thread (waits for input) so the test controls when it
/// is "running" at a crash.
fn counter(n: u32) -> Workflow<Tally> {
    Workflow::<Tally>::builder("counter", 1)
        .node("inc", |_s, _ctx| async move { Ok(NodeOutput::update((1, String::new()))) })
        .edge(START, "inc")
        .route(
            "inc",
            move |s: &Tally| if s.total >= u64::from(n) { END } else { "inc" },
            ["inc", END],
        )
        .loop_bound("inc", n)
        .build()
        .unwrap()
}

/// [`counter`] whose node stalls after its fifth run while `hold` is set: the runner computes
/// steps ahead of their commits, so without a stall the thread could finish before the crash.
fn held_counter(n: u32, hold: Arc<AtomicBool>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("counter", 1)
        .node("inc", move |s: Arc<Tally>, _ctx| {
            let hold = hold.clone();
            async move {
                if hold.load(Ordering::SeqCst) && s.total >= 5 {
                    std::future::pending::<()>().await;
                }
                Ok(NodeOutput::update((1, String::new())))
            }
        })
        .edge(START, "inc")
        .route(
            "inc",
            move |s: &Tally| if s.total >= u64::from(n) { END } else { "inc" },
            ["inc", END],
        )
        .loop_bound("inc", n)
        .build()
        .unwrap()
}

#[tokio::test]
async fn running_threads_are_resumed_or_parked_at_open() {
    for policy in [RecoveryPolicy::Resume, RecoveryPolicy::Park] {
        let (_d, path) = db();
        let hold = Arc::new(AtomicBool::new(true));
        let wf = held_counter(50, hold.clone());
        // First process: crash after a few steps.
        let engine =
            Engine::builder(&path).durability(Durability::None).workflow(&wf).open().await.unwrap();
        let rx = crate::common::after_steps(&engine, 5);
        engine.start_json("counter", Tally::default(), StartOptions::id("c")).await.unwrap();
        rx.await.unwrap();
        engine.crash().await;
        drop(engine);
        hold.store(false, Ordering::SeqCst);

        let engine = Engine::builder(&path)
            .durability(Durability::None)
            .workflow(&wf)
            .recovery(policy)
            .open()
            .await
            .unwrap();
        let t = engine.thread("c").await.unwrap();
        match policy {
            RecoveryPolicy::Resume => {
                let out: Tally = t.output().await.unwrap();
                assert_eq!(out.total, 50);
            }
            RecoveryPolicy::Park => {
                assert_eq!(t.status().await.unwrap(), ThreadStatus::Running);
                let resumable = engine.resumable().await.unwrap();
                assert_eq!(resumable.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["c"]);
                engine.resume("c").await.unwrap();
                let out: Tally = t.output().await.unwrap();
                assert_eq!(out.total, 50);
            }
        }
        // An event says the thread was recovered.
        let mut events = t.events(0).unwrap();
        let mut recovered = false;
        while let Some(e) = events.try_next().await.unwrap() {
            recovered |= matches!(e.body, cairn::event::Body::Recovered { .. });
        }
        assert!(recovered, "{policy:?}: no recovered event");
        engine.shutdown().await;
    }
}

/// Restore is checkpoint + tail: its cost must not grow with the history, with the engine's
/// default checkpoint policy.
#[tokio::test]
async fn restore_cost_does_not_grow_with_history() {
    let (_d, path) = db();
    let long = counter(100_000);
    let short = Workflow::<Tally>::builder("short", 1)
        .node("inc", |_s, _ctx| async move { Ok(NodeOutput::update((1, String::new()))) })
        .edge(START, "inc")
        .route("inc", |s: &Tally| if s.total >= 100 { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", 100)
        .build()
        .unwrap();
    // The default builder: periodic checkpoints by the log's tail are on without tuning.
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&long)
        .workflow(&short)
        .open()
        .await
        .unwrap();
    let a = engine.start_json("counter", Tally::default(), StartOptions::id("long")).await.unwrap();
    let b = engine.start_json("short", Tally::default(), StartOptions::id("short")).await.unwrap();
    assert_eq!(a.output::<Tally>().await.unwrap().total, 100_000);
    assert_eq!(b.output::<Tally>().await.unwrap().total, 100);
    let time = |id: &str, wf: &Workflow<Tally>| {
        let erased = wf.erase();
        let thread = cairn::ThreadId::new(id).unwrap();
        // Restore at a seq in the middle, which needs a periodic checkpoint plus a tail.
        let last = engine.store().last_bookmark(&thread).wait().unwrap().unwrap().seq.0;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            let ctx =
                cairn::blocking::restore(engine.store().as_ref(), &erased, &thread, Some(last / 2))
                    .unwrap();
            best = best.min(start.elapsed().as_secs_f64());
            assert!(ctx.meta.seq <= last / 2);
        }
        best
    };
    let t_long = time("long", &long);
    let t_short = time("short", &short);
    // `state_at` anywhere in a history: the slowest of eleven seqs spread over it (the last
    // included), each the best of three; it folds a checkpoint and at most its tail, so the long
    // thread's slowest is about the short one's.
    let slowest_state_at = async |id: &str| {
        let thread = cairn::ThreadId::new(id).unwrap();
        let last = engine.store().last_bookmark(&thread).wait().unwrap().unwrap().seq.0;
        let mut slowest = 0.0_f64;
        for seq in (0..=10).map(|k| (last * k / 10).max(1)) {
            let mut best = f64::MAX;
            for _ in 0..3 {
                let start = Instant::now();
                let view =
                    cairn_tools::Operator::new(&engine).state_at(id, Some(seq)).await.unwrap();
                best = best.min(start.elapsed().as_secs_f64());
                drop(view);
            }
            slowest = slowest.max(best);
        }
        slowest
    };
    let s_long = slowest_state_at("long").await;
    let s_short = slowest_state_at("short").await;
    crate::common::report(&format!(
        "RELIABILITY restore_cost long_100000_steps_s={t_long:.6} short_100_steps_s={t_short:.6} \
         state_at_slowest_long_s={s_long:.6} state_at_slowest_short_s={s_short:.6}"
    ));
    // Generous bounds for noisy machines: a restore that replayed the whole history would be
    // about 1000x slower for the long thread.
    assert!(
        t_long < t_short * 20.0 + 0.005,
        "restore of the long thread took {t_long}s vs {t_short}s"
    );
    assert!(
        s_long < s_short * 20.0 + 0.010,
        "state_at in the long thread took up to {s_long}s vs {s_short}s in the short one"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn subscribe_since_a_bookmark_sees_every_event_once_under_load() {
    let (_d, path) = db();
    let wf = linear(4, Effects::default());
    let engine =
        Engine::builder(&path).durability(Durability::None).workflow(&wf).open().await.unwrap();
    // Some history before subscribing.
    engine
        .start_json("linear", Tally::default(), StartOptions::id("pre"))
        .await
        .unwrap()
        .finished()
        .await
        .unwrap();
    let mut sub = engine.subscribe(Scope::All, 0).unwrap();
    let mut handles = Vec::new();
    for i in 0..32 {
        handles.push(
            engine
                .start_json("linear", Tally::default(), StartOptions::id(format!("load-{i}")))
                .await
                .unwrap(),
        );
    }
    for h in &handles {
        h.finished().await.unwrap();
    }
    let mut total = 0;
    let mut after = cairn::Lsn(0);
    loop {
        let chunk = engine.store().read_all_since(after, 1_000).wait().unwrap();
        let Some(last) = chunk.last() else { break };
        after = last.bookmark.lsn;
        total += chunk.len();
    }
    let mut last = 0;
    for _ in 0..total {
        let e = sub.next().await.unwrap();
        assert!(e.bookmark.lsn.0 > last, "every lsn once, in order");
        last = e.bookmark.lsn.0;
    }
    assert!(sub.try_next().await.unwrap().is_none());
    engine.shutdown().await;
}

/// A float in the state is restored bit for bit from the log (JSON bodies are parsed with
/// serde_json's `float_roundtrip`; without it this value came back one ulp off).
#[tokio::test]
async fn floats_in_state_restore_bit_for_bit() {
    let value = 1.444_444_444_444_444_5e94_f64;
    let wf = Workflow::<cairn::Replace<Vec<f64>>>::builder("floats", 1)
        .node("f", move |_s, _ctx| async move { Ok(NodeOutput::update(vec![value, 0.1 + 0.2])) })
        .edge(START, "f")
        .edge("f", END)
        .build()
        .unwrap();
    let (builder, _clock) = cairn_testkit::deterministic_engine(1).unwrap();
    let engine = builder.workflow(&wf).open().await.unwrap();
    let out: Vec<f64> = engine
        .start_json("floats", Vec::<f64>::new(), StartOptions::id("t"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    let thread = cairn::ThreadId::new("t").unwrap();
    let last = engine.store().last_bookmark(&thread).wait().unwrap().unwrap().seq.0;
    let erased = wf.erase();
    for seq in [last - 1, last] {
        let ctx =
            cairn::blocking::restore(engine.store().as_ref(), &erased, &thread, Some(seq)).unwrap();
        let state: Vec<f64> = serde_json::from_value(ctx.snapshot().unwrap().state).unwrap();
        assert_eq!(
            state.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            out.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
        );
    }
    assert_eq!(out[0].to_bits(), value.to_bits());
    engine.shutdown().await;
}

/// A parent whose node drives a sub-workflow child, killed while the child runs: at the next
/// open the child has one driver (its parent's node), and the parent completes with the child's
/// result (it used to find the child "being driven elsewhere" by recovery and fail for good).
#[tokio::test]
async fn a_parent_killed_while_its_child_runs_completes_after_reopen() {
    for policy in [RecoveryPolicy::Resume, RecoveryPolicy::Park] {
        let (_d, path) = db();
        let hold = Arc::new(AtomicBool::new(true));
        let parent = Workflow::<Tally>::builder("parent", 1)
            .subgraph(
                "sub",
                held_counter(12, hold.clone()),
                |s: &Tally| s.clone(),
                |c: &Tally| (c.total, "sub".to_owned()),
            )
            .node("after", |_s, _ctx| async move { Ok(NodeOutput::update((100, "after".into()))) })
            .edge(START, "sub")
            .edge("sub", "after")
            .edge("after", END)
            .build()
            .unwrap();
        let engine = Engine::builder(&path).workflow(&parent).open().await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let tx = std::sync::Mutex::new(Some(tx));
        engine.on_step(Arc::new(move |t, _s, total| {
            // Steps of the child (its id names the parent) have been acknowledged.
            if t.as_str().starts_with("p/")
                && total >= 4
                && let Some(tx) = tx.lock().unwrap().take()
            {
                let _ = tx.send(());
            }
        }));
        engine.start_json("parent", Tally::default(), StartOptions::id("p")).await.unwrap();
        rx.await.unwrap();
        engine.crash().await;
        drop(engine);
        hold.store(false, Ordering::SeqCst);

        let engine =
            Engine::builder(&path).workflow(&parent).recovery(policy).open().await.unwrap();
        if policy == RecoveryPolicy::Park {
            engine.resume("p").await.unwrap();
        }
        let t = engine.thread("p").await.unwrap();
        let out: Tally = t.output().await.unwrap_or_else(|e| panic!("{policy:?}: {e}"));
        assert_eq!(out.total, 112, "{policy:?}: the child's 12 and the node after it");
        assert_eq!(out.log, ["sub", "after"], "{policy:?}");
        let children: Vec<_> = engine
            .store()
            .list_threads(
                &cairn::storage::ThreadFilter {
                    labels: vec![("parent".into(), "p".into())],
                    ..Default::default()
                },
                cairn::storage::Page { limit: 10, offset: 0 },
            )
            .wait()
            .unwrap();
        assert_eq!(children.len(), 1, "{policy:?}: one child, started once");
        assert_eq!(children[0].status, ThreadStatus::Completed, "{policy:?}");
        // One driver: the child went on under its parent's node, never as a recovered thread
        // of its own (its log says it was taken over from the dead engine's runner, once).
        let mut child_log =
            engine.thread(children[0].id.as_str()).await.unwrap().events(0).unwrap();
        let mut markers = Vec::new();
        while let Some(e) = child_log.try_next().await.unwrap() {
            if let cairn::event::Body::Recovered { action } = e.body {
                markers.push(action);
            }
        }
        assert_eq!(markers, ["taken over"], "{policy:?}: the child was recovered on its own");
        // The label that links a child to its parent is the engine's own.
        let refused = engine
            .start_json("parent", Tally::default(), StartOptions::id("q").label("parent", "p"))
            .await;
        assert!(matches!(refused, Err(cairn::Error::Invalid(_))), "{refused:?}");
        engine.shutdown().await;
    }
}
