//! Exactly-once effects through an idempotency key: a checkout charges a card through a payment
//! service that deduplicates requests by key, the way real payment APIs do (an
//! `Idempotency-Key` header).
//!
//! A tool call is recorded before it runs (`tool_called`) and after (`tool_returned`); a crash
//! between the two, or another engine taking the thread over, runs the call again (at least
//! once). [`cairn::dsl::ToolCtx::idempotency_key`] is the same in every run of one recorded call, so
//! the service sees the second request under the first one's key and answers with the charge it
//! already made: the card is charged once. The crash test of this example
//! (`examples/tests/payments_crash.rs`) crashes the checkout at every I/O operation and counts
//! the charges: `RELIABILITY payments ... double_charges=0`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::{END, Engine, NodeError, START, StartOptions, ToolError};
use serde::{Deserialize, Serialize};

/// A charge the payment service made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// The service's id of the charge (derived from the key: the same request, the same id).
    pub id: String,
    /// What was charged for (`order-1/items`, `order-1/shipping`).
    pub purpose: String,
    /// The amount, in cents.
    pub amount_cents: u64,
}

/// What the payment service saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Requests received (a request repeated under its key counts again).
    pub requests: u64,
    /// Requests answered with a charge made before under the same key.
    pub deduplicated: u64,
    /// Charges made, by purpose: more than one for a purpose is a double charge.
    pub charges: BTreeMap<String, u64>,
    /// Requests by purpose: what the charges would have been without the key.
    pub requests_by_purpose: BTreeMap<String, u64>,
}

impl Ledger {
    /// Purposes charged more than once.
    pub fn double_charges(&self) -> u64 {
        self.charges.values().filter(|n| **n > 1).map(|n| n - 1).sum()
    }

    /// Purposes requested more than once: the double charges a service that ignored the key
    /// would have made.
    pub fn repeated_requests(&self) -> u64 {
        self.requests_by_purpose.values().filter(|n| **n > 1).map(|n| n - 1).sum()
    }
}

/// A fake payment service, in memory, that deduplicates requests by idempotency key.
#[derive(Debug, Clone, Default)]
pub struct Payments {
    inner: Arc<Mutex<(HashMap<String, Charge>, Ledger)>>,
}

impl Payments {
    /// Charges `amount_cents` for `purpose` under `key`; a request under a key seen before
    /// returns the charge made then (and charges nothing).
    ///
    /// # Errors
    /// A request without a key is refused (a payment API that deduplicates needs one).
    pub fn charge(&self, key: &str, purpose: &str, amount_cents: u64) -> Result<Charge, String> {
        if key.is_empty() {
            return Err("an idempotency key is required".into());
        }
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (by_key, ledger) = &mut *guard;
        ledger.requests += 1;
        *ledger.requests_by_purpose.entry(purpose.to_owned()).or_default() += 1;
        if let Some(charge) = by_key.get(key) {
            ledger.deduplicated += 1;
            return Ok(charge.clone());
        }
        let charge = Charge {
            id: format!("ch_{}", &key[key.len().saturating_sub(12)..]),
            purpose: purpose.to_owned(),
            amount_cents,
        };
        *ledger.charges.entry(purpose.to_owned()).or_default() += 1;
        by_key.insert(key.to_owned(), charge.clone());
        Ok(charge)
    }

    /// What the service saw so far.
    pub fn ledger(&self) -> Ledger {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).1.clone()
    }

    /// Forgets every charge (a fresh service, between test cases).
    pub fn reset(&self) {
        *self.inner.lock().unwrap_or_else(PoisonError::into_inner) = Default::default();
    }
}

/// A checkout: an order's items and its shipping, each charged once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkout {
    /// The order's id.
    pub order: String,
    /// The items' price, in cents.
    pub items_cents: u64,
    /// The shipping price, in cents.
    pub shipping_cents: u64,
    /// The charges made, in order.
    pub charges: Vec<Charge>,
}

impl State for Checkout {
    type Update = Charge;
    fn apply(&mut self, charge: Charge) {
        self.charges.push(charge);
    }
}

/// Charges `amount_cents` for `purpose` through `payments`, passing the call's idempotency key.
async fn charge(
    payments: Payments,
    ctx: Ctx,
    purpose: String,
    amount_cents: u64,
) -> Result<NodeOutput<Charge>, NodeError> {
    let charge: Charge = ctx
        .tool(
            "charge_card",
            (purpose, amount_cents),
            move |(purpose, cents): (String, u64), t| async move {
                // The key goes where the API wants it (a header, a field): a call the engine runs
                // again after a crash or a take-over sends the key it sent the first time.
                payments.charge(t.idempotency_key(), &purpose, cents).map_err(ToolError::fatal)
            },
        )
        .await?;
    Ok(NodeOutput::update(charge))
}

/// The checkout workflow: charge the items, then the shipping.
///
/// # Errors
/// Never for this definition.
pub fn workflow(payments: &Payments) -> Result<Workflow<Checkout>, cairn::dsl::BuildError> {
    Workflow::<Checkout>::builder("checkout", 1)
        .node("items", {
            let payments = payments.clone();
            move |c: Arc<Checkout>, ctx: Ctx| {
                charge(payments.clone(), ctx, format!("{}/items", c.order), c.items_cents)
            }
        })
        .node("shipping", {
            let payments = payments.clone();
            move |c: Arc<Checkout>, ctx: Ctx| {
                charge(payments.clone(), ctx, format!("{}/shipping", c.order), c.shipping_cents)
            }
        })
        .edge(START, "items")
        .edge("items", "shipping")
        .edge("shipping", END)
        .build()
}

/// What [`run`] shows.
#[derive(Debug, Clone)]
pub struct Shown {
    /// Each order's final state.
    pub checkouts: Vec<Checkout>,
    /// What the payment service saw.
    pub ledger: Ledger,
}

/// Checks out three orders on a database at `db`.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Shown> {
    let payments = Payments::default();
    let wf = workflow(&payments)?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let mut checkouts = Vec::new();
    for (i, items) in [(1, 2_500_u64), (2, 990), (3, 12_000)] {
        let order = format!("order-{i}");
        let input = Checkout {
            order: order.clone(),
            items_cents: items,
            shipping_cents: 450,
            ..Checkout::default()
        };
        let thread = engine.start(&wf, input, StartOptions::id(&order)).await?;
        checkouts.push(thread.output().await?);
    }
    engine.shutdown().await;
    Ok(Shown { checkouts, ledger: payments.ledger() })
}
