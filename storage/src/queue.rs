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
pub use crate::queue_fair::{FairState, Fairness};

/// A queue's limits and flow control. `None` (or `false`) is no limit of that kind.
///
/// Flow control (`docs/queues.md`): `rate_per_key` bounds admissions per key as `rate` does
/// per queue; `rate_drops` refuses a start over a rate ([`Error::RateLimited`]) instead of
/// keeping it waiting; `debounce_ms` makes a start supersede the key's waiting start and run
/// after that quiet period; `batch_max` / `batch_window_ms` gather a key's waiting starts into
/// one run whose input is the list of theirs.
///
/// # Examples
///
/// ```
/// use cairn_storage::{QueueLimits, RateLimit};
/// let limits = QueueLimits {
///     concurrency_max: Some(10),
///     per_key_max: Some(2),
///     rate: Some(RateLimit { starts: 100, period_ms: 60_000 }),
///     ..QueueLimits::default()
/// };
/// assert!(limits.check().is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimits {
    /// Threads of the queue admitted and not finished, at most.
    pub concurrency_max: Option<u32>,
    /// Of those, with one key (a tenant), at most.
    pub per_key_max: Option<u32>,
    /// Admissions in any window of `period_ms`, at most.
    pub rate: Option<RateLimit>,
    /// Admissions of one key in any window of its `period_ms`, at most.
    #[serde(default)]
    pub rate_per_key: Option<RateLimit>,
    /// A start over `rate` or `rate_per_key` is refused ([`Error::RateLimited`], nothing
    /// written) instead of waiting; the rates then count accepted starts, not admissions.
    #[serde(default)]
    pub rate_drops: bool,
    /// A start supersedes the waiting start of its key (which ends cancelled, in the same
    /// write) and is admitted no sooner than this many ms after it: a burst on one key is one
    /// run, with the last input, after a quiet period.
    #[serde(default)]
    pub debounce_ms: Option<u64>,
    /// Waiting starts of one key are run as one batch run (input: the list of their inputs)
    /// once this many wait.
    #[serde(default)]
    pub batch_max: Option<u32>,
    /// ... or once the oldest of them has waited this long (ms); with `batch_max` unset, a
    /// batch is every start of the window (at most [`crate::limits::QUEUE_BATCH_MAX`]).
    #[serde(default)]
    pub batch_window_ms: Option<u64>,
    /// Fairness weights between keys of equal priority ([`Fairness`]): admission serves each
    /// waiting key in proportion to its weight (`None`: round robin).
    #[serde(default)]
    pub fairness: Option<Fairness>,
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
        if let Some(rate) = self.rate_per_key {
            if rate.starts == 0 || rate.period_ms == 0 {
                return Err(zero("per-key rate (starts and period)"));
            }
            limits::check("RATE_STARTS_MAX", rate.starts as usize, RATE_STARTS_MAX)?;
        }
        if self.debounce_ms == Some(0) {
            return Err(zero("debounce period"));
        }
        if self.batch_max == Some(0) || self.batch_window_ms == Some(0) {
            return Err(zero("batch size and window"));
        }
        if let Some(max) = self.batch_max {
            limits::check("QUEUE_BATCH_MAX", max as usize, limits::QUEUE_BATCH_MAX)?;
        }
        if let Some(fair) = &self.fairness {
            fair.check()?;
        }
        if self.debounce_ms.is_some() && self.batches() {
            return Err(Error::Invalid {
                detail: "a queue either debounces or batches, not both".into(),
            });
        }
        Ok(())
    }

    /// Whether the queue gathers its waiting starts into batch runs.
    pub fn batches(&self) -> bool {
        self.batch_max.is_some() || self.batch_window_ms.is_some()
    }

    /// The most members one batch run takes.
    pub fn batch_size(&self) -> usize {
        self.batch_max.map_or(limits::QUEUE_BATCH_MAX, |max| max as usize)
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
    /// Per key, the times of its admissions (or, with `rate_drops`, accepted starts) still
    /// inside the per-key rate window, oldest first (a key with none is dropped).
    #[serde(default)]
    pub key_recent: BTreeMap<String, Vec<u64>>,
    /// On a debounced queue, per key: its waiting start and the time it may be admitted.
    #[serde(default)]
    pub debounced: BTreeMap<String, Debounced>,
    /// On a batching queue, per key: its waiting starts, oldest first, and when the oldest came.
    #[serde(default)]
    pub batching: BTreeMap<String, Batching>,
    /// With fairness weights that differ: the stride scheduler's passes.
    #[serde(default)]
    pub fair: FairState,
}

/// A key's waiting start on a debounced queue (see [`QueueLimits::debounce_ms`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Debounced {
    /// The waiting start.
    pub thread: ThreadId,
    /// Admitted no sooner than this (engine clock, ms).
    pub due_ms: u64,
}

/// A key's waiting starts on a batching queue (see [`QueueLimits::batch_max`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batching {
    /// The waiting starts, oldest first (at most [`crate::limits::QUEUE_BATCH_WAITING_MAX`] in
    /// the queue).
    pub members: Vec<ThreadId>,
    /// When the oldest of them was enqueued (engine clock, ms).
    pub since_ms: u64,
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
            key_recent: BTreeMap::new(),
            debounced: BTreeMap::new(),
            batching: BTreeMap::new(),
            fair: FairState::default(),
        }
    }

    /// The fairness weights admission serves keys by, when they differ (else round robin).
    pub fn weighted(&self) -> Option<&Fairness> {
        self.limits.fairness.as_ref().filter(|f| f.differs())
    }

    /// Whether the global limit and the rate limit leave room for one more admission at
    /// `now_ms` (after [`QueueState::forget_before`]). With `rate_drops` the rate counted
    /// the start when it was accepted: admission looks at the concurrency limit only.
    pub fn has_room(&self) -> bool {
        let global = self.limits.concurrency_max.is_none_or(|max| self.running < u64::from(max));
        global && (self.limits.rate_drops || self.rate_has_room())
    }

    fn rate_has_room(&self) -> bool {
        self.limits.rate.is_none_or(|r| self.recent.len() < r.starts as usize)
    }

    /// Whether `key` may have one more running thread (the per-key limit, and the per-key
    /// rate unless it counts accepted starts).
    pub fn key_has_room(&self, key: &str, counts: &KeyCounts) -> bool {
        let running = self.limits.per_key_max.is_none_or(|max| counts.running < u64::from(max));
        running && (self.limits.rate_drops || self.key_rate_has_room(key))
    }

    fn key_rate_has_room(&self, key: &str) -> bool {
        self.limits
            .rate_per_key
            .is_none_or(|r| self.key_recent.get(key).map_or(0, Vec::len) < r.starts as usize)
    }

    /// Drops the admissions that left the rate windows at `now_ms`.
    pub fn forget_before(&mut self, now_ms: u64) {
        match self.limits.rate {
            Some(rate) => {
                let from = now_ms.saturating_sub(rate.period_ms);
                self.recent.retain(|&at| at > from);
            }
            None => self.recent.clear(),
        }
        match self.limits.rate_per_key {
            Some(rate) => {
                let from = now_ms.saturating_sub(rate.period_ms);
                for times in self.key_recent.values_mut() {
                    times.retain(|&at| at > from);
                }
                self.key_recent.retain(|_, times| !times.is_empty());
            }
            None => self.key_recent.clear(),
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

    /// When `key`'s rate window next frees a start, if it is full.
    pub fn key_rate_opens_at(&self, key: &str) -> Option<u64> {
        let rate = self.limits.rate_per_key?;
        let times = self.key_recent.get(key)?;
        if times.len() < rate.starts as usize {
            return None;
        }
        times.first().map(|at| at.saturating_add(rate.period_ms).saturating_add(1))
    }

    /// The soonest time something waiting may move without another event: a full rate window
    /// of the queue or of a key with waiting starts opens, a debounced start falls due, a
    /// batch's window closes.
    pub fn next_due_at(&self) -> Option<u64> {
        let waiting_keys = self.keys.iter().filter(|(_, c)| c.waiting > 0);
        let keys = waiting_keys.filter_map(|(k, _)| self.key_rate_opens_at(k));
        let debounced = self.debounced.values().map(|d| d.due_ms);
        let windows = self
            .limits
            .batch_window_ms
            .map(|w| self.batching.values().map(move |b| b.since_ms.saturating_add(w)));
        let global = if self.waiting > 0 { self.rate_opens_at() } else { None };
        global.into_iter().chain(keys).chain(debounced).chain(windows.into_iter().flatten()).min()
    }

    /// Whether a debounced start of `key` waits for its quiet period at `now_ms`.
    pub fn debouncing(&self, key: &str, now_ms: u64) -> bool {
        self.debounced.get(key).is_some_and(|d| d.due_ms > now_ms)
    }

    /// The keys whose waiting starts make a batch run at `now_ms`: `batch_max` of them wait,
    /// or the oldest has waited `batch_window_ms`.
    pub fn batches_due(&self, now_ms: u64) -> Vec<String> {
        let size = self.limits.batch_size();
        self.batching
            .iter()
            .filter(|(_, b)| {
                b.members.len() >= size
                    || self
                        .limits
                        .batch_window_ms
                        .is_some_and(|w| now_ms >= b.since_ms.saturating_add(w))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// With `rate_drops`: refuses a start of `key` over a rate at `now_ms` (after
    /// [`QueueState::forget_before`]), else counts it.
    pub(crate) fn accept_start(&mut self, key: &str, now_ms: u64) -> Result<(), Error> {
        if !self.limits.rate_drops {
            return Ok(());
        }
        let opens = match (self.rate_has_room(), self.key_rate_has_room(key)) {
            (true, true) => None,
            (false, _) => self.rate_opens_at(),
            (true, false) => self.key_rate_opens_at(key),
        };
        if let Some(at) = opens {
            return Err(Error::RateLimited {
                queue: self.name.clone(),
                key: key.to_string(),
                retry_after_ms: at.saturating_sub(now_ms),
            });
        }
        self.count_start(key, now_ms)
    }

    /// Counts a start of `key` at `now_ms` in the rate windows.
    pub(crate) fn count_start(&mut self, key: &str, now_ms: u64) -> Result<(), Error> {
        if self.limits.rate.is_some() {
            self.recent.push(now_ms);
        }
        if self.limits.rate_per_key.is_some() {
            if !self.key_recent.contains_key(key) {
                limits::check("QUEUE_KEYS_MAX", self.key_recent.len() + 1, QUEUE_KEYS_MAX)?;
            }
            self.key_recent.entry(key.to_string()).or_default().push(now_ms);
        }
        Ok(())
    }

    /// Forgets `thread` as a key's debounced or batching start (it left the line).
    pub(crate) fn forget_waiting(&mut self, key: &str, thread: &ThreadId) {
        if self.debounced.get(key).is_some_and(|d| &d.thread == thread) {
            self.debounced.remove(key);
        }
        if let Some(b) = self.batching.get_mut(key) {
            b.members.retain(|m| m != thread);
            if b.members.is_empty() {
                self.batching.remove(key);
            }
        }
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
            self.fair.forget(key);
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
    /// The waiting starts this batch run took (empty for any other start).
    #[serde(default)]
    pub batch_of: Vec<ThreadId>,
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
    /// The caller's clock (rate windows, debounce and batch times).
    pub now_ms: u64,
    /// On a debounced queue: the key's waiting start as the caller read it (`None`: none),
    /// which this start supersedes. The caller ends that thread (cancelled) in the same batch;
    /// the enqueue is refused with [`Error::QueueMoved`] when the key's waiting start is
    /// another by now (read again and retry).
    pub supersedes: Option<ThreadId>,
    /// A batch run: the key's waiting starts it takes, oldest first, as the caller read them
    /// (it ends each, cancelled, in the same batch). Refused with [`Error::QueueMoved`] unless
    /// they are still the first waiting starts of the key. A batch run waits for admission like
    /// any start, but is never gathered into another batch.
    pub batch_of: Vec<ThreadId>,
    /// The successor of an admitted thread of the queue (continue-as-new): it waits in line
    /// again, but no flow control applies (not debounced, gathered, nor refused by a rate).
    pub continuation: bool,
}

impl Enqueue {
    /// A plain start: no supersession, not a batch run.
    pub fn new(thread: ThreadId, queue: String, key: String, now_ms: u64) -> Enqueue {
        Enqueue {
            thread,
            queue,
            key,
            priority: 0,
            dedup: None,
            now_ms,
            supersedes: None,
            batch_of: Vec::new(),
            continuation: false,
        }
    }
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
                limits::check("QUEUE_BATCH_MAX", e.batch_of.len(), limits::QUEUE_BATCH_MAX)
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
