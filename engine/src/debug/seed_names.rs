//! The names of the seed format (the bundles of the framework Cairn grew from): its version
//! and its event types, as aliases of Cairn's (how the rest maps: `seed.rs`).

use cairn_storage::EventKind;

/// The seed format version read (the only one it ever wrote).
pub const SEED_VERSION: &str = "0.1.0";

/// The workflow id a converted seed thread is pinned to (version 0): no Cairn workflow has it.
pub const SEED_WORKFLOW_ID: &str = "seed";

/// The Cairn event kind of a seed event type, `None` for a name the seed does not have.
///
/// # Examples
/// ```
/// use cairn::debug::seed_event_kind;
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
