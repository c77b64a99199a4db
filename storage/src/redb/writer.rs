//! The group-commit writer: one std thread owns every write transaction.
//!
//! Callers queue [`Command`]s on a bounded channel (`Options::queue_depth`). The writer takes
//! the first, drains up to `group_max_batches - 1` more that are already waiting, applies each in
//! one transaction (a rejected batch changes nothing, see [`super::apply`]), commits once, and
//! replies to all. Under `Durability::Periodic` it also commits durably when the interval since
//! the last durable commit has passed, with an empty commit if nothing else is queued.
//!
//! After a failed commit (or a failure half-way through applying a batch) the outcome of the
//! whole group is unknown: every caller in it gets the error, and the store is poisoned, refusing
//! writes until reopened (redb repairs on reopen; the counters are reread from the file).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use ::redb::{Database, Durability as RedbDurability, WriteTransaction};
use tokio::sync::{oneshot, watch};

use super::guard::guard;
use super::tables::{Counters, Tables, write_counters};
use super::{apply, prune};
use crate::{Appended, Batch, CheckpointId, Durability, Error, Pruned, ThreadId};

type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// Messages to the writer.
pub(crate) enum Command {
    /// A write to apply in the next group.
    Write(Write),
    /// Make everything durable and stop.
    Close(std::sync::mpsc::Sender<Result<(), Error>>),
}

/// A write for the writer.
pub(crate) enum Write {
    /// Append a batch.
    Append(Batch, Reply<Appended>),
    /// Delete one checkpoint.
    DeleteCheckpoint(CheckpointId, Reply<bool>),
    /// Delete a thread's checkpoints.
    ClearCheckpoints(ThreadId, Reply<u64>),
    /// Prune a thread up to a checkpoint.
    Prune(ThreadId, CheckpointId, Reply<Pruned>),
}

/// What a write asks for, without its reply channel: this is what runs inside the guarded
/// transaction, so a panic there cannot drop a caller's reply unanswered.
enum Op {
    Append(Batch),
    DeleteCheckpoint(CheckpointId),
    ClearCheckpoints(ThreadId),
    Prune(ThreadId, CheckpointId),
}

/// Where a write's answer goes.
enum Answer {
    Append(Reply<Appended>),
    Delete(Reply<bool>),
    Clear(Reply<u64>),
    Prune(Reply<Pruned>),
}

/// A write's result before its commit completes.
enum Outcome {
    Append(Appended),
    Delete(bool),
    Clear(u64),
    Prune(Pruned),
}

impl Write {
    fn split(self) -> (Op, Answer) {
        match self {
            Write::Append(batch, tx) => (Op::Append(batch), Answer::Append(tx)),
            Write::DeleteCheckpoint(id, tx) => (Op::DeleteCheckpoint(id), Answer::Delete(tx)),
            Write::ClearCheckpoints(thread, tx) => {
                (Op::ClearCheckpoints(thread), Answer::Clear(tx))
            }
            Write::Prune(thread, keep, tx) => (Op::Prune(thread, keep), Answer::Prune(tx)),
        }
    }
}

impl Answer {
    /// Replies with `result`; a caller that dropped its `Pending` no longer wants the answer, so
    /// send errors are ignored. An outcome of the wrong shape is a bug of the writer.
    fn send(self, result: Result<Outcome, Error>) {
        fn mismatch() -> Error {
            Error::Invalid { detail: "internal: a write got the outcome of another kind".into() }
        }
        match (self, result) {
            (Answer::Append(tx), Ok(Outcome::Append(a))) => drop(tx.send(Ok(a))),
            (Answer::Delete(tx), Ok(Outcome::Delete(d))) => drop(tx.send(Ok(d))),
            (Answer::Clear(tx), Ok(Outcome::Clear(c))) => drop(tx.send(Ok(c))),
            (Answer::Prune(tx), Ok(Outcome::Prune(p))) => drop(tx.send(Ok(p))),
            (answer, Ok(_)) => answer.send(Err(mismatch())),
            (Answer::Append(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::Delete(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::Clear(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::Prune(tx), Err(e)) => drop(tx.send(Err(e))),
        }
    }
}

/// The writer thread's state.
pub(crate) struct Writer {
    pub(crate) db: Arc<Database>,
    pub(crate) counters: Counters,
    pub(crate) durability: Durability,
    pub(crate) group_max: usize,
    pub(crate) poisoned: Arc<AtomicBool>,
    pub(crate) committed: watch::Sender<u64>,
    /// Non-durable commits since the last durable one.
    pub(crate) dirty: bool,
    pub(crate) last_durable: Instant,
    /// Writes in the last group, the gathering target for the next (see `gather`).
    pub(crate) last_group: usize,
    /// How long the last group took to apply and commit, the gathering window for the next.
    pub(crate) last_commit: Duration,
}

/// The longest the writer waits to fill a group beyond what is already queued: well under a
/// disk's fsync time, so a caller that stopped writing costs the others little.
const GATHER_WAIT_MAX: Duration = Duration::from_millis(2);

impl Writer {
    /// Runs until a `Close` command or until every sender is gone.
    pub(crate) fn run(mut self, rx: Receiver<Command>) {
        self.serve(&rx);
        drop(rx);
        // If this is the last handle on the database, dropping it closes redb, which may read
        // pages: guarded like every other call into redb.
        let db = self.db;
        if let Err(error) = guard("close", move || {
            drop(db);
            Ok(())
        }) {
            tracing::error!(%error, "closing the database failed");
        }
    }

    fn serve(&mut self, rx: &Receiver<Command>) {
        loop {
            let first = match self.flush_deadline() {
                Some(deadline) => {
                    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                        Ok(command) => command,
                        Err(RecvTimeoutError::Timeout) => {
                            self.flush_logged();
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(command) => command,
                    Err(_) => break,
                },
            };
            let group = self.gather(first, rx);
            if let Some(close) = self.commit_group(group) {
                let result = self.flush();
                // Later commands find the channel closed once `rx` drops; answer any queued now.
                while let Ok(command) = rx.try_recv() {
                    match command {
                        Command::Write(write) => refuse(write, &Error::Closed),
                        Command::Close(other) => drop(other.send(Ok(()))),
                    }
                }
                drop(close.send(result));
                return;
            }
        }
        self.flush_logged();
    }

    /// Collects the group that starts with `first`.
    ///
    /// Whatever is already queued joins at once. Beyond that, the writer waits a little for the
    /// callers it answered last time: each of them is likely to send its next write as soon as it
    /// wakes, and committing before they do would alternate one tiny group with one large group,
    /// halving throughput under concurrency. So it waits until as many writes as the last group
    /// held have arrived, or for at most the last commit's duration (capped at
    /// [`GATHER_WAIT_MAX`]), whichever comes first. A lone caller (last group of one) never waits.
    fn gather(&self, first: Command, rx: &Receiver<Command>) -> Vec<Command> {
        let mut group = vec![first];
        let target = self.last_group.clamp(1, self.group_max);
        let deadline = Instant::now() + self.last_commit.min(GATHER_WAIT_MAX);
        while group.len() < self.group_max {
            if let Ok(command) = rx.try_recv() {
                group.push(command);
                continue;
            }
            let now = Instant::now();
            if group.len() >= target || now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(command) => group.push(command),
                Err(_) => break,
            }
        }
        group
    }

    fn flush_deadline(&self) -> Option<Instant> {
        match self.durability {
            Durability::Periodic { interval_ms } if self.dirty => {
                Some(self.last_durable + Duration::from_millis(interval_ms))
            }
            _ => None,
        }
    }

    fn flush_logged(&mut self) {
        if let Err(error) = self.flush() {
            tracing::error!(%error, "durable flush failed; the store is poisoned");
        }
    }

    /// Makes every non-durable commit durable with an empty durable commit.
    fn flush(&mut self) -> Result<(), Error> {
        if !self.dirty {
            return Ok(());
        }
        if self.poisoned.load(Ordering::Acquire) {
            // Nothing more can be made durable until reopen; forget the debt so the periodic
            // timer does not fire again and again.
            self.dirty = false;
            return Err(Error::Poisoned);
        }
        let result = guard("flush", || {
            let txn = self.db.begin_write().map_err(|e| Error::storage("begin write", e))?;
            txn.commit().map_err(|e| Error::storage("commit", e))
        });
        match result {
            Ok(()) => {
                self.dirty = false;
                self.last_durable = Instant::now();
                Ok(())
            }
            Err(error) => {
                self.poisoned.store(true, Ordering::Release);
                self.dirty = false;
                Err(error)
            }
        }
    }

    /// Applies and commits one group; returns a `Close` command found in it.
    fn commit_group(
        &mut self,
        group: Vec<Command>,
    ) -> Option<std::sync::mpsc::Sender<Result<(), Error>>> {
        let mut close = None;
        let mut work = Vec::with_capacity(group.len());
        for command in group {
            match command {
                // Anything queued after Close is refused, like anything sent after it.
                Command::Write(write) if close.is_some() => refuse(write, &Error::Closed),
                Command::Write(write) => work.push(write),
                Command::Close(reply) if close.is_none() => close = Some(reply),
                Command::Close(reply) => drop(reply.send(Ok(()))),
            }
        }
        if work.is_empty() {
            return close;
        }
        if self.poisoned.load(Ordering::Acquire) {
            for command in work {
                refuse(command, &Error::Poisoned);
            }
            return close;
        }
        let durable = match self.durability {
            Durability::Immediate => true,
            Durability::Periodic { interval_ms } => {
                self.last_durable.elapsed() >= Duration::from_millis(interval_ms)
            }
            Durability::None => false,
        };
        let (ops, answers): (Vec<Op>, Vec<Answer>) = work.into_iter().map(Write::split).unzip();
        self.last_group = ops.len();
        let started = Instant::now();
        let mut results = Vec::with_capacity(ops.len());
        // A panic inside redb (a damaged page met while updating a B-tree) becomes an error here,
        // and is handled like a failed commit: the writer thread survives, the store poisons.
        let outcome = guard("commit", || self.run_in_txn(ops, durable, &mut results));
        self.last_commit = started.elapsed();
        tracing::trace!(writes = self.last_group, commit = ?self.last_commit, durable, "group committed");
        let failure = match outcome {
            Ok(()) => {
                if durable {
                    self.dirty = false;
                    self.last_durable = Instant::now();
                } else {
                    self.dirty = true;
                }
                self.committed.send_replace(self.counters.last_lsn);
                None
            }
            Err(error) => {
                self.poisoned.store(true, Ordering::Release);
                tracing::error!(%error, "group commit failed; the store is poisoned");
                Some(error)
            }
        };
        let mut results = results.into_iter();
        for answer in answers {
            // A write that was rejected keeps its own error (it changed nothing); one that was
            // applied, or never reached, gets the commit's failure.
            let result = match (results.next(), &failure) {
                (Some(Err(rejected)), _) => Err(rejected),
                (Some(Ok(outcome)), None) => Ok(outcome),
                (_, Some(error)) => Err(error.clone()),
                (None, None) => {
                    Err(Error::Invalid { detail: "internal: a write went unanswered".into() })
                }
            };
            answer.send(result);
        }
        close
    }

    /// Runs every op in one transaction and commits it, pushing one result per op applied. On
    /// `Err` the transaction was not committed (or its commit failed) and the counters must not be
    /// trusted: the caller poisons.
    fn run_in_txn(
        &mut self,
        ops: Vec<Op>,
        durable: bool,
        results: &mut Vec<Result<Outcome, Error>>,
    ) -> Result<(), Error> {
        let mut txn = self.db.begin_write().map_err(|e| Error::storage("begin write", e))?;
        let level = if durable { RedbDurability::Immediate } else { RedbDurability::None };
        let applied = txn
            .set_durability(level)
            .map_err(|e| Error::storage("set durability", e))
            .and_then(|()| self.apply_all(&txn, ops, results));
        if let Err(error) = applied {
            abort(txn);
            return Err(error);
        }
        txn.commit().map_err(|e| Error::storage("commit", e))
    }

    fn apply_all(
        &mut self,
        txn: &WriteTransaction,
        ops: Vec<Op>,
        results: &mut Vec<Result<Outcome, Error>>,
    ) -> Result<(), Error> {
        let mut tables = Tables::new(txn);
        let removes = ops.iter().any(|op| !matches!(op, Op::Append(..)));
        for op in ops {
            let (result, fatal) = self.apply_one(&mut tables, op);
            results.push(result);
            if let Some(error) = fatal {
                return Err(error);
            }
        }
        if removes {
            write_counters(tables.meta()?, self.counters)?;
        }
        Ok(())
    }

    /// Applies one op: its result (which may be a rejection), and an error if the transaction is
    /// now half-written.
    fn apply_one(
        &mut self,
        tables: &mut Tables<'_>,
        op: Op,
    ) -> (Result<Outcome, Error>, Option<Error>) {
        fn written<T>(
            result: Result<T, Error>,
            outcome: impl FnOnce(T) -> Outcome,
        ) -> (Result<Outcome, Error>, Option<Error>) {
            match result {
                Ok(value) => (Ok(outcome(value)), None),
                Err(e) => (Err(e.clone()), Some(e)),
            }
        }
        match op {
            Op::Append(batch) => match apply::plan(tables, self.counters, batch) {
                Err(rejected) => (Err(rejected), None),
                Ok(plan) => {
                    written(apply::apply(tables, &mut self.counters, plan), Outcome::Append)
                }
            },
            Op::DeleteCheckpoint(id) => match prune::plan_delete(tables, id) {
                Err(rejected) => (Err(rejected), None),
                Ok(infos) => written(prune::remove_checkpoints(tables, &infos), |()| {
                    Outcome::Delete(!infos.is_empty())
                }),
            },
            Op::ClearCheckpoints(thread) => match prune::plan_clear(tables, &thread) {
                Err(rejected) => (Err(rejected), None),
                Ok(infos) => written(prune::remove_checkpoints(tables, &infos), |()| {
                    Outcome::Clear(infos.len() as u64)
                }),
            },
            Op::Prune(thread, keep) => match prune::plan_prune(tables, &thread, keep) {
                Err(rejected) => (Err(rejected), None),
                Ok(plan) => written(prune::apply_prune(tables, plan), Outcome::Prune),
            },
        }
    }
}

/// Answers a write with `error` without running it.
fn refuse(write: Write, error: &Error) {
    write.split().1.send(Err(error.clone()));
}

fn abort(txn: WriteTransaction) {
    if let Err(error) = txn.abort() {
        tracing::error!(%error, "aborting a failed group's transaction failed");
    }
}
