//! Telemetry on PostgreSQL: the store's group-commit metrics and the `group_commit` span carry
//! the same names and fields as on redb.

use std::sync::Arc;

use cairn::storage::Lsn;
use cairn::telemetry::storage as store_names;
use cairn::{Durability, Engine, StartOptions};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::Tally;
use crate::spans::{recorder as spans, traced};
use crate::telemetry_recorder::TestRecorder;

#[tokio::test]
async fn group_commits_on_postgres_report_the_same_metrics_and_span_fields() {
    let Some(cluster) = Cluster::start("group_commits_on_postgres_report") else { return };
    let spans = spans();
    let url = cluster.new_database();
    let recorder = Arc::new(TestRecorder::default());
    let wf = traced();
    let engine = Engine::builder(&url)
        .durability(Durability::Immediate)
        .workflow(&wf)
        .metrics_recorder(recorder.clone())
        .health_every_ms(None)
        .open()
        .await
        .unwrap();
    let run = engine.start_json("traced", Tally::default(), StartOptions::id("pg-metrics")).await;
    run.unwrap().wait().await.unwrap();
    let events = engine.store().read_all_since(Lsn(0), 10_000).wait().unwrap().len() as u64;
    engine.shutdown().await;

    let r = &recorder;
    assert_eq!(r.counter(store_names::EVENTS), events, "events committed");
    let groups = r.counter(&format!("{}{{outcome=ok}}", store_names::GROUP_COMMITS));
    assert!(groups > 0);
    assert_eq!(r.counter(store_names::FSYNCS), groups, "synchronous_commit: every group syncs");
    assert_eq!(r.samples(store_names::GROUP_WRITES).len() as u64, groups);
    assert_eq!(r.samples(store_names::GROUP_COMMIT_SECONDS).len() as u64, groups);

    let seen = spans.seen.lock().unwrap().clone();
    let commit = seen
        .iter()
        .find(|s| {
            s.name == "group_commit"
                && s.fields.get("backend").is_some_and(|b| b == "postgres")
                && s.fields.contains_key("commit_us")
        })
        .expect("a postgres group commit span with its figures");
    for field in ["durable", "writes", "callers", "events", "bytes", "commit_us", "fsync_us"] {
        assert!(commit.fields.contains_key(field), "{field}: {commit:?}");
    }
    assert_eq!(commit.fields["durable"], "true");
}
