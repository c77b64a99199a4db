//! `cairn serve`: refuses a non-loopback address without `--public`, serves a file no engine
//! holds (printing its address and token as one JSON line), holds the file meanwhile, announces
//! itself in `<db>.endpoint` (the controls of other `cairn` processes go through it), and
//! removes that on SIGTERM.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{Spawned, copy, demo_db, on, tempdir};

#[test]
fn cairn_serve_serves_a_file_takes_controls_through_its_endpoint_and_stops_on_sigterm() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let db_arg = db.to_str().expect("utf-8");
    let run = on(&db, &["serve", "--addr", "0.0.0.0:0"]).expect(2);
    assert!(run.stderr.contains("--public"), "{}", run.stderr);

    let server = Spawned::start(&["serve", "--json", "--db", db_arg], Duration::from_secs(120));
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    let address = first["address"].as_str().expect("address").to_owned();
    assert_eq!(first["token"].as_str().map(str::len), Some(64), "{first}");
    let endpoint = dir.path().join("demo3.db.endpoint");
    let announced: Value =
        serde_json::from_slice(&std::fs::read(&endpoint).expect("the endpoint file")).unwrap();
    assert_eq!(announced["address"].as_str(), Some(address.as_str()));

    // The announced web view answers with the threads page.
    let web_view = first["web_view"].as_str().expect("web_view");
    assert_eq!(web_view, format!("http://{address}/ui/threads"));
    let mut page = ureq::get(web_view).call().expect("GET the web view");
    assert!(page.body_mut().read_to_string().unwrap().contains("<html"), "a page");
    let mut resp = ureq::get(&format!("http://{address}/api/threads")).call().expect("GET");
    let page: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(page["threads"].as_array().map(Vec::len), Some(3), "{page}");
    // The file is held: a writing command refuses it, but the controls go through the endpoint.
    on(&db, &["abandon", "demo-1"]).expect(4);
    let token = first["token"].as_str().expect("token");
    let fork = ureq::post(&format!("http://{address}/api/threads/demo-1/fork"))
        .header("authorization", &format!("Bearer {token}"))
        .send(r#"{"at": 1, "id": "f-1", "start": false}"#);
    assert_eq!(fork.expect("a fork").status().as_u16(), 200);
    let cancelled = on(&db, &["cancel", "f-1", "--json"]).expect(0).json();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let refused = on(&db, &["pause", "demo-1"]).expect(1);
    assert!(refused.stderr.contains("refused (thread)"), "{}", refused.stderr);

    let pid = first["pid"].as_u64().expect("pid").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    assert_eq!(server.wait(), 0);
    assert!(!endpoint.exists(), "the endpoint file is removed on shutdown");

    // An announcement nobody answers (an engine that died) is ignored: the file is opened.
    let stale = format!(
        r#"{{"address": "127.0.0.1:1", "pid": 1, "token_file": "{}.token"}}"#,
        db.display()
    );
    std::fs::write(&endpoint, stale).unwrap();
    let local = on(&db, &["cancel", "f-1"]).expect(1);
    assert!(!local.stderr.contains("engine serving"), "opened locally: {}", local.stderr);
}

/// `GET path` to `address` with `Host: host` and `headers`, written by hand (so the `Host` is the
/// test's): the status and the body.
fn raw_get(address: &str, path: &str, host: &str, headers: &[(&str, &str)]) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
    (status, body.to_owned())
}

/// `cairn serve --public`: every read needs the token (the CLI's reads through it send the one of
/// `<db>.token`), answers are redacted without `redact=1`, and a `Host` neither served nor
/// allowed (`--allow-host`) is refused.
#[test]
fn cairn_serve_public_needs_the_token_to_read_redacts_and_refuses_a_foreign_host() {
    const SECRET: &str = "sk-live-0123456789";
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let db_arg = db.to_str().expect("utf-8");
    let args = [
        "serve",
        "--json",
        "--db",
        db_arg,
        "--addr",
        "127.0.0.1:0",
        "--public",
        "--allow-host",
        "cairn.internal",
    ];
    let server = Spawned::start(&args, Duration::from_secs(120));
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    let address = first["address"].as_str().expect("address").to_owned();
    let port = address.rsplit_once(':').expect("a port").1.to_owned();
    let token = first["token"].as_str().expect("token").to_owned();
    let bearer = format!("Bearer {token}");
    let auth = [("authorization", bearer.as_str())];

    let (status, body) = raw_get(&address, "/api/threads", &address, &[]);
    assert_eq!(status, 401, "a read without the token: {body}");
    assert!(body.contains(r#""field":"authorization""#), "{body}");
    let (status, body) = raw_get(&address, "/api/threads", &address, &auth);
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        raw_get(&address, "/api/threads", &format!("cairn.internal:{port}"), &auth);
    assert_eq!(status, 200, "an allowed name: {body}");
    let (status, body) =
        raw_get(&address, "/api/threads", &format!("rebound.example:{port}"), &auth);
    assert_eq!(status, 421, "a name neither served nor allowed: {body}");
    assert!(body.contains(r#""field":"host""#), "{body}");

    // A secret planted in a fork's labels comes back redacted, whatever the query says.
    let fork = ureq::post(&format!("http://{address}/api/threads/demo-1/fork"))
        .header("authorization", &bearer)
        .send(format!(
            r#"{{"at": 1, "id": "f-1", "start": false, "labels": {{"api_key": "{SECRET}"}}}}"#
        ));
    assert_eq!(fork.expect("a fork").status().as_u16(), 200);
    for path in ["/api/threads/f-1", "/api/threads/f-1?redact=0", "/api/threads?label=demo=1"] {
        let (status, body) = raw_get(&address, path, &address, &auth);
        assert_eq!(status, 200, "{path}: {body}");
        assert!(!body.contains(SECRET), "{path} leaks: {body}");
    }
    let (_, shown) = raw_get(&address, "/api/threads/f-1", &address, &auth);
    assert!(shown.contains("[REDACTED]"), "{shown}");

    // The CLI reads through the public endpoint with the token of `<db>.token`.
    let listed = on(&db, &["threads", "--json"]).expect(0).json();
    let rows = listed["threads"].as_array().or(listed.as_array()).map(Vec::len);
    assert_eq!(rows, Some(4), "{listed}");
    let shown = on(&db, &["show", "f-1", "--json"]).expect(0);
    assert!(!shown.stdout.contains(SECRET), "{}", shown.stdout);

    let pid = first["pid"].as_u64().expect("pid").to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(server.wait(), 0);
}

/// `cairn serve` answers `GET /metrics` with Prometheus text, as a scraper asks it: after a
/// thread ran in it, its step counter is there and counts.
#[test]
fn cairn_serve_serves_prometheus_text_at_metrics() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let db_arg = db.to_str().expect("utf-8");
    let server = Spawned::start(&["serve", "--json", "--db", db_arg], Duration::from_secs(120));
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    let address = first["address"].as_str().expect("address").to_owned();
    let token = first["token"].as_str().expect("token");
    // A thread runs in the serving engine: a started fork of a finished one.
    let fork = ureq::post(&format!("http://{address}/api/threads/demo-1/fork"))
        .header("authorization", &format!("Bearer {token}"))
        .send(r#"{"at": 1, "id": "f-run"}"#);
    assert_eq!(fork.expect("a fork").status().as_u16(), 200);
    let mut done = ureq::get(&format!("http://{address}/api/threads/f-run/result?wait_ms=60000"))
        .call()
        .expect("the result");
    let done: Value = serde_json::from_str(&done.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(done["finished"], true, "{done}");

    let mut scraped = ureq::get(&format!("http://{address}/metrics")).call().expect("a scrape");
    let kind =
        scraped.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(kind.as_deref(), Some("text/plain; version=0.0.4"));
    let text = scraped.body_mut().read_to_string().unwrap();
    let steps: f64 = text
        .lines()
        .filter(|l| l.starts_with("cairn_steps_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(steps >= 1.0, "the fork's steps are counted: {text}");
    assert!(text.contains("# TYPE cairn_steps_total counter"), "{text}");

    let pid = first["pid"].as_u64().expect("pid").to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(server.wait(), 0);
}

/// `cairn worker --addr` serves the endpoint while it works, Prometheus text at `/metrics`
/// included, and says where on stderr (its stdout is its report).
#[test]
fn cairn_worker_with_an_address_serves_prometheus_text_at_metrics() {
    use std::io::BufRead as _;
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let db_arg = db.to_str().expect("utf-8");
    let mut child = std::process::Command::new(crate::harness::bin())
        .args(["worker", "--db", db_arg, "--addr", "127.0.0.1:0", "--poll-ms", "50"])
        .env_remove("CAIRN_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn cairn worker");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // A hang guard, not synchronisation: the line comes once the listener is bound.
    let line = loop {
        let line = lines.recv_timeout(Duration::from_secs(120)).expect("the serving line");
        if line.starts_with("serving http://") {
            break line;
        }
    };
    let address = line["serving http://".len()..].split('/').next().expect("an address").to_owned();
    let mut scraped = ureq::get(&format!("http://{address}/metrics")).call().expect("a scrape");
    let text = scraped.body_mut().read_to_string().unwrap();
    assert!(text.contains("cairn_steps_total"), "{text}");
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = child.wait().expect("the worker exits");
    assert_eq!(status.code(), Some(0));
}
