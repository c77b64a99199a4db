//! Map-reduce: a map node runs once per item produced at run time; the results are reduced in
//! item order, whatever order the tasks finish in.

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::{END, Engine, START, StartOptions, ToolError};
use serde::{Deserialize, Serialize};

/// The state: documents in, summaries out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Corpus {
    /// Documents.
    pub docs: Vec<String>,
    /// One summary per document, in document order.
    pub summaries: Vec<String>,
    /// Total length of the summaries.
    pub total: usize,
}

impl State for Corpus {
    type Update = CorpusUpdate;
    fn apply(&mut self, u: CorpusUpdate) {
        match u {
            CorpusUpdate::Summary(s) => self.summaries.push(s),
            CorpusUpdate::Total(t) => self.total = t,
        }
    }
}

/// Updates of [`Corpus`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum CorpusUpdate {
    /// One more summary.
    Summary(String),
    /// The reduced total.
    Total(usize),
}

/// summarise (map over docs) -> total -> END.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Corpus>, cairn::dsl::BuildError> {
    Workflow::<Corpus>::builder("map-reduce", 1)
        .map(
            "summarise",
            |s: &Corpus| s.docs.clone(),
            |_s: Arc<Corpus>, ctx: Ctx| async move {
                let doc: String = ctx.item()?;
                // Later items finish first: the reduction order must not care.
                let delay = 20u64.saturating_sub(doc.len() as u64);
                let summary: String = ctx
                    .tool("summarise", doc, move |d: String, _| async move {
                        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                        Ok::<_, ToolError>(d.split_whitespace().next().unwrap_or("").to_owned())
                    })
                    .await?;
                Ok(NodeOutput::update(CorpusUpdate::Summary(summary)))
            },
        )
        .node("total", |s: Arc<Corpus>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(CorpusUpdate::Total(s.summaries.iter().map(String::len).sum())))
        })
        .edge(START, "summarise")
        .edge("summarise", "total")
        .edge("total", END)
        .build()
}

/// Runs the map-reduce over five documents.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Corpus> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let docs = ["alpha one", "beta two two", "gamma three three three", "delta", "epsilon five"];
    let input =
        Corpus { docs: docs.iter().map(|d| (*d).to_owned()).collect(), ..Corpus::default() };
    let out = engine.start(&wf, input, StartOptions::id("mr-1")).await?.output().await?;
    engine.shutdown().await;
    Ok(out)
}
