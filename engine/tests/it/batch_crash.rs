//! A crash at every write of a batch, for each operation but signal (`batch.rs` has that one,
//! `RELIABILITY batch_crash`) and repin (`batch_repin.rs`): cancel, pause, resume, delete,
//! migrate and reset. The store dies at each write in turn around a batch over the five team-a
//! threads of ten; the reopened engine is asked for the batch again by its id and finishes it.
//! Each matching thread must show the operation exactly once in its record and log, and no
//! thread outside the filter any trace of it. One `RELIABILITY batch_<op>_crash` line each.

use std::time::Duration;

use cairn::storage::{Page, Seq, ThreadFilter, ThreadId};
use cairn::{
    BatchFilter, BatchOp, Engine, ResetPoint, StartOptions, ThreadStatus, reset_thread_id,
};

use crate::batch::{finished, waiter_v};
use crate::common::{Tally, db, open};
use crate::crash::Dying;

const THREADS: usize = 10;
const BATCH: &str = "b1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Cancel,
    Pause,
    Resume,
    Delete,
    Migrate,
    Reset,
}

impl Op {
    fn batch(self) -> BatchOp {
        match self {
            Op::Cancel => BatchOp::Cancel { reason: "crash test".into() },
            Op::Pause => BatchOp::Pause,
            Op::Resume => BatchOp::Resume,
            Op::Delete => BatchOp::Delete,
            Op::Migrate => BatchOp::Migrate { to_version: 2 },
            Op::Reset => BatchOp::Reset { point: ResetPoint::Start },
        }
    }
}

fn id(i: usize) -> String {
    format!("w-{i:02}")
}

fn team_a() -> BatchFilter {
    BatchFilter {
        workflow: Some("waiter".into()),
        labels: vec![("team".into(), "a".into())],
        ..BatchFilter::default()
    }
}

/// The migration between the waiter's two versions, registered at open: an engine continues
/// a crashed batch at open, before `Engine::register_migration` could run (the threads it
/// reached first were skipped: this test found that).
fn with_migration(b: cairn::EngineBuilder) -> cairn::EngineBuilder {
    b.migration("waiter", 1, 2, Ok)
}

/// Ten v1 waiters (team a the even ones), parked; paused for a resume, cancelled for a delete.
async fn set_up(engine: &Engine, op: Op) {
    for i in 0..THREADS {
        let team = if i % 2 == 0 { "a" } else { "b" };
        let options =
            StartOptions { version: Some(1), ..StartOptions::id(id(i)).label("team", team) };
        engine.start_json("waiter", Tally::default(), options).await.unwrap();
    }
    for i in 0..THREADS {
        let thread = ThreadId::new(id(i)).unwrap();
        let parked = async {
            while engine.store().thread(&thread).await.unwrap().unwrap().status
                != ThreadStatus::WaitingInput
                || engine.is_driven(&thread)
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), parked).await.expect("parked");
        match op {
            Op::Resume => engine.pause(&id(i)).await.unwrap(),
            Op::Delete => engine.cancel(&id(i), "set up").await.unwrap(),
            _ => {}
        }
    }
}

/// The status changes in `thread`'s log, as (from, to, reason).
fn changes(engine: &Engine, thread: &str) -> Vec<(ThreadStatus, ThreadStatus, String)> {
    let store = engine.store();
    // A deleted thread has no log: no status changes.
    let events = store.read_since(&ThreadId::new(thread).unwrap(), Seq(0), 10_000).wait();
    let events = events.unwrap_or_default();
    events
        .into_iter()
        .filter_map(|e| match cairn::blocking::decode(store.as_ref(), e).unwrap().body {
            cairn::event::Body::StatusChanged { from, to, reason } => Some((from, to, reason)),
            _ => None,
        })
        .collect()
}

/// How many times `op` acted on `thread`, by each trace it leaves (each must be 1 on a matching
/// thread, 0 on another).
async fn traces(engine: &Engine, op: Op, thread: &str) -> Vec<usize> {
    let changes = changes(engine, thread);
    let count = |f: &dyn Fn(&(ThreadStatus, ThreadStatus, String)) -> bool| {
        changes.iter().filter(|c| f(c)).count()
    };
    let record = engine.store().thread(&ThreadId::new(thread).unwrap()).await.unwrap();
    match op {
        Op::Cancel => vec![count(&|c| c.1 == ThreadStatus::Cancelled && c.2 == "crash test")],
        Op::Pause => vec![count(&|c| c.1 == ThreadStatus::Paused)],
        Op::Resume => vec![count(&|c| c.0 == ThreadStatus::Paused)],
        Op::Delete => vec![usize::from(record.is_none())],
        Op::Migrate => {
            let id = ThreadId::new(thread).unwrap();
            let points = cairn::admin::migration_points(engine, &id).await.unwrap();
            let on_v2 = record.is_some_and(|r| r.workflow.version == 2);
            vec![points.len(), usize::from(on_v2)]
        }
        Op::Reset => {
            let all = ThreadFilter::default();
            let page = Page { limit: 1_000, offset: 0 };
            let listed = engine.store().list_threads(&all, page).await.unwrap();
            let forks = listed
                .iter()
                .filter(|r| r.parent.as_ref().is_some_and(|(p, _)| p.as_str() == thread))
                .count();
            let fork = reset_thread_id(thread, BATCH);
            vec![
                forks,
                count(&|c| c.1 == ThreadStatus::Cancelled && c.2 == format!("reset to {fork}")),
            ]
        }
    }
}

/// Crashes the store at each write in turn around a batch of `op`; the line it reports.
async fn crash_every_write(op: Op) -> String {
    let (v1, v2) = (waiter_v(1), waiter_v(2));
    let (mut crashes, mut lost, mut doubled) = (0, 0, 0);
    for crash_after in 1..2_000 {
        let (_d, path) = db();
        let engine = open(&path, &[&v1, &v2], with_migration).await;
        set_up(&engine, op).await;
        engine.shutdown().await;
        drop(engine);
        let dying = Dying::over_file(&path, Some(crash_after));
        let engine = Engine::with_store(dying.clone()).workflow(&v1).workflow(&v2);
        let engine = with_migration(engine).open().await.unwrap();
        let run = async {
            engine.batch_as(BATCH, op.batch(), team_a()).await?;
            engine.thread(BATCH).await?.finished().await.map(drop)
        };
        let died = dying.crash_during(&engine, Duration::from_secs(20), run).await;
        drop(engine);
        if !died {
            break;
        }
        crashes += 1;
        drop(dying);
        let engine = open(&path, &[&v1, &v2], with_migration).await;
        let asked = engine.batch_as(BATCH, op.batch(), team_a()).await;
        asked.unwrap_or_else(|e| panic!("{op:?} crash_after {crash_after}: {e}"));
        finished(&engine, BATCH).await;
        let info = engine.batch_info(BATCH).await.unwrap();
        for i in 0..THREADS {
            let got = traces(&engine, op, &id(i)).await;
            let want = usize::from(i % 2 == 0);
            lost += got.iter().filter(|n| **n < want).count();
            doubled += got.iter().filter(|n| **n > want).count();
            assert!(
                got.iter().all(|n| *n == want),
                "{op:?} crash_after {crash_after}: {} has {got:?}, wants {want} each: {info:?}",
                id(i)
            );
        }
        engine.shutdown().await;
    }
    assert!(crashes >= 15, "{op:?}: the crash points covered the batch: {crashes}");
    let name = format!("{op:?}").to_lowercase();
    format!("RELIABILITY batch_{name}_crash crash_points={crashes} lost={lost} doubled={doubled}")
}

async fn check(op: Op) {
    let line = crash_every_write(op).await;
    crate::common::report(&line);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_cancel_batch_cancels_each_matching_thread_once() {
    check(Op::Cancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_pause_batch_pauses_each_matching_thread_once() {
    check(Op::Pause).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_resume_batch_resumes_each_matching_thread_once() {
    check(Op::Resume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_delete_batch_deletes_each_matching_thread() {
    check(Op::Delete).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_migrate_batch_migrates_each_matching_thread_once() {
    check(Op::Migrate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_reset_batch_forks_and_cancels_each_matching_thread_once() {
    check(Op::Reset).await;
}
