//! The agent workflow: `understand` routes the request (a recorded call of the intent router),
//! then the chosen skill runs: `write_article` (six nodes, six progress steps, a file lock on
//! its output, model calls with cost), `summarize`, or `clarify` when the router is not sure.
//!
//! ```text
//! START -> understand --route--> article.context -> article.outline -> article.write
//!                      |             -> article.assemble -> article.save -> article.index -> END
//!                      |-------> summarize -> END
//!                      \-------> clarify -> END
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use cairn::dsl::{Ctx, Message, NodeOutput, NodePolicy, State, ToolCall, Workflow};
use cairn::{END, NodeError, START, ToolError};
use cairn_tools::model::{ModelRequest, ModelResponse};
use serde::{Deserialize, Serialize};

use super::model::ModelService;
use super::router::{Intent, IntentRouter, RouteRequest};

/// The workflow's id.
pub const WORKFLOW: &str = "agent";
/// Progress steps of the write-article skill.
pub const ARTICLE_STEPS: u32 = 6;
/// Time to live of the lock on an article's output file (five minutes). The `save`
/// step renews it before writing.
pub const LOCK_TTL_MS: u64 = 5 * 60 * 1_000;

/// The watchdog on the working steps: an attempt still running after five minutes (engine
/// clock) is cut short (`NodePolicy::timeout_ms`) and, with no retry, the task ends failed,
/// its file lock released: the runtime's "stuck in a working state" guard.
pub const WATCHDOG_MS: u64 = 5 * 60 * 1_000;

/// One task of the agent: the request, the routing decision and what the skill made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentTask {
    /// What the user typed.
    pub request: String,
    /// The routing decision, once made.
    pub intent: Option<Intent>,
    /// The write-article skill's work.
    pub article: Article,
    /// The answer shown to the user.
    pub reply: Option<String>,
}

/// What the write-article skill builds, step by step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Article {
    /// The topic.
    pub topic: String,
    /// Output path, relative to the runtime's output directory.
    pub path: String,
    /// Titles of related articles found in memory.
    pub related: Vec<String>,
    /// The outline.
    pub outline: String,
    /// The body the model wrote.
    pub body: String,
    /// Front matter and body, as saved.
    pub document: String,
    /// Bytes written to the file.
    pub saved_bytes: Option<u64>,
    /// Entities extracted for the knowledge graph.
    pub entities: Vec<String>,
}

/// Changes to an [`AgentTask`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TaskUpdate {
    /// The router decided.
    Routed(Intent),
    /// Step 1: topic, output path and related articles.
    Context {
        /// Topic.
        topic: String,
        /// Output path.
        path: String,
        /// Related titles.
        related: Vec<String>,
    },
    /// Step 2.
    Outline(String),
    /// Step 3.
    Body(String),
    /// Step 4.
    Document(String),
    /// Step 5.
    Saved(u64),
    /// Step 6: entities for the knowledge graph, and the answer to the user.
    Indexed {
        /// Entities.
        entities: Vec<String>,
        /// The answer.
        reply: String,
    },
    /// The answer to the user.
    Reply(String),
}

impl State for AgentTask {
    type Update = TaskUpdate;
    fn apply(&mut self, update: TaskUpdate) {
        let a = &mut self.article;
        match update {
            TaskUpdate::Routed(i) => self.intent = Some(i),
            TaskUpdate::Context { topic, path, related } => {
                a.topic = topic;
                a.path = path;
                a.related = related;
            }
            TaskUpdate::Outline(o) => a.outline = o,
            TaskUpdate::Body(b) => a.body = b,
            TaskUpdate::Document(d) => a.document = d,
            TaskUpdate::Saved(n) => a.saved_bytes = Some(n),
            TaskUpdate::Indexed { entities, reply } => {
                a.entities = entities;
                self.reply = Some(reply);
            }
            TaskUpdate::Reply(r) => self.reply = Some(r),
        }
    }
}

/// What the skills use from the application.
#[derive(Debug, Clone)]
pub struct Services {
    /// The intent router (holds the routing cache).
    pub router: Arc<IntentRouter>,
    /// The model, with its call counts and UI streams.
    pub model: Arc<ModelService>,
    /// Where articles are saved.
    pub out_dir: PathBuf,
}

/// The lock that guards an output file.
pub fn file_lock(path: &str) -> String {
    format!("file:{path}")
}

/// The agent workflow over `services`.
///
/// # Errors
/// Never for this definition.
pub fn workflow(services: &Services) -> Result<Workflow<AgentTask>, cairn::dsl::BuildError> {
    let router = services.router.clone();
    let choose = |t: &AgentTask| match t.intent.as_ref().and_then(|i| i.skill.as_deref()) {
        Some("write_article") => "article.context",
        Some("summarize") => "summarize",
        _ => "clarify",
    };
    let (m1, m2, m3) = (services.model.clone(), services.model.clone(), services.model.clone());
    let out_dir = services.out_dir.clone();
    Workflow::<AgentTask>::builder(WORKFLOW, 1)
        .node("understand", move |t: Arc<AgentTask>, ctx: Ctx| understand(router.clone(), t, ctx))
        .node("clarify", clarify)
        .node("summarize", move |t: Arc<AgentTask>, ctx: Ctx| {
            let model = m1.clone();
            async move {
                ctx.progress(1, 1, "summarising");
                let text = param(&t, "text");
                let r =
                    ask(&ctx, &model, "summary", format!("Summarise in one line: {text}")).await?;
                Ok(NodeOutput::update(TaskUpdate::Reply(r.text)))
            }
        })
        .node("article.context", article_context)
        .node("article.outline", move |t: Arc<AgentTask>, ctx: Ctx| {
            let model = m2.clone();
            async move {
                ctx.progress(2, ARTICLE_STEPS, "drafting the outline");
                let a = &t.article;
                let prompt = format!(
                    "Topic: {}\nStyle: technical blog\nRelated:\n- {}\nWrite an outline.",
                    a.topic,
                    a.related.join("\n- ")
                );
                let r = ask(&ctx, &model, "outline", prompt).await?;
                Ok(NodeOutput::update(TaskUpdate::Outline(r.text)))
            }
        })
        .node_with(
            "article.write",
            move |t: Arc<AgentTask>, ctx: Ctx| {
                let model = m3.clone();
                async move {
                    ctx.progress(3, ARTICLE_STEPS, "writing the article");
                    let a = &t.article;
                    let prompt =
                        format!("Topic: {}\nOutline: {}\nWrite the article.", a.topic, a.outline);
                    let r = ask(&ctx, &model, "content", prompt).await?;
                    Ok(NodeOutput::update(TaskUpdate::Body(r.text)))
                }
            },
            NodePolicy::default().timeout_ms(WATCHDOG_MS),
        )
        .node("article.assemble", article_assemble)
        .node("article.save", move |t: Arc<AgentTask>, ctx: Ctx| {
            article_save(out_dir.clone(), t, ctx)
        })
        .node("article.index", article_index)
        .edge(START, "understand")
        .route("understand", choose, ["article.context", "summarize", "clarify"])
        .edge("article.context", "article.outline")
        .edge("article.outline", "article.write")
        .edge("article.write", "article.assemble")
        .edge("article.assemble", "article.save")
        .edge("article.save", "article.index")
        .edge("article.index", END)
        .edge("summarize", END)
        .edge("clarify", END)
        .permissions(["model", "fs.write"])
        .build()
}

/// The `understand` node: the request's intent, from the router (`router`).
async fn understand(
    router: Arc<IntentRouter>,
    t: Arc<AgentTask>,
    ctx: Ctx,
) -> Result<NodeOutput<TaskUpdate>, NodeError> {
    // The time is read through the context (recorded), so the cache's notion of "now"
    // is part of the recorded input of the routing call.
    let request = RouteRequest { text: t.request.clone(), now_ms: ctx.now_ms() };
    let intent: Intent = ctx
        .tool("intent_router.route", request, move |req: RouteRequest, tool| async move {
            let (intent, usage) = router.route(&req).await;
            tool.report_usage(usage);
            Ok::<_, ToolError>(intent)
        })
        .await?;
    Ok(NodeOutput::update(TaskUpdate::Routed(intent)))
}

/// The `clarify` node: asks the user to say more precisely what they want.
async fn clarify(t: Arc<AgentTask>, ctx: Ctx) -> Result<NodeOutput<TaskUpdate>, NodeError> {
    let (name, confidence) =
        t.intent.as_ref().map_or(("UNKNOWN", 0.0), |i| (i.intent.as_str(), i.confidence));
    let reply = format!(
        "I am not sure what you want (best guess {name}, confidence {confidence:.2}). \
         Could you say it more precisely?"
    );
    ctx.message(Message::new("assistant", reply.clone()).to("user"));
    Ok(NodeOutput::update(TaskUpdate::Reply(reply)))
}

/// The `article.context` node: takes the output file's lock and finds the related articles.
async fn article_context(t: Arc<AgentTask>, ctx: Ctx) -> Result<NodeOutput<TaskUpdate>, NodeError> {
    ctx.progress(1, ARTICLE_STEPS, "building context");
    let topic = param(&t, "topic");
    let path = format!("posts/{}.md", slug(&topic));
    // The output file's lock: taken before any work, held by the thread until it ends,
    // whichever way it ends. Another task writing the same file fails here, at once.
    ctx.try_lock(&file_lock(&path), LOCK_TTL_MS).await?;
    let (related, tokens) = related_articles(&topic);
    // Looking the topic up in memory costs embedding tokens: usage outside a tool.
    ctx.usage(tokens, tokens);
    Ok(NodeOutput::update(TaskUpdate::Context { topic, path, related }))
}

/// The `article.assemble` node: the document, with its front matter.
async fn article_assemble(
    t: Arc<AgentTask>,
    ctx: Ctx,
) -> Result<NodeOutput<TaskUpdate>, NodeError> {
    ctx.progress(4, ARTICLE_STEPS, "adding the front matter");
    let a = &t.article;
    let links: String = a.related.iter().map(|r| format!("\n  - {r}")).collect();
    let date = civil_date(ctx.now_ms());
    let document =
        format!("---\ntitle: {}\ndate: {date}\nwikiLinks:{links}\n---\n\n{}\n", a.topic, a.body);
    Ok(NodeOutput::update(TaskUpdate::Document(document)))
}

/// The `article.save` node: writes the document under `out_dir`, holding the file's lock.
async fn article_save(
    out_dir: PathBuf,
    t: Arc<AgentTask>,
    ctx: Ctx,
) -> Result<NodeOutput<TaskUpdate>, NodeError> {
    ctx.progress(5, ARTICLE_STEPS, "saving the file");
    let a = &t.article;
    // Renew the lease on the file (the thread already holds it): never write a file
    // whose lock might have lapsed to someone else.
    ctx.lock(&file_lock(&a.path), LOCK_TTL_MS).await?;
    let call = ToolCall::new("fs.write").permission("fs.write");
    let input = (a.path.clone(), a.document.clone());
    let bytes: u64 = ctx
        .call(call, input, move |(path, text): (String, String), _| async move {
            let full = out_dir.join(&path);
            let io = |e: std::io::Error| ToolError::retryable(format!("{path}: {e}"));
            if let Some(dir) = full.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            std::fs::write(&full, text.as_bytes()).map_err(io)?;
            Ok(text.len() as u64)
        })
        .await?;
    Ok(NodeOutput::update(TaskUpdate::Saved(bytes)))
}

/// The `article.index` node: updates the knowledge graph and tells the user.
async fn article_index(t: Arc<AgentTask>, ctx: Ctx) -> Result<NodeOutput<TaskUpdate>, NodeError> {
    ctx.progress(6, ARTICLE_STEPS, "updating the knowledge graph");
    let a = &t.article;
    let mut entities = vec![a.topic.clone()];
    entities.extend(a.related.iter().cloned());
    let reply = format!("Created the article \"{}\", saved to {}", a.topic, a.path);
    ctx.message(Message::new("assistant", reply.clone()).to("user"));
    Ok(NodeOutput::update(TaskUpdate::Indexed { entities, reply }))
}

/// A model call as a recorded tool call that needs the `model` permission.
async fn ask(
    ctx: &Ctx,
    model: &Arc<ModelService>,
    purpose: &str,
    prompt: String,
) -> Result<ModelResponse, NodeError> {
    let model = model.clone();
    let task = ctx.thread_id().to_owned();
    let request = ModelRequest { purpose: purpose.to_owned(), prompt };
    let call = ToolCall::new("model.complete").permission("model");
    ctx.call(call, request, move |req: ModelRequest, tool| async move {
        model.complete(&task, req, &tool).await
    })
    .await
}

fn param(t: &AgentTask, name: &str) -> String {
    let p = t.intent.as_ref().and_then(|i| i.params.get(name).cloned());
    p.unwrap_or_else(|| t.request.clone())
}

/// The articles the agent's memory holds already (a fixed corpus: the example's knowledge base).
const MEMORY: [&str; 5] = [
    "Durable execution in practice",
    "Event sourcing basics",
    "Workflow engines compared",
    "Exactly-once effects with idempotency keys",
    "Cancellation in async Rust",
];

/// Up to three remembered titles sharing a word (longer than three letters) with the topic, and
/// the embedding tokens the lookup cost.
fn related_articles(topic: &str) -> (Vec<String>, u64) {
    let words: Vec<String> =
        topic.split_whitespace().filter(|w| w.len() > 3).map(str::to_lowercase).collect();
    let related: Vec<String> = MEMORY
        .iter()
        .filter(|title| {
            let t = title.to_lowercase();
            words.iter().any(|w| t.contains(w.trim_end_matches('s')))
        })
        .take(3)
        .map(|t| (*t).to_owned())
        .collect();
    let scanned: usize = topic.len() + MEMORY.iter().map(|t| t.len()).sum::<usize>();
    (related, scanned as u64 / 4 + 1)
}

/// A file name for a topic: ASCII letters and digits, dashes between words; a stable hash when
/// nothing ASCII is left (a topic in Chinese, say).
pub fn slug(topic: &str) -> String {
    let mut out = String::new();
    for c in topic.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() {
        // FNV-1a: stable across builds and platforms, unlike the std hasher.
        let h = topic.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        return format!("article-{h:016x}");
    }
    out
}

/// `YYYY-MM-DD` of a Unix time in ms (proleptic Gregorian, UTC).
pub fn civil_date(ms: u64) -> String {
    // Howard Hinnant's days-to-civil algorithm, on days since 1970-01-01.
    let z = (ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_slugs_and_memory() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(1_771_578_000_000), "2026-02-20");
        assert_eq!(civil_date(951_782_400_000), "2000-02-29");
        assert_eq!(slug("Durable workflows: a tour!"), "durable-workflows-a-tour");
        assert_eq!(slug("持久化工作流"), slug("持久化工作流"));
        assert!(slug("持久化工作流").starts_with("article-"));
        assert_ne!(slug("持久化工作流"), slug("工作流"));
        let (related, tokens) = related_articles("durable workflows");
        assert_eq!(related, ["Durable execution in practice", "Workflow engines compared"]);
        assert!(tokens > 0);
    }
}
