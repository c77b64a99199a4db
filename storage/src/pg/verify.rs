//! `verify` on PostgreSQL: every record decodes (CRC), agrees with its key columns, and every
//! thread's events run from its first seq to its last without a gap; the correlation index and
//! the events carrying a correlation id agree both ways; the label table and the status column
//! agree with the thread records.

use std::collections::BTreeMap;

use super::blocking::Client;

use super::events::{RunRow, decode_row};
use super::read::{decode_info, decode_lock, decode_thread};
use super::{from_db, pg_error};
use crate::codec::table;
use crate::error::Error;
use crate::ids::{PayloadRef, Seq, ThreadId};
use crate::store::{Problem, VerifyReport};
use crate::thread::ThreadRecord;

pub(crate) fn verify(client: &mut Client<'_>) -> Result<VerifyReport, Error> {
    let mut report = VerifyReport::default();
    let threads = threads(client, &mut report)?;
    let correlated = events(client, &threads, &mut report)?;
    checkpoints(client, &threads, &mut report)?;
    payloads(client, &mut report)?;
    super::correlations::verify(client, correlated, &mut report.problems)?;
    locks(client, &mut report)?;
    let known = |id: &str| threads.contains_key(id);
    report.signals = super::signals::verify(client, known, &mut report.problems)?;
    report.queues = super::queues::verify(client, &mut report.problems)?;
    super::labels::verify(client, &threads, &mut report.problems)?;
    Ok(report)
}

/// (correlation id, lsn) -> (thread, seq) of the events carrying a correlation id.
type Correlated = BTreeMap<(String, u64), (ThreadId, u64)>;

/// Reports error `e` of a record as a problem (a damaged record's table, thread and seq).
fn problem(report: &mut VerifyReport, e: Error) {
    let (table, thread, seq) = match &e {
        Error::Corrupted { table, thread, seq, .. } => (*table, thread.clone(), *seq),
        _ => ("?", None, None),
    };
    report.problems.push(Problem { table, thread, seq, detail: e.to_string() });
}

/// A corruption found here, reported as [`problem`] reports a damaged record's.
fn corrupt(
    report: &mut VerifyReport,
    table: &'static str,
    thread: Option<&ThreadId>,
    seq: Option<Seq>,
    detail: String,
) {
    problem(report, super::corrupt(table, thread, seq, detail));
}

/// The thread records that decode, by id.
fn threads(
    client: &mut Client<'_>,
    report: &mut VerifyReport,
) -> Result<BTreeMap<String, ThreadRecord>, Error> {
    let mut threads: BTreeMap<String, ThreadRecord> = BTreeMap::new();
    for row in client
        .query("SELECT id, record FROM cairn_threads ORDER BY id", &[])
        .map_err(pg_error("verify"))?
    {
        report.threads += 1;
        let key: String = row.get(0);
        match ThreadId::new(key.clone()).and_then(|id| decode_thread(&id, row.get(1))) {
            Ok(record) => {
                threads.insert(key, record);
            }
            Err(e) => problem(report, e),
        }
    }
    Ok(threads)
}

/// Checks every row of the log both ways (its key columns against its frames, each frame
/// against the columns: `events.rs`), each thread's log from its first seq to its last without
/// a gap, and that no two rows claim an lsn; returns (correlation id, lsn) -> (thread, seq) of
/// the events carrying one.
fn events(
    client: &mut Client<'_>,
    threads: &BTreeMap<String, ThreadRecord>,
    report: &mut VerifyReport,
) -> Result<Correlated, Error> {
    let mut correlated = BTreeMap::new();
    // (thread, next expected seq) as the scan goes.
    let mut next: BTreeMap<String, u64> = BTreeMap::new();
    // (first lsn, last lsn, thread, first seq) of every row.
    let mut ranges = Vec::new();
    for row in client
        .query(
            "SELECT thread, first_seq, last_seq, first_lsn, last_lsn, frames \
             FROM cairn_event_batches ORDER BY thread, first_seq",
            &[],
        )
        .map_err(pg_error("verify"))?
    {
        let run = RunRow::of(&row, 0);
        let thread = run.thread.to_owned();
        // The row stands for its seqs: the gap check goes on after it, whatever it holds.
        let (first, last) =
            (from_db(run.first_seq).unwrap_or(0), from_db(run.last_seq).unwrap_or(0));
        ranges.push((run.first_lsn, run.last_lsn, thread.clone(), first));
        let events = match decode_row(&run) {
            Ok(events) => events,
            Err(e) => {
                report.events += run.count().unwrap_or(1);
                problem(report, e);
                next.insert(thread, last.saturating_add(1));
                continue;
            }
        };
        report.events += events.len() as u64;
        for event in &events {
            if let Some(c) = super::correlations::of(client, event) {
                correlated.insert(
                    (c, event.bookmark.lsn.0),
                    (event.thread.clone(), event.bookmark.seq.0),
                );
            }
        }
        let Some(record) = threads.get(&thread) else {
            let detail = format!("events of unknown thread {thread}");
            corrupt(
                report,
                table::EVENTS,
                events.first().map(|e| &e.thread),
                Some(Seq(first)),
                detail,
            );
            continue;
        };
        let want = *next.entry(thread.clone()).or_insert(record.first_seq.0);
        if first != want {
            let detail = format!("seq {want} of {thread} is missing");
            corrupt(report, table::EVENTS, Some(&record.id), Some(Seq(want)), detail);
        }
        next.insert(thread, last + 1);
    }
    overlaps(ranges, report);
    log_ends(threads, &next, report);
    Ok(correlated)
}

/// Reports rows whose lsn ranges overlap (the index keeps first lsns apart, not ranges).
fn overlaps(mut ranges: Vec<(i64, i64, String, u64)>, report: &mut VerifyReport) {
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end, a, a_seq), (start, _, b, b_seq)) = (&pair[0], &pair[1]);
        if start <= end {
            let detail = format!(
                "the rows of {a} from seq {a_seq} and of {b} from seq {b_seq} share lsn {start}"
            );
            let thread = ThreadId::new(b.clone()).ok();
            corrupt(report, table::EVENTS, thread.as_ref(), Some(Seq(*b_seq)), detail);
        }
    }
}

/// Checks that each thread's log ends where its record says (`next`: the seq after the last
/// event scanned, by thread).
fn log_ends(
    threads: &BTreeMap<String, ThreadRecord>,
    next: &BTreeMap<String, u64>,
    report: &mut VerifyReport,
) {
    for (id, record) in threads {
        let last = record.last.map_or(0, |b| b.seq.0);
        let reached = next.get(id).copied().unwrap_or(record.first_seq.0);
        if reached != last + 1 && !(record.last.is_none() && reached == record.first_seq.0) {
            corrupt(
                report,
                table::THREADS,
                Some(&record.id),
                None,
                format!(
                    "the log of {id} ends at seq {} but its record says {last}",
                    reached.saturating_sub(1)
                ),
            );
        }
    }
}

/// Checks that every checkpoint decodes and belongs to a known thread.
fn checkpoints(
    client: &mut Client<'_>,
    threads: &BTreeMap<String, ThreadRecord>,
    report: &mut VerifyReport,
) -> Result<(), Error> {
    for row in client
        .query("SELECT id, info, length(snapshot) FROM cairn_checkpoints ORDER BY id", &[])
        .map_err(pg_error("verify"))?
    {
        report.checkpoints += 1;
        match decode_info(row.get(0), row.get(1)) {
            Ok(info) if !threads.contains_key(info.thread.as_str()) => corrupt(
                report,
                table::CHECKPOINTS,
                Some(&info.thread),
                None,
                format!("checkpoint {} of unknown thread", info.id),
            ),
            Ok(_) => {}
            Err(e) => problem(report, e),
        }
    }
    Ok(())
}

/// Checks that every payload hashes to its key.
fn payloads(client: &mut Client<'_>, report: &mut VerifyReport) -> Result<(), Error> {
    for row in
        client.query("SELECT hash, bytes FROM cairn_payloads", &[]).map_err(pg_error("verify"))?
    {
        report.payloads += 1;
        let hash: Vec<u8> = row.get(0);
        let bytes: Vec<u8> = row.get(1);
        if PayloadRef::of(&bytes).hash[..] != hash[..] {
            corrupt(
                report,
                table::PAYLOADS,
                None,
                None,
                "a payload does not hash to its key".into(),
            );
        }
    }
    Ok(())
}

/// Checks that every lock record decodes.
fn locks(client: &mut Client<'_>, report: &mut VerifyReport) -> Result<(), Error> {
    for row in
        client.query("SELECT name, record FROM cairn_locks", &[]).map_err(pg_error("verify"))?
    {
        report.locks += 1;
        if let Err(e) = decode_lock(row.get(0), row.get(1)) {
            problem(report, e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sharing_an_lsn_are_reported_and_adjacent_ones_are_not() {
        let mut report = VerifyReport::default();
        let rows = vec![(10, 12, "a".to_owned(), 1), (13, 13, "b".to_owned(), 1)];
        overlaps(rows, &mut report);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let rows = vec![(13, 14, "b".to_owned(), 1), (10, 13, "a".to_owned(), 1)];
        overlaps(rows, &mut report);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(report.problems[0].detail.contains("share lsn 13"), "{:?}", report.problems);
    }
}
