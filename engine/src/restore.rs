//! Restore: the thread context at a seq = the latest checkpoint at or before it + the events after.
//!
//! The cost is one checkpoint load plus the events since that checkpoint, so it does not grow with
//! the length of the thread's history as long as checkpoints are taken (periodic policy).

use cairn_dsl::DynWorkflow;
use cairn_storage::{Seq, Store, ThreadId};

use crate::error::Error;
use crate::limits;
use crate::log;
use crate::thread_ctx::{Snapshot, ThreadCtx};

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
    let checkpoint = store.latest_checkpoint_at_or_before(thread, Seq(target))?;
    let mut ctx = match checkpoint {
        Some(cp) => {
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
            ThreadCtx::from_snapshot(wf, snapshot)?
        }
        None => {
            let first = store.read_range(thread, Seq(1), Seq(1))?;
            let Some(event) = first.into_iter().next() else {
                return Err(Error::UnknownThread(thread.to_string()));
            };
            let rec = log::decode(store, event)?;
            ThreadCtx::created(wf, thread.as_str(), &rec.body, rec.bookmark.at_ms)?
        }
    };
    loop {
        let events = store.read_since(thread, Seq(ctx.meta.seq), limits::READ_CHUNK)?;
        let n = events.len();
        for event in events {
            if event.bookmark.seq.0 > target {
                return Ok(ctx);
            }
            let rec = log::decode(store, event)?;
            ctx.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body)?;
        }
        if n < limits::READ_CHUNK {
            return Ok(ctx);
        }
    }
}
