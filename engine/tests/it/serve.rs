//! The HTTP endpoint over real loopback HTTP (feature `http`): reads with paging, a thread's
//! summary, events since a bookmark, a followed log receiving an event appended after the request
//! started, state at a seq, controls refused without the token and applied with it, 4xx answers
//! that name the field, and the token and endpoint files beside the database.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::io::BufRead as _;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use serde_json::{Value, json};

use crate::common::{Tally, asks_input, call, db, serving};
use cairn_tools::serve::Serve as _;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_reads_follows_a_log_and_guards_controls() {
    let (_d, path) = db();
    let wf = asks_input();
    let (engine, server) = serving(&path, &wf).await;
    for i in 1..=5 {
        let t =
            engine.start_json("ask", Tally::default(), StartOptions::id(format!("t-{i}"))).await;
        assert_eq!(t.unwrap().wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    let base = format!("http://{}", server.addr());
    let get = |p: &str| call("GET", format!("{base}{p}"), None, String::new());

    // The token file (0600) and the announcement, beside the database.
    let token_file = server.token_file().unwrap().to_path_buf();
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), server.token());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let found = cairn_tools::serve::discovery::find(&path).unwrap().unwrap();
    assert_eq!((found.address, found.pid), (server.addr(), std::process::id()));

    // Threads, paged in id order, and filtered.
    let (status, page) = get("/api/threads?limit=2&offset=1").await;
    assert_eq!(status, 200, "{page}");
    let ids: Vec<&str> =
        page["threads"].as_array().unwrap().iter().map(|t| t["thread"].as_str().unwrap()).collect();
    assert_eq!(ids, ["t-2", "t-3"]);
    // The cursor: `next` is the `after` of the next page, null on the last.
    assert_eq!(page["next"], "t-3", "{page}");
    let (_, rest) = get("/api/threads?limit=2&after=t-3").await;
    let ids: Vec<&str> =
        rest["threads"].as_array().unwrap().iter().map(|t| t["thread"].as_str().unwrap()).collect();
    assert_eq!((ids, &rest["next"]), (vec!["t-4", "t-5"], &serde_json::Value::Null), "{rest}");
    let (_, waiting) = get("/api/threads?status=waiting_input").await;
    assert_eq!(waiting["threads"].as_array().unwrap().len(), 5);

    // A thread's summary, as `cairn show`; events since a bookmark; state at a seq.
    let (status, show) = get("/api/threads/t-1").await;
    assert_eq!((status, show["status"].as_str()), (200, Some("waiting_input")), "{show}");
    let (_, all) = get("/api/threads/t-1/events").await;
    let all = all["events"].as_array().unwrap().clone();
    assert!(all.len() > 2 && all[0]["seq"] == 1, "{all:?}");
    let (_, since) = get("/api/threads/t-1/events?since=2").await;
    let seqs: Vec<u64> =
        since["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (3..=all.len() as u64).collect::<Vec<_>>());
    let (status, state) = get("/api/threads/t-1/state?at=1").await;
    assert_eq!((status, state["seq"].as_u64()), (200, Some(1)), "{state}");
    let (status, _) = get("/api/threads/t-1/checkpoints").await;
    assert_eq!(status, 200);
    let (status, graph) = get("/api/workflows/ask/graph?format=mermaid").await;
    assert!(status == 200 && graph.as_str().unwrap().contains("ask"), "{graph}");
    let (status, health) = get("/api/health").await;
    assert_eq!(status, 200);
    assert!(health.get("ok").is_some(), "{health}");

    // Bad requests: 4xx naming the field.
    for (query, field, code) in [
        ("/api/threads?limit=abc", "limit", 400),
        ("/api/threads?limit=1000000", "limit", 400),
        ("/api/threads?status=asleep", "status", 400),
        ("/api/threads?colour=red", "colour", 400),
        ("/api/threads/t-1/state?at=x", "at", 400),
        ("/api/threads/t-1/events?follow=maybe", "follow", 400),
        ("/api/threads/nope", "thread", 404),
        ("/api/threads/nope/events", "thread", 404),
        ("/api/threads/%FF", "path", 400),
        ("/api/nothing", "path", 404),
        ("/api/threads/t-1/pause", "method", 405),
    ] {
        let (status, err) = get(query).await;
        assert_eq!((status, err["field"].as_str()), (code, Some(field)), "{query}: {err}");
    }

    // Controls: refused without the token, applied with it.
    let post = |p: &str, token: Option<&str>, body: &str| {
        call("POST", format!("{base}{p}"), token.map(str::to_owned), body.to_owned())
    };
    let (status, err) = post("/api/threads/t-1/pause", None, "").await;
    assert_eq!((status, err["field"].as_str()), (401, Some("authorization")), "{err}");
    let (status, _) = post("/api/threads/t-1/pause", Some("not-the-token"), "").await;
    assert_eq!(status, 401);
    assert_eq!(
        engine.thread("t-1").await.unwrap().status().await.unwrap(),
        ThreadStatus::WaitingInput
    );
    let token = server.token().to_owned();
    let (status, paused) = post("/api/threads/t-1/pause", Some(&token), "").await;
    assert_eq!((status, paused["status"].as_str()), (200, Some("paused")), "{paused}");
    assert_eq!(engine.thread("t-1").await.unwrap().status().await.unwrap(), ThreadStatus::Paused);
    let (status, err) = post("/api/threads/t-2/input", Some(&token), r#"{"valu": 3}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("valu")), "{err}");
    let (status, err) = post("/api/threads/t-2/input", Some(&token), "{}").await;
    assert_eq!((status, err["field"].as_str()), (400, Some("value")), "{err}");
    let (status, err) = post("/api/threads/nope/pause", Some(&token), "").await;
    assert_eq!((status, err["field"].as_str()), (404, Some("thread")), "{err}");

    // A followed log receives an event appended after the request started, and ends with the
    // thread.
    let url = format!("{base}/api/threads/t-3/events?follow=1");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let reader = tokio::task::spawn_blocking(move || {
        let mut resp = agent().get(&url).call().unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let mut started = Some(started_tx);
        let mut kinds = Vec::new();
        for line in std::io::BufReader::new(resp.body_mut().as_reader()).lines() {
            let line = line.unwrap();
            if let Some(data) = line.strip_prefix("data:") {
                let event: Value = serde_json::from_str(data.trim()).unwrap();
                kinds.push(event["kind"].as_str().unwrap().to_owned());
                if let Some(tx) = started.take() {
                    tx.send(()).unwrap();
                }
            }
        }
        kinds
    });
    started_rx.await.unwrap();
    let (status, answered) = post("/api/threads/t-3/input", Some(&token), r#"{"value": 7}"#).await;
    assert_eq!(status, 200, "{answered}");
    let kinds = reader.await.unwrap();
    assert!(kinds.iter().any(|k| k == "input_received"), "{kinds:?}");
    assert_eq!(engine.thread("t-3").await.unwrap().output::<Tally>().await.unwrap().total, 7);

    // Shutting the endpoint down removes its announcement.
    server.shutdown().await;
    assert!(cairn_tools::serve::discovery::find(&path).unwrap().is_none());
    engine.shutdown().await;
}

/// A state holding a credential, whose updates add to a count.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Cred {
    api_key: String,
    total: u64,
}

impl cairn::State for Cred {
    type Update = u64;

    fn apply(&mut self, add: u64) {
        self.total += add;
    }
}

/// Redaction on request, a diff, a fork and a cancel through the endpoint, the body bound, and
/// the refusal of a non-loopback address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_redacts_diffs_forks_cancels_and_bounds_bodies() {
    const SECRET: &str = "sk-live-0123456789";
    let (_d, path) = db();
    let wf = Workflow::<Cred>::builder("cred", 1)
        .node("ask", |_s: Arc<Cred>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!({"question": "how many?"}))?;
            Ok(NodeOutput::update(n))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let refused = Engine::builder(&path).workflow(&wf).serve(([0, 0, 0, 0], 0).into()).open().await;
    assert!(matches!(refused, Err(cairn::Error::Invalid(_))), "a public address needs `public`");
    drop(refused);
    let (engine, server) = serving(&path, &wf).await;
    let input = Cred { api_key: SECRET.into(), total: 1 };
    let t = engine.start_json("cred", input, StartOptions::id("c-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let base = format!("http://{}", server.addr());
    let get = |p: &str| call("GET", format!("{base}{p}"), None, String::new());
    let token = server.token().to_owned();
    let post = |p: &str, body: &str| {
        call("POST", format!("{base}{p}"), Some(token.clone()), body.to_owned())
    };

    let (_, plain) = get("/api/threads/c-1/state").await;
    assert_eq!(plain["state"]["api_key"], SECRET);
    let (_, redacted) = get("/api/threads/c-1/state?redact=1").await;
    assert_eq!(redacted["state"]["api_key"], cairn_tools::debug::REDACTED, "{redacted}");
    assert_eq!(redacted["state"]["total"], 1);
    let (_, events) = get("/api/threads/c-1/events").await;
    assert!(events.to_string().contains(SECRET));
    let (_, events) = get("/api/threads/c-1/events?redact=1").await;
    assert!(!events.to_string().contains(SECRET), "{events}");
    let (_, shown) = get("/api/threads/c-1?redact=1").await;
    assert!(!shown.to_string().contains(SECRET), "{shown}");

    // A fork from seq 1 with an update, not run; then the original is answered and diffed.
    let (status, fork) =
        post("/api/threads/c-1/fork", r#"{"at": 1, "update": 5, "id": "c-2", "start": false}"#)
            .await;
    assert_eq!((status, fork["thread"].as_str()), (200, Some("c-2")), "{fork}");
    let (status, err) = post("/api/threads/c-1/fork", r#"{"at": "one"}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("at")), "{err}");
    let (status, err) = post("/api/threads/c-1/fork", r#"{"at": 999}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("at")), "{err}");
    let (status, _) = post("/api/threads/c-1/input", r#"{"value": 41}"#).await;
    assert_eq!(status, 200);
    assert_eq!(t.output::<Cred>().await.unwrap().total, 42);
    let last = engine.store().thread(t.id()).wait().unwrap().unwrap().last.unwrap().seq.0;
    let (status, diff) = get(&format!("/api/threads/c-1/state?diff=1,{last}")).await;
    assert_eq!(status, 200, "{diff}");
    let changes = diff["changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c["path"] == "/total" && c["after"] == 42), "{diff}");
    let (status, err) = get("/api/threads/c-1/state?diff=1").await;
    assert_eq!((status, err["field"].as_str()), (400, Some("diff")), "{err}");

    // A cancel of the fork; a second is refused (409), naming the thread.
    let (status, cancelled) = post("/api/threads/c-2/cancel", r#"{"reason": "test"}"#).await;
    assert_eq!((status, cancelled["status"].as_str()), (200, Some("cancelled")), "{cancelled}");
    let (status, err) = post("/api/threads/c-2/cancel", "").await;
    assert_eq!((status, err["field"].as_str()), (409, Some("thread")), "{err}");
    let (status, err) = post("/api/threads/c-2/explode", "").await;
    assert_eq!((status, err["field"].as_str()), (404, Some("control")), "{err}");

    // A body over the bound is refused before it is parsed.
    let big =
        format!(r#"{{"value": "{}"}}"#, "x".repeat(cairn_tools::limits::SERVE_BODY_BYTES_MAX));
    let (status, err) = post("/api/threads/c-1/input", &big).await;
    assert_eq!((status, err["field"].as_str()), (413, Some("body")), "{err}");

    // Metrics without a Prometheus handle: the health report; health takes no parameters.
    let (status, metrics) = get("/api/metrics").await;
    assert!(status == 200 && metrics.get("ok").is_some(), "{metrics}");
    let (status, err) = get("/api/health?verbose=1").await;
    assert_eq!((status, err["field"].as_str()), (400, Some("verbose")), "{err}");

    drop(server);
    assert!(cairn_tools::serve::discovery::find(&path).unwrap().is_none(), "dropped: withdrawn");
    engine.shutdown().await;
}

/// With a Prometheus handle, `/api/metrics` is the exporter's text with the engine's names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_with_a_handle() {
    let (_d, path) = db();
    let (recorder, handle) = cairn_tools::prometheus::recorder().unwrap();
    let mut options = cairn_tools::serve::ServeOptions::new(([127, 0, 0, 1], 0).into());
    options.prometheus = Some(handle);
    let (engine, server) = Engine::builder(&path)
        .metrics_recorder(Arc::new(recorder))
        .serve(([127, 0, 0, 1], 0).into())
        .options(options)
        .open()
        .await
        .unwrap();
    let url = format!("http://{}/api/metrics", server.addr());
    let (status, text) = call("GET", url, None, String::new()).await;
    let text = text.as_str().unwrap_or_default().to_owned();
    assert_eq!(status, 200);
    // No workflow is registered: the engine's own series (a workflow's steps are labelled).
    assert!(text.contains("cairn_lease_takeovers_total 0"), "{text}");
    server.shutdown().await;
    engine.shutdown().await;
}

/// `POST /api/threads/{id}/signal` with the control token: wakes a thread waiting in `recv`,
/// answers with the signal's number, names a missing field, and refuses a finished thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signal_control_sends_a_signal_through_the_endpoint() {
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("waits", 1)
        .node("recv", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("payment").await?;
            Ok(NodeOutput::update((n, "paid".into())))
        })
        .edge(START, "recv")
        .edge("recv", END)
        .build()
        .unwrap();
    let (engine, server) = serving(&path, &wf).await;
    let t = engine.start_json("waits", Tally::default(), StartOptions::id("s-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let post = |body: &str, token: Option<&str>| {
        let url = format!("{base}/api/threads/s-1/signal");
        call("POST", url, token.map(str::to_owned), body.to_owned())
    };
    let (status, _) = post(r#"{"name": "payment", "value": 30}"#, None).await;
    assert_eq!(status, 401);
    let (status, err) = post(r#"{"value": 30}"#, Some(&token)).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("name")), "{err}");
    let (status, sent) = post(r#"{"name": "payment", "value": 30}"#, Some(&token)).await;
    assert_eq!((status, sent["signal"].as_u64()), (200, Some(1)), "{sent}");
    assert_eq!(t.output::<Tally>().await.unwrap().total, 30);
    let (status, err) = post(r#"{"name": "payment", "value": 1}"#, Some(&token)).await;
    assert_eq!(status, 409, "a finished thread: {err}");
    server.shutdown().await;
    engine.shutdown().await;
}
