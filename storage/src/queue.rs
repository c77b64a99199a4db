//! Named queues (`docs/queues.md`, `docs/format.md` §2.5): threads that wait, durably, until a
//! queue's limits let them run.
//!
//! A thread started on a queue is created with status [`crate::ThreadStatus::Queued`] and a
//! [`QueueMember`] record, in its creation batch ([`QueueOp::Enqueue`]). It becomes runnable
//! (status `Created`) only through [`QueueOp::Admit`], which the store plans in the write
//! transaction that flips the status, against the counts the store keeps in the queue's
//! [`QueueState`]: so every process writing one database sees the same counts, and a crash
//! leaves a thread either waiting or admitted, never both and never twice.
//!
//! What holds a slot: an admitted thread, from its admission until the batch that ends it
//! (completed, failed, cancelled, timed out) or deletes it; that batch releases the slot in the
//! same transaction. A parked thread (sleeping, waiting for input or a signal, paused, blocked)
//! keeps its slot: a limit bounds the threads in progress, as a tenant limit must.
//!
//! Invariants: a thread has at most one member record; a waiting member has exactly one entry in
//! the waiting index and its thread's status is Queued or Paused; the queue's `waiting` and
//! `running` counts (and each key's) are the numbers of its waiting and admitted members.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::ThreadId;
use crate::limits::{self, QUEUE_KEYS_MAX, QUEUE_NAME_BYTES_MAX, RATE_STARTS_MAX};

/// A queue's limits. `None` is no limit of that kind.
///
/// # Examples
///
/// ```
/// use cairn_storage::{QueueLimits, RateLimit};
/// let limits = QueueLimits {
///     concurrency_max: Some(10),
///     per_key_max: Some(2),
///     rate: Some(RateLimit { starts: 100, period_ms: 60_000 }),
/// };
/// assert!(limits.check().is_ok());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimits {
    /// Threads of the queue admitted and not finished, at most.
    pub concurrency_max: Option<u32>,
    /// Of those, with one key (a tenant), at most.
    pub per_key_max: Option<u32>,
    /// Admissions in any window of `period_ms`, at most.
    pub rate: Option<RateLimit>,
}

impl QueueLimits {
    /// Checks the limits are usable.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a limit of 0 or a zero period; [`Error::LimitExceeded`] for a rate
    /// past [`RATE_STARTS_MAX`].
    pub fn check(&self) -> Result<(), Error> {
        let zero = |what: &str| Error::Invalid { detail: format!("a queue's {what} must be > 0") };
        if self.concurrency_max == Some(0) {
            return Err(zero("concurrency limit"));
        }
        if self.per_key_max == Some(0) {
            return Err(zero("per-key limit"));
        }
        if let Some(rate) = self.rate {
            if rate.starts == 0 || rate.period_ms == 0 {
                return Err(zero("rate (starts and period)"));
            }
            limits::check("RATE_STARTS_MAX", rate.starts as usize, RATE_STARTS_MAX)?;
        }
        Ok(())
    }
}

/// At most `starts` admissions in any window of `period_ms` (a sliding window: an admission at
/// `t` counts against every admission until `t + period_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Admissions per window.
    pub starts: u32,
    /// The window, in engine-clock ms.
    pub period_ms: u64,
}

/// Per-key counts inside a [`QueueState`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCounts {
    /// Admitted, unfinished threads with this key.
    pub running: u64,
    /// Waiting threads with this key.
    pub waiting: u64,
    /// The queue's admission number of this key's latest admission (0: none yet): fairness
    /// serves the key served least recently first.
    pub served_at: u64,
}

/// A queue as stored (record kind 10, table `queues`): its limits and the counts admission
/// decides against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueState {
    /// Its name.
    pub name: String,
    /// Its limits (the latest definition written).
    pub limits: QueueLimits,
    /// Admitted, unfinished threads.
    pub running: u64,
    /// Waiting threads.
    pub waiting: u64,
    /// The last ticket given to an enqueued thread (FIFO order within a priority).
    pub last_ticket: u64,
    /// Admissions ever made (numbers [`KeyCounts::served_at`]).
    pub admitted: u64,
    /// The times of the admissions still inside the rate window, oldest first (at most the
    /// rate's `starts`).
    pub recent: Vec<u64>,
    /// Counts per key with a waiting or running thread (a key with neither is dropped).
    pub keys: BTreeMap<String, KeyCounts>,
}

impl QueueState {
    /// A new, empty queue.
    pub fn new(name: String, limits: QueueLimits) -> QueueState {
        QueueState {
            name,
            limits,
            running: 0,
            waiting: 0,
            last_ticket: 0,
            admitted: 0,
            recent: Vec::new(),
            keys: BTreeMap::new(),
        }
    }

    /// Whether the global limit and the rate limit leave room for one more admission at
    /// `now_ms` (after [`QueueState::forget_before`]).
    pub fn has_room(&self) -> bool {
        let global = self.limits.concurrency_max.is_none_or(|max| self.running < u64::from(max));
        let rate = self.limits.rate.is_none_or(|r| self.recent.len() < r.starts as usize);
        global && rate
    }

    /// Whether `key` may have one more running thread.
    pub fn key_has_room(&self, counts: &KeyCounts) -> bool {
        self.limits.per_key_max.is_none_or(|max| counts.running < u64::from(max))
    }

    /// Drops the admissions that left the rate window at `now_ms`.
    pub fn forget_before(&mut self, now_ms: u64) {
        match self.limits.rate {
            Some(rate) => {
                let from = now_ms.saturating_sub(rate.period_ms);
                self.recent.retain(|&at| at > from);
            }
            None => self.recent.clear(),
        }
    }

    /// When the rate window next frees a start, if it is full at `now_ms`.
    pub fn rate_opens_at(&self) -> Option<u64> {
        let rate = self.limits.rate?;
        if self.recent.len() < rate.starts as usize {
            return None;
        }
        self.recent.first().map(|at| at.saturating_add(rate.period_ms).saturating_add(1))
    }

    pub(crate) fn key_mut(&mut self, key: &str) -> Result<&mut KeyCounts, Error> {
        if !self.keys.contains_key(key) {
            limits::check("QUEUE_KEYS_MAX", self.keys.len() + 1, QUEUE_KEYS_MAX)?;
        }
        Ok(self.keys.entry(key.to_string()).or_default())
    }

    pub(crate) fn drop_idle_key(&mut self, key: &str) {
        if self.keys.get(key).is_some_and(|k| k.running == 0 && k.waiting == 0) {
            self.keys.remove(key);
        }
    }
}

/// A thread's place in a queue (record kind 11, table `queue_members`, keyed by thread).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMember {
    /// The thread.
    pub thread: ThreadId,
    /// The queue.
    pub queue: String,
    /// Its concurrency key ("" when started without one).
    pub key: String,
    /// Its order in the key: `(255 - priority) << 56 | ticket`, lowest first.
    pub rank: u64,
    /// Its deduplication key, if any.
    pub dedup: Option<String>,
    /// When it was admitted (engine clock, ms); `None` while it waits.
    pub admitted_at_ms: Option<u64>,
}

impl QueueMember {
    /// Its priority (higher runs first).
    pub fn priority(&self) -> u8 {
        priority_of(self.rank)
    }
}

/// The rank of the `ticket`-th thread enqueued with `priority`.
pub(crate) fn rank(priority: u8, ticket: u64) -> u64 {
    (u64::from(u8::MAX - priority) << TICKET_BITS) | (ticket & TICKET_MASK)
}

/// The priority a rank encodes.
pub(crate) fn priority_of(rank: u64) -> u8 {
    u8::MAX - (rank >> TICKET_BITS) as u8
}

/// Tickets take the low 56 bits of a rank: 7 * 10^16 enqueues per queue.
pub(crate) const TICKET_BITS: u32 = 56;
pub(crate) const TICKET_MASK: u64 = (1 << TICKET_BITS) - 1;

/// A write to the queues, in a [`crate::Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueOp {
    /// Creates the queue or replaces its limits (counts and waiting threads are kept).
    Define {
        /// The queue.
        name: String,
        /// Its limits.
        limits: QueueLimits,
    },
    /// Puts a thread in a queue: the thread's record, in the same batch, must have status
    /// [`crate::ThreadStatus::Queued`]. Refused with [`Error::Duplicate`] when `dedup` names a thread
    /// of the queue that waits or runs, and with [`Error::UnknownQueue`] for a queue never
    /// defined.
    Enqueue(Enqueue),
    /// Admits the queue's next eligible threads, at most `max`, as the limits allow at `now_ms`:
    /// each admitted thread's status goes from Queued to Created in this write, and its id is
    /// in [`crate::Appended::admitted`]. Threads of workflows not in `workflows` are passed over
    /// (they stay queued for an engine that has them).
    Admit {
        /// The queue.
        queue: String,
        /// The caller's clock (the rate window's).
        now_ms: u64,
        /// Most threads admitted by this op.
        max: usize,
        /// The workflow ids the caller can run.
        workflows: Vec<String>,
    },
}

/// A thread to put in a queue (see [`QueueOp::Enqueue`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueue {
    /// The thread (created Queued in the same batch).
    pub thread: ThreadId,
    /// The queue.
    pub queue: String,
    /// Its concurrency key ("" for none).
    pub key: String,
    /// Its priority: higher is admitted first; FIFO within a priority.
    pub priority: u8,
    /// Its deduplication key, if any.
    pub dedup: Option<String>,
}

impl QueueOp {
    pub(crate) fn check_limits(&self) -> Result<(), Error> {
        match self {
            QueueOp::Define { name, limits } => {
                check_name(name)?;
                limits.check()
            }
            QueueOp::Enqueue(e) => {
                check_name(&e.queue)?;
                limits::check("QUEUE_NAME_BYTES_MAX", e.key.len(), QUEUE_NAME_BYTES_MAX)?;
                if let Some(dedup) = &e.dedup {
                    limits::check("QUEUE_NAME_BYTES_MAX", dedup.len(), QUEUE_NAME_BYTES_MAX)?;
                }
                Ok(())
            }
            QueueOp::Admit { queue, max, .. } => {
                check_name(queue)?;
                limits::check("QUEUE_ADMIT_MAX", *max, limits::QUEUE_ADMIT_MAX)
            }
        }
    }
}

/// Checks a queue name: 1 to [`QUEUE_NAME_BYTES_MAX`] bytes, no control characters.
///
/// # Errors
///
/// [`Error::Invalid`]; [`Error::LimitExceeded`].
pub fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Error::Invalid {
            detail: format!("queue name {name:?} must be non-empty, without control characters"),
        });
    }
    limits::check("QUEUE_NAME_BYTES_MAX", name.len(), QUEUE_NAME_BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_order_priority_first_then_ticket() {
        assert!(rank(9, 100) < rank(1, 1));
        assert!(rank(5, 1) < rank(5, 2));
        assert_eq!(priority_of(rank(7, 42)), 7);
        assert_eq!(priority_of(rank(0, 42)), 0);
        assert_eq!(priority_of(rank(255, 42)), 255);
    }

    #[test]
    fn the_rate_window_slides() {
        let limits = QueueLimits {
            rate: Some(RateLimit { starts: 2, period_ms: 1_000 }),
            ..QueueLimits::default()
        };
        let mut q = QueueState::new("q".into(), limits);
        q.recent = vec![100, 600];
        q.forget_before(1_000);
        assert!(!q.has_room());
        assert_eq!(q.rate_opens_at(), Some(1_101));
        q.forget_before(1_100);
        assert!(q.has_room());
        assert_eq!(q.recent, vec![600]);
    }

    #[test]
    fn zero_limits_are_refused() {
        let bad = QueueLimits { concurrency_max: Some(0), ..QueueLimits::default() };
        assert!(bad.check().is_err());
        assert!(check_name("").is_err());
        assert!(check_name("a\nb").is_err());
    }
}
