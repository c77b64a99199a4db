//! Creating a thread: the first event and record, written once.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::{DynWorkflow, NextTarget};
use cairn_storage::{Batch, Guard, LeaseOp, Pending, ThreadId, ThreadRecord};
use serde_json::Value;

use super::shell::Shell;
use crate::core::child_start::RESERVED_LABELS;
use crate::core::event::{Body, ForkOrigin, ThreadPolicy};
use crate::core::status::Transition;
use crate::core::thread_ctx::ThreadCtx;
use crate::core::{codec, decide, summary};
use crate::error::Error;

/// What a new thread is: its workflow, id, input (its first state), labels, the point it is
/// forked from, and its policy.
pub(crate) struct NewThread<'a> {
    pub wf: &'a Arc<DynWorkflow>,
    pub id: &'a ThreadId,
    pub input: Value,
    pub labels: BTreeMap<String, String>,
    pub fork: Option<ForkSeed>,
    pub policy: ThreadPolicy,
    /// Pin it to this engine's build id, if it has one (label `cairn.build`); `false` keeps
    /// the labels as given (an auto-upgrade start; a successor, which inherits its
    /// predecessor's labels, pin included).
    pub pin: bool,
}

impl<'a> NewThread<'a> {
    /// A thread `id` of `wf` on `input`, without labels, fork or policy.
    pub(crate) fn new(wf: &'a Arc<DynWorkflow>, id: &'a ThreadId, input: Value) -> Self {
        NewThread {
            wf,
            id,
            input,
            labels: BTreeMap::new(),
            fork: None,
            policy: ThreadPolicy::default(),
            pin: true,
        }
    }
}

/// Writes `new`. Returns `false` (and writes nothing) if a thread with its id exists already:
/// starting is idempotent.
///
/// # Errors
/// [`Error::Invalid`] if the id exists with another workflow or the input is not a valid state;
/// storage errors.
pub(crate) async fn create(shell: &Shell, new: NewThread<'_>) -> Result<bool, Error> {
    let (wf, id) = (new.wf, new.id);
    match prepare(shell, new).await? {
        None => Ok(false),
        Some(batch) => settle(shell, wf, id, shell.store.append_async(batch).await?).await,
    }
}

/// The batch that creates `new`, or `None` if a thread with its id exists already (of the same
/// workflow).
///
/// # Errors
/// As [`create`].
pub(crate) async fn prepare(shell: &Shell, new: NewThread<'_>) -> Result<Option<Batch>, Error> {
    let mut batch = Batch::default();
    Ok(prepare_in(shell, new, &mut batch).await?.then_some(batch))
}

/// [`prepare`] into `batch`, which may hold other writes (a continue-as-new's successor is
/// created in its predecessor's last batch); `false` (and nothing added) if the id exists.
///
/// # Errors
/// As [`create`].
pub(crate) async fn prepare_in(
    shell: &Shell,
    new: NewThread<'_>,
    batch: &mut Batch,
) -> Result<bool, Error> {
    let id = new.id;
    let existing = shell.store.thread(id).await?;
    let Some((body, record, now)) = creation(shell, new, existing)? else {
        return Ok(false);
    };
    codec::push_event(batch, id, &body, now)?;
    batch.threads.push(record);
    batch.guards.push(Guard::Absent { thread: id.clone() });
    Ok(true)
}

/// A thread created already running under this engine's lease: its creation batch, and the
/// context and record its runner goes on from (what a restore of that batch would give).
pub(crate) struct Running {
    /// The creation (`thread_created`, then the status change to Running, the record, the
    /// lease taken by this engine, guarded by the id being free).
    pub batch: Batch,
    /// The thread's context after the batch.
    pub ctx: ThreadCtx,
    /// The thread's record as the batch writes it.
    pub record: ThreadRecord,
}

/// [`prepare`] for a thread that this engine runs at once: the creation also moves it to
/// Running and takes its lease for `shell.owner`, so that its runner starts from the returned
/// context without reading the thread back, and its first batches may share the creation's
/// commit. The lease chains them to the creation: every later batch of the runner renews it, and
/// a renewal fails on a thread this creation did not make (it found the id taken), since only a
/// runner holding the thread's claim in this engine takes the lease as this owner.
///
/// # Errors
/// As [`create`].
pub(crate) async fn prepare_running(
    shell: &Shell,
    new: NewThread<'_>,
) -> Result<Option<Running>, Error> {
    let (wf, id) = (new.wf, new.id);
    let existing = shell.store.thread(id).await?;
    let Some((body, mut record, now)) = creation(shell, new, existing)? else {
        return Ok(None);
    };
    let mut ctx = ThreadCtx::created(wf, id.as_str(), &body, now)?;
    let mut events = vec![(body, now)];
    decide::emit_status(&mut ctx, &mut events, Transition::Run, STARTED, now)?;
    let mut batch = Batch::default();
    for (body, at) in &events {
        codec::push_event(&mut batch, id, body, *at)?;
    }
    record.status = ctx.meta.status;
    record.summary = summary::summary_bytes(&ctx);
    batch.threads.push(record.clone());
    batch.leases.push(LeaseOp::Acquire {
        thread: id.clone(),
        owner: shell.owner.clone(),
        now_ms: now,
        ttl_ms: shell.config.lease_ttl_ms,
    });
    batch.guards.push(Guard::Absent { thread: id.clone() });
    Ok(Some(Running { batch, ctx, record }))
}

/// Why a thread created by `start` is driven (the status change's reason).
pub(crate) const STARTED: &str = "started";

/// The first event and the record of `new`, and the creation time; `None` if a thread with its
/// id exists already (`existing`, of the same workflow).
fn creation(
    shell: &Shell,
    new: NewThread<'_>,
    existing: Option<ThreadRecord>,
) -> Result<Option<(Body, ThreadRecord, u64)>, Error> {
    let NewThread { wf, id, input, mut labels, fork, policy, pin } = new;
    if pin && let Some(build) = &shell.config.build_id {
        labels.insert(crate::core::child_start::BUILD_LABEL.to_owned(), build.clone());
    }
    if let Some(existing) = existing {
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
        policy: Box::new(policy),
        seed,
    };
    Ok(Some((body, record, now)))
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
            let existing = super::fetch::record(shell.store.as_ref(), id).await?;
            same_workflow(&existing, wf).map(|()| false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The reference a thread record keeps to the workflow it runs.
pub(crate) fn workflow_ref(wf: &DynWorkflow) -> cairn_storage::WorkflowRef {
    cairn_storage::WorkflowRef {
        id: wf.id().into(),
        version: wf.version(),
        fingerprint: wf.fingerprint().to_string().into(),
    }
}

pub(crate) fn same_workflow(existing: &ThreadRecord, wf: &DynWorkflow) -> Result<(), Error> {
    if &*existing.workflow.id == wf.id() {
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

/// Refuses `labels` holding one the engine reserves ([`RESERVED_LABELS`]:
/// `parent`, `started_by`, `parent_close`, `closes_children`, `superseded_by`,
/// `batched_into`, `cairn.build`), naming it: a start or a fork given one
/// writes nothing.
///
/// # Errors
/// [`Error::Invalid`] naming the first reserved label.
///
/// # Examples
/// ```
/// let mut labels = std::collections::BTreeMap::new();
/// labels.insert("team".to_owned(), "a".to_owned());
/// assert!(cairn::admin::check_labels(&labels).is_ok());
/// labels.insert("started_by".to_owned(), "order-1".to_owned());
/// assert!(cairn::admin::check_labels(&labels).is_err());
/// ```
pub fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), Error> {
    match labels.keys().find(|k| RESERVED_LABELS.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(Error::Invalid(format!(
            "the label {key:?} is reserved: the engine sets it (reserved labels: {})",
            RESERVED_LABELS.join(", ")
        ))),
    }
}
