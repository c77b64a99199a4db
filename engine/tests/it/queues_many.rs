//! `start_many` on a queue (`docs/queues.md`): every start's batch is handed to the store at
//! once, so they share group commits (counted through the store's metrics: far fewer commits
//! than starts), while each is accepted or refused on its own, in order: a dedup key held by a
//! stored thread or by an earlier start of the same call returns that thread's handle, and the
//! limits hold for the threads started so (counted from the log). On redb and on PostgreSQL.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::QueueLimits;
use cairn::telemetry::storage as store_names;
use cairn::{Durability, END, Engine, EngineBuilder, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, report};
use crate::queues::{napper, runs_from_log};
use crate::telemetry_recorder::TestRecorder;

/// Starts in the call (besides the one whose dedup key a stored thread holds).
const STARTS: usize = 40;
/// Distinct dedup keys among them: starts `DEDUP_KEYS..STARTS` repeat the keys of the first.
const DEDUP_KEYS: usize = 30;
const GLOBAL: u32 = 3;
const PER_KEY: u32 = 2;

/// One node that waits for input: a thread of it holds its slot and its dedup key until told.
fn held() -> Workflow<Tally> {
    Workflow::<Tally>::builder("held", 1)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(serde_json::json!({ "wait": true }))?;
            Ok(NodeOutput::update((n, String::new())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

fn tune(b: EngineBuilder, nap: &Workflow<Tally>, held: &Workflow<Tally>) -> EngineBuilder {
    let limits = QueueLimits {
        concurrency_max: Some(GLOBAL),
        per_key_max: Some(PER_KEY),
        ..QueueLimits::default()
    };
    // A long poll: no admission pass but the ones the starts ask for.
    b.durability(Durability::Immediate)
        .poll_ms(10_000)
        .concurrency(16)
        .queue("jobs", limits)
        .workflow(nap)
        .workflow(held)
}

/// The checks, on an engine opened by `tune` with `recorder`; `backend` names the line.
async fn start_many_on_a_queue(engine: Engine, recorder: &TestRecorder, backend: &str) {
    let on = |id: String, key: &str, dedup: String| {
        StartOptions::id(id).on_queue("jobs").key(key).dedup(dedup)
    };
    // A stored holder of dedup key "held", parked with its slot.
    let pre = engine
        .start_json("held", Tally::default(), on("c-pre".into(), "c", "held".into()))
        .await
        .unwrap();
    while pre.status().await.unwrap() != ThreadStatus::WaitingInput {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // A queue nobody defined refuses the whole call, before anything is written.
    let refused = engine
        .start_many_json(
            "nap",
            vec![
                (Tally::default(), StartOptions::id("z-1").on_queue("jobs")),
                (Tally::default(), StartOptions::id("z-2").on_queue("nope")),
            ],
        )
        .await;
    assert!(refused.is_err(), "{:?}", refused.map(|h| h.len()));
    assert!(engine.thread("z-1").await.is_err(), "nothing was written");

    let commits = format!("{}{{outcome=ok}}", store_names::GROUP_COMMITS);
    let before = recorder.counter(&commits);
    let mut starts: Vec<(Tally, StartOptions)> = (0..STARTS)
        .map(|i| {
            let key = if i.is_multiple_of(2) { "a" } else { "b" };
            (Tally::default(), on(format!("{key}-{i}"), key, format!("d{}", i % DEDUP_KEYS)))
        })
        .collect();
    starts.push((Tally::default(), on("c-dup".into(), "c", "held".into())));
    let handles = engine.start_many_json("nap", starts).await.unwrap();
    let commits_made = recorder.counter(&commits) - before;
    assert_eq!(handles.len(), STARTS + 1);
    for (i, h) in handles.iter().enumerate().take(STARTS) {
        // A repeated dedup key returns the earlier start's thread of the same call.
        let first = i % DEDUP_KEYS;
        let key = if first.is_multiple_of(2) { "a" } else { "b" };
        assert_eq!(h.id().as_str(), format!("{key}-{first}"), "start {i}");
    }
    assert_eq!(handles[STARTS].id().as_str(), "c-pre", "the stored holder of \"held\"");
    assert!(
        commits_made * 4 < STARTS as u64,
        "{commits_made} commits for {} starts: they share commits",
        STARTS + 1
    );
    for h in &handles[..DEDUP_KEYS] {
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), h.finished())
            .await
            .expect("every queued thread runs")
            .unwrap();
        assert_eq!(out.status, ThreadStatus::Completed);
    }
    engine.send_input("c-pre", 1u64).await.unwrap();
    assert_eq!(pre.finished().await.unwrap().status, ThreadStatus::Completed);
    let store = engine.store().clone();
    let runs = runs_from_log(store.as_ref());
    report(&format!(
        "QUEUES start_many {backend}: starts={} threads={} commits={commits_made} max_global={} \
         (limit {GLOBAL}) max_per_key={:?} (limit {PER_KEY})",
        STARTS + 1,
        runs.ended,
        runs.max_global,
        runs.max_per_key
    ));
    assert_eq!(runs.ended, DEDUP_KEYS + 1, "each thread ran once: dedup wrote nothing more");
    assert!(runs.max_global <= GLOBAL as usize, "{}", runs.max_global);
    assert!(runs.max_per_key.values().all(|m| *m <= PER_KEY as usize), "{:?}", runs.max_per_key);
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.threads, DEDUP_KEYS as u64 + 1, "no thread beyond the distinct keys");
    let q = &engine.queues().await.unwrap()[0];
    assert_eq!((q.running, q.waiting), (0, 0), "{q:?}");
    engine.shutdown().await;
}

#[tokio::test]
async fn start_many_on_a_queue_shares_commits_and_keeps_dedup_and_limits_exact() {
    let (_d, path) = db();
    let (nap, held) = (napper("nap", 20), held());
    let recorder = Arc::new(TestRecorder::default());
    let builder = tune(Engine::builder(&path), &nap, &held).metrics_recorder(recorder.clone());
    start_many_on_a_queue(builder.open().await.unwrap(), &recorder, "redb").await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn start_many_on_a_queue_shares_commits_and_keeps_dedup_and_limits_exact_on_postgres() {
    let Some(cluster) = cairn_storage_testkit::pg_cluster::Cluster::start("queues_start_many")
    else {
        return;
    };
    let url = cluster.new_database();
    let (nap, held) = (napper("nap", 20), held());
    let recorder = Arc::new(TestRecorder::default());
    let builder = tune(Engine::builder(&url), &nap, &held).metrics_recorder(recorder.clone());
    start_many_on_a_queue(builder.open().await.unwrap(), &recorder, "postgres").await;
}
