//! Schedules that continue as new (`ScheduleSpec::TICKS_PER_RUN`, here made small with
//! `EngineBuilder::schedule_ticks_per_run`): ticks keep their ids and the counters carry over
//! across links; the name reaches the live link for every control; a pause issued right at a
//! continuation takes effect; a schedule ticks past the rounds one thread's loop bound allows.

use std::time::{Duration, Instant};

use cairn::clock::ManualClock;
use cairn::{Engine, Every, ScheduleSpec, ThreadStatus};

use crate::schedules::{HOUR, JAN_1_2026, file, open_with, spec, started, tick, ticks_started};

/// Checks schedule `name`'s chain of `links` threads: every link but the last completed and
/// continued as the next, the last (the live one) did not complete.
pub(crate) async fn one_live_link(engine: &Engine, name: &str, links: u64) {
    let ids: Vec<String> = (0..links)
        .map(|n| if n == 0 { format!("schedule:{name}") } else { format!("schedule:{name}~{n}") })
        .collect();
    let record = |id: &str| {
        let id = cairn::storage::ThreadId::new(id).unwrap();
        engine.store().thread(&id).wait().unwrap()
    };
    for (n, id) in ids.iter().enumerate() {
        let status = record(id).expect("every link is stored").status;
        let next = engine.continued_as(id).await.unwrap();
        if n + 1 < ids.len() {
            assert_eq!(status, ThreadStatus::Completed, "{id}");
            assert_eq!(next.as_deref(), Some(ids[n + 1].as_str()), "{id} continued as the next");
        } else {
            assert_eq!(next, None, "{id} is the live link");
            assert!(!status.is_terminal(), "the live link {id} runs: {status}");
        }
    }
    let more = format!("schedule:{name}~{links}");
    assert!(record(&more).is_none(), "no link past {}", ids[ids.len() - 1]);
}

/// Waits until schedule `name`'s live link is `status`.
async fn until_status(engine: &Engine, name: &str, status: ThreadStatus) {
    let waited = Instant::now();
    loop {
        let info = engine.schedule(name).await.unwrap().unwrap();
        if info.status == status {
            return;
        }
        assert!(waited.elapsed() < Duration::from_secs(20), "not {status}: {info:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until resumed schedule `name` has handled the ticks due by now (its catch-up) and
/// sleeps until a later one.
async fn caught_up(engine: &Engine, clock: &ManualClock, name: &str) {
    let waited = Instant::now();
    loop {
        let info = engine.schedule(name).await.unwrap().unwrap();
        let now = cairn::clock::Clock::now_ms(clock);
        if info.status == ThreadStatus::Sleeping && info.state.next_tick_ms > Some(now) {
            return;
        }
        assert!(waited.elapsed() < Duration::from_secs(20), "not caught up: {info:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn a_schedule_continues_as_new_every_n_rounds_and_keeps_its_ticks_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open_with(file(&dir.path().join("s.db")), &clock, 3).await;
    engine.create_schedule("h", spec(Every::Interval { ms: HOUR })).await.unwrap();
    let mut ticks = Vec::new();
    for _ in 0..10 {
        ticks.push(tick(&engine, &clock, "h").await);
    }
    let info = engine.schedule("h").await.unwrap().unwrap();
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "h").unwrap().unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    // 3 rounds a link: the 10th round was the first of the 4th link.
    assert_eq!(check.links, 4, "{check:?}");
    assert_eq!(info.thread, "schedule:h~3");
    one_live_link(&engine, "h", 4).await;
    // Tick ids are the schedule's, whatever link started them; the counters went on.
    let want: std::collections::BTreeSet<u64> = ticks.iter().copied().collect();
    assert!(want.is_subset(&ticks_started(&engine, "h")), "{ticks:?}");
    assert_eq!(info.state.started, check.ticks_started);
    assert_eq!(info.state.started, ticks_started(&engine, "h").len() as u64);
    assert_eq!(info.state.skipped, check.skipped);
    assert_eq!(info.state.last_tick_ms, ticks.last().copied());
    let listed = engine.schedules().await.unwrap();
    assert_eq!(listed.len(), 1, "one row per schedule, not per link: {listed:?}");
    assert_eq!((listed[0].name.as_str(), listed[0].thread.as_str()), ("h", "schedule:h~3"));
    engine.shutdown().await;
}

#[tokio::test]
async fn every_control_reaches_the_live_link_and_the_name_is_freed_with_all_links() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open_with(file(&dir.path().join("s.db")), &clock, 2).await;
    let hourly = spec(Every::Interval { ms: HOUR });
    engine.create_schedule("h", hourly.clone()).await.unwrap();
    while engine.schedule("h").await.unwrap().unwrap().thread != "schedule:h~3" {
        tick(&engine, &clock, "h").await;
    }
    until_status(&engine, "h", ThreadStatus::Sleeping).await;
    // The head is long completed: creating the name again still finds the schedule.
    assert_eq!(engine.create_schedule("h", hourly.clone()).await.unwrap().thread, "schedule:h~3");
    let other = spec(Every::Interval { ms: 2 * HOUR });
    let e = engine.create_schedule("h", other).await.unwrap_err().to_string();
    assert!(e.contains("exists with another spec"), "{e}");

    let before = ticks_started(&engine, "h").len();
    engine.pause_schedule("h").await.unwrap();
    assert_eq!(engine.schedule("h").await.unwrap().unwrap().status, ThreadStatus::Paused);
    clock.advance_ms(3 * HOUR);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ticks_started(&engine, "h").len(), before, "a paused schedule starts nothing");
    let triggered = engine.trigger_schedule("h").await.unwrap();
    assert_eq!(triggered.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(started(&engine, "h").len(), before + 1, "a trigger starts one");
    engine.resume_schedule("h").await.unwrap();
    caught_up(&engine, &clock, "h").await;
    tick(&engine, &clock, "h").await;
    assert!(ticks_started(&engine, "h").len() > before, "resumed, it ticks again");

    let live = engine.schedule("h").await.unwrap().unwrap().thread;
    engine.delete_schedule("h").await.unwrap();
    let info = engine.schedule("h").await.unwrap().unwrap();
    assert_eq!((info.thread, info.status), (live, ThreadStatus::Cancelled));
    assert!(engine.trigger_schedule("h").await.is_err(), "a deleted schedule starts nothing");
    // Deleted again, every link goes: the name is free, and a new schedule starts at the head.
    engine.delete_schedule("h").await.unwrap();
    assert!(engine.schedule("h").await.unwrap().is_none());
    assert!(engine.schedules().await.unwrap().is_empty());
    let again = engine.create_schedule("h", hourly).await.unwrap();
    assert_eq!(again.thread, "schedule:h");
    engine.shutdown().await;
}

/// A pause issued while the link's last round commits (the clock moved to that round's tick,
/// the pause sent after a varying number of yields) lands on the link or, once it continued,
/// on its successor: either way the schedule is paused when the call returns, and no tick
/// starts until it is resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_around_a_continuation_takes_effect() {
    let mut on_successor = 0;
    for yields in 0..24 {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(JAN_1_2026);
        let engine = open_with(file(&dir.path().join("s.db")), &clock, 2).await;
        engine.create_schedule("p", spec(Every::Interval { ms: HOUR })).await.unwrap();
        // The first round ticks at creation; the second is the head's last.
        until_status(&engine, "p", ThreadStatus::Sleeping).await;
        let next = engine.schedule("p").await.unwrap().unwrap().state.next_tick_ms.unwrap();
        clock.set_ms(next);
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        engine.pause_schedule("p").await.unwrap();
        let info = engine.schedule("p").await.unwrap().unwrap();
        assert_eq!(info.status, ThreadStatus::Paused, "yields {yields}: {info:?}");
        if info.thread != "schedule:p" {
            on_successor += 1;
        }
        let count = ticks_started(&engine, "p").len();
        clock.advance_ms(5 * HOUR);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(ticks_started(&engine, "p").len(), count, "yields {yields}: paused");
        let check = cairn_testkit::check_schedule(engine.store().as_ref(), "p").unwrap().unwrap();
        assert!(check.problems.is_empty(), "yields {yields}: {:?}", check.problems);
        engine.resume_schedule("p").await.unwrap();
        caught_up(&engine, &clock, "p").await;
        tick(&engine, &clock, "p").await;
        let check = cairn_testkit::check_schedule(engine.store().as_ref(), "p").unwrap().unwrap();
        assert!(check.problems.is_empty(), "yields {yields}: {:?}", check.problems);
        engine.shutdown().await;
    }
    crate::common::report(&format!(
        "SCHEDULE pause_around_continuation cases=24 paused_on_successor={on_successor}"
    ));
}

/// A schedule ticks past what one thread's loop bound allows: with the default
/// [`ScheduleSpec::TICKS_PER_RUN`], a schedule of one thread (loop bound
/// `ScheduleSpec::TICKS_PER_RUN`) would fail at the round after it; this one runs
/// `ScheduleSpec::TICKS_PER_RUN + 2` rounds on two links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_ticks_past_one_links_loop_bound() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine =
        open_with(file(&dir.path().join("s.db")), &clock, ScheduleSpec::TICKS_PER_RUN).await;
    let spec = spec(Every::Interval { ms: 1_000 }).catch_up(cairn::CatchUp::One);
    engine.create_schedule("many", spec).await.unwrap();
    let rounds = u64::from(ScheduleSpec::TICKS_PER_RUN) + 2;
    while engine.schedule("many").await.unwrap().unwrap().state.started < rounds {
        tick(&engine, &clock, "many").await;
    }
    let info = engine.schedule("many").await.unwrap().unwrap();
    assert_eq!(info.thread, "schedule:many~1", "{info:?}");
    assert_eq!(info.status, ThreadStatus::Sleeping);
    one_live_link(&engine, "many", 2).await;
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "many").unwrap().unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert_eq!(check.ticks_started, rounds);
    engine.shutdown().await;
}

/// A schedule that continues at every round has more links than the walk's first page, and a
/// name whose ticks (`zz@<ms>`) sort after its threads (`schedule:zz~<n>`) in the label's
/// listing: the walk reads on past the first page and stops at the first tick.
#[tokio::test]
async fn links_past_the_first_page_are_found_and_the_ticks_after_them_are_not_links() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open_with(file(&dir.path().join("s.db")), &clock, 1).await;
    engine.create_schedule("zz", spec(Every::Interval { ms: HOUR })).await.unwrap();
    while engine.schedule("zz").await.unwrap().unwrap().state.started < 12 {
        tick(&engine, &clock, "zz").await;
    }
    let info = engine.schedule("zz").await.unwrap().unwrap();
    assert_eq!(info.thread, "schedule:zz~12", "{info:?}");
    one_live_link(&engine, "zz", 13).await;
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "zz").unwrap().unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert_eq!((check.links, check.continuations, check.ticks_started), (13, 12, 12));
    assert_eq!(engine.schedules().await.unwrap().len(), 1);
    engine.shutdown().await;
}
