//! What an operator of an agent runtime sees: progress with a detail line, and the threads a
//! resume can take on, limited by age.

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::{END, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, engine_on};

fn asking() -> Workflow<Tally> {
    Workflow::<Tally>::builder("asking", 1)
        .node("read", |_s, ctx: Ctx| async move {
            ctx.progress_detail(1, 2, "reading sources", "source 3 of 7: arxiv.org is slow");
            Ok(NodeOutput::update((1, "read".to_owned())))
        })
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "ask".to_owned())))
        })
        .edge(START, "read")
        .edge("read", "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn progress_carries_its_detail_line_into_the_log_and_the_state() {
    let (_d, path) = db();
    let wf = asking();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("asking", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let mut events = t.events(0).unwrap();
    let mut details = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if let Body::Progress { progress, .. } = e.body {
            details.push((progress.message, progress.detail));
        }
    }
    let expected = ("reading sources".to_owned(), Some("source 3 of 7: arxiv.org is slow".into()));
    assert_eq!(details, std::slice::from_ref(&expected));
    let progress = cairn_tools::Operator::new(&engine)
        .state_at("p", None)
        .await
        .unwrap()
        .meta
        .progress
        .unwrap();
    assert_eq!((progress.message, progress.detail), expected);
    engine.shutdown().await;
}

#[tokio::test]
async fn resumable_within_an_age_leaves_out_threads_idle_for_longer() {
    const DAY_MS: u64 = 24 * 60 * 60 * 1_000;
    let (_d, path) = db();
    let wf = asking();
    let clock = ManualClock::new(10 * DAY_MS);
    let engine = engine_on(&path, &[&wf], Some(clock.clone())).await;
    for id in ["old", "new"] {
        let t = engine.start_json("asking", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
        engine.pause(id).await.unwrap();
        // `old` was last touched two days before `new`.
        clock.advance_ms(2 * DAY_MS);
    }
    let ids = |records: Vec<cairn::storage::ThreadRecord>| -> Vec<String> {
        records.into_iter().map(|r| r.id.to_string()).collect()
    };
    assert_eq!(ids(engine.resumable().await.unwrap()), ["new", "old"]);
    assert_eq!(ids(engine.resumable_within(3 * DAY_MS).await.unwrap()), ["new"]);
    assert_eq!(ids(engine.resumable_within(5 * DAY_MS).await.unwrap()), ["new", "old"]);
    assert!(engine.resumable_within(DAY_MS).await.unwrap().is_empty());
    engine.shutdown().await;
}

#[tokio::test]
async fn usage_is_recorded_by_model_and_summed_per_model_in_the_telemetry() {
    use cairn::dsl::Usage;
    let (_d, path) = db();
    let wf = Workflow::<Tally>::builder("models", 1)
        .node("draft", |_s, ctx: Ctx| async move {
            for (model, tokens) in [("small", 10_u64), ("large", 50), ("small", 5)] {
                let _: u64 = ctx
                    .tool(
                        "complete",
                        (model.to_owned(), tokens),
                        |(model, tokens): (String, u64), t: cairn::dsl::ToolCtx| async move {
                            t.report_model_usage(&model, Usage { tokens, cost_micros: tokens });
                            Ok::<_, cairn::ToolError>(tokens)
                        },
                    )
                    .await?;
            }
            Ok(NodeOutput::update((1, "draft".to_owned())))
        })
        .edge(START, "draft")
        .edge("draft", END)
        .build()
        .unwrap();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("models", Tally::default(), StartOptions::id("m")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let mut events = t.events(0).unwrap();
    let mut recorded = Vec::new();
    while let Some(e) = events.try_next().await.unwrap() {
        if let Body::ToolReturned { models, usage, .. } = e.body {
            assert_eq!(models.values().map(|u| u.tokens).sum::<u64>(), usage.tokens);
            recorded.extend(models.into_iter().map(|(m, u)| (m, u.tokens)));
        }
    }
    assert_eq!(recorded, [("small".to_owned(), 10), ("large".into(), 50), ("small".into(), 5)]);
    let telemetry =
        cairn_tools::Operator::new(&engine).state_at("m", None).await.unwrap().meta.telemetry;
    assert_eq!(telemetry.tokens, 65);
    let by_model: Vec<_> = telemetry.by_model.iter().map(|(m, u)| (m.as_str(), u.tokens)).collect();
    assert_eq!(by_model, [("large", 50), ("small", 15)]);
    engine.shutdown().await;
}
