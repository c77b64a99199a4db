//! A batch repin (`BatchOp::Repin`, docs/batches.md): "move every thread of build A to build
//! B" is a repin batch over the filter label `cairn.build` = A. A dry run counts them; the
//! batch pins each to B and leaves the threads of other builds alone; a crash at any write of
//! it, the batch asked for again on the reopened engine, leaves every thread of A pinned to B
//! by exactly one `labels_changed` event (none lost, none doubled).

use std::time::Duration;

use cairn::blocking::decode;
use cairn::storage::{Seq, ThreadId};
use cairn::{BatchFilter, BatchOp, Engine, StartOptions, ThreadStatus};

use super::batch::{finished, waiter, waiting};
use crate::common::{Tally, db, open};
use crate::crash::Dying;

/// Threads of build `a` made by `waiting`.
const THREADS: usize = 8;

fn of_build_a() -> BatchFilter {
    BatchFilter { labels: vec![("cairn.build".into(), "a".into())], ..BatchFilter::default() }
}

fn to_b() -> BatchOp {
    BatchOp::Repin { build: Some("b".into()) }
}

/// The `cairn.build` pin of `thread` and the `labels_changed` events of that label in its log.
pub(crate) fn pin_and_moves(engine: &Engine, thread: &str) -> (Option<String>, usize) {
    let id = ThreadId::new(thread).unwrap();
    let store = engine.store();
    let record = store.thread(&id).wait().unwrap().unwrap();
    let last = record.last.map_or(0, |b| b.seq.0);
    let moves = store
        .read_range(&id, Seq(1), Seq(last))
        .wait()
        .unwrap()
        .into_iter()
        .filter(|e| {
            matches!(decode(store.as_ref(), e.clone()).unwrap().body,
                cairn::event::Body::LabelsChanged { set, removed }
                    if set.contains_key("cairn.build") || removed.iter().any(|k| k == "cairn.build"))
        })
        .count();
    (record.labels.get("cairn.build").cloned(), moves)
}

/// `THREADS` waiters of build `a` and one of build `c` (`other`), all parked, on `path`.
async fn setup(path: &std::path::Path) {
    let wf = waiter();
    let engine = open(path, &[&wf], |b| b.build_id("a")).await;
    waiting(&engine, THREADS).await;
    engine.shutdown().await;
    drop(engine);
    let engine = open(path, &[&wf], |b| b.build_id("c")).await;
    engine.start_json("waiter", Tally::default(), StartOptions::id("other")).await.unwrap();
    let other = engine.thread("other").await.unwrap();
    while other.status().await.unwrap() != ThreadStatus::WaitingInput {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repin_batch_moves_one_builds_threads_to_another() {
    let (_d, path) = db();
    setup(&path).await;
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b.build_id("b")).await;
    assert_eq!(engine.batch_count(&of_build_a()).await.unwrap(), THREADS as u64, "dry run");
    let bad = engine.batch(BatchOp::Repin { build: Some("no spaces".into()) }, of_build_a()).await;
    assert!(matches!(bad, Err(cairn::Error::Invalid(_))), "{bad:?}");
    assert_eq!(pin_and_moves(&engine, "w-00"), (Some("a".into()), 0), "the refusal wrote nothing");

    engine.batch_as("move", to_b(), of_build_a()).await.unwrap();
    finished(&engine, "move").await;
    let info = engine.batch_info("move").await.unwrap();
    assert_eq!((info.state.total, info.state.applied), (THREADS as u64, THREADS as u64));
    for i in 0..THREADS {
        assert_eq!(pin_and_moves(&engine, &format!("w-{i:02}")), (Some("b".into()), 1));
    }
    assert_eq!(pin_and_moves(&engine, "other"), (Some("c".into()), 0), "control: build c's");
    assert_eq!(engine.batch_count(&of_build_a()).await.unwrap(), 0, "none of a left");
    let drain = engine.drain().await.unwrap();
    let b_row = drain.builds.iter().find(|r| r.build.as_deref() == Some("b")).unwrap();
    assert_eq!((b_row.total, b_row.taken_here), (THREADS as u64, true));
    // Build b's engine took them: a signal now runs them here.
    engine.signal("w-00", "go", 1u64).await.unwrap();
    finished(&engine, "w-00").await;

    // Unpinning by batch: the threads of b, auto-upgrade from now on.
    let of_b =
        BatchFilter { labels: vec![("cairn.build".into(), "b".into())], ..BatchFilter::default() };
    engine.batch_as("free", BatchOp::Repin { build: None }, of_b).await.unwrap();
    finished(&engine, "free").await;
    assert_eq!(pin_and_moves(&engine, "w-01"), (None, 2));
    engine.shutdown().await;
}

/// A crash at every write of a repin batch, the batch asked for again after each: every thread
/// of build a ends pinned to b by one event. A thread repinned but not recorded before the
/// crash matches the filter no more, so the batch's `applied` may count fewer; the threads'
/// logs are the proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_repin_batch_moves_each_thread_once() {
    let wf = waiter();
    let mut crashes = 0;
    for crash_after in 1..2_000 {
        let (_d, path) = db();
        setup(&path).await;
        let dying = Dying::over_file(&path, Some(crash_after));
        let engine =
            Engine::with_store(dying.clone()).workflow(&wf).build_id("b").open().await.unwrap();
        let run = async {
            engine.batch_as("m1", to_b(), of_build_a()).await?;
            engine.thread("m1").await?.finished().await.map(drop)
        };
        let died = dying.crash_during(&engine, Duration::from_secs(20), run).await;
        drop(engine);
        if !died {
            break;
        }
        crashes += 1;
        drop(dying);
        let engine = open(&path, &[&wf], |b| b.build_id("b")).await;
        let asked = engine.batch_as("m1", to_b(), of_build_a()).await;
        asked.unwrap_or_else(|e| panic!("crash_after {crash_after}: {e}"));
        finished(&engine, "m1").await;
        for i in 0..THREADS {
            let id = format!("w-{i:02}");
            let got = pin_and_moves(&engine, &id);
            assert_eq!(got, (Some("b".into()), 1), "crash_after {crash_after}: {id}");
        }
        let other = pin_and_moves(&engine, "other");
        assert_eq!(other, (Some("c".into()), 0), "crash_after {crash_after}");
        engine.shutdown().await;
    }
    assert!(crashes >= 20, "the crash points covered the batch: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY batch_repin_crash crash_points={crashes} lost=0 doubled=0"
    ));
}
