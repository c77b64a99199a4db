//! An agent runtime on Cairn: an intent router chooses a skill, the write-article skill
//! reports six progress steps, holds a file lock on its output and tracks its cost, a task can
//! be cancelled midway, and unfinished tasks are offered for resumption after a restart.
//!
//! What an agent runtime needs, and where it is here:
//! - Taking a request and working out what the user wants: [`AgentRuntime::submit`] starts a
//!   thread whose `understand` node asks the [`router::IntentRouter`] inside a recorded tool
//!   call (patterns first, the model when none matches).
//! - Asking back when unsure: below a confidence of 0.6 the `clarify` node answers with a
//!   question ([`router::CONFIDENCE_THRESHOLD`]).
//! - Not routing the same request twice: the router's cache (50 entries, ten minutes, on the
//!   engine clock).
//! - Running the chosen skill: a route to the skill's nodes ([`skills`]).
//! - Telling the user how far it got: `ctx.progress(step, 6, ..)`, a `progress` event per step.
//! - Not writing one file from two tasks: `ctx.try_lock` on the output file, `ctx.lock` to renew
//!   it; the engine releases a thread's locks when it ends, whichever way.
//! - Counting cost: `ctx.usage` and tool usage, summed in the thread's telemetry; the model
//!   service reports each completion under its model's name (`ToolCtx::report_model_usage`,
//!   telemetry `by_model`).
//! - A stop button: [`AgentRuntime::cancel`] fires the thread's cancellation token, which the
//!   model call's stream watches ([`model::ModelService`]).
//! - A task stuck in a working step: the working step's `NodePolicy::timeout_ms`
//!   ([`skills::WATCHDOG_MS`], five minutes of engine clock) cuts the attempt short; the task
//!   ends failed and its file lock is released.
//! - After a crash, offering unfinished tasks instead of running them behind the user's back:
//!   [`RecoveryPolicy::Park`], then [`AgentRuntime::resumable_tasks`],
//!   [`AgentRuntime::resume_task`] and [`AgentRuntime::abandon_task`].
//!
//! [`run`] plays a session: routes several requests, writes an article, cancels a second one
//! mid-write, crashes the engine while two more are being written, then resumes one and
//! abandons the other; last, a task whose UI stops reading its stream is ended by the
//! watchdog. Time is a [`ManualClock`] so the cache's ten minutes pass in a line.

pub mod model;
pub mod router;
pub mod skills;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn::clock::{Clock, ManualClock};
use cairn::event::Body;
use cairn::thread_ctx::Telemetry;
use cairn::{Engine, RecoveryPolicy, StartOptions, ThreadHandle, ThreadId, ThreadStatus, Workflow};
use tokio::sync::mpsc;

use self::model::ModelService;
use self::router::{CacheStats, Intent, IntentRouter};
use self::skills::{AgentTask, Article, Services};

/// The agent runtime: the engine, the router (with its cache) and the model, over one
/// database file and one output directory.
pub struct AgentRuntime {
    engine: Engine,
    workflow: Workflow<AgentTask>,
    services: Services,
}

impl std::fmt::Debug for AgentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntime").field("services", &self.services).finish()
    }
}

impl AgentRuntime {
    /// Opens the runtime on `db`, saving articles under `out_dir`. Tasks found unfinished are
    /// parked (a task loaded from a checkpoint starts paused): see [`AgentRuntime::resumable_tasks`].
    ///
    /// # Errors
    /// Engine errors opening the file.
    pub async fn open(db: &Path, clock: Arc<dyn Clock>, out_dir: PathBuf) -> anyhow::Result<Self> {
        let llm: Arc<dyn cairn_tools::model::LanguageModel> = Arc::new(model::scripted());
        let services = Services {
            router: Arc::new(IntentRouter::new(llm.clone())),
            model: Arc::new(ModelService::new(llm)),
            out_dir,
        };
        let workflow = skills::workflow(&services)?;
        let engine = Engine::builder(db)
            .workflow(&workflow)
            .clock(clock)
            .recovery(RecoveryPolicy::Park)
            .open()
            .await?;
        Ok(Self { engine, workflow, services })
    }

    /// Starts task `task` on the user's `request` (idempotent on `task`).
    ///
    /// # Errors
    /// Engine errors.
    pub async fn submit(
        &self,
        task: &str,
        request: &str,
    ) -> Result<ThreadHandle<AgentTask>, cairn::Error> {
        let input = AgentTask { request: request.to_owned(), ..AgentTask::default() };
        self.engine.start(&self.workflow, input, StartOptions::id(task)).await
    }

    /// Subscribes a UI to the article body `task` will write (call before [`Self::submit`]).
    pub fn stream(&self, task: &str) -> mpsc::Receiver<String> {
        self.services.model.stream(task)
    }

    /// The user pressed stop: cancels `task`; returns once it ended.
    ///
    /// # Errors
    /// Engine errors; [`cairn::Error::Transition`] if the task had ended already.
    pub async fn cancel(&self, task: &str, reason: &str) -> Result<(), cairn::Error> {
        self.engine.cancel(task, reason).await
    }

    /// Tasks left unfinished by a crash or shutdown.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn resumable_tasks(&self) -> Result<Vec<String>, cairn::Error> {
        Ok(self.engine.resumable().await?.into_iter().map(|r| r.id.to_string()).collect())
    }

    /// Resumes a parked task where its log ends.
    ///
    /// # Errors
    /// [`cairn::Error::WrongStatus`] if it is not resumable.
    pub async fn resume_task(&self, task: &str) -> Result<ThreadHandle<AgentTask>, cairn::Error> {
        self.engine.resume(task).await?;
        self.engine.thread_of(&self.workflow, task).await
    }

    /// Gives a parked task up for good: it ends cancelled and its
    /// file locks are released.
    ///
    /// # Errors
    /// As [`Engine::abandon`].
    pub async fn abandon_task(&self, task: &str) -> Result<(), cairn::Error> {
        self.engine.abandon(task).await
    }

    /// The progress steps `task` reported, in order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn progress(&self, task: &str) -> anyhow::Result<Vec<u32>> {
        let mut steps = Vec::new();
        for body in self.events(task)? {
            if let Body::Progress { progress, .. } = body {
                steps.push(progress.step);
            }
        }
        Ok(steps)
    }

    /// Durable locks held now, as `(name, owner task)`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn locks(&self) -> anyhow::Result<Vec<(String, String)>> {
        Ok(self.engine.store().locks().wait()?.into_iter().map(|l| (l.name, l.owner)).collect())
    }

    /// What `task` spent and did: tokens, cost, tool calls, steps (the seed's cost tracker).
    ///
    /// # Errors
    /// Engine errors.
    pub async fn telemetry(&self, task: &str) -> anyhow::Result<Telemetry> {
        Ok(cairn_tools::Operator::new(&self.engine).state_at(task, None).await?.meta.telemetry)
    }

    /// The routing cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.services.router.stats()
    }

    /// Completions asked of the model for `task` by this process, by purpose.
    pub fn model_calls(&self, task: &str) -> BTreeMap<String, u32> {
        self.services.model.calls(task)
    }

    /// Where articles are saved.
    pub fn out_dir(&self) -> &Path {
        &self.services.out_dir
    }

    /// The engine underneath.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stops at the next step boundaries and closes the file.
    pub async fn shutdown(self) {
        self.engine.shutdown().await;
    }

    /// Stops everything where it stands, as a power cut would (the file keeps what was
    /// acknowledged).
    pub async fn crash(self) {
        self.engine.crash().await;
    }

    fn events(&self, task: &str) -> anyhow::Result<Vec<Body>> {
        let id = ThreadId::new(task)?;
        let store = self.engine.store();
        let mut out = Vec::new();
        for event in store.read_since(&id, cairn::Seq(0), 10_000).wait()? {
            out.push(cairn::blocking::decode(store.as_ref(), event)?.body);
        }
        Ok(out)
    }
}

/// One routed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// Task id.
    pub task: String,
    /// The routing decision.
    pub intent: Intent,
    /// The task's final status.
    pub status: ThreadStatus,
    /// What the user was told.
    pub reply: Option<String>,
}

/// The article written start to finish without trouble.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// Task id.
    pub task: String,
    /// What the skill built.
    pub article: Article,
    /// Progress steps reported.
    pub progress: Vec<u32>,
    /// The file on disk afterwards.
    pub file: String,
    /// Locks held once it completed.
    pub locks_after: Vec<(String, String)>,
    /// Tokens, cost and tool calls.
    pub telemetry: Telemetry,
}

/// The task cancelled while its body streamed to the UI.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancelled {
    /// Task id.
    pub task: String,
    /// Chunks the UI received before the user pressed stop.
    pub chunks_seen: Vec<String>,
    /// Locks while it was writing.
    pub locks_while_writing: Vec<(String, String)>,
    /// Its final status.
    pub status: ThreadStatus,
    /// Progress steps it reached.
    pub progress: Vec<u32>,
    /// Locks held once it ended.
    pub locks_after: Vec<(String, String)>,
    /// Whether its output file exists.
    pub file_exists: bool,
}

/// The crash and what the restarted runtime did about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Restarted {
    /// Tasks offered for resumption after the restart.
    pub resumable: Vec<String>,
    /// Locks held right after the restart (still the crashed tasks').
    pub locks_after_restart: Vec<(String, String)>,
    /// The resumed task's final status.
    pub resumed_status: ThreadStatus,
    /// The resumed task's article.
    pub resumed: Article,
    /// The article of the same request written without a crash.
    pub uninterrupted: Article,
    /// Completions the restarted process asked for the resumed task, by purpose.
    pub model_calls_after_restart: BTreeMap<String, u32>,
    /// The restarted process's routing cache: never consulted, since the resumed task's
    /// routing decision is read from its log (the new cache is empty and would not know it).
    pub router_after_restart: CacheStats,
    /// Progress steps of the resumed task, across both processes.
    pub progress: Vec<u32>,
    /// The abandoned task's final status.
    pub abandoned_status: ThreadStatus,
    /// Locks held at the end.
    pub locks_after: Vec<(String, String)>,
}

/// The task whose UI stopped reading: the watchdog cut it short.
#[derive(Debug, Clone, PartialEq)]
pub struct Stalled {
    /// Task id.
    pub task: String,
    /// Locks while its stream was stalled.
    pub locks_while_stalled: Vec<(String, String)>,
    /// Its final status.
    pub status: ThreadStatus,
    /// The error it ended with.
    pub error: Option<String>,
    /// Locks held once it ended.
    pub locks_after: Vec<(String, String)>,
}

/// What a run of the example did.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Requests that were only routed (summaries, clarifications, cache demonstrations).
    pub routed: Vec<Routed>,
    /// The routing cache's counters before the restart.
    pub cache: CacheStats,
    /// The article written without trouble.
    pub written: Written,
    /// The cancelled task.
    pub cancelled: Cancelled,
    /// The crash and restart.
    pub restarted: Restarted,
    /// The task the watchdog ended.
    pub stalled: Stalled,
}

/// The request the example writes twice: once without trouble, once across a crash.
pub const ARTICLE_REQUEST: &str = "Write an article about durable workflows";

/// Plays the session described in the module docs on `db`, saving articles next to it.
///
/// # Errors
/// Engine errors; an error when a task does not behave as the session expects.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    // 2026-02-20T09:00:00Z: the date in the articles' front matter.
    let clock = ManualClock::new(1_771_578_000_000);
    let out_dir = db.parent().unwrap_or_else(|| Path::new(".")).join("agent-out");
    let rt = AgentRuntime::open(db, Arc::new(clock.clone()), out_dir.clone()).await?;

    let written = write_one(&rt, "task-1", ARTICLE_REQUEST).await?;
    let mut routed = Vec::new();
    for (task, request) in [
        ("task-2", "Summarize: Cairn keeps a log of every step"),
        ("task-3", "  summarize:  CAIRN keeps a log of every step "),
        ("task-4", "That article was long"),
        ("task-5", "What time is it in Lisbon?"),
    ] {
        routed.push(route_one(&rt, task, request).await?);
    }
    // Ten minutes on, the cached decision has expired: routed afresh.
    clock.advance_ms(router::CACHE_TTL_MS + 60_000);
    routed.push(route_one(&rt, "task-6", "Summarize: Cairn keeps a log of every step").await?);
    let cancelled = cancel_one(&rt, "task-7", "Write an article about cancellation").await?;
    let cache = rt.cache_stats();

    // Two articles are being written when the power goes.
    let mut ui_a = rt.stream("task-8");
    let mut ui_b = rt.stream("task-9");
    let a = rt.submit("task-8", ARTICLE_REQUEST).await?;
    let b = rt.submit("task-9", "Write an article about exactly-once effects").await?;
    first_chunk(&mut ui_a).await?;
    first_chunk(&mut ui_b).await?;
    drop((a, b));
    rt.crash().await;

    // The next process: both tasks are offered for resumption, their file locks still held.
    let rt = AgentRuntime::open(db, Arc::new(clock.clone()), out_dir).await?;
    let resumable = rt.resumable_tasks().await?;
    let locks_after_restart = rt.locks()?;
    let resumed = rt.resume_task("task-8").await?.output().await?;
    rt.abandon_task("task-9").await?;
    let restarted = Restarted {
        resumable,
        locks_after_restart,
        resumed_status: rt.engine().thread("task-8").await?.status().await?,
        resumed: resumed.article,
        uninterrupted: written.article.clone(),
        model_calls_after_restart: rt.model_calls("task-8"),
        router_after_restart: rt.cache_stats(),
        progress: rt.progress("task-8")?,
        abandoned_status: rt.engine().thread("task-9").await?.status().await?,
        locks_after: rt.locks()?,
    };
    let stalled = stall_one(&rt, &clock, "task-10", "Write an article about watchdogs").await?;
    rt.shutdown().await;
    Ok(Summary { routed, cache, written, cancelled, restarted, stalled })
}

async fn write_one(rt: &AgentRuntime, task: &str, request: &str) -> anyhow::Result<Written> {
    let out = rt.submit(task, request).await?.output().await?;
    let file = std::fs::read_to_string(rt.out_dir().join(&out.article.path))?;
    Ok(Written {
        task: task.to_owned(),
        progress: rt.progress(task)?,
        file,
        locks_after: rt.locks()?,
        telemetry: rt.telemetry(task).await?,
        article: out.article,
    })
}

async fn route_one(rt: &AgentRuntime, task: &str, request: &str) -> anyhow::Result<Routed> {
    let handle = rt.submit(task, request).await?;
    let outcome = handle.finished().await?;
    let state = match outcome.output {
        Some(state) => state,
        None => anyhow::bail!("{task} ended {} without output", outcome.status),
    };
    let intent = state.intent.ok_or_else(|| anyhow::anyhow!("{task} was not routed"))?;
    Ok(Routed { task: task.to_owned(), intent, status: outcome.status, reply: state.reply })
}

async fn cancel_one(rt: &AgentRuntime, task: &str, request: &str) -> anyhow::Result<Cancelled> {
    let mut ui = rt.stream(task);
    let handle = rt.submit(task, request).await?;
    // The user reads the first sentence, then presses stop.
    let chunks_seen = vec![first_chunk(&mut ui).await?];
    let locks_while_writing = rt.locks()?;
    rt.cancel(task, "the user pressed stop").await?;
    let status = handle.finished().await?.status;
    let path = format!("posts/{}.md", skills::slug("cancellation"));
    Ok(Cancelled {
        task: task.to_owned(),
        chunks_seen,
        locks_while_writing,
        status,
        progress: rt.progress(task)?,
        locks_after: rt.locks()?,
        file_exists: rt.out_dir().join(path).exists(),
    })
}

/// The UI reads one sentence and stops reading: the stream holds the model call (back-pressure)
/// until the watchdog's five minutes pass on the engine clock.
async fn stall_one(
    rt: &AgentRuntime,
    clock: &ManualClock,
    task: &str,
    request: &str,
) -> anyhow::Result<Stalled> {
    let mut ui = rt.stream(task);
    let handle = rt.submit(task, request).await?;
    first_chunk(&mut ui).await?;
    let locks_while_stalled = rt.locks()?;
    clock.advance_ms(skills::WATCHDOG_MS);
    let outcome = handle.finished().await?;
    drop(ui);
    Ok(Stalled {
        task: task.to_owned(),
        locks_while_stalled,
        status: outcome.status,
        error: outcome.error,
        locks_after: rt.locks()?,
    })
}

async fn first_chunk(ui: &mut mpsc::Receiver<String>) -> anyhow::Result<String> {
    ui.recv().await.ok_or_else(|| anyhow::anyhow!("the stream closed before its first chunk"))
}
