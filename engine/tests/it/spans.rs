//! The tracing spans a subscriber sees: their names, fields and nesting, for a workflow with a
//! tool call, a retry and a sub-workflow child thread (the names are documented in
//! ARCHITECTURE.md and are a stable interface).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cairn::dsl::{NodePolicy, RetryPolicy};
use cairn::{Ctx, END, Engine, NodeError, NodeOutput, START, StartOptions, ToolError, Workflow};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

use crate::common::{Tally, db};

/// The span names Cairn promises.
const NAMES: [&str; 6] =
    ["thread", "step", "node_attempt", "tool_call", "group_commit", "recovery"];
/// Threads whose span trees this test records (other tests share the process).
const PREFIX: &str = "spans-";

/// One recorded span.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    pub name: &'static str,
    pub fields: BTreeMap<String, String>,
    pub parent: Option<usize>,
}

/// Records the spans of this test's threads (and a few group commits and recoveries).
#[derive(Default)]
pub(crate) struct Recorder {
    pub seen: Mutex<Vec<Seen>>,
}

struct Index(usize);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}").trim_matches('"').to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if metadata.is_span() && NAMES.contains(&metadata.name()) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name();
        let mut seen = self.seen.lock().unwrap();
        // Group commits: the first few of each backend (other tests' commits are alike).
        let kind = |s: &BTreeMap<String, String>| s.get("backend").cloned();
        let ours = parent.is_some()
            || fields.get("thread").is_some_and(|t| t.starts_with(PREFIX))
            || (matches!(name, "group_commit" | "recovery")
                && seen
                    .iter()
                    .filter(|s| s.name == name && kind(&s.fields) == kind(&fields))
                    .count()
                    < 64);
        if ours {
            seen.push(Seen { name, fields, parent });
            span.extensions_mut().insert(Index(seen.len() - 1));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(index) = span.extensions().get::<Index>().map(|i| i.0) else { return };
        let mut seen = self.seen.lock().unwrap();
        values.record(&mut Fields(&mut seen[index].fields));
    }
}

/// The process's span recorder (installed as the global subscriber by the first call).
pub(crate) fn recorder() -> &'static Arc<Recorder> {
    static RECORDER: OnceLock<Arc<Recorder>> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = Arc::new(Recorder::default());
        let layer = ArcLayer(recorder.clone());
        // Global: the engine's tasks run on runtime threads and the writer on its own thread.
        tracing_subscriber::registry().with(layer).try_init().expect("the only global subscriber");
        recorder
    })
}

/// A layer shared with the test that reads what it recorded.
struct ArcLayer(Arc<Recorder>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for ArcLayer {
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        Layer::<S>::register_callsite(self.0.as_ref(), metadata)
    }
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.0.on_new_span(attrs, id, ctx);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.0.on_record(id, values, ctx);
    }
}

/// A workflow with a tool call, a node that fails once and is retried, and a sub-workflow child.
pub(crate) fn traced() -> Workflow<Tally> {
    let child = Workflow::<Tally>::builder("traced-child", 1)
        .node("inner", |_s, _ctx| async move { Ok(NodeOutput::update((10, "inner".into()))) })
        .edge(START, "inner")
        .edge("inner", END)
        .build()
        .unwrap();
    let failures = Arc::new(AtomicU32::new(0));
    Workflow::<Tally>::builder("traced", 1)
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
        .subgraph("sub", child, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".into()))
        .edge(START, "call")
        .edge("call", "flaky")
        .edge("flaky", "sub")
        .edge("sub", END)
        .build()
        .unwrap()
}

fn children_of(seen: &[Seen], parent: usize) -> Vec<(usize, &Seen)> {
    seen.iter().enumerate().filter(|(_, s)| s.parent == Some(parent)).collect()
}

#[tokio::test]
async fn a_subscriber_sees_the_span_tree_of_a_run() {
    let recorder = recorder();
    let (_d, path) = db();
    let wf = traced();
    let engine = Engine::builder(&path).workflow(&wf).open().await.unwrap();
    let out: Tally = engine
        .start_json("traced", Tally::default(), StartOptions::id("spans-p"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    assert_eq!(out.total, 4 + 1 + 4 + 1 + 10, "call, flaky, and the child's state and inner");
    engine.shutdown().await;
    let seen = recorder.seen.lock().unwrap().clone();

    let (thread, root) = seen
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == "thread" && s.fields["thread"] == "spans-p")
        .expect("a thread span");
    assert_eq!(root.fields["workflow"], "traced", "{root:?}");
    assert_eq!(root.fields["version"], "1", "{root:?}");
    let steps = children_of(&seen, thread);
    assert!(steps.len() >= 3 && steps.iter().all(|(_, s)| s.name == "step"), "{steps:?}");
    let numbers: Vec<&str> = steps.iter().map(|(_, s)| s.fields["step"].as_str()).collect();
    assert_eq!(numbers[..3], ["1", "2", "3"], "steps numbered from 1 in order");
    let attempts: Vec<(usize, &Seen)> =
        steps.iter().flat_map(|(i, _)| children_of(&seen, *i)).collect();
    let attempt = |node: &str, n: &str| {
        attempts
            .iter()
            .find(|(_, s)| {
                s.name == "node_attempt" && s.fields["node"] == node && s.fields["attempt"] == n
            })
            .unwrap_or_else(|| panic!("no attempt {n} of {node}: {attempts:?}"))
            .0
    };
    let call = attempt("call", "1");
    assert_eq!(seen[call].fields["task"], "call", "a task without a map item is its node");
    assert_eq!(seen[call].fields["outcome"], "done");
    let tools = children_of(&seen, call);
    assert_eq!(tools.len(), 1, "{tools:?}");
    let tool = tools[0].1;
    assert_eq!((tool.name, tool.fields["tool"].as_str()), ("tool_call", "fetch"));
    assert_eq!((tool.fields["call"].as_str(), tool.fields["memo"].as_str()), ("0", "false"));
    assert_eq!(seen[attempt("flaky", "1")].fields["outcome"], "failed");
    assert_eq!(seen[attempt("flaky", "2")].fields["outcome"], "done");
    // The child thread is driven inside the parent's node attempt.
    let sub = attempt("sub", "1");
    let child = children_of(&seen, sub);
    let (_, child) = child.iter().find(|(_, s)| s.name == "thread").expect("the child's thread");
    assert!(child.fields["thread"].starts_with("spans-p/sub@"), "{child:?}");
    assert_eq!(child.fields["workflow"], "traced-child");
    assert_eq!((root.fields["depth"].as_str(), child.fields["depth"].as_str()), ("0", "1"));

    let commit = seen
        .iter()
        // The subscriber is global: tests running beside this one on PostgreSQL commit too.
        .find(|s| {
            s.name == "group_commit"
                && s.fields.contains_key("commit_us")
                && s.fields.get("backend").is_some_and(|b| b == "redb")
        })
        .expect("a group commit span of this test's file, with its figures");
    for field in ["durable", "writes", "callers", "events", "bytes", "commit_us", "fsync_us"] {
        assert!(commit.fields.contains_key(field), "{field}: {commit:?}");
    }
    let recovery = seen.iter().find(|s| s.name == "recovery").expect("a recovery span");
    for field in ["resumed", "parked", "timers", "children", "blocked"] {
        assert!(recovery.fields.contains_key(field), "{field}: {recovery:?}");
    }
}
