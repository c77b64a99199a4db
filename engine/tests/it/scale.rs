//! Many threads at once (issue 4: "starting 10,000 threads and letting them finish works on a
//! 2-core machine"): 10,000 threads of a small workflow, started together under a concurrency
//! limit, all complete with their own result, and the store agrees.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::{Page, ThreadFilter};
use cairn::{Durability, END, Engine, Replace, START, StartOptions, ThreadStatus};

use crate::common;

const THREADS: usize = 10_000;
const CONCURRENCY: usize = 32;
const NODES: u64 = 3;

/// Node executions in progress, and the most seen at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    max: AtomicUsize,
}

/// START -> n0 -> n1 -> n2 -> END; node `i` adds `i + 1` (so a thread's output is its input + 6)
/// and yields once while counted as in flight, so that runners overlap.
fn small(in_flight: Arc<InFlight>) -> Workflow<Replace<u64>> {
    let mut b = Workflow::<Replace<u64>>::builder("scale", 1);
    for i in 0..NODES {
        let in_flight = in_flight.clone();
        b = b.node(format!("n{i}"), move |s: Arc<Replace<u64>>, _ctx: Ctx| {
            let in_flight = in_flight.clone();
            async move {
                let now = in_flight.now.fetch_add(1, Ordering::SeqCst) + 1;
                in_flight.max.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                in_flight.now.fetch_sub(1, Ordering::SeqCst);
                Ok(NodeOutput::update(s.0 + i + 1))
            }
        });
    }
    b = b.edge(START, "n0");
    for i in 1..NODES {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge(format!("n{}", NODES - 1), END).build().expect("scale workflow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_threads_all_complete_under_a_concurrency_limit() {
    let (_dir, path) = common::db();
    let in_flight = Arc::new(InFlight::default());
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .concurrency(CONCURRENCY)
        .seed(4)
        .workflow(&small(in_flight.clone()))
        .open()
        .await
        .expect("open engine");
    let began = Instant::now();
    let mut handles = Vec::with_capacity(THREADS);
    for n in 0..THREADS {
        let id = StartOptions::id(format!("scale-{n:05}"));
        handles.push(engine.start_json("scale", n as u64, id).await.expect("start"));
    }
    let started = began.elapsed();
    let outcomes = futures::future::join_all(handles.iter().map(|h| h.finished())).await;
    let finished = began.elapsed();
    for (n, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.expect("thread outcome");
        assert_eq!(outcome.status, ThreadStatus::Completed, "thread {n}: {:?}", outcome.error);
        assert_eq!(outcome.output, Some(serde_json::json!(n as u64 + 6)), "thread {n}'s result");
    }
    // The store agrees: every thread's record says Completed, none is left behind.
    let mut completed = 0;
    loop {
        let filter = ThreadFilter { status: Some(ThreadStatus::Completed), ..Default::default() };
        let page = engine
            .store()
            .list_threads(&filter, Page { limit: 500, offset: completed })
            .wait()
            .expect("list threads");
        completed += page.len();
        if page.len() < 500 {
            break;
        }
    }
    assert_eq!(completed, THREADS, "Completed thread records");
    let most = in_flight.max.load(Ordering::SeqCst);
    assert!(most <= CONCURRENCY, "{most} nodes ran at once; the limit is {CONCURRENCY}");
    eprintln!(
        "SCALE threads={THREADS} concurrency={CONCURRENCY} nodes={NODES} started_ms={} \
         finished_ms={} threads_per_s={:.0} max_nodes_at_once={most}",
        started.as_millis(),
        finished.as_millis(),
        THREADS as f64 / finished.as_secs_f64()
    );
    engine.shutdown().await;
}
