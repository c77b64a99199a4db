//! Published events (`ctx.set_event`, `Engine::get_event`) and promises (`ctx.promise`,
//! `ctx.await_promise`, `Engine::complete_promise`): a wait returns the value once published
//! and the latest value of a key wins; a node that runs again publishes nothing twice; replay
//! agrees; a promise takes a value or an error, once (the same completion again is a duplicate,
//! another one refused), also when it came before the node awaited it; unknown ids are
//! refused; a crash at any write of either path neither loses nor doubles anything.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Select, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, EventValue, START, StartOptions, ThreadStatus};
use serde_json::{Value, json};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

/// Publishes `stage` twice and `count` once, waits for `go`, then publishes `stage` again.
fn publisher() -> Workflow<Tally> {
    Workflow::<Tally>::builder("publisher", 1)
        .node("a", |_s: Arc<Tally>, ctx: Ctx| async move {
            ctx.set_event("stage", "one").await?;
            ctx.set_event("stage", "two").await?;
            ctx.set_event("count", 3u64).await?;
            let go: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((go, "a".to_owned())))
        })
        .node("b", |_s: Arc<Tally>, ctx: Ctx| async move {
            ctx.set_event("stage", "three").await?;
            Ok(NodeOutput::update((0, "b".to_owned())))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

/// Creates a promise, publishes its id as `promise`, waits for `go` (so that a completion may
/// come first), then awaits the promise: its value, or its error, is the thread's log.
fn approver() -> Workflow<Tally> {
    Workflow::<Tally>::builder("approver", 1)
        .node("ask", |s: Arc<Tally>, ctx: Ctx| async move {
            let p = ctx.promise().await?;
            ctx.set_event("promise", p.id()).await?;
            if s.total > 0 {
                let _go: u64 = ctx.recv("go").await?;
            }
            let note = match ctx.await_promise::<u64>(&p).await? {
                Ok(n) => format!("approved {n}"),
                Err(message) => format!("refused: {message}"),
            };
            Ok(NodeOutput::update((0, note)))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

/// A promise in a select with a deadline of `total` ms.
fn deadline() -> Workflow<Tally> {
    Workflow::<Tally>::builder("deadline", 1)
        .node("ask", |s: Arc<Tally>, ctx: Ctx| async move {
            let p = ctx.promise().await?;
            ctx.set_event("promise", p.id()).await?;
            let took = ctx.select(Select::new().promise(&p).timeout_ms(s.total)).await?;
            let note = match p.outcome(&took) {
                Some(completed) => format!("took {:?}", completed?),
                None => "timed out".to_owned(),
            };
            Ok(NodeOutput::update((0, note)))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

/// The bodies of `thread`'s `event_published` / `promise_created` events, in log order.
async fn publications(engine: &Engine, thread: &str) -> Vec<Value> {
    let id = cairn::ThreadId::new(thread).unwrap();
    let mut events = engine.subscribe(cairn::storage::Scope::Thread(id), 0).unwrap();
    let mut found = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if matches!(
            e.body,
            cairn::event::Body::EventPublished { .. } | cairn::event::Body::PromiseCreated { .. }
        ) {
            found.push(serde_json::to_value(&e.body).unwrap());
        }
    }
    found
}

/// The id thread `thread` published as `promise`, waited for.
async fn promise_of(engine: &Engine, thread: &str) -> String {
    let got = published_id(engine, thread).await.unwrap();
    got.unwrap_or_else(|| panic!("{thread}: no promise id published"))
}

/// [`promise_of`], its failures returned.
async fn published_id(engine: &Engine, thread: &str) -> Result<Option<String>, cairn::Error> {
    let got = engine.get_event(thread, "promise", Some(Duration::from_secs(10))).await?;
    Ok(match got {
        EventValue::Set { value: Value::String(id) } => Some(id),
        _ => None,
    })
}

fn set(value: Value) -> EventValue {
    EventValue::Set { value }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_event_waits_the_latest_value_wins_and_nothing_is_published_twice() {
    let (_d, path) = db();
    let wf = publisher();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("publisher", Tally::default(), StartOptions::id("p1")).await.unwrap();
    let first = engine.get_event("p1", "stage", Some(Duration::from_secs(10))).await.unwrap();
    assert!(first == set(json!("one")) || first == set(json!("two")), "{first:?}");
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    assert_eq!(engine.get_event("p1", "stage", None).await.unwrap(), set(json!("two")));
    let short = engine.get_event("p1", "missing", Some(Duration::from_millis(50))).await.unwrap();
    assert_eq!(short, EventValue::Pending { status: ThreadStatus::WaitingInput });
    let all = engine.published("p1").await.unwrap();
    assert_eq!(serde_json::to_value(&all).unwrap(), json!({"count": 3, "stage": "two"}));
    // The node runs again when `go` arrives: it publishes none of its three again.
    engine.signal("p1", "go", 1u64).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(engine.get_event("p1", "stage", None).await.unwrap(), set(json!("three")));
    let never = engine.get_event("p1", "missing", Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(never, EventValue::NeverSet { status: ThreadStatus::Completed });
    assert_eq!(publications(&engine, "p1").await.len(), 4, "three in a, one in b");
    let report = engine.replay("p1", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
    drop((t, engine));
    // The state restored from the log agrees.
    let engine = open(&path, &[&wf], |b| b).await;
    assert_eq!(engine.get_event("p1", "stage", None).await.unwrap(), set(json!("three")));
    assert_eq!(engine.get_event("p1", "count", None).await.unwrap(), set(json!(3)));
    let unknown = engine.get_event("nobody", "stage", None).await;
    assert!(matches!(unknown, Err(cairn::Error::UnknownThread(_))), "{unknown:?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_takes_a_value_or_an_error_once_and_replay_agrees() {
    let (_d, path) = db();
    let wf = approver();
    let engine = open(&path, &[&wf], |b| b).await;
    let ok = engine.start_json("approver", Tally::default(), StartOptions::id("v1")).await.unwrap();
    let err =
        engine.start_json("approver", Tally::default(), StartOptions::id("e1")).await.unwrap();
    let (v1, e1) = (promise_of(&engine, "v1").await, promise_of(&engine, "e1").await);
    assert!(v1.starts_with("v1~p") && e1.starts_with("e1~p"), "{v1} {e1}");
    let done = engine.complete_promise(&v1, Ok(json!(42))).await.unwrap();
    assert!(!done.duplicate && done.thread == "v1", "{done:?}");
    engine.complete_promise(&e1, Err("no budget".into())).await.unwrap();
    let out: Tally = ok.output().await.unwrap();
    assert_eq!(out.log, vec!["approved 42".to_string()]);
    let out: Tally = err.output().await.unwrap();
    assert_eq!(out.log, vec!["refused: no budget".to_string()]);
    // Again the same: a duplicate, even on the finished thread; another completion: refused.
    let again = engine.complete_promise(&v1, Ok(json!(42))).await.unwrap();
    assert!(again.duplicate && again.signal == done.signal, "{again:?}");
    let other = engine.complete_promise(&v1, Ok(json!(43))).await;
    assert!(matches!(other, Err(cairn::Error::PromiseCompleted { .. })), "{other:?}");
    let other = engine.complete_promise(&e1, Ok(json!(1))).await;
    assert!(matches!(other, Err(cairn::Error::PromiseCompleted { .. })), "{other:?}");
    for thread in ["v1", "e1"] {
        let report = engine.replay(thread, &ReplayOptions::default()).await.unwrap();
        assert!(report.is_deterministic(), "{thread}: {report:?}");
        assert_eq!(publications(&engine, thread).await.len(), 2, "{thread}: promise and event");
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_before_the_await_is_taken_and_unknown_ids_are_refused() {
    let (_d, path) = db();
    let wf = approver();
    let engine = open(&path, &[&wf], |b| b).await;
    let waits_first = Tally { total: 1, log: vec![] };
    let t = engine.start_json("approver", waits_first, StartOptions::id("b1")).await.unwrap();
    let id = promise_of(&engine, "b1").await;
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput, "waits for go");
    engine.complete_promise(&id, Ok(json!(5))).await.unwrap();
    engine.signal("b1", "go", 1u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["approved 5".to_string()], "the same id after the wake");
    assert_eq!(publications(&engine, "b1").await.len(), 2, "created and published once");
    let (thread, suffix) = id.rsplit_once("~p").unwrap();
    assert_eq!(thread, "b1");
    let (head, _) = suffix.rsplit_once('.').unwrap();
    let never_made = format!("b1~p{head}.7");
    for bad in ["", "b1", "nobody~p1.0123456789abcdef.0", never_made.as_str()] {
        let refused = engine.complete_promise(bad, Ok(json!(1))).await;
        assert!(matches!(refused, Err(cairn::Error::UnknownPromise(_))), "{bad}: {refused:?}");
    }
    let err = engine.signal("b1", &format!("cairn.promise.{suffix}"), 1u64).await.unwrap_err();
    assert!(matches!(err, cairn::Error::Invalid(_)), "the engine's own name: {err}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_in_a_select_is_taken_or_its_deadline_passes() {
    let (_d, path) = db();
    let wf = deadline();
    let engine = open(&path, &[&wf], |b| b).await;
    let hour = Tally { total: 3_600_000, log: vec![] };
    let taken = engine.start_json("deadline", hour, StartOptions::id("s1")).await.unwrap();
    let short = Tally { total: 50, log: vec![] };
    let late = engine.start_json("deadline", short, StartOptions::id("s2")).await.unwrap();
    let id = promise_of(&engine, "s1").await;
    assert_eq!(taken.wait().await.unwrap().status, ThreadStatus::Sleeping);
    engine.complete_promise(&id, Err("declined".into())).await.unwrap();
    let out: Tally = taken.output().await.unwrap();
    assert_eq!(out.log, vec![r#"took Err("declined")"#.to_string()]);
    let out: Tally = late.output().await.unwrap();
    assert_eq!(out.log, vec!["timed out".to_string()]);
    let id2 = promise_of(&engine, "s2").await;
    let finished = engine.complete_promise(&id2, Ok(json!(1))).await;
    assert!(matches!(finished, Err(cairn::Error::WrongStatus { .. })), "{finished:?}");
    engine.shutdown().await;
}

/// The store dies at each write in turn while a thread publishes three events and ends; the
/// reopened engine finishes it: the latest values are there, each event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_set_event_neither_loses_nor_doubles_it() {
    let secs = Duration::from_secs(10);
    let wf = publisher();
    let run = async |engine: &Engine, _: &()| {
        engine.start_json("publisher", Tally::default(), StartOptions::id("c1")).await?;
        let t = engine.thread("c1").await?;
        t.wait().await?;
        engine.signal("c1", "go", 1u64).await?;
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &(), crash_after: i64| {
        let Ok(t) = engine.thread("c1").await else {
            return; // died before the thread was created: nothing to lose
        };
        let waited = tokio::time::timeout(secs, t.wait()).await.expect("parks or ends");
        if waited.unwrap().status == ThreadStatus::WaitingInput {
            engine.signal("c1", "go", 1u64).await.unwrap();
        }
        let done = tokio::time::timeout(secs, t.finished()).await.expect("ends");
        assert_eq!(done.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let all = engine.published("c1").await.unwrap();
        let all = serde_json::to_value(&all).unwrap();
        assert_eq!(all, json!({"count": 3, "stage": "three"}), "crash_after {crash_after}");
        let n = publications(engine, "c1").await.len();
        assert_eq!(n, 4, "crash_after {crash_after}: each event once");
    };
    let crashes = every_write(100, || (), |b, _| b.workflow(&wf), run, check).await;
    assert!(crashes >= 3, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY set_event_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// The store dies at each write in turn while a thread creates a promise, publishes its id and
/// awaits it, and a caller completes it; after the restart the caller completes it again: the
/// node takes the value once, the promise is created once, one completion is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_promise_neither_loses_nor_doubles_its_completion() {
    let secs = Duration::from_secs(10);
    let wf = approver();
    let run = async |engine: &Engine, _: &()| {
        engine.start_json("approver", Tally::default(), StartOptions::id("k1")).await?;
        let Some(id) = published_id(engine, "k1").await? else { return Ok(()) };
        engine.complete_promise(&id, Ok(json!(9))).await?;
        engine.thread("k1").await?.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &(), crash_after: i64| {
        let Ok(t) = engine.thread("k1").await else {
            return; // died before the thread was created: nothing to lose
        };
        // The caller saw a failure (or nothing): it completes the promise again.
        let id = promise_of(engine, "k1").await;
        match engine.complete_promise(&id, Ok(json!(9))).await {
            Ok(_) => {}
            Err(e) => panic!("crash_after {crash_after}: {e}"),
        }
        let done = tokio::time::timeout(secs, t.finished()).await.expect("ends");
        assert_eq!(done.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, vec!["approved 9".to_string()], "crash_after {crash_after}");
        assert_eq!(publications(engine, "k1").await.len(), 2, "crash_after {crash_after}");
        let inbox = engine.store().signals(t.id(), 0, 100).await.unwrap();
        let stored = inbox.iter().filter(|s| s.name.starts_with("cairn.promise.")).count();
        assert_eq!(stored, 1, "crash_after {crash_after}: one completion");
    };
    let crashes = every_write(100, || (), |b, _| b.workflow(&wf), run, check).await;
    assert!(crashes >= 3, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY promise_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// The routes: a published key long-polled and listed; a promise completed through
/// `POST /api/promises/{id}`: 200, a duplicate 200, another completion 409, an unknown id 404,
/// a body with both or neither 400, no token 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_published_events_and_completes_promises() {
    use crate::common::{call, serving};
    let (_d, path) = db();
    let (engine, server) = serving(&path, &approver()).await;
    let base = format!("http://{}", server.addr());
    let token = Some(server.token().to_owned());
    let t = engine.start_json("approver", Tally::default(), StartOptions::id("r1")).await.unwrap();
    let url = format!("{base}/api/threads/r1/published/promise?wait_ms=10000");
    let (status, got) = call("GET", url, None, String::new()).await;
    assert_eq!((status, got["state"].as_str()), (200, Some("set")), "{got}");
    let id = got["value"].as_str().unwrap().to_owned();
    let (status, all) =
        call("GET", format!("{base}/api/threads/r1/published"), None, String::new()).await;
    assert_eq!((status, &all["published"]["promise"]), (200, &json!(id)), "{all}");
    let url = format!("{base}/api/threads/r1/published/other?wait_ms=50");
    let (status, pending) = call("GET", url, None, String::new()).await;
    assert_eq!((status, pending["state"].as_str()), (200, Some("pending")), "{pending}");
    let post = |id: &str, body: &str, token: Option<String>| {
        call("POST", format!("{base}/api/promises/{id}"), token, body.to_owned())
    };
    let (status, err) = post(&id, r#"{"value": 4}"#, None).await;
    assert_eq!(status, 401, "a control needs the token: {err}");
    let (status, err) = post(&id, r#"{"value": 4, "error": "x"}"#, token.clone()).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("body")), "{err}");
    let (status, done) = post(&id, r#"{"value": 4}"#, token.clone()).await;
    assert_eq!((status, done["duplicate"].as_bool()), (200, Some(false)), "{done}");
    let (status, again) = post(&id, r#"{"value": 4}"#, token.clone()).await;
    assert_eq!((status, again["duplicate"].as_bool()), (200, Some(true)), "{again}");
    let (status, other) = post(&id, r#"{"error": "late"}"#, token.clone()).await;
    assert_eq!(status, 409, "{other}");
    let (status, unknown) =
        post("r1~p9.0123456789abcdef.0", r#"{"value": 1}"#, token.clone()).await;
    assert_eq!((status, unknown["field"].as_str()), (404, Some("promise")), "{unknown}");
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["approved 4".to_string()]);
    server.shutdown().await;
    engine.shutdown().await;
}

/// Publishes `stage`, then the event `second`, or, when `changes`, a promise instead on every
/// run after the first `runs` counts (a node whose code changed under a parked thread), then
/// waits for `go`.
fn changing_publisher(runs: Arc<std::sync::atomic::AtomicU64>, changes: bool) -> Workflow<Tally> {
    use std::sync::atomic::Ordering;
    Workflow::<Tally>::builder("changing", 1)
        .node("a", move |_s: Arc<Tally>, ctx: Ctx| {
            let first_run = runs.fetch_add(1, Ordering::SeqCst) == 0 || !changes;
            async move {
                ctx.set_event("stage", "one").await?;
                if first_run {
                    ctx.set_event("second", 2u64).await?;
                } else {
                    ctx.promise().await?;
                }
                let go: u64 = ctx.recv("go").await?;
                Ok(NodeOutput::update((go, "a".to_owned())))
            }
        })
        .edge(START, "a")
        .edge("a", END)
        .build()
        .unwrap()
}

/// A node that runs again and publishes another thing where its first run published (here a
/// promise where an event was) gets a nondeterminism error, not a silent skip; replay with the
/// changed code reports the divergence, and with the code that ran agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_that_publishes_another_thing_in_a_recorded_place_is_nondeterminism() {
    use std::sync::atomic::AtomicU64;
    let (_d, path) = db();
    let wf = changing_publisher(Arc::new(AtomicU64::new(0)), true);
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("changing", Tally::default(), StartOptions::id("c")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("c", "go", 1u64).await.unwrap();
    let outcome = t.finished().await.unwrap();
    assert_ne!(outcome.status, ThreadStatus::Completed, "{outcome:?}");
    let error = format!("{:?}", outcome.error);
    assert!(error.contains("publication 1 of the task"), "{error}");
    assert!(error.contains("recorded run made Event") && error.contains("now Promise"), "{error}");

    // Replay: the code that ran its first run agrees; one that publishes otherwise diverges.
    let (_d2, path2) = db();
    let fixed = changing_publisher(Arc::new(AtomicU64::new(0)), false);
    let engine2 = open(&path2, &[&fixed], |b| b).await;
    let t2 = engine2.start_json("changing", Tally::default(), StartOptions::id("d")).await;
    let t2 = t2.unwrap();
    assert_eq!(t2.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine2.signal("d", "go", 1u64).await.unwrap();
    assert_eq!(t2.finished().await.unwrap().status, ThreadStatus::Completed);
    let same = changing_publisher(Arc::new(AtomicU64::new(0)), false);
    let options = ReplayOptions { workflow: Some(same.erase()), ..ReplayOptions::default() };
    assert_eq!(engine2.replay("d", &options).await.unwrap().divergence, None);
    let changed = changing_publisher(Arc::new(AtomicU64::new(1)), true);
    let options = ReplayOptions { workflow: Some(changed.erase()), ..ReplayOptions::default() };
    let d = engine2.replay("d", &options).await.unwrap().divergence;
    assert!(format!("{d:?}").contains("publishes Promise"), "{d:?}");
    engine.shutdown().await;
    engine2.shutdown().await;
}
