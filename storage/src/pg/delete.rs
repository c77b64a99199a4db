//! Whole-thread deletion in the group's SQL transaction (see [`crate::Maintenance::delete_thread`]
//! and `storage/src/delete.rs`): every row of the thread is read and checked, then removed, so
//! a crash or a failed commit leaves the thread whole.

use tokio_postgres::types::ToSql;

use super::read::{decode_info, decode_thread};
use super::tx::Tx;
use super::{pg_error, to_db};
use crate::checkpoint::CheckpointInfo;
use crate::delete::{DeleteOptions, Deleted};
use crate::error::Error;
use crate::ids::ThreadId;

/// Deletes `thread`; `None` when there is no such thread.
pub(super) fn delete_thread(
    tx: &mut Tx<'_, '_>,
    thread: &ThreadId,
    options: DeleteOptions,
) -> Result<Option<Deleted>, Error> {
    let id = thread.as_str();
    let Some(row) = tx
        .query_opt("SELECT record FROM cairn_threads WHERE id = $1 FOR UPDATE", &[&id])
        .map_err(pg_error("read thread"))?
    else {
        return Ok(None);
    };
    let record = decode_thread(thread, row.get(0))?;
    if !options.force && !record.status.is_terminal() {
        return Err(Error::Unfinished { thread: thread.clone(), status: record.status });
    }
    // Every event is decoded and checked first (a damaged one rejects the delete), and the
    // payloads they reference gathered.
    let referenced = super::events::referenced_payloads(tx, thread)?;
    tx.execute("DELETE FROM cairn_correlations WHERE thread = $1", &[&id])
        .map_err(pg_error("delete correlations"))?;
    let events = super::events::delete_all(tx, thread)?;
    let checkpoints = remove_checkpoints(
        tx,
        "SELECT id, info FROM cairn_checkpoints WHERE thread = $1 FOR UPDATE",
        &[&id],
    )?;
    let locks = tx
        .execute("DELETE FROM cairn_locks WHERE owner = $1", &[&id])
        .map_err(pg_error("delete locks"))?;
    super::queues::leave(tx, thread)?;
    // Its signal inbox (`docs/format.md` §2.3) goes with it.
    tx.execute("DELETE FROM cairn_signals WHERE thread = $1", &[&id])
        .map_err(pg_error("delete signals"))?;
    // The thread's events are gone: a payload that no remaining record holds the hash of is
    // referenced by nobody (a false match keeps it; see `storage/src/delete.rs`). Other
    // writers commit at the same time: an append that finds the payload stored, and so does
    // not write it, holds a share lock on its row until it commits (`group.rs`). The row is
    // locked here first, and the check runs after, so it sees every event whose writer found
    // the payload; one that comes after the lock finds it gone and writes it again.
    let mut payloads = 0;
    for hash in &referenced {
        tx.query("SELECT 1 FROM cairn_payloads WHERE hash = $1 FOR UPDATE", &[&&hash[..]])
            .map_err(pg_error("lock payload"))?;
        payloads += tx
            .execute(
                "DELETE FROM cairn_payloads WHERE hash = $1 AND NOT EXISTS \
                 (SELECT 1 FROM cairn_event_batches WHERE position($1 IN frames) > 0)",
                &[&&hash[..]],
            )
            .map_err(pg_error("delete payloads"))?;
    }
    tx.execute("DELETE FROM cairn_thread_labels WHERE thread = $1", &[&id])
        .map_err(pg_error("delete thread labels"))?;
    tx.execute("DELETE FROM cairn_threads WHERE id = $1", &[&id])
        .map_err(pg_error("delete thread"))?;
    Ok(Some(Deleted { status: record.status, events, checkpoints, locks, payloads }))
}

/// Removes the checkpoints `select` finds (each read and checked first); their number.
pub(super) fn remove_checkpoints(
    tx: &mut Tx<'_, '_>,
    select: &'static str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, Error> {
    let rows = tx.query(select, params).map_err(pg_error("read checkpoints"))?;
    let infos: Vec<CheckpointInfo> =
        rows.iter().map(|r| decode_info(r.get(0), r.get(1))).collect::<Result<_, _>>()?;
    delete_infos(tx, &infos)?;
    Ok(infos.len() as u64)
}

pub(super) fn delete_infos(tx: &mut Tx<'_, '_>, infos: &[CheckpointInfo]) -> Result<(), Error> {
    for info in infos {
        let id = to_db(info.id.0)?;
        tx.execute("DELETE FROM cairn_checkpoints WHERE id = $1", &[&id])
            .map_err(pg_error("remove checkpoint"))?;
        tx.execute("DELETE FROM cairn_checkpoint_tags WHERE id = $1", &[&id])
            .map_err(pg_error("remove checkpoint"))?;
    }
    Ok(())
}
