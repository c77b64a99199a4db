//! Observed: an application that can be watched while it works. The engine serves its local
//! endpoint (the JSON API and the web view at `/ui/threads`), records its metrics in a Prometheus
//! recorder the endpoint renders at `/api/metrics`, and its spans and events go wherever the
//! application's `tracing` subscriber sends them (the example's `main` prints them to stdout).
//!
//! The work: order threads that fetch a price through a tool, retry a flaky payment once, and
//! ship; one order waits for a person's approval, the way a real queue always has a thread
//! parked somewhere, so the web view has every colour to show.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn::dsl::{Ctx, NodeError, NodeOutput, NodePolicy, RetryPolicy, State, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::serve::Serve as _;
use cairn_tools::serve::{ServeOptions, Server};
use serde::{Deserialize, Serialize};

/// An order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// Items ordered.
    pub items: u32,
    /// Whether a person must approve it.
    pub needs_approval: bool,
    /// Price, cents.
    pub price_cents: u64,
    /// Whether it was paid.
    pub paid: bool,
    /// Whether it was shipped.
    pub shipped: bool,
}

/// Updates of [`Order`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OrderUpdate {
    /// The price was looked up.
    Priced(u64),
    /// The payment went through.
    Paid,
    /// The parcel left.
    Shipped,
}

impl State for Order {
    type Update = OrderUpdate;

    fn apply(&mut self, update: OrderUpdate) {
        match update {
            OrderUpdate::Priced(p) => self.price_cents = p,
            OrderUpdate::Paid => self.paid = true,
            OrderUpdate::Shipped => self.shipped = true,
        }
    }
}

/// price -> (approve, when asked) -> pay (retried) -> ship. `payment_failures` counts the
/// payment attempts that failed on purpose: the first attempt of each order fails once.
///
/// # Errors
/// Never for this definition.
pub fn workflow(
    payment_failures: Arc<AtomicU32>,
) -> Result<Workflow<Order>, cairn::dsl::BuildError> {
    let retry = NodePolicy::default().retry(RetryPolicy::exponential(3, 5, 50));
    Workflow::<Order>::builder("order", 1)
        .node("price", |s: Arc<Order>, ctx: Ctx| async move {
            ctx.progress(1, 3, "pricing");
            let items = s.items;
            let cents: u64 = ctx
                .tool("price_list", items, |n: u32, _| async move { Ok(u64::from(n) * 1_250) })
                .await?;
            Ok(NodeOutput::update(OrderUpdate::Priced(cents)))
        })
        .node("approve", |s: Arc<Order>, ctx: Ctx| async move {
            let ok: bool = ctx.interrupt(serde_json::json!({"approve_cents": s.price_cents}))?;
            if !ok {
                return Err(NodeError::fatal("refused by the approver"));
            }
            Ok(NodeOutput::none())
        })
        .node_with(
            "pay",
            move |_s: Arc<Order>, ctx: Ctx| {
                let failures = payment_failures.clone();
                async move {
                    ctx.progress(2, 3, "paying");
                    // The payment provider drops the first try of every order.
                    if ctx.attempt() == 1 {
                        failures.fetch_add(1, Ordering::SeqCst);
                        return Err(NodeError::retryable("the payment provider timed out"));
                    }
                    Ok(NodeOutput::update(OrderUpdate::Paid))
                }
            },
            retry,
        )
        .node("ship", |_s: Arc<Order>, ctx: Ctx| async move {
            ctx.progress(3, 3, "shipped");
            Ok(NodeOutput::update(OrderUpdate::Shipped))
        })
        .edge(START, "price")
        .route(
            "price",
            |s: &Order| if s.needs_approval { "approve" } else { "pay" },
            ["approve", "pay"],
        )
        .edge("approve", "pay")
        .edge("pay", "ship")
        .edge("ship", END)
        .build()
}

/// What the example saw of itself through its own endpoint.
#[derive(Debug)]
pub struct Observed {
    /// Where the endpoint listened.
    pub address: SocketAddr,
    /// Orders completed.
    pub completed: usize,
    /// The order left waiting for approval.
    pub waiting: String,
    /// Payment attempts that failed (and were retried).
    pub payment_failures: u32,
    /// `/api/metrics`: the Prometheus text.
    pub metrics: String,
    /// `/ui/threads`: the web view's threads page.
    pub threads_page: String,
    /// `/api/view/threads?status=waiting_input`: the listing the page reads.
    pub waiting_listing: serde_json::Value,
}

/// Orders started.
pub const ORDERS: u32 = 5;

/// Opens the engine on `db` with an endpoint at `addr` (port 0: any free one), runs [`ORDERS`]
/// orders (the last waits for approval) and returns the engine, its endpoint, and what the
/// endpoint shows. The caller shuts both down (the example's `main` serves until Ctrl-C).
///
/// # Errors
/// Engine errors; an endpoint that does not answer.
pub async fn start(db: &Path, addr: SocketAddr) -> anyhow::Result<(Engine, Server, Observed)> {
    let failures = Arc::new(AtomicU32::new(0));
    let wf = workflow(failures.clone())?;
    // Metrics into a recorder of this engine's own (not the process's global one), rendered by
    // the endpoint at /api/metrics.
    let (recorder, handle) = cairn_tools::prometheus::recorder()?;
    let mut options = ServeOptions::new(addr);
    options.prometheus = Some(handle);
    let (engine, server) = Engine::builder(db)
        .workflow(&wf)
        .metrics_recorder(Arc::new(recorder))
        .serve(addr)
        .options(options)
        .open()
        .await?;
    tracing::info!(address = %server.addr(), "serving: open http://{}/ui/threads", server.addr());
    let mut handles = Vec::new();
    for n in 1..=ORDERS {
        let order = Order { items: n, needs_approval: n == ORDERS, ..Order::default() };
        let options = StartOptions::id(format!("order-{n}")).label("shop", "north");
        handles.push(engine.start(&wf, order, options).await?);
    }
    let mut completed = 0;
    let mut waiting = String::new();
    for h in &handles {
        let outcome = h.wait().await?;
        match outcome.status {
            ThreadStatus::Completed => completed += 1,
            ThreadStatus::WaitingInput => waiting = h.id().to_string(),
            other => anyhow::bail!("order {} ended {other}", h.id()),
        }
    }
    let address = server.addr();
    let (metrics, threads_page, listing) = tokio::task::spawn_blocking(move || {
        let metrics = get(address, "/api/metrics")?;
        let page = get(address, "/ui/threads")?;
        let listing = get(address, "/api/view/threads?status=waiting_input")?;
        anyhow::Ok((metrics, page, listing))
    })
    .await??;
    let observed = Observed {
        address,
        completed,
        waiting,
        payment_failures: failures.load(Ordering::SeqCst),
        metrics,
        threads_page,
        waiting_listing: serde_json::from_str(&listing)?,
    };
    Ok((engine, server, observed))
}

/// Runs [`start`] and shuts everything down.
///
/// # Errors
/// As [`start`].
pub async fn run(db: &Path) -> anyhow::Result<Observed> {
    let (engine, server, observed) = start(db, ([127, 0, 0, 1], 0).into()).await?;
    server.shutdown().await;
    engine.shutdown().await;
    Ok(observed)
}

/// A plain HTTP/1.1 GET of `path` on the endpoint: the body of a 200, else an error.
fn get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    // axum answers with a length, not chunks, for these bodies.
    Ok(body.to_owned())
}
