//! `cairn queue define|list` and `cairn threads --status queued`: limits written and read back
//! (a bad rate refused, naming it), threads waiting in line listed by status with the queue's
//! counts, on a copy of the demo database; `queue list` through `cairn serve`'s endpoint
//! prints what it prints from the file; the flow-control flags are written and listed, a bad
//! one refused naming it, nothing written.

use std::sync::Arc;
use std::time::Duration;

use cairn::{Engine, RecoveryPolicy, StartOptions};
use cairn_tools::demo::{Research, research_workflow};
use cairn_tools::model::ScriptedModel;

use crate::harness::{Spawned, copy, demo_db, on, tempdir};

#[test]
fn queues_are_defined_and_listed_and_queued_threads_are_listed_by_status() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let bad = on(&db, &["queue", "define", "reports", "--rate", "60/soon"]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("60/soon"), "{}", bad.stderr);
    let args =
        ["queue", "define", "reports", "--concurrency", "8", "--per-key", "2", "--rate", "60/60s"];
    let defined = on(&db, &[&args[..], &["--json"]].concat()).expect(0).json();
    assert_eq!(defined[0]["name"], "reports");
    assert_eq!(defined[0]["limits"]["concurrency_max"], 8);
    assert_eq!(defined[0]["limits"]["per_key_max"], 2);
    assert_eq!(
        defined[0]["limits"]["rate"],
        serde_json::json!({"starts": 60, "period_ms": 60_000})
    );

    // Three starts on the queue by an engine that admits nothing (recovery parked: no
    // admitter), so all three wait in line.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let wf = research_workflow(Arc::new(ScriptedModel::demo())).unwrap();
        let engine =
            Engine::builder(&db).recovery(RecoveryPolicy::Park).workflow(&wf).open().await.unwrap();
        for (i, tenant) in ["acme", "acme", "globex"].iter().enumerate() {
            let input = Research { question: format!("report {i}"), ..Research::default() };
            let opts = StartOptions::id(format!("report-{i}")).on_queue("reports").key(*tenant);
            engine.start_json("research-agent", input, opts).await.unwrap();
        }
        engine.shutdown().await;
    });
    let queued = on(&db, &["threads", "--status", "queued", "--json"]).expect(0).json();
    let mut ids: Vec<&str> =
        queued.as_array().unwrap().iter().map(|t| t["thread"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["report-0", "report-1", "report-2"], "{queued}");
    let list = on(&db, &["queue", "list", "--json"]).expect(0).json();
    assert_eq!((list[0]["running"].clone(), list[0]["waiting"].clone()), (0.into(), 3.into()));
    assert_eq!(list[0]["keys"]["acme"]["waiting"], 2);
    let table = on(&db, &["queue", "list"]).expect(0).stdout;
    assert!(table.starts_with("QUEUE"), "{table}");
    assert!(table.contains("globex"), "{table}");
}

/// `cairn queue list`, text and `--json`, through the endpoint of `cairn serve` holding the file
/// (`GET /api/queues`) prints exactly what it prints from the file once the server is gone: a
/// queue with an admission in its rate window and threads waiting under two keys, and an empty
/// one. The announcement copied beside a path with no file proves the endpoint answered.
#[test]
fn queue_list_prints_through_the_endpoint_what_it_prints_from_the_file() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let args = ["queue", "define", "reports", "--concurrency", "2", "--per-key", "1"];
    // One start an hour: once one is admitted below, `cairn serve` (which admits from queues)
    // admits no other while the test reads, so both reads see the same counts.
    on(&db, &[&args[..], &["--rate", "1/1h"]].concat()).expect(0);
    on(&db, &["queue", "define", "empty"]).expect(0);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let wf = research_workflow(Arc::new(ScriptedModel::demo())).unwrap();
        // One start admitted (and run to its end) by an engine that resumes work ...
        let engine = Engine::builder(&db).workflow(&wf).open().await.unwrap();
        let opts = StartOptions::id("report-0").on_queue("reports").key("acme");
        let handle = engine.start_json("research-agent", Research::default(), opts).await.unwrap();
        handle.finished().await.unwrap();
        // The handle holds the engine's store (and the file's lock) too.
        drop(handle);
        engine.shutdown().await;
        drop(engine);
        // ... and three left in line by one that admits nothing.
        let engine =
            Engine::builder(&db).recovery(RecoveryPolicy::Park).workflow(&wf).open().await.unwrap();
        for (i, tenant) in [(1, "acme"), (2, "acme"), (3, "globex")] {
            let input = Research { question: format!("report {i}"), ..Research::default() };
            let opts = StartOptions::id(format!("report-{i}")).on_queue("reports").key(tenant);
            engine.start_json("research-agent", input, opts).await.unwrap();
        }
        engine.shutdown().await;
    });
    let lists: [&[&str]; 2] = [&["queue", "list"], &["queue", "list", "--json"]];

    let db_arg = db.to_str().expect("utf-8");
    let server = Spawned::start(&["serve", "--json", "--db", db_arg], Duration::from_secs(120));
    let first: serde_json::Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    let elsewhere = dir.path().join("elsewhere.db");
    std::fs::copy(
        cairn_tools::serve::endpoint_path(&db),
        cairn_tools::serve::endpoint_path(&elsewhere),
    )
    .expect("copy the announcement");
    let served: Vec<_> = lists.iter().map(|args| on(&elsewhere, args)).collect();
    let pid = first["pid"].as_u64().expect("pid").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    assert_eq!(server.wait(), 0);

    for (args, served) in lists.iter().zip(served) {
        let file = on(&db, args);
        assert_eq!(
            (served.code, &served.stdout, &served.stderr),
            (file.code, &file.stdout, &file.stderr),
            "{args:?}: through the endpoint, then from the file"
        );
        assert_eq!(file.code, 0, "{file:?}");
    }
    let list = on(&db, &["queue", "list", "--json"]).expect(0).json();
    let reports = &list.as_array().unwrap().iter().find(|q| q["name"] == "reports").unwrap();
    assert_eq!((reports["waiting"].clone(), reports["admitted"].clone()), (3.into(), 1.into()));
    assert_eq!(reports["recent"].as_array().map(Vec::len), Some(1), "{reports}");
    assert_eq!(reports["keys"]["acme"]["waiting"], 2);
    // Without the endpoint the path has no database.
    on(&elsewhere, &["queue", "list"]).expect(4);
}

/// `queue define --weight KEY=N --default-weight N`: weights that differ are written and listed
/// (JSON and the FLOW column); weights all the same are round robin and not stored; a weight
/// out of range or not KEY=N is a usage error (exit 2) that writes nothing.
#[test]
fn queue_define_takes_fairness_weights_and_list_shows_them() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let args = ["queue", "define", "tenants", "--weight", "gold=3", "--weight", "silver=2"];
    let defined = on(&db, &[&args[..], &["--json"]].concat()).expect(0).json();
    let fair = &defined[0]["limits"]["fairness"];
    assert_eq!(
        (fair["weights"]["gold"].clone(), fair["default_weight"].clone()),
        (3.into(), 1.into()),
        "{defined}"
    );
    let text = on(&db, &["queue", "list"]).expect(0).stdout;
    assert!(text.contains("weights gold=3 silver=2 (others 1)"), "{text}");
    for bad in [
        &["--weight", "gold=0"][..],
        &["--weight", "gold=1001"],
        &["--weight", "gold"],
        &["--default-weight", "0"],
    ] {
        on(&db, &[&["queue", "define", "other"][..], bad].concat()).expect(2);
    }
    let listed = on(&db, &["queue", "list", "--json"]).expect(0).json();
    let names: Vec<&str> =
        listed.as_array().unwrap().iter().filter_map(|q| q["name"].as_str()).collect();
    assert_eq!(names, ["tenants"], "nothing written: {listed}");
    // Equal weights: round robin, stored as none (control: the column says -).
    let equal = ["queue", "define", "even", "--weight", "a=2", "--default-weight", "2", "--json"];
    let even = on(&db, &equal).expect(0).json();
    assert!(even[0]["limits"]["fairness"].is_null(), "{even}");
}

/// The queues of `db` as `queue list --json` has them, by name.
fn listed(db: &std::path::Path) -> serde_json::Value {
    let list = on(db, &["queue", "list", "--json"]).expect(0).json();
    let by_name = list.as_array().unwrap().iter().map(|q| (q["name"].to_string(), q.clone()));
    serde_json::Value::Object(by_name.map(|(n, q)| (n.trim_matches('"').to_owned(), q)).collect())
}

#[test]
fn queue_define_takes_the_flow_control_flags_and_refuses_a_bad_one_naming_it() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let mut debounced = vec!["queue", "define", "alerts", "--debounce", "2s", "--rate-per-key"];
    debounced.extend(["5/1m", "--rate-drops", "--weight", "gold=3", "--default-weight", "2"]);
    let defined = on(&db, &debounced).expect(0).stdout;
    let flow = "rate-per-key 5/1m, rate-drops, debounce 2s, weights gold=3 (others 2)";
    assert!(defined.contains(flow), "{defined}");
    let batched = ["queue", "define", "digests", "--batch-max", "10", "--batch-window", "500ms"];
    on(&db, &batched).expect(0);
    let table = on(&db, &["queue", "list"]).expect(0).stdout;
    assert!(table.contains(flow), "{table}");
    assert!(table.contains("batch-max 10, batch-window 500ms"), "{table}");
    let queues = listed(&db);
    let alerts = &queues["alerts"]["limits"];
    assert_eq!(
        (&alerts["debounce_ms"], &alerts["rate_drops"], &alerts["rate_per_key"]),
        (&2_000.into(), &true.into(), &serde_json::json!({"starts": 5, "period_ms": 60_000})),
        "{alerts}"
    );
    assert_eq!(alerts["fairness"]["weights"]["gold"], 3, "{alerts}");
    let digests = &queues["digests"]["limits"];
    assert_eq!((&digests["batch_max"], &digests["batch_window_ms"]), (&10.into(), &500.into()));
    // Control: a queue defined without them has none.
    on(&db, &["queue", "define", "plain", "--concurrency", "2"]).expect(0);
    let plain = &listed(&db)["plain"]["limits"];
    assert_eq!((&plain["debounce_ms"], &plain["rate_drops"]), (&None::<u64>.into(), &false.into()));

    // A bad value exits 2 naming its flag, and writes nothing: the queues are as they were.
    let before = listed(&db);
    for (bad, flag) in [
        (&["--debounce", "soon"][..], "--debounce"),
        (&["--batch-window", "5y"], "--batch-window"),
        (&["--batch-max", "many"], "--batch-max"),
        (&["--rate-per-key", "5"], "--rate-per-key"),
        (&["--weight", "gold"], "--weight"),
        (&["--default-weight", "heavy"], "--default-weight"),
        (&["--rate-drops", "yes"], "yes"),
    ] {
        for name in ["alerts", "fresh"] {
            let run = on(&db, &[&["queue", "define", name][..], bad].concat()).expect(2);
            assert!(run.stderr.contains(flag), "{bad:?}: {}", run.stderr);
        }
    }
    // Refused by the limits' own check, saying what: debouncing and batching at once, a weight
    // of 0, a batch of 0.
    for (bad, said) in [
        (&["--debounce", "1s", "--batch-max", "3"][..], "debounces or batches"),
        (&["--weight", "gold=0"], "fairness weight"),
        (&["--batch-max", "0"], "batch size"),
    ] {
        let run = on(&db, &[&["queue", "define", "alerts"][..], bad].concat()).expect(2);
        assert!(run.stderr.contains(said), "{bad:?}: {}", run.stderr);
    }
    assert_eq!(listed(&db), before, "nothing written by a refusal");
}
