//! Event triggers: two workflows subscribe to `order.created` (`on_event`), and a webhook
//! delivers each order's event, some of them twice (a retry after a timeout) and one again after
//! a restart. Each event starts one `ship` and one `invoice` thread, on the event's payload, once
//! per event id: the repeated deliveries start nothing more and answer the same threads.
//!
//! ```text
//! emit("order.created", "order-N", {order}) -> ship:    START -> ship    -> END
//!                                           -> invoice: START -> invoice -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{END, Engine, START};
use serde::{Deserialize, Serialize};

/// An order, the payload of its event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Its number.
    pub number: u32,
    /// What was done with it (`shipped`, `invoiced`).
    pub done: String,
}

/// A workflow subscribed to `order.created` that marks the order `what`.
///
/// # Errors
/// A build error (none for this graph).
pub fn subscriber(
    id: &str,
    what: &'static str,
) -> Result<Workflow<Replace<Order>>, cairn::dsl::BuildError> {
    Workflow::<Replace<Order>>::builder(id, 1)
        .on_event("order.created")
        .node(id, move |s: Arc<Replace<Order>>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(Order { done: what.to_owned(), ..s.0.clone() }))
        })
        .edge(START, id)
        .edge(id, END)
        .build()
}

/// What the deliveries did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Deliveries made (repeats included).
    pub deliveries: usize,
    /// Threads the deliveries created.
    pub created: usize,
    /// Every thread of an event, finished, with its output's `done`, in id order.
    pub threads: Vec<(String, String)>,
}

/// Delivers three orders' events on `db` (two of them twice, one again after a restart).
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let (ship, invoice) = (subscriber("ship", "shipped")?, subscriber("invoice", "invoiced")?);
    let open = || Engine::builder(db).workflow(&ship).workflow(&invoice).open();
    let order = |n: u32| serde_json::json!({ "number": n, "done": "" });
    let mut created = 0;
    let engine = open().await?;
    // The webhook retries orders 1 and 2 after a timeout: the same event ids.
    for n in [1, 2, 1, 3, 2] {
        let emitted = engine.emit("order.created", &format!("order-{n}"), order(n)).await?;
        created += emitted.threads.iter().filter(|t| t.created).count();
    }
    engine.shutdown().await;
    drop(engine);
    // After a restart, order 3 is delivered once more: still once per event id.
    let engine = open().await?;
    let again = engine.emit("order.created", "order-3", order(3)).await?;
    created += again.threads.iter().filter(|t| t.created).count();
    let mut threads = Vec::new();
    for n in 1..=3 {
        for workflow in ["invoice", "ship"] {
            let id = cairn::event_thread_id(&format!("order-{n}"), workflow);
            let out: Order = engine.thread(&id).await?.output::<Replace<Order>>().await?.0;
            threads.push((id, out.done));
        }
    }
    engine.shutdown().await;
    Ok(Summary { deliveries: 6, created, threads })
}
