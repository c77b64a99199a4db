//! Every run of every node (`Engine::node_runs`), and what the snapshot's execution history
//! and errors hold, for retries, loops, a branch not taken, a wait, a cancel and a fork that
//! has not started.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn::dsl::{Ctx, NodeError, NodeOutput, NodePolicy, RetryPolicy, Workflow};
use cairn::{END, START, StartOptions, ThreadStatus};
use cairn_core::node_runs::{NodeType, RunStatus};
use cairn_tools::debug::{ForkFrom, ForkOptions};
use serde_json::json;

use crate::common::{Tally, db, engine_on};

fn looping(calls: Arc<AtomicU32>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("looping", 1)
        .node_with(
            "flaky",
            move |_s, _ctx: Ctx| {
                let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        return Err(NodeError::retryable("boom"));
                    }
                    Ok(NodeOutput::update((1, "flaky".to_owned())))
                }
            },
            NodePolicy::default().retry(RetryPolicy::fixed(2, 1)),
        )
        .node("again", |_s, _ctx| async move { Ok(NodeOutput::update((1, "again".to_owned()))) })
        .node("done", |_s, _ctx| async move { Ok(NodeOutput::update((0, "done".to_owned()))) })
        .node("never", |_s, _ctx| async move { Ok(NodeOutput::update((0, "never".to_owned()))) })
        .edge(START, "flaky")
        .edge("flaky", "again")
        .route(
            "again",
            |s: &Tally| {
                if s.log.iter().filter(|l| *l == "again").count() < 2 { "again" } else { "done" }
            },
            ["again", "done", "never"],
        )
        .loop_bound("again", 3)
        .edge("done", END)
        .edge("never", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_run_of_every_node_with_its_step_status_data_and_error() {
    let (_d, path) = db();
    let wf = looping(Arc::new(AtomicU32::new(0)));
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("looping", Tally::default(), StartOptions::id("l")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);

    let runs = cairn_tools::Operator::new(&engine).node_runs("l").await.unwrap();
    let summary: Vec<_> =
        runs.iter().map(|r| (&*r.task.node, r.step, r.attempt, r.status, r.node_type)).collect();
    use RunStatus::{Completed, Failed, Skipped};
    let task = NodeType::Task;
    assert_eq!(
        summary,
        [
            ("flaky", 1, 1, Failed, task),
            ("flaky", 1, 2, Completed, task),
            ("again", 2, 1, Completed, task),
            ("again", 3, 1, Completed, task),
            ("done", 4, 1, Completed, task),
            ("never", 0, 0, Skipped, task),
        ]
    );
    assert_eq!(
        runs[0].error.as_ref().map(ToString::to_string).as_deref(),
        Some("node failed: boom")
    );
    assert_eq!(runs[1].data, Some(json!([1, "flaky"])));
    assert_eq!(runs[3].data, Some(json!([1, "again"])));
    for run in &runs[..5] {
        let (start, end) = (run.started_at_ms.unwrap(), run.ended_at_ms.unwrap());
        assert_eq!(run.duration_ms, Some(end - start), "{run:?}");
        assert!(run.seq > 0);
    }

    // The snapshot's execution history and errors, in order.
    let view = cairn_tools::Operator::new(&engine).state_at("l", None).await.unwrap();
    let history: Vec<_> =
        view.meta.history.iter().map(|h| (h.step, &*h.task.node, &*h.what)).collect();
    assert_eq!(
        history,
        [
            (1, "flaky", "attempt failed"),
            (1, "flaky", "retry scheduled"),
            (1, "flaky", "completed"),
            (2, "again", "completed"),
            (3, "again", "completed"),
            (4, "done", "completed"),
        ]
    );
    let errors: Vec<_> =
        view.meta.errors.iter().map(|e| (&*e.task.node, e.error.to_string())).collect();
    assert_eq!(errors, [("flaky", "node failed: boom".to_owned())]);
    assert_eq!(view.meta.errors[0].seq, runs[0].seq);
    // The snapshot keeps each node's latest run.
    assert_eq!(view.meta.node_results["flaky"].attempt, 2);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_waiting_node_runs_a_cancel_ends_it_and_a_fork_not_started_has_its_nodes_pending() {
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("asks", 1)
        .node("a", |_s, _ctx| async move { Ok(NodeOutput::update((1, "a".to_owned()))) })
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "ask".to_owned())))
        })
        .edge(START, "a")
        .edge("a", "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("asks", Tally::default(), StartOptions::id("w")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let statuses = async |thread: &str| -> Vec<(String, u64, RunStatus)> {
        let runs = cairn_tools::Operator::new(&engine).node_runs(thread).await.unwrap();
        runs.into_iter().map(|r| (r.task.node.to_string(), r.step, r.status)).collect()
    };
    let waiting = statuses("w").await;
    assert_eq!(
        waiting,
        [("a".into(), 1, RunStatus::Completed), ("ask".into(), 2, RunStatus::Running)]
    );

    // A fork after step 1 that has not started: `ask` is due, in the fork's own step 1.
    let at = cairn_tools::Operator::new(&engine).state_at("w", None).await.unwrap().seq;
    let after_a = cairn_tools::Operator::new(&engine).state_at("w", Some(at)).await.unwrap();
    assert_eq!(after_a.step, 1);
    let _fork = cairn_tools::Operator::new(&engine)
        .fork("w", ForkFrom::Seq(at), ForkOptions::id("f").paused())
        .await
        .unwrap();
    assert_eq!(statuses("f").await, [("ask".into(), 1, RunStatus::Pending)]);

    engine.cancel("w", "no answer").await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Cancelled);
    assert_eq!(
        statuses("w").await,
        [("a".into(), 1, RunStatus::Completed), ("ask".into(), 2, RunStatus::Cancelled)]
    );
    engine.shutdown().await;
}
