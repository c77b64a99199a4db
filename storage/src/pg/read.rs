//! Reads, each one query on a reader's connection; every record is decoded (CRC checked) and
//! checked against the columns that locate it.

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::events::RunRow;
use super::pool::Conn;

use super::{corrupt, from_db, pg_error, to_db};
use crate::checkpoint::{Checkpoint, CheckpointInfo};
use crate::codec::{self, table};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::limits::{self, READ_LIMIT_MAX};
use crate::lock::LockRecord;
use crate::store::{CheckpointFilter, Page, ThreadFilter};
use crate::thread::ThreadRecord;

pub(crate) fn decode_thread(id: &ThreadId, bytes: &[u8]) -> Result<ThreadRecord, Error> {
    let stored =
        codec::decode_stored_thread(bytes).map_err(|e| codec::locate(e, Some(id), None))?;
    let mismatch = (&stored.record.id != id)
        .then(|| format!("row {id} holds the record of thread {}", stored.record.id));
    codec::key_agrees(mismatch, table::THREADS, Some(id), None)?;
    Ok(stored.record)
}

/// Events of `id` with `after < seq <= to` (at most `limit`), without gaps.
///
/// The thread's record and its events are read by one statement, so from one snapshot: read
/// apart, a deletion or a prune committed between the two reads would leave the record's last
/// seq pointing at events already gone, a gap that only looks like corruption.
pub(crate) async fn read_since(
    client: &Conn,
    id: &ThreadId,
    after: Seq,
    limit: usize,
    to: Option<Seq>,
) -> Result<Vec<Event>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let upto = after.0.saturating_add(limit as u64).min(to.map_or(u64::MAX, |t| t.0));
    let mut rows = query(
        client,
        concat!(
            "SELECT 0 AS part, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, \
             NULL::bigint, record FROM cairn_threads WHERE id = $1 \
             UNION ALL SELECT 1, r.* FROM (",
            super::events::rows_of_thread!(),
            ") r ORDER BY 1, 3"
        ),
        &[&id.as_str(), &to_db(after.0)?, &to_db(upto)?],
    )
    .await
    .map_err(pg_error("read events"))?;
    let record = match rows.first() {
        Some(row) if row.get::<_, i32>(0) == 0 => decode_thread(id, row.get(6))?,
        _ => return Err(Error::UnknownThread(id.clone())),
    };
    rows.remove(0);
    let first_seq = record.first_seq;
    if after.0.saturating_add(1) < first_seq.0 {
        return Err(Error::Pruned { thread: id.clone(), first_available: first_seq });
    }
    let last = record.last.map_or(0, |b| b.seq.0);
    let end = last.min(upto);
    if end <= after.0 {
        return Ok(Vec::new());
    }
    // One snapshot: no event past the record's last (they commit together); keep to it anyway.
    let mut out = Vec::with_capacity(usize::try_from(end - after.0).unwrap_or(0));
    'rows: for row in &rows {
        for event in super::events::decode_row(&RunRow::of(row, 1))? {
            let seq = event.bookmark.seq.0;
            if seq <= after.0 {
                continue;
            }
            if seq > end {
                break 'rows;
            }
            let want = after.0 + 1 + out.len() as u64;
            let mismatch = (&event.thread != id || seq != want)
                .then(|| format!("seq {want} of {id} is missing or holds another event"));
            codec::key_agrees(mismatch, table::EVENTS, Some(id), Some(Seq(want)))?;
            out.push(event);
        }
    }
    if out.len() as u64 != end - after.0 {
        let want = after.0 + 1 + out.len() as u64;
        return Err(corrupt(
            table::EVENTS,
            Some(id),
            Some(Seq(want)),
            format!("seq {want} of {id} is missing (the thread's last seq is {last})"),
        ));
    }
    Ok(out)
}

/// The global feed: events with lsn above `after`, in lsn order.
pub(crate) async fn read_all_since(
    client: &Conn,
    after: Lsn,
    limit: usize,
) -> Result<Vec<Event>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let rows = query(
        client,
        // Below the watermark only: an lsn above it may still be taken by a transaction
        // that commits later (`xid.rs`); a row's lsns are all of one transaction.
        super::events::rows_after_lsn!(below_watermark),
        &[&to_db(after.0)?, &to_db(limit as u64)?],
    )
    .await
    .map_err(pg_error("read the log"))?;
    super::events::after_lsn(&rows, after.0, limit)
}

/// Payload bytes, checked against their hash.
pub(crate) async fn payload(client: &Conn, r: &PayloadRef) -> Result<Vec<u8>, Error> {
    let row =
        query_opt(client, "SELECT bytes FROM cairn_payloads WHERE hash = $1", &[&&r.hash[..]])
            .await
            .map_err(pg_error("read payload"))?
            .ok_or(Error::MissingPayload(*r))?;
    let bytes: Vec<u8> = row.get(0);
    let mismatch =
        (PayloadRef::of(&bytes) != *r).then(|| format!("payload {r} does not hash to its key"));
    codec::key_agrees(mismatch, table::PAYLOADS, None, None)?;
    Ok(bytes)
}

/// A checkpoint's metadata, checked against its row.
pub(crate) fn decode_info(id: i64, bytes: &[u8]) -> Result<CheckpointInfo, Error> {
    let info = codec::decode_checkpoint(bytes)?;
    let mismatch =
        (info.id.0 != from_db(id)?).then(|| format!("row {id} holds checkpoint {}", info.id));
    codec::key_agrees(mismatch, table::CHECKPOINTS, Some(&info.thread), None)?;
    Ok(info)
}

/// A whole checkpoint row.
fn decode_checkpoint(id: i64, info: &[u8], snapshot: &[u8]) -> Result<Checkpoint, Error> {
    let info = decode_info(id, info)?;
    let (stored_id, snapshot) = codec::decode_snapshot(snapshot)
        .map_err(|e| codec::locate(e, Some(&info.thread), Some(Seq(info.id.0))))?;
    let mismatch = (stored_id != info.id || snapshot.len() as u64 != info.snapshot_len)
        .then(|| format!("the snapshot of checkpoint {} is another one's or cut", info.id));
    codec::key_agrees(mismatch, table::SNAPSHOTS, Some(&info.thread), None)?;
    Ok(info.with_snapshot(snapshot))
}

pub(crate) async fn checkpoint(
    client: &Conn,
    id: CheckpointId,
) -> Result<Option<Checkpoint>, Error> {
    let row = query_opt(
        client,
        "SELECT id, info, snapshot FROM cairn_checkpoints WHERE id = $1",
        &[&to_db(id.0)?],
    )
    .await
    .map_err(pg_error("read checkpoint"))?;
    row.map(|r| decode_checkpoint(r.get(0), r.get(1), r.get(2))).transpose()
}

pub(crate) async fn checkpoint_exists(client: &Conn, id: CheckpointId) -> Result<bool, Error> {
    Ok(query_opt(client, "SELECT 1 FROM cairn_checkpoints WHERE id = $1", &[&to_db(id.0)?])
        .await
        .map_err(pg_error("read checkpoint"))?
        .is_some())
}

pub(crate) async fn latest_checkpoint_at_or_before(
    client: &Conn,
    thread: &ThreadId,
    seq: Seq,
) -> Result<Option<Checkpoint>, Error> {
    let row = query_opt(
        client,
        "SELECT id, info, snapshot FROM cairn_checkpoints WHERE thread = $1 AND covers_seq <= $2 \
             ORDER BY covers_seq DESC, id DESC LIMIT 1",
        &[&thread.as_str(), &i64::try_from(seq.0).unwrap_or(i64::MAX)],
    )
    .await
    .map_err(pg_error("read checkpoint"))?;
    let Some(row) = row else { return Ok(None) };
    let found = decode_checkpoint(row.get(0), row.get(1), row.get(2))?;
    let mismatch = (&found.thread != thread || found.covers.seq > seq)
        .then(|| format!("checkpoint {} is not one of {thread}'s at or before {seq}", found.id));
    codec::key_agrees(mismatch, table::CHECKPOINTS, Some(thread), None)?;
    Ok(Some(found))
}

/// Checkpoints newest first, filtered.
pub(crate) async fn list_checkpoints(
    client: &Conn,
    filter: &CheckpointFilter,
    page: Page,
) -> Result<Vec<CheckpointInfo>, Error> {
    limits::check("READ_LIMIT_MAX", page.limit, READ_LIMIT_MAX)?;
    let thread = filter.thread.as_ref().map(ThreadId::as_str);
    let workflow = filter.workflow_id.as_deref();
    let tags: Vec<&str> = filter.any_tags.iter().map(String::as_str).collect();
    let rows = query(
        client,
        "SELECT id, info FROM cairn_checkpoints c \
             WHERE ($1::text IS NULL OR thread = $1) AND ($2::text IS NULL OR workflow = $2) \
               AND (cardinality($3::text[]) = 0 OR EXISTS \
                    (SELECT 1 FROM cairn_checkpoint_tags t WHERE t.id = c.id AND t.tag = ANY($3))) \
             ORDER BY id DESC",
        &[&thread, &workflow, &tags],
    )
    .await
    .map_err(pg_error("list checkpoints"))?;
    let infos = rows.iter().map(|row| decode_info(row.get(0), row.get(1)));
    page.cut(infos, |info| filter.kind.is_none_or(|k| info.kind == k))
}

/// A listing by labels (`labels.rs`), driven by `cairn_thread_labels_by_label`: the threads with the
/// driving label (`$1` = `$2`, the most selective, `labels::driving_label`), in id order, that also have every other label (`$6` keys, `$7`
/// values), in status `$3` and workflow `$4` if given, after the cursor `$5`; `$8` rows after
/// skipping `$9`.
const BY_LABELS: &str = "SELECT t.id, t.record FROM cairn_thread_labels l \
     JOIN cairn_threads t ON t.id = l.thread \
     WHERE l.key = $1 AND l.value = $2 \
     AND ($3::text IS NULL OR t.status = $3) AND ($4::text IS NULL OR t.workflow = $4) \
     AND ($5::text IS NULL OR l.thread > $5) \
     AND (SELECT count(*) FROM unnest($6::text[], $7::text[]) AS f(key, value) \
          WHERE EXISTS (SELECT 1 FROM cairn_thread_labels o \
                        WHERE o.thread = l.thread AND o.key = f.key AND o.value = f.value)) \
         = cardinality($6::text[]) \
     ORDER BY l.thread LIMIT $8 OFFSET $9";

/// Threads by id, filtered, skipping `page.offset` matches: cut in SQL, through the label
/// index when the filter names labels (`labels.rs`), else through the status index.
pub(crate) async fn list_threads(
    client: &Conn,
    filter: &ThreadFilter,
    page: Page,
) -> Result<Vec<ThreadRecord>, Error> {
    limits::check("READ_LIMIT_MAX", page.limit, READ_LIMIT_MAX)?;
    select_threads(client, filter, None, page).await
}

/// Threads matching `filter` with ids after `after` in the table's id order, at most `limit`:
/// the cursor is a bound on the key the listing walks, so a page reads from there.
pub(crate) async fn list_threads_after(
    client: &Conn,
    filter: &ThreadFilter,
    after: Option<&ThreadId>,
    limit: usize,
) -> Result<Vec<ThreadRecord>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    select_threads(client, filter, after, Page { limit, offset: 0 }).await
}

async fn select_threads(
    client: &Conn,
    filter: &ThreadFilter,
    after: Option<&ThreadId>,
    page: Page,
) -> Result<Vec<ThreadRecord>, Error> {
    let status = filter.status.map(|s| s.to_string());
    let workflow = filter.workflow_id.as_deref();
    let cursor = after.map(ThreadId::as_str);
    let (limit, offset) = (to_db(page.limit as u64)?, to_db(page.offset as u64)?);
    let rows = if !filter.labels.is_empty() {
        let driving = super::labels::driving_label(client, &filter.labels, cursor).await?;
        let (key, value) = &filter.labels[driving];
        let rest = filter.labels.iter().enumerate().filter(|(i, _)| *i != driving);
        let (keys, values): (Vec<&str>, Vec<&str>) =
            rest.map(|(_, (k, v))| (k.as_str(), v.as_str())).unzip();
        let params: [&(dyn ToSql + Sync); 9] =
            [key, value, &status, &workflow, &cursor, &keys, &values, &limit, &offset];
        query(client, BY_LABELS, &params).await
    } else {
        query(
            client,
            "SELECT id, record FROM cairn_threads \
                 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR workflow = $2) \
                 AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $4 OFFSET $5",
            &[&status, &workflow, &cursor, &limit, &offset],
        )
        .await
    }
    .map_err(pg_error("list threads"))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let key: &str = row.get(0);
        let id = ThreadId::new(key).map_err(|e| {
            corrupt(table::THREADS, None, None, format!("key {key:?} is not a thread id: {e}"))
        })?;
        let record = decode_thread(&id, row.get(1))?;
        // The index narrows; the record decides (verify reports a row that disagrees).
        if filter.labels_match(&record) {
            out.push(record);
        }
    }
    Ok(out)
}

pub(crate) async fn locks(client: &Conn) -> Result<Vec<LockRecord>, Error> {
    let rows = query(client, "SELECT name, record FROM cairn_locks ORDER BY name", &[])
        .await
        .map_err(pg_error("read locks"))?;
    rows.iter().map(|r| decode_lock(r.get(0), r.get(1))).collect()
}

pub(crate) fn decode_lock(name: &str, bytes: &[u8]) -> Result<LockRecord, Error> {
    let lock = codec::decode_lock(bytes)?;
    let mismatch = (lock.name != name).then(|| format!("row {name:?} holds lock {:?}", lock.name));
    codec::key_agrees(mismatch, table::LOCKS, None, None)?;
    Ok(lock)
}

/// Runs `sql` (prepared once per connection) with `params`.
pub(crate) async fn query(
    client: &Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query(&statement, params).await
}

/// Runs `sql` (prepared once per connection) with `params`: its one row, if any.
pub(crate) async fn query_opt(
    client: &Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query_opt(&statement, params).await
}
