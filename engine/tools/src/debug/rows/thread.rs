//! The rows of threads: a listing's ([`ThreadRow`]), one thread's details ([`ThreadDetails`]),
//! a state at a seq ([`StateRow`]) and a verify report ([`VerifyRow`]). Fields are declared in
//! alphabetical order, the order the endpoint's JSON (a `serde_json` map) has them, so that the
//! CLI prints the same text from the file as through the endpoint. Fields of the engine's own
//! types (telemetry, a waiting, node results, undos) that no renderer reads into are kept as
//! JSON, as the thread's log decodes them.

use std::collections::BTreeMap;

use cairn_dsl::Progress;
use cairn_storage::{Lease, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::debug::Change;
use cairn::sealing::Placeholder;
use cairn_core::telemetry::Telemetry;

/// One thread as a listing shows it: `cairn threads --json`, `GET /api/threads`. The step,
/// frontier, progress and last error are the thread record's summary (absent in a record
/// written before it had one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadRow {
    pub created_at_ms: u64,
    pub first_seq: u64,
    pub frontier: Option<Vec<String>>,
    pub labels: BTreeMap<String, String>,
    /// The last error's text.
    pub last_error: Option<String>,
    pub last_seq: Option<u64>,
    pub parent: Option<Parent>,
    #[schema(value_type = Option<Object>)]
    pub progress: Option<Progress>,
    /// The progress as a person reads it (`views::progress_text`): `step/total message`, or
    /// `done` for a completed thread that reported less.
    pub progress_text: Option<String>,
    pub status: String,
    pub step: Option<u64>,
    pub thread: String,
    pub updated_at_ms: u64,
    #[schema(value_type = Object)]
    pub workflow: WorkflowRef,
}

/// The page of threads `GET /api/threads` answers: `next` is the cursor of the following page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadsPage {
    pub limit: usize,
    pub next: Option<String>,
    pub offset: usize,
    pub threads: Vec<ThreadRow>,
}

/// The thread a thread comes from: the one it was forked from (at `seq`), or the one whose
/// sub-workflow node runs it (`seq` null, `via: "sub-workflow"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parent {
    pub seq: Option<u64>,
    pub thread: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// Everything `cairn show` reports: `cairn show --json`, `GET /api/threads/{id}`. The keys of
/// a [`ThreadRow`], with the step, frontier, progress, status and last error of the folded log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadDetails {
    /// Or the placeholder of a sealed value (`{"encrypted": true, "codec", "key"}`), as the
    /// other values folded from the log.
    #[schema(value_type = Budgets)]
    pub budgets: Sealable<Budgets>,
    #[schema(value_type = Option<String>)]
    pub continued_as: Option<Sealable<String>>,
    #[schema(value_type = Option<String>)]
    pub continued_from: Option<Sealable<String>>,
    pub created_at_ms: u64,
    pub first_seq: u64,
    /// The fork origin, if a fork.
    pub fork: Option<Value>,
    pub frontier: Vec<String>,
    pub labels: BTreeMap<String, String>,
    #[schema(value_type = Option<LastError>)]
    pub last_error: Option<Sealable<LastError>>,
    pub last_seq: Option<u64>,
    #[schema(value_type = Option<Object>)]
    pub lease: Option<Lease>,
    pub locks: Vec<LockRow>,
    /// Each node's latest result.
    pub node_results: Value,
    pub output: Option<Value>,
    pub parent: Option<Parent>,
    #[schema(value_type = Option<Object>)]
    pub progress: Option<Progress>,
    /// As [`ThreadRow::progress_text`].
    pub progress_text: Option<String>,
    /// The key ids of the sealed bodies this reader holds no key for (absent when none): the
    /// values folded from the log are then placeholders (`docs/encryption.md`, "Tools").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealed: Vec<String>,
    pub seq: u64,
    /// Why the state could not be folded here (a workflow not compiled in), if so.
    pub state_unknown: Option<String>,
    pub status: String,
    /// An error that is no node's (a resume blocked by a diverging replay).
    pub status_reason: Option<String>,
    pub step: u64,
    #[schema(value_type = Object)]
    pub telemetry: Sealable<Telemetry>,
    pub thread: String,
    #[schema(value_type = Object)]
    pub undos: Sealable<Vec<Value>>,
    pub unwinding: Option<Value>,
    pub updated_at_ms: u64,
    /// The updates its workflow declares (`POST /api/threads/{id}/updates/{name}`), in order;
    /// absent when none (or the workflow is not compiled in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updates: Vec<String>,
    /// What a parked thread waits for.
    pub waiting: Option<Value>,
    #[schema(value_type = Object)]
    pub workflow: WorkflowRef,
}

/// What a thread used of each budget, and its limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Budgets {
    pub cost_micros: Budget,
    pub steps: Budget,
    /// A string when redacted (its key names a token).
    #[schema(value_type = Object)]
    pub tokens: Redactable<Budget>,
    pub tool_calls: Budget,
    pub wall_ms: Budget,
}

/// What a thread used of one budget, and its limit if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Budget {
    pub limit: Option<u64>,
    pub used: u64,
}

/// A value, or the string redaction put in its place (under a key that names a secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Redactable<T> {
    Shown(T),
    Redacted(String),
}

/// A value folded from a thread's log, or the placeholder of a value sealed with a key the
/// reader does not hold (`{"encrypted": true, "codec", "key"}`, `docs/encryption.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Sealable<T> {
    // First: a placeholder's exact shape (no other field) is tried before a value that could
    // take an object with defaults.
    Sealed(Placeholder),
    Open(T),
}

/// A lock a thread holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LockRow {
    pub acquired_at_ms: u64,
    pub expires_at_ms: u64,
    pub name: String,
}

/// The last error a node of a thread recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LastError {
    pub at_ms: u64,
    pub error: String,
    pub seq: u64,
    pub task: String,
}

/// The state after a seq: `cairn state --json`, `GET /api/threads/{id}/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateRow {
    /// Absent only when sealed bodies hide it (an earlier seq read without the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontier: Option<Vec<String>>,
    /// The key ids of the sealed bodies this reader holds no key for (absent when none): the
    /// state is then a placeholder (`docs/encryption.md`, "Tools").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealed: Vec<String>,
    pub seq: u64,
    /// The user state.
    pub state: Value,
    /// As `frontier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// As `frontier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    pub thread: String,
}

/// The changes between the states after two seqs: `cairn state --diff A B --json`,
/// `GET /api/threads/{id}/state?diff=A,B`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateDiff {
    pub changes: Vec<Change>,
    pub from: u64,
    pub thread: String,
    pub to: u64,
}

/// A verify report: `cairn verify --json`, `GET /api/verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VerifyRow {
    pub checkpoints: u64,
    pub clean: bool,
    pub events: u64,
    pub locks: u64,
    /// Whether the store opened (`cairn verify` of a file too damaged to open says false).
    pub opened: bool,
    pub payloads: u64,
    pub problems: Vec<ProblemRow>,
    pub threads: u64,
}

/// One damaged record a verify found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProblemRow {
    pub detail: String,
    /// The seq (an event) or id (a checkpoint), when known.
    pub seq: Option<u64>,
    pub table: String,
    pub thread: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ThreadDetails;
    use crate::serve::wire::read;

    /// A thread as the endpoint answers it, with `extra` set beside its fields.
    fn answer(extra: Option<(&str, serde_json::Value)>) -> serde_json::Value {
        let used = |n: u64| json!({"used": n, "limit": null});
        let mut v = json!({
            "budgets": {"cost_micros": used(0), "steps": used(3), "tokens": "[REDACTED]",
                        "tool_calls": used(1), "wall_ms": used(9)},
            "continued_as": null, "continued_from": null, "created_at_ms": 1, "first_seq": 1,
            "fork": null, "frontier": ["a"], "labels": {"k": "v"}, "last_error": null,
            "last_seq": 7, "lease": null, "locks": [], "node_results": {}, "output": null,
            "parent": {"thread": "p", "seq": null, "via": "sub-workflow"}, "progress": null,
            "progress_text": null, "seq": 7, "state_unknown": null, "status": "running", "status_reason": null,
            "step": 3, "telemetry": cairn_core::telemetry::Telemetry::default(), "thread": "t",
            "undos": [], "unwinding": null, "updated_at_ms": 2, "waiting": null,
            "workflow": {"id": "w", "version": 1, "fingerprint": "f"},
        });
        if let Some((key, value)) = extra {
            v[key] = value;
        }
        v
    }

    /// A thread reads back into its row and prints as it was answered; a field this version
    /// does not know, at the top or nested, is refused by name.
    #[test]
    fn a_thread_with_a_field_it_does_not_know_is_refused_by_name() {
        let read_back: ThreadDetails = read(answer(None), "thread").expect("reads");
        assert_eq!(serde_json::to_value(&read_back).unwrap(), answer(None));
        let top = read::<ThreadDetails>(answer(Some(("color", json!("red")))), "thread");
        let top = top.unwrap_err().to_string();
        assert!(top.contains("unknown field `color`"), "{top}");
        let nested = json!({"thread": "p", "seq": 1, "hue": 2});
        let nested = read::<ThreadDetails>(answer(Some(("parent", nested))), "thread");
        let nested = nested.unwrap_err().to_string();
        assert!(nested.contains("parent") && nested.contains("hue"), "{nested}");
    }
}
