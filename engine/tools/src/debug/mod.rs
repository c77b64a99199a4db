//! Debugging a thread after the fact: time travel, diffs, forks, migrations and debug bundles.
//!
//! Everything here reads the same log the runner wrote and goes through the same pure fold
//! ([`cairn::thread_ctx::ThreadCtx::apply`]), so the state shown at a seq is the state the live
//! run had at that seq, not a reconstruction.
//!
//! - Time travel: [`Operator::state_at`](crate::Operator::state_at) (nearest checkpoint at or before the seq plus the events
//!   after it), [`Operator::states`](crate::Operator::states) (the state after each step of a range), [`Operator::diff`](crate::Operator::diff)
//!   (what changed between two seqs, as JSON pointers).
//! - Node runs: [`Operator::node_runs`](crate::Operator::node_runs), every run of every node (type, step, attempt, status,
//!   times, data, error), pending and skipped nodes included.
//! - Message tracing: [`Operator::trace`](crate::Operator::trace), a session's (or the store's) messages by correlation
//!   id, between two parties, in a time range, or up a chain of parent ids;
//!   [`InteractionGraph`] folds them into who talks to whom (DOT, Mermaid, an HTML page), and
//!   [`Operator::replay_chain`](crate::Operator::replay_chain) steps through a chain with the
//!   state after each message.
//! - Sessions: [`Operator::session_state_at_time`](crate::Operator::session_state_at_time), a
//!   thread and every thread it started, as they stood at one time.
//! - Forks: [`Operator::fork`](crate::Operator::fork) starts a new thread from another's state at a seq or checkpoint,
//!   optionally with an update applied first; the original is never written to.
//! - Manual checkpoints: [`Engine::checkpoint_now`] (of a running thread at its next step
//!   boundary, through its runner; of a parked one at once).
//! - Rollback: [`Operator::rollback`](crate::Operator::rollback) restores a parked thread in place to one of its
//!   checkpoints (recorded as a `rolled_back` event; nothing is erased) and leaves it Paused.
//! - Migrations: [`Engine::register_migration`] and [`Engine::migrate`] move a parked thread
//!   onto a new workflow version deliberately.
//! - Debug bundles ([`Bundle`]): one JSON document (a format shared with other agent runtimes) with the state, the
//!   events and their payloads, checkpoints and metadata, redacted on export
//!   ([`Redaction`]), validated field by field on import ([`Bundle::from_bytes`]), and importable
//!   into a fresh database ([`Operator::import_bundle`](crate::Operator::import_bundle)) to inspect or replay it there. Bundles
//!   of the framework Cairn grew from (the seed format, version [`SEED_VERSION`]) are read too,
//!   converted on read. An engine can write one for every thread that fails
//!   ([`FailureExport`], [`cairn::EngineBuilder::on_failure`]).

mod bundle;
mod bundle_file;
mod bundle_summary;
mod diff;
mod dup_keys;
mod export;
mod failure_export;
// Used by the CLI and the endpoint only (`cli` turns `http` on).
#[cfg(feature = "http")]
mod fold;
mod fork;
mod import;
mod interactions;
mod node_runs;
mod reader;
mod redact;
mod rollback;
#[cfg(feature = "http")]
pub(crate) mod rows;
#[cfg(feature = "http")]
pub(crate) mod sealed;
mod sealed_bundle;
mod seed;
mod seed_events;
mod seed_names;
mod seed_state;
mod session;
mod time_travel;
mod trace;
mod validate;
#[cfg(feature = "http")]
pub(crate) mod views;

use std::collections::BTreeMap;

use cairn_storage::{CheckpointId, ThreadStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use bundle::{
    BUNDLE_BYTES_MAX, BUNDLE_EVENTS_MAX, BUNDLE_FIRST_SEQ_MAX, BUNDLE_VERSION, Bundle,
    BundleCheckpoint, BundleEvent, BundleMetadata, BundleTelemetry, EventsExport,
    ToolResultSummary,
};
pub use diff::diff_values;
pub use failure_export::FailureExport;
pub use interactions::{Interaction, InteractionGraph};
#[cfg(feature = "http")]
pub(crate) use redact::Redactor;
pub use redact::{REDACTED, Redaction};
pub use rollback::{ROLLBACK_TAG, ROLLED_BACK_TO_FIELD};
pub use sealed_bundle::{
    SEALED_BUNDLE_VERSION, SealedBundle, SealedCheckpoint, SealedEvent, SealedMarker, SealedThread,
};
pub use seed_names::{
    SEED_THREAD_CONTROLS, SEED_THREAD_READS, SEED_THREAD_REFUSED, SEED_VERSION, SEED_WORKFLOW_ID,
    is_seed_workflow, seed_event_kind, seed_thread_note,
};
pub use session::{ChainStep, SessionThread};
pub use trace::{TraceQuery, TraceScope, TracedMessage};

#[allow(unused_imports, reason = "linked from the module docs")]
use cairn::Engine;
use cairn::thread_ctx::ThreadMeta;

/// Views returned by one [`Operator::states`](crate::Operator::states) call at most: each holds a whole state, so a range
/// is paged by the caller rather than materialised whole.
pub const STATES_MAX: usize = 10_000;

/// A thread's state at one seq: the user state and everything else the engine tracks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateView {
    /// Thread id.
    pub thread: String,
    /// The last event applied.
    pub seq: u64,
    /// Steps completed at that point.
    pub step: u64,
    /// The status at that point.
    pub status: ThreadStatus,
    /// The user state as JSON.
    pub state: Value,
    /// Everything but the user state (frontier, open step, telemetry, conversation...).
    pub meta: ThreadMeta,
}

/// One difference between two JSON values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Where, as a JSON pointer (RFC 6901) into the state; `""` is the whole state.
    pub path: String,
    /// The value before, `None` if it was added.
    pub before: Option<Value>,
    /// The value after, `None` if it was removed.
    pub after: Option<Value>,
}

/// Where a fork starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkFrom {
    /// The origin's state after the event at this seq.
    Seq(u64),
    /// The origin's state at this checkpoint (the seq it covers).
    Checkpoint(CheckpointId),
}

/// Options of [`Operator::fork`](crate::Operator::fork).
#[derive(Debug, Clone, PartialEq)]
pub struct ForkOptions {
    /// The new thread's id; a fresh one when `None`. An existing id is refused.
    pub thread_id: Option<String>,
    /// An update (JSON of the workflow's update type) applied before the fork runs, recorded
    /// as a `state_updated` event.
    pub update: Option<Value>,
    /// Labels of the new thread, over the origin's labels at the fork point (as its nodes left
    /// them; less its `parent` link).
    pub labels: BTreeMap<String, String>,
    /// Run the fork at once (default `true`); otherwise it stays Created until resumed.
    pub start: bool,
}

impl Default for ForkOptions {
    fn default() -> Self {
        Self { thread_id: None, update: None, labels: BTreeMap::new(), start: true }
    }
}

impl ForkOptions {
    /// Options with this thread id.
    pub fn id(id: impl Into<String>) -> Self {
        Self { thread_id: Some(id.into()), ..Self::default() }
    }

    /// Sets the update applied before the fork runs.
    #[must_use]
    pub fn update(mut self, update: impl Serialize) -> Self {
        self.update = Some(serde_json::to_value(update).unwrap_or(Value::Null));
        self
    }

    /// Leaves the fork Created instead of running it.
    #[must_use]
    pub fn paused(mut self) -> Self {
        self.start = false;
        self
    }
}

/// Options of [`Operator::export_bundle`](crate::Operator::export_bundle).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExportOptions {
    /// Include the thread's checkpoints.
    pub include_checkpoints: bool,
    /// Keep only the last N events (the state before them travels as the bundle's `base`).
    pub last_events: Option<usize>,
    /// Compress with gzip (used by callers that write the bytes: [`Bundle::to_bytes`]).
    pub gzip: bool,
    /// What to redact before anything leaves the engine.
    pub redaction: Redaction,
    /// Fields of your own kept in the bundle's `metadata.custom` (a build id, a ticket
    /// number); redacted like everything else.
    pub metadata: BTreeMap<String, Value>,
    /// Leave out every event body whose JSON is over this many bytes: the event keeps its
    /// type, node, status and summary, and `events.dropped` records the body's reference (its
    /// blake3 hash) and size. Such a bundle can be shown, not imported.
    pub max_payload_bytes: Option<usize>,
}
