//! Engine settings, fixed when it opens.

/// What to do with threads found unfinished when the engine opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Resume them at once (the default).
    #[default]
    Resume,
    /// Leave them for [`crate::Engine::resume`] or [`crate::Engine::abandon`]; see [`crate::Engine::resumable`].
    Park,
}

/// Engine settings, fixed at open.
#[derive(Debug, Clone)]
pub struct Config {
    /// Threads driven at once.
    pub concurrency: usize,
    /// redb's page cache in bytes; `None`: storage's default (64 MiB).
    pub page_cache_bytes: Option<usize>,
    /// Overrides every workflow's checkpoint policy: a checkpoint every N steps.
    pub checkpoint_every_steps: Option<u64>,
    /// Overrides every workflow's checkpoint policy: a checkpoint every T ms.
    pub checkpoint_every_ms: Option<u64>,
    /// A periodic checkpoint once this many events follow the latest one (default
    /// 1,000; `None`: no such bound).
    pub checkpoint_tail_events: Option<u64>,
    /// A periodic checkpoint once this many bytes of events and payloads follow the latest one
    /// (default 8 MiB; `None`: no such bound).
    pub checkpoint_tail_bytes: Option<u64>,
    /// A completing thread writes its completion checkpoint once this many events follow its
    /// latest checkpoint, or when its last step takes one anyway (default 100; 0: always).
    pub completion_checkpoint_after: u64,
    /// What to do with unfinished threads at open.
    pub recovery: RecoveryPolicy,
    /// How long a cancelled node may run on before its future is dropped (engine clock).
    pub cancel_grace_ms: u64,
    /// How long a runner's lease on a thread lasts without a renewal (the database's clock on
    /// PostgreSQL). On a shared database another engine takes a thread over once its lease has
    /// expired, so this bounds how long a dead or cut-off worker's threads wait. A live engine
    /// renews the leases of the threads it drives every third of this (its heartbeat), so a
    /// step or tool call may run longer than the lease.
    pub lease_ttl_ms: u64,
    /// On a shared database: how often the engine looks for threads it can take over (runnable
    /// with no live lease), timers that are due and deadlines, in ms.
    pub poll_ms: u64,
    /// Seed of the engine's random stream (ids, node randomness); from the operating system's
    /// randomness when `None` (two engines never share a stream).
    pub seed: Option<u64>,
    /// A Running thread whose stored record has not moved (no step) for longer than this is
    /// reported stuck by [`crate::Engine::health`], in ms (engine clock).
    pub watchdog_ms: u64,
    /// A step commit (submitted to durable) slower than this is counted slow, in ms.
    pub slow_commit_ms: u64,
    /// How often the engine runs a health pass on its own (setting the health and
    /// threads-by-status gauges), in ms; `None`: only when [`crate::Engine::health`] is called.
    pub health_every_ms: Option<u64>,
    /// What the health passes act on (default: report only).
    pub health_policy: HealthPolicy,
    /// The database file, when the engine opened one by its path: the disk a health pass
    /// looks at.
    pub database_file: Option<std::path::PathBuf>,
    /// A health pass reports the database's disk short below this many free bytes (or below
    /// `limits::HEALTH_DISK_FREE_MIN_PERCENT` of it); default 512 MiB.
    pub health_disk_free_min_bytes: u64,
    /// A health pass reports this process's resident memory past this many bytes; `None`
    /// (the default): not bounded.
    pub health_memory_max_bytes: Option<u64>,
    /// A health pass counts a signal in an unfinished thread's inbox that no node took once it
    /// is older than this, in ms (the signal backlog; default 10 minutes).
    pub health_signal_backlog_ms: u64,
    /// Which finished threads the engine deletes on its own, and when (default: none).
    pub retention: Option<RetentionPolicy>,
    /// Whether the engine prunes, on its own, what checkpoints cover in unfinished threads
    /// (default `true`; see `EngineBuilder::prune_history`).
    pub prune_history: bool,
    /// Rounds a schedule's thread runs before it continues as new (default and most
    /// [`ScheduleSpec::TICKS_PER_RUN`](crate::ScheduleSpec::TICKS_PER_RUN); see
    /// `EngineBuilder::schedule_ticks_per_run`).
    pub schedule_ticks_per_run: u32,
    /// This worker's build id (`EngineBuilder::build_id`): threads it starts are pinned to it,
    /// and it takes only threads pinned to it or unpinned ones. `None` (the default): it takes
    /// only unpinned threads and pins none.
    pub build_id: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            concurrency: 64,
            page_cache_bytes: None,
            checkpoint_every_steps: None,
            checkpoint_every_ms: None,
            checkpoint_tail_events: Some(crate::limits::CHECKPOINT_TAIL_EVENTS_DEFAULT),
            checkpoint_tail_bytes: Some(crate::limits::CHECKPOINT_TAIL_BYTES_DEFAULT),
            completion_checkpoint_after: crate::limits::COMPLETION_CHECKPOINT_AFTER_DEFAULT,
            recovery: RecoveryPolicy::Resume,
            cancel_grace_ms: 5_000,
            lease_ttl_ms: crate::limits::LEASE_TTL_MS,
            poll_ms: 500,
            seed: None,
            watchdog_ms: crate::limits::WATCHDOG_MS_DEFAULT,
            slow_commit_ms: crate::limits::SLOW_COMMIT_MS_DEFAULT,
            health_every_ms: Some(crate::limits::HEALTH_EVERY_MS_DEFAULT),
            database_file: None,
            health_disk_free_min_bytes: crate::limits::HEALTH_DISK_FREE_MIN_BYTES,
            health_memory_max_bytes: None,
            health_signal_backlog_ms: crate::limits::HEALTH_SIGNAL_BACKLOG_MS_DEFAULT,
            health_policy: HealthPolicy::default(),
            retention: None,
            prune_history: true,
            schedule_ticks_per_run: crate::ScheduleSpec::TICKS_PER_RUN,
            build_id: None,
        }
    }
}

/// Options a thread starts with.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The thread's id. Starting an id that exists returns the existing thread (idempotent
    /// start, "exists: keep") for as long as it is stored: once it is deleted
    /// (`Engine::delete`, a [`RetentionPolicy`]) a start of the id creates a new thread. Without
    /// one, the engine makes a fresh id.
    pub thread_id: Option<String>,
    /// Labels for listing and filtering.
    pub labels: std::collections::BTreeMap<String, String>,
    /// The workflow version; the newest registered one when `None`.
    pub version: Option<u32>,
    /// The thread times out this long after it starts (engine clock): it ends TimedOut.
    pub deadline_ms: Option<u64>,
    /// Budgets replacing the workflow's for this thread.
    pub budgets: Option<cairn_dsl::Budgets>,
    /// Permissions replacing the workflow's for this thread's tool calls.
    pub permissions: Option<std::collections::BTreeSet<String>>,
    /// The named queue the thread waits in until its limits admit it (`docs/queues.md`);
    /// `None` runs it at once. The queue must have been defined
    /// ([`crate::EngineBuilder::queue`], or by another engine on the same database).
    pub queue: Option<String>,
    /// Its concurrency key in the queue (a tenant, a customer): the per-key limit counts the
    /// threads of one key. `None` is the key `""`.
    pub queue_key: Option<String>,
    /// Its priority in the queue: higher is admitted first; FIFO within a priority.
    pub priority: u8,
    /// Its deduplication key in the queue: a start with a key that a thread of the queue holds
    /// (waiting or running) returns that thread instead; once it has ended, the key is free.
    pub dedup_key: Option<String>,
    /// A delayed start: the thread is created at once (`created`) and runs from this time
    /// (engine clock, ms since the epoch), durably: an engine that opens before the time still
    /// starts it then, one that opens after starts it at once. A time past starts it at once.
    /// Not with a queue. The deadline (`deadline_ms`) counts from the creation.
    pub start_at_ms: Option<u64>,
    /// Leaves the thread unpinned ("auto-upgrade"): any engine takes it, whatever its build id.
    /// By default an engine with a build id pins the threads it starts to it.
    pub unpinned: bool,
}

impl StartOptions {
    /// Leaves the thread unpinned (see [`StartOptions::unpinned`]).
    ///
    /// # Examples
    /// ```
    /// assert!(cairn::StartOptions::default().auto_upgrade().unpinned);
    /// ```
    #[must_use]
    pub fn auto_upgrade(mut self) -> Self {
        self.unpinned = true;
        self
    }

    /// Starts the thread on queue `name` (see [`StartOptions::queue`]).
    ///
    /// # Examples
    /// ```
    /// let options = cairn::StartOptions::default().on_queue("reports").key("tenant-7").priority(5);
    /// assert_eq!(options.queue.as_deref(), Some("reports"));
    /// ```
    #[must_use]
    pub fn on_queue(mut self, name: impl Into<String>) -> Self {
        self.queue = Some(name.into());
        self
    }

    /// Sets the concurrency key in the queue.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.queue_key = Some(key.into());
        self
    }

    /// Sets the priority in the queue (higher first).
    #[must_use]
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the deduplication key in the queue.
    #[must_use]
    pub fn dedup(mut self, key: impl Into<String>) -> Self {
        self.dedup_key = Some(key.into());
        self
    }

    /// Options with this thread id.
    pub fn id(id: impl Into<String>) -> Self {
        Self { thread_id: Some(id.into()), ..Self::default() }
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// What to do about a stuck thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StuckAction {
    /// Report it only (the default).
    #[default]
    Report,
    /// Pause it at its next step boundary.
    Pause,
    /// Cancel it.
    Cancel,
    /// Retry the node attempts it is running: each is cancelled and fails as its timeout
    /// would (`NodeError::Timeout`, recorded with the retry in the thread's log), so its
    /// node's retry policy runs the next attempt; with no attempt left the node fails with the
    /// timeout (and a recovery for timeouts applies). Only for a thread this engine drives (each
    /// engine's health passes see the threads it drives).
    Retry,
}

/// What to do about a lock held past its time to live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExpiredLockAction {
    /// Report it only (the default).
    #[default]
    Report,
    /// Release it.
    Release,
}

/// What an engine's health passes act on (`EngineBuilder::health_policy`; the behaviour is
/// described in `api/health_policy.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthPolicy {
    /// For stuck threads.
    pub stuck: StuckAction,
    /// For locks held past their time to live.
    pub expired_locks: ExpiredLockAction,
}

/// Which finished threads an engine deletes on its own (`EngineBuilder::retention`): a thread
/// that ended with a status whose period is set is deleted whole (its log, checkpoints, locks,
/// and payloads nobody else references: `cairn_storage::Maintenance::delete_thread`) once that period
/// has passed since it ended (its record's `updated_at_ms`, engine clock). Until then an
/// idempotent start of its id returns it ("exists: keep"); after that the id is free and a start
/// creates a new thread. A child thread of a sub-workflow is kept while its parent is unfinished.
///
/// # Examples
///
/// ```
/// use cairn::RetentionPolicy;
/// const DAY_MS: u64 = 24 * 60 * 60 * 1_000;
/// // Completed threads for 7 days, failed ones for 30 (to look at them), cancelled for 7.
/// let policy = RetentionPolicy::after_ms(7 * DAY_MS).failed_for_ms(Some(30 * DAY_MS));
/// assert_eq!(policy.completed_ms, Some(7 * DAY_MS));
/// assert_eq!(policy.failed_ms, Some(30 * DAY_MS));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// How long a Completed thread is kept (`None`: for ever).
    pub completed_ms: Option<u64>,
    /// How long a Failed or TimedOut thread is kept (`None`: for ever).
    pub failed_ms: Option<u64>,
    /// How long a Cancelled thread is kept (`None`: for ever).
    pub cancelled_ms: Option<u64>,
    /// How often the engine looks for threads to delete, in ms (default
    /// 60,000 ms).
    pub every_ms: u64,
}

impl RetentionPolicy {
    /// Every finished thread, whatever its status, kept for `ms` after it ended.
    pub fn after_ms(ms: u64) -> Self {
        Self {
            completed_ms: Some(ms),
            failed_ms: Some(ms),
            cancelled_ms: Some(ms),
            every_ms: crate::limits::RETENTION_EVERY_MS_DEFAULT,
        }
    }

    /// This policy with Failed and TimedOut threads kept for `ms` (`None`: for ever).
    #[must_use]
    pub fn failed_for_ms(mut self, ms: Option<u64>) -> Self {
        self.failed_ms = ms;
        self
    }

    /// This policy with Cancelled threads kept for `ms` (`None`: for ever).
    #[must_use]
    pub fn cancelled_for_ms(mut self, ms: Option<u64>) -> Self {
        self.cancelled_ms = ms;
        self
    }

    /// This policy looking every `ms` (at least 1).
    #[must_use]
    pub fn every_ms(mut self, ms: u64) -> Self {
        self.every_ms = ms.max(1);
        self
    }

    /// How long a thread that ended with `status` is kept; `None` for an unfinished status or
    /// one kept for ever.
    pub fn period_ms(&self, status: cairn_storage::ThreadStatus) -> Option<u64> {
        use cairn_storage::ThreadStatus as S;
        match status {
            S::Completed => self.completed_ms,
            S::Failed | S::TimedOut => self.failed_ms,
            S::Cancelled => self.cancelled_ms,
            _ => None,
        }
    }
}

/// What one retention pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RetentionReport {
    /// The engine-clock time the pass judged ages by, in ms.
    pub at_ms: u64,
    /// Finished thread records read.
    pub scanned: u64,
    /// Threads deleted.
    pub deleted: u64,
    /// Threads past their period kept because their sub-workflow parent is unfinished.
    pub kept_for_parent: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults the public docs state in words (the limits they come from are private).
    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::default();
        assert_eq!(c.checkpoint_tail_events, Some(1_000));
        assert_eq!(c.checkpoint_tail_bytes, Some(8 * 1024 * 1024));
        assert_eq!(c.completion_checkpoint_after, 100);
        assert_eq!(c.lease_ttl_ms, 60_000);
        assert_eq!(c.watchdog_ms, 10 * 60 * 1_000);
        assert_eq!(c.slow_commit_ms, 1_000);
        assert_eq!(c.health_every_ms, Some(60_000));
        assert_eq!(RetentionPolicy::after_ms(1).every_ms, 60_000);
        assert_eq!(crate::limits::HEALTH_DATABASE_WAIT_MS, 750);
        assert_eq!(crate::limits::CHECKPOINT_ASKS_MAX, 16);
        assert_eq!((crate::limits::RETENTION_PAGE_MAX, crate::limits::PRUNE_PASS_MAX), (256, 256));
        assert_eq!(crate::limits::HEALTH_ITEMS_MAX, 100);
    }
}
