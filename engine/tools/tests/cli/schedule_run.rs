//! Schedules made from the command line run nowhere but in an engine that runs schedules:
//! `create` leaves the schedule waiting (created) and says so, `cairn serve` then runs its
//! ticks, `trigger` runs its thread to rest before it exits, and `delete` deletes a schedule
//! whatever its status (failed included).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Spawned, copy, demo_db, on, tempdir};

const INPUT: &str = r#"{"question":"hourly digest"}"#;

fn create(db: &Path, name: &str) -> Value {
    let args = ["schedule", "create", name, "--workflow", "research-agent", "--every", "1h"];
    let mut all = args.to_vec();
    all.extend(["--input", INPUT, "--json"]);
    on(db, &all).expect(0).json()
}

fn threads(db: &Path) -> Vec<Value> {
    on(db, &["threads", "--json"]).expect(0).json().as_array().cloned().expect("a list")
}

fn status_of(list: &[Value], id: &str) -> Option<String> {
    list.iter().find(|t| t["thread"] == id).and_then(|t| t["status"].as_str()).map(str::to_owned)
}

#[test]
fn a_schedule_created_from_the_command_line_waits_for_cairn_serve_which_runs_its_ticks() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let created = create(&db, "hourly");
    assert_eq!(created[0]["status"], "created", "waits for an engine: {created}");
    let first_tick = created[0]["state"]["next_tick_ms"].as_u64().expect("a first tick");
    // A moment later nothing has moved: no tick ran in the command, none is half done.
    let again = on(&db, &["schedule", "list", "--json"]).expect(0).json();
    assert_eq!(again[0]["status"], "created", "{again}");
    assert!(!threads(&db).iter().any(|t| t["thread"].as_str().is_some_and(|id| id.contains('@'))));
    let text =
        on(&db, &["schedule", "create", "hourly", "--workflow", "research-agent"]).expect(2).stderr;
    assert!(text.contains("--cron") || text.contains("--every"), "{text}");
    let same = ["schedule", "create", "hourly", "--workflow", "research-agent", "--every", "1h"];
    let mut same = same.to_vec();
    same.extend(["--input", INPUT]);
    let said = on(&db, &same).expect(0).stdout;
    assert!(said.contains("cairn serve --db"), "says where its ticks run: {said}");

    let db_arg = db.to_str().expect("utf-8");
    let server = Spawned::start(&["serve", "--json", "--db", db_arg], Duration::from_secs(120));
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).unwrap();
    let tick = format!("hourly@{first_tick}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let list = threads(&db);
        if status_of(&list, &tick).as_deref() == Some("completed") {
            break list;
        }
        assert!(Instant::now() < deadline, "the first tick ran under serve: {list:#?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status_of(&list, "schedule:hourly").as_deref(), Some("sleeping"), "{list:#?}");
    let pid = first["pid"].as_u64().expect("pid").to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(server.wait(), 0);
    let after = on(&db, &["schedule", "list", "--json"]).expect(0).json();
    assert_eq!(after[0]["status"], "sleeping", "{after}");
    assert_eq!(after[0]["state"]["started"], 1, "{after}");
}

#[test]
fn schedule_trigger_runs_its_thread_to_rest_before_it_exits() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    create(&db, "hourly");
    let triggered = on(&db, &["schedule", "trigger", "hourly", "--json"]).expect(0).json();
    assert_eq!(triggered["status"], "completed", "{triggered}");
    let thread = triggered["thread"].as_str().expect("thread");
    assert_eq!(status_of(&threads(&db), thread).as_deref(), Some("completed"));
    let text = on(&db, &["schedule", "trigger", "hourly"]).expect(0).stdout;
    assert!(text.starts_with("schedule hourly triggered: thread hourly@now-"), "{text}");
    assert!(text.trim_end().ends_with("now completed"), "{text}");
}

#[test]
fn a_schedule_is_deleted_whatever_its_status() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    create(&db, "hourly");
    // An engine that runs schedules but lacks the workflow they start: its first tick fails,
    // and the schedule with it (as the command line's own engine used to fail it at its exit).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let engine = cairn::Engine::builder(&db).open().await.expect("open");
        let handle = engine.thread("schedule:hourly").await.expect("the schedule's thread");
        let outcome = handle.finished().await.expect("it ends");
        assert_eq!(outcome.status, cairn::storage::ThreadStatus::Failed, "{outcome:?}");
        engine.shutdown().await;
    });
    let listed = on(&db, &["schedule", "list", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "failed", "{listed}");
    assert_eq!(
        on(&db, &["schedule", "delete", "hourly"]).expect(0).stdout.trim(),
        "schedule hourly deleted"
    );
    assert_eq!(on(&db, &["schedule", "list", "--json"]).expect(0).json(), serde_json::json!([]));

    // Deleted once (cancelled, listed so), then again: gone, and the name free.
    create(&db, "daily");
    on(&db, &["schedule", "delete", "daily"]).expect(0);
    assert_eq!(on(&db, &["schedule", "list", "--json"]).expect(0).json()[0]["status"], "cancelled");
    on(&db, &["schedule", "delete", "daily"]).expect(0);
    assert_eq!(on(&db, &["schedule", "list", "--json"]).expect(0).json(), serde_json::json!([]));
    assert_eq!(create(&db, "daily")[0]["status"], "created");

    // `cairn resume` of a schedule's thread would run its ticks in a process about to exit.
    let run = on(&db, &["resume", "schedule:daily"]).expect(1);
    assert!(run.stderr.contains("cairn serve"), "{}", run.stderr);
    assert_eq!(create(&db, "daily")[0]["status"], "created", "left as it was");

    let unknown = on(&db, &["schedule", "delete", "n1"]).expect(1);
    assert!(unknown.stderr.contains("no schedule n1"), "{}", unknown.stderr);
    on(&db, &["verify"]).expect(0);
}
