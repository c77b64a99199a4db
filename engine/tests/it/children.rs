//! Children started at run time (`ctx.start_child`): started, joined and left to run; listed by
//! `started_children_of`; the same on replay; clear refusals for an unknown workflow, a bad
//! input and a handle joined twice; the cancel policy at the parent's end.

use std::sync::Arc;

use cairn::dsl::{ChildHandle, Ctx, NodeError, NodeOutput, ParentClose, Replace, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

use crate::common::db;

type Num = Replace<u64>;

/// A child that doubles its number.
pub(crate) fn double() -> Workflow<Num> {
    Workflow::<Num>::builder("double", 1)
        .node("x2", |s: Arc<Num>, _ctx: Ctx| async move { Ok(NodeOutput::update(s.0 * 2)) })
        .edge(START, "x2")
        .edge("x2", END)
        .build()
        .unwrap()
}

/// A parent that starts `double` on `inputs[0]` and `inputs[1]`, joins both, leaves a third
/// child on `inputs[2]` to run, and ends with the joined sum.
pub(crate) fn fan(child: &Workflow<Num>, inputs: [u64; 3]) -> Workflow<Num> {
    let child = child.clone();
    Workflow::<Num>::builder("fan", 1)
        .node("spawn", move |_s: Arc<Num>, ctx: Ctx| {
            let child = child.clone();
            async move {
                let a = ctx.start_child(&child, Replace(inputs[0])).await?;
                let b = ctx.start_child(&child, Replace(inputs[1])).await?;
                let _left = ctx.start_child(&child, Replace(inputs[2])).await?;
                let outs: Vec<u64> = ctx.join_children([a, b]).await?;
                Ok(NodeOutput::update(outs.iter().sum::<u64>()))
            }
        })
        .edge(START, "spawn")
        .edge("spawn", END)
        .build()
        .unwrap()
}

/// Waits until every child `parent` started has ended, and returns their records.
pub(crate) async fn children_ended(
    engine: &Engine,
    parent: &str,
) -> Vec<cairn::storage::ThreadRecord> {
    let parent = cairn::ThreadId::new(parent).unwrap();
    let store = engine.store().as_ref();
    for child in cairn::admin::started_children_of(store, &parent).await.unwrap() {
        let h = engine.thread(child.id.as_str()).await.unwrap();
        h.finished().await.unwrap();
    }
    cairn::admin::started_children_of(store, &parent).await.unwrap()
}

#[tokio::test]
async fn a_node_starts_joins_and_leaves_children() {
    let (_dir, path) = db();
    let child = double();
    let wf = fan(&child, [1, 2, 5]);
    let engine = Engine::builder(&path).workflow(&wf).workflow(&child).open().await.unwrap();
    let h = engine.start(&wf, Replace(0), StartOptions::id("p")).await.unwrap();
    assert_eq!(h.output().await.unwrap(), Replace(6));
    let children = children_ended(&engine, "p").await;
    let mut ids: Vec<_> = children.iter().map(|c| c.id.to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["p/spawn@1/child-1", "p/spawn@1/child-2", "p/spawn@1/child-3"]);
    assert!(children.iter().all(|c| c.status == ThreadStatus::Completed));
    let left = engine.thread("p/spawn@1/child-3").await.unwrap();
    assert_eq!(left.output::<u64>().await.unwrap(), 10);
    // The children started at run time are not sub-workflow children.
    let p = cairn::ThreadId::new("p").unwrap();
    assert!(cairn::admin::children_of(engine.store().as_ref(), &p).await.unwrap().is_empty());

    let report = engine.replay("p", &ReplayOptions::default()).await.unwrap();
    assert!(report.divergence.is_none(), "{:?}", report.divergence);
    // A node that starts another child there on replay diverges.
    let changed = fan(&child, [1, 3, 5]);
    let options = ReplayOptions { workflow: Some(changed.erase()), ..ReplayOptions::default() };
    let report = engine.replay("p", &options).await.unwrap();
    let d = report.divergence.expect("another child input is a divergence");
    assert!(format!("{d:?}").contains("another input"), "{d:?}");
    engine.shutdown().await;
}

/// A parent whose node runs `body` on the child workflow, ending with 0.
fn parent_of<F, Fut>(child: &Workflow<Num>, body: F) -> Workflow<Num>
where
    F: Fn(Ctx, Workflow<Num>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), NodeError>> + Send + 'static,
{
    parent_of_named("odd", child, body)
}

/// [`parent_of`], of the workflow id `id`.
fn parent_of_named<F, Fut>(id: &str, child: &Workflow<Num>, body: F) -> Workflow<Num>
where
    F: Fn(Ctx, Workflow<Num>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), NodeError>> + Send + 'static,
{
    let (child, body) = (child.clone(), Arc::new(body));
    Workflow::<Num>::builder(id, 1)
        .node("go", move |_s: Arc<Num>, ctx: Ctx| {
            let (child, body) = (child.clone(), body.clone());
            async move {
                body(ctx, child).await?;
                Ok(NodeOutput::update(0))
            }
        })
        .edge(START, "go")
        .edge("go", END)
        .build()
        .unwrap()
}

/// The error the thread `wf` failed with.
async fn failure(engine: &Engine, wf: &Workflow<Num>, id: &str) -> String {
    let h = engine.start(wf, Replace(0), StartOptions::id(id)).await.unwrap();
    let outcome = h.finished().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Failed, "{outcome:?}");
    outcome.error.unwrap_or_default()
}

#[tokio::test]
async fn bad_child_starts_and_joins_are_refused_clearly() {
    let (_dir, path) = db();
    let child = double();
    let unregistered = Workflow::<Num>::builder("nowhere", 1)
        .node("n", |_s: Arc<Num>, _ctx: Ctx| async move { Ok(NodeOutput::update(1)) })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap();
    let unknown = parent_of(&unregistered, |ctx, wf| async move {
        ctx.start_child(&wf, Replace(1)).await.map(drop)
    });
    // A workflow of the same id as `double` whose state is not `double`'s.
    let mistyped = Workflow::<Replace<String>>::builder("double", 1)
        .node("x2", |_s: Arc<Replace<String>>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(String::new()))
        })
        .edge(START, "x2")
        .edge("x2", END)
        .build()
        .unwrap();
    let engine = Engine::builder(&path).workflow(&child).workflow(&unknown).open().await.unwrap();
    let e = failure(&engine, &unknown, "u").await;
    assert!(e.contains("nowhere") && e.contains("not started"), "{e}");
    engine.shutdown().await;
    drop(engine);

    let bad_input = parent_of_named("bad_input", &child, move |ctx, _wf| {
        let mistyped = mistyped.clone();
        async move { ctx.start_child(&mistyped, Replace("x".to_owned())).await.map(drop) }
    });
    let twice = Workflow::<Num>::builder("twice", 1)
        .node("go", move |_s: Arc<Num>, ctx: Ctx| {
            let child = double();
            async move {
                let h = ctx.start_child(&child, Replace(1)).await?;
                let again = ChildHandle::<Num>::from_id(h.id());
                let _: u64 = ctx.join_child(h).await?;
                let _: u64 = ctx.join_child(again).await?;
                Ok(NodeOutput::update(0))
            }
        })
        .edge(START, "go")
        .edge("go", END)
        .build()
        .unwrap();
    let engine = Engine::builder(&path)
        .workflow(&child)
        .workflow(&bad_input)
        .workflow(&twice)
        .open()
        .await
        .unwrap();
    let e = failure(&engine, &bad_input, "b").await;
    assert!(e.contains("not started") && e.contains("state"), "{e}");
    let b = cairn::ThreadId::new("b").unwrap();
    let none = cairn::admin::started_children_of(engine.store().as_ref(), &b).await.unwrap();
    assert!(none.is_empty(), "a refused start creates nothing: {none:?}");
    let e = failure(&engine, &twice, "t").await;
    assert!(e.contains("joined twice"), "{e}");
    engine.shutdown().await;
}

#[tokio::test]
async fn a_child_started_to_cancel_is_cancelled_when_its_parent_ends() {
    let (_dir, path) = db();
    // A child that waits for a signal that never comes.
    let waiter = Workflow::<Num>::builder("waiter", 1)
        .node("wait", |_s: Arc<Num>, ctx: Ctx| async move {
            let v: u64 = ctx.recv("never").await?;
            Ok(NodeOutput::update(v))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap();
    let wf = parent_of(&waiter, |ctx, wf| async move {
        ctx.start_child_with(&wf, Replace(1), ParentClose::Cancel).await?;
        ctx.start_child(&wf, Replace(2)).await.map(drop)
    });
    let engine = Engine::builder(&path).workflow(&waiter).workflow(&wf).open().await.unwrap();
    let h = engine.start(&wf, Replace(0), StartOptions::id("c")).await.unwrap();
    h.output().await.unwrap();
    let cancelled = engine.thread("c/go@1/child-1").await.unwrap();
    assert_eq!(cancelled.finished().await.unwrap().status, ThreadStatus::Cancelled);
    let abandoned = engine.thread("c/go@1/child-2").await.unwrap();
    assert!(!abandoned.status().await.unwrap().is_terminal(), "an abandoned child runs on");
    engine.shutdown().await;
}
