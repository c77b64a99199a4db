//! Deleting threads: by hand (`Engine::delete`), by the retention policy on the engine's
//! manual clock, and awaiting a thread's result by id (`Engine::result`, `await_result`), on a
//! file and, across engines, on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, NodePolicy, Workflow};
use cairn::storage::{DeleteOptions, Error as StoreError};
use cairn::{Durability, END, Engine, RetentionPolicy, START, StartOptions, ThreadStatus};

use crate::common::{Effects, Tally, db, linear};
use crate::telemetry_recorder::TestRecorder;
use cairn_tools::serve::Serve as _;

const PERIOD_MS: u64 = 10_000;
const EVERY_MS: u64 = 1_000;

fn asks_input() -> Workflow<Tally> {
    Workflow::<Tally>::builder("ask", 1)
        .node_with(
            "only",
            |_s: Arc<Tally>, ctx: Ctx| async move {
                let n: u64 = ctx.interrupt(serde_json::json!({"question": "how many?"}))?;
                Ok(NodeOutput::update((n, "answered".into())))
            },
            NodePolicy::default(),
        )
        .edge(START, "only")
        .edge("only", END)
        .build()
        .unwrap()
}

async fn open(path: &std::path::Path, clock: &ManualClock, wfs: &[&Workflow<Tally>]) -> Engine {
    open_recorded(path, clock, wfs, Arc::default()).await
}

async fn open_recorded(
    path: &std::path::Path,
    clock: &ManualClock,
    wfs: &[&Workflow<Tally>],
    recorder: Arc<TestRecorder>,
) -> Engine {
    let policy = RetentionPolicy::after_ms(PERIOD_MS).failed_for_ms(None).every_ms(EVERY_MS);
    let mut b = Engine::builder(path)
        .metrics_recorder(recorder)
        .durability(Durability::None)
        .seed(5)
        .clock(Arc::new(clock.clone()))
        .retention(policy);
    for wf in wfs {
        b = b.workflow(wf);
    }
    b.open().await.unwrap()
}

/// Advances the clock by `ms` and waits for the background pass it wakes.
async fn pass(engine: &Engine, clock: &ManualClock, ms: u64) -> cairn::RetentionReport {
    let mut reports = engine.retention_reports();
    reports.borrow_and_update();
    clock.advance_ms(ms);
    tokio::time::timeout(Duration::from_secs(10), reports.changed())
        .await
        .expect("a pass runs once the clock reaches it")
        .unwrap();
    *reports.borrow()
}

/// A completed thread outlives its period by at most one pass, is deleted whole by the
/// engine, and its id then starts a new thread; until then a start of the id returns it.
/// Unfinished threads and (under this policy) failed ones are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_policy_deletes_finished_threads_after_their_period() {
    let (_d, path) = db();
    let clock = ManualClock::new(1_000_000);
    let effects = Effects::default();
    let wf = linear(3, effects.clone());
    let ask = asks_input();
    let recorder = Arc::new(TestRecorder::default());
    let engine = open_recorded(&path, &clock, &[&wf, &ask], recorder.clone()).await;
    let done =
        engine.start_json("linear", Tally::default(), StartOptions::id("done")).await.unwrap();
    assert_eq!(done.finished().await.unwrap().status, ThreadStatus::Completed);
    let waiting =
        engine.start_json("ask", Tally::default(), StartOptions::id("waiting")).await.unwrap();
    assert_eq!(waiting.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let cancelled =
        engine.start_json("ask", Tally::default(), StartOptions::id("gone")).await.unwrap();
    cancelled.wait().await.unwrap();
    engine.cancel("gone", "not needed").await.unwrap();
    assert_eq!(effects.count(), 3);

    // Younger than the period: kept, and a start of its id is the same thread (no new run).
    let first = pass(&engine, &clock, EVERY_MS).await;
    assert_eq!((first.deleted, first.scanned), (0, 2), "two finished threads looked at");
    let again =
        engine.start_json("linear", Tally::default(), StartOptions::id("done")).await.unwrap();
    assert_eq!(again.finished().await.unwrap().output.unwrap()["total"], 6);
    assert_eq!(effects.count(), 3, "exists: keep");

    // Past it: both finished threads are deleted whole; the parked one stays.
    let second = pass(&engine, &clock, PERIOD_MS).await;
    assert_eq!(second.deleted, 2, "{second:?}");
    assert_eq!(recorder.counter("cairn_threads_deleted_total{by=retention}"), 2);
    assert_eq!(recorder.counter("cairn_threads_deleted_total{by=hand}"), 0);
    for id in ["done", "gone"] {
        assert!(matches!(engine.thread(id).await, Err(cairn::Error::UnknownThread(_))), "{id}");
        assert!(matches!(engine.result(id).await, Err(cairn::Error::UnknownThread(_))));
    }
    assert_eq!(
        engine.thread("waiting").await.unwrap().status().await.unwrap(),
        ThreadStatus::WaitingInput
    );
    let report = engine.store().verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);

    // The id is free: a start runs a new thread from seq 1.
    let reborn =
        engine.start_json("linear", Tally::default(), StartOptions::id("done")).await.unwrap();
    assert_eq!(reborn.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(effects.count(), 6, "a new run");
    let first_seq = engine.store().read_since(reborn.id(), cairn::Seq(0), 1).wait().unwrap();
    assert_eq!(first_seq[0].bookmark.seq, cairn::Seq(1));
    engine.shutdown().await;
}

/// `Engine::delete` refuses an unfinished thread unless forced, and a forced delete of a
/// parked thread leaves nothing behind.
#[tokio::test]
async fn delete_by_hand_refuses_an_unfinished_thread_unless_forced() {
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    let ask = asks_input();
    let engine = open(&path, &clock, &[&ask]).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("p")).await.unwrap();
    t.wait().await.unwrap();
    let refused = engine.delete("p", DeleteOptions::default()).await.unwrap_err();
    assert!(matches!(refused, cairn::Error::Storage(StoreError::Unfinished { .. })), "{refused}");
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput, "nothing removed");
    let deleted = engine.delete("p", DeleteOptions { force: true }).await.unwrap().unwrap();
    assert_eq!(deleted.status, ThreadStatus::WaitingInput);
    assert!(deleted.events > 0);
    assert!(engine.delete("p", DeleteOptions::default()).await.unwrap().is_none());
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

/// `result` is `None` while the thread waits; `await_result` times out, then returns the
/// outcome once input lets it finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_awaited_by_id_until_the_thread_finishes() {
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    let ask = asks_input();
    let engine = open(&path, &clock, &[&ask]).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("q")).await.unwrap();
    t.wait().await.unwrap();
    assert!(engine.result("q").await.unwrap().is_none());
    let waited = engine.await_result("q", Duration::from_millis(50)).await.unwrap();
    assert!(waited.is_none(), "not finished within the wait");
    let awaiting = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.await_result("q", Duration::from_secs(30)).await })
    };
    engine.send_input("q", 7).await.unwrap();
    let outcome = awaiting.await.unwrap().unwrap().expect("finished");
    assert_eq!(outcome.status, ThreadStatus::Completed);
    assert_eq!(outcome.output.unwrap()["total"], 7);
    assert!(matches!(engine.result("nobody").await, Err(cairn::Error::UnknownThread(_))));
    engine.shutdown().await;
}

/// On PostgreSQL, an engine in another "process" (its own store and connection) awaits a
/// thread another engine drives: the wait follows the other engine's commits. Deleting it
/// there frees the id for the first.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_awaited_across_engines_on_postgres_and_a_delete_frees_the_id() {
    use cairn::RecoveryPolicy;
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("a_result_is_awaited_across_engines") else { return };
    let url = cluster.new_database();
    let ask = asks_input();
    let driver = Engine::builder(&url).workflow(&ask).open().await.unwrap();
    let t = driver.start_json("ask", Tally::default(), StartOptions::id("x")).await.unwrap();
    t.wait().await.unwrap();
    let other =
        Engine::builder(&url).recovery(RecoveryPolicy::Park).workflow(&ask).open().await.unwrap();
    assert!(other.result("x").await.unwrap().is_none());
    let awaiting = {
        let other = other.clone();
        tokio::spawn(async move { other.await_result("x", Duration::from_secs(30)).await })
    };
    driver.send_input("x", 5).await.unwrap();
    let outcome = awaiting.await.unwrap().unwrap().expect("finished, seen from the other engine");
    assert_eq!(
        (outcome.status, outcome.output.unwrap()["total"].as_u64()),
        (ThreadStatus::Completed, Some(5))
    );
    let deleted = other.delete("x", DeleteOptions::default()).await.unwrap().unwrap();
    assert_eq!(deleted.status, ThreadStatus::Completed);
    assert!(matches!(driver.result("x").await, Err(cairn::Error::UnknownThread(_))));
    let again = driver.start_json("ask", Tally::default(), StartOptions::id("x")).await.unwrap();
    assert_eq!(again.wait().await.unwrap().status, ThreadStatus::WaitingInput, "a new thread");
    assert!(other.store().verify().unwrap().is_clean());
    driver.shutdown().await;
    other.shutdown().await;
}

/// A forced delete of a thread whose node is running: the runner's next batch is fenced (its
/// lease and last-seq guards find no thread), so nothing of the thread comes back, and its id
/// starts a new thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_delete_fences_the_runner_and_nothing_of_the_thread_comes_back() {
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = std::sync::Mutex::new(Some(entered_tx));
    let wf = Workflow::<Tally>::builder("stall", 1)
        .node("stall", move |_s, _ctx: Ctx| {
            let (mut gate, entered) = (gate_rx.clone(), entered.lock().unwrap().take());
            async move {
                if let Some(tx) = entered {
                    let _ = tx.send(());
                }
                let _ = gate.wait_for(|open| *open).await;
                Ok(NodeOutput::update((1, "stall".to_owned())))
            }
        })
        .node("after", |_s, _ctx| async move { Ok(NodeOutput::update((1, "after".to_owned()))) })
        .edge(START, "stall")
        .edge("stall", "after")
        .edge("after", END)
        .build()
        .unwrap();
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    let engine = open(&path, &clock, &[&wf]).await;
    engine.start_json("stall", Tally::default(), StartOptions::id("s")).await.unwrap();
    entered_rx.await.unwrap();
    let deleted = engine.delete("s", DeleteOptions { force: true }).await.unwrap().unwrap();
    assert_eq!(deleted.status, ThreadStatus::Running);
    gate.send_replace(true);
    let id: cairn::ThreadId = "s".parse().unwrap();
    cairn_testkit::runner_released(&engine, &id).await;
    assert!(engine.store().thread(&id).wait().unwrap().is_none(), "no record came back");
    assert!(engine.store().read_since(&id, cairn::Seq(0), 10).wait().is_err());
    let report = engine.store().verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    gate.send_replace(true);
    let again = engine.start_json("stall", Tally::default(), StartOptions::id("s")).await.unwrap();
    assert_eq!(again.finished().await.unwrap().status, ThreadStatus::Completed);
    engine.shutdown().await;
}

/// A forced delete of a thread whose node never returns (it ignores its cancellation token):
/// the runner's node is cancelled too, so after the cancellation grace period the runner lets
/// go and a graceful shutdown does not wait forever for a thread that no longer exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_delete_cancels_the_runners_node_so_shutdown_does_not_wait_for_it() {
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = std::sync::Mutex::new(Some(entered_tx));
    let wf = Workflow::<Tally>::builder("hang", 1)
        .node("hang", move |_s, _ctx: Ctx| {
            let entered = entered.lock().unwrap().take();
            async move {
                if let Some(tx) = entered {
                    let _ = tx.send(());
                }
                std::future::pending::<()>().await;
                Ok(NodeOutput::update((1, "never".to_owned())))
            }
        })
        .edge(START, "hang")
        .edge("hang", END)
        .build()
        .unwrap();
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    let engine = open(&path, &clock, &[&wf]).await;
    engine.start_json("hang", Tally::default(), StartOptions::id("h")).await.unwrap();
    entered_rx.await.unwrap();
    let deleted = engine.delete("h", DeleteOptions { force: true }).await.unwrap().unwrap();
    assert_eq!(deleted.status, ThreadStatus::Running);
    let id: cairn::ThreadId = "h".parse().unwrap();
    // The node had its grace period (5 s of the engine's clock) to stop on its own.
    let ticking = {
        let clock = clock.clone();
        tokio::spawn(async move {
            loop {
                clock.advance_ms(1_000);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        cairn_testkit::runner_released(&engine, &id),
    )
    .await
    .expect("the deleted thread's runner let go");
    tokio::time::timeout(std::time::Duration::from_secs(10), engine.shutdown())
        .await
        .expect("shutdown does not wait for the deleted thread's node");
    ticking.abort();
    drop(engine);
    let reopened = open(&path, &clock, &[&wf]).await;
    assert!(
        reopened.store().thread(&id).wait().unwrap().is_none(),
        "nothing of the thread came back"
    );
    assert!(reopened.store().verify().unwrap().is_clean());
    reopened.shutdown().await;
}

/// A finished sub-workflow child is kept while its parent is unfinished (the parent's node may
/// still read it), and deleted with the parent's own period once the parent ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_thread_is_kept_while_its_parent_is_unfinished() {
    let child = linear(1, Effects::default());
    let parent = Workflow::<Tally>::builder("parent", 1)
        .subgraph("sub", child, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".to_owned()))
        .node_with(
            "ask",
            |_s: Arc<Tally>, ctx: Ctx| async move {
                let n: u64 = ctx.interrupt("more?")?;
                Ok(NodeOutput::update((n, "asked".into())))
            },
            NodePolicy::default(),
        )
        .edge(START, "sub")
        .edge("sub", "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    let engine = open(&path, &clock, &[&parent]).await;
    let p = engine.start_json("parent", Tally::default(), StartOptions::id("par")).await.unwrap();
    assert_eq!(p.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let filter = cairn::storage::ThreadFilter {
        status: Some(ThreadStatus::Completed),
        ..Default::default()
    };
    let page = cairn::storage::Page { limit: 10, offset: 0 };
    let children = engine.store().list_threads(&filter, page).wait().unwrap();
    assert_eq!(children.len(), 1, "the child completed");
    assert_eq!(children[0].labels.get("parent").map(String::as_str), Some("par"));
    let kept = pass(&engine, &clock, PERIOD_MS + EVERY_MS).await;
    assert_eq!((kept.deleted, kept.kept_for_parent), (0, 1), "{kept:?}");
    engine.send_input("par", 1).await.unwrap();
    assert_eq!(p.finished().await.unwrap().status, ThreadStatus::Completed);
    let gone = pass(&engine, &clock, PERIOD_MS + EVERY_MS).await;
    assert_eq!(gone.deleted, 2, "{gone:?}");
    assert!(engine.store().list_threads(&Default::default(), page).wait().unwrap().is_empty());
    engine.shutdown().await;
}

/// Ages are the time since a thread ended, however early the clock: on a clock that starts at
/// 0, a thread that just ended is not past a period yet (a pass called by hand, then the
/// background one once the period has passed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_that_just_ended_is_kept_on_a_clock_that_starts_at_zero() {
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    let wf = linear(1, Effects::default());
    let engine = open(&path, &clock, &[&wf]).await;
    let t = engine.start_json("linear", Tally::default(), StartOptions::id("z")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let report = engine.retention_pass().await.unwrap();
    assert_eq!((report.scanned, report.deleted), (1, 0), "{report:?}");
    assert_eq!(pass(&engine, &clock, PERIOD_MS).await.deleted, 1, "the background pass");
    engine.shutdown().await;
}

/// The endpoint's result route (a long poll: unfinished within the wait, then the outcome once
/// input lets the thread finish; a bad `wait_ms` and an unknown thread named) and its delete
/// route (the token required, an unfinished thread refused without `force`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_long_polls_a_result_and_deletes_with_the_token() {
    let (_d, path) = db();
    let ask = asks_input();
    let (engine, server) = Engine::builder(&path)
        .workflow(&ask)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    for id in ["w", "p"] {
        let t = engine.start_json("ask", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    let base = format!("http://{}", server.addr());
    let call = |method: &'static str, path: String, token: Option<String>| {
        let url = format!("{base}{path}");
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent =
                ureq::Agent::config_builder().http_status_as_error(false).build().into();
            let mut response = match (method, token) {
                ("GET", _) => agent.get(&url).call().unwrap(),
                (_, Some(t)) => agent
                    .delete(&url)
                    .header("authorization", &format!("Bearer {t}"))
                    .call()
                    .unwrap(),
                (_, None) => agent.delete(&url).call().unwrap(),
            };
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap();
            (status, serde_json::from_str::<serde_json::Value>(&text).unwrap())
        })
    };
    let token = Some(server.token().to_owned());
    let (status, now) = call("GET", "/api/threads/w/result".into(), None).await.unwrap();
    assert_eq!(
        (status, &now["finished"], &now["status"]),
        (200, &false.into(), &"waiting_input".into())
    );
    let (status, waited) =
        call("GET", "/api/threads/w/result?wait_ms=50".into(), None).await.unwrap();
    assert_eq!((status, &waited["finished"]), (200, &false.into()));
    let (status, bad) =
        call("GET", "/api/threads/w/result?wait_ms=soon".into(), None).await.unwrap();
    assert_eq!((status, &bad["field"]), (400, &"wait_ms".into()));
    let (status, _) = call("GET", "/api/threads/nobody/result".into(), None).await.unwrap();
    assert_eq!(status, 404);
    let polling = call("GET", "/api/threads/w/result?wait_ms=30000".into(), None);
    engine.send_input("w", 3).await.unwrap();
    let (status, done) = polling.await.unwrap();
    assert_eq!(
        (status, &done["finished"], &done["status"]),
        (200, &true.into(), &"completed".into())
    );
    assert_eq!(done["output"]["total"], 3);

    let (status, _) = call("DELETE", "/api/threads/w".into(), None).await.unwrap();
    assert_eq!(status, 401, "a delete needs the token");
    let (status, refused) = call("DELETE", "/api/threads/p".into(), token.clone()).await.unwrap();
    assert_eq!((status, &refused["field"]), (409, &"force".into()), "{refused}");
    let (status, forced) =
        call("DELETE", "/api/threads/p?force=true".into(), token.clone()).await.unwrap();
    assert_eq!((status, &forced["status"]), (200, &"waiting_input".into()), "{forced}");
    let (status, deleted) = call("DELETE", "/api/threads/w".into(), token.clone()).await.unwrap();
    assert_eq!((status, &deleted["deleted"]), (200, &true.into()), "{deleted}");
    let (status, _) = call("DELETE", "/api/threads/w".into(), token).await.unwrap();
    assert_eq!(status, 404);
    assert!(engine.store().verify().unwrap().is_clean());
    server.shutdown().await;
    engine.shutdown().await;
}
