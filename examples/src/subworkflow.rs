//! Sub-workflow: a parent runs a child workflow as one of its nodes, mapping its state in and the
//! child's final state back out.

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, State, Workflow};
use cairn::{END, Engine, START, StartOptions};
use serde::{Deserialize, Serialize};

/// The parent's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Item prices in cents.
    pub items: Vec<u64>,
    /// Total with tax, computed by the child.
    pub total: u64,
    /// Whether it shipped.
    pub shipped: bool,
}

impl State for Order {
    type Update = (Option<u64>, bool);
    fn apply(&mut self, (total, shipped): Self::Update) {
        if let Some(t) = total {
            self.total = t;
        }
        self.shipped |= shipped;
    }
}

/// The child: sum, then add 10% tax, over a `Replace<Vec<u64>>` state whose last element ends up
/// being the total.
///
/// # Errors
/// Never for this definition.
pub fn pricing() -> Result<Workflow<Replace<Vec<u64>>>, cairn::dsl::BuildError> {
    Workflow::<Replace<Vec<u64>>>::builder("pricing", 1)
        .node("sum", |s: Arc<Replace<Vec<u64>>>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(vec![s.0.iter().sum()]))
        })
        .node("tax", |s: Arc<Replace<Vec<u64>>>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(vec![s.0[0] * 11 / 10]))
        })
        .edge(START, "sum")
        .edge("sum", "tax")
        .edge("tax", END)
        .build()
}

/// price (sub-workflow) -> ship -> END.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Order>, cairn::dsl::BuildError> {
    Workflow::<Order>::builder("order", 1)
        .subgraph(
            "price",
            pricing()?,
            |s: &Order| Replace(s.items.clone()),
            |c: &Replace<Vec<u64>>| (c.0.first().copied(), false),
        )
        .node(
            "ship",
            |_s: Arc<Order>, _ctx: Ctx| async move { Ok(NodeOutput::update((None, true))) },
        )
        .edge(START, "price")
        .edge("price", "ship")
        .edge("ship", END)
        .build()
}

/// Runs one order; returns it and the child thread's id.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<(Order, Vec<String>)> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let input = Order { items: vec![1_000, 250, 750], ..Order::default() };
    let out = engine.start(&wf, input, StartOptions::id("order-1")).await?.output().await?;
    let children = engine
        .store()
        .list_threads(
            &cairn::storage::ThreadFilter {
                labels: vec![("parent".into(), "order-1".into())],
                ..Default::default()
            },
            cairn::storage::Page { limit: 10, offset: 0 },
        )
        .wait()?
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    engine.shutdown().await;
    Ok((out, children))
}
