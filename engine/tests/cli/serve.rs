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
