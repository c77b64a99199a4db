//! Signals a workflow declares with their types (`WorkflowBuilder::signal`): a value that does
//! not decode as the declared type, or an undeclared name, is refused at send (Rust, HTTP)
//! and the thread is untouched; a workflow declaring none accepts any signal, and a value its
//! node cannot decode is set aside with a warning, the thread still waiting for a good one
//! (also once the workflow declares the signal, after a restart).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use cairn::dsl::{Ctx, NodeOutput, Replace, SignalError, Workflow, WorkflowBuilder};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

use crate::common::{db, open};

/// A parcel waits for where it was delivered, a `String`; `declare` adds the declarations.
fn parcel(
    declare: impl FnOnce(WorkflowBuilder<Replace<String>>) -> WorkflowBuilder<Replace<String>>,
) -> Workflow<Replace<String>> {
    let b = Workflow::<Replace<String>>::builder("parcel", 1)
        .node("wait", |_s: Arc<Replace<String>>, ctx: Ctx| async move {
            let place: String = ctx.recv("delivered").await?;
            Ok(NodeOutput::update(place))
        })
        .edge(START, "wait")
        .edge("wait", END);
    declare(b).build().unwrap()
}

fn declared() -> Workflow<Replace<String>> {
    parcel(|b| b.signal::<String>("delivered").signal::<u32>("delay_days"))
}

/// Starts thread `id` and waits until it parks in `recv`.
async fn parked(engine: &Engine, id: &str) -> cairn::ThreadHandle {
    let t = engine.start_json("parcel", String::new(), StartOptions::id(id)).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    t
}

/// The warnings logged on this thread (a current-thread runtime runs the nodes here), each as
/// its fields, `name=value ` after each other.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Line<'a>(&'a mut String);
        impl Visit for Line<'_> {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                let _ = write!(self.0, "{}={value:?} ", field.name());
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut line = String::new();
            event.record(&mut Line(&mut line));
            self.0.lock().unwrap().push(line);
        }
    }
}

fn inbox(engine: &Engine, id: &str) -> usize {
    let id = cairn::ThreadId::new(id).unwrap();
    engine.store().signals(&id, 0, 10).wait().unwrap().len()
}

#[tokio::test]
async fn a_signal_of_the_wrong_type_is_refused_and_the_waiting_thread_is_untouched() {
    let (_d, path) = db();
    let wf = declared();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = parked(&engine, "c").await;
    let err = engine.signal("c", "delivered", 12345u64).await.unwrap_err();
    let cairn::Error::SignalRefused { thread, source } = &err else { panic!("{err:?}") };
    assert_eq!(thread, "c");
    assert!(
        matches!(source, SignalError::Type { name, expected, .. }
            if name == "delivered" && expected == "String"),
        "{source:?}"
    );
    assert_eq!(
        err.to_string(),
        "signal refused for thread c: signal \"delivered\" takes a String, and the value does \
         not decode as one: invalid type: integer `12345`, expected a string"
    );
    // A name the workflow does not declare, with the declared ones listed.
    let err = engine.signal("c", "lost", "x").await.unwrap_err();
    assert!(
        matches!(&err, cairn::Error::SignalRefused { source: SignalError::Undeclared { .. }, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(r#"declares no signal "lost""#), "{err}");
    assert!(err.to_string().contains(r#""delay_days", "delivered""#), "{err}");
    // Nothing stored, the thread still waiting; a right value is then number 1 and completes it.
    assert_eq!(inbox(&engine, "c"), 0);
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput);
    assert_eq!(engine.signal("c", "delivered", "at the door").await.unwrap(), 1);
    assert_eq!(t.output::<Replace<String>>().await.unwrap().0, "at the door");
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

/// One test, not two: the set-aside warning's callsite must not be first hit by another test
/// on another thread while this one installs its subscriber (tracing could cache that no one
/// listens), and this is the only test that sets a signal aside.
#[tokio::test]
async fn no_declarations_accept_any_signal_and_a_value_the_node_cannot_read_is_set_aside() {
    let warnings = Warnings::default();
    // `tracing::subscriber::set_default`, not `SubscriberInitExt::set_default`: that one also
    // installs the process's `log` logger, and `spans::recorder`'s global subscriber (in this
    // same test binary) then fails to install.
    let logs = tracing_subscriber::registry().with(warnings.clone());
    let _logs = tracing::subscriber::set_default(logs);
    let (_d, path) = db();
    let engine = open(&path, &[&parcel(|b| b)], |b| b).await;
    let t = parked(&engine, "c").await;
    // Accepted (nothing declared); the node cannot read it as a String: set aside, and the
    // thread waits for the next one instead of failing.
    assert_eq!(engine.signal("c", "delivered", 12345u64).await.unwrap(), 1);
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    assert_eq!(engine.signal("c", "anything", serde_json::json!({"a": 1})).await.unwrap(), 2);
    engine.shutdown().await;
    drop((t, engine));
    // Declared now (same fingerprint): the thread still waits, a wrong value is refused, and a
    // right one completes it.
    let engine = open(&path, &[&declared()], |b| b).await;
    let t = engine.thread("c").await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput);
    assert!(engine.signal("c", "delivered", 7u64).await.is_err());
    assert_eq!(engine.signal("c", "delivered", "porch").await.unwrap(), 3);
    assert_eq!(t.output::<Replace<String>>().await.unwrap().0, "porch");
    // Not silently: one warning naming the thread, node, signal, its number and why; the run
    // after the right value reads the receipt again without a second warning.
    let set_aside: Vec<String> = warnings.0.lock().unwrap().clone();
    let set_aside: Vec<&String> = set_aside.iter().filter(|w| w.contains("set aside")).collect();
    assert_eq!(set_aside.len(), 1, "{set_aside:?}");
    for part in ["thread=c ", "node=wait ", "signal=\"delivered\" ", "n=1 ", "not a String"] {
        assert!(set_aside[0].contains(part), "{part} in {}", set_aside[0]);
    }
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
}

/// `POST /api/threads/{id}/signal` answers 400 naming the field and saying why, and stores
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_refuses_a_signal_of_the_wrong_type_with_400() {
    use crate::common::{call, serving};
    let (_d, path) = db();
    let (engine, server) = serving(&path, &declared()).await;
    let t = parked(&engine, "c").await;
    let url = format!("http://{}/api/threads/c/signal", server.addr());
    let token = Some(server.token().to_owned());
    let post = |body: &str| call("POST", url.clone(), token.clone(), body.to_owned());
    let (status, err) = post(r#"{"name": "delivered", "value": 12345}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("value")), "{err}");
    let message = err["error"].as_str().unwrap_or_default();
    assert!(message.contains(r#"signal "delivered" takes a String"#), "{err}");
    assert!(message.contains("invalid type: integer `12345`"), "{err}");
    let (status, err) = post(r#"{"name": "lost", "value": "x"}"#).await;
    assert_eq!((status, err["field"].as_str()), (400, Some("name")), "{err}");
    assert!(err["error"].as_str().unwrap_or_default().contains("delivered"), "{err}");
    assert_eq!(inbox(&engine, "c"), 0);
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput);
    let (status, sent) = post(r#"{"name": "delivered", "value": "at the door"}"#).await;
    assert_eq!((status, sent["signal"].as_u64()), (200, Some(1)), "{sent}");
    assert_eq!(t.output::<Replace<String>>().await.unwrap().0, "at the door");
    server.shutdown().await;
    engine.shutdown().await;
}
