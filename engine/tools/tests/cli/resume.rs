//! A thread resumed by another process gives the uninterrupted run's result: the values a thread
//! draws (`new_id`, `random_u64`) come from a seed recorded with the thread, not from whichever
//! engine drives it.

use serde_json::Value;

use crate::harness::{on, tempdir};

const THREADS: &str = "6";

/// The demo's JSON summary lines (one per thread), sorted by thread.
fn summary(run: &crate::harness::Run) -> Vec<String> {
    let mut lines: Vec<String> = run.stdout.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

fn unfinished(db: &std::path::Path) -> Vec<String> {
    let list = on(db, &["threads", "--json"]).expect(0).json();
    let rows = list.as_array().cloned().or_else(|| list["threads"].as_array().cloned());
    rows.unwrap_or_else(|| panic!("threads --json: {list}"))
        .iter()
        .filter(|r| r["status"] != "completed")
        .map(|r| r["thread"].as_str().or(r["id"].as_str()).expect("thread id").to_owned())
        .collect()
}

#[test]
fn cairn_resume_of_a_crashed_demo_gives_the_uninterrupted_results_byte_for_byte() {
    let dir = tempdir();
    let reference_db = dir.path().join("reference.db");
    let reference =
        on(&reference_db, &["demo", "--threads", THREADS, "--quiet", "--json"]).expect(0);
    let expected = summary(&reference);
    assert_eq!(expected.len(), 6, "{reference:#?}");
    let mut resumed = 0;
    for crash_after in [2_u64, 9, 17] {
        let db = dir.path().join(format!("crash-{crash_after}.db"));
        let k = crash_after.to_string();
        let crashed =
            on(&db, &["demo", "--threads", THREADS, "--quiet", "--crash-after-steps", &k]);
        assert_ne!(crashed.code, 0, "the demo was meant to abort: {crashed:#?}");
        let left = unfinished(&db);
        assert!(!left.is_empty(), "crash after {crash_after}: every thread had finished");
        // Each unfinished thread is resumed by a `cairn resume` process of its own: none of them
        // is the engine that created the thread, and none is seeded like the demo.
        for thread in &left {
            let run = on(&db, &["resume", thread, "--json"]).expect(0).json();
            assert_eq!(run["status"], Value::from("completed"), "{thread}: {run}");
            resumed += 1;
        }
        assert!(unfinished(&db).is_empty(), "crash after {crash_after}: all finished");
        let again = on(&db, &["demo", "--threads", THREADS, "--quiet", "--json"]).expect(0);
        assert_eq!(summary(&again), expected, "crash after {crash_after}, resumed {left:?}");
    }
    assert!(resumed >= 6, "the test resumed {resumed} threads");
}
