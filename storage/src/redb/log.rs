//! The log (the `events` table, format v6): batch frames (record kind 12, `event_batch.rs`), each
//! a run of one thread's events, keyed by its last lsn. A frame holds lsns `first..=key`, so the
//! frame holding lsn `l` is the first one keyed at or above `l` (one range seek), when its first
//! lsn is at or below `l`; the last key is the log's last lsn.

use ::redb::{ReadableTable, Table};

use super::index::storage;
use crate::codec::{self, table};
use crate::error::Error;
use crate::event::Event;
use crate::event_batch;

type Bytes = &'static [u8];

/// Decodes the frame stored under `key` and checks that it ends there.
pub(crate) fn decode_frame_at(key: u64, bytes: &[u8]) -> Result<Vec<Event>, Error> {
    let events = codec::decode_event_batch(bytes)?;
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Err(Error::corrupted(table::EVENTS, "a batch frame without events".into()));
    };
    if last.bookmark.lsn.0 != key {
        // Not located here: the caller names the thread and seq it read the frame for.
        let detail = format!(
            "lsn {key} holds the record of lsns {}..={}",
            first.bookmark.lsn, last.bookmark.lsn
        );
        return Err(Error::corrupted(table::EVENTS, detail));
    }
    Ok(events)
}

/// The frame holding `lsn`: its key and its events, checked; `None` when no frame holds it.
pub(crate) fn frame_holding(
    log: &impl ReadableTable<u64, Bytes>,
    lsn: u64,
) -> Result<Option<(u64, Vec<Event>)>, Error> {
    let op = storage("read events");
    let Some(entry) = log.range(lsn..).map_err(&op)?.next() else { return Ok(None) };
    let (key, value) = entry.map_err(&op)?;
    let key = key.value();
    let events = decode_frame_at(key, value.value())?;
    Ok(events.first().is_some_and(|e| e.bookmark.lsn.0 <= lsn).then_some((key, events)))
}

/// The event at `lsn`, checked as its frame is; `None` when no frame holds it.
pub(crate) fn event_at(
    log: &impl ReadableTable<u64, Bytes>,
    lsn: u64,
) -> Result<Option<Event>, Error> {
    let Some((_, events)) = frame_holding(log, lsn)? else { return Ok(None) };
    let first = events.first().map_or(lsn, |e| e.bookmark.lsn.0);
    let at = usize::try_from(lsn - first).unwrap_or(usize::MAX);
    Ok(events.into_iter().nth(at))
}

/// Writes `events` (in lsn order, at lsns no frame holds) as batch frames, one a run of one
/// thread (`event_batch::frames`).
///
/// # Errors
/// [`Error::Corrupted`] when a frame's key is taken already (only a damaged log hides a key from
/// the counters); encode errors; storage errors.
pub(crate) fn append(log: &mut Table<'_, u64, Bytes>, events: &[Event]) -> Result<(), Error> {
    let op = storage("append");
    for frame in event_batch::frames(events) {
        let Some(last) = frame.last() else { continue };
        let key = last.bookmark.lsn.0;
        let framed = codec::encode_event_batch(frame)?;
        if log.insert(key, framed.as_slice()).map_err(&op)?.is_some() {
            return Err(Error::corrupted(
                table::EVENTS,
                format!("lsn {key} is already taken in the log (its index is damaged)"),
            ));
        }
    }
    Ok(())
}

/// Removes the events at `lsns` (ascending; every one in a frame, as the caller's reads
/// checked): a frame holding only such events goes, one holding others as well is written again
/// without them.
pub(crate) fn remove(log: &mut Table<'_, u64, Bytes>, lsns: &[u64]) -> Result<(), Error> {
    debug_assert!(lsns.is_sorted(), "lsns to remove come in order");
    let op = storage("remove events");
    let mut i = 0;
    while let Some(&lsn) = lsns.get(i) {
        let Some((key, events)) = frame_holding(&*log, lsn)? else {
            let detail = format!("no frame holds lsn {lsn}");
            return Err(Error::corrupted(table::EVENTS, detail));
        };
        let end = i + lsns[i..].partition_point(|&l| l <= key);
        let cut = &lsns[i..end];
        i = end;
        log.remove(key).map_err(&op)?;
        let kept: Vec<Event> =
            events.into_iter().filter(|e| cut.binary_search(&e.bookmark.lsn.0).is_err()).collect();
        append(log, &kept)?;
    }
    Ok(())
}
