//! `cairn queue define|list` and `cairn threads --status queued`: limits written and read back
//! (a bad rate refused, naming it), threads waiting in line listed by status with the queue's
//! counts, on a copy of the demo database.

use std::sync::Arc;

use cairn::demo::{Research, research_workflow};
use cairn::model::ScriptedModel;
use cairn::{Engine, RecoveryPolicy, StartOptions};

use crate::harness::{copy, demo_db, on, tempdir};

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
            engine.start("research-agent", input, opts).await.unwrap();
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
