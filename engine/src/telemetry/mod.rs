//! Telemetry: the engine's metrics (through the `metrics` facade) and its health report. The
//! tracing spans are emitted where the work happens (`exec/`, `api/recover.rs`, the store's
//! writers); their names and fields, and the metric names with their units, are listed in
//! docs/observability.md ("Spans", "Metrics").
//!
//! This module sits beside `config.rs` at the bottom of the layers: every layer may record a
//! metric, and it imports nothing of theirs.

mod health;
pub(crate) mod metrics;
pub mod names;
#[cfg(feature = "otel")]
pub mod otel;
pub(crate) mod repeated;
mod resources;

pub use cairn_storage::telemetry as storage;
pub use health::{
    CommitHealth, Coordination, DatabaseHealth, ExpiredLock, HealthReport, SignalBacklog,
    StuckThread,
};
pub(crate) use health::{Thresholds, check as health_check};
pub use resources::{DiskSpace, ResourceHealth};

/// Puts a `thread` span in its thread's OpenTelemetry trace (feature `otel`, with a pipeline
/// built); otherwise nothing.
#[inline]
pub(crate) fn adopt_thread_trace(span: &tracing::Span, thread: &str) {
    #[cfg(feature = "otel")]
    otel::adopt(span, thread);
    #[cfg(not(feature = "otel"))]
    let _ = (span, thread);
}
