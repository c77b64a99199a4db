//! The `cairn` command line on a PostgreSQL URL: init, the demo, and the inspection commands
//! work on `--db postgresql://...` as they do on a file, against a real throwaway cluster.

use std::path::Path;

use cairn_storage_testkit::pg_cluster::Cluster;
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

/// A demo killed mid-run leaves Running threads leased to a dead process; three `cairn worker`
/// processes on the same database take them over once the leases lapse, share them, and finish
/// every one with the results an uninterrupted run gives.
#[test]
fn workers_take_over_a_crashed_demos_threads_and_finish_them() {
    let Some(cluster) = Cluster::start("workers_take_over_a_crashed_demos_threads") else {
        return;
    };
    let url = cluster.new_database();
    let db = Path::new(&url);
    let lease = ["--lease-ttl-ms", "1500"];
    let mut demo = vec!["demo", "--threads", "12", "--quiet", "--crash-after-steps", "15"];
    demo.extend(lease);
    let crashed = on(db, &demo);
    assert_ne!(crashed.code, 0, "the demo was meant to abort: {crashed:#?}");
    let running = |db: &Path| {
        let threads = on(db, &["threads", "--json"]).expect(0).json();
        threads.as_array().unwrap().iter().filter(|t| t["status"] != "completed").count()
    };
    let left = running(db);
    assert!(left > 0, "every thread had finished before the crash");

    let workers: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(crate::harness::bin())
                .args(["worker", "--db", &url, "--exit-when-idle", "--poll-ms", "100", "--json"])
                .args(lease)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("a worker starts")
        })
        .collect();
    let mut steps = Vec::new();
    for worker in workers {
        let out = worker.wait_with_output().expect("the worker ends");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
        let summary: Value = serde_json::from_str(stdout.trim()).expect("one JSON summary");
        steps.push(summary["steps"].as_u64().unwrap());
    }
    assert!(steps.iter().sum::<u64>() > 0, "the workers drove nothing: {steps:?}");
    assert_eq!(running(db), 0, "every thread finished");
    // The demo again on the same ids reports the stored results: the same as a run on a file
    // that never crashed.
    let mut again = vec!["demo", "--threads", "12", "--quiet", "--json"];
    again.extend(lease);
    let results = on(db, &again).expect(0).stdout;
    let dir = crate::harness::tempdir();
    let file = dir.path().join("demo.db");
    let reference = on(&file, &["demo", "--threads", "12", "--quiet", "--json"]).expect(0).stdout;
    assert_eq!(results, reference);
    let verify = on(db, &["verify", "--json"]).expect(0).json();
    assert_eq!(verify["problems"], Value::Array(Vec::new()), "{verify}");
    crate::harness::report(&format!(
        "RELIABILITY pg_takeover workers=3 threads=12 left_by_crash={left} worker_steps={steps:?} \
         unfinished=0 results_equal_uninterrupted_run=true"
    ));
}

/// `cairn copy` moves threads from a file to PostgreSQL and back: the same stored results, the
/// same events (seq, time, kind, body; lsns are each store's own), `verify` clean on each side,
/// and a second copy skips what the destination has.
#[test]
fn copy_moves_threads_from_a_file_to_postgres_and_back() {
    let Some(cluster) = Cluster::start("copy_moves_threads_from_a_file_to_postgres_and_back")
    else {
        return;
    };
    let url = cluster.new_database();
    let dir = crate::harness::tempdir();
    let file = dir.path().join("demo.db");
    let results = on(&file, &["demo", "--threads", "4", "--quiet", "--json"]).expect(0).stdout;
    let file_s = file.to_str().unwrap();
    let copied =
        crate::harness::cairn(&["copy", "--from", file_s, "--to", &url, "--json"]).expect(0).json();
    assert_eq!(copied["copied"], Value::from(4), "{copied}");
    assert!(copied["checkpoints"].as_u64().unwrap() > 0, "{copied}");
    let again =
        crate::harness::cairn(&["copy", "--from", file_s, "--to", &url, "--json"]).expect(0).json();
    assert_eq!(again["copied"], Value::from(0));
    assert_eq!(again["skipped"].as_array().map_or(0, Vec::len), 4, "{again}");
    let db = Path::new(&url);
    let on_pg = on(db, &["demo", "--threads", "4", "--quiet", "--json"]).expect(0).stdout;
    assert_eq!(on_pg, results, "the copied threads hold the same results");
    assert_eq!(on(db, &["verify", "--json"]).expect(0).json()["problems"], Value::Array(vec![]));
    let back = dir.path().join("back.db");
    let back_s = back.to_str().unwrap();
    crate::harness::cairn(&["copy", "--from", &url, "--to", back_s, "--json"]).expect(0);
    assert_eq!(on(&back, &["verify", "--json"]).expect(0).json()["problems"], Value::Array(vec![]));
    // Lsns and checkpoint ids are each database's own; everything else travels.
    let without_lsn = |events: Vec<Value>| -> Vec<Value> {
        events
            .into_iter()
            .map(|mut e| {
                if let Some(o) = e.as_object_mut() {
                    o.remove("lsn");
                }
                if let Some(body) = e["body"].as_object_mut() {
                    body.remove("checkpoint");
                }
                e
            })
            .collect()
    };
    for thread in ["demo-0", "demo-1", "demo-3"] {
        let original = without_lsn(crate::harness::events(&file, thread));
        let round_trip = without_lsn(crate::harness::events(&back, thread));
        assert!(!original.is_empty());
        assert_eq!(original, round_trip, "{thread}");
    }
    // The correlation ids travel too: each side's index finds the same messages.
    let trace = |db: &Path| {
        let found = on(db, &["trace", "corr-2", "--json"]).expect(0).json();
        let messages = found.as_array().cloned().unwrap_or_default();
        messages.iter().map(|m| (m["thread"].clone(), m["content"].clone())).collect::<Vec<_>>()
    };
    let original = trace(&file);
    assert_eq!(original.len(), 1, "{original:?}");
    assert_eq!(trace(db), original);
    assert_eq!(trace(&back), original);
}

/// The state of [`signals_wf`]: the signals its node received, in order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Got {
    got: Vec<u64>,
}

impl cairn::dsl::State for Got {
    type Update = Vec<u64>;
    fn apply(&mut self, u: Vec<u64>) {
        self.got.extend(u);
    }
}

/// One node: receives an `n`, waits for `go`, then receives two more `n`.
fn signals_wf() -> cairn::dsl::Workflow<Got> {
    use cairn::dsl::{Ctx, NodeOutput, Workflow};
    Workflow::<Got>::builder("inbox", 1)
        .node("recv", |_s: std::sync::Arc<Got>, ctx: Ctx| async move {
            let a: u64 = ctx.recv("n").await?;
            let _: String = ctx.recv("go").await?;
            let b: u64 = ctx.recv("n").await?;
            let c: u64 = ctx.recv("n").await?;
            Ok(NodeOutput::update(vec![a, b, c]))
        })
        .edge(cairn::START, "recv")
        .edge("recv", cairn::END)
        .build()
        .unwrap()
}

/// On `db`, starts thread `id`, which receives `n` = 1 and then waits for `go` with `n` = 2
/// and 3 sent but not received: signals waiting in its inbox.
async fn park_with_signals_waiting(db: &Path, id: &str) {
    let engine = cairn::Engine::builder(db).workflow(&signals_wf()).open().await.unwrap();
    let t = engine.start_json("inbox", Got::default(), cairn::StartOptions::id(id)).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, cairn::ThreadStatus::WaitingInput);
    engine.signal(id, "n", 1u64).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, cairn::ThreadStatus::WaitingInput, "waits for go");
    engine.signal(id, "n", 2u64).await.unwrap();
    engine.signal(id, "n", 3u64).await.unwrap();
    engine.shutdown().await;
}

/// On `db`, sends `go` to thread `id` (moved there with signals waiting): it must receive the
/// waiting signals after the move, in order, each once.
async fn finish_after_the_move(db: &Path, id: &str) {
    let engine = cairn::Engine::builder(db).workflow(&signals_wf()).open().await.unwrap();
    let t = engine.thread(id).await.unwrap();
    assert_eq!(t.status().await.unwrap(), cairn::ThreadStatus::WaitingInput);
    assert_eq!(engine.signal(id, "go", "now").await.unwrap(), 4, "numbered after the copied ones");
    let finished = tokio::time::timeout(std::time::Duration::from_secs(20), t.finished()).await;
    assert_eq!(finished.expect("it finishes").unwrap().status, cairn::ThreadStatus::Completed);
    let out: Got = t.output().await.unwrap();
    assert_eq!(out.got, vec![1, 2, 3], "{id}: received in order, once");
    engine.shutdown().await;
}

/// `cairn copy` takes each thread's signal inbox along, both ways: a thread parked with
/// signals waiting receives them after the move, in order, once (redb -> PostgreSQL and
/// PostgreSQL -> redb); a finished thread's inbox is copied too; `verify` is clean on each side.
#[test]
fn copy_moves_waiting_signals_both_ways() {
    let Some(cluster) = Cluster::start("copy_moves_waiting_signals_both_ways") else {
        return;
    };
    let url = cluster.new_database();
    let pg = Path::new(&url);
    let dir = crate::harness::tempdir();
    let (file, back) = (dir.path().join("signals.db"), dir.path().join("back.db"));
    let (file_s, back_s) = (file.to_str().unwrap(), back.to_str().unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let clean = |db: &Path| {
        let verify = on(db, &["verify", "--json"]).expect(0).json();
        assert_eq!(verify["problems"], Value::Array(vec![]), "{verify}");
    };

    rt.block_on(park_with_signals_waiting(&file, "s-file"));
    let copied =
        crate::harness::cairn(&["copy", "--from", file_s, "--to", &url, "--json"]).expect(0).json();
    assert_eq!((copied["copied"].as_u64(), copied["signals"].as_u64()), (Some(1), Some(3)));
    clean(&file);
    clean(pg);
    rt.block_on(finish_after_the_move(pg, "s-file"));

    rt.block_on(park_with_signals_waiting(pg, "s-pg"));
    let copied =
        crate::harness::cairn(&["copy", "--from", &url, "--to", back_s, "--json"]).expect(0).json();
    // s-file, finished with 4 signals, and s-pg, parked with 3.
    assert_eq!((copied["copied"].as_u64(), copied["signals"].as_u64()), (Some(2), Some(7)));
    clean(pg);
    clean(&back);
    rt.block_on(finish_after_the_move(&back, "s-pg"));
    clean(&back);
}
