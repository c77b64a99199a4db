//! `cairn schedule`: create (bad specs refused, naming what is wrong), list, pause, trigger,
//! resume and delete, on a copy of the demo database.

use crate::harness::{copy, demo_db, on, tempdir};

const INPUT: &str = r#"{"question":"nightly digest","route":"","plan":[],"findings":[],"draft":"","drafts":0,"approved":false,"answer":""}"#;

fn status(db: &std::path::Path) -> String {
    let list = on(db, &["schedule", "list", "--json"]).expect(0).json();
    list[0]["status"].as_str().expect("status").to_owned()
}

#[test]
fn schedules_are_created_listed_paused_triggered_and_deleted_from_the_command_line() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let bad = |args: &[&str], what: &str| {
        let mut all = vec!["schedule", "create", "nightly", "--workflow", "research-agent"];
        all.extend_from_slice(args);
        let run = on(&db, &all);
        assert_ne!(run.code, 0, "{args:?} is refused");
        assert!(run.stderr.contains(what), "{args:?}: {}", run.stderr);
    };
    bad(&["--cron", "99 3 * * *", "--input", INPUT], "99 3 * * *");
    bad(&["--cron", "0 3 * * *", "--tz", "Atlantis/Capital", "--input", INPUT], "Atlantis/Capital");
    bad(&["--every", "soon", "--input", INPUT], "soon");
    bad(&["--cron", "0 3 * * *", "--input", "{"], "--input is not JSON");
    bad(&["--cron", "0 3 * * *", "--input", "42"], "not a valid state of research-agent");
    bad(&["--cron", "0 3 * * *", "--catch-up", "most", "--input", INPUT], "skip, one or all:N");
    assert_eq!(on(&db, &["schedule", "list", "--json"]).expect(0).json(), serde_json::json!([]));

    let args = [
        "schedule",
        "create",
        "nightly",
        "--workflow",
        "research-agent",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Berlin",
        "--catch-up",
        "all:3",
        "--input",
        INPUT,
        "--json",
    ];
    let created = on(&db, &args).expect(0).json();
    assert_eq!(created[0]["name"], "nightly");
    assert_eq!(created[0]["state"]["spec"]["catch_up"], serde_json::json!({ "all": { "max": 3 } }));
    let next = created[0]["state"]["next_tick_ms"].as_u64().expect("a next tick");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    assert!(next > now.as_millis() as u64, "the next tick is ahead");
    // The command's engine may end before the schedule's first step (which only goes to sleep
    // until the next tick): the next engine that resumes work takes it from there.
    let waiting = |s: &str| matches!(s, "created" | "running" | "sleeping");
    assert!(waiting(&status(&db)), "{}", status(&db));
    on(&db, &args).expect(0); // the same spec again: nothing changes
    let table = on(&db, &["schedule", "list"]).expect(0).stdout;
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("nightly") && l.contains("0 3 * * * (Europe/Berlin)"))
    );

    assert_eq!(
        on(&db, &["schedule", "pause", "nightly"]).expect(0).stdout.trim(),
        "schedule nightly paused"
    );
    assert_eq!(status(&db), "paused");
    let triggered = on(&db, &["schedule", "trigger", "nightly", "--json"]).expect(0).json();
    let thread = triggered["thread"].as_str().expect("thread").to_owned();
    assert!(thread.starts_with("nightly@"), "{thread}");
    let shown = on(&db, &["show", &thread, "--json"]).expect(0).json();
    assert_eq!(shown["workflow"]["id"], "research-agent", "{shown}");
    assert_eq!(shown["labels"]["schedule"], "nightly");
    on(&db, &["schedule", "resume", "nightly"]).expect(0);
    assert!(waiting(&status(&db)), "{}", status(&db));
    on(&db, &["schedule", "delete", "nightly"]).expect(0);
    assert_eq!(status(&db), "cancelled");
    let refused = on(&db, &["schedule", "trigger", "nightly"]);
    assert_ne!(refused.code, 0, "a deleted schedule starts nothing");
    assert!(refused.stderr.contains("deleted"), "{}", refused.stderr);
    assert_ne!(on(&db, &["schedule", "pause", "missing"]).code, 0);
    on(&db, &["verify"]).expect(0);
}

/// Every time the CLI prints says its zone: a schedule's next tick in the zone its cron is read
/// in (issue 38: a Berlin 03:00 cron showed NEXT TICK 02:00:00, no zone), the other times in
/// UTC, marked.
#[test]
fn printed_times_carry_their_zone() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let create = ["schedule", "create", "nightly", "--workflow", "research-agent"];
    let mut args = create.to_vec();
    args.extend(["--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--input", INPUT]);
    let created = on(&db, &args).expect(0).stdout;
    let next = |table: &str| {
        let row = table.lines().find(|l| l.starts_with("nightly")).expect("the schedule's row");
        let at = row.find("0 3 * * * (Europe/Berlin)").expect("its rule") + 25;
        row[at..].split("  ").map(str::trim).find(|c| !c.is_empty()).expect("NEXT TICK").to_owned()
    };
    for table in [created, on(&db, &["schedule", "list"]).expect(0).stdout] {
        let tick = next(&table);
        // Berlin is CET (+01:00) in winter and CEST (+02:00) in summer.
        assert!(
            tick.ends_with(" 03:00:00.000 CET") || tick.ends_with(" 03:00:00.000 CEST"),
            "{tick:?} in {table}"
        );
    }
    let utc = |args: &[&str]| {
        let text = on(&db, args).expect(0).stdout;
        assert!(text.lines().skip(1).all(|l| l.contains(" UTC")), "{args:?}: {text}");
    };
    utc(&["threads"]);
    utc(&["events", "demo-1"]);
    utc(&["checkpoints", "--thread", "demo-1"]);
    let shown = on(&db, &["show", "demo-1"]).expect(0).stdout;
    let created_at = shown.lines().find(|l| l.starts_with("created")).expect("created");
    assert!(created_at.ends_with(" UTC"), "{shown}");
}

#[test]
fn a_schedule_takes_an_overlap_policy_and_jitter_and_backfills_a_range_once() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let mut args = vec!["schedule", "create", "hourly", "--workflow", "research-agent"];
    args.extend(["--cron", "0 * * * *", "--input", INPUT, "--json"]);
    args.extend(["--overlap", "buffer_one", "--jitter-ms", "30000"]);
    let created = on(&db, &args).expect(0).json();
    let spec = &created[0]["state"]["spec"];
    assert_eq!(
        (spec["overlap"].as_str(), spec["jitter_ms"].as_u64()),
        (Some("buffer_one"), Some(30_000))
    );
    let mut bad = vec!["schedule", "create", "other", "--workflow", "research-agent"];
    bad.extend(["--cron", "0 * * * *", "--input", INPUT, "--overlap", "queue"]);
    let run = on(&db, &bad).expect(2);
    assert!(run.stderr.contains("buffer_one"), "{}", run.stderr);

    // 2026-01-01 00:00 to 02:00 UTC: three hourly ticks, started once however often asked.
    let range = ["--from", "1767225600000", "--to", "1767232800000", "--json"];
    let backfill = |db: &std::path::Path| {
        on(db, &[&["schedule", "backfill", "hourly"][..], &range].concat()).expect(0).json()
    };
    let first = backfill(&db);
    assert_eq!(
        (first["ticks"].as_array().map(Vec::len), first["created"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(backfill(&db)["created"], 0, "a repeat starts nothing more");
    let shown = on(&db, &["show", "hourly@1767229200000", "--json"]).expect(0).json();
    assert_eq!(shown["labels"]["schedule"], "hourly");
    on(&db, &["schedule", "backfill", "nope", "--from", "0", "--to", "1"]).expect(1);
    on(&db, &["schedule", "backfill", "hourly", "--from", "2", "--to", "1"]).expect(2);
}
