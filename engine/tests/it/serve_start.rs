//! Starting a thread from outside (issue 32 item 1): `POST /api/workflows/{id}/threads` over
//! real loopback HTTP. A new id is 201 and the same id again 200 with the same thread (one
//! thread stored); labels and the queue (key, priority, dedup) are applied; `wait_ms` answers
//! the thread's output in the same call; an unknown workflow is a 404, a bad body a 400 naming
//! its field, a missing token a 401.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::{Page, QueueLimits, ThreadFilter};
use cairn::{END, Engine, START, ThreadStatus};
use serde_json::json;

use crate::common::{Tally, call, db, send, serving};
use cairn_tools::serve::Serve as _;

/// Adds one to the total and ends.
pub(crate) fn adds() -> Workflow<Tally> {
    Workflow::<Tally>::builder("add", 1)
        .node("add", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, "added".into())))
        })
        .edge(START, "add")
        .edge("add", END)
        .build()
        .unwrap()
}

/// Waits for input (a thread that holds its queue's one place).
fn asks() -> Workflow<Tally> {
    Workflow::<Tally>::builder("ask", 1)
        .node("ask", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!({"question": "how many?"}))?;
            Ok(NodeOutput::update((n, "answered".into())))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_is_idempotent_on_its_id_applies_labels_and_waits_for_the_output() {
    let (_d, path) = db();
    let (engine, server) = serving(&path, &adds()).await;
    let base = format!("http://{}", server.addr());
    let token = Some(server.token().to_owned());
    let url = format!("{base}/api/workflows/add/threads");

    let body = json!({"input": {"total": 41, "log": []}, "id": "s-1", "labels": {"team": "a"}});
    let first = send("POST", url.clone(), token.clone(), body.to_string()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body, json!({"thread": "s-1", "created": true, "link": "/api/threads/s-1"}));
    assert_eq!(first.location.as_deref(), Some("/api/threads/s-1"));
    let again = send("POST", url.clone(), token.clone(), body.to_string()).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["thread"], "s-1");
    assert_eq!(again.body["created"], false);
    let all = engine
        .store()
        .list_threads(&ThreadFilter::default(), Page { limit: 10, offset: 0 })
        .wait()
        .unwrap();
    assert_eq!(all.len(), 1, "one thread for the two starts of one id");
    assert_eq!(all[0].labels.get("team").map(String::as_str), Some("a"));

    // Started and waited for in one call: the answer carries the output.
    let waited = send(
        "POST",
        format!("{url}?wait_ms=10000"),
        token.clone(),
        json!({"input": {"total": 1, "log": []}, "id": "s-2"}).to_string(),
    )
    .await;
    assert_eq!(waited.status, 201, "{}", waited.body);
    assert_eq!(waited.body["finished"], true, "{}", waited.body);
    assert_eq!(waited.body["status"], "completed");
    assert_eq!(waited.body["output"]["total"], 2, "{}", waited.body);
    // The link is the thread's, and what it reads is what the result route answers.
    let shown =
        call("GET", format!("{base}{}/result", waited.location.unwrap()), None, String::new())
            .await
            .1;
    assert_eq!(shown["output"], waited.body["output"]);
    // Without an id: a fresh one, created.
    let fresh =
        send("POST", url.clone(), token, json!({"input": {"total": 0, "log": []}}).to_string())
            .await;
    assert_eq!((fresh.status, &fresh.body["created"]), (201, &json!(true)), "{}", fresh.body);
    assert_ne!(fresh.body["thread"], "s-1");
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_on_a_queue_waits_in_line_under_its_key_and_a_dedup_key_answers_its_holder() {
    let (_d, path) = db();
    let one = QueueLimits { concurrency_max: Some(1), ..QueueLimits::default() };
    let (engine, server) = Engine::builder(&path)
        .workflow(&asks())
        .queue("q", one)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let base = format!("http://{}", server.addr());
    let token = Some(server.token().to_owned());
    let url = format!("{base}/api/workflows/ask/threads");
    // The queue's one place, held by a thread waiting for input.
    let holder = send(
        "POST",
        url.clone(),
        token.clone(),
        json!({"input": {"total": 0, "log": []}, "id": "h", "queue": "q"}).to_string(),
    )
    .await;
    assert_eq!(holder.status, 201, "{}", holder.body);
    let h = engine.thread("h").await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::WaitingInput);

    let queued = json!({"input": {"total": 0, "log": []}, "id": "w", "queue": "q", "key": "k", "priority": 9,
                        "dedup": "report-7"});
    let started = send("POST", url.clone(), token.clone(), queued.to_string()).await;
    assert_eq!(started.status, 201, "{}", started.body);
    assert_eq!(engine.thread("w").await.unwrap().status().await.unwrap(), ThreadStatus::Queued);
    let queues = call("GET", format!("{base}/api/queues"), None, String::new()).await.1;
    let q = queues["queues"].as_array().unwrap().iter().find(|q| q["name"] == "q").unwrap();
    assert_eq!(q["waiting"], 1, "{q}");
    assert_eq!(q["keys"]["k"]["waiting"], 1, "{q}");
    // Another start with the dedup key: its holder, not a new thread.
    let dup =
        json!({"input": {"total": 0, "log": []}, "id": "w2", "queue": "q", "dedup": "report-7"});
    let deduped = send("POST", url, token, dup.to_string()).await;
    assert_eq!(deduped.status, 200, "{}", deduped.body);
    assert_eq!((&deduped.body["thread"], &deduped.body["created"]), (&json!("w"), &json!(false)));
    assert!(engine.thread("w2").await.is_err(), "no thread w2");
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_over_a_rate_that_drops_is_a_429_with_retry_after_and_writes_nothing() {
    let (_d, path) = db();
    let drops = QueueLimits {
        rate: Some(cairn::storage::RateLimit { starts: 1, period_ms: 60_000 }),
        rate_drops: true,
        ..QueueLimits::default()
    };
    let (engine, server) = Engine::builder(&path)
        .workflow(&asks())
        .queue("drops", drops)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let url = format!("http://{}/api/workflows/ask/threads", server.addr());
    let token = Some(server.token().to_owned());
    let body = |id: &str| json!({"input": {"total": 0, "log": []}, "id": id, "queue": "drops"});
    let first = send("POST", url.clone(), token.clone(), body("a").to_string()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let over = send("POST", url, token, body("b").to_string()).await;
    assert_eq!(over.status, 429, "{}", over.body);
    let secs: u64 = over.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "{secs}");
    assert!(over.body["error"].as_str().unwrap().contains("over its rate"), "{}", over.body);
    assert!(engine.thread("b").await.is_err(), "no thread b");
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_start_is_a_4xx_naming_what_and_writes_nothing() {
    let (_d, path) = db();
    let (engine, server) = serving(&path, &adds()).await;
    let base = format!("http://{}", server.addr());
    let token = Some(server.token().to_owned());
    let url = format!("{base}/api/workflows/add/threads");
    let cases = [
        (
            format!("{base}/api/workflows/no-such/threads"),
            json!({"input": {"total": 0, "log": []}}),
            404,
            "workflow",
        ),
        (url.clone(), json!({"input": 5}), 400, "input"),
        (url.clone(), json!({"id": "x"}), 400, "input"),
        (
            url.clone(),
            json!({"input": {"total": 0, "log": []}, "labels": {"a": 1}}),
            400,
            "labels.a",
        ),
        (
            url.clone(),
            json!({"input": {"total": 0, "log": []}, "start_at_ms": 1, "queue": "q"}),
            400,
            "start_at_ms",
        ),
        (url.clone(), json!({"input": {"total": 0, "log": []}, "key": "k"}), 400, "key"),
        (url.clone(), json!({"input": {"total": 0, "log": []}, "queue": "nope"}), 404, "queue"),
        (format!("{url}?wait_ms=soon"), json!({"input": {"total": 0, "log": []}}), 400, "wait_ms"),
    ];
    for (at, body, status, field) in cases {
        let got = send("POST", at.clone(), token.clone(), body.to_string()).await;
        assert_eq!(
            (got.status, got.body["field"].as_str()),
            (status, Some(field)),
            "{at} {body}: {}",
            got.body
        );
    }
    let missing =
        send("POST", url, None, json!({"input": {"total": 0, "log": []}, "id": "t"}).to_string())
            .await;
    assert_eq!((missing.status, missing.body["field"].as_str()), (401, Some("authorization")));
    let all = engine
        .store()
        .list_threads(&ThreadFilter::default(), Page { limit: 10, offset: 0 })
        .wait()
        .unwrap();
    assert!(all.is_empty(), "nothing written: {all:?}");
    server.shutdown().await;
    engine.shutdown().await;
}
