//! `POST /api/threads/{id}/repin` (docs/patching.md, docs/endpoint.md): moves a thread to a
//! worker build (`{"build": "B"}`) or unpins it (`{"build": null}`), a control like pause: the
//! token is required, a bad body or build id is a 400 naming its field and writes nothing, an
//! unknown thread a 404, an ended one a 409.

use cairn::{Engine, StartOptions, ThreadStatus};

use crate::common::{Tally, asks_input, call, db, serving};

/// The thread's `cairn.build` label and its last seq.
fn pin(engine: &Engine, thread: &str) -> (Option<String>, u64) {
    let id = cairn::storage::ThreadId::new(thread).unwrap();
    let record = engine.store().thread(&id).wait().unwrap().unwrap();
    (record.labels.get("cairn.build").cloned(), record.last.map_or(0, |b| b.seq.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repin_control_pins_and_unpins_a_thread_and_refuses_bad_input() {
    let (_d, path) = db();
    let wf = asks_input();
    let (engine, server) = serving(&path, &wf).await;
    for id in ["r-1", "r-2"] {
        let t = engine.start_json("ask", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let post = |thread: &str, token: Option<&str>, body: &str| {
        let url = format!("{base}/api/threads/{thread}/repin");
        call("POST", url, token.map(str::to_owned), body.to_owned())
    };
    let before = pin(&engine, "r-1");
    assert_eq!(before.0, None, "an engine without a build id pins nothing");

    let (status, err) = post("r-1", None, r#"{"build": "2026.12.2"}"#).await;
    assert_eq!((status, err["field"].as_str()), (401, Some("authorization")), "{err}");
    for (body, field) in [
        (r#"{"build": "has space"}"#, "build"),
        (&*format!(r#"{{"build": "{}"}}"#, "x".repeat(65)), "build"),
        ("{}", "build"),
        ("", "body"),
        (r#"{"build": "a", "colour": "red"}"#, "colour"),
        (r#"{"build": 7}"#, "build"),
    ] {
        let (status, err) = post("r-1", Some(&token), body).await;
        assert_eq!((status, err["field"].as_str()), (400, Some(field)), "{body}: {err}");
    }
    assert_eq!(pin(&engine, "r-1"), before, "nothing written by a refusal");
    let (status, err) = post("nope", Some(&token), r#"{"build": "b"}"#).await;
    assert_eq!((status, err["field"].as_str()), (404, Some("thread")), "{err}");

    let (status, done) = post("r-1", Some(&token), r#"{"build": "2026.12.2"}"#).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("waiting_input")), "{done}");
    let (build, seq) = pin(&engine, "r-1");
    assert_eq!((build.as_deref(), seq), (Some("2026.12.2"), before.1 + 1), "one event");
    assert_eq!(pin(&engine, "r-2"), (None, before.1), "control: the other thread untouched");
    let drain = engine.drain().await.unwrap();
    let row = drain.builds.iter().find(|b| b.build.as_deref() == Some("2026.12.2")).unwrap();
    assert_eq!((row.total, row.taken_here), (1, false));

    let (status, done) = post("r-1", Some(&token), r#"{"build": null}"#).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("waiting_input")), "{done}");
    assert_eq!(pin(&engine, "r-1").0, None, "unpinned");

    engine.cancel("r-2", "done with it").await.unwrap();
    let (status, err) = post("r-2", Some(&token), r#"{"build": "b"}"#).await;
    assert_eq!((status, err["field"].as_str()), (409, Some("thread")), "{err}");
    server.shutdown().await;
    engine.shutdown().await;
}
