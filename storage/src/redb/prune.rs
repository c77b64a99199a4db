//! Retention inside the writer: delete one checkpoint, clear a thread's checkpoints, prune a
//! thread's events and checkpoints older than a chosen checkpoint.
//!
//! Same two phases as [`super::apply`]: each function first reads and checks everything it will
//! remove (a corrupt record rejects the request and removes nothing), then removes.

use ::redb::ReadableTable;

use super::read::{checkpoint_info_in, decode_event_at, storage, thread_in};
use super::tables::Tables;
use crate::codec;
use crate::{CheckpointId, CheckpointInfo, Error, Pruned, Seq, ThreadId};

/// Removes checked checkpoints and their index entries.
pub(crate) fn remove_checkpoints(
    tables: &mut Tables<'_>,
    infos: &[CheckpointInfo],
) -> Result<(), Error> {
    let op = storage("remove checkpoint");
    for info in infos {
        let id = info.id.0;
        tables.checkpoints.remove(id).map_err(&op)?;
        tables.snapshots.remove(id).map_err(&op)?;
        tables.by_thread.remove((info.thread.as_str(), info.covers.seq.0, id)).map_err(&op)?;
        tables.by_workflow.remove((info.workflow.id.as_str(), id)).map_err(&op)?;
        for tag in &info.meta.tags {
            tables.by_tag.remove((tag.as_str(), id)).map_err(&op)?;
        }
    }
    Ok(())
}

/// The checkpoint a delete will remove, if it exists.
pub(crate) fn plan_delete(
    tables: &Tables<'_>,
    id: CheckpointId,
) -> Result<Vec<CheckpointInfo>, Error> {
    Ok(checkpoint_info_in(&tables.checkpoints, id)?.into_iter().collect())
}

/// The checkpoints a clear of `thread` will remove.
pub(crate) fn plan_clear(
    tables: &Tables<'_>,
    thread: &ThreadId,
) -> Result<Vec<CheckpointInfo>, Error> {
    thread_checkpoints(tables, thread, u64::MAX)
}

/// The checkpoints of `thread` covering at most `max_covers`, read and checked.
fn thread_checkpoints(
    tables: &Tables<'_>,
    thread: &ThreadId,
    max_covers: u64,
) -> Result<Vec<CheckpointInfo>, Error> {
    let op = storage("read checkpoint index");
    let mut ids = Vec::new();
    let range = tables
        .by_thread
        .range((thread.as_str(), 0, 0)..=(thread.as_str(), max_covers, u64::MAX))
        .map_err(&op)?;
    for entry in range {
        ids.push(CheckpointId(entry.map_err(&op)?.0.value().2));
    }
    let mut infos = Vec::with_capacity(ids.len());
    for id in ids {
        let info = checkpoint_info_in(&tables.checkpoints, id)?.ok_or_else(|| {
            super::read::corrupt_checkpoint(
                codec::table::CHECKPOINTS_BY_THREAD,
                id,
                format!("thread index of {thread} points to missing checkpoint {id}"),
            )
        })?;
        infos.push(info);
    }
    Ok(infos)
}

/// What a prune will remove, read and checked.
pub(crate) struct PrunePlan {
    thread: ThreadId,
    events: Vec<(u64, u64)>,
    checkpoints: Vec<CheckpointInfo>,
    record: crate::ThreadRecord,
}

/// Checks a prune of `thread` up to checkpoint `keep`.
pub(crate) fn plan_prune(
    tables: &Tables<'_>,
    thread: &ThreadId,
    keep: CheckpointId,
) -> Result<PrunePlan, Error> {
    let info =
        checkpoint_info_in(&tables.checkpoints, keep)?.ok_or(Error::UnknownCheckpoint(keep))?;
    if &info.thread != thread {
        return Err(Error::Invalid {
            detail: format!("checkpoint {keep} belongs to thread {}, not {thread}", info.thread),
        });
    }
    let mut record =
        thread_in(&tables.threads, thread)?.ok_or_else(|| Error::UnknownThread(thread.clone()))?;
    let covers = info.covers.seq.0;
    let op = storage("read events");
    let mut events = Vec::new();
    if covers >= record.first_seq.0 {
        let range = tables
            .events
            .range((thread.as_str(), record.first_seq.0)..=(thread.as_str(), covers))
            .map_err(&op)?;
        for entry in range {
            let (key, value) = entry.map_err(&op)?;
            let seq = key.value().1;
            let event = decode_event_at(thread, seq, value.value())?;
            events.push((seq, event.bookmark.lsn.0));
        }
        record.first_seq = Seq(covers.saturating_add(1));
    }
    let checkpoints =
        thread_checkpoints(tables, thread, covers)?.into_iter().filter(|c| c.id < keep).collect();
    Ok(PrunePlan { thread: thread.clone(), events, checkpoints, record })
}

/// Carries out a checked prune.
pub(crate) fn apply_prune(tables: &mut Tables<'_>, plan: PrunePlan) -> Result<Pruned, Error> {
    let op = storage("prune");
    for (seq, lsn) in &plan.events {
        tables.events.remove((plan.thread.as_str(), *seq)).map_err(&op)?;
        tables.lsn_index.remove(*lsn).map_err(&op)?;
    }
    remove_checkpoints(tables, &plan.checkpoints)?;
    let framed = codec::encode_thread(&plan.record)?;
    tables.threads.insert(plan.thread.as_str(), framed.as_slice()).map_err(&op)?;
    Ok(Pruned {
        events: plan.events.len() as u64,
        checkpoints: plan.checkpoints.len() as u64,
        first_seq: plan.record.first_seq,
    })
}
