//! Bundles of the seed format (version 0.1.0): the seed document's own example imports, every
//! seed event type maps onto its Cairn kind, and bad input is an error naming its path.

use std::panic::AssertUnwindSafe;

use cairn::blocking::decode;
use cairn::event::Body;
use cairn::storage::{EventKind, Seq};
use cairn::{Durability, Engine, Error, ThreadStatus};
use cairn_tools::debug::{Bundle, SEED_WORKFLOW_ID};
use serde_json::{Value, json};

use crate::common::db;

const EXAMPLE: &str = include_str!("fixtures/seed000_example.json");

fn example() -> Value {
    serde_json::from_str(EXAMPLE).unwrap()
}

fn read(v: &Value) -> Result<Bundle, Error> {
    Bundle::from_bytes(&serde_json::to_vec(v).unwrap())
}

/// The path and detail of the bundle error `v` gives.
fn refused(v: &Value) -> (String, String) {
    match read(v) {
        Err(Error::Bundle { path, detail }) => (path, detail),
        other => panic!("expected a bundle error, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn the_seed_documents_example_bundle_reads_and_imports() {
    let bundle = Bundle::from_bytes(EXAMPLE.as_bytes()).unwrap();
    let seed = example();
    let m = &bundle.metadata;
    assert_eq!(m.source_version.as_deref(), Some("0.1.0"));
    assert_eq!(m.thread.id, "1702886400000-abc123");
    assert_eq!(m.thread.status, ThreadStatus::Paused, "progress 50, no error");
    assert_eq!(m.platform, "MacIntel");
    assert_eq!(m.custom["userAgent"], "Mozilla/5.0...");
    assert_eq!(
        m.custom["seedPayloads"]["payload-evt-1702886400100-abc456"],
        seed["events"]["payloads"]["payload-evt-1702886400100-abc456"],
        "the payload no body has a place for is kept"
    );
    let kinds: Vec<EventKind> = bundle.events.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::ThreadCreated, EventKind::NodeStarted, EventKind::ToolCalled]);
    let call = &bundle.events.events[2];
    assert_eq!((call.id.as_str(), call.timestamp), ("evt-1702886400100-abc456", 1702886400100));
    assert_eq!(call.summary, "调用工具: sql-query");
    assert_eq!(call.node_id.as_deref(), Some("tool-runner"));
    let body: Body = serde_json::from_value(call.metadata.clone().unwrap()).unwrap();
    match body {
        Body::ToolCalled { name, input, .. } => {
            assert_eq!(name, "sql-query");
            assert_eq!(input, json!({"query": "SELECT * FROM users"}));
        }
        other => panic!("not a tool call: {other:?}"),
    }
    // The whole seed State is the user state; the meta has what Cairn tracks itself.
    assert_eq!(bundle.state.state, seed["state"]);
    let meta = &bundle.state.meta;
    assert_eq!(meta.seq, 3);
    assert_eq!(meta.frontier, ["tool-runner"]);
    assert_eq!(meta.conversation[0].content, "优化这段 SQL");
    assert_eq!(meta.telemetry.tool_calls, 2);
    assert_eq!(meta.telemetry.node_ms["tool-runner"], 1400);
    assert!(meta.policy.permissions.as_ref().unwrap().contains("sql:read"));
    assert_eq!(meta.policy.budgets.as_ref().unwrap().max_tool_calls, Some(20));
    let telemetry = bundle.telemetry.as_ref().unwrap();
    assert_eq!((telemetry.total_duration, telemetry.tool_call_count), (1500, 2));
    assert_eq!(bundle.tool_results_summary.as_deref(), Some(&[][..]), "no tool_result event");
    // eventIndex 5 is past the two events the example holds: the checkpoint covers the last.
    let cps = bundle.checkpoints.as_ref().unwrap();
    assert_eq!((cps[0].id.as_str(), cps[0].event_index), ("checkpoint-1702886400500", 3));
    assert_eq!(cps[0].metadata.custom["seed_event_index"], "5");

    // Written out again it is a Cairn bundle that reads back equal.
    let again = Bundle::from_bytes(&bundle.to_bytes(false).unwrap()).unwrap();
    assert_eq!(again, bundle);
    assert_eq!(again.version, cairn_tools::debug::BUNDLE_VERSION);

    // It imports into a database that has no workflow for it.
    let (_d, path) = db();
    let engine = Engine::builder(&path).durability(Durability::None).open().await.unwrap();
    let id = cairn_tools::Operator::new(&engine).import_bundle(&bundle).await.unwrap();
    let record = engine.store().thread(&id).wait().unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Paused);
    assert_eq!(&*record.workflow.id, SEED_WORKFLOW_ID);
    let events = engine.store().read_range(&id, Seq(1), Seq(3)).wait().unwrap();
    let bodies: Vec<Body> =
        events.into_iter().map(|e| decode(engine.store().as_ref(), e).unwrap().body).collect();
    assert!(matches!(bodies[1], Body::NodeStarted { ref task, .. } if &*task.node == "planner"));
    assert!(engine.store().verify().unwrap().is_clean());
    // Its checkpoint gives the state without the workflow.
    let cp = engine.store().latest_checkpoint_at_or_before(&id, Seq(3)).wait().unwrap().unwrap();
    let snapshot: cairn::thread_ctx::Snapshot = serde_json::from_slice(&cp.snapshot).unwrap();
    assert_eq!(snapshot.state, seed["checkpoints"][0]["state"]);
    engine.shutdown().await;
}

/// A seed bundle with one event of every seed type.
fn every_type() -> Value {
    let mut v = example();
    let ev = |id: &str, t: &str, node: Option<&str>, status: &str, meta: Value| {
        let mut e = json!({"id": id, "timestamp": 1702886400200u64, "type": t,
                           "status": status, "summary": format!("{t} happened"), "metadata": meta});
        if let Some(n) = node {
            e["nodeId"] = json!(n);
        }
        e
    };
    let mut result = ev("e3", "tool_result", Some("tool-runner"), "success", json!({}));
    result["payloadRef"] = json!("rows");
    v["events"] = json!({
        "events": [
            ev("e0", "node_start", Some("tool-runner"), "info", json!({})),
            ev("e1", "tool_call", Some("tool-runner"), "info", json!({"toolName": "sql-query"})),
            ev("e2", "budget_warning", None, "warning",
               json!({"budget": "tool_calls", "used": 16, "limit": 20})),
            result,
            ev("e4", "error", Some("tool-runner"), "failure", json!({"error": "deadlock", "code": "db"})),
            ev("e5", "retry", Some("tool-runner"), "warning", json!({"delay": 250})),
            ev("e6", "node_end", Some("tool-runner"), "success", json!({"duration": 900})),
            ev("e7", "checkpoint", None, "info", json!({})),
            ev("e8", "budget_exceeded", None, "failure",
               json!({"budget": "tool_calls", "used": 20, "limit": 20})),
        ],
        "payloads": {"rows": {"rowCount": 1}},
    });
    v
}

#[test]
fn every_seed_event_type_maps_onto_its_cairn_kind() {
    let bundle = read(&every_type()).unwrap();
    let kinds: Vec<&str> = bundle.events.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "thread_created",
            "node_started",
            "tool_called",
            "budget_warning",
            "tool_returned",
            "node_failed",
            "retry_scheduled",
            "node_completed",
            "checkpoint_created",
            "budget_exceeded",
        ]
    );
    for (name, kind) in [("node_start", EventKind::NodeStarted), ("error", EventKind::NodeFailed)] {
        assert_eq!(cairn_tools::debug::seed_event_kind(name), Some(kind));
    }
    let body = |i: usize| -> Body {
        serde_json::from_value(bundle.events.events[i].metadata.clone().unwrap()).unwrap()
    };
    match body(4) {
        Body::ToolReturned { name, output, .. } => {
            assert_eq!(name, "sql-query", "named by the call before it");
            assert_eq!(output.unwrap(), json!({"rowCount": 1}), "the payload is the output");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(body(5), Body::NodeFailed { terminal: false, .. }), "a retry follows");
    assert!(matches!(body(6), Body::RetryScheduled { attempt: 2, delay_ms: 250, .. }));
    assert!(matches!(body(7), Body::NodeCompleted { attempt: 2, duration_ms: 900, .. }));
    assert!(!bundle.metadata.custom.contains_key("seedPayloads"), "the payload found its place");
    let tools = bundle.tool_results_summary.as_ref().unwrap();
    assert_eq!((tools.len(), tools[0].seq, tools[0].tool_name.as_str()), (1, 5, "sql-query"));
    assert_eq!(bundle.metadata.thread.status, ThreadStatus::Paused);

    // The seed's names are read as aliases in Cairn bundles too.
    let text = String::from_utf8(bundle.to_bytes(false).unwrap()).unwrap();
    // The event's own `type` (followed by its `nodeId`), not its body's (its last field).
    let aliased =
        text.replace(r#""type":"node_started","nodeId""#, r#""type":"node_start","nodeId""#);
    assert_ne!(aliased, text);
    assert_eq!(Bundle::from_bytes(aliased.as_bytes()).unwrap(), bundle);

    // An error as the last event: the thread failed.
    let mut failed = every_type();
    let list = failed["events"]["events"].as_array_mut().unwrap();
    list.truncate(5);
    assert_eq!(read(&failed).unwrap().metadata.thread.status, ThreadStatus::Failed);
}

#[test]
fn bad_seed_bundles_are_refused_with_the_path_of_the_bad_field() {
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        ("$.version", Box::new(|v| v["version"] = json!("0.2.0"))),
        ("$.timestamp", Box::new(|v| v["timestamp"] = json!("yesterday"))),
        ("$.extra", Box::new(|v| v["extra"] = json!(1))),
        ("$.state.id", Box::new(|v| drop(v["state"].as_object_mut().unwrap().remove("id")))),
        ("$.state.createdAt", Box::new(|v| v["state"]["createdAt"] = json!(-1))),
        (
            "$.state.telemetry.tokenCount",
            Box::new(|v| v["state"]["telemetry"]["tokenCount"] = json!("x")),
        ),
        ("$.state.task.progress", Box::new(|v| v["state"]["task"]["progress"] = json!(150))),
        (
            "$.state.conversation.messages[0].role",
            Box::new(|v| {
                v["state"]["conversation"]["messages"][0].as_object_mut().unwrap().remove("role");
            }),
        ),
        ("$.events.events", Box::new(|v| v["events"]["events"] = json!({}))),
        (
            "$.events.events[1].type",
            Box::new(|v| v["events"]["events"][1]["type"] = json!("tool_called!")),
        ),
        (
            "$.events.events[0].status",
            Box::new(|v| v["events"]["events"][0]["status"] = json!("ok")),
        ),
        (
            "$.events.events[0].nodeId",
            Box::new(|v| drop(v["events"]["events"][0].as_object_mut().unwrap().remove("nodeId"))),
        ),
        (
            "$.events.events[1].metadata.toolName",
            Box::new(|v| v["events"]["events"][1]["metadata"]["toolName"] = json!(7)),
        ),
        (
            "$.events.events[1].payloadRef",
            Box::new(|v| v["events"]["events"][1]["payloadRef"] = json!("payload-nowhere")),
        ),
        (
            "$.events.events[0].summary",
            Box::new(|v| v["events"]["events"][0]["summary"] = json!("x".repeat(5_000))),
        ),
        ("$.checkpoints[0].stateId", Box::new(|v| v["checkpoints"][0]["stateId"] = json!("other"))),
        (
            "$.checkpoints[0].eventIndex",
            Box::new(|v| v["checkpoints"][0]["eventIndex"] = json!(1.5)),
        ),
        ("$.metadata", Box::new(|v| v["metadata"] = json!("MacIntel"))),
    ];
    for (expected, edit) in &cases {
        let mut v = example();
        edit(&mut v);
        let (path, detail) = refused(&v);
        assert_eq!(&path, expected, "{detail}");
    }
    let (_, detail) = refused(&cases_version());
    assert!(detail.contains("0.1.0"), "the message names the versions read: {detail}");

    // Every value of the example replaced or removed: an accepted bundle or a path-naming
    // bundle error, never a panic.
    let base = every_type();
    let mut pointers = Vec::new();
    collect(&base, String::new(), &mut pointers);
    let mut panics = 0;
    for pointer in &pointers {
        for replacement in
            [None, Some(json!(null)), Some(json!(-1)), Some(json!("x")), Some(json!({}))]
        {
            let mut v = base.clone();
            remove_or_replace(&mut v, pointer, replacement);
            match std::panic::catch_unwind(AssertUnwindSafe(|| read(&v))) {
                Err(_) => panics += 1,
                Ok(Ok(_)) => {}
                Ok(Err(Error::Bundle { path, .. })) => assert!(path.starts_with('$'), "{path}"),
                Ok(Err(other)) => panic!("not a bundle error at {pointer}: {other}"),
            }
        }
    }
    assert_eq!(panics, 0);
    assert!(pointers.len() > 150, "{}", pointers.len());
}

fn cases_version() -> Value {
    let mut v = example();
    v["version"] = json!("0.9");
    v
}

/// Every JSON pointer into `v` but the root.
fn collect(v: &Value, at: String, out: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match v {
        Value::Object(m) => {
            m.iter().map(|(k, c)| (k.replace('~', "~0").replace('/', "~1"), c)).collect()
        }
        Value::Array(a) => a.iter().enumerate().map(|(i, c)| (i.to_string(), c)).collect(),
        _ => return,
    };
    for (key, child) in children {
        let p = format!("{at}/{key}");
        out.push(p.clone());
        collect(child, p, out);
    }
}

fn remove_or_replace(v: &mut Value, pointer: &str, replacement: Option<Value>) {
    match replacement {
        Some(r) => *v.pointer_mut(pointer).unwrap() = r,
        None => {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            match v.pointer_mut(parent).unwrap() {
                Value::Object(m) => drop(m.remove(&key.replace("~1", "/").replace("~0", "~"))),
                Value::Array(a) => drop(a.remove(key.parse::<usize>().unwrap())),
                _ => unreachable!(),
            }
        }
    }
}
