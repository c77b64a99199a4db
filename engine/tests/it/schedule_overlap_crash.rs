//! The overlap policies that write, crashed at every write: a schedule is created, its first
//! tick starts a run that waits, and its second tick comes while that run still runs (`skip`
//! counts it skipped; `buffer_one` keeps it and starts it once the first run is answered;
//! `cancel_other` cancels the first run and starts the second). The reopened engine drives
//! the same steps to their end; then no tick is lost and none is started, skipped or
//! cancelled twice.

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::{Durability, Engine, Error, Every, Overlap, ScheduleSpec, ThreadStatus};

use crate::crash::every_write;
use crate::schedule_overlap::{job, settled, status, waits};
use crate::schedules::{HOUR, JAN_1_2026, started};

/// The ticks of the test: the first run's and the overlapping one's.
const FIRST: u64 = JAN_1_2026 + HOUR;
const SECOND: u64 = JAN_1_2026 + 2 * HOUR;

fn hourly(overlap: Overlap) -> ScheduleSpec {
    ScheduleSpec::new("report", Every::Interval { ms: HOUR })
        .input(serde_json::json!({ "total": 0, "log": [] }))
        .between(Some(FIRST), None)
        .overlap(overlap)
}

/// The run before the crash, without a panic where the dying store refuses a write: sets the
/// clock to each tick and waits (until the store dies, which ends the run) for what follows.
async fn drive(engine: &Engine, clock: &ManualClock, overlap: Overlap) -> Result<(), Error> {
    engine.create_schedule("s", hourly(overlap)).await?;
    let [first, second] = [FIRST, SECOND].map(|t| ScheduleSpec::tick_thread_id("s", t));
    clock.set_ms(FIRST);
    until(engine, &first, ThreadStatus::WaitingInput).await;
    clock.set_ms(SECOND);
    while engine.schedule("s").await?.and_then(|s| s.state.last_tick_ms) != Some(SECOND) {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    if overlap == Overlap::BufferOne {
        engine.send_input(&first, 1).await?;
        until(engine, &first, ThreadStatus::Completed).await;
        clock.advance_ms(Overlap::BUFFER_POLL_MS);
    }
    if overlap != Overlap::Skip {
        until(engine, &second, ThreadStatus::WaitingInput).await;
    }
    Ok(())
}

/// Waits (for ever: the crash harness bounds a run) until `thread` has status `want`.
async fn until(engine: &Engine, thread: &str, want: ThreadStatus) {
    until_any(engine, thread, &[want]).await;
}

/// Waits (for ever) until `thread` has one of the statuses `want`.
async fn until_any(engine: &Engine, thread: &str, want: &[ThreadStatus]) {
    loop {
        if let Ok(t) = engine.thread(thread).await
            && let Ok(now) = t.status().await
            && want.contains(&now)
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// How many times `thread`'s log records it cancelled.
async fn cancels(engine: &Engine, thread: &str) -> usize {
    let mut events = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut n = 0;
    while let Some(e) = events.try_next().await.unwrap() {
        if let cairn::event::Body::StatusChanged { to: ThreadStatus::Cancelled, .. } = e.body {
            n += 1;
        }
    }
    n
}

/// On the reopened engine: the steps of [`drive`] not yet done, done; then the end state of
/// `overlap`, asserted.
async fn finish(engine: &Engine, clock: &ManualClock, overlap: Overlap, crash_after: i64) {
    if engine.schedule("s").await.unwrap().is_none() {
        engine.create_schedule("s", hourly(overlap)).await.unwrap();
    }
    let [first, second] = [FIRST, SECOND].map(|t| ScheduleSpec::tick_thread_id("s", t));
    clock.set_ms(FIRST);
    settled(engine, |s| s.last_tick_ms >= Some(FIRST)).await;
    // Waiting, or (crashed later) answered or cancelled already.
    let rests = [ThreadStatus::WaitingInput, ThreadStatus::Completed, ThreadStatus::Cancelled];
    let bounded = until_any(engine, &first, &rests);
    let rested = tokio::time::timeout(std::time::Duration::from_secs(30), bounded).await;
    assert!(rested.is_ok(), "{overlap:?} crash_after {crash_after}: the first run never rested");
    clock.set_ms(SECOND);
    settled(engine, |s| s.last_tick_ms == Some(SECOND)).await;
    let ran: BTreeSet<String> = match overlap {
        Overlap::Skip => [first.clone()].into(),
        _ => [first.clone(), second.clone()].into(),
    };
    if overlap == Overlap::BufferOne {
        if status(engine, &first).await == ThreadStatus::WaitingInput {
            engine.send_input(&first, 1).await.unwrap();
        }
        engine.thread(&first).await.unwrap().finished().await.unwrap();
        clock.advance_ms(Overlap::BUFFER_POLL_MS);
    }
    if overlap != Overlap::Skip {
        waits(engine, &second).await;
    }
    let state = settled(engine, |s| s.buffered.is_none() && s.last_tick_ms == Some(SECOND)).await;
    let skipped = u64::from(overlap == Overlap::Skip);
    let counts = (state.started, state.skipped, state.buffered);
    assert_eq!(counts, (ran.len() as u64, skipped, None), "crash_after {crash_after}");
    assert_eq!(started(engine, "s"), ran, "crash_after {crash_after}: one run a started tick");
    let first_end = if overlap == Overlap::CancelOther {
        ThreadStatus::Cancelled
    } else if overlap == Overlap::BufferOne {
        ThreadStatus::Completed
    } else {
        ThreadStatus::WaitingInput
    };
    assert_eq!(status(engine, &first).await, first_end, "crash_after {crash_after}");
    let cancelled = usize::from(overlap == Overlap::CancelOther);
    assert_eq!(cancels(engine, &first).await, cancelled, "crash_after {crash_after}");
    assert!(engine.store().verify().unwrap().is_clean(), "crash_after {crash_after}");
}

/// Crashes `overlap`'s path at every write; returns the number of crash points.
async fn crash_every_write(overlap: Overlap) -> usize {
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.clock(Arc::new(clock.clone())).workflow(&job()).durability(Durability::None)
    };
    let run = async |engine: &Engine, clock: &ManualClock| drive(engine, clock, overlap).await;
    let check = async |engine: &Engine, clock: &ManualClock, crash_after: i64| {
        finish(engine, clock, overlap, crash_after).await;
    };
    let crashes = every_write(300, || ManualClock::new(JAN_1_2026), tune, run, check).await;
    assert!((5..299).contains(&crashes), "{overlap:?}: crash points {crashes}");
    crashes
}

/// Each policy's path, crashed at each of its writes and finished by the reopened engine:
/// `skip` counts the tick skipped once and starts nothing for it; `buffer_one` starts the
/// kept tick once, after the first run ends; `cancel_other` cancels the first run once and
/// starts the second once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_an_overlap_policy_neither_loses_nor_doubles_a_tick() {
    let skip = crash_every_write(Overlap::Skip).await;
    let buffer_one = crash_every_write(Overlap::BufferOne).await;
    let cancel_other = crash_every_write(Overlap::CancelOther).await;
    crate::common::report(&format!(
        "RELIABILITY schedule_overlap_crash skip_crash_points={skip} \
         buffer_one_crash_points={buffer_one} cancel_other_crash_points={cancel_other} \
         lost=0 doubled=0"
    ));
}
