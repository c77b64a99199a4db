//! Export options of a debug bundle: custom metadata, dropping large bodies, telemetry and the
//! tool-results summary.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::storage::EventStatus;
use cairn::{Durability, END, Engine, Error, START, StartOptions};
use cairn_tools::debug::{Bundle, ExportOptions, REDACTED, Redaction};
use serde_json::{Value, json};

use crate::common::db;

/// One node with two tool calls: a small one, and one returning about 40 KB.
fn fetching() -> Workflow<Replace<Value>> {
    Workflow::<Replace<Value>>::builder("fetching", 1)
        .node("fetch", |_s: Arc<Replace<Value>>, ctx: Ctx| async move {
            let n: u64 = ctx.tool("count", 1u64, |n: u64, _| async move { Ok(n + 1) }).await?;
            let big: Value = ctx
                .tool("download", n, |_n: u64, _| async move { Ok(json!("x".repeat(40_000))) })
                .await?;
            let len = big.as_str().map_or(0, str::len);
            Ok(NodeOutput::update(json!({ "n": n, "len": len })))
        })
        .edge(START, "fetch")
        .edge("fetch", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn export_options_add_metadata_drop_large_bodies_and_summarise_tools_and_telemetry() {
    let (_d, path) = db();
    let wf = fetching();
    let engine =
        Engine::builder(&path).durability(Durability::None).workflow(&wf).open().await.unwrap();
    let h = engine.start_json("fetching", Replace(json!({})), StartOptions::id("f")).await.unwrap();
    h.finished().await.unwrap();

    let mut metadata = BTreeMap::new();
    metadata.insert("ticket".to_owned(), json!("OPS-42"));
    metadata.insert("build".to_owned(), json!({"sha": "abc123", "api_token": "tok-live-999"}));
    let options = ExportOptions {
        metadata,
        max_payload_bytes: Some(10_000),
        redaction: Redaction::default(),
        ..ExportOptions::default()
    };
    let bundle = cairn_tools::Operator::new(&engine).export_bundle("f", &options).await.unwrap();

    // Custom fields are kept, through the redactor like everything else.
    let custom = &bundle.metadata.custom;
    assert_eq!(custom["ticket"], "OPS-42");
    assert_eq!(custom["build"], json!({"sha": "abc123", "api_token": REDACTED}));

    // The one body over 10,000 bytes (the download's result) is left out, with its size and
    // hash; its event keeps type, node and status.
    assert_eq!(bundle.events.dropped.len(), 1, "{:?}", bundle.events.dropped);
    let (key, bytes) = bundle.events.dropped.iter().next().unwrap();
    assert!(*bytes > 40_000 && key.starts_with("payload-") && key.len() == 8 + 64, "{key}");
    let event = bundle.events.events.iter().find(|e| e.payload_ref.as_ref() == Some(key)).unwrap();
    assert_eq!(event.kind, cairn::storage::EventKind::ToolReturned);
    assert_eq!(event.node_id.as_deref(), Some("fetch"));
    assert!(event.metadata.is_none() && bundle.events.payloads.is_empty());
    let whole = cairn_tools::Operator::new(&engine)
        .export_bundle("f", &ExportOptions::default())
        .await
        .unwrap();
    let body = &whole.events.payloads[key];
    assert_eq!(serde_json::to_vec(body).unwrap().len() as u64, *bytes, "the size is the body's");
    assert!(bundle.to_bytes(false).unwrap().len() < 10_000);

    // Telemetry under the seed's names, and one line per tool result (the dropped one too).
    let telemetry = bundle.telemetry.as_ref().unwrap();
    let meta = &bundle.state.meta;
    assert_eq!(telemetry.total_duration, meta.updated_at_ms - meta.created_at_ms);
    assert_eq!(telemetry.tool_call_count, 2);
    let tools = bundle.tool_results_summary.as_ref().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.tool_name.as_str()).collect();
    assert_eq!(names, ["count", "download"]);
    assert!(tools.iter().all(|t| t.status == EventStatus::Success && t.node_id == "fetch"));
    assert_eq!(tools[1].seq, event.seq);
    assert!(tools[1].output_bytes > 40_000);

    // Such a bundle reads back equal, and is refused by import with the reason.
    let read = Bundle::from_bytes(&bundle.to_bytes(true).unwrap()).unwrap();
    assert_eq!(read, bundle);
    let (_d2, path2) = db();
    let fresh =
        Engine::builder(&path2).durability(Durability::None).workflow(&wf).open().await.unwrap();
    match cairn_tools::Operator::new(&fresh).import_bundle(&read).await {
        Err(Error::Bundle { path, detail }) => {
            assert!(path.starts_with("$.events.dropped"), "{path}");
            assert!(detail.contains("dropped"), "{detail}");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
    let f = cairn::ThreadId::new("f").unwrap();
    assert!(fresh.store().thread(&f).wait().unwrap().is_none(), "nothing was written");

    // A dropped reference no event uses, or one also among the payloads, is refused.
    let mut v = serde_json::to_value(&bundle).unwrap();
    v["events"]["dropped"][format!("payload-{}", "0".repeat(64))] = json!(5);
    let err = Bundle::from_bytes(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(matches!(err, Error::Bundle { ref path, .. } if path.starts_with("$.events.dropped")));
    engine.shutdown().await;
    fresh.shutdown().await;
}

#[tokio::test]
async fn an_engine_with_the_policy_writes_the_bundle_of_each_thread_that_fails() {
    let (_d, path) = db();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("failed");
    let wf = Workflow::<Replace<Value>>::builder("brittle", 1)
        .node("step", |s: Arc<Replace<Value>>, _ctx: Ctx| async move {
            if s.0["fail"] == json!(true) {
                return Err(cairn::dsl::NodeError::fatal("the disk is full"));
            }
            Ok(NodeOutput::update(json!({"ok": true})))
        })
        .edge(START, "step")
        .edge("step", END)
        .build()
        .unwrap();
    let mut options = ExportOptions { gzip: true, ..ExportOptions::default() };
    options.metadata.insert("service".into(), json!("billing"));
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&wf)
        .on_failure(cairn_tools::debug::FailureExport::new(&dir, options.clone()).hook())
        .open()
        .await
        .unwrap();
    let bad = StartOptions::id("bad/1");
    let failed = engine.start_json("brittle", Replace(json!({"fail": true})), bad).await.unwrap();
    assert_eq!(failed.finished().await.unwrap().status, cairn::ThreadStatus::Failed);
    let good = StartOptions::id("good");
    let done = engine.start_json("brittle", Replace(json!({"fail": false})), good).await.unwrap();
    assert_eq!(done.finished().await.unwrap().status, cairn::ThreadStatus::Completed);

    let policy = cairn_tools::debug::FailureExport::new(&dir, options);
    let file = policy.path_for("bad/1");
    assert_eq!(file, dir.join("bad%2F1.bundle.json.gz"));
    let bundle = Bundle::from_bytes(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(bundle.metadata.thread.id, "bad/1");
    assert_eq!(bundle.metadata.thread.status, cairn::ThreadStatus::Failed);
    assert_eq!(bundle.metadata.custom["service"], "billing");
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "only the failed thread is exported: {names:?}");
    engine.shutdown().await;
}
