//! Budgets: a crawler that may call its fetch tool a limited number of times, warned as it
//! nears the limit, stopped at it, and resumed after an operator raises it.
//!
//! The workflow's [`Budgets`] allow 5 tool calls and warn at 60% of that. The thread fetches
//! one page per step: at 3 calls a `budget_warning` event is written and the thread goes on; at
//! 5 calls a `budget_exceeded` event is written and the thread stops cleanly, Paused at a step
//! boundary (nothing half done, nothing lost). The operator raises the budget with
//! [`Engine::set_budgets`] (recorded as an event) and resumes it: it fetches the remaining
//! pages, without fetching any page twice.
//!
//! ```text
//! START -> fetch --route--> fetch (until every page is fetched)
//!                  \------> report -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Budgets, Ctx, NodeOutput, State, Workflow};
use cairn::event::Body;
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use serde::{Deserialize, Serialize};

/// Pages the crawler fetches.
pub const PAGES: u32 = 8;

/// The tool-call budget the workflow starts with.
pub const FIRST_BUDGET: u64 = 5;

/// The budget the operator raises it to.
pub const RAISED_BUDGET: u64 = 20;

/// The crawl: pages fetched so far, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crawl {
    /// What each fetch returned.
    pub fetched: Vec<String>,
    /// The final report.
    pub report: Option<String>,
}

/// A change to the crawl.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Change {
    /// One more page.
    Fetched(String),
    /// The report.
    Report(String),
}

impl State for Crawl {
    type Update = Change;
    fn apply(&mut self, change: Change) {
        match change {
            Change::Fetched(page) => self.fetched.push(page),
            Change::Report(report) => self.report = Some(report),
        }
    }
}

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Where the thread stopped the first time.
    pub stopped: ThreadStatus,
    /// The budget events of the log, in order: (kind, budget, used, limit).
    pub budget_events: Vec<(String, String, u64, u64)>,
    /// Pages fetched when it stopped.
    pub fetched_when_stopped: usize,
    /// Its final status after the raise and resume.
    pub finished: ThreadStatus,
    /// The final crawl.
    pub crawl: Crawl,
}

/// The crawler workflow.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow() -> Result<Workflow<Crawl>, cairn::dsl::BuildError> {
    let budgets =
        Budgets { max_tool_calls: Some(FIRST_BUDGET), warn_fraction: 0.6, ..Budgets::default() };
    Workflow::<Crawl>::builder("crawler", 1)
        .node("fetch", |c: Arc<Crawl>, ctx: Ctx| async move {
            let page = c.fetched.len() as u32 + 1;
            let body: String = ctx
                .tool("http.get", page, |page: u32, _| async move {
                    Ok::<_, ToolError>(format!("page {page}: {} bytes", 1_000 + page * 37))
                })
                .await?;
            Ok(NodeOutput::update(Change::Fetched(body)))
        })
        .route(
            "fetch",
            |c: &Crawl| if (c.fetched.len() as u32) < PAGES { "fetch" } else { "report" },
            ["fetch", "report"],
        )
        .loop_bound("fetch", PAGES)
        .node("report", |c: Arc<Crawl>, _ctx| async move {
            Ok(NodeOutput::update(Change::Report(format!("{} pages fetched", c.fetched.len()))))
        })
        .edge(START, "fetch")
        .edge("report", END)
        .budgets(budgets)
        .build()
}

/// Runs the crawl on `db`.
///
/// # Errors
/// Engine errors; an error when the thread does not behave as described.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let t = engine.start(&wf, Crawl::default(), StartOptions::id("crawl-1")).await?;
    let stopped = t.wait().await?.status;
    let fetched_when_stopped =
        cairn_tools::Operator::new(&engine).state_at("crawl-1", None).await?.state["fetched"]
            .as_array()
            .map_or(0, Vec::len);

    // The operator raises the budget and resumes the thread.
    let raised = Budgets { max_tool_calls: Some(RAISED_BUDGET), ..wf.as_dyn().budgets().clone() };
    engine.set_budgets("crawl-1", raised).await?;
    engine.resume("crawl-1").await?;
    let finished = t.finished().await?.status;
    let crawl = t.output().await?;

    let mut budget_events = Vec::new();
    let mut events = t.events(0)?;
    while let Some(e) = events.try_next().await? {
        if let Body::Budget { budget, used, limit } = e.body {
            let kind = if used >= limit { "exceeded" } else { "warning" };
            budget_events.push((kind.to_owned(), budget, used, limit));
        }
    }
    engine.shutdown().await;
    Ok(Summary { stopped, budget_events, fetched_when_stopped, finished, crawl })
}
