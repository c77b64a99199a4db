//! The thread context at a seq, also for threads whose workflow is not compiled into this binary.
//!
//! The user state needs the workflow's reducer, but everything else a thread context holds
//! (status, frontier, telemetry, errors, progress, waiting) is folded from the log alone. For a
//! thread of an unknown workflow we fold with a stand-in workflow whose state is opaque JSON
//! that accepts and ignores every update: the metadata comes out exact, the state is marked
//! unknown and never shown.

use std::sync::{Arc, OnceLock};

use cairn_dsl::{DynWorkflow, END, NodeOutput, START, State, Workflow};
use cairn_storage::ThreadId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use cairn::Engine;
use cairn::admin as fetch;
use cairn::error::Error;
use cairn::thread_ctx::ThreadCtx;

/// A thread context folded from the log.
pub(crate) struct Folded {
    /// The context (its state is meaningful only when `state_known`).
    pub ctx: ThreadCtx,
    /// Why the state is unknown: the workflow is not compiled in, or has changed.
    pub state_unknown: Option<String>,
}

/// The context of `thread` after seq `at` (the latest when `None`).
///
/// # Errors
/// Unknown thread, damaged or pruned log.
pub(crate) async fn fold(
    engine: &Engine,
    thread: &ThreadId,
    at: Option<u64>,
) -> Result<Folded, Error> {
    let store = engine.store().as_ref();
    let record = fetch::thread_record(store, thread).await?;
    match cairn::admin::workflow_for(engine, &record) {
        Ok(wf) => {
            let ctx = fetch::restore(store, &wf, thread, at).await?;
            Ok(Folded { ctx, state_unknown: None })
        }
        Err(
            e @ (cairn::Error::UnknownWorkflow { .. } | cairn::Error::FingerprintChanged { .. }),
        ) => {
            let ctx = fetch::restore(store, opaque(), thread, at).await?;
            Ok(Folded { ctx, state_unknown: Some(e.to_string()) })
        }
        Err(e) => Err(e),
    }
}

/// JSON that takes any update and ignores it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
struct Opaque(Value);

impl State for Opaque {
    type Update = Value;

    fn apply(&mut self, _update: Value) {}
}

fn opaque() -> &'static DynWorkflow {
    static WF: OnceLock<Arc<DynWorkflow>> = OnceLock::new();
    WF.get_or_init(|| {
        let wf = Workflow::<Opaque>::builder("cairn-cli-opaque", 1)
            .node("opaque", |_s: Arc<Opaque>, _ctx| async move { Ok(NodeOutput::none()) })
            .edge(START, "opaque")
            .edge("opaque", END)
            .build();
        match wf {
            Ok(wf) => wf.erase(),
            // A one-node line always validates; failing here is a bug in the DSL.
            Err(e) => panic!("the opaque workflow does not build: {e}"),
        }
    })
}
