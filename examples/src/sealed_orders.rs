//! Protection at rest: an order workflow whose card numbers, receipts and approvals never reach
//! the database file in the clear (docs/encryption.md).
//!
//! The engine is opened with a payload codec ([`cairn::EngineBuilder::payload_codec`]): the
//! ready AES-256-GCM one, [`AesGcmCodec`], over a key ring. Every body it stores (the input,
//! each state update, the `charge` tool's input and result, the `approve` signal, every
//! checkpoint) is sealed with the active key, and opened when read; ids, names, labels and
//! timestamps stay clear. The example then rotates the key (`k2` seals from now on, `k1` still
//! opens the first order), and opens the file without any key: the order's output is the
//! error naming the key it needs, never garbage.
//!
//! ```text
//! START -> charge -> approve -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::sealing::AesGcmCodec;
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use serde::{Deserialize, Serialize};

/// The workflow's id.
pub const WORKFLOW: &str = "sealed-order";

/// The card number of the example's orders: the secret to look for in the file.
pub const CARD: &str = "4111 1111 1111 1111";

/// An order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The card it is paid with.
    pub card: String,
    /// The payment service's receipt, once charged.
    pub receipt: Option<String>,
    /// Who approved it.
    pub approved_by: Option<String>,
}

/// What a node changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum OrderUpdate {
    /// Charged, with this receipt.
    Charged(String),
    /// Approved by this person.
    Approved(String),
}

impl State for Order {
    type Update = OrderUpdate;
    fn apply(&mut self, update: OrderUpdate) {
        match update {
            OrderUpdate::Charged(receipt) => self.receipt = Some(receipt),
            OrderUpdate::Approved(by) => self.approved_by = Some(by),
        }
    }
}

/// START -> charge (a recorded tool call) -> approve (waits for the `approve` signal) -> END.
///
/// # Panics
/// Never: the graph is valid.
pub fn workflow() -> Workflow<Order> {
    Workflow::<Order>::builder(WORKFLOW, 1)
        .node("charge", |order: Arc<Order>, ctx: Ctx| async move {
            let card = order.card.clone();
            let receipt: String = ctx
                .tool("charge", card, |card: String, _| async move {
                    let last4 = card.chars().rev().take(4).collect::<String>();
                    Ok::<String, ToolError>(format!("receipt for card ending {last4}"))
                })
                .await?;
            Ok(NodeOutput::update(OrderUpdate::Charged(receipt)))
        })
        .node("approve", |_order, ctx: Ctx| async move {
            let by: String = ctx.recv("approve").await?;
            Ok(NodeOutput::update(OrderUpdate::Approved(by)))
        })
        .edge(START, "charge")
        .edge("charge", "approve")
        .edge("approve", END)
        .build()
        .expect("a valid graph")
}

/// What the example saw.
#[derive(Debug)]
pub struct Summary {
    /// The first order, sealed with `k1`, read back after the rotation.
    pub first: Order,
    /// The second order, sealed with `k2`.
    pub second: Order,
    /// Whether the card number is anywhere in the database file in the clear.
    pub card_in_file: bool,
    /// What reading the first order without any key answered.
    pub without_key: String,
}

/// Two 32-byte demonstration keys (a real deployment reads them from a secret store, or from
/// `CAIRN_KEYS` with `AesGcmCodec::from_env`).
const K1: [u8; 32] = [0x11; 32];
const K2: [u8; 32] = [0x22; 32];

/// Runs the example on the database file at `path`.
///
/// # Errors
/// Engine errors.
pub async fn run(path: &Path) -> anyhow::Result<Summary> {
    let wf = workflow();
    let ring = AesGcmCodec::new("k1", K1)?;
    let engine = open(path, &wf, Some(ring)).await?;
    order(&engine, "order-1", "ann").await?;
    engine.shutdown().await;
    drop(engine);

    // Rotation: k2 seals from now on; k1 stays in the ring to open what it sealed.
    let ring = AesGcmCodec::new("k2", K2)?.with_key("k1", K1)?;
    let engine = open(path, &wf, Some(ring)).await?;
    order(&engine, "order-2", "bob").await?;
    let first = engine.thread("order-1").await?.output::<Order>().await?;
    let second = engine.thread("order-2").await?.output::<Order>().await?;
    engine.shutdown().await;
    drop(engine);

    let bytes = std::fs::read(path)?;
    let card_in_file = bytes.windows(CARD.len()).any(|w| w == CARD.as_bytes());
    let engine = open(path, &wf, None).await?;
    let without_key = match engine.thread("order-1").await?.output::<Order>().await {
        Ok(order) => format!("read without a key: {order:?}"),
        Err(e) => e.to_string(),
    };
    engine.shutdown().await;
    Ok(Summary { first, second, card_in_file, without_key })
}

/// An engine on `path` sealing with `ring` (none: a sealed body read is an error naming its
/// key), checkpointing every step so snapshots are sealed too.
async fn open(
    path: &Path,
    wf: &Workflow<Order>,
    ring: Option<AesGcmCodec>,
) -> Result<Engine, cairn::Error> {
    let builder = Engine::builder(path).workflow(wf).checkpoint_every(Some(1), None);
    let builder = match ring {
        Some(ring) => builder.payload_codec(Arc::new(ring)),
        None => builder.sealed_without_key(),
    };
    builder.open().await
}

/// Starts order `id`, lets it charge, approves it as `by` and waits for its end.
async fn order(engine: &Engine, id: &str, by: &str) -> anyhow::Result<()> {
    let input = Order { card: CARD.into(), ..Order::default() };
    let thread = engine.start_json(WORKFLOW, input, StartOptions::id(id)).await?;
    anyhow::ensure!(thread.wait().await?.status == ThreadStatus::WaitingInput, "waits to approve");
    engine.signal(id, "approve", by).await?;
    anyhow::ensure!(thread.finished().await?.status == ThreadStatus::Completed, "completed");
    Ok(())
}
