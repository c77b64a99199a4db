//! Reads: every record read here is decoded and checked (CRC, kind, key against record) before it
//! is returned; a failure is [`Error::Corrupted`] naming table, thread and seq.
//!
//! The helpers take any `ReadableTable`, so the writer's planning (inside the write transaction)
//! and the readers (inside read transactions) share one checked path.

use std::ops::RangeInclusive;

use ::redb::{ReadTransaction, ReadableTable};

pub(crate) use super::index::storage;
use super::index::{decode_chunk_at, fetch, locate};
use super::index_keys::{Entry, INDEX, Prefix, key_after};
use super::rows::{self, CHECKPOINT_ROW, Row, THREAD_ROW, kind_range, stored_thread_in};
use super::tables::{EVENTS, LOCKS, PAYLOADS, SEQ_INDEX};
pub(crate) use super::thread_search::{list_threads, list_threads_after};
use crate::checkpoint::{Checkpoint, CheckpointInfo};
use crate::codec::{self, table};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Bookmark, CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::limits::{self, READ_LIMIT_MAX};
use crate::lock::LockRecord;
use crate::store::{CheckpointFilter, Page};
use crate::thread::ThreadRecord;

type Bytes = &'static [u8];

pub(crate) fn open<K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
    txn: &ReadTransaction,
    def: ::redb::TableDefinition<'_, K, V>,
) -> Result<::redb::ReadOnlyTable<K, V>, Error> {
    txn.open_table(def).map_err(|e| Error::storage("open table", e))
}

/// The thread record stored under `id`, checked.
pub(crate) fn thread_in(
    index: &impl ReadableTable<Bytes, Bytes>,
    id: &ThreadId,
) -> Result<Option<ThreadRecord>, Error> {
    Ok(stored_thread_in(index, id)?.map(|stored| stored.record))
}

/// The checkpoint metadata stored under `id`, checked.
pub(crate) fn checkpoint_info_in(
    index: &impl ReadableTable<Bytes, Bytes>,
    id: CheckpointId,
) -> Result<Option<CheckpointInfo>, Error> {
    let Some(guard) = rows::checkpoint_frame(index, id)? else {
        return Ok(None);
    };
    let info = codec::decode_checkpoint(guard.value())
        .map_err(|e| codec::locate(e, None, Some(Seq(id.0))))?;
    let mismatch = (info.id != id).then(|| format!("key {id} holds checkpoint {}", info.id));
    codec::key_agrees(mismatch, table::CHECKPOINTS, None, Some(Seq(id.0)))?;
    Ok(Some(info))
}

/// The lock stored under `name`, checked.
pub(crate) fn lock_in(
    locks: &impl ReadableTable<&'static str, Bytes>,
    name: &str,
) -> Result<Option<LockRecord>, Error> {
    let Some(guard) = locks.get(name).map_err(storage("read lock"))? else {
        return Ok(None);
    };
    let lock = codec::decode_lock(guard.value())?;
    let mismatch =
        (lock.name != name).then(|| format!("key {name:?} holds the lock {:?}", lock.name));
    codec::key_agrees(mismatch, table::LOCKS, None, None)?;
    Ok(Some(lock))
}

pub(crate) fn corrupt_checkpoint(table: &'static str, id: CheckpointId, detail: String) -> Error {
    Error::Corrupted { table, thread: None, seq: Some(Seq(id.0)), detail }
}

pub(crate) fn thread(txn: &ReadTransaction, id: &ThreadId) -> Result<Option<ThreadRecord>, Error> {
    thread_in(&open(txn, INDEX)?, id)
}

pub(crate) fn last_bookmark(
    txn: &ReadTransaction,
    id: &ThreadId,
) -> Result<Option<Bookmark>, Error> {
    Ok(thread(txn, id)?.and_then(|record| record.last))
}

/// Events of `id` with `after < seq <= to`, at most `limit`; gaps are corruption.
pub(crate) fn read_since(
    txn: &ReadTransaction,
    id: &ThreadId,
    after: Seq,
    limit: usize,
    to: Option<Seq>,
) -> Result<Vec<Event>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let stored = stored_thread_in(&open(txn, INDEX)?, id)?
        .ok_or_else(|| Error::UnknownThread(id.clone()))?;
    let first_seq = stored.record.first_seq;
    if after.0.saturating_add(1) < first_seq.0 {
        return Err(Error::Pruned { thread: id.clone(), first_available: first_seq });
    }
    let last = stored.record.last.map_or(0, |b| b.seq.0);
    let end = last.min(after.0.saturating_add(limit as u64)).min(to.map_or(u64::MAX, |t| t.0));
    if end <= after.0 {
        return Ok(Vec::new());
    }
    let located = locate(&open(txn, SEQ_INDEX)?, &stored, after.0 + 1, end)?;
    fetch(&open(txn, EVENTS)?, id, &located)
}

pub(crate) fn read_range(
    txn: &ReadTransaction,
    id: &ThreadId,
    from: Seq,
    to: Seq,
) -> Result<Vec<Event>, Error> {
    match crate::store::range(from, to)? {
        Some((from, count)) => read_since(txn, id, Seq(from - 1), count, Some(to)),
        None => Ok(Vec::new()),
    }
}

/// The global feed: events with lsn above `after`, in lsn order, straight from the log.
pub(crate) fn read_all_since(
    txn: &ReadTransaction,
    after: Lsn,
    limit: usize,
) -> Result<Vec<Event>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let events = open(txn, EVENTS)?;
    let mut out = Vec::with_capacity(limit.min(1024));
    let Some(first) = after.0.checked_add(1) else { return Ok(out) };
    let op = storage("read events");
    // The first frame keyed at or above `first` may hold lsns below it: those are skipped.
    let mut next = first;
    for entry in events.range(first..).map_err(&op)? {
        if out.len() >= limit {
            break;
        }
        let (key, value) = entry.map_err(&op)?;
        let key = key.value();
        let frame = match super::log::decode_frame_at(key, value.value()) {
            Ok(frame) => frame,
            // The log's key holds no thread or seq: find the owner, to name it (error path only).
            Err(error) => {
                let owner = owner_of(txn, key)?;
                return Err(codec::locate(
                    error,
                    owner.as_ref().map(|(id, _)| id),
                    owner.as_ref().map(|(_, seq)| Seq(*seq)),
                ));
            }
        };
        for event in frame {
            let lsn = event.bookmark.lsn.0;
            if lsn < next {
                if lsn >= first {
                    let detail = format!("the frame under lsn {key} overlaps the one before it");
                    let seq = Some(event.bookmark.seq);
                    return Err(codec::locate(
                        Error::corrupted(table::EVENTS, detail),
                        Some(&event.thread),
                        seq,
                    ));
                }
                continue;
            }
            if out.len() < limit {
                next = lsn + 1;
                out.push(event);
            }
        }
    }
    Ok(out)
}

/// The thread and seq whose index entry points at `lsn`, found by scanning every thread's tail
/// and the seq index (only to name the owner of a damaged log record).
pub(crate) fn owner_of(txn: &ReadTransaction, lsn: u64) -> Result<Option<(ThreadId, u64)>, Error> {
    let op = storage("find an lsn's thread");
    for entry in open(txn, INDEX)?.range(kind_range(THREAD_ROW)).map_err(&op)? {
        let (_, value) = entry.map_err(&op)?;
        let Ok(stored) = codec::decode_stored_thread(value.value()) else { continue };
        if let Some(i) = stored.tail.iter().position(|&l| l == lsn) {
            return Ok(Some((stored.record.id.clone(), stored.tail_start() + i as u64)));
        }
    }
    for entry in open(txn, SEQ_INDEX)?.iter().map_err(&op)? {
        let (key, value) = entry.map_err(&op)?;
        let (thread, first) = key.value();
        let Ok(id) = ThreadId::new(thread) else { continue };
        let Ok(chunk) = decode_chunk_at(&id, first, value.value()) else { continue };
        if let Some(i) = chunk.lsns.iter().position(|&l| l == lsn) {
            return Ok(Some((id, first + i as u64)));
        }
    }
    Ok(None)
}

/// The bytes of payload `r` in `payloads`, unchecked (a legacy body's correlation id is read so).
pub(crate) fn payload_in(
    payloads: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    r: &PayloadRef,
) -> Result<Vec<u8>, Error> {
    let value = payloads.get(&r.hash).map_err(storage("read payload"))?;
    value.map(|v| v.value().to_vec()).ok_or(Error::MissingPayload(*r))
}

pub(crate) fn payload(txn: &ReadTransaction, r: &PayloadRef) -> Result<Vec<u8>, Error> {
    let payloads = open(txn, PAYLOADS)?;
    let guard =
        payloads.get(&r.hash).map_err(storage("read payload"))?.ok_or(Error::MissingPayload(*r))?;
    let bytes = guard.value();
    let mismatch =
        (PayloadRef::of(bytes) != *r).then(|| format!("payload {r} does not hash to its key"));
    codec::key_agrees(mismatch, table::PAYLOADS, None, None)?;
    Ok(bytes.to_vec())
}

pub(crate) fn checkpoint(
    txn: &ReadTransaction,
    id: CheckpointId,
) -> Result<Option<Checkpoint>, Error> {
    let index = open(txn, INDEX)?;
    let Some(info) = checkpoint_info_in(&index, id)? else {
        return Ok(None);
    };
    let guard = rows::snapshot_frame(&index, id)?.ok_or_else(|| {
        corrupt_checkpoint(table::SNAPSHOTS, id, "the snapshot record is missing".into())
    })?;
    let (stored_id, snapshot) = codec::decode_snapshot(guard.value())
        .map_err(|e| codec::locate(e, None, Some(Seq(id.0))))?;
    let (len, expected) = (snapshot.len(), info.snapshot_len);
    let mismatch = (stored_id != id || len as u64 != expected).then(|| {
        format!(
            "snapshot of checkpoint {stored_id} with {len} bytes where checkpoint {id} with \
             {expected} was expected"
        )
    });
    codec::key_agrees(mismatch, table::SNAPSHOTS, None, Some(Seq(id.0)))?;
    Ok(Some(info.with_snapshot(snapshot)))
}

pub(crate) fn checkpoint_exists(txn: &ReadTransaction, id: CheckpointId) -> Result<bool, Error> {
    Ok(rows::checkpoint_frame(&open(txn, INDEX)?, id)?.is_some())
}

/// The id of the checkpoint of `thread` covering `seq`, from the thread index alone (the newest
/// one if several do).
pub(crate) fn checkpoint_covering(
    txn: &ReadTransaction,
    thread: &ThreadId,
    seq: Seq,
) -> Result<Option<CheckpointId>, Error> {
    Ok(newest_indexed(txn, thread, seq.0..=seq.0)?.map(|(_, id)| CheckpointId(id)))
}

/// The newest entry `(covers, id)` of `thread`'s checkpoint index that covers a seq in `covers`.
fn newest_indexed(
    txn: &ReadTransaction,
    thread: &ThreadId,
    covers: RangeInclusive<u64>,
) -> Result<Option<(u64, u64)>, Error> {
    let index = open(txn, INDEX)?;
    let (lo, hi) = thread_bounds(thread, covers);
    let op = storage("read checkpoint index");
    let mut range = index.range::<&[u8]>(lo.as_slice()..=hi.as_slice()).map_err(&op)?;
    let Some(entry) = range.next_back() else { return Ok(None) };
    let (key, _) = entry.map_err(&op)?;
    Ok(Some(of_thread(key.value())?))
}

/// The first and last keys of `thread`'s checkpoint entries covering a seq in `covers`.
fn thread_bounds(thread: &ThreadId, covers: RangeInclusive<u64>) -> (Vec<u8>, Vec<u8>) {
    let prefix = Prefix::CheckpointsOfThread(thread.as_str()).bytes();
    let tail = |covers: u64, id: u64| [covers.to_be_bytes(), id.to_be_bytes()].concat();
    (
        key_after(&prefix, &tail(*covers.start(), 0)),
        key_after(&prefix, &tail(*covers.end(), u64::MAX)),
    )
}

/// The `(covers, id)` of a checkpoint-by-thread entry's key.
fn of_thread(key: &[u8]) -> Result<(u64, u64), Error> {
    match Entry::decode(key) {
        Some(Entry::CheckpointByThread { covers, id, .. }) => Ok((covers, id)),
        _ => Err(bad_key(key)),
    }
}

/// A key of the index table no entry of its range encodes.
pub(crate) fn bad_key(key: &[u8]) -> Error {
    Error::corrupted(table::INDEX, format!("a key no entry of its range encodes: {key:02x?}"))
}

/// The `(covers, id)` of `thread`'s checkpoint entries covering a seq in `covers`, in key order.
pub(crate) fn indexed_of_thread(
    index: &impl ReadableTable<Bytes, Bytes>,
    thread: &ThreadId,
    covers: RangeInclusive<u64>,
) -> Result<Vec<(u64, u64)>, Error> {
    let (lo, hi) = thread_bounds(thread, covers);
    let op = storage("read checkpoint index");
    let mut out = Vec::new();
    for entry in index.range::<&[u8]>(lo.as_slice()..=hi.as_slice()).map_err(&op)? {
        out.push(of_thread(entry.map_err(&op)?.0.value())?);
    }
    Ok(out)
}

/// The checkpoint ids of the entries under `prefix` (of a workflow, or a tag).
fn ids_under(
    index: &impl ReadableTable<Bytes, Bytes>,
    prefix: &Prefix<'_>,
) -> Result<Vec<u64>, Error> {
    let prefix = prefix.bytes();
    let (lo, hi) = (key_after(&prefix, &[0; 8]), key_after(&prefix, &[0xff; 8]));
    let op = storage("read checkpoint index");
    let mut out = Vec::new();
    for entry in index.range::<&[u8]>(lo.as_slice()..=hi.as_slice()).map_err(&op)? {
        let (key, _) = entry.map_err(&op)?;
        let key = key.value();
        match Entry::decode(key) {
            Some(Entry::CheckpointByWorkflow { id, .. } | Entry::CheckpointByTag { id, .. }) => {
                out.push(id);
            }
            _ => return Err(bad_key(key)),
        }
    }
    Ok(out)
}

pub(crate) fn latest_checkpoint_at_or_before(
    txn: &ReadTransaction,
    thread: &ThreadId,
    seq: Seq,
) -> Result<Option<Checkpoint>, Error> {
    let Some((covers, id)) = newest_indexed(txn, thread, 0..=seq.0)? else { return Ok(None) };
    let id = CheckpointId(id);
    let found = checkpoint(txn, id)?.ok_or_else(|| {
        corrupt_checkpoint(
            table::INDEX,
            id,
            format!("thread index of {thread} points to missing checkpoint {id}"),
        )
    })?;
    let mismatch = (&found.thread != thread || found.covers.seq.0 != covers)
        .then(|| format!("index entry ({thread}, {covers}) disagrees with checkpoint {id}"));
    codec::key_agrees(mismatch, table::INDEX, None, Some(Seq(id.0)))?;
    Ok(Some(found))
}

pub(crate) fn list_checkpoints(
    txn: &ReadTransaction,
    filter: &CheckpointFilter,
    page: Page,
) -> Result<Vec<CheckpointInfo>, Error> {
    limits::check("READ_LIMIT_MAX", page.limit, READ_LIMIT_MAX)?;
    let candidates = checkpoint_candidates(txn, filter)?;
    let index = open(txn, INDEX)?;
    let infos = candidates.map(|id| {
        checkpoint_info_in(&index, id)?.ok_or_else(|| {
            corrupt_checkpoint(
                table::CHECKPOINTS,
                id,
                format!("an index points to missing checkpoint {id}"),
            )
        })
    });
    page.cut(infos, |info| {
        filter.thread.as_ref().is_none_or(|t| &info.thread == t)
            && filter.workflow_id.as_ref().is_none_or(|w| *info.workflow.id == **w)
            && filter.kind.is_none_or(|k| info.kind == k)
            && (filter.any_tags.is_empty()
                || info.meta.tags.iter().any(|tag| filter.any_tags.contains(tag)))
    })
}

/// Candidate checkpoint ids, newest first, from the narrowest index the filter allows. Every
/// candidate is then checked against the whole filter, so an index only narrows, never decides.
fn checkpoint_candidates(
    txn: &ReadTransaction,
    filter: &CheckpointFilter,
) -> Result<Box<dyn Iterator<Item = CheckpointId>>, Error> {
    let mut ids: Vec<u64> = if let Some(thread) = &filter.thread {
        let index = open(txn, INDEX)?;
        indexed_of_thread(&index, thread, 0..=u64::MAX)?.into_iter().map(|(_, id)| id).collect()
    } else if let Some(workflow) = &filter.workflow_id {
        ids_under(&open(txn, INDEX)?, &Prefix::CheckpointsOfWorkflow(workflow))?
    } else if !filter.any_tags.is_empty() {
        let index = open(txn, INDEX)?;
        let mut ids = Vec::new();
        for tag in &filter.any_tags {
            ids.extend(ids_under(&index, &Prefix::CheckpointsTagged(tag))?);
        }
        ids
    } else {
        let op = storage("read checkpoints");
        let mut ids = Vec::new();
        for entry in open(txn, INDEX)?.range(kind_range(CHECKPOINT_ROW)).map_err(&op)? {
            let (key, _) = entry.map_err(&op)?;
            match Row::decode(key.value()) {
                Some(Row::Checkpoint(id)) => ids.push(id),
                _ => {
                    let detail = format!("key {:?} is not a checkpoint's", key.value());
                    return Err(Error::corrupted(table::CHECKPOINTS, detail));
                }
            }
        }
        ids
    };
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.dedup();
    Ok(Box::new(ids.into_iter().map(CheckpointId)))
}

pub(crate) fn locks(txn: &ReadTransaction) -> Result<Vec<LockRecord>, Error> {
    let locks = open(txn, LOCKS)?;
    let mut out = Vec::new();
    for entry in locks.iter().map_err(storage("read locks"))? {
        let (key, _) = entry.map_err(storage("read locks"))?;
        if let Some(lock) = lock_in(&locks, key.value())? {
            out.push(lock);
        }
    }
    Ok(out)
}
