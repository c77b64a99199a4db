//! Named queues on PostgreSQL: two engines on one database never run more threads of a queue
//! together than its limits allow (admission is the store's, under the queue row's lock),
//! counted from the log.

use cairn::storage::QueueLimits;
use cairn::storage::pg_cluster::Cluster;
use cairn::{Durability, Engine, StartOptions, ThreadStatus};

use crate::common::{Tally, report};
use crate::queues::{napper, runs_from_log};

#[tokio::test]
async fn two_engines_on_one_database_never_exceed_the_global_and_per_key_limits_together() {
    let Some(cluster) = Cluster::start("queues_two_engines") else { return };
    let url = cluster.new_database();
    let wf = napper("nap", 5);
    let limits = QueueLimits { concurrency_max: Some(3), per_key_max: Some(2), rate: None };
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
            handles.push(engine.start("nap", Tally::default(), options).await.unwrap());
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
