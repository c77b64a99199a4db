//! The write routes of checkpoint requests and backfills (docs/endpoint.md): `POST` and `DELETE
//! /api/threads/{id}/checkpoints/periodic`, `POST /api/threads/{id}/checkpoints/at-node` and
//! `POST /api/schedules/{name}/backfill`. Each is a control: the token is required, a bad body
//! is a 400 naming its field and writes nothing, an unknown thread or schedule a 404; a good one
//! writes what it asks (a `checkpoint_requested` event, the runs of the range), and nothing to
//! a thread it does not name.

use cairn::{Engine, Every, ScheduleSpec, StartOptions, ThreadStatus};

use crate::common::{Tally, asks_input, call, db, serving};

/// The kinds of checkpoint request in `thread`'s log, in order (`every`, `at_node`,
/// `cancel_every`).
async fn requests(engine: &Engine, thread: &str) -> Vec<String> {
    let mut events = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut kinds = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if let cairn::event::Body::CheckpointRequested { request } = &e.body {
            let json = serde_json::to_value(request).unwrap();
            kinds.push(json["request"].as_str().unwrap_or_default().to_owned());
        }
    }
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_request_routes_need_the_token_name_a_bad_field_and_write_what_they_ask() {
    let (_d, path) = db();
    let wf = asks_input();
    let (engine, server) = serving(&path, &wf).await;
    for id in ["c-1", "c-2"] {
        let t = engine.start_json("ask", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let ask = |method: &'static str, thread: &str, kind: &str, token: Option<&str>, body: &str| {
        let url = format!("{base}/api/threads/{thread}/checkpoints/{kind}");
        call(method, url, token.map(str::to_owned), body.to_owned())
    };
    for (method, kind, body) in [
        ("POST", "periodic", r#"{"interval_ms": 60000}"#),
        ("DELETE", "periodic", ""),
        ("POST", "at-node", r#"{"node": "ask"}"#),
    ] {
        let (status, err) = ask(method, "c-1", kind, None, body).await;
        assert_eq!((status, err["field"].as_str()), (401, Some("authorization")), "{kind}: {err}");
        let (status, err) = ask(method, "nope", kind, Some(&token), body).await;
        assert_eq!((status, err["field"].as_str()), (404, Some("thread")), "{kind}: {err}");
    }
    for (kind, body, field) in [
        ("periodic", "{}", "interval_ms"),
        ("periodic", r#"{"interval_ms": 0}"#, "interval_ms"),
        ("periodic", r#"{"interval_ms": "soon"}"#, "interval_ms"),
        ("periodic", r#"{"interval_ms": 5, "colour": "red"}"#, "colour"),
        ("periodic", r#"{"interval_ms": 5, "meta": {"tags": 3}}"#, "meta.tags"),
        ("periodic", "", "body"),
        ("at-node", "{}", "node"),
        ("at-node", r#"{"node": "nope"}"#, "node"),
        ("at-node", r#"{"node": 7}"#, "node"),
    ] {
        let (status, err) = ask("POST", "c-1", kind, Some(&token), body).await;
        assert_eq!((status, err["field"].as_str()), (400, Some(field)), "{kind} {body}: {err}");
    }
    assert!(requests(&engine, "c-1").await.is_empty(), "nothing written by a refusal");

    let every = r#"{"interval_ms": 60000, "meta": {"tags": ["ops"], "creator": "me"}}"#;
    for (method, kind, body) in [
        ("POST", "periodic", every),
        ("POST", "at-node", r#"{"node": "ask"}"#),
        ("DELETE", "periodic", ""),
    ] {
        let (status, done) = ask(method, "c-1", kind, Some(&token), body).await;
        let answer = (done["thread"].as_str(), done["status"].as_str());
        assert_eq!((status, answer), (200, (Some("c-1"), Some("waiting_input"))), "{done}");
    }
    assert_eq!(requests(&engine, "c-1").await, ["every", "at_node", "cancel_every"]);
    assert!(requests(&engine, "c-2").await.is_empty(), "control: the other thread untouched");
    server.shutdown().await;
    engine.shutdown().await;
}

/// 2026-01-01 00:00 UTC, in ms.
const JAN_1_2026: u64 = 1_767_225_600_000;
const HOUR: u64 = 3_600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backfill_route_needs_the_token_names_a_bad_field_and_starts_each_tick_once() {
    let (_d, path) = db();
    let wf = asks_input();
    let (engine, server) = serving(&path, &wf).await;
    // Hourly, from far ahead: it ticks nothing of its own here.
    let spec = ScheduleSpec::new("ask", Every::Cron { expr: "0 * * * *".into(), tz: "UTC".into() })
        .input(serde_json::json!({ "total": 0, "log": [] }))
        .between(Some(JAN_1_2026 + 100_000 * HOUR), None);
    engine.create_schedule("hourly", spec).await.unwrap();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let post = |name: &str, token: Option<&str>, body: &str| {
        let url = format!("{base}/api/schedules/{name}/backfill");
        call("POST", url, token.map(str::to_owned), body.to_owned())
    };
    let range = format!(r#"{{"from_ms": {}, "to_ms": {}}}"#, JAN_1_2026, JAN_1_2026 + 2 * HOUR);
    let (status, err) = post("hourly", None, &range).await;
    assert_eq!((status, err["field"].as_str()), (401, Some("authorization")), "{err}");
    let (status, err) = post("nope", Some(&token), &range).await;
    assert_eq!((status, err["field"].as_str()), (404, Some("schedule")), "{err}");
    let too_many = format!(r#"{{"from_ms": 0, "to_ms": {JAN_1_2026}}}"#);
    for (body, field) in [
        ("{}", "from_ms"),
        (r#"{"from_ms": 1}"#, "to_ms"),
        (r#"{"from_ms": "x", "to_ms": 1}"#, "from_ms"),
        (r#"{"from_ms": 2, "to_ms": 1}"#, "to_ms"),
        (r#"{"from_ms": 1, "to_ms": 2, "colour": 1}"#, "colour"),
        ("", "body"),
        (too_many.as_str(), "to_ms"),
    ] {
        let (status, err) = post("hourly", Some(&token), body).await;
        assert_eq!((status, err["field"].as_str()), (400, Some(field)), "{body}: {err}");
    }
    let runs = |engine: &Engine| {
        let store = engine.store().clone();
        async move {
            let filter = cairn::storage::ThreadFilter::default();
            let page = cairn::storage::Page { limit: 1_000, offset: 0 };
            let page = store.list_threads(&filter, page).wait();
            let ids: Vec<String> = page.unwrap().into_iter().map(|r| r.id.to_string()).collect();
            ids.into_iter().filter(|id| id.starts_with("hourly@")).collect::<Vec<_>>()
        }
    };
    assert!(runs(&engine).await.is_empty(), "nothing started by a refusal");
    let (status, done) = post("hourly", Some(&token), &range).await;
    assert_eq!((status, done["ticks"].as_array().map(Vec::len)), (200, Some(3)), "{done}");
    assert_eq!(done["created"], 3, "{done}");
    let (status, again) = post("hourly", Some(&token), &range).await;
    assert_eq!((status, &again["created"]), (200, &0.into()), "a repeat starts nothing more");
    let mut started = runs(&engine).await;
    started.sort();
    let want: Vec<String> =
        (0..3).map(|k| ScheduleSpec::tick_thread_id("hourly", JAN_1_2026 + k * HOUR)).collect();
    assert_eq!(started, want);
    server.shutdown().await;
    engine.shutdown().await;
}
