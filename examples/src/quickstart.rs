//! Quickstart: a linear pipeline of three nodes, one of which calls a (memoised) tool.

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::{END, Engine, START, StartOptions, ToolError};
use serde::{Deserialize, Serialize};

/// The pipeline's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doc {
    /// Input text.
    pub text: String,
    /// Word count.
    pub words: usize,
    /// Shouted text.
    pub shout: String,
}

/// Updates of [`Doc`]: each sets one field.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum DocUpdate {
    /// Set the word count.
    Words(usize),
    /// Set the shouted text.
    Shout(String),
}

impl State for Doc {
    type Update = DocUpdate;
    fn apply(&mut self, u: DocUpdate) {
        match u {
            DocUpdate::Words(n) => self.words = n,
            DocUpdate::Shout(s) => self.shout = s,
        }
    }
}

/// The quickstart workflow: count -> shout -> END.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Doc>, cairn::dsl::BuildError> {
    Workflow::<Doc>::builder("quickstart", 1)
        .node("count", |s: Arc<Doc>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(DocUpdate::Words(s.text.split_whitespace().count())))
        })
        .node("shout", |s: Arc<Doc>, ctx: Ctx| async move {
            // A tool call: recorded before and after, never repeated once its result is stored.
            let loud: String = ctx
                .tool("uppercase", s.text.clone(), |t: String, _| async move {
                    Ok::<_, ToolError>(t.to_uppercase())
                })
                .await?;
            Ok(NodeOutput::update(DocUpdate::Shout(loud)))
        })
        .edge(START, "count")
        .edge("count", "shout")
        .edge("shout", END)
        .build()
}

/// Runs the quickstart on a database at `db` and returns the final state.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Doc> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let input = Doc { text: "hello durable world".into(), ..Doc::default() };
    let thread = engine.start(&wf, input, StartOptions::id("quickstart-1")).await?;
    let out = thread.output().await?;
    engine.shutdown().await;
    Ok(out)
}
