//! Updates (`Engine::update`, `docs/updates.md`): a validated call into a thread that changes
//! its state and answers the caller. Applied to a thread parked in `ctx.recv` (which still
//! receives its signal after) and to a running one at its next step boundary; refused with
//! nothing written (unknown name, bad arguments, the validator, a finished thread); an id
//! applied once; replay, `state_at` and a fork agree with the live run; update-with-start; and
//! a crash at any write of the path neither loses nor doubles the update.

use std::sync::Arc;

use cairn::blocking::decode;
use cairn::dsl::{Ctx, NodeOutput, UpdateDef, UpdateError, Workflow};
use cairn::replay::ReplayOptions;
use cairn::storage::{Seq, ThreadId};
use cairn::{END, Engine, Error, START, StartOptions, ThreadStatus, UpdateOptions};
use cairn_tools::Operator;
use cairn_tools::debug::{ForkFrom, ForkOptions};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

/// Adds its argument to the total, noting it; refuses 0. Replies with the new total.
pub(crate) const ADD: UpdateDef<u64, u64> = UpdateDef::new("add");

/// A workflow of `Tally` with the `add` update.
fn with_add(b: cairn::dsl::WorkflowBuilder<Tally>) -> Workflow<Tally> {
    b.update(
        ADD,
        |_s: &Tally, by: &u64| if *by == 0 { Err("add at least 1".into()) } else { Ok(()) },
        |s: &mut Tally, by: u64| {
            s.total += by;
            s.log.push(format!("update {by}"));
            Ok(s.total)
        },
    )
    .build()
    .unwrap()
}

/// Waits for the signal `go` in `ctx.recv`, then adds it: a thread that parks.
pub(crate) fn parked() -> Workflow<Tally> {
    with_add(
        Workflow::<Tally>::builder("parked", 1)
            .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
                let n: u64 = ctx.recv("go").await?;
                Ok(NodeOutput::update((n, format!("got {n}"))))
            })
            .edge(START, "wait")
            .edge("wait", END),
    )
}

/// Ticks (20 ms a step) until the total reaches 100: only an update gets it there.
fn ticking() -> Workflow<Tally> {
    with_add(
        Workflow::<Tally>::builder("ticking", 1)
            .node("tick", |_s: Arc<Tally>, _ctx: Ctx| async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                Ok(NodeOutput::update((0, String::new())))
            })
            .edge(START, "tick")
            .route("tick", |s: &Tally| if s.total >= 100 { END } else { "tick" }, ["tick", END])
            .loop_bound("tick", 1_000),
    )
}

/// The `update_applied` events of `thread`, as (id, reply).
fn applied(engine: &Engine, thread: &str) -> Vec<(String, serde_json::Value)> {
    let id = ThreadId::new(thread).unwrap();
    let store = engine.store();
    let last = store.last_bookmark(&id).wait().unwrap().map_or(0, |b| b.seq.0);
    let mut out = Vec::new();
    for event in store.read_range(&id, Seq(1), Seq(last)).wait().unwrap() {
        if let cairn::event::Body::UpdateApplied { id, reply, .. } =
            decode(store.as_ref(), event).unwrap().body
        {
            out.push((id, reply));
        }
    }
    out
}

fn last_seq(engine: &Engine, thread: &str) -> u64 {
    let id = ThreadId::new(thread).unwrap();
    engine.store().last_bookmark(&id).wait().unwrap().map_or(0, |b| b.seq.0)
}

#[tokio::test]
async fn an_update_to_a_thread_parked_in_recv_changes_its_state_and_it_still_takes_its_signal() {
    let (_d, path) = db();
    let wf = parked();
    let engine = open(&path, &[&wf], |b| b.seed(5)).await;
    let t = engine.start(&wf, Tally::default(), StartOptions::id("p1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let done = engine.update("p1", "add", 5u64, UpdateOptions::id("u-1")).await.unwrap();
    assert_eq!((done.reply.clone(), done.duplicate, done.id.as_str()), (5.into(), false, "u-1"));
    assert_eq!(done.seq, last_seq(&engine, "p1"), "the reply's event is the last one");
    // Still waiting for its signal, with the new state.
    let record = engine.thread("p1").await.unwrap().wait().await.unwrap();
    assert_eq!(record.status, ThreadStatus::WaitingInput, "back in its wait");
    let view = Operator::new(&engine).state_at("p1", None).await.unwrap();
    assert_eq!(view.state["total"], 5);
    // The typed form, on the handle.
    let total: u64 = t.update(ADD, 2).await.unwrap();
    assert_eq!(total, 7);
    engine.signal("p1", "go", 1u64).await.unwrap();
    let out = t.output().await.unwrap();
    assert_eq!(out.total, 8, "{out:?}");
    assert_eq!(out.log, ["update 5", "update 2", "got 1"]);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_running_thread_takes_an_update_at_its_next_step_boundary() {
    let (_d, path) = db();
    let wf = ticking();
    let engine = open(&path, &[&wf], |b| b.seed(5)).await;
    let t = engine.start(&wf, Tally::default(), StartOptions::id("r1")).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let done = engine.update("r1", "add", 100u64, UpdateOptions::default()).await.unwrap();
    assert_eq!(done.reply, 100);
    assert!(!done.id.is_empty(), "a generated id");
    let out = t.output().await.unwrap();
    assert_eq!((out.total, out.log.clone()), (100, vec!["update 100".to_owned()]));
    let report = engine.replay("r1", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
}

#[tokio::test]
async fn refused_updates_write_nothing_and_say_why() {
    let (_d, path) = db();
    let wf = parked();
    let engine = open(&path, &[&wf], |b| b.seed(5)).await;
    let t = engine.start(&wf, Tally::default(), StartOptions::id("n1")).await.unwrap();
    t.wait().await.unwrap();
    let before = last_seq(&engine, "n1");
    let refused = |r: Result<cairn::Updated, Error>| match r {
        Err(Error::UpdateRefused { source, .. }) => source,
        other => panic!("refused, not {other:?}"),
    };
    let zero = refused(engine.update("n1", "add", 0u64, UpdateOptions::default()).await);
    assert!(matches!(&zero, UpdateError::Refused { message, .. } if message == "add at least 1"));
    let unknown = refused(engine.update("n1", "nope", 1u64, UpdateOptions::default()).await);
    assert!(matches!(&unknown, UpdateError::Unknown { declared, .. } if declared == &["add"]));
    assert!(unknown.to_string().contains("has no update \"nope\""), "{unknown}");
    let bad = refused(engine.update("n1", "add", "five", UpdateOptions::default()).await);
    assert!(matches!(&bad, UpdateError::Codec { what: "arguments", .. }), "{bad}");
    let no_id = engine.update("n1", "add", 1u64, UpdateOptions::id("")).await;
    assert!(matches!(no_id, Err(Error::Invalid(_))), "{no_id:?}");
    let missing = engine.update("nobody", "add", 1u64, UpdateOptions::default()).await;
    assert!(matches!(missing, Err(Error::UnknownThread(_))), "{missing:?}");
    assert_eq!(last_seq(&engine, "n1"), before, "nothing written");
    assert!(applied(&engine, "n1").is_empty());
    // A finished thread takes no more updates, but an id it applied still answers.
    engine.update("n1", "add", 3u64, UpdateOptions::id("early")).await.unwrap();
    engine.signal("n1", "go", 1u64).await.unwrap();
    assert_eq!(t.output().await.unwrap().total, 4);
    let late = engine.update("n1", "add", 1u64, UpdateOptions::id("late")).await;
    assert!(matches!(late, Err(Error::WrongStatus { status: ThreadStatus::Completed, .. })));
    let early = engine.update("n1", "add", 3u64, UpdateOptions::id("early")).await.unwrap();
    assert_eq!((early.reply, early.duplicate), (3.into(), true));
    engine.shutdown().await;
}

#[tokio::test]
async fn an_id_is_applied_once_across_a_restart() {
    let (_d, path) = db();
    let wf = parked();
    let engine = open(&path, &[&wf], |b| b.seed(5)).await;
    let t = engine.start(&wf, Tally::default(), StartOptions::id("i1")).await.unwrap();
    t.wait().await.unwrap();
    let first = engine.update("i1", "add", 5u64, UpdateOptions::id("k")).await.unwrap();
    let again = engine.update("i1", "add", 5u64, UpdateOptions::id("k")).await.unwrap();
    assert_eq!((first.duplicate, again.duplicate), (false, true));
    assert_eq!((&again.reply, again.seq), (&first.reply, first.seq), "the recorded reply");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b.seed(5)).await;
    let after = engine.update("i1", "add", 5u64, UpdateOptions::id("k")).await.unwrap();
    assert_eq!((after.reply, after.duplicate), (5.into(), true), "kept across the restart");
    assert_eq!(applied(&engine, "i1").len(), 1);
    let view = Operator::new(&engine).state_at("i1", None).await.unwrap();
    assert_eq!(view.state["total"], 5, "applied once");
    engine.shutdown().await;
}

#[tokio::test]
async fn replay_state_at_and_a_fork_agree_with_the_live_run() {
    let (_d, path) = db();
    let wf = parked();
    let engine = open(&path, &[&wf], |b| b.seed(5).checkpoint_every(Some(1), None)).await;
    let t = engine.start(&wf, Tally::default(), StartOptions::id("f1")).await.unwrap();
    t.wait().await.unwrap();
    let done = engine.update("f1", "add", 6u64, UpdateOptions::id("u")).await.unwrap();
    engine.signal("f1", "go", 1u64).await.unwrap();
    let out = t.output().await.unwrap();
    assert_eq!(out.total, 7);
    let op = Operator::new(&engine);
    let before = op.state_at("f1", Some(done.seq - 1)).await.unwrap();
    let at = op.state_at("f1", Some(done.seq)).await.unwrap();
    assert_eq!((before.state["total"].clone(), at.state["total"].clone()), (0.into(), 6.into()));
    assert_eq!(at.meta.updates.get("u"), Some(&done.seq), "the id is folded");
    let report = engine.replay("f1", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    // A fork from the update's seq starts from its state and takes its signal.
    let fork = op.fork("f1", ForkFrom::Seq(done.seq), ForkOptions::id("f1-b")).await.unwrap();
    engine.signal("f1-b", "go", 2u64).await.unwrap();
    fork.finished().await.unwrap();
    let forked = op.state_at("f1-b", None).await.unwrap();
    assert_eq!(forked.state["total"], 8, "{:?}", forked.state);
    engine.shutdown().await;
}

#[tokio::test]
async fn update_with_start_creates_an_absent_thread_and_updates_an_existing_one() {
    let (_d, path) = db();
    let wf = parked();
    let engine = open(&path, &[&wf], |b| b.seed(5)).await;
    let call = |engine: Engine| async move {
        let options = StartOptions::id("s1");
        engine
            .update_with_start(
                "parked",
                Tally::default(),
                options,
                "add",
                4u64,
                UpdateOptions::id("k"),
            )
            .await
    };
    let first = call(engine.clone()).await.unwrap();
    assert!(first.created && !first.updated.duplicate, "{first:?}");
    assert_eq!(first.updated.reply, 4);
    let again = call(engine.clone()).await.unwrap();
    assert!(!again.created && again.updated.duplicate, "{again:?}");
    engine.signal("s1", "go", 1u64).await.unwrap();
    let out: Tally = engine.thread("s1").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, ["update 4", "got 1"]);
    let none = engine
        .update_with_start(
            "parked",
            Tally::default(),
            StartOptions::default(),
            "add",
            1u64,
            UpdateOptions::default(),
        )
        .await;
    assert!(matches!(none, Err(Error::Invalid(_))), "an id is needed");
    engine.shutdown().await;
}

/// The store dies at each write in turn around an update-with-start (and the signal after it);
/// the caller retries with the same ids on the reopened engine: the update is applied once, its
/// reply is the same, and the thread ends with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_an_update_neither_loses_nor_doubles_it() {
    let secs = std::time::Duration::from_secs(10);
    let wf = parked();
    let call = async |engine: &Engine| {
        let options = StartOptions::id("w1");
        let update = UpdateOptions::id("k");
        let done = engine
            .update_with_start("parked", Tally::default(), options, "add", 4u64, update)
            .await?;
        engine.signal_once("w1", "go", 1u64, "go-1").await?;
        Ok::<_, Error>(done.updated)
    };
    let run = async |engine: &Engine, _: &()| {
        call(engine).await?;
        engine.thread("w1").await?.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &(), crash_after: i64| {
        // The caller saw a failure (or nothing): it sends again.
        let reply = match call(engine).await {
            Ok(updated) => updated.reply,
            // Finished already: the update and the signal were stored before the crash.
            Err(Error::WrongStatus { .. }) => {
                let again = engine.update("w1", "add", 4u64, UpdateOptions::id("k")).await;
                again.unwrap_or_else(|e| panic!("crash_after {crash_after}: {e}")).reply
            }
            Err(e) => panic!("crash_after {crash_after}: {e}"),
        };
        assert_eq!(reply, 4, "crash_after {crash_after}: the same reply");
        let t = engine.thread("w1").await.unwrap();
        let done = tokio::time::timeout(secs, t.finished()).await;
        let status = done.unwrap_or_else(|_| panic!("crash_after {crash_after}: not finished"));
        assert_eq!(status.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let updates = applied(engine, "w1");
        assert_eq!(updates, [("k".to_owned(), 4.into())], "crash_after {crash_after}: once");
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, ["update 4", "got 1"], "crash_after {crash_after}");
    };
    let crashes = every_write(100, || (), |b, _| b.workflow(&wf), run, check).await;
    assert!(crashes >= 3, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY update_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// `POST /api/threads/{id}/updates/{name}`: the reply; the same id again is a duplicate; an
/// unknown name a 404 naming `name`; a refusal a 400 naming `args`; `start` creates the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_applies_an_update_and_names_what_it_refuses() {
    use crate::common::{call, serving};
    let (_d, path) = db();
    let (engine, server) = serving(&path, &parked()).await;
    let token = Some(server.token().to_owned());
    let post = |thread: &str, name: &str, body: &str| {
        let url =
            format!("http://{}/api/threads/{thread}/updates/{name}?wait_ms=5000", server.addr());
        call("POST", url, token.clone(), body.to_owned())
    };
    let (status, err) = post("h1", "add", r#"{"args": 2}"#).await;
    assert_eq!((status, err["field"].as_str()), (404, Some("thread")), "no thread h1 yet: {err}");
    let with_start = r#"{"args": 2, "id": "k",
        "start": {"workflow": "parked", "input": {"total": 0, "log": []}}}"#;
    let (status, done) = post("h1", "add", with_start).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (done["reply"].as_u64(), done["created"].as_bool()),
        (Some(2), Some(true)),
        "{done}"
    );
    let (status, again) = post("h1", "add", r#"{"args": 2, "id": "k"}"#).await;
    assert_eq!((status, again["duplicate"].as_bool()), (200, Some(true)), "{again}");
    assert_eq!(
        (again["seq"].clone(), again["reply"].clone()),
        (done["seq"].clone(), done["reply"].clone())
    );
    let (status, err) = post("h1", "nope", r#"{"args": 2}"#).await;
    assert_eq!((status, err["field"].as_str()), (404, Some("name")), "{err}");
    let (status, err) = post("h1", "add", r#"{"args": 0}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("args")), "{err}");
    assert!(err["error"].as_str().unwrap().contains("add at least 1"), "{err}");
    let (status, err) = post("h1", "add", r#"{"args": 1, "what": 2}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("what")), "{err}");
    assert_eq!(applied(&engine, "h1").len(), 1, "refusals wrote nothing");
    engine.signal("h1", "go", 1u64).await.unwrap();
    let out: Tally = engine.thread("h1").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, ["update 2", "got 1"]);
    let (status, err) = post("h1", "add", r#"{"args": 1}"#).await;
    assert_eq!(status, 409, "finished: {err}");
    server.shutdown().await;
    engine.shutdown().await;
}
