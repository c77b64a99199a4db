//! `POST /api/threads/{id}/reset` (issue 43 item 1, docs/batches.md, docs/endpoint.md): one
//! thread forked at `to` (start, checkpoint, seq:N) into `<thread>.reset.<key>` and cancelled,
//! a control like pause: the token is required, a bad body, point or key is a 400 naming its
//! field and writes nothing, an unknown thread a 404, a reset the engine refuses a 409; the
//! answer names the new thread, which this engine runs; the same key again makes no second fork.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn::storage::ThreadId;
use cairn::{Engine, StartOptions, ThreadStatus};

use crate::common::{Tally, call, db, serving};
use crate::reset::{cancel_reasons, parked, stages, thread_count};

/// The thread's status and last seq.
async fn at(engine: &Engine, thread: &str) -> (ThreadStatus, u64) {
    let id = ThreadId::new(thread).unwrap();
    let record = engine.store().thread(&id).await.unwrap().unwrap();
    (record.status, record.last.map_or(0, |b| b.seq.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reset_control_forks_one_thread_once_per_key_and_refuses_bad_input() {
    let (_d, path) = db();
    let runs = Arc::new(AtomicU64::new(0));
    let (engine, server) = serving(&path, &stages(runs.clone())).await;
    for id in ["s-1", "s-2", "s-3"] {
        engine.start_json("stages", Tally::default(), StartOptions::id(id)).await.unwrap();
        parked(&engine, id).await;
    }
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let post = |thread: &str, token: Option<&str>, body: &str| {
        let url = format!("{base}/api/threads/{thread}/reset");
        call("POST", url, token.map(str::to_owned), body.to_owned())
    };
    let (before, threads) = (at(&engine, "s-1").await, thread_count(&engine).await);

    let (status, err) = post("s-1", None, r#"{"to": "start"}"#).await;
    assert_eq!((status, err["field"].as_str()), (401, Some("authorization")), "{err}");
    for (body, field) in [
        ("", "body"),
        ("{}", "to"),
        (r#"{"to": "yesterday"}"#, "to"),
        (r#"{"to": "seq:0"}"#, "to"),
        (r#"{"to": 5}"#, "to"),
        (r#"{"to": "seq:9999", "key": "far"}"#, "to"),
        (r#"{"to": "start", "key": ""}"#, "key"),
        (r#"{"to": "start", "key": "a\u0007b"}"#, "key"),
        (r#"{"to": "start", "colour": "red"}"#, "colour"),
    ] {
        let (status, err) = post("s-1", Some(&token), body).await;
        assert_eq!((status, err["field"].as_str()), (400, Some(field)), "{body}: {err}");
    }
    assert_eq!(at(&engine, "s-1").await, before, "nothing written by a refusal");
    assert_eq!(thread_count(&engine).await, threads, "no thread made by a refusal");
    let (status, err) = post("nope", Some(&token), r#"{"to": "start"}"#).await;
    assert_eq!((status, err["field"].as_str()), (404, Some("thread")), "{err}");
    // The engine refuses: the reset's id is held by a thread that is no reset of s-2.
    engine
        .start_json("stages", Tally::default(), StartOptions::id("s-2.reset.taken"))
        .await
        .unwrap();
    parked(&engine, "s-2.reset.taken").await;
    let (status, err) = post("s-2", Some(&token), r#"{"to": "start", "key": "taken"}"#).await;
    assert_eq!((status, err["field"].as_str()), (409, Some("thread")), "{err}");
    assert_eq!(at(&engine, "s-2").await.0, ThreadStatus::WaitingInput, "s-2 not cancelled");

    // To the latest checkpoint (after `first`): the new thread, run here, does not run `first`.
    let runs_before = runs.load(Ordering::SeqCst);
    let (status, done) = post("s-1", Some(&token), r#"{"to": "checkpoint", "key": "k1"}"#).await;
    assert_eq!((status, done["thread"].as_str()), (200, Some("s-1.reset.k1")), "{done}");
    assert_eq!(at(&engine, "s-1").await.0, ThreadStatus::Cancelled);
    assert_eq!(cancel_reasons(&engine, "s-1"), ["reset to s-1.reset.k1"]);
    parked(&engine, "s-1.reset.k1").await;
    assert_eq!(runs.load(Ordering::SeqCst), runs_before, "the checkpoint is after first");
    let made = thread_count(&engine).await;
    // The same key again: the same new thread, no second fork, no second cancel.
    let (status, again) = post("s-1", Some(&token), r#"{"to": "checkpoint", "key": "k1"}"#).await;
    assert_eq!((status, again["thread"].as_str()), (200, Some("s-1.reset.k1")), "{again}");
    assert_eq!(thread_count(&engine).await, made, "no second fork");
    assert_eq!(cancel_reasons(&engine, "s-1"), ["reset to s-1.reset.k1"]);
    // Without a key: a fresh one, to a seq.
    let (status, fresh) = post("s-3", Some(&token), r#"{"to": "seq:1"}"#).await;
    let fresh_id = fresh["thread"].as_str().unwrap_or_default().to_owned();
    assert_eq!(status, 200, "{fresh}");
    assert!(fresh_id.starts_with("s-3.reset."), "{fresh}");
    parked(&engine, &fresh_id).await;
    assert_eq!(at(&engine, "s-3").await.0, ThreadStatus::Cancelled);
    // Control: s-2, reset by none of these, waits on as it was.
    assert_eq!(at(&engine, "s-2").await.0, ThreadStatus::WaitingInput);
    assert!(
        engine.store().thread(&ThreadId::new("s-2.reset.k1").unwrap()).await.unwrap().is_none()
    );
    server.shutdown().await;
    engine.shutdown().await;
}
