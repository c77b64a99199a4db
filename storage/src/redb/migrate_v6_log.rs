//! The log's part of the v5 -> v6 migration: the one-event records of a v5 log (kinds 1 and 7,
//! each under its lsn) become batch frames (kind 12, under their last lsn; `log.rs`), in the
//! migration's transaction (`migrate.rs`). The seq index is unchanged: it maps seqs to lsns, and
//! an lsn now finds the frame holding it.

use ::redb::{ReadableTable, WriteTransaction};

use super::index::storage;
use super::tables::EVENTS;
use crate::codec;
use crate::error::Error;
use crate::event::Event;
use crate::frame::{KIND_OFFSET, RecordKind};
use crate::limits::MIGRATION_BATCH_EVENTS;

/// Decoded events held before they are framed: runs longer than this are cut (into frames of
/// at most `event_batch::FRAME_EVENTS_MAX` anyway), and memory stays bounded.
const PENDING_MAX: usize = 4 * MIGRATION_BATCH_EVENTS;

/// Rewrites every one-event record of the log as batch frames, in `txn`; returns the events
/// rewritten. A record that does not decode (or holds another lsn than its key) is left as it
/// is, for reads and `verify` to report; a batch frame already there (a file this build wrote,
/// marked older by a test) is left as well.
///
/// # Errors
/// Storage errors, encode errors; the caller drops the transaction, and the file stays v5.
pub(crate) fn convert(txn: &WriteTransaction) -> Result<u64, Error> {
    let op = storage("migrate the log to format v6");
    let mut log = txn.open_table(EVENTS).map_err(|e| Error::storage("open table", e))?;
    let (mut cursor, mut converted, mut left) = (0u64, 0u64, 0u64);
    let mut pending: Vec<Event> = Vec::new();
    loop {
        let mut chunk = Vec::with_capacity(MIGRATION_BATCH_EVENTS);
        for item in log.range(cursor..).map_err(&op)?.take(MIGRATION_BATCH_EVENTS) {
            let (key, value) = item.map_err(&op)?;
            chunk.push((key.value(), value.value().to_vec()));
        }
        let Some(&(last, _)) = chunk.last() else { break };
        for (lsn, bytes) in chunk {
            match legacy_event(lsn, &bytes) {
                Some(event) => {
                    log.remove(lsn).map_err(&op)?;
                    pending.push(event);
                    converted += 1;
                }
                None => {
                    // Frames never span a record left in place.
                    super::log::append(&mut log, &std::mem::take(&mut pending))?;
                    left += 1;
                }
            }
        }
        if pending.len() >= PENDING_MAX {
            super::log::append(&mut log, &std::mem::take(&mut pending))?;
        }
        match last.checked_add(1) {
            Some(next) => cursor = next,
            None => break,
        }
    }
    super::log::append(&mut log, &pending)?;
    tracing::info!(events = converted, left, "framed the log in batches: format v6");
    Ok(converted)
}

/// The event of a v5 log record under `lsn`, or `None` for a record to leave in place (a batch
/// frame, a damaged record, a record of another lsn).
fn legacy_event(lsn: u64, bytes: &[u8]) -> Option<Event> {
    if bytes.get(KIND_OFFSET) == Some(&RecordKind::EventBatch.to_repr()) {
        return None;
    }
    match codec::decode_event(bytes) {
        Ok(event) if event.bookmark.lsn.0 == lsn => Some(event),
        Ok(event) => {
            let holds = event.bookmark.lsn;
            tracing::warn!(lsn, %holds, "a log record of another lsn is left as it is");
            None
        }
        Err(error) => {
            tracing::warn!(lsn, %error, "a damaged log record is left as it is");
            None
        }
    }
}

/// The events of one log record of any format: a batch frame (v6) or one event (v1 to v5). For
/// the migrations that read the log before it is v6 (`correlations.rs`).
pub(crate) fn log_record(bytes: &[u8]) -> Result<Vec<Event>, Error> {
    if bytes.get(KIND_OFFSET) == Some(&RecordKind::EventBatch.to_repr()) {
        codec::decode_event_batch(bytes)
    } else {
        codec::decode_event(bytes).map(|event| vec![event])
    }
}

#[cfg(test)]
mod tests {
    use ::redb::backends::InMemoryBackend;
    use ::redb::{Database, ReadableDatabase};

    use super::*;
    use crate::ids::{Bookmark, Lsn, Seq, ThreadId};

    fn event(thread: &str, seq: u64, lsn: u64) -> Event {
        let mut event =
            Event::sample(Bookmark { seq: Seq(seq), lsn: Lsn(lsn), at_ms: lsn }, vec![]);
        event.thread = ThreadId::new(thread).expect("id");
        event
    }

    #[test]
    fn one_event_records_become_frames_of_runs_and_damage_stays_in_place() {
        // t 1..=3 at lsns 1..=3, u 1 at 4, t 4 at 5, a damaged record at 6, t 5 at 7 with a
        // correlation id (kind 7).
        let mut log = vec![event("t", 1, 1), event("t", 2, 2), event("t", 3, 3), event("u", 1, 4)];
        log.push(event("t", 4, 5));
        let mut correlated = event("t", 5, 7);
        correlated.correlation = Some("c".into());
        let db = Database::builder().create_with_backend(InMemoryBackend::new()).expect("db");
        let txn = db.begin_write().expect("write");
        let mut damaged = codec::encode_event(&event("t", 9, 6)).expect("encode");
        damaged[9] ^= 1;
        {
            let mut table = txn.open_table(EVENTS).expect("table");
            for e in log.iter().chain([&correlated]) {
                let framed = codec::encode_event(e).expect("encode");
                table.insert(e.bookmark.lsn.0, framed.as_slice()).expect("insert");
            }
            table.insert(6, damaged.as_slice()).expect("insert");
        }
        assert_eq!(convert(&txn).expect("convert"), 6);
        txn.commit().expect("commit");
        let txn = db.begin_read().expect("read");
        let table = txn.open_table(EVENTS).expect("table");
        let mut keys = Vec::new();
        let mut events = Vec::new();
        for entry in table.iter().expect("iter") {
            let (key, value) = entry.expect("entry");
            keys.push(key.value());
            if key.value() == 6 {
                assert_eq!(value.value(), damaged.as_slice(), "left as it was");
            } else {
                events.extend(
                    super::super::log::decode_frame_at(key.value(), value.value()).expect("frame"),
                );
            }
        }
        assert_eq!(keys, [3, 4, 5, 6, 7]);
        log.push(correlated);
        assert_eq!(events, log, "every event, identical");
    }
}
