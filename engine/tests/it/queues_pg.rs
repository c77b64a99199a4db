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
            .queue("jobs", limits.clone())
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
            .queue("rated", limits.clone())
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

/// Flow control with two engines on one database: a debounced burst on one key, its starts
/// alternating between the engines, is one run with the last input; and starts of a batching
/// queue from both engines are each taken by exactly one batch run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_debounce_one_key_together_and_batch_each_start_once() {
    use serde_json::json;
    let Some(cluster) = Cluster::start("queues_flow_two_engines") else { return };
    let url = cluster.new_database();
    let wf = crate::queue_flow::echo();
    let debounce = QueueLimits { debounce_ms: Some(300), ..QueueLimits::default() };
    let batch = QueueLimits { batch_max: Some(3), ..QueueLimits::default() };
    let open = || {
        Engine::builder(&url)
            .durability(Durability::Immediate)
            .poll_ms(50)
            .queue("deb", debounce.clone())
            .queue("bat", batch.clone())
            .workflow(&wf)
            .open()
    };
    let (one, two) = (open().await.unwrap(), open().await.unwrap());
    for i in 1..=6 {
        let engine = if i % 2 == 0 { &two } else { &one };
        let options = StartOptions::id(format!("d-{i}")).on_queue("deb").key("doc");
        engine.start_json("echo", i, options).await.unwrap();
    }
    let last = one.thread("d-6").await.unwrap().wait().await.unwrap();
    assert_eq!(last.output, Some(json!({ "ran": 6 })));
    for i in 1..=5 {
        let waited = one.thread(&format!("d-{i}")).await.unwrap().wait().await;
        assert!(matches!(waited, Err(cairn::Error::Debounced { .. })), "d-{i}: {waited:?}");
    }
    for i in 1..=6 {
        let engine = if i % 2 == 0 { &two } else { &one };
        let options = StartOptions::id(format!("b-{i}")).on_queue("bat");
        engine.start_json("echo", i, options).await.unwrap();
    }
    let mut taken = std::collections::BTreeMap::<String, Vec<u64>>::new();
    for i in 1..=6 {
        match one.thread(&format!("b-{i}")).await.unwrap().wait().await {
            Err(cairn::Error::Batched { into, .. }) => taken.entry(into).or_default().push(i),
            other => panic!("b-{i}: {other:?}"),
        }
    }
    assert_eq!(taken.values().map(Vec::len).sum::<usize>(), 6, "{taken:?}");
    for (run, members) in &taken {
        let out = one.thread(run).await.unwrap().wait().await.unwrap();
        assert_eq!(out.output, Some(json!({ "ran": members })), "{run}");
    }
    let ran: Vec<String> = whole_log(one.store().as_ref())
        .into_iter()
        .filter_map(|e| {
            let thread = e.thread.to_string();
            let body = cairn::blocking::decode(one.store().as_ref(), e).unwrap().body;
            matches!(body, Body::StatusChanged { to: ThreadStatus::Running, .. }).then_some(thread)
        })
        .collect();
    let mut expected: Vec<String> =
        std::iter::once("d-6".to_string()).chain(taken.into_keys()).collect();
    let mut ran = ran;
    ran.sort();
    ran.dedup();
    expected.sort();
    assert_eq!(ran, expected, "one run per burst and per batch");
    assert!(one.store().verify().unwrap().is_clean());
    one.shutdown().await;
    two.shutdown().await;
}
