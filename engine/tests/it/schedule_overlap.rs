//! Schedules whose runs overlap, on the manual clock: each overlap policy (`allow_all`, `skip`,
//! `buffer_one`, `cancel_other`) with a run that is still running at the next tick, jitter
//! (each tick delayed by a recorded random amount, the run keeping the tick's id), and a
//! backfill of a range: one run per tick, exactly once when repeated or crashed midway.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};
use cairn::storage::{Store, ThreadId};
use cairn::{Durability, Engine, Error, Every, Overlap, ScheduleSpec, ThreadStatus};

use crate::common::{Tally, db};
use crate::crash::every_write;
use crate::schedules::{HOUR, JAN_1_2026, file, started, tick};

/// A run that waits for a number: it runs until the test answers it.
pub(crate) fn job() -> Workflow<Tally> {
    Workflow::<Tally>::builder("report", 1)
        .node("wait", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("done?")?;
            Ok(NodeOutput::update((n, "done".to_owned())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

async fn open(store: Arc<dyn Store>, clock: &ManualClock) -> Engine {
    Engine::with_store(store)
        .clock(Arc::new(clock.clone()))
        .workflow(&job())
        .seed(11)
        .open()
        .await
        .unwrap()
}

/// An hourly schedule `s` from `JAN_1_2026 + 1h` under `overlap`, on a fresh engine.
async fn hourly(overlap: Overlap, jitter_ms: u64) -> (tempfile::TempDir, Engine, ManualClock) {
    let (dir, path) = db();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&path), &clock).await;
    let spec = ScheduleSpec::new("report", Every::Interval { ms: HOUR })
        .input(serde_json::json!({ "total": 0, "log": [] }))
        .between(Some(JAN_1_2026 + HOUR), None)
        .overlap(overlap)
        .jitter_ms(jitter_ms);
    engine.create_schedule("s", spec).await.unwrap();
    (dir, engine, clock)
}

pub(crate) async fn status(engine: &Engine, thread: &str) -> ThreadStatus {
    engine.thread(thread).await.unwrap().status().await.unwrap()
}

/// Waits until run `thread` exists and waits for its answer.
pub(crate) async fn waits(engine: &Engine, thread: &str) {
    for _ in 0..5_000 {
        if let Ok(t) = engine.thread(thread).await
            && t.status().await.unwrap() == ThreadStatus::WaitingInput
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    panic!("run {thread} never waited");
}

/// Schedule `s`'s state once `done` holds of it (its round committed).
pub(crate) async fn settled(
    engine: &Engine,
    done: impl Fn(&cairn::ScheduleState) -> bool,
) -> cairn::ScheduleState {
    for _ in 0..5_000 {
        let state = engine.schedule("s").await.unwrap().unwrap().state;
        if done(&state) {
            return state;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    panic!("schedule s never settled: {:?}", engine.schedule("s").await);
}

/// Two ticks while the first run still runs: what the second does under `overlap`.
async fn second_tick(overlap: Overlap) -> (tempfile::TempDir, Engine, ManualClock, [String; 2]) {
    let (dir, engine, clock) = hourly(overlap, 0).await;
    let first = ScheduleSpec::tick_thread_id("s", tick(&engine, &clock, "s").await);
    waits(&engine, &first).await;
    let second = ScheduleSpec::tick_thread_id("s", tick(&engine, &clock, "s").await);
    (dir, engine, clock, [first, second])
}

#[tokio::test]
async fn allow_all_starts_every_tick_beside_the_running_one() {
    let (_d, engine, _clock, [first, second]) = second_tick(Overlap::AllowAll).await;
    waits(&engine, &second).await;
    assert_eq!(status(&engine, &first).await, ThreadStatus::WaitingInput);
    let state = engine.schedule("s").await.unwrap().unwrap().state;
    assert_eq!((state.started, state.skipped, state.last_run), (2, 0, None));
    engine.shutdown().await;
}

#[tokio::test]
async fn skip_starts_nothing_while_the_previous_run_runs_and_counts_the_tick_skipped() {
    let (_d, engine, clock, [first, second]) = second_tick(Overlap::Skip).await;
    assert!(engine.thread(&second).await.is_err(), "no run for the tick at an overlap");
    let state = engine.schedule("s").await.unwrap().unwrap().state;
    assert_eq!((state.started, state.skipped), (1, 1));
    // Once the run has ended, the next tick starts one.
    engine.send_input(&first, 1).await.unwrap();
    engine.thread(&first).await.unwrap().finished().await.unwrap();
    let third = ScheduleSpec::tick_thread_id("s", tick(&engine, &clock, "s").await);
    waits(&engine, &third).await;
    let state = engine.schedule("s").await.unwrap().unwrap().state;
    assert_eq!((state.started, state.skipped), (2, 1));
    engine.shutdown().await;
}

#[tokio::test]
async fn cancel_other_cancels_the_running_run_and_starts_the_new_one() {
    let (_d, engine, _clock, [first, second]) = second_tick(Overlap::CancelOther).await;
    waits(&engine, &second).await;
    assert_eq!(status(&engine, &first).await, ThreadStatus::Cancelled);
    let state = engine.schedule("s").await.unwrap().unwrap().state;
    assert_eq!((state.started, state.skipped), (2, 0));
    assert_eq!(state.last_run.as_deref(), Some(second.as_str()));
    engine.shutdown().await;
}

#[tokio::test]
async fn buffer_one_keeps_the_latest_tick_and_starts_it_when_the_running_run_ends() {
    let (_d, engine, clock, [first, second]) = second_tick(Overlap::BufferOne).await;
    let third_tick = tick(&engine, &clock, "s").await;
    let third = ScheduleSpec::tick_thread_id("s", third_tick);
    let state = engine.schedule("s").await.unwrap().unwrap().state;
    // The second waited, then the third took its place (the second counted skipped).
    assert_eq!((state.started, state.skipped, state.buffered), (1, 1, Some(third_tick)));
    assert!(engine.thread(&third).await.is_err(), "not while the first runs");
    engine.send_input(&first, 1).await.unwrap();
    engine.thread(&first).await.unwrap().finished().await.unwrap();
    // Looked at again within a poll: the waiting tick starts, before the next tick.
    clock.advance_ms(Overlap::BUFFER_POLL_MS);
    waits(&engine, &third).await;
    // The run exists once its start is recorded; the schedule's round commits right after.
    let state = settled(&engine, |s| s.buffered.is_none()).await;
    assert_eq!((state.started, state.skipped, state.buffered), (2, 1, None));
    assert!(engine.thread(&second).await.is_err(), "the replaced tick never ran");
    engine.shutdown().await;
}

#[tokio::test]
async fn jitter_delays_each_tick_by_a_recorded_amount_and_the_run_keeps_the_tick_id() {
    const JITTER_MS: u64 = 10 * 60_000;
    let (_d, engine, clock, at) = {
        let (dir, engine, clock) = hourly(Overlap::AllowAll, JITTER_MS).await;
        let at = engine.schedule("s").await.unwrap().unwrap().state.next_tick_ms.unwrap();
        (dir, engine, clock, at)
    };
    let run = ScheduleSpec::tick_thread_id("s", at);
    // The schedule's thread sleeps until the tick plus its draw.
    let until = loop {
        if let Some(until) = timer_of(&engine, "schedule:s").await {
            break until;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    };
    assert!(until > at && until < at + JITTER_MS, "{until} after the tick at {at}");
    clock.set_ms(until - 1);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(engine.thread(&run).await.is_err(), "not before its delay");
    clock.set_ms(until);
    waits(&engine, &run).await;
    let created = engine.store().thread(&ThreadId::new(&run).unwrap()).wait().unwrap().unwrap();
    assert_eq!(created.created_at_ms, until);
    let state = settled(&engine, |s| s.started == 1).await;
    assert_eq!(state.last_tick_ms, Some(at));
    engine.shutdown().await;
}

/// The time `thread`'s latest durable timer is set for.
async fn timer_of(engine: &Engine, thread: &str) -> Option<u64> {
    let mut events = engine.thread(thread).await.ok()?.events(0).ok()?;
    let mut until = None;
    while let Some(e) = events.try_next().await.unwrap() {
        if let cairn::event::Body::TimerSet { until_ms, .. } = e.body {
            until = Some(until_ms);
        }
    }
    until
}

/// An hourly cron schedule that starts far in the future (it ticks nothing of its own here).
fn later_hourly() -> ScheduleSpec {
    ScheduleSpec::new("report", Every::Cron { expr: "0 * * * *".into(), tz: "UTC".into() })
        .input(serde_json::json!({ "total": 0, "log": [] }))
        .between(Some(JAN_1_2026 + 1_000 * HOUR), None)
}

#[tokio::test]
async fn a_backfill_starts_one_run_per_tick_of_the_range_once_and_refuses_too_many() {
    let (_d, path) = db();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&path), &clock).await;
    engine.create_schedule("b", later_hourly()).await.unwrap();
    let done = engine.backfill_schedule("b", JAN_1_2026 - 4 * HOUR, JAN_1_2026).await.unwrap();
    let want: Vec<u64> = (0..5).map(|k| JAN_1_2026 - (4 - k) * HOUR).collect();
    assert_eq!((done.ticks.clone(), done.created), (want.clone(), 5));
    let again = engine.backfill_schedule("b", JAN_1_2026 - 4 * HOUR, JAN_1_2026).await.unwrap();
    assert_eq!((again.ticks, again.created), (want.clone(), 0), "repeated: nothing more");
    let ids: std::collections::BTreeSet<String> =
        want.iter().map(|t| ScheduleSpec::tick_thread_id("b", *t)).collect();
    assert_eq!(started(&engine, "b"), ids);
    let hours = cairn::Backfilled::RUNS_MAX as u64;
    let err = engine.backfill_schedule("b", JAN_1_2026 - hours * HOUR, JAN_1_2026).await;
    assert!(matches!(err, Err(Error::LimitExceeded { .. })), "{err:?}");
    assert_eq!(started(&engine, "b"), ids, "a refused backfill starts nothing");
    let err = engine.backfill_schedule("nope", 0, 1).await;
    assert!(matches!(err, Err(Error::UnknownThread(_))), "{err:?}");
    engine.shutdown().await;
}

/// The store dies at each write in turn while a schedule is created and a range of five
/// ticks backfilled; the reopened engine backfills the range again (as a caller whose call
/// failed would) and ends with exactly one run per tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_backfill_neither_loses_nor_doubles_a_run() {
    let (from, to) = (JAN_1_2026 - 4 * HOUR, JAN_1_2026);
    let want: std::collections::BTreeSet<String> =
        (0..5).map(|k| ScheduleSpec::tick_thread_id("b", from + k * HOUR)).collect();
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.clock(Arc::new(clock.clone())).workflow(&job()).durability(Durability::None)
    };
    let run = async |engine: &Engine, _: &ManualClock| {
        engine.create_schedule("b", later_hourly()).await?;
        engine.backfill_schedule("b", from, to).await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &ManualClock, crash_after: i64| {
        if engine.schedule("b").await.unwrap().is_none() {
            engine.create_schedule("b", later_hourly()).await.unwrap();
        }
        let before = started(engine, "b");
        let done = engine.backfill_schedule("b", from, to).await.unwrap();
        assert_eq!(done.created, 5 - before.len(), "crash_after {crash_after}: {before:?}");
        assert_eq!(started(engine, "b"), want, "crash_after {crash_after}");
        assert!(engine.store().verify().unwrap().is_clean());
    };
    let crashes = every_write(100, || ManualClock::new(JAN_1_2026), tune, run, check).await;
    assert!(crashes >= 5, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY schedule_backfill_crash crash_points={crashes} lost=0 doubled=0"
    ));
}
