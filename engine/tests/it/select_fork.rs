//! Forks through a select (`ctx.select`): a fork taken after the select decided carries the
//! branch it took (the recorded outcome, never decided again), and a fork taken while the
//! thread waited in the select waits again in the fork, where a signal sent to the fork decides
//! it; each fork's replay agrees with its live run.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Select, Selected, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::Operator;
use cairn_tools::debug::{ForkFrom, ForkOptions};

use crate::common::{Tally, db, open};

const T0: u64 = 1_000_000;

/// `decide`: the first of `approve` and `reject` within a minute, or a timeout; then `finish`
/// waits for a `finish` signal, so that the thread rests after the select decided.
fn review() -> Workflow<Tally> {
    Workflow::<Tally>::builder("review", 1)
        .node("decide", |_s: Arc<Tally>, ctx: Ctx| async move {
            let wait = Select::new().signal("approve").signal("reject").timeout_ms(60_000);
            let took = match ctx.select(wait).await? {
                Selected::Signal { name, value } => format!("{name}={value}"),
                Selected::Child(_) | Selected::Timeout => "timeout".into(),
            };
            Ok(NodeOutput::update((1, took)))
        })
        .node("finish", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("finish").await?;
            Ok(NodeOutput::update((n, "finished".into())))
        })
        .edge(START, "decide")
        .edge("decide", "finish")
        .edge("finish", END)
        .build()
        .unwrap()
}

/// The seq of `thread`'s last event.
async fn last_seq(engine: &Engine, thread: &str) -> u64 {
    let id = cairn::ThreadId::new(thread).unwrap();
    let record = engine.store().thread(&id).await.unwrap().unwrap();
    record.last.map_or(0, |b| b.seq.0)
}

#[tokio::test]
async fn a_fork_through_a_select_keeps_its_branch_or_waits_again_and_replays_as_it_ran() {
    let (_d, path) = db();
    let (wf, clock) = (review(), ManualClock::new(T0));
    let engine = open(&path, &[&wf], |b| b.seed(5).clock(Arc::new(clock.clone()))).await;
    let t = engine.start_json("review", Tally::default(), StartOptions::id("r")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping, "waiting in the select");
    let waiting_at = last_seq(&engine, "r").await;
    engine.signal("r", "approve", 7u64).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput, "in finish");
    let decided_at = last_seq(&engine, "r").await;
    assert!(decided_at > waiting_at);
    let operator = Operator::new(&engine);

    // Forked after the select decided: the branch is the recorded one.
    let after = operator.fork("r", ForkFrom::Seq(decided_at), ForkOptions::id("after")).await;
    let after = after.unwrap();
    assert_eq!(after.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("after", "finish", 10u64).await.unwrap();
    let out: Tally = engine.thread("after").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, vec!["approve=7".to_string(), "finished".into()]);

    // Forked while the thread waited in the select: the fork waits again, and a signal sent
    // to it decides its select (the origin's `approve` was the origin's).
    let before = operator.fork("r", ForkFrom::Seq(waiting_at), ForkOptions::id("before")).await;
    let before = before.unwrap();
    let parked = before.wait().await.unwrap().status;
    assert!(matches!(parked, ThreadStatus::Sleeping | ThreadStatus::WaitingInput), "{parked:?}");
    engine.signal("before", "reject", 3u64).await.unwrap();
    engine.signal("before", "finish", 20u64).await.unwrap();
    let out: Tally = engine.thread("before").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, vec!["reject=3".to_string(), "finished".into()]);

    for fork in ["after", "before"] {
        let report = engine.replay(fork, &ReplayOptions::default()).await.unwrap();
        assert!(report.is_deterministic(), "{fork}: {report:?}");
    }
    engine.shutdown().await;
}
