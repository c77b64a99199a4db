//! What operator tooling needs of an engine beyond an application's API: reads of a thread at
//! any seq of its log, writes to a thread no runner drives, and starting a thread from another's
//! context (a fork). The `cairn-tools` crate (time travel, forks, rollbacks, debug bundles, the
//! endpoint, the command line) is built on these and on the rest of the public API, nothing else.
//!
//! Every read here folds the stored log with the same function the runner used
//! ([`ThreadCtx::apply`]), so a context at a seq is the one the live run had there. Every write
//! here claims the thread in-process and guards on its stored status, as a control does: a
//! runner never sees a half-written change.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{
    CheckpointFilter, CheckpointId, CheckpointInfo, Event, Store, ThreadId, ThreadRecord,
    ThreadStatus,
};
use serde_json::Value;

use super::engine::Engine;
use super::handle::ThreadHandle;
use crate::core::codec::Recorded;
use crate::core::event::{Body, ForkOrigin};
use crate::core::thread_ctx::{Snapshot, ThreadCtx};
use crate::error::Error;
use crate::exec::fetch;
use crate::exec::start::{ForkSeed, NewThread, create};

pub use super::ThreadPages;
pub use super::builder::is_postgres_url;
pub use super::checkpoint::ParkedCheckpoint;
pub use super::continued::CHAIN_FOLLOW_MAX;
pub use super::create::Creation;
pub use super::migrate::MIGRATION_TAG;
pub use super::schedule::check as check_schedule_name;
pub use super::schedule_links::links_wait;
pub use super::schedule_ticks::Rule;
pub use super::versioned::{latest_workflow, registered, restore_at, workflow_at};
pub use super::viewed::{
    ViewedEvent, sealed_view, stored_checkpoint, stored_events, stored_payload, viewed_events,
};
pub use crate::core::child_start::{RESERVED_LABELS, STARTED_BY_LABEL};
pub use crate::core::children::PARENT_LABEL;
pub use crate::exec::start::check_labels;
pub use crate::exec::subgraph::child_id;

/// The record of thread `id`.
///
/// # Errors
/// [`Error::UnknownThread`]; storage errors.
pub async fn thread_record(store: &dyn Store, id: &ThreadId) -> Result<ThreadRecord, Error> {
    fetch::record(store, id).await
}

/// The context of `thread` after the event at `at` (its last when `None`), folded by `wf`
/// (latest checkpoint at or before it, then the events after; an older checkpoint when that one
/// is damaged).
///
/// # Errors
/// [`Error::UnknownThread`]; [`Error::Record`] for a damaged event; storage errors.
pub async fn restore(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    at: Option<u64>,
) -> Result<ThreadCtx, Error> {
    fetch::restore(store, wf, thread, at).await
}

/// The registered workflow the thread of `record` runs (as [`Engine::workflow_of`], for a caller
/// holding the record: nothing is read).
///
/// # Errors
/// [`Error::UnknownWorkflow`], [`Error::FingerprintChanged`].
pub fn workflow_for(engine: &Engine, record: &ThreadRecord) -> Result<Arc<DynWorkflow>, Error> {
    engine.shell.registry.workflow_for(record)
}

/// The seqs at which thread `id` was migrated onto another workflow version (each covered by a
/// checkpoint tagged `migration`), in order.
///
/// # Errors
/// Storage errors.
pub async fn migration_points(engine: &Engine, id: &ThreadId) -> Result<Vec<u64>, Error> {
    let filter = CheckpointFilter {
        thread: Some(id.clone()),
        any_tags: vec![MIGRATION_TAG.to_owned()],
        ..CheckpointFilter::default()
    };
    let listed = checkpoints_all(engine.store().as_ref(), &filter).await?;
    let mut out: Vec<u64> = listed.into_iter().map(|c| c.covers.seq.0).collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Decodes a stored event, reading its body from the payload table when it was offloaded.
///
/// # Errors
/// [`Error::Record`] for an event that does not decode; storage errors.
pub async fn decode(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    fetch::decode(store, event).await
}

/// As [`decode`], with a `checkpoint_created` event naming the checkpoint that covers it.
///
/// # Errors
/// As [`decode`].
pub async fn decode_announced(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    fetch::decode_announced(store, event).await
}

/// Every checkpoint `filter` selects, read page by page.
///
/// # Errors
/// Storage errors.
pub async fn checkpoints_all(
    store: &dyn Store,
    filter: &CheckpointFilter,
) -> Result<Vec<CheckpointInfo>, Error> {
    fetch::checkpoints_all(store, filter).await
}

/// The records of every child thread (sub-workflow run) of `parent`.
///
/// # Errors
/// Storage errors.
pub async fn children_of(store: &dyn Store, parent: &ThreadId) -> Result<Vec<ThreadRecord>, Error> {
    fetch::children_of(store, parent).await
}

/// The records of the child threads `parent`'s nodes started at run time (`ctx.start_child`).
///
/// # Errors
/// Storage errors.
pub async fn started_children_of(
    store: &dyn Store,
    parent: &ThreadId,
) -> Result<Vec<ThreadRecord>, Error> {
    fetch::started_children_of(store, parent, crate::limits::CHILDREN_PER_THREAD_MAX).await
}

/// Appends `preface` (each applied to `ctx` in turn), then `checkpoint_created` and a checkpoint
/// of the context after them, to a thread no runner drives, in one batch guarded by the status
/// `record` has; `reshape` may change the snapshot before it is stored. `ctx` must be the
/// thread's context at its last seq (`record.last`). Returns the checkpoint's id once durable.
///
/// # Errors
/// [`Error::WrongStatus`] while a runner drives the thread; [`Error::Invalid`] if the thread
/// moved on past `ctx`; what `reshape` returns; storage errors.
pub async fn write_parked(
    engine: &Engine,
    record: ThreadRecord,
    ctx: ThreadCtx,
    preface: Vec<Body>,
    checkpoint: ParkedCheckpoint,
    reshape: impl FnOnce(Snapshot) -> Result<Snapshot, Error>,
) -> Result<CheckpointId, Error> {
    engine.write_parked(record, ctx, preface, checkpoint, reshape).await
}

/// Tells the engine that thread `id`, which no runner drives, now has `status` (after a write
/// of [`write_parked`] changed it): whoever waits on the thread sees it.
pub async fn status_changed(engine: &Engine, id: &ThreadId, status: ThreadStatus) {
    engine.shell.coord.status_changed(id, status).await;
}

/// [`Engine::signal`], and whether the signal woke the thread here (it now runs in this engine).
///
/// # Errors
/// As [`Engine::signal`].
pub async fn signal_and_wake(
    engine: &Engine,
    thread: &str,
    name: &str,
    value: impl serde::Serialize,
) -> Result<(u64, bool), Error> {
    engine.signal_and_wake(thread, name, value).await
}

/// [`Engine::signal_once`], and whether the signal woke the thread here (the command line runs
/// a woken thread until it parks again, as for [`signal_and_wake`]).
///
/// # Errors
/// As [`Engine::signal_once`].
pub async fn signal_once_and_wake(
    engine: &Engine,
    thread: &str,
    name: &str,
    value: impl serde::Serialize,
    dedup_key: &str,
) -> Result<(crate::Sent, bool), Error> {
    engine.signal_once_and_wake(thread, name, value, dedup_key).await
}

/// Completes a promise as [`Engine::complete_promise`] does, and says whether the completion
/// woke its thread in this engine (the command line then runs it here until it ends or parks).
///
/// # Errors
/// As [`Engine::complete_promise`].
pub async fn complete_promise_and_wake(
    engine: &Engine,
    id: &str,
    outcome: Result<serde_json::Value, String>,
) -> Result<(crate::Completed, bool), Error> {
    engine.complete_promise_and_wake(id, outcome).await
}

/// Starts a thread as [`Engine::create`] does and runs it here (a queued one waits for this
/// engine's admitter): what an endpoint's start does, saying whether the call created it.
///
/// # Errors
/// As [`Engine::create`].
pub async fn start_created(
    engine: &Engine,
    workflow: &str,
    input: Value,
    options: crate::config::StartOptions,
) -> Result<Creation, Error> {
    engine.write_start(workflow, input, options, true).await
}

/// A fresh thread id from the engine's id stream.
pub fn new_thread_id(engine: &Engine) -> String {
    engine.shell.ids.new_id()
}

/// A new thread that starts from another thread's context (see [`start_fork`]).
pub struct Fork<'a> {
    /// The new thread's id (not an existing thread's).
    pub id: ThreadId,
    /// The workflow (version) the origin ran at `origin.seq`.
    pub workflow: &'a Arc<DynWorkflow>,
    /// The thread and seq it starts from.
    pub origin: ForkOrigin,
    /// The origin's context at that seq: its state is the new thread's input, its frontier,
    /// join arrivals and loop visits are where the new thread starts.
    pub ctx: &'a ThreadCtx,
    /// The new thread's labels.
    pub labels: BTreeMap<String, String>,
    /// An update (JSON of the workflow's update type) recorded as the new thread's first
    /// `state_updated` event.
    pub update: Option<Value>,
    /// Run it at once; otherwise it stays Created until resumed.
    pub start: bool,
}

/// Creates the thread `fork` describes (its `thread_created` event names the origin), records
/// its update, and runs it unless `fork.start` is false.
///
/// # Errors
/// [`Error::Invalid`] if a thread with its id exists; [`Error::WrongStatus`] if something drives
/// it before the update is written; [`Error::Codec`] for a state that does not encode; storage
/// errors.
pub async fn start_fork(engine: &Engine, fork: Fork<'_>) -> Result<ThreadHandle, Error> {
    let Fork { id, workflow, origin, ctx, labels, update, start } = fork;
    let input = ctx.state.to_json().map_err(|e| Error::Codec(e.to_string()))?;
    let reason = format!("fork of {} at seq {}", origin.thread, origin.seq);
    let seed = ForkSeed {
        origin,
        frontier: ctx.meta.frontier.clone(),
        arrivals: ctx.meta.arrivals.clone(),
        visits: ctx.meta.visits.iter().map(|(node, n)| (node.to_string(), *n)).collect(),
    };
    let new = NewThread { labels, fork: Some(seed), ..NewThread::new(workflow, &id, input) };
    if !create(&engine.shell, new).await? {
        return Err(Error::Invalid(format!("thread {id} was created concurrently")));
    }
    if let Some(update) = update {
        let body = Body::StateUpdated { update, reason };
        let created = ThreadStatus::Created;
        crate::exec::parked::write_parked(&engine.shell, &id, created, vec![body], None)
            .await
            .map_err(|e| {
                if let Error::WrongStatus { .. } = e { super::checkpoint::busy(&id) } else { e }
            })?;
    }
    if start {
        crate::exec::drive::spawn_drive(&engine.shell, id.clone(), "forked");
    }
    Ok(ThreadHandle::new(engine.clone(), id))
}
