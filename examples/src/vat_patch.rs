//! A change of code under running threads, guarded by a patch: the VAT rule of a checkout
//! changes from 20% to 21% while orders wait for their payment. An order priced under the old
//! code keeps the old rule after the restart (its log says it went past the change); an order
//! started under the new code takes the new rule; both finish, and both replay cleanly.
//! [`Engine::threads_without_patch`] lists the orders that still need the old branch (the
//! branch can be deleted, with `ctx.deprecate_patch`, once the list is empty).
//!
//! ```text
//! START -> price -> pay (waits for the payment) -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use serde::{Deserialize, Serialize};

/// The change's id: what `ctx.patched` and the listing name.
pub const PATCH: &str = "vat-21";

/// An order's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The net amount, in cents.
    pub net: u64,
    /// The amount with VAT, in cents.
    pub gross: u64,
    /// Whether it was paid.
    pub paid: bool,
}

/// Which code the process runs: the same workflow id, version and graph (only a node's body
/// changes, as in a deployment that fixes a rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 20% VAT.
    Old,
    /// 21% VAT for orders priced from now on, behind [`PATCH`].
    Patched,
}

/// The checkout workflow under `code`.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow(code: Code) -> Result<Workflow<Replace<Order>>, cairn::dsl::BuildError> {
    Workflow::<Replace<Order>>::builder("checkout", 1)
        .node("price", move |s: Arc<Replace<Order>>, ctx: Ctx| async move {
            let rate = if code == Code::Patched && ctx.patched(PATCH) { 121 } else { 120 };
            Ok(NodeOutput::update(Order { gross: s.0.net * rate / 100, ..s.0.clone() }))
        })
        .node("pay", |s: Arc<Replace<Order>>, ctx: Ctx| async move {
            let paid: bool = ctx.interrupt("payment?")?;
            Ok(NodeOutput::update(Order { paid, ..s.0.clone() }))
        })
        .edge(START, "price")
        .edge("price", "pay")
        .edge("pay", END)
        .build()
}

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The orders that needed the old branch, listed after the deployment.
    pub unpatched: Vec<String>,
    /// `old-1`'s final state (priced under the old code).
    pub old: Order,
    /// `new-1`'s final state (priced under the new code).
    pub new: Order,
    /// Both orders' statuses.
    pub statuses: [ThreadStatus; 2],
    /// Whether replaying each order under the new code diverged.
    pub diverged: [bool; 2],
}

/// Runs the story on `db`: an order priced under the old code, a restart on the new code, a
/// new order, both paid.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let net = Order { net: 10_000, ..Order::default() };
    let old = workflow(Code::Old)?;
    let old_code = Engine::builder(db).workflow(&old).open().await?;
    old_code.start(&old, Replace(net.clone()), StartOptions::id("old-1")).await?.wait().await?;
    old_code.shutdown().await;
    drop(old_code); // the file's lock goes with the engine

    // The deployment: the same workflow, the rule behind a patch.
    let patched = workflow(Code::Patched)?;
    let engine = Engine::builder(db).workflow(&patched).open().await?;
    engine.start(&patched, Replace(net), StartOptions::id("new-1")).await?.wait().await?;
    let unpatched = engine.threads_without_patch(PATCH, Some("checkout"), 100).await?;
    let mut statuses = [ThreadStatus::Created; 2];
    let mut diverged = [true; 2];
    for (i, id) in ["old-1", "new-1"].into_iter().enumerate() {
        engine.send_input(id, true).await?;
        statuses[i] = engine.thread(id).await?.wait().await?.status;
        diverged[i] = engine.replay(id, &Default::default()).await?.divergence.is_some();
    }
    let old: Replace<Order> = engine.thread("old-1").await?.output().await?;
    let new: Replace<Order> = engine.thread("new-1").await?.output().await?;
    engine.shutdown().await;
    let unpatched = unpatched.into_iter().map(|u| u.thread).collect();
    Ok(Summary { unpatched, old: old.0, new: new.0, statuses, diverged })
}
