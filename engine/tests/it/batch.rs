//! Batch operations by filter (`Engine::batch`): a batch applies its operation to every thread
//! the filter matches and reports its progress; it is idempotent on its id; a crash at any write
//! of a batch over 20 threads, the batch continued on the reopened engine, gives each matching
//! thread the operation exactly once; a migrate batch that succeeds, and the filter's version
//! and creation time parts.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::{Page, ThreadFilter};
use cairn::{BatchFilter, BatchOp, END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};
use crate::crash::Dying;

/// Waits for a `go` signal, then notes its value (v1).
pub(crate) fn waiter() -> Workflow<Tally> {
    waiter_v(1)
}

/// Starts `n` waiters `w-00`.. (labelled `team=a` for the even ones) and waits until each has
/// parked for its signal.
pub(crate) async fn waiting(engine: &Engine, n: usize) {
    for i in 0..n {
        let team = if i % 2 == 0 { "a" } else { "b" };
        let options = StartOptions::id(format!("w-{i:02}")).label("team", team);
        engine.start_json("waiter", Tally::default(), options).await.unwrap();
    }
    for i in 0..n {
        let id = cairn::ThreadId::new(format!("w-{i:02}")).unwrap();
        let parked = async {
            while engine.store().thread(&id).await.unwrap().unwrap().status
                != ThreadStatus::WaitingInput
                || engine.is_driven(&id)
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), parked).await.expect("parked");
    }
}

/// The signals named `go` in `thread`'s inbox.
fn gone(engine: &Engine, thread: &str) -> usize {
    let id = cairn::ThreadId::new(thread).unwrap();
    let inbox = engine.store().signals(&id, 0, 100).wait().unwrap();
    inbox.iter().filter(|s| s.name == "go").count()
}

pub(crate) async fn finished(engine: &Engine, id: &str) {
    let thread = engine.thread(id).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(20), thread.finished()).await;
    assert_eq!(done.expect("finished in time").unwrap().status, ThreadStatus::Completed, "{id}");
}

fn signal_go() -> BatchOp {
    BatchOp::Signal { name: "go".into(), value: serde_json::json!(1) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_applies_its_operation_to_each_matching_thread_and_reports_progress() {
    let (_d, path) = db();
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b).await;
    waiting(&engine, 6).await;
    let team_a = BatchFilter {
        workflow: Some("waiter".into()),
        labels: vec![("team".into(), "a".into())],
        ..BatchFilter::default()
    };
    assert_eq!(engine.batch_count(&team_a).await.unwrap(), 3, "a dry run counts");
    let batch = engine.batch_as("b1", signal_go(), team_a.clone()).await.unwrap();
    assert_eq!(batch.state.total, 3);
    finished(&engine, "b1").await;
    let info = engine.batch_info("b1").await.unwrap();
    assert_eq!((info.state.done, info.state.applied, info.state.skipped), (3, 3, 0), "{info:?}");
    assert!(info.state.finished);
    for i in 0..6 {
        let expected = usize::from(i % 2 == 0);
        assert_eq!(gone(&engine, &format!("w-{i:02}")), expected, "w-{i:02}");
    }
    // The same id again answers the batch as it stands: nothing applied twice.
    let again = engine.batch_as("b1", signal_go(), team_a).await.unwrap();
    assert_eq!(again.state.done, 3);
    assert_eq!(gone(&engine, "w-00"), 1);
    // Cancel the rest (the waiting ones); a second cancel batch skips them, ended.
    let waiting_filter =
        BatchFilter { status: Some(ThreadStatus::WaitingInput), ..BatchFilter::default() };
    engine
        .batch_as("b2", BatchOp::Cancel { reason: "batch".into() }, waiting_filter)
        .await
        .unwrap();
    finished(&engine, "b2").await;
    let b2 = engine.batch_info("b2").await.unwrap();
    assert_eq!((b2.state.total, b2.state.applied), (3, 3), "{b2:?}");
    let status = engine.thread("w-01").await.unwrap().status().await.unwrap();
    assert_eq!(status, ThreadStatus::Cancelled);
    let everyone = BatchFilter { workflow: Some("waiter".into()), ..BatchFilter::default() };
    engine.batch_as("b3", BatchOp::Cancel { reason: "again".into() }, everyone).await.unwrap();
    finished(&engine, "b3").await;
    let b3 = engine.batch_info("b3").await.unwrap();
    assert_eq!((b3.state.applied, b3.state.skipped), (0, 6), "ended threads are skipped: {b3:?}");
    // Bad input: a signal without a name, an id that is no batch.
    let bad =
        engine.batch(BatchOp::Signal { name: String::new(), value: 1.into() }, b3.state.filter);
    assert!(matches!(bad.await, Err(cairn::Error::Invalid(_))));
    assert!(matches!(engine.batch_info("w-00").await, Err(cairn::Error::Invalid(_))));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_pauses_then_resumes_by_label_and_a_migration_needs_the_workflow() {
    let (_d, path) = db();
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b).await;
    waiting(&engine, 4).await;
    let team_b =
        BatchFilter { labels: vec![("team".into(), "b".into())], ..BatchFilter::default() };
    let status = async |id: &str| engine.thread(id).await.unwrap().status().await.unwrap();
    engine.batch_as("p1", BatchOp::Pause, team_b.clone()).await.unwrap();
    finished(&engine, "p1").await;
    assert_eq!(engine.batch_info("p1").await.unwrap().state.applied, 2);
    assert_eq!(
        (status("w-01").await, status("w-03").await),
        (ThreadStatus::Paused, ThreadStatus::Paused)
    );
    assert_eq!(status("w-00").await, ThreadStatus::WaitingInput, "team a untouched");
    let paused = BatchFilter { status: Some(ThreadStatus::Paused), ..team_b };
    engine.batch_as("r1", BatchOp::Resume, paused).await.unwrap();
    finished(&engine, "r1").await;
    assert_eq!(engine.batch_info("r1").await.unwrap().state.applied, 2);
    assert_eq!(status("w-01").await, ThreadStatus::WaitingInput, "back in its wait");
    // A batch is the engine's own thread: a filter without a workflow leaves it out.
    let all = engine.batch_count(&BatchFilter::default()).await.unwrap();
    assert_eq!(all, 4, "the waiters, not the batches");
    let migrate = engine.batch(BatchOp::Migrate { to_version: 2 }, BatchFilter::default()).await;
    assert!(matches!(migrate, Err(cairn::Error::Invalid(_))), "{migrate:?}");
    engine.shutdown().await;
}

/// The store dies at each write in turn around a batch that signals 20 waiting threads; the
/// reopened engine continues it (the caller asks for it again by its id): each thread gets the
/// signal exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_batch_gives_each_matching_thread_the_operation_once() {
    const THREADS: usize = 20;
    let wf = waiter();
    let filter = || BatchFilter { workflow: Some("waiter".into()), ..BatchFilter::default() };
    let mut crashes = 0;
    for crash_after in 1..2_000 {
        let (_d, path) = db();
        let engine = open(&path, &[&wf], |b| b).await;
        waiting(&engine, THREADS).await;
        engine.shutdown().await;
        drop(engine);
        let dying = Dying::over_file(&path, Some(crash_after));
        let engine = Engine::with_store(dying.clone()).workflow(&wf).open().await.unwrap();
        let run = async {
            engine.batch_as("b1", signal_go(), filter()).await?;
            engine.thread("b1").await?.finished().await.map(drop)
        };
        let died = dying.crash_during(&engine, Duration::from_secs(20), run).await;
        drop(engine);
        if !died {
            break;
        }
        crashes += 1;
        drop(dying);
        let engine = open(&path, &[&wf], |b| b).await;
        // The caller saw a failure (or nothing): it asks for the batch again.
        let asked = engine.batch_as("b1", signal_go(), filter()).await;
        asked.unwrap_or_else(|e| panic!("crash_after {crash_after}: {e}"));
        finished(&engine, "b1").await;
        let info = engine.batch_info("b1").await.unwrap();
        assert_eq!(info.state.applied, THREADS as u64, "crash_after {crash_after}: {info:?}");
        for i in 0..THREADS {
            let id = format!("w-{i:02}");
            assert_eq!(gone(&engine, &id), 1, "crash_after {crash_after}: {id} signalled once");
            finished(&engine, &id).await;
        }
        let listed = engine.store().list_threads(&ThreadFilter::default(), Page::default());
        assert_eq!(listed.await.unwrap().len(), THREADS + 1, "crash_after {crash_after}");
        engine.shutdown().await;
    }
    assert!(crashes >= 40, "the crash points covered the batch: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY batch_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// `waiter` at `version` (v2: the same graph, another fingerprint).
pub(crate) fn waiter_v(version: u32) -> Workflow<Tally> {
    Workflow::<Tally>::builder("waiter", version)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((n, format!("go {n}"))))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

/// Starts waiter v1 threads `ids` (labelled `team` = `team`) and waits until each is parked.
pub(crate) async fn waiting_v1(engine: &Engine, ids: &[&str], team: &str) {
    for id in ids {
        let options =
            StartOptions { version: Some(1), ..StartOptions::id(*id).label("team", team) };
        engine.start_json("waiter", Tally::default(), options).await.unwrap();
    }
    for id in ids {
        let thread = cairn::ThreadId::new(*id).unwrap();
        let parked = async {
            while engine.store().thread(&thread).await.unwrap().unwrap().status
                != ThreadStatus::WaitingInput
                || engine.is_driven(&thread)
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), parked).await.expect("parked");
    }
}

pub(crate) async fn version_of(engine: &Engine, id: &str) -> u32 {
    let thread = cairn::ThreadId::new(id).unwrap();
    engine.store().thread(&thread).await.unwrap().unwrap().workflow.version
}

/// A migrate batch that succeeds: the parked v1 threads of team a move to v2 through the
/// registered migration (the dry run counts what is applied), team b's stay on v1; then the
/// filter's `version` selects exactly each version's threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migrate_batch_moves_the_parked_threads_it_matches_and_the_version_filter_selects() {
    let (_d, path) = db();
    let (v1, v2) = (waiter_v(1), waiter_v(2));
    let engine = open(&path, &[&v1, &v2], |b| b).await;
    engine.register_migration("waiter", 1, 2, |mut state| {
        let log = state.get_mut("log").and_then(|l| l.as_array_mut()).ok_or("no log")?;
        log.push("migrated".into());
        Ok(state)
    });
    waiting_v1(&engine, &["m-1", "m-3", "m-5"], "a").await;
    waiting_v1(&engine, &["m-2", "m-4"], "b").await;
    let team_a = BatchFilter {
        workflow: Some("waiter".into()),
        labels: vec![("team".into(), "a".into())],
        ..BatchFilter::default()
    };
    let dry = engine.batch_count(&team_a).await.unwrap();
    engine.batch_as("mig", BatchOp::Migrate { to_version: 2 }, team_a).await.unwrap();
    finished(&engine, "mig").await;
    let info = engine.batch_info("mig").await.unwrap();
    assert_eq!((dry, info.state.applied, info.state.skipped), (3, 3, 0), "{info:?}");
    for (id, version) in [("m-1", 2), ("m-3", 2), ("m-5", 2), ("m-2", 1), ("m-4", 1)] {
        assert_eq!(version_of(&engine, id).await, version, "{id}");
    }
    // The version part of a filter selects exactly each version's threads.
    let of = |version| BatchFilter {
        workflow: Some("waiter".into()),
        version: Some(version),
        ..BatchFilter::default()
    };
    assert_eq!(engine.batch_count(&of(1)).await.unwrap(), 2);
    assert_eq!(engine.batch_count(&of(2)).await.unwrap(), 3);
    assert_eq!(engine.batch_count(&of(3)).await.unwrap(), 0);
    engine.batch_as("v1-go", signal_go(), of(1)).await.unwrap();
    finished(&engine, "v1-go").await;
    assert_eq!((gone(&engine, "m-2"), gone(&engine, "m-4"), gone(&engine, "m-1")), (1, 1, 0));
    // The migrated threads go on under v2 from the migrated state.
    engine.batch_as("v2-go", signal_go(), of(2)).await.unwrap();
    finished(&engine, "v2-go").await;
    for id in ["m-1", "m-2", "m-3", "m-4", "m-5"] {
        finished(&engine, id).await;
    }
    let out: Tally = engine.thread("m-3").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, ["migrated", "go 1"]);
    let out: Tally = engine.thread("m-4").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, ["go 1"]);
    engine.shutdown().await;
}

/// The creation time parts of a filter: `created_from_ms` inclusive, `created_to_ms` exclusive,
/// on threads made at engine-clock times 1,000, 2,000 and 3,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_created_time_range_of_a_filter_selects_exactly_the_threads_made_in_it() {
    let (_d, path) = db();
    let wf = waiter();
    let clock = cairn::clock::ManualClock::new(1_000);
    let engine = open(&path, &[&wf], |b| b.clock(Arc::new(clock.clone()))).await;
    for (ids, at) in [(["t-1", "t-2"], 1_000), (["t-3", "t-4"], 2_000), (["t-5", "t-6"], 3_000)] {
        clock.set_ms(at);
        for id in ids {
            engine.start_json("waiter", Tally::default(), StartOptions::id(id)).await.unwrap();
        }
    }
    for i in 1..=6 {
        let thread = cairn::ThreadId::new(format!("t-{i}")).unwrap();
        let parked = async {
            while engine.store().thread(&thread).await.unwrap().unwrap().status
                != ThreadStatus::WaitingInput
                || engine.is_driven(&thread)
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), parked).await.expect("parked");
    }
    let range = |from, to| BatchFilter {
        workflow: Some("waiter".into()),
        created_from_ms: from,
        created_to_ms: to,
        ..BatchFilter::default()
    };
    let count = async |f: BatchFilter| engine.batch_count(&f).await.unwrap();
    assert_eq!(count(range(Some(2_000), None)).await, 4, "from is inclusive");
    assert_eq!(count(range(None, Some(2_000))).await, 2, "to is exclusive");
    assert_eq!(count(range(Some(1_001), Some(3_000))).await, 2);
    assert_eq!(count(range(Some(3_001), None)).await, 0);
    engine.batch_as("mid", BatchOp::Pause, range(Some(2_000), Some(3_000))).await.unwrap();
    finished(&engine, "mid").await;
    assert_eq!(engine.batch_info("mid").await.unwrap().state.applied, 2);
    for i in 1..=6 {
        let status = engine.thread(&format!("t-{i}")).await.unwrap().status().await.unwrap();
        let expected =
            if (3..=4).contains(&i) { ThreadStatus::Paused } else { ThreadStatus::WaitingInput };
        assert_eq!(status, expected, "t-{i}");
    }
    engine.shutdown().await;
}
