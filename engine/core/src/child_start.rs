//! Children a node starts at run time (`ctx.start_child`), as the log and the store know them:
//! the child's id, derived from where it was started, the labels that link it to its parent,
//! and the values the parent's task records for a start and a join.
//!
//! The id is a function of the parent thread, the step, the task and the draw's index in the
//! task (recorded: each start is one drawn value of the task), so a task that runs again after a
//! crash, or in a replay, names the same child, and starting it again finds it instead of
//! starting a second one. Unlike a sub-workflow's child (named by [`crate::children::PARENT_LABEL`]
//! and driven by its parent's node), a started child is a thread of its own: the engine drives
//! and recovers it like any other.

use serde_json::{Value, json};

/// The label that names the thread that started a child (set by the engine; reserved).
pub const STARTED_BY_LABEL: &str = "started_by";

/// The label a child started with the cancel policy carries (its value `cancel`): it is
/// cancelled when the thread that started it ends.
pub const PARENT_CLOSE_LABEL: &str = "parent_close";

/// The label a thread that started a child with the cancel policy carries (its value `yes`), so
/// that only such threads list their children when they end.
pub const CLOSES_CHILDREN_LABEL: &str = "closes_children";

/// The label a debounced start superseded by a later start of its key carries (its value: that
/// start), set by the engine in the write that supersedes it (`docs/queues.md`).
pub const SUPERSEDED_BY_LABEL: &str = "superseded_by";

/// The label a start taken by a batch run carries (its value: the batch run), set by the
/// engine in the write that starts the run (`docs/queues.md`).
pub const BATCHED_INTO_LABEL: &str = "batched_into";

/// The label naming the worker build a thread is pinned to (`EngineBuilder::build_id`): set at
/// creation by an engine with a build id (unless the start leaves it unpinned), changed only by
/// `Engine::repin` (a `labels_changed` event). An engine with a build id takes only threads
/// pinned to it or unpinned ones; see [`pinned_elsewhere`].
pub const BUILD_LABEL: &str = "cairn.build";

/// Whether a thread with `labels` is pinned to a build other than `build` (this engine's build
/// id, `None` for an engine without one): such a thread is left to an engine of its build.
///
/// ```
/// use std::collections::BTreeMap;
/// use cairn_core::child_start::{BUILD_LABEL, pinned_elsewhere};
/// let mut labels = BTreeMap::new();
/// assert!(!pinned_elsewhere(&labels, Some("b")));
/// labels.insert(BUILD_LABEL.to_owned(), "a".to_owned());
/// assert!(pinned_elsewhere(&labels, Some("b")));
/// assert!(pinned_elsewhere(&labels, None));
/// assert!(!pinned_elsewhere(&labels, Some("a")));
/// ```
pub fn pinned_elsewhere(
    labels: &std::collections::BTreeMap<String, String>,
    build: Option<&str>,
) -> bool {
    labels.get(BUILD_LABEL).is_some_and(|pinned| Some(pinned.as_str()) != build)
}

/// The labels the engine sets and reads itself: a sub-workflow child's parent, a started
/// child's starter and parent-close policy, the mark of a thread that closes its children, the
/// start that took a queued start's place (a later debounced start, a batch run), and the build
/// a thread is pinned to.
/// A start given one of them is refused (a user's `started_by` would make a thread look like
/// another's child, and its end cancel or leave threads it never started).
///
/// ```
/// assert!(cairn_core::child_start::RESERVED_LABELS.contains(&"started_by"));
/// ```
pub const RESERVED_LABELS: &[&str] = &[
    crate::children::PARENT_LABEL,
    STARTED_BY_LABEL,
    PARENT_CLOSE_LABEL,
    CLOSES_CHILDREN_LABEL,
    SUPERSEDED_BY_LABEL,
    BATCHED_INTO_LABEL,
    BUILD_LABEL,
];

/// The id of the child started by the draw `n` of `task` at `step` of `parent`.
pub fn started_child_id(parent: &cairn_storage::ThreadId, task: &str, step: u64, n: u64) -> String {
    let id = format!("{parent}/{task}@{step}/child-{n}");
    if id.len() <= cairn_storage::limits::THREAD_ID_BYTES_MAX {
        return id;
    }
    // Deep nesting makes long ids: keep a hash of the whole and a readable tail.
    let hash = blake3::hash(id.as_bytes()).to_hex();
    format!("child-{}-{n}", &hash[..32])
}

/// What the parent's task records for a start: the child, its workflow and a hash of its input.
pub fn start_record(child: &str, workflow: &str, input: &Value) -> Value {
    json!({ "child": child, "workflow": workflow, "input": crate::thread_ctx::input_hash(input) })
}

/// Whether the recorded start `recorded` is the start of `workflow` on `input`: `Ok(child)` if
/// it is, else what differs.
pub fn same_start(recorded: &Value, workflow: &str, input: &Value) -> Result<String, String> {
    let child = recorded.get("child").and_then(Value::as_str).ok_or("a malformed child start")?;
    let was = recorded.get("workflow").and_then(Value::as_str).unwrap_or_default();
    if was != workflow {
        return Err(format!(
            "child {child} was started of workflow {was:?}, the code starts {workflow:?}"
        ));
    }
    if recorded.get("input").and_then(Value::as_str) != Some(&crate::thread_ctx::input_hash(input))
    {
        return Err(format!(
            "child {child} was started on another input than the code gives it now"
        ));
    }
    Ok(child.to_owned())
}

/// How a joined child ended, as the parent's task records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildEnd {
    /// The child thread.
    pub child: String,
    /// Its terminal status, as shown (`completed`, `failed`, ...).
    pub status: String,
    /// Its output, when it completed.
    pub output: Option<Value>,
    /// Its last error, when it did not.
    pub error: Option<String>,
}

impl ChildEnd {
    /// The end as a node sees it (`ctx.join_child_ended`).
    pub fn ended(self) -> cairn_dsl::ChildEnded {
        let ChildEnd { child, status, output, error } = self;
        cairn_dsl::ChildEnded { child, status, output, error }
    }

    /// The value the log records.
    pub fn record(&self) -> Value {
        json!({ "child": self.child, "status": self.status, "output": self.output, "error": self.error })
    }

    /// A recorded join, if `recorded` is one.
    pub fn read(recorded: &Value) -> Option<ChildEnd> {
        Some(ChildEnd {
            child: recorded.get("child")?.as_str()?.to_owned(),
            status: recorded.get("status")?.as_str()?.to_owned(),
            output: recorded.get("output").filter(|v| !v.is_null()).cloned(),
            error: recorded.get("error").and_then(Value::as_str).map(str::to_owned),
        })
    }
}

/// The listing filter of the children `parent` started, and the page after `found` of them.
pub fn started_page(
    parent: &cairn_storage::ThreadId,
    found: usize,
) -> (cairn_storage::ThreadFilter, cairn_storage::Page) {
    let filter = cairn_storage::ThreadFilter {
        labels: vec![(STARTED_BY_LABEL.to_owned(), parent.to_string())],
        ..cairn_storage::ThreadFilter::default()
    };
    (filter, cairn_storage::Page { limit: crate::children::CHILDREN_PAGE, offset: found })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_id_is_a_function_of_where_it_was_started() {
        let p = cairn_storage::ThreadId::new("p").unwrap();
        assert_eq!(started_child_id(&p, "fan", 3, 1), "p/fan@3/child-1");
        assert_ne!(started_child_id(&p, "fan", 3, 1), started_child_id(&p, "fan", 3, 2));
        let long = "n".repeat(400);
        let id = started_child_id(&p, &long, 3, 1);
        assert!(id.len() <= cairn_storage::limits::THREAD_ID_BYTES_MAX, "{id}");
        assert_eq!(id, started_child_id(&p, &long, 3, 1));
    }

    #[test]
    fn a_recorded_start_matches_only_the_same_workflow_and_input() {
        let r = start_record("c", "wf", &json!(1));
        assert_eq!(same_start(&r, "wf", &json!(1)), Ok("c".to_owned()));
        assert!(same_start(&r, "other", &json!(1)).unwrap_err().contains("other"));
        assert!(same_start(&r, "wf", &json!(2)).unwrap_err().contains("another input"));
    }

    #[test]
    fn a_join_reads_back() {
        let end = ChildEnd {
            child: "c".into(),
            status: "completed".into(),
            output: Some(json!(3)),
            error: None,
        };
        assert_eq!(ChildEnd::read(&end.record()), Some(end));
    }
}
