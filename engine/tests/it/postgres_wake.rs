//! The wake index on PostgreSQL, end to end: a thread sleeping on an engine that crashes wakes
//! on another engine, found by its look for work through the index (`SharedDatabase::due_threads`), when
//! its timer falls due; threads sleeping for an hour are left alone, also by a recovery pass.

use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};
use cairn::{Engine, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::Tally;

fn nap(id: &str, ms: u64) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .node("nap", move |_s, ctx: Ctx| async move {
            ctx.sleep_ms(ms).await?;
            Ok(NodeOutput::update((1, "woke".to_owned())))
        })
        .edge(START, "nap")
        .edge("nap", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_sleeping_on_a_crashed_engine_wakes_on_another_when_due() {
    let Some(cluster) = Cluster::start("a_thread_sleeping_on_a_crashed_engine") else { return };
    let url = cluster.new_database();
    let (short, long) = (nap("short-nap", 2_000), nap("long-nap", 3_600_000));
    let open = || {
        Engine::builder(&url)
            .poll_ms(50)
            .lease_ttl_ms(1_000)
            .workflow(&short)
            .workflow(&long)
            .open()
    };
    // The survivor opens first: its recovery at open finds nothing, so only its looks for work
    // (the wake index) can find the sleeper.
    let survivor = open().await.unwrap();
    let doomed = open().await.unwrap();
    for i in 0..20 {
        let id = format!("long-{i}");
        doomed.start_json("long-nap", Tally::default(), StartOptions::id(&id)).await.unwrap();
    }
    // The short nap's timer runs from its node, which runs after this instant: its wake can be
    // no earlier than 2 s after it (timing from after the threads fell asleep let a due wake
    // look early).
    let short_started = std::time::Instant::now();
    doomed.start_json("short-nap", Tally::default(), StartOptions::id("short")).await.unwrap();
    let sleeping = |id: &str| {
        let record = survivor.store().thread(&id.parse().unwrap()).wait().unwrap();
        record.is_some_and(|r| r.status == ThreadStatus::Sleeping)
    };
    let started = std::time::Instant::now();
    while !(sleeping("short") && (0..20).all(|i| sleeping(&format!("long-{i}")))) {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "threads fall asleep");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    doomed.crash().await;
    let done = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        survivor.thread("short").await.unwrap().finished(),
    )
    .await
    .expect("the survivor wakes the sleeper when its timer is due")
    .unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    assert!(
        short_started.elapsed() >= std::time::Duration::from_millis(2_000),
        "not before it is due"
    );
    for i in 0..20 {
        assert!(sleeping(&format!("long-{i}")), "an hour's sleep is not cut short");
    }
    // An engine opening now recovers the due threads only: the hour-long sleepers' logs are
    // not read, nor their timers armed (listing every unfinished thread did both: 20 restores).
    let store = cairn::storage::PgStore::connect(&url, cairn::Durability::Immediate).unwrap();
    let recording =
        std::sync::Arc::new(cairn_testkit::RecordingStore::new(std::sync::Arc::new(store)));
    let late = Engine::with_store(recording.clone())
        .poll_ms(60_000)
        .workflow(&short)
        .workflow(&long)
        .open()
        .await
        .unwrap();
    assert_eq!(recording.events_read(), 0, "recovery at open read the sleepers' logs");
    late.shutdown().await;
    assert!(survivor.store().verify().unwrap().is_clean());
    survivor.shutdown().await;
}
