//! What a bundle says about its thread at a glance: its telemetry under the seed format's names
//! (`totalDuration`...) and one line per tool result (`toolResultsSummary`). Both are derived
//! (from the exported state and events), so import ignores them.

use std::collections::BTreeMap;

use cairn_storage::EventStatus;
use serde::{Deserialize, Serialize};

use cairn::error::Error;
use cairn::event::Body;
use cairn::thread_ctx::Snapshot;

/// A thread's counters, as the seed format's `telemetry` names them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleTelemetry {
    /// From the thread's creation to its last event, in ms of engine clock.
    pub total_duration: u64,
    /// Model tokens used.
    pub token_count: u64,
    /// Tool calls started.
    pub tool_call_count: u64,
    /// Node failures, retried ones included.
    pub error_count: u64,
    /// Retries scheduled.
    pub retry_count: u64,
    /// Total ms spent in each node.
    pub node_timings: BTreeMap<String, u64>,
}

impl BundleTelemetry {
    /// The telemetry of the thread whose (last) state is `state`.
    pub fn of(state: &Snapshot) -> Self {
        let m = &state.meta;
        Self {
            total_duration: m.updated_at_ms.saturating_sub(m.created_at_ms),
            token_count: m.telemetry.tokens,
            tool_call_count: m.telemetry.tool_calls,
            error_count: m.telemetry.errors,
            retry_count: m.telemetry.retries,
            node_timings: m.telemetry.node_ms.iter().map(|(k, ms)| (k.to_string(), *ms)).collect(),
        }
    }
}

/// One tool result of a bundle's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultSummary {
    /// The seq of its `tool_returned` event.
    pub seq: u64,
    /// The node that called the tool.
    pub node_id: String,
    /// The tool.
    pub tool_name: String,
    /// `success`, or `failure` when the tool returned an error.
    pub status: EventStatus,
    /// How long the call took, in ms of engine clock.
    pub duration_ms: u64,
    /// Bytes of the output's compact JSON (of the error's, for a failure).
    pub output_bytes: u64,
}

/// One line per `tool_returned` among `bodies` (seq, body), in seq order.
///
/// # Errors
/// [`Error::Codec`] if an output does not serialise.
pub(crate) fn tool_results<'a>(
    bodies: impl IntoIterator<Item = (u64, &'a Body)>,
) -> Result<Vec<ToolResultSummary>, Error> {
    let mut out = Vec::new();
    for (seq, body) in bodies {
        let Body::ToolReturned { task, name, output, duration_ms, .. } = body else { continue };
        let output_bytes = match output {
            Ok(v) => serde_json::to_vec(v)?.len(),
            Err(e) => serde_json::to_vec(e)?.len(),
        } as u64;
        out.push(ToolResultSummary {
            seq,
            node_id: task.node.to_string(),
            tool_name: name.clone(),
            status: body.status(),
            duration_ms: *duration_ms,
            output_bytes,
        });
    }
    Ok(out)
}
