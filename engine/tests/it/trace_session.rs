//! Seed 004's session reads over the endpoint: `GET /api/threads/{id}/state?at_time=MS&session=1`
//! (a session as it stood at a time) and `GET /api/trace?chain=ID&states=1` (a chain stepped
//! through with the state after each message) answer what `cairn state --at-time --session
//! --json` and `cairn trace --chain --states --json` print (both print the
//! `cairn_tools::Operator` reads these compare with); a bad parameter is refused naming it, and
//! a step-through past `CHAIN_STATES_MAX` messages too.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::{StartOptions, ThreadStatus};
use cairn_tools::debug::{TraceQuery, TraceScope};
use cairn_tools::serve::Serve as _;
use serde_json::{Value, json};

use crate::common::{Tally, call, db};
use crate::trace::session_with;

/// When the engine's clock starts, and how far the root's first node moves it before the
/// child thread starts.
const T0: u64 = 1_800_000_000_000;
const GAP_MS: u64 = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_answers_a_session_at_a_time_and_a_chain_step_through_as_the_cli() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let ticks = clock.clone();
    let wf = session_with(Arc::new(move || ticks.advance_ms(GAP_MS)));
    let (engine, server) = cairn::Engine::builder(&path)
        .workflow(&wf)
        .seed(11)
        .clock(Arc::new(clock))
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let t = engine.start_json("session", Tally::default(), StartOptions::id("s1")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let op = cairn_tools::Operator::new(&engine);
    let base = format!("http://{}", server.addr());
    let get = async |q: &str| call("GET", format!("{base}{q}"), None, String::new()).await;

    // The session at its end: the root and its child, as the CLI prints them.
    let end = T0 + GAP_MS;
    let (status, body) = get(&format!("/api/threads/s1/state?at_time={end}&session=1")).await;
    assert_eq!(status, 200, "{body}");
    let cli = serde_json::to_value(op.session_state_at_time("s1", end).await.unwrap()).unwrap();
    assert_eq!(body["threads"], cli);
    assert_eq!((&body["thread"], &body["at_time"]), (&json!("s1"), &json!(end)));
    let threads = body["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{body}");
    assert_eq!(threads[1]["parent"], "s1");
    assert!(threads[1]["thread"].as_str().unwrap().starts_with("s1/plan@"), "{body}");
    assert_eq!(threads[0]["state"]["state"]["total"], 2, "ask and code");

    // Control: before the child started, the session is the root alone, as it stood then.
    let (status, body) = get(&format!("/api/threads/s1/state?at_time={}&session=1", end - 1)).await;
    assert_eq!(status, 200, "{body}");
    let cli = op.session_state_at_time("s1", end - 1).await.unwrap();
    assert_eq!(body["threads"], serde_json::to_value(&cli).unwrap());
    let threads = body["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "the child is left out: {body}");
    assert_eq!(
        (&threads[0]["thread"], &threads[0]["state"]["state"]["total"]),
        (&json!("s1"), &json!(0))
    );

    // The chain m1 -> m2 -> m3 stepped through, as the CLI prints it.
    let (status, body) = get("/api/trace?thread=s1&chain=m3&states=1").await;
    assert_eq!(status, 200, "{body}");
    let query = TraceQuery {
        chain_to: Some("m3".into()),
        ..TraceQuery::new(TraceScope::Threads(vec!["s1".into()]))
    };
    let cli = serde_json::to_value(op.replay_chain(&query).await.unwrap()).unwrap();
    assert_eq!(body["steps"], cli);
    assert_eq!(body["chain"], "m3");
    let seen: Vec<(&str, u64)> = steps(&body)
        .map(|s| {
            let id = s["message"]["message"]["id"].as_str().unwrap();
            (id, s["state"]["state"]["total"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(seen, [("m1", 0), ("m2", 1), ("m3", 1)]);
    assert!(steps(&body).all(|s| s["state"]["seq"] == s["message"]["seq"]), "{body}");
    // Control: without states, the same chain is its messages only.
    let (_, plain) = get("/api/trace?thread=s1&chain=m3").await;
    assert_eq!(plain["messages"].as_array().map(Vec::len), Some(3), "{plain}");
    assert!(plain.get("steps").is_none());

    // Bad parameters are refused naming them; an unknown thread is a 404.
    for (q, field) in [
        ("/api/trace?thread=s1&states=1", "states"),
        ("/api/trace?chain=m3&states=maybe", "states"),
        ("/api/threads/s1/state?session=1", "session"),
        ("/api/threads/s1/state?at=3&session=1", "session"),
        ("/api/threads/s1/state?at_time=soon&session=1", "at_time"),
    ] {
        let (status, body) = get(q).await;
        assert_eq!((status, body["field"].as_str()), (400, Some(field)), "{q}: {body}");
    }
    let (status, body) = get(&format!("/api/threads/nobody/state?at_time={end}&session=1")).await;
    assert_eq!(status, 404, "{body}");
    drop(server);
    engine.shutdown().await;
}

/// The steps of a step-through answer.
fn steps(body: &Value) -> impl Iterator<Item = &Value> {
    body["steps"].as_array().expect("steps").iter()
}

/// One node writing a chain of `n` messages, `m0` first, each the parent of the next.
fn chatty(n: usize) -> cairn::dsl::Workflow<Tally> {
    use cairn::dsl::{Ctx, Message, NodeOutput, Workflow};
    Workflow::<Tally>::builder("chatty", 1)
        .node("talk", move |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in 0..n {
                let mut m = Message::new("bot", format!("line {i}")).id(format!("m{i}"));
                if i > 0 {
                    m = m.parent(format!("m{}", i - 1));
                }
                ctx.message(m);
            }
            Ok(NodeOutput::update((1, "talked".to_owned())))
        })
        .edge(cairn::START, "talk")
        .edge("talk", cairn::END)
        .build()
        .unwrap()
}

/// A step-through of a chain longer than `CHAIN_STATES_MAX` is refused naming `chain` (each
/// step would hold a whole state); control: the same chain without the states is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_through_longer_than_its_limit_is_refused_naming_the_chain() {
    use cairn_tools::limits::CHAIN_STATES_MAX;
    let (_d, path) = db();
    let wf = chatty(CHAIN_STATES_MAX + 1);
    let (engine, server) = cairn::Engine::builder(&path)
        .workflow(&wf)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let t = engine.start_json("chatty", Tally::default(), StartOptions::id("c")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let base = format!("http://{}", server.addr());
    let last = format!("m{CHAIN_STATES_MAX}");
    let url = |states: &str| format!("{base}/api/trace?thread=c&chain={last}{states}");
    let (status, body) = call("GET", url("&states=1"), None, String::new()).await;
    assert_eq!((status, body["field"].as_str()), (400, Some("chain")), "{body}");
    assert!(body["error"].as_str().unwrap().contains("messages of a chain"), "{body}");
    let (status, body) = call("GET", url(""), None, String::new()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(CHAIN_STATES_MAX + 1));
    drop(server);
    engine.shutdown().await;
}
