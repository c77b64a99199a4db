//! The names of the seed format (the bundles of the framework Cairn grew from): its version
//! and its event types, as aliases of Cairn's (how the rest maps: `seed.rs`).

use cairn_storage::EventKind;

/// The seed format version read (the only one it ever wrote).
pub const SEED_VERSION: &str = "0.1.0";

/// The workflow id a converted seed thread is pinned to (version 0): no Cairn workflow has it.
pub const SEED_WORKFLOW_ID: &str = "seed";

/// What a thread imported from a seed-format bundle can be read with here (`cairn` commands):
/// everything that reads its log, record and checkpoints, none of which needs a workflow.
pub const SEED_THREAD_READS: &[&str] =
    &["show", "events", "threads", "checkpoints", "checkpoint show", "bundle export", "verify"];

/// The controls a thread imported from a seed-format bundle takes: they write its status, which
/// needs no workflow (it was imported paused, failed or completed, so nothing resumes it).
pub const SEED_THREAD_CONTROLS: &[&str] = &["pause", "cancel", "delete"];

/// What refuses a thread imported from a seed-format bundle (exit 1): each needs the thread's
/// workflow (its reducer or its nodes), and the seed format records none Cairn has. Its workflow
/// is [`SEED_WORKFLOW_ID`] v0, which no build registers.
pub const SEED_THREAD_REFUSED: &[&str] =
    &["state", "replay", "fork", "resume", "input", "rollback"];

/// One sentence saying what the imported seed thread `thread` can and cannot do (the text
/// `cairn bundle import` prints).
pub fn seed_thread_note(thread: &str) -> String {
    format!(
        "{thread} comes from a seed-format ({SEED_VERSION}) bundle and has no Cairn workflow: it \
         can be read ({}) and controlled ({}), not run: {} refuse it (they need its workflow)",
        SEED_THREAD_READS.join(", "),
        SEED_THREAD_CONTROLS.join(", "),
        SEED_THREAD_REFUSED.join(", ")
    )
}

/// Whether a thread pinned to `workflow` was imported from a seed-format bundle.
pub fn is_seed_workflow(workflow: &cairn_storage::WorkflowRef) -> bool {
    &*workflow.id == SEED_WORKFLOW_ID && workflow.version == 0
}

/// The Cairn event kind of a seed event type, `None` for a name the seed does not have.
///
/// # Examples
/// ```
/// use cairn_tools::debug::seed_event_kind;
/// use cairn::storage::EventKind;
/// assert_eq!(seed_event_kind("tool_result"), Some(EventKind::ToolReturned));
/// assert_eq!(seed_event_kind("tool_returned"), None); // Cairn's own name, not an alias
/// ```
pub fn seed_event_kind(name: &str) -> Option<EventKind> {
    Some(match name {
        "node_start" => EventKind::NodeStarted,
        "node_end" => EventKind::NodeCompleted,
        "tool_call" => EventKind::ToolCalled,
        "tool_result" => EventKind::ToolReturned,
        "error" => EventKind::NodeFailed,
        "retry" => EventKind::RetryScheduled,
        "checkpoint" => EventKind::CheckpointCreated,
        "budget_warning" => EventKind::BudgetWarning,
        "budget_exceeded" => EventKind::BudgetExceeded,
        _ => return None,
    })
}

/// Whether `version` is the seed format's.
pub(crate) fn is_seed_version(version: &str) -> bool {
    version == SEED_VERSION
}
