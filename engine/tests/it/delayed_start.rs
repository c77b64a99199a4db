//! Delayed start (`StartOptions::start_at_ms`): the thread is created at once and runs at its
//! time, across a restart before the time, and at once after a restart past it; not with a
//! queue.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Engine, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};

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
