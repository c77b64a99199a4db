//! Code that changed under a parked thread: replay finds the divergence, the resume check
//! blocks the thread instead of running new code on an old history, and a migration moves it
//! onto the new version deliberately.
//!
//! A quote is priced (a recorded tool call) and waits for a person's approval. While it waits,
//! the pricing code changes (prices now include VAT) without a new workflow version: the same
//! graph, so the same fingerprint. The next process:
//! 1. [`Engine::replay`]s the thread against the code it now has: the pricing call's input
//!    differs from the recorded one, and the report names the step, the task and both sides;
//! 2. answers the approval: before the thread runs, the engine replays its steps since its
//!    latest checkpoint, finds the same divergence and moves the thread to Blocked, with the
//!    divergence as the reason (nothing of the new code ran);
//! 3. registers version 2 (its state gains a currency) with a migration from version 1, and
//!    [`Engine::migrate`]s the thread: from the migration's checkpoint on it is a v2 thread;
//! 4. resumes it: it completes on v2, with the approval it was given. The price recorded in
//!    step 1 stands: a migration changes where a thread goes on, never its history.
//!
//! ```text
//! START -> price -> approve (waits for a person) -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A quote of version 1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quote {
    /// Items quoted.
    pub items: u64,
    /// The price, in cents.
    pub price_cents: u64,
    /// The approver, once approved.
    pub approved_by: Option<String>,
}

/// A change to a quote (both versions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum QuoteChange {
    /// Priced.
    Priced(u64),
    /// Approved by someone.
    Approved(String),
}

impl State for Quote {
    type Update = QuoteChange;
    fn apply(&mut self, change: QuoteChange) {
        match change {
            QuoteChange::Priced(cents) => self.price_cents = cents,
            QuoteChange::Approved(who) => self.approved_by = Some(who),
        }
    }
}

/// A quote of version 2: with its currency.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuoteV2 {
    /// Items quoted.
    pub items: u64,
    /// The price, in cents.
    pub price_cents: u64,
    /// Its currency.
    pub currency: String,
    /// The approver, once approved.
    pub approved_by: Option<String>,
}

impl State for QuoteV2 {
    type Update = QuoteChange;
    fn apply(&mut self, change: QuoteChange) {
        match change {
            QuoteChange::Priced(cents) => self.price_cents = cents,
            QuoteChange::Approved(who) => self.approved_by = Some(who),
        }
    }
}

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The thread's status before the code changed.
    pub parked: ThreadStatus,
    /// Replay against the changed code: where it diverged, in one line.
    pub divergence: String,
    /// The thread's status after its approval met the changed code.
    pub after_answer: ThreadStatus,
    /// The reason it was blocked.
    pub blocked_because: String,
    /// Its final status after the migration and resume.
    pub finished: ThreadStatus,
    /// Its final state (a v2 quote).
    pub quote: QuoteV2,
}

async fn price(ctx: &Ctx, items: u64, vat: bool) -> Result<u64, cairn::NodeError> {
    let input = if vat { json!({"items": items, "vat": true}) } else { json!({"items": items}) };
    ctx.tool("catalog.price", input, |q: serde_json::Value, _| async move {
        let net = q["items"].as_u64().unwrap_or(0) * 1_250;
        let vat = q["vat"].as_bool().unwrap_or(false);
        Ok::<_, ToolError>(if vat { net * 120 / 100 } else { net })
    })
    .await
}

fn approve(ctx: &Ctx) -> Result<QuoteChange, cairn::NodeError> {
    let who: String = ctx.interrupt("approve this quote? (your name)")?;
    Ok(QuoteChange::Approved(who))
}

/// Version 1 as first written (`vat` false) or as changed later (`vat` true): one graph, one
/// fingerprint.
///
/// # Errors
/// A build error (none for this graph).
pub fn v1(vat: bool) -> Result<Workflow<Quote>, cairn::dsl::BuildError> {
    Workflow::<Quote>::builder("quote", 1)
        .node("price", move |q: Arc<Quote>, ctx: Ctx| async move {
            Ok(NodeOutput::update(QuoteChange::Priced(price(&ctx, q.items, vat).await?)))
        })
        .node("approve", |_q: Arc<Quote>, ctx: Ctx| async move {
            Ok(NodeOutput::update(approve(&ctx)?))
        })
        .edge(START, "price")
        .edge("price", "approve")
        .edge("approve", END)
        .build()
}

/// Version 2: prices with VAT, quotes carry their currency.
///
/// # Errors
/// A build error (none for this graph).
pub fn v2() -> Result<Workflow<QuoteV2>, cairn::dsl::BuildError> {
    Workflow::<QuoteV2>::builder("quote", 2)
        .node("price", |q: Arc<QuoteV2>, ctx: Ctx| async move {
            Ok(NodeOutput::update(QuoteChange::Priced(price(&ctx, q.items, true).await?)))
        })
        .node("approve", |_q: Arc<QuoteV2>, ctx: Ctx| async move {
            Ok(NodeOutput::update(approve(&ctx)?))
        })
        .edge(START, "price")
        .edge("price", "approve")
        .edge("approve", END)
        .build()
}

/// Runs the story on `db`.
///
/// # Errors
/// Engine errors; an error when the thread does not behave as described.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let quote_v1 = v1(false)?;
    let engine = Engine::builder(db).workflow(&quote_v1).open().await?;
    let quote = Quote { items: 4, ..Quote::default() };
    let t = engine.start(&quote_v1, quote, StartOptions::id("q-7")).await?;
    let parked = t.wait().await?.status;
    engine.shutdown().await;
    drop((t, engine));

    // The next process runs the changed code.
    let engine = Engine::builder(db).workflow(&v1(true)?).workflow(&v2()?).open().await?;
    let report = engine.replay("q-7", &ReplayOptions::default()).await?;
    let divergence = report
        .divergence
        .map(|d| d.to_string())
        .ok_or_else(|| anyhow::anyhow!("the changed code replayed without a divergence"))?;
    engine.send_input("q-7", "dana").await?;
    let t = engine.thread("q-7").await?;
    let blocked = t.wait().await?;
    let blocked_because = blocked.error.unwrap_or_default();

    // A deliberate move onto version 2, then on.
    engine.register_migration("quote", 1, 2, |mut state| {
        let obj = state.as_object_mut().ok_or("a quote is an object")?;
        obj.insert("currency".into(), json!("EUR"));
        Ok(state)
    });
    engine.migrate("q-7", 2).await?;
    engine.resume("q-7").await?;
    let finished = t.finished().await?.status;
    let quote: QuoteV2 = t.output().await?;
    engine.shutdown().await;
    Ok(Summary {
        parked,
        divergence,
        after_answer: blocked.status,
        blocked_because,
        finished,
        quote,
    })
}
