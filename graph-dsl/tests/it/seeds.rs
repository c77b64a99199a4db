//! Agent-runtime scenarios expressed in the DSL: skill pipelines (intent routing to skills that
//! report progress) and research phases (phases ending in human
//! confirmations, bounded clarification loops, experiments fanned out over variants), over the
//! variables state.

use std::sync::Arc;

use cairn_dsl::{
    Budgets, CheckpointPolicy, Ctx, END, NextTarget, NodeError, NodeOutput, NodePolicy, NodeResult,
    RetryPolicy, START, Scope, State, Target, VarUpdate, Variables, Workflow,
};
use futures::executor::block_on;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::ScriptedContext;

// ---- Intent -> skill pipeline ----------------------------------------------------

#[derive(Clone, Default, Serialize, Deserialize)]
struct Session {
    message: String,
    outline: Vec<String>,
    body: String,
    saved_to: Option<String>,
}

#[derive(Clone, Serialize, Deserialize)]
enum SessionUpdate {
    Outline(Vec<String>),
    Body(String),
    Saved(String),
}

impl State for Session {
    type Update = SessionUpdate;
    fn apply(&mut self, update: SessionUpdate) {
        match update {
            SessionUpdate::Outline(o) => self.outline = o,
            SessionUpdate::Body(b) => self.body = b,
            SessionUpdate::Saved(path) => self.saved_to = Some(path),
        }
    }
}

fn intent(s: &Session) -> &'static str {
    if s.message.contains("write") {
        "write_article"
    } else if s.message.contains("graph") {
        "update_graph"
    } else {
        "chat"
    }
}

async fn outline(s: Arc<Session>, ctx: Ctx) -> NodeResult<SessionUpdate> {
    ctx.progress(2, 4, "outlining");
    let outline: Vec<String> = ctx
        .tool("llm.outline", s.message.clone(), |topic: String, _t| async move {
            Ok(vec![format!("About {topic}")])
        })
        .await?;
    Ok(NodeOutput::update(SessionUpdate::Outline(outline)))
}

fn write_article_skill() -> Workflow<Session> {
    Workflow::builder("skill.write_article", 1)
        .node("build_context", |_s, ctx: Ctx| async move {
            ctx.progress(1, 4, "building context");
            Ok(NodeOutput::none())
        })
        .node("outline", outline)
        .node_with(
            "write",
            |s: Arc<Session>, ctx: Ctx| async move {
                ctx.progress(3, 4, "writing");
                Ok(NodeOutput::update(SessionUpdate::Body(s.outline.join("\n"))))
            },
            NodePolicy::default()
                .retry(
                    RetryPolicy::exponential(3, 1_000, 30_000)
                        .jitter(0.2)
                        .non_retryable("content_policy"),
                )
                .timeout_ms(120_000)
                .checkpoint_after(true),
        )
        .node("save", |_s, ctx: Ctx| async move {
            ctx.progress(4, 4, "saving");
            let path: String = ctx
                .call(
                    cairn_dsl::ToolCall::new("fs.write").permission("fs:write"),
                    "article.md".to_owned(),
                    |p: String, _t| async move { Ok(p) },
                )
                .await?;
            Ok(NodeOutput::update(SessionUpdate::Saved(path)))
        })
        .edge(START, "build_context")
        .edge("build_context", "outline")
        .edge("outline", "write")
        .edge("write", "save")
        .edge("save", END)
        .build()
        .expect("skill is valid")
}

fn agent_runtime() -> Workflow<Session> {
    Workflow::builder("agent_runtime", 1)
        .subgraph("write_article", write_article_skill(), Session::clone, |done: &Session| {
            SessionUpdate::Saved(done.saved_to.clone().unwrap_or_default())
        })
        .node("update_graph", |_s, _ctx| async { Ok(NodeOutput::none()) })
        .node("chat", |_s, _ctx| async { Ok(NodeOutput::none()) })
        .route(START, intent, ["write_article", "update_graph", "chat"])
        .edge("write_article", END)
        .edge("update_graph", END)
        .edge("chat", END)
        .budgets(Budgets::default().max_tokens(8_192).max_cost_micros(500_000))
        .permissions(["fs:write", "llm"])
        .checkpoint_every(CheckpointPolicy { every_steps: Some(5), every_ms: Some(60_000) })
        .build()
        .expect("agent runtime is valid")
}

#[test]
fn seed_001_intents_route_to_skill_pipelines() {
    let wf = agent_runtime().erase();
    let route = |message: &str| {
        let s = wf
            .state_from_json(
                &json!({ "message": message, "outline": [], "body": "", "saved_to": null }),
            )
            .unwrap();
        wf.start(&*s).unwrap()
    };
    assert_eq!(route("please write about cairns"), [NextTarget::Node(0)]);
    assert_eq!(route("update the knowledge graph"), [NextTarget::Node(1)]);
    assert_eq!(route("hello"), [NextTarget::Node(2)]);
    assert!(wf.entry().is_empty(), "START only routes");
    assert_eq!(wf.depth(), 1);
    assert!(wf.to_dot().contains("\"write_article/write\" -> \"write_article/save\";"));
}

#[test]
fn seed_001_skill_steps_report_progress_and_use_permitted_tools() {
    let skill = write_article_skill().erase();
    let s = skill
        .state_from_json(&json!({ "message": "rust", "outline": [], "body": "", "saved_to": null }))
        .unwrap();
    let (scripted, ctx) = ScriptedContext::new().ctx();
    let cairn_dsl::DynNodeKind::Task(outline) = &skill.nodes()[1].kind else { panic!("task") };
    let out = block_on(outline(&*s, ctx.clone())).unwrap();
    assert_eq!(out.update, Some(json!({ "Outline": ["About rust"] })));
    let cairn_dsl::DynNodeKind::Task(save) = &skill.nodes()[3].kind else { panic!("task") };
    block_on(save(&*s, ctx)).unwrap();
    assert_eq!(
        scripted.log(),
        [
            "progress 2/4 outlining",
            "tool llm.outline None \"rust\"",
            "progress 4/4 saving",
            "tool fs.write Some(\"fs:write\") \"article.md\"",
        ]
    );
}

// ---- Research phases with confirmations, over the variables state -------------------

#[derive(Deserialize)]
struct Confirmation {
    approved: bool,
}

/// A confirmation step: suspends until a human answers, then continues or goes back.
fn confirm(
    question: &'static str,
    forward: &'static str,
    back: &'static str,
) -> impl Fn(Arc<Variables>, Ctx) -> BoxFuture<'static, NodeResult<VarUpdate>> + Send + Sync + 'static
{
    move |vars, ctx| {
        Box::pin(async move {
            let prompt = json!({ "question": question, "context": vars.get("idea") });
            let answer: Confirmation = ctx.interrupt(prompt)?;
            let record =
                vars.set(format!("confirmed.{forward}"), answer.approved, Scope::Thread)?;
            Ok(NodeOutput::update(record).goto(if answer.approved { forward } else { back }))
        })
    }
}

fn research() -> Workflow<Variables> {
    let phase = || NodePolicy::default().phase(true);
    let flaky = || {
        NodePolicy::default()
            .retry(RetryPolicy::exponential(5, 2_000, 60_000).jitter(0.3).non_retryable("oom"))
            .timeout_ms(2 * 60 * 60 * 1_000)
            .tag("sandbox")
    };
    Workflow::builder("research_session", 1)
        .node("normalise_idea", |vars: Arc<Variables>, _ctx| async move {
            let idea = vars.get("idea").cloned().unwrap_or_default();
            Ok(NodeOutput::update(vars.set("normalised", idea, Scope::Thread)?))
        })
        .node("confirm_idea", confirm("Is this the idea?", "plan", "normalise_idea"))
        .node_with(
            "plan",
            |vars: Arc<Variables>, _ctx| async move {
                Ok(NodeOutput::update(vars.set(
                    "variants",
                    json!(["a", "b", "c"]),
                    Scope::Thread,
                )?))
            },
            phase(),
        )
        .node("confirm_plan", confirm("Run this plan?", "baseline", "plan"))
        .node_with(
            "baseline",
            |_v, ctx: Ctx| async move {
                ctx.lock("gpu", 3_600_000).await?;
                Ok(NodeOutput::none())
            },
            flaky().checkpoint_after(true),
        )
        .map_with(
            "variants",
            |vars: &Variables| {
                vars.get_as::<Vec<String>>("variants").ok().flatten().unwrap_or_default()
            },
            |vars: Arc<Variables>, ctx: Ctx| async move {
                let variant: String = ctx.item()?;
                Ok(NodeOutput::update(vars.set(
                    format!("result.{variant}"),
                    27.5,
                    Scope::Thread,
                )?))
            },
            flaky(),
        )
        .node_with("analyse", |_v, _ctx| async { Ok(NodeOutput::none()) }, phase())
        .node("confirm_results", confirm("Accept the results?", END, "plan"))
        .edge(START, "normalise_idea")
        .edge("normalise_idea", "confirm_idea")
        .gotos("confirm_idea", ["plan", "normalise_idea"])
        .loop_bound("normalise_idea", 5)
        .edge("plan", "confirm_plan")
        .gotos("confirm_plan", ["baseline", "plan"])
        .loop_bound("plan", 4)
        .edge("baseline", "variants")
        .edge("variants", "analyse")
        .edge("analyse", "confirm_results")
        .gotos("confirm_results", [END, "plan"])
        .budgets(Budgets::default().max_wall_ms(7 * 24 * 3_600_000).max_tool_calls(10_000))
        .permissions(["sandbox", "llm"])
        .checkpoint_every(CheckpointPolicy { every_steps: None, every_ms: Some(30 * 60 * 1_000) })
        .build()
        .expect("research session is valid")
}

#[test]
fn seed_004_phases_wait_for_confirmation_and_loop_back_when_refused() {
    let wf = research().erase();
    let vars = Variables::new();
    let mut state = wf.state_from_json(&serde_json::to_value(&vars).unwrap()).unwrap();
    state
        .apply_json(
            &serde_json::to_value(
                vars.declare("idea", "sparse attention", Scope::Global, true).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
    let confirm_plan = wf.node_id("confirm_plan").unwrap();
    let cairn_dsl::DynNodeKind::Task(handler) = &wf.nodes()[confirm_plan].kind else {
        panic!("task")
    };

    // No answer yet: the node suspends with its question.
    let (_, ctx) = ScriptedContext::new().ctx();
    let err = block_on(handler(&*state, ctx)).unwrap_err();
    let NodeError::Interrupted { prompt } = err else { panic!("suspended, got {err:?}") };
    assert_eq!(prompt, json!({ "question": "Run this plan?", "context": "sparse attention" }));

    // Refused: back to planning, recorded in the variables.
    let mut refusing = ScriptedContext::new();
    refusing.answer = Some(json!({ "approved": false }));
    let out = block_on(handler(&*state, refusing.ctx().1)).unwrap();
    assert_eq!(out.goto, [Target::Node("plan".into())]);
    state.apply_json(out.update.as_ref().unwrap()).unwrap();
    assert_eq!(
        wf.next(confirm_plan, &*state, &out.goto).unwrap(),
        [NextTarget::Node(wf.node_id("plan").unwrap())]
    );
    let vars: Variables = serde_json::from_value(state.to_json().unwrap()).unwrap();
    assert_eq!(vars.get_as::<bool>("confirmed.baseline").unwrap(), Some(false));

    // The idea is read-only: a node that tries to change it is refused before the log.
    assert!(vars.set("idea", "other", Scope::Global).is_err());
}

#[test]
fn seed_004_structure() {
    let wf = research();
    let d = wf.as_dyn();
    let phases: Vec<&str> =
        d.nodes().iter().filter(|n| n.policy.phase).map(|n| n.name.as_str()).collect();
    assert_eq!(phases, ["plan", "analyse"]);
    let variants = d.node_id("variants").unwrap();
    assert_eq!(d.nodes()[variants].kind.label(), "map");
    let state = d
        .state_from_json(&json!({ "vars": {
        "variants": { "value": ["x", "y"], "scope": "Thread", "read_only": false }
    }, "rejected": [], "rejected_total": 0 }))
        .unwrap();
    let cairn_dsl::DynNodeKind::Map { items, .. } = &d.nodes()[variants].kind else {
        panic!("map")
    };
    assert_eq!(items(&*state).unwrap(), [json!("x"), json!("y")]);
    assert_eq!(wf.fingerprint(), research().fingerprint());
}
