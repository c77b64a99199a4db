//! The writer of a [`super::PgStore`]: one thread, one connection, group commits.
//!
//! A group is one SQL transaction. It starts by locking the `last_lsn` meta row, so commits of
//! all processes sharing the database are serialised: lsns are assigned and committed in the
//! same order, and a reader of the global log (`lsn > cursor`) never sees a later lsn commit
//! before an earlier one (the skip a plain sequence allows). Each batch is planned by the same
//! planner as redb's (`crate::plan`) against the rows as this transaction sees them, inside a
//! savepoint: a batch that fails a guard, a lock or a lease is rolled back alone.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, Row, Statement, Transaction};
use tokio::sync::{oneshot, watch};

use super::group::Cached;
use super::pool::Connect;
use super::read::decode_info;
use super::schema::{LAST_CHECKPOINT_ID, LAST_LSN};
use super::{from_db, pg_error, to_db};
use crate::codec;
use crate::plan::{Counters, Plan, PlanState, plan};
use crate::telemetry::{GroupFigures, StoreMetrics};
use crate::{
    Appended, Batch, CheckpointId, CheckpointInfo, Error, LockRecord, Pending, Pruned, Seq,
    ThreadId,
};

/// A write request and where its answer goes.
pub(crate) enum Op {
    Append(Batch, oneshot::Sender<Result<Appended, Error>>),
    DeleteCheckpoint(CheckpointId, oneshot::Sender<Result<bool, Error>>),
    ClearCheckpoints(ThreadId, oneshot::Sender<Result<u64, Error>>),
    Prune(ThreadId, CheckpointId, oneshot::Sender<Result<Pruned, Error>>),
}

/// Requests waiting for the writer, at most (a caller waits while the queue is full).
const QUEUED_OPS_MAX: usize = 1024;

/// How long the writer waits for a connection it suspects to answer a check.
const CONNECTION_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// Requests one group commit takes at most.
const GROUP_OPS_MAX: usize = 256;

/// The handle to the writer thread.
pub(crate) struct Writer {
    ops: SyncSender<Op>,
    /// Where each group commit's figures go.
    pub metrics: StoreMetrics,
}

impl Writer {
    /// Starts the writer on `client`; it publishes the last committed lsn on `committed`.
    /// `durable`: whether its commits wait for the server's WAL flush (`synchronous_commit`).
    pub fn start(
        client: Client,
        reconnect: Connect,
        committed: Arc<watch::Sender<u64>>,
        (token, durable): (u64, bool),
    ) -> Result<Writer, Error> {
        let (ops, queue) = sync_channel(QUEUED_OPS_MAX);
        let metrics = StoreMetrics::default();
        let shared = metrics.clone();
        std::thread::Builder::new()
            .name("cairn-pg-writer".into())
            .spawn(move || run(client, &reconnect, &queue, &committed, (token, durable, &shared)))
            .map_err(|e| Error::Storage { op: "start the writer", source: Arc::new(e) })?;
        Ok(Writer { ops, metrics })
    }

    /// Queues `op` (waiting while the queue is full).
    pub fn send(&self, op: Op) -> Result<(), Error> {
        self.ops.send(op).map_err(|_| Error::Closed)
    }

    pub fn append(&self, batch: Batch) -> Result<Pending, Error> {
        batch.check_limits()?;
        let (tx, rx) = oneshot::channel();
        self.send(Op::Append(batch, tx))?;
        Ok(Pending::new(rx))
    }
}

fn run(
    mut client: Client,
    reconnect: &Connect,
    queue: &Receiver<Op>,
    committed: &Arc<watch::Sender<u64>>,
    (token, durable, metrics): (u64, bool, &StoreMetrics),
) {
    let mut cache = Statements::default();
    let mut suspect = false;
    while let Ok(first) = queue.recv() {
        // A connection the server or the network dropped is replaced before the next group
        // (the group on it failed; its callers were told). After a group failed on its
        // connection, the client may not know yet that the connection is gone (a reset seen
        // by one request before the connection's task ends): ask it.
        if client.is_closed() || (suspect && client.is_valid(CONNECTION_CHECK).is_err()) {
            match reconnect() {
                Ok(fresh) => {
                    client = fresh;
                    cache = Statements::default();
                }
                Err(e) => tracing::warn!(error = %e, "the writer cannot reconnect yet"),
            }
        }
        let mut group = vec![first];
        while group.len() < GROUP_OPS_MAX {
            match queue.try_recv() {
                Ok(op) => group.push(op),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let span = crate::telemetry::group_span("postgres", durable);
        let _entered = span.enter();
        let mut figures = GroupFigures { writes: group.len(), durable, ..GroupFigures::default() };
        let mut callers = std::collections::HashSet::new();
        for op in &group {
            if let Op::Append(batch, _) = op {
                figures.events += batch.events.len();
                figures.bytes += crate::telemetry::batch_bytes(batch);
                let thread = batch.events.first().map(|e| &e.thread);
                callers.extend(thread.or_else(|| batch.threads.first().map(|t| &t.id)).cloned());
            }
        }
        // Reported before the group's callers are answered: what a caller saw acknowledged
        // is counted by then.
        let mut report = |ok: bool, commit: std::time::Duration| {
            figures.ok = ok;
            figures.commit = commit;
            figures.record_on(&span);
            span.record("callers", callers.len());
            metrics.group(&figures);
        };
        suspect = commit_group(
            &mut client,
            &mut cache,
            reconnect,
            group,
            committed,
            (token, &mut report),
        );
    }
}

/// Told a group's outcome and commit time before its callers are answered.
type Report<'a> = &'a mut dyn FnMut(bool, std::time::Duration);

/// An answer waiting for the commit.
enum Reply {
    Append(oneshot::Sender<Result<Appended, Error>>, Result<Appended, Error>),
    Delete(oneshot::Sender<Result<bool, Error>>, Result<bool, Error>),
    Clear(oneshot::Sender<Result<u64, Error>>, Result<u64, Error>),
    Prune(oneshot::Sender<Result<Pruned, Error>>, Result<Pruned, Error>),
}

impl Reply {
    /// Sends the answer; a successful one becomes `failure` when the commit failed.
    fn send(self, failure: Option<&Error>) {
        fn pick<T>(r: Result<T, Error>, failure: Option<&Error>) -> Result<T, Error> {
            match (r, failure) {
                (Ok(_), Some(e)) => Err(e.clone()),
                (r, _) => r,
            }
        }
        match self {
            Reply::Append(tx, r) => drop(tx.send(pick(r, failure))),
            Reply::Delete(tx, r) => drop(tx.send(pick(r, failure))),
            Reply::Clear(tx, r) => drop(tx.send(pick(r, failure))),
            Reply::Prune(tx, r) => drop(tx.send(pick(r, failure))),
        }
    }
}

/// Commits one group; true if it failed on the connection (not on a batch's own terms).
fn commit_group(
    client: &mut Client,
    cache: &mut Statements,
    reconnect: &Connect,
    group: Vec<Op>,
    committed: &watch::Sender<u64>,
    (token, report): (u64, Report<'_>),
) -> bool {
    let mut commit_time = std::time::Duration::ZERO;
    let before_lsn = *committed.borrow();
    let mut replies = Vec::with_capacity(group.len());
    let mut waiting: std::collections::VecDeque<Op> = group.into();
    // Once its COMMIT is sent: the group's transaction id and what it commits. A COMMIT that got
    // no answer because the connection dropped is resolved by the transaction's status.
    let mut sent: Option<(i64, Counters)> = None;
    let outcome = (|| -> Result<Counters, Error> {
        let mut inner = client.transaction().map_err(pg_error("begin"))?;
        let mut tx = Tx { tx: &mut inner, cache };
        let (mut counters, db_now_ms, xid) = lock_counters(&mut tx)?;
        let before = counters;
        // Appends only (the usual group): planned in memory, written in a few statements.
        if waiting.iter().all(|op| matches!(op, Op::Append(..))) {
            let mut batches = Vec::with_capacity(waiting.len());
            let mut answers = Vec::with_capacity(waiting.len());
            for op in waiting.drain(..) {
                if let Op::Append(mut batch, answer) = op {
                    on_database_clock(&mut batch, db_now_ms);
                    batches.push(batch);
                    answers.push(answer);
                }
            }
            match super::group::append_all(&mut tx, &mut counters, batches) {
                Ok(outcomes) => {
                    replies.extend(
                        answers.into_iter().zip(outcomes).map(|(a, r)| Reply::Append(a, r)),
                    );
                }
                Err(e) => {
                    replies.extend(answers.into_iter().map(|a| Reply::Append(a, Err(e.clone()))));
                    return Err(e);
                }
            }
        }
        // A batch alone in its group needs no savepoint: if it fails, nothing of it commits
        // (a refusal writes nothing; a failed write aborts the transaction).
        let alone = waiting.len() == 1;
        while let Some(op) = waiting.pop_front() {
            let reply = match op {
                Op::Append(mut batch, answer) => {
                    on_database_clock(&mut batch, db_now_ms);
                    Reply::Append(
                        answer,
                        savepoint(&mut tx, alone, |tx| append(tx, &mut counters, batch)),
                    )
                }
                Op::DeleteCheckpoint(id, answer) => Reply::Delete(
                    answer,
                    savepoint(&mut tx, alone, |tx| {
                        remove_checkpoints(
                            tx,
                            "SELECT id, info FROM cairn_checkpoints WHERE id = $1 FOR UPDATE",
                            &[&to_db(id.0)?],
                        )
                        .map(|n| n > 0)
                    }),
                ),
                Op::ClearCheckpoints(thread, answer) => Reply::Clear(
                    answer,
                    savepoint(&mut tx, alone, |tx| {
                        remove_checkpoints(
                            tx,
                            "SELECT id, info FROM cairn_checkpoints WHERE thread = $1 FOR UPDATE",
                            &[&thread.as_str()],
                        )
                    }),
                ),
                Op::Prune(thread, keep, answer) => {
                    Reply::Prune(answer, savepoint(&mut tx, alone, |tx| prune(tx, &thread, keep)))
                }
            };
            // A savepoint that could not be set or ended means the connection failed: the
            // whole group fails (its outcome is the transaction's).
            let broken = reply.connection_failed();
            replies.push(reply);
            if let Some(e) = broken {
                return Err(e);
            }
        }
        if counters != before {
            store_counters(&mut tx, counters)?;
        }
        sent = Some((xid, counters));
        let started = std::time::Instant::now();
        let done = inner.commit().map_err(pg_error("commit"));
        commit_time = started.elapsed();
        done?;
        Ok(counters)
    })();
    let outcome = match (outcome, sent) {
        (Err(e), Some((xid, counters))) if client.is_closed() => {
            match super::resolve::commit_outcome(reconnect, xid, &e) {
                Ok((fresh, committed_after_all)) => {
                    // The statements were prepared on the dropped connection.
                    *client = fresh;
                    *cache = Statements::default();
                    if committed_after_all { Ok(counters) } else { Err(e) }
                }
                Err(unknown) => Err(unknown),
            }
        }
        (outcome, _) => outcome,
    };
    match outcome {
        Ok(counters) => {
            report(true, commit_time);
            for reply in replies {
                reply.send(None);
            }
            committed.send_if_modified(|last| {
                let moved = counters.last_lsn > *last;
                *last = (*last).max(counters.last_lsn);
                moved
            });
            // Tell the other processes, after the commit (a NOTIFY inside the transaction would
            // take a cluster-wide lock at commit): their subscriptions and pollers wake at once.
            // In one round trip, without a WAL flush of its own (a lost notification costs a
            // delay, never an event: the listeners catch up from the meta row).
            let notify = format!(
                "BEGIN; SET LOCAL synchronous_commit = off; SELECT pg_notify('{}', '{} {token:x}'); COMMIT",
                super::listen::CHANNEL,
                counters.last_lsn
            );
            if counters.last_lsn > before_lsn
                && let Err(e) = client.batch_execute(&notify)
            {
                tracing::debug!(error = %e, "commit notification not sent");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "a group commit failed; its writes are rolled back");
            report(false, commit_time);
            for reply in replies {
                reply.send(Some(&e));
            }
            // Requests the group had not reached yet get the same answer.
            for op in waiting {
                op.fail(&e);
            }
            return matches!(e, Error::Storage { .. });
        }
    }
    false
}

/// Runs `f` inside a savepoint (unless the batch is `alone` in its group), rolled back when `f`
/// fails. An error setting or ending the
/// savepoint is returned as [`Error::Storage`] with op `savepoint` (the connection failed).
fn savepoint<T>(
    tx: &mut Tx<'_, '_>,
    alone: bool,
    f: impl FnOnce(&mut Tx<'_, '_>) -> Result<T, Error>,
) -> Result<T, Error> {
    if alone {
        return f(tx);
    }
    tx.batch_execute("SAVEPOINT cairn_batch").map_err(pg_error("savepoint"))?;
    let result = f(tx);
    let end = if result.is_ok() {
        "RELEASE SAVEPOINT cairn_batch"
    } else {
        "ROLLBACK TO SAVEPOINT cairn_batch"
    };
    tx.batch_execute(end).map_err(pg_error("savepoint"))?;
    result
}

impl Op {
    /// Answers the request with `e`.
    fn fail(self, e: &Error) {
        match self {
            Op::Append(_, tx) => drop(tx.send(Err(e.clone()))),
            Op::DeleteCheckpoint(_, tx) => drop(tx.send(Err(e.clone()))),
            Op::ClearCheckpoints(_, tx) => drop(tx.send(Err(e.clone()))),
            Op::Prune(_, _, tx) => drop(tx.send(Err(e.clone()))),
        }
    }
}

impl Reply {
    /// The error, if this request failed because the connection did (rather than on its own
    /// terms: a guard, a lock, a lease).
    fn connection_failed(&self) -> Option<Error> {
        let error = match self {
            Reply::Append(_, Err(e)) | Reply::Delete(_, Err(e)) => e,
            Reply::Clear(_, Err(e)) | Reply::Prune(_, Err(e)) => e,
            _ => return None,
        };
        matches!(error, Error::Storage { .. }).then(|| error.clone())
    }
}

/// Leases and resource locks are timed by the database's clock, never by an engine's: an
/// expiry and every check against it use `now_ms` (so an engine whose clock runs ahead cannot
/// take over a live lease or lock, nor one whose clock lags keep a dead one).
fn on_database_clock(batch: &mut Batch, now_ms: u64) {
    for op in &mut batch.locks {
        match op {
            crate::LockOp::Acquire { now_ms: t, .. } | crate::LockOp::Renew { now_ms: t, .. } => {
                *t = now_ms;
            }
            _ => {}
        }
    }
    for op in &mut batch.leases {
        match op {
            crate::LeaseOp::Acquire { now_ms: t, .. } | crate::LeaseOp::Renew { now_ms: t, .. } => {
                *t = now_ms;
            }
            crate::LeaseOp::Release { .. } => {}
        }
    }
    for guard in &mut batch.guards {
        if let crate::Guard::Lease { now_ms: t, .. } = guard {
            *t = now_ms;
        }
    }
}

/// Locks the counter rows for this transaction (serialising writers) and reads them, with the
/// database's clock in ms since the epoch (the one clock every engine sharing the database
/// agrees on) and the transaction's id (by which a COMMIT that got no answer is resolved;
/// `txid_current` rather than `pg_current_xact_id` keeps PostgreSQL 12): one round trip.
fn lock_counters(tx: &mut Tx<'_, '_>) -> Result<(Counters, u64, i64), Error> {
    let rows = tx
        .query(
            "SELECT key, value, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, \
             txid_current() FROM cairn_meta WHERE key IN ($1, $2) ORDER BY key FOR UPDATE",
            &[&LAST_CHECKPOINT_ID, &LAST_LSN],
        )
        .map_err(pg_error("lock the counters"))?;
    let mut counters = Counters::default();
    let (mut now_ms, mut xid) = (0, 0);
    for row in rows {
        let key: &str = row.get(0);
        let value = from_db(row.get(1))?;
        now_ms = from_db(row.get(2))?;
        xid = row.get(3);
        if key == LAST_LSN {
            counters.last_lsn = value;
        } else {
            counters.last_checkpoint_id = value;
        }
    }
    Ok((counters, now_ms, xid))
}

fn store_counters(tx: &mut Tx<'_, '_>, c: Counters) -> Result<(), Error> {
    tx.execute(
        "UPDATE cairn_meta SET value = CASE key WHEN $1 THEN $2::bigint ELSE $4::bigint END \
         WHERE key IN ($1, $3)",
        &[&LAST_LSN, &to_db(c.last_lsn)?, &LAST_CHECKPOINT_ID, &to_db(c.last_checkpoint_id)?],
    )
    .map_err(pg_error("write the counters"))?;
    Ok(())
}

fn append(tx: &mut Tx<'_, '_>, counters: &mut Counters, batch: Batch) -> Result<Appended, Error> {
    let planned = plan(&mut Cached::fresh(tx), *counters, batch)?;
    let appended = write_plan(tx, &planned)?;
    *counters = planned.counters;
    Ok(appended)
}

fn write_plan(tx: &mut Tx<'_, '_>, plan: &Plan) -> Result<Appended, Error> {
    let op = pg_error("append");
    for ((lsn, framed), (thread, seq)) in plan.events.iter().zip(&plan.event_keys) {
        tx.execute(
            "INSERT INTO cairn_events (lsn, thread, seq, record) VALUES ($1, $2, $3, $4)",
            &[&to_db(*lsn)?, &thread.as_str(), &to_db(*seq)?, framed],
        )
        .map_err(&op)?;
    }
    let mut correlations = super::correlations::Rows::default();
    for (_, _, framed) in &plan.correlations {
        correlations.push(framed.clone())?;
    }
    correlations.insert(|sql, params| tx.execute(sql, params))?;
    for id in &plan.dirty_threads {
        if let Some(Some(stored)) = plan.threads.get(id) {
            let framed = codec::encode_stored_thread(&stored.record, &[])?;
            let ready =
                super::wake::ready_at(&stored.record, super::wake::hint_for(&plan.wakes, id))?;
            tx.execute(
                "INSERT INTO cairn_threads (id, status, workflow, record, ready_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (id) DO UPDATE SET status = $2, workflow = $3, record = $4, \
                 ready_at = $5",
                &[
                    &id.as_str(),
                    &stored.record.status.to_string(),
                    &stored.record.workflow.id,
                    &framed,
                    &ready,
                ],
            )
            .map_err(&op)?;
        }
    }
    write_checkpoints(tx, &plan.checkpoints)?;
    write_payloads(tx, &plan.payloads)?;
    write_locks(tx, plan.locks.iter().map(|(name, lock)| (name.as_str(), lock.as_ref())))?;
    super::signals::insert(tx, &plan.signals)?;
    Ok(plan.appended.clone())
}

/// Inserts new checkpoints (info, framed info, framed snapshot) and their tags.
pub(super) fn write_checkpoints(
    tx: &mut Tx<'_, '_>,
    checkpoints: &[(CheckpointInfo, Vec<u8>, Vec<u8>)],
) -> Result<(), Error> {
    let op = pg_error("append");
    for (info, info_frame, snapshot_frame) in checkpoints {
        tx.execute(
            "INSERT INTO cairn_checkpoints (id, thread, covers_seq, workflow, info, snapshot) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &to_db(info.id.0)?,
                &info.thread.as_str(),
                &to_db(info.covers.seq.0)?,
                &info.workflow.id,
                info_frame,
                snapshot_frame,
            ],
        )
        .map_err(&op)?;
        for tag in &info.meta.tags {
            tx.execute(
                "INSERT INTO cairn_checkpoint_tags (tag, id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[tag, &to_db(info.id.0)?],
            )
            .map_err(&op)?;
        }
    }
    Ok(())
}

/// Inserts payloads not stored yet.
pub(super) fn write_payloads(
    tx: &mut Tx<'_, '_>,
    payloads: &[(crate::PayloadRef, Vec<u8>)],
) -> Result<(), Error> {
    for (r, bytes) in payloads {
        tx.execute(
            "INSERT INTO cairn_payloads (hash, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&&r.hash[..], bytes],
        )
        .map_err(pg_error("append"))?;
    }
    Ok(())
}

/// Writes locks as they now stand: `None` removes one.
pub(super) fn write_locks<'l>(
    tx: &mut Tx<'_, '_>,
    locks: impl Iterator<Item = (&'l str, Option<&'l LockRecord>)>,
) -> Result<(), Error> {
    let op = pg_error("append");
    for (name, lock) in locks {
        match lock {
            Some(lock) => {
                tx.execute(
                    "INSERT INTO cairn_locks (name, owner, record) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO UPDATE SET owner = $2, record = $3",
                    &[&name, &lock.owner, &codec::encode_lock(lock)?],
                )
                .map_err(&op)?;
            }
            None => {
                tx.execute("DELETE FROM cairn_locks WHERE name = $1", &[&name]).map_err(&op)?;
            }
        }
    }
    Ok(())
}

/// Removes the checkpoints `select` finds (each read and checked first); their number.
fn remove_checkpoints(
    tx: &mut Tx<'_, '_>,
    select: &'static str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<u64, Error> {
    let rows = tx.query(select, params).map_err(pg_error("read checkpoints"))?;
    let infos: Vec<CheckpointInfo> =
        rows.iter().map(|r| decode_info(r.get(0), r.get(1))).collect::<Result<_, _>>()?;
    delete_infos(tx, &infos)?;
    Ok(infos.len() as u64)
}

fn delete_infos(tx: &mut Tx<'_, '_>, infos: &[CheckpointInfo]) -> Result<(), Error> {
    for info in infos {
        let id = to_db(info.id.0)?;
        tx.execute("DELETE FROM cairn_checkpoints WHERE id = $1", &[&id])
            .map_err(pg_error("remove checkpoint"))?;
        tx.execute("DELETE FROM cairn_checkpoint_tags WHERE id = $1", &[&id])
            .map_err(pg_error("remove checkpoint"))?;
    }
    Ok(())
}

/// Removes `thread`'s events up to the seq checkpoint `keep` covers, and its older checkpoints.
fn prune(tx: &mut Tx<'_, '_>, thread: &ThreadId, keep: CheckpointId) -> Result<Pruned, Error> {
    let row = tx
        .query_opt("SELECT id, info FROM cairn_checkpoints WHERE id = $1", &[&to_db(keep.0)?])
        .map_err(pg_error("read checkpoint"))?
        .ok_or(Error::UnknownCheckpoint(keep))?;
    let info = decode_info(row.get(0), row.get(1))?;
    if &info.thread != thread {
        return Err(Error::Invalid {
            detail: format!("checkpoint {keep} belongs to thread {}, not {thread}", info.thread),
        });
    }
    let mut state = Cached::fresh(tx);
    let mut stored =
        state.stored_thread(thread)?.ok_or_else(|| Error::UnknownThread(thread.clone()))?;
    let covers = info.covers.seq.0;
    let last = stored.record.last.map_or(0, |b| b.seq.0);
    if covers > last {
        return Err(super::corrupt(
            crate::codec::table::CHECKPOINTS,
            Some(thread),
            None,
            format!("checkpoint {keep} covers seq {covers}, past the thread's last seq {last}"),
        ));
    }
    let mut events = 0;
    if covers >= stored.record.first_seq.0 {
        // The index entries of the pruned events go in the same transaction.
        tx.execute(
            "DELETE FROM cairn_correlations WHERE thread = $1 AND seq <= $2",
            &[&thread.as_str(), &to_db(covers)?],
        )
        .map_err(pg_error("prune correlations"))?;
        events = tx
            .execute(
                "DELETE FROM cairn_events WHERE thread = $1 AND seq <= $2",
                &[&thread.as_str(), &to_db(covers)?],
            )
            .map_err(pg_error("prune events"))?;
        stored.record.first_seq = Seq(covers + 1);
        let framed = codec::encode_stored_thread(&stored.record, &[])?;
        tx.execute(
            "UPDATE cairn_threads SET record = $2 WHERE id = $1",
            &[&thread.as_str(), &framed],
        )
        .map_err(pg_error("prune events"))?;
    }
    let rows = tx
        .query(
            "SELECT id, info FROM cairn_checkpoints WHERE thread = $1 AND covers_seq <= $2 AND id < $3",
            &[&thread.as_str(), &to_db(covers)?, &to_db(keep.0)?],
        )
        .map_err(pg_error("read checkpoints"))?;
    let old: Vec<CheckpointInfo> =
        rows.iter().map(|r| decode_info(r.get(0), r.get(1))).collect::<Result<_, _>>()?;
    delete_infos(tx, &old)?;
    Ok(Pruned { events, checkpoints: old.len() as u64, first_seq: stored.record.first_seq })
}

/// The writer's prepared statements, by their SQL: each is parsed once per connection, not at
/// every use (a statement given as text costs a round trip to prepare it first).
#[derive(Default)]
pub(crate) struct Statements(HashMap<&'static str, Statement>);

/// The group's transaction with the writer's prepared statements.
pub(crate) struct Tx<'a, 'b> {
    tx: &'a mut Transaction<'b>,
    cache: &'a mut Statements,
}

impl Tx<'_, '_> {
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.cache.0.get(sql) {
            return Ok(s.clone());
        }
        let s = self.tx.prepare(sql)?;
        self.cache.0.insert(sql, s.clone());
        Ok(s)
    }

    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        let s = self.prepared(sql)?;
        self.tx.execute(&s, params)
    }

    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        let s = self.prepared(sql)?;
        self.tx.query(&s, params)
    }

    pub(super) fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        let s = self.prepared(sql)?;
        self.tx.query_opt(&s, params)
    }

    pub(super) fn batch_execute(&mut self, sql: &str) -> Result<(), postgres::Error> {
        self.tx.batch_execute(sql)
    }
}
