//! Crash safety of queues: a proptest over queue limits, keys, priorities, controls (cancel,
//! pause then resume) and crash points (one or two crashes at a random acknowledged step), run
//! to the end after each reopen. Judged from the log and the store, never from the engine's
//! memory: no thread lost (every one ends), none admitted twice (one terminal status each, and
//! the store's counts back at zero), the limits never exceeded across the crashes.
//!
//! Prints `RELIABILITY queues_crash cases=.. threads=.. crashes=.. crashes_with_waiting=..
//! crashes_with_running=.. cancels=.. pauses=.. max_global_seen=.. max_per_key_seen=..
//! failed=false`; `CAIRN_QUEUES_CRASH_CASES` sets the number of cases (default 12).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::storage::QueueLimits;
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use proptest::prelude::*;

use crate::common::{Tally, report};
use crate::queues::{runs_from_log, whole_log};

/// Two nodes, so that a crash may fall between a thread's steps.
fn two_steps() -> Workflow<Tally> {
    let nap = |_s: Arc<Tally>, _ctx: Ctx| async move {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        Ok(NodeOutput::update((1, String::new())))
    };
    Workflow::<Tally>::builder("two", 1)
        .node("a", nap)
        .node("b", nap)
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

#[derive(Debug, Clone)]
struct Case {
    threads: Vec<(usize, u8)>,
    global: u32,
    per_key: u32,
    crash_at: Vec<u64>,
    cancel: Option<usize>,
    pause: Option<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, 1u32..=4, 1u32..=3, 4usize..=14).prop_flat_map(|(keys, global, per_key, n)| {
        (
            proptest::collection::vec((0..keys, 0u8..3), n),
            proptest::collection::vec(1u64..(n as u64 * 2), 1..=2),
            proptest::option::of(0..n),
            proptest::option::of(0..n),
        )
            .prop_map(move |(threads, crash_at, cancel, pause)| Case {
                threads,
                global,
                per_key,
                crash_at,
                cancel,
                pause,
            })
    })
}

#[derive(Default)]
struct Counters {
    cases: AtomicU64,
    threads: AtomicU64,
    crashes: AtomicU64,
    with_waiting: AtomicU64,
    with_running: AtomicU64,
    cancels: AtomicU64,
    pauses: AtomicU64,
    max_global: AtomicU64,
    max_per_key: AtomicU64,
}

fn id(i: usize, key: usize) -> String {
    format!("k{key}-{i}")
}

async fn open(path: &std::path::Path, wf: &Workflow<Tally>, limits: QueueLimits) -> Engine {
    Engine::builder(path)
        .durability(Durability::Immediate)
        .poll_ms(20)
        .queue("q", limits)
        .workflow(wf)
        .open()
        .await
        .unwrap()
}

/// Runs until the `at`-th acknowledged step (or the end), then crashes.
async fn crash_at(engine: Engine, at: u64, counters: &Counters) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let tx = std::sync::Mutex::new(Some(tx));
    engine.on_step(Arc::new(move |_t, _s, total| {
        if total >= at
            && let Some(tx) = tx.lock().unwrap().take()
        {
            let _ = tx.send(());
        }
    }));
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), rx).await;
    engine.crash().await;
    counters.crashes.fetch_add(1, Ordering::SeqCst);
    let q = &engine.queues().await.unwrap()[0];
    if q.waiting > 0 {
        counters.with_waiting.fetch_add(1, Ordering::SeqCst);
    }
    if q.running > 0 {
        counters.with_running.fetch_add(1, Ordering::SeqCst);
    }
}

async fn one_case(c: &Case, counters: &Counters) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let wf = two_steps();
    let limits = QueueLimits {
        concurrency_max: Some(c.global),
        per_key_max: Some(c.per_key),
        ..QueueLimits::default()
    };
    let engine = open(&path, &wf, limits.clone()).await;
    for (i, (key, priority)) in c.threads.iter().enumerate() {
        let options =
            StartOptions::id(id(i, *key)).on_queue("q").key(format!("k{key}")).priority(*priority);
        engine.start_json("two", Tally::default(), options).await.unwrap();
    }
    if let Some(i) = c.cancel {
        // Fails only for a thread that already ended (it ran first).
        if engine.cancel(&id(i, c.threads[i].0), "case").await.is_ok() {
            counters.cancels.fetch_add(1, Ordering::SeqCst);
        }
    }
    if let Some(i) = c.pause.filter(|p| Some(*p) != c.cancel)
        && engine.pause(&id(i, c.threads[i].0)).await.is_ok()
    {
        counters.pauses.fetch_add(1, Ordering::SeqCst);
    }
    let mut engine = engine;
    for at in &c.crash_at {
        crash_at(engine, *at, counters).await;
        engine = open(&path, &wf, limits.clone()).await;
    }
    if let Some(i) = c.pause.filter(|p| Some(*p) != c.cancel) {
        let thread = id(i, c.threads[i].0);
        if engine.thread(&thread).await.unwrap().status().await.unwrap() == ThreadStatus::Paused {
            engine.resume(&thread).await.unwrap();
        }
    }
    for (i, (key, _)) in c.threads.iter().enumerate() {
        let handle = engine.thread(&id(i, *key)).await.unwrap();
        let out = tokio::time::timeout(std::time::Duration::from_secs(30), handle.finished())
            .await
            .map_err(|_| TestCaseError::fail(format!("thread {} lost: never ended", id(i, *key))))?
            .unwrap();
        prop_assert!(matches!(out.status, ThreadStatus::Completed | ThreadStatus::Cancelled));
    }
    let store = engine.store().clone();
    let runs = runs_from_log(store.as_ref());
    // One terminal status per thread: none ran to its end twice.
    let mut ends = std::collections::BTreeMap::<String, usize>::new();
    for e in whole_log(store.as_ref()) {
        let thread = e.thread.to_string();
        if let Body::StatusChanged { to, .. } =
            cairn::blocking::decode(store.as_ref(), e).unwrap().body
            && to.is_terminal()
        {
            *ends.entry(thread).or_default() += 1;
        }
    }
    prop_assert_eq!(ends.len(), c.threads.len(), "every thread ended: {:?}", ends);
    prop_assert!(ends.values().all(|n| *n == 1), "a thread ended twice: {:?}", ends);
    prop_assert!(runs.max_global <= c.global as usize, "global {} > {}", runs.max_global, c.global);
    let per_key = runs.max_per_key.values().copied().max().unwrap_or(0);
    prop_assert!(per_key <= c.per_key as usize, "per key {} > {}", per_key, c.per_key);
    let q = &engine.queues().await.unwrap()[0];
    prop_assert_eq!((q.running, q.waiting), (0, 0), "{:?}", q);
    prop_assert!(store.verify().unwrap().is_clean());
    engine.shutdown().await;
    counters.cases.fetch_add(1, Ordering::SeqCst);
    counters.threads.fetch_add(c.threads.len() as u64, Ordering::SeqCst);
    counters.max_global.fetch_max(runs.max_global as u64, Ordering::SeqCst);
    counters.max_per_key.fetch_max(per_key as u64, Ordering::SeqCst);
    Ok(())
}

#[test]
fn queued_threads_survive_crashes_without_loss_double_admission_or_a_limit_exceeded() {
    let cases =
        std::env::var("CAIRN_QUEUES_CRASH_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    let counters = Counters::default();
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&case(), |c| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(one_case(&c, &counters))
    });
    let n = |c: &AtomicU64| c.load(Ordering::SeqCst);
    report(&format!(
        "RELIABILITY queues_crash cases={} threads={} crashes={} crashes_with_waiting={} crashes_with_running={} cancels={} pauses={} max_global_seen={} max_per_key_seen={} failed={}",
        n(&counters.cases),
        n(&counters.threads),
        n(&counters.crashes),
        n(&counters.with_waiting),
        n(&counters.with_running),
        n(&counters.cancels),
        n(&counters.pauses),
        n(&counters.max_global),
        n(&counters.max_per_key),
        result.is_err(),
    ));
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(n(&counters.with_waiting) > 0, "no crash caught a thread in line");
}
