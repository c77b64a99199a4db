//! Time travel, forks and debug bundles through the command line.

use serde_json::{Value, json};

use crate::harness::{cairn, copy, demo_db, events, on, tempdir};

/// The seq of demo-1's `step_completed` event of `step`.
fn step_seq(db: &std::path::Path, step: u64) -> u64 {
    events(db, "demo-1")
        .iter()
        .find(|e| e["kind"] == "step_completed" && e["body"]["step"] == step)
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("demo-1 completed step {step}"))
}

#[test]
fn state_at_a_seq_and_the_diff_between_two() {
    let after_plan = step_seq(demo_db(), 2);
    let before = on(demo_db(), &["state", "demo-1", "--at", "1", "--json"]).expect(0).json();
    assert_eq!(before["seq"], 1);
    assert_eq!(before["step"], 0);
    assert_eq!(before["state"]["plan"], json!([]));
    assert_eq!(before["state"]["question"], "What is a write-ahead log?");
    let planned = on(demo_db(), &["state", "demo-1", "--at", &after_plan.to_string(), "--json"])
        .expect(0)
        .json();
    assert_eq!(planned["step"], 2);
    let plan = planned["state"]["plan"].as_array().expect("plan").clone();
    assert!(!plan.is_empty(), "{planned}");
    let frontier = planned["frontier"].as_array().expect("frontier");
    assert!(frontier.contains(&json!("search_web")) && frontier.contains(&json!("search_docs")));
    let last = on(demo_db(), &["state", "demo-1", "--json"]).expect(0).json();
    let show = on(demo_db(), &["show", "demo-1", "--json"]).expect(0).json();
    assert_eq!(last["state"], show["output"], "the latest state is the output");

    let diff =
        on(demo_db(), &["state", "demo-1", "--diff", "1", &after_plan.to_string(), "--json"])
            .expect(0)
            .json();
    let changes = diff["changes"].as_array().expect("changes");
    assert!(changes.iter().any(|c| c["path"] == "/route" && c["after"] == "research"), "{diff}");
    assert_eq!(
        changes
            .iter()
            .filter(|c| c["path"].as_str().is_some_and(|p| p.starts_with("/plan/")))
            .count(),
        plan.len()
    );
    let text =
        on(demo_db(), &["state", "demo-1", "--diff", "1", &after_plan.to_string()]).expect(0);
    assert!(text.stdout.lines().any(|l| l.starts_with("~ /route:")), "{}", text.stdout);
    assert!(text.stdout.lines().any(|l| l.starts_with("+ /plan/0:")), "{}", text.stdout);
    let human = on(demo_db(), &["state", "demo-1", "--at", "1"]).expect(0);
    assert!(human.stdout.starts_with("thread demo-1 after seq 1 (step 0"), "{}", human.stdout);
    on(demo_db(), &["state", "demo-1", "--at", "100000"]).expect(2);
    on(demo_db(), &["state", "demo-1", "--diff", "1"]).expect(2);
}

#[test]
fn fork_runs_a_new_thread_from_a_seq_with_an_update_and_leaves_the_original() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let original = events(&db, "demo-1");
    let at = step_seq(&db, 2).to_string();
    let update = r#"{"Plan":["alpha","beta"]}"#;
    let run =
        on(&db, &["fork", "demo-1", "--at", &at, "--id", "demo-1-b", "--update", update, "--json"])
            .expect(0)
            .json();
    assert_eq!(run["thread"], "demo-1-b");
    assert_eq!(run["status"], "completed");
    let findings = run["output"]["findings"].as_array().expect("findings");
    assert!(findings.iter().all(|f| f.as_str().is_some_and(|f| f.contains("alpha"))), "{run}");
    let shown = on(&db, &["show", "demo-1-b", "--json"]).expect(0).json();
    assert_eq!(
        shown["parent"],
        json!({"thread": "demo-1", "seq": at.parse::<u64>().expect("seq")})
    );
    assert_eq!(events(&db, "demo-1"), original, "the original is untouched");
    // From a checkpoint, without running it.
    let cps = on(&db, &["checkpoints", "--thread", "demo-1", "--json"]).expect(0).json();
    let cp = cps[0]["id"].as_u64().expect("a checkpoint").to_string();
    let made =
        on(&db, &["fork", "demo-1", "--checkpoint", &cp, "--no-run", "--json"]).expect(0).json();
    assert_eq!(made["status"], "created");
    let bad = on(&db, &["fork", "demo-1", "--at", &at, "--update", "{not json"]).expect(2);
    assert!(bad.stderr.contains("--update"), "{}", bad.stderr);
    on(&db, &["fork", "demo-1"]).expect(2);
    on(&db, &["verify"]).expect(0);
}

/// Every form of `secret` that must not survive in an export.
fn leaked(bytes: &[u8], secret: &str) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains(secret) || text.contains(&secret.replace(' ', "%20"))
}

#[test]
fn bundles_export_redacted_show_and_import_into_a_fresh_database() {
    let dir = tempdir();
    let file = dir.path().join("demo-1.bundle.json");
    let f = file.to_str().expect("utf-8");
    let question = "What is a write-ahead log?";
    let run =
        on(demo_db(), &["bundle", "export", "demo-1", "-o", f, "--secret", question, "--json"])
            .expect(0)
            .json();
    assert_eq!(run["events"], events(demo_db(), "demo-1").len());
    let bytes = std::fs::read(&file).expect("bundle written");
    assert!(!leaked(&bytes, question), "the registered secret does not survive");
    let bundle: Value = serde_json::from_slice(&bytes).expect("a JSON bundle");
    assert_eq!(bundle["metadata"]["thread"]["id"], "demo-1");

    let shown = cairn(&["bundle", "show", f]).expect(0);
    assert!(shown.stdout.contains("demo-1 (completed)"), "{}", shown.stdout);
    let shown = cairn(&["bundle", "show", f, "--json"]).expect(0).json();
    assert_eq!(shown["version"], "1.0.0");

    let gz = dir.path().join("demo-1.bundle.json.gz");
    let gz_arg = gz.to_str().expect("utf-8");
    on(demo_db(), &["bundle", "export", "demo-1", "-o", gz_arg, "--gzip"]).expect(0);
    let gz_bytes = std::fs::read(&gz).expect("gzip bundle");
    assert_eq!(&gz_bytes[..2], &[0x1f, 0x8b], "gzip magic");

    let fresh = dir.path().join("imported.db");
    let imported = on(&fresh, &["bundle", "import", gz_arg, "--json"]).expect(0).json();
    assert_eq!(imported["thread"], "demo-1");
    let threads = on(&fresh, &["threads", "--json"]).expect(0).json();
    assert_eq!(threads.as_array().expect("array").len(), 1);
    let show = on(&fresh, &["show", "demo-1", "--json"]).expect(0).json();
    assert_eq!(show["status"], "completed");
    on(&fresh, &["verify"]).expect(0);
    let again = on(&fresh, &["bundle", "import", f]).expect(1);
    assert!(again.stderr.contains("exists"), "{}", again.stderr);

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, br#"{"version": "1.0.0", "timestamp": "yesterday"}"#).expect("write");
    let refused = cairn(&["bundle", "show", bad.to_str().expect("utf-8")]).expect(1);
    assert!(refused.stderr.contains("$.timestamp"), "names the JSON path: {}", refused.stderr);
    let missing = cairn(&["bundle", "show", dir.path().join("none.json").to_str().expect("utf-8")]);
    // A bundle file that cannot be read is a bad argument (2), not the database's 4.
    missing.expect(2);
}

#[test]
fn replay_verifies_every_demo_thread() {
    for thread in ["demo-0", "demo-1", "demo-2"] {
        let report = on(demo_db(), &["replay", thread, "--verify", "--json"]).expect(0).json();
        assert_eq!(report["divergence"], Value::Null, "{report}");
        assert!(report["tasks_replayed"].as_u64().unwrap_or(0) >= 2, "{report}");
    }
    let text = on(demo_db(), &["replay", "demo-1"]).expect(0).stdout;
    assert!(text.contains("no divergence"), "{text}");
}

/// The seed document's example bundle (the seed framework's format, version 0.1.0).
fn seed_example() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/it/fixtures/seed000_example.json")
}

#[test]
fn bundle_show_and_import_read_the_seed_documents_example() {
    let example = seed_example();
    let f = example.to_str().expect("utf-8");
    let shown = cairn(&["bundle", "show", f]).expect(0);
    assert!(shown.stdout.contains("1702886400000-abc123 (paused)"), "{}", shown.stdout);
    assert!(shown.stdout.contains("seed framework (bundle 0.1.0) on MacIntel"), "{}", shown.stdout);
    let json = cairn(&["bundle", "show", f, "--json"]).expect(0).json();
    assert_eq!(json["metadata"]["source_version"], "0.1.0");
    assert_eq!(json["telemetry"]["totalDuration"], 1500);
    assert_eq!(json["state"]["task"]["goal"], "优化这段 SQL 并保持结果一致");

    let dir = tempdir();
    let db = dir.path().join("seed.db");
    let imported = on(&db, &["bundle", "import", f, "--json"]).expect(0).json();
    assert_eq!(imported["thread"], "1702886400000-abc123");
    let show = on(&db, &["show", "1702886400000-abc123", "--json"]).expect(0).json();
    assert_eq!(show["status"], "paused");
    let listed = events(&db, "1702886400000-abc123");
    let kinds: Vec<&str> = listed.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["thread_created", "node_started", "tool_called"]);
    on(&db, &["verify"]).expect(0);

    let bad = dir.path().join("bad-seed.json");
    let mut v: Value =
        serde_json::from_slice(&std::fs::read(&example).expect("fixture")).expect("json");
    v["events"]["events"][1]["metadata"]["toolName"] = json!(null);
    std::fs::write(&bad, serde_json::to_vec(&v).expect("json")).expect("write");
    let refused = cairn(&["bundle", "show", bad.to_str().expect("utf-8")]).expect(1);
    assert!(
        refused.stderr.contains("$.events.events[1].metadata.toolName"),
        "names the field: {}",
        refused.stderr
    );
}

#[test]
fn bundle_export_keeps_meta_fields_and_drops_bodies_over_max_payload_bytes() {
    let dir = tempdir();
    let file = dir.path().join("small.json");
    let f = file.to_str().expect("utf-8");
    let args = [
        "bundle",
        "export",
        "demo-1",
        "-o",
        f,
        "--meta",
        "ticket=OPS-42",
        "--meta",
        "env=staging",
        "--max-payload-bytes",
        "300",
        "--json",
    ];
    let run = on(demo_db(), &args).expect(0).json();
    assert!(run["dropped"].as_u64().unwrap_or(0) > 0, "{run}");
    let bundle: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("bundle")).expect("json");
    assert_eq!(bundle["metadata"]["custom"], json!({"env": "staging", "ticket": "OPS-42"}));
    let dropped = bundle["events"]["dropped"].as_object().expect("dropped");
    assert!(dropped.values().all(|b| b.as_u64().is_some_and(|b| b > 300)), "{dropped:?}");
    assert!(bundle["toolResultsSummary"].as_array().is_some_and(|t| !t.is_empty()));
    let shown = cairn(&["bundle", "show", f]).expect(0);
    assert!(shown.stdout.contains("meta ticket"), "{}", shown.stdout);
    let refused = on(&dir.path().join("x.db"), &["bundle", "import", f]).expect(1);
    assert!(refused.stderr.contains("$.events.dropped"), "{}", refused.stderr);
    on(demo_db(), &["bundle", "export", "demo-1", "-o", f, "--meta", "novalue"]).expect(2);
}

/// `cairn interactions` folds the session's messages into who talks to whom (the demo's user
/// asks classify); `cairn state --at-time --session` shows the thread and what it started;
/// `cairn trace --chain --states` steps through a chain (the demo's message has no id: none).
#[test]
fn interactions_a_session_at_a_time_and_a_chain_step_through() {
    let dir = tempdir();
    let graph = on(demo_db(), &["interactions", "--thread", "demo-1", "--json"]).expect(0).json();
    assert_eq!(
        graph["edges"],
        json!([{"from": "user", "to": "classify", "messages": 1,
        "first_ms": graph["edges"][0]["first_ms"], "last_ms": graph["edges"][0]["last_ms"]}])
    );
    let page = dir.path().join("i.html");
    let written =
        on(demo_db(), &["interactions", "--thread", "demo-1", "-o", page.to_str().unwrap()]);
    assert!(written.expect(0).stdout.contains("2 parties, 1 edges"));
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(
        html.starts_with("<!doctype html>") && html.contains("<svg") && html.contains("classify")
    );
    let dot = on(demo_db(), &["interactions", "--thread", "demo-1"]).expect(0).stdout;
    assert!(dot.contains("\"user\" -> \"classify\" [label=\"1\"]"), "{dot}");
    let mermaid = dir.path().join("i.mmd");
    on(demo_db(), &["interactions", "--thread", "demo-1", "-o", mermaid.to_str().unwrap()])
        .expect(0);
    assert!(std::fs::read_to_string(&mermaid).unwrap().starts_with("flowchart LR"));
    on(demo_db(), &["interactions", "--thread", "nobody"]).expect(1);

    let end = on(demo_db(), &["state", "demo-1", "--json"]).expect(0).json();
    let last = events(demo_db(), "demo-1").pop().expect("events");
    let at = last["at_ms"].as_u64().expect("a time").to_string();
    let session = on(demo_db(), &["state", "demo-1", "--at-time", &at, "--session", "--json"])
        .expect(0)
        .json();
    let threads = session.as_array().expect("threads");
    assert_eq!(threads[0]["thread"], "demo-1");
    assert_eq!(threads[0]["state"]["state"], end["state"], "the root as it ended");
    assert!(threads.iter().skip(1).all(|t| t["parent"].is_string()), "{session}");
    on(demo_db(), &["state", "demo-1", "--session"]).expect(2);
    let chain = on(demo_db(), &["trace", "--thread", "demo-1", "--chain", "m1", "--states"]);
    assert!(chain.expect(0).stdout.contains("no message of the chain matches"));
}
