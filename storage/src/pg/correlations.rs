//! The correlation index on PostgreSQL (`docs/format.md` §2.2, `docs/postgres.md`): the table
//! `cairn_correlations`, its reads, its check in `verify`, and the migration of a format-1
//! database that builds it from the log.
//!
//! Rows are inserted by the writer in the group's transaction (`group.rs`, `write.rs`) and deleted
//! by the prune that deletes their events (`write.rs`).

use std::collections::BTreeMap;

use super::blocking::Client;
use super::events::RunRow;
use super::pool::Conn;
use tokio_postgres::Row;

use super::{from_db, pg_error, to_db};
use crate::codec;
use crate::correlation::{self, CorrelationEntry, CorrelationQuery, corrupted};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Lsn, PayloadRef, Seq, ThreadId};
use crate::limits::{self, MIGRATION_BATCH_EVENTS, READ_LIMIT_MAX};
use crate::store::Problem;

/// The meta row a migration keeps its place in, while it runs.
const BUILT_TO: &str = "correlations_built_to";
/// The advisory lock one migrating process holds (any number unique to Cairn: "CAIRNCOR").
const MIGRATION_LOCK: i64 = 0x4341_4952_4e43_4f52;

/// Events of `query` with lsn > `after`, in lsn order, at most `limit`: the index rows of the
/// correlation id, filtered on their columns, joined to their events.
pub(crate) async fn read_correlated(
    client: &Conn,
    query: &CorrelationQuery,
    after: Lsn,
    limit: usize,
) -> Result<Vec<Event>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let thread = query.thread.as_ref().map(ThreadId::as_str);
    let from = query.from_ms.map(to_db).transpose()?;
    let to = query.to_ms.map(to_db).transpose()?;
    let rows = super::read::query(
        client,
        // Paged by lsn like the log: below the watermark only (`xid.rs`).
        concat!(
            "SELECT c.lsn, c.thread, c.seq, c.at_ms, c.record, e.* \
                 FROM cairn_correlations c LEFT JOIN LATERAL \
                 (SELECT thread, first_seq, last_seq, first_lsn, last_lsn, frames \
                  FROM cairn_event_batches b WHERE b.thread = c.thread AND b.first_seq <= c.seq \
                  ORDER BY b.first_seq DESC LIMIT 1) e ON true \
                 WHERE c.correlation = $1 AND c.lsn > $2 AND ($3::text IS NULL OR c.thread = $3) \
                 AND ($4::bigint IS NULL OR c.at_ms >= $4) \
                 AND ($5::bigint IS NULL OR c.at_ms <= $5) AND c.",
            super::xid::below_watermark!(),
            " ORDER BY c.lsn LIMIT $6"
        ),
        &[&query.correlation, &to_db(after.0)?, &thread, &from, &to, &to_db(limit as u64)?],
    )
    .await
    .map_err(pg_error("read correlations"))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let entry = entry_of(&query.correlation, &row, 0)?;
        let (thread, seq) = (Some(&entry.thread), Some(Seq(entry.seq)));
        let found = match row.get::<_, Option<&str>>(5) {
            Some(_) => super::events::event_at(&RunRow::of(&row, 5), entry.seq)?,
            None => None,
        };
        let Some(event) = found else {
            let detail =
                format!("entry ({:?}, lsn {}) points at no event", entry.correlation, entry.lsn);
            return Err(corrupted(thread, seq, detail));
        };
        entry.check_event(&event)?;
        out.push(event);
    }
    Ok(out)
}

/// Decodes an index row's record and checks it against the row's columns (`lsn, thread, seq,
/// at_ms, record` from column `at` on).
fn entry_of(correlation: &str, row: &Row, at: usize) -> Result<CorrelationEntry, Error> {
    let (lsn, thread, seq): (i64, &str, i64) = (row.get(at), row.get(at + 1), row.get(at + 2));
    let (at_ms, record): (i64, &[u8]) = (row.get(at + 3), row.get(at + 4));
    let entry = codec::decode_correlation(record)?;
    if entry.correlation != correlation
        || entry.lsn != from_db(lsn)?
        || entry.thread.as_str() != thread
        || entry.seq != from_db(seq)?
        || entry.at_ms != from_db(at_ms)?
    {
        return Err(corrupted(
            Some(&entry.thread),
            Some(Seq(entry.seq)),
            format!(
                "row ({correlation:?}, lsn {lsn}, {thread}, seq {seq}) holds the entry ({:?}, lsn \
                 {}, {}, seq {})",
                entry.correlation, entry.lsn, entry.thread, entry.seq
            ),
        ));
    }
    Ok(entry)
}

/// The entry columns and record of `entries`, for one `unnest` insert.
#[derive(Default)]
pub(crate) struct Rows {
    correlations: Vec<String>,
    lsns: Vec<i64>,
    threads: Vec<String>,
    seqs: Vec<i64>,
    at_ms: Vec<i64>,
    records: Vec<Vec<u8>>,
}

impl Rows {
    /// Adds an entry (its framed record as the planner encoded it).
    pub(crate) fn push(&mut self, framed: Vec<u8>) -> Result<(), Error> {
        let entry = codec::decode_correlation(&framed)?;
        self.correlations.push(entry.correlation);
        self.lsns.push(to_db(entry.lsn)?);
        self.threads.push(entry.thread.to_string());
        self.seqs.push(to_db(entry.seq)?);
        self.at_ms.push(to_db(entry.at_ms)?);
        self.records.push(framed);
        Ok(())
    }

    /// The statement that inserts the rows, if there are any (`ON CONFLICT DO NOTHING`: a
    /// resumed migration writes an entry again).
    pub(crate) fn statement(&self) -> Option<super::tx::Sql<'_>> {
        if self.lsns.is_empty() {
            return None;
        }
        Some((
            "INSERT INTO cairn_correlations (correlation, lsn, thread, seq, at_ms, record) \
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], \
             $5::bigint[], $6::bytea[]) ON CONFLICT DO NOTHING",
            vec![
                &self.correlations,
                &self.lsns,
                &self.threads,
                &self.seqs,
                &self.at_ms,
                &self.records,
            ],
        ))
    }
}

/// The correlation id `event` carries (a legacy body's payload read from `client`).
pub(crate) fn of(client: &mut Client<'_>, event: &Event) -> Option<String> {
    correlation::of(event, |r: &PayloadRef| {
        let row = client
            .query_opt("SELECT bytes FROM cairn_payloads WHERE hash = $1", &[&&r.hash[..]])
            .map_err(pg_error("read payload"))?;
        row.map(|row| row.get(0)).ok_or(Error::MissingPayload(*r))
    })
}

/// The index rows of the next [`MIGRATION_BATCH_EVENTS`] events above lsn `built`, the lsn of
/// the last of them and their number (a damaged row of events counts as one, left unindexed).
fn next_entries(client: &mut Client<'_>, built: i64) -> Result<(Rows, i64, usize), Error> {
    let rows = client
        .query(super::events::rows_after_lsn!(), &[&built, &to_db(MIGRATION_BATCH_EVENTS as u64)?])
        .map_err(pg_error("read the log"))?;
    let mut entries = Rows::default();
    let (mut last, mut events) = (built, 0);
    let floor = u64::try_from(built).unwrap_or(0);
    for row in &rows {
        let run = RunRow::of(row, 0);
        match super::events::decode_row(&run) {
            Ok(found) => {
                for event in found.iter().filter(|e| e.bookmark.lsn.0 > floor) {
                    if events == MIGRATION_BATCH_EVENTS {
                        break;
                    }
                    events += 1;
                    last = to_db(event.bookmark.lsn.0)?;
                    if let Some(c) = of(client, event) {
                        let entry = CorrelationEntry::of_event(event, c);
                        entries.push(codec::encode_correlation(&entry)?)?;
                    }
                }
            }
            Err(error) => {
                // Its events are left unindexed; the next pass starts after it.
                tracing::warn!(%error, lsn = run.first_lsn, "a damaged row of events is left unindexed");
                events += 1;
                last = last.max(run.last_lsn);
            }
        }
        if events >= MIGRATION_BATCH_EVENTS {
            break;
        }
    }
    Ok((entries, last, events))
}

/// Checks `cairn_correlations` against `expected` ((correlation, lsn) -> (thread, seq) of every
/// event carrying a correlation id), both ways.
pub(crate) fn verify(
    client: &mut Client<'_>,
    mut expected: BTreeMap<(String, u64), (ThreadId, u64)>,
    problems: &mut Vec<Problem>,
) -> Result<(), Error> {
    let mut problem = |e: Error| {
        if let Ok(found) = Problem::of(e) {
            problems.push(found);
        }
    };
    let rows = client
        .query(
            "SELECT correlation, lsn, thread, seq, at_ms, record FROM cairn_correlations \
             ORDER BY correlation, lsn",
            &[],
        )
        .map_err(pg_error("verify"))?;
    for row in rows {
        let correlation: String = row.get(0);
        let lsn: i64 = row.get(1);
        let key = (correlation.clone(), u64::try_from(lsn).unwrap_or(0));
        let want = expected.remove(&key);
        match entry_of(&correlation, &row, 1) {
            Err(e) => problem(e),
            Ok(entry) => match want {
                Some((thread, seq)) if thread == entry.thread && seq == entry.seq => {}
                _ => problem(corrupted(
                    Some(&entry.thread),
                    Some(Seq(entry.seq)),
                    format!(
                        "entry ({correlation:?}, lsn {lsn}) points at no event carrying that \
                         correlation id at ({}, {})",
                        entry.thread, entry.seq
                    ),
                )),
            },
        }
    }
    for ((correlation, lsn), (thread, seq)) in expected {
        let detail = format!("the event at lsn {lsn} carries {correlation:?} but has no entry");
        problem(corrupted(Some(&thread), Some(Seq(seq)), detail));
    }
    Ok(())
}

/// Builds the index of a format-1 database from its log, then sets the format to 2, under an
/// advisory lock (one process migrates; the others wait, then find format 2): batches of
/// [`MIGRATION_BATCH_EVENTS`] events per transaction, resuming from `correlations_built_to`.
pub(crate) fn migrate(client: &mut Client<'_>) -> Result<(), Error> {
    client.advisory_locked(MIGRATION_LOCK, "migrate to format 2", migrate_locked)
}

fn migrate_locked(client: &mut Client<'_>) -> Result<(), Error> {
    let op = pg_error("migrate to format 2");
    // Format 2 added the index; a later step (`schema.rs`) takes the format on from there.
    let version = 2_i64;
    loop {
        let format: i64 = client
            .query_one("SELECT value FROM cairn_meta WHERE key = 'format_version'", &[])
            .map_err(&op)?
            .get(0);
        if format >= version {
            return Ok(());
        }
        let built: i64 = client
            .query_opt("SELECT value FROM cairn_meta WHERE key = $1", &[&BUILT_TO])
            .map_err(&op)?
            .map_or(0, |r| r.get(0));
        let (rows_of, last, events) = next_entries(client, built).map_err(|e| match e {
            Error::Storage { source, .. } => Error::Storage { op: "migrate to format 2", source },
            other => other,
        })?;
        let mut done = events < MIGRATION_BATCH_EVENTS;
        let tx = client.transaction().map_err(&op)?;
        if let Some((sql, params)) = rows_of.statement() {
            tx.execute(sql, &params).map_err(&op)?;
        }
        tx.execute(
            "INSERT INTO cairn_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            &[&BUILT_TO, &last],
        )
        .map_err(&op)?;
        if done {
            // The counter row's lock holds back the writers of an older build (each of their
            // commits locks it) while the format changes; events written meanwhile are indexed
            // in another pass. This build's writers do not use the row: they start once the
            // store's migration at connect is over.
            tx.query("SELECT value FROM cairn_meta WHERE key = 'last_lsn' FOR UPDATE", &[])
                .map_err(&op)?;
            let rest = tx
                .query("SELECT 1 FROM cairn_event_batches WHERE last_lsn > $1 LIMIT 1", &[&last])
                .map_err(&op)?;
            done = rest.is_empty();
            if done {
                tx.execute(
                    "UPDATE cairn_meta SET value = $1 WHERE key = 'format_version'",
                    &[&version],
                )
                .map_err(&op)?;
                tx.execute("DELETE FROM cairn_meta WHERE key = $1", &[&BUILT_TO]).map_err(&op)?;
            }
        }
        tx.commit().map_err(&op)?;
        if done {
            return Ok(());
        }
    }
}
