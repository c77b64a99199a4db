//! The Prometheus exporter (feature `prometheus`): a recorder that renders the engine's and the
//! store's metrics in Prometheus' text format, with histogram buckets fitted to each.
//!
//! # Examples
//!
//! ```no_run
//! # async fn run() -> Result<(), cairn::Error> {
//! // Install before opening the engine: its handles are registered at open.
//! let metrics = cairn_tools::prometheus::install()?;
//! let engine = cairn::Engine::builder("cairn.db").open().await?;
//! let text: String = metrics.render(); // serve it at /metrics
//! # Ok(()) }
//! ```

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use cairn::error::Error;

pub use metrics_exporter_prometheus::PrometheusHandle as Handle;

/// Bucket bounds of the latency histograms, seconds: from a fast fsync (100 µs) to a minute.
const SECONDS_BUCKETS: [f64; 12] =
    [0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0];

/// Bucket bounds of the group size, writes: powers of two up to the default group maximum (256).
const GROUP_BUCKETS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// A Prometheus recorder that is not installed: for an engine given it with
/// [`cairn::EngineBuilder::metrics_recorder`], and a handle that renders what it records.
///
/// # Errors
/// [`Error::Invalid`] if the exporter refuses the bucket bounds (a bug).
pub fn recorder()
-> Result<(metrics_exporter_prometheus::PrometheusRecorder, PrometheusHandle), Error> {
    let bad = |e: metrics_exporter_prometheus::BuildError| Error::Invalid(e.to_string());
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .map_err(bad)?
        .set_buckets_for_metric(
            Matcher::Full(cairn_storage::telemetry::GROUP_WRITES.into()),
            &GROUP_BUCKETS,
        )
        .map_err(bad)?;
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    Ok((recorder, handle))
}

/// Installs a Prometheus recorder as the process's global one and returns the handle that
/// renders it. Call it before opening engines.
///
/// # Errors
/// [`Error::Invalid`] if a global recorder is installed already.
pub fn install() -> Result<PrometheusHandle, Error> {
    let (recorder, handle) = recorder()?;
    metrics::set_global_recorder(recorder).map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(handle)
}
