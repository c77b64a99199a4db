//! Trip booking with compensation: book a flight, a hotel and a car; each booking registers
//! its undo (`ctx.on_undo`) once it is made. The car cannot be booked, the thread fails for
//! good, and the engine unwinds: it cancels the hotel, then the flight (last registered first),
//! each once, recorded in the log, before the thread is marked failed.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cairn::dsl::{Ctx, NodeError, NodeOutput, NodeResult, State, ToolCtx, Workflow};
use cairn::event::Body;
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use serde::{Deserialize, Serialize};

/// The trip's bookings so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trip {
    /// Booking references, in booking order.
    pub bookings: Vec<String>,
}

impl State for Trip {
    type Update = String;
    fn apply(&mut self, booking: String) {
        self.bookings.push(booking);
    }
}

/// What the (pretend) booking service saw: each booking and each cancellation, in order.
#[derive(Debug, Clone, Default)]
pub struct Service(Arc<Mutex<Vec<String>>>);

impl Service {
    fn record(&self, line: String) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
    }

    /// The service's log.
    pub fn log(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// A node that books `what` with the service and registers its cancellation.
async fn book(what: &'static str, service: Service, ctx: Ctx) -> NodeResult<String> {
    let reference: String = ctx
        .tool(&format!("book_{what}"), what.to_owned(), move |w: String, _| async move {
            service.record(format!("booked {w}"));
            Ok::<_, ToolError>(format!("{w}-ref"))
        })
        .await?;
    // Registered now, effective once this step completes.
    ctx.on_undo("cancel", &reference)?;
    Ok(NodeOutput::update(reference))
}

/// The workflow: flight -> hotel -> car -> END; `car` fails for good (no car available).
///
/// # Errors
/// Never for this definition.
pub fn workflow(service: &Service) -> Result<Workflow<Trip>, cairn::dsl::BuildError> {
    let cancels = service.clone();
    Workflow::<Trip>::builder("trip", 1)
        .node("flight", {
            let service = service.clone();
            move |_s, ctx| book("flight", service.clone(), ctx)
        })
        .node("hotel", {
            let service = service.clone();
            move |_s, ctx| book("hotel", service.clone(), ctx)
        })
        .node("car", |_s, _ctx| async move {
            Err::<NodeOutput<String>, _>(NodeError::fatal("no car available on those dates"))
        })
        .edge(START, "flight")
        .edge("flight", "hotel")
        .edge("hotel", "car")
        .edge("car", END)
        .compensation("cancel", move |reference: String, tool: ToolCtx| {
            let cancels = cancels.clone();
            async move {
                // A real service would deduplicate by `tool.idempotency_key()`.
                let _key = tool.idempotency_key();
                cancels.record(format!("cancelled {reference}"));
                Ok::<_, ToolError>(())
            }
        })
        .build()
}

/// What the example shows.
#[derive(Debug)]
pub struct Summary {
    /// The thread's final status.
    pub status: ThreadStatus,
    /// The booking service's log.
    pub service: Vec<String>,
    /// The unwinding as the thread's log records it.
    pub unwinding: Vec<String>,
}

/// Books a trip on a database at `db`, fails at the car, and unwinds.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let service = Service::default();
    let wf = workflow(&service)?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    let thread = engine.start(&wf, Trip::default(), StartOptions::id("trip-1")).await?;
    let status = thread.wait().await?.status;
    let store = engine.store();
    let mut unwinding = Vec::new();
    for event in store.read_since(thread.id(), cairn::Seq(0), 10_000).wait()? {
        let body = cairn::blocking::decode(store.as_ref(), event)?.body;
        if matches!(
            body,
            Body::CompensationBegan { .. } | Body::UndoStarted { .. } | Body::UndoFinished { .. }
        ) {
            unwinding.push(body.summary());
        }
    }
    engine.shutdown().await;
    Ok(Summary { status, service: service.log(), unwinding })
}
