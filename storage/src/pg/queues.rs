//! Named queues on PostgreSQL (`docs/queues.md`, `docs/postgres.md`): the tables
//! `cairn_queues (name, record)`, `cairn_queue_members (thread, queue, record)`,
//! `cairn_queue_waiting (queue, key, rank, thread)` and `cairn_queue_dedup (queue, dedup,
//! thread)`, with the records of `docs/format.md` §2.5 in `record`.
//!
//! What a group writes is the planner's (`crate::plan_queue`); this file reads for it and
//! stores it. Several processes decide against one queue's counts one at a time: the planner
//! reads a queue through `Reads::queue` (below), which locks its row (`FOR UPDATE`) until the
//! group commits, and every decision about a queue (enqueue, admit, the release of a thread
//! that ends) reads the queue first. Under READ COMMITTED each later statement of the group
//! sees what the previous holder of the lock committed.

use std::collections::HashMap;

use super::blocking::Client;
use super::pool::Conn;

use super::tx::Tx;
use super::{corrupt, pg_error};
use crate::codec::{self, table};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::plan_queue::{QueuePlan, QueueReads, QueueWrites, WaitKey};
use crate::queue::{QueueMember, QueueState};
use crate::queue_verify::{QueueRows, member_under, queue_under};
use crate::store::Problem;

/// The tables, idempotent (run at every open).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cairn_queues (
    name text PRIMARY KEY,
    record bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS cairn_queue_members (
    thread text PRIMARY KEY,
    queue text NOT NULL,
    record bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS cairn_queue_waiting (
    queue text NOT NULL,
    key text NOT NULL,
    rank bigint NOT NULL,
    thread text NOT NULL,
    PRIMARY KEY (queue, key, rank, thread)
);
CREATE TABLE IF NOT EXISTS cairn_queue_dedup (
    queue text NOT NULL,
    dedup text NOT NULL,
    thread text NOT NULL,
    PRIMARY KEY (queue, dedup, thread)
);
";

/// Creates the tables if they are missing.
///
/// # Errors
/// Connection errors.
pub(crate) fn prepare(client: &mut Client<'_>) -> Result<(), Error> {
    client.batch_execute(SCHEMA).map_err(pg_error("create the queue tables"))
}

/// A rank (u64) as an order-preserving bigint.
fn rank_to_db(rank: u64) -> i64 {
    i64::from_ne_bytes((rank ^ (1 << 63)).to_ne_bytes())
}

fn rank_from_db(rank: i64) -> u64 {
    u64::from_ne_bytes(rank.to_ne_bytes()) ^ (1 << 63)
}

fn thread_id(raw: &str, table: &'static str) -> Result<ThreadId, Error> {
    ThreadId::new(raw)
        .map_err(|e| corrupt(table, None, None, format!("a row holds a bad thread id: {e}")))
}

/// Every queue, by name.
///
/// # Errors
/// A damaged row; connection errors.
pub(crate) async fn read_all(client: &Conn) -> Result<Vec<QueueState>, Error> {
    let rows =
        super::read::query(client, "SELECT name, record FROM cairn_queues ORDER BY name", &[])
            .await
            .map_err(pg_error("read queues"))?;
    rows.iter().map(|r| queue_under("row", r.get(0), r.get(1))).collect()
}

/// A thread's member record.
///
/// # Errors
/// A damaged row; connection errors.
pub(crate) async fn read_member(
    client: &Conn,
    thread: &ThreadId,
) -> Result<Option<QueueMember>, Error> {
    let sql = "SELECT record FROM cairn_queue_members WHERE thread = $1";
    let row = super::read::query_opt(client, sql, &[&thread.as_str()])
        .await
        .map_err(pg_error("read queue member"))?;
    row.map(|r| member_under("row", thread.as_str(), r.get(0))).transpose()
}

/// The queue rows a group has read (and locked), as its batches leave them.
#[derive(Default)]
pub(crate) struct QueueCache {
    queues: HashMap<String, Option<QueueState>>,
    members: HashMap<ThreadId, Option<QueueMember>>,
    /// The group's changes to the waiting index so far, in order.
    waiting: Vec<(WaitKey, bool)>,
    /// The group's changes to the dedup index so far, in order.
    dedup: Vec<((String, String, ThreadId), bool)>,
}

impl QueueCache {
    /// Takes in what a planned batch wrote: later batches of the group see it.
    pub(crate) fn absorb(&mut self, writes: &QueueWrites) -> Result<(), Error> {
        for (name, framed) in &writes.queues {
            let q = framed.as_deref().map(codec::decode_queue).transpose()?;
            self.queues.insert(name.clone(), q);
        }
        for (thread, framed) in &writes.members {
            let m = framed.as_deref().map(codec::decode_queue_member).transpose()?;
            self.members.insert(thread.clone(), m);
        }
        self.waiting.extend(writes.waiting.iter().cloned());
        self.dedup.extend(writes.dedup.iter().cloned());
        Ok(())
    }
}

/// Reads and locks the queue memberships of `$1`, the threads a group's batches end (each
/// leaves its queue if it is in one), in one query sent with the group's first ones
/// (`group.rs`): the planner then finds them in the cache ([`take_members`]) instead of asking
/// for each ended thread (most are in no queue).
pub(crate) const MEMBERS_SQL: &str = "SELECT thread, record FROM cairn_queue_members WHERE thread = ANY($1) ORDER BY thread FOR UPDATE";

/// Takes into `cache` the memberships of `threads` that [`MEMBERS_SQL`] read (`rows`): a
/// thread without a row is in no queue.
pub(crate) fn take_members(
    cache: &mut QueueCache,
    threads: &[&str],
    rows: &[tokio_postgres::Row],
) -> Result<(), Error> {
    for t in threads {
        cache.members.insert(ThreadId::new(*t)?, None);
    }
    for row in rows {
        let thread: &str = row.get(0);
        let member = member_under("row", thread, row.get(1))?;
        cache.members.insert(ThreadId::new(thread)?, Some(member));
    }
    Ok(())
}

/// The record `sql` selects (`FOR UPDATE`) under `key` (its `$1`), decoded by `decode`: read
/// once per group, then from `cache`.
fn read_once<K, Q, V>(
    tx: &mut Tx<'_, '_>,
    cache: &mut HashMap<K, Option<V>>,
    key: &Q,
    sql: &'static str,
    op: &'static str,
    decode: impl FnOnce(&[u8]) -> Result<V, Error>,
) -> Result<Option<V>, Error>
where
    K: std::hash::Hash + Eq + std::borrow::Borrow<Q>,
    Q: std::hash::Hash + Eq + std::fmt::Display + ToOwned<Owned = K> + ?Sized,
    V: Clone,
{
    if let Some(value) = cache.get(key) {
        return Ok(value.clone());
    }
    let row = tx.query_opt(sql, &[&key.to_string()]).map_err(pg_error(op))?;
    let value = row.map(|r| decode(r.get(0))).transpose()?;
    cache.insert(key.to_owned(), value.clone());
    Ok(value)
}

/// The planner's queue reads over a group's transaction and cache.
pub(crate) struct Reads<'c, 't, 'a, 'b> {
    /// The group's transaction.
    pub(crate) tx: &'t mut Tx<'a, 'b>,
    /// What the group's batches left.
    pub(crate) cache: &'c mut QueueCache,
}

impl QueueReads for Reads<'_, '_, '_, '_> {
    fn queue(&mut self, name: &str) -> Result<Option<QueueState>, Error> {
        const SQL: &str = "SELECT record FROM cairn_queues WHERE name = $1 FOR UPDATE";
        let read = |record: &[u8]| queue_under("row", name, record);
        read_once(self.tx, &mut self.cache.queues, name, SQL, "read queue", read)
    }

    fn queue_member(&mut self, thread: &ThreadId) -> Result<Option<QueueMember>, Error> {
        const SQL: &str = "SELECT record FROM cairn_queue_members WHERE thread = $1 FOR UPDATE";
        let read = |record: &[u8]| member_under("row", thread.as_str(), record);
        read_once(self.tx, &mut self.cache.members, thread, SQL, "read queue member", read)
    }

    fn queue_waiting(
        &mut self,
        queue: &str,
        key: &str,
        limit: usize,
    ) -> Result<Vec<(u64, ThreadId)>, Error> {
        let changed = self.cache.waiting.iter().filter(|((q, k, _, _), _)| q == queue && k == key);
        let removed = changed.filter(|(_, put)| !put).count();
        let rows = self
            .tx
            .query(
                "SELECT rank, thread FROM cairn_queue_waiting WHERE queue = $1 AND key = $2 \
                 ORDER BY rank, thread LIMIT $3",
                &[&queue, &key, &i64::try_from(limit + removed).unwrap_or(i64::MAX)],
            )
            .map_err(pg_error("read queue_waiting"))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push((rank_from_db(r.get(0)), thread_id(r.get(1), table::QUEUE_WAITING)?));
        }
        for ((q, k, rank, thread), put) in &self.cache.waiting {
            if q != queue || k != key {
                continue;
            }
            out.retain(|(r, t)| !(r == rank && t == thread));
            if *put {
                out.push((*rank, thread.clone()));
            }
        }
        out.sort();
        out.truncate(limit);
        Ok(out)
    }

    fn queue_dedup(&mut self, queue: &str, dedup: &str) -> Result<Option<ThreadId>, Error> {
        let row = self
            .tx
            .query_opt(
                "SELECT thread FROM cairn_queue_dedup WHERE queue = $1 AND dedup = $2 LIMIT 1",
                &[&queue, &dedup],
            )
            .map_err(pg_error("read queue_dedup"))?;
        let mut holder = row.map(|r| thread_id(r.get(0), table::QUEUE_DEDUP)).transpose()?;
        for ((q, d, thread), put) in &self.cache.dedup {
            if q == queue && d == dedup {
                holder = put.then(|| thread.clone());
            }
        }
        Ok(holder)
    }
}

/// Writes the queue part of a group's plans, in order.
///
/// # Errors
/// A failed statement.
pub(crate) fn write(tx: &mut Tx<'_, '_>, all: &[QueueWrites]) -> Result<(), Error> {
    let op = pg_error("write queues");
    for writes in all {
        for (name, framed) in &writes.queues {
            match framed {
                Some(bytes) => tx.execute(
                    "INSERT INTO cairn_queues (name, record) VALUES ($1, $2) \
                     ON CONFLICT (name) DO UPDATE SET record = excluded.record",
                    &[&name.as_str(), bytes],
                ),
                None => tx.execute("DELETE FROM cairn_queues WHERE name = $1", &[&name.as_str()]),
            }
            .map_err(&op)?;
        }
        for (thread, framed) in &writes.members {
            match framed {
                Some(bytes) => {
                    let m = codec::decode_queue_member(bytes)?;
                    tx.execute(
                        "INSERT INTO cairn_queue_members (thread, queue, record) \
                         VALUES ($1, $2, $3) ON CONFLICT (thread) DO UPDATE \
                         SET queue = excluded.queue, record = excluded.record",
                        &[&thread.as_str(), &m.queue.as_str(), bytes],
                    )
                }
                None => tx.execute(
                    "DELETE FROM cairn_queue_members WHERE thread = $1",
                    &[&thread.as_str()],
                ),
            }
            .map_err(&op)?;
        }
        for ((queue, key, rank, thread), put) in &writes.waiting {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                [queue, key, &rank_to_db(*rank), &thread.as_str()];
            let sql = if *put {
                "INSERT INTO cairn_queue_waiting (queue, key, rank, thread) VALUES ($1, $2, $3, $4)"
            } else {
                "DELETE FROM cairn_queue_waiting \
                 WHERE queue = $1 AND key = $2 AND rank = $3 AND thread = $4"
            };
            tx.execute(sql, &params).map_err(&op)?;
        }
        for ((queue, dedup, thread), put) in &writes.dedup {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [queue, dedup, &thread.as_str()];
            let sql = if *put {
                "INSERT INTO cairn_queue_dedup (queue, dedup, thread) VALUES ($1, $2, $3)"
            } else {
                "DELETE FROM cairn_queue_dedup WHERE queue = $1 AND dedup = $2 AND thread = $3"
            };
            tx.execute(sql, &params).map_err(&op)?;
        }
    }
    Ok(())
}

/// Releases a deleted thread's queue place, in the delete's transaction.
///
/// # Errors
/// A damaged row; a failed statement.
pub(crate) fn leave(tx: &mut Tx<'_, '_>, thread: &ThreadId) -> Result<(), Error> {
    let mut cache = QueueCache::default();
    let mut plan = QueuePlan::default();
    plan.leave(&mut Reads { tx, cache: &mut cache }, thread)?;
    let writes = plan.finish()?;
    write(tx, &[writes])
}

/// Checks every queue and member row decodes under its own key; returns the rows scanned.
///
/// # Errors
/// Connection errors.
pub(crate) fn verify(client: &mut Client<'_>, problems: &mut Vec<Problem>) -> Result<u64, Error> {
    let mut scanned = 0;
    let mut rows = QueueRows::default();
    let mut problem = |table: &'static str, thread: Option<ThreadId>, e: Error| {
        problems.push(Problem { table, thread, seq: None, detail: e.to_string() });
    };
    for row in client
        .query("SELECT name, record FROM cairn_queues", &[])
        .map_err(pg_error("verify queues"))?
    {
        scanned += 1;
        match queue_under("row", row.get(0), row.get(1)) {
            Ok(q) => {
                rows.queues.insert(q.name.clone(), q);
            }
            Err(e) => problem(table::QUEUES, None, e),
        }
    }
    for row in client
        .query("SELECT thread, record FROM cairn_queue_members", &[])
        .map_err(pg_error("verify queue members"))?
    {
        scanned += 1;
        let thread: &str = row.get(0);
        match member_under("row", thread, row.get(1)) {
            Ok(m) => rows.members.push(m),
            Err(e) => problem(table::QUEUE_MEMBERS, ThreadId::new(thread).ok(), e),
        }
    }
    for row in client
        .query("SELECT queue, key, rank, thread FROM cairn_queue_waiting", &[])
        .map_err(pg_error("verify queue waiting"))?
    {
        let (queue, key, thread): (String, String, String) = (row.get(0), row.get(1), row.get(3));
        rows.waiting.insert((queue, key, rank_from_db(row.get(2)), thread));
    }
    for row in client
        .query("SELECT queue, dedup, thread FROM cairn_queue_dedup", &[])
        .map_err(pg_error("verify queue dedup"))?
    {
        rows.dedup.insert((row.get(0), row.get(1), row.get(2)));
    }
    crate::queue_verify::check(&rows, problems);
    Ok(scanned)
}
