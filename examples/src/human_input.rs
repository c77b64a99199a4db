//! Human input: an expense approval that waits for a person, across a restart.
//!
//! The `approve` node asks a question with [`Ctx::interrupt`]. The thread parks in
//! `WaitingInput`: nothing of it stays in memory, and nothing runs until an answer arrives. The
//! example starts two expense reports, shuts the engine down while both wait, reopens the file as
//! a new process would, and answers them with [`Engine::send_input`]: one approved (the payment
//! tool runs), one rejected (the requester is told why). An answer to a thread that no longer
//! waits is refused with a clear error instead of being lost or applied twice.
//!
//! ```text
//! START -> approve --route--> pay ----> END
//!                    \------> reject -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, Message, NodeOutput, State, Workflow};
use cairn::thread_ctx::Waiting;
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An expense report waiting for a manager's decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expense {
    /// Report id.
    pub id: String,
    /// Who asks to be paid.
    pub requester: String,
    /// Amount in cents.
    pub amount_cents: u64,
    /// What it was for.
    pub purpose: String,
    /// The manager's decision, once given.
    pub decision: Option<Decision>,
    /// The payment's transfer reference, when paid.
    pub transfer: Option<String>,
    /// What the requester was told, when rejected.
    pub notice: Option<String>,
}

/// A manager's answer to the approval question (the human input).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Approved or not.
    pub approved: bool,
    /// Who decided.
    pub approver: String,
    /// Why.
    pub note: String,
}

/// What the `approve` node shows the manager.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPrompt {
    /// Report id.
    pub expense: String,
    /// Who asks.
    pub requester: String,
    /// Amount in cents.
    pub amount_cents: u64,
    /// What it was for.
    pub purpose: String,
}

/// Changes to an [`Expense`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpenseUpdate {
    /// The manager decided.
    Decided(Decision),
    /// The payment went out with this transfer reference.
    Paid(String),
    /// The requester was told of the rejection.
    Notified(String),
}

impl State for Expense {
    type Update = ExpenseUpdate;
    fn apply(&mut self, update: ExpenseUpdate) {
        match update {
            ExpenseUpdate::Decided(d) => self.decision = Some(d),
            ExpenseUpdate::Paid(t) => self.transfer = Some(t),
            ExpenseUpdate::Notified(n) => self.notice = Some(n),
        }
    }
}

/// The workflow's id.
pub const WORKFLOW: &str = "expense_approval";

/// The approval workflow: approve (asks a human) -> pay | reject.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Expense>, cairn::dsl::BuildError> {
    Workflow::<Expense>::builder(WORKFLOW, 1)
        .node("approve", |e: Arc<Expense>, ctx: Ctx| async move {
            let prompt = ApprovalPrompt {
                expense: e.id.clone(),
                requester: e.requester.clone(),
                amount_cents: e.amount_cents,
                purpose: e.purpose.clone(),
            };
            // The first run parks here (`?` hands the suspension to the engine); the run after
            // `send_input` gets the recorded answer.
            let decision: Decision = ctx.interrupt(prompt)?;
            Ok(NodeOutput::update(ExpenseUpdate::Decided(decision)))
        })
        .node("pay", |e: Arc<Expense>, ctx: Ctx| async move {
            // A recorded tool call: once it returned, it is never made again for this report.
            let request = (e.id.clone(), e.amount_cents);
            let transfer: String = ctx
                .tool("payments.transfer", request, |(id, cents): (String, u64), _| async move {
                    Ok::<_, ToolError>(format!("tr-{id}-{cents}"))
                })
                .await?;
            Ok(NodeOutput::update(ExpenseUpdate::Paid(transfer)))
        })
        .node("reject", |e: Arc<Expense>, ctx: Ctx| async move {
            let why = e.decision.as_ref().map(|d| d.note.as_str()).unwrap_or("no reason given");
            let notice = format!("Expense {} was not approved: {why}", e.id);
            ctx.message(Message::new("approvals", notice.clone()).to(e.requester.clone()));
            Ok(NodeOutput::update(ExpenseUpdate::Notified(notice)))
        })
        .edge(START, "approve")
        .route(
            "approve",
            |e: &Expense| match &e.decision {
                Some(d) if d.approved => "pay",
                _ => "reject",
            },
            ["pay", "reject"],
        )
        .edge("pay", END)
        .edge("reject", END)
        .build()
}

/// What a run of the example saw.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Status of each report before the restart, by id.
    pub before_restart: Vec<(String, ThreadStatus)>,
    /// Status of each report right after the reopen, before any answer.
    pub after_restart: Vec<(String, ThreadStatus)>,
    /// The question the approved report asked, as stored in its thread.
    pub prompt: Value,
    /// The approved report, final.
    pub approved: Expense,
    /// The rejected report, final.
    pub rejected: Expense,
    /// The error an answer to a finished report got.
    pub late_answer_error: String,
}

/// The ids of the two reports the example files.
pub const REPORTS: [&str; 2] = ["expense-approve", "expense-reject"];

/// Files two reports, restarts while both wait for a manager, then answers them.
///
/// # Errors
/// Engine errors; an error if a report does not wait for input when it should.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let wf = workflow()?;
    let reports = [
        Expense {
            id: REPORTS[0].into(),
            requester: "ada".into(),
            amount_cents: 12_900,
            purpose: "conference ticket".into(),
            ..Expense::default()
        },
        Expense {
            id: REPORTS[1].into(),
            requester: "bob".into(),
            amount_cents: 250_000,
            purpose: "espresso machine".into(),
            ..Expense::default()
        },
    ];

    // First process: file both reports; each parks when it asks for approval.
    let mut before_restart = Vec::new();
    {
        let engine = Engine::builder(db).workflow(&wf).open().await?;
        for report in &reports {
            let t = engine.start(&wf, report.clone(), StartOptions::id(&report.id)).await?;
            before_restart.push((report.id.clone(), t.wait().await?.status));
        }
        engine.shutdown().await;
        // The handles and the engine drop here: the file is closed, as at a process exit.
    }

    // Second process: the reports still wait; the manager answers.
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let mut after_restart = Vec::new();
    for report in &reports {
        after_restart.push((report.id.clone(), engine.thread(&report.id).await?.status().await?));
    }
    let prompt =
        match cairn_tools::Operator::new(&engine).state_at(REPORTS[0], None).await?.meta.waiting {
            Some(Waiting::Input { prompt, .. }) => prompt,
            other => anyhow::bail!("{} does not wait for input: {other:?}", REPORTS[0]),
        };
    let yes = Decision { approved: true, approver: "carol".into(), note: "budgeted".into() };
    let no = Decision { approved: false, approver: "carol".into(), note: "over the limit".into() };
    engine.send_input(REPORTS[0], &yes).await?;
    engine.send_input(REPORTS[1], &no).await?;
    let approved: Expense = engine.thread(REPORTS[0]).await?.output().await?;
    let rejected: Expense = engine.thread(REPORTS[1]).await?.output().await?;

    // The manager clicks again on a report that is already paid.
    let late_answer_error = match engine.send_input(REPORTS[0], &no).await {
        Ok(()) => anyhow::bail!("a second answer was accepted"),
        Err(e) => e.to_string(),
    };
    engine.shutdown().await;
    Ok(Summary { before_restart, after_restart, prompt, approved, rejected, late_answer_error })
}
