//! Whole-thread deletion inside the writer (see [`crate::Maintenance::delete_thread`] and
//! `storage/src/delete.rs`).
//!
//! Same two phases as [`super::prune`]: the plan reads and checks everything it will remove (a
//! damaged record rejects the delete and removes nothing), then the apply removes it, in the
//! group's write transaction.

use std::collections::{BTreeSet, HashSet};

use ::redb::ReadableTable;

use super::index::{fetch, locate, lsns, storage};
use super::index_keys::keys_of_frame;
use super::prune::{LogCut, correlation_entries, plan_clear, remove_checkpoints, remove_log};
use super::rows::Row;
use super::tables::Tables;
use crate::checkpoint::CheckpointInfo;
use crate::codec;
use crate::delete::may_refer_to;
use crate::delete::{DeleteOptions, Deleted};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::thread::ThreadStatus;

/// Seqs read and checked at a time: the plan holds one window of events in memory, not the
/// whole thread's log (what it keeps of each event is its lsn, and its correlation id if any).
const READ_WINDOW_SEQS: u64 = 1024;

/// What a delete will remove, read and checked.
pub(crate) struct DeletePlan {
    thread: ThreadId,
    status: ThreadStatus,
    /// The lsns of the thread's events.
    events: Vec<u64>,
    /// (correlation id, lsn): the correlation-index entries of those events.
    correlations: Vec<(String, u64)>,
    /// The first seqs of the thread's seq-index chunks.
    chunks: Vec<u64>,
    checkpoints: Vec<CheckpointInfo>,
    /// The names of the locks the thread owns.
    locks: Vec<String>,
    /// Payloads only this thread's events reference.
    payloads: Vec<[u8; 32]>,
    /// Its queue place released (`docs/queues.md`).
    queue: crate::plan_queue::QueueWrites,
}

/// Checks a delete of `thread`: `None` when there is no such thread.
pub(crate) fn plan_delete_thread(
    tables: &mut Tables<'_, '_>,
    thread: &ThreadId,
    options: DeleteOptions,
) -> Result<Option<DeletePlan>, Error> {
    let Some(stored) = tables.latest_thread(thread)? else { return Ok(None) };
    let status = stored.record.status;
    if !options.force && !status.is_terminal() {
        return Err(Error::Unfinished { thread: thread.clone(), status });
    }
    let mut plan = DeletePlan {
        thread: thread.clone(),
        status,
        events: Vec::new(),
        correlations: Vec::new(),
        chunks: Vec::new(),
        checkpoints: Vec::new(),
        locks: Vec::new(),
        payloads: Vec::new(),
        queue: crate::plan_queue::QueueWrites::default(),
    };
    let mut queue = crate::plan_queue::QueuePlan::default();
    queue.leave(tables, thread)?;
    plan.queue = queue.finish()?;
    let mut referenced = BTreeSet::new();
    let last = stored.record.last.map_or(0, |b| b.seq.0);
    let mut from = stored.record.first_seq.0;
    while from <= last {
        let to = last.min(from.saturating_add(READ_WINDOW_SEQS - 1));
        let located = locate(&*tables.seq_index()?, &stored, from, to)?;
        let read = fetch(&*tables.events()?, thread, &located)?;
        plan.correlations.extend(correlation_entries(tables, &read)?);
        referenced.extend(read.iter().filter_map(|e| e.payload.map(|p| p.hash)));
        plan.events.extend(lsns(&located));
        from = to + 1;
    }
    let op = storage("read seq index");
    let range = tables
        .seq_index()?
        .range((thread.as_str(), 0)..=(thread.as_str(), u64::MAX))
        .map_err(&op)?;
    for entry in range {
        plan.chunks.push(entry.map_err(&op)?.0.value().1);
    }
    plan.checkpoints = plan_clear(tables, thread)?;
    let op = storage("read locks");
    for entry in tables.locks()?.iter().map_err(&op)? {
        let (_, value) = entry.map_err(&op)?;
        let lock = codec::decode_lock(value.value())?;
        if lock.owner == thread.as_str() {
            plan.locks.push(lock.name);
        }
    }
    plan.payloads = unreferenced(tables, &plan.events, referenced)?;
    Ok(Some(plan))
}

/// The payloads of `candidates` that no event outside `own` (the deleted thread's lsns) may
/// reference: one scan of the log, only when there are candidates.
fn unreferenced(
    tables: &mut Tables<'_, '_>,
    own: &[u64],
    mut candidates: BTreeSet<[u8; 32]>,
) -> Result<Vec<[u8; 32]>, Error> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let own: HashSet<u64> = own.iter().copied().collect();
    let op = storage("read events");
    for entry in tables.events()?.iter().map_err(&op)? {
        let (key, value) = entry.map_err(&op)?;
        if own.contains(&key.value()) {
            continue;
        }
        candidates.retain(|hash| !may_refer_to(value.value(), hash));
        if candidates.is_empty() {
            break;
        }
    }
    Ok(candidates.into_iter().collect())
}

/// Carries out a checked delete.
pub(crate) fn apply_delete_thread(
    tables: &mut Tables<'_, '_>,
    plan: DeletePlan,
) -> Result<Deleted, Error> {
    let op = storage("delete thread");
    let log =
        LogCut { events: &plan.events, correlations: &plan.correlations, chunks: &plan.chunks };
    remove_log(tables, &plan.thread, log, "delete thread")?;
    remove_checkpoints(tables, &plan.checkpoints)?;
    for name in &plan.locks {
        tables.locks()?.remove(name.as_str()).map_err(&op)?;
    }
    // Its signal inbox (`docs/format.md` §2.3) goes with it.
    let thread = plan.thread.as_str();
    tables.signals()?.retain_in((thread, 0)..=(thread, u64::MAX), |_, _| false).map_err(&op)?;
    for hash in &plan.payloads {
        tables.payloads()?.remove(hash).map_err(&op)?;
    }
    tables.write_queues(&plan.queue)?;
    let key = Row::Thread(plan.thread.as_str()).key();
    let removed = match tables.threads()?.remove(key.as_slice()) {
        Ok(Some(old)) => Some(keys_of_frame(&plan.thread, old.value())?),
        Ok(None) => None,
        Err(e) => return Err(op(e)),
    };
    tables.reindex_thread(&plan.thread, removed.as_ref(), None)?;
    tables.cache.forget(&plan.thread);
    Ok(Deleted {
        status: plan.status,
        events: plan.events.len() as u64,
        checkpoints: plan.checkpoints.len() as u64,
        locks: plan.locks.len() as u64,
        payloads: plan.payloads.len() as u64,
    })
}
