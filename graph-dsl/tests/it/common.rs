//! Shared helpers: a small state, a no-op handler, and a workflow using every feature.

use std::sync::Arc;

use cairn_dsl::{
    Budgets, CheckpointPolicy, Ctx, END, NodeOutput, NodePolicy, NodeResult, Replace, RetryPolicy,
    START, Workflow, WorkflowBuilder,
};

pub type S = Replace<u32>;

pub fn builder(id: &str) -> WorkflowBuilder<S> {
    Workflow::builder(id, 1)
}

pub async fn noop(_state: Arc<S>, _ctx: Ctx) -> NodeResult<u32> {
    Ok(NodeOutput::none())
}

pub async fn add_one(state: Arc<S>, _ctx: Ctx) -> NodeResult<u32> {
    Ok(NodeOutput::update(state.0 + 1))
}

/// A child workflow for sub-workflow tests.
pub fn child() -> Workflow<S> {
    builder("child")
        .node("inner", add_one)
        .edge(START, "inner")
        .edge("inner", END)
        .build()
        .expect("child is valid")
}

/// A workflow using every construct: route, fan-out, join, map, sub-workflow, loop, gotos,
/// phase, policies and workflow settings.
pub fn kitchen_sink() -> Workflow<S> {
    builder("kitchen")
        .node("plan", add_one)
        .node_with(
            "search",
            noop,
            NodePolicy::default()
                .retry(RetryPolicy::exponential(3, 100, 2_000).jitter(0.2))
                .timeout_ms(5_000)
                .tag("net"),
        )
        .node("read", noop)
        .node("merge", noop)
        .map("summarise", |s: &S| vec![s.0; 2], noop)
        .subgraph("deep", child(), |s: &S| s.clone(), |c: &S| c.0)
        .node_with("check", noop, NodePolicy::default().phase(true))
        .node("revise", noop)
        .node("router", noop)
        .edge(START, "plan")
        .fan_out("plan", ["search", "read"])
        .join(["search", "read"], "merge")
        .edge("merge", "summarise")
        .edge("summarise", "deep")
        .edge("deep", "check")
        .route("check", |s: &S| if s.0 > 3 { "router" } else { "revise" }, ["router", "revise"])
        .edge("revise", "check")
        .loop_bound("revise", 5)
        .loop_bound("plan", 3)
        .gotos("router", ["plan", END])
        .budgets(Budgets::default().max_steps(100).max_tool_calls(20))
        .permissions(["net", "fs:write"])
        .checkpoint_every(CheckpointPolicy { every_steps: Some(10), every_ms: None })
        .build()
        .expect("kitchen sink is valid")
}
