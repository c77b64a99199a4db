//! A research pipeline: four phases (idea normalisation, experiment planning,
//! code, result analysis), each a sub-workflow run as a child thread, with human confirmations,
//! every kind of checkpoint, messages between modules tied by a correlation id, and a fault in
//! the code phase handled by a recovery policy: retries first, then a fork from the last phase
//! checkpoint with the fallback sandbox.
//!
//! Checkpoints: *automatic* (each phase's child workflow checkpoints every step), *phase* (the
//! parent's phase nodes have `NodePolicy::phase(true)`), *manual* (the operator bookmarks the
//! session before approving the plan: `Engine::checkpoint_now`), *failure* (written by the
//! engine when the code phase fails for good).

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{
    CheckpointPolicy, Ctx, Message, NodeOutput, NodePolicy, RetryPolicy, State, Workflow,
};
use cairn::event::Body;
use cairn::storage::{CheckpointFilter, CheckpointKind, CheckpointMeta, Page};
use cairn::{END, Engine, START, StartOptions, ThreadHandle, ThreadStatus, ToolError};
use cairn_tools::debug::{ForkFrom, ForkOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The session state, shared by every phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Session id; also the root of the correlation ids of its messages.
    pub session_id: String,
    /// The idea as the user gave it.
    pub idea: String,
    /// The idea after normalisation and the user's confirmation.
    pub normalized: Option<String>,
    /// The experiment plan, confirmed by the user.
    pub plan: Vec<String>,
    /// Where the code runs: `"gpu"` (fails in this demo) or `"cpu"` (the fallback).
    pub sandbox: String,
    /// What the code phase produced.
    pub artifact: Option<String>,
    /// The analysis of the results.
    pub analysis: Option<String>,
    /// Phases completed, in order.
    pub completed_phases: Vec<String>,
}

/// Changes to the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SessionUpdate {
    /// A phase finished with this result.
    Phase {
        /// Which phase.
        name: String,
        /// What it produced.
        result: PhaseResult,
    },
    /// Run the code somewhere else (the recovery policy's fallback).
    UseSandbox(String),
}

/// What a phase hands back to the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PhaseResult {
    /// The normalised, confirmed idea.
    Idea(String),
    /// The confirmed plan.
    Plan(Vec<String>),
    /// The code phase's artifact.
    Artifact(String),
    /// The analysis.
    Analysis(String),
}

impl State for Session {
    type Update = SessionUpdate;
    fn apply(&mut self, update: SessionUpdate) {
        match update {
            SessionUpdate::Phase { name, result } => {
                match result {
                    PhaseResult::Idea(i) => self.normalized = Some(i),
                    PhaseResult::Plan(p) => self.plan = p,
                    PhaseResult::Artifact(a) => self.artifact = Some(a),
                    PhaseResult::Analysis(a) => self.analysis = Some(a),
                }
                self.completed_phases.push(name);
            }
            SessionUpdate::UseSandbox(s) => self.sandbox = s,
        }
    }
}

/// A phase's own state: its input, its output, its notes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Module {
    /// Session id (for correlation ids).
    pub session_id: String,
    /// What the phase works on (the idea, the plan, the artifact...).
    pub input: Vec<String>,
    /// Where code runs.
    pub sandbox: String,
    /// What the phase produced.
    pub output: Vec<String>,
}

impl State for Module {
    type Update = Vec<String>;
    fn apply(&mut self, output: Vec<String>) {
        self.output = output;
    }
}

/// The correlation id of a session's messages between two modules.
pub fn correlation(session: &str, flow: &str) -> String {
    format!("{session}:{flow}")
}

/// A phase: `work` (a recorded tool call) then, when `confirm`, a human confirmation.
fn phase<F>(
    id: &str,
    module: &'static str,
    next: &'static str,
    confirm: bool,
    work: F,
) -> Workflow<Module>
where
    F: Fn(Module) -> Result<Vec<String>, ToolError> + Send + Sync + Copy + 'static,
{
    let tool = format!("{module}.run");
    let mut b = Workflow::<Module>::builder(id, 1)
        .node_with(
            "work",
            move |m: Arc<Module>, ctx: Ctx| {
                let tool = tool.clone();
                async move {
                    let out: Vec<String> = ctx
                        .tool(&tool, (*m).clone(), move |m: Module, _| async move { work(m) })
                        .await?;
                    let corr = correlation(&m.session_id, module);
                    let text = format!("{module} produced: {}", out.join("; "));
                    ctx.message(Message::new(module, text).to(next).correlation_id(corr));
                    Ok(NodeOutput::update(out))
                }
            },
            // Transient faults (a busy sandbox) are retried; a phase that still fails, fails.
            NodePolicy::default().retry(RetryPolicy::fixed(3, 5)),
        )
        .edge(START, "work")
        .checkpoint_every(CheckpointPolicy { every_steps: Some(1), every_ms: None });
    if confirm {
        b = b
            .node("confirm", move |m: Arc<Module>, ctx: Ctx| async move {
                let answer: serde_json::Value =
                    ctx.interrupt(json!({"module": module, "confirm": m.output}))?;
                let corr = correlation(&m.session_id, module);
                let reply = format!("user: {answer}");
                ctx.message(Message::new("user", reply).to(module).correlation_id(corr));
                match answer.get("approve").and_then(serde_json::Value::as_bool) {
                    Some(true) => Ok(NodeOutput::none()),
                    _ => Err(cairn::NodeError::fatal(format!("{module}: the user rejected it"))),
                }
            })
            .edge("work", "confirm")
            .edge("confirm", END);
    } else {
        b = b.edge("work", END);
    }
    b.build().expect("a valid phase workflow")
}

fn module_of(s: &Session, input: Vec<String>) -> Module {
    Module { session_id: s.session_id.clone(), input, sandbox: s.sandbox.clone(), output: vec![] }
}

fn done(name: &str, result: PhaseResult) -> SessionUpdate {
    SessionUpdate::Phase { name: name.to_owned(), result }
}

/// The pipeline: idea -> planning -> code -> analysis, each a phase sub-workflow.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Session>, cairn::dsl::BuildError> {
    let idea =
        phase("idea_normalization", "idea_normalization", "experiment_planning", true, |m| {
            Ok(vec![format!("normalised: {}", m.input.join(" ").trim().to_lowercase())])
        });
    let planning = phase("experiment_planning", "experiment_planning", "code_agent", true, |m| {
        let idea = m.input.first().cloned().unwrap_or_default();
        Ok(vec![format!("baseline for {idea}"), "ablation".into(), "variant A".into()])
    });
    let code = phase("code_agent", "code_agent", "result_analysis", false, |m| {
        if m.sandbox == "gpu" {
            // The demo's fault: the GPU sandbox runs out of memory every time.
            return Err(ToolError::retryable("sandbox gpu: out of memory"));
        }
        Ok(vec![format!("ran {} experiments on {}", m.input.len(), m.sandbox)])
    });
    let analysis = phase("result_analysis", "result_analysis", "user", false, |m| {
        Ok(vec![format!("analysis: {} (bleu +1.2)", m.input.join(", "))])
    });
    let phase_policy = || NodePolicy::default().phase(true);
    Workflow::<Session>::builder("research_pipeline", 1)
        .subgraph_with(
            "idea",
            idea,
            |s: &Session| module_of(s, vec![s.idea.clone()]),
            |m: &Module| done("idea", PhaseResult::Idea(m.output.join(" "))),
            phase_policy(),
        )
        .subgraph_with(
            "planning",
            planning,
            |s: &Session| module_of(s, s.normalized.iter().cloned().collect()),
            |m: &Module| done("planning", PhaseResult::Plan(m.output.clone())),
            phase_policy(),
        )
        .subgraph_with(
            "code",
            code,
            |s: &Session| module_of(s, s.plan.clone()),
            |m: &Module| done("code", PhaseResult::Artifact(m.output.join(" "))),
            phase_policy(),
        )
        .subgraph_with(
            "analysis",
            analysis,
            |s: &Session| module_of(s, s.artifact.iter().cloned().collect()),
            |m: &Module| done("analysis", PhaseResult::Analysis(m.output.join(" "))),
            phase_policy(),
        )
        .edge(START, "idea")
        .edge("idea", "planning")
        .edge("planning", "code")
        .edge("code", "analysis")
        .edge("analysis", END)
        .build()
}

/// What a run of the example did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The session thread whose code phase failed.
    pub original: String,
    /// Its final status (failed).
    pub original_status: ThreadStatus,
    /// The thread the recovery policy forked from the last phase checkpoint.
    pub recovered: String,
    /// The seq of the phase checkpoint it was forked from.
    pub forked_at: u64,
    /// The recovered session's final state.
    pub session: Session,
    /// Checkpoint kinds written, over every thread of the database, with counts.
    pub checkpoint_kinds: Vec<(CheckpointKind, usize)>,
    /// Attempts the code phase made before the recovery policy gave up on the GPU sandbox.
    pub code_attempts: u32,
}

/// Runs a session to its failure, recovers it, and reports (the database stays at `db` for the
/// CLI session in the README).
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Report> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let session = Session {
        session_id: "session_001".into(),
        idea: "Dynamic Sparse Attention for long documents".into(),
        sandbox: "gpu".into(),
        ..Session::default()
    };
    let t = engine.start(&wf, session, StartOptions::id("session_001")).await?;
    let mut seq = 0;
    // Two confirmations: the idea, then the plan (bookmarked first: a manual checkpoint).
    for confirmation in ["idea", "plan"] {
        let (status, at) = park(&t, seq).await?;
        anyhow::ensure!(status == ThreadStatus::WaitingInput, "expected a question, got {status}");
        if confirmation == "plan" {
            let meta = CheckpointMeta {
                creator: "operator".into(),
                description: "before approving the experiment plan".into(),
                tags: vec!["plan-review".into()],
                ..CheckpointMeta::default()
            };
            engine.checkpoint_now("session_001", meta).await?;
        }
        seq = at;
        answer(&engine, "session_001", json!({"approve": true})).await?;
    }
    let (status, _) = park(&t, seq).await?;
    let code_attempts = attempts(&engine, "session_001/code@3").await?;
    let recovered = recover(&engine, "session_001", status).await?;
    let outcome = recovered.0.finished().await?;
    let session: Session =
        serde_json::from_value(outcome.output.ok_or_else(|| anyhow::anyhow!("no output"))?)?;
    let mut kinds = Vec::new();
    for kind in CheckpointKind::ALL {
        let filter = CheckpointFilter { kind: Some(*kind), ..CheckpointFilter::default() };
        let n = engine
            .store()
            .list_checkpoints(&filter, Page { limit: 1_000, offset: 0 })
            .wait()?
            .len();
        if n > 0 {
            kinds.push((*kind, n));
        }
    }
    engine.shutdown().await;
    Ok(Report {
        original: "session_001".into(),
        original_status: status,
        recovered: recovered.0.id().to_string(),
        forked_at: recovered.1,
        session,
        checkpoint_kinds: kinds,
        code_attempts,
    })
}

/// The recovery policy: a thread that failed (its retries exhausted) is forked from its last
/// phase checkpoint, with the fallback sandbox; the failed thread stays as it is for debugging.
///
/// # Errors
/// Engine errors; an error if the thread did not fail or has no phase checkpoint.
pub async fn recover(
    engine: &Engine,
    thread: &str,
    status: ThreadStatus,
) -> anyhow::Result<(ThreadHandle, u64)> {
    anyhow::ensure!(status == ThreadStatus::Failed, "only a failed session is recovered");
    let filter = CheckpointFilter {
        thread: Some(cairn::ThreadId::new(thread)?),
        kind: Some(CheckpointKind::Phase),
        ..CheckpointFilter::default()
    };
    let page = engine.store().list_checkpoints(&filter, Page { limit: 1, offset: 0 }).wait()?;
    let last = page.first().ok_or_else(|| anyhow::anyhow!("no phase checkpoint"))?;
    let options = ForkOptions::id(format!("{thread}.recovered"))
        .update(SessionUpdate::UseSandbox("cpu".into()));
    let mut options = options;
    options.labels.insert("recovered_from".into(), thread.to_owned());
    let fork = cairn_tools::Operator::new(engine)
        .fork(thread, ForkFrom::Checkpoint(last.id), options)
        .await?;
    Ok((fork, last.covers.seq.0))
}

/// Waits until the thread stops running after seq `after`; returns its status and the seq of
/// that status change. Reads the log, so it never mistakes an earlier pause for this one.
async fn park(t: &ThreadHandle<Session>, after: u64) -> anyhow::Result<(ThreadStatus, u64)> {
    let mut events = t.events(after)?;
    loop {
        let rec = events.next().await?;
        if let Body::StatusChanged { to, .. } = rec.body
            && to != ThreadStatus::Running
            && to != ThreadStatus::Created
        {
            return Ok((to, rec.bookmark.seq.0));
        }
    }
}

/// Sends the user's answer. The runner that parked the thread lets go of it just after its
/// last commit is visible, so an answer sent at that instant is refused as "being driven":
/// yield to it and send again.
async fn answer(engine: &Engine, thread: &str, value: serde_json::Value) -> anyhow::Result<()> {
    for _ in 0..10_000 {
        match engine.send_input(thread, value.clone()).await {
            Err(cairn::Error::WrongStatus { status: ThreadStatus::Running, .. }) => {
                tokio::task::yield_now().await;
            }
            other => return Ok(other?),
        }
    }
    anyhow::bail!("thread {thread} stayed busy")
}

/// Attempts the last task of a thread made (from its node results).
async fn attempts(engine: &Engine, thread: &str) -> anyhow::Result<u32> {
    let view = cairn_tools::Operator::new(engine).state_at(thread, None).await?;
    Ok(view.meta.node_results.values().map(|r| r.attempt).max().unwrap_or(0))
}
