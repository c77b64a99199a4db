//! The tables of a Cairn database in PostgreSQL, created once, and the format check at open.
//!
//! Records are the same CRC-framed records as in a redb file (`docs/format.md`), kept in
//! `bytea`; the other columns are keys and filters copied out of them, checked against the
//! record on every read.

use super::blocking::Client;

use super::pg_error;
use crate::error::Error;

/// The format of a database this build writes (`docs/format.md`, "PostgreSQL"): 6 keeps the
/// log as one row per run of a thread's events (`events.rs`); 5 and older, one row per event;
/// 7 changes no table, only what records may hold (a queue record's flow-control trailer, an
/// event body's recovery kind), so that a build that cannot read those refuses the database.
pub const PG_FORMAT_VERSION: u16 = 7;

/// The format this build writes, as stored.
const FORMAT_VERSION: u16 = PG_FORMAT_VERSION;

/// The schema, idempotent.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cairn_meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS cairn_threads (
    id text PRIMARY KEY,
    status text NOT NULL,
    workflow text NOT NULL,
    record bytea NOT NULL,
    last_xid bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS cairn_threads_by_status ON cairn_threads (status, id);
CREATE INDEX IF NOT EXISTS cairn_threads_by_workflow ON cairn_threads (status, workflow, id);
CREATE TABLE IF NOT EXISTS cairn_checkpoints (
    id bigint PRIMARY KEY,
    thread text NOT NULL,
    covers_seq bigint NOT NULL,
    workflow text NOT NULL,
    info bytea NOT NULL,
    snapshot bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS cairn_checkpoints_by_thread ON cairn_checkpoints (thread, covers_seq, id);
CREATE TABLE IF NOT EXISTS cairn_checkpoint_tags (
    tag text NOT NULL,
    id bigint NOT NULL,
    PRIMARY KEY (tag, id)
);
CREATE TABLE IF NOT EXISTS cairn_payloads (
    hash bytea PRIMARY KEY,
    bytes bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS cairn_correlations (
    correlation text NOT NULL,
    lsn bigint NOT NULL,
    thread text NOT NULL,
    seq bigint NOT NULL,
    at_ms bigint NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (correlation, lsn)
);
CREATE INDEX IF NOT EXISTS cairn_correlations_by_thread ON cairn_correlations (thread, seq);
CREATE TABLE IF NOT EXISTS cairn_locks (
    name text PRIMARY KEY,
    owner text NOT NULL,
    record bytea NOT NULL
);
";

/// The meta row keys.
pub(crate) const MAGIC: &str = "cairn_magic";
pub(crate) const FORMAT: &str = "format_version";

/// The value of the magic row ("CAIRNDB" read as a number).
const MAGIC_VALUE: i64 = 0x0043_4149_524e_4442;

/// Creates the tables if they are missing and checks the format of the ones found.
///
/// # Errors
/// [`Error::NewerFormat`] for a database written by a newer Cairn (an older one is migrated:
/// `correlations.rs`); [`Error::NotCairn`]-like
/// [`Error::Corrupted`] when the meta rows disagree; connection errors.
pub(crate) fn prepare(client: &mut Client<'_>) -> Result<(), Error> {
    create(client, SCHEMA, "create the schema")?;
    create(client, super::events::SCHEMA, "create the event table")?;
    super::events::keep_runs_inline(client)?;
    super::wake::prepare(client)?;
    client.batch_execute(super::resolve::SCHEMA).map_err(pg_error("create the commit marks"))?;
    add_last_xid(client)?;
    super::signals::prepare(client)?;
    super::queues::prepare(client)?;
    create(client, super::labels::SCHEMA, "create the thread label table")?;
    let tx = client.transaction().map_err(pg_error("begin"))?;
    for (key, value) in [(MAGIC, MAGIC_VALUE), (FORMAT, i64::from(FORMAT_VERSION))] {
        tx.execute(
            "INSERT INTO cairn_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            &[&key, &value],
        )
        .map_err(pg_error("write meta"))?;
    }
    let read = |key: &str| {
        let row = tx.query_one("SELECT value FROM cairn_meta WHERE key = $1", &[&key]);
        row.map(|row| row.get::<_, i64>(0)).map_err(pg_error("read meta"))
    };
    let (magic, format) = (read(MAGIC)?, read(FORMAT)?);
    tx.commit().map_err(pg_error("commit"))?;
    if magic != MAGIC_VALUE {
        return Err(Error::corrupted(
            crate::codec::table::META,
            format!("the magic row holds {magic:#x}, not Cairn's"),
        ));
    }
    if format > i64::from(FORMAT_VERSION) {
        return Err(Error::NewerFormat {
            found: u16::try_from(format).unwrap_or(u16::MAX),
            supported: FORMAT_VERSION,
        });
    }
    // Format 6 moved the log into runs: done first, as the older steps read the log from there.
    super::events::migrate(client)?;
    if format < 2 {
        super::correlations::migrate(client)?;
    }
    // Formats 3 (signals) and 4 (queues) only added tables, created above, empty.
    if format < 3 {
        raise_format(client, 3, "migrate to format 3")?;
    }
    if format < 4 {
        raise_format(client, 4, "migrate to format 4")?;
    }
    if format < 5 {
        super::labels::migrate(client)?;
    }
    if format < 6 {
        raise_format(client, 6, "migrate to format 6")?;
    }
    if format < 7 {
        raise_format(client, 7, "migrate to format 7")?;
    }
    check_lsn_space(client)
}

/// Sets the format version to `to` unless it is there already (the migration `op`).
///
/// # Errors
/// Connection errors.
fn raise_format(client: &mut Client<'_>, to: i64, op: &'static str) -> Result<(), Error> {
    client
        .execute(
            "UPDATE cairn_meta SET value = $1 WHERE key = 'format_version' AND value < $1",
            &[&to],
        )
        .map_err(pg_error(op))?;
    Ok(())
}

/// Runs `ddl` (`CREATE ... IF NOT EXISTS` statements). Two processes creating the same table at
/// once may collide in the catalog (one gets a unique violation): the loser finds the table on
/// its next try.
///
/// # Errors
/// Connection errors, or the third collision.
fn create(client: &mut Client<'_>, ddl: &str, op: &'static str) -> Result<(), Error> {
    let mut tries = 0;
    while let Err(e) = client.batch_execute(ddl) {
        tries += 1;
        if tries == 3 {
            return Err(pg_error(op)(e));
        }
    }
    Ok(())
}

/// Whether `table` of the current schema has `column` (a column a later build added).
///
/// # Errors
/// Connection errors.
pub(crate) fn has_column(
    client: &mut Client<'_>,
    table: &str,
    column: &str,
) -> Result<bool, Error> {
    let row = client
        .query_opt(
            "SELECT 1 FROM information_schema.columns \
             WHERE table_name = $1 AND column_name = $2 AND table_schema = current_schema()",
            &[&table, &column],
        )
        .map_err(pg_error("read the schema"))?;
    Ok(row.is_some())
}

/// A database made before lsns came from transaction ids gets the column that says which
/// transaction last wrote a thread row (`xid.rs`); 0 for the rows it has: older than any
/// transaction to come.
fn add_last_xid(client: &mut Client<'_>) -> Result<(), Error> {
    if !has_column(client, "cairn_threads", "last_xid")? {
        client
            .batch_execute(
                "ALTER TABLE cairn_threads ADD COLUMN IF NOT EXISTS last_xid bigint NOT NULL DEFAULT 0",
            )
            .map_err(pg_error("add the last writer column"))?;
    }
    Ok(())
}

/// The lsns and checkpoint ids in use (a database written when they were counted one by one,
/// or by transaction ids) must sit below the range of every transaction to come; they always
/// do unless one transaction wrote more than 2^20 events, which no Cairn writer did.
///
/// # Errors
/// [`Error::Corrupted`] when they do not (a new lsn could sort before an old one).
fn check_lsn_space(client: &mut Client<'_>) -> Result<(), Error> {
    let row = client
        .query_one(
            // Rows' lsn ranges do not overlap: the last row by first lsn ends highest (and the
            // index finds it).
            "SELECT coalesce((SELECT last_lsn FROM cairn_event_batches \
             ORDER BY first_lsn DESC LIMIT 1), 0), \
             (SELECT coalesce(max(id), 0) FROM cairn_checkpoints), txid_current()",
            &[],
        )
        .map_err(pg_error("read the lsns in use"))?;
    let (lsn, checkpoint): (i64, i64) = (row.get(0), row.get(1));
    let base = super::xid::base(row.get(2))?;
    let highest = u64::try_from(lsn.max(checkpoint)).unwrap_or(u64::MAX);
    if highest >= base {
        return Err(Error::corrupted(
            crate::codec::table::META,
            format!(
                "lsn or checkpoint id {highest} in use is not below the next transaction's range \
                 (from {base}): new events would sort before it"
            ),
        ));
    }
    Ok(())
}
