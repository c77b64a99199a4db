//! A write request to a store's writer thread, as both backends take it: the [`Write`] a caller
//! queues, split by the writer into what it asks ([`Request`], data the writer may plan again)
//! and where its answer goes ([`Answer`]); the answer is an [`Outcome`] of the request's kind.

use tokio::sync::oneshot;

use crate::batch::{Appended, Batch, Guard, LeaseOp, Pruned};
use crate::delete::{DeleteOptions, Deleted};
use crate::error::Error;
use crate::ids::{CheckpointId, ThreadId};

/// Where one request's answer goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// A write for the writer, with its reply channel.
pub(crate) enum Write {
    /// Append a batch.
    Append(Batch, Reply<Appended>),
    /// Delete one checkpoint.
    DeleteCheckpoint(CheckpointId, Reply<bool>),
    /// Delete a thread's checkpoints.
    ClearCheckpoints(ThreadId, Reply<u64>),
    /// Prune a thread up to a checkpoint.
    Prune(ThreadId, CheckpointId, Reply<Pruned>),
    /// Delete a thread whole.
    DeleteThread(ThreadId, DeleteOptions, Reply<Option<Deleted>>),
}

/// What a write asks for, without its reply channel: what runs inside the writer's
/// transaction (so a panic there cannot drop a caller's reply unanswered, and a transaction
/// run again plans the same requests).
pub(crate) enum Request {
    Append(Batch),
    DeleteCheckpoint(CheckpointId),
    ClearCheckpoints(ThreadId),
    Prune(ThreadId, CheckpointId),
    DeleteThread(ThreadId, DeleteOptions),
}

/// Where a write's answer goes.
pub(crate) enum Answer {
    Append(Reply<Appended>),
    Delete(Reply<bool>),
    Clear(Reply<u64>),
    Prune(Reply<Pruned>),
    DeleteThread(Reply<Option<Deleted>>),
}

/// A request's result, of its kind.
pub(crate) enum Outcome {
    Append(Appended),
    Delete(bool),
    Clear(u64),
    Prune(Pruned),
    DeleteThread(Option<Deleted>),
}

impl Write {
    /// The thread the write is for, if it names one (a batch: its first event's, else its first
    /// thread record's, lease's or guard's thread).
    pub(crate) fn thread(&self) -> Option<&ThreadId> {
        match self {
            Write::Append(batch, _) => batch
                .events
                .first()
                .map(|e| &e.thread)
                .or_else(|| batch.threads.first().map(|t| &t.id))
                .or_else(|| batch.all_leases().next().map(LeaseOp::thread))
                .or_else(|| batch.all_guards().next().map(Guard::thread)),
            Write::ClearCheckpoints(thread, _)
            | Write::Prune(thread, _, _)
            | Write::DeleteThread(thread, _, _) => Some(thread),
            Write::DeleteCheckpoint(..) => None,
        }
    }

    /// The request and its reply channel, apart.
    pub(crate) fn split(self) -> (Request, Answer) {
        match self {
            Write::Append(batch, tx) => (Request::Append(batch), Answer::Append(tx)),
            Write::DeleteCheckpoint(id, tx) => (Request::DeleteCheckpoint(id), Answer::Delete(tx)),
            Write::ClearCheckpoints(thread, tx) => {
                (Request::ClearCheckpoints(thread), Answer::Clear(tx))
            }
            Write::Prune(thread, keep, tx) => (Request::Prune(thread, keep), Answer::Prune(tx)),
            Write::DeleteThread(thread, options, tx) => {
                (Request::DeleteThread(thread, options), Answer::DeleteThread(tx))
            }
        }
    }
}

impl Answer {
    /// Replies with `result`; a caller that dropped its `Pending` no longer wants the answer, so
    /// send errors are ignored. An outcome of the wrong kind is a bug of the writer.
    pub(crate) fn send(self, result: Result<Outcome, Error>) {
        match (self, result) {
            (Answer::Append(tx), Ok(Outcome::Append(a))) => drop(tx.send(Ok(a))),
            (Answer::Delete(tx), Ok(Outcome::Delete(d))) => drop(tx.send(Ok(d))),
            (Answer::Clear(tx), Ok(Outcome::Clear(c))) => drop(tx.send(Ok(c))),
            (Answer::Prune(tx), Ok(Outcome::Prune(p))) => drop(tx.send(Ok(p))),
            (Answer::DeleteThread(tx), Ok(Outcome::DeleteThread(d))) => drop(tx.send(Ok(d))),
            // Each write's outcome is made by the request of its own kind.
            (_, Ok(_)) => unreachable!("a write got the outcome of another kind"),
            (Answer::Append(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::Delete(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::Clear(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::Prune(tx), Err(e)) => drop(tx.send(Err(e))),
            (Answer::DeleteThread(tx), Err(e)) => drop(tx.send(Err(e))),
        }
    }
}

/// Implements [`crate::Maintenance`] for a store whose `send(make)` queues the [`Write`] `make`
/// builds around a reply channel to its writer; `verify` is what its `verify` runs.
macro_rules! maintenance_through_writer {
    ($store:ty, $verify:expr) => {
        impl crate::store::Maintenance for $store {
            fn delete_checkpoint(
                &self,
                id: CheckpointId,
            ) -> Result<crate::pending::Pending<bool>, crate::error::Error> {
                self.send(|tx| crate::request::Write::DeleteCheckpoint(id, tx))
            }

            fn clear_checkpoints(
                &self,
                thread: &crate::ids::ThreadId,
            ) -> Result<crate::pending::Pending<u64>, crate::error::Error> {
                let thread = thread.clone();
                self.send(|tx| crate::request::Write::ClearCheckpoints(thread, tx))
            }

            fn prune(
                &self,
                thread: &crate::ids::ThreadId,
                keep_from: crate::ids::CheckpointId,
            ) -> Result<crate::pending::Pending<crate::batch::Pruned>, crate::error::Error> {
                let thread = thread.clone();
                self.send(|tx| crate::request::Write::Prune(thread, keep_from, tx))
            }

            fn delete_thread(
                &self,
                thread: &crate::ids::ThreadId,
                options: crate::delete::DeleteOptions,
            ) -> Result<crate::pending::Pending<Option<crate::delete::Deleted>>, crate::error::Error> {
                let thread = thread.clone();
                self.send(|tx| crate::request::Write::DeleteThread(thread, options, tx))
            }

            fn verify(&self) -> Result<crate::store::VerifyReport, crate::error::Error> {
                let verify: fn(&Self) -> Result<crate::store::VerifyReport, crate::error::Error> = $verify;
                verify(self)
            }
        }
    };
}
pub(crate) use maintenance_through_writer;
