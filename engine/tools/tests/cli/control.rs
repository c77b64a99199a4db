//! Controls on a database whose engine process died: resumable, pause, resume, cancel, abandon,
//! and `events --follow` seeing a change made by another process.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{Spawned, copy, crashed_db, events, on, tempdir};

fn status(db: &std::path::Path, thread: &str) -> String {
    let v = on(db, &["show", thread, "--json"]).expect(0).json();
    v["status"].as_str().expect("status").to_owned()
}

#[test]
fn resumable_lists_the_unfinished_thread_and_resume_runs_it_to_the_end() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    assert_eq!(status(&db, "demo-1"), "running", "left running by the dead process");
    let list = on(&db, &["resumable", "--json"]).expect(0).json();
    let row = list
        .as_array()
        .expect("array")
        .iter()
        .find(|r| r["thread"] == "demo-1")
        .cloned()
        .unwrap_or_else(|| panic!("demo-1 is resumable: {list}"));
    assert_eq!(row["runnable"], true);
    let table = on(&db, &["resumable"]).expect(0);
    assert!(table.stdout.starts_with("THREAD"), "{}", table.stdout);
    assert!(table.stdout.lines().any(|l| l.starts_with("demo-1") && l.ends_with("yes")));

    let paused = on(&db, &["pause", "demo-1"]).expect(0);
    assert_eq!(paused.stdout.trim(), "demo-1: now paused");
    assert_eq!(status(&db, "demo-1"), "paused");
    let resumed = on(&db, &["resume", "demo-1", "--json"]).expect(0).json();
    assert_eq!(resumed["status"], "completed");
    assert!(resumed["output"]["answer"].as_str().expect("answer").starts_with("A structured"));
    assert_eq!(status(&db, "demo-1"), "completed");
    on(&db, &["verify"]).expect(0);
    // Nothing left to resume; resuming a finished thread is refused.
    let list = on(&db, &["resumable", "--json"]).expect(0).json();
    assert!(list.as_array().expect("array").iter().all(|r| r["thread"] != "demo-1"));
    let refused = on(&db, &["resume", "demo-1"]).expect(1);
    assert!(refused.stderr.contains("completed"), "{}", refused.stderr);
}

#[test]
fn cancel_and_abandon_end_threads_and_refuse_finished_ones() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    let run = on(&db, &["cancel", "demo-1", "--reason", "testing", "--json"]).expect(0).json();
    assert_eq!(run["status"], "cancelled");
    let log = events(&db, "demo-1");
    let last = log.last().expect("events");
    assert_eq!(last["kind"], "cancelled");
    assert!(last["summary"].as_str().expect("summary").contains("testing"), "{last}");
    let again = on(&db, &["cancel", "demo-1"]).expect(1);
    assert!(again.stderr.contains("cancelled"), "{}", again.stderr);
    on(&db, &["abandon", "demo-1"]).expect(1);

    let dir2 = tempdir();
    let db2 = copy(crashed_db(), dir2.path());
    on(&db2, &["abandon", "demo-1"]).expect(0);
    assert_eq!(status(&db2, "demo-1"), "cancelled");
    on(&db2, &["cancel", "nope"]).expect(1);
}

#[test]
fn follow_prints_new_events_until_the_thread_ends() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    on(&db, &["pause", "demo-1"]).expect(0);
    let history = events(&db, "demo-1");
    let last_seq = history.last().and_then(|e| e["seq"].as_u64()).expect("last seq");
    let db_arg = db.to_str().expect("utf-8");
    let follower = Spawned::start(
        &["events", "demo-1", "--follow", "--json", "--poll-ms", "20", "--db", db_arg],
        Duration::from_secs(120),
    );
    // The history first, one JSON object per line, up to the last event.
    let mut seen: Vec<Value> = Vec::new();
    while seen.last().and_then(|e| e["seq"].as_u64()) != Some(last_seq) {
        let line = follower.next_line().expect("the follower prints the history");
        seen.push(serde_json::from_str(&line).expect("a JSON line"));
    }
    assert_eq!(seen, history);
    // Another process ends the thread: the follower prints that and stops by itself.
    on(&db, &["cancel", "demo-1"]).expect(0);
    let mut rest = Vec::new();
    while let Some(line) = follower.next_line() {
        rest.push(serde_json::from_str::<Value>(&line).expect("a JSON line"));
    }
    assert_eq!(follower.wait(), 0);
    assert_eq!(rest.first().and_then(|e| e["seq"].as_u64()), Some(last_seq + 1), "{rest:?}");
    assert_eq!(rest.last().expect("new events")["kind"], "cancelled");
}

#[test]
fn signal_stores_a_signal_for_a_thread_and_refuses_a_finished_one() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    let sent = on(&db, &["signal", "demo-1", "note", r#"{"a": 1}"#, "--json"]).expect(0).json();
    assert_eq!((sent["signal"].as_u64(), sent["status"].as_str()), (Some(1), Some("running")));
    let text = on(&db, &["signal", "demo-1", "note", "bare-word"]).expect(0);
    assert_eq!(text.stdout.trim(), "signal 2 (note) sent to demo-1: now running");
    on(&db, &["signal", "demo-1", "note", "{oops"]).expect(2);
    on(&db, &["signal", "nobody", "note", "1"]).expect(1);
    on(&db, &["cancel", "demo-1"]).expect(0);
    let refused = on(&db, &["signal", "demo-1", "note", "3"]).expect(1);
    assert!(refused.stderr.contains("no more signals"), "{}", refused.stderr);
    on(&db, &["verify"]).expect(0);
}

/// A control refused on a finished thread names itself (issue 38: `abandon` said "it cannot be
/// cancelled"): the status machine's words come from what was asked.
#[test]
fn every_refused_control_names_itself() {
    let dir = tempdir();
    let db = copy(crate::harness::demo_db(), dir.path());
    let refused = |args: &[&str]| on(&db, args).expect(1).stderr;
    let abandon = refused(&["abandon", "demo-1"]);
    assert!(abandon.contains("it is already completed; it cannot be abandoned"), "{abandon}");
    assert!(!abandon.contains("cancel"), "{abandon}");
    let cancel = refused(&["cancel", "demo-1"]);
    assert!(cancel.contains("it cannot be cancelled"), "{cancel}");
    let pause = refused(&["pause", "demo-1"]);
    assert!(pause.contains("it cannot be paused"), "{pause}");
    let resume = refused(&["resume", "demo-1"]);
    assert!(resume.contains("resume"), "{resume}");
}

/// `cairn signal --dedup-key`: a key sent before stores nothing and answers the first number.
#[test]
fn signal_with_a_dedup_key_stores_it_once() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    let args = ["signal", "demo-1", "note", "1", "--dedup-key", "hook-1", "--json"];
    let first = on(&db, &args).expect(0).json();
    assert_eq!((first["signal"].as_u64(), first["duplicate"].as_bool()), (Some(1), Some(false)));
    let again = on(&db, &args).expect(0).json();
    assert_eq!((again["signal"].as_u64(), again["duplicate"].as_bool()), (Some(1), Some(true)));
    let text = on(&db, &["signal", "demo-1", "note", "1", "--dedup-key", "hook-1"]).expect(0);
    assert!(text.stdout.contains("a duplicate: nothing stored"), "{}", text.stdout);
    on(&db, &["verify"]).expect(0);
}
