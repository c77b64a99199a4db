//! Named limits of the engine, each with its reason. Exceeding one is an error that names it.

// The limits the core folds and decides by live with it (`cairn_core::limits`).
pub(crate) use cairn_core::limits::READ_CHUNK_EVENTS;

/// Tool calls in one attempt of one task: a node that calls more is almost surely looping.
pub const TOOL_CALLS_PER_TASK_MAX: u32 = 10_000;

/// Events published and promises created in one attempt of one task (`ctx.set_event`,
/// `ctx.promise`): each is a durable write, and a node that makes more is almost surely looping.
pub const PUBLICATIONS_PER_TASK_MAX: u32 = 1_000;

/// Bytes of a published event's key: keys name things, as signal names do.
pub const PUBLISHED_KEY_BYTES_MAX: usize = 256;

/// Bytes of a published event's value (its JSON): it is kept in the thread's state, which every
/// checkpoint holds, so it stays inline (`cairn_core::limits::INLINE_VALUE_BYTES_MAX`).
pub const PUBLISHED_VALUE_BYTES_MAX: usize = cairn_core::limits::INLINE_VALUE_BYTES_MAX;

/// Distinct keys one thread publishes over its life (`ctx.set_event`): the thread's state keeps
/// the latest value of each, and every checkpoint holds them all, so with
/// [`PUBLISHED_VALUE_BYTES_MAX`] this bounds what publishing adds to a thread's state. A new key
/// past it is refused (nothing is written); a key published before may be published again.
pub const PUBLISHED_KEYS_PER_THREAD_MAX: usize = 1_024;

/// How long `Engine::get_event` (and its route) waits at most for a key to be published.
pub const GET_EVENT_WAIT_MS_MAX: u64 = 60_000;

/// Bytes of a worker build id (`EngineBuilder::build_id`): it names a deployment ("2026.12.1",
/// a commit hash) and is stored as a label of every thread the build pins, so it stays short.
pub const BUILD_ID_BYTES_MAX: usize = 64;

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

/// Events after a thread's latest checkpoint from which its completion writes a `completion`
/// checkpoint by default (`EngineBuilder::completion_checkpoint_after`). Below it, reading the
/// finished thread's state folds that many events at most, about what decoding a snapshot of
/// a small state costs; writing the snapshot was a fifth of a ten-step thread's whole cost
/// (`benches/README.md`, "the completion checkpoint when it pays").
pub const COMPLETION_CHECKPOINT_AFTER_DEFAULT: u64 = 100;

/// Manual checkpoints asked of one running thread and not yet taken by its runner (each is
/// written at the runner's next step boundary). More would only queue identical snapshots
/// behind a long step; the asker beyond it gets [`crate::Error::LimitExceeded`].
pub const CHECKPOINT_ASKS_MAX: usize = 16;

/// Updates asked of one running thread and not yet taken by its runner (each is applied at the
/// runner's next step boundary). The asker beyond it gets [`crate::Error::LimitExceeded`].
pub const UPDATE_ASKS_MAX: usize = 64;

/// Updates applied to one thread (`Engine::update`): their ids are kept in the thread's context
/// so that an id sent again is not applied twice; a thread taking more continues as new.
pub const UPDATES_PER_THREAD_MAX: usize = 10_000;

/// Bytes of an update id (`UpdateOptions::id`): a caller's idempotency key, not a payload.
pub const UPDATE_ID_MAX_BYTES: usize = 256;

/// How long `Engine::update` waits for a runner's next step boundary by default (ms).
pub const UPDATE_WAIT_DEFAULT_MS: u64 = 30_000;

/// The longest wait `Engine::update` takes (ms): the endpoint's `wait_ms` is capped here.
pub const UPDATE_WAIT_MAX_MS: u64 = 600_000;

/// How often a caller whose update another process's runner takes (a shared database) looks
/// at the thread's log between commits it hears of (ms): a floor for a commit feed that went
/// quiet (a listener reconnecting), not the usual wake.
pub const UPDATE_ELSEWHERE_POLL_MS: u64 = 200;

/// How often that caller tells the driving process again that an update waits (ms): the
/// message is best effort, and one lost must not leave the request for the whole wait. Also
/// the deadline of one telling.
pub const UPDATE_ELSEWHERE_RETELL_MS: u64 = 1_000;

/// Signals of a thread's inbox read per page when its runner looks for update requests from
/// other processes (`exec/update_inbox.rs`).
pub const UPDATE_INBOX_PAGE: usize = 256;

/// Bytes of the refusal an `update_refused` event records (the validator's message, cut at a
/// character boundary): it is kept in the thread's context, in every checkpoint. A thread
/// records at most [`UPDATES_PER_THREAD_MAX`] refusals.
pub const UPDATE_REFUSAL_BYTES_MAX: usize = 1_024;

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

/// A health pass reports the database's disk short below this many free bytes (default of
/// `Config::health_disk_free_min_bytes`), or below [`HEALTH_DISK_FREE_MIN_PERCENT`] of it.
pub const HEALTH_DISK_FREE_MIN_BYTES: u64 = 512 * 1024 * 1024;

/// A health pass reports the database's disk short below this share of it free, in percent.
pub const HEALTH_DISK_FREE_MIN_PERCENT: u64 = 5;

/// Stuck threads and expired locks a health report names (it counts them all): enough to act
/// on, small enough to print.
pub const HEALTH_ITEMS_MAX: usize = 100;

/// The default age past which a signal no node took counts in a health pass's signal backlog
/// (`Config::health_signal_backlog_ms`): ten minutes, like the watchdog; a signal a parked
/// node waits for is taken within a step of its arrival.
pub const HEALTH_SIGNAL_BACKLOG_MS_DEFAULT: u64 = 10 * 60 * 1_000;

/// Unfinished threads whose inbox a health pass reads for the signal backlog (the first ones
/// listed; the report says when it stopped short): one read each, so a pass stays bounded
/// however many threads wait.
pub const HEALTH_SIGNAL_THREADS_MAX: usize = 1_000;

/// Signals a health pass reads of one thread's inbox for the signal backlog (the first ones by
/// number, so the oldest): one read.
pub const HEALTH_SIGNALS_PER_THREAD_MAX: usize = 1_000;

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

/// Threads one queue admission write admits (`api/queues.rs`): a pass writes again while a
/// write fills up, so this bounds one transaction, not a pass. Far below storage's
/// `QUEUE_ADMIT_MAX`.
pub const ADMIT_PER_WRITE_MAX: usize = 64;
const _: () = assert!(ADMIT_PER_WRITE_MAX <= cairn_storage::limits::QUEUE_ADMIT_MAX);

/// Runnable threads without a lease that one engine remembers having seen (`api/recover.rs`,
/// the orphan grace timed in real time): past it the memory starts again, which only restarts
/// the grace of the threads still waiting.
pub const ORPHANS_TRACKED_MAX: usize = 10_000;

/// Children one task may start (`ctx.start_child`): each is a thread and a recorded value of
/// the task, and a node that starts more is almost surely looping; a larger fan-out belongs in
/// a map node, whose tasks each start a few.
pub const CHILDREN_PER_TASK_MAX: usize = 1_024;

/// Children one thread may start over its life (counted from the store's listing of its
/// children when it starts one): bounds what a long-lived parent leaves behind, and the
/// listing a parent's end reads to cancel them.
pub const CHILDREN_PER_THREAD_MAX: usize = 10_000;

/// Chunks one thread's live stream keeps (`ctx.stream`, `exec/streams.rs`): a reader behind by
/// more sees a gap (the oldest are dropped; the writer never waits). A model's answer of a few
/// thousand tokens is held whole for a reader that connects late.
pub const STREAM_CHUNKS_MAX: usize = 4_096;

/// Bytes (of JSON) one thread's live stream keeps, dropping the oldest chunks past it: with
/// [`STREAM_CHUNKS_MAX`], what a thread's stream costs in memory, whoever reads it.
pub const STREAM_BYTES_MAX: usize = 1 << 20;

/// Bytes (of JSON) in one chunk of a live stream: a token or a paragraph, not a document (a
/// larger value belongs in the node's result, which is durable).
pub const STREAM_CHUNK_BYTES_MAX: usize = 64 * 1024;
const _: () = assert!(STREAM_CHUNK_BYTES_MAX <= STREAM_BYTES_MAX);

/// Streams in the engine's map of live streams before it forgets those nobody holds (a thread
/// driven or read holds its own): each forgotten entry is a few bytes.
pub const STREAM_MAP_SWEEP_AT: usize = 1_024;

/// Parts of stream chunks queued to be sent to other processes on a shared database
/// (`exec/stream_forward.rs`; a part is one NOTIFY of at most 4 KiB, so at most 4 MiB wait):
/// a writer never waits, and past it a chunk is dropped for the other processes.
pub const STREAM_FORWARD_QUEUE_MAX: usize = 1_024;

/// The deadline of sending one part of a stream chunk to other processes (ms): a database
/// that does not answer costs the chunk, never a stalled sender.
pub const STREAM_FORWARD_SEND_MS: u64 = 2_000;

/// Engines whose chunks one engine puts back together at once (one chunk each, its parts in
/// order): more than a deployment runs; past it the chunks being put together are dropped.
pub const STREAM_FORWARD_SENDERS_MAX: usize = 256;

/// Workflows subscribed to one event name (`WorkflowBuilder::on_event`): an emit writes one
/// thread's creation per subscriber before it answers, so this bounds the writes one call
/// makes; a wider fan-out belongs in one subscriber that starts children.
pub const EVENT_SUBSCRIBERS_MAX: usize = 64;

/// Bytes of an emitted event's id: ids name things (an order's, a webhook delivery's), as
/// correlation ids do, and one is part of each started thread's id.
pub const EVENT_ID_BYTES_MAX: usize = 256;

/// Bytes (of JSON) of an emitted event's payload: it becomes the input of every subscriber's
/// thread, written once per subscriber, so it is held to a signal value's size
/// (`cairn_storage::limits::SIGNAL_BYTES_MAX`); a document belongs in storage the payload names.
pub const EVENT_PAYLOAD_BYTES_MAX: usize = cairn_storage::limits::SIGNAL_BYTES_MAX;

/// Threads one batch applies its operation to (`Engine::batch`): each costs two recorded
/// events in the batch's thread (its tool call and its result), so this bounds that thread's
/// log to a few hundred thousand events; a larger change is several batches by filter.
pub const BATCH_THREADS_MAX: usize = 100_000;

/// Threads a batch reads per page, one page per step of its thread: the progress a crash can
/// lose is at most one page's (those recorded are not applied again).
pub const BATCH_PAGE_THREADS: usize = 100;

/// Skipped threads a batch keeps with their reasons in its state (the newest): enough to see
/// why, without a state that grows with the batch.
pub const BATCH_SKIPS_KEPT: usize = 32;

/// Thread ids a batch filter may name (`BatchFilter::ids`, the web view's selected rows): the
/// filter is part of the batch's state, written with each of its steps, so it is held to a
/// list a page of the threads view can select; more threads are a batch by the other parts.
pub const BATCH_IDS_MAX: usize = 1_000;

/// How often a schedule under the `buffer_one` overlap policy looks again whether the run
/// before its waiting tick has ended (`api/schedule_overlap.rs`): each look is a round of the
/// schedule's thread (a timer and a recorded read, a few events), so a second keeps a waiting
/// tick within a second of its turn at a few events a second while it waits.
pub const SCHEDULE_BUFFER_POLL_MS: u64 = 1_000;

/// Runs one backfill of a schedule starts at most (`Engine::backfill_schedule`): each is a
/// thread created in its own commit, and a range that holds more is refused whole (backfill
/// it in parts), so a typo in a range cannot start a million threads.
pub const SCHEDULE_BACKFILL_RUNS_MAX: usize = 1_000;

/// Attempts of a debounced start (`docs/queues.md`): each reads its key's waiting start and
/// writes against it, refused when another start got there first. Sixteen concurrent starts on
/// one key within one read-and-write are a burst the caller should hear about, not loop on.
pub const DEBOUNCE_ATTEMPTS_MAX: u32 = 16;

/// Starts one batch run takes: their inputs become its input (one event, one record, well
/// inside `RECORD_BYTES_MAX` for inputs of a few KiB each), and each is ended in its write.
pub const BATCH_RUN_MEMBERS_MAX: usize = 256;
