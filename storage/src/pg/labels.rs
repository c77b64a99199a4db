//! The thread search index on PostgreSQL (format v5, `docs/format.md` §2.6): the table
//! `cairn_thread_labels (thread, key, value)`, primary key `(thread, key)`, indexed by
//! `(key, value, thread)`, rewritten for a thread only when a group changes its labels, in the
//! group's transaction; its filling from the stored records when a v4 database is migrated; and
//! its check (with the `status` column) in `verify`. Listings through it are `read.rs`
//! (`BY_LABELS`), driven by the filter's most selective label ([`driving_label`]).
//!
//! A thread's status was already a column with an index (`cairn_threads_by_status`).

use std::collections::{BTreeMap, BTreeSet};

use super::blocking::Client;
use super::pool::Conn;
use super::read::{decode_thread, query};
use super::tx::Sql;
use super::{pg_error, to_db};
use crate::codec::table;
use crate::error::Error;
use crate::ids::ThreadId;
use crate::store::Problem;
use crate::thread::ThreadRecord;

/// A thread's labels.
pub(super) type Labels = BTreeMap<String, String>;

/// The table and its index, idempotent (created by `schema.rs`).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cairn_thread_labels (
    thread text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (thread, key)
);
CREATE INDEX IF NOT EXISTS cairn_thread_labels_by_label ON cairn_thread_labels (key, value, thread);
";

/// Rows of each label [`driving_label`] counts at most (as redb's choice steps through at
/// most `CHOOSE_STEPS_MAX` entries): labels all this common are alike for a page, whose
/// matches are then likely dense, and the first of them drives.
pub(super) const LABEL_COUNT_MAX: i64 = 4_096;

/// Per label of a filter (`$1` keys, `$2` values, in the filter's order), its rows after the
/// cursor `$3`, counted through `cairn_thread_labels_by_label` up to `$4`: one query.
const LABEL_COUNTS: &str = "SELECT (SELECT count(*) FROM (SELECT 1 FROM cairn_thread_labels l          WHERE l.key = f.key AND l.value = f.value AND ($3::text IS NULL OR l.thread > $3)          LIMIT $4) c)      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS f(key, value, n) ORDER BY f.n";

/// The index in `labels` of the label with the fewest threads after `cursor` (counted up to
/// [`LABEL_COUNT_MAX`]; the first of equals): the one a listing walks, the others checked per
/// thread. The order of the answer is the thread ids' whichever label drives, so order and
/// pages do not depend on it. One label: 0, without a query.
///
/// # Errors
/// Connection errors.
pub(super) async fn driving_label(
    client: &Conn,
    labels: &[(String, String)],
    cursor: Option<&str>,
) -> Result<usize, Error> {
    if labels.len() < 2 {
        return Ok(0);
    }
    let (keys, values): (Vec<&str>, Vec<&str>) =
        labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).unzip();
    let rows = query(client, LABEL_COUNTS, &[&keys, &values, &cursor, &LABEL_COUNT_MAX])
        .await
        .map_err(pg_error("count label rows"))?;
    let counts = rows.iter().map(|r| r.get::<_, i64>(0));
    Ok(counts.enumerate().min_by_key(|(i, count)| (*count, *i)).map_or(0, |(i, _)| i))
}

/// The format that added the table.
const WITH_LABELS: i64 = 5;

/// Threads read per query while a migration fills the table.
const MIGRATION_BATCH_THREADS: u64 = 1_000;

/// Held while one connection migrates, so two stores starting together fill the table once
/// ("CAIRNLBL").
const MIGRATION_LOCK: i64 = 0x4341_4952_4e4c_424c;

/// Moves a format-4 database to format 5: fills the table from every stored thread record and
/// moves the format row, in one transaction, under an advisory lock (a second store waits, then
/// finds format 5 and does nothing; a crash rolls back, and the next connect starts over).
///
/// # Errors
/// Connection errors (nothing is committed).
pub(crate) fn migrate(client: &mut Client<'_>) -> Result<(), Error> {
    client.advisory_locked(MIGRATION_LOCK, "migrate to format 5", migrate_locked)
}

fn migrate_locked(client: &mut Client<'_>) -> Result<(), Error> {
    let op = pg_error("migrate to format 5");
    let tx = client.transaction().map_err(&op)?;
    let format: i64 = tx
        .query_one("SELECT value FROM cairn_meta WHERE key = 'format_version'", &[])
        .map_err(&op)?
        .get(0);
    if format >= WITH_LABELS {
        return Ok(());
    }
    tx.execute("DELETE FROM cairn_thread_labels", &[]).map_err(&op)?;
    let mut after = String::new();
    let mut threads = 0_u64;
    loop {
        let rows = tx
            .query(
                "SELECT id, record FROM cairn_threads WHERE id > $1 ORDER BY id LIMIT $2",
                &[&after, &to_db(MIGRATION_BATCH_THREADS)?],
            )
            .map_err(&op)?;
        let mut rows_of = LabelRows::default();
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: &str = row.get(0);
            after = key.to_owned();
            // A damaged record is left out (reads of it and verify report it).
            match ThreadId::new(key)
                .and_then(|id| Ok((id.clone(), decode_thread(&id, row.get(1))?)))
            {
                Ok(record) => records.push(record),
                Err(error) => tracing::warn!(key, %error, "a thread record left unindexed"),
            }
        }
        for (id, record) in &records {
            rows_of.push(id, None, &record.labels);
        }
        if let Some((sql, params)) = rows_of.insert() {
            tx.execute(sql, &params).map_err(&op)?;
        }
        threads += rows.len() as u64;
        if (rows.len() as u64) < MIGRATION_BATCH_THREADS {
            break;
        }
    }
    tx.execute(
        "UPDATE cairn_meta SET value = $1 WHERE key = 'format_version' AND value < $1",
        &[&WITH_LABELS],
    )
    .map_err(&op)?;
    tx.commit().map_err(&op)?;
    tracing::info!(threads, "filled the thread label table: format 5");
    Ok(())
}

/// The label rows a group rewrites: those of the threads whose labels it changes, column by
/// column (for `unnest`).
#[derive(Default)]
pub(super) struct LabelRows<'r> {
    /// Threads whose rows are replaced.
    cleared: Vec<&'r str>,
    threads: Vec<&'r str>,
    keys: Vec<&'r str>,
    values: Vec<&'r str>,
}

impl<'r> LabelRows<'r> {
    /// Rewrites `id`'s rows if its labels go from `old` (`None`: a new thread) to `new`.
    pub(super) fn push(&mut self, id: &'r ThreadId, old: Option<&Labels>, new: &'r Labels) {
        if old.map_or(new.is_empty(), |old| old == new) {
            return;
        }
        if old.is_some() {
            self.cleared.push(id.as_str());
        }
        for (key, value) in new {
            self.threads.push(id.as_str());
            self.keys.push(key);
            self.values.push(value);
        }
    }

    /// The statement that inserts the new rows, if any.
    fn insert(&self) -> Option<Sql<'_>> {
        (!self.threads.is_empty()).then(|| -> Sql<'_> {
            (
                "INSERT INTO cairn_thread_labels (thread, key, value) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[])",
                vec![&self.threads, &self.keys, &self.values],
            )
        })
    }

    /// Appends the statements (the old rows removed, then the new ones inserted) to a group's.
    pub(super) fn statements<'s>(&'s self, out: &mut Vec<Sql<'s>>) {
        if !self.cleared.is_empty() {
            out.push((
                "DELETE FROM cairn_thread_labels WHERE thread = ANY($1)",
                vec![&self.cleared],
            ));
        }
        out.extend(self.insert());
    }
}

/// Checks the label table and the `status` column against `records` (every decodable thread
/// record), both ways.
///
/// # Errors
/// Connection errors.
pub(crate) fn verify(
    client: &mut Client<'_>,
    records: &BTreeMap<String, ThreadRecord>,
    problems: &mut Vec<Problem>,
) -> Result<(), Error> {
    let op = pg_error("verify");
    let mut want: BTreeSet<(String, String, String)> = BTreeSet::new();
    for (id, record) in records {
        for (k, v) in &record.labels {
            want.insert((id.clone(), k.clone(), v.clone()));
        }
    }
    let mut problem = |table: &'static str, thread: &str, detail: String| {
        problems.push(Problem { table, thread: ThreadId::new(thread).ok(), seq: None, detail });
    };
    let rows = client
        .query("SELECT thread, key, value FROM cairn_thread_labels ORDER BY thread, key", &[])
        .map_err(&op)?;
    for row in rows {
        let (thread, k, v): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        let detail = format!("stale row: thread {thread} has no label {k}={v}");
        if !want.remove(&(thread.clone(), k, v)) {
            problem(table::THREADS_BY_LABEL, &thread, detail);
        }
    }
    for (thread, k, v) in want {
        problem(table::THREADS_BY_LABEL, &thread, format!("missing row: {thread} has {k}={v}"));
    }
    for row in client.query("SELECT id, status FROM cairn_threads", &[]).map_err(&op)? {
        let (id, status): (String, String) = (row.get(0), row.get(1));
        if let Some(record) = records.get(&id)
            && record.status.to_string() != status
        {
            let detail = format!("status column {status}, the record says {}", record.status);
            problem(table::THREADS_BY_STATUS, &id, detail);
        }
    }
    Ok(())
}
