//! The engine's metric names: a stable interface, documented with their units in
//! docs/observability.md ("Metrics"). The store's group-commit metrics are in
//! [`cairn_storage::telemetry`].

/// Steps run (a step ends with its batch submitted, or with the thread stopped at it). Counter.
pub const STEPS: &str = "cairn_steps_total";
/// Time of one step from planning to its batch submitted (node execution included), seconds.
pub const STEP_SECONDS: &str = "cairn_step_duration_seconds";
/// Time of one node attempt (its code and its tool calls), seconds; labels `workflow`, `node`.
pub const NODE_SECONDS: &str = "cairn_node_duration_seconds";
/// Threads that ended under this engine, labels `workflow`, `status` (`completed`, `failed`,
/// `cancelled`, `timed_out`). Counter.
pub const THREADS_ENDED: &str = "cairn_threads_ended_total";
/// Time of a thread that ended under this engine, from its creation to its end (the engine's
/// clock, as its record has them), seconds; label `workflow`.
pub const THREAD_SECONDS: &str = "cairn_thread_duration_seconds";
/// Time from a schedule's tick to the start of the run it made, seconds.
pub const SCHEDULE_LAG_SECONDS: &str = "cairn_schedule_lag_seconds";
/// Time from a step's batch submitted to durable, seconds.
pub const COMMIT_SECONDS: &str = "cairn_commit_duration_seconds";
/// Step commits slower than [`crate::Config::slow_commit_ms`]. Counter.
pub const COMMITS_SLOW: &str = "cairn_commits_slow_total";
/// Tool calls, label `memo` (`true`: a recorded result returned, the tool not run). Counter.
pub const TOOL_CALLS: &str = "cairn_tool_calls_total";
/// Time of a tool call that ran (not a memo hit), seconds.
pub const TOOL_CALL_SECONDS: &str = "cairn_tool_call_duration_seconds";
/// Node attempts retried. Counter.
pub const RETRIES: &str = "cairn_retries_total";
/// Node attempts that failed (retried or not). Counter.
pub const NODE_FAILURES: &str = "cairn_node_failures_total";
/// Threads that ended Failed under this engine. Counter.
pub const THREAD_FAILURES: &str = "cairn_thread_failures_total";
/// Threads by stored status, label `status`, as of the latest health pass. Gauge.
pub const THREADS: &str = "cairn_threads";
/// Threads by workflow and stored status, at the latest health pass (the registry's workflows).
pub const WORKFLOW_THREADS: &str = "cairn_workflow_threads";
/// Runnable threads waiting for a permit (the concurrency limit). Gauge.
pub const WAITING_PERMIT: &str = "cairn_threads_waiting_permit";
/// Durable timers and deadlines armed in this engine. Gauge.
pub const TIMERS_ARMED: &str = "cairn_timers_armed";
/// Threads taken over from another (dead or lapsed) lease owner. Counter.
pub const LEASE_TAKEOVERS: &str = "cairn_lease_takeovers_total";
/// Runners stopped because another owner's lease fenced their write. Counter.
pub const RUNNERS_FENCED: &str = "cairn_runners_fenced_total";
/// Durable resource locks held, in the store. Gauge.
pub const LOCKS_HELD: &str = "cairn_locks_held";
/// Running threads with no step for longer than the watchdog, at the latest health pass. Gauge.
pub const STUCK_THREADS: &str = "cairn_health_stuck_threads";
/// Locks held past their time to live, at the latest health pass. Gauge.
pub const EXPIRED_LOCKS: &str = "cairn_health_expired_locks";
/// Signals older than the backlog threshold waiting in unfinished threads' inboxes that no
/// node took, at the latest health pass. Gauge.
pub const SIGNAL_BACKLOG: &str = "cairn_health_signal_backlog";
/// Threads deleted whole (by the retention policy or by hand), label `by` (`retention`,
/// `hand`). Counter.
pub const THREADS_DELETED: &str = "cairn_threads_deleted_total";
/// Checkpoints written, label `kind`: with a runner's batch (`periodic`, `node`, `phase`,
/// `failure`, `completion`) or by a control on a parked thread (`manual`, and a rollback's or a
/// migration's). Counter.
pub const CHECKPOINTS: &str = "cairn_checkpoints_total";
/// Threads waiting in a queue, label `queue`, as of the latest admission pass (from the counts
/// the store keeps: right after a restart too). Gauge.
pub const QUEUE_DEPTH: &str = "cairn_queue_depth";
/// A queue's admitted, unfinished threads, label `queue`, as of the latest admission pass. Gauge.
pub const QUEUE_RUNNING: &str = "cairn_queue_running";
