//! `GET /api/openapi.json` against the router it documents, on a real served engine: the
//! document is OpenAPI 3.1, every route of the router is in it with its method, every documented
//! route answers (no "no such route" 404, no 405), and the query parameters it lists are the
//! ones the handlers take (a documented parameter is accepted, an undocumented one refused);
//! every operation has its own id, and the answers are the documented types the CLI reads.

use std::collections::BTreeSet;

use cairn::{StartOptions, ThreadStatus};
use cairn_tools::serve::route_table;
use cairn_tools::serve::wire::{self, Refusal, ThreadResult};

use crate::common::{Tally, asks_input, call, db, serving};

/// A documented path with its segments filled in: thread `t-1`, workflow `ask`, a control; the
/// stream of an unknown thread (a 404 that names the thread, not the route: `t-1`'s stream
/// would not end while it waits, and `it::streams` reads real ones).
fn concrete(path: &str) -> String {
    path.replace("{id}/{control}", "t-1/pause")
        .replace("/threads/{id}/stream", "/threads/no-such-thread/stream")
        .replace("/checkpoints/{id}", "/checkpoints/1")
        .replace("/workflows/{id}", "/workflows/ask")
        .replace("/schedules/{id}", "/schedules/nightly")
        .replace("/trace/{id}", "/trace/corr-1")
        .replace("{file}", "app.css")
        .replace("{id}", "t-1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_lists_every_route_and_every_documented_route_answers() {
    let (_d, path) = db();
    let (engine, server) = serving(&path, &asks_input()).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("t-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let base = format!("http://{}", server.addr());
    let token = Some(server.token().to_owned());

    let (status, doc) = call("GET", format!("{base}/api/openapi.json"), None, String::new()).await;
    assert_eq!(status, 200, "{doc}");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "{}", doc["openapi"]);
    let paths = doc["paths"].as_object().expect("paths");

    let documented = every_route_documented_once(paths);

    // Every documented route answers: not "no such route", not a wrong method.
    for (method, path, op) in &documented {
        let url = format!("{base}{}", concrete(path));
        let (status, body) =
            call(method.to_uppercase().leak(), url, token.clone(), "{}".into()).await;
        let unrouted = status == 404 && body["error"] == "no such route";
        assert!(!unrouted && status != 405, "{method} {path}: {status} {body}");
        // Controls need the token, and the document says so.
        assert_eq!(op.get("security").is_some(), *method != "get", "{method} {path}");
    }

    // The parameters documented for the threads listing are the ones it takes.
    let list = &paths["/api/threads"]["get"]["parameters"];
    let names: Vec<&str> =
        list.as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["status", "workflow", "label", "limit", "after", "offset"]);
    let values = ["running", "ask", "a=b", "5", "t-0", "0"];
    let query: Vec<String> = names.iter().zip(values).map(|(n, v)| format!("{n}={v}")).collect();
    let query = query.join("&");
    let (status, body) =
        call("GET", format!("{base}/api/threads?{query}"), None, String::new()).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        call("GET", format!("{base}/api/threads?{query}&colour=red"), None, String::new()).await;
    assert_eq!(status, 400, "{body}");
    // Seed 004's session reads are documented as the parameters that ask for them.
    for (route, name) in [("/api/threads/{id}/state", "session"), ("/api/trace", "states")] {
        let params = paths[route]["get"]["parameters"].as_array().expect("parameters");
        assert!(params.iter().any(|p| p["name"] == name), "{route} documents {name}");
    }
    // The refusal is the documented error body.
    assert!(doc["components"]["schemas"]["Refusal"]["properties"]["field"].is_object());
    let refusal: Refusal = wire::read(body, "refusal").unwrap();
    assert_eq!(refusal.field.as_deref(), Some("colour"), "{}", refusal.error);
    // A result is the documented type, and what the CLI reads.
    let result = &paths["/api/threads/{id}/result"]["get"]["responses"]["200"];
    let schema = &result["content"]["application/json"]["schema"]["$ref"];
    assert_eq!(schema, "#/components/schemas/ThreadResult", "{result}");
    let (status, body) =
        call("GET", format!("{base}/api/threads/t-1/result"), None, String::new()).await;
    assert_eq!(status, 200, "{body}");
    let answer: ThreadResult = wire::read(body, "result").unwrap();
    assert_eq!((answer.thread.as_str(), answer.result.finished), ("t-1", false));
    assert!(doc["components"]["schemas"]["ThreadResult"].is_object());
    // The answers the CLI reads as its rows are documented with their fields, and every
    // reference in the document names a schema it has.
    let shown = &paths["/api/threads/{id}"]["get"]["responses"]["200"]["content"];
    let shown = &shown["application/json"]["schema"]["$ref"];
    assert_eq!(shown, "#/components/schemas/ThreadDetails", "{shown}");
    let details = &doc["components"]["schemas"]["ThreadDetails"];
    assert!(details["properties"]["budgets"].is_object(), "{details}");
    let mut refs = Vec::new();
    refs_in(&doc, &mut refs);
    for r in &refs {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
        assert!(doc["components"]["schemas"][name].is_object(), "{r} names no schema");
    }
    assert!(refs.iter().any(|r| r.ends_with("/Budget")), "{refs:?}");
    // The start documents its body's fields.
    let start = &paths["/api/workflows/{id}/threads"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    assert!(start["properties"]["input"].is_object(), "{start}");
    drop(server);
    engine.shutdown().await;
}

/// The documented operations (method, path, operation), after checking that every route of the
/// router is documented with its method, nothing else is, and no operation id repeats.
fn every_route_documented_once(
    paths: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(&'static str, String, serde_json::Value)> {
    // Every route of the router is documented, with its method.
    let routes = route_table();
    for r in &routes {
        let op = &paths.get(r.path).unwrap_or_else(|| panic!("{} is not documented", r.path))
            [r.method.to_lowercase()];
        assert!(op.is_object(), "{} {} is not documented", r.method, r.path);
        assert_ne!(op["summary"], "Undocumented", "{} {}", r.method, r.path);
    }
    // ...and nothing else is.
    let listed: BTreeSet<(String, String)> =
        routes.iter().map(|r| (r.method.to_lowercase(), r.path.to_owned())).collect();
    let (mut documented, mut ids) = (Vec::new(), BTreeSet::new());
    for (path, item) in paths {
        for method in ["get", "post", "delete", "put", "patch"] {
            if item.get(method).is_some() {
                assert!(listed.contains(&(method.to_owned(), path.clone())), "{method} {path}");
                let id = item[method]["operationId"].as_str().expect("an operation id");
                assert!(ids.insert(id.to_owned()), "{id} twice");
                documented.push((method, path.clone(), item[method].clone()));
            }
        }
    }
    assert_eq!(documented.len(), routes.len());
    documented
}

/// Every `$ref` in `v`.
fn refs_in(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(serde_json::Value::as_str) {
                out.push(r.to_owned());
            }
            map.values().for_each(|x| refs_in(x, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|x| refs_in(x, out)),
        _ => {}
    }
}
