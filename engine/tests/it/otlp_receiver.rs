//! An OTLP/HTTP receiver for tests: an in-process server (axum, on its own thread and runtime)
//! decoding the exporter's protobuf requests with `opentelemetry-proto`, never a mock exporter.
//! Shared by `it::otel` and the CLI's tests (`tests/cli/otlp.rs`, through `#[path]`).

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// What the receiver was sent.
#[derive(Default)]
pub struct Received {
    pub spans: Mutex<Vec<Span>>,
    pub metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
}

/// An OTLP/HTTP receiver on its own thread and runtime (the exporter's flush blocks the test's).
pub fn receiver() -> (String, Arc<Received>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got = Arc::new(Received::default());
    let (traces, metrics) = (got.clone(), got.clone());
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            post(move |body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).expect("a trace export");
                let spans = request.resource_spans.into_iter().flat_map(|r| r.scope_spans);
                traces.spans.lock().unwrap().extend(spans.flat_map(|s| s.spans));
                ""
            }),
        )
        .route(
            "/v1/metrics",
            post(move |body: Bytes| async move {
                let request = ExportMetricsServiceRequest::decode(body).expect("a metrics export");
                metrics.metrics.lock().unwrap().push(request);
                ""
            }),
        );
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (url, got)
}

/// A span's attribute, as text.
pub fn attr(span: &Span, key: &str) -> Option<String> {
    let kv = span.attributes.iter().find(|kv| kv.key == key)?;
    Some(match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

/// Whether metric `name` arrived with a data point labelled `key=value`.
pub fn metric_labelled(got: &Received, name: &str, key: &str, value: &str) -> bool {
    let requests = got.metrics.lock().unwrap().clone();
    let metrics = requests
        .into_iter()
        .flat_map(|r| r.resource_metrics)
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics)
        .filter(|m| m.name == name);
    let points: Vec<_> = metrics
        .flat_map(|m| match m.data {
            Some(Data::Sum(s)) => s.data_points.into_iter().map(|p| p.attributes).collect(),
            Some(Data::Histogram(h)) => h.data_points.into_iter().map(|p| p.attributes).collect(),
            Some(Data::Gauge(g)) => g.data_points.into_iter().map(|p| p.attributes).collect(),
            _ => Vec::new(),
        })
        .collect();
    points.iter().any(|attributes| {
        attributes.iter().any(|kv| {
            kv.key == key
                && matches!(kv.value.as_ref().and_then(|v| v.value.as_ref()),
                    Some(Value::StringValue(v)) if v == value)
        })
    })
}
