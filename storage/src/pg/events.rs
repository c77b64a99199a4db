//! The log on PostgreSQL (format 6): one row of `cairn_event_batches` per run of a thread's
//! events that a commit wrote with consecutive seqs and consecutive lsns (a batch's events of one
//! thread, or of several batches of one group), instead of one row per event.
//!
//! A row holds the run's key columns (thread, first and last seq, first and last lsn) and its
//! events' frames, concatenated in seq order: each the CRC-framed event record of a redb file
//! (`docs/format.md` §1), so each frame is checked as a redb frame is. A row is found by
//! `(thread, first_seq)` (the primary key: a read at seq `s` starts at the row with the greatest
//! `first_seq <= s`) and by `first_lsn` (a unique index: the global log in lsn order). Every read
//! decodes the whole row and checks it against its columns ([`decode_row`]): as many frames as
//! seqs, each the event of its thread at its seq and lsn, so reads stay exact and gap-free.
//!
//! A database of format 5 or older holds the log as `cairn_events`, one row per event: [`migrate`]
//! moves it into runs at connect, in one transaction under an advisory lock (`schema.rs`).

use std::collections::BTreeSet;

use tokio_postgres::Row;

use super::blocking::Client;
use super::tx::Tx;
use super::{corrupt, from_db, pg_error, to_db};
use crate::codec::{self, table};
use crate::error::Error;
use crate::event::Event;
use crate::frame;
use crate::ids::{Seq, ThreadId};
use crate::limits::RECORD_BYTES_MAX;

/// The table, idempotent.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cairn_event_batches (
    thread text NOT NULL,
    first_seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    first_lsn bigint NOT NULL,
    last_lsn bigint NOT NULL,
    frames bytea NOT NULL,
    PRIMARY KEY (thread, first_seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS cairn_event_batches_by_lsn ON cairn_event_batches (first_lsn);
";

/// The row length up to which PostgreSQL keeps a run as it is (`toast_tuple_target`, its
/// maximum): a run of a few steps is 1 to 4 KiB of frames, which the default (about 2 KiB) had
/// the server compress with pglz on every insert, for frames that compress little.
const INLINE_ROW_BYTES: i32 = 8160;

/// Sets [`INLINE_ROW_BYTES`] on the table where it is not set (a database made before it was):
/// only new rows are written differently, and a row reads the same either way.
///
/// # Errors
/// Connection errors.
pub(crate) fn keep_runs_inline(client: &mut Client<'_>) -> Result<(), Error> {
    let target = format!("toast_tuple_target={INLINE_ROW_BYTES}");
    let row = client
        .query_one(
            "SELECT coalesce($1 = ANY(reloptions), false) FROM pg_class \
             WHERE oid = 'cairn_event_batches'::regclass",
            &[&target],
        )
        .map_err(pg_error("read the event table's options"))?;
    if !row.get::<_, bool>(0) {
        client
            .batch_execute(&format!("ALTER TABLE cairn_event_batches SET ({target})"))
            .map_err(pg_error("set the event table's options"))?;
    }
    Ok(())
}

/// Frames the writer puts in one row at most; a longer run goes on in the next row.
const ROW_EVENTS_MAX: usize = 1024;

/// Bytes of frames the writer puts in one row at most (a row of one frame may be larger).
const ROW_BYTES_MAX: usize = 1 << 20;

/// Rows of a thread from the one holding seq `$2 + 1` (the greatest `first_seq <= $2 + 1`)
/// to the one holding seq `$3`, in seq order: `$1` thread, `$2` after, `$3` up to.
macro_rules! rows_of_thread {
    () => {
        "SELECT thread, first_seq, last_seq, first_lsn, last_lsn, frames \
         FROM cairn_event_batches WHERE thread = $1 AND first_seq <= $3 AND first_seq >= \
         (SELECT coalesce(max(first_seq), 0) FROM cairn_event_batches \
          WHERE thread = $1 AND first_seq <= $2::bigint + 1)"
    };
}
pub(crate) use rows_of_thread;

/// Rows holding an lsn above `$1`, in lsn order, at most `$2` (each holds at least one event
/// above `$1`); `(below_watermark)` keeps to the watermark of the global log (`xid.rs`).
macro_rules! rows_after_lsn {
    () => {
        $crate::pg::events::rows_after_lsn!("")
    };
    (below_watermark) => {
        $crate::pg::events::rows_after_lsn!(concat!(
            "AND ",
            $crate::pg::xid::first_lsn_below_watermark!(),
            " "
        ))
    };
    ($and:expr) => {
        concat!(
            "SELECT thread, first_seq, last_seq, first_lsn, last_lsn, frames \
             FROM cairn_event_batches WHERE first_lsn >= \
             (SELECT coalesce(max(first_lsn), 0) FROM cairn_event_batches WHERE first_lsn <= $1) \
             AND last_lsn > $1 ",
            $and,
            "ORDER BY first_lsn LIMIT $2"
        )
    };
}
pub(crate) use rows_after_lsn;

/// A row's columns as read (thread, first and last seq, first and last lsn, frames).
pub(crate) struct RunRow<'r> {
    pub thread: &'r str,
    pub first_seq: i64,
    pub last_seq: i64,
    pub first_lsn: i64,
    pub last_lsn: i64,
    pub frames: &'r [u8],
}

impl<'r> RunRow<'r> {
    /// The columns of `row` from `at` on.
    pub(crate) fn of(row: &'r Row, at: usize) -> Self {
        RunRow {
            thread: row.get(at),
            first_seq: row.get(at + 1),
            last_seq: row.get(at + 2),
            first_lsn: row.get(at + 3),
            last_lsn: row.get(at + 4),
            frames: row.get(at + 5),
        }
    }

    /// The thread the row names (a key that is no thread id is damage).
    fn thread_id(&self) -> Result<ThreadId, Error> {
        ThreadId::new(self.thread).map_err(|e| {
            let detail = format!("thread column {:?} is not a thread id: {e}", self.thread);
            corrupt(table::EVENTS, None, None, detail)
        })
    }

    /// Its first seq as a [`Seq`] (where a problem of the row is reported).
    fn first(&self) -> Option<Seq> {
        u64::try_from(self.first_seq).ok().map(Seq)
    }

    /// How many events the columns say the row holds.
    pub(crate) fn count(&self) -> Result<u64, Error> {
        let (first, last) = (from_db(self.first_seq)?, from_db(self.last_seq)?);
        let (first_lsn, last_lsn) = (from_db(self.first_lsn)?, from_db(self.last_lsn)?);
        if first == 0 || first > last || last_lsn.checked_sub(first_lsn) != Some(last - first) {
            let thread = self.thread_id().ok();
            return Err(corrupt(
                table::EVENTS,
                thread.as_ref(),
                self.first(),
                format!(
                    "row (seqs {first}..={last}, lsns {first_lsn}..={last_lsn}) of {} is not a run",
                    self.thread
                ),
            ));
        }
        Ok(last - first + 1)
    }
}

/// Splits `frames` into its frames by their declared lengths (each checked when decoded).
///
/// # Errors
/// [`Error::Corrupted`] for a length past the bytes left or past the record bound.
fn split<'f>(frames: &'f [u8], thread: &ThreadId, first: u64) -> Result<Vec<&'f [u8]>, Error> {
    let mut out = Vec::new();
    let mut rest = frames;
    while !rest.is_empty() {
        let seq = Seq(first + out.len() as u64);
        let len = rest
            .get(frame::LEN_OFFSET..frame::HEADER_LEN)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .filter(|&n| n <= RECORD_BYTES_MAX && frame::OVERHEAD + n <= rest.len())
            .ok_or_else(|| {
                let detail = format!("the frame of seq {seq} of {thread} is cut or overlong");
                corrupt(table::EVENTS, Some(thread), Some(seq), detail)
            })?;
        let (one, tail) = rest.split_at(frame::OVERHEAD + len);
        out.push(one);
        rest = tail;
    }
    Ok(out)
}

/// Every event of a row, each frame decoded (CRC checked) and checked against the columns: as
/// many frames as the seqs the row covers, the `i`-th the event of its thread at `first_seq + i`
/// and `first_lsn + i`.
///
/// # Errors
/// [`Error::Corrupted`] naming the thread and seq of the first frame that fails.
pub(crate) fn decode_row(row: &RunRow<'_>) -> Result<Vec<Event>, Error> {
    let thread = row.thread_id()?;
    let count = row.count()?;
    let (first, first_lsn) = (from_db(row.first_seq)?, from_db(row.first_lsn)?);
    let frames = split(row.frames, &thread, first)?;
    if frames.len() as u64 != count {
        let detail = format!(
            "row of {thread} from seq {first} holds {} frames for {count} seqs",
            frames.len()
        );
        return Err(corrupt(table::EVENTS, Some(&thread), Some(Seq(first)), detail));
    }
    let mut out = Vec::with_capacity(frames.len());
    for (i, bytes) in frames.into_iter().enumerate() {
        let (seq, lsn) = (first + i as u64, first_lsn + i as u64);
        let event = codec::decode_event(bytes)
            .map_err(|e| codec::locate(e, Some(&thread), Some(Seq(seq))))?;
        let mismatch = (event.thread != thread
            || event.bookmark.seq.0 != seq
            || event.bookmark.lsn.0 != lsn)
            .then(|| format!("({thread}, seq {seq}, lsn {lsn}) holds event {}", event.bookmark));
        codec::key_agrees(mismatch, table::EVENTS, Some(&thread), Some(Seq(seq)))?;
        out.push(event);
    }
    Ok(out)
}

/// The event of seq `seq` in a row (only its frame is decoded), `None` when the row does not
/// cover it.
///
/// # Errors
/// [`Error::Corrupted`] for a damaged row or frame.
pub(crate) fn event_at(row: &RunRow<'_>, seq: u64) -> Result<Option<Event>, Error> {
    let thread = row.thread_id()?;
    row.count()?;
    let (first, first_lsn) = (from_db(row.first_seq)?, from_db(row.first_lsn)?);
    if seq < first || seq > from_db(row.last_seq)? {
        return Ok(None);
    }
    let frames = split(row.frames, &thread, first)?;
    let index = usize::try_from(seq - first).unwrap_or(usize::MAX);
    let Some(bytes) = frames.get(index) else {
        let detail = format!("row of {thread} from seq {first} has no frame for seq {seq}");
        return Err(corrupt(table::EVENTS, Some(&thread), Some(Seq(seq)), detail));
    };
    let event =
        codec::decode_event(bytes).map_err(|e| codec::locate(e, Some(&thread), Some(Seq(seq))))?;
    let lsn = first_lsn + (seq - first);
    let mismatch =
        (event.thread != thread || event.bookmark.seq.0 != seq || event.bookmark.lsn.0 != lsn)
            .then(|| format!("({thread}, seq {seq}, lsn {lsn}) holds event {}", event.bookmark));
    codec::key_agrees(mismatch, table::EVENTS, Some(&thread), Some(Seq(seq)))?;
    Ok(Some(event))
}

/// The events above lsn `after` of `rows` (read by [`rows_after_lsn`]), in lsn order, at most
/// `limit`.
///
/// # Errors
/// [`Error::Corrupted`] for a damaged row.
pub(crate) fn after_lsn(rows: &[Row], after: u64, limit: usize) -> Result<Vec<Event>, Error> {
    let mut out = Vec::with_capacity(limit.min(rows.len()));
    for row in rows {
        for event in decode_row(&RunRow::of(row, 0))? {
            if out.len() == limit {
                return Ok(out);
            }
            if event.bookmark.lsn.0 > after {
                out.push(event);
            }
        }
    }
    Ok(out)
}

/// The rows a group writes, column by column (for `unnest`): each new event joins the row
/// before it when it is of the same thread at the next seq and the next lsn.
#[derive(Default)]
pub(crate) struct Runs {
    threads: Vec<String>,
    first_seqs: Vec<i64>,
    last_seqs: Vec<i64>,
    first_lsns: Vec<i64>,
    last_lsns: Vec<i64>,
    frames: Vec<Vec<u8>>,
    /// Frames in the last row.
    in_last: usize,
}

impl Runs {
    /// Adds the event of `thread` at `seq` and `lsn` (`framed`: its record as the planner
    /// encoded it).
    pub(crate) fn push(
        &mut self,
        thread: &ThreadId,
        seq: u64,
        lsn: u64,
        framed: Vec<u8>,
    ) -> Result<(), Error> {
        let (seq, lsn) = (to_db(seq)?, to_db(lsn)?);
        let same_thread = self.threads.last().is_some_and(|t| t == thread.as_str());
        if let (true, Some(last_seq), Some(last_lsn), Some(frames)) = (
            same_thread && self.in_last < ROW_EVENTS_MAX,
            self.last_seqs.last_mut(),
            self.last_lsns.last_mut(),
            self.frames.last_mut(),
        ) && *last_seq + 1 == seq
            && *last_lsn + 1 == lsn
            && frames.len() + framed.len() <= ROW_BYTES_MAX
        {
            frames.extend_from_slice(&framed);
            (*last_seq, *last_lsn) = (seq, lsn);
            self.in_last += 1;
            return Ok(());
        }
        self.threads.push(thread.to_string());
        self.first_seqs.push(seq);
        self.last_seqs.push(seq);
        self.first_lsns.push(lsn);
        self.last_lsns.push(lsn);
        self.frames.push(framed);
        self.in_last = 1;
        Ok(())
    }

    /// The statement that inserts the rows, if there are any.
    pub(crate) fn statement(&self) -> Option<super::tx::Sql<'_>> {
        if self.threads.is_empty() {
            return None;
        }
        Some((
            "INSERT INTO cairn_event_batches \
             (thread, first_seq, last_seq, first_lsn, last_lsn, frames) \
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], \
             $5::bigint[], $6::bytea[])",
            vec![
                &self.threads,
                &self.first_seqs,
                &self.last_seqs,
                &self.first_lsns,
                &self.last_lsns,
                &self.frames,
            ],
        ))
    }
}

/// Rows of a thread read and checked at a time while it is deleted: memory holds one page.
const READ_PAGE_ROWS: i64 = 64;

/// Removes the events of `thread` up to seq `covers` (a prune in the writer's transaction):
/// the rows that end there go, the row holding seq `covers + 1` keeps its events from there on.
/// The number of events removed.
///
/// # Errors
/// A failed statement; [`Error::Corrupted`] for a damaged row that would be cut.
pub(super) fn prune(tx: &mut Tx<'_, '_>, thread: &ThreadId, covers: u64) -> Result<u64, Error> {
    let (id, upto) = (thread.as_str(), to_db(covers)?);
    let op = pg_error("prune events");
    let row = tx
        .query_one(
            "WITH d AS (DELETE FROM cairn_event_batches WHERE thread = $1 AND last_seq <= $2 \
             RETURNING last_seq - first_seq + 1 AS n) SELECT coalesce(sum(n), 0)::bigint FROM d",
            &[&id, &upto],
        )
        .map_err(&op)?;
    let mut events = from_db(row.get(0))?;
    let Some(row) = tx
        .query_opt(
            "SELECT thread, first_seq, last_seq, first_lsn, last_lsn, frames \
             FROM cairn_event_batches WHERE thread = $1 AND first_seq <= $2 AND last_seq > $2",
            &[&id, &upto],
        )
        .map_err(&op)?
    else {
        return Ok(events);
    };
    let run = RunRow::of(&row, 0);
    decode_row(&run)?;
    let first = from_db(run.first_seq)?;
    let cut = covers + 1 - first;
    let frames = split(run.frames, thread, first)?;
    let rest =
        frames.get(usize::try_from(cut).unwrap_or(usize::MAX)..).unwrap_or_default().concat();
    tx.execute(
        "UPDATE cairn_event_batches SET first_seq = $3, first_lsn = $4, frames = $5 \
         WHERE thread = $1 AND first_seq = $2",
        &[&id, &run.first_seq, &to_db(covers + 1)?, &to_db(from_db(run.first_lsn)? + cut)?, &rest],
    )
    .map_err(&op)?;
    events += cut;
    Ok(events)
}

/// The payloads the events of `thread` reference, every row read and checked (a damaged one
/// fails: a thread is deleted whole or not at all).
///
/// # Errors
/// A failed statement; [`Error::Corrupted`] for a damaged row.
pub(super) fn referenced_payloads(
    tx: &mut Tx<'_, '_>,
    thread: &ThreadId,
) -> Result<BTreeSet<[u8; 32]>, Error> {
    let mut referenced = BTreeSet::new();
    let mut after: i64 = 0;
    loop {
        let rows = tx
            .query(
                "SELECT thread, first_seq, last_seq, first_lsn, last_lsn, frames \
                 FROM cairn_event_batches WHERE thread = $1 AND first_seq > $2 \
                 ORDER BY first_seq LIMIT $3",
                &[&thread.as_str(), &after, &READ_PAGE_ROWS],
            )
            .map_err(pg_error("read events"))?;
        for row in &rows {
            let run = RunRow::of(row, 0);
            let events = decode_row(&run)?;
            referenced.extend(events.iter().filter_map(|e| e.payload.map(|p| p.hash)));
            after = run.first_seq;
        }
        if (rows.len() as i64) < READ_PAGE_ROWS {
            return Ok(referenced);
        }
    }
}

/// Removes every event of `thread`; their number.
///
/// # Errors
/// A failed statement.
pub(super) fn delete_all(tx: &mut Tx<'_, '_>, thread: &ThreadId) -> Result<u64, Error> {
    let row = tx
        .query_one(
            "WITH d AS (DELETE FROM cairn_event_batches WHERE thread = $1 \
             RETURNING last_seq - first_seq + 1 AS n) SELECT coalesce(sum(n), 0)::bigint FROM d",
            &[&thread.as_str()],
        )
        .map_err(pg_error("delete events"))?;
    from_db(row.get(0))
}

/// Held while one connection moves the log into runs, so two stores starting together move it
/// once ("CAIRNEVB").
const MIGRATION_LOCK: i64 = 0x4341_4952_4e45_5642;

/// Moves a log of one row per event (`cairn_events`, format 5 and older) into runs, then drops
/// it: in one transaction, under an advisory lock. A second store waits, then finds no
/// `cairn_events` and does nothing; a crash (or a killed connection) rolls it back, and the next
/// connect starts over. Nothing happens when there is no such table.
///
/// Writers of an older build still connected fail once the table is gone (their events are
/// moved first: the table is locked against them from the start); run one build at a time.
///
/// # Errors
/// Connection errors (nothing is committed).
pub(crate) fn migrate(client: &mut Client<'_>) -> Result<(), Error> {
    if !has_old_log(client)? {
        return Ok(());
    }
    client.advisory_locked(MIGRATION_LOCK, "migrate to format 6", migrate_locked)
}

/// Whether the per-event table is there.
fn has_old_log(client: &mut Client<'_>) -> Result<bool, Error> {
    let row = client
        .query_one("SELECT to_regclass('cairn_events') IS NOT NULL", &[])
        .map_err(pg_error("read the schema"))?;
    Ok(row.get(0))
}

fn migrate_locked(client: &mut Client<'_>) -> Result<(), Error> {
    let op = pg_error("migrate to format 6");
    if !has_old_log(client)? {
        return Ok(());
    }
    let tx = client.transaction().map_err(&op)?;
    // Writers of an older build wait from here to the commit, then fail on the missing table.
    tx.execute("LOCK TABLE cairn_events IN SHARE MODE", &[]).map_err(&op)?;
    // A run: events of one thread with the same lsn - seq (consecutive in both, as each thread's
    // seqs and lsns rise together), cut every ROW_EVENTS_MAX seqs.
    let moved = tx
        .execute(
            "INSERT INTO cairn_event_batches \
             (thread, first_seq, last_seq, first_lsn, last_lsn, frames) \
             SELECT thread, min(seq), max(seq), min(lsn), max(lsn), \
             string_agg(record, ''::bytea ORDER BY seq) \
             FROM cairn_events GROUP BY thread, lsn - seq, (seq - 1) / $1",
            &[&to_db(ROW_EVENTS_MAX as u64)?],
        )
        .map_err(&op)?;
    tx.execute("DROP TABLE cairn_events", &[]).map_err(&op)?;
    tx.commit().map_err(&op)?;
    tracing::info!(rows = moved, "the log moved to one row per run of a thread's events");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_or_overlong_frame_is_refused_not_read_past() {
        let thread = ThreadId::new("t").unwrap();
        let mut frames = frame::encode(frame::RecordKind::Event, b"body");
        assert_eq!(split(&frames, &thread, 1).unwrap().len(), 1);
        frames.extend_from_slice(&frames.clone());
        assert_eq!(split(&frames, &thread, 1).unwrap().len(), 2);
        frames.pop();
        assert!(matches!(split(&frames, &thread, 1), Err(Error::Corrupted { .. })));
        let mut long = frame::encode(frame::RecordKind::Event, b"body");
        long[frame::LEN_OFFSET..frame::HEADER_LEN].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(split(&long, &thread, 1), Err(Error::Corrupted { .. })));
    }

    #[test]
    fn consecutive_events_of_one_thread_share_a_row() {
        let (a, b) = (ThreadId::new("a").unwrap(), ThreadId::new("b").unwrap());
        let mut runs = Runs::default();
        runs.push(&a, 1, 10, b"x".to_vec()).unwrap();
        runs.push(&a, 2, 11, b"y".to_vec()).unwrap();
        runs.push(&b, 1, 12, b"z".to_vec()).unwrap();
        runs.push(&a, 3, 13, b"w".to_vec()).unwrap();
        runs.push(&a, 4, 14, b"v".to_vec()).unwrap();
        assert_eq!(runs.threads, ["a", "b", "a"]);
        assert_eq!((runs.first_seqs, runs.last_seqs), (vec![1, 1, 3], vec![2, 1, 4]));
        assert_eq!((runs.first_lsns, runs.last_lsns), (vec![10, 12, 13], vec![11, 12, 14]));
        assert_eq!(runs.frames[0], b"xy");
    }
}
