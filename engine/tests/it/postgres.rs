//! The engine on PostgreSQL (`Engine::builder("postgresql://...")`), against a real throwaway
//! cluster: the same workflow gives the same result as on redb, through a crash and a reopen;
//! a reopened engine leaves a thread whose lease is still live to its owner (the database may
//! be shared) and takes it over once the lease has expired.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::storage::pg_cluster::Cluster;
use cairn::{Durability, Engine, RecoveryPolicy, StartOptions, ThreadStatus};

use crate::common::{Effects, Tally, db, linear};

async fn run_to_crash(url: &str, clock: &ManualClock, effects: &Effects) {
    let wf = linear(12, effects.clone());
    let engine = Engine::builder(url)
        .durability(Durability::Immediate)
        .clock(Arc::new(clock.clone()))
        .seed(7)
        .workflow(&wf)
        .open()
        .await
        .expect("open on postgres");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let tx = std::sync::Mutex::new(Some(tx));
    engine.on_step(Arc::new(move |_t, _s, total| {
        if total == 5
            && let Some(tx) = tx.lock().unwrap().take()
        {
            let _ = tx.send(());
        }
    }));
    engine.start("linear", Tally::default(), StartOptions::id("p")).await.unwrap();
    rx.await.unwrap();
    engine.crash().await;
}

#[tokio::test]
async fn a_workflow_survives_a_crash_on_postgres_with_the_result_it_has_on_redb() {
    let Some(cluster) = Cluster::start("a_workflow_survives_a_crash_on_postgres") else { return };
    let url = cluster.new_database();
    let clock = ManualClock::new(1_000);
    let effects = Effects::default();
    run_to_crash(&url, &clock, &effects).await;

    // The crashed engine's lease is live: a new engine on a shared database leaves it alone.
    let wf = linear(12, effects.clone());
    let open = || {
        Engine::builder(&url)
            .clock(Arc::new(clock.clone()))
            .seed(7)
            .recovery(RecoveryPolicy::Resume)
            .workflow(&wf)
            .open()
    };
    let engine = open().await.unwrap();
    let report = engine.recover().await.unwrap();
    assert!(report.resumed.is_empty(), "a live lease is not taken over: {report:?}");
    assert_eq!(engine.thread("p").unwrap().status().unwrap(), ThreadStatus::Running);
    engine.shutdown().await;

    // Past the lease's ttl its owner is presumed gone: the next engine takes the thread over.
    clock.advance_ms(cairn::limits::LEASE_TTL_MS + 1);
    let engine = open().await.unwrap();
    let out: Tally = engine.thread("p").unwrap().output().await.unwrap();
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;

    // The same workflow on redb, uninterrupted.
    let (_d, path) = db();
    let reference = Effects::default();
    let wf = linear(12, reference.clone());
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .seed(7)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let expected: Tally = engine
        .start("linear", Tally::default(), StartOptions::id("p"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    engine.shutdown().await;
    assert_eq!(out, expected);
    assert_eq!(reference.count(), 12);
    // A tool call in flight at the crash may run again (its result was not recorded); a recorded
    // one never does.
    assert!((12..=13).contains(&effects.count()), "tool bodies ran {} times", effects.count());
}
