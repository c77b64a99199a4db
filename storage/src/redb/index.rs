//! A thread's events through its seq index (see [`crate::lsns`]): which lsns hold seqs
//! `from..=to`, and the events at those lsns, every step checked.
//!
//! The helpers take any `ReadableTable`, so the writer (inside its write transaction) and the
//! readers (inside read transactions) share one checked path. Failures are
//! [`Error::Corrupted`] naming the table, the thread and the seq: a seq the index does not cover
//! is a gap in `seq_index`; an lsn with no event, or an event that is not the one the index
//! promised, fails in `events`.

use ::redb::ReadableTable;

use crate::codec::{self, StoredThread, table};
use crate::{Error, Event, Seq, SeqChunk, ThreadId};

type Bytes = &'static [u8];

pub(crate) fn storage(op: &'static str) -> impl Fn(::redb::StorageError) -> Error {
    move |e| Error::storage(op, e)
}

fn corrupt(table: &'static str, id: &ThreadId, seq: u64, detail: String) -> Error {
    Error::Corrupted { table, thread: Some(id.clone()), seq: Some(Seq(seq)), detail }
}

/// The stored record (with its seq-index tail) under `id`, checked.
pub(crate) fn stored_thread_in(
    threads: &impl ReadableTable<&'static str, Bytes>,
    id: &ThreadId,
) -> Result<Option<StoredThread>, Error> {
    let Some(guard) = threads.get(id.as_str()).map_err(storage("read thread"))? else {
        return Ok(None);
    };
    let stored =
        codec::decode_stored_thread(guard.value()).map_err(|e| codec::locate(e, Some(id), None))?;
    if &stored.record.id != id {
        return Err(Error::Corrupted {
            table: table::THREADS,
            thread: Some(id.clone()),
            seq: None,
            detail: format!("key {id} holds the record of thread {}", stored.record.id),
        });
    }
    Ok(Some(stored))
}

/// Decodes the chunk stored under `(id, first_seq)` and checks it belongs there.
pub(crate) fn decode_chunk_at(
    id: &ThreadId,
    first_seq: u64,
    bytes: &[u8],
) -> Result<SeqChunk, Error> {
    let chunk = codec::decode_seq_chunk(bytes)
        .map_err(|e| codec::locate(e, Some(id), Some(Seq(first_seq))))?;
    if &chunk.thread != id || chunk.first_seq != first_seq {
        return Err(corrupt(
            table::SEQ_INDEX,
            id,
            first_seq,
            format!(
                "key ({id}, {first_seq}) holds the chunk of ({}, {})",
                chunk.thread, chunk.first_seq
            ),
        ));
    }
    Ok(chunk)
}

/// The `(seq, lsn)` of each of `stored`'s seqs `from..=to`, in seq order. The caller keeps the
/// range within `first_seq..=last`; any seq in it that the index does not cover is a gap.
pub(crate) fn locate(
    index: &impl ReadableTable<(&'static str, u64), Bytes>,
    stored: &StoredThread,
    from: u64,
    to: u64,
) -> Result<Vec<(u64, u64)>, Error> {
    let id = &stored.record.id;
    let op = storage("read seq index");
    let tail_start = stored.tail_start();
    let mut out: Vec<(u64, u64)> =
        Vec::with_capacity(usize::try_from(to.saturating_sub(from) + 1).unwrap_or(0).min(4096));
    let push = |out: &mut Vec<(u64, u64)>, seq: u64, lsn: u64| -> Result<(), Error> {
        if let Some(&(_, previous)) = out.last()
            && lsn <= previous
        {
            let detail =
                format!("lsn {lsn} of seq {seq} is not above the previous seq's {previous}");
            return Err(corrupt(table::SEQ_INDEX, id, seq, detail));
        }
        out.push((seq, lsn));
        Ok(())
    };
    if from < tail_start && from <= to {
        let chunks_end = to.min(tail_start - 1);
        // The chunk holding `from` is the last one keyed at or below it.
        let start = index
            .range((id.as_str(), 0)..=(id.as_str(), from))
            .map_err(&op)?
            .next_back()
            .transpose()
            .map_err(&op)?
            .map_or(from, |(key, _)| key.value().1);
        let mut next = from;
        for entry in index.range((id.as_str(), start)..=(id.as_str(), chunks_end)).map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let first = key.value().1;
            let chunk = decode_chunk_at(id, first, value.value())?;
            // decode checked first + len does not overflow and len >= 1.
            let end = first + chunk.lsns.len() as u64 - 1;
            if first > next {
                break;
            }
            if first < next && first != start {
                let detail = format!("the chunk at seq {first} overlaps the one before it");
                return Err(corrupt(table::SEQ_INDEX, id, first, detail));
            }
            if end >= tail_start {
                let detail =
                    format!("the chunk at seq {first} reaches into the tail at {tail_start}");
                return Err(corrupt(table::SEQ_INDEX, id, first, detail));
            }
            for (seq, &lsn) in (first..).zip(&chunk.lsns) {
                if seq >= next && seq <= chunks_end {
                    push(&mut out, seq, lsn)?;
                }
            }
            next = next.max(end + 1);
            if next > chunks_end {
                break;
            }
        }
        if next <= chunks_end {
            let detail = format!("seq gap: no seq index entry holds seq {next}");
            return Err(corrupt(table::SEQ_INDEX, id, next, detail));
        }
    }
    for (seq, &lsn) in (tail_start..).zip(&stored.tail) {
        if seq >= from && seq <= to {
            push(&mut out, seq, lsn)?;
        }
    }
    Ok(out)
}

/// Decodes the event stored under `lsn` and checks it is seq `seq` of thread `id`.
pub(crate) fn decode_event_at(
    id: &ThreadId,
    seq: u64,
    lsn: u64,
    bytes: &[u8],
) -> Result<Event, Error> {
    let event =
        codec::decode_event(bytes).map_err(|e| codec::locate(e, Some(id), Some(Seq(seq))))?;
    if event.bookmark.seq.0 != seq || &event.thread != id || event.bookmark.lsn.0 != lsn {
        return Err(corrupt(
            table::EVENTS,
            id,
            seq,
            format!(
                "lsn {lsn}, indexed as ({id}, {seq}), holds the record of ({}, {}) with lsn {}",
                event.thread, event.bookmark.seq, event.bookmark.lsn
            ),
        ));
    }
    Ok(event)
}

fn missing(id: &ThreadId, seq: u64, lsn: u64) -> Error {
    let detail = format!("seq gap: the event of seq {seq} (lsn {lsn}) is missing");
    corrupt(table::EVENTS, id, seq, detail)
}

/// The events at `located` (from [`locate`]), checked, in order. Runs of consecutive lsns (a
/// thread that wrote alone) are read with one range scan each.
pub(crate) fn fetch(
    events: &impl ReadableTable<u64, Bytes>,
    id: &ThreadId,
    located: &[(u64, u64)],
) -> Result<Vec<Event>, Error> {
    let op = storage("read events");
    let mut out = Vec::with_capacity(located.len());
    let mut rest = located;
    while let Some(&(seq, lsn)) = rest.first() {
        let run = 1 + rest.windows(2).take_while(|w| w[1].1 == w[0].1 + 1).count();
        if run == 1 {
            let guard = events.get(lsn).map_err(&op)?.ok_or_else(|| missing(id, seq, lsn))?;
            out.push(decode_event_at(id, seq, lsn, guard.value())?);
        } else {
            let last = rest[run - 1].1;
            let mut range = events.range(lsn..=last).map_err(&op)?;
            for &(seq, lsn) in &rest[..run] {
                match range.next().transpose().map_err(&op)? {
                    Some((key, value)) if key.value() == lsn => {
                        out.push(decode_event_at(id, seq, lsn, value.value())?);
                    }
                    _ => return Err(missing(id, seq, lsn)),
                }
            }
        }
        rest = &rest[run..];
    }
    Ok(out)
}
