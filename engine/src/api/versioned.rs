//! Which registered workflow folds a thread's log at a seq, and the thread's context there: the
//! version of the latest checkpoint at or before the seq (a migration files its checkpoint under
//! the new version), else the one the thread was created with.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Seq, ThreadId, WorkflowRef};

use super::engine::Engine;
use crate::core::event::Body;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::exec::fetch;

/// The context of thread `id` after the event at `seq`, folded by the workflow version the
/// thread ran there ([`workflow_at`]).
///
/// # Errors
/// As [`workflow_at`]; [`Error::Record`] for a damaged event; storage errors.
pub async fn restore_at(engine: &Engine, id: &ThreadId, seq: u64) -> Result<ThreadCtx, Error> {
    let wf = workflow_at(engine, id, seq).await?;
    fetch::restore(engine.store().as_ref(), &wf, id, Some(seq)).await
}

/// The registered workflow that folds `id`'s events up to `seq`: the version of the latest
/// checkpoint at or before it (a migration checkpoint is filed under its new version), else the
/// one the thread was created with.
///
/// # Errors
/// As [`registered`]; [`Error::UnknownThread`]; storage errors.
pub async fn workflow_at(
    engine: &Engine,
    id: &ThreadId,
    seq: u64,
) -> Result<Arc<DynWorkflow>, Error> {
    let wref = match engine.store().latest_checkpoint_at_or_before(id, Seq(seq)).await? {
        Some(cp) => cp.workflow,
        None => created_workflow(engine, id).await?,
    };
    registered(engine, &wref)
}

/// The registered workflow with this id, version and fingerprint.
///
/// # Errors
/// [`Error::UnknownWorkflow`]; [`Error::FingerprintChanged`] when the registered version's
/// fingerprint is not the recorded one.
pub fn registered(engine: &Engine, wref: &WorkflowRef) -> Result<Arc<DynWorkflow>, Error> {
    let wf = latest_workflow(engine, &wref.id, Some(wref.version))?;
    let current = wf.fingerprint().to_string();
    if current != *wref.fingerprint {
        return Err(Error::FingerprintChanged {
            thread: String::new(),
            workflow: format!("{} v{}", wref.id, wref.version),
            recorded: wref.fingerprint.to_string(),
            current,
        });
    }
    Ok(wf)
}

/// The registered workflow `workflow` at `version` (its latest version when `None`).
///
/// # Errors
/// [`Error::UnknownWorkflow`].
pub fn latest_workflow(
    engine: &Engine,
    workflow: &str,
    version: Option<u32>,
) -> Result<Arc<DynWorkflow>, Error> {
    engine.shell.registry.latest(workflow, version)
}

/// The workflow of the thread's `thread_created` event.
async fn created_workflow(engine: &Engine, id: &ThreadId) -> Result<WorkflowRef, Error> {
    let first = engine.store().read_range(id, Seq(1), Seq(1)).await?;
    let event = first.into_iter().next().ok_or_else(|| Error::UnknownThread(id.to_string()))?;
    match fetch::decode(engine.store().as_ref(), event).await?.body {
        Body::ThreadCreated { workflow, .. } => Ok(workflow),
        _ => Err(Error::Record {
            thread: id.to_string(),
            seq: 1,
            detail: "the first event of a thread is not thread_created".into(),
        }),
    }
}
