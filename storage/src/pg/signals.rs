//! The signal inbox on PostgreSQL (`docs/format.md` §2.3, `docs/postgres.md`): the table
//! `cairn_signals`, keyed `(thread, n)` and holding the same kind-9 record as a redb file, its
//! writes (rows the planner numbered, inserted with the group's other rows), reads, its check in
//! `verify`, and the step of a format-2 database to format 3.
//!
//! The writer calls in here from `write.rs` and `group.rs` by a line each: this file owns the
//! SQL. The primary key makes a number taken twice (two writers that both read the same last
//! one) a failed statement, never a lost or doubled signal.

use std::collections::HashMap;

use super::blocking::Client;
use super::pool::Conn;

use super::tx::Tx;
use super::{from_db, pg_error, to_db};
use crate::codec::table;
use crate::error::Error;
use crate::ids::{Seq, ThreadId};
use crate::limits::{self, READ_LIMIT_MAX};
use crate::signal::Signal;
use crate::store::Problem;

/// The table, idempotent (run at open, before the format check).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cairn_signals (
    thread text NOT NULL,
    n bigint NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (thread, n)
);
";

/// Creates the table if it is missing.
///
/// # Errors
/// Connection errors.
pub(crate) fn prepare(client: &mut Client<'_>) -> Result<(), Error> {
    client.batch_execute(SCHEMA).map_err(pg_error("create the signal inbox"))
}

/// Decodes the row `(thread, n)` and checks the record against it.
fn decode(thread: &str, n: i64, bytes: &[u8]) -> Result<Signal, Error> {
    let id = ThreadId::new(thread).ok();
    let signal = crate::codec::decode_signal(bytes)
        .map_err(|e| crate::codec::locate(e, id.as_ref(), u64::try_from(n).ok().map(Seq)))?;
    let mismatch = (signal.thread.as_str() != thread || i64::try_from(signal.n).ok() != Some(n))
        .then(|| {
            format!("row ({thread}, {n}) holds the signal of ({}, {})", signal.thread, signal.n)
        });
    let seq = u64::try_from(n).ok().map(Seq);
    crate::codec::key_agrees(mismatch, table::SIGNALS, id.as_ref(), seq)?;
    Ok(signal)
}

/// Up to `limit` signals of `thread` with n > `after`, in n order.
///
/// # Errors
/// [`Error::LimitExceeded`] past `READ_LIMIT_MAX`; a damaged row; connection errors.
pub(crate) async fn read(
    client: &Conn,
    thread: &ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<Signal>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let rows = super::read::query(
        client,
        "SELECT n, record FROM cairn_signals WHERE thread = $1 AND n > $2 ORDER BY n LIMIT $3",
        &[&thread.as_str(), &to_db(after)?, &to_db(limit as u64)?],
    )
    .await
    .map_err(pg_error("read signals"))?;
    rows.iter().map(|r| decode(thread.as_str(), r.get(0), r.get(1))).collect()
}

/// The numbers of the last signals of threads, as the group's batches leave them: the
/// planner's `last_signal` for the writer's `PlanState`s.
#[derive(Default)]
pub(crate) struct LastSignals(HashMap<ThreadId, u64>, Vec<(ThreadId, u64, Vec<u8>)>);

impl LastSignals {
    /// The last number of `thread`, read once per group from the database.
    ///
    /// # Errors
    /// Connection errors.
    pub(crate) fn get(&mut self, tx: &mut Tx<'_, '_>, thread: &ThreadId) -> Result<u64, Error> {
        if let Some(n) = self.0.get(thread) {
            return Ok(*n);
        }
        let last: Option<i64> = tx
            .query_opt("SELECT max(n) FROM cairn_signals WHERE thread = $1", &[&thread.as_str()])
            .map_err(pg_error("read signals"))?
            .and_then(|r| r.get(0));
        let last = last.map(from_db).transpose()?.unwrap_or(0);
        self.0.insert(thread.clone(), last);
        Ok(last)
    }

    /// Takes in the signals a planned batch numbered: later batches of the group see them.
    pub(crate) fn absorb(&mut self, planned: &[(ThreadId, u64, Vec<u8>)]) {
        for (thread, n, _) in planned {
            self.0.insert(thread.clone(), *n);
        }
        self.1.extend_from_slice(planned);
    }

    /// The number of the first signal of `thread` named `name` holding exactly `data`: in the
    /// table (read in the group's transaction, which holds the thread's row lock: a writer
    /// racing to store the same signal waits, then sees it), then among the group's batches
    /// before. A thread holds at most `SIGNALS_PER_THREAD_MAX` signals: the scan is bounded.
    ///
    /// # Errors
    /// A damaged row; connection errors.
    pub(crate) fn find(
        &self,
        tx: &mut Tx<'_, '_>,
        thread: &ThreadId,
        name: &str,
        data: &[u8],
    ) -> Result<Option<u64>, Error> {
        let rows = tx
            .query(
                "SELECT n, record FROM cairn_signals WHERE thread = $1 ORDER BY n",
                &[&thread.as_str()],
            )
            .map_err(pg_error("read signals"))?;
        for row in &rows {
            let signal = decode(thread.as_str(), row.get(0), row.get(1))?;
            if signal.name == name && signal.data == data {
                return Ok(Some(signal.n));
            }
        }
        for (t, n, framed) in &self.1 {
            if t != thread {
                continue;
            }
            let signal = crate::codec::decode_signal(framed)?;
            if signal.name == name && signal.data == data {
                return Ok(Some(*n));
            }
        }
        Ok(None)
    }
}

/// Inserts planned signals (thread, n, framed record) in one statement.
///
/// # Errors
/// A failed statement (a number taken meanwhile included: the group fails).
pub(crate) fn insert(
    tx: &mut Tx<'_, '_>,
    signals: &[(ThreadId, u64, Vec<u8>)],
) -> Result<(), Error> {
    if signals.is_empty() {
        return Ok(());
    }
    let threads: Vec<&str> = signals.iter().map(|(t, _, _)| t.as_str()).collect();
    let ns = signals.iter().map(|(_, n, _)| to_db(*n)).collect::<Result<Vec<i64>, _>>()?;
    let records: Vec<&[u8]> = signals.iter().map(|(_, _, r)| r.as_slice()).collect();
    tx.execute(
        "INSERT INTO cairn_signals (thread, n, record) \
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])",
        &[&threads, &ns, &records],
    )
    .map_err(pg_error("append signals"))?;
    // A thread parked waiting becomes due in the wake index, so that a worker's look wakes it
    // if the sender cannot (it died between its send and its wake, or does not run the
    // thread's workflow): the look reads the inbox as recovery does. One waiting for input
    // rather than this signal stays due, read by each look, until it is written again.
    tx.execute(
        "UPDATE cairn_threads SET ready_at = 0 WHERE id = ANY($1) AND status = 'waiting_input'",
        &[&threads],
    )
    .map_err(pg_error("append signals"))?;
    Ok(())
}

/// Checks every signal as the redb file's `verify` does: it decodes, matches its row, belongs
/// to a known thread, and each thread's numbers run from 1 without a gap. Returns the count.
///
/// # Errors
/// Connection errors.
pub(crate) fn verify(
    client: &mut Client<'_>,
    thread_exists: impl Fn(&str) -> bool,
    problems: &mut Vec<Problem>,
) -> Result<u64, Error> {
    let rows = client
        .query("SELECT thread, n, record FROM cairn_signals ORDER BY thread, n", &[])
        .map_err(pg_error("verify"))?;
    let mut previous: Option<(String, i64)> = None;
    for row in &rows {
        let (thread, n): (String, i64) = (row.get(0), row.get(1));
        let expected = match &previous {
            Some((t, last)) if *t == thread => last.saturating_add(1),
            _ => 1,
        };
        let at = |detail: String| Problem {
            table: table::SIGNALS,
            thread: ThreadId::new(thread.clone()).ok(),
            seq: u64::try_from(n).ok().map(Seq),
            detail,
        };
        if n != expected {
            problems.push(at(format!("signal gap: signal {n} follows signal {}", expected - 1)));
        }
        match decode(&thread, n, row.get(2)) {
            Ok(_) if !thread_exists(&thread) => {
                problems.push(at(format!("signal {n} of a thread that does not exist")));
            }
            Ok(_) => {}
            Err(e) => problems.push(Problem::of(e)?),
        }
        previous = Some((thread, n));
    }
    Ok(rows.len() as u64)
}
