//! `--otlp URL` and `OTEL_EXPORTER_OTLP_ENDPOINT` (feature `otel`): `cairn demo` exports its
//! spans and metrics to a real OTLP/HTTP receiver (the one `it::otel` uses), flushed at exit.

use std::process::{Command, Stdio};

use cairn::telemetry::otel::thread_trace;

use crate::harness::{bin, tempdir};
use crate::otlp_receiver::{attr, metric_labelled, receiver};

/// Runs `cairn demo --threads 2` on a fresh file with `args` and `env`, and checks it succeeded.
fn demo(args: &[&str], env: Option<&str>) {
    let dir = tempdir();
    let db = dir.path().join("otlp.db");
    let mut command = Command::new(bin());
    command
        .args(["demo", "--threads", "2", "--quiet", "--no-serve", "--db"])
        .arg(&db)
        .args(args)
        .env_remove("CAIRN_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null());
    if let Some(url) = env {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    }
    let out = command.output().expect("the cairn binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn demo_exports_its_threads_and_metrics_to_the_otlp_flag() {
    let (url, got) = receiver();
    demo(&["--otlp", &url], None);
    let spans = got.spans.lock().unwrap().clone();
    let thread = spans
        .iter()
        .find(|s| s.name == "thread" && attr(s, "thread").as_deref() == Some("demo-0"))
        .unwrap_or_else(|| panic!("demo-0's thread span among {} spans", spans.len()));
    assert_eq!(thread.trace_id, thread_trace("demo-0").0.to_bytes(), "its own trace");
    assert!(spans.iter().any(|s| s.name == "step" && s.trace_id == thread.trace_id));
    assert!(metric_labelled(&got, "cairn_steps_total", "workflow", "research-agent"));
}

#[test]
fn the_environment_names_the_collector_too() {
    let (url, got) = receiver();
    demo(&[], Some(&url));
    let spans = got.spans.lock().unwrap().clone();
    assert!(spans.iter().any(|s| s.name == "thread"), "{} spans", spans.len());
}
