//! The `cairn` command line on a PostgreSQL URL: init, the demo, and the inspection commands
//! work on `--db postgresql://...` as they do on a file, against a real throwaway cluster.

use std::path::Path;

use cairn::storage::pg_cluster::Cluster;
use serde_json::Value;

use crate::harness::on;

#[test]
fn init_demo_and_inspection_work_on_a_postgres_url() {
    let Some(cluster) = Cluster::start("init_demo_and_inspection_work_on_a_postgres_url") else {
        return;
    };
    let url = cluster.new_database();
    let db = Path::new(&url);
    let init = on(db, &["init", "--json"]).expect(0).json();
    assert_eq!(init["initialised"], Value::from(url.as_str()));
    let demo = on(db, &["demo", "--threads", "3", "--quiet", "--json"]).expect(0).stdout;
    // The same results, digests included, as the demo on a file.
    let dir = crate::harness::tempdir();
    let file = dir.path().join("demo.db");
    let on_file = on(&file, &["demo", "--threads", "3", "--quiet", "--json"]).expect(0).stdout;
    assert_eq!(demo, on_file);
    assert_eq!(demo.matches("\"completed\"").count(), 3, "{demo}");
    let threads = on(db, &["threads", "--json"]).expect(0).json();
    let listed = threads.as_array().map_or(0, Vec::len);
    assert_eq!(listed, 3, "{threads}");
    assert!(threads.to_string().contains("completed"), "{threads}");
    let verify = on(db, &["verify", "--json"]).expect(0).json();
    assert_eq!(verify["problems"], Value::Array(Vec::new()), "{verify}");
    let events = on(db, &["events", "demo-1", "--json"]).expect(0);
    assert!(events.stdout.contains("ThreadCreated") || events.stdout.contains("thread_created"));
    // A second demo run is idempotent on the same ids, as on a file.
    on(db, &["demo", "--threads", "3", "--quiet", "--json"]).expect(0);
    assert_eq!(on(db, &["threads", "--json"]).expect(0).json().as_array().map_or(0, Vec::len), 3);
}
