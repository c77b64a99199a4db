//! Signals that arrive once (`Engine::signal_once`) and signal-with-start
//! (`Engine::signal_with_start`): a dedup key stores one signal across a restart and answers
//! the duplicate; an absent thread is created and signalled in one call; a crash at any write
//! of either neither loses nor doubles the signal when the caller retries.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

/// Receives one `add` signal, then finishes with it.
fn adder() -> Workflow<Tally> {
    Workflow::<Tally>::builder("adder", 1)
        .node("add", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("add").await?;
            Ok(NodeOutput::update((n, format!("added {n}"))))
        })
        .edge(START, "add")
        .edge("add", END)
        .build()
        .unwrap()
}

/// The signals named `name` in `thread`'s inbox.
fn stored(engine: &Engine, thread: &str, name: &str) -> usize {
    let id = cairn::ThreadId::new(thread).unwrap();
    let inbox = engine.store().signals(&id, 0, 100).wait().unwrap();
    inbox.iter().filter(|s| s.name == name).count()
}

#[tokio::test]
async fn a_dedup_key_stores_one_signal_across_a_restart_and_answers_the_duplicate() {
    let (_d, path) = db();
    let wf = adder();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("adder", Tally::default(), StartOptions::id("d1")).await.unwrap();
    // Another name first, so that the node takes nothing before the duplicates are sent.
    engine.signal("d1", "other", 0u64).await.unwrap();
    let first = engine.signal_once("d1", "add", 5u64, "hook-1").await.unwrap();
    let again = engine.signal_once("d1", "add", 5u64, "hook-1").await.unwrap();
    assert_eq!((first.signal, first.duplicate), (2, false));
    assert_eq!((again.signal, again.duplicate), (2, true), "the first one's number");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b).await;
    let out: Tally = engine.thread("d1").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, vec!["added 5".to_string()]);
    // Finished now: a retry of the key still answers the duplicate, kept across the restart;
    // another key is another signal, refused by the finished thread.
    let after = engine.signal_once("d1", "add", 5u64, "hook-1").await.unwrap();
    assert_eq!((after.signal, after.duplicate), (2, true), "kept across the restart");
    let other_key = engine.signal_once("d1", "add", 6u64, "hook-2").await;
    assert!(matches!(other_key, Err(cairn::Error::WrongStatus { .. })), "{other_key:?}");
    assert_eq!(stored(&engine, "d1", "add"), 1);
    let err = engine.signal("d1", cairn::DEDUP_SIGNAL, 1u64).await.unwrap_err();
    assert!(matches!(err, cairn::Error::Invalid(_)), "the marker's name is refused: {err}");
    engine.shutdown().await;
}

#[tokio::test]
async fn signal_with_start_creates_an_absent_thread_and_signals_an_existing_one() {
    let (_d, path) = db();
    let wf = adder();
    let engine = open(&path, &[&wf], |b| b).await;
    let options = || StartOptions::id("s1");
    let first = engine
        .signal_with_start("adder", Tally::default(), options(), "add", 3u64, Some("k"))
        .await
        .unwrap();
    assert!(first.created && !first.sent.duplicate, "{first:?}");
    let again = engine
        .signal_with_start("adder", Tally::default(), options(), "add", 3u64, Some("k"))
        .await
        .unwrap();
    assert!(!again.created && again.sent.duplicate, "{again:?}");
    let out: Tally = engine.thread("s1").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, vec!["added 3".to_string()]);
    let none = engine.signal_with_start("adder", 1u64, StartOptions::default(), "add", 1u64, None);
    assert!(matches!(none.await, Err(cairn::Error::Invalid(_))), "an id is needed");
    engine.shutdown().await;
}

/// The store dies at each write in turn around a signal-with-start with a dedup key; the
/// caller retries the call on the reopened engine: one thread, one signal, received once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_signal_with_start_neither_loses_nor_doubles_it() {
    let secs = std::time::Duration::from_secs(10);
    let wf = adder();
    let call = async |engine: &Engine| {
        let options = StartOptions::id("w1");
        engine.signal_with_start("adder", Tally::default(), options, "add", 4u64, Some("k")).await
    };
    let run = async |engine: &Engine, _: &()| {
        call(engine).await?;
        engine.thread("w1").await?.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &(), crash_after: i64| {
        // The caller saw a failure (or nothing): it sends again.
        match call(engine).await {
            Ok(_) => {}
            // Finished already: its signal was stored before the crash.
            Err(cairn::Error::WrongStatus { .. }) => {}
            Err(e) => panic!("crash_after {crash_after}: {e}"),
        }
        let t = engine.thread("w1").await.unwrap();
        let done = tokio::time::timeout(secs, t.finished()).await;
        let status = done.unwrap_or_else(|_| panic!("crash_after {crash_after}: not finished"));
        assert_eq!(status.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        assert_eq!(stored(engine, "w1", "add"), 1, "crash_after {crash_after}: one signal");
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, vec!["added 4".to_string()], "crash_after {crash_after}");
    };
    let crashes = every_write(100, || (), |b, _| b.workflow(&wf), run, check).await;
    assert!(crashes >= 3, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY signal_with_start_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// `POST /api/threads/{id}/signal` with `dedup_key` answers the duplicate; with `start` it
/// creates the thread first; a start of an unknown workflow is refused naming `start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_takes_a_dedup_key_and_a_start() {
    use crate::common::{call, serving};
    let (_d, path) = db();
    let (engine, server) = serving(&path, &adder()).await;
    let url = format!("http://{}/api/threads/h1/signal", server.addr());
    let token = Some(server.token().to_owned());
    let post = |body: &str| call("POST", url.clone(), token.clone(), body.to_owned());
    let (status, err) = post(r#"{"name": "add", "value": 2}"#).await;
    assert_eq!(status, 404, "no thread h1 yet: {err}");
    let with_start = r#"{"name": "add", "value": 2, "dedup_key": "k",
        "start": {"workflow": "adder", "input": {"total": 0, "log": []}}}"#;
    let (status, sent) = post(with_start).await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!((sent["created"].as_bool(), sent["duplicate"].as_bool()), (Some(true), Some(false)));
    let (status, again) = post(r#"{"name": "add", "value": 2, "dedup_key": "k"}"#).await;
    assert_eq!((status, again["duplicate"].as_bool()), (200, Some(true)), "{again}");
    assert_eq!(again["signal"], sent["signal"], "the first one's number");
    let out: Tally = engine.thread("h1").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, vec!["added 2".to_string()]);
    assert_eq!(stored(&engine, "h1", "add"), 1);
    let unknown = r#"{"name": "add", "value": 2, "start": {"workflow": "nope", "input": 1}}"#;
    let url2 = format!("http://{}/api/threads/h2/signal", server.addr());
    let (status, err) = call("POST", url2, token.clone(), unknown.to_owned()).await;
    assert_eq!((status, err["field"].as_str()), (404, Some("start")), "{err}");
    server.shutdown().await;
    engine.shutdown().await;
}
