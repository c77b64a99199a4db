//! The writer of a [`super::PgStore`]: one thread, one connection, group commits.
//!
//! A group is one SQL transaction. Its lsns and checkpoint ids come from its transaction id
//! (`xid.rs`), so the writers of many processes commit at once, and a reader of the global log
//! reads below the xmin watermark, where no later commit can land. Each batch is planned by the
//! same planner as redb's (`crate::plan`) against the rows as this transaction sees them, and
//! locks: appends together (`group.rs`; a refused batch writes nothing), then any checkpoint
//! deletion or prune inside a savepoint of its own. A group that meets a younger writer's row, a
//! row created at the same time or a deadlock runs again from its requests in a new
//! transaction, up to [`GROUP_ATTEMPTS_MAX`] times.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
use tokio::sync::mpsc::{Receiver, Sender, channel};
use tokio::sync::{oneshot, watch};

use super::delete::{delete_infos, remove_checkpoints};
use super::group::Cached;
use super::pool::{Connect, Driver, Link as Client};
use super::read::decode_info;
use super::tx::{Statements, Tx};
use super::xid::{self, IDS_PER_TRANSACTION};
use super::{pg_error, to_db};
use crate::batch::{Batch, Pruned};
use crate::checkpoint::CheckpointInfo;
use crate::codec;
use crate::error::Error;
use crate::ids::{CheckpointId, Seq, ThreadId};
use crate::lock::LockRecord;
use crate::pending::Pending;
use crate::plan::{Counters, PlanState};
use crate::reading::Reading;
pub(crate) use crate::request::Write;
use crate::request::{Answer, Outcome, Request};
use crate::telemetry::{GroupFigures, StoreMetrics};

/// Requests waiting for the writer, at most (a caller waits while the queue is full: an async
/// caller suspended, [`Writer::append_async`]).
const QUEUED_OPS_MAX: usize = 1024;

/// How long the writer waits for a connection it suspects to answer a check.
const CONNECTION_CHECK: Duration = Duration::from_secs(2);

/// How long the writer keeps trying to reconnect before it fails the group it holds (its
/// callers are told; the next group tries again): an outage shorter than this costs the
/// writes queued meanwhile a delay, not an error.
const RECONNECT_WAIT_MAX: Duration = Duration::from_secs(30);

/// Longest pause between two reconnection attempts.
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Requests one group commit takes at most.
const GROUP_OPS_MAX: usize = 256;

/// How long the server lets the writer's connection sit idle inside a group's transaction
/// before ending it (`idle_in_transaction_session_timeout`): a writer does nothing but plan
/// between its statements, so only a stopped process reaches it.
pub(crate) const IDLE_IN_GROUP_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Transactions one group is tried in at most (each retry after a conflict with another
/// writer runs with a younger transaction id, so the next usually passes).
pub(crate) const GROUP_ATTEMPTS_MAX: u32 = 8;

/// Who the writer is: its notifications' token, and whether its commits wait for the server's
/// WAL flush (`synchronous_commit`).
pub(crate) struct Identity {
    pub token: u64,
    pub durable: bool,
}

/// The handle to the writer thread.
pub(crate) struct Writer {
    ops: Sender<Write>,
    /// The store's runtime: where a sync caller inside another runtime leaves a write to wait
    /// for room.
    handle: tokio::runtime::Handle,
    /// Where each group commit's figures go.
    pub metrics: StoreMetrics,
}

impl Writer {
    /// Starts the writer on `client` (a connection driven by the store's runtime, used by this
    /// thread alone: the writer's thread blocks on each of its statements, as its planner asks
    /// for rows synchronously); it publishes the last committed lsn on `committed`. The thread
    /// holds `driver` until it ends: a store dropped while its last group is still being
    /// committed, or its commit's outcome asked for on a fresh connection, keeps the runtime
    /// those connections need until that group is answered.
    pub fn start(
        client: Client,
        reconnect: Connect,
        committed: Arc<watch::Sender<u64>>,
        who: Identity,
        metrics: StoreMetrics,
        driver: Arc<Driver>,
    ) -> Result<Writer, Error> {
        let (ops, mut queue) = channel(QUEUED_OPS_MAX);
        let shared = metrics.clone();
        let handle = driver.handle();
        std::thread::Builder::new()
            .name("cairn-pg-writer".into())
            .spawn(move || {
                run(client, &reconnect, &mut queue, &committed, &who, &shared);
                drop(driver);
            })
            .map_err(|e| Error::Storage { op: "start the writer", source: Arc::new(e) })?;
        Ok(Writer { ops, handle, metrics })
    }

    /// Queues `op` for a sync caller. While the queue is full, a caller off every runtime
    /// waits; one on a runtime's thread does not (it would hold the runtime's other tasks):
    /// a task of the store's runtime waits for room in its stead, and the write's answer
    /// comes as ever (`Closed` if the writer stopped meanwhile). Writes left to wait so are
    /// queued in no promised order among themselves: a caller that needs its writes in order
    /// awaits each [`Writer::append_async`]. Once the database has not answered for a while
    /// ([`waited_out`]), `op` is refused at once with [`Error::Unavailable`] naming why.
    pub fn send(&self, op: Write) -> Result<(), Error> {
        if let Some(e) = waited_out(&self.metrics) {
            return Err(e);
        }
        match self.ops.try_send(op) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(_)) => Err(Error::Closed),
            Err(TrySendError::Full(op)) if tokio::runtime::Handle::try_current().is_ok() => {
                tracing::debug!("the writer's queue is full: a write waits for room in a task");
                let ops = self.ops.clone();
                // Dropped unsent (the writer stopped), the write's answer channel closes.
                drop(self.handle.spawn(async move { ops.send(op).await.map_err(drop) }));
                Ok(())
            }
            Err(TrySendError::Full(op)) => {
                tracing::debug!("the writer's queue is full: a sync caller waits for room");
                crate::pending::block_on(self.ops.send(op)).map_err(|_| Error::Closed)
            }
        }
    }

    /// Queues `op` now if the queue has room (`None`); else the future that queues it,
    /// suspended (never blocking its thread) until there is room, which is handed out in the
    /// order it was waited for. Refused ([`Error::Unavailable`]) once the database has not
    /// answered for a while ([`waited_out`]), as [`Writer::send`] is.
    fn queue(
        &self,
        op: Write,
    ) -> Result<Option<impl Future<Output = Result<(), Error>> + Send + 'static>, Error> {
        if let Some(e) = waited_out(&self.metrics) {
            return Err(e);
        }
        match self.ops.try_send(op) {
            Ok(()) => Ok(None),
            Err(TrySendError::Closed(_)) => Err(Error::Closed),
            Err(TrySendError::Full(op)) => {
                let ops = self.ops.clone();
                Ok(Some(async move { ops.send(op).await.map_err(|_| Error::Closed) }))
            }
        }
    }

    pub fn append(&self, batch: Batch) -> Result<Pending, Error> {
        batch.check_limits()?;
        let (tx, rx) = oneshot::channel();
        self.send(Write::Append(batch, tx))?;
        Ok(Pending::new(rx))
    }

    /// [`Writer::append`] for async callers: the batch's [`Pending`] once it is queued.
    pub fn append_async(&self, batch: Batch) -> Reading<Pending> {
        if let Err(e) = batch.check_limits() {
            return Reading::ready(Err(e));
        }
        let (tx, rx) = oneshot::channel();
        match self.queue(Write::Append(batch, tx)) {
            // Queued at once (the queue has room): no future to allocate.
            Ok(None) => Reading::ready(Ok(Pending::new(rx))),
            Ok(Some(queued)) => Reading::later(async move {
                queued.await?;
                Ok(Pending::new(rx))
            }),
            Err(e) => Reading::ready(Err(e)),
        }
    }
}

fn run(
    client: Client,
    reconnect: &Connect,
    queue: &mut Receiver<Write>,
    committed: &Arc<watch::Sender<u64>>,
    who: &Identity,
    metrics: &StoreMetrics,
) {
    let (token, durable) = (who.token, who.durable);
    let mut conn = Conn { client, cache: Statements::default(), reconnect };
    let mut suspect = false;
    // A request that did not fit the group before: the first of the next.
    let mut held: Option<Write> = None;
    loop {
        let first = match held.take() {
            Some(op) => op,
            // The writer's thread is no runtime's: it may block here.
            None => match queue.blocking_recv() {
                Some(op) => op,
                None => break,
            },
        };
        // A connection the server or the network dropped is replaced before the next group
        // (the group on it failed; its callers were told). After a group failed on its
        // connection, the client may not know yet that the connection is gone (a reset seen
        // by one request before the connection's task ends): ask it.
        if (conn.client.is_closed() || (suspect && !answers(&conn.client)))
            && let Some(fresh) = reconnect_within(reconnect, metrics)
        {
            conn.replace(fresh);
        }
        let mut taken = ids(&first);
        let mut group = vec![first];
        while group.len() < GROUP_OPS_MAX {
            match queue.try_recv() {
                // The group's lsns and checkpoint ids must fit its transaction's range.
                Ok(op) if taken + ids(&op) > IDS_PER_TRANSACTION => {
                    held = Some(op);
                    break;
                }
                Ok(op) => {
                    taken += ids(&op);
                    group.push(op);
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let span = crate::telemetry::group_span("postgres", durable);
        let _entered = span.enter();
        let mut figures = GroupFigures { writes: group.len(), durable, ..GroupFigures::default() };
        let mut callers = std::collections::HashSet::new();
        for op in &group {
            if let Write::Append(batch, _) = op {
                figures.events += batch.events.len();
                figures.bytes += crate::telemetry::batch_bytes(batch);
            }
            callers.extend(op.thread().cloned());
        }
        // Reported before the group's callers are answered: what a caller saw acknowledged
        // is counted by then.
        let mut report = |ok: bool, commit: std::time::Duration, retries: u32| {
            figures.ok = ok;
            figures.commit = commit;
            figures.retries = retries;
            figures.record_on(&span);
            span.record("callers", callers.len());
            metrics.group(&figures);
            if ok {
                metrics.database_answered();
            }
        };
        suspect = commit_group(&mut conn, group, committed, token, &mut report, metrics);
    }
}

/// [`Error::Unavailable`] once the database has not answered for
/// [`crate::limits::PG_WRITE_WAIT_UNAVAILABLE_MAX`] (a shorter outage costs writes a delay).
pub(crate) fn waited_out(metrics: &StoreMetrics) -> Option<Error> {
    let state = metrics.database_down()?;
    let down_ms = crate::telemetry::now_ms().saturating_sub(state.since_ms);
    let max_ms = crate::limits::PG_WRITE_WAIT_UNAVAILABLE_MAX.as_millis();
    if u128::from(down_ms) < max_ms {
        return None;
    }
    state.unavailable()
}

/// Whether `client`'s connection answers an empty query within [`CONNECTION_CHECK`] (if not,
/// it is given up: closed).
fn answers(client: &Client) -> bool {
    client.wait_for(Some(CONNECTION_CHECK), client.simple_query("")).is_ok()
}

/// A fresh connection, tried again and again (each attempt within the connect timeout, with
/// a growing pause between) until one opens or [`RECONNECT_WAIT_MAX`] has passed (`None`: the
/// group about to run fails on the closed connection, its callers told). Tried once only when
/// the database had already been away for [`waited_out`]'s while: the group the writer held
/// when it went away waits for it (a short outage costs its writes a delay, not an error, and a
/// tool call whose result it carries is not run again), and those after it fail at once.
fn reconnect_within(reconnect: &Connect, metrics: &StoreMetrics) -> Option<Client> {
    let (started, wait) = (Instant::now(), RECONNECT_WAIT_MAX);
    let patient = waited_out(metrics).is_none();
    let mut backoff = Duration::from_millis(50);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        match reconnect() {
            Ok(fresh) => {
                if attempts > 1 {
                    tracing::info!(attempts, "the writer reconnected");
                }
                return Some(fresh);
            }
            Err(e) if started.elapsed() >= wait || !patient => {
                tracing::warn!(error = %e, attempts, "the writer cannot reconnect; a group fails");
                return None;
            }
            Err(e) => {
                tracing::debug!(error = %e, attempts, "the writer cannot reconnect yet");
            }
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
    }
}

/// The writer thread's connection: its client and the statements prepared on it (replaced
/// together), and how to open a fresh one.
struct Conn<'a> {
    client: Client,
    cache: Statements,
    reconnect: &'a Connect,
}

impl Conn<'_> {
    /// Goes on on `fresh`, a new connection (nothing is prepared on it yet).
    fn replace(&mut self, fresh: Client) {
        self.client = fresh;
        self.cache = Statements::default();
    }
}

/// Told a group's outcome and commit time before its callers are answered.
type Report<'a> = &'a mut dyn FnMut(bool, std::time::Duration, u32);

/// A request's outcome in the group's transaction: its own refusal (a guard, a lock, a lease)
/// is an error that leaves the others to commit; one on the connection fails the group.
type Decided = Result<Outcome, Error>;

/// Whether a request failed because the connection did (rather than on its own terms).
fn connection_failed(decided: &Decided) -> Option<Error> {
    match decided {
        Err(e @ Error::Storage { .. }) => Some(e.clone()),
        _ => None,
    }
}

/// A request's answer: its own error stands; otherwise the group's failure, if any.
fn answer(decided: Option<Decided>, failure: Option<&Error>) -> Decided {
    match (decided, failure) {
        (Some(Err(e)), _) => Err(e),
        (_, Some(e)) => Err(e.clone()),
        (Some(ok), None) => ok,
        // A group that committed reached every request.
        (None, None) => Err(Error::Closed),
    }
}

/// What one transaction of a group did, kept when it fails.
#[derive(Default)]
struct Attempt {
    /// Each request's outcome, in the group's order (`None`: not reached).
    outcomes: Vec<Option<Decided>>,
    /// Once its COMMIT is sent: the transaction's id and the last lsn it assigned.
    sent: Option<(i64, u64)>,
    commit_time: std::time::Duration,
}

/// Commits one group; true if it failed on the connection (not on a batch's own terms).
fn commit_group(
    conn: &mut Conn<'_>,
    group: Vec<Write>,
    committed: &watch::Sender<u64>,
    token: u64,
    report: Report<'_>,
    metrics: &StoreMetrics,
) -> bool {
    let (requests, answers): (Vec<Request>, Vec<Answer>) =
        group.into_iter().map(Write::split).unzip();
    let mut attempts = 0;
    let (done, outcome) = loop {
        attempts += 1;
        let mut done = Attempt::default();
        let mut outcome = attempt(&conn.client, &mut conn.cache, &requests, &mut done, token);
        if outcome.is_err() && !conn.client.is_closed() {
            // Whatever the transaction did is undone (after a failed COMMIT there is none).
            let _ = conn.client.wait(conn.client.batch_execute("ROLLBACK"));
        }
        // Whether the transaction is known to have changed nothing although its connection
        // failed (before its COMMIT was sent, or resolved aborted after).
        let mut undone = outcome.is_err() && done.sent.is_none() && conn.client.is_closed();
        if let (Err(e), Some((xid, _))) = (&outcome, done.sent)
            && conn.client.is_closed()
        {
            // The COMMIT got no answer: the transaction's status says what happened.
            outcome = match super::resolve::commit_outcome(conn.reconnect, xid, token, e) {
                Ok((fresh, committed_after_all)) => {
                    // The statements were prepared on the dropped connection.
                    conn.replace(fresh);
                    undone = !committed_after_all;
                    if committed_after_all { Ok(()) } else { outcome }
                }
                Err(unknown) => Err(unknown),
            };
        }
        match outcome {
            Err(e)
                if done.sent.is_none() && xid::retryable(&e) && attempts < GROUP_ATTEMPTS_MAX =>
            {
                tracing::debug!(error = %e, attempts, "the group met another writer; it runs again");
            }
            // The connection failed (the server went, the network, a deadline) and nothing of
            // the group committed: it runs again, whole, on a fresh connection, rather than
            // fail writes a moment's outage did not touch.
            Err(e) if undone && attempts < GROUP_ATTEMPTS_MAX => {
                tracing::info!(error = %e, attempts, "the group's connection failed; it runs again");
                if conn.client.is_closed() {
                    match reconnect_within(conn.reconnect, metrics) {
                        Some(fresh) => conn.replace(fresh),
                        None => break (done, Err(e)),
                    }
                }
            }
            outcome => break (done, outcome),
        }
    };
    let mut outcomes = done.outcomes.into_iter();
    match outcome {
        Ok(()) => {
            report(true, done.commit_time, attempts - 1);
            for to in answers {
                to.send(answer(outcomes.next().flatten(), None));
            }
            let last_lsn = done.sent.map_or(0, |(_, lsn)| lsn);
            if !done.sent.is_some_and(|(xid, lsn)| wrote_events(xid, lsn)) {
                return false;
            }
            // Every commit wakes the subscriptions, also one whose lsns sort below another's
            // already announced: what it wrote may be what held their reads back.
            committed.send_modify(|last| *last = (*last).max(last_lsn));
            false
        }
        Err(e) => {
            // Failed on its connection before its COMMIT was sent (nothing of it committed)
            // while the database does not answer: the callers hear why.
            let e = match e {
                Error::Storage { .. } if done.sent.is_none() => waited_out(metrics).unwrap_or(e),
                e => e,
            };
            tracing::warn!(error = %e, attempts, "a group commit failed; its writes are rolled back");
            report(false, done.commit_time, attempts - 1);
            for to in answers {
                to.send(answer(outcomes.next().flatten(), Some(&e)));
            }
            matches!(e, Error::Storage { .. } | Error::Unavailable { .. }) && !xid::retryable(&e)
        }
    }
}

/// Whether the group of transaction `xid` that assigned lsns up to `last_lsn` wrote events.
fn wrote_events(xid: i64, last_lsn: u64) -> bool {
    xid::base(xid).is_ok_and(|base| last_lsn > base)
}

/// Begins the group's transaction ([`super::group::begin`]) and plans and writes its
/// appends together ([`super::group::append_all`]), their outcomes into `done`: the
/// transaction's id, and the counters after the appends.
fn begin_with_appends(
    tx: &mut Tx<'_, '_>,
    requests: &[Request],
    done: &mut Attempt,
) -> Result<(i64, Counters), Error> {
    let mut appends = Vec::new();
    let mut batches = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        if let Request::Append(batch) = request {
            appends.push(i);
            batches.push(batch);
        }
    }
    let begun = super::group::begin(tx, &batches)?;
    let base = xid::base(begun.xid)?;
    let mut counters = Counters { last_lsn: base, last_checkpoint_id: base };
    if batches.is_empty() {
        return Ok((begun.xid, counters));
    }
    // Each attempt plans a copy of each batch but its events (changed to the database's
    // clock), and reads the events where they are: the requests are kept whole, for an
    // attempt after this one, and no event is copied.
    let kept = batches.iter().map(|batch| {
        let mut planned = without_events(batch);
        on_database_clock(&mut planned, begun.now_ms);
        (planned, batch.events.as_slice())
    });
    let xid = begun.xid;
    let planned = super::group::append_all(begun.rows, &mut counters, kept.collect())?;
    for (i, r) in appends.into_iter().zip(planned) {
        done.outcomes[i] = Some(r.map(Outcome::Append));
    }
    Ok((xid, counters))
}

/// Runs `requests` in one transaction: appends planned and written together, then each other
/// request in a savepoint. `Err` when the transaction failed (its outcomes so far stay in
/// `done`, for the requests that failed on their own terms; the caller rolls it back).
fn attempt(
    client: &Client,
    cache: &mut Statements,
    requests: &[Request],
    done: &mut Attempt,
    token: u64,
) -> Result<(), Error> {
    done.outcomes.resize_with(requests.len(), || None);
    let mut tx = Tx { client, cache };
    let (xid, counters) = begin_with_appends(&mut tx, requests, done)?;
    let base = xid::base(xid)?;
    // A request alone in its group needs no savepoint: if it fails, nothing of it commits.
    let alone = requests.len() == 1;
    for (i, request) in requests.iter().enumerate() {
        let outcome = match request {
            Request::Append(_) => continue,
            Request::DeleteCheckpoint(id) => savepoint(&mut tx, alone, |tx| {
                remove_checkpoints(
                    tx,
                    "SELECT id, info FROM cairn_checkpoints WHERE id = $1 FOR UPDATE",
                    &[&to_db(id.0)?],
                )
                .map(|n| Outcome::Delete(n > 0))
            }),
            Request::ClearCheckpoints(thread) => savepoint(&mut tx, alone, |tx| {
                remove_checkpoints(
                    tx,
                    "SELECT id, info FROM cairn_checkpoints WHERE thread = $1 FOR UPDATE",
                    &[&thread.as_str()],
                )
                .map(Outcome::Clear)
            }),
            Request::Prune(thread, keep) => {
                savepoint(&mut tx, alone, |tx| prune(tx, xid, thread, *keep).map(Outcome::Prune))
            }
            Request::DeleteThread(thread, options) => savepoint(&mut tx, alone, |tx| {
                super::delete::delete_thread(tx, thread, *options).map(Outcome::DeleteThread)
            }),
        };
        // A savepoint that could not be set or ended means the connection failed (or the
        // transaction met another writer): the whole group fails.
        let broken = connection_failed(&outcome);
        done.outcomes[i] = Some(outcome);
        if let Some(e) = broken {
            return Err(e);
        }
    }
    // The group's requests were capped to fit (see `run`): more would be a bug.
    assert!(
        counters.last_lsn - base < IDS_PER_TRANSACTION
            && counters.last_checkpoint_id - base < IDS_PER_TRANSACTION,
        "a group assigned more lsns or checkpoint ids than its transaction's range"
    );
    done.sent = Some((xid, counters.last_lsn));
    let started = std::time::Instant::now();
    let end = super::resolve::mark_and_commit(token);
    let commit = client.batch_execute(&end);
    let committed = if wrote_events(xid, counters.last_lsn) {
        // Tell the other processes, after the commit (a NOTIFY inside the transaction would
        // take a cluster-wide lock at commit): their subscriptions and pollers wake at once.
        // Sent behind the COMMIT without waiting for its answer (the server runs it after the
        // COMMIT, in a transaction of its own), and without a WAL flush of its own: a lost
        // notification (or one for a COMMIT that failed) costs a delay or a look, never an
        // event: the listeners read the log by cursor.
        let notify = format!(
            "BEGIN; SET LOCAL synchronous_commit = off; SELECT pg_notify('{}', '{} {token:x}'); COMMIT",
            super::listen::CHANNEL,
            counters.last_lsn,
        );
        let (committed, notified) =
            client.wait(futures::future::join(commit, client.batch_execute(&notify)));
        if let Err(e) = notified {
            tracing::debug!(error = %e, "commit notification not sent");
        }
        committed
    } else {
        client.wait(commit)
    };
    done.commit_time = started.elapsed();
    committed.map_err(pg_error("commit"))
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

/// The lsns and checkpoint ids a write may assign, at most.
fn ids(write: &Write) -> u64 {
    match write {
        Write::Append(batch, _) => (batch.events.len() + batch.checkpoints.len()) as u64,
        _ => 0,
    }
}

/// A copy of `batch` without its events.
fn without_events(batch: &Batch) -> Batch {
    let Batch {
        events: _,
        threads,
        checkpoints,
        payloads,
        locks,
        leases,
        guards,
        runner,
        wakes,
        signals,
        copied_signals,
        queues,
    } = batch;
    Batch {
        events: Vec::new(),
        threads: threads.clone(),
        checkpoints: checkpoints.clone(),
        payloads: payloads.clone(),
        locks: locks.clone(),
        leases: leases.clone(),
        guards: guards.clone(),
        runner: runner.clone(),
        wakes: wakes.clone(),
        signals: signals.clone(),
        copied_signals: copied_signals.clone(),
        queues: queues.clone(),
    }
}

/// Leases and resource locks are timed by the database's clock, never by an engine's: an
/// expiry and every check against it use `now_ms` (so an engine whose clock runs ahead cannot
/// take over a live lease or lock, nor one whose clock lags keep a dead one).
fn on_database_clock(batch: &mut Batch, now_ms: u64) {
    for op in &mut batch.locks {
        match op {
            crate::batch::LockOp::Acquire { now_ms: t, .. }
            | crate::batch::LockOp::Renew { now_ms: t, .. } => {
                *t = now_ms;
            }
            _ => {}
        }
    }
    let (guards, leases) = batch.all_guards_and_leases_mut();
    for op in leases {
        match op {
            crate::batch::LeaseOp::Acquire { now_ms: t, .. }
            | crate::batch::LeaseOp::Renew { now_ms: t, .. } => {
                *t = now_ms;
            }
            crate::batch::LeaseOp::Release { .. } => {}
        }
    }
    for guard in guards {
        if let crate::batch::Guard::Lease { now_ms: t, .. } = guard {
            *t = now_ms;
        }
    }
}

/// Writes locks as they now stand: `None` removes one. A lock not in `stored` (the rows the
/// group found and locked) is inserted without `ON CONFLICT`: one another writer created
/// meanwhile fails the group, which runs again and sees it.
pub(super) fn write_locks<'l>(
    tx: &mut Tx<'_, '_>,
    stored: &std::collections::HashSet<String>,
    locks: impl Iterator<Item = (&'l str, Option<&'l LockRecord>)>,
) -> Result<(), Error> {
    let op = pg_error("append");
    for (name, lock) in locks {
        let Some(lock) = lock else {
            tx.execute("DELETE FROM cairn_locks WHERE name = $1", &[&name]).map_err(&op)?;
            continue;
        };
        let sql = if stored.contains(name) {
            "UPDATE cairn_locks SET owner = $2, record = $3 WHERE name = $1"
        } else {
            "INSERT INTO cairn_locks (name, owner, record) VALUES ($1, $2, $3)"
        };
        tx.execute(sql, &[&name, &lock.owner, &codec::encode_lock(lock)?]).map_err(&op)?;
    }
    Ok(())
}

/// Removes `thread`'s events up to the seq checkpoint `keep` covers, and its older checkpoints.
fn prune(
    tx: &mut Tx<'_, '_>,
    xid: i64,
    thread: &ThreadId,
    keep: CheckpointId,
) -> Result<Pruned, Error> {
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
    let mut state = Cached::fresh(tx, xid);
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
        events = super::events::prune(tx, thread, covers)?;
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
