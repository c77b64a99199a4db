//! Retention inside the writer: delete one checkpoint, clear a thread's checkpoints, prune a
//! thread's events and checkpoints older than a chosen checkpoint.
//!
//! Same two phases as [`super::apply`]: each function first reads and checks everything it will
//! remove (a corrupt record rejects the request and removes nothing), then removes. A prune
//! removes the correlation-index entries of the events it removes, in the same transaction.

use ::redb::ReadableTable;

use super::index::{decode_chunk_at, fetch, locate, lsns};
use super::read::{checkpoint_info_in, storage};
use super::rows::Row;
use super::tables::Tables;
use crate::batch::Pruned;
use crate::checkpoint::CheckpointInfo;
use crate::codec::{self, StoredThread};
use crate::correlation;
use crate::error::Error;
use crate::ids::{CheckpointId, Seq, ThreadId};
use crate::lsns::SeqChunk;

/// Removes checked checkpoints and their index entries.
pub(crate) fn remove_checkpoints(
    tables: &mut Tables<'_, '_>,
    infos: &[CheckpointInfo],
) -> Result<(), Error> {
    let op = storage("remove checkpoint");
    for info in infos {
        let id = info.id.0;
        let index = tables.index()?;
        index.remove(Row::Checkpoint(id).key().as_slice()).map_err(&op)?;
        index.remove(Row::Snapshot(id).key().as_slice()).map_err(&op)?;
        tables.unindex_checkpoint(info)?;
    }
    Ok(())
}

/// The checkpoint a delete will remove, if it exists.
pub(crate) fn plan_delete(
    tables: &mut Tables<'_, '_>,
    id: CheckpointId,
) -> Result<Vec<CheckpointInfo>, Error> {
    Ok(checkpoint_info_in(&*tables.index()?, id)?.into_iter().collect())
}

/// The checkpoints a clear of `thread` will remove.
pub(crate) fn plan_clear(
    tables: &mut Tables<'_, '_>,
    thread: &ThreadId,
) -> Result<Vec<CheckpointInfo>, Error> {
    thread_checkpoints(tables, thread, u64::MAX)
}

/// The checkpoints of `thread` covering at most `max_covers`, read and checked.
fn thread_checkpoints(
    tables: &mut Tables<'_, '_>,
    thread: &ThreadId,
    max_covers: u64,
) -> Result<Vec<CheckpointInfo>, Error> {
    let indexed = super::read::indexed_of_thread(&*tables.index()?, thread, 0..=max_covers)?;
    indexed
        .into_iter()
        .map(|(_, id)| {
            checkpoint_info_in(&*tables.index()?, CheckpointId(id))?.ok_or_else(|| {
                super::read::corrupt_checkpoint(
                    codec::table::INDEX,
                    CheckpointId(id),
                    format!("thread index of {thread} points to missing checkpoint {id}"),
                )
            })
        })
        .collect()
}

/// What a prune will remove, read and checked.
pub(crate) struct PrunePlan {
    thread: ThreadId,
    /// The lsns of the removed events.
    events: Vec<u64>,
    /// (correlation id, lsn): the correlation-index entries of the removed events.
    correlations: Vec<(String, u64)>,
    /// The first seqs of the removed seq-index chunks.
    chunks: Vec<u64>,
    /// The part of a chunk that straddles the cut, re-keyed at the new first seq.
    rekeyed: Option<(u64, Vec<u8>)>,
    checkpoints: Vec<CheckpointInfo>,
    stored: StoredThread,
}

/// Checks a prune of `thread` up to checkpoint `keep`.
pub(crate) fn plan_prune(
    tables: &mut Tables<'_, '_>,
    thread: &ThreadId,
    keep: CheckpointId,
) -> Result<PrunePlan, Error> {
    let info =
        checkpoint_info_in(&*tables.index()?, keep)?.ok_or(Error::UnknownCheckpoint(keep))?;
    if &info.thread != thread {
        return Err(Error::Invalid {
            detail: format!("checkpoint {keep} belongs to thread {}, not {thread}", info.thread),
        });
    }
    let mut stored =
        tables.latest_thread(thread)?.ok_or_else(|| Error::UnknownThread(thread.clone()))?;
    let covers = info.covers.seq.0;
    let last = stored.record.last.map_or(0, |b| b.seq.0);
    if covers > last {
        return Err(super::read::corrupt_checkpoint(
            codec::table::CHECKPOINTS,
            keep,
            format!("checkpoint {keep} covers seq {covers}, past the thread's last seq {last}"),
        ));
    }
    let first_seq = stored.record.first_seq.0;
    let (mut events, mut correlations, mut chunks, mut rekeyed) = (vec![], vec![], vec![], None);
    if covers >= first_seq {
        // Every event removed is read and checked first: a damaged one rejects the prune.
        let located = locate(&*tables.seq_index()?, &stored, first_seq, covers)?;
        let removed = fetch(&*tables.events()?, thread, &located)?;
        correlations = correlation_entries(tables, &removed)?;
        drop(removed);
        events = lsns(&located).collect();
        let op = storage("read seq index");
        let range = tables
            .seq_index()?
            .range((thread.as_str(), 0)..=(thread.as_str(), covers))
            .map_err(&op)?;
        for entry in range {
            let (key, value) = entry.map_err(&op)?;
            let first = key.value().1;
            let chunk = decode_chunk_at(thread, first, value.value())?;
            chunks.push(first);
            let kept =
                usize::try_from((first + chunk.lsns.len() as u64).saturating_sub(covers + 1))
                    .unwrap_or(0);
            if kept > 0 {
                let lsns = chunk.lsns[chunk.lsns.len() - kept..].to_vec();
                let rest = SeqChunk { thread: thread.clone(), first_seq: covers + 1, lsns };
                rekeyed = Some((covers + 1, codec::encode_seq_chunk(&rest)?));
            }
        }
        let tail_start = stored.tail_start();
        if covers >= tail_start {
            let cut = usize::try_from(covers + 1 - tail_start).unwrap_or(usize::MAX);
            stored.tail.drain(..cut.min(stored.tail.len()));
        }
        stored.record.first_seq = Seq(covers + 1);
    }
    let checkpoints =
        thread_checkpoints(tables, thread, covers)?.into_iter().filter(|c| c.id < keep).collect();
    let thread = thread.clone();
    Ok(PrunePlan { thread, events, correlations, chunks, rekeyed, checkpoints, stored })
}

/// What a prune cuts of a thread's log, or a delete removes.
pub(super) struct LogCut<'a> {
    /// The lsns of its events.
    pub events: &'a [u64],
    /// Their correlation-index entries: (correlation id, lsn).
    pub correlations: &'a [(String, u64)],
    /// The first seqs of its seq-index chunks.
    pub chunks: &'a [u64],
}

/// Removes `cut` of `thread`'s log: its events, their correlation-index entries and its
/// seq-index chunks.
pub(super) fn remove_log(
    tables: &mut Tables<'_, '_>,
    thread: &ThreadId,
    cut: LogCut<'_>,
    what: &'static str,
) -> Result<(), Error> {
    let op = storage(what);
    let LogCut { events, correlations, chunks } = cut;
    super::log::remove(tables.events()?, events)?;
    for (correlation, lsn) in correlations {
        tables.correlations()?.remove((correlation.as_str(), *lsn)).map_err(&op)?;
    }
    for first in chunks {
        tables.seq_index()?.remove((thread.as_str(), *first)).map_err(&op)?;
    }
    Ok(())
}

/// Carries out a checked prune.
pub(crate) fn apply_prune(tables: &mut Tables<'_, '_>, plan: PrunePlan) -> Result<Pruned, Error> {
    let op = storage("prune");
    let cut =
        LogCut { events: &plan.events, correlations: &plan.correlations, chunks: &plan.chunks };
    remove_log(tables, &plan.thread, cut, "prune")?;
    if let Some((first, framed)) = &plan.rekeyed {
        tables
            .seq_index()?
            .insert((plan.thread.as_str(), *first), framed.as_slice())
            .map_err(&op)?;
    }
    remove_checkpoints(tables, &plan.checkpoints)?;
    let pruned = Pruned {
        events: plan.events.len() as u64,
        checkpoints: plan.checkpoints.len() as u64,
        first_seq: plan.stored.record.first_seq,
    };
    tables.stage_thread(plan.thread, plan.stored);
    Ok(pruned)
}

/// The correlation-index entries `(correlation id, lsn)` of `events` (an id may sit in a
/// payload's body, read from the payload table): what removing them removes from the index.
pub(super) fn correlation_entries(
    tables: &mut Tables<'_, '_>,
    events: &[crate::event::Event],
) -> Result<Vec<(String, u64)>, Error> {
    let payloads = tables.payloads()?;
    let mut entries = Vec::new();
    for event in events {
        if let Some(c) = correlation::of(event, |r| super::read::payload_in(&*payloads, r)) {
            entries.push((c, event.bookmark.lsn.0));
        }
    }
    Ok(entries)
}
