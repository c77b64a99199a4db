//! Updates: a credit application that waits for a decision while its limit is changed from
//! outside, each change validated, applied between steps and answered to the caller.
//!
//! The `decide` node waits for the `decision` signal ([`Ctx::recv`]), so the thread is parked
//! (WaitingInput) most of its life. The workflow declares the update [`RAISE`]
//! (`WorkflowBuilder::update`): its validator refuses a limit that is not higher than the
//! current one or over the cap (nothing is written then), its handler sets the limit and replies
//! the old one. [`cairn::ThreadHandle::update`] (or `Engine::update`, `POST
//! /api/threads/{id}/updates/raise`, `cairn update`) applies it to the parked thread, which
//! stays in its wait; the reply comes once the `update_applied` event is durable. An update id
//! makes a retry safe: the same id answers the recorded reply and applies nothing, after a
//! restart too. `Engine::update_with_start` creates an application and raises its limit in one
//! call. The decision then arrives as a signal and the thread ends with the limit the updates
//! set.
//!
//! ```text
//! START -> decide -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, UpdateDef, Workflow};
use cairn::{END, Engine, START, StartOptions, UpdateOptions};
use serde::{Deserialize, Serialize};

/// The workflow's id.
pub const WORKFLOW: &str = "credit";

/// The highest limit an update may set.
pub const CAP: u64 = 10_000;

/// Raises the limit to its argument; replies the old limit.
pub const RAISE: UpdateDef<u64, u64> = UpdateDef::new("raise");

/// A credit application.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credit {
    /// The limit, in euros.
    pub limit: u64,
    /// The decision, once made.
    pub decision: Option<String>,
}

/// The workflow: waits for the `decision` signal; the limit may be raised meanwhile.
///
/// # Panics
/// Never: the definition is valid.
pub fn workflow() -> Workflow<Replace<Credit>> {
    Workflow::<Replace<Credit>>::builder(WORKFLOW, 1)
        .node("decide", |s: Arc<Replace<Credit>>, ctx: Ctx| async move {
            let decision: String = ctx.recv("decision").await?;
            Ok(NodeOutput::update(Credit { decision: Some(decision), ..s.0.clone() }))
        })
        .edge(START, "decide")
        .edge("decide", END)
        .update(
            RAISE,
            |s: &Replace<Credit>, to: &u64| match *to {
                to if to <= s.0.limit => Err(format!("the limit is {} already", s.0.limit)),
                to if to > CAP => Err(format!("{to} is over the cap of {CAP}")),
                _ => Ok(()),
            },
            |s: &mut Replace<Credit>, to: u64| Ok(std::mem::replace(&mut s.0.limit, to)),
        )
        .build()
        .expect("a valid workflow")
}

/// What the run saw.
#[derive(Debug)]
pub struct Summary {
    /// The old limit the first raise replied.
    pub first_reply: u64,
    /// The reply of the same update id sent again after a restart (the recorded one).
    pub retried_reply: u64,
    /// Whether the retry was answered as a duplicate.
    pub retry_was_duplicate: bool,
    /// The validator's refusal of a limit over the cap.
    pub refused: String,
    /// The first application when it ended.
    pub decided: Credit,
    /// The application update-with-start created, with its limit.
    pub started: Credit,
}

/// Runs the example on a database at `db`.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> Result<Summary, cairn::Error> {
    let wf = workflow();
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let input = Replace(Credit { limit: 1_000, decision: None });
    let app = engine.start(&wf, input, StartOptions::id("c-1")).await?;
    app.wait().await?; // parked in ctx.recv("decision")
    let first_reply = app.update_with(RAISE, 2_500, UpdateOptions::id("raise-1")).await?;
    let refused = match app.update(RAISE, 50_000).await {
        Err(e) => e.to_string(),
        Ok(old) => format!("accepted (old limit {old})"),
    };
    engine.shutdown().await;
    drop((app, engine));

    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let again = engine.update("c-1", RAISE.name(), 2_500, UpdateOptions::id("raise-1")).await?;
    let retried_reply = serde_json::from_value(again.reply)?;
    engine.signal("c-1", "decision", "approved").await?;
    let decided = engine.thread_of(&wf, "c-1").await?.output().await?.0;

    let input = Replace(Credit { limit: 500, decision: None });
    let options = UpdateOptions::id("raise-2");
    let c2 = StartOptions::id("c-2");
    engine.update_with_start(WORKFLOW, input, c2, RAISE.name(), 800, options).await?;
    engine.signal("c-2", "decision", "declined").await?;
    let started = engine.thread_of(&wf, "c-2").await?.output().await?.0;
    engine.shutdown().await;
    Ok(Summary {
        first_reply,
        retried_reply,
        retry_was_duplicate: again.duplicate,
        refused,
        decided,
        started,
    })
}
