//! A group of appends in a few statements: the rows the group's batches read are fetched in
//! one query each (threads, locks, queue memberships), sent with the transaction's BEGIN in its
//! first round trip ([`begin`]); every batch is planned in memory against them (each sees the
//! batches before it), and what the group writes goes in one statement per table (events and
//! threads through `unnest` of arrays), whatever the number of batches.
//!
//! A batch the planner refuses (a guard, a lock, a lease) writes nothing and needs no savepoint:
//! nothing of it reached the database. A statement that fails fails the whole group, as before.
//! Rows the prefetch did not anticipate are read when the planner asks for them (the cache is
//! an optimisation, never a condition of correctness); the database holds the state from
//! before the group (its writes come last) and the cache every change of the group's batches.
//!
//! Writers of many processes commit at once: every thread and lock row the group reads is
//! locked (`FOR UPDATE`, the prefetch in one fixed order: threads by id, then locks by name),
//! checked against the transaction's id (`xid.rs`), and a row the group creates is inserted
//! without `ON CONFLICT`, so two groups creating the same row cannot both believe they did:
//! the second fails on the unique key and runs again, and then sees the row.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::labels::{LabelRows, Labels};
use super::read::{decode_lock, decode_thread};
use super::tx::{Sql, Tx};
use super::write::write_locks;
use super::xid::Conflict;
use super::{pg_error, to_db};
use crate::batch::{Appended, Batch, LockOp};
use crate::checkpoint::CheckpointInfo;
use crate::codec::{self, StoredThread};
use crate::error::Error;
use crate::event::NewEvent;
use crate::ids::{PayloadRef, ThreadId};
use crate::lock::LockRecord;
use crate::plan::{Counters, Plan, PlanState, plan_kept};

/// A batch to plan: its parts but the events (the writer's copy for this transaction, changed
/// to the database's clock), and the events of the batch the writer keeps.
pub(super) type Kept<'e> = (Batch, &'e [NewEvent]);

/// Plans and writes `batches` (in order) in the group's transaction, against the rows `state`
/// holds (fetched by [`begin`]): each batch's outcome, or the error that fails the whole group.
///
/// # Errors
/// A failed statement (the group's transaction is then lost).
pub(super) fn append_all(
    mut state: Cached<'_, '_, '_>,
    counters: &mut Counters,
    batches: Vec<Kept<'_>>,
) -> Result<Vec<Result<Appended, Error>>, Error> {
    let mut writes = Writes::default();
    let mut outcomes = Vec::with_capacity(batches.len());
    for (batch, events) in batches {
        match plan_kept(&mut state, *counters, batch, events) {
            Ok(mut planned) => {
                *counters = planned.counters;
                outcomes.push(Ok(std::mem::take(&mut planned.appended)));
                state.absorb(&mut planned);
                state.queues.absorb(&planned.queue_writes)?;
                writes.add(planned)?;
            }
            // A read the planner made failed on the connection: the group fails.
            Err(e @ Error::Storage { .. }) => return Err(e),
            Err(refused) => outcomes.push(Err(refused)),
        }
    }
    let before = Before { threads: &state.stored_threads, locks: &state.stored_locks };
    writes.write(state.tx, state.xid, &before, &state.threads, &state.locks)?;
    super::queues::write(state.tx, &writes.queues)?;
    Ok(outcomes)
}

/// The database's clock and the transaction's id (`txid_current` rather than
/// `pg_current_xact_id` keeps PostgreSQL 12).
const CLOCK_SQL: &str =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, txid_current()";

/// The thread rows a group's batches name, locked in the order of their ids.
const THREADS_SQL: &str =
    "SELECT id, record, last_xid FROM cairn_threads WHERE id = ANY($1) ORDER BY id FOR UPDATE";

/// The lock rows a group's batches name, and those of the owners they release, locked in the
/// order of their names.
const LOCKS_SQL: &str = "SELECT name, record, owner FROM cairn_locks \
                         WHERE name = ANY($1) OR owner = ANY($2) ORDER BY name FOR UPDATE";

/// A group's transaction, begun.
pub(super) struct Begun<'t, 'a, 'b> {
    /// The database's clock in ms since the epoch: the one clock every engine sharing the
    /// database agrees on.
    pub now_ms: u64,
    /// The transaction's id: its lsns and checkpoint ids come from it (`xid.rs`), and a COMMIT
    /// that got no answer is resolved by it.
    pub xid: i64,
    /// The rows the group's appends read, fetched and locked.
    pub rows: Cached<'t, 'a, 'b>,
}

/// Begins the group's transaction and reads (and locks) the rows `batches` name: BEGIN, the
/// database's clock and the transaction's id, then one query for each kind of row named
/// (threads by id, then locks by name, then the queue memberships of the threads the batches
/// end), all sent before the first answer is waited for: one round trip. A later statement of
/// a failed one fails too (the transaction is aborted): the first error, in their order, is
/// returned.
///
/// # Errors
/// A failed statement; a row another writer changed after this transaction began
/// ([`Conflict`]); a damaged row.
pub(super) fn begin<'t, 'a, 'b>(
    tx: &'t mut Tx<'a, 'b>,
    batches: &[&Batch],
) -> Result<Begun<'t, 'a, 'b>, Error> {
    let named = Named::of(batches);
    let threads: Vec<&ThreadId> = named.ids.into_iter().collect();
    let ids: Vec<&str> = threads.iter().map(|t| t.as_str()).collect();
    let names: Vec<&str> = named.names.into_iter().collect();
    let owners: Vec<&str> = named.owners.into_iter().collect();
    let ending: Vec<&str> = named.ending.into_iter().collect();
    let clock = tx.prepared(CLOCK_SQL).map_err(pg_error("begin"))?;
    let threads_sql =
        prepared_if(tx, !ids.is_empty(), THREADS_SQL).map_err(pg_error("read threads"))?;
    let locks = prepared_if(tx, !names.is_empty() || !owners.is_empty(), LOCKS_SQL)
        .map_err(pg_error("read locks"))?;
    let members = prepared_if(tx, !ending.is_empty(), super::queues::MEMBERS_SQL)
        .map_err(pg_error("read queue members"))?;
    let client = tx.client;
    let (thread_params, lock_params, member_params) =
        ([&ids as _], [&names as _, &owners as _], [&ending as _]);
    let (began, clock, threads_read, locks, members) = client.wait(async {
        futures::join!(
            client.batch_execute("BEGIN"),
            client.query_opt(&clock, &[]),
            rows_of(client, threads_sql.as_ref(), &thread_params),
            rows_of(client, locks.as_ref(), &lock_params),
            rows_of(client, members.as_ref(), &member_params),
        )
    });
    began.map_err(pg_error("begin"))?;
    let clock = clock.map_err(pg_error("begin"))?.ok_or(Error::Closed)?;
    let (now_ms, xid) = (super::from_db(clock.get(0))?, clock.get(1));
    let thread_rows = threads_read.map_err(pg_error("read threads"))?;
    let locks = locks.map_err(pg_error("read locks"))?;
    let members = members.map_err(pg_error("read queue members"))?;
    let mut rows = Cached::fresh(tx, xid);
    rows.take_threads(&threads, &thread_rows)?;
    rows.take_locks(&names, &owners, &locks)?;
    super::queues::take_members(&mut rows.queues, &ending, &members)?;
    Ok(Begun { now_ms, xid, rows })
}

/// `sql` prepared, if it is `wanted`.
fn prepared_if(
    tx: &mut Tx<'_, '_>,
    wanted: bool,
    sql: &'static str,
) -> Result<Option<tokio_postgres::Statement>, tokio_postgres::Error> {
    wanted.then(|| tx.prepared(sql)).transpose()
}

/// The rows of `statement` run with `params`; none if there is no statement.
async fn rows_of(
    client: &tokio_postgres::Client,
    statement: Option<&tokio_postgres::Statement>,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    match statement {
        Some(statement) => client.query(statement, params).await,
        None => Ok(Vec::new()),
    }
}

/// The rows a group's batches read: thread ids, lock names, the owners whose locks they release,
/// and the threads they end (each leaves its queue, if it is in one: `plan_queue.rs`).
#[derive(Default)]
struct Named<'b> {
    ids: BTreeSet<&'b ThreadId>,
    names: BTreeSet<&'b str>,
    owners: BTreeSet<&'b str>,
    ending: BTreeSet<&'b str>,
}

impl<'b> Named<'b> {
    fn of(batches: &[&'b Batch]) -> Self {
        let mut named = Named::default();
        for b in batches.iter().copied() {
            named.ids.extend(b.all_guards().map(|g| g.thread()));
            named.ids.extend(b.threads.iter().map(|t| &t.id));
            named.ids.extend(b.events.iter().map(|e| &e.thread));
            named.ids.extend(b.checkpoints.iter().map(|c| &c.thread));
            named.ids.extend(b.all_leases().map(|l| l.thread()));
            named.ids.extend(b.signals.iter().map(|s| &s.thread));
            named.ids.extend(b.copied_signals.iter().map(|s| &s.thread));
            for op in &b.locks {
                match op {
                    LockOp::Acquire { name, .. }
                    | LockOp::Renew { name, .. }
                    | LockOp::Release { name, .. } => named.names.insert(name.as_str()),
                    LockOp::ReleaseAll { owner } => named.owners.insert(owner.as_str()),
                };
            }
            let ended = b.threads.iter().filter(|t| t.status.is_terminal());
            named.ending.extend(ended.map(|t| t.id.as_str()));
        }
        named
    }
}

/// The rows the group's batches read, as the batches before have left them (read and locked
/// through the group's transaction when first asked for).
pub(super) struct Cached<'t, 'a, 'b> {
    tx: &'t mut Tx<'a, 'b>,
    /// The transaction's id: a row a younger one wrote is a conflict.
    xid: i64,
    /// The threads stored before the group (updated, not inserted), with their labels then
    /// (`labels.rs`).
    stored_threads: HashMap<ThreadId, Labels>,
    /// The locks stored before the group (updated, not inserted).
    stored_locks: HashSet<String>,
    /// Threads read (`None`: not stored).
    threads: HashMap<ThreadId, Option<StoredThread>>,
    /// Locks read (`None`: not held).
    locks: HashMap<String, Option<LockRecord>>,
    /// The names of the stored locks of each owner asked about, as stored before the group.
    owners: HashMap<String, Vec<String>>,
    /// Payloads known to be stored (before or by the group).
    payloads: HashSet<[u8; 32]>,
    /// The last signal number of each thread asked about (`signals.rs`).
    signals: super::signals::LastSignals,
    /// The queue rows read (`queues.rs`).
    queues: super::queues::QueueCache,
}

impl<'t, 'a, 'b> Cached<'t, 'a, 'b> {
    /// Nothing read yet: every row is read when the planner asks for it (a request planned
    /// and written alone, as in a group that also holds a prune).
    pub(super) fn fresh(tx: &'t mut Tx<'a, 'b>, xid: i64) -> Self {
        Cached {
            tx,
            xid,
            stored_threads: HashMap::new(),
            stored_locks: HashSet::new(),
            threads: HashMap::new(),
            locks: HashMap::new(),
            owners: HashMap::new(),
            payloads: HashSet::new(),
            signals: super::signals::LastSignals::default(),
            queues: super::queues::QueueCache::default(),
        }
    }

    /// Takes in the thread rows [`THREADS_SQL`] read for `ids` (in order; an id without a row
    /// is not stored), each checked against the transaction's id. The batches' ids are shared,
    /// not made again from the rows.
    fn take_threads(
        &mut self,
        ids: &[&ThreadId],
        rows: &[tokio_postgres::Row],
    ) -> Result<(), Error> {
        for id in ids {
            self.threads.insert((*id).clone(), None);
        }
        for row in rows {
            let text: &str = row.get(0);
            let id = match ids.binary_search_by(|id| id.as_str().cmp(text)) {
                Ok(at) => ids[at].clone(),
                // Not asked for: only a damaged index returns it.
                Err(_) => ThreadId::new(text)?,
            };
            Conflict::check(id.as_str(), row.get(2), self.xid)?;
            let record = decode_thread(&id, row.get(1))?;
            self.stored_threads.insert(id.clone(), record.labels.clone());
            self.threads.insert(id, Some(StoredThread { record, tail: Vec::new() }));
        }
        Ok(())
    }

    /// Takes in the lock rows [`LOCKS_SQL`] read for `names` and `owners` (a name without a
    /// row is not held).
    fn take_locks(
        &mut self,
        names: &[&str],
        owners: &[&str],
        rows: &[tokio_postgres::Row],
    ) -> Result<(), Error> {
        for name in names {
            self.locks.insert((*name).to_owned(), None);
        }
        for owner in owners {
            self.owners.insert((*owner).to_owned(), Vec::new());
        }
        for row in rows {
            let name: &str = row.get(0);
            let lock = decode_lock(name, row.get(1))?;
            if let Some(held) = self.owners.get_mut(row.get::<_, &str>(2)) {
                held.push(name.to_owned());
            }
            self.stored_locks.insert(name.to_owned());
            self.locks.insert(name.to_owned(), Some(lock));
        }
        Ok(())
    }

    /// Takes in what a planned batch leaves: later batches see it. The plan's thread records
    /// move here (the group writes them from here at its end: [`Writes::write`]).
    fn absorb(&mut self, planned: &mut Plan) {
        for (id, stored) in std::mem::take(&mut planned.threads) {
            // The seq-index tail is redb's; a thread is stored here without one.
            let stored = (*stored).map(|s| StoredThread { record: s.record, tail: Vec::new() });
            self.threads.insert(id, stored);
        }
        for (name, lock) in &planned.locks {
            self.locks.insert(name.clone(), lock.clone());
        }
        self.payloads.extend(planned.payloads.iter().map(|(r, _)| r.hash));
        self.signals.absorb(&planned.signals);
    }
}

impl PlanState for Cached<'_, '_, '_> {
    fn stored_thread(&mut self, id: &ThreadId) -> Result<Option<StoredThread>, Error> {
        if let Some(stored) = self.threads.get(id) {
            return Ok(stored.clone());
        }
        let row = self
            .tx
            .query_opt(
                "SELECT record, last_xid FROM cairn_threads WHERE id = $1 FOR UPDATE",
                &[&id.as_str()],
            )
            .map_err(pg_error("read thread"))?;
        if let Some(r) = &row {
            Conflict::check(id.as_str(), r.get(1), self.xid)?;
        }
        let stored = row
            .map(|r| decode_thread(id, r.get(0)))
            .transpose()?
            .map(|record| StoredThread { record, tail: Vec::new() });
        if let Some(stored) = &stored {
            self.stored_threads.insert(id.clone(), stored.record.labels.clone());
        }
        self.threads.insert(id.clone(), stored.clone());
        Ok(stored)
    }

    fn lock(&mut self, name: &str) -> Result<Option<LockRecord>, Error> {
        if let Some(lock) = self.locks.get(name) {
            return Ok(lock.clone());
        }
        let row = self
            .tx
            .query_opt("SELECT name, record FROM cairn_locks WHERE name = $1 FOR UPDATE", &[&name])
            .map_err(pg_error("read lock"))?;
        if row.is_some() {
            self.stored_locks.insert(name.to_owned());
        }
        let lock = row.map(|r| decode_lock(r.get(0), r.get(1))).transpose()?;
        self.locks.insert(name.to_owned(), lock.clone());
        Ok(lock)
    }

    fn lock_names(&mut self, owner: &str) -> Result<Vec<String>, Error> {
        if !self.owners.contains_key(owner) {
            let rows = self
                .tx
                .query(
                    "SELECT name FROM cairn_locks WHERE owner = $1 ORDER BY name FOR UPDATE",
                    &[&owner],
                )
                .map_err(pg_error("read locks"))?;
            let names = rows.iter().map(|r| r.get::<_, String>(0)).collect();
            self.owners.insert(owner.to_owned(), names);
        }
        // Stored before the group, or taken by one of its batches (a superset: each is checked).
        let mut names = self.owners.get(owner).cloned().unwrap_or_default();
        names.extend(
            self.locks
                .iter()
                .filter(|(_, l)| l.as_ref().is_some_and(|l| l.owner == owner))
                .map(|(n, _)| n.clone()),
        );
        Ok(names)
    }

    fn payload_exists(&mut self, hash: &[u8; 32]) -> Result<bool, Error> {
        if self.payloads.contains(hash) {
            return Ok(true);
        }
        let stored = self
            .tx
            // Locked (shared) until the group commits: a thread deletion that would remove the
            // payload waits, then sees this group's events referring to it (`delete.rs`).
            .query_opt("SELECT 1 FROM cairn_payloads WHERE hash = $1 FOR SHARE", &[&&hash[..]])
            .map_err(pg_error("read payload"))?
            .is_some();
        if stored {
            self.payloads.insert(*hash);
        }
        Ok(stored)
    }

    fn last_signal(&mut self, thread: &ThreadId) -> Result<u64, Error> {
        self.signals.get(self.tx, thread)
    }

    fn find_signal(
        &mut self,
        thread: &ThreadId,
        name: &str,
        data: &[u8],
    ) -> Result<Option<u64>, Error> {
        self.signals.find(self.tx, thread, name, data)
    }
}

impl crate::plan_queue::QueueReads for Cached<'_, '_, '_> {
    fn queue(&mut self, name: &str) -> Result<Option<crate::queue::QueueState>, Error> {
        super::queues::Reads { tx: self.tx, cache: &mut self.queues }.queue(name)
    }

    fn queue_member(
        &mut self,
        thread: &ThreadId,
    ) -> Result<Option<crate::queue::QueueMember>, Error> {
        super::queues::Reads { tx: self.tx, cache: &mut self.queues }.queue_member(thread)
    }

    fn queue_waiting(
        &mut self,
        q: &str,
        key: &str,
        n: usize,
    ) -> Result<Vec<(u64, ThreadId)>, Error> {
        super::queues::Reads { tx: self.tx, cache: &mut self.queues }.queue_waiting(q, key, n)
    }

    fn queue_dedup(&mut self, queue: &str, dedup: &str) -> Result<Option<ThreadId>, Error> {
        super::queues::Reads { tx: self.tx, cache: &mut self.queues }.queue_dedup(queue, dedup)
    }
}

/// The rows stored before the group: written again with `UPDATE`, the others inserted.
pub(super) struct Before<'c> {
    /// Each thread stored before the group, with its labels.
    pub threads: &'c HashMap<ThreadId, Labels>,
    pub locks: &'c HashSet<String>,
}

/// What the group writes, gathered from its planned batches.
#[derive(Default)]
struct Writes {
    /// The event rows: one per run of a thread's events (`events.rs`).
    events: super::events::Runs,
    /// Threads changed (written as the cache holds them at the end).
    threads: BTreeSet<ThreadId>,
    /// Threads given a checkpoint (their row records this transaction as its last writer).
    checkpointed: BTreeSet<ThreadId>,
    checkpoints: Vec<(CheckpointInfo, Vec<u8>, Vec<u8>)>,
    payloads: Vec<(PayloadRef, Vec<u8>)>,
    /// Locks changed (written as the cache holds them at the end).
    locks: BTreeSet<String>,
    /// The wake hint of the last batch that wrote each thread (`None`: it gave none).
    wakes: HashMap<ThreadId, Option<crate::batch::Wake>>,
    /// The correlation-index rows of the events.
    correlations: super::correlations::Rows,
    /// The signals (thread, n, framed record).
    signals: Vec<(ThreadId, u64, Vec<u8>)>,
    /// The queue writes of each batch (`queues.rs`).
    queues: Vec<crate::plan_queue::QueueWrites>,
}

impl Writes {
    fn add(&mut self, planned: Plan) -> Result<(), Error> {
        for event in planned.events {
            self.events.push(&event.thread, event.seq, event.lsn, event.framed)?;
        }
        for id in &planned.dirty_threads {
            let hint = super::wake::hint_for(&planned.wakes, id);
            self.wakes.insert(id.clone(), hint);
        }
        for (_, _, framed) in planned.correlations {
            self.correlations.push(framed)?;
        }
        self.signals.extend(planned.signals);
        self.queues.push(planned.queue_writes);
        self.threads.extend(planned.dirty_threads);
        self.checkpointed.extend(planned.checkpoints.iter().map(|c| c.0.thread.clone()));
        self.checkpoints.extend(planned.checkpoints);
        self.payloads.extend(planned.payloads);
        self.locks.extend(planned.locks.into_keys());
        Ok(())
    }

    fn write(
        &self,
        tx: &mut Tx<'_, '_>,
        xid: i64,
        before: &Before<'_>,
        threads: &HashMap<ThreadId, Option<StoredThread>>,
        locks: &HashMap<String, Option<LockRecord>>,
    ) -> Result<(), Error> {
        let op = pg_error("append");
        let checkpoints = CheckpointRows::of(&self.checkpoints)?;
        let (hashes, payloads): (Vec<&[u8]>, Vec<&[u8]>) =
            self.payloads.iter().map(|(r, bytes)| (&r.hash[..], bytes.as_slice())).unzip();
        // The rows of every table in one round trip (`Tx::execute_all`).
        let mut statements: Vec<Sql<'_>> = Vec::new();
        statements.extend(self.events.statement());
        statements.extend(self.correlations.statement());
        let (mut old, mut new) = (ThreadRows::default(), ThreadRows::default());
        let mut labels = LabelRows::default();
        for id in &self.threads {
            if let Some(Some(stored)) = threads.get(id) {
                let stored_labels = before.threads.get(id);
                labels.push(id, stored_labels, &stored.record.labels);
                let rows = if stored_labels.is_some() { &mut old } else { &mut new };
                let hint = self.wakes.get(id).copied().flatten();
                rows.push(id, stored, super::wake::ready_at(&stored.record, hint)?)?;
            }
        }
        if !old.ids.is_empty() {
            statements.push((
                "UPDATE cairn_threads t SET status = u.status, workflow = u.workflow, \
                 record = u.record, ready_at = u.ready_at, last_xid = $6 \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bigint[]) \
                 AS u(id, status, workflow, record, ready_at) WHERE t.id = u.id",
                vec![&old.ids, &old.statuses, &old.workflows, &old.records, &old.ready, &xid],
            ));
        }
        if !new.ids.is_empty() {
            // No ON CONFLICT: a thread another group created meanwhile fails this group, which
            // runs again and finds it.
            statements.push((
                "INSERT INTO cairn_threads (id, status, workflow, record, ready_at, last_xid) \
                 SELECT u.*, $6 FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], \
                 $5::bigint[]) AS u",
                vec![&new.ids, &new.statuses, &new.workflows, &new.records, &new.ready, &xid],
            ));
        }
        labels.statements(&mut statements);
        let marked: Vec<&str> = self
            .checkpointed
            .iter()
            .filter(|id| !self.threads.contains(*id))
            .map(ThreadId::as_str)
            .collect();
        if !marked.is_empty() {
            statements.push((
                "UPDATE cairn_threads SET last_xid = $2 WHERE id = ANY($1)",
                vec![&marked, &xid],
            ));
        }
        checkpoints.statements(&mut statements);
        if !hashes.is_empty() {
            statements.push((
                "INSERT INTO cairn_payloads (hash, bytes) \
                 SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT DO NOTHING",
                vec![&hashes, &payloads],
            ));
        }
        tx.execute_all(&statements).map_err(&op)?;
        write_locks(
            tx,
            before.locks,
            self.locks.iter().map(|name| (name.as_str(), locks.get(name).and_then(Option::as_ref))),
        )?;
        super::signals::insert(tx, &self.signals)?;
        Ok(())
    }
}

/// New checkpoints and their tags, column by column (for `unnest`).
#[derive(Default)]
struct CheckpointRows<'r> {
    ids: Vec<i64>,
    threads: Vec<&'r str>,
    covers: Vec<i64>,
    workflows: Vec<&'r str>,
    infos: Vec<&'r [u8]>,
    snapshots: Vec<&'r [u8]>,
    tags: Vec<&'r str>,
    tagged: Vec<i64>,
}

impl<'r> CheckpointRows<'r> {
    /// The rows of `checkpoints` (info, framed info, framed snapshot).
    fn of(checkpoints: &'r [(CheckpointInfo, Vec<u8>, Vec<u8>)]) -> Result<Self, Error> {
        let mut rows = CheckpointRows::default();
        for (info, info_frame, snapshot_frame) in checkpoints {
            let id = to_db(info.id.0)?;
            rows.ids.push(id);
            rows.threads.push(info.thread.as_str());
            rows.covers.push(to_db(info.covers.seq.0)?);
            rows.workflows.push(&*info.workflow.id);
            rows.infos.push(info_frame);
            rows.snapshots.push(snapshot_frame);
            for tag in &info.meta.tags {
                rows.tags.push(tag);
                rows.tagged.push(id);
            }
        }
        Ok(rows)
    }

    /// The statements that insert them, if there are any.
    fn statements<'s>(&'s self, into: &mut Vec<Sql<'s>>) {
        if self.ids.is_empty() {
            return;
        }
        into.push((
            "INSERT INTO cairn_checkpoints (id, thread, covers_seq, workflow, info, snapshot) \
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], \
             $5::bytea[], $6::bytea[])",
            vec![
                &self.ids,
                &self.threads,
                &self.covers,
                &self.workflows,
                &self.infos,
                &self.snapshots,
            ],
        ));
        if !self.tags.is_empty() {
            into.push((
                "INSERT INTO cairn_checkpoint_tags (tag, id) \
                 SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT DO NOTHING",
                vec![&self.tags, &self.tagged],
            ));
        }
    }
}

/// Thread rows to write, column by column (for `unnest`).
#[derive(Default)]
struct ThreadRows<'r> {
    ids: Vec<&'r str>,
    statuses: Vec<String>,
    workflows: Vec<&'r str>,
    records: Vec<Vec<u8>>,
    ready: Vec<Option<i64>>,
}

impl<'r> ThreadRows<'r> {
    fn push(
        &mut self,
        id: &'r ThreadId,
        stored: &'r StoredThread,
        ready: Option<i64>,
    ) -> Result<(), Error> {
        self.ids.push(id.as_str());
        self.statuses.push(stored.record.status.to_string());
        self.workflows.push(&*stored.record.workflow.id);
        self.records.push(codec::encode_stored_thread(&stored.record, &[])?);
        self.ready.push(ready);
        Ok(())
    }
}
