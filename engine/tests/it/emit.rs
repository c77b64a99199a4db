//! Event triggers (`WorkflowBuilder::on_event`, `Engine::emit`): an emit starts every
//! subscribed workflow once per event id, across a restart; a name without subscribers starts
//! nothing; bad ids and payloads are refused before anything is written; a crash at any write of
//! an emit, retried, neither loses a start nor doubles one.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{END, Engine, START, ThreadStatus};

use crate::common::{Tally, call, db, open, serving};
use crate::crash::every_write;

/// One node that notes `what` once, subscribed to `order.created`.
fn subscriber(id: &str, what: &'static str) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .on_event("order.created")
        .node("note", move |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, what.to_owned())))
        })
        .edge(START, "note")
        .edge("note", END)
        .build()
        .unwrap()
}

fn payload() -> serde_json::Value {
    serde_json::json!({"total": 10, "log": []})
}

/// The ids of every thread in the store.
async fn all_threads(engine: &Engine) -> Vec<String> {
    let filter = cairn::storage::ThreadFilter::default();
    let listed =
        engine.store().list_threads(&filter, cairn::storage::Page::default()).await.unwrap();
    listed.iter().map(|r| r.id.to_string()).collect()
}

/// `engine`'s thread `id`, finished, as its output.
async fn output(engine: &Engine, id: &str) -> Tally {
    let thread = engine.thread(id).await.unwrap();
    let done = tokio::time::timeout(std::time::Duration::from_secs(10), thread.finished()).await;
    assert_eq!(done.expect("finished in time").unwrap().status, ThreadStatus::Completed, "{id}");
    thread.output().await.unwrap()
}

#[tokio::test]
async fn an_emit_starts_each_subscriber_once_per_event_id_across_a_restart() {
    let (_d, path) = db();
    let (ship, bill) = (subscriber("ship", "shipped"), subscriber("bill", "billed"));
    let engine = open(&path, &[&ship, &bill], |b| b).await;
    assert_eq!(engine.subscribers("order.created"), ["bill", "ship"]);
    let first = engine.emit("order.created", "order-7", payload()).await.unwrap();
    let ids: Vec<&str> = first.threads.iter().map(|t| t.thread.as_str()).collect();
    assert_eq!(ids, ["event:order-7/bill", "event:order-7/ship"]);
    assert!(first.threads.iter().all(|t| t.created), "{first:?}");
    assert_eq!(output(&engine, ids[1]).await.log, ["shipped"]);
    assert_eq!(output(&engine, ids[0]).await.total, 11, "the payload is the input");
    let again = engine.emit("order.created", "order-7", payload()).await.unwrap();
    assert_eq!(again.threads.iter().map(|t| t.thread.as_str()).collect::<Vec<_>>(), ids);
    assert!(again.threads.iter().all(|t| !t.created), "a repeat starts nothing: {again:?}");
    let other = engine.emit("order.created", "order-8", payload()).await.unwrap();
    assert!(other.threads.iter().all(|t| t.created), "another id is another event");
    engine.shutdown().await;
    drop(engine);

    let engine = open(&path, &[&ship, &bill], |b| b).await;
    let after = engine.emit("order.created", "order-7", payload()).await.unwrap();
    assert!(after.threads.iter().all(|t| !t.created), "kept across the restart: {after:?}");
    assert_eq!(all_threads(&engine).await.len(), 4, "two events, two subscribers");
    assert_eq!(output(&engine, ids[1]).await.log, ["shipped"], "run once");
    let nobody = engine.emit("order.cancelled", "order-7", payload()).await.unwrap();
    assert!(nobody.threads.is_empty(), "no subscriber: nothing started, no error");
    engine.shutdown().await;
}

#[tokio::test]
async fn an_emit_refuses_an_empty_id_an_oversized_payload_and_a_bad_input_writing_nothing() {
    let (_d, path) = db();
    let ship = subscriber("ship", "shipped");
    let engine = open(&path, &[&ship], |b| b).await;
    let empty = engine.emit("order.created", "", payload()).await;
    assert!(matches!(empty, Err(cairn::Error::Invalid(_))), "{empty:?}");
    let big = serde_json::json!({"total": 1, "log": ["x".repeat(300 * 1024)]});
    let over = engine.emit("order.created", "e1", big).await;
    assert!(matches!(over, Err(cairn::Error::LimitExceeded { .. })), "{over:?}");
    // EVENT_ID_BYTES_MAX is 256.
    let long_id = "i".repeat(257);
    let over = engine.emit("order.created", &long_id, payload()).await;
    assert!(matches!(over, Err(cairn::Error::LimitExceeded { .. })), "{over:?}");
    let not_a_state = engine.emit("order.created", "e2", "a string").await;
    assert!(matches!(not_a_state, Err(cairn::Error::Invalid(_))), "{not_a_state:?}");
    assert!(all_threads(&engine).await.is_empty(), "nothing written");
    engine.shutdown().await;
}

#[tokio::test]
async fn subscribers_past_the_limit_are_refused_and_a_long_event_id_gets_a_hashed_thread_id() {
    let (_d, path) = db();
    // EVENT_SUBSCRIBERS_MAX is 64.
    let many: Vec<Workflow<Tally>> =
        (0..=64).map(|i| subscriber(&format!("sub-{i:03}"), "noted")).collect();
    let engine = open(&path, &many.iter().collect::<Vec<_>>(), |b| b).await;
    let over = engine.emit("order.created", "e1", payload()).await;
    assert!(matches!(over, Err(cairn::Error::LimitExceeded { .. })), "{over:?}");
    assert!(all_threads(&engine).await.is_empty(), "nothing written");
    engine.shutdown().await;
    let hashed = cairn::event_thread_id(&"x".repeat(200), "ship");
    assert!(hashed.starts_with("event-") && hashed.len() < 64, "{hashed}");
    assert_ne!(cairn::event_thread_id("a/b", "c"), cairn::event_thread_id("a", "b/c"));
}

/// The store dies at each write in turn around an emit to two subscribers; the caller emits
/// again on the reopened engine: each subscriber has one thread, run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_an_emit_neither_loses_nor_doubles_a_start() {
    let (ship, bill) = (subscriber("ship", "shipped"), subscriber("bill", "billed"));
    let ids = ["event:order-7/bill", "event:order-7/ship"];
    let run = async |engine: &Engine, _: &()| {
        engine.emit("order.created", "order-7", payload()).await?;
        for id in ids {
            engine.thread(id).await?.finished().await?;
        }
        Ok(())
    };
    let check = async |engine: &Engine, _: &(), crash_after: i64| {
        // The caller saw a failure (or nothing): it emits again.
        let again = engine.emit("order.created", "order-7", payload()).await;
        let again = again.unwrap_or_else(|e| panic!("crash_after {crash_after}: {e}"));
        assert_eq!(again.threads.len(), 2, "crash_after {crash_after}");
        assert_eq!(all_threads(engine).await, ids, "crash_after {crash_after}: no more, no less");
        assert_eq!(output(engine, ids[0]).await.log, ["billed"], "crash_after {crash_after}");
        assert_eq!(output(engine, ids[1]).await.log, ["shipped"], "crash_after {crash_after}");
    };
    let tune = |b: cairn::EngineBuilder, _: &()| b.workflow(&ship).workflow(&bill);
    let crashes = every_write(100, || (), tune, run, check).await;
    assert!(crashes >= 3, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY emit_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// `POST /api/events` answers the threads started, the same ones again, none for a name without
/// subscribers, and a 400 naming `id` for an empty id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_emits_an_event() {
    let (_d, path) = db();
    let (engine, server) = serving(&path, &subscriber("ship", "shipped")).await;
    let url = format!("http://{}/api/events", server.addr());
    let token = Some(server.token().to_owned());
    let post = |body: serde_json::Value| call("POST", url.clone(), token.clone(), body.to_string());
    let body = serde_json::json!({"name": "order.created", "id": "o1", "payload": payload()});
    let (status, first) = post(body.clone()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["threads"][0]["thread"], "event:o1/ship");
    assert_eq!(first["threads"][0]["created"], true);
    assert_eq!(first["threads"][0]["link"], "/api/threads/event:o1%2Fship");
    let (status, again) = post(body).await;
    assert_eq!((status, again["threads"][0]["created"].as_bool()), (200, Some(false)), "{again}");
    assert_eq!(output(&engine, "event:o1/ship").await.log, ["shipped"]);
    let (status, none) = post(serde_json::json!({"name": "nobody", "id": "o1"})).await;
    assert_eq!((status, none["threads"].as_array().map(Vec::len)), (200, Some(0)), "{none}");
    let (status, err) = post(serde_json::json!({"name": "order.created", "id": ""})).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("id")), "{err}");
    let (status, err) =
        post(serde_json::json!({"name": "order.created", "id": "o2", "payload": 5})).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("payload")), "{err}");
    server.shutdown().await;
    engine.shutdown().await;
}
