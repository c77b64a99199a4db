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
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Seq, ThreadId};
use crate::lsns::SeqChunk;

type Bytes = &'static [u8];

pub(crate) fn storage(op: &'static str) -> impl Fn(::redb::StorageError) -> Error {
    move |e| Error::storage(op, e)
}

fn corrupt(table: &'static str, id: &ThreadId, seq: u64, detail: String) -> Error {
    Error::Corrupted { table, thread: Some(id.clone()), seq: Some(Seq(seq)), detail }
}

/// Decodes the chunk stored under `(id, first_seq)` and checks it belongs there.
pub(crate) fn decode_chunk_at(
    id: &ThreadId,
    first_seq: u64,
    bytes: &[u8],
) -> Result<SeqChunk, Error> {
    let chunk = codec::decode_seq_chunk(bytes)
        .map_err(|e| codec::locate(e, Some(id), Some(Seq(first_seq))))?;
    let mismatch = (&chunk.thread != id || chunk.first_seq != first_seq).then(|| {
        format!(
            "key ({id}, {first_seq}) holds the chunk of ({}, {})",
            chunk.thread, chunk.first_seq
        )
    });
    codec::key_agrees(mismatch, table::SEQ_INDEX, Some(id), Some(Seq(first_seq)))?;
    Ok(chunk)
}

/// Seqs `seq .. seq + len` of a thread, at lsns `lsn .. lsn + len`: where one thread wrote
/// alone (a batch, or a quiet period), a whole page of a read is one run, read with one range
/// scan, and located without a list entry per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) seq: u64,
    pub(crate) lsn: u64,
    pub(crate) len: u64,
}

/// Builds the runs of a located range, checking lsns rise with seq.
struct Runs<'a> {
    id: &'a ThreadId,
    runs: Vec<Run>,
}

impl Runs<'_> {
    fn push(&mut self, seq: u64, lsn: u64) -> Result<(), Error> {
        if let Some(run) = self.runs.last_mut() {
            // Inclusive ends: every lsn and seq of a run is a valid u64, so these cannot overflow
            // (`len` is at least 1), while `lsn + len` could for damaged values near u64::MAX.
            let last_lsn = run.lsn + (run.len - 1);
            let last_seq = run.seq + (run.len - 1);
            if lsn <= last_lsn {
                let detail =
                    format!("lsn {lsn} of seq {seq} is not above the previous seq's {last_lsn}");
                return Err(corrupt(table::SEQ_INDEX, self.id, seq, detail));
            }
            if last_lsn.checked_add(1) == Some(lsn) && last_seq.checked_add(1) == Some(seq) {
                run.len += 1;
                return Ok(());
            }
        }
        self.runs.push(Run { seq, lsn, len: 1 });
        Ok(())
    }
}

/// The runs holding `stored`'s seqs `from..=to`, in seq order. The caller keeps the range within
/// `first_seq..=last`; any seq in it that the index does not cover is a gap.
pub(crate) fn locate(
    index: &impl ReadableTable<(&'static str, u64), Bytes>,
    stored: &StoredThread,
    from: u64,
    to: u64,
) -> Result<Vec<Run>, Error> {
    let id = &stored.record.id;
    let op = storage("read seq index");
    let tail_start = stored.tail_start();
    let mut out = Runs { id, runs: Vec::new() };
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
                    out.push(seq, lsn)?;
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
            out.push(seq, lsn)?;
        }
    }
    Ok(out.runs)
}

/// Checks that `event`, read at `lsn`, is seq `seq` of thread `id`.
pub(crate) fn check_event_at(
    id: &ThreadId,
    seq: u64,
    lsn: u64,
    event: &Event,
) -> Result<(), Error> {
    let (thread, at, stored) = (&event.thread, event.bookmark.seq, event.bookmark.lsn);
    let mismatch = (at.0 != seq || thread != id || stored.0 != lsn).then(|| {
        format!(
            "lsn {lsn}, indexed as ({id}, {seq}), holds the record of ({thread}, {at}) with lsn \
             {stored}"
        )
    });
    codec::key_agrees(mismatch, table::EVENTS, Some(id), Some(Seq(seq)))
}

fn missing(id: &ThreadId, seq: u64, lsn: u64) -> Error {
    let detail = format!("seq gap: the event of seq {seq} (lsn {lsn}) is missing");
    corrupt(table::EVENTS, id, seq, detail)
}

/// The events of `runs` (from [`locate`]), checked, in order: one range seek per run, then its
/// frames in key order (`log.rs`).
pub(crate) fn fetch(
    events: &impl ReadableTable<u64, Bytes>,
    id: &ThreadId,
    runs: &[Run],
) -> Result<Vec<Event>, Error> {
    let op = storage("read events");
    let total: u64 = runs.iter().map(|run| run.len).sum();
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for run in runs {
        // Events of the run read so far; below `run.len`, so `run.lsn + done` cannot overflow.
        let mut done = 0;
        let mut range = events.range(run.lsn..).map_err(&op)?;
        while done < run.len {
            let (seq, lsn) = (run.seq + done, run.lsn + done);
            let Some((key, value)) = range.next().transpose().map_err(&op)? else {
                return Err(missing(id, seq, lsn));
            };
            let frame = super::log::decode_frame_at(key.value(), value.value())
                .map_err(|e| codec::locate(e, Some(id), Some(Seq(seq))))?;
            let first = frame.first().map_or(u64::MAX, |e| e.bookmark.lsn.0);
            if first > lsn {
                return Err(missing(id, seq, lsn));
            }
            let skip = usize::try_from(lsn - first).unwrap_or(usize::MAX);
            for event in frame.into_iter().skip(skip) {
                if done == run.len {
                    break;
                }
                check_event_at(id, run.seq + done, run.lsn + done, &event)?;
                out.push(event);
                done += 1;
            }
        }
    }
    Ok(out)
}

/// Every lsn of `runs`.
pub(crate) fn lsns(runs: &[Run]) -> impl Iterator<Item = u64> + '_ {
    runs.iter().flat_map(|run| run.lsn..=run.lsn + (run.len - 1))
}

#[cfg(test)]
mod tests {
    use ::redb::backends::InMemoryBackend;
    use ::redb::{Database, ReadableDatabase};

    use super::*;
    use crate::ids::{Bookmark, Lsn};
    use crate::redb::tables::SEQ_INDEX;
    use crate::thread::{ThreadRecord, WorkflowRef};

    fn stored(last: u64, last_lsn: u64, tail: Vec<u64>) -> StoredThread {
        let workflow = WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() };
        let mut record = ThreadRecord::new(ThreadId::new("t").expect("id"), workflow, 0);
        record.last = Some(Bookmark { seq: Seq(last), lsn: Lsn(last_lsn), at_ms: 0 });
        StoredThread { record, tail }
    }

    /// A seq index holding `chunks` (first seq, lsns) for thread "t".
    fn index(chunks: &[(u64, Vec<u64>)]) -> Database {
        let db = Database::builder().create_with_backend(InMemoryBackend::new()).expect("db");
        let txn = db.begin_write().expect("write");
        {
            let mut table = txn.open_table(SEQ_INDEX).expect("table");
            for (first, lsns) in chunks {
                let chunk = SeqChunk {
                    thread: ThreadId::new("t").expect("id"),
                    first_seq: *first,
                    lsns: lsns.clone(),
                };
                let framed = codec::encode_seq_chunk(&chunk).expect("encode");
                table.insert(("t", *first), framed.as_slice()).expect("insert");
            }
        }
        txn.commit().expect("commit");
        db
    }

    fn run_locate(
        db: &Database,
        thread: &StoredThread,
        from: u64,
        to: u64,
    ) -> Result<Vec<Run>, Error> {
        let txn = db.begin_read().expect("read");
        locate(&txn.open_table(SEQ_INDEX).expect("table"), thread, from, to)
    }

    #[test]
    fn consecutive_lsns_are_one_run_across_chunks_and_the_tail() {
        let db = index(&[(1, vec![10, 11]), (3, vec![12, 20])]);
        let thread = stored(6, 22, vec![21, 22]);
        let runs = run_locate(&db, &thread, 2, 6).expect("locate");
        assert_eq!(runs, [Run { seq: 2, lsn: 11, len: 2 }, Run { seq: 4, lsn: 20, len: 3 }]);
    }

    #[test]
    fn gaps_overlaps_and_extreme_lsns_are_errors_not_panics() {
        // A hole between chunks.
        let db = index(&[(1, vec![1, 2]), (4, vec![4])]);
        let gap = run_locate(&db, &stored(4, 4, Vec::new()), 1, 4);
        assert!(matches!(gap, Err(Error::Corrupted { table: "seq_index", seq: Some(Seq(3)), .. })));
        // Lsns at the very top of the range, then falling: refused, no overflow.
        let db = index(&[(1, vec![u64::MAX - 1, u64::MAX])]);
        let top = run_locate(&db, &stored(3, 5, vec![5]), 1, 3);
        assert!(matches!(top, Err(Error::Corrupted { table: "seq_index", seq: Some(Seq(3)), .. })));
        assert_eq!(
            run_locate(&db, &stored(2, u64::MAX, Vec::new()), 1, 2).expect("valid"),
            [Run { seq: 1, lsn: u64::MAX - 1, len: 2 }]
        );
        // A chunk reaching into the tail.
        let db = index(&[(1, vec![1, 2, 3])]);
        let overlap = run_locate(&db, &stored(3, 3, vec![3]), 1, 3);
        assert!(matches!(overlap, Err(Error::Corrupted { table: "seq_index", .. })));
    }
}
