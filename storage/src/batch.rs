//! The unit of writing: a [`Batch`] is applied all-or-nothing in one commit.
//!
//! Order inside a batch: guards are checked against the state before the batch; then events are
//! appended (seq and lsn assigned), thread records upserted, checkpoints saved (each covering its
//! thread's last bookmark after this batch's events), payloads put, lock and lease operations
//! applied. A runner's guard and lease renewal ([`RunnerOps`]) take their places among the
//! guards (last) and the lease operations (first). Any failure rejects the whole batch and
//! leaves other batches of the same group commit unaffected.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::checkpoint::NewCheckpoint;
use crate::error::Error;
use crate::event::NewEvent;
use crate::ids::{Bookmark, CheckpointId, PayloadRef, Seq, ThreadId};
use crate::limits::TEXT_BYTES_MAX;
use crate::limits::{self, BATCH_BYTES_MAX, BATCH_EVENTS_MAX, BATCH_OPS_MAX, PAYLOAD_BYTES_MAX};
use crate::signal::{NewSignal, Signal};
use crate::thread::{ThreadRecord, ThreadStatus};

/// Writes applied atomically in one commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Events appended in order; seq and lsn are assigned by the writer.
    pub events: Vec<NewEvent>,
    /// Thread record upserts, applied after the events (the store fills `last`, `first_seq` and
    /// `lease`).
    pub threads: Vec<ThreadRecord>,
    /// Checkpoints; each covers its thread's last bookmark after this batch's events.
    pub checkpoints: Vec<NewCheckpoint>,
    /// Content-addressed payload puts (idempotent).
    pub payloads: Vec<Vec<u8>>,
    /// Lock operations, applied in order.
    pub locks: Vec<LockOp>,
    /// Thread lease operations, applied in order after the thread upserts.
    pub leases: Vec<LeaseOp>,
    /// Conditions checked against the state before the batch; any failing rejects it.
    pub guards: Vec<Guard>,
    /// The guard and lease operation a runner puts on each batch of the thread it drives (see
    /// [`RunnerOps`]): checked after `guards`, and applied before `leases`, as if they were
    /// their last and first entries. Boxed: a batch is moved a dozen times between its runner
    /// and the writer, and each move copies what it holds inline.
    pub runner: Option<Box<RunnerOps>>,
    /// When threads this batch upserts next need an engine although no runner drives them (a
    /// timer or a deadline): a hint for stores several engines share, which index it so that a
    /// worker looking for work reads only the threads due (PostgreSQL's `ready_at`). A thread
    /// upserted without a hint is "due now" there (looked at on every look, as without the
    /// index); a file ignores hints. Not a write: a batch of hints alone is empty.
    pub wakes: Vec<(ThreadId, Wake)>,
    /// Signals appended to their threads' inboxes (`docs/format.md` §2.3), in order; each gets
    /// the next number of its thread. Refused ([`Error::Finished`], [`Error::UnknownThread`])
    /// for a thread that has ended or does not exist as the batch sees it.
    pub signals: Vec<NewSignal>,
    /// Signals copied from another store with their numbers and send times
    /// ([`crate::copy`]), in order: each must be its thread's next number
    /// ([`Error::Invalid`] otherwise). Accepted whatever the thread's status, since each was
    /// accepted when it was sent; refused ([`Error::UnknownThread`]) for a thread that does not
    /// exist as the batch sees it.
    pub copied_signals: Vec<Signal>,
    /// Queue operations (`docs/queues.md`), applied last, in order. Independently of these, a
    /// thread record this batch moves to a finished status leaves its queue (its slot, or its
    /// place in line, is released in this batch's transaction).
    pub queues: Vec<crate::queue::QueueOp>,
}

/// What a runner puts on each batch of the thread it drives ([`Batch::runner`]): outside the
/// batch's vectors, which a runner's batch otherwise leaves empty (two vectors of one entry
/// each were two allocations a step, and two frees on the writer's thread; this is one).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use cairn_storage::{Batch, Guard, LeaseOp, RunnerOps, Seq, ThreadId};
/// let thread = ThreadId::new("t1")?;
/// let owner: Arc<str> = Arc::from("engine-a");
/// let mut batch = Batch::default();
/// batch.runner = Some(Box::new(RunnerOps {
///     guard: Guard::LastSeq { thread: thread.clone(), seq: Seq(12) },
///     lease: Some(LeaseOp::Renew { thread, owner, now_ms: 0, ttl_ms: 30_000 }),
/// }));
/// assert_eq!(batch.all_guards().count(), 1);
/// assert!(!batch.is_empty()); // a guard and a renewal are a write
/// # Ok::<(), cairn_storage::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerOps {
    /// Checked after [`Batch::guards`]: a runner's [`Guard::LastSeq`] on the last event it
    /// submitted before this batch.
    pub guard: Guard,
    /// Applied before [`Batch::leases`], if any: a runner's [`LeaseOp::Renew`] of its lease
    /// (none on a batch whose `leases` take or renew it).
    pub lease: Option<LeaseOp>,
}

/// When a thread no runner drives next needs an engine (see [`Batch::wakes`]).
///
/// # Examples
///
/// ```
/// use cairn_storage::{Batch, ThreadId, Wake};
/// let mut batch = Batch::default();
/// batch.wakes.push((ThreadId::new("t1")?, Wake::At(1_700_000_000_000)));
/// assert!(batch.is_empty()); // a hint writes nothing by itself
/// # Ok::<(), cairn_storage::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wake {
    /// At this engine-clock time in ms (a timer or a deadline falls due).
    At(u64),
    /// Only when someone acts on it (input, resume, a control), who then drives it: no engine
    /// needs to look for it.
    Never,
}

impl Batch {
    /// Checks the batch against [`crate::limits`] before it is queued.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] naming the first bound exceeded.
    pub fn check_limits(&self) -> Result<(), Error> {
        limits::check("BATCH_EVENTS_MAX", self.events.len(), BATCH_EVENTS_MAX)?;
        for count in [
            self.threads.len(),
            self.checkpoints.len(),
            self.payloads.len(),
            self.locks.len(),
            self.all_leases().count(),
            self.all_guards().count(),
            self.wakes.len(),
            self.signals.len(),
            self.copied_signals.len(),
            self.queues.len(),
        ] {
            limits::check("BATCH_OPS_MAX", count, BATCH_OPS_MAX)?;
        }
        let mut weight = 0usize;
        for event in &self.events {
            event.check_limits()?;
            weight += event.weight();
        }
        for thread in &self.threads {
            thread.check_limits()?;
            weight += thread.summary.len();
        }
        for checkpoint in &self.checkpoints {
            checkpoint.check_limits()?;
            weight += checkpoint.snapshot.len();
        }
        for payload in &self.payloads {
            limits::check("PAYLOAD_BYTES_MAX", payload.len(), PAYLOAD_BYTES_MAX)?;
            weight += payload.len();
        }
        for signal in &self.signals {
            signal.check_limits()?;
            weight += signal.data.len();
        }
        for signal in &self.copied_signals {
            crate::signal::check_name(&signal.name)?;
            limits::check("SIGNAL_BYTES_MAX", signal.data.len(), limits::SIGNAL_BYTES_MAX)?;
            weight += signal.data.len();
        }
        self.locks.iter().try_for_each(LockOp::check_limits)?;
        self.queues.iter().try_for_each(crate::queue::QueueOp::check_limits)?;
        self.all_leases().try_for_each(LeaseOp::check_limits)?;
        limits::check("BATCH_BYTES_MAX", weight, BATCH_BYTES_MAX)
    }

    /// Every guard, in the order they are checked: [`Batch::guards`], then the runner's.
    pub fn all_guards(&self) -> impl Iterator<Item = &Guard> {
        self.guards.iter().chain(self.runner.as_ref().map(|r| &r.guard))
    }

    /// Every lease operation, in the order they are applied: the runner's, then
    /// [`Batch::leases`].
    pub fn all_leases(&self) -> impl Iterator<Item = &LeaseOp> {
        self.runner.as_ref().and_then(|r| r.lease.as_ref()).into_iter().chain(&self.leases)
    }

    /// [`Batch::all_guards`] and [`Batch::all_leases`], to change in place (a store that puts
    /// its own clock in them: PostgreSQL's).
    #[cfg(feature = "postgres")]
    pub(crate) fn all_guards_and_leases_mut(
        &mut self,
    ) -> (impl Iterator<Item = &mut Guard>, impl Iterator<Item = &mut LeaseOp>) {
        let (guard, lease) = match self.runner.as_deref_mut() {
            Some(RunnerOps { guard, lease }) => (Some(guard), lease.as_mut()),
            None => (None, None),
        };
        (self.guards.iter_mut().chain(guard), lease.into_iter().chain(&mut self.leases))
    }

    /// Whether the batch writes nothing and checks nothing.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.threads.is_empty()
            && self.checkpoints.is_empty()
            && self.payloads.is_empty()
            && self.locks.is_empty()
            && self.leases.is_empty()
            && self.guards.is_empty()
            && self.runner.is_none()
            && self.signals.is_empty()
            && self.copied_signals.is_empty()
            && self.queues.is_empty()
    }
}

/// An operation on a named resource lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockOp {
    /// Take the lock (or re-take one `owner` already holds) until `now_ms + ttl_ms`; fails with
    /// [`Error::LockHeld`] while another owner's lock is live at `now_ms`.
    Acquire {
        /// Lock name.
        name: String,
        /// Who takes it.
        owner: String,
        /// The caller's clock.
        now_ms: u64,
        /// How long it binds.
        ttl_ms: u64,
    },
    /// Extend a lock `owner` holds to `now_ms + ttl_ms`; [`Error::LockNotHeld`] otherwise.
    Renew {
        /// Lock name.
        name: String,
        /// The holder.
        owner: String,
        /// The caller's clock.
        now_ms: u64,
        /// How long it binds from now.
        ttl_ms: u64,
    },
    /// Drop a lock `owner` holds; a missing lock is fine (release is idempotent), another owner's
    /// is [`Error::LockNotHeld`].
    Release {
        /// Lock name.
        name: String,
        /// The holder.
        owner: String,
    },
    /// Drop every lock `owner` holds.
    ReleaseAll {
        /// The holder.
        owner: String,
    },
}

impl LockOp {
    fn check_limits(&self) -> Result<(), Error> {
        let (name, owner) = match self {
            LockOp::Acquire { name, owner, .. }
            | LockOp::Renew { name, owner, .. }
            | LockOp::Release { name, owner } => (name.as_str(), owner.as_str()),
            LockOp::ReleaseAll { owner } => ("", owner.as_str()),
        };
        limits::check("TEXT_BYTES_MAX", name.len(), TEXT_BYTES_MAX)?;
        limits::check("TEXT_BYTES_MAX", owner.len(), TEXT_BYTES_MAX)?;
        if owner.is_empty() {
            return Err(Error::Invalid { detail: "lock owner is empty".into() });
        }
        if name.is_empty() && !matches!(self, LockOp::ReleaseAll { .. }) {
            return Err(Error::Invalid { detail: "lock name is empty".into() });
        }
        Ok(())
    }
}

/// An operation on a thread's runner lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaseOp {
    /// Take the lease (or re-take one `owner` holds) until `now_ms + ttl_ms`; fails with
    /// [`Error::LeaseHeld`] while another owner's lease is live at `now_ms`.
    Acquire {
        /// The thread.
        thread: ThreadId,
        /// The runner.
        owner: Arc<str>,
        /// The caller's clock.
        now_ms: u64,
        /// How long it binds.
        ttl_ms: u64,
    },
    /// Extend a lease `owner` holds; [`Error::LeaseNotHeld`] otherwise.
    Renew {
        /// The thread.
        thread: ThreadId,
        /// The runner.
        owner: Arc<str>,
        /// The caller's clock.
        now_ms: u64,
        /// How long it binds from now.
        ttl_ms: u64,
    },
    /// Drop a lease `owner` holds; no lease is fine, another owner's is [`Error::LeaseNotHeld`].
    Release {
        /// The thread.
        thread: ThreadId,
        /// The runner.
        owner: Arc<str>,
    },
}

impl LeaseOp {
    /// The thread whose lease it is.
    pub fn thread(&self) -> &ThreadId {
        self.holder().0
    }

    /// The thread and the runner.
    fn holder(&self) -> (&ThreadId, &str) {
        match self {
            LeaseOp::Acquire { thread, owner, .. }
            | LeaseOp::Renew { thread, owner, .. }
            | LeaseOp::Release { thread, owner } => (thread, owner),
        }
    }

    fn check_limits(&self) -> Result<(), Error> {
        let owner = self.holder().1;
        limits::check("TEXT_BYTES_MAX", owner.len(), TEXT_BYTES_MAX)?;
        if owner.is_empty() {
            return Err(Error::Invalid { detail: "lease owner is empty".into() });
        }
        Ok(())
    }
}

/// A condition on the state before a batch; if any fails the batch is rejected with
/// [`Error::GuardFailed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Guard {
    /// `owner` holds the thread's lease and it is live at `now_ms`.
    Lease {
        /// The thread.
        thread: ThreadId,
        /// The runner that must hold it.
        owner: Arc<str>,
        /// The caller's clock.
        now_ms: u64,
    },
    /// The thread exists and has status `expected`.
    Status {
        /// The thread.
        thread: ThreadId,
        /// The status it must have.
        expected: ThreadStatus,
    },
    /// No thread record with this id exists (create-once).
    Absent {
        /// The thread.
        thread: ThreadId,
    },
    /// The thread exists and its last event has seq `seq` (`Seq(0)`: it has no events yet).
    /// A writer that submits several batches of one thread before the first is durable puts
    /// this guard on each, so that when one is rejected every later one is rejected too and
    /// the seqs it predicted never shift.
    LastSeq {
        /// The thread.
        thread: ThreadId,
        /// The seq its last event must have.
        seq: Seq,
    },
    /// No signal named `name` holding exactly `data` is in the thread's inbox (checked inside
    /// the write, so two writers racing to store the same one cannot both pass: a dedup key's
    /// marker, stored once).
    NoSignal {
        /// The thread.
        thread: ThreadId,
        /// The signal's name.
        name: String,
        /// Its value, as stored.
        data: Vec<u8>,
    },
}

impl Guard {
    /// The thread the condition is about.
    pub fn thread(&self) -> &ThreadId {
        match self {
            Guard::Lease { thread, .. }
            | Guard::Status { thread, .. }
            | Guard::Absent { thread }
            | Guard::LastSeq { thread, .. }
            | Guard::NoSignal { thread, .. } => thread,
        }
    }
}

/// What a committed batch was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Appended {
    /// One bookmark per event, in batch order.
    pub bookmarks: Vec<Bookmark>,
    /// One id per checkpoint, in batch order.
    pub checkpoints: Vec<CheckpointId>,
    /// One reference per payload, in batch order.
    pub payloads: Vec<PayloadRef>,
    /// The number each signal got in its thread's inbox, in batch order.
    pub signals: Vec<u64>,
    /// The threads [`crate::QueueOp::Admit`] ops admitted, in admission order.
    pub admitted: Vec<ThreadId>,
}

/// What a committed prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Events removed.
    pub events: u64,
    /// Checkpoints removed.
    pub checkpoints: u64,
    /// The thread's first stored seq afterwards.
    pub first_seq: Seq,
}
