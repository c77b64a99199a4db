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

/// A command's result, waiting for its commit.
enum Done {
    Append(Reply<Appended>, Result<Appended, Error>),
    Delete(Reply<bool>, Result<bool, Error>),
    Clear(Reply<u64>, Result<u64, Error>),
    Prune(Reply<Pruned>, Result<Pruned, Error>),
}

impl Done {
    /// Replies; a result that was `Ok` becomes `failure` when the commit failed.
    fn send(self, failure: Option<&Error>) {
        fn pick<T>(result: Result<T, Error>, failure: Option<&Error>) -> Result<T, Error> {
            match (result, failure) {
                (Ok(_), Some(error)) => Err(error.clone()),
                (result, _) => result,
            }
        }
        // A caller that dropped its Pending no longer wants the answer: ignore send errors.
        match self {
            Done::Append(tx, r) => drop(tx.send(pick(r, failure))),
            Done::Delete(tx, r) => drop(tx.send(pick(r, failure))),
            Done::Clear(tx, r) => drop(tx.send(pick(r, failure))),
            Done::Prune(tx, r) => drop(tx.send(pick(r, failure))),
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
            let group = self.gather(first, &rx);
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
        let result = self
            .db
            .begin_write()
            .map_err(|e| Error::storage("begin write", e))
            .and_then(|txn| txn.commit().map_err(|e| Error::storage("commit", e)));
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
        let mut done = Vec::with_capacity(work.len());
        self.last_group = work.len();
        let started = Instant::now();
        let outcome = self.run_in_txn(work, durable, &mut done);
        self.last_commit = started.elapsed();
        tracing::trace!(writes = self.last_group, commit = ?self.last_commit, durable, "group committed");
        match outcome {
            Ok(()) => {
                if durable {
                    self.dirty = false;
                    self.last_durable = Instant::now();
                } else {
                    self.dirty = true;
                }
                self.committed.send_replace(self.counters.last_lsn);
                for d in done {
                    d.send(None);
                }
            }
            Err(error) => {
                self.poisoned.store(true, Ordering::Release);
                tracing::error!(%error, "group commit failed; the store is poisoned");
                for d in done {
                    d.send(Some(&error));
                }
            }
        }
        close
    }

    /// Runs every command in one transaction and commits it. On `Err` the transaction was not
    /// committed (or its commit failed) and the counters must not be trusted: the caller poisons.
    fn run_in_txn(
        &mut self,
        work: Vec<Write>,
        durable: bool,
        done: &mut Vec<Done>,
    ) -> Result<(), Error> {
        let mut txn = match self.db.begin_write() {
            Ok(txn) => txn,
            Err(error) => {
                let error = Error::storage("begin write", error);
                for command in work {
                    refuse(command, &error);
                }
                return Err(error);
            }
        };
        let level = if durable { RedbDurability::Immediate } else { RedbDurability::None };
        let mut fatal =
            txn.set_durability(level).err().map(|e| Error::storage("set durability", e));
        if fatal.is_none() {
            fatal = self.apply_all(&txn, work, done).err();
        } else {
            for command in work {
                refuse(command, fatal.as_ref().unwrap_or(&Error::Poisoned));
            }
        }
        if let Some(error) = fatal {
            abort(txn);
            return Err(error);
        }
        txn.commit().map_err(|e| Error::storage("commit", e))
    }

    fn apply_all(
        &mut self,
        txn: &WriteTransaction,
        work: Vec<Write>,
        done: &mut Vec<Done>,
    ) -> Result<(), Error> {
        let mut tables = match Tables::open(txn) {
            Ok(tables) => tables,
            Err(error) => {
                for command in work {
                    refuse(command, &error);
                }
                return Err(error);
            }
        };
        let removes = work.iter().any(|w| !matches!(w, Write::Append(..)));
        let mut commands = work.into_iter();
        while let Some(command) = commands.next() {
            let (d, fatal) = self.apply_one(&mut tables, command);
            done.push(d);
            if let Some(error) = fatal {
                for rest in commands {
                    refuse(rest, &error);
                }
                return Err(error);
            }
        }
        if removes {
            write_counters(&mut tables.meta, self.counters)?;
        }
        Ok(())
    }

    /// Applies one command: its result (which may be a rejection), and an error if the
    /// transaction is now half-written.
    fn apply_one(&mut self, tables: &mut Tables<'_>, command: Write) -> (Done, Option<Error>) {
        match command {
            Write::Append(batch, tx) => match apply::plan(tables, self.counters, batch) {
                Err(rejected) => (Done::Append(tx, Err(rejected)), None),
                Ok(plan) => match apply::apply(tables, &mut self.counters, plan) {
                    Ok(appended) => (Done::Append(tx, Ok(appended)), None),
                    Err(e) => (Done::Append(tx, Err(e.clone())), Some(e)),
                },
            },
            Write::DeleteCheckpoint(id, tx) => match prune::plan_delete(tables, id) {
                Err(rejected) => (Done::Delete(tx, Err(rejected)), None),
                Ok(infos) => match prune::remove_checkpoints(tables, &infos) {
                    Ok(()) => (Done::Delete(tx, Ok(!infos.is_empty())), None),
                    Err(e) => (Done::Delete(tx, Err(e.clone())), Some(e)),
                },
            },
            Write::ClearCheckpoints(thread, tx) => match prune::plan_clear(tables, &thread) {
                Err(rejected) => (Done::Clear(tx, Err(rejected)), None),
                Ok(infos) => match prune::remove_checkpoints(tables, &infos) {
                    Ok(()) => (Done::Clear(tx, Ok(infos.len() as u64)), None),
                    Err(e) => (Done::Clear(tx, Err(e.clone())), Some(e)),
                },
            },
            Write::Prune(thread, keep, tx) => match prune::plan_prune(tables, &thread, keep) {
                Err(rejected) => (Done::Prune(tx, Err(rejected)), None),
                Ok(plan) => match prune::apply_prune(tables, plan) {
                    Ok(pruned) => (Done::Prune(tx, Ok(pruned)), None),
                    Err(e) => (Done::Prune(tx, Err(e.clone())), Some(e)),
                },
            },
        }
    }
}

/// Answers a command with `error` without running it.
fn refuse(write: Write, error: &Error) {
    match write {
        Write::Append(_, tx) => drop(tx.send(Err(error.clone()))),
        Write::DeleteCheckpoint(_, tx) => drop(tx.send(Err(error.clone()))),
        Write::ClearCheckpoints(_, tx) => drop(tx.send(Err(error.clone()))),
        Write::Prune(_, _, tx) => drop(tx.send(Err(error.clone()))),
    }
}

fn abort(txn: WriteTransaction) {
    if let Err(error) = txn.abort() {
        tracing::error!(%error, "aborting a failed group's transaction failed");
    }
}
