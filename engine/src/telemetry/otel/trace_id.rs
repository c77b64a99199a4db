//! A thread's trace: its id derived from the thread's id, so that every run of the thread (the
//! first, one resumed after a restart, one taken over by another worker) continues one trace.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Whether an OTLP pipeline was built in this process: until then a thread span is left alone
/// (no hash, no lookup), so a build with the feature but no exporter costs nothing per thread.
pub(super) static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The trace id of `thread` and the id of its (never exported) root: the first 16 bytes of
/// blake3 of the thread's id, and the next 8. Neither is zero (the invalid ids).
///
/// # Examples
///
/// ```
/// let (trace, root) = cairn::telemetry::otel::thread_trace("order-17");
/// assert_eq!((trace, root), cairn::telemetry::otel::thread_trace("order-17"));
/// assert_ne!(trace, cairn::telemetry::otel::thread_trace("order-18").0);
/// ```
pub fn thread_trace(thread: &str) -> (TraceId, SpanId) {
    let hash = blake3::hash(thread.as_bytes());
    let bytes = hash.as_bytes();
    let mut trace = [0u8; 16];
    trace.copy_from_slice(&bytes[..16]);
    let mut root = [0u8; 8];
    root.copy_from_slice(&bytes[16..24]);
    // A zero id is invalid in OpenTelemetry; blake3 gives one with probability 2^-128.
    trace[15] |= u8::from(trace == [0; 16]);
    root[7] |= u8::from(root == [0; 8]);
    (TraceId::from_bytes(trace), SpanId::from_bytes(root))
}

/// Makes `span` (a `thread` span) a child of its thread's trace, whatever span it was opened in.
pub(crate) fn adopt(span: &tracing::Span, thread: &str) {
    if !ACTIVE.load(Ordering::Relaxed) || span.is_disabled() {
        return;
    }
    let (trace, root) = thread_trace(thread);
    let parent = SpanContext::new(trace, root, TraceFlags::SAMPLED, true, TraceState::default());
    let cx = opentelemetry::Context::new().with_remote_span_context(parent);
    // An error: the span is not seen by an OpenTelemetry layer (another subscriber's); nothing
    // to adopt.
    let _ = span.set_parent(cx);
}
