//! The engine on PostgreSQL (`Engine::builder("postgresql://...")`), against a real throwaway
//! cluster: the same workflow gives the same result as on redb, through a crash and a reopen;
//! a reopened engine leaves a thread whose lease is still live to its owner (the database may
//! be shared) and takes it over once the lease has expired.

use std::sync::Arc;

use cairn::{Durability, Engine, RecoveryPolicy, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::{Effects, Tally, db, linear};

/// Lease time on a shared database is the database's clock: short here, so the test waits it out.
const LEASE_TTL_MS: u64 = 1_500;

async fn run_to_crash(url: &str, effects: &Effects) {
    let wf = linear(12, effects.clone());
    let engine = Engine::builder(url)
        .durability(Durability::Immediate)
        .lease_ttl_ms(LEASE_TTL_MS)
        .seed(7)
        .workflow(&wf)
        .open()
        .await
        .expect("open on postgres");
    let rx = crate::common::after_steps(&engine, 5);
    engine.start_json("linear", Tally::default(), StartOptions::id("p")).await.unwrap();
    rx.await.unwrap();
    engine.crash().await;
}

#[tokio::test]
async fn a_workflow_survives_a_crash_on_postgres_with_the_result_it_has_on_redb() {
    let Some(cluster) = Cluster::start("a_workflow_survives_a_crash_on_postgres") else { return };
    let url = cluster.new_database();
    let effects = Effects::default();
    run_to_crash(&url, &effects).await;

    // The crashed engine's lease is live: a new engine on a shared database leaves it alone.
    let wf = linear(12, effects.clone());
    let open = || {
        Engine::builder(&url)
            .lease_ttl_ms(LEASE_TTL_MS)
            .poll_ms(100)
            .seed(7)
            .recovery(RecoveryPolicy::Resume)
            .workflow(&wf)
            .open()
    };
    let engine = open().await.unwrap();
    let report = engine.recover().await.unwrap();
    assert!(report.resumed.is_empty(), "a live lease is not taken over: {report:?}");
    assert_eq!(engine.thread("p").await.unwrap().status().await.unwrap(), ThreadStatus::Running);
    // Past the lease's ttl its owner is presumed gone: the engine's poller takes the thread over.
    let out: Tally = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.thread("p").await.unwrap().output(),
    )
    .await
    .expect("taken over once the lease lapsed")
    .unwrap();
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;

    // The same workflow on redb, uninterrupted.
    let (_d, path) = db();
    let reference = Effects::default();
    let wf = linear(12, reference.clone());
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .seed(7)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let expected: Tally = engine
        .start_json("linear", Tally::default(), StartOptions::id("p"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    engine.shutdown().await;
    assert_eq!(out, expected);
    assert_eq!(reference.count(), 12);
    // A tool call in flight at the crash may run again (its result was not recorded); a recorded
    // one never does.
    assert!((12..=13).contains(&effects.count()), "tool bodies ran {} times", effects.count());
}

/// A workflow whose first node signals it was entered and then waits for a gate (or, with
/// `heed`, for its cancellation token, noting that it saw it).
struct Stall {
    wf: cairn::dsl::Workflow<Tally>,
    gate: tokio::sync::watch::Sender<bool>,
    entered: Option<tokio::sync::oneshot::Receiver<()>>,
    saw_cancel: Arc<std::sync::atomic::AtomicBool>,
}

fn stall(heed: bool) -> Stall {
    use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = std::sync::Mutex::new(Some(entered_tx));
    let saw_cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let saw = saw_cancel.clone();
    let wf = Workflow::<Tally>::builder("stall", 1)
        .node("stall", move |_s, ctx: Ctx| {
            let (mut gate, entered) = (gate_rx.clone(), entered.lock().unwrap().take());
            let saw = saw.clone();
            async move {
                if let Some(tx) = entered {
                    let _ = tx.send(());
                }
                tokio::select! {
                    _ = gate.wait_for(|open| *open) => {}
                    () = ctx.cancelled(), if heed => {
                        saw.store(true, std::sync::atomic::Ordering::SeqCst);
                        return Err(cairn::NodeError::fatal("cancelled"));
                    }
                }
                Ok(NodeOutput::update((1, "stall".to_owned())))
            }
        })
        .node("after", |_s, _ctx| async move { Ok(NodeOutput::update((1, "after".to_owned()))) })
        .edge(START, "stall")
        .edge("stall", "after")
        .edge("after", END)
        .build()
        .unwrap();
    Stall { wf, gate, entered: Some(entered_rx), saw_cancel }
}

/// The bodies of a thread's log.
async fn bodies(engine: &Engine, thread: &str) -> Vec<cairn::event::Body> {
    let mut stream = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(recorded) = stream.try_next().await.unwrap() {
        out.push(recorded.body);
    }
    out
}

/// Two engines on one database: one drives a thread, the other cancels it. The cancel reaches
/// the driving engine (a message through the database): its running node sees its
/// cancellation token at once, and its own runner records the end with the reason. Nobody is
/// fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_from_another_engine_reaches_the_node_that_runs_the_thread() {
    let Some(cluster) = Cluster::start("a_cancel_from_another_engine_reaches") else { return };
    let url = cluster.new_database();
    let mut s = stall(true);
    let driver = Engine::builder(&url).workflow(&s.wf).open().await.unwrap();
    driver.start_json("stall", Tally::default(), StartOptions::id("s")).await.unwrap();
    s.entered.take().unwrap().await.unwrap();
    // Another process's engine, as `cairn cancel` opens one: it parks what it finds.
    let other =
        Engine::builder(&url).recovery(RecoveryPolicy::Park).workflow(&s.wf).open().await.unwrap();
    let started = std::time::Instant::now();
    other.cancel("s", "stop it").await.unwrap();
    // Well under the lease (LEASE_TTL_MS, 60 s), which a cancel that missed the driver would
    // wait out; not a latency bound (a loaded CI machine once took over 5 s).
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(s.saw_cancel.load(std::sync::atomic::Ordering::SeqCst), "the node saw its token");
    assert_eq!(other.thread("s").await.unwrap().status().await.unwrap(), ThreadStatus::Cancelled);
    let ended = bodies(&other, "s").await.into_iter().any(|b| {
        matches!(b, cairn::event::Body::StatusChanged { to: ThreadStatus::Cancelled, ref reason, .. }
            if reason == "stop it")
    });
    assert!(ended, "the end is recorded with its reason");
    let id: cairn::ThreadId = "s".parse().unwrap();
    cairn_testkit::runner_released(&driver, &id).await;
    assert_eq!(driver.fenced_runners(), 0, "the driver's runner ended the thread itself");
    assert!(other.store().verify().unwrap().is_clean());
    driver.shutdown().await;
    other.shutdown().await;
}

/// Two engines on one database: one drives a thread, the other pauses it. The driving
/// engine's runner pauses it at its step boundary: the step it was running is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_from_another_engine_is_taken_by_the_runner_at_its_step_boundary() {
    let Some(cluster) = Cluster::start("a_pause_from_another_engine") else { return };
    let url = cluster.new_database();
    let mut s = stall(false);
    let driver = Engine::builder(&url).workflow(&s.wf).open().await.unwrap();
    driver.start_json("stall", Tally::default(), StartOptions::id("s")).await.unwrap();
    s.entered.take().unwrap().await.unwrap();
    let other = Arc::new(
        Engine::builder(&url).recovery(RecoveryPolicy::Park).workflow(&s.wf).open().await.unwrap(),
    );
    let pausing = tokio::spawn({
        let other = other.clone();
        async move { other.pause("s").await }
    });
    // The pause waits for the step boundary; the step ends when the gate opens.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!pausing.is_finished(), "a pause waits for the running step");
    s.gate.send_replace(true);
    pausing.await.unwrap().unwrap();
    assert_eq!(other.thread("s").await.unwrap().status().await.unwrap(), ThreadStatus::Paused);
    let kept = bodies(&other, "s").await.into_iter().any(
        |b| matches!(b, cairn::event::Body::NodeCompleted { ref task, .. } if &*task.node == "stall"),
    );
    assert!(kept, "the step that ran when the pause came is kept");
    let id: cairn::ThreadId = "s".parse().unwrap();
    cairn_testkit::runner_released(&driver, &id).await;
    assert_eq!(driver.fenced_runners(), 0, "the driver's runner paused the thread itself");
    other.resume("s").await.unwrap();
    let done = other.thread("s").await.unwrap().finished().await.unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    driver.shutdown().await;
    Arc::try_unwrap(other).ok().expect("one owner").shutdown().await;
}

/// Two engines on one database: one drives a thread whose node ignores its cancellation token
/// (and whose grace is long), the other cancels it. The driver does not let go within the
/// canceller's wait, so the canceller writes the end itself as a guarded change of the thread;
/// the driver's runner, stalled in its node meanwhile, is fenced: its next batch is refused,
/// nothing it computed after the cancel reaches the log, and the thread stays Cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_the_driver_does_not_act_on_is_written_by_the_canceller_and_fences_the_driver() {
    let Some(cluster) = Cluster::start("a_cancel_from_another_engine_fences") else { return };
    let url = cluster.new_database();
    let mut s = stall(false);
    let driver =
        Engine::builder(&url).cancel_grace_ms(60_000).workflow(&s.wf).open().await.unwrap();
    driver.start_json("stall", Tally::default(), StartOptions::id("s")).await.unwrap();
    s.entered.take().unwrap().await.unwrap();
    let other = Engine::builder(&url)
        .recovery(RecoveryPolicy::Park)
        .cancel_grace_ms(200)
        .workflow(&s.wf)
        .open()
        .await
        .unwrap();
    other.cancel("s", "stop it").await.unwrap();
    assert_eq!(other.thread("s").await.unwrap().status().await.unwrap(), ThreadStatus::Cancelled);
    let id: cairn::ThreadId = "s".parse().unwrap();
    let before = other.store().read_since(&id, cairn::Seq(0), 100).wait().unwrap().len();
    s.gate.send_replace(true);
    // The driver's runner finishes its node and tries to write the step: refused.
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        cairn_testkit::runner_released(&driver, &id),
    )
    .await
    .expect("the fenced runner stops");
    let after = other.store().read_since(&id, cairn::Seq(0), 100).wait().unwrap();
    assert_eq!(after.len(), before, "the fenced runner wrote nothing after the cancel");
    assert_eq!(other.thread("s").await.unwrap().status().await.unwrap(), ThreadStatus::Cancelled);
    assert!(other.store().verify().unwrap().is_clean());
    assert_eq!(driver.fenced_runners(), 1, "the driver's runner was fenced off");
    driver.shutdown().await;
    other.shutdown().await;
}

/// Two engines on one database: a thread started on a busy engine (its only permit held) is
/// taken over by the other once the start's grace has passed, and the handle on the first engine,
/// whose own runner never drove it, sees it finish (waiters follow other processes' commits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_started_on_a_busy_engine_is_finished_by_another_and_its_waiter_sees_it() {
    use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};

    let Some(cluster) = Cluster::start("a_thread_started_on_a_busy_engine") else { return };
    let url = cluster.new_database();
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let busy = Workflow::<Tally>::builder("busy", 1)
        .node("hold", move |_s, _ctx: Ctx| {
            let mut gate = gate_rx.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok(NodeOutput::update((1, "hold".to_owned())))
            }
        })
        .edge(START, "hold")
        .edge("hold", END)
        .build()
        .unwrap();
    let wf = linear(3, Effects::default());
    let open = |concurrency| {
        Engine::builder(&url)
            .concurrency(concurrency)
            .poll_ms(50)
            .workflow(&busy)
            .workflow(&wf)
            .open()
    };
    let first = open(1).await.unwrap();
    let second = open(4).await.unwrap();
    first.start_json("busy", Tally::default(), StartOptions::id("hold")).await.unwrap();
    let queued =
        first.start_json("linear", Tally::default(), StartOptions::id("queued")).await.unwrap();
    let done = tokio::time::timeout(std::time::Duration::from_secs(20), queued.finished())
        .await
        .expect("the waiter on the first engine hears the end")
        .unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    gate.send_replace(true);
    first.thread("hold").await.unwrap().finished().await.unwrap();
    assert!(first.store().verify().unwrap().is_clean());
    first.shutdown().await;
    second.shutdown().await;
}

/// On a shared database too, `start` hands the runner its creation's context and the runner
/// publishes how the thread ended: the start, the run and the wait read no event back (before,
/// on PostgreSQL, each thread read its log, its checkpoints and its record again), and a second
/// engine's start of the same id finds the thread and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_thread_runs_from_its_creation_without_reading_it_back_on_postgres() {
    use cairn::storage::{PgStore, Store};
    use cairn_testkit::RecordingStore;
    let Some(cluster) = Cluster::start("a_started_thread_on_postgres") else { return };
    let url = cluster.new_database();
    let pg = tokio::task::spawn_blocking(move || PgStore::connect(&url, Durability::Immediate))
        .await
        .unwrap()
        .unwrap();
    let store = Arc::new(RecordingStore::new(Arc::new(pg)));
    let fx = Effects::default();
    let wf = linear(3, fx.clone());
    let as_dyn: Arc<dyn Store> = store.clone();
    let engine = Engine::with_store(as_dyn).workflow(&wf).open().await.unwrap();
    let before = store.events_read();
    let t = engine.start_json("linear", Tally::default(), StartOptions::id("t1")).await.unwrap();
    let done = t.finished().await.unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    assert_eq!(store.events_read() - before, 0, "the start, the run and the wait read no event");
    let stored = t.outcome().await.unwrap();
    assert_eq!((done.status, &done.output), (stored.status, &stored.output));
    assert_eq!(fx.count(), 3);
    // Started again: the thread exists, nothing runs again.
    let again =
        engine.start_json("linear", Tally::default(), StartOptions::id("t1")).await.unwrap();
    assert_eq!(again.finished().await.unwrap().output, done.output);
    assert_eq!(fx.count(), 3);
    engine.shutdown().await;
}
