//! The endpoint's access layer over real loopback HTTP (issue 27 step 5): a `Host` the endpoint
//! does not serve is refused (DNS rebinding); every control route of the route table (the table
//! the router is built from) and every method but GET on any path refuses a missing and a wrong
//! token; a control from another origin is refused; a public endpoint needs the token for every
//! read but the web view's static pages, and answers redacted whatever the query says; `/metrics`
//! is Prometheus text, a read like any other.
//!
//! Requests are written by hand on a TCP stream, so that `Host` and `Origin` are what the test
//! says, not what a client library fills in.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::serve::{ServeOptions, Server, route_table};
use serde_json::{Value, json};

use crate::common::db;
use cairn_tools::serve::Serve as _;

const SECRET: &str = "sk-live-0123456789";

/// A state holding a credential (its key matches the default redaction rules).
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

fn asks() -> Workflow<Cred> {
    Workflow::<Cred>::builder("cred", 1)
        .node("ask", |_s: Arc<Cred>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!({"question": "how many?"}))?;
            Ok(NodeOutput::update(n))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

/// An engine serving `options` with thread `c-1` waiting for input, its state holding
/// [`SECRET`] under `api_key`.
async fn serving(options: ServeOptions) -> (tempfile::TempDir, Engine, Server) {
    let (dir, path) = db();
    let (engine, server) = Engine::builder(&path)
        .workflow(&asks())
        .serve(options.addr)
        .options(options)
        .open()
        .await
        .unwrap();
    let input = Cred { api_key: SECRET.into(), total: 1 };
    let t = engine.start_json("cred", input, StartOptions::id("c-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    (dir, engine, server)
}

fn loopback() -> ServeOptions {
    ServeOptions::new(([127, 0, 0, 1], 0).into())
}

/// An answer: status, headers (lower case) and body.
struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::String(self.body.clone()))
    }

    /// The JSON error's field.
    fn field(&self) -> Option<String> {
        self.json()["field"].as_str().map(str::to_owned)
    }
}

/// `method path` to `addr` with `Host: host` and `headers`, off the async workers.
async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
        let headers = head.to_ascii_lowercase();
        let body = if headers.contains("transfer-encoding: chunked") {
            dechunk(body)
        } else {
            body.into()
        };
        Answer { status, headers, body }
    })
    .await
    .unwrap()
}

/// A chunked body's content.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// A route's path with its segments filled in: a thread, a checkpoint, a workflow, a control.
fn concrete(path: &str, control: &str) -> String {
    path.replace("{id}/{control}", &format!("c-1/{control}"))
        .replace("/checkpoints/{id}", "/checkpoints/1")
        .replace("/workflows/{id}", "/workflows/cred")
        .replace("/trace/{id}", "/trace/corr-1")
        .replace("{file}", "app.css")
        .replace("{id}", "c-1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_the_endpoint_does_not_serve_is_refused_and_its_own_answers() {
    let mut options = loopback();
    options.allow_hosts = vec!["cairn.internal".into(), "proxy.example:8443".into()];
    let (_d, engine, server) = serving(options).await;
    let addr = server.addr();
    let port = addr.port();
    // A page of another site re-pointed at 127.0.0.1 sends its own name: refused, read or control.
    for host in [
        format!("rebound.example:{port}"),
        "rebound.example".to_owned(),
        format!("localhost:{}", port.wrapping_add(1)),
        format!("cairn.internal.evil.example:{port}"),
        format!("10.0.0.1:{port}"),
    ] {
        let got = raw(addr, "GET", "/api/threads", &host, &[], "").await;
        assert_eq!(
            (got.status, got.field().as_deref()),
            (421, Some("host")),
            "{host}: {}",
            got.body
        );
        assert!(!got.body.contains("c-1"), "{host}: nothing read");
        let page = raw(addr, "GET", "/ui/threads", &host, &[], "").await;
        assert_eq!(page.status, 421, "{host}: the pages too");
    }
    // The served address, loopback's names at its port, and the allowed names answer.
    for host in [
        addr.to_string(),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("[::1]:{port}"),
        format!("cairn.internal:{port}"),
        "proxy.example:8443".to_owned(),
    ] {
        let got = raw(addr, "GET", "/api/threads", &host, &[], "").await;
        assert_eq!(got.status, 200, "{host}: {}", got.body);
        assert!(got.body.contains("c-1"), "{host}: {}", got.body);
    }
    // A request without a Host at all (HTTP/1.0) is refused too.
    let bare = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"GET /api/threads HTTP/1.0\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    })
    .await
    .unwrap();
    assert!(bare.starts_with("HTTP/1.0 400") || bare.starts_with("HTTP/1.1 400"), "{bare}");
    assert!(bare.contains(r#""field":"host""#), "{bare}");
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_control_route_refuses_a_missing_and_a_wrong_token() {
    let (_d, engine, server) = serving(loopback()).await;
    let addr = server.addr();
    let host = addr.to_string();
    let token = server.token().to_owned();
    let wrong = format!("Bearer {}", "0".repeat(token.len()));
    let short = format!("Bearer {}", &token[..token.len() - 1]);
    let routes = route_table();
    // The table is the router's: every route it lists is routed (no "no such route").
    for r in &routes {
        let mut path = concrete(r.path, "pause");
        if r.path.ends_with("/stream") {
            // A live thread's stream never ends: an unknown thread's 404 shows it routed.
            path = path.replace("c-1", "no-such-thread");
        }
        let got = raw(addr, r.method, &path, &host, &[], "").await;
        assert!(
            !(got.status == 404 && got.body.contains("no such route")),
            "{} {path} is listed but not routed: {}",
            r.method,
            got.body
        );
    }
    let controls: Vec<_> = routes.iter().filter(|r| r.method != "GET").collect();
    assert!(
        controls.iter().any(|r| r.method == "POST")
            && controls.iter().any(|r| r.method == "DELETE")
    );
    let names = [
        "pause",
        "resume",
        "cancel",
        "input",
        "signal",
        "fork",
        "repin",
        "reset",
        "no-such-control",
    ];
    for r in &controls {
        for control in names {
            let path = concrete(r.path, control);
            let body = r#"{"value": 1, "name": "n", "at": 1, "to": "start", "build": "b"}"#;
            for authorization in
                [None, Some(wrong.as_str()), Some(short.as_str()), Some(token.as_str())]
            {
                let headers: Vec<(&str, &str)> =
                    authorization.iter().map(|a| ("authorization", *a)).collect();
                let got = raw(addr, r.method, &path, &host, &headers, body).await;
                assert_eq!(
                    (got.status, got.field().as_deref()),
                    (401, Some("authorization")),
                    "{} {path} with {authorization:?}: {}",
                    r.method,
                    got.body
                );
            }
        }
    }
    // Nothing was applied: the thread still waits, unforked and undeleted.
    assert_eq!(
        engine.thread("c-1").await.unwrap().status().await.unwrap(),
        ThreadStatus::WaitingInput
    );
    let listed = raw(addr, "GET", "/api/threads", &host, &[], "").await.json();
    assert_eq!(listed["threads"].as_array().map(Vec::len), Some(1), "{listed}");
    // The layer is over the fallbacks too: any method but GET on any path, routed or not.
    for (method, path) in [
        ("PUT", "/api/threads/c-1"),
        ("PATCH", "/api/threads/c-1/pause"),
        ("POST", "/api/threads"),
        ("POST", "/api/a-route-not-yet-written"),
        ("DELETE", "/metrics"),
        ("OPTIONS", "/api/threads/c-1/pause"),
    ] {
        let got = raw(addr, method, path, &host, &[], "").await;
        assert_eq!(got.status, 401, "{method} {path}: {}", got.body);
    }
    // With the token, a control is applied.
    let bearer = format!("Bearer {token}");
    let got =
        raw(addr, "POST", "/api/threads/c-1/pause", &host, &[("authorization", &bearer)], "").await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(engine.thread("c-1").await.unwrap().status().await.unwrap(), ThreadStatus::Paused);
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_from_another_origin_is_refused_even_with_the_token() {
    let (_d, engine, server) = serving(loopback()).await;
    let addr = server.addr();
    let host = addr.to_string();
    let bearer = format!("Bearer {}", server.token());
    for (name, value) in [
        ("origin", "http://evil.example"),
        ("origin", "null"),
        ("origin", &format!("http://localhost:{}", addr.port())),
        ("sec-fetch-site", "cross-site"),
    ] {
        let headers = [("authorization", bearer.as_str()), (name, value)];
        let got = raw(addr, "POST", "/api/threads/c-1/pause", &host, &headers, "").await;
        assert_eq!(
            (got.status, got.field().as_deref()),
            (403, Some("origin")),
            "{value}: {}",
            got.body
        );
        let got = raw(addr, "DELETE", "/api/threads/c-1?force=true", &host, &headers, "").await;
        assert_eq!(got.status, 403, "{value}: {}", got.body);
    }
    assert_eq!(
        engine.thread("c-1").await.unwrap().status().await.unwrap(),
        ThreadStatus::WaitingInput
    );
    // A read from another origin is no control (and a browser keeps its answer from the page).
    let got =
        raw(addr, "GET", "/api/threads", &host, &[("origin", "http://evil.example")], "").await;
    assert_eq!(got.status, 200);
    // The endpoint's own pages post with their own origin.
    let own = format!("http://{host}");
    let headers = [("authorization", bearer.as_str()), ("origin", own.as_str())];
    let got = raw(addr, "POST", "/api/threads/c-1/pause", &host, &headers, "").await;
    assert_eq!(got.status, 200, "{}", got.body);
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_endpoint_needs_the_token_to_read_and_answers_redacted() {
    let mut options = loopback();
    options.public = true;
    let (_d, engine, server) = serving(options).await;
    let addr = server.addr();
    let host = addr.to_string();
    let bearer = format!("Bearer {}", server.token());
    let auth = [("authorization", bearer.as_str())];

    // Every read of the table needs the token but the web view's static pages and assets.
    for r in route_table().iter().filter(|r| r.method == "GET") {
        let path = concrete(r.path, "pause");
        let got = raw(addr, "GET", &path, &host, &[], "").await;
        if path == "/" || path == "/ui" || path.starts_with("/ui/") {
            assert!(got.status == 200 || got.status == 303, "{path}: {}", got.status);
            assert!(!got.body.contains(SECRET), "{path}");
        } else {
            assert_eq!(
                (got.status, got.field().as_deref()),
                (401, Some("authorization")),
                "{path}: {}",
                got.body
            );
        }
    }

    // With the token: answered, and redacted whatever the query says.
    for path in [
        "/api/threads/c-1/state",
        "/api/threads/c-1/state?redact=0",
        "/api/threads/c-1/events",
        "/api/threads/c-1",
        "/api/threads/c-1/result",
        "/api/threads/c-1/timeline",
        "/api/view/threads",
        "/api/threads",
    ] {
        let got = raw(addr, "GET", path, &host, &auth, "").await;
        assert_eq!(got.status, 200, "{path}: {}", got.body);
        assert!(!got.body.contains(SECRET), "{path} leaks the secret: {}", got.body);
    }
    let state = raw(addr, "GET", "/api/threads/c-1/state", &host, &auth, "").await.json();
    assert_eq!(state["state"]["api_key"], cairn_tools::debug::REDACTED, "{state}");
    assert_eq!(state["state"]["total"], 1, "{state}");
    // A control (still with the token), then the whole log followed: redacted event by event.
    let got = raw(addr, "POST", "/api/threads/c-1/input", &host, &auth, r#"{"value": 2}"#).await;
    assert_eq!(got.status, 200, "{}", got.body);
    let t = engine.thread("c-1").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Completed);
    let followed = raw(addr, "GET", "/api/threads/c-1/events?follow=1", &host, &auth, "").await;
    assert!(followed.headers.contains("text/event-stream"), "{}", followed.headers);
    assert!(followed.body.contains("input_received"), "{}", followed.body);
    assert!(!followed.body.contains(SECRET), "{}", followed.body);
    // The thread's stream too: its closes and its end carry updates and the output.
    let streamed = raw(addr, "GET", "/api/threads/c-1/stream", &host, &auth, "").await;
    assert!(streamed.body.contains("\"kind\":\"ended\""), "{}", streamed.body);
    assert!(!streamed.body.contains(SECRET), "{}", streamed.body);
    let result = raw(addr, "GET", "/api/threads/c-1/result", &host, &auth, "").await.json();
    assert_eq!(
        (result["output"]["api_key"].as_str(), result["output"]["total"].as_u64()),
        (Some(cairn_tools::debug::REDACTED), Some(3)),
        "{result}"
    );
    // The store itself keeps the value: redaction is of answers, not of data.
    assert_eq!(t.output::<Cred>().await.unwrap().api_key, SECRET);
    server.shutdown().await;
    engine.shutdown().await;
}

/// A loopback endpoint answers its reads unredacted without the token (the same reads a public
/// one refuses above), so what the public test refuses is the public mode's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_endpoint_reads_without_the_token_and_redacts_on_request() {
    let (_d, engine, server) = serving(loopback()).await;
    let addr = server.addr();
    let host = addr.to_string();
    let plain = raw(addr, "GET", "/api/threads/c-1/state", &host, &[], "").await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.json()["state"]["api_key"], SECRET);
    let redacted = raw(addr, "GET", "/api/threads/c-1/state?redact=1", &host, &[], "").await;
    assert_eq!(redacted.json()["state"]["api_key"], cairn_tools::debug::REDACTED);
    // No exporter: `/metrics` says so (404), `/api/metrics` is the health report.
    let metrics = raw(addr, "GET", "/metrics", &host, &[], "").await;
    assert_eq!(
        (metrics.status, metrics.field().as_deref()),
        (404, Some("path")),
        "{}",
        metrics.body
    );
    server.shutdown().await;
    engine.shutdown().await;
}

/// `/metrics` is the exporter's text at the path every scraper asks, and on a public endpoint a
/// read that needs the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_at_slash_metrics_behind_the_token_when_public() {
    let (recorder, handle) = cairn_tools::prometheus::recorder().unwrap();
    let (_d, path) = db();
    let mut options = loopback();
    options.public = true;
    options.prometheus = Some(handle);
    let (engine, server) = Engine::builder(&path)
        .workflow(&asks())
        .metrics_recorder(Arc::new(recorder))
        .serve(options.addr)
        .options(options)
        .open()
        .await
        .unwrap();
    let t = engine.start_json("cred", Cred::default(), StartOptions::id("m-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let addr = server.addr();
    let host = addr.to_string();
    let refused = raw(addr, "GET", "/metrics", &host, &[], "").await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let bearer = format!("Bearer {}", server.token());
    let got = raw(addr, "GET", "/metrics", &host, &[("authorization", &bearer)], "").await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert!(got.headers.contains("content-type: text/plain; version=0.0.4"), "{}", got.headers);
    assert!(got.body.contains("cairn_steps_total"), "{}", got.body);
    server.shutdown().await;
    engine.shutdown().await;
}
