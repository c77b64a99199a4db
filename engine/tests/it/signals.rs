//! Signals (`Engine::signal`, `ctx.recv`, `ctx.try_recv`): order per name, buffering before the
//! node asks, parking and waking, `try_recv` on an empty inbox, refusal for a finished or
//! unknown thread, and receipts that survive a restart.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, NodePolicy, Workflow};
use cairn::event::Body;
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

/// One node that receives `count` signals named `name` and notes them in order.
fn receiver(id: &str, name: &'static str, count: usize) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .node_with(
            "recv",
            move |_s: Arc<Tally>, ctx: Ctx| async move {
                let mut got = Vec::new();
                for _ in 0..count {
                    let v: u64 = ctx.recv(name).await?;
                    got.push(v.to_string());
                }
                Ok(NodeOutput::update((got.len() as u64, got.join(","))))
            },
            NodePolicy::default(),
        )
        .edge(START, "recv")
        .edge("recv", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn signals_sent_before_the_node_asks_are_buffered_and_received_in_order_per_name() {
    let (_d, path) = db();
    // The node first waits for an "other" signal, so the "n" signals all arrive before it asks.
    let wf = Workflow::<Tally>::builder("ordered", 1)
        .node_with(
            "recv",
            |_s: Arc<Tally>, ctx: Ctx| async move {
                let _: String = ctx.recv("go").await?;
                let mut got = Vec::new();
                for _ in 0..3 {
                    let v: u64 = ctx.recv("n").await?;
                    got.push(v.to_string());
                }
                Ok(NodeOutput::update((0, got.join(","))))
            },
            NodePolicy::default(),
        )
        .edge(START, "recv")
        .edge("recv", END)
        .build()
        .unwrap();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("ordered", Tally::default(), StartOptions::id("o1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    for v in [1u64, 2, 3] {
        engine.signal("o1", "n", v).await.unwrap();
    }
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput, "no signal named go yet");
    assert_eq!(engine.signal("o1", "go", "now").await.unwrap(), 4, "numbered per thread");
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["1,2,3".to_string()]);
    engine.shutdown().await;
}

#[tokio::test]
async fn recv_parks_the_thread_and_a_signal_wakes_it_across_a_restart() {
    let (_d, path) = db();
    let wf = receiver("waits", "payment", 2);
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("waits", Tally::default(), StartOptions::id("w1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("w1", "payment", 30u64).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput, "parks for the 2nd");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.thread("w1").await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput);
    engine.signal("w1", "payment", 12u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["30,12".to_string()], "the first receipt survived the restart");
    let id = cairn::ThreadId::new("w1").unwrap();
    let bodies: Vec<Body> = engine
        .store()
        .read_since(&id, cairn::Seq(0), 10_000)
        .wait()
        .unwrap()
        .into_iter()
        .map(|e| cairn::blocking::decode(engine.store().as_ref(), e).unwrap().body)
        .collect();
    let awaited = bodies.iter().filter(|b| matches!(b, Body::SignalAwaited { .. })).count();
    let arrived = bodies.iter().filter(|b| matches!(b, Body::SignalArrived { .. })).count();
    assert_eq!((awaited, arrived), (2, 2), "two waits, each ended by its signal");
    engine.shutdown().await;
}

#[tokio::test]
async fn try_recv_returns_none_on_an_empty_inbox_and_the_next_signal_after() {
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("polls", 1)
        .node_with(
            "poll",
            |_s: Arc<Tally>, ctx: Ctx| async move {
                let first: Option<u64> = ctx.try_recv("x").await?;
                let _: String = ctx.recv("go").await?;
                let second: Option<u64> = ctx.try_recv("x").await?;
                let third: Option<u64> = ctx.try_recv("x").await?;
                Ok(NodeOutput::update((0, format!("{first:?} {second:?} {third:?}"))))
            },
            NodePolicy::default(),
        )
        .edge(START, "poll")
        .edge("poll", END)
        .build()
        .unwrap();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("polls", Tally::default(), StartOptions::id("p1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("p1", "x", 7u64).await.unwrap();
    engine.signal("p1", "go", "now").await.unwrap();
    let out: Tally = t.output().await.unwrap();
    // The first try_recv ran before the signal and its None is recorded: the re-run after the
    // wake sees None there again, and the signal sent meanwhile at the second.
    assert_eq!(out.log, vec!["None Some(7) None".to_string()]);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_signal_to_a_finished_or_unknown_thread_is_refused_and_stores_nothing() {
    let (_d, path) = db();
    let wf = receiver("once", "n", 1);
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("once", Tally::default(), StartOptions::id("f1")).await.unwrap();
    engine.signal("f1", "n", 1u64).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let err = engine.signal("f1", "n", 2u64).await.unwrap_err();
    assert!(
        matches!(&err, cairn::Error::WrongStatus { status: ThreadStatus::Completed, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("no more signals"), "{err}");
    let err = engine.signal("nobody", "n", 2u64).await.unwrap_err();
    assert!(matches!(err, cairn::Error::UnknownThread(_)), "{err}");
    let id = cairn::ThreadId::new("f1").unwrap();
    assert_eq!(
        engine.store().signals(&id, 0, 10).wait().unwrap().len(),
        1,
        "the refused one is absent"
    );
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

#[tokio::test]
async fn two_tasks_of_one_step_receiving_one_name_take_different_signals() {
    let (_d, path) = db();
    let node = |_s: Arc<Tally>, ctx: Ctx| async move {
        let v: u64 = ctx.recv("job").await?;
        Ok(NodeOutput::update((v, String::new())))
    };
    let wf = Workflow::<Tally>::builder("pair", 1)
        .node_with("a", node, NodePolicy::default())
        .node_with("b", node, NodePolicy::default())
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .build()
        .unwrap();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("pair", Tally::default(), StartOptions::id("d1")).await.unwrap();
    engine.signal("d1", "job", 1u64).await.unwrap();
    engine.signal("d1", "job", 10u64).await.unwrap();
    let outcome = t.finished().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Completed);
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.total, 11, "each signal received once: {out:?}");
    engine.shutdown().await;
}

/// Two engines on one PostgreSQL database: a signal sent by one while the other's runner
/// drives the thread (inside a tool call) reaches the node without fencing that runner; a
/// signal from either wakes the thread parked in `recv`, whichever engine parked it.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_from_another_engine_on_postgres_reaches_a_driven_thread_and_wakes_a_parked_one() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("a_signal_from_another_engine") else { return };
    let url = cluster.new_database();
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = Arc::new(std::sync::Mutex::new(Some(entered_tx)));
    let gate = Arc::new(tokio::sync::Notify::new());
    let (e, g) = (entered.clone(), gate.clone());
    let wf = Workflow::<Tally>::builder("pg-signals", 1)
        .node_with(
            "node",
            move |_s: Arc<Tally>, ctx: Ctx| {
                let (entered, gate) = (e.clone(), g.clone());
                async move {
                    // Blocks in a tool until the test lets it go (the other engine sends then).
                    ctx.tool("hold", 0u64, move |_: u64, _| async move {
                        let first = entered.lock().unwrap().take();
                        if let Some(tx) = first {
                            let _ = tx.send(());
                            gate.notified().await;
                        }
                        Ok::<u64, cairn::ToolError>(0)
                    })
                    .await?;
                    let early: Option<u64> = ctx.try_recv("early").await?;
                    let a: u64 = ctx.recv("x").await?;
                    let b: u64 = ctx.recv("x").await?;
                    Ok(NodeOutput::update((0, format!("{early:?} {a} {b}"))))
                }
            },
            NodePolicy::default(),
        )
        .edge(START, "node")
        .edge("node", END)
        .build()
        .unwrap();
    let one = Engine::builder(&url).workflow(&wf).open().await.unwrap();
    let two = Engine::builder(&url).workflow(&wf).open().await.unwrap();
    let t = one.start_json("pg-signals", Tally::default(), StartOptions::id("pg-1")).await.unwrap();
    entered_rx.await.unwrap();
    assert_eq!(two.signal("pg-1", "early", 5u64).await.unwrap(), 1, "to a driven thread");
    gate.notify_one();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    two.signal("pg-1", "x", 10u64).await.unwrap();
    let h = two.thread("pg-1").await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::WaitingInput, "parked for the 2nd");
    one.signal("pg-1", "x", 20u64).await.unwrap();
    let out: Tally = h.output().await.unwrap();
    assert_eq!(out.log, vec!["Some(5) 10 20".to_string()]);
    assert_eq!((one.fenced_runners(), two.fenced_runners()), (0, 0), "nobody was fenced");
    assert!(one.store().verify().unwrap().is_clean());
    one.shutdown().await;
    two.shutdown().await;
}

/// A workflow `outer` whose subgraph node runs `middle`, whose subgraph node runs `receiver`
/// (two signals named `payment`): the receiving thread is a child of a child.
fn nested() -> Workflow<Tally> {
    let up = |c: &Tally| (c.total, c.log.join(";"));
    let middle = Workflow::<Tally>::builder("middle", 1)
        .subgraph("leaf", receiver("leaf", "payment", 2), |s: &Tally| s.clone(), up)
        .edge(START, "leaf")
        .edge("leaf", END)
        .build()
        .unwrap();
    Workflow::<Tally>::builder("outer", 1)
        .subgraph("sub", middle, |s: &Tally| s.clone(), up)
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap()
}

/// `SignalArrived` events in `thread`'s log.
fn arrivals(engine: &Engine, thread: &str) -> usize {
    let id = cairn::ThreadId::new(thread).unwrap();
    let events = engine.store().read_since(&id, cairn::Seq(0), 10_000).wait().unwrap();
    let decode = |e| cairn::blocking::decode(engine.store().as_ref(), e).unwrap().body;
    events.into_iter().filter(|e| matches!(decode(e.clone()), Body::SignalArrived { .. })).count()
}

/// The id of the thread parked in `recv` under `nested()`'s thread `top`.
fn leaf_of(top: &str) -> String {
    format!("{top}/sub@1/leaf@1")
}

/// A sub-workflow's child parked in `recv` (here a child of a child) is woken by a signal sent
/// to it: the top-level thread whose nodes drive it wakes and runs the chain down to it, before
/// and after a restart (recovery), and the signal is received once.
#[tokio::test]
async fn a_signal_to_a_sub_workflow_child_parked_in_recv_wakes_it_through_its_parents() {
    let (_d, path) = db();
    let wf = nested();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("outer", Tally::default(), StartOptions::id("n1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let leaf = leaf_of("n1");
    let status = |id: &str| {
        let id = cairn::ThreadId::new(id).unwrap();
        engine.store().thread(&id).wait().unwrap().map(|r| r.status)
    };
    assert_eq!(status(&leaf), Some(ThreadStatus::WaitingInput), "the leaf waits in recv");
    assert_eq!(engine.signal(&leaf, "payment", 30u64).await.unwrap(), 1);
    // The first signal wakes the chain (the top runs at once); the leaf parks again for the
    // second, and so the chain.
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput, "parks for the 2nd");
    assert_eq!(status(&leaf), Some(ThreadStatus::WaitingInput));
    assert_eq!(arrivals(&engine, &leaf), 1, "the leaf received the first signal");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.thread("n1").await.unwrap();
    engine.signal(&leaf, "payment", 12u64).await.unwrap();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(10), t.finished()).await;
    assert_eq!(outcome.expect("the chain finished").unwrap().status, ThreadStatus::Completed);
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["30,12".to_string()], "each signal received once, in order");
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

/// On PostgreSQL, a signal to a sub-workflow's child parked in `recv` sent by another engine
/// than the one that parked it wakes the chain (the sending engine drives it), and a signal sent
/// while the top thread is driven by the other engine reaches the child when it asks.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_from_another_engine_on_postgres_wakes_a_sub_workflow_child_parked_in_recv() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("a_signal_wakes_a_sub_workflow_child_pg") else { return };
    let url = cluster.new_database();
    let wf = nested();
    let one = Engine::builder(&url).workflow(&wf).open().await.unwrap();
    let two = Engine::builder(&url).workflow(&wf).open().await.unwrap();
    let t = one.start_json("outer", Tally::default(), StartOptions::id("pn1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let leaf = leaf_of("pn1");
    two.signal(&leaf, "payment", 5u64).await.unwrap();
    let h = two.thread("pn1").await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::WaitingInput, "parks for the 2nd");
    assert_eq!(arrivals(&two, &leaf), 1, "the leaf received the first signal");
    one.signal(&leaf, "payment", 7u64).await.unwrap();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(20), h.finished()).await;
    assert_eq!(outcome.expect("the chain finished").unwrap().status, ThreadStatus::Completed);
    let out: Tally = h.output().await.unwrap();
    assert_eq!(out.log, vec!["5,7".to_string()]);
    assert_eq!((one.fenced_runners(), two.fenced_runners()), (0, 0), "nobody was fenced");
    assert!(one.store().verify().unwrap().is_clean());
    one.shutdown().await;
    two.shutdown().await;
}

/// The store dies at each write in turn while a sub-workflow child receives two signals (the
/// sends, the wakes of the chain, the child's receipts); the reopened engine, sent what the
/// child's inbox lacks, finishes the chain: each signal received once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_around_a_child_signal_wake_neither_loses_nor_doubles_it() {
    let secs = std::time::Duration::from_secs(10);
    let wf = nested();
    let leaf = leaf_of("c1");
    let leaf_id = cairn::ThreadId::new(&leaf).unwrap();
    let values = [30u64, 12];
    let run = async |engine: &Engine, _: &()| {
        let t = engine.start_json("outer", Tally::default(), StartOptions::id("c1")).await?;
        for v in values {
            t.wait().await?;
            engine.signal(&leaf, "payment", v).await?;
        }
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &(), crash_after: i64| {
        let t = match engine.thread("c1").await {
            Ok(t) => t,
            Err(_) => {
                engine.start_json("outer", Tally::default(), StartOptions::id("c1")).await.unwrap()
            }
        };
        // Parked once the chain has created the leaf and it waits in recv (or finished).
        let parked = tokio::time::timeout(secs, t.wait()).await;
        assert!(parked.is_ok(), "crash_after {crash_after}: the chain did not park or finish");
        let sent = engine.store().signals(&leaf_id, 0, 10).wait().unwrap().len();
        for v in &values[sent..] {
            engine.signal(&leaf, "payment", *v).await.unwrap();
        }
        let finished = tokio::time::timeout(secs, t.finished()).await;
        let status = finished.unwrap_or_else(|_| {
            let leaf_status = engine.store().thread(&leaf_id).wait().unwrap().map(|r| r.status);
            panic!("crash_after {crash_after}: not finished; the leaf is {leaf_status:?}")
        });
        assert_eq!(status.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, vec!["30,12".to_string()], "crash_after {crash_after}");
        assert!(engine.store().verify().unwrap().is_clean());
    };
    let crashes = every_write(200, || (), |b, _| b.workflow(&wf), run, check).await;
    assert!(crashes >= 10, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY child_signal_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// `wait()` right after a signal that wakes a parked thread never reports Running: the status
/// channel may still show the park the wake left (the store holds Running before the wake is
/// published), and the wait goes on until the thread parks again or ends. An example saw
/// Running here once in CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_after_a_waking_signal_reports_where_the_thread_stops_not_running() {
    const SIGNALS: usize = 200;
    let (_d, path) = db();
    let wf = receiver("many", "n", SIGNALS);
    let engine = open(&path, &[&wf], |b| b.durability(Durability::None)).await;
    let t = engine.start_json("many", Tally::default(), StartOptions::id("m")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    for v in 1..=SIGNALS as u64 {
        engine.signal("m", "n", v).await.unwrap();
        let status = t.wait().await.unwrap().status;
        let want =
            if v == SIGNALS as u64 { ThreadStatus::Completed } else { ThreadStatus::WaitingInput };
        assert_eq!(status, want, "after signal {v}");
    }
    engine.shutdown().await;
}
