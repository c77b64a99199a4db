//! OpenTelemetry (feature `otel`): the engine's tracing spans and its metrics exported over OTLP
//! HTTP/protobuf to a collector.
//!
//! * Spans: [`Exporter::layer`] is a `tracing-subscriber` layer (the `thread`, `step`,
//!   `node_attempt`, `tool_call` and `recovery` spans, and the store's `group_commit`). A thread's
//!   spans are one trace whose id is derived from the thread's id ([`thread_trace`]), so a thread
//!   resumed after a restart or on another worker continues its trace.
//! * Metrics: [`Exporter::recorder`] is a `metrics` recorder over an OTel meter; give it to the
//!   engine with [`crate::EngineBuilder::metrics_recorder`] (optionally beside the Prometheus one).
//!
//! Every export has a deadline ([`Otlp::timeout`], 5 s by default) and runs on the SDK's own
//! threads; spans wait in a bounded queue (2048) that drops when full, so a dead collector never
//! blocks the engine. Call [`Exporter::shutdown`] (blocking: from `spawn_blocking` or outside a
//! runtime) to flush at exit.
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use tracing_subscriber::layer::SubscriberExt as _;
//! use tracing_subscriber::util::SubscriberInitExt as _;
//!
//! # async fn run() -> Result<(), cairn::Error> {
//! let otel = cairn::telemetry::otel::Otlp::new("http://127.0.0.1:4318").build()?;
//! tracing_subscriber::registry().with(otel.layer()).init();
//! let engine = cairn::Engine::builder("cairn.db")
//!     .metrics_recorder(Arc::new(otel.recorder()))
//!     .open()
//!     .await?;
//! // ... run threads ...
//! engine.shutdown().await;
//! tokio::task::spawn_blocking(move || otel.shutdown()).await.ok();
//! # Ok(()) }
//! ```

mod http;
mod recorder;
mod trace_id;

use std::sync::atomic::Ordering;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::error::Error;

pub use recorder::OtelRecorder;
pub(crate) use trace_id::adopt;
pub use trace_id::thread_trace;

/// The environment variable of the collector's base URL (the OpenTelemetry convention).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The deadline of one export by default.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often metrics are exported by default.
pub const METRICS_INTERVAL: Duration = Duration::from_secs(15);

/// The configuration of an OTLP pipeline.
#[derive(Debug, Clone)]
pub struct Otlp {
    endpoint: String,
    timeout: Duration,
    interval: Duration,
    service: String,
}

impl Otlp {
    /// A pipeline to the collector at `endpoint`, its base URL (`http://host:4318`): spans go
    /// to `/v1/traces`, metrics to `/v1/metrics`.
    pub fn new(endpoint: impl Into<String>) -> Otlp {
        Otlp {
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            timeout: EXPORT_TIMEOUT,
            interval: METRICS_INTERVAL,
            service: "cairn".into(),
        }
    }

    /// The pipeline to `OTEL_EXPORTER_OTLP_ENDPOINT`, if it is set and not empty.
    pub fn from_env() -> Option<Otlp> {
        std::env::var(ENDPOINT_VAR).ok().filter(|v| !v.trim().is_empty()).map(Otlp::new)
    }

    /// The deadline of each export (connection, request and answer).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Otlp {
        self.timeout = timeout;
        self
    }

    /// How often metrics are exported.
    #[must_use]
    pub fn metrics_interval(mut self, interval: Duration) -> Otlp {
        self.interval = interval;
        self
    }

    /// The `service.name` resource attribute (`cairn` by default).
    #[must_use]
    pub fn service_name(mut self, name: impl Into<String>) -> Otlp {
        self.service = name.into();
        self
    }

    /// `builder` sending OTLP/HTTP (binary) to `<endpoint>/v1/<signal>` through the engine's
    /// HTTP client, each export bounded by the timeout.
    fn over_http<B: WithExportConfig + WithHttpConfig>(&self, builder: B, signal: &str) -> B {
        builder
            .with_http_client(http::Ureq::new(self.timeout))
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{}/v1/{signal}", self.endpoint))
            .with_timeout(self.timeout)
    }

    /// Builds the exporters (no connection yet: exports start with the first batch).
    ///
    /// # Errors
    /// [`Error::Invalid`] for an endpoint that is not a URL.
    pub fn build(self) -> Result<Exporter, Error> {
        let bad = |e: opentelemetry_otlp::ExporterBuildError| Error::Invalid(format!("otlp: {e}"));
        let resource = Resource::builder().with_service_name(self.service.clone()).build();
        let spans = opentelemetry_otlp::SpanExporter::builder().with_http();
        let spans = self.over_http(spans, "traces").build().map_err(bad)?;
        let metrics = opentelemetry_otlp::MetricExporter::builder().with_http();
        let metrics = self.over_http(metrics, "metrics").build().map_err(bad)?;
        let tracer_provider = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();
        let reader = PeriodicReader::builder(metrics).with_interval(self.interval).build();
        let meter_provider =
            SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
        trace_id::ACTIVE.store(true, Ordering::Relaxed);
        Ok(Exporter { tracer_provider, meter_provider })
    }
}

/// A built OTLP pipeline: its tracing layer and its metrics recorder.
#[derive(Debug, Clone)]
pub struct Exporter {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
}

impl Exporter {
    /// The `tracing-subscriber` layer exporting Cairn's spans (targets `cairn` at DEBUG and
    /// above: threads, steps, node attempts, tool calls, recoveries; `cairn_storage` at INFO:
    /// group commits). Other crates' spans are not exported by it.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.tracer_provider.tracer("cairn");
        let targets = Targets::new()
            .with_target("cairn", tracing::Level::DEBUG)
            .with_target("cairn_storage", tracing::Level::INFO);
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(targets)
    }

    /// A `metrics` recorder exporting to this pipeline's meter (give it to the engine with
    /// [`crate::EngineBuilder::metrics_recorder`]; [`OtelRecorder::beside`] adds another).
    pub fn recorder(&self) -> OtelRecorder {
        OtelRecorder::new(self.meter_provider.meter("cairn"))
    }

    /// Exports what is pending now (blocking, within the deadline of each export).
    ///
    /// # Errors
    /// [`Error::Invalid`] with the exporter's error (a collector that did not answer in time).
    pub fn flush(&self) -> Result<(), Error> {
        let spans = self.tracer_provider.force_flush();
        let metrics = self.meter_provider.force_flush();
        spans.map_err(|e| Error::Invalid(format!("otlp spans: {e}")))?;
        metrics.map_err(|e| Error::Invalid(format!("otlp metrics: {e}")))
    }

    /// Flushes and stops the exporters (blocking).
    pub fn shutdown(self) {
        let _ = self.tracer_provider.shutdown();
        let _ = self.meter_provider.shutdown();
    }
}
