//! The typed start (`Engine::start(&workflow, state, options)`): its handle's output, outcome,
//! signals and queries are of the workflow's types with nothing to name; a start of a workflow
//! not registered (or of another version than registered) gets the error a start by name gets.
//! Wrong types do not compile: doc tests of `Engine::start` and `ThreadHandle::signal`.

use cairn::dsl::{Ctx, END, NodeOutput, QueryDef, Replace, START, SignalDef, Workflow};
use cairn::{Error, StartOptions, ThreadStatus};

use crate::common::db;

const ADD: SignalDef<u64> = SignalDef::new("add");
const PLUS: QueryDef<u64, u64> = QueryDef::new("plus");

/// `counter` at `version`: waits for one `add`, adds it to the state and ends.
fn counter(version: u32) -> Workflow<Replace<u64>> {
    Workflow::<Replace<u64>>::builder("counter", version)
        .node("add", |s: std::sync::Arc<Replace<u64>>, ctx: Ctx| async move {
            let n = ctx.recv(ADD).await?;
            Ok(NodeOutput::update(s.0 + n))
        })
        .edge(START, "add")
        .edge("add", END)
        .signal(ADD)
        .query(PLUS, |s: &Replace<u64>, n: u64| s.0 + n)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_start_signals_queries_and_returns_the_state_type() {
    let (_dir, path) = db();
    let wf = counter(1);
    let engine = cairn::Engine::builder(&path).workflow(&wf).open().await.unwrap();
    let t = engine.start(&wf, Replace(40), StartOptions::id("c1")).await.unwrap();
    let parked = t.wait().await.unwrap();
    assert_eq!(parked.status, ThreadStatus::WaitingInput);
    assert_eq!(t.query(PLUS, 1).await.unwrap(), 41_u64);
    assert_eq!(t.signal(ADD, 2).await.unwrap(), 1, "the first signal in its inbox");
    let Replace(out) = t.output().await.unwrap();
    assert_eq!(out, 42);
    let outcome = t.finished().await.unwrap();
    assert_eq!((outcome.status, outcome.output), (ThreadStatus::Completed, Some(Replace(42))));

    // A handle found by id, typed by the workflow; the untyped one reads the same as JSON.
    let again = engine.thread_of(&wf, "c1").await.unwrap();
    assert_eq!(again.output().await.unwrap(), Replace(42));
    assert_eq!(again.untyped().output::<u64>().await.unwrap(), 42);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_typed_start_of_a_workflow_not_registered_is_refused_as_a_start_by_name_is() {
    let (_dir, path) = db();
    let engine = cairn::Engine::builder(&path).workflow(&counter(1)).open().await.unwrap();
    // Version 2 is not registered: the error names what is, as `start_json` at version 2 does.
    let typed = engine.start(&counter(2), Replace(0), StartOptions::id("v2")).await.unwrap_err();
    let by_name = StartOptions { version: Some(2), ..StartOptions::id("v2") };
    let named = engine.start_json("counter", 0, by_name).await.unwrap_err();
    assert!(matches!(typed, Error::UnknownWorkflow { version: Some(2), .. }), "{typed}");
    assert_eq!(typed.to_string(), named.to_string());
    // Not registered at all.
    let other = one_node("other");
    let typed = engine.start(&other, Replace(0), StartOptions::id("o")).await.unwrap_err();
    let named = engine.start_json("other", 0, StartOptions::id("o")).await.unwrap_err();
    assert!(matches!(typed, Error::UnknownWorkflow { .. }), "{typed}");
    assert_eq!(typed.to_string().replace("other v1", "other"), named.to_string());
    // Registered under the same id and version, another graph: not this workflow's type.
    let renamed = one_node("counter");
    let e = engine.start(&renamed, Replace(0), StartOptions::id("r")).await.unwrap_err();
    assert!(matches!(&e, Error::Invalid(m) if m.contains("is not this one")), "{e}");
    // An options version that contradicts the workflow's.
    let by_version = StartOptions { version: Some(3), ..StartOptions::id("x") };
    let e = engine.start(&counter(1), Replace(0), by_version).await.unwrap_err();
    assert!(matches!(&e, Error::Invalid(m) if m.contains("names version")), "{e}");
    // Nothing was started by the refused starts.
    for id in ["v2", "o", "r", "x"] {
        assert!(matches!(engine.thread(id).await, Err(Error::UnknownThread(_))), "{id}");
    }
    // A thread of another workflow is not handed out typed as this one.
    let t = engine.start(&counter(1), Replace(0), StartOptions::id("c")).await.unwrap();
    t.wait().await.unwrap();
    let e = engine.thread_of(&counter(2), "c").await.unwrap_err();
    assert!(matches!(&e, Error::Invalid(m) if m.contains("runs workflow counter v1")), "{e}");
    engine.shutdown().await;
}

/// A workflow `id` at version 1 of one node that keeps its state.
fn one_node(id: &str) -> Workflow<Replace<u64>> {
    Workflow::<Replace<u64>>::builder(id, 1)
        .node(
            "n",
            |s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0)) },
        )
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn typed_start_many_and_create_check_the_workflow_as_start_does() {
    let (_dir, path) = db();
    let wf = one_node("keep");
    let engine = cairn::Engine::builder(&path).workflow(&wf).open().await.unwrap();
    // A batch of typed starts: each handle's output is the state type.
    let starts = (0..3).map(|n| (Replace(n), StartOptions::id(format!("k{n}"))));
    let handles = engine.start_many(&wf, starts).await.unwrap();
    assert_eq!(handles[2].output().await.unwrap(), Replace(2));
    // Another graph under the same id and version: refused before anything is written, the
    // whole batch and a create alike.
    let renamed = Workflow::<Replace<u64>>::builder("keep", 1)
        .node(
            "m",
            |s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0)) },
        )
        .edge(START, "m")
        .edge("m", END)
        .build()
        .unwrap();
    let batch = vec![(Replace(0), StartOptions::id("b0")), (Replace(1), StartOptions::id("b1"))];
    let e = engine.start_many(&renamed, batch).await.expect_err("refused");
    assert!(matches!(&e, Error::Invalid(m) if m.contains("is not this one")), "{e}");
    let e =
        engine.create(&renamed, Replace(0), StartOptions::id("c0")).await.err().expect("refused");
    assert!(matches!(&e, Error::Invalid(m) if m.contains("is not this one")), "{e}");
    for id in ["b0", "b1", "c0"] {
        assert!(matches!(engine.thread(id).await, Err(Error::UnknownThread(_))), "{id}");
    }
    // A typed create writes the thread and hands back a typed handle.
    let made = engine.create(&wf, Replace(9), StartOptions::id("c1")).await.unwrap();
    assert!(made.created);
    assert_eq!(made.thread.id().as_str(), "c1");
    engine.shutdown().await;
}
