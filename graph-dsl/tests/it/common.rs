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

/// A minimal in-memory [`NodeContext`] for testing the typed [`Ctx`] layer and erased handlers
/// without the engine: it returns scripted values and logs what it was asked. It does not
/// pretend to record or replay anything.
pub struct ScriptedContext {
    pub item: Option<serde_json::Value>,
    pub answer: Option<serde_json::Value>,
    /// When set, `call_tool` hands this to the tool body instead of the input it was given, as
    /// an engine does with a recorded input.
    pub recorded_input: Option<serde_json::Value>,
    /// When set, `call_tool` returns this without running the tool body, as an engine does
    /// with a recorded result.
    pub recorded_output: Option<serde_json::Value>,
    pub log: std::sync::Mutex<Vec<String>>,
    pub usage: std::sync::Mutex<Vec<cairn_dsl::Usage>>,
    pub token: tokio_util::sync::CancellationToken,
    /// The signals `recv` and `try_recv` hand out, in order (whatever name is asked).
    pub signals: std::sync::Mutex<std::collections::VecDeque<serde_json::Value>>,
}

impl ScriptedContext {
    pub fn new() -> Self {
        Self {
            item: None,
            answer: None,
            recorded_input: None,
            recorded_output: None,
            log: std::sync::Mutex::new(Vec::new()),
            usage: std::sync::Mutex::new(Vec::new()),
            token: tokio_util::sync::CancellationToken::new(),
            signals: std::sync::Mutex::new(std::collections::VecDeque::new()),
        }
    }

    pub fn ctx(self) -> (Arc<Self>, Ctx) {
        let me = Arc::new(self);
        (Arc::clone(&me), Ctx::new(me))
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    fn note(&self, entry: String) {
        self.log.lock().expect("log").push(entry);
    }
}

impl cairn_dsl::NodeContext for ScriptedContext {
    fn thread_id(&self) -> &str {
        "t-1"
    }
    fn node(&self) -> &str {
        "n"
    }
    fn step(&self) -> u64 {
        7
    }
    fn attempt(&self) -> u32 {
        2
    }
    fn item(&self) -> Option<&serde_json::Value> {
        self.item.as_ref()
    }
    fn now_ms(&self) -> u64 {
        1_000
    }
    fn random_u64(&self) -> u64 {
        42
    }
    fn new_id(&self) -> String {
        "id-1".to_owned()
    }
    fn call_tool(
        &self,
        call: cairn_dsl::ToolCall,
        input: serde_json::Value,
        run: cairn_dsl::ErasedTool,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, cairn_dsl::NodeError>> {
        self.note(format!("tool {} {:?} {input}", call.name, call.permission));
        if let Some(output) = self.recorded_output.clone() {
            return Box::pin(async move { Ok(output) });
        }
        let input = self.recorded_input.clone().unwrap_or(input);
        let tool_ctx = cairn_dsl::ToolCtx::new(self.token.clone());
        Box::pin(async move { run(input, tool_ctx).await.map_err(cairn_dsl::NodeError::from) })
    }
    fn progress(&self, p: cairn_dsl::Progress) {
        self.note(format!("progress {}/{} {}", p.step, p.total, p.message));
    }
    fn message(&self, m: cairn_dsl::Message) {
        self.note(format!("message {}: {}", m.role, m.content));
    }
    fn usage(&self, usage: cairn_dsl::Usage) {
        self.usage.lock().expect("usage").push(usage);
    }
    fn cancellation(&self) -> tokio_util::sync::CancellationToken {
        self.token.clone()
    }
    fn interrupt(
        &self,
        prompt: serde_json::Value,
    ) -> Result<serde_json::Value, cairn_dsl::NodeError> {
        self.answer.clone().ok_or(cairn_dsl::NodeError::Interrupted { prompt })
    }
    fn recv(
        &self,
        name: &str,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, cairn_dsl::NodeError>> {
        let next = self.signals.lock().expect("signals").pop_front();
        let name = name.to_owned();
        Box::pin(async move { next.ok_or(cairn_dsl::NodeError::WaitingSignal { name }) })
    }
    fn try_recv(
        &self,
        _name: &str,
    ) -> futures::future::BoxFuture<'static, Result<Option<serde_json::Value>, cairn_dsl::NodeError>>
    {
        let next = self.signals.lock().expect("signals").pop_front();
        Box::pin(async move { Ok(next) })
    }
    fn signal_set_aside(&self, name: &str, detail: &str) {
        self.note(format!("set aside {name}: {detail}"));
    }
    fn sleep(
        &self,
        duration_ms: u64,
    ) -> futures::future::BoxFuture<'static, Result<(), cairn_dsl::NodeError>> {
        let until_ms = self.now_ms() + duration_ms;
        Box::pin(async move { Err(cairn_dsl::NodeError::Sleeping { until_ms }) })
    }
    fn sleep_until(
        &self,
        until_ms: u64,
    ) -> futures::future::BoxFuture<'static, Result<(), cairn_dsl::NodeError>> {
        Box::pin(async move { Err(cairn_dsl::NodeError::Sleeping { until_ms }) })
    }
    fn lock(
        &self,
        name: &str,
        ttl_ms: u64,
        wait: bool,
    ) -> futures::future::BoxFuture<'static, Result<(), cairn_dsl::NodeError>> {
        self.note(format!("lock {name} {ttl_ms} {wait}"));
        let name = name.to_owned();
        Box::pin(async move {
            if wait {
                Ok(())
            } else {
                Err(cairn_dsl::NodeError::Lock { name, detail: "held".to_owned() })
            }
        })
    }
    fn unlock(
        &self,
        name: &str,
    ) -> futures::future::BoxFuture<'static, Result<(), cairn_dsl::NodeError>> {
        self.note(format!("unlock {name}"));
        Box::pin(async { Ok(()) })
    }
}
