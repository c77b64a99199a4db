//! The wake index: `cairn_threads.ready_at`, the time from which a thread may need an engine
//! other than one driving it, so that a worker looking for work reads only the threads due
//! (by the index `(workflow, ready_at)`) instead of every unfinished thread.
//!
//! `ready_at` is a filter copied from what the writer knows when it writes the thread row, never
//! a source of truth: a worker reads the record of a due thread and decides from it (and from
//! the log) as before. An unknown time is 0 ("look now"), so a missing hint costs a read per
//! look, never a thread nobody looks at. NULL only for a finished thread or a parked one that
//! waits for someone to act on it ([`Wake::Never`]) without a lease.

use super::blocking::Client;
use super::pool::Conn;

use super::read::decode_thread;
use super::{pg_error, to_db};
use crate::batch::Wake;
use crate::error::Error;
use crate::ids::ThreadId;
use crate::store::DueThread;
use crate::thread::{ThreadRecord, ThreadStatus};

/// Added to a database created before the index: existing rows get 0 (look now), finished
/// ones NULL. In one transaction with the column, so no engine sees the column half filled.
const MIGRATE: &str = "
ALTER TABLE cairn_threads ADD COLUMN IF NOT EXISTS ready_at bigint DEFAULT 0;
UPDATE cairn_threads SET ready_at = NULL
 WHERE status IN ('completed', 'failed', 'cancelled', 'timed_out') AND ready_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS cairn_threads_by_ready_at ON cairn_threads (workflow, ready_at)
 WHERE ready_at IS NOT NULL;
";

/// Adds the column and its index to a database that lacks them (idempotent; run at open).
///
/// # Errors
/// Connection errors.
pub(crate) fn prepare(client: &mut Client<'_>) -> Result<(), Error> {
    if !super::schema::has_column(client, "cairn_threads", "ready_at")? {
        let tx = client.transaction().map_err(pg_error("begin"))?;
        tx.batch_execute(MIGRATE).map_err(pg_error("add the wake index"))?;
        tx.commit().map_err(pg_error("commit"))?;
    }
    Ok(())
}

/// The `ready_at` of a thread row written as `record`, with the hint of the last batch that
/// wrote it (`None`: that batch gave none).
pub(crate) fn ready_at(record: &ThreadRecord, hint: Option<Wake>) -> Result<Option<i64>, Error> {
    // A thread in a queue's line needs an admission, not an engine's look (`docs/queues.md`).
    if record.status.is_terminal() || record.status == ThreadStatus::Queued {
        return Ok(None);
    }
    let lease = record.lease.as_ref().map(|l| l.expires_at_ms);
    // A parked thread needs an engine only at its timer or deadline, whoever holds its lease
    // (a live holder fires its own timer; a dead one's lease has lapsed by then or lapses
    // soon after, and the look takes over): its hint alone decides. A lapsed lease would
    // otherwise leave it due for good, read again by every look.
    let parked = matches!(
        record.status,
        ThreadStatus::Sleeping
            | ThreadStatus::WaitingInput
            | ThreadStatus::Paused
            | ThreadStatus::Blocked
    );
    let at = match (hint, lease) {
        (Some(Wake::Never), _) if parked => return Ok(None),
        (Some(Wake::At(due)), _) if parked => due,
        (Some(Wake::Never), None) => return Ok(None),
        (Some(Wake::Never), Some(lapses)) | (None, Some(lapses)) => lapses,
        (Some(Wake::At(due)), Some(lapses)) => due.min(lapses),
        (Some(Wake::At(due)), None) => due,
        (None, None) => 0,
    };
    to_db(at).map(Some)
}

/// The hint `wakes` gives `thread` (the last one, if several).
pub(crate) fn hint_for(wakes: &[(ThreadId, Wake)], thread: &ThreadId) -> Option<Wake> {
    wakes.iter().rev().find(|(id, _)| id == thread).map(|(_, wake)| *wake)
}

/// Unfinished threads of `workflows` due by the database's clock plus `horizon_ms`, soonest
/// first, after `after` in `(ready_at, id)` order, at most `limit`.
///
/// # Errors
/// Connection errors; a record that fails its checks.
pub(crate) async fn due_threads(
    client: &Conn,
    workflows: &[String],
    horizon_ms: u64,
    after: Option<&(u64, ThreadId)>,
    limit: usize,
) -> Result<Vec<DueThread>, Error> {
    crate::limits::check("READ_LIMIT_MAX", limit, crate::limits::READ_LIMIT_MAX)?;
    let (from_at, from_id) = match after {
        Some((at, id)) => (to_db(*at)?, id.as_str()),
        None => (-1, ""),
    };
    let rows = super::read::query(
        client,
        "SELECT id, record, ready_at FROM cairn_threads WHERE workflow = ANY($1) \
             AND ready_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $2 \
             AND (ready_at, id) > ($3, $4) ORDER BY ready_at, id LIMIT $5",
        &[&workflows, &to_db(horizon_ms)?, &from_at, &from_id, &to_db(limit as u64)?],
    )
    .await
    .map_err(pg_error("read due threads"))?;
    rows.iter()
        .map(|row| {
            let key: &str = row.get(0);
            let id = ThreadId::new(key).map_err(|e| {
                Error::corrupted(
                    crate::codec::table::THREADS,
                    format!("key {key:?} is not a thread id: {e}"),
                )
            })?;
            let record = decode_thread(&id, row.get(1))?;
            let ready_at_ms = u64::try_from(row.get::<_, i64>(2)).unwrap_or(0);
            Ok(DueThread { ready_at_ms, record })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::{Lease, WorkflowRef};

    fn record(status: ThreadStatus, lease: Option<u64>) -> ThreadRecord {
        let workflow = WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() };
        let mut r = ThreadRecord::new(ThreadId::new("t").unwrap(), workflow, 0);
        r.status = status;
        r.lease = lease.map(|expires_at_ms| Lease { owner: "o".into(), expires_at_ms });
        r
    }

    #[test]
    fn ready_at_is_the_soonest_known_need_and_zero_when_unknown() {
        use ThreadStatus::*;
        assert_eq!(ready_at(&record(Completed, Some(9)), Some(Wake::At(5))).unwrap(), None);
        assert_eq!(ready_at(&record(Running, None), None).unwrap(), Some(0));
        assert_eq!(ready_at(&record(Running, Some(900)), None).unwrap(), Some(900));
        assert_eq!(ready_at(&record(Sleeping, None), Some(Wake::At(50))).unwrap(), Some(50));
        // Parked: the hint alone, whoever holds the lease.
        assert_eq!(ready_at(&record(Sleeping, Some(40)), Some(Wake::At(50))).unwrap(), Some(50));
        assert_eq!(ready_at(&record(WaitingInput, None), Some(Wake::Never)).unwrap(), None);
        assert_eq!(ready_at(&record(Paused, Some(70)), Some(Wake::Never)).unwrap(), None);
        // Parked without a hint: as anything else.
        assert_eq!(ready_at(&record(Paused, Some(70)), None).unwrap(), Some(70));
        assert_eq!(ready_at(&record(Running, Some(40)), Some(Wake::At(50))).unwrap(), Some(40));
    }
}
