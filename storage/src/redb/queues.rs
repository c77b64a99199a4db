//! Named queues in a redb file (`docs/format.md` §2.5): the tables `queues` (framed
//! [`QueueState`], kind 10, by name), `queue_members` (framed [`QueueMember`], kind 11, by
//! thread), the indexes `queue_waiting` `(queue, key, rank, thread)` and `queue_dedup`
//! `(queue, dedup, thread)`, their reads, writes of a plan, the release of a deleted thread's
//! place, their check in `verify`, and the migration of a v3 file (which lacks them) to v4.
//!
//! What is written is the planner's (`crate::plan_queue`); this file stores it.

use ::redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::index::storage;
use super::tables::Tables;
use crate::codec::table;
use crate::error::Error;
use crate::ids::ThreadId;
use crate::plan_queue::QueueWrites;
use crate::queue::{QueueMember, QueueState};
use crate::queue_verify::{QueueRows, member_under, queue_under};
use crate::store::Problem;

/// Queue records by name.
pub(crate) const QUEUES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new(table::QUEUES);
/// Member records by thread.
pub(crate) const MEMBERS: TableDefinition<'_, &str, &[u8]> =
    TableDefinition::new(table::QUEUE_MEMBERS);
/// Waiting members, in admission order per key.
pub(crate) const WAITING: TableDefinition<'_, (&str, &str, u64, &str), ()> =
    TableDefinition::new(table::QUEUE_WAITING);
/// Members holding a dedup key.
pub(crate) const DEDUP: TableDefinition<'_, (&str, &str, &str), ()> =
    TableDefinition::new(table::QUEUE_DEDUP);

fn thread_id(raw: &str, table: &'static str) -> Result<ThreadId, Error> {
    ThreadId::new(raw)
        .map_err(|e| Error::corrupted(table, format!("index key holds a bad thread id: {e}")))
}

/// Every queue, by name (none in a file from before v4 not yet migrated).
pub(crate) fn read_all(txn: &ReadTransaction) -> Result<Vec<QueueState>, Error> {
    let queues = match txn.open_table(QUEUES) {
        Ok(t) => t,
        Err(::redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(Error::storage("open table", e)),
    };
    let op = storage("read queues");
    let mut out = Vec::new();
    for item in queues.iter().map_err(&op)? {
        let (k, v) = item.map_err(&op)?;
        out.push(queue_under("key", k.value(), v.value())?);
    }
    Ok(out)
}

/// A thread's member record.
pub(crate) fn read_member(
    txn: &ReadTransaction,
    thread: &ThreadId,
) -> Result<Option<QueueMember>, Error> {
    match txn.open_table(MEMBERS) {
        Ok(t) => member_in(&t, thread),
        Err(::redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(Error::storage("open table", e)),
    }
}

fn member_in(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    thread: &ThreadId,
) -> Result<Option<QueueMember>, Error> {
    let value = t.get(thread.as_str()).map_err(storage("read queue member"))?;
    value.map(|v| member_under("key", thread.as_str(), v.value())).transpose()
}

/// (`self.queue_waiting()`, `self.queue_dedup()`: [`Tables`]' own accessors of those tables.)
impl crate::plan_queue::QueueReads for Tables<'_, '_> {
    fn queue(&mut self, name: &str) -> Result<Option<QueueState>, Error> {
        let value = self.queues()?.get(name).map_err(storage("read queue"))?;
        value.map(|v| queue_under("key", name, v.value())).transpose()
    }

    fn queue_member(&mut self, thread: &ThreadId) -> Result<Option<QueueMember>, Error> {
        if self.cache.no_queue_members {
            return Ok(None);
        }
        let members = self.queue_members()?;
        if members.is_empty().map_err(storage("read queue_members"))? {
            self.cache.no_queue_members = true;
            return Ok(None);
        }
        member_in(&*members, thread)
    }

    fn queue_waiting(
        &mut self,
        queue: &str,
        key: &str,
        limit: usize,
    ) -> Result<Vec<(u64, ThreadId)>, Error> {
        let op = storage("read queue_waiting");
        let table = self.queue_waiting()?;
        let mut out = Vec::new();
        let range = table.range((queue, key, 0, "")..=(queue, key, u64::MAX, "\u{10FFFF}"));
        for item in range.map_err(&op)?.take(limit) {
            let (k, _) = item.map_err(&op)?;
            let (_, _, rank, thread) = k.value();
            out.push((rank, thread_id(thread, table::QUEUE_WAITING)?));
        }
        Ok(out)
    }

    fn queue_dedup(&mut self, queue: &str, dedup: &str) -> Result<Option<ThreadId>, Error> {
        let op = storage("read queue_dedup");
        let table = self.queue_dedup()?;
        let mut range =
            table.range((queue, dedup, "")..=(queue, dedup, "\u{10FFFF}")).map_err(&op)?;
        match range.next() {
            None => Ok(None),
            Some(item) => {
                let (k, _) = item.map_err(&op)?;
                Ok(Some(thread_id(k.value().2, table::QUEUE_DEDUP)?))
            }
        }
    }
}

impl Tables<'_, '_> {
    /// Writes a plan's queue part.
    pub(crate) fn write_queues(&mut self, writes: &QueueWrites) -> Result<(), Error> {
        let op = storage("write queues");
        for (name, framed) in &writes.queues {
            match framed {
                Some(bytes) => self.queues()?.insert(name.as_str(), bytes.as_slice()).map(drop),
                None => self.queues()?.remove(name.as_str()).map(drop),
            }
            .map_err(&op)?;
        }
        for (thread, framed) in &writes.members {
            self.cache.no_queue_members &= framed.is_none();
            match framed {
                Some(b) => self.queue_members()?.insert(thread.as_str(), b.as_slice()).map(drop),
                None => self.queue_members()?.remove(thread.as_str()).map(drop),
            }
            .map_err(&op)?;
        }
        for ((queue, key, rank, thread), put) in &writes.waiting {
            let k = (queue.as_str(), key.as_str(), *rank, thread.as_str());
            if *put {
                self.queue_waiting()?.insert(k, ()).map_err(&op)?;
            } else {
                self.queue_waiting()?.remove(k).map_err(&op)?;
            }
        }
        for ((queue, dedup, thread), put) in &writes.dedup {
            let k = (queue.as_str(), dedup.as_str(), thread.as_str());
            if *put {
                self.queue_dedup()?.insert(k, ()).map_err(&op)?;
            } else {
                self.queue_dedup()?.remove(k).map_err(&op)?;
            }
        }
        Ok(())
    }
}

/// Checks the queues: every record decodes under its own key; every member's queue exists;
/// a waiting member has its waiting entry and an admitted one none; every index entry has its
/// member; and each queue's counts (and each key's) are its members'. Returns the records
/// scanned.
pub(crate) fn verify(txn: &ReadTransaction, problems: &mut Vec<Problem>) -> Result<u64, Error> {
    let open = |e| Error::storage("open table", e);
    let (queues, members, waiting, dedup) = match (
        txn.open_table(QUEUES),
        txn.open_table(MEMBERS),
        txn.open_table(WAITING),
        txn.open_table(DEDUP),
    ) {
        (Ok(q), Ok(m), Ok(w), Ok(d)) => (q, m, w, d),
        (Err(::redb::TableError::TableDoesNotExist(_)), ..) => return Ok(0),
        (q, m, w, d) => {
            q.map_err(open)?;
            m.map_err(open)?;
            w.map_err(open)?;
            d.map_err(open)?;
            unreachable!("one of the four failed");
        }
    };
    let op = storage("verify queues");
    let mut problem = |table: &'static str, thread: Option<ThreadId>, detail: String| {
        problems.push(Problem { table, thread, seq: None, detail });
    };
    let mut scanned = 0;
    let mut rows = QueueRows::default();
    for item in queues.iter().map_err(&op)? {
        let (k, v) = item.map_err(&op)?;
        scanned += 1;
        match queue_under("key", k.value(), v.value()) {
            Ok(q) => {
                rows.queues.insert(q.name.clone(), q);
            }
            Err(e) => problem(table::QUEUES, None, e.to_string()),
        }
    }
    for item in members.iter().map_err(&op)? {
        let (k, v) = item.map_err(&op)?;
        scanned += 1;
        match member_under("key", k.value(), v.value()) {
            Ok(m) => rows.members.push(m),
            Err(e) => problem(table::QUEUE_MEMBERS, ThreadId::new(k.value()).ok(), e.to_string()),
        }
    }
    for item in waiting.iter().map_err(&op)? {
        let (k, _) = item.map_err(&op)?;
        let (queue, key, rank, thread) = k.value();
        rows.waiting.insert((queue.to_string(), key.to_string(), rank, thread.to_string()));
    }
    for item in dedup.iter().map_err(&op)? {
        let (k, _) = item.map_err(&op)?;
        let (queue, d, thread) = k.value();
        rows.dedup.insert((queue.to_string(), d.to_string(), thread.to_string()));
    }
    crate::queue_verify::check(&rows, problems);
    Ok(scanned)
}
