//! A runner's batches reach a file's writer together: deferred while the runner computes and
//! handed over as one when its task is about to wait (a node awaits, the runner settles), or
//! with the next batch made once the oldest is `DEFER_MAX_MS` (2 ms) old by the engine's clock.
//! A short thread's creation, steps and end are one hand-over, so the writer wakes once for the
//! thread. The engines here run on a manual clock, so only the test moves time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::clock::ManualClock;
use cairn::dsl::{NodeOutput, Workflow};
use cairn::storage::{
    Append, Batch, Decorates, Durability, Error, ForwardCatalog, ForwardLog, ForwardMaintenance,
    Options, Pending, Reading, RedbStore, Store,
};
use cairn::{END, Engine, Replace, START, StartOptions, ThreadStatus};

use crate::common::db;

/// A file store that records how batches reach it: one at a time, or handed over together.
struct HandOvers {
    inner: Arc<dyn Store>,
    alone: AtomicUsize,
    together: Mutex<Vec<usize>>,
}

impl HandOvers {
    fn on(path: &std::path::Path) -> Arc<HandOvers> {
        let inner = RedbStore::open(path, Options::default()).expect("open");
        Arc::new(HandOvers {
            inner: Arc::new(inner),
            alone: AtomicUsize::new(0),
            together: Mutex::new(Vec::new()),
        })
    }

    /// The batches queued one at a time, and the size of each hand-over, so far.
    fn seen(&self) -> (usize, Vec<usize>) {
        (self.alone.load(Ordering::SeqCst), self.together.lock().expect("lock").clone())
    }
}

impl Decorates for HandOvers {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }
}
impl ForwardLog for HandOvers {}
impl ForwardCatalog for HandOvers {}
impl ForwardMaintenance for HandOvers {}
impl Store for HandOvers {}
impl Append for HandOvers {
    fn append(&self, batch: Batch) -> Result<Pending, Error> {
        self.alone.fetch_add(1, Ordering::SeqCst);
        self.inner.append(batch)
    }
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        self.alone.fetch_add(1, Ordering::SeqCst);
        self.inner.append_async(batch)
    }
    fn append_all(&self, batches: &mut Vec<Batch>) -> Vec<Pending> {
        self.together.lock().expect("lock").push(batches.len());
        self.inner.append_all(batches)
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
}

/// How node `at` of [`counting`] pauses before it returns.
#[derive(Clone)]
enum Pause {
    /// It does not.
    None,
    /// It awaits a timer this long.
    Awaits(Duration),
    /// It computes on without awaiting while the engine's clock moves this many ms.
    Computes(ManualClock, u64),
}

/// START -> n0 -> ... -> n{count-1} -> END, each adding one; node `at` pauses as `pause` says.
fn counting(count: usize, at: usize, pause: &Pause) -> Workflow<Replace<u64>> {
    let mut b = Workflow::<Replace<u64>>::builder("counting", 1);
    for i in 0..count {
        let pause = if i == at { pause.clone() } else { Pause::None };
        b = b.node(format!("n{i}"), move |s: Arc<Replace<u64>>, _ctx| {
            let pause = pause.clone();
            async move {
                match pause {
                    Pause::None => {}
                    Pause::Awaits(d) => tokio::time::sleep(d).await,
                    Pause::Computes(clock, ms) => clock.advance_ms(ms),
                }
                Ok(NodeOutput::update(s.0 + 1))
            }
        });
    }
    b = b.edge(START, "n0");
    for i in 1..count {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge(format!("n{}", count - 1), END).build().expect("workflow")
}

/// Runs one thread of `wf` on a [`HandOvers`] store, with the engine on `clock`; what reached
/// the store.
async fn run(wf: &Workflow<Replace<u64>>, count: u64, clock: &ManualClock) -> (usize, Vec<usize>) {
    let (_dir, path) = db();
    let store = HandOvers::on(&path);
    let engine = Engine::with_store(store.clone())
        .clock(Arc::new(clock.clone()))
        .workflow(wf)
        .open()
        .await
        .expect("open");
    let before = store.seen();
    let handle =
        engine.start_json("counting", &Replace(0u64), StartOptions::id("t")).await.expect("start");
    let outcome = handle.finished().await.expect("finished");
    assert_eq!(outcome.status, ThreadStatus::Completed);
    assert_eq!(outcome.output, Some(serde_json::json!(count)));
    let after = store.seen();
    engine.shutdown().await;
    (after.0 - before.0, after.1[before.1.len()..].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_threads_creation_steps_and_end_reach_the_file_as_one_hand_over() {
    let clock = ManualClock::new(1_000);
    let (alone, together) = run(&counting(10, 0, &Pause::None), 10, &clock).await;
    assert_eq!(alone, 0, "no batch was queued alone");
    assert_eq!(together.len(), 1, "one hand-over for the whole thread: {together:?}");
    // The creation, one batch a step, and the end.
    assert!(together[0] >= 11, "the hand-over holds every batch: {together:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_awaits_hands_over_what_came_before_it() {
    // Control for the test above: the runner waits in the middle, so the batches before the
    // wait go before it (a `start` returns without waiting for the node).
    let clock = ManualClock::new(1_000);
    let pause = Pause::Awaits(Duration::from_millis(20));
    let (alone, together) = run(&counting(10, 5, &pause), 10, &clock).await;
    assert_eq!(alone, 0);
    assert_eq!(together.len(), 2, "split at the node's wait: {together:?}");
    assert_eq!(together[0], 6, "the creation and the five steps before the wait: {together:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_computes_on_hands_over_its_batches_once_the_oldest_is_two_ms_old() {
    // Node 4 computes while the engine's clock moves 1 ms, node 6 while it moves 1 more: the
    // step after it makes the oldest batch 2 ms old, and goes with the ones before it.
    let clock = ManualClock::new(1_000);
    let one_ms = Pause::Computes(clock.clone(), 1);
    let mut b = Workflow::<Replace<u64>>::builder("counting", 1);
    for i in 0..8 {
        let pause = if i == 4 || i == 6 { one_ms.clone() } else { Pause::None };
        b = b.node(format!("n{i}"), move |s: Arc<Replace<u64>>, _ctx| {
            let pause = pause.clone();
            async move {
                if let Pause::Computes(clock, ms) = pause {
                    clock.advance_ms(ms);
                }
                Ok(NodeOutput::update(s.0 + 1))
            }
        });
    }
    b = b.edge(START, "n0");
    for i in 1..8 {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    let wf = b.edge("n7", END).build().expect("workflow");
    let (alone, together) = run(&wf, 8, &clock).await;
    assert_eq!(alone, 0);
    assert_eq!(together.len(), 2, "handed over before the runner settled: {together:?}");
    // The creation and the steps of n0..n6 (n6's batch is the one made 2 ms after the first).
    assert_eq!(together[0], 8, "{together:?}");

    // Control: the same clock moves of 1 ms in all keep everything for the settle.
    let clock = ManualClock::new(1_000);
    let (_, together) = run(&counting(8, 4, &Pause::Computes(clock.clone(), 1)), 8, &clock).await;
    assert_eq!(together.len(), 1, "{together:?}");
}
