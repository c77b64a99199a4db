//! What the engine's async paths read through the store's async reads (`thread_async`,
//! `read_since_async`...): a thread's record, its context (restore), an event's body with its
//! payload, its child threads. On PostgreSQL each read is awaited, so a round trip to the server
//! suspends the task and blocks no runtime worker; on a file the reads answer at once.
//!
//! `core` stays synchronous and pure: the reads are made here and their data handed to it
//! (`core::restore::from_checkpoint`, `ThreadCtx::apply`, `core::codec::decode` of an event
//! whose payload is loaded already). The synchronous `core::restore::restore` and friends
//! remain for callers off the runtime (the test kit); the two restores follow the same steps
//! and must stay alike. The debug tools (`debug/`), the CLI and the endpoint read through here.

use cairn_dsl::DynWorkflow;
use cairn_storage::{CheckpointFilter, Event, Page, Seq, Store, ThreadFilter, ThreadId};
use cairn_storage::{ThreadRecord, ThreadStatus};

use crate::core::children::PARENT_LABEL;
use crate::core::codec::{self, Recorded};
use crate::core::restore::{damage, from_checkpoint};
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::limits;

/// Records read per page of a listing of child threads.
const CHILDREN_PAGE: usize = 500;

/// The stored record of `id`.
///
/// # Errors
/// [`Error::UnknownThread`]; storage errors.
pub(crate) async fn record(store: &dyn Store, id: &ThreadId) -> Result<ThreadRecord, Error> {
    store.thread_async(id).await?.ok_or_else(|| Error::UnknownThread(id.to_string()))
}

/// The stored status of `id`, if it exists.
///
/// # Errors
/// Storage errors.
pub(crate) async fn status(
    store: &dyn Store,
    id: &ThreadId,
) -> Result<Option<ThreadStatus>, Error> {
    Ok(store.thread_async(id).await?.map(|r| r.status))
}

/// Decodes a stored event's body, its payload read first when it was offloaded (what
/// [`codec::decode`] does with a sync read).
///
/// # Errors
/// As [`codec::decode`].
pub(crate) async fn decode(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    let event = match (&event.payload, event.data.is_empty()) {
        (Some(r), true) => {
            let data = store.payload_async(r).await?;
            Event { data, ..event }
        }
        _ => event,
    };
    codec::decode(store, event)
}

/// [`decode`], then the id of the checkpoint a `checkpoint_created` event announces filled in
/// from the store, as [`codec::decode_announced`] does with sync reads.
///
/// # Errors
/// As [`codec::decode_announced`].
pub(crate) async fn decode_announced(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    let mut rec = decode(store, event).await?;
    if let crate::core::event::Body::CheckpointCreated { checkpoint, .. } = &mut rec.body {
        *checkpoint = store.checkpoint_covering_async(&rec.thread, rec.bookmark.seq).await?;
    }
    Ok(rec)
}

/// The context of `thread` after the event at `at` (or after its last event): the async twin
/// of [`crate::core::restore::restore`], with the same fallbacks (a damaged checkpoint is
/// skipped for an older one, failing all of them the thread's first event).
///
/// # Errors
/// As [`crate::core::restore::restore`].
pub(crate) async fn restore(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    at: Option<u64>,
) -> Result<ThreadCtx, Error> {
    let target = at.unwrap_or(u64::MAX);
    let from = match store.latest_checkpoint_at_or_before_async(thread, Seq(target)).await {
        Ok(None) => None,
        Ok(Some(cp)) => match from_checkpoint(wf, thread, &cp) {
            Ok(ctx) => Some(ctx),
            Err(e) if damage(&e) => older(store, wf, thread, cp.covers.seq.0, &e).await?,
            Err(e) => return Err(e),
        },
        Err(e) => {
            let e = Error::from(e);
            if !damage(&e) {
                return Err(e);
            }
            older(store, wf, thread, target.saturating_add(1), &e).await?
        }
    };
    let ctx = match from {
        Some(ctx) => ctx,
        None => created(store, wf, thread).await?,
    };
    fold_on(store, thread, ctx, target).await
}

/// `ctx` with the events of `thread` after it applied, up to seq `target`.
///
/// # Errors
/// Storage errors; [`Error::Record`] for a log that does not fold.
pub(crate) async fn fold_on(
    store: &dyn Store,
    thread: &ThreadId,
    mut ctx: ThreadCtx,
    target: u64,
) -> Result<ThreadCtx, Error> {
    loop {
        let chunk = limits::READ_CHUNK_EVENTS;
        let events = store.read_since_async(thread, Seq(ctx.meta.seq), chunk).await?;
        let n = events.len();
        for event in events {
            if event.bookmark.seq.0 > target {
                return Ok(ctx);
            }
            let rec = decode(store, event).await?;
            ctx.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body)?;
        }
        if n < chunk {
            return Ok(ctx);
        }
    }
}

/// The context of the newest intact checkpoint of `thread` covering a seq below `below`, or
/// `None` (see `core::restore`'s `older`, which this follows).
async fn older(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    below: u64,
    why: &Error,
) -> Result<Option<ThreadCtx>, Error> {
    tracing::warn!(thread = %thread, error = %why, "checkpoint damaged; restoring from an older one");
    let filter = CheckpointFilter { thread: Some(thread.clone()), ..CheckpointFilter::default() };
    let page = Page { limit: limits::READ_CHUNK_EVENTS, offset: 0 };
    let mut infos = match store.list_checkpoints_async(&filter, page).await {
        Ok(infos) => infos,
        Err(e) => {
            tracing::warn!(thread = %thread, error = %e, "checkpoint list unreadable; folding the whole log");
            return Ok(None);
        }
    };
    infos.retain(|i| i.covers.seq.0 < below);
    infos.sort_by(|a, b| b.covers.seq.cmp(&a.covers.seq).then(b.id.cmp(&a.id)));
    for info in infos.into_iter().take(limits::RESTORE_FALLBACK_CHECKPOINTS_MAX) {
        let loaded = match store.checkpoint_async(info.id).await {
            Ok(Some(cp)) => from_checkpoint(wf, thread, &cp),
            Ok(None) => continue,
            Err(e) => Err(e.into()),
        };
        match loaded {
            Ok(ctx) => return Ok(Some(ctx)),
            Err(e) if damage(&e) => {
                tracing::warn!(thread = %thread, checkpoint = info.id.0, error = %e, "checkpoint damaged");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// The context after the thread's first event.
///
/// # Errors
/// [`Error::UnknownThread`] for a thread without events; storage and record errors.
pub(crate) async fn created(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
) -> Result<ThreadCtx, Error> {
    let first = store.read_range_async(thread, Seq(1), Seq(1)).await?;
    let Some(event) = first.into_iter().next() else {
        return Err(Error::UnknownThread(thread.to_string()));
    };
    let rec = decode(store, event).await?;
    ThreadCtx::created(wf, thread.as_str(), &rec.body, rec.bookmark.at_ms)
}

/// The child threads of `parent` (every page of them), as `core::children::children_of`.
///
/// # Errors
/// Storage errors.
pub(crate) async fn children_of(
    store: &dyn Store,
    parent: &ThreadId,
) -> Result<Vec<ThreadRecord>, Error> {
    let filter = ThreadFilter {
        label: Some((PARENT_LABEL.to_owned(), parent.to_string())),
        ..ThreadFilter::default()
    };
    let mut out = Vec::new();
    loop {
        let page = Page { limit: CHILDREN_PAGE, offset: out.len() };
        let found = store.list_threads_async(&filter, page).await?;
        let done = found.len() < CHILDREN_PAGE;
        out.extend(found);
        if done {
            return Ok(out);
        }
    }
}

/// The unfinished parent of `record` if it is a sub-workflow's child whose parent has not
/// ended (named by its [`PARENT_LABEL`]): that parent's node drives it.
///
/// # Errors
/// Storage errors reading the parent's record.
pub(crate) async fn unfinished_parent(
    store: &dyn Store,
    record: &ThreadRecord,
) -> Result<Option<ThreadId>, Error> {
    let Some(parent) = record.labels.get(PARENT_LABEL) else { return Ok(None) };
    let parent = ThreadId::new(parent.clone())?;
    Ok(match store.thread_async(&parent).await? {
        Some(p) if !p.status.is_terminal() => Some(parent),
        _ => None,
    })
}
