//! The rows the command line prints and the endpoint serves, as serde types: `views.rs` builds
//! them, the handlers serialize them, and the CLI reads an endpoint's answer back into them
//! (`serve::wire::read`, which refuses a field a row does not know), so a renamed field fails
//! loudly instead of printing blanks.

use cairn_storage::{CheckpointMeta, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod thread;
pub(crate) use thread::{
    Budget, Budgets, LastError, LockRow, Parent, ProblemRow, Redactable, Sealable, StateDiff,
    StateRow, ThreadDetails, ThreadRow, ThreadsPage, VerifyRow,
};

/// One event: `cairn events --json`, `GET /api/threads/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventRow {
    pub seq: u64,
    pub lsn: u64,
    pub at_ms: u64,
    pub kind: String,
    pub node: Option<String>,
    pub status: String,
    pub summary: String,
    /// The decoded body (a `checkpoint_created` one with the id its checkpoint got).
    pub body: Value,
}

/// A page of a thread's events, `GET /api/threads/{id}/events`: the thread's status read before
/// them, where its stored log starts (after 1 once pruned) and the `since` of the next page. The
/// endpoint serves its events as JSON (redacted when it must be), the CLI reads them as rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsPage<E = EventRow> {
    pub events: Vec<E>,
    pub first_seq: u64,
    pub next_since: u64,
    /// The key ids of the sealed bodies this reader holds no key for (absent when none): those
    /// events' bodies are placeholders (`docs/encryption.md`, "Tools").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealed: Vec<String>,
    pub status: String,
    pub thread: String,
}

/// One traced message: `cairn trace --json`, `GET /api/trace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageRow {
    pub lsn: u64,
    pub thread: String,
    pub seq: u64,
    pub at_ms: u64,
    /// The task that wrote it.
    pub node: String,
    pub role: String,
    pub to: Option<String>,
    pub content: String,
    pub correlation_id: Option<String>,
    pub id: Option<String>,
    pub parent: Option<String>,
}

/// The messages `GET /api/trace` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Traced {
    pub messages: Vec<MessageRow>,
}

/// A session as it stood at a time, `GET /api/threads/{id}/state?at_time=MS&session=1`
/// (`cairn state --at-time --session` reads it through an endpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionAt {
    pub thread: String,
    pub at_time: u64,
    pub threads: Vec<super::SessionThread>,
}

/// A chain stepped through, `GET /api/trace?chain=ID&states=1` (`cairn trace --chain --states`
/// reads it through an endpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChainStates {
    pub chain: String,
    pub steps: Vec<super::ChainStep>,
}

/// Every queue, `GET /api/queues` (`cairn queue list` reads it): the queues with their limits and
/// counts, and the engine clock's time (a queue's `recent` admissions count against its rate
/// limit until `at + period_ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueuesPage {
    pub now_ms: u64,
    pub queues: Vec<cairn_storage::QueueState>,
}

/// Where a checkpoint's snapshot stands in its thread's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Covers {
    pub seq: u64,
    pub lsn: u64,
    pub at_ms: u64,
}

/// One checkpoint's metadata: `cairn checkpoints --json`, `GET /api/checkpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointRow {
    pub id: u64,
    pub thread: String,
    pub workflow: WorkflowRef,
    pub kind: String,
    pub covers: Covers,
    pub created_at_ms: u64,
    pub snapshot_len: u64,
    pub meta: CheckpointMeta,
}

/// A page of checkpoints, newest first: `GET /api/checkpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointsPage {
    pub checkpoints: Vec<CheckpointRow>,
    pub limit: usize,
    pub offset: usize,
}

/// One checkpoint with what it restores: `cairn checkpoint show --json`,
/// `GET /api/checkpoints/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckpointDetails {
    #[serde(flatten)]
    pub info: CheckpointRow,
    pub status: String,
    pub step: u64,
    pub frontier: Vec<String>,
    pub state: Value,
}

/// One resumable thread: `cairn resumable --json`, `GET /api/resumable`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumableRow {
    pub thread: String,
    pub workflow: WorkflowRef,
    pub status: String,
    pub last_seq: Option<u64>,
    pub updated_at_ms: u64,
    /// Whether this engine has the thread's workflow compiled in.
    pub runnable: bool,
    pub why_not: Option<String>,
}

/// The threads an engine could resume: `GET /api/resumable`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumablePage {
    pub threads: Vec<ResumableRow>,
}

/// What a thread deletion removed: `cairn delete --json`, `DELETE /api/threads/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DeletedRow {
    pub thread: String,
    pub deleted: bool,
    pub status: String,
    pub events: u64,
    pub checkpoints: u64,
    pub locks: u64,
    pub payloads: u64,
}
