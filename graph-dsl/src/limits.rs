//! Every bound of this crate, with its reason.
//!
//! Exceeding a definition-time limit is a [`Problem::LimitExceeded`](crate::Problem) from
//! `build()`; exceeding a run-time one is a [`StateError::LimitExceeded`](crate::StateError).
//! Nothing is ever truncated silently.

/// Nodes in one workflow. Workflows are written by hand; a thousand nodes is far past any
/// readable graph, and it keeps the O(nodes²) join analysis and the pictures small.
pub const NODES_MAX: usize = 1_024;

/// Bytes in a node name, workflow id, tag or permission. Names appear in every logged event
/// and in pictures; they are labels, not payloads.
pub const NAME_BYTES_MAX: usize = 128;

/// Distinct successors one node may declare (edges, route targets and gotos together). One
/// step may activate all of them at once, so this bounds a step's frontier growth.
pub const FAN_OUT_MAX: usize = 256;

/// Branches one join may wait for (same reason as [`FAN_OUT_MAX`]).
pub const JOIN_SOURCES_MAX: usize = 256;

/// Items one map node may fan out over in one step. Each item is a task and a logged update,
/// and a step is written as one atomic batch: the engine runs at most 1,024 tasks in a step.
/// Larger batches belong in a loop or a sub-workflow that pages through them.
pub const MAP_ITEMS_MAX: usize = 1_024;

/// Nesting depth of sub-workflows (a workflow with no sub-workflow has depth 0). Pictures and
/// fingerprints walk the nesting, and deeper nesting is a design smell, not a need.
pub const SUBGRAPH_DEPTH_MAX: usize = 8;

/// Attempts a retry policy may allow. Past this, retrying is a loop and should be one, with a
/// bound visible in the graph.
pub const RETRY_ATTEMPTS_MAX: u32 = 100;

/// Longest backoff between attempts (one day). A longer wait is a schedule, not a retry.
pub const BACKOFF_MS_MAX: u64 = 86_400_000;

/// Largest backoff multiplier. Beyond this the backoff reaches its maximum after one attempt,
/// which a fixed backoff says more plainly.
pub const BACKOFF_MULTIPLIER_MAX: f64 = 100.0;

/// Tags on one node.
pub const TAGS_MAX: usize = 32;

/// Locks taken at once ([`Ctx::lock_all`](crate::Ctx::lock_all)): they are one atomic write,
/// and a node that needs more is better served by one lock over the whole set.
pub const LOCKS_AT_ONCE_MAX: usize = 64;

/// Model names one tool call reports usage under (`ToolCtx::report_model_usage`); the rest
/// is summed under `(other)`, so a call's record stays small.
pub const MODELS_PER_CALL_MAX: usize = 64;

/// Permissions one workflow may hold.
pub const PERMISSIONS_MAX: usize = 64;

/// Largest loop bound (visits of one node per thread). A bound is a promise that the loop ends;
/// a million visits is past any loop that should run in a single thread.
pub const LOOP_BOUND_MAX: u32 = 1_000_000;

/// Refused writes that [`Variables`](crate::Variables) keeps (the oldest are dropped and only
/// counted), so a misbehaving node cannot grow the state without bound.
pub const REJECTED_WRITES_MAX: usize = 64;

/// Metadata entries of one variable (unit, description, source...): metadata describes a
/// value, it is not a second store beside it.
pub const VAR_METADATA_ENTRIES_MAX: usize = 32;

/// Bytes in a label's key or value set by a node ([`Ctx::set_label`](crate::Ctx::set_label)):
/// the same bound the store puts on every label (`cairn_storage::limits::LABEL_BYTES_MAX`),
/// checked where the node can still handle it. Labels are indexed search keys, not payloads.
pub const LABEL_BYTES_MAX: usize = 256;

/// Checks a label change: a key of 1..=[`LABEL_BYTES_MAX`] bytes and a value of at most that.
///
/// # Errors
/// A message naming the bound exceeded.
pub(crate) fn check_label(key: &str, value: Option<&str>) -> Result<(), String> {
    if key.is_empty() {
        return Err("a label's key is empty".into());
    }
    for (what, len) in [("key", key.len()), ("value", value.map_or(0, str::len))] {
        if len > LABEL_BYTES_MAX {
            return Err(format!(
                "a label's {what} is {len} bytes, past LABEL_BYTES_MAX ({LABEL_BYTES_MAX})"
            ));
        }
    }
    Ok(())
}

/// What a limit of this module bounds, in words, for messages.
pub fn in_words(limit: &str) -> &'static str {
    match limit {
        "NODES_MAX" => "the nodes of one workflow",
        "NAME_BYTES_MAX" => "a name's length in bytes",
        "FAN_OUT_MAX" => "the branches of one fan-out",
        "JOIN_SOURCES_MAX" => "the branches one join waits for",
        "MAP_ITEMS_MAX" => "the items of one map node",
        "SUBGRAPH_DEPTH_MAX" => "the nesting depth of sub-workflows",
        "RETRY_ATTEMPTS_MAX" => "the attempts of a retry policy",
        "BACKOFF_MS_MAX" => "a retry backoff in ms",
        "BACKOFF_MULTIPLIER_MAX" => "a retry backoff's multiplier",
        "TAGS_MAX" => "the tags of one node",
        "LOCKS_AT_ONCE_MAX" => "the locks taken at once",
        "PERMISSIONS_MAX" => "the permissions of one workflow",
        "LOOP_BOUND_MAX" => "a loop bound",
        "REJECTED_WRITES_MAX" => "the rejected writes kept",
        "VAR_METADATA_ENTRIES_MAX" => "the metadata entries of one variable",
        "LABEL_BYTES_MAX" => "a label's key or value in bytes",
        _ => "a value",
    }
}

/// Signal names one `select` waits for at once. Each is looked up in the inbox at every look
/// and named in the wait's record; a wait on more names is a loop over a queue of work, not a
/// choice between a few things that may happen.
pub const SELECT_SIGNALS_MAX: usize = 16;
