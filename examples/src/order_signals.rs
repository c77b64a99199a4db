//! Signals: an order workflow that waits for payment and shipping events sent from outside.
//!
//! The `pay` node receives a `payment` signal with [`Ctx::recv`]; until one is sent, the thread
//! parks (WaitingInput) with nothing of it in memory. Payments may come in parts: the node
//! receives signals until the order's total is paid, and a `cancel` signal, checked with
//! [`Ctx::try_recv`], stops it first. The `ship` node then waits for the carrier's `shipped`
//! signal. Signals are sent with [`Engine::signal`] (or `cairn signal ORDER NAME JSON`); they may
//! arrive before the node asks (they are buffered durably, in order per name), while the thread
//! runs, or while it is parked (it wakes). The example sends the first payment before the engine
//! restarts and the rest after, and shows that a signal to a finished order is refused. Each
//! signal is named by a [`SignalDef`] ([`PAYMENT`]: `"payment"`, whose values are [`Payment`]s),
//! used by the workflow's declaration (`.signal(PAYMENT)`), the node's receive and the sender's
//! [`cairn::ThreadHandle::signal`]: the compiler checks that all three agree. A payment sent by
//! name (`Engine::signal`, the endpoint, the command line) that is not a [`Payment`] is refused
//! at send, before anything is stored, and the order keeps waiting.
//!
//! ```text
//! START -> pay -> ship -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeError, NodeOutput, SignalDef, State, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use serde::{Deserialize, Serialize};

/// The workflow's id.
pub const WORKFLOW: &str = "order";

/// A payment towards an order.
pub const PAYMENT: SignalDef<Payment> = SignalDef::new("payment");
/// The customer cancels the order, saying why.
pub const CANCEL: SignalDef<String> = SignalDef::new("cancel");
/// The carrier took the parcel.
pub const SHIPPED: SignalDef<Shipped> = SignalDef::new("shipped");

/// An order and what happened to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Order id.
    pub id: String,
    /// What it costs, in cents.
    pub total_cents: u64,
    /// Payments received, in cents, in the order they were sent.
    pub payments: Vec<u64>,
    /// The carrier's tracking number, once shipped.
    pub tracking: Option<String>,
    /// Why it was cancelled, if it was.
    pub cancelled: Option<String>,
}

/// A `payment` signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// Amount in cents.
    pub amount_cents: u64,
}

/// A `shipped` signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shipped {
    /// The carrier's tracking number.
    pub tracking: String,
}

/// What a node changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum OrderUpdate {
    /// The payments received (all of them, in order).
    Paid(Vec<u64>),
    /// Cancelled before it was paid.
    Cancelled(String),
    /// Shipped.
    Shipped(String),
}

impl State for Order {
    type Update = OrderUpdate;
    fn apply(&mut self, update: OrderUpdate) {
        match update {
            OrderUpdate::Paid(p) => self.payments = p,
            OrderUpdate::Cancelled(why) => self.cancelled = Some(why),
            OrderUpdate::Shipped(t) => self.tracking = Some(t),
        }
    }
}

async fn pay(order: Arc<Order>, ctx: Ctx) -> Result<NodeOutput<OrderUpdate>, NodeError> {
    let mut paid = Vec::new();
    while paid.iter().sum::<u64>() < order.total_cents {
        // Every receive is recorded: when the thread wakes and this node runs again, the
        // payments it had are returned as before, and the next recv takes the next one.
        if let Some(why) = ctx.try_recv(CANCEL).await? {
            return Ok(NodeOutput::update(OrderUpdate::Cancelled(why)).goto(END));
        }
        let payment = ctx.recv(PAYMENT).await?;
        paid.push(payment.amount_cents);
    }
    Ok(NodeOutput::update(OrderUpdate::Paid(paid)))
}

async fn ship(_order: Arc<Order>, ctx: Ctx) -> Result<NodeOutput<OrderUpdate>, NodeError> {
    let shipped = ctx.recv(SHIPPED).await?;
    Ok(NodeOutput::update(OrderUpdate::Shipped(shipped.tracking)))
}

/// The order workflow.
///
/// # Panics
/// Never: the graph is valid.
pub fn workflow() -> Workflow<Order> {
    Workflow::<Order>::builder(WORKFLOW, 1)
        .node("pay", pay)
        .node("ship", ship)
        .edge(START, "pay")
        .edge("pay", "ship")
        .edge("ship", END)
        .gotos("pay", [END])
        .signal(PAYMENT)
        .signal(CANCEL)
        .signal(SHIPPED)
        .build()
        .expect("the order workflow is valid")
}

/// What the example saw.
#[derive(Debug)]
pub struct Summary {
    /// The paid order's status after the first part payment, before the restart.
    pub after_first_payment: ThreadStatus,
    /// The paid and shipped order.
    pub shipped: Order,
    /// The order cancelled before it was paid.
    pub cancelled: Order,
    /// The error a signal to the finished order got.
    pub late_signal_error: String,
    /// The error a payment that is not a [`Payment`] got (the order waiting for one).
    pub wrong_type_error: String,
}

/// Runs two orders: one paid in two parts (one before a restart, one after) and shipped, one
/// cancelled while it waits for payment.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let wf = workflow();
    let order = |id: &str| Order { id: id.into(), total_cents: 5_000, ..Order::default() };
    let after_first_payment = {
        let engine = Engine::builder(db).workflow(&wf).open().await?;
        let t = engine.start(&wf, order("o-1"), StartOptions::id("o-1")).await?;
        // Sent before the node asks: buffered.
        t.signal(PAYMENT, Payment { amount_cents: 2_000 }).await?;
        let status = t.wait().await?.status;
        engine.shutdown().await;
        status
    };
    // A new process: the order still waits for the rest of its payment.
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    // Sent by name, not a `Payment`: refused, nothing stored, the order still waiting.
    let wrong = engine.signal("o-1", "payment", serde_json::json!({"amount": "lots"})).await;
    let wrong_type_error = wrong.err().map(|e| e.to_string()).unwrap_or_default();
    let t = engine.thread_of(&wf, "o-1").await?;
    t.signal(PAYMENT, Payment { amount_cents: 3_000 }).await?;
    assert_eq!(t.wait().await?.status, ThreadStatus::WaitingInput, "waits for the carrier");
    t.signal(SHIPPED, Shipped { tracking: "1Z-999".into() }).await?;
    let shipped = t.output().await?;

    let c = engine.start(&wf, order("o-2"), StartOptions::id("o-2")).await?;
    c.wait().await?;
    c.signal(CANCEL, "the customer changed their mind".to_owned()).await?;
    // The cancel wakes nothing by itself (the node waits for a payment): the next payment
    // wakes it, and the node sees the cancel first.
    c.signal(PAYMENT, Payment { amount_cents: 100 }).await?;
    let cancelled = c.output().await?;

    let late = t.signal(PAYMENT, Payment { amount_cents: 1 }).await;
    let late_signal_error = late.err().map(|e| e.to_string()).unwrap_or_default();
    engine.shutdown().await;
    Ok(Summary { after_first_payment, shipped, cancelled, late_signal_error, wrong_type_error })
}
