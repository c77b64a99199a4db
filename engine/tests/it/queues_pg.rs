//! Named queues on PostgreSQL: two engines on one database never run more threads of a queue
//! together than its limits allow (admission is the store's, under the queue row's lock),
//! counted from the log; nor admit more than a rate limit's N starts per period together, on a
//! manual clock.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::event::Body;
use cairn::storage::{QueueLimits, RateLimit};
use cairn::{Durability, Engine, RecoveryPolicy, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::{Tally, report};
use crate::queues::{napper, runs_from_log, whole_log};

#[tokio::test]
async fn two_engines_on_one_database_never_exceed_the_global_and_per_key_limits_together() {
    let Some(cluster) = Cluster::start("queues_two_engines") else { return };
    let url = cluster.new_database();
    let wf = napper("nap", 5);
    let limits =
        QueueLimits { concurrency_max: Some(3), per_key_max: Some(2), ..QueueLimits::default() };
    let open = || {
        Engine::builder(&url)
            .durability(Durability::Immediate)
            .poll_ms(50)
            .concurrency(16)
            .queue("jobs", limits)
            .workflow(&wf)
            .open()
    };
    let (one, two) = (open().await.unwrap(), open().await.unwrap());
    let mut handles = Vec::new();
    for i in 0..20 {
        for (engine, key) in [(&one, "a"), (&two, "b"), (&one, "c")] {
            let options = StartOptions::id(format!("{key}-{i}")).on_queue("jobs").key(key);
            handles.push(engine.start_json("nap", Tally::default(), options).await.unwrap());
        }
    }
    for h in &handles {
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), h.finished())
            .await
            .expect("every queued thread runs")
            .unwrap();
        assert_eq!(out.status, ThreadStatus::Completed);
    }
    let runs = runs_from_log(one.store().as_ref());
    report(&format!(
        "QUEUES postgres two engines: threads={} max_global={} (limit 3) max_per_key={:?} (limit 2)",
        runs.ended, runs.max_global, runs.max_per_key
    ));
    assert_eq!(runs.ended, 60);
    assert!(runs.max_global <= 3, "{}", runs.max_global);
    assert!(runs.max_per_key.values().all(|m| *m <= 2), "{:?}", runs.max_per_key);
    let q = &one.queues().await.unwrap()[0];
    assert_eq!((q.running, q.waiting), (0, 0), "{q:?}");
    assert!(one.store().verify().unwrap().is_clean());
    one.shutdown().await;
    two.shutdown().await;
}

/// A rate limit of 3 starts per second of a shared manual clock, 14 threads started on two
/// engines of one database, both asking for admission at once (twice each) after every move
/// of the clock: together they admit exactly 3 per window until the line is empty, and the
/// log's first `Running` event of each thread, by window, agrees.
#[tokio::test]
async fn two_engines_on_one_database_never_start_more_than_the_rate_limit_per_period_together() {
    const STARTS: u32 = 3;
    const PERIOD_MS: u64 = 1_000;
    const THREADS: usize = 14;
    let Some(cluster) = Cluster::start("queues_rate_two_engines") else { return };
    let url = cluster.new_database();
    let wf = napper("nap", 0);
    let clock = ManualClock::new(1_000_000);
    let limits = QueueLimits {
        rate: Some(RateLimit { starts: STARTS, period_ms: PERIOD_MS }),
        ..QueueLimits::default()
    };
    // Park: no background admitter; every admission pass is the test's.
    let open = || {
        Engine::builder(&url)
            .durability(Durability::Immediate)
            .clock(Arc::new(clock.clone()))
            .recovery(RecoveryPolicy::Park)
            .queue("rated", limits)
            .workflow(&wf)
            .open()
    };
    let (one, two) = (open().await.unwrap(), open().await.unwrap());
    for i in 0..THREADS {
        let engine = if i.is_multiple_of(2) { &one } else { &two };
        let options = StartOptions::id(format!("r-{i}")).on_queue("rated");
        engine.start_json("nap", Tally::default(), options).await.unwrap();
    }
    let mut per_window = Vec::new();
    let mut admitted = 0;
    while admitted < THREADS {
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (a, b) = tokio::join!(one.admit_queued(), two.admit_queued());
            ids.extend(a.unwrap().into_iter().chain(b.unwrap()));
        }
        // Run to their end before the clock moves: their events carry this window's time.
        for id in &ids {
            one.thread(id.as_str()).await.unwrap().finished().await.unwrap();
        }
        let now = ids.len();
        admitted += now;
        per_window.push(now);
        assert_eq!(now, (STARTS as usize).min(THREADS - admitted + now), "{per_window:?}");
        clock.advance_ms(PERIOD_MS);
        assert!(per_window.len() <= THREADS, "the line does not empty: {per_window:?}");
    }
    for i in 0..THREADS {
        let out = one.thread(&format!("r-{i}")).await.unwrap().outcome().await.unwrap();
        assert_eq!(out.status, ThreadStatus::Completed);
    }
    // From the log: the first Running event of each thread, by window of the clock.
    let store = one.store().clone();
    let mut first_run = std::collections::BTreeMap::new();
    for e in whole_log(store.as_ref()) {
        let (thread, at) = (e.thread.to_string(), e.bookmark.at_ms);
        if let Body::StatusChanged { to: ThreadStatus::Running, .. } =
            cairn::blocking::decode(store.as_ref(), e).unwrap().body
        {
            first_run.entry(thread).or_insert(at);
        }
    }
    let mut by_window = std::collections::BTreeMap::<u64, usize>::new();
    for at in first_run.values() {
        *by_window.entry((at - 1_000_000) / PERIOD_MS).or_default() += 1;
    }
    report(&format!(
        "QUEUES postgres two engines rate: threads={} limit={STARTS}/{PERIOD_MS}ms \
         admitted_per_window={per_window:?} max_started_in_a_window={}",
        first_run.len(),
        by_window.values().max().copied().unwrap_or(0)
    ));
    assert_eq!(first_run.len(), THREADS);
    assert!(by_window.values().all(|n| *n <= STARTS as usize), "{by_window:?}");
    one.shutdown().await;
    two.shutdown().await;
}
