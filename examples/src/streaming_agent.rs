//! Streaming agent: an agent drafts an answer and streams its tokens to a browser page while
//! it runs, then waits for a person's approval with a deadline, and escalates when nobody
//! answers in time.
//!
//! - `draft` asks the model (the project's deterministic [`ScriptedModel`], through a recorded
//!   tool call) and streams each token with `ToolCtx::stream` as a streaming model API hands
//!   them over. The tokens are ephemeral; the draft itself is the node's result, durable, so a
//!   page opened later (or after a restart) shows it whole.
//! - `approval` waits for the signal `approval` (a `bool`) with `ctx.recv_timeout`: `true`
//!   approves, `false` rejects, and the deadline passing escalates.
//! - `escalate` (only after the deadline) hands the draft to an on-call reviewer.
//!
//! The engine serves its endpoint, and the web view's live stream page
//! (`/ui/threads/{id}/stream?signal=approval`) shows the tokens as they come, with Approve and
//! Reject buttons that send the signal (`POST /api/threads/{id}/signal`). [`run`] drives two
//! reviews without a person (one approved through that route, one left to its deadline);
//! `cargo run --example streaming_agent -- --serve` serves the page for a person.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, Message, NodeOutput, State, ToolCtx, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadHandle, ThreadStatus};
use cairn_tools::model::{LanguageModel as _, ModelRequest, ScriptedModel};
use cairn_tools::serve::Serve as _;
use cairn_tools::serve::Server;
use serde::{Deserialize, Serialize};

/// The signal a person sends: `true` approves, `false` rejects.
pub const SIGNAL: &str = "approval";

/// A review: the question, the agent's draft, and what became of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// The question the agent answers.
    pub question: String,
    /// How long a person has to approve, ms.
    pub deadline_ms: u64,
    /// The pause between two streamed tokens, ms (a model's pace).
    pub token_ms: u64,
    /// The agent's draft, once written.
    pub draft: String,
    /// What became of it.
    pub decision: Option<Decision>,
    /// Who the draft went to after the deadline.
    pub escalated_to: Option<String>,
}

/// What became of a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// A person approved it in time.
    Approved,
    /// A person rejected it in time.
    Rejected,
    /// Nobody answered before the deadline.
    Escalated,
}

/// Updates of [`Review`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ReviewUpdate {
    /// The draft was written.
    Drafted(String),
    /// The approval ended.
    Decided(Decision),
    /// The draft went to a reviewer.
    EscalatedTo(String),
}

impl State for Review {
    type Update = ReviewUpdate;

    fn apply(&mut self, update: ReviewUpdate) {
        match update {
            ReviewUpdate::Drafted(d) => self.draft = d,
            ReviewUpdate::Decided(d) => self.decision = Some(d),
            ReviewUpdate::EscalatedTo(who) => self.escalated_to = Some(who),
        }
    }
}

/// The model's script: the same question always gets the same draft.
#[must_use]
pub fn model() -> ScriptedModel {
    ScriptedModel::new().answers(
        "draft",
        &["Leases let one worker own a thread at a time: it renews the lease with every \
           commit, and when it dies the lease lapses and another worker takes the thread over \
           from its log, so no step runs twice and none is lost."],
    )
}

/// The workflow: draft (streamed) -> approval (with a deadline) -> escalate when it passed.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Review>, cairn::dsl::BuildError> {
    Workflow::<Review>::builder("streaming-agent", 1)
        .signal::<bool>(SIGNAL)
        .node("draft", |s: Arc<Review>, ctx: Ctx| async move {
            let request = ModelRequest { purpose: "draft".into(), prompt: s.question.clone() };
            let pace = s.token_ms;
            let draft: String =
                ctx.tool("model", request, move |r, tc| stream(r, tc, pace)).await?;
            Ok(NodeOutput::update(ReviewUpdate::Drafted(draft)))
        })
        .node("approval", |s: Arc<Review>, ctx: Ctx| async move {
            let decision = match ctx.recv_timeout::<bool>(SIGNAL, s.deadline_ms).await? {
                Some(true) => Decision::Approved,
                Some(false) => Decision::Rejected,
                None => Decision::Escalated,
            };
            Ok(NodeOutput::update(ReviewUpdate::Decided(decision)))
        })
        .node("escalate", |_s: Arc<Review>, ctx: Ctx| async move {
            let to = "on-call-reviewer".to_owned();
            ctx.message(Message::new("agent", "no approval before the deadline").to(to.clone()));
            Ok(NodeOutput::update(ReviewUpdate::EscalatedTo(to)))
        })
        .edge(START, "draft")
        .edge("draft", "approval")
        .route(
            "approval",
            |s: &Review| {
                if s.decision == Some(Decision::Escalated) { "escalate" } else { END }
            },
            ["escalate", END],
        )
        .edge("escalate", END)
        .build()
}

/// The model tool: completes `request` and streams the answer a word at a time, `pace_ms`
/// apart, as a streaming model API would; returns the whole text (recorded).
async fn stream(
    request: ModelRequest,
    tc: ToolCtx,
    pace_ms: u64,
) -> Result<String, cairn::ToolError> {
    let answer = model().complete(request).await?;
    for token in answer.text.split_inclusive(' ') {
        tc.stream(token)?;
        tokio::time::sleep(Duration::from_millis(pace_ms)).await;
    }
    tc.report_model_usage(&answer.model, answer.usage);
    Ok(answer.text)
}

/// Opens the engine on `db` serving its endpoint at `addr` (port 0: any free one).
///
/// # Errors
/// Engine errors.
pub async fn open(db: &Path, addr: SocketAddr) -> anyhow::Result<(Engine, Server)> {
    let wf = workflow()?;
    Ok(Engine::builder(db).workflow(&wf).serve(addr).open().await?)
}

/// Starts review `id` of `question` in `delay_ms` (a delayed start: the thread exists at once,
/// so a page can open its stream before the first token), with `deadline_ms` to approve and
/// `pace.token_ms` between streamed tokens.
///
/// # Errors
/// Engine errors.
pub async fn begin(
    engine: &Engine,
    id: &str,
    question: &str,
    pace: Pace,
) -> anyhow::Result<ThreadHandle> {
    let Pace { deadline_ms, token_ms, delay_ms } = pace;
    let review = Review { question: question.into(), deadline_ms, token_ms, ..Review::default() };
    let mut options = StartOptions::id(id);
    if delay_ms > 0 {
        options.start_at_ms = Some(engine.clock().now_ms() + delay_ms);
    }
    Ok(engine.start_json("streaming-agent", review, options).await?)
}

/// The timing of one review.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// How long a person has to approve, ms.
    pub deadline_ms: u64,
    /// The pause between two streamed tokens, ms.
    pub token_ms: u64,
    /// How long after its creation the review starts, ms.
    pub delay_ms: u64,
}

/// The page that shows review `id` live and approves it: the web view's stream page, the
/// token in its fragment (never sent to the server; the page keeps it in the tab).
#[must_use]
pub fn page(server: &Server, id: &str) -> String {
    format!(
        "http://{}/ui/threads/{id}/stream?signal={SIGNAL}#token={}",
        server.addr(),
        server.token()
    )
}

/// What [`run`] saw.
#[derive(Debug)]
pub struct Streamed {
    /// The tokens the approved review streamed, as a reader of its stream got them.
    pub tokens: Vec<String>,
    /// The approved review's end.
    pub approved: (ThreadStatus, Review),
    /// The review nobody answered: its end.
    pub escalated: (ThreadStatus, Review),
}

/// Two reviews without a person: `r-approved`, read through `Engine::stream` and approved
/// through the endpoint's signal route as the page's button does; `r-late`, whose short
/// deadline passes.
///
/// # Errors
/// Engine errors; an endpoint that does not answer.
pub async fn run(db: &Path) -> anyhow::Result<Streamed> {
    use futures::StreamExt as _;
    let (engine, server) = open(db, ([127, 0, 0, 1], 0).into()).await?;
    let pace = Pace { deadline_ms: 60_000, token_ms: 5, delay_ms: 0 };
    let approved = begin(&engine, "r-approved", "What is a lease?", pace).await?;
    let mut reader = engine.stream("r-approved").await?;
    let mut tokens = Vec::new();
    while let Some(item) = reader.next().await {
        match item? {
            cairn::StreamItem::Chunk { value, .. } => {
                tokens.push(value.as_str().unwrap_or_default().to_owned())
            }
            cairn::StreamItem::Closed { node, .. } if node == "draft" => break,
            _ => {}
        }
    }
    signal_over_http(&server, "r-approved", true).await?;
    let pace = Pace { deadline_ms: 300, token_ms: 0, delay_ms: 0 };
    let late = begin(&engine, "r-late", "What is a lease?", pace).await?;
    let approved = (approved.finished().await?.status, approved.output::<Review>().await?);
    let escalated = (late.finished().await?.status, late.output::<Review>().await?);
    server.shutdown().await;
    engine.shutdown().await;
    Ok(Streamed { tokens, approved, escalated })
}

/// `POST /api/threads/{id}/signal` with `{"name": "approval", "value": value}` and the token,
/// as the page's Approve and Reject buttons send it.
async fn signal_over_http(server: &Server, id: &str, value: bool) -> anyhow::Result<()> {
    use std::io::{Read as _, Write as _};
    let (addr, token) = (server.addr(), server.token().to_owned());
    let body = serde_json::json!({"name": SIGNAL, "value": value}).to_string();
    let request = format!(
        "POST /api/threads/{id}/signal HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(addr)?;
        tcp.write_all(request.as_bytes())?;
        let mut answer = String::new();
        tcp.read_to_string(&mut answer)?;
        anyhow::Ok(answer)
    })
    .await??;
    anyhow::ensure!(answer.starts_with("HTTP/1.1 200"), "the signal was refused: {answer}");
    Ok(())
}
