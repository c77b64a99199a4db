//! The endpoint's reset batch (`POST /api/batches` with `"op": "reset"`, docs/batches.md): the
//! point is `to` (`start` when absent, `checkpoint`, `seq:N`); a bad one is a 400 naming `to`
//! and makes nothing; a dry run counts; the batch forks each matching thread and cancels it,
//! and leaves the others.

use cairn::{StartOptions, ThreadStatus, reset_thread_id};

use crate::common::{Tally, asks_input, call, db, serving};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_batch_through_the_endpoint_takes_its_point_and_refuses_a_bad_one() {
    let (_d, path) = db();
    let wf = asks_input();
    let (engine, server) = serving(&path, &wf).await;
    for (id, team) in [("a-1", "a"), ("a-2", "a"), ("b-1", "b")] {
        let options = StartOptions::id(id).label("team", team);
        let t = engine.start_json("ask", Tally::default(), options).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    let url = format!("http://{}/api/batches", server.addr());
    let token = Some(server.token().to_owned());
    let post = |body: &str| call("POST", url.clone(), token.clone(), body.to_owned());
    let filter = r#""filter": {"workflow": "ask", "labels": {"team": "a"}}"#;
    for to in [r#""later""#, r#""seq:0""#, "7"] {
        let (status, err) = post(&format!(r#"{{"op": "reset", "to": {to}, {filter}}}"#)).await;
        assert_eq!((status, err["field"].as_str()), (400, Some("to")), "{to}: {err}");
    }
    let (status, dry) =
        post(&format!(r#"{{"op": "reset", "to": "seq:1", "dry_run": true, {filter}}}"#)).await;
    assert_eq!((status, dry["total"].as_u64(), dry["op"].as_str()), (200, Some(2), Some("reset")));
    let (status, made) = post(&format!(r#"{{"op": "reset", "id": "rb", {filter}}}"#)).await;
    assert_eq!(status, 201, "{made}");
    let done = engine.thread("rb").await.unwrap().finished().await.unwrap();
    assert_eq!(done.status, ThreadStatus::Completed);
    assert_eq!(engine.batch_info("rb").await.unwrap().state.applied, 2);
    for (id, reset) in [("a-1", true), ("a-2", true), ("b-1", false)] {
        let status = engine.thread(id).await.unwrap().status().await.unwrap();
        let fork = cairn::ThreadId::new(reset_thread_id(id, "rb")).unwrap();
        let made = engine.store().thread(&fork).await.unwrap();
        if reset {
            assert_eq!(status, ThreadStatus::Cancelled, "{id}");
            assert_eq!(
                made.and_then(|r| r.parent).map(|(p, s)| (p.to_string(), s.0)),
                Some((id.to_owned(), 1))
            );
        } else {
            assert_eq!((status, made.is_none()), (ThreadStatus::WaitingInput, true), "{id}");
        }
    }
    server.shutdown().await;
    engine.shutdown().await;
}
