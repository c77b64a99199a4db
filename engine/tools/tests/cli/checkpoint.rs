//! `cairn checkpoint create` and `cairn rollback` on a copy of the demo database.

use crate::harness::{copy, demo_db, events, on, tempdir};

#[test]
fn checkpoint_create_writes_a_tagged_manual_checkpoint_and_its_event_names_it() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let made = on(
        &db,
        &[
            "checkpoint",
            "create",
            "demo-1",
            "--tag",
            "reviewed",
            "--description",
            "looked at it",
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(made["thread"], "demo-1");
    let id = made["id"].as_u64().expect("an id");
    let found = on(&db, &["checkpoints", "--tag", "reviewed", "--json"]).expect(0).json();
    let found = found.as_array().expect("an array");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["id"], id);
    assert_eq!(found[0]["kind"], "manual");
    assert_eq!(found[0]["meta"]["description"], "looked at it");
    assert_eq!(found[0]["meta"]["creator"], "cli");
    let log = events(&db, "demo-1");
    let last = log.last().expect("events");
    assert_eq!(last["kind"], "checkpoint_created");
    assert_eq!(last["body"]["checkpoint"], id, "{last}");
    // The table form says which checkpoint it wrote.
    let text = on(&db, &["checkpoint", "create", "demo-1"]).expect(0).stdout;
    assert!(text.starts_with("checkpoint ") && text.contains("of thread demo-1"), "{text}");
}

#[test]
fn rollback_of_a_finished_thread_is_refused_and_changes_nothing() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let before = events(&db, "demo-1");
    let cps = on(&db, &["checkpoints", "--thread", "demo-1", "--json"]).expect(0).json();
    let id = cps[0]["id"].as_u64().expect("a checkpoint").to_string();
    let run = on(&db, &["rollback", "demo-1", "--to", &id]).expect(1);
    assert!(run.stderr.contains("completed"), "{}", run.stderr);
    assert_eq!(events(&db, "demo-1"), before);
}

#[test]
fn a_manual_checkpoint_of_a_finished_thread_changes_no_usage_budget_or_time_of_it() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let shown = |db: &std::path::Path| on(db, &["show", "demo-1", "--json"]).expect(0).json();
    let before = shown(&db);
    assert_eq!(before["status"], "completed", "{before}");
    // Later than the thread's last event by at least this process's start.
    std::thread::sleep(std::time::Duration::from_millis(20));
    on(&db, &["checkpoint", "create", "demo-1", "--tag", "later"]).expect(0);
    let after = shown(&db);
    for field in ["budgets", "updated_at_ms", "created_at_ms"] {
        assert_eq!(after[field], before[field], "{field}: {before} then {after}");
    }
    assert_eq!(after["telemetry"]["tokens"], before["telemetry"]["tokens"]);
    let listed = on(&db, &["threads", "--json"]).expect(0).json();
    let row = listed.as_array().unwrap().iter().find(|t| t["thread"] == "demo-1").cloned();
    assert_eq!(row.unwrap()["updated_at_ms"], before["updated_at_ms"]);
    // A bundle carries the same figures: imported elsewhere, the thread shows them.
    let out = dir.path().join("demo-1.json");
    on(&db, &["bundle", "export", "demo-1", "-o", out.to_str().unwrap()]).expect(0);
    let other = dir.path().join("other.db");
    on(&other, &["bundle", "import", out.to_str().unwrap()]).expect(0);
    assert_eq!(shown(&other)["budgets"], before["budgets"]);
}

#[test]
fn checkpoints_asked_at_run_time_are_recorded_taken_and_refused_for_a_finished_thread() {
    let dir = tempdir();
    let db = copy(crate::harness::crashed_db(), dir.path());
    on(&db, &["pause", "demo-1"]).expect(0);
    let every = ["checkpoint", "every", "demo-1", "--ms", "600000", "--meta", "ticket=OPS-42"];
    let asked = on(&db, &[&every[..], &["--json"]].concat()).expect(0).json();
    assert_eq!(
        (asked["thread"].as_str(), asked["every_ms"].as_u64()),
        (Some("demo-1"), Some(600_000))
    );
    let at = ["checkpoint", "at-node", "demo-1", "review", "--tag", "asked", "--creator", "ops"];
    let said = on(&db, &at).expect(0).stdout;
    assert!(said.contains("node review"), "{said}");
    // Refused with what is wrong: a node the workflow lacks, a zero interval (usage errors).
    let run = on(&db, &["checkpoint", "at-node", "demo-1", "nope"]).expect(2);
    assert!(run.stderr.contains("nope"), "{}", run.stderr);
    on(&db, &["checkpoint", "every", "demo-1", "--ms", "0"]).expect(2);
    on(&db, &["checkpoint", "cancel", "demo-1"]).expect(0);
    let requested: Vec<_> = events(&db, "demo-1")
        .into_iter()
        .filter(|e| e["body"]["type"] == "checkpoint_requested")
        .map(|e| e["body"]["request"]["request"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(requested, ["every", "at_node", "cancel_every"]);
    // Resumed, the thread takes the node's checkpoint with the metadata given.
    assert_eq!(on(&db, &["resume", "demo-1", "--json"]).expect(0).json()["status"], "completed");
    let found = on(&db, &["checkpoints", "--tag", "asked", "--json"]).expect(0).json();
    let found = found.as_array().expect("an array");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0]["kind"].as_str(), found[0]["meta"]["creator"].as_str()),
        (Some("node"), Some("ops"))
    );
    let run = on(&db, &["checkpoint", "cancel", "demo-1"]).expect(1);
    assert!(run.stderr.contains("finished"), "{}", run.stderr);
}
