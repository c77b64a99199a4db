//! Read-only queries (`WorkflowBuilder::query`, `Engine::query`): answered from a thread's
//! stored state while it waits for input, while a node runs, and once it ended, writing nothing;
//! unknown names and bad arguments are refused naming what is wrong.

use cairn::dsl::{Ctx, END, NodeOutput, Problem, START, Workflow};
use cairn::{StartOptions, ThreadStatus};
use serde_json::json;

use crate::common::{Tally, db};

fn workflow(gate: tokio::sync::watch::Receiver<bool>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("ledger", 1)
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!("how many?"))?;
            Ok(NodeOutput::update((n, "asked".to_owned())))
        })
        .node("hold", move |_s, _ctx: Ctx| {
            let mut gate = gate.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok(NodeOutput::update((100, "held".to_owned())))
            }
        })
        .edge(START, "ask")
        .edge("ask", "hold")
        .edge("hold", END)
        .query("total", |s: &Tally, (): ()| s.total)
        .query("total_plus", |s: &Tally, n: u64| s.total + n)
        .query("log_has", |s: &Tally, word: String| s.log.contains(&word))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_answer_from_the_stored_state_and_write_nothing() {
    let (_dir, path) = db();
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let wf = workflow(gate_rx);
    let engine = cairn::Engine::builder(&path).workflow(&wf).open().await.unwrap();
    let t = engine.start_json("ledger", Tally::default(), StartOptions::id("l1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let last = || engine.store().thread(t.id()).wait().unwrap().unwrap().last.unwrap().seq;
    let before = last();
    assert_eq!(engine.query("l1", "total", json!(null)).await.unwrap(), json!(0));
    assert_eq!(engine.query("l1", "total_plus", json!(5)).await.unwrap(), json!(5));
    assert_eq!(last(), before, "a query writes nothing");
    assert_eq!(
        engine.thread("l1").await.unwrap().status().await.unwrap(),
        ThreadStatus::WaitingInput
    );

    engine.send_input("l1", 7).await.unwrap();
    // `hold` runs (held at its gate): the answer is the durable state after `ask`.
    let started = std::time::Instant::now();
    while engine.query("l1", "log_has", json!("asked")).await.unwrap() != json!(true) {
        assert!(started.elapsed().as_secs() < 10, "ask's update becomes durable");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(engine.query("l1", "total", json!(null)).await.unwrap(), json!(7));
    assert_eq!(engine.thread("l1").await.unwrap().status().await.unwrap(), ThreadStatus::Running);
    gate.send_replace(true);
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(engine.query("l1", "total", json!(null)).await.unwrap(), json!(107));

    let unknown = engine.query("l1", "balance", json!(null)).await.unwrap_err().to_string();
    assert!(
        unknown.contains("no query \"balance\"") && unknown.contains("log_has, total, total_plus"),
        "{unknown}"
    );
    let bad = engine.query("l1", "total_plus", json!("five")).await.unwrap_err().to_string();
    assert!(bad.contains("query arguments"), "{bad}");
    assert!(engine.query("nobody", "total", json!(null)).await.is_err());
    engine.shutdown().await;
}

#[test]
fn a_query_name_declared_twice_is_a_build_error() {
    let err = Workflow::<Tally>::builder("twice", 1)
        .node("n", |_s, _ctx| async move { Ok(NodeOutput::update((1, "n".to_owned()))) })
        .edge(START, "n")
        .edge("n", END)
        .query("total", |s: &Tally, (): ()| s.total)
        .query("total", |s: &Tally, (): ()| s.total * 2)
        .build()
        .unwrap_err();
    assert!(err.problems.contains(&Problem::DuplicateQuery("total".into())), "{err}");
    // Queries change no run: a workflow gains or loses them without a new fingerprint.
    let (_gate, rx) = tokio::sync::watch::channel(false);
    let plain = Workflow::<Tally>::builder("ledger", 1)
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!("how many?"))?;
            Ok(NodeOutput::update((n, "asked".to_owned())))
        })
        .node(
            "hold",
            |_s, _ctx: Ctx| async move { Ok(NodeOutput::update((100, "held".to_owned()))) },
        )
        .edge(START, "ask")
        .edge("ask", "hold")
        .edge("hold", END)
        .build()
        .unwrap();
    assert_eq!(plain.fingerprint(), workflow(rx).fingerprint());
}
