//! Restore: the thread context at a seq = the latest checkpoint at or before it + the events after.
//!
//! The cost is one checkpoint load plus the events since that checkpoint, so it does not grow with
//! the length of the thread's history as long as checkpoints are taken (periodic policy).

use cairn_dsl::DynWorkflow;
use cairn_storage::{Checkpoint, CheckpointFilter, Page, Seq, Store, ThreadId};

use crate::core::codec;
use crate::core::thread_ctx::{Snapshot, ThreadCtx};
use crate::error::Error;
use crate::limits;

/// Decodes a checkpoint's snapshot bytes.
///
/// # Errors
/// [`Error::Record`] if the bytes are not a snapshot.
pub fn decode_snapshot(thread: &ThreadId, seq: u64, bytes: &[u8]) -> Result<Snapshot, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Record {
        thread: thread.to_string(),
        seq,
        detail: format!("checkpoint snapshot does not decode: {e}"),
    })
}

/// The context of `thread` after the event at `at` (or after its last event when `at` is None).
///
/// A checkpoint that fails its checks (damaged bytes, a snapshot that does not decode or does not
/// match the seq it claims) is skipped with a warning: the next older one is used, and failing
/// all of them the thread's first event. The log is the source of truth; checkpoints only bound
/// the cost, so a damaged one costs time, never data.
///
/// # Errors
/// [`Error::UnknownThread`] if the thread has no events; [`Error::Record`] if the log does not
/// fold (damage or a different workflow); storage errors.
pub fn restore(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    at: Option<u64>,
) -> Result<ThreadCtx, Error> {
    let target = at.unwrap_or(u64::MAX);
    let latest = store.latest_checkpoint_at_or_before(thread, Seq(target));
    let from_checkpoint = match latest {
        Ok(None) => None,
        Ok(Some(cp)) => {
            let covers = cp.covers.seq.0;
            match from_checkpoint(wf, thread, &cp) {
                Ok(ctx) => Some(ctx),
                Err(e) if damage(&e) => older(store, wf, thread, covers, &e)?,
                Err(e) => return Err(e),
            }
        }
        Err(e) => {
            let e = Error::from(e);
            if !damage(&e) {
                return Err(e);
            }
            older(store, wf, thread, target.saturating_add(1), &e)?
        }
    };
    let mut ctx = match from_checkpoint {
        Some(ctx) => ctx,
        None => created(store, wf, thread)?,
    };
    loop {
        let events = store.read_since(thread, Seq(ctx.meta.seq), limits::READ_CHUNK_EVENTS)?;
        let n = events.len();
        for event in events {
            if event.bookmark.seq.0 > target {
                return Ok(ctx);
            }
            let rec = codec::decode(store, event)?;
            ctx.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body)?;
        }
        if n < limits::READ_CHUNK_EVENTS {
            return Ok(ctx);
        }
    }
}

/// The context a checkpoint holds, checked against the seq it claims to cover.
pub(crate) fn from_checkpoint(
    wf: &DynWorkflow,
    thread: &ThreadId,
    cp: &Checkpoint,
) -> Result<ThreadCtx, Error> {
    let snapshot = decode_snapshot(thread, cp.covers.seq.0, &cp.snapshot)?;
    if snapshot.meta.seq != cp.covers.seq.0 {
        return Err(Error::Record {
            thread: thread.to_string(),
            seq: cp.covers.seq.0,
            detail: format!(
                "checkpoint {} covers seq {} but its snapshot is at {}",
                cp.id.0, cp.covers.seq, snapshot.meta.seq
            ),
        });
    }
    ThreadCtx::from_snapshot(wf, snapshot)
}

/// Whether `e` says a checkpoint is damaged (rather than that storage cannot be read at all).
pub(crate) fn damage(e: &Error) -> bool {
    matches!(
        e,
        Error::Record { .. }
            | Error::Codec(_)
            | Error::Storage(cairn_storage::Error::Corrupted { .. })
    )
}

/// The context of the newest intact checkpoint of `thread` covering a seq below `below`, or
/// `None` when there is none (restore then folds from the first event). Tries at most
/// [`limits::RESTORE_FALLBACK_CHECKPOINTS_MAX`] of them.
fn older(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    below: u64,
    why: &Error,
) -> Result<Option<ThreadCtx>, Error> {
    tracing::warn!(thread = %thread, error = %why, "checkpoint damaged; restoring from an older one");
    let filter = CheckpointFilter { thread: Some(thread.clone()), ..CheckpointFilter::default() };
    let page = Page { limit: limits::READ_CHUNK_EVENTS, offset: 0 };
    let mut infos = match store.list_checkpoints(&filter, page) {
        Ok(infos) => infos,
        Err(e) => {
            // The index itself is damaged: the log alone still restores the thread.
            tracing::warn!(thread = %thread, error = %e, "checkpoint list unreadable; folding the whole log");
            return Ok(None);
        }
    };
    infos.retain(|i| i.covers.seq.0 < below);
    infos.sort_by(|a, b| b.covers.seq.cmp(&a.covers.seq).then(b.id.cmp(&a.id)));
    for info in infos.into_iter().take(limits::RESTORE_FALLBACK_CHECKPOINTS_MAX) {
        let loaded = match store.checkpoint(info.id) {
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
pub(crate) fn created(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
) -> Result<ThreadCtx, Error> {
    let first = store.read_range(thread, Seq(1), Seq(1))?;
    let Some(event) = first.into_iter().next() else {
        return Err(Error::UnknownThread(thread.to_string()));
    };
    let rec = codec::decode(store, event)?;
    ThreadCtx::created(wf, thread.as_str(), &rec.body, rec.bookmark.at_ms)
}
