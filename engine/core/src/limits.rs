//! Named limits of the core, each with its reason. The engine's `cairn::limits` re-exports
//! them beside its own.

/// Execution-history entries kept in a snapshot. The full history is the event log; the
/// snapshot keeps a window so that checkpoint size (and so restore cost) does not grow with the
/// length of a thread's life.
pub const SNAPSHOT_HISTORY_ENTRIES_MAX: usize = 256;

/// Errors kept in a snapshot, for the same reason as [`SNAPSHOT_HISTORY_ENTRIES_MAX`].
pub const SNAPSHOT_ERRORS_ENTRIES_MAX: usize = 64;

/// Tasks in one step (static fan-out plus map items). One step is one atomic batch, and a batch
/// is bounded by storage; 1,024 tasks of a few events each stays well inside it. A step over it
/// fails its thread with an error that says so.
pub const TASKS_PER_STEP_MAX: usize = 1_024;

// One map node's items always fit in one step, and a step's events (about three per task, plus
// the step's own) in one storage batch.
const _: () = assert!(cairn_dsl::limits::MAP_ITEMS_MAX <= TASKS_PER_STEP_MAX);
const _: () = assert!(TASKS_PER_STEP_MAX * 4 + 16 <= cairn_storage::limits::BATCH_EVENTS_MAX);

/// JSON values above this size (tool inputs and outputs, inputs, updates) are stored in the
/// content-addressed payload table and referenced from the event, so that event records stay
/// small and scans stay fast.
pub const INLINE_VALUE_BYTES_MAX: usize = 16 * 1024;

/// Model names whose usage a thread's telemetry keeps apart (the rest is summed under
/// `(other)`): a snapshot stays small whatever names tools report.
pub const MODELS_PER_THREAD_MAX: usize = 64;

/// Rollbacks the recovery strategy `restore_and_retry` makes in one thread before the next
/// failure fails it: a failure that comes back from every restore is not transient.
pub const RESTORES_PER_THREAD_MAX: u32 = 3;

/// Older checkpoints restore tries when the newest is damaged, before it folds the thread's
/// whole log from its first event instead (always correct, slower).
pub const RESTORE_FALLBACK_CHECKPOINTS_MAX: usize = 8;

/// Events read per query during restore and subscriptions.
pub const READ_CHUNK_EVENTS: usize = 1_024;

/// Signal names whose cursor (the number of the last signal of that name a node took) a thread
/// record's summary carries for the health pass's signal backlog: the first this many by name;
/// past them the summary says its cursors are partial, and the pass counts only the names it
/// has (a thread that receives more names than this is not judged on the others).
pub const SUMMARY_SIGNAL_NAMES_MAX: usize = 64;
