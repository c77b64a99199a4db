//! `cairn checkpoint every|cancel|at-node` and `cairn schedule backfill` on a file `cairn serve`
//! holds go through its endpoint (issue 43): they answer as on a free file, refusals with the
//! same exit codes, and what they ask is written by the serving engine. Control: a command that
//! still opens the file (`schedule list`) is refused there, so the file really is held.

use serde_json::Value;

use crate::harness::{copy, crashed_db, demo_db, events, on, tempdir};
use crate::start::{Killer, serve, stop};

/// A command that opens the file itself fails while `cairn serve` holds it.
fn is_held(db: &std::path::Path) {
    let run = on(db, &["schedule", "list"]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(run.stderr.contains("held by another process"), "{}", run.stderr);
}

#[test]
fn checkpoint_requests_go_through_cairn_serve_and_are_taken_by_the_serving_engine() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    // Paused on the free file: the serving engine leaves it parked until it is resumed.
    on(&db, &["pause", "demo-1"]).expect(0);
    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    is_held(&db);
    let every = ["checkpoint", "every", "demo-1", "--ms", "600000", "--meta", "ticket=OPS-42"];
    let asked = on(&db, &[&every[..], &["--json"]].concat()).expect(0).json();
    assert_eq!(
        (asked["thread"].as_str(), asked["every_ms"].as_u64()),
        (Some("demo-1"), Some(600_000))
    );
    let at = ["checkpoint", "at-node", "demo-1", "review", "--tag", "asked", "--creator", "ops"];
    let said = on(&db, &at).expect(0).stdout;
    assert!(said.contains("node review"), "{said}");
    // Refused as on a free file: a node the workflow lacks, a zero interval (usage errors), an
    // unknown thread (exit 1).
    let run = on(&db, &["checkpoint", "at-node", "demo-1", "nope"]).expect(2);
    assert!(run.stderr.contains("nope"), "{}", run.stderr);
    let run = on(&db, &["checkpoint", "every", "demo-1", "--ms", "0"]).expect(2);
    assert!(run.stderr.contains("interval_ms"), "{}", run.stderr);
    on(&db, &["checkpoint", "cancel", "nobody"]).expect(1);
    on(&db, &["checkpoint", "cancel", "demo-1", "--json"]).expect(0);
    let requested: Vec<_> = events(&db, "demo-1")
        .into_iter()
        .filter(|e| e["body"]["type"] == "checkpoint_requested")
        .map(|e| e["body"]["request"]["request"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(requested, ["every", "at_node", "cancel_every"]);
    let custom = events(&db, "demo-1")
        .into_iter()
        .find(|e| e["body"]["request"]["request"] == "every")
        .map(|e| e["body"]["request"]["meta"].clone());
    assert_eq!(custom.unwrap_or(Value::Null)["custom"]["ticket"], "OPS-42");
    // Resumed, the serving engine runs it and takes the node's checkpoint as asked.
    on(&db, &["resume", "demo-1"]).expect(0);
    on(&db, &["result", "demo-1", "--wait", "60"]).expect(0);
    let found = on(&db, &["checkpoints", "--tag", "asked", "--json"]).expect(0).json();
    let found = found.as_array().cloned().unwrap_or_default();
    let kinds: Vec<(Value, Value)> =
        found.iter().map(|c| (c["kind"].clone(), c["meta"]["creator"].clone())).collect();
    assert_eq!(kinds, [("node".into(), "ops".into())], "{found:?}");
    let run = on(&db, &["checkpoint", "cancel", "demo-1"]).expect(1);
    assert!(run.stderr.contains("refused"), "{}", run.stderr);
    stop(server, guard);
}

const INPUT: &str = r#"{"question":"nightly digest","route":"","plan":[],"findings":[],"draft":"","drafts":0,"approved":false,"answer":""}"#;

#[test]
fn schedule_backfill_goes_through_cairn_serve_and_starts_each_tick_once() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    // Hourly from 2100 on: it ticks nothing of its own in this test.
    let mut create = vec!["schedule", "create", "hourly", "--workflow", "research-agent"];
    create.extend(["--cron", "0 * * * *", "--input", INPUT, "--start-ms", "4102444800000"]);
    on(&db, &create).expect(0);
    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    is_held(&db);
    // 2026-01-01 00:00 to 02:00 UTC: three hourly ticks, started once however often asked.
    let range = ["--from", "1767225600000", "--to", "1767232800000"];
    let backfill = |more: &[&str]| on(&db, &[&["schedule", "backfill"][..], more, &range].concat());
    let first = backfill(&["hourly", "--json"]).expect(0).json();
    assert_eq!(
        (first["ticks"].as_array().map(Vec::len), first["created"].as_u64()),
        (Some(3), Some(3)),
        "{first}"
    );
    let again = backfill(&["hourly"]).expect(0).stdout;
    assert!(again.contains("3 tick(s) in the range, 0 run(s) created, 3 existed"), "{again}");
    // The serving engine runs the runs it wrote.
    let done = on(&db, &["result", "hourly@1767229200000", "--wait", "60", "--json"]).expect(0);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    // Refused as on a free file: an unknown schedule (exit 1), a range that ends first (2).
    on(&db, &["schedule", "backfill", "nope", "--from", "0", "--to", "1"]).expect(1);
    let run = on(&db, &["schedule", "backfill", "hourly", "--from", "2", "--to", "1"]).expect(2);
    assert!(run.stderr.contains("to_ms"), "{}", run.stderr);
    stop(server, guard);
    let shown = on(&db, &["show", "hourly@1767225600000", "--json"]).expect(0).json();
    assert_eq!(shown["labels"]["schedule"], "hourly", "{shown}");
}
