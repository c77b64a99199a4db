//! Named queues (`docs/queues.md`): concurrency, per-key and rate limits, priority, fairness
//! between keys, dedup, controls of a queued thread, and a crash with threads in line and
//! running. Concurrency is counted from the log (a thread runs from its first `Running` status
//! event to its terminal one, in lsn order), never from the engine's memory.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::storage::{QueueLimits, RateLimit, Store};
use cairn::{Durability, END, Engine, RecoveryPolicy, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, report};

/// One node that sleeps `ms` (real time) and adds 1: long enough for runs to overlap.
pub fn napper(id: &str, ms: u64) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .node("nap", move |_s: Arc<Tally>, _ctx: Ctx| async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok(NodeOutput::update((1, String::new())))
        })
        .edge(START, "nap")
        .edge("nap", END)
        .build()
        .unwrap()
}

fn limits(global: Option<u32>, per_key: Option<u32>) -> QueueLimits {
    QueueLimits { concurrency_max: global, per_key_max: per_key, ..QueueLimits::default() }
}

/// Threads in the order their first `Running` status event was committed, and the largest
/// number running at once, in all and per key (a thread's key is its id up to the first '-'),
/// swept over the whole log in lsn order.
pub struct Runs {
    pub order: Vec<String>,
    pub max_global: usize,
    pub max_per_key: BTreeMap<String, usize>,
    pub ended: usize,
}

/// Every event of the store, in lsn order, read a page at a time.
pub fn whole_log(store: &dyn Store) -> Vec<cairn::storage::Event> {
    let mut events = Vec::new();
    let mut after = cairn::Lsn(0);
    loop {
        let page = store.read_all_since(after, 1_000).wait().unwrap();
        let Some(last) = page.last() else { break };
        after = last.bookmark.lsn;
        events.extend(page);
    }
    events
}

pub fn runs_from_log(store: &dyn Store) -> Runs {
    let events = whole_log(store);
    let mut running: BTreeMap<String, bool> = BTreeMap::new();
    let mut runs =
        Runs { order: Vec::new(), max_global: 0, max_per_key: BTreeMap::new(), ended: 0 };
    for e in events {
        let thread = e.thread.to_string();
        let Some(key) = thread.split_once('-').map(|(k, _)| k.to_string()) else { continue };
        let body = cairn::blocking::decode(store, e).unwrap().body;
        let Body::StatusChanged { to, .. } = body else { continue };
        let was = running.get(&thread).copied().unwrap_or(false);
        if to == ThreadStatus::Running && !was {
            if !runs.order.contains(&thread) {
                runs.order.push(thread.clone());
            }
            running.insert(thread.clone(), true);
        } else if to.is_terminal() && was {
            running.insert(thread.clone(), false);
            runs.ended += 1;
        } else {
            continue;
        }
        let global = running.values().filter(|r| **r).count();
        let of_key =
            running.iter().filter(|(t, r)| **r && t.starts_with(&format!("{key}-"))).count();
        runs.max_global = runs.max_global.max(global);
        let m = runs.max_per_key.entry(key).or_default();
        *m = (*m).max(of_key);
    }
    runs
}

fn on(queue: &str, key: &str, id: String) -> StartOptions {
    StartOptions::id(id).on_queue(queue).key(key)
}

#[tokio::test]
async fn the_global_and_per_key_limits_hold_under_load_counted_from_the_log() {
    let (_d, path) = db();
    let wf = napper("nap", 3);
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .concurrency(32)
        .queue("jobs", limits(Some(4), Some(2)))
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let mut handles = Vec::new();
    for i in 0..40 {
        for key in ["a", "b", "c"] {
            handles.push(
                engine
                    .start_json("nap", Tally::default(), on("jobs", key, format!("{key}-{i}")))
                    .await
                    .unwrap(),
            );
        }
    }
    for h in &handles {
        assert_eq!(h.finished().await.unwrap().status, ThreadStatus::Completed);
    }
    let runs = runs_from_log(engine.store().as_ref());
    report(&format!(
        "QUEUES limits: threads={} max_global={} (limit 4) max_per_key={:?} (limit 2)",
        runs.ended, runs.max_global, runs.max_per_key
    ));
    assert_eq!(runs.ended, 120);
    assert!(runs.max_global <= 4, "global limit exceeded: {}", runs.max_global);
    assert!(
        runs.max_per_key.values().all(|m| *m <= 2),
        "per-key limit exceeded: {:?}",
        runs.max_per_key
    );
    // The limits were reached, not merely never approached.
    assert!(runs.max_global >= 3, "{}", runs.max_global);
    let q = &engine.queues().await.unwrap()[0];
    assert_eq!((q.running, q.waiting, q.keys.len()), (0, 0, 0), "{q:?}");
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

/// Starts threads on an engine that admits nothing (recovery `Park` runs no admitter), so that
/// the admission order is decided with every thread in line.
async fn enqueue_all(
    path: &std::path::Path,
    wf: &Workflow<Tally>,
    queue: QueueLimits,
    starts: Vec<StartOptions>,
) {
    let engine = Engine::builder(path)
        .durability(Durability::None)
        .recovery(RecoveryPolicy::Park)
        .queue("q", queue)
        .workflow(wf)
        .open()
        .await
        .unwrap();
    for options in starts {
        let h = engine.start_json("nap", Tally::default(), options).await.unwrap();
        assert_eq!(h.status().await.unwrap(), ThreadStatus::Queued);
    }
    engine.shutdown().await;
}

#[tokio::test]
async fn a_key_with_a_thousand_waiting_does_not_starve_a_key_with_ten() {
    let (_d, path) = db();
    let wf = napper("nap", 0);
    let mut starts: Vec<StartOptions> =
        (0..1_000).map(|i| on("q", "big", format!("big-{i}"))).collect();
    starts.extend((0..10).map(|i| on("q", "small", format!("small-{i}"))));
    enqueue_all(&path, &wf, limits(Some(1), None), starts).await;
    let engine =
        Engine::builder(&path).durability(Durability::None).workflow(&wf).open().await.unwrap();
    for i in 0..10 {
        engine.thread(&format!("small-{i}")).await.unwrap().finished().await.unwrap();
    }
    let runs = runs_from_log(engine.store().as_ref());
    engine.shutdown().await;
    // Round robin between keys: big-0, small-0, big-1, small-1, ...: the ten small threads ran
    // among the first twenty, however many big ones wait.
    let first: Vec<&str> = runs.order.iter().take(20).map(String::as_str).collect();
    let expected: Vec<String> =
        (0..10).flat_map(|i| [format!("big-{i}"), format!("small-{i}")]).collect();
    assert_eq!(first, expected.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(runs.max_global, 1);
    report(&format!(
        "QUEUES fairness: 1000 big + 10 small, last small ran at position {}",
        runs.order.iter().position(|t| t == "small-9").unwrap() + 1
    ));
}

#[tokio::test]
async fn higher_priority_runs_first_and_fifo_within_a_priority() {
    let (_d, path) = db();
    let wf = napper("nap", 0);
    let mut starts = Vec::new();
    for i in 0..4 {
        for (name, p) in [("low", 1), ("high", 9), ("mid", 5)] {
            starts.push(on("q", "", format!("{name}-{i}")).priority(p));
        }
    }
    enqueue_all(&path, &wf, limits(Some(1), None), starts).await;
    let engine =
        Engine::builder(&path).durability(Durability::None).workflow(&wf).open().await.unwrap();
    for name in ["low", "high", "mid"] {
        for i in 0..4 {
            engine.thread(&format!("{name}-{i}")).await.unwrap().finished().await.unwrap();
        }
    }
    let runs = runs_from_log(engine.store().as_ref());
    engine.shutdown().await;
    let expected: Vec<String> = ["high", "mid", "low"]
        .iter()
        .flat_map(|n| (0..4).map(move |i| format!("{n}-{i}")))
        .collect();
    assert_eq!(runs.order, expected);
}

#[tokio::test]
async fn the_rate_limit_admits_n_per_window_of_the_engine_clock() {
    let (_d, path) = db();
    let wf = napper("nap", 0);
    let clock = ManualClock::new(1_000_000);
    let rate = QueueLimits {
        rate: Some(RateLimit { starts: 2, period_ms: 1_000 }),
        ..QueueLimits::default()
    };
    // Park: no background admitter; each pass below is the test's.
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .clock(Arc::new(clock.clone()))
        .recovery(RecoveryPolicy::Park)
        .queue("q", rate)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    for i in 0..5 {
        engine.start_json("nap", Tally::default(), on("q", "", format!("r-{i}"))).await.unwrap();
    }
    let mut admitted = Vec::new();
    for (advance_ms, expected) in [(0, 2), (400, 0), (599, 0), (2, 2), (999, 0), (1, 1), (5_000, 0)]
    {
        clock.advance_ms(advance_ms);
        let now = engine.admit_queued().await.unwrap();
        assert_eq!(now.len(), expected, "after +{advance_ms} ms: {now:?}");
        admitted.extend(now);
    }
    let ids: Vec<String> = admitted.iter().map(ToString::to_string).collect();
    assert_eq!(ids, ["r-0", "r-1", "r-2", "r-3", "r-4"]);
    for id in &ids {
        engine.thread(id).await.unwrap().finished().await.unwrap();
    }
    engine.shutdown().await;
}

#[tokio::test]
async fn a_dedup_key_returns_the_waiting_or_running_thread_and_is_free_once_it_ended() {
    let (_d, path) = db();
    let wf = napper("nap", 0);
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .recovery(RecoveryPolicy::Park)
        .queue("q", limits(Some(1), None))
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let dedup = |id: &str| StartOptions::id(id).on_queue("q").dedup("report-7");
    let first = engine.start_json("nap", Tally::default(), dedup("d-1")).await.unwrap();
    let again = engine.start_json("nap", Tally::default(), dedup("d-2")).await.unwrap();
    assert_eq!(again.id(), first.id(), "a waiting thread holds the key");
    assert!(engine.store().thread(&cairn::ThreadId::new("d-2").unwrap()).wait().unwrap().is_none());
    assert_eq!(engine.admit_queued().await.unwrap().len(), 1);
    let running = engine.start_json("nap", Tally::default(), dedup("d-3")).await.unwrap();
    assert_eq!(running.id(), first.id(), "an admitted thread holds the key");
    first.finished().await.unwrap();
    let after = engine.start_json("nap", Tally::default(), dedup("d-4")).await.unwrap();
    assert_eq!(after.id().as_str(), "d-4", "the key is free once its thread ended");
    assert_eq!(after.status().await.unwrap(), ThreadStatus::Queued);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_queued_thread_can_be_paused_resumed_cancelled_and_deleted_and_waits_for_its_workflow() {
    let (_d, path) = db();
    let wf = napper("nap", 0);
    let other = napper("other", 0);
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .recovery(RecoveryPolicy::Park)
        .queue("q", limits(Some(10), None))
        .workflow(&wf)
        .workflow(&other)
        .open()
        .await
        .unwrap();
    for id in ["p-1", "c-1", "x-1"] {
        engine.start_json("nap", Tally::default(), on("q", "", id.into())).await.unwrap();
    }
    engine.start_json("other", Tally::default(), on("q", "", "o-1".into())).await.unwrap();
    engine.pause("p-1").await.unwrap();
    engine.cancel("c-1", "not needed").await.unwrap();
    engine.delete("x-1", cairn::storage::DeleteOptions { force: true }).await.unwrap();
    let q = &engine.queues().await.unwrap()[0];
    assert_eq!((q.waiting, q.running), (2, 0), "{q:?}");
    engine.shutdown().await;
    drop(engine);

    // An engine without workflow "other" admits nothing of it, and not the paused thread.
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .recovery(RecoveryPolicy::Park)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    assert!(engine.admit_queued().await.unwrap().is_empty());
    engine.resume("p-1").await.unwrap();
    assert_eq!(engine.thread("p-1").await.unwrap().status().await.unwrap(), ThreadStatus::Queued);
    let admitted = engine.admit_queued().await.unwrap();
    assert_eq!(admitted.iter().map(ToString::to_string).collect::<Vec<_>>(), ["p-1"]);
    engine.thread("p-1").await.unwrap().finished().await.unwrap();
    assert_eq!(engine.thread("o-1").await.unwrap().status().await.unwrap(), ThreadStatus::Queued);
    assert_eq!(
        engine.thread("c-1").await.unwrap().status().await.unwrap(),
        ThreadStatus::Cancelled
    );
    assert!(engine.thread("x-1").await.is_err());
    let q = &engine.queues().await.unwrap()[0];
    assert_eq!((q.waiting, q.running), (1, 0), "{q:?}");
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

#[tokio::test]
async fn a_crash_with_threads_in_line_and_running_loses_none_and_admits_none_twice() {
    let (_d, path) = db();
    let wf = napper("nap", 20);
    let open = || {
        Engine::builder(&path)
            .durability(Durability::Immediate)
            .queue("jobs", limits(Some(3), Some(2)))
            .workflow(&wf)
            .open()
    };
    let engine = open().await.unwrap();
    for i in 0..12 {
        let key = ["a", "b"][i % 2];
        engine
            .start_json("nap", Tally::default(), on("jobs", key, format!("{key}-{i}")))
            .await
            .unwrap();
    }
    // Crash once some ran and while others run and wait.
    engine.thread("a-0").await.unwrap().finished().await.unwrap();
    engine.crash().await;
    drop(engine);
    let engine = open().await.unwrap();
    for i in 0..12 {
        let key = ["a", "b"][i % 2];
        let out = engine.thread(&format!("{key}-{i}")).await.unwrap().finished().await.unwrap();
        assert_eq!(out.status, ThreadStatus::Completed);
    }
    let runs = runs_from_log(engine.store().as_ref());
    assert_eq!(runs.ended, 12, "every thread ended once");
    assert!(
        runs.max_global <= 3 && runs.max_per_key.values().all(|m| *m <= 2),
        "{:?} {}",
        runs.max_per_key,
        runs.max_global
    );
    let q = &engine.queues().await.unwrap()[0];
    assert_eq!((q.running, q.waiting), (0, 0));
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}
