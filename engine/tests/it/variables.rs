//! Variables with a type and metadata, through the engine: they survive restore (a reopened
//! engine, a checkpoint and its tail), a fork (whose update is checked against the types), and
//! a sub-workflow, which inherits the global and thread variables whole and hands back its
//! globals whole.

use std::sync::Arc;

use cairn::dsl::{
    Ctx, NodeOutput, RejectedWrite, Scope, VarOp, VarType, VarUpdate, Variable, Variables, Workflow,
};
use cairn::storage::{Page, ThreadFilter};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::debug::{ForkFrom, ForkOptions};
use serde_json::json;

use crate::common::{db, open};

fn child() -> Workflow<Variables> {
    Workflow::<Variables>::builder("experiment", 1)
        .node("probe", |vars: Arc<Variables>, _ctx: Ctx| async move {
            // What the child inherited, as it sees it.
            let saw: Vec<_> = vars
                .iter()
                .map(|(name, v)| json!({"name": name, "type": v.ty, "meta": v.metadata}))
                .collect();
            let found =
                Variable::new(27.5, Scope::Global).of_type(VarType::Number).meta("by", "probe");
            Ok(NodeOutput::update(VarUpdate::Batch(vec![
                vars.define("found", found)?,
                vars.set("child_saw", saw, Scope::Global)?,
                // Not a number: refused by apply (the builder would refuse it too).
                VarUpdate::Set {
                    name: "budget".into(),
                    value: json!("lots"),
                    scope: Scope::Global,
                },
            ])))
        })
        .edge(START, "probe")
        .edge("probe", END)
        .build()
        .unwrap()
}

fn session() -> Workflow<Variables> {
    Workflow::<Variables>::builder("session", 1)
        .node("setup", |vars: Arc<Variables>, _ctx: Ctx| async move {
            let budget =
                Variable::new(5000, Scope::Global).of_type(VarType::Number).meta("unit", "tokens");
            let topic = Variable::new("rust", Scope::Thread)
                .of_type(VarType::String)
                .meta("source", "user");
            let model = Variable::new("small", Scope::Global).of_type(VarType::String).read_only();
            Ok(NodeOutput::update(VarUpdate::Batch(vec![
                vars.define("budget", budget)?,
                vars.define("topic", topic)?,
                vars.define("model", model)?,
                vars.set("scratch", 1, Scope::Subgraph)?,
            ])))
        })
        .subgraph(
            "experiment",
            child(),
            |vars: &Variables| vars.for_subgraph(),
            |done: &Variables| done.export_scope(Scope::Global),
        )
        .node("ask", |vars: Arc<Variables>, ctx: Ctx| async move {
            let go: bool = ctx.interrupt("go on?")?;
            Ok(NodeOutput::update(vars.set("went_on", go, Scope::Thread)?))
        })
        .edge(START, "setup")
        .edge("setup", "experiment")
        .edge("experiment", "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

async fn vars_at(engine: &Engine, thread: &str, seq: Option<u64>) -> Variables {
    serde_json::from_value(
        cairn_tools::Operator::new(engine).state_at(thread, seq).await.unwrap().state,
    )
    .unwrap()
}

/// Asserts the variables `setup` defined and the sub-workflow handed back, whole.
fn check(vars: &Variables) {
    let budget = vars.variable("budget").unwrap();
    assert_eq!((budget.ty, &budget.value), (VarType::Number, &json!(5000)));
    assert_eq!(budget.metadata["unit"], json!("tokens"));
    let topic = vars.variable("topic").unwrap();
    assert_eq!(
        (topic.ty, topic.scope, &topic.metadata["source"]),
        (VarType::String, Scope::Thread, &json!("user"))
    );
    assert!(vars.variable("model").unwrap().read_only);
    let found = vars.variable("found").unwrap();
    assert_eq!((found.ty, &found.metadata["by"]), (VarType::Number, &json!("probe")));
    // The child inherited global and thread variables with their types and metadata, not the
    // subgraph-scoped one.
    let saw = vars.get("child_saw").unwrap();
    assert_eq!(
        saw,
        &json!([
            {"name": "budget", "type": "number", "meta": {"unit": "tokens"}},
            {"name": "model", "type": "string", "meta": {}},
            {"name": "topic", "type": "string", "meta": {"source": "user"}},
        ])
    );
}

#[tokio::test]
async fn typed_variables_survive_restore_fork_and_sub_workflow_scopes() {
    let (_d, path) = db();
    let wf = session();
    let engine = open(&path, &[&wf], |b| b.checkpoint_every(Some(2), None)).await;
    let t = engine.start_json("session", Variables::new(), StartOptions::id("v")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let live = vars_at(&engine, "v", None).await;
    check(&live);
    // The child's refused write never reached the parent; the child recorded it.
    assert!(live.rejected().is_empty());
    let filter = ThreadFilter { workflow_id: Some("experiment".into()), ..Default::default() };
    let children = engine.store().list_threads(&filter, Page::default()).wait().unwrap();
    let [child] = &children[..] else { panic!("{children:?}") };
    let in_child = vars_at(&engine, child.id.as_str(), None).await;
    assert_eq!(in_child.rejected(), [RejectedWrite { name: "budget".into(), op: VarOp::Set }]);
    assert!(in_child.get("scratch").is_none());
    let seq = cairn_tools::Operator::new(&engine).state_at("v", None).await.unwrap().seq;
    engine.shutdown().await;
    drop((t, engine));

    // Restore: a reopened engine rebuilds the same variables from checkpoint + tail, at every
    // seq from the one after setup on.
    let engine = open(&path, &[&wf], |b| b.checkpoint_every(Some(2), None)).await;
    assert_eq!(vars_at(&engine, "v", None).await, live);
    assert_eq!(vars_at(&engine, "v", Some(seq)).await, live);

    // A fork starts from them; its update is held to the declared type.
    let wrong =
        VarUpdate::Set { name: "budget".into(), value: json!("lots"), scope: Scope::Global };
    let opts = ForkOptions { start: false, ..ForkOptions::id("f1").update(wrong) };
    cairn_tools::Operator::new(&engine).fork("v", ForkFrom::Seq(seq), opts).await.unwrap();
    let forked = vars_at(&engine, "f1", None).await;
    check(&forked);
    assert_eq!(forked.rejected().len(), 1, "{:?}", forked.rejected());
    let raise = forked.set("budget", 9000, Scope::Global).unwrap();
    let opts = ForkOptions { start: false, ..ForkOptions::id("f2").update(raise) };
    cairn_tools::Operator::new(&engine).fork("v", ForkFrom::Seq(seq), opts).await.unwrap();
    let raised = vars_at(&engine, "f2", None).await;
    let budget = raised.variable("budget").unwrap();
    assert_eq!(
        (&budget.value, budget.ty, &budget.metadata["unit"]),
        (&json!(9000), VarType::Number, &json!("tokens"))
    );

    // The original goes on with them.
    let t = engine.thread("v").await.unwrap();
    engine.send_input("v", true).await.unwrap();
    let out: Variables =
        serde_json::from_value(t.finished().await.unwrap().output.unwrap()).unwrap();
    check(&out);
    assert_eq!(out.get("went_on"), Some(&json!(true)));
    engine.shutdown().await;
}
