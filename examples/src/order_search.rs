//! Search attributes: orders label themselves as they go (`customer` at the start, `stage` as
//! they move from payment to shipping), and the store answers "every order of customer c-2
//! waiting for payment" through its label and status index, not by reading every thread. A
//! label change is an event: replay and forks see it like the rest of the log.
//!
//! ```text
//! START -> take (labels customer, stage=payment) -> pay (waits) -> ship (stage=shipping) -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::storage::{Page, ThreadFilter, ThreadStatus};
use cairn::{END, Engine, START, StartOptions};
use serde::{Deserialize, Serialize};

/// An order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Its customer.
    pub customer: String,
    /// Whether it was paid.
    pub paid: bool,
}

/// The order workflow.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow() -> Result<Workflow<Replace<Order>>, cairn::dsl::BuildError> {
    Workflow::<Replace<Order>>::builder("order", 1)
        .node("take", |s: Arc<Replace<Order>>, ctx: Ctx| async move {
            ctx.set_label("customer", &s.0.customer)?;
            ctx.set_label("stage", "payment")?;
            Ok(NodeOutput::update(s.0.clone()))
        })
        .node("pay", |s: Arc<Replace<Order>>, ctx: Ctx| async move {
            let paid: bool = ctx.interrupt("payment?")?;
            Ok(NodeOutput::update(Order { paid, ..s.0.clone() }))
        })
        .node("ship", |s: Arc<Replace<Order>>, ctx: Ctx| async move {
            ctx.set_label("stage", "shipping")?;
            Ok(NodeOutput::update(s.0.clone()))
        })
        .edge(START, "take")
        .edge("take", "pay")
        .edge("pay", "ship")
        .edge("ship", END)
        .build()
}

/// The orders of the example: (id, customer).
pub const ORDERS: [(&str, &str); 6] = [
    ("o-1", "c-1"),
    ("o-2", "c-2"),
    ("o-3", "c-2"),
    ("o-4", "c-3"),
    ("o-5", "c-2"),
    ("o-6", "c-1"),
];

/// The orders paid before the search.
pub const PAID: [&str; 2] = ["o-1", "o-3"];

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Customer c-2's orders waiting for payment.
    pub c2_waiting: Vec<String>,
    /// Every order in stage `shipping` (ended or not).
    pub shipping: Vec<String>,
}

/// Takes the [`ORDERS`] on `db`, pays the [`PAID`] ones, then searches.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    for (id, customer) in ORDERS {
        let order = Order { customer: customer.into(), paid: false };
        engine.start(&wf, Replace(order), StartOptions::id(id)).await?.wait().await?;
    }
    for id in PAID {
        engine.send_input(id, true).await?;
        engine.thread(id).await?.wait().await?;
    }
    let ids = |records: Vec<cairn::storage::ThreadRecord>| {
        records.into_iter().map(|r| r.id.to_string()).collect::<Vec<_>>()
    };
    let page = Page { limit: 100, offset: 0 };
    let waiting = ThreadFilter { status: Some(ThreadStatus::WaitingInput), ..Default::default() }
        .label("customer", "c-2")
        .label("stage", "payment");
    let c2_waiting = ids(engine.store().list_threads(&waiting, page).await?);
    let shipping = ThreadFilter::default().label("stage", "shipping");
    let shipping = ids(engine.store().list_threads(&shipping, page).await?);
    engine.shutdown().await;
    Ok(Summary { c2_waiting, shipping })
}
