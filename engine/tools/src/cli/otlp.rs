//! `--otlp URL` of `cairn serve`, `worker` and `demo` (feature `otel`): the process's spans and
//! metrics exported over OTLP/HTTP to a collector (default: `$OTEL_EXPORTER_OTLP_ENDPOINT`).
//! The metrics recorder is the OTLP one beside the Prometheus one, so `/metrics` still answers.

use std::sync::Arc;

use super::Command;
use cairn::telemetry::otel::{ENDPOINT_VAR, Exporter, Otlp};

/// The `--otlp` flag.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OtlpFlag {
    /// Export spans and metrics over OTLP/HTTP to this collector's base URL
    /// (`http://127.0.0.1:4318`; default: $OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
}

/// The collector `command` exports to, if it is one that runs threads and one is named.
pub(super) fn endpoint(command: &Command) -> Option<String> {
    let flag = match command {
        Command::Demo(a) => &a.otlp,
        Command::Worker(a) => &a.otlp,
        Command::Serve(a) => &a.otlp,
        _ => return None,
    };
    let from_env = || std::env::var(ENDPOINT_VAR).ok().filter(|v| !v.trim().is_empty());
    flag.otlp.clone().or_else(from_env)
}

/// Builds the pipeline to `endpoint` and installs the process's metrics recorder (OTLP beside
/// Prometheus, whose handle `/metrics` renders). `None` (with a warning) if it cannot.
pub(super) fn start(endpoint: &str) -> Option<Exporter> {
    let exporter = match Otlp::new(endpoint).build() {
        Ok(exporter) => exporter,
        Err(e) => {
            tracing::warn!(error = %e, endpoint, "no OTLP export");
            return None;
        }
    };
    match crate::prometheus::recorder() {
        Ok((prometheus, handle)) => {
            let recorder = exporter.recorder().beside(Arc::new(prometheus));
            if metrics::set_global_recorder(recorder).is_ok() {
                let _ = super::serve::PROMETHEUS.set(Some(handle));
            }
        }
        Err(e) => tracing::warn!(error = %e, "no OTLP metrics"),
    }
    Some(exporter)
}
