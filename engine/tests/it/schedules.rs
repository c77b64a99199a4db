//! Durable schedules on the manual clock: a daily cron schedule in a zone with daylight saving
//! ticks once per local day over a simulated year; the catch-up policies after a downtime; start
//! and end times; a crash at any append of a tick neither loses nor doubles one; pause, resume, trigger and
//! delete; bad specs refused with what is wrong.

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn::clock::{Clock as _, ManualClock};
use cairn::dsl::{END, NodeOutput, START, Workflow};
use cairn::storage::{Options, RedbStore, Store};
use cairn::{CatchUp, Durability, Engine, Every, ScheduleSpec, ThreadStatus};

use crate::common::Tally;
use crate::crash::Dying;

/// 2026-01-01T00:00:00Z.
pub(crate) const JAN_1_2026: u64 = 1_767_225_600_000;
pub(crate) const HOUR: u64 = 3_600_000;

pub(crate) fn report() -> Workflow<Tally> {
    Workflow::<Tally>::builder("report", 1)
        .node("write", |_s, _ctx| async move { Ok(NodeOutput::update((1, "written".to_owned()))) })
        .edge(START, "write")
        .edge("write", END)
        .build()
        .unwrap()
}

async fn open(store: Arc<dyn Store>, clock: &ManualClock) -> Engine {
    Engine::with_store(store)
        .clock(Arc::new(clock.clone()))
        .workflow(&report())
        .open()
        .await
        .unwrap()
}

/// [`open`] with schedules continuing as new every `per_run` rounds, and whole logs (no
/// bounded-history pruning) for `check_schedule`, which reads them from the first event.
pub(crate) async fn open_with(store: Arc<dyn Store>, clock: &ManualClock, per_run: u32) -> Engine {
    Engine::with_store(store)
        .clock(Arc::new(clock.clone()))
        .workflow(&report())
        .schedule_ticks_per_run(per_run)
        .prune_history(false)
        .open()
        .await
        .unwrap()
}

pub(crate) fn file(path: &std::path::Path) -> Arc<dyn Store> {
    let options = Options { durability: Durability::None, ..Options::default() };
    Arc::new(RedbStore::open(path, options).unwrap())
}

/// A spec starting `report` with a valid input.
pub(crate) fn spec(every: Every) -> ScheduleSpec {
    ScheduleSpec::new("report", every).input(serde_json::json!({ "total": 0, "log": [] }))
}

/// The threads schedule `name` started (ticks and triggers), by id.
pub(crate) fn started(engine: &Engine, name: &str) -> BTreeSet<String> {
    let filter = cairn::storage::ThreadFilter {
        labels: vec![("schedule".into(), name.into())],
        workflow_id: Some("report".into()),
        ..Default::default()
    };
    let page = cairn::storage::Page { limit: 10_000, offset: 0 };
    let threads = engine.store().list_threads(&filter, page).wait().unwrap();
    threads.into_iter().map(|r| r.id.as_str().to_owned()).collect()
}

/// The ticks the schedule's threads were started for, from their ids (`<name>@<ms>`; a
/// triggered thread's, `<name>@now-...`, is not a tick's).
pub(crate) fn ticks_started(engine: &Engine, name: &str) -> BTreeSet<u64> {
    let ticks = started(engine, name).into_iter();
    ticks.filter_map(|id| id.rsplit('@').next().and_then(|t| t.parse().ok())).collect()
}

/// The summaries of `thread`'s events (for a failure's message).
fn summaries(engine: &Engine, thread: &str) -> Vec<String> {
    let id = cairn::storage::ThreadId::new(thread).unwrap();
    let events =
        engine.store().read_since(&id, cairn::storage::Seq(0), 1_000).wait().unwrap_or_default();
    events.into_iter().map(|e| e.summary).collect()
}

/// Moves the clock to the schedule's next tick and waits until the schedule has handled it
/// (its last tick moved there).
pub(crate) async fn tick(engine: &Engine, clock: &ManualClock, name: &str) -> u64 {
    let next =
        engine.schedule(name).await.unwrap().unwrap().state.next_tick_ms.expect("a next tick");
    clock.set_ms(next);
    let waited = std::time::Instant::now();
    loop {
        let info = engine.schedule(name).await.unwrap().unwrap();
        if info.state.last_tick_ms == Some(next) && info.status == ThreadStatus::Sleeping {
            return next;
        }
        // 60 s: one run beside crash_controls' 256 cases on 2 cores missed a 20 s bound.
        if matches!(info.status, ThreadStatus::Failed | ThreadStatus::Cancelled)
            || waited.elapsed().as_secs() >= 60
        {
            let outcome = engine.thread(&info.thread).await.unwrap().outcome().await;
            panic!("tick {next} not handled: {info:?}: {outcome:?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn a_daily_schedule_ticks_once_per_local_day_over_a_year_across_daylight_saving() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&dir.path().join("s.db")), &clock).await;
    let every = Every::Cron { expr: "30 2 * * *".into(), tz: "Europe/Berlin".into() };
    engine.create_schedule("nightly", spec(every)).await.unwrap();
    let mut ticks = Vec::new();
    for _ in 0..365 {
        ticks.push(tick(&engine, &clock, "nightly").await);
    }
    let started = ticks_started(&engine, "nightly");
    assert_eq!(started.len(), 365, "one thread per tick");
    assert_eq!(started, ticks.iter().copied().collect::<BTreeSet<_>>());
    // One tick per Berlin calendar day, all at 02:30 local, but the spring-forward day's,
    // which runs right after the gap (03:00 CEST).
    let tz: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
    use chrono::{TimeZone as _, Timelike as _};
    let days: BTreeSet<_> =
        ticks.iter().map(|t| tz.timestamp_millis_opt(*t as i64).unwrap().date_naive()).collect();
    assert_eq!(days.len(), 365, "no day twice, none missed");
    for t in &ticks {
        let local = tz.timestamp_millis_opt(*t as i64).unwrap();
        let day = local.format("%m-%d").to_string();
        let want = if day == "03-29" { (3, 0) } else { (2, 30) };
        assert_eq!((local.hour(), local.minute()), want, "tick on {day}: {local}");
    }
    // Every thread a tick started ran to the end.
    for t in ticks.iter().take(3) {
        let handle =
            engine.thread(&cairn::ScheduleSpec::tick_thread_id("nightly", *t)).await.unwrap();
        assert_eq!(handle.finished().await.unwrap().status, ThreadStatus::Completed);
    }
    engine.shutdown().await;
}

/// An hourly schedule whose engine is down for 5.5 hours: what each policy starts on waking.
#[tokio::test]
async fn after_a_downtime_the_catch_up_policy_decides_which_missed_ticks_start() {
    for (policy, want_started) in [
        (CatchUp::Skip, 0usize),
        (CatchUp::One, 1),
        (CatchUp::All { max: 3 }, 3),
        (CatchUp::All { max: 10 }, 5),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let clock = ManualClock::new(JAN_1_2026);
        let engine = open(file(&path), &clock).await;
        let spec = spec(Every::Interval { ms: HOUR })
            .between(Some(JAN_1_2026 + HOUR), None)
            .catch_up(policy);
        engine.create_schedule("hourly", spec).await.unwrap();
        engine.crash().await;
        drop(engine);
        clock.set_ms(JAN_1_2026 + 5 * HOUR + HOUR / 2);
        let engine = open(file(&path), &clock).await;
        let waited = std::time::Instant::now();
        let info = loop {
            let info = engine.schedule("hourly").await.unwrap().unwrap();
            if info.state.last_tick_ms == Some(JAN_1_2026 + 5 * HOUR)
                && info.status == ThreadStatus::Sleeping
            {
                break info;
            }
            assert!(waited.elapsed().as_secs() < 20, "{policy:?}: {info:?}");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        };
        let started = ticks_started(&engine, "hourly");
        assert_eq!(started.len(), want_started, "{policy:?}: {started:?}");
        let latest: Vec<u64> =
            (1..=5).rev().take(want_started).map(|h| JAN_1_2026 + h * HOUR).collect();
        assert_eq!(started, latest.into_iter().collect(), "{policy:?}: the latest ones");
        assert_eq!(info.state.started, want_started as u64);
        assert_eq!(info.state.skipped, 5 - want_started as u64);
        assert_eq!(info.state.next_tick_ms, Some(JAN_1_2026 + 6 * HOUR));
        engine.shutdown().await;
    }
}

/// A schedule with start and end times ticks from its start up to its end, each tick starting
/// thread `<name>@<tick ms>`, then ends: its thread completes with no next tick.
#[tokio::test]
async fn a_schedule_with_start_and_end_times_ticks_between_them_and_then_completes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&dir.path().join("s.db")), &clock).await;
    let spec = spec(Every::Interval { ms: HOUR })
        .between(Some(JAN_1_2026 + HOUR), Some(JAN_1_2026 + 4 * HOUR));
    engine.create_schedule("ends", spec).await.unwrap();
    assert_eq!(tick(&engine, &clock, "ends").await, JAN_1_2026 + HOUR, "from its start");
    assert_eq!(tick(&engine, &clock, "ends").await, JAN_1_2026 + 2 * HOUR);
    // The tick at +3 h is the last one before the end: the schedule completes with it.
    clock.set_ms(JAN_1_2026 + 3 * HOUR);
    let schedule = engine.thread("schedule:ends").await.unwrap();
    assert_eq!(schedule.finished().await.unwrap().status, ThreadStatus::Completed);
    let info = engine.schedule("ends").await.unwrap().unwrap();
    assert_eq!(
        (info.state.last_tick_ms, info.state.next_tick_ms),
        (Some(JAN_1_2026 + 3 * HOUR), None)
    );
    clock.set_ms(JAN_1_2026 + 10 * HOUR);
    let want: BTreeSet<u64> = (1..=3).map(|h| JAN_1_2026 + h * HOUR).collect();
    assert_eq!(
        ticks_started(&engine, "ends"),
        want,
        "none before the start, none at or after the end"
    );
    for t in &want {
        let handle = engine.thread(&cairn::ScheduleSpec::tick_thread_id("ends", *t)).await.unwrap();
        assert_eq!(handle.finished().await.unwrap().status, ThreadStatus::Completed);
    }
    engine.shutdown().await;
}

/// The store dies at every append of a schedule's first ticks in turn; the reopened engine
/// carries on: every tick's thread exists once, none is missing, none skipped. The schedule
/// continues as new every [`PER_RUN`] rounds, so the crashes cross its continuations: each
/// leaves exactly one live link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_append_of_a_tick_neither_loses_nor_doubles_it() {
    const TICKS: u64 = 5;
    const PER_RUN: u32 = 2;
    let mut crashes = 0;
    for crash_after in 1..80 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let clock = ManualClock::new(JAN_1_2026);
        let dying = Arc::new(Dying::new(file(&path), Some(crash_after)));
        let engine = open_with(dying.clone(), &clock, PER_RUN).await;
        let spec = spec(Every::Interval { ms: 1_000 })
            .between(Some(JAN_1_2026 + 1_000), None)
            .catch_up(CatchUp::All { max: 100 });
        let created = engine.create_schedule("s", spec).await;
        let mut handled = 0;
        if created.is_ok() {
            while handled < TICKS && !dying.dead() {
                let next =
                    engine.schedule("s").await.ok().flatten().and_then(|i| i.state.next_tick_ms);
                let Some(next) = next else { break };
                clock.set_ms(clock.now_ms().max(next));
                let waited = std::time::Instant::now();
                while !dying.dead()
                    && engine.schedule("s").await.ok().flatten().and_then(|i| i.state.last_tick_ms)
                        != Some(next)
                {
                    assert!(
                        waited.elapsed().as_secs() < 20,
                        "crash_after {crash_after}: the tick at {next} was not handled with the \
                         clock at {}: {:?}, its log: {:?}",
                        clock.now_ms(),
                        engine.schedule("s").await,
                        summaries(&engine, "schedule:s")
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                handled += 1;
            }
        }
        engine.crash().await;
        drop(engine);
        if !dying.dead() {
            // Past the last append of the ticks: every crash point has been covered.
            break;
        }
        crashes += 1;
        drop(dying);
        let engine = open_with(file(&path), &clock, PER_RUN).await;
        if engine.schedule("s").await.unwrap().is_none() {
            // The crash came before the schedule was created: nothing to check.
            engine.shutdown().await;
            continue;
        }
        let want: BTreeSet<u64> = (1..=TICKS).map(|k| JAN_1_2026 + k * 1_000).collect();
        while engine.schedule("s").await.unwrap().unwrap().state.last_tick_ms
            < Some(JAN_1_2026 + TICKS * 1_000)
        {
            tick(&engine, &clock, "s").await;
        }
        let info = engine.schedule("s").await.unwrap().unwrap();
        let started = ticks_started(&engine, "s");
        assert!(want.is_subset(&started), "crash_after {crash_after}: {started:?}");
        assert_eq!(info.state.skipped, 0, "crash_after {crash_after}");
        assert_eq!(info.state.started as usize, started.len(), "crash_after {crash_after}");
        assert!(engine.store().verify().unwrap().is_clean());
        let check = cairn_testkit::check_schedule(engine.store().as_ref(), "s").unwrap().unwrap();
        assert!(check.problems.is_empty(), "crash_after {crash_after}: {:?}", check.problems);
        // Rounds (a catch-up handles several ticks in one) / PER_RUN continuations, each link
        // but the live one completed and continued as the next.
        assert_eq!(check.links, check.rounds / u64::from(PER_RUN) + 1, "{check:?}");
        crate::schedule_chain::one_live_link(&engine, "s", check.links).await;
        engine.shutdown().await;
    }
    assert!(crashes >= 10, "the crash points covered the ticks: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY schedule_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// A manual clock that moves 1 ms forward at every reading, as a real one does between two
/// readings of a node.
struct Creeping(ManualClock);

impl cairn::clock::Clock for Creeping {
    fn now_ms(&self) -> u64 {
        self.0.advance_ms(1);
        self.0.now_ms()
    }
    fn sleep_until(&self, at_ms: u64) -> futures::future::BoxFuture<'static, ()> {
        self.0.sleep_until(at_ms)
    }
}

/// The schedule's timer is set for its next tick exactly, although the clock moved between the
/// node's reading of it and its sleep (a sleep for `next - now` woke that much past the tick:
/// with a manual clock set to the tick, never).
#[tokio::test]
async fn a_schedule_sleeps_until_its_tick_whatever_the_clock_did_since_it_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = Engine::with_store(file(&dir.path().join("s.db")))
        .clock(Arc::new(Creeping(clock.clone())))
        .workflow(&report())
        .open()
        .await
        .unwrap();
    let spec = spec(Every::Interval { ms: HOUR }).between(Some(JAN_1_2026 + HOUR), None);
    engine.create_schedule("c", spec).await.unwrap();
    let id = cairn::storage::ThreadId::new("schedule:c").unwrap();
    let waited = std::time::Instant::now();
    let timer = loop {
        let events = engine.store().read_since(&id, cairn::storage::Seq(0), 100).wait().unwrap();
        let set = events.iter().find(|e| e.kind == cairn::storage::EventKind::TimerSet);
        if let Some(set) = set {
            match cairn_core::codec::decode_body(&mut set.data.clone()).unwrap() {
                cairn::event::Body::TimerSet { until_ms, .. } => break until_ms,
                other => panic!("a timer_set event holds {other:?}"),
            }
        }
        assert!(waited.elapsed().as_secs() < 20, "the schedule never slept: {events:?}");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    };
    assert_eq!(timer, JAN_1_2026 + HOUR, "the timer is the first tick, not later");
    let info = engine.schedule("c").await.unwrap().unwrap();
    assert_eq!(info.state.next_tick_ms, Some(timer));
    clock.set_ms(timer);
    let waited = std::time::Instant::now();
    while engine.schedule("c").await.unwrap().unwrap().state.last_tick_ms != Some(timer) {
        assert!(waited.elapsed().as_secs() < 20, "the tick was not handled at its time");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    assert_eq!(ticks_started(&engine, "c"), BTreeSet::from([timer]));
    engine.shutdown().await;
}

#[tokio::test]
async fn schedules_pause_resume_trigger_delete_and_refuse_bad_specs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&dir.path().join("s.db")), &clock).await;
    let hourly = spec(Every::Interval { ms: HOUR });
    engine.create_schedule("h", hourly.clone()).await.unwrap();
    assert_eq!(engine.create_schedule("h", hourly.clone()).await.unwrap().name, "h", "same spec");
    let other = spec(Every::Interval { ms: 2 * HOUR });
    let e = engine.create_schedule("h", other).await.unwrap_err().to_string();
    assert!(e.contains("exists with another spec"), "{e}");
    for (spec, what) in [
        (
            ScheduleSpec::new(
                "report",
                Every::Cron { expr: "99 * * * *".into(), tz: "UTC".into() },
            ),
            "99 * * * *",
        ),
        (
            ScheduleSpec::new(
                "report",
                Every::Cron { expr: "* * * * *".into(), tz: "Moon/Base".into() },
            ),
            "Moon/Base",
        ),
        (ScheduleSpec::new("nope", Every::Interval { ms: 1 }), "nope"),
        (ScheduleSpec::new("report", Every::Interval { ms: 1 }), "not a valid state of report"),
        (spec(Every::Interval { ms: 0 }), "0 ms"),
    ] {
        let e = engine.create_schedule("bad", spec).await.unwrap_err().to_string();
        assert!(e.contains(what), "{e} should name {what}");
    }
    assert!(engine.schedule("bad").await.unwrap().is_none(), "a refused spec leaves nothing");
    assert!(engine.create_schedule("a b", hourly).await.is_err());

    tick(&engine, &clock, "h").await;
    // The schedule's first tick is due at its creation: it may have been handled before the
    // tick above read the next one (then that was the second), so count from here.
    let before = ticks_started(&engine, "h").len();
    assert!((1..=2).contains(&before), "{before} ticks");
    engine.pause_schedule("h").await.unwrap();
    assert_eq!(engine.schedule("h").await.unwrap().unwrap().status, ThreadStatus::Paused);
    clock.advance_ms(3 * HOUR);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(ticks_started(&engine, "h").len(), before, "a paused schedule starts nothing");
    let triggered = engine.trigger_schedule("h").await.unwrap();
    assert_eq!(triggered.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(ticks_started(&engine, "h").len(), before, "a trigger is not a tick");
    assert_eq!(started(&engine, "h").len(), before + 1, "trigger starts one now");
    engine.resume_schedule("h").await.unwrap();
    engine.delete_schedule("h").await.unwrap();
    assert_eq!(engine.schedule("h").await.unwrap().unwrap().status, ThreadStatus::Cancelled);
    assert!(engine.pause_schedule("missing").await.is_err());
    let listed: Vec<String> =
        engine.schedules().await.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(listed, vec!["h".to_owned()]);
    engine.shutdown().await;
}

/// Found by the controls proptest: a trigger's thread had a tick's id, `<name>@<now ms>`, so
/// a trigger at a tick's time (the clock moved to the tick, the schedule paused) and the tick
/// made one thread between them (the later start returned the earlier one's thread), and two
/// triggers in one millisecond one. And a deleted schedule still started a thread when
/// triggered. Now a trigger's thread is its own, and a deleted schedule refuses triggers.
#[tokio::test]
async fn a_trigger_at_a_tick_time_runs_beside_the_tick_and_a_deleted_schedule_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&dir.path().join("s.db")), &clock).await;
    let spec = spec(Every::Interval { ms: HOUR }).catch_up(CatchUp::One);
    engine.create_schedule("h", spec).await.unwrap();
    let first = tick(&engine, &clock, "h").await;
    let before = started(&engine, "h");
    engine.pause_schedule("h").await.unwrap();
    let at = first + HOUR;
    clock.set_ms(at);
    let a = engine.trigger_schedule("h").await.unwrap();
    let b = engine.trigger_schedule("h").await.unwrap();
    assert_ne!(a.id(), b.id(), "two triggers in one millisecond: two runs");
    engine.resume_schedule("h").await.unwrap();
    let waited = std::time::Instant::now();
    while engine.schedule("h").await.unwrap().unwrap().state.last_tick_ms != Some(at) {
        assert!(waited.elapsed().as_secs() < 20, "the tick at {at} was not handled");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let now = started(&engine, "h");
    let tick = cairn::ScheduleSpec::tick_thread_id("h", at);
    assert!(now.contains(&tick), "the tick's own thread: {now:?}");
    assert_eq!(now.len(), before.len() + 3, "the tick and two triggers: {now:?}");
    assert!(![a.id().as_str(), b.id().as_str()].contains(&tick.as_str()));
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "h").unwrap().unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert_eq!(check.others.len(), 2, "{check:?}");

    engine.delete_schedule("h").await.unwrap();
    let e = engine.trigger_schedule("h").await.unwrap_err().to_string();
    assert!(e.contains("deleted"), "{e}");
    assert_eq!(started(&engine, "h").len(), before.len() + 3, "a deleted schedule starts nothing");
    engine.shutdown().await;
}

/// `check_schedule` finds a history gone wrong: a tick's thread deleted by hand is reported
/// missing (the check reads the store only, and knows what each round started).
#[tokio::test]
async fn check_schedule_reports_a_started_tick_whose_thread_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(file(&dir.path().join("s.db")), &clock).await;
    engine.create_schedule("h", spec(Every::Interval { ms: HOUR })).await.unwrap();
    let at = tick(&engine, &clock, "h").await;
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "h").unwrap().unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert!(check.ticks_started >= 1 && check.rounds >= 1, "{check:?}");
    let id = cairn::ScheduleSpec::tick_thread_id("h", at);
    engine.thread(&id).await.unwrap().finished().await.unwrap();
    engine.delete(&id, cairn::storage::DeleteOptions::default()).await.unwrap();
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "h").unwrap().unwrap();
    let missing = format!("tick {id} was started and its thread is missing");
    assert!(check.problems.contains(&missing), "{:?}", check.problems);
    assert!(cairn_testkit::check_schedule(engine.store().as_ref(), "nope").unwrap().is_none());
    engine.shutdown().await;
}

/// `check_schedule` beside an engine that runs the schedule: a tick started while the check
/// read the logs (its start recorded after the read, its thread listed after) is not taken for
/// a triggered thread. The crash sweep read `others` this way to tell whether a trigger in
/// flight at a crash had made its thread, and took such a tick for it now and then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_schedule_beside_a_running_schedule_counts_no_tick_as_triggered() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open_with(file(&dir.path().join("s.db")), &clock, 1_000).await;
    engine.create_schedule("h", spec(Every::Interval { ms: 1_000 })).await.unwrap();
    let mover = {
        let clock = clock.clone();
        tokio::spawn(async move {
            for _ in 0..400 {
                clock.advance_ms(1_000);
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        })
    };
    let mut checks = 0;
    while !mover.is_finished() {
        let check = cairn_testkit::check_schedule(engine.store().as_ref(), "h").unwrap().unwrap();
        assert!(check.others.is_empty(), "check {checks}: triggered {:?}", check.others);
        assert!(check.problems.is_empty(), "check {checks}: {:?}", check.problems);
        checks += 1;
        tokio::task::yield_now().await;
    }
    let check = cairn_testkit::check_schedule(engine.store().as_ref(), "h").unwrap().unwrap();
    assert!(check.ticks_started > 10 && checks > 10, "{checks} checks: {check:?}");
    engine.shutdown().await;
}

/// A schedule continuing as new every round while retention passes delete each link it
/// leaves: a look, or a trigger, that found a link the pass deleted next finds its successor.
/// A look failed in 1 of 2 runs before (the store's "unknown thread" was not the engine's,
/// which the look retries on; crash_controls met it as a trigger's "unknown thread").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_continuing_as_new_under_retention_passes_is_always_found() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(JAN_1_2026);
    let engine = Engine::with_store(file(&dir.path().join("s.db")))
        .clock(Arc::new(clock.clone()))
        .workflow(&report())
        .schedule_ticks_per_run(1)
        .retention(cairn::RetentionPolicy::after_ms(0).every_ms(u64::MAX / 4))
        .open()
        .await
        .unwrap();
    engine.create_schedule("h", spec(Every::Interval { ms: 1_000 })).await.unwrap();
    let mover = {
        let (clock, engine) = (clock.clone(), engine.clone());
        tokio::spawn(async move {
            for _ in 0..400 {
                clock.advance_ms(1_000);
                engine.retention_pass().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
    };
    let mut looks = 0;
    while !mover.is_finished() {
        let found = engine.schedule("h").await.unwrap();
        assert!(found.is_some(), "look {looks}: schedule h not found");
        engine.trigger_schedule("h").await.unwrap();
        looks += 1;
    }
    mover.await.unwrap();
    assert!(looks > 10, "{looks} looks");
    engine.shutdown().await;
}
