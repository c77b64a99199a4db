//! Children a node starts at run time (`ctx.start_child`), over the engine's shell: the start
//! (created idempotently by the child's derived id, then driven like any started thread), the
//! join (the child driven here while nobody else drives it, else waited for), and the
//! parent-close policy applied when the parent ends. The node's side (the recorded values) is
//! `node_context/child.rs`; the ids and records are `cairn_core::child_start`.

use std::collections::BTreeMap;

use cairn_dsl::{NodeError, ParentClose};
use cairn_storage::{ThreadId, ThreadRecord, ThreadStatus};
use serde_json::Value;

use super::child_drive::{LiveChildren, drive_child};
use super::shell::Shell;
use super::start::NewThread;
use crate::core::child_start::{ChildEnd, PARENT_CLOSE_LABEL, STARTED_BY_LABEL};
use crate::error::Error;
use crate::limits::CHILDREN_PER_THREAD_MAX;

/// Why a started child is driven (the status change's reason).
const CHILD_STARTED: &str = "started by its parent";

/// Creates the child `id` of `workflow` on `input` unless it exists (a node that runs again
/// after a crash between the child's creation and the parent's record of it finds it), and has
/// the engine drive it. Refusals the node can act on (an unknown workflow, an input that is not
/// its state, the thread's limit) fail the node without stopping its runner.
pub(crate) async fn start(
    children: &LiveChildren,
    id: ThreadId,
    workflow: &str,
    input: Value,
    parent_close: ParentClose,
) -> Result<(), NodeError> {
    let shell = &children.shell;
    let engine = |e: Error| children.stop.node_error(e);
    let wf = shell.registry.latest(workflow, None).map_err(|e| refused(&id, &e))?;
    if shell.store.thread(&id).await.map_err(|e| engine(e.into()))?.is_none() {
        let started = super::fetch::started_children_of(
            shell.store.as_ref(),
            &children.parent,
            CHILDREN_PER_THREAD_MAX,
        )
        .await
        .map_err(engine)?;
        if started.len() >= CHILDREN_PER_THREAD_MAX {
            return Err(NodeError::fatal(format!(
                "limit children_per_thread exceeded: {} >= {CHILDREN_PER_THREAD_MAX}",
                started.len()
            )));
        }
    }
    let mut labels = BTreeMap::new();
    labels.insert(STARTED_BY_LABEL.to_owned(), children.parent.to_string());
    if parent_close == ParentClose::Cancel {
        labels.insert(PARENT_CLOSE_LABEL.to_owned(), "cancel".to_owned());
    }
    let new = NewThread { labels, ..NewThread::new(&wf, &id, input) };
    match super::start::create(shell, new).await {
        Ok(_) => {}
        Err(e @ Error::Invalid(_)) => return Err(refused(&id, &e)),
        Err(e) => return Err(engine(e)),
    }
    // Created now or before (by the run a crash cut short): a thread nobody drives is driven;
    // one already driven here or elsewhere is left to its driver (a drive claims the thread).
    super::drive::spawn_drive(shell, id, CHILD_STARTED);
    Ok(())
}

/// A refusal of a child start, as the node sees it.
fn refused(id: &ThreadId, e: &Error) -> NodeError {
    NodeError::fatal(format!("child thread {id} not started: {e}"))
}

/// Waits until the child `id`, started by the parent, ends, and returns how. While nobody
/// drives it the parent's runner drives it itself (as a sub-workflow's parent does, so a
/// joining parent never waits for a permit its own child needs); a parked child is waited for.
pub(crate) async fn join(children: &LiveChildren, id: ThreadId) -> Result<ChildEnd, NodeError> {
    // Bounded: each turn drives the child to its next park or waits for it to move on.
    loop {
        if let Some(end) = ended_child(children, &id).await? {
            return Ok(end);
        }
        let status = drive_once(children, &id).await?;
        if !status.is_terminal() {
            moved_on(children, &id, status).await?;
        }
    }
}

/// How the child `id` of the parent ended, or `None` while it runs (a select's look).
pub(crate) async fn ended_child(
    children: &LiveChildren,
    id: &ThreadId,
) -> Result<Option<ChildEnd>, NodeError> {
    let shell = &children.shell;
    let engine = |e: Error| children.stop.node_error(e);
    let record = shell.store.thread(id).await.map_err(|e| engine(e.into()))?;
    let record = match record {
        Some(r) if r.labels.get(STARTED_BY_LABEL) == Some(&children.parent.to_string()) => r,
        _ => {
            return Err(NodeError::fatal(format!(
                "thread {id} is not a child started by thread {}",
                children.parent
            )));
        }
    };
    if record.status.is_terminal() {
        return ended(shell, &record).await.map(Some).map_err(engine);
    }
    Ok(None)
}

/// Drives the child `id` to its end or its next park (or waits for its other driver to let
/// go), and returns its status then.
async fn drive_once(children: &LiveChildren, id: &ThreadId) -> Result<ThreadStatus, NodeError> {
    drive_child(&children.shell, id, children.depth, &children.cancel, &children.stop).await
}

/// Waits until the parked child `id` leaves `status` (a timer, a signal or an operator moves
/// it on), or the parent is cancelled (an error).
async fn moved_on(
    children: &LiveChildren,
    id: &ThreadId,
    status: ThreadStatus,
) -> Result<(), NodeError> {
    let coord = &children.shell.coord;
    let mut rx = coord.watch(id).await.map_err(|e| children.stop.node_error(e))?;
    let moved = tokio::select! {
        r = rx.wait_for(|s| s.status != status || s.stopped.is_some()) => r.is_ok(),
        () = children.cancel.cancelled() => false,
    };
    drop(rx);
    coord.unwatch_if_unused(id);
    if moved { Ok(()) } else { Err(NodeError::Cancelled) }
}

/// How the ended child `record` ended: its output when it completed, else its last error.
async fn ended(shell: &Shell, record: &ThreadRecord) -> Result<ChildEnd, Error> {
    let wf = shell.registry.workflow_for(record)?;
    let ctx = super::fetch::restore(shell.store.as_ref(), &wf, &record.id, None).await?;
    let output = if record.status == ThreadStatus::Completed {
        Some(match ctx.meta.output.clone() {
            Some(output) => output,
            None => ctx.state.to_json().map_err(|e| Error::Invalid(e.to_string()))?,
        })
    } else {
        None
    };
    Ok(ChildEnd {
        child: record.id.to_string(),
        status: record.status.to_string(),
        output,
        error: ctx.meta.errors.back().map(|e| e.error.to_string()),
    })
}
