//! Routing with a bounded loop: draft, review, and route back to draft until approved (at most
//! four drafts).

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::{END, Engine, START, StartOptions};
use serde::{Deserialize, Serialize};

/// The state: drafts written and the verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// Quality the reviewer wants.
    pub bar: u32,
    /// Quality of each draft, in order.
    pub drafts: Vec<u32>,
    /// Whether the last draft passed.
    pub approved: bool,
}

impl State for Review {
    type Update = (Option<u32>, Option<bool>);
    fn apply(&mut self, (draft, verdict): Self::Update) {
        if let Some(q) = draft {
            self.drafts.push(q);
        }
        if let Some(v) = verdict {
            self.approved = v;
        }
    }
}

/// draft -> review --route--> (draft | publish), the loop bounded at four drafts.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Review>, cairn::dsl::BuildError> {
    Workflow::<Review>::builder("routing", 1)
        .node("draft", |s: Arc<Review>, _ctx: Ctx| async move {
            // Each draft is better than the last.
            let quality = 3 * (s.drafts.len() as u32 + 1);
            Ok(NodeOutput::update((Some(quality), None)))
        })
        .node("review", |s: Arc<Review>, _ctx: Ctx| async move {
            let ok = s.drafts.last().copied().unwrap_or(0) >= s.bar;
            Ok(NodeOutput::update((None, Some(ok))))
        })
        .node("publish", |_s: Arc<Review>, _ctx: Ctx| async move { Ok(NodeOutput::none()) })
        .edge(START, "draft")
        .edge("draft", "review")
        .route(
            "review",
            |s: &Review| if s.approved || s.drafts.len() >= 4 { "publish" } else { "draft" },
            ["draft", "publish"],
        )
        .loop_bound("draft", 4)
        .edge("publish", END)
        .build()
}

/// Runs two threads: one that passes on the third draft, one that never passes and stops at the
/// bound.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<(Review, Review)> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let easy =
        engine.start(&wf, Review { bar: 9, ..Review::default() }, StartOptions::id("easy")).await?;
    let hard = engine
        .start(&wf, Review { bar: 100, ..Review::default() }, StartOptions::id("hard"))
        .await?;
    let out = (easy.output().await?, hard.output().await?);
    engine.shutdown().await;
    Ok(out)
}
