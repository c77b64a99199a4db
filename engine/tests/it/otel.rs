//! OpenTelemetry export (feature `otel`) to a real OTLP/HTTP receiver: an in-process server
//! decoding the exporter's protobuf requests with `opentelemetry-proto`. A thread with a tool
//! call, a retry and a crash in between (the engine stopped mid-thread and reopened on the same
//! file) is one trace across both engine runs, with steps, node attempts and tool calls parented
//! as they ran; its metrics arrive with the `workflow` label.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use cairn::dsl::{NodePolicy, RetryPolicy};
use cairn::telemetry::otel::{Otlp, thread_trace};
use cairn::{Ctx, END, Engine, NodeError, NodeOutput, START, StartOptions, ToolError, Workflow};
use opentelemetry_proto::tonic::trace::v1::Span;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::common::{Tally, db};
use crate::otlp_receiver::{attr, metric_labelled, receiver};

/// The workflow: a tool call, a node that fails once and is retried, and a node that hangs
/// under the first engine (which then crashes) and finishes under the second.
fn workflow(hung: Arc<tokio::sync::Notify>, crashed: Arc<AtomicBool>) -> Workflow<Tally> {
    let failures = Arc::new(AtomicU32::new(0));
    Workflow::<Tally>::builder("otel-wf", 1)
        .node("call", |_s, ctx: Ctx| async move {
            let v: u64 = ctx
                .tool("fetch", 2_u64, |x: u64, _| async move { Ok::<_, ToolError>(x * 2) })
                .await?;
            Ok(NodeOutput::update((v, "call".into())))
        })
        .node_with(
            "flaky",
            move |_s, _ctx| {
                let first = failures.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        return Err(NodeError::retryable("not yet"));
                    }
                    Ok(NodeOutput::update((1, "flaky".into())))
                }
            },
            NodePolicy::default().retry(RetryPolicy::exponential(2, 1, 1)),
        )
        .node("hang", move |_s, _ctx| {
            let (hung, crashed) = (hung.clone(), crashed.clone());
            async move {
                if !crashed.load(Ordering::SeqCst) {
                    hung.notify_one();
                    std::future::pending::<()>().await;
                }
                Ok(NodeOutput::update((1, "hang".into())))
            }
        })
        .edge(START, "call")
        .edge("call", "flaky")
        .edge("flaky", "hang")
        .edge("hang", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_thread_is_one_trace_across_a_crash_and_its_metrics_carry_the_workflow() {
    let (url, got) = receiver();
    let otel = Otlp::new(&url).timeout(Duration::from_secs(5)).build().unwrap();
    // This test's thread only (the runtime is current-thread: the engine's tasks run here).
    let subscriber = tracing_subscriber::registry().with(otel.layer());
    let _guard = tracing::subscriber::set_default(subscriber);
    let (hung, crashed) = (Arc::new(tokio::sync::Notify::new()), Arc::new(AtomicBool::new(false)));
    let wf = workflow(hung.clone(), crashed.clone());
    let (_d, path) = db();
    let open =
        || Engine::builder(&path).workflow(&wf).metrics_recorder(Arc::new(otel.recorder())).open();

    let engine = open().await.unwrap();
    engine.start_json("otel-wf", Tally::default(), StartOptions::id("otel-t1")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), hung.notified()).await.expect("hang ran");
    engine.crash().await;
    drop(engine);
    crashed.store(true, Ordering::SeqCst);

    let engine = open().await.unwrap();
    let thread = engine.thread("otel-t1").await.unwrap();
    let out: Tally =
        tokio::time::timeout(Duration::from_secs(30), thread.output()).await.unwrap().unwrap();
    assert_eq!(out.total, 4 + 1 + 1);
    engine.shutdown().await;
    drop(engine);
    let flushed = otel.clone();
    tokio::task::spawn_blocking(move || flushed.flush()).await.unwrap().unwrap();

    let spans = got.spans.lock().unwrap().clone();
    let (trace, root) = thread_trace("otel-t1");
    let threads: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "thread" && attr(s, "thread").as_deref() == Some("otel-t1"))
        .collect();
    assert!(threads.len() >= 2, "a thread span per engine run: {threads:#?}");
    for t in &threads {
        assert_eq!(t.trace_id, trace.to_bytes(), "the thread's trace in both runs");
        assert_eq!(t.parent_span_id, root.to_bytes(), "under the thread's root");
        assert_eq!(attr(t, "workflow").as_deref(), Some("otel-wf"));
    }
    let in_trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace.to_bytes()).collect();
    let parent = |s: &Span| in_trace.iter().find(|p| p.span_id == s.parent_span_id).copied();
    let attempts: Vec<&Span> =
        in_trace.iter().filter(|s| s.name == "node_attempt").copied().collect();
    for a in &attempts {
        let step = parent(a).unwrap_or_else(|| panic!("an attempt without its step: {a:?}"));
        assert_eq!(step.name, "step");
        assert_eq!(parent(step).map(|t| t.name.as_str()), Some("thread"), "{step:?}");
    }
    let attempt = |node: &str, n: &str| {
        attempts
            .iter()
            .find(|a| {
                attr(a, "node").as_deref() == Some(node) && attr(a, "attempt").as_deref() == Some(n)
            })
            .unwrap_or_else(|| panic!("no attempt {n} of {node}: {attempts:#?}"))
    };
    let call = attempt("call", "1");
    let tool = in_trace.iter().find(|s| s.name == "tool_call").expect("the tool call's span");
    assert_eq!(tool.parent_span_id, call.span_id, "the tool call inside its node attempt");
    assert_eq!(attr(tool, "tool").as_deref(), Some("fetch"));
    // The retry: a failed first attempt of `flaky`, then a done second one.
    assert_eq!(attr(attempt("flaky", "1"), "outcome").as_deref(), Some("failed"));
    assert_eq!(attr(attempt("flaky", "2"), "outcome").as_deref(), Some("done"));
    // `hang` ran under both engines: the crashed run's attempt and the resumed one that ended.
    let hangs: Vec<_> =
        attempts.iter().filter(|a| attr(a, "node").as_deref() == Some("hang")).collect();
    assert!(hangs.len() >= 2, "{hangs:#?}");
    assert!(hangs.iter().any(|a| attr(a, "outcome").as_deref() == Some("done")));
    let thread_ids: std::collections::BTreeSet<_> = threads.iter().map(|t| &t.span_id).collect();
    let hang_threads: std::collections::BTreeSet<_> =
        hangs.iter().filter_map(|a| parent(a).and_then(parent)).map(|t| &t.span_id).collect();
    assert_eq!(hang_threads.len(), 2, "hang under each run's thread span");
    assert!(hang_threads.is_subset(&thread_ids));

    // Metrics: the steps of this workflow, labelled with it.
    for name in ["cairn_steps_total", "cairn_step_duration_seconds", "cairn_retries_total"] {
        assert!(metric_labelled(&got, name, "workflow", "otel-wf"), "{name} with workflow=otel-wf");
    }
    assert!(metric_labelled(&got, "cairn_retries_total", "node", "flaky"), "the retried node");
    tokio::task::spawn_blocking(move || otel.shutdown()).await.unwrap();
}

/// A collector that accepts connections and never answers: the engine runs its thread as if
/// nothing were exported, and a flush gives up after the export deadline with an error.
#[tokio::test]
async fn a_collector_that_never_answers_blocks_nothing() {
    // Bound and listening, never accepting: connections succeed (the backlog), answers never come.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let deadline = Duration::from_millis(300);
    let otel = Otlp::new(&url).timeout(deadline).build().unwrap();
    let subscriber = tracing_subscriber::registry().with(otel.layer());
    let _guard = tracing::subscriber::set_default(subscriber);
    let wf = crate::spans::traced();
    let (_d, path) = db();
    let engine =
        Engine::builder(&path).workflow(&wf).metrics_recorder(Arc::new(otel.recorder())).open();
    let engine = engine.await.unwrap();
    let began = std::time::Instant::now();
    let run = engine.start_json("traced", Tally::default(), StartOptions::id("otel-silent"));
    let out: Tally = tokio::time::timeout(Duration::from_secs(30), run.await.unwrap().output())
        .await
        .expect("the thread ends while the collector is silent")
        .unwrap();
    assert_eq!(out.total, 20);
    engine.shutdown().await;
    let ran = began.elapsed();
    let began = std::time::Instant::now();
    let flushed = tokio::task::spawn_blocking(move || otel.flush()).await.unwrap();
    assert!(flushed.is_err(), "nothing could be exported");
    // Spans and metrics, each one export given up at the deadline (with a margin for the CI).
    let flush = began.elapsed();
    assert!(flush < Duration::from_secs(10), "flush took {flush:?}");
    crate::common::report(&format!(
        "OTEL silent collector: thread ran in {ran:?}, flush {flush:?}"
    ));
    drop(silent);
}
