//! Delayed start (`StartOptions::start_at_ms`): the thread is created at once and runs at its
//! time, across a restart before the time, and at once after a restart past it; not with a
//! queue.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Engine, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

const T0: u64 = 1_000_000;
const LATER: u64 = T0 + 60_000;

/// One node that notes the clock when it runs.
fn stamp() -> Workflow<Tally> {
    Workflow::<Tally>::builder("stamp", 1)
        .node("stamp", |_s: Arc<Tally>, ctx: Ctx| async move {
            Ok(NodeOutput::update((ctx.now_ms(), "ran".into())))
        })
        .edge(cairn::START, "stamp")
        .edge("stamp", cairn::END)
        .build()
        .unwrap()
}

async fn engine_at(path: &std::path::Path, clock: &ManualClock) -> Engine {
    let clock = Arc::new(clock.clone());
    open(path, &[&stamp()], |b| b.clock(clock)).await
}

fn later(id: &str) -> StartOptions {
    StartOptions { start_at_ms: Some(LATER), ..StartOptions::id(id) }
}

#[tokio::test]
async fn a_delayed_start_is_created_at_once_and_runs_at_its_time_across_a_restart() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = engine_at(&path, &clock).await;
    let t = engine.start_json("stamp", Tally::default(), later("d1")).await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Created, "created, not run");
    engine.shutdown().await;
    drop((t, engine));
    clock.advance_ms(30_000);
    let engine = engine_at(&path, &clock).await;
    let t = engine.thread("d1").await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Created, "still before its time");
    clock.set_ms(LATER);
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["ran".to_string()]);
    assert!(out.total >= LATER, "ran at its time: {}", out.total);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_delayed_start_whose_time_passed_while_no_engine_ran_starts_at_the_next_open() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = engine_at(&path, &clock).await;
    engine.start_json("stamp", Tally::default(), later("d2")).await.unwrap();
    engine.shutdown().await;
    drop(engine);
    clock.set_ms(LATER + 1);
    let engine = engine_at(&path, &clock).await;
    let out: Tally = engine.thread("d2").await.unwrap().output().await.unwrap();
    assert_eq!(out.total, LATER + 1, "run at the open");
    let queued = StartOptions { start_at_ms: Some(LATER + 10), ..StartOptions::id("d3") };
    let refused = engine.start_json("stamp", Tally::default(), queued.on_queue("q")).await;
    assert!(matches!(refused, Err(cairn::Error::Invalid(_))), "not with a queue");
    engine.shutdown().await;
}

/// The store dies at each write in turn around a delayed start; the caller starts again on the
/// reopened engine (idempotent on the id): the thread runs once, at its time, never before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_delayed_start_runs_it_once_at_its_time() {
    let secs = std::time::Duration::from_secs(10);
    let wf = stamp();
    // Each crash point gets a clock of its own at T0 (time never goes back).
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.workflow(&wf).clock(Arc::new(clock.clone()))
    };
    let run = async |engine: &Engine, clock: &ManualClock| {
        let t = engine.start_json("stamp", Tally::default(), later("c1")).await?;
        clock.set_ms(LATER);
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, clock: &ManualClock, crash_after: i64| {
        let t = engine.start_json("stamp", Tally::default(), later("c1")).await.unwrap();
        tokio::task::yield_now().await;
        if cairn::clock::Clock::now_ms(clock) < LATER {
            // Crashed before its time: created (again), and not run before it.
            let before = t.status().await.unwrap();
            assert_eq!(before, ThreadStatus::Created, "crash_after {crash_after}: not before");
            clock.set_ms(LATER);
        }
        let done = tokio::time::timeout(secs, t.output::<Tally>()).await;
        let out = done.unwrap_or_else(|_| panic!("crash_after {crash_after}: not finished"));
        let out = out.unwrap();
        assert_eq!(out.log, vec!["ran".to_string()], "crash_after {crash_after}: once");
        assert!(out.total >= LATER, "crash_after {crash_after}: at its time");
    };
    let crashes = every_write(50, || ManualClock::new(T0), tune, run, check).await;
    assert!(crashes >= 2, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY delayed_start_crash crash_points={crashes} early=0 doubled=0"
    ));
}
