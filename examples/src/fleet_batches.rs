//! Operating a fleet of threads by filter: orders label themselves with their region; some
//! fail at `reserve` (their item is out of stock), the rest wait for a `paid` signal. An
//! operator counts what a filter matches first (a dry run, writing nothing), then runs
//! batches: signal the waiting EU orders `paid`, cancel the waiting US ones, and, once the
//! item is back in stock, reset the failed orders to their start (each forked into
//! `<order>.reset.<batch>`, which reserves again and waits for payment). Each batch is a
//! durable job; its progress (`done` of `total`, applied, skipped) is read back.
//!
//! ```text
//! START -> reserve (label region; fails when out of stock) -> pay (waits for `paid`) -> END
//! ```

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{
    BatchFilter, BatchOp, END, Engine, NodeError, ResetPoint, START, StartOptions, ThreadId,
    ThreadStatus,
};
use serde::{Deserialize, Serialize};

/// An order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Its region (`eu` or `us`), set as the label `region`.
    pub region: String,
    /// The item ordered.
    pub item: String,
    /// Whether it was paid.
    pub paid: bool,
}

/// The item that is out of stock when the orders are taken.
pub const SCARCE: &str = "lamp";

/// The orders of the example: (id, region, item).
pub const ORDERS: [(&str, &str, &str); 8] = [
    ("o-1", "eu", "desk"),
    ("o-2", "us", "desk"),
    ("o-3", "eu", SCARCE),
    ("o-4", "us", "chair"),
    ("o-5", "eu", "chair"),
    ("o-6", "us", SCARCE),
    ("o-7", "eu", "desk"),
    ("o-8", "us", "chair"),
];

/// The order workflow; `reserve` fails (fatally) for [`SCARCE`] while `out_of_stock` holds.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow(
    out_of_stock: Arc<AtomicBool>,
) -> Result<Workflow<Replace<Order>>, cairn::dsl::BuildError> {
    Workflow::<Replace<Order>>::builder("order", 1)
        .node("reserve", move |s: Arc<Replace<Order>>, ctx: Ctx| {
            let out = out_of_stock.load(Ordering::SeqCst) && s.0.item == SCARCE;
            async move {
                ctx.set_label("region", &s.0.region)?;
                if out {
                    return Err(NodeError::fatal(format!("{SCARCE} is out of stock")));
                }
                Ok(NodeOutput::update(s.0.clone()))
            }
        })
        .node("pay", |s: Arc<Replace<Order>>, ctx: Ctx| async move {
            let paid: bool = ctx.recv("paid").await?;
            Ok(NodeOutput::update(Order { paid, ..s.0.clone() }))
        })
        .edge(START, "reserve")
        .edge("reserve", "pay")
        .edge("pay", END)
        .build()
}

/// A batch's progress as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Threads matched when it was created.
    pub total: u64,
    /// Threads handled.
    pub done: u64,
    /// Threads the operation was applied to.
    pub applied: u64,
    /// Threads skipped.
    pub skipped: u64,
}

/// What the operator saw and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The dry runs: waiting EU orders, waiting US orders, failed orders.
    pub counted: [u64; 3],
    /// The batches' progress: signal, cancel, reset.
    pub batches: [Progress; 3],
    /// Every order's status at the end, by id (the reset ones' new threads included).
    pub statuses: Vec<(String, ThreadStatus)>,
}

/// A filter on the order workflow with `status` and, if given, the label `region`.
fn orders(status: ThreadStatus, region: Option<&str>) -> BatchFilter {
    let labels = region.map(|r| vec![("region".to_owned(), r.to_owned())]).unwrap_or_default();
    BatchFilter {
        workflow: Some("order".into()),
        status: Some(status),
        labels,
        ..BatchFilter::default()
    }
}

/// Waits until `id` has stopped running (parked or ended).
async fn settled(engine: &Engine, id: &str) -> anyhow::Result<ThreadStatus> {
    let thread = ThreadId::new(id)?;
    for _ in 0..2_000 {
        let record = engine.store().thread(&thread).await?;
        if let Some(r) = record
            && !matches!(r.status, ThreadStatus::Created | ThreadStatus::Running)
            && !engine.is_driven(&thread)
        {
            return Ok(r.status);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    anyhow::bail!("{id} never settled")
}

/// Runs batch `id` to its end and reads its progress back.
async fn batch(
    engine: &Engine,
    id: &str,
    op: BatchOp,
    filter: BatchFilter,
) -> anyhow::Result<Progress> {
    engine.batch_as(id, op, filter).await?;
    engine.thread(id).await?.finished().await?;
    let s = engine.batch_info(id).await?.state;
    Ok(Progress { total: s.total, done: s.done, applied: s.applied, skipped: s.skipped })
}

/// Takes the [`ORDERS`] on `db` while [`SCARCE`] is out of stock, then operates on them by
/// filter: counts, signals, cancels, restocks and resets.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let out_of_stock = Arc::new(AtomicBool::new(true));
    let wf = workflow(out_of_stock.clone())?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    for (id, region, item) in ORDERS {
        let order = Order { region: region.into(), item: item.into(), paid: false };
        engine.start(&wf, Replace(order), StartOptions::id(id)).await?;
    }
    for (id, _, _) in ORDERS {
        settled(&engine, id).await?;
    }
    let (eu, us) = (
        orders(ThreadStatus::WaitingInput, Some("eu")),
        orders(ThreadStatus::WaitingInput, Some("us")),
    );
    let failed = orders(ThreadStatus::Failed, None);
    let mut counted = [0; 3];
    for (n, filter) in counted.iter_mut().zip([&eu, &us, &failed]) {
        *n = engine.batch_count(filter).await?;
    }
    let paid = BatchOp::Signal { name: "paid".into(), value: serde_json::json!(true) };
    let signal = batch(&engine, "pay-eu", paid, eu).await?;
    let cancel = BatchOp::Cancel { reason: "US shipping suspended".into() };
    let cancel = batch(&engine, "cancel-us", cancel, us).await?;
    out_of_stock.store(false, Ordering::SeqCst);
    let reset = BatchOp::Reset { point: ResetPoint::Start };
    let reset = batch(&engine, "restock", reset, failed).await?;
    let mut statuses = Vec::new();
    for (id, _, item) in ORDERS {
        statuses.push((id.to_owned(), settled(&engine, id).await?));
        if item == SCARCE {
            let fork = cairn::reset_thread_id(id, "restock");
            statuses.push((fork.clone(), settled(&engine, &fork).await?));
        }
    }
    engine.shutdown().await;
    Ok(Summary { counted, batches: [signal, cancel, reset], statuses })
}
