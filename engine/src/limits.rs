//! Named limits of the engine, each with its reason. Exceeding one is an error that names it.

// The limits the core folds and decides by live with it; named here as before.
pub use cairn_core::limits::{
    INLINE_VALUE_BYTES_MAX, MODELS_PER_THREAD_MAX, READ_CHUNK_EVENTS,
    RESTORE_FALLBACK_CHECKPOINTS_MAX, RESTORES_PER_THREAD_MAX, SNAPSHOT_ERRORS_ENTRIES_MAX,
    SNAPSHOT_HISTORY_ENTRIES_MAX, TASKS_PER_STEP_MAX,
};

/// Tool calls in one attempt of one task: a node that calls more is almost surely looping.
pub const TOOL_CALLS_PER_TASK_MAX: u32 = 10_000;

/// Steps of one thread: a runaway loop without bounds stops here instead of filling the disk.
pub const STEPS_PER_THREAD_MAX: u64 = 10_000_000;

/// Nesting of sub-workflows run as child threads: the DSL's limit (a validated workflow never
/// nests deeper); the engine checks it again before it starts a child thread.
pub const SUBGRAPH_DEPTH_MAX: usize = cairn_dsl::limits::SUBGRAPH_DEPTH_MAX;

/// Batches of one thread submitted to storage and not yet durable. A runner computes steps
/// ahead of their commit (see `pipeline`), so that one thread's steps share durable commits
/// instead of paying one fsync each; this bounds how far ahead it gets (and so the memory held
/// and the work a crash throws away).
pub const PIPELINE_BATCHES_MAX: usize = 32;

/// Events after a thread's latest checkpoint that make the engine write a periodic one by
/// default (`EngineBuilder::checkpoint_tail`): a restore (recovery, `state_at`, a resumed
/// thread) folds at most about this many events, whatever the length of the thread's history,
/// for a user who never tuned anything. A checkpoint of a small state costs about as much to
/// write as a few dozen events.
pub const CHECKPOINT_TAIL_EVENTS_DEFAULT: u64 = 1_000;

/// Bytes of event bodies and payloads after a thread's latest checkpoint that make the engine
/// write a periodic one by default, so that a few large tool results do not make restores
/// slow either.
pub const CHECKPOINT_TAIL_BYTES_DEFAULT: u64 = 8 * 1024 * 1024;

/// Manual checkpoints asked of one running thread and not yet taken by its runner (each is
/// written at the runner's next step boundary). More would only queue identical snapshots
/// behind a long step; the asker beyond it gets [`crate::Error::LimitExceeded`].
pub const CHECKPOINT_ASKS_MAX: usize = 16;

/// Events of a thread whose node runs `Engine::node_runs` lists: it folds the whole log in
/// memory (decoded bodies), so a thread longer than this is read through `events` in pages.
pub const NODE_RUNS_EVENTS_MAX: u64 = 1_000_000;

/// Messages one trace returns (`cairn_tools::Operator::trace`): the result is held in memory; a query that
/// matches more is narrowed (a session, a correlation id, a time range) rather than cut.
pub const TRACE_MESSAGES_MAX: usize = 100_000;

/// Messages in one chain of parent ids a trace follows: a loop of parent ids in the record
/// stops here instead of running forever.
pub const TRACE_CHAIN_MAX: usize = 10_000;

/// How long a runner's lease on a thread lasts without renewal. Renewed by every batch of the
/// thread and, on a shared database, by the engine's heartbeat every third of it (so a live
/// engine keeps a thread through a call of any length); a crashed process's threads on a file
/// are taken over at the next open regardless (the database file lock proves the old owner is
/// gone).
pub const LEASE_TTL_MS: u64 = 60_000;

/// The default watchdog of a Running thread (`Config::watchdog_ms`): ten minutes without a step
/// is far past any step the engine's own work takes; a node or tool that takes longer should
/// say so with a timeout, which fails it sooner.
pub const WATCHDOG_MS_DEFAULT: u64 = 10 * 60 * 1_000;

/// The default slow-commit threshold (`Config::slow_commit_ms`): a local disk syncs in
/// milliseconds and PostgreSQL commits in tens of them; a second means the disk or the server
/// is in trouble.
pub const SLOW_COMMIT_MS_DEFAULT: u64 = 1_000;

/// The default interval of the engine's own health passes (`Config::health_every_ms`): a pass
/// reads every thread record (not their logs), so once a minute costs little and keeps the
/// gauges within a scrape or two of the truth.
pub const HEALTH_EVERY_MS_DEFAULT: u64 = 60_000;

/// Stuck threads and expired locks a health report names (it counts them all): enough to act
/// on, small enough to print.
pub const HEALTH_ITEMS_MAX: usize = 100;

/// How long a health pass waits for each of its reads of a database on a server (PostgreSQL)
/// before it reports the database as not answering, with the reason: a health check must
/// answer while the database does not (a page of thread records reads in milliseconds; the
/// store itself says a database is unreachable within its check's bound, a few seconds).
pub const HEALTH_DATABASE_WAIT_MS: u64 = 750;

/// The default interval of the retention passes (`RetentionPolicy::every_ms`): a pass lists the
/// finished threads (their records, not their logs), so once a minute costs little, and a
/// thread outlives its period by at most that.
pub const RETENTION_EVERY_MS_DEFAULT: u64 = 60_000;

/// Thread records one retention pass reads per page, and so the most deletions it has in
/// flight at once: memory holds one page, and the page's deletes share group commits.
pub const RETENTION_PAGE_MAX: usize = 256;

/// Threads one history pass (`Engine::prune_covered`) prunes at most: each prune is one write
/// transaction through the store's writer, so a pass over many long-lived threads shares the
/// writer with the runners instead of holding it; the next pass goes on.
pub const PRUNE_PASS_MAX: u64 = 256;

/// The longest an endpoint holds a `GET /api/threads/{id}/result?wait_ms=` request open: a
/// long poll is re-asked by its client (`cairn result --wait` does), so a dropped connection
/// costs at most this, and an endpoint never holds a request for ever.
pub const RESULT_WAIT_MS_MAX: u64 = 30_000;

/// Items in one page of the HTTP endpoint (threads, events): a page is built in memory and sent
/// as one JSON document, so a client pages through a large log instead of asking for all of it.
pub const SERVE_PAGE_MAX: usize = 1_000;

/// Bytes of one answer the CLI accepts from an engine's endpoint when it reads through it: above
/// the largest a page can be made of (a state of [`cairn_storage::limits::SNAPSHOT_BYTES_MAX`]
/// as JSON, a page of events with payloads), so only a broken or foreign server reaches it.
pub const SERVE_ANSWER_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Bytes of one request body to the HTTP endpoint (a control's input or a fork's update): the
/// same bound as one inline value plus its envelope would be too tight for a large input, and an
/// input is recorded in the log, so it stays far below a storage batch.
pub const SERVE_BODY_BYTES_MAX: usize = 1024 * 1024;

/// Threads one queue admission write admits (`api/queues.rs`): a pass writes again while a
/// write fills up, so this bounds one transaction, not a pass. Far below storage's
/// `QUEUE_ADMIT_MAX`.
pub const ADMIT_PER_WRITE_MAX: usize = 64;
const _: () = assert!(ADMIT_PER_WRITE_MAX <= cairn_storage::limits::QUEUE_ADMIT_MAX);

/// Runnable threads without a lease that one engine remembers having seen (`api/recover.rs`,
/// the orphan grace timed in real time): past it the memory starts again, which only restarts
/// the grace of the threads still waiting.
pub const ORPHANS_TRACKED_MAX: usize = 10_000;
