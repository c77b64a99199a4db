//! Flow control on queues (`docs/queues.md`): a rate that drops refuses a start (and says when
//! to retry), a per-key rate holds admissions per key, a debounced burst on one key is one run
//! with the last input, and a batching queue runs its waiting starts as one batch run whose
//! input is their list, by size and by window. Crash tests: a crash at every write of a
//! debounced burst, and of a batch, loses no start and runs none twice.
//!
//! Prints `RELIABILITY queue_debounce_crash crash_points=.. lost=0 doubled=0` and
//! `RELIABILITY queue_batch_crash crash_points=.. lost=0 doubled=0`.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::event::Body;
use cairn::storage::{QueueLimits, RateLimit, Store};
use cairn::{END, Engine, Error, RecoveryPolicy, START, StartOptions, ThreadStatus};
use serde_json::{Value, json};

use crate::crash::every_write;
use crate::queues::whole_log;

const DEBOUNCE_MS: u64 = 50;

/// One node that wraps its input: `{"ran": input}`.
pub fn echo() -> Workflow<Replace<Value>> {
    Workflow::<Replace<Value>>::builder("echo", 1)
        .node("run", |s: Arc<Replace<Value>>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(json!({ "ran": s.0.clone() })))
        })
        .edge(START, "run")
        .edge("run", END)
        .build()
        .unwrap()
}

fn on(queue: &str, key: &str, id: &str) -> StartOptions {
    StartOptions::id(id).on_queue(queue).key(key)
}

/// The threads with a `Running` status event in the log: the ones that ran.
fn ran(store: &dyn Store) -> Vec<String> {
    let mut out = Vec::new();
    for e in whole_log(store) {
        let thread = e.thread.to_string();
        if let Body::StatusChanged { to: ThreadStatus::Running, .. } =
            cairn::blocking::decode(store, e).unwrap().body
            && !out.contains(&thread)
        {
            out.push(thread);
        }
    }
    out
}

async fn open(path: &std::path::Path, clock: &ManualClock, park: bool) -> Engine {
    let mut b = Engine::builder(path)
        .durability(cairn::Durability::None)
        .clock(Arc::new(clock.clone()))
        .queue("deb", QueueLimits { debounce_ms: Some(DEBOUNCE_MS), ..QueueLimits::default() })
        .queue(
            "drops",
            QueueLimits {
                rate: Some(RateLimit { starts: 2, period_ms: 1_000 }),
                rate_drops: true,
                ..QueueLimits::default()
            },
        )
        .queue(
            "per-key",
            QueueLimits {
                rate_per_key: Some(RateLimit { starts: 1, period_ms: 1_000 }),
                ..QueueLimits::default()
            },
        )
        .queue(
            "bat",
            QueueLimits {
                batch_max: Some(3),
                batch_window_ms: Some(1_000),
                ..QueueLimits::default()
            },
        )
        .workflow(&echo());
    if park {
        b = b.recovery(RecoveryPolicy::Park);
    }
    b.open().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_that_drops_refuses_a_start_and_says_when_to_retry() {
    let (_d, path) = crate::common::db();
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &clock, false).await;
    for id in ["r-1", "r-2"] {
        engine.start_json("echo", 1, on("drops", "", id)).await.unwrap();
    }
    clock.advance_ms(300);
    let refused = engine.start_json("echo", 1, on("drops", "", "r-3")).await;
    assert!(matches!(refused, Err(Error::RateLimited { retry_after_ms: 701, .. })), "{refused:?}");
    assert!(engine.thread("r-3").await.is_err(), "a dropped start writes nothing");
    clock.advance_ms(701);
    let h = engine.start_json("echo", 3, on("drops", "", "r-3")).await.unwrap();
    assert_eq!(h.wait().await.unwrap().output, Some(json!({ "ran": 3 })));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_key_rate_admits_one_start_per_key_and_window() {
    let (_d, path) = crate::common::db();
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &clock, true).await;
    for (id, key) in [("a-1", "a"), ("a-2", "a"), ("b-1", "b")] {
        engine.start_json("echo", 1, on("per-key", key, id)).await.unwrap();
    }
    let names = |v: Vec<cairn::storage::ThreadId>| -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    };
    assert_eq!(names(engine.admit_queued().await.unwrap()), ["a-1", "b-1"]);
    clock.advance_ms(500);
    assert!(engine.admit_queued().await.unwrap().is_empty(), "a's window is full");
    clock.advance_ms(501);
    assert_eq!(names(engine.admit_queued().await.unwrap()), ["a-2"]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounced_burst_on_one_key_is_one_run_with_the_last_input() {
    let (_d, path) = crate::common::db();
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &clock, false).await;
    let mut handles = Vec::new();
    for i in 1..=5 {
        handles.push(
            engine.start_json("echo", i, on("deb", "doc-7", &format!("d-{i}"))).await.unwrap(),
        );
        clock.advance_ms(10);
    }
    // Another key is debounced on its own.
    let other = engine.start_json("echo", 70, on("deb", "doc-8", "e-1")).await.unwrap();
    clock.advance_ms(DEBOUNCE_MS);
    let last = handles.pop().unwrap();
    assert_eq!(last.wait().await.unwrap().output, Some(json!({ "ran": 5 })));
    assert_eq!(other.wait().await.unwrap().output, Some(json!({ "ran": 70 })));
    for (i, h) in handles.iter().enumerate() {
        let by = format!("d-{}", i + 2);
        match h.wait().await {
            Err(Error::Debounced { by: b, .. }) => assert_eq!(b, by),
            other => panic!("d-{} answered {other:?}", i + 1),
        }
    }
    let mut runs = ran(engine.store().as_ref());
    runs.sort();
    assert_eq!(runs, ["d-5", "e-1"]);
    let q = engine.queues().await.unwrap().into_iter().find(|q| q.name == "deb").unwrap();
    assert_eq!((q.running, q.waiting), (0, 0), "{q:?}");
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_starts_become_one_batch_run_by_size_and_by_window() {
    let (_d, path) = crate::common::db();
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &clock, false).await;
    let mut members = Vec::new();
    for i in 1..=5 {
        members.push(engine.start_json("echo", i, on("bat", "", &format!("b-{i}"))).await.unwrap());
    }
    // Three make a batch at once; the other two wait for the window.
    let first = loop {
        if let Some(Error::Batched { into, .. }) = members[0].taken_by().await.unwrap() {
            break into;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let run = engine.thread(&first).await.unwrap();
    assert_eq!(run.wait().await.unwrap().output, Some(json!({ "ran": [1, 2, 3] })));
    assert!(members[3].taken_by().await.unwrap().is_none(), "b-4 waits for the window");
    clock.advance_ms(1_000);
    let second = match members[4].wait().await {
        Err(Error::Batched { into, .. }) => into,
        other => panic!("b-5 answered {other:?}"),
    };
    let run = engine.thread(&second).await.unwrap();
    assert_eq!(run.wait().await.unwrap().output, Some(json!({ "ran": [4, 5] })));
    for (i, h) in members.iter().enumerate() {
        let into = if i < 3 { &first } else { &second };
        assert!(matches!(h.wait().await, Err(Error::Batched { into: x, .. }) if &x == into));
    }
    assert_eq!(ran(engine.store().as_ref()), [first, second]);
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

/// The store dies at each write in turn while a burst of three debounced starts is written and
/// run; the caller starts the burst again on the reopened engine (a start of a stored id
/// answers it): exactly one run, with the last input, and the others superseded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_debounced_burst_neither_loses_nor_doubles_a_run() {
    let burst = async |engine: &Engine, clock: &ManualClock| -> Result<(), Error> {
        for i in 1..=3 {
            engine.start_json("echo", i, on("deb", "k", &format!("d-{i}"))).await?;
        }
        clock.advance_ms(DEBOUNCE_MS);
        engine.thread("d-3").await?.finished().await?;
        Ok(())
    };
    let check = async |engine: &Engine, clock: &ManualClock, crash_after: i64| {
        burst(engine, clock).await.unwrap_or_else(|e| panic!("crash_after {crash_after}: {e}"));
        let out = engine.thread("d-3").await.unwrap().wait().await.unwrap();
        assert_eq!(out.output, Some(json!({ "ran": 3 })), "crash_after {crash_after}");
        assert_eq!(ran(engine.store().as_ref()), ["d-3"], "crash_after {crash_after}: one run");
        for id in ["d-1", "d-2"] {
            let h = engine.thread(id).await.unwrap();
            assert!(matches!(h.wait().await, Err(Error::Debounced { .. })), "{id} {crash_after}");
        }
        assert!(engine.store().verify().unwrap().is_clean(), "crash_after {crash_after}");
    };
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.clock(Arc::new(clock.clone()))
            .queue("deb", QueueLimits { debounce_ms: Some(DEBOUNCE_MS), ..QueueLimits::default() })
            .workflow(&echo())
    };
    let fixture = || ManualClock::new(1_000_000);
    let crashes = every_write(100, fixture, tune, burst, check).await;
    assert!(crashes >= 4, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY queue_debounce_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// The store dies at each write in turn while three starts fill a batch and its run runs; the
/// caller starts them again on the reopened engine: one batch run took all three, ran once, on
/// the list of their inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_batch_neither_loses_nor_doubles_a_member() {
    let fill = async |engine: &Engine, _: &()| -> Result<(), Error> {
        for i in 1..=3 {
            engine.start_json("echo", i, on("bat", "", &format!("m-{i}"))).await?;
        }
        match engine.thread("m-1").await?.wait().await {
            Err(Error::Batched { into, .. }) => engine.thread(&into).await?.finished().await?,
            other => other?,
        };
        Ok(())
    };
    let check = async |engine: &Engine, (): &(), crash_after: i64| {
        fill(engine, &()).await.unwrap_or_else(|e| panic!("crash_after {crash_after}: {e}"));
        let into = match engine.thread("m-1").await.unwrap().wait().await {
            Err(Error::Batched { into, .. }) => into,
            other => panic!("crash_after {crash_after}: m-1 answered {other:?}"),
        };
        for id in ["m-2", "m-3"] {
            let h = engine.thread(id).await.unwrap();
            let same = matches!(h.wait().await, Err(Error::Batched { into: x, .. }) if x == into);
            assert!(same, "crash_after {crash_after}: {id} is in the same batch run");
        }
        let out = engine.thread(&into).await.unwrap().wait().await.unwrap();
        assert_eq!(out.output, Some(json!({ "ran": [1, 2, 3] })), "crash_after {crash_after}");
        assert_eq!(ran(engine.store().as_ref()), [into], "crash_after {crash_after}: one run");
        assert!(engine.store().verify().unwrap().is_clean(), "crash_after {crash_after}");
    };
    let tune = |b: cairn::EngineBuilder, (): &()| {
        let limits = QueueLimits { batch_max: Some(3), ..QueueLimits::default() };
        b.queue("bat", limits).workflow(&echo())
    };
    let crashes = every_write(100, || (), tune, fill, check).await;
    assert!(crashes >= 4, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY queue_batch_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// `start_many` with debounced starts among plain ones: the handles come back in call order,
/// the debounced ones written one at a time, so only the key's last runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_many_keeps_the_call_order_with_debounced_starts_among_others() {
    let (_d, path) = crate::common::db();
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &clock, false).await;
    let starts = vec![
        (json!(1), on("deb", "k", "m-1")),
        (json!(2), StartOptions::id("plain")),
        (json!(3), on("deb", "k", "m-3")),
        (json!(4), on("deb", "k", "m-4")),
    ];
    let handles = engine.start_many_json("echo", starts).await.unwrap();
    let ids: Vec<String> = handles.iter().map(|h| h.id().to_string()).collect();
    assert_eq!(ids, ["m-1", "plain", "m-3", "m-4"]);
    clock.advance_ms(DEBOUNCE_MS);
    assert_eq!(handles[3].wait().await.unwrap().output, Some(json!({ "ran": 4 })));
    assert_eq!(handles[1].wait().await.unwrap().output, Some(json!({ "ran": 2 })));
    for h in [&handles[0], &handles[2]] {
        assert!(matches!(h.wait().await, Err(Error::Debounced { .. })), "{}", h.id());
    }
    engine.shutdown().await;
}
