//! Creating a thread: the first event and record, written once.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::{DynWorkflow, NextTarget};
use cairn_storage::{Batch, Guard, Pending, ThreadId, ThreadRecord};
use serde_json::Value;

use super::shell::Shell;
use crate::core::codec;
use crate::core::event::{Body, ForkOrigin, ThreadPolicy};
use crate::error::Error;

/// Writes a new thread of `wf` on `input`. Returns `false` (and writes nothing) if a thread with
/// this id exists already: starting is idempotent.
///
/// # Errors
/// [`Error::Invalid`] if the id exists with another workflow or the input is not a valid state;
/// storage errors.
pub(crate) async fn create(
    shell: &Shell,
    wf: &Arc<DynWorkflow>,
    id: &ThreadId,
    input: Value,
    labels: BTreeMap<String, String>,
    fork: Option<ForkSeed>,
    policy: ThreadPolicy,
) -> Result<bool, Error> {
    match prepare(shell, wf, id, input, labels, fork, policy)? {
        None => Ok(false),
        Some(batch) => settle(shell, wf, id, shell.store.append(batch)?).await,
    }
}

/// The batch that creates a thread of `wf` on `input`, or `None` if a thread with this id
/// exists already (of the same workflow).
///
/// # Errors
/// As [`create`].
pub(crate) fn prepare(
    shell: &Shell,
    wf: &Arc<DynWorkflow>,
    id: &ThreadId,
    input: Value,
    labels: BTreeMap<String, String>,
    fork: Option<ForkSeed>,
    policy: ThreadPolicy,
) -> Result<Option<Batch>, Error> {
    if let Some(existing) = shell.store.thread(id)? {
        return same_workflow(&existing, wf).map(|()| None);
    }
    let state = wf.state_from_json(&input).map_err(|e| {
        Error::Invalid(format!("the input is not a valid state of {}: {e}", wf.id()))
    })?;
    let (frontier, arrivals, visits, fork) = match fork {
        Some(seed) => (seed.frontier, seed.arrivals, seed.visits, Some(seed.origin)),
        None => {
            let frontier = wf
                .start(state.as_ref())
                .map_err(|e| Error::Invalid(format!("routing from START: {e}")))?
                .into_iter()
                .filter_map(|t| match t {
                    NextTarget::Node(n) => Some(wf.nodes()[n].name.clone()),
                    NextTarget::End => None,
                })
                .collect();
            (frontier, BTreeMap::new(), BTreeMap::new(), None)
        }
    };
    let now = shell.clock.now_ms();
    let workflow = workflow_ref(wf);
    let mut record = ThreadRecord::new(id.clone(), workflow.clone(), now);
    record.labels = labels.clone();
    if let Some(f) = &fork {
        record.parent = Some((ThreadId::new(f.thread.clone())?, cairn_storage::Seq(f.seq)));
    }
    let seed = Some(shell.ids.thread_seed());
    let body = Body::ThreadCreated {
        workflow,
        input,
        frontier,
        labels,
        fork,
        arrivals,
        visits,
        policy,
        seed,
    };
    let mut batch = Batch::default();
    codec::push_event(&mut batch, id, &body, now)?;
    batch.threads.push(record);
    batch.guards.push(Guard::Absent { thread: id.clone() });
    Ok(Some(batch))
}

/// Waits for a creation batch: `true` once the thread exists durably, `false` if somebody
/// created it between the check and the write (the same answer as finding it).
///
/// # Errors
/// As [`create`].
pub(crate) async fn settle(
    shell: &Shell,
    wf: &DynWorkflow,
    id: &ThreadId,
    pending: Pending,
) -> Result<bool, Error> {
    match pending.wait().await {
        Ok(_) => Ok(true),
        Err(cairn_storage::Error::GuardFailed { .. }) => {
            let existing =
                shell.store.thread(id)?.ok_or_else(|| Error::UnknownThread(id.to_string()))?;
            same_workflow(&existing, wf).map(|()| false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The reference a thread record keeps to the workflow it runs.
pub(crate) fn workflow_ref(wf: &DynWorkflow) -> cairn_storage::WorkflowRef {
    cairn_storage::WorkflowRef {
        id: wf.id().to_owned(),
        version: wf.version(),
        fingerprint: wf.fingerprint().to_string(),
    }
}

fn same_workflow(existing: &ThreadRecord, wf: &DynWorkflow) -> Result<(), Error> {
    if existing.workflow.id == wf.id() {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "thread {} exists and runs workflow {}, not {}",
            existing.id,
            existing.workflow.id,
            wf.id()
        )))
    }
}

/// Where a forked thread starts: its origin, and the frontier, join arrivals and loop visits of
/// the origin at the fork point (its state is the `input` of [`create`]).
#[derive(Debug, Clone)]
pub(crate) struct ForkSeed {
    pub origin: ForkOrigin,
    pub frontier: Vec<String>,
    pub arrivals: BTreeMap<String, Vec<String>>,
    pub visits: BTreeMap<String, u32>,
}
