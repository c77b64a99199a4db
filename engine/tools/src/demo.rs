//! The demo workflow: an agent-like research assistant with routing, a fan-out and join, a
//! bounded review loop and tool calls, driven by a [`LanguageModel`].
//!
//! ```text
//! START -> classify --route--> answer_directly -> END
//!                   \--------> plan -> search_web  \
//!                                   -> search_docs -> (join) synthesize -> review --route--> finalize -> END
//!                                                                ^-----------------------/ (at most 3 drafts)
//! ```

use std::sync::Arc;

use cairn_dsl::{
    BuildError, Ctx, END, Message, NodeError, NodeOutput, NodePolicy, RetryPolicy, START, State,
    ToolError, Workflow,
};
use serde::{Deserialize, Serialize};

use crate::model::{LanguageModel, ModelRequest, ModelResponse};

/// The demo's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Research {
    /// The question asked.
    pub question: String,
    /// "research" or "simple".
    pub route: String,
    /// Plan items.
    pub plan: Vec<String>,
    /// Findings from the searches, in a fixed order (web before docs).
    pub findings: Vec<String>,
    /// The current draft.
    pub draft: String,
    /// Drafts written.
    pub drafts: u32,
    /// Whether the last review approved.
    pub approved: bool,
    /// The final answer.
    pub answer: String,
}

/// Updates of [`Research`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResearchUpdate {
    /// Set the route.
    Route(String),
    /// Set the plan.
    Plan(Vec<String>),
    /// Add a finding.
    Finding(String),
    /// A new draft.
    Draft(String),
    /// A review verdict.
    Reviewed(bool),
    /// The final answer.
    Answer(String),
}

impl State for Research {
    type Update = ResearchUpdate;

    fn apply(&mut self, update: ResearchUpdate) {
        match update {
            ResearchUpdate::Route(r) => self.route = r,
            ResearchUpdate::Plan(p) => self.plan = p,
            ResearchUpdate::Finding(f) => self.findings.push(f),
            ResearchUpdate::Draft(d) => {
                self.draft = d;
                self.drafts += 1;
            }
            ResearchUpdate::Reviewed(ok) => self.approved = ok,
            ResearchUpdate::Answer(a) => self.answer = a,
        }
    }
}

async fn ask(
    ctx: &Ctx,
    model: &Arc<dyn LanguageModel>,
    purpose: &str,
    prompt: String,
) -> Result<ModelResponse, NodeError> {
    let model = model.clone();
    let request = ModelRequest { purpose: purpose.to_owned(), prompt };
    let response: ModelResponse = ctx
        .tool("model", request, move |req, tool_ctx| async move {
            let response = model.complete(req).await?;
            tool_ctx.report_model_usage(&response.model, response.usage);
            Ok::<_, ToolError>(response)
        })
        .await?;
    Ok(response)
}

/// A deterministic search tool over a tiny built-in corpus (stands in for a web or docs search).
fn search(source: &'static str, query: &str) -> Result<String, ToolError> {
    let hash = blake3::hash(format!("{source}:{query}").as_bytes()).to_hex();
    Ok(format!("{source} result {} for '{query}'", &hash[..8]))
}

/// The demo workflow over `model`.
///
/// # Errors
/// [`BuildError`] only if the definition below is wrong (a bug).
pub fn research_workflow(model: Arc<dyn LanguageModel>) -> Result<Workflow<Research>, BuildError> {
    let [m1, m2, m3, m4, m5] = std::array::from_fn(|_| model.clone());
    let retry = NodePolicy::default().retry(RetryPolicy::exponential(3, 10, 100));
    Workflow::<Research>::builder("research-agent", 1)
        // `cairn emit question.asked --id ID --payload '{"question": ..}'` starts one
        // (`docs/events.md`).
        .on_event("question.asked")
        .node("classify", move |s: Arc<Research>, ctx: Ctx| classify(m1.clone(), s, ctx))
        .route(
            "classify",
            |s: &Research| if s.route == "simple" { "answer_directly" } else { "plan" },
            ["answer_directly", "plan"],
        )
        .node("answer_directly", move |s: Arc<Research>, ctx: Ctx| {
            let model = m2.clone();
            async move {
                let r = ask(&ctx, &model, "answer", s.question.clone()).await?;
                Ok(NodeOutput::update(ResearchUpdate::Answer(r.text)))
            }
        })
        .node("plan", move |s: Arc<Research>, ctx: Ctx| plan(m3.clone(), s, ctx))
        .fan_out("plan", ["search_web", "search_docs"])
        .node_with(
            "search_web",
            |s: Arc<Research>, ctx: Ctx| async move {
                ctx.progress(3, 5, "searching the web");
                let q = s.plan.join(" ");
                let hit: String = ctx
                    .tool("web_search", q, |q: String, _| async move { search("web", &q) })
                    .await?;
                Ok(NodeOutput::update(ResearchUpdate::Finding(hit)))
            },
            retry.clone(),
        )
        .node_with(
            "search_docs",
            |s: Arc<Research>, ctx: Ctx| async move {
                let q = s.plan.first().cloned().unwrap_or_default();
                let hit: String = ctx
                    .tool("docs_search", q, |q: String, _| async move { search("docs", &q) })
                    .await?;
                Ok(NodeOutput::update(ResearchUpdate::Finding(hit)))
            },
            retry,
        )
        // The join waits for both searches; synthesize is also re-entered from review, so it
        // cannot be the join itself.
        .join(["search_web", "search_docs"], "gather")
        .node("gather", |_s: Arc<Research>, _ctx: Ctx| async move { Ok(NodeOutput::none()) })
        .edge("gather", "synthesize")
        .node_with(
            "synthesize",
            move |s: Arc<Research>, ctx: Ctx| synthesize(m4.clone(), s, ctx),
            NodePolicy::default().checkpoint_after(true),
        )
        .node("review", move |s: Arc<Research>, ctx: Ctx| review(m5.clone(), s, ctx))
        .edge("synthesize", "review")
        .route(
            "review",
            |s: &Research| if s.approved { "finalize" } else { "synthesize" },
            ["finalize", "synthesize"],
        )
        .loop_bound("synthesize", 3)
        .node("finalize", finalize)
        .edge(START, "classify")
        .edge("answer_directly", END)
        .edge("finalize", END)
        // Read-only queries (`cairn query demo-1 findings`): answered from the stored state.
        .query("findings", |s: &Research, (): ()| s.findings.clone())
        .query("findings_about", |s: &Research, word: String| {
            s.findings.iter().filter(|f| f.contains(&word)).cloned().collect::<Vec<_>>()
        })
        // An update (`cairn update demo-1 add_finding --args '"..."'`): a finding added from
        // outside, refused when empty; replies with the number of findings.
        .update(
            "add_finding",
            |_s: &Research, finding: &String| {
                if finding.trim().is_empty() { Err("a finding needs text".into()) } else { Ok(()) }
            },
            |s: &mut Research, finding: String| {
                s.findings.push(finding);
                Ok(s.findings.len())
            },
        )
        .build()
}

/// The `finalize` node: the draft, marked with a recorded id.
async fn finalize(s: Arc<Research>, ctx: Ctx) -> Result<NodeOutput<ResearchUpdate>, NodeError> {
    ctx.progress(5, 5, "done");
    let id = ctx.new_id();
    Ok(NodeOutput::update(ResearchUpdate::Answer(format!("{} [{}]", s.draft, &id[..8]))))
}

/// The `classify` node: routes the question (simple, or to research).
async fn classify(
    model: Arc<dyn LanguageModel>,
    s: Arc<Research>,
    ctx: Ctx,
) -> Result<NodeOutput<ResearchUpdate>, NodeError> {
    ctx.progress(1, 5, "classifying the question");
    // The question as a message between modules, with a correlation id per thread
    // (`cairn trace corr-3` finds demo-3's).
    let corr = format!("corr-{}", ctx.thread_id().trim_start_matches("demo-"));
    let asked = Message::new("user", s.question.clone()).to("classify");
    ctx.message(asked.correlation_id(corr));
    let r = ask(&ctx, &model, "classify", s.question.clone()).await?;
    Ok(NodeOutput::update(ResearchUpdate::Route(r.text)))
}

/// The `plan` node: the searches to make.
async fn plan(
    model: Arc<dyn LanguageModel>,
    s: Arc<Research>,
    ctx: Ctx,
) -> Result<NodeOutput<ResearchUpdate>, NodeError> {
    ctx.progress(2, 5, "planning");
    let r = ask(&ctx, &model, "plan", s.question.clone()).await?;
    let plan = r.text.split(';').map(|p| p.trim().to_owned()).collect();
    Ok(NodeOutput::update(ResearchUpdate::Plan(plan)))
}

/// The `synthesize` node: a draft from the findings.
async fn synthesize(
    model: Arc<dyn LanguageModel>,
    s: Arc<Research>,
    ctx: Ctx,
) -> Result<NodeOutput<ResearchUpdate>, NodeError> {
    ctx.progress(4, 5, "drafting");
    let prompt = format!("{} | {} | draft {}", s.question, s.findings.join(" | "), s.drafts + 1);
    let r = ask(&ctx, &model, "draft", prompt).await?;
    Ok(NodeOutput::update(ResearchUpdate::Draft(r.text)))
}

/// The `review` node: whether the draft is approved (the third always is).
async fn review(
    model: Arc<dyn LanguageModel>,
    s: Arc<Research>,
    ctx: Ctx,
) -> Result<NodeOutput<ResearchUpdate>, NodeError> {
    // The last allowed draft is accepted as it is: the loop is bounded.
    let verdict = if s.drafts >= 3 {
        true
    } else {
        ask(&ctx, &model, "review", format!("{} #{}", s.draft, s.drafts)).await?.text == "approve"
    };
    Ok(NodeOutput::update(ResearchUpdate::Reviewed(verdict)))
}

/// Threads one `cairn demo` runs at most. A demo thread writes about 17 KB to the file and
/// takes a few ms of a core (200 threads: 3.4 MB in about a second), so this many fill about
/// 170 MB in under a minute: as much as a demonstration needs, and a mistyped count is refused
/// instead of filling the disk.
pub const DEMO_THREADS_MAX: usize = 10_000;

/// The demo's questions; thread `demo-<i>` asks question `i % len`.
pub const QUESTIONS: &[&str] = &[
    "Why do durable workflow engines checkpoint?",
    "What is a write-ahead log?",
    "How does group commit improve throughput?",
    "Is the sky blue?",
    "What makes replay deterministic?",
    "How are torn writes detected?",
    "What is a lease?",
    "Why bound every loop?",
];
