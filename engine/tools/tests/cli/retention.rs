//! `cairn result` and `cairn delete`, on a file and through a running engine's endpoint: a
//! second process waits for a thread that the serving engine finishes, then deletes it.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{Spawned, copy, crashed_db, demo_db, on, tempdir};

#[test]
fn result_and_delete_work_on_a_file() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let done = on(&db, &["result", "demo-2", "--json"]).expect(0).json();
    assert_eq!(
        (done["finished"].as_bool(), done["status"].as_str()),
        (Some(true), Some("completed"))
    );
    assert!(done["output"].is_object(), "{done}");
    let text = on(&db, &["result", "demo-2"]).expect(0);
    assert!(text.stdout.starts_with("demo-2: completed\noutput: {"), "{}", text.stdout);
    let deleted = on(&db, &["delete", "demo-2", "--json"]).expect(0).json();
    assert_eq!(
        (deleted["deleted"].as_bool(), deleted["status"].as_str()),
        (Some(true), Some("completed"))
    );
    assert!(deleted["events"].as_u64().unwrap() > 10, "{deleted}");
    let gone = on(&db, &["result", "demo-2"]).expect(1);
    assert!(gone.stderr.contains("no thread demo-2 in this database"), "{}", gone.stderr);
    on(&db, &["delete", "demo-2"]).expect(1);
    on(&db, &["verify"]).expect(0);

    // A thread left running by a dead engine: not finished, so result exits 6 and delete
    // refuses it without --force.
    let dir2 = tempdir();
    let crashed = copy(crashed_db(), dir2.path());
    let pending = on(&crashed, &["result", "demo-1", "--json"]).expect(6).json();
    assert_eq!(
        (pending["finished"].as_bool(), pending["status"].as_str()),
        (Some(false), Some("running"))
    );
    let refused = on(&crashed, &["delete", "demo-1"]).expect(1);
    assert!(refused.stderr.contains("force"), "{}", refused.stderr);
    let forced = on(&crashed, &["delete", "demo-1", "--force"]).expect(0);
    assert!(forced.stdout.starts_with("deleted demo-1 (running): "), "{}", forced.stdout);
    on(&crashed, &["verify"]).expect(0);
}

#[test]
fn result_waits_through_the_endpoint_for_a_thread_the_serving_engine_finishes() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    on(&db, &["pause", "demo-1"]).expect(0);
    let db_arg = db.to_str().expect("utf-8");
    let server = Spawned::start(
        &["serve", "--json", "--retention", "30d", "--db", db_arg],
        Duration::from_secs(120),
    );
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    // Collected, then asserted once the server is stopped (a panic would leave it running).
    let mut seen = Vec::new();
    seen.push(("paused, at once", on(&db, &["result", "demo-1", "--json"])));
    let waiter = Spawned::start(
        &["result", "demo-1", "--wait", "60", "--json", "--db", db_arg],
        Duration::from_secs(120),
    );
    seen.push(("resume through the endpoint", on(&db, &["resume", "demo-1"])));
    let mut out = String::new();
    while let Some(line) = waiter.next_line() {
        out.push_str(&line);
        out.push('\n');
    }
    let waited_code = waiter.wait();
    seen.push(("delete of no thread", on(&db, &["delete", "nobody"])));
    seen.push(("delete through the endpoint", on(&db, &["delete", "demo-1", "--json"])));
    seen.push(("gone", on(&db, &["result", "demo-1"])));
    let pid = first["pid"].as_u64().expect("pid").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    assert_eq!(server.wait(), 0);

    let codes: Vec<(&str, i32)> = seen.iter().map(|(what, run)| (*what, run.code)).collect();
    assert_eq!(
        codes,
        [
            ("paused, at once", 6),
            ("resume through the endpoint", 0),
            ("delete of no thread", 1),
            ("delete through the endpoint", 0),
            ("gone", 1),
        ],
        "{seen:#?}"
    );
    let paused = seen[0].1.json();
    assert_eq!(paused["status"], "paused");
    assert_eq!(waited_code, 0, "{out}");
    let waited: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(
        (waited["finished"].as_bool(), waited["status"].as_str()),
        (Some(true), Some("completed"))
    );
    assert!(waited["output"]["answer"].as_str().expect("answer").starts_with("A structured"));
    assert!(seen[1].1.stdout.contains("through the engine serving the file"), "{:?}", seen[1].1);
    let deleted = seen[3].1.json();
    assert_eq!(deleted["status"], "completed");
    assert!(seen[4].1.stderr.contains("no thread demo-1 in this database"), "{:?}", seen[4].1);
    on(&db, &["verify"]).expect(0);
}

/// On PostgreSQL, `cairn result --wait` in one process sees a thread finish in another (a
/// `cairn worker` taking over a crashed demo's thread): the wait follows the database's
/// commits. `cairn delete` then removes it there.
#[test]
fn result_waits_on_postgres_for_a_thread_another_process_finishes() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("result_waits_on_postgres") else { return };
    let url = cluster.new_database();
    let db = std::path::Path::new(&url);
    let lease = ["--lease-ttl-ms", "1500"];
    let mut demo = vec!["demo", "--threads", "4", "--quiet", "--crash-after-steps", "6"];
    demo.extend(lease);
    assert_ne!(on(db, &demo).code, 0, "the demo was meant to abort");
    let threads = on(db, &["threads", "--json"]).expect(0).json();
    let unfinished = threads
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] != "completed")
        .and_then(|t| t["thread"].as_str())
        .expect("a thread left unfinished by the crash")
        .to_owned();
    let pending = on(db, &["result", &unfinished, "--json"]).expect(6).json();
    assert_eq!(pending["finished"], false);
    let waiter = Spawned::start(
        &["result", &unfinished, "--wait", "120", "--json", "--db", &url],
        Duration::from_secs(180),
    );
    let mut worker = vec!["worker", "--exit-when-idle", "--poll-ms", "100"];
    worker.extend(lease);
    on(db, &worker).expect(0);
    let mut out = String::new();
    while let Some(line) = waiter.next_line() {
        out.push_str(&line);
        out.push('\n');
    }
    assert_eq!(waiter.wait(), 0, "{out}");
    let waited: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(
        (waited["finished"].as_bool(), waited["status"].as_str()),
        (Some(true), Some("completed"))
    );
    on(db, &["delete", &unfinished]).expect(0);
    on(db, &["result", &unfinished]).expect(1);
    let verify = on(db, &["verify", "--json"]).expect(0).json();
    assert_eq!(verify["problems"], Value::Array(Vec::new()), "{verify}");
}
