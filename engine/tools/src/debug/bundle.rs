//! The debug bundle: one JSON document with everything about one thread.
//!
//! ```text
//! {
//!   "version": "1.0.0",                      format version (major 1 is read)
//!   "timestamp": 1702886400000,              export time, ms
//!   "state": {"meta": {...}, "state": ...},  the thread context at its last event
//!   "events": {
//!     "events": [{"id", "seq", "timestamp", "type", "nodeId"?, "status", "summary",
//!                 "payloadRef"? | "metadata"?}],   metadata = the event body, inline
//!     "payloads": {"payload-<blake3 of the body's JSON>": body},  bodies over 16 KiB
//!     "dropped": {"payload-<blake3>": bytes}?   bodies left out (`max_payload_bytes`)
//!   },
//!   "base": {"meta", "state"}?,              the context before the first event, when the
//!                                            bundle does not start at seq 1
//!   "checkpoints": [{"id", "stateId", "state", "eventIndex", "timestamp", "kind",
//!                    "workflow", "metadata"}]?,
//!   "telemetry": {"totalDuration", "tokenCount", "toolCallCount", "errorCount",
//!                 "retryCount", "nodeTimings"}?,   derived from the state, for people
//!   "toolResultsSummary": [{"seq", "nodeId", "toolName", "status", "durationMs",
//!                           "outputBytes"}]?,     one per tool_returned event
//!   "metadata": {"cairn_version", "workflow": {id, version, fingerprint}, "platform",
//!                "thread": {...}, "redaction": {...}, "custom": {...}?,
//!                "source_version"?}
//! }
//! ```
//!
//! [`Bundle::from_bytes`] accepts exactly this (gzip or not) and checks everything before
//! anything uses it; every problem is an [`Error::Bundle`](cairn::Error::Bundle) naming the JSON path. It also reads
//! the bundles of the framework Cairn grew from (format `0.1.0`), converting them on read (see
//! `seed.rs` for how each of their fields maps); the result is a bundle of this format with
//! `metadata.source_version` set.

use std::collections::BTreeMap;

use cairn_storage::WorkflowRef;
use cairn_storage::{CheckpointKind, CheckpointMeta, EventKind, EventStatus, ThreadStatus};
use serde::Serialize;
use serde_json::Value;

use cairn::event::ForkOrigin;
use cairn::thread_ctx::Snapshot;

pub use super::bundle_summary::{BundleTelemetry, ToolResultSummary};

/// The format version written; bundles of major version 1 are read.
pub const BUNDLE_VERSION: &str = "1.0.0";
/// Bytes of a bundle's JSON (after gzip decompression). Import holds the whole document in
/// memory, and a decompression bomb stops here.
pub const BUNDLE_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Events in one bundle: import writes them in batches, and a bound keeps one import's time and
/// memory predictable.
pub const BUNDLE_EVENTS_MAX: usize = 1_000_000;
/// The highest first seq a bundle may start at. A bundle that does not start at seq 1 is
/// imported by writing placeholders for the missing prefix and pruning them (storage numbers a
/// thread's events from 1), so this bounds that work.
pub const BUNDLE_FIRST_SEQ_MAX: u64 = 1_000_000;

/// A debug bundle of one thread. Build one with [`Operator::export_bundle`](crate::Operator::export_bundle), read one
/// with [`Bundle::from_bytes`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bundle {
    /// Format version ([`BUNDLE_VERSION`]).
    pub version: String,
    /// When it was exported (ms since the Unix epoch).
    pub timestamp: u64,
    /// The thread context at its last event (or at its latest checkpoint when the exporting
    /// engine did not have the workflow registered: `state.meta.seq` says which).
    pub state: Snapshot,
    /// The events and their large bodies.
    pub events: EventsExport,
    /// The thread context just before the first event, when that is not seq 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<Snapshot>,
    /// Checkpoints, when exported with them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Vec<BundleCheckpoint>>,
    /// The thread's counters and total duration, under the names the seed format gives them
    /// (absent in bundles written before it was exported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<BundleTelemetry>,
    /// One line per tool result of the exported events (absent in bundles written before it
    /// was exported). Computed before payloads are dropped, so it covers dropped ones too.
    #[serde(rename = "toolResultsSummary", skip_serializing_if = "Option::is_none")]
    pub tool_results_summary: Option<Vec<ToolResultSummary>>,
    /// Where it came from.
    pub metadata: BundleMetadata,
}

/// The events of a bundle, with the bodies too large to inline stored by reference.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct EventsExport {
    /// Events in seq order, without gaps.
    pub events: Vec<BundleEvent>,
    /// Bodies by reference: `payload-<blake3 hex of the body's compact JSON>` -> body.
    pub payloads: BTreeMap<String, Value>,
    /// Bodies left out on export ([`super::ExportOptions::max_payload_bytes`]): their reference
    /// (the blake3 of the body's compact JSON, as in `payloads`) -> their size in bytes. Events
    /// whose `payloadRef` is here keep their type, node, status and summary; such a bundle can
    /// be read and shown but not imported, since the log needs every body.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped: BTreeMap<String, u64>,
}

/// One event of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleEvent {
    /// `evt-<seq>`.
    pub id: String,
    /// Its seq in the thread.
    pub seq: u64,
    /// When (engine clock, ms).
    pub timestamp: u64,
    /// Its kind.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The node it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// How it turned out.
    pub status: EventStatus,
    /// One human line.
    pub summary: String,
    /// The key of its body in [`EventsExport::payloads`] (large bodies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_ref: Option<String>,
    /// Its body (a [`cairn::event::Body`] as JSON), when inline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One checkpoint of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleCheckpoint {
    /// `checkpoint-<eventIndex>` (with `-2`, `-3`... for further checkpoints of one seq).
    pub id: String,
    /// The thread it snapshots.
    pub state_id: String,
    /// The snapshot.
    pub state: Snapshot,
    /// The seq it covers.
    pub event_index: u64,
    /// When it was taken (engine clock, ms).
    pub timestamp: u64,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// The workflow version its snapshot belongs to.
    pub workflow: WorkflowRef,
    /// Creator, description, tags, custom fields.
    pub metadata: CheckpointMeta,
}

/// Where a bundle came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BundleMetadata {
    /// The exporting Cairn's version.
    pub cairn_version: String,
    /// The thread's workflow (id, version, fingerprint).
    pub workflow: WorkflowRef,
    /// `<os>-<arch>` of the exporting machine.
    pub platform: String,
    /// The thread's record.
    pub thread: BundleThread,
    /// What was redacted (the rules, not the values).
    pub redaction: BundleRedaction,
    /// Fields the exporter added ([`super::ExportOptions::metadata`]); for a converted seed
    /// bundle, the seed's own metadata (`userAgent`...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub custom: BTreeMap<String, Value>,
    /// Set when the bundle was converted on read from a bundle of the seed framework: that
    /// bundle's version (`0.1.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_version: Option<String>,
}

/// The thread a bundle holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BundleThread {
    /// Its id.
    pub id: String,
    /// Its status.
    pub status: ThreadStatus,
    /// Created at (engine clock, ms).
    pub created_at_ms: u64,
    /// Updated at (engine clock, ms).
    pub updated_at_ms: u64,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The thread and seq it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ForkOrigin>,
    /// The first seq the bundle holds (the thread's history before it is summed up in `base`).
    pub first_seq: u64,
    /// Its last seq.
    pub last_seq: u64,
}

/// The redaction rules a bundle was exported under.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BundleRedaction {
    /// Key patterns whose values were replaced.
    pub key_patterns: Vec<String>,
    /// How many secret values were registered (the values are never written).
    pub secrets: u64,
}
